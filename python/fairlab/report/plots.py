"""Paper-style figures: throughput vs time and J(t) vs time.

Every figure has units on its axes, a legend, a title, and is readable at 100%
(seed 001 Figs. 2-3 and seed 000 Fig. 3 are the models). Matplotlib runs with the
non-interactive Agg backend so it works on a headless machine.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from ..analysis import Analysis  # noqa: E402
from ..trace import Trace  # noqa: E402

_STYLE = {
    "figure.figsize": (8, 4.5),
    "figure.dpi": 110,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.titlesize": 12,
    "axes.labelsize": 11,
    "legend.fontsize": 9,
}


def _rate_scale(max_bps: float) -> tuple[float, str]:
    if max_bps >= 2e9:
        return 1e9, "Gbit/s"
    if max_bps >= 2e6:
        return 1e6, "Mbit/s"
    return 1e3, "kbit/s"


def plot_throughput(trace: Trace, path: Path, *, run: int = 0, window: tuple[float, float] | None = None, title: str | None = None) -> Path:
    """Per-flow throughput over time; the analysis window is shaded."""
    m = trace.matrix(run=run) if len(trace.runs) > 1 else trace.matrix()
    scale, unit = _rate_scale(float(m.max().max()) if m.size else 1.0)
    with plt.rc_context(_STYLE):
        fig, ax = plt.subplots()
        for fid in m.columns:
            col = m[fid].dropna()
            ax.plot(col.index, col.to_numpy() / scale, label=trace.labels[fid], linewidth=1.2)
        if window is not None:
            ax.axvspan(window[0], window[1], color="grey", alpha=0.08, label="analysis window")
        ax.set_xlabel("time (s)")
        ax.set_ylabel(f"throughput ({unit})")
        ax.set_ylim(bottom=0)
        ax.set_title(title or "Throughput per flow")
        ncol = 1 if len(m.columns) <= 8 else 2
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), ncol=ncol, frameon=False)
        fig.tight_layout()
        fig.savefig(path)
        plt.close(fig)
    return path


def plot_jain_over_time(analysis: Analysis, path: Path, *, title: str | None = None) -> Path:
    """J(t) over the window with the two summary values as reference lines."""
    with plt.rc_context(_STYLE):
        fig, ax = plt.subplots()
        if analysis.jain_series:
            t, j = zip(*analysis.jain_series)
            ax.plot(t, j, color="tab:blue", linewidth=1.2, label="J(t) (seed 000 Eq. 2)")
        if analysis.jain.mean_jt is not None:
            ax.axhline(analysis.jain.mean_jt, color="tab:orange", linestyle="--", label=f"mean of J(t) = {analysis.jain.mean_jt:.3f}")
        if analysis.jain.of_means is not None:
            ax.axhline(analysis.jain.of_means, color="tab:green", linestyle=":", label=f"J of mean throughputs = {analysis.jain.of_means:.3f}")
        n = max(len(analysis.flows), 1)
        ax.set_ylim(max(0.0, 1.0 / n - 0.05), 1.02)
        ax.set_xlim(analysis.window)
        ax.set_xlabel("time (s)")
        ax.set_ylabel("Jain's fairness index J(t) (no unit)")
        ax.set_title(title or "Jain's fairness index over time")
        ax.legend(loc="lower right", frameon=True)
        fig.tight_layout()
        fig.savefig(path)
        plt.close(fig)
    return path


def plot_analysis(trace: Trace, analysis: Analysis, outdir: Path) -> list[Path]:
    """Both figures for one `analyze` result; returns the files written."""
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    return [
        plot_throughput(trace, outdir / "throughput.png", run=analysis.run, window=analysis.window),
        plot_jain_over_time(analysis, outdir / "jain_over_time.png"),
    ]
