"""The simulator held against the real kernel (docs/validation/vm.md).

The kernel's side of the validation grid is committed data (run by `make validate`
on the vm backend: a stock Linux 6.1 in QEMU). Here the simulator runs the same
cells with the same seeds and must agree with the kernel on at least as many cells
as it did when the data was last refreshed, so the simulator cannot drift away from
Linux unnoticed. `make test` checks the grid's `core` slice (every pair at 100 ms
and 1 BDP, and the homogeneous multi-flow cells: about a fifth of the cost);
`make validate` sets ``FAIRLAB_GRID=full`` and checks every shipped cell. Raise
`MIN_AGREEING` when the simulator gets closer; lowering it is a decision to write
down in docs/validation/vm.md.
"""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor

import pandas as pd
import pytest

from fairlab.campaign.plan import expand
from fairlab.cli.validate_cmd import committed_vm_results
from fairlab.runner import run_scenario
from fairlab.validation import grid

#: Cells of the committed kernel data on which the simulator agreed (±5 points of
#: share, ±0.03 of J of means) when the data was last refreshed (docs/validation/vm.md),
#: for the whole grid and for its `core` slice.
MIN_AGREEING = {
    # 2026-12-01: 203 of the 279 shipped cells (all but one of the grid), 90 simulator
    # seeds each. Lowered from 209 (30 seeds): that was one draw of a count that four
    # draws put at 197-209; with 90 seeds the build before the cwnd-limited change
    # scores 204 (docs/validation/vm.md, "Linux's cwnd-limited window").
    # 204 since DCCP's whole Ack Vector (only DCCP rows moved; CCID2–CCID2 at 200 ms,
    # 0.2 BDP now agrees).
    # 203 (core 35) since 2026-12-01 afternoon: the simulator unchanged, thirty cells
    # measured with six kernel seeds instead of three; the sharper kernel means showed
    # departures three seeds had hidden (Reno-CUBIC at 100 ms, 1 BDP, a core cell, is
    # now 0.0303 off in J). docs/validation/vm.md, "Six kernel seeds for thirty cells".
    # 201 since 2026-12-02: the simulator unchanged, twelve more cells measured with
    # six kernel seeds; two agreeing cells turned inconclusive (TCP-LP beside Reno at
    # 100 ms and beside CUBIC at 200 ms, both 0.2 BDP). docs/validation/vm.md, "Twelve
    # more cells with six kernel seeds".
    "full": 201,
    "core": 35,  # of the table's 46 core cells (every pair at 100 ms, 1 BDP; 4 homogeneous)
}

#: Which slice this run checks: ``core`` unless the environment asks for ``full``.
GRID_SLICE = os.environ.get("FAIRLAB_GRID", "core")


def _sim_run(task) -> pd.DataFrame:
    trace = run_scenario(task.model(), seed=task.seed, run_index=task.run_index)
    return grid.run_results(trace, grid.cell_of(task.point), "sim", task.seed)


def _sim_rows(vm: pd.DataFrame) -> pd.DataFrame:
    """The simulator's side of the committed cells, planned as `fairlab validate` plans
    it (`SIM_SEEDS` seeds per cell, the kernel's first), on every core."""
    cells = [grid.Cell.from_id(c) for c in dict.fromkeys(vm["cell"])]
    tasks = [t for doc in grid.campaign_docs(cells, runs=grid.SIM_SEEDS)
             for t in expand(doc, source="test", backend="sim").tasks]
    with ProcessPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        parts = list(pool.map(_sim_run, tasks, chunksize=16))
    return pd.concat(parts, ignore_index=True)


