"""One look for every fairlab figure, and one way to write figure files.

Figures are built with the object-oriented API (`matplotlib.figure.Figure`), never
`pyplot`, so importing fairlab neither changes the user's backend nor leaves figures
open in their session. `save_figure` writes each figure three ways: PDF and SVG with
text kept as text (a paper's editor can change the font) and a 300-dpi PNG.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import matplotlib
from cycler import cycler
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import EngFormatter

#: Okabe–Ito colours (distinguishable with the common colour-vision deficiencies), then
#: a darker set; with `SERIES_LIMIT` series per axis at most, colours never repeat.
COLOURS = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000", "#882255", "#44AA99", "#999933", "#AA4499"]
MARKERS = "osD^v<>phX*P"
LINESTYLES = ["-", "--", "-.", ":"]

#: More series than this on one axis is unreadable: split into small multiples.
SERIES_LIMIT = 8

STYLE: dict[str, Any] = {
    "figure.figsize": (6.4, 3.6),
    "figure.dpi": 100,
    "figure.constrained_layout.use": True,
    "savefig.dpi": 300,
    "font.size": 9,
    "axes.titlesize": 9.5,
    "axes.labelsize": 9,
    "legend.fontsize": 8,
    "xtick.labelsize": 8,
    "ytick.labelsize": 8,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "grid.linewidth": 0.5,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.prop_cycle": cycler(color=COLOURS[:SERIES_LIMIT]),
    "lines.linewidth": 1.2,
    "lines.markersize": 4,
    "legend.frameon": False,
    "errorbar.capsize": 2.5,
    # text stays text in vector files
    "svg.fonttype": "none",
    "pdf.fonttype": 42,
    "ps.fonttype": 42,
}

#: The colour of the analysis-window shading on every time axis.
WINDOW_COLOUR = "#808080"


@contextmanager
def fairlab_style() -> Iterator[None]:
    """The fairlab rcParams for the duration of a ``with`` block (nothing global)."""
    with matplotlib.rc_context(STYLE):
        yield


def new_figure(nrows: int = 1, ncols: int = 1, *, figsize: tuple[float, float] | None = None, **subplot_kw: Any) -> tuple[Figure, Any]:
    """A detached Figure (no pyplot state) and its axes, like ``plt.subplots``."""
    fig = Figure(figsize=figsize or STYLE["figure.figsize"], layout="constrained")
    axes = fig.subplots(nrows, ncols, **subplot_kw)
    return fig, axes


def series_style(i: int) -> dict[str, Any]:
    """Colour, marker and line style of the i-th series: distinct for 48 series."""
    return {"color": COLOURS[i % len(COLOURS)], "marker": MARKERS[i % len(MARKERS)], "linestyle": LINESTYLES[(i // len(COLOURS)) % len(LINESTYLES)]}


def rate_axis(ax: Axes, which: str = "y") -> None:
    """SI-prefixed bit/s tick labels (10 Mbit/s, 1 Gbit/s) on an axis whose data is bit/s."""
    axis = ax.yaxis if which == "y" else ax.xaxis
    axis.set_major_formatter(EngFormatter(unit="bit/s", places=None))


def shade_window(ax: Axes, window: tuple[float, float] | None, *, label: bool = True) -> None:
    """Shade the analysis window on a time axis (every time axis shows it)."""
    if window is not None:
        ax.axvspan(window[0], window[1], color=WINDOW_COLOUR, alpha=0.12, linewidth=0, label="analysis window" if label else None, zorder=0)


def save_figure(fig: Figure, outdir: str | Path, stem: str, *, formats: tuple[str, ...] = ("png", "pdf", "svg"), dpi: int = 300) -> Path:
    """Write ``stem``.png (``dpi``, default 300), .pdf and .svg (text as text) into
    ``outdir``, or only the ``formats`` asked for; returns the PNG path."""
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    # metadata without a date keeps files byte-identical between identical runs
    metadata = {"png": {"Software": None}, "pdf": {"CreationDate": None, "Creator": "fairlab"}, "svg": {"Date": None, "Creator": "fairlab"}}
    with fairlab_style():
        for fmt in formats:
            fig.savefig(outdir / f"{stem}.{fmt}", dpi=dpi, metadata=metadata[fmt])
    return outdir / f"{stem}.png"
