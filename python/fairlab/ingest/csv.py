"""Plain tables: CSV or Parquet with columns ``time, flow, throughput``.

Read this first:

- ``time`` (also ``t`` or ``time_s``): seconds, the END of each sample's interval,
  as iperf reports it.
- ``flow``: any value naming the flow (number or text).
- ``throughput``: a rate whose unit must be stated exactly once — by the header
  (``throughput_bps``, ``throughput_kbps``, ``throughput_mbps``, ``throughput_gbps``)
  or by ``unit=`` — never guessed. Both given and different is refused.
- Optional: ``run`` (integer), and the `fairlab.trace` columns ``cwnd_bytes``,
  ``srtt_s``, ``rttvar_s``, ``retransmits``. Other columns are ignored and said so.
- Every row is checked; the first bad one is refused with its line (CSV) or row
  (Parquet) number. Nothing is skipped silently.
"""

from __future__ import annotations

import csv as _csv
import io
import math
import re
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ._common import FilePart, FlowPart, decode_text, nominal_interval, samples_frame, sha256
from .errors import IngestError

#: Unit name -> bits/s per unit. Decimal prefixes, as iperf uses.
UNITS: dict[str, float] = {"bps": 1.0, "kbps": 1e3, "Mbps": 1e6, "Gbps": 1e9}
TIME_NAMES = ("time", "t", "time_s")
OPTIONAL = ("run", "cwnd_bytes", "srtt_s", "rttvar_s", "retransmits")
NUMBER = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


def header_looks_like(first_line: str) -> bool:
    """True if a CSV header names a time, a flow and a throughput column."""
    names = [c.strip().strip('"').lower() for c in first_line.split(",")]
    return (any(n in TIME_NAMES for n in names) and "flow" in names
            and any(n == "throughput" or n.startswith("throughput_") for n in names))


def parse_csv(data: bytes, source: str, unit: str | None = None) -> FilePart:
    text = decode_text(source, data)
    if not text.strip():
        raise IngestError(source, "is empty")
    reader = _csv.reader(io.StringIO(text))
    header: list[str] | None = None
    raw: list[tuple[int, list[str]]] = []
    for fields in reader:
        if not fields or all(not f.strip() for f in fields):
            continue
        if header is None:
            header = [f.strip() for f in fields]
            continue
        raw.append((reader.line_num, fields))
    if header is None:
        raise IngestError(source, "has no header row, only empty fields")
    cols = _columns(header, source, unit)
    if not raw:
        raise IngestError(source, "has a header but no data rows")
    table: dict[str, list[Any]] = {k: [] for k in cols if k != "_unit"}
    for lineno, fields in raw:
        if len(fields) != len(header):
            raise IngestError(source, f"has {len(fields)} fields but the header has {len(header)}", line=lineno)
        for key, (idx, _name) in cols.items():
            if key != "_unit":
                table[key].append(fields[idx].strip())
    lines = [ln for ln, _ in raw]
    part = _build(table, cols, source, lines, "line", header, fmt="csv")
    part.meta["sha256"] = sha256(data)
    return part


def parse_parquet(data: bytes, source: str, unit: str | None = None) -> FilePart:
    try:
        tbl = pq.read_table(io.BytesIO(data))
    except (pa.ArrowInvalid, OSError) as exc:
        raise IngestError(source, f"is not a readable Parquet file ({exc})") from None
    header = list(tbl.column_names)
    cols = _columns(header, source, unit)
    if tbl.num_rows == 0:
        raise IngestError(source, "has columns but no rows")
    df = tbl.to_pandas()
    table = {key: ["" if _missing(v) else v if isinstance(v, (int, float, np.number)) else str(v)
                   for v in df.iloc[:, idx].tolist()] for key, (idx, _name) in cols.items() if key != "_unit"}
    rows = list(range(1, tbl.num_rows + 1))
    part = _build(table, cols, source, rows, "row", header, fmt="parquet")
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
    allowed_cols = ["throughput"] + [f"throughput_{u.lower()}" for u in UNITS]
    if len(thr) != 1:
        what = "has no throughput column" if not thr else f"has {len(thr)} throughput columns ({[header[i] for i in thr]})"
        raise IngestError(source, f"{what}; it needs exactly one", allowed=allowed_cols)
    name = lower[thr[0]]
    header_unit = None
    if name != "throughput":
        suffix = name[len("throughput_"):]
        header_unit = next((u for u in UNITS if u.lower() == suffix), None)
        if header_unit is None:
            raise IngestError(source, f"names the throughput column {header[thr[0]]!r}, whose unit suffix is not known",
                              allowed=allowed_cols)
    if unit is not None:
        given = next((u for u in UNITS if u.lower() == unit.lower()), None)
        if given is None:
            raise IngestError(source, f"cannot be read with unit={unit!r}", allowed=list(UNITS))
        if header_unit is not None and header_unit != given:
            raise IngestError(source, f"has mismatched units: its header says {header_unit} "
                              f"({header[thr[0]]!r}) but unit={unit!r} was given")
        header_unit = given
    if header_unit is None:
        raise IngestError(source, "does not say the unit of its 'throughput' column; name it in the header "
                          "(e.g. throughput_mbps) or pass unit=", allowed=list(UNITS))
    found["throughput"] = (thr[0], header[thr[0]])
    found["_unit"] = (-1, header_unit)
    for opt in OPTIONAL:
        if opt in lower:
            found[opt] = (lower.index(opt), header[lower.index(opt)])
    return found


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA


def _build(table: dict[str, list[Any]], cols: dict[str, tuple[int, str]], source: str,
           rows: list[int], what: str, header: list[str], *, fmt: str) -> FilePart:
    """Check every value and split the table into flows; ``what`` is "line" (CSV,
    1-based file lines) or "row" (Parquet, 1-based rows)."""
    unit = cols["_unit"][1]
    factor = UNITS[unit]

    def numbers(key: str, *, integer: bool = False, required: bool = True, nonneg: bool = False) -> list[float]:
        out = []
        name = cols[key][1]
        for v, r in zip(table[key], rows):
            if isinstance(v, str):
                if v == "":
                    if required:
                        raise IngestError(source, "is empty", **_where(what, r, name))
                    out.append(math.nan)
                    continue
                if not NUMBER.match(v):  # float() would also take "1_000", "nan", "infinity"
                    raise IngestError(source, f"must be a finite number, not {v!r}", **_where(what, r, name))
                x = float(v)
            else:
                x = float(v)
            if not math.isfinite(x):
                raise IngestError(source, f"must be a finite number, not {v!r}", **_where(what, r, name))
            if nonneg and x < 0:
                raise IngestError(source, f"must not be negative (got {v!r})", **_where(what, r, name))
            if integer and x != int(x):
                raise IngestError(source, f"must be a whole number, not {v!r}", **_where(what, r, name))
            out.append(x)
        return out

    t = numbers("t")
    thr = [x * factor for x in numbers("throughput", nonneg=True)]
    runs = [int(x) for x in numbers("run", integer=True)] if "run" in cols else [0] * len(t)
    extras = {k: numbers(k, required=False, nonneg=True, integer=k == "retransmits")
              for k in ("cwnd_bytes", "srtt_s", "rttvar_s", "retransmits") if k in cols}
    flows_raw = [v if isinstance(v, str) else _flow_text(v) for v in table["flow"]]
    for v, r in zip(flows_raw, rows):
        if v == "":
            raise IngestError(source, "is empty", **_where(what, r, cols["flow"][1]))
    seen: dict[tuple[int, str, float], int] = {}
    for run, f, tt, r in zip(runs, flows_raw, t, rows):
        k = (run, f, tt)
        if k in seen:
            raise IngestError(source, f"repeats flow {f!r} at time {tt:g} s (first at {what} {seen[k]}), "
                              "so it is ambiguous which sample to keep", **_where(what, r, None))
        seen[k] = r
    order: list[str] = list(dict.fromkeys(flows_raw))
    df = pd.DataFrame({"run": runs, "flow": flows_raw, "t": t, "throughput_bps": thr, **extras})
    all_t = sorted(set(t))
    diffs = [b - a for a, b in zip(all_t, all_t[1:])]
    per_flow_d = []
    for f in order:
        ts = np.sort(df.loc[df["flow"] == f, "t"].unique())
        per_flow_d += np.diff(ts).tolist()
    interval_s = nominal_interval(per_flow_d) or nominal_interval(diffs)
    flows = []
    for f in order:
        s = df[df["flow"] == f]
        rowsd = {"t": s["t"].tolist(), "throughput_bps": s["throughput_bps"].tolist(), "run": s["run"].tolist()}
        for k in extras:
            rowsd[k] = [None if (isinstance(x, float) and math.isnan(x)) else int(x) for x in s[k]] \
                if k == "retransmits" else s[k].tolist()
        first = float(s["t"].min())
        flows.append(FlowPart(key=f, samples=samples_frame(rowsd),
                              start_s=first - interval_s if interval_s else first,
                              extra={"protocol": None, "role": None, "sending": None}))
    notes = []
    ignored = [h for h in header if h.lower() not in {c[1].lower() for k, c in cols.items() if k != "_unit"}]
    if ignored:
        notes.append(f"{source}: ignored column(s) {ignored}")
    notes.append(f"{source}: throughput read in {unit}; each flow is taken to start one interval "
                 f"({interval_s:g} s) before its first sample" if interval_s else
                 f"{source}: throughput read in {unit}; a single time point gives no interval, so flows start at their first sample")
    meta = {"path": source, "format": "Parquet table" if fmt == "parquet" else "CSV table", "tool": None,
            "unit": unit, "throughput_column": cols["throughput"][1], "interval_s": interval_s, "rows": len(t)}
    return FilePart(source=source, fmt=fmt, family="table", flows=flows, interval_s=interval_s, meta=meta, notes=notes)


def _where(what: str, r: int, name: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {"field": name}
    if what == "line":
        out["line"] = r
    else:
        out["field"] = f"{name} (row {r})" if name else f"row {r}"
    return out


def _flow_text(v: Any) -> str:
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)
