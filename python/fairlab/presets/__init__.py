"""One-command reproductions of the seed papers' experiments (`fairlab reproduce`).

Each preset is a campaign file in this package using the paper's parameters, plus a
`--quick` variant that finishes within about two minutes on two cores and says in its
report exactly what it shortened.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from ..scenario import ScenarioError, read_toml
from .make_zhang2004 import flow_table


@dataclass(frozen=True)
class Preset:
    """A reproducible experiment from one of the seed documents."""

    name: str
    seed_file: str
    title: str
    description: str
    #: sweep/scenario overrides for --quick: {"runs": 2, "sweep.flows[*].rtt": [...]}
    quick: dict[str, Any] = field(default_factory=dict)
    quick_note: str = ""
    live_note: str = ""

    @property
    def compared_in(self) -> str:
        """The page of fairlab's source that sets the paper's own numbers beside
        fairlab's (seed 003's lab measured real Linux, so its page is the live one)."""
        page = {"003": "live.md"}.get(self.seed_file[:3], f"seed{self.seed_file[:3]}.md")
        return f"docs/validation/{page}"


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in [
        Preset(
            name="bhatti2008-dccp",
            seed_file="001_e1ad1a239e6c9a13.txt",
            title="Bhatti, Bateman, Miras: A Comparative Performance Evaluation of DCCP (2008)",
            description=(
                "100 Mb/s dumbbell, 100% BDP DropTail, RTT 25–200 ms, 300 s runs, flow 2 at 30 s, "
                "analysis 60–300 s, 5 runs; CCID2 vs NewReno, BIC, CUBIC (2.6.22 constants) in both start "
                "orders, with self-competition calibration (NRU weights) and single-flow runs (harm)."
            ),
            quick={"runs": 2, "sweep.flows[*].rtt": ["50ms", "100ms", "200ms"]},
            quick_note="3 RTTs (50, 100, 200 ms) instead of 8, and 2 runs per condition instead of 5",
            live_note="Linux removed DCCP (and CCID2) in 6.x, so live runs keep only the TCP pairs, each against NewReno in place of CCID2",
        ),
        Preset(
            name="usc-lab10",
            seed_file="003_8048ef623774b5cf.txt",
            title="USC Lab 10: Measuring TCP Fairness (2019)",
            description=(
                "10 Gb/s, 20 ms, 15 MB tbf buffer, socket buffers 2·BDP: 8 parallel CUBIC streams (10 s), "
                "Reno vs Reno (120 s) and Reno vs BBR (20 s), 3 runs each."
            ),
            quick={"runs": 1, "bottleneck.rate": "1Gbit", "bottleneck.buffer": "1.5MB"},
            quick_note="1 Gb/s with a 1.5 MB buffer (the same 60% of the BDP) instead of 10 Gb/s, and 1 run instead of 3",
            live_note="live runs are scaled to 200 Mb/s, what linkem forwards reliably on a 2-core machine (docs/linkem.md)",
        ),
        Preset(
            name="bhatti2009-nru",
            seed_file="000_dbac9ed9de71ac0b.txt",
            title="Bhatti et al.: Revisiting inter-flow fairness (2009), §VI-E 14-flow, 14-variant simulation",
            description=(
                "100 Mb/s dumbbell, 100% BDP DropTail, RTT 25–200 ms (8 values), 14 flows, one each of reno, bic, "
                "cubic, highspeed, htcp, hybla, illinois, lp, scalable, vegas, veno, westwood, yeah, compound "
                "(ns-2 TCP-Linux's set), flow k starting at 30·k s, 900 s runs analysed over 420–900 s, one run per RTT; "
                "NRU weights from 14-flow self-competition runs (14 per RTT). 8 main + 112 calibration runs (about 10 "
                "minutes on one worker). "
                "The paper's pair-wise set (CCID2 vs NewReno/CUBIC) is part of preset bhatti2008-dccp."
            ),
            quick={
                # same 14 variants in the same order, started every 10 s instead of every 30 s
                "flows": [
                    {"cca": c, "rtt": "25ms", "start": f"{10 * k}s", "initial_cwnd": 3, **({"params": {"kernel": "2.6.22"}} if c in ("bic", "cubic", "scalable") else {})}
                    for k, c in enumerate(["reno", "bic", "cubic", "highspeed", "htcp", "hybla", "illinois", "lp", "scalable", "vegas", "veno", "westwood", "yeah", "compound"])
                ],
                "duration": "300s",
                "window": ["160s", "300s"],
                "analysis": {"nru": True, "harm": False, "epoch": "130s"},
                "sweep.flows[*].rtt": ["25ms", "200ms"],
            },
            quick_note=(
                "2 RTTs (25, 200 ms) instead of 8; flows start every 10 s instead of every 30 s (last at 130 s), and runs "
                "last 300 s analysed over 160–300 s (t_e = 130 s) instead of 900 s over 420–900 s (t_e = 390 s)"
            ),
        ),
        Preset(
            name="xue-10g-aqm",
            seed_file="004_97a60775c8bd92a4.txt",
            title="Xue, Kumar, Cui, Park: Fairness Among Heterogeneous TCP Variants Over 10Gbps (2012)",
            description=(
                "10 Gb/s dumbbell, RTT 120 ms, Drop-tail / RED / CHOKe (RED thresholds from the buffer), buffer 10–100% "
                "of BDP in 10% steps; TCP-SACK (reno) + HSTCP + CUBIC one flow each (Fig. 3) and the homogeneous "
                "sets of Table I (3 flows of one variant, run at every buffer); 300 s runs, analysis 30–300 s, one run "
                "each: 120 runs. Expensive: ≈ 250 M packets per 300 s run, 2–4 minutes each, so ≈ 4–8 h on one "
                "worker (use --quick, or more workers)."
            ),
            quick={
                "bottleneck": {"rate": "1Gbit", "buffer": "20%bdp", "qdisc": "droptail"},
                "duration": "60s",
                "window": ["10s", "60s"],
                "sweep.bottleneck.buffer": ["10%bdp", "20%bdp", "50%bdp", "100%bdp"],
            },
            quick_note="1 Gb/s instead of 10 Gb/s, 4 buffer sizes (10, 20, 50, 100% BDP) instead of 10, and 60 s runs analysed over 10–60 s instead of 300 s over 30–300 s",
        ),
        # Seed 002 (Zhang & Ye 2004), two presets because the two sets sweep different
        # things (set 1 replaces the flows list, set 2 multiplies sessions); both TOMLs
        # are generated by make_zhang2004.py, which documents the choices the paper leaves open.
        Preset(
            name="zhang2004-zrtt",
            seed_file="002_b0279b100b55935b.txt",
            title="Zhang & Ye: An adaptive mechanism to guarantee the bandwidth fairness of TCP flows (2004), set 1 (Fig. 6)",
            description=(
                "Fig. 1 topology, 10 Mb/s bottleneck (not in the paper), buffer 200 packets, BLUE freeze_time 50 ms, "
                "d1 0.02, d2 0.002, q_lim 100, ECN everywhere, TCP Reno; N = 2, 4, …, 20 connections with one session "
                "each, RTT of connection i = 10 + 10·i ms (20–210 ms, step not in the paper); qdisc blue, mrtt, prto, "
                "zrtt, csfq; 300 s runs analysed over 50–300 s, 3 runs: 150 runs. Set 2 is preset zhang2004-zrtt-sessions."
            ),
            quick={
                "runs": 1,
                "duration": "100s",
                "window": ["30s", "100s"],
                # the same flows as make_zhang2004.py writes into the full preset
                "sweep.connections": [{"label": f"N={n}", "flows": [flow_table(i) for i in range(1, n + 1)]} for n in (2, 6, 10, 14, 20)],
            },
            quick_note="5 connection counts (N = 2, 6, 10, 14, 20) instead of 10, 1 run per condition instead of 3, and 100 s runs analysed over 30–100 s instead of 300 s over 50–300 s",
        ),
        Preset(
            name="zhang2004-zrtt-sessions",
            seed_file="002_b0279b100b55935b.txt",
            title="Zhang & Ye: An adaptive mechanism to guarantee the bandwidth fairness of TCP flows (2004), set 2 (Fig. 7)",
            description=(
                "As zhang2004-zrtt with N = 20 connections (RTT 20–210 ms) and S = 1, 2, 3, 4, 5, 6, 8, 10 sessions per "
                "connection (20–200 TCP flows; the congestion level grows with S); qdisc blue, mrtt, prto, zrtt, csfq; "
                "300 s runs analysed over 50–300 s, 3 runs: 120 runs."
            ),
            quick={
                "runs": 1,
                "duration": "100s",
                "window": ["30s", "100s"],
                "sweep.sessions": [{"label": f"S={s}", "flows[*].count": s} for s in (1, 2, 4, 6)],
            },
            quick_note="4 session counts (1, 2, 4, 6) instead of 8, 1 run per condition instead of 3, and 100 s runs analysed over 30–100 s instead of 300 s over 50–300 s",
        ),
    ]
}


def preset_document(name: str, *, quick: bool = False) -> dict[str, Any]:
    """The campaign document of preset ``name`` (the quick variant if asked)."""
    if name not in PRESETS:
        raise ScenarioError(f"unknown preset {name!r}; known: {', '.join(sorted(PRESETS))} (see `fairlab list presets`)")
    with resources.as_file(resources.files(__package__) / f"{name}.toml") as path:
        doc = read_toml(path)
    if quick:
        doc = copy.deepcopy(doc)
        from ..campaign.plan import set_path

        for key, value in PRESETS[name].quick.items():
            if key.startswith("sweep."):
                doc.setdefault("sweep", {})[key[len("sweep.") :]] = value
            else:
                set_path(doc, key, value, source=f"preset {name}")
        doc["name"] = f"{doc['name']}-quick"
    return doc


def kernel_ccas() -> set[str]:
    """Congestion controls this machine's kernel offers (empty if unreadable)."""
    try:
        with open("/proc/sys/net/ipv4/tcp_available_congestion_control") as fh:
            return set(fh.read().split())
    except OSError:
        return set()


