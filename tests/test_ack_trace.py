"""The per-ACK trace (`--tcp-probe`) of the simulator and its summary.

The simulator records every TCP sender's state at each ACK in the columns of the
vm backend's kernel trace (Linux `tcp:tcp_probe`). Checked against independent
truth: recording changes nothing in the run (determinism); Linux's slow start
(`tcp_slow_start`: cwnd grows by the segments each ACK newly acknowledges) and
Reno's first ssthresh (`tcp_reno_ssthresh`: half the window) hold ACK by ACK; the
bytes the trace says were acknowledged never exceed what reached the receiver
(conservation); the summary's counts and means are checked on hand-built windows.
"""

from __future__ import annotations

import json
import textwrap
import tomllib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings, strategies as st

from cli_helpers import fairlab
from fairlab._core import simulate as core_simulate
from fairlab.backends import ack_trace
from fairlab.backends.ack_trace import COLUMNS
from fairlab.backends.sim import simulate, with_host_windows
from fairlab.metrics.ack_trace import AckTraceError, summarize
from fairlab.scenario import Scenario, load_scenario

MSS = 1448


def _scenario(**over) -> Scenario:
    doc = {"name": "probe", "duration": "6s", "seed": 7,
           "bottleneck": {"rate": "20Mbit", "buffer": "50%bdp"},
           "flows": [{"cca": "reno", "rtt": "40ms"}, {"cca": "cubic", "rtt": "40ms", "start": "0.5s"}]}
    doc.update(over)
    return Scenario.from_dict(doc)


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    path = tmp_path_factory.mktemp("probe") / "acks.parquet"
    trace = simulate(_scenario(), tcp_probe_path=path)
    return trace, pd.read_parquet(path)


def test_recording_the_trace_changes_nothing_in_the_run(traced):
    trace, acks = traced
    plain = simulate(_scenario())
    pd.testing.assert_frame_equal(plain.samples, trace.samples)
    assert plain.meta["flow_totals"] == trace.meta["flow_totals"]
    assert list(acks.columns) == COLUMNS
    assert trace.meta["tcp_probe"]["events"] == len(acks) > 1000


