"""iperf3 JSON: ``-J`` documents and ``--json-stream`` lines (iperf3 >= 3.17).

Read this first — what iperf3 writes (checked against real files from iperf 3.12
and 3.21, see examples/README.md) and what we take from it:

- ``start.timestamp``: ``timesecs`` (Unix seconds, whole) and, from 3.20 on,
  ``timemillisecs``. iperf3 stamps it when the control connection is made
  (``iperf_on_connect``), a few round trips before the first interval starts.
  Several files are lined up on it, so the alignment precision is 1 s with
  ``timesecs`` only and ~the set-up time (ms) with ``timemillisecs``.
- ``start.test_start``: protocol, num_streams, duration, omit, reverse, blksize,
  target_bitrate (and ``interval`` from 3.17 on).
- ``intervals[i].streams[k]``: ``start``/``end``/``seconds`` (relative to the
  test start), ``bits_per_second``, and on a TCP SENDER ``snd_cwnd`` (bytes),
  ``rtt``/``rttvar`` (µs) and ``retransmits``; ``omitted`` and ``sender`` flags.
  ``intervals[i].sum`` is the sum over streams: not a flow.
- ``-O n`` omitted intervals are dropped; iperf3 restarts its interval clock when
  the omit period ends, so later intervals are shifted by it to stay on the test's
  own timeline.
- The last interval is often a remainder a few ms long (``10.00-10.04``): dropped
  when shorter than half the reporting interval, and said so in the notes.
- ``end.streams[k]``: TCP ``sender``/``receiver`` summaries (``bits_per_second``,
  ``min_rtt`` …), UDP one ``udp`` summary. A side the file's host did not measure
  is written as 0 bytes (the server does not learn the client's totals): we keep
  NaN there, never 0.
- ``end.sender_tcp_congestion``: the sender's congestion control, present where
  the file's host knows it (client files; a server's own file when it sent, -R).
- ``error``: refused, quoting it.
"""

from __future__ import annotations

import json
import math
from typing import Any

from ._common import MAX_ABS_TIME_S, MAX_RATE_BPS, FilePart, FlowPart, decode_text, nominal_interval, samples_frame, sha256
from .errors import IngestError

#: The top-level objects of an ``iperf3 -J`` document.
TOP_KEYS = ("start", "intervals", "end")
#: Events of ``--json-stream`` output (iperf3 3.17+); others are refused by name.
STREAM_EVENTS = ("start", "interval", "end", "error", "server_output_json", "server_output_text")
#: A final interval shorter than this fraction of the reporting interval is dropped.
REMAINDER_FRACTION = 0.5


# --------------------------------------------------------------------- entry points
def parse(data: bytes, source: str) -> FilePart:
    """Parse one ``iperf3 -J`` document (client or server side, TCP or UDP)."""
    text = decode_text(source, data)
    stripped = text.strip()
    if not stripped:
        raise IngestError(source, "is empty")
    try:
        doc = _loads(stripped, source)
    except json.JSONDecodeError as exc:
        raise _json_error(source, stripped, exc) from None
    part = parse_document(doc, source, fmt="iperf3")
    part.meta["sha256"] = sha256(data)
    return part


def parse_stream(data: bytes, source: str) -> FilePart:
    """Parse ``iperf3 --json-stream`` output: one ``{"event": ..., "data": ...}`` per line."""
    text = decode_text(source, data)
    lines = text.splitlines()
    doc: dict[str, Any] = {"intervals": []}
    seen_end = False
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = _loads(line, source, line=lineno)
        except json.JSONDecodeError as exc:
            last = all(not rest.strip() for rest in lines[lineno:])
            what = ("ends in a cut-off line, so iperf3 was probably killed before it finished"
                    if last else f"is not one JSON object per line ({exc.msg})")
            raise IngestError(source, what, line=lineno) from None
        if not isinstance(obj, dict) or "event" not in obj or "data" not in obj:
            raise IngestError(source, 'is not an iperf3 --json-stream event (expected {"event": ..., "data": ...})',
                              line=lineno)
        event = obj["event"]
        if event == "start":
            doc["start"] = obj["data"]
        elif event == "interval":
            doc["intervals"].append(obj["data"])
        elif event == "end":
            doc["end"] = obj["data"]
            seen_end = True
        elif event == "error":
            doc["error"] = obj["data"]
        elif event in ("server_output_json", "server_output_text"):
            doc.setdefault("_ignored_events", []).append(event)
        else:
            raise IngestError(source, f"has an unknown --json-stream event {event!r}", line=lineno,
                              allowed=STREAM_EVENTS)
    if "error" in doc:
        raise _error_refusal(source, doc)
    if "start" not in doc:
        raise IngestError(source, "has no 'start' event, so it is not complete iperf3 --json-stream output")
    if not seen_end:
        raise IngestError(source, f"stops after {len(doc['intervals'])} interval event(s) without the 'end' event, "
                          "so iperf3 was probably killed before it finished")
    ignored = doc.pop("_ignored_events", [])
    part = parse_document(doc, source, fmt="iperf3-stream")
    if ignored:
        part.notes.append(f"{source}: ignored the {', '.join(sorted(set(ignored)))} event(s) (the server's own report)")
    part.meta["sha256"] = sha256(data)
    return part


