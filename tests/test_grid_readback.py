"""`fairlab validate` reads the simulator's side back from the campaign's catalog.

`grid.store_results` used to load and analyse every main run again after the
campaign (~25 ms a run, minutes for the full grid); it now takes the same numbers
from the catalog the campaign built. These tests run a small real grid campaign
(three cells, three seeds, 4 s runs) and hold the catalog's rows against every
trace analysed again (`grid._sim_results_from_traces`, the old computation).
"""

from __future__ import annotations

import shutil

import pandas as pd
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from fairlab.campaign import catalog
from fairlab.campaign.execute import run_campaign
from fairlab.campaign.plan import expand
from fairlab.campaign.store import Store
from fairlab.validation import grid

CELLS = [grid.Cell(("reno", "cubic"), 25, 1.0), grid.Cell(("cubic", "cubic"), 25, 0.2),
         grid.Cell(("reno", "reno"), 25, 1.0, "red")]
SEEDS = 3


@pytest.fixture(scope="module")
def short_grid():
    """The grid shortened to 4 s runs analysed over 1-4 s, for this module's tests."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(grid, "DURATION_S", 4)
        mp.setattr(grid, "WINDOW", (1, 4))
        yield


@pytest.fixture(scope="module")
def store_root(short_grid, tmp_path_factory):
    (doc,) = grid.campaign_docs(CELLS, runs=SEEDS)
    root = tmp_path_factory.mktemp("grid") / "s"
    run_campaign(expand(doc, source="test", backend="sim"), Store(root), workers=1)
    return root


def _count_loads(monkeypatch) -> list[str]:
    """The keys of the runs whose traces are loaded from now on."""
    loaded: list[str] = []
    real = Store.load

    def load(self, key):
        loaded.append(key)
        return real(self, key)

    monkeypatch.setattr(Store, "load", load)
    return loaded


def _assert_same_rows(got: pd.DataFrame, want: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(got, want, check_exact=False, rtol=1e-12, atol=0)


def test_the_catalog_gives_the_rows_every_trace_gives(store_root, monkeypatch):
    want = grid._sim_results_from_traces(Store(store_root), "sim")
    assert len(want) == len(CELLS) * SEEDS * 2
    loaded = _count_loads(monkeypatch)
    got = grid.store_results(store_root, "sim")
    assert loaded == []  # every row came from the catalog
    _assert_same_rows(got, want)
    # The comparison can tell the definitions apart: the catalog's own per-flow
    # retransmits count the window's samples only, and differ from the whole run's.
    windowed = catalog.query(Store(store_root), "SELECT run_key, flow, retransmits FROM summaries")
    assert windowed["retransmits"].sum() < want["retransmits"].sum()
    assert (want["drops"] > 0).any() and want["retransmits"].notna().all()


@pytest.mark.parametrize("damage", ["one run left out", "no derived tables"])
def test_runs_the_catalog_does_not_hold_are_read_from_their_traces(store_root, tmp_path, monkeypatch, damage):
    """As when another process holds the store and the catalog cannot be brought
    up to date: a run it lacks, or every run when it has no table of runs yet."""
    root = tmp_path / "s"
    shutil.copytree(store_root, root)
    runs = pq.read_table(root / "catalog" / "runs.parquet")
    if damage == "one run left out":
        left_out = [runs.column("run_key")[4].as_py()]
        pq.write_table(runs.filter(pc.not_equal(runs.column("run_key"), left_out[0])), root / "catalog" / "runs.parquet")
    else:
        left_out = [t.key for t in grid._main_tasks(Store(root))]
        shutil.rmtree(root / "catalog")
    monkeypatch.setattr(catalog, "refresh", lambda store: None)
    want = grid._sim_results_from_traces(Store(root), "sim")
    loaded = _count_loads(monkeypatch)
    got = grid.store_results(root, "sim")
    assert loaded == left_out
    _assert_same_rows(got, want)


def test_a_window_other_than_the_scenarios_is_analysed_from_the_traces(store_root, monkeypatch):
    """The catalog's means are over the scenario's window; asked for another, the
    rows are the traces' over that window, not the catalog's numbers."""
    before = grid.store_results(store_root, "sim")
    monkeypatch.setattr(grid, "WINDOW", (2, 4))
    want = grid._sim_results_from_traces(Store(store_root), "sim")
    loaded = _count_loads(monkeypatch)
    got = grid.store_results(store_root, "sim")
    assert len(loaded) == len(CELLS) * SEEDS
    _assert_same_rows(got, want)
    assert not (got["mean_bps"] == before["mean_bps"]).all()
