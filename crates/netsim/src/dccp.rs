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
//! - Window, as Linux `ccid2_new_ack` grows it: slow start +1 packet per TWO
//!   acknowledged packets, at most ⌈R/2⌉ per Ack; congestion avoidance +1 packet
//!   per window; halve once per window of losses (RFC 4341 §5) — in Linux 6.1
//!   (`ccid2_congestion_event`) "once per window" is judged on the jiffies clock:
//!   a loss opens a new congestion event unless the packet was sent in an earlier
//!   tick than the last event, so a packet sent earlier in the very tick that
//!   saw the last event can halve the window again. Timeout:
//!   ssthresh = cwnd/2, cwnd = 1, all outstanding packets presumed lost, RTO
//!   backoff as TCP (RFC 4341 §5 / RFC 6298), Ack Ratio back to 1.
//! - Start (6.1 rules): cwnd = RFC 3390's window for the packet size (3 for
//!   1448 bytes, `ccid2_hc_tx_init`), whatever the scenario's `initial_cwnd`, and
//!   the state one application message each way leaves (`fairlab-dccpgen`'s
//!   hello and READY: one packet counted at each end, Ack Ratio 1 asked for;
//!   [`DccpFlow::new`]). The kernel's receiver counted 3, 5, 7, 11, … packets
//!   per round in slow start, as this model now sends.
//! - Ack Ratio R (RFC 4340 §11.3): the receiver sends one Ack per R data packets.
//!   Linux (since 3.x, "about 5 times the number of packets in the network",
//!   RFC 4340 §7.5.2) sizes R from the window: with the receiver's Sequence Window
//!   W it doubles R while (cwnd / R)·5 ≥ W and halves it while (cwnd / R)·5 < W/2.
//!   W is 50 here ([`PEER_SEQ_WINDOW`] says why, and how it was measured), so
//!   R ≈ cwnd/7: at a 200-packet window one Ack per 32 packets, each releasing a
//!   burst of 32.
//!   R never exceeds ⌈cwnd/2⌉, is cut to cwnd/2 after a loss that leaves it above
//!   cwnd, and to 1 by a timeout. A change is feature negotiation (RFC 4340 §6):
//!   it rides on the next data packets, the receiver uses it from the first
//!   one, and the sender from the Ack that confirms it. RFC 4341's rules on Ack
//!   loss are compiled out of Linux (`#if 0`), and Acks are never lost here.
//!   The sender's own Sequence Window, which Linux grows in step with cwnd (×2
//!   while cwnd·5 ≥ it), never limits the window and is not modelled.
//! - The Ack Vector (RFC 4340 §11.4) is kept whole at the receiver
//!   ([`AckVector`]): for each packet, the number of the first Ack that reports
//!   it. Linux's is run-length coded in up to 506 bytes (`DCCPAV_MAX_ACKVEC_LEN`,
//!   net/dccp/ackvec.h) and trimmed as the sender acknowledges the receiver's
//!   Acks, so it describes every packet of a window however many holes the window
//!   has; the receiver never acknowledges early for lack of room. (Until
//!   2026-12-01 the simulator carried a 128-packet bitmap and acknowledged early
//!   when a hole was about to leave it: docs/validation/vm.md, "CCID2's Ack
//!   Vector".)
//! - The receiver sends an Ack on every R-th data packet and at no other time:
//!   Linux 6.1's DCCP has no delayed-Ack timer in the OPEN state
//!   (`dccp_send_delayed_ack` is compiled out), so when fewer than R packets can
//!   reach it the sender waits for its RTO. The 2.6.22 rules keep a flush after
//!   the flow's delayed-ACK timeout (not checked against 2.6.22's source).

use std::collections::VecDeque;

use aqm::PacketMeta;
use netunits::{SimDuration, SimTime};

use crate::cc::jiffies::jiffies;
use crate::packet::{DccpAck as Ack, Pkt, PF_CE, WIRE_BYTES};
use crate::rtt::RttEstimator;

