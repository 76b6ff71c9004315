"""The store any tool can read: ordinary Parquet tables, numeric sweep columns,
utilisation, NRU and harm in catalog tables, DuckDB views instead of copies, and the
DuckDB and pandas examples of docs/campaigns.md run as written.

Expected values come from outside the catalog code: hand arithmetic on the scenario
(BDP), the analysis' per-flow means (utilisation), the solo runs' means (harm, Ware
et al. 2019: (solo - x) / solo, clipped at 0), and pyarrow's own row counts."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fairlab.campaign.execute import run_campaign
from fairlab.campaign.plan import expand
from fairlab.campaign.store import Store, encode_run
from fairlab.trace import Trace

CAMPAIGN = {
    "name": "readable",
    "duration": "12s",
    "interval": "1s",
    "window": ["4s", "12s"],
    "seed": 7,
    "runs": 2,
    "bottleneck": {"rate": "10Mbit", "buffer": "100%bdp"},
    "analysis": {"nru": True, "harm": True},
    "flows": [{"cca": "reno", "rtt": "20ms"}, {"cca": "cubic", "rtt": "20ms", "start": "2s"}],
    "sweep": {"flows[*].rtt": ["10ms", "30ms"], "flows[1].cca": ["cubic", "bbr"]},
}
RATE = 10e6
DOCS = Path(__file__).resolve().parent.parent / "docs" / "campaigns.md"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    """A directory holding out/c, the path the documentation's examples use."""
    d = tmp_path_factory.mktemp("work")
    rep = run_campaign(expand(CAMPAIGN), Store(d / "out" / "c"), workers=2)
    assert rep.failed == 0
    return d


@pytest.fixture(scope="module")
def tables(workdir) -> dict[str, pd.DataFrame]:
    cat = workdir / "out" / "c" / "catalog"
    return {n: pd.read_parquet(cat / f"{n}.parquet") for n in ("runs", "summaries", "conditions")}


def test_sweep_and_setup_columns_are_numbers_in_their_units(tables):
    runs = tables["runs"]
    assert runs["rtt_ms"].dtype == np.float64 and set(runs["rtt_ms"]) == {10.0, 30.0}
    assert set(runs["flow1_cca"]) == {"cubic", "bbr"}
    assert (runs["rate_bps"] == RATE).all()
    # 100% BDP: rate × RTT / 8 bytes (10 Mbit/s × 10 ms = 12,500 B; × 30 ms = 37,500 B)
    for rtt, nbytes in ((10.0, 12_500), (30.0, 37_500)):
        sel = runs[runs["rtt_ms"] == rtt]
        assert (sel["buffer_bytes"] == nbytes).all() and (sel["buffer_bdp"] == 1.0).all()
    main = runs[runs["kind"] == "main"]
    assert len(main) == 8 and set(main["run_index"]) == {0, 1}


def test_utilisation_is_the_flows_summed_means_over_the_rate(tables):
    """Both flows send through the whole window (cubic starts at 2 s, the window at
    4 s), so the bits delivered over window × rate equal Σ flow means / rate."""
    runs, summ = tables["runs"], tables["summaries"]
    main = runs[runs["kind"] == "main"].set_index("run_key")
    sums = summ.groupby("run_key")["mean_bps"].sum()
    for key, row in main.iterrows():
        assert row["utilisation"] == pytest.approx(sums[key] / RATE, rel=1e-9)
        # payload only: at most MSS/(MSS+52) of the line rate, and a busy link
        assert 0.8 < row["utilisation"] <= 1448 / 1500


