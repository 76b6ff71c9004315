"""The kernel emulation path: a Linux bridge in the router namespace, netem for
propagation delay and tbf/htb (+ an AQM child) for the bottleneck.

Read this first:

- Delay: ``netem delay rtt/2`` on BOTH ends of each sender's veth — the sender's own
  interface delays its data, the router's port towards the sender delays the ACKs —
  so the base RTT is the flow's ``rtt`` (the scenario splits it equally both ways).
  netem's ``limit`` is set from the path's BDP plus the whole bottleneck buffer, so
  netem can never be the queue that drops.
- Bottleneck: on the router's port towards the receiver, ``tbf`` (or ``htb`` when
  tbf is missing) at the bottleneck rate, with the queue discipline as its child:
  droptail → ``bfifo``/``pfifo`` sized to the buffer; red, choke, codel, fq_codel and
  pie → the kernel qdisc of that name with the parameters translated below.
- This path is chosen only when the capability probe finds EVERY qdisc the scenario
  needs and every bottleneck parameter has a faithful kernel translation
  (`requirements` says which and why not); otherwise linkem is used.

The kernel's RED/CHOKe are not the `aqm` crate's: Linux RED has no "gentle" mode and
derives its EWMA weight from ``burst`` (iproute2's ``tc_red_eval_ewma``). ``burst`` is
chosen so that tc derives the scenario's ``w_q`` (the simulator's default 0.002, or
ARED's automatic weight with ``adaptive``) to the nearest power of two, so one
scenario means the same RED on every backend; tc's own recommendation,
(2·min + max)/3 packets, gave weights 8–30× larger. The translation is recorded in
the run's metadata so nobody mistakes one for the other.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ..host_settings import buffer_bytes, mean_packet
from .errors import LiveError
from .netns import HEADER_BYTES, Dumbbell, run_in

#: Bottleneck qdiscs the kernel path can build, with the bottleneck params it can translate.
TRANSLATABLE: dict[str, set[str]] = {
    "droptail": set(),
    "red": {"min_th", "max_th", "max_p", "w_q", "ecn", "adaptive"},
    "choke": {"min_th", "max_th", "max_p", "w_q", "ecn"},
    "codel": {"target", "interval", "ecn"},
    "fq_codel": {"target", "interval", "ecn"},
    "pie": {"target", "ecn"},
}
#: Ethernet header bytes on top of the IP packet (tbf's burst must hold a whole frame).
ETH_BYTES = 14
#: The `aqm` crate's RED/CHOKe averaging weight (Floyd & Jacobson 1993).
DEFAULT_W_Q = 0.002


def tc_red_wlog(min_packets: float, burst: int) -> int | None:
    """The EWMA weight exponent tc derives for RED/CHOKe (W_q = 2^-wlog), as
    iproute2's ``tc_red_eval_ewma`` does: the smallest wlog for which ``burst``
    back-to-back packets arriving at an idle queue average no more than
    ``burst + 1 - min``; None where tc refuses the burst."""
    a = burst + 1 - min_packets
    if a < 1.0:
        return None
    weight = 0.5
    for wlog in range(1, 32):
        if a <= (1 - (1 - weight) ** burst) / weight:
            return wlog
        weight /= 2
    return None


def burst_for_weight(min_packets: float, w_q: float) -> int:
    """The smallest ``burst`` from which tc derives W_q = 2^-round(log2(1/w_q)), or
    tc's recommended (2·min + max)/3-style fallback of 2·min + 1 if none does."""
    target = max(1, min(31, round(math.log2(1.0 / w_q))))
    for burst in range(1, 1 << 20):
        wlog = tc_red_wlog(min_packets, burst)
        if wlog == target:
            return burst
        if wlog is not None and wlog < target and burst > min_packets + (1 << target):
            break
    return int(2 * min_packets + 1)


@dataclass
class Requirements:
    """What the kernel path needs for a scenario, or why it cannot do it."""

    qdiscs: list[str] = field(default_factory=list)
    unsupported: str | None = None