# --------------------------------------------------------------------- the document
def parse_document(doc: Any, source: str, *, fmt: str) -> FilePart:
    """Turn one iperf3 result object (``{"start", "intervals", "end"}``) into a `FilePart`."""
    if not isinstance(doc, dict) or not all(k in doc for k in TOP_KEYS):
        if isinstance(doc, dict) and "error" in doc:
            raise _error_refusal(source, doc)
        raise IngestError(source, "is JSON but not iperf3 -J output: it lacks the top-level "
                          "'start', 'intervals' and 'end' objects iperf3 writes")
    if "error" in doc:
        raise _error_refusal(source, doc)
    start = _obj(doc, "start", source)
    end = _obj(doc, "end", source)
    intervals = doc["intervals"]
    if not isinstance(intervals, list):
        raise IngestError(source, "must be a list", field="intervals")
    if not intervals:
        raise IngestError(source, "has zero intervals: iperf3 recorded no data (the test ended before its "
                          "first reporting interval, or never started)")
    ts = start.get("test_start") if isinstance(start.get("test_start"), dict) else {}
    protocol = str(ts.get("protocol", "TCP")).upper()
    role = "client" if "connecting_to" in start else ("server" if "accepted_connection" in start else None)
    notes: list[str] = []

    # ---- per-interval stream records, in file order
    rows: list[tuple[int, dict[str, Any]]] = []  # (interval index, stream record)
    for i, iv in enumerate(intervals):
        if not isinstance(iv, dict) or not isinstance(iv.get("streams"), list):
            raise IngestError(source, "must be an object with a 'streams' list", field=f"intervals[{i}]")
        seen: set[float] = set()
        for k, st in enumerate(iv["streams"]):
            where = f"intervals[{i}].streams[{k}]"
            if not isinstance(st, dict):
                raise IngestError(source, "must be an object", field=where)
            sock, a, b, _sec, _bps = (_num(st, name, source, where)
                                      for name in ("socket", "start", "end", "seconds", "bits_per_second"))
            if b < a:
                raise IngestError(source, f"ends ({b:g} s) before it starts ({a:g} s)", field=where)
            if sock in seen:
                # Several streams under one socket id would merge into one flow (J = 1 by construction).
                raise IngestError(source, f"lists socket {sock:g} twice in one interval, so two streams cannot be told "
                                  "apart", field=f"{where}.socket")
            seen.add(sock)
            rows.append((i, st))
    if not rows:
        raise IngestError(source, "has intervals but no stream in any of them, so there is nothing to import")

    # ---- omitted (-O) intervals
    by_ix: dict[int, list[dict[str, Any]]] = {}
    for i, st in rows:
        by_ix.setdefault(i, []).append(st)
    omitted_ix = sorted({i for i, st in rows if st.get("omitted") is True})
    omitted_set = set(omitted_ix)
    kept_ix = [i for i in sorted(by_ix) if i not in omitted_set]
    if not kept_ix:
        raise IngestError(source, f"has only omitted (-O) intervals ({len(omitted_ix)}), so no measured data")
    omit_offset = 0.0
    if omitted_ix:
        last_omit_end = max(float(st["end"]) for st in by_ix[omitted_ix[-1]])
        first_kept_start = min(float(st["start"]) for st in by_ix[kept_ix[0]])
        # iperf3 resets its interval clock when the omit period ends (seen in 3.12 and 3.21).
        if first_kept_start < last_omit_end - 1e-3:
            omit_offset = last_omit_end
        notes.append(f"{source}: dropped {len(omitted_ix)} omitted (-O) warm-up interval(s) covering "
                     f"0-{last_omit_end:.3f} s; iperf3 restarts its interval clock after them, so later samples "
                     f"were shifted by {omit_offset:.3f} s onto the test's own timeline")

    # ---- reporting interval and the short remainder at the end
    durations = {i: [float(st["seconds"]) for st in by_ix[i]] for i in kept_ix}
    declared = _finite(ts.get("interval"))
    if declared is not None and declared > MAX_INTERVAL_S:
        raise IngestError(source, f"declares a reporting interval of {declared:g} s (allowed: up to {MAX_INTERVAL_S:g} s)",
                          field="start.test_start.interval")
    if declared is not None and declared > 0:
        interval_s = declared
    else:
        body = [d for i in kept_ix[:-1] for d in durations[i]] or durations[kept_ix[-1]]
        interval_s = nominal_interval(body) or float(durations[kept_ix[-1]][0])
    last = kept_ix[-1]
    last_len = max(durations[last])
    if len(kept_ix) > 1 and last_len < REMAINDER_FRACTION * interval_s:
        lo = min(float(st["start"]) for st in by_ix[last]) + omit_offset
        hi = max(float(st["end"]) for st in by_ix[last]) + omit_offset
        notes.append(f"{source}: dropped the final {last_len:.3f}-s remainder interval ({lo:.3f}-{hi:.3f} s), "
                     f"shorter than half the {interval_s:g}-s reporting interval; a rate over a few ms is noise")
        kept_ix = kept_ix[:-1]
    kept = set(kept_ix)

    # ---- streams: one flow each, in order of first appearance
    per_socket: dict[int, list[tuple[int, dict[str, Any]]]] = {}
    for i, st in rows:  # dicts keep insertion order: streams in order of first appearance
        per_socket.setdefault(int(st["socket"]), []).append((i, st))
    order = list(per_socket)
    end_summary = _end_summaries(end, protocol, source)
    sender_cca = end.get("sender_tcp_congestion") if isinstance(end.get("sender_tcp_congestion"), str) else None
    flows: list[FlowPart] = []
    for n, sock in enumerate(order, 1):
        mine = per_socket[sock]
        sending = _sending(mine[0][1], role, ts)
        cols: dict[str, list[Any]] = {k: [] for k in ("t", "throughput_bps", "cwnd_bytes", "srtt_s", "rttvar_s",
                                                       "retransmits")}
        prev_end = -math.inf
        for i, st in mine:
            if i not in kept:
                continue
            a = float(st["start"])
            if a < prev_end - 1e-3:
                # A repeated or overlapping interval would count the same bytes twice.
                raise IngestError(source, f"has an interval {a:g}-{float(st['end']):g} s of stream {n} that starts "
                                  f"before its previous interval ends ({prev_end:g} s); intervals must follow each other",
                                  field=f"intervals[{i}]")
            prev_end = float(st["end"])
            cols["t"].append(float(st["end"]) + omit_offset)
            cols["throughput_bps"].append(float(st["bits_per_second"]))
            tcp_sender = protocol == "TCP" and sending
            cols["cwnd_bytes"].append(_positive(st.get("snd_cwnd")) if tcp_sender else math.nan)
            cols["srtt_s"].append(_positive(st.get("rtt")) / 1e6 if tcp_sender else math.nan)
            cols["rttvar_s"].append(_positive(st.get("rttvar")) / 1e6 if tcp_sender else math.nan)
            r = st.get("retransmits")
            rx = _finite(r)
            cols["retransmits"].append(int(rx) if tcp_sender and rx is not None and 0 <= rx <= 2**53 else None)
        summ = end_summary.get(sock, {})
        moved = any((_finite(st.get("bytes")) or 0) > 0 for _, st in mine)
        snd_bps = _measured(summ.get("sender"), moved)
        rcv_bps = _measured(summ.get("receiver"), moved)
        if protocol == "UDP" and len(order) == 1 and isinstance(end.get("sum_received"), dict):
            rcv_bps = _measured(end["sum_received"], moved)
        extra: dict[str, Any] = {
            "protocol": protocol,
            "role": role,
            "sending": sending,
            "stream": n,
            "socket": sock,
            "end_sender_bps": snd_bps,
            "end_receiver_bps": rcv_bps,
        }
        sender_side = summ.get("sender") if isinstance(summ.get("sender"), dict) else {}
        min_rtt = _positive(sender_side.get("min_rtt")) / 1e6
        extra["mean_rtt_s"] = _positive(sender_side.get("mean_rtt")) / 1e6
        if protocol == "UDP" and isinstance(summ.get("udp"), dict):
            lost = summ["udp"].get("lost_percent")
            if len(order) == 1 and isinstance(end.get("sum_received"), dict):
                lost = end["sum_received"].get("lost_percent", lost)
            lx = _finite(lost)
            extra["end_lost_percent"] = lx if lx is not None and 0 <= lx <= 100 else math.nan
        first_start = float(mine[0][1]["start"])
        flows.append(FlowPart(
            key=str(n),
            samples=samples_frame(cols),
            start_s=first_start,
            cca=sender_cca if protocol == "TCP" else None,
            rtt_s=min_rtt,
            extra=extra,
        ))
        if cols["throughput_bps"] and max(cols["throughput_bps"]) == 0:
            what = "UDP flow" if protocol == "UDP" else "flow"
            notes.append(f"{source}: stream {n} is a {what} with no throughput at all (bits_per_second is 0 in every "
                         "interval); check that its packets reached the receiver")

    # ---- notes the reader needs
    if protocol == "TCP" and sender_cca is None:
        notes.append(f"{source}: the file does not name the sender's congestion control (a server-side file of a "
                     "normal-direction test lacks end.sender_tcp_congestion), so cca is unknown")
    if protocol == "UDP" and any(f.extra["sending"] for f in flows):
        notes.append(f"{source}: UDP sender-side intervals give the rate OFFERED, not what arrived; "
                     "end_receiver_bps holds what the receiver got")
    if not end_summary:
        notes.append(f"{source}: the end summary is missing, so end_sender_bps and end_receiver_bps are unknown")
    if protocol == "UDP" and len(order) > 1:
        notes.append(f"{source}: iperf3's UDP end summary gives no per-stream receiver totals, so end_receiver_bps "
                     "is NaN for each of the streams")
    if "server_output_json" in doc or "server_output_text" in doc:
        notes.append(f"{source}: ignored the server's own report embedded by --get-server-output")
    if role == "server":
        notes.append(f"{source}: a server-side file: iperf3's server does not learn the client's own totals, "
                     "so the summary side it did not measure is NaN")

    # ---- provenance
    stamp = start.get("timestamp") if isinstance(start.get("timestamp"), dict) else {}
    epoch, precision = None, None
    millis, secs = _finite(stamp.get("timemillisecs")), _finite(stamp.get("timesecs"))
    for name, value, scale in (("timemillisecs", millis, 1000.0), ("timesecs", secs, 1.0)):
        if name in stamp and (value is None or not 0 <= value / scale <= MAX_ABS_TIME_S):
            raise IngestError(source, f"is out of range ({_short(stamp[name])}; allowed: Unix time 0 to "
                              f"{MAX_ABS_TIME_S:g} s{' in ms' if scale > 1 else ''})", field=f"start.timestamp.{name}")
    if millis is not None:
        epoch, precision = millis / 1000.0, 0.001
        if secs is not None and abs(secs - epoch) >= 1.0:
            notes.append(f"{source}: start.timestamp.timesecs ({secs:.0f}) and timemillisecs ({millis:.0f}) disagree "
                         f"by {abs(secs - epoch):.1f} s; the milliseconds were used")
    elif secs is not None:
        epoch, precision = secs, 1.0
    meta = {
        "path": source,
        "format": "iperf3 --json-stream" if fmt == "iperf3-stream" else "iperf3 -J",
        "tool": "iperf3",
        "tool_version": start.get("version"),
        "host": start.get("system_info"),
        "time": stamp.get("time"),
        "epoch_s": epoch,
        "epoch_precision_s": precision,
        "role": role,
        "protocol": protocol,
        "test_start": ts,
        "command": _command(start, ts, role, sender_cca),
        "interval_s": interval_s,
        "cookie": start.get("cookie") if isinstance(start.get("cookie"), str) else None,
    }
    for key in ("connecting_to", "accepted_connection"):
        if isinstance(start.get(key), dict):
            meta[key] = start[key]
    if isinstance(start.get("connected"), list) and start["connected"]:
        c0 = start["connected"][0]
        if isinstance(c0, dict):
            meta["local"] = f"{c0.get('local_host')}:{c0.get('local_port')}"
            meta["remote"] = f"{c0.get('remote_host')}:{c0.get('remote_port')}"
    return FilePart(source=source, fmt=fmt, family="iperf3", flows=flows, epoch_s=epoch,
                    epoch_precision_s=precision, interval_s=interval_s, meta=meta, notes=notes)


# --------------------------------------------------------------------- helpers
#: Longest reporting interval accepted (iperf3 itself allows -i up to 60 s).
MAX_INTERVAL_S = 3600.0


def _loads(text: str, source: str, *, line: int | None = None) -> Any:
    """json.loads that refuses NaN/Infinity (not JSON, though Python reads them) and
    documents nested too deeply for the parser (iperf3 nests 4 levels; the C decoder
    raises RecursionError near 1,000), each in one sentence."""

    def constant(name: str) -> Any:
        raise IngestError(source, f"holds {name}, which is not a JSON number (iperf3 writes finite numbers only)",
                          line=line)

    try:
        return json.loads(text, parse_constant=constant)
    except RecursionError:
        raise IngestError(source, "nests JSON objects or lists too deeply to read, which iperf3 never does",
                          line=line) from None


def _json_error(source: str, text: str, exc: json.JSONDecodeError) -> IngestError:
    if exc.msg == "Extra data":
        count = _count_documents(text)
        if count > 1:
            return IngestError(source, f"holds {count} iperf3 JSON documents one after another (an 'iperf3 -s -J' "
                               "server without -1 writes one per test); split it into one file per test")
    if exc.pos >= len(text) - 1 or exc.msg.startswith(("Expecting", "Unterminated")) and exc.pos >= len(text) - 64:
        return IngestError(source, f"is cut off: the JSON ends at line {exc.lineno} before the document is closed "
                           "(was iperf3 killed before it finished?)")
    return IngestError(source, f"is not valid JSON ({exc.msg} at column {exc.colno})", line=exc.lineno)


