"""The live backend's pure parts: preflight error sentences, path choice, argument
lists, linkem config and stats, the kernel path's tc commands, cleanup's name rule.
No root needed; nothing here touches the system (the capability object is built by
hand so each error can be provoked on any machine)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd
import pytest

from fairlab.backends.live import capabilities, iperf, kernel_link, linkem_link, netns, runner
from fairlab.backends.live.errors import LiveError
from fairlab.scenario import Scenario


def scenario(**over) -> Scenario:
    doc = {
        "name": "unit",
        "duration": "8s",
        "bottleneck": {"rate": "50Mbit", "buffer": "100%bdp"},
        "flows": [{"cca": "cubic", "rtt": "20ms"}, {"cca": "reno", "rtt": "40ms"}],
    }
    for k, v in over.items():
        if k == "bottleneck":
            doc["bottleneck"] = {**doc["bottleneck"], **v}
        else:
            doc[k] = v
    return Scenario.from_dict(doc)


def caps(**over) -> capabilities.Capabilities:
    c = capabilities.Capabilities(
        root=True,
        kernel="6.18.0-test",
        iperf3="/usr/bin/iperf3",
        iperf3_version="3.12",
        tools={"ip": "/usr/sbin/ip", "tc": "/usr/sbin/tc", "ss": "/usr/bin/ss", "ethtool": "/usr/sbin/ethtool",
               "sysctl": "/usr/sbin/sysctl"},
        pyroute2="0.9.7",
        ccas=["reno", "bbr", "cubic"],
        qdiscs={"netem": False, "tbf": True, "htb": True, "pfifo": True, "bfifo": True, "red": False},
        linkem="/opt/linkem",
        linkem_version="sha256:0123456789ab",
        linkem_how="from $FAIRLAB_LINKEM",
    )
    return dataclasses.replace(c, **over)


# ----------------------------------------------------------------- error sentences
def test_not_root_says_run_as_root_or_use_sim():
    with pytest.raises(LiveError) as e:
        runner.preflight(scenario(), caps(root=False))
    assert str(e.value) == "live runs need root to create network namespaces; run as root or use --backend sim"


def test_missing_iperf3_says_how_to_install():
    with pytest.raises(LiveError, match=r"install it: apt-get install iperf3"):
        runner.preflight(scenario(), caps(iperf3=None))


def test_missing_cca_lists_the_kernels_controls():
    s = scenario(flows=[{"cca": "vegas", "rtt": "20ms"}])
    with pytest.raises(LiveError) as e:
        runner.preflight(s, caps())
    msg = str(e.value)
    assert "'vegas'" in msg and "tcp_available_congestion_control" in msg and "reno bbr cubic" in msg
    assert "\n" not in msg


def test_ccid2_says_dccp_was_removed_from_linux_6():
    s = scenario(flows=[{"cca": "ccid2", "rtt": "20ms"}])
    with pytest.raises(LiveError) as e:
        runner.preflight(s, caps())
    msg = str(e.value)
    assert "DCCP was removed from Linux 6.x" in msg and "reno bbr cubic" in msg and "--backend sim" in msg


def test_neither_path_says_what_is_missing():
    with pytest.raises(LiveError) as e:
        runner.preflight(scenario(), caps(linkem=None, linkem_how="not found (build it with `cargo build --release -p linkem`)"))
    msg = str(e.value)
    assert msg.startswith("neither emulation path can run this scenario")
    assert "netem" in msg and "no linkem binary" in msg and "cargo build --release -p linkem" in msg


def test_qdisc_linkem_does_not_know(monkeypatch):
    monkeypatch.setattr(linkem_link, "known_qdiscs", lambda: ["droptail", "red"])
    with pytest.raises(LiveError, match=r"linkem does not know the qdisc 'sfb' \(it knows: droptail, red\)"):
        runner.preflight(scenario(bottleneck={"qdisc": "sfb"}), caps())


def test_linkem_knows_every_qdisc_of_the_aqm_crate():
    # No monkeypatch: this used to import the table from a wrong relative path,
    # return None, and so never refuse anything (linkem then failed at start).
    known = linkem_link.known_qdiscs()
    assert {"droptail", "red", "choke", "blue", "codel", "fq_codel", "pie", "zrtt"} <= set(known)
    with pytest.raises(LiveError, match=r"linkem does not know the qdisc 'sfb'"):
        runner.choose_path(scenario(bottleneck={"qdisc": "sfb"}).resolve(), caps(), "linkem")


def test_missing_ethtool_names_the_package():
    tools = {**caps().tools, "ethtool": None}
    with pytest.raises(LiveError, match=r"`ethtool` is not installed.*apt-get install ethtool"):
        runner.preflight(scenario(), caps(tools=tools))


def test_interval_outside_iperf3s_range_is_refused():
    with pytest.raises(LiveError, match="iperf3 reports every 0.1 to 60 s"):
        runner.preflight(scenario(interval="50ms"), caps())


# ----------------------------------------------------------------- path choice
def test_linkem_is_chosen_when_netem_is_missing_and_the_reason_is_recorded():
    choice = runner.preflight(scenario(), caps())
    assert choice.path == "linkem" and "netem" in choice.why


def test_kernel_is_chosen_when_every_qdisc_is_there():
    full = {q: True for q in capabilities.QDISC_PROBES}
    choice = runner.preflight(scenario(bottleneck={"qdisc": "red", "params": {"max_p": 0.1, "ecn": True}}), caps(qdiscs=full))
    assert choice.path == "kernel" and "red" in choice.why


def test_kernel_path_refuses_params_it_cannot_translate():
    full = {q: True for q in capabilities.QDISC_PROBES}
    choice = runner.preflight(scenario(bottleneck={"qdisc": "red", "params": {"gentle": True}}), caps(qdiscs=full))
    assert choice.path == "linkem" and "gentle" in choice.why


def test_forcing_an_impossible_path_says_why():
    with pytest.raises(LiveError, match="kernel emulation path was asked for.*netem"):
        runner.preflight(scenario(), caps(), emulation="kernel")


# ----------------------------------------------------------------- argument lists
def test_client_and_server_are_argument_lists_with_the_run_dir_in_them(tmp_path):
    spec = iperf.ClientSpec(server_ip="10.200.1.254", port=5202, cca="reno", interval_s=0.5, seconds=8, nbytes=1_000_000)
    argv = iperf.client_args("/usr/bin/iperf3", spec, tmp_path / "fl-3f9a" / "flow-1.json")
    assert argv[:2] == ["/usr/bin/iperf3", "-c"]
    joined = " ".join(argv)
    for part in ("-p 5202", "-C reno", "-J", "-i 0.5", "-t 8", "--bytes 1000000", "fl-3f9a/flow-1.json"):
        assert part in joined
    assert all(" " not in a for a in argv if not a.startswith(str(tmp_path)))
    srv = iperf.server_args("iperf3", 5202, Path("/x/fl-3f9a/server-1.json"))
    assert srv == ["iperf3", "-s", "-p", "5202", "-1", "-J", "--logfile", "/x/fl-3f9a/server-1.json"]


def test_seconds_are_whole_and_at_least_one():
    assert iperf.seconds_for(0, 8_000_000_000) == 8
    assert iperf.seconds_for(2_000_000_000, 8_400_000_000) == 6
    assert iperf.seconds_for(0, 300_000_000) == 1


def test_version_and_listening_ports_parse():
    assert iperf.parse_version("iperf 3.12 (cJSON 1.7.15)\nLinux vm") == "3.12"
    assert iperf.listening_ports("LISTEN 0 4096 *:5201 *:*\nLISTEN 0 4096 0.0.0.0:5202 0.0.0.0:*\n") == {5201, 5202}


# ----------------------------------------------------------------- topology facts
def fake_topo(n: int = 2) -> netns.Dumbbell:
    rid = "fl-3f9a"
    return netns.Dumbbell(
        run_id=rid, subnet="10.200.1.0/24", router_ns=f"{rid}-r",
        receiver=netns.Endpoint(f"{rid}-d", f"{rid}-d", "10.200.1.254", 1500),
        senders=[netns.Endpoint(f"{rid}-s{i}", f"{rid}-s{i}", f"10.200.1.{i + 1}", 1500) for i in range(n)],
        router_sender_ports=[f"{rid}-r{i}" for i in range(n)], router_receiver_port=f"{rid}-rd",
    )


def test_names_carry_the_run_id_and_fit_ifnamsiz():
    t = fake_topo(3)
    for name in [*t.namespaces, *t.router_sender_ports, t.router_receiver_port]:
        assert netns.owner(name) == "fl-3f9a" and len(name) <= 15
    assert netns.owner("fl-3f9a-s9999") == "fl-3f9a" and len("fl-3f9a-s9999") <= 15


def test_cleanup_name_rule_touches_only_fl_hex_names():
    for ok in ("fl-3f9a-s0", "fl-00ff-rd", "fl-deadbeef-probe"):
        assert netns.owner(ok) is not None
    for not_ours in ("fl-zzzz-s0", "fl-rec-605d-s", "decoy", "fl-3f9a", "xfl-3f9a-s0", "fl-3F9A-s0", "eth0"):
        assert netns.owner(not_ours) is None, not_ours


def test_subnet_avoids_the_hosts_networks():
    import ipaddress

    first = netns.choose_subnet("fl-3f9a", avoid=[])
    again = netns.choose_subnet("fl-3f9a", avoid=[first])
    assert first.prefixlen == 24 and first.is_private and again != first
    assert not again.overlaps(first) and again.subnet_of(ipaddress.IPv4Network("10.192.0.0/10"))


def test_linkem_config_matches_the_contract():
    s = scenario()
    r = s.resolve(seed=7)
    cfg = linkem_link.config(r, fake_topo(2), seed=7)
    assert set(cfg) == {"run_id", "sender_ports", "receiver_port", "rate_bps", "reverse_rate_bps", "buffer", "qdisc",
                        "params", "seed", "sample_interval_ns", "mean_packet_bytes", "reference_rtt_ns"}
    assert cfg["sender_ports"] == [{"iface": "fl-3f9a-r0", "one_way_delay_ns": 10_000_000},
                                   {"iface": "fl-3f9a-r1", "one_way_delay_ns": 20_000_000}]
    assert cfg["receiver_port"] == {"iface": "fl-3f9a-rd"}
    assert cfg["rate_bps"] == 50_000_000 and cfg["reverse_rate_bps"] is None
    # 100% BDP at the largest RTT (40 ms): 50e6 * 0.04 / 8 bytes.
    assert cfg["buffer"] == {"bytes": 250_000} and cfg["reference_rtt_ns"] == 40_000_000
    assert cfg["mean_packet_bytes"] == 1500 and cfg["seed"] == 7 and cfg["sample_interval_ns"] == 1_000_000_000


def test_bottleneck_samples_are_per_interval_differences_on_the_trace_clock():
    stats = pd.DataFrame({
        "t_ns": [1_000_000_000, 2_000_000_000, 3_000_000_000, 3_400_000_000],
        "queue_bytes": [100, 200, 0, 0], "queue_pkts": [1, 2, 0, 0],
        "drops": [3, 3, 10, 10], "marks": [0, 1, 1, 2],
        "drops_by_reason": [{"overflow": 3}, {"overflow": 3}, {"overflow": 10}, {"overflow": 10}],
        "forwarded_pkts": [10, 30, 60, 61], "forwarded_bytes": [1, 2, 3, 4],
    })
    b = linkem_link.bottleneck_samples(stats, zero_offset_s=-0.5, run=2, interval_s=1.0, end_s=2.0)
    assert b["t"].tolist() == pytest.approx([0.5, 1.5, 2.5])  # 2.9 (the shutdown line) is past the run's end + half an interval
    assert b["drops"].tolist() == [3, 0, 7] and b["marks"].tolist() == [0, 1, 0]
    assert b["drops_overflow"].tolist() == [3, 0, 7] and b["forwarded_pkts"].tolist() == [10, 20, 30]
    assert (b["run"] == 2).all()


# Lines as linkem writes them when stopped: samples, the final sample, then health
# (crates/linkem/src/stats.rs; the linkem netns test checks the binary's own).
_SAMPLE = ('{{"t_ns":{t},"queue_bytes":0,"queue_pkts":0,"drops":{d},"marks":0,"drops_by_reason":{{"overflow":{d}}},'
           '"forwarded_pkts":10,"forwarded_bytes":15000}}')
_HEALTH = ('{"health":{"tx_errors":0,"first_tx_error":null,"gso_frames":0,"truncated":0,"iterations":28690,'
           '"max_late_ns":20463000,"late_over_100us":21,"late_over_1ms":14,"rx_wait_max_ns":900000,"rx_wait_over_1ms":0,'
           '"kernel_drops":0,"ring_ports":2,"timer_late_max_ns":6851000,"spin_max_ns":40000}}')


def test_the_health_line_is_read_apart_from_the_samples(tmp_path):
    p = tmp_path / "linkem-stats.jsonl"
    p.write_text("\n".join([_SAMPLE.format(t=10**9, d=1), _SAMPLE.format(t=1_400_000_000, d=3), _HEALTH]) + "\n")
    stats = linkem_link.read_stats(p)
    assert stats["t_ns"].tolist() == [10**9, 1_400_000_000] and "health" not in stats
    assert linkem_link.read_health(p)["late_over_1ms"] == 14
    # The samples still make bottleneck rows: the health line does not reach them.
    b = linkem_link.bottleneck_samples(stats, zero_offset_s=0.0, run=0, interval_s=1.0, end_s=1.0)
    assert b["drops"].tolist() == [1, 2]


def test_a_linkem_killed_before_its_health_line_has_none_and_says_so(tmp_path):
    p = tmp_path / "linkem-stats.jsonl"
    p.write_text(_SAMPLE.format(t=10**9, d=0) + "\n" + '{"t_ns": 2000')  # cut off mid-write
    assert len(linkem_link.read_stats(p)) == 1
    assert linkem_link.read_health(p) is None
    assert linkem_link.read_health(tmp_path / "absent.jsonl") is None
    [w] = linkem_link.health_warnings(None)
    assert "no health line" in w


def test_a_stats_line_that_is_json_but_not_an_object_is_refused_with_the_line(tmp_path):
    p = tmp_path / "linkem-stats.jsonl"
    p.write_text("[1, 2]\n" + _SAMPLE.format(t=10**9, d=0) + "\n")
    with pytest.raises(LiveError, match=r"linkem-stats.jsonl: line 1 is not a JSON object"):
        linkem_link.read_stats(p)


def test_a_stalled_host_is_told_with_the_counts_and_a_healthy_link_is_not():
    import json

    stalled = json.loads(_HEALTH)["health"]
    [w] = linkem_link.health_warnings(stalled)
    assert "14 packet(s) more than 1 ms after they were due (at worst 20.5 ms)" in w and "suspect" in w
    # One late packet (start-up) is forgiven; nothing else is wrong: no warning.
    assert linkem_link.health_warnings({**stalled, "late_over_1ms": 1, "max_late_ns": 1_200_000}) == []
    # Frames lost outside the bottleneck are named, each with its count.
    lost = linkem_link.health_warnings({**stalled, "late_over_1ms": 0, "kernel_drops": 7, "tx_errors": 2,
                                        "first_tx_error": "No buffer space available (os error 105)"})
    assert len(lost) == 2
    assert "dropped 7 frame(s) before linkem read them" in lost[0]
    assert "could not send 2 frame(s) (first error: No buffer space available (os error 105))" in lost[1]
    # Receive waits alone are a stall too.
    assert "waited more than 1 ms" in linkem_link.health_warnings({**stalled, "late_over_1ms": 0, "rx_wait_over_1ms": 5})[0]


def test_socket_buffers_default_to_twice_the_full_queue_bdp():
    r = scenario().resolve()
    # 50 Mbit/s x 20 ms / 8 = 125,000 B, plus the 250,000 B buffer, doubled.
    assert runner.socket_buffer_max(r, 20_000_000) == 750_000


# ----------------------------------------------------------------- kernel path (commands only)
def test_kernel_path_commands_delay_both_ends_and_shape_the_receiver_port():
    r = scenario().resolve()
    cmds = kernel_link.commands(r, fake_topo(2), "tbf")
    netem = [(ns, a) for ns, a in cmds if "netem" in a]
    assert len(netem) == 4
    assert ("fl-3f9a-s0", ["tc", "qdisc", "replace", "dev", "fl-3f9a-s0", "root", "netem", "delay", "10000us", "limit",
                           netem[0][1][-1]]) in netem
    assert any(ns == "fl-3f9a-r" and a[4] == "fl-3f9a-r1" and "20000us" in a for ns, a in netem)
    assert all(int(a[-1]) >= 10_000 for _, a in netem)
    tbf = next(a for _, a in cmds if "tbf" in a)
    assert tbf[4] == "fl-3f9a-rd" and "50000000bit" in tbf
    child = cmds[-1][1]
    assert child[child.index("10:") + 1:] == ["bfifo", "limit", "250000"]


def test_kernel_path_htb_and_aqm_children():
    r = scenario(bottleneck={"qdisc": "codel", "params": {"target": 5_000_000, "ecn": True}}).resolve()
    cmds = kernel_link.commands(r, fake_topo(1), "htb")
    assert any("class" in a and "htb" in a for _, a in cmds)
    child = cmds[-1][1]
    assert child[child.index("10:") + 1:][:1] == ["codel"] and "5000us" in child and "ecn" in child


def test_tc_derives_reds_weight_from_burst_as_iproute2_does():
    # Hand-computed with tc_red_eval_ewma's rule (smallest wlog with
    # burst + 1 - min <= (1 - (1 - W)^burst) / W): min 50/3 packets, burst 28 (tc's
    # recommendation (2*min + max)/3 for max 50): a = 12.33; W = 1/8 gives 7.83,
    # W = 1/16 gives 13.37, so wlog 4.
    assert kernel_link.tc_red_wlog(50 / 3, 28) == 4
    # tc refuses a burst that cannot hold min: a < 1.
    assert kernel_link.tc_red_wlog(20, 10) is None


def test_red_gets_the_scenarios_weight_not_tcs_recommendation():
    # 0.002 -> 2^-9: the burst chosen is the smallest from which tc derives wlog 9.
    burst = kernel_link.burst_for_weight(50 / 3, 0.002)
    assert kernel_link.tc_red_wlog(50 / 3, burst) == 9
    assert kernel_link.tc_red_wlog(50 / 3, burst - 1) != 9
    # An explicit w_q is honoured, and the kernel path accepts it.
    r = scenario(bottleneck={"qdisc": "red", "buffer": "200pkt", "params": {"w_q": 1 / 64}}).resolve()
    assert kernel_link.requirements(r).unsupported is None
    args = kernel_link.aqm_args(r)
    min_pkts = int(args[args.index("min") + 1]) / int(args[args.index("avpkt") + 1])
    assert kernel_link.tc_red_wlog(min_pkts, int(args[args.index("burst") + 1])) == 6


def test_kernel_requirements():
    assert kernel_link.requirements(scenario().resolve()).qdiscs == ["netem", "tbf|htb", "bfifo"]
    assert "blue" in (kernel_link.requirements(scenario(bottleneck={"qdisc": "blue"}).resolve()).unsupported or "")
    assert kernel_link.missing_qdiscs(kernel_link.Requirements(["netem", "tbf|htb"]), {"tbf": True}) == ["netem"]


# ----------------------------------------------------------------- determinism, linkem discovery
def test_start_offsets_are_seeded_and_within_the_jitter():
    r = scenario(variation={"start_jitter": "10ms"}, flows=[{"cca": "cubic", "rtt": "20ms", "start": "2s", "count": 5}]).resolve()
    a = runner.start_offsets_ns(r, 42)
    assert a == runner.start_offsets_ns(r, 42)
    assert a != runner.start_offsets_ns(r, 43)
    assert all(2_000_000_000 <= x <= 2_010_000_000 for x in a)
    r0 = scenario(variation={"start_jitter": "0s"}).resolve()
    assert runner.start_offsets_ns(r0, 42) == [0, 0]


def test_linkem_is_found_through_the_environment_variable(tmp_path, monkeypatch):
    exe = tmp_path / "linkem"
    exe.write_text("#!/bin/sh\nexit 2\n")
    exe.chmod(0o755)
    monkeypatch.setenv("FAIRLAB_LINKEM", str(exe))
    assert linkem_link.find_linkem() == (str(exe), "from $FAIRLAB_LINKEM")
    assert (linkem_link.linkem_version(str(exe)) or "").startswith("sha256:")
    monkeypatch.setenv("FAIRLAB_LINKEM", str(tmp_path / "nope"))
    path, how = linkem_link.find_linkem()
    assert path is None and "is not an executable file" in how


def test_doctor_rows_name_the_missing_pieces():
    rows = {item: finding for item, finding, _ in capabilities.render(caps(linkem=None, iperf3=None))}
    assert rows["iperf3"] == "MISSING" and rows["linkem"] == "MISSING" and rows["emulation path"] == "NONE"
    assert "tbf" in rows["kernel qdiscs"]


def test_offloads_on_leaves_linkem_out_and_says_why():
    # linkem forwards frame by frame; with offloads on the senders hand their NICs
    # 64 KB super-packets, so only the kernel path can carry the run.
    s = scenario(offloads=True)
    with pytest.raises(LiveError, match="linkem needs MTU-sized packets, and the scenario turns offloads on"):
        runner.preflight(s, caps())
    full = {q: True for q in capabilities.QDISC_PROBES}
    assert runner.preflight(s, caps(qdiscs=full)).path == "kernel"
