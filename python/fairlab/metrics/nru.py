"""The Normalised Resource Usage (NRU) family of seed 000 (Bhatti et al., "Revisiting
inter-flow fairness", Sections III and V-A, Eqs. 3-14, Table II).

    R_n(t) = w_n(t) r_n(t)                      RSR, Eq. 4 (dimensionless)
    U_n(t) = 10 log10 R_n(t)                    NRU in dB, Eq. 3
    U_n    = mean_t U_n(t)                      flow NRU, Eq. 5
    U_S    = <U_N+, U_N-, S_N>                  system NRU tuple, Eqs. 6-8
    S_n    = |sigma_n / U_n|,  S_N = mean S_n   stability, Eqs. 9-10
    T_U    = t_U - t_e, U(t_U) >= U_c           convergence time, Eqs. 11-12
    w_n(t) = 1/Rr_n(t),  w_n = 1/mean(Rr_n)     weights, Eqs. 13-14

fairlab edge rules (decided; see docs/metrics.md):

* A sample whose RSR is <= 0 (zero or negative throughput) would give U = -inf.  R is
  floored at 10^(floor_db/10) (default floor_db = -30 dB), so U_n(t) >= floor_db, and
  every result reports how many samples were floored.
* S_n is undefined ("—", None) when |U_n| < s_eps_db (default 0.01 dB); such flows are
  left out of S_N and counted.  sigma_n is the POPULATION standard deviation (ddof=0)
  of the flow's U_n(t) samples by default - seed 000 does not say; ``ddof`` is a
  parameter.
* NaN (absent flow) samples are excluded from that flow's means.  A flow with no
  sample at all has U_n = None and is left out of the tuple (counted).
* U_N+ averages flows with U_n >= 0 and U_N- flows with U_n < 0 (Eqs. 7-8); an empty
  side is None (rendered "—").
* Case "0" in Table II: U_N+ counts as zero when U_N+ < zero_tol_db (default 0.1 dB,
  i.e. it truncates to 0.0 at 1 dp).  This reproduces every classification the seed
  states, including <0.06, -0.40, 1.93> -> Case C (Table VI, "to 1dp").
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ._common import ResultMixin, as_matrix, as_vector, finite_or_none, fmt_num, row_blocks

#: Default convergence threshold U_c in dB (seed 000 Sec. III-D: -0.46 dB, "equivalent
#: to an RSR value of 0.90"; 10*log10(0.9) = -0.4576 dB).
U_C_DEFAULT = -0.46
#: Default floor for U_n(t) in dB (fairlab rule: R floored at 10^(-30/10) = 0.001).
FLOOR_DB_DEFAULT = -30.0
#: |U_n| below this (dB) makes S_n = |sigma_n/U_n| undefined (fairlab rule).
S_EPS_DB_DEFAULT = 0.01
#: U_N+ below this (dB) counts as "0" in the Table II classification.
ZERO_TOL_DB_DEFAULT = 0.1

_SNAP = 4 * np.finfo(np.float64).eps  # |w*r - 1| below this is rounding: R := 1


def rsr_to_db(r: Any) -> Any:
    """U = 10 log10 R (seed 000 Eq. 3).  Example: RSR 0.9 -> -0.4576 dB; 1 -> 0 dB."""
    return 10.0 * np.log10(r)


def db_to_rsr(u: Any) -> Any:
    """Inverse of Eq. 3: R = 10^(U/10).  Example: -0.46 dB -> RSR 0.8995."""
    return 10.0 ** (np.asarray(u, dtype=np.float64) / 10.0)


def weights_from_calibration(calibration: Any) -> np.ndarray:
    """Per-flow weights w_n = 1 / mean(Rr_n) (seed 000 Eq. 14).

    ``calibration`` is either a 1-D array of each flow's expected (mean) throughput -
    e.g. the mean of the flows of the same protocol in a self-competition calibration
    run, as seed 000 does with Table III - or a 2-D calibration time x flow matrix, in
    which case each column's mean over its present (non-NaN) samples is used.
    Example: expected 45 and 48 Mb/s -> w = (1/45, 1/48) per Mb/s.
    Raises ValueError if an expectation is <= 0 or missing.
    """
    c = np.asarray(calibration, dtype=np.float64)
    if c.ndim == 2:
        present = ~np.isnan(c)
        cnt = present.sum(axis=0)
        if (cnt == 0).any():
            raise ValueError("a calibration flow has no sample")
        mean = np.where(present, c, 0.0).sum(axis=0) / cnt
    else:
        mean = as_vector(c, "calibration", allow_nan=False)
    if not np.all(np.isfinite(mean)) or (mean <= 0).any():
        raise ValueError("expected throughputs must be finite and > 0")
    return 1.0 / mean


def weights_from_expectation(expected: Any) -> np.ndarray:
    """Time-varying weights w_n(t) = 1 / Rr_n(t) (seed 000 Eq. 13).

    ``expected`` is a time x flow matrix of expected throughput; NaN (unknown) stays NaN
    and makes that sample absent.  Raises ValueError on a value <= 0.
    """
    e = as_matrix(expected, "expected")
    if (e <= 0).any():
        raise ValueError("expected throughput must be > 0 (NaN for unknown)")
    return 1.0 / e


def _broadcast(name: str, v: Any, shape: tuple[int, int]) -> np.ndarray:
    a = np.asarray(v, dtype=np.float64)
    if a.ndim == 0:
        a = a.reshape(1)
    if a.ndim == 1:
        if a.shape[0] != shape[1]:
            raise ValueError(f"{name} has {a.shape[0]} values for {shape[1]} flows")
    elif a.shape != shape:
        raise ValueError(f"{name} must have shape ({shape[1]},) or {shape}, got {a.shape}")
    if np.isinf(a).any():
        raise ValueError(f"{name} contains an infinite value")
    return a


def rsr(throughput: Any, weights: Any = None, *, expected: Any = None) -> np.ndarray:
    """Resource Share Ratio R_n(t) = w_n(t) r_n(t) (seed 000 Eq. 4).

    Give exactly one of ``weights`` (w_n per flow, Eq. 14, or a matrix w_n(t), Eq. 13)
    or ``expected`` (Rr_n or Rr_n(t); R = r / Rr).  With ``expected`` a throughput
    equal to its expectation gives R = 1 exactly; with ``weights`` R within 4 ulp of 1
    is snapped to 1 to absorb the rounding of r * (1/Rr).  NaN (absent) stays NaN.
    Returns a plain time x flow array (NaN marks absence, as in the input).
    """
    m = as_matrix(throughput, "throughput")
    if (weights is None) == (expected is None):
        raise ValueError("give exactly one of weights= or expected=")
    if expected is not None:
        e = _broadcast("expected", expected, m.shape)
        if (e <= 0).any():
            raise ValueError("expected throughput must be > 0 (NaN for unknown)")
        return m / e
    w = _broadcast("weights", weights, m.shape)
    if (w <= 0).any():
        raise ValueError("weights must be > 0 (NaN for unknown)")
    r = m * w
    for b in row_blocks(r.shape[0], r.shape[1]):
        rb = r[b]
        with np.errstate(invalid="ignore"):
            np.putmask(rb, np.abs(rb - 1.0) <= _SNAP, 1.0)
    return r


def nru_over_time(
    throughput: Any,
    weights: Any = None,
    *,
    expected: Any = None,
    floor_db: float = FLOOR_DB_DEFAULT,
    return_floored: bool = False,
) -> Any:
    """NRU U_n(t) = 10 log10 R_n(t) in dB for every sample (seed 000 Eqs. 3-4).

    R is floored at 10^(floor_db/10) so a zero/negative throughput gives floor_db
    instead of -inf.  Returns the time x flow U matrix (NaN = absent, as in the input;
    this plain array is not a result object).  With ``return_floored=True`` returns
    ``(U, n_floored_per_flow)``.  Example: r = (50, 45), Rr = (50, 50) ->
    U = (0, -0.4576) dB.
    """
    if not math.isfinite(floor_db):
        raise ValueError("floor_db must be finite")
    r = rsr(throughput, weights, expected=expected)
    floor = 10.0 ** (floor_db / 10.0)
    nfl = np.zeros(r.shape[1], dtype=np.int64)
    for b in row_blocks(r.shape[0], r.shape[1]):  # in place, block by block (cache-sized)
        rb = r[b]
        with np.errstate(invalid="ignore"):
            floored = rb < floor  # NaN compares False: absent is never "floored"
        nfl += floored.sum(axis=0)
        np.putmask(rb, floored, floor)
        np.log10(rb, out=rb)
        rb *= 10.0
    if return_floored:
        return r, nfl
    return r


@dataclass(frozen=True)
class NruFlow(ResultMixin):
    """One flow's NRU summary (seed 000 Eqs. 5 and 9).

    ``u`` = U_n (dB, mean of the present U_n(t)); ``sigma`` = std of U_n(t) (ddof as
    reported by the system); ``stability`` = S_n = |sigma/U_n| or None when
    |U_n| < s_eps_db; ``side`` "+" (U_n >= 0, fair or better), "-" (unfair) or None.
    """

    flow: int
    label: str | None
    u: float | None
    sigma: float | None
    stability: float | None
    n_samples: int
    n_floored: int
    side: str | None


def classify_case(
    u_plus: float | None, u_minus: float | None, *, zero_tol_db: float = ZERO_TOL_DB_DEFAULT
) -> str | None:
    """Table II of seed 000: the Case of a system NRU tuple.

    ========  ========  ====  ====================================
    U_N+      U_N-      Case  comment
    ========  ========  ====  ====================================
    —         -ve       A     all flows unfair
    +ve       -ve       B     some fair or better, some unfair
    0         -ve       C     some fair, some unfair
    +ve       —         D     all flows fair or better
    0         —         E     all flows fair
    ========  ========  ====  ====================================

    "0" means 0 <= U_N+ < zero_tol_db (default 0.1 dB: truncates to 0.0 at 1 dp; this
    matches the seed calling <0.06, -0.40, 1.93> Case C and <0.10, -16.98, 1.57> not).
    Returns None when both sides are empty (no flow had a sample).
    """
    if u_plus is not None and u_plus < 0:
        raise ValueError("U_N+ is a mean of U_n >= 0 and cannot be negative")
    if u_minus is not None and u_minus >= 0:
        raise ValueError("U_N- is a mean of U_n < 0 and must be negative")
    if u_plus is None:
        return "A" if u_minus is not None else None
    zero = u_plus < zero_tol_db
    if u_minus is not None:
        return "C" if zero else "B"
    return "E" if zero else "D"


def format_tuple(
    u_plus: float | None, u_minus: float | None, s_system: float | None, dp: int = 2
) -> str:
    """Render <U_N+, U_N-, S_N> as in seed 000 Table VI: "⟨0.84, −1.29, 6.66⟩",
    "⟨—, −0.27, 1.23⟩" (Unicode minus, em dash for no value)."""
    return "\u27e8" + ", ".join(fmt_num(v, dp) for v in (u_plus, u_minus, s_system)) + "\u27e9"


@dataclass(frozen=True)
class NruSystem(ResultMixin):
    """System NRU summary (seed 000 Eqs. 6-10, Table II) plus optional convergence time.

    ``u_plus``/``u_minus``: U_N+ / U_N- (None for an empty side); ``u_mean``: U_N, the
    mean of all U_n; ``s_system``: S_N (None if no flow had a defined S_n);
    ``case``: Table II letter; ``t_convergence``: system T_U (Eqs. 11-12, all flows at
    once) when ``t_e`` was given, None if never reached or not asked.
    """

    u_plus: float | None
    u_minus: float | None
    u_mean: float | None
    s_system: float | None
    case: str | None
    n_flows: int  # flows with at least one sample
    n_flows_plus: int
    n_flows_minus: int
    n_flows_empty: int  # flows with no sample (left out)
    n_stability_undefined: int  # flows with |U_n| < s_eps_db (left out of S_N)
    n_samples: int  # present samples used
    n_floored: int  # samples whose R was floored
    floor_db: float
    s_eps_db: float
    ddof: int
    zero_tol_db: float
    t_e: float | None
    u_c: float
    k: int
    t_convergence: float | None
    flows: tuple[NruFlow, ...] = field(default=())

    def tuple_str(self, dp: int = 2) -> str:
        """"⟨U_N+, U_N−, S_N⟩" with ``dp`` decimals, "—" for no value (seed 000 Table VI)."""
        return format_tuple(self.u_plus, self.u_minus, self.s_system, dp)

    def plot_tuple(self) -> tuple[float | None, float | None, float | None]:
        """<U_N+, U_N, U_N->, the tuple seed 000 plots in Figs. 4 and 5."""
        return (self.u_plus, self.u_mean, self.u_minus)


def _flow_stats(
    u: np.ndarray, ddof: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-column count, mean and std over present (non-NaN) samples; NaN if undefined."""
    ncol = u.shape[1]
    cnt = np.zeros(ncol, dtype=np.int64)
    tot = np.zeros(ncol)
    blocks = list(row_blocks(u.shape[0], ncol))  # blocked: no full-size temporary
    for b in blocks:
        pres = ~np.isnan(u[b])
        cnt += pres.sum(axis=0)
        tot += np.where(pres, u[b], 0.0).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = tot / cnt
    # second pass: sum of squared deviations (accurate when sigma << |mean|)
    sq = np.zeros(ncol)
    for b in blocks:
        ub = u[b]
        d = np.where(np.isnan(ub), 0.0, ub - mean)
        sq += np.einsum("ij,ij->j", d, d)
    with np.errstate(invalid="ignore", divide="ignore"):
        var = sq / (cnt - ddof)
    var = np.where(cnt - ddof > 0, var, np.nan)
    return cnt, mean, np.sqrt(var)


