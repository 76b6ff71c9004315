//! DCCP with CCID 2 ("TCP-like", RFC 4341) over the DCCP base protocol (RFC 4340):
//! unreliable datagrams, AIMD congestion control in PACKETS, no retransmission.
//!
//! Read this first:
//! - The sender keeps one record per sequence number (RFC 4341 §6: the sender
//!   tracks which packets were acknowledged through the Ack Vector).
//! - Loss: a packet is lost when three packets sent after it have been acknowledged
//!   (RFC 4341 §6.1 citing the TCP dupack threshold of RFC 2581; NUMDUPACK = 3 in
//!   Linux `ccid2.h`). ECN marks reported by the receiver count as losses for the
//!   window (RFC 4341 §5) but not for delivery.
//! - Window: slow start +1 packet per acknowledged packet (at most Ack Ratio per
//!   Ack), congestion avoidance +1 packet per window; halve once per window of
//!   losses (RFC 4341 §5). Timeout: ssthresh = cwnd/2, cwnd = 1, all outstanding
//!   packets presumed lost, RTO backoff as TCP (RFC 4341 §5 / RFC 6298).
//! - Ack Ratio R (RFC 4341 §6.1.2, RFC 4340 §11.3): the receiver sends one Ack per R
//!   data packets (default 2). The sender doubles R when Acks are lost, lowers it by
//!   one after cwnd/(R² − R) windows without Ack loss, and keeps R ≤ ⌈cwnd/2⌉ (as
//!   Linux `ccid2_change_l_ack_ratio` does, never "2 regardless", which deadlocks at
//!   cwnd = 1). The reverse path here is uncongested, so Acks are never lost.
//! - The Ack Vector is carried compressed ([`Ack::vector`]): the greatest sequence
//!   received plus a bitmap of the 128 sequence numbers below it. The receiver also
//!   flushes pending Acks with the flow's delayed-ACK timeout so a tail never
//!   stalls at R > 1.

use std::collections::VecDeque;

use aqm::PacketMeta;
use netunits::{SimDuration, SimTime};

use crate::packet::{DccpAck as Ack, Pkt, HEADER_BYTES, PF_CE};
use crate::rtt::RttEstimator;

/// RFC 4341 §6.1 / Linux NUMDUPACK.
const NUMDUPACK: u64 = 3;
/// Width of the compressed Ack Vector.
const VECTOR_BITS: u64 = 128;

const OUT: u8 = 0;
const ACKED: u8 = 1;
const LOST: u8 = 2;

#[derive(Clone, Copy, Debug)]
struct DSeg {
    sent: SimTime,
    state: u8,
}

/// What a DCCP flow is built from.
#[derive(Clone, Copy, Debug)]
pub(crate) struct DccpConfig {
    pub flow: u32,
    pub mss: u32,
    pub ecn: bool,
    pub bytes: Option<u64>,
    pub start: SimTime,
    pub stop: SimTime,
    pub initial_cwnd: u64,
    pub ack_ratio: u64,
    pub delack_timeout: SimDuration,
    pub ring_hint: usize,
}

fn us(d: SimDuration) -> Option<u32> {
    let m = d.as_micros();
    (m > 0).then(|| m.min(u32::MAX as u64) as u32)
}

/// The CCID 2 half-connection sender.
#[derive(Debug)]
pub(crate) struct DccpSender {
    cfg: DccpConfig,
    total_pkts: u64,
    pub(crate) started: bool,
    pub(crate) finished_at: Option<SimTime>,
    next_seq: u64,
    base: u64,
    ring: VecDeque<DSeg>,
    pipe: u64,
    pub(crate) cwnd: u64,
    pub(crate) ssthresh: u64,
    ca_acked: u64,
    /// The three highest acknowledged sequence numbers, +1 (0 = none), descending.
    top: [u64; NUMDUPACK as usize],
    loss_scan: u64,
    recovery_high: u64,
    pub(crate) rtt: RttEstimator,
    pub(crate) rto_deadline: SimTime,
    pub(crate) ack_ratio: u64,
    arsent: u64,
    ack_loss_window: bool,
    last_ack_seq: Option<u64>,
    ce_seen: u64,
    acked_total: u64,
    pub(crate) lost_total: u64,
    pub(crate) congestion_events: u64,
    pub(crate) rto_count: u64,
    pub(crate) pkts_sent: u64,
    in_slow_start_phase: bool,
}

