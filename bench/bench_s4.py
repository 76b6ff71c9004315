"""Benchmark S4 (not a test): seed 000 §VI-E's 14-flow, 14-variant scenario, once.

100 Mb/s dumbbell, 100% BDP DropTail, 14 flows (one of each ns-2 TCP-Linux variant
fairlab has), flow k starting at 30·k s, 900 s simulated — the main run of preset
bhatti2009-nru at one RTT (default 100 ms). Times `fairlab.simulate` (scenario
resolution + the Rust engine + conversion to a Trace) and prints wall time, engine
events per wall-second and bottleneck packets per wall-second.

    .venv/bin/python bench/bench_s4.py [--rtt 100ms] [--duration 900s] [--repeat 1]

With --repeat R the best of R runs is reported (the simulator is deterministic, so
every repetition does the same work).
"""

from __future__ import annotations

import argparse
import copy
import time

import fairlab
from fairlab.presets import preset_document
from fairlab.scenario import Scenario


def s4_scenario(rtt: str, duration: str) -> Scenario:
    doc = copy.deepcopy(preset_document("bhatti2009-nru"))
    doc.pop("sweep", None)
    doc.pop("analysis", None)
    doc["name"] = "s4-14flow"
    doc["duration"] = duration
    doc.pop("window", None)
    for f in doc["flows"]:
        f["rtt"] = rtt
    return Scenario.from_dict(doc, source="bench S4")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rtt", default="100ms", help="RTT of every flow (default 100ms)")
    ap.add_argument("--duration", default="900s", help="simulated time (default 900s)")
    ap.add_argument("--repeat", type=int, default=1, help="runs; the best is reported")
    args = ap.parse_args()
    sc = s4_scenario(args.rtt, args.duration)
    best = None
    for _ in range(max(1, args.repeat)):
        t0 = time.perf_counter()
        tr = fairlab.simulate(sc)
        wall = time.perf_counter() - t0
        if best is None or wall < best[0]:
            best = (wall, tr)
    assert best is not None
    wall, tr = best
    ev = tr.meta["events"]
    pk = tr.meta["bottleneck_packets"]
    sim_s = sc.duration / 1e9
    print(f"S4: 14 flows x 14 variants, 100 Mbit/s, RTT {args.rtt}, {sim_s:.0f} s simulated (best of {max(1, args.repeat)})")
    print(f"  wall time                     {wall:8.2f} s   (engine only: {tr.meta['wall_s']:.2f} s)")
    print(f"  events                        {ev:12,d}   ({ev / wall / 1e6:6.2f} M events/s)")
    print(f"  bottleneck packets            {pk:12,d}   ({pk / wall / 1e6:6.2f} M packets per wall-second)")
    print(f"  simulated seconds per wall-s  {sim_s / wall:8.1f}")


if __name__ == "__main__":
    main()
