"""Plain CSV / Parquet tables: property tests (round trip, garbage refused) and
the unit rules (explicit unit or refusal)."""

from __future__ import annotations

import io
import math

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fairlab.ingest import IngestError, load

FACTOR = {"bps": 1.0, "kbps": 1e3, "Mbps": 1e6, "Gbps": 1e9, "Bps": 8.0, "MBps": 8e6, "GBps": 8e9}

flow_names = st.one_of(st.integers(0, 50).map(str), st.text("abcxyz_-", min_size=1, max_size=6))


@st.composite
def tables(draw):
    """A random time x flow table: distinct flows, each with distinct times."""
    flows = draw(st.lists(flow_names, min_size=1, max_size=4, unique=True))
    rows = []
    for f in flows:
        times = draw(st.lists(st.floats(0, 1e5, allow_nan=False).map(lambda x: round(x, 3)),
                              min_size=1, max_size=8, unique=True))
        for t in times:
            rows.append((t, f, draw(st.floats(0, 1e3, allow_nan=False, allow_infinity=False))))
    rows = draw(st.permutations(rows))
    return rows


def write_csv(rows, header_unit: str | None) -> bytes:
    col = f"throughput_{header_unit}" if header_unit else "throughput"
    out = io.StringIO()
    out.write(f"time,flow,{col}\n")
    for t, f, v in rows:
        out.write(f"{t!r},{f},{v!r}\n")
    return out.getvalue().encode()


def check_round_trip(tr, rows, unit):
    """Per flow, the times in order differ from the written ones by ONE constant
    (the shift that puts the earliest flow start at 0) and the throughputs equal the
    written values times the unit's factor."""
    got = tr.to_pandas()
    assert len(got) == len(rows)
    assert sorted(tr.flows["label"]) == sorted({f for _, f, _ in rows})
    shifts = []
    for flow in {f for _, f, _ in rows}:
        want = np.array(sorted((t, v) for t, f, v in rows if f == flow))
        mine = got[got["label"] == flow].sort_values("t")
        assert len(mine) == len(want)
        shifts.extend(np.round(want[:, 0] - mine["t"].to_numpy(), 6).tolist())
        assert np.allclose(mine["throughput_bps"].to_numpy(), want[:, 1] * FACTOR[unit], rtol=1e-12, atol=0)
    shifts = set(shifts)
    assert len(shifts) == 1
    assert tr.flows["start_s"].min() == 0.0


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=tables(), unit=st.sampled_from(sorted(FACTOR)), in_header=st.booleans())
def test_csv_round_trip_after_unit_conversion(rows, unit, in_header):
    data = write_csv(rows, unit if in_header else None)
    f = io.BytesIO(data)
    f.name = "table.csv"
    tr = load(f, unit=None if in_header else unit, labels=["x"])
    # one file: labels become x#<flow value> when it holds several flows
    tr.flows["label"] = tr.flows["label"].str.replace("x#", "", regex=False)
    if len(tr.flows) == 1:
        tr.flows["label"] = [rows[0][1]]
    check_round_trip(tr, rows, unit)


@settings(max_examples=15, deadline=None)
@given(rows=tables(), unit=st.sampled_from(sorted(FACTOR)))
def test_parquet_round_trip(rows, unit, tmp_path_factory):
    p = tmp_path_factory.mktemp("pq") / "table.parquet"
    pq.write_table(pa.table({"time": [r[0] for r in rows], "flow": [r[1] for r in rows],
                             f"throughput_{unit}": [r[2] for r in rows]}), p)
    tr = load(p, labels=["x"])
    tr.flows["label"] = tr.flows["label"].str.replace("x#", "", regex=False)
    if len(tr.flows) == 1:
        tr.flows["label"] = [rows[0][1]]
    check_round_trip(tr, rows, unit)


GARBAGE = st.sampled_from(["abc", "1.2.3", "--", "nan", "inf", "-5", "12Mbps", "", "0x1G", "1_000", "Infinity"])


@settings(max_examples=60, deadline=None)
@given(rows=tables(), junk=GARBAGE, which=st.sampled_from(["time", "throughput"]), data=st.data())
def test_garbage_rows_are_refused_naming_the_line(rows, junk, which, data):
    if which == "time" and junk == "-5":
        junk = "abc"  # a negative time is a legal time
    k = data.draw(st.integers(0, len(rows) - 1))
    bad = list(rows)
    t, f, v = bad[k]
    bad[k] = (junk, f, v) if which == "time" else (t, f, junk)
    text = "time,flow,throughput_Mbps\n" + "".join(
        f"{t if isinstance(t, str) else repr(t)},{f},{v if isinstance(v, str) else repr(v)}\n" for t, f, v in bad)
    src = io.BytesIO(text.encode())
    src.name = "garbage.csv"
    with pytest.raises(IngestError) as ei:
        load(src)
    msg = str(ei.value)
    assert msg.startswith("garbage.csv: line ") and "\n" not in msg
    assert f"line {k + 2}" in msg  # header is line 1


