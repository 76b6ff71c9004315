"""Figures of one run: throughput, J(t), cwnd, RTT, queue, drops and marks over time,
and distributions (CDF, box plot) of per-interval throughput and J(t).

Notebook use: every ``plot_*`` function draws into ``ax=`` when given (your own
figure, your own backend) and returns the Figure; without ``ax`` it makes a detached
`matplotlib.figure.Figure`. Importing this module changes no matplotlib setting.

    >>> import fairlab
    >>> from fairlab.report.plots import plot_throughput
    >>> trace = fairlab.load("examples/recordings/iperf3_P8_client.json")  # doctest: +SKIP
    >>> fig = plot_throughput(trace, window=(2, 20))                 # doctest: +SKIP
    >>> fig.savefig("throughput.pdf")                                 # doctest: +SKIP

Every time axis shades the analysis window; throughput axes carry SI-prefixed bit/s
ticks and, when the link rate is known, the link rate as a dashed line.
"""

from __future__ import annotations

from pathlib import Path
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import EngFormatter, MaxNLocator

from ..analysis import Analysis
from ..metrics.jain import jain_over_time
from ..trace import Trace
from .style import SERIES_LIMIT, fairlab_style, new_figure, rate_axis, save_figure, series_style, shade_window

__all__ = [
    "goodput_above_link_note",
    "plot_ack_traces",
    "link_rate_bps",
    "plot_analysis",
    "plot_bottleneck",
    "plot_distributions",
    "plot_flow_series",
    "plot_jain_over_time",
    "plot_run",
    "plot_throughput",
]

#: per-flow columns a time-series panel can show: column → (axis label, formatter unit)
FLOW_SERIES: dict[str, tuple[str, str]] = {
    "throughput_bps": ("throughput", "bit/s"),
    "cwnd_bytes": ("cwnd", "B"),
    "srtt_s": ("smoothed\nRTT", "s"),
}
#: router-side columns: column → (axis label, formatter unit)
BOTTLENECK_SERIES: dict[str, tuple[str, str]] = {
    "queue_bytes": ("queue\nlength", "B"),
    "drops": ("drops\n(per interval)", ""),
    "marks": ("ECN marks\n(per interval)", ""),
}


# ---------------------------------------------------------------------- helpers
def _run_of(trace: Trace, run: int | None) -> int:
    runs = trace.runs
    return (runs[0] if runs else 0) if run is None else run


def _axes(ax: Axes | None, figsize: tuple[float, float] | None = None) -> tuple[Figure, Axes]:
    if ax is not None:
        return ax.get_figure(), ax
    fig, new = new_figure(figsize=figsize)
    return fig, new


def link_rate_bps(trace: Trace) -> float | None:
    """The bottleneck rate the run was made with (simulated or emulated), if recorded."""
    resolved = trace.meta.get("resolved_scenario") or {}
    rate = (resolved.get("bottleneck") or {}).get("rate_bps")
    return float(rate) if rate else None


def goodput_above_link_note(trace: Trace, run: int | None = None) -> str | None:
    """A caption sentence when some per-interval aggregate goodput exceeds the link rate.

    It is not an error: goodput is counted when data reaches the receiving application
    in order, so the segments held behind a lost one are all credited to the interval
    in which the retransmission fills the hole; and iperf3's interval boundaries are
    the receiver's clock, not the link's. The mean over a window is unaffected.
    """
    rate = link_rate_bps(trace)
    if rate is None:
        return None
    m = trace.matrix(run=_run_of(trace, run))
    total = m.sum(axis=1, min_count=1).dropna()
    over = total[total > rate * 1.005]
    if over.empty:
        return None
    return (
        f"In {len(over)} of {len(total)} intervals the flows' summed goodput exceeds the {EngFormatter(unit='bit/s')(rate)} link "
        f"(at most {EngFormatter(unit='bit/s', places=1)(float(over.max()))}): goodput is counted when data reaches the receiver in order, "
        "so data held behind a lost segment is credited to the interval in which its retransmission arrives (a receiver-side burst); "
        "means over the window are unaffected."
    )


def _flow_groups(n: int) -> list[list[int]]:
    """Column indices split into panels of at most SERIES_LIMIT flows (small multiples)."""
    k = int(np.ceil(n / SERIES_LIMIT)) or 1
    return [list(range(i * SERIES_LIMIT, min(n, (i + 1) * SERIES_LIMIT))) for i in range(k)]


