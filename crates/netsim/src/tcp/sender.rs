//! TCP sender: SACK scoreboard with RFC 6675 loss recovery and RFC 6937 PRR, NewReno (RFC 6582)
//! when SACK is off, RFC 6298 retransmission timer, RFC 3168 ECN reaction, pacing,
//! and Linux `tcp_rate.c` delivery-rate samples for the controller.
//!
//! Read this first:
//! - Sequence numbers are SEGMENT indices (byte = index × MSS). Every segment is
//!   MSS-sized except the last one of a finite transfer, so the scoreboard is one
//!   ring of per-segment records starting at `snd_una`.
//! - In-flight ("pipe", RFC 6675 §4 SetPipe) is kept incrementally as Linux does:
//!   `pipe = (snd_nxt − snd_una) − sacked − lost + retransmitted`. A segment is
//!   lost (RFC 6675 §4 IsLost, DupThresh = 3) when three SACKed segments lie above
//!   it; since every segment has the same size, that is "below the 3rd-highest
//!   SACKed segment" ([`TcpSender::lost_mark`]), which only moves up.
//! - Limited transmit (RFC 3042) falls out of the pipe: the first two dupacks
//!   (SACKs) lower the pipe by one segment each, releasing one new segment each.
//! - The controller is told of ONE loss episode per window: entering fast recovery
//!   (or CWR for ECN) calls `on_congestion_event` once and sets `recovery_point`;
//!   nothing else reduces the window until `snd_una` passes it.
//! - During the episode the sending window is not the controller's: Proportional
//!   Rate Reduction (RFC 6937, as Linux `tcp_cwnd_reduction`) lets out
//!   ssthresh/prior_cwnd of what each ACK delivers while the pipe is above
//!   ssthresh, and refills up to ssthresh no faster than slow start below it
//!   (PRR-SSRB). Controllers that set their own recovery window (BBR, Linux's
//!   `cong_control`) opt out with `sets_recovery_window`.
//! - Without SACK each dupack counts as one "SACKed" segment (as Linux
//!   `tcp_add_reno_sack`), which is RFC 6582's window inflation.

use std::collections::VecDeque;

use aqm::PacketMeta;
use netunits::prefetch::prefetch;
use netunits::{Bandwidth, SimDuration, SimTime};

use crate::cc::{AckSample, CongestionControl, CongestionEvent, CongestionSignal, RateSample};
use crate::packet::{Ack, Pkt, HEADER_BYTES, PF_CWR, PF_RETX};
use crate::rtt::RttEstimator;

/// RFC 6675 §2 / RFC 5681 §3.2: DupThresh.
const DUP_THRESH: u64 = 3;

const SACKED: u8 = 1;
const LOST: u8 = 2;
/// Retransmitted and not yet acknowledged/SACKed: counted in the pipe again.
const RETRANS: u8 = 4;
/// Ever retransmitted: no RTT sample from it (Karn, RFC 6298 §3).
const EVER_RETRANS: u8 = 8;

/// Per-segment sender record (Linux keeps the same in `tcp_skb_cb`).
#[derive(Clone, Copy, Debug, Default)]
struct Seg {
    /// Time of the last (re)transmission.
    sent: SimTime,
    /// `tcp_rate.c` snapshot at send: connection `delivered` bytes,
    delivered: u64,
    /// ... the time `delivered` last changed,
    delivered_time: SimTime,
    /// ... and the start of the current send phase.
    first_tx: SimTime,
    flags: u8,
    app_limited: bool,
}

/// Loss-recovery state, named after Linux's `tcp_ca_state`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CaState {
    /// Normal sending.
    Open,
    /// Reducing the window after an ECN echo (RFC 3168 §6.1.2).
    Cwr,
    /// Fast recovery (RFC 6675 / RFC 6582).
    Recovery,
    /// After a retransmission timeout (RFC 6298 §5, RFC 5681 §3.1).
    Loss,
}

impl CaState {
    /// Numeric code used in the flow samples' `state` column.
    pub fn code(self) -> u8 {
        match self {
            CaState::Open => 0,
            CaState::Cwr => 1,
            CaState::Recovery => 2,
            CaState::Loss => 3,
        }
    }
}

/// Proportional Rate Reduction state for one CWR or Recovery episode (RFC 6937
/// §3, with Linux's `tcp_cwnd_reduction`), in segments.
#[derive(Clone, Copy, Debug)]
struct Prr {
    /// cwnd when the episode began (Linux `prior_cwnd`; RFC 6937's RecoverFS).
    prior_cwnd: u64,
    /// The controller's ssthresh after its reduction: the window to converge to.
    ssthresh: u64,
    /// RFC 6937 prr_delivered: segments delivered (ACKed or SACKed) since the start.
    delivered: u64,
    /// RFC 6937 prr_out: segments sent (new or retransmitted) since the start.
    out: u64,
    /// The sending window the last ACK allowed: pipe + sndcnt (Linux sets
    /// `snd_cwnd` to this).
    cwnd: u64,
}

/// Accumulates the rate sample of one ACK (Linux `struct rate_sample`).
#[derive(Clone, Copy, Debug, Default)]
struct RateAcc {
    valid: bool,
    prior_delivered: u64,
    prior_time: SimTime,
    is_app_limited: bool,
    send_interval: SimDuration,
    last_sent: SimTime,
    last_idx: u64,
}

/// Configuration of a sender.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SenderConfig {
    pub flow: u32,
    pub mss: u32,
    pub ecn: bool,
    pub sack: bool,
    pub total_segs: u64,
    pub last_seg_len: u32,
    pub start: SimTime,
    pub stop: SimTime,
    pub rwnd_segs: u64,
}

