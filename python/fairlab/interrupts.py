"""SIGINT and SIGTERM mean the same thing to fairlab: stop, clean up, exit.

Python turns SIGINT into `KeyboardInterrupt` but leaves SIGTERM at its default
(die at once, no ``finally``), so a campaign or a live run stopped by `kill`, a
batch scheduler or systemd used to leave half of what it started. `raising_on_signals`
makes both raise `Interrupted` (a `KeyboardInterrupt`) in the main thread, which
carries the signal so the command line can exit with the conventional 128 + signal
number (130 for SIGINT, 143 for SIGTERM).
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

HANDLED = (signal.SIGINT, signal.SIGTERM)

# A signal that arrives inside `critical()` waits here until the block ends.
_critical_depth = 0
_pending: int | None = None
# The last signal turned into `Interrupted` (typer reports any KeyboardInterrupt as
# exit 130; the command line asks this to tell SIGTERM apart).
_last: int | None = None


def last_signal() -> int | None:
    """The last SIGINT/SIGTERM `raising_on_signals` turned into `Interrupted`."""
    return _last


class Interrupted(KeyboardInterrupt):
    """Raised in the main thread when SIGINT or SIGTERM arrives."""

    def __init__(self, signum: int):
        super().__init__(f"interrupted by {signal.Signals(signum).name}")
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def exit_code(exc: BaseException) -> int:
    """The shell convention for a process stopped by a signal: 128 + its number
    (a plain KeyboardInterrupt is SIGINT)."""
    return 128 + getattr(exc, "signum", signal.SIGINT)


@contextmanager
def _handlers(handler: Any) -> Iterator[None]:
    """``handler`` for SIGINT and SIGTERM within the block, the previous ones after."""
    old = {s: signal.getsignal(s) for s in HANDLED}
    for s in HANDLED:
        signal.signal(s, handler)
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h if h is not None else signal.SIG_DFL)


@contextmanager
def raising_on_signals() -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM raise `Interrupted` in the main thread.
    Outside the main thread (signals cannot be handled there) this does nothing.
    A process forked inside the block (a pool worker, pyroute2's namespace helper)
    inherits the handler; there it re-raises the signal with its default meaning."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    owner = os.getpid()

    def _raise(signum: int, frame: Any) -> None:
        if os.getpid() != owner:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        global _pending, _last
        _last = signum
        if _critical_depth:
            _pending = signum
            return
        raise Interrupted(signum)

    with _handlers(_raise):
        yield


@contextmanager
def signals_ignored() -> Iterator[None]:
    """Within the block SIGINT and SIGTERM are ignored (clean-up that a second
    Ctrl-C must not cut short)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    with _handlers(signal.SIG_IGN):
        yield


@contextmanager
def critical() -> Iterator[None]:
    """A short block a signal must not cut in two (renaming a finished run into
    place, recording it): a SIGINT/SIGTERM that arrives inside is raised when the
    block ends, not lost."""
    global _critical_depth, _pending
    _critical_depth += 1
    try:
        yield
    finally:
        _critical_depth -= 1
        if _critical_depth == 0 and _pending is not None:
            signum, _pending = _pending, None
            raise Interrupted(signum)
