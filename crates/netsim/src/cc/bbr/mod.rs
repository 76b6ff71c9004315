//! BBR v1: Bottleneck Bandwidth and Round-trip propagation time.
//!
//! Read this first. Sources: Cardwell, Cheng, Gunn, Hassas Yeganeh, Jacobson,
//! "BBR: Congestion-Based Congestion Control", ACM Queue 14(5), 2016 (and CACM
//! 2017); draft-cardwell-iccrg-bbr-congestion-control-00 (2017); and for exact
//! semantics Linux `net/ipv4/tcp_bbr.c` (v1, as in kernel 6.18). Nothing here is
//! copied; the Linux function each piece mirrors is named in its doc comment.
//!
//! BBR builds a model of the path on every ACK and derives both knobs from it:
//!
//! - `bw` = windowed MAX of delivery-rate samples over 10 packet-timed rounds
//!   ([`min_max`], `model.rs`) — or, while a token-bucket policer is suspected,
//!   the long-term rate `lt_bw` (`lt_bw.rs`); `min_rtt` = lowest RTT, expiring
//!   after 10 s.
//! - `pacing_rate = pacing_gain · bw · (1 − 1%)` (`pacing.rs`).
//! - `cwnd = cwnd_gain · bw · min_rtt + extra_acked` (the ACK-aggregation
//!   allowance, `aggregation.rs`) + a quantization allowance (`cwnd.rs`).
//!
//! The gains come from a four-state machine:
//! STARTUP (2/ln2, `startup.rs`) → DRAIN (1/2.885) → PROBE_BW (gain cycle
//! [1.25, 0.75, 1 ×6], entered at a random phase, `probe_bw.rs`) ⇄ PROBE_RTT
//! (cwnd 4 packets for 200 ms when min_rtt has not been refreshed in 10 s,
//! `probe_rtt.rs`).
//!
//! Loss is NOT a congestion signal for BBR v1: there is no multiplicative
//! decrease. Each ACK takes the packets it newly marked lost off cwnd, the first
//! round of recovery uses packet conservation, and leaving recovery restores the
//! saved window (Linux `bbr_set_cwnd_to_recover_or_restore`, `cwnd.rs`). Heavy
//! loss at a steady delivery rate (a policer) switches the model to `lt_bw`.
//!
//! Units: like tcp_bbr.c, windows are kept in packets (segments of `mss` bytes)
//! and converted to bytes at the trait boundary (STYLE.md §4). Rates are
//! [`Bandwidth`] (bits/s) of PAYLOAD, as Linux's are (packets × MSS), and the
//! sender paces payload as Linux does. Times are [`SimTime`].
//!
//! What the sender provides, and what BBR derives from it:
//! - `AckSample::rate` (a tcp_rate.c-style sample, `prior_delivered` /
//!   `total_delivered` in bytes) on ACKs that deliver data; ACKs without a valid
//!   sample still drive the window but do not update the model.
//! - Linux's per-ACK `rs->losses` and cumulative `tp->lost` are not in
//!   `AckSample`; they follow from the sender's pipe accounting (a packet newly
//!   marked lost leaves the pipe without being delivered):
//!   `losses = prior_in_flight − in_flight − acked`, in packets, floored at 0.
//! - Linux's `CA_EVENT_TX_START` (a data packet sent with nothing in flight) is
//!   seen in `on_packet_sent`; `tp->app_limited` then is the last ACK's
//!   `app_limited` flag.
//! - Pacing at [`CongestionControl::pacing_rate`].
//!
//! Not modelled, for want of an input: Linux's estimate of the packets in the
//! network at the next earliest departure time (`bbr_packets_in_net_at_edt`;
//! netsim's sender has no EDT queue, so the flight now stands in), and
//! `rs->is_ack_delayed` (an expired min_rtt is replaced even by a delayed-ACK
//! sample). The sender does not say when RTO recovery ends; BBR takes the first
//! ACK it no longer flags as recovery.
//!
//! Validation against Linux 6.18 (docs/validation/live.md): CUBIC vs BBR, 100
//! Mbit/s, 50 ms, 1-BDP DropTail gives 9.8 / 84.7 Mbit/s here, 8.5 / 84.3 live.
//! When the sender still paced wire bytes (payload + 52) it gave 35 / 60: BBR
//! paced ~4.5 % below its own estimate, and in a shared FIFO that estimate (its
//! own delivery rate) sank to its share.

