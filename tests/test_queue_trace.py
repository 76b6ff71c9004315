"""The bottleneck's per-packet trace (`--queue-trace`, docs/queue-trace.md): the
simulator's record held against its own counters, the kernel's held against the
kernel's qdisc counters, iperf3's retransmissions and the byte-FIFO's rule, and the
pieces that read the kernel (its BTF, the kprobe's text) against hand-made input."""

from __future__ import annotations

import struct
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from cli_helpers import fairlab
from fairlab.metrics.queue_trace import ARRIVALS, EVENTS
from fairlab.backends.vm import btf, queue_trace as vm_queue_trace
from fairlab.scenario import Scenario

SCEN = textwrap.dedent("""
    name = "qt"
    duration = "{duration}"
    [bottleneck]
    rate = "10Mbit"
    buffer = "{buffer}"
    qdisc = "{qdisc}"
    [[flows]]
    cca = "reno"
    rtt = "40ms"
    [[flows]]
    cca = "cubic"
    rtt = "40ms"
    start = "1s"
""")


def _scenario(tmp_path: Path, *, duration: str = "10s", buffer: str = "20%bdp", qdisc: str = "droptail") -> Path:
    p = tmp_path / "s.toml"
    p.write_text(SCEN.format(duration=duration, buffer=buffer, qdisc=qdisc))
    return p


# ---- the simulator


def test_the_simulators_trace_accounts_for_every_drop_the_run_counted(tmp_path):
    out = tmp_path / "o"
    cp = fairlab("run", _scenario(tmp_path), "--queue-trace", "--out", out)
    assert cp.returncode == 0, cp.stderr
    q = pd.read_parquet(out / "qt.queue.parquet")
    assert list(q.columns) == ["t", "flow", "seq", "bytes", "backlog_bytes", "event"]
    assert set(q["event"].astype(str)) <= set(EVENTS)
    assert q["t"].is_monotonic_increasing and set(q["flow"]) == {0, 1}
    from fairlab.trace import Trace

    trace = Trace.from_parquet(out / "qt.parquet")
    drops = (q["event"] == "dropped").sum()
    assert drops > 0 and drops == trace.bottleneck["drops"].sum()
    # A DropTail queue of 20 % of the BDP (10 Mbit/s x 40 ms = 50,000 B -> 10,000 B):
    # a packet is refused exactly when it does not fit.
    limit = 10_000
    fits = q["backlog_bytes"] + q["bytes"] <= limit
    assert ((q["event"] == "queued") == fits).all()
    # Each flow's first data segment is segment 0, and full segments are 1,514-B frames.
    assert (q.groupby("flow")["seq"].min() == 0).all()
    assert (q["bytes"] == 1514).mean() > 0.95
    # What the command printed is the trace's own per-flow count.
    for flow, rows in q.groupby("flow"):
        line = f"{rows['event'].isin(ARRIVALS).sum():,} packets, {(rows['event'] == 'dropped').sum():,} dropped"
        assert line in cp.stdout, (line, cp.stdout)


def test_recording_the_queue_changes_nothing_in_the_simulated_run(tmp_path):
    from fairlab.backends.sim import simulate

    sc = Scenario.from_dict({"name": "x", "duration": "5s", "bottleneck": {"rate": "10Mbit", "buffer": "20%bdp"},
                             "flows": [{"cca": "reno", "rtt": "40ms"}, {"cca": "cubic", "rtt": "30ms"}]})
    plain = simulate(sc, seed=4)
    traced = simulate(sc, seed=4, queue_trace_path=tmp_path / "q.parquet")
    pd.testing.assert_frame_equal(plain.samples, traced.samples)
    q = pd.read_parquet(tmp_path / "q.parquet")
    assert traced.meta["queue_trace"]["events"] == len(q) > 1000
    assert q["event"].isin(ARRIVALS).sum() == len(q)  # DropTail: arrivals only


