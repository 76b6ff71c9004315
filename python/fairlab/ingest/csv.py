"""Plain tables: CSV or Parquet with columns ``time, flow, throughput``.

Read this first:

- ``time`` (also ``t`` or ``time_s``): seconds, the END of each sample's interval,
  as iperf reports it.
- ``flow``: any value naming the flow (number or text).
- ``throughput``: a rate whose unit must be stated exactly once — by the header
  (``throughput_bps``, ``throughput_Mbps``, ``throughput_MBps`` …) or by ``unit=`` —
  never guessed. Both given and different is refused. Units are CASE-EXACT (`UNITS`):
  lower-case ``b`` is bits, capital ``B`` bytes, so ``throughput_MBps`` is megabytes
  per second (8 Mbit/s each); the ambiguous all-lower-case ``mbps``/``gbps`` (tc reads
  ``mbps`` as megabytes) is refused with the two spellings that are meant.
- Optional: ``run`` (integer), and the `fairlab.trace` columns ``cwnd_bytes``,
  ``srtt_s``, ``rttvar_s``, ``retransmits``. Other columns are ignored and said so.
- Every value is checked, column-wise (numpy/Arrow, never a Python loop per value):
  the first bad one is refused with its line (CSV) or row (Parquet) number.
  Nothing is skipped silently. The CSV is parsed by pyarrow's multi-threaded reader,
  so a 200 MB table loads in seconds and in a few times its size in memory.
"""

from __future__ import annotations

import csv as _csv
import io
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from ._common import MAX_ABS_TIME_S, MAX_FLOWS, MAX_RATE_BPS, FilePart, FlowPart, nominal_interval, sha256
from .errors import IngestError

#: Unit name -> bits/s per unit, matched case-exactly. Decimal prefixes, as iperf
#: uses; ``B`` is a byte (8 bits), ``b`` a bit.
UNITS: dict[str, float] = {"bps": 1.0, "kbps": 1e3, "Mbps": 1e6, "Gbps": 1e9, "Tbps": 1e12,
                           "Bps": 8.0, "kBps": 8e3, "MBps": 8e6, "GBps": 8e9}
TIME_NAMES = ("time", "t", "time_s")
OPTIONAL = ("run", "cwnd_bytes", "srtt_s", "rttvar_s", "retransmits")
#: Optional columns that hold counts, so must be whole numbers.
INTEGER_COLUMNS = ("run", "retransmits")
NUMBER = re.compile(r"^\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*$")
#: Lines of the header search: a table whose header is not among the first lines is not a table.
HEADER_SEARCH_BYTES = 65536


def header_looks_like(first_line: str) -> bool:
    """True if a CSV header names a time, a flow and a throughput column."""
    names = [c.strip().strip('"').lower() for c in first_line.split(",")]
    return (any(n in TIME_NAMES for n in names) and "flow" in names
            and any(n == "throughput" or n.startswith("throughput_") for n in names))


# --------------------------------------------------------------------- CSV
def parse_csv(data: bytes, source: str, unit: str | None = None) -> FilePart:
    header, header_line, body_offset = _header(data, source)
    cols = _columns(header, source, unit)
    names = [f"c{i}" for i in range(len(header))]
    types = {names[idx]: (pa.string() if key == "flow" else pa.float64())
             for key, (idx, _name) in cols.items() if key != "_unit"}
    if not data[body_offset:].strip():
        raise IngestError(source, "has a header but no data rows")
    body = pa.py_buffer(data)[body_offset:]
    try:
        tbl = pacsv.read_csv(
            pa.BufferReader(body),
            read_options=pacsv.ReadOptions(column_names=names, block_size=1 << 24),
            parse_options=pacsv.ParseOptions(newlines_in_values=False),
            convert_options=pacsv.ConvertOptions(column_types=types, include_columns=list(types),
                                                 null_values=[""], strings_can_be_null=False,
                                                 quoted_strings_can_be_null=False),
        )
    except pa.ArrowException as exc:
        raise _locate_csv_error(data, source, header, cols, header_line, body_offset, str(exc)) from None
    if tbl.num_rows == 0:
        raise IngestError(source, "has a header but no data rows")
    columns = {key: tbl.column(names[idx]) for key, (idx, _name) in cols.items() if key != "_unit"}

    def where(rows: np.ndarray) -> list[int]:
        return _csv_lines(data, body_offset, header_line, rows)

    part = _build(columns, cols, source, header, where, "line", fmt="csv")
    part.meta["sha256"] = sha256(data)
    return part