mod aggregation;
mod config;
mod cwnd;
mod lt_bw;
pub(crate) mod min_max;
mod model;
mod pacing;
mod probe_bw;
mod probe_rtt;
mod startup;
#[cfg(test)]
mod tests;

pub use config::BbrConfig;

use super::{AckSample, CcError, CcInit, CcMetrics, CongestionControl, CongestionEvent, CongestionSignal, Params, RtoEpisode};
use min_max::MinMax;
use netunits::{Bandwidth, SimDuration, SimTime};

/// Linux `TCP_INIT_CWND` (10 packets): BBR's BDP before any RTT sample, and the
/// delivery count below which it grows cwnd freely (`bbr_bdp`, `bbr_set_cwnd`) —
/// a constant there, whatever the flow's own initial window.
const TCP_INIT_CWND: u64 = 10;

/// BBR's operating mode (draft-00 "State machine").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Ramp up at 2/ln 2 until the bandwidth stops growing.
    Startup,
    /// Drain the queue STARTUP built.
    Drain,
    /// Steady state: cycle the pacing gain around 1.
    ProbeBw,
    /// Cut inflight to 4 packets to re-measure the propagation RTT.
    ProbeRtt,
}

impl Mode {
    /// Name used in traces.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Startup => "startup",
            Mode::Drain => "drain",
            Mode::ProbeBw => "probe_bw",
            Mode::ProbeRtt => "probe_rtt",
        }
    }
}

/// The sender's loss-recovery state as BBR sees it (Linux `icsk_ca_state`,
/// reduced to the three values `tcp_bbr.c` distinguishes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum CaState {
    /// No recovery in progress.
    Open,
    /// Fast recovery after a loss episode.
    Recovery,
    /// RTO recovery.
    Loss,
}

/// BBR v1 controller state.
#[derive(Clone, Debug)]
pub struct Bbr {
    cfg: BbrConfig,
    mss: u64,
    /// Congestion window, packets.
    cwnd: u64,
    /// Linux sets `snd_ssthresh` on entering DRAIN; it is only reported.
    ssthresh: Option<u64>,
    mode: Mode,

    // --- what Linux's TCP core keeps for BBR (account_delivery) ---
    /// Total bytes delivered on the connection (Linux `tp->delivered`, in bytes).
    delivered: u64,
    /// The same in packets (Linux `tp->delivered`), for the long-term sampler.
    delivered_pkts: u64,
    /// Time of the latest delivery (Linux `tp->delivered_mstamp`).
    delivered_stamp: SimTime,
    /// Packets marked lost so far (Linux `tp->lost`).
    lost_pkts: u64,
    /// Packets newly marked lost by the current ACK (Linux `rs->losses`).
    rs_losses: u64,
    /// The current ACK's rate sample is application-limited (Linux
    /// `rs->is_app_limited`, including PROBE_RTT's marking); set by `update_bw`.
    rs_app_limited: bool,
    /// The last ACK found the sender application-limited (stands in for Linux
    /// `tp->app_limited` at `CA_EVENT_TX_START`).
    last_ack_app_limited: bool,

    // --- path model (model.rs) ---
    /// Max filter of delivery rate in bit/s, keyed by round count.
    bw: MinMax,
    /// Packet-timed rounds elapsed.
    round_count: u64,
    /// Delivered bytes that mark the end of the current round.
    next_round_delivered: u64,
    /// This ACK started a new round.
    round_start: bool,
    /// Lowest RTT in the current window, and when it was taken.
    min_rtt: Option<(SimDuration, SimTime)>,

    // --- startup (startup.rs) ---
    full_bw: Bandwidth,
    full_bw_count: u32,
    full_bw_reached: bool,

    // --- probe_bw (probe_bw.rs) ---
    cycle_idx: usize,
    cycle_stamp: SimTime,
    /// PROBE_BW entries so far (one input of the random phase draw).
    probe_bw_entries: u64,

    // --- long-term bandwidth / policer detection (lt_bw.rs) ---
    lt: lt_bw::LtBw,

    // --- ACK aggregation (aggregation.rs) ---
    aggr: aggregation::AckAggregation,

    // --- probe_rtt (probe_rtt.rs) ---
    probe_rtt_done: Option<SimTime>,
    probe_rtt_round_done: bool,
    idle_restart: bool,
    /// Rate samples of packets sent before the connection's delivered count
    /// passes this mark are treated as application-limited (Linux sets
    /// `tp->app_limited` in PROBE_RTT for the same purpose).
    app_limited_until: Option<u64>,

