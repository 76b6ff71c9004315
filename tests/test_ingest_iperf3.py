"""iperf3 -J / --json-stream importer, checked against the raw JSON of REAL recordings.

Every expected value here is computed from the recorded file itself (json.load and
arithmetic in the test), never taken from the importer. The recordings are in
examples/recordings/ (made by tests/record_iperf.py in network namespaces, see
examples/README.md) and tests/data/ (loopback captures and broken files, see
tests/data/README.md).
"""

from __future__ import annotations

import copy
import io
import json
import math
from pathlib import Path

import numpy as np
import pytest

from fairlab.ingest import IngestError, load
from fairlab.trace import Trace

ROOT = Path(__file__).resolve().parent.parent
REC = ROOT / "examples" / "recordings"
DATA = ROOT / "tests" / "data"


def raw(path: Path) -> dict:
    return json.loads(path.read_text())


def jain(xs) -> float:
    """Jain's fairness index, (sum x)^2 / (n sum x^2) — the USC lab's fairness.sh
    formula (seeds/003, section 1.2)."""
    xs = [float(x) for x in xs]
    return sum(xs) ** 2 / (len(xs) * sum(x * x for x in xs))


def kept_intervals(doc: dict) -> list[dict]:
    """Intervals a reader should keep: not omitted, and not a final remainder
    shorter than half the reporting interval (1 s in every recording here)."""
    ivs = [iv for iv in doc["intervals"] if not iv["streams"][0].get("omitted")]
    if len(ivs) > 1 and max(s["seconds"] for s in ivs[-1]["streams"]) < 0.5:
        ivs = ivs[:-1]
    return ivs


# --------------------------------------------------------------------- -P 8 (USC lab)
def test_p8_one_flow_per_stream_and_the_sum_is_not_a_flow():
    doc = raw(REC / "iperf3_P8_client.json")
    tr = load(REC / "iperf3_P8_client.json")
    n = doc["start"]["test_start"]["num_streams"]
    assert n == 8
    assert len(tr.flows) == n == len(doc["end"]["streams"])
    assert list(tr.flows["label"]) == [f"iperf3_P8_client#{k}" for k in range(1, 9)]
    # The per-interval sum would be a ninth series; no flow carries it.
    sums = np.array([iv["sum"]["bits_per_second"] for iv in kept_intervals(doc)])
    for f in tr.flows["flow"]:
        series = tr.samples.loc[tr.samples["flow"] == f, "throughput_bps"].to_numpy()
        assert not np.allclose(series, sums)


def test_p8_flow_means_equal_the_raw_per_stream_means():
    doc = raw(REC / "iperf3_P8_client.json")
    tr = load(REC / "iperf3_P8_client.json")
    means = tr.flow_means()
    for k, sock in enumerate(s["socket"] for s in doc["start"]["connected"]):
        vals = [s["bits_per_second"] for iv in kept_intervals(doc) for s in iv["streams"] if s["socket"] == sock]
        assert means.iloc[k] == pytest.approx(sum(vals) / len(vals), rel=1e-12)


def test_p8_cwnd_rtt_and_retransmits_converted_from_the_raw_stream_records():
    doc = raw(REC / "iperf3_P8_client.json")
    tr = load(REC / "iperf3_P8_client.json")
    sock = doc["start"]["connected"][2]["socket"]
    rec = [s for s in doc["intervals"][4]["streams"] if s["socket"] == sock][0]
    row = tr.samples[(tr.samples["flow"] == 2)].iloc[4]
    assert row["t"] == pytest.approx(rec["end"], abs=1e-9)
    assert row["cwnd_bytes"] == rec["snd_cwnd"]
    assert row["srtt_s"] == pytest.approx(rec["rtt"] / 1e6)
    assert row["rttvar_s"] == pytest.approx(rec["rttvar"] / 1e6)
    assert row["retransmits"] == rec["retransmits"]
    assert set(tr.flows["cca"]) == {doc["end"]["sender_tcp_congestion"]}


def test_p8_jain_index_of_end_summaries_by_hand_equals_the_trace_end_columns():
    doc = raw(REC / "iperf3_P8_client.json")
    tr = load(REC / "iperf3_P8_client.json")
    by_hand_rcv = jain(s["receiver"]["bits_per_second"] for s in doc["end"]["streams"])
    by_hand_snd = jain(s["sender"]["bits_per_second"] for s in doc["end"]["streams"])
    assert jain(tr.flows["end_receiver_bps"]) == pytest.approx(by_hand_rcv, rel=1e-12)
    assert jain(tr.flows["end_sender_bps"]) == pytest.approx(by_hand_snd, rel=1e-12)
    assert 0.125 <= by_hand_rcv <= 1.0