/// The sending half of a TCP flow.
#[derive(Debug)]
pub(crate) struct TcpSender {
    cfg: SenderConfig,
    pub(crate) started: bool,
    pub(crate) finished_at: Option<SimTime>,
    snd_una: u64,
    snd_nxt: u64,
    segs: VecDeque<Seg>,
    sacked_out: u64,
    lost_out: u64,
    retrans_out: u64,
    /// LOST and neither RETRANS nor SACKED: waiting for retransmission.
    lost_pending: u64,
    /// The sender's view of SACKed ranges above `snd_una`, sorted and merged.
    sack_ranges: VecDeque<(u64, u64)>,
    /// Every un-SACKed segment below this is marked LOST.
    lost_mark: u64,
    /// No segment below this needs retransmitting (RFC 6675 HighRxt, as a scan pointer).
    rxt_scan: u64,
    /// NewReno: dupacks counted as SACKed segments.
    reno_dupacks: u64,
    pub(crate) state: CaState,
    recovery_point: u64,
    cwr_pending: bool,
    /// Set while a CWR or Recovery episode reduces the window by PRR; `None` for
    /// controllers that set their own window in recovery (Linux `cong_control`).
    prr: Option<Prr>,
    /// Segments ever marked lost (for the per-ACK "newly lost" count).
    marked_lost: u64,
    pub(crate) cc: Box<dyn CongestionControl>,
    pub(crate) rtt: RttEstimator,
    pub(crate) rto_deadline: SimTime,
    pace_next: SimTime,
    pub(crate) pace_wake: SimTime,
    cwnd_limited: bool,
    // tcp_rate.c connection state
    delivered: u64,
    delivered_time: SimTime,
    first_tx_time: SimTime,
    app_limited_until: u64,
    // statistics
    pub(crate) retrans_segs: u64,
    pub(crate) segs_sent: u64,
    pub(crate) rto_count: u64,
    pub(crate) recoveries: u64,
    pub(crate) congestion_events: u64,
}

impl TcpSender {
    pub fn new(cfg: SenderConfig, cc: Box<dyn CongestionControl>, ring_hint: usize) -> Self {
        TcpSender {
            cfg,
            started: false,
            finished_at: None,
            snd_una: 0,
            snd_nxt: 0,
            segs: VecDeque::with_capacity(ring_hint),
            sacked_out: 0,
            lost_out: 0,
            retrans_out: 0,
            lost_pending: 0,
            sack_ranges: VecDeque::with_capacity(16),
            lost_mark: 0,
            rxt_scan: 0,
            reno_dupacks: 0,
            state: CaState::Open,
            recovery_point: 0,
            cwr_pending: false,
            prr: None,
            marked_lost: 0,
            cc,
            rtt: RttEstimator::new(),
            rto_deadline: SimTime::MAX,
            pace_next: SimTime::ZERO,
            pace_wake: SimTime::MAX,
            cwnd_limited: true,
            delivered: 0,
            delivered_time: SimTime::ZERO,
            first_tx_time: SimTime::ZERO,
            app_limited_until: 0,
            retrans_segs: 0,
            segs_sent: 0,
            rto_count: 0,
            recoveries: 0,
            congestion_events: 0,
        }
    }

    #[inline]
    fn seg_len(&self, idx: u64) -> u32 {
        if idx + 1 == self.cfg.total_segs {
            self.cfg.last_seg_len
        } else {
            self.cfg.mss
        }
    }

    /// RFC 6675 §4 pipe, in segments.
    #[inline]
    pub(crate) fn pipe(&self) -> u64 {
        let out = self.snd_nxt - self.snd_una;
        let sacked = if self.cfg.sack { self.sacked_out } else { self.reno_dupacks };
        (out + self.retrans_out).saturating_sub(sacked + self.lost_out)
    }

    #[inline]
    fn pipe_bytes(&self) -> u64 {
        self.pipe() * self.cfg.mss as u64
    }

    /// Congestion window in bytes: the controller's, or PRR's during a
    /// window reduction (what Linux reports as `snd_cwnd` then).
    #[inline]
    pub(crate) fn cwnd(&self) -> u64 {
        match &self.prr {
            Some(p) => p.cwnd * self.cfg.mss as u64,
            None => self.cc.cwnd(),
        }
    }

    /// The window that limits sending, in segments (at least 1).
    #[inline]
    fn cwnd_segs(&self) -> u64 {
        match &self.prr {
            Some(p) => p.cwnd,
            None => (self.cc.cwnd() / self.cfg.mss as u64).max(1),
        }
    }

    /// Segments delivered so far that are not yet cumulatively ACKed (SACKed, or
    /// counted as dupacks without SACK).
    #[inline]
    fn sacked_segs(&self) -> u64 {
        if self.cfg.sack {
            self.sacked_out
        } else {
            self.reno_dupacks
        }
    }

    /// Start a window reduction (Linux `tcp_init_cwnd_reduction`): the caller
    /// has just told the controller of the episode, so its ssthresh is the target.
    fn start_prr(&mut self, prior_cwnd_bytes: u64) {
        if self.cc.sets_recovery_window() {
            return;
        }
        let mss = self.cfg.mss as u64;
        let prior_cwnd = (prior_cwnd_bytes / mss).max(1);
        let ssthresh = (self.cc.ssthresh() / mss).max(1);
        self.prr = Some(Prr { prior_cwnd, ssthresh, delivered: 0, out: 0, cwnd: prior_cwnd });
    }

