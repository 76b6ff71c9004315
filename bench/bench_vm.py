"""vm backend cost: host-core seconds per simulated second, and boot cost.

Each case runs the same scenario for two durations (SHORT and LONG seconds of
traffic) and reports the slope of QEMU's host CPU time against simulated time, so
boot, set-up and result export (paid once per run) drop out; the boot cost is the
intercept's part before the flows start, measured separately by the doctor's probe
boot. Host CPU time, not wall time, is what a loaded host does not inflate much;
both are printed. Targets (issue 11): <= 2.5 core-s per simulated second for 2 flows
at 100 Mbit/s with offloads off, <= 6 s boot.
"""

from __future__ import annotations

import platform
import sys
import time

from fairlab.backends.vm import doctor, image
from fairlab.backends.vm.runner import run_vm
from fairlab.scenario import Scenario

SHORT, LONG = 5, 15
CASES = [
    ("2 flows, 10 Mbit/s, offloads off", "10Mbit", 2, False),
    ("2 flows, 100 Mbit/s, offloads off", "100Mbit", 2, False),
    ("2 flows, 100 Mbit/s, offloads on", "100Mbit", 2, True),
    ("14 flows, 100 Mbit/s, offloads off", "100Mbit", 14, False),
]


def scenario(rate: str, n: int, seconds: int, offloads: bool) -> Scenario:
    return Scenario.from_dict({
        "name": "bench-vm", "duration": f"{seconds}s", "offloads": offloads,
        "bottleneck": {"rate": rate, "buffer": "100%bdp"},
        "flows": [{"cca": "cubic" if i % 2 else "reno", "rtt": "50ms"} for i in range(n)],
        "variation": {"start_jitter": "0s"},
    })


def main() -> None:
    img = image.find(progress=lambda s: print(s, file=sys.stderr))
    print(f"vm backend benchmark — {platform.node()} ({platform.machine()}, {time.strftime('%Y-%m-%d')}), "
          f"kernel {img.release}, image {img.key}")
    f = doctor.probe(img)
    print(f"boot (probe boot, all CC modules): host CPU {f.boot_host_cpu_s} s, wall {f.boot_wall_s} s")
    print("| case | host core-s per simulated s | wall s per simulated s | host CPU of a 15-s run |")
    print("|---|---|---|---|")
    for name, rate, n, offl in CASES:
        cpu, wall = {}, {}
        for secs in (SHORT, LONG):
            tr = run_vm(scenario(rate, n, secs, offl), seed=1, image=img)
            cpu[secs], wall[secs] = tr.meta["vm"]["host_cpu_s"], tr.meta["vm"]["host_wall_s"]
        slope = (cpu[LONG] - cpu[SHORT]) / (LONG - SHORT)
        wslope = (wall[LONG] - wall[SHORT]) / (LONG - SHORT)
        print(f"| {name} | {slope:.2f} | {wslope:.2f} | {cpu[LONG]:.1f} |", flush=True)


if __name__ == "__main__":
    main()