def test_the_simulator_keeps_its_agreement_with_the_kernel():
    shipped = pd.read_csv(committed_vm_results())
    assert set(shipped["backend"]) == {"vm"} and shipped["kernel"].notna().all()
    # Each cell as `fairlab validate` reads it: the newest vm format with three seeds
    # (a cell re-run in a newer format keeps its older rows in the file).
    if GRID_SLICE not in MIN_AGREEING:
        pytest.fail(f"FAIRLAB_GRID={GRID_SLICE!r} is not a slice this check knows; allowed: {', '.join(MIN_AGREEING)}")
    vm = grid.newest_complete_format(shipped)
    if GRID_SLICE != "full":
        vm = vm[vm["cell"].isin({c.id for c in grid.cells(GRID_SLICE)})]
    table = grid.compare(_sim_rows(vm), vm)
    assert len(table) == vm["cell"].nunique()
    assert int(table["agree"].sum()) >= MIN_AGREEING[GRID_SLICE], grid.markdown(table)
    # The kernel's TCP senders resend what the bottleneck dropped and next to
    # nothing else (SACK tells them exactly what arrived; a Linux 6.1 receiver never
    # lets a block leave its cache unreported). Where the kernel's retransmissions
    # are within 2 % of its drops, the simulator's must be too: before 2026-11-29 (late)
    # its receiver forgot blocks and its senders resent 8 % more than they lost.
    clean = table[table["vm_retrans"].notna() & (table["vm_retrans"] <= 1.02 * table["vm_drops"] + 1)]
    spurious = clean[clean["sim_retrans"] > 1.02 * clean["sim_drops"] + 1]
    assert spurious.empty, spurious[["cell", "sim_retrans", "sim_drops", "vm_retrans", "vm_drops"]].to_string()


def _rows(cell: str, shares_by_seed: list[list[float]], j: list[float]) -> pd.DataFrame:
    rows = []
    for seed, (shares, jj) in enumerate(zip(shares_by_seed, j)):
        for flow, s in enumerate(shares):
            rows.append({"cell": cell, "backend": "x", "seed": seed, "flow": flow, "cca": "cubic", "mean_bps": s * 1e6,
                         "share": s, "jain_of_means": jj, "mean_jt": jj, "retransmits": 1.0, "drops": 1.0})
    return pd.DataFrame(rows)


def test_the_verdict_is_the_documented_tolerance():
    cell = "reno-cubic|100ms|1bdp|droptail"
    kernel = _rows(cell, [[40, 60], [30, 70]], [0.96, 0.84])  # means: 35/65, J 0.90
    near = _rows(cell, [[39, 61], [31, 69]], [0.95, 0.87])  # 35/65, J 0.91: agrees
    far = _rows(cell, [[29, 71], [31, 69]], [0.90, 0.86])  # 30/70: 5 points off -> still agrees at exactly 5
    farther = _rows(cell, [[28, 72], [31, 69]], [0.90, 0.86])  # 29.5/70.5: 5.5 points off
    assert bool(grid.compare(near, kernel)["agree"].iloc[0])
    assert bool(grid.compare(far, kernel)["agree"].iloc[0])
    verdict = grid.compare(farther, kernel).iloc[0]
    assert not verdict["agree"] and "share off by 5.5 points" in verdict["difference"]
    worse_j = _rows(cell, [[40, 60], [30, 70]], [0.93, 0.80])  # J 0.865: 0.035 off
    assert "J off by 0.035" in grid.compare(worse_j, kernel).iloc[0]["difference"]


def test_a_miss_is_a_difference_only_when_the_seeds_resolve_it():
    cell = "reno-cubic|100ms|1bdp|droptail"
    kernel = _rows(cell, [[35, 65], [35, 65], [36, 64]], [0.91, 0.91, 0.92])
    # 10 points off with the seeds in tight agreement on each side: by hand, gap
    # 10.0, standard error sqrt(0.33/3 + 0.33/3) = 0.47, Welch's t = 21, p < 0.01.
    steady = _rows(cell, [[25, 75], [26, 74], [25, 75]], [0.80, 0.81, 0.80])
    # The same mean gap (10.3), but runs spread from 5 to 45 points: standard
    # error sqrt(400/3 + 0.33/3) = 11.6, t = 0.9 (and J: t = 1.0).
    scattered = _rows(cell, [[5, 95], [45, 55], [25, 75]], [0.60, 0.99, 0.80])
    first = grid.compare(steady, kernel).iloc[0]
    second = grid.compare(scattered, kernel).iloc[0]
    assert (first["verdict"], second["verdict"]) == ("differs", "inconclusive")
    assert not first["agree"] and not second["agree"]
    assert "inconclusive" in grid.markdown(grid.compare(scattered, kernel))