    // --- gains and pacing (pacing.rs) ---
    pacing_gain: f64,
    cwnd_gain: f64,
    /// Linux's `sk_pacing_rate`: payload rate.
    pacing_rate: Bandwidth,
    has_seen_rtt: bool,

    // --- recovery (cwnd.rs) ---
    ca_state: CaState,
    prev_ca_state: CaState,
    packet_conservation: bool,
    /// cwnd (packets) saved on entering recovery or PROBE_RTT.
    prior_cwnd: u64,
}

impl Bbr {
    /// A BBR controller starting in STARTUP with the initial window.
    pub fn new(cfg: BbrConfig, init: &CcInit) -> Self {
        let mss = init.mss.max(1);
        let init_cwnd = init.initial_cwnd_segments.max(1);
        let mut b = Bbr {
            cfg,
            mss,
            cwnd: init_cwnd,
            ssthresh: None,
            mode: Mode::Startup,
            delivered: 0,
            delivered_pkts: 0,
            delivered_stamp: SimTime::ZERO,
            lost_pkts: 0,
            rs_losses: 0,
            rs_app_limited: false,
            last_ack_app_limited: false,
            bw: MinMax::new(0, 0),
            round_count: 0,
            next_round_delivered: 0,
            round_start: false,
            min_rtt: None,
            full_bw: Bandwidth::from_bps(0),
            full_bw_count: 0,
            full_bw_reached: false,
            cycle_idx: 0,
            cycle_stamp: SimTime::ZERO,
            probe_bw_entries: 0,
            lt: lt_bw::LtBw::default(),
            aggr: aggregation::AckAggregation::default(),
            probe_rtt_done: None,
            probe_rtt_round_done: false,
            idle_restart: false,
            app_limited_until: None,
            pacing_gain: cfg.high_gain,
            cwnd_gain: cfg.high_gain,
            pacing_rate: Bandwidth::from_bps(0),
            has_seen_rtt: false,
            ca_state: CaState::Open,
            prev_ca_state: CaState::Open,
            packet_conservation: false,
            prior_cwnd: 0,
        };
        b.init_pacing_rate(None);
        b
    }

    /// Name-table constructor.
    pub fn build(p: &Params, init: &CcInit) -> Result<Box<dyn CongestionControl>, CcError> {
        Ok(Box::new(Bbr::new(BbrConfig::from_params(p)?, init)))
    }

    /// Current mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Current bottleneck-bandwidth estimate: the max filter's output (Linux
    /// `bbr_max_bw`).
    pub fn btl_bw(&self) -> Bandwidth {
        Bandwidth::from_bps(self.bw.get())
    }

    /// The bandwidth the model steers by: the long-term rate while a policer is
    /// suspected, else the max filter (Linux `bbr_bw`).
    pub fn bw(&self) -> Bandwidth {
        self.lt.bw_in_use().unwrap_or_else(|| self.btl_bw())
    }

    /// Is the long-term (policed) rate in use (Linux `lt_use_bw`)?
    pub fn lt_bw_in_use(&self) -> bool {
        self.lt.bw_in_use().is_some()
    }

    /// The ACK-aggregation allowance the cwnd target now includes, packets
    /// (Linux `bbr_ack_aggregation_cwnd`).
    pub fn extra_acked_cwnd(&self) -> u64 {
        self.ack_aggregation_cwnd()
    }

    /// Current propagation-RTT estimate.
    pub fn min_rtt(&self) -> Option<SimDuration> {
        self.min_rtt.map(|(r, _)| r)
    }

    /// Current pacing gain.
    pub fn pacing_gain(&self) -> f64 {
        self.pacing_gain
    }

    /// Linux's `sk_pacing_rate`: the PAYLOAD rate BBR paces at (the sender paces
    /// payload, as Linux does).
    pub fn payload_pacing_rate(&self) -> Bandwidth {
        self.pacing_rate
    }

    /// Current PROBE_BW phase index (meaningful in PROBE_BW only).
    pub fn cycle_index(&self) -> usize {
        self.cycle_idx
    }

    /// Bytes to packets, rounding up (a partial packet still occupies a slot).
    fn pkts(&self, bytes: u64) -> u64 {
        bytes.div_ceil(self.mss)
    }

