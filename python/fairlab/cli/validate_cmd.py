"""`fairlab validate`: the validation grid on the simulator and the real kernel, side by side."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Optional

import numpy as np
import pandas as pd
import typer
from rich.markup import escape

from ..validation.grid import SIM_SEEDS
from .common import UsageError, console, err_console
from .overrides import apply_overrides

SIDES = ("sim", "vm", "both")


def committed_vm_results() -> Path:
    """The kernel's side of the grid as shipped with fairlab (``make validate`` refreshes it)."""
    return Path(str(resources.files("fairlab.validation") / "data" / "vm-grid.csv"))


def _chance(x: float) -> str:
    return "—" if pd.isna(x) else f"{x:.2f}"


def _print_table(table: pd.DataFrame) -> None:
    from rich.table import Table

    t = Table(title="simulator vs kernel, cell by cell (shares in %, J of means over seeds)", title_justify="left")
    for c in ("cell", "sim shares", "vm shares", "sim J", "vm J", "seeds", "chance", "verdict"):
        t.add_column(c, justify="right" if c in ("sim J", "vm J", "seeds", "chance") else "left")
    for r in table.itertuples():
        colour = {"agree": "green", "differs": "red"}.get(r.verdict, "yellow")
        verdict = f"[{colour}]{escape(r.verdict if r.agree else f'{r.verdict}: {r.difference}')}[/]"
        t.add_row(escape(r.cell.replace("|", " · ")), r.sim_shares, r.vm_shares, f"{r.sim_j:.3f}", f"{r.vm_j:.3f}",
                  f"{r.seeds_sim}/{r.seeds_vm}", _chance(r.agree_chance), verdict)
    console.print(t)


def read_kernel_results(path: Path) -> pd.DataFrame:
    """Kernel results as `fairlab validate --record` writes them, checked: a file
    that is not such a table is refused with what is wrong, not a traceback.
    Seeds are read as exact 64-bit integers (they exceed a float's 2^53)."""
    from ..validation import grid

    required = ["cell", "seed", "flow", "share", "jain_of_means"]
    try:
        df = pd.read_csv(path, dtype={"seed": "Int64", "flow": "Int64"})
    except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError, ValueError, TypeError) as exc:
        raise UsageError(f"{path}: not a table of kernel results ({str(exc).splitlines()[0]}); "
                         f"expected the CSV `fairlab validate --record` writes, with columns {', '.join(grid.RESULT_COLUMNS)}") from None
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise UsageError(f"{path}: column(s) {', '.join(missing)} missing; expected the CSV `fairlab validate --record` "
                         f"writes, with columns {', '.join(grid.RESULT_COLUMNS)}")
    for c in grid.RESULT_COLUMNS:
        if c not in df.columns:
            df[c] = 1 if c == "vm_format" else np.nan
    # Numbers must be numbers: a word where a count belongs would otherwise surface as
    # a pandas error deep in the comparison (or, for vm_format, as a silent format 1).
    for c in ("mean_bps", "share", "jain_of_means", "mean_jt", "retransmits", "drops", "vm_format"):
        given = df[c].notna()
        numeric = pd.to_numeric(df[c], errors="coerce")
        bad = given & numeric.isna()
        if bad.any():
            i = int(np.flatnonzero(bad.to_numpy())[0])
            raise UsageError(f"{path}, line {i + 2}: {c} is {df[c].iloc[i]!r}, not a number")
        df[c] = numeric
    df["vm_format"] = df["vm_format"].fillna(1).astype("int64")
    from ..backends.vm.plan import VM_FORMAT_VERSION

    newer = df[(df["vm_format"] < 1) | (df["vm_format"] > VM_FORMAT_VERSION)]
    if len(newer):
        raise UsageError(f"{path}: vm_format {int(newer['vm_format'].iloc[0])} is not one this fairlab knows "
                         f"(1-{VM_FORMAT_VERSION}); runs of a newer fairlab need that fairlab")
    blank = df[required].isna().any(axis=1)
    if blank.any():
        row = int(np.flatnonzero(blank.to_numpy())[0]) + 2  # + header, 1-based
        raise UsageError(f"{path}, line {row}: an empty {', '.join(c for c in required if pd.isna(df.iloc[row - 2][c]))}")
    for cell_id in df["cell"].unique():
        try:
            grid.Cell.from_id(str(cell_id))
        except ValueError as exc:
            raise UsageError(f"{path}: cell {exc}") from None
    return df.astype({"seed": "int64", "flow": "int64"})


