"""What a report must state for a reader to judge its numbers without the scenario
files: the set-up of every condition and how much of the link the flows used.

`setup_tables` splits the parameters into those every condition shares (one
two-column table) and those that vary (one row per condition), so a 40-condition
campaign does not repeat "100 Mbit/s, DropTail" forty times.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..campaign.aggregate import ConditionResult
from ..campaign.plan import condition_label
from ..scenario import HEADER_BYTES, Scenario
from .format import fmt_bytes, fmt_num, fmt_pct, fmt_rate, fmt_seconds

#: flows beyond this many are summarised (counts per cca, RTT and start ranges)
FLOW_LIST_LIMIT = 6


def _qdisc(s: Scenario) -> str:
    b = s.bottleneck
    params, rule = s.qdisc_params()
    if rule is None:
        params = b.params  # as the file gives them; the engine's documented defaults for the rest
    if not params:
        return f"{b.qdisc} (defaults)" if b.qdisc != "droptail" else "droptail"
    parts = []
    for k, v in params.items():
        if isinstance(v, float):
            v = f"{v:.3g}"
        if k.endswith("_time") and isinstance(v, int) and v >= 1000:  # ns, as the engine takes it
            v = fmt_seconds(v / 1e9)
        elif isinstance(v, bool):
            v = str(v).lower()  # as the scenario file spells it
        parts.append(f"{k}={v}")
    return f"{b.qdisc} ({', '.join(parts)}{'; ' + rule if rule else ''})"


def buffer_text(s: Scenario) -> str:
    """The buffer in bytes (or packets) and as % of the BDP at the reference RTT."""
    kind, value = s.bottleneck.buffer
    bdp = s.bottleneck.rate * s.reference_rtt / 8 / 1e9
    size = s.buffer_bytes_or_packets()
    ref = f"BDP at {fmt_seconds(s.reference_rtt / 1e9)}"
    if "packets" in size:
        n = size["packets"]
        approx = n * (max(f.mss for f in s.flows) + HEADER_BYTES)
        return f"{n} packets (≈ {fmt_bytes(approx)}, {approx / bdp:.0%} of the {ref})"
    return f"{fmt_bytes(size['bytes'])} ({size['bytes'] / bdp:.0%} of the {ref})"


def _cca(f: Any) -> str:
    """The control with its parameters (e.g. the kernel whose constants it uses)."""
    params = ", ".join(f"{k}={v}" for k, v in f.params.items())
    return f"{f.cca}{f' ({params})' if params else ''}{' +ECN' if f.ecn else ''}{' +GSO' if f.gso else ''}"


def _range(values: list[float], fmt: Any) -> str:
    lo, hi = min(values), max(values)
    return fmt(lo) if lo == hi else f"{fmt(lo)}–{fmt(hi)}"


def flows_text(s: Scenario) -> str:
    """Each flow as "cca, RTT, start" — or, for many flows, counts per cca and ranges."""
    fl = [f for _, f in s.expanded_flows()]
    if len(fl) <= FLOW_LIST_LIMIT:
        return "; ".join(f"{i + 1}: {_cca(f)}, RTT {fmt_seconds(f.rtt / 1e9)}, start {fmt_seconds(f.start / 1e9)}" for i, f in enumerate(fl))
    counts: dict[str, int] = {}
    for f in fl:
        counts[_cca(f)] = counts.get(_cca(f), 0) + 1
    mix = ", ".join(f"{c} ×{n}" for c, n in counts.items())
    return (
        f"{len(fl)} flows ({mix}); RTT {_range([f.rtt / 1e9 for f in fl], fmt_seconds)}; "
        f"start {_range([f.start / 1e9 for f in fl], fmt_seconds)}"
    )


def _segments(s: Scenario) -> str:
    """MSS, initial window and SACK/ECN as run: facts that move the numbers."""
    fl = [f for _, f in s.expanded_flows()]
    mss = sorted({f.mss for f in fl})
    iw = sorted({f.initial_cwnd for f in fl})
    sack = {f.sack for f in fl}
    ecn = {f.ecn for f in fl}
    yes_no = lambda v: "on" if v == {True} else "off" if v == {False} else "mixed"  # noqa: E731
    return f"MSS {'/'.join(str(m) for m in mss)} B, initial window {'/'.join(str(i) for i in iw)} segments, SACK {yes_no(sack)}, ECN {yes_no(ecn)}"


def _seeds(seeds: list[int]) -> str:
    if not seeds:
        return "—"
    if seeds == list(range(seeds[0], seeds[0] + len(seeds))) and len(seeds) > 2:
        return f"{seeds[0]}–{seeds[-1]}"
    return ", ".join(str(x) for x in seeds)


def condition_setup(r: ConditionResult) -> dict[str, str]:
    """Parameter → value text for one condition (empty when its scenario is unknown)."""
    s = r.scenario
    if s is None:
        return {}
    window = "whole run" if s.window is None else f"{s.window[0] / 1e9:g}–{s.window[1] / 1e9:g} s"
    out = {
        "bottleneck rate": fmt_rate(s.bottleneck.rate),
        "buffer": buffer_text(s),
        "queue discipline": _qdisc(s),
        "flows (cca, RTT, start)": flows_text(s),
        "segments": _segments(s),
        "start jitter": f"each flow starts uniformly in [start, start + {fmt_seconds(s.variation.start_jitter / 1e9)}]",
        "duration": fmt_seconds(s.duration / 1e9),
        "sampling interval": fmt_seconds(s.interval / 1e9),
        "analysis window": window,
        "runs": f"{len(r.runs)} of {s.runs}" if len(r.runs) != s.runs else str(s.runs),
        "seeds": _seeds(r.seeds),
        "backend": "; ".join(r.backend_versions) or "—",
    }
    if s.bottleneck.loss_rate:
        out["random loss"] = f"{s.bottleneck.loss_rate:g} per packet"
    if s.analysis.nru and s.analysis.epoch is not None:
        out["NRU convergence"] = f"t_e = {s.analysis.epoch / 1e9:g} s, U_c = {fmt_num(s.analysis.uc, 2)} dB, held {s.analysis.hold} sample(s)"
    return out


def setup_tables(results: list[ConditionResult]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """(common, varying): a Parameter/Value table of what every condition shares and a
    condition × parameter table of what differs (None when nothing differs)."""
    per = [condition_setup(r) for r in results]
    keys: list[str] = list(dict.fromkeys(k for d in per for k in d))
    common = [k for k in keys if len({d.get(k, "—") for d in per}) == 1]
    varying = [k for k in keys if k not in common]
    common_t = {"header": ["parameter", "value (every condition)"], "rows": [[k, per[0].get(k, "—")] for k in common]}
    if not varying:
        return common_t, None
    rows = [[condition_label(r.point)] + [d.get(k, "—") for k in varying] for r, d in zip(results, per)]
    return common_t, {"header": ["condition"] + varying, "rows": rows}


def utilisation_table(results: list[ConditionResult], threshold: float) -> tuple[dict[str, Any], int]:
    """Per condition: the link utilisation (summed mean throughput of the flows over the
    window ÷ bottleneck rate), mean ± std and per run, flagged below ``threshold``.
    Returns the table and the number of flagged conditions."""
    rows, flags = [], []
    for r in results:
        u = r.utilisation
        if u is None or u.mean is None:
            rows.append([condition_label(r.point), "—", "—", ""])
            flags.append(False)
            continue
        low = u.mean < threshold
        per_run = ", ".join(fmt_pct(x) for x in r.utilisation_per_run)
        mean = fmt_pct(u.mean) if u.std is None else f"{fmt_pct(u.mean)} ± {100 * u.std:.0f} pp"
        rows.append([condition_label(r.point), mean, per_run, f"LOW (< {fmt_pct(threshold)})" if low else "ok"])
        flags.append(low)
    return {"header": ["condition", "utilisation (mean ± std over runs)", "per run", "check"], "rows": rows, "flags": flags}, int(np.sum(flags))