def _count_documents(text: str) -> int:
    dec, pos, n = json.JSONDecoder(), 0, 0
    while pos < len(text):
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            break
        try:
            _, pos = dec.raw_decode(text, pos)
        except json.JSONDecodeError:
            break
        n += 1
    return n


def _error_refusal(source: str, doc: dict[str, Any]) -> IngestError:
    err = doc.get("error")
    n = len(doc.get("intervals") or [])
    after = f" after {n} interval(s)" if n else ""
    return IngestError(source, f"records an iperf3 error{after}: {str(err)!r}")


def _obj(doc: dict[str, Any], key: str, source: str) -> dict[str, Any]:
    v = doc[key]
    if not isinstance(v, dict):
        raise IngestError(source, "must be a JSON object", field=key)
    return v


def _num(st: dict[str, Any], name: str, source: str, where: str) -> float:
    v = st.get(name)
    x = _finite(v)
    if x is None:
        got = "missing" if name not in st else _short(v)
        raise IngestError(source, f"must be a finite number, not {got}", field=f"{where}.{name}")
    if name in ("bits_per_second", "start", "end", "seconds") and x < 0:
        raise IngestError(source, f"must not be negative (got {_short(v)})", field=f"{where}.{name}")
    if name == "bits_per_second" and x > MAX_RATE_BPS:
        raise IngestError(source, f"is {x:g} bit/s, more than any link carries (the ceiling is {MAX_RATE_BPS:g} bit/s)",
                          field=f"{where}.{name}")
    if name in ("start", "end", "seconds") and x > MAX_ABS_TIME_S:
        raise IngestError(source, f"is out of range ({x:g} s; allowed: 0 to {MAX_ABS_TIME_S:g} s)", field=f"{where}.{name}")
    if name == "socket" and (x != int(x) or abs(x) > 2**31):
        raise IngestError(source, f"must be a socket number (a whole number), not {_short(v)}", field=f"{where}.{name}")
    return x


