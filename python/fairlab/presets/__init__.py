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
        for key, value in PRESETS[name].quick.items():
            if key.startswith("sweep."):
                doc.setdefault("sweep", {})[key[len("sweep.") :]] = value
            else:
                doc[key] = value
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
    raise ScenarioError(f"preset {name!r} has no live variant; live presets: bhatti2008-dccp")
