"""`fairlab live doctor|cleanup`: what this machine can do for live runs, and
removing what interrupted live runs left behind (by the ``fl-<hex>-`` prefix only)."""

from __future__ import annotations

import json
from typing import Optional

import typer
from rich.markup import escape
from rich.table import Table

from .common import console, err_console

app = typer.Typer(help="Live runs (real TCP in network namespaces): check the machine, clean up leftovers.",
                  no_args_is_help=True)


@app.command("doctor")
def doctor(
    as_json: bool = typer.Option(False, "--json", help="print the probe as JSON"),
) -> None:
    """Probe root, iperf3, kernel congestion controls and qdiscs, and linkem; say which emulation path is possible."""
    from ..backends.live.capabilities import probe, render

    caps = probe()
    if as_json:
        console.print_json(json.dumps(caps.as_dict()))
        return
    t = Table(title="fairlab live: what this machine can do", title_justify="left")
    t.add_column("item", style="bold")
    t.add_column("finding")
    t.add_column("meaning")
    for item, finding, meaning in render(caps):
        style = "red" if finding in ("MISSING", "NONE") else None
        t.add_row(item, f"[{style}]{finding}[/]" if style else finding, meaning)
    console.print(t)


@app.command("cleanup")
def cleanup(
    run_id: Optional[str] = typer.Option(None, "--run-id", help="only this run (fl-XXXX); default: every live run's leftovers"),
    dry_run: bool = typer.Option(False, "--dry-run", help="list what would be removed, remove nothing"),
    force: bool = typer.Option(False, "--force", help="also remove runs that are still in progress"),
) -> None:
    """Remove namespaces, links, processes, pid files and temporary directories left by live runs — only names of the form fl-<hex>-…"""
    import os

    from ..backends.live.cleanup import cleanup as do_cleanup
    from ..backends.live.errors import NOT_ROOT

    if os.geteuid() != 0 and not dry_run:
        err_console.print(f"[bold red]error:[/] {NOT_ROOT}")
        raise typer.Exit(2)
    try:
        rep = do_cleanup(run_id, dry_run=dry_run, force=force)
    except ValueError as exc:
        err_console.print(f"[bold red]error:[/] {escape(str(exc))}")
        raise typer.Exit(2) from None
    verb = "would remove" if dry_run else "removed"
    if rep.empty:
        console.print("nothing to clean up: no fl-<hex>- namespaces, links, processes, pid files or temporary directories")
    for pid, cmd in rep.processes:
        console.print(f"{verb} process {pid}: {cmd}", highlight=False)
    for n in rep.namespaces:
        console.print(f"{verb} namespace {n}", highlight=False)
    for n in rep.links:
        console.print(f"{verb} link {n}", highlight=False)
    for p in rep.pid_files:
        console.print(f"{verb} pid file {p}", highlight=False)
    for p in rep.temp_dirs:
        console.print(f"{verb} temporary directory {p}", highlight=False)
    for rid in rep.skipped_active:
        console.print(f"left run {rid} alone: it is still in progress (use --force, or --run-id {rid})", highlight=False)
    for e in rep.errors:
        err_console.print(f"[yellow]problem:[/] {escape(str(e))}", highlight=False)
    if rep.errors:
        raise typer.Exit(1)
