"""`fairlab validate`: the validation grid on the simulator and the real kernel, side by side."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Optional

import pandas as pd
import typer
from rich.markup import escape

from .common import UsageError, console, err_console

SIDES = ("sim", "vm", "both")


def committed_vm_results() -> Path:
    """The kernel's side of the grid as shipped with fairlab (``make validate`` refreshes it)."""
    return Path(str(resources.files("fairlab.validation") / "data" / "vm-grid.csv"))


def _print_table(table: pd.DataFrame) -> None:
    from rich.table import Table

    t = Table(title="simulator vs kernel, cell by cell (shares in %, J of means over seeds)", title_justify="left")
    for c in ("cell", "sim shares", "vm shares", "sim J", "vm J", "seeds", "verdict"):
        t.add_column(c, justify="right" if c in ("sim J", "vm J", "seeds") else "left")
    for r in table.itertuples():
        colour = {"agree": "green", "differs": "red"}.get(r.verdict, "yellow")
        verdict = f"[{colour}]{escape(r.verdict if r.agree else f'{r.verdict}: {r.difference}')}[/]"
        t.add_row(escape(r.cell.replace("|", " · ")), r.sim_shares, r.vm_shares, f"{r.sim_j:.3f}", f"{r.vm_j:.3f}",
                  f"{r.seeds_sim}/{r.seeds_vm}", verdict)
    console.print(t)


def _record(vm: pd.DataFrame, record: Path) -> None:
    """Merge this run's kernel results into ``record``: its cells replace the file's."""
    from ..validation import grid

    old = pd.read_csv(record) if record.exists() else pd.DataFrame(columns=grid.RESULT_COLUMNS)
    merged = pd.concat([old[~old["cell"].isin(set(vm["cell"]))], vm], ignore_index=True)
    record.parent.mkdir(parents=True, exist_ok=True)
    merged.to_csv(record, index=False, float_format="%.6g")
    console.print(f"kernel results recorded in {record} ({merged['cell'].nunique()} cells)")


def validate(
    subset: str = typer.Option("core", "--subset", help="which cells: core (every pair at 100 ms, 1 BDP, and the homogeneous cells), homogeneous, or full (docs/validation/vm.md)"),
    backend: str = typer.Option("sim", "--backend", help="run sim (and compare with the committed kernel results), vm, or both"),
    out: Path = typer.Option(Path("out/validate"), "--out", help="directory for the campaign stores and the report"),
    workers: Optional[int] = typer.Option(None, "--workers", min=1, help="local worker processes (default: all cores)"),
    vm_data: Optional[Path] = typer.Option(None, "--vm-data", help="the kernel's results to compare with (default: those shipped with fairlab; with --backend vm/both, this run's)"),
    record: Optional[Path] = typer.Option(None, "--record", help="also write the kernel's per-run results (merged with the file's existing cells) to this CSV"),
) -> None:
    """Run the validation grid and say, cell by cell, whether the simulator agrees
    with the real kernel (±5 points of share, ±0.03 of J of means)."""
    from ..campaign.plan import expand
    from ..validation import grid
    from .run_cmd import run_campaign_with_progress

    if backend not in SIDES:
        raise UsageError(f"--backend {backend!r} is not known; allowed: {', '.join(SIDES)}")
    try:
        selected = grid.cells(subset)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    ids = {c.id for c in selected}
    sides = ("sim", "vm") if backend == "both" else (backend,)
    results: dict[str, pd.DataFrame] = {}
    for side in sides:
        parts = []
        for doc in grid.campaign_docs(selected, runs=grid.SIM_SEEDS if side == "sim" else grid.SEEDS):
            camp = expand(doc, source=f"validation grid ({doc['name']})", backend=side)
            store_dir = out / side / doc["name"]
            err_console.print(f"{side}: {doc['name']}: {len(camp.tasks)} runs into {store_dir}")
            try:
                run_campaign_with_progress(camp, store_dir, workers=workers, dask=None)
            except typer.Exit:
                # Interrupted (the kernel's side takes hours): keep what finished.
                if side == "vm" and record is not None:
                    _record(pd.concat([*parts, grid.store_results(store_dir, side)], ignore_index=True), record)
                raise
            parts.append(grid.store_results(store_dir, side))
        results[side] = pd.concat(parts, ignore_index=True)
    if "vm" in results:
        vm = results["vm"]
        if record is not None:
            _record(vm, record)
    else:
        src = vm_data or committed_vm_results()
        if not src.exists():
            raise UsageError(f"{src}: no kernel results to compare with; run `fairlab validate --backend vm` first")
        vm = pd.read_csv(src)
    vm = vm[vm["cell"].isin(ids)]
    if "sim" not in results:
        console.print(f"kernel side only: {vm['cell'].nunique()} cells; run with --backend both or sim to compare")
        return
    table = grid.compare(results["sim"], vm)
    out.mkdir(parents=True, exist_ok=True)
    (out / "grid.md").write_text(grid.markdown(table))
    table.to_csv(out / "grid.csv", index=False)
    missing = len(ids - set(vm["cell"]))
    counts = table["verdict"].value_counts()
    _print_table(table)
    if missing:
        console.print(f"note: {missing} cell(s) of --subset {escape(subset)} have no kernel results yet")
    console.print(f"{counts.get('agree', 0)} of {len(table)} cells agree, {counts.get('differs', 0)} differ significantly, "
                  f"{counts.get('inconclusive', 0)} inconclusive (too few seeds to call); table in {out / 'grid.md'}")
