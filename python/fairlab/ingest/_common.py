"""What every format parser hands back to `fairlab.ingest.load`, plus small helpers.

A parser reads ONE file into a `FilePart`: its flows, each with samples whose time
``t`` is the END of the interval in seconds from the file's own zero, and — where the
file says it — the absolute time of that zero (``epoch_s``), which `load` uses to
line several files up on one timeline.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .errors import IngestError

#: The largest rate any importer accepts, in bit/s: 10 Tbit/s, ten times the fastest
#: Ethernet standard (IEEE 802.3df, 800 Gbit/s) with room to spare. A larger value is
#: a unit mistake or a corrupt file, never a measurement (docs/ingest.md).
MAX_RATE_BPS = 10e12
#: Sample times (seconds, relative or Unix) must lie within ±this: 1e10 s is the year
#: 2286 as a Unix time, and keeps microsecond resolution in a float64.
MAX_ABS_TIME_S = 1e10
#: Flows one file may hold (the scenario schema's `count` bound).
MAX_FLOWS = 100_000
#: Largest input file read, in bytes: beyond this a measurement log is almost surely
#: not one, and reading it whole would exhaust memory (docs/ingest.md).
MAX_FILE_BYTES = 2 * 1024**3

#: Sample columns a parser may fill (others are NaN / <NA>); names as in `fairlab.trace`.
SAMPLE_FIELDS = ("t", "throughput_bps", "cwnd_bytes", "srtt_s", "rttvar_s", "retransmits")


@dataclass
class FlowPart:
    """One flow of one file."""

    key: str  # names the flow inside its file: stream number, iperf2 ID, CSV flow value
    samples: pd.DataFrame | None  # SAMPLE_FIELDS, t from the file's zero [+ run]; None when FilePart.table holds them
    start_s: float  # when the flow started, relative to the file's zero
    cca: str | None = None
    rtt_s: float = math.nan
    extra: dict[str, Any] = field(default_factory=dict)  # extra flow-table columns


@dataclass
class FilePart:
    """One parsed file."""

    source: str
    fmt: str  # "iperf3", "iperf3-stream", "iperf2", "csv", "parquet"
    family: str  # files of one family can be aligned together: "iperf3", "iperf2", "table"
    flows: list[FlowPart]
    epoch_s: float | None = None  # absolute time (Unix seconds) of the file's zero, if known
    epoch_precision_s: float | None = None
    interval_s: float | None = None
    meta: dict[str, Any] = field(default_factory=dict)  # per-file provenance
    notes: list[str] = field(default_factory=list)
    #: Optional: every sample of the file in one frame (SAMPLE_FIELDS + run +
    #: ``flow_index``, an index into `flows`), used by large tables instead of one
    #: frame per flow so that nothing is copied or filtered per flow.
    table: pd.DataFrame | None = None


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def samples_frame(rows: dict[str, list[Any]]) -> pd.DataFrame:
    """A samples frame from column lists; missing columns become NaN / <NA>."""
    n = len(rows["t"])
    out = {}
    for name in SAMPLE_FIELDS:
        vals = rows.get(name)
        if name == "retransmits":
            out[name] = pd.array(vals if vals is not None else [pd.NA] * n, dtype="Int64")
        else:
            out[name] = np.asarray(vals if vals is not None else [math.nan] * n, dtype=float)
    for name, vals in rows.items():
        if name not in out:
            out[name] = vals
    return pd.DataFrame(out)


#: How far a measured interval may run from the round value it was asked for: iperf's
#: timer-driven intervals run long on a busy host (1.0014 s seen for ``-i 1`` while
#: both cores were loaded), never by half a percent of a sensible ``-i``.
INTERVAL_SNAP = 0.005


def nominal_interval(durations: Any) -> float | None:
    """The reporting interval asked for: the median of the interval lengths, snapped to
    the roundest value (whole seconds, then tenths, hundredths, milliseconds) within
    `INTERVAL_SNAP` of it (iperf's intervals run a few µs to ms long: 1.000166 s and,
    on a loaded host, 1.0014 s are 1 s intervals)."""
    d = np.asarray(durations, dtype=float)
    d = d[(d > 0) & np.isfinite(d)]
    if not d.size:
        return None
    med = float(np.median(d))
    for decimals in range(4):
        r = round(med, decimals)
        if r > 0 and abs(med - r) <= INTERVAL_SNAP * med:
            return r
    return round(med, 3) if med >= 0.01 else med


def decode_text(source: str, data: bytes) -> str:
    """UTF-8 text of a file, refusing binary content with a reason."""
    if b"\x00" in data[:4096]:
        raise IngestError(source, "is a binary file, not a text measurement log")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise IngestError(source, f"is not UTF-8 text (undecodable byte at offset {exc.start})") from None