def _recorded_runs(record: Path | None) -> pd.DataFrame:
    """The kernel runs already in ``record`` (none when it is absent)."""
    from ..validation import grid

    if record is None or not record.exists():
        return pd.DataFrame(columns=grid.RESULT_COLUMNS)
    return read_kernel_results(record)


def _record(vm: pd.DataFrame, record: Path) -> pd.DataFrame:
    """Merge this run's kernel results into ``record`` and return the merged rows.

    A run replaces the file's run of the same cell, seed and vm format; every other
    recorded run is kept, so adding seeds to a cell never loses the ones it had."""
    from ..validation import grid

    old = _recorded_runs(record)
    key = ["cell", "seed", "vm_format"]
    if len(vm):
        new_keys = pd.MultiIndex.from_frame(vm[key].astype({"seed": "int64", "vm_format": "int64"}))
        old_keys = pd.MultiIndex.from_frame(old[key])  # read_kernel_results made these exact ints
        old = old[~old_keys.isin(new_keys)]
    merged = pd.concat([old, vm], ignore_index=True) if len(old) else vm.copy()
    record.parent.mkdir(parents=True, exist_ok=True)
    merged.reindex(columns=grid.RESULT_COLUMNS).to_csv(record, index=False)
    console.print(f"kernel results recorded in {record} ({merged['cell'].nunique()} cells, {len(merged.groupby(key))} runs)")
    return merged


def _without_recorded_runs(camp, recorded: pd.DataFrame, kernel_release: str | None = None):
    """``camp`` less the kernel runs ``recorded`` already holds in a format that
    measured the same thing (validation.grid.run_formats) and, when
    ``kernel_release`` is given, on that kernel release (a run of another kernel,
    your own `fairlab vm build --kernel` among them, is not this kernel's run):
    `--record` makes the kernel's side resumable across machines, not only within
    one store. Runs of images that differ only in user-space packages count."""
    import dataclasses

    from ..backends.vm.plan import VM_FORMAT_VERSION, effective_format
    from ..validation import grid

    if not len(recorded):
        return camp
    have = set()
    if kernel_release is not None:
        recorded = recorded[recorded["kernel"].astype(str) == kernel_release]
    for cell, seed, measured in zip(recorded["cell"], recorded["seed"], grid.formats_of_rows(recorded)):
        if effective_format(VM_FORMAT_VERSION, grid.Cell.from_id(cell).qdisc) in measured:
            have.add((cell, int(seed)))
    tasks = [t for t in camp.tasks if (grid.cell_of(t.point).id, int(t.seed)) not in have]
    skipped = len(camp.tasks) - len(tasks)
    if skipped:
        err_console.print(f"vm: {skipped} run(s) already recorded in the same vm format; not run again")
    return dataclasses.replace(camp, tasks=tasks)


def _store_name(name: str, cells: list | None, seeds: int, overrides: list[str] | None = None) -> str:
    """The campaign store's name for this selection: a store holds one plan, so a
    `--cell` selection, a seed count other than the grid's and a `--set` what-if
    each get a store of their own (the same selection resumes its store; `--record`
    carries kernel runs across selections and machines)."""
    import hashlib

    from ..validation import grid

    if cells:
        name += "-cells-" + hashlib.sha256("\n".join(sorted(c.id for c in cells)).encode()).hexdigest()[:10]
    if seeds != grid.SEEDS:
        name += f"-{seeds}seeds"
    if overrides:
        name += "-set-" + hashlib.sha256("\n".join(overrides).encode()).hexdigest()[:10]
    return name


#: What a `--set` what-if may change: how the simulator models the hosts and their
#: TCP, never the experiment the kernel ran (rate, buffer, queue, controls, RTTs,
#: duration, window, seeds), against which the what-if is judged.
WHAT_IF_FIELDS = ("variation", "access_rate")
WHAT_IF_FLOW_FIELDS = ("gso", "delayed_ack", "sack", "initial_cwnd", "ecn", "params", "rwnd", "mss")


WHAT_IF_ALLOWED = ", ".join([*(f"{f}.*" if f == "variation" else f for f in WHAT_IF_FIELDS),
                             *(f"flows[*].{f}" for f in WHAT_IF_FLOW_FIELDS)])


