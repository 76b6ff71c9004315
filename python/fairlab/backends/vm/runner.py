"""`run_vm`: one scenario, one run, on a real Linux kernel in a QEMU guest.

Read this first — the order of a run:

1. The image (`image.find`: built once, cached) and the plan (`plan.build`): the
   scenario as a guest script, checked against what the image's kernel offers.
2. A per-run initramfs: the image's base archive plus a small archive holding the
   script and the module load order (`cpio.archive`, byte-reproducible).
3. `qemu.boot`: the guest loads the modules, checks its timers, builds the dumbbell,
   runs the flows in virtual time, then prints a base64 tar of its results.
4. Collection: each flow's iperf3 (or DCCP generator) JSON through
   `fairlab.ingest.load`, placed on scenario time by the launch stamps the guest
   took with its own clock; the qdisc counters sampled every interval become the
   bottleneck samples.
5. ``finally`` — on success, error and signals alike: QEMU is killed if still
   running and the temporary directory is removed. SIGTERM is turned into
   KeyboardInterrupt for the duration of the run so this always happens.

Same scenario + seed + image ⇒ the same guest instructions ⇒ a byte-identical
result archive (tested). The seed enters only through the flows' start jitter
(`host_settings.start_offsets_ns`, the live backend's schedule too) and the kernel command
line (recorded).
"""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import shutil
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from ... import __version__
from ...interrupts import raising_on_signals
from ...scenario import Scenario
from ...trace import Trace
from ..iperf_pairs import receiver_samples
from .. import queue_trace as common_queue_trace
from . import btf, cpio, image as vm_image, plan as vm_plan, qemu, queue_trace, tcp_probe
from .errors import VmError
from .plan import VM_FORMAT_VERSION
from ..live.netns import link_tx_drops
from ..live.cleanup import process_start_time

#: Per-run temporary directories, and the file naming the process that owns one.
RUN_DIR_PREFIX = "fairlab-vm-run-"
OWNER_FILE = "owner"

#: Host seconds allowed per simulated second per flow, plus boot; far above what
#: any run needs on a loaded 2-core host (measured ~3 per flow-second at 100 Mbit/s).
TIMEOUT_BOOT_S = 120.0
TIMEOUT_PER_FLOW_SECOND = 15.0
#: The guest CPU's busy share from which a run is called CPU-bound (docs/vm.md, "How
#: fast the guest can go"): one server 80 % busy makes work wait about four times its
#: own length (M/M/1), and the flows feel the CPU, not only the network.
GUEST_BUSY_WARN = 0.8


Progress = Callable[[str], None]


def kernel_cmdline(seed: int) -> str:
    return f"console=ttyS0 quiet loglevel=1 panic=-1 fairlab.seed={int(seed)}"


def run_vm(
    scenario: Scenario,
    *,
    seed: int,
    run_index: int = 0,
    image: vm_image.Image | None = None,
    keep_dir: str | os.PathLike[str] | None = None,
    tcp_probe_path: str | os.PathLike[str] | None = None,
    queue_trace_path: str | os.PathLike[str] | None = None,
    progress: Progress | None = None,
) -> Trace:
    """Run ``scenario`` once in the guest and return its `Trace`.

    The scenario's `offloads` turns TSO/GSO/GRO on in the guest (off by default:
    a hardware testbed's wire carries MTU-sized packets). ``image`` defaults to the cached distribution image
    (built on first use). ``keep_dir`` keeps the guest's raw result files there.
    ``tcp_probe_path`` also records the kernel's per-ACK state of every sender (the
    `tcp:tcp_probe` tracepoint) and writes it to that Parquet file
    (`tcp_probe.COLUMNS`); the run's meta says how many events it holds.
    ``queue_trace_path`` also records every packet's fate at the bottleneck queue (a
    kprobe on the kernel qdisc's enqueue: DropTail, and RED and PIE without ECN) and
    writes it there
    (`backends/queue_trace.COLUMNS`).
    """
    say = progress or (lambda s: None)
    binary = qemu.find_qemu()
    if binary is None:
        raise VmError("qemu-system-x86_64 is not installed, and the vm backend boots its kernel with it; install it: "
                      "apt-get install qemu-system-x86 (no root is needed to run it)")
    try:
        img = image or vm_image.find(progress=say)
    except vm_image.ImageError as exc:
        raise VmError(f"the vm image could not be built: {exc}") from None
    layout = None
    if queue_trace_path is not None:
        try:
            layout = btf.queue_trace_layout(img.kernel, cache=img.root / "queue-trace-layout.json")
        except btf.BtfError as exc:
            raise VmError(str(exc)) from None
    gplan = vm_plan.build(scenario, img, seed=seed, tcp_probe=tcp_probe_path is not None, queue_trace=layout)
    remove_orphaned_run_dirs()
    tmp = Path(tempfile.mkdtemp(prefix=RUN_DIR_PREFIX))
    (tmp / OWNER_FILE).write_text(f"{os.getpid()} {process_start_time(os.getpid())}\n")
    with raising_on_signals():
        try:
            return _boot_and_collect(scenario, gplan, img, binary, tmp, seed=seed, run_index=run_index,
                                     keep_dir=keep_dir, tcp_probe_path=tcp_probe_path,
                                     queue_trace_path=queue_trace_path, say=say)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