def test_identical_flows_are_compared_by_rank():
    # Two identical flows: the kernel's winner was flow 0 in one run and flow 1 in
    # the other; by index both sides average to 50/50, by rank they are 70/30.
    cell = "cubic-cubic|100ms|1bdp|droptail"
    kernel = _rows(cell, [[70, 30], [30, 70]], [0.86, 0.86])
    fair = _rows(cell, [[50, 50], [50, 50]], [1.0, 1.0])
    table = grid.compare(fair, kernel)
    assert table.iloc[0]["vm_shares"] == "70/30" and not table.iloc[0]["agree"]


@pytest.mark.parametrize("cell", grid.cells("full")[:5] + grid.cells("homogeneous"))
def test_a_cell_id_names_its_cell(cell):
    assert grid.Cell.from_id(cell.id) == cell


def _format_rows(cell: str, vm_format: int, seeds: list[int], share0: float) -> pd.DataFrame:
    rows = _rows(cell, [[share0, 100 - share0]] * len(seeds), [0.9] * len(seeds))
    rows["seed"] = [s for s in seeds for _ in range(2)]
    rows["vm_format"] = vm_format
    return rows


def test_the_kernel_side_keeps_per_cell_the_newest_format_that_has_every_seed():
    a, b = "reno-cubic|100ms|1bdp|droptail", "bic-cubic|100ms|1bdp|droptail"
    seeds = list(range(grid.SEEDS))
    rows = pd.concat([
        _format_rows(a, 1, seeds, 30), _format_rows(a, 2, seeds, 40),   # a: format 2 complete -> 2
        _format_rows(b, 1, seeds, 50), _format_rows(b, 2, seeds[:1], 60),  # b: format 2 incomplete -> 1
        _format_rows(b, 1, seeds[:1], 50),  # a seed stored twice under one format counts once
    ], ignore_index=True)
    kept = grid.newest_complete_format(rows)
    by_cell = kept.groupby("cell").agg(fmt=("vm_format", "unique"), seeds=("seed", "nunique"), n=("share", "size"))
    assert list(by_cell.loc[a, "fmt"]) == [2] and list(by_cell.loc[b, "fmt"]) == [1]
    assert by_cell.loc[a, "seeds"] == by_cell.loc[b, "seeds"] == grid.SEEDS
    assert by_cell.loc[b, "n"] == 2 * grid.SEEDS
    assert set(kept[kept["cell"] == a]["share"]) == {40, 60}


def test_formats_that_measured_the_same_thing_are_pooled_and_others_are_not():
    """Format 3 changed only RED and CHOKe (their averaging weight): a DropTail
    cell's seeds 0-2 in format 2 and 3-5 in format 3 are six seeds of one
    measurement; a RED cell's format-3 seeds replace its format-2 ones."""
    tail, red = "htcp-cubic|100ms|1bdp|droptail", "reno-cubic|100ms|1bdp|red"
    first, more = list(range(grid.SEEDS)), list(range(grid.SEEDS, 2 * grid.SEEDS))
    rows = pd.concat([
        _format_rows(tail, 2, first, 65), _format_rows(tail, 3, more, 70),
        _format_rows(red, 2, first, 16), _format_rows(red, 3, first, 25),
    ], ignore_index=True)
    kept = grid.newest_complete_format(rows)
    assert kept[kept["cell"] == tail]["seed"].nunique() == 2 * grid.SEEDS
    assert sorted(set(kept[kept["cell"] == tail]["vm_format"])) == [2, 3]
    assert set(kept[kept["cell"] == red]["vm_format"]) == {3}
    assert set(kept[(kept["cell"] == red) & (kept["flow"] == 0)]["share"]) == {25}


