"""Benchmark (not a test): the Python side of a run at scale (issues 13 item 6, 15 item 3).

    PYTHONPATH=python .venv/bin/python bench/bench_analysis.py [--repeat R] [--skip-10000]

Prints, on one core:
- simulation and analysis (`fairlab.analyze`) wall time of simulated runs of 2, 1,000
  and 10,000 flows (60 s each; analysis best of R) — the analysis of a 1,000-flow run
  must cost less than its simulation, and 10,000 flows take seconds;
- `plan` (TOML read + expansion) of a 10,000-flow scenario, with and without
  `[analysis] harm/nru` (which add calibration and solo runs), best of R;
- the whole-process wall and CPU time of `fairlab run` of a 2-flow 60 s scenario
  (median and range of R+6 runs in fresh interpreters; target <= 0.5 s), and where its
  start-up goes (`python -X importtime`, self time by top-level package).
The machine's load average is printed with each figure: wall times on a shared machine
are only comparable side by side.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")  # one core

CLI = [sys.executable, "-c", "from fairlab.cli import main; main()"]


def scenario_toml(name: str, n_flows: int, *, rate: str, analysis: str = "") -> str:
    """n_flows explicit [[flows]] entries: reno/cubic alternating, RTTs 20-100 ms, starts
    staggered over 4.5 s (so J(t) has rows with part of the flows)."""
    head = f'name = "{name}"\nduration = "60s"\ninterval = "1s"\nseed = 1\n\n[bottleneck]\nrate = "{rate}"\nbuffer = "100%bdp"\n\n{analysis}'
    flows = "".join(
        f'[[flows]]\ncca = "{("reno", "cubic")[i % 2]}"\nrtt = "{20 + 20 * (i % 5)}ms"\nstart = "{0.5 * (i % 10)}s"\n\n' for i in range(n_flows)
    )
    return head + flows


def load() -> str:
    return f"load average {os.getloadavg()[0]:.1f}"


def best(fn, repeat: int) -> tuple[float, object]:
    out, tmin = None, float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        tmin = min(tmin, time.perf_counter() - t0)
    return tmin, out


def bench_analysis(tmp: Path, sizes: list[int], repeat: int) -> None:
    from fairlab import analyze, load_scenario, simulate

    for n in sizes:
        path = tmp / f"a{n}.toml"
        path.write_text(scenario_toml(f"a{n}", n, rate="100Mbit" if n <= 2 else "1Gbit"))
        t0 = time.perf_counter()
        trace = simulate(load_scenario(path))
        sim = time.perf_counter() - t0
        t_an, _ = best(lambda: analyze(trace), repeat)
        print(
            f"analysis, {n:>6,} flows x 60 samples: {t_an:7.3f} s (best of {repeat}); "
            f"simulation incl. Trace build {sim:6.2f} s; analysis/simulation = {t_an / sim:.3f}; {load()}",
            flush=True,
        )


def bench_plan(tmp: Path, repeat: int) -> None:
    from fairlab.campaign.plan import load_campaign

    for label, analysis in (("", ""), (" with [analysis] nru+harm", "[analysis]\nnru = true\nharm = true\n\n")):
        path = tmp / "plan10000.toml"
        path.write_text(scenario_toml("plan10000", 10_000, rate="10Gbit", analysis=analysis))
        t, camp = best(lambda: load_campaign(path), repeat)
        print(f"plan of 10,000 flows{label}: {t:.2f} s (best of {repeat}; {len(camp.tasks)} runs planned); {load()}", flush=True)


def bench_whole_run(tmp: Path, repeat: int) -> None:
    path = tmp / "two.toml"
    path.write_text(scenario_toml("two", 2, rate="100Mbit"))
    out = tmp / "out"
    walls, cpus = [], []
    for _ in range(repeat + 6):
        before = os.times()
        t0 = time.perf_counter()
        subprocess.run([*CLI, "run", str(path), "--out", str(out)], check=True, capture_output=True)
        walls.append(time.perf_counter() - t0)
        after = os.times()
        cpus.append(after.children_user + after.children_system - before.children_user - before.children_system)
    print(
        f"fairlab run, 2 flows, 60 s (whole process, {len(walls)} runs): wall median {statistics.median(walls):.3f} s "
        f"(range {min(walls):.3f}-{max(walls):.3f}), CPU median {statistics.median(cpus):.3f} s; target <= 0.5 s wall; {load()}",
        flush=True,
    )
    r = subprocess.run([sys.executable, "-X", "importtime", *CLI[1:], "run", str(path), "--out", str(out)], capture_output=True, text=True, check=True)
    by_pkg: dict[str, int] = defaultdict(int)
    for line in r.stderr.splitlines():
        if line.startswith("import time:") and "|" in line and "self" not in line:
            self_us, _, name = (x.strip() for x in line[len("import time:") :].split("|"))
            by_pkg[name.split(".")[0]] += int(self_us)
    top = sorted(by_pkg.items(), key=lambda kv: -kv[1])[:8]
    total = sum(by_pkg.values())
    print(f"  start-up imports {total / 1e6:.3f} s (one run, -X importtime self times): " + ", ".join(f"{k} {v / 1e6:.3f}" for k, v in top), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--skip-10000", action="store_true", help="leave out the 10,000-flow simulation (~10 s) and plans")
    a = ap.parse_args()
    print(f"machine: {platform.node()} {platform.machine()}, {os.cpu_count()} cores; {time.strftime('%Y-%m-%d %H:%M')}; Python {platform.python_version()}")
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        bench_whole_run(tmp, a.repeat)
        bench_analysis(tmp, [2, 1000] + ([] if a.skip_10000 else [10_000]), a.repeat)
        if not a.skip_10000:
            bench_plan(tmp, a.repeat)


if __name__ == "__main__":
    main()
