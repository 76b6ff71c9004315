"""`fairlab plan FILE`: the expanded list of runs, before anything runs."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from ..campaign.plan import CALIBRATION, MAIN, SOLO, load_campaign
from .common import console


def plan(
    scenario: Path = typer.Argument(..., help="scenario or campaign TOML file"),
    backend: str = typer.Option("sim", "--backend", help="sim or live (part of each run's content address)"),
) -> None:
    """Print every condition and run a scenario or campaign file expands to."""
    camp = load_campaign(scenario, backend=backend)
    t = Table(title=f"{camp.name}: {len(camp.tasks)} runs", title_justify="left")
    t.add_column("#", justify="right")
    t.add_column("kind")
    t.add_column("condition")
    t.add_column("run", justify="right")
    t.add_column("seed", justify="right")
    t.add_column("key")
    for i, task in enumerate(camp.tasks, 1):
        t.add_row(str(i), task.kind, task.label, str(task.run_index), str(task.seed), task.key)
    console.print(t)
    console.print(
        f"{len(camp.conditions)} condition(s) × runs = {camp.count(MAIN)} main runs, "
        f"{camp.count(CALIBRATION)} calibration runs, {camp.count(SOLO)} solo runs; {len(camp.tasks)} in all"
        + (f" (sweep mode: {camp.mode})" if camp.sweep else "")
    )
