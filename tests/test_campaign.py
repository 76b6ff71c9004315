"""Campaigns: sweep expansion, derived seeds, content addressing, the store, resume
after SIGKILL, executor equivalence, catalog queries and the report."""

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest

from cli_helpers import FAIRLAB_CLI, fairlab
from fairlab.campaign.execute import run_campaign
from fairlab.campaign.plan import CALIBRATION, MAIN, SOLO, condition_label, derive_seed, expand, set_path
from fairlab.campaign.store import Store, StoreError
from fairlab.scenario import ScenarioError

TINY = {
    "name": "tiny",
    "duration": "12s",
    "interval": "1s",
    "window": ["4s", "12s"],
    "seed": 7,
    "runs": 2,
    "bottleneck": {"rate": "10Mbit", "buffer": "100%bdp"},
    "flows": [{"cca": "reno", "rtt": "20ms"}, {"cca": "cubic", "rtt": "20ms", "start": "2s"}],
}


def doc(**extra):
    d = {k: (v.copy() if isinstance(v, dict) else v) for k, v in TINY.items()}
    d.update(extra)
    return d


def test_product_sweep_times_runs():
    c = expand(doc(sweep={"flows[*].rtt": ["10ms", "20ms", "40ms"], "bottleneck.buffer": ["50%bdp", "100%bdp"]}))
    assert len(c.conditions) == 6
    assert c.count(MAIN) == 12
    # every flow got the swept RTT
    for t in c.tasks:
        rtts = {f["rtt"] for f in t.scenario["flows"]}
        assert len(rtts) == 1


def test_zip_sweep_pairs_lists_and_refuses_unequal_lengths():
    c = expand(doc(sweep={"flows[0].rtt": ["10ms", "20ms"], "flows[1].rtt": ["30ms", "40ms"], "mode": "zip"}))
    assert [(t.scenario["flows"][0]["rtt"], t.scenario["flows"][1]["rtt"]) for t in c.tasks if t.run_index == 0] == [("10ms", "30ms"), ("20ms", "40ms")]
    with pytest.raises(ScenarioError, match="lists of one length"):
        expand(doc(sweep={"flows[0].rtt": ["10ms"], "flows[1].rtt": ["30ms", "40ms"], "mode": "zip"}))


def test_grouped_axis_assigns_several_paths_together():
    c = expand(doc(runs=1, sweep={"pair": [{"flows[0].cca": "reno", "flows[1].cca": "bic"}, {"flows[0].cca": "bic", "flows[1].cca": "reno"}]}))
    assert [[f["cca"] for f in t.scenario["flows"]] for t in c.tasks] == [["reno", "bic"], ["bic", "reno"]]
    assert c.tasks[0].label == "flows[0].cca=reno, flows[1].cca=bic"


def test_a_task_names_its_condition_as_the_report_does():
    # `fairlab plan` and failed-run lines show the task's label; the report shows
    # condition_label of the point. One text for both.
    c = expand(doc(runs=1, sweep={"flows[*].rtt": ["50ms"], "bottleneck.buffer": ["20%bdp"], "bottleneck.qdisc": ["red"],
                                  "flows[1].cca": ["bic"]}))
    assert [t.label for t in c.tasks] == ["RTT 50ms; buffer 20%bdp; qdisc red; flows[1].cca=bic"]
    assert all(t.label == condition_label(t.point) for t in c.tasks)
    assert expand(doc(runs=1)).tasks[0].label == condition_label({}) == "base scenario"


def test_bad_sweep_paths_name_the_problem():
    with pytest.raises(ScenarioError, match="index 5 does not exist"):
        expand(doc(sweep={"flows[5].rtt": ["10ms"]}))
    with pytest.raises(ScenarioError, match="field `flows\\[0\\].rtt`"):
        expand(doc(sweep={"flows[0].rtt": ["ten ms"]}))
    d = {"a": [{"b": 1}]}
    set_path(d, "a[0].b", 2, source="x")
    assert d == {"a": [{"b": 2}]}