def test_the_queue_trace_is_refused_where_it_cannot_be_taken(tmp_path):
    cp = fairlab("run", _scenario(tmp_path), "--queue-trace", "--backend", "live", "--out", tmp_path / "o")
    assert cp.returncode == 2 and "Traceback" not in cp.stderr
    assert "--queue-trace" in cp.stderr and "vm or sim" in cp.stderr
    swept = tmp_path / "sw.toml"
    swept.write_text(_scenario(tmp_path).read_text() + "\n[sweep]\n\"bottleneck.buffer\" = [\"20%bdp\", \"50%bdp\"]\n")
    cp = fairlab("run", swept, "--queue-trace", "--out", tmp_path / "o2")
    assert cp.returncode == 2 and "one run" in cp.stderr and "Traceback" not in cp.stderr


# ---- reading the kernel: its BTF


def _btf_blob() -> bytes:
    """A BTF section laid out as Documentation/bpf/btf.rst describes, by hand: the
    three structs the queue trace reads, with `data` inside an anonymous struct in
    an anonymous union (as in Linux's sk_buff) and `qstats` through a typedef."""
    strings = b"\0"
    names: dict[str, int] = {}

    def name(s: str) -> int:
        nonlocal strings
        if s not in names:
            names[s] = len(strings)
            strings += s.encode() + b"\0"
        return names[s]

    types = b""

    def typ(name_off: int, kind: int, vlen: int, size_or_type: int, extra: bytes = b"") -> None:
        nonlocal types
        types += struct.pack("<III", name_off, (kind << 24) | vlen, size_or_type) + extra

    def members(*ms: tuple[str, int, int]) -> bytes:
        return b"".join(struct.pack("<III", name(n) if n else 0, t, bits) for n, t, bits in ms)

    typ(name("unsigned int"), 1, 0, 4, struct.pack("<I", 32))                     # 1: INT
    typ(0, 2, 0, 3)                                                                # 2: PTR -> 3
    typ(name("unsigned char"), 1, 0, 1, struct.pack("<I", 8))                     # 3: INT
    typ(name("sk_buff"), 4, 3, 240, members(("next", 2, 0), ("len", 1, 112 * 8), ("", 5, 200 * 8)))  # 4
    typ(0, 5, 1, 16, members(("", 6, 0)))                                          # 5: anonymous UNION
    typ(0, 4, 2, 16, members(("head", 2, 0), ("data", 2, 64)))                     # 6: anonymous STRUCT
    typ(name("gnet_stats_queue"), 4, 2, 20, members(("qlen", 1, 0), ("backlog", 1, 32)))  # 7
    typ(name("gsq_t"), 8, 0, 7)                                                    # 8: TYPEDEF -> 7
    typ(name("Qdisc"), 4, 1, 256, members(("qstats", 8, 192 * 8)))                 # 9
    header = struct.pack("<HBBIIIII", 0xEB9F, 1, 0, 24, 0, len(types), len(types), len(strings))
    return header + types + strings


def test_field_offsets_are_read_from_btf_through_anonymous_unions_and_typedefs():
    b = btf._Btf(_btf_blob(), "hand-made")
    assert b.member_offset("sk_buff", "data") == 208
    assert b.member_offset("sk_buff", "len") == 112
    assert b.member_offset("Qdisc", "qstats") + b.member_offset("gnet_stats_queue", "backlog") == 196
    with pytest.raises(btf.BtfError, match="struct sk_buff has no member 'tail'"):
        b.member_offset("sk_buff", "tail")
    with pytest.raises(btf.BtfError, match="no struct net_device"):
        b.member_offset("net_device", "mtu")


def test_a_kernel_without_btf_is_refused_naming_the_file(tmp_path):
    with pytest.raises(btf.BtfError, match="CONFIG_DEBUG_INFO_BTF"):
        btf.queue_trace_layout(Path(sys.executable).resolve())  # an ELF with no .BTF section
    junk = tmp_path / "vmlinuz"
    junk.write_bytes(b"MZ" + b"\0" * 100)
    with pytest.raises(btf.BtfError, match=f"{junk}: not an ELF kernel image"):
        btf.queue_trace_layout(junk)


