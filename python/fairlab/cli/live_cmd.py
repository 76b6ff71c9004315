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
    """Probe root, iperf3, kernel congestion controls and qdiscs, and linkem; say which emulation path is possible.
    Exits 1 when no live run could start here."""
    from ..backends.live.capabilities import probe, render

    caps = probe()
    problems = blockers(caps)
    if as_json:
        console.print_json(json.dumps({**caps.as_dict(), "usable": not problems, "blockers": problems}))
        if problems:
            raise typer.Exit(1)
        return
    t = Table(title="fairlab live: what this machine can do", title_justify="left")
    t.add_column("item", style="bold")
    t.add_column("finding")
    t.add_column("meaning")
    for item, finding, meaning in render(caps):
        style = "red" if finding in ("MISSING", "NONE") else None
        t.add_row(item, f"[{style}]{finding}[/]" if style else finding, meaning)
    console.print(t)
    if problems:
        err_console.print(f"[bold red]live runs cannot start here:[/] {escape('; '.join(problems))}", highlight=False)
        raise typer.Exit(1)


def blockers(caps) -> list[str]:  # type: ignore[no-untyped-def]
    """What stops every live run on this machine (empty: live runs can start)."""
    out = []
    if not caps.root:
        out.append("not root, and live runs create network namespaces (run it with sudo)")
    if not caps.iperf3:
        out.append("iperf3 is missing (apt-get install iperf3)")
    if not caps.tools.get("ip"):
        out.append("`ip` from iproute2 is missing")
    kernel_path = caps.has_qdisc("netem") and (caps.has_qdisc("tbf") or caps.has_qdisc("htb"))
    if not kernel_path and not caps.linkem:
        why = caps.qdisc_probe_error or "the kernel lacks netem with tbf or htb"
        out.append(f"no emulation path: kernel qdiscs unusable ({why}) and linkem {caps.linkem_how}")
    return out


@app.command("cleanup")
def cleanup(
    run_id: Optional[str] = typer.Option(None, "--run-id", help="only this run (fl-XXXX); default: every live run's leftovers"),
    dry_run: bool = typer.Option(False, "--dry-run", help="list what would be removed, remove nothing"),
    force: bool = typer.Option(False, "--force", help="also remove runs that are still in progress"),
    as_json: bool = typer.Option(False, "--json", help="print what was (or would be) removed as JSON (docs/cli.md)"),
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
    if as_json:
        print(json.dumps({
            "schema": 1, "dry_run": dry_run,
            "processes": [{"pid": pid, "command": cmd} for pid, cmd in rep.processes],
            "namespaces": list(rep.namespaces), "links": list(rep.links),
            "left_running": list(rep.skipped_active), "problems": [str(e) for e in rep.errors],
        }, indent=2))
        if rep.errors:
            raise typer.Exit(1)
        return
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
