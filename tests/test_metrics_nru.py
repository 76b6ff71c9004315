"""The NRU family of seed 000 (Eqs. 3-14, Table II, Tables VI/IX) - hand calculations,
published tuples and properties."""

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fairlab.metrics import (
    U_C_DEFAULT,
    classify_case,
    convergence_time,
    db_to_rsr,
    format_tuple,
    nru,
    nru_over_time,
    rsr,
    rsr_to_db,
    summarise_nru,
    weights_from_calibration,
    weights_from_expectation,
)

NAN = np.nan
L = 10 * math.log10(2.0)  # 3.0103 dB, RSR 2


# --- U_c and the dB scale ------------------------------------------------------------------


def test_uc_default_is_rsr_090():
    # seed 000 sec. III-D: U_c = -0.46 "equivalent to an RSR value of 0.90"
    assert 10 * math.log10(0.9) == pytest.approx(-0.4576, abs=5e-5)
    assert U_C_DEFAULT == -0.46 == round(10 * math.log10(0.9), 2)
    assert round(float(db_to_rsr(U_C_DEFAULT)), 2) == 0.90
    assert float(rsr_to_db(0.9)) == pytest.approx(-0.45757490560675, rel=1e-12)
    assert float(rsr_to_db(1.0)) == 0.0


# --- hand-calculated tiny matrix -----------------------------------------------------------
#   expected Rr = (10, 20)
#   flow 0: r = 10, 20, 40, --   -> R = 1, 2, 4      -> U = 0, L, 2L
#   flow 1: r = --, 10, 5, 0     -> R = .5, .25, 0   -> U = -L, -2L, floor -30
M = np.array([[10.0, NAN], [20.0, 10.0], [40.0, 5.0], [NAN, 0.0]])
RR = np.array([10.0, 20.0])


def test_u_over_time_hand():
    u, nfl = nru_over_time(M, expected=RR, return_floored=True)
    want = np.array([[0.0, NAN], [L, -L], [2 * L, -2 * L], [NAN, -30.0]])
    np.testing.assert_allclose(u, want, rtol=1e-13, atol=0)
    assert u[0, 0] == 0.0  # exact at expectation
    assert nfl.tolist() == [0, 1]


def test_flow_and_system_nru_hand():
    s = nru(M, expected=RR)
    f0, f1 = s.flows
    # flow 0: U_n = L, population sigma = L*sqrt(2/3), S_n = sqrt(2/3)
    assert f0.u == pytest.approx(L, rel=1e-13)
    assert f0.sigma == pytest.approx(L * math.sqrt(2 / 3), rel=1e-12)
    assert f0.stability == pytest.approx(math.sqrt(2 / 3), rel=1e-12)
    assert f0.n_samples == 3 and f0.n_floored == 0 and f0.side == "+"
    # flow 1: U_n = -(3L + 30)/3 = -(L + 10); deviations 10, 10 - L, L - 20
    m1 = -(L + 10)
    sd1 = math.sqrt((100 + (10 - L) ** 2 + (L - 20) ** 2) / 3)
    assert f1.u == pytest.approx(m1, rel=1e-13)
    assert f1.sigma == pytest.approx(sd1, rel=1e-12)
    assert f1.stability == pytest.approx(sd1 / abs(m1), rel=1e-12)
    assert f1.n_floored == 1 and f1.side == "-"
    # system tuple, Eqs. 6-10
    assert s.u_plus == pytest.approx(L) and s.u_minus == pytest.approx(m1)
    assert s.u_mean == pytest.approx((L + m1) / 2)
    assert s.s_system == pytest.approx((math.sqrt(2 / 3) + sd1 / abs(m1)) / 2)
    assert s.case == "B"
    assert s.n_floored == 1 and s.n_samples == 6 and s.n_flows == 2
    assert s.tuple_str() == "\u27e83.01, \u221213.01, %.2f\u27e9" % s.s_system


def test_sample_sigma_option():
    s = nru(M, expected=RR, ddof=1)
    assert s.flows[0].sigma == pytest.approx(L * 1.0)  # sqrt((L^2 + 0 + L^2)/2) = L
    assert s.ddof == 1


def test_weights_path_equals_expected_path():
    a = nru(M, expected=RR)
    b = nru(M, weights_from_calibration(RR))
    assert a.case == b.case and a.n_floored == b.n_floored
    for fa, fb in zip(a.flows, b.flows):
        assert fa.u == pytest.approx(fb.u, rel=1e-14)
    # Eq. 14 from a calibration matrix: the column means over present samples
    cal = np.array([[9.0, 20.0], [11.0, NAN], [NAN, 20.0]])
    np.testing.assert_allclose(weights_from_calibration(cal), [1 / 10, 1 / 20])
    # Eq. 13: time-varying expectation as a matrix
    w_t = weights_from_expectation(np.tile(RR, (4, 1)))
    c = nru(M, w_t)
    assert c.flows[0].u == pytest.approx(L) and c.n_floored == 1