def _finite(v: Any) -> float | None:
    """``v`` as a finite float, or None (booleans, text, NaN, inf, ints too big for a float)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    try:
        x = float(v)
    except OverflowError:
        return None
    return x if math.isfinite(x) else None


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


def _positive(v: Any) -> float:
    """A positive number, or NaN: iperf3 writes 0 for a cwnd/RTT it could not read."""
    x = _finite(v)
    return x if x is not None and x > 0 else math.nan


def _sending(st: dict[str, Any], role: str | None, ts: dict[str, Any]) -> bool | None:
    if isinstance(st.get("sender"), bool):
        return st["sender"]
    if role is None:
        return None
    reverse = bool(ts.get("reverse"))
    return (role == "client") != reverse


def _end_summaries(end: dict[str, Any], protocol: str, source: str) -> dict[int, dict[str, Any]]:
    """socket -> {"sender": {...}, "receiver": {...}} (TCP) or {"sender": udp, "udp": udp} (UDP)."""
    out: dict[int, dict[str, Any]] = {}
    streams = end.get("streams")
    if not isinstance(streams, list):
        return out
    for k, entry in enumerate(streams):
        if not isinstance(entry, dict):
            raise IngestError(source, "must be an object", field=f"end.streams[{k}]")
        if isinstance(entry.get("udp"), dict):
            udp = entry["udp"]
            sock = _finite(udp.get("socket"))
            # The udp summary's bits_per_second is the SENDER's (0 bytes on a server file).
            out[int(sock) if sock is not None and sock == int(sock) else k] = {"sender": udp, "udp": udp}
            continue
        sides = {s: entry[s] for s in ("sender", "receiver") if isinstance(entry.get(s), dict)}
        if sides:
            sock = _finite(next(iter(sides.values())).get("socket", k))
            if sock is None or sock != int(sock):
                raise IngestError(source, "must be a socket number (a whole number)", field=f"end.streams[{k}].socket")
            out[int(sock)] = sides
    return out


def _measured(side: Any, moved: bool) -> float:
    """A summary's bits_per_second, or NaN when that side was not measured in this file."""
    if not isinstance(side, dict):
        return math.nan
    bps, nbytes = _finite(side.get("bits_per_second")), side.get("bytes")
    if bps is None or bps < 0 or bps > MAX_RATE_BPS:
        return math.nan  # not a rate a link carries: unknown, never printed as if measured
    if moved and (nbytes == 0 or bps == 0):
        return math.nan  # written as 0 because this host never learned it
    return bps


