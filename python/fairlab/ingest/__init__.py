"""Importers: measurement files in, one `fairlab.trace.Trace` out.

Read this first:

- ``load(paths, *, labels=None, fmt="auto", unit=None) -> Trace`` is the one entry
  point. ``paths`` is a path, a file-like object (binary or text, with ``.read()``),
  or a list of them. Each file's format is sniffed from its CONTENT (never its
  name) unless ``fmt`` names one of `FORMATS`.
- Formats: iperf3 ``-J`` JSON (client or server side, TCP or UDP, ``-R``, ``-P``;
  `fairlab.ingest.iperf3`), iperf3 ``--json-stream`` lines (iperf3 >= 3.17),
  iperf2 ``-y C`` CSV (`fairlab.ingest.iperf2`), plain CSV / Parquet tables of
  ``time, flow, throughput`` with a stated unit (`fairlab.ingest.csv`), and a
  Parquet file written by `Trace.to_parquet` (read back as is).
- One flow per stream per file. Labels: the file name's stem (or ``labels[i]``);
  a file holding several streams gives ``<label>#<k>`` (k = stream number 1..N in
  iperf3's order, the iperf2 ID, or the table's flow value).
- Several files are lined up by the absolute start time each records (iperf3
  ``start.timestamp``, iperf2 row stamps), then shifted so the EARLIEST flow
  starts at t = 0. Sample time t is the END of its interval. The precision of
  this alignment is in ``meta["alignment"]`` (1 s for iperf3 < 3.20, which writes
  whole seconds only). iperf2 stamps are local time with no zone, so iperf2 files
  are not mixed with iperf3 ones; plain tables carry no clock and are not mixed
  with either.
- Nothing is dropped silently: every dropped interval, ignored field or unknown
  value is in ``meta["notes"]``. Input that cannot be read correctly is refused
  with an `IngestError` whose message is one sentence naming the file.
- Provenance per file is in ``meta["sources"]`` (path, format, tool version, host,
  time, role, reconstructed command, sha256); ``meta["tool"]``,
  ``meta["tool_version"]``, ``meta["host"]``, ``meta["time"]``,
  ``meta["interval_s"]`` summarise them.

``INGEST_FORMAT_VERSION`` versions the meaning of the produced columns and notes.
"""

from __future__ import annotations

import io
import math
import os
import stat
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, BinaryIO, TextIO, Union

import pandas as pd

from ..trace import Trace, TraceError
from . import csv as csv_table
from . import iperf2, iperf3
from ._common import MAX_FILE_BYTES, FilePart

#: Largest offset `load(offsets=...)` takes, in seconds (a week).
MAX_OFFSET_S = 7 * 86400.0
from .errors import IngestError

__all__ = ["FORMATS", "INGEST_FORMAT_VERSION", "IngestError", "load", "sniff"]

#: Version of what `load` produces (columns, notes, meta keys). Bump on change.
INGEST_FORMAT_VERSION = 1

#: Accepted values of ``fmt``.
FORMATS = ("auto", "iperf3", "iperf3-stream", "iperf2", "csv", "parquet")

Source = Union[str, os.PathLike, BinaryIO, TextIO]

_PCAP_MAGIC = (b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\xc3\xd4", b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d", b"\x0a\x0d\x0d\x0a")


