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

use crate::cc::{AckSample, CongestionControl, CongestionEvent, CongestionSignal, RateSample, RtoEpisode};
use super::pending::PendingBits;
use super::tso;
use crate::packet::{ts_ms, ts_ms32, Pkt, TcpAck as Ack, LINK_FRAMING_BYTES, NO_WINDOW_LIMIT, PF_COOKIE, PF_CWR, PF_RETX, PF_SYN, SYN_BYTES, WIRE_BYTES};
use crate::rtt::RttEstimator;

/// RFC 6675 §2 / RFC 5681 §3.2: DupThresh (Linux `tcp_reordering`, 3).
const DUP_THRESH: u64 = 3;
/// RFC 8985 §6.2 step 4: recoveries a widened reordering window persists for
/// (Linux `TCP_RACK_RECOVERY_THRESH`).
const REO_WND_PERSIST: u32 = 16;
/// RFC 8985 §7.2: worst-case delayed-ACK time added to the PTO when a single
/// segment is in flight (Linux adds its minimum RTO, 200 ms).
const TLP_WC_DEL_ACK: SimDuration = SimDuration::from_millis(200);
/// Linux `TCP_TIMEOUT_MIN` (2 jiffies at HZ = 1000), added to 2·SRTT otherwise.
const TLP_TIMEOUT_MIN: SimDuration = SimDuration::from_millis(2);

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

/// Send times of the oldest and newest segments one ACK newly delivers, among
/// those never retransmitted (Linux `first_ackt`/`last_ackt` for the cumulative
/// part, `first_sackt`/`last_sackt` for the SACKed part).
#[derive(Clone, Copy, Debug, Default)]
struct SentSpan(Option<(SimTime, SimTime)>);

impl SentSpan {
    #[inline]
    fn add(&mut self, sent: SimTime) {
        self.0 = Some(self.0.map_or((sent, sent), |(first, last)| (first.min(sent), last.max(sent))));
    }
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
    /// This ACK's arrival time.
    prior_time_now: SimTime,
    /// One past the highest SACKed segment before this ACK.
    prior_fack: u64,
    /// RACK (RFC 8985 §6.2 step 2): the most recently sent segment this ACK
    /// delivered unambiguously: (send time, index + 1).
    rack: Option<(SimTime, u64)>,
    /// A never-retransmitted segment below the highest SACKed one was delivered:
    /// the path reordered (RFC 8985 §6.2 step 1, Linux `reord_seen`).
    reordered: bool,
    /// A never-retransmitted segment below the recovery point was delivered
    /// (Linux `FLAG_ORIG_SACK_ACKED`): F-RTO's sign of a spurious timeout.
    orig_delivered: bool,
}

/// RACK-TLP state (RFC 8985; Linux `tp->rack` and `tlp_high_seq`).
#[derive(Clone, Copy, Debug)]
struct Rack {
    /// RACK.xmit_ts and RACK.end_seq: send time and end of the most recently sent
    /// segment known delivered.
    xmit: SimTime,
    end: u64,
    /// RACK.rtt: the RTT measured on that segment.
    rtt: SimDuration,
    /// RACK.xmit_ts moved on this ACK (the loss scan is only needed then).
    advanced: bool,
    /// Reordering observed on the connection.
    reord_seen: bool,
    /// RACK.reo_wnd_mult (RFC 8985 §6.2 step 4), Linux `reo_wnd_steps`.
    reo_wnd_mult: u32,
    /// RACK.reo_wnd_persist.
    reo_wnd_persist: u32,
    /// A D-SACK arrived and the window may widen on this ACK.
    dsack_seen: bool,
    /// `delivered` when the window last widened (one widening per round trip).
    last_delivered: u64,
    /// Reordering timer (RFC 8985 §6.2 step 5), `MAX` when not armed.
    reo_deadline: SimTime,
    /// Probe timeout (RFC 8985 §7.2), `MAX` when not armed.
    tlp_deadline: SimTime,
    /// TLPRxtOut/TLPHighSeq (RFC 8985 §7.4): `snd_nxt` when the outstanding
    /// probe was sent, and whether that probe was a retransmission.
    tlp_high_seq: Option<u64>,
    tlp_retrans: bool,
}

impl Rack {
    fn new() -> Self {
        Rack {
            xmit: SimTime::ZERO,
            end: 0,
            rtt: SimDuration::ZERO,
            advanced: false,
            reord_seen: false,
            reo_wnd_mult: 1,
            reo_wnd_persist: 0,
            dsack_seen: false,
            last_delivered: 0,
            reo_deadline: SimTime::MAX,
            tlp_deadline: SimTime::MAX,
            tlp_high_seq: None,
            tlp_retrans: false,
        }
    }

    /// RFC 8985 §6.2's "sent after" order: by time, then by sequence.
    #[inline]
    fn sent_after(t1: SimTime, end1: u64, t2: SimTime, end2: u64) -> bool {
        t1 > t2 || (t1 == t2 && end1 > end2)
    }
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
    /// RACK loss detection (RFC 8985 §6) instead of DupThresh; Linux
    /// `net.ipv4.tcp_recovery` bit 0 (default on). Needs SACK.
    pub rack: bool,
    /// Tail loss probes (RFC 8985 §7); Linux `net.ipv4.tcp_early_retrans` = 3
    /// (default). Needs SACK.
    pub tlp: bool,
    /// F-RTO spurious-timeout detection (RFC 5682 §3.1, SACK-enhanced); Linux
    /// `net.ipv4.tcp_frto` = 2 (default). Needs SACK.
    pub frto: bool,
    /// Send new data in Linux's autosized GSO skbs and hold back an skb the
    /// window cannot take whole (`tso.rs`; Linux `tcp_tso_should_defer`).
    pub tso_defer: bool,
    /// Open the connection with a SYN / SYN-ACK exchange first (always, in
    /// simulations; the sender's unit tests start established).
    pub handshake: bool,
    /// Bytes of the application's greeting, sent once the connection is open;
    /// bulk data waits for its ACK. 0: none (the unit tests). Simulations send
    /// iperf3's 37-byte cookie ([`IPERF3_COOKIE_BYTES`]).
    pub cookie_bytes: u32,
}

/// iperf3's stream cookie: the client writes these 37 bytes on every data
/// connection right after `connect` (iperf_tcp_connect), and starts its bulk
/// writes when the server's TEST_START reaches it over the control connection,
/// about one round trip later, when the cookie's ACK arrives too. iperf3 sets
/// the congestion control (`-C`, `setsockopt(TCP_CONGESTION)`) only after
/// `connect` has returned and the cookie is out (iperf_create_streams), so the
/// controller starts with the cookie already in flight: its first round, or
/// Vegas's `beg_snd_nxt`, begins after the cookie, and the cookie's ACK is the
/// controller's first (docs/tcp-model.md, "The application's greeting").
pub const IPERF3_COOKIE_BYTES: u32 = 37;

/// Linux `TCP_TIMEOUT_INIT`: the first SYN retransmission timeout, 1 s
/// (RFC 6298 (2.1)), doubled on each retry.
const SYN_TIMEOUT: SimDuration = SimDuration::from_secs(1);

/// An outstanding SYN.
#[derive(Clone, Copy, Debug)]
struct SynSent {
    /// Time of the last (re)transmission: the SYN-ACK's (or the greeting's ACK's)
    /// RTT sample starts here (Linux has the timestamp echo of the last one).
    sent: SimTime,
    deadline: SimTime,
    tries: u32,
}

impl SynSent {
    /// The (re)transmission due at `now` after `prev`, with its timer at `base`
    /// doubled per retry (RFC 6298 (5.5)); `None` while `prev`'s timer runs.
    fn due(prev: Option<SynSent>, now: SimTime, base: SimDuration) -> Option<SynSent> {
        let tries = match prev {
            None => 0,
            Some(p) if now >= p.deadline => p.tries + 1,
            Some(_) => return None,
        };
        let timeout = SimDuration::from_nanos(base.as_nanos() << tries.min(6));
        Some(SynSent { sent: now, deadline: now + timeout, tries })
    }
}

/// The sending half of a TCP flow.
#[derive(Debug)]
pub(crate) struct TcpSender {
    cfg: SenderConfig,
    pub(crate) started: bool,
    pub(crate) finished_at: Option<SimTime>,
    snd_una: u64,
    snd_nxt: u64,
    /// Right edge of the peer's advertised window (Linux `tcp_wnd_end`), from
    /// the last ACK; `cfg.rwnd_segs` until the first.
    snd_wnd_end: u64,
    segs: VecDeque<Seg>,
    /// Per segment: lost and waiting for its retransmission (`pending.rs`),
    /// kept in step with `segs`' flags; `lost_pending` counts the set bits.
    pending: PendingBits,
    /// RACK's candidates in transmission order (Linux `tsorted_sent_queue`):
    /// `(sent, index)` per transmission, with stale entries (retransmitted again,
    /// ACKed, SACKed, lost and waiting) dropped lazily. Kept only while a loss or
    /// a retransmission is outstanding (`tsorted_on`): otherwise every outstanding
    /// segment is an original, sent in sequence order, and the scan in sequence
    /// order stops at once, while a list would cost a push and a pop per packet
    /// (and, with a thousand flows, cold cache lines).
    tsorted: VecDeque<(SimTime, u64)>,
    /// `tsorted` is complete and maintained.
    tsorted_on: bool,
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
    /// One past the highest segment ever retransmitted (RACK must look at
    /// retransmissions above its scan's natural end).
    high_rxt: u64,
    rack: Rack,
    /// Undo state (Linux `undo_marker`, `undo_retrans`): snd_una when the last
    /// loss episode began, and its retransmissions not yet reported duplicate
    /// by a D-SACK. All of them D-SACKed = the episode was spurious (RFC 3708).
    undo_marker: Option<u64>,
    undo_retrans: u64,
    /// F-RTO in progress after a timeout (RFC 5682 §3.1).
    frto: bool,
    /// Timeouts since the cumulative ACK last moved (Linux `icsk_retransmits`):
    /// a timeout in Loss reduces ssthresh again only after progress.
    rto_repeats: u32,
    /// F-RTO step 2b: this ACK sends new data instead of retransmissions.
    frto_send_new: bool,
    pub(crate) spurious_undos: u64,
    /// The handshake in progress (data waits for the SYN-ACK).
    syn: Option<SynSent>,
    /// The application's greeting in flight (data waits for its ACK).
    cookie: Option<SynSent>,
    /// The newest timestamp the receiver sent (Linux `ts_recent`, RFC 7323 §4.3),
    /// echoed in every segment.
    ts_recent: u16,
    pub(crate) cc: Box<dyn CongestionControl>,
    pub(crate) rtt: RttEstimator,
    pub(crate) rto_deadline: SimTime,
    pace_next: SimTime,
    pub(crate) pace_wake: SimTime,
    /// The last transmission of a data segment (Linux `tcp_wstamp_ns` for an
    /// unpaced sender): TSO deferral only waits right after one.
    last_tx: SimTime,
    /// With `tso_defer`: one past the last segment of the skb at the head of the
    /// write queue, and the largest window the peer has offered, segments
    /// (Linux `max_window`), which bounds the skbs `sendmsg` builds.
    skb_end: u64,
    max_wnd_segs: u64,
    /// Whether the last send stopped at the window (the send loop's own finding;
    /// [`Self::validate_cwnd`] folds it into `is_cwnd_limited`).
    cwnd_limited: bool,
    /// Linux `tp->is_cwnd_limited`: cwnd limited the sending at some point in the
    /// current window. Sticky until `snd_una` passes `cwnd_usage_seq`, so a flow
    /// that turns receive-window limited keeps growing for one more window, as
    /// Linux's does (`tcp_cwnd_validate`).
    is_cwnd_limited: bool,
    /// Most segments outstanding in the current window (Linux `max_packets_out`,
    /// restarted when `snd_una` passes `cwnd_usage_seq`).
    max_packets_out: u64,
    cwnd_usage_seq: u64,
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
            snd_wnd_end: cfg.rwnd_segs,
            segs: VecDeque::with_capacity(ring_hint),
            pending: PendingBits::default(),
            tsorted: VecDeque::new(),
            tsorted_on: false,
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
            high_rxt: 0,
            rack: Rack::new(),
            undo_marker: None,
            undo_retrans: 0,
            frto: false,
            rto_repeats: 0,
            frto_send_new: false,
            spurious_undos: 0,
            syn: None,
            cookie: None,
            ts_recent: 0,
            cc,
            rtt: RttEstimator::new(),
            rto_deadline: SimTime::MAX,
            pace_next: SimTime::ZERO,
            pace_wake: SimTime::MAX,
            last_tx: SimTime::ZERO,
            skb_end: 0,
            max_wnd_segs: 0,
            cwnd_limited: false,
            is_cwnd_limited: false,
            max_packets_out: 0,
            cwnd_usage_seq: 0,
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

