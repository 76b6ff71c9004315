"""`fairlab compare SCENARIO`: the simulator's prediction beside real Linux TCP.

One run per backend says little about a pair whose result turns on which flow loses
first; `--runs N` (default: the scenario's `runs`) repeats both sides with the seeds a
campaign would use and reports mean ± std over the runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import typer
from rich.markup import escape
from rich.table import Table

from ..analysis import Analysis, analyze
from ..campaign.plan import derive_seed
from ..metrics._common import fmt_num
from ..metrics.stats import RunStats, run_stats
from ..runner import run_scenario
from ..scenario import load_scenario
from ..trace import Trace, concat
from .common import console, err_console
from .render import fmt_rate_pm

BACKENDS = ("sim", "live")


def compare(
    scenario: Path = typer.Argument(..., help="a scenario file without a sweep"),
    seed: Optional[int] = typer.Option(None, "--seed", help="override the scenario's base seed"),
    runs: Optional[int] = typer.Option(None, "--runs", min=1, help="runs per backend (default: the scenario's runs); run k uses the seed a campaign derives for it"),
    out: Optional[Path] = typer.Option(None, "--out", help="directory for both traces (default out/<name>-compare)"),
    as_json: bool = typer.Option(False, "--json", help="print both sides' analyses and their summary as one JSON document"),
) -> None:
    """Run a scenario on both backends (simulator, then live — root) and show per-flow
    throughput and Jain's index side by side."""
    model = load_scenario(scenario)
    base = model.seed if seed is None else seed
    n = model.runs if runs is None else runs
    seeds = [derive_seed(base, k) for k in range(n)]
    window = None if model.window is None else (model.window[0] / 1e9, model.window[1] / 1e9)
    out_dir = out or Path("out") / f"{model.name}-compare"
    out_dir.mkdir(parents=True, exist_ok=True)
    traces: dict[str, Trace] = {}
    analyses: dict[str, list[Analysis]] = {}
    for backend in BACKENDS:
        per_run = []
        for k, s in enumerate(seeds):
            if not as_json:
                err_console.print(f"running {backend}" + (f", run {k + 1} of {n} (seed {s})" if n > 1 else "") + " …")
            per_run.append(run_scenario(model, seed=s, backend=backend, run_index=k))
        traces[backend] = concat(per_run)
        traces[backend].to_parquet(out_dir / f"{backend}.parquet")
        analyses[backend] = [analyze(traces[backend], window=window, run=k) for k in range(n)]
    summary = {b: _summary(analyses[b]) for b in BACKENDS}
    live_meta = traces["live"].meta
    if as_json:
        doc: dict[str, Any] = {
            "scenario": str(scenario),
            "seed": base,
            "runs": n,
            "seeds": seeds,
            "summary": summary,
            "sim": analyses["sim"][0].to_dict(),
            "live": analyses["live"][0].to_dict(),
            "per_run": {b: [a.to_dict() for a in analyses[b]] for b in BACKENDS},
            "live_meta": {k: live_meta.get(k) for k in ("emulation", "kernel", "warnings")},
        }
        print(json.dumps(doc, indent=2, allow_nan=False, default=str))
        return
    _print_tables(model.name, analyses, summary, n)
    for w in live_meta.get("warnings", []) or []:
        console.print(f"[yellow]live warning:[/] {escape(str(w))}")
    emu = live_meta.get("emulation") or {}
    how = f"{emu.get('path', '?')} — {emu.get('why', '')}" if isinstance(emu, dict) else str(emu)
    console.print(f"live emulation: {escape(how)}")
    runs_note = f" ({n} runs each, column `run`)" if n > 1 else ""
    console.print(f"traces in {out_dir}/sim.parquet and {out_dir}/live.parquet{runs_note}")


def _stats_dict(st: RunStats) -> dict[str, Any]:
    return {"mean": st.mean, "std": st.std, "ci_low": st.ci_low, "ci_high": st.ci_high, "n": st.n}


def _summary(analyses: list[Analysis]) -> dict[str, Any]:
    """Mean, std and 95 % CI over runs of each flow's mean throughput and both Jain
    variants (`metrics.stats.run_stats`)."""
    first = analyses[0]
    flows = []
    for i, f in enumerate(first.flows):
        st = run_stats([a.flows[i].mean_bps for a in analyses])
        flows.append({"flow": f.flow, "label": f.label, "cca": f.cca, "mean_bps": _stats_dict(st)})
    return {
        "flows": flows,
        "jain_mean_jt": _stats_dict(run_stats([a.jain.mean_jt for a in analyses])),
        "jain_of_means": _stats_dict(run_stats([a.jain.of_means for a in analyses])),
    }


def _pm(st: dict[str, Any], fmt) -> str:
    """'mean ± std' (just the mean for one run)."""
    if st["mean"] is None:
        return "—"
    return fmt(st["mean"]) if st["std"] is None else f"{fmt(st['mean'])} ± {fmt(st['std'])}"


def _print_tables(name: str, analyses: dict[str, list[Analysis]], summary: dict[str, Any], n: int) -> None:
    sim0 = analyses["sim"][0]
    over = f", mean ± std over {n} runs" if n > 1 else ""
    t = Table(title=f"{name}: simulator vs live (window {sim0.window[0]:g}–{sim0.window[1]:g} s{over})", title_justify="left")
    for c in ("flow", "cca", "sim throughput", "live throughput", "live / sim"):
        t.add_column(c, justify="left" if c in ("flow", "cca") else "right")
    for fs, fl in zip(summary["sim"]["flows"], summary["live"]["flows"]):
        ms, ml = fs["mean_bps"]["mean"], fl["mean_bps"]["mean"]
        ratio = "—" if not ms or ml is None else f"{ml / ms:.2f}"
        t.add_row(fs["label"], fs["cca"] or "—", fmt_rate_pm(fs["mean_bps"]["mean"], fs["mean_bps"]["std"]), fmt_rate_pm(fl["mean_bps"]["mean"], fl["mean_bps"]["std"]), ratio)
    console.print(t)
    j = Table(title="Jain's index", title_justify="left")
    for c in ("variant", "sim", "live"):
        j.add_column(c, justify="left" if c == "variant" else "right")

    def num(x: float) -> str:
        return fmt_num(x, 4)

    j.add_row("mean of J(t)", _pm(summary["sim"]["jain_mean_jt"], num), _pm(summary["live"]["jain_mean_jt"], num))
    j.add_row("J of mean throughputs", _pm(summary["sim"]["jain_of_means"], num), _pm(summary["live"]["jain_of_means"], num))
    console.print(j)
