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
