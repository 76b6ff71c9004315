"""Campaign commands: `reproduce`, `report`, `query`."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Optional

import typer
from rich.markup import escape
from rich.table import Table

from ..campaign.paths import slug
from ..campaign.plan import expand
from ..campaign.store import Store, StoreError
from .common import console, err_console
from .overrides import apply_overrides, refuse_swept_overrides
from .plan_cmd import SET_HELP
from .progress import Working


def report(
    directory: Path = typer.Argument(..., help="a campaign directory (from fairlab run / reproduce)"),
    as_json: bool = typer.Option(False, "--json", help="print the written paths as JSON (docs/cli.md)"),
) -> None:
    """Write report.md, a self-contained report.html and PNG/SVG figures for a campaign."""
    from ..report.campaign_report import write_report

    _repair(directory)
    notes = _stored_notes(directory)
    with Working(f"writing the report of {directory}"):
        out = write_report(directory, notes=notes)
    if as_json:
        print(json.dumps({"schema": 1, "report": _report_paths(out)}, indent=2))
        return
    console.print(f"wrote [bold]{out['markdown']}[/], [bold]{out['html']}[/] and figures in {out['figures']}")


def _report_paths(paths: dict[str, Any]) -> dict[str, str]:
    return {k: str(v) for k, v in paths.items()}


def _repair(directory: Path) -> None:
    """Verify the store before reading it (unless a campaign is writing it): a run
    that fails its checksums or key is moved to quarantine/ and said so."""
    store = Store(directory)
    store.manifest()
    if store.try_exclusive():
        for key, reason in store.repair():
            err_console.print(f"[yellow]damaged run[/] {key}: {escape(reason)}; moved to {escape(str(store.quarantine_dir))}/ "
                              "(run the campaign again to recompute it)")


def _stored_notes(directory: Path) -> list[str]:
    p = Path(directory) / "notes.txt"
    return [ln for ln in p.read_text().splitlines() if ln.strip()] if p.exists() else []


def query(
    directory: Path = typer.Argument(..., help="a campaign directory"),
    sql: str = typer.Argument(..., help='SQL over the tables runs, summaries, conditions, samples, flows, bottleneck (docs/campaigns.md), e.g. "SELECT rtt_ms, avg(jain_mean_jt) FROM runs GROUP BY rtt_ms"'),
    csv: bool = typer.Option(False, "--csv", help="print CSV instead of a table"),
    as_json: bool = typer.Option(False, "--json", help="print the result as JSON: columns and one object per row (docs/cli.md)"),
) -> None:
    """Run SQL against a campaign's DuckDB catalog."""
    _repair(directory)
    df = Store(directory).query(sql)
    if as_json:
        print(json.dumps(query_document(sql, df), indent=2, allow_nan=False, default=str))
        return
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
    overrides: Optional[list[str]] = typer.Option(None, "--set", metavar="PATH=VALUE", help=SET_HELP),
    as_json: bool = typer.Option(False, "--json", help="print the campaign's outcome and the report's paths as JSON (docs/cli.md)"),
) -> None:
    """Run one seed paper's experiments and write its report."""
    from ..presets import PRESETS, preset_document
    from ..report.campaign_report import write_report
    from .run_cmd import campaign_document, exit_if_runs_failed, run_campaign_with_progress

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
    doc = apply_overrides(doc, overrides, source=f"preset {name}")
    notes += [f"--set {a} (changed from the preset on the command line)" for a in overrides or []]
    campaign = expand(doc, source=f"preset {name}", backend=backend)
    refuse_swept_overrides(campaign, overrides)
    say = err_console if as_json else console
    out_dir = out or Path("out") / slug(doc["name"])
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "notes.txt").write_text("\n".join(notes) + ("\n" if notes else ""))
    say.print(f"[bold]{preset.title}[/] — {len(campaign.tasks)} runs into {out_dir}")
    for n in notes:
        say.print(f"note: {escape(n)}")
    report = run_campaign_with_progress(campaign, out_dir, workers=workers, dask=dask, as_json=as_json)
    if report.failed == report.total:
        exit_if_runs_failed(report, out_dir)  # nothing to report on
    try:
        with Working(f"writing the report of {out_dir}"):
            paths = write_report(out_dir, notes=notes)
    except StoreError as e:
        if not report.failed:
            raise
        # E.g. every main run failed but calibration runs finished: say why there
        # is no report, then what failed.
        err_console.print(f"no report: {escape(str(e))}")
        exit_if_runs_failed(report, out_dir)
    if as_json:
        print(json.dumps({**campaign_document(campaign, report, out_dir), "notes": notes, "report": _report_paths(paths)},
                         indent=2, allow_nan=False, default=str))
    else:
        console.print(f"report: [bold]{paths['html']}[/] (and {paths['markdown'].name}, figures/)")
    exit_if_runs_failed(report, out_dir)


def _json_value(v: Any) -> Any:
    """A catalog cell as JSON: numpy values as Python ones, NaN/inf/NA as null,
    timestamps as ISO 8601 text."""
    import datetime

    import numpy as np
    import pandas as pd

    if isinstance(v, np.ndarray):
        v = v.tolist()
    if isinstance(v, (list, tuple)):
        return [_json_value(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _json_value(x) for k, x in v.items()}
    if isinstance(v, np.generic):
        v = v.item()
    if v is None or v is pd.NA or v is pd.NaT:
        return None
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, (datetime.date, datetime.time)):
        return v.isoformat()
    return v


def query_document(sql: str, df: Any) -> dict[str, Any]:
    """`fairlab query --json` (schema in docs/cli.md)."""
    cols = [str(c) for c in df.columns]
    rows = [{c: _json_value(v) for c, v in zip(cols, row)} for row in df.itertuples(index=False, name=None)]
    return {"schema": 1, "sql": sql, "columns": cols, "rows": rows}
