"""`fairlab compare SCENARIO`: the simulator's prediction beside real Linux TCP."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from ..analysis import analyze
from ..metrics._common import fmt_num
from ..runner import run_scenario
from ..scenario import load_scenario
from .common import console, err_console
from .render import fmt_rate


def compare(
    scenario: Path = typer.Argument(..., help="a single-run scenario file"),
    seed: Optional[int] = typer.Option(None, "--seed", help="override the scenario's seed"),
    out: Optional[Path] = typer.Option(None, "--out", help="directory for both traces (default out/<name>-compare)"),
    as_json: bool = typer.Option(False, "--json", help="print both analyses as one JSON document"),
) -> None:
    """Run a scenario on both backends (simulator, then live — root) and show per-flow
    throughput and Jain's index side by side."""
    model = load_scenario(scenario)
    seed = model.seed if seed is None else seed
    window = None if model.window is None else (model.window[0] / 1e9, model.window[1] / 1e9)
    out_dir = out or Path("out") / f"{model.name}-compare"
    out_dir.mkdir(parents=True, exist_ok=True)
    results = {}
    for backend in ("sim", "live"):
        if not as_json:
            err_console.print(f"running {backend} …")
        trace = run_scenario(model, seed=seed, backend=backend)
        trace.to_parquet(out_dir / f"{backend}.parquet")
        results[backend] = (trace, analyze(trace, window=window))
    (_, sim), (live_tr, live) = results["sim"], results["live"]
    if as_json:
        print(json.dumps({"scenario": str(scenario), "seed": seed, "sim": sim.to_dict(), "live": live.to_dict(), "live_meta": {k: live_tr.meta.get(k) for k in ("emulation", "kernel", "warnings")}}, indent=2, allow_nan=False, default=str))
        return
    t = Table(title=f"{model.name}: simulator vs live (window {sim.window[0]:g}–{sim.window[1]:g} s)", title_justify="left")
    for c in ("flow", "cca", "sim throughput", "live throughput", "live / sim"):
        t.add_column(c, justify="left" if c in ("flow", "cca") else "right")
    for fs, fl in zip(sim.flows, live.flows):
        ratio = "—" if not fs.mean_bps or fl.mean_bps is None else f"{fl.mean_bps / fs.mean_bps:.2f}"
        t.add_row(fs.label, fs.cca or "—", fmt_rate(fs.mean_bps), fmt_rate(fl.mean_bps), ratio)
    console.print(t)
    j = Table(title="Jain's index", title_justify="left")
    for c in ("variant", "sim", "live"):
        j.add_column(c, justify="left" if c == "variant" else "right")
    j.add_row("mean of J(t)", fmt_num(sim.jain.mean_jt, 4), fmt_num(live.jain.mean_jt, 4))
    j.add_row("J of mean throughputs", fmt_num(sim.jain.of_means, 4), fmt_num(live.jain.of_means, 4))
    console.print(j)
    for w in live_tr.meta.get("warnings", []) or []:
        console.print(f"[yellow]live warning:[/] {w}")
    emu = live_tr.meta.get("emulation") or {}
    how = f"{emu.get('path', '?')} — {emu.get('why', '')}" if isinstance(emu, dict) else str(emu)
    console.print(f"live emulation: {how}")
    console.print(f"traces in {out_dir}/sim.parquet and {out_dir}/live.parquet")
