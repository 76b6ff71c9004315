"""Reduce a campaign's runs to per-condition results: the numbers the papers tabulate.

For each main condition: per-flow mean throughput over runs, Jain's index (both
variants) with mean, standard deviation, coefficient of variation and 95% CI over runs
(seed 001 Table III, seed 000 Table V); with `[analysis] nru = true`, NRU tuples
averaged over runs and the Case of the averaged tuple (seed 000 Table VI), and
convergence times (Table VII); with `harm = true`, harm against the solo runs.

Calibration (seed 000 §V-A, Eq. 14): the expected throughput of a flow using control
P is the mean, over the calibration runs of that condition with every flow using P,
of all those flows' mean throughputs in the analysis window — "the mean of the two
values (Flows 1 and 2) in Table III".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..analysis import analyze
from ..ingest import load as ingest_load
from ..metrics.nru import classify_case, format_tuple
from ..metrics.stats import RunStats, run_stats
from ..scenario import Scenario
from ..trace import Trace
from .plan import CALIBRATION, MAIN, SOLO, Campaign, expand
from .store import Store


@dataclass
class FlowResult:
    label: str
    cca: str
    rtt_s: float
    mean_bps: RunStats


@dataclass
class ConditionResult:
    """One sweep point, over its runs."""

    condition: str
    label: str
    point: dict[str, Any]
    runs: list[str]  # run keys, by run index
    flows: list[FlowResult]
    jain_mean_jt: RunStats
    jain_of_means: RunStats
    jain_cv: float | None  # CV of mean-of-J(t) over runs (seed 001 Table III's "CV")
    expected_bps: list[float] | None = None
    nru_u_plus: RunStats | None = None
    nru_u_minus: RunStats | None = None
    nru_u_mean: RunStats | None = None
    nru_s_system: RunStats | None = None
    nru_case: str | None = None
    nru_tuple_text: str | None = None
    t_convergence: RunStats | None = None
    n_converged: int = 0
    harm_mean: RunStats | None = None
    harm_per_flow: list[RunStats] = field(default_factory=list)
    missing_runs: int = 0
    #: run key -> that run's own numbers (the catalog's per-run NRU and harm columns)
    per_run: dict[str, dict[str, Any]] = field(default_factory=dict)


def _mean_of_flows(trace: Trace) -> list[float]:
    return [f["mean_bps"] for f in trace.meta["summary"]["flows"]]


def _window_s(model: Scenario) -> tuple[float, float] | None:
    return None if model.window is None else (model.window[0] / 1e9, model.window[1] / 1e9)


def campaign_of(store: Store) -> Campaign:
    """Re-expand the campaign recorded in the store's manifest. Not checked against
    today's engine: its runs have happened (or failed) already, and a range
    tightened since must not make the finished ones unreportable."""
    m = store.manifest()
    doc = {**m["base"], **({"sweep": {**m["sweep"], "mode": m["mode"]}} if m["sweep"] else {})}
    return expand(doc, source=str(store.root / "campaign.json"), backend=m["backend"], check=False)


def _entry_of_expanded(model: Scenario) -> list[int]:
    out: list[int] = []
    for i, f in enumerate(model.flows):
        out += [i] * f.count
    return out


def aggregate(store: Store, campaign: Campaign | None = None, *, cache: dict[str, Trace] | None = None) -> list[ConditionResult]:
    """Per-condition results for every main condition of the campaign in ``store``
    (``cache``: run key -> Trace, shared with a caller that reads the runs too)."""
    camp = campaign or campaign_of(store)
    done = store.done_keys()
    tasks_by_cond: dict[str, list] = {}
    for t in camp.tasks:
        tasks_by_cond.setdefault(t.condition, []).append(t)

    cache = {} if cache is None else cache

    def load(key: str) -> Trace:
        if key not in cache:
            cache[key] = store.load(key)
        return cache[key]

    def runs_of(keys: list[str]) -> list[Trace]:
        return [load(k) for k in keys if k in done]

    results: list[ConditionResult] = []
    for cond in camp.conditions:
        tasks = sorted(tasks_by_cond[cond], key=lambda t: t.run_index)
        model = tasks[0].model()
        window = _window_s(model)
        done_tasks = [t for t in tasks if t.key in done]
        traces = [load(t.key) for t in done_tasks]
        missing = len(tasks) - len(traces)
        links = camp.links.get(cond, {"calibration": {}, "solo": {}})
        labels = [lbl for lbl, _ in model.expanded_flows()]
        ccas = [f.cca for _, f in model.expanded_flows()]
        rtts = [f.rtt / 1e9 for _, f in model.expanded_flows()]
        entry = _entry_of_expanded(model)

        expected = None
        if model.analysis.nru and links["calibration"]:
            per_cca: dict[str, float] = {}
            for cca, cal_keys in links["calibration"].items():
                vals = [v for tr in runs_of(cal_keys) for v in _mean_of_flows(tr) if v is not None]
                if vals:
                    per_cca[cca] = float(np.mean(vals))
            if all(c in per_cca and per_cca[c] > 0 for c in ccas):
                expected = [per_cca[c] for c in ccas]
        solo = None
        if model.analysis.harm and links["solo"]:
            solo_means = {}
            for i, solo_keys in links["solo"].items():
                vals = [_mean_of_flows(tr)[0] for tr in runs_of(solo_keys)]
                vals = [v for v in vals if v is not None]
                if vals:
                    solo_means[int(i)] = float(np.mean(vals))
            if all(e in solo_means for e in entry):
                solo = [solo_means[e] for e in entry]

        # measured calibration / solo runs named in [analysis] (the plan then derives none)
        measured_cal = ingest_load(model.analysis.calibration_files) if model.analysis.nru and model.analysis.calibration_files else None
        measured_base = ingest_load(model.analysis.baseline_files) if model.analysis.harm and model.analysis.baseline_files else None
        jt, jm, flow_means = [], [], [[] for _ in labels]
        res_expected = expected
        up, um, umean, ss, tu, harm_mean = [], [], [], [], [], []
        harm_flow: list[list[float | None]] = [[] for _ in labels]
        n_conv = 0
        epoch = None if model.analysis.epoch is None else model.analysis.epoch / 1e9
        per_run: dict[str, dict[str, Any]] = {}
        for task, tr in zip(done_tasks, traces):
            a = analyze(
                tr,
                window=window,
                expected_bps=expected,
                solo_bps=solo,
                calibration=measured_cal if expected is None else None,
                baseline=measured_base if solo is None else None,
                epoch=epoch,
                u_c=model.analysis.uc,
                k=model.analysis.hold,
            )
            if a.expected_bps is not None and res_expected is None:
                res_expected = list(a.expected_bps)
            jt.append(a.jain.mean_jt)
            jm.append(a.jain.of_means)
            for i, f in enumerate(a.flows):
                flow_means[i].append(f.mean_bps)
            if a.nru is not None:
                up.append(a.nru.u_plus)
                um.append(a.nru.u_minus)
                umean.append(a.nru.u_mean)
                ss.append(a.nru.s_system)
                if epoch is not None:
                    tu.append(a.nru.t_convergence)
                    n_conv += a.nru.t_convergence is not None
            if a.harm is not None:
                harm_mean.append(a.harm.mean)
                for i, h in enumerate(a.harm.per_flow):
                    harm_flow[i].append(h)
            per_run[task.key] = {
                "jain_mean_jt": a.jain.mean_jt,
                "jain_of_means": a.jain.of_means,
                "nru_u_plus": a.nru.u_plus if a.nru else None,
                "nru_u_minus": a.nru.u_minus if a.nru else None,
                "nru_u_mean": a.nru.u_mean if a.nru else None,
                "nru_s_system": a.nru.s_system if a.nru else None,
                "nru_case": a.nru.case if a.nru else None,
                "nru_t_convergence_s": a.nru.t_convergence if a.nru and epoch is not None else None,
                "harm_mean": a.harm.mean if a.harm else None,
                "flows": [
                    {
                        "expected_bps": a.expected_bps[i] if a.expected_bps else None,
                        "nru_u_db": a.nru.flows[i].u if a.nru else None,
                        "harm": a.harm.per_flow[i] if a.harm else None,
                    }
                    for i in range(len(a.flows))
                ],
            }
        jt_stats = run_stats(jt)
        cv = None
        if jt_stats.mean and jt_stats.std is not None:
            cv = jt_stats.std / jt_stats.mean
        res = ConditionResult(
            condition=cond,
            label=tasks[0].label,
            point=tasks[0].point,
            runs=[t.key for t in tasks if t.key in done],
            flows=[FlowResult(labels[i], ccas[i], rtts[i], run_stats(flow_means[i])) for i in range(len(labels))],
            jain_mean_jt=jt_stats,
            jain_of_means=run_stats(jm),
            jain_cv=cv,
            expected_bps=res_expected,
            missing_runs=missing,
            per_run=per_run,
        )
        if up and traces:
            res.nru_u_plus, res.nru_u_minus = run_stats(up), run_stats(um)
            res.nru_u_mean, res.nru_s_system = run_stats(umean), run_stats(ss)
            # The tuple of means over runs; a side empty in some runs is averaged over
            # the runs where it exists (seed 000 Table VI prints "—" only when no run has it).
            res.nru_case = classify_case(res.nru_u_plus.mean, res.nru_u_minus.mean)
            res.nru_tuple_text = format_tuple(res.nru_u_plus.mean, res.nru_u_minus.mean, res.nru_s_system.mean)
            if epoch is not None:
                res.t_convergence = run_stats(tu)
                res.n_converged = n_conv
        if harm_mean and traces:
            res.harm_mean = run_stats(harm_mean)
            res.harm_per_flow = [run_stats(h) for h in harm_flow]
        results.append(res)
    return results


def fmt_stat(s: RunStats | None, scale: float = 1.0, dp: int = 2) -> str:
    """"mean ± std" (or "mean" for one run, "—" for none)."""
    if s is None or s.mean is None:
        return "—"
    if s.std is None:
        return f"{s.mean / scale:.{dp}f}"
    return f"{s.mean / scale:.{dp}f} ± {s.std / scale:.{dp}f}"


__all__ = ["ConditionResult", "FlowResult", "aggregate", "campaign_of", "fmt_stat", "MAIN", "CALIBRATION", "SOLO"]