def test_a_run_that_lost_nothing_before_the_bottleneck_pools_with_format_5():
    """Format 5 only sized the router's input backlog. A format-4 run whose senders
    retransmitted what the bottleneck dropped (every lost segment is resent) lost
    nothing there and pools with format-5 runs; one that retransmitted 5 % more
    may have, and is superseded by them."""
    assert grid.run_formats(4, "droptail", 1000, 1000) == (2, 5)
    assert grid.run_formats(4, "droptail", 1011, 1000) == (2, 5)  # 1 % + 1 segment of spurious repeats
    assert grid.run_formats(4, "droptail", 1050, 1000) == (2,)
    assert grid.run_formats(4, "droptail", float("nan"), 1000) == (2,)  # counts missing: cannot tell
    assert grid.run_formats(1, "droptail", 100, 100) == (1,)  # format 1 differs in its start, not only the backlog
    assert grid.run_formats(2, "red", 100, 100) == (2,)  # format 3 changed RED after it
    assert grid.run_formats(4, "red", 100, 100) == (3, 5)
    assert grid.run_formats(5, "droptail", 2000, 1000) == (5,)

    cell = "bic-cubic|100ms|1bdp|droptail"
    old = _format_rows(cell, 4, [0, 1, 2], 80)
    old.loc[old["seed"] == 2, "retransmits"] = 30.0  # seed 2 retransmitted 60 against 1 drop
    new = _format_rows(cell, 5, [2, 3], 70)
    kept = grid.newest_complete_format(pd.concat([old, new], ignore_index=True))
    by_seed = kept[kept["flow"] == 0].set_index("seed")
    assert sorted(by_seed.index) == [0, 1, 2, 3]  # clean format-4 seeds 0-1 join format 5's 2-3
    assert by_seed.loc[2, "vm_format"] == 5 and by_seed.loc[2, "share"] == 70  # seed 2's suspect run replaced


def test_effective_format_follows_what_each_format_changed():
    from fairlab.backends.vm.plan import VM_FORMAT_VERSION, effective_format

    assert effective_format(3, "droptail") == effective_format(2, "droptail") == 2
    assert effective_format(3, "codel") == 2
    assert effective_format(3, "red") == effective_format(3, "choke") == 3
    assert effective_format(2, "red") == 2 and effective_format(1, "red") == 1
    # Format 4 changed how the trace leaves the guest, not what a run measures.
    assert effective_format(4, "droptail") == 2 and effective_format(4, "red") == 3
    # Format 5 (the input backlog sized) may have changed any run: nothing pools with it.
    assert effective_format(5, "droptail") == effective_format(5, "red") == 5
    assert effective_format(VM_FORMAT_VERSION, "droptail") <= VM_FORMAT_VERSION


def test_kernel_runs_are_read_by_their_own_task_so_a_new_run_key_does_not_hide_them(tmp_path, monkeypatch):
    """A store of grid runs whose campaign file no longer matches (here: deleted, as
    after a change of run key) still yields every main run, cell and seed."""
    from fairlab.campaign.execute import run_campaign
    from fairlab.campaign.store import Store

    monkeypatch.setattr(grid, "DURATION_S", 4)
    monkeypatch.setattr(grid, "WINDOW", (1, 4))
    cells = [grid.Cell(("reno", "cubic"), 25, 1.0), grid.Cell(("cubic", "cubic"), 25, 0.2)]
    (doc,) = grid.campaign_docs(cells, runs=2)
    camp = expand(doc, source="test", backend="sim")
    run_campaign(camp, Store(tmp_path / "s"), workers=1)
    (tmp_path / "s" / "campaign.json").unlink()
    rows = grid.store_results(tmp_path / "s", "vm")
    assert sorted(rows.groupby("cell")["seed"].nunique().items()) == sorted((c.id, 2) for c in cells)
    assert len(rows) == 2 * 2 * 2