    /// RFC 6937 §3.1 on one ACK: `delivered` segments newly ACKed or SACKed,
    /// `newly_lost` newly marked lost, `una_advanced` if the cumulative ACK moved.
    fn prr_on_ack(&mut self, delivered: u64, newly_lost: u64, una_advanced: bool) {
        let pipe = self.pipe();
        let Some(p) = self.prr.as_mut() else { return };
        if delivered == 0 {
            return;
        }
        p.delivered += delivered;
        let sndcnt = if pipe > p.ssthresh {
            // Proportional part: send ssthresh/RecoverFS of what was delivered,
            // rounded up (RFC 6937 §3.1, "CEIL(prr_delivered * ssthresh / RecoverFS)").
            (p.ssthresh * p.delivered).div_ceil(p.prior_cwnd).saturating_sub(p.out)
        } else {
            // Slow-start reduction bound (PRR-SSRB, RFC 6937 §3.1): grow back to
            // ssthresh no faster than slow start, one extra segment per ACK that
            // advances snd_una without new losses (Linux's refinement).
            let mut n = p.delivered.saturating_sub(p.out).max(delivered);
            if una_advanced && newly_lost == 0 {
                n += 1;
            }
            n.min(p.ssthresh - pipe)
        };
        // The first ACK of an episode always lets one segment out: the fast
        // retransmit (RFC 6675 §5 step 4.2; Linux forces it the same way).
        let sndcnt = if p.out == 0 { sndcnt.max(1) } else { sndcnt };
        p.cwnd = pipe + sndcnt;
    }

    /// Prefetch, stage 1: this sender's own cache lines. Called for an ACK a few
    /// events ahead (see `Sim::on_ack_arrive`); a hint, no effect on results.
    #[inline]
    pub(crate) fn prefetch_state(&self) {
        prefetch(self);
    }

    /// Prefetch, stage 2: what this sender points to — the scoreboard's head and
    /// tail, the controller, the SACK ranges. Reads the pointers, so it is called
    /// one event after stage 1, when `self` is already in cache.
    #[inline]
    pub(crate) fn prefetch_heap(&self) {
        if let (Some(head), Some(tail)) = (self.segs.front(), self.segs.back()) {
            prefetch(head);
            prefetch(tail);
        }
        prefetch(&*self.cc);
        if let Some(r) = self.sack_ranges.front() {
            prefetch(r);
        }
    }

    /// The sender's wake-up time: start, RTO or pacing.
    #[inline]
    pub(crate) fn next_wakeup(&self) -> SimTime {
        if !self.started {
            return self.cfg.start;
        }
        self.rto_deadline.min(self.pace_wake)
    }

    fn finished(&self) -> bool {
        self.finished_at.is_some()
    }

    /// Timer work due at `now`.
    pub(crate) fn on_timer(&mut self, now: SimTime, out: &mut Vec<Pkt>) {
        if !self.started {
            if now < self.cfg.start {
                return;
            }
            self.started = true;
            self.pace_next = now;
        }
        if now >= self.rto_deadline {
            self.on_rto(now);
        }
        if now >= self.pace_wake {
            self.pace_wake = SimTime::MAX;
        }
        self.try_send(now, out);
    }

    /// Send what the window, the receiver window, pacing and the application allow.
    pub(crate) fn try_send(&mut self, now: SimTime, out: &mut Vec<Pkt>) {
        if !self.started || self.finished() {
            return;
        }
        let cwnd_segs = self.cwnd_segs();
        loop {
            if self.pace_next > now && self.cc.pacing_rate().is_some() {
                self.pace_wake = self.pace_next;
                self.cwnd_limited = true;
                break;
            }
            // RFC 6675 §5 (C): send while cwnd − pipe ≥ 1 SMSS.
            if self.pipe() >= cwnd_segs {
                self.cwnd_limited = true;
                break;
            }
            // NextSeg (RFC 6675 §4): (1) a lost segment not yet retransmitted,
            if let Some(idx) = self.next_lost() {
                self.transmit(now, idx, true, out);
                continue;
            }
            // (2) otherwise new data, if the application and rwnd allow.
            if self.can_send_new(now) {
                self.transmit(now, self.snd_nxt, false, out);
                continue;
            }
            self.cwnd_limited = false;
            // tcp_rate_check_app_limited: the application, not cwnd, limits us.
            if self.lost_pending == 0 {
                self.app_limited_until = (self.delivered + self.pipe_bytes()).max(1);
            }
            break;
        }
    }

    #[inline]
    fn can_send_new(&self, now: SimTime) -> bool {
        self.snd_nxt < self.cfg.total_segs && self.snd_nxt - self.snd_una < self.cfg.rwnd_segs && now < self.cfg.stop
    }

    /// Lowest segment marked lost and not yet retransmitted (RFC 6675 NextSeg (1)).
    #[inline]
    fn next_lost(&mut self) -> Option<u64> {
        if self.lost_pending == 0 {
            return None;
        }
        let mut i = self.rxt_scan.max(self.snd_una);
        while i < self.snd_nxt {
            let f = self.segs[(i - self.snd_una) as usize].flags;
            if f & LOST != 0 && f & (RETRANS | SACKED) == 0 {
                self.rxt_scan = i;
                return Some(i);
            }
            i += 1;
        }
        self.rxt_scan = i;
        debug_assert!(false, "lost_pending = {} but no lost segment found", self.lost_pending);
        None
    }