def test_p8_provenance_in_meta():
    doc = raw(REC / "iperf3_P8_client.json")
    tr = load(REC / "iperf3_P8_client.json")
    assert tr.meta["tool"] == "iperf3"
    assert tr.meta["tool_version"] == doc["start"]["version"]
    assert tr.meta["host"] == doc["start"]["system_info"]
    assert tr.meta["interval_s"] == 1.0
    src = tr.meta["sources"][0]
    assert src["path"].endswith("iperf3_P8_client.json")
    assert src["epoch_s"] == doc["start"]["timestamp"]["timesecs"]
    assert "-P 8" in tr.meta["command"] and doc["start"]["connecting_to"]["host"] in tr.meta["command"]
    assert len(src["sha256"]) == 64
    json.dumps(tr.meta)  # JSON-serialisable, as Trace.meta must be


def test_server_side_file_drops_the_remainder_and_says_so():
    doc = raw(REC / "iperf3_P8_server.json")
    last = doc["intervals"][-1]["streams"][0]
    assert last["seconds"] < 0.5, "the recording should end in a short remainder interval"
    tr = load(REC / "iperf3_P8_server.json")
    assert len(tr.samples) == 8 * (len(doc["intervals"]) - 1)
    assert tr.samples["t"].max() <= max(s["start"] for s in doc["intervals"][-1]["streams"]) + 1e-9
    assert any("remainder" in n and f"{last['start']:.3f}" in n for n in tr.meta["notes"])
    # The server received; the sender's totals and cwnd are not in its file.
    assert not tr.flows["sending"].any()
    assert tr.flows["end_sender_bps"].isna().all()
    assert tr.samples["cwnd_bytes"].isna().all()
    assert tr.flows["cca"].isna().all()


def test_client_and_server_files_agree_on_the_receiver_totals():
    cli = load(REC / "iperf3_P8_client.json").flows["end_receiver_bps"].to_numpy()
    srv = load(REC / "iperf3_P8_server.json").flows["end_receiver_bps"].to_numpy()
    assert np.allclose(np.sort(cli), np.sort(srv), rtol=1e-9)


# --------------------------------------------------------------------- two clients
def test_second_client_lands_at_its_start_offset():
    a, b = REC / "two_clients_cubic.json", REC / "two_clients_reno.json"
    da, db = raw(a), raw(b)
    offset = db["start"]["timestamp"]["timesecs"] - da["start"]["timestamp"]["timesecs"]
    assert 4 <= offset <= 6  # started ~5 s later (recording.json says 5)
    tr = load([a, b])
    assert list(tr.flows["label"]) == ["two_clients_cubic", "two_clients_reno"]
    assert list(tr.flows["cca"]) == ["cubic", "reno"]
    assert tr.flows["start_s"].tolist() == [0.0, float(offset)]
    first_reno = tr.samples.loc[tr.samples["flow"] == 1, "t"].min()
    assert first_reno == pytest.approx(offset + db["intervals"][0]["streams"][0]["end"], abs=1e-9)
    assert tr.meta["alignment"]["precision_s"] == 1.0
    assert any("±1 s" in n for n in tr.meta["notes"])
    # Order of the files does not matter: t is from the earliest flow's start.
    tr2 = load([b, a])
    assert tr2.flows.set_index("label")["start_s"].to_dict() == tr.flows.set_index("label")["start_s"].to_dict()


def test_millisecond_timestamps_align_to_the_millisecond():
    a, b = DATA / "ms_clients_cubic.json", DATA / "ms_clients_reno.json"
    ms_a = raw(a)["start"]["timestamp"]["timemillisecs"]
    ms_b = raw(b)["start"]["timestamp"]["timemillisecs"]
    tr = load([a, b])
    assert tr.flows["start_s"].iloc[1] == pytest.approx((ms_b - ms_a) / 1000, abs=1e-9)
    assert tr.meta["alignment"]["precision_s"] == 0.001


def test_labels_argument_and_hash_suffix_for_parallel_files():
    tr = load([REC / "two_clients_cubic.json", REC / "iperf3_R_client.json"], labels=["h1", "h3"])
    assert list(tr.flows["label"]) == ["h1", "h3#1", "h3#2"]
    with pytest.raises(IngestError, match="labels"):
        load([REC / "two_clients_cubic.json"], labels=["a", "b"])


def test_same_stem_twice_is_refused_with_advice(tmp_path):
    d1, d2 = tmp_path / "x", tmp_path / "y"
    d1.mkdir(), d2.mkdir()
    for d, rec in ((d1, "two_clients_cubic.json"), (d2, "two_clients_reno.json")):
        (d / "out.json").write_bytes((REC / rec).read_bytes())
    with pytest.raises(IngestError, match="labels="):
        load([d1 / "out.json", d2 / "out.json"])
    assert len(load([d1 / "out.json", d2 / "out.json"], labels=["a", "b"]).flows) == 2


