"""Jain's fairness index (seed 000 Eqs. 1-2; seed 003 sec. 1.2) - independent truths only."""

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from fairlab.metrics import (
    coefficient_of_variation,
    flow_means,
    jain_index,
    jain_of_means,
    jain_over_time,
    jain_summary,
    mean_jain_over_time,
    normalised_jain,
)

NAN = np.nan


# --- published values -----------------------------------------------------------------


def test_seed003_worked_example_5_3_1():
    # seed 003 sec. 1.2: 5, 3, 1 Gbps -> 0.77; exactly 81/105
    j = jain_index([5e9, 3e9, 1e9])
    assert round(j, 2) == 0.77
    assert j == pytest.approx(81 / 105, rel=1e-14)
    assert jain_index([5, 3, 1]) == pytest.approx(81 / 105, rel=1e-14)  # scale-free


def test_seed003_equal_allocation_is_one():
    assert jain_index([3e9, 3e9, 3e9]) == 1.0


def test_seed000_figure1_endpoints():
    # Fig. 1: flow 2 = 100, flow 1 from 1 to 10,000; "JFI has the range [0.51, 1.00]".
    # Exact endpoints: (1+100)^2 / (2 (1 + 100^2)) = 10201/20002 = 0.50999...
    assert jain_index([1, 100]) == pytest.approx(10201 / 20002, rel=1e-14)
    assert jain_index([10_000, 100]) == pytest.approx(10201 / 20002, rel=1e-14)
    assert jain_index([100, 100]) == 1.0
    x = np.logspace(0, 4, 401)
    js = [jain_index([v, 100]) for v in x]
    assert round(min(js), 2) == 0.51 and round(max(js), 2) == 1.00


# --- edge cases --------------------------------------------------------------------------


def test_all_zero_vector_is_one_by_convention_and_configurable():
    assert jain_index([0, 0, 0]) == 1.0
    assert jain_index([0.0, 0.0], all_zero=0.0) == 0.0


def test_single_flow_and_one_starved_flow():
    assert jain_index([7.0]) == 1.0
    assert jain_index([1.0, 0.0]) == pytest.approx(0.5)  # minimum 1/N
    assert jain_index([1.0, 0.0, 0.0, 0.0]) == pytest.approx(0.25)


def test_vector_nan_is_absent_not_zero():
    assert jain_index([5, NAN, 5]) == 1.0
    with pytest.raises(ValueError):
        jain_index([NAN, NAN])
    with pytest.raises(ValueError):
        jain_index([])
    with pytest.raises(ValueError):
        jain_index([1, -1])
    with pytest.raises(ValueError):
        jain_index([1, np.inf])


def test_huge_and_tiny_values_do_not_overflow():
    assert jain_index([1e200, 1e200]) == 1.0
    assert jain_index([5e300, 3e300, 1e300]) == pytest.approx(81 / 105)
    m = np.array([[1e200, 1e200], [1e-200, 3e-200], [5e300, 1e300]])
    js = jain_over_time(m).values
    assert js == pytest.approx([1.0, 0.8, 36 / 52])


def test_normalised_jain():
    assert normalised_jain([2, 4], [1, 2]) == 1.0
    assert normalised_jain([5, 3, 1], [1, 1, 1]) == pytest.approx(81 / 105)
    with pytest.raises(ValueError):
        normalised_jain([1, 2], [1, 0])


# --- J(t) over a time x flow matrix -------------------------------------------------------

M = np.array(
    [
        [10.0, NAN],  # one flow present -> J = 1 (kept unless min_flows=2)
        [20.0, 10.0],  # 900 / (2*500) = 0.9
        [40.0, 5.0],  # 2025 / (2*1625)
        [NAN, 0.0],  # one flow present, all-zero
        [NAN, NAN],  # nobody present -> always omitted
    ]
)


def test_jain_over_time_hand_calculation():
    s = jain_over_time(M)
    assert s.rows.tolist() == [0, 1, 2, 3]
    assert s.values == pytest.approx([1.0, 0.9, 2025 / 3250, 1.0])
    assert s.n_present.tolist() == [1, 2, 2, 1]
    assert s.n_rows == 5 and s.n_rows_omitted == 1 and s.n_all_zero_rows == 1


