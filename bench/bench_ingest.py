"""Benchmark (not a test): `fairlab analyze` of large measurement files, whole process.

    PYTHONPATH=python .venv/bin/python bench/bench_ingest.py [--flows N] [--samples T] [--streams S]

Generates, in a temporary directory that is removed afterwards:

- a plain CSV ``time,flow,throughput_Mbps`` of N flows x T samples (default
  1,000 x 10,000: about 170 MB, the size issue 15 measured at 152-161 s and 8.3 GiB);
- an iperf2 ``-y C`` file of S streams x T/10 one-second rows;
- an iperf3 ``-J`` document of S streams x T/10 intervals (the shape ``-P S`` writes).

Each file is read by a fresh process twice: ``fairlab.ingest.load`` alone, and the
whole ``fairlab analyze FILE --json``; the script prints each one's wall time and peak
RSS (its own ``ru_maxrss``, interpreter start-up excluded from the time). Targets
(issue 15 item 4): the CSV in <= 10 s and <= 2 GiB.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np


def write_csv(path: Path, n_flows: int, n_samples: int, seed: int = 1) -> None:
    rng = np.random.default_rng(seed)
    t = np.arange(1, n_samples + 1, dtype=float)
    with path.open("w") as fh:
        fh.write("time,flow,throughput_Mbps\n")
        for f in range(n_flows):  # one block of rows per flow, as a per-flow export writes it
            v = rng.uniform(1.0, 100.0, n_samples)
            block = np.column_stack([t, np.full(n_samples, f), v])
            np.savetxt(fh, block, fmt=["%.0f", "%d", "%.6f"], delimiter=",")


def write_iperf2(path: Path, n_streams: int, n_rows: int, seed: int = 2) -> None:
    rng = np.random.default_rng(seed)
    lines = []
    for k in range(n_rows):
        stamp = f"20261121{6 + (k // 3600) % 18:02d}{(k // 60) % 60:02d}{k % 60:02d}"
        for s in range(1, n_streams + 1):
            bps = int(rng.uniform(1e6, 1e8))
            lines.append(f"{stamp},10.0.0.1,{40000 + s},10.0.0.2,5001,{s},{k:.1f}-{k + 1:.1f},{bps // 8},{bps}\n")
    path.write_text("".join(lines))


def write_iperf3(path: Path, n_streams: int, n_intervals: int, seed: int = 3) -> None:
    rng = np.random.default_rng(seed)
    intervals = []
    for k in range(n_intervals):
        streams = [{"socket": 5 + s, "start": float(k), "end": k + 1.000123, "seconds": 1.000123,
                    "bytes": 1000, "bits_per_second": float(rng.uniform(1e6, 1e8)), "retransmits": 0,
                    "snd_cwnd": 100000, "rtt": 20000, "rttvar": 1000, "omitted": False, "sender": True}
                   for s in range(n_streams)]
        intervals.append({"streams": streams, "sum": {}})
    doc = {"start": {"connecting_to": {"host": "10.0.0.2", "port": 5201}, "version": "iperf 3.21",
                     "timestamp": {"timesecs": 1795240937, "timemillisecs": 1795240937123},
                     "test_start": {"protocol": "TCP", "num_streams": n_streams, "duration": n_intervals,
                                    "interval": 1}},
           "intervals": intervals,
           "end": {"streams": [], "sender_tcp_congestion": "cubic"}}
    path.write_text(json.dumps(doc))


#: Child that prints its own wall time and peak RSS: import + load only, or the whole CLI.
CHILD = """
import resource, sys, time
t0 = time.perf_counter()
if sys.argv[1] == "load":
    from fairlab.ingest import load
    load(sys.argv[2])
else:
    import contextlib, io
    from fairlab.cli import main
    sys.argv = ["fairlab", "analyze", sys.argv[2], "--json"]
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            main()
        except SystemExit as exc:
            if exc.code:
                raise
ru = resource.getrusage(resource.RUSAGE_SELF)
print(time.perf_counter() - t0, ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024)
"""


def run_child(mode: str, path: Path) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds, peak RSS in MiB) of one fresh process: ``load`` =
    fairlab.ingest.load only, ``analyze`` = the whole `fairlab analyze FILE --json`.
    CPU time (user + system, all threads) is the figure that does not depend on what
    else the machine runs."""
    proc = subprocess.run([sys.executable, "-c", CHILD, mode, str(path)], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        print(f"  {mode} failed (exit {proc.returncode}): {proc.stderr.strip()[-300:]}")
        return float("nan"), float("nan"), float("nan")
    wall, cpu, rss = proc.stdout.split()[-3:]
    return float(wall), float(cpu), float(rss)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--flows", type=int, default=1000)
    ap.add_argument("--samples", type=int, default=10_000)
    ap.add_argument("--streams", type=int, default=128)
    ap.add_argument("--load-only", action="store_true", help="time fairlab.ingest.load only, not the whole analyze")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="fairlab-bench-ingest-") as tmp:
        d = Path(tmp)
        cases = []
        p3 = d / "iperf3.json"
        write_iperf3(p3, args.streams, args.samples // 10)
        cases.append((f"iperf3 -J, {args.streams} streams x {args.samples // 10} intervals", p3, []))
        p2 = d / "iperf2.csv"
        write_iperf2(p2, args.streams, args.samples // 10)
        cases.append((f"iperf2 -y C, {args.streams} streams x {args.samples // 10} rows", p2, []))
        pc = d / "table.csv"
        write_csv(pc, args.flows, args.samples)
        cases.append((f"plain CSV, {args.flows} flows x {args.samples} samples", pc, []))
        print(f"fairlab analyze, whole process; python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
        print(f"load average {os.getloadavg()[0]:.1f}")
        print(f"{'file':52s} {'size':>9s}  {'load: wall s':>12s} {'CPU s':>6s} {'MiB':>6s}  "
              f"{'analyze: wall s':>15s} {'CPU s':>6s} {'MiB':>6s}")
        for what, path, _extra in cases:
            size = path.stat().st_size / 1e6
            lw, lc, lr = run_child("load", path)
            aw, ac, ar = (float("nan"),) * 3 if args.load_only else run_child("analyze", path)
            print(f"{what:52s} {size:6.1f} MB  {lw:12.2f} {lc:6.2f} {lr:6.0f}  {aw:15.2f} {ac:6.2f} {ar:6.0f}", flush=True)


if __name__ == "__main__":
    main()