impl DccpSender {
    fn new(cfg: DccpConfig) -> Self {
        let total_pkts = cfg.bytes.map_or(u64::MAX, |b| b.div_ceil(cfg.mss as u64));
        DccpSender {
            cfg,
            total_pkts,
            started: false,
            finished_at: None,
            next_seq: 0,
            base: 0,
            ring: VecDeque::with_capacity(cfg.ring_hint),
            pipe: 0,
            cwnd: cfg.initial_cwnd.max(1),
            ssthresh: u64::MAX,
            ca_acked: 0,
            top: [0; 3],
            loss_scan: 0,
            recovery_high: 0,
            rtt: RttEstimator::new(),
            rto_deadline: SimTime::MAX,
            ack_ratio: cfg.ack_ratio.max(1),
            arsent: 0,
            ack_loss_window: false,
            last_ack_seq: None,
            ce_seen: 0,
            acked_total: 0,
            lost_total: 0,
            congestion_events: 0,
            rto_count: 0,
            pkts_sent: 0,
            in_slow_start_phase: true,
        }
        .clamped()
    }

    fn clamped(mut self) -> Self {
        self.clamp_ack_ratio();
        self
    }

    /// RFC 4341 §6.1.2: Ack Ratio ≤ ⌈cwnd/2⌉, ≥ 1.
    fn clamp_ack_ratio(&mut self) {
        self.ack_ratio = self.ack_ratio.min(self.cwnd.div_ceil(2)).max(1);
    }

    pub(crate) fn next_wakeup(&self) -> SimTime {
        if !self.started {
            self.cfg.start
        } else {
            self.rto_deadline
        }
    }

    fn payload(&self, seq: u64) -> u32 {
        match self.cfg.bytes {
            Some(b) if seq + 1 == self.total_pkts => (b - seq * self.cfg.mss as u64) as u32,
            _ => self.cfg.mss,
        }
    }

    fn try_send(&mut self, now: SimTime, out: &mut Vec<Pkt>) {
        if !self.started {
            return;
        }
        while self.pipe < self.cwnd && self.next_seq < self.total_pkts && now < self.cfg.stop {
            let seq = self.next_seq;
            let len = self.payload(seq);
            self.next_seq += 1;
            self.ring.push_back(DSeg { sent: now, state: OUT });
            self.pipe += 1;
            self.pkts_sent += 1;
            out.push(Pkt {
                meta: PacketMeta {
                    flow: self.cfg.flow,
                    bytes: len + HEADER_BYTES,
                    ecn_capable: self.cfg.ecn,
                    rtt_hint_us: us(self.rtt.min_rtt()),
                    is_ack: false,
                    passive_rtt_us: us(self.rtt.srtt()),
                },
                seq,
                len,
                flags: 0,
                aux: self.ack_ratio.min(u16::MAX as u64) as u16,
            });
            self.on_packet_sent();
            if self.rto_deadline == SimTime::MAX {
                self.rto_deadline = now + self.rtt.rto();
            }
        }
    }

    /// RFC 4341 §6.1.2 Ack Ratio decrease (as Linux `ccid2_hc_tx_packet_sent`):
    /// after cwnd/(R² − R) windows (cwnd²/(R² − R) packets) without a lost Ack,
    /// R decreases by one.
    fn on_packet_sent(&mut self) {
        self.arsent += 1;
        if self.ack_loss_window {
            if self.arsent >= self.cwnd {
                self.arsent = 0;
                self.ack_loss_window = false;
            }
        } else if self.ack_ratio > 1 {
            let r = self.ack_ratio;
            let denom = (self.cwnd * self.cwnd) / (r * r - r);
            if self.arsent >= denom {
                self.ack_ratio -= 1;
                self.arsent = 0;
            }
        } else {
            self.arsent = 0;
        }
    }