def test_recording_more_seeds_keeps_the_seeds_a_cell_had(tmp_path):
    """`--record` merges by run (cell, seed, vm format): a cell's seeds 3-5 added
    later sit beside its seeds 0-2; a run made again in the same format replaces its
    old row; another cell is untouched."""
    from fairlab.cli.validate_cmd import _record

    a, b = "htcp-cubic|100ms|1bdp|droptail", "reno-cubic|100ms|1bdp|droptail"
    record = tmp_path / "vm.csv"
    first = pd.concat([_format_rows(a, 2, [0, 1, 2], 65), _format_rows(b, 2, [0, 1, 2], 25)], ignore_index=True)
    _record(first, record)
    merged = _record(pd.concat([_format_rows(a, 3, [3, 4, 5], 70), _format_rows(a, 2, [2], 60)], ignore_index=True), record)
    on_disk = pd.read_csv(record)
    assert len(on_disk) == len(merged) == 2 * 9
    flow0 = on_disk[(on_disk["cell"] == a) & (on_disk["flow"] == 0)].set_index("seed")["share"]
    assert flow0.to_dict() == {0: 65, 1: 65, 2: 60, 3: 70, 4: 70, 5: 70}
    assert sorted(on_disk[on_disk["cell"] == b]["seed"].unique()) == [0, 1, 2]


def test_recorded_kernel_runs_are_not_run_again(tmp_path):
    """With `--record`, a kernel run the file already holds (same cell and seed, a vm
    format that measured the same thing) is left out of the campaign; a run of an
    older format is not the same measurement and runs again."""
    from fairlab.backends.vm.plan import VM_FORMAT_VERSION
    from fairlab.cli.validate_cmd import _without_recorded_runs

    tail, red = grid.Cell(("reno", "cubic"), 100, 1.0), grid.Cell(("reno", "cubic"), 100, 1.0, "red")
    (doc,) = grid.campaign_docs([tail, red], runs=4)
    camp = expand(doc, source="test", backend="vm")
    seeds = list(dict.fromkeys(t.seed for t in camp.tasks))  # run order
    recorded = pd.concat([_format_rows(tail.id, VM_FORMAT_VERSION, seeds[:3], 25),
                          _format_rows(red.id, 2, seeds[:3], 16),
                          _format_rows(red.id, VM_FORMAT_VERSION, seeds[:1], 25)], ignore_index=True)
    left = _without_recorded_runs(camp, recorded)
    todo = sorted((grid.cell_of(t.point).id, seeds.index(t.seed)) for t in left.tasks)
    assert todo == sorted([(tail.id, 3), (red.id, 1), (red.id, 2), (red.id, 3)])
    # A format-4 DropTail run predates the sized input backlog (format 5): one whose
    # senders retransmitted more than the bottleneck dropped runs again, one that
    # retransmitted what it dropped measured what format 5 measures and does not.
    old_tail = _format_rows(tail.id, 4, seeds[:3], 25)
    old_tail["retransmits"] = 30.0  # 60 per run against 1 drop
    assert len(_without_recorded_runs(camp, old_tail).tasks) == len(camp.tasks)
    old_tail.loc[old_tail["seed"] == seeds[0], "retransmits"] = 0.5  # 1 per run: nothing lost off the path
    assert len(_without_recorded_runs(camp, old_tail).tasks) == len(camp.tasks) - 1
    assert _without_recorded_runs(camp, recorded.iloc[0:0]).tasks == camp.tasks
    # Runs of another kernel release are not this kernel's: all of them run.
    recorded["kernel"] = "6.1.0-56-amd64"
    assert len(_without_recorded_runs(camp, recorded, "6.1.0-56-amd64").tasks) == 4
    assert _without_recorded_runs(camp, recorded, "6.12.9-custom").tasks == camp.tasks


