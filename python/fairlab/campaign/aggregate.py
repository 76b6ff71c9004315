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
import pandas as pd

from ..analysis import analyze
from ..ingest import load as ingest_load
from ..metrics.nru import classify_case, format_tuple
from ..metrics.stats import RunStats, run_stats
from ..scenario import Scenario
from ..trace import Trace
from .plan import CALIBRATION, CRN_KEY, MAIN, SOLO, Campaign, condition_label, expand
from .run_numbers import RunNumbers, from_summary
from .store import Store, manifest_crn
from .stored_run import StoredRun


#: Below this fraction of the link rate a condition's flows did not fill the link, so
#: their shares say little about fairness at the bottleneck; reports flag it.
LOW_UTILISATION = 0.8


@dataclass
class FlowResult:
    label: str
    cca: str
    rtt_s: float
    mean_bps: RunStats
    start_s: float = 0.0


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
    #: the condition's scenario as run (first run; runs differ only in their seed)
    scenario: Scenario | None = field(default=None, repr=False)
    seeds: list[int] = field(default_factory=list)
    #: per run (by run index): the flows' summed mean throughput over the window / link rate
    utilisation_per_run: list[float] = field(default_factory=list)
    utilisation: RunStats | None = None
    #: per run: engine / kernel facts of the backend that made it (see `backend_of`)
    backend_versions: list[str] = field(default_factory=list)
    #: run key -> that run's own numbers (the catalog's per-run NRU and harm columns)
    per_run: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def rate_bps(self) -> float | None:
        """The bottleneck rate of this condition."""
        return None if self.scenario is None else float(self.scenario.bottleneck.rate)

    def __repr__(self) -> str:
        j = self.jain_mean_jt.mean
        u = None if self.utilisation is None else self.utilisation.mean
        return (
            f"ConditionResult({condition_label(self.point)!r}, {len(self.runs)} run(s), {len(self.flows)} flows, "
            f"mean J(t) {'—' if j is None else f'{j:.3f}'}, utilisation {'—' if u is None else f'{100 * u:.0f}%'})"
        )


class CampaignResults(list):
    """`aggregate`'s answer: a list of `ConditionResult` (one per main condition, in
    sweep order) with a table view for pandas and a notebook display.

    >>> import fairlab
    >>> from fairlab.campaign.aggregate import aggregate_dir
    >>> results = aggregate_dir("out/bhatti2008-dccp-quick")   # doctest: +SKIP
    >>> results.to_pandas()[["condition_label", "jain_mean_jt", "utilisation"]]  # doctest: +SKIP
    """

    def __init__(self, items: list[ConditionResult], *, name: str = "", backend: str = "", low_utilisation: float = LOW_UTILISATION):
        super().__init__(items)
        self.name = name
        self.backend = backend
        self.low_utilisation = low_utilisation

    def to_pandas(self, *, per: str = "condition") -> pd.DataFrame:
        """``per="condition"``: one row per condition with the sweep point's values as
        columns, runs, both Jain indices (mean and std over runs), utilisation and, when
        computed, the NRU Case and mean harm. ``per="flow"``: one row per condition and
        flow with its mean throughput (mean and std over runs)."""
        rows: list[dict[str, Any]] = []
        for r in self:
            base: dict[str, Any] = {"condition": r.condition, "condition_label": condition_label(r.point), **{f"sweep:{k}": v for k, v in r.point.items()}}
            if per == "flow":
                for i, f in enumerate(r.flows):
                    rows.append({**base, "flow": i, "label": f.label, "cca": f.cca, "rtt_s": f.rtt_s, "start_s": f.start_s,
                                 "mean_bps": f.mean_bps.mean, "std_bps": f.mean_bps.std, "runs": f.mean_bps.n})
                continue
            if per != "condition":
                raise ValueError(f"per must be 'condition' or 'flow', not {per!r}")
            rows.append({
                **base,
                "runs": len(r.runs),
                "flows": len(r.flows),
                "rate_bps": r.rate_bps,
                "jain_mean_jt": r.jain_mean_jt.mean,
                "jain_mean_jt_std": r.jain_mean_jt.std,
                "jain_of_means": r.jain_of_means.mean,
                "jain_of_means_std": r.jain_of_means.std,
                "utilisation": None if r.utilisation is None else r.utilisation.mean,
                "nru_case": r.nru_case,
                "harm_mean": None if r.harm_mean is None else r.harm_mean.mean,
            })
        return pd.DataFrame(rows)

    def __repr__(self) -> str:
        return f"CampaignResults({self.name!r}, {len(self)} conditions, backend {self.backend!r})"

    def _repr_html_(self) -> str:
        from ..report.notebook import campaign_html

        return campaign_html(self)


