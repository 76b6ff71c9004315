"""Reports and figures: stand-alone set-up and utilisation, per-flow tables for any N,
captions from the parameters used, labels that keep flow identity, citations by
author and year, the figure files, and the notebook API (to_pandas, reprs, ax=)."""

import re
import subprocess
import sys
import xml.etree.ElementTree as ET

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from matplotlib.figure import Figure

import fairlab
from fairlab.campaign.aggregate import ConditionResult, FlowResult
from fairlab.campaign.execute import run_campaign
from fairlab.campaign.plan import condition_label, expand
from fairlab.campaign.store import Store
from fairlab.metrics.stats import run_stats
from fairlab.report.format import fmt_rate, rate_unit
from fairlab.scenario import Scenario
from fairlab.trace import Trace


def constant_trace(rates, seconds=10, rate_bps=None):
    """Flows at constant rates (bit/s) sampled every second for ``seconds`` s."""
    rows = [{"run": 0, "flow": f, "t": float(t), "throughput_bps": r} for f, r in enumerate(rates) for t in range(1, seconds + 1)]
    flows = pd.DataFrame({"flow": range(len(rates)), "label": [f"f{i}" for i in range(len(rates))], "cca": ["reno"] * len(rates)})
    meta = {"interval_s": 1.0}
    if rate_bps is not None:
        meta["resolved_scenario"] = {"bottleneck": {"rate_bps": rate_bps}}
    return Trace.from_frames(pd.DataFrame(rows), flows, meta=meta)


# ---------------------------------------------------------------------- notebook API
def test_to_pandas_gives_hand_computed_means_shares_and_jain():
    a = fairlab.analyze(constant_trace([2e6, 1e6]), window=(0, 10))
    df = a.to_pandas()
    assert list(df.index) == [0, 1]
    assert df["mean_bps"].tolist() == [2e6, 1e6]
    assert df["share"].tolist() == pytest.approx([2 / 3, 1 / 3])
    assert df["samples"].tolist() == [10, 10]
    # Jain of (2, 1) = 9 / (2 * 5) = 0.9, in every interval and of the means
    assert df.attrs["jain_of_means"] == pytest.approx(0.9)
    assert df.attrs["jain_mean_jt"] == pytest.approx(0.9)
    assert a.jain_to_pandas().tolist() == pytest.approx([0.9] * 10)


def test_reprs_are_short_and_html_is_escaped():
    tr = constant_trace([2e6, 1e6])
    tr.flows.loc[0, "label"] = "<b>x</b>"
    a = fairlab.analyze(tr)
    assert len(repr(a)) < 200 and "0.900" in repr(a)
    html = a._repr_html_()
    assert "&lt;b&gt;x&lt;/b&gt;" in html and "<b>x</b>" not in html
    assert "2.00 Mbit/s" in html and "66.7%" in html
    thtml = tr._repr_html_()
    assert "&lt;b&gt;" in thtml and "2 flows, 20 samples" in thtml


