"""Seed 003's lab workflow, verbatim: `fairlab analyze out.json` on an `iperf3 -P 8 -J`
file, and `fairlab analyze h1.json h3.json` on two concurrent clients, checked against
an independent hand computation from the raw JSON (to 4 decimals)."""

import json
from pathlib import Path

import pytest

from cli_helpers import fairlab

REC = Path(__file__).resolve().parent.parent / "examples" / "recordings"


def jain(xs):
    return sum(xs) ** 2 / (len(xs) * sum(x * x for x in xs))


def analyze_json(*files):
    r = fairlab("analyze", *files, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def full_intervals(doc):
    """iperf3's intervals minus its short remainder (< half the reporting interval)."""
    ivs = doc["intervals"]
    step = ivs[0]["sum"]["seconds"]
    return [iv for iv in ivs if iv["sum"]["seconds"] >= step / 2]


def test_parallel_streams_file_matches_a_hand_computation():
    path = REC / "iperf3_P8_client.json"
    raw = json.loads(path.read_text())
    ivs = full_intervals(raw)
    n = len(raw["start"]["connected"])
    assert n == 8
    per_stream = [[iv["streams"][k]["bits_per_second"] for iv in ivs] for k in range(n)]
    means = [sum(v) / len(v) for v in per_stream]
    jt = [jain([per_stream[k][i] for k in range(n)]) for i in range(len(ivs))]
    end = [s["receiver"]["bits_per_second"] for s in raw["end"]["streams"]]
    doc = analyze_json(path)
    assert len(doc["flows"]) == 8  # one flow per stream; the sum is not a flow
    assert doc["jain"]["of_means"] == pytest.approx(jain(means), abs=5e-5)
    assert doc["jain"]["mean_jt"] == pytest.approx(sum(jt) / len(jt), abs=5e-5)
    # the USC lab's fairness.sh number: Jain of the end-of-test summaries
    assert doc["jain"]["end_summary"] == pytest.approx(jain(end), abs=5e-5)
    assert [f["mean_bps"] for f in doc["flows"]] == pytest.approx(means, rel=1e-9)


def test_two_concurrent_client_files_match_a_hand_computation():
    a, b = REC / "two_clients_cubic.json", REC / "two_clients_reno.json"
    ra, rb = json.loads(a.read_text()), json.loads(b.read_text())
    mean_a = [iv["sum"]["bits_per_second"] for iv in full_intervals(ra)]
    mean_b = [iv["sum"]["bits_per_second"] for iv in full_intervals(rb)]
    doc = analyze_json(a, b)
    assert [f["label"] for f in doc["flows"]] == ["two_clients_cubic", "two_clients_reno"]
    assert [f["cca"] for f in doc["flows"]] == ["cubic", "reno"]
    ma, mb = sum(mean_a) / len(mean_a), sum(mean_b) / len(mean_b)
    assert doc["flows"][0]["mean_bps"] == pytest.approx(ma, rel=1e-9)
    assert doc["flows"][1]["mean_bps"] == pytest.approx(mb, rel=1e-9)
    assert doc["jain"]["of_means"] == pytest.approx(jain([ma, mb]), abs=5e-5)
    # the second client started later (timesecs differ): its samples begin later
    offset = rb["start"]["timestamp"]["timesecs"] - ra["start"]["timestamp"]["timesecs"]
    assert offset >= 1
    assert doc["flows"][1]["samples"] == len(mean_b)


@pytest.mark.parametrize("name", ["iperf3_truncated.json", "iperf3_error_refused.json", "ping_log.txt", "random.json", "empty.json"])
def test_broken_and_foreign_files_exit_2_naming_the_file(name):
    path = Path(__file__).resolve().parent / "data" / name
    r = fairlab("analyze", path)
    assert r.returncode == 2
    assert name in r.stderr and "Traceback" not in r.stderr
    assert r.stderr.count("\n") <= 2  # one sentence, not a dump
