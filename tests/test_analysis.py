"""`fairlab.analysis` and `fairlab analyze` against hand calculations."""

import json
import math

import numpy as np
import pandas as pd
import pytest

from cli_helpers import fairlab
from fairlab.analysis import AnalysisError, analyze
from fairlab.trace import Trace


def constant_trace(rates, *, ccas=None, start=None, n=100, labels=None):
    """Flows at constant rates (bit/s) sampled every 1 s for n seconds."""
    rows = []
    for f, r in enumerate(rates):
        s0 = 0 if start is None else start[f]
        rows += [(0, f, float(t), float(r)) for t in range(s0 + 1, n + 1)]
    flows = pd.DataFrame({"flow": range(len(rates)), "label": labels or [f"f{i}" for i in range(len(rates))], "cca": ccas or [None] * len(rates)})
    return Trace.from_frames(pd.DataFrame(rows, columns=["run", "flow", "t", "throughput_bps"]), flows, meta={"interval_s": 1.0})


def test_seed_003_worked_example_through_the_whole_pipeline():
    # 5, 3, 1 Gbit/s -> (9)^2 / (3 * 35) = 81/105 = 0.7714 (seed 003 §1.2)
    a = analyze(constant_trace([5e9, 3e9, 1e9]))
    assert a.jain.mean_jt == pytest.approx(81 / 105)
    assert a.jain.of_means == pytest.approx(81 / 105)


def test_window_is_from_the_earliest_start_and_excludes_single_flow_rows():
    # flow 1 starts at 30 s; over the default window rows 1..30 have one flow only
    tr = constant_trace([60e6, 40e6], start=[0, 30])
    a = analyze(tr)
    assert a.jain.n_samples == 70 and a.jain.n_rows_omitted == 30
    j = (100e6) ** 2 / (2 * (60e6**2 + 40e6**2))
    assert a.jain.mean_jt == pytest.approx(j)
    w = analyze(tr, window=(60, 100))
    assert [f.samples for f in w.flows] == [40, 40]
    assert w.window == (60.0, 100.0)


def test_turn_taking_flows_separate_the_two_jain_variants():
    # Flows alternate 10/0 and 0/10 each second: J(t) = 0.5 always, but equal means.
    rows = [(0, f, float(t), 10.0 if (t + f) % 2 else 0.0) for f in (0, 1) for t in range(1, 11)]
    tr = Trace.from_frames(pd.DataFrame(rows, columns=["run", "flow", "t", "throughput_bps"]), pd.DataFrame({"flow": [0, 1], "label": ["a", "b"]}), meta={"interval_s": 1.0})
    a = analyze(tr)
    assert a.jain.mean_jt == pytest.approx(0.5)
    assert a.jain.of_means == pytest.approx(1.0)


def test_nru_from_calibration_matches_a_hand_calculation():
    # Seed 000 §VI-B style: CCID2 gets 17 where its self-competition mean is 45;
    # CUBIC gets 73 where its self-competition mean is 46 (Mbit/s).
    trace = constant_trace([17e6, 73e6], ccas=["ccid2", "cubic"])
    cal = Trace.from_frames(
        pd.DataFrame([(0, f, float(t), r) for f, r in enumerate([44e6, 46e6, 45e6, 47e6]) for t in range(1, 101)], columns=["run", "flow", "t", "throughput_bps"]),
        pd.DataFrame({"flow": [0, 1, 2, 3], "label": ["c1", "c2", "u1", "u2"], "cca": ["ccid2", "ccid2", "cubic", "cubic"]}),
        meta={"interval_s": 1.0},
    )
    a = analyze(trace, calibration=cal, epoch=30)
    u_ccid2 = 10 * math.log10(17 / 45)  # expected = mean(44, 46) = 45
    u_cubic = 10 * math.log10(73 / 46)  # expected = mean(45, 47) = 46
    assert a.expected_bps == pytest.approx((45e6, 46e6))
    assert a.nru.u_minus == pytest.approx(u_ccid2)
    assert a.nru.u_plus == pytest.approx(u_cubic)
    assert a.nru.case == "B"
    assert a.nru.t_convergence is None  # CCID2 never reaches -0.46 dB
    assert a.flow_convergence[1] == 0.0  # CUBIC is above U_c already at the sample t = t_e = 30 (Eq. 12: t >= t_e)
    doc = a.to_dict()
    assert doc["nru"]["case"] == "B" and doc["nru"]["tuple"]["u_minus"] == pytest.approx(u_ccid2)
    json.dumps(doc, allow_nan=False)  # no NaN anywhere


