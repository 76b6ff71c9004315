"""Run statistics and the hand-written Student-t quantile (scipy is a test-only truth)."""

import math

import numpy as np
import pytest
import scipy.special
import scipy.stats
from hypothesis import given, settings
from hypothesis import strategies as st

from fairlab.metrics import betainc_reg, run_stats, t_cdf, t_ppf

P_GRID = [0.55, 0.6, 0.75, 0.8, 0.9, 0.95, 0.975, 0.99, 0.995, 0.999, 0.9995, 1 - 1e-6]


def test_t_ppf_matches_scipy_df_1_to_200():
    worst = 0.0
    for df in range(1, 201):
        for p in P_GRID:
            ref = scipy.stats.t.ppf(p, df)
            for pp, sign in ((p, 1.0), (1.0 - p, -1.0)):
                got = t_ppf(pp, df)
                worst = max(worst, abs(got - sign * ref) / abs(ref))
    assert worst < 1e-6  # the requirement; in practice < 1e-12
    assert worst < 1e-11


@pytest.mark.parametrize(
    "df,want",
    # classical two-sided 95% table values (Student / Fisher tables)
    [(1, 12.706), (2, 4.303), (3, 3.182), (4, 2.776), (5, 2.571), (10, 2.228), (20, 2.086), (30, 2.042), (120, 1.980)],
)
def test_t_ppf_textbook_table(df, want):
    assert round(t_ppf(0.975, df), 3) == want


def test_t_ppf_closed_forms_and_centre():
    for p in (0.6, 0.9, 0.975, 1 - 1e-12):
        assert t_ppf(p, 1) == pytest.approx(1.0 / math.tan(math.pi * (1.0 - p)), rel=1e-12)
        assert t_ppf(p, 2) == pytest.approx((2 * p - 1) / math.sqrt(2 * p * (1 - p)), rel=1e-12)
    # near the median t ~ (p - 1/2) / f(0), f(0) = G((v+1)/2) / (sqrt(v pi) G(v/2)):
    # independent of any library (scipy itself is off by 4e-4 at df=4 here)
    for df in (3, 4, 10, 57):
        f0 = math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(df * math.pi)
        p = 0.5 + 1e-7
        assert t_ppf(p, df) == pytest.approx((p - 0.5) / f0, rel=1e-9)
    assert t_ppf(0.5, 7) == 0.0
    with pytest.raises(ValueError):
        t_ppf(1.0, 3)
    with pytest.raises(ValueError):
        t_ppf(0.5, 0)


def test_t_cdf_and_betainc_match_scipy():
    for df in (1, 2, 3.5, 10, 200):
        for t in (-40.0, -2.0, -0.1, 0.0, 0.3, 1.96, 8.0):
            assert t_cdf(t, df) == pytest.approx(scipy.stats.t.cdf(t, df), rel=1e-12, abs=1e-300)
    for a, b, x in [(0.5, 0.5, 0.3), (2, 3, 0.9), (100, 0.5, 0.98), (0.5, 100, 0.001), (5, 5, 0.5)]:
        assert betainc_reg(a, b, x) == pytest.approx(scipy.special.betainc(a, b, x), rel=1e-12)


def test_run_stats_hand_and_scipy():
    r = run_stats([1.0, 2.0, 3.0])
    assert r.n == 3 and r.mean == 2.0 and r.std == 1.0
    lo, hi = scipy.stats.t.interval(0.95, 2, loc=2.0, scale=1.0 / math.sqrt(3))
    assert r.ci_low == pytest.approx(lo, rel=1e-12) and r.ci_high == pytest.approx(hi, rel=1e-12)
    assert r.t_quantile == pytest.approx(4.302652729749464, rel=1e-12)
    r90 = run_stats([1.0, 2.0, 3.0], confidence=0.90)
    assert r90.half_width < r.half_width


def test_run_stats_small_and_missing():
    r = run_stats([])
    assert r.n == 0 and r.mean is None and r.ci_low is None
    r = run_stats([4.2])
    assert r.mean == 4.2 and r.std is None and r.ci_high is None
    r = run_stats([1.0, None, float("nan"), 3.0])
    assert r.n == 2 and r.n_missing == 2 and r.mean == 2.0
    with pytest.raises(ValueError):
        run_stats([1.0, float("inf")])
    d = run_stats([1.0]).to_dict()
    assert d["std"] is None


samples = st.lists(st.floats(-1e6, 1e6), min_size=2, max_size=60)


@settings(max_examples=150, deadline=None)
@given(samples)
def test_prop_ci_contains_mean(x):
    r = run_stats(x)
    assert r.ci_low <= r.mean <= r.ci_high


@settings(max_examples=100, deadline=None)
@given(samples)
def test_prop_ci_shrinks_with_n(x):
    # duplicating the runs keeps the mean, lowers s and the t quantile, raises n
    a = run_stats(x)
    b = run_stats(list(x) * 2)
    assert b.mean == pytest.approx(a.mean, rel=1e-9, abs=1e-9)
    scale = 1e-9 * max(1.0, abs(a.mean))
    assert b.half_width <= a.half_width * (1 + 1e-12) + scale
    if a.std > scale:
        assert b.half_width < a.half_width


def test_ci_factor_strictly_decreasing_in_n():
    f = [t_ppf(0.975, n - 1) / math.sqrt(n) for n in range(2, 400)]
    assert all(b < a for a, b in zip(f, f[1:]))
    assert np.isfinite(f).all()