def requirements(resolved: dict[str, Any]) -> Requirements:
    """The kernel qdiscs a resolved scenario needs on this path (rate shaper listed
    as "tbf|htb": either will do), or the reason the path cannot express it."""
    bn = resolved["bottleneck"]
    q = bn["qdisc"]
    if q not in TRANSLATABLE:
        return Requirements(unsupported=f"the kernel has no qdisc matching fairlab's {q!r}")
    extra = sorted(set(bn["params"]) - TRANSLATABLE[q])
    if extra:
        return Requirements(unsupported=f"{q} parameter(s) {extra} have no faithful kernel translation")
    if bn.get("loss_rate"):
        return Requirements(unsupported="loss_rate is simulator-only")
    child = {"droptail": "bfifo" if "bytes" in bn["buffer"] else "pfifo"}.get(q, q)
    return Requirements(qdiscs=["netem", "tbf|htb", child])


def missing_qdiscs(req: Requirements, have: dict[str, bool]) -> list[str]:
    """Which of ``req.qdiscs`` the probe did not find."""
    out = []
    for q in req.qdiscs:
        if not any(have.get(alt) for alt in q.split("|")):
            out.append(q.replace("|", " or "))
    return out


def _ns(v: Any) -> int:
    if isinstance(v, str):
        from ...scenario import units

        return units.parse_duration(v)
    return int(v)


def _us(ns: int) -> str:
    return f"{max(1, int(round(ns / 1000)))}us"


def buffer_packets(resolved: dict[str, Any]) -> int:
    buf = resolved["bottleneck"]["buffer"]
    if "packets" in buf:
        return int(buf["packets"])
    return max(1, int(math.ceil(int(buf["bytes"]) / mean_packet(resolved))))


def aqm_args(resolved: dict[str, Any]) -> list[str]:
    """The child qdisc's `tc` arguments (after ``qdisc add dev X parent P handle H``)."""
    bn = resolved["bottleneck"]
    q, p = bn["qdisc"], bn["params"]
    avpkt = mean_packet(resolved)
    rate = f"{int(bn['rate_bps'])}bit"
    if q == "droptail":
        if "bytes" in bn["buffer"]:
            return ["bfifo", "limit", str(int(bn["buffer"]["bytes"]))]
        return ["pfifo", "limit", str(int(bn["buffer"]["packets"]))]
    if q in ("red", "choke"):
        # Thresholds in packets as in the aqm crate (max_th = buffer/4, min_th = max_th/3).
        pkts = buffer_packets(resolved)
        max_th = float(p.get("max_th", max(3.0, pkts / 4)))
        min_th = float(p.get("min_th", max_th / 3))
        max_p = float(p.get("max_p", 0.1))
        if "w_q" in p:
            w_q = float(p["w_q"])
        elif p.get("adaptive"):
            # ARED's automatic weight, as the aqm crate sets it: 1 - exp(-1/C).
            w_q = 1 - math.exp(-1 / (float(bn["rate_bps"]) / (8 * avpkt)))
        else:
            w_q = DEFAULT_W_Q
        # tc sees min in whole bytes (red) or whole packets (choke).
        tc_min = int(min_th * avpkt) / avpkt if q == "red" else float(int(min_th))
        burst = burst_for_weight(tc_min, w_q)
        if q == "red":
            args = ["red", "limit", str(buffer_bytes(resolved)), "min", str(int(min_th * avpkt)),
                    "max", str(int(max_th * avpkt)), "avpkt", str(avpkt), "burst", str(burst),
                    "bandwidth", rate, "probability", f"{max_p:g}"]
            if p.get("adaptive"):
                args.append("adaptive")
        else:
            args = ["choke", "limit", str(pkts), "min", str(int(min_th)), "max", str(int(max_th)),
                    "avpkt", str(avpkt), "burst", str(burst), "bandwidth", rate, "probability", f"{max_p:g}"]
        if p.get("ecn"):
            args.append("ecn")
        return args
    if q in ("codel", "fq_codel"):
        args = [q, "limit", str(buffer_packets(resolved)),
                "target", _us(_ns(p.get("target", 5_000_000))), "interval", _us(_ns(p.get("interval", 100_000_000)))]
        args.append("ecn" if p.get("ecn") else "noecn")
        return args
    if q == "pie":
        args = ["pie", "limit", str(buffer_packets(resolved)), "target", _us(_ns(p.get("target", 15_000_000)))]
        args.append("ecn" if p.get("ecn") else "noecn")
        return args
    raise LiveError(f"the kernel path cannot build qdisc {q!r}")


