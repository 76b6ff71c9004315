"""Seeds of a campaign's runs (docs/campaigns.md, "Seeds"): each condition of a sweep
has seeds of its own unless `[sweep] common_random_numbers = true`; seeds are a pure
function of (base seed, the condition as resolved, run index), so they survive a new
process, a reordered sweep and a re-expansion from the store."""

import hashlib
import json
import os
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cli_helpers import fairlab
from fairlab.campaign.execute import run_campaign
from fairlab.campaign.plan import CALIBRATION, MAIN, derive_seed, expand
from fairlab.campaign.store import Store, StoreError
from fairlab.scenario import ScenarioError


def campaign(rtts_ms, bufs, *, seed=7, runs=2, crn=None, nru=False):
    d = {
        "name": "seeds",
        "duration": "4s",
        "seed": seed,
        "runs": runs,
        "bottleneck": {"rate": "10Mbit", "buffer": "100%bdp"},
        "flows": [{"cca": "reno", "rtt": "20ms"}, {"cca": "cubic", "rtt": "20ms"}],
        "sweep": {"flows[*].rtt": [f"{r}ms" for r in rtts_ms], "bottleneck.buffer": [f"{b}%bdp" for b in bufs]},
    }
    if crn is not None:
        d["sweep"]["common_random_numbers"] = crn
    if nru:
        d["analysis"] = {"nru": True}
    return d


def seeds_by_label(camp, kind=MAIN):
    out = {}
    for t in camp.tasks:
        if t.kind == kind:
            out.setdefault(t.label, []).append(t.seed)
    return out


rtts = st.lists(st.integers(1, 400), min_size=1, max_size=4, unique=True)
bufs = st.lists(st.integers(5, 300), min_size=1, max_size=3, unique=True)


@settings(max_examples=25, deadline=None)
@given(rtts, bufs, st.integers(0, 2**63 - 1), st.integers(1, 4))
def test_every_run_of_every_condition_has_its_own_seed(r, b, seed, runs):
    camp = expand(campaign(r, b, seed=seed, runs=runs), check=False)
    seeds = [t.seed for t in camp.tasks]
    assert len(seeds) == len(r) * len(b) * runs
    assert len(set(seeds)) == len(seeds)
    assert all(0 <= s < 2**63 for s in seeds)  # fits DuckDB's BIGINT and the engine's u64


@settings(max_examples=25, deadline=None)
@given(rtts, bufs, st.integers(0, 2**63 - 1), st.integers(1, 4))
def test_common_random_numbers_give_every_condition_the_same_seeds(r, b, seed, runs):
    camp = expand(campaign(r, b, seed=seed, runs=runs, crn=True), check=False)
    expected = [derive_seed(seed, k) for k in range(runs)]  # the rule without a sweep
    assert list(seeds_by_label(camp).values()) == [expected] * (len(r) * len(b))


@settings(max_examples=25, deadline=None)
@given(rtts, bufs, st.randoms(use_true_random=False))
def test_seeds_do_not_depend_on_the_order_of_the_sweep(r, b, rnd):
    before = expand(campaign(r, b), check=False)
    r2, b2 = list(r), list(b)
    rnd.shuffle(r2)
    rnd.shuffle(b2)
    d = campaign(r2, b2)
    d["sweep"] = dict(reversed(list(d["sweep"].items())))  # the other axis first
    after = expand(d, check=False)
    by_point = lambda c: {json.dumps(t.point, sort_keys=True): (t.run_index, t.seed, t.key) for t in c.tasks}  # noqa: E731
    a, b_ = by_point(before), by_point(after)
    assert a.keys() == b_.keys() and all(set([a[k]]) == set([b_[k]]) for k in a)
    assert {t.key for t in before.tasks} == {t.key for t in after.tasks}


def test_seeds_are_the_same_in_another_process():
    """Nothing of the process leaks in (Python's per-process string hashing, dict order)."""
    d = campaign([10, 80], [20, 100], runs=3)
    here = [(t.label, t.seed) for t in expand(d, check=False).tasks]
    code = ("import json,sys; from fairlab.campaign.plan import expand; "
            "print(json.dumps([(t.label, t.seed) for t in expand(json.loads(sys.argv[1]), check=False).tasks]))")
    for hashseed in ("1", "12345"):
        out = subprocess.run([sys.executable, "-c", code, json.dumps(d)], capture_output=True, text=True, check=True,
                             env={**os.environ, "PYTHONHASHSEED": hashseed}).stdout
        assert [tuple(x) for x in json.loads(out)] == here


def test_the_seed_is_the_documented_hash():
    """docs/campaigns.md: BLAKE2b (8 bytes, big-endian, top bit cleared) over the
    canonical JSON of the base seed, the resolved condition without name and seed, and
    the run index — recomputed here from the resolved scenario by hand."""
    d = campaign([30], [50], seed=11, runs=2)
    camp = expand(d, check=False)
    physics = camp.tasks[0].model().resolve()
    del physics["name"], physics["seed"]
    for t in camp.tasks:
        text = json.dumps({"base": 11, "condition": physics, "run": t.run_index}, sort_keys=True, separators=(",", ":"))
        want = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big") & (2**63 - 1)
        assert t.seed == want


