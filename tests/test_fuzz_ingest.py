"""Hostile input for every importer (issue 13 item 2): mutated real recordings,
random tables and raw bytes. Each input is read or refused in one sentence naming
the file; mutations that would double-count or invent data must be refused, never
read silently; whatever is read obeys the Trace invariants (finite times, finite
non-negative rates no link exceeds). Profiles and the oracle: tests/fuzz_support.py."""

from __future__ import annotations

import copy
import io
import json
import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from fuzz_support import FUZZ, count, one_sentence, time_limit
from hypothesis import given
from hypothesis import strategies as st

from fairlab.ingest import IngestError, load
from fairlab.ingest._common import MAX_RATE_BPS

ROOT = Path(__file__).resolve().parent.parent
REC = ROOT / "examples" / "recordings"
DATA = ROOT / "tests" / "data"

IPERF3_FILES = ["two_clients_cubic.json", "iperf3_P8_server.json", "iperf3_R_client.json", "iperf3_udp_server.json"]
DOCS = {name: json.loads((REC / name).read_text()) for name in IPERF3_FILES}
DOCS["ms_clients_reno.json"] = json.loads((DATA / "ms_clients_reno.json").read_text())
STREAM_LINES = (REC / "iperf3_stream_P2.jsonl").read_text().splitlines()
IPERF2_LINES = (REC / "iperf2_P2_client.csv").read_text().splitlines()

# Values no field should trip over. JSON text, so NaN/Infinity appear as Python's json writes them.
HOSTILE = st.sampled_from([
    float("nan"), float("inf"), -float("inf"), 1e308, -1e308, -1, -0.5, 0, 10**400, -(10**400), 2**63, 1e-320,
    "abc", "", "1e999", None, True, False, [], {}, [[[[]]]], "\x00", "9" * 400,
])


def check_trace(tr) -> None:
    """Invariants of anything an importer returns."""
    s = tr.samples
    t = s["t"].to_numpy()
    v = s["throughput_bps"].to_numpy()
    assert np.isfinite(t).all()
    assert np.isfinite(v).all() and (v >= 0).all() and (v <= MAX_RATE_BPS).all()
    assert len(tr.flows) >= 1
    for col in ("end_sender_bps", "end_receiver_bps", "end_bps"):
        if col in tr.flows.columns:
            e = tr.flows[col].to_numpy(dtype=float, na_value=np.nan)
            assert (np.isnan(e) | ((e >= 0) & (e <= MAX_RATE_BPS))).all()


def attempt(data: bytes, name: str, **kw):
    """load() of ``data`` named ``name``: a Trace, or None after a one-line refusal."""
    f = io.BytesIO(data)
    f.name = name
    with time_limit():
        try:
            tr = load(f, **kw)
        except IngestError as exc:
            one_sentence(str(exc), name)
            return None
    check_trace(tr)
    return tr


def paths(doc) -> list[tuple]:
    """Every (container, key) inside a JSON document."""
    out = []
    stack = [doc]
    while stack:
        node = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else []
        for k, v in items:
            out.append((node, k))
            if isinstance(v, (dict, list)):
                stack.append(v)
    return out


# --------------------------------------------------------------------- iperf3 -J
@FUZZ
@given(name=st.sampled_from(sorted(DOCS)), data=st.data())
def test_iperf3_json_with_hostile_values_is_read_or_refused(name, data):
    count("iperf3 -J, hostile field values")
    doc = copy.deepcopy(DOCS[name])
    targets = paths(doc)
    for _ in range(data.draw(st.integers(1, 3))):
        node, key = data.draw(st.sampled_from(targets))
        action = data.draw(st.sampled_from(["set", "delete"]))
        if action == "delete" and isinstance(node, dict):
            node.pop(key, None)
        elif isinstance(node, (dict, list)):
            try:
                node[key] = data.draw(HOSTILE)
            except IndexError:
                pass
    text = json.dumps(doc, allow_nan=True) if data.draw(st.booleans()) else json.dumps(doc, allow_nan=True, indent=1)
    attempt(text.encode(), name)


