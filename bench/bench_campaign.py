"""Benchmark: the full bhatti2008-dccp campaign (seed 001: 8 RTTs x 6 ordered pairs x 5
runs, plus self-competition calibration and solo runs; 300 s at 100 Mb/s each).

Prints runs per minute with 1 and 2 local workers (on the same 96-run slice) and the
wall time of the whole campaign with 2 workers. Target (issue 6): whole campaign within
10 minutes on a 2-core machine. A benchmark, not a test: `make bench` runs it.

Each line also gives the catalog step at the campaign's end (`build_catalog`: the
derived tables and their aggregation over the stored runs) in wall and CPU seconds,
the part of a campaign that is Python's alone (issue 15 item 5: it must stay a small
fraction). ``--catalog STORE`` times only that step on an existing store (rebuilt in
place; the same bytes as before). ``--readback STORE`` times `fairlab validate`'s
read-back of a grid store's simulator side from its catalog and from every trace
(the way before 2026-12-02), and says whether the two give the same rows.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from fairlab.campaign.execute import run_campaign
from fairlab.campaign.plan import expand
from fairlab.campaign.store import Store
from fairlab.presets import preset_document


class TimedStore(Store):
    """A Store that records the wall and CPU seconds of its `build_catalog` calls."""

    catalog_s: tuple[float, float] = (0.0, 0.0)

    def build_catalog(self) -> Path:
        w0, c0 = time.perf_counter(), _cpu()
        try:
            return super().build_catalog()
        finally:
            self.catalog_s = (time.perf_counter() - w0, _cpu() - c0)


def _cpu() -> float:
    """CPU seconds (user + system) of this process; the figure that does not depend
    on what else the machine runs."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _catalog(store: TimedStore, wall: float) -> str:
    cw, cc = store.catalog_s
    return f"catalog step {cw:.1f} s wall / {cc:.1f} CPU-s ({100 * cw / wall:.0f} % of the wall time)"


def time_catalog(root: str) -> None:
    """The catalog step alone, on an existing store."""
    store = TimedStore(root)
    n = len(store.done_keys())
    w0 = time.perf_counter()
    store.build_catalog()
    cw, cc = store.catalog_s
    print(f"{root}: {n} runs; catalog step {cw:.2f} s wall / {cc:.2f} CPU-s ({1e3 * cc / max(n, 1):.2f} CPU-ms a run); "
          f"load average {os.getloadavg()[0]:.1f}; {time.perf_counter() - w0:.2f} s in all")


def _timed(f):
    w0, c0 = time.perf_counter(), _cpu()
    out = f()
    return out, time.perf_counter() - w0, _cpu() - c0


def time_readback(root: str) -> None:
    """`validation.grid.store_results` of a simulator grid store, then the per-trace
    reference, and how far apart their rows are (nothing, unless the catalog is wrong)."""
    import numpy as np

    from fairlab.validation import grid

    rows, w, c = _timed(lambda: grid.store_results(Path(root), "sim"))
    print(f"{root}: {len(rows)} rows; from the catalog {w:.1f} s wall / {c:.1f} CPU-s (load average {os.getloadavg()[0]:.1f})")
    ref, w, c = _timed(lambda: grid._sim_results_from_traces(Store(root), "sim"))
    print(f"from every trace {w:.1f} s wall / {c:.1f} CPU-s (load average {os.getloadavg()[0]:.1f})")
    same = rows.equals(ref) and rows.dtypes.equals(ref.dtypes)
    print("rows identical, bit for bit" if same else f"rows differ ({rows.shape} / {ref.shape} rows x columns):")
    if not same and rows.shape == ref.shape:
        for col in rows.columns:
            a, b = rows[col], ref[col]
            if a.dtype.kind == "f" and b.dtype.kind == "f":
                rel = np.abs(a - b) / np.maximum(np.abs(b), 1e-300)
                print(f"  {col}: max relative difference {np.nanmax(rel.to_numpy()):.3g}; NaN where the other is not: {int((a.isna() != b.isna()).sum())}")
            elif not a.equals(b):
                print(f"  {col}: {int((a.astype(str) != b.astype(str)).sum())} values differ ({a.dtype} / {b.dtype})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--catalog", metavar="STORE", help="time only the catalog step on this existing campaign store")
    ap.add_argument("--readback", metavar="STORE", help="time `fairlab validate`'s read-back of this simulator grid store, both ways")
    args = ap.parse_args()
    if args.catalog:
        time_catalog(args.catalog)
        return
    if args.readback:
        time_readback(args.readback)
        return
    camp = expand(preset_document("bhatti2008-dccp"), source="preset bhatti2008-dccp")
    print(f"machine: {platform.node()} {platform.machine()}, {os.cpu_count()} cores; {time.strftime('%Y-%m-%d %H:%M')}")
    print(f"campaign: {len(camp.tasks)} runs")
    sl = replace(camp, tasks=camp.tasks[:96])
    for workers in (1, 2):
        with tempfile.TemporaryDirectory() as d:
            t0 = time.perf_counter()
            rep = run_campaign(sl, store := TimedStore(d), workers=workers)
            wall = time.perf_counter() - t0
            print(f"{workers} worker(s): {rep.done} runs in {wall:.1f} s = {rep.done / wall * 60:.0f} runs/min; {_catalog(store, wall)}")
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        rep = run_campaign(camp, store := TimedStore(d), workers=2)
        wall = time.perf_counter() - t0
        print(f"full campaign, 2 workers: {rep.done} runs ({rep.failed} failed) in {wall / 60:.1f} min = {rep.done / wall * 60:.0f} runs/min "
              f"(target: within 10 min); {_catalog(store, wall)}")


if __name__ == "__main__":
    main()
