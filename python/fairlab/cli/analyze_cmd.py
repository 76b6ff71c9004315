"""`fairlab analyze FILE...`: every fairness number for measurements you already have."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from ..analysis import analyze as run_analysis
from ..metrics.nru import U_C_DEFAULT
from .common import console, parse_window
from .loading import load_inputs
from .render import print_analysis


def analyze(
    files: list[Path] = typer.Argument(..., help="iperf3 JSON (-J or --json-stream), iperf2 CSV (-y C), plain CSV/Parquet, or a fairlab trace (.parquet)"),
    window: Optional[str] = typer.Option(None, "--window", "-w", help="START:END seconds from the earliest flow's start, e.g. 60:300"),
    calibration: Optional[list[Path]] = typer.Option(None, "--calibration", help="self-competition runs giving NRU weights (seed 000 Eq. 14); one or more files"),
    baseline: Optional[list[Path]] = typer.Option(None, "--baseline", help="solo runs giving harm baselines; one or more files"),
    epoch: Optional[float] = typer.Option(None, "--epoch", help="t_e in seconds for convergence time T_U (needs --calibration)"),
    uc: float = typer.Option(U_C_DEFAULT, "--uc", help="NRU convergence threshold U_c in dB (−0.46 dB ⇔ RSR 0.90)"),
    hold: int = typer.Option(1, "--hold", min=1, help="T_U: the threshold must hold for this many consecutive samples"),
    label: Optional[list[str]] = typer.Option(None, "--label", help="flow labels, one per file, in order"),
    unit: Optional[str] = typer.Option(None, "--unit", help="throughput unit of a plain CSV: bps, kbps, Mbps or Gbps"),
    run: Optional[int] = typer.Option(None, "--run", help="which run of a multi-run trace to analyse (default: the first)"),
    as_json: bool = typer.Option(False, "--json", help="print the stable JSON document (docs/cli.md) instead of tables"),
    plot: Optional[Path] = typer.Option(None, "--plot", help="write throughput-vs-time and J(t)-vs-time PNGs into this directory"),
) -> None:
    """Per-flow throughput, Jain's index both ways, NRU (with --calibration) and harm (with --baseline)."""
    trace = load_inputs(files, labels=label, unit=unit)
    cal = load_inputs(calibration, unit=unit) if calibration else None
    base = load_inputs(baseline, unit=unit) if baseline else None
    if epoch is not None and cal is None:
        console.print("[yellow]note:[/] --epoch gives NRU convergence times, which need --calibration; ignoring it")
    result = run_analysis(trace, window=parse_window(window), run=run, calibration=cal, baseline=base, epoch=epoch, u_c=uc, k=hold)
    written: list[Path] = []
    if plot is not None:
        from ..report.plots import plot_analysis

        written = plot_analysis(trace, result, plot)
    if as_json:
        doc = result.to_dict()
        doc["inputs"] = [str(f) for f in files]
        if written:
            doc["plots"] = [str(p) for p in written]
        print(json.dumps(doc, indent=2, allow_nan=False))
        return
    print_analysis(trace, result, [str(f) for f in files])
    for p in written:
        console.print(f"wrote {p}")
