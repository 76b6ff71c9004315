"""Run a campaign's plan: a local process pool or Dask, resumable, with progress.

Each task runs in a worker and returns the finished run as Parquet bytes; only the
parent writes to the store (atomically), so workers on other machines need no shared
filesystem and a crash never leaves half a file. Because the simulator is
deterministic and every task carries its own seed, the results are bit-identical
whichever executor ran them.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import time
import traceback
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, Callable

from .. import __version__
from .plan import Campaign, Task
from .store import Store


@dataclass(frozen=True)
class Outcome:
    """What became of one task."""

    key: str
    ok: bool
    data: bytes | None
    error: str | None
    wall_s: float


def execute_task(task: Task, backend: str) -> Outcome:
    """Run one task and return its trace as Parquet bytes (runs in a worker)."""
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
        return Outcome(task.key, True, out.to_parquet_bytes(), None, wall)
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # a failed run is recorded with its reason; the campaign goes on
        reason = f"{type(exc).__name__}: {exc}"
        if not isinstance(exc, ValueError):
            reason += "\n" + traceback.format_exc(limit=5)
        return Outcome(task.key, False, None, reason, time.perf_counter() - t0)


def _ignore_sigint() -> None:
    # Workers leave Ctrl-C to the parent, which cancels cleanly.
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@dataclass
class RunReport:
    """Counts of one `run_campaign` call."""

    total: int
    skipped: int
    done: int
    failed: int
    interrupted: bool
    wall_s: float


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
    Dask cluster or a scheduler address "tcp://host:8786". Ctrl-C stops submitting,
    cancels what has not started and returns with ``interrupted`` set; finished runs
    are kept and the next call resumes.
    """
    store.init(campaign)
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
        if o.ok and o.data is not None:
            store.write(o.key, o.data)
            n_done += 1
        else:
            store.fail(by_key[o.key], o.error or "unknown error")
            n_failed += 1
        if progress:
            progress(skipped + n_done, n_failed, len(todo), total)

    if progress:
        progress(skipped, 0, len(todo), total)
    interrupted = False
    if not todo:
        pass
    elif dask is not None:
        interrupted = _run_dask(todo, campaign.backend, dask, workers, record)
    elif (workers or os.cpu_count() or 1) == 1:
        try:
            for t in todo:
                record(execute_task(t, campaign.backend))
        except KeyboardInterrupt:
            interrupted = True
    else:
        interrupted = _run_pool(todo, campaign.backend, workers or os.cpu_count() or 1, record)
    store.build_catalog()
    return RunReport(total=total, skipped=skipped, done=n_done, failed=n_failed, interrupted=interrupted, wall_s=time.perf_counter() - t0)


def _run_pool(todo: list[Task], backend: str, workers: int, record: Callable[[Outcome], None]) -> bool:
    pool = ProcessPoolExecutor(max_workers=min(workers, len(todo)), initializer=_ignore_sigint)
    pending: set[Any] = set()
    queue = list(todo)
    try:
        # Keep at most 2 tasks per worker in flight so Ctrl-C has little to cancel.
        while queue or pending:
            while queue and len(pending) < 2 * workers:
                pending.add(pool.submit(execute_task, queue.pop(0), backend))
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for fut in finished:
                record(fut.result())
        return False
    except KeyboardInterrupt:
        for fut in pending:
            fut.cancel()
        for proc in list(getattr(pool, "_processes", {}).values()):
            proc.terminate()
        return True
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _run_dask(todo: list[Task], backend: str, address: str, workers: int | None, record: Callable[[Outcome], None]) -> bool:
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
        return False
    except KeyboardInterrupt:
        client.cancel(futures)
        return True
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