def test_seeds_are_derived_deterministically_and_differ_across_conditions():
    assert derive_seed(7, 0) == 7
    seeds = [derive_seed(7, k) for k in range(50)]
    assert len(set(seeds)) == 50 and seeds == [derive_seed(7, k) for k in range(50)]
    c = expand(doc(sweep={"flows[*].rtt": ["10ms", "20ms"]}))
    by_cond = {}
    for t in c.tasks:
        by_cond.setdefault(t.condition, []).append(t.seed)
    assert len(by_cond) == 2 and len({s for v in by_cond.values() for s in v}) == 4  # every run its own seed
    crn = expand(doc(sweep={"flows[*].rtt": ["10ms", "20ms"], "common_random_numbers": True}))
    by_cond = {}
    for t in crn.tasks:
        by_cond.setdefault(t.condition, []).append(t.seed)
    assert list(by_cond.values()) == [[7, derive_seed(7, 1)]] * 2  # common random numbers: as without a sweep
    assert [t.seed for t in expand(doc()).tasks] == [7, derive_seed(7, 1)]  # no sweep: the file's seed


def test_content_address_changes_with_scenario_seed_and_backend():
    a = expand(doc(runs=1)).tasks[0].key
    assert expand(doc(runs=1)).tasks[0].key == a
    assert expand(doc(runs=1, seed=8)).tasks[0].key != a
    assert expand(doc(runs=1, duration="13s")).tasks[0].key != a
    assert expand(doc(runs=1), backend="live").tasks[0].key != a
    # the name is not part of the physics, but it is part of the resolved scenario
    assert expand(doc(runs=1, name="other")).tasks[0].key != a


def test_calibration_and_solo_runs_are_derived_once():
    # seed 000 §V-A: each control against itself under the same conditions
    c = expand(doc(runs=1, analysis={"nru": True, "harm": True}, sweep={"flows[1].cca": ["reno", "cubic"]}))
    cal = [t for t in c.tasks if t.kind == CALIBRATION]
    # reno-vs-reno IS the first main condition, so its self-competition run is that
    # main run (same resolved scenario, so the same seeds), planned once; cubic's is new
    assert [tuple(f["cca"] for f in t.scenario["flows"]) for t in cal] == [("cubic", "cubic")]
    main_keys = {t.key for t in c.tasks if t.kind == MAIN}
    reno_cal = {k for links in c.links.values() for k in links["calibration"]["reno"]}
    assert reno_cal <= main_keys
    solo = [t for t in c.tasks if t.kind == SOLO]
    assert all(len(t.scenario["flows"]) == 1 for t in solo)
    for cond, links in c.links.items():
        assert set(links["calibration"]) <= {"reno", "cubic"}


def _samples_by_key(store):
    return {k: store.load(k).samples for k in sorted(store.done_keys())}


def test_executors_give_bit_identical_results(tmp_path):
    camp = expand(doc(sweep={"flows[*].rtt": ["10ms", "30ms"]}))
    serial = Store(tmp_path / "serial")
    pool = Store(tmp_path / "pool")
    r1 = run_campaign(camp, serial, workers=1)
    r2 = run_campaign(camp, pool, workers=2)
    assert r1.done == r2.done == 4 and r1.failed == r2.failed == 0
    a, b = _samples_by_key(serial), _samples_by_key(pool)
    assert a.keys() == b.keys()
    for k in a:
        pd.testing.assert_frame_equal(a[k], b[k])


def test_dask_local_cluster_matches_the_process_pool(tmp_path):
    pytest.importorskip("distributed", reason="Dask execution needs the `distributed` package")
    camp = expand(doc(runs=1, sweep={"flows[*].rtt": ["10ms", "30ms"]}))
    pool = Store(tmp_path / "pool")
    dask = Store(tmp_path / "dask")
    run_campaign(camp, pool, workers=1)
    run_campaign(camp, dask, dask="local", workers=2)
    a, b = _samples_by_key(pool), _samples_by_key(dask)
    assert a.keys() == b.keys()
    for k in a:
        pd.testing.assert_frame_equal(a[k], b[k])


def test_a_second_start_skips_finished_runs(tmp_path):
    camp = expand(doc())
    store = Store(tmp_path / "c")
    assert run_campaign(camp, store, workers=1).done == 2
    again = run_campaign(camp, store, workers=1)
    assert again.skipped == 2 and again.done == 0


