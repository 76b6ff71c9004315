"""`fairlab list ccas|qdiscs`: the engine's name tables, with parameters."""

from __future__ import annotations

import typer
from rich.table import Table

from ..backends.sim import cca_table, qdisc_table
from .common import console

app = typer.Typer(help="List what fairlab knows: congestion controls, queue disciplines.", no_args_is_help=True)


def _print(rows: list[tuple[str, str, str]], title: str) -> None:
    t = Table(title=title, title_justify="left", show_lines=True)
    t.add_column("name", style="bold")
    t.add_column("what it is")
    t.add_column("parameters (defaults)")
    for name, summary, params in rows:
        t.add_row(name, summary, params)
    console.print(t)


@app.command("ccas")
def ccas() -> None:
    """Congestion controls for a flow's `cca` (names follow Linux)."""
    _print(cca_table(), "Congestion controls")


@app.command("qdiscs")
def qdiscs() -> None:
    """Queue disciplines for the bottleneck's `qdisc`."""
    _print(qdisc_table(), "Queue disciplines")


@app.command("presets")
def presets() -> None:
    """One-command reproductions of the seed papers (`fairlab reproduce NAME`)."""
    from ..presets import PRESETS

    t = Table(title="Presets", title_justify="left", show_lines=True)
    t.add_column("name", style="bold")
    t.add_column("paper (seed file)")
    t.add_column("what runs")
    t.add_column("--quick runs")
    for p in PRESETS.values():
        t.add_row(p.name, f"{p.title} ({p.seed_file})", p.description, p.quick_note)
    console.print(t)