def test_every_vm_format_says_what_it_changed():
    """A new VM_FORMAT_VERSION without an entry in FORMAT_CHANGED_QDISCS would be
    pooled with older runs it does not measure like; and a run of a format this
    build does not know is refused rather than guessed."""
    from fairlab.backends.vm.plan import FORMAT_CHANGED_QDISCS, VM_FORMAT_VERSION, effective_format

    assert sorted(FORMAT_CHANGED_QDISCS) == list(range(1, VM_FORMAT_VERSION + 1))
    with pytest.raises(ValueError, match="not one this fairlab knows"):
        effective_format(VM_FORMAT_VERSION + 1, "droptail")


def test_an_empty_kernel_side_stays_empty():
    assert grid.newest_complete_format(pd.DataFrame(columns=grid.RESULT_COLUMNS)).empty


@pytest.mark.parametrize("text, says", [
    ("", "not a table of kernel results"),
    ("cell,backend,seed\nreno-cubic|100ms|1bdp|droptail,vm,42\n", "missing"),
    ("cell,seed,flow,share,jain_of_means\nreno-cubic|100ms|1bdp|droptail,,0,20,0.8\n", "line 2: an empty seed"),
    ("cell,seed,flow,share,jain_of_means\nnot-a-cell,42,0,20,0.8\n", "is not a grid cell id"),
    ("cell,seed,flow,share,jain_of_means,retransmits\nreno-cubic|100ms|1bdp|droptail,42,0,20,0.8,lots\n",
     "line 2: retransmits is 'lots', not a number"),
    ("cell,seed,flow,share,jain_of_means,vm_format\nreno-cubic|100ms|1bdp|droptail,42,0,20,0.8,five\n",
     "line 2: vm_format is 'five', not a number"),
])
def test_a_broken_kernel_results_file_is_refused_with_what_is_wrong(tmp_path, text, says):
    from fairlab.cli.common import UsageError
    from fairlab.cli.validate_cmd import read_kernel_results

    p = tmp_path / "vm.csv"
    p.write_text(text)
    with pytest.raises(UsageError, match=says):
        read_kernel_results(p)


def test_every_shipped_cell_has_all_its_kernel_seeds():
    """`newest_complete_format` falls back to an incomplete format when a cell has no
    complete one (a partial `fairlab validate` still shows what it has), so a cell
    shipped with one or two kernel runs (say, recorded by a run stopped midway)
    would be judged on them. The shipped file holds whole cells only."""
    kept = grid.newest_complete_format(pd.read_csv(committed_vm_results()))
    seeds = kept.groupby("cell")["seed"].nunique()
    assert (seeds >= grid.SEEDS).all(), seeds[seeds < grid.SEEDS].to_dict()


def test_the_kernel_side_covers_every_cell_the_kernel_can_run():
    """The shipped kernel data is the whole grid but for the cells the kernel cannot
    measure, each of which says why (and is a cell of the grid)."""
    full = {c.id for c in grid.cells("full")}
    shipped = set(pd.read_csv(committed_vm_results())["cell"])
    assert set(grid.KERNEL_CANNOT_RUN) <= full
    assert all(len(why) > 40 for why in grid.KERNEL_CANNOT_RUN.values())
    assert sorted(full - shipped - set(grid.KERNEL_CANNOT_RUN)) == []
    assert not shipped & set(grid.KERNEL_CANNOT_RUN)


def test_a_cell_the_kernel_cannot_run_is_refused_with_the_reason_before_any_guest_boots(tmp_path):
    from cli_helpers import fairlab

    (cell, why), = grid.KERNEL_CANNOT_RUN.items()
    for backend in ("vm", "sim", "both"):
        r = fairlab("validate", "--backend", backend, "--cell", cell, "--out", tmp_path / "o")
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        said = " ".join(r.stderr.split())
        # The reason, not the advice to run it on the kernel (which cannot).
        assert f"the kernel cannot measure cell {cell}" in said and "RED under htb" in said, said
        assert "--backend vm" not in said and not (tmp_path / "o").exists()


