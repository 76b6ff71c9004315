"""A campaign survives any signal: SIGINT and SIGTERM stop it cleanly (exit 130 and
143), SIGKILL of the parent at any moment takes its pool workers with it (they used to
live on with parent 1), and in every case running the same command again ends with a
store whose data files are bit-for-bit those of an uninterrupted run (the simulator is
deterministic). This is the kill/signal matrix of docs/campaigns.md.

Each case is a real `fairlab run` process with 2 pool workers, signalled while it runs;
worker pids are read from /proc before the signal and checked after it."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from cli_helpers import FAIRLAB_CLI

CAMPAIGN = """
name = "sig"
duration = "40s"
window = ["10s", "40s"]
seed = 3
runs = 2

[bottleneck]
rate = "40Mbit"
buffer = "100%bdp"

[[flows]]
cca = "reno"
rtt = "50ms"

[[flows]]
cca = "cubic"
rtt = "50ms"
start = "5s"

[sweep]
"flows[*].rtt" = ["20ms", "50ms", "80ms", "120ms"]
"""
N_RUNS = 8
DATA_FILES = ("samples.parquet", "flows.parquet", "bottleneck.parquet")


def digests(root: Path) -> dict[str, tuple[str, ...]]:
    out = {}
    for d in sorted((root / "runs").iterdir()):
        out[d.name] = tuple(hashlib.sha256((d / f).read_bytes()).hexdigest() for f in DATA_FILES)
    return out


def summaries(root: Path) -> dict[str, object]:
    import json

    return {d.name: json.loads((d / "run.json").read_text())["meta"]["summary"] for d in (root / "runs").iterdir()}


@pytest.fixture(scope="module")
def spec(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("spec") / "sig.toml"
    p.write_text(CAMPAIGN)
    return p


@pytest.fixture(scope="module")
def uninterrupted(spec, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("clean") / "c"
    subprocess.run([*FAIRLAB_CLI, "run", str(spec), "--out", str(out), "--workers", "2"], check=True, capture_output=True, timeout=300)
    assert len(digests(out)) == N_RUNS
    return out


def children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                out += [int(x) for x in f.read().split()]
    except OSError:
        pass
    return out


def state(pid: int) -> bytes:
    """The process's state letter from /proc (R running, S sleeping, Z zombie)."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        return f.read().rsplit(b")", 1)[1].split()[0]


def alive(pid: int) -> bool:
    try:
        return state(pid) != b"Z"
    except OSError:
        return False


def finished_runs(out: Path) -> int:
    return len(list((out / "runs").glob("*/SHA256SUMS"))) if (out / "runs").exists() else 0


def start(spec: Path, out: Path) -> subprocess.Popen:
    return subprocess.Popen([*FAIRLAB_CLI, "run", str(spec), "--out", str(out), "--workers", "2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def wait_for(proc: subprocess.Popen, out: Path, runs: int) -> list[int]:
    """Wait until ``runs`` run directories exist and both workers are up; their pids."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        workers = children(proc.pid)
        if finished_runs(out) >= runs and len(workers) >= 2:
            return workers
        assert proc.poll() is None, "the campaign ended before the signal: make its runs longer"
        time.sleep(0.01)
    raise AssertionError("timed out")


def assert_workers_gone(workers: list[int]) -> None:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(alive(p) for p in workers):
        time.sleep(0.05)
    assert not [p for p in workers if alive(p)], "pool workers outlived their parent"


def resume_and_compare(spec: Path, out: Path, uninterrupted: Path) -> None:
    r = subprocess.run([*FAIRLAB_CLI, "run", str(spec), "--out", str(out), "--workers", "2"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert not list((out / "tmp").iterdir()) if (out / "tmp").exists() else True
    assert digests(out) == digests(uninterrupted)
    assert summaries(out) == summaries(uninterrupted)


@pytest.mark.parametrize("after_runs", [0, 1, 5])
def test_sigkill_of_the_parent_takes_the_workers_and_resume_is_bit_identical(spec, uninterrupted, tmp_path, after_runs):
    out = tmp_path / "c"
    proc = start(spec, out)
    workers = wait_for(proc, out, after_runs)
    os.kill(proc.pid, signal.SIGKILL)  # the parent only, as the OOM killer would
    proc.communicate()
    assert proc.returncode == -signal.SIGKILL
    assert_workers_gone(workers)
    assert finished_runs(out) < N_RUNS, "the kill should land mid-campaign"
    resume_and_compare(spec, out, uninterrupted)


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_sigterm_and_sigint_stop_cleanly_with_the_conventional_exit_code(spec, uninterrupted, tmp_path, sig, code):
    out = tmp_path / "c"
    proc = start(spec, out)
    workers = wait_for(proc, out, 1)
    if sig == signal.SIGINT:
        os.killpg(proc.pid, sig)  # Ctrl-C: the terminal signals the whole foreground group
    else:
        os.kill(proc.pid, sig)  # kill(1), systemd, a batch scheduler: the parent only
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == code, stderr
    text = " ".join((stdout + stderr).split())
    assert f"interrupted ({signal.Signals(sig).name})" in text and "run the same command again to resume" in text
    assert "Traceback" not in stderr
    assert_workers_gone(workers)
    assert finished_runs(out) < N_RUNS
    resume_and_compare(spec, out, uninterrupted)


def test_a_worker_killed_mid_run_fails_that_run_only_and_a_rerun_redoes_it(spec, uninterrupted, tmp_path):
    # The OOM killer picks a worker, not the parent: the campaign records that run as
    # failed with the worker's fate, carries on with a new worker, and exits 1.
    import json

    out = tmp_path / "c"
    proc = start(spec, out)
    victim = wait_for(proc, out, 1)[0]
    while state(victim) != b"R":  # computing a run, not waiting for its next one
        time.sleep(0.001)
    os.kill(victim, signal.SIGKILL)
    stdout, stderr = proc.communicate(timeout=300)
    assert "Traceback" not in stderr
    failed = [json.loads(p.read_text()) for p in (out / "failed").glob("*.json")] if (out / "failed").exists() else []
    if proc.returncode == 0:
        # It had sent its result in the microseconds between the check and the kill:
        # no run was lost, and the rest were done by its replacement.
        assert not failed and finished_runs(out) == N_RUNS
    else:
        assert proc.returncode == 1, stderr
        assert len(failed) == 1 and "killed by SIGKILL" in failed[0]["reason"], failed
        assert finished_runs(out) == N_RUNS - 1
    resume_and_compare(spec, out, uninterrupted)