def _draw_flows(ax: Axes, m: pd.DataFrame, labels: dict[int, str], cols: list[int], *, scale: float = 1.0) -> None:
    for j, fid in enumerate(cols):
        col = m[fid].dropna()
        st = series_style(j)
        ax.plot(col.index, col.to_numpy() / scale, label=labels.get(fid, str(fid)), color=st["color"], linestyle=st["linestyle"], linewidth=1.0)


def _draw_quantile_band(ax: Axes, m: pd.DataFrame, *, scale: float = 1.0, what: str = "flows") -> None:
    """For many flows: median, 10–90 % band and min–max envelope over flows at each t."""
    q = m.quantile([0.0, 0.1, 0.5, 0.9, 1.0], axis=1).T / scale
    ax.fill_between(q.index, q[0.0], q[1.0], color="#0072B2", alpha=0.12, linewidth=0, label=f"min–max over {m.shape[1]} {what}")
    ax.fill_between(q.index, q[0.1], q[0.9], color="#0072B2", alpha=0.3, linewidth=0, label="10–90th percentile")
    ax.plot(q.index, q[0.5], color="#0072B2", linewidth=1.2, label="median")


def _legend(ax: Axes, n: int) -> None:
    if n:
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7.5 if n > 6 else 8)


# ---------------------------------------------------------------------- one quantity
def plot_throughput(
    trace: Trace,
    *,
    run: int | None = None,
    window: tuple[float, float] | None = None,
    ax: Axes | None = None,
    title: str | None = None,
    flows: list[int] | None = None,
) -> Figure:
    """Per-flow throughput over the whole run, the analysis window shaded and the link
    rate (when recorded) dashed. More than `SERIES_LIMIT` flows on one axis are drawn
    as a median with 10–90 % and min–max bands (`plot_run` splits them into panels)."""
    with fairlab_style():
        fig, ax = _axes(ax)
        m = trace.matrix(run=_run_of(trace, run))
        cols = list(m.columns) if flows is None else [m.columns[i] for i in flows]
        if len(cols) <= SERIES_LIMIT:
            _draw_flows(ax, m, trace.labels, cols)
        else:
            _draw_quantile_band(ax, m[cols])
        rate = link_rate_bps(trace)
        if rate is not None:
            ax.axhline(rate, color="black", linestyle="--", linewidth=0.8, label="link rate")
        shade_window(ax, window)
        rate_axis(ax)
        ax.set_ylim(bottom=0)
        ax.set_xlabel("time (s)")
        ax.set_ylabel("throughput")
        if title:
            ax.set_title(title)
        _legend(ax, len(cols) + 2)
    return fig


def _jt_whole_run(trace: Trace, run: int | None) -> tuple[np.ndarray, np.ndarray]:
    m = trace.matrix(run=_run_of(trace, run))
    x = m.to_numpy(dtype=float)
    series = jain_over_time(x, min_flows=2 if x.shape[1] >= 2 else 1)
    return m.index.to_numpy(dtype=float)[series.rows], np.asarray(series.values)


def plot_jain_over_time(
    trace: Trace,
    analysis: Analysis | None = None,
    *,
    run: int | None = None,
    window: tuple[float, float] | None = None,
    ax: Axes | None = None,
    title: str | None = None,
) -> Figure:
    """J(t) (Jain's index over the flows present at t, Bhatti et al. 2009 Eq. 2) over
    the whole run, like throughput, with the window shaded; with ``analysis``, its two
    summary values (mean of J(t), J of the mean throughputs) as reference lines."""
    if analysis is not None:
        run = analysis.run if run is None else run
        window = analysis.window if window is None else window
    with fairlab_style():
        fig, ax = _axes(ax)
        t, j = _jt_whole_run(trace, run)
        ax.plot(t, j, color="#0072B2", linewidth=1.0, label="J(t)")
        if analysis is not None and analysis.jain.mean_jt is not None:
            ax.axhline(analysis.jain.mean_jt, color="#E69F00", linestyle="--", linewidth=1.0, label=f"mean of J(t) in window = {analysis.jain.mean_jt:.3f}")
        if analysis is not None and analysis.jain.of_means is not None:
            ax.axhline(analysis.jain.of_means, color="#009E73", linestyle=":", linewidth=1.2, label=f"J of mean throughputs = {analysis.jain.of_means:.3f}")
        shade_window(ax, window)
        n = max(len(trace.flows), 1)
        ax.set_ylim(max(0.0, 1.0 / n - 0.05), 1.02)
        ax.set_xlabel("time (s)")
        ax.set_ylabel("Jain's index J(t)")
        if title:
            ax.set_title(title)
        ax.legend(loc="lower right")
    return fig