def load(
    paths: Source | Sequence[Source],
    *,
    labels: Sequence[str] | None = None,
    fmt: str = "auto",
    unit: str | None = None,
    offsets: Sequence[float] | None = None,
) -> Trace:
    """Read one or several measurement files into one `Trace` (see the module doc).

    ``offsets`` (seconds, one per file) places each file's own zero — its test start,
    iperf3's interval 0 — on a common timeline instead of the start times the files
    record; use it when the recording hosts' clocks disagree or when a launcher knows
    the start times better than the files do."""
    if fmt not in FORMATS:
        raise IngestError("fmt", f"{fmt!r} is not a format this importer reads", allowed=FORMATS)
    items = _as_list(paths)
    if not items:
        raise IngestError("paths", "is an empty list, so there is no file to read")
    if offsets is not None:
        offsets = list(offsets)
        if len(offsets) != len(items):
            raise IngestError("offsets", f"gives {len(offsets)} offset(s) for {len(items)} file(s); give one per file")
        for x in offsets:
            if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or abs(x) > MAX_OFFSET_S:
                raise IngestError("offsets", f"{x!r} is not an offset in seconds (allowed: finite, within "
                                  f"±{MAX_OFFSET_S:g} s)")
    if labels is not None:
        labels = list(labels)
        if len(labels) != len(items):
            raise IngestError("labels", f"gives {len(labels)} label(s) for {len(items)} file(s); give one per file")
        if any(not isinstance(x, str) or not x for x in labels):
            raise IngestError("labels", "must be non-empty strings")
    names = [_name(item, i) for i, item in enumerate(items)]
    file_labels = labels or [_stem(name) for name in names]
    dup = sorted({x for x in file_labels if file_labels.count(x) > 1})
    if dup:
        raise IngestError(names[0] if len(names) == 1 else "labels",
                          f"the label(s) {dup} would name flows of more than one file; pass labels=[...] to tell them apart")

    parts: list[FilePart] = []
    # One file in memory at a time: each file's bytes are dropped once it is parsed.
    for i, item in enumerate(items):
        name, data = _read(item, i)
        kind = sniff(data, name) if fmt == "auto" else fmt
        if unit is not None and kind not in ("csv", "parquet"):
            raise IngestError(name, f"is {kind} output, which states its own unit (bits/s); unit= is only for plain "
                              "CSV/Parquet tables")
        if kind == "parquet" and _is_fairlab_trace(data):
            if len(items) > 1:
                raise IngestError(name, "is a fairlab trace (written by Trace.to_parquet) and cannot be merged with "
                                  "other files; load it on its own")
            return _load_trace_file(name, data)
        parts.append(_parse(kind, data, name, unit))
        del data

    families = sorted({p.family for p in parts})
    if len(families) > 1:
        raise IngestError(", ".join(p.source for p in parts),
                          f"mix {' and '.join(families)} files, whose clocks cannot be lined up (iperf2 stamps are "
                          "local time without a zone; plain tables have no clock); load each kind on its own")
    return _assemble(parts, file_labels, [float(x) for x in offsets] if offsets is not None else None,
                     own_names=labels is None and len(parts) == 1)


def sniff(data: bytes, source: str = "<input>") -> str:
    """Name the format of ``data`` from its content, or refuse it with a reason."""
    if not data.strip():
        raise IngestError(source, "is empty")
    head = data[:8192]
    if head.startswith(b"PAR1"):
        return "parquet"
    if head[:4] in _PCAP_MAGIC:
        raise IngestError(source, "is a packet capture (pcap/pcapng), not a throughput log; export per-flow "
                          "throughput as CSV (time,flow,throughput_bps) or record with iperf3 -J")
    if b"\x00" in head:
        raise IngestError(source, "is a binary file of unknown kind", allowed=_ALLOWED_DESC)
    text = head.decode("utf-8", errors="replace").lstrip("\ufeff")
    stripped = text.lstrip()
    first = stripped.splitlines()[0] if stripped else ""
    if stripped.startswith("{"):
        if first.strip().startswith('{"event"') or '"event"' in first[:40]:
            return "iperf3-stream"
        return "iperf3"
    if stripped.startswith("["):
        raise IngestError(source, "is a JSON array, not iperf3 output (iperf3 -J writes one object)",
                          allowed=_ALLOWED_DESC)
    if iperf2.looks_like(first):
        return "iperf2"
    if csv_table.header_looks_like(first):
        return "csv"
    low = text.lower()
    if "[ id]" in low and ("client connecting to" in low or "server listening on" in low) \
            or ("------------------------------------------------------------" in text and "tcp window size" in low):
        raise IngestError(source, "is an iperf2 human-readable report; rerun iperf2 with -y C (and -i) for CSV")
    if "connecting to host" in low or ("[ id] interval" in low and "bitrate" in low) or "server listening on 52" in low:
        raise IngestError(source, "is iperf3 text output; rerun iperf3 with -J (or --json-stream) for JSON")
    if first.startswith("PING ") or ("bytes from" in low and "icmp_seq" in low):
        raise IngestError(source, "looks like a ping log, which has no per-flow throughput", allowed=_ALLOWED_DESC)
    raise IngestError(source, "is not a format this importer recognises", allowed=_ALLOWED_DESC)


_ALLOWED_DESC = ("iperf3 -J JSON", "iperf3 --json-stream", "iperf2 -y C CSV",
                 "CSV/Parquet with time,flow,throughput columns")


# --------------------------------------------------------------------- reading
def _as_list(paths: Source | Sequence[Source]) -> list[Source]:
    if isinstance(paths, (str, os.PathLike)) or hasattr(paths, "read"):
        return [paths]  # type: ignore[list-item]
    if isinstance(paths, Iterable):
        return list(paths)
    raise IngestError("paths", f"must be a path, a file-like object or a list of them, not {type(paths).__name__}")