def remove_orphaned_run_dirs() -> list[Path]:
    """Remove the run directories (initramfs, results) of vm runs whose process is
    gone: a run killed with SIGKILL cannot clean up after itself (its QEMU dies with
    it, PR_SET_PDEATHSIG), so the next run does. A directory belongs to a live run
    while the pid and start time in its owner file name a running process."""
    removed = []
    for d in Path(tempfile.gettempdir()).glob(f"{RUN_DIR_PREFIX}*"):
        try:
            pid, start = (d / OWNER_FILE).read_text().split()
        except (OSError, ValueError):
            continue  # not ours, or still being created
        if process_start_time(int(pid)) != start:
            shutil.rmtree(d, ignore_errors=True)
            removed.append(d)
    return removed


def _boot_and_collect(scenario: Scenario, gplan: vm_plan.GuestPlan, img: vm_image.Image, binary: str, tmp: Path, *,
                      seed: int, run_index: int, keep_dir: str | os.PathLike[str] | None,
                      tcp_probe_path: str | os.PathLike[str] | None,
                      queue_trace_path: str | os.PathLike[str] | None, say: Progress) -> Trace:
    """The per-run initramfs, the boot, and the results; ``tmp`` is removed by the caller."""
    initrd = tmp / "initrd.cpio"
    entries = [
        cpio.file("fairlab/run.sh", gplan.script.encode()),
        cpio.file("fairlab/modules", ("\n".join(gplan.modules) + "\n").encode()),
    ]
    if any(gf.tool == "dccpgen" for gf in gplan.flows):
        gen = vm_image.dccpgen_binary()
        if gen is None:
            raise VmError("this run has DCCP flows and fairlab's DCCP traffic generator is not built (make dccpgen)")
        entries.append(cpio.file("usr/bin/fairlab-dccpgen", gen.read_bytes(), 0o755))
    run_archive = cpio.archive(entries)
    with open(initrd, "wb") as out, open(img.initrd, "rb") as base:
        while chunk := base.read(1 << 20):
            out.write(chunk)
        out.write(run_archive)
    argv = qemu.command(binary, img.kernel, initrd, kernel_cmdline(seed))
    flow_seconds = sum(gf.seconds for gf in gplan.flows) + gplan.duration_ns / 1e9
    timeout = TIMEOUT_BOOT_S + TIMEOUT_PER_FLOW_SECOND * flow_seconds
    say(f"booting kernel {img.release} in QEMU (virtual time) for {gplan.duration_ns / 1e9:g} s of traffic")
    try:
        boot = qemu.boot(argv, timeout_s=timeout)
    except qemu.QemuError as exc:
        raise VmError(str(exc)) from None
    res = tmp / "res"
    _extract(boot.archive, res)
    if keep_dir is not None:
        dest = Path(keep_dir)
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copytree(res, dest, dirs_exist_ok=True)
        (dest / "run.sh").write_text(gplan.script)
    err = _read(res / "error.txt")
    if err:
        raise VmError(f"in the guest: {err.strip()}")
    trace = _collect(scenario, gplan, res, run_index=run_index)
    trace = _with_meta(trace, scenario, gplan, img, res, boot, argv, seed=seed, run_index=run_index,
                       qemu_binary=binary)
    if tcp_probe_path is not None:
        trace.meta["vm"]["tcp_probe"] = _write_tcp_probe(res, gplan, Path(tcp_probe_path))
    if queue_trace_path is not None:
        trace.meta["vm"]["queue_trace"] = _write_queue_trace(res, scenario, gplan, Path(queue_trace_path), seed=seed)
    return trace


