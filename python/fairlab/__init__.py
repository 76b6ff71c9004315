"""fairlab: how fairly transport flows share a bottleneck, and why.

The public Python API::

    import fairlab
    trace = fairlab.load(["h1.json", "h3.json"])          # iperf3/iperf2/CSV → Trace
    result = fairlab.analyze(trace, window=(60, 300))      # Jain both ways, NRU, harm
    scenario = fairlab.load_scenario("examples/ccid2-vs-cubic-100ms.toml")
    trace = fairlab.simulate(scenario)                    # packet-level simulator
    frames = fairlab.open_campaign("out/bhatti2008-dccp") # campaign catalog as pandas

Everything else lives in the subpackages (`fairlab.metrics`, `fairlab.campaign`, ...).
"""

__version__ = "0.1.0"

from .analysis import Analysis, AnalysisError, analyze  # noqa: E402
from .scenario import Scenario, ScenarioError, load_scenario  # noqa: E402
from .trace import Trace, TraceError  # noqa: E402


def load(paths, **kwargs):  # type: ignore[no-untyped-def]
    """Read measurement files (iperf3 JSON, iperf2 CSV, plain CSV/Parquet) into a Trace;
    see `fairlab.ingest.load`."""
    from .ingest import load as _load

    return _load(paths, **kwargs)


def simulate(scenario, *, seed=None, progress=None):  # type: ignore[no-untyped-def]
    """Run a `Scenario` (or a path to a scenario file) in the simulator → Trace."""
    from .backends.sim import simulate as _simulate

    if not isinstance(scenario, Scenario):
        scenario = load_scenario(scenario)
    return _simulate(scenario, seed=seed, progress=progress)


def open_campaign(directory):  # type: ignore[no-untyped-def]
    """A campaign directory's catalog as pandas frames (runs, summaries, conditions,
    samples, flows, bottleneck; docs/campaigns.md lists the columns)."""
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