def summarise_nru(
    u: Any,
    *,
    n_floored: Any = None,
    s_eps_db: float = S_EPS_DB_DEFAULT,
    ddof: int = 0,
    zero_tol_db: float = ZERO_TOL_DB_DEFAULT,
    floor_db: float = FLOOR_DB_DEFAULT,
    labels: Sequence[str] | None = None,
    times: Any = None,
    t_e: float | None = None,
    u_c: float = U_C_DEFAULT,
    k: int = 1,
) -> NruSystem:
    """Flow NRUs, stabilities, the system tuple and Case from a U_n(t) matrix in dB
    (seed 000 Eqs. 5-10, Table II; T_U by Eqs. 11-12 when ``t_e`` is given).

    ``u`` is time x flow, NaN = absent.  See module docstring for the edge rules.
    Example: one flow with U(t) = (-1, -3) dB -> U_n = -2, sigma = 1 (ddof=0),
    S_n = 0.5; tuple "⟨—, −2.00, 0.50⟩", Case A.
    """
    um = as_matrix(u, "u")
    n_flows_total = um.shape[1]
    if labels is not None and len(labels) != n_flows_total:
        raise ValueError("labels must have one entry per flow")
    cnt, mean, sd = _flow_stats(um, ddof)
    has = cnt > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        stab = np.abs(sd / mean)
    stab_ok = has & (np.abs(mean) >= s_eps_db) & np.isfinite(stab)
    plus = has & (mean >= 0)
    minus = has & (mean < 0)
    nfl = np.zeros(n_flows_total, dtype=np.int64) if n_floored is None else np.asarray(n_floored)

    def _mean(sel: np.ndarray, v: np.ndarray) -> float | None:
        return finite_or_none(v[sel].mean()) if sel.any() else None

    u_plus = _mean(plus, mean)
    u_minus = _mean(minus, mean)
    flows = tuple(
        NruFlow(
            flow=i,
            label=None if labels is None else str(labels[i]),
            u=finite_or_none(mean[i]) if has[i] else None,
            sigma=finite_or_none(sd[i]) if has[i] else None,
            stability=finite_or_none(stab[i]) if stab_ok[i] else None,
            n_samples=int(cnt[i]),
            n_floored=int(nfl[i]),
            side="+" if plus[i] else ("-" if minus[i] else None),
        )
        for i in range(n_flows_total)
    )
    t_conv = None
    if t_e is not None:
        t_conv = convergence_time(um, times=times, t_e=t_e, u_c=u_c, k=k)
    return NruSystem(
        u_plus=u_plus,
        u_minus=u_minus,
        u_mean=_mean(has, mean),
        s_system=_mean(stab_ok, stab),
        case=classify_case(u_plus, u_minus, zero_tol_db=zero_tol_db),
        n_flows=int(has.sum()),
        n_flows_plus=int(plus.sum()),
        n_flows_minus=int(minus.sum()),
        n_flows_empty=int((~has).sum()),
        n_stability_undefined=int((has & ~stab_ok).sum()),
        n_samples=int(cnt.sum()),
        n_floored=int(nfl.sum()),
        floor_db=float(floor_db),
        s_eps_db=float(s_eps_db),
        ddof=int(ddof),
        zero_tol_db=float(zero_tol_db),
        t_e=None if t_e is None else float(t_e),
        u_c=float(u_c),
        k=int(k),
        t_convergence=t_conv,
        flows=flows,
    )