def plot_flow_series(
    trace: Trace,
    column: str,
    *,
    run: int | None = None,
    window: tuple[float, float] | None = None,
    ax: Axes | None = None,
    flows: list[int] | None = None,
) -> Figure:
    """One recorded per-flow series over time: ``cwnd_bytes``, ``srtt_s`` or
    ``throughput_bps`` (see `FLOW_SERIES`); flows with no value are left out."""
    name, unit = FLOW_SERIES[column]
    with fairlab_style():
        fig, ax = _axes(ax)
        m = trace.matrix(run=_run_of(trace, run), column=column)
        cols = list(m.columns) if flows is None else [m.columns[i] for i in flows]
        if len(cols) <= SERIES_LIMIT:
            _draw_flows(ax, m, trace.labels, cols)
        else:
            _draw_quantile_band(ax, m[cols])
        shade_window(ax, window, label=False)
        ax.yaxis.set_major_formatter(EngFormatter(unit=unit))
        ax.set_ylim(bottom=0)
        ax.set_xlabel("time (s)")
        ax.set_ylabel(name)
    return fig


def plot_bottleneck(
    trace: Trace,
    column: str,
    *,
    run: int | None = None,
    window: tuple[float, float] | None = None,
    ax: Axes | None = None,
) -> Figure:
    """A router-side series over time: ``queue_bytes``, ``drops`` or ``marks`` (counts
    per sampling interval); raises ValueError when the trace has no such samples."""
    b = trace.bottleneck
    if b is None or column not in b.columns:
        raise ValueError(f"this trace has no bottleneck {column} samples")
    name, unit = BOTTLENECK_SERIES[column]
    r = _run_of(trace, run)
    s = b[b["run"] == r]
    with fairlab_style():
        fig, ax = _axes(ax)
        y = pd.to_numeric(s[column], errors="coerce").to_numpy(dtype=float)
        if column == "queue_bytes":
            ax.plot(s["t"], y, color="#D55E00", linewidth=0.8)
            ax.yaxis.set_major_formatter(EngFormatter(unit=unit))
        else:
            ax.step(s["t"], y, where="pre", color="#CC79A7" if column == "marks" else "#D55E00", linewidth=0.8)
        shade_window(ax, window, label=False)
        ax.set_ylim(bottom=0)
        ax.set_xlabel("time (s)")
        ax.set_ylabel(name)
    return fig


# ---------------------------------------------------------------------- overview figures
def available_panels(trace: Trace, run: int | None = None) -> list[tuple[str, str]]:
    """The (kind, column) panels a run can show, in reading order: throughput, J(t),
    cwnd, RTT, queue, drops, marks — each only when the backend recorded it."""
    r = _run_of(trace, run)
    s = trace.samples[trace.samples["run"] == r]
    out = [("flow", "throughput_bps")]
    if len(trace.flows) >= 2:
        out.append(("jain", ""))
    for col in ("cwnd_bytes", "srtt_s"):
        if col in s.columns and s[col].notna().any():
            out.append(("flow", col))
    b = trace.bottleneck
    if b is not None and not b.empty:
        bb = b[b["run"] == r]
        for col in ("queue_bytes", "drops", "marks"):
            if col in bb.columns and pd.to_numeric(bb[col], errors="coerce").fillna(0).any():
                out.append(("bottleneck", col))
    return out