def _name(item: Source, i: int) -> str:
    if hasattr(item, "read"):
        return str(getattr(item, "name", f"<input {i + 1}>"))
    if not isinstance(item, (str, os.PathLike)):
        raise IngestError(f"<input {i + 1}>", f"is a {type(item).__name__}, not a path or file-like object")
    return _printable(str(Path(item)))


def _printable(name: str) -> str:
    """A file name fit for a one-line message: control characters escaped, and cut
    to 200 characters (a 4,000-character name would drown the sentence)."""
    shown = name.encode("unicode_escape").decode("ascii") if not name.isprintable() else name
    return shown if len(shown) <= 200 else shown[:100] + "…" + shown[-99:]


def _read(item: Source, i: int) -> tuple[str, bytes]:
    name = _name(item, i)
    if hasattr(item, "read"):
        data = item.read(MAX_FILE_BYTES + 1)  # type: ignore[union-attr]
        if len(data) > MAX_FILE_BYTES:
            raise IngestError(name, f"is larger than {MAX_FILE_BYTES // 2**30} GiB, more than a measurement log this "
                              "importer reads; split it")
        return name, data.encode("utf-8") if isinstance(data, str) else bytes(data)
    raw = os.fspath(item)  # type: ignore[arg-type]
    if isinstance(raw, bytes) or "\x00" in raw:
        raise IngestError(name, "is not a usable file name (it contains a NUL byte)")
    path = Path(raw)
    try:
        st = path.stat()
    except FileNotFoundError:
        raise IngestError(name, "does not exist") from None
    except OSError as exc:  # ENAMETOOLONG, ELOOP, EACCES ...
        raise IngestError(name, f"cannot be opened ({exc.strerror or exc})") from None
    if stat.S_ISDIR(st.st_mode):
        raise IngestError(name, "is a directory, not a file; pass the files in it")
    if not stat.S_ISREG(st.st_mode):
        kind = ("a character device" if stat.S_ISCHR(st.st_mode) else "a block device" if stat.S_ISBLK(st.st_mode)
                else "a FIFO (named pipe)" if stat.S_ISFIFO(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode)
                else "not a regular file")
        raise IngestError(name, f"is {kind}; only regular files are read (a device or pipe may never end)")
    if st.st_size > MAX_FILE_BYTES:
        raise IngestError(name, f"is {st.st_size / 2**30:.1f} GiB, more than the {MAX_FILE_BYTES // 2**30} GiB a "
                          "measurement log this importer reads may have; split it")
    try:
        return name, path.read_bytes()
    except MemoryError:
        raise IngestError(name, "does not fit in memory") from None
    except OSError as exc:
        raise IngestError(name, f"cannot be read ({exc.strerror or exc})") from None


def _stem(name: str) -> str:
    base = Path(name).name if not name.startswith("<") else name.strip("<>").replace(" ", "")
    for suffix in (".json", ".jsonl", ".csv", ".parquet", ".txt", ".log"):
        if base.lower().endswith(suffix):
            return base[: -len(suffix)] or base
    return Path(base).stem or base


def _parse(kind: str, data: bytes, name: str, unit: str | None) -> FilePart:
    if kind == "iperf3":
        return iperf3.parse(data, name)
    if kind == "iperf3-stream":
        return iperf3.parse_stream(data, name)
    if kind == "iperf2":
        return iperf2.parse(data, name)
    if kind == "csv":
        return csv_table.parse_csv(data, name, unit)
    return csv_table.parse_parquet(data, name, unit)


def _is_fairlab_trace(data: bytes) -> bool:
    import pyarrow.parquet as pq

    try:
        md = pq.read_schema(io.BytesIO(data)).metadata or {}
    except Exception:  # not readable: the table parser refuses it with the reason
        return False
    return b"fairlab.format_version" in md


def _load_trace_file(name: str, data: bytes) -> Trace:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / "trace.parquet"
        p.write_bytes(data)
        try:
            return Trace.from_parquet(p)
        except TraceError as exc:
            raise IngestError(name, str(exc).replace(str(p), "the file")) from None