def nru(
    throughput: Any,
    weights: Any = None,
    *,
    expected: Any = None,
    floor_db: float = FLOOR_DB_DEFAULT,
    s_eps_db: float = S_EPS_DB_DEFAULT,
    ddof: int = 0,
    zero_tol_db: float = ZERO_TOL_DB_DEFAULT,
    labels: Sequence[str] | None = None,
    times: Any = None,
    t_e: float | None = None,
    u_c: float = U_C_DEFAULT,
    k: int = 1,
) -> NruSystem:
    """The whole NRU analysis of a throughput matrix (seed 000 Eqs. 3-14, Table II).

    U_n(t) = 10 log10(w_n(t) r_n(t)) floored at floor_db; then U_n, sigma_n, S_n,
    <U_N+, U_N-, S_N>, U_N, the Case, and (if ``t_e`` is given) the system convergence
    time T_U: the first sample t >= t_e at which every flow has U_n(t) >= u_c, held for
    ``k`` consecutive samples, minus t_e.  Give ``weights`` (w_n, w_n(t)) or
    ``expected`` (Rr_n, Rr_n(t)).  ``times`` are the row times (default: row index).
    Example: r = [[45, 50]], expected = [50, 50] -> U = (-0.4576, 0) dB ->
    tuple "⟨0.00, −0.46, 0.00⟩" (S_n of the 0 dB flow is undefined and left out; the
    other flow has sigma 0), Case C.
    """
    u, nfl = nru_over_time(
        throughput, weights, expected=expected, floor_db=floor_db, return_floored=True
    )
    return summarise_nru(
        u,
        n_floored=nfl,
        s_eps_db=s_eps_db,
        ddof=ddof,
        zero_tol_db=zero_tol_db,
        floor_db=floor_db,
        labels=labels,
        times=times,
        t_e=t_e,
        u_c=u_c,
        k=k,
    )