    fn transmit(&mut self, now: SimTime, idx: u64, retrans: bool, out: &mut Vec<Pkt>) {
        let len = self.seg_len(idx);
        // tcp_rate_skb_sent: a new send phase starts when nothing is outstanding.
        if self.snd_nxt == self.snd_una {
            self.first_tx_time = now;
            self.delivered_time = now;
        }
        let snap = Seg {
            sent: now,
            delivered: self.delivered,
            delivered_time: self.delivered_time,
            first_tx: self.first_tx_time,
            flags: 0,
            app_limited: self.app_limited_until != 0,
        };
        let mut flags = 0u8;
        if retrans {
            let s = &mut self.segs[(idx - self.snd_una) as usize];
            s.flags |= RETRANS | EVER_RETRANS;
            let f = s.flags;
            *s = Seg { flags: f, ..snap };
            self.retrans_out += 1;
            self.lost_pending -= 1;
            self.retrans_segs += 1;
            flags |= PF_RETX;
        } else {
            debug_assert_eq!(idx, self.snd_nxt);
            self.segs.push_back(snap);
            self.snd_nxt += 1;
            if self.cwr_pending {
                // RFC 3168 §6.1.2: CWR on the first new data packet after the reduction.
                flags |= PF_CWR;
                self.cwr_pending = false;
            }
        }
        self.segs_sent += 1;
        if let Some(p) = self.prr.as_mut() {
            p.out += 1;
        }
        out.push(Pkt {
            meta: PacketMeta {
                flow: self.cfg.flow,
                bytes: len + HEADER_BYTES,
                // RFC 3168 §6.1.5: retransmitted packets are not ECN-capable.
                ecn_capable: self.cfg.ecn && !retrans,
                // ZRTT's base-RTT header hint (seed 002): the sender's lowest RTT.
                rtt_hint_us: self.rtt_hint_us(),
                is_ack: false,
                // The engine's passive estimate is the sender's smoothed RTT.
                passive_rtt_us: self.srtt_us(),
            },
            seq: idx,
            len,
            flags,
            aux: 0,
        });
        self.cc.on_packet_sent(now, len as u64, self.pipe_bytes());
        if let Some(rate) = self.cc.pacing_rate() {
            if rate.as_bps() > 0 {
                // Pace the payload, as Linux charges `skb->len` (no headers) against
                // `sk_pacing_rate` (`tcp_update_skb_after_send`): BBR's rates are
                // payload rates (packets × MSS).
                self.pace_next = self.pace_next.max(now) + rate.tx_time(len as u64);
            }
        }
        // RFC 6298 (5.1): start the timer if it is not running.
        if self.rto_deadline == SimTime::MAX {
            self.rto_deadline = now + self.rtt.rto();
        }
    }

    /// Mark segment `idx` (≥ snd_una) SACKed; returns its payload if newly delivered.
    #[inline]
    fn mark_sacked(&mut self, idx: u64, rs: &mut RateAcc, sack_rtt: &mut Option<SimTime>) -> u64 {
        let len = self.seg_len(idx) as u64;
        let s = &mut self.segs[(idx - self.snd_una) as usize];
        if s.flags & SACKED != 0 {
            return 0;
        }
        let f = s.flags;
        s.flags = (f | SACKED) & !(LOST | RETRANS);
        let seg = *s;
        self.sacked_out += 1;
        if f & LOST != 0 {
            self.lost_out -= 1;
            if f & RETRANS == 0 {
                self.lost_pending -= 1;
            }
        }
        if f & RETRANS != 0 {
            self.retrans_out -= 1;
        }
        if f & EVER_RETRANS == 0 {
            *sack_rtt = Some(sack_rtt.map_or(seg.sent, |t| t.max(seg.sent)));
        }
        Self::rate_delivered(&mut self.first_tx_time, rs, &seg, idx);
        len
    }

    /// `tcp_rate_skb_delivered`: remember the most recently sent delivered segment.
    #[inline]
    fn rate_delivered(first_tx_time: &mut SimTime, rs: &mut RateAcc, seg: &Seg, idx: u64) {
        if !rs.valid || seg.sent > rs.last_sent || (seg.sent == rs.last_sent && idx > rs.last_idx) {
            rs.valid = true;
            rs.prior_delivered = seg.delivered;
            rs.prior_time = seg.delivered_time;
            rs.is_app_limited = seg.app_limited;
            rs.last_sent = seg.sent;
            rs.last_idx = idx;
            *first_tx_time = seg.sent;
            rs.send_interval = seg.sent.saturating_since(seg.first_tx);
        }
    }

    /// Apply one SACK block `[s, e)`; returns newly delivered bytes.
    fn process_sack_block(&mut self, s: u64, e: u64, rs: &mut RateAcc, sack_rtt: &mut Option<SimTime>) -> u64 {
        let s = s.max(self.snd_una);
        let e = e.min(self.snd_nxt);
        if s >= e {
            return 0;
        }
        let i = self.sack_ranges.partition_point(|r| r.1 < s);
        let mut j = i;
        let mut cur = s;
        let (mut lo, mut hi) = (s, e);
        let mut newly = 0;
        while j < self.sack_ranges.len() && self.sack_ranges[j].0 <= e {
            let (a, b) = self.sack_ranges[j];
            for idx in cur..a.min(e) {
                newly += self.mark_sacked(idx, rs, sack_rtt);
            }
            cur = cur.max(b);
            lo = lo.min(a);
            hi = hi.max(b);
            j += 1;
        }
        for idx in cur..e {
            newly += self.mark_sacked(idx, rs, sack_rtt);
        }
        if j == i + 1 {
            self.sack_ranges[i] = (lo, hi);
        } else if j == i {
            self.sack_ranges.insert(i, (lo, hi));
        } else {
            self.sack_ranges[i] = (lo, hi);
            self.sack_ranges.drain(i + 1..j);
        }
        debug_assert!(self.sack_ranges.iter().zip(self.sack_ranges.iter().skip(1)).all(|(x, y)| x.1 < y.0));
        newly
    }

