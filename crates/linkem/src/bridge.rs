//! The emulator's core, sans-IO: frames and `now` in, frames to send out. It reads
//! no clock and touches no socket, so every behaviour is testable with fake time
//! (STYLE.md §1).
//!
//! Read this first — the model, a dumbbell folded into one box:
//!
//! ```text
//!  sender port k ──► delay line k ──► bottleneck qdisc ──► link at rate_bps ──► receiver port
//!  (one_way_delay_k, FIFO)          (aqm::build, Accounted)  (virtual tx clock)
//!
//!  receiver port ──► reverse link at reverse_rate (optional, DropTail) ──► delay line k ──► sender port k
//!                    (k = the sender port that learned the frame's destination MAC)
//! ```
//!
//! Group-addressed (ARP, IPv6 ND) frames and frames to unknown destinations are
//! flooded at once, without delay or queueing: they only make L2 work.
//!
//! Time: everything happens at an explicit instant. [`Bridge::poll`] runs, in time
//! order, every event due at or before `now` — each at its *own* instant, not at
//! `now` — so a late wake-up of the I/O loop catches up exactly: the link's
//! transmissions stay `tx_time` apart (the virtual transmission clock), and the
//! long-run rate is exact whatever the loop's jitter. A frame leaves the link when
//! its last bit is serialised (start + `tx_time`), as on a real link.
//!
//! Delay lines are FIFOs, not heaps: within one port the delay is constant, so the
//! release order is the arrival order; the earliest event overall is the minimum
//! over a handful of queue heads. Ties break by a fixed order (forward releases by
//! port, then link completions, then reverse releases by port), so a run is
//! deterministic given its inputs.

use std::collections::VecDeque;

use aqm::{Accounted, DropReason, DropTail, DropTailConfig, Limit, MarkReason, Packet, PacketMeta, Qdisc, Verdict};
use netunits::{Bandwidth, SimDuration, SimRng, SimTime};

use crate::flows::{FastMap, FlowTable};
use crate::frame::{self, Mac, ETH_HLEN};

/// Index of a port: `0..n` are the sender ports in config order, `n` is the receiver.
pub type PortId = usize;

/// Size of the opaque per-frame offload header (`struct virtio_net_hdr`) the socket
/// layer receives with each frame and must hand back when sending it. The core
/// carries it and never reads it.
pub const OFFLOAD_LEN: usize = 10;

/// One Ethernet frame in flight through the emulator.
#[derive(Debug, Clone)]
pub struct Frame {
    /// The frame from the destination MAC on (no FCS).
    pub data: Vec<u8>,
    /// Checksum/segmentation-offload header to send the frame with.
    pub offload: [u8; OFFLOAD_LEN],
    meta: PacketMeta,
    ipv4_at: Option<usize>,
    /// Port the frame will leave by.
    to: PortId,
}

impl Frame {
    /// Header facts the qdisc sees.
    pub fn meta_ref(&self) -> &PacketMeta {
        &self.meta
    }
}

impl Packet for Frame {
    fn meta(&self) -> &PacketMeta {
        &self.meta
    }
    /// Set CE in the IPv4 header and fix its checksum (RFC 3168 §5, RFC 791).
    fn mark_ce(&mut self) {
        if let Some(at) = self.ipv4_at {
            if frame::set_ce(&mut self.data, at) {
                self.meta.ecn_capable = true;
            }
        }
    }
}

/// A frame to transmit now on `port`.
#[derive(Debug)]
pub struct Egress {
    /// Where to send it.
    pub port: PortId,
    /// What to send.
    pub frame: Frame,
}

/// Everything the core is built from; `main` derives it from the config, tests
/// write it by hand.
pub struct BridgeSetup {
    /// One-way delay of each sender port, in port order.
    pub delays: Vec<SimDuration>,
    /// Bottleneck rate; `None` is unlimited.
    pub rate: Option<Bandwidth>,
    /// Reverse path rate; `None` is unlimited.
    pub reverse_rate: Option<Bandwidth>,
    /// The reverse path's buffer when it is rate-limited (a DropTail of this size).
    pub reverse_limit: Limit,
    /// The bottleneck discipline.
    pub qdisc: Box<dyn Qdisc<Frame>>,
    /// The bottleneck discipline's random stream.
    pub rng: SimRng,
}

