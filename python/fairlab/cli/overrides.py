"""`--set PATH=VALUE`: change one scenario field from the command line (ns-3's
`--x=y`, Flent's `--test-parameter`), on `run`, `plan` and `reproduce`.

PATH is a dotted scenario path as in a `[sweep]` (`bottleneck.rate`, `flows[1].cca`,
`flows[*].rtt`, `bottleneck.params.target`). VALUE is read as a TOML value when it is
one (`3`, `true`, `["10s", "60s"]`, `"quoted text"`) and as text otherwise (`50Mbit`,
`60s`, `bbr`); text fields always take the text. Units are then parsed by the scenario
schema itself, exactly as in a file. Paths are checked against the schema before
anything runs, and an unknown key is refused with the keys allowed at that point.
"""

from __future__ import annotations

import copy
import re
import tomllib
import types
import typing
from typing import Any

from pydantic import BaseModel

from ..campaign.plan import MAIN, Campaign, set_path
from ..scenario import Scenario
from .common import UsageError

_PART = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)(\[(?P<idx>\*|\d+)\])?$")


def _unwrap_optional(ann: Any) -> Any:
    if typing.get_origin(ann) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(ann) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return ann


def _is_model(ann: Any) -> bool:
    return isinstance(ann, type) and issubclass(ann, BaseModel)


def _field_type(path: str, doc: dict[str, Any], assignment: str) -> Any:
    """The annotation of the field ``path`` names; `UsageError` (one sentence, with
    the allowed keys) when the path does not exist in the schema or the document."""
    ann: Any = Scenario
    here: list[Any] = [doc]  # the document nodes the path has reached so far
    walked: list[str] = []
    for part in path.split("."):
        m = _PART.match(part)
        if not m:
            raise UsageError(f"--set {assignment!r}: {part!r} is not a field name (write e.g. bottleneck.rate=50Mbit or flows[1].cca=bbr)")
        name, idx = m["name"], m["idx"]
        where = ".".join(walked) or "the scenario"
        if ann is dict or typing.get_origin(ann) is dict:
            ann, here = Any, []  # free-form parameter tables: any key, checked by the engine
        elif _is_model(ann):
            fields = ann.model_fields
            if name not in fields:
                raise UsageError(f"--set {assignment!r}: {where} has no field {name!r}; allowed: {', '.join(fields)}")
            ann = _unwrap_optional(fields[name].annotation)
            here = [h.get(name) if isinstance(h, dict) else None for h in here]
        elif ann is not Any:
            raise UsageError(f"--set {assignment!r}: {where} is a single value, not a table, so it has no field {name!r}")
        if idx is not None:
            if typing.get_origin(ann) is not list:
                raise UsageError(f"--set {assignment!r}: {name!r} is not a list, so it cannot be indexed")
            ann = typing.get_args(ann)[0]
            nxt = []
            for h in here:
                if not isinstance(h, list):
                    raise UsageError(f"--set {assignment!r}: the scenario has no list {name!r} to index")
                if idx != "*" and int(idx) >= len(h):
                    raise UsageError(f"--set {assignment!r}: {name} has {len(h)} entries (indices 0–{len(h) - 1}), so index {idx} does not exist")
                nxt.extend(h if idx == "*" else [h[int(idx)]])
            here = nxt
        walked.append(part)
    return ann


def parse_value(text: str, ann: Any) -> Any:
    """VALUE as a TOML value when it is one, else the text; text fields take text."""
    try:
        value = tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text
    if ann is str and not isinstance(value, str):
        return text
    return value


def parse_assignment(assignment: str, doc: dict[str, Any]) -> tuple[str, Any]:
    """'bottleneck.rate=50Mbit' → ('bottleneck.rate', '50Mbit'), checked against the schema."""
    path, sep, text = assignment.partition("=")
    path = path.strip()
    if not sep or not path:
        raise UsageError(f"--set {assignment!r} must be PATH=VALUE, e.g. bottleneck.rate=50Mbit or flows[1].cca=bbr")
    ann = _field_type(path, doc, assignment)
    return path, parse_value(text.strip(), ann)


def apply_overrides(doc: dict[str, Any], assignments: list[str] | None, *, source: str) -> dict[str, Any]:
    """A copy of the campaign/scenario document ``doc`` with every assignment made; the
    result (without its sweep) is validated so a bad value names the --set it came from."""
    if not assignments:
        return doc
    out = copy.deepcopy(doc)
    for a in assignments:
        path, value = parse_assignment(a, out)
        set_path(out, path, value, source=f"--set {a!r}")
    Scenario.from_dict({k: v for k, v in out.items() if k != "sweep"}, source=f"{source} with --set {' '.join(assignments)}")
    return out


def get_path(doc: Any, path: str) -> list[Any]:
    """Every value at ``path`` in ``doc`` (several for `[*]`); a missing step gives
    a `KeyError` sentinel value."""
    nodes = [doc]
    for part in path.split("."):
        m = _PART.match(part)
        assert m is not None  # checked by parse_assignment
        nxt: list[Any] = []
        for n in nodes:
            v = n.get(m["name"], KeyError) if isinstance(n, dict) else KeyError
            if m["idx"] is None:
                nxt.append(v)
            elif isinstance(v, list):
                nxt.extend(v if m["idx"] == "*" else v[int(m["idx"]) : int(m["idx"]) + 1] or [KeyError])
            else:
                nxt.append(KeyError)
        nodes = nxt
    return nodes


def refuse_swept_overrides(campaign: Campaign, assignments: list[str] | None) -> None:
    """An override that a sweep point replaces would not hold in every condition:
    refuse it rather than run conditions the user did not ask for."""
    for a in assignments or []:
        path, value = parse_assignment(a, campaign.base)
        for task in campaign.tasks:
            if task.kind == MAIN and any(v != value for v in get_path(task.scenario, path)):
                raise UsageError(
                    f"--set {a!r}: the [sweep] sets {path} as well (condition {task.label}), so the override would "
                    "not hold there; change the sweep in the file instead"
                )