def test_calibration_that_cannot_be_matched_says_why():
    trace = constant_trace([1e6, 1e6, 1e6], ccas=["bbr", "reno", "cubic"])
    cal = constant_trace([1e6, 1e6], ccas=["reno", "cubic"])
    with pytest.raises(AnalysisError, match="cannot match calibration flows"):
        analyze(trace, calibration=cal)


def test_harm_from_solo_baselines():
    # solo 100, with 60 -> harm 0.4; solo 50 with 80 -> improved, clipped to 0
    a = analyze(constant_trace([60.0, 80.0]), baseline=constant_trace([100.0, 50.0]))
    assert a.harm.per_flow == pytest.approx((0.4, 0.0))
    assert a.harm.n_improved == 1


def test_window_outside_the_trace_is_refused():
    with pytest.raises(AnalysisError, match="trace ends at 100"):
        analyze(constant_trace([1.0, 2.0]), window=(500, 600))


def test_cli_json_is_the_documented_document(tmp_path):
    p = constant_trace([5e9, 3e9, 1e9], labels=["a", "b", "c"]).to_parquet(tmp_path / "t.parquet")
    r = fairlab("analyze", str(p), "--json", "--window", "10:50")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["window"] == [10.0, 50.0]
    assert [f["label"] for f in doc["flows"]] == ["a", "b", "c"]
    assert [f["samples"] for f in doc["flows"]] == [40, 40, 40]
    assert doc["flows"][0]["mean_bps"] == pytest.approx(5e9)
    assert doc["jain"]["mean_jt"] == pytest.approx(81 / 105)
    assert doc["jain"]["of_means"] == pytest.approx(81 / 105)
    assert "nru" not in doc and "harm" not in doc


def test_cli_plot_writes_pngs(tmp_path):
    p = constant_trace([2e6, 1e6]).to_parquet(tmp_path / "t.parquet")
    r = fairlab("analyze", str(p), "--plot", str(tmp_path / "plots"))
    assert r.returncode == 0, r.stderr
    for name in ("throughput.png", "jain_over_time.png"):
        assert (tmp_path / "plots" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("args,needle", [(["--window", "abc"], "--window"), (["--window", "90:10"], "empty")])
def test_cli_bad_arguments_exit_2_with_a_sentence(tmp_path, args, needle):
    p = constant_trace([2e6, 1e6]).to_parquet(tmp_path / "t.parquet")
    r = fairlab("analyze", str(p), *args)
    assert r.returncode == 2
    assert needle in r.stderr and "Traceback" not in r.stderr


def test_the_terminal_table_shows_no_retransmit_count_for_any_dccp_flow(monkeypatch):
    # DCCP never retransmits, so a 0 would read as "no loss". The renderer asks the
    # scenario's protocol of a cca rather than naming CCID2, so a CCID added to
    # DCCP_CCIDS (here a made-up "ccid3") is shown the same way.
    import io

    from rich.console import Console

    from fairlab.cli import render
    from fairlab.scenario import model, protocol

    monkeypatch.setattr(model, "DCCP_CCIDS", frozenset({"ccid2", "ccid3"}))
    assert [protocol(c) for c in ("ccid2", "ccid3", "reno", None)] == ["DCCP", "DCCP", "TCP", None]
    tr = constant_trace([30e6, 30e6, 30e6], ccas=["ccid2", "ccid3", "reno"], labels=["a", "b", "c"], n=10)
    samples = tr.samples.assign(retransmits=pd.array([0] * len(tr.samples), dtype="Int64"))
    tr = Trace.from_frames(samples, tr.flows, meta=tr.meta)
    out = io.StringIO()
    monkeypatch.setattr(render, "console", Console(file=out, width=200, color_system=None))
    render.print_analysis(tr, analyze(tr), ["test"])
    rows = {line.split("│")[1].strip(): line.split("│")[5].strip() for line in out.getvalue().splitlines()
            if line.count("│") >= 7 and line.split("│")[1].strip() in ("a", "b", "c")}
    assert rows == {"a": "—", "b": "—", "c": "0"}


def test_a_backends_warning_is_printed_as_a_warning_and_its_notes_as_notes(monkeypatch):
    import io

    from rich.console import Console

    from fairlab.cli import render

    tr = constant_trace([30e6, 30e6], n=10)
    stalled = "linkem handled 58 packet(s) more than 1 ms after they were due (at worst 4.6 ms)"
    meta = {**tr.meta, "warnings": [stalled], "notes": ["a plain note", stalled]}
    tr = Trace.from_frames(tr.samples, tr.flows, meta=meta)
    out = io.StringIO()
    monkeypatch.setattr(render, "console", Console(file=out, width=400, color_system=None))
    render.print_analysis(tr, analyze(tr), ["test"])
    text = out.getvalue()
    assert f"warning: {stalled}" in text and f"note: {stalled}" not in text
    assert "note: a plain note" in text and "warning: a plain note" not in text