def _write_queue_trace(res: Path, scenario: Scenario, gplan: vm_plan.GuestPlan, dest: Path, *, seed: int) -> dict[str, object]:
    """Parse the guest's queue trace into ``dest``; what the run's meta records of it."""
    try:
        text = gzip.decompress((res / "queue.txt.gz").read_bytes()).decode("utf-8", "replace")
    except FileNotFoundError:
        raise VmError("the guest wrote no queue trace (queue.txt.gz); see run.log in --keep-dir") from None
    except (OSError, EOFError) as exc:
        raise VmError(f"the guest's queue trace (queue.txt.gz) is not a whole gzip file: {exc}") from None
    flows = scenario.resolve(seed=seed)["flows"]
    try:
        frame, left_out = queue_trace.parse(text, t0_ns=_int_file(res / "t0") or 0,
                                  ports={gf.port: gf.index for gf in gplan.flows},
                                  mss={gf.index: int(flows[gf.index]["mss"]) for gf in gplan.flows},
                                  dccp_ports=frozenset(gf.port for gf in gplan.flows if gf.tool == "dccpgen"))
    except queue_trace.QueueTraceError as exc:
        raise VmError(str(exc)) from None
    lost = tcp_probe.lost_events(_read(res / "queue-stats.txt"))  # the same ring-buffer stats file
    if lost:
        raise VmError(f"the guest's queue trace lost {lost} events (its buffer was too small); nothing was written")
    common_queue_trace.write(frame, dest)
    return {"file": dest.name, "events": int(len(frame)), "lost_events": lost,
            "left_out": {"packets": left_out.packets, "drops": left_out.drops}}


def _write_tcp_probe(res: Path, gplan: vm_plan.GuestPlan, dest: Path) -> dict[str, object]:
    """Parse the guest's per-ACK trace into ``dest``; what the run's meta records of it."""
    text = _trace_text(res)
    if text is None:
        raise VmError("the guest wrote no per-ACK trace (tcp_probe.txt.gz); see run.log in --keep-dir")
    try:
        frame = tcp_probe.parse(text, t0_ns=_int_file(res / "t0") or 0, first_port=gplan.flows[0].port,
                                n_flows=len(gplan.flows))
    except tcp_probe.TcpProbeError as exc:
        raise VmError(str(exc)) from None
    lost = tcp_probe.lost_events(_read(res / "tcp_probe-stats.txt"))
    tcp_probe.write(frame, dest)
    return {"file": dest.name, "events": int(len(frame)), "lost_events": lost}


def _trace_text(res: Path) -> str | None:
    """The guest's trace (gzip-compressed in the results since 2026-11-27)."""
    try:
        return gzip.decompress((res / "tcp_probe.txt.gz").read_bytes()).decode("utf-8", "replace")
    except FileNotFoundError:
        return None
    except (OSError, EOFError) as exc:
        raise VmError(f"the guest's trace (tcp_probe.txt.gz) is not a whole gzip file: {exc}") from None