def _header(data: bytes, source: str) -> tuple[list[str], int, int]:
    """The header fields, its 1-based line number and the byte offset after it."""
    head = data[:HEADER_SEARCH_BYTES]
    if b"\x00" in head:
        raise IngestError(source, "is a binary file, not a text table")
    offset, line = 0, 0
    if head.startswith(b"\xef\xbb\xbf"):
        offset = 3
    while True:
        nl = data.find(b"\n", offset)
        end = len(data) if nl < 0 else nl + 1
        line += 1
        raw = data[offset:end]
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise IngestError(source, f"is not UTF-8 text (undecodable byte at offset {offset + exc.start})",
                              line=line) from None
        if text.strip():
            fields = next(_csv.reader([text.rstrip("\r\n")]), [])
            if any(f.strip() for f in fields):
                return [f.strip() for f in fields], line, end
        if nl < 0 or end > HEADER_SEARCH_BYTES:
            raise IngestError(source, "is empty" if not data[offset:].strip() else "has no header row, only empty fields")
        offset = end


def _csv_lines(data: bytes, body_offset: int, header_line: int, rows: np.ndarray) -> list[int]:
    """1-based file line numbers of data rows ``rows`` (0-based, as pyarrow counts
    them: empty lines skipped). Only called to name a line in an error, so a scan
    with the standard csv module is fine here."""
    want = {int(r): None for r in np.asarray(rows).ravel()}
    if not want:
        return []
    text = io.StringIO(data[body_offset:].decode("utf-8", errors="replace"), newline="")
    reader = _csv.reader(text)
    k = -1
    last = max(want)
    prev_end = 0
    for fields in reader:
        if not fields:
            prev_end = reader.line_num
            continue
        k += 1
        if k in want:
            want[k] = header_line + prev_end + 1
        prev_end = reader.line_num
        if k >= last:
            break
    return [want[int(r)] or 0 for r in np.asarray(rows).ravel()]


def _locate_csv_error(data: bytes, source: str, header: list[str], cols: dict[str, tuple[int, str]],
                      header_line: int, body_offset: int, arrow_msg: str) -> IngestError:
    """Turn a pyarrow parse error into one sentence naming the line: re-scan with the
    csv module (only on this error path) to find the first row that is wrong."""
    text = io.StringIO(data[body_offset:].decode("utf-8", errors="replace"), newline="")
    reader = _csv.reader(text)
    prev_end = 0
    try:
        for fields in reader:
            line = header_line + prev_end + 1
            prev_end = reader.line_num
            if not fields:
                continue
            if len(fields) != len(header):
                return IngestError(source, f"has {len(fields)} fields but the header has {len(header)}", line=line)
            for key, (idx, name) in cols.items():
                if key in ("_unit", "flow"):
                    continue
                v = fields[idx]
                if v.strip() and not NUMBER.match(v):  # float() would also take "1_000", "nan", "infinity"
                    return IngestError(source, f"must be a finite number, not {v!r}", line=line, field=name)
            try:
                fields[cols["flow"][0]].encode("utf-8")
            except UnicodeEncodeError:
                return IngestError(source, "is not UTF-8 text", line=line, field=cols["flow"][1])
    except _csv.Error as exc:
        return IngestError(source, f"is not well-formed CSV ({exc})", line=header_line + prev_end + 1)
    if "UTF8" in arrow_msg or "utf8" in arrow_msg.lower():
        return IngestError(source, "is not UTF-8 text in its flow column")
    return IngestError(source, f"cannot be read as a CSV table ({arrow_msg.splitlines()[0]})")


# --------------------------------------------------------------------- Parquet
def parse_parquet(data: bytes, source: str, unit: str | None = None) -> FilePart:
    try:
        tbl = pq.read_table(io.BytesIO(data))
    except (pa.ArrowException, OSError) as exc:
        raise IngestError(source, f"is not a readable Parquet file ({str(exc).splitlines()[0] if str(exc) else exc})") from None
    header = list(tbl.column_names)
    from ..backends.ack_trace import COLUMNS as ACK_TRACE_COLUMNS

    if header == ACK_TRACE_COLUMNS:
        # The per-ACK trace `--tcp-probe` writes sits beside the run's trace and is
        # easily taken for it; it has no throughput samples.
        beside = source[: -len(".tcp_probe.parquet")] + ".parquet" if source.endswith(".tcp_probe.parquet") else None
        raise IngestError(source, "is a per-ACK trace (`--tcp-probe`), not throughput samples; analyse the run's own "
                          f"trace{f' ({beside})' if beside else ''}, or hold it against the kernel's with "
                          "`fairlab compare SCENARIO --reference vm --tcp-probe`")
    cols = _columns(header, source, unit)
    if tbl.num_rows == 0:
        raise IngestError(source, "has columns but no rows")
    columns = {key: tbl.column(idx) for key, (idx, _name) in cols.items() if key != "_unit"}

    def where(rows: np.ndarray) -> list[int]:
        return [int(r) + 1 for r in np.asarray(rows).ravel()]

    part = _build(columns, cols, source, header, where, "row", fmt="parquet")
    part.meta["sha256"] = sha256(data)
    return part


