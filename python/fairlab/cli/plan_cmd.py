"""`fairlab plan FILE|PRESET`: the expanded list of runs, before anything runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import typer
from rich.table import Table

from ..campaign.plan import CALIBRATION, MAIN, SOLO, Campaign, expand
from ..scenario import ScenarioError, read_toml
from .common import console
from .overrides import apply_overrides, refuse_swept_overrides

SET_HELP = "override a scenario field, e.g. --set bottleneck.rate=50Mbit --set flows[1].cca=bbr (repeat for more; docs/cli.md)"


def campaign_source(target: str, *, quick: bool, backend: str) -> tuple[dict[str, Any], str, list[str]]:
    """The campaign document of a scenario/campaign file or a preset name, a source
    name for messages, and notes saying what a preset's variant changed."""
    from ..presets import PRESETS, live_document, preset_document, vm_document

    path = Path(target)
    if path.exists() or target not in PRESETS:
        if not path.exists():
            raise ScenarioError(f"{target}: no such scenario file, and not a preset name either (presets: {', '.join(PRESETS)})")
        if quick:
            raise ScenarioError(f"--quick shortens a preset, and {target} is a file; edit the file or use --set instead")
        return read_toml(path), str(path), []
    doc = preset_document(target, quick=quick)
    notes = [f"--quick: shortened to {PRESETS[target].quick_note}"] if quick else []
    if backend in ("live", "vm"):
        doc, backend_notes = (live_document if backend == "live" else vm_document)(target, doc)
        notes += backend_notes
    return doc, f"preset {target}", notes


def plan(
    scenario: str = typer.Argument(..., help="scenario or campaign TOML file, or a preset name (fairlab list presets)"),
    backend: str = typer.Option("sim", "--backend", help="sim, live or vm (part of each run's content address; presets: the variant that backend runs)"),
    quick: bool = typer.Option(False, "--quick", help="presets: the shortened variant `reproduce --quick` runs"),
    overrides: Optional[list[str]] = typer.Option(None, "--set", metavar="PATH=VALUE", help=SET_HELP),
    as_json: bool = typer.Option(False, "--json", help="print the plan as JSON (docs/cli.md)"),
) -> None:
    """Print every condition and run a scenario, campaign file or preset expands to."""
    doc, source, notes = campaign_source(scenario, quick=quick, backend=backend)
    doc = apply_overrides(doc, overrides, source=source)
    camp = expand(doc, source=source, backend=backend)
    refuse_swept_overrides(camp, overrides)
    if as_json:
        print(json.dumps(plan_document(camp, notes), indent=2, default=str))
        return
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
        + (f" (sweep mode: {camp.mode}; {'common random numbers: run k of every condition shares a seed' if camp.common_random_numbers else 'each condition has its own seeds'})" if camp.sweep else "")
    )
    for n in notes:
        console.print(f"note: {n}", highlight=False, markup=False)


def plan_document(camp: Campaign, notes: list[str]) -> dict[str, Any]:
    """`fairlab plan --json` (schema in docs/cli.md)."""
    return {
        "schema": 1,
        "name": camp.name,
        "title": camp.base.get("title"),
        "description": camp.base.get("description"),
        "source": camp.source,
        "backend": camp.backend,
        "sweep": camp.sweep,
        "mode": camp.mode if camp.sweep else None,
        "common_random_numbers": camp.common_random_numbers if camp.sweep else None,
        "counts": {
            "conditions": len(camp.conditions),
            "main": camp.count(MAIN),
            "calibration": camp.count(CALIBRATION),
            "solo": camp.count(SOLO),
            "total": len(camp.tasks),
        },
        "runs": [
            {"index": i, "kind": t.kind, "condition": t.condition, "label": t.label, "point": t.point,
             "run_index": t.run_index, "seed": t.seed, "key": t.key}
            for i, t in enumerate(camp.tasks, 1)
        ],
        "notes": notes,
    }
