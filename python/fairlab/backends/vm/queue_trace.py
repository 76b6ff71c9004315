"""The bottleneck's per-packet trace in the guest (`--queue-trace`): a kprobe on the
bottleneck qdisc's enqueue function records each packet's ports, sequence number,
length and the backlog it found, a return probe whether it was queued. The events go
to a trace instance of their own (the per-ACK trace keeps its buffer), leave
gzip-compressed after the flows, and are read here into the columns of
`backends/queue_trace.py`.

TCP and DCCP share the transport header's first four bytes (the ports), so one probe
serves both; it reads two candidate sequence fields and the parser keeps the one of
each flow's protocol: TCP's 32-bit byte sequence at offset 4, and the low 32 bits of
DCCP's 48-bit packet sequence at offset 12 (RFC 4340 §5.1, extended sequence numbers,
which Linux sends on every packet).

Only queues that decide at enqueue, on the arriving packet alone, can be traced
this way: the DropTail fifos, and RED and PIE while no flow is ECN-capable (their
early drops are enqueue decisions; a CE mark is set in place, which the return value
does not show). CoDel and fq_codel drop at dequeue and CHOKe drops a queued victim,
so those are refused with a sentence, as are ECN flows through RED or PIE (the
simulator traces them all).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..queue_trace import COLUMNS, event_column
from .btf import QueueTraceLayout

#: The kernel qdisc's enqueue function, for the queues the trace can follow.
ENQUEUE_FUNCTION = {"bfifo": "bfifo_enqueue", "pfifo": "pfifo_enqueue", "red": "red_enqueue", "pie": "pie_qdisc_enqueue"}
#: Of those, the ones that would mark an ECN-capable packet in place.
_MARK_IN_PLACE = {"red", "pie"}
INSTANCE = "/sys/kernel/tracing/instances/fairlab_queue"
_KPROBES = "/sys/kernel/tracing/kprobe_events"
#: Ring-buffer bytes per packet: an entry and a return event (34 B each measured on
#: Linux 6.1, 2026-11-29: 15.4 MB for 447,000 events), with room for page headers.
BYTES_PER_PACKET = 96
#: Frame headers the kprobe skips to reach the transport header: Ethernet (14), IPv4
#: without options (20).
_TCP_AT = 14 + 20
#: Where the low 32 bits of DCCP's 48-bit sequence number sit in its generic header
#: (RFC 4340 §5.1: ports, data offset, CCVal/CsCov, checksum, type/X, reserved, then
#: the sequence number's 6 bytes).
_DCCP_SEQ_LOW32 = 12

# The probe's location reads "(bfifo_enqueue+0x0/0x90)", or with the module for a
# qdisc built as one: "(red_enqueue+0x0/0x3b0 [sch_red])".
_ENTRY = re.compile(r"\s(\d+\.\d+): enq: \([^)]*\) sport=(\d+) dport=(\d+) seq=(\d+) dseq=(\d+) len=(\d+) backlog=(\d+)")
_RETURN = re.compile(r"\s(\d+\.\d+): enq_ret: .* ret=(0x[0-9a-f]+|-?\d+)")


class QueueTraceError(ValueError):
    """The guest's queue trace could not be read, or cannot be taken for this scenario."""


def refusal(kernel_qdisc: str, *, ecn: bool = False) -> str | None:
    """Why the vm backend cannot trace a bottleneck of ``kernel_qdisc`` (None: it can);
    ``ecn``: some flow is ECN-capable."""
    if kernel_qdisc not in ENQUEUE_FUNCTION:
        return (f"the vm backend's queue trace follows queues that decide as a packet arrives (droptail, and red or "
                f"pie without ECN); {kernel_qdisc} drops or marks packets where a probe on its enqueue cannot see it; "
                "trace it with --backend sim")
    if ecn and kernel_qdisc in _MARK_IN_PLACE:
        return (f"the vm backend's queue trace cannot see the CE marks {kernel_qdisc} sets on ECN-capable packets (it "
                "marks them in place); trace ECN flows with --backend sim, or run the flows without ECN")
    return None


