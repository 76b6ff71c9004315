"""BLUE's steps and freeze time from the link, the buffer and the flows.

Read this first. BLUE (Feng, Kandlur, Saha & Shin, IEEE/ACM ToN 2002) moves one
marking probability `P_b` by `+d1` on a loss or a long queue and by `−d2` when the link
goes idle, at most once per `freeze_time`. Seed 002's "recommended settings" (d1 =
0.02, d2 = 0.002, freeze_time = 50 ms) fit its own links; on another link the step can
exceed the whole probability the flows need. With 8 ECN Reno flows of RTT 20–160 ms on
20 Mbit/s they need about 1 %, so `P_b` jumps between 0 and 2 % and never settles
(issue 12: J 0.54 for BLUE; steps 10× smaller gave 0.975). So, where a scenario does
not give them, fairlab derives them — for `blue` and the BLUE-based `zrtt`, `mrtt` and
`prto` alike — by one rule (docs/qdiscs.md, "BLUE's steps from the link"):

1. *The probability the flows need.* A Reno flow marked with probability p sends
   `(s / RTT) · 1.22 / √p` (Mathis, Semke, Mahdavi & Ott, CCR 1997; an ECN mark halves
   the window as a loss does). BLUE gives every packet the same p, so the flows fill a
   link of rate C when `Σ_i (s_i / RTT_i) · 1.22 / √p = C`, i.e.
   `p* = (1.22 · Σ_i s_i / RTT_i / C)²` — `(1.22 / W)²` for the window W a flow needs
   at its fair share, W taken at the harmonic-mean RTT. s_i is flow i's packet on the
   wire (MSS + headers), RTT_i its propagation RTT. p* is capped at `(1.22/4)²` ≈
   0.093, Mathis' p for a window of 4 segments: the model describes flows that recover
   by fast retransmit, which takes 3 duplicate ACKs and so ≥ 4 segments in flight
   (RFC 5681 §3.2); below that flows live in time-outs, more marking cannot shrink
   them, and a larger step only drives P_b towards 1 sooner (seed 002's set 2 at
   4 sessions per connection: BLUE's J 0.91 with d1 = 0.02, 0.38 with d1 = 0.25).
2. *Steps that resolve it.* `d1 = p* / 4`: four increments reach p*, and one step moves
   a Reno flow's rate by about 12 % (rate ∝ 1/√p). `d2 = d1 / 10`: Feng et al. set d1
   "significantly larger" than d2 because only too little marking loses packets, while
   too much or too little both leave the link idle.
3. *Freeze time of the order of the RTT.* Feng et al.: the freeze time lets a change of
   `P_b` take effect before the next one; the flows answer a mark after one RTT. fairlab
   uses the harmonic mean of the flows' RTTs, the RTT of the average marked packet (a
   flow's share of packets is ∝ 1/RTT when all see one p) — the same sum as in step 1.

The buffer enters only through BLUE's `q_lim`: propagation RTTs make p* an upper bound
(a standing queue only lengthens the RTTs), and adding the mean queue measured worse
(docs/qdiscs.md). A parameter the scenario gives always wins; a missing `d2` is a tenth of the `d1` in
use (given or derived). Presets that reproduce seed 002 give all three, so they run its
published values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .model import Scenario

#: Queue disciplines whose increments, decrement and freeze time are BLUE's.
BLUE_FAMILY = ("blue", "zrtt", "mrtt", "prto")
#: The rule's parameters, in the engine's names (docs/qdiscs.md, `blue`).
STEP_PARAMS = ("d1", "d2", "freeze_time")
#: Mathis et al. (1997): C = √(3/2) for Reno with delayed ACKs off.
MATHIS_C = 1.22
#: Smallest window (segments) the response function holds for (step 1), so p* ≤ (1.22/4)².
MIN_WINDOW = 4
#: Increments needed to climb from 0 to the probability the flows need (step 2).
STEPS_TO_TARGET = 4
#: d1 / d2 (Feng et al. 2002: d1 ≫ d2).
INCREASE_OVER_DECREASE = 10
#: The engine's bounds on freeze_time (crates/aqm/src/blue.rs): 1 µs … 1 h.
FREEZE_BOUNDS_NS = (1_000, 3_600 * 10**9)
#: How a run's report and metadata name this rule.
RULE = "link rule (docs/qdiscs.md, \"BLUE's steps from the link\")"


@dataclass(frozen=True)
class BlueSteps:
    """The rule's answer for one scenario, and what it was computed from."""

    p_needed: float  # p*, capped at (1.22 / MIN_WINDOW)²
    rtt_harmonic_ns: int
    d1: float
    d2: float
    freeze_time_ns: int