    /// RFC 6675 IsLost for all segments at once: everything un-SACKed below the
    /// DupThresh-th highest SACKed segment is lost.
    fn update_lost_mark(&mut self) {
        let mut need = DUP_THRESH;
        let mut mark = None;
        for &(a, b) in self.sack_ranges.iter().rev() {
            let n = b - a;
            if n >= need {
                mark = Some(b - need);
                break;
            }
            need -= n;
        }
        if let Some(l) = mark {
            if l > self.lost_mark {
                let from = self.lost_mark.max(self.snd_una);
                for idx in from..l {
                    self.mark_lost(idx);
                }
                self.lost_mark = l;
            }
        }
    }

    #[inline]
    fn mark_lost(&mut self, idx: u64) {
        let s = &mut self.segs[(idx - self.snd_una) as usize];
        if s.flags & (SACKED | LOST) == 0 {
            s.flags |= LOST;
            self.lost_out += 1;
            self.marked_lost += 1;
            if s.flags & RETRANS == 0 {
                self.lost_pending += 1;
            }
        }
    }

    fn congestion_event(&mut self, now: SimTime, signal: CongestionSignal) {
        self.congestion_events += 1;
        let ev = CongestionEvent {
            now,
            signal,
            in_flight: self.pipe_bytes(),
            srtt: self.rtt.srtt(),
            min_rtt: self.rtt.min_rtt(),
        };
        self.cc.on_congestion_event(&ev);
    }

