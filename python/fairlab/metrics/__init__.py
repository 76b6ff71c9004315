"""fairlab.metrics - fairness metrics over plain numpy arrays.

A time x flow matrix is a 2-D float array, one row per sample, one column per flow,
NaN where a flow is absent (not yet started / already stopped; absent is not zero).
Metrics never import backends, ingest or trace.  Every result object is a frozen
dataclass with ``to_dict()``; "no value" is None, never NaN or inf.  Definitions,
sources and edge rules: docs/metrics.md.
"""

from .allocation import (
    coefficient_of_variation,
    max_min_fair,
    min_max_ratio,
    proportional_fair_allocation,
    proportional_fair_utility,
)
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
from .stats import RunStats, run_stats, t_ppf

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
