"""The kernel's own per-ACK record of each sender: the `tcp:tcp_probe` tracepoint.

Linux fires `tcp_probe` for every segment an established socket receives; the
guest keeps the senders' side (segments from a traffic server's port, i.e. the
ACKs) on CLOCK_MONOTONIC, the clock of the run's t0 (guest/lib.sh,
`fl_trace_start`). Each event gives the socket's state as the ACK arrives, before
Linux processes it (the tracepoint sits at the top of `tcp_rcv_established`):
`snd_cwnd` in segments; `ssthresh` as the tracepoint computes it, which is
`tcp_current_ssthresh()` — the real ssthresh in CWR and Recovery, but
max(ssthresh, ¾·cwnd) otherwise, so in congestion avoidance it follows ¾ of
the window and does not show the last reduction; `srtt` in µs (Linux's
`srtt_us >> 3`), the peer's window, `snd_una` and `snd_nxt`. That is the trace issue 12 asks the simulator's
controllers to be held against, hook by hook (docs/vm.md, "Per-ACK trace").
The trace lives in the guest's memory until the flows end, in a ring buffer the
host sizes for the run (`probe_buffer_kb`), and leaves gzip-compressed.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

# The trace's columns and writer are shared with the simulator's trace.
from ..ack_trace import COLUMNS, write  # noqa: F401

#: `ssthresh` before the first loss (Linux `TCP_INFINITE_SSTHRESH`).
INFINITE_SSTHRESH = 0x7FFFFFFF
_LINE = re.compile(r"\s(\d+\.\d+): tcp_probe: (.*)$")
_FIELDS = ("src", "dest", "data_len", "snd_nxt", "snd_una", "snd_cwnd", "ssthresh", "snd_wnd", "srtt")


#: The trace buffer of an untraced run, which keeps only each connection's first
#: round trip (a few events per flow; its size is part of the guest's fixed set-up).
FIRST_RTT_TRACE_KB = 131072


#: Ring-buffer bytes per event on Linux 6.1 (`tcp_probe`'s record and its headers:
#: 6,400,776 B for 48,788 events, measured 2026-11-27).
BYTES_PER_EVENT = 136
#: The largest trace buffer a --tcp-probe run may take of the guest's memory
#: (`qemu.MEMORY_MB`), leaving the rest to the flows' socket buffers and queues.
MAX_PROBE_BUFFER_KB = 320 * 1024
_MIN_PROBE_BUFFER_KB = 4096
#: Bytes on the bottleneck per full segment: MSS + TCP/IP headers with timestamps
#: (52) + Ethernet (14).
_FRAME_OVERHEAD = 66


def most_events(resolved: dict) -> int:
    """An upper bound on the ACKs a --tcp-probe run records: at most one per segment
    that crosses the bottleneck (a receiver acknowledges every second one, every one
    out of order), with a tenth more for window updates, plus the connections'
    set-up and first round trips."""
    flows = resolved["flows"]
    start = min(int(f["start_ns"]) for f in flows)
    end = max(int(f["stop_ns"]) if f["stop_ns"] is not None else int(resolved["duration_ns"]) for f in flows)
    mss = min(int(f["mss"]) for f in flows)
    segments = resolved["bottleneck"]["rate_bps"] * max(end - start, 0) / 1e9 / 8 / (mss + _FRAME_OVERHEAD)
    return int(1.1 * segments) + 2000 * len(flows)


def probe_buffer_kb(resolved: dict) -> int:
    """The trace buffer (KB) a --tcp-probe run of ``resolved`` needs; raises
    ValueError, naming the limit, when the guest cannot hold it."""
    events = most_events(resolved)
    kb = max(_MIN_PROBE_BUFFER_KB, -(-events * BYTES_PER_EVENT // 1024))
    if kb > MAX_PROBE_BUFFER_KB:
        rate = resolved["bottleneck"]["rate_bps"]
        fits = MAX_PROBE_BUFFER_KB * 1024 // BYTES_PER_EVENT
        shorter = max(1, int(resolved["duration_ns"] / 1e9 * fits / events))
        raise ValueError(
            f"--tcp-probe keeps the trace in the guest's memory, room for about {fits / 1e6:.1f} million events "
            f"({MAX_PROBE_BUFFER_KB // 1024} MB), and this scenario may bring up to {events / 1e6:.1f} million (one "
            f"per segment at {rate / 1e6:g} Mbit/s while its flows run); trace a shorter run (`duration` of about "
            f"{shorter} s or less) or a slower bottleneck")
    return kb


class TcpProbeError(ValueError):
    """The guest's trace could not be read."""


