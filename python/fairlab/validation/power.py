"""The grid's own ceiling: how often a simulator exactly like the kernel would agree.

A cell's verdict compares the mean of a few kernel runs with the mean of many
simulator runs. Where runs vary a lot from seed to seed, the mean of three kernel
runs is itself uncertain by more than the tolerance, so even a simulator whose runs
were drawn from the kernel's own distribution would miss some cells by chance. How
many is the yardstick's ceiling, and the headline count should be read against it:
issue 12 asks for 90 % of cells, which no simulator can reach if the kernel's
sample alone costs more than a tenth of them.

The chance is estimated by resampling the simulator's own runs, which stand in for
the kernel's distribution (their spread is within a factor of two of the kernel's
in most cells; `grid.spread_verdict`): draw the cell's number of kernel seeds
without replacement as a pretend kernel, keep the remaining runs as the simulator,
and apply the grid's rule (`grid.SHARE_POINTS`, `grid.JAIN_TOLERANCE`; shares by rank
where the flows are identical). The two sides are then draws of one distribution,
so every miss is the sample's. This is a bootstrap in the sense of Efron and
Tibshirani (1993), without replacement so that the two sides never share a run.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

#: Resamples per cell: the chance's Monte Carlo error is at most 0.5/sqrt(DRAWS) ≈ 0.011.
DRAWS = 2000


def per_seed(rows: pd.DataFrame, *, ranked: bool) -> tuple[np.ndarray, np.ndarray]:
    """A cell's runs as arrays: shares (seeds × flows, percent) and J of means
    (seeds). With ``ranked`` each run's shares are sorted largest first, as the grid
    compares identical flows. Runs with a missing share are left out."""
    shares = rows.pivot_table(index="seed", columns="flow", values="share")
    j = rows.groupby("seed")["jain_of_means"].first().reindex(shares.index)
    keep = shares.notna().all(axis=1) & j.notna()
    s = shares[keep].to_numpy(float)
    if ranked:
        s = -np.sort(-s, axis=1)
    return s, j[keep].to_numpy(float)


def agreement_chance(shares: np.ndarray, jain: np.ndarray, kernel_seeds: int, *,
                     share_points: float, jain_tolerance: float,
                     draws: int = DRAWS, seed: int = 0) -> float:
    """The chance that a pretend kernel of ``kernel_seeds`` runs, drawn without
    replacement from these runs, agrees with the mean of the runs left over.
    NaN when there are not at least two runs more than the kernel's."""
    runs = len(jain)
    if kernel_seeds < 1 or runs < kernel_seeds + 2:
        return float("nan")
    rng = np.random.default_rng(seed)
    order = rng.permuted(np.tile(np.arange(runs), (draws, 1)), axis=1)
    kernel, rest = order[:, :kernel_seeds], order[:, kernel_seeds:]
    share_gap = np.abs(shares[kernel].mean(axis=1) - shares[rest].mean(axis=1)).max(axis=1)
    j_gap = np.abs(jain[kernel].mean(axis=1) - jain[rest].mean(axis=1))
    return float(np.mean((share_gap <= share_points) & (j_gap <= jain_tolerance)))


def seeds_for(shares: np.ndarray, jain: np.ndarray, target: float, *, share_points: float,
              jain_tolerance: float, step: int = 3, most: int = 30) -> int | None:
    """The fewest kernel seeds (a multiple of ``step``, as the grid adds them) with
    which a kernel-like simulator would agree at least ``target`` of the time, or
    None if ``most`` are not enough (or there are too few runs to tell)."""
    for n in range(step, most + 1, step):
        chance = agreement_chance(shares, jain, n, share_points=share_points, jain_tolerance=jain_tolerance)
        if np.isnan(chance):
            return None
        if chance >= target:
            return n
    return None
