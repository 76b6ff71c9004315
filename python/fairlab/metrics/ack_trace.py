"""Per-flow figures of a per-ACK trace (`backends/ack_trace.py` columns): the
quantities that decide a pair's long-run shares and that a simulator controller
must reproduce to agree with the kernel (docs/validation/vm.md traced the grid's
differences to them): where slow start ended, the first ssthresh, how many window
reductions followed, and the window the flow kept.

A reduction is counted where the window falls below three quarters of its largest
value over the preceding round trip (drops less than a round trip apart are one
episode). Linux reduces by PRR (RFC 6937) over a round trip, so a loss episode
shows as one step of at least its β (½ for Reno, 0.3 for CUBIC) spread over the
ACKs of one RTT; a quarter within one RTT separates those from the ±1-segment
noise of congestion avoidance. Controllers with a gentler decrease (Illinois down
to β = 1/8, H-TCP's adaptive β) can hide a reduction from this count; the first
ssthresh and the mean window still tell them apart.

How a sender releases new data between ACKs is read from `snd_nxt` (the
acknowledged bytes plus the outstanding ones) at consecutive ACKs of a flow: a
Linux sender holds data back until the window takes a whole GSO packet
(`tcp_tso_should_defer`), so about half its ACKs in congestion avoidance release
nothing and the rest a packet of ~1 ms of its rate, where a sender without
deferral releases what each ACK frees (docs/tcp-model.md, "How the kernel's
senders release segments"). Retransmissions do not move `snd_nxt` and are not
counted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, asdict
from typing import Any

import numpy as np

REQUIRED = ("t", "flow", "cwnd_segments", "current_ssthresh_segments", "srtt_s", "acked_bytes")


class AckTraceError(ValueError):
    """A frame that is not a per-ACK trace."""


@dataclass(frozen=True)
class FlowAckSummary:
    flow: int
    acks: int
    #: When slow start ended: the first ACK that finds ssthresh set (by a loss, or
    #: by a delay-based exit such as CUBIC's HyStart), s; None if it never ended.
    slow_start_end_s: float | None
    #: Largest window before that, segments: where slow start ended.
    slow_start_peak_segments: int
    #: The first ssthresh the trace shows, segments.
    first_ssthresh_segments: float | None
    #: Window reductions over the whole trace (see the module docstring).
    reductions: int
    #: Time-weighted mean window over ``window`` (or the whole trace), segments.
    mean_cwnd_segments: float
    #: Bytes acknowledged over ``window`` (or the whole trace).
    acked_bytes: int
    #: Over ``window``: the share of ACKs after which the flow sent no new data
    #: before its next ACK, and the mean of the releases that were not empty,
    #: bytes; None when the trace has no `outstanding_bytes` or no ACK pair.
    silent_ack_share: float | None = None
    mean_release_bytes: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def summarize(columns: Mapping[str, Any], window: tuple[float, float] | None = None) -> list[FlowAckSummary]:
    """One summary per flow of a per-ACK trace, in flow order. ``columns`` maps each
    column name to its values (a pandas DataFrame does, or a dict of arrays)."""
    missing = [c for c in REQUIRED if c not in columns]
    if missing:
        raise AckTraceError(f"not a per-ACK trace: column(s) {', '.join(missing)} missing; "
                            f"a trace has {', '.join(REQUIRED)}")
    names = REQUIRED + (("outstanding_bytes",) if "outstanding_bytes" in columns else ())
    col = {c: np.asarray(columns[c]) for c in names}
    order = np.lexsort((col["t"], col["flow"]))
    col = {c: v[order] for c, v in col.items()}
    flows, starts = np.unique(col["flow"], return_index=True)
    ends = np.append(starts[1:], len(col["flow"]))
    out = []
    for flow, a, b in zip(flows, starts, ends):
        t = col["t"][a:b].astype(float)
        cwnd = col["cwnd_segments"][a:b].astype(float)
        ss = col["current_ssthresh_segments"][a:b].astype(float)
        srtt = col["srtt_s"][a:b].astype(float)
        acked = col["acked_bytes"][a:b].astype(np.int64)
        has_ss = np.flatnonzero(~np.isnan(ss))
        first = int(has_ss[0]) if len(has_ss) else None
        peak = int(cwnd[: first if first is not None else len(cwnd)].max()) if len(cwnd) else 0
        lo, hi = window if window is not None else (t[0], t[-1])
        inside = (t >= lo) & (t <= hi)
        silent, release = (None, None) if "outstanding_bytes" not in col else _releases(
            t, acked, col["outstanding_bytes"][a:b].astype(np.int64), lo, hi)
        out.append(FlowAckSummary(
            flow=int(flow),
            acks=int(b - a),
            slow_start_end_s=None if first is None else float(t[first]),
            slow_start_peak_segments=peak,
            first_ssthresh_segments=None if first is None else float(ss[first]),
            reductions=_reductions(t, cwnd, srtt),
            mean_cwnd_segments=_time_mean(t, cwnd, lo, hi),
            acked_bytes=int(acked[inside].max() - acked[inside].min()) if inside.any() else 0,
            silent_ack_share=silent,
            mean_release_bytes=release,
        ))
    return out


def _releases(t: np.ndarray, acked: np.ndarray, outstanding: np.ndarray,
              lo: float, hi: float) -> tuple[float | None, float | None]:
    """New bytes sent after each ACK in [lo, hi] before the flow's next ACK: the
    share of ACKs with none, and the mean of the non-empty releases."""
    nxt = acked + outstanding
    sent = np.diff(nxt)
    sent = sent[(t[:-1] >= lo) & (t[:-1] <= hi)]
    if len(sent) == 0:
        return None, None
    released = sent[sent > 0]
    return float(np.mean(sent <= 0)), (float(released.mean()) if len(released) else None)


def _window_max(t: np.ndarray, y: np.ndarray, span: float) -> np.ndarray:
    """For each i, the largest y[j] over the rows j ≤ i with t[j] ≥ t[i] − span (t
    sorted): range maxima from a sparse table, O(n log n) without a Python loop."""
    n = len(y)
    lo = np.searchsorted(t, t - span, side="left")
    table = [y]
    k = 1
    while 2 * k <= n:
        prev = table[-1]
        table.append(np.maximum(prev[: len(prev) - k], prev[k:]))
        k *= 2
    length = np.arange(n) - lo + 1
    level = np.floor(np.log2(length)).astype(int)
    out = np.empty(n)
    for lv in np.unique(level):
        idx = np.flatnonzero(level == lv)
        w = 1 << lv
        out[idx] = np.maximum(table[lv][lo[idx]], table[lv][idx - w + 1])
    return out


def _reductions(t: np.ndarray, cwnd: np.ndarray, srtt: np.ndarray) -> int:
    """Episodes in which the window fell below ¾ of its largest value over the
    preceding round trip (the flow's median sRTT) or of the previous ACK's; drops
    less than one round trip apart are one episode."""
    if len(t) < 2:
        return 0
    rtt = float(np.nanmedian(srtt[srtt > 0])) if (srtt > 0).any() else 0.0
    rtt = max(rtt, 1e-3)
    top = _window_max(t, cwnd, rtt)
    # ACKs more than a round trip apart (an idle or a sparse trace): compare with
    # the previous one too.
    top = np.maximum(top, np.concatenate(([cwnd[0]], cwnd[:-1])))
    drops = t[cwnd < 0.75 * top]
    if len(drops) == 0:
        return 0
    # A new episode starts more than one round trip after the previous drop.
    return 1 + int((np.diff(drops) > rtt).sum())


def _time_mean(t: np.ndarray, y: np.ndarray, lo: float, hi: float) -> float:
    """Mean of a step function (each value holds until the next ACK) over [lo, hi]."""
    if len(t) == 0 or hi <= lo:
        return float("nan")
    edges = np.clip(np.append(t, hi), lo, hi)
    dt = np.diff(edges)
    total = dt.sum()
    if total <= 0:
        return float(y[max(np.searchsorted(t, lo, side="right") - 1, 0)])
    held = y[dt > 0]
    # A weighted mean lies within its values; clip away the last ulp of rounding.
    return float(np.clip((y * dt).sum() / total, held.min(), held.max()))
