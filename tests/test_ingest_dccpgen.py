"""fairlab-dccpgen reports (crates/dccpgen) read by the iperf3 importer, unchanged.

The `dccpgen_dccp_server_*` files are the output of the binary's own report code
for hand-chosen datagram counts (crates/dccpgen/tests/fixture.rs fails if they
drift from the code); the expected rates below are worked out by hand from those
counts. The `dccpgen_tcp_loopback_*` files are a real loopback run of the binary
on this host (`--proto tcp`), and the `dccpgen_guest_*` files a real DCCP/CCID2
run against TCP in a Debian 6.1 guest (tests/data/README.md); expectations for
those are computed here from the raw JSON or from the link rate, never taken
from the importer.
"""

from __future__ import annotations

import copy
import io
import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fairlab.ingest import load

DATA = Path(__file__).resolve().parent / "data"
A = DATA / "dccpgen_dccp_server_a.json"
B = DATA / "dccpgen_dccp_server_b.json"
TCP_SERVER = DATA / "dccpgen_tcp_loopback_server.json"
TCP_CLIENT = DATA / "dccpgen_tcp_loopback_client.json"
MPS = 1424  # bytes per datagram in the fixtures


def series(tr, flow: int) -> tuple[list[float], list[float]]:
    s = tr.samples[tr.samples["flow"] == flow].sort_values("t")
    return list(s["t"]), list(s["throughput_bps"])


def test_one_dccp_server_file_gives_the_delivered_rate_per_interval():
    tr = load(A)
    t, bps = series(tr, 0)
    # 1000 and 2000 datagrams of 1424 B in 1-s intervals: 1000*1424*8 = 11.392 Mbit/s,
    # 2000*1424*8 = 22.784 Mbit/s. The final 0.4-s interval (the client closed at
    # 2.4 s) is shorter than half the interval, so the importer drops it.
    assert t == [1.0, 2.0]
    assert bps == [11_392_000.0, 22_784_000.0]
    assert any("dropped the final 0.400-s remainder" in n for n in tr.meta["notes"])
    f = tr.flows.iloc[0]
    assert f["protocol"] == "DCCP"
    assert f["role"] == "server"
    assert not bool(f["sending"])  # delivered bytes, not offered
    # Whole run: 3100 datagrams in 2.4 s = 3100*1424*8/2.4 bit/s.
    assert f["end_receiver_bps"] == pytest.approx(3100 * MPS * 8 / 2.4)
    assert math.isnan(f["end_sender_bps"])  # the server never learns the sender's count
    assert f["start_s"] == 0.0
    assert tr.meta["interval_s"] == 1.0
    assert tr.meta["tool_version"] == "fairlab-dccpgen 0.1.0"
    src = tr.meta["sources"][0]
    assert src["protocol"] == "DCCP" and src["test_start"]["blksize"] == MPS


def test_two_dccp_flows_line_up_on_their_millisecond_stamps():
    tr = load([A, B])
    # B's connection started 1500 ms after A's (start.timestamp.timemillisecs).
    assert tr.meta["alignment"]["precision_s"] == 0.001
    assert list(tr.flows["start_s"]) == [0.0, 1.5]
    t, bps = series(tr, 1)
    # 500 and 1500 datagrams: 500*1424*8 = 5.696 Mbit/s, 1500*1424*8 = 17.088 Mbit/s,
    # at interval ends 1 s and 2 s after B's start.
    assert t == [2.5, 3.5]
    assert bps == [5_696_000.0, 17_088_000.0]
    assert tr.flows.iloc[1]["end_receiver_bps"] == pytest.approx(2000 * MPS * 8 / 2.0)


def test_a_real_tcp_loopback_run_of_the_binary_loads_with_its_own_numbers():
    raw = json.loads(TCP_SERVER.read_text())
    assert raw["generator"] == "fairlab-dccpgen"
    tr = load(TCP_SERVER)
    t, bps = series(tr, 0)
    streams = [iv["streams"][0] for iv in raw["intervals"]]
    assert len(streams) == 4  # --time 2 --interval 0.5
    assert t == [s["end"] for s in streams]
    assert bps == pytest.approx([s["bytes"] * 8 / s["seconds"] for s in streams], rel=1e-12)
    total = sum(s["bytes"] for s in streams)
    assert raw["end"]["sum_received"]["bytes"] == total
    assert tr.flows.iloc[0]["end_receiver_bps"] == pytest.approx(total * 8 / streams[-1]["end"])
    assert tr.flows.iloc[0]["protocol"] == "TCP"


