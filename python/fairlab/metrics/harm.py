"""Harm (Ware, Mukerjee, Seshan, Sherry, "Beyond Jain's Fairness Index: Setting the Bar
for the Deployment of Congestion Control Algorithms", HotNets 2019).

Harm measures how much a flow's performance got worse when it competes with another
service (the "with" run) compared with running alone (the "solo" run):

    more-is-better (throughput):     harm = (solo - with) / solo
    less-is-better (latency, loss):  harm = (with - solo) / with

Both lie in [0, 1] when performance got worse (0 = no harm, 1 = starved / infinitely
worse).  When performance got *better* the formula goes negative; fairlab clips at 0
by default (``clip=True``: an improvement is "no harm", matching the paper's framing of
harm as a [0, 1] quantity) and counts such flows in ``n_improved`` so the information
is not lost.  With ``clip=False`` the signed value is reported.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from ._common import ResultMixin, as_vector, finite_or_none

Direction = Literal["more_is_better", "less_is_better"]


def harm(solo: Any, with_: Any, *, direction: Direction = "more_is_better", clip: bool = True) -> np.ndarray:
    """Per-flow harm (Ware et al., HotNets 2019, Sec. "harm").

    more_is_better: h = (solo - with) / solo;  less_is_better: h = (with - solo) / with.
    ``solo`` and ``with_`` are 1-D, one entry per flow (same flow, same metric).
    Values must be >= 0.  Undefined divisions: a zero denominator with an equal
    numerator side (solo == with == 0) is 0 harm; a zero denominator otherwise means
    the flow improved to/from zero and is -inf before clipping - clipped to 0, or NaN
    (undefined) when ``clip=False``.  NaN in input -> NaN out (returned array only;
    :func:`harm_summary` turns them into None).
    Example: throughput solo 100, with 60 -> 0.4; latency solo 20 ms, with 50 ms -> 0.6.
    """
    s = as_vector(solo, "solo")
    w = as_vector(with_, "with_")
    if s.shape != w.shape:
        raise ValueError(f"solo has shape {s.shape}, with_ has {w.shape}")
    if (s < 0).any() or (w < 0).any():
        raise ValueError("harm needs performance values >= 0")
    if direction == "more_is_better":
        num, den = s - w, s
    elif direction == "less_is_better":
        num, den = w - s, w
    else:
        raise ValueError("direction must be 'more_is_better' or 'less_is_better'")
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        h = num / den  # |h| <= 1 unless the flow improved (h -> -inf)
    h = np.where((den == 0) & (num == 0), 0.0, h)
    h = np.where(np.isinf(h), np.nan if not clip else 0.0, h)
    if clip:
        h = np.where(np.isnan(h), h, np.maximum(h, 0.0))
    return h


@dataclass(frozen=True)
class HarmResult(ResultMixin):
    """Per-flow harm and its summaries (Ware et al. 2019).

    ``per_flow`` (None where undefined), ``mean``, ``max`` (the worst case the paper
    argues thresholds should be set against), ``percentile`` at ``q`` (e.g. the 95th,
    a less outlier-driven worst case), ``n_improved`` (flows whose raw harm was < 0).
    """

    direction: str
    clipped: bool
    per_flow: tuple[float | None, ...]
    mean: float | None
    max: float | None
    percentile: float | None
    q: float
    n_flows: int
    n_undefined: int
    n_improved: int


def harm_summary(
    solo: Any,
    with_: Any,
    *,
    direction: Direction = "more_is_better",
    clip: bool = True,
    q: float = 95.0,
) -> HarmResult:
    """Harm per flow plus mean, max and the q-th percentile (linear interpolation)
    (Ware et al., HotNets 2019): h_n = (solo_n - with_n)/solo_n (more is better) or
    (with_n - solo_n)/with_n (less is better); mean_n h_n, max_n h_n, P_q(h).

    Ware et al. argue for judging a new algorithm by the harm it does, especially in the
    worst case; ``max`` is that worst case and ``percentile`` (default 95th) a robust
    alternative.  Example: throughput solo (100, 100), with (60, 120) -> per-flow
    (0.4, 0.0), mean 0.2, max 0.4, n_improved 1.
    """
    if not 0.0 <= q <= 100.0:
        raise ValueError("q must be in [0, 100]")
    h = harm(solo, with_, direction=direction, clip=clip)
    raw = harm(solo, with_, direction=direction, clip=False)
    ok = ~np.isnan(h)
    v = h[ok]
    # an improvement is raw < 0, or an undefined (-inf) improvement to/from zero
    s = as_vector(solo, "solo")
    w = as_vector(with_, "with_")
    with np.errstate(invalid="ignore"):
        improved = int((~(np.isnan(s) | np.isnan(w)) & (np.isnan(raw) | (raw < 0))).sum())
    return HarmResult(
        direction=direction,
        clipped=clip,
        per_flow=tuple(finite_or_none(e) for e in h),
        mean=finite_or_none(v.mean()) if v.size else None,
        max=finite_or_none(v.max()) if v.size else None,
        percentile=finite_or_none(np.percentile(v, q)) if v.size else None,
        q=float(q),
        n_flows=int(h.size),
        n_undefined=int((~ok).sum()),
        n_improved=improved,
    )