# --------------------------------------------------------------------- shared
def _columns(header: list[str], source: str, unit: str | None) -> dict[str, tuple[int, str]]:
    """Map role -> (column index, column name); decides the unit."""
    lower = [h.lower() for h in header]
    if len(set(lower)) != len(lower):
        dup = sorted({h for h in lower if lower.count(h) > 1})
        raise IngestError(source, f"names column(s) {dup} more than once, so it is ambiguous which to read")
    found: dict[str, tuple[int, str]] = {}
    times = [i for i, h in enumerate(lower) if h in TIME_NAMES]
    if len(times) != 1:
        what = "has no time column" if not times else f"has {len(times)} time columns ({[header[i] for i in times]})"
        raise IngestError(source, f"{what}; it needs exactly one", allowed=list(TIME_NAMES))
    found["t"] = (times[0], header[times[0]])
    if "flow" not in lower:
        raise IngestError(source, "has no 'flow' column naming which flow each row belongs to")
    found["flow"] = (lower.index("flow"), "flow")
    thr = [i for i, h in enumerate(lower) if h == "throughput" or h.startswith("throughput_")]
    allowed_cols = ["throughput"] + [f"throughput_{u}" for u in UNITS]
    if len(thr) != 1:
        what = "has no throughput column" if not thr else f"has {len(thr)} throughput columns ({[header[i] for i in thr]})"
        raise IngestError(source, f"{what}; it needs exactly one", allowed=allowed_cols)
    name = header[thr[0]]
    header_unit = None
    if lower[thr[0]] != "throughput":
        suffix = name[len("throughput_"):]
        header_unit = _unit(suffix, source, f"names the throughput column {name!r}, whose unit suffix {suffix!r}")
    if unit is not None:
        given = _unit(unit, source, f"cannot be read with unit={unit!r}, which")
        if header_unit is not None and header_unit != given:
            raise IngestError(source, f"has mismatched units: its header says {header_unit} "
                              f"({name!r}) but unit={unit!r} was given")
        header_unit = given
    if header_unit is None:
        raise IngestError(source, "does not say the unit of its 'throughput' column; name it in the header "
                          "(e.g. throughput_Mbps) or give it (`--unit` on the command line, unit= in Python)", allowed=list(UNITS))
    found["throughput"] = (thr[0], name)
    found["_unit"] = (-1, header_unit)
    for opt in OPTIONAL:
        if opt in lower:
            found[opt] = (lower.index(opt), header[lower.index(opt)])
    return found


def _unit(text: str, source: str, what: str) -> str:
    """A unit name from `UNITS`, matched case-exactly; a case variant is refused with
    the spellings that exist, since B (byte) and b (bit) differ by 8x."""
    if text in UNITS:
        return text
    variants = [u for u in UNITS if u.lower() == text.lower()]
    if variants:
        raise IngestError(source, f"{what} is not a unit: units are case-exact (b = bit, B = byte), "
                          f"so write {' or '.join(repr(v) for v in variants)}", allowed=list(UNITS))
    raise IngestError(source, f"{what} is not a known unit", allowed=list(UNITS))


def _numbers(col: pa.ChunkedArray, key: str, name: str, source: str, where: Callable[[np.ndarray], list[int]],
             what: str, *, required: bool) -> np.ndarray:
    """A column as float64 (NaN where empty), refusing text, booleans and empty
    required cells by row."""
    typ = col.type
    if pa.types.is_string(typ) or pa.types.is_large_string(typ):
        trimmed = pc.utf8_trim_whitespace(col)
        ok = pc.fill_null(pc.or_(pc.equal(trimmed, ""), pc.match_substring_regex(col, NUMBER.pattern)), True)
        ok = np.asarray(ok.to_numpy(zero_copy_only=False), dtype=bool)
        if not ok.all():
            r = int(np.flatnonzero(~ok)[0])
            bad = col[r].as_py()
            raise IngestError(source, f"must be a finite number, not {bad!r}", **_where(what, where, r, name))
        col = pc.cast(pc.if_else(pc.equal(pc.utf8_trim_whitespace(col), ""), None, pc.utf8_trim_whitespace(col)),
                      pa.float64())
    elif pa.types.is_boolean(typ) or not (pa.types.is_integer(typ) or pa.types.is_floating(typ)
                                           or pa.types.is_decimal(typ) or pa.types.is_null(typ)):
        raise IngestError(source, f"must hold numbers, but its type is {typ}", field=name)
    try:
        arr = pc.cast(col, pa.float64(), safe=False).to_numpy(zero_copy_only=False)
    except (pa.ArrowInvalid, OverflowError):
        raise IngestError(source, "holds numbers too large for a float", field=name) from None
    arr = np.asarray(arr, dtype=float)
    if required and col.null_count:
        r = int(np.flatnonzero(np.isnan(arr))[0]) if np.isnan(arr).any() else 0
        raise IngestError(source, "is empty", **_where(what, where, r, name))
    return arr