def test_the_client_side_report_is_a_sender_file():
    raw = json.loads(TCP_CLIENT.read_text())
    tr = load(TCP_CLIENT)
    f = tr.flows.iloc[0]
    assert f["role"] == "client" and bool(f["sending"])
    sent = raw["end"]["sum_sent"]["bytes"]
    assert f["end_sender_bps"] == pytest.approx(sent * 8 / raw["end"]["sum_sent"]["seconds"])
    assert math.isnan(f["end_receiver_bps"])
    # What the server got cannot exceed what the client's socket accepted, up to
    # the one 16-KiB send that returned after the client's deadline.
    got = json.loads(TCP_SERVER.read_text())["end"]["sum_received"]["bytes"]
    assert 0 < got <= sent + 16384


@settings(max_examples=40, deadline=None)
@given(counts=st.lists(st.integers(min_value=0, max_value=10**7), min_size=1, max_size=8))
def test_any_datagram_counts_come_back_as_bytes_times_eight_per_second(counts):
    doc = json.loads(A.read_text())
    template = doc["intervals"][0]
    doc["intervals"] = []
    for k, n in enumerate(counts):
        iv = copy.deepcopy(template)
        for part in (iv["streams"][0], iv["sum"]):
            part.update(start=float(k), end=float(k + 1), seconds=1.0, bytes=n * MPS,
                        bits_per_second=n * MPS * 8.0, packets=n)
        doc["intervals"].append(iv)
    tr = load(io.BytesIO(json.dumps(doc).encode()))
    t, bps = series(tr, 0)
    assert t == [float(k + 1) for k in range(len(counts))]
    assert bps == [n * MPS * 8.0 for n in counts]


# --------------------------------------------------------------------- a real DCCP run
GUEST_DCCP = DATA / "dccpgen_guest_dccp_server.json"
GUEST_TCP = DATA / "dccpgen_guest_tcp_server.json"
GUEST_DCCP_CLIENT = DATA / "dccpgen_guest_dccp_client.json"
GUEST_LINK_BPS = 10_000_000  # htb rate of the guest's bottleneck (tests/data/README.md)


def test_real_ccid2_and_tcp_flows_from_the_guest_share_the_link():
    """A 6.1 guest, one DCCP/CCID2 and one TCP flow through a 10 Mbit/s htb
    bottleneck for 20 s: the importer's rates are the files' bytes*8/seconds,
    and together the flows deliver no more than the link carries but most of it."""
    raw = {p: json.loads(p.read_text()) for p in (GUEST_DCCP, GUEST_TCP)}
    tr = load([GUEST_DCCP, GUEST_TCP])
    assert list(tr.flows["protocol"]) == ["DCCP", "TCP"]
    assert raw[GUEST_DCCP]["end"]["sender_dccp_ccid"] == 2
    for flow, path in enumerate((GUEST_DCCP, GUEST_TCP)):
        streams = [iv["streams"][0] for iv in raw[path]["intervals"]]
        assert len(streams) == 20
        _, bps = series(tr, flow)
        assert bps == pytest.approx([s["bytes"] * 8 / s["seconds"] for s in streams], rel=1e-12)
    # DCCP datagrams carry the same payload each: bytes = packets * blksize.
    blk = raw[GUEST_DCCP]["start"]["test_start"]["blksize"]
    assert all(iv["streams"][0]["bytes"] == iv["streams"][0]["packets"] * blk for iv in raw[GUEST_DCCP]["intervals"])
    total = float(tr.flows["end_receiver_bps"].sum())
    assert 0.9 * GUEST_LINK_BPS < total < GUEST_LINK_BPS
    # Delivered never exceeds what the DCCP client's socket accepted.
    sent = json.loads(GUEST_DCCP_CLIENT.read_text())["end"]["sum_sent"]["bytes"]
    assert raw[GUEST_DCCP]["end"]["sum_received"]["bytes"] <= sent
