"""Run one scenario on a named backend. The single place that knows the backends."""

from __future__ import annotations

import os
from typing import Callable

from .scenario import Scenario
from .trace import Trace

BACKENDS = ("sim", "live", "vm")
#: The backends that record a per-ACK trace (`tcp_probe_path`) and a per-packet
#: bottleneck trace (`queue_trace_path`).
PROBE_BACKENDS = ("sim", "vm")


def run_scenario(
    scenario: Scenario,
    *,
    seed: int | None = None,
    backend: str = "sim",
    run_index: int = 0,
    progress: Callable[[float], bool | None] | None = None,
    tcp_probe_path: str | os.PathLike[str] | None = None,
    queue_trace_path: str | os.PathLike[str] | None = None,
    keep_dir: str | os.PathLike[str] | None = None,
) -> Trace:
    """Run ``scenario`` once on ``backend`` ("sim", "live" or "vm") with ``seed``. The
    scenario's `title` and `description`, when given, are copied into the trace's meta.
    ``tcp_probe_path`` (vm and sim) also writes every sender's per-ACK state there:
    the kernel's `tcp:tcp_probe` trace, or the simulator's record of the same.
    ``queue_trace_path`` (vm and sim) writes every packet's fate at the bottleneck
    queue there (`backends/queue_trace.py`). ``keep_dir`` (vm) keeps the guest's raw
    result files there, whether the run succeeds or not."""
    if keep_dir is not None and backend != "vm":
        raise ValueError(f"keeping the guest's files needs the vm backend, not {backend!r}")
    if tcp_probe_path is not None and backend not in PROBE_BACKENDS:
        raise ValueError(f"a per-ACK trace (tcp_probe) needs the {' or '.join(PROBE_BACKENDS)} backend, not {backend!r}")
    if queue_trace_path is not None and backend not in PROBE_BACKENDS:
        raise ValueError(f"a queue trace needs the {' or '.join(PROBE_BACKENDS)} backend, not {backend!r}")
    trace = _run_on_backend(scenario, seed=seed, backend=backend, run_index=run_index, progress=progress,
                            tcp_probe_path=tcp_probe_path, queue_trace_path=queue_trace_path, keep_dir=keep_dir)
    for key in ("title", "description"):
        if getattr(scenario, key) is not None:
            trace.meta[key] = getattr(scenario, key)
    return trace


def _run_on_backend(
    scenario: Scenario,
    *,
    seed: int | None,
    backend: str,
    run_index: int,
    progress: Callable[[float], bool | None] | None,
    tcp_probe_path: str | os.PathLike[str] | None = None,
    queue_trace_path: str | os.PathLike[str] | None = None,
    keep_dir: str | os.PathLike[str] | None = None,
) -> Trace:
    if backend == "sim":
        from .backends.sim import simulate

        return simulate(scenario, seed=seed, progress=progress, tcp_probe_path=tcp_probe_path,
                        queue_trace_path=queue_trace_path)
    if backend == "live":
        from .backends.live.runner import run_live

        # The live backend reports stages; callers here get elapsed seconds, like the simulator's.
        live_progress = None if progress is None else (lambda p: progress(p.elapsed_s))
        return run_live(scenario, seed=scenario.seed if seed is None else seed, run_index=run_index, progress=live_progress)
    if backend == "vm":
        from .backends.vm.runner import run_vm

        # The guest runs in virtual time and reports nothing until it ends; what the
        # backend says (the one-time image build, the boot) goes to stderr so a first
        # run that downloads and builds the image is not silent for a minute.
        import sys

        return run_vm(scenario, seed=scenario.seed if seed is None else seed, run_index=run_index,
                      tcp_probe_path=tcp_probe_path, queue_trace_path=queue_trace_path, keep_dir=keep_dir,
                      progress=lambda s: print(s, file=sys.stderr, flush=True))
    raise ValueError(f"unknown backend {backend!r}; allowed: {', '.join(BACKENDS)}")