def backend_of(trace: Trace) -> str:
    """What made a run, as a reader needs it to judge the numbers: the simulator and
    its engine build, or the live path with its kernel and tool versions."""
    return backend_of_meta(trace.meta)


def backend_of_meta(m: dict[str, Any]) -> str:
    """`backend_of` from a run's metadata alone (run.json; no trace needed)."""
    if m.get("backend") == "live":
        em = (m.get("emulation") or {}).get("path", "?")
        tools = ", ".join(f"{k} {v}" for k, v in (m.get("tool_versions") or {}).items() if v and k != "pyroute2")
        return f"live ({em} path), Linux {m.get('kernel', '?')}" + (f", {tools}" if tools else "")
    if m.get("backend") == "vm":
        qemu = (m.get("vm") or {}).get("qemu")
        return f"vm, Linux {m.get('kernel', '?')} in QEMU" + (f" {qemu}" if qemu else "") + (f", {m['tool']}" if m.get("tool") else "")
    # A simulator run's content address includes the engine build's fingerprint, so
    # every run `aggregate` finds was made by the engine build loaded now.
    from .plan import _engine

    engine = m.get("engine") or _engine()
    return f"fairlab simulator {m.get('fairlab_version') or m.get('tool_version') or ''}".strip() + (f", engine {engine}" if engine else "")


def _mean_of_flows(run: StoredRun) -> list[float]:
    """The flows' mean throughputs the worker stored (calibration and solo runs are
    reduced to these; their traces are not read)."""
    return [f["mean_bps"] for f in run.meta["summary"]["flows"]]


def _window_s(model: Scenario) -> tuple[float, float] | None:
    return None if model.window is None else (model.window[0] / 1e9, model.window[1] / 1e9)


def campaign_of(store: Store) -> Campaign:
    """Re-expand the campaign recorded in the store's manifest. Not checked against
    today's engine: its runs have happened (or failed) already, and a range
    tightened since must not make the finished ones unreportable."""
    m = store.manifest()
    sweep = {**m["sweep"], "mode": m["mode"], CRN_KEY: manifest_crn(m)}
    doc = {**m["base"], **({"sweep": sweep} if m["sweep"] else {})}
    return expand(doc, source=str(store.root / "campaign.json"), backend=m["backend"], check=False)


def _entry_of_expanded(model: Scenario) -> list[int]:
    out: list[int] = []
    for i, f in enumerate(model.flows):
        out += [i] * f.count
    return out


