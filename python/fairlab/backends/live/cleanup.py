"""Remove what live runs left behind — by name prefix only.

Only things named ``fl-<hex>-<role>`` (`netns.OWNED_NAME_RE`) are ever touched:

1. processes: those whose network namespace IS one of those namespaces (matched by
   the namespace's inode, as `ip netns pids` does), and iperf3/linkem processes whose
   command line names a run directory or file ``fl-<hex>`` (a run's children carry its
   id there, so they are found even after their namespace lost its name). SIGTERM,
   a grace period, then SIGKILL.
2. the namespaces themselves (deleting one deletes every interface inside it);
3. interfaces with such a name in the ROOT namespace (a run never creates one, but
   an interrupted veth move could leave one).

4. pid files ``/run/fairlab-live/<run id>.pid`` whose process is gone;
5. temporary run directories ``$TMPDIR/fairlab-live-<run id>-*`` (and, from older
   versions, ``$TMPDIR/fairlab-live-*`` holding a ``<run id>/`` directory).

``run_id`` narrows all of them to one run. Without it, a run that is still in progress
(its pid file names a living process, checked by pid AND start time so a recycled pid
does not count) is left alone unless ``force`` is given, so `fairlab live cleanup`
cannot pull the rug from under a run another terminal is doing. Anything else — a
namespace called ``decoy``, ``fl-notes``, ``fl-xyz-s0`` (not hex) — is left alone.

A new live run calls `cleanup` (without ``force``) before it starts, so the leftovers
of runs killed with SIGKILL are removed and named in the new run's notes.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import tempfile
import time
from dataclasses import dataclass, field

from .netns import NETNS_DIR, OWNED_NAME_RE, list_namespaces, owner, remove_namespace

#: A run id inside a command line (a path component or file name starting with it).
_CMDLINE_RUN_RE = re.compile(r"(?:^|[/\s=])(fl-[0-9a-f]{4,8})(?:-|/|\s|$)")
#: Executables a run starts; a cmdline match is trusted only for these.
_OUR_TOOLS = ("iperf3", "linkem")


#: A running live run announces itself here (``<run id>.pid`` holding its pid).
ACTIVE_DIR = "/run/fairlab-live"


_RUN_ID_RE = re.compile(r"fl-[0-9a-f]{4,8}")
#: Temporary run directories: ``fairlab-live-<run id>-<random>``.
TEMP_PREFIX = "fairlab-live-"
_TEMP_RE = re.compile(r"^fairlab-live-(fl-[0-9a-f]{4,8})-")


def process_start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22):
    with the pid, it names one process even after the pid is reused."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return None


def mark_active(run_id: str) -> None:
    """Record that this process is running ``run_id``: ``<run id>.pid`` holds the pid
    alone (as every fairlab version reads it) and ``<run id>.start`` its start time."""
    os.makedirs(ACTIVE_DIR, exist_ok=True)
    pid = os.getpid()
    start = process_start_time(pid)
    if start is not None:
        with open(os.path.join(ACTIVE_DIR, f"{run_id}.start"), "w", encoding="ascii") as f:
            f.write(start)
    with open(os.path.join(ACTIVE_DIR, f"{run_id}.pid"), "w", encoding="ascii") as f:
        f.write(str(pid))


def unmark_active(run_id: str) -> None:
    for suffix in (".pid", ".start"):
        try:
            os.unlink(os.path.join(ACTIVE_DIR, run_id + suffix))
        except FileNotFoundError:
            pass


def _pid_files() -> dict[str, str]:
    """Run id -> pid file path."""
    try:
        names = os.listdir(ACTIVE_DIR)
    except FileNotFoundError:
        return {}
    out = {}
    for n in names:
        rid = n[: -len(".pid")] if n.endswith(".pid") else None
        if rid is not None and _RUN_ID_RE.fullmatch(rid):
            out[rid] = os.path.join(ACTIVE_DIR, n)
    return out


def _announcer_alive(path: str) -> bool:
    try:
        with open(path, encoding="ascii") as f:
            pid = int(f.read().strip())
    except (OSError, ValueError):
        return False
    if not _alive(pid):
        return False
    # With a recorded start time the process must match it: the pid may be reused.
    try:
        with open(path[: -len(".pid")] + ".start", encoding="ascii") as f:
            return process_start_time(pid) == f.read().strip()
    except OSError:
        return True


def active_runs() -> list[str]:
    """Run ids whose announcing process is still alive."""
    return sorted(rid for rid, path in _pid_files().items() if _announcer_alive(path))


def stale_pid_files(run_id: str | None = None) -> list[str]:
    """Pid files of runs whose process is gone."""
    return sorted(p for rid, p in _pid_files().items() if (run_id is None or rid == run_id) and not _announcer_alive(p))


def owned_temp_dirs(run_id: str | None = None) -> list[tuple[str, str]]:
    """(run id, path) of temporary run directories in the temp directory."""
    tmp = tempfile.gettempdir()
    try:
        names = os.listdir(tmp)
    except OSError:
        return []
    out = []
    for n in names:
        if not n.startswith(TEMP_PREFIX):
            continue
        path = os.path.join(tmp, n)
        m = _TEMP_RE.match(n)
        rids = [m.group(1)] if m else []
        if not m and os.path.isdir(path):  # older versions: fairlab-live-<random>/<run id>/
            try:
                rids = [c for c in os.listdir(path) if _RUN_ID_RE.fullmatch(c)]
            except OSError:
                rids = []
        for rid in rids[:1]:
            if run_id is None or rid == run_id:
                out.append((rid, path))
    return sorted(out)


@dataclass
class CleanupReport:
    """What was removed (or would be, with ``dry_run``)."""

    processes: list[tuple[int, str]] = field(default_factory=list)
    namespaces: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    pid_files: list[str] = field(default_factory=list)
    temp_dirs: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    skipped_active: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.processes or self.namespaces or self.links or self.pid_files or self.temp_dirs)

    def run_ids(self) -> list[str]:
        """The runs whose leftovers these are."""
        ids = {owner(n) for n in self.namespaces + self.links}
        ids |= {m for _, c in self.processes for m in _CMDLINE_RUN_RE.findall(c)}
        ids |= {os.path.basename(p)[: -len(".pid")] for p in self.pid_files}
        ids |= {m.group(1) for p in self.temp_dirs if (m := _TEMP_RE.match(os.path.basename(p)))}
        return sorted(i for i in ids if i)

    def summary(self) -> str:
        """'2 namespaces, 3 processes, 1 pid file, 1 temporary directory'."""
        parts = [(len(self.namespaces), "namespace"), (len(self.processes), "process"), (len(self.links), "link"),
                 (len(self.pid_files), "pid file"), (len(self.temp_dirs), "temporary directory")]
        plural = {"process": "processes", "temporary directory": "temporary directories"}
        return ", ".join(f"{n} {plural.get(w, w + 's') if n != 1 else w}" for n, w in parts if n)


def _mine(name: str, run_id: str | None) -> bool:
    o = owner(name)
    return o is not None and (run_id is None or o == run_id)


def owned_namespaces(run_id: str | None = None) -> list[str]:
    """Named namespaces belonging to live runs (to ``run_id`` if given)."""
    return [n for n in list_namespaces() if _mine(n, run_id)]


def owned_processes(run_id: str | None = None) -> list[tuple[int, str]]:
    """(pid, command line) of processes belonging to live runs."""
    ns_inodes: dict[tuple[int, int], str] = {}
    for n in owned_namespaces(run_id):
        try:
            st = os.stat(os.path.join(NETNS_DIR, n))
            ns_inodes[(st.st_dev, st.st_ino)] = n
        except OSError:
            continue
    me = os.getpid()
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        pid = int(entry)
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
        except OSError:
            continue
        if not argv:
            continue  # kernel thread or already gone
        cmd = " ".join(argv)
        hit = False
        try:
            st = os.stat(f"/proc/{pid}/ns/net")
            hit = (st.st_dev, st.st_ino) in ns_inodes
        except OSError:
            pass
        if not hit and os.path.basename(argv[0]) in _OUR_TOOLS:
            ids = _CMDLINE_RUN_RE.findall(cmd)
            hit = any(run_id is None or i == run_id for i in ids)
        if hit:
            out.append((pid, cmd))
    return out


def owned_root_links(run_id: str | None = None) -> list[str]:
    """Interfaces in the root namespace named like a live run's."""
    try:
        names = os.listdir("/sys/class/net")
    except OSError:
        return []
    return sorted(n for n in names if _mine(n, run_id))


