#!/usr/bin/env python3
"""Our bhatti2008-dccp campaign beside seed 001's Tables II–V and seed 000's Tables VI–VII.

    .venv/bin/python validation/seed001/compare.py out/bhatti2008-dccp > tables.md
    .venv/bin/python validation/seed001/compare.py out/seed001-ccid2-newreno \
        out/seed001-ccid2-first-bic-cubic out/seed001-tcp-first-bic-cubic > tables.md

Prints Markdown tables (used in docs/validation/seed001.md). Works on a campaign that
is still running or was cut short: cells whose runs are missing say how many runs
they rest on.

The paper's numbers are transcribed from /work/shared/seeds/001_*.txt (5 runs each)
and 000_*.txt (Tables VI/VII, 25 runs). Throughputs in Mb/s; "f1" is the flow that
starts at 0 s, "f2" the one that starts at 30 s.
"""

from __future__ import annotations

import ast
import sys

import numpy as np

from fairlab.analysis import analyze
from fairlab.campaign.aggregate import campaign_of
from fairlab.campaign.store import Store
from fairlab.metrics.nru import classify_case
from fairlab.metrics.stats import run_stats
from fairlab.scenario import units

RTTS = [25, 50, 75, 100, 125, 150, 175, 200]

# ---- seed 001 (Bhatti, Bateman, Miras 2008), 5 runs, window 60–300 s -------------
# Table V: throughput (Mb/s), flow 1 = CCID2 (starts 0 s), flow 2 = the TCP (30 s).
T5 = {
    "reno":  [(55, 40), (52, 42), (46, 48), (41, 50), (39, 49), (37, 39), (31, 33), (32, 36)],
    "bic":   [(40, 54), (26, 67), (17, 74), (15, 74), (16, 74), (22, 71), (23, 71), (23, 70)],
    "cubic": [(40, 54), (25, 68), (19, 73), (16, 74), (13, 75), (22, 70), (26, 68), (27, 67)],
}
# Table III: (JFI, std) CCID2 first.  Table IV: (JFI, std) TCP first, CCID2 second.
T3 = {
    "reno":  [(.94, .05), (.96, .04), (.95, .05), (.94, .05), (.94, .05), (.94, .08), (.93, .07), (.93, .06)],
    "bic":   [(.93, .06), (.79, .09), (.71, .07), (.66, .09), (.68, .06), (.76, .06), (.79, .05), (.79, .06)],
    "cubic": [(.94, .05), (.80, .09), (.72, .09), (.69, .08), (.64, .11), (.77, .06), (.82, .06), (.85, .05)],
}
T4 = {
    "reno":  [(.89, .01), (.88, .01), (.87, .01), (.90, .02), (.86, .02), (.87, .02), (.92, .03), (.81, .04)],
    "bic":   [(.92, .00), (.93, .01), (.90, .01), (.85, .03), (.64, .14), (.61, .17), (.67, .16), (.53, .18)],
    "cubic": [(.93, .01), (.93, .01), (.90, .02), (.83, .04), (.75, .07), (.68, .10), (.57, .14), (.60, .15)],
}
# Table II: two flows of the same protocol (flow 1, flow 2), RTT 25/50/100/200 only.
T2 = {
    "reno":  {25: (45, 49), 50: (42, 51), 100: (43, 51), 200: (43, 43)},
    "bic":   {25: (43, 51), 50: (53, 41), 100: (44, 49), 200: (42, 41)},
    "cubic": {25: (42, 52), 50: (51, 43), 100: (44, 48), 200: (41, 41)},
    "ccid2": {25: (43, 51), 50: (46, 47), 100: (45, 48), 200: (33, 32)},
}
# ---- seed 000 (same testbed, 25 runs), CCID2 first -------------------------------
# Table VI: NRU tuples <U_N+, U_N-, S_N>; None = "—".
T6 = {
    "reno":  [(0.84, -1.29, 6.66), (0.91, -1.43, 6.35), (0.83, -1.48, 5.01), (1.15, -1.81, 6.31),
              (None, -0.27, 1.23), (0.54, -0.77, 8.13), (0.50, -0.93, 4.69), (0.68, -1.21, 5.06)],
    "cubic": [(0.06, -0.40, 1.93), (1.53, -2.58, 5.50), (2.00, -4.27, 3.80), (2.00, -4.24, 3.83),
              (1.90, -3.73, 4.37), (1.80, -3.23, 5.00), (1.75, -3.10, 5.06), (1.80, -3.31, 4.79)],
}
# Table VII: T_U (s), t_e = 30 s; None = "—" (did not converge).
T7 = {
    "reno":  [109, 208, None, 157, 121, 62, 198, 172],
    "cubic": [71, 157, 61, 84, None, None, 61, 62],
}
# Table IV of seed 000 (25 runs): throughput, flow 1 = CCID2.
T4_000 = {
    "reno":  [(56, 38), (55, 39), (55, 39), (52, 41), (43, 44), (38, 37), (33, 32), (30, 29)],
    "cubic": [(39, 55), (26, 67), (18, 74), (17, 73), (18, 73), (23, 70), (22, 71), (22, 70)],
}
# Table V of seed 000: (JFI, CV) over 25 runs, CCID2 first.
T5_000 = {
    "reno":  [(.94, .01), (.93, .02), (.91, .03), (.92, .03), (.90, .05), (.90, .05), (.88, .05), (.86, .09)],
    "cubic": [(.93, .01), (.80, .09), (.71, .14), (.69, .15), (.72, .14), (.79, .11), (.76, .13), (.78, .13)],
}