def convergence_time(
    u: Any,
    *,
    times: Any = None,
    t_e: float = 0.0,
    u_c: float = U_C_DEFAULT,
    flows: int | Sequence[int] | None = None,
    k: int = 1,
) -> float | None:
    """Convergence time to fairness T_U = t_U - t_e (seed 000 Eqs. 11-12).

    t_U is the first sample time t >= t_e at which U_m(t) >= u_c holds for every flow m
    of the chosen set - one flow (``flows=n``: flow convergence time), a subset
    (``flows=[...]``: inter-flow convergence time) or all flows (``flows=None``: system
    convergence time) - and keeps holding for ``k`` consecutive samples (k=1 is the
    seed's definition; t_U is the first sample of the run).  An absent (NaN) sample
    does not satisfy the condition.  ``u`` is the U_n(t) matrix in dB; ``times`` the
    row times (default 0, 1, 2, ... i.e. T_U in samples).  Returns None when the
    condition is never reached.  Default u_c = -0.46 dB (RSR 0.90).
    Example: one flow U(t) = (-3, -1, -0.2, -2, -0.1, 0), t = 0..5, t_e = 1 ->
    T_U = 1 (t = 2); with k = 2 -> T_U = 3 (t = 4).
    """
    um = as_matrix(u, "u")
    if k < 1:
        raise ValueError("k must be >= 1")
    nrow = um.shape[0]
    t = np.arange(nrow, dtype=np.float64) if times is None else as_vector(times, "times", allow_nan=False)
    if t.shape[0] != nrow:
        raise ValueError(f"times has {t.shape[0]} entries for {nrow} rows")
    if flows is not None:
        idx = np.atleast_1d(np.asarray(flows, dtype=np.intp))
        if idx.size == 0:
            raise ValueError("flows is empty")
        um = um[:, idx]
    start = int(np.searchsorted(t, t_e, side="left")) if np.all(np.diff(t) >= 0) else None
    if start is None:
        raise ValueError("times must be non-decreasing")
    with np.errstate(invalid="ignore"):
        ok = (um[start:] >= u_c).all(axis=1)  # NaN >= u_c is False
    if k == 1:
        hits = np.flatnonzero(ok)
    else:
        cs = np.concatenate(([0], np.cumsum(ok, dtype=np.int64)))
        hits = np.flatnonzero(cs[k:] - cs[:-k] == k)
    if hits.size == 0:
        return None
    return float(t[start + hits[0]] - t_e)