    /// Halve once per window (RFC 4341 §5).
    fn congestion(&mut self, trigger_seq: u64) {
        if trigger_seq < self.recovery_high {
            return;
        }
        self.congestion_events += 1;
        self.cwnd = (self.cwnd / 2).max(1);
        self.ssthresh = self.cwnd.max(2);
        self.ca_acked = 0;
        self.recovery_high = self.next_seq;
        self.in_slow_start_phase = false;
        self.clamp_ack_ratio();
    }

    fn note_acked(&mut self, seq: u64) {
        let v = seq + 1;
        if v > self.top[0] {
            self.top = [v, self.top[0], self.top[1]];
        } else if v < self.top[0] && v > self.top[1] {
            self.top = [self.top[0], v, self.top[1]];
        } else if v < self.top[1] && v > self.top[2] {
            self.top[2] = v;
        }
    }

    fn on_ack(&mut self, now: SimTime, ack: &Ack, out: &mut Vec<Pkt>) {
        if !self.started {
            return;
        }
        // Lost Acks show as gaps in the Acks' own sequence numbers (RFC 4341 §6.1.2):
        // double the Ack Ratio.
        if let Some(l) = self.last_ack_seq {
            if ack.ack_seq > l + 1 {
                self.ack_ratio *= 2;
                self.clamp_ack_ratio();
                self.ack_loss_window = true;
                self.arsent = 0;
            }
        }
        self.last_ack_seq = Some(ack.ack_seq);

        let hi = ack.cum;
        let mut newly = 0u64;
        if hi >= self.base && hi < self.next_seq {
            let lo = self.base.max(hi.saturating_sub(VECTOR_BITS));
            for seq in lo..=hi {
                let received = seq == hi || (ack.vector() >> (hi - 1 - seq)) & 1 == 1;
                if !received {
                    continue;
                }
                let d = &mut self.ring[(seq - self.base) as usize];
                if d.state == OUT {
                    d.state = ACKED;
                    self.pipe -= 1;
                    newly += 1;
                    if seq == hi {
                        // Every DCCP packet has a fresh sequence number, so every
                        // Ack gives a valid RTT sample (no Karn ambiguity).
                        let r = now.saturating_since(d.sent);
                        self.rtt.sample(r);
                    }
                    self.note_acked(seq);
                } else if d.state == LOST {
                    self.note_acked(seq);
                }
            }
        }
        self.acked_total += newly;

        // Loss detection: NUMDUPACK packets acknowledged above a packet.
        let mut reduced = false;
        if self.top[2] > 0 {
            let third = self.top[2] - 1;
            let from = self.loss_scan.max(self.base);
            for seq in from..third {
                let d = &mut self.ring[(seq - self.base) as usize];
                if d.state == OUT {
                    d.state = LOST;
                    self.pipe -= 1;
                    self.lost_total += 1;
                    if seq >= self.recovery_high {
                        self.congestion(seq);
                        reduced = true;
                    }
                }
            }
            self.loss_scan = self.loss_scan.max(third);
        }
        // ECN marks reported by the receiver: a congestion event, once per window.
        if ack.ce_count > self.ce_seen {
            self.ce_seen = ack.ce_count;
            if hi >= self.recovery_high {
                self.congestion(hi);
                reduced = true;
            }
        }

        // Window growth (RFC 4341 §5).
        if newly > 0 && !reduced {
            if self.cwnd < self.ssthresh {
                self.cwnd += newly.min(self.ack_ratio.max(1));
                if self.cwnd >= self.ssthresh {
                    self.in_slow_start_phase = false;
                }
            } else {
                self.ca_acked += newly;
                while self.ca_acked >= self.cwnd {
                    self.ca_acked -= self.cwnd;
                    self.cwnd += 1;
                }
            }
        }

        while let Some(d) = self.ring.front() {
            if d.state == OUT {
                break;
            }
            self.ring.pop_front();
            self.base += 1;
        }
        if newly > 0 {
            if self.base == self.total_pkts {
                self.finished_at = Some(now);
            }
            self.rto_deadline = if self.pipe == 0 { SimTime::MAX } else { now + self.rtt.rto() };
        }
        self.try_send(now, out);
    }

