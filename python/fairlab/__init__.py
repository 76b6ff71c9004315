"""fairlab: how fairly transport flows share a bottleneck, and why.

The public Python API::

    import fairlab
    trace = fairlab.load(["h1.json", "h3.json"])          # iperf3/iperf2/CSV → Trace
    result = fairlab.analyze(trace, window=(60, 300))      # Jain both ways, NRU, harm
    scenario = fairlab.load_scenario("examples/ccid2-vs-cubic-100ms.toml")
    trace = fairlab.simulate(scenario)                    # packet-level simulator
    frames = fairlab.open_campaign("out/bhatti2008-dccp") # campaign catalog as pandas

Everything else lives in the subpackages (`fairlab.metrics`, `fairlab.campaign`, ...).
The names below are imported on first use (PEP 562), so `import fairlab` — and every
`fairlab` command, which imports this package first — does not pay for pandas, pyarrow
and pydantic until something needs them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs only
    from .analysis import Analysis, AnalysisError, analyze
    from .scenario import Scenario, ScenarioError, load_scenario
    from .trace import Trace, TraceError

#: Public name -> the submodule that defines it.
_LAZY = {
    "Analysis": "analysis",
    "AnalysisError": "analysis",
    "analyze": "analysis",
    "Scenario": "scenario",
    "ScenarioError": "scenario",
    "load_scenario": "scenario",
    "Trace": "trace",
    "TraceError": "trace",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value  # later look-ups skip this function
        return value
    raise AttributeError(f"module 'fairlab' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


def load(paths, **kwargs):  # type: ignore[no-untyped-def]
    """Read measurement files (iperf3 JSON, iperf2 CSV, plain CSV/Parquet) into a Trace;
    see `fairlab.ingest.load`."""
    from .ingest import load as _load

    return _load(paths, **kwargs)


def simulate(scenario, *, seed=None, progress=None):  # type: ignore[no-untyped-def]
    """Run a `Scenario` (or a path to a scenario file) in the simulator → Trace."""
    from .backends.sim import simulate as _simulate
    from .scenario import Scenario, load_scenario

    if not isinstance(scenario, Scenario):
        scenario = load_scenario(scenario)
    return _simulate(scenario, seed=seed, progress=progress)


def open_campaign(directory):  # type: ignore[no-untyped-def]
    """A campaign directory's catalog as pandas frames (runs, flows, samples,
    bottleneck, summaries)."""
    from .campaign.store import open_campaign as _open

    return _open(directory)


__all__ = [
    "Analysis",
    "AnalysisError",
    "Scenario",
    "ScenarioError",
    "Trace",
    "TraceError",
    "analyze",
    "load",
    "load_scenario",
    "open_campaign",
    "simulate",
]
