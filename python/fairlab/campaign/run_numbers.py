"""One run's own numbers, as `aggregate` reduces them over a condition's runs.

Why not always `analyze` the run's trace again (issue 15 item 5): the worker that made
the run already analysed it over the scenario's window and stored the result in
run.json (``summary``, `Analysis.to_dict`). When a condition needs nothing more —
no NRU weights from calibration runs, no harm against solo runs — the stored summary
IS the analysis `aggregate` would do, and reading it costs nothing next to parsing the
trace and analysing it again. Only NRU and harm, whose inputs are known after all the
campaign's runs are in, need the trace.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..analysis import JSON_SCHEMA_VERSION, Analysis
from ..metrics.harm import HarmResult
from ..metrics.nru import NruSystem


@dataclass(frozen=True)
class RunNumbers:
    """What `aggregate` takes from one run's analysis."""

    jain_mean_jt: float | None
    jain_of_means: float | None
    #: per flow (flow-table order), None for a flow without a sample in the window
    flow_means: tuple[float | None, ...]
    expected_bps: tuple[float, ...] | None = None
    nru: NruSystem | None = None
    harm: HarmResult | None = None

    @classmethod
    def of(cls, a: Analysis) -> RunNumbers:
        return cls(a.jain.mean_jt, a.jain.of_means, tuple(f.mean_bps for f in a.flows), a.expected_bps, a.nru, a.harm)


def from_summary(summary: dict[str, Any] | None, window: tuple[float, float] | None) -> RunNumbers | None:
    """The numbers of a run's stored summary, or None when it cannot stand for
    ``analyze(trace, window=window)`` without calibration or baselines: absent,
    another schema, or made over another window than the scenario's (an explicit
    window is compared; without one both took the trace's own extent).

    The summary was computed by the fairlab version in the run's content address, on
    the same samples (Parquet stores float64 exactly; JSON keeps every float's repr),
    so its values are those a fresh analysis gives, bit for bit."""
    if not summary or summary.get("schema") != JSON_SCHEMA_VERSION:
        return None
    jain, flows = summary.get("jain"), summary.get("flows")
    if not isinstance(jain, dict) or not isinstance(flows, list):
        return None
    if window is not None and summary.get("window") != [window[0], window[1]]:
        return None
    return RunNumbers(jain.get("mean_jt"), jain.get("of_means"), tuple(f.get("mean_bps") for f in flows))