def case_of(up, um):
    """Seed 000 Table II via fairlab's classifier ("0" = below 0.1 dB, as the seed reads 0.06)."""
    return classify_case(up, um) or "—"


def f1(x, dp=1):
    return "—" if x is None or (isinstance(x, float) and not np.isfinite(x)) else f"{x:.{dp}f}"


def pair_key(trace):
    """(cca of flow 0, cca of flow 1) from the run's own flow table."""
    return tuple(str(c) for c in trace.flows.sort_values("flow")["cca"])


def rtt_ms(point):
    return units.parse_duration(point["flows[*].rtt"]) // 1_000_000


def mean(v):
    """Mean over runs (None where no run has a value), via fairlab's run_stats."""
    return run_stats(v).mean


class Cell:
    """The runs of one condition, summarised as the paper does."""

    def __init__(self, keys, expected=None):
        self.n = len(keys)
        self.f1, self.f2, self.jt, self.jm, self.jt_std = [], [], [], [], []
        self.up, self.um, self.umean, self.ss, self.tu = [], [], [], [], []
        self.n_conv = 0
        for store, k in keys:
            tr = store.load(k)
            a = analyze(tr, window=(60, 300), expected_bps=expected, epoch=30.0, u_c=-0.46, k=1)
            self.f1.append(a.flows[0].mean_bps / 1e6)
            self.f2.append(a.flows[1].mean_bps / 1e6)
            self.jt.append(a.jain.mean_jt)
            self.jm.append(a.jain.of_means)
            # J(t) over the window at the times both flows are present (seed 000 Eq. 2)
            self.jt_std.append(run_stats([j for _, j in a.jain_series]).std)
            if a.nru is not None:
                self.up.append(a.nru.u_plus)
                self.um.append(a.nru.u_minus)
                self.umean.append(a.nru.u_mean)
                self.ss.append(a.nru.s_system)
                self.tu.append(a.nru.t_convergence)
                self.n_conv += a.nru.t_convergence is not None

    def jfi_text(self):
        s = run_stats(self.jt)
        m, sd = s.mean, s.std
        if sd is None:
            return f"{m:.3f}"
        return f"{m:.3f} ± {sd:.3f} ({sd / m:.3f})"

    def jt_cells(self):
        """The JT_COLS cells: mean J(t) over runs, within-run std of J(t), J of means."""
        return f"{self.jfi_text()} | {np.mean(self.jt_std):.3f} | {np.mean(self.jm):.3f}"


def collect(store, main, calib):
    """Group the stored runs by the task each one records in its metadata. Only runs
    of the campaign as planned by this fairlab (same engine build) count: a store can
    also hold runs left from an earlier engine, whose keys no longer match."""
    wanted = {t.key for t in campaign_of(store).tasks}
    skipped = 0
    for k in sorted(store.done_keys()):
        if k not in wanted:
            skipped += 1
            continue
        tr = store.load(k)
        task = tr.meta.get("task") or {}
        if isinstance(task, str):
            task = ast.literal_eval(task)
        kind, point = task.get("kind"), task.get("point") or {}
        if not point:
            continue
        rtt = rtt_ms(point)
        if kind == "main":
            main.setdefault((pair_key(tr), rtt), []).append((store, k))
        elif kind == "calibration":
            # several conditions share one calibration run; several stores may repeat
            # a calibration (same seeds): keep the first store's copy of each run index
            seen = calib.setdefault((task["for_cca"], rtt), {})
            seen.setdefault(task["run_index"], (store, k))
    return skipped


#: The three columns the two pair tables (Tables III/V and IV) share, in this order.
JT_COLS = ("ours mean J(t) ± std over runs (CV)", "ours within-run std of J(t)", "ours J of means")


def table_head(title, *columns):
    """A Markdown table's heading, header row and separator (one "---" per column);
    a tuple among ``columns`` is spliced in."""
    cols = [c for col in columns for c in ((col,) if isinstance(col, str) else col)]
    print(f"\n#### {title}\n")
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))


