"""iperf3 servers and clients as argument lists (never shell strings).

One server per flow, each on its own port in the receiver namespace, run with
``-1`` (serve one test, then exit) and ``-J``. One client per flow in its sender
namespace::

    iperf3 -c RECEIVER -p PORT -C CCA -J -i INTERVAL -t SECONDS [--bytes N] [-w W]
           --connect-timeout MS --logfile RUN_DIR/flow-K.json

``--logfile`` puts the JSON document in the run directory AND puts the run id in
the process's command line (the run directory's name carries it), so `pgrep -f
fl-3f9a` and `fairlab live cleanup` find every iperf3 a run started.
"""

from __future__ import annotations

import math
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

#: First server port; flow k listens on BASE_PORT + k.
BASE_PORT = 5201
#: iperf3 takes -t in whole seconds (3.12 parses it with atoi).
MIN_SECONDS = 1
#: iperf3 accepts -i between 0.1 and 60 s (or 0 to disable).
MIN_INTERVAL_S, MAX_INTERVAL_S = 0.1, 60.0


def find_iperf3() -> str | None:
    """Path of the iperf3 binary, or None."""
    return shutil.which("iperf3")


def iperf3_version(binary: str) -> str | None:
    """``"3.12"`` from ``iperf 3.12 (cJSON 1.7.15)``, or None when it will not say."""
    try:
        cp = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return parse_version(cp.stdout + cp.stderr)


def parse_version(text: str) -> str | None:
    m = re.search(r"iperf\s+(\d+\.\d+(?:\.\d+)?)", text)
    return m.group(1) if m else None


@dataclass(frozen=True)
class ClientSpec:
    """What one client is asked to do."""

    server_ip: str
    port: int
    cca: str
    interval_s: float
    seconds: int
    nbytes: int | None = None
    window: int | None = None
    connect_timeout_ms: int = 5000


def seconds_for(start_ns: int, stop_ns: int) -> int:
    """iperf3's ``-t`` for a flow active from ``start_ns`` to ``stop_ns``: whole
    seconds (iperf3 3.12 parses -t as an integer), rounded to nearest, at least 1."""
    return max(MIN_SECONDS, int(math.floor((stop_ns - start_ns) / 1e9 + 0.5)))


def server_args(binary: str, port: int, logfile: Path) -> list[str]:
    """``iperf3 -s -p PORT -1 -J --logfile FILE``."""
    return [binary, "-s", "-p", str(port), "-1", "-J", "--logfile", str(logfile)]


def client_args(binary: str, spec: ClientSpec, logfile: Path) -> list[str]:
    """The client's argument list (see the module doc)."""
    if not MIN_INTERVAL_S <= spec.interval_s <= MAX_INTERVAL_S:
        raise ValueError(f"iperf3 reports every {MIN_INTERVAL_S:g} to {MAX_INTERVAL_S:g} s; the scenario asks {spec.interval_s:g} s")
    argv = [
        binary, "-c", spec.server_ip, "-p", str(spec.port), "-C", spec.cca, "-J",
        "-i", f"{spec.interval_s:g}", "-t", str(spec.seconds),
    ]
    if spec.nbytes is not None:
        argv += ["--bytes", str(spec.nbytes)]
    if spec.window is not None:
        argv += ["-w", str(spec.window)]
    argv += ["--connect-timeout", str(spec.connect_timeout_ms), "--logfile", str(logfile)]
    return argv


def listening_ports(ss_output: str) -> set[int]:
    """TCP ports in LISTEN state from ``ss -Htln`` output."""
    ports: set[int] = set()
    for line in ss_output.splitlines():
        parts = line.split()
        if len(parts) >= 4:
            local = parts[3]
            port = local.rsplit(":", 1)[-1]
            if port.isdigit():
                ports.add(int(port))
    return ports
