"""The userspace emulation path: `linkem` bridges the router namespace's ports.

linkem (crates/linkem) is an L2 bridge over AF_PACKET between the per-sender ports
and the receiver port. It adds each sender port's one-way delay in both directions
(so a flow's base RTT is twice it; we give it rtt/2 — the scenario splits the RTT
equally both ways), serialises the forward direction at the bottleneck rate through
the same `aqm` queue discipline the simulator uses, prints ``ready`` once bound,
and writes one JSON line per sample interval (cumulative drops and marks). It exits
0 on SIGTERM after a final line. Its contract is fixed; see docs/live.md.

Where the binary is, in this order: ``$FAIRLAB_LINKEM``; the copy an installed
wheel carries (``fairlab/_bin/linkem``, see buildsys/fairlab_build.py); ``linkem``
under ``$CARGO_TARGET_DIR/release``; ``target/release/linkem`` under the workspace's
target directory as `cargo metadata` reports it; the repository's
``target/release/linkem``; ``linkem`` on PATH.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .errors import LiveError
from .netns import Dumbbell
from .procs import Child, Children

#: The repository root (python/fairlab/backends/live/ → four levels up).
REPO_ROOT = Path(__file__).resolve().parents[4]
#: Seconds to wait for linkem's ``ready``.
READY_TIMEOUT_S = 10.0


def find_linkem(*, search_path: bool = True) -> tuple[str | None, str]:
    """(path or None, how it was found / where we looked). ``search_path=False``
    leaves PATH out (the `linkem` command fairlab installs must not find itself)."""
    env = os.environ.get("FAIRLAB_LINKEM")
    if env:
        if os.access(env, os.X_OK):
            return env, "from $FAIRLAB_LINKEM"
        return None, f"$FAIRLAB_LINKEM={env} is not an executable file"
    looked: list[str] = []
    candidates: list[tuple[Path, str]] = []
    shipped = packaged_linkem()
    if shipped is not None:
        candidates.append((shipped, "installed with fairlab"))
    if os.environ.get("CARGO_TARGET_DIR"):
        candidates.append((Path(os.environ["CARGO_TARGET_DIR"]) / "release" / "linkem", "under $CARGO_TARGET_DIR"))
    tdir = _cargo_target_dir()
    if tdir is not None:
        candidates.append((tdir / "release" / "linkem", "under cargo metadata's target_directory"))
    candidates.append((REPO_ROOT / "target" / "release" / "linkem", "in the repository's target/release"))
    for path, how in candidates:
        looked.append(str(path))
        if path.is_file() and os.access(path, os.X_OK):
            return str(path), how
    onpath = shutil.which("linkem") if search_path else None
    if onpath:
        return onpath, "on PATH"
    return None, ("not found (looked in " + ", ".join(dict.fromkeys(looked)) + (" and PATH" if search_path else "")
                  + "; a fairlab wheel carries it, in a source checkout build it with "
                  "`cargo build --release -p linkem`, or set FAIRLAB_LINKEM)")


def packaged_linkem() -> Path | None:
    """The linkem binary a fairlab wheel installs next to the package (None in a
    source checkout, where cargo's target directory has it)."""
    try:
        res = resources.files("fairlab") / "_bin" / "linkem"
    except (ModuleNotFoundError, TypeError):
        return None
    return Path(str(res)) if res.is_file() else None


def _cargo_target_dir() -> Path | None:
    if shutil.which("cargo") is None or not (REPO_ROOT / "Cargo.toml").exists():
        return None
    try:
        cp = subprocess.run(["cargo", "metadata", "--format-version", "1", "--no-deps", "--offline"],
                            cwd=REPO_ROOT, capture_output=True, text=True, timeout=30, check=False)
        if cp.returncode == 0:
            return Path(json.loads(cp.stdout)["target_directory"])
    except (OSError, subprocess.TimeoutExpired, ValueError, KeyError):
        pass
    return None


def linkem_version(binary: str) -> str | None:
    """What ``linkem --version`` prints; when it has no such flag, the binary's
    content hash (``sha256:…``, 12 hex digits), which identifies the build."""
    try:
        cp = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10, check=False)
        out = (cp.stdout or cp.stderr).strip().splitlines()
        if cp.returncode == 0 and out:
            return out[0]
        return "sha256:" + hashlib.sha256(Path(binary).read_bytes()).hexdigest()[:12]
    except (OSError, subprocess.TimeoutExpired):
        return None