def csv_file(text: str, name: str = "t.csv") -> io.BytesIO:
    f = io.BytesIO(text.encode())
    f.name = name
    return f


def test_unit_must_be_stated_and_agree():
    body = "time,flow,throughput\n1,a,5\n2,a,6\n"
    with pytest.raises(IngestError, match=r"allowed: bps, kbps, Mbps, Gbps"):
        load(csv_file(body))
    assert load(csv_file(body), unit="kbps").samples["throughput_bps"].tolist() == [5e3, 6e3]
    with pytest.raises(IngestError, match="mismatched units"):
        load(csv_file("time,flow,throughput_Mbps\n1,a,5\n"), unit="Gbps")
    with pytest.raises(IngestError, match="allowed: bps"):
        load(csv_file(body), unit="MB/s")
    with pytest.raises(IngestError, match="unit suffix"):
        load(csv_file("time,flow,throughput_mibps\n1,a,5\n"))
    with pytest.raises(IngestError, match="2 throughput columns"):
        load(csv_file("time,flow,throughput_Mbps,throughput_bps\n1,a,5,5000000\n"))


def test_ambiguous_or_broken_tables_are_refused():
    with pytest.raises(IngestError, match="repeats flow 'a' at time 1"):
        load(csv_file("time,flow,throughput_bps\n1,a,5\n1,a,6\n"))
    with pytest.raises(IngestError, match="negative"):
        load(csv_file("time,flow,throughput_bps\n1,a,-5\n"))
    with pytest.raises(IngestError, match="header but no data rows"):
        load(csv_file("time,flow,throughput_bps\n"))
    with pytest.raises(IngestError, match="line 3: has 2 fields"):
        load(csv_file("time,flow,throughput_bps\n1,a,5\n2,a\n"))
    with pytest.raises(IngestError, match="not a format"):
        load(csv_file("when,who,how_much\n1,a,5\n"))
    with pytest.raises(IngestError, match="no 'flow' column"):
        load(csv_file("time,throughput_bps\n1,5\n"), fmt="csv")


def test_optional_columns_runs_and_ignored_columns():
    tr = load(csv_file("time,flow,throughput_Mbps,srtt_s,retransmits,run,comment\n"
                       "1,a,5,0.02,0,0,x\n2,a,6,0.021,3,0,y\n1,a,7,,1,1,z\n"))
    s = tr.samples
    assert s["run"].tolist() == [0, 0, 1]
    assert s["srtt_s"].iloc[:2].tolist() == [0.02, 0.021] and math.isnan(s["srtt_s"].iloc[2])
    assert s["retransmits"].tolist() == [0, 3, 1]
    assert any("ignored column(s) ['comment']" in n for n in tr.meta["notes"])


def test_mixing_a_table_with_iperf_files_is_refused(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("time,flow,throughput_bps\n1,a,5\n")
    from pathlib import Path
    rec = Path(__file__).resolve().parent.parent / "examples" / "recordings" / "two_clients_reno.json"
    with pytest.raises(IngestError, match="cannot be lined up"):
        load([p, rec], fmt="auto")


def test_flow_labels_and_time_from_the_earliest_start():
    text = "t,flow,throughput_Gbps\n11,cubic,1\n12,cubic,1.5\n13,reno,0.5\n"
    tr = load(csv_file(text, "lab.csv"))
    # On its own a table keeps its flows' names; a label asked for prefixes them.
    assert tr.flows["label"].tolist() == ["cubic", "reno"]
    assert load(csv_file(text, "lab.csv"), labels=["lab"]).flows["label"].tolist() == ["lab#cubic", "lab#reno"]
    assert load(csv_file("t,flow,throughput_Gbps\n1,alice,1\n2,alice,2\n", "one.csv")).flows["label"].tolist() == ["alice"]
    # 1-s spacing: cubic starts at 10, reno at 12; t is from the earliest start.
    assert tr.flows["start_s"].tolist() == [0.0, 2.0]
    assert tr.samples["t"].tolist() == [1.0, 2.0, 3.0]
    assert np.allclose(tr.samples["throughput_bps"], [1e9, 1.5e9, 0.5e9])


def test_run_column_must_hold_whole_numbers_not_nan():
    """A 'nan' run used to be cast to an arbitrary integer run number (found by the fuzz suite)."""
    with pytest.raises(IngestError, match="line 3, field 'run': must be a whole number"):
        load(csv_file("time,flow,throughput_bps,run\n1,a,5,0\n2,a,5,nan\n"))


def test_byte_units_are_bytes():
    """MBps is megabytes per second: 1 MBps = 8 Mbit/s (it was read as 1 Mbit/s)."""
    tr = load(csv_file("time,flow,throughput_MBps\n1,a,1\n2,a,2.5\n"))
    assert tr.samples["throughput_bps"].tolist() == [8e6, 20e6]
    with pytest.raises(IngestError, match="case-exact"):
        load(csv_file("time,flow,throughput_mbps\n1,a,1\n"))
