"""Shared helpers for the metrics package: input coercion and JSON-safe result objects.

Conventions used throughout ``fairlab.metrics``:

* A *time x flow matrix* is a 2-D float array, one row per sample time, one column per
  flow, with ``NaN`` where a flow is absent (not yet started or already stopped).
  Absent is NOT zero: a present flow that moved no bytes has throughput ``0.0``.
* Result objects are frozen dataclasses whose numbers are finite floats/ints or
  ``None`` ("no value"); they never hold NaN or +-inf.  ``to_dict()`` gives a
  JSON-ready dict (tuples -> lists, numpy scalars/arrays -> Python numbers/lists).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

#: The string rendered for "no value" in tuples and tables (an em dash).
NO_VALUE = "\u2014"
#: Unicode minus sign used when rendering negative numbers in tuples.
MINUS = "\u2212"


def as_vector(x: Any, name: str = "x", *, allow_nan: bool = True) -> np.ndarray:
    """Coerce ``x`` to a 1-D float64 array; reject +-inf (and NaN if not allowed)."""
    a = np.asarray(x, dtype=np.float64)
    if a.ndim == 0:
        a = a.reshape(1)
    if a.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {a.shape}")
    if np.isinf(a).any():
        raise ValueError(f"{name} contains an infinite value")
    if not allow_nan and np.isnan(a).any():
        raise ValueError(f"{name} contains NaN")
    return a


def as_matrix(m: Any, name: str = "matrix") -> np.ndarray:
    """Coerce ``m`` to a 2-D float64 (time x flow) array; NaN allowed (absent), inf not.

    A 1-D input is taken as a single sample row (1 x n).
    """
    a = np.asarray(m, dtype=np.float64)
    if a.ndim == 1:
        a = a.reshape(1, -1)
    if a.ndim != 2:
        raise ValueError(f"{name} must be 2-D (time x flow), got shape {a.shape}")
    if np.isinf(a).any():
        raise ValueError(f"{name} contains an infinite value (absent flows are NaN)")
    return a


#: Target size (elements) of one row block in blocked reductions: ~2 MB of float64,
#: small enough to stay in cache and to avoid page-faulting a full-size temporary.
BLOCK_ELEMS = 1 << 18


def row_blocks(n_rows: int, n_cols: int):
    """Yield row slices covering ``range(n_rows)`` in blocks of about BLOCK_ELEMS
    elements.  Reductions loop over these blocks (tens of iterations for a 10^7-element
    matrix), never over individual samples; each block is processed vectorised."""
    step = max(1, BLOCK_ELEMS // max(1, n_cols))
    for a in range(0, n_rows, step):
        yield slice(a, min(n_rows, a + step))


def finite_or_none(v: Any) -> float | None:
    """Python float of ``v``, or None when ``v`` is None/NaN/+-inf."""
    if v is None:
        return None
    f = float(v)
    return f if math.isfinite(f) else None


def _jsonable(v: Any) -> Any:
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return finite_or_none(v)
    if isinstance(v, np.ndarray):
        return [_jsonable(e) for e in v.tolist()]
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return {f.name: _jsonable(getattr(v, f.name)) for f in dataclasses.fields(v)}
    if isinstance(v, dict):
        return {str(k): _jsonable(e) for k, e in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(e) for e in v]
    return v


class ResultMixin:
    """``to_dict()`` for frozen result dataclasses: JSON-safe, None for no value."""

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serialisable dict of every field (None, never NaN/inf)."""
        return _jsonable(self)


def fmt_num(v: float | None, dp: int = 2) -> str:
    """Render a number with ``dp`` decimals and a Unicode minus; None -> em dash."""
    if v is None:
        return NO_VALUE
    s = f"{v:.{dp}f}"
    if s.startswith("-"):
        # -0.00 renders as 0.00: a value that rounds to zero has no sign worth showing
        if float(s) == 0.0:
            return s[1:]
        return MINUS + s[1:]
    return s
