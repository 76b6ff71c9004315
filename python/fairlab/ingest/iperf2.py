"""iperf2 CSV (``-y C``), client or server side, with ``-i`` and ``-P``.

Read this first — the rows (checked against iperf 2.1.8; the legacy sum rows as
iperf 2.0.x writes them):

``timestamp,src_ip,src_port,dst_ip,dst_port,id,interval,bytes,bits_per_second``

plus, for UDP, ``jitter_ms,lost,total,lost_percent,out_of_order``. ``timestamp`` is
the host's LOCAL wall clock, ``YYYYMMDDhhmmss`` (whole seconds) or with ``.mmm``
under ``-e``; its zone is not recorded. ``interval`` is ``start-end`` in seconds
from the stream's start, with one decimal. Per stream the last row spanning
``0.0-T`` is the end-of-test total (kept as ``end_bps``, not a sample). ID ``-1``
(src port 0) is iperf 2.0.x's sum over streams: not a flow (iperf 2.1.8 no longer
writes it). Rows have at least 9 fields; further fields that newer iperf2 builds
add are ignored and said so.

iperf2 CSV does not say which end wrote it, so ``sending`` is unknown: a client
file gives the rate written, a server file the rate received.
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timezone
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from ._common import MAX_ABS_TIME_S, MAX_FLOWS, MAX_RATE_BPS, FilePart, FlowPart, nominal_interval, samples_frame, sha256
from .errors import IngestError

TIMESTAMP = re.compile(r"^\d{14}(\.\d+)?$")
INTERVAL = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*-\s*(-?\d+(?:\.\d+)?)\s*$")
TCP_FIELDS = 9
UDP_FIELDS = 14
FIELD_NAMES = ("timestamp", "src_ip", "src_port", "dst_ip", "dst_port", "id", "interval", "bytes", "bits_per_second",
               "jitter_ms", "lost", "total", "lost_percent", "out_of_order")
REMAINDER_FRACTION = 0.5


def looks_like(first_line: str) -> bool:
    """True if a line has the shape of an iperf2 ``-y C`` row."""
    fields = first_line.strip().split(",")
    return len(fields) >= TCP_FIELDS and bool(TIMESTAMP.match(fields[0])) and bool(INTERVAL.match(fields[6]))


def parse(data: bytes, source: str) -> FilePart:
    """Parse one iperf2 ``-y C`` file: pyarrow's CSV reader, then column-wise checks."""
    if b"\x00" in data[:4096]:
        raise IngestError(source, "is a binary file, not a text measurement log")
    body = data[3:] if data.startswith(b"\xef\xbb\xbf") else data
    first = body.lstrip().split(b"\n", 1)[0]
    width = first.count(b",") + 1
    names = [FIELD_NAMES[i] if i < len(FIELD_NAMES) else f"extra{i}" for i in range(width)]
    text_cols = ("timestamp", "src_ip", "src_port", "dst_ip", "dst_port", "interval")
    types = {n: pa.string() for n in text_cols}
    types.update({"id": pa.int64(), "bytes": pa.float64(), "bits_per_second": pa.float64()})
    if width < TCP_FIELDS:
        raise _locate(body, source, width, "")
    try:
        tbl = pacsv.read_csv(
            pa.BufferReader(pa.py_buffer(body)),
            read_options=pacsv.ReadOptions(column_names=names, block_size=1 << 24),
            parse_options=pacsv.ParseOptions(newlines_in_values=False),
            convert_options=pacsv.ConvertOptions(column_types=types, include_columns=list(FIELD_NAMES[:TCP_FIELDS]),
                                                 null_values=[], strings_can_be_null=False),
        )
    except pa.ArrowException as exc:
        raise _locate(body, source, width, str(exc)) from None
    n_all = tbl.num_rows
    if n_all == 0:
        raise IngestError(source, "is empty")

    def col(name: str) -> Any:
        return tbl.column(name)

    def refuse(bad: np.ndarray, problem: str, field: str) -> None:
        if bad.any():
            r = int(np.flatnonzero(bad)[0])
            raise IngestError(source, problem, line=_line_of(body, r), field=field)

    stamp = pc.utf8_trim_whitespace(col("timestamp"))
    refuse(~pc.match_substring_regex(stamp, TIMESTAMP.pattern).to_numpy(zero_copy_only=False),
           "does not start with an iperf2 timestamp YYYYMMDDhhmmss[.mmm]", "timestamp")
    try:
        whole = pc.strptime(pc.utf8_slice_codeunits(stamp, 0, 14), format="%Y%m%d%H%M%S", unit="s")
    except pa.ArrowInvalid:
        raise _locate(body, source, width, "") from None
    epoch = pc.cast(whole, pa.int64()).to_numpy(zero_copy_only=False).astype(float)
    frac_txt = pc.utf8_slice_codeunits(stamp, 14, 64)
    has_frac = pc.not_equal(frac_txt, "").to_numpy(zero_copy_only=False)
    if has_frac.any():
        frac = pc.cast(pc.if_else(pc.equal(frac_txt, ""), "0", pc.binary_join_element_wise("0", frac_txt, "")),
                       pa.float64()).to_numpy(zero_copy_only=False)
        epoch = epoch + frac
    parts = pc.extract_regex(col("interval"), r"^\s*(?P<a>-?\d+(?:\.\d+)?)\s*-\s*(?P<b>-?\d+(?:\.\d+)?)\s*$")
    ok = pc.is_valid(parts).to_numpy(zero_copy_only=False)
    refuse(~ok, "must look like 'start-end' in seconds", "interval")
    t0 = pc.cast(pc.struct_field(parts, [0]), pa.float64()).to_numpy(zero_copy_only=False)
    t1 = pc.cast(pc.struct_field(parts, [1]), pa.float64()).to_numpy(zero_copy_only=False)
    ids = col("id").to_numpy(zero_copy_only=False)
    nbytes = col("bytes").to_numpy(zero_copy_only=False)
    bps = col("bits_per_second").to_numpy(zero_copy_only=False)
    refuse(~np.isfinite(nbytes), "must be a finite number", "bytes")
    refuse(~np.isfinite(bps), "must be a finite number", "bits_per_second")
    refuse((bps < 0) | (nbytes < 0), "must not be negative", "bits_per_second")
    refuse(bps > MAX_RATE_BPS, f"is more than any link carries (the ceiling is {MAX_RATE_BPS:g} bit/s)",
           "bits_per_second")
    refuse(t1 < t0, "ends before it starts", "interval")
    refuse(t0 < 0, "starts before 0 s", "interval")
    refuse(t1 > MAX_ABS_TIME_S, f"ends after {MAX_ABS_TIME_S:g} s", "interval")

    sums = ids == -1  # iperf 2.0.x's [SUM] row: the sum over streams is not a flow
    n_sums = int(sums.sum())
    keep = np.flatnonzero(~sums)
    if keep.size == 0:
        raise IngestError(source, "holds only sum rows (ID -1) and no per-stream rows, so there is no flow to import")
    notes: list[str] = []
    if n_sums:
        notes.append(f"{source}: skipped {n_sums} sum row(s) (ID -1): the sum over streams is not a flow")
    if width > UDP_FIELDS or (width > TCP_FIELDS and width != UDP_FIELDS):
        notes.append(f"{source}: ignored the fields after bits_per_second on rows with {width} fields "
                     "(a newer iperf2's extended CSV)")

    # ---- streams: keyed by the 5-tuple, in order of first appearance
    src = pc.binary_join_element_wise(pc.utf8_trim_whitespace(col("src_ip")), pc.utf8_trim_whitespace(col("src_port")), ":")
    dst = pc.binary_join_element_wise(pc.utf8_trim_whitespace(col("dst_ip")), pc.utf8_trim_whitespace(col("dst_port")), ":")
    key = pc.binary_join_element_wise(src, dst, pc.cast(col("id"), pa.string()), "|")
    enc = pc.dictionary_encode(key.take(pa.array(keep))).combine_chunks()
    code = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    keys = [tuple(k.split("|")) for k in enc.dictionary.to_pylist()]
    if len(keys) > MAX_FLOWS:
        raise IngestError(source, f"holds {len(keys)} streams, more than the {MAX_FLOWS} one file may hold")
    rows = keep[np.argsort(code, kind="stable")]  # file rows grouped by stream, file order within
    code_s = np.sort(code, kind="stable")
    bounds = np.flatnonzero(np.r_[True, code_s[1:] != code_s[:-1], True])
    lengths = t1[keep] - t0[keep]
    interval_s = nominal_interval(lengths)
    if interval_s is None:
        raise IngestError(source, "has no interval of positive length", field="interval")
    precision = 0.001 if has_frac[keep].all() else 1.0
    udp = width == UDP_FIELDS
    id_counts = {}
    for k in keys:
        id_counts[k[2]] = id_counts.get(k[2], 0) + 1

    flows: list[FlowPart] = []
    starts: list[float] = []
    dropped = 0
    for g, k in enumerate(keys):
        mine = rows[bounds[g]:bounds[g + 1]]
        end_bps = math.nan
        a, b = t0[mine], t1[mine]
        last = mine[-1]
        repeats = bool(((a[:-1] == a[-1]) & (b[:-1] == b[-1])).any())
        if len(mine) > 0 and a[-1] == 0 and ((b[-1] - a[-1]) > 1.5 * interval_s or repeats):
            end_bps = float(bps[last])  # the 0.0-T end-of-test total
            mine = mine[:-1]
        if not len(mine):
            raise IngestError(source, f"has no interval row for stream ID {k[2]} ({k[0]} -> {k[1]}), only its "
                              "total; was it recorded without -i?")
        a, b = t0[mine], t1[mine]
        # Each interval must start where the previous ended (iperf2 writes them in order).
        dup = (a[1:] == a[:-1]) & (b[1:] == b[:-1])
        if dup.any():
            r = int(mine[np.flatnonzero(dup)[0] + 1])
            raise IngestError(source, f"repeats the interval {a[np.flatnonzero(dup)[0]]:g}-{b[np.flatnonzero(dup)[0]]:g} s "
                              f"of stream ID {k[2]}, so it would count twice", line=_line_of(body, r), field="interval")
        overlap = a[1:] < b[:-1] - 1e-6
        if overlap.any():
            j = int(np.flatnonzero(overlap)[0])
            raise IngestError(source, f"has an interval {a[j + 1]:g}-{b[j + 1]:g} s of stream ID {k[2]} that starts "
                              f"before the previous one ends ({b[j]:g} s); intervals must follow each other",
                              line=_line_of(body, int(mine[j + 1])), field="interval")
        if len(mine) > 1 and b[-1] - a[-1] < REMAINDER_FRACTION * interval_s:
            mine = mine[:-1]
            dropped += 1
        # The row's wall-clock stamp is written just after the interval ends, so
        # stamp - end bounds the stream's start from below (to the stamp precision).
        starts.append(float(np.max(epoch[mine] - t1[mine])))
        label_key = k[2] if id_counts[k[2]] == 1 else f"{k[2]}@{k[0]}"
        flows.append(FlowPart(
            key=label_key,
            samples=samples_frame({"t": t1[mine], "throughput_bps": bps[mine]}),
            start_s=0.0,
            extra={"protocol": "UDP" if udp else "TCP", "role": None, "sending": None,
                   "stream": int(k[2]), "end_bps": end_bps, "src": k[0], "dst": k[1]},
        ))
    if dropped:
        notes.append(f"{source}: dropped the short final remainder interval of {dropped} stream(s) "
                     f"(shorter than half the {interval_s:g}-s reporting interval)")
    # Streams of one -P client start together; a spread within the stamp precision is rounding.
    epoch0 = min(starts)
    if max(starts) - epoch0 > precision + 0.5:
        for f, s0 in zip(flows, starts):
            f.start_s = s0 - epoch0
        notes.append(f"{source}: streams started at different times; placed by their wall-clock stamps "
                     f"(precision {precision:g} s)")
    for f in flows:
        f.samples["t"] = f.samples["t"] + f.start_s
    notes.append(f"{source}: iperf2 CSV does not say whether the client or the server wrote it; samples are the rate "
                 "that end saw, and its end-of-test totals are in end_bps")
    first_dt = datetime.fromtimestamp(epoch0, tz=timezone.utc).replace(tzinfo=None)
    meta = {
        "path": source,
        "format": "iperf2 -y C",
        "tool": "iperf2",
        "tool_version": None,  # iperf2 CSV does not record it
        "host": None,
        "time": first_dt.isoformat(timespec="seconds") + " (local time of the recording host; zone not recorded)",
        "epoch_s": epoch0,
        "protocol": flows[0].extra["protocol"],
        "interval_s": interval_s,
        "streams": len(flows),
        "sha256": sha256(data),
    }
    return FilePart(source=source, fmt="iperf2", family="iperf2", flows=flows, epoch_s=epoch0,
                    epoch_precision_s=precision, interval_s=interval_s, meta=meta, notes=notes)