/// RFC 4341 §6.1 / Linux NUMDUPACK.
const NUMDUPACK: u64 = 3;
/// The receiver's Sequence Window as the sender knows it (Linux `dccps_r_seq_win`).
/// It starts at the `net.dccp.default.seq_window` sysctl, 100, but the receiver's
/// own CCID2 halves it as soon as one packet the receiver sent as data is
/// acknowledged (`ccid2_new_ack`: its window of a few packets is below a tenth of
/// 100), and a receiving application that answers once at the start — as
/// `fairlab-dccpgen`'s server does with READY — sends one. Measured on Linux 6.1
/// (vm backend, CCID2 against Reno at 50 ms, 2026-11-29): CCID2 sent bursts of 128,
/// 64, 32 and 16 packets (one Ack Ratio each) at windows of about 760, 450, 270
/// and 150 packets, cwnd/R within [5, 10): the rule below with 50, not 100.
const PEER_SEQ_WINDOW: u64 = 50;
/// Linux `CCID2_WIN_CHANGE_FACTOR`.
const WIN_CHANGE_FACTOR: u64 = 5;
/// RFC 4340 §11.3: Ack Ratio is a 16-bit feature.
const ACK_RATIO_MAX: u64 = 0xFFFF;

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
    /// 2.6.22 rules only: the scenario's initial window. Linux 6.1 takes it from
    /// the packet size alone ([`rfc3390_packets`]); no route or socket option sets it.
    pub initial_cwnd: u64,
    pub ack_ratio: u64,
    /// Linux 2.6.22's CCID2 (seed 001's hosts) instead of today's: slow start +1
    /// per acknowledged packet (at most R per Ack) and RFC 4341 §6.1.2's Ack Ratio
    /// rules (double on a lost Ack, one lower after cwnd²/(R² − R) packets sent).
    pub linux_2622: bool,
    pub delack_timeout: SimDuration,
    pub ring_hint: usize,
}

