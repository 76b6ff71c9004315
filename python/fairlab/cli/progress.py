"""Progress that works in a terminal and in a log.

On a terminal, rich draws a live bar. When stderr is a file or a pipe (a CI job,
`nohup … > log`, a batch scheduler) rich cannot redraw, and a bar would show up only at
the very end of a run that may take hours; there the same progress is written as plain
lines: one whenever another `step` units are done, and at least one a minute while
anything is running (a background thread keeps the minute even when no unit finishes).
"""

from __future__ import annotations

import math
import threading
import time
from typing import Any, Callable

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from .common import err_console

#: A plain progress line at least this often (seconds) while work runs.
LINE_EVERY_S = 60.0
#: ... and whenever another 1/LINE_STEPS of the work is done.
LINE_STEPS = 20


def fmt_duration(seconds: float) -> str:
    """'45 s', '3 min 12 s', '2 h 05 min'."""
    s = int(round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


class PlainLines:
    """Plain progress lines for logs. ``render(done, total, elapsed, fields)`` returns
    the text of one line; a line is printed when ``done`` has grown by ``step`` since
    the last line, or ``every_s`` seconds have passed."""

    def __init__(self, total: float, render: Callable[[float, float, float, dict[str, Any]], str], *,
                 console: Console = err_console, step: float | None = None, every_s: float = LINE_EVERY_S,
                 clock: Callable[[], float] = time.monotonic):
        self.total = total
        self.render = render
        self.console = console
        self.step = step if step is not None else max(1.0, math.ceil(total / LINE_STEPS))
        self.every_s = every_s
        self.clock = clock
        self.t0 = clock()
        self.done = 0.0
        self.fields: dict[str, Any] = {}
        self._last_done = 0.0
        self._last_t = self.t0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> PlainLines:
        self._thread = threading.Thread(target=self._tick, name="fairlab-progress", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _line(self) -> None:
        now = self.clock()
        self.console.print(self.render(self.done, self.total, now - self.t0, self.fields), highlight=False, markup=False)
        self._last_done, self._last_t = self.done, now

    def update(self, done: float, **fields: Any) -> None:
        with self._lock:
            self.done = done
            self.fields.update(fields)
            if done - self._last_done >= self.step or (done >= self.total > self._last_done) or self.clock() - self._last_t >= self.every_s:
                self._line()

    def _tick(self) -> None:
        while not self._stop.wait(min(5.0, self.every_s)):
            with self._lock:
                if self.clock() - self._last_t >= self.every_s:
                    self._line()


def eta(done: float, total: float, elapsed: float) -> str:
    if done <= 0 or done >= total:
        return ""
    return f", about {fmt_duration(elapsed * (total - done) / done)} left"


def interactive(console: Console = err_console) -> bool:
    """Whether ``console`` is a terminal rich can redraw."""
    return console.is_terminal and not console.is_dumb_terminal


class CampaignProgress:
    """Runs done of a campaign: a bar on a terminal, plain lines in a log."""

    def __init__(self, name: str, total: int, *, console: Console = err_console):
        self.name, self.total, self.console = name, total, console
        self._bar: Progress | None = None
        self._plain: PlainLines | None = None
        self._tid: Any = None

    def __enter__(self) -> CampaignProgress:
        if interactive(self.console):
            self._bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("runs · [red]{task.fields[failed]} failed"), TimeElapsedColumn(),
                                 TimeRemainingColumn(), console=self.console)
            self._bar.start()
            self._tid = self._bar.add_task(self.name, total=self.total, failed=0)
        else:
            name = self.name

            def render(done: float, total: float, elapsed: float, f: dict[str, Any]) -> str:
                stamp = time.strftime("%H:%M:%S")
                return (f"{stamp} {name}: {int(done)}/{int(total)} runs finished ({f.get('failed', 0)} failed), "
                        f"{fmt_duration(elapsed)} elapsed{eta(done, total, elapsed)}")

            self._plain = PlainLines(self.total, render, console=self.console).__enter__()
            self.console.print(f"{time.strftime('%H:%M:%S')} {name}: {self.total} runs to do or check", highlight=False, markup=False)
        return self

    def update(self, finished: int, failed: int) -> None:
        if self._bar is not None:
            self._bar.update(self._tid, completed=finished, failed=failed)
        elif self._plain is not None:
            self._plain.update(finished, failed=failed)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()
        if self._plain is not None:
            self._plain.__exit__(*exc)


class SimulatedTime:
    """Simulated (or, live, elapsed) seconds of one run: a transient bar on a terminal
    once the run has taken a second, plain lines in a log once it has taken a minute."""

    def __init__(self, name: str, total_s: float, *, console: Console = err_console, enabled: bool = True):
        self.name, self.total_s, self.console, self.enabled = name, total_s, console, enabled
        self.t0 = time.perf_counter()
        self._bar: Progress | None = None
        self._plain: PlainLines | None = None
        self._tid: Any = None

    def __call__(self, sim_s: float) -> bool:
        if not self.enabled:
            return True
        waited = time.perf_counter() - self.t0
        if interactive(self.console):
            if self._bar is None and waited > 1.0:
                self._bar = Progress(TextColumn("[bold]{task.description}"), BarColumn(),
                                     TextColumn("{task.completed:.0f}/{task.total:.0f} s simulated"), TimeRemainingColumn(),
                                     console=self.console, transient=True)
                self._bar.start()
                self._tid = self._bar.add_task(self.name, total=self.total_s)
            if self._bar is not None:
                self._bar.update(self._tid, completed=sim_s)
        else:
            if self._plain is None and waited > LINE_EVERY_S:
                name = self.name

                def render(done: float, total: float, elapsed: float, f: dict[str, Any]) -> str:
                    return f"{time.strftime('%H:%M:%S')} {name}: {done:.0f}/{total:.0f} s simulated{eta(done, total, elapsed)}"

                self._plain = PlainLines(self.total_s, render, console=self.console, step=self.total_s / 10).__enter__()
                self._plain.t0 -= waited  # elapsed counts from the start of the run
            if self._plain is not None:
                self._plain.update(sim_s)
        return True

    def stop(self) -> None:
        if self._bar is not None:
            self._bar.stop()
        if self._plain is not None:
            self._plain.__exit__(None, None, None)


class Working:
    """Something without countable steps (writing a report): a spinner with the elapsed
    time on a terminal; in a log a line when it starts, one a minute while it runs and
    one when it is done."""

    def __init__(self, what: str, *, console: Console = err_console, enabled: bool = True):
        self.what, self.console, self.enabled = what, console, enabled
        self._status: Any = None
        self._plain: PlainLines | None = None
        self.t0 = time.perf_counter()

    def __enter__(self) -> Working:
        if not self.enabled:
            return self
        self.t0 = time.perf_counter()
        if interactive(self.console):
            self._status = self.console.status(self.what + " …")
            self._status.start()
        else:
            what = self.what
            self.console.print(f"{time.strftime('%H:%M:%S')} {what} …", highlight=False, markup=False)
            self._plain = PlainLines(1.0, lambda d, t, e, f: f"{time.strftime('%H:%M:%S')} still {what} ({fmt_duration(e)})",
                                     console=self.console, step=2.0).__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._status is not None:
            self._status.stop()
        if self._plain is not None:
            self._plain.__exit__(*exc)
            if exc[0] is None:
                self.console.print(f"{time.strftime('%H:%M:%S')} {self.what}: done in {fmt_duration(time.perf_counter() - self.t0)}",
                                   highlight=False, markup=False)