def main(paths: list[str]) -> int:
    main_runs, calib = {}, {}
    for path in paths:
        store = Store(path)
        skipped = collect(store, main_runs, calib)
        print(f"_campaign `{path}`: {len(store.done_keys()) - skipped} runs of this engine build used"
              f"{f', {skipped} older runs ignored' if skipped else ''}._\n")
    calib_runs = {kk: [v[i] for i in sorted(v)] for kk, v in calib.items()}

    # expected throughput per (cca, rtt): mean of all flows of its calibration runs
    expected = {}
    calib_cells = {}
    for (cca, rtt), keys in calib_runs.items():
        c = Cell(keys)
        calib_cells[(cca, rtt)] = c
        expected[(cca, rtt)] = float(np.mean(c.f1 + c.f2)) * 1e6

    cells = {}
    for (pair, rtt), keys in main_runs.items():
        exp = None
        if all((c, rtt) in expected for c in pair):
            exp = [expected[(c, rtt)] for c in pair]
        cells[(pair, rtt)] = Cell(keys, exp)

    def n_of(c):
        return f" ({c.n} runs)" if c.n != 5 else ""

    for tcp in ("reno", "bic", "cubic"):
        table_head(f"CCID2 (f1, 0 s) vs {tcp} (f2, 30 s) — seed 001 Tables V and III",
                   "RTT ms", "paper f1 / f2", "ours f1 / f2", "Δ f1 / Δ f2", "paper JFI, std", JT_COLS)
        for i, rtt in enumerate(RTTS):
            c = cells.get((("ccid2", tcp), rtt))
            p1, p2 = T5[tcp][i]
            pj, ps = T3[tcp][i]
            if c is None:
                print(f"| {rtt} | {p1} / {p2} | not run | | {pj:.2f}, {ps:.2f} | | | |")
                continue
            o1, o2 = np.mean(c.f1), np.mean(c.f2)
            print(f"| {rtt}{n_of(c)} | {p1} / {p2} | {o1:.1f} / {o2:.1f} | {o1 - p1:+.1f} / {o2 - p2:+.1f} | {pj:.2f}, {ps:.2f} | {c.jt_cells()} |")

    for tcp in ("reno", "bic", "cubic"):
        table_head(f"{tcp} (f1, 0 s) vs CCID2 (f2, 30 s) — seed 001 Table IV (the paper gives no throughputs for this order)",
                   "RTT ms", "ours f1 / f2", "paper JFI, std", JT_COLS)
        for i, rtt in enumerate(RTTS):
            c = cells.get(((tcp, "ccid2"), rtt))
            pj, ps = T4[tcp][i]
            if c is None:
                print(f"| {rtt} | not run | {pj:.2f}, {ps:.2f} | | | |")
                continue
            print(f"| {rtt}{n_of(c)} | {np.mean(c.f1):.1f} / {np.mean(c.f2):.1f} | {pj:.2f}, {ps:.2f} | {c.jt_cells()} |")

    table_head("Two flows of the same protocol (calibration runs) — seed 001 Table II / seed 000 Table III",
               "protocol", "RTT ms", "paper f1 / f2", "ours f1 / f2", "ours mean J(t) ± std over runs")
    for cca in ("reno", "bic", "cubic", "ccid2"):
        for rtt in RTTS:
            c = calib_cells.get((cca, rtt))
            paper = T2[cca].get(rtt)
            ptxt = f"{paper[0]} / {paper[1]}" if paper else "—"
            if c is None:
                if paper:
                    print(f"| {cca} | {rtt} | {ptxt} | not run | |")
                continue
            print(f"| {cca} | {rtt}{n_of(c)} | {ptxt} | {np.mean(c.f1):.1f} / {np.mean(c.f2):.1f} | {c.jfi_text()} |")

    for tcp in ("reno", "cubic"):
        table_head(f"CCID2 vs {tcp}: seed 000 Tables IV–VII (25 runs) beside ours (weights from our calibration runs, t_e = 30 s)",
                   "RTT ms", "seed-000 f1 / f2", "seed-000 JFI, CV", "seed-000 NRU ⟨U+, U−, S⟩ (Case)", "ours NRU ⟨U+, U−, S⟩ (Case)",
                   "ours U_N", "seed-000 T_U s", "ours T_U s (converged/runs)")
        for i, rtt in enumerate(RTTS):
            c = cells.get((("ccid2", tcp), rtt))
            a1, a2 = T4_000[tcp][i]
            j, cv = T5_000[tcp][i]
            up, um, s = T6[tcp][i]
            ptuple = f"⟨{f1(up, 2)}, {um:.2f}, {s:.2f}⟩ ({case_of(up, um)})"
            tu = T7[tcp][i]
            if c is None or not c.up:
                why = "not run" if c is None else "no calibration"
                print(f"| {rtt} | {a1} / {a2} | {j:.2f}, {cv:.2f} | {ptuple} | {why} | | {tu or '—'} | |")
                continue
            oup, oum, oss = mean(c.up), mean(c.um), mean(c.ss)
            otu = mean(c.tu)
            print(f"| {rtt}{n_of(c)} | {a1} / {a2} | {j:.2f}, {cv:.2f} | {ptuple} "
                  f"| ⟨{f1(oup, 2)}, {f1(oum, 2)}, {f1(oss, 2)}⟩ ({case_of(oup, oum)}) | {f1(mean(c.umean), 2)} "
                  f"| {tu or '—'} | {f1(otu, 0)} ({c.n_conv}/{c.n}) |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["out/bhatti2008-dccp"]))