/// Cumulative counters of the forward (bottleneck) direction and the rest.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Totals {
    /// Frames sent out of the receiver port through the bottleneck.
    pub forwarded_pkts: u64,
    /// Their IP bytes (frame length minus the Ethernet header, like the qdisc counts).
    pub forwarded_bytes: u64,
    /// Frames delivered back to sender ports through the reverse path.
    pub reverse_pkts: u64,
    /// Reverse-path frames dropped because its buffer was full.
    pub reverse_drops: u64,
    /// Frames flooded (group or unknown destination).
    pub flooded: u64,
    /// Frames too short to carry an Ethernet header, discarded.
    pub runts: u64,
}

/// A link that serialises one frame at a time at `rate`.
struct Link {
    rate: Option<Bandwidth>,
    /// The frame being serialised and the instant its last bit leaves.
    on_wire: Option<(SimTime, Frame)>,
}

impl Link {
    fn tx_time(&self, f: &Frame) -> SimDuration {
        // The whole frame is serialised (Ethernet header included, no preamble/IFG):
        // the same bytes tc's rate limiters count.
        self.rate.map_or(SimDuration::ZERO, |r| r.tx_time(f.data.len() as u64))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Event {
    ForwardRelease(PortId),
    ForwardDone,
    ReverseDone,
    ReverseRelease(PortId),
}

/// The emulator core.
pub struct Bridge {
    delays: Vec<SimDuration>,
    forward_lines: Vec<VecDeque<(SimTime, Frame)>>,
    queue: Accounted<Box<dyn Qdisc<Frame>>>,
    link: Link,
    reverse_queue: Option<Accounted<DropTail<Frame>>>,
    reverse_link: Link,
    reverse_lines: Vec<VecDeque<(SimTime, Frame)>>,
    macs: FastMap<Mac, PortId>,
    flows: FlowTable,
    rng: SimRng,
    dropped: Vec<(Frame, DropReason)>,
    marked: Vec<MarkReason>,
    totals: Totals,
}

impl Bridge {
    /// A bridge with empty lines and queues.
    pub fn new(s: BridgeSetup) -> Result<Bridge, aqm::ConfigError> {
        let n = s.delays.len();
        let reverse_queue = match s.reverse_rate {
            Some(_) => Some(Accounted::new(DropTail::new(DropTailConfig { limit: s.reverse_limit })?)),
            None => None,
        };
        Ok(Bridge {
            forward_lines: (0..n).map(|_| VecDeque::new()).collect(),
            reverse_lines: (0..n).map(|_| VecDeque::new()).collect(),
            delays: s.delays,
            queue: Accounted::new(s.qdisc),
            link: Link { rate: s.rate, on_wire: None },
            reverse_queue,
            reverse_link: Link { rate: s.reverse_rate, on_wire: None },
            macs: FastMap::default(),
            flows: FlowTable::new(),
            rng: s.rng,
            dropped: Vec::new(),
            marked: Vec::new(),
            totals: Totals::default(),
        })
    }

    /// Number of sender ports; the receiver port's id.
    pub fn receiver(&self) -> PortId {
        self.delays.len()
    }

    /// A frame arrived on `port` at `now`. Floods go to `out` immediately; everything
    /// else enters a delay line or the reverse link and leaves through [`poll`].
    ///
    /// [`poll`]: Bridge::poll
    pub fn on_frame(&mut self, now: SimTime, port: PortId, data: Vec<u8>, offload: [u8; OFFLOAD_LEN], out: &mut Vec<Egress>) {
        let Some(h) = frame::parse(&data) else {
            self.totals.runts += 1;
            return;
        };
        let rx = self.receiver();
        let mut meta = PacketMeta {
            bytes: (data.len() - ETH_HLEN) as u32,
            // RFC 3168 §5: ECT(1) = 01, ECT(0) = 10; CE (11) is also from an ECN-capable
            // transport (already marked upstream).
            ecn_capable: h.ecn != 0,
            is_ack: h.tcp.is_some_and(|t| t.payload_len == 0),
            ..PacketMeta::default()
        };
        let mut f = Frame { data, offload, meta, ipv4_at: h.ipv4_at, to: rx };

        if port < rx {
            if !h.src.is_group() {
                self.macs.insert(h.src, port);
            }
            if h.dst.is_group() {
                return self.flood(port, f, out);
            }
            if let Some(&j) = self.macs.get(&h.dst) {
                // Sender to sender: not part of the dumbbell; bridge it straight over.
                if j != port {
                    f.to = j;
                    out.push(Egress { port: j, frame: f });
                }
                return;
            }
            meta.flow = self.flows.id(h.flow);
            if let Some((tsval, _)) = h.tcp.and_then(|t| t.timestamps) {
                self.flows.on_forward_tsval(meta.flow, tsval, now);
            }
            meta.passive_rtt_us = self.flows.passive_rtt_us(meta.flow);
            f.meta = meta;
            let release = now + self.delays[port];
            self.forward_lines[port].push_back((release, f));
            // A zero delay is due now; run it so the frame is not held for a wake-up.
            self.poll(now, out);
        } else {
            let dest = if h.dst.is_group() { None } else { self.macs.get(&h.dst).copied() };
            let Some(k) = dest else {
                return self.flood(port, f, out);
            };
            // Reverse frames are flows of their own for the reverse DropTail; the id of
            // the forward flow they acknowledge is what the RTT estimate needs.
            if let (Some(fwd), Some((_, tsecr))) = (self.flows.get(&h.flow.reversed()), h.tcp.and_then(|t| t.timestamps)) {
                self.flows.on_reverse_tsecr(fwd, tsecr, now, self.delays[k]);
            }
            meta.flow = self.flows.id(h.flow);
            f.meta = meta;
            f.to = k;
            match self.reverse_queue.as_mut() {
                None => self.reverse_lines[k].push_back((now + self.delays[k], f)),
                Some(q) => {
                    if let Verdict::Drop(_) = q.enqueue(now, f, &mut self.rng, &mut self.dropped) {
                        self.totals.reverse_drops += 1;
                    }
                    self.dropped.clear();
                    if self.reverse_link.on_wire.is_none() {
                        self.start_reverse(now);
                    }
                }
            }
            self.poll(now, out);
        }
    }

    fn flood(&mut self, from: PortId, f: Frame, out: &mut Vec<Egress>) {
        self.totals.flooded += 1;
        let ports: Vec<PortId> = (0..=self.receiver()).filter(|&p| p != from).collect();
        let last = ports.len().saturating_sub(1);
        let mut f = Some(f);
        for (i, p) in ports.into_iter().enumerate() {
            let mut g = if i == last { f.take().expect("moved once, at the last port") } else { f.clone().expect("still here") };
            g.to = p;
            out.push(Egress { port: p, frame: g });
        }
    }

    /// The earliest pending event, if any.
    fn next_event(&self) -> Option<(SimTime, Event)> {
        let mut best: Option<(SimTime, Event)> = None;
        let mut consider = |t: SimTime, e: Event| {
            if best.is_none_or(|(b, _)| t < b) {
                best = Some((t, e));
            }
        };
        for (k, line) in self.forward_lines.iter().enumerate() {
            if let Some((t, _)) = line.front() {
                consider(*t, Event::ForwardRelease(k));
            }
        }
        if let Some((t, _)) = &self.link.on_wire {
            consider(*t, Event::ForwardDone);
        }
        if let Some((t, _)) = &self.reverse_link.on_wire {
            consider(*t, Event::ReverseDone);
        }
        for (k, line) in self.reverse_lines.iter().enumerate() {
            if let Some((t, _)) = line.front() {
                consider(*t, Event::ReverseRelease(k));
            }
        }
        best
    }

    /// When the core next needs [`poll`](Bridge::poll), or `None` if it holds nothing.
    pub fn next_wakeup(&self) -> Option<SimTime> {
        self.next_event().map(|(t, _)| t)
    }

    /// Run every event due at or before `now`, each at its own instant; frames to
    /// send go to `out` in the order they are due.
    pub fn poll(&mut self, now: SimTime, out: &mut Vec<Egress>) {
        while let Some((t, ev)) = self.next_event() {
            if t > now {
                break;
            }
            match ev {
                Event::ForwardRelease(k) => {
                    let (_, f) = self.forward_lines[k].pop_front().expect("event came from this line's head");
                    self.queue.enqueue(t, f, &mut self.rng, &mut self.dropped);
                    // Dropped frames are simply freed; Accounted has counted them.
                    self.dropped.clear();
                    if self.link.on_wire.is_none() {
                        self.start_forward(t);
                    }
                }
                Event::ForwardDone => {
                    let (_, f) = self.link.on_wire.take().expect("event came from the wire");
                    self.totals.forwarded_pkts += 1;
                    self.totals.forwarded_bytes += u64::from(f.meta.bytes);
                    out.push(Egress { port: f.to, frame: f });
                    self.start_forward(t);
                }
                Event::ReverseDone => {
                    let (_, f) = self.reverse_link.on_wire.take().expect("event came from the wire");
                    let k = f.to;
                    self.reverse_lines[k].push_back((t + self.delays[k], f));
                    self.start_reverse(t);
                }
                Event::ReverseRelease(k) => {
                    let (_, f) = self.reverse_lines[k].pop_front().expect("event came from this line's head");
                    self.totals.reverse_pkts += 1;
                    out.push(Egress { port: k, frame: f });
                }
            }
        }
    }

    /// The bottleneck link is free at `t`: start serialising the next frame, if the
    /// discipline hands one out.
    fn start_forward(&mut self, t: SimTime) {
        let next = self.queue.dequeue(t, &mut self.rng, &mut self.dropped, &mut self.marked);
        self.dropped.clear();
        self.marked.clear();
        if let Some(f) = next {
            let done = t + self.link.tx_time(&f);
            self.link.on_wire = Some((done, f));
        }
    }

    fn start_reverse(&mut self, t: SimTime) {
        let Some(q) = self.reverse_queue.as_mut() else { return };
        if let Some(f) = q.dequeue(t, &mut self.rng, &mut self.dropped, &mut self.marked) {
            let done = t + self.reverse_link.tx_time(&f);
            self.reverse_link.on_wire = Some((done, f));
        }
        self.dropped.clear();
        self.marked.clear();
    }

    /// Drop and mark counters of the bottleneck discipline.
    pub fn counters(&self) -> &aqm::Counters {
        self.queue.counters()
    }

    /// Bytes queued in the bottleneck discipline now (not counting the frame on the wire).
    pub fn queue_bytes(&self) -> u64 {
        self.queue.len_bytes::<Frame>()
    }

    /// Packets queued in the bottleneck discipline now.
    pub fn queue_packets(&self) -> usize {
        self.queue.len_packets::<Frame>()
    }

    /// Forwarding totals.
    pub fn totals(&self) -> &Totals {
        &self.totals
    }

    /// Number of distinct flows seen (both directions).
    pub fn flow_count(&self) -> usize {
        self.flows.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::tests::{header_sums_to_ffff, tcp_frame};
    use aqm::QdiscContext;

    const S0: [u8; 6] = [2, 0, 0, 0, 0, 0x10];
    const S1: [u8; 6] = [2, 0, 0, 0, 0, 0x11];
    const R: [u8; 6] = [2, 0, 0, 0, 0, 0x20];
    const BCAST: [u8; 6] = [0xff; 6];
    const IP_S0: [u8; 4] = [192, 0, 2, 10];
    const IP_S1: [u8; 4] = [192, 0, 2, 11];
    const IP_R: [u8; 4] = [192, 0, 2, 20];

    fn ms(x: u64) -> SimTime {
        SimTime::from_millis(x)
    }
    fn us(x: u64) -> SimTime {
        SimTime::from_micros(x)
    }

    fn bridge(delays_ms: &[u64], rate: Option<u64>, reverse_rate: Option<u64>, qdisc: &str, limit: Limit) -> Bridge {
        let ctx = QdiscContext {
            limit,
            rate_bps: rate.unwrap_or(100_000_000_000),
            mean_packet_bytes: 1500,
            reference_rtt: SimDuration::from_millis(100),
        };
        let params = match qdisc {
            // RED on the instantaneous queue (w_q = 1) that marks often between 1
            // and 100 packets and never reaches its forced-drop region in the test.
            "red" => serde_json::json!({"min_th": 1, "max_th": 100, "max_p": 1.0, "w_q": 1.0, "ecn": true}),
            _ => serde_json::json!({}),
        };
        let q = aqm::build::<Frame>(qdisc, params.as_object().unwrap(), &ctx).unwrap();
        Bridge::new(BridgeSetup {
            delays: delays_ms.iter().map(|&d| SimDuration::from_millis(d)).collect(),
            rate: rate.map(Bandwidth::from_bps),
            reverse_rate: reverse_rate.map(Bandwidth::from_bps),
            reverse_limit: limit,
            qdisc: q,
            rng: netunits::rng_stream(1, 1),
        })
        .unwrap()
    }

    /// A data segment from sender `src` (MAC, IP, port) to the receiver; `len` is the
    /// whole frame length.
    fn data(src: [u8; 6], ip: [u8; 4], sport: u16, len: usize) -> Vec<u8> {
        tcp_frame(R, src, ip, IP_R, sport, 5201, 0, len - 54, None)
    }

    fn arp_from(src: [u8; 6]) -> Vec<u8> {
        let mut f = BCAST.to_vec();
        f.extend_from_slice(&src);
        f.extend_from_slice(&[0x08, 0x06]);
        f.extend_from_slice(&[0; 28]);
        f
    }

    /// Drive the bridge in fake time: deliver `arrivals` (time, port, frame) and poll at
    /// every instant the core asks for, collecting (time, port, frame) departures.
    fn run(b: &mut Bridge, mut arrivals: Vec<(SimTime, PortId, Vec<u8>)>) -> Vec<(SimTime, PortId, Vec<u8>)> {
        arrivals.sort_by_key(|a| a.0);
        let mut arrivals: VecDeque<_> = arrivals.into();
        let mut sent = Vec::new();
        let mut out = Vec::new();
        loop {
            let ta = arrivals.front().map(|a| a.0);
            let tw = b.next_wakeup();
            let now = match (ta, tw) {
                (None, None) => break,
                (Some(a), Some(w)) => a.min(w),
                (Some(a), None) => a,
                (None, Some(w)) => w,
            };
            while arrivals.front().is_some_and(|a| a.0 == now) {
                let (t, p, d) = arrivals.pop_front().unwrap();
                b.on_frame(t, p, d, [0; OFFLOAD_LEN], &mut out);
            }
            b.poll(now, &mut out);
            sent.extend(out.drain(..).map(|e| (now, e.port, e.frame.data)));
        }
        sent
    }

    #[test]
    fn a_frame_is_released_exactly_one_delay_after_arrival() {
        let mut b = bridge(&[10, 25], None, None, "droptail", Limit::Packets(100));
        let sent = run(
            &mut b,
            vec![
                (us(1_234), 0, data(S0, IP_S0, 1, 100)),
                (us(2_000), 1, data(S1, IP_S1, 2, 100)),
                (us(3_000), 0, data(S0, IP_S0, 1, 100)),
            ],
        );
        let times: Vec<(SimTime, PortId)> = sent.iter().map(|s| (s.0, s.1)).collect();
        assert_eq!(times, vec![(us(11_234), 2), (us(13_000), 2), (us(27_000), 2)]);
    }

    #[test]
    fn a_late_poll_releases_at_the_frames_own_instant_in_order() {
        // The I/O loop wakes 5 ms late: frames come out together, but the link clock
        // is computed from their due instants, so nothing drifts.
        let mut b = bridge(&[10], Some(12_000_000), None, "droptail", Limit::Packets(100));
        let mut out = Vec::new();
        for i in 0..3 {
            b.on_frame(ms(i), 0, data(S0, IP_S0, 1, 1500), [0; OFFLOAD_LEN], &mut out);
        }
        b.poll(ms(16), &mut out);
        // 1500 B at 12 Mbit/s = 1 ms. Released at 10, 11, 12 ms; done at 11, 12, 13 ms.
        assert_eq!(out.len(), 3);
        assert_eq!(b.next_wakeup(), None);
        assert_eq!(b.totals().forwarded_pkts, 3);
    }

    #[test]
    fn the_bottleneck_serialises_at_its_rate() {
        // 100 back-to-back 1500-byte frames at 10 Mbit/s: one every 1.2 ms.
        let mut b = bridge(&[5], Some(10_000_000), None, "droptail", Limit::Packets(1000));
        let arrivals = (0..100).map(|i| (us(i), 0, data(S0, IP_S0, 1, 1500))).collect();
        let sent = run(&mut b, arrivals);
        assert_eq!(sent.len(), 100);
        // First bit enters the link at 5 ms; the last bit leaves 1.2 ms later.
        assert_eq!(sent[0].0, us(5_000 + 1_200));
        for w in sent.windows(2) {
            assert_eq!(w[1].0 - w[0].0, SimDuration::from_micros(1_200));
        }
        // Rate over the run = bytes*8/time: exactly the configured rate.
        let span = sent[99].0 - us(5_000); // first bit on the wire at 5 ms
        let bps = Bandwidth::from_bytes_per(100 * 1500, span).unwrap().as_bps();
        assert_eq!(bps, 10_000_000);
        assert_eq!(b.totals().forwarded_bytes, 100 * 1486);
    }

    #[test]
    fn queue_overflow_is_dropped_by_the_qdisc_and_counted() {
        // 5-packet buffer, a burst of 20 arriving at once on a slow link: the first
        // goes onto the wire, 5 wait, 14 overflow.
        let mut b = bridge(&[1], Some(1_000_000), None, "droptail", Limit::Packets(5));
        let arrivals = (0..20).map(|_| (ms(0), 0, data(S0, IP_S0, 1, 1000))).collect();
        let sent = run(&mut b, arrivals);
        assert_eq!(sent.len(), 6);
        let c = b.counters();
        assert_eq!(c.drops[0], 14, "overflow drops");
        assert_eq!(c.total_drops(), 14);
        assert_eq!(b.queue_packets(), 0);
    }

    #[test]
    fn reverse_frames_go_to_the_port_that_learned_the_mac_after_its_delay() {
        let mut b = bridge(&[10, 30], None, None, "droptail", Limit::Packets(100));
        // Senders speak first (ARP), so the bridge learns S0 on port 0, S1 on port 1.
        let ack_to = |dst: [u8; 6], ip: [u8; 4], dport: u16| tcp_frame(dst, R, IP_R, ip, 5201, dport, 0, 0, None);
        let sent = run(
            &mut b,
            vec![
                (ms(0), 0, arp_from(S0)),
                (ms(0), 1, arp_from(S1)),
                (ms(100), 2, ack_to(S1, IP_S1, 2)),
                (ms(100), 2, ack_to(S0, IP_S0, 1)),
            ],
        );
        let rev: Vec<(SimTime, PortId)> = sent.iter().filter(|s| s.0 >= ms(100)).map(|s| (s.0, s.1)).collect();
        assert_eq!(rev, vec![(ms(110), 0), (ms(130), 1)]);
        assert_eq!(b.totals().reverse_pkts, 2);
    }

    #[test]
    fn rtt_through_the_bridge_is_twice_the_delay_plus_serialisation() {
        let mut b = bridge(&[20], Some(100_000_000), None, "droptail", Limit::Packets(100));
        let mut out = Vec::new();
        b.on_frame(ms(0), 0, arp_from(S0), [0; OFFLOAD_LEN], &mut out);
        out.clear();
        b.on_frame(ms(0), 0, data(S0, IP_S0, 1, 1250), [0; OFFLOAD_LEN], &mut out);
        b.poll(ms(100), &mut out);
        let d = &out[0];
        assert_eq!(d.port, 1);
        // The receiver answers at once; the answer arrives back after 20 ms.
        let fwd_done = ms(20) + SimDuration::from_micros(100); // 1250 B at 100 Mbit/s
        let ack = tcp_frame(S0, R, IP_R, IP_S0, 5201, 1, 0, 0, None);
        let mut out = Vec::new();
        b.on_frame(fwd_done, 1, ack, [0; OFFLOAD_LEN], &mut out);
        assert!(out.is_empty());
        assert_eq!(b.next_wakeup(), Some(fwd_done + SimDuration::from_millis(20)));
    }

    #[test]
    fn reverse_rate_serialises_acks_and_then_delays_them() {
        // 60-byte ACK frames at 48 kbit/s: 10 ms each.
        let mut b = bridge(&[5], None, Some(48_000), "droptail", Limit::Packets(100));
        let ack = || tcp_frame(S0, R, IP_R, IP_S0, 5201, 1, 0, 6, None);
        assert_eq!(ack().len(), 60);
        let sent = run(&mut b, vec![(ms(0), 0, arp_from(S0)), (ms(1), 1, ack()), (ms(1), 1, ack())]);
        let rev: Vec<SimTime> = sent.iter().filter(|s| s.1 == 0).map(|s| s.0).collect();
        assert_eq!(rev, vec![ms(16), ms(26)]);
    }

    #[test]
    fn group_and_unknown_destinations_flood_at_once_without_queueing() {
        let mut b = bridge(&[10, 10], Some(1_000), None, "droptail", Limit::Packets(1));
        let mut out = Vec::new();
        b.on_frame(ms(3), 0, arp_from(S0), [7; OFFLOAD_LEN], &mut out);
        let ports: Vec<PortId> = out.iter().map(|e| e.port).collect();
        assert_eq!(ports, vec![1, 2]);
        assert!(out.iter().all(|e| e.frame.offload == [7; OFFLOAD_LEN] && e.frame.data == arp_from(S0)));
        out.clear();
        // The receiver's reply to a MAC nobody announced: flooded to both senders.
        let unknown = tcp_frame([2, 9, 9, 9, 9, 9], R, IP_R, IP_S0, 5201, 1, 0, 0, None);
        b.on_frame(ms(4), 2, unknown, [0; OFFLOAD_LEN], &mut out);
        let ports: Vec<PortId> = out.iter().map(|e| e.port).collect();
        assert_eq!(ports, vec![0, 1]);
        assert_eq!(b.next_wakeup(), None, "nothing was queued");
        assert_eq!(b.totals().flooded, 2);
        assert_eq!(b.counters().enqueued_packets, 0);
    }

    #[test]
    fn ce_marking_by_the_qdisc_sets_ce_and_fixes_the_ip_checksum() {
        // A burst of 40 ECT(0) packets builds a queue RED marks (never drops) in.
        let mut b = bridge(&[0], Some(1_000_000), None, "red", Limit::Packets(100));
        let ect = |i: u16| tcp_frame(R, S0, IP_S0, IP_R, i, 5201, 0b10, 946, None);
        let arrivals = (0..40).map(|i| (ms(0), 0, ect(i))).collect();
        let sent = run(&mut b, arrivals);
        assert_eq!(sent.len(), 40);
        let marked: Vec<&Vec<u8>> = sent.iter().map(|s| &s.2).filter(|d| d[ETH_HLEN + 1] & 3 == 3).collect();
        assert!(!marked.is_empty(), "RED should have marked");
        assert_eq!(b.counters().total_marks(), marked.len() as u64);
        assert_eq!(b.counters().total_drops(), 0);
        for d in marked {
            assert!(header_sums_to_ffff(&d[ETH_HLEN..]), "IP checksum invalid after CE");
        }
    }

    #[test]
    fn flows_get_dense_ids_and_acks_are_flagged() {
        let mut b = bridge(&[0], None, None, "droptail", Limit::Packets(100));
        let mut out = Vec::new();
        b.on_frame(ms(0), 0, data(S0, IP_S0, 7, 200), [0; OFFLOAD_LEN], &mut out);
        b.on_frame(ms(0), 0, tcp_frame(R, S0, IP_S0, IP_R, 8, 5201, 0, 0, None), [0; OFFLOAD_LEN], &mut out);
        b.on_frame(ms(0), 0, data(S0, IP_S0, 7, 300), [0; OFFLOAD_LEN], &mut out);
        let metas: Vec<(u32, bool, u32)> = out.iter().map(|e| (e.frame.meta.flow, e.frame.meta.is_ack, e.frame.meta.bytes)).collect();
        assert_eq!(metas, vec![(0, false, 186), (1, true, 40), (0, false, 286)]);
    }

    #[test]
    fn passive_rtt_from_timestamp_echo_reaches_the_qdisc_meta() {
        let mut b = bridge(&[20], None, None, "droptail", Limit::Packets(100));
        let mut out = Vec::new();
        let seg = |tsval: u32| tcp_frame(R, S0, IP_S0, IP_R, 9, 5201, 0, 100, Some((tsval, 0)));
        b.on_frame(ms(0), 0, seg(1000), [0; OFFLOAD_LEN], &mut out);
        b.poll(ms(20), &mut out);
        assert_eq!(out.pop().unwrap().frame.meta.passive_rtt_us, None);
        // The receiver echoes at once when the segment arrives (20 ms).
        let echo = tcp_frame(S0, R, IP_R, IP_S0, 5201, 9, 0, 0, Some((5, 1000)));
        b.on_frame(ms(20), 1, echo, [0; OFFLOAD_LEN], &mut out);
        b.on_frame(ms(50), 0, seg(1001), [0; OFFLOAD_LEN], &mut out);
        b.poll(ms(70), &mut out);
        let fwd = out.iter().find(|e| e.port == 1).unwrap();
        // Seen 20 ms apart at the bridge, plus the 20 ms still to go back = 40 ms.
        assert_eq!(fwd.frame.meta.passive_rtt_us, Some(40_000));
    }

    #[test]
    fn frames_between_two_senders_bypass_the_bottleneck() {
        let mut b = bridge(&[10, 10], Some(1_000), None, "droptail", Limit::Packets(1));
        let mut out = Vec::new();
        b.on_frame(ms(0), 1, arp_from(S1), [0; OFFLOAD_LEN], &mut out);
        out.clear();
        b.on_frame(ms(1), 0, tcp_frame(S1, S0, IP_S0, IP_S1, 1, 2, 0, 0, None), [0; OFFLOAD_LEN], &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].port, 1);
    }

    #[test]
    fn runts_are_discarded_and_counted() {
        let mut b = bridge(&[0], None, None, "droptail", Limit::Packets(1));
        let mut out = Vec::new();
        b.on_frame(ms(0), 0, vec![1, 2, 3], [0; OFFLOAD_LEN], &mut out);
        assert!(out.is_empty());
        assert_eq!(b.totals().runts, 1);
    }
}