    /// Process an ACK arriving at `now`.
    pub(crate) fn on_ack(&mut self, now: SimTime, ack: &Ack, out: &mut Vec<Pkt>) {
        if !self.started {
            return;
        }
        let prior_in_flight = self.pipe_bytes();
        let prior_sacked = self.sacked_segs();
        let prior_marked_lost = self.marked_lost;
        let mut rs = RateAcc::default();
        let mut sack_rtt: Option<SimTime> = None;
        let mut newly_bytes = 0u64;
        let cum = ack.cum.min(self.snd_nxt);

        // SACK blocks first (Linux tcp_sacktag_write_queue), then the cumulative ACK.
        if self.cfg.sack {
            for k in 0..ack.nblocks as usize {
                let (s, e) = ack.blocks[k];
                newly_bytes += self.process_sack_block(s, e, &mut rs, &mut sack_rtt);
            }
        }

        let mut acked_segs = 0u64;
        let mut rtt_from: Option<SimTime> = None;
        if cum > self.snd_una {
            for idx in self.snd_una..cum {
                let seg = self.segs.pop_front().expect("scoreboard holds every unacked segment");
                let f = seg.flags;
                if f & SACKED != 0 {
                    self.sacked_out -= 1;
                } else {
                    newly_bytes += self.seg_len(idx) as u64;
                    Self::rate_delivered(&mut self.first_tx_time, &mut rs, &seg, idx);
                    if f & LOST != 0 {
                        self.lost_out -= 1;
                        if f & RETRANS == 0 {
                            self.lost_pending -= 1;
                        }
                    }
                    if f & RETRANS != 0 {
                        self.retrans_out -= 1;
                    }
                }
                // Karn (RFC 6298 §3): only never-retransmitted segments give samples;
                // use the newest one acked (least inflated by delayed ACKs).
                if f & EVER_RETRANS == 0 {
                    rtt_from = Some(seg.sent);
                }
            }
            acked_segs = cum - self.snd_una;
            self.snd_una = cum;
            self.rxt_scan = self.rxt_scan.max(cum);
            self.lost_mark = self.lost_mark.max(cum);
            let k = self.sack_ranges.partition_point(|r| r.1 <= cum);
            if k > 0 {
                self.sack_ranges.drain(..k);
            }
            if let Some(first) = self.sack_ranges.front_mut() {
                first.0 = first.0.max(cum);
            }
        } else if !self.cfg.sack && self.snd_nxt > self.snd_una && ack.cum == self.snd_una {
            // A duplicate ACK (RFC 5681 §2). Counted as one SACKed segment
            // (Linux tcp_add_reno_sack), capped at the segments outstanding.
            let out_segs = self.snd_nxt - self.snd_una;
            self.reno_dupacks = (self.reno_dupacks + 1).min(out_segs.saturating_sub(self.lost_out));
        }

        // RTT (RFC 6298 §2, Karn's rule; SACKed segments as Linux's sack_rtt).
        let sample_from = rtt_from.or(sack_rtt);
        let rtt_sample = sample_from.map(|t| now.saturating_since(t));
        if let Some(r) = rtt_sample {
            self.rtt.sample(r);
        }

        if self.cfg.sack {
            self.update_lost_mark();
        } else if acked_segs > 0 {
            // Linux tcp_remove_reno_sacks: the ACK covered `acked_segs` segments, one
            // of which was the hole; the rest had been counted as dupacks.
            self.reno_dupacks = self.reno_dupacks.saturating_sub(acked_segs - 1);
            if self.state != CaState::Recovery {
                self.reno_dupacks = 0;
            }
        }

        // Recovery / CWR / Loss end when the recovery point is acknowledged
        // (RFC 6675 §5, RFC 6582 §3.2 step 3, RFC 3168 §6.1.2).
        let mut force_rxt = false;
        match self.state {
            CaState::Recovery | CaState::Cwr | CaState::Loss if self.snd_una >= self.recovery_point => {
                if self.state != CaState::Loss {
                    self.cc.on_recovery_exit(now);
                }
                // Linux tcp_end_cwnd_reduction: the window is the controller's
                // (its ssthresh for the loss-based ones) again.
                self.prr = None;
                self.state = CaState::Open;
                self.reno_dupacks = 0;
            }
            CaState::Recovery if !self.cfg.sack && acked_segs > 0 && self.snd_una < self.snd_nxt => {
                // RFC 6582 §3.2 step 5: a partial ACK retransmits the first
                // unacknowledged segment at once.
                self.mark_lost(self.snd_una);
                self.lost_mark = self.lost_mark.max(self.snd_una + 1);
                force_rxt = true;
            }
            _ => {}
        }

        // Entering fast recovery.
        if matches!(self.state, CaState::Open | CaState::Cwr) && self.snd_nxt > self.snd_una {
            let enter = if self.cfg.sack {
                // RFC 6675 §5: IsLost(HighACK + 1) (implied by DupAcks ≥ DupThresh).
                self.lost_out > 0
            } else {
                // RFC 6582 §3.2 step 1 / RFC 5681 §3.2: three duplicate ACKs.
                self.reno_dupacks >= DUP_THRESH
            };
            if enter {
                if !self.cfg.sack {
                    self.mark_lost(self.snd_una);
                    self.lost_mark = self.lost_mark.max(self.snd_una + 1);
                }
                if self.state == CaState::Open {
                    // One reduction per episode; a CWR already reduced this window
                    // and its PRR state carries on (Linux tcp_enter_recovery).
                    let prior_cwnd = self.cc.cwnd();
                    self.congestion_event(now, CongestionSignal::Loss);
                    self.start_prr(prior_cwnd);
                }
                self.state = CaState::Recovery;
                self.recovery_point = self.snd_nxt;
                self.recoveries += 1;
                // RFC 6675 §5 (4.2) / RFC 5681 §3.2 step 2: retransmit the first
                // lost segment regardless of the pipe. Under PRR the episode's
                // first ACK allows it already.
                force_rxt = self.prr.is_none();
            }
        }

        // RFC 3168 §6.1.2: react to ECE at most once per window of data.
        if self.cfg.ecn && ack.ece && self.state == CaState::Open && self.snd_nxt > self.snd_una {
            let prior_cwnd = self.cc.cwnd();
            self.congestion_event(now, CongestionSignal::Ecn);
            self.start_prr(prior_cwnd);
            self.state = CaState::Cwr;
            self.recovery_point = self.snd_nxt;
            self.cwr_pending = true;
        }

        // Delivery-rate sample (tcp_rate_gen).
        let mut rate = None;
        if newly_bytes > 0 {
            self.delivered += newly_bytes;
            self.delivered_time = now;
        }
        if self.app_limited_until != 0 && self.delivered > self.app_limited_until {
            self.app_limited_until = 0;
        }
        if rs.valid && newly_bytes > 0 {
            let d = self.delivered - rs.prior_delivered;
            let ack_iv = now.saturating_since(rs.prior_time);
            let iv = ack_iv.max(rs.send_interval);
            if iv.as_nanos() > 0 && iv >= self.rtt.min_rtt() {
                rate = Some(RateSample {
                    delivered: d,
                    interval: iv,
                    delivery_rate: Bandwidth::from_bytes_per(d, iv).unwrap_or_default(),
                    is_app_limited: rs.is_app_limited,
                    prior_delivered: rs.prior_delivered,
                    total_delivered: self.delivered,
                });
            }
        }

        if newly_bytes > 0 {
            let mss = self.cfg.mss as u64;
            let sample = AckSample {
                now,
                acked_bytes: newly_bytes,
                acked_segments: newly_bytes.div_ceil(mss).max(1) as u32,
                rtt: rtt_sample,
                srtt: self.rtt.srtt(),
                min_rtt: self.rtt.min_rtt(),
                prior_in_flight,
                in_flight: self.pipe_bytes(),
                app_limited: !self.cwnd_limited,
                // Loss-based controllers grow only on ACKs that advance the
                // cumulative ACK point outside recovery (Linux tcp_may_raise_cwnd:
                // FLAG_DATA_ACKED). After an RTO (Loss state) an ACK that only SACKs
                // new data while the first hole is unrepaired must not open the
                // window, or it outgrows the pipe and every retransmission of the
                // hole is dropped again (timeouts chain).
                in_recovery: matches!(self.state, CaState::Recovery | CaState::Cwr)
                    || (self.state == CaState::Loss && acked_segs == 0),
                rate,
            };
            self.cc.on_ack(&sample);
        }

        // RFC 6937: the reduction paces itself by what this ACK delivered
        // (Linux newly_acked_sacked = ACKed + change in SACKed).
        if self.prr.is_some() {
            let delivered = (acked_segs + self.sacked_segs()).saturating_sub(prior_sacked);
            self.prr_on_ack(delivered, self.marked_lost - prior_marked_lost, acked_segs > 0);
        }

        if acked_segs > 0 {
            if self.snd_una == self.cfg.total_segs {
                self.finished_at = Some(now);
            }
            // RFC 6298 (5.2)/(5.3): stop when all data is acked, else restart.
            self.rto_deadline = if self.snd_una == self.snd_nxt { SimTime::MAX } else { now + self.rtt.rto() };
        }

        if force_rxt {
            if let Some(idx) = self.next_lost() {
                self.transmit(now, idx, true, out);
            }
        }
        self.try_send(now, out);
    }