def plot_run(
    trace: Trace,
    analysis: Analysis | None = None,
    *,
    run: int | None = None,
    window: tuple[float, float] | None = None,
    title: str | None = None,
    fig: Figure | None = None,
) -> Figure:
    """Every recorded series of one run, stacked on one time axis: throughput (split
    into panels of at most `SERIES_LIMIT` flows), J(t), cwnd, smoothed RTT, queue
    length, drops and ECN marks, each shown only when recorded; the window shaded."""
    if analysis is not None:
        run = analysis.run if run is None else run
        window = analysis.window if window is None else window
    panels = available_panels(trace, run)
    n = len(trace.flows)
    groups = _flow_groups(n) if n <= 4 * SERIES_LIMIT else [list(range(n))]
    rows: list[tuple[str, str, list[int] | None]] = []
    for kind, col in panels:
        if kind == "flow" and col == "throughput_bps":
            rows += [(kind, col, g) for g in groups]
        elif kind == "flow":
            rows.append((kind, col, groups[0] if len(groups) > 1 else None))
        else:
            rows.append((kind, col, None))
    heights = [2.0 if c == "throughput_bps" else 1.2 for _, c, _ in rows]
    with fairlab_style():
        if fig is None:
            fig = Figure(figsize=(7.5, 0.9 + 1.35 * sum(heights) / 1.2 * 0.85), layout="constrained")
        axes = fig.subplots(len(rows), 1, sharex=True, squeeze=False, gridspec_kw={"height_ratios": heights})[:, 0]
        for ax, (kind, col, flows) in zip(axes, rows):
            if kind == "flow" and col == "throughput_bps":
                plot_throughput(trace, run=run, window=window, ax=ax, flows=flows)
            elif kind == "flow":
                plot_flow_series(trace, col, run=run, window=window, ax=ax, flows=flows)
                if flows is not None:
                    ax.set_title(f"{FLOW_SERIES[col][0]} of the flows of the first panel".replace(chr(10), " "), fontsize=8, loc="left")
            elif kind == "jain":
                plot_jain_over_time(trace, analysis, run=run, window=window, ax=ax)
                ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0))
            else:
                plot_bottleneck(trace, col, run=run, window=window, ax=ax)
        for ax in axes[:-1]:
            ax.set_xlabel("")
        # "link rate" and "analysis window" once, in the first panel's legend
        for ax in axes[1:]:
            if ax.get_legend() is not None:
                pairs = [(h, lab) for h, lab in zip(*ax.get_legend_handles_labels()) if lab not in ("link rate", "analysis window")]
                ax.legend([h for h, _ in pairs], [lab for _, lab in pairs], loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7.5)
        if title:
            fig.suptitle(title, fontsize=10)
    return fig


def _interval_values(trace: Trace, run: int | None, window: tuple[float, float] | None) -> tuple[pd.DataFrame, np.ndarray]:
    w = trace if window is None else trace.window(*window)
    m = w.matrix(run=_run_of(trace, run))
    x = m.to_numpy(dtype=float)
    js = jain_over_time(x, min_flows=2 if x.shape[1] >= 2 else 1).values if x.size else np.array([])
    return m, np.asarray(js)


def plot_distributions(
    trace: Trace,
    *,
    run: int | None = None,
    window: tuple[float, float] | None = None,
    fig: Figure | None = None,
    title: str | None = None,
) -> Figure:
    """Within the window: the CDF and a box plot of each flow's per-interval
    throughput, and the CDF of J(t). More than `SERIES_LIMIT` flows are pooled by
    congestion control in the CDF (the box plot keeps one box per flow up to 40)."""
    m, js = _interval_values(trace, run, window)
    labels = trace.labels
    ccas = dict(zip(trace.flows["flow"].astype(int), trace.flows["cca"].astype("string").fillna("?")))
    with fairlab_style():
        if fig is None:
            fig = Figure(figsize=(10.0, 3.4), layout="constrained")
        ax_cdf, ax_box, ax_j = fig.subplots(1, 3, gridspec_kw={"width_ratios": [1.2, 1.2, 1.0]})
        groups: list[tuple[str, np.ndarray]]
        if m.shape[1] <= SERIES_LIMIT:
            groups = [(labels[f], m[f].dropna().to_numpy()) for f in m.columns]
        else:
            by: dict[str, list[np.ndarray]] = {}
            for f in m.columns:
                by.setdefault(str(ccas[f]), []).append(m[f].dropna().to_numpy())
            groups = [(f"{c} (all {len(v)} flows)", np.concatenate(v)) for c, v in by.items()]
        for i, (name, v) in enumerate(groups):
            if v.size:
                xs = np.sort(v)
                st = series_style(i)
                ax_cdf.step(xs, np.arange(1, xs.size + 1) / xs.size, where="post", color=st["color"], linestyle=st["linestyle"], label=name)
        rate_axis(ax_cdf, "x")
        ax_cdf.xaxis.set_major_locator(MaxNLocator(4))  # SI-labelled ticks are wide
        ax_cdf.tick_params(axis="x", labelrotation=20)
        ax_cdf.set_xlabel("throughput per interval")
        ax_cdf.set_ylabel("fraction of intervals ≤ x")
        ax_cdf.set_ylim(0, 1.01)
        ax_cdf.legend(loc="upper left", fontsize=7)
        box_cols = list(m.columns)[:40]
        data = [m[f].dropna().to_numpy() for f in box_cols]
        ax_box.boxplot(data, showfliers=False, widths=0.6, medianprops={"color": "#D55E00"})
        ax_box.set_xticks(range(1, len(box_cols) + 1))
        ax_box.set_xticklabels([labels[f] for f in box_cols], rotation=45 if len(box_cols) > 4 else 0, ha="right" if len(box_cols) > 4 else "center", fontsize=7)
        rate_axis(ax_box)
        ax_box.set_ylabel("throughput per interval")
        ax_box.set_ylim(bottom=0)
        ax_box.grid(axis="x", visible=False)
        if len(m.columns) > 40:
            ax_box.set_title(f"first 40 of {len(m.columns)} flows", fontsize=8)
        if js.size:
            xs = np.sort(js)
            ax_j.step(xs, np.arange(1, xs.size + 1) / xs.size, where="post", color="#0072B2")
        ax_j.set_xlabel("J(t)")
        ax_j.set_ylabel("fraction of intervals ≤ x")
        lo = float(js.min()) if js.size else 1.0 / max(m.shape[1], 1)
        ax_j.set_xlim(max(0.0, np.floor((lo - 0.02) * 10) / 10), 1.01)
        ax_j.set_ylim(0, 1.01)
        if title:
            fig.suptitle(title, fontsize=10)
    return fig