def test_jain_over_time_min_flows_and_all_zero_policy():
    s = jain_over_time(M, min_flows=2)
    assert s.rows.tolist() == [1, 2] and s.n_rows_omitted == 3
    s = jain_over_time(M, all_zero="omit")
    assert s.rows.tolist() == [0, 1, 2]
    assert not np.isnan(s.values).any()


def test_mean_jt_and_of_means_differ_and_say_which():
    # flows take turns: every instant is unfair, the long run is perfectly fair
    turns = np.array([[1.0, 3.0], [3.0, 1.0]])
    a = mean_jain_over_time(turns)
    b = jain_of_means(turns)
    assert a.kind == "mean_jt" and b.kind == "of_means"
    assert a.value == pytest.approx(0.8) and b.value == 1.0
    r = jain_summary(turns)
    assert r.mean_jt == pytest.approx(0.8) and r.of_means == 1.0
    assert r.n_samples == 2 and r.n_flows == 2


def test_jain_of_means_uses_present_samples_only():
    # absent is not zero: flow 1's mean is 10, not 5
    m = np.array([[10.0, NAN], [10.0, 10.0]])
    assert flow_means(m).tolist() == [10.0, 10.0]
    assert jain_of_means(m).value == 1.0
    means = flow_means(M)
    assert means == pytest.approx([70 / 3, 5.0])
    assert jain_of_means(M).value == pytest.approx((70 / 3 + 5) ** 2 / (2 * ((70 / 3) ** 2 + 25)))


def test_empty_matrix_summaries_are_none_not_nan():
    m = np.full((3, 2), NAN)
    assert mean_jain_over_time(m).value is None
    assert jain_of_means(m).value is None
    assert jain_summary(m).to_dict()["mean_jt"] is None


def test_normalised_over_time():
    m = np.array([[2.0, 4.0], [1.0, 4.0]])
    s = jain_over_time(m, optimal=[1.0, 2.0])
    assert s.values == pytest.approx([1.0, 0.9])


# --- properties ---------------------------------------------------------------------------

alloc = st.lists(st.floats(0.0, 1e12, allow_nan=False), min_size=1, max_size=40)


@settings(max_examples=200, deadline=None)
@given(alloc)
def test_prop_bounds(x):
    j = jain_index(x)
    assert 1.0 / len(x) <= j <= 1.0


@settings(max_examples=100, deadline=None)
@given(alloc, st.floats(1e-6, 1e6))
def test_prop_scale_invariance(x, c):
    assume(max(x) > 1e-100)
    assert jain_index(np.asarray(x) * c) == pytest.approx(jain_index(x), rel=1e-12)


@settings(max_examples=100, deadline=None)
@given(alloc, st.randoms(use_true_random=False))
def test_prop_permutation_invariance(x, rnd):
    y = list(x)
    rnd.shuffle(y)
    assert jain_index(y) == pytest.approx(jain_index(x), rel=1e-13)


@settings(max_examples=100, deadline=None)
@given(st.floats(0.0, 1e12), st.integers(1, 50))
def test_prop_all_equal_gives_one(v, n):
    assert jain_index([v] * n) == 1.0


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 1000), min_size=2, max_size=30))
def test_prop_one_only_if_all_equal(x):
    j = jain_index(x)
    if len(set(x)) > 1:
        assert j < 1.0
    else:
        assert j == 1.0


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(1e-3, 1e9), min_size=1, max_size=30))
def test_prop_jain_equals_one_over_one_plus_cv_squared(x):
    # Jain, Chiu & Hawe 1984: J = 1 / (1 + CV^2), population CV
    cv = coefficient_of_variation(x)
    assert jain_index(x) == pytest.approx(1.0 / (1.0 + cv * cv), rel=1e-9)


@settings(max_examples=50, deadline=None)
@given(
    st.integers(1, 12),
    st.integers(1, 6),
    st.data(),
)
def test_prop_matrix_rows_match_vector_function(t, n, data):
    vals = data.draw(
        st.lists(st.one_of(st.just(math.nan), st.floats(0, 1e6)), min_size=t * n, max_size=t * n)
    )
    m = np.asarray(vals, dtype=float).reshape(t, n)
    s = jain_over_time(m)
    for row, v in zip(s.rows, s.values):
        assert v == pytest.approx(jain_index(m[row]), rel=1e-12)
    assert s.n_rows_omitted == int(np.isnan(m).all(axis=1).sum())
