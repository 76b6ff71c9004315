"""Exact alignment of real recordings (issue 13 item 1): which samples a window keeps,
how files from separate iperf3 processes are lined up, and user offsets.

Every expected number below is computed by hand from the raw iperf3 JSON (read here
with the json module, not with fairlab's importer) and written out in the comments.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fairlab.analysis import analyze
from fairlab.ingest import IngestError, load
from fairlab.trace import Trace

ROOT = Path(__file__).resolve().parent.parent
REC = ROOT / "examples" / "recordings"
DATA = ROOT / "tests" / "data"


def raw_rates(path: Path) -> list[float]:
    """bits_per_second of the single stream, interval by interval, straight from the file."""
    doc = json.loads(path.read_text())
    return [iv["streams"][0]["bits_per_second"] for iv in doc["intervals"]]


def jain(*xs: float) -> float:
    return sum(xs) ** 2 / (len(xs) * sum(x * x for x in xs))


def test_window_takes_the_intervals_inside_it_on_real_iperf3_stamps():
    """two_clients_cubic.json (CUBIC, 25 s) and two_clients_reno.json (Reno, started
    5 s later by its timesecs stamp). Their interval ends run 43-593 µs past the whole
    second (e.g. 6.000096, 7.000104). `--window 6:25` must keep CUBIC's intervals
    [6,7] ... [24,25] (file intervals 6..24) and Reno's [1,2] ... [19,20] of its own
    clock (intervals 1..19, i.e. 6..25 s after the shift by 5 s).

    By hand (Mbit/s, from the files): CUBIC mean over intervals 6..24 = 53.2255,
    Reno mean over intervals 1..19 = 42.6627, so
    J = (53.2255 + 42.6627)² / (2 · (53.2255² + 42.6627²)) = 9194.5 / 9306.1 = 0.98801.

    The old rule `6 < t <= 25` on raw end stamps took intervals 5..23 and 0..18
    instead — Reno's handshake second (18.8 Mbit/s) and CUBIC's 82 Mbit/s second
    before Reno started — and printed 0.97890 (means 55.064 and 40.965)."""
    cubic, reno = raw_rates(REC / "two_clients_cubic.json"), raw_rates(REC / "two_clients_reno.json")
    tr = load([REC / "two_clients_cubic.json", REC / "two_clients_reno.json"])
    w = tr.window(6, 25)
    got_c = w.samples.loc[w.samples["flow"] == 0, "throughput_bps"].tolist()
    got_r = w.samples.loc[w.samples["flow"] == 1, "throughput_bps"].tolist()
    assert got_c == cubic[6:25]
    assert got_r == reno[1:20]
    result = analyze(tr, window=(6, 25))
    assert result.jain.of_means == pytest.approx(jain(np.mean(cubic[6:25]), np.mean(reno[1:20])), rel=1e-12)
    assert result.jain.of_means == pytest.approx(0.98801, abs=5e-6)
    assert result.jain.of_means != pytest.approx(0.97890, abs=1e-4)


def test_millisecond_stamps_line_files_up_to_the_millisecond():
    """ms_clients_cubic.json: timemillisecs 1795241140821; ms_clients_reno.json:
    1795241142328 — Reno starts 1.507 s later (its timesecs alone say 2 s).

    Window 2:4. CUBIC's intervals [2.001, 3.001] and [3.001, 4.001] lie inside.
    Reno's first interval covers [1.507, 2.515]: 0.515 s of its 1.008 s lie in the
    window, more than half, so it is kept; its second [2.515, 3.510] too.
    By hand: CUBIC mean = (14962.07 + 30305.04)/2 = 22633.56 Mbit/s, Reno mean =
    (5510.32 + 17584.25)/2 = 11547.29 Mbit/s, J = 34180.84² / (2 · (22633.56² +
    11547.29²)) = 0.90482."""
    cubic, reno = raw_rates(DATA / "ms_clients_cubic.json"), raw_rates(DATA / "ms_clients_reno.json")
    tr = load([DATA / "ms_clients_cubic.json", DATA / "ms_clients_reno.json"])
    assert tr.flows["start_s"].tolist() == [0.0, 1.507]
    align = tr.meta["alignment"]
    assert align["uncertainty_s"] == 0.001 and "timemillisecs" in align["method"]
    assert not any("whole seconds" in n for n in tr.meta["notes"])
    result = analyze(tr, window=(2, 4))
    assert result.jain.of_means == pytest.approx(jain(np.mean(cubic[2:4]), np.mean(reno[0:2])), rel=1e-12)
    assert result.jain.of_means == pytest.approx(0.90482, abs=5e-6)


def test_whole_second_stamps_are_reported_as_uncertain_by_a_second():
    tr = load([REC / "two_clients_cubic.json", REC / "two_clients_reno.json"])
    align = tr.meta["alignment"]
    assert align["uncertainty_s"] == 1.0 and align["offsets_s"][str(REC / "two_clients_reno.json")] == 5.0
    assert any("whole seconds" in n and "--offset" in n for n in tr.meta["notes"])


def test_user_offsets_replace_the_stamps_and_a_disagreement_is_warned():
    """Offsets 0 and 5.4 s: Reno's samples are its end stamps + 5.4 (1.000107 + 5.4 =
    6.400107 for the first); the stamps say 5 s, which is within a second: no warning.
    Offsets 0 and 7 s disagree with the stamps by 2 s: a warning note says so."""
    files = [REC / "two_clients_cubic.json", REC / "two_clients_reno.json"]
    tr = load(files, offsets=[0.0, 5.4])
    assert tr.flows["start_s"].tolist() == [0.0, 5.4]
    first_reno = tr.samples.loc[tr.samples["flow"] == 1, "t"].iloc[0]
    assert first_reno == pytest.approx(6.400107, abs=1e-9)
    assert tr.meta["alignment"]["method"].startswith("offsets given by the user")
    assert not any(n.startswith("warning") for n in tr.meta["notes"])
    tr = load(files, offsets=[0.0, 7.0])
    assert any(n.startswith("warning") and "disagree by 2.0 s" in n for n in tr.meta["notes"])
    with pytest.raises(IngestError, match="one per file"):
        load(files, offsets=[1.0])
    with pytest.raises(IngestError, match="finite"):
        load(files, offsets=[0.0, float("nan")])


def test_client_and_server_file_of_one_test_are_refused():
    """Both ends of one test carry one cookie; together they would double every flow."""
    with pytest.raises(IngestError, match="same iperf3 test") as ei:
        load([REC / "iperf3_P8_client.json", REC / "iperf3_P8_server.json"])
    assert "\n" not in str(ei.value)


def _grid_trace(times: list[float], interval: float) -> Trace:
    s = pd.DataFrame({"run": 0, "flow": 0, "t": times, "throughput_bps": np.arange(len(times), dtype=float)})
    return Trace.from_frames(s, pd.DataFrame({"flow": [0], "label": ["a"]}), meta={"interval_s": interval})


def test_window_rule_on_exact_grid_and_on_late_stamps():
    """On the simulator's grid t = 1..10 the window (6, 10] keeps t = 7..10 (intervals
    [6,7]..[9,10]), as `start < t <= end` always did. Stamps 200 µs late keep the same
    four intervals; the old rule kept 6.0002..9.0002 instead."""
    grid = _grid_trace([float(k) for k in range(1, 11)], 1.0)
    assert grid.window(6, 10).samples["t"].tolist() == [7.0, 8.0, 9.0, 10.0]
    late = _grid_trace([k + 0.0002 for k in range(1, 11)], 1.0)
    assert late.window(6, 10).samples["t"].tolist() == pytest.approx([7.0002, 8.0002, 9.0002, 10.0002])
    # a 0.1-s grid: float noise in 0.1·k must not move a sample across the edge
    fine = _grid_trace([round(0.1 * k, 10) for k in range(1, 101)], 0.1)
    assert len(fine.window(2, 3).samples) == 10


def test_live_collect_places_files_at_millisecond_connect_stamps_else_at_launch():
    """The live backend's `_collect`: ms_clients_cubic.json (iperf3 3.21+, timemillisecs
    ...140.821) launched at ...140.800 is placed at its connect stamp, 0.021 s after
    the launch; two_clients_reno.json (iperf3 3.12, whole seconds only) at its launch
    time. t0 (scenario time 0) is ...140.000, so the first CUBIC sample (end 1.001551)
    lands at 0.821 + 1.001551 and Reno's (end 1.000107) at 2.5 + 1.000107."""
    from fairlab.backends.live.runner import _collect, _Flow

    t0 = 1795241140.0
    spec = {"start_ns": 0, "rtt_ns": 20_000_000, "ecn": False, "mss": 1448, "cca": "cubic", "bytes": None}
    flows = [
        _Flow(index=0, label="cubic", spec=spec, offset_s=0.8, seconds=4, port=5201,
              logfile=DATA / "ms_clients_cubic.json", launched_epoch=t0 + 0.800),
        _Flow(index=1, label="reno", spec={**spec, "cca": "reno"}, offset_s=2.5, seconds=20, port=5202,
              logfile=REC / "two_clients_reno.json", launched_epoch=t0 + 2.5),
    ]
    tr = _collect(flows, ["cubic", "reno"], t0, 0, 1.0)
    assert tr.flows["start_s"].tolist() == pytest.approx([0.821, 2.5], abs=1e-6)
    first = tr.samples.groupby("flow")["t"].min()
    assert first[0] == pytest.approx(0.821 + 1.001551, abs=1e-6)
    assert first[1] == pytest.approx(2.5 + 1.000107, abs=1e-6)
    per_flow = tr.meta["alignment"]["per_flow"]
    assert per_flow == {"cubic": "iperf3's millisecond connect stamp", "reno": "the runner's launch time"}