@FUZZ
@given(name=st.sampled_from(sorted(DOCS)), data=st.data())
def test_iperf3_duplicated_or_disordered_records_are_never_read_silently(name, data):
    """A stream record repeated within an interval (one socket twice), a whole
    interval repeated, or an interval's end before its start would count bytes twice
    or invent a sample: refused, always."""
    count("iperf3 -J, duplicated/disordered records")
    doc = copy.deepcopy(DOCS[name])
    ivs = doc["intervals"]
    i = data.draw(st.integers(0, len(ivs) - 1))
    kind = data.draw(st.sampled_from(["same socket twice", "interval twice", "inverted"]))
    if kind == "same socket twice":
        ivs[i]["streams"].append(copy.deepcopy(ivs[i]["streams"][0]))
    elif kind == "interval twice":
        if len(ivs) < 3 or i >= len(ivs) - 2:
            i = 0  # not the last two: the short remainder at the end may be dropped legitimately
        ivs.insert(i + 1, copy.deepcopy(ivs[i]))
    else:
        st0 = ivs[i]["streams"][0]
        st0["start"], st0["end"] = st0["end"] + 0.5, st0["start"]
    f = io.BytesIO(json.dumps(doc).encode())
    f.name = name
    try:
        with time_limit():
            load(f)
    except IngestError as exc:
        one_sentence(str(exc), name)
    else:
        raise AssertionError(f"{kind} in intervals[{i}] was read silently")


@FUZZ
@given(text=st.text(max_size=300), cut=st.integers(0, 20_000), data=st.data())
def test_iperf3_json_cut_or_spliced_is_read_or_refused(text, cut, data):
    count("iperf3 -J, cut/spliced text")
    raw = (REC / "two_clients_reno.json").read_text()
    cut = min(cut, len(raw))
    spliced = raw[:cut] + text + (raw[cut:] if data.draw(st.booleans()) else "")
    attempt(spliced.encode("utf-8", errors="surrogatepass"), "spliced.json")


@FUZZ
@given(depth=st.integers(1, 100_000), opener=st.sampled_from(["[", '{"a":']))
def test_deep_nesting_is_refused_in_one_sentence(depth, opener):
    count("deep nesting")
    closer = "]" if opener == "[" else "}"
    attempt(("{" + '"start":' + opener * depth + "1" + closer * depth + "}").encode(), "deep.json")


# --------------------------------------------------------------------- iperf3 --json-stream
@FUZZ
@given(data=st.data())
def test_iperf3_json_stream_with_hostile_lines_is_read_or_refused(data):
    count("iperf3 --json-stream")
    lines = list(STREAM_LINES)
    for _ in range(data.draw(st.integers(1, 3))):
        k = data.draw(st.integers(0, len(lines) - 1))
        how = data.draw(st.sampled_from(["drop", "repeat", "cut", "value"]))
        if how == "drop":
            del lines[k]
        elif how == "repeat":
            lines.insert(k, lines[k])
        elif how == "cut":
            lines[k] = lines[k][: data.draw(st.integers(0, len(lines[k])))]
        else:
            try:
                obj = json.loads(lines[k])
            except json.JSONDecodeError:
                continue  # a line cut by an earlier step
            targets = paths(obj)
            if not targets:
                continue
            node, key = data.draw(st.sampled_from(targets))
            node[key] = data.draw(HOSTILE)
            lines[k] = json.dumps(obj, allow_nan=True)
        if not lines:
            break
    attempt(("\n".join(lines) + "\n").encode(), "stream.jsonl")


# --------------------------------------------------------------------- iperf2 -y C
IPERF2_HOSTILE = st.sampled_from(["", "-1", "nan", "inf", "1e999", "9" * 30, "abc", "1.0-0.5", "-3.0-1.0",
                                  "0.0-1e300", "1e13", "20261399060345", "2026112106034", "20261121060345.5",
                                  " 5 ", "1,2", '"x"', "\x00"])


