"""Fresh recordings: run tests/record_iperf.py (3-s runs across a tbf bottleneck in
network namespaces) into tests/_recorded/ and parse what it made.

Needs root, iperf3, ip and tc; otherwise every test here is skipped with the reason.
The committed recordings in examples/recordings/ are tested regardless
(test_ingest_iperf3.py, test_ingest_iperf2.py).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fairlab.ingest import load

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "_recorded"
RECORDER = ROOT / "tests" / "record_iperf.py"

sys.path.insert(0, str(RECORDER.parent))
from record_iperf import PREFIX, missing_requirements  # noqa: E402

pytestmark = pytest.mark.live


def _namespaces() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


@pytest.fixture(scope="session")
def recorded() -> Path:
    why = missing_requirements("iperf3")
    if why:
        pytest.skip(f"needs root and iperf3: {why}")
    before = {n for n in _namespaces() if n.startswith(PREFIX)}
    if OUT.exists():
        shutil.rmtree(OUT)
    cmd = [sys.executable, str(RECORDER), "--out", str(OUT), "--set", "quick"]
    if os.environ.get("FAIRLAB_IPERF3_STREAM"):  # an iperf3 >= 3.17 for the --json-stream file
        cmd += ["--iperf3-stream", os.environ["FAIRLAB_IPERF3_STREAM"]]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    after = {n for n in _namespaces() if n.startswith(PREFIX)}
    assert after <= before, f"the recorder left namespaces behind: {sorted(after - before)}"
    if proc.returncode != 0:
        pytest.fail(f"recorder failed: {proc.stderr.strip()}")
    return OUT


def _manifest(d: Path) -> dict:
    return json.loads((d / "recording.json").read_text())


def test_fresh_p8_client(recorded):
    p = recorded / "iperf3_P8_client.json"
    doc = json.loads(p.read_text())
    tr = load(p)
    assert len(tr.flows) == 8 == doc["start"]["test_start"]["num_streams"]
    ivs = [iv for iv in doc["intervals"] if min(s["seconds"] for s in iv["streams"]) >= 0.5]
    for k, sock in enumerate(s["socket"] for s in doc["start"]["connected"]):
        vals = [s["bits_per_second"] for iv in ivs for s in iv["streams"] if s["socket"] == sock]
        assert tr.flow_means().iloc[k] == pytest.approx(np.mean(vals), rel=1e-12)
    # The bottleneck is real: eight streams together stay under the tbf rate (100 Mbit/s).
    assert doc["end"]["sum_received"]["bits_per_second"] < 105e6


def test_fresh_two_clients_offset(recorded):
    m = _manifest(recorded)
    delay = m["files"]["two_clients_reno.json"]["started_after_s"]
    tr = load([recorded / "two_clients_cubic.json", recorded / "two_clients_reno.json"])
    assert list(tr.flows["cca"]) == ["cubic", "reno"]
    # timesecs are whole seconds: the offset is good to ±1 s.
    assert abs(tr.flows["start_s"].iloc[1] - delay) <= 1.0 + 0.2
    assert tr.samples.loc[tr.samples["flow"] == 1, "t"].min() >= delay - 1.2 + 0.9


def test_fresh_server_reverse_and_udp_files(recorded):
    for name in ("iperf3_P8_server.json", "iperf3_R_client.json", "iperf3_R_server.json",
                 "iperf3_udp_client.json", "iperf3_udp_server.json"):
        tr = load(recorded / name)
        assert len(tr.samples) > 0 and (tr.samples["throughput_bps"] >= 0).all()
    assert load(recorded / "iperf3_R_server.json").flows["sending"].all()
    assert load(recorded / "iperf3_udp_client.json").flows["protocol"].tolist() == ["UDP"]


def test_fresh_iperf2(recorded):
    p = recorded / "iperf2_P2_client.csv"
    if not p.exists():
        pytest.skip("iperf2 ('iperf') is not installed, so the recorder made no iperf2 file")
    tr = load(p)
    assert len(tr.flows) == 2


def test_fresh_json_stream(recorded):
    p = recorded / "iperf3_stream_P2.jsonl"
    if not p.exists():
        pytest.skip("the installed iperf3 has no --json-stream (needs >= 3.17; point FAIRLAB_IPERF3_STREAM at one); "
                    "the committed examples/recordings/iperf3_stream_P2.jsonl is tested instead")
    assert len(load(p).flows) == 2