def _extract(archive: bytes, dest: Path) -> None:
    dest.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tf:
        for m in tf.getmembers():
            # The guest writes a flat directory of regular files; anything else is refused.
            if not (m.isfile() or m.isdir()) or m.name.startswith("/") or ".." in Path(m.name).parts:
                raise VmError(f"the guest's result archive holds an unexpected entry {m.name!r}")
        # The "data" filter is a second guard where this Python has it (3.11.4 and 3.12
        # on; Debian 12's 3.11.2 lacks it): the check above already admits only plain
        # files and directories inside `dest`, which is what the filter enforces.
        if hasattr(tarfile, "data_filter"):
            tf.extractall(dest, filter="data")
        else:
            tf.extractall(dest)


def _read(p: Path) -> str | None:
    try:
        return p.read_text(errors="replace")
    except FileNotFoundError:
        return None


def _int_file(p: Path) -> int | None:
    t = _read(p)
    try:
        return int(t.strip()) if t else None
    except ValueError:
        return None


def _collect(scenario: Scenario, gplan: vm_plan.GuestPlan, res: Path, *, run_index: int) -> Trace:
    """Flows on scenario time (t = 0 at the guest's T0) plus the bottleneck samples."""
    from ...ingest import IngestError, load

    t0 = _int_file(res / "t0")
    if t0 is None:
        raise VmError("the guest did not record its time zero (t0); see run.log in --keep-dir")
    sample_parts, flow_rows, notes = [], [], list(gplan.notes)
    interval_s = gplan.interval_ns / 1e9
    resolved = scenario.resolve()
    specs = resolved["flows"]
    try:
        starts = tcp_probe.data_starts(_trace_text(res) or "", t0_ns=t0,
                                       ports={gf.port: gf.index for gf in gplan.flows if gf.tool == "iperf3"})
    except tcp_probe.TcpProbeError as exc:
        raise VmError(f"the guest's first-round-trip trace could not be read: {exc}") from None
    late: list[float] = []
    bottleneck = bottleneck_samples(_read(res / "qdisc-samples.txt") or "", t0_ns=t0, run=run_index)
    for gf in gplan.flows:
        rc = _int_file(res / f"client-{gf.index}.rc")
        received = res / f"server-{gf.index}.json"
        sent = res / f"flow-{gf.index}.json"
        if (res / "deadline").exists() and rc not in (0, None):
            why = stalled_bottleneck(bottleneck, resolved["bottleneck"]["qdisc"])
            raise VmError(f"flow {gf.label} did not finish by the end of the run plus {vm_plan.GRACE_NS / 1e9:g} s in "
                          "the guest (" + (why or "a --bytes transfer too large for the duration, or a stalled path") + ")")
        if rc not in (0, None) or not received.exists() or (gf.tool == "iperf3" and not sent.exists()):
            why = _client_error(res, gf)
            raise VmError(f"flow {gf.label}'s traffic generator failed in the guest (exit code {rc}): {why}")
        try:
            rx = load([str(received)], labels=[gf.label])
            tx = load([str(sent)], labels=[gf.label]) if gf.tool == "iperf3" else None
        except IngestError as exc:
            raise VmError(f"flow {gf.label}'s result could not be read: {exc}") from None
        if len(rx.flows) != 1 or (tx is not None and len(tx.flows) != 1):
            raise VmError(f"the result files of flow {gf.label} hold more than one flow, expected one")
        launched_ns = _int_file(res / f"launch-{gf.index}")
        launched = (launched_ns - t0) / 1e9 if launched_ns is not None else gf.offset_ns / 1e9
        # iperf3 counts its intervals from its test start, which comes after its
        # connection set-up: place them on the measured first data segment
        # (tcp_probe.data_starts), not on the launch.
        started = starts.get(gf.index, launched)
        if gf.index in starts:
            late.append(started - gf.offset_ns / 1e9)
        s = receiver_samples(rx, tx, interval_s)
        s["t"] = s["t"] + started
        s["flow"] = gf.index
        s["run"] = run_index
        sample_parts.append(s)
        row = (tx if tx is not None else rx).flows.iloc[0].to_dict()
        spec = specs[gf.index]
        row.update({
            "flow": gf.index, "start_s": started, "configured_start_s": spec["start_ns"] / 1e9,
            "min_srtt_s": row.get("rtt_s"), "rtt_s": spec["rtt_ns"] / 1e9, "ecn": bool(spec["ecn"]),
            "mss": int(spec["mss"]), "cca": gf.cca, "source": str(received.name),
        })
        flow_rows.append(row)
        # Ingest's notes name the guest's files by their temporary host path; say which
        # flow and side they are about instead, and drop the two that only say a file
        # is the receiver's (the sender's file supplies what they miss).
        for side, tr in (("receiver", rx), ("sender", tx)):
            for n in (tr.meta.get("notes", []) if tr is not None else []):
                if "server-side file" in n or "does not name the sender" in n:
                    continue
                notes.append(re.sub(r"^\S+\.json: ", f"flow {gf.label} ({side} side): ", n))
    if late:
        span = f"{min(late):.2f} s" if f"{min(late):.2f}" == f"{max(late):.2f}" else f"{min(late):.2f}–{max(late):.2f} s"
        notes.append(f"the flows' first data left {span} after their scheduled starts (iperf3's connection set-up: "
                     "control connection, parameters, data connection); samples sit on the measured starts")
    samples = pd.concat(sample_parts, ignore_index=True)
    meta = {"notes": notes, "interval_s": gplan.interval_ns / 1e9}
    return Trace.from_frames(samples, pd.DataFrame(flow_rows), bottleneck, meta)