@FUZZ
@given(data=st.data())
def test_iperf2_csv_with_hostile_fields_is_read_or_refused(data):
    count("iperf2 -y C")
    rows = [line.split(",") for line in IPERF2_LINES]
    for _ in range(data.draw(st.integers(1, 3))):
        r = data.draw(st.integers(0, len(rows) - 1))
        how = data.draw(st.sampled_from(["field", "drop", "repeat", "truncate"]))
        if how == "field":
            rows[r][data.draw(st.integers(0, len(rows[r]) - 1))] = data.draw(IPERF2_HOSTILE)
        elif how == "drop":
            del rows[r]
        elif how == "repeat":
            rows.insert(r, list(rows[r]))
        else:
            rows[r] = rows[r][: data.draw(st.integers(1, len(rows[r])))]
        if not rows:
            break
    attempt(("\n".join(",".join(r) for r in rows) + "\n").encode(), "iperf2.csv")


@FUZZ
@given(data=st.data())
def test_iperf2_repeated_interval_row_is_never_read_silently(data):
    """A row repeated in place counts its interval twice (or, if it is the first
    0.0-1.0 row, a 1-s total would replace the real samples): refused."""
    count("iperf2 repeated row")
    rows = list(IPERF2_LINES)
    k = data.draw(st.integers(2, len(rows) - 5))  # an interval row, not a final 0.0-T total
    rows.insert(k + 1, rows[k])
    f = io.BytesIO(("\n".join(rows) + "\n").encode())
    f.name = "iperf2.csv"
    try:
        load(f)
    except IngestError as exc:
        one_sentence(str(exc), "iperf2.csv")
    else:
        raise AssertionError(f"the repeated row {k + 1} was read silently")


# --------------------------------------------------------------------- plain CSV / Parquet
UNITS = {"bps": 1.0, "kbps": 1e3, "Mbps": 1e6, "Gbps": 1e9, "Tbps": 1e12, "Bps": 8.0, "kBps": 8e3, "MBps": 8e6,
         "GBps": 8e9}
CELL = st.one_of(st.floats(allow_nan=True, allow_infinity=True).map(repr), st.integers(-(10**30), 10**30).map(str),
                 st.sampled_from(["", "nan", "inf", "-inf", "1_000", "0x10", "1e400", " 7 ", "-0", "1.", ".5", "a"]),
                 st.text(max_size=8))


@FUZZ
@given(unit=st.sampled_from(sorted(UNITS)), case=st.sampled_from(["exact", "lower", "upper"]), data=st.data())
def test_plain_csv_units_are_case_exact_and_values_exact(unit, case, data):
    """Valid tables: read back exactly (value x unit factor). A unit spelled in a
    different case means something else (MBps is 8x Mbps) and must never be read as
    the other unit."""
    count("plain CSV, units")
    spelled = {"exact": unit, "lower": unit.lower(), "upper": unit.upper()}[case]
    n_flows = data.draw(st.integers(1, 3))
    n_t = data.draw(st.integers(1, 6))
    top = min(1000.0, MAX_RATE_BPS / UNITS.get(spelled, 1e12))  # stay under the 10 Tbit/s ceiling
    values = data.draw(st.lists(st.floats(0, top, allow_nan=False), min_size=n_flows * n_t, max_size=n_flows * n_t))
    lines = [f"time,flow,throughput_{spelled}"]
    k = 0
    for f in range(n_flows):
        for t in range(1, n_t + 1):
            lines.append(f"{t},{f},{values[k]!r}")
            k += 1
    tr = attempt(("\n".join(lines) + "\n").encode(), "units.csv")
    if spelled not in UNITS:
        assert tr is None
        return
    assert tr is not None, "a valid table was refused"
    got = tr.samples.sort_values(["flow", "t"])["throughput_bps"].to_numpy()
    assert np.allclose(got, np.array(values) * UNITS[spelled], rtol=1e-12, atol=0)


