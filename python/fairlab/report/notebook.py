"""Rich notebook displays (``_repr_html_``) of Trace, Analysis and campaign results:
a few facts and small tables, never the raw arrays."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pandas as pd

from .format import fmt_num, fmt_pct, fmt_rate, fmt_seconds
from .templating import render

if TYPE_CHECKING:
    from ..analysis import Analysis
    from ..campaign.aggregate import CampaignResults
    from ..trace import Trace

#: Tables longer than this show their head and tail only.
MAX_ROWS = 12


def _table(header: list[str], rows: list[list[str]], title: str = "", flags: list[bool] | None = None) -> dict[str, Any]:
    if len(rows) > MAX_ROWS:
        half = MAX_ROWS // 2
        gap = [f"… {len(rows) - 2 * half} more rows"] + [""] * (len(header) - 1)
        rows = rows[:half] + [gap] + rows[-half:]
        flags = None if flags is None else flags[:half] + [False] + flags[-half:]
    return {"title": title, "header": header, "rows": rows, "flags": flags}


def _source(meta: dict[str, Any]) -> str:
    tool = str(meta.get("tool") or meta.get("backend") or "unknown")
    version = str(meta.get("tool_version") or "")
    # iperf3 states its version as "iperf 3.12": do not print the tool's name twice
    return f"{tool} {version}".strip() if version and not version.startswith(tool.rstrip("0123456789")) else (version or tool)


def trace_html(trace: Trace) -> str:
    """A Trace as facts (runs, duration, interval, source) and its flow table."""
    s = trace.samples
    means = s.groupby("flow")["throughput_bps"].mean()
    counts = s.groupby("flow").size()
    rows = []
    for _, f in trace.flows.iterrows():
        fid = int(f["flow"])
        rows.append([
            str(fid),
            str(f["label"]),
            "—" if pd.isna(f["cca"]) else str(f["cca"]),
            fmt_seconds(None if pd.isna(f["rtt_s"]) else float(f["rtt_s"])),
            fmt_seconds(None if pd.isna(f["start_s"]) else float(f["start_s"])),
            str(int(counts.get(fid, 0))),
            fmt_rate(None if fid not in means.index else float(means[fid])),
        ])
    meta = trace.meta
    span = f"{float(s['t'].min()):.4g}–{float(s['t'].max()):.4g} s" if len(s) else "no samples"
    facts = [
        f"{len(trace.flows)} flows, {len(s)} samples, runs {trace.runs}, t = {span}",
        "source: " + _source(meta),
        "router-side samples (queue, drops, marks): " + ("yes" if trace.bottleneck is not None else "no"),
    ]
    table = _table(["flow", "label", "cca", "RTT", "start", "samples", "mean throughput (all samples)"], rows)
    return render("notebook.html.j2", title="fairlab Trace", facts=facts, tables=[table], notes=list(meta.get("notes", [])))


def analysis_html(a: Analysis) -> str:
    """An Analysis as its headline numbers and its per-flow table."""
    facts = [
        f"run {a.run}, window {a.window[0]:g}–{a.window[1]:g} s, {len(a.flows)} flows",
        f"Jain's index: mean of J(t) {fmt_num(a.jain.mean_jt, 3)}, J of mean throughputs {fmt_num(a.jain.of_means, 3)}"
        + (f", J of end-of-test summaries {fmt_num(a.end_summary_jain, 3)}" if a.end_summary_jain is not None else ""),
    ]
    if a.nru is not None:
        facts.append(f"NRU tuple ⟨U_N+, U_N−, S_N⟩ = {a.nru.tuple_str()}, Case {a.nru.case or '—'}")
    if a.harm is not None:
        facts.append(f"throughput harm: mean {fmt_num(a.harm.mean, 3)}, max {fmt_num(a.harm.max, 3)}")
    df = a.to_pandas()
    header = ["flow", "label", "cca", "mean throughput", "share", "samples", "retransmits", "mean sRTT"]
    extra = [c for c in ("nru_u_db", "t_convergence_s", "harm") if c in df.columns]
    names = {"nru_u_db": "U_n (dB)", "t_convergence_s": "T_U", "harm": "harm"}
    header += [names[c] for c in extra]
    rows = []
    for fid, r in df.iterrows():
        row = [
            str(fid),
            str(r["label"]),
            "—" if r["cca"] is None or pd.isna(r["cca"]) else str(r["cca"]),
            fmt_rate(None if pd.isna(r["mean_bps"]) else float(r["mean_bps"])),
            fmt_pct(None if pd.isna(r["share"]) else float(r["share"]), 1),
            str(r["samples"]),
            "—" if pd.isna(r["retransmits"]) else str(int(r["retransmits"])),
            fmt_seconds(None if pd.isna(r["mean_srtt_s"]) else float(r["mean_srtt_s"])),
        ]
        for c in extra:
            v = r[c]
            row.append("—" if v is None or pd.isna(v) else (fmt_seconds(float(v)) if c == "t_convergence_s" else fmt_num(float(v), 2)))
        rows.append(row)
    return render("notebook.html.j2", title="fairlab Analysis", facts=facts, tables=[_table(header, rows)], notes=list(a.notes))


def campaign_html(results: CampaignResults) -> str:
    """Campaign results: one row per condition (Jain both ways, utilisation, runs)."""
    df = results.to_pandas()
    rows = [
        [
            str(r["condition_label"]),
            str(int(r["runs"])),
            fmt_num(r["jain_mean_jt"], 3),
            fmt_num(r["jain_of_means"], 3),
            fmt_pct(r["utilisation"]),
        ]
        for _, r in df.iterrows()
    ]
    flags = [bool(u is not None and u < results.low_utilisation) for u in df["utilisation"]]
    facts = [f"{results.name}: {len(df)} conditions, backend {results.backend}", f"rows shaded: link utilisation below {fmt_pct(results.low_utilisation)}"]
    table = _table(["condition", "runs", "mean of J(t)", "J of means", "utilisation"], rows, flags=flags)
    return render("notebook.html.j2", title="fairlab campaign results", facts=facts, tables=[table], notes=[])
