"""A scenario as the guest runs it: the dumbbell, the qdiscs, the flows, as a script.

Read this first. Inside the guest (one kernel, one CPU, virtual time):

```
  ns s0 (10.1.0.2) e0 ─ veth ─ r0 ┐                ┌ rd ─ veth ─ d0  ns d (10.0.0.2)
  ns s1 (10.1.1.2) e0 ─ veth ─ r1 ┤ ns r (router,  │                 one traffic server
   ...                            ┘  ip_forward)   │                 per flow
                                     rd egress: htb at the bottleneck rate
                                                 └ child qdisc = the scenario's
```

- Propagation delay: ``netem delay rtt/2`` on the sender's ``e0`` (data direction)
  and on the router's ``rK`` (ACK direction), so the base RTT is the flow's ``rtt``,
  split equally both ways as in Bhatti et al. (2008). Never on ``rd``: netem never
  shares a qdisc with the bottleneck. netem's ``limit`` is the live backend's
  `netem_limit` (far above anything in flight), so netem never drops.
- Bottleneck: htb on ``rd`` at the rate (it counts whole Ethernet frames, 1514 B for
  a full segment), and the scenario's queue discipline as htb's child, translated
  by `qdisc_args`.
- Every value in the script comes from the validated scenario (integers and names
  checked against the image's manifest) and is quoted with `shlex.join`.
"""

from __future__ import annotations

import math
import re
import shlex
from dataclasses import dataclass, field
from typing import Any

from ...scenario import Scenario
from ..live import iperf
from ..live.kernel_link import TRANSLATABLE, aqm_args, buffer_bytes, buffer_packets, netem_limit
from ..live.netns import HEADER_BYTES
from ..host_settings import RMEM_MIN_DEFAULT, WMEM_MIN_DEFAULT, socket_buffer_max, start_offsets_ns
from .errors import VmError
from .image import Image, dccpgen_binary
from . import queue_trace as queue_trace_guest
from .btf import QueueTraceLayout
from .tcp_probe import FIRST_RTT_TRACE_KB, INFINITE_SSTHRESH, MAX_PROBE_BUFFER_KB, most_events, probe_buffer_kb


#: Version of what a vm run measures and how (guest script, sample placement, meta
#: keys); part of every vm run's content address, so a stored run made under an
#: older version is never reused. 2 (2026-11-25): iperf3 warm-up before t0,
#: samples placed on each flow's measured first data segment. 3 (2026-11-25): RED
#: and CHOKe get the scenario's averaging weight (`w_q`, 0.002 by default) instead of
#: the one tc derives from its recommended burst (backends/live/kernel_link.py).
#: 4 (2026-11-27): the guest sizes its trace buffer per run and exports the trace
#: compressed (--tcp-probe); no measurement changed, but the guest's files did, and
#: with them the virtual time of every event after boot, so a run's bytes differ from
#: a format-3 run of the same seed. 5 (2026-11-29): the guest's input backlog
#: (`net.core.netdev_max_backlog`, 1,000 packets by default) holds everything that can
#: be in flight, so no packet is lost outside the bottleneck queue; before, a sender's
#: burst released by its netem could overflow the router's backlog (3,148 of a
#: Scalable flow's 8,302 losses in a 200-ms, 1-BDP run), and runs now count such
#: losses (`meta.vm.off_path_drops`).
VM_FORMAT_VERSION = 5

#: Which scenarios each format change touched (None: every scenario). A format-3 run
#: of a DropTail cell was made exactly as a format-2 run, so the two are one
#: measurement and may be pooled; `effective_format` says which format a run's
#: measurement really belongs to.
FORMAT_CHANGED_QDISCS: dict[int, frozenset[str] | None] = {
    1: None,
    2: None,
    3: frozenset({"red", "choke"}),
    4: frozenset(),
    # Only runs whose bursts overflowed the 1,000-packet backlog changed (large windows:
    # 200 ms at 1 BDP); which those were, a format-4 run cannot say, so every one is older.
    5: None,
}