def test_harm_per_flow_is_measured_against_the_solo_runs(tables):
    runs, summ = tables["runs"], tables["summaries"]
    solo = runs[runs["kind"] == "solo"]
    main = runs[runs["kind"] == "main"]
    checked = 0
    for _, m in main.iterrows():
        for _, f in summ[summ["run_key"] == m["run_key"]].iterrows():
            # the flow alone on the same path: one-flow runs of its control at its RTT
            # (a solo run shared by two conditions is planned once)
            mine = solo[(solo["rtt_ms"] == m["rtt_ms"]) & (solo["ccas"] == f["cca"])]
            assert len(mine) == 2
            alone = summ[summ["run_key"].isin(mine["run_key"])]["mean_bps"].mean()
            assert f["harm"] == pytest.approx(max(0.0, (alone - f["mean_bps"]) / alone), rel=1e-9)
            checked += 1
    assert checked == 16
    assert main["harm_mean"].notna().all() and solo["harm_mean"].isna().all()


def test_nru_is_per_main_run_and_conditions_average_it(tables):
    runs, cond = tables["runs"], tables["conditions"]
    main = runs[runs["kind"] == "main"]
    assert (main["nru_u_plus"].notna() | main["nru_u_minus"].notna()).all()
    assert runs[runs["kind"] != "main"][["nru_u_plus", "nru_u_minus", "nru_case"]].isna().all().all()
    assert len(cond) == 4 and set(cond["runs"]) == {2}
    for _, c in cond.iterrows():
        mine = main[main["condition"] == c["condition"]]
        assert c["nru_u_minus_mean"] == pytest.approx(mine["nru_u_minus"].dropna().mean())
        assert c["jain_of_means_mean"] == pytest.approx(mine["jain_of_means"].mean())
        assert c["utilisation_mean"] == pytest.approx(mine["utilisation"].mean())


def test_run_data_are_views_over_the_parquet_files_not_copies(workdir):
    root = workdir / "out" / "c"
    files = sorted(root.glob("runs/*/samples.parquet"))
    assert len(files) == len(list(root.glob("runs/*")))
    rows = sum(pq.ParquetFile(p).metadata.num_rows for p in files)
    con = duckdb.connect(str(root / "catalog.duckdb"), read_only=True)
    try:
        kinds = dict(con.execute("SELECT table_name, table_type FROM information_schema.tables").fetchall())
        assert kinds["samples"] == kinds["flows"] == kinds["bottleneck"] == "VIEW"
        assert con.execute("SELECT count(*) FROM samples").fetchone()[0] == rows
    finally:
        con.close()
    # Each run file is a plain table any Parquet reader opens, keyed by run_key.
    one = pd.read_parquet(files[0])
    assert list(one.columns[:4]) == ["run_key", "run", "flow", "t"] and (one["run_key"] == files[0].parent.name).all()
    # The flow table names each flow as the scenario does: a main run's flows are
    # reno and the swept second control; calibration runs hold two of one control
    # (labels "<cca>-1", "<cca>-2"); solo runs one flow. (files[0] is whichever run
    # key sorts first, so any of the three.)
    flows = pd.read_parquet(files[0].parent / "flows.parquet")
    labels, ccas = list(flows["label"]), list(flows["cca"])
    assert labels in (["reno", "cubic"], ["reno", "bbr"], [ccas[0]], [f"{ccas[0]}-1", f"{ccas[0]}-2"]), labels


def _doc_examples() -> list[str]:
    text = DOCS.read_text()
    section = text[text.index("## Reading the store"):]
    section = section[: section.index("\n## ", 3)]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def test_the_documented_duckdb_and_pandas_examples_run(workdir, monkeypatch):
    examples = _doc_examples()
    assert len(examples) == 2 and "duckdb" in examples[0] and "pandas" in examples[1]
    monkeypatch.chdir(workdir)
    ns_duck: dict = {}
    exec(compile(examples[0], "docs/campaigns.md (DuckDB)", "exec"), ns_duck)
    by_rtt = ns_duck["by_rtt"]
    assert len(by_rtt) == 4 and set(by_rtt["rtt_ms"]) == {10.0, 30.0}
    assert ((by_rtt["utilisation"] > 0.8) & (by_rtt["utilisation"] < 1)).all()
    assert set(ns_duck["per_second"]["cca"]) == {"reno", "cubic", "bbr"}
    ns_pd: dict = {}
    exec(compile(examples[1], "docs/campaigns.md (pandas)", "exec"), ns_pd)
    table = ns_pd["table"]
    assert len(table) == 4
    # the two routes agree
    duck = by_rtt.set_index(["rtt_ms", "flow1_cca"])["jain"].sort_index()
    assert np.allclose(table["jain_mean_jt"].sort_index().to_numpy(), duck.to_numpy())
    assert len(ns_pd["per_flow"]) == 4  # 2 RTTs × 2 flows