def test_a_store_refuses_a_different_campaign(tmp_path):
    store = Store(tmp_path / "c")
    run_campaign(expand(doc(runs=1)), store, workers=1)
    with pytest.raises(StoreError, match="different campaign"):
        run_campaign(expand(doc(runs=1, name="other")), store, workers=1)


def _fail_runs_with(monkeypatch, rtt_ns: int) -> None:
    """Make every run whose first flow has this RTT fail inside the worker, as a
    crash in a backend would (in-process: workers=1)."""
    import fairlab.runner

    real = fairlab.runner.run_scenario

    def flaky(model, **kw):
        if model.flows[0].rtt == rtt_ns:
            raise RuntimeError("injected backend failure")
        return real(model, **kw)

    monkeypatch.setattr(fairlab.runner, "run_scenario", flaky)


def test_failed_runs_are_recorded_and_the_campaign_goes_on(tmp_path, monkeypatch):
    _fail_runs_with(monkeypatch, 40_000_000)
    camp = expand(doc(runs=1, sweep={"flows[0].rtt": ["20ms", "40ms"]}))
    store = Store(tmp_path / "c")
    rep = run_campaign(camp, store, workers=1)
    assert rep.done == 1 and rep.failed == 1
    (fail,) = store.failures()
    assert "injected backend failure" in fail["reason"] and "40ms" in fail["label"]
    # The next start retries it (and a success removes the failure record).
    monkeypatch.undo()
    again = run_campaign(camp, store, workers=1)
    assert again.skipped == 1 and again.done == 1 and again.failed == 0
    assert store.failures() == []


@pytest.mark.parametrize(
    "sweep, field, words",
    [
        ({"bottleneck.qdisc": ["droptail", "no-such-qdisc"]}, "bottleneck.qdisc", ["'no-such-qdisc'", "known:", "fq_codel"]),
        ({"bottleneck.qdisc": ["red"], "bottleneck.params.max_p": [0.1, 1.5]}, "bottleneck.params", ["max_p", "1.5", "(0, 1]"]),
        ({"flows[0].params.abc_l": [2, 5]}, "flows[0].params", ["abc_l"]),
        # The engine numbers flows after `count` expansion (cubic is its flows[3]);
        # the message must name the entry in the file.
        ({"flows[0].count": [3], "flows[1].params.beta": [0.7, 5.0]}, "flows[1].params", ["beta", "cubic"]),
    ],
)
def test_plan_refuses_what_the_engine_would_refuse_naming_condition_and_field(sweep, field, words):
    """A bad value in one condition used to be planned and then fail each of its runs
    (after every run before it); the planner now asks the engine, runs nothing."""
    with pytest.raises(ScenarioError) as e:
        expand(doc(runs=3, sweep=sweep), source="spec.toml")
    msg = str(e.value)
    assert msg.startswith("spec.toml [") and f"`{field}`" in msg, msg
    for w in words:
        assert w in msg, msg


def test_an_error_in_an_unlabelled_group_names_its_axis():
    """The prefix used to be the group's paths ("[flows[0].cca=renoo]"), which read as a
    sweep key or a base-scenario field the file does not have; it names the axis as
    the catalog's column does. A labelled group keeps its label; other axes are as
    `fairlab plan` shows them."""
    def refusal(sweep):
        with pytest.raises(ScenarioError) as e:
            expand(doc(runs=1, sweep=sweep), source="spec.toml")
        return str(e.value)

    assert refusal({"pair": [{"flows[0].cca": "renoo"}]}).startswith("spec.toml [pair=renoo]: field `flows[0].cca`: ")
    assert refusal({"pair": [{"flows[0].cca": "reno", "flows[1].cca": "cubic"}], "flows[*].rtt": ["-5ms"]}).startswith(
        "spec.toml [pair=reno/cubic; RTT -5ms]: field `flows[0].rtt`: ")
    assert refusal({"pair": [{"label": "typo", "flows[0].cca": "renoo"}]}).startswith("spec.toml [typo]: ")
    # The validation grid's `cell` axis, with a typo in one cell.
    from fairlab.validation.grid import Cell, campaign_docs

    (grid_doc,) = campaign_docs([Cell(("renoo", "reno"), 100, 1.0)], runs=1)
    with pytest.raises(ScenarioError) as e:
        expand(grid_doc, source="grid")
    assert str(e.value).startswith("grid [cell=renoo/reno/100ms/100%bdp/droptail]: field `flows[0].cca`: ")