def test_slow_start_grows_by_the_segments_each_ack_acknowledges(traced):
    # The trace holds the state before each ACK is processed, so ACK i's effect
    # shows in row i + 1: Linux tcp_slow_start adds the newly acknowledged segments.
    _, acks = traced
    g = acks[acks["flow"] == 0].reset_index(drop=True)
    first_ss = int(np.flatnonzero(g["current_ssthresh_segments"].notna())[0])
    assert first_ss > 50, "the flow must slow-start for a while to test anything"
    grew = np.diff(g["cwnd_segments"].to_numpy()[:first_ss])
    acked = np.diff(g["acked_bytes"].to_numpy()[:first_ss]) // MSS
    assert (grew == acked).mean() > 0.95, list(zip(grew[:40], acked[:40]))
    # Reno's first ssthresh is half the window it had when the loss was found.
    before = int(g["cwnd_segments"].iloc[first_ss - 1])
    assert abs(g["current_ssthresh_segments"].iloc[first_ss] - before // 2) <= 1, (before, g.iloc[first_ss])


def test_the_trace_conserves_bytes_and_respects_the_windows(traced):
    trace, acks = traced
    for flow, g in acks.groupby("flow"):
        assert (np.diff(g["acked_bytes"].to_numpy()) >= 0).all() and (g["outstanding_bytes"] >= 0).all()
        delivered = trace.meta["flow_totals"][flow]["bytes_delivered"]
        assert g["acked_bytes"].iloc[-1] <= delivered
        # The receiver's advertised window (with_host_windows: BDP + buffer) bounds it.
        rwnd = trace.meta["resolved_scenario"]["flows"][flow]["rwnd_bytes"]
        assert (g["snd_wnd_bytes"] <= rwnd).all()
        assert (g["t"] >= trace.flows["start_s"].iloc[flow]).all()
    # The second flow starts at 0.5 s: no ACK of it before.
    assert acks[acks["flow"] == 1]["t"].min() > 0.5


def test_summary_counts_hand_built_reductions_and_means():
    # 1 s per step: 100 → 200 (slow start), halves to 100 at t = 2, grows to 150,
    # halves to 75 at t = 5; sRTT 0.1 s; ssthresh appears at the first halving.
    t = np.arange(8, dtype=float)
    cwnd = np.array([100, 200, 100, 120, 150, 75, 80, 90])
    ss = np.array([np.nan, np.nan, 100, 100, 100, 75, 75, 75])
    frame = pd.DataFrame({"t": t, "flow": 0, "cwnd_segments": cwnd, "current_ssthresh_segments": ss,
                          "srtt_s": 0.1, "acked_bytes": np.arange(8) * 1000})
    (s,) = summarize(frame, window=(2.0, 6.0))
    assert (s.slow_start_end_s, s.slow_start_peak_segments, s.first_ssthresh_segments) == (2.0, 200, 100.0)
    assert s.reductions == 2
    # Each value holds until the next ACK: (100 + 120 + 150 + 75) / 4 over [2, 6].
    assert s.mean_cwnd_segments == pytest.approx((100 + 120 + 150 + 75) / 4)
    assert s.acked_bytes == 4000


def test_summary_counts_what_each_ack_releases():
    # snd_una advances 2 segments per ACK; snd_nxt (una + outstanding) moves by
    # 0, 4, 0, 4, 2 segments after the ACKs at t = 0..4 (1,000-byte segments).
    una = np.arange(6) * 2000
    nxt = una[0] + 10_000 + np.cumsum([0, 0, 4000, 0, 4000, 2000])
    frame = pd.DataFrame({"t": np.arange(6, dtype=float), "flow": 1, "cwnd_segments": 10,
                          "current_ssthresh_segments": np.nan, "srtt_s": 0.1,
                          "acked_bytes": una, "outstanding_bytes": nxt - una})
    (s,) = summarize(frame)
    assert s.silent_ack_share == pytest.approx(2 / 5)
    assert s.mean_release_bytes == pytest.approx((4000 + 4000 + 2000) / 3)
    # Over [2, 3]: the ACKs at 2 and 3 release 0 and 4,000 bytes.
    (w,) = summarize(frame, window=(2.0, 3.0))
    assert (w.silent_ack_share, w.mean_release_bytes) == (0.5, 4000.0)
    # Without the outstanding bytes the release figures are unknown, not zero.
    (n,) = summarize(frame.drop(columns="outstanding_bytes"))
    assert n.silent_ack_share is None and n.mean_release_bytes is None


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 5000), min_size=2, max_size=200))
def test_a_window_that_never_falls_has_no_reduction_and_its_mean_in_range(steps):
    cwnd = np.cumsum(steps)
    frame = pd.DataFrame({"t": np.arange(len(cwnd)) * 0.01, "flow": 3, "cwnd_segments": cwnd,
                          "current_ssthresh_segments": np.nan, "srtt_s": 0.05, "acked_bytes": cwnd * 10})
    (s,) = summarize(frame)
    assert s.reductions == 0 and s.slow_start_end_s is None and s.flow == 3
    assert cwnd.min() <= s.mean_cwnd_segments <= cwnd.max()


def test_summary_refuses_a_frame_that_is_not_a_trace():
    with pytest.raises(AckTraceError, match="cwnd_segments"):
        summarize(pd.DataFrame({"t": [0.0], "flow": [0]}))


SCEN = textwrap.dedent("""
    name = "probe-cli"
    duration = "3s"
    [bottleneck]
    rate = "10Mbit"
    buffer = "100%bdp"
    [[flows]]
    cca = "reno"
    rtt = "40ms"
""")