# --------------------------------------------------------------------- -R, UDP, -O
def test_reverse_mode_client_receives_and_server_sends():
    cli = load(REC / "iperf3_R_client.json")
    srv = load(REC / "iperf3_R_server.json")
    assert raw(REC / "iperf3_R_client.json")["start"]["test_start"]["reverse"] == 1
    assert not cli.flows["sending"].any() and srv.flows["sending"].all()
    assert cli.samples["cwnd_bytes"].isna().all()
    assert srv.samples["cwnd_bytes"].notna().all()
    assert np.allclose(cli.flows["end_sender_bps"], srv.flows["end_sender_bps"])


def test_udp_client_and_server():
    dc, ds = raw(REC / "iperf3_udp_client.json"), raw(REC / "iperf3_udp_server.json")
    cli, srv = load(REC / "iperf3_udp_client.json"), load(REC / "iperf3_udp_server.json")
    assert cli.flows["protocol"].tolist() == ["UDP"] and srv.flows["protocol"].tolist() == ["UDP"]
    assert cli.flows["cca"].isna().all()
    assert cli.flows["end_receiver_bps"].iloc[0] == pytest.approx(dc["end"]["sum_received"]["bits_per_second"])
    assert cli.flows["end_sender_bps"].iloc[0] == pytest.approx(dc["end"]["streams"][0]["udp"]["bits_per_second"])
    assert any("OFFERED" in n for n in cli.meta["notes"])
    # Offered 1.2x the bottleneck: the receiver saw less than was sent.
    assert srv.flow_means().iloc[0] < cli.flow_means().iloc[0]
    assert srv.flow_means().iloc[0] == pytest.approx(
        np.mean([iv["streams"][0]["bits_per_second"] for iv in kept_intervals(ds)]), rel=1e-12)


def test_udp_file_with_no_throughput_is_said(tmp_path):
    doc = raw(REC / "iperf3_udp_server.json")
    for iv in doc["intervals"]:
        for s in iv["streams"]:
            s["bits_per_second"], s["bytes"] = 0, 0
    p = tmp_path / "udp_dead.json"
    p.write_text(json.dumps(doc))
    tr = load(p)
    assert any("UDP flow with no throughput" in n for n in tr.meta["notes"])


def test_mixing_udp_and_tcp_files_is_fine():
    tr = load([REC / "iperf3_udp_server.json", REC / "two_clients_cubic.json"])
    assert sorted(tr.flows["protocol"]) == ["TCP", "UDP"]


def test_omitted_intervals_are_dropped_and_later_ones_shifted():
    doc = raw(DATA / "iperf3_omit_O2.json")
    omitted = [iv for iv in doc["intervals"] if iv["streams"][0]["omitted"]]
    measured = [iv for iv in doc["intervals"] if not iv["streams"][0]["omitted"]]
    tr = load(DATA / "iperf3_omit_O2.json")
    shift = omitted[-1]["streams"][0]["end"]
    assert tr.samples["t"].tolist() == pytest.approx([shift + iv["streams"][0]["end"] for iv in measured])
    assert any("omitted (-O)" in n for n in tr.meta["notes"])


# --------------------------------------------------------------------- --json-stream
def test_json_stream_equals_the_same_data_as_a_json_document():
    lines = [json.loads(x) for x in (REC / "iperf3_stream_P2.jsonl").read_text().splitlines() if x.strip()]
    doc = {"start": lines[0]["data"], "intervals": [x["data"] for x in lines if x["event"] == "interval"],
           "end": [x["data"] for x in lines if x["event"] == "end"][0]}
    assert doc["start"]["version"] >= "iperf 3.17"
    via_stream = load(REC / "iperf3_stream_P2.jsonl")
    via_doc = load(io.BytesIO(json.dumps(doc).encode()), labels=["iperf3_stream_P2"])
    assert via_stream.samples.equals(via_doc.samples)
    assert len(via_stream.flows) == doc["start"]["test_start"]["num_streams"] == 2
    assert via_stream.meta["sources"][0]["format"] == "iperf3 --json-stream"
    assert via_stream.meta["sources"][0]["epoch_s"] == doc["start"]["timestamp"]["timemillisecs"] / 1000