def effective_format(version: int, qdisc: str) -> int:
    """The newest format, up to ``version``, whose change touched a run with this
    bottleneck queue discipline: runs with equal effective formats measured the
    same thing the same way."""
    if not 1 <= version <= max(FORMAT_CHANGED_QDISCS):
        # A format this build does not describe: it cannot say what that format changed.
        raise ValueError(f"vm format {version} is not one this fairlab knows (1-{max(FORMAT_CHANGED_QDISCS)}); "
                         "a newer fairlab made that run")
    touched = [v for v, qdiscs in FORMAT_CHANGED_QDISCS.items()
               if v <= version and (qdiscs is None or qdisc in qdiscs)]
    return max(touched) if touched else 1


class VmPlanError(VmError, ValueError):
    """The vm backend cannot run this scenario; the message names the field and the
    backends that can. A ValueError too, as the scenario errors are: the CLI puts the
    scenario's file in front of it."""


#: fairlab queue disciplines with no Linux implementation.
NOT_IN_LINUX = {
    "blue": "BLUE (Feng et al. 2002) was never merged into Linux (sfb is its stochastic-fair variant)",
    "zrtt": "ZRTT (Zhang & Ye 2004) is a research mechanism",
    "mrtt": "MRTT is a research mechanism",
    "prto": "PRTO is a research mechanism",
    "csfq": "CSFQ (Stoica et al. 1998) is a research mechanism",
}
#: Kernel-only qdiscs the vm backend offers by their tc names, each sized from the
#: buffer the way its own `limit` counts: (unit of `limit`, extra fixed arguments).
KERNEL_ONLY = {
    "sfb": ("packets", []),
    "sfq": ("packets", []),
    "fq": ("packets", []),
    "fq_pie": ("packets", []),
    "hhf": ("packets", []),
    "cake": ("bytes", ["unlimited"]),
    "pfifo": ("packets", []),
    "bfifo": ("bytes", []),
}
#: Guest address plan (module doc): receiver subnet and the sender subnets' first octet pair.
RECEIVER_IP, ROUTER_RX_IP = "10.0.0.2", "10.0.0.1"
#: Seconds of virtual time between the servers listening and scenario time 0.
LEAD_NS = 200_000_000
#: Grace after the last flow's scheduled end before the guest stops a stuck client.
GRACE_NS = 10_000_000_000
MAX_FLOWS = 1000
#: Parts of the core kernel with a module-like name (no module to load).
CORE = {"tcp_reno", "sch_pfifo", "sch_bfifo"}
_TOKEN = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")


@dataclass(frozen=True)
class GuestFlow:
    index: int
    label: str
    cca: str
    tool: str  # "iperf3" or "dccpgen"
    port: int
    offset_ns: int
    seconds: int
    sender_ip: str
    router_ip: str


@dataclass
class GuestPlan:
    """Everything one run sends into the guest, and what the host needs to read the results."""

    script: str
    modules: list[str]
    flows: list[GuestFlow]
    qdisc: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    interval_ns: int = 1_000_000_000
    duration_ns: int = 0


def input_backlog(resolved: dict[str, Any]) -> int:
    """`net.core.netdev_max_backlog` for a run: room for every packet the flows can
    have in flight at once (the sum of their netem limits, each already twice a flow's
    BDP at the access rate plus the whole bottleneck buffer), so the input backlog,
    which the scenario does not have, never drops."""
    return sum(netem_limit(resolved, f) for f in resolved["flows"])


def sender_ips(k: int) -> tuple[str, str]:
    """(sender, router) addresses of sender ``k``: 10.(1 + k // 256).(k % 256).{2,1}."""
    a, b = 1 + k // 256, k % 256
    return f"10.{a}.{b}.2", f"10.{a}.{b}.1"