def cleanup(run_id: str | None = None, *, dry_run: bool = False, grace: float = 2.0, force: bool = False) -> CleanupReport:
    """Remove live-run leftovers (of ``run_id`` only, if given). Safe to call any
    time; a run's own ``finally`` calls it with its id."""
    if run_id is not None and not re.fullmatch(r"fl-[0-9a-f]{4,8}", run_id):
        raise ValueError(f"{run_id!r} is not a live run id (fl- followed by 4 to 8 hex digits)")
    temp = owned_temp_dirs(run_id)
    rep = CleanupReport(processes=owned_processes(run_id), namespaces=owned_namespaces(run_id),
                        links=owned_root_links(run_id), temp_dirs=[p for _, p in temp])
    if run_id is None and not force:
        busy = set(active_runs())
        rep.pid_files = stale_pid_files()
        if busy:
            rep.skipped_active = sorted(busy)
            rep.processes = [(p, c) for p, c in rep.processes if not any(b in c for b in busy)
                             and not _in_namespaces(p, [n for n in rep.namespaces if owner(n) in busy])]
            rep.namespaces = [n for n in rep.namespaces if owner(n) not in busy]
            rep.links = [n for n in rep.links if owner(n) not in busy]
            rep.temp_dirs = [p for rid, p in temp if rid not in busy]
    else:
        rep.pid_files = sorted(p for rid, p in _pid_files().items() if run_id is None or rid == run_id)
    if dry_run:
        return rep
    for p in rep.pid_files:
        unmark_active(os.path.basename(p)[: -len(".pid")])
    _kill([pid for pid, _ in rep.processes], grace, rep)
    for n in rep.namespaces:
        try:
            remove_namespace(n)
        except OSError as exc:
            rep.errors.append(f"namespace {n}: {exc}")
    if rep.links:
        from pyroute2 import IPRoute

        with IPRoute() as ip:
            for name in rep.links:
                try:
                    idx = ip.link_lookup(ifname=name)
                    if idx:
                        ip.link("del", index=idx[0])
                except Exception as exc:  # noqa: BLE001 - a vanished link is fine, anything else is reported
                    if "No such device" not in str(exc):
                        rep.errors.append(f"link {name}: {exc}")
    for p in rep.temp_dirs:
        shutil.rmtree(p, ignore_errors=True)
        if os.path.exists(p):
            rep.errors.append(f"temporary directory {p} could not be removed")
    return rep


def _in_namespaces(pid: int, names: list[str]) -> bool:
    try:
        st = os.stat(f"/proc/{pid}/ns/net")
    except OSError:
        return False
    for n in names:
        try:
            ns = os.stat(os.path.join(NETNS_DIR, n))
        except OSError:
            continue
        if (ns.st_dev, ns.st_ino) == (st.st_dev, st.st_ino):
            return True
    return False


def _kill(pids: list[int], grace: float, rep: CleanupReport) -> None:
    for pid in pids:
        _send(pid, signal.SIGTERM, rep)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.02)
    for pid in pids:
        if _alive(pid):
            _send(pid, signal.SIGKILL, rep)
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.02)


def _send(pid: int, sig: int, rep: CleanupReport) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass
    except PermissionError as exc:
        rep.errors.append(f"pid {pid}: {exc}")


def _alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie (a zombie holds no namespace)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
        return state != b"Z"
    except (OSError, IndexError):
        return False


__all__ = ["CleanupReport", "cleanup", "owned_namespaces", "owned_processes", "owned_root_links", "owned_temp_dirs",
           "stale_pid_files", "OWNED_NAME_RE"]