    /// RFC 6298 (5.4)–(5.6) and RFC 5681 §3.1: the retransmission timer expired.
    fn on_rto(&mut self, now: SimTime) {
        if self.snd_una == self.snd_nxt {
            self.rto_deadline = SimTime::MAX;
            return;
        }
        self.rto_count += 1;
        self.cc.on_rto(now, self.pipe_bytes());
        self.rtt.back_off();
        // Everything outstanding and not SACKed is lost; earlier retransmissions
        // are presumed lost too (Linux tcp_enter_loss).
        self.retrans_out = 0;
        self.lost_out = 0;
        self.lost_pending = 0;
        for s in self.segs.iter_mut() {
            s.flags &= !RETRANS;
            if s.flags & SACKED == 0 {
                s.flags |= LOST;
                self.lost_out += 1;
                self.lost_pending += 1;
            }
        }
        self.reno_dupacks = 0;
        self.lost_mark = self.snd_nxt;
        self.rxt_scan = self.snd_una;
        self.state = CaState::Loss;
        self.recovery_point = self.snd_nxt;
        self.cwr_pending = false;
        self.prr = None;
        self.pace_next = now;
        // RFC 6298 (5.6): restart the timer with the backed-off RTO.
        self.rto_deadline = now + self.rtt.rto();
    }

    #[inline]
    fn rtt_hint_us(&self) -> Option<u32> {
        let m = self.rtt.min_rtt().as_micros();
        (m > 0).then(|| m.min(u32::MAX as u64) as u32)
    }

    #[inline]
    fn srtt_us(&self) -> Option<u32> {
        let m = self.rtt.srtt().as_micros();
        (m > 0).then(|| m.min(u32::MAX as u64) as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A controller with a huge window that paces at a fixed rate.
    #[derive(Debug)]
    struct FixedPace(Bandwidth);

    impl CongestionControl for FixedPace {
        fn name(&self) -> &'static str {
            "fixed-pace"
        }
        fn cwnd(&self) -> u64 {
            1 << 30
        }
        fn ssthresh(&self) -> u64 {
            u64::MAX
        }
        fn on_ack(&mut self, _ack: &AckSample) {}
        fn on_congestion_event(&mut self, _ev: &CongestionEvent) {}
        fn on_rto(&mut self, _now: SimTime, _in_flight: u64) {}
        fn pacing_rate(&self) -> Option<Bandwidth> {
            Some(self.0)
        }
    }

    /// A Reno-like controller with a fixed window: `w` segments, halved to
    /// `w/2` (cwnd and ssthresh) on a congestion event, 1 on an RTO.
    #[derive(Debug)]
    struct Halving {
        mss: u64,
        cwnd: u64,
        ssthresh: u64,
    }

    impl CongestionControl for Halving {
        fn name(&self) -> &'static str {
            "halving"
        }
        fn cwnd(&self) -> u64 {
            self.cwnd * self.mss
        }
        fn ssthresh(&self) -> u64 {
            self.ssthresh.saturating_mul(self.mss)
        }
        fn on_ack(&mut self, _ack: &AckSample) {}
        fn on_congestion_event(&mut self, _ev: &CongestionEvent) {
            self.ssthresh = self.cwnd / 2;
            self.cwnd = self.ssthresh;
        }
        fn on_rto(&mut self, _now: SimTime, _in_flight: u64) {
            self.ssthresh = self.cwnd / 2;
            self.cwnd = 1;
        }
    }

    const MSS: u32 = 1000;

    fn sender(cwnd: u64, sack: bool, ecn: bool) -> TcpSender {
        let cfg = SenderConfig {
            flow: 0,
            mss: MSS,
            ecn,
            sack,
            total_segs: u64::MAX,
            last_seg_len: MSS,
            start: SimTime::ZERO,
            stop: SimTime::MAX,
            rwnd_segs: u64::MAX,
        };
        TcpSender::new(cfg, Box::new(Halving { mss: MSS as u64, cwnd, ssthresh: u64::MAX }), 64)
    }

    /// An ACK with cumulative point `cum` and SACK blocks, newest first.
    fn ack(cum: u64, blocks: &[(u64, u64)]) -> Ack {
        let mut a = Ack { cum, ..Ack::default() };
        for (k, b) in blocks.iter().enumerate() {
            a.blocks[k] = *b;
        }
        a.nblocks = blocks.len() as u8;
        a
    }

    /// Sequence numbers sent, `R` marking retransmissions.
    fn sent(out: &mut Vec<Pkt>) -> Vec<String> {
        out.drain(..).map(|p| if p.flags & PF_RETX != 0 { format!("R{}", p.seq) } else { p.seq.to_string() }).collect()
    }