def qdisc_args(resolved: dict[str, Any]) -> tuple[str, list[str]]:
    """(kernel qdisc, its `tc` arguments) for the scenario's bottleneck queue."""
    bn = resolved["bottleneck"]
    q, p = bn["qdisc"], bn["params"]
    if q in NOT_IN_LINUX:
        raise VmPlanError(f"field `bottleneck.qdisc`: {q!r} has no Linux implementation ({NOT_IN_LINUX[q]}), so the vm "
                          "backend cannot run it; the sim backend has it, and so does the live backend's linkem path")
    if q in TRANSLATABLE:
        extra = sorted(set(p) - TRANSLATABLE[q])
        if extra:
            raise VmPlanError(f"field `bottleneck.params`: {q} parameter(s) {extra} have no Linux equivalent; the vm backend "
                              f"translates only {sorted(TRANSLATABLE[q]) or 'none'} (docs/vm.md, 'Queue disciplines')")
        args = aqm_args(resolved)
        return args[0], args
    if q in KERNEL_ONLY:
        unit, fixed = KERNEL_ONLY[q]
        limit = buffer_packets(resolved) if unit == "packets" else buffer_bytes(resolved)
        args = [q, "memlimit" if q == "cake" else "limit", str(limit), *fixed]
        for key, value in sorted(p.items()):
            if isinstance(value, bool):
                if value:
                    args.append(key)
                continue
            token = f"{value:g}" if isinstance(value, float) else str(value)
            if not _TOKEN.match(key) or not _TOKEN.match(token):
                raise VmPlanError(f"field `bottleneck.params.{key}`: a kernel qdisc parameter is a tc keyword and a "
                                  "plain value (letters, digits, `_.:-`)")
            args += [key, token]
        return q, args
    from ..checks import did_you_mean

    raise VmPlanError(f"field `bottleneck.qdisc`: the vm backend has no queue discipline {q!r}"
                      f"{did_you_mean(q, [*TRANSLATABLE, *KERNEL_ONLY, *NOT_IN_LINUX])}; it has droptail, "
                      f"{', '.join(q for q in sorted(TRANSLATABLE) if q != 'droptail')} and the kernel's "
                      f"{', '.join(sorted(KERNEL_ONLY))}")


def check(scenario: Scenario, image: Image, where: str = "") -> None:
    """Raise `VmPlanError` for anything the vm backend would refuse (runs nothing)."""
    build(scenario, image, seed=scenario.seed, where=where)


