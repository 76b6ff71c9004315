"""`fairlab analyze FILE...`: every fairness number for measurements you already have."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Optional

import typer

from ..analysis import analyze as run_analysis
from ..metrics.nru import FLOOR_DB_DEFAULT, U_C_DEFAULT
from .common import UsageError, console, err_console, parse_window
from .loading import load_inputs
from .render import print_analysis


def analyze(
    files: list[Path] = typer.Argument(..., help="iperf3 JSON (-J or --json-stream), iperf2 CSV (-y C), plain CSV/Parquet, or a fairlab trace (.parquet)"),
    window: Optional[str] = typer.Option(None, "--window", "-w", help="START:END seconds from the earliest flow's start, e.g. 60:300"),
    calibration: Optional[list[Path]] = typer.Option(None, "--calibration", help="self-competition runs giving NRU weights (Bhatti et al. 2009, Eq. 14); one or more files"),
    baseline: Optional[list[Path]] = typer.Option(None, "--baseline", help="solo runs giving harm baselines; one or more files"),
    epoch: Optional[float] = typer.Option(None, "--epoch", help="t_e in seconds for convergence time T_U (needs --calibration)"),
    uc: float = typer.Option(U_C_DEFAULT, "--uc", help="NRU convergence threshold U_c in dB (−0.46 dB ⇔ RSR 0.90)"),
    hold: int = typer.Option(1, "--hold", min=1, help="T_U: the threshold must hold for this many consecutive samples"),
    label: Optional[list[str]] = typer.Option(None, "--label", help="flow labels, one per file, in order"),
    unit: Optional[str] = typer.Option(None, "--unit", help="throughput unit of a plain CSV: bps, kbps, Mbps or Gbps"),
    run: Optional[int] = typer.Option(None, "--run", help="which run of a multi-run trace to analyse (default: the first)"),
    as_json: bool = typer.Option(False, "--json", help="print the stable JSON document (docs/cli.md) instead of tables"),
    plot: Optional[Path] = typer.Option(None, "--plot", help="write throughput-vs-time and J(t)-vs-time PNGs into this directory"),
    offset: Optional[list[str]] = typer.Option(None, "--offset", help="FILE=SECONDS: start of FILE's test on the common timeline, instead of the start time the files record (repeat per file; files not named are at 0)"),
) -> None:
    """Per-flow throughput, Jain's index both ways, NRU (with --calibration) and harm (with --baseline)."""
    check_options(epoch=epoch, uc=uc, plot=plot)
    win = parse_window(window)  # every option is checked before anything is read or printed
    offsets = parse_offsets(offset, files)
    trace = load_inputs(files, labels=label, unit=unit, offsets=offsets)
    cal = load_inputs(calibration, unit=unit) if calibration else None
    base = load_inputs(baseline, unit=unit) if baseline else None
    result = run_analysis(trace, window=win, run=run, calibration=cal, baseline=base, epoch=epoch, u_c=uc, k=hold)
    if epoch is not None and cal is None:
        # stderr: with --json, stdout carries the JSON document only.
        err_console.print("[yellow]note:[/] --epoch gives NRU convergence times, which need --calibration; ignoring it")
    written: list[Path] = []
    if plot is not None:
        from ..report.plots import plot_analysis

        try:
            written = plot_analysis(trace, result, plot)
        except OSError as exc:  # ENOSPC, EACCES, EROFS ...: one sentence, not a traceback
            raise UsageError(f"--plot {plot}: cannot write the figures ({exc.strerror or exc})") from None
    if as_json:
        doc = result.to_dict()
        doc["inputs"] = [str(f) for f in files]
        if trace.meta.get("alignment") is not None:
            doc["alignment"] = trace.meta["alignment"]
        if written:
            doc["plots"] = [str(p) for p in written]
        print(json.dumps(doc, indent=2, allow_nan=False))
        return
    print_analysis(trace, result, [str(f) for f in files])
    align = trace.meta.get("alignment") or {}
    if len(files) > 1 and align.get("method"):
        unc = align.get("uncertainty_s")
        console.print(f"alignment: {align['method']}" + (f", uncertain by up to ±{unc:g} s" if unc else ""),
                      highlight=False, soft_wrap=True)
    for p in written:
        console.print(f"wrote {p}")


#: Allowed range of --uc in dB: at or below 0 dB (U = 0 is a flow at exactly its
#: expected share, seed 000 Eq. 10) and above the −30 dB floor U_n(t) is clipped at
#: (docs/metrics.md), where every floored sample would pass.
UC_RANGE_DB = (FLOOR_DB_DEFAULT, 0.0)


def check_options(*, epoch: float | None, uc: float, plot: Path | None) -> None:
    """Refuse out-of-range options before any file is read (docs/cli.md)."""
    if epoch is not None and not (math.isfinite(epoch) and 0.0 <= epoch <= 1e9):
        raise UsageError(f"--epoch {epoch:g} is not a time in the run; allowed: 0 to 1e9 seconds")
    lo, hi = UC_RANGE_DB
    if not (math.isfinite(uc) and lo < uc <= hi):
        raise UsageError(f"--uc {uc:g} is outside the allowed range: U_c is in dB, {lo:g} < U_c <= {hi:g} "
                         "(−0.46 dB is RSR 0.90)")
    if plot is not None and plot.exists() and not plot.is_dir():
        raise UsageError(f"--plot {plot}: exists and is not a directory; give a directory for the figures")


def parse_offsets(items: list[str] | None, files: list[Path]) -> list[float] | None:
    """`--offset FILE=SECONDS` (repeatable) → one offset per analysed file, 0 for the
    files not named."""
    if not items:
        return None
    out = [0.0] * len(files)
    named = [str(f) for f in files]
    for item in items:
        name, sep, value = item.rpartition("=")
        if not sep or not name:
            raise UsageError(f"--offset {item!r} must be FILE=SECONDS, e.g. --offset h3.json=5.013")
        try:
            seconds = float(value.strip().removesuffix("s"))
        except ValueError:
            raise UsageError(f"--offset {item!r}: {value!r} is not a number of seconds") from None
        if not math.isfinite(seconds) or abs(seconds) > 7 * 86400:
            raise UsageError(f"--offset {item!r}: allowed offsets are finite and within ±604800 s (a week)")
        matches = [i for i, f in enumerate(files) if named[i] == name or f.name == name
                   or (f.exists() and Path(name).exists() and f.resolve() == Path(name).resolve())]
        if len(matches) != 1:
            raise UsageError(f"--offset {item!r}: {name!r} is {'none' if not matches else 'more than one'} of the "
                             f"analysed files ({', '.join(named)})")
        out[matches[0]] = seconds
    return out
