"""`fairlab report DIR`: tables and figures of a campaign, laid out like the papers'.

A report stands alone: it states the set-up of every condition (rate, buffer, queue
discipline, flows, duration, window, runs, seeds, backend) and the link utilisation
per condition and run, flagging conditions whose flows did not fill the link. The
x-axis of every summary figure and the columns of the wide tables are the campaign's
first swept numeric quantity (else its first axis); every other sweep axis becomes a
series. Writes report.md, a self-contained report.html (figures embedded) and every
figure as PNG (300 dpi), PDF and SVG under figures/. HTML and Markdown come from the
Jinja2 templates in ``report/templates``.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .. import __version__
from ..analysis import analyze
from ..campaign.aggregate import LOW_UTILISATION, ConditionResult, aggregate, campaign_of, fmt_stat
from ..campaign.plan import CALIBRATION, MAIN, SOLO, condition_label
from ..campaign.store import OTHER_ADDRESS, Store, StoreError
from ..metrics.jain import jain_over_time
from .citations import cite, references
from .format import fmt_num, fmt_pct, fmt_rate, fmt_rate_pm, fmt_seconds, rate_unit
from matplotlib.figure import Figure

from .plots import goodput_above_link_note, plot_distributions, plot_run
from .setup import setup_tables, utilisation_table
from .style import save_figure
from .summary_figures import Axis, choose_axis, col_title, fig_jt_boxes, fig_metric_vs_axis, fig_nru_vs_axis, fig_throughput_vs_axis, grid
from .templating import render

__all__ = ["write_report", "tables", "flow_tables", "FLOW_TABLE_LIMIT"]

#: A per-flow table lists every flow up to this many; beyond, it shows quantiles
#: over the flows and the FLOW_EXTREMES flows with the highest and lowest throughput.
FLOW_TABLE_LIMIT = 12
FLOW_EXTREMES = 3


@dataclass
class Section:
    """One titled block of a report: a caption and a table or a figure."""

    title: str
    caption: str
    table: dict[str, Any] | None = None
    figure: Path | None = None
    anchor: str = ""


@dataclass
class Citations:
    """Collects the works a report cites so its reference list names exactly those."""

    keys: list[str] = field(default_factory=list)

    def __call__(self, key: str) -> str:
        self.keys.append(key)
        return cite(key)


def _table(header: list[str], rows: list[list[str]], flags: list[bool] | None = None) -> dict[str, Any]:
    return {"header": header, "rows": rows, "flags": flags}


# ---------------------------------------------------------------------- tables
def _uc_text(results: list[ConditionResult]) -> str:
    """The convergence threshold(s) and hold actually used, as the caption states them."""
    ucs = sorted({r.scenario.analysis.uc for r in results if r.scenario is not None})
    holds = sorted({r.scenario.analysis.hold for r in results if r.scenario is not None})
    epochs = sorted({r.scenario.analysis.epoch / 1e9 for r in results if r.scenario is not None and r.scenario.analysis.epoch is not None})
    uc = " / ".join(fmt_num(u, 2) for u in ucs) + " dB"
    hold = " / ".join(str(h) for h in holds)
    ep = " / ".join(f"{e:g}" for e in epochs)
    return f"U_c = {uc} held for {hold} sample(s), from t_e = {ep} s"


def tables(results: list[ConditionResult], axis: Axis, cite_: Callable[[str], str] = cite) -> list[Section]:
    """The result tables in the layout of the papers' tables: rows = series, columns =
    axis values."""
    g = grid(results, axis)
    out: list[Section] = []
    cols = [col_title(v) for v in axis.values]

    corner = f"series \\ {axis.title}" if axis.key else "series"

    def cells(fmt: Callable[[ConditionResult], str]) -> list[list[str]]:
        return [[s] + [fmt(r) if (r := g.get(s, c)) is not None else "—" for c in g.cols] for s in g.series]

    nflows = max(len(r.flows) for r in results)
    if nflows <= 4:
        all_means = [f.mean_bps.mean for r in results for f in r.flows if f.mean_bps.mean is not None]
        scale, unit = rate_unit(max(all_means) if all_means else 1.0)
        header = [corner] + [f"{c} · flow {i + 1}" for c in cols for i in range(nflows)]
        rows = []
        for s in g.series:
            row = [s]
            for c in g.cols:
                r = g.get(s, c)
                row += [fmt_stat(r.flows[i].mean_bps, scale, 1) if r and i < len(r.flows) else "—" for i in range(nflows)]
            rows.append(row)
        out.append(Section(f"Throughput per flow ({unit})", f"mean ± std over runs over the analysis window; layout of {cite_('001')}, Tables II and V", _table(header, rows)))

    def jfi(r: ConditionResult) -> str:
        j = r.jain_mean_jt
        if j.mean is None:
            return "—"
        if j.std is None:
            return f"{j.mean:.3f}"
        cv = "—" if r.jain_cv is None else f"{r.jain_cv:.2f}"
        return f"{j.mean:.3f} (std {j.std:.3f}, CV {cv})"

    out.append(Section("Jain's fairness index: mean of J(t)", f"J(t) = (Σ r_n(t))² / (N(t) Σ r_n(t)²) over the flows present at t ({cite_('000')}, Eq. 2), averaged over the window; mean over runs with standard deviation and coefficient of variation as in {cite_('001')}, Table III", _table([corner] + cols, cells(jfi))))
    out.append(Section("Jain's index of the flows' mean throughputs", f"Jain's index (Eq. 1 of {cite_('000')}) of each flow's mean throughput over the window — the long-run index of {cite_('004')}, Fig. 3 and {cite_('002')}, Figs. 6–7; mean ± std over runs", _table([corner] + cols, cells(lambda r: fmt_stat(r.jain_of_means, 1.0, 3)))))
    if any(r.nru_tuple_text for r in results):
        out.append(Section("System NRU tuples ⟨U_N+, U_N−, S_N⟩ and Case", f"means over runs; NRU weights from the self-competition calibration runs of each condition ({cite_('000')}, §V-A, Table VI; Cases from its Table II)", _table([corner] + cols, cells(lambda r: f"{r.nru_tuple_text} {r.nru_case or ''}".strip() if r.nru_tuple_text else "—"))))
    if any(r.t_convergence is not None for r in results):

        def tu(r: ConditionResult) -> str:
            if r.t_convergence is None:
                return "—"
            if r.t_convergence.mean is None:
                return f"— (0/{len(r.runs)})"
            return f"{r.t_convergence.mean:.0f} s ({r.n_converged}/{len(r.runs)})"

        conv = [r for r in results if r.t_convergence is not None]
        out.append(Section("Convergence time T_U", f"mean over the runs that converged (their number in brackets); {_uc_text(conv)} ({cite_('000')}, Eqs. 11–12, Table VII)", _table([corner] + cols, cells(tu))))
    if any(r.harm_mean is not None for r in results):
        out.append(Section("Throughput harm per flow", f"(solo − with)/solo against the flow's own solo run ({cite_('ware2019')}); 0 = no harm, 1 = starved; flow 1 / flow 2 / …", _table([corner] + cols, cells(lambda r: " / ".join(fmt_num(h.mean, 2) for h in r.harm_per_flow) if r.harm_per_flow else "—"))))
    return out


def _flow_row(i: int, f: Any, total: float | None, harm: Any) -> list[str]:
    m = f.mean_bps
    share = fmt_pct(m.mean / total, 1) if m.mean is not None and total else "—"
    return [str(i + 1), f.label, f.cca, fmt_seconds(f.rtt_s), fmt_seconds(f.start_s), fmt_rate_pm(m.mean, m.std if m.n >= 2 else None), share, harm]


def flow_tables(results: list[ConditionResult]) -> list[Section]:
    """Per condition, every flow's mean throughput (± std over runs), its share of the
    flows' total and, when computed, its harm — for any number of flows: beyond
    FLOW_TABLE_LIMIT flows the table shows quantiles over the flows and the flows with
    the highest and lowest throughput."""
    out = []
    header = ["flow", "label", "cca", "RTT", "start", "mean throughput", "share", "harm"]
    for r in results:
        means = [f.mean_bps.mean for f in r.flows]
        known = [m for m in means if m is not None]
        total = float(sum(known)) if known else None
        harms = [fmt_num(h.mean, 2) for h in r.harm_per_flow] if r.harm_per_flow else ["—"] * len(r.flows)
        name = condition_label(r.point)
        if len(r.flows) <= FLOW_TABLE_LIMIT:
            rows = [_flow_row(i, f, total, harms[i]) for i, f in enumerate(r.flows)]
            out.append(Section(name, f"{len(r.flows)} flows; {len(r.runs)} run(s)", _table(header, rows)))
            continue
        order = sorted((i for i, m in enumerate(means) if m is not None), key=lambda i: means[i], reverse=True)
        q = np.quantile(known, [0.0, 0.1, 0.5, 0.9, 1.0]) if known else [None] * 5
        summary = [f"quantiles over {len(known)} flows", "", "", "", "", " / ".join(fmt_rate(float(v)) for v in q) if known else "—", "", ""]
        rows = [_flow_row(i, r.flows[i], total, harms[i]) for i in order[:FLOW_EXTREMES]]
        rows.append(["…", f"{len(order) - 2 * FLOW_EXTREMES} more flows", "", "", "", "", "", ""])
        rows += [_flow_row(i, r.flows[i], total, harms[i]) for i in order[-FLOW_EXTREMES:]]
        rows.append(summary)
        ratio = f"; highest/lowest = {known and max(known) / min(known):.2f}" if known and min(known) > 0 else ""
        out.append(Section(name, f"{len(r.flows)} flows, sorted by throughput: the {FLOW_EXTREMES} highest, the {FLOW_EXTREMES} lowest, and min / 10th / median / 90th percentile / max over all flows{ratio}; {len(r.runs)} run(s)", _table(header, rows)))
    for sec, r in zip(out, results):
        if not r.harm_per_flow and sec.table is not None:  # no solo runs: no harm column
            sec.table = _table(sec.table["header"][:-1], [row[:-1] for row in sec.table["rows"]])
    return out


# ---------------------------------------------------------------------- per-run data
def _window_jt(store: Store, r: ConditionResult) -> np.ndarray:
    """Per-interval J(t) in the window, pooled over the condition's runs."""
    s = r.scenario
    vals = []
    for key in r.runs:
        tr = store.load(key)
        w = tr if s is None or s.window is None else tr.window(s.window[0] / 1e9, s.window[1] / 1e9)
        x = w.matrix().to_numpy(dtype=float)
        if x.size:
            vals.append(np.asarray(jain_over_time(x, min_flows=2 if x.shape[1] >= 2 else 1).values))
    return np.concatenate(vals) if vals else np.array([])