# ---- reading the kernel: the kprobe's text


def _be16(x: int) -> int:  # what a little-endian u16 load of a big-endian field reads
    return int.from_bytes(x.to_bytes(2, "big"), "little")


def _be32(x: int) -> int:
    return int.from_bytes(x.to_bytes(4, "big"), "little")


def _enq(t: float, sport: int, dport: int, seq: int, length: int, backlog: int, ret: int, *, dseq: int = 0) -> str:
    return (f"  <idle>-0  [000] b.s2.  {t:.6f}: enq: (bfifo_enqueue+0x0/0x90) sport={_be16(sport)} dport={_be16(dport)} "
            f"seq={_be32(seq % (1 << 32))} dseq={_be32(dseq % (1 << 32))} len={length} backlog={backlog}\n"
            f"  <idle>-0  [000] b.s2.  {t:.6f}: enq_ret: (htb_enqueue+0x9b/0x4a0 <- bfifo_enqueue) ret={ret:#x}\n")


def test_kprobe_events_become_rows_of_the_data_connections():
    t0 = 10_000_000_000  # the guest's t0, ns
    isn = (1 << 32) - 3 * 1448  # the flow's sequence space wraps after its third segment
    text = "# tracer: nop\n"
    text += _enq(10.5, 40000, 5201, 77, 66, 0, 0)  # iperf3's control connection: same port, few packets
    for k in range(6):
        text += _enq(11.0 + k * 1e-3, 40002, 5201, isn + 1 + k * 1448, 1514, 1514 * k, 0 if k < 5 else 1)
    text += _enq(11.01, 40002, 5201, isn + 1 + 2 * 1448, 1514, 0, 0)  # a retransmission of segment 2
    text += _enq(11.5, 50000, 5202, 999, 1514, 3000, 0)
    text += _enq(11.6, 33333, 5999, 1, 1514, 0, 0)  # not one of the run's flows
    text += _enq(11.7, 40002, 5201, isn + 1 + 6 * 1448, 1514, 0, 0).replace(
        "(bfifo_enqueue+0x0/0x90)", "(red_enqueue+0x0/0x3b0 [sch_red])")  # a qdisc built as a module
    frame, left_out = vm_queue_trace.parse(text, t0_ns=t0, ports={5201: 0, 5202: 1}, mss={0: 1448, 1: 1448})
    assert left_out == vm_queue_trace.LeftOut(packets=2, drops=0)  # the control connection's packet, port 5999
    assert list(frame["flow"]) == [0] * 7 + [1] + [0]
    assert frame["t"].iloc[0] == pytest.approx(1.0)
    assert list(frame["seq"].iloc[:7]) == [0, 1, 2, 3, 4, 5, 2]
    assert list(frame["event"].astype(str).iloc[:7]) == ["queued"] * 5 + ["dropped", "queued"]
    assert list(frame["backlog_bytes"].iloc[:6]) == [0, 1514, 3028, 4542, 6056, 7570]


def test_a_dccp_flows_packets_are_numbered_by_its_packet_sequence():
    # A DCCP header (RFC 4340 §5.1) has the ports where TCP has them and its 48-bit
    # sequence number at bytes 10-15; what the probe's TCP field reads there (data
    # offset, CCVal, checksum) is noise. The sequence's low 32 bits wrap here after
    # the second packet; a dropped packet is never sent again (DCCP does not
    # retransmit), so the indices run on.
    low = (1 << 32) - 2
    text = ""
    for k in range(5):
        noise = 0x05A0_1234 + 977 * k  # data offset 5, a CCVal, a checksum: not a sequence
        text += _enq(2.0 + k * 1e-3, 40010, 5202, noise, 1470, 1470 * k, 1 if k == 3 else 0, dseq=(0x1234 << 32) + low + k)
    text += _enq(2.01, 40002, 5201, 5 + 1448, 1514, 0, 0, dseq=999)  # a TCP flow beside it: its byte sequence counts
    text += _enq(2.02, 40002, 5201, 5 + 2 * 1448, 1514, 0, 0, dseq=7)
    frame, left_out = vm_queue_trace.parse(text, t0_ns=0, ports={5201: 0, 5202: 1}, mss={0: 1448, 1: 1448},
                                           dccp_ports=frozenset({5202}))
    assert left_out.packets == 0
    assert list(frame["flow"]) == [1] * 5 + [0, 0]
    assert list(frame["seq"]) == [0, 1, 2, 3, 4, 0, 1]
    assert list(frame["event"].astype(str))[:5] == ["queued"] * 3 + ["dropped", "queued"]