def test_cli_writes_the_simulators_trace_and_refuses_live(tmp_path):
    scen = tmp_path / "s.toml"
    scen.write_text(SCEN)
    cp = fairlab("run", scen, "--tcp-probe", "--out", tmp_path / "o")
    assert cp.returncode == 0, cp.stderr
    acks = pd.read_parquet(tmp_path / "o" / "probe-cli.tcp_probe.parquet")
    assert list(acks.columns) == COLUMNS and len(acks) > 100
    assert "per-ACK trace" in cp.stdout
    # Handed to `analyze` by mistake, it is named for what it is, with the run's
    # own trace beside it.
    cp = fairlab("analyze", tmp_path / "o" / "probe-cli.tcp_probe.parquet")
    assert cp.returncode == 2 and "Traceback" not in cp.stderr
    assert "per-ACK trace" in cp.stderr and "probe-cli.parquet" in cp.stderr
    cp = fairlab("run", scen, "--tcp-probe", "--backend", "live", "--out", tmp_path / "o2")
    assert cp.returncode == 2 and "Traceback" not in cp.stderr and "--backend vm" in cp.stderr
    cp = fairlab("compare", scen, "--tcp-probe", "--reference", "live", "--out", tmp_path / "o3")
    assert cp.returncode == 2 and "Traceback" not in cp.stderr and "--reference vm" in cp.stderr


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1, allow_nan=False), st.integers(0, 10_000)), min_size=1, max_size=120),
       st.floats(0, 0.5, allow_nan=False))
def test_the_window_maximum_is_the_brute_force_one(points, span):
    from fairlab.metrics.ack_trace import _window_max

    gaps, ys = zip(*points)
    t = np.cumsum(np.array(gaps))
    y = np.array(ys, dtype=float)
    want = [y[: i + 1][t[: i + 1] >= t[i] - span].max() for i in range(len(t))]
    assert np.array_equal(_window_max(t, y, span), want)


