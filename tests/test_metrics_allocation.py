"""Max-min water-filling, proportional fairness, min/max ratio, CV - textbook examples
and properties."""

import math

import numpy as np
import pytest
import scipy.optimize
from hypothesis import given, settings
from hypothesis import strategies as st

from fairlab.metrics import (
    coefficient_of_variation,
    max_min_fair,
    min_max_ratio,
    proportional_fair_allocation,
    proportional_fair_utility,
)


def test_textbook_maxmin():
    # capacity 10, demands 2, 2.6, 4, 5 -> 2, 2.6, 2.7, 2.7
    np.testing.assert_allclose(max_min_fair(10, [2, 2.6, 4, 5]), [2, 2.6, 2.7, 2.7], rtol=1e-14)
    # order does not matter
    np.testing.assert_allclose(max_min_fair(10, [5, 2, 4, 2.6]), [2.7, 2, 2.7, 2.6], rtol=1e-14)


def test_textbook_weighted_maxmin():
    # demands 4, 2, 10, 4, weights 2.5, 4, 0.5, 1, capacity 16 -> 4, 2, 6, 4
    np.testing.assert_allclose(max_min_fair(16, [4, 2, 10, 4], [2.5, 4, 0.5, 1]), [4, 2, 6, 4])
    # greedy flows, weights 1, 2, 2, capacity 10 -> 2, 4, 4
    np.testing.assert_allclose(max_min_fair(10, weights=[1, 2, 2]), [2, 4, 4])


def test_maxmin_edge_cases():
    np.testing.assert_allclose(max_min_fair(9, n_flows=3), [3, 3, 3])
    np.testing.assert_allclose(max_min_fair(10, [1, 2, 3]), [1, 2, 3])  # all demands met
    np.testing.assert_allclose(max_min_fair(0, [1, 2]), [0, 0])
    np.testing.assert_allclose(max_min_fair(6, [0, np.inf, np.inf]), [0, 3, 3])
    assert max_min_fair(5, []).size == 0
    with pytest.raises(ValueError):
        max_min_fair(-1, [1])
    with pytest.raises(ValueError):
        max_min_fair(1, [1, 2], [1, 0])
    with pytest.raises(ValueError):
        max_min_fair(1)


def test_proportional_fair_equals_maxmin_on_one_link_and_is_optimal():
    c, d, w = 10.0, np.array([2.0, 2.6, 4.0, 5.0]), np.array([1.0, 2.0, 1.0, 3.0])
    x = proportional_fair_allocation(c, d, w)
    np.testing.assert_allclose(x, max_min_fair(c, d, w))
    # independent optimum by SLSQP
    res = scipy.optimize.minimize(
        lambda v: -np.dot(w, np.log(v)),
        x0=np.full(4, 1.0),
        bounds=[(1e-9, di) for di in d],
        constraints=[{"type": "ineq", "fun": lambda v: c - v.sum()}],
        method="SLSQP",
        options={"ftol": 1e-14, "maxiter": 500},
    )
    np.testing.assert_allclose(x, res.x, rtol=1e-5)
    assert proportional_fair_utility(x, w) >= proportional_fair_utility(res.x, w) - 1e-9


def test_utility_min_max_cv():
    assert proportional_fair_utility([1.0, math.e]) == pytest.approx(1.0)
    assert proportional_fair_utility([1.0, 0.0]) == -math.inf
    assert proportional_fair_utility([2.0, np.nan]) == pytest.approx(math.log(2))
    assert min_max_ratio([5, 3, 1]) == pytest.approx(0.2)
    assert min_max_ratio([0, 0]) == 1.0
    assert min_max_ratio([4, np.nan, 2]) == 0.5
    assert coefficient_of_variation([5, 3, 1]) == pytest.approx(math.sqrt(8 / 3) / 3)
    assert coefficient_of_variation([5, 3, 1], ddof=1) == pytest.approx(2 / 3)
    assert coefficient_of_variation([0, 0]) == 0.0
    with pytest.raises(ValueError):
        min_max_ratio([])


cap = st.floats(0.0, 1e6)
dem = st.lists(st.one_of(st.floats(0.0, 1e6), st.just(math.inf)), min_size=1, max_size=25)


@settings(max_examples=200, deadline=None)
@given(cap, dem, st.data())
def test_prop_maxmin_feasible_pareto_and_maxmin(c, d, data):
    d = np.asarray(d)
    w = np.asarray(data.draw(st.lists(st.floats(0.01, 100), min_size=d.size, max_size=d.size)))
    x = max_min_fair(c, d, w)
    tol = 1e-9 * max(1.0, c)
    assert (x >= 0).all()
    assert (x <= d).all()  # never exceeds a demand
    assert x.sum() <= c + tol  # never exceeds capacity
    unmet = x < d * (1 - 1e-12)
    if unmet.any():
        # Pareto-efficient: no spare capacity while a demand is unmet
        assert x.sum() == pytest.approx(c, rel=1e-9, abs=1e-9)
        # max-min: an unmet flow has the highest normalised share
        level = (x / w)[unmet]
        assert np.allclose(level, level.max(), rtol=1e-9, atol=1e-12)
        assert ((x / w) <= level.max() * (1 + 1e-9) + 1e-12).all()
    else:
        np.testing.assert_allclose(x, d)