def test_a_malformed_queue_trace_is_an_error_naming_the_line():
    good = _enq(1.0, 40002, 5201, 1, 1514, 0, 0)
    with pytest.raises(vm_queue_trace.QueueTraceError, match="line 1: not a queue-trace event"):
        vm_queue_trace.parse("garbage\n" + good, t0_ns=0, ports={5201: 0}, mss={0: 1448})
    entry_only = good.splitlines()[0] + "\n"
    with pytest.raises(vm_queue_trace.QueueTraceError, match="line 2: an enqueue with no return"):
        vm_queue_trace.parse(entry_only + good, t0_ns=0, ports={5201: 0}, mss={0: 1448})


def test_the_guest_can_trace_only_queues_that_decide_on_arrival():
    for q in ("bfifo", "pfifo", "red", "pie"):
        assert vm_queue_trace.refusal(q) is None
    why = vm_queue_trace.refusal("codel")
    assert "codel" in why and "--backend sim" in why
    assert vm_queue_trace.refusal("bfifo", ecn=True) is None  # a fifo never marks
    why = vm_queue_trace.refusal("red", ecn=True)
    assert "CE marks red sets" in why and "--backend sim" in why


# ---- the kernel itself


@pytest.mark.parametrize("qdisc", ["droptail", "red"])
def test_the_kernels_queue_trace_matches_its_qdisc_counters_and_iperf3(tmp_path, vm_ready, qdisc):
    # Three independent accounts of the same bottleneck: the kprobe's rows, the
    # kernel's own qdisc counters (sampled every interval) and each sender's
    # retransmissions as iperf3 reports them (every loss here is a queue drop).
    from fairlab.backends.vm.plan import qdisc_args
    from fairlab.backends.vm.runner import run_vm
    from fairlab.scenario import load_scenario

    sc = load_scenario(_scenario(tmp_path, duration="6s", qdisc=qdisc, buffer="20%bdp" if qdisc == "droptail" else "100%bdp"))
    dest = tmp_path / "q.parquet"
    tr = run_vm(sc, seed=2, image=vm_ready, queue_trace_path=dest)
    q = pd.read_parquet(dest)
    meta = tr.meta["vm"]["queue_trace"]
    assert (meta["file"], meta["events"], meta["lost_events"]) == ("q.parquet", len(q), 0)
    # The offsets read from the kernel's BTF find the right fields: ports that are
    # the flows', full frames of 1,514 B, and (DropTail) the fifo's byte rule on every row.
    assert set(q["flow"]) == {0, 1} and (q["bytes"] == 1514).mean() > 0.95
    child, args = qdisc_args(sc.resolve(seed=2))
    assert child == {"droptail": "bfifo", "red": "red"}[qdisc]
    if qdisc == "droptail":
        limit = int(args[args.index("limit") + 1])
        fits = q["backlog_bytes"] + q["bytes"] <= limit
        assert ((q["event"] == "queued") == fits).all()
    else:
        # RED drops early: below its byte limit, with a backlog between its thresholds.
        dropped = q[q["event"] == "dropped"]
        assert (dropped["backlog_bytes"] + dropped["bytes"] <= int(args[args.index("limit") + 1])).any()
    drops = q[q["event"] == "dropped"].groupby("flow").size().reindex([0, 1], fill_value=0)
    assert drops.sum() > 0
    # The qdisc counts every drop over the whole run (its counter read after the
    # flows; the per-interval samples end with the scenario, a flow's last packets may
    # come later); the trace the data connections' and, apart, the rest (iperf3's
    # control connections: RED may drop those too).
    left = meta["left_out"]["drops"]
    assert drops.sum() + left == tr.meta["vm"]["bottleneck_totals"]["drops"]
    # Each flow's namespace retransmitted every data segment the trace saw dropped
    # (a dropped pure ACK is never sent again; a control connection's retransmission
    # may come on top) — bar one lost in the last round trip: iperf3 ends its data
    # connection with a reset (`Tcp.EstabResets` 1), so that one is never sent again
    # (RED, seed 2: the last drop 7 ms before the last packet).
    counters = tr.meta["vm"]["tcp_counters"]["senders"]
    data = q[(q["event"] == "dropped") & (q["bytes"] > 100)].groupby("flow").size().reindex([0, 1], fill_value=0)
    for flow, label in enumerate(tr.flows["label"]):
        sent_again = counters[label].get("Tcp.RetransSegs", 0)
        assert data[flow] - 1 <= sent_again <= drops[flow] + left, (label, int(data[flow]), sent_again, left)


