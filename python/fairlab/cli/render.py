"""Rich rendering of an `Analysis` for the terminal."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from ..analysis import Analysis
from ..metrics._common import fmt_num
from ..report.citations import cite
from ..report.format import fmt_rate, fmt_rate_pm, rate_unit  # noqa: F401  (the one SI formatter; compare_cmd imports them from here)
from ..scenario import protocol
from ..trace import Trace
from .common import console

CASE_COMMENT = {
    "A": "all flows unfair",
    "B": "some flows fair or better, some unfair",
    "C": "some flows fair, some unfair",
    "D": "all flows fair or better",
    "E": "all flows fair",
}


#: A per-flow table prints every flow up to this many; beyond, the first and last
#: few and a line saying where the rest are (rich needs ~0.5 s per 1,000 rows, and
#: a terminal of 10,000 rows is read by nobody).
MAX_FLOW_ROWS = 40
_HEAD_ROWS, _TAIL_ROWS = 15, 5


def shown_flows(n: int) -> list[int | None]:
    """Indices of the flows a per-flow table prints, in order; None marks where
    the ones left out would be."""
    if n <= MAX_FLOW_ROWS:
        return list(range(n))
    return [*range(_HEAD_ROWS), None, *range(n - _TAIL_ROWS, n)]


def _add_flow_rows(t: Table, n: int, row) -> None:
    """Add ``row(i)`` for each flow shown, and one line for those left out."""
    for i in shown_flows(n):
        if i is None:
            hidden = n - _HEAD_ROWS - _TAIL_ROWS
            t.add_row(f"[dim]… {hidden} more flows (all of them: --json, or the trace file)[/]",
                      *[""] * (len(t.columns) - 1))
        else:
            t.add_row(*row(i))


def fmt_seconds(s: float | None) -> str:
    return "—" if s is None else f"{s:g} s"


def _secs(x: float) -> str:
    return f"{x:.2f}".rstrip("0").rstrip(".")


def print_analysis(trace: Trace, a: Analysis, inputs: list[str]) -> None:
    lo, hi = a.window
    console.print(
        f"[bold]Analysis[/] — {len(a.flows)} flow(s), window {_secs(lo)}–{_secs(hi)} s "
        f"(seconds from the earliest flow's start), run {a.run}"
    )
    console.print(f"input: {escape(', '.join(inputs))}", highlight=False)

    t = Table(title="Flows over the window", title_justify="left")
    for col, just in (("flow", "left"), ("cca", "left"), ("mean throughput", "right"), ("samples", "right"), ("retransmits", "right"), ("mean sRTT", "right")):
        t.add_column(col, justify=just, overflow="fold")
    def flow_row(i: int) -> list[str]:
        f = a.flows[i]
        return [
            escape(f.label),
            f.cca or "—",
            fmt_rate(f.mean_bps),
            str(f.samples),
            # DCCP never retransmits: a 0 there would read as "no loss".
            "—" if f.retransmits is None or protocol(f.cca) == "DCCP" else str(f.retransmits),
            "—" if f.mean_srtt_s is None else f"{f.mean_srtt_s * 1e3:.1f} ms",
        ]
    _add_flow_rows(t, len(a.flows), flow_row)
    console.print(t)

    j = Table(title="Jain's fairness index", title_justify="left")
    j.add_column("variant")
    j.add_column("value", justify="right")
    j.add_column("definition")
    j.add_row("mean of J(t)", fmt_num(a.jain.mean_jt, 4), f"{cite('000')} Eq. 2, averaged over {a.jain.n_samples} sample times")
    j.add_row("J of mean throughputs", fmt_num(a.jain.of_means, 4), f"{cite('000')} Eq. 1 on each flow's mean over the window")
    if a.end_summary_jain is not None:
        j.add_row("J of end-of-test summaries", fmt_num(a.end_summary_jain, 4), "Eq. 1 on iperf3's per-stream end summary (the USC lab script's number)")
    console.print(j)

    if a.nru is not None:
        n = a.nru
        nt = Table(title=f"Normalised Resource Usage ({cite('000')})", title_justify="left")
        for col in ("flow", "expected", "U_n (dB)", "σ_n (dB)", "S_n", "T_U"):
            nt.add_column(col, justify="left" if col == "flow" else "right")
        def nru_row(i: int) -> list[str]:
            fl = n.flows[i]
            return [
                escape(fl.label or str(fl.flow)),
                fmt_rate(a.expected_bps[i]) if a.expected_bps else "—",
                fmt_num(fl.u),
                fmt_num(fl.sigma),
                fmt_num(fl.stability),
                fmt_seconds(a.flow_convergence[i]) if a.flow_convergence else "—",
            ]
        _add_flow_rows(nt, len(n.flows), nru_row)
        console.print(nt)
        console.print(
            f"system NRU tuple ⟨U_N+, U_N−, S_N⟩ = {n.tuple_str()}   U_N = {fmt_num(n.u_mean)} dB   "
            f"Case {n.case or '—'} ({CASE_COMMENT.get(n.case or '', 'no flows')})"
        )
        if n.t_e is not None:
            console.print(f"system convergence time T_U from t_e = {n.t_e:g} s (U_c = {n.u_c:g} dB, held {n.k} sample(s)): {fmt_seconds(n.t_convergence)}")

    if a.harm is not None:
        h = Table(title="Harm (Ware et al. 2019)", title_justify="left", caption="0 = no harm, 1 = starved", caption_justify="left")
        h.add_column("flow")
        h.add_column("throughput harm", justify="right")
        if a.latency_harm is not None:
            h.add_column("latency harm", justify="right")
        def harm_row(i: int) -> list[str]:
            row = [escape(a.flows[i].label), fmt_num(a.harm.per_flow[i], 3)]
            if a.latency_harm is not None:
                row.append(fmt_num(a.latency_harm.per_flow[i], 3))
            return row
        _add_flow_rows(h, len(a.flows), harm_row)
        console.print(h)
        console.print(f"throughput harm: mean {fmt_num(a.harm.mean, 3)}, worst {fmt_num(a.harm.max, 3)}")

    # A backend's warnings (the run's numbers are suspect: a stalled link, goodput far
    # below the rate, losses outside the bottleneck) stand out from its notes.
    warnings = {str(w) for w in trace.meta.get("warnings", []) or []}
    for note in a.notes:
        if str(note) in warnings:
            console.print(f"[yellow]warning: {escape(str(note))}[/]", highlight=False)
        else:
            console.print(f"[dim]note: {escape(str(note))}[/]", highlight=False)
