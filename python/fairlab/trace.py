"""The one data model: a `Trace` of per-flow time series plus flow metadata.

Read this first (DESIGN.md, "One data model"):

- ``samples``: a tidy table, one row per (run, flow, t). ``t`` is seconds from the
  earliest flow's start and is the END of the sample's interval, as iperf reports it.
  Columns: run, flow, t, throughput_bps, and the optional cwnd_bytes, srtt_s,
  rttvar_s, retransmits (missing values are <NA>/NaN, never 0).
- ``flows``: one row per flow: flow, label, cca, rtt_s, start_s, source.
- ``bottleneck``: optional router-side samples: run, t, queue_bytes, queue_pkts,
  drops, marks (drops/marks counted during the interval ending at t).
- ``meta``: run metadata (tool, tool_version, host, kernel, command, time,
  interval_s, ...), JSON-serialisable.

Backends and importers produce a Trace; metrics and reports consume it. The aligned
time x flow matrix (`Trace.matrix`) is what metrics take: a flow that has not started
(or has stopped) at a grid time is ABSENT there (NaN), never zero — a zero means the
flow was running and delivered nothing.
"""

from __future__ import annotations

import base64
import io
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

#: Version of the Parquet layout written by `Trace.to_parquet`. Readers refuse newer
#: files and say so (STYLE.md §14).
FORMAT_VERSION = 1

SAMPLE_COLUMNS: dict[str, str] = {
    "run": "int64",
    "flow": "int64",
    "t": "float64",
    "throughput_bps": "float64",
    "cwnd_bytes": "float64",
    "srtt_s": "float64",
    "rttvar_s": "float64",
    "retransmits": "Int64",
}
FLOW_COLUMNS: dict[str, str] = {
    "flow": "int64",
    "label": "string",
    "cca": "string",
    "rtt_s": "float64",
    "start_s": "float64",
    "source": "string",
}
BOTTLENECK_COLUMNS: dict[str, str] = {
    "run": "int64",
    "t": "float64",
    "queue_bytes": "float64",
    "queue_pkts": "float64",
    "drops": "Int64",
    "marks": "Int64",
}
_REQUIRED_SAMPLE = ("run", "flow", "t", "throughput_bps")
_REQUIRED_FLOW = ("flow", "label")


class TraceError(ValueError):
    """A Trace could not be built or read; the message says what is wrong."""


def _conform(df: pd.DataFrame, columns: dict[str, str], required: tuple[str, ...], what: str) -> pd.DataFrame:
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise TraceError(f"{what} table lacks required column(s) {missing}; required: {list(required)}")
    n = len(df)
    cols: dict[str, Any] = {}
    for col, dtype in columns.items():
        if col in df.columns:
            values = df[col]
            if str(values.dtype) == dtype:
                cols[col] = values.to_numpy(copy=False) if dtype in ("int64", "float64") else values.array
                continue
        elif dtype == "float64":  # absent optional column: NaN, made without a per-value object array
            cols[col] = np.full(n, np.nan)
            continue
        elif dtype == "Int64":
            cols[col] = pd.arrays.IntegerArray(np.zeros(n, dtype=np.int64), np.ones(n, dtype=bool))
            continue
        else:
            values = pd.Series(pd.NA, index=df.index, dtype="object")
        try:
            cols[col] = values.astype(dtype).array
        except (TypeError, ValueError) as exc:
            raise TraceError(f"{what} column {col!r} cannot be read as {dtype}: {exc}") from None
    # Extra columns are kept after the standard ones (e.g. flow state, drops by reason).
    for col in df.columns:
        if col not in columns:
            cols[col] = df[col].array
    # One constructor call: building the frame column by column is quadratic in pandas.
    return pd.DataFrame(cols, index=pd.RangeIndex(n), copy=False)