def _client_error(res: Path, gf: vm_plan.GuestFlow) -> str:
    try:
        doc = json.loads((res / f"flow-{gf.index}.json").read_text())
        if isinstance(doc, dict) and doc.get("error"):
            return str(doc["error"])
    except (OSError, ValueError):
        pass
    err = (_read(res / f"client-{gf.index}.err") or "").strip().splitlines()
    return err[-1] if err else "no message"


def bottleneck_samples(text: str, *, t0_ns: int, run: int) -> pd.DataFrame | None:
    """Bottleneck rows from the sampler's output: blocks of ``T <ns>`` followed by
    ``tc -s -j qdisc show dev rd``. Queue length is the root qdisc's backlog (htb's
    backlog is its children's); drops and marks are counted per interval from the
    cumulative counters (marks: the child's ECN-mark counters, named per qdisc);
    ``link_bps`` is the root's byte counter per second between samples."""
    rows = []
    prev_drops = prev_marks = prev_bytes = prev_t = None
    for block in re.split(r"^T ", text, flags=re.M):
        if not block.strip():
            continue
        head, _, body = block.partition("\n")
        try:
            t_ns = int(head.strip())
            qdiscs = json.loads(body.strip() or "[]")
        except ValueError:
            continue  # a sample cut short by the end of the run
        root = next((q for q in qdiscs if q.get("root")), None)
        if root is None:
            continue
        drops = int(root.get("drops", 0))
        sent = int(root.get("bytes", 0))
        marks = sum(_marks(q) for q in qdiscs)
        rows.append({
            "run": run, "t": (t_ns - t0_ns) / 1e9, "queue_bytes": float(root.get("backlog", 0)),
            "queue_pkts": float(root.get("qlen", 0)),
            "drops": drops - prev_drops if prev_drops is not None else drops,
            "marks": marks - prev_marks if prev_marks is not None else marks,
            # Bytes that left the bottleneck queue per second since the previous
            # sample (whole frames, as the wire carries them): the link's utilisation.
            "link_bps": (sent - prev_bytes) * 8e9 / (t_ns - prev_t) if prev_t is not None and t_ns > prev_t else float("nan"),
        })
        prev_drops, prev_marks, prev_bytes, prev_t = drops, marks, sent, t_ns
    if not rows:
        return None
    return pd.DataFrame(rows)