def _command(start: dict[str, Any], ts: dict[str, Any], role: str | None, cca: str | None) -> str | None:
    """A reconstruction of the command line from what the file records (iperf3 does
    not save argv); options it cannot see (e.g. -i, -w) are absent."""
    if role == "server":
        return "iperf3 -s (server side of: " + (_client_opts(ts, cca) or "?") + ")"
    if role != "client":
        return None
    to = start.get("connecting_to") if isinstance(start.get("connecting_to"), dict) else {}
    return f"iperf3 -c {to.get('host', '?')} -p {to.get('port', '?')} {_client_opts(ts, cca)}".strip()


def _client_opts(ts: dict[str, Any], cca: str | None) -> str:
    parts = []
    if str(ts.get("protocol", "")).upper() == "UDP":
        parts.append("-u")
    if ts.get("target_bitrate"):
        parts.append(f"-b {ts['target_bitrate']}")
    if ts.get("num_streams", 1) != 1:
        parts.append(f"-P {ts['num_streams']}")
    if ts.get("duration"):
        parts.append(f"-t {ts['duration']}")
    if ts.get("bytes"):
        parts.append(f"-n {ts['bytes']}")
    if ts.get("omit"):
        parts.append(f"-O {ts['omit']}")
    if ts.get("reverse"):
        parts.append("-R")
    if ts.get("bidir"):
        parts.append("--bidir")
    if cca and str(ts.get("protocol", "TCP")).upper() == "TCP":
        parts.append(f"(congestion control {cca})")
    return " ".join(parts)
