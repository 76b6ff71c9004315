"""Engine benchmark, side by side with a previous build (issue 15 item 2). Not a test.

Runs the simulator's `bench` example (crates/netsim/examples/bench.rs) with the
defaults a user's scenario gets (host jitter "auto", start jitter 10 ms, access links
at 10x) on S1 (2 flows, 100 Mbit/s), S64 (64 flows, 100 Mbit/s), S3 (1,000 flows,
1 Gbit/s) and S2 (3 flows, 10 Gbit/s), and reports per build and scenario:

- bottleneck packets per wall-second and per CPU-second (the child's user + system
  time from wait4), median and range over the runs;
- engine events per bottleneck packet;
- instructions per bottleneck packet: `perf stat -e instructions:u` where the machine
  has a PMU, else valgrind's instruction count (cachegrind without cache simulation),
  else skipped with the reason printed. Measured as the difference between two
  durations of the same scenario, so set-up and slow start cancel out;
- peak RSS (VmHWM, as the benchmark process reports it).

The previous build is `--base REF` (default: main before the second round of engine work),
exported with `git archive` into the target directory and built there with the
current bench example, so both builds run the same scenarios. Runs alternate between
the builds (and the order flips every round), because a shared machine's speed drifts
over minutes. `--htsim BIN` adds a third column: a csg-htsim dumbbell built separately
(bench/htsim_dumbbell.cpp says how; htsim is never vendored).

    .venv/bin/python bench/bench_engine.py [--base REF] [--repeat 5] [--only s1,s3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BENCH_EXAMPLE = REPO / "crates" / "netsim" / "examples" / "bench.rs"
# main before the second round of engine work (branch engine2; the first round, 3301f85..01dbd8f, is in it).
DEFAULT_BASE = "a8399f4"


@dataclass(frozen=True)
class Scenario:
    key: str  # the bench example's scenario argument
    label: str
    secs: int  # simulated seconds per timed run
    ir_secs: tuple[int, int]  # the two durations of the instruction-count difference
    htsim: tuple[int, int, int, float]  # flows, Mbit/s, RTT ms, buffer in BDPs


SCENARIOS = [
    Scenario("s1", "S1: 2 flows, 100 Mbit/s, 100 ms, 1 BDP", 300, (20, 40), (2, 100, 100, 1.0)),
    Scenario("s64", "S64: 64 flows, 100 Mbit/s, 100 ms, 1 BDP", 120, (20, 40), (64, 100, 100, 1.0)),
    Scenario("s3", "S3: 1,000 flows, 1 Gbit/s, 100 ms, 1 BDP", 60, (3, 6), (1000, 1000, 100, 1.0)),
    Scenario("s2", "S2: 3 flows, 10 Gbit/s, 120 ms, 0.2 BDP", 30, (2, 4), (3, 10000, 120, 0.2)),
]


@dataclass
class Runs:
    wall_pps: list[float] = field(default_factory=list)
    cpu_pps: list[float] = field(default_factory=list)
    events_per_pkt: float = 0.0
    rss_mib: float = 0.0
    instr_per_pkt: float | None = None


def target_dir() -> Path:
    return Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))


def cargo_build(src: Path, target: Path) -> Path:
    env = dict(os.environ, CARGO_TARGET_DIR=str(target))
    subprocess.run(["cargo", "build", "--quiet", "--profile", "profiling", "-p", "netsim", "--example", "bench"], cwd=src, env=env, check=True)
    return target / "profiling" / "examples" / "bench"


def build_base(ref: str) -> Path | None:
    """The bench binary of `ref`, or None (with the reason printed)."""
    if shutil.which("git") is None:
        print(f"previous build skipped: git is not installed, so {ref} cannot be exported")
        return None
    rev = subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], cwd=REPO, capture_output=True, text=True)
    if rev.returncode != 0:
        print(f"previous build skipped: {ref} is not a commit of this checkout (pass --base REF)")
        return None
    commit = rev.stdout.strip()
    root = target_dir() / "bench-base"
    src = root / "src"
    stamp = root / "commit"
    if not (stamp.is_file() and stamp.read_text() == commit):
        shutil.rmtree(src, ignore_errors=True)
        src.mkdir(parents=True)
        with tempfile.TemporaryFile() as tar:
            subprocess.run(["git", "archive", "--format=tar", commit], cwd=REPO, stdout=tar, check=True)
            tar.seek(0)
            with tarfile.open(fileobj=tar) as t:
                t.extractall(src, filter="data")
        stamp.write_text(commit)
    # The current scenarios (bench.rs uses only the engine's public API).
    shutil.copy(BENCH_EXAMPLE, src / "crates" / "netsim" / "examples" / "bench.rs")
    print(f"building the previous build ({commit[:10]}) in {root}")
    return cargo_build(src, root / "target")


def run_child(argv: list[str]) -> tuple[dict, float]:
    """Run one benchmark process: its last JSON line (which reports the process's
    own peak RSS, VmHWM: a child's ru_maxrss would include this Python process's
    pages, which exec inherits into the count) and its CPU seconds (wait4)."""
    with tempfile.TemporaryFile() as out:
        pid = os.posix_spawn(argv[0], argv, os.environ, file_actions=[(os.POSIX_SPAWN_DUP2, out.fileno(), 1)])
        try:
            _, status, ru = os.wait4(pid, 0)
        except BaseException:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise
        code = os.waitstatus_to_exitcode(status)
        if code != 0:
            raise SystemExit(f"benchmark run failed (exit {code}): {' '.join(argv)}")
        out.seek(0)
        lines = [ln for ln in out.read().decode().splitlines() if ln.startswith("{")]
    return json.loads(lines[-1]), ru.ru_utime + ru.ru_stime


def instruction_counter() -> tuple[str | None, str]:
    """("perf" | "valgrind" | None, why)."""
    if shutil.which("perf"):
        r = subprocess.run(["perf", "stat", "-x,", "-e", "instructions:u", "true"], capture_output=True, text=True)
        if r.returncode == 0 and "<not supported>" not in r.stderr and "<not counted>" not in r.stderr:
            return "perf", "perf stat -e instructions:u"
        why = "perf stat cannot count instructions here (no hardware performance counters, e.g. in a VM)"
    else:
        why = "perf is not installed"
    if shutil.which("valgrind"):
        return "valgrind", f"{why}; valgrind's instruction count (cachegrind, no cache simulation) instead"
    return None, f"{why}, and valgrind is not installed: instructions per packet skipped"


def count_instructions(tool: str, argv: list[str]) -> tuple[int, int]:
    """(instructions, bottleneck packets) of one run."""
    with tempfile.TemporaryDirectory() as d:
        if tool == "perf":
            cmd = ["perf", "stat", "-x,", "-e", "instructions:u", "-o", f"{d}/stat", "--", *argv]
        else:
            cmd = ["valgrind", "--tool=cachegrind", "--cache-sim=no", f"--cachegrind-out-file={d}/cg", f"--log-file={d}/stat", *argv]
        r = subprocess.run(cmd, capture_output=True, text=True, check=True)
        text = Path(f"{d}/stat").read_text()
    if tool == "perf":
        count = next(int(ln.split(",")[0]) for ln in text.splitlines() if "instructions" in ln)
    else:
        count = next(int(ln.split("refs:")[1].replace(",", "")) for ln in text.splitlines() if "I   refs:" in ln or "I refs:" in ln)
    doc = json.loads([ln for ln in r.stdout.splitlines() if ln.startswith("{")][-1])
    return count, doc["bottleneck_packets"]


def fmt(xs: list[float]) -> str:
    if not xs:
        return "—"
    return f"{statistics.median(xs) / 1e6:.2f} ({min(xs) / 1e6:.2f}–{max(xs) / 1e6:.2f})"


def print_rows(sc: Scenario, results: dict[tuple[str, str], Runs], names: list[str]) -> None:
    for name in names:
        r = results[(sc.key, name)]
        ipp = f"{r.instr_per_pkt:.0f}" if r.instr_per_pkt is not None else "—"
        print(f"| {sc.label} | {name} | {fmt(r.wall_pps)} | {fmt(r.cpu_pps)} | {r.events_per_pkt:.2f} | {ipp} | {r.rss_mib:.1f} |")
    for other in ("previous", "htsim"):
        if other in names:
            ratio = statistics.median(results[(sc.key, "current")].cpu_pps) / statistics.median(results[(sc.key, other)].cpu_pps)
            print(f"|  | current / {other} (CPU-s medians) | | {ratio:.2f}× | | | |")


HEADER = "| scenario | build | pkts per wall-second | pkts per CPU-second | events/pkt | instructions/pkt | peak RSS MiB |\n|---|---|---|---|---|---|---|"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default=DEFAULT_BASE, help=f"git ref of the previous build (default {DEFAULT_BASE}, main before the second round of engine work)")
    ap.add_argument("--no-base", action="store_true", help="benchmark the current build only")
    ap.add_argument("--repeat", type=int, default=5, help="timed runs per build and scenario (default 5)")
    ap.add_argument("--only", default="", help="comma-separated scenarios (s1,s64,s3,s2; default all)")
    ap.add_argument("--skip-instructions", action="store_true", help="no instruction counts (valgrind takes minutes per build on S2)")
    ap.add_argument("--htsim", type=Path, help="a csg-htsim dumbbell binary (bench/htsim_dumbbell.cpp) to run alongside")
    args = ap.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # progress shows when piped to a file
    chosen = [s for s in SCENARIOS if not args.only or s.key in args.only.split(",")]

    print(f"machine: {platform.node()} {platform.machine()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; {time.strftime('%Y-%m-%d %H:%M %Z')}")
    builds: dict[str, Path] = {"current": cargo_build(REPO, target_dir())}
    if not args.no_base:
        base = build_base(args.base)
        if base is not None:
            builds = {"previous": base, **builds}
    tool, why = instruction_counter()
    if args.skip_instructions:
        tool, why = None, "skipped (--skip-instructions)"
    print(f"instructions: {why}")

    results: dict[tuple[str, str], Runs] = {}
    names = [*builds, *(["htsim"] if args.htsim else [])]
    for sc in chosen:
        order = list(builds)
        if args.htsim:
            order.append("htsim")
        for r in range(max(1, args.repeat)):
            for name in order if r % 2 == 0 else order[::-1]:
                runs = results.setdefault((sc.key, name), Runs())
                if name == "htsim":
                    flows, mbps, rtt, buf = sc.htsim
                    doc, cpu = run_child([str(args.htsim), str(flows), str(mbps), str(rtt), str(buf), str(sc.secs)])
                else:
                    doc, cpu = run_child([str(builds[name]), sc.key, "--repeat", "1", "--json", "--secs", str(sc.secs)])
                pk = doc["bottleneck_packets"]
                runs.wall_pps.append(pk / doc["wall_s"])
                runs.cpu_pps.append(pk / cpu)
                runs.events_per_pkt = doc["events"] / pk
                runs.rss_mib = doc.get("peak_rss_kib", 0) / 1024
        if tool:
            for name, binary in builds.items():
                a, b = sc.ir_secs
                i1, p1 = count_instructions(tool, [str(binary), sc.key, "--repeat", "1", "--json", "--secs", str(a)])
                i2, p2 = count_instructions(tool, [str(binary), sc.key, "--repeat", "1", "--json", "--secs", str(b)])
                results[(sc.key, name)].instr_per_pkt = (i2 - i1) / (p2 - p1)
        print(f"{sc.label}: measured")
        print(HEADER)
        print_rows(sc, results, names)

    print(f"\n{args.repeat} alternating runs per build; median (range) in M bottleneck packets per second; simulated seconds per run: "
          + ", ".join(f"{s.key.upper()} {s.secs}" for s in chosen))
    print(HEADER)
    for sc in chosen:
        print_rows(sc, results, names)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