def _events(text: str) -> pd.DataFrame:
    """Every tcp_probe event of the trace: time (s, CLOCK_MONOTONIC), the server port
    (`port`), the sender's port and the raw fields; raises on a malformed event."""
    rows: dict[str, list] = {k: [] for k in ("t", "port", "sport", *_FIELDS[2:])}
    for n, line in enumerate(text.splitlines(), 1):
        if not line or line.startswith("#"):
            continue
        m = _LINE.search(line)
        if m is None:
            raise TcpProbeError(f"tcp_probe.txt line {n}: not a tcp_probe event: {line[:120]!r}")
        kv = dict(p.split("=", 1) for p in m.group(2).split() if "=" in p)
        try:
            rows["t"].append(float(m.group(1)))
            rows["port"].append(int(kv["dest"].rsplit(":", 1)[1]))
            rows["sport"].append(int(kv["src"].rsplit(":", 1)[1]))
            rows["data_len"].append(int(kv["data_len"]))
            for k in ("snd_nxt", "snd_una"):
                rows[k].append(int(kv[k], 16))
            for k in ("snd_cwnd", "ssthresh", "snd_wnd", "srtt"):
                rows[k].append(int(kv[k]))
        except (KeyError, ValueError, IndexError):
            raise TcpProbeError(f"tcp_probe.txt line {n}: a field is missing or malformed: {line[:120]!r}") from None
    return pd.DataFrame(rows)


def _data_connections(raw: pd.DataFrame) -> pd.DataFrame:
    """Only each server port's data connection: iperf3 opens its control connection
    first, then the data connection, so the one whose first event is latest."""
    opened = raw.groupby(["port", "sport"])["t"].min().reset_index()
    data = opened.sort_values("t").groupby("port").tail(1)[["port", "sport"]]
    return raw.merge(data, on=["port", "sport"])


def parse(text: str, *, t0_ns: int, first_port: int, n_flows: int) -> pd.DataFrame:
    """One row per ACK of each flow's data connection: `t` on the scenario clock (s
    after t0), the flow (from the server port it came from), and the sender's state
    as the ACK arrives (Linux traces before processing it). `acked_bytes` is
    cumulative from the flow's first event (`snd_una`, unwrapped modulo 2^32);
    `outstanding_bytes` is `snd_nxt − snd_una`."""
    raw = _events(text)
    if raw.empty:
        return pd.DataFrame(columns=COLUMNS)
    raw["flow"] = raw["port"] - first_port
    raw = _data_connections(raw[(raw["flow"] >= 0) & (raw["flow"] < n_flows)])
    parts = []
    for flow, g in raw.groupby("flow", sort=True):
        una = g["snd_una"].to_numpy(np.int64)
        step = np.diff(una, prepend=una[0]) % (1 << 32)
        # A step of more than 2^31 is snd_una seen out of order, not 4 GB acknowledged.
        step = np.where(step >= (1 << 31), step - (1 << 32), step)
        ss = g["ssthresh"].to_numpy(float)
        parts.append(pd.DataFrame({
            "t": g["t"].to_numpy(float) - t0_ns / 1e9,
            "flow": np.full(len(g), int(flow), dtype=np.int64),
            "cwnd_segments": g["snd_cwnd"].to_numpy(np.int64),
            "current_ssthresh_segments": np.where(ss >= INFINITE_SSTHRESH, np.nan, ss),
            "srtt_s": g["srtt"].to_numpy(float) / 1e6,
            "snd_wnd_bytes": g["snd_wnd"].to_numpy(np.int64),
            "acked_bytes": np.cumsum(step),
            "outstanding_bytes": (g["snd_nxt"].to_numpy(np.int64) - una) % (1 << 32),
        }))
    return pd.concat(parts, ignore_index=True)[COLUMNS]


def data_starts(text: str, *, t0_ns: int, ports: dict[int, int]) -> dict[int, float]:
    """When each TCP flow's first data segment left its sender, s after t0, from the
    trace's first round trip of each connection (``ports``: server port → flow).

    iperf3 opens a control connection, then the data connection, whose first bytes
    are a 37-byte cookie; data follows once the server says the test runs. The
    first event of the data connection (its latest-opened one) acknowledges the
    cookie; its `snd_nxt` is where data begins. The first later event that finds
    data sent (`snd_nxt` past that point) acknowledges the first data segment, so
    that segment left one RTT earlier: the event's time minus its `srtt` (the
    handshake's and the cookie's RTT). Starting a process in the guest costs virtual
    time (0.6–0.8 s for iperf3 on Linux 6.1 under TCG), so this, not the launch,
    is when a flow starts."""
    raw = _events(text)
    raw = _data_connections(raw[raw["port"].isin(list(ports))])
    out: dict[int, float] = {}
    for port, g in raw.groupby("port", sort=True):
        cookie_end = int(g["snd_nxt"].iloc[0])
        sent_beyond = (g["snd_nxt"].to_numpy(np.int64) - cookie_end) % (1 << 32)
        later = np.flatnonzero((sent_beyond > 0) & (sent_beyond < (1 << 31)))
        if len(later):
            first = later[0]
            out[ports[int(port)]] = float(g["t"].iloc[first]) - g["srtt"].iloc[first] / 1e6 - t0_ns / 1e9
    return out


def lost_events(stats_text: str | None) -> int:
    """Events the trace buffer lost: overwritten (`overrun`) or refused (`dropped
    events`) in per_cpu/cpu0/stats."""
    lost = 0
    for key in ("overrun", "dropped events"):
        m = re.search(rf"^{key}:\s*(\d+)", stats_text or "", re.M)
        lost += int(m.group(1)) if m else 0
    return lost
