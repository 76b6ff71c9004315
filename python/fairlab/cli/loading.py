"""Load the files a command was given into one Trace."""

from __future__ import annotations

from pathlib import Path

from ..trace import Trace, TraceError


def _is_fairlab_trace(path: Path) -> bool:
    try:
        if path.suffix != ".parquet" or not path.is_file():
            return False
    except (OSError, ValueError):  # NUL or over-long names: the importer explains
        return False
    import pyarrow.parquet as pq

    try:
        md = pq.read_schema(path).metadata or {}
    except Exception:  # not Parquet at all: let the importer explain
        return False
    return b"fairlab.format_version" in md


def load_inputs(files: list[Path], *, labels: list[str] | None = None, unit: str | None = None,
                offsets: list[float] | None = None) -> Trace:
    """A fairlab trace (.parquet written by `fairlab run`) is read as is; anything else
    goes through `fairlab.ingest.load`, which sniffs the format and refuses what it
    cannot read with a reason."""
    files = [Path(f) for f in files]
    traces = [f for f in files if _is_fairlab_trace(f)]
    if traces:
        if len(files) > 1:
            raise TraceError("give one fairlab trace (.parquet) at a time, not mixed with other files")
        return Trace.from_parquet(files[0])
    from ..ingest import load

    return load([str(f) for f in files], labels=labels, unit=unit, offsets=offsets)
