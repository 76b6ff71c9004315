#!/usr/bin/env python3
"""Two-flow dumbbell in ns-3, for cross-checking fairlab's packet-level simulator.

Run it with the ns-3 Python bindings from PyPI (``pip install ns3``, ns-3 3.44), in a
venv of its own — NOT fairlab's:

    /tmp/ns3venv/bin/python validation/ns3/dumbbell.py --rtt 50ms --buffer 417 \
        --cca1 TcpNewReno --cca2 TcpNewReno --duration 120 --start2 10 > a.csv

Topology (the one fairlab builds for a two-flow scenario)::

    sender 0 --\                                   /-- receiver 0
                router A ==== bottleneck ==== router B
    sender 1 --/   DropTail queue of --buffer      \-- receiver 1
                   packets, RTT/2 one-way delay

* access links (senders -> A, B -> receivers) run at 10x the bottleneck rate with no
  delay, so the whole two-way propagation delay (--rtt) is on the bottleneck, split
  equally between the two directions;
* the only queue that can fill is the bottleneck's DropTail device queue (ns-3's
  default queue discs are removed; the senders' own NIC queues are made big enough
  never to drop);
* TCP: MSS 1448 bytes, timestamps and SACK on, delayed ACK every 2 segments (40 ms
  timer, as fairlab), initial window 10, socket buffers far above the BDP;
* goodput is sampled every --interval seconds at each receiver's PacketSink (bytes
  delivered to the application), stamped with the END of the interval.

Output on stdout: CSV ``time,flow,throughput_bps``; flow is 0 or 1. The CSV goes
straight into ``fairlab analyze FILE --unit bps``.
"""

from __future__ import annotations

import argparse
import sys
import time