def known_qdiscs() -> list[str]:
    """Queue disciplines linkem can run: the `aqm` crate's name table, read through
    the compiled core (linkem links the same crate)."""
    from ..sim import qdisc_table

    return [name for name, _, _ in qdisc_table()]


def config(resolved: dict[str, Any], topo: Dumbbell, *, seed: int) -> dict[str, Any]:
    """linkem's ``--config`` document for a resolved scenario on this topology."""
    flows = resolved["flows"]
    bn = resolved["bottleneck"]
    mean_pkt = int(round(float(np.mean([f["mss"] + 52 for f in flows]))))
    return {
        "run_id": topo.run_id,
        "sender_ports": [
            {"iface": port, "one_way_delay_ns": int(f["rtt_ns"]) // 2}
            for port, f in zip(topo.router_sender_ports, flows)
        ],
        "receiver_port": {"iface": topo.router_receiver_port},
        "rate_bps": int(bn["rate_bps"]),
        "reverse_rate_bps": None,
        "buffer": dict(bn["buffer"]),
        "qdisc": bn["qdisc"],
        "params": dict(bn["params"]),
        "seed": int(seed) % (2**64),
        "sample_interval_ns": int(resolved["interval_ns"]),
        "mean_packet_bytes": mean_pkt,
        "reference_rtt_ns": int(bn["reference_rtt_ns"]),
    }


def start(children: Children, binary: str, topo: Dumbbell, cfg: dict[str, Any], run_dir: Path, *,
          nice: int | None = None) -> tuple[Child, float]:
    """Write the config, start linkem in the router namespace and wait for
    ``ready``. Returns the child and the wall-clock time (Unix s) it became ready.
    Its stdout goes to a file (a pipe nobody drains could block it mid-run)."""
    cfg_path = run_dir / "linkem-config.json"
    stats_path = run_dir / "linkem-stats.jsonl"
    cfg_path.write_text(json.dumps(cfg, indent=1))
    argv = [binary, "--config", str(cfg_path), "--stats", str(stats_path)]
    child = children.start("linkem", topo.router_ns, argv, stdout=run_dir / "linkem.stdout",
                           stderr=run_dir / "linkem.stderr", nice=nice)
    return child, _wait_ready(child)


def _wait_ready(child: Child) -> float:
    assert child.stdout_path is not None
    deadline = time.monotonic() + READY_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            text = child.stdout_path.read_text(errors="replace")
        except FileNotFoundError:
            text = ""
        if any(line.strip() == "ready" for line in text.splitlines()):
            return time.time()
        if child.popen.poll() is not None:
            break
        time.sleep(0.01)
    child.popen.poll()
    tail = child.stderr_tail()
    rc = child.popen.returncode
    if rc == 2:
        # linkem's one-line refusal of its config: an unknown qdisc or parameter, a bad field.
        raise LiveError(f"linkem refused the run's configuration (exit code 2), e.g. a qdisc or qdisc parameter it "
                        f"does not know: {tail or 'no message'}")
    if rc is not None:
        raise LiveError(f"linkem exited with code {rc} before it was ready: {tail or 'no message'}")
    raise LiveError(f"linkem did not print `ready` within {READY_TIMEOUT_S:g} s{': ' + tail if tail else ''}")


def _stats_lines(path: Path) -> list[dict[str, Any]]:
    """Every JSON line of linkem's stats file. A cut-off last line (linkem killed
    mid-write) is dropped; any other line that is not a JSON object is an error."""
    rows: list[dict[str, Any]] = []
    if not path.exists():
        return rows
    lines = path.read_text(errors="replace").splitlines()
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            if i == len(lines) - 1:
                break
            raise LiveError(f"{path}: line {i + 1} is not JSON, so linkem's stats cannot be read") from None
        if not isinstance(row, dict):
            raise LiveError(f"{path}: line {i + 1} is not a JSON object, so linkem's stats cannot be read")
        rows.append(row)
    return rows


def read_stats(path: Path) -> pd.DataFrame:
    """linkem's bottleneck samples as a frame (cumulative counters as written),
    without the shutdown's health line."""
    return pd.DataFrame([r for r in _stats_lines(path) if "health" not in r])


def read_health(path: Path) -> dict[str, Any] | None:
    """The health line linkem writes when it stops (docs/linkem.md, "Stats"): how
    late its loop handled due packets, frames the kernel dropped before it read
    them, send errors. None if linkem did not stop cleanly (or is older)."""
    found = [r["health"] for r in _stats_lines(path) if isinstance(r.get("health"), dict)]
    return found[-1] if found else None


#: Packets handled more than 1 ms late that still count as a healthy run: the first
#: one after start-up may be late while the receive rings warm up (the linkem netns
#: test's healthy runs show at most that one), so one is forgiven.
LATE_PACKETS_FORGIVEN = 1


def health_warnings(health: dict[str, Any] | None) -> list[str]:
    """What a user must be told about a run whose link did not behave as the
    scenario says: each a sentence naming the counter and what it means for the
    numbers."""
    if health is None:
        return ["linkem wrote no health line when it stopped, so whether it kept the link's timing is unknown"]

    def count(key: str) -> int:
        v = health.get(key)
        return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0

    warn = []
    late, worst = count("late_over_1ms"), count("max_late_ns") / 1e6
    stalled_rx = count("rx_wait_over_1ms")
    if late > LATE_PACKETS_FORGIVEN or stalled_rx > LATE_PACKETS_FORGIVEN:
        warn.append(f"linkem handled {late} packet(s) more than 1 ms after they were due (at worst {worst:.1f} ms) "
                    f"and {stalled_rx} frame(s) waited more than 1 ms before it read them: this host could not keep the "
                    f"link's timing, so this run's RTTs, queue and shares are suspect; run it again on an idle machine")
    if count("kernel_drops"):
        warn.append(f"the kernel dropped {count('kernel_drops')} frame(s) before linkem read them (a receive ring was "
                    "full): losses the scenario does not have")
    if count("tx_errors"):
        first = health.get("first_tx_error")
        warn.append(f"linkem could not send {count('tx_errors')} frame(s)"
                    + (f" (first error: {first})" if first else "") + ": losses the scenario does not have")
    if count("truncated"):
        warn.append(f"linkem discarded {count('truncated')} frame(s) larger than its receive buffer")
    return warn


def bottleneck_samples(stats: pd.DataFrame, *, zero_offset_s: float, run: int, interval_s: float,
                       end_s: float) -> pd.DataFrame | None:
    """Trace bottleneck rows from linkem stats: queue bytes/packets at each sample,
    drops and marks DURING the interval (differences of linkem's cumulative counts).
    ``zero_offset_s`` is linkem's t_ns = 0 on the trace's clock."""
    if stats.empty or "t_ns" not in stats.columns:
        return None
    s = stats.sort_values("t_ns").reset_index(drop=True)
    t = s["t_ns"].to_numpy(dtype=float) / 1e9 + zero_offset_s
    drops = s["drops"].to_numpy(dtype=np.int64) if "drops" in s else np.zeros(len(s), np.int64)
    marks = s["marks"].to_numpy(dtype=np.int64) if "marks" in s else np.zeros(len(s), np.int64)
    out = pd.DataFrame({
        "run": run,
        "t": t,
        "queue_bytes": s["queue_bytes"].astype(float) if "queue_bytes" in s else np.nan,
        "queue_pkts": s["queue_pkts"].astype(float) if "queue_pkts" in s else np.nan,
        "drops": np.diff(drops, prepend=0),
        "marks": np.diff(marks, prepend=0),
    })
    for col in ("forwarded_pkts", "forwarded_bytes"):
        if col in s:
            out[col] = np.diff(s[col].to_numpy(dtype=np.int64), prepend=0)
    if "drops_by_reason" in s:
        reasons = pd.DataFrame(list(s["drops_by_reason"].apply(lambda d: d if isinstance(d, dict) else {})))
        for col in reasons.columns:
            out[f"drops_{col}"] = np.diff(reasons[col].fillna(0).to_numpy(dtype=np.int64), prepend=0)
    keep = (out["t"] > 1e-9) & (out["t"] <= end_s + 0.5 * interval_s)
    out = out[keep].reset_index(drop=True)
    return out if not out.empty else None