def test_floor_rule_zero_and_negative():
    u, nfl = nru_over_time([[0.0, -5.0, 1.0]], expected=[1, 1, 1], return_floored=True)
    assert u.tolist() == [[-30.0, -30.0, 0.0]]
    assert nfl.tolist() == [1, 1, 0]
    u = nru_over_time([[0.0]], expected=[1], floor_db=-20)
    assert u.tolist() == [[-20.0]]
    # absent is never floored
    s = nru([[NAN, 1.0]], expected=[1, 1])
    assert s.n_floored == 0 and s.n_flows_empty == 1 and s.flows[0].u is None


def test_stability_undefined_near_zero():
    # U(t) = -1, +1 -> U_n = 0 -> S_n undefined, left out of S_N and counted
    u = np.array([[-1.0, -1.0], [1.0, -3.0]])
    s = summarise_nru(u)
    assert s.flows[0].u == 0.0 and s.flows[0].stability is None
    assert s.flows[1].stability == pytest.approx(0.5)  # sigma 1 / |-2|
    assert s.s_system == pytest.approx(0.5)
    assert s.n_stability_undefined == 1
    s2 = summarise_nru(np.array([[0.005], [0.005]]))
    assert s2.flows[0].stability is None and s2.s_system is None
    s3 = summarise_nru(np.array([[0.005], [0.005]]), s_eps_db=0.001)
    assert s3.flows[0].stability == 0.0


# --- Table II: every Case ---------------------------------------------------------------


@pytest.mark.parametrize(
    "u_plus,u_minus,case",
    [
        (None, -1.0, "A"),
        (0.5, -1.0, "B"),
        (0.0, -1.0, "C"),
        (0.5, None, "D"),
        (0.0, None, "E"),
        (None, None, None),
    ],
)
def test_table_ii_from_tuples(u_plus, u_minus, case):
    assert classify_case(u_plus, u_minus) == case


def test_zero_tolerance_is_a_parameter():
    assert classify_case(0.04, -1.0, zero_tol_db=0.05) == "C"
    assert classify_case(0.06, -1.0, zero_tol_db=0.05) == "B"
    assert classify_case(1e-9, None, zero_tol_db=0.0) == "D"
    with pytest.raises(ValueError):
        classify_case(-0.1, None)
    with pytest.raises(ValueError):
        classify_case(0.1, 0.0)


# seed 000 Table VI (pair-wise vs CCID2) and Table IX (14 flows), with the Cases the text
# states: "most ... Case B (to 1dp, the NRU tuple for CUBIC at RTT=25ms is Case C) ...
# at 125ms for NewReno ... Case A"; Table IX: "Case A and Case B (to 1dp, the tuple at
# 125ms is Case C)".
PUBLISHED = [
    ((0.84, -1.29), "B"), ((0.91, -1.43), "B"), ((0.83, -1.48), "B"), ((1.15, -1.81), "B"),
    ((None, -0.27), "A"), ((0.54, -0.77), "B"), ((0.50, -0.93), "B"), ((0.68, -1.21), "B"),
    ((0.06, -0.40), "C"), ((1.53, -2.58), "B"), ((2.00, -4.27), "B"), ((2.00, -4.24), "B"),
    ((1.90, -3.73), "B"), ((1.80, -3.23), "B"), ((1.75, -3.10), "B"), ((1.80, -3.31), "B"),
    ((None, -10.51), "A"), ((None, -11.70), "A"), ((None, -12.28), "A"), ((None, -12.97), "A"),
    ((0.02, -15.57), "C"), ((0.10, -16.98), "B"), ((0.10, -17.74), "B"), ((0.10, -18.47), "B"),
]


@pytest.mark.parametrize("tup,case", PUBLISHED)
def test_published_tuples_classify_as_the_seed_says(tup, case):
    assert classify_case(*tup) == case


@pytest.mark.parametrize(
    "r,case",
    [
        ([[40.0, 30.0]], "A"),  # both below expectation
        ([[60.0, 30.0]], "B"),
        ([[50.0, 30.0]], "C"),  # one exactly fair, one unfair
        ([[60.0, 50.0]], "D"),
        ([[50.0, 50.0]], "E"),
    ],
)
def test_every_case_from_a_constructed_matrix(r, case):
    s = nru(r, expected=[50.0, 50.0])
    assert s.case == case


# --- rendering ------------------------------------------------------------------------------