def live_document(name: str, doc: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Adapt a preset for the live backend: only controls the kernel has, and a size
    this machine can sustain. Returns the document and notes saying what changed."""
    doc = copy.deepcopy(doc)
    notes: list[str] = []
    have = kernel_ccas()
    if name == "bhatti2008-dccp":
        notes.append(PRESETS[name].live_note + "; the pairs are NewReno vs CUBIC in both start orders (and BIC where the kernel has it)")
        pairs = [("reno", "cubic"), ("cubic", "reno"), ("reno", "bic"), ("bic", "reno")]
        kept = [p for p in pairs if set(p) <= have]
        dropped = sorted({c for p in pairs for c in p} - have)
        if dropped:
            notes.append(f"this kernel lacks {', '.join(dropped)} (available: {', '.join(sorted(have)) or 'unknown'}), so those pairs are left out")
        doc["sweep"]["pair"] = [{"flows[0].cca": a, "flows[1].cca": b} for a, b in kept]
        for f in doc["flows"]:
            f.pop("params", None)
        # Real time: a full campaign would take hours of wall clock.
        doc["sweep"]["flows[*].rtt"] = ["25ms", "100ms", "200ms"]
        doc["runs"] = min(int(doc.get("runs", 1)), 2)
        doc["duration"] = "120s"
        doc["window"] = ["60s", "120s"]
        doc.setdefault("analysis", {})["harm"] = False
        notes.append("live: 3 RTTs, at most 2 runs, 120 s runs analysed over 60–120 s (wall-clock time is real), no solo runs")
        doc["name"] = doc["name"] + "-live"
        return doc, notes
    if name == "usc-lab10":
        missing = {"reno", "cubic", "bbr"} - have
        if missing:
            raise ScenarioError(f"preset usc-lab10 needs the kernel's {', '.join(sorted(missing))} congestion control(s); available: {', '.join(sorted(have)) or 'unknown'}")
        doc["bottleneck"]["rate"] = "200Mbit"
        doc["bottleneck"]["buffer"] = "300KB"  # 60% of the 500 kB BDP, as 15 MB is of 25 MB
        for f in doc["flows"]:
            f["rwnd"] = "1000000B"  # 2·BDP at 200 Mb/s, 20 ms
        doc["sweep"]["experiment"][0]["flows"][0]["rwnd"] = "1000000B"
        doc["runs"] = 1
        doc["name"] = doc["name"] + "-live"
        notes.append(PRESETS[name].live_note + "; buffer 300 kB (60% of the BDP, as in the lab) and socket buffers 2·BDP = 1 MB scaled with it; 1 run")
        return doc, notes
    raise ScenarioError(f"preset {name!r} has no live variant; live presets: bhatti2008-dccp, usc-lab10")


#: Queue disciplines of the seed papers that Linux never had (vm runs refuse them).
_NOT_IN_LINUX = {"blue", "zrtt", "mrtt", "prto", "csfq"}


def vm_document(name: str, doc: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Adapt a preset for the vm backend (a stock 6.1 kernel in QEMU): the kernel's own
    congestion-control constants, no control Linux lacks, and rates software emulation
    can carry. Returns the document and notes saying what changed."""
    doc = copy.deepcopy(doc)
    notes: list[str] = []
    qdiscs = {doc.get("bottleneck", {}).get("qdisc", "droptail")}
    for v in (doc.get("sweep") or {}).values():
        for item in v if isinstance(v, list) else []:
            if isinstance(item, dict) and "bottleneck.qdisc" in item:
                qdiscs.add(item["bottleneck.qdisc"])
            elif isinstance(item, str):
                qdiscs.add(item)
    if qdiscs & _NOT_IN_LINUX:
        raise ScenarioError(f"preset {name!r} compares router mechanisms Linux never had ({', '.join(sorted(qdiscs & _NOT_IN_LINUX))}), "
                            "so it has no vm variant; run it with --backend sim")

    def strip_params(flows: list[dict[str, Any]]) -> bool:
        had = False
        for f in flows:
            if f.pop("params", None):
                had = True
        return had

    had_params = strip_params(doc.get("flows", []))
    for v in (doc.get("sweep") or {}).values():
        for item in v if isinstance(v, list) else []:
            if isinstance(item, dict):
                for k in [k for k in item if k.endswith(".params")]:
                    item.pop(k)
                    had_params = True
                if isinstance(item.get("flows"), list):
                    had_params |= strip_params(item["flows"])
    if had_params:
        notes.append("vm: the kernel's own congestion-control constants (Linux 6.1's BIC, CUBIC and Scalable, not the "
                     "2.6.22 ones the paper's hosts ran: a module parameter would apply to every flow)")
    if any(f.get("cca") == "compound" for f in doc.get("flows", [])):
        doc["flows"] = [f for f in doc["flows"] if f.get("cca") != "compound"]
        notes.append("vm: Compound TCP was never merged into Linux, so that flow is left out")
    rate = doc.get("bottleneck", {}).get("rate", "")
    if name in ("xue-10g-aqm", "usc-lab10") and rate not in ("100Mbit",):
        doc["bottleneck"]["rate"] = "100Mbit"
        notes.append(f"vm: scaled from {rate} to 100 Mbit/s (software emulation carries a few hundred Mbit/s); buffers "
                     "given as % of BDP scale with it")
        if name == "usc-lab10":
            doc["bottleneck"]["buffer"] = "60%bdp"
            for f in doc.get("flows", []):
                f.pop("rwnd", None)
            for item in doc.get("sweep", {}).get("experiment", []):
                for f in item.get("flows", []):
                    f.pop("rwnd", None)
    if name == "bhatti2008-dccp":
        doc["sweep"]["flows[*].rtt"] = ["25ms", "100ms", "200ms"]
        notes.append("vm: 3 RTTs (25, 100, 200 ms) of the paper's 8")
    doc["name"] = doc["name"] + "-vm"
    return doc, notes
