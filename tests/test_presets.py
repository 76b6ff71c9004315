"""Presets (`fairlab reproduce`): every preset expands to the run count its paper's
parameters give (computed here by hand, not from the plan) — for the presets listed
in EXPECTED; presets added later are still checked for expansion, a smaller quick
variant and known names — quick variants are smaller, and every congestion control / queue discipline a preset names is one the
engine knows. Plan expansion only — nothing is simulated (fast)."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from fairlab import _core
from fairlab.campaign.plan import CALIBRATION, MAIN, SOLO, Campaign, apply_point, expand
from fairlab.presets import PRESETS, preset_document

#: DCCP endpoints are not congestion-control modules of the TCP engine, but a flow's
#: `cca` accepts them by name (docs/scenario-format.md).
DCCP_ENDPOINTS = {"ccid2"}

# ---------------------------------------------------------------- paper parameters
SEED000_RTTS = 8  # 25, 50, ..., 200 ms (seeds 000 and 001)
SEED001_PAIRS = 6  # CCID2 vs NewReno, BIC, CUBIC in both start orders
SEED001_RUNS = 5
SEED001_CCAS = 4  # ccid2, reno, bic, cubic: one self-competition set each per RTT
SEED001_SOLO_FLOWS = 8  # each cca alone, started at 0 s and at 30 s (its two roles)
SEED000_VARIANTS = 14  # §VI-E: one flow of each ns-2 TCP-Linux variant
SEED004_BUFFERS = 10  # 10%, 20%, ..., 100% of BDP
SEED004_QDISCS = 3  # Drop-tail, RED, CHOKe
SEED004_MIXES = 4  # heterogeneous + 3 homogeneous (Table I)

EXPECTED: dict[str, dict[str, int]] = {
    "bhatti2008-dccp": {
        MAIN: SEED000_RTTS * SEED001_PAIRS * SEED001_RUNS,  # 240
        CALIBRATION: SEED000_RTTS * SEED001_CCAS * SEED001_RUNS,  # 160
        SOLO: SEED000_RTTS * SEED001_SOLO_FLOWS * SEED001_RUNS,  # 320
    },
    "bhatti2009-nru": {
        MAIN: SEED000_RTTS * 1,  # one run per RTT
        CALIBRATION: SEED000_RTTS * SEED000_VARIANTS,  # 14 self-competition runs per RTT
        SOLO: 0,
    },
    "xue-10g-aqm": {
        MAIN: SEED004_BUFFERS * SEED004_QDISCS * SEED004_MIXES,  # 120
        CALIBRATION: 0,
        SOLO: 0,
    },
}


@functools.lru_cache(maxsize=None)
def _plan(name: str, quick: bool = False) -> Campaign:
    return expand(preset_document(name, quick=quick), source=f"preset {name}")


def test_the_paper_presets_exist():
    assert set(EXPECTED) <= set(PRESETS)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_full_preset_run_counts(name):
    camp = _plan(name)
    for kind, n in EXPECTED[name].items():
        assert camp.count(kind) == n, (name, kind)


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_quick_variant_is_smaller_and_says_so(name):
    full = _plan(name)
    quick = _plan(name, True)
    assert 0 < quick.count() < full.count()
    assert quick.count(MAIN) <= full.count(MAIN)
    assert quick.name == f"{full.name}-quick"
    assert PRESETS[name].quick_note.strip()


def test_quick_counts_by_hand():
    # bhatti2008-dccp --quick: 3 RTTs, 2 runs
    q = _plan("bhatti2008-dccp", True)
    assert (q.count(MAIN), q.count(CALIBRATION), q.count(SOLO)) == (3 * 6 * 2, 3 * 4 * 2, 3 * 8 * 2)
    # bhatti2009-nru --quick: 2 RTTs, 1 main + 14 calibration runs each
    q = _plan("bhatti2009-nru", True)
    assert (q.count(MAIN), q.count(CALIBRATION)) == (2, 2 * 14)
    # xue-10g-aqm --quick: 4 buffers x 3 qdiscs x 4 mixes
    q = _plan("xue-10g-aqm", True)
    assert q.count(MAIN) == 4 * 3 * 4


def _conditions(name: str, quick: bool = False) -> list[dict[str, Any]]:
    return [t.scenario for t in _plan(name, quick).tasks]


@pytest.mark.parametrize("quick", [False, True])
@pytest.mark.parametrize("name", sorted(PRESETS))
def test_named_ccas_and_qdiscs_are_known(name, quick):
    ccas = {n for n, _, _ in _core.cc_registry()} | DCCP_ENDPOINTS
    qdiscs = {n for n, _, _ in _core.qdisc_registry()}
    for sc in _conditions(name, quick):
        for f in sc["flows"]:
            assert f["cca"] in ccas, (name, f["cca"])
        assert sc["bottleneck"].get("qdisc", "droptail") in qdiscs, (name, sc["bottleneck"])


def test_bhatti2009_is_the_fourteen_variant_set():
    doc = preset_document("bhatti2009-nru")
    flows = doc["flows"]
    names = [f["cca"] for f in flows]
    assert len(flows) == 14 and len(set(names)) == 14
    assert set(names) == {"bic", "cubic", "highspeed", "htcp", "hybla", "illinois", "lp", "reno", "scalable", "vegas", "veno", "westwood", "yeah", "compound"}
    # flow k starts at 30*k s; 900 s run analysed over 420–900 s; 100 Mb/s; 8 RTTs 25–200 ms
    assert [f["start"] for f in flows] == [f"{30 * k}s" for k in range(14)]
    assert doc["duration"] == "900s" and doc["window"] == ["420s", "900s"]
    assert doc["bottleneck"]["rate"] == "100Mbit" and doc["runs"] == 1
    assert doc["sweep"]["flows[*].rtt"] == [f"{25 * k}ms" for k in range(1, 9)]
    assert doc["analysis"]["nru"] is True
    # the quick variant keeps the same variants in the same order
    quick = preset_document("bhatti2009-nru", quick=True)
    assert [f["cca"] for f in quick["flows"]] == names
    assert [f.get("params") for f in quick["flows"]] == [f.get("params") for f in flows]


def test_bhatti2009_calibration_is_fourteen_of_one_kind():
    camp = _plan("bhatti2009-nru")
    cal = [t for t in camp.tasks if t.kind == CALIBRATION]
    for t in cal:
        ccas = {f["cca"] for f in t.scenario["flows"]}
        assert ccas == {t.for_cca} and len(t.scenario["flows"]) == 14


def test_xue_table1_and_fig3_conditions_present():
    doc = preset_document("xue-10g-aqm")
    assert doc["bottleneck"]["rate"] == "10Gbit"
    assert {f["rtt"] for f in doc["flows"]} == {"120ms"}
    sweep = dict(doc["sweep"])
    points = []
    for t in _plan("xue-10g-aqm").tasks:
        sc = t.scenario
        points.append((sc["bottleneck"]["buffer"], sc["bottleneck"]["qdisc"], tuple(f["cca"] for f in sc["flows"])))
    het = ("reno", "highspeed", "cubic")
    # Fig. 3: the heterogeneous mix at every buffer under every qdisc
    for b in [f"{10 * k}%bdp" for k in range(1, 11)]:
        for q in ("droptail", "red", "choke"):
            assert (b, q, het) in points
    # Table I: each homogeneous set (3 flows of one variant) at 20% BDP under every qdisc
    for cca in ("cubic", "highspeed", "reno"):
        for q in ("droptail", "red", "choke"):
            assert ("20%bdp", q, (cca, cca, cca)) in points
    assert sweep  # the sweep stays in the document
    # the grouped axis assigns only flow ccas
    for v in sweep["mix"]:
        d = apply_point(doc, {"mix": v}, source="test")
        assert len(d["flows"]) == 3