def _example(store: Store, r: ConditionResult, outdir: Path, index: int) -> tuple[Path, str]:
    tr = store.load(r.runs[0])
    win = tr.meta.get("summary", {}).get("window")
    a = analyze(tr, window=tuple(win) if win else None)
    title = f"{condition_label(r.point)} — run 0 (RNG seed {tr.meta.get('task', {}).get('seed')})"
    # the run's series over time above the distributions of its per-interval
    # throughput and J(t) in the window: one figure, two matplotlib subfigures
    w, h = plot_run(tr, a).get_size_inches()
    fig = Figure(figsize=(9.5, h + 3.0), layout="constrained")
    top, bottom = fig.subfigures(2, 1, height_ratios=[h, 3.0])
    plot_run(tr, a, title=title, fig=top)
    plot_distributions(tr, run=a.run, window=a.window, fig=bottom, title="within the analysis window")
    note = goodput_above_link_note(tr) or ""
    # diagnostics, embedded in the HTML: one PNG (the three formats would triple the
    # report's time for figures nobody puts in a paper)
    return save_figure(fig, outdir, f"example_{index:03d}", formats=("png",), dpi=110), note


# ---------------------------------------------------------------------- writer
def _preset(source: str | None):
    if source and source.startswith("preset "):
        from ..presets import PRESETS

        return PRESETS.get(source.split(" ", 1)[1])
    return None