def test_identical_calibration_runs_are_shared_across_conditions():
    """Two conditions that differ only in flow order need the same self-competition
    runs: they are the same physical runs, so they carry the same seeds and are planned
    once, as under common random numbers."""
    d = campaign([20], [100], runs=2, nru=True)
    d["sweep"] = {"order": [{"flows[0].cca": "reno", "flows[1].cca": "cubic"}, {"flows[0].cca": "cubic", "flows[1].cca": "reno"}]}
    camp = expand(d, check=False)
    assert camp.count(MAIN) == 4 and camp.count(CALIBRATION) == 4  # reno×2 and cubic×2, 2 runs each
    links = list(camp.links.values())
    assert links[0]["calibration"] == links[1]["calibration"]
    assert len({t.seed for t in camp.tasks if t.kind == MAIN}) == 4


def test_a_bad_value_is_refused_in_one_sentence(tmp_path):
    with pytest.raises(ScenarioError, match="common_random_numbers = 'yes' is not allowed; write true"):
        expand(campaign([10], [100], crn="yes"), check=False)
    spec = tmp_path / "c.toml"
    spec.write_text('name = "c"\nduration = "4s"\n[bottleneck]\nrate = "10Mbit"\n[[flows]]\ncca = "reno"\nrtt = "20ms"\n'
                    '[sweep]\n"flows[*].rtt" = ["10ms", "20ms"]\ncommon_random_numbers = 1\n')
    r = fairlab("plan", spec)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "c.toml" in r.stderr and "common_random_numbers = 1 is not allowed" in r.stderr


def test_a_store_planned_with_the_other_seeding_is_refused_with_the_fix(tmp_path):
    camp = expand(campaign([10, 20], [100], runs=1), check=False)
    Store(tmp_path / "s").init(camp)
    with pytest.raises(StoreError, match="each condition's own seeds; set `common_random_numbers = false`"):
        Store(tmp_path / "s").init(expand(campaign([10, 20], [100], runs=1, crn=True), check=False))
    crn = expand(campaign([10, 20], [100], runs=1, crn=True), check=False)
    Store(tmp_path / "c").init(crn)
    with pytest.raises(StoreError, match="one seed per run index shared by all conditions; set `common_random_numbers = true`"):
        Store(tmp_path / "c").init(camp)
    # A manifest from before the choice existed (every campaign then shared seeds)
    # resumes either way, as after an engine rebuild; the choice is then recorded.
    m = tmp_path / "s" / "campaign.json"
    for new, want in ((crn, True), (camp, False)):
        doc = json.loads(m.read_text())
        del doc["common_random_numbers"]
        m.write_text(json.dumps(doc))
        Store(tmp_path / "s").init(new)
        assert json.loads(m.read_text())["common_random_numbers"] is want


def test_a_campaign_re_expanded_from_its_store_has_the_same_seeds(tmp_path):
    """The report re-plans from campaign.json; it must find the runs that ran."""
    from fairlab.campaign.aggregate import campaign_of

    for crn in (False, True):
        camp = expand(campaign([10, 20], [100], runs=2, crn=crn), check=False)
        store = Store(tmp_path / f"s{crn}")
        store.init(camp)
        assert [(t.key, t.seed) for t in campaign_of(store).tasks] == [(t.key, t.seed) for t in camp.tasks]


def test_plan_cli_shows_seeds_per_condition_and_the_opt_in(tmp_path):
    r = fairlab("plan", "bhatti2008-dccp", "--quick", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    main = [x for x in doc["runs"] if x["kind"] == "main"]
    run0 = [x["seed"] for x in main if x["run_index"] == 0]
    assert doc["common_random_numbers"] is False
    assert len(run0) == doc["counts"]["conditions"] and len(set(run0)) == len(run0)  # no seed repeats
    assert 2008 not in run0  # the preset's base seed is no condition's seed
    spec = tmp_path / "c.toml"
    spec.write_text('name = "c"\nduration = "4s"\nseed = 5\nruns = 2\n[bottleneck]\nrate = "10Mbit"\n[[flows]]\ncca = "reno"\nrtt = "20ms"\n'
                    '[sweep]\n"flows[*].rtt" = ["10ms", "20ms", "40ms"]\ncommon_random_numbers = true\n')
    r = fairlab("plan", spec)
    assert r.returncode == 0, r.stderr
    assert "common random numbers: run k of every condition shares a seed" in " ".join(r.stdout.split())  # rich wraps
    doc = json.loads(fairlab("plan", spec, "--json").stdout)
    assert doc["common_random_numbers"] is True
    assert sorted(x["seed"] for x in doc["runs"]) == sorted([5, derive_seed(5, 1)] * 3)


def test_a_campaign_without_the_opt_in_runs_and_resumes(tmp_path):
    """End to end: the runs recorded under per-condition seeds are found again."""
    camp = expand(campaign([10, 40], [100], runs=1))
    store = Store(tmp_path / "s")
    run_campaign(camp, store, workers=1)
    stored = {store.load(k).meta["seed"] for k in store.done_keys()}
    assert stored == {t.seed for t in camp.tasks} and len(stored) == 2


def test_the_validation_grid_keeps_common_random_numbers():
    """The grid's kernel runs were recorded with run k of every cell on seed
    derive_seed(42, k); its campaigns opt in so those run keys stay valid, and the
    simulator's first seeds stay the kernel's."""
    from fairlab.validation.grid import BASE_SEED, SIM_SEEDS, campaign_docs, cells

    for runs in (3, SIM_SEEDS):
        for d in campaign_docs(cells("core"), runs):
            camp = expand(d, check=False)
            assert camp.common_random_numbers
            assert all(t.seed == derive_seed(BASE_SEED, t.run_index) for t in camp.tasks)
            assert len({t.condition for t in camp.tasks}) == len(d["sweep"]["cell"])
