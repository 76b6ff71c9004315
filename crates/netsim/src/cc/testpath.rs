//! A tiny packet-level path for controller tests (test builds only).
//!
//! Read this first: this is NOT the engine. It is the smallest model in which a
//! controller's closed-loop behaviour can be checked against closed forms
//! (STYLE.md §13): senders sit right at one FIFO bottleneck of rate `C` and
//! `buffer` packets; a packet that leaves the bottleneck is ACKed `base_rtt`
//! later (one ACK per packet, no ACK loss). Each sender paces if its controller
//! returns a pacing rate, and produces delivery-rate samples the way Linux
//! `tcp_rate.c` does (send and ACK intervals, the larger wins, samples shorter
//! than min_rtt are dropped). Tail drops and optional Bernoulli losses are
//! detected one base RTT after the drop, ONE congestion event per recovery
//! episode, and the lost packet is retransmitted. Everything is deterministic:
//! the random loss uses a fixed xorshift stream.

use super::{AckSample, CongestionControl, CongestionEvent, CongestionSignal, RateSample};
use super::testkit::ack_sample;
use crate::packet::ts_clock_ms;
use netunits::{Bandwidth, SimDuration, SimTime};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// MSS used on the test path.
pub(crate) const PATH_MSS: u64 = 1000;

/// One data packet in flight.
#[derive(Clone, Copy, Debug)]
struct Pkt {
    id: u64,
    sent: SimTime,
    delivered_at_send: u64,
    delivered_time_at_send: SimTime,
    first_sent_at_send: SimTime,
}

/// (time, tie-break sequence, flow, kind, packet id): ordered like the engine's
/// event queue (STYLE.md §3).
type EventKey = (SimTime, u64, usize, Ev, u64);

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    Ack,
    Lost,
    Wake,
}

/// Per-flow sender state.
#[derive(Debug)]
pub(crate) struct Flow {
    pub cc: Box<dyn CongestionControl>,
    pub base_rtt: SimDuration,
    pub start: SimTime,
    inflight: u64,
    /// Bytes acknowledged so far (goodput numerator).
    pub delivered: u64,
    delivered_time: SimTime,
    first_sent_time: SimTime,
    next_send: SimTime,
    wake_pending: Option<SimTime>,
    srtt: Option<SimDuration>,
    min_rtt: Option<SimDuration>,
    next_id: u64,
    recovery_point: Option<u64>,
    retx_pending: u64,
    /// Packets lost (tail or random).
    pub lost: u64,
    /// Phase after every ACK, with time, when it changes.
    pub phases: Vec<(SimTime, &'static str)>,
    /// (time, cwnd bytes, in-flight bytes) after every ACK.
    pub trace: Vec<(SimTime, u64, u64)>,
    /// RTT samples (time, rtt).
    pub rtts: Vec<(SimTime, SimDuration)>,
}

/// The bottleneck and its flows.
#[derive(Debug)]
pub(crate) struct Path {
    pub rate: Bandwidth,
    pub buffer_pkts: u64,
    pub random_loss: f64,
    pub flows: Vec<Flow>,
    now: SimTime,
    link_free_at: SimTime,
    events: BinaryHeap<Reverse<EventKey>>,
    pkts: std::collections::HashMap<(usize, u64), Pkt>,
    seq: u64,
    rng: u64,
    /// (time, queue length in packets) at every enqueue.
    pub queue: Vec<(SimTime, u64)>,
}

impl Path {
    /// A bottleneck of `rate` with a `buffer_pkts`-packet drop-tail buffer.
    pub(crate) fn new(rate: Bandwidth, buffer_pkts: u64) -> Self {
        Path {
            rate,
            buffer_pkts,
            random_loss: 0.0,
            flows: Vec::new(),
            now: SimTime::ZERO,
            link_free_at: SimTime::ZERO,
            events: BinaryHeap::new(),
            pkts: std::collections::HashMap::new(),
            seq: 0,
            rng: 0x9E37_79B9_7F4A_7C15,
            queue: Vec::new(),
        }
    }

    /// Add a greedy flow with propagation RTT `base_rtt`, starting at `start`.
    pub(crate) fn add(&mut self, cc: Box<dyn CongestionControl>, base_rtt: SimDuration, start: SimTime) -> usize {
        self.flows.push(Flow {
            cc,
            base_rtt,
            start,
            inflight: 0,
            delivered: 0,
            delivered_time: start,
            first_sent_time: start,
            next_send: start,
            wake_pending: None,
            srtt: None,
            min_rtt: None,
            next_id: 0,
            recovery_point: None,
            retx_pending: 0,
            lost: 0,
            phases: Vec::new(),
            trace: Vec::new(),
            rtts: Vec::new(),
        });
        let i = self.flows.len() - 1;
        self.push(start, i, Ev::Wake, 0);
        i
    }

    /// Bandwidth-delay product of this path for `rtt`, in packets.
    pub(crate) fn bdp_pkts(&self, rtt: SimDuration) -> u64 {
        self.rate.bytes_in(rtt) / PATH_MSS
    }

