"""`fairlab compare`: both backends on one scenario, one run or several.

Runs for real (the simulator, then live: root, iperf3 and an emulation path; skipped
with the reason otherwise). Checked against independent truth: the per-run numbers
are recomputed from the traces the command wrote, the summary's mean and std from the
per-run values, and the seeds from the campaign's derivation.
"""

from __future__ import annotations

import json
import os
import textwrap

import numpy as np
import pytest

from cli_helpers import fairlab
from fairlab.analysis import analyze
from fairlab.campaign.plan import derive_seed
from fairlab.trace import Trace

pytestmark = pytest.mark.live

SCENARIO = textwrap.dedent("""
    name = "compare-test"
    duration = "5s"
    window = ["1s", "5s"]
    seed = 11

    [bottleneck]
    rate = "20Mbit"
    buffer = "100%bdp"

    [[flows]]
    cca = "reno"
    rtt = "20ms"

    [[flows]]
    cca = "cubic"
    rtt = "20ms"
""")


@pytest.fixture(scope="module")
def live_ok() -> None:
    if os.geteuid() != 0:
        pytest.skip("fairlab compare runs live: needs root (network namespaces)")
    from fairlab.backends.live import LiveError, capabilities, preflight
    from fairlab.scenario import Scenario

    caps = capabilities.probe()
    if caps.iperf3 is None:
        pytest.skip("iperf3 is not installed (apt-get install iperf3)")
    probe = Scenario.from_dict({"name": "p", "duration": "5s", "bottleneck": {"rate": "20Mbit", "buffer": "100%bdp"},
                                "flows": [{"cca": "reno", "rtt": "20ms"}]})
    try:
        preflight(probe, caps)
    except LiveError as exc:
        pytest.skip(f"no emulation path on this machine: {exc}")


def run_compare(tmp_path, *args: str) -> dict:
    scen = tmp_path / "s.toml"
    scen.write_text(SCENARIO)
    out = tmp_path / "out"
    p = fairlab("compare", scen, "--out", out, "--json", *args, timeout=180)
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout), out


def test_two_runs_per_backend_are_summarised_from_their_own_traces(tmp_path, live_ok):
    doc, out = run_compare(tmp_path, "--runs", "2")
    assert doc["runs"] == 2
    assert doc["seeds"] == [derive_seed(11, 0), derive_seed(11, 1)] and doc["seeds"][0] == 11
    for backend in ("sim", "live"):
        tr = Trace.from_parquet(out / f"{backend}.parquet")
        assert tr.runs == [0, 1]
        per_run = doc["per_run"][backend]
        assert len(per_run) == 2
        for k in range(2):
            again = analyze(tr, window=(1.0, 5.0), run=k)
            for got, want in zip(per_run[k]["flows"], again.flows):
                assert got["mean_bps"] == pytest.approx(want.mean_bps, rel=1e-12)
        summ = doc["summary"][backend]
        for i, f in enumerate(summ["flows"]):
            xs = np.array([per_run[k]["flows"][i]["mean_bps"] for k in range(2)])
            assert f["mean_bps"]["mean"] == pytest.approx(xs.mean(), rel=1e-12)
            assert f["mean_bps"]["std"] == pytest.approx(xs.std(ddof=1), rel=1e-9, abs=1e-6)
            assert f["mean_bps"]["n"] == 2
        js = np.array([per_run[k]["jain"]["of_means"] for k in range(2)])
        assert summ["jain_of_means"]["mean"] == pytest.approx(js.mean(), rel=1e-12)
    # Both sides ran the same link: each one's total within 20 % of 20 Mbit/s of frames.
    for backend in ("sim", "live"):
        total = sum(f["mean_bps"]["mean"] for f in doc["summary"][backend]["flows"])
        assert 0.75 * 20e6 <= total <= 20e6, (backend, total)
    # The simulator's two seeds give two different runs (seeded variation).
    sim_runs = doc["per_run"]["sim"]
    assert sim_runs[0]["flows"][0]["mean_bps"] != sim_runs[1]["flows"][0]["mean_bps"]


def test_one_run_keeps_the_single_run_document(tmp_path, live_ok):
    doc, out = run_compare(tmp_path)
    assert doc["runs"] == 1 and doc["seeds"] == [11]
    assert doc["sim"] == doc["per_run"]["sim"][0]
    assert doc["summary"]["live"]["flows"][0]["mean_bps"]["std"] is None
    assert Trace.from_parquet(out / "live.parquet").runs == [0]
