"""Scale (issue 13 item 6, issue 15 item 3): analysis and planning linear in flows, and
per-flow results that stay exactly what a per-flow computation gives.

Before: `analyze` filtered the samples and rebuilt `Trace.labels` once per flow (a
10,001-flow run: 137 s of analysis after 8 s of simulation), and `plan` summed the
flow counts per label over every flow and deep-copied the whole scenario per solo
run (10,001 flows: 79 s; 1,000 flows with harm: 7.5 s). The time bounds below are
~50x what the linear code needs on a loaded 2-core machine and far below what the
quadratic code took, so they fail on a regression, not on a busy machine.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fairlab.analysis import analyze
from fairlab.campaign.plan import SOLO, expand
from fairlab.ingest import load
from fairlab.metrics import jain_index
from fairlab.scenario import Scenario
from fairlab.trace import Trace

RECORDINGS = Path(__file__).resolve().parent.parent / "examples" / "recordings"


def naive_flow_summaries(trace: Trace, window: tuple[float, float], run: int) -> list[dict]:
    """The per-flow reference: filter the window's samples flow by flow and average
    with numpy. Slow, obviously right, independent of `analysis._flow_summaries`."""
    lo, hi = window
    s = trace.samples
    # The documented window rule (docs/trace.md): a sample covers (t - interval, t]
    # and is kept when its interval's midpoint lies in (lo, hi].
    mid = s["t"] - trace.interval / 2
    s = s[(mid > lo + 1e-9) & (mid <= hi + 1e-9) & (s["run"] == run)]
    out = []
    for _, row in trace.flows.iterrows():
        fs = s[s["flow"] == row["flow"]]
        tp = fs["throughput_bps"].to_numpy(dtype=float)
        rex = fs["retransmits"].dropna().to_numpy(dtype=np.int64)
        srtt = fs["srtt_s"].dropna().to_numpy(dtype=float)
        out.append(
            {
                "flow": int(row["flow"]),
                "label": str(row["label"]),
                "cca": None if pd.isna(row["cca"]) else str(row["cca"]),
                "samples": len(fs),
                "mean_bps": float(np.mean(tp)) if len(tp) else None,
                "retransmits": int(rex.sum()) if len(rex) else None,
                "mean_srtt_s": float(np.mean(srtt)) if len(srtt) else None,
            }
        )
    return out


def assert_flows_match(analysis, reference: list[dict]) -> None:
    assert len(analysis.flows) == len(reference)
    for got, want in zip(analysis.flows, reference):
        for key, value in want.items():
            g = getattr(got, key)
            if isinstance(value, float):
                assert g == pytest.approx(value, rel=1e-12), (want["flow"], key)
            else:
                assert g == value, (want["flow"], key)


@pytest.mark.parametrize(
    "files, window",
    [
        (["iperf3_P8_client.json"], None),
        (["iperf3_P8_server.json"], (2.0, 8.0)),
        (["two_clients_cubic.json", "two_clients_reno.json"], (5.0, 20.0)),
        (["iperf2_P2_server.csv"], None),
        (["iperf3_R_client.json"], None),
    ],
)
def test_per_flow_summaries_of_recordings_equal_a_per_flow_computation(files, window):
    trace = load([str(RECORDINGS / f) for f in files])
    a = analyze(trace, window=window)
    assert_flows_match(a, naive_flow_summaries(trace, a.window, a.run))
    # J of means is Eq. 1 of those per-flow means
    means = [f.mean_bps for f in a.flows if f.mean_bps is not None]
    assert a.jain.of_means == pytest.approx(jain_index(means), rel=1e-12)


def many_flows_trace(n_flows: int, n_samples: int = 20) -> Trace:
    """Flow i sends (i % 4 + 1) Mbit/s from t = 1 to n_samples, except that every
    third flow starts 5 s late; retransmits 1 per sample on even flows (none recorded
    on odd ones); sRTT 10 ms on flows divisible by 5, unknown elsewhere."""
    flow = np.repeat(np.arange(n_flows), n_samples)
    t = np.tile(np.arange(1, n_samples + 1, dtype=float), n_flows)
    keep = ~((flow % 3 == 0) & (t <= 5))
    flow, t = flow[keep], t[keep]
    samples = pd.DataFrame(
        {
            "run": 0,
            "flow": flow,
            "t": t,
            "throughput_bps": (flow % 4 + 1) * 1e6,
            "retransmits": pd.Series(np.ones(flow.size, dtype=np.int64)).astype("Int64").where(flow % 2 == 0, pd.NA),
            "srtt_s": np.where(flow % 5 == 0, 0.010, np.nan),
        }
    )
    flows = pd.DataFrame({"flow": np.arange(n_flows), "label": [f"f{i}" for i in range(n_flows)], "cca": ["reno", "cubic"] * (n_flows // 2)})
    return Trace.from_frames(samples, flows, meta={"interval_s": 1.0})


def test_analysis_of_4000_flows_is_linear_and_matches_hand_values():
    n, T = 4000, 20
    trace = many_flows_trace(n, T)
    t0 = time.perf_counter()
    a = analyze(trace)
    elapsed = time.perf_counter() - t0
    assert elapsed < 10.0, f"analysis of {n} flows took {elapsed:.1f} s (the per-flow code took ~45 s)"
    for i in (0, 1, 2, 3, 5, 10, 3999):
        f = a.flows[i]
        samples = T - 5 if i % 3 == 0 else T
        assert (f.flow, f.label, f.cca, f.samples) == (i, f"f{i}", "reno" if i % 2 == 0 else "cubic", samples)
        assert f.mean_bps == (i % 4 + 1) * 1e6
        assert f.retransmits == (samples if i % 2 == 0 else None)
        assert f.mean_srtt_s == (0.010 if i % 5 == 0 else None)
    # Each flow's mean is its rate; rates 1, 2, 3, 4 Mbit/s in equal numbers give
    # J = (1000 * 10)^2 / (4000 * 1000 * 30) = 100/120 (Eq. 1). J(t) (Eq. 2): rows
    # 6..20 hold every flow (100/120); rows 1..5 only the flows not starting late.
    assert a.jain.of_means == pytest.approx(100 / 120)
    late = np.array([(i % 4 + 1) for i in range(n) if i % 3 != 0], dtype=float)
    j_early = late.sum() ** 2 / (late.size * (late**2).sum())
    assert a.jain.mean_jt == pytest.approx((5 * j_early + 15 * 100 / 120) / 20)
    assert a.jain.n_samples == 20 and a.jain.n_rows_omitted == 0


@st.composite
def random_traces(draw):
    n_flows = draw(st.integers(1, 6))
    rows = []
    for f in range(n_flows):
        times = draw(st.lists(st.integers(1, 15), unique=True, max_size=12))
        for t in times:
            rows.append(
                (
                    0,
                    f,
                    float(t),
                    draw(st.floats(0, 1e10, allow_nan=False)),
                    draw(st.one_of(st.none(), st.integers(0, 1000))),
                    draw(st.one_of(st.none(), st.floats(1e-4, 2.0))),
                )
            )
    if not rows:
        rows.append((0, 0, 1.0, 1.0, None, None))
    samples = pd.DataFrame(rows, columns=["run", "flow", "t", "throughput_bps", "retransmits", "srtt_s"])
    samples["retransmits"] = samples["retransmits"].astype("Int64")
    samples["srtt_s"] = samples["srtt_s"].astype(float)
    ccas = draw(st.lists(st.sampled_from(["reno", "cubic", None]), min_size=n_flows, max_size=n_flows))
    flows = pd.DataFrame({"flow": range(n_flows), "label": [f"x{i}" for i in range(n_flows)], "cca": ccas})
    return Trace.from_frames(samples, flows, meta={"interval_s": 1.0})


@settings(max_examples=80, deadline=None)
@given(random_traces(), st.integers(0, 8), st.integers(1, 8))
def test_property_flow_summaries_equal_per_flow_computation_and_invariants(trace, lo, width):
    window = (float(lo), float(lo + width))
    s = trace.samples
    in_window = s[(s["t"] > window[0]) & (s["t"] <= window[1])]
    if in_window.empty:
        return  # analyze refuses an empty window; covered in test_analysis.py
    a = analyze(trace, window=window)
    reference = naive_flow_summaries(trace, a.window, a.run)
    assert_flows_match(a, reference)
    # invariants: every windowed sample belongs to exactly one flow; a mean lies
    # between that flow's smallest and largest sample
    assert sum(f.samples for f in a.flows) == len(in_window)
    for f in a.flows:
        if f.mean_bps is not None:
            v = in_window.loc[in_window["flow"] == f.flow, "throughput_bps"]
            assert v.min() * (1 - 1e-12) <= f.mean_bps <= v.max() * (1 + 1e-12)
    means = [f.mean_bps for f in a.flows if f.mean_bps is not None]
    if a.jain.of_means is not None:
        assert a.jain.of_means == pytest.approx(jain_index(means), rel=1e-9)
        assert 1 / len(means) - 1e-12 <= a.jain.of_means <= 1 + 1e-12


@settings(max_examples=30, deadline=None)
@given(random_traces(), st.randoms(use_true_random=False))
def test_property_renumbering_flows_permutes_the_summaries(trace, rnd):
    # Flow ids are names: a permutation of them permutes the per-flow rows and leaves
    # every Jain value unchanged.
    ids = list(range(len(trace.flows)))
    perm = ids[:]
    rnd.shuffle(perm)
    mapping = dict(zip(ids, perm))
    s = trace.samples.copy()
    s["flow"] = s["flow"].map(mapping)
    fl = trace.flows.copy()
    fl["flow"] = fl["flow"].map(mapping)
    other = Trace.from_frames(s, fl, meta=trace.meta)
    a, b = analyze(trace), analyze(other)
    by_label = {f.label: f for f in b.flows}
    for f in a.flows:
        g = by_label[f.label]
        assert (g.samples, g.retransmits, g.cca) == (f.samples, f.retransmits, f.cca)
        for key in ("mean_bps", "mean_srtt_s"):
            x, y = getattr(f, key), getattr(g, key)
            assert (x is None and y is None) or math.isclose(x, y, rel_tol=1e-12)
    for key in ("mean_jt", "of_means"):
        x, y = getattr(a.jain, key), getattr(b.jain, key)
        assert (x is None and y is None) or math.isclose(x, y, rel_tol=1e-12)


def scenario_doc(n_flows: int, *, harm: bool = False) -> dict:
    return {
        "name": "many",
        "duration": "10s",
        "bottleneck": {"rate": "1Gbit", "buffer": "100%bdp"},
        **({"analysis": {"harm": True}} if harm else {}),
        "flows": [{"cca": "reno" if i % 2 == 0 else "cubic", "rtt": f"{20 + 20 * (i % 3)}ms"} for i in range(n_flows)],
    }


def test_plan_of_3000_flows_with_harm_is_linear_and_links_each_flow_to_its_solo_run():
    t0 = time.perf_counter()
    camp = expand(scenario_doc(3000, harm=True), source="many.toml")
    elapsed = time.perf_counter() - t0
    assert elapsed < 15.0, f"planning 3,000 flows with harm took {elapsed:.1f} s (the quadratic code took ~70 s)"
    # (cca, rtt) repeats with period 6 (i % 2, i % 3): six distinct solo runs
    solo = [t for t in camp.tasks if t.kind == SOLO]
    assert len(solo) == 6 and len(camp.tasks) == 7
    links = next(iter(camp.links.values()))["solo"]
    key_of = {(t.scenario["flows"][0]["cca"], t.scenario["flows"][0]["rtt"]): t.key for t in solo}
    for i in (0, 1, 2, 5, 6, 2999):
        expected = key_of[("reno" if i % 2 == 0 else "cubic", f"{20 + 20 * (i % 3)}ms")]
        assert links[i] == [expected]
    # a solo document is the scenario with only that flow, count 1, and no [analysis]
    one = next(t for t in solo if t.for_flow == 0).scenario
    assert one["flows"] == [{"cca": "reno", "rtt": "20ms", "count": 1}]
    assert "analysis" not in one and one["bottleneck"] == {"rate": "1Gbit", "buffer": "100%bdp"}


def test_plan_of_10000_flows_by_count_labels_every_flow():
    doc = {"name": "big", "duration": "10s", "bottleneck": {"rate": "10Gbit", "buffer": "100%bdp"}, "flows": [{"cca": "cubic", "rtt": "50ms", "count": 9999}, {"cca": "reno", "rtt": "50ms"}]}
    t0 = time.perf_counter()
    camp = expand(doc, source="big.toml")
    assert time.perf_counter() - t0 < 15.0
    labels = [label for label, _ in camp.tasks[0].model().expanded_flows()]
    assert len(labels) == 10_000
    assert labels[:2] == ["cubic-1", "cubic-2"] and labels[9998] == "cubic-9999" and labels[9999] == "reno"


def test_expanded_flow_labels_number_only_labels_that_repeat():
    doc = {
        "name": "labels",
        "duration": "10s",
        "bottleneck": {"rate": "10Mbit", "buffer": "100%bdp"},
        "flows": [
            {"cca": "reno", "rtt": "10ms", "count": 2},
            {"cca": "cubic", "rtt": "10ms"},
            {"cca": "reno", "rtt": "10ms", "label": "x"},
            {"cca": "reno", "rtt": "20ms"},
        ],
    }
    labels = [label for label, _ in Scenario.from_dict(doc).expanded_flows()]
    assert labels == ["reno-1", "reno-2", "cubic", "x", "reno-3"]


def test_metrics_package_lists_every_public_name_it_loads_lazily():
    import fairlab.metrics as metrics

    import importlib
    import inspect

    for name in metrics.__all__:
        value = getattr(metrics, name)
        # a function or class, never a submodule that happens to share its name
        # (`harm`, `nru`), and the same object the defining submodule holds
        assert not inspect.ismodule(value), name
        module = metrics._LAZY.get(name) or value.__module__.rsplit(".", 1)[-1] if callable(value) else None
        if module is not None:
            assert getattr(importlib.import_module(f"fairlab.metrics.{module}"), name) is value
    assert set(metrics._LAZY) <= set(metrics.__all__)
    with pytest.raises(AttributeError):
        metrics.no_such_metric  # noqa: B018


def test_fairlab_run_imports_only_what_a_simulated_run_needs(tmp_path):
    # Start-up time (issue 15 item 3): a single simulated run must not load the
    # plotting, database, cluster, netlink or statistics libraries, nor the importers,
    # the other backends or the report's figures (its text formatting is fine).
    import subprocess
    import sys

    spec = tmp_path / "two.toml"
    spec.write_text('name = "two"\nduration = "5s"\n[bottleneck]\nrate = "10Mbit"\nbuffer = "100%bdp"\n[[flows]]\ncca = "reno"\nrtt = "20ms"\n[[flows]]\ncca = "cubic"\nrtt = "40ms"\n')
    code = (
        "import sys\n"
        f"sys.argv = ['fairlab', 'run', {str(spec)!r}, '--out', {str(tmp_path / 'out')!r}]\n"
        "from fairlab.cli import main\n"
        "try:\n    main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
        "heavy = ('matplotlib', 'duckdb', 'distributed', 'dask', 'pyroute2', 'scipy', 'fairlab.ingest', 'fairlab.backends.live', 'fairlab.backends.vm', 'fairlab.campaign.store', 'fairlab.report.plots', 'fairlab.report.campaign_report', 'fairlab.metrics.stats')\n"
        "print(sorted(m for m in heavy if m in sys.modules), file=sys.stderr)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out" / "two.parquet").exists()
    assert r.stderr.strip().splitlines()[-1] == "[]"


def test_the_terminal_shows_a_few_of_many_flows_and_says_where_the_rest_are(tmp_path):
    # 100 flows in a plain CSV: the per-flow tables print flows 0-14 and 95-99 and
    # one line for the 80 left out; --json still carries every flow.
    from cli_helpers import fairlab

    rows = ["time,flow,throughput_Mbps"]
    for f in range(100):
        rows += [f"{t},f{f:03d},{1 + f / 100}" for t in range(1, 6)]
    path = tmp_path / "many.csv"
    path.write_text("\n".join(rows) + "\n")
    r = fairlab("analyze", str(path))
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "… 80 more flows (all of them: --json, or the trace file)" in out
    shown = [f"f{k:03d}" for k in (*range(15), *range(95, 100))]
    assert all(s in out for s in shown) and "f015" not in out and "f094" not in out
    doc = fairlab("analyze", str(path), "--json")
    assert doc.returncode == 0 and all(f"f{k:03d}" in doc.stdout for k in range(100))
    # 40 flows or fewer: every one.
    few = tmp_path / "few.csv"
    few.write_text("\n".join(["time,flow,throughput_Mbps"] + [f"{t},g{f:02d},1" for f in range(40) for t in range(1, 6)]) + "\n")
    r = fairlab("analyze", str(few))
    assert r.returncode == 0 and "more flows" not in r.stdout
    assert all(f"g{k:02d}" in r.stdout for k in range(40))
