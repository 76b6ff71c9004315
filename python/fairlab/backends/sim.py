"""The simulator backend: a validated Scenario in, a Trace out.

The engine (`crates/netsim`) does all the work; this module only converts the
scenario to the resolved JSON the engine reads and the engine's numpy columns into
the Trace data model (DESIGN.md: bindings and backends hold no simulation logic).
"""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from .. import __version__
from ..scenario import Scenario
from ..trace import Trace

Progress = Callable[[float], bool | None]

#: CCID2 is a DCCP endpoint, not a TCP congestion controller, so it is not in the
#: engine's controller table; the engine accepts it by this name.
CCID2 = ("ccid2", "DCCP with CCID 2, TCP-like AIMD in packets, no retransmission (RFC 4340/4341), as Linux runs it",
         'kernel = "6.1" (Ack Ratio sized from the window) or "2.6.22" (RFC 4341 Ack-loss rules, slow start per packet); ack_ratio = 2 (initial)')


def cca_table() -> list[tuple[str, str, str]]:
    """Every congestion control a simulated flow may name: (name, summary, parameters)."""
    from .._core import cc_registry

    return [*cc_registry(), CCID2]


def qdisc_table() -> list[tuple[str, str, str]]:
    """Every queue discipline a simulated bottleneck may name: (name, summary, parameters)."""
    from .._core import qdisc_registry

    return list(qdisc_registry())


def simulate(scenario: Scenario, *, seed: int | None = None, progress: Progress | None = None,
             tcp_probe_path: str | os.PathLike[str] | None = None,
             queue_trace_path: str | os.PathLike[str] | None = None) -> Trace:
    """Run ``scenario`` in the packet-level simulator and return its Trace.

    ``seed`` overrides the scenario's seed. ``progress`` is called with the simulated
    time in seconds about once per simulated second; returning False cancels.
    ``tcp_probe_path`` also writes every TCP sender's state at each ACK there, in the
    columns of the vm backend's kernel trace (`backends/ack_trace.py`);
    ``queue_trace_path`` every packet's fate at the bottleneck queue
    (`backends/queue_trace.py`). Recording either does not change the run.
    """
    from .._core import simulate as core_simulate

    resolved = with_host_windows(scenario.resolve(seed=seed))
    started = time.time()
    t0 = time.perf_counter()
    out = core_simulate(json.dumps(resolved), progress, tcp_probe_path is not None, queue_trace_path is not None)
    wall = time.perf_counter() - t0
    trace = _to_trace(scenario, resolved, out, wall_s=wall, started=started)
    if tcp_probe_path is not None:
        from . import ack_trace

        frame = ack_trace.from_engine(out["tcp_probe"])
        ack_trace.write(frame, Path(tcp_probe_path))
        trace.meta["tcp_probe"] = {"events": len(frame), "lost_events": 0}
    if queue_trace_path is not None:
        from . import queue_trace

        frame = queue_trace.from_engine(out["queue"])
        queue_trace.write(frame, Path(queue_trace_path))
        trace.meta["queue_trace"] = {"file": Path(queue_trace_path).name, "events": len(frame)}
    return trace


def with_host_windows(resolved: dict) -> dict:
    """Give every TCP flow without an explicit `rwnd` the receive window a Linux
    receiver configured as the live and vm backends configure theirs would
    advertise at most (`host_settings.advertised_window_max`: one BDP plus the
    bottleneck buffer). Without it a simulated BBR flow kept up to 2.9 MB in
    flight where the kernel's peer allowed 2.5 MB, and took 87 % against CUBIC
    where the kernel's took 79 % (docs/validation/vm.md)."""
    from .host_settings import advertised_window_max

    for f in resolved["flows"]:
        if f.get("rwnd_bytes") is None and f["cca"] != "ccid2":
            f["rwnd_bytes"] = advertised_window_max(resolved, int(f["rtt_ns"]))
            # The hosts' receivers autotune their buffers up to that window (Linux
            # `tcp_moderate_rcvbuf`); an explicit `rwnd` is a fixed buffer
            # (iperf3 -w sets SO_RCVBUF, which switches autotuning off).
            f["rwnd_autotune"] = True
    return resolved


def _to_trace(scenario: Scenario, resolved: dict, out: dict, *, wall_s: float, started: float) -> Trace:
    f = out["flows"]
    samples = pd.DataFrame(
        {
            "run": np.zeros(len(f["t_ns"]), dtype=np.int64),
            "flow": f["flow"].astype(np.int64),
            "t": f["t_ns"] / 1e9,
            "throughput_bps": f["goodput_bps"],
            "cwnd_bytes": f["cwnd_bytes"],
            # 0 means "no RTT sample yet" in the engine; missing, not zero, here.
            "srtt_s": np.where(f["srtt_ns"] > 0, f["srtt_ns"] / 1e9, np.nan),
            "rttvar_s": np.where(f["srtt_ns"] > 0, f["rttvar_ns"] / 1e9, np.nan),
            "retransmits": f["retransmits"].astype(np.int64),
            "state": pd.Categorical.from_codes(np.minimum(f["state"], 5).astype(np.int8), ["open", "cwr", "recovery", "loss", "idle", "unknown"]).astype(str),
            "phase": f["phase"],
        }
    )
    totals = out["totals"]
    labels = [label for label, _ in scenario.expanded_flows()]
    flows = pd.DataFrame(
        {
            "flow": np.arange(len(resolved["flows"]), dtype=np.int64),
            "label": labels,
            "cca": [fl["cca"] for fl in resolved["flows"]],
            "rtt_s": [fl["rtt_ns"] / 1e9 for fl in resolved["flows"]],
            "start_s": [t["started_ns"] / 1e9 for t in totals["flows"]],
            "source": "sim",
        }
    )
    b = out["bottleneck"]
    bottleneck = pd.DataFrame(
        {
            "run": np.zeros(len(b["t_ns"]), dtype=np.int64),
            "t": b["t_ns"] / 1e9,
            "queue_bytes": b["queue_bytes"].astype(float),
            "queue_pkts": b["queue_pkts"].astype(float),
            "drops": b["drops"].astype(np.int64),
            "marks": b["marks"].astype(np.int64),
            **{k: v.astype(np.int64) for k, v in b.items() if k.startswith("drops_")},
        }
    )
    meta = {
        "tool": "fairlab-sim",
        "tool_version": __version__,
        "backend": "sim",
        "scenario_name": scenario.name,
        "seed": resolved["seed"],
        "interval_s": resolved["interval_ns"] / 1e9,
        "host": platform.node(),
        "time": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
        "wall_s": round(wall_s, 4),
        "events": int(totals["events"]),
        "bottleneck_packets": int(totals["bottleneck_packets"]),
        "totals": {k: v for k, v in totals.items() if k != "flows"},
        "flow_totals": totals["flows"],
        "resolved_scenario": resolved,
        # where BLUE's d1, d2 and freeze_time came from (docs/qdiscs.md); None for other qdiscs
        "qdisc_rule": scenario.qdisc_params()[1],
    }

    return Trace.from_frames(samples, flows, bottleneck, meta)