    fn on_timer(&mut self, now: SimTime, out: &mut Vec<Pkt>) {
        if !self.started {
            if now < self.cfg.start {
                return;
            }
            self.started = true;
        }
        if now >= self.rto_deadline {
            if self.pipe == 0 {
                self.rto_deadline = SimTime::MAX;
            } else {
                // RFC 4341 §5 timeout: ssthresh = cwnd/2, cwnd = 1, everything
                // outstanding presumed lost; RTO backs off (RFC 6298 (5.5)).
                self.rto_count += 1;
                self.ssthresh = (self.cwnd / 2).max(2);
                self.cwnd = 1;
                self.ca_acked = 0;
                for d in self.ring.iter_mut() {
                    if d.state == OUT {
                        d.state = LOST;
                        self.lost_total += 1;
                    }
                }
                self.pipe = 0;
                self.loss_scan = self.next_seq;
                self.recovery_high = self.next_seq;
                self.clamp_ack_ratio();
                self.rtt.back_off();
                self.rto_deadline = now + self.rtt.rto();
            }
        }
        self.try_send(now, out);
    }
}

/// The CCID 2 receiver: Ack Vector and Ack Ratio.
#[derive(Debug)]
pub(crate) struct DccpReceiver {
    hi: Option<u64>,
    vector: u128,
    pending: u64,
    last_acked_hi: u64,
    ce_count: u64,
    ack_seq: u64,
    delack_timeout: SimDuration,
    pub(crate) delack_deadline: SimTime,
    pub(crate) app_bytes: u64,
}

impl DccpReceiver {
    fn new(delack_timeout: SimDuration) -> Self {
        DccpReceiver {
            hi: None,
            vector: 0,
            pending: 0,
            last_acked_hi: 0,
            ce_count: 0,
            ack_seq: 0,
            delack_timeout,
            delack_deadline: SimTime::MAX,
            app_bytes: 0,
        }
    }

    fn on_data(&mut self, now: SimTime, pkt: &Pkt) -> Option<Ack> {
        if pkt.flags & PF_CE != 0 {
            self.ce_count += 1;
        }
        // Datagrams are delivered to the application as they arrive (RFC 4340 §1).
        self.app_bytes += pkt.len as u64;
        let s = pkt.seq;
        match self.hi {
            None => {
                self.hi = Some(s);
                self.vector = 0;
            }
            Some(h) if s > h => {
                let shift = s - h;
                self.vector = if shift > VECTOR_BITS {
                    0
                } else if shift == VECTOR_BITS {
                    1u128 << (VECTOR_BITS - 1)
                } else {
                    (self.vector << shift) | (1u128 << (shift - 1))
                };
                self.hi = Some(s);
            }
            Some(h) if s < h => {
                let k = h - 1 - s;
                if k < VECTOR_BITS {
                    self.vector |= 1u128 << k;
                }
            }
            Some(_) => {}
        }
        self.pending += 1;
        let r = (pkt.aux as u64).max(1);
        let hi = self.hi.unwrap_or(0);
        // One Ack per R data packets (RFC 4341 §6.1.2), and before unreported
        // packets could fall out of the 128-packet vector.
        if self.pending >= r || hi.saturating_sub(self.last_acked_hi) >= VECTOR_BITS * 3 / 4 {
            return Some(self.make_ack());
        }
        if self.delack_deadline == SimTime::MAX {
            self.delack_deadline = now + self.delack_timeout;
        }
        None
    }

    fn on_timer(&mut self, now: SimTime) -> Option<Ack> {
        if now >= self.delack_deadline && self.pending > 0 {
            return Some(self.make_ack());
        }
        if now >= self.delack_deadline {
            self.delack_deadline = SimTime::MAX;
        }
        None
    }

    fn make_ack(&mut self) -> Ack {
        self.pending = 0;
        self.delack_deadline = SimTime::MAX;
        let hi = self.hi.unwrap_or(0);
        self.last_acked_hi = hi;
        let a = Ack::new(hi, self.vector, self.ce_count, self.ack_seq);
        self.ack_seq += 1;
        a
    }
}

/// One DCCP/CCID2 flow: both ends.
#[derive(Debug)]
pub(crate) struct DccpFlow {
    pub snd: DccpSender,
    pub rcv: DccpReceiver,
}