    #[test]
    fn prr_spreads_the_reduction_over_the_recovery_rtt_as_rfc_6937_example() {
        // RFC 6937 §6's first example: a window of 20 segments, one loss (segment
        // 0), ssthresh 10. Hand derivation: the first two dupacks (SACK 1, 2)
        // each lower the pipe below cwnd 20 and release one new segment (limited
        // transmit, 20 and 21). The third SACK marks 0 lost (three SACKed above
        // it) and starts recovery with prior_cwnd 20. While pipe > ssthresh, after
        // the k-th ACK of the episode PRR allows CEIL(k·10/20) segments in total:
        // the retransmission at k = 1 (SACK 3), one new segment at every odd k
        // (SACKs 5, 7, ..., 17 → 22..28). At SACK 19 (k = 17) the pipe is
        // 29 + 1 − 19 − 1 = 10 = ssthresh, so PRR-SSRB takes over and allows
        // ssthresh − pipe = 0; the SACKs of 20 and 21 each bring the pipe to 9 and
        // release one segment (29, 30).
        let mut s = sender(20, true, false);
        let mut out = Vec::new();
        let t = SimTime::from_millis(1);
        s.on_timer(SimTime::ZERO, &mut out);
        assert_eq!(out.len(), 20);
        out.clear();
        let mut log = Vec::new();
        for seg in 1..22u64 {
            s.on_ack(t, &ack(0, &[(1, seg + 1)]), &mut out);
            log.push(sent(&mut out).join(" "));
        }
        let expect = [
            "20", "21", "R0", "", "22", "", "23", "", "24", "", "25", "", "26", "", "27", "", "28", "", "", "29", "30",
        ];
        assert_eq!(log, expect);
        // 10 segments left during recovery: ssthresh, as PRR promises (RFC 6937 §3).
        assert_eq!(s.prr.unwrap().out, 10);
        // The retransmission's ACK ends recovery: cwnd = ssthresh = 10, 9 in flight
        // (22..31), so exactly one more segment goes.
        s.on_ack(t, &ack(22, &[]), &mut out);
        assert_eq!(s.state, CaState::Open);
        assert_eq!(sent(&mut out), vec!["31".to_string()]);
        assert_eq!(s.cwnd(), 10 * MSS as u64);
    }

    #[test]
    fn prr_slow_start_bound_refills_after_heavy_loss() {
        // Window 20, segments 0..15 lost (three quarters), SACKs for 15..20 and
        // then for the limited-transmit segments 20, 21. Hand derivation: the
        // SACKs of 15 and 16 release 20 and 21 (pipe 19 < cwnd 20). The SACK of 17
        // marks 0..14 lost: pipe = 22 − 3 − 15 = 4, far below ssthresh 10, so
        // PRR-SSRB: sndcnt = min(ssthresh − pipe, max(delivered − out, newly
        // delivered)) = 1 per ACK, the retransmissions R0..R4 for the SACKs of
        // 17, 18, 19, 20, 21 (packet conservation, no burst to ssthresh).
        let mut s = sender(20, true, false);
        let mut out = Vec::new();
        let t = SimTime::from_millis(1);
        s.on_timer(SimTime::ZERO, &mut out);
        out.clear();
        let mut log = Vec::new();
        for seg in 15..22u64 {
            s.on_ack(t, &ack(0, &[(15, seg + 1)]), &mut out);
            log.push(sent(&mut out).join(" "));
        }
        assert_eq!(log, ["20", "21", "R0", "R1", "R2", "R3", "R4"]);
        // pipe = 22 + 5 retransmitted − 7 SACKed − 15 lost = 5.
        assert_eq!(s.pipe(), 5);
        // The cumulative ACK of R0 with no new loss: pipe 4, delivered 1, and
        // Linux's SSRB adds one segment for advancing snd_una: 2 segments.
        s.on_ack(t, &ack(1, &[(15, 22)]), &mut out);
        assert_eq!(sent(&mut out), vec!["R5".to_string(), "R6".to_string()]);
        assert_eq!(s.pipe(), 6);
    }

    #[test]
    fn prr_reduces_an_ecn_cwr_episode_the_same_way() {
        // RFC 6937 §3 applies PRR to any reduction; Linux uses it in CWR. Window
        // 20, an ECE on the first ACK (cum 1): ssthresh 10, prior_cwnd 20, pipe 19
        // → CEIL(1·10/20) = 1 segment; the next ACK (k = 2) none; the third one.
        let mut s = sender(20, true, true);
        let mut out = Vec::new();
        let t = SimTime::from_millis(1);
        s.on_timer(SimTime::ZERO, &mut out);
        out.clear();
        let mut ece = ack(1, &[]);
        ece.ece = true;
        s.on_ack(t, &ece, &mut out);
        assert_eq!(s.state, CaState::Cwr);
        let first = out.drain(..).collect::<Vec<_>>();
        assert_eq!(first.len(), 1);
        assert_ne!(first[0].flags & PF_CWR, 0, "RFC 3168 §6.1.2: CWR on the first new segment");
        s.on_ack(t, &ack(2, &[]), &mut out);
        assert!(out.is_empty());
        s.on_ack(t, &ack(3, &[]), &mut out);
        assert_eq!(sent(&mut out), vec!["21".to_string()]);
    }

    #[test]
    fn pacing_spaces_full_segments_by_their_payload_at_the_pacing_rate() {
        // The pacing rate is a payload rate, as Linux's `sk_pacing_rate` (charged
        // with `skb->len` in `tcp_update_skb_after_send`): 1448 B at 11.584 Mb/s
        // is exactly 1 ms, where the wire size (1500 B) would take 1.036 ms.
        let cfg = SenderConfig {
            flow: 0,
            mss: 1448,
            ecn: false,
            sack: true,
            total_segs: u64::MAX,
            last_seg_len: 1448,
            start: SimTime::ZERO,
            stop: SimTime::MAX,
            rwnd_segs: u64::MAX,
        };
        let mut snd = TcpSender::new(cfg, Box::new(FixedPace(Bandwidth::from_bps(11_584_000))), 16);
        let mut out = Vec::new();
        let mut sent_at = Vec::new();
        let mut now = SimTime::ZERO;
        for _ in 0..20 {
            snd.on_timer(now, &mut out);
            sent_at.extend(out.drain(..).map(|_| now.as_nanos()));
            now = snd.next_wakeup().min(snd.pace_next);
        }
        assert!(sent_at.len() >= 10, "sent {}", sent_at.len());
        for w in sent_at.windows(2) {
            assert_eq!(w[1] - w[0], 1_000_000, "departures at {sent_at:?}");
        }
    }
}
