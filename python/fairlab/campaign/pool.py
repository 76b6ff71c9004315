"""Local worker processes for a campaign, with no helper threads, so that a signal
can stop them at any moment and the process still exits.

`concurrent.futures.ProcessPoolExecutor` reads results in a manager thread that the
interpreter joins at exit. Ending its workers on SIGINT/SIGTERM left that thread
waiting for ever — for the rest of a result a killed worker was half-way through
sending, or for a future's lock the interrupted main thread held — and the campaign
printed "interrupted" and then hung (seen once in CI, 2026-11-29). Here each worker
has its own pipe, the main thread alone sends tasks and reads results, and stopping
is killing the workers: nothing is left that could wait.

A worker that dies in the middle of a task (the OOM killer, a crash in native code)
costs that task only: it is recorded as failed with the worker's exit status and a
new worker takes the next task.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from collections.abc import Callable, Iterable, Iterator
from multiprocessing.connection import Connection, wait
from typing import Any

#: Seconds a stopped worker gets to end after SIGTERM before it is killed (a live or
#: vm task's handler removes its namespaces or QEMU first; the simulator ends at once).
STOP_GRACE_S = 5.0


def _serve(conn: Connection, fn: Callable[..., Any], initializer: Callable[..., None], initargs: tuple) -> None:
    initializer(*initargs)
    while True:
        try:
            job = conn.recv()
        except EOFError:  # the parent closed its end: nothing more to do
            return
        if job is None:
            return
        try:
            result = fn(*job)
        except KeyboardInterrupt:
            # Ctrl-C reached a task whose backend handles signals (live, vm): it has
            # cleaned up; the parent is stopping too, so end quietly.
            return
        conn.send(result)


class _Worker:
    def __init__(self, ctx: Any, fn: Callable[..., Any], initializer: Callable[..., None], initargs: tuple):
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=_serve, args=(child, fn, initializer, initargs), daemon=True,
                                   name="fairlab-worker")
        self.process.start()
        # Only the worker holds its end now, so its death is EOF here.
        child.close()
        self.job: Any = None


class WorkerPool:
    """``size`` processes that each run ``fn(*job)`` for one job at a time.

    ``initializer(*initargs)`` runs once in each worker. Use as a context manager:
    leaving the block normally lets the workers finish and exit; leaving it by an
    exception (a signal turned into one, a full disk) stops them at once.
    """

    def __init__(self, size: int, fn: Callable[..., Any], *, initializer: Callable[..., None],
                 initargs: tuple = ()):
        # fork, so that each worker's parent is this process (the workers' death-with-
        # parent set-up refers to it).
        self._ctx = multiprocessing.get_context("fork") if hasattr(os, "fork") else multiprocessing.get_context()
        self._size = size
        self._args = (fn, initializer, initargs)
        self._workers: list[_Worker] = []

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self._close()
        else:
            self._stop()

    def map_unordered(self, jobs: Iterable[tuple[Any, tuple]],
                      on_died: Callable[[Any, int | None], Any]) -> Iterator[Any]:
        """Run each ``(key, args)`` job; yield each result as it finishes. A job whose
        worker died yields ``on_died(key, exit status)`` instead."""
        queue = list(jobs)
        while len(self._workers) < min(self._size, len(queue)):
            self._workers.append(_Worker(self._ctx, *self._args))
        busy: dict[Connection, _Worker] = {}
        while queue or busy:
            for i, w in enumerate(self._workers):
                if w.job is None and queue:
                    try:
                        w.conn.send(queue[0][1])
                    except OSError:  # it died between jobs: a new one takes the job
                        self._replace(w)
                        w = self._workers[i]
                        w.conn.send(queue[0][1])
                    w.job = queue.pop(0)
                    busy[w.conn] = w
            for conn in wait(list(busy)):
                w = busy.pop(conn)  # type: ignore[arg-type]
                key = w.job[0]
                w.job = None
                try:
                    result = conn.recv()  # type: ignore[union-attr]
                except (EOFError, OSError):
                    result = on_died(key, self._replace(w))
                yield result

    def _replace(self, dead: _Worker) -> int | None:
        dead.process.join(STOP_GRACE_S)
        status = dead.process.exitcode
        dead.conn.close()
        self._workers[self._workers.index(dead)] = _Worker(self._ctx, *self._args)
        return status

    def _close(self) -> None:
        for w in self._workers:
            try:
                w.conn.send(None)
            except OSError:
                pass
        for w in self._workers:
            w.process.join(STOP_GRACE_S)
        self._stop()

    def _stop(self) -> None:
        for w in self._workers:
            if w.process.is_alive():
                w.process.terminate()
        for w in self._workers:
            w.process.join(STOP_GRACE_S)
            if w.process.is_alive():
                w.process.kill()
                w.process.join(STOP_GRACE_S)
            w.conn.close()
        self._workers = []


def describe_exit(status: int | None) -> str:
    """A worker's exit status in words ("killed by SIGKILL", "exit status 1")."""
    if status is None:
        return "still running"
    if status < 0:
        try:
            return f"killed by {signal.Signals(-status).name}"
        except ValueError:
            return f"killed by signal {-status}"
    return f"exit status {status}"
