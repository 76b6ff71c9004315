"""`run_live`: one scenario, one run, on real Linux TCP in network namespaces.

Read this first — the order of a run:

0. SIGINT and SIGTERM handlers go in first (they raise, so every ``finally`` runs),
   then the leftovers of live runs that died by SIGKILL are removed
   (`_remove_dead_leftovers`: only runs whose process is gone; named in the notes).
1. Preflight (no side effects): root, pyroute2, iperf3, `ip`/`ethtool`, every flow's
   congestion control in the kernel, an emulation path that can express the
   scenario (`choose_path`). Each failure is a `LiveError` with one sentence.
2. Set-up, all named after a fresh run id ``fl-<4 hex>``: the dumbbell
   (`netns.build_dumbbell`), per-namespace sysctls (socket buffers, ECN, SACK), per-
   flow route metrics (initcwnd, quickack), the emulated link (`kernel_link` or
   `linkem_link`), and one ``iperf3 -s -1`` per flow in the receiver namespace.
3. Traffic: each client starts at its flow's ``start`` plus a start jitter drawn
   from the run's seeded RNG, and runs until its ``stop`` (or the end of the run),
   writing ``flow-K.json`` in the run directory.
4. Collection: `fairlab.ingest.load` reads the client files; the runner re-aligns
   them on its own launch clock (iperf3 < 3.18 stamps whole seconds only, see
   `_collect`), adds linkem's bottleneck samples and the run's metadata.
5. ``finally`` — on success, error, exception and Ctrl-C alike: every child is
   stopped (SIGTERM to its process group, then SIGKILL), then everything named after
   the run id is removed (`cleanup.cleanup(run_id)`). SIGINT/SIGTERM are ignored
   while that happens so a second Ctrl-C cannot interrupt the clean-up itself.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ...scenario import Scenario
from ...trace import Trace
from ..host_settings import RMEM_MIN_DEFAULT, WMEM_MIN_DEFAULT, socket_buffer_max, start_offsets_ns
from ..iperf_pairs import receiver_samples
from . import capabilities, iperf, kernel_link, linkem_link
from ...interrupts import raising_on_signals
from .cleanup import TEMP_PREFIX, mark_active
from .cleanup import cleanup as cleanup_run
from .errors import NO_IPERF3, NOT_ROOT, LiveError
from .netns import (HEADER_BYTES, Dumbbell, add_host_route, build_dumbbell, new_run_id, off_path_link_drops, run_in,
                    set_sysctls)
from .procs import Child, Children

#: A warning is raised when the flows' summed goodput is below this share of the rate.
GOODPUT_WARN_FRACTION = 0.9
#: Seconds between scheduling the first client and scenario time 0 (servers are up by then).
LEAD_S = 0.3

#: Scheduling priority of the iperf3 processes: traffic generators must not be
#: starved by whatever else the machine runs.
IPERF_NICE = -10
#: linkem runs above the hosts it serves: on 2 cores a sender that can use a whole
#: core otherwise delays frames in linkem's receive ring by milliseconds; five
#: levels above the hosts cut frames waiting over 1 ms 3–20× (docs/linkem.md).
LINKEM_NICE = -15

#: Version of the meaning of the live backend's meta keys and flow-table extras.
LIVE_FORMAT_VERSION = 1

#: Emulation path names.
PATHS = ("auto", "kernel", "linkem")


@dataclass(frozen=True)
class LiveProgress:
    """What `run_live` reports to its ``progress`` callback."""

    stage: str  # "setup", "running", "collecting", "done"
    run_id: str
    elapsed_s: float
    total_s: float
    message: str = ""


@dataclass
class PathChoice:
    """The emulation path and why it was chosen."""

    path: str  # "kernel" or "linkem"
    why: str
    linkem: str | None = None


@dataclass
class _Flow:
    index: int
    label: str
    spec: dict[str, Any]
    offset_s: float  # start + jitter, seconds after scenario time 0
    seconds: int
    port: int
    logfile: Path
    child: Child | None = None
    launched_epoch: float | None = None
    server: Child | None = None


@dataclass
class _Run:
    run_id: str
    children: Children = field(default_factory=Children)
    linkem: Child | None = None


# --------------------------------------------------------------------- preflight
def preflight(scenario: Scenario, caps: capabilities.Capabilities | None = None, *, emulation: str = "auto") -> PathChoice:
    """Check everything a live run needs without touching the system; return the
    emulation path or raise `LiveError` with the first problem."""
    if not caps:
        caps = capabilities.probe(qdiscs=os.geteuid() == 0)
    if not caps.root:
        raise LiveError(NOT_ROOT)
    if caps.pyroute2 is None:
        raise LiveError("pyroute2 is not installed, and live runs build their namespaces with it; install it: pip install pyroute2")
    if caps.iperf3 is None:
        raise LiveError(NO_IPERF3)
    for tool in ("ip", "ss", "ethtool", "sysctl"):
        if caps.tools.get(tool) is None:
            pkg = {"ip": "iproute2", "ss": "iproute2", "ethtool": "ethtool", "sysctl": "procps"}[tool]
            raise LiveError(f"`{tool}` is not installed, and live runs need it; install it: apt-get install {pkg}")
    resolved = scenario.resolve()
    for cca in dict.fromkeys(f["cca"] for f in resolved["flows"]):
        if cca not in caps.ccas:
            avail = " ".join(caps.ccas) or "(none)"
            if cca == "ccid2":
                raise LiveError(f"flow congestion control 'ccid2' is DCCP's CCID 2, and DCCP was removed from Linux 6.x, so "
                                f"it cannot run live; this kernel offers (/proc/sys/net/ipv4/tcp_available_congestion_control): "
                                f"{avail}; use --backend sim for ccid2")
            raise LiveError(f"flow congestion control {cca!r} is not available in this kernel; "
                            f"/proc/sys/net/ipv4/tcp_available_congestion_control lists: {avail} "
                            f"(load its module, e.g. modprobe tcp_{cca}, or use --backend sim)")
    n = len(resolved["flows"])
    if n > 253:
        raise LiveError(f"a live run takes at most 253 flows (one sender namespace each on one /24); this scenario has {n}")
    interval_s = resolved["interval_ns"] / 1e9
    if not iperf.MIN_INTERVAL_S <= interval_s <= iperf.MAX_INTERVAL_S:
        raise LiveError(f"iperf3 reports every 0.1 to 60 s, so a live run cannot sample every {interval_s:g} s; change `interval`")
    return choose_path(resolved, caps, emulation)


def choose_path(resolved: dict[str, Any], caps: capabilities.Capabilities, emulation: str = "auto") -> PathChoice:
    """The kernel path when the probe found every qdisc the scenario needs (and the
    scenario's qdisc has a faithful kernel translation), else linkem; ``emulation``
    forces one. Raises `LiveError` saying what is missing when neither can."""
    if emulation not in PATHS:
        raise LiveError(f"emulation path {emulation!r} is not one of {', '.join(PATHS)}")
    req = kernel_link.requirements(resolved)
    if req.unsupported:
        kernel_no = req.unsupported
    elif caps.tools.get("tc") is None:
        kernel_no = "`tc` (iproute2) is missing"
    else:
        missing = kernel_link.missing_qdiscs(req, caps.qdiscs)
        kernel_no = f"the kernel lacks the {', '.join(missing)} qdisc(s)" if missing else None
        if not caps.qdiscs:
            kernel_no = f"the kernel's qdiscs could not be probed ({caps.qdisc_probe_error})"
    qdisc = resolved["bottleneck"]["qdisc"]
    linkem_no: str | None = None
    if caps.linkem is None:
        linkem_no = f"no linkem binary ({caps.linkem_how})"
    else:
        known = linkem_link.known_qdiscs()
        if qdisc not in known:
            linkem_no = f"linkem does not know the qdisc {qdisc!r} (it knows: {', '.join(known)})"
        elif resolved.get("offloads"):
            # linkem forwards what its packet sockets read, one frame at a time: it
            # needs the wire-sized packets offloads off gives.
            linkem_no = "linkem needs MTU-sized packets, and the scenario turns offloads on"
    if emulation == "kernel":
        if kernel_no:
            raise LiveError(f"the kernel emulation path was asked for but cannot run this scenario: {kernel_no}")
        return PathChoice("kernel", "asked for (--emulation kernel)")
    if emulation == "linkem":
        if linkem_no:
            raise LiveError(f"the linkem emulation path was asked for but cannot run this scenario: {linkem_no}")
        return PathChoice("linkem", "asked for (--emulation linkem)", caps.linkem)
    if kernel_no is None:
        return PathChoice("kernel", f"the kernel has every qdisc this scenario needs ({', '.join(req.qdiscs)})")
    if linkem_no is None:
        return PathChoice("linkem", f"kernel path unusable: {kernel_no}", caps.linkem)
    raise LiveError(f"neither emulation path can run this scenario: kernel: {kernel_no}; linkem: {linkem_no}")


# --------------------------------------------------------------------- the run
def run_live(
    scenario: Scenario,
    *,
    seed: int,
    run_index: int = 0,
    progress: Callable[[LiveProgress], None] | None = None,
    run_dir: str | os.PathLike[str] | None = None,
    emulation: str = "auto",
) -> Trace:
    """Run ``scenario`` once on real TCP and return its `Trace`.

    ``seed`` drives every random choice of the run (start jitter; linkem's qdisc
    RNG). ``run_index`` is the trace's ``run`` column. ``run_dir`` keeps the raw
    files (iperf3 JSON, linkem config and stats) under ``run_dir/<run id>/``;
    without it they go to a temporary directory that is removed afterwards.
    ``emulation`` is "auto", "kernel" or "linkem". Needs root; see docs/live.md.
    """
    owner_pid = os.getpid()
    # Before anything that creates state: the capability probe makes a namespace,
    # and SIGTERM's default action would skip every `finally` below.
    restore = _install_signal_handlers()
    run: _Run | None = None
    keep = run_dir is not None
    base: Path | None = None
    try:
        swept = _remove_dead_leftovers()
        caps = capabilities.probe(qdiscs=os.geteuid() == 0)
        choice = preflight(scenario, caps, emulation=emulation)
        resolved = scenario.resolve(seed=seed)
        run = _Run(run_id=new_run_id())
        mark_active(run.run_id)
        base = Path(run_dir) if run_dir is not None else Path(tempfile.mkdtemp(prefix=f"{TEMP_PREFIX}{run.run_id}-"))
        rdir = base / run.run_id
        rdir.mkdir(parents=True, exist_ok=True)
        trace = _run(scenario, resolved, caps, choice, run, rdir, seed=seed, run_index=run_index, progress=progress)
        if swept:
            trace.meta["notes"] = [swept, *trace.meta.get("notes", [])]
        return trace
    except LiveError as exc:
        if exc.run_id is None and run is not None:
            exc.run_id = run.run_id
        raise
    finally:
        if os.getpid() != owner_pid:
            # A library's forked helper (pyroute2 forks to enter a namespace) that
            # unwound into this frame must not clean up the parent's run.
            os._exit(1)
        _ignore_signals()
        try:
            if run is not None:
                run.children.stop_all(grace=2.0)
                leftover = cleanup_run(run.run_id)
                if leftover.errors:
                    import warnings

                    warnings.warn(f"live run {run.run_id}: clean-up problems: {'; '.join(leftover.errors)}", stacklevel=2)
        finally:
            if not keep and base is not None:
                shutil.rmtree(base, ignore_errors=True)
            restore()


def _remove_dead_leftovers() -> str | None:
    """Remove what live runs killed with SIGKILL left behind (namespaces, their
    processes, pid files, temporary directories — only of runs whose process is
    gone), and say what, for the run's notes. Refuses with the clean-up command when
    something cannot be removed, rather than run beside it."""
    if os.geteuid() != 0:
        return None  # preflight says "needs root"; nothing of another run's can be removed anyway
    rep = cleanup_run(None)
    if rep.errors:
        raise LiveError(f"leftovers of dead live run(s) {', '.join(rep.run_ids()) or '?'} could not all be removed "
                        f"({'; '.join(rep.errors)}); run `fairlab live cleanup` as root and try again")
    if rep.empty:
        return None
    return f"removed leftovers of dead live run(s) {', '.join(rep.run_ids())}: {rep.summary()}"


def _install_signal_handlers() -> Callable[[], None]:
    """SIGINT and SIGTERM raise `Interrupted` (a KeyboardInterrupt) in the main
    thread, so the run's ``finally`` always runs (SIGTERM's default would kill
    without it); forked helpers get the default action back (fairlab.interrupts)."""
    ctx = raising_on_signals()
    ctx.__enter__()
    return lambda: ctx.__exit__(None, None, None)


def _ignore_signals() -> None:
    if threading.current_thread() is threading.main_thread():
        for s in (signal.SIGINT, signal.SIGTERM):
            signal.signal(s, signal.SIG_IGN)


def _run(scenario: Scenario, resolved: dict[str, Any], caps: capabilities.Capabilities, choice: PathChoice,
         run: _Run, rdir: Path, *, seed: int, run_index: int,
         progress: Callable[[LiveProgress], None] | None) -> Trace:
    t_setup = time.monotonic()
    duration_s = resolved["duration_ns"] / 1e9
    interval_s = resolved["interval_ns"] / 1e9
    labels = [label for label, _ in scenario.expanded_flows()]
    specs = resolved["flows"]
    notes: list[str] = []
    warn: list[str] = []

    def report(stage: str, elapsed: float, message: str = "") -> None:
        if progress is not None:
            progress(LiveProgress(stage, run.run_id, elapsed, duration_s, message))

    # ---- topology
    mtus = [int(f["mss"]) + HEADER_BYTES for f in specs]
    topo = build_dumbbell(run.run_id, mtus, offloads=scenario.offloads)
    sysctls = _apply_sysctls(resolved, topo)
    routes = _apply_routes(resolved, topo)

    # ---- emulated link
    link_meta: dict[str, Any]
    linkem_ready_epoch: float | None = None
    if choice.path == "kernel":
        link_meta = kernel_link.setup(resolved, topo, caps.qdiscs)
    else:
        assert choice.linkem is not None
        cfg = linkem_link.config(resolved, topo, seed=seed)
        run.linkem, linkem_ready_epoch = linkem_link.start(run.children, choice.linkem, topo, cfg, rdir, nice=LINKEM_NICE)
        link_meta = {"linkem_config": cfg, "linkem_argv": run.linkem.argv}

    # ---- flows: offsets from the seeded RNG, servers, then clients on schedule
    flows: list[_Flow] = []
    for k, (label, f, start_ns) in enumerate(zip(labels, specs, start_offsets_ns(resolved, seed))):
        stop_ns = int(f["stop_ns"]) if f["stop_ns"] is not None else int(resolved["duration_ns"])
        secs = iperf.seconds_for(int(f["start_ns"]), stop_ns)
        if abs(secs - (stop_ns - int(f["start_ns"])) / 1e9) > 1e-6:
            notes.append(f"flow {label}: iperf3 runs whole seconds, so it sends for {secs} s, not "
                         f"{(stop_ns - int(f['start_ns'])) / 1e9:g} s")
        flows.append(_Flow(index=k, label=label, spec=f, offset_s=start_ns / 1e9, seconds=secs,
                           port=iperf.BASE_PORT + k, logfile=rdir / f"flow-{k}.json"))
        if f["params"]:
            notes.append(f"flow {label}: congestion-control params {sorted(f['params'])} are not applied live "
                         "(kernel module parameters are global to the host)")
    binary = caps.iperf3
    assert binary is not None
    for fl in flows:
        fl.server = run.children.start(f"server-{fl.index}", topo.receiver.ns,
                                       iperf.server_args(binary, fl.port, rdir / f"server-{fl.index}.json"),
                                       stderr=rdir / f"server-{fl.index}.stderr", nice=IPERF_NICE)
    _wait_listening(topo, [fl.port for fl in flows], run)
    report("setup", 0.0, f"namespaces, {choice.path} link and {len(flows)} iperf3 server(s) up "
                         f"in {time.monotonic() - t_setup:.2f} s")

    t0 = time.monotonic() + LEAD_S
    if linkem_ready_epoch is not None:
        # Put scenario time 0 a whole number of intervals after linkem's `ready`, so
        # its samples (at k·interval from `ready`) fall on the flows' sample grid.
        ready_mono = time.monotonic() - (time.time() - linkem_ready_epoch)
        t0 = ready_mono + math.ceil((t0 - ready_mono) / interval_s) * interval_s
    t0_epoch = time.time() + (t0 - time.monotonic())
    grace = 5.0 + 4 * max(f["rtt_ns"] for f in specs) / 1e9
    deadline = t0 + max(fl.offset_s + fl.seconds for fl in flows) + grace
    pending = sorted(flows, key=lambda x: x.offset_s)
    last_report = -1.0
    while True:
        now = time.monotonic()
        while pending and now >= t0 + pending[0].offset_s:
            fl = pending.pop(0)
            spec = iperf.ClientSpec(server_ip=topo.receiver.ip, port=fl.port, cca=fl.spec["cca"], interval_s=interval_s,
                                    seconds=fl.seconds, nbytes=fl.spec["bytes"], window=fl.spec["rwnd_bytes"])
            fl.launched_epoch = time.time()
            fl.child = run.children.start(f"client-{fl.index}", topo.senders[fl.index].ns,
                                          iperf.client_args(binary, spec, fl.logfile),
                                          stderr=rdir / f"flow-{fl.index}.stderr", nice=IPERF_NICE)
            now = time.monotonic()
        started = [fl for fl in flows if fl.child is not None]
        for fl in started:
            rc = fl.child.popen.poll()  # type: ignore[union-attr]
            if rc not in (None, 0):
                raise LiveError(f"flow {fl.label}'s iperf3 client failed (exit code {rc}): {_client_error(fl)}")
        if run.linkem is not None and run.linkem.popen.poll() is not None:
            raise LiveError(f"linkem stopped in the middle of the run (exit code {run.linkem.popen.returncode}): "
                            f"{run.linkem.stderr_tail() or 'no message'}")
        if not pending and all(fl.child.popen.poll() == 0 for fl in started):  # type: ignore[union-attr]
            break
        if now > deadline:
            late = [fl.label for fl in started if fl.child.popen.poll() is None]  # type: ignore[union-attr]
            raise LiveError(f"flow(s) {', '.join(late)} did not finish by the end of the run plus {grace:.0f} s "
                            "(a --bytes transfer too large for the duration, or a stalled path); lengthen `duration`")
        elapsed = now - t0
        if elapsed - last_report >= min(1.0, interval_s):
            report("running", max(0.0, elapsed))
            last_report = elapsed
        wait = 0.05 if not pending else min(0.05, max(0.0, t0 + pending[0].offset_s - time.monotonic()))
        time.sleep(wait)

    # ---- losses outside the bottleneck: a veth whose peer's input backlog was full
    # (host-wide `net.core.netdev_max_backlog`, which live mode does not touch)
    off_path = off_path_link_drops(topo)
    if off_path is None:
        warn.append("could not read the run's veth counters (ip -j -s link), so losses outside the bottleneck "
                    "were not counted")
    elif off_path:
        warn.append(f"{sum(off_path.values())} packets were dropped outside the bottleneck, by the host's input "
                    f"backlog (per link: {off_path}); net.core.netdev_max_backlog is {_netdev_max_backlog()} on this "
                    "host, too small for these windows' bursts, and host-wide, so fairlab leaves it: raise it as root "
                    "(sysctl -w net.core.netdev_max_backlog=N) and run again (docs/live.md)")

    # ---- stop the link and the servers, collect
    report("collecting", time.monotonic() - t0)
    for fl in flows:
        if fl.server is not None:
            run.children.stop(fl.server, grace=2.0)
    linkem_rc = None
    if run.linkem is not None:
        linkem_rc = run.children.stop(run.linkem, grace=5.0)
        if linkem_rc not in (0, None):
            warn.append(f"linkem exited with code {linkem_rc} when stopped: {run.linkem.stderr_tail()}")
    trace = _collect(flows, labels, t0_epoch, run_index, interval_s)

    # ---- bottleneck samples (linkem's t_ns counts from when it printed `ready`)
    bottleneck = None
    if linkem_ready_epoch is not None:
        stats = linkem_link.read_stats(rdir / "linkem-stats.jsonl")
        bottleneck = linkem_link.bottleneck_samples(stats, zero_offset_s=linkem_ready_epoch - t0_epoch, run=run_index,
                                                    interval_s=interval_s, end_s=duration_s)
        if bottleneck is None:
            warn.append("linkem wrote no stats, so the trace has no bottleneck samples")
        link_health = linkem_link.read_health(rdir / "linkem-stats.jsonl")
        link_meta["linkem_health"] = link_health
        warn.extend(linkem_link.health_warnings(link_health))
    else:
        notes.append("kernel path: no router-side bottleneck samples (tc counters are not sampled)")

    # ---- goodput check and metadata
    rate = float(resolved["bottleneck"]["rate_bps"])
    achieved, frac = _achieved_goodput(trace, flows, interval_s, rate)
    if achieved is not None and frac < GOODPUT_WARN_FRACTION:
        warn.append(f"the flows together achieved {_rate_text(achieved)}, {100 * frac:.0f}% of the configured "
                    f"{_rate_text(rate)} bottleneck: the {choice.path} path could not sustain the rate on this "
                    "machine (or the flows were window-limited), so throughputs are not the bottleneck's shares"
                    + _load_text())
    meta = dict(trace.meta)
    meta_notes = list(meta.get("notes", [])) + notes + warn
    meta.update({
        "backend": "live",
        "run_id": run.run_id,
        "seed": int(seed),
        "run_index": int(run_index),
        "scenario": scenario.name,
        "resolved_scenario": resolved,
        # where BLUE's d1, d2 and freeze_time came from (docs/qdiscs.md); None for other qdiscs
        "qdisc_rule": scenario.qdisc_params()[1],
        "emulation": {"path": choice.path, "why": choice.why, **link_meta},
        "kernel": caps.kernel,
        "tool": "iperf3",
        "tool_versions": {"iperf3": caps.iperf3_version, "linkem": caps.linkem_version if choice.path == "linkem" else None,
                          "pyroute2": caps.pyroute2},
        "topology": topo.describe(),
        "sysctls": sysctls,
        "routes": routes,
        "clients": [{"label": fl.label, "argv": fl.child.argv if fl.child else None, "offset_s": fl.offset_s,
                     "launched_epoch": fl.launched_epoch} for fl in flows],
        "live_format_version": LIVE_FORMAT_VERSION,
        "t0_epoch": t0_epoch,
        "child_nice": {"iperf3": IPERF_NICE, "linkem": LINKEM_NICE},
        "load_average": list(os.getloadavg()),
        "interval_s": interval_s,
        "duration_s": duration_s,
        "achieved_goodput_bps": achieved,
        "off_path_drops": {"links": off_path},
        "warnings": warn,
        "notes": meta_notes,
        "not_emulated": ["access_rate (senders' veths are not rate-limited)", "host_jitter",
                         "delack_timeout (the kernel's own delayed-ACK timer applies)"],
        "run_dir": str(rdir),
    })
    out = Trace.from_frames(trace.samples, trace.flows, bottleneck, meta)
    report("done", duration_s, "; ".join(warn))
    return out


def _netdev_max_backlog() -> str:
    try:
        return Path("/proc/sys/net/core/netdev_max_backlog").read_text().strip()
    except OSError:
        return "unknown"


def _load_text() -> str:
    load, cpus = os.getloadavg()[0], os.cpu_count() or 1
    return f" (load average {load:.1f} on {cpus} CPUs)" if load > cpus else ""


def _rate_text(bps: float) -> str:
    return f"{bps / 1e9:.3g} Gbit/s" if bps >= 1e9 else f"{bps / 1e6:.3g} Mbit/s"


# --------------------------------------------------------------------- set-up helpers
def _apply_sysctls(resolved: dict[str, Any], topo: Dumbbell) -> dict[str, dict[str, str]]:
    """Per-namespace TCP sysctls; returns exactly what was written, by namespace."""
    out: dict[str, dict[str, str]] = {}
    rx_max = 0
    for s, f in zip(topo.senders, resolved["flows"]):
        m = socket_buffer_max(resolved, int(f["rtt_ns"]))
        rx_max = max(rx_max, m)
        v = {
            "net.ipv4.tcp_rmem": f"{RMEM_MIN_DEFAULT[0]} {RMEM_MIN_DEFAULT[1]} {m}",
            "net.ipv4.tcp_wmem": f"{WMEM_MIN_DEFAULT[0]} {WMEM_MIN_DEFAULT[1]} {m}",
            "net.ipv4.tcp_ecn": "1" if f["ecn"] else "0",
            "net.ipv4.tcp_sack": "1" if f["sack"] else "0",
            "net.ipv4.tcp_no_metrics_save": "1",
        }
        if f["rwnd_bytes"]:
            v["net.core.wmem_max"] = str(max(int(f["rwnd_bytes"]), 212992))
        set_sysctls(s.ns, v)
        out[s.ns] = v
    rwnds = [int(f["rwnd_bytes"]) for f in resolved["flows"] if f["rwnd_bytes"]]
    v = {
        "net.ipv4.tcp_rmem": f"{RMEM_MIN_DEFAULT[0]} {RMEM_MIN_DEFAULT[1]} {rx_max}",
        "net.ipv4.tcp_wmem": f"{WMEM_MIN_DEFAULT[0]} {WMEM_MIN_DEFAULT[1]} {rx_max}",
        "net.ipv4.tcp_ecn": "2",  # accept ECN when a sender asks (the kernel default)
        "net.ipv4.tcp_sack": "1",
        "net.ipv4.tcp_no_metrics_save": "1",
    }
    if rwnds:
        v["net.core.rmem_max"] = str(max(max(rwnds), 212992))
        v["net.core.wmem_max"] = str(max(max(rwnds), 212992))
    set_sysctls(topo.receiver.ns, v)
    out[topo.receiver.ns] = v
    return out


def _apply_routes(resolved: dict[str, Any], topo: Dumbbell) -> list[dict[str, Any]]:
    """initcwnd on each sender's route to the receiver; quickack on the receiver's
    route back when a flow turns delayed ACKs off."""
    out = []
    for s, f in zip(topo.senders, resolved["flows"]):
        m = {"RTAX_INITCWND": int(f["initial_cwnd"])}
        add_host_route(s.ns, s.ifname, topo.receiver.ip, m)
        out.append({"ns": s.ns, "dst": topo.receiver.ip, "metrics": m})
        if not f["delayed_ack"]:
            q = {"RTAX_QUICKACK": 1}
            add_host_route(topo.receiver.ns, topo.receiver.ifname, s.ip, q)
            out.append({"ns": topo.receiver.ns, "dst": s.ip, "metrics": q})
    return out


def _wait_listening(topo: Dumbbell, ports: list[int], run: _Run, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    want = set(ports)
    while True:
        have = iperf.listening_ports(run_in(topo.receiver.ns, ["ss", "-Htln"], what="list listening sockets"))
        if want <= have:
            return
        dead = [c for c in run.children.items if c.name.startswith("server-") and c.popen.poll() is not None]
        if dead:
            raise LiveError(f"iperf3 server {dead[0].name} exited at start: {dead[0].stderr_tail() or 'no message'}")
        if time.monotonic() > deadline:
            raise LiveError(f"iperf3 server port(s) {sorted(want - have)} were not listening after {timeout:g} s")
        time.sleep(0.02)


def _client_error(fl: _Flow) -> str:
    try:
        doc = json.loads(fl.logfile.read_text())
        if isinstance(doc, dict) and doc.get("error"):
            return str(doc["error"])
    except (OSError, ValueError):
        pass
    return (fl.child.stderr_tail() if fl.child else "") or "no message"


# --------------------------------------------------------------------- collection
def _collect(flows: list[_Flow], labels: list[str], t0_epoch: float, run_index: int, interval_s: float) -> Trace:
    """Read each client's file with `fairlab.ingest.load` ON ITS OWN and put the
    flows on the run's clock. Loading them together does not fit a live run:
    ingest lines several files up on ``start.timestamp`` (whole seconds before
    iperf3 3.18) and refuses files whose inferred intervals differ by a millisecond
    (iperf3 3.12 does not record -i; a CPU-starved run reports 1.002-s intervals),
    while the runner knows both the interval and each launch time exactly."""
    from ...ingest import IngestError, load

    parts, received = [], []
    for fl, label in zip(flows, labels):
        try:
            parts.append(load([str(fl.logfile)], labels=[label]))
        except IngestError as exc:
            raise LiveError(f"flow {label}'s iperf3 result could not be read: {exc}") from None
        # The receiver's file holds what was delivered (`iperf_pairs`); without it the
        # sender's count is the best there is, and the trace says so.
        try:
            received.append(load([str(fl.logfile.parent / f"server-{fl.index}.json")], labels=[label]))
        except IngestError:
            received.append(None)
    sample_parts, flow_rows = [], []
    notes: list[str] = []
    clocks: dict[str, str] = {}
    for k, (fl, tr, rx) in enumerate(zip(flows, parts, received)):
        if len(tr.flows) != 1:
            raise LiveError(f"the iperf3 file of flow {fl.label} holds {len(tr.flows)} flows, expected exactly one")
        launched = (fl.launched_epoch or t0_epoch) - t0_epoch
        # iperf3 >= 3.20 stamps its control connection to the millisecond
        # (timemillisecs); that is later than the launch and closer to the test start
        # (interval 0), so it places the flow better. Whole-second stamps are worse
        # than the launch time the runner measured.
        src = (tr.meta.get("sources") or [{}])[0]
        connect = src.get("epoch_s")
        if connect is not None and src.get("epoch_precision_s") == 0.001 \
                and 0 <= float(connect) - (fl.launched_epoch or t0_epoch) < 5.0:
            launched = float(connect) - t0_epoch
            clocks[fl.label] = "iperf3's millisecond connect stamp"
        else:
            clocks[fl.label] = "the runner's launch time"
        row = tr.flows.iloc[0].to_dict()
        if rx is not None and len(rx.flows) == 1:
            s = receiver_samples(rx, tr, interval_s)
        else:
            notes.append(f"flow {fl.label}: no readable receiver-side iperf3 file, so throughput is the sender's "
                         "count of bytes written to its socket (it can exceed the link rate per interval)")
            s = tr.samples.copy()
            s["t"] = s["t"] - float(row["start_s"])
        # t from the file's own zero (its test start) to the run's clock.
        s["t"] = s["t"] + launched
        s["flow"] = k
        s["run"] = run_index
        sample_parts.append(s)
        row.update({
            "flow": k,
            "start_s": launched,
            "configured_start_s": fl.spec["start_ns"] / 1e9,
            "min_srtt_s": row.get("rtt_s"),  # iperf3's "min_rtt": the least per-interval srtt
            "rtt_s": fl.spec["rtt_ns"] / 1e9,
            "ecn": bool(fl.spec["ecn"]),
            "mss": int(fl.spec["mss"]),
        })
        if pd.isna(row.get("cca")):
            row["cca"] = fl.spec["cca"]
        flow_rows.append(row)
        notes += list(tr.meta.get("notes", []))
    first = parts[0].meta
    meta = {
        "importer": first.get("importer"),
        "ingest_format_version": first.get("ingest_format_version"),
        "tool": "iperf3",
        "tool_version": first.get("tool_version"),
        "host": first.get("host"),
        "time": first.get("time"),
        "interval_s": interval_s,
        "sources": [src for tr in parts for src in tr.meta.get("sources", [])],
        "alignment": {"method": "the runner's clock: each file's test start is placed at its iperf3 client's "
                                "millisecond connect stamp where iperf3 >= 3.20 writes one, else at the time the "
                                "runner launched it; t = 0 is scenario time 0",
                      "per_flow": clocks,
                      "precision_s": "a few ms plus the client's TCP and iperf3 handshakes (a few RTTs)",
                      "uncertainty_s": 0.01},
        "notes": notes,
    }
    return Trace.from_frames(pd.concat(sample_parts, ignore_index=True), pd.DataFrame(flow_rows), None, meta)


def _achieved_goodput(trace: Trace, flows: list[_Flow], interval_s: float, rate_bps: float) -> tuple[float | None, float]:
    """Mean summed throughput over the sample times at which every backlogged flow
    (no --bytes) has a sample, leaving out the first second of that span (slow
    start), and its share of ``rate_bps``; (None, 1.0) when there is no such span."""
    backlogged = [fl.index for fl in flows if fl.spec["bytes"] is None]
    if not backlogged:
        return None, 1.0
    m = trace.matrix()
    m = m[[c for c in m.columns if int(c) in backlogged]].dropna()
    skip = int(math.ceil(1.0 / interval_s - 1e-9))
    if len(m) <= skip:
        return None, 1.0
    total = float(m.iloc[skip:].sum(axis=1).mean())
    return total, total / rate_bps
