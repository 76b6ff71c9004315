"""The bottleneck's per-packet trace: one row per packet that reached the bottleneck
queue, in time order, with what happened to it and the backlog it found — who was
queued behind whom, and whose packets an overflow dropped. The simulator records it
(`netsim::QueueTrace`); the vm backend reads the same from a kprobe on the kernel
qdisc's enqueue function (`backends/vm/queue_trace.py`), so one scenario's two
traces line up row by row (docs/queue-trace.md).

Columns: `t` (s, scenario clock), `flow`, `seq` (TCP: segment index from the flow's
first data segment, a retransmission repeating its original's; DCCP: packet
sequence number), `bytes` (what the queue counts: the Ethernet frame, 1514 for a
full-sized TCP segment), `backlog_bytes` (bytes queued when it happened, the packet
itself and the one on the link not counted) and `event`:

- ``queued``: it arrived and was queued;
- ``dropped``: it arrived and was refused (a full DropTail queue, an AQM's early drop);
- ``marked``: it arrived and was queued with CE set (RED, PIE, BLUE … marking);
- ``dropped_from_queue``: it had been queued and was dropped later (CoDel's head
  drop, CHOKe's victim);
- ``lost``: the bottleneck's random loss (`loss_rate`, simulator only) took it
  before the queue;
- ``marked_leaving``: it was marked CE as it left the queue (CoDel); its arrival
  has a row of its own.

Every packet that reached the bottleneck has exactly one arrival row (``queued``,
``dropped``, ``marked`` or ``lost``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..metrics.queue_trace import EVENTS

COLUMNS = ["t", "flow", "seq", "bytes", "backlog_bytes", "event"]


def event_column(codes: np.ndarray) -> pd.Categorical:
    return pd.Categorical.from_codes(np.asarray(codes).astype(np.int8), categories=list(EVENTS))


def from_engine(cols: dict[str, np.ndarray]) -> pd.DataFrame:
    """The simulator's columns (`_core.simulate(..., queue_trace=True)["queue"]`) as the trace's frame."""
    return pd.DataFrame({
        "t": cols["t_ns"] / 1e9,
        "flow": cols["flow"].astype(np.int64),
        "seq": cols["seq"].astype(np.int64),
        "bytes": cols["bytes"].astype(np.int64),
        "backlog_bytes": cols["backlog_bytes"].astype(np.int64),
        "event": event_column(cols["event"]),
    })[COLUMNS]


def write(frame: pd.DataFrame, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.to_parquet(path, index=False)
    return path
