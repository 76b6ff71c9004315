"""The grid's ceiling (fairlab.validation.power), held against closed forms.

A pretend kernel of n runs drawn from N normal runs with standard deviation σ
agrees in J with the other N − n when the difference of the two means, normal with
standard deviation σ·sqrt(1/n + 1/(N − n)), is within the tolerance t: with
probability 2Φ(t / that) − 1. The share rule is the same with the share's σ.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import norm

from fairlab.validation import grid, power

RULE = {"share_points": grid.SHARE_POINTS, "jain_tolerance": grid.JAIN_TOLERANCE}


def _closed_form(sd: float, n: int, runs: int, tolerance: float) -> float:
    return float(2 * norm.cdf(tolerance / (sd * np.sqrt(1 / n + 1 / (runs - n)))) - 1)


def _normal_runs(runs: int, j_sd: float, share_sd: float, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    first = 50 + share_sd * rng.standard_normal(runs)
    return np.column_stack([first, 100 - first]), 0.9 + j_sd * rng.standard_normal(runs)


def test_the_chance_from_j_alone_is_the_normal_closed_form():
    shares, j = _normal_runs(600, j_sd=0.05, share_sd=0.0)
    sd = float(j.std(ddof=1))
    # By hand with σ = 0.05: 0.03 / (0.05 · sqrt(1/3 + 1/597)) = 1.04, so 2Φ(1.04) − 1 = 0.70.
    expected = _closed_form(sd, 3, 600, grid.JAIN_TOLERANCE)
    assert abs(expected - 0.70) < 0.03
    assert abs(power.agreement_chance(shares, j, 3, **RULE) - expected) < 0.035


def test_the_chance_from_shares_alone_is_the_normal_closed_form():
    shares, _ = _normal_runs(600, j_sd=0.0, share_sd=5.0)
    j = np.full(600, 0.9)
    # σ = 5 points: 5 / (5 · sqrt(1/3 + 1/597)) = 1.73, 2Φ(1.73) − 1 = 0.916.
    expected = _closed_form(float(shares[:, 0].std(ddof=1)), 3, 600, grid.SHARE_POINTS)
    assert abs(power.agreement_chance(shares, j, 3, **RULE) - expected) < 0.035


def test_runs_that_never_vary_always_agree_and_two_far_modes_never_do():
    steady = np.tile([60.0, 40.0], (90, 1))
    assert power.agreement_chance(steady, np.full(90, 0.96), 3, **RULE) == 1.0
    # J is 0.7 or 1.0, 200 runs each: three draws average 0.7, 0.8, 0.9 or 1.0 and
    # the other 397 runs 0.85 ± 0.0004, so every draw is ≥ 0.05 away.
    two_modes = np.repeat([0.7, 1.0], 200)
    assert power.agreement_chance(np.tile([50.0, 50.0], (400, 1)), two_modes, 3, **RULE) == 0.0


def test_the_seeds_needed_follow_the_closed_form():
    shares, j = _normal_runs(600, j_sd=0.05, share_sd=0.0)
    # 2Φ(0.03 / (0.05 · sqrt(1/n + 1/(600 − n)))) − 1: 0.926 at n = 9, 0.960 at n = 12.
    assert power.seeds_for(shares, j, 0.95, **RULE) == 12
    assert power.seeds_for(shares, j, 0.5, **RULE) == 3
    assert power.seeds_for(shares, j, 0.999999, **RULE) is None


@settings(max_examples=40, deadline=None)
@given(runs=st.integers(0, 40), n=st.integers(0, 12), spread=st.floats(0, 0.3))
def test_the_chance_is_a_probability_or_says_it_cannot_tell(runs, n, spread):
    shares, j = _normal_runs(runs, j_sd=spread, share_sd=100 * spread)
    chance = power.agreement_chance(shares, j, n, **RULE, draws=50)
    if n < 1 or runs < n + 2:
        assert np.isnan(chance)
    else:
        assert 0.0 <= chance <= 1.0


def test_identical_flows_are_resampled_by_rank():
    # Two identical flows, the winner 70/30 chosen by a coin: by index each flow
    # averages 50 with a spread of 20 points and three runs often miss by > 5; by
    # rank every run is 70/30 and the chance is 1.
    rows = []
    for seed in range(60):
        first = 70.0 if seed % 2 else 30.0
        for flow, s in enumerate((first, 100 - first)):
            rows.append({"seed": seed, "flow": flow, "share": s, "jain_of_means": 0.86})
    table = pd.DataFrame(rows)
    by_rank = power.per_seed(table, ranked=True)
    by_index = power.per_seed(table, ranked=False)
    assert power.agreement_chance(*by_rank, 3, **RULE) == 1.0
    assert power.agreement_chance(*by_index, 3, **RULE) < 0.5


def test_the_grid_table_reports_each_cells_chance_and_the_ceiling():
    cell = "reno-cubic|100ms|1bdp|droptail"
    rng = np.random.default_rng(3)
    rows = []
    for backend, seeds in (("sim", 90), ("vm", 3)):
        for seed in range(seeds):
            first = 35 + 2 * rng.standard_normal()
            for flow, s in enumerate((first, 100 - first)):
                rows.append({"cell": cell, "backend": backend, "seed": seed, "flow": flow, "cca": "x",
                             "mean_bps": s * 1e6, "share": s, "jain_of_means": 0.9, "mean_jt": 0.9,
                             "retransmits": 1.0, "drops": 1.0})
    data = pd.DataFrame(rows)
    table = grid.compare(data[data.backend == "sim"], data[data.backend == "vm"])
    # Shares with σ = 2 points and J fixed: 5 / (2 · sqrt(1/3 + 1/87)) = 4.3 σ, a sure agreement.
    assert table.iloc[0]["agree_chance"] > 0.99
    assert "Ceiling (column \"chance\", summed): a simulator whose runs were draws of the kernel's own would agree in about 1.0 of these 1 cells" \
        in grid.markdown(table)
