"""The Trace data model: validation, windowing, alignment and lossless round-trips."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fairlab.trace import Trace, TraceError, concat


def _trace(samples, flows=None, **meta):
    flows = flows if flows is not None else pd.DataFrame({"flow": sorted({s[1] for s in samples}), "label": [f"f{i}" for i in sorted({s[1] for s in samples})]})
    df = pd.DataFrame(samples, columns=["run", "flow", "t", "throughput_bps"])
    return Trace.from_frames(df, flows, meta={"interval_s": 1.0, **meta})


def test_window_keeps_samples_whose_interval_lies_inside():
    # t is the END of a 1-s interval: the window 60..62 holds the samples ending at 61 and 62.
    tr = _trace([(0, 0, t, 1e6) for t in range(58, 65)])
    assert tr.window(60, 62).samples["t"].tolist() == [61.0, 62.0]


def test_window_refuses_an_empty_range():
    with pytest.raises(TraceError, match="must be after"):
        _trace([(0, 0, 1.0, 1.0)]).window(5, 5)


def test_matrix_marks_a_flow_not_yet_started_as_absent_not_zero():
    # Flow 1 starts at 2 s (seed 001 starts flow 2 later); before that it is absent.
    tr = _trace([(0, 0, 1.0, 10.0), (0, 0, 2.0, 10.0), (0, 0, 3.0, 10.0), (0, 1, 3.0, 0.0)])
    m = tr.matrix()
    assert np.isnan(m.loc[1.0, 1]) and np.isnan(m.loc[2.0, 1])
    assert m.loc[3.0, 1] == 0.0  # running and delivering nothing is a real zero


def test_matrix_aligns_offset_samples_to_the_nearest_grid_point():
    # A client started 0.3 s late reports at 1.3, 2.3 s: nearest grid points 1 and 2.
    tr = _trace([(0, 0, 1.0, 5.0), (0, 0, 2.0, 5.0), (0, 1, 1.3, 7.0), (0, 1, 2.3, 9.0)])
    m = tr.matrix()
    assert m.index.tolist() == [1.0, 2.0]
    assert m[1].tolist() == [7.0, 9.0]


def test_flow_means_are_plain_means_of_the_samples_held():
    tr = _trace([(0, 0, t, float(t)) for t in range(1, 11)])
    assert tr.flow_means()[0] == pytest.approx(5.5)
    assert tr.window(5, 10).flow_means()[0] == pytest.approx(8.0)  # samples 6..10


def test_samples_for_unknown_flows_are_refused():
    with pytest.raises(TraceError, match="not in the flow table"):
        _trace([(0, 3, 1.0, 1.0)], flows=pd.DataFrame({"flow": [0], "label": ["a"]}))


def test_negative_throughput_is_refused():
    with pytest.raises(TraceError, match="non-negative"):
        _trace([(0, 0, 1.0, -1.0)])


def test_matrix_needs_a_run_when_several_are_held():
    a = _trace([(0, 0, 1.0, 1.0)])
    both = concat([a, a])
    assert both.runs == [0, 1]
    with pytest.raises(TraceError, match="pass run="):
        both.matrix()


def test_parquet_refuses_a_foreign_parquet_file(tmp_path):
    p = tmp_path / "other.parquet"
    pd.DataFrame({"x": [1, 2]}).to_parquet(p)
    with pytest.raises(TraceError, match="not a fairlab trace"):
        Trace.from_parquet(p)


def test_parquet_refuses_a_non_parquet_file(tmp_path):
    p = tmp_path / "x.parquet"
    p.write_text("hello")
    with pytest.raises(TraceError, match="not a readable Parquet file"):
        Trace.from_parquet(p)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 2), st.integers(0, 3), st.floats(0.001, 1e4, allow_nan=False), st.floats(0, 1e11, allow_nan=False)),
        min_size=1,
        max_size=40,
    ),
    st.booleans(),
)
def test_parquet_and_pandas_round_trips_are_lossless(tmp_path_factory, rows, with_bottleneck):
    flows = pd.DataFrame(
        {"flow": [0, 1, 2, 3], "label": ["a", "b", "c", "d"], "cca": ["cubic", None, "reno", "bbr"], "rtt_s": [0.1, np.nan, 0.025, 0.2], "start_s": [0.0, 30.0, 0.0, 1.5], "source": ["x.json"] * 4}
    )
    samples = pd.DataFrame(rows, columns=["run", "flow", "t", "throughput_bps"])
    samples["retransmits"] = pd.array([i if i % 3 else None for i in range(len(rows))], dtype="Int64")
    samples["srtt_s"] = [np.nan if i % 2 else 0.1 * i for i in range(len(rows))]
    bott = pd.DataFrame({"run": [0, 0], "t": [1.0, 2.0], "queue_bytes": [1500.0, 0.0], "queue_pkts": [1.0, 0.0], "drops": [3, 0], "marks": [0, 1]}) if with_bottleneck else None
    tr = Trace.from_frames(samples, flows, bott, meta={"tool": "iperf3", "interval_s": 1.0, "nested": {"a": [1, 2]}})
    path = tmp_path_factory.mktemp("pq") / "t.parquet"
    back = Trace.from_parquet(tr.to_parquet(path))
    pd.testing.assert_frame_equal(back.samples, tr.samples)
    pd.testing.assert_frame_equal(back.flows, tr.flows)
    if with_bottleneck:
        pd.testing.assert_frame_equal(back.bottleneck, tr.bottleneck)
    else:
        assert back.bottleneck is None
    assert back.meta == tr.meta
    # pandas view: one row per sample, flow facts joined on
    joined = tr.to_pandas()
    assert len(joined) == len(tr.samples)
    assert (joined["label"] == joined["flow"].map(tr.labels)).all()


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(st.tuples(st.floats(0, 40, allow_nan=False), st.integers(0, 3),
                                 st.one_of(st.none(), st.floats(0, 1e9, allow_nan=False))), min_size=1, max_size=60))
def test_matrix_is_the_mean_of_each_grid_cell(rows):
    """Each cell (nearest grid point k = rint(t/Δ), flow) holds the mean of the non-missing
    values landing there, NaN where none do — computed here with a plain dict."""
    s = pd.DataFrame({"run": 0, "flow": [r[1] for r in rows], "t": [r[0] for r in rows],
                      "throughput_bps": 1.0, "srtt_s": [np.nan if r[2] is None else r[2] for r in rows]})
    tr = Trace.from_frames(s, pd.DataFrame({"flow": [0, 1, 2, 3, 4], "label": list("abcde")}), meta={"interval_s": 0.5})
    cells: dict[tuple[int, int], list[float]] = {}
    ks = set()
    for t, f, v in rows:
        k = int(np.rint(t / 0.5))
        ks.add(k)
        if v is not None:
            cells.setdefault((k, f), []).append(v)
    m = tr.matrix(column="srtt_s")
    assert m.index.tolist() == [k * 0.5 for k in sorted(ks)]
    assert m.columns.tolist() == [0, 1, 2, 3, 4]
    for k in sorted(ks):
        for f in range(5):
            want = cells.get((k, f))
            got = m.loc[k * 0.5, f]
            if want is None:
                assert np.isnan(got)
            else:
                assert got == pytest.approx(sum(want) / len(want), rel=1e-12)