def stalled_bottleneck(bottleneck: pd.DataFrame | None, qdisc: str) -> str | None:
    """Why a run's generators could not finish, when the bottleneck says: from some
    sample to the last, nothing left the queue, the queue stayed empty, and every
    packet that arrived was dropped. With RED that is Linux's RED under htb: RED
    starts an idle period only when its own dequeue finds it empty (`red_dequeue`),
    but htb stops dequeuing a class once it is empty, so the average queue never
    decays with idle time; it falls by 1/2^Wlog per arriving packet only, and senders
    in retransmission-timer backoff bring a few packets a minute. Above max_th every
    one of them is dropped, iperf3's control messages included."""
    if bottleneck is None or len(bottleneck) < 3:
        return None
    dead = (bottleneck["link_bps"] == 0) & (bottleneck["queue_bytes"] == 0)
    k = len(bottleneck)
    while k > 0 and dead.iloc[k - 1]:
        k -= 1
    tail = bottleneck.iloc[k:]
    if len(tail) < 3 or tail["drops"].sum() == 0:
        return None
    what = (f"from {tail['t'].iloc[0]:.0f} s of scenario time the bottleneck passed no packet and dropped "
            f"all {int(tail['drops'].sum())} that arrived")
    if qdisc == "red":
        what += ("; Linux RED under htb never sees its queue idle, because htb stops dequeuing an empty class, so "
                 "RED's average queue stayed above max_th while the senders backed off")
    return what


#: Fields of /proc/net/snmp's Tcp group that are settings, not counters.
_TCP_CONSTANTS = frozenset({"RtoAlgorithm", "RtoMin", "RtoMax", "MaxConn"})


def tcp_counters(text: str | None) -> dict[str, int]:
    """A namespace's TCP counters from /proc/net/snmp and /proc/net/netstat, as
    "Group.Name" → value (e.g. "Tcp.RetransSegs", "TcpExt.TCPTimeouts"), only those
    of the Tcp and TcpExt groups that are not zero. Each file gives a group as a line
    of names and a line of values, both led by the group's name."""
    lines = [ln.split() for ln in (text or "").splitlines() if ln.strip()]
    out: dict[str, int] = {}
    for names, values in zip(lines, lines[1:]):
        if not names or names[0] != values[0] or names[0] not in ("Tcp:", "TcpExt:"):
            continue
        group = names[0].rstrip(":")
        for k, v in zip(names[1:], values[1:]):
            try:
                n = int(v)
            except ValueError:
                break  # a names line paired with the next group's names line
            if n and k not in _TCP_CONSTANTS:
                out[f"{group}.{k}"] = n
    return out


def _kv_lines(text: str | None) -> dict[str, str]:
    out = {}
    for line in (text or "").splitlines():
        if " = " in line:
            k, v = line.split(" = ", 1)
            out[k.strip()] = v.strip()
    return out