# --------------------------------------------------------------------- assembling
def _assemble(parts: list[FilePart], file_labels: list[str], given: list[float] | None = None, *,
              own_names: bool = False) -> Trace:
    """``own_names``: one plain table and no labels given, so its flows keep the names
    in its `flow` column (with several files, or a label given, they are prefixed
    ``label#name`` so that no two files' flows read alike)."""
    notes: list[str] = [n for p in parts for n in p.notes]
    intervals = {p.source: p.interval_s for p in parts if p.interval_s}
    distinct = sorted({round(v, 3) for v in intervals.values()})  # already snapped to what -i asked for
    if len(distinct) > 1:
        listing = ", ".join(f"{v:g} s in {k}" for k, v in intervals.items())
        raise IngestError(", ".join(intervals), f"report at different intervals ({listing}); one trace needs one "
                          "sampling interval, so record with the same -i")
    interval_s = distinct[0] if distinct else None
    _refuse_same_test_twice(parts)
    offsets, alignment = _align(parts, given, notes)

    sample_parts, flow_rows = [], []
    flow_id = 0
    for p, off, flabel in zip(parts, offsets, file_labels):
        many = len(p.flows) > 1
        if p.table is not None:  # one frame for the whole file: shift it once, no per-flow copies
            s = p.table.drop(columns="flow_index")
            s["t"] = s["t"].to_numpy() + off
            s["flow"] = p.table["flow_index"].to_numpy() + flow_id
            sample_parts.append(s)
        for f in p.flows:
            if p.table is None:
                s = f.samples.copy()
                s["t"] = s["t"] + off
                if "run" not in s.columns:
                    s["run"] = 0
                s["flow"] = flow_id
                sample_parts.append(s)
            row = {
                "flow": flow_id,
                "label": f.key if own_names and p.family == "table" else f"{flabel}#{f.key}" if many else flabel,
                "cca": f.cca if f.cca else pd.NA,
                "rtt_s": f.rtt_s,
                "start_s": f.start_s + off,
                "source": p.source,
                "format": p.fmt,
            }
            row.update(f.extra)
            flow_rows.append(row)
            flow_id += 1
    flows = pd.DataFrame(flow_rows)
    samples = sample_parts[0] if len(sample_parts) == 1 else pd.concat(sample_parts, ignore_index=True)
    # t is measured from the EARLIEST flow's start.
    shift = float(flows["start_s"].min())
    if shift != 0.0 and math.isfinite(shift):
        flows["start_s"] = flows["start_s"] - shift
        samples["t"] = samples["t"].to_numpy() - shift
        if parts[0].family == "table":
            notes.append(f"times shifted by {-shift:g} s so the earliest flow starts at t = 0")
    for col in ("end_sender_bps", "end_receiver_bps", "end_bps", "mean_rtt_s", "end_lost_percent"):
        if col in flows.columns:
            flows[col] = pd.to_numeric(flows[col], errors="coerce").astype(float)
    for col in ("sending",):
        if col in flows.columns:
            flows[col] = flows[col].astype("boolean")
    for col in ("protocol", "role", "format", "src", "dst"):
        if col in flows.columns:
            flows[col] = flows[col].astype("string")

    meta = _meta(parts, interval_s, alignment, notes)
    try:
        return Trace.from_frames(samples, flows, None, meta)
    except TraceError as exc:
        raise IngestError(", ".join(p.source for p in parts), f"could not be turned into a trace: {exc}") from None


def _refuse_same_test_twice(parts: list[FilePart]) -> None:
    """iperf3 writes one random cookie per test into both ends' files: two files
    with one cookie are the client and server view of ONE test, whose streams would
    count twice as separate flows."""
    seen: dict[str, FilePart] = {}
    for p in parts:
        cookie = p.meta.get("cookie")
        if not cookie:
            continue
        if cookie in seen:
            q = seen[cookie]
            skew = ""
            if p.epoch_s is not None and q.epoch_s is not None and abs(p.epoch_s - q.epoch_s) >= 1.0:
                skew = (f"; their start stamps also disagree by {abs(p.epoch_s - q.epoch_s):.1f} s, so the two hosts' "
                        "clocks differ")
            raise IngestError(f"{q.source}, {p.source}", f"record the same iperf3 test (cookie {cookie}) from its two ends, "
                              f"so each stream would count twice; load one side of each test{skew}")
        seen[cookie] = p
    # iperf2 has no cookie, but both ends write the connection's addresses in the
    # same order (client ip:port, server ip:port): one connection in two files is
    # the same stream seen from both ends.
    conns: dict[tuple[str, str], FilePart] = {}
    for p in parts:
        if p.family != "iperf2":
            continue
        for f in p.flows:
            key = (str(f.extra.get("src")), str(f.extra.get("dst")))
            q = conns.get(key)
            if q is not None and q is not p:
                raise IngestError(f"{q.source}, {p.source}", f"record the same iperf2 connection {key[0]} -> {key[1]} "
                                  "(the client's and the server's file of one test), so each stream would count "
                                  "twice; load one side of each test")
            conns[key] = p


