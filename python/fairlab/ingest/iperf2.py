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

from ._common import FilePart, FlowPart, decode_text, nominal_interval, samples_frame, sha256
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
    """Parse one iperf2 ``-y C`` file."""
    text = decode_text(source, data)
    rows: list[dict[str, Any]] = []
    widths: set[int] = set()
    sums = 0
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        fields = [f.strip() for f in line.split(",")]
        if len(fields) < TCP_FIELDS:
            raise IngestError(source, f"has {len(fields)} comma-separated fields, but an iperf2 -y C row has "
                              f"{TCP_FIELDS} (TCP) or {UDP_FIELDS} (UDP); the file may be cut off or not iperf2 CSV",
                              line=lineno)
        if not TIMESTAMP.match(fields[0]):
            raise IngestError(source, f"does not start with an iperf2 timestamp YYYYMMDDhhmmss[.mmm] (got {fields[0]!r})",
                              line=lineno, field="timestamp")
        widths.add(len(fields))
        m = INTERVAL.match(fields[6])
        if not m:
            raise IngestError(source, f"must look like 'start-end' in seconds (got {fields[6]!r})", line=lineno,
                              field="interval")
        row = {
            "line": lineno,
            "epoch": _epoch(fields[0], source, lineno),
            "frac": "." in fields[0],
            "src": f"{fields[1]}:{fields[2]}",
            "dst": f"{fields[3]}:{fields[4]}",
            "id": _int(fields[5], source, lineno, "id"),
            "t0": float(m.group(1)),
            "t1": float(m.group(2)),
            "bytes": _number(fields[7], source, lineno, "bytes"),
            "bps": _number(fields[8], source, lineno, "bits_per_second"),
            "udp": len(fields) == UDP_FIELDS,
        }
        if row["bps"] < 0 or row["bytes"] < 0:
            raise IngestError(source, "must not be negative", line=lineno, field="bits_per_second")
        if row["t1"] < row["t0"]:
            raise IngestError(source, f"ends before it starts ({fields[6]!r})", line=lineno, field="interval")
        if row["id"] == -1:
            sums += 1  # iperf 2.0.x's [SUM] row: the sum over streams is not a flow
            continue
        rows.append(row)
    if not rows and not sums:
        raise IngestError(source, "is empty")
    if not rows:
        raise IngestError(source, "holds only sum rows (ID -1) and no per-stream rows, so there is no flow to import")
    notes: list[str] = []
    if sums:
        notes.append(f"{source}: skipped {sums} sum row(s) (ID -1): the sum over streams is not a flow")
    if max(widths) > UDP_FIELDS or (max(widths) > TCP_FIELDS and max(widths) != UDP_FIELDS):
        notes.append(f"{source}: ignored the fields after bits_per_second on rows with {sorted(widths)} fields "
                     "(a newer iperf2's extended CSV)")

    # ---- streams: keyed by the 5-tuple; label key is the iperf2 ID when unique
    keys: list[tuple[str, str, int]] = []
    for r in rows:
        k = (r["src"], r["dst"], r["id"])
        if k not in keys:
            keys.append(k)
    ids = [k[2] for k in keys]
    lengths = [r["t1"] - r["t0"] for r in rows]
    interval_s = nominal_interval([x for x in lengths if x > 0])
    if interval_s is None:
        raise IngestError(source, "has no interval of positive length", field="interval")
    precision = 0.001 if all(r["frac"] for r in rows) else 1.0

    flows: list[FlowPart] = []
    starts: list[float] = []
    dropped = 0
    for key in keys:
        mine = [r for r in rows if (r["src"], r["dst"], r["id"]) == key]
        end_bps = math.nan
        samples = []
        for r in mine:
            length = r["t1"] - r["t0"]
            repeats = any((q["t0"], q["t1"]) == (r["t0"], r["t1"]) for q in samples)
            if r is mine[-1] and r["t0"] == 0 and (length > 1.5 * interval_s or repeats):
                end_bps = r["bps"]  # the 0.0-T end-of-test total
                continue
            samples.append(r)
        if not samples:
            raise IngestError(source, f"has no interval row for stream ID {key[2]} ({key[0]} -> {key[1]}), only its "
                              "total; was it recorded without -i?")
        if len(samples) > 1 and samples[-1]["t1"] - samples[-1]["t0"] < REMAINDER_FRACTION * interval_s:
            samples = samples[:-1]
            dropped += 1
        # The row's wall-clock stamp is written just after the interval ends, so
        # stamp - end bounds the stream's start from below (to the stamp precision).
        starts.append(max(r["epoch"] - r["t1"] for r in samples))
        cols = {"t": [r["t1"] for r in samples], "throughput_bps": [r["bps"] for r in samples]}
        label_key = str(key[2]) if ids.count(key[2]) == 1 else f"{key[2]}@{key[0]}"
        flows.append(FlowPart(
            key=label_key,
            samples=samples_frame(cols),
            start_s=0.0,
            extra={"protocol": "UDP" if samples[0]["udp"] else "TCP", "role": None, "sending": None,
                   "stream": key[2], "end_bps": end_bps, "src": key[0], "dst": key[1]},
        ))
    if dropped:
        notes.append(f"{source}: dropped the short final remainder interval of {dropped} stream(s) "
                     f"(shorter than half the {interval_s:g}-s reporting interval)")
    # Streams of one -P client start together; a spread within the stamp precision is rounding.
    epoch = min(starts)
    if max(starts) - epoch > precision + 0.5:
        for f, s in zip(flows, starts):
            f.start_s = s - epoch
        notes.append(f"{source}: streams started at different times; placed by their wall-clock stamps "
                     f"(precision {precision:g} s)")
    for f in flows:
        f.samples["t"] = f.samples["t"] + f.start_s
    notes.append(f"{source}: iperf2 CSV does not say whether the client or the server wrote it; samples are the rate "
                 "that end saw, and its end-of-test totals are in end_bps")
    first = datetime.fromtimestamp(epoch, tz=timezone.utc).replace(tzinfo=None)
    meta = {
        "path": source,
        "format": "iperf2 -y C",
        "tool": "iperf2",
        "tool_version": None,  # iperf2 CSV does not record it
        "host": None,
        "time": first.isoformat(timespec="seconds") + " (local time of the recording host; zone not recorded)",
        "epoch_s": epoch,
        "protocol": flows[0].extra["protocol"],
        "interval_s": interval_s,
        "streams": len(flows),
        "sha256": sha256(data),
    }
    return FilePart(source=source, fmt="iperf2", family="iperf2", flows=flows, epoch_s=epoch,
                    epoch_precision_s=precision, interval_s=interval_s, meta=meta, notes=notes)


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
        return int(text)
    except ValueError:
        raise IngestError(source, f"must be an integer, not {text!r}", line=line, field=name) from None