/// The initial window in packets of size `mss` (RFC 3390's min(4, max(2, 4380/mss))
/// in the three steps Linux 6.1 writes it, `rfc3390_bytes_to_packets` in ccid2.h;
/// `ccid2_hc_tx_init` starts every CCID2 sender there, RFC 4341 §5): 4 up to 1095
/// bytes, 3 up to 2190, then 2.
fn rfc3390_packets(mss: u32) -> u64 {
    if mss <= 1095 {
        4
    } else if mss <= 2190 {
        3
    } else {
        2
    }
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
    /// The three highest acknowledged sequence numbers, +1 (0 = none), descending.
    top: [u64; NUMDUPACK as usize],
    loss_scan: u64,
    /// 2.6.22 rules: the first sequence number sent after the last window
    /// reduction; a loss below it belongs to that window.
    recovery_high: u64,
    /// 6.1 rules: the jiffies tick of the last congestion event (Linux
    /// `tx_last_cong`, set to the tick of `ccid2_hc_tx_init`, before any data).
    last_cong_jiffy: u64,
    pub(crate) rtt: RttEstimator,
    pub(crate) rto_deadline: SimTime,
    /// The Ack Ratio in force at the sender (Linux `dccps_l_ack_ratio`).
    pub(crate) ack_ratio: u64,
    /// A change under negotiation: the new value and the first packet carrying it.
    ack_ratio_change: Option<(u64, u64)>,
    /// Packets acknowledged towards the next increase (Linux `tx_packets_acked`).
    packets_acked: u64,
    /// 2.6.22 only: packets sent since the Ack Ratio last changed, and whether an
    /// Ack was lost in this window; the sequence number of the last Ack.
    arsent: u64,
    ack_loss_window: bool,
    last_ack_seq: Option<u64>,
    ce_seen: u64,
    acked_total: u64,
    pub(crate) lost_total: u64,
    pub(crate) congestion_events: u64,
    pub(crate) rto_count: u64,
    pub(crate) pkts_sent: u64,
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
            cwnd: if cfg.linux_2622 { cfg.initial_cwnd.max(1) } else { rfc3390_packets(cfg.mss) },
            ssthresh: u64::MAX,
            top: [0; 3],
            loss_scan: 0,
            recovery_high: 0,
            last_cong_jiffy: 0,
            rtt: RttEstimator::new(),
            rto_deadline: SimTime::MAX,
            ack_ratio: cfg.ack_ratio.max(1),
            ack_ratio_change: None,
            packets_acked: 0,
            arsent: 0,
            ack_loss_window: false,
            last_ack_seq: None,
            ce_seen: 0,
            acked_total: 0,
            lost_total: 0,
            congestion_events: 0,
            rto_count: 0,
            pkts_sent: 0,
        }
        .with_ack_ratio_in_bounds()
    }

    /// `ccid2_hc_tx_init`: Ack Ratio at most ⌈cwnd/2⌉ from the start.
    fn with_ack_ratio_in_bounds(mut self) -> Self {
        self.clamp_ack_ratio();
        self
    }

    /// Ack Ratio in [1, ⌈cwnd/2⌉] at once (2.6.22 throughout; 6.1 at the start).
    fn clamp_ack_ratio(&mut self) {
        self.ack_ratio = self.ack_ratio.min(self.cwnd.div_ceil(2)).max(1);
    }

    /// 2.6.22 (RFC 4341 §6.1.2, Linux `ccid2_hc_tx_packet_sent` before 2.6.3x):
    /// after cwnd²/(R² − R) packets without a lost Ack, R decreases by one.
    fn on_packet_sent_2622(&mut self) {
        self.arsent += 1;
        if self.ack_loss_window {
            if self.arsent >= self.cwnd {
                self.arsent = 0;
                self.ack_loss_window = false;
            }
        } else if self.ack_ratio > 1 {
            let r = self.ack_ratio;
            if self.arsent >= (self.cwnd * self.cwnd) / (r * r - r) {
                self.ack_ratio -= 1;
                self.arsent = 0;
            }
        } else {
            self.arsent = 0;
        }
    }

    /// The Ack Ratio being negotiated, or the one in force (`dccp_feat_nn_get`).
    fn ack_ratio_wanted(&self) -> u64 {
        self.ack_ratio_change.map_or(self.ack_ratio, |(v, _)| v)
    }

    /// Ask for Ack Ratio `val` (Linux `ccid2_change_l_ack_ratio` then
    /// `dccp_feat_signal_nn_change`): at most ⌈cwnd/2⌉ (RFC 4341 §6.1.2, without
    /// "2 is always acceptable", which deadlocks at cwnd 1); nothing if that value is
    /// already in force or under negotiation; a newer request replaces an older one.
    fn change_ack_ratio(&mut self, val: u64) {
        let max_ratio = self.cwnd.div_ceil(2);
        let val = if val == 0 || val > max_ratio { max_ratio } else { val }.min(ACK_RATIO_MAX);
        if val != self.ack_ratio_wanted() {
            self.ack_ratio_change = Some((val, self.next_seq));
        }
    }

    /// After a window reduction, keep R at most cwnd (`ccid2_check_l_ack_ratio`).
    fn check_ack_ratio(&mut self) {
        if self.ack_ratio_wanted() > self.cwnd {
            self.change_ack_ratio((self.cwnd / 2).max(1));
        }
    }

    /// One newly acknowledged packet (`ccid2_new_ack`): window growth, then the
    /// Ack Ratio that keeps about five windows inside the receiver's Sequence Window.
    fn new_ack(&mut self, maxincr: &mut u64) {
        let r_seq_used = self.cwnd / self.ack_ratio;
        if r_seq_used < PEER_SEQ_WINDOW {
            if self.cwnd < self.ssthresh {
                if *maxincr > 0 {
                    self.packets_acked += 1;
                    if self.packets_acked >= 2 {
                        self.cwnd += 1;
                        *maxincr -= 1;
                        self.packets_acked = 0;
                    }
                }
            } else {
                self.packets_acked += 1;
                if self.packets_acked >= self.cwnd {
                    self.cwnd += 1;
                    self.packets_acked = 0;
                }
            }
        }
        if r_seq_used * WIN_CHANGE_FACTOR >= PEER_SEQ_WINDOW {
            self.change_ack_ratio(self.ack_ratio * 2);
        } else if r_seq_used * WIN_CHANGE_FACTOR < PEER_SEQ_WINDOW / 2 {
            self.change_ack_ratio((self.ack_ratio / 2).max(1));
        }
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
                    bytes: len + WIRE_BYTES,
                    ecn_capable: self.cfg.ecn,
                    rtt_hint_us: us(self.rtt.min_rtt()),
                    is_ack: false,
                    passive_rtt_us: us(self.rtt.srtt()),
                },
                seq,
                len,
                flags: 0,
                // The Ack Ratio the receiver is to use: a change under
                // negotiation rides on every packet until confirmed.
                aux: self.ack_ratio_wanted() as u16,
                tsval: 0,
            });
            if self.cfg.linux_2622 {
                self.on_packet_sent_2622();
            }
            if self.rto_deadline == SimTime::MAX {
                self.rto_deadline = now + self.rtt.rto();
            }
        }
    }

    /// Whether a loss (or mark) of packet `seq`, sent at `sent`, is a new
    /// congestion event rather than part of the last one (RFC 4341 §5: halve
    /// once per window of data).
    ///
    /// Linux 6.1 (`ccid2_congestion_event`) keeps only the jiffies tick of the
    /// last event and of each packet's transmission (`ccid2s_sent`), and treats
    /// a loss as new unless the packet left in an EARLIER tick: a packet sent in
    /// the same tick as the last event, even before it, halves again. In an
    /// overflow the packets sent just before the loss was detected meet the
    /// same full queue, so one of them lost costs the flow a second halving.
    /// 2.6.22's rules keep the window boundary in sequence numbers.
    fn new_congestion_event(&self, seq: u64, sent: SimTime) -> bool {
        if self.cfg.linux_2622 {
            seq >= self.recovery_high
        } else {
            jiffies(sent) >= self.last_cong_jiffy
        }
    }

    /// Halve the window (RFC 4341 §5) for the loss or mark of packet `seq`,
    /// sent at `sent`, unless it belongs to the last event. Returns whether it did.
    fn congestion(&mut self, now: SimTime, seq: u64, sent: SimTime) -> bool {
        if !self.new_congestion_event(seq, sent) {
            return false;
        }
        self.last_cong_jiffy = jiffies(now);
        self.congestion_events += 1;
        self.cwnd = (self.cwnd / 2).max(1);
        self.ssthresh = self.cwnd.max(2);
        self.recovery_high = self.next_seq;
        if self.cfg.linux_2622 {
            self.packets_acked = 0;
            self.clamp_ack_ratio();
        } else {
            self.check_ack_ratio();
        }
        true
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

    fn on_ack(&mut self, now: SimTime, ack: &Ack, vector: &AckVector, out: &mut Vec<Pkt>) {
        if !self.started {
            return;
        }
        if self.cfg.linux_2622 {
            // Lost Acks show as gaps in the Acks' own sequence numbers (RFC 4341
            // §6.1.2): double the Ack Ratio.
            if let Some(l) = self.last_ack_seq {
                if ack.ack_seq > l + 1 {
                    self.ack_ratio *= 2;
                    self.clamp_ack_ratio();
                    self.ack_loss_window = true;
                    self.arsent = 0;
                }
            }
            self.last_ack_seq = Some(ack.ack_seq);
        }
        let hi = ack.cum;
        // The Ack that follows a packet carrying an Ack Ratio change confirms it
        // (options are processed before the CCID sees the Ack).
        if let Some((v, first)) = self.ack_ratio_change {
            if hi >= first && hi < self.next_seq {
                self.ack_ratio = v;
                self.ack_ratio_change = None;
            }
        }
        let mut maxincr = self.ack_ratio.div_ceil(2);
        let mut newly = 0u64;
        if hi >= self.base && hi < self.next_seq {
            for seq in self.base..=hi {
                if !vector.reports(ack.ack_seq, seq) {
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
                    if !self.cfg.linux_2622 {
                        self.new_ack(&mut maxincr);
                    }
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
                    let sent = d.sent;
                    self.pipe -= 1;
                    self.lost_total += 1;
                    // Linux walks the lost packets from the highest down; the
                    // first one that opens an event sets the tick to now, which
                    // every lower one was sent before, so ascending order gives
                    // the same single event.
                    reduced |= self.congestion(now, seq, sent);
                }
            }
            self.loss_scan = self.loss_scan.max(third);
        }
        // ECN marks reported by the receiver: a congestion event, once per window.
        // The compressed Ack says how many marks, not which packets: the newest
        // acknowledged packet stands for them (Linux calls `ccid2_congestion_event`
        // for each marked packet; the newest is the one most likely to be new).
        if ack.ce_count > self.ce_seen {
            self.ce_seen = ack.ce_count;
            if self.cfg.linux_2622 {
                // (its send time is not consulted by 2.6.22's rule)
                reduced |= self.congestion(now, hi, now);
            } else if hi >= self.base && hi < self.next_seq {
                let sent = self.ring[(hi - self.base) as usize].sent;
                reduced |= self.congestion(now, hi, sent);
            }
        }
        if self.cfg.linux_2622 && newly > 0 && !reduced {
            // RFC 4341 §5 growth after loss detection: slow start +1 per packet,
            // at most R per Ack; congestion avoidance +1 per window.
            if self.cwnd < self.ssthresh {
                self.cwnd += newly.min(self.ack_ratio.max(1));
            } else {
                self.packets_acked += newly;
                while self.packets_acked >= self.cwnd {
                    self.packets_acked -= self.cwnd;
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
                self.packets_acked = 0;
                for d in self.ring.iter_mut() {
                    if d.state == OUT {
                        d.state = LOST;
                        self.lost_total += 1;
                    }
                }
                self.pipe = 0;
                self.loss_scan = self.next_seq;
                // 6.1's `ccid2_hc_tx_rto_expire` leaves `tx_last_cong` alone: the
                // packets outstanding are forgotten (its history is cleared, here
                // they are LOST and never scanned again), and a loss among those
                // sent after the timeout is a new event.
                self.recovery_high = self.next_seq;
                if self.cfg.linux_2622 {
                    self.clamp_ack_ratio();
                } else {
                    self.change_ack_ratio(1);
                }
                self.rtt.back_off();
                self.rto_deadline = now + self.rtt.rto();
            }
        }
        self.try_send(now, out);
    }
}

/// Linux's Ack Vector, as the sender reads it (RFC 4340 §11.4; net/dccp/ackvec.c):
/// for every packet from the oldest the sender still asks about, the number of
/// the first Ack that reports it. An Ack numbered `a` reports exactly the packets
/// that had arrived when it left, however long the vector's run-length coding
/// would be (see the module notes).
#[derive(Debug, Default)]
pub(crate) struct AckVector {
    /// Sequence number of `first_ack[0]`.
    base: u64,
    first_ack: VecDeque<u64>,
}

/// In [`AckVector`]: not (yet) received.
const NOT_RECEIVED: u64 = u64::MAX;

impl AckVector {
    /// Packet `seq` arrived; the receiver's next Ack is numbered `next_ack`.
    fn record(&mut self, seq: u64, next_ack: u64) {
        if seq < self.base {
            return; // below what the sender asks about: a duplicate
        }
        let i = (seq - self.base) as usize;
        while self.first_ack.len() <= i {
            self.first_ack.push_back(NOT_RECEIVED);
        }
        if self.first_ack[i] == NOT_RECEIVED {
            self.first_ack[i] = next_ack;
        }
    }

    /// Whether the Ack numbered `ack_seq` reports packet `seq` as received.
    fn reports(&self, ack_seq: u64, seq: u64) -> bool {
        seq >= self.base && self.first_ack.get((seq - self.base) as usize).is_some_and(|&a| a <= ack_seq)
    }

    /// The sender no longer asks about packets below `seq` (Linux trims its
    /// buffer as the sender acknowledges Acks, `dccp_ackvec_clear_state`).
    fn forget_below(&mut self, seq: u64) {
        while self.base < seq {
            if self.first_ack.pop_front().is_none() {
                self.base = seq;
                break;
            }
            self.base += 1;
        }
    }
}

/// The CCID 2 receiver: Ack Vector and Ack Ratio.
#[derive(Debug)]
pub(crate) struct DccpReceiver {
    /// GSR, the greatest sequence number received (RFC 4340 §7.1), which every Ack
    /// carries as its Acknowledgement Number. Kept apart from the vector's last
    /// entry because the vector forgets what the sender has moved past, and a
    /// packet the sender already gave up on (after a timeout) can still arrive.
    hi: Option<u64>,
    pub(crate) vector: AckVector,
    pending: u64,
    ce_count: u64,
    ack_seq: u64,
    /// 2.6.22 rules only: a leftover is flushed after this long (see the module
    /// notes); Linux 6.1's receiver has no such timer.
    delack_timeout: Option<SimDuration>,
    pub(crate) delack_deadline: SimTime,
    pub(crate) app_bytes: u64,
}

impl DccpReceiver {
    fn new(delack_timeout: Option<SimDuration>) -> Self {
        DccpReceiver {
            hi: None,
            vector: AckVector::default(),
            pending: 0,
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
        if self.hi.is_none_or(|h| s > h) {
            self.hi = Some(s);
        }
        self.vector.record(s, self.ack_seq);
        self.pending += 1;
        let r = (pkt.aux as u64).max(1);
        // One Ack per R data packets (RFC 4341 §6.1.2; Linux `ccid2_hc_rx_packet_recv`).
        if self.pending >= r {
            return Some(self.make_ack());
        }
        if let Some(t) = self.delack_timeout {
            if self.delack_deadline == SimTime::MAX {
                self.delack_deadline = now + t;
            }
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
        let a = Ack::new(hi, self.ce_count, self.ack_seq);
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
        let flush = cfg.linux_2622.then_some(cfg.delack_timeout);
        let mut f = DccpFlow { snd: DccpSender::new(cfg), rcv: DccpReceiver::new(flush) };
        if !cfg.linux_2622 {
            f.after_opening_exchange();
        }
        f
    }

    /// The state one application message each way leaves before the data
    /// (6.1 rules): `fairlab-dccpgen`'s client sends a hello as one DCCP data
    /// packet on the connection and waits for the server's READY (the same READY
    /// that halves the receiver's Sequence Window, [`PEER_SEQ_WINDOW`]). The
    /// server's CCID2 counts the hello towards its first Ack
    /// (`ccid2_hc_rx_packet_recv`: one of R), and READY acknowledges it, so the
    /// client's `ccid2_new_ack` has run once in slow start: one packet counted
    /// towards the next increase (+1 per two, at most ⌈R/2⌉ = 1 per Ack) and,
    /// with cwnd/R = 3/2 = 1 below a tenth of the Sequence Window, Ack Ratio 1
    /// asked for, which the first data packets carry. The hello's round trip
    /// itself is not simulated: the flow's data starts at its start time.
    fn after_opening_exchange(&mut self) {
        let mut maxincr = self.snd.ack_ratio.div_ceil(2);
        self.snd.new_ack(&mut maxincr);
        self.rcv.pending = 1;
    }
    #[inline]
    pub fn on_ack(&mut self, now: SimTime, ack: &Ack, out: &mut Vec<Pkt>) {
        self.snd.on_ack(now, ack, &self.rcv.vector, out);
        self.rcv.vector.forget_below(self.snd.base);
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
            linux_2622: false,
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

    /// A sender with window `cwnd` and Ack Ratio `r` in force, and the packets it sent.
    fn sender_with(cwnd: u64, r: u64) -> (DccpSender, Vec<Pkt>) {
        let mut s = DccpSender::new(cfg());
        s.cwnd = cwnd;
        s.ssthresh = 2;
        s.ack_ratio = r;
        let mut out = Vec::new();
        s.on_timer(SimTime::ZERO, &mut out);
        (s, out)
    }

    #[test]
    fn an_ack_ratio_of_200_is_one_ack_that_reports_every_packet() {
        // Linux's Ack Vector is run-length coded: one Ack per R packets whatever R,
        // and the Ack accounts for all of them.
        let (mut s, out) = sender_with(300, 200);
        assert_eq!(out.len(), 300);
        let mut rcv = DccpReceiver::new(None);
        let acks: Vec<Ack> = out.iter().filter_map(|p| rcv.on_data(SimTime::from_millis(50), p)).collect();
        assert_eq!(acks.len(), 1, "one Ack per 200 packets");
        s.on_ack(SimTime::from_millis(100), &acks[0], &rcv.vector, &mut Vec::new());
        assert_eq!((s.acked_total, s.lost_total), (200, 0));
    }

    #[test]
    fn a_hole_does_not_make_the_receiver_acknowledge_early() {
        // Packet 5 is lost, R = 200. Linux's receiver acknowledges on the 200th
        // packet it receives (`ccid2_hc_rx_packet_recv`) and at no other time: its
        // run-length Ack Vector describes any number of holes, so nothing forces
        // an earlier Ack. That Ack reports the 200 that arrived, and packet 5 is
        // declared lost once three later packets are acknowledged.
        let (mut s, out) = sender_with(400, 200);
        let mut rcv = DccpReceiver::new(None);
        let mut acks = Vec::new();
        for p in out.iter().filter(|p| p.seq != 5) {
            if let Some(a) = rcv.on_data(SimTime::from_millis(50), p) {
                acks.push((p.seq, a));
            }
        }
        assert_eq!(acks.iter().map(|(seq, _)| *seq).collect::<Vec<_>>(), vec![200], "one Ack, on the 200th arrival");
        s.on_ack(SimTime::from_millis(100), &acks[0].1, &rcv.vector, &mut Vec::new());
        assert_eq!((s.acked_total, s.lost_total), (200, 1), "0..=200 but packet 5");
    }

    #[test]
    fn an_ack_reports_what_had_arrived_when_it_left() {
        // R = 2: packets 0 and 2 arrive, the Ack of 2 leaves; packet 1 arrives late
        // (reordered). That Ack, processed after packet 1's arrival, still does not
        // report it (Linux's Ack Vector is copied into the Ack as it leaves); the
        // next Ack does.
        let (mut s, out) = sender_with(10, 2);
        let mut rcv = DccpReceiver::new(None);
        assert!(rcv.on_data(SimTime::from_millis(50), &out[0]).is_none());
        let first = rcv.on_data(SimTime::from_millis(50), &out[2]).expect("the second packet is acknowledged");
        assert!(rcv.on_data(SimTime::from_millis(51), &out[1]).is_none());
        s.on_ack(SimTime::from_millis(100), &first, &rcv.vector, &mut Vec::new());
        assert_eq!(s.acked_total, 2, "packets 0 and 2");
        let second = rcv.on_data(SimTime::from_millis(52), &out[3]).expect("two more packets: an Ack");
        s.on_ack(SimTime::from_millis(102), &second, &rcv.vector, &mut Vec::new());
        assert_eq!((s.acked_total, s.lost_total), (4, 0), "packet 1 was late, not lost");
    }

    #[test]
    fn the_receiver_never_acknowledges_on_a_timer() {
        // Linux 6.1 has no delayed-Ack timer for DCCP in OPEN: three packets at
        // R = 5 (four of five with the hello the receiver counted first) stay
        // unacknowledged however long the receiver waits.
        let (_, out) = sender_with(3, 5);
        let mut flow = DccpFlow::new(cfg());
        for p in &out {
            assert!(flow.on_data(SimTime::from_millis(50), p).is_none());
        }
        assert_eq!(flow.rcv.delack_deadline, SimTime::MAX);
        assert!(flow.rcv.on_timer(SimTime::from_secs(10)).is_none());
    }

    #[test]
    fn sends_initial_window_and_grows_in_slow_start() {
        let (mut s, out) = started();
        assert_eq!(out.len(), 4);
        let mut rcv = DccpReceiver::new(None);
        let mut acks = Vec::new();
        for p in &out {
            if let Some(a) = rcv.on_data(SimTime::from_millis(50), p) {
                acks.push(a);
            }
        }
        assert_eq!(acks.len(), 2, "Ack Ratio 2: one Ack per two packets");
        let mut out2 = Vec::new();
        for a in &acks {
            s.on_ack(SimTime::from_millis(100), a, &rcv.vector, &mut out2);
        }
        // Linux slow start: +1 per two acknowledged packets, at most ⌈R/2⌉ = 1
        // per Ack: 4 + 2 = 6, all 6 in flight.
        assert_eq!(s.cwnd, 6);
        assert_eq!(out2.len(), 6);
        assert_eq!(s.rtt.srtt(), SimDuration::from_millis(100));
        // cwnd/R = 4/2 = 2, and 2·5 < 100/2: the sender asks for R = 1, and the
        // new packets carry the request; the old R stays in force until confirmed.
        assert!(out2.iter().all(|p| p.aux == 1));
        assert_eq!(s.ack_ratio, 2);
    }

    #[test]
    fn a_packet_is_lost_after_three_later_packets_are_acked_and_cwnd_halves_once() {
        let (mut s, out) = started();
        let mut rcv = DccpReceiver::new(None);
        // packets 0 and 1 lost, 2 and 3 arrive
        let mut last = None;
        for p in &out[2..] {
            last = rcv.on_data(SimTime::from_millis(50), p).or(last);
        }
        let a = last.unwrap();
        let mut o = Vec::new();
        s.on_ack(SimTime::from_millis(100), &a, &rcv.vector, &mut o);
        assert_eq!(s.lost_total, 0, "only two packets acked above the holes");
        // one more packet (seq 4..) arrives
        for p in &o {
            if let Some(a) = rcv.on_data(SimTime::from_millis(150), p) {
                s.on_ack(SimTime::from_millis(200), &a, &rcv.vector, &mut Vec::new());
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
        assert_eq!(s.ack_ratio_wanted(), 1, "a timeout asks for Ack Ratio 1");
        assert_eq!(o[0].aux, 1);
    }

    /// Lossless rounds 100 ms apart: every packet arrives, the receiver Acks per
    /// its Ack Ratio (a leftover is flushed by its timer), the sender answers.
    fn rounds(s: &mut DccpSender, rcv: &mut DccpReceiver, mut out: Vec<Pkt>, n: usize, t: &mut SimTime) -> (Vec<Pkt>, usize) {
        let mut acks_last = 0;
        for _ in 0..n {
            *t += SimDuration::from_millis(50);
            let mut acks: Vec<Ack> = out.iter().filter_map(|p| rcv.on_data(*t, p)).collect();
            acks.extend(rcv.on_timer(*t + SimDuration::from_secs(1)));
            *t += SimDuration::from_millis(50);
            acks_last = acks.len();
            let mut next = Vec::new();
            for a in &acks {
                s.on_ack(*t, a, &rcv.vector, &mut next);
            }
            out = next;
        }
        (out, acks_last)
    }

    #[test]
    fn the_ack_ratio_follows_the_window_as_linux_sizes_it() {
        // Linux keeps cwnd/R in [5, 10): five windows' worth of Acks inside the
        // receiver's 50-packet Sequence Window (RFC 4340 §7.5.2). At a window of
        // 200 to 319 packets that is R = 32, and 6 to 10 Acks per round.
        let (mut s, out) = started();
        s.ssthresh = 260;
        let mut rcv = DccpReceiver::new(None);
        let mut t = SimTime::ZERO;
        let mut out = out;
        while s.cwnd < 200 {
            out = rounds(&mut s, &mut rcv, out, 1, &mut t).0;
        }
        let (_, acks) = rounds(&mut s, &mut rcv, out, 3, &mut t);
        assert!((200..320).contains(&s.cwnd), "cwnd {}", s.cwnd);
        assert_eq!(s.ack_ratio, 32);
        assert!((6..=10).contains(&acks), "{acks} Acks for a window of {}", s.cwnd);
    }

    /// Seed 0..7 leave at t = 0 with R = 1 in force. Packet 0 is lost; the Acks
    /// of 1 and 2 come at `t12` (each lets one new packet out: 8, then 9) and the
    /// Ack of 3 at 101 ms reveals the loss of 0 (three packets acknowledged above
    /// it, RFC 4341 §6.1 / NUMDUPACK): the first congestion event, in jiffy
    /// 101/4 = 25 (HZ = 250). Packet 8 is lost too; every other packet arrives,
    /// round after round, until three packets above 8 are acknowledged. Returns
    /// the number of window reductions and the packets declared lost.
    fn loss_after_an_event_in_the_same_tick(t12: SimTime) -> (u64, u64) {
        let (mut s, out) = sender_with(8, 1);
        let mut rcv = DccpReceiver::new(None);
        let deliver = |s: &mut DccpSender, rcv: &mut DccpReceiver, p: &Pkt, at: SimTime, next: &mut Vec<Pkt>| {
            let a = rcv.on_data(at, p).expect("R = 1: one Ack per packet");
            s.on_ack(at, &a, &rcv.vector, next);
        };
        let mut next = Vec::new();
        deliver(&mut s, &mut rcv, &out[1], t12, &mut next);
        deliver(&mut s, &mut rcv, &out[2], t12, &mut next);
        assert_eq!(next.iter().map(|p| p.seq).collect::<Vec<_>>(), vec![8, 9]);
        deliver(&mut s, &mut rcv, &out[3], SimTime::from_millis(101), &mut next);
        assert_eq!((s.lost_total, s.congestion_events), (1, 1), "packet 0 lost, one event");
        let mut pending: Vec<Pkt> = out[4..].iter().cloned().chain(next.into_iter().filter(|p| p.seq != 8)).collect();
        let mut t = SimTime::from_millis(150);
        while s.lost_total < 2 && !pending.is_empty() {
            let mut sent = Vec::new();
            for p in &pending {
                deliver(&mut s, &mut rcv, p, t, &mut sent);
            }
            pending = sent;
            t += SimDuration::from_millis(100);
        }
        (s.congestion_events, s.lost_total)
    }

    #[test]
    fn a_packet_sent_in_the_tick_of_the_last_event_can_halve_again() {
        // Linux 6.1 `ccid2_congestion_event`: a loss is part of the last event only
        // if the packet was sent in an earlier jiffy than that event. Packet 8 left
        // at 100.4 ms, jiffy 25, the event's own tick (before the event, at 101 ms):
        // its loss is a second event.
        assert_eq!(loss_after_an_event_in_the_same_tick(SimTime::from_micros(100_400)), (2, 2));
        // Sent at 99.6 ms, jiffy 24, before the event's tick: the same window.
        assert_eq!(loss_after_an_event_in_the_same_tick(SimTime::from_micros(99_600)), (1, 2));
    }

    #[test]
    fn the_initial_window_follows_rfc_3390_whatever_the_scenario_says() {
        // RFC 3390: min(4·MSS, max(2·MSS, 4380 bytes)). 1448-byte packets (the
        // grid's) → 4380/1448 = 3.02 → 3 packets; 1000 → 4; 2500 → 2.
        for (mss, iw) in [(1448, 3), (1000, 4), (1095, 4), (1096, 3), (2190, 3), (2191, 2), (2500, 2)] {
            let s = DccpSender::new(DccpConfig { mss, initial_cwnd: 10, ..cfg() });
            assert_eq!(s.cwnd, iw, "mss {mss}");
        }
        // 2.6.22's rules keep the scenario's window (seed 001's hosts ran 3).
        let s = DccpSender::new(DccpConfig { mss: 1448, initial_cwnd: 10, linux_2622: true, ..cfg() });
        assert_eq!(s.cwnd, 10);
    }

    #[test]
    fn after_the_hello_and_ready_slow_start_sends_3_5_7_11() {
        // Linux 6.1, 1448-byte packets: cwnd 3, R 2. The hello's Ack (READY)
        // counts one packet and asks for R = 1 (cwnd/R = 1, 1·5 < 50/2), which
        // the receiver uses from the first data packet (its count already 1 from
        // the hello): every packet is acknowledged. Per Ack at most ⌈1/2⌉ = 1,
        // +1 per two packets: round 1 acks 3 (with the hello's 1: 4 counted,
        // +2) → 5; round 2 acks 5 (+2, one left over) → 7; round 3 acks 7 (with
        // the left-over one: 8, +4) → 11. The kernel's receiver counted 3, 5, 7,
        // 11 packets in its first four rounds (vm, CCID2 pair at 200 ms, seed 42).
        let c = DccpConfig { mss: 1448, initial_cwnd: 10, ..cfg() };
        let mut f = DccpFlow::new(c);
        let mut out = Vec::new();
        f.snd.on_timer(SimTime::ZERO, &mut out);
        let mut t = SimTime::ZERO;
        let mut sizes = vec![out.len()];
        for _ in 0..3 {
            let (next, _) = rounds(&mut f.snd, &mut f.rcv, out, 1, &mut t);
            out = next;
            sizes.push(out.len());
        }
        assert_eq!(sizes, vec![3, 5, 7, 11]);
    }

    #[test]
    fn a_loss_cuts_an_ack_ratio_above_the_new_window() {
        let (mut s, _) = started();
        s.cwnd = 20;
        s.ack_ratio = 16;
        s.congestion(SimTime::ZERO, 0, SimTime::ZERO);
        assert_eq!(s.cwnd, 10);
        // R = 16 > cwnd = 10: ask for cwnd/2 = 5 (`ccid2_check_l_ack_ratio`).
        assert_eq!(s.ack_ratio_wanted(), 5);
    }
}