    /// What Linux's TCP core has done before it calls `bbr_main`: count the
    /// delivery (`tp->delivered`, `tp->delivered_mstamp`) and the packets this
    /// ACK marked lost (`rs->losses`, added to `tp->lost`). The latter come from
    /// the sender's pipe: every packet that left it was either delivered
    /// (`acked_segments`) or newly marked lost. A late arrival of a packet
    /// already marked lost is delivered without leaving the pipe, which can only
    /// make the difference smaller, hence the floor at 0.
    fn account_delivery(&mut self, ack: &AckSample) {
        let acked = ack.acked_segments as u64;
        self.delivered += ack.acked_bytes;
        if let Some(rs) = ack.rate {
            self.delivered = self.delivered.max(rs.total_delivered);
        }
        self.delivered_pkts += acked;
        if ack.acked_bytes > 0 {
            self.delivered_stamp = ack.now;
        }
        self.rs_losses = (ack.prior_in_flight / self.mss).saturating_sub(ack.in_flight / self.mss + acked);
        self.lost_pkts += self.rs_losses;
        // Linux's `tp->app_limited`, which BBR's own PROBE_RTT mark also sets.
        self.last_ack_app_limited = ack.conn_app_limited || self.app_limited_until.is_some();
    }

    /// The per-ACK model update, in `bbr_update_model`'s order.
    fn update_model(&mut self, ack: &AckSample) {
        self.update_bw(ack);
        self.update_ack_aggregation(ack);
        self.update_cycle_phase(ack);
        self.check_full_bw_reached();
        self.check_drain(ack);
        self.update_min_rtt(ack);
        self.update_gains();
    }

    /// Set pacing and cwnd gains for the mode (Linux `bbr_update_gains`).
    fn update_gains(&mut self) {
        let (p, c) = match self.mode {
            Mode::Startup => (self.cfg.high_gain, self.cfg.high_gain),
            // DRAIN keeps STARTUP's cwnd gain: only the pacing rate drains.
            Mode::Drain => (self.cfg.drain_gain(), self.cfg.high_gain),
            // No gain cycling while the long-term (policed) rate is in use.
            Mode::ProbeBw if self.lt_bw_in_use() => (1.0, self.cfg.cwnd_gain),
            Mode::ProbeBw => (config::PACING_GAIN_CYCLE[self.cycle_idx], self.cfg.cwnd_gain),
            Mode::ProbeRtt => (1.0, 1.0),
        };
        self.pacing_gain = p;
        self.cwnd_gain = c;
    }

    /// Leave PROBE_RTT (or restart): back to STARTUP if the pipe was never
    /// filled, else PROBE_BW at a fresh random phase (Linux `bbr_reset_mode`).
    fn reset_mode(&mut self, now: SimTime) {
        if self.full_bw_reached {
            self.reset_probe_bw_mode(now);
        } else {
            self.mode = Mode::Startup;
        }
    }
}