def _preset_title(source: str | None) -> str | None:
    p = _preset(source)
    return None if p is None else p.title


def _paper_comparison(source: str | None) -> str | None:
    p = _preset(source)
    return None if p is None else f"{p.compared_in} in fairlab's source (summary: docs/validation.md)"


def _img_data(path: Path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode()


def _img_width(path: Path) -> int:
    """CSS width (px) showing a figure a little above its physical size (120 px per
    inch), so its text reads like the page's whatever dpi the PNG was written at."""
    from PIL import Image

    with Image.open(path) as im:
        dpi = float((im.info.get("dpi") or (100.0, 100.0))[0]) or 100.0
        return round(im.width / dpi * 120)


def write_report(
    root: str | Path,
    *,
    notes: list[str] | None = None,
    max_examples: int = 60,
    low_utilisation: float = LOW_UTILISATION,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Path]:
    """Write report.md, report.html and figures/ into the campaign directory ``root``.

    ``low_utilisation``: conditions whose flows used less than this fraction of the
    link are flagged. ``progress`` is called with a short message per step (the CLI
    prints them; a report of a large campaign takes a while).

    >>> from fairlab.report.campaign_report import write_report
    >>> paths = write_report("out/bhatti2008-dccp-quick")   # doctest: +SKIP
    >>> paths["html"]                                        # doctest: +SKIP
    PosixPath('out/bhatti2008-dccp-quick/report.html')
    """
    say = progress or (lambda _msg: None)
    store = Store(root)
    manifest = store.manifest()
    camp = campaign_of(store)
    say("reading and analysing the runs")
    results = aggregate(store, camp)
    stored = store.done_keys()
    planned = camp.keys
    unused = len(stored - planned)
    if not results or all(not r.runs for r in results):
        other = f" {unused} stored run(s) were made by {OTHER_ADDRESS}, so they have other content addresses;" if unused else ""
        raise StoreError(f"{store.root}: none of this campaign's runs has finished;{other} run the campaign (fairlab run / reproduce) to compute them")
    done = [r for r in results if r.runs]
    axis = choose_axis(camp.sweep)
    figdir = store.root / "figures"
    # figures/ is this report's own output: remove the last report's files so a
    # figure that no longer applies (or an old name) is not left looking current
    if figdir.is_dir():
        for old in figdir.iterdir():
            if old.suffix in (".png", ".pdf", ".svg") and old.is_file():
                old.unlink()
    c = Citations()
    over = axis.title or "condition"

    say("drawing the summary figures")
    figures: list[Section] = []
    multi = any(r.jain_mean_jt.n >= 2 for r in done)
    err = " ± one standard deviation over runs" if multi else " (one run per condition: no error bars)"
    cat = axis.key is not None and grid(done, axis).ticks is not None
    shape = "bars per condition" if cat else "one line per series"
    figures.append(Section(f"Fairness vs {over}: mean of J(t)", f"mean of J(t) over the window{err}; {shape} (as {c('001')}, Figs. 2–3 and {c('000')}, Fig. 3)", figure=save_figure(fig_metric_vs_axis(done, axis, metric="jain_mean_jt", ylabel="mean of J(t)"), figdir, "jain_mean_jt")))
    figures.append(Section(f"Fairness vs {over}: J of mean throughputs", f"Jain's index of the flows' mean throughputs{err} (as {c('004')}, Fig. 3 for buffer sweeps and {c('002')}, Figs. 6–7 for connections and sessions)", figure=save_figure(fig_metric_vs_axis(done, axis, metric="jain_of_means", ylabel="J of mean throughputs"), figdir, "jain_of_means")))
    figures.append(Section(f"Throughput vs {over}", f"mean throughput per flow over the window{err}; one panel per series" + ("; bars in flow order (flow 1 leftmost), coloured by congestion control" if cat else ""), figure=save_figure(fig_throughput_vs_axis(done, axis), figdir, "throughput")))
    figures.append(Section(f"Link utilisation vs {over}", f"the flows' summed mean throughput over the window ÷ bottleneck rate{err}; dotted line: the {fmt_pct(low_utilisation)} threshold below which a condition is flagged", figure=save_figure(fig_metric_vs_axis(done, axis, metric="utilisation", ylabel="link utilisation (%)", percent=True), figdir, "utilisation")))
    nru = fig_nru_vs_axis(done, axis)
    if nru is not None:
        figures.append(Section(f"NRU vs {over}", f"⟨U_N+, U_N, U_N−⟩ per condition, means over runs ({c('000')}, Figs. 4–5)", figure=save_figure(nru, figdir, "nru")))
    say("computing J(t) distributions")
    jt = {r.condition: _window_jt(store, r) for r in done}
    figures.append(Section("Distribution of J(t) per condition", "box: quartiles and median of the per-interval J(t) in the window (all runs pooled); whiskers: 1.5 × the interquartile range", figure=save_figure(fig_jt_boxes(done, jt, axis), figdir, "jt_distribution")))

    examples = []
    for i, r in enumerate(done[:max_examples]):
        say(f"example run {i + 1}/{min(len(done), max_examples)}")
        path, note = _example(store, r, figdir, i)
        examples.append({"label": condition_label(r.point), "path": path, "note": note})
    n_over = sum(1 for e in examples if e["note"])

    tabs = tables(done, axis, c)
    util, n_low = utilisation_table(done, low_utilisation)
    common, varying = setup_tables(done)
    # As with finished runs, count and list only the plan's failures, the rest apart.
    failures, failed_elsewhere = store.failures_of(planned)
    facts = [
        f"campaign: {camp.name} (from {manifest.get('source')}), backend {camp.backend}, fairlab {__version__}",
        f"{len(camp.conditions)} conditions; {camp.count(MAIN)} main runs, {camp.count(CALIBRATION)} calibration runs, {camp.count(SOLO)} solo runs; "
        f"{len(stored & planned)} finished" + (f" ({unused} more in the store, made by {OTHER_ADDRESS}, not used)" if unused else "")
        + f", {len(failures)} failed" + (f" ({failed_elsewhere} more in the store, tried by {OTHER_ADDRESS}, not listed)" if failed_elsewhere else ""),
        f"report written {time.strftime('%Y-%m-%d %H:%M')}",
    ]
    warnings = []
    if n_low:
        warnings.append(f"{n_low} of {len(done)} conditions used less than {fmt_pct(low_utilisation)} of the link (marked LOW below): their flows did not fill the bottleneck, so Jain's index there describes how they shared what they got, not a contended link.")
    examples_caption = "run 0 of each condition: throughput, J(t), cwnd, smoothed RTT, queue length, drops and ECN marks over the whole run (each when recorded); analysis window shaded; dashed line: link rate."
    examples_caption += " Below each: the CDF and box plot (quartiles, whiskers at 1.5 × IQR) of each flow's per-interval throughput, and the CDF of J(t), within the window."
    if n_over:
        examples_caption += (
            f" In {n_over} of {len(examples)} of these runs some samples of the flows' summed goodput exceed the link rate. That is how goodput is"
            " measured, not an error: data is counted when it reaches the receiver in order, so segments held behind a loss are all credited to the"
            " interval in which the retransmission arrives (a receiver-side burst); means over the window are unaffected."
        )
    if failures:
        warnings.append(f"{len(failures)} run(s) failed; see the list at the end.")
    sections = {
        "setup_common": Section("Set-up shared by every condition", "as run (after --quick shortening and sweep assignments); buffer in bytes and as % of the bandwidth-delay product at the BDP reference RTT", common),
        "setup_varying": None if varying is None else Section("Set-up per condition", "the parameters that differ between conditions", varying),
        "utilisation": Section("Link utilisation", f"the flows' summed mean throughput over the window ÷ bottleneck rate, per condition (mean ± std in percentage points over runs) and per run; LOW below {fmt_pct(low_utilisation)}", util),
    }
    context = {
        "title": f"fairlab report — {camp.name}",
        "reproduces": _preset_title(manifest.get("source")),
        "paper_comparison": _paper_comparison(manifest.get("source")),
        "facts": facts,
        "notes": list(notes or []),
        "warnings": warnings,
        "sections": sections,
        "tables": tabs,
        "figures": figures,
        "flow_tables": flow_tables(done),
        "examples": examples,
        "examples_caption": examples_caption,
        "failures": [{"label": f["label"], "run": f["run_index"], "reason": f["reason"].splitlines()[0]} for f in failures],
        "references": references(c.keys),
        "img": _img_data,
        "img_width": _img_width,
    }
    say("writing report.md and report.html")
    (store.root / "report.md").write_text(render("report.md.j2", **context))
    (store.root / "report.html").write_text(render("report.html.j2", **context))
    return {"markdown": store.root / "report.md", "html": store.root / "report.html", "figures": figdir}