def test_shipped_seeds_are_read_exactly():
    """Seeds above 2^53 survive reading (a float column would round them, and then
    recorded runs would not be recognised and would run again)."""
    from fairlab.cli.validate_cmd import read_kernel_results

    vm = read_kernel_results(committed_vm_results())
    assert 6349198060258255764 in set(vm["seed"]) and vm["seed"].dtype == "int64"


def test_the_cli_refuses_a_broken_kernel_file_and_an_unknown_cell_in_one_sentence(tmp_path):
    from cli_helpers import fairlab

    bad = tmp_path / "vm.csv"
    bad.write_text("cell,seed,flow,share,jain_of_means,vm_format\nreno-cubic|100ms|1bdp|droptail,42,0,20,0.8,99\n")
    r = fairlab("validate", "--vm-data", bad, "--cell", "reno-cubic|100ms|1bdp|droptail", "--out", tmp_path / "o")
    assert r.returncode == 2 and "vm_format 99 is not one this fairlab knows" in r.stderr and "Traceback" not in r.stderr
    r = fairlab("validate", "--cell", "reno-cubic|300ms|1bdp|droptail", "--out", tmp_path / "o")
    assert r.returncode == 2 and "is not a cell of the grid" in r.stderr and "Traceback" not in r.stderr


def test_every_slice_names_a_cell_the_same_way():
    """A pair has one flow order in every slice (CUBIC first against BBR, as its
    shipped cells are), so a cell the `core` slice ran is the `full` grid's cell
    and `--cell` accepts every id the shipped data uses."""
    full = set(grid.cells("full"))
    assert set(grid.cells("core")) <= full and set(grid.cells("homogeneous")) <= full
    shipped = pd.read_csv(committed_vm_results())["cell"].unique()
    assert all(grid.Cell.from_id(c) in full for c in shipped)
    # 15 controls (CCID2 the 15th) against themselves, CUBIC and Reno: 15 + 14 + 13 pairs.
    assert len(grid.pairs()) == 42 and len({frozenset(p) for p in grid.pairs()}) == 42


def test_the_spread_verdict_reads_the_kernels_few_seeds_honestly():
    cell = "reno-cubic|100ms|1bdp|droptail"
    kernel = _rows(cell, [[40, 60]] * 3, [0.80, 0.90, 1.00])  # sd of J 0.100

    def spread(sim_j: list[float], vm=kernel) -> str:
        return grid.compare(_rows(cell, [[40, 60]] * len(sim_j), sim_j), vm).iloc[0]["spread"]

    # Ten seeds alternating 0.85/0.95: sd 0.0527, ratio 0.53, inside [1/2, 2].
    assert spread([0.85, 0.95] * 5) == "within"
    # Every seed the same (Vegas-Vegas' simulator): sd floored at 0.005, ratio 0.05;
    # by hand the 95 % upper bound is 0.05 / sqrt(F_0.025(9, 2) = 0.175) = 0.12 < 1/2.
    assert spread([0.90] * 10) == "narrower"
    # 0.875/0.925: sd 0.0264, ratio 0.26 is outside the factor, but its upper bound
    # 0.26 / sqrt(0.175) = 0.63 is not: three kernel seeds cannot tell.
    assert spread([0.875, 0.925] * 5) == "unresolved"
    # Both below the floor: equal, whatever their ratio (0.0 against 0.001).
    steady = _rows(cell, [[40, 60]] * 3, [0.999, 1.0, 0.998])
    assert spread([1.0] * 10, steady) == "within"
    # Six kernel seeds at sd <= 0.005, the simulator's 0.158: lower bound
    # 31.6 / sqrt(F_0.975(9, 5) = 6.68) = 12.2 > 2.
    tight = _rows(cell, [[40, 60]] * 6, [0.90, 0.90, 0.91, 0.90, 0.89, 0.90])
    assert spread([0.7, 1.0] * 5, tight) == "wider"
    assert "outside it: reno-cubic · 100ms · 1bdp · droptail (wider)" in grid.markdown(
        grid.compare(_rows(cell, [[40, 60]] * 10, [0.7, 1.0] * 5), tight))