def _check_what_if(assignment: str) -> None:
    """Refuse a `--set` of anything but a `WHAT_IF_FIELDS` modelling field (the
    schema check of the path and value comes after, in `apply_overrides`)."""
    path, sep, _ = assignment.partition("=")
    path = path.strip()
    if not sep or not path:
        raise UsageError(f"--set {assignment!r} must be PATH=VALUE, e.g. variation.host_jitter=30us; "
                         f"a what-if may change {WHAT_IF_ALLOWED}")
    head, _, rest = path.partition(".")
    name = head.split("[", 1)[0]
    if name in WHAT_IF_FIELDS or (name == "flows" and rest.split(".", 1)[0] in WHAT_IF_FLOW_FIELDS):
        return
    raise UsageError(f"--set {assignment!r}: {path} is part of the experiment the kernel ran, so the simulator "
                     f"would be judged against runs of another experiment; a what-if may change {WHAT_IF_ALLOWED}")


def validate(
    subset: str = typer.Option("core", "--subset", help="which cells: core (every pair at 100 ms, 1 BDP, and the homogeneous cells), homogeneous, or full (docs/validation/vm.md)"),
    backend: str = typer.Option("sim", "--backend", help="run sim (and compare with the committed kernel results), vm, or both"),
    out: Path = typer.Option(Path("out/validate"), "--out", help="directory for the campaign stores and the report"),
    workers: Optional[int] = typer.Option(None, "--workers", min=1, help="local worker processes (default: all cores)"),
    vm_data: Optional[Path] = typer.Option(None, "--vm-data", help="the kernel's results to compare with (default: those shipped with fairlab; with --backend vm/both, this run's)"),
    record: Optional[Path] = typer.Option(None, "--record", help="also write the kernel's per-run results to this CSV, merged with the runs it holds; with --backend vm/both, runs it already holds are not run again"),
    cell_ids: Optional[list[str]] = typer.Option(None, "--cell", metavar="ID", help="run only this cell (repeatable), named as in the table, e.g. 'reno-cubic|100ms|1bdp|droptail'"),
    seeds: int = typer.Option(3, "--seeds", min=1, max=50, help=f"kernel seeds per cell (the simulator runs at least {SIM_SEEDS}, the kernel's first)"),
    overrides: Optional[list[str]] = typer.Option(None, "--set", metavar="PATH=VALUE", help=f"a what-if for the simulator (--backend sim): change how it models the hosts in every cell ({WHAT_IF_ALLOWED}) and compare with the same kernel runs"),
) -> None:
    """Run the validation grid and say, cell by cell, whether the simulator agrees
    with the real kernel (±5 points of share, ±0.03 of J of means)."""
    from ..campaign.plan import expand
    from ..validation import grid
    from .run_cmd import run_campaign_with_progress

    if backend not in SIDES:
        raise UsageError(f"--backend {backend!r} is not known; allowed: {', '.join(SIDES)}")
    if overrides and backend != "sim":
        raise UsageError("--set changes the simulator's model only (a what-if against the kernel runs fairlab ships); "
                         "use it with --backend sim")
    for a in overrides or []:
        _check_what_if(a)
    try:
        selected = list(dict.fromkeys(grid.Cell.from_id(c) for c in cell_ids)) if cell_ids else grid.cells(subset)
    except ValueError as exc:
        raise UsageError(f"--cell: {exc}" if cell_ids else str(exc)) from None
    unknown = [c.id for c in selected if cell_ids and c not in set(grid.cells("full"))]
    if unknown:
        raise UsageError(f"--cell {unknown[0]!r} is not a cell of the grid (docs/validation/vm.md lists them; "
                         f"e.g. 'reno-cubic|100ms|1bdp|droptail', '8xcubic|25ms|1bdp|droptail')")
    ids = {c.id for c in selected}
    sides = ("sim", "vm") if backend == "both" else (backend,)
    cannot = [c for c in selected if c.id in grid.KERNEL_CANNOT_RUN]
    if cannot and len(cannot) == len(selected):
        # Nothing to run on the kernel and nothing to hold the simulator against.
        raise UsageError("the kernel cannot measure " + "; ".join(
            f"cell {c.id}: {grid.KERNEL_CANNOT_RUN[c.id]}" for c in cannot)
            + " — so the grid has no kernel side for it to run or to compare with")
    if "vm" in sides:
        for c in cannot:
            err_console.print(f"vm: cell {escape(c.id)} is not run on the kernel: {escape(grid.KERNEL_CANNOT_RUN[c.id])}")
    if backend == "sim":
        # Find the kernel's side before spending minutes on the simulator's.
        src = vm_data or committed_vm_results()
        if not src.exists():
            raise UsageError(f"{src}: no kernel results to compare with; run `fairlab validate --backend vm` first")
        vm = grid.newest_complete_format(read_kernel_results(src))
        vm = vm[vm["cell"].isin(ids)]
        if vm.empty:
            raise UsageError(f"{src} has no kernel results for the {len(ids)} cell(s) asked for; "
                             "run them with --backend vm or both (docs/validation/vm.md)")
    results: dict[str, pd.DataFrame] = {}
    for side in sides:
        parts = []
        side_cells = [c for c in selected if c not in cannot] if side == "vm" else selected
        for doc in grid.campaign_docs(side_cells, runs=max(grid.SIM_SEEDS, seeds) if side == "sim" else seeds):
            if overrides:
                doc = apply_overrides(doc, overrides, source=f"validation grid ({doc['name']})")
            camp = expand(doc, source=f"validation grid ({doc['name']})", backend=side)
            if side == "vm" and record is not None:
                from ..backends.vm.image import find

                release = str(find(err_console.print).manifest.get("kernel_release"))
                camp = _without_recorded_runs(camp, _recorded_runs(record), release)
            store_dir = out / side / _store_name(doc["name"], selected if cell_ids else None, seeds, overrides)
            err_console.print(f"{side}: {doc['name']}: {len(camp.tasks)} runs into {store_dir}")
            try:
                run_campaign_with_progress(camp, store_dir, workers=workers, dask=None)
            except typer.Exit:
                # Interrupted (the kernel's side takes hours): keep what finished.
                if side == "vm" and record is not None:
                    _record(pd.concat([*parts, grid.store_results(store_dir, side, every_format=True)], ignore_index=True), record)
                raise
            # Every kernel run is recorded; which format counts is decided when comparing.
            parts.append(grid.store_results(store_dir, side, every_format=record is not None))
        results[side] = pd.concat(parts, ignore_index=True)
    if "vm" in results:
        vm = results["vm"]
        if record is not None:
            # Compare with every recorded run of these cells, not only this call's.
            vm = _record(vm, record)
        vm = grid.newest_complete_format(vm)
        vm = vm[vm["cell"].isin(ids)]
    if "sim" not in results:
        console.print(f"kernel side only: {vm['cell'].nunique()} cells; run with --backend both or sim to compare")
        return
    missing = len(ids - set(vm["cell"]) - set(grid.KERNEL_CANNOT_RUN))
    if vm.empty:
        raise UsageError(f"none of the {len(ids)} cell(s) asked for has kernel results to compare with "
                         "(did every kernel run fail? the campaign store says why)")
    table = grid.compare(results["sim"], vm)
    out.mkdir(parents=True, exist_ok=True)
    what_if = f"simulator what-if: --set {' '.join(overrides)} (not fairlab's default simulator)" if overrides else ""
    (out / "grid.md").write_text((f"{what_if}\n\n" if what_if else "") + grid.markdown(table))
    table.to_csv(out / "grid.csv", index=False)
    counts = table["verdict"].value_counts()
    _print_table(table)
    if what_if:
        console.print(f"[yellow]{escape(what_if)}[/]")
    if missing:
        which = "asked for" if cell_ids else f"of --subset {escape(subset)}"
        console.print(f"note: {missing} cell(s) {which} have no kernel results yet")
    if cannot:
        console.print(f"note: {len(cannot)} cell(s) the kernel cannot measure are not compared: "
                      + ", ".join(escape(c.id) for c in cannot) + " (docs/validation/vm.md)")
    console.print(f"{counts.get('agree', 0)} of {len(table)} cells agree, {counts.get('differs', 0)} differ significantly, "
                  f"{counts.get('inconclusive', 0)} inconclusive (too few seeds to call); table in {out / 'grid.md'}")
    chance = table["agree_chance"].dropna()
    if len(chance):
        console.print(f"ceiling (chance): a simulator whose runs were draws of the kernel's own would agree in about "
                      f"{chance.sum():.1f} of {len(chance)} with these kernel seeds (docs/validation/vm.md, \"The grid's ceiling\")")
