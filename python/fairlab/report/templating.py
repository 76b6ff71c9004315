"""The Jinja2 environment for every HTML and Markdown fairlab writes (report.html,
report.md, notebook reprs): templates in ``report/templates``, HTML autoescaped."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import jinja2


@lru_cache(maxsize=2)
def environment(markdown: bool = False) -> jinja2.Environment:
    """HTML templates are autoescaped; Markdown ones escape table cells with `md_cell`."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("fairlab.report", "templates"),
        autoescape=not markdown,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["md_cell"] = lambda v: str(v).replace("|", "\\|").replace("\n", " ")
    return env


def render(template: str, **context: Any) -> str:
    """Render ``templates/<template>``; Markdown when its name ends in ``.md.j2``."""
    return environment(template.endswith(".md.j2")).get_template(template).render(**context)
