"""fairlab: how fairly transport flows share a bottleneck, and why.

The public Python API::

    import fairlab
    trace = fairlab.load(["h1.json", "h3.json"])          # iperf3/iperf2/CSV → Trace
    result = fairlab.analyze(trace, window=(60, 300))      # Jain both ways, NRU, harm
    scenario = fairlab.load_scenario("examples/ccid2-vs-cubic-100ms.toml")
    trace = fairlab.simulate(scenario)                    # packet-level simulator
    frames = fairlab.open_campaign("out/bhatti2008-dccp") # campaign catalog as pandas
    results = fairlab.campaign_results("out/bhatti2008-dccp")  # per-condition results
    result.to_pandas()                                     # one row per flow

Everything else lives in the subpackages (`fairlab.metrics`, `fairlab.campaign`, ...).
The classes and functions of `analysis`, `scenario` and `trace` named below are
imported on first use (PEP 562), so `import fairlab` — and every `fairlab` command,
which imports this package first — does not pay for pandas, pyarrow and pydantic
until something needs them.
"""

from __future__ import annotations

__version__ = "0.1.0"

import os  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from typing import TYPE_CHECKING, Any, BinaryIO, TextIO  # noqa: E402
from ._lazy import lazy_names

if TYPE_CHECKING:
    import pandas as pd

    from .analysis import Analysis, AnalysisError, analyze
    from .campaign.aggregate import CampaignResults
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


__getattr__, __dir__ = lazy_names(__name__, _LAZY, globals())


def load(
    paths: str | os.PathLike[str] | BinaryIO | TextIO | Sequence[str | os.PathLike[str] | BinaryIO | TextIO],
    *,
    labels: Sequence[str] | None = None,
    fmt: str = "auto",
    unit: str | None = None,
) -> Trace:
    """Read measurement files into one `Trace`: iperf3 JSON (-J, also --json-stream),
    iperf2 CSV (-y C), plain CSV/Parquet tables, or a fairlab trace file.

    ``labels`` names the flows of each file (one label per file); ``fmt`` forces a
    format instead of sniffing it; ``unit`` gives the throughput unit of a plain table.
    Raises `fairlab.ingest.IngestError` naming the file and field on bad input.

    >>> import fairlab
    >>> trace = fairlab.load("examples/recordings/iperf3_P8_client.json")
    >>> len(trace.flows)
    8
    """
    from .ingest import load as _load

    return _load(paths, labels=labels, fmt=fmt, unit=unit)


def simulate(
    scenario: Scenario | str | os.PathLike[str],
    *,
    seed: int | None = None,
    progress: Callable[[float], bool | None] | None = None,
) -> Trace:
    """Run a `Scenario` (or a path to a scenario TOML/JSON file) in the packet-level
    simulator and return its Trace. ``seed`` overrides the scenario's seed;
    ``progress`` is called with the simulated time in seconds (return False to cancel).

    >>> import fairlab
    >>> trace = fairlab.simulate("examples/ccid2-vs-cubic-100ms.toml", seed=1)  # doctest: +SKIP
    >>> fairlab.analyze(trace, window=(60, 300)).to_pandas()                    # doctest: +SKIP
    """
    from .backends.sim import simulate as _simulate
    from .scenario import Scenario, load_scenario

    if not isinstance(scenario, Scenario):
        scenario = load_scenario(scenario)
    return _simulate(scenario, seed=seed, progress=progress)


def open_campaign(directory: str | os.PathLike[str]) -> dict[str, pd.DataFrame]:
    """A campaign directory's catalog as pandas frames keyed by table name: runs,
    summaries, conditions, samples, flows, bottleneck (join on ``run_key``;
    docs/campaigns.md lists the columns).

    >>> import fairlab
    >>> frames = fairlab.open_campaign("out/bhatti2008-dccp-quick")  # doctest: +SKIP
    >>> frames["runs"].groupby("rtt_ms")["jain_mean_jt"].mean()      # doctest: +SKIP
    """
    from .campaign.store import open_campaign as _open

    return _open(directory)


def campaign_results(directory: str | os.PathLike[str]) -> CampaignResults:
    """Per-condition results of a stored campaign (what `fairlab report` tabulates):
    a list of condition results with ``.to_pandas()`` and a notebook display.

    >>> import fairlab
    >>> results = fairlab.campaign_results("out/bhatti2008-dccp-quick")  # doctest: +SKIP
    >>> results.to_pandas()[["condition_label", "jain_mean_jt", "utilisation"]]  # doctest: +SKIP
    """
    from .campaign.aggregate import aggregate_dir

    return aggregate_dir(directory)


__all__ = [
    "Analysis",
    "AnalysisError",
    "Scenario",
    "ScenarioError",
    "Trace",
    "TraceError",
    "analyze",
    "campaign_results",
    "load",
    "load_scenario",
    "open_campaign",
    "simulate",
]