@dataclass(frozen=True)
class Trace:
    """Per-flow samples, a flow table, optional bottleneck samples and run metadata."""

    samples: pd.DataFrame
    flows: pd.DataFrame
    bottleneck: pd.DataFrame | None = None
    meta: dict[str, Any] = field(default_factory=dict)

    # ------------------------------------------------------------------ building
    @classmethod
    def from_frames(
        cls,
        samples: pd.DataFrame,
        flows: pd.DataFrame,
        bottleneck: pd.DataFrame | None = None,
        meta: dict[str, Any] | None = None,
    ) -> Trace:
        """Validate and normalise column types; refuse inconsistent input with a reason."""
        s = _conform(samples, SAMPLE_COLUMNS, _REQUIRED_SAMPLE, "samples")
        f = _conform(flows, FLOW_COLUMNS, _REQUIRED_FLOW, "flows")
        b = None if bottleneck is None else _conform(bottleneck, BOTTLENECK_COLUMNS, ("run", "t"), "bottleneck")
        if f["flow"].duplicated().any():
            dup = sorted(f.loc[f["flow"].duplicated(), "flow"].unique().tolist())
            raise TraceError(f"flow table lists flow id(s) {dup} more than once")
        unknown = sorted(set(s["flow"].unique().tolist()) - set(f["flow"].tolist()))
        if unknown:
            raise TraceError(f"samples refer to flow id(s) {unknown} that are not in the flow table")
        if not np.isfinite(s["t"].to_numpy()).all():
            raise TraceError("sample times must be finite numbers of seconds")
        tp = s["throughput_bps"].to_numpy()
        if np.isnan(tp).any() or (tp < 0).any():
            raise TraceError("throughput_bps must be a non-negative number in every sample")
        if not _is_sorted(s, ("run", "flow", "t")):
            s = s.sort_values(["run", "flow", "t"], kind="stable").reset_index(drop=True)
        f = f.sort_values("flow", kind="stable").reset_index(drop=True)
        if b is not None:
            b = b.sort_values(["run", "t"], kind="stable").reset_index(drop=True)
        return cls(samples=s, flows=f, bottleneck=b, meta=dict(meta or {}))

    # ------------------------------------------------------------------ facts
    @property
    def runs(self) -> list[int]:
        """Run numbers present in the samples, ascending."""
        return sorted(int(r) for r in self.samples["run"].unique())

    @property
    def labels(self) -> dict[int, str]:
        """Flow id → label."""
        # Whole-column tolist(): iterating the Series element by element costs ~1 µs a
        # flow, which adds up for callers that look labels up across 10,000 flows.
        return dict(zip(self.flows["flow"].astype("int64").tolist(), self.flows["label"].astype(str).tolist()))

    @property
    def interval(self) -> float:
        """Sampling interval in seconds: ``meta['interval_s']`` if given, else the
        median spacing of consecutive samples of one flow."""
        if "interval_s" in self.meta and self.meta["interval_s"]:
            return float(self.meta["interval_s"])
        d = self.samples.groupby(["run", "flow"])["t"].diff().dropna()
        d = d[d > 0]
        if d.empty:
            raise TraceError("cannot tell the sampling interval: no flow has two samples and meta lacks interval_s")
        return float(d.median())

    # ------------------------------------------------------------------ views
    def window(self, start: float | None = None, end: float | None = None) -> Trace:
        """The samples whose interval lies (mostly) inside [start, end].

        A sample at ``t`` covers (t − Δ, t] (Δ = `interval`); it is kept when more
        than half of that interval lies in the window, i.e. when its midpoint
        t − Δ/2 falls in (start, end]. On the simulator's exact grid this is the
        familiar ``start < t <= end``; on iperf's stamps, which run 25–230 µs past the
        whole second, it keeps [60, 61] … [299, 300] for ``window(60, 300)`` instead of
        the interval before each of them. ``None`` leaves that side open. Without a
        known Δ (one sample per flow and no ``meta['interval_s']``) the end stamp
        itself is compared."""
        lo = -math.inf if start is None else float(start)
        hi = math.inf if end is None else float(end)
        if not hi > lo:
            raise TraceError(f"window end ({hi:g} s) must be after its start ({lo:g} s)")
        try:
            half = self.interval / 2.0
        except TraceError:
            half = 0.0
        s = self.samples[_midpoint_inside(self.samples["t"].to_numpy(), half, lo, hi)]
        b = self.bottleneck
        if b is not None:
            b = b[_midpoint_inside(b["t"].to_numpy(), half, lo, hi)].reset_index(drop=True)
        meta = dict(self.meta)
        meta["window"] = [None if start is None else lo, None if end is None else hi]
        return Trace(samples=s.reset_index(drop=True), flows=self.flows, bottleneck=b, meta=meta)

    def matrix(self, run: int | None = None, column: str = "throughput_bps") -> pd.DataFrame:
        """An aligned time × flow table of ``column`` for one run.

        Alignment rule: samples are placed on the grid t_k = k·Δ (Δ = `interval`) at
        the NEAREST grid point; two samples of one flow landing on the same point are
        averaged. A flow with no sample at a grid point is absent there (NaN), not
        zero. Columns are every flow of the flow table, in flow-id order, so a flow
        with no sample in the window still appears (all NaN).
        """
        runs = self.runs
        if run is None:
            if len(runs) > 1:
                raise TraceError(f"this trace holds runs {runs}; pass run= to choose one")
            run = runs[0] if runs else 0
        # One run (the usual case): no boolean copy of every column of the samples.
        s = self.samples if runs == [run] else self.samples[self.samples["run"] == run]
        flows = self.flows["flow"].astype("int64").to_numpy()
        if s.empty:
            return pd.DataFrame(columns=pd.Index(flows.tolist(), name="flow"), index=pd.Index([], name="t", dtype=float),
                                dtype=float)
        dt = self.interval
        # Grid row and flow column of every sample, then sums and counts per cell with
        # bincount: the mean of a cell's non-missing values, NaN where it has none —
        # what groupby(["k", "flow"]).mean().unstack() gives, without its per-group
        # index (which for 10^7 samples costs gigabytes).
        k = np.rint(s["t"].to_numpy() / dt).astype(np.int64)
        grid_k, row = np.unique(k, return_inverse=True)
        col = np.searchsorted(flows, s["flow"].to_numpy())
        v = s[column].to_numpy(dtype=float, na_value=np.nan)
        cell = row.ravel() * len(flows) + col
        ok = ~np.isnan(v)
        size = len(grid_k) * len(flows)
        sums = np.bincount(cell[ok], weights=v[ok], minlength=size)
        counts = np.bincount(cell[ok], minlength=size)
        with np.errstate(invalid="ignore", divide="ignore"):
            values = (sums / counts).reshape(len(grid_k), len(flows))
        return pd.DataFrame(values, index=pd.Index(grid_k * dt, name="t"), columns=pd.Index(flows.tolist(), name="flow"))

    def flow_means(self, run: int | None = None) -> pd.Series:
        """Mean throughput (bit/s) of each flow over the samples held (window first to
        restrict), indexed by flow id; a flow with no samples gets NaN."""
        s = self.samples if run is None else self.samples[self.samples["run"] == run]
        means = s.groupby("flow")["throughput_bps"].mean()
        return means.reindex(self.flows["flow"].astype(int).tolist()).rename("mean_bps")

    # ------------------------------------------------------------------ pandas / parquet
    def to_pandas(self) -> pd.DataFrame:
        """Samples joined with the flow table: one tidy frame for pandas users."""
        return self.samples.merge(self.flows, on="flow", how="left")

    def tables(self) -> dict[str, pa.Table]:
        """The samples, flow and (when present) bottleneck tables as ordinary Arrow
        tables, each readable on its own by any Parquet tool; pandas dtypes (Int64,
        string) ride in each table's standard pandas schema metadata, so
        `from_tables` gives back exactly this Trace. The campaign store writes one
        Parquet file per table."""
        out = {
            "samples": pa.Table.from_pandas(self.samples, preserve_index=False),
            "flows": pa.Table.from_pandas(self.flows, preserve_index=False),
        }
        if self.bottleneck is not None:
            out["bottleneck"] = pa.Table.from_pandas(self.bottleneck, preserve_index=False)
        return out

    @classmethod
    def from_tables(cls, samples: pa.Table, flows: pa.Table, bottleneck: pa.Table | None = None,
                    meta: dict[str, Any] | None = None) -> Trace:
        """The Trace whose `tables` these are."""
        return cls.from_frames(samples.to_pandas(), flows.to_pandas(),
                               None if bottleneck is None else bottleneck.to_pandas(), meta)

    def _arrow_table(self) -> pa.Table:
        table = pa.Table.from_pandas(self.samples, preserve_index=False)
        extra = {
            b"fairlab.format_version": str(FORMAT_VERSION).encode(),
            b"fairlab.flows": _ipc_encode(self.flows),
            b"fairlab.meta": json.dumps(self.meta, sort_keys=True, default=str).encode(),
        }
        if self.bottleneck is not None:
            extra[b"fairlab.bottleneck"] = _ipc_encode(self.bottleneck)
        return table.replace_schema_metadata({**(table.schema.metadata or {}), **extra})

    def to_parquet(self, path: str | Path) -> Path:
        """Write one Parquet file: the samples as the table; the flow table,
        bottleneck samples and metadata in the file's key-value metadata (Arrow IPC,
        so dtypes survive exactly). Written to a temporary name and renamed, so a
        reader never sees half a file."""
        path = Path(path)
        tmp = path.with_name(path.name + ".tmp")
        try:
            pq.write_table(self._arrow_table(), tmp)
            tmp.replace(path)
        except OSError as exc:
            # A full disk or a read-only directory: no half-written file, one sentence.
            tmp.unlink(missing_ok=True)
            raise TraceError(f"{path}: cannot write the trace ({exc.strerror or exc}); free space or choose another --out") from None
        return path

    def to_parquet_bytes(self) -> bytes:
        """The same file as `to_parquet`, in memory (for shipping between processes)."""
        sink = pa.BufferOutputStream()
        pq.write_table(self._arrow_table(), sink)
        return sink.getvalue().to_pybytes()

    @classmethod
    def from_parquet(cls, path: str | Path | pa.BufferReader) -> Trace:
        """Read a file written by `to_parquet`; refuses other Parquet files and newer
        format versions with a reason."""
        try:
            table = pq.read_table(path if isinstance(path, pa.BufferReader) else Path(path))
        except (OSError, pa.ArrowInvalid) as exc:
            raise TraceError(f"{path}: not a readable Parquet file ({exc})") from None
        md = table.schema.metadata or {}
        if b"fairlab.format_version" not in md:
            raise TraceError(f"{path}: a Parquet file, but not a fairlab trace (no fairlab metadata)")
        version = int(md[b"fairlab.format_version"])
        if version > FORMAT_VERSION:
            raise TraceError(f"{path}: trace format version {version} is newer than this fairlab reads ({FORMAT_VERSION}); upgrade fairlab")
        samples = table.replace_schema_metadata(None).to_pandas()
        flows = _ipc_decode(md[b"fairlab.flows"])
        bottleneck = _ipc_decode(md[b"fairlab.bottleneck"]) if b"fairlab.bottleneck" in md else None
        meta = json.loads(md[b"fairlab.meta"])
        return cls.from_frames(samples, flows, bottleneck, meta)

    @classmethod
    def from_parquet_bytes(cls, data: bytes) -> Trace:
        """Read what `to_parquet_bytes` wrote."""
        return cls.from_parquet(pa.BufferReader(data))

    def __repr__(self) -> str:
        n_flows = len(self.flows)
        return (
            f"Trace({n_flows} flow{'s' if n_flows != 1 else ''}, {len(self.samples)} samples, "
            f"runs={self.runs}, bottleneck={'yes' if self.bottleneck is not None else 'no'})"
        )

    def _repr_html_(self) -> str:
        from .report.notebook import trace_html

        return trace_html(self)