def test_the_receive_window_grows_as_linux_autotunes_its_buffer(tmp_path):
    # Illinois vs Reno, 100 Mbit/s, 100 ms, 1 BDP, seed 42: the kernel's trace of
    # this run (vm backend, docs/tcp-model.md "Receive window") shows Illinois
    # advertised 45, 44, 118, 278, 562 and 1,038 segments in its first six round
    # trips: no growth until the buffer's first resize, then a ceiling set by
    # what the application read per RTT (Linux 6.1 tcp_rcv_space_adjust). An
    # explicit rwnd is a fixed buffer (SO_RCVBUF switches autotuning off): open to
    # two more segments per segment from the first.
    kernel = [45, 44, 118, 278, 562, 1038]

    def windows(rwnd):
        flows = [{"cca": "illinois", "rtt": "100ms"}, {"cca": "reno", "rtt": "100ms"}]
        if rwnd:
            for f in flows:
                f["rwnd"] = rwnd
        doc = {"name": "rw", "duration": "1s", "seed": 42,
               "bottleneck": {"rate": "100Mbit", "buffer": "100%bdp"}, "flows": flows}
        path = tmp_path / f"{rwnd}.parquet"
        simulate(Scenario.from_dict(doc), tcp_probe_path=path)
        acks = pd.read_parquet(path)
        acks = acks[acks["acked_bytes"] > 0]
        acks = acks[acks["flow"] == 0]
        rounds = ((acks["t"] - acks["t"].min()) / 0.1).astype(int)
        return (acks.groupby(rounds)["snd_wnd_bytes"].max() // MSS).tolist()

    tuned = windows(None)
    assert max(tuned[:2]) <= 46, tuned
    for sim, linux in zip(tuned[2:6], kernel[2:]):
        assert abs(sim - linux) <= 0.05 * linux, (tuned, kernel)
    fixed = windows("2500000B")
    assert fixed[0] >= 45 + 2 * 9 and fixed[5] > 1.2 * kernel[5], fixed


# The vm backend's kernel trace of the same Illinois vs Reno run (Linux 6.1 in QEMU,
# `fairlab compare tests/data/vm_illinois_reno_seed42.toml --reference vm
# --tcp-probe`, 2026-11-28): what the simulator's senders are held against.
KERNEL_TRACE = Path(__file__).parent / "data" / "vm_illinois_reno_seed42.tcp_probe.parquet"
IR_SCENARIO = Path(__file__).parent / "data" / "vm_illinois_reno_seed42.toml"


def _releases(acks: pd.DataFrame) -> pd.DataFrame:
    """Per ACK of one flow: the new segments sent before the next ACK (the trace
    holds snd_una and snd_nxt − snd_una before each ACK), and the GSO size Linux
    would give them: a millisecond of `tcp_update_pacing_rate`'s rate (200 % of
    cwnd·MSS/sRTT below half of ssthresh, 120 % above), at least two segments."""
    rows = []
    for flow, g in acks.groupby("flow"):
        nxt = (g["acked_bytes"] + g["outstanding_bytes"]).to_numpy()
        cwnd = g["cwnd_segments"].to_numpy()[:-1]
        ssthresh = g["current_ssthresh_segments"].fillna(np.inf).to_numpy()[:-1]
        ratio = np.where(cwnd < ssthresh / 2, 2.0, 1.2)
        rate = ratio * cwnd * MSS / g["srtt_s"].to_numpy()[:-1]
        rows.append(pd.DataFrame({
            "flow": flow, "t": g["t"].to_numpy()[:-1],
            "sent": np.rint(np.diff(nxt) / MSS).astype(int),
            "autosize": np.maximum(2, (rate / 1024) // MSS).astype(int),
            "slow_start": np.isinf(ssthresh) & (cwnd >= 60),
        }))
    return pd.concat(rows, ignore_index=True)


def _simulated_acks(gso: bool) -> pd.DataFrame:
    """The simulator's per-ACK trace of the kernel run's scenario, with or without
    Linux's GSO sizing and deferral (each flow's `gso`, off by default:
    docs/tcp-model.md, "How the kernel's senders release segments"), set as a user
    sets it, through the scenario."""
    doc = tomllib.loads(IR_SCENARIO.read_text())
    for f in doc["flows"]:
        f["gso"] = gso
    scenario = Scenario.from_dict(doc, source=str(IR_SCENARIO))
    resolved = with_host_windows(scenario.resolve(seed=scenario.seed))
    assert all(f.get("tso_defer", False) is gso for f in resolved["flows"])
    return ack_trace.from_engine(core_simulate(json.dumps(resolved), None, True)["tcp_probe"])


def test_new_data_leaves_in_linux_sized_bursts_as_the_kernels_does():
    # Linux builds GSO packets of about 1 ms of its pacing rate even with offloads
    # off, and holds one back until the window takes it whole (tcp_tso_autosize,
    # tcp_tso_should_defer). The kernel's trace: in congestion avoidance (5–8 s)
    # most non-empty releases are exactly that size and about half of the ACKs
    # release nothing; in slow start most ACKs release nothing and the rest up to
    # 12–18 segments. The simulator with `gso = true` does the same; without it
    # (the default) it releases what each ACK frees, two or four segments.
    kernel = _releases(pd.read_parquet(KERNEL_TRACE))
    deferring = _releases(_simulated_acks(True))
    whole = {}
    for label, r in (("kernel", kernel), ("sim", deferring)):
        ca = r[(r["t"] >= 5) & (r["t"] < 8)]
        for flow, g in ca.groupby("flow"):
            sent = g[g["sent"] > 0]
            whole[label, flow] = (sent["sent"] == sent["autosize"]).mean()
            assert whole[label, flow] >= 0.75, (label, flow)
            # Each ACK frees two segments: one ACK in autosize/2 releases a burst.
            idle = (g["sent"] == 0).mean()
            assert abs(idle - (1 - 2 / g["autosize"].median())) <= 0.05, (label, flow, idle)
    # Whole-sized releases as often as the kernel's, flow by flow (kernel 0.86 on
    # both; the rest are mostly two-segment releases after a pause of more than
    # 1 ms, Linux's "the last write was not recent"). The simulator gives 0.80 on
    # both since 2026-12-01 (Linux's sticky is_cwnd_limited); before, its flows
    # parted (0.86 and 0.985), which this comparison would have refused.
    for flow in (0, 1):
        assert abs(whole["sim", flow] - whole["kernel", flow]) <= 0.1, (flow, whole)
    for flow in (0, 1):
        k = kernel[kernel["slow_start"] & (kernel["flow"] == flow)]
        s = deferring[deferring["slow_start"] & (deferring["flow"] == flow)]
        assert abs((s["sent"] == 0).mean() - (k["sent"] == 0).mean()) <= 0.05, flow
        k_burst, s_burst = k.loc[k["sent"] > 0, "sent"], s.loc[s["sent"] > 0, "sent"]
        assert abs(s_burst.mean() - k_burst.mean()) <= 0.15 * k_burst.mean(), (flow, s_burst.mean(), k_burst.mean())
        assert abs(s_burst.quantile(0.9) - k_burst.quantile(0.9)) <= 2, flow
    default = _releases(_simulated_acks(False))
    ca = default[(default["t"] >= 5) & (default["t"] < 8)]
    assert (ca["sent"] == 0).mean() < 0.05 and ca.loc[ca["sent"] > 0, "sent"].max() <= 4


def test_gso_changes_a_tcp_sender_and_leaves_a_dccp_one_alone():
    # `gso` models Linux TCP's write path; Linux's DCCP sends a packet at a time,
    # so `--set flows[*].gso=true` over a grid with CCID2 cells moves only the TCP
    # flows. Same seed, same jitter draws: the DCCP-only run is identical to the
    # byte, the TCP one is not.
    def run(cca: str, gso: bool) -> pd.DataFrame:
        doc = {"name": "g", "duration": "6s", "seed": 7, "bottleneck": {"rate": "20Mbit", "buffer": "100%bdp"},
               "flows": [{"cca": cca, "rtt": "40ms", "gso": gso}]}
        return simulate(Scenario.from_dict(doc)).samples

    pd.testing.assert_frame_equal(run("ccid2", False), run("ccid2", True))
    assert not run("reno", False).equals(run("reno", True))


# The first round of the vm backend's Vegas–Vegas run (Linux 6.1.0-57 in QEMU,
# `fairlab run vm_vegas_vegas_seed42.toml --backend vm --tcp-probe`, 2026-11-30):
# each flow's first 12 ACKs as the kernel traced them.
VEGAS_START = Path(__file__).parent / "data" / "vm_vegas_vegas_seed42_first_acks.csv"
VV_SCENARIO = Path(__file__).parent / "data" / "vm_vegas_vegas_seed42.toml"


def _first_acks(scenario: Path, n: int) -> pd.DataFrame:
    s = load_scenario(scenario)
    acks = ack_trace.from_engine(core_simulate(json.dumps(with_host_windows(s.resolve(seed=s.seed))), None, True)["tcp_probe"])
    return acks.sort_values(["flow", "t"], kind="stable").groupby("flow").head(n)


def test_each_flow_starts_as_iperf3_does_on_the_kernel():
    # iperf3 writes a 37-byte cookie first and sets the congestion control after
    # it (docs/tcp-model.md, "The application's greeting"). The kernel's first
    # traced ACK is the cookie's (10 segments of cwnd, 37 bytes out); its ACK
    # grows Vegas, whose slow start does not ask whether the window was used, to
    # 11 segments, so Vegas's first flight is 11 segments and every ACK of it adds
    # one; Illinois and Reno stay at 10 and send 10.
    cols = ["cwnd_segments", "acked_bytes", "outstanding_bytes"]
    kernel = pd.read_csv(VEGAS_START)
    sim = _first_acks(VV_SCENARIO, 12)
    for flow in (0, 1):
        k = kernel[kernel["flow"] == flow][cols].to_numpy().tolist()
        s = sim[sim["flow"] == flow][cols].to_numpy().tolist()
        assert s == k, (flow, s, k)
    kernel_ir = pd.read_parquet(KERNEL_TRACE).sort_values(["flow", "t"], kind="stable").groupby("flow").head(2)
    sim_ir = _first_acks(IR_SCENARIO, 2)
    assert sim_ir[cols].to_numpy().tolist() == kernel_ir[cols].to_numpy().tolist() == [[10, 0, 37], [10, 37, 14480]] * 2
