"""`fairlab list ccas|qdiscs|presets`: the engine's name tables, with parameters."""

from __future__ import annotations

import json

import typer
from rich.table import Table

from ..backends.sim import cca_table, qdisc_table
from .common import console

app = typer.Typer(help="List what fairlab knows: congestion controls, queue disciplines, presets.", no_args_is_help=True)

JSON_HELP = "print the list as JSON (docs/cli.md)"


def _print(rows: list[tuple[str, str, str]], title: str, key: str, as_json: bool) -> None:
    if as_json:
        print(json.dumps({"schema": 1, key: [{"name": n, "summary": s, "parameters": p} for n, s, p in rows]}, indent=2))
        return
    t = Table(title=title, title_justify="left", show_lines=True)
    t.add_column("name", style="bold")
    t.add_column("what it is")
    t.add_column("parameters (defaults)")
    for name, summary, params in rows:
        t.add_row(name, summary, params)
    console.print(t)


@app.command("ccas")
def ccas(as_json: bool = typer.Option(False, "--json", help=JSON_HELP)) -> None:
    """Congestion controls for a flow's `cca` (names follow Linux)."""
    _print(cca_table(), "Congestion controls", "ccas", as_json)


@app.command("qdiscs")
def qdiscs(as_json: bool = typer.Option(False, "--json", help=JSON_HELP)) -> None:
    """Queue disciplines for the bottleneck's `qdisc`."""
    _print(qdisc_table(), "Queue disciplines", "qdiscs", as_json)


@app.command("presets")
def presets(as_json: bool = typer.Option(False, "--json", help=JSON_HELP)) -> None:
    """One-command reproductions of the seed papers (`fairlab reproduce NAME`)."""
    from ..presets import PRESETS

    if as_json:
        doc = [{"name": p.name, "title": p.title, "seed_file": p.seed_file, "description": p.description,
                "quick_note": p.quick_note, "live_note": p.live_note or None} for p in PRESETS.values()]
        print(json.dumps({"schema": 1, "presets": doc}, indent=2))
        return
    t = Table(title="Presets", title_justify="left", show_lines=True)
    t.add_column("name", style="bold")
    t.add_column("paper (seed file)")
    t.add_column("what runs")
    t.add_column("--quick runs")
    for p in PRESETS.values():
        t.add_row(p.name, p.title, p.description, p.quick_note)
    console.print(t)
