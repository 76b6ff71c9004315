"""Benchmark: the full bhatti2008-dccp campaign (seed 001: 8 RTTs x 6 ordered pairs x 5
runs, plus self-competition calibration and solo runs; 300 s at 100 Mb/s each).

Prints runs per minute with 1 and 2 local workers (on the same 96-run slice) and the
wall time of the whole campaign with 2 workers. Target (issue 6): whole campaign within
10 minutes on a 2-core machine. A benchmark, not a test: `make bench` runs it.
"""

from __future__ import annotations

import os
import platform
import tempfile
import time
from dataclasses import replace

from fairlab.campaign.execute import run_campaign
from fairlab.campaign.plan import expand
from fairlab.campaign.store import Store
from fairlab.presets import preset_document


def main() -> None:
    camp = expand(preset_document("bhatti2008-dccp"), source="preset bhatti2008-dccp")
    print(f"machine: {platform.node()} {platform.machine()}, {os.cpu_count()} cores; {time.strftime('%Y-%m-%d %H:%M')}")
    print(f"campaign: {len(camp.tasks)} runs")
    sl = replace(camp, tasks=camp.tasks[:96])
    for workers in (1, 2):
        with tempfile.TemporaryDirectory() as d:
            t0 = time.perf_counter()
            rep = run_campaign(sl, Store(d), workers=workers)
            wall = time.perf_counter() - t0
            print(f"{workers} worker(s): {rep.done} runs in {wall:.1f} s = {rep.done / wall * 60:.0f} runs/min")
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        rep = run_campaign(camp, Store(d), workers=2)
        wall = time.perf_counter() - t0
        print(f"full campaign, 2 workers: {rep.done} runs ({rep.failed} failed) in {wall / 60:.1f} min = {rep.done / wall * 60:.0f} runs/min (target: within 10 min)")


if __name__ == "__main__":
    main()
