"""One finished run as read from the store: its verified files, parsed only as far as
the reader needs.

Why this exists (issue 15 item 5): the end of a campaign reads every run once more to
build the catalog and aggregate the conditions. Most of that needs the run's
``run.json`` (task, backend facts, the summary the worker computed) and two or three
columns of its tables, not a whole `Trace`; turning the Parquet files into pandas
frames and checking them (`Trace.from_tables`) costs about 20 ms of CPU a run, ten
times the rest. A `StoredRun` verifies the checksums once, when it is made, and then
parses each part on first use.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..trace import Trace

RUN_JSON = "run.json"
TABLES = ("samples", "flows", "bottleneck")


def read_parquet_bytes(data: bytes, columns: list[str] | None = None) -> pa.Table:
    """A Parquet file held in memory as an Arrow table.

    `pyarrow.parquet.ParquetFile` rather than `read_table`: the latter goes through
    the dataset layer, whose fixed cost (about 2.5 ms a call) is four times the read
    of a run's small files. The table (schema metadata included) is the same."""
    return pq.ParquetFile(pa.BufferReader(data)).read(columns=columns, use_threads=False)


class StoredRun:
    """The files of run ``key``, already verified (`Store.open_run` makes these)."""

    def __init__(self, key: str, files: dict[str, bytes]):
        self.key = key
        self._files = files
        self._meta: dict[str, Any] | None = None

    @property
    def meta(self) -> dict[str, Any]:
        """run.json's metadata: task, summary, backend facts."""
        if self._meta is None:
            self._meta = json.loads(self._files[RUN_JSON])["meta"]
        return self._meta

    def columns(self, table: str, names: list[str]) -> dict[str, np.ndarray] | None:
        """The named columns of one table as NumPy arrays (nulls as NaN, so ask only
        for float or non-null columns), in file order; None when the table or a
        column is absent (the caller then reads the whole `trace`)."""
        data = self._files.get(f"{table}.parquet")
        if data is None:
            return None
        pf = pq.ParquetFile(pa.BufferReader(data))
        present = set(pf.schema_arrow.names)  # schema_arrow is rebuilt on each access
        if not present.issuperset(names):
            return None
        t = pf.read(columns=names, use_threads=False)  # see read_parquet_bytes
        return {n: t.column(n).to_numpy() for n in names}

    def trace(self) -> Trace:
        """The whole run as a `Trace`, parsed anew on each call (not kept: a campaign's
        worth of Traces would sit in memory; a caller that needs it twice keeps it)."""
        tables = {}
        for name in TABLES:
            data = self._files.get(f"{name}.parquet")
            if data is not None:
                t = read_parquet_bytes(data)
                tables[name] = t.drop_columns(["run_key"]) if "run_key" in t.column_names else t
        return Trace.from_tables(tables["samples"], tables["flows"], tables.get("bottleneck"), self.meta)