@FUZZ
@given(data=st.data())
def test_plain_csv_with_hostile_cells_is_read_or_refused(data):
    count("plain CSV, hostile cells")
    n = data.draw(st.integers(1, 8))
    header = data.draw(st.sampled_from(["time,flow,throughput_Mbps", "t,flow,throughput_bps,run,srtt_s,retransmits",
                                        "time,flow,throughput", "time_s,flow,throughput_MBps,cwnd_bytes"]))
    width = header.count(",") + 1
    rows = []
    for i in range(n):
        row = [str(i + 1), "a", "5", "0", "0.02", "1", "1000"][:width]
        if data.draw(st.booleans()):
            row[data.draw(st.integers(0, width - 1))] = data.draw(CELL).replace("\n", " ").replace("\r", " ")
        if data.draw(st.integers(0, 9)) == 0:
            row = row[:-1] if data.draw(st.booleans()) else row + ["x"]
        rows.append(",".join(row))
    if data.draw(st.integers(0, 4)) == 0 and rows:
        rows.append(rows[data.draw(st.integers(0, len(rows) - 1))])  # a duplicated row: refused, never summed
    body = "\n".join([header, *rows]) + "\n"
    tr = attempt(body.encode("utf-8", errors="surrogatepass"), "cells.csv",
                 unit="Mbps" if header.endswith("throughput") else None)
    if tr is not None:
        key = tr.samples[["run", "flow", "t"]]
        assert not key.duplicated().any(), "a duplicated row was read"
        assert len(tr.samples) == len(rows), "a row was dropped or invented"


@FUZZ
@given(data=st.data())
def test_parquet_with_odd_column_types_is_read_or_refused(data):
    count("Parquet")
    n = data.draw(st.integers(1, 6))
    pick = st.sampled_from(["float", "int", "str", "bool", "null", "huge"])

    def column(kind):
        if kind == "float":
            return pa.array(data.draw(st.lists(st.floats(), min_size=n, max_size=n)), pa.float64())
        if kind == "int":
            return pa.array(data.draw(st.lists(st.integers(-(2**63), 2**63 - 1), min_size=n, max_size=n)), pa.int64())
        if kind == "str":
            return pa.array(data.draw(st.lists(CELL, min_size=n, max_size=n)), pa.string())
        if kind == "bool":
            return pa.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), pa.bool_())
        if kind == "huge":
            return pa.array([10**30] * n, pa.decimal128(38, 0))
        return pa.nulls(n)

    tbl = pa.table({"time": column(data.draw(pick)), "flow": column(data.draw(pick)),
                    "throughput_Gbps": column(data.draw(pick))})
    sink = io.BytesIO()
    pq.write_table(tbl, sink)
    attempt(sink.getvalue(), "table.parquet")


# --------------------------------------------------------------------- anything at all
@FUZZ
@given(blob=st.binary(max_size=2000), fmt=st.sampled_from(["auto", "iperf3", "iperf3-stream", "iperf2", "csv",
                                                            "parquet"]))
def test_arbitrary_bytes_in_any_format_are_read_or_refused(blob, fmt):
    count("arbitrary bytes")
    attempt(blob, "blob.bin", fmt=fmt)


def test_devices_fifos_and_odd_paths_are_refused_fast(tmp_path):
    import os
    import time

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for p, what in (("/dev/zero", "character device"), (str(fifo), "FIFO"), (str(tmp_path), "directory"),
                    (str(tmp_path / ("n" * 300)), "cannot be opened"), ("a\x00b", "NUL")):
        t0 = time.monotonic()
        with time_limit(5):
            try:
                load(p)
            except IngestError as exc:
                assert what in str(exc)
                one_sentence(str(exc))
            else:
                raise AssertionError(f"{p!r} was read")
        assert time.monotonic() - t0 < 2.0
    assert math.isfinite(0.0)