def test_a_campaign_planned_before_a_check_existed_still_reports(tmp_path):
    """A store whose manifest holds a condition today's planner would refuse (made
    before the check, or before a range was tightened) must still give its report
    from the runs that finished."""
    from fairlab.report.campaign_report import write_report

    sweep = {"bottleneck.qdisc": ["red"], "bottleneck.params.max_p": [0.1, 1.5]}
    camp = expand(doc(runs=1, sweep=sweep), check=False)
    store = Store(tmp_path / "c")
    rep = run_campaign(camp, store, workers=1)
    assert rep.done == 1 and rep.failed == 1
    (fail,) = store.failures()
    assert "max_p" in fail["reason"]
    paths = write_report(tmp_path / "c")
    md = paths["markdown"].read_text()
    assert paths["html"].exists() and "max_p" in md
    # One run per condition: the Jain table shows the value, not "(std —, CV —)".
    assert "std —" not in md and "CV —" not in md


def test_the_cli_exits_1_when_runs_failed_and_keeps_the_rest(tmp_path, monkeypatch):
    """A campaign whose runs fail must not look like success to a script: exit 1,
    the count and where the reasons are; the runs that finished are kept."""
    from typer.testing import CliRunner

    from fairlab.cli import app

    _fail_runs_with(monkeypatch, 40_000_000)
    spec = tmp_path / "half.toml"
    spec.write_text(
        'name = "half"\nduration = "4s"\n[bottleneck]\nrate = "10Mbit"\nbuffer = "100%bdp"\n'
        '[[flows]]\ncca = "reno"\nrtt = "20ms"\n[sweep]\n"flows[0].rtt" = ["20ms", "40ms"]\n'
    )
    out = tmp_path / "out"
    r = CliRunner().invoke(app, ["run", str(spec), "--out", str(out), "--workers", "1"])
    assert r.exit_code == 1, r.output
    msg = " ".join(r.output.split())
    assert "1 of 2 runs failed" in msg and str(out / "failed") in msg, msg
    assert len(list((out / "runs").glob("*/SHA256SUMS"))) == 1
    assert len(list((out / "failed").glob("*.json"))) == 1


def test_reproduce_with_a_failed_run_writes_the_report_and_exits_1(tmp_path, monkeypatch):
    import fairlab.runner
    from typer.testing import CliRunner

    from fairlab.cli import app

    real = fairlab.runner.run_scenario

    def no_bbr(model, **kw):
        if any(f.cca == "bbr" for f in model.flows):
            raise RuntimeError("injected backend failure")
        return real(model, **kw)

    monkeypatch.setattr(fairlab.runner, "run_scenario", no_bbr)
    out = tmp_path / "usc"
    r = CliRunner().invoke(app, ["reproduce", "usc-lab10", "--quick", "--out", str(out), "--workers", "1"])
    assert r.exit_code == 1, r.output
    msg = " ".join(r.output.split())
    assert "1 of 3 runs failed" in msg and "report:" in msg, msg
    report = (out / "report.md").read_text()
    assert "reno vs reno" in report and "injected backend failure" in report


def test_catalog_query_and_open_campaign(tmp_path):
    from fairlab.campaign.store import open_campaign

    store = Store(tmp_path / "c")
    run_campaign(expand(doc()), store, workers=1)
    df = store.query("SELECT count(*) AS n FROM runs")
    assert int(df["n"][0]) == 2
    frames = open_campaign(tmp_path / "c")
    assert set(frames) == {"runs", "flows", "samples", "bottleneck", "summaries", "conditions"}
    # every run has both flows' samples; cubic starts at ~2 s so has fewer
    per_flow = frames["samples"].groupby(["run_key", "flow"]).size()
    assert (per_flow.xs(0, level="flow") == 12).all()
    assert (per_flow.xs(1, level="flow") == 10).all()
    with pytest.raises(StoreError, match="SQL error"):
        store.query("SELECT nope FROM runs")


