"""How a sweep point is named in tables, legends and panel titles: every assignment
keeps its full path, so two flows' controls stay two different things
("flows[0].cca=reno, flows[1].cca=cubic", never "cca=reno, cca=cubic")."""

from __future__ import annotations

from typing import Any

from ..campaign.plan import is_grouped_axis


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return str(v).lower()
    return str(v)


#: Paths that name one thing of the whole scenario, read by their name in tables and
#: figures ("RTT 50ms" rather than "flows[*].rtt=50ms"); a path of one flow keeps its
#: index, so two flows' settings never read alike.
_READABLE = {
    "flows[*].rtt": "RTT",
    "flows[*].cca": "every flow",
    "bottleneck.rate": "rate",
    "bottleneck.buffer": "buffer",
    "bottleneck.qdisc": "qdisc",
}


def assignment_text(key: str, value: Any) -> str:
    """One sweep assignment: a grouped value by its label (or, unlabelled, by every
    scalar path=value it sets), a whole-scenario path by its name, any other
    scenario path as path=value."""
    if is_grouped_axis(key):
        if isinstance(value, dict):
            if "label" in value:
                return str(value["label"])
            parts = [f"{p}={_value(x)}" for p, x in value.items() if isinstance(x, (str, int, float))]
            return ", ".join(parts) or key
        return f"{key}={_value(value)}"
    if key in _READABLE:
        return f"{_READABLE[key]} {_value(value)}"
    return f"{key}={_value(value)}"


def condition_label(point: dict[str, Any], *, leave_out: str | tuple[str | None, ...] | None = None) -> str:
    """A sweep point as text, optionally without the axis (or axes) ``leave_out`` (the
    x-axis of a figure, the columns of a table, the axis that splits panels); "all"
    when nothing is left."""
    skip = set(leave_out) if isinstance(leave_out, tuple) else {leave_out}
    parts = [assignment_text(k, v) for k, v in point.items() if k not in skip]
    return "; ".join(parts) if parts else ("base scenario" if not point else "all")
