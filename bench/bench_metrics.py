"""Benchmark (not a test): J(t) + the full NRU analysis on a 1,000-flow x 10,000-sample
matrix, one core.  Target: < 1 s.

    PYTHONPATH=python .venv/bin/python bench/bench_metrics.py [--flows N] [--samples T] [--repeat R]

Prints the best-of-R wall time of each stage and of the whole pipeline.
"""

from __future__ import annotations

import argparse
import os
import time

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")  # one core

import numpy as np  # noqa: E402

from fairlab.metrics import (  # noqa: E402
    convergence_time,
    jain_over_time,
    mean_jain_over_time,
    nru_over_time,
    summarise_nru,
)


def make_matrix(n_flows: int, n_samples: int, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    expected = rng.uniform(5e6, 50e6, n_flows)
    m = expected * rng.lognormal(0.0, 0.3, (n_samples, n_flows))
    # staggered starts and some early stops (absent = NaN), a few zero samples
    start = rng.integers(0, n_samples // 10, n_flows)
    stop = np.where(rng.random(n_flows) < 0.1, rng.integers(n_samples // 2, n_samples, n_flows), n_samples)
    t = np.arange(n_samples)[:, None]
    m[(t < start) | (t >= stop)] = np.nan
    m[rng.random(m.shape) < 1e-4] = 0.0
    return m, expected


def best(fn, repeat: int) -> tuple[float, object]:
    out, tmin = None, float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        tmin = min(tmin, time.perf_counter() - t0)
    return tmin, out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--flows", type=int, default=1000)
    ap.add_argument("--samples", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    m, expected = make_matrix(a.flows, a.samples)
    times = np.arange(a.samples, dtype=np.float64)

    def pipeline():
        js = jain_over_time(m)
        u, nfl = nru_over_time(m, expected=expected, return_floored=True)
        sysr = summarise_nru(u, n_floored=nfl, times=times, t_e=float(a.samples // 10))
        return js, sysr

    stages = {
        "jain_over_time (J(t))": lambda: jain_over_time(m),
        "mean_jain_over_time": lambda: mean_jain_over_time(m),
        "nru_over_time (U_n(t))": lambda: nru_over_time(m, expected=expected, return_floored=True),
    }
    u, nfl = nru_over_time(m, expected=expected, return_floored=True)
    stages["summarise_nru (U_n, S_n, tuple, Case)"] = lambda: summarise_nru(u, n_floored=nfl)
    stages["convergence_time (system T_U)"] = lambda: convergence_time(u, times=times, t_e=1000.0)
    t0 = time.perf_counter()
    pipeline()
    cold = time.perf_counter() - t0
    print(f"matrix {a.samples} samples x {a.flows} flows, {np.isnan(m).mean():.1%} absent, best of {a.repeat}")
    for name, fn in stages.items():
        t, _ = best(fn, a.repeat)
        print(f"  {name:42s} {t * 1e3:8.1f} ms")
    # the first (cold) call in a fresh process is reported separately: it pays for
    # page-faulting the ~80 MB temporaries for the first time
    t, (js, sysr) = best(pipeline, a.repeat)
    print(f"  {'TOTAL, first call of the pipeline':42s} {cold * 1e3:8.1f} ms")
    print(f"  {'TOTAL J(t) + full NRU + system T_U':42s} {t * 1e3:8.1f} ms  ({'PASS' if t < 1 else 'FAIL'} < 1 s)")
    print(f"  mean J(t) = {js.values.mean():.4f}, NRU tuple {sysr.tuple_str()}, Case {sysr.case}, "
          f"T_U = {sysr.t_convergence}, floored samples = {sysr.n_floored}")


if __name__ == "__main__":
    main()
