"""`fairlab run SCENARIO`: one run, or a whole campaign when the file sweeps or repeats."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape

from ..analysis import analyze
from ..campaign.paths import inside, slug
from .common import UsageError
from ..campaign.plan import load_campaign
from ..runner import BACKENDS, PROBE_BACKENDS, run_scenario
from ..scenario import Scenario
from .common import console, err_console
from .overrides import apply_overrides, refuse_swept_overrides
from .plan_cmd import SET_HELP
from .progress import CampaignProgress, SimulatedTime
from .render import print_analysis


def run(
    scenario: Path = typer.Argument(..., help="scenario TOML file (a \\[sweep] table or runs > 1 makes it a campaign)"),
    seed: Optional[int] = typer.Option(None, "--seed", help="override the scenario's base seed"),
    out: Optional[Path] = typer.Option(None, "--out", help="output directory (default out/<scenario name>)"),
    backend: str = typer.Option("sim", "--backend", help="sim (packet-level simulator), live (network namespaces, root) or vm (a stock Linux kernel in QEMU, virtual time)"),
    workers: Optional[int] = typer.Option(None, "--workers", min=1, help="campaigns: local worker processes (default: all cores)"),
    dask: Optional[str] = typer.Option(None, "--dask", help="campaigns: run on Dask: 'local' or a scheduler address tcp://host:8786"),
    overrides: Optional[list[str]] = typer.Option(None, "--set", metavar="PATH=VALUE", help=SET_HELP),
    as_json: bool = typer.Option(False, "--json", help="print a JSON document instead of tables: a single run's analysis, or a campaign's outcome (docs/cli.md)"),
    tcp_probe: bool = typer.Option(False, "--tcp-probe", help="vm or sim, single run: also record every sender's state at each ACK to <out>/<name>.tcp_probe.parquet (vm: the kernel's tcp:tcp_probe tracepoint; sim: the same quantities; docs/vm.md)"),
    queue_trace: bool = typer.Option(False, "--queue-trace", help="vm or sim, single run: also record every packet's fate at the bottleneck queue (queued, dropped, marked; the backlog it found) to <out>/<name>.queue.parquet (vm: DropTail, and RED or PIE without ECN; docs/queue-trace.md)"),
    keep_dir: Optional[Path] = typer.Option(None, "--keep-dir", help="vm, single run: keep the guest's raw result files (run.log, the generators' reports, the traces) in this directory, whether the run succeeds or fails"),
) -> None:
    """Run a scenario on the simulator (default), live or on a real kernel in a VM;
    write the Trace and print the analysis."""
    from ..scenario import read_toml

    doc = apply_overrides(read_toml(scenario), overrides, source=str(scenario))
    if seed is not None:
        doc["seed"] = seed
    if backend not in BACKENDS:
        from ..analysis import AnalysisError

        raise AnalysisError(f"--backend {backend!r} is not known; allowed: {', '.join(BACKENDS)}")
    campaign = _campaign(doc, scenario, backend)
    refuse_swept_overrides(campaign, overrides)
    out_dir = out or Path("out") / slug(campaign.name)
    single = len(campaign.tasks) == 1 and not doc.get("sweep")
    if tcp_probe and (backend not in PROBE_BACKENDS or not single):
        raise UsageError("--tcp-probe records the per-ACK trace of one run: it needs --backend vm (the kernel's "
                         "tcp:tcp_probe) or sim, and a scenario without a sweep and with runs = 1")
    if queue_trace and (backend not in PROBE_BACKENDS or not single):
        raise UsageError("--queue-trace records the bottleneck's packets in one run: it needs --backend vm or sim, "
                         "and a scenario without a sweep and with runs = 1")
    if keep_dir is not None and (backend != "vm" or not single):
        raise UsageError("--keep-dir keeps the guest's files of one run: it needs --backend vm and a scenario "
                         "without a sweep and with runs = 1")
    if single:
        _single(campaign.tasks[0].model(), campaign.tasks[0].seed, backend, out_dir, as_json, source=scenario,
                tcp_probe=tcp_probe, queue_trace=queue_trace, keep_dir=keep_dir)
    else:
        report = run_campaign_with_progress(campaign, out_dir, workers=workers, dask=dask, as_json=as_json)
        if as_json:
            print(json.dumps(campaign_document(campaign, report, out_dir), indent=2, allow_nan=False, default=str))
        exit_if_runs_failed(report, out_dir)


def _campaign(doc: dict, path: Path, backend: str):
    from ..campaign.plan import expand

    return expand(doc, source=str(path), backend=backend)


def _single(model: Scenario, seed: int, backend: str, out_dir: Path, as_json: bool, *, source: Path,
            tcp_probe: bool = False, queue_trace: bool = False, keep_dir: Path | None = None) -> None:
    total = model.duration / 1e9
    on_progress = SimulatedTime(model.name, total, enabled=not as_json)
    probe_path = inside(out_dir, f"{slug(model.name)}.tcp_probe.parquet") if tcp_probe else None
    queue_path = inside(out_dir, f"{slug(model.name)}.queue.parquet") if queue_trace else None
    if probe_path is not None or queue_path is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
    try:
        trace = run_scenario(model, seed=seed, backend=backend, progress=on_progress, tcp_probe_path=probe_path,
                             queue_trace_path=queue_path, keep_dir=keep_dir)
    except ValueError as exc:
        # Engine and live errors name the field; say which file it is in.
        raise type(exc)(f"{source}: {exc}") from None
    finally:
        on_progress.stop()
    out_dir.mkdir(parents=True, exist_ok=True)
    # The scenario's name may hold "/", ".." or NUL; only its slug becomes a path.
    path = trace.to_parquet(inside(out_dir, f"{slug(model.name)}.parquet"))
    window = None if model.window is None else (model.window[0] / 1e9, model.window[1] / 1e9)
    result = analyze(trace, window=window)
    if as_json:
        doc = result.to_dict()
        doc["trace"] = str(path)
        doc["backend"] = backend
        doc["seed"] = seed
        for key in ("title", "description"):
            doc[key] = getattr(model, key)
        if queue_path is not None:
            doc["queue_trace"] = str(queue_path)
        print(json.dumps(doc, indent=2, allow_nan=False))
        return
    print_analysis(trace, result, [f"{backend} run of {model.name} (seed {seed})"])
    if len(result.flows) > 1:
        # A newcomer's first run is one seed; which flow an overflow hits can turn a
        # pair's split round from one seed to the next (phase effects, Floyd and
        # Jacobson 1992), so say so before anyone quotes one run.
        console.print("[dim]one run: flows that share a queue can split differently with another seed; "
                      "`runs = 5` in the scenario (or `--set runs=5`) gives means ± std over seeds[/]")
    wall = trace.meta.get("wall_s")
    if backend == "sim" and wall:
        pkts = trace.meta.get("bottleneck_packets", 0)
        console.print(f"simulated {total:g} s in {wall:.2f} s wall ({pkts / wall / 1e6:.2f} M bottleneck packets per wall-second)")
    console.print(f"trace written to [bold]{path}[/] — analyse again with `fairlab analyze {path}`")
    if probe_path is not None:
        if backend == "vm":
            probe = trace.meta["vm"]["tcp_probe"]
            what = f"the kernel's per-ACK trace ({probe['events']} ACKs, {probe['lost_events']} lost)"
        else:
            what = f"the simulator's per-ACK trace ({trace.meta['tcp_probe']['events']} ACKs)"
        console.print(f"{what} written to [bold]{probe_path}[/]")
    if queue_path is not None:
        _print_queue_summary(queue_path, trace.labels, backend, model, seed, window)


def _print_queue_summary(path: Path, labels: dict, backend: str, model: Scenario, seed: int,
                         window: tuple[float, float] | None) -> None:
    """Each flow's packets, drops and overflow episodes at the bottleneck, from the
    queue trace just written (`metrics.queue_trace`)."""
    import pandas as pd

    from ..metrics.queue_trace import gaps_for, summarize

    rows = summarize(pd.read_parquet(path), window=window, **gaps_for(model.resolve(seed=seed)))
    who = "the kernel's bottleneck queue" if backend == "vm" else "the simulated bottleneck queue"
    over = "" if window is None else f" (over {window[0]:g}–{window[1]:g} s)"
    console.print(f"every packet at {who} written to [bold]{path}[/] (docs/queue-trace.md){over}:")
    for r in rows:
        rate = "" if r.drop_rate is None else f" ({100 * r.drop_rate:.2f} %)"
        marks = f", {r.marks:,} CE marks" if r.marks else ""
        console.print(f"  {escape(str(labels.get(r.flow, r.flow)))}: {r.packets:,} packets, {r.drops:,} dropped{rate}"
                      f"{marks}; lost packets in {r.episodes_hit} of {r.episodes} overflow episodes "
                      f"(arrived during {r.episodes_present})")


def run_campaign_with_progress(campaign, out_dir: Path, *, workers: int | None, dask: str | None, as_json: bool = False):
    """Run a campaign into ``out_dir`` with progress on stderr; say what happened (on
    stderr when stdout is reserved for a --json document)."""
    from ..campaign.execute import run_campaign
    from ..campaign.store import Store

    store = Store(out_dir)
    out = err_console if as_json else console
    with CampaignProgress(campaign.name, len(campaign.tasks)) as bar:

        def on_progress(done: int, failed: int, todo: int, total: int) -> None:
            bar.update(done + failed, failed)

        report = run_campaign(campaign, store, workers=workers, dask=dask, progress=on_progress)
    _say_what_happened(campaign, report, store, out_dir, out)
    return report


def _say_what_happened(campaign, report, store, out_dir: Path, out: Console) -> None:
    from ..campaign.store import OTHER_ADDRESS

    out.print(
        f"campaign [bold]{campaign.name}[/]: {report.total} runs — {report.skipped} already done, "
        f"{report.done} run now, {report.failed} failed ({report.wall_s:.1f} s)"
    )
    failures, elsewhere = store.failures_of(campaign.keys)
    for f in failures:
        out.print(f"[red]failed[/] {escape(f['label'])} run {f['run_index']}: {escape(f['reason'].splitlines()[0])}")
    if elsewhere:
        out.print(f"({elsewhere} more failure record(s) in the store are of runs this plan no longer has: "
                  f"{OTHER_ADDRESS}; not listed)")
    for key, reason in report.quarantined:
        out.print(f"[yellow]damaged run[/] {key}: {escape(reason)}; moved to {escape(str(out_dir / 'quarantine'))}/ and recomputed")
    if report.interrupted:
        # 128 + the signal, as a shell reports a process a signal stopped (130 SIGINT, 143 SIGTERM)
        name = signal.Signals(report.signal or signal.SIGINT).name
        out.print(f"[yellow]interrupted[/] ({name}): finished runs are kept; run the same command again to resume")
        raise typer.Exit(128 + (report.signal or signal.SIGINT))
    out.print(f"results in [bold]{out_dir}[/] — `fairlab report {out_dir}` writes tables and figures, `fairlab query {out_dir} \"SQL\"` queries them")


def campaign_document(campaign, report, out_dir: Path) -> dict:
    """`fairlab run CAMPAIGN --json` / `reproduce --json` (schema in docs/cli.md)."""
    from ..campaign.store import Store

    return {
        "schema": 1,
        "kind": "campaign",
        "name": campaign.name,
        "title": campaign.base.get("title"),
        "description": campaign.base.get("description"),
        "directory": str(out_dir),
        "backend": campaign.backend,
        "conditions": len(campaign.conditions),
        "runs": {"total": report.total, "skipped": report.skipped, "done": report.done, "failed": report.failed},
        "wall_s": round(report.wall_s, 3),
        "failures": [
            {"key": f.get("key"), "label": f.get("label"), "kind": f.get("kind"), "run_index": f.get("run_index"),
             "reason": str(f.get("reason", "")).splitlines()[0] if f.get("reason") else ""}
            for f in Store(out_dir).failures_of(campaign.keys)[0]
        ],
    }


def exit_if_runs_failed(report, out_dir: Path) -> None:
    """Exit 1 when runs of this invocation failed, so a script or CI job notices
    (the finished runs are kept, and running the same command again retries them)."""
    if report.failed:
        err_console.print(
            f"[red]{report.failed} of {report.total} runs failed[/]; reasons in {escape(str(out_dir / 'failed'))}/ — "
            "run the same command again to retry them"
        )
        raise typer.Exit(1)