def test_importing_plots_keeps_the_users_backend_and_pyplot_unloaded():
    code = (
        "import matplotlib, sys; matplotlib.use('svg');"
        "import fairlab.report.plots, fairlab.report.campaign_report;"
        "assert matplotlib.get_backend() == 'svg', matplotlib.get_backend();"
        "assert 'matplotlib.pyplot' not in sys.modules"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_plot_functions_draw_into_the_given_axes_and_return_its_figure():
    from fairlab.report import plots

    tr = constant_trace([2e6, 1e6], rate_bps=4e6)
    a = fairlab.analyze(tr, window=(3, 8))
    fig = Figure()
    ax = fig.add_subplot()
    assert plots.plot_throughput(tr, window=(3, 8), ax=ax) is fig
    assert len(ax.lines) == 3  # two flows and the link rate
    (span,) = ax.patches  # the shaded window spans exactly 3..8 s
    x0, x1 = span.get_bbox().x0, span.get_bbox().x1
    assert (x0, x1) == pytest.approx((3, 8))
    fig2 = Figure()
    ax2 = fig2.add_subplot()
    assert plots.plot_jain_over_time(tr, a, ax=ax2) is fig2
    t, j = ax2.lines[0].get_data()
    # J(t) over the WHOLE run (1..10 s), not only the window
    assert list(t) == [float(x) for x in range(1, 11)] and np.allclose(j, 0.9)


def test_run_figure_shows_every_recorded_series():
    from fairlab.report.plots import available_panels

    s = Scenario.from_dict({"name": "x", "duration": "6s", "bottleneck": {"rate": "10Mbit"}, "flows": [{"cca": "reno", "rtt": "20ms"}, {"cca": "cubic", "rtt": "20ms"}]})
    tr = fairlab.simulate(s)
    cols = [c for _, c in available_panels(tr)]
    assert cols[:4] == ["throughput_bps", "", "cwnd_bytes", "srtt_s"] and "queue_bytes" in cols


def test_save_figure_writes_300dpi_png_pdf_and_svg_with_real_text(tmp_path):
    from fairlab.report.plots import plot_throughput
    from fairlab.report.style import save_figure

    fig = plot_throughput(constant_trace([2e6, 1e6]), window=(2, 8))
    png = save_figure(fig, tmp_path, "t")
    w, h = fig.get_size_inches()
    data = png.read_bytes()
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (round(w * 300), round(h * 300))
    assert (tmp_path / "t.pdf").read_bytes()[:5] == b"%PDF-"
    texts = [el.text for el in ET.parse(tmp_path / "t.svg").iter("{http://www.w3.org/2000/svg}text")]
    assert "time (s)" in texts  # text, not glyph paths


# ---------------------------------------------------------------------- formatting
@given(st.floats(min_value=1.0, max_value=1e14, allow_nan=False))
def test_rate_unit_picks_the_largest_prefix_not_above_the_value(bps):
    factor, unit = rate_unit(bps)
    assert factor <= bps and (bps < factor * 1000 or factor == 1e12)
    assert unit.endswith("bit/s")


def test_fmt_rate_matches_iperf_style():
    assert fmt_rate(9.72e7) == "97.20 Mbit/s"
    assert fmt_rate(999.0) == "999 bit/s"
    assert fmt_rate(1e9) == "1.00 Gbit/s"
    assert fmt_rate(None) == "—"


def test_labels_keep_flow_identity():
    assert condition_label({"flows[0].cca": "reno", "flows[1].cca": "cubic"}) == "flows[0].cca=reno; flows[1].cca=cubic"
    assert condition_label({"pair": {"flows[0].cca": "reno", "flows[1].cca": "cubic"}}) == "flows[0].cca=reno, flows[1].cca=cubic"
    assert condition_label({"qdisc": {"label": "zrtt", "bottleneck.qdisc": "zrtt"}, "flows[*].rtt": "50ms"}, leave_out="flows[*].rtt") == "zrtt"
    # A path that names one thing of the whole scenario reads by its name.
    assert condition_label({"flows[*].rtt": "50ms", "bottleneck.buffer": "20%bdp"}) == "RTT 50ms; buffer 20%bdp"


def test_buffer_is_stated_in_bytes_and_percent_of_bdp():
    from fairlab.report.setup import buffer_text

    s = Scenario.from_dict({"name": "x", "duration": "10s", "bottleneck": {"rate": "100Mbit", "buffer": "100%bdp"}, "flows": [{"cca": "reno", "rtt": "100ms"}]})
    # 100 Mbit/s × 100 ms / 8 = 1.25 MB
    assert buffer_text(s) == "1.25 MB (100% of the BDP at 100 ms)"
    s = Scenario.from_dict({"name": "x", "duration": "10s", "bottleneck": {"rate": "10Mbit", "buffer": "200p"}, "flows": [{"cca": "reno", "rtt": "100ms"}]})
    # 200 packets × (1448 + 52) B = 300 kB; BDP = 125 kB → 240 %
    assert buffer_text(s) == "200 packets (≈ 300 kB, 240% of the BDP at 100 ms)"


def test_per_flow_table_summarises_many_flows_with_extremes_and_quantiles():
    from fairlab.report.campaign_report import flow_tables

    flows = [FlowResult(f"f{i}", "reno", 0.02, run_stats([float(i + 1) * 1e6]), 0.0) for i in range(20)]
    r = ConditionResult(condition="c", label="c", point={}, runs=["k"], flows=flows, jain_mean_jt=run_stats([0.9]), jain_of_means=run_stats([0.9]), jain_cv=None)
    (sec,) = flow_tables([r])
    rows = sec.table["rows"]
    assert [row[1] for row in rows[:3]] == ["f19", "f18", "f17"]  # highest first
    assert [row[1] for row in rows[4:7]] == ["f2", "f1", "f0"]  # lowest last
    # quantiles of 1..20 Mbit/s (numpy's linear rule): 1, 2.9, 10.5, 18.1, 20
    assert rows[-1][5] == "1.00 Mbit/s / 2.90 Mbit/s / 10.50 Mbit/s / 18.10 Mbit/s / 20.00 Mbit/s"
    assert "highest/lowest = 20.00" in sec.caption
    # share of flow 20: 20 / 210
    assert rows[0][6] == "9.5%"


# ---------------------------------------------------------------------- a whole report
TINY = {
    "name": "tiny-report",
    "duration": "10s",
    "interval": "1s",
    "window": ["4s", "10s"],
    "seed": 3,
    "runs": 2,
    "bottleneck": {"rate": "10Mbit", "buffer": "100%bdp"},
    "analysis": {"nru": True, "epoch": "2s", "uc": -1.5, "hold": 2},
    "flows": [{"cca": "reno", "rtt": "20ms"}, {"cca": "cubic", "rtt": "20ms", "start": "1s"}],
    # a 6 KB receive window caps each flow at 6 KB / 20 ms ≈ 2.4 Mbit/s: ≈ 48% of the link
    "sweep": {"flows[*].rwnd": ["6KB", "1MB"]},
}


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    from fairlab.report.campaign_report import write_report

    root = tmp_path_factory.mktemp("rep") / "c"
    run_campaign(expand(TINY), Store(root), workers=1)
    out = write_report(root, max_examples=1)
    return out, out["markdown"].read_text(), out["html"].read_text()


def test_report_states_the_setup_of_every_condition(report):
    _, md, _ = report
    for fact in ("10.00 Mbit/s", "25 kB (100% of the BDP at 20 ms)", "droptail", "10 s", "4–10 s", "fairlab simulator", "MSS 1448 B"):
        assert fact in md, fact
    assert "1: reno, RTT 20 ms, start 0 s; 2: cubic, RTT 20 ms, start 1 s" in md


def test_report_flags_low_utilisation_per_condition_and_run(report):
    _, md, html = report
    rows = [ln for ln in md.splitlines() if ln.startswith("| flows[*].rwnd=")]
    low = [ln for ln in rows if "LOW (< 80%)" in ln]
    assert len(low) == 1 and "rwnd=6KB" in low[0]
    # per-run values: two of them, each below the cap 2 × 6 KB × 8 / 20 ms / 10 Mbit/s = 48%
    per_run = re.findall(r"(\d+)%", low[0].split("|")[3])
    assert len(per_run) == 2 and all(int(p) <= 48 for p in per_run)
    assert 'class="flag"' in html


def test_captions_use_the_campaigns_parameters_and_cite_by_author(report):
    _, md, html = report
    assert "U_c = −1.50 dB held for 2 sample(s), from t_e = 2 s" in md
    assert "Bhatti et al. 2009" in md and "## References" in md
    for text in (md, html):
        assert not re.search(r"seed 00\d", text), "a reader does not know what 'seed 000' is"
        assert not re.search(r"0\d\d_[0-9a-f]{16}", text)


def test_report_figures_exist_in_three_formats_and_the_html_is_self_contained(report):
    out, _, html = report
    for stem in ("jain_mean_jt", "jain_of_means", "throughput", "utilisation", "nru", "jt_distribution"):
        for ext in ("png", "pdf", "svg"):
            assert (out["figures"] / f"{stem}.{ext}").exists(), (stem, ext)
    assert html.count("data:image/png;base64,") >= 7
    assert "<script" not in html


def test_campaign_results_to_pandas_and_repr(report):
    out, _, _ = report
    res = fairlab.campaign_results(out["html"].parent)
    df = res.to_pandas()
    assert len(df) == 2 and set(df["runs"]) == {2}
    low, high = df.sort_values("utilisation")["utilisation"].tolist()
    assert low < 0.5 < 0.8 < high <= 1.01
    flows = res.to_pandas(per="flow")
    assert len(flows) == 4 and set(flows["cca"]) == {"reno", "cubic"}
    assert "LOW" not in repr(res) and len(repr(res)) < 120
    assert "flag" in res._repr_html_()


@given(st.lists(st.sampled_from(["reno", "cubic", "bbr", "ccid2"]), min_size=2, max_size=4), st.lists(st.sampled_from(["reno", "cubic", "bbr", "ccid2"]), min_size=2, max_size=4))
def test_labels_of_different_per_flow_assignments_differ(a, b):
    """Two sweep points that give the flows different controls never share a label
    (the old labels dropped the flow index, so reno/cubic and cubic/reno collided)."""
    pa = {f"flows[{i}].cca": c for i, c in enumerate(a)}
    pb = {f"flows[{i}].cca": c for i, c in enumerate(b)}
    assert (condition_label(pa) == condition_label(pb)) == (pa == pb)
    ga, gb = {"pair": pa}, {"pair": pb}
    assert (condition_label(ga) == condition_label(gb)) == (pa == pb)


def test_many_series_become_one_panel_per_value_of_the_next_axis():
    """12 series (3 queue disciplines × 4 traffic mixes) over a buffer axis: three
    panels, one per qdisc, each with the 4 mixes named without the qdisc."""
    from fairlab.report.summary_figures import choose_axis, fig_metric_vs_axis, panels

    sweep = {"bottleneck.buffer": ["10%bdp", "50%bdp"], "bottleneck.qdisc": ["droptail", "red", "choke"], "flows[*].cca": ["reno", "cubic", "bbr", "vegas"]}
    results = []
    for b in sweep["bottleneck.buffer"]:
        for q in sweep["bottleneck.qdisc"]:
            for c in sweep["flows[*].cca"]:
                point = {"bottleneck.buffer": b, "bottleneck.qdisc": q, "flows[*].cca": c}
                results.append(ConditionResult(condition=f"{b}{q}{c}", label="", point=point, runs=["k"], flows=[], jain_mean_jt=run_stats([0.5]), jain_of_means=run_stats([0.5]), jain_cv=None))
    axis = choose_axis(sweep)
    assert axis.key == "bottleneck.buffer"
    ps = panels(results, axis)
    assert [p.title for p in ps] == ["qdisc droptail", "qdisc red", "qdisc choke"]
    assert [name for name, _ in ps[0].series] == ["every flow reno", "every flow cubic", "every flow bbr", "every flow vegas"]
    assert all(len(cells) == 2 for p in ps for _, cells in p.series)  # both buffer values in every series
    fig = fig_metric_vs_axis(results, axis, metric="jain_mean_jt", ylabel="mean of J(t)")
    visible = [ax for ax in fig.axes if ax.get_visible()]
    assert len(visible) == 3 and all(len(ax.lines) >= 4 for ax in visible)
    assert len(fig.legends) == 1 and len(fig.legends[0].get_texts()) == 4  # one shared legend


def test_the_fact_line_counts_the_plans_runs_and_names_older_ones_apart(tmp_path, monkeypatch):
    # A run's key hashes the engine build: runs made by an older build stay in the
    # store but are none of today's plan, and the report neither reads nor counts them.
    from fairlab.campaign import plan
    from fairlab.report.campaign_report import write_report

    doc = {"name": "stale", "duration": "4s", "interval": "1s", "seed": 3, "runs": 2,
           "bottleneck": {"rate": "10Mbit", "buffer": "100%bdp"},
           "flows": [{"cca": "reno", "rtt": "20ms"}, {"cca": "cubic", "rtt": "20ms"}]}
    root = tmp_path / "c"
    with monkeypatch.context() as m:
        m.setattr(plan, "_engine", lambda: "an older engine build")
        run_campaign(expand(doc), Store(root), workers=1)
    run_campaign(expand(doc), Store(root), workers=1)
    assert len(Store(root).done_keys()) == 4
    md = write_report(root, max_examples=0)["markdown"].read_text()
    assert ("2 finished (2 more in the store, made by another engine build, fairlab version or scenario, "
            "not used), 0 failed") in md
    assert "4 finished" not in md


def test_failures_of_other_builds_are_counted_apart_from_the_plans(tmp_path, monkeypatch):
    # Both runs failed under an older build; today's build finished one condition and
    # failed the other. Only today's failure is the plan's ("1 failed", one listed);
    # the older two used to be counted and listed too ("3 failed").
    import fairlab.runner
    from fairlab.campaign import plan
    from fairlab.report.campaign_report import write_report

    real = fairlab.runner.run_scenario

    def fail_at(rtt_ns, reason):
        def run(model, **kw):
            if rtt_ns is None or model.flows[0].rtt == rtt_ns:
                raise RuntimeError(reason)
            return real(model, **kw)
        return run

    doc = {"name": "flaky", "duration": "4s", "interval": "1s", "seed": 3, "runs": 1,
           "bottleneck": {"rate": "10Mbit", "buffer": "100%bdp"},
           "flows": [{"cca": "reno", "rtt": "20ms"}, {"cca": "cubic", "rtt": "20ms"}],
           "sweep": {"flows[0].rtt": ["20ms", "40ms"]}}
    root = tmp_path / "c"
    with monkeypatch.context() as m:
        m.setattr(plan, "_engine", lambda: "an older engine build")
        m.setattr(fairlab.runner, "run_scenario", fail_at(None, "old failure"))
        assert run_campaign(expand(doc), Store(root), workers=1).failed == 2
    with monkeypatch.context() as m:
        m.setattr(fairlab.runner, "run_scenario", fail_at(40_000_000, "today's failure"))
        rep = run_campaign(expand(doc), Store(root), workers=1)
    assert rep.done == 1 and rep.failed == 1 and len(Store(root).failures()) == 3
    md = write_report(root, max_examples=0)["markdown"].read_text()
    assert ("1 finished, 1 failed (2 more in the store, tried by another engine build, fairlab version or scenario, "
            "not listed)") in md
    assert "1 run(s) failed" in md and "today's failure" in md and "old failure" not in md