def _align(parts: list[FilePart], given: list[float] | None, notes: list[str]) -> tuple[list[float], dict[str, Any]]:
    """Each file's offset (s) on the common timeline and how it was found.

    In order of precision: offsets given by the user (exact as far as fairlab
    knows); iperf3's ``timemillisecs`` (3.20+) or iperf2's ``-e`` stamps (1 ms, plus
    the few round trips between the control connection and the first interval);
    whole-second ``timesecs`` or iperf2 stamps (each truncated to the second, so two
    files' offset is uncertain by up to ±1 s)."""
    n = len(parts)
    stamped = n > 1 and parts[0].family != "table" and all(p.epoch_s is not None for p in parts)
    from_stamps: list[float] | None = None
    precision = max((p.epoch_precision_s or 0.0) for p in parts) if stamped else None
    if stamped:
        base = min(float(p.epoch_s) for p in parts)  # type: ignore[arg-type]
        # Rounded to 1 µs: the stamps have at most ms resolution, and Unix seconds as
        # floats would otherwise leave ~1e-7 s of representation noise in the offsets.
        from_stamps = [round(float(p.epoch_s) - base, 6) for p in parts]  # type: ignore[arg-type]
    if given is not None:
        alignment: dict[str, Any] = {
            "method": "offsets given by the user (--offset)", "uncertainty_s": 0.0, "precision_s": 0.0,
            "offsets_s": {p.source: round(o, 6) for p, o in zip(parts, given)}}
        if from_stamps is not None and precision is not None:
            g0 = [o - given[0] for o in given]
            s0 = [o - from_stamps[0] for o in from_stamps]
            for p, a, b in zip(parts[1:], g0[1:], s0[1:]):
                if abs(a - b) >= max(1.0, 2 * precision):
                    notes.append(f"warning: the given offset of {p.source} relative to {parts[0].source} ({a:g} s) "
                                 f"and the one its start stamps give ({b:g} s) disagree by {abs(a - b):.1f} s")
            alignment["offsets_from_stamps_s"] = {p.source: o for p, o in zip(parts, from_stamps)}
        return list(given), alignment
    if n == 1:
        return [0.0], {"method": "none (one file)", "uncertainty_s": 0.0}
    if parts[0].family == "table":
        return [0.0] * n, {"method": "shared zero (plain tables carry no clock; give --offset to shift a file)",
                           "uncertainty_s": None}
    missing = [p.source for p in parts if p.epoch_s is None]
    if missing:
        raise IngestError(missing[0], "records no start time, so it cannot be lined up with the other files; "
                          "give the offsets yourself (--offset FILE=SECONDS)")
    assert from_stamps is not None and precision is not None
    how = {"iperf3": "start.timestamp of each file (timemillisecs where present, else timesecs)",
           "iperf2": "the wall-clock stamps of each file's rows"}[parts[0].family]
    uncertainty = precision  # each stamp is truncated, so a difference of two is off by less than one step
    alignment = {"method": how, "precision_s": precision, "uncertainty_s": uncertainty,
                 "per_file_precision_s": {p.source: p.epoch_precision_s for p in parts},
                 "offsets_s": {p.source: o for p, o in zip(parts, from_stamps)}}
    if precision >= 1.0:
        coarse = [p.source for p in parts if (p.epoch_precision_s or 0) >= 1.0]
        notes.append(f"files were lined up by start times recorded in whole seconds ({', '.join(coarse)}), so flow "
                     f"start times are good to about ±{precision:g} s (iperf3 writes milliseconds from 3.20 on; "
                     "--offset FILE=SECONDS sets them exactly)")
    return from_stamps, alignment


def _meta(parts: list[FilePart], interval_s: float | None, alignment: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    def one(key: str) -> Any:
        vals = [p.meta.get(key) for p in parts if p.meta.get(key) is not None]
        uniq = list(dict.fromkeys(vals))
        return uniq[0] if len(uniq) == 1 else (uniq or None)

    epochs = [p.epoch_s for p in parts if p.epoch_s is not None]
    time = None
    if epochs and parts[0].family == "iperf3":
        time = datetime.fromtimestamp(min(epochs), tz=timezone.utc).isoformat(timespec="seconds")
    elif epochs:
        time = one("time")
    return {
        "importer": "fairlab.ingest",
        "ingest_format_version": INGEST_FORMAT_VERSION,
        "tool": one("tool"),
        "tool_version": one("tool_version"),
        "host": one("host"),
        "command": one("command"),
        "time": time,
        "interval_s": interval_s,
        "alignment": alignment,
        "sources": [p.meta for p in parts],
        "notes": notes,
    }