CAMPAIGN_TOML = """
name = "killme"
duration = "60s"
window = ["10s", "60s"]
seed = 3
runs = 3

[bottleneck]
rate = "40Mbit"
buffer = "100%bdp"

[[flows]]
cca = "reno"
rtt = "50ms"

[[flows]]
cca = "cubic"
rtt = "50ms"
start = "5s"

[sweep]
"flows[*].rtt" = ["20ms", "50ms", "80ms", "120ms"]
"""


def test_sigkill_then_resume_equals_an_uninterrupted_run(tmp_path):
    """A campaign killed with SIGKILL and restarted ends with exactly the results of an
    uninterrupted run, and never leaves a half-written run file (DESIGN.md)."""
    spec = tmp_path / "c.toml"
    spec.write_text(CAMPAIGN_TOML)
    killed, clean = tmp_path / "killed", tmp_path / "clean"
    cmd = [*FAIRLAB_CLI, "run", str(spec), "--workers", "1", "--out"]
    proc = subprocess.Popen([*cmd, str(killed)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 60
    while time.time() < deadline and len(list((killed / "runs").glob("*/SHA256SUMS"))) < 3:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    partial = Store(killed).done_keys()
    assert 3 <= len(partial) < 12, "the kill should land mid-campaign"
    # no temporary or truncated files count as runs
    for p in (killed / "runs").glob("*/SHA256SUMS"):
        Store(killed).load(p.parent.name)
    subprocess.run([*cmd, str(killed)], check=True, capture_output=True)
    subprocess.run([*cmd, str(clean)], check=True, capture_output=True)
    a, b = _samples_by_key(Store(killed)), _samples_by_key(Store(clean))
    assert len(a) == len(b) == 12
    assert a.keys() == b.keys()
    for k in a:
        pd.testing.assert_frame_equal(a[k], b[k])


def test_report_writes_tables_and_figures(tmp_path):
    from fairlab.report.campaign_report import write_report

    d = doc(analysis={"nru": True, "harm": True, "epoch": "2s"}, sweep={"flows[*].rtt": ["10ms", "30ms"]})
    store = Store(tmp_path / "c")
    run_campaign(expand(d), store, workers=1)
    out = write_report(tmp_path / "c")
    md = out["markdown"].read_text()
    for heading in ("Throughput", "Jain's fairness index", "System NRU tuples", "Convergence time", "harm", "Fairness vs RTT"):
        assert heading in md
    html = out["html"].read_text()
    assert "data:image/png;base64," in html  # self-contained
    pngs = list(out["figures"].glob("*.png"))
    assert len(pngs) >= 4 and all(p.read_bytes()[:4] == b"\x89PNG" for p in pngs)
    assert list(out["figures"].glob("*.svg"))


def test_measured_calibration_files_replace_derived_runs(tmp_path):
    """A user may supply calibration measured elsewhere (e.g. a testbed's
    self-competition runs); the campaign then plans no calibration runs of its own."""
    from fairlab.campaign.aggregate import aggregate

    cal = tmp_path / "self.csv"
    cal.write_text("time,flow,throughput_Mbps\n" + "".join(f"{t},{f},4\n" for t in range(1, 13) for f in ("a", "b")))
    spec = tmp_path / "c.toml"
    spec.write_text(
        'name = "measured"\nduration = "12s"\nwindow = ["4s", "12s"]\nruns = 1\n'
        '[bottleneck]\nrate = "10Mbit"\n'
        '[analysis]\nnru = true\ncalibration_files = ["self.csv"]\n'
        '[[flows]]\ncca = "reno"\nrtt = "20ms"\n[[flows]]\ncca = "cubic"\nrtt = "20ms"\n'
    )
    from fairlab.campaign.plan import load_campaign

    camp = load_campaign(spec)
    assert camp.count(CALIBRATION) == 0
    store = Store(tmp_path / "out")
    run_campaign(camp, store, workers=1)
    (res,) = aggregate(store)
    assert res.expected_bps == pytest.approx([4e6, 4e6])
    assert res.nru_tuple_text is not None


def test_missing_calibration_file_is_named(tmp_path):
    spec = tmp_path / "c.toml"
    spec.write_text('name = "m"\nduration = "12s"\n[bottleneck]\nrate = "10Mbit"\n[analysis]\nnru = true\ncalibration_files = ["nope.json"]\n[[flows]]\ncca = "reno"\nrtt = "20ms"\n')
    from fairlab.campaign.plan import load_campaign

    with pytest.raises(ScenarioError, match="analysis.calibration_files.*nope.json"):
        load_campaign(spec)


def test_plan_refuses_a_congestion_control_the_simulator_lacks_naming_the_condition(tmp_path):
    """Before this check a campaign planned the condition and then failed every one
    of its runs; now `fairlab plan` (and `run`) refuse it in one sentence that keeps
    the condition label, brackets included (the CLI must not read them as markup)."""
    spec = tmp_path / "typo.toml"
    spec.write_text(
        'name = "typo"\nduration = "2s"\n[bottleneck]\nrate = "10Mbit"\nbuffer = "100%bdp"\n'
        '[[flows]]\ncca = "reno"\nrtt = "20ms"\n[sweep]\npair = [{"flows[0].cca" = "cubic"}, {"flows[0].cca" = "renoo"}]\n'
    )
    r = fairlab("plan", spec)
    assert r.returncode == 2, r.stdout
    assert "Traceback" not in r.stderr
    msg = " ".join(r.stderr.split())
    assert f"{spec} [pair=renoo]: field `flows[0].cca`" in msg and "'renoo'" in msg
    assert "cubic" in msg.split("known:")[1] and "ccid2" in msg
    # The live backend runs the kernel's controllers, which the simulator's table does not list.
    doc = {"name": "k", "duration": "2s", "bottleneck": {"rate": "10Mbit", "buffer": "100%bdp"},
           "flows": [{"cca": "dctcp", "rtt": "20ms"}]}
    assert len(expand(doc, backend="live").tasks) == 1
    with pytest.raises(ScenarioError, match="no congestion control 'dctcp'"):
        expand(doc, backend="sim")
    # ...but its bottleneck is the `aqm` crate's (linkem's) on either backend.
    for bad, field in [({"qdisc": "redd"}, "bottleneck.qdisc"), ({"qdisc": "red", "params": {"max_p": 1.5}}, "bottleneck.params")]:
        live = {**doc, "bottleneck": {**doc["bottleneck"], **bad}}
        with pytest.raises(ScenarioError, match=rf"`{re.escape(field)}`"):
            expand(live, source="k.toml", backend="live")



def test_the_cli_lists_only_the_plans_failures(tmp_path, monkeypatch):
    """An older build's failure records stay in the store under keys today's plan does
    not have; `fairlab run` used to list them as failures of this run (and put them
    in the --json document) although the campaign had retried and finished those runs."""
    import json

    import fairlab.runner
    from typer.testing import CliRunner

    from fairlab.campaign import plan
    from fairlab.cli import app

    spec = tmp_path / "half.toml"
    spec.write_text(
        'name = "half"\nduration = "4s"\n[bottleneck]\nrate = "10Mbit"\nbuffer = "100%bdp"\n'
        '[[flows]]\ncca = "reno"\nrtt = "20ms"\n[sweep]\n"flows[0].rtt" = ["20ms", "40ms"]\n'
    )
    out = tmp_path / "out"
    with monkeypatch.context() as m:
        m.setattr(plan, "_engine", lambda: "an older engine build")
        m.setattr(fairlab.runner, "run_scenario", lambda model, **kw: (_ for _ in ()).throw(RuntimeError("old failure")))
        r = CliRunner().invoke(app, ["run", str(spec), "--out", str(out), "--workers", "1"])
        assert r.exit_code == 1, r.output
    _fail_runs_with(monkeypatch, 40_000_000)
    r = CliRunner().invoke(app, ["run", str(spec), "--out", str(out), "--workers", "1", "--json"])
    assert r.exit_code == 1, r.output
    docu = json.loads(r.stdout[r.stdout.index("{"):])
    assert docu["runs"]["failed"] == 1
    assert len(docu["failures"]) == 1 and "injected backend failure" in docu["failures"][0]["reason"], docu["failures"]
    r = CliRunner().invoke(app, ["run", str(spec), "--out", str(out), "--workers", "1"])
    text = " ".join(r.output.split())
    assert text.count("failed flows[0].rtt=") == 1 and "injected backend failure" in text and "old failure" not in text, text
    assert "2 more failure record(s) in the store" in text, text
