"""Per-flow figures of a bottleneck queue trace (`backends/queue_trace.py` columns):
who lost packets in the queue's overflows, and how the flows' packets reached it.
These are the quantities the validation grid's remaining differences come down to
(docs/queue-trace.md): a drop-tail queue's share of the capacity follows from which
flows an overflow hits, and that follows from how finely the flows' packets
interleave and how bursty each flow is.

- An **overflow episode** is a run of drops (of any flow) with gaps shorter than
  ``episode_gap_s``; a flow is *hit* by an episode when it loses a packet in it.
  With the longest base RTT as the gap, the drops one congestion signal causes (the
  senders learn of it a round trip later) fall into one episode. A flow is
  *present* in an episode when one of its packets arrives between the episode's
  first and last drop: a flow that is never there cannot be hit, however the queue
  treats the packets it does send (docs/queue-trace.md, "Which episodes reach Reno").
- A **run** is a maximal sequence of consecutive arrivals of one flow: how long a
  flow has the queue's tail to itself.
- A **burst** is a sequence of one flow's arrivals closer than ``burst_gap_s``
  (back-to-back from its host; a third of the bottleneck's time for a full frame
  separates those from ACK-clocked arrivals).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

REQUIRED = ("t", "flow", "event")
#: The trace's `event` values, in the order of the engine's `QueueEvent` codes.
EVENTS = ("queued", "dropped", "marked", "dropped_from_queue", "lost", "marked_leaving")
#: The events that are a packet's arrival (one per packet).
ARRIVALS = ("queued", "dropped", "marked", "lost")
#: The events that took a packet out of the network.
DROPS = ("dropped", "dropped_from_queue", "lost")


class QueueTraceError(ValueError):
    """A frame that is not a queue trace."""


@dataclass(frozen=True)
class FlowQueueSummary:
    flow: int
    #: Packets that reached the bottleneck (one arrival row each).
    packets: int
    #: Packets the bottleneck dropped (on arrival, from the queue, random loss).
    drops: int
    #: CE marks the bottleneck set on this flow's packets.
    marks: int
    #: Overflow episodes in which this flow lost a packet, and all episodes.
    episodes_hit: int
    episodes: int
    #: Overflow episodes during whose drops (first to last) this flow had a packet arrive.
    episodes_present: int
    #: Mean drops of this flow in an episode that hit it; None if none did.
    drops_per_hit: float | None
    #: Median length of this flow's runs of consecutive arrivals, packets.
    median_run: float | None
    #: Mean size of this flow's bursts, packets.
    mean_burst: float | None

    @property
    def drop_rate(self) -> float | None:
        return self.drops / self.packets if self.packets else None

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "drop_rate": self.drop_rate}


def gaps_for(resolved: dict) -> dict[str, float]:
    """The episode and burst gaps for a resolved scenario (``Scenario.resolve()``):
    the longest base RTT, and a third of the bottleneck's time for a full frame."""
    flows = resolved["flows"]
    frame_bits = 8 * (max(int(f["mss"]) for f in flows) + 66)
    return {"episode_gap_s": max(int(f["rtt_ns"]) for f in flows) / 1e9,
            "burst_gap_s": frame_bits / resolved["bottleneck"]["rate_bps"] / 3}


def summarize(columns: Mapping[str, Any], *, episode_gap_s: float, burst_gap_s: float,
              window: tuple[float, float] | None = None) -> list[FlowQueueSummary]:
    """One summary per flow of a queue trace, in flow order, over ``window`` (s) when
    given. ``columns`` maps each column name to its values (a pandas DataFrame does,
    or a dict of arrays); `gaps_for` gives the gaps a scenario's summary should use."""
    missing = [c for c in REQUIRED if c not in columns]
    if missing:
        raise QueueTraceError(f"not a queue trace: column(s) {', '.join(missing)} missing; a trace has "
                              f"{', '.join(REQUIRED)}")
    t = np.asarray(columns["t"], dtype=float)
    flows = np.asarray(columns["flow"])
    ev = np.asarray(columns["event"]).astype(str)
    if window is not None:
        keep = (t >= window[0]) & (t < window[1])
        t, flows, ev = t[keep], flows[keep], ev[keep]

    dropped = np.isin(ev, DROPS)
    dt, df = t[dropped], flows[dropped]
    episode = np.cumsum(np.r_[True, np.diff(dt) >= episode_gap_s]) if len(dt) else np.zeros(0, int)
    n_episodes = int(episode[-1]) if len(episode) else 0
    # Each episode's span, from its first drop to its last (drop times are sorted).
    first = np.r_[True, episode[1:] != episode[:-1]] if len(dt) else np.zeros(0, bool)
    last = np.r_[episode[1:] != episode[:-1], True] if len(dt) else np.zeros(0, bool)
    span_start, span_end = dt[first], dt[last]

    arriving = np.isin(ev, ARRIVALS)
    af, at = flows[arriving], t[arriving]
    run_start = np.r_[True, af[1:] != af[:-1]] if len(af) else np.zeros(0, bool)
    run_id = np.cumsum(run_start)
    run_len = np.bincount(run_id)[1:] if len(af) else np.zeros(0, int)
    run_flow = af[run_start]

    out = []
    for f in sorted(set(flows.tolist())):
        mine = af == f
        hits = episode[df == f]
        per_episode = np.bincount(hits)[1:] if len(hits) else np.zeros(0, int)
        per_episode = per_episode[per_episode > 0]
        ft = at[mine]
        present = np.searchsorted(ft, span_start, "left") < np.searchsorted(ft, span_end, "right")
        bursts = np.cumsum(np.r_[True, np.diff(ft) >= burst_gap_s]) if len(ft) else np.zeros(0, int)
        burst_sizes = np.bincount(bursts)[1:] if len(ft) else np.zeros(0, int)
        runs = run_len[run_flow == f]
        out.append(FlowQueueSummary(
            flow=int(f),
            packets=int(mine.sum()),
            drops=int((df == f).sum()),
            marks=int(((flows == f) & np.isin(ev, ("marked", "marked_leaving"))).sum()),
            episodes_hit=int(len(per_episode)),
            episodes=n_episodes,
            episodes_present=int(present.sum()),
            drops_per_hit=float(per_episode.mean()) if len(per_episode) else None,
            median_run=float(np.median(runs)) if len(runs) else None,
            mean_burst=float(burst_sizes.mean()) if len(burst_sizes) else None,
        ))
    return out
