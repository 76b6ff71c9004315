"""Shared CLI pieces: consoles, the user-error types, argument parsers."""

from __future__ import annotations

import sys

from rich.console import Console

from ..analysis import AnalysisError
from ..scenario import ScenarioError
from ..trace import TraceError

# When output goes to a file or pipe rich would assume 80 columns and truncate flow
# labels; 120 keeps tables readable in logs and CI output.
# soft_wrap: a long line (a command to copy, a path) is never broken by a newline;
# tables still lay out in the width.
console = Console(width=None if sys.stdout.isatty() else 120, soft_wrap=True)
err_console = Console(stderr=True, width=None if sys.stderr.isatty() else 120, soft_wrap=True)


def _user_errors() -> tuple[type[BaseException], ...]:
    from .._core import SimulationError
    from ..backends.live.errors import LiveError
    from ..backends.vm.errors import VmError
    from ..campaign.store import StoreError
    from ..ingest import IngestError

    return (AnalysisError, ScenarioError, TraceError, StoreError, FileNotFoundError, IngestError, LiveError, VmError, SimulationError)


def __getattr__(name: str):  # type: ignore[no-untyped-def]
    # USER_ERRORS is built on first use: its modules (ingest, the live backend, the
    # store) cost ~0.1 s to import, and `main` needs them only when a command fails.
    if name == "USER_ERRORS":
        globals()["USER_ERRORS"] = value = _user_errors()
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class UsageError(AnalysisError):
    """A command-line value is malformed."""


def parse_window(text: str | None) -> tuple[float | None, float | None] | None:
    """'60:300' → (60.0, 300.0); '60:' and ':300' leave a side open. Seconds."""
    if text is None:
        return None
    parts = text.split(":")
    if len(parts) != 2:
        raise UsageError(f"--window {text!r} must be START:END in seconds, e.g. 60:300 (either side may be empty)")
    out: list[float | None] = []
    for p in parts:
        p = p.strip().rstrip("s")
        if p == "":
            out.append(None)
            continue
        try:
            out.append(float(p))
        except ValueError:
            raise UsageError(f"--window {text!r} must be START:END in seconds, e.g. 60:300") from None
    return (out[0], out[1])