def buffer_kb(packets: int) -> int:
    """Trace-buffer size (KB) for about ``packets`` bottleneck arrivals."""
    return max(4096, -(-packets * BYTES_PER_PACKET // 1024))


def start_lines(kernel_qdisc: str, layout: QueueTraceLayout, kb: int) -> list[str]:
    """Guest shell lines that define the probes and start recording (after tracefs is mounted)."""
    fn = ENQUEUE_FUNCTION[kernel_qdisc]
    pkt = f"+{layout.skb_data}(%di)"
    entry = (f"p:fairlab/enq {fn} sport=+{_TCP_AT}({pkt}):u16 dport=+{_TCP_AT + 2}({pkt}):u16 "
             f"seq=+{_TCP_AT + 4}({pkt}):u32 dseq=+{_TCP_AT + _DCCP_SEQ_LOW32}({pkt}):u32 len=+{layout.skb_len}(%di):u32 backlog=+{layout.qdisc_backlog}(%si):u32")
    ret = f"r:fairlab/enq_ret {fn} ret=$retval"

    def step(cmd: str, what: str) -> str:
        return f"{cmd} || fl_fail {shlex.quote('queue trace: could not ' + what)}"

    return [
        step(f"echo {shlex.quote(entry)} >> {_KPROBES}", f"probe {fn} (is it in this kernel?)"),
        step(f"echo {shlex.quote(ret)} >> {_KPROBES}", f"probe the return of {fn}"),
        step(f"mkdir {INSTANCE}", "create its trace instance"),
        step(f"echo mono > {INSTANCE}/trace_clock", "set the mono trace clock"),
        step(f"echo {int(kb)} > {INSTANCE}/buffer_size_kb", f"size its buffer ({int(kb)} KB)"),
        step(f"echo 1 > {INSTANCE}/events/fairlab/enable", "enable its probes"),
        step(f"echo 1 > {INSTANCE}/tracing_on", "start it"),
    ]


def stop_lines() -> list[str]:
    """Guest shell lines that stop recording and export the trace (after the flows)."""
    return [
        f"echo 0 > {INSTANCE}/tracing_on",
        f"cat {INSTANCE}/per_cpu/cpu0/stats > $RES/queue-stats.txt",
        f"cat {INSTANCE}/trace | gzip -n > $RES/queue.txt.gz",
    ]


def _swap16(x: np.ndarray) -> np.ndarray:
    return ((x & 0xFF) << 8) | (x >> 8)


def _swap32(x: np.ndarray) -> np.ndarray:
    return np.frombuffer(x.astype("<u4").tobytes(), dtype=">u4").astype(np.int64)


@dataclass(frozen=True)
class LeftOut:
    """What reached the bottleneck besides the flows' data connections (iperf3's
    control connections, which share the servers' ports, and anything else the
    guest sent through it): counted, not traced."""

    packets: int
    drops: int


def parse(text: str, *, t0_ns: int, ports: dict[int, int], mss: dict[int, int],
          dccp_ports: frozenset[int] = frozenset()) -> tuple[pd.DataFrame, LeftOut]:
    """The guest's queue trace as the trace's frame, and what it left out. ``ports``
    maps each flow's server port to its flow index, ``mss`` each TCP flow's index to
    its MSS; ``dccp_ports`` are the ports of DCCP flows, whose sequence numbers count
    packets, not bytes. Only the data connection of each port is kept (the one with
    the most packets; iperf3's control connection shares the port). Raises
    QueueTraceError on a malformed trace."""
    rows: list[tuple[float, int, int, int, int, int, int]] = []
    rets: list[int] = []
    pending = False
    for n, line in enumerate(text.splitlines(), 1):
        if not line or line.startswith("#"):
            continue
        m = _ENTRY.search(line)
        if m is not None:
            if pending:
                raise QueueTraceError(f"queue.txt line {n}: an enqueue with no return before it")
            t, sp, dp, seq, dseq, ln, bl = m.groups()
            rows.append((float(t), int(sp), int(dp), int(seq), int(dseq), int(ln), int(bl)))
            pending = True
            continue
        m = _RETURN.search(line)
        if m is not None:
            if not pending:
                raise QueueTraceError(f"queue.txt line {n}: a return with no enqueue before it")
            rets.append(int(m.group(2), 0))
            pending = False
            continue
        raise QueueTraceError(f"queue.txt line {n}: not a queue-trace event: {line[:120]!r}")
    if pending:
        rows.pop()  # the trace stopped between an enqueue and its return
    raw = pd.DataFrame(rows, columns=["t", "sport", "dport", "seq", "dseq", "bytes", "backlog_bytes"])
    raw["ret"] = np.asarray(rets, dtype=np.int64)
    # The kprobe reads the header's big-endian fields as little-endian integers.
    raw["sport"] = _swap16(raw["sport"].to_numpy(np.int64))
    raw["dport"] = _swap16(raw["dport"].to_numpy(np.int64))
    dccp = raw["dport"].isin(list(dccp_ports)).to_numpy()
    raw["seq"] = _swap32(np.where(dccp, raw["dseq"].to_numpy(np.int64), raw["seq"].to_numpy(np.int64)))
    everything = raw
    raw = raw[raw["dport"].isin(list(ports))]
    data = raw.groupby(["dport", "sport"]).size().reset_index(name="n").sort_values("n").groupby("dport").tail(1)
    raw = raw.merge(data[["dport", "sport"]], on=["dport", "sport"], how="inner", sort=False).sort_values("t", kind="stable")
    left_out = LeftOut(packets=len(everything) - len(raw),
                       drops=int((everything["ret"] != 0).sum() - (raw["ret"] != 0).sum()))
    frame = pd.DataFrame({
        "t": (raw["t"].to_numpy() - t0_ns / 1e9),
        "flow": raw["dport"].map(ports).to_numpy(np.int64),
        "seq": _segment_index(raw, ports, {f: 1 if p in dccp_ports else mss[f] for p, f in ports.items()}),
        "bytes": raw["bytes"].to_numpy(np.int64),
        "backlog_bytes": raw["backlog_bytes"].to_numpy(np.int64),
        # Qdisc enqueue returns NET_XMIT_SUCCESS (0) for a packet it queued and
        # NET_XMIT_DROP when a fifo refuses it.
        "event": event_column(np.where(raw["ret"].to_numpy() == 0, 0, 1)),
    })
    return frame[COLUMNS].reset_index(drop=True), left_out


def _segment_index(raw: pd.DataFrame, ports: dict[int, int], mss: dict[int, int]) -> np.ndarray:
    """Each packet's sequence number as a segment index from its flow's first data
    segment: sequence space unwrapped (it may wrap within a run), then divided by the
    MSS (1 for DCCP, whose sequence numbers count packets)."""
    out = np.zeros(len(raw), dtype=np.int64)
    seq = raw["seq"].to_numpy(np.int64)
    dport = raw["dport"].to_numpy()
    for port, flow in ports.items():
        idx = np.nonzero(dport == port)[0]
        if not len(idx):
            continue
        s = seq[idx]
        step = (np.diff(s) + (1 << 31)) % (1 << 32) - (1 << 31)
        unwrapped = np.concatenate([[0], np.cumsum(step)])
        out[idx] = (unwrapped - unwrapped.min()) // mss[flow]
    return out

