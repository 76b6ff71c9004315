"""Names that become paths: a scenario's `name` may say anything, the file system
may only see a safe slug of it.

The name is the default output directory (``out/<name>``) and a single run's file
name (``<out>/<name>.parquet``). Written as given, ``name = "../../escaped"`` wrote
outside ``--out`` and an absolute name wrote anywhere. `slug` keeps ASCII letters,
digits, ``.``, ``_``, ``+`` and ``-``, turns every other run of characters (``/``,
``\\``, NUL, spaces, control characters) into one ``-``, strips leading and trailing
dots and dashes (so no ``..``, no hidden file, no name of only dots), and caps the
length at `MAX_SLUG_BYTES` (with a hash of the full name so long names that share a
prefix stay apart). The scenario keeps its name everywhere else (reports, the store).
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

#: Well under the 255-byte limit of a file name on Linux file systems, leaving room
#: for suffixes such as ".parquet" and "-compare".
MAX_SLUG_BYTES = 100
#: The slug of a name with nothing usable in it.
EMPTY_NAME_SLUG = "scenario"

_UNSAFE_RUN = re.compile(r"[^A-Za-z0-9._+-]+")


def slug(name: str) -> str:
    """A file-name-safe form of ``name`` (one path component, never ``.`` or ``..``)."""
    s = _UNSAFE_RUN.sub("-", name).strip(".-")
    if len(s) > MAX_SLUG_BYTES:
        digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]
        s = s[: MAX_SLUG_BYTES - 9].rstrip(".-") + "-" + digest
    return s or EMPTY_NAME_SLUG


def inside(root: Path, component: str) -> Path:
    """``root / component``, checked to lie inside ``root`` (belt and braces: `slug`
    already guarantees it)."""
    path = root / component
    base = root.resolve()
    if path.resolve().parent != base:
        raise ValueError(f"{component!r} would not be a file directly inside {root}")
    return path
