"""The dumbbell topology in network namespaces, built with pyroute2 (DESIGN.md).

Read this first. One run owns (DESIGN.md, "Live runs own what they create"):

```
  ns fl-3f9a-s0 ── veth ──┐                         ┌── veth ── ns fl-3f9a-d
  (sender 0, .1)          │   ns fl-3f9a-r          │   (receiver, .254:
  ns fl-3f9a-s1 ── veth ──┼── L2 bridge: linkem ────┘    one iperf3 server
  (sender 1, .2)          │   or a Linux bridge          per flow)
        ...               │   (no IP addresses)
```

- Every namespace and interface is named ``<run id>-<role>``, the run id being
  ``fl-`` plus 4 hex digits: ``fl-3f9a-s0`` (sender 0's namespace and its end of
  the veth), ``fl-3f9a-r0`` (the router's port towards sender 0), ``fl-3f9a-rd``
  (the router's port towards the receiver), ``fl-3f9a-d`` (the receiver). Names fit
  Linux's 15-character interface limit up to 9999 senders.
- Veth pairs are created INSIDE the namespaces (the peer is placed in its namespace
  by the same netlink request), so nothing is ever created in the root namespace.
- Senders and the receiver share one private /24 (receiver .254, sender i is
  .i+1); the router has no addresses and there are no default routes, so traffic
  cannot leave the run's namespaces. Neighbours are static, so no ARP crosses the
  emulated link and the first data packet does not wait for one.
- Offloads (TSO/GSO/GRO and checksum offload) are turned off on every veth so the
  emulated link and the queue see real wire-sized packets (one MSS each) with
  complete checksums, as a userspace bridge must.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import secrets
import subprocess
from dataclasses import dataclass, field

from .errors import LiveError

#: Every name a live run creates starts with this.
PREFIX = "fl-"
#: A run id: the prefix plus 4 hex digits (cleanup also accepts up to 8).
RUN_ID_RE = re.compile(r"^fl-[0-9a-f]{4,8}$")
#: A name owned by some live run: ``fl-<hex>-<role>``. Nothing else is ever touched.
OWNED_NAME_RE = re.compile(r"^(fl-[0-9a-f]{4,8})-[a-z0-9][a-z0-9-]*$")
#: Where `ip netns` keeps named namespaces.
NETNS_DIR = "/run/netns"
#: IPv4 + TCP + timestamp option bytes around each segment (fairlab.scenario.HEADER_BYTES).
HEADER_BYTES = 52
#: At most this many senders share one /24 (.1 .. .253; the receiver is .254).
MAX_SENDERS = 253


def new_run_id() -> str:
    """A fresh run id not used by any existing namespace."""
    existing = {owner(n) for n in list_namespaces()}
    for _ in range(1000):
        rid = PREFIX + secrets.token_hex(2)
        if rid not in existing:
            return rid
    raise LiveError("could not find a free live run id: more than a thousand fl- runs exist; run `fairlab live cleanup`")


def owner(name: str) -> str | None:
    """The run id owning ``name`` (``fl-3f9a-s0`` → ``fl-3f9a``), or None when the
    name does not have the live-run form."""
    m = OWNED_NAME_RE.match(name)
    return m.group(1) if m else None


def list_namespaces() -> list[str]:
    """Named network namespaces (``ip netns list``)."""
    try:
        return sorted(os.listdir(NETNS_DIR))
    except FileNotFoundError:
        return []


def ns_exec(ns: str, argv: list[str]) -> list[str]:
    """The argument list that runs ``argv`` inside namespace ``ns``. `ip netns exec`
    also remounts /sys for the namespace, which ethtool and sysctl need."""
    return ["ip", "netns", "exec", ns, *argv]


def run_in(ns: str, argv: list[str], *, what: str, timeout: float = 20.0) -> str:
    """Run a short command inside ``ns``; a failure becomes a LiveError quoting it."""
    try:
        cp = subprocess.run(ns_exec(ns, argv), capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise LiveError(f"could not {what} in namespace {ns}: {exc}") from None
    if cp.returncode != 0:
        err = (cp.stderr or cp.stdout).strip().splitlines()
        raise LiveError(f"could not {what} in namespace {ns}: `{' '.join(argv)}` said {err[-1] if err else cp.returncode!r}")
    return cp.stdout


def set_sysctls(ns: str, values: dict[str, str]) -> None:
    """Write sysctls inside ``ns`` (the net.* ones set here are per-namespace)."""
    if values:
        run_in(ns, ["sysctl", "-q", "-w", *[f"{k}={v}" for k, v in values.items()]], what="set sysctls")


def choose_subnet(run_id: str, avoid: list[ipaddress.IPv4Network] | None = None) -> ipaddress.IPv4Network:
    """A private /24 for the run, 10.X.Y.0/24 derived from the run id, skipping any
    that overlaps a network the root namespace uses (so a name clash with the host's
    own addresses cannot confuse a reader of the run's records)."""
    if avoid is None:
        avoid = _host_networks()
    seed = int(run_id[len(PREFIX):], 16)
    for k in range(4096):
        n = (seed + 7919 * k) % (55 * 256)
        net = ipaddress.IPv4Network(f"10.{200 + n // 256}.{n % 256}.0/24")
        if not any(net.overlaps(a) for a in avoid):
            return net
    raise LiveError("found no free private /24 under 10.200.0.0/13 for the run")


def _host_networks() -> list[ipaddress.IPv4Network]:
    from pyroute2 import IPRoute

    out = []
    with IPRoute() as ip:
        for a in ip.get_addr(family=2):
            try:
                out.append(ipaddress.IPv4Network(f"{a.get_attr('IFA_ADDRESS')}/{a['prefixlen']}", strict=False))
            except ValueError:
                continue
    return out


@dataclass
class Endpoint:
    """One host of the dumbbell: its namespace, interface, address and MAC."""

    ns: str
    ifname: str
    ip: str
    mtu: int
    mac: str = ""


@dataclass
class Dumbbell:
    """What `build_dumbbell` made: names and addresses the other modules need."""

    run_id: str
    subnet: str
    router_ns: str
    receiver: Endpoint
    senders: list[Endpoint]
    router_sender_ports: list[str]
    router_receiver_port: str
    offloads: list[str] = field(default_factory=list)

    @property
    def namespaces(self) -> list[str]:
        return [*(s.ns for s in self.senders), self.router_ns, self.receiver.ns]

    def describe(self) -> dict[str, object]:
        """JSON-ready facts for the run's metadata."""
        return {
            "subnet": self.subnet,
            "router_ns": self.router_ns,
            "receiver": {"ns": self.receiver.ns, "ip": self.receiver.ip, "mtu": self.receiver.mtu},
            "senders": [{"ns": s.ns, "ip": s.ip, "mtu": s.mtu} for s in self.senders],
            "router_ports": {"senders": self.router_sender_ports, "receiver": self.router_receiver_port},
            "offloads_off": self.offloads,
        }


#: Sysctls every namespace of a run gets before any interface exists: no IPv6
#: (router solicitations and DAD would be foreign packets on the emulated link).
BASE_SYSCTLS = {"net.ipv6.conf.all.disable_ipv6": "1", "net.ipv6.conf.default.disable_ipv6": "1"}
#: Offloads turned off on every veth (see the module doc).
OFFLOADS = ["tso", "gso", "gro", "tx", "rx"]


def build_dumbbell(run_id: str, sender_mtus: list[int], *, subnet: ipaddress.IPv4Network | None = None,
                   offloads: bool = False) -> Dumbbell:
    """Create the namespaces, veth pairs, addresses and static neighbours of a run.

    ``sender_mtus[i]`` is sender i's link MTU (its flow's MSS + 52); the receiver's
    link gets the largest. Partial work is left for the caller's cleanup (which
    removes everything named after the run) when this raises.
    """
    from pyroute2 import IPRoute, netns
    from pyroute2.netlink.exceptions import NetlinkError

    if not RUN_ID_RE.match(run_id):
        raise ValueError(f"not a run id: {run_id!r}")
    n = len(sender_mtus)
    if not 1 <= n <= MAX_SENDERS:
        raise LiveError(f"a live run takes 1 to {MAX_SENDERS} flows (one sender namespace each on one /24); this scenario has {n}")
    net = subnet or choose_subnet(run_id)
    hosts = list(net.hosts())
    rx_mtu = max(sender_mtus)
    topo = Dumbbell(
        run_id=run_id,
        subnet=str(net),
        router_ns=f"{run_id}-r",
        receiver=Endpoint(ns=f"{run_id}-d", ifname=f"{run_id}-d", ip=str(hosts[-1]), mtu=rx_mtu),
        senders=[Endpoint(ns=f"{run_id}-s{i}", ifname=f"{run_id}-s{i}", ip=str(hosts[i]), mtu=m) for i, m in enumerate(sender_mtus)],
        router_sender_ports=[f"{run_id}-r{i}" for i in range(n)],
        router_receiver_port=f"{run_id}-rd",
    )
    try:
        for ns in topo.namespaces:
            netns.create(ns)
            set_sysctls(ns, BASE_SYSCTLS)
        with IPRoute(netns=topo.router_ns) as r:
            pairs = [(p, s) for p, s in zip(topo.router_sender_ports, topo.senders)]
            pairs.append((topo.router_receiver_port, topo.receiver))
            for port, host in pairs:
                r.link("add", ifname=port, kind="veth", peer={"ifname": host.ifname, "net_ns_fd": host.ns})
                idx = r.link_lookup(ifname=port)[0]
                r.link("set", index=idx, mtu=host.mtu, state="up")
            r.link("set", index=r.link_lookup(ifname="lo")[0], state="up")
        for host in [*topo.senders, topo.receiver]:
            with IPRoute(netns=host.ns) as h:
                idx = h.link_lookup(ifname=host.ifname)[0]
                h.link("set", index=idx, mtu=host.mtu)
                h.addr("add", index=idx, address=host.ip, prefixlen=net.prefixlen)
                h.link("set", index=idx, state="up")
                h.link("set", index=h.link_lookup(ifname="lo")[0], state="up")
                host.mac = h.get_links(idx)[0].get_attr("IFLA_ADDRESS")
        _static_neighbours(topo)
    except NetlinkError as exc:
        raise LiveError(f"could not build the run's namespaces and links: netlink error {exc.code} ({exc})", run_id=run_id) from None
    if not offloads:
        for host in [*topo.senders, topo.receiver]:
            _offloads_off(host.ns, host.ifname, topo)
        for port in [*topo.router_sender_ports, topo.router_receiver_port]:
            _offloads_off(topo.router_ns, port, topo)
    return topo


def _static_neighbours(topo: Dumbbell) -> None:
    from pyroute2 import IPRoute

    permanent = 0x80  # NUD_PERMANENT
    with IPRoute(netns=topo.receiver.ns) as rx:
        idx = rx.link_lookup(ifname=topo.receiver.ifname)[0]
        for s in topo.senders:
            rx.neigh("replace", dst=s.ip, lladdr=s.mac, ifindex=idx, state=permanent)
    for s in topo.senders:
        with IPRoute(netns=s.ns) as h:
            idx = h.link_lookup(ifname=s.ifname)[0]
            h.neigh("replace", dst=topo.receiver.ip, lladdr=topo.receiver.mac, ifindex=idx, state=permanent)


def _offloads_off(ns: str, ifname: str, topo: Dumbbell) -> None:
    argv = ["ethtool", "-K", ifname]
    for feat in OFFLOADS:
        argv += [feat, "off"]
    run_in(ns, argv, what=f"turn offloads off on {ifname}")
    topo.offloads.append(ifname)


def add_host_route(ns: str, ifname: str, dst: str, metrics: dict[str, int]) -> None:
    """A /32 route to ``dst`` carrying TCP route metrics (initcwnd, quickack …); more
    specific than the connected /24, so it applies to the flow's connection only."""
    from pyroute2 import IPRoute

    with IPRoute(netns=ns) as h:
        idx = h.link_lookup(ifname=ifname)[0]
        h.route("replace", dst=f"{dst}/32", oif=idx, scope=253, metrics=metrics)


def remove_namespace(name: str) -> None:
    """Delete one named namespace (and with it every interface inside)."""
    from pyroute2 import netns

    try:
        netns.remove(name)
    except FileNotFoundError:
        pass


def link_tx_drops(text: str | None) -> dict[str, int]:
    """Per interface of one namespace (``ip -j -s link show``), the packets it handed on
    that were dropped; a veth counts its peer's refusals (a full input backlog,
    `net.core.netdev_max_backlog`) as its own tx drops. Only interfaces with drops."""
    try:
        links = json.loads(text or "")
    except ValueError:
        return {}
    out = {}
    for link in links if isinstance(links, list) else []:
        dropped = int(((link.get("stats64") or {}).get("tx") or {}).get("dropped", 0))
        if dropped:
            out[str(link.get("ifname"))] = dropped
    return out


def off_path_link_drops(topo: Dumbbell) -> dict[str, int] | None:
    """Every veth of the run that dropped packets it handed on, as "namespace/ifname"
    → count: losses outside the emulated bottleneck. None if a namespace's counters
    could not be read."""
    out: dict[str, int] = {}
    for ns in topo.namespaces:
        r = subprocess.run(["ip", "-n", ns, "-j", "-s", "link", "show"], capture_output=True, text=True, check=False)
        if r.returncode != 0:
            return None
        out.update({f"{ns}/{dev}": n for dev, n in link_tx_drops(r.stdout).items()})
    return out