# --------------------------------------------------------------------- file-like input
def test_file_like_inputs_give_the_same_trace():
    p = REC / "two_clients_reno.json"
    by_path = load(p)
    with open(p, "rb") as fb:
        by_binary = load(fb)
    with open(p, encoding="utf-8") as ft:
        by_text = load(ft)
    by_bytesio = load(io.BytesIO(p.read_bytes()), labels=["two_clients_reno"])
    for tr in (by_binary, by_text, by_bytesio):
        assert tr.samples.equals(by_path.samples)
        assert list(tr.flows["label"]) == ["two_clients_reno"]


def test_a_saved_trace_loads_back(tmp_path):
    tr = load(REC / "iperf3_P8_client.json")
    out = tr.to_parquet(tmp_path / "t.parquet")
    back = load(out)
    assert isinstance(back, Trace) and back.samples.equals(tr.samples)


# --------------------------------------------------------------------- refusals
REFUSED = {
    "iperf3_error_refused.json": "Connection refused",
    "iperf3_interrupted.json": "interrupt - the client has terminated",
    "iperf3_stream_error_refused.jsonl": "Connection refused",
    "iperf3_truncated.json": "cut off",
    "iperf3_stream_truncated.jsonl": "cut-off line",
    "iperf3_stream_no_end.jsonl": "without the 'end' event",
    "iperf3_zero_intervals.json": "zero intervals",
    "iperf3_server_two_tests.json": "3 iperf3 JSON documents",
    "iperf3_text_report.txt": "-J",
    "iperf2_text_report.txt": "-y C",
    "random.json": "not iperf3 -J output",
    "ping_log.txt": "ping log",
    "capture.pcap": "packet capture",
    "empty.json": "is empty",
    "whitespace_only.csv": "is empty",
}


def assert_one_sentence_naming(exc: IngestError, path: Path) -> None:
    msg = str(exc)
    assert str(path) in msg, msg
    assert "\n" not in msg and msg.endswith(".") and "Traceback" not in msg
    assert isinstance(exc, ValueError)


@pytest.mark.parametrize("name,phrase", sorted(REFUSED.items()))
def test_bad_and_foreign_files_are_refused_with_one_sentence_naming_the_file(name, phrase):
    path = DATA / name
    with pytest.raises(IngestError) as ei:
        load(path)
    assert_one_sentence_naming(ei.value, path)
    assert phrase in str(ei.value)


@pytest.mark.parametrize("fraction", [0.05, 0.3, 0.5, 0.77, 0.99])
def test_cutting_a_real_file_anywhere_is_refused(tmp_path, fraction):
    data = (REC / "iperf3_P8_client.json").read_bytes()
    p = tmp_path / "cut.json"
    p.write_bytes(data[: int(len(data) * fraction)])
    with pytest.raises(IngestError) as ei:
        load(p)
    assert_one_sentence_naming(ei.value, p)


def test_a_bad_field_is_named_with_its_path(tmp_path):
    doc = raw(REC / "two_clients_reno.json")
    doc["intervals"][3]["streams"][0]["bits_per_second"] = "fast"
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(IngestError, match=r"intervals\[3\]\.streams\[0\]\.bits_per_second") as ei:
        load(p)
    assert_one_sentence_naming(ei.value, p)
    doc2 = copy.deepcopy(raw(REC / "two_clients_reno.json"))
    doc2["intervals"][1]["streams"][0]["bits_per_second"] = -5
    p.write_text(json.dumps(doc2))
    with pytest.raises(IngestError, match="negative"):
        load(p)


def test_missing_path_unknown_fmt_and_unit_for_iperf_are_refused():
    with pytest.raises(IngestError, match="does not exist"):
        load(DATA / "no_such_file.json")
    with pytest.raises(IngestError, match="allowed: auto, iperf3"):
        load(REC / "two_clients_reno.json", fmt="iperf4")
    with pytest.raises(IngestError, match="unit= is only for plain"):
        load(REC / "two_clients_reno.json", unit="Mbps")


def test_mixing_iperf2_and_iperf3_is_refused_with_the_reason():
    with pytest.raises(IngestError, match="cannot be lined up"):
        load([REC / "two_clients_reno.json", REC / "iperf2_P2_client.csv"])


def test_forced_format_that_does_not_fit_is_refused():
    with pytest.raises(IngestError) as ei:
        load(REC / "iperf2_P2_client.csv", fmt="iperf3")
    assert "iperf2_P2_client.csv" in str(ei.value)


def test_one_interval_file_loads():
    doc = raw(DATA / "iperf3_i0_one_interval.json")
    tr = load(DATA / "iperf3_i0_one_interval.json")
    assert len(tr.samples) == 1
    assert tr.samples["throughput_bps"].iloc[0] == doc["intervals"][0]["streams"][0]["bits_per_second"]
    assert math.isfinite(tr.meta["interval_s"])