def test_tuple_rendering_matches_table_vi():
    assert format_tuple(0.84, -1.29, 6.66) == "\u27e80.84, \u22121.29, 6.66\u27e9"
    assert format_tuple(None, -0.27, 1.23) == "\u27e8\u2014, \u22120.27, 1.23\u27e9"
    assert format_tuple(0.0, -0.001, None) == "\u27e80.00, 0.00, \u2014\u27e9"
    s = summarise_nru(np.array([[-1.0], [-3.0]]))
    assert s.tuple_str() == "\u27e8\u2014, \u22122.00, 0.50\u27e9" and s.case == "A"
    assert s.plot_tuple() == (None, -2.0, -2.0)


def test_to_dict_is_strict_json():
    s = nru(M, expected=RR, times=[0, 1, 2, 3], t_e=0)
    d = s.to_dict()
    txt = json.dumps(d, allow_nan=False)  # raises on NaN/inf
    assert json.loads(txt)["flows"][1]["n_floored"] == 1
    empty = nru(np.full((2, 2), NAN), expected=[1, 1])
    d = empty.to_dict()
    json.dumps(d, allow_nan=False)
    assert d["u_plus"] is None and d["u_minus"] is None and d["case"] is None


# --- convergence time, Eqs. 11-12 ---------------------------------------------------------

U1 = np.array([-3.0, -1.0, -0.2, -2.0, -0.1, 0.0])[:, None]


def test_convergence_single_flow_hand():
    assert convergence_time(U1, t_e=0) == 2.0
    assert convergence_time(U1, t_e=1) == 1.0  # t_U = 2
    assert convergence_time(U1, t_e=1, k=2) == 3.0  # run 4,5
    assert convergence_time(U1, t_e=1, k=3) is None
    assert convergence_time(U1, t_e=0, u_c=0.5) is None
    t = np.array([60.0, 61, 62, 63, 64, 65])
    assert convergence_time(U1, times=t, t_e=60.5) == pytest.approx(1.5)  # t_U = 62


def test_convergence_subset_and_system_hand():
    u = nru_over_time(M, expected=RR)  # rows: [0, --], [L, -L], [2L, -2L], [--, -30]
    t = np.array([60.0, 61.0, 62.0, 63.0])
    assert convergence_time(u, times=t, t_e=60, flows=0) == 0.0
    assert convergence_time(u, times=t, t_e=60, flows=[1]) is None
    assert convergence_time(u, times=t, t_e=60) is None  # system, default U_c
    # U_c just below -L: both flows hold at t = 61 (row 0 fails: flow 1 absent)
    assert convergence_time(u, times=t, t_e=60, u_c=-3.02) == 1.0
    assert convergence_time(u, times=t, t_e=60, u_c=-3.02, k=2) is None
    assert convergence_time(u, times=t, t_e=60, u_c=-6.03, k=2) == 1.0
    s = nru(M, expected=RR, times=t, t_e=60, u_c=-3.02)
    assert s.t_convergence == 1.0 and s.t_e == 60.0


# --- properties -----------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(st.floats(1e-6, 1e12), st.integers(1, 5))
def test_prop_nru_zero_exactly_at_expectation(x, n):
    m = np.full((3, n), x)
    assert (nru_over_time(m, expected=np.full(n, x)) == 0.0).all()
    assert (nru_over_time(m, 1.0 / np.full(n, x)) == 0.0).all()  # weights path (Eq. 14)
    s = nru(m, expected=np.full(n, x))
    assert s.case == "E" and s.u_plus == 0.0 and s.u_minus is None


@settings(max_examples=150, deadline=None)
@given(
    st.integers(1, 8),
    st.integers(1, 6),
    st.data(),
)
def test_prop_tuple_sides_and_no_nan(t, n, data):
    vals = data.draw(
        st.lists(st.one_of(st.just(math.nan), st.floats(0, 1e3)), min_size=t * n, max_size=t * n)
    )
    exp = data.draw(st.lists(st.floats(1e-3, 1e3), min_size=n, max_size=n))
    m = np.asarray(vals, dtype=float).reshape(t, n)
    s = nru(m, expected=exp)
    if s.u_plus is not None:
        assert s.u_plus >= 0
    if s.u_minus is not None:
        assert s.u_minus < 0
    for f in s.flows:
        if f.u is not None:
            assert f.u >= -30.0
    json.dumps(s.to_dict(), allow_nan=False)
    assert s.n_flows_plus + s.n_flows_minus + s.n_flows_empty == n


def test_rsr_and_input_errors():
    assert rsr([[10.0, 30.0]], expected=[10.0, 20.0]).tolist() == [[1.0, 1.5]]
    assert rsr([[10.0, 30.0]], [0.1, 0.05]).tolist() == [[1.0, 1.5]]
    with pytest.raises(ValueError):
        rsr([[1.0]])
    with pytest.raises(ValueError):
        rsr([[1.0]], [1.0], expected=[1.0])
    with pytest.raises(ValueError):
        rsr([[1.0, 2.0]], expected=[1.0])
    with pytest.raises(ValueError):
        weights_from_calibration([10.0, 0.0])