def test_the_kernels_dccp_packets_each_appear_once_in_sequence(tmp_path, vm_ready):
    # The kernel numbers every DCCP packet it sends, one after another, and never
    # sends a number twice: a probe that reads the right header bytes sees the
    # DCCP flow's numbers 0, 1, 2, ... each exactly once (queued or dropped); any
    # other offset gives noise (checksums, option bytes). Drops are the qdisc's.
    from fairlab.backends.vm.runner import run_vm
    from fairlab.scenario import load_scenario

    p = _scenario(tmp_path, duration="5s")
    p.write_text(p.read_text().replace('cca = "reno"', 'cca = "ccid2"', 1))
    dest = tmp_path / "q.parquet"
    tr = run_vm(load_scenario(p), seed=3, image=vm_ready, queue_trace_path=dest)
    q = pd.read_parquet(dest)
    dccp = q[q["flow"] == 0]
    assert len(dccp) > 1000
    assert sorted(dccp["seq"]) == list(range(len(dccp)))
    assert (dccp["event"] == "dropped").sum() > 0
    drops = int((q["event"] == "dropped").sum())
    assert drops + tr.meta["vm"]["queue_trace"]["left_out"]["drops"] == tr.meta["vm"]["bottleneck_totals"]["drops"]


def test_the_guest_script_is_unchanged_unless_the_queue_is_traced(vm_ready):
    from fairlab.backends.vm.btf import QueueTraceLayout
    from fairlab.backends.vm.plan import VmPlanError, build

    doc = {"name": "o", "duration": "4s", "bottleneck": {"rate": "10Mbit", "buffer": "100%bdp"},
           "flows": [{"cca": "reno", "rtt": "20ms"}]}
    layout = QueueTraceLayout(skb_data=208, skb_len=112, qdisc_backlog=196)
    plain = build(Scenario.from_dict(doc), vm_ready, seed=1).script
    traced = build(Scenario.from_dict(doc), vm_ready, seed=1, queue_trace=layout).script
    assert "fairlab_queue" not in plain and "kprobe_events" not in plain
    assert "p:fairlab/enq bfifo_enqueue sport=+34(+208(%di)):u16" in traced
    assert "backlog=+196(%si):u32" in traced and "r:fairlab/enq_ret bfifo_enqueue ret=$retval" in traced
    codel = {**doc, "bottleneck": {**doc["bottleneck"], "qdisc": "codel"}}
    with pytest.raises(VmPlanError, match="codel drops or marks packets where a probe on its enqueue cannot see it"):
        build(Scenario.from_dict(codel), vm_ready, seed=1, queue_trace=layout)
    red = {**doc, "bottleneck": {**doc["bottleneck"], "qdisc": "red"}}
    assert "p:fairlab/enq red_enqueue " in build(Scenario.from_dict(red), vm_ready, seed=1, queue_trace=layout).script
    red_ecn = {**red, "flows": [{"cca": "reno", "rtt": "20ms", "ecn": True}]}
    with pytest.raises(VmPlanError, match="cannot see the CE marks red sets"):
        build(Scenario.from_dict(red_ecn), vm_ready, seed=1, queue_trace=layout)


