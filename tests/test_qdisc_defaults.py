"""BLUE's steps and freeze time from the link (docs/qdiscs.md, "BLUE's steps from the
link"): the rule against hand calculations and Mathis et al.'s response function, the
precedence of given parameters, seed 002's presets keeping its published values, and a
short simulation of issue 12's case in which the rule beats the fixed step."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fairlab.analysis import analyze
from fairlab.campaign.plan import expand
from fairlab.presets import preset_document
from fairlab.report.setup import _qdisc
from fairlab.runner import run_scenario
from fairlab.scenario import Scenario
from fairlab.scenario.qdisc_defaults import link_steps

SEED_002 = {"d1": 0.02, "d2": 0.002, "freeze_time": 50_000_000}


def issue_case(qdisc="blue", params=None, *, duration=60, seed=1):
    """Issue 12: 8 ECN Reno flows, RTT 20, 40, …, 160 ms, 20 Mbit/s."""
    return Scenario.from_dict({
        "name": "blue8", "duration": f"{duration}s", "seed": seed, "window": [f"{duration // 3}s", f"{duration}s"],
        "bottleneck": {"rate": "20Mbit", "buffer": "200p", "qdisc": qdisc, "params": params or {}},
        "flows": [{"cca": "reno", "rtt": f"{20 * i}ms", "ecn": True} for i in range(1, 9)],
    })


def test_issue_case_by_hand():
    # Σ 1/RTT = 50/s · (1 + 1/2 + … + 1/8) = 50 · 761/280 = 135.892857/s; packets of
    # 1448 + 52 = 1500 B = 12,000 bit; √p* = 1.22 · 12,000 · 135.892857 / 20e6
    # = 0.0994736; p* = 0.00989500; d1 = p*/4, d2 = d1/10; freeze = 8 / 135.892857 s.
    params, rule = issue_case().qdisc_params()
    assert params["d1"] == pytest.approx(0.00247375, rel=1e-5)
    assert params["d2"] == pytest.approx(0.000247375, rel=1e-5)
    assert params["freeze_time"] == pytest.approx(58_869_908, abs=1)
    assert "link rule" in rule and "0.00989" in rule and "58.9 ms" in rule


def test_one_flow_by_hand():
    # One flow, 100 ms, 10 Mbit/s: W = 10e6 · 0.1 / 12,000 = 83.33 packets,
    # p* = (1.22 / 83.333)² = 0.014640² = 2.14330e-4 — Mathis' (1.22/W)² for the window it needs.
    s = link_steps(10e6, [(1, 100_000_000, 1500)])
    assert s.p_needed == pytest.approx(2.14330e-4, rel=1e-5)
    assert (s.d1, s.d2, s.freeze_time_ns) == (pytest.approx(5.35825e-5, rel=1e-5), pytest.approx(5.35825e-6, rel=1e-5), 100_000_000)


def test_more_flows_than_windows_of_four_segments_allow_cap_p():
    # 200 flows at 100 ms on 10 Mbit/s: 0.42 packets per RTT each; Mathis would ask
    # p > 1. Capped at Mathis' p for W = 4 segments: (1.22/4)² = 0.093025.
    s = link_steps(10e6, [(200, 100_000_000, 1500)])
    assert s.p_needed == pytest.approx(0.093025) and s.d1 == pytest.approx(0.02325625) and s.d2 == pytest.approx(0.002325625)
    # 20 flows at 20–210 ms (seed 002's set 2, one session each): Σ 1/RTT = 100 · (H_21 − 1)
    # = 264.52/s; √p* = 1.22 · 12,000 · 264.52 / 10e6 = 0.38726 → p* = 0.14997 > cap.
    assert link_steps(10e6, [(1, (10 + 10 * i) * 1_000_000, 1500) for i in range(1, 21)]).p_needed == pytest.approx(0.093025)
    # Just below the cap the formula holds: 2 flows at 100 ms with W = 5 segments each
    # (rate 2 · 5 · 12,000 / 0.1 = 1.2 Mbit/s): p* = (1.22/5)² = 0.059536.
    assert link_steps(1.2e6, [(2, 100_000_000, 1500)]).p_needed == pytest.approx(0.059536)


@settings(max_examples=60, deadline=None)
@given(st.floats(1e5, 1e11), st.lists(st.tuples(st.integers(1, 20), st.integers(100_000, 2_000_000_000), st.integers(100, 9000)), min_size=1, max_size=6))
def test_the_steps_resolve_the_probability_at_which_the_flows_fill_the_link(rate, flows):
    s = link_steps(rate, flows)
    assert 0 < s.d1 <= (1.22 / 4) ** 2 / 4 and s.d2 == pytest.approx(s.d1 / 10)
    rtts = [r for _, r, _ in flows]
    assert min(rtts) - 1 <= s.rtt_harmonic_ns <= max(rtts) + 1 and s.freeze_time_ns == s.rtt_harmonic_ns
    if s.p_needed < (1.22 / 4) ** 2:
        # Mathis et al. 1997 at p = 4·d1: the flows' rates sum to the link rate.
        p = 4 * s.d1
        total = sum(n * 8 * size / (r / 1e9) * 1.22 / p ** 0.5 for n, r, size in flows)
        assert total == pytest.approx(rate, rel=1e-9)


def test_given_parameters_win_and_a_missing_d2_follows_the_given_d1():
    params, rule = issue_case(params={"d1": 0.01}).qdisc_params()
    assert params["d1"] == 0.01 and params["d2"] == pytest.approx(0.001) and params["freeze_time"] == pytest.approx(58_869_908, abs=1)
    assert "d2 (= d1/10)" in rule and "d1 as given" in rule
    params, rule = issue_case(params={"freeze_time": "10ms", "q_lim": 50}).qdisc_params()
    assert params["freeze_time"] == 10_000_000 and params["q_lim"] == 50 and params["d1"] == pytest.approx(0.00247375, rel=1e-5)
    params, rule = issue_case(params={"d1": 0.02, "d2": 0.002, "freeze_time": "50ms"}).qdisc_params()
    assert params == SEED_002 and rule == "d1, d2 and freeze_time as given"


@pytest.mark.parametrize("qdisc", ["zrtt", "mrtt", "prto"])
def test_the_blue_based_disciplines_follow_the_same_rule(qdisc):
    assert issue_case(qdisc).qdisc_params()[0] == issue_case("blue").qdisc_params()[0]


def test_other_disciplines_are_untouched():
    s = Scenario.from_dict({"name": "r", "duration": "5s", "bottleneck": {"rate": "20Mbit", "qdisc": "red", "params": {"max_p": 0.1}},
                            "flows": [{"cca": "reno", "rtt": "20ms"}]})
    assert s.qdisc_params() == ({"max_p": 0.1}, None)
    assert s.resolve()["bottleneck"]["params"] == {"max_p": 0.1}


@pytest.mark.parametrize("preset", ["zhang2004-zrtt", "zhang2004-zrtt-sessions"])
def test_seed_002_presets_keep_its_published_parameters(preset):
    """Seed 002: "freeze_time=50 ms, det_in=0.02, det_de=0.002, q_lim=100"."""
    camp = expand(preset_document(preset, quick=True), check=False)
    seen = set()
    for t in camp.tasks:
        m = t.model()
        if m.bottleneck.qdisc == "csfq":
            continue
        params, rule = m.qdisc_params()
        seen.add(m.bottleneck.qdisc)
        assert {k: params[k] for k in SEED_002} == SEED_002 and params["q_lim"] == 100
        assert rule == "d1, d2 and freeze_time as given"
    assert seen == {"blue", "zrtt", "mrtt", "prto"}


def test_the_report_and_the_run_say_which_rule_was_used():
    text = _qdisc(issue_case())
    assert "d1=0.00247" in text and "freeze_time=58.87 ms" in text and "link rule" in text
    assert "as given" in _qdisc(issue_case(params={"d1": 0.02, "d2": 0.002, "freeze_time": "50ms"}))
    trace = run_scenario(issue_case(duration=3))
    assert "link rule" in trace.meta["qdisc_rule"]
    assert trace.meta["resolved_scenario"]["bottleneck"]["params"]["d1"] == pytest.approx(0.00247375, rel=1e-5)


def test_the_rule_beats_seed_002s_fixed_step_on_the_issue_case():
    """Issue 12 measured ZRTT at J ≈ 0.68 with the 0.02 step and 0.975 with steps ten
    times smaller. 60 s, two seeds: fixed steps gave 0.73–0.79 here, the rule 0.95–0.99
    (two engine builds of 2026-11-25)."""
    for seed in (1, 2):
        j = {}
        for name, params in (("fixed", SEED_002), ("rule", {})):
            trace = run_scenario(issue_case("zrtt", params, seed=seed), seed=seed)
            j[name] = analyze(trace, window=(20, 60)).jain.of_means
        assert j["rule"] >= 0.93 and j["rule"] >= j["fixed"] + 0.1, j
