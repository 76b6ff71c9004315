"""One analysis of a Trace: what `fairlab analyze` prints and `--json` emits.

This module only orchestrates: it windows the trace, builds the aligned matrix
(`Trace.matrix`) and calls `fairlab.metrics`. The JSON produced by
`Analysis.to_dict` is a documented, stable interface (docs/cli.md).

Rules worth knowing (also in docs/cli.md):
- Time is seconds from the earliest flow's start; the window keeps the samples whose
  interval lies inside it (``start < t <= end``).
- J(t) is computed over the flows present at t; when the trace has two or more flows,
  rows where only one flow is present are left out (J = 1 there is trivial) and
  counted.
- NRU weights come from calibration traces (seed 000 Eq. 14): each analysed flow's
  expected throughput is the mean throughput, over the same window, of the
  calibration flows with the same congestion control; when ccas are unknown the
  calibration flows are matched by position.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .metrics.harm import HarmResult, harm_summary
from .metrics.jain import JainResult, jain_index, jain_over_time, jain_summary
from .metrics.nru import U_C_DEFAULT, NruSystem, convergence_time, nru_over_time, summarise_nru
from .trace import Trace

#: Version of the `--json` document. Bump on any incompatible change.
JSON_SCHEMA_VERSION = 1


class AnalysisError(ValueError):
    """The analysis cannot be done as asked; the message says why and what to change."""


@dataclass(frozen=True)
class FlowSummary:
    """One flow over the window."""

    flow: int
    label: str
    cca: str | None
    mean_bps: float | None
    samples: int
    retransmits: int | None
    mean_srtt_s: float | None
    start_s: float | None


@dataclass(frozen=True)
class Analysis:
    """Everything `fairlab analyze` reports for one run of a trace."""

    window: tuple[float, float]
    run: int
    flows: tuple[FlowSummary, ...]
    jain: JainResult
    jain_series: tuple[tuple[float, float], ...]  # (t, J(t)) rows used
    end_summary_jain: float | None
    nru: NruSystem | None = None
    flow_convergence: tuple[float | None, ...] | None = None
    expected_bps: tuple[float, ...] | None = None
    harm: HarmResult | None = None
    latency_harm: HarmResult | None = None
    notes: tuple[str, ...] = field(default=())

    # ------------------------------------------------------------------ notebooks
    def to_pandas(self) -> pd.DataFrame:
        """One row per flow, indexed by flow id: label, cca, start_s, mean_bps,
        share (of the flows' summed mean), samples, retransmits, mean_srtt_s, and
        when computed expected_bps, nru_u_db, nru_sigma_db, nru_stability,
        t_convergence_s, harm and latency_harm. System-wide numbers (both Jain
        indices, the NRU tuple and Case, the window) are in ``.attrs``.

        >>> import fairlab
        >>> a = fairlab.analyze(fairlab.load("examples/recordings/iperf3_P8_client.json"))  # doctest: +SKIP
        >>> a.to_pandas()[["label", "mean_bps", "share"]]                               # doctest: +SKIP
        """
        rows = [
            {
                "flow": f.flow,
                "label": f.label,
                "cca": f.cca,
                "start_s": f.start_s,
                "mean_bps": f.mean_bps,
                "samples": f.samples,
                "retransmits": f.retransmits,
                "mean_srtt_s": f.mean_srtt_s,
            }
            for f in self.flows
        ]
        df = pd.DataFrame(rows).set_index("flow")
        df["retransmits"] = df["retransmits"].astype("Int64")
        df["mean_bps"] = df["mean_bps"].astype(float)
        total = df["mean_bps"].sum(min_count=1)
        df.insert(df.columns.get_loc("mean_bps") + 1, "share", df["mean_bps"] / total if total else np.nan)
        if self.expected_bps is not None:
            df["expected_bps"] = list(self.expected_bps)
        if self.nru is not None:
            df["nru_u_db"] = [fl.u for fl in self.nru.flows]
            df["nru_sigma_db"] = [fl.sigma for fl in self.nru.flows]
            df["nru_stability"] = [fl.stability for fl in self.nru.flows]
        if self.flow_convergence is not None:
            df["t_convergence_s"] = list(self.flow_convergence)
        if self.harm is not None:
            df["harm"] = list(self.harm.per_flow)
        if self.latency_harm is not None:
            df["latency_harm"] = list(self.latency_harm.per_flow)
        df = df.apply(lambda c: c.astype(float) if c.dtype == object and c.map(lambda v: v is None or isinstance(v, (int, float))).all() else c)
        df.attrs.update(
            window=self.window,
            run=self.run,
            jain_mean_jt=self.jain.mean_jt,
            jain_of_means=self.jain.of_means,
            end_summary_jain=self.end_summary_jain,
            **({"nru_tuple": self.nru.tuple_str(), "nru_case": self.nru.case} if self.nru is not None else {}),
        )
        return df

    def jain_to_pandas(self) -> pd.Series:
        """J(t) over the window as a Series indexed by time (s) — the rows the mean
        of J(t) averages."""
        t = [r[0] for r in self.jain_series]
        return pd.Series([r[1] for r in self.jain_series], index=pd.Index(t, name="t", dtype=float), name="jain", dtype=float)

    def __repr__(self) -> str:
        def num(v: float | None) -> str:
            return "—" if v is None else f"{v:.3f}"

        parts = [
            f"run {self.run}",
            f"window {self.window[0]:g}–{self.window[1]:g} s",
            f"{len(self.flows)} flow{'s' if len(self.flows) != 1 else ''}",
            f"mean J(t) {num(self.jain.mean_jt)}",
            f"J of means {num(self.jain.of_means)}",
        ]
        if self.nru is not None:
            parts.append(f"NRU {self.nru.tuple_str()} Case {self.nru.case or '—'}")
        if self.harm is not None:
            parts.append(f"harm mean {num(self.harm.mean)}")
        return f"Analysis({', '.join(parts)})"

    def _repr_html_(self) -> str:
        from .report.notebook import analysis_html

        return analysis_html(self)

    def to_dict(self) -> dict[str, Any]:
        """The stable `--json` document (docs/cli.md). No NaN: None for no value."""
        doc: dict[str, Any] = {
            "schema": JSON_SCHEMA_VERSION,
            "window": [self.window[0], self.window[1]],
            "run": self.run,
            "flows": [
                {
                    "flow": f.flow,
                    "label": f.label,
                    "cca": f.cca,
                    "mean_bps": f.mean_bps,
                    "samples": f.samples,
                    "retransmits": f.retransmits,
                    "mean_srtt_s": f.mean_srtt_s,
                }
                for f in self.flows
            ],
            "jain": {
                "mean_jt": self.jain.mean_jt,
                "of_means": self.jain.of_means,
                "end_summary": self.end_summary_jain,
                "samples": self.jain.n_samples,
                "rows_omitted": self.jain.n_rows_omitted,
                "min_flows": self.jain.min_flows,
            },
            "notes": list(self.notes),
        }
        if self.nru is not None:
            n = self.nru
            doc["nru"] = {
                "tuple": {"u_plus": n.u_plus, "u_minus": n.u_minus, "s_system": n.s_system},
                "tuple_text": n.tuple_str(),
                "u_mean": n.u_mean,
                "case": n.case,
                "epoch_s": n.t_e,
                "u_c_db": n.u_c,
                "k": n.k,
                "t_convergence_s": n.t_convergence,
                "samples_floored": n.n_floored,
                "floor_db": n.floor_db,
                "flows": [
                    {
                        "label": fl.label,
                        "expected_bps": self.expected_bps[i] if self.expected_bps else None,
                        "u_db": fl.u,
                        "sigma_db": fl.sigma,
                        "stability": fl.stability,
                        "t_convergence_s": self.flow_convergence[i] if self.flow_convergence else None,
                        "samples_floored": fl.n_floored,
                    }
                    for i, fl in enumerate(n.flows)
                ],
            }
        if self.harm is not None:
            doc["harm"] = {"throughput": self.harm.to_dict()}
            if self.latency_harm is not None:
                doc["harm"]["latency"] = self.latency_harm.to_dict()
        return doc


def _parse_window(trace: Trace, window: tuple[float | None, float | None] | None) -> tuple[float, float]:
    t = trace.samples["t"]
    if t.empty:
        raise AnalysisError("the trace holds no samples")
    interval = trace.interval
    lo_default = max(0.0, float(t.min()) - interval)
    hi_default = float(t.max())
    lo, hi = (None, None) if window is None else window
    lo = lo_default if lo is None else float(lo)
    hi = hi_default if hi is None else float(hi)
    if hi <= lo:
        raise AnalysisError(f"window {lo:g}:{hi:g} is empty; the end must be after the start")
    if lo >= hi_default:
        raise AnalysisError(f"window starts at {lo:g} s but the trace ends at {hi_default:g} s")
    return lo, hi


def _match_expected(
    trace: Trace, calibration: Trace, window: tuple[float, float], column: str = "throughput_bps"
) -> tuple[np.ndarray, str]:
    """Expected value of ``column`` per analysed flow from calibration (or solo) data
    (seed 000 §V-A): the mean over the window of the matching reference flows."""
    cal = calibration.window(*window)
    flow_ids = cal.flows["flow"].astype(int).tolist()
    means = cal.samples.groupby("flow")[column].mean().reindex(flow_ids)
    if means.isna().all():
        raise AnalysisError(f"the reference data has no {column} samples in the window {window[0]:g}:{window[1]:g} s")
    cal_cca = dict(zip(cal.flows["flow"].astype(int), cal.flows["cca"]))
    ccas = [None if pd.isna(c) else str(c) for c in trace.flows["cca"]]
    by_cca: dict[str, list[float]] = {}
    for fid, m in means.items():
        c = cal_cca.get(int(fid))
        if not pd.isna(m) and c is not None and not pd.isna(c):
            by_cca.setdefault(str(c), []).append(float(m))
    if ccas and all(c is not None and c in by_cca for c in ccas):
        return np.array([np.mean(by_cca[c]) for c in ccas]), "by congestion control (mean of the calibration flows of the same cca)"
    if len(means) == len(trace.flows):
        if means.isna().any():
            raise AnalysisError("a calibration flow has no samples in the window, so its weight is undefined")
        return means.to_numpy(dtype=float), "by position (calibration flow n for analysed flow n)"
    missing = sorted({c for c in ccas if c is None or c not in by_cca}, key=str)
    raise AnalysisError(
        f"cannot match calibration flows to the analysed flows: calibration has ccas {sorted(by_cca)} "
        f"but the analysed flows need {missing}; give one calibration flow per analysed flow (matched by position) "
        "or calibration runs of every congestion control analysed"
    )


def analyze(
    trace: Trace,
    *,
    window: tuple[float | None, float | None] | None = None,
    run: int | None = None,
    calibration: Trace | None = None,
    baseline: Trace | None = None,
    expected_bps: Sequence[float] | np.ndarray | None = None,
    solo_bps: Sequence[float] | np.ndarray | None = None,
    epoch: float | None = None,
    u_c: float = U_C_DEFAULT,
    k: int = 1,
) -> Analysis:
    """Analyse one run of ``trace`` over ``window`` (seconds, either side may be None).

    With ``calibration`` the NRU family is computed (weights by Bhatti et al. 2009,
    Eq. 14); with ``epoch`` also convergence times T_U (Eqs. 11-12) from that epoch
    with threshold ``u_c`` held for ``k`` samples; with ``baseline`` (solo runs) harm. A campaign that
    has already reduced its calibration/solo runs to one number per flow passes
    ``expected_bps`` / ``solo_bps`` (bit/s, one per flow) instead.

    >>> import fairlab
    >>> trace = fairlab.load("examples/recordings/iperf3_P8_client.json")
    >>> result = fairlab.analyze(trace, window=(2, 20))
    >>> result.to_pandas()[["label", "mean_bps", "share"]]  # doctest: +SKIP
    """
    runs = trace.runs
    if run is None:
        run = runs[0] if runs else 0
    elif run not in runs:
        raise AnalysisError(f"run {run} is not in this trace; runs: {runs}")
    lo, hi = _parse_window(trace, window)
    w = trace.window(lo, hi)
    m = w.matrix(run=run) if len(runs) > 1 else w.matrix()
    if m.empty:
        raise AnalysisError(f"no samples in the window {lo:g}:{hi:g} s")
    notes = list(trace.meta.get("notes", []))
    labels = [trace.labels[f] for f in m.columns]
    x = m.to_numpy(dtype=float)
    n_flows = x.shape[1]
    min_flows = 2 if n_flows >= 2 else 1
    jain = jain_summary(x, min_flows=min_flows)
    series = jain_over_time(x, min_flows=min_flows)
    if jain.n_rows_omitted:
        notes.append(f"J(t) leaves out {jain.n_rows_omitted} sample time(s) where fewer than {min_flows} flows were present")
    times = m.index.to_numpy(dtype=float)

    s = w.samples[w.samples["run"] == run]
    flows = []
    for fid, label in zip(m.columns, labels):
        fs = s[s["flow"] == fid]
        row = trace.flows[trace.flows["flow"] == fid].iloc[0]
        rex = fs["retransmits"].dropna()
        srtt = fs["srtt_s"].dropna()
        flows.append(
            FlowSummary(
                flow=int(fid),
                label=label,
                cca=None if pd.isna(row["cca"]) else str(row["cca"]),
                mean_bps=float(fs["throughput_bps"].mean()) if len(fs) else None,
                samples=int(len(fs)),
                retransmits=int(rex.sum()) if len(rex) else None,
                mean_srtt_s=float(srtt.mean()) if len(srtt) else None,
                start_s=None if pd.isna(row["start_s"]) else float(row["start_s"]),
            )
        )

    end_jain = None
    if "end_receiver_bps" in trace.flows.columns:
        end = pd.to_numeric(trace.flows["end_receiver_bps"], errors="coerce").to_numpy(dtype=float)
        if len(end) and np.isfinite(end).all():
            end_jain = jain_index(end)

    nru = flow_tu = expected = None
    if calibration is not None or expected_bps is not None:
        if expected_bps is not None:
            exp, how = np.asarray(expected_bps, dtype=float), "from the campaign's calibration runs"
            if exp.shape != (n_flows,):
                raise AnalysisError(f"expected_bps has {exp.size} values for {n_flows} flows")
        else:
            exp, how = _match_expected(trace, calibration, (lo, hi))
        if (exp <= 0).any():
            raise AnalysisError("a calibration flow's mean throughput is zero, so its weight 1/mean is undefined")
        notes.append(f"NRU weights w_n = 1/mean calibration throughput, matched {how}")
        expected = tuple(float(e) for e in exp)
        u, floored = nru_over_time(x, 1.0 / exp, return_floored=True)
        nru = summarise_nru(u, n_floored=floored, labels=labels, times=times, t_e=epoch, u_c=u_c, k=k)
        if epoch is not None:
            flow_tu = tuple(convergence_time(u, times=times, t_e=epoch, u_c=u_c, flows=i, k=k) for i in range(n_flows))
        if nru.n_floored:
            notes.append(f"{nru.n_floored} zero-throughput sample(s) floored at {nru.floor_db:g} dB in U_n(t)")

    harm = latency = None
    if baseline is not None or solo_bps is not None:
        if solo_bps is not None:
            solo, how = np.asarray(solo_bps, dtype=float), "from the campaign's solo runs"
        else:
            solo, how = _match_expected(trace, baseline, (lo, hi))
        notes.append(f"harm baselines (solo runs) matched {how}")
        with_ = np.array([f.mean_bps if f.mean_bps is not None else np.nan for f in flows])
        harm = harm_summary(solo, with_, direction="more_is_better")
        with_rtt = np.array([f.mean_srtt_s if f.mean_srtt_s is not None else np.nan for f in flows])
        if baseline is not None and np.isfinite(with_rtt).all() and baseline.samples["srtt_s"].notna().any():
            try:
                solo_rtt, _ = _match_expected(trace, baseline, (lo, hi), column="srtt_s")
            except AnalysisError as exc:
                notes.append(f"no latency harm: {exc}")
            else:
                latency = harm_summary(solo_rtt, with_rtt, direction="less_is_better")
    return Analysis(
        window=(lo, hi),
        run=run,
        flows=tuple(flows),
        jain=jain,
        jain_series=tuple(zip(times[series.rows].tolist(), series.values.tolist())),
        end_summary_jain=end_jain,
        nru=nru,
        flow_convergence=flow_tu,
        expected_bps=expected,
        harm=harm,
        latency_harm=latency,
        notes=tuple(notes),
    )