def netem_limit(resolved: dict[str, Any], flow: dict[str, Any]) -> int:
    """Packets netem may hold on one sender link: everything the flow can have in
    flight (its share of BDP at the access rate plus the whole bottleneck buffer),
    doubled, and never below 10,000 — netem must not be the queue that drops."""
    access = int(resolved.get("access_rate_bps") or 10 * resolved["bottleneck"]["rate_bps"])
    pkt = flow["mss"] + HEADER_BYTES
    in_flight = access * flow["rtt_ns"] / 8e9 / pkt + buffer_packets(resolved)
    return max(10_000, int(2 * in_flight))


def commands(resolved: dict[str, Any], topo: Dumbbell, shaper: str) -> list[tuple[str, list[str]]]:
    """Every `tc` command of the path as (namespace, argv), in order."""
    bn = resolved["bottleneck"]
    out: list[tuple[str, list[str]]] = []
    for sender, port, f in zip(topo.senders, topo.router_sender_ports, resolved["flows"]):
        delay = _us(int(f["rtt_ns"]) // 2)
        limit = str(netem_limit(resolved, f))
        out.append((sender.ns, ["tc", "qdisc", "replace", "dev", sender.ifname, "root", "netem", "delay", delay, "limit", limit]))
        out.append((topo.router_ns, ["tc", "qdisc", "replace", "dev", port, "root", "netem", "delay", delay, "limit", limit]))
    dev = topo.router_receiver_port
    rate = f"{int(bn['rate_bps'])}bit"
    frame = max(s.mtu for s in topo.senders) + ETH_BYTES
    burst = str(max(2 * frame, int(bn["rate_bps"]) // 8 // 1000))  # 1 ms at the rate, at least two frames
    if shaper == "tbf":
        out.append((topo.router_ns, ["tc", "qdisc", "replace", "dev", dev, "root", "handle", "1:", "tbf", "rate", rate,
                                     "burst", burst, "limit", str(buffer_bytes(resolved))]))
    elif shaper == "htb":
        out.append((topo.router_ns, ["tc", "qdisc", "replace", "dev", dev, "root", "handle", "1:", "htb", "default", "1"]))
        out.append((topo.router_ns, ["tc", "class", "replace", "dev", dev, "parent", "1:", "classid", "1:1", "htb",
                                     "rate", rate, "ceil", rate, "burst", burst, "cburst", burst]))
    else:
        raise ValueError(f"unknown shaper {shaper!r}")
    out.append((topo.router_ns, ["tc", "qdisc", "replace", "dev", dev, "parent", "1:1", "handle", "10:", *aqm_args(resolved)]))
    return out


def setup(resolved: dict[str, Any], topo: Dumbbell, have: dict[str, bool]) -> dict[str, Any]:
    """Bridge the router's ports and install the qdiscs; returns what was set up
    (for the run's metadata)."""
    from pyroute2 import IPRoute

    shaper = "tbf" if have.get("tbf") else "htb"
    br = f"{topo.run_id}-br"
    with IPRoute(netns=topo.router_ns) as r:
        r.link("add", ifname=br, kind="bridge", br_stp_state=0, br_forward_delay=0)
        bidx = r.link_lookup(ifname=br)[0]
        for port in [*topo.router_sender_ports, topo.router_receiver_port]:
            r.link("set", index=r.link_lookup(ifname=port)[0], master=bidx)
        r.link("set", index=bidx, state="up")
    cmds = commands(resolved, topo, shaper)
    for ns, argv in cmds:
        run_in(ns, argv, what="install a qdisc")
    return {"bridge": br, "shaper": shaper, "tc": [[ns, *argv] for ns, argv in cmds]}
