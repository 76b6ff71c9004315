"""`fairlab report DIR`: tables and figures of a campaign, laid out like the papers'.

The x-axis of every summary figure and the columns of every table are the campaign's
first swept scenario path (RTT for seeds 000/001, buffer size for seed 004, number of
connections or sessions for seed 002); every other sweep axis becomes a series (a line
in a figure, a row in a table). Writes report.md, a self-contained report.html (figures
embedded) and every figure as PNG and SVG under figures/.
"""

from __future__ import annotations

import base64
import html
import json
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from .. import __version__  # noqa: E402
from ..analysis import analyze  # noqa: E402
from ..campaign.aggregate import ConditionResult, aggregate, campaign_of, fmt_stat  # noqa: E402
from ..campaign.plan import CALIBRATION, MAIN, SOLO, format_sweep_value, is_grouped_axis  # noqa: E402
from ..campaign.store import Store, StoreError  # noqa: E402
from ..metrics._common import fmt_num  # noqa: E402
from ..scenario import units  # noqa: E402
from .plots import _STYLE, _rate_scale  # noqa: E402


def _series_style(i: int) -> dict[str, Any]:
    """Distinct colour + line style + marker for up to 60 series (tab10 alone repeats
    after 10, and a reader cannot tell two blue lines apart)."""
    markers = "osD^v<>ph*"
    styles = ["-", "--", ":", "-."]
    return {"color": plt.cm.tab10(i % 10), "linestyle": styles[(i // 10) % 4], "marker": markers[(i // 10 + i) % len(markers)]}

@dataclass
class Axis:
    key: str | None  # the swept path on the x-axis (None: no sweep)
    title: str
    values: list[Any]  # in sweep order


def _axis_value(v: Any) -> tuple[float, str]:
    """A sweep value as a number for plotting, plus its unit, read with the scenario's
    own unit parsers (DESIGN.md: human units are parsed in `scenario` only): durations
    in ms, rates in Mbit/s, buffers in % of BDP, packets or bytes."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v), ""
    for parse, scale, unit in ((units.parse_duration, 1e6, "ms"), (units.parse_rate, 1e6, "Mbit/s")):
        try:
            return parse(v) / scale, unit
        except units.UnitError:
            pass
    try:
        kind, value = units.parse_buffer(v)
    except units.UnitError:
        return float("nan"), ""
    return (value * 100, "% of BDP") if kind == "bdp" else (value, kind)


def _axis_title(key: str, unit: str) -> str:
    leaf = key.split(".")[-1]
    names = {"rtt": "RTT", "buffer": "buffer", "rate": "bottleneck rate", "count": "flows", "cca": "congestion control"}
    name = names.get(leaf, leaf)
    return f"{name} ({unit})" if unit else name


def _choose_axis(sweep: dict[str, list[Any]]) -> Axis:
    for key, values in sweep.items():
        if not is_grouped_axis(key):
            nums = [_axis_value(v) for v in values]
            if all(np.isfinite(n) for n, _ in nums):
                return Axis(key, _axis_title(key, nums[0][1]), values)
    if sweep:
        key = next(iter(sweep))
        return Axis(key, key, sweep[key])
    return Axis(None, "", [None])


def _series_label(point: dict[str, Any], axis: Axis) -> str:
    rest = {k: v for k, v in point.items() if k != axis.key}
    if not rest:
        return "all"
    return ", ".join((format_sweep_value(v) if is_grouped_axis(k) else f"{k.split('.')[-1]}={v}") for k, v in rest.items())


def _fig_files(fig: plt.Figure, outdir: Path, stem: str, *, svg: bool = True) -> Path:
    """Save PNG (and SVG for the summary figures, which people put in papers)."""
    png = outdir / f"{stem}.png"
    fig.savefig(png)
    if svg:
        fig.savefig(outdir / f"{stem}.svg")
    plt.close(fig)
    return png


def _grid(results: list[ConditionResult], axis: Axis) -> tuple[list[str], list[Any], dict[tuple[str, Any], ConditionResult]]:
    series: list[str] = []
    cells: dict[tuple[str, Any], ConditionResult] = {}
    for r in results:
        s = _series_label(r.point, axis)
        if s not in series:
            series.append(s)
        cells[(s, json.dumps(r.point.get(axis.key), default=str))] = r
    return series, [json.dumps(v, default=str) for v in axis.values], cells


def _col_title(v: str) -> str:
    x = json.loads(v)
    return "—" if x is None else format_sweep_value(x)


def _x_positions(cols: list[str]) -> tuple[list[float], list[str] | None]:
    """Numeric x values of the columns, or positions 0..n-1 plus tick labels when the
    axis is categorical (e.g. a grouped axis of experiments)."""
    xs = [_axis_value(json.loads(c))[0] for c in cols]
    if all(np.isfinite(x) for x in xs):
        return xs, None
    return list(range(len(cols))), [_col_title(c) for c in cols]


def _apply_ticks(ax, ticks: list[str] | None) -> None:
    if ticks is not None:
        long = max(len(t) for t in ticks) > 8  # slant long labels so they do not overlap
        ax.set_xticks(range(len(ticks)))
        ax.set_xticklabels(ticks, rotation=20 if long else 0, ha="right" if long else "center", fontsize=8)


# ---------------------------------------------------------------------- figures
def fig_jain_vs_axis(results, axis, outdir: Path, *, which: str = "mean_jt") -> Path:
    """Jain's index per condition, one line per series: ``which`` = "mean_jt" (mean of
    J(t), seed 001 Figs. 2–3) or "of_means" (J of the flows' mean throughputs, the
    long-run index seed 002 Figs. 6–7 and seed 004 Fig. 3 plot)."""
    series, cols, cells = _grid(results, axis)
    xs, ticks = _x_positions(cols)
    what = {"mean_jt": ("mean of J(t)", "jain"), "of_means": ("J of mean throughputs", "jain_of_means")}[which]
    with plt.rc_context(_STYLE):
        fig, ax = plt.subplots()
        for si, s in enumerate(series):
            ys, es, xx = [], [], []
            for x, c in zip(xs, cols):
                r = cells.get((s, c))
                stat = None if r is None else (r.jain_mean_jt if which == "mean_jt" else r.jain_of_means)
                if stat is not None and stat.mean is not None:
                    xx.append(x)
                    ys.append(stat.mean)
                    es.append(stat.std)
            yerr = None if all(e is None for e in es) else [e or 0.0 for e in es]
            ax.errorbar(xx, ys, yerr=yerr, capsize=3, label=s, **_series_style(si))
        ax.set_xlabel(axis.title or "condition")
        _apply_ticks(ax, ticks)
        ax.set_ylabel(f"Jain's index, {what[0]} (no unit)")
        ax.set_ylim(0, 1.05)
        ax.set_title(f"Fairness: {what[0]}" + (" ± std over runs" if any(r.jain_mean_jt.n > 1 for r in results) else ""))
        ncol = 1 if len(series) <= 12 else 2
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, ncol=ncol, fontsize=8 if len(series) > 8 else 9)
        fig.tight_layout()
        return _fig_files(fig, outdir, f"{what[1]}_vs_" + _slug(axis.title or "condition"))


def fig_nru_vs_axis(results, axis, outdir: Path) -> Path | None:
    series, cols, cells = _grid(results, axis)
    if not any(r.nru_u_mean is not None for r in results):
        return None
    xs, ticks = _x_positions(cols)
    n = len(series)
    ncols = min(3, n)
    nrows = int(np.ceil(n / ncols))
    with plt.rc_context(_STYLE):
        fig, axes = plt.subplots(nrows, ncols, figsize=(max(8.0, 4.2 * ncols), 3.6 * nrows), squeeze=False, sharey=True)
        for idx, s in enumerate(series):
            ax = axes[idx // ncols][idx % ncols]
            for x, c in zip(xs, cols):
                r = cells.get((s, c))
                if r is None or r.nru_u_mean is None:
                    continue
                up = r.nru_u_plus.mean if r.nru_u_plus and r.nru_u_plus.mean is not None else None
                um = r.nru_u_minus.mean if r.nru_u_minus and r.nru_u_minus.mean is not None else None
                mid = r.nru_u_mean.mean
                lo = um if um is not None else mid
                hi = up if up is not None else mid
                ax.vlines(x, lo, hi, color="tab:blue")
                ax.plot([x], [mid], "o", color="tab:blue")
                if up is not None:
                    ax.plot([x], [up], "^", color="tab:green")
                if um is not None:
                    ax.plot([x], [um], "v", color="tab:red")
            ax.axhline(0, color="grey", linewidth=0.8)
            ax.set_title(s, fontsize=10)
            ax.set_xlabel(axis.title or "condition")
            _apply_ticks(ax, ticks)
            if idx % ncols == 0:
                ax.set_ylabel("NRU (dB)")
        for idx in range(n, nrows * ncols):
            axes[idx // ncols][idx % ncols].set_visible(False)
        handles = [
            plt.Line2D([], [], marker="^", color="tab:green", linestyle="", label="U_N+ (fair side)"),
            plt.Line2D([], [], marker="o", color="tab:blue", linestyle="", label="U_N (mean)"),
            plt.Line2D([], [], marker="v", color="tab:red", linestyle="", label="U_N− (unfair side)"),
        ]
        fig.legend(handles=handles, loc="lower center", ncol=3, frameon=False)
        fig.suptitle("System NRU tuple ⟨U_N+, U_N, U_N−⟩ (seed 000 Figs. 4–5), mean over runs")
        fig.tight_layout(rect=(0, 0.06, 1, 0.95))
        return _fig_files(fig, outdir, "nru_vs_" + _slug(axis.title or "condition"))


def fig_throughput_vs_axis(results, axis, outdir: Path) -> Path:
    """Mean throughput per flow: lines over a numeric axis, grouped bars (coloured by
    congestion control, like seed 002 Figs. 4–5) over a categorical one."""
    series, cols, cells = _grid(results, axis)
    xs, ticks = _x_positions(cols)
    all_means = [f.mean_bps.mean for r in results for f in r.flows if f.mean_bps.mean is not None]
    scale, unit = _rate_scale(max(all_means) if all_means else 1.0)
    n = len(series)
    ncols = min(3, n)
    nrows = int(np.ceil(n / ncols))
    ccas = sorted({f.cca for r in results for f in r.flows})
    colour = {c: plt.cm.tab10(i % 10) for i, c in enumerate(ccas)}
    with plt.rc_context(_STYLE):
        fig, axes = plt.subplots(nrows, ncols, figsize=(max(8.0, 4.2 * ncols), 3.6 * nrows), squeeze=False, sharey=True)
        for idx, s in enumerate(series):
            ax = axes[idx // ncols][idx % ncols]
            if ticks is not None:
                for x, c in zip(xs, cols):
                    r = cells.get((s, c))
                    if r is None:
                        continue
                    k = len(r.flows)
                    width = 0.8 / max(k, 1)
                    for fi, f in enumerate(r.flows):
                        if f.mean_bps.mean is None:
                            continue
                        ax.bar(x - 0.4 + width * (fi + 0.5), f.mean_bps.mean / scale, width * 0.9, yerr=None if f.mean_bps.std is None else f.mean_bps.std / scale, color=colour[f.cca], capsize=2)
                ax.legend(handles=[plt.Rectangle((0, 0), 1, 1, color=colour[c]) for c in ccas], labels=ccas, fontsize=8, loc="best")
            else:
                nflows = max((len(r.flows) for (ss, _), r in cells.items() if ss == s), default=0)
                for fi in range(nflows):
                    xx, yy, ee, name = [], [], [], None
                    for x, c in zip(xs, cols):
                        r = cells.get((s, c))
                        if r is None or fi >= len(r.flows) or r.flows[fi].mean_bps.mean is None:
                            continue
                        name = f"flow {fi + 1}: {r.flows[fi].cca}"
                        xx.append(x)
                        yy.append(r.flows[fi].mean_bps.mean / scale)
                        ee.append(None if r.flows[fi].mean_bps.std is None else r.flows[fi].mean_bps.std / scale)
                    yerr = None if all(e is None for e in ee) else [e or 0.0 for e in ee]
                    ax.errorbar(xx, yy, yerr=yerr, capsize=2, label=name, **_series_style(fi))
                ax.legend(fontsize=7 if nflows > 8 else 8, loc="best", ncol=2 if nflows > 8 else 1)
            ax.set_title(s, fontsize=10)
            ax.set_xlabel(axis.title or "condition")
            _apply_ticks(ax, ticks)
            if idx % ncols == 0:
                ax.set_ylabel(f"mean throughput ({unit})")
        # Shared y-axes: set the limit once, after every panel has its data, or the
        # first panel's range clips the others.
        axes[0][0].set_ylim(bottom=0, top=max(all_means) / scale * 1.08 if all_means else None)
        for idx in range(n, nrows * ncols):
            axes[idx // ncols][idx % ncols].set_visible(False)
        fig.suptitle("Mean throughput per flow over the analysis window (± std over runs)", fontsize=11)
        fig.tight_layout(rect=(0, 0, 1, 0.95))
        return _fig_files(fig, outdir, "throughput_vs_" + _slug(axis.title or "condition"))


def fig_example_run(store: Store, r: ConditionResult, outdir: Path, index: int) -> Path:
    """Throughput and J(t) over time for run 0 of a condition."""
    tr = store.load(r.runs[0])
    summary = tr.meta.get("summary", {})
    win = summary.get("window")
    a = analyze(tr, window=tuple(win) if win else None)
    m = tr.matrix()
    scale, unit = _rate_scale(float(np.nanmax(m.to_numpy())) if m.size else 1.0)
    with plt.rc_context(_STYLE):
        fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(8, 5.6), sharex=True, gridspec_kw={"height_ratios": [2, 1]})
        many = len(m.columns) > 12
        for i, fid in enumerate(m.columns):
            col = m[fid].dropna()
            # With many flows a legend entry each would not fit: name the first 10.
            ax1.plot(col.index, col.to_numpy() / scale, linewidth=0.8 if many else 1.0, label=tr.labels[fid] if not many or i < 10 else None)
        if win:
            ax1.axvspan(win[0], win[1], color="grey", alpha=0.08, label="analysis window")
        ax1.set_ylabel(f"throughput ({unit})")
        ax1.set_ylim(bottom=0)
        if many:
            ax1.plot([], [], " ", label=f"… and {len(m.columns) - 10} more flows")
        ax1.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=8)
        ax1.set_title(f"{r.label} — run 0 (seed {tr.meta.get('task', {}).get('seed')})", fontsize=10)
        if a.jain_series:
            t, j = zip(*a.jain_series)
            ax2.plot(t, j, linewidth=1.0, color="tab:blue", label="J(t)")
        ax2.set_ylim(0, 1.05)
        ax2.set_ylabel("J(t)")
        ax2.set_xlabel("time (s)")
        ax2.legend(loc="lower right", fontsize=8)
        fig.tight_layout()
        return _fig_files(fig, outdir, f"example_{index:03d}", svg=False)


def _slug(s: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", s.lower()).strip("_") or "x"


# ---------------------------------------------------------------------- tables
def _table(header: list[str], rows: list[list[str]]) -> dict[str, Any]:
    return {"header": header, "rows": rows}


def tables(results: list[ConditionResult], axis: Axis) -> list[tuple[str, str, dict[str, Any]]]:
    """(title, caption, table) in the layout of the seed tables."""
    series, cols, cells = _grid(results, axis)
    out = []
    col_titles = [_col_title(c) for c in cols]
    # Throughput (seed 001 Tables II/V): rows = series, columns = x value × flow
    nflows = max(len(r.flows) for r in results)
    if nflows <= 4:
        all_means = [f.mean_bps.mean for r in results for f in r.flows if f.mean_bps.mean is not None]
        scale, unit = _rate_scale(max(all_means) if all_means else 1.0)
        header = ["series"] + [f"{c} · flow {i + 1}" for c in col_titles for i in range(nflows)]
        rows = []
        for s in series:
            row = [s]
            for c in cols:
                r = cells.get((s, c))
                for i in range(nflows):
                    row.append(fmt_stat(r.flows[i].mean_bps, scale, 1) if r and i < len(r.flows) else "—")
            rows.append(row)
        out.append((f"Throughput ({unit}) per flow", "mean ± std over runs, over the analysis window (seed 001 Tables II and V layout)", _table(header, rows)))
    # JFI with std and CV (seed 001 Table III, seed 000 Table V)
    header = ["series"] + col_titles
    rows = []
    for s in series:
        row = [s]
        for c in cols:
            r = cells.get((s, c))
            if r is None or r.jain_mean_jt.mean is None:
                row.append("—")
            elif r.jain_mean_jt.std is None:  # one run: no spread to show
                row.append(f"{r.jain_mean_jt.mean:.2f}")
            else:
                cv = "—" if r.jain_cv is None else f"{r.jain_cv:.2f}"
                row.append(f"{r.jain_mean_jt.mean:.2f} (std {r.jain_mean_jt.std:.2f}, CV {cv})")
        rows.append(row)
    out.append(("Jain's fairness index (mean of J(t))", "mean over runs with standard deviation and coefficient of variation (seed 001 Table III, seed 000 Table V)", _table(header, rows)))
    rows = []
    for s in series:
        row = [s]
        for c in cols:
            r = cells.get((s, c))
            row.append(fmt_stat(r.jain_of_means, 1.0, 3) if r else "—")
        rows.append(row)
    out.append(("Jain's index of mean throughputs", "Eq. 1 on each flow's mean over the window; mean ± std over runs", _table(header, rows)))
    if any(r.nru_tuple_text for r in results):
        rows = []
        for s in series:
            row = [s]
            for c in cols:
                r = cells.get((s, c))
                row.append(f"{r.nru_tuple_text} {r.nru_case or ''}".strip() if r and r.nru_tuple_text else "—")
            rows.append(row)
        out.append(("System NRU tuples ⟨U_N+, U_N−, S_N⟩ and Case", "means over runs; weights from the automatic self-competition calibration runs (seed 000 Table VI, Table II cases)", _table(header, rows)))
    if any(r.t_convergence is not None for r in results):
        rows = []
        for s in series:
            row = [s]
            for c in cols:
                r = cells.get((s, c))
                if r is None or r.t_convergence is None:
                    row.append("—")
                elif r.t_convergence.mean is None:
                    row.append(f"— (0/{len(r.runs)})")
                else:
                    row.append(f"{r.t_convergence.mean:.0f} s ({r.n_converged}/{len(r.runs)})")
            rows.append(row)
        out.append(("Convergence time T_U", "mean over the runs that converged (their number in brackets), U_c = −0.46 dB (seed 000 Table VII)", _table(header, rows)))
    if any(r.harm_mean is not None for r in results):
        rows = []
        for s in series:
            row = [s]
            for c in cols:
                r = cells.get((s, c))
                if r is None or not r.harm_per_flow:
                    row.append("—")
                else:
                    row.append(" / ".join(fmt_num(h.mean, 2) for h in r.harm_per_flow))
            rows.append(row)
        out.append(("Throughput harm per flow", "Ware et al. 2019: (solo − with)/solo against the flow's own solo run; 0 = no harm, 1 = starved; flow 1 / flow 2 / …", _table(header, rows)))
    return out


# ---------------------------------------------------------------------- writers
def _md_table(t: dict[str, Any]) -> str:
    lines = ["| " + " | ".join(t["header"]) + " |", "|" + "---|" * len(t["header"])]
    lines += ["| " + " | ".join(r) + " |" for r in t["rows"]]
    return "\n".join(lines)


def _html_table(t: dict[str, Any]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in t["header"])
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in t["rows"])
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _img_tag(path: Path) -> str:
    data = base64.b64encode(path.read_bytes()).decode()
    return f'<img alt="{html.escape(path.stem)}" src="data:image/png;base64,{data}">'


def write_report(root: str | Path, *, notes: list[str] | None = None, max_examples: int = 60) -> dict[str, Path]:
    """Write report.md, report.html and figures/ into the campaign directory."""
    store = Store(root)
    manifest = store.manifest()
    camp = campaign_of(store)
    results = aggregate(store, camp)
    if not results or all(not r.runs for r in results):
        stored = len(store.done_keys())
        other = (
            f" {stored} stored run(s) were made by another engine build, fairlab version or scenario, so they have other content addresses;"
            if stored
            else ""
        )
        raise StoreError(f"{store.root}: none of this campaign's runs has finished;{other} run the campaign (fairlab run / reproduce) to compute them")
    axis = _choose_axis(camp.sweep)
    figdir = store.root / "figures"
    figdir.mkdir(exist_ok=True)
    figures: list[tuple[str, str, Path]] = []
    figures.append(("Fairness vs " + (axis.title or "condition") + " (mean of J(t))", "mean of J(t) ± std over runs, one line per series (seed 001 Figs. 2–3, seed 000 Fig. 3)", fig_jain_vs_axis(results, axis, figdir, which="mean_jt")))
    figures.append(("Fairness vs " + (axis.title or "condition") + " (J of mean throughputs)", "Jain's index of the flows' mean throughputs ± std over runs (seed 004 Fig. 3 for buffer sweeps; seed 002 Figs. 6–7 for connections/sessions)", fig_jain_vs_axis(results, axis, figdir, which="of_means")))
    figures.append(("Throughput vs " + (axis.title or "condition"), "mean throughput per flow ± std over runs", fig_throughput_vs_axis(results, axis, figdir)))
    nru_fig = fig_nru_vs_axis(results, axis, figdir)
    if nru_fig:
        figures.append(("NRU vs " + (axis.title or "condition"), "⟨U_N+, U_N, U_N−⟩ per condition (seed 000 Figs. 4–5)", nru_fig))
    examples = [(r, fig_example_run(store, r, figdir, i)) for i, r in enumerate(results[:max_examples]) if r.runs]
    tabs = tables(results, axis)
    failures = store.failures()
    facts = [
        f"campaign: **{camp.name}** (from `{manifest.get('source')}`), backend `{camp.backend}`, fairlab {__version__}",
        f"{len(camp.conditions)} conditions; {camp.count(MAIN)} main runs, {camp.count(CALIBRATION)} calibration runs, {camp.count(SOLO)} solo runs; {len(store.done_keys())} finished, {len(failures)} failed",
        f"report written {time.strftime('%Y-%m-%d %H:%M')}",
    ]
    notes = list(notes or [])
    md = [f"# fairlab report — {camp.name}", ""] + [f"- {f}" for f in facts] + [f"- note: {n}" for n in notes] + [""]
    for title, caption, t in tabs:
        md += [f"## {title}", "", f"_{caption}_", "", _md_table(t), ""]
    for title, caption, p in figures:
        md += [f"## {title}", "", f"_{caption}_", "", f"![{title}](figures/{p.name})", ""]
    md += ["## Example runs", "", "_throughput and J(t) of run 0 of each condition_", ""]
    md += [f"![{r.label}](figures/{p.name})" for r, p in examples]
    if failures:
        md += ["", "## Failed runs", ""] + [f"- {f['label']} run {f['run_index']}: {f['reason'].splitlines()[0]}" for f in failures]
    (store.root / "report.md").write_text("\n".join(md) + "\n")

    css = "body{font-family:system-ui,sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222}table{border-collapse:collapse;margin:1em 0;font-size:0.85em}td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}td:first-child,th:first-child{text-align:left}th{background:#f3f3f3}img{max-width:100%;border:1px solid #eee;margin:0.5em 0}.cap{color:#555;font-style:italic}details{margin:1em 0}"
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>fairlab report — {html.escape(camp.name)}</title><style>{css}</style></head><body>"]
    parts.append(f"<h1>fairlab report — {html.escape(camp.name)}</h1><ul>" + "".join(f"<li>{html.escape(f.replace('**', '').replace('`', ''))}</li>" for f in facts) + "".join(f"<li>note: {html.escape(n)}</li>" for n in notes) + "</ul>")
    for title, caption, t in tabs:
        parts.append(f"<h2>{html.escape(title)}</h2><p class='cap'>{html.escape(caption)}</p>{_html_table(t)}")
    for title, caption, p in figures:
        parts.append(f"<h2>{html.escape(title)}</h2><p class='cap'>{html.escape(caption)}</p>{_img_tag(p)}")
    parts.append("<h2>Example runs</h2><details><summary>throughput and J(t) of run 0 of each condition</summary>" + "".join(_img_tag(p) for _, p in examples) + "</details>")
    if failures:
        parts.append("<h2>Failed runs</h2><ul>" + "".join(f"<li>{html.escape(f['label'])} run {f['run_index']}: {html.escape(f['reason'].splitlines()[0])}</li>" for f in failures) + "</ul>")
    parts.append("</body></html>")
    (store.root / "report.html").write_text("".join(parts))
    return {"markdown": store.root / "report.md", "html": store.root / "report.html", "figures": figdir}
