"""Campaign figures: one number per condition against the first swept quantity.

Rules (issue 14): a numeric axis (RTT, buffer, rate) gets lines with markers; a
categorical one (pairs of controls, queue disciplines, labelled groups) gets bars —
never a line joining categories. More than `SERIES_LIMIT` series become small
multiples. Error bars (± one standard deviation over runs) appear whenever a value
has two or more runs, and only then.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import matplotlib
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from ..campaign.aggregate import ConditionResult
from ..campaign.plan import condition_label, format_sweep_value, is_grouped_axis
from ..metrics.stats import RunStats
from ..scenario import units
from .style import COLOURS, SERIES_LIMIT, fairlab_style, rate_axis, series_style


@dataclass
class Axis:
    key: str | None  # the swept path on the x-axis (None: no sweep)
    title: str
    values: list[Any]  # in sweep order


def axis_value(v: Any) -> tuple[float, str]:
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
    if key.startswith("flows[*]."):
        name += " of every flow"
    return f"{name} ({unit})" if unit else name


def choose_axis(sweep: dict[str, list[Any]]) -> Axis:
    """The first numeric scenario path swept, else the first axis, else none."""
    for key, values in sweep.items():
        if not is_grouped_axis(key):
            nums = [axis_value(v) for v in values]
            if all(np.isfinite(n) for n, _ in nums):
                return Axis(key, _axis_title(key, nums[0][1]), values)
    if sweep:
        key = next(iter(sweep))
        return Axis(key, key, sweep[key])
    return Axis(None, "", [None])


def panel_title(ax: Axes, text: str, width: int = 48) -> None:
    """A panel title wrapped at its "; " and ", " separators so neighbours never overlap."""
    if not text or text == "all":
        return
    lines, cur = [], ""
    for part in re.split(r"(?<=[;,]) ", text):
        if cur and len(cur) + 1 + len(part) > width:
            lines.append(cur)
            cur = part
        else:
            cur = f"{cur} {part}" if cur else part
    lines.append(cur)
    ax.set_title("\n".join(lines), fontsize=8)


def _key(v: Any) -> str:
    return json.dumps(v, default=str, sort_keys=True)


@dataclass
class Grid:
    """Conditions laid out as series (everything but the axis) × columns (axis values)."""

    series: list[str]
    cols: list[str]
    cells: dict[tuple[str, str], ConditionResult]
    xs: list[float]
    ticks: list[str] | None  # tick labels when the axis is categorical

    def get(self, s: str, c: str) -> ConditionResult | None:
        return self.cells.get((s, c))


def col_title(v: Any) -> str:
    return "—" if v is None else format_sweep_value(v)


def grid(results: list[ConditionResult], axis: Axis) -> Grid:
    series: list[str] = []
    cells: dict[tuple[str, str], ConditionResult] = {}
    for r in results:
        s = condition_label(r.point, leave_out=axis.key)
        if s not in series:
            series.append(s)
        cells[(s, _key(r.point.get(axis.key)))] = r
    cols = [_key(v) for v in axis.values]
    xs = [axis_value(v)[0] for v in axis.values]
    if all(np.isfinite(x) for x in xs):
        return Grid(series, cols, cells, xs, None)
    return Grid(series, cols, cells, list(range(len(cols))), [col_title(v) for v in axis.values])


def _apply_ticks(ax: Axes, ticks: list[str] | None, xs: list[float]) -> None:
    if ticks is not None:
        long = max(len(t) for t in ticks) > 8  # slant long labels so they do not overlap
        ax.set_xticks(range(len(ticks)))
        ax.set_xticklabels(ticks, rotation=25 if long else 0, ha="right" if long else "center")
        ax.grid(axis="x", visible=False)
    else:
        ax.set_xticks(xs)


def _err(s: RunStats | None, scale: float = 1.0) -> float | None:
    """± std when there are two or more runs, else None (no error bar for one run)."""
    return None if s is None or s.std is None or s.n < 2 else s.std / scale


def _panels(n_series: int) -> tuple[Figure, list[Axes], int]:
    """One axis, or small multiples of up to SERIES_LIMIT series each... by series."""
    ncols = 1 if n_series == 1 else min(3, n_series)
    nrows = int(np.ceil(n_series / ncols))
    fig = Figure(figsize=(max(6.4, 3.6 * ncols), 0.6 + 2.9 * nrows), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False, sharey=True)
    flat = [a for row in axes for a in row]
    for a in flat[n_series:]:
        a.set_visible(False)
    return fig, flat[:n_series], ncols


@dataclass
class Panel:
    """One axis of a small-multiples figure: its title and its series, each a label
    and the conditions along the x-axis (column key → result)."""

    title: str
    series: list[tuple[str, dict[str, ConditionResult]]]


def panels(results: list[ConditionResult], axis: Axis) -> list[Panel]:
    """Series → panels. Up to SERIES_LIMIT series share one axis; beyond, one panel per
    value of the next sweep axis (e.g. one per queue discipline, a line per traffic
    mix), so each panel has few series whose names recur across panels; a panel still
    holding too many is cut into chunks."""
    def col(r: ConditionResult) -> str:
        return _key(r.point.get(axis.key))

    others = list(dict.fromkeys(k for r in results for k in r.point if k != axis.key))
    series: dict[str, dict[str, ConditionResult]] = {}
    for r in results:
        series.setdefault(condition_label(r.point, leave_out=axis.key), {})[col(r)] = r
    if len(series) <= SERIES_LIMIT or not others:
        out = [Panel("", list(series.items()))]
    else:
        split = others[0]
        by: dict[str, dict[str, dict[str, ConditionResult]]] = {}
        for r in results:
            title = condition_label({split: r.point[split]}) if split in r.point else ""
            name = condition_label(r.point, leave_out=(axis.key, split))
            by.setdefault(title, {}).setdefault(name, {})[col(r)] = r
        out = [Panel(t, list(ss.items())) for t, ss in by.items()]
    chunked: list[Panel] = []
    for p in out:
        for i in range(0, len(p.series), SERIES_LIMIT):
            part = "" if len(p.series) <= SERIES_LIMIT else f" ({i // SERIES_LIMIT + 1})"
            chunked.append(Panel(p.title + part, p.series[i:i + SERIES_LIMIT]))
    return chunked


def fig_metric_vs_axis(results: list[ConditionResult], axis: Axis, *, metric: str, ylabel: str, ylim: tuple[float, float] | None = (0.0, 1.05), percent: bool = False) -> Figure:
    """One per-condition statistic (``metric`` names a `RunStats` attribute of
    `ConditionResult`: jain_mean_jt, jain_of_means, utilisation) against the axis.
    Numeric axis: a line per series; categorical: grouped bars. More than
    SERIES_LIMIT series: small multiples (`panels`) with one shared legend."""
    g = grid(results, axis)
    scale = 0.01 if percent else 1.0
    ps = panels(results, axis)
    names = list(dict.fromkeys(n for p in ps for n, _ in p.series))
    style_of = {n: series_style(i) for i, n in enumerate(names)}  # one colour per series in every panel
    longest = max((len(n) for n in names), default=0)
    with fairlab_style():
        if len(ps) == 1:
            bar_w = 0.9 * len(g.cols) * max(1, len(names)) ** 0.5 + 2 if g.ticks is not None else 0.0
            fig = Figure(figsize=(min(9.0, max(6.4, bar_w)), 3.8), layout="constrained")
            axes = [fig.add_subplot()]
        else:
            ncols = min(3, len(ps))
            nrows = int(np.ceil(len(ps) / ncols))
            fig = Figure(figsize=(3.4 * ncols + 0.6, 2.8 * nrows + 0.4 + 0.17 * len(names)), layout="constrained")
            grid_axes = fig.subplots(nrows, ncols, squeeze=False, sharey=True)
            flat = [a for row in grid_axes for a in row]
            for a in flat[len(ps):]:
                a.set_visible(False)
            axes = flat[: len(ps)]
        for ax, p in zip(axes, ps):
            k = len(p.series)
            width = 0.8 / max(k, 1)
            for si, (name, cells) in enumerate(p.series):
                xx, yy, ee = [], [], []
                for x, c in zip(g.xs, g.cols):
                    r = cells.get(c)
                    stat = None if r is None else getattr(r, metric)
                    if stat is not None and stat.mean is not None:
                        xx.append(x)
                        yy.append(stat.mean / scale)
                        ee.append(_err(stat, scale))
                yerr = None if all(e is None for e in ee) else [e or 0.0 for e in ee]
                st = style_of[name]
                if g.ticks is not None:
                    pos = [x - 0.4 + width * (si + 0.5) for x in xx]
                    bars = ax.bar(pos, yy, width * 0.92, yerr=yerr, color=st["color"], label=name, capsize=2)
                    if k * len(g.cols) <= 24 and len(ps) == 1:  # value labels while they fit
                        ax.bar_label(bars, labels=[f"{y:.0f}" if percent else f"{y:.2f}" for y in yy], fontsize=6.5, padding=1)
                else:
                    ax.errorbar(xx, yy, yerr=yerr, label=name, color=st["color"], marker=st["marker"], linestyle=st["linestyle"], capsize=2.5)
            _apply_ticks(ax, g.ticks, g.xs)
            ax.set_xlabel(axis.title or "condition")
            panel_title(ax, p.title)
            if percent:
                ax.set_ylim(0, 105)
                ax.axhline(80, color="#D55E00", linestyle=":", linewidth=0.8)
            elif ylim is not None:
                ax.set_ylim(*ylim)
        axes[0].set_ylabel(ylabel)
        if names != ["all"]:
            handles, labels = [], []
            for ax in axes:
                for h, lab in zip(*ax.get_legend_handles_labels()):
                    if lab not in labels:
                        handles.append(h)
                        labels.append(lab)
            if len(ps) == 1 and longest <= 45:
                axes[0].legend(handles, labels, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7.5)
            else:
                fig.legend(handles, labels, loc="outside lower center", ncol=1 if longest > 40 else 2, fontsize=7.5)
    return fig


def fig_throughput_vs_axis(results: list[ConditionResult], axis: Axis) -> Figure:
    """Mean throughput per flow, one panel per series: lines per flow over a numeric
    axis, grouped bars coloured by congestion control over a categorical one (like
    Zhang & Ye 2004 Figs. 4–5). A panel with more than SERIES_LIMIT flows shows
    their median and min–max over flows instead of a line each."""
    g = grid(results, axis)
    ccas = list(dict.fromkeys(f.cca for r in results for f in r.flows))
    colour = {c: COLOURS[i % len(COLOURS)] for i, c in enumerate(ccas)}
    with fairlab_style():
        fig, axes, ncols = _panels(len(g.series))
        for idx, (ax, s) in enumerate(zip(axes, g.series)):
            nflows = max((len(r.flows) for (ss, _), r in g.cells.items() if ss == s), default=0)
            if g.ticks is not None:
                for x, c in zip(g.xs, g.cols):
                    r = g.get(s, c)
                    if r is None:
                        continue
                    k = len(r.flows)
                    width = 0.8 / max(k, 1)
                    for fi, f in enumerate(r.flows):
                        if f.mean_bps.mean is not None:
                            ax.bar(x - 0.4 + width * (fi + 0.5), f.mean_bps.mean, width * 0.92, yerr=_err(f.mean_bps), color=colour[f.cca], capsize=1.5)
                if len(ccas) > 1:
                    ax.legend(handles=[Patch(color=colour[c], label=c) for c in ccas], loc="upper right", fontsize=7)
            elif nflows <= SERIES_LIMIT:
                for fi in range(nflows):
                    xx, yy, ee, name = [], [], [], None
                    for x, c in zip(g.xs, g.cols):
                        r = g.get(s, c)
                        if r is None or fi >= len(r.flows) or r.flows[fi].mean_bps.mean is None:
                            continue
                        name = f"flow {fi + 1} ({r.flows[fi].cca})"
                        xx.append(x)
                        yy.append(r.flows[fi].mean_bps.mean)
                        ee.append(_err(r.flows[fi].mean_bps))
                    yerr = None if all(e is None for e in ee) else [e or 0.0 for e in ee]
                    st = series_style(fi)
                    ax.errorbar(xx, yy, yerr=yerr, label=name, color=st["color"], marker=st["marker"], linestyle=st["linestyle"], capsize=2)
                ax.legend(fontsize=7, loc="best")
            else:
                xx, med, lo, hi = [], [], [], []
                for x, c in zip(g.xs, g.cols):
                    r = g.get(s, c)
                    v = [f.mean_bps.mean for f in r.flows if f.mean_bps.mean is not None] if r else []
                    if v:
                        xx.append(x)
                        med.append(float(np.median(v)))
                        lo.append(min(v))
                        hi.append(max(v))
                ax.fill_between(xx, lo, hi, color=COLOURS[0], alpha=0.2, linewidth=0, label="min–max over flows")
                ax.plot(xx, med, marker="o", color=COLOURS[0], label="median flow")
                ax.legend(fontsize=7, loc="best")
            panel_title(ax, s)
            ax.set_xlabel(axis.title or "condition")
            _apply_ticks(ax, g.ticks, g.xs)
            rate_axis(ax)
            if idx % ncols == 0:
                ax.set_ylabel("mean throughput")
        axes[0].set_ylim(bottom=0)
    return fig


def fig_nru_vs_axis(results: list[ConditionResult], axis: Axis) -> Figure | None:
    """The system NRU tuple ⟨U_N+, U_N, U_N−⟩ per condition (Bhatti et al. 2009 Figs.
    4–5): a vertical segment from U_N− to U_N+ with U_N marked; one panel per series."""
    if not any(r.nru_u_mean is not None for r in results):
        return None
    g = grid(results, axis)
    with fairlab_style():
        fig, axes, ncols = _panels(len(g.series))
        for idx, (ax, s) in enumerate(zip(axes, g.series)):
            for x, c in zip(g.xs, g.cols):
                r = g.get(s, c)
                if r is None or r.nru_u_mean is None or r.nru_u_mean.mean is None:
                    continue
                up = r.nru_u_plus.mean if r.nru_u_plus else None
                um = r.nru_u_minus.mean if r.nru_u_minus else None
                mid = r.nru_u_mean.mean
                ax.vlines(x, um if um is not None else mid, up if up is not None else mid, color=COLOURS[0], linewidth=1.2)
                ax.plot([x], [mid], "o", color=COLOURS[0])
                if up is not None:
                    ax.plot([x], [up], "^", color=COLOURS[2])
                if um is not None:
                    ax.plot([x], [um], "v", color=COLOURS[3])
            ax.axhline(0, color="grey", linewidth=0.8)
            panel_title(ax, s)
            ax.set_xlabel(axis.title or "condition")
            _apply_ticks(ax, g.ticks, g.xs)
            if idx % ncols == 0:
                ax.set_ylabel("NRU (dB)")
        handles = [
            Line2D([], [], marker="^", color=COLOURS[2], linestyle="", label="U_N+ (over-using side)"),
            Line2D([], [], marker="o", color=COLOURS[0], linestyle="", label="U_N (mean)"),
            Line2D([], [], marker="v", color=COLOURS[3], linestyle="", label="U_N− (under-using side)"),
        ]
        fig.legend(handles=handles, loc="outside lower center", ncol=3)
    return fig


def fig_jt_boxes(results: list[ConditionResult], jt_by_condition: dict[str, np.ndarray], axis: Axis) -> Figure:
    """Box plots of the per-interval J(t) in the window, one box per condition (all of
    its runs pooled), so a reader sees the spread behind each mean of J(t)."""
    labels = [condition_label(r.point) for r in results if r.condition in jt_by_condition]
    data = [jt_by_condition[r.condition] for r in results if r.condition in jt_by_condition]
    with fairlab_style():
        fig = Figure(figsize=(7.0, 0.8 + 0.22 * len(data) + 0.6), layout="constrained")
        ax = fig.add_subplot()
        # `orientation` replaced `vert` in Matplotlib 3.10
        horizontal = {"orientation": "horizontal"} if tuple(int(x) for x in matplotlib.__version__.split(".")[:2]) >= (3, 10) else {"vert": False}
        ax.boxplot(data, **horizontal, showfliers=False, widths=0.6, medianprops={"color": COLOURS[3]})
        ax.set_yticks(range(1, len(labels) + 1))
        ax.set_yticklabels(labels, fontsize=7 if len(labels) > 12 else 8)
        ax.invert_yaxis()
        ax.set_xlabel("J(t) per interval in the analysis window")
        lows = [float(np.min(d)) for d in data if len(d)]
        # J ≥ 1/N always; start the axis at the nearest 0.1 below the smallest value
        ax.set_xlim(max(0.0, np.floor((min(lows, default=0.0) - 0.02) * 10) / 10), 1.02)
        ax.grid(axis="y", visible=False)
    return fig