    /// Linux `max_window`: the largest window the peer has offered (only the
    /// GSO model reads it).
    #[inline]
    fn note_window(&mut self, ack: &Ack) {
        if self.cfg.tso_defer {
            self.max_wnd_segs = self.max_wnd_segs.max(self.snd_wnd_end.saturating_sub(ack.cum));
        }
    }

    /// The right edge of the window `ack` advertises.
    #[inline]
    fn window_end(&self, ack: &Ack) -> u64 {
        if ack.wnd == NO_WINDOW_LIMIT {
            u64::MAX
        } else {
            ack.cum + ack.wnd as u64
        }
    }

    /// RFC 6675 §4 pipe, in segments.
    #[inline]
    pub(crate) fn pipe(&self) -> u64 {
        let out = self.snd_nxt - self.snd_una;
        let sacked = if self.cfg.sack { self.sacked_out } else { self.reno_dupacks };
        (out + self.retrans_out).saturating_sub(sacked + self.lost_out)
    }

    /// Linux `tp->app_limited != 0`: a rate sample taken now may be limited by the
    /// application, not the network (`tcp_rate.c`), until the data outstanding when
    /// that was found has been delivered.
    #[inline]
    fn conn_app_limited(&self) -> bool {
        self.app_limited_until != 0
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
        // Linux divides by the cwnd before the reduction, RFC 6937 §3 by the
        // flight (RecoverFS). They agree when the flight fits in cwnd; when it
        // does not (NewReno cannot see which segments beyond a hole arrived, and
        // a FlightSize-based ssthresh (RFC 5681 Eq. 4) may then exceed cwnd), the
        // larger keeps PRR from sending faster than data is delivered.
        let prior_cwnd = (prior_cwnd_bytes / mss).max(self.pipe()).max(1);
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

    /// Prefetch, stage 2: what this sender points to — the scoreboard's head and
    /// tail, the controller, the SACK ranges. Reads the pointers, so it is called
    /// one event after stage 1, when `self` is already in cache.
    #[inline]
    pub(crate) fn prefetch_heap(&self) {
        if let (Some(head), Some(tail)) = (self.segs.front(), self.segs.back()) {
            prefetch(head);
            prefetch(tail);
        }
        // A delayed ACK acknowledges two segments: the second may start a new line.
        if let Some(second) = self.segs.get(1) {
            prefetch(second);
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
            return self.cookie.or(self.syn).map_or(self.cfg.start, |s| s.deadline);
        }
        self.rto_deadline.min(self.pace_wake).min(self.rack.reo_deadline).min(self.rack.tlp_deadline)
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
            if self.cookie.is_some() {
                self.send_cookie(now, out);
                return;
            }
            if self.cfg.handshake {
                self.send_syn(now, out);
                return;
            }
            self.started = true;
            self.pace_next = now;
        }
        if now >= self.rack.reo_deadline {
            self.rack.reo_deadline = SimTime::MAX;
            self.on_reo_timeout(now, out);
        }
        // A probe due together with the RTO goes first and re-arms the RTO (Linux
        // keeps one timer: the PTO replaces the RTO when it is earlier or equal).
        if now >= self.rack.tlp_deadline {
            self.rack.tlp_deadline = SimTime::MAX;
            self.send_loss_probe(now, out);
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
    #[inline(always)]
    pub(crate) fn try_send(&mut self, now: SimTime, out: &mut Vec<Pkt>) {
        if !self.started || self.finished() {
            return;
        }
        let cwnd_segs = self.cwnd_segs();
        let nxt_before = self.snd_nxt;
        // Linux reaches `tcp_write_xmit` (and its `tcp_cwnd_validate`) only with
        // unsent data queued (`tcp_push_pending_frames`): a flow whose
        // application is done keeps the state it had.
        let unsent = self.has_application_data(now);
        self.send_loop(now, cwnd_segs, out);
        if unsent {
            self.validate_cwnd(self.snd_nxt > nxt_before, cwnd_segs);
        }
        if self.snd_nxt > nxt_before {
            // RFC 8985 §7.2: (re)arm the PTO after sending new data.
            self.schedule_loss_probe(now, false);
        }
    }

    /// Linux `tcp_cwnd_validate`, called where `tcp_write_xmit` calls it: after a
    /// send that sent new data or found the window full (`in_flight >= cwnd`
    /// counts as full even when the loop stopped for another reason). Within a
    /// window (until `snd_una` passes `cwnd_usage_seq`) a `true` is kept and
    /// only a larger `packets_out` updates `max_packets_out`; retransmissions
    /// alone (Linux sends them from `tcp_xmit_retransmit_queue`) do not count as
    /// a send.
    #[inline(always)]
    fn validate_cwnd(&mut self, sent_new: bool, cwnd_segs: u64) {
        let limited = self.cwnd_limited || self.pipe() >= cwnd_segs;
        if !(sent_new || limited) {
            return;
        }
        let packets_out = self.snd_nxt - self.snd_una;
        if self.snd_una >= self.cwnd_usage_seq
            || limited
            || (!self.is_cwnd_limited && packets_out > self.max_packets_out)
        {
            self.is_cwnd_limited = limited;
            self.max_packets_out = packets_out;
            self.cwnd_usage_seq = self.snd_nxt;
        }
    }

    #[inline(always)]
    fn send_loop(&mut self, now: SimTime, cwnd_segs: u64, out: &mut Vec<Pkt>) {
        // Segments of the current GSO skb still to go: a paced sender checks the
        // pacing clock once per skb, not per segment (Linux `tcp_write_xmit` tests
        // `tcp_pacing_check` per skb; the skb then leaves as one burst and moves
        // the clock by its whole length, `tcp_update_skb_after_send`).
        let mut skb_left = 0u64;
        let paced = self.cc.pacing_rate().is_some();
        // Segments of new data left in the current unpaced GSO skb (`tso.rs`).
        let mut tso_left = 0u64;
        loop {
            if skb_left == 0 && paced {
                if self.pace_next > now {
                    self.pace_wake = self.pace_next;
                    // Linux's `tcp_pacing_check` stops the loop without calling
                    // it cwnd limited (`validate_cwnd` still checks the pipe).
                    self.cwnd_limited = false;
                    break;
                }
                skb_left = self.cc.send_quantum().max(1);
            }
            skb_left = skb_left.saturating_sub(1);
            // RFC 6675 §5 (C): send while cwnd − pipe ≥ 1 SMSS.
            if self.pipe() >= cwnd_segs {
                self.cwnd_limited = true;
                break;
            }
            // NextSeg (RFC 6675 §4): (1) a lost segment not yet retransmitted
            // (unless F-RTO step 2b wants new data first), chosen here and sent
            // from one call site below, where `transmit` is inlined (the send
            // loop sends nearly every packet).
            let (idx, retrans) = if self.frto_send_new && self.can_send_new(now) {
                (self.snd_nxt, false)
            } else if let Some(idx) = self.next_lost() {
                (idx, true)
            } else if self.can_send_new(now) {
                // (2) otherwise new data, if the application and rwnd allow.
                if tso_left == 0 && self.cfg.tso_defer && !paced {
                    if self.snd_nxt >= self.skb_end {
                        let mss = self.cfg.mss as u64;
                        self.skb_end = self.snd_nxt + tso::size_goal(mss, self.max_wnd_segs.saturating_mul(mss));
                    }
                    match tso::next_skb(&self.send_state(now, cwnd_segs)) {
                        tso::Next::Send(n) => tso_left = n,
                        tso::Next::DeferCwnd => {
                            self.cwnd_limited = true;
                            break;
                        }
                        tso::Next::DeferRwnd => {
                            self.cwnd_limited = false;
                            break;
                        }
                    }
                }
                tso_left = tso_left.saturating_sub(1);
                (self.snd_nxt, false)
            } else {
                self.send_stalled(now);
                break;
            };
            self.transmit_inline(now, idx, retrans, out);
        }
    }

    /// The send loop found nothing to send although the window allows it.
    #[inline]
    fn send_stalled(&mut self, now: SimTime) {
        self.cwnd_limited = false;
        // tcp_rate_check_app_limited: the application, not cwnd, limits us. Only
        // the application: Linux marks a sample app-limited when the socket holds
        // less than one MSS of unsent data, which a bulk sender stalled by the
        // peer's receive window never does (its data waits in the send buffer).
        // Marking rwnd stalls app-limited kept BBR in STARTUP forever (its
        // full-pipe check skips app-limited rounds): 8,500 retransmissions in
        // 20 s for one flow with a 2.5 MB window.
        if self.lost_pending == 0 && !self.has_application_data(now) {
            self.app_limited_until = (self.delivered + self.pipe_bytes()).max(1);
        }
    }

    /// What Linux's `tcp_write_xmit` reads to size and defer the next skb.
    fn send_state(&self, now: SimTime, cwnd_segs: u64) -> tso::SendState {
        let mss = self.cfg.mss as u64;
        tso::SendState {
            now,
            mss,
            cwnd: cwnd_segs,
            ssthresh: self.cc.ssthresh() / mss,
            in_flight: self.pipe(),
            packets_out: self.snd_nxt - self.snd_una,
            send_win: self.snd_wnd_end.saturating_sub(self.snd_nxt),
            snd_wnd: self.snd_wnd_end.saturating_sub(self.snd_una),
            srtt: self.rtt.srtt(),
            min_rtt: self.rtt.min_rtt(),
            last_tx: self.last_tx,
            head_sent: self.segs.front().map(|s| s.sent),
            recovering: matches!(self.state, CaState::Recovery | CaState::Loss),
            skb_left: self.skb_end - self.snd_nxt,
        }
    }

    #[inline]
    fn can_send_new(&self, now: SimTime) -> bool {
        self.has_application_data(now) && self.snd_nxt < self.snd_wnd_end
    }

    /// The application still has unsent data for us (a bulk flow until its stop
    /// time, a sized transfer until its last segment).
    #[inline]
    fn has_application_data(&self, now: SimTime) -> bool {
        self.snd_nxt < self.cfg.total_segs && now < self.cfg.stop
    }

    /// Lowest segment marked lost and not yet retransmitted (RFC 6675 NextSeg (1)).
    #[inline]
    fn next_lost(&mut self) -> Option<u64> {
        if self.lost_pending == 0 {
            return None;
        }
        let i = self.pending.next(self.rxt_scan.max(self.snd_una), self.snd_nxt, true);
        if i < self.snd_nxt {
            let f = self.segs[(i - self.snd_una) as usize].flags;
            debug_assert!(f & LOST != 0 && f & (RETRANS | SACKED) == 0);
            self.rxt_scan = i;
            return Some(i);
        }
        self.rxt_scan = i;
        debug_assert!(false, "lost_pending = {} but no lost segment found", self.lost_pending);
        None
    }

    fn transmit(&mut self, now: SimTime, idx: u64, retrans: bool, out: &mut Vec<Pkt>) {
        self.transmit_inline(now, idx, retrans, out);
    }

    /// [`Self::transmit`], inlined into the send loop.
    #[inline(always)]
    fn transmit_inline(&mut self, now: SimTime, idx: u64, retrans: bool, out: &mut Vec<Pkt>) {
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
            app_limited: self.conn_app_limited(),
        };
        let mut flags = 0u8;
        if retrans {
            let s = &mut self.segs[(idx - self.snd_una) as usize];
            s.flags |= RETRANS | EVER_RETRANS;
            let f = s.flags;
            *s = Seg { flags: f, ..snap };
            self.retrans_out += 1;
            self.lost_pending -= 1;
            self.pending.set(idx, false);
            self.retrans_segs += 1;
            self.high_rxt = self.high_rxt.max(idx + 1);
            if self.undo_marker.is_some() {
                self.undo_retrans += 1;
            }
            flags |= PF_RETX;
        } else {
            debug_assert_eq!(idx, self.snd_nxt);
            self.segs.push_back(snap);
        }
        if self.tsorted_on {
            self.tsorted.push_back((now, idx));
        }
        if !retrans {
            self.snd_nxt += 1;
            if self.cwr_pending {
                // RFC 3168 §6.1.2: CWR on the first new data packet after the reduction.
                flags |= PF_CWR;
                self.cwr_pending = false;
            }
        }
        self.segs_sent += 1;
        self.last_tx = now;
        if let Some(p) = self.prr.as_mut() {
            p.out += 1;
        }
        out.push(self.packet(now, idx, flags));
        if let Some(rate) = self.cc.on_packet_sent_pacing_rate(now, len as u64, self.pipe_bytes()) {
            if rate.as_bps() > 0 {
                // Pace the payload, as Linux charges `skb->len` (no headers) against
                // `sk_pacing_rate` (`tcp_update_skb_after_send`): BBR's rates are
                // payload rates (packets × MSS).
                self.pace_next = self.pace_next.max(now) + rate.tx_time(len as u64);
            }
        }
        // RFC 6298 (5.1): start the timer if it is not running. Linux also restarts
        // it whenever the head of the retransmission queue goes again (unless the
        // RACK reordering timer holds its one timer slot; `tcp_xmit_retransmit_queue`),
        // so a lost retransmission that RACK repairs gets a full RTO for the repair:
        // counting from the last cumulative ACK, a hole whose retransmission was
        // dropped at a full queue timed out before the second copy's ACK returned,
        // and the timeout resent the whole window.
        if self.rto_deadline == SimTime::MAX
            || (retrans && idx == self.snd_una && self.rack.reo_deadline == SimTime::MAX)
        {
            self.rto_deadline = now + self.rtt.rto();
        }
    }

    /// Mark segment `idx` (≥ snd_una) SACKed; returns its payload if newly delivered.
    #[inline]
    fn mark_sacked(&mut self, idx: u64, rs: &mut RateAcc, sack_sent: &mut SentSpan) -> u64 {
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
                self.pending.set(idx, false);
            }
        }
        if f & RETRANS != 0 {
            self.retrans_out -= 1;
        }
        if f & EVER_RETRANS == 0 {
            sack_sent.add(seg.sent);
        }
        Self::rate_delivered(&mut self.first_tx_time, rs, &seg, idx);
        self.rack_delivered(rs, &seg, idx);
        len
    }

    /// RFC 8985 §6.2 steps 1–2 for one newly delivered segment.
    #[inline]
    fn rack_delivered(&self, rs: &mut RateAcc, seg: &Seg, idx: u64) {
        if seg.flags & EVER_RETRANS == 0 && idx < self.recovery_point {
            rs.orig_delivered = true;
        }
        if seg.flags & EVER_RETRANS == 0 {
            // Linux compares with the highest SACKed sequence from before this
            // ACK: an ACK may cumulatively cover a segment the receiver held
            // back for a delayed ACK while SACKing a later one.
            if idx < rs.prior_fack {
                rs.reordered = true;
            }
        } else if rs.prior_time_now.saturating_since(seg.sent) < self.rtt.min_rtt() {
            // Step 2: a retransmitted segment delivered sooner than min_rtt after
            // its retransmission was the original's delivery; it says nothing
            // about the retransmission's send time.
            return;
        }
        if rs.rack.is_none_or(|(t, e)| Rack::sent_after(seg.sent, idx + 1, t, e)) {
            rs.rack = Some((seg.sent, idx + 1));
        }
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
    fn process_sack_block(&mut self, s: u64, e: u64, rs: &mut RateAcc, sack_sent: &mut SentSpan) -> u64 {
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
                newly += self.mark_sacked(idx, rs, sack_sent);
            }
            cur = cur.max(b);
            lo = lo.min(a);
            hi = hi.max(b);
            j += 1;
        }
        for idx in cur..e {
            newly += self.mark_sacked(idx, rs, sack_sent);
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
                self.pending.set(idx, true);
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
            if let (true, Some(syn)) = (ack.syn(), self.syn) {
                self.ts_recent = ack.tsval;
                self.snd_wnd_end = self.window_end(ack);
                self.note_window(ack);
                // Established: the SYN's round trip is the first RTT sample (as
                // Linux, with timestamps, even after a SYN retransmission).
                self.rtt.sample(now.saturating_since(syn.sent));
                self.syn = None;
                if self.cfg.cookie_bytes > 0 {
                    self.send_cookie(now, out);
                } else {
                    self.start_data(now, out);
                }
            } else if let (true, Some(cookie)) = (ack.cookie(), self.cookie) {
                self.on_cookie_ack(now, ack, cookie, out);
            }
            return;
        }
        if ack.syn() || ack.cookie() {
            return; // the answer to a retransmitted SYN or greeting
        }
        // RFC 7323 §4.3: keep the newest timestamp (PAWS would refuse an older one;
        // ACKs can arrive out of order under host jitter).
        if ack.tsval.wrapping_sub(self.ts_recent) as i16 >= 0 {
            self.ts_recent = ack.tsval;
        }
        // The peer's window (RFC 9293 §3.8.6); ACKs arrive in order here and the
        // receiver never moves the edge left.
        self.snd_wnd_end = self.window_end(ack);
        self.note_window(ack);
        let prior_in_flight = self.pipe_bytes();
        let prior_sacked = self.sacked_segs();
        let prior_marked_lost = self.marked_lost;
        let prior_fack = self.sack_ranges.back().map_or(0, |r| r.1);
        let mut rs = RateAcc { prior_time_now: now, prior_fack, ..RateAcc::default() };
        if ack.dsack().is_some() {
            self.rack.dsack_seen = true;
        }
        let mut sack_sent = SentSpan::default();
        let mut newly_bytes = 0u64;
        let cum = ack.cum.min(self.snd_nxt);

        // SACK blocks first (Linux tcp_sacktag_write_queue), then the cumulative ACK.
        if self.cfg.sack {
            for k in 0..ack.nblocks as usize {
                let (s, e) = ack.blocks[k];
                newly_bytes += self.process_sack_block(s, e, &mut rs, &mut sack_sent);
            }
        }

        let mut acked_segs = 0u64;
        let mut cum_sent = SentSpan::default();
        // An ever-retransmitted segment among those cumulatively ACKed makes the
        // ACK ambiguous (Linux FLAG_RETRANS_DATA_ACKED): no sample from them.
        let mut retrans_acked = false;
        if cum > self.snd_una {
            for idx in self.snd_una..cum {
                let seg = self.segs.pop_front().expect("scoreboard holds every unacked segment");
                let f = seg.flags;
                if f & SACKED != 0 {
                    self.sacked_out -= 1;
                } else {
                    newly_bytes += self.seg_len(idx) as u64;
                    Self::rate_delivered(&mut self.first_tx_time, &mut rs, &seg, idx);
                    self.rack_delivered(&mut rs, &seg, idx);
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
                // Karn (RFC 6298 §3): only never-retransmitted segments give samples.
                // As Linux's `tcp_clean_rtx_queue`, not one SACKed earlier: its
                // delivery was timed by the SACK, and now − sent would add the
                // time the hole below it took to repair.
                if f & EVER_RETRANS != 0 {
                    retrans_acked = true;
                } else if f & SACKED == 0 {
                    cum_sent.add(seg.sent);
                }
            }
            acked_segs = cum - self.snd_una;
            self.snd_una = cum;
            self.rto_repeats = 0; // Linux tcp_ack: snd_una advanced
            self.pending.forget_below(cum);
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

        // RTT samples as Linux's `tcp_clean_rtx_queue` takes them (RFC 6298 §2,
        // Karn's rule). SRTT is timed on the oldest segment newly delivered, a
        // cumulatively ACKed one before a SACKed one (`seq_rtt_us`, then
        // `sack_rtt_us`); the controllers and the minimum get the newest one, a
        // SACKed one before a cumulatively ACKed one (`ca_rtt_us`): when a lone
        // segment's ACK waited for the delayed-ACK timer until an out-of-order
        // arrival forced it, the SACKed segment's time is the path's, not the
        // timer's.
        let cum_sent = if retrans_acked { None } else { cum_sent.0 };
        let srtt_from = cum_sent.map(|s| s.0).or(sack_sent.0.map(|s| s.0));
        let ca_from = sack_sent.0.map(|s| s.1).or(cum_sent.map(|s| s.1));
        let mut rtt_sample = ca_from.map(|t| now.saturating_since(t));
        if let (Some(from), Some(ca)) = (srtt_from, rtt_sample) {
            self.rtt.sample_two(now.saturating_since(from), ca);
        } else if acked_segs > 0 {
            // Nothing delivered can be timed (every segment cumulatively ACKed was
            // retransmitted or SACKed before): Linux `tcp_ack_update_rtt` then times
            // the ACK by its timestamp echo (RFC 7323 §4.1 RTTM; the ACK must move
            // `snd_una`), in whole milliseconds of the two hosts' clocks, at least 1.
            // Both SRTT and the controllers get it, and it clears the RTO backoff.
            let ms = ts_ms(now).wrapping_sub(ack.tsecr).max(1);
            let r = SimDuration::from_millis(ms as u64);
            self.rtt.sample(r);
            rtt_sample = Some(r);
        }

        if self.cfg.sack {
            self.rack_on_ack(now, &rs);
            if self.cfg.rack {
                if self.rack.advanced {
                    self.rack.advanced = false;
                    self.rack_detect_loss(now);
                }
            } else {
                self.update_lost_mark();
            }
        } else if acked_segs > 0 {
            // Linux tcp_remove_reno_sacks: the ACK covered `acked_segs` segments, one
            // of which was the hole; the rest had been counted as dupacks.
            self.reno_dupacks = self.reno_dupacks.saturating_sub(acked_segs - 1);
            if self.state != CaState::Recovery {
                self.reno_dupacks = 0;
            }
        }

        if let Some(high) = self.rack.tlp_high_seq {
            self.process_tlp_ack(now, ack, high, acked_segs, newly_bytes);
        }
        self.check_spurious(now, ack, &rs, acked_segs, prior_sacked);

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
                if self.state == CaState::Recovery {
                    // RFC 8985 §6.2 step 4: a widened window decays per recovery.
                    self.rack.reo_wnd_persist = self.rack.reo_wnd_persist.saturating_sub(1);
                }
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
                self.enter_recovery(now);
                // RFC 6675 §5 (4.2) / RFC 5681 §3.2 step 2: retransmit the first
                // lost segment regardless of the pipe. Under PRR the episode's
                // first ACK allows it already.
                force_rxt = self.prr.is_none();
            }
        }

        // RFC 3168 §6.1.2: react to ECE at most once per window of data.
        if self.cfg.ecn && ack.ece() && self.state == CaState::Open && self.snd_nxt > self.snd_una {
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
        if self.conn_app_limited() && self.delivered > self.app_limited_until {
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
                cum_acked_segments: acked_segs as u32,
                rtt: rtt_sample,
                srtt: self.rtt.srtt(),
                min_rtt: self.rtt.min_rtt(),
                prior_in_flight,
                in_flight: self.pipe_bytes(),
                // Linux `tcp_is_cwnd_limited`: cwnd limited the sending in this
                // window, or, in slow start, the window is below twice the most
                // outstanding in it (a flow held by the receive window keeps
                // growing cwnd).
                app_limited: !(self.is_cwnd_limited
                    || (self.cc.cwnd() < self.cc.ssthresh() && self.cwnd_segs() < 2 * self.max_packets_out)),
                conn_app_limited: self.conn_app_limited(),
                // Loss-based controllers grow only on ACKs that advance the
                // cumulative ACK point outside recovery (Linux tcp_may_raise_cwnd:
                // FLAG_DATA_ACKED). After an RTO (Loss state) an ACK that only SACKs
                // new data while the first hole is unrepaired must not open the
                // window, or it outgrows the pipe and every retransmission of the
                // hole is dropped again (timeouts chain).
                in_recovery: matches!(self.state, CaState::Recovery | CaState::Cwr)
                    || (self.state == CaState::Loss && acked_segs == 0),
                rate,
                tsval_ms: ts_ms32(now, ack.tsval),
                tsecr_ms: ts_ms32(now, ack.tsecr),
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
            // RFC 8985 §7.2: an ACK that advances snd_una re-arms the PTO.
            self.schedule_loss_probe(now, true);
        }

        if force_rxt {
            if let Some(idx) = self.next_lost() {
                self.transmit(now, idx, true, out);
            }
        }
        self.try_send(now, out);
        if self.frto_send_new {
            self.frto_send_new = false;
            if self.snd_nxt <= self.recovery_point {
                // Nothing new could go: conventional recovery (Linux `frto = 0`).
                self.frto = false;
                self.try_send(now, out);
            }
        }
    }

    /// Spurious-retransmission detection (Linux `tcp_try_undo_dsack`,
    /// `tcp_process_loss`): D-SACKs for every retransmission of the episode
    /// (RFC 3708 §3), or F-RTO after a timeout (RFC 5682 §3.1).
    fn check_spurious(&mut self, now: SimTime, ack: &Ack, rs: &RateAcc, acked_segs: u64, prior_sacked: u64) {
        if let (Some(d), Some(m)) = (ack.dsack(), self.undo_marker) {
            if d >= m && self.undo_retrans > 0 {
                self.undo_retrans -= 1;
                if self.undo_retrans == 0 && self.state != CaState::Cwr {
                    self.undo(now);
                    return;
                }
            }
        }
        if self.state != CaState::Loss || !self.frto {
            return;
        }
        if rs.orig_delivered {
            // Step 3b: data never retransmitted was delivered; the timeout was
            // spurious.
            self.undo(now);
        } else if self.snd_nxt > self.recovery_point {
            // Step 3a: after the new data, a duplicate ACK or a SACK means the
            // loss was real; continue with conventional recovery.
            if acked_segs == 0 || self.sacked_segs() > prior_sacked {
                self.frto = false;
            }
        } else if acked_segs > 0 && self.snd_una < self.recovery_point {
            // Step 2b: the first ACK after the timeout advanced snd_una: send new
            // data (up to two segments, the window being 2 now) before anything
            // else is retransmitted.
            self.recovery_point = self.snd_nxt;
            self.frto_send_new = true;
        }
    }

    /// Undo a spurious loss episode (Linux `tcp_undo_cwnd_reduction` with the
    /// loss marks cleared): the controller restores its window and the sender
    /// returns to Open.
    fn undo(&mut self, now: SimTime) {
        self.spurious_undos += 1;
        self.cc.on_spurious_loss(now);
        if self.state == CaState::Loss {
            for s in self.segs.iter_mut() {
                s.flags &= !LOST;
            }
            self.lost_out = 0;
            self.lost_pending = 0;
            self.pending.clear();
            self.lost_mark = self.snd_una;
            // Segments that waited for retransmission are RACK candidates again.
            if self.tsorted_on {
                self.rebuild_tsorted();
            }
        }
        self.prr = None;
        self.undo_marker = None;
        self.frto = false;
        self.frto_send_new = false;
        self.rto_repeats = 0; // Linux tcp_try_undo_loss
        if matches!(self.state, CaState::Recovery | CaState::Loss) {
            self.state = CaState::Open;
        }
    }

    /// The connection is open and the application writes its bulk data.
    fn start_data(&mut self, now: SimTime, out: &mut Vec<Pkt>) {
        self.started = true;
        self.pace_next = now;
        self.try_send(now, out);
    }

    /// Send (or resend, when its timer expired) the application's greeting: one
    /// short segment outside the data's numbering, retransmitted on the RTO the
    /// handshake's sample gives, doubled on each retry (RFC 6298 (5.5)). The
    /// controller is not told: iperf3 attaches it after the cookie is out.
    fn send_cookie(&mut self, now: SimTime, out: &mut Vec<Pkt>) {
        let Some(c) = SynSent::due(self.cookie, now, self.rtt.rto()) else { return };
        self.cookie = Some(c);
        let mut p = self.packet(now, 0, PF_COOKIE);
        p.len = self.cfg.cookie_bytes;
        p.meta.bytes = self.cfg.cookie_bytes + WIRE_BYTES;
        out.push(p);
    }

    /// The greeting's ACK: an RTT sample, the controller's first ACK (one
    /// segment of `cookie_bytes`, sent before it attached, so its first round
    /// has not ended: [`CcInit::sent_before_attach`]), then the bulk data.
    fn on_cookie_ack(&mut self, now: SimTime, ack: &Ack, cookie: SynSent, out: &mut Vec<Pkt>) {
        self.ts_recent = ack.tsval;
        self.snd_wnd_end = self.window_end(ack);
        self.note_window(ack);
        let rtt = now.saturating_since(cookie.sent);
        self.rtt.sample(rtt);
        self.cookie = None;
        let bytes = self.cfg.cookie_bytes as u64;
        self.cc.on_ack(&AckSample {
            now,
            acked_bytes: bytes,
            acked_segments: 1,
            cum_acked_segments: 1,
            rtt: Some(rtt),
            srtt: self.rtt.srtt(),
            min_rtt: self.rtt.min_rtt(),
            prior_in_flight: bytes,
            in_flight: 0,
            // Linux `tcp_is_cwnd_limited`: one packet was out, cwnd is not below 2.
            app_limited: self.cwnd_segs() >= 2,
            conn_app_limited: self.conn_app_limited(),
            in_recovery: false,
            rate: None,
            tsval_ms: ts_ms32(now, ack.tsval),
            tsecr_ms: ts_ms32(now, ack.tsecr),
        });
        self.start_data(now, out);
    }

    /// Send (or resend, when its timer expired) the SYN (RFC 9293 §3.5; RFC 6298
    /// (5.5) backoff from 1 s, as Linux).
    fn send_syn(&mut self, now: SimTime, out: &mut Vec<Pkt>) {
        let Some(syn) = SynSent::due(self.syn, now, SYN_TIMEOUT) else { return };
        self.syn = Some(syn);
        let mut p = self.packet(now, 0, PF_SYN);
        p.len = 0;
        p.meta.bytes = SYN_BYTES + LINK_FRAMING_BYTES;
        p.meta.ecn_capable = false;
        out.push(p);
    }

    /// Enter fast recovery (RFC 6675 §5, Linux `tcp_enter_recovery`).
    fn enter_recovery(&mut self, now: SimTime) {
        if self.state == CaState::Open {
            // Linux tcp_init_undo.
            self.undo_marker = Some(self.snd_una);
            self.undo_retrans = 0;
            // One reduction per episode; a CWR already reduced this window
            // and its PRR state carries on (Linux tcp_enter_recovery).
            let prior_cwnd = self.cc.cwnd();
            self.congestion_event(now, CongestionSignal::Loss);
            self.start_prr(prior_cwnd);
        }
        self.state = CaState::Recovery;
        self.recovery_point = self.snd_nxt;
        self.recoveries += 1;
    }

    /// RFC 8985 §6.2 steps 1–4 on an ACK: reordering, RACK.xmit_ts/rtt, and the
    /// reordering window's D-SACK-driven widening (Linux `tcp_rack_advance`,
    /// `tcp_rack_update_reo_wnd`).
    fn rack_on_ack(&mut self, now: SimTime, rs: &RateAcc) {
        if rs.reordered {
            self.rack.reord_seen = true;
        }
        if let Some((t, e)) = rs.rack {
            if self.rack.xmit == SimTime::ZERO || Rack::sent_after(t, e, self.rack.xmit, self.rack.end) {
                self.rack.xmit = t;
                self.rack.end = e;
                self.rack.rtt = now.saturating_since(t);
                self.rack.advanced = true;
            }
        }
        if rs.valid {
            // Step 4: at most one widening per round trip of delivered data.
            if rs.prior_delivered < self.rack.last_delivered {
                self.rack.dsack_seen = false;
            }
            if self.rack.dsack_seen {
                self.rack.reo_wnd_mult = (self.rack.reo_wnd_mult + 1).min(255);
                self.rack.dsack_seen = false;
                self.rack.last_delivered = self.delivered;
                self.rack.reo_wnd_persist = REO_WND_PERSIST;
            } else if self.rack.reo_wnd_persist == 0 {
                self.rack.reo_wnd_mult = 1;
            }
        }
    }

    /// RACK.reo_wnd (RFC 8985 §6.2 step 4, as Linux `tcp_rack_reo_wnd`): zero
    /// while no reordering was seen and the sender is in recovery or DupThresh
    /// segments are SACKed; otherwise min_rtt/4 per step, at most SRTT.
    fn rack_reo_wnd(&self) -> SimDuration {
        if !self.rack.reord_seen && (matches!(self.state, CaState::Recovery | CaState::Loss) || self.sacked_out >= DUP_THRESH) {
            return SimDuration::ZERO;
        }
        let min_rtt = self.rtt.min_rtt();
        if min_rtt == SimDuration::MAX {
            return SimDuration::ZERO;
        }
        SimDuration::from_nanos((min_rtt.as_nanos() / 4) * self.rack.reo_wnd_mult as u64).min(self.rtt.srtt())
    }

    /// RFC 8985 §6.2 step 5 (Linux `tcp_rack_detect_loss`): every segment sent
    /// before RACK.xmit_ts and outstanding for longer than RACK.rtt + reo_wnd is
    /// lost, retransmissions included; the others arm the reordering timer for
    /// when they would be. Returns the number newly marked.
    ///
    /// Inline, the case of nearly every ACK in order: nothing lost or
    /// retransmitted is outstanding (no time-ordered list) and the newest
    /// segment delivered lies below `snd_una`, so there is no candidate and no
    /// timer; the scan itself stays out of line.
    #[inline]
    fn rack_detect_loss(&mut self, now: SimTime) -> u64 {
        if !self.tsorted_on && !self.rack_needs_tsorted() && self.rack_candidates_end() <= self.snd_una {
            #[cfg(test)]
            {
                self.check_pending();
                assert_eq!(self.rack_lost_by_sequence(now), (Vec::new(), SimTime::MAX), "RACK fast path");
            }
            self.rack.reo_deadline = SimTime::MAX;
            return 0;
        }
        self.rack_scan(now)
    }

    /// The end of RACK's candidates: segments below the newest one delivered or
    /// retransmitted (RFC 8985 §6.2 scans the outstanding data up to it).
    #[inline]
    fn rack_candidates_end(&self) -> u64 {
        self.rack.end.max(self.high_rxt).min(self.snd_nxt)
    }

    /// Whether RACK needs its time-ordered list: something lost or retransmitted
    /// is outstanding, so send order and sequence order can differ.
    #[inline]
    fn rack_needs_tsorted(&self) -> bool {
        self.lost_out > 0 || self.high_rxt > self.snd_una
    }

    /// [`Self::rack_detect_loss`]'s scan.
    #[inline(never)]
    fn rack_scan(&mut self, now: SimTime) -> u64 {
        #[cfg(test)]
        self.check_pending();
        #[cfg(test)]
        let expect = self.rack_lost_by_sequence(now);
        // RACK.rtt + reo_wnd, computed at the first candidate (an ACK in order
        // usually has none); nothing below changes what it reads.
        let mut budget = None;
        let mut wait = SimDuration::ZERO;
        let mut marked = 0;
        #[cfg(test)]
        let mut got = Vec::new();
        let end = self.rack_candidates_end();
        let needed = self.rack_needs_tsorted();
        if needed != self.tsorted_on {
            if needed {
                self.rebuild_tsorted();
            } else {
                self.tsorted = VecDeque::new();
            }
            self.tsorted_on = needed;
        }
        if !needed {
            // Nothing lost or retransmitted is outstanding: originals only, in
            // sequence and send order, so the scan stops at the first one sent
            // after RACK.xmit_ts.
            let mut idx = self.snd_una;
            let mut k = 0; // next SACKed range at or above idx
            while idx < end {
                while k < self.sack_ranges.len() && self.sack_ranges[k].1 <= idx {
                    k += 1;
                }
                if k < self.sack_ranges.len() && self.sack_ranges[k].0 <= idx {
                    idx = self.sack_ranges[k].1;
                    continue;
                }
                let sent = self.segs[(idx - self.snd_una) as usize].sent;
                if !Rack::sent_after(self.rack.xmit, self.rack.end, sent, idx + 1) {
                    break;
                }
                let budget = *budget.get_or_insert_with(|| self.rack.rtt + self.rack_reo_wnd());
                let elapsed = now.saturating_since(sent);
                if elapsed >= budget {
                    self.rack_mark_lost(idx);
                    marked += 1;
                    #[cfg(test)]
                    got.push(idx);
                } else {
                    wait = wait.max(SimDuration::from_nanos(budget.as_nanos() - elapsed.as_nanos()));
                }
                idx += 1;
            }
        }
        // Walk the transmissions in time order and stop at the first one sent after
        // RACK.xmit_ts: all later ones were sent later still (Linux does the same
        // on its time-sorted list). Entries that can never be candidates again are
        // dropped; the kept ones are compacted to the front.
        let mut i = 0;
        let mut kept = 0;
        while self.tsorted_on && i < self.tsorted.len() {
            let (sent, idx) = self.tsorted[i];
            if sent > self.rack.xmit {
                break;
            }
            i += 1;
            if idx < self.snd_una {
                continue; // ACKed
            }
            let seg = self.segs[(idx - self.snd_una) as usize];
            let f = seg.flags;
            if seg.sent != sent || f & SACKED != 0 || (f & LOST != 0 && f & RETRANS == 0) {
                // Sent again since (a later entry), SACKed, or lost and waiting for
                // its retransmission (which adds a new entry).
                continue;
            }
            if idx < end && Rack::sent_after(self.rack.xmit, self.rack.end, sent, idx + 1) {
                let budget = *budget.get_or_insert_with(|| self.rack.rtt + self.rack_reo_wnd());
                let elapsed = now.saturating_since(sent);
                if elapsed >= budget {
                    self.rack_mark_lost(idx);
                    marked += 1;
                    #[cfg(test)]
                    got.push(idx);
                    continue; // now lost and waiting
                }
                wait = wait.max(SimDuration::from_nanos(budget.as_nanos() - elapsed.as_nanos()));
            }
            self.tsorted[kept] = (sent, idx);
            kept += 1;
        }
        if kept < i {
            self.tsorted.drain(kept..i);
        }
        self.rack.reo_deadline = if wait > SimDuration::ZERO { now + wait } else { SimTime::MAX };
        #[cfg(test)]
        {
            got.sort_unstable();
            assert_eq!((got, self.rack.reo_deadline), expect, "RACK by time order vs by sequence");
        }
        marked
    }

    /// Rebuild RACK's time-ordered candidates from the scoreboard (when a loss
    /// episode starts, or an undo made waiting segments outstanding again): once
    /// per episode, so a sort is fine.
    fn rebuild_tsorted(&mut self) {
        self.tsorted.clear();
        for (i, seg) in self.segs.iter().enumerate() {
            if seg.flags & SACKED == 0 {
                self.tsorted.push_back((seg.sent, self.snd_una + i as u64));
            }
        }
        self.tsorted.make_contiguous().sort_unstable();
    }

    /// RFC 8985 §6.2 step 5 by a scan in sequence order, without side effects:
    /// the segments it would mark lost and the reordering deadline. The reference
    /// the time-ordered walk is checked against in unit tests.
    #[cfg(test)]
    fn rack_lost_by_sequence(&self, now: SimTime) -> (Vec<u64>, SimTime) {
        let budget = self.rack.rtt + self.rack_reo_wnd();
        let mut wait = SimDuration::ZERO;
        let mut lost = Vec::new();
        let end = self.rack_candidates_end();
        for idx in self.snd_una..end {
            let seg = self.segs[(idx - self.snd_una) as usize];
            let f = seg.flags;
            if f & SACKED != 0 || (f & LOST != 0 && f & RETRANS == 0) {
                continue;
            }
            if !Rack::sent_after(self.rack.xmit, self.rack.end, seg.sent, idx + 1) {
                continue;
            }
            let elapsed = now.saturating_since(seg.sent);
            if elapsed >= budget {
                lost.push(idx);
            } else {
                wait = wait.max(SimDuration::from_nanos(budget.as_nanos() - elapsed.as_nanos()));
            }
        }
        (lost, if wait > SimDuration::ZERO { now + wait } else { SimTime::MAX })
    }

    /// Unit tests: `pending` holds exactly the segments lost and waiting.
    #[cfg(test)]
    fn check_pending(&self) {
        for (i, seg) in self.segs.iter().enumerate() {
            let waiting = seg.flags & LOST != 0 && seg.flags & RETRANS == 0;
            assert_eq!(self.pending.get(self.snd_una + i as u64), waiting, "segment {}", self.snd_una + i as u64);
        }
        assert_eq!(self.pending.count(self.snd_una, self.snd_nxt), self.lost_pending);
    }

    /// Mark one segment lost for RACK; a lost retransmission goes back to
    /// waiting for its next retransmission (Linux `tcp_rack_mark_skb_lost`).
    fn rack_mark_lost(&mut self, idx: u64) {
        let s = &mut self.segs[(idx - self.snd_una) as usize];
        if s.flags & RETRANS != 0 {
            s.flags &= !RETRANS;
            self.retrans_out -= 1;
            if s.flags & LOST != 0 {
                self.lost_pending += 1;
                self.pending.set(idx, true);
            }
        }
        self.mark_lost(idx);
        self.rxt_scan = self.rxt_scan.min(idx);
    }

    /// The reordering timer fired (RFC 8985 §6.3, Linux `tcp_rack_reo_timeout`).
    fn on_reo_timeout(&mut self, now: SimTime, out: &mut Vec<Pkt>) {
        if self.snd_una == self.snd_nxt || !self.cfg.sack {
            return;
        }
        if self.rack_detect_loss(now) > 0 {
            if self.state != CaState::Recovery && self.state != CaState::Loss {
                self.enter_recovery(now);
                // Linux counts one delivered segment so the retransmission goes.
                self.prr_on_ack(1, 0, false);
            }
            let cwnd_segs = self.cwnd_segs();
            self.send_loop(now, cwnd_segs, out);
            if self.prr.is_none() && self.state == CaState::Recovery && self.pipe() >= cwnd_segs {
                if let Some(idx) = self.next_lost() {
                    self.transmit(now, idx, true, out);
                }
            }
        }
        self.rto_deadline = now + self.rtt.rto();
    }

    /// Arm the probe timeout (RFC 8985 §7.2, Linux `tcp_schedule_loss_probe`).
    /// `ack` = on an ACK that advanced snd_una (the RTO would restart then).
    fn schedule_loss_probe(&mut self, now: SimTime, ack: bool) {
        let outstanding = self.snd_nxt - self.snd_una;
        if !self.cfg.tlp || !self.cfg.sack || outstanding == 0 || !matches!(self.state, CaState::Open | CaState::Cwr) {
            self.rack.tlp_deadline = SimTime::MAX;
            return;
        }
        let srtt = self.rtt.srtt();
        let pto = if srtt == SimDuration::ZERO {
            crate::rtt::INITIAL_RTO
        } else {
            srtt + srtt + if outstanding == 1 { TLP_WC_DEL_ACK } else { TLP_TIMEOUT_MIN }
        };
        // Never later than the RTO would fire.
        let rto_at = if ack { now + self.rtt.rto() } else { self.rto_deadline };
        self.rack.tlp_deadline = (now + pto).min(rto_at);
    }

    /// The probe timeout fired (RFC 8985 §7.3, Linux `tcp_send_loss_probe`):
    /// send one new segment if there is one, else retransmit the last one.
    fn send_loss_probe(&mut self, now: SimTime, out: &mut Vec<Pkt>) {
        if self.snd_una == self.snd_nxt || self.rack.tlp_high_seq.is_some() || !matches!(self.state, CaState::Open | CaState::Cwr) {
            return;
        }
        if self.can_send_new(now) {
            self.transmit(now, self.snd_nxt, false, out);
            self.rack.tlp_retrans = false;
        } else {
            let idx = self.snd_nxt - 1;
            let pos = (idx - self.snd_una) as usize;
            if self.segs[pos].flags & SACKED != 0 {
                return;
            }
            // Not counted in retrans_out (Linux `__tcp_retransmit_skb`): the probe
            // replaces nothing in the pipe; it is marked retransmitted for Karn.
            let s = &mut self.segs[pos];
            s.flags |= EVER_RETRANS;
            s.sent = now;
            if self.tsorted_on {
                self.tsorted.push_back((now, idx));
            }
            self.retrans_segs += 1;
            self.segs_sent += 1;
            self.high_rxt = self.high_rxt.max(idx + 1);
            if let Some(p) = self.prr.as_mut() {
                p.out += 1;
            }
            out.push(self.packet(now, idx, PF_RETX));
            self.cc.on_packet_sent(now, self.seg_len(idx) as u64, self.pipe_bytes());
            self.rack.tlp_retrans = true;
        }
        self.rack.tlp_high_seq = Some(self.snd_nxt);
        // RFC 8985 §7.3: the RTO restarts after the probe.
        self.rto_deadline = now + self.rtt.rto();
    }

    /// RFC 8985 §7.4 (Linux `tcp_process_tlp_ack`): did the probe repair a loss?
    fn process_tlp_ack(&mut self, now: SimTime, ack: &Ack, high: u64, acked_segs: u64, newly_bytes: u64) {
        if !self.rack.tlp_retrans {
            // A probe of new data: nothing to infer.
            self.rack.tlp_high_seq = None;
        } else if ack.dsack() == Some(high - 1) {
            // The original and the probe both arrived: no loss (§7.4.1).
            self.rack.tlp_high_seq = None;
        } else if ack.cum > high {
            // Data beyond the probe is acknowledged and no D-SACK came: the probe
            // repaired a lost tail segment. One reduction, done at once (Linux
            // enters CWR and ends the reduction on the same ACK).
            self.rack.tlp_high_seq = None;
            if self.state == CaState::Open {
                self.congestion_event(now, CongestionSignal::Loss);
            }
        } else if acked_segs == 0 && newly_bytes == 0 && ack.dsack().is_none() {
            // A pure duplicate ACK: the episode ends without inference.
            self.rack.tlp_high_seq = None;
        }
    }

    /// RFC 6298 (5.4)–(5.6) and RFC 5681 §3.1: the retransmission timer expired.
    fn on_rto(&mut self, now: SimTime) {
        if self.snd_una == self.snd_nxt {
            self.rto_deadline = SimTime::MAX;
            return;
        }
        self.rto_count += 1;
        // Linux tcp_enter_loss: reduce ssthresh only if no reduction was made
        // inside this window — the sender was Open (or Disorder, which Open
        // covers here), the recovery point is acknowledged, or it was in Loss
        // and the cumulative ACK has moved since the last timeout. Only then
        // does an undo episode start; a timeout during fast recovery or ECN's
        // CWR, or a second one with no progress, keeps ssthresh and the
        // episode's undo marker.
        let episode = if self.state == CaState::Open
            || self.snd_una >= self.recovery_point
            || (self.state == CaState::Loss && self.rto_repeats == 0)
        {
            RtoEpisode::New
        } else {
            RtoEpisode::Ongoing
        };
        if episode == RtoEpisode::New || self.undo_marker.is_none() {
            self.undo_marker = Some(self.snd_una);
            self.undo_retrans = 0;
        }
        // RFC 5682 §3.1 step 1 (and §3.2): F-RTO after a timeout that starts a
        // recovery, or after a repeated one on the same snd_una — not after one
        // inside an episode of fast recovery or after progress in Loss.
        self.frto = self.cfg.frto
            && self.cfg.sack
            && (matches!(self.state, CaState::Open | CaState::Cwr) || self.rto_repeats > 0);
        self.frto_send_new = false;
        self.cc.on_rto(now, self.pipe_bytes(), episode);
        self.rto_repeats += 1;
        self.rtt.back_off();
        // Everything outstanding and not SACKed is lost; earlier retransmissions
        // are presumed lost too (Linux tcp_enter_loss).
        self.retrans_out = 0;
        self.lost_out = 0;
        self.lost_pending = 0;
        self.pending.clear();
        self.tsorted.clear(); // every segment is now SACKed or lost and waiting
        for (i, s) in self.segs.iter_mut().enumerate() {
            s.flags &= !RETRANS;
            if s.flags & SACKED == 0 {
                s.flags |= LOST;
                self.lost_out += 1;
                self.lost_pending += 1;
                self.pending.set(self.snd_una + i as u64, true);
            }
        }
        self.reno_dupacks = 0;
        self.lost_mark = self.snd_nxt;
        self.rxt_scan = self.snd_una;
        self.state = CaState::Loss;
        self.recovery_point = self.snd_nxt;
        self.cwr_pending = false;
        self.prr = None;
        self.rack.reo_deadline = SimTime::MAX;
        self.rack.tlp_deadline = SimTime::MAX;
        self.rack.tlp_high_seq = None;
        self.pace_next = now;
        // RFC 6298 (5.6): restart the timer with the backed-off RTO.
        self.rto_deadline = now + self.rtt.rto();
    }

    /// The data packet carrying segment `idx`, sent at `now`.
    fn packet(&self, now: SimTime, idx: u64, flags: u8) -> Pkt {
        let len = self.seg_len(idx);
        Pkt {
            meta: PacketMeta {
                flow: self.cfg.flow,
                bytes: len + WIRE_BYTES,
                // RFC 3168 §6.1.5: retransmitted packets are not ECN-capable.
                ecn_capable: self.cfg.ecn && flags & PF_RETX == 0,
                // ZRTT's base-RTT header hint (seed 002): the sender's lowest RTT.
                rtt_hint_us: self.rtt_hint_us(),
                is_ack: false,
                // The engine's passive estimate is the sender's smoothed RTT.
                passive_rtt_us: self.srtt_us(),
            },
            seq: idx,
            len,
            flags,
            aux: self.ts_recent,
            tsval: ts_ms(now),
        }
    }

    #[inline]
    fn rtt_hint_us(&self) -> Option<u32> {
        let m = self.rtt.min_rtt().as_micros();
        (m > 0).then(|| m.min(u32::MAX as u64) as u32)
    }

    /// Payload bytes of the segments below `idx`.
    fn bytes_below(&self, idx: u64) -> u64 {
        let full = idx * self.cfg.mss as u64;
        if idx > 0 && idx == self.cfg.total_segs {
            full - (self.cfg.mss - self.cfg.last_seg_len) as u64
        } else {
            full
        }
    }

    /// Append this sender's state to the per-ACK trace, as Linux's `tcp_probe`
    /// sees it when an ACK arrives (before the ACK is processed).
    pub(crate) fn probe_into(&self, now: SimTime, flow: u32, probe: &mut crate::output::AckProbe) {
        let mss = self.cfg.mss as u64;
        let cwnd = self.cwnd_segs();
        let ssthresh = self.cc.ssthresh() / mss;
        // Linux `tcp_current_ssthresh`: the real ssthresh only while reducing.
        let current = if matches!(self.state, CaState::Recovery | CaState::Cwr) {
            ssthresh
        } else {
            ssthresh.max((cwnd >> 1) + (cwnd >> 2))
        };
        probe.t_ns.push(now.as_nanos());
        probe.flow.push(flow);
        probe.cwnd_segments.push(cwnd);
        // TCP_INFINITE_SSTHRESH (0x7fffffff segments) or more: none set yet.
        probe.current_ssthresh_segments.push(if current >= 0x7fff_ffff { f64::NAN } else { current as f64 });
        probe.srtt_ns.push(self.rtt.srtt().as_nanos());
        probe.snd_wnd_bytes.push(self.snd_wnd_end.saturating_sub(self.snd_una).saturating_mul(mss));
        // The greeting counts as the kernel counts it: sequence space before the data.
        let cookie = self.cfg.cookie_bytes as u64;
        let (acked_cookie, cookie_out) = if self.started { (cookie, 0) } else { (0, if self.cookie.is_some() { cookie } else { 0 }) };
        let una = self.bytes_below(self.snd_una);
        probe.acked_bytes.push(una + acked_cookie);
        probe.outstanding_bytes.push(self.bytes_below(self.snd_nxt) - una + cookie_out);
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

    /// A controller with a huge window that paces at a fixed rate, in quanta
    /// of the given number of segments.
    #[derive(Debug)]
    struct FixedPace(Bandwidth, u64);

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
        fn on_rto(&mut self, _now: SimTime, _in_flight: u64, _episode: crate::cc::RtoEpisode) {}
        fn pacing_rate(&self) -> Option<Bandwidth> {
            Some(self.0)
        }
        fn send_quantum(&self) -> u64 {
            self.1
        }
    }

    /// A Reno-like controller with a fixed window: `w` segments, halved to
    /// `w/2` (cwnd and ssthresh) on a congestion event, 1 on an RTO (ssthresh
    /// halved only when the timeout starts a new episode).
    #[derive(Debug)]
    struct Halving {
        mss: u64,
        cwnd: u64,
        ssthresh: u64,
        prior: Option<(u64, u64)>,
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
            self.prior = Some((self.cwnd, self.ssthresh));
            self.ssthresh = self.cwnd / 2;
            self.cwnd = self.ssthresh;
        }
        fn on_rto(&mut self, _now: SimTime, _in_flight: u64, episode: RtoEpisode) {
            if episode == RtoEpisode::New {
                self.prior = Some((self.cwnd, self.ssthresh));
                self.ssthresh = self.cwnd / 2;
            }
            self.cwnd = 1;
        }
        fn on_spurious_loss(&mut self, _now: SimTime) {
            if let Some((c, s)) = self.prior.take() {
                (self.cwnd, self.ssthresh) = (c, s);
            }
        }
    }

    const MSS: u32 = 1000;

    /// A bulk sender's configuration with Linux's defaults (SACK, RACK-TLP, F-RTO
    /// on; no handshake, no GSO deferral, no receive-window limit).
    fn test_config() -> SenderConfig {
        SenderConfig {
            flow: 0,
            mss: MSS,
            ecn: false,
            sack: true,
            total_segs: u64::MAX,
            last_seg_len: MSS,
            start: SimTime::ZERO,
            stop: SimTime::MAX,
            rwnd_segs: u64::MAX,
            rack: true,
            tlp: true,
            frto: true,
            tso_defer: false,
            handshake: false,
            cookie_bytes: 0,
        }
    }

    fn sender(cwnd: u64, sack: bool, ecn: bool) -> TcpSender {
        let cfg = SenderConfig { sack, ecn, ..test_config() };
        TcpSender::new(cfg, Box::new(Halving { mss: MSS as u64, cwnd, ssthresh: u64::MAX, prior: None }), 64)
    }

    /// A SACK sender with window `cwnd` that has sent its whole first window at
    /// time 0, and an empty output buffer for what it sends next.
    fn started(cwnd: u64) -> (TcpSender, Vec<Pkt>) {
        let mut s = sender(cwnd, true, false);
        let mut out = Vec::new();
        s.on_timer(SimTime::ZERO, &mut out);
        assert_eq!(out.len() as u64, cwnd, "the first window leaves at once");
        out.clear();
        (s, out)
    }

    /// The retransmission of segment `seq` among the packets sent, if any.
    fn resent(out: &[Pkt], seq: u64) -> Option<&Pkt> {
        out.iter().find(|p| p.seq == seq && p.flags & PF_RETX != 0)
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
        let (mut s, mut out) = started(20);
        // A path of RTT 100 ms: segment j of the initial burst (sent at 0) is
        // SACKed at 100 + j ms; 20 and 21, sent at 101 and 102, at 201 and 202.
        let mut log = Vec::new();
        for seg in 1..22u64 {
            let t = SimTime::from_millis(if seg < 20 { 100 + seg } else { 181 + seg });
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
        s.on_ack(SimTime::from_millis(203), &ack(22, &[]), &mut out);
        assert_eq!(s.state, CaState::Open);
        assert_eq!(sent(&mut out), vec!["31".to_string()]);
        assert_eq!(s.cwnd(), 10 * MSS as u64);
    }

    #[test]
    fn a_repaired_hole_is_timed_by_the_timestamp_echo_not_by_segments_sacked_earlier() {
        // cwnd 20, 0..20 sent at 0; segment 0 is lost. The SACKs of 1..20 arrive
        // at 100 + j ms, each an RTT sample of its own (Linux sack_rtt). The
        // cumulative ACK of the retransmitted 0 at 400 ms covers the repaired
        // hole and the 19 segments SACKed long before: Linux's
        // tcp_clean_rtx_queue takes no sample from the segments (a retransmission
        // is among them, and SACKed segments were timed by their SACK), where
        // now − sent of segment 19 would be a 400-ms sample. tcp_ack_update_rtt
        // then times the ACK by its timestamp echo: the retransmission's TSval,
        // which the receiver keeps as TS.Recent when the retransmission fills the
        // hole, so 400 ms less the millisecond R0 left in.
        let (mut s, mut out) = started(20);
        let mut r0_tsval = None;
        for j in 1..20u64 {
            s.on_ack(SimTime::from_millis(100 + j), &ack(0, &[(1, j + 1)]), &mut out);
            if let Some(p) = resent(&out, 0) {
                r0_tsval = Some((j, p.tsval));
            }
            out.clear();
        }
        // RACK/dupthresh: the third SACK (103 ms) sends R0, stamped 103.
        assert_eq!(r0_tsval, Some((3, 103)));
        let srtt = s.rtt.srtt();
        assert!(srtt < SimDuration::from_millis(120), "{srtt:?}");
        let repaired = Ack { tsecr: 103, ..ack(20, &[]) };
        s.on_ack(SimTime::from_millis(400), &repaired, &mut out);
        let sample = SimDuration::from_millis(400 - 103);
        assert_eq!(s.rtt.srtt().as_nanos(), (7 * srtt.as_nanos() + sample.as_nanos()) / 8);
        // The ACK of never-SACKed, never-retransmitted data is timed by the
        // segment, not the echo: 20 and 21 went out after 100 ms, as the SACKs
        // freed room; ACKed at 521 ms with an echo of 0 (a 521-ms sample if the
        // echo were used) they give a sample between 400 and 421 ms.
        let before = s.rtt.srtt();
        s.on_ack(SimTime::from_millis(521), &ack(22, &[]), &mut out);
        let taken = 8 * s.rtt.srtt().as_nanos() - 7 * before.as_nanos();
        assert!((400_000_000..=421_000_000).contains(&taken), "{taken}");
    }

    #[test]
    fn the_timestamp_echo_times_only_an_ack_that_moves_snd_una() {
        // Window 4, segments 0..4 sent at 0; 0 is lost and retransmitted by the
        // RTO at 1 s (backoff 1). A duplicate ACK (SACK of nothing new) with an
        // echo gives no sample (RFC 7323 §4.1's RTTM rule, Linux FLAG_ACKED);
        // the ACK of the retransmission gives one of now − TSecr, in whole
        // milliseconds, and clears the backoff (Linux: "only reset backoff on
        // valid RTT measurement").
        let (mut s, mut out) = started(4);
        s.on_ack(SimTime::from_millis(100), &ack(0, &[(1, 4)]), &mut out);
        out.clear();
        let rto_at = s.rto_deadline;
        s.on_timer(rto_at, &mut out);
        let r0 = resent(&out, 0).expect("the RTO resends 0").tsval;
        assert_eq!(r0, ts_ms(rto_at));
        out.clear();
        let backed_off = s.rtt.rto();
        let srtt = s.rtt.srtt();
        let later = rto_at + SimDuration::from_micros(50_700);
        s.on_ack(later, &Ack { tsecr: r0, ..ack(0, &[(1, 4)]) }, &mut out);
        assert_eq!((s.rtt.srtt(), s.rtt.rto()), (srtt, backed_off), "a duplicate ACK is no sample");
        s.on_ack(later, &Ack { tsecr: r0, ..ack(4, &[]) }, &mut out);
        let ms = (ts_ms(later) - r0) as u64;
        assert!(ms == 50 || ms == 51, "{ms}");
        let sample = SimDuration::from_millis(ms);
        assert_eq!(s.rtt.srtt().as_nanos(), (7 * srtt.as_nanos() + sample.as_nanos()) / 8);
        // Backoff cleared: the RTO in force is the unbacked one. (Comparing with
        // `backed_off` would not do: a smaller SRTT lowers a backed-off RTO too.)
        assert!(backed_off > s.rtt.base_rto());
        assert_eq!(s.rtt.rto(), s.rtt.base_rto(), "the sample clears the backoff");
    }

    /// A fixed window that records every ACK the sender hands it.
    #[derive(Debug)]
    struct Recorder {
        cwnd: u64,
        ssthresh: u64,
        acks: std::rc::Rc<std::cell::RefCell<Vec<AckSample>>>,
    }

    impl CongestionControl for Recorder {
        fn name(&self) -> &'static str {
            "recorder"
        }
        fn cwnd(&self) -> u64 {
            self.cwnd * MSS as u64
        }
        fn ssthresh(&self) -> u64 {
            self.ssthresh.saturating_mul(MSS as u64)
        }
        fn on_ack(&mut self, ack: &AckSample) {
            self.acks.borrow_mut().push(*ack);
        }
        fn on_congestion_event(&mut self, _ev: &CongestionEvent) {}
        fn on_rto(&mut self, _now: SimTime, _in_flight: u64, _episode: crate::cc::RtoEpisode) {}
    }

    #[test]
    fn the_controller_is_timed_on_the_newest_segment_delivered_and_srtt_on_the_oldest() {
        // Window 3: 0, 1, 2 leave at 0; the ACK of 0 at 100 ms lets 3 leave at
        // 100 ms. Segment 2 is lost, so the ACK at 150 ms cumulatively ACKs 1
        // (sent at 0) and SACKs 3 (sent at 100 ms). Linux's tcp_clean_rtx_queue:
        // SRTT gets 150 ms (seq_rtt_us, the oldest segment cumulatively ACKed),
        // the controller and the minimum RTT 50 ms (ca_rtt_us, the newest SACKed
        // segment) — not the 150 ms a lone segment's delayed ACK would add to a
        // delay-based controller's maximum.
        let log = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
        let cfg = test_config();
        let mut s = TcpSender::new(cfg, Box::new(Recorder { cwnd: 3, ssthresh: u64::MAX, acks: log.clone() }), 16);
        let mut out = Vec::new();
        s.on_timer(SimTime::ZERO, &mut out);
        assert_eq!(sent(&mut out), ["0", "1", "2"]);
        s.on_ack(SimTime::from_millis(100), &ack(1, &[]), &mut out);
        assert_eq!(sent(&mut out), ["3"]);
        s.on_ack(SimTime::from_millis(150), &ack(2, &[(3, 4)]), &mut out);
        let ms = SimDuration::from_millis;
        let rtts: Vec<_> = log.borrow().iter().map(|a| a.rtt).collect();
        assert_eq!(rtts, [Some(ms(100)), Some(ms(50))]);
        // RFC 6298 (2.3): SRTT = 7/8 · 100 + 1/8 · 150.
        assert_eq!(s.rtt.srtt(), SimDuration::from_micros(106_250));
        assert_eq!(s.rtt.min_rtt(), ms(50));
    }

    #[test]
    fn a_window_held_by_the_receiver_still_grows_in_slow_start_up_to_twice_the_flight() {
        // Linux tcp_is_cwnd_limited: in slow start cwnd may grow while it is
        // below twice the most segments outstanding in the window
        // (max_packets_out); in congestion avoidance only if cwnd limited the
        // sending. The peer's window holds 10 segments out in every case.
        let run = |cwnd: u64, ssthresh: u64| {
            let log = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
            let cfg = SenderConfig { rwnd_segs: 10, ..test_config() };
            let mut s = TcpSender::new(cfg, Box::new(Recorder { cwnd, ssthresh, acks: log.clone() }), 16);
            let mut out = Vec::new();
            s.on_timer(SimTime::ZERO, &mut out);
            assert_eq!(out.len(), 10, "the receive window binds");
            let mut a = ack(1, &[]);
            a.wnd = 10;
            s.on_ack(SimTime::from_millis(100), &a, &mut out);
            let may_grow: Vec<bool> = log.borrow().iter().map(|a| !a.app_limited).collect();
            may_grow
        };
        // Slow start (cwnd below ssthresh): 15 < 2·10 grows, 20 = 2·10 does not.
        assert_eq!(run(15, u64::MAX), [true]);
        assert_eq!(run(20, u64::MAX), [false]);
        // Congestion avoidance: held by the window, not by cwnd: no growth.
        assert_eq!(run(15, 5), [false]);
    }

    #[test]
    fn cwnd_limited_stays_true_until_the_window_it_was_set_in_is_acked() {
        // Linux tcp_cwnd_validate keeps is_cwnd_limited for the window in which
        // cwnd last limited the sending (until snd_una passes cwnd_usage_seq), so
        // a flow that turns receive-window limited grows for one more window. Hand
        // derivation: cwnd 10 in congestion avoidance sends 0..10 and is cwnd
        // limited (cwnd_usage_seq 10). Each ACK of one segment then advertises 9,
        // so the edge stays one segment past snd_una: nothing or one new segment
        // leaves, pipe stays 9 < cwnd, and no send is cwnd limited. The ACKs of
        // segments 0..9 (snd_una 1..10) may grow; the send after the ACK that
        // reaches 10 opens a new window that was not cwnd limited, so the ACK of
        // segment 10 may not.
        let log = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
        let cfg = SenderConfig { rwnd_segs: 100, ..test_config() };
        let mut s = TcpSender::new(cfg, Box::new(Recorder { cwnd: 10, ssthresh: 5, acks: log.clone() }), 64);
        let mut out = Vec::new();
        s.on_timer(SimTime::ZERO, &mut out);
        assert_eq!(out.len(), 10, "cwnd binds");
        out.clear();
        for n in 1..=11u64 {
            let mut a = ack(n, &[]);
            a.wnd = 9;
            s.on_ack(SimTime::from_millis(100 + n), &a, &mut out);
            // The edge n + 9 lets one new segment out once it passes snd_nxt 10.
            assert_eq!(out.len(), usize::from(n >= 2), "after the ACK up to {n}");
            out.clear();
        }
        let may_grow: Vec<bool> = log.borrow().iter().map(|a| !a.app_limited).collect();
        let mut expected = vec![true; 10];
        expected.push(false);
        assert_eq!(may_grow, expected);
    }

    #[test]
    fn new_data_stops_at_the_advertised_window_edge() {
        // cwnd 20, segments 0..20 out. The ACK of 0..2 advertises 5 segments
        // (edge 7, below snd_nxt): cwnd would allow 2 more (pipe 18), the window
        // none. The ACK of 2..4 moves the edge to 4 + 21 = 25: pipe 16, cwnd lets
        // out 4. The ACK of 4..6 keeps the edge at 6 + 19 = 25: cwnd would allow
        // 2 (pipe 18), the window 1.
        let (mut s, mut out) = started(20);
        let mut a = ack(2, &[]);
        a.wnd = 5;
        s.on_ack(SimTime::from_millis(100), &a, &mut out);
        assert!(out.is_empty(), "the edge 7 is below snd_nxt 20");
        let mut a = ack(4, &[]);
        a.wnd = 21;
        s.on_ack(SimTime::from_millis(101), &a, &mut out);
        assert_eq!(sent(&mut out), ["20", "21", "22", "23"]);
        let mut a = ack(6, &[]);
        a.wnd = 19;
        s.on_ack(SimTime::from_millis(102), &a, &mut out);
        assert_eq!(sent(&mut out), ["24"], "edge 25 stops the second segment cwnd allows");
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
        let (mut s, mut out) = started(20);
        // RTT 100 ms as above: SACK of j at 100 + j ms; 20, 21 sent at 115, 116.
        let mut log = Vec::new();
        for seg in 15..22u64 {
            let t = SimTime::from_millis(if seg < 20 { 100 + seg } else { 195 + seg });
            s.on_ack(t, &ack(0, &[(15, seg + 1)]), &mut out);
            log.push(sent(&mut out).join(" "));
        }
        assert_eq!(log, ["20", "21", "R0", "R1", "R2", "R3", "R4"]);
        // pipe = 22 + 5 retransmitted − 7 SACKed − 15 lost = 5.
        assert_eq!(s.pipe(), 5);
        // The cumulative ACK of R0 with no new loss: pipe 4, delivered 1, and
        // Linux's SSRB adds one segment for advancing snd_una: 2 segments.
        s.on_ack(SimTime::from_millis(217), &ack(1, &[(15, 22)]), &mut out);
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
        ece.flags |= crate::packet::ACK_ECE;
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
    fn rack_detects_a_lost_retransmission_without_an_rto() {
        // RFC 8985 §6 / §3.3.2: window 20 on a 100 ms path, segment 0 lost and its
        // first retransmission too. The SACKs of 1..3 (at 101..103 ms) start
        // recovery and R0 leaves at 103 ms; PRR then sends 22 at 105 ms (see the
        // PRR example). When 22's SACK arrives at 205 ms, RACK's newest delivered
        // segment was sent at 105 ms, after R0 (103 ms), and R0 has been out
        // 102 ms ≥ RACK.rtt (100 ms) + reo_wnd (0 in recovery without reordering):
        // it is lost, and goes again at once, long before the RTO (≥ 300 ms).
        let (mut s, mut out) = started(20);
        for seg in 1..20u64 {
            s.on_ack(SimTime::from_millis(100 + seg), &ack(0, &[(1, seg + 1)]), &mut out);
        }
        let sent_before: Vec<String> = sent(&mut out);
        assert_eq!(sent_before.iter().filter(|x| *x == "R0").count(), 1);
        assert_eq!(s.state, CaState::Recovery);
        // 20 and 21 (limited transmit, sent at 101, 102) SACKed at 201, 202: sent
        // before R0, so R0 is not judged by them.
        s.on_ack(SimTime::from_millis(201), &ack(0, &[(1, 21)]), &mut out);
        s.on_ack(SimTime::from_millis(202), &ack(0, &[(1, 22)]), &mut out);
        assert!(!sent(&mut out).contains(&"R0".to_string()));
        s.on_ack(SimTime::from_millis(205), &ack(0, &[(1, 23)]), &mut out);
        assert_eq!(sent(&mut out).first().map(String::as_str), Some("R0"), "lost retransmission resent");
        assert_eq!(s.rto_count, 0);
        assert!(s.rto_deadline > SimTime::from_millis(205));
    }

    /// A path on which every transmission's ACK returns 100 ms after it left,
    /// unless `lost(seq, copy)` drops it (`copy` 0 is the original). The receiver
    /// ACKs every arrival: cumulative point plus up to three SACK blocks, highest
    /// first. Returns every transmission as (ms, "seq" or "Rseq").
    fn run_path(s: &mut TcpSender, until_ms: u64, lost: impl Fn(u64, u32) -> bool) -> Vec<(u64, String)> {
        use std::collections::{BTreeSet, HashMap};
        let rtt = SimDuration::from_millis(100);
        let (mut arrivals, mut got, mut copies) = (Vec::<(SimTime, u64)>::new(), BTreeSet::new(), HashMap::new());
        let (mut log, mut out) = (Vec::new(), Vec::new());
        let until = SimTime::from_millis(until_ms);
        loop {
            arrivals.sort_by(|a, b| b.cmp(a));
            let next_ack = arrivals.last().map_or(SimTime::MAX, |a| a.0);
            let t = next_ack.min(s.next_wakeup());
            if t > until {
                break;
            }
            if next_ack <= s.next_wakeup() {
                let (_, seq) = arrivals.pop().unwrap();
                got.insert(seq);
                let cum = (0..).find(|k| !got.contains(k)).unwrap();
                let mut ranges: Vec<(u64, u64)> = Vec::new();
                for &k in got.range(cum..) {
                    match ranges.last_mut() {
                        Some(r) if r.1 == k => r.1 = k + 1,
                        _ => ranges.push((k, k + 1)),
                    }
                }
                ranges.reverse();
                ranges.truncate(crate::packet::MAX_SACK_BLOCKS);
                s.on_ack(t, &ack(cum, &ranges), &mut out);
            } else {
                s.on_timer(t, &mut out);
            }
            for p in out.drain(..) {
                let n = copies.entry(p.seq).or_insert(0u32);
                let retx = p.flags & PF_RETX != 0;
                log.push((t.as_nanos() / 1_000_000, if retx { format!("R{}", p.seq) } else { p.seq.to_string() }));
                if !lost(p.seq, *n) {
                    arrivals.push((t + rtt, p.seq));
                }
                *n += 1;
            }
        }
        log
    }

    #[test]
    fn retransmitting_the_head_restarts_the_rto_as_linux_does() {
        // A window of 20 on a 100 ms path; segment 1 and its first three
        // retransmissions are dropped. By hand: 0..19 leave at 0 ms; 0's ACK at
        // 100 ms is the only cumulative advance (SRTT 100, RTTVAR 50, RTO =
        // 100 + max(4·50, 200) = 300 ms; the later SACK samples are 100 ms too), so
        // the timer counts from there to 400 ms. The SACKs of 2, 3, 4 (100 ms) make
        // 1 lost: R1 at 100 ms. RACK finds each copy lost one RTT later, when data
        // sent after it is SACKed: R1 again at 200, 300 and 400 ms. A timer still
        // counting from the 100 ms ACK fires at 400 ms, right after the fourth
        // copy, and resends the window. Linux restarts the timer whenever it
        // retransmits the head (`tcp_xmit_retransmit_queue`), so it runs to
        // 400 + 300 ms, and the fourth copy's ACK (500 ms) ends the repair first.
        let mut s = sender(20, true, false);
        let log = run_path(&mut s, 800, |seq, copy| seq == 1 && copy < 4);
        let r1: Vec<u64> = log.iter().filter(|(_, x)| x == "R1").map(|(t, _)| *t).collect();
        assert_eq!(r1, vec![100, 200, 300, 400], "{log:?}");
        assert_eq!(s.rto_count, 0, "{log:?}");
        assert!(s.snd_una > 20);
        // Nothing but segment 1 was ever resent.
        assert!(log.iter().all(|(_, x)| !x.starts_with('R') || x == "R1"), "{log:?}");
    }

    #[test]
    fn tail_loss_probe_repairs_a_tail_loss_without_an_rto() {
        // RFC 8985 §7: a 10-segment transfer whose last two segments are lost.
        // Segments 0..7 are acked at 100..107 ms. The last ACK arms the PTO at
        // 2·SRTT + 2 ms (two segments still out, §7.2), before the RTO. When it
        // fires with no new data to send, the probe is the last segment, 9
        // (§7.3). Its ACK (cum 8, SACK 9) makes 8 — sent at 0, before the probe
        // — lost by RACK (out ≥ RACK.rtt), so 8 is retransmitted: no RTO at all.
        let cfg = SenderConfig { total_segs: 10, ..test_config() };
        let mut s = TcpSender::new(cfg, Box::new(Halving { mss: MSS as u64, cwnd: 20, ssthresh: u64::MAX, prior: None }), 16);
        let mut out = Vec::new();
        s.on_timer(SimTime::ZERO, &mut out);
        assert_eq!(out.len(), 10);
        out.clear();
        for k in 1..=8u64 {
            s.on_ack(SimTime::from_millis(99 + k), &ack(k, &[]), &mut out);
        }
        assert!(out.is_empty());
        let srtt = s.rtt.srtt();
        let pto_at = SimTime::from_millis(107) + srtt + srtt + SimDuration::from_millis(2);
        assert_eq!(s.next_wakeup(), pto_at);
        assert!(pto_at < s.rto_deadline);
        s.on_timer(pto_at, &mut out);
        assert_eq!(sent(&mut out), vec!["R9".to_string()]);
        let t = pto_at + SimDuration::from_millis(100);
        s.on_ack(t, &ack(8, &[(9, 10)]), &mut out);
        assert_eq!(sent(&mut out), vec!["R8".to_string()]);
        assert_eq!(s.state, CaState::Recovery);
        s.on_ack(t + SimDuration::from_millis(100), &ack(10, &[]), &mut out);
        assert_eq!(s.finished_at, Some(t + SimDuration::from_millis(100)));
        assert_eq!(s.rto_count, 0);
    }

    #[test]
    fn dsack_of_every_retransmission_undoes_the_reduction() {
        // RFC 3708 §3 / Linux tcp_try_undo_dsack: segment 0 was only delayed.
        // SACKs of 1..3 (101..103 ms) start recovery (cwnd 20 → PRR towards 10)
        // and R0 goes at 103 ms. The original 0 then arrives and is ACKed (cum 22
        // covers the limited-transmit segments too); the retransmission arrives as a
        // duplicate and the receiver D-SACKs it. The one retransmission of the
        // episode is reported duplicate: spurious, the window of 20 comes back.
        let (mut s, mut out) = started(20);
        for seg in 1..4u64 {
            s.on_ack(SimTime::from_millis(100 + seg), &ack(0, &[(1, seg + 1)]), &mut out);
        }
        assert_eq!(s.state, CaState::Recovery);
        assert!(sent(&mut out).contains(&"R0".to_string()));
        s.on_ack(SimTime::from_millis(104), &ack(20, &[]), &mut out);
        assert_eq!(s.cc.cwnd(), 10 * MSS as u64, "reduced");
        let mut dup = ack(20, &[]);
        dup.set_dsack(0);
        s.on_ack(SimTime::from_millis(203), &dup, &mut out);
        assert_eq!((s.state, s.cwnd(), s.spurious_undos), (CaState::Open, 20 * MSS as u64, 1));
    }

    #[test]
    fn a_timeout_reduces_ssthresh_once_per_window_as_linux_enter_loss() {
        // Linux tcp_enter_loss. 20 segments out at 0 (window 20, TLP off). SACKs
        // of 1..3 start fast recovery: ssthresh 20/2 = 10, recovery point 20.
        // Nothing more arrives; the RTO (1 s, no RTT sample yet) fires inside
        // that recovery: cwnd 1, but ssthresh stays 10 (the window was already
        // reduced). The backed-off RTO fires again at 3 s with no progress:
        // still 10. Then R0's ACK moves snd_una to 4 (1..3 were SACKed; still
        // below the new recovery point 20), which clears the timeout count, and
        // the next RTO in Loss counts as a new episode: ssthresh = cwnd/2 of the
        // then window of 1 = 0 for this test controller (real ones floor at 2).
        let mut s = sender(20, true, false);
        s.cfg.tlp = false;
        let mut out = Vec::new();
        s.on_timer(SimTime::ZERO, &mut out);
        out.clear();
        for seg in 1..4u64 {
            s.on_ack(SimTime::from_millis(100 + seg), &ack(0, &[(1, seg + 1)]), &mut out);
        }
        assert_eq!((s.state, s.cc.ssthresh()), (CaState::Recovery, 10 * MSS as u64));
        let rto1 = s.rto_deadline;
        s.on_timer(rto1, &mut out);
        assert_eq!((s.state, s.cc.cwnd(), s.cc.ssthresh()), (CaState::Loss, MSS as u64, 10 * MSS as u64));
        let rto2 = s.rto_deadline;
        assert!(rto2 > rto1);
        s.on_timer(rto2, &mut out);
        assert_eq!((s.rto_count, s.cc.ssthresh()), (2, 10 * MSS as u64), "no progress: same episode");
        s.on_ack(rto2 + SimDuration::from_millis(100), &ack(4, &[]), &mut out);
        assert_eq!(s.state, CaState::Loss);
        let rto3 = s.rto_deadline;
        s.on_timer(rto3, &mut out);
        assert_eq!((s.rto_count, s.cc.ssthresh()), (3, 0), "progress since the last timeout: reduce again");
    }

    #[test]
    fn a_timeout_in_open_state_reduces_and_starts_frto() {
        // The Open-state case of the same rule: 10 segments out, no ACK, RTO at
        // 1 s: ssthresh 10/2 = 5 and F-RTO armed (RFC 5682 §3.1 step 1).
        let mut s = sender(10, true, false);
        s.cfg.tlp = false;
        let mut out = Vec::new();
        s.on_timer(SimTime::ZERO, &mut out);
        s.on_timer(SimTime::from_secs(1), &mut out);
        assert_eq!((s.state, s.cc.ssthresh(), s.frto), (CaState::Loss, 5 * MSS as u64, true));
    }

    #[test]
    fn frto_undoes_a_spurious_timeout() {
        // RFC 5682 §3.1: 10 segments out at 0, no RTT sample yet, so the RTO
        // fires at 1 s (RFC 6298 (2.1)) and retransmits 0 with cwnd 1. The ACK
        // that then arrives (cum 5) acknowledges never-retransmitted segments
        // 1..4, sent before the timeout: step 3b, the timeout was spurious. The
        // window of 10 comes back, the loss marks go, and 5..9 are NOT resent:
        // with 5 segments in flight, 5 new ones (10..14) go instead.
        // TLP off: without an RTT sample its probe would be due with the RTO
        // (and Linux would have the handshake's RTT); F-RTO alone is tested here.
        let mut s = sender(10, true, false);
        s.cfg.tlp = false;
        let mut out = Vec::new();
        s.on_timer(SimTime::ZERO, &mut out);
        out.clear();
        s.on_timer(SimTime::from_secs(1), &mut out);
        assert_eq!(sent(&mut out), vec!["R0".to_string()]);
        assert_eq!((s.state, s.cwnd()), (CaState::Loss, MSS as u64));
        s.on_ack(SimTime::from_millis(1050), &ack(5, &[]), &mut out);
        assert_eq!((s.state, s.cwnd(), s.spurious_undos), (CaState::Open, 10 * MSS as u64, 1));
        assert_eq!(sent(&mut out), ["10", "11", "12", "13", "14"]);
    }

    #[test]
    fn frto_falls_back_to_retransmission_when_the_loss_is_real() {
        // RFC 5682 §3.1: all 10 segments lost. RTO at 1 s → R0, cwnd 1. R0's ACK
        // (cum 1) advances snd_una: step 2b sends NEW data (10; one segment,
        // the test controller keeps cwnd at 1) instead of retransmitting 1.
        // 10's ACK is a duplicate ACK with a SACK: step 3a, the loss was real,
        // and the retransmissions continue with 1. No undo.
        // TLP off: without an RTT sample its probe would be due with the RTO
        // (and Linux would have the handshake's RTT); F-RTO alone is tested here.
        let mut s = sender(10, true, false);
        s.cfg.tlp = false;
        let mut out = Vec::new();
        s.on_timer(SimTime::ZERO, &mut out);
        out.clear();
        s.on_timer(SimTime::from_secs(1), &mut out);
        assert_eq!(sent(&mut out), vec!["R0".to_string()]);
        s.on_ack(SimTime::from_millis(1100), &ack(1, &[]), &mut out);
        assert_eq!(sent(&mut out), vec!["10".to_string()]);
        s.on_ack(SimTime::from_millis(1200), &ack(1, &[(10, 11)]), &mut out);
        assert_eq!(sent(&mut out), vec!["R1".to_string()]);
        assert_eq!((s.state, s.spurious_undos), (CaState::Loss, 0));
    }

    #[test]
    fn the_handshake_comes_first_and_gives_the_first_rtt_sample() {
        // RFC 9293 §3.5 and RFC 6298 (2.1)/(5.5): a SYN at the start, resent after
        // 1 s and then 2 s without an answer; data only after the SYN-ACK, whose
        // round trip from the last SYN is the first RTT sample (SRTT = R).
        let mut s = sender(10, true, false);
        s.cfg.handshake = true;
        let mut out = Vec::new();
        s.on_timer(SimTime::ZERO, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!((out[0].flags, out[0].len, out[0].meta.bytes), (PF_SYN, 0, 74));
        out.clear();
        assert_eq!(s.next_wakeup(), SimTime::from_secs(1));
        s.on_timer(SimTime::from_secs(1), &mut out);
        assert_eq!(out.drain(..).filter(|p| p.flags == PF_SYN).count(), 1, "SYN resent");
        assert_eq!(s.next_wakeup(), SimTime::from_secs(3));
        s.on_ack(SimTime::from_millis(1050), &Ack { flags: crate::packet::ACK_SYN, ..Ack::default() }, &mut out);
        assert_eq!(s.rtt.srtt(), SimDuration::from_millis(50));
        assert_eq!(sent(&mut out), (0..10).map(|k| k.to_string()).collect::<Vec<_>>(), "the initial window");
    }

    /// A controller whose window the test sets from outside, with ssthresh =
    /// FlightSize / 2 (RFC 5681 Eq. 4) on a congestion event.
    #[derive(Debug)]
    struct Scripted {
        cwnd: std::rc::Rc<std::cell::Cell<u64>>,
        ssthresh: u64,
    }

    impl CongestionControl for Scripted {
        fn name(&self) -> &'static str {
            "scripted"
        }
        fn cwnd(&self) -> u64 {
            self.cwnd.get()
        }
        fn ssthresh(&self) -> u64 {
            self.ssthresh
        }
        fn on_ack(&mut self, _ack: &AckSample) {}
        fn on_congestion_event(&mut self, ev: &CongestionEvent) {
            self.ssthresh = ev.in_flight / 2;
            self.cwnd.set(self.ssthresh);
        }
        fn on_rto(&mut self, _now: SimTime, _in_flight: u64, _episode: crate::cc::RtoEpisode) {}
    }

    #[test]
    fn prr_never_outpaces_delivery_when_the_flight_exceeds_cwnd() {
        // 20 segments out, then the controller's cwnd drops to 4 while they are
        // in flight (as after a NewReno recovery that could not see which
        // segments arrived), and its ssthresh is FlightSize/2. Segment 0 is lost;
        // SACKs of 1..3 start recovery with pipe 16: ssthresh = 16/2 = 8 > cwnd 4.
        // With Linux's prior_cwnd (4) as the divisor PRR would send 8/4 = 2
        // segments per delivered one; with RFC 6937's RecoverFS (the flight, 16)
        // it sends CEIL(8·k/16) after k ACKs while the pipe is above ssthresh:
        // after the 13 ACKs of SACKs 3..15, CEIL(104/16) = 7, fewer than delivered.
        let cwnd = std::rc::Rc::new(std::cell::Cell::new(20 * MSS as u64));
        let cfg = SenderConfig { tlp: false, ..test_config() };
        let mut s = TcpSender::new(cfg, Box::new(Scripted { cwnd: cwnd.clone(), ssthresh: u64::MAX }), 64);
        let mut out = Vec::new();
        s.on_timer(SimTime::ZERO, &mut out);
        out.clear();
        cwnd.set(4 * MSS as u64);
        let mut total = 0;
        for seg in 1..16u64 {
            s.on_ack(SimTime::from_millis(100 + seg), &ack(0, &[(1, seg + 1)]), &mut out);
            total += out.drain(..).count();
            if seg == 3 {
                assert_eq!(s.prr.map(|p| (p.prior_cwnd, p.ssthresh)), Some((16, 8)));
            }
        }
        assert_eq!(total, 7);
    }

    /// Departure times (ns) of a bulk sender pacing 1448-B segments at 11.584 Mb/s
    /// (1 ms each) in quanta of `quantum`, over `wakeups` timer wake-ups.
    fn paced_departures(quantum: u64, wakeups: usize) -> Vec<u64> {
        let cfg = SenderConfig { mss: 1448, last_seg_len: 1448, ..test_config() };
        let mut snd = TcpSender::new(cfg, Box::new(FixedPace(Bandwidth::from_bps(11_584_000), quantum)), 16);
        let mut out = Vec::new();
        let mut sent_at = Vec::new();
        let mut now = SimTime::ZERO;
        for _ in 0..wakeups {
            snd.on_timer(now, &mut out);
            sent_at.extend(out.drain(..).map(|_| now.as_nanos()));
            now = snd.next_wakeup().min(snd.pace_next);
        }
        sent_at
    }

    #[test]
    fn pacing_spaces_full_segments_by_their_payload_at_the_pacing_rate() {
        // The pacing rate is a payload rate, as Linux's `sk_pacing_rate` (charged
        // with `skb->len` in `tcp_update_skb_after_send`): 1448 B at 11.584 Mb/s
        // is exactly 1 ms, where the wire size (1500 B) would take 1.036 ms.
        let sent_at = paced_departures(1, 20);
        assert!(sent_at.len() >= 10, "sent {}", sent_at.len());
        for w in sent_at.windows(2) {
            assert_eq!(w[1] - w[0], 1_000_000, "departures at {sent_at:?}");
        }
    }

    #[test]
    fn a_paced_sender_releases_whole_gso_quanta_and_waits_their_length() {
        // Linux paces skbs, not segments: with a quantum of 4 segments at 1 ms per
        // segment, 4 segments leave together and the next 4 exactly 4 ms later.
        let sent_at = paced_departures(4, 6);
        assert!(sent_at.len() >= 16, "sent {}", sent_at.len());
        for (i, t) in sent_at.iter().enumerate() {
            assert_eq!(*t, (i as u64 / 4) * 4_000_000, "departures at {sent_at:?}");
        }
    }
}