def test_a_scenario_of_dccp_flows_alone_is_traced_too(vm_ready):
    # The queue trace once started inside the TCP trace's set-up, so two CCID2 flows
    # and no TCP flow ran untraced and the run ended in "the guest wrote no queue
    # trace". The probes must be defined after tracefs is mounted, before the flows
    # launch, and exported after they end.
    from fairlab.backends.vm.btf import QueueTraceLayout
    from fairlab.backends.vm.plan import build

    doc = {"name": "o", "duration": "4s", "bottleneck": {"rate": "10Mbit", "buffer": "100%bdp"},
           "flows": [{"cca": "ccid2", "rtt": "20ms"}, {"cca": "ccid2", "rtt": "20ms"}]}
    layout = QueueTraceLayout(skb_data=208, skb_len=112, qdisc_backlog=196)
    lines = build(Scenario.from_dict(doc), vm_ready, seed=1, queue_trace=layout).script.splitlines()
    assert not any(line.startswith("fl_trace_start") for line in lines)
    mount = lines.index("fl_tracefs")
    probe = next(i for i, line in enumerate(lines) if "p:fairlab/enq bfifo_enqueue" in line)
    launch = next(i for i, line in enumerate(lines) if line.startswith("fl_launch 0 "))
    export = next(i for i, line in enumerate(lines) if "queue.txt.gz" in line)
    waited = max(i for i, line in enumerate(lines) if line.startswith("wait $(cat $RES/client-"))
    assert mount < probe < launch < waited < export


# ---- the per-flow summary (metrics.queue_trace), by hand


def test_the_summary_counts_episodes_runs_and_bursts_by_hand():
    from fairlab.metrics.queue_trace import gaps_for, summarize

    rows = [  # t, flow, event
        (1.000, 0, "queued"), (1.001, 0, "dropped"),   # A A
        (1.010, 1, "dropped"), (1.011, 1, "queued"), (1.0115, 1, "queued"),  # B B B (a burst of 2 after a gap)
        (2.000, 0, "dropped"),                          # A: a second episode
        (2.500, 1, "marked"),                           # B, CE on arrival
    ]
    frame = pd.DataFrame(rows, columns=["t", "flow", "event"])
    a, b = summarize(frame, episode_gap_s=0.1, burst_gap_s=0.002)
    # Episodes: {1.001, 1.010} and {2.000}. A lost in both, B in the first.
    assert (a.episodes, a.episodes_hit, a.drops, a.drops_per_hit) == (2, 2, 2, 1.0)
    assert (b.episodes, b.episodes_hit, b.drops, b.drops_per_hit, b.marks) == (2, 1, 1, 1.0, 1)
    # Present: a packet arrived between an episode's first and last drop (inclusive).
    # Episode 1 spans 1.001-1.010: A's drop at 1.001 and B's at 1.010 are both in it;
    # episode 2 is the instant 2.000, where only A's drop arrives.
    assert (a.episodes_present, b.episodes_present) == (2, 1)
    late = pd.concat([frame, pd.DataFrame([(1.005, 1, "queued")], columns=frame.columns)]).sort_values("t")
    _, b2 = summarize(late, episode_gap_s=0.1, burst_gap_s=0.002)
    assert (b2.episodes_present, b2.episodes_hit) == (1, 1)
    quiet = frame[~((frame["flow"] == 1) & (frame["t"] < 2))]  # B sends nothing before 2.5 s
    _, b3 = summarize(quiet, episode_gap_s=0.1, burst_gap_s=0.002)
    assert (b3.episodes_present, b3.episodes_hit) == (0, 0)
    # Runs of arrivals: A A | B B B | A | B -> A: 2, 1 (median 1.5); B: 3, 1 (median 2).
    assert (a.median_run, b.median_run) == (1.5, 2.0)
    # Bursts (< 2 ms apart): A: {1.000, 1.001}, {2.000} -> mean 1.5; B: {1.010, 1.011, 1.0115}, {2.5} -> 2.
    assert (a.mean_burst, b.mean_burst) == (1.5, 2.0)
    assert (a.packets, b.packets) == (3, 4) and a.drop_rate == pytest.approx(2 / 3)
    # The gaps a scenario gets: its longest RTT, and a third of a full frame's time.
    r = Scenario.from_dict({"name": "g", "duration": "10s", "bottleneck": {"rate": "100Mbit", "buffer": "100%bdp"},
                            "flows": [{"cca": "reno", "rtt": "25ms"}, {"cca": "reno", "rtt": "40ms"}]}).resolve(seed=1)
    g = gaps_for(r)
    assert g["episode_gap_s"] == 0.04 and g["burst_gap_s"] == pytest.approx(1514 * 8 / 100e6 / 3)


