"""Child processes of a live run: started inside a namespace from an argument list
(never a shell string), each in its own process group, and stopped with SIGTERM and
then SIGKILL.

Each child is its own session leader (``start_new_session``), so a Ctrl-C typed at
the terminal reaches only fairlab's Python process, whose ``finally`` then stops
the children in order — a child never dies half-way through writing its JSON
because the terminal signalled the whole foreground group.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from .netns import ns_exec


@dataclass
class Child:
    """One started process."""

    name: str
    popen: subprocess.Popen[bytes]
    argv: list[str]
    stdout_path: Path | None = None
    stderr_path: Path | None = None

    @property
    def pid(self) -> int:
        return self.popen.pid

    def stderr_tail(self, n: int = 3) -> str:
        if self.stderr_path is None or not self.stderr_path.exists():
            return ""
        lines = [ln.strip() for ln in self.stderr_path.read_text(errors="replace").splitlines() if ln.strip()]
        return " / ".join(lines[-n:])


@dataclass
class Children:
    """Every process a run started, to be stopped together."""

    items: list[Child] = field(default_factory=list)

    def start(self, name: str, ns: str, argv: list[str], *, stdout: Path | int | None = None,
              stderr: Path | None = None, nice: int | None = None) -> Child:
        """Start ``argv`` inside namespace ``ns`` in a new process group, at
        scheduling priority ``nice`` when given (set right after the start, before
        the child has done anything that matters: it is still in `ip netns exec`)."""
        out: IO[bytes] | int | None
        out_path = stdout if isinstance(stdout, Path) else None
        out = open(stdout, "wb") if isinstance(stdout, Path) else stdout  # noqa: SIM115 - closed below
        err = open(stderr, "wb") if stderr is not None else subprocess.DEVNULL  # noqa: SIM115
        try:
            full = ns_exec(ns, argv)
            p = subprocess.Popen(full, stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True)
        finally:
            if isinstance(stdout, Path) and out is not None and not isinstance(out, int):
                out.close()
            if stderr is not None and not isinstance(err, int):
                err.close()
        if nice is not None:
            try:
                os.setpriority(os.PRIO_PROCESS, p.pid, nice)
            except OSError:
                pass
        child = Child(name=name, popen=p, argv=full, stdout_path=out_path, stderr_path=stderr)
        self.items.append(child)
        return child

    def stop(self, child: Child, *, grace: float = 3.0) -> int | None:
        """SIGTERM the child's process group, then SIGKILL after ``grace`` seconds."""
        return stop_group(child.popen, grace=grace)

    def stop_all(self, *, grace: float = 3.0) -> None:
        """Stop every child still running: SIGTERM to all, one shared grace period,
        then SIGKILL to whatever is left."""
        alive = [c for c in self.items if c.popen.poll() is None]
        for c in alive:
            _signal_group(c.popen.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for c in alive:
            try:
                c.popen.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for c in alive:
            if c.popen.poll() is None:
                _signal_group(c.popen.pid, signal.SIGKILL)
                try:
                    c.popen.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
        for c in self.items:
            if c.popen.stdout is not None:
                c.popen.stdout.close()


def stop_group(p: subprocess.Popen[bytes], *, grace: float = 3.0) -> int | None:
    """SIGTERM a process group, wait ``grace`` s, then SIGKILL it."""
    if p.poll() is None:
        _signal_group(p.pid, signal.SIGTERM)
        try:
            p.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            _signal_group(p.pid, signal.SIGKILL)
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
    return p.returncode


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass
