"""Harm (Ware, Mukerjee, Seshan, Sherry, HotNets 2019) - worked examples."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fairlab.metrics import harm, harm_summary


def test_more_is_better_throughput():
    # solo 100 Mb/s, with the new CCA 60 Mb/s -> (100 - 60)/100 = 0.4
    assert harm([100.0], [60.0]).tolist() == [pytest.approx(0.4)]
    assert harm([100.0], [0.0]).tolist() == [1.0]  # starved: maximal harm
    assert harm([100.0], [100.0]).tolist() == [0.0]


def test_less_is_better_latency_and_loss():
    # solo 20 ms, with 50 ms -> (50 - 20)/50 = 0.6
    assert harm([20.0], [50.0], direction="less_is_better").tolist() == [pytest.approx(0.6)]
    # loss 1% -> 4%: 0.75
    assert harm([0.01], [0.04], direction="less_is_better").tolist() == [pytest.approx(0.75)]


def test_improvement_is_clipped_or_signed():
    assert harm([100.0], [120.0]).tolist() == [0.0]
    assert harm([100.0], [120.0], clip=False).tolist() == [pytest.approx(-0.2)]
    assert harm([50.0], [20.0], direction="less_is_better", clip=False).tolist() == [pytest.approx(-1.5)]


def test_zero_denominators():
    assert harm([0.0], [0.0]).tolist() == [0.0]
    assert harm([0.0], [5.0]).tolist() == [0.0]  # improved from nothing
    assert np.isnan(harm([0.0], [5.0], clip=False)[0])
    assert harm([0.0], [0.0], direction="less_is_better").tolist() == [0.0]
    with pytest.raises(ValueError):
        harm([1.0], [-1.0])
    with pytest.raises(ValueError):
        harm([1.0, 2.0], [1.0])
    with pytest.raises(ValueError):
        harm([1.0], [1.0], direction="bigger")


def test_summary():
    r = harm_summary([100.0, 100.0, 100.0, 100.0], [60.0, 120.0, 90.0, 100.0])
    assert r.per_flow == pytest.approx((0.4, 0.0, 0.1, 0.0))
    assert r.mean == pytest.approx(0.125) and r.max == pytest.approx(0.4)
    assert r.percentile == pytest.approx(np.percentile([0.4, 0.0, 0.1, 0.0], 95))
    assert r.n_improved == 1 and r.n_flows == 4 and r.n_undefined == 0
    r = harm_summary([0.0, 10.0], [5.0, 5.0], clip=False)
    assert r.per_flow[0] is None and r.n_undefined == 1 and r.mean == pytest.approx(0.5)
    json.dumps(r.to_dict(), allow_nan=False)
    r = harm_summary([np.nan], [1.0])
    assert r.mean is None and r.max is None and r.n_undefined == 1


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1e9), st.floats(0, 1e9)), min_size=1, max_size=30),
       st.sampled_from(["more_is_better", "less_is_better"]))
def test_prop_clipped_harm_in_unit_interval(pairs, direction):
    s, w = np.array(pairs).T
    h = harm(s, w, direction=direction)
    assert ((h >= 0) & (h <= 1)).all()