def seconds(text: str) -> float:
    """'50ms' -> 0.05, '2s' -> 2.0, '10' -> 10.0."""
    text = text.strip()
    for suffix, scale in (("ms", 1e-3), ("us", 1e-6), ("s", 1.0)):
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * scale
    return float(text)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rate", default="100Mbps", help="bottleneck rate, ns-3 DataRate syntax (default 100Mbps)")
    ap.add_argument("--rtt", default="50ms", help="two-way propagation delay (default 50ms)")
    ap.add_argument("--buffer", type=int, required=True, help="bottleneck DropTail queue, packets")
    ap.add_argument("--cca1", default="TcpNewReno", help="ns-3 TCP type of flow 0 (TcpNewReno, TcpCubic, ...)")
    ap.add_argument("--cca2", default="TcpNewReno", help="ns-3 TCP type of flow 1")
    ap.add_argument("--start2", type=float, default=10.0, help="start time of flow 1, s (flow 0 starts at 0)")
    ap.add_argument("--duration", type=float, default=120.0, help="simulated time, s")
    ap.add_argument("--interval", type=float, default=1.0, help="sampling interval, s")
    ap.add_argument("--mss", type=int, default=1448)
    ap.add_argument("--recovery", default="TcpClassicRecovery",
                    help="ns-3 recovery type: TcpClassicRecovery (RFC 6675 with SACK, as fairlab) or TcpPrrRecovery (ns-3 default)")
    ap.add_argument("--seed", type=int, default=1, help="ns-3 RngRun")
    args = ap.parse_args()

    from ns import ns  # imported late: it takes a few seconds

    wall0 = time.perf_counter()
    ns.RngSeedManager.SetRun(args.seed)

    rate = ns.DataRate(args.rate)
    access_rate = ns.DataRate(rate.GetBitRate() * 10)
    one_way = ns.Seconds(seconds(args.rtt) / 2)

    # --- TCP defaults, for every socket ---
    def default(name, value):
        ns.Config.SetDefault(name, value)

    default("ns3::TcpSocket::SegmentSize", ns.UintegerValue(args.mss))
    default("ns3::TcpSocket::InitialCwnd", ns.UintegerValue(10))
    default("ns3::TcpSocket::DelAckCount", ns.UintegerValue(2))
    default("ns3::TcpSocket::DelAckTimeout", ns.TimeValue(ns.MilliSeconds(40)))
    default("ns3::TcpSocket::SndBufSize", ns.UintegerValue(1 << 26))
    default("ns3::TcpSocket::RcvBufSize", ns.UintegerValue(1 << 26))
    default("ns3::TcpSocketBase::Sack", ns.BooleanValue(True))
    default("ns3::TcpSocketBase::Timestamp", ns.BooleanValue(True))
    default("ns3::TcpSocketBase::WindowScaling", ns.BooleanValue(True))
    default("ns3::TcpL4Protocol::RecoveryType",
            ns.TypeIdValue(ns.TypeId.LookupByName("ns3::" + args.recovery)))

    # --- nodes: 0,1 senders; 2 router A; 3 router B; 4,5 receivers ---
    nodes = ns.NodeContainer()
    nodes.Create(6)
    senders, router_a, router_b, receivers = (0, 1), 2, 3, (4, 5)

    stack = ns.InternetStackHelper()
    stack.Install(nodes)
    for i, cca in zip(senders, (args.cca1, args.cca2)):
        ns.Config.Set(f"/NodeList/{i}/$ns3::TcpL4Protocol/SocketType",
                      ns.TypeIdValue(ns.TypeId.LookupByName("ns3::" + cca)))

    def link(a, b, data_rate, delay, queue_packets):
        p2p = ns.PointToPointHelper()
        p2p.SetDeviceAttribute("DataRate", ns.DataRateValue(data_rate))
        p2p.SetChannelAttribute("Delay", ns.TimeValue(delay))
        p2p.SetQueue("ns3::DropTailQueue<Packet>", "MaxSize", ns.StringValue(f"{queue_packets}p"))
        return p2p.Install(nodes.Get(a), nodes.Get(b))

    big = 100_000  # packets: a queue that never drops
    devices = [
        link(senders[0], router_a, access_rate, ns.Seconds(0), big),
        link(senders[1], router_a, access_rate, ns.Seconds(0), big),
        link(router_a, router_b, rate, one_way, args.buffer),  # the bottleneck
        link(router_b, receivers[0], access_rate, ns.Seconds(0), big),
        link(router_b, receivers[1], access_rate, ns.Seconds(0), big),
    ]
    addresses = ns.Ipv4AddressHelper()
    interfaces = []
    for k, dev in enumerate(devices):
        addresses.SetBase(ns.Ipv4Address(f"10.0.{k}.0"), ns.Ipv4Mask("255.255.255.0"))
        interfaces.append(addresses.Assign(dev))
        # Assign() installs ns-3's default queue disc (FqCoDel); remove it so the
        # device's DropTail queue is the only queue, as in a plain DropTail router.
        ns.TrafficControlHelper().Uninstall(dev)
    ns.Ipv4GlobalRoutingHelper.PopulateRoutingTables()

    # --- applications: bulk senders, packet sinks ---
    port = 5000
    sinks = []
    for flow, (s, r) in enumerate(zip(senders, receivers)):
        dst = interfaces[3 + flow].GetAddress(1)
        bulk = ns.BulkSendHelper("ns3::TcpSocketFactory",
                                 ns.InetSocketAddress(dst, port).ConvertTo())
        bulk.SetAttribute("MaxBytes", ns.UintegerValue(0))
        bulk.SetAttribute("SendSize", ns.UintegerValue(args.mss))
        app = bulk.Install(nodes.Get(s))
        app.Start(ns.Seconds(0.0 if flow == 0 else args.start2))
        app.Stop(ns.Seconds(args.duration))
        sink_helper = ns.PacketSinkHelper("ns3::TcpSocketFactory",
                                          ns.InetSocketAddress(ns.Ipv4Address.GetAny(), port).ConvertTo())
        sink_app = sink_helper.Install(nodes.Get(r))
        sink_app.Start(ns.Seconds(0.0))
        sinks.append(ns.DynamicCast[ns.PacketSink](sink_app.Get(0)))

    # --- run, one sampling interval at a time ---
    out = sys.stdout
    out.write("time,flow,throughput_bps\n")
    last = [0, 0]
    steps = round(args.duration / args.interval)
    for k in range(1, steps + 1):
        ns.Simulator.Stop(ns.Seconds(args.interval))
        ns.Simulator.Run()
        t = k * args.interval
        for flow, sink in enumerate(sinks):
            total = sink.GetTotalRx()
            start = 0.0 if flow == 0 else args.start2
            if t > start:  # a flow not yet started is absent, not zero
                out.write(f"{t:g},{flow},{(total - last[flow]) * 8 / args.interval:.1f}\n")
            last[flow] = total
    ns.Simulator.Destroy()
    print(f"ns-3 simulation wall time: {time.perf_counter() - wall0:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