@settings(max_examples=25, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 2), st.integers(0, 3), st.floats(0.001, 1e4), st.floats(0, 1e11)), min_size=1, max_size=30),
    st.booleans(),
)
def test_a_trace_survives_the_store_unchanged(tmp_path_factory, rows, with_bottleneck):
    flows = pd.DataFrame({"flow": [0, 1, 2, 3], "label": ["a", "b", "c", "d"], "cca": ["cubic", None, "reno", "bbr"],
                          "rtt_s": [0.1, np.nan, 0.025, 0.2], "start_s": [0.0, 30.0, 0.0, 1.5], "source": ["x.json"] * 4,
                          "ecn": [True, False, True, False]})
    samples = pd.DataFrame(rows, columns=["run", "flow", "t", "throughput_bps"])
    samples["retransmits"] = pd.array([i if i % 3 else None for i in range(len(rows))], dtype="Int64")
    bott = pd.DataFrame({"run": [0, 0], "t": [1.0, 2.0], "queue_bytes": [1500.0, 0.0], "queue_pkts": [1.0, 0.0],
                         "drops": [3, 0], "marks": [0, 1], "drops_early": [1, 0]}) if with_bottleneck else None
    tr = Trace.from_frames(samples, flows, bott, meta={"task": {"key": "k1"}, "interval_s": 1.0, "nested": {"a": [1, 2]}})
    store = Store(tmp_path_factory.mktemp("st"))
    store.write("k1", encode_run("k1", tr))
    back = store.load("k1")
    pd.testing.assert_frame_equal(back.samples, tr.samples)
    pd.testing.assert_frame_equal(back.flows, tr.flows)
    if with_bottleneck:
        pd.testing.assert_frame_equal(back.bottleneck, tr.bottleneck)
    else:
        assert back.bottleneck is None
    assert back.meta == tr.meta
    assert encode_run("k1", back) == encode_run("k1", tr)  # deterministic bytes


# ---------------------------------------------------------------- what the catalog re-reads (issue 15 item 5)
def _count_work(monkeypatch) -> dict[str, object]:
    """Count, during the block that follows, each verified read of a run's files, each
    whole-Trace parse and each `analyze` call the catalog makes."""
    import fairlab.campaign.aggregate as aggregate_mod
    from fairlab.campaign.stored_run import StoredRun

    counts: dict[str, object] = {"reads": {}, "traces": {}, "analyses": 0}
    read, trace, analyze = Store._read_verified, StoredRun.trace, aggregate_mod.analyze

    def counting_read(self, key):
        counts["reads"][key] = counts["reads"].get(key, 0) + 1
        return read(self, key)

    def counting_trace(self):
        counts["traces"][self.key] = counts["traces"].get(self.key, 0) + 1
        return trace(self)

    def counting_analyze(*args, **kwargs):
        counts["analyses"] += 1
        return analyze(*args, **kwargs)

    monkeypatch.setattr(Store, "_read_verified", counting_read)
    monkeypatch.setattr(StoredRun, "trace", counting_trace)
    monkeypatch.setattr(aggregate_mod, "analyze", counting_analyze)
    return counts


