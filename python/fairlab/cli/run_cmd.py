"""`fairlab run SCENARIO`: one run, or a whole campaign when the file sweeps or repeats."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Optional

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.markup import escape

from ..analysis import analyze
from ..campaign.plan import load_campaign
from ..runner import BACKENDS, run_scenario
from ..scenario import Scenario
from .common import console, err_console
from .render import print_analysis


def run(
    scenario: Path = typer.Argument(..., help="scenario TOML file (a \\[sweep] table or runs > 1 makes it a campaign)"),
    seed: Optional[int] = typer.Option(None, "--seed", help="override the scenario's base seed"),
    out: Optional[Path] = typer.Option(None, "--out", help="output directory (default out/<scenario name>)"),
    backend: str = typer.Option("sim", "--backend", help="sim (packet-level simulator), live (network namespaces, root) or vm (a stock Linux kernel in QEMU, virtual time)"),
    workers: Optional[int] = typer.Option(None, "--workers", min=1, help="campaigns: local worker processes (default: all cores)"),
    dask: Optional[str] = typer.Option(None, "--dask", help="campaigns: run on Dask: 'local' or a scheduler address tcp://host:8786"),
    as_json: bool = typer.Option(False, "--json", help="single runs: print the same JSON document as `fairlab analyze --json`"),
) -> None:
    """Run a scenario on the simulator (default) or live; write the Trace and print the analysis."""
    from ..scenario import read_toml

    doc = read_toml(scenario)
    if seed is not None:
        doc["seed"] = seed
    if backend not in BACKENDS:
        from ..analysis import AnalysisError

        raise AnalysisError(f"--backend {backend!r} is not known; allowed: {', '.join(BACKENDS)}")
    campaign = _campaign(doc, scenario, backend)
    out_dir = out or Path("out") / campaign.name
    if len(campaign.tasks) == 1 and not doc.get("sweep"):
        _single(campaign.tasks[0].model(), campaign.tasks[0].seed, backend, out_dir, as_json, source=scenario)
    else:
        if as_json:
            err_console.print("note: --json applies to single runs; a campaign's results are in its directory (fairlab report / query)")
        report = run_campaign_with_progress(campaign, out_dir, workers=workers, dask=dask)
        exit_if_runs_failed(report, out_dir)


def _campaign(doc: dict, path: Path, backend: str):
    from ..campaign.plan import expand

    return expand(doc, source=str(path), backend=backend)


def _single(model: Scenario, seed: int, backend: str, out_dir: Path, as_json: bool, *, source: Path) -> None:
    total = model.duration / 1e9
    t0 = time.perf_counter()
    progress: Progress | None = None
    task_id = None

    def on_progress(sim_s: float) -> bool:
        nonlocal progress, task_id
        # Only runs longer than a second get a bar.
        if progress is None and time.perf_counter() - t0 > 1.0 and not as_json:
            progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.completed:.0f}/{task.total:.0f} s simulated"), TimeRemainingColumn(), console=err_console, transient=True)
            progress.start()
            task_id = progress.add_task(model.name, total=total)
        if progress is not None:
            progress.update(task_id, completed=sim_s)
        return True

    try:
        trace = run_scenario(model, seed=seed, backend=backend, progress=on_progress)
    except ValueError as exc:
        # Engine and live errors name the field; say which file it is in.
        raise type(exc)(f"{source}: {exc}") from None
    finally:
        if progress is not None:
            progress.stop()
    out_dir.mkdir(parents=True, exist_ok=True)
    path = trace.to_parquet(out_dir / f"{model.name}.parquet")
    window = None if model.window is None else (model.window[0] / 1e9, model.window[1] / 1e9)
    result = analyze(trace, window=window)
    if as_json:
        doc = result.to_dict()
        doc["trace"] = str(path)
        doc["backend"] = backend
        doc["seed"] = seed
        print(json.dumps(doc, indent=2, allow_nan=False))
        return
    print_analysis(trace, result, [f"{backend} run of {model.name} (seed {seed})"])
    wall = trace.meta.get("wall_s")
    if backend == "sim" and wall:
        pkts = trace.meta.get("bottleneck_packets", 0)
        console.print(f"simulated {total:g} s in {wall:.2f} s wall ({pkts / wall / 1e6:.2f} M bottleneck packets per wall-second)")
    console.print(f"trace written to [bold]{path}[/] — analyse again with `fairlab analyze {path}`")


def run_campaign_with_progress(campaign, out_dir: Path, *, workers: int | None, dask: str | None):
    """Run a campaign into ``out_dir`` with a progress bar; print what happened."""
    from ..campaign.execute import run_campaign
    from ..campaign.store import Store

    store = Store(out_dir)
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("runs · [red]{task.fields[failed]} failed"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=err_console,
    ) as bar:
        tid = bar.add_task(campaign.name, total=len(campaign.tasks), failed=0)

        def on_progress(done: int, failed: int, todo: int, total: int) -> None:
            bar.update(tid, completed=done + failed, failed=failed)

        report = run_campaign(campaign, store, workers=workers, dask=dask, progress=on_progress)
    console.print(
        f"campaign [bold]{campaign.name}[/]: {report.total} runs — {report.skipped} already done, "
        f"{report.done} run now, {report.failed} failed ({report.wall_s:.1f} s)"
    )
    for f in store.failures():
        console.print(f"[red]failed[/] {escape(f['label'])} run {f['run_index']}: {escape(f['reason'].splitlines()[0])}")
    if report.interrupted:
        console.print("[yellow]interrupted[/]: finished runs are kept; run the same command again to resume")
        raise typer.Exit(130)
    console.print(f"results in [bold]{out_dir}[/] — `fairlab report {out_dir}` writes tables and figures, `fairlab query {out_dir} \"SQL\"` queries them")
    return report


def exit_if_runs_failed(report, out_dir: Path) -> None:
    """Exit 1 when runs of this invocation failed, so a script or CI job notices
    (the finished runs are kept, and running the same command again retries them)."""
    if report.failed:
        err_console.print(
            f"[red]{report.failed} of {report.total} runs failed[/]; reasons in {escape(str(out_dir / 'failed'))}/ — "
            "run the same command again to retry them"
        )
        raise typer.Exit(1)
