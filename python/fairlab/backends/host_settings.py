"""How fairlab sets up the hosts of a run, whatever the backend: when each flow
starts (the seeded start jitter) and how large the TCP socket buffers may grow.

The live backend writes these to the host kernel's sysctls, the vm backend to the
guest's, and the simulator gives its receivers the same window — so one scenario
means the same host configuration on all three (docs/backends.md).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..scenario.model import HEADER_BYTES

#: Stream id of the start-jitter RNG, derived from (seed, this) — STYLE.md §9.
START_JITTER_STREAM = 0x5354_4A49  # "STJI"
#: Kernel defaults kept as the min and default of tcp_rmem/tcp_wmem (seed 003 keeps them too).
RMEM_MIN_DEFAULT = (4096, 131072)
WMEM_MIN_DEFAULT = (4096, 16384)
#: Linux's `tcp_adv_win_scale` (default 1 up to 6.5): the receiver advertises
#: space − space / 2^scale of its buffer and keeps the rest for skb overhead.
ADV_WIN_SCALE = 1


def start_offsets_ns(resolved: dict[str, Any], seed: int) -> list[int]:
    """Each flow's launch time (ns after scenario time 0): its ``start`` plus a
    jitter uniform in [0, start_jitter], drawn in flow order from the run's stream
    (seed, START_JITTER_STREAM) — the same seed gives the same schedule."""
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), START_JITTER_STREAM]))
    jitter_ns = int(resolved["start_jitter_ns"])
    return [int(f["start_ns"]) + (int(rng.integers(0, jitter_ns + 1)) if jitter_ns > 0 else 0) for f in resolved["flows"]]


def mean_packet(resolved: dict[str, Any]) -> int:
    """Mean IP packet size of the flows' full segments (MSS + IP/TCP headers)."""
    flows = resolved["flows"]
    return int(round(sum(f["mss"] + HEADER_BYTES for f in flows) / len(flows)))


def buffer_bytes(resolved: dict[str, Any]) -> int:
    """The bottleneck buffer in bytes (packets × mean packet size for a packet buffer)."""
    buf = resolved["bottleneck"]["buffer"]
    if "bytes" in buf:
        return int(buf["bytes"])
    return int(buf["packets"]) * mean_packet(resolved)


def socket_buffer_max(resolved: dict[str, Any], rtt_ns: int) -> int:
    """Default tcp_rmem/tcp_wmem maximum for a path: 2·BDP as seed 003 sets it, with
    the BDP counted at a full bottleneck buffer (rate × RTT / 8 + buffer bytes), so
    neither socket buffer limits a flow before the bottleneck queue does."""
    rate = int(resolved["bottleneck"]["rate_bps"])
    bdp = rate * rtt_ns / 8e9 + buffer_bytes(resolved)
    return int(math.ceil(2 * bdp))


def advertised_window_max(resolved: dict[str, Any], rtt_ns: int) -> int:
    """The largest window a Linux receiver with `socket_buffer_max` advertises once
    autotuning has grown its buffer: space − space / 2^tcp_adv_win_scale (Linux
    `tcp_win_from_space`), i.e. one BDP plus the bottleneck buffer. The vm backend
    measured exactly this (iperf3's snd_wnd: 2,500,096 B for 100 Mbit/s, 100 ms, a
    1-BDP buffer; the last bits are window-scale rounding)."""
    space = socket_buffer_max(resolved, rtt_ns)
    return space - (space >> ADV_WIN_SCALE)
