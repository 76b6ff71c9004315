"""The per-ACK trace of every TCP sender: one row per ACK a sender received, with its
state as the ACK arrived (before processing it). The vm backend reads it from Linux's
`tcp:tcp_probe` tracepoint (`backends/vm/tcp_probe.py`), the simulator records the same
quantities (`netsim::AckProbe`), so one scenario's two traces line up column by column
and a controller can be held against the kernel ACK by ACK (docs/vm.md, "Per-ACK trace").

Columns: `t` (s, scenario clock), `flow`, `cwnd_segments`, `current_ssthresh_segments`
(Linux's `tcp_current_ssthresh()`: the real ssthresh in CWR and Recovery, max(ssthresh,
¾·cwnd) otherwise; NaN before the first reduction), `srtt_s`, `snd_wnd_bytes` (the
peer's advertised window), `acked_bytes` (cumulative) and `outstanding_bytes`
(`snd_nxt − snd_una`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

COLUMNS = ["t", "flow", "cwnd_segments", "current_ssthresh_segments", "srtt_s", "snd_wnd_bytes", "acked_bytes",
           "outstanding_bytes"]

_INT64_MAX = np.iinfo(np.int64).max


def from_engine(cols: dict[str, np.ndarray]) -> pd.DataFrame:
    """The simulator's per-ACK columns (`_core.simulate(..., tcp_probe=True)["tcp_probe"]`)
    as the trace's frame. A window the receiver never limited (the engine's `u64::MAX`)
    becomes the largest int64."""
    def i64(a: np.ndarray) -> np.ndarray:
        return np.minimum(a, np.uint64(_INT64_MAX)).astype(np.int64)

    return pd.DataFrame({
        "t": cols["t_ns"] / 1e9,
        "flow": cols["flow"].astype(np.int64),
        "cwnd_segments": i64(cols["cwnd_segments"]),
        "current_ssthresh_segments": cols["current_ssthresh_segments"],
        "srtt_s": cols["srtt_ns"] / 1e9,
        "snd_wnd_bytes": i64(cols["snd_wnd_bytes"]),
        "acked_bytes": i64(cols["acked_bytes"]),
        "outstanding_bytes": i64(cols["outstanding_bytes"]),
    })[COLUMNS]


def write(frame: pd.DataFrame, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.to_parquet(path, index=False)
    return path