def _is_sorted(df: pd.DataFrame, keys: tuple[str, ...]) -> bool:
    """True if ``df`` is already ordered by ``keys`` (lexicographically), so the copy
    a sort makes can be skipped for the large, usually ordered, imported tables."""
    return is_sorted_by([df[key].to_numpy(dtype=float, na_value=np.nan) for key in keys])


def is_sorted_by(columns: list[np.ndarray]) -> bool:
    """True if rows are ordered lexicographically by ``columns`` (equal-length
    arrays, most significant first): the order `Trace.from_frames` gives samples."""
    if not columns or len(columns[0]) < 2:
        return True
    order_ok = np.zeros(len(columns[0]) - 1, dtype=bool)
    tied = np.ones(len(columns[0]) - 1, dtype=bool)
    for col in columns:
        d = np.diff(np.asarray(col, dtype=float))
        order_ok |= tied & (d > 0)
        tied &= d == 0
    return bool(np.all(order_ok | tied))


def _midpoint_inside(t: np.ndarray, half: float, lo: float, hi: float) -> np.ndarray:
    """Rows whose interval (t − 2·half, t] has its midpoint in (lo, hi]; the 1-ns
    slack absorbs float noise in grid times such as 0.1·k."""
    mid = t - half
    return (mid > lo + 1e-9) & (mid <= hi + 1e-9)


