"""Run a campaign's plan: a local process pool or Dask, resumable, with progress.

Each task runs in a worker and returns the finished run as the bytes of its files
(`store.encode_run`); only the parent writes to the store, under the store's lock, so
workers on other machines need no shared filesystem and a crash never leaves half a
run. Because the simulator is deterministic and every task carries its own seed, the
results are bit-identical whichever executor ran them.

Stopping: SIGINT and SIGTERM alike stop submitting, end the workers (`pool.py`) and return with
``interrupted`` set to the signal (finished runs are kept; the next call resumes).
Pool workers die with the parent even when it is killed with SIGKILL: each asks the
kernel for SIGTERM on its parent's death (Linux ``prctl(PR_SET_PDEATHSIG)``; the
backend of a running task cleans up on it) and also watches its parent id, so no
worker is left running with parent 1.
"""

from __future__ import annotations

import ctypes
import dataclasses
import os
import signal
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Callable

from .. import __version__
from ..interrupts import critical, raising_on_signals
from .plan import Campaign, Task
from .pool import WorkerPool, describe_exit
from .store import Store, encode_run

#: linux/prctl.h
PR_SET_PDEATHSIG = 1
#: How often a worker checks that its parent is still alive (the fallback where
#: PR_SET_PDEATHSIG does not exist).
PARENT_POLL_S = 1.0
#: Seconds an orphaned worker's backend gets to clean up before the worker exits.
ORPHAN_GRACE_S = 30.0


@dataclass(frozen=True)
class Outcome:
    """What became of one task."""

    key: str
    ok: bool
    files: dict[str, bytes] | None
    error: str | None
    wall_s: float


def execute_task(task: Task, backend: str) -> Outcome:
    """Run one task and return its run directory's files as bytes (runs in a worker)."""
    from ..analysis import analyze
    from ..runner import run_scenario
    from ..trace import Trace

    t0 = time.perf_counter()
    try:
        model = task.model()
        trace = run_scenario(model, seed=task.seed, backend=backend, run_index=task.run_index)
        wall = time.perf_counter() - t0
        window = None if model.window is None else (model.window[0] / 1e9, model.window[1] / 1e9)
        summary = analyze(trace, window=window).to_dict()
        meta = {
            **trace.meta,
            "task": dataclasses.asdict(task),
            "backend": backend,
            "wall_s": round(wall, 3),
            "fairlab_version": __version__,
            "summary": summary,
        }
        out = Trace(samples=trace.samples, flows=trace.flows, bottleneck=trace.bottleneck, meta=meta)
        return Outcome(task.key, True, encode_run(task.key, out), None, wall)
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # a failed run is recorded with its reason; the campaign goes on
        reason = f"{type(exc).__name__}: {exc}"
        if not isinstance(exc, ValueError):
            reason += "\n" + traceback.format_exc(limit=5)
        return Outcome(task.key, False, None, reason, time.perf_counter() - t0)


def _worker_init(parent_pid: int) -> None:
    """Pool worker set-up: leave Ctrl-C to the parent (which stops cleanly), take
    SIGTERM's default, and die with the parent."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    die_with_parent(parent_pid)


def die_with_parent(parent_pid: int) -> None:
    """Make this process end when ``parent_pid`` does, even by SIGKILL.

    The kernel sends SIGTERM, not SIGKILL, on the parent's death: a worker between
    tasks or running the simulator has SIGTERM's default action and ends at once,
    while a worker running a live or vm task has that backend's handler, which stops
    its processes and removes its namespaces or QEMU first."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        except (OSError, AttributeError):
            pass
    # The parent may have died before prctl took effect: we were re-parented already.
    if os.getppid() != parent_pid:
        os._exit(1)

    def watch() -> None:
        # Where PR_SET_PDEATHSIG does not exist (or was lost): the same SIGTERM, and
        # SIGKILL's equivalent if clean-up has not ended it within the grace period.
        while os.getppid() == parent_pid:
            time.sleep(PARENT_POLL_S)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(ORPHAN_GRACE_S)
        os._exit(1)

    threading.Thread(target=watch, name="fairlab-parent-watch", daemon=True).start()


@dataclass
class RunReport:
    """Counts of one `run_campaign` call."""

    total: int
    skipped: int
    done: int
    failed: int
    interrupted: bool
    wall_s: float
    #: the signal that stopped the campaign (SIGINT or SIGTERM), if one did
    signal: int | None = None
    #: (key, reason) of runs that failed verification, moved to quarantine/ and redone
    quarantined: list[tuple[str, str]] = field(default_factory=list)


ProgressFn = Callable[[int, int, int, int], None]  # done, failed, todo, total


def run_campaign(
    campaign: Campaign,
    store: Store,
    *,
    workers: int | None = None,
    dask: str | None = None,
    progress: ProgressFn | None = None,
) -> RunReport:
    """Run every task of ``campaign`` not yet in ``store``.

    ``workers``: local processes (default: all cores); ``dask``: "local" for a local
    Dask cluster or a scheduler address "tcp://host:8786". SIGINT or SIGTERM stops
    submitting, ends the workers and returns with ``interrupted`` set; finished runs
    are kept and the next call resumes. Holds the store's lock throughout (a second
    process gets `StoreBusy`); starts by removing stale temporary files and moving
    runs that fail verification to quarantine/ (they are then redone). A full disk
    raises `DiskFull` after ending the workers.
    """
    with store.exclusive(), raising_on_signals():
        return _run_locked(campaign, store, workers=workers, dask=dask, progress=progress)


def _run_locked(campaign: Campaign, store: Store, *, workers: int | None, dask: str | None,
                progress: ProgressFn | None) -> RunReport:
    store.init(campaign)
    quarantined = store.repair({t.key: t for t in campaign.tasks})
    if workers is None and dask is None and campaign.backend == "live":
        # Live runs share the machine's real network stack and CPUs: running two at
        # once would make each measure the other. One at a time unless asked.
        workers = 1
    done_keys = store.done_keys()
    todo = [t for t in campaign.tasks if t.key not in done_keys]
    total = len(campaign.tasks)
    skipped = total - len(todo)
    n_done = n_failed = 0
    t0 = time.perf_counter()
    by_key = {t.key: t for t in todo}

    def record(o: Outcome) -> None:
        nonlocal n_done, n_failed
        with critical():
            if o.ok and o.files is not None:
                store.write(o.key, o.files)
                n_done += 1
            else:
                store.fail(by_key[o.key], o.error or "unknown error")
                n_failed += 1
        if progress:
            progress(skipped + n_done, n_failed, len(todo), total)

    if progress:
        progress(skipped, 0, len(todo), total)
    stopped_by: int | None = None
    try:
        if not todo:
            pass
        elif dask is not None:
            _run_dask(todo, campaign.backend, dask, workers, record)
        elif (workers or os.cpu_count() or 1) == 1:
            for t in todo:
                record(execute_task(t, campaign.backend))
        else:
            _run_pool(todo, campaign.backend, workers or os.cpu_count() or 1, record)
    except KeyboardInterrupt as exc:
        stopped_by = getattr(exc, "signum", signal.SIGINT)
    if stopped_by is None:
        # An interrupted campaign skips this: `query` and `report` rebuild a stale catalog.
        store.build_catalog()
    return RunReport(total=total, skipped=skipped, done=n_done, failed=n_failed, interrupted=stopped_by is not None,
                     wall_s=time.perf_counter() - t0, signal=stopped_by, quarantined=quarantined)


def _run_pool(todo: list[Task], backend: str, workers: int, record: Callable[[Outcome], None]) -> None:
    def died(key: str, status: int | None) -> Outcome:
        return Outcome(key, False, None, f"the worker process running it died ({describe_exit(status)})", 0.0)

    with WorkerPool(min(workers, len(todo)), execute_task, initializer=_worker_init, initargs=(os.getpid(),)) as pool:
        for outcome in pool.map_unordered(((t.key, (t, backend)) for t in todo), died):
            record(outcome)


def _run_dask(todo: list[Task], backend: str, address: str, workers: int | None, record: Callable[[Outcome], None]) -> None:
    try:
        from distributed import Client, LocalCluster, as_completed
    except ImportError as exc:  # pragma: no cover - distributed is a dependency
        raise RuntimeError("Dask execution needs the `distributed` package: pip install distributed") from exc
    cluster = None
    if address == "local":
        cluster = LocalCluster(n_workers=workers or os.cpu_count() or 1, threads_per_worker=1, processes=True, dashboard_address=None)
        client = Client(cluster)
    else:
        client = Client(address)
    futures = []
    try:
        futures = [client.submit(execute_task, t, backend, key=f"fairlab-{t.key}", pure=False) for t in todo]
        for fut in as_completed(futures):
            record(fut.result())
    except BaseException:
        client.cancel(futures)
        raise
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