def _line_of(body: bytes, row: int) -> int:
    """1-based line of data row ``row`` (empty lines are skipped by the reader).
    Only called to name a line in an error."""
    k = -1
    for lineno, line in enumerate(body.split(b"\n"), 1):
        if line.strip():
            k += 1
            if k == row:
                return lineno
    return 0


def _locate(body: bytes, source: str, width: int, arrow_msg: str) -> IngestError:
    """One sentence for the first row that pyarrow could not read, found by a scan with
    the per-row checks (only on this error path)."""
    text = body.decode("utf-8", errors="replace")
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        fields = [f.strip() for f in line.split(",")]
        if len(fields) < TCP_FIELDS:
            return IngestError(source, f"has {len(fields)} comma-separated fields, but an iperf2 -y C row has "
                               f"{TCP_FIELDS} (TCP) or {UDP_FIELDS} (UDP); the file may be cut off or not iperf2 CSV",
                               line=lineno)
        if len(fields) != width:
            return IngestError(source, f"has {len(fields)} fields where the first row has {width}; one file holds "
                               "rows of one kind", line=lineno)
        if not TIMESTAMP.match(fields[0]):
            return IngestError(source, f"does not start with an iperf2 timestamp YYYYMMDDhhmmss[.mmm] (got {fields[0]!r})",
                               line=lineno, field="timestamp")
        _epoch(fields[0], source, lineno)
        _int(fields[5], source, lineno, "id")
        _number(fields[7], source, lineno, "bytes")
        _number(fields[8], source, lineno, "bits_per_second")
    return IngestError(source, f"cannot be read as iperf2 CSV ({arrow_msg.splitlines()[0] if arrow_msg else 'unknown'})")


def _epoch(stamp: str, source: str, line: int) -> float:
    whole, _, frac = stamp.partition(".")
    try:
        dt = datetime.strptime(whole, "%Y%m%d%H%M%S").replace(tzinfo=timezone.utc)
    except ValueError:
        raise IngestError(source, f"is not a valid date and time (got {stamp!r})", line=line, field="timestamp") from None
    return dt.timestamp() + (float("0." + frac) if frac else 0.0)


def _number(text: str, source: str, line: int, name: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise IngestError(source, f"must be a number, not {text!r}", line=line, field=name) from None
    if not math.isfinite(v):
        raise IngestError(source, f"must be finite, not {text!r}", line=line, field=name)
    return v


def _int(text: str, source: str, line: int, name: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise IngestError(source, f"must be an integer, not {text!r}", line=line, field=name) from None
    if not -2**63 <= v < 2**63:
        raise IngestError(source, f"is out of range (got {text!r}; allowed: a 64-bit integer)", line=line, field=name)
    return v