def build(scenario: Scenario, image: Image, *, seed: int, where: str = "", tcp_probe: bool = False,
          queue_trace: QueueTraceLayout | None = None) -> GuestPlan:
    """The guest script and module list of one run of ``scenario`` with ``seed``;
    ``tcp_probe`` also records every ACK's TCP state at the senders, ``queue_trace``
    (the kernel's field offsets) every packet's fate at the bottleneck."""
    pre = f"{where}: " if where else ""
    resolved = scenario.resolve(seed=seed)
    flows = resolved["flows"]
    labels = [label for label, _ in scenario.expanded_flows()]
    notes: list[str] = []
    if len(flows) > MAX_FLOWS:
        raise VmPlanError(f"{pre}the vm backend runs at most {MAX_FLOWS} flows (one sender namespace each in one guest); "
                          f"this scenario has {len(flows)}")
    interval_s = resolved["interval_ns"] / 1e9
    if not iperf.MIN_INTERVAL_S <= interval_s <= iperf.MAX_INTERVAL_S:
        raise VmPlanError(f"{pre}field `interval`: iperf3 reports every 0.1 to 60 s, so a vm run cannot sample every "
                          f"{interval_s:g} s")
    if resolved["bottleneck"]["loss_rate"]:
        raise VmPlanError(f"{pre}field `bottleneck.loss_rate` is simulator-only (random loss is not a property of a "
                          "Linux queue); remove it or use --backend sim")
    try:
        child, child_args = qdisc_args(resolved)
    except VmPlanError as exc:
        raise VmPlanError(f"{pre}{exc}") from None
    modules = ["veth", "sch_htb", "sch_netem", f"sch_{child}"]
    ccas = set(image.ccas())
    tools = []
    for i, f in enumerate(flows):
        cca = f["cca"]
        if cca == "ccid2":
            if not image.manifest.get("dccp"):
                raise VmPlanError(f"{pre}flow {labels[i]}: ccid2 needs DCCP, and kernel {image.release} has no dccp_ipv4 module")
            if dccpgen_binary() is None:
                raise VmPlanError(f"{pre}flow {labels[i]}: ccid2 needs fairlab's DCCP traffic generator, which is not "
                                  "built; build it with `make dccpgen` (or set FAIRLAB_DCCPGEN to its path)")
            modules.append("dccp_ipv4")
            tools.append("dccpgen")
            continue
        if cca not in ccas:
            raise VmPlanError(f"{pre}flow {labels[i]}: kernel {image.release} has no congestion control {cca!r}; it has "
                              f"{', '.join(sorted(ccas))} (fairlab vm doctor); compound and the RTT-aware router mechanisms "
                              "are simulator-only")
        if f["params"]:
            raise VmPlanError(f"{pre}flow {labels[i]}: congestion-control parameters {sorted(f['params'])} are not applied "
                              "in the vm backend (a kernel module parameter holds for every flow of the guest); remove "
                              "them, or give the kernel your own module defaults with --kernel/--modules")
        modules.append(f"tcp_{cca}")
        tools.append("iperf3")
    idx = image.modules()
    modules = [m for m in modules if m not in CORE]
    try:
        load = idx.load_order([m for m in modules if idx.has(m)])
        missing = [m for m in modules if not idx.has(m)]
    except Exception as exc:  # kmod.ModuleError
        raise VmPlanError(f"{pre}{exc}") from None
    if missing:
        raise VmPlanError(f"{pre}kernel {image.release} lacks module(s) {', '.join(missing)} that this scenario needs")

    offsets = start_offsets_ns(resolved, seed)
    gflows: list[GuestFlow] = []
    for k, (f, label, off, tool) in enumerate(zip(flows, labels, offsets, tools)):
        stop = int(f["stop_ns"]) if f["stop_ns"] is not None else int(resolved["duration_ns"])
        secs = iperf.seconds_for(int(f["start_ns"]), stop)
        if abs(secs - (stop - int(f["start_ns"])) / 1e9) > 1e-6:
            notes.append(f"flow {label}: the traffic generator runs whole seconds, so it sends for {secs} s, not "
                         f"{(stop - int(f['start_ns'])) / 1e9:g} s")
        s_ip, r_ip = sender_ips(k)
        gflows.append(GuestFlow(k, label, f["cca"], tool, iperf.BASE_PORT + k, off, secs, s_ip, r_ip))
    if tcp_probe and any(gf.tool != "iperf3" for gf in gflows):
        raise VmPlanError(f"{pre}the per-ACK trace (tcp:tcp_probe) covers TCP flows only; this scenario has DCCP flows")
    trace_kb = None
    if tcp_probe:
        try:
            trace_kb = probe_buffer_kb(resolved)
        except ValueError as exc:
            raise VmPlanError(f"{pre}{exc}") from None
    queue = None
    if queue_trace is not None:
        why = queue_trace_guest.refusal(child, ecn=any(f["ecn"] for f in flows))
        if why is not None:
            raise VmPlanError(f"{pre}{why}")
        queue_kb = queue_trace_guest.buffer_kb(most_events(resolved))
        if queue_kb + (trace_kb or 0) > MAX_PROBE_BUFFER_KB:
            raise VmPlanError(f"{pre}the queue trace ({queue_kb // 1024} MB) and the per-ACK trace ({(trace_kb or 0) // 1024} MB) "
                              f"together need more of the guest's memory than the {MAX_PROBE_BUFFER_KB // 1024} MB they may "
                              "take; trace a shorter run or one of the two")
        queue = (child, queue_trace, queue_kb)
    script = _script(resolved, gflows, child_args, scenario.offloads, trace_kb, queue)
    return GuestPlan(script=script, modules=load, flows=gflows,
                     qdisc={"kernel": child, "tc": child_args, "shaper": "htb"}, notes=notes,
                     interval_ns=int(resolved["interval_ns"]), duration_ns=int(resolved["duration_ns"]))