def plot_analysis(trace: Trace, analysis: Analysis, outdir: str | Path) -> list[Path]:
    """Figures of one `analyze` result, each as PNG (300 dpi), PDF and SVG: throughput
    and J(t) over time, every recorded series of the run, and the distributions.
    Returns the PNG paths."""
    outdir = Path(outdir)
    win = analysis.window
    return [
        save_figure(plot_throughput(trace, run=analysis.run, window=win, title="Throughput per flow"), outdir, "throughput"),
        save_figure(plot_jain_over_time(trace, analysis, title="Jain's fairness index over time"), outdir, "jain_over_time"),
        save_figure(plot_run(trace, analysis), outdir, "run_timeseries"),
        save_figure(plot_distributions(trace, run=analysis.run, window=win), outdir, "distributions"),
    ]


# ---------------------------------------------------------------------- per-ACK traces
#: How each backend's per-ACK trace is drawn (the kernel's as the reference, solid).
_ACK_TRACE_STYLE = {"vm": {"color": "#000000", "linewidth": 0.9}, "sim": {"color": "#D55E00", "linewidth": 0.9, "linestyle": "--"}}


def plot_ack_traces(
    traces: dict[str, pd.DataFrame],
    labels: dict[int, str],
    *,
    window: tuple[float, float] | None = None,
    until_s: float | None = None,
) -> Figure:
    """Each flow's congestion window, ACK by ACK, from several backends' per-ACK
    traces (`backends/ack_trace.py` columns), one panel per flow: the simulator's
    controller beside the kernel's in the same scenario. ``until_s`` cuts the time
    axis (slow start and the first losses are where traces part)."""
    flows = sorted({int(f) for frame in traces.values() for f in frame["flow"].unique()})
    with fairlab_style():
        fig, axes = new_figure(len(flows) or 1, 1, figsize=(7.0, 1.9 * max(len(flows), 1) + 0.4), sharex=True, squeeze=False)
        for row, fid in enumerate(flows):
            ax = axes[row][0]
            for name, frame in traces.items():
                g = frame[frame["flow"] == fid]
                if until_s is not None:
                    g = g[g["t"] <= until_s]
                style = _ACK_TRACE_STYLE.get(name, {"linewidth": 0.9})
                ax.step(g["t"], g["cwnd_segments"], where="post", label=name, **style)
            shade_window(ax, window, label=False)
            ax.set_ylim(bottom=0)
            ax.set_ylabel(f"{labels.get(fid, str(fid))}\ncwnd (segments)")
            ax.yaxis.set_major_locator(MaxNLocator(4))
            if row == 0:
                ax.legend(loc="upper right", fontsize=8)
        axes[-1][0].set_xlabel("time (s)")
    return fig