def link_steps(rate_bps: float, flows: list[tuple[int, int, int]]) -> BlueSteps:
    """The rule for a link of ``rate_bps`` and ``flows`` given as (count, RTT in ns,
    packet bytes on the wire)."""
    n = sum(c for c, _, _ in flows)
    per_rtt = sum(c / (rtt / 1e9) for c, rtt, _ in flows)  # Σ 1/RTT_i, 1/s
    bits_per_rtt = sum(c * 8 * size / (rtt / 1e9) for c, rtt, size in flows)  # Σ s_i/RTT_i, bit/s
    p = min((MATHIS_C / MIN_WINDOW) ** 2, (MATHIS_C * bits_per_rtt / rate_bps) ** 2)
    d1 = p / STEPS_TO_TARGET
    rtt_h = round(n / per_rtt * 1e9)
    freeze = min(max(rtt_h, FREEZE_BOUNDS_NS[0]), FREEZE_BOUNDS_NS[1])
    return BlueSteps(p_needed=p, rtt_harmonic_ns=rtt_h, d1=d1, d2=d1 / INCREASE_OVER_DECREASE, freeze_time_ns=freeze)


def scenario_steps(scenario: Scenario) -> BlueSteps:
    """`link_steps` for a scenario's bottleneck and flows (every flow counts, as if it
    lasted the whole run)."""
    from .model import HEADER_BYTES

    return link_steps(scenario.bottleneck.rate, [(f.count, f.rtt, f.mss + HEADER_BYTES) for f in scenario.flows])


def complete_params(scenario: Scenario, given: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """The qdisc parameters a run uses — ``given`` (already in engine units) plus the
    rule's values for the BLUE parameters it lacks — and a sentence saying where the
    BLUE parameters came from (None for other disciplines)."""
    if scenario.bottleneck.qdisc not in BLUE_FAMILY:
        return given, None
    missing = [k for k in STEP_PARAMS if k not in given]
    if not missing:
        return given, "d1, d2 and freeze_time as given"
    steps = scenario_steps(scenario)
    out = dict(given)
    derived = {"d1": steps.d1, "freeze_time": steps.freeze_time_ns}
    for k in missing:
        if k == "d2":
            # Feng et al.'s ratio holds against the d1 in use, given or derived.
            out[k] = float(out.get("d1", steps.d1)) / INCREASE_OVER_DECREASE
        else:
            out[k] = derived[k]
    given_names = [k for k in STEP_PARAMS if k in given]
    named = [f"d2 (= d1/{INCREASE_OVER_DECREASE})" if k == "d2" and "d1" in given else k for k in missing]
    capped = steps.p_needed >= (MATHIS_C / MIN_WINDOW) ** 2
    why = (f"{', '.join(named)} from the {RULE}: flows need p ≈ {steps.p_needed:.3g}{' (the cap: windows under 4 segments)' if capped else ''} "
           f"(Mathis et al. 1997) at a harmonic-mean RTT of {steps.rtt_harmonic_ns / 1e6:.3g} ms")
    return out, why + (f"; {', '.join(given_names)} as given" if given_names else "")