def aggregate(store: Store, campaign: Campaign | None = None, *, cache: dict[str, StoredRun] | None = None) -> CampaignResults:
    """Per-condition results for every main condition of the campaign in ``store``
    (``cache``: run key -> `StoredRun`, shared with a caller that reads the runs too).

    Each run's files are read and verified once. A condition without NRU or harm
    takes each run's numbers from the summary its worker stored (`run_numbers`);
    only NRU and harm, which need the calibration and solo runs first, parse the
    trace and analyse it again."""
    camp = campaign or campaign_of(store)
    done = store.done_keys()
    tasks_by_cond: dict[str, list] = {}
    for t in camp.tasks:
        tasks_by_cond.setdefault(t.condition, []).append(t)

    cache = {} if cache is None else cache

    def load(key: str) -> StoredRun:
        if key not in cache:
            cache[key] = store.open_run(key)
        return cache[key]

    def runs_of(keys: list[str]) -> list[StoredRun]:
        return [load(k) for k in keys if k in done]

    results: list[ConditionResult] = []
    for cond in camp.conditions:
        tasks = sorted(tasks_by_cond[cond], key=lambda t: t.run_index)
        model = tasks[0].model()
        window = _window_s(model)
        done_tasks = [t for t in tasks if t.key in done]
        stored = [load(t.key) for t in done_tasks]
        missing = len(tasks) - len(stored)
        links = camp.links.get(cond, {"calibration": {}, "solo": {}})
        labels = [lbl for lbl, _ in model.expanded_flows()]
        ccas = [f.cca for _, f in model.expanded_flows()]
        rtts = [f.rtt / 1e9 for _, f in model.expanded_flows()]
        entry = _entry_of_expanded(model)

        expected = None
        if model.analysis.nru and links["calibration"]:
            per_cca: dict[str, float] = {}
            for cca, cal_keys in links["calibration"].items():
                vals = [v for run in runs_of(cal_keys) for v in _mean_of_flows(run) if v is not None]
                if vals:
                    per_cca[cca] = float(np.mean(vals))
            if all(c in per_cca and per_cca[c] > 0 for c in ccas):
                expected = [per_cca[c] for c in ccas]
        solo = None
        if model.analysis.harm and links["solo"]:
            solo_means = {}
            for i, solo_keys in links["solo"].items():
                vals = [_mean_of_flows(run)[0] for run in runs_of(solo_keys)]
                vals = [v for v in vals if v is not None]
                if vals:
                    solo_means[int(i)] = float(np.mean(vals))
            if all(e in solo_means for e in entry):
                solo = [solo_means[e] for e in entry]

        # measured calibration / solo runs named in [analysis] (the plan then derives none)
        measured_cal = ingest_load(model.analysis.calibration_files) if model.analysis.nru and model.analysis.calibration_files else None
        measured_base = ingest_load(model.analysis.baseline_files) if model.analysis.harm and model.analysis.baseline_files else None
        starts = [f.start / 1e9 for _, f in model.expanded_flows()]
        util: list[float] = []
        jt, jm, flow_means = [], [], [[] for _ in labels]
        res_expected = expected
        up, um, umean, ss, tu, harm_mean = [], [], [], [], [], []
        harm_flow: list[list[float | None]] = [[] for _ in labels]
        n_conv = 0
        epoch = None if model.analysis.epoch is None else model.analysis.epoch / 1e9
        per_run: dict[str, dict[str, Any]] = {}
        # Without NRU weights or harm baselines the worker's stored summary is this analysis.
        plain = expected is None and solo is None and measured_cal is None and measured_base is None
        for task, run in zip(done_tasks, stored):
            a = from_summary(run.meta.get("summary"), window) if plain else None
            if a is None:
                a = RunNumbers.of(analyze(
                    run.trace(),
                    window=window,
                    expected_bps=expected,
                    solo_bps=solo,
                    calibration=measured_cal if expected is None else None,
                    baseline=measured_base if solo is None else None,
                    epoch=epoch,
                    u_c=model.analysis.uc,
                    k=model.analysis.hold,
                ))
            if a.expected_bps is not None and res_expected is None:
                res_expected = list(a.expected_bps)
            jt.append(a.jain_mean_jt)
            jm.append(a.jain_of_means)
            present = [m for m in a.flow_means if m is not None]
            if present:
                util.append(float(sum(present)) / model.bottleneck.rate)
            for i, m in enumerate(a.flow_means):
                flow_means[i].append(m)
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
                "jain_mean_jt": a.jain_mean_jt,
                "jain_of_means": a.jain_of_means,
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
                    for i in range(len(a.flow_means))
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
            flows=[FlowResult(labels[i], ccas[i], rtts[i], run_stats(flow_means[i]), starts[i]) for i in range(len(labels))],
            jain_mean_jt=jt_stats,
            jain_of_means=run_stats(jm),
            jain_cv=cv,
            expected_bps=res_expected,
            missing_runs=missing,
            scenario=model,
            seeds=[t.seed for t in tasks],
            utilisation_per_run=util,
            utilisation=run_stats(util) if util else None,
            backend_versions=sorted({backend_of_meta(run.meta) for run in stored}),
            per_run=per_run,
        )
        if up and stored:
            res.nru_u_plus, res.nru_u_minus = run_stats(up), run_stats(um)
            res.nru_u_mean, res.nru_s_system = run_stats(umean), run_stats(ss)
            # The tuple of means over runs; a side empty in some runs is averaged over
            # the runs where it exists (seed 000 Table VI prints "—" only when no run has it).
            res.nru_case = classify_case(res.nru_u_plus.mean, res.nru_u_minus.mean)
            res.nru_tuple_text = format_tuple(res.nru_u_plus.mean, res.nru_u_minus.mean, res.nru_s_system.mean)
            if epoch is not None:
                res.t_convergence = run_stats(tu)
                res.n_converged = n_conv
        if harm_mean and stored:
            res.harm_mean = run_stats(harm_mean)
            res.harm_per_flow = [run_stats(h) for h in harm_flow]
        results.append(res)
    return CampaignResults(results, name=camp.name, backend=camp.backend)


def aggregate_dir(directory: str | Any) -> CampaignResults:
    """`aggregate` of the campaign stored in ``directory`` (what `fairlab report` reads)."""
    return aggregate(Store(directory))


def fmt_stat(s: RunStats | None, scale: float = 1.0, dp: int = 2) -> str:
    """"mean ± std" (or "mean" for one run, "—" for none)."""
    if s is None or s.mean is None:
        return "—"
    if s.std is None:
        return f"{s.mean / scale:.{dp}f}"
    return f"{s.mean / scale:.{dp}f} ± {s.std / scale:.{dp}f}"


__all__ = ["LOW_UTILISATION", "CampaignResults", "ConditionResult", "FlowResult", "aggregate", "aggregate_dir", "backend_of", "campaign_of", "fmt_stat", "MAIN", "CALIBRATION", "SOLO"]
