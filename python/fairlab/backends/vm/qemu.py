"""Boot the guest under QEMU in virtual time and bring its results out.

Read this first:

- ``-accel tcg -icount shift=0,sleep=off``: the guest's clocks advance with the
  instructions it executes (one ns per instruction), never with host time, and an
  idle guest skips straight to its next timer. A busy or slow host makes a run take
  longer, never changes it. No KVM is needed (nested KVM does not work on many CI
  machines); no root is needed.
- ``rr=record,rrfile=/dev/null``: QEMU's record mode, its log thrown away, for the
  lock it brings. Plain icount has a race: when the guest halts, QEMU's main loop
  may move the clock to the next timer before the vCPU thread has counted the
  instructions it ran just before ``HLT``, so that timer fires a few ns late, and
  how often depends on host scheduling (QEMU 7.2 ``icount_start_warp_timer``,
  called from ``main_loop_wait``). Under host load about one repetition in three
  then differed from the others (docs/vm.md); record mode keeps the main loop out
  until the instructions are counted, and every repetition is identical, at the
  same host CPU cost.
- ``-M microvm -cpu qemu64,+arat``: the minimal machine, booted straight into the
  uncompressed kernel. ``+arat`` (an always-running local APIC timer) is what lets
  the guest use high-resolution timers there; without it timers fire on 4-ms ticks
  and paced senders collapse. The guest checks ``hres_active`` on every boot.
- ``-rtc base=2020-01-01,clock=vm``: the guest's wall clock starts at a fixed date
  and follows virtual time, so nothing of the host's clock enters the guest (it
  seeds the kernel's randomness).
- ``-nic none``: the guest has no network device to the host. The only channel is
  the serial console, written once, after the flows end.
- The QEMU process is ours alone: its own session (process group), killed on every
  exit path, and ``PR_SET_PDEATHSIG`` so it dies with us even after a kill -9.
"""

from __future__ import annotations

import base64
import ctypes
import hashlib
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .errors import VmError

#: The icount setting (part of every run's metadata).
ICOUNT = "shift=0,sleep=off,rr=record,rrfile=/dev/null"
CPU = "qemu64,+arat"
MACHINE = "microvm"
RTC = "base=2020-01-01,clock=vm"
#: Guest memory; every flow's socket buffers and netem queues live in it.
MEMORY_MB = 1024
BEGIN = "@@FAIRLAB-RESULT-BEGIN"
END = "@@FAIRLAB-RESULT-END"
_PR_SET_PDEATHSIG = 1


class QemuError(VmError):
    """QEMU is missing, failed, or the guest brought no results out."""


@dataclass
class Boot:
    """One finished boot: the result archive and what it cost."""

    archive: bytes
    console_tail: list[str]
    wall_s: float
    host_cpu_s: float
    returncode: int
    extra: dict[str, float] = field(default_factory=dict)


def find_qemu() -> str | None:
    return shutil.which("qemu-system-x86_64")


def qemu_version(binary: str) -> str | None:
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=20, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"version\s+(\S+)", out)
    return m.group(1) if m else None


def command(binary: str, kernel: Path, initrd: Path, append: str, *, memory_mb: int = MEMORY_MB) -> list[str]:
    """The QEMU argument list (see the module doc for why each part is there)."""
    return [
        binary, "-M", MACHINE, "-accel", "tcg", "-icount", ICOUNT, "-cpu", CPU, "-smp", "1", "-m", str(memory_mb),
        "-nodefaults", "-no-user-config", "-nic", "none", "-display", "none", "-serial", "stdio",
        "-rtc", RTC, "-no-reboot", "-kernel", str(kernel), "-initrd", str(initrd), "-append", append,
    ]


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL when the parent dies (also after kill -9)."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except OSError:
        pass


def boot(argv: list[str], *, timeout_s: float, on_line: Callable[[str], None] | None = None) -> Boot:
    """Run QEMU to the guest's power-off; return the result archive it printed.
    Raises `QemuError` when QEMU fails or times out or no archive came out. The
    process is killed on every way out of this function (exceptions and signals
    included)."""
    t0 = time.monotonic()
    c0 = os.times()
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True, preexec_fn=_die_with_parent)
    except FileNotFoundError:
        raise QemuError(f"{argv[0]} is not installed; install it: apt-get install qemu-system-x86") from None
    tail: list[str] = []
    chunks: list[str] = []
    inside = False
    digest = None
    try:
        assert proc.stdout is not None
        deadline = t0 + timeout_s
        import selectors

        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        buf = b""
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise QemuError(f"the guest did not finish within {timeout_s:.0f} s of host time (the run was stopped); "
                                "the machine may be overloaded, or the scenario far longer than its duration says")
            if not sel.select(timeout=min(left, 1.0)):
                continue
            data = os.read(proc.stdout.fileno(), 1 << 16)
            if not data:
                break
            buf += data
            *lines, buf = buf.split(b"\n")
            for raw in lines:
                line = raw.decode("utf-8", "replace").rstrip("\r")
                if inside:
                    if line.startswith(END):
                        inside = False
                        digest = line[len(END):].strip()
                    else:
                        chunks.append(line.strip())
                    continue
                if line.startswith(BEGIN):
                    inside = True
                    continue
                tail = (tail + [line])[-40:]
                if on_line is not None:
                    on_line(line)
        rc = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
    c1 = os.times()
    stderr = proc.stderr.read().decode("utf-8", "replace") if proc.stderr else ""
    if proc.stderr:
        proc.stderr.close()
    if proc.stdout:
        proc.stdout.close()
    wall = time.monotonic() - t0
    cpu = (c1.children_user + c1.children_system) - (c0.children_user + c0.children_system)
    if digest is None:
        why = stderr.strip().splitlines()[-1] if stderr.strip() else (tail[-1] if tail else "no console output")
        raise QemuError(f"the guest brought no results out (QEMU exit code {rc}): {why}")
    try:
        archive = base64.b64decode("".join(chunks), validate=True)
    except ValueError:
        raise QemuError("the guest's result archive was garbled on the console (base64 did not decode)") from None
    if hashlib.sha256(archive).hexdigest() != digest:
        raise QemuError("the guest's result archive was garbled on the console (its sha256 does not match)")
    return Boot(archive=archive, console_tail=tail, wall_s=wall, host_cpu_s=cpu, returncode=rc)
