"""What this machine can do for a live run: probed, never assumed.

- root (creating namespaces needs CAP_SYS_ADMIN + CAP_NET_ADMIN),
- iperf3 and its version, `ip`, `tc`, `ethtool`, and pyroute2,
- the kernel's TCP congestion controls (/proc/sys/net/ipv4/tcp_available_congestion_control),
- the kernel's queue disciplines: tried one by one with `tc qdisc add` on a veth in a
  throwaway namespace (``fl-<hex>-probe``, removed at once), because a kernel built
  without e.g. netem says so only when asked to use it,
- the linkem binary and its version.

`fairlab live doctor` prints this; the runner chooses the emulation path from it.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from dataclasses import asdict, dataclass, field
from typing import Any

from ...interrupts import raising_on_signals, signals_ignored
from . import iperf, linkem_link
from .cleanup import mark_active, unmark_active
from .netns import new_run_id, remove_namespace

CCA_FILE = "/proc/sys/net/ipv4/tcp_available_congestion_control"

#: Queue disciplines the kernel path may need, with the `tc` arguments that try one.
QDISC_PROBES: dict[str, list[str]] = {
    "netem": ["netem", "delay", "1ms"],
    "tbf": ["tbf", "rate", "1mbit", "burst", "10kb", "limit", "100kb"],
    "htb": ["htb", "default", "1"],
    "pfifo": ["pfifo", "limit", "100"],
    "bfifo": ["bfifo", "limit", "100000"],
    "red": ["red", "limit", "400000", "min", "30000", "max", "90000", "avpkt", "1000", "burst", "55", "bandwidth", "10mbit", "probability", "0.1"],
    "choke": ["choke", "limit", "1000", "min", "100", "max", "300", "avpkt", "1000", "burst", "166", "bandwidth", "10mbit", "probability", "0.1"],
    "codel": ["codel"],
    "fq_codel": ["fq_codel"],
    "pie": ["pie"],
    "sfq": ["sfq"],
}


@dataclass
class Capabilities:
    """The probe's findings; `problems()` lists what stops a live run."""

    root: bool
    kernel: str
    iperf3: str | None
    iperf3_version: str | None
    tools: dict[str, str | None]
    pyroute2: str | None
    ccas: list[str]
    qdiscs: dict[str, bool] = field(default_factory=dict)
    qdisc_probe_error: str | None = None
    linkem: str | None = None
    linkem_version: str | None = None
    linkem_how: str = ""

    def has_qdisc(self, name: str) -> bool:
        return bool(self.qdiscs.get(name))

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def probe(*, qdiscs: bool = True) -> Capabilities:
    """Probe the machine. The qdisc probe needs root; without it the table is empty
    and ``qdisc_probe_error`` says why."""
    root = os.geteuid() == 0
    binary = iperf.find_iperf3()
    try:
        import pyroute2

        pr2: str | None = getattr(pyroute2, "__version__", "unknown")
    except ImportError:
        pr2 = None
    caps = Capabilities(
        root=root,
        kernel=platform.release(),
        iperf3=binary,
        iperf3_version=iperf.iperf3_version(binary) if binary else None,
        tools={t: shutil.which(t) for t in ("ip", "tc", "ss", "ethtool", "sysctl")},
        pyroute2=pr2,
        ccas=kernel_ccas(),
    )
    found = linkem_link.find_linkem()
    caps.linkem, caps.linkem_how = found
    if caps.linkem:
        caps.linkem_version = linkem_link.linkem_version(caps.linkem)
    if qdiscs:
        if not root:
            caps.qdisc_probe_error = "not root, so no probe namespace could be made"
        elif caps.tools["ip"] is None or caps.tools["tc"] is None:
            caps.qdisc_probe_error = "`ip` or `tc` (iproute2) is missing"
        else:
            caps.qdiscs, caps.qdisc_probe_error = probe_qdiscs()
    return caps


def kernel_ccas() -> list[str]:
    """The kernel's available TCP congestion controls."""
    try:
        with open(CCA_FILE, encoding="ascii") as f:
            return f.read().split()
    except OSError:
        return []


def probe_qdiscs() -> tuple[dict[str, bool], str | None]:
    """Try each of `QDISC_PROBES` as the root qdisc of a veth in a throwaway
    namespace; return which worked (and an error if the probe itself failed).

    SIGINT and SIGTERM raise while the probe runs (SIGTERM's default used to kill the
    process before the ``finally`` and leak the namespace), and the probe announces
    itself like a run (a pid file), so a concurrent run's leftover sweep leaves its
    namespace alone."""
    with raising_on_signals():
        rid = new_run_id()
        mark_active(rid)
        try:
            return _probe_in(rid)
        finally:
            unmark_active(rid)


def _probe_in(rid: str) -> tuple[dict[str, bool], str | None]:
    ns, a, b = f"{rid}-probe", f"{rid}-p0", f"{rid}-p1"
    found: dict[str, bool] = {}
    try:
        subprocess.run(["ip", "netns", "add", ns], check=True, capture_output=True, timeout=10)
        subprocess.run(["ip", "netns", "exec", ns, "ip", "link", "add", a, "type", "veth", "peer", "name", b],
                       check=True, capture_output=True, timeout=10)
        for name, args in QDISC_PROBES.items():
            cp = subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "replace", "dev", a, "root", *args],
                                capture_output=True, timeout=10, check=False)
            found[name] = cp.returncode == 0
        return found, None
    except (OSError, subprocess.SubprocessError) as exc:
        return found, f"the probe namespace failed: {exc}"
    finally:
        with signals_ignored():  # a second Ctrl-C must not cut the removal short
            remove_namespace(ns)


def render(caps: Capabilities) -> list[tuple[str, str, str]]:
    """(item, finding, meaning) rows for `fairlab live doctor`."""
    ok, bad = "ok", "MISSING"
    rows = [
        ("root", ok if caps.root else bad, "needed to create network namespaces"),
        ("kernel", caps.kernel, ""),
        ("iperf3", f"{caps.iperf3} ({caps.iperf3_version})" if caps.iperf3 else bad, "traffic generator; apt-get install iperf3"),
        ("pyroute2", caps.pyroute2 or bad, "netlink; pip install pyroute2"),
    ]
    for t, p in caps.tools.items():
        rows.append((t, p or bad, "iproute2/ethtool/procps"))
    rows.append(("TCP congestion controls", " ".join(caps.ccas) or "(none found)", CCA_FILE))
    if caps.qdiscs:
        have = [q for q, v in caps.qdiscs.items() if v]
        lack = [q for q, v in caps.qdiscs.items() if not v]
        rows.append(("kernel qdiscs", " ".join(have) or "(none)", "missing: " + (" ".join(lack) or "none")))
    else:
        rows.append(("kernel qdiscs", "not probed", caps.qdisc_probe_error or ""))
    rows.append(("linkem", f"{caps.linkem} ({caps.linkem_version or 'version unknown'})" if caps.linkem else bad, caps.linkem_how))
    kernel_path = caps.has_qdisc("netem") and (caps.has_qdisc("tbf") or caps.has_qdisc("htb"))
    rows.append(("emulation path", "kernel (netem + tbf/htb)" if kernel_path else ("linkem" if caps.linkem else "NONE"),
                 "chosen per scenario: kernel when every needed qdisc exists, else linkem"))
    return rows