impl CongestionControl for Bbr {
    fn name(&self) -> &'static str {
        "bbr"
    }

    fn cwnd(&self) -> u64 {
        self.cwnd * self.mss
    }

    fn ssthresh(&self) -> u64 {
        self.ssthresh.map_or(u64::MAX, |s| s * self.mss)
    }

    /// Linux `bbr_main`: update the model, then pacing rate, then cwnd.
    fn on_ack(&mut self, ack: &AckSample) {
        // RTO recovery ends when the sender stops reporting recovery (fairlab's
        // sender may not call `on_recovery_exit` after an RTO).
        if self.ca_state == CaState::Loss && !ack.in_recovery {
            self.ca_state = CaState::Open;
        }
        self.account_delivery(ack);
        self.update_model(ack);
        let bw = self.bw();
        self.set_pacing_rate(ack, bw, self.pacing_gain);
        self.set_cwnd(ack, bw, self.cwnd_gain);
    }

    /// Linux `bbr_ssthresh`: save the window; no multiplicative decrease. ECN is
    /// ignored by BBR v1 beyond that (Linux enters CWR, which BBR's
    /// `cong_control` path does not act on).
    ///
    /// On the ACK that starts recovery Linux sets `cwnd = packets_in_flight +
    /// acked` (`bbr_set_cwnd_to_recover_or_restore`, which `set_cwnd` does on the
    /// same ACK). The flight part is applied here already: without SACK the
    /// sender enters recovery on a duplicate ACK that delivers nothing and so
    /// reaches no `on_ack`, and the unused window must not burst out meanwhile.
    fn on_congestion_event(&mut self, ev: &CongestionEvent) {
        self.save_cwnd();
        if ev.signal == CongestionSignal::Ecn {
            return;
        }
        self.ca_state = CaState::Recovery;
        let flight = self.pkts(ev.in_flight).max(1);
        self.cwnd = self.cwnd.min(flight);
    }

    fn on_recovery_exit(&mut self, _now: SimTime) {
        self.ca_state = CaState::Open;
    }

    /// Linux BBR has `cong_control`: packet conservation, not PRR, in recovery.
    fn sets_recovery_window(&self) -> bool {
        true
    }

    /// Linux `tcp_enter_loss` → `bbr_ssthresh` (save cwnd), then
    /// `bbr_set_state(TCP_CA_Loss)`: forget `full_bw`, treat the RTO as the end
    /// of a round, and run the long-term sampler with one loss (the core has just
    /// marked everything not SACKed — `in_flight` — lost, `tcp_timeout_mark_lost`).
    /// The core then sets cwnd to 1 packet, from which `set_cwnd` slow-starts back.
    fn on_rto(&mut self, _now: SimTime, in_flight: u64, episode: RtoEpisode) {
        // `bbr_ssthresh` (the op, for a new episode only) saves the window.
        if episode == RtoEpisode::New {
            self.save_cwnd();
        }
        self.ca_state = CaState::Loss;
        self.prev_ca_state = CaState::Loss;
        self.full_bw = Bandwidth::from_bps(0);
        self.round_start = true;
        self.lost_pkts += self.pkts(in_flight);
        self.lt_bw_sampling(1, false);
        self.cwnd = 1;
    }

    /// Linux `bbr_undo_cwnd`: the slow-down was spurious, so reset full-pipe
    /// detection and long-term sampling; the core then leaves recovery, and the
    /// saved window comes back (`bbr_set_cwnd_to_recover_or_restore`).
    fn on_spurious_loss(&mut self, _now: SimTime) {
        self.full_bw = Bandwidth::from_bps(0);
        self.full_bw_count = 0;
        self.reset_lt_bw_sampling();
        self.ca_state = CaState::Open;
        self.packet_conservation = false;
        self.cwnd = self.cwnd.max(self.prior_cwnd);
        self.prev_ca_state = CaState::Open;
    }

    /// Linux `bbr_cwnd_event(CA_EVENT_TX_START)` with `tp->app_limited`: a
    /// restart from idle. Start a new ACK-aggregation epoch; in PROBE_BW pace at
    /// 1.0·bw rather than re-probing into an empty pipe; in PROBE_RTT, see
    /// whether the probe is done.
    fn on_idle_restart(&mut self, now: SimTime) {
        self.idle_restart = true;
        self.aggr.restart_epoch(now);
        match self.mode {
            Mode::ProbeBw => self.set_pacing_rate_gain(self.bw(), 1.0),
            Mode::ProbeRtt => self.check_probe_rtt_done(now),
            _ => {}
        }
    }

    /// Linux `tcp_event_data_sent` raises `CA_EVENT_TX_START` when a data packet
    /// goes out with nothing in flight; BBR acts on it only when the sender was
    /// application-limited (so not, e.g., when retransmitting after an RTO).
    fn on_packet_sent(&mut self, now: SimTime, bytes: u64, in_flight: u64) {
        if crate::cc::starts_transmission(bytes, in_flight, self.mss) && self.last_ack_app_limited {
            self.on_idle_restart(now);
        }
    }

    /// Linux's `sk_pacing_rate`, a payload rate: the sender charges each
    /// packet's payload against it, as Linux charges `skb->len` (`pacing.rs`).
    fn pacing_rate(&self) -> Option<Bandwidth> {
        Some(self.payload_pacing_rate())
    }

    fn send_quantum(&self) -> u64 {
        // Linux `tcp_tso_segs` with BBR's `min_tso_segs` hook: what
        // `bbr_tso_segs_goal` computes for the quantization budget.
        self.tso_segs_goal()
    }

    fn metrics(&self) -> CcMetrics {
        // The pacing rate reported is Linux's `sk_pacing_rate` (payload).
        CcMetrics { cwnd: self.cwnd(), ssthresh: self.ssthresh(), pacing_rate: Some(self.pacing_rate), phase: self.mode.name() }
    }
}