    fn push(&mut self, t: SimTime, flow: usize, ev: Ev, id: u64) {
        self.seq += 1;
        self.events.push(Reverse((t, self.seq, flow, ev, id)));
    }

    fn uniform(&mut self) -> f64 {
        // xorshift64*: fixed stream, test-only.
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        (self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Packets queued at the bottleneck at `t` (including the one in service).
    pub(crate) fn queue_pkts_at(&self, t: SimTime) -> u64 {
        self.rate.bytes_in(self.link_free_at.saturating_since(t)).div_ceil(PATH_MSS)
    }

    /// Run until `end`.
    pub(crate) fn run_until(&mut self, end: SimTime) {
        while let Some(Reverse((t, _, f, ev, id))) = self.events.peek().copied() {
            if t > end {
                break;
            }
            self.events.pop();
            self.now = t;
            match ev {
                Ev::Ack => self.on_ack(f, id),
                Ev::Lost => self.on_lost(f, id),
                Ev::Wake => {
                    if self.flows[f].wake_pending == Some(t) {
                        self.flows[f].wake_pending = None;
                    }
                }
            }
            self.try_send(f);
        }
        self.now = end;
    }

    fn try_send(&mut self, f: usize) {
        let now = self.now;
        if now < self.flows[f].start {
            return;
        }
        loop {
            let fl = &self.flows[f];
            // Window check; an empty pipe may always send one packet.
            if fl.inflight + PATH_MSS > fl.cc.cwnd() && fl.inflight > 0 {
                return;
            }
            if let Some(rate) = fl.cc.pacing_rate().filter(|r| r.as_bps() > 0) {
                if fl.next_send > now {
                    if fl.wake_pending != Some(fl.next_send) {
                        let at = fl.next_send;
                        self.flows[f].wake_pending = Some(at);
                        self.push(at, f, Ev::Wake, 0);
                    }
                    return;
                }
                let fl = &mut self.flows[f];
                fl.next_send = fl.next_send.max(now) + rate.tx_time(PATH_MSS);
            }
            self.send_one(f);
        }
    }

    fn send_one(&mut self, f: usize) {
        let now = self.now;
        let fl = &mut self.flows[f];
        if fl.inflight == 0 {
            // tcp_rate.c: restart the sampling clocks when the pipe is empty.
            fl.first_sent_time = now;
            fl.delivered_time = now;
        }
        if fl.retx_pending > 0 {
            fl.retx_pending -= 1;
        }
        let id = fl.next_id;
        fl.next_id += 1;
        let p = Pkt {
            id,
            sent: now,
            delivered_at_send: fl.delivered,
            delivered_time_at_send: fl.delivered_time,
            first_sent_at_send: fl.first_sent_time,
        };
        fl.inflight += PATH_MSS;
        let inflight = fl.inflight;
        fl.cc.on_packet_sent(now, PATH_MSS, inflight);
        let base = fl.base_rtt;
        self.pkts.insert((f, id), p);
        let q = self.queue_pkts_at(now);
        self.queue.push((now, q));
        let random_drop = self.random_loss > 0.0 && self.uniform() < self.random_loss;
        if q >= self.buffer_pkts || random_drop {
            let notice = self.link_free_at.max(now) + base;
            self.push(notice, f, Ev::Lost, id);
            return;
        }
        let depart = self.link_free_at.max(now) + self.rate.tx_time(PATH_MSS);
        self.link_free_at = depart;
        self.push(depart + base, f, Ev::Ack, id);
    }

    fn on_lost(&mut self, f: usize, id: u64) {
        let now = self.now;
        self.pkts.remove(&(f, id));
        let fl = &mut self.flows[f];
        fl.lost += 1;
        let flight_before = fl.inflight;
        fl.inflight -= PATH_MSS;
        fl.retx_pending += 1;
        if fl.recovery_point.is_none() {
            fl.recovery_point = Some(fl.next_id);
            let ev = CongestionEvent {
                now,
                signal: CongestionSignal::Loss,
                in_flight: flight_before,
                srtt: fl.srtt.unwrap_or(fl.base_rtt),
                min_rtt: fl.min_rtt.unwrap_or(fl.base_rtt),
            };
            fl.cc.on_congestion_event(&ev);
        }
    }

    fn on_ack(&mut self, f: usize, id: u64) {
        let now = self.now;
        let p = self.pkts.remove(&(f, id)).expect("acked packet was sent");
        let fl = &mut self.flows[f];
        let prior_in_flight = fl.inflight;
        fl.inflight -= PATH_MSS;
        fl.delivered += PATH_MSS;
        fl.delivered_time = now;
        let rtt = now.saturating_since(p.sent);
        fl.rtts.push((now, rtt));
        fl.min_rtt = Some(fl.min_rtt.map_or(rtt, |m| m.min(rtt)));
        let srtt = match fl.srtt {
            None => rtt,
            Some(s) => SimDuration::from_nanos((s.as_nanos() * 7 + rtt.as_nanos()) / 8),
        };
        fl.srtt = Some(srtt);
        // tcp_rate.c: interval = max(send interval, ACK interval) of the packet.
        let send_elapsed = p.sent.saturating_since(p.first_sent_at_send);
        let ack_elapsed = now.saturating_since(p.delivered_time_at_send);
        fl.first_sent_time = p.sent;
        let interval = send_elapsed.max(ack_elapsed);
        let delivered = fl.delivered - p.delivered_at_send;
        let min_rtt = fl.min_rtt.unwrap_or(rtt);
        let rate = if interval.as_nanos() > 0 && interval >= min_rtt {
            Some(RateSample {
                delivered,
                interval,
                delivery_rate: Bandwidth::from_bytes_per(delivered, interval).unwrap_or_default(),
                is_app_limited: false,
                prior_delivered: p.delivered_at_send,
                total_delivered: fl.delivered,
            })
        } else {
            None
        };
        let exit_recovery = fl.recovery_point.is_some_and(|rp| p.id >= rp);
        if exit_recovery {
            fl.recovery_point = None;
            fl.cc.on_recovery_exit(now);
        }
        let a = AckSample {
            srtt,
            min_rtt,
            prior_in_flight,
            in_recovery: fl.recovery_point.is_some(),
            rate,
            // The receiver ACKs each segment on arrival, half the base RTT ago, and
            // echoes that segment's send time.
            tsval_ms: ts_clock_ms(SimTime::from_nanos(now.as_nanos().saturating_sub(fl.base_rtt.as_nanos() / 2))),
            tsecr_ms: ts_clock_ms(p.sent),
            // One PATH_MSS segment (testkit's MSS is the same 1,000 bytes).
            ..ack_sample(now, 1, rtt, fl.inflight)
        };
        fl.cc.on_ack(&a);
        let phase = fl.cc.metrics().phase;
        if fl.phases.last().is_none_or(|(_, p)| *p != phase) {
            fl.phases.push((now, phase));
        }
        let (cw, infl) = (fl.cc.cwnd(), fl.inflight);
        fl.trace.push((now, cw, infl));
    }

    /// Goodput of flow `f` in bit/s over the whole run so far.
    pub(crate) fn goodput_bps(&self, f: usize) -> f64 {
        let fl = &self.flows[f];
        let secs = self.now.saturating_since(fl.start).as_secs_f64();
        fl.delivered as f64 * 8.0 / secs
    }
}

/// Time of the first entry of `phase` in a flow's phase log.
pub(crate) fn first_time_in(fl: &Flow, phase: &str) -> Option<SimTime> {
    fl.phases.iter().find(|(_, p)| *p == phase).map(|(t, _)| *t)
}

/// A synthetic, open-loop sender for rule tests: the test sets the RTT each
/// round and the driver ACKs the whole window over it, one segment per ACK.
#[derive(Debug)]
pub(crate) struct Synth<C: CongestionControl> {
    pub cc: C,
    pub now: SimTime,
    pub min_rtt: SimDuration,
    pub in_recovery: bool,
}

impl<C: CongestionControl> Synth<C> {
    pub(crate) fn new(cc: C) -> Self {
        Synth { cc, now: SimTime::from_secs(1), min_rtt: SimDuration::MAX, in_recovery: false }
    }

    /// Window in segments.
    pub(crate) fn cwnd(&self) -> u64 {
        self.cc.cwnd() / PATH_MSS
    }

    /// One ACK of one segment with RTT sample `rtt`, the window full.
    pub(crate) fn ack(&mut self, rtt: SimDuration) {
        self.min_rtt = self.min_rtt.min(rtt);
        let flight = self.cc.cwnd().max(PATH_MSS);
        let a = AckSample {
            min_rtt: self.min_rtt,
            in_recovery: self.in_recovery,
            // The segment left one RTT ago; its receiver ACKed it half the lowest
            // RTT ago (the rest of the RTT was queueing on the way there).
            tsval_ms: ts_clock_ms(SimTime::from_nanos(self.now.as_nanos().saturating_sub(self.min_rtt.as_nanos() / 2))),
            tsecr_ms: ts_clock_ms(SimTime::from_nanos(self.now.as_nanos().saturating_sub(rtt.as_nanos()))),
            ..ack_sample(self.now, 1, rtt, flight - PATH_MSS)
        };
        self.cc.on_ack(&a);
    }

    /// One round: the window at its start is ACKed one segment per ACK, evenly
    /// over `rtt`, every ACK carrying RTT sample `rtt`.
    pub(crate) fn round(&mut self, rtt: SimDuration) {
        let n = self.cwnd().max(1);
        let step = SimDuration::from_nanos(rtt.as_nanos() / n);
        for _ in 0..n {
            self.now += step;
            self.ack(rtt);
        }
    }

    /// A loss episode (fast recovery) with the window in flight.
    pub(crate) fn loss(&mut self, signal: CongestionSignal) {
        let ev = CongestionEvent { now: self.now, signal, in_flight: self.cc.cwnd(), srtt: self.min_rtt, min_rtt: self.min_rtt };
        self.cc.on_congestion_event(&ev);
    }
}
