"""Statistics over repeated runs: mean, sample standard deviation and a Student-t
confidence interval (Student 1908), with the t quantile of `scipy.stats.t`.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ._common import ResultMixin, finite_or_none


def t_ppf(p: float, df: float) -> float:
    """Quantile of Student's t: the t with P(T <= t) = p (0 < p < 1, df > 0).

    `scipy.stats.t.ppf` with the domain checked here, so a bad argument is a
    ValueError rather than a silent NaN. Example: t_ppf(0.975, 4) = 2.7764.
    """
    if not 0.0 < p < 1.0:
        raise ValueError("p must be in (0, 1)")
    if df <= 0 or not math.isfinite(df):
        raise ValueError("df must be finite and > 0")
    return _t_quantile(float(p), float(df))


@functools.lru_cache(maxsize=None)
def _t_quantile(p: float, df: float) -> float:
    # `scipy.special.stdtrit` is the function `scipy.stats.t.ppf` evaluates (its
    # `_ppf`, times scale 1 plus loc 0), so the value is the same to the last bit;
    # scipy.stats itself costs a second of CPU to import, at the end of every campaign
    # (catalog and report), for this one function. Imported here: most commands never
    # need a t quantile. Cached: a campaign asks for the same few (p, n - 1) thousands of times.
    from scipy import special

    return float(special.stdtrit(df, p))


@dataclass(frozen=True)
class RunStats(ResultMixin):
    """Summary of one metric over repeated runs.

    ``std`` is the sample standard deviation (ddof=1); ``ci_low``/``ci_high`` the
    two-sided Student-t confidence interval mean +- t_{1-alpha/2, n-1} * std/sqrt(n).
    Fields are None where undefined (std/CI need n >= 2; everything needs n >= 1).
    """

    n: int
    mean: float | None
    std: float | None
    sem: float | None
    ci_low: float | None
    ci_high: float | None
    half_width: float | None
    confidence: float
    t_quantile: float | None
    n_missing: int  # None/NaN inputs left out


def run_stats(values: Any, *, confidence: float = 0.95) -> RunStats:
    """Mean, sample std (ddof=1) and Student-t CI of one metric over repeated runs.

    CI = mean +- t_ppf((1 + confidence)/2, n - 1) * s / sqrt(n)  (Student 1908).
    None and NaN values (e.g. a metric with "no value" in some run) are left out and
    counted in ``n_missing``; +-inf raises.  Example: (1, 2, 3) -> mean 2, s = 1,
    t_{0.975,2} = 4.3027, CI = 2 +- 2.4841.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must be in (0, 1)")
    raw = [np.nan if v is None else v for v in np.asarray(values, dtype=object).reshape(-1)]
    a = np.asarray(raw, dtype=np.float64)
    if np.isinf(a).any():
        raise ValueError("values contain an infinite value")
    keep = ~np.isnan(a)
    a = a[keep]
    n = int(a.size)
    miss = int((~keep).sum())
    if n == 0:
        return RunStats(0, None, None, None, None, None, None, confidence, None, miss)
    mean = float(a[0]) if (a == a[0]).all() else float(a.mean())
    if n == 1:
        return RunStats(1, mean, None, None, None, None, None, confidence, None, miss)
    # identical runs have exactly zero spread (a.mean() of equal values may round)
    sd = 0.0 if (a == a[0]).all() else float(np.sqrt(((a - mean) ** 2).sum() / (n - 1)))
    sem = sd / math.sqrt(n)
    tq = t_ppf(0.5 * (1.0 + confidence), n - 1)
    hw = tq * sem
    return RunStats(
        n=n,
        mean=mean,
        std=sd,
        sem=sem,
        ci_low=finite_or_none(mean - hw),
        ci_high=finite_or_none(mean + hw),
        half_width=finite_or_none(hw),
        confidence=float(confidence),
        t_quantile=tq,
        n_missing=miss,
    )