def _with_meta(trace: Trace, scenario: Scenario, gplan: vm_plan.GuestPlan, img: vm_image.Image, res: Path,
               boot: qemu.Boot, argv: list[str], *, seed: int, run_index: int, qemu_binary: str) -> Trace:
    modules = sorted(line.split()[0] for line in (_read(res / "modules.txt") or "").splitlines() if line.strip())
    if sorted(modules) != sorted(gplan.modules):
        raise VmError(f"the guest loaded modules {modules}, not the ones asked for ({sorted(gplan.modules)}); "
                      "refusing to report a run of a different kernel configuration")
    t0 = _int_file(res / "t0") or 0
    t_end = _int_file(res / "t_end")
    meta = dict(trace.meta)
    off_path = off_path_drops(_read(res / "softnet-start"), _read(res / "softnet-end"),
                              {ns: _read(res / f"links-{ns}.json")
                               for ns in ["r", "d", *(f"s{gf.index}" for gf in gplan.flows)]})
    warnings = []
    if off_path["input_backlog"] or off_path["links"]:
        # The backlog's own count is missing only if the guest lost its softnet files;
        # the links' refusals are then the count to give.
        dropped = off_path["input_backlog"] or sum(off_path["links"].values())
        warnings.append(
            f"{dropped} packets were dropped by the guest's input backlog, outside "
            f"the bottleneck queue (per link: {off_path['links']}); the flows' losses are not "
            "the scenario's alone (docs/vm.md, \"Losses outside the bottleneck\")")
    busy = guest_busy(_read(res / "cpu-start"), _read(res / "cpu-end"))
    totals = bottleneck_totals(_read(res / "qdisc-final.json"))
    cpu_bound = cpu_bound_warning(busy, float(scenario.bottleneck.rate),
                                  (totals or {}).get("bytes"), gplan.duration_ns / 1e9)
    if cpu_bound:
        warnings.append(cpu_bound)
    if warnings:
        meta["notes"] = [*meta.get("notes", []), *warnings]
        meta["warnings"] = [*meta.get("warnings", []), *warnings]
    meta.update({
        "backend": "vm",
        "seed": int(seed),
        "run_index": int(run_index),
        "scenario": scenario.name,
        "resolved_scenario": scenario.resolve(seed=seed),
        "fairlab": __version__,
        "tool": "iperf3",
        "kernel": (_read(res / "uname.txt") or img.release).strip(),
        "vm": {
            "format_version": VM_FORMAT_VERSION,
            "image_key": img.key,
            "kernel_release": img.release,
            "kernel_source": img.manifest.get("kernel_source"),
            "packages": img.manifest.get("packages"),
            "qemu": qemu.qemu_version(qemu_binary),
            "qemu_argv": [os.path.basename(argv[0]), *argv[1:]],
            "icount": qemu.ICOUNT,
            "cpu": qemu.CPU,
            "machine": qemu.MACHINE,
            "clocksource": (_read(res / "clocksource.txt") or "").strip(),
            "cmdline": (_read(res / "cmdline.txt") or "").strip(),
            "modules_loaded": modules,
            "offloads": scenario.offloads,
            "qdisc": gplan.qdisc,
            "sysctl_sender": _kv_lines(_read(res / "sysctl-sender.txt")),
            "sysctl_receiver": _kv_lines(_read(res / "sysctl-receiver.txt")),
            # Each sender's namespace holds one flow's connections (iperf3's data and
            # control), so its counters are that flow's (docs/vm.md, "TCP counters").
            "tcp_counters": {
                "senders": {gf.label: tcp_counters(_read(res / f"netstat-s{gf.index}.txt")) for gf in gplan.flows},
                "receiver": tcp_counters(_read(res / "netstat-d.txt")),
            },
            "virtual_s": (t_end - t0) / 1e9 if t_end else None,
            "guest_busy": busy,
            "bottleneck_totals": totals,
            "off_path_drops": off_path,
            "host_wall_s": round(boot.wall_s, 3),
            "host_cpu_s": round(boot.host_cpu_s, 3),
            "script": gplan.script,
        },
        "clients": [{"label": gf.label, "tool": gf.tool, "port": gf.port, "offset_s": gf.offset_ns / 1e9,
                     "seconds": gf.seconds} for gf in gplan.flows],
        "not_emulated": ["access_rate (the senders' veths are not rate-limited)",
                         "host_jitter (the guest's own processing varies, deterministically)"],
        "duration_s": gplan.duration_ns / 1e9,
    })
    return Trace.from_frames(trace.samples, trace.flows, trace.bottleneck, meta)


def _marks(qdisc: dict) -> int:
    """ECN marks a qdisc counted: its counters named ``*mark*`` (red and choke
    "marked", codel/fq_codel/pie "ecn_mark", fq_codel's "ce_mark", ...), which tc's
    JSON puts at the top level or under "xstats" depending on the qdisc."""
    fields = {**qdisc, **(qdisc.get("xstats") or {})}
    return sum(int(v) for k, v in fields.items() if "mark" in k and isinstance(v, (int, float)) and not isinstance(v, bool))


