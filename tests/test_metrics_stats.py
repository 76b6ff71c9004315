"""Run statistics over repeated runs. The t quantile comes from scipy.stats; these tests
check it (and run_stats built on it) against independent truth: published t tables,
closed forms, hand calculations and properties."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fairlab.metrics import run_stats, t_ppf


@pytest.mark.parametrize(
    "p,df,want",
    # Published Student-t tables (Fisher & Yates; any statistics textbook's appendix),
    # three decimals: one-sided 95 %, two-sided 95 % (p = 0.975) and two-sided 99 %.
    [(0.95, 1, 6.314), (0.95, 2, 2.920), (0.95, 5, 2.015), (0.95, 10, 1.812), (0.95, 30, 1.697)]
    + [(0.975, 1, 12.706), (0.975, 2, 4.303), (0.975, 3, 3.182), (0.975, 4, 2.776), (0.975, 5, 2.571),
       (0.975, 10, 2.228), (0.975, 20, 2.086), (0.975, 30, 2.042), (0.975, 120, 1.980)]
    + [(0.995, 1, 63.657), (0.995, 2, 9.925), (0.995, 5, 4.032), (0.995, 10, 3.169), (0.995, 30, 2.750)],
)
def test_t_ppf_published_table(p, df, want):
    assert round(t_ppf(p, df), 3) == want
    assert round(t_ppf(1.0 - p, df), 3) == -want  # symmetric about 0


def test_t_ppf_closed_forms():
    # df = 1 is the Cauchy distribution: t = tan(pi (p - 1/2)); df = 2 has
    # t = (2p - 1) / sqrt(2 p (1 - p)) (Student's t with two degrees of freedom).
    for p in (0.6, 0.9, 0.975, 0.999):
        assert t_ppf(p, 1) == pytest.approx(math.tan(math.pi * (p - 0.5)), rel=1e-10)
        assert t_ppf(p, 2) == pytest.approx((2 * p - 1) / math.sqrt(2 * p * (1 - p)), rel=1e-10)
    assert t_ppf(0.5, 7) == 0.0
    # large df tends to the normal quantile 1.959964 (A&S Table 26.1)
    assert t_ppf(0.975, 10**7) == pytest.approx(1.959964, abs=1e-5)


@pytest.mark.parametrize("p,df", [(1.0, 3), (0.0, 3), (-0.1, 3), (0.5, 0), (0.5, -1), (0.9, math.inf), (0.9, math.nan)])
def test_t_ppf_refuses_values_outside_its_domain(p, df):
    with pytest.raises(ValueError):
        t_ppf(p, df)


def test_run_stats_by_hand():
    # (1, 2, 3): mean 2, s = 1, sem = 1/sqrt(3); t_{0.975,2} = 4.302653 (table 4.303)
    r = run_stats([1.0, 2.0, 3.0])
    assert r.n == 3 and r.mean == 2.0 and r.std == 1.0
    assert r.sem == pytest.approx(1 / math.sqrt(3), rel=1e-12)
    assert r.t_quantile == pytest.approx(4.302653, abs=1e-6)
    assert r.half_width == pytest.approx(4.302653 / math.sqrt(3), abs=1e-6)  # 2.4841
    assert (r.ci_low, r.ci_high) == (pytest.approx(2 - 2.48414, abs=1e-5), pytest.approx(2 + 2.48414, abs=1e-5))
    r90 = run_stats([1.0, 2.0, 3.0], confidence=0.90)
    assert r90.t_quantile == pytest.approx(2.920, abs=5e-4)  # table: one-sided 95 %, df 2
    assert r90.half_width < r.half_width


def test_run_stats_worked_example_in_docs():
    # docs/metrics.md: (0.91, 0.93, 0.94, 0.90, 0.92) -> mean 0.92, s = 0.01581,
    # t_{0.975,4} = 2.7764, CI [0.9004, 0.9396]
    r = run_stats([0.91, 0.93, 0.94, 0.90, 0.92])
    assert r.mean == pytest.approx(0.92, abs=1e-12)
    assert r.std == pytest.approx(math.sqrt(0.001 / 4), rel=1e-9)  # squared deviations sum to 0.001
    assert r.t_quantile == pytest.approx(2.7764, abs=1e-4)
    assert r.ci_low == pytest.approx(0.9004, abs=1e-4) and r.ci_high == pytest.approx(0.9396, abs=1e-4)


def test_run_stats_small_and_missing():
    r = run_stats([])
    assert r.n == 0 and r.mean is None and r.ci_low is None
    r = run_stats([4.2])
    assert r.mean == 4.2 and r.std is None and r.ci_high is None
    r = run_stats([1.0, None, float("nan"), 3.0])
    assert r.n == 2 and r.n_missing == 2 and r.mean == 2.0
    with pytest.raises(ValueError):
        run_stats([1.0, float("inf")])
    with pytest.raises(ValueError):
        run_stats([1.0, 2.0], confidence=1.0)
    d = run_stats([1.0]).to_dict()
    assert d["std"] is None
    same = run_stats([0.7, 0.7, 0.7])
    assert same.std == 0.0 and same.ci_low == same.ci_high == 0.7


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


def test_t_ppf_is_scipy_stats_t_ppf_to_the_last_bit():
    # t_ppf calls scipy.special.stdtrit, the function scipy.stats.t.ppf evaluates, to
    # spare every campaign the import of scipy.stats; should a scipy release compute
    # the quantile another way, this says so.
    from scipy import stats

    for df in [*range(1, 200), 0.5, 2.5, 1e6]:
        for p in (0.005, 0.025, 0.05, 0.5, 0.9, 0.95, 0.975, 0.995):
            assert t_ppf(p, df) == float(stats.t.ppf(p, df)), (p, df)