def test_compare_lays_both_queues_side_by_side(tmp_path, vm_ready):
    import json

    cp = fairlab("compare", _scenario(tmp_path, duration="4s"), "--reference", "vm", "--queue-trace", "--runs", "1",
                 "--json", "--out", tmp_path / "c")
    assert cp.returncode == 0, cp.stderr
    doc = json.loads(cp.stdout)
    for side in ("sim", "vm"):
        q = pd.read_parquet(tmp_path / "c" / f"{side}.queue.parquet")
        summary = {f["flow"]: f for f in doc["queue_trace"][side]}
        assert set(summary) == {0, 1}
        for flow, rows in q.groupby("flow"):
            assert summary[flow]["drops"] == (rows["event"] == "dropped").sum()
            assert summary[flow]["packets"] == len(rows)


def test_any_kprobe_trace_round_trips_through_the_parser():
    # Property (Hypothesis): whatever the flows' initial sequence numbers (wrapping
    # or not), segment order (retransmissions included), verdicts and interleaving,
    # the parser gives back each packet's flow, segment index, size, backlog and fate.
    from hypothesis import given, settings, strategies as st

    packet = st.tuples(st.integers(0, 1), st.integers(0, 40), st.booleans(), st.integers(0, 200_000))

    @settings(max_examples=60, deadline=None)
    @given(isns=st.tuples(st.integers(0, (1 << 32) - 1), st.integers(0, (1 << 32) - 1)),
           packets=st.lists(packet, min_size=1, max_size=60))
    def check(isns, packets):
        mss = {0: 1448, 1: 1000}
        # Each flow's first data segment is its segment 0 (as iperf3's first write is).
        firsts = {f: min(seg for g, seg, _, _ in packets if g == f) for f in (0, 1) if any(g == f for g, *_ in packets)}
        text, t = "", 1.0
        for flow, seg, dropped, backlog in packets:
            seq = (isns[flow] + 1 + (seg - firsts[flow]) * mss[flow]) % (1 << 32)
            text += _enq(t, 40000 + flow, 5201 + flow, seq, mss[flow] + 66, backlog, 1 if dropped else 0)
            t += 1e-5
        frame, left_out = vm_queue_trace.parse(text, t0_ns=0, ports={5201: 0, 5202: 1}, mss=mss)
        assert left_out.packets == 0
        assert list(frame["flow"]) == [p[0] for p in packets]
        assert list(frame["seq"]) == [seg - firsts[f] for f, seg, _, _ in packets]
        assert list(frame["event"].astype(str)) == ["dropped" if d else "queued" for _, _, d, _ in packets]
        assert list(frame["backlog_bytes"]) == [b for *_, b in packets]
        assert list(frame["bytes"]) == [mss[f] + 66 for f, *_ in packets]

    check()
