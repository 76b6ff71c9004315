"""Reference allocations and dispersion measures for one bottleneck.

* Max-min fair (optionally weighted) allocation by water-filling - seed 000 Sec. II-B
  ("max-min fairness [11]", Jaffe 1981; Bertsekas & Gallager, Data Networks, 6.5.2).
* Proportional-fair utility sum_n w_n log x_n - seed 000 Sec. II-B (Kelly et al. [12]).
* min/max ratio and coefficient of variation (Jain, Chiu & Hawe 1984; seed 000 Sec. VII
  uses the CV for stability).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ._common import as_vector


def _demands_weights(demands: Any, weights: Any, n: int | None) -> tuple[np.ndarray, np.ndarray]:
    if demands is None:
        if n is None and weights is not None:
            n = int(np.size(weights))
        if n is None:
            raise ValueError("give demands, weights or n_flows")
        d = np.full(n, np.inf)
    else:
        d = np.asarray(demands, dtype=np.float64).reshape(-1)
        if np.isnan(d).any() or (d < 0).any():
            raise ValueError("demands must be >= 0 (np.inf for 'as much as it can get')")
    if weights is None:
        w = np.ones_like(d)
    else:
        w = as_vector(weights, "weights", allow_nan=False)
        if w.shape != d.shape:
            raise ValueError(f"weights has shape {w.shape}, demands {d.shape}")
        if (w <= 0).any():
            raise ValueError("weights must be > 0")
    return d, w


def max_min_fair(
    capacity: float, demands: Any = None, weights: Any = None, *, n_flows: int | None = None
) -> np.ndarray:
    """(Weighted) max-min fair allocation of one link by water-filling.

    x_n = min(d_n, lambda * w_n), with the water level lambda chosen so that
    sum_n x_n = C when sum_n d_n > C (else x = d: every demand is met).  With unit
    weights this is max-min fairness (seed 000 Sec. II-B, ref. [11]); with weights it
    is weighted max-min.  Source: Bertsekas & Gallager, "Data Networks", Sec. 6.5.2
    (progressive filling).  ``demands`` may contain ``np.inf`` (a greedy flow); None
    means every flow is greedy (give ``n_flows``).  Vectorised: sort by d_n/w_n,
    cumulative sums, first level below the next demand - O(N log N), no loop.
    Example: C = 10, d = (2, 2.6, 4, 5) -> (2, 2.6, 2.7, 2.7).
    """
    if not math.isfinite(capacity) or capacity < 0:
        raise ValueError("capacity must be finite and >= 0")
    d, w = _demands_weights(demands, weights, n_flows)
    if d.size == 0:
        return d.copy()
    if np.all(np.isfinite(d)) and d.sum() <= capacity:
        return d.copy()
    ratio = d / w
    order = np.argsort(ratio, kind="stable")
    ds, ws, rs = d[order], w[order], ratio[order]
    # k flows (the k smallest d/w) satisfied; the rest share C - D_k in proportion to w
    d_before = np.concatenate(([0.0], np.cumsum(ds)[:-1]))
    w_after = np.cumsum(ws[::-1])[::-1]
    with np.errstate(invalid="ignore"):
        level = (capacity - d_before) / w_after
        k = int(np.argmax(level < rs))  # exists because sum(d) > C
    lam = max(level[k], 0.0)
    return np.minimum(d, lam * w)


def proportional_fair_allocation(
    capacity: float, demands: Any = None, weights: Any = None, *, n_flows: int | None = None
) -> np.ndarray:
    """Proportional-fair allocation of ONE bottleneck: argmax sum_n w_n log x_n subject
    to sum x_n <= C, 0 <= x_n <= d_n (Kelly et al. 1998, seed 000 ref. [12]).

    The KKT conditions give x_n = min(d_n, w_n / mu): exactly the weighted max-min
    water-filling allocation, so on a single bottleneck proportional fairness and
    (weighted) max-min fairness coincide; they differ only on multi-link topologies.
    This function therefore returns :func:`max_min_fair`.
    Example: C = 10, d = (2, 2.6, 4, 5) -> (2, 2.6, 2.7, 2.7).
    """
    return max_min_fair(capacity, demands, weights, n_flows=n_flows)


def proportional_fair_utility(x: Any, weights: Any = None) -> float:
    """Proportional-fair utility U = sum_n w_n log x_n (natural log; seed 000 Sec. II-B).

    Units: log of the throughput unit (differences are unit-free).  NaN (absent) flows
    are left out.  A zero allocation gives -inf (returned as ``-math.inf``: infinitely
    bad, not "no value").  Example: x = (1, e) -> 1.0.
    """
    a = as_vector(x, "x")
    w = np.ones_like(a) if weights is None else as_vector(weights, "weights", allow_nan=False)
    if w.shape != a.shape:
        raise ValueError("weights must have one entry per flow")
    keep = ~np.isnan(a)
    a, w = a[keep], w[keep]
    if (a < 0).any():
        raise ValueError("allocations must be >= 0")
    if (a == 0).any():
        return -math.inf
    return float(np.dot(w, np.log(a)))


def min_max_ratio(x: Any) -> float:
    """min_n x_n / max_n x_n over present (non-NaN) flows, in [0, 1] (1 = all equal).

    All-zero -> 1.0 (all equal, as for Jain).  Empty -> ValueError.
    Example: (5, 3, 1) -> 0.2.
    """
    a = as_vector(x, "x")
    a = a[~np.isnan(a)]
    if a.size == 0:
        raise ValueError("min_max_ratio of an empty vector")
    if (a < 0).any():
        raise ValueError("allocations must be >= 0")
    hi = a.max()
    return 1.0 if hi == 0 else float(a.min() / hi)


def coefficient_of_variation(x: Any, *, ddof: int = 0) -> float:
    """CV = sigma / mean over present (non-NaN) values, population sigma (ddof=0) by
    default, so that Jain's index J = 1 / (1 + CV^2) (Jain, Chiu & Hawe 1984).

    All-zero -> 0.0 (all equal).  Mean <= 0 with non-zero spread -> ValueError (a CV is
    meaningless there).  Example: (5, 3, 1) -> sqrt(8/3)/3 = 0.5443.
    """
    a = as_vector(x, "x")
    a = a[~np.isnan(a)]
    if a.size - ddof <= 0:
        raise ValueError("not enough values for the requested ddof")
    m = a.mean()
    sd = float(np.sqrt(((a - m) ** 2).sum() / (a.size - ddof)))
    if m == 0 and sd == 0:
        return 0.0
    if m <= 0:
        raise ValueError("coefficient of variation needs a positive mean")
    return sd / float(m)