def _script(resolved: dict[str, Any], flows: list[GuestFlow], child_args: list[str], offloads: bool,
            trace_kb: int | None = None, queue: tuple[str, QueueTraceLayout, int] | None = None) -> str:
    """The guest script; with ``trace_kb`` (the trace buffer's size, KB) it records
    every ACK of the TCP flows' senders (--tcp-probe), with ``queue`` (the kernel
    qdisc, its field offsets, the buffer's KB) every packet at the bottleneck
    (--queue-trace). Without either, the script is what it was before they existed."""
    tcp_probe = trace_kb is not None
    bn = resolved["bottleneck"]
    lines: list[str] = ["# generated by fairlab.backends.vm.plan for one run; see docs/vm.md", "set -u"]

    def run(argv: list[object], what: str, ns: str | None = None) -> None:
        cmd = _ns_cmd(ns, argv) if ns else _quoted(argv)
        lines.append(f"{cmd} || fl_fail {shlex.quote('could not ' + what)}")

    def tool(name: str) -> str:
        return {"ip": "$IP", "tc": "$TC", "ethtool": "$ETHTOOL"}[name]

    mtu_max = max(int(f["mss"]) + HEADER_BYTES for f in resolved["flows"])
    # ---- namespaces and links
    for ns in ("r", "d"):
        run([tool("ip"), "netns", "add", ns], f"create namespace {ns}")
        run([tool("ip"), "-n", ns, "link", "set", "lo", "up"], f"bring up lo in {ns}")
    run([tool("ip"), "link", "add", "rd", "netns", "r", "type", "veth", "peer", "name", "d0", "netns", "d"], "create the bottleneck veth")
    run([tool("ip"), "-n", "r", "addr", "add", f"{ROUTER_RX_IP}/24", "dev", "rd"], "address rd")
    run([tool("ip"), "-n", "d", "addr", "add", f"{RECEIVER_IP}/24", "dev", "d0"], "address d0")
    for ns, dev in (("r", "rd"), ("d", "d0")):
        run([tool("ip"), "-n", ns, "link", "set", dev, "mtu", mtu_max, "up"], f"bring up {dev}")
    run([tool("ip"), "-n", "d", "route", "add", "default", "via", ROUTER_RX_IP], "route the receiver")
    for gf, f in zip(flows, resolved["flows"]):
        ns, port = f"s{gf.index}", f"r{gf.index}"
        mtu = int(f["mss"]) + HEADER_BYTES
        run([tool("ip"), "netns", "add", ns], f"create namespace {ns}")
        run([tool("ip"), "-n", ns, "link", "set", "lo", "up"], f"bring up lo in {ns}")
        run([tool("ip"), "link", "add", "e0", "netns", ns, "type", "veth", "peer", "name", port, "netns", "r"], f"create veth of {ns}")
        run([tool("ip"), "-n", ns, "addr", "add", f"{gf.sender_ip}/24", "dev", "e0"], f"address {ns}")
        run([tool("ip"), "-n", "r", "addr", "add", f"{gf.router_ip}/24", "dev", port], f"address {port}")
        run([tool("ip"), "-n", ns, "link", "set", "e0", "mtu", mtu, "up"], f"bring up e0 in {ns}")
        run([tool("ip"), "-n", "r", "link", "set", port, "mtu", mtu, "up"], f"bring up {port}")
        run([tool("ip"), "-n", ns, "route", "add", "default", "via", gf.router_ip, "initcwnd", int(f["initial_cwnd"])],
            f"route {ns} (initcwnd)")
        if not f["delayed_ack"]:
            run([tool("ip"), "-n", "d", "route", "add", f"{gf.sender_ip}/32", "via", ROUTER_RX_IP, "quickack", 1],
                f"set quickack towards {ns}")
    if not offloads:
        # A hardware testbed's wire carries MTU-sized packets: no TSO/GSO super-packets
        # at the senders, no GRO aggregation at the router or receiver.
        ends = [("r", "rd"), ("d", "d0")] + [(f"s{gf.index}", "e0") for gf in flows] + [("r", f"r{gf.index}") for gf in flows]
        for ns, dev in ends:
            run(["$ETHTOOL", "-K", dev, "tso", "off", "gso", "off", "gro", "off"], f"turn offloads off on {dev}", ns=ns)
    # ---- sysctls (per namespace)
    run(["/bin/sysctl", "-qw", "net.ipv4.ip_forward=1"], "enable forwarding", ns="r")
    rx_max = 0
    for gf, f in zip(flows, resolved["flows"]):
        m = socket_buffer_max(resolved, int(f["rtt_ns"]))
        rx_max = max(rx_max, m)
        vals = [f"net.ipv4.tcp_rmem={RMEM_MIN_DEFAULT[0]} {RMEM_MIN_DEFAULT[1]} {m}",
                f"net.ipv4.tcp_wmem={WMEM_MIN_DEFAULT[0]} {WMEM_MIN_DEFAULT[1]} {m}",
                f"net.ipv4.tcp_ecn={1 if f['ecn'] else 0}", f"net.ipv4.tcp_sack={1 if f['sack'] else 0}",
                "net.ipv4.tcp_no_metrics_save=1"]
        for v in vals:
            run(["/bin/sysctl", "-qw", v], f"set {v.split('=')[0]} in s{gf.index}", ns=f"s{gf.index}")
    rvals = [f"net.ipv4.tcp_rmem={RMEM_MIN_DEFAULT[0]} {RMEM_MIN_DEFAULT[1]} {rx_max}",
             f"net.ipv4.tcp_wmem={WMEM_MIN_DEFAULT[0]} {WMEM_MIN_DEFAULT[1]} {rx_max}",
             "net.ipv4.tcp_ecn=2", "net.ipv4.tcp_sack=1", "net.ipv4.tcp_no_metrics_save=1"]
    for v in rvals:
        run(["/bin/sysctl", "-qw", v], f"set {v.split('=')[0]} in d", ns="d")
    # iperf3 -w (a flow's `rwnd`) sets SO_RCVBUF/SO_SNDBUF, capped by net.core.rmem_max
    # and wmem_max; those are not per network namespace (Linux 6.1 keeps them in the
    # initial one and refuses them elsewhere), so they are raised once, guest-wide.
    rwnds = [int(f["rwnd_bytes"]) for f in resolved["flows"] if f["rwnd_bytes"]]
    if rwnds:
        for v in (f"net.core.rmem_max={max(max(rwnds), 212992)}", f"net.core.wmem_max={max(max(rwnds), 212992)}"):
            run(["/bin/sysctl", "-qw", v], f"set {v.split('=')[0]}")
    # Every packet a netem releases reaches the next namespace through the CPU's input
    # backlog (veth -> netif_rx), which drops beyond `netdev_max_backlog`; a burst of a
    # large window released at once overflowed the default 1,000 (guest-wide, so set once).
    run(["/bin/sysctl", "-qw", f"net.core.netdev_max_backlog={input_backlog(resolved)}"],
        "size the input backlog")
    # ---- delay (netem) and the bottleneck (htb + child)
    for gf, f in zip(flows, resolved["flows"]):
        delay = f"{max(1, round(int(f['rtt_ns']) / 2 / 1000))}us"
        limit = netem_limit(resolved, f)
        run([tool("tc"), "-n", f"s{gf.index}", "qdisc", "add", "dev", "e0", "root", "netem", "delay", delay, "limit", limit],
            f"add netem on s{gf.index}")
        run([tool("tc"), "-n", "r", "qdisc", "add", "dev", f"r{gf.index}", "root", "netem", "delay", delay, "limit", limit],
            f"add netem on r{gf.index}")
    rate = f"{int(bn['rate_bps'])}bit"
    run([tool("tc"), "-n", "r", "qdisc", "add", "dev", "rd", "root", "handle", "1:", "htb", "default", "1"], "add htb")
    run([tool("tc"), "-n", "r", "class", "add", "dev", "rd", "parent", "1:", "classid", "1:1", "htb", "rate", rate,
         "ceil", rate, "quantum", mtu_max + 14], "add the htb class")
    run([tool("tc"), "-n", "r", "qdisc", "add", "dev", "rd", "parent", "1:1", "handle", "10:", *child_args],
        f"add the {child_args[0]} bottleneck queue")
    # ---- servers, then t0, then clients on schedule, the sampler, and the end
    for gf, f in zip(flows, resolved["flows"]):
        if gf.tool == "iperf3":
            argv: list[object] = ["$IPERF3", "-s", "-p", gf.port, "-1", "-J", "--logfile", f"$RES/server-{gf.index}.json"]
        else:
            argv = ["$DCCPGEN", "server", "--port", gf.port, "--once", "--output", f"$RES/server-{gf.index}.json"]
        lines.append(f"{_ns_cmd('d', argv)} > $RES/server-{gf.index}.out 2> $RES/server-{gf.index}.err &")
    lines.append(_quoted(["fl_wait_listening", "d", *[gf.port for gf in flows if gf.tool == "iperf3"]]))
    if any(gf.tool == "iperf3" for gf in flows):
        lines.append("fl_warm_up")
    lines.append(f"T0=$(( $(fl_now) + {LEAD_NS} ))")
    lines.append("echo $T0 > $RES/t0")
    lines.append("head -1 /proc/stat > $RES/cpu-start")
    lines.append("cat /proc/net/softnet_stat > $RES/softnet-start")
    interval_ns = int(resolved["interval_ns"])
    count = int(math.ceil(int(resolved["duration_ns"]) / interval_ns))
    tcp_ports = [gf.port for gf in flows if gf.tool == "iperf3"]
    if tcp_ports:
        # Always on, cheaply: the first round trip of every TCP connection dates
        # each flow's first data segment; --tcp-probe records every ACK.
        iw = max(int(f["initial_cwnd"]) for f in resolved["flows"])
        first_rtt = f"snd_cwnd <= {iw} && ssthresh >= {INFINITE_SSTHRESH}"
        if tcp_probe:
            lines.append(_quoted(["fl_trace_start", min(tcp_ports), max(tcp_ports), trace_kb]))
        else:
            lines.append(_quoted(["fl_trace_start", min(tcp_ports), max(tcp_ports), FIRST_RTT_TRACE_KB, first_rtt]))
    if queue is not None:
        # Whatever the flows' protocols: a scenario of DCCP flows alone has no TCP
        # trace to mount tracefs for it.
        lines.append("fl_tracefs")
        lines.extend(queue_trace_guest.start_lines(*queue))
    lines.append(f"fl_sampler r rd $T0 {interval_ns} {count} > $RES/sampler.err 2>&1 &")
    lines.append("SAMPLER=$!")
    interval_s = f"{interval_ns / 1e9:g}"
    for gf, f in zip(flows, resolved["flows"]):
        if gf.tool == "iperf3":
            argv = ["$IPERF3", "-c", RECEIVER_IP, "-p", gf.port, "-C", gf.cca, "-J", "-i", interval_s, "-t", gf.seconds]
            if f["bytes"] is not None:
                argv += ["--bytes", int(f["bytes"])]
            if f["rwnd_bytes"] is not None:
                argv += ["-w", int(f["rwnd_bytes"])]
            argv += ["--connect-timeout", 5000, "--logfile", f"$RES/flow-{gf.index}.json"]
        else:
            argv = ["$DCCPGEN", "client", "--host", RECEIVER_IP, "--port", gf.port, "--time", gf.seconds,
                    "--interval", interval_s, "--ccid", 2]
        lines.append(f"fl_launch {gf.index} $((T0 + {gf.offset_ns})) s{gf.index} {_quoted(argv)}")
    end_ns = max(gf.offset_ns + gf.seconds * 1_000_000_000 for gf in flows) + GRACE_NS
    lines.append(f"( fl_sleep_until $((T0 + {end_ns})); touch $RES/deadline; "
                 "for p in $RES/client-*.pid; do kill $(cat $p) 2>/dev/null; done ) &")
    lines.append("WATCHDOG=$!")
    for gf in flows:
        lines.append(f"wait $(cat $RES/client-{gf.index}.pid); echo $? > $RES/client-{gf.index}.rc")
    lines.append("head -1 /proc/stat > $RES/cpu-end")
    lines.append("cat /proc/net/softnet_stat > $RES/softnet-end")
    if tcp_ports:
        lines.append("fl_trace_stop")
    if queue is not None:
        lines.extend(queue_trace_guest.stop_lines())
    lines.append("kill $WATCHDOG 2>/dev/null")
    lines.append("touch $RES/stop-sampler; kill $SAMPLER 2>/dev/null; wait $SAMPLER 2>/dev/null")
    lines.append("sleep 0.5; wait")
    lines.append(_quoted(["fl_collect_final", *[f"s{gf.index}" for gf in flows], "d"]))
    return "\n".join(lines) + "\n"


def _quoted(argv: list[object]) -> str:
    """Shell words, leaving the script's own $VARIABLES (tool paths, $RES) expandable."""
    out = []
    for a in argv:
        s = str(a)
        if re.fullmatch(r"\$[A-Z0-9]+(/[A-Za-z0-9_.-]+)?", s):
            out.append(s)
        else:
            out.append(shlex.quote(s))
    return " ".join(out)


def _ns_cmd(ns: str, argv: list[object]) -> str:
    return "$IP netns exec " + shlex.quote(ns) + " " + _quoted(argv)