def _validate_in_process(tmp_path, out: str, overrides: list[str] | None, vm_data):
    from fairlab.cli.validate_cmd import validate

    validate(subset="core", backend="sim", out=tmp_path / out, workers=1, vm_data=vm_data, record=None,
             cell_ids=["reno-cubic|25ms|0.2bdp|droptail"], seeds=3, overrides=overrides)
    return pd.read_csv(tmp_path / out / "grid.csv"), (tmp_path / out / "grid.md").read_text()


def test_a_what_if_changes_the_simulator_and_is_judged_against_the_same_kernel_runs(tmp_path, monkeypatch):
    """`validate --set variation.host_jitter=0s`: the simulator's runs are made
    with the field changed, in a store of their own, said to be a what-if, and
    compared with the same kernel runs as the default simulator."""
    from fairlab.campaign.store import Store

    monkeypatch.setattr(grid, "SIM_SEEDS", 3)
    monkeypatch.setattr(grid, "DURATION_S", 4)
    monkeypatch.setattr(grid, "WINDOW", (1, 4))
    vm = tmp_path / "vm.csv"  # three kernel runs of the cell, shares 44/56 and 40/60
    vm.write_text("cell,seed,flow,share,jain_of_means\n" + "".join(
        f"reno-cubic|25ms|0.2bdp|droptail,{seed},{flow},{share},{j}\n"
        for seed, a, j in ((1, 44, 0.981), (2, 40, 0.962), (3, 44, 0.981)) for flow, share in ((0, a), (1, 100 - a))))
    default, default_md = _validate_in_process(tmp_path, "default", None, vm)
    what_if, what_if_md = _validate_in_process(tmp_path, "what-if", ["variation.host_jitter=0s"], vm)

    (store,) = (tmp_path / "what-if" / "sim").iterdir()
    assert "-set-" in store.name
    runs = Store(store)
    jitters = {runs.load(k).meta["resolved_scenario"]["host_jitter_ns"] for k in runs.done_keys()}
    assert jitters == {0}  # the default is one packet time, 121 µs at 100 Mbit/s
    # The same kernel side; a simulator without host jitter splits the runs otherwise.
    assert what_if["vm_shares"].tolist() == default["vm_shares"].tolist() == ["43/57"]
    assert (what_if["sim_shares"].tolist(), what_if["sim_j"].tolist()) != (default["sim_shares"].tolist(), default["sim_j"].tolist())
    assert what_if_md.startswith("simulator what-if: --set variation.host_jitter=0s") and "what-if" not in default_md


@pytest.mark.parametrize("args, says", [
    (["--set", "bottleneck.rate=50Mbit"], "bottleneck.rate is part of the experiment the kernel ran"),
    (["--set", "flows[*].cca=bbr"], "flows[*].cca is part of the experiment the kernel ran"),
    (["--set", "variation.nonsense=1"], "variation has no field 'nonsense'; allowed: start_jitter, host_jitter"),
    (["--set", "=3"], "must be PATH=VALUE, e.g. variation.host_jitter=30us"),
    (["--set", "variation.host_jitter=30us", "--backend", "vm"], "use it with --backend sim"),
])
def test_a_what_if_may_change_the_model_but_not_the_experiment(tmp_path, args, says):
    from cli_helpers import fairlab

    r = fairlab("validate", "--cell", "reno-cubic|25ms|0.2bdp|droptail", *args, "--out", tmp_path / "o")
    assert r.returncode == 2 and says in " ".join(r.stderr.split()) and "Traceback" not in r.stderr, r.stderr
    assert not (tmp_path / "o").exists()