def _ipc_encode(df: pd.DataFrame) -> bytes:
    sink = io.BytesIO()
    table = pa.Table.from_pandas(df, preserve_index=False)
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return base64.b64encode(sink.getvalue())


def _ipc_decode(blob: bytes) -> pd.DataFrame:
    with pa.ipc.open_stream(io.BytesIO(base64.b64decode(blob))) as reader:
        return reader.read_all().to_pandas()


def concat(traces: list[Trace], *, renumber_runs: bool = True) -> Trace:
    """Stack traces of the SAME flows (repeated runs) into one; runs are renumbered
    0..n-1 in the given order unless ``renumber_runs`` is false."""
    if not traces:
        raise TraceError("nothing to concatenate")
    first = traces[0]
    parts, bparts = [], []
    for i, tr in enumerate(traces):
        if not tr.flows[["flow", "label"]].equals(first.flows[["flow", "label"]]):
            raise TraceError(f"trace {i} has different flows from trace 0; only repeated runs of one set-up can be stacked")
        s = tr.samples.copy()
        if renumber_runs:
            s["run"] = i
        parts.append(s)
        if tr.bottleneck is not None:
            b = tr.bottleneck.copy()
            if renumber_runs:
                b["run"] = i
            bparts.append(b)
    return Trace.from_frames(pd.concat(parts, ignore_index=True), first.flows, pd.concat(bparts, ignore_index=True) if bparts else None, first.meta)