impl DccpFlow {
    pub fn new(cfg: DccpConfig) -> Self {
        DccpFlow { snd: DccpSender::new(cfg), rcv: DccpReceiver::new(cfg.delack_timeout) }
    }
    #[inline]
    pub fn on_ack(&mut self, now: SimTime, ack: &Ack, out: &mut Vec<Pkt>) {
        self.snd.on_ack(now, ack, out);
    }
    #[inline]
    pub fn on_data(&mut self, now: SimTime, pkt: &Pkt) -> Option<Ack> {
        self.rcv.on_data(now, pkt)
    }
    pub fn on_timer(&mut self, now: SimTime, out: &mut Vec<Pkt>) -> Option<Ack> {
        let a = self.rcv.on_timer(now);
        if now >= self.snd.next_wakeup() {
            self.snd.on_timer(now, out);
        }
        a
    }
    #[inline]
    pub fn next_wakeup(&self) -> SimTime {
        self.snd.next_wakeup().min(self.rcv.delack_deadline)
    }
    /// Phase for the trace.
    pub fn phase(&self) -> &'static str {
        if self.snd.cwnd < self.snd.ssthresh {
            "slow_start"
        } else {
            "congestion_avoidance"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> DccpConfig {
        DccpConfig {
            flow: 0,
            mss: 1000,
            ecn: false,
            bytes: None,
            start: SimTime::ZERO,
            stop: SimTime::MAX,
            initial_cwnd: 4,
            ack_ratio: 2,
            delack_timeout: SimDuration::from_millis(40),
            ring_hint: 16,
        }
    }

    fn started() -> (DccpSender, Vec<Pkt>) {
        let mut s = DccpSender::new(cfg());
        let mut out = Vec::new();
        s.on_timer(SimTime::ZERO, &mut out);
        (s, out)
    }

    #[test]
    fn sends_initial_window_and_grows_in_slow_start() {
        let (mut s, out) = started();
        assert_eq!(out.len(), 4);
        let mut rcv = DccpReceiver::new(SimDuration::from_millis(40));
        let mut acks = Vec::new();
        for p in &out {
            if let Some(a) = rcv.on_data(SimTime::from_millis(50), p) {
                acks.push(a);
            }
        }
        assert_eq!(acks.len(), 2, "Ack Ratio 2: one Ack per two packets");
        let mut out2 = Vec::new();
        for a in &acks {
            s.on_ack(SimTime::from_millis(100), a, &mut out2);
        }
        // 4 packets acked, +min(2, R=2) per Ack -> cwnd 8, all 8 in flight
        assert_eq!(s.cwnd, 8);
        assert_eq!(out2.len(), 8);
        assert_eq!(s.rtt.srtt(), SimDuration::from_millis(100));
    }

    #[test]
    fn a_packet_is_lost_after_three_later_packets_are_acked_and_cwnd_halves_once() {
        let (mut s, out) = started();
        let mut rcv = DccpReceiver::new(SimDuration::from_millis(40));
        // packets 0 and 1 lost, 2 and 3 arrive
        let mut last = None;
        for p in &out[2..] {
            last = rcv.on_data(SimTime::from_millis(50), p).or(last);
        }
        let a = last.unwrap();
        let mut o = Vec::new();
        s.on_ack(SimTime::from_millis(100), &a, &mut o);
        assert_eq!(s.lost_total, 0, "only two packets acked above the holes");
        // one more packet (seq 4..) arrives
        for p in &o {
            if let Some(a) = rcv.on_data(SimTime::from_millis(150), p) {
                s.on_ack(SimTime::from_millis(200), &a, &mut Vec::new());
            }
        }
        assert_eq!(s.lost_total, 2);
        assert_eq!(s.congestion_events, 1, "two losses in one window halve once");
        assert!(s.cwnd <= 4);
    }

    #[test]
    fn timeout_collapses_the_window_to_one_packet() {
        let (mut s, _) = started();
        let mut o = Vec::new();
        s.on_timer(SimTime::from_secs(1), &mut o);
        assert_eq!(s.cwnd, 1);
        assert_eq!(s.ssthresh, 2);
        assert_eq!(o.len(), 1);
        assert_eq!(s.ack_ratio, 1);
    }
}
