"""Campaign commands: `reproduce`, `report`, `query`."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape
from rich.table import Table

from ..campaign.plan import expand
from ..campaign.store import Store, StoreError
from .common import console, err_console


def report(
    directory: Path = typer.Argument(..., help="a campaign directory (from fairlab run / reproduce)"),
) -> None:
    """Write report.md, a self-contained report.html and PNG/SVG figures for a campaign."""
    from ..report.campaign_report import write_report

    notes = _stored_notes(directory)
    out = write_report(directory, notes=notes)
    console.print(f"wrote [bold]{out['markdown']}[/], [bold]{out['html']}[/] and figures in {out['figures']}")


def _stored_notes(directory: Path) -> list[str]:
    p = Path(directory) / "notes.txt"
    return [ln for ln in p.read_text().splitlines() if ln.strip()] if p.exists() else []


def query(
    directory: Path = typer.Argument(..., help="a campaign directory"),
    sql: str = typer.Argument(..., help='SQL over the tables runs, flows, samples, bottleneck, summaries, e.g. "SELECT label, avg(jain_mean_jt) FROM runs GROUP BY label"'),
    csv: bool = typer.Option(False, "--csv", help="print CSV instead of a table"),
) -> None:
    """Run SQL against a campaign's DuckDB catalog."""
    store = Store(directory)
    store.manifest()
    df = store.query(sql)
    if csv:
        print(df.to_csv(index=False), end="")
        return
    t = Table(show_lines=False)
    for c in df.columns:
        t.add_column(str(c))
    for row in df.itertuples(index=False):
        t.add_row(*["" if v is None else (f"{v:.6g}" if isinstance(v, float) else str(v)) for v in row])
    console.print(t)
    console.print(f"{len(df)} row(s)")


def reproduce(
    name: str = typer.Argument(..., help="preset name (fairlab list presets)"),
    quick: bool = typer.Option(False, "--quick", help="a shortened version that finishes within ~2 minutes on 2 cores"),
    backend: str = typer.Option("sim", "--backend", help="sim, live or vm"),
    out: Optional[Path] = typer.Option(None, "--out", help="campaign directory (default out/<preset>[-quick])"),
    workers: Optional[int] = typer.Option(None, "--workers", min=1, help="local worker processes (default: all cores)"),
    dask: Optional[str] = typer.Option(None, "--dask", help="'local' or a Dask scheduler address"),
) -> None:
    """Run one seed paper's experiments and write its report."""
    from ..presets import PRESETS, preset_document
    from ..report.campaign_report import write_report
    from .run_cmd import exit_if_runs_failed, run_campaign_with_progress

    doc = preset_document(name, quick=quick)
    notes = []
    preset = PRESETS[name]
    if quick:
        notes.append(f"--quick: shortened to {preset.quick_note}; run without --quick for the paper's full set")
    if backend == "live":
        from ..presets import live_document

        doc, live_notes = live_document(name, doc)
        notes += live_notes
    elif backend == "vm":
        from ..presets import vm_document

        doc, vm_notes = vm_document(name, doc)
        notes += vm_notes
    campaign = expand(doc, source=f"preset {name}", backend=backend)
    out_dir = out or Path("out") / doc["name"]
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "notes.txt").write_text("\n".join(notes) + ("\n" if notes else ""))
    console.print(f"[bold]{preset.title}[/] — {len(campaign.tasks)} runs into {out_dir}")
    for n in notes:
        console.print(f"note: {escape(n)}")
    report = run_campaign_with_progress(campaign, out_dir, workers=workers, dask=dask)
    if report.failed == report.total:
        exit_if_runs_failed(report, out_dir)  # nothing to report on
    try:
        paths = write_report(out_dir, notes=notes)
    except StoreError as e:
        if not report.failed:
            raise
        # E.g. every main run failed but calibration runs finished: say why there
        # is no report, then what failed.
        err_console.print(f"no report: {escape(str(e))}")
        exit_if_runs_failed(report, out_dir)
    console.print(f"report: [bold]{paths['html']}[/] (and {paths['markdown'].name}, figures/)")
    exit_if_runs_failed(report, out_dir)