def test_the_catalog_reads_each_run_once_and_reanalyses_only_for_nru_and_harm(workdir, monkeypatch):
    # Before: the catalog parsed every run's whole trace (calibration and solo runs
    # too, for numbers their run.json holds) and analysed every main run again.
    store = Store(workdir / "out" / "c")
    keys = store.done_keys()
    main = {k for k in keys if store.run_meta(k)["task"]["kind"] == "main"}
    counts = _count_work(monkeypatch)
    store.build_catalog()
    assert counts["reads"] == {k: 1 for k in keys}
    # NRU weights and harm baselines exist only once the calibration and solo runs
    # are in, so main runs are analysed once more, each once; the others never.
    assert counts["traces"] == {k: 1 for k in main} and counts["analyses"] == len(main) == 8


def test_without_nru_or_harm_the_catalog_takes_the_workers_analyses(tmp_path, monkeypatch):
    # Before: every run was parsed and analysed again, though its worker had stored
    # that very analysis in run.json.
    doc = {k: v for k, v in CAMPAIGN.items() if k != "analysis"}
    store = Store(tmp_path / "c")
    assert run_campaign(expand(doc), store, workers=1).failed == 0
    before = {n: (store.catalog_dir / f"{n}.parquet").read_bytes() for n in ("runs", "summaries", "conditions")}
    counts = _count_work(monkeypatch)
    store.build_catalog()
    assert counts["reads"] == {k: 1 for k in store.done_keys()} and len(counts["reads"]) == 8
    assert counts["traces"] == {} and counts["analyses"] == 0
    assert {n: (store.catalog_dir / f"{n}.parquet").read_bytes() for n in before} == before  # deterministic


def test_the_stored_summaries_give_what_analysing_the_traces_again_gives(tmp_path, monkeypatch):
    """Every number `aggregate` and the catalog report, from the workers' summaries
    and from a fresh analysis of every trace, bit for bit."""
    import dataclasses

    import fairlab.campaign.aggregate as aggregate_mod
    from fairlab.campaign.aggregate import aggregate

    # with the scenario's window, and without one (the analysis then takes the trace's extent)
    whole = {**{k: v for k, v in CAMPAIGN.items() if k not in ("analysis", "window")}, "sweep": {"flows[1].cca": ["cubic", "bbr"]}}
    out = {}
    for name, camp_doc in (("window", {**whole, "window": ["4s", "12s"]}), ("whole", whole)):
        store = Store(tmp_path / name)
        assert run_campaign(expand(camp_doc), store, workers=1).failed == 0
        reused = aggregate(store)
        catalog = {n: (store.catalog_dir / f"{n}.parquet").read_bytes() for n in ("runs", "summaries", "conditions")}
        with monkeypatch.context() as m:
            m.setattr(aggregate_mod, "from_summary", lambda *_: None)  # analyse every trace
            fresh = aggregate(store)
            store.build_catalog()
        assert [dataclasses.asdict(r) for r in reused] == [dataclasses.asdict(r) for r in fresh]
        assert {n: (store.catalog_dir / f"{n}.parquet").read_bytes() for n in catalog} == catalog
        out[name] = reused
    assert all(r.jain_mean_jt.n == 2 for rs in out.values() for r in rs)


def test_utilisation_from_two_columns_is_the_traces_to_the_last_bit(workdir, tmp_path):
    from fairlab.campaign.catalog import run_utilisation, utilisation

    store = Store(workdir / "out" / "c")
    for key in sorted(store.done_keys()):
        for window in ((4.0, 12.0), (0.0, 12.0), (5.5, 7.0)):
            assert run_utilisation(store.open_run(key), RATE, window) == utilisation(store.load(key), RATE, window)
    # without meta['interval_s'] the run is read as a Trace, which infers the interval
    key = sorted(store.done_keys())[0]
    tr = store.load(key)
    bare = Trace(samples=tr.samples, flows=tr.flows, bottleneck=tr.bottleneck, meta={k: v for k, v in tr.meta.items() if k != "interval_s"})
    other = Store(tmp_path / "s")
    other.write(key, encode_run(key, bare))
    assert run_utilisation(other.open_run(key), RATE, (4.0, 12.0)) == utilisation(tr, RATE, (4.0, 12.0)) > 0.8
