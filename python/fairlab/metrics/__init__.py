"""fairlab.metrics - fairness metrics over plain numpy arrays.

A time x flow matrix is a 2-D float array, one row per sample, one column per flow,
NaN where a flow is absent (not yet started / already stopped; absent is not zero).
Metrics never import backends, ingest or trace.  Every result object is a frozen
dataclass with ``to_dict()``; "no value" is None, never NaN or inf.  Definitions,
sources and edge rules: docs/metrics.md.
"""

from __future__ import annotations

from typing import Any

from .._lazy import lazy_names

# Jain, NRU and harm are what every analysis uses: imported now. Their public names
# must be bound here (not lazily): `harm` and `nru` are also submodule names, and
# importing a submodule binds its name on the package, hiding a lazy function.
from .harm import HarmResult, harm, harm_summary
from .jain import (
    JainIndex,
    JainResult,
    JainSeries,
    flow_means,
    jain_index,
    jain_of_means,
    jain_over_time,
    jain_summary,
    mean_jain_over_time,
    normalised_jain,
)
from .nru import (
    FLOOR_DB_DEFAULT,
    S_EPS_DB_DEFAULT,
    U_C_DEFAULT,
    ZERO_TOL_DB_DEFAULT,
    NruFlow,
    NruSystem,
    classify_case,
    convergence_time,
    db_to_rsr,
    format_tuple,
    nru,
    nru_over_time,
    rsr,
    rsr_to_db,
    summarise_nru,
    weights_from_calibration,
    weights_from_expectation,
)

#: Names of the other submodules -> submodule, imported on first use (PEP 562): a run's
#: analysis needs neither the allocation solvers nor the statistics over runs and
#: their dependencies.
_LAZY = {
    "coefficient_of_variation": "allocation",
    "max_min_fair": "allocation",
    "min_max_ratio": "allocation",
    "proportional_fair_allocation": "allocation",
    "proportional_fair_utility": "allocation",
    "RunStats": "stats",
    "run_stats": "stats",
    "t_ppf": "stats",
}


__getattr__, __dir__ = lazy_names(__name__, _LAZY, globals())


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
    "t_ppf",
    "weights_from_calibration",
    "weights_from_expectation",
]