def bottleneck_totals(text: str | None) -> dict[str, int] | None:
    """The bottleneck queue's counters over the whole run (htb's root on ``rd``, from
    ``tc -s -j qdisc show`` after the flows ended): bytes and packets it sent (whole
    frames), drops, and the ECN marks of its child. Every payload byte a receiver
    counted crossed this queue, so it bounds the flows' total from above."""
    try:
        qdiscs = json.loads(text or "")
    except ValueError:
        return None
    root = next((q for q in qdiscs if q.get("dev") == "rd" and q.get("root")), None)
    if root is None:
        return None
    marks = sum(_marks(q) for q in qdiscs if q.get("dev") == "rd")
    return {"bytes": int(root.get("bytes", 0)), "packets": int(root.get("packets", 0)),
            "drops": int(root.get("drops", 0)), "marks": marks}


def softnet_dropped(text: str | None) -> int | None:
    """Packets every CPU's input backlog refused since boot: the second column (hex)
    of each /proc/net/softnet_stat line, summed (None for no file)."""
    if not (text or "").strip():
        return None
    try:
        return sum(int(line.split()[1], 16) for line in (text or "").splitlines() if line.strip())
    except (IndexError, ValueError):
        return None


def off_path_drops(softnet_start: str | None, softnet_end: str | None,
                   links: dict[str, str | None]) -> dict[str, Any]:
    """Losses that did not happen in the bottleneck queue: the input backlog's drops
    while the flows ran (`softnet_stat`, guest-wide) and, per "namespace/interface",
    the veth transmissions refused over the whole run. The format-5 guest sizes the
    backlog so that both stay zero; anything else is a testbed loss the scenario does
    not have."""
    a, b = softnet_dropped(softnet_start), softnet_dropped(softnet_end)
    per_link = {f"{ns}/{dev}": n for ns, text in links.items() for dev, n in link_tx_drops(text).items()}
    return {"input_backlog": (b - a) if a is not None and b is not None else None, "links": per_link}


def guest_busy(start: str | None, end: str | None) -> float | None:
    """The guest CPU's busy share while flows ran, from two ``/proc/stat`` "cpu" lines
    (user nice system idle iowait irq softirq ...): 1 - idle/total. Near 1 means the
    guest's CPU, not the network, limited the run, and its numbers are suspect."""
    try:
        a = [int(x) for x in (start or "").split()[1:]]
        b = [int(x) for x in (end or "").split()[1:]]
    except ValueError:
        return None
    if len(a) < 5 or len(a) != len(b):
        return None
    total = sum(b) - sum(a)
    idle = (b[3] + b[4]) - (a[3] + a[4])
    return round(1 - idle / total, 4) if total > 0 else None


def cpu_bound_warning(busy: float | None, rate_bps: float, bottleneck_bytes: int | None,
                      duration_s: float) -> str | None:
    """The warning for a run the guest's one emulated CPU limited, or None. QEMU
    counts one instruction per nanosecond, so the guest is a slow machine: its three
    hosts share about 30 µs of CPU per full-size packet at 100 Mbit/s (23 % busy),
    and at several hundred Mbit/s they need all of it; the kernel on real hardware
    would not be held back so."""
    if busy is None or busy < GUEST_BUSY_WARN:
        return None
    moved = ""
    if bottleneck_bytes is not None and duration_s > 0 and rate_bps > 0:
        carried = bottleneck_bytes * 8 / duration_s
        moved = (f"; the bottleneck carried {carried / 1e6:.0f} Mbit/s of its {rate_bps / 1e6:.0f} "
                 f"({100 * carried / rate_bps:.0f} %)")
    return (f"the guest's CPU was busy {100 * busy:.0f} % of the run{moved}: at this packet rate the emulated CPU "
            "(one instruction per ns), not only the network, limits the flows, which the kernel on real hardware "
            "would not be; lower the rate (at 100 Mbit/s the guest is about a quarter busy) or read the shares as "
            "a CPU-bound kernel's (docs/vm.md, \"How fast the guest can go\")")


def results_digest(trace: Trace) -> str:
    """A digest of everything the guest measured (samples and bottleneck), for the
    byte-identical repetition check."""
    import hashlib

    h = hashlib.sha256()
    h.update(trace.samples.to_csv(index=False).encode())
    if trace.bottleneck is not None:
        h.update(trace.bottleneck.to_csv(index=False).encode())
    return h.hexdigest()