def _is_sorted(code: np.ndarray, run: np.ndarray, t: np.ndarray) -> bool:
    """True if rows are ordered by (flow code, run, t), ties included."""
    if len(code) < 2:
        return True
    dc, dr, dt = np.diff(code), np.diff(run), np.diff(t)
    return bool(np.all((dc > 0) | ((dc == 0) & ((dr > 0) | ((dr == 0) & (dt >= 0))))))


def _where(what: str, where: Callable[[np.ndarray], list[int]], r: int, name: str | None) -> dict[str, Any]:
    n = where(np.array([r]))[0]
    if what == "line":
        return {"line": n, "field": name}
    return {"field": f"{name} (row {n})" if name else f"row {n}"}


def _refuse_first(bad: np.ndarray, values: np.ndarray, problem: Callable[[Any], str], source: str,
                  where: Callable[[np.ndarray], list[int]], what: str, name: str) -> None:
    if bad.any():
        r = int(np.flatnonzero(bad)[0])
        v = values[r]
        raise IngestError(source, problem(v.item() if isinstance(v, np.generic) else v), **_where(what, where, r, name))


def _build(columns: dict[str, pa.ChunkedArray], cols: dict[str, tuple[int, str]], source: str, header: list[str],
           where: Callable[[np.ndarray], list[int]], what: str, *, fmt: str) -> FilePart:
    """Check every value (vectorised) and describe the flows; ``what`` is "line" (CSV,
    1-based file lines) or "row" (Parquet, 1-based rows)."""
    unit = cols["_unit"][1]
    factor = UNITS[unit]
    n = len(columns["t"])

    def num(key: str, required: bool) -> np.ndarray:
        return _numbers(columns[key], key, cols[key][1], source, where, what, required=required)

    t = num("t", True)
    _refuse_first(~np.isfinite(t), t, lambda v: f"must be a finite number, not {v!r}", source, where, what, cols["t"][1])
    _refuse_first(np.abs(t) > MAX_ABS_TIME_S, t, lambda v: f"is out of range ({v!r} s; allowed: within "
                  f"±{MAX_ABS_TIME_S:g} s)", source, where, what, cols["t"][1])
    raw = num("throughput", True)
    thr_name = cols["throughput"][1]
    _refuse_first(~np.isfinite(raw), raw, lambda v: f"must be a finite number, not {v!r}", source, where, what, thr_name)
    _refuse_first(raw < 0, raw, lambda v: f"must not be negative (got {v!r})", source, where, what, thr_name)
    with np.errstate(over="ignore"):  # an overflow to inf is refused just below
        thr = raw * factor
    _refuse_first(thr > MAX_RATE_BPS, raw, lambda v: f"is {v!r} {unit}, more than any link carries (the ceiling is "
                  f"{MAX_RATE_BPS:g} bit/s; check the unit)", source, where, what, thr_name)
    extras: dict[str, np.ndarray] = {}
    for key in OPTIONAL:
        if key not in cols:
            continue
        v = num(key, key == "run")
        name = cols[key][1]
        present = ~np.isnan(v)
        _refuse_first(present & ~np.isfinite(v), v, lambda x: f"must be a finite number, not {x!r}", source, where, what, name)
        if key != "run":
            _refuse_first(present & (v < 0), v, lambda x: f"must not be negative (got {x!r})", source, where, what, name)
        if key in INTEGER_COLUMNS:
            _refuse_first(present & ((v != np.floor(v)) | (np.abs(v) > 2**53)), v,
                          lambda x: f"must be a whole number, not {x!r}", source, where, what, name)
        if key == "run":
            _refuse_first(np.isnan(v), v, lambda x: f"must be a whole number, not {x!r}", source, where, what, name)
        extras[key] = v
    run = extras.pop("run").astype(np.int64) if "run" in extras else np.zeros(n, dtype=np.int64)

    # ---- flows: dictionary-encode the flow column (order of first appearance)
    flow_col = columns["flow"]
    if not (pa.types.is_string(flow_col.type) or pa.types.is_large_string(flow_col.type)):
        if pa.types.is_floating(flow_col.type):
            fl = pc.cast(flow_col, pa.float64()).to_numpy(zero_copy_only=False)
            whole = np.isfinite(fl) & (fl == np.floor(fl)) & (np.abs(fl) < 2**53)
            flow_col = pa.chunked_array([pa.array(np.where(whole, np.where(whole, fl, 0).astype(np.int64).astype(str),
                                                           fl.astype(str)), mask=np.isnan(fl))])
        else:
            flow_col = pc.cast(flow_col, pa.string())
    flow_col = pc.utf8_trim_whitespace(flow_col)
    empty = pc.fill_null(pc.equal(flow_col, ""), True).to_numpy(zero_copy_only=False)
    _refuse_first(np.asarray(empty, dtype=bool), np.zeros(n), lambda _v: "is empty", source, where, what, cols["flow"][1])
    enc = pc.dictionary_encode(flow_col).combine_chunks()
    code = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    keys = [str(k) for k in enc.dictionary.to_pylist()]
    if len(keys) > MAX_FLOWS:
        raise IngestError(source, f"names {len(keys)} distinct flows, more than the {MAX_FLOWS} one file may hold",
                          field=cols["flow"][1])

    # ---- duplicates: one (run, flow, t) twice is ambiguous
    # Files are usually written flow by flow in time order: then no sort is needed.
    if _is_sorted(code, run, t):
        order = None
        c_s, r_s, t_s = code, run, t
    else:
        order = np.lexsort((t, run, code))
        c_s, r_s, t_s = code[order], run[order], t[order]
    same_group = (c_s[1:] == c_s[:-1]) & (r_s[1:] == r_s[:-1])
    dup = same_group & (t_s[1:] == t_s[:-1])
    if dup.any():
        k = int(np.flatnonzero(dup)[0])
        first, second = (k, k + 1) if order is None else sorted((int(order[k]), int(order[k + 1])))
        at = where(np.array([first]))[0]
        raise IngestError(source, f"repeats flow {keys[c_s[k]]!r} at time {t_s[k]:g} s (first at {what} {at}), "
                          "so it is ambiguous which sample to keep", **_where(what, where, second, None))
    diffs = np.diff(t_s)[same_group]
    interval_s = nominal_interval(diffs)
    if interval_s is None:
        interval_s = nominal_interval(np.diff(np.unique(t)))

    # ---- one frame for the whole file; flows point into it
    # The first time of each flow: the minimum over its (sorted) block, all runs.
    starts = np.flatnonzero(np.r_[True, c_s[1:] != c_s[:-1]])
    firsts = np.empty(len(keys))
    firsts[c_s[starts]] = np.minimum.reduceat(t_s, starts)
    table = pd.DataFrame({
        "t": t,
        "throughput_bps": thr,
        "cwnd_bytes": extras.get("cwnd_bytes", np.full(n, np.nan)),
        "srtt_s": extras.get("srtt_s", np.full(n, np.nan)),
        "rttvar_s": extras.get("rttvar_s", np.full(n, np.nan)),
        "retransmits": pd.array(extras["retransmits"], dtype="Float64").astype("Int64") if "retransmits" in extras
        else pd.arrays.IntegerArray(np.zeros(n, dtype=np.int64), np.ones(n, dtype=bool)),
        "run": run,
        "flow_index": code,
    }, copy=False)
    flows = [FlowPart(key=k, samples=None, start_s=float(firsts[i] - interval_s if interval_s else firsts[i]),
                      extra={"protocol": None, "role": None, "sending": None}) for i, k in enumerate(keys)]
    notes = []
    used = {c[1].lower() for k, c in cols.items() if k != "_unit"}
    ignored = [h for h in header if h.lower() not in used]
    if ignored:
        notes.append(f"{source}: ignored column(s) {ignored}")
    notes.append(f"{source}: throughput read in {unit}; each flow is taken to start one interval "
                 f"({interval_s:g} s) before its first sample" if interval_s else
                 f"{source}: throughput read in {unit}; a single time point gives no interval, so flows start at their first sample")
    meta = {"path": source, "format": "Parquet table" if fmt == "parquet" else "CSV table", "tool": None,
            "unit": unit, "throughput_column": thr_name, "interval_s": interval_s, "rows": n}
    return FilePart(source=source, fmt=fmt, family="table", flows=flows, interval_s=interval_s, meta=meta,
                    notes=notes, table=table)
