"""fairlab.metrics - fairness metrics over plain numpy arrays.

A time x flow matrix is a 2-D float array, one row per sample, one column per flow,
NaN where a flow is absent (not yet started / already stopped; absent is not zero).
Metrics never import backends, ingest or trace.  Every result object is a frozen
dataclass with ``to_dict()``; "no value" is None, never NaN or inf.  Definitions,
sources and edge rules: docs/metrics.md.
"""

from __future__ import annotations

import importlib
from typing import Any

#: Public name -> the submodule defining it. Imported on first use (PEP 562), so that
#: `fairlab.metrics.jain` (all `fairlab run` needs) does not also load the statistics
#: module and its dependencies.
_LAZY = {
    "coefficient_of_variation": "allocation",
    "max_min_fair": "allocation",
    "min_max_ratio": "allocation",
    "proportional_fair_allocation": "allocation",
    "proportional_fair_utility": "allocation",
    "HarmResult": "harm",
    "harm": "harm",
    "harm_summary": "harm",
    "JainIndex": "jain",
    "JainResult": "jain",
    "JainSeries": "jain",
    "flow_means": "jain",
    "jain_index": "jain",
    "jain_of_means": "jain",
    "jain_over_time": "jain",
    "jain_summary": "jain",
    "mean_jain_over_time": "jain",
    "normalised_jain": "jain",
    "FLOOR_DB_DEFAULT": "nru",
    "NruFlow": "nru",
    "NruSystem": "nru",
    "S_EPS_DB_DEFAULT": "nru",
    "U_C_DEFAULT": "nru",
    "ZERO_TOL_DB_DEFAULT": "nru",
    "classify_case": "nru",
    "convergence_time": "nru",
    "db_to_rsr": "nru",
    "format_tuple": "nru",
    "nru": "nru",
    "nru_over_time": "nru",
    "rsr": "nru",
    "rsr_to_db": "nru",
    "summarise_nru": "nru",
    "weights_from_calibration": "nru",
    "weights_from_expectation": "nru",
    "RunStats": "stats",
    "betainc_reg": "stats",
    "run_stats": "stats",
    "t_cdf": "stats",
    "t_ppf": "stats",
    "t_sf": "stats",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "FLOOR_DB_DEFAULT",
    "S_EPS_DB_DEFAULT",
    "U_C_DEFAULT",
    "ZERO_TOL_DB_DEFAULT",
    "HarmResult",
    "JainIndex",
    "JainResult",
    "JainSeries",
    "NruFlow",
    "NruSystem",
    "RunStats",
    "betainc_reg",
    "classify_case",
    "coefficient_of_variation",
    "convergence_time",
    "db_to_rsr",
    "flow_means",
    "format_tuple",
    "harm",
    "harm_summary",
    "jain_index",
    "jain_of_means",
    "jain_over_time",
    "jain_summary",
    "max_min_fair",
    "mean_jain_over_time",
    "min_max_ratio",
    "normalised_jain",
    "nru",
    "nru_over_time",
    "proportional_fair_allocation",
    "proportional_fair_utility",
    "rsr",
    "rsr_to_db",
    "run_stats",
    "summarise_nru",
    "t_cdf",
    "t_ppf",
    "t_sf",
    "weights_from_calibration",
    "weights_from_expectation",
]
