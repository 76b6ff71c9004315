//! BBR v1: Bottleneck Bandwidth and Round-trip propagation time.
//!
//! Read this first. Sources: Cardwell, Cheng, Gunn, Hassas Yeganeh, Jacobson,
//! "BBR: Congestion-Based Congestion Control", ACM Queue 14(5), 2016 (and CACM
//! 2017); draft-cardwell-iccrg-bbr-congestion-control-00 (2017); and for exact
//! semantics Linux `net/ipv4/tcp_bbr.c` (v1). Nothing here is copied; the Linux
//! function each piece mirrors is named in its doc comment.
//!
//! BBR builds a model of the path on every ACK and derives both knobs from it:
//!
//! - `btl_bw` = windowed MAX of delivery-rate samples over 10 packet-timed rounds
//!   ([`min_max`], `model.rs`); `min_rtt` = lowest RTT, expiring after 10 s.
//! - `pacing_rate = pacing_gain · btl_bw · (1 − 1%)` (`pacing.rs`).
//! - `cwnd = cwnd_gain · btl_bw · min_rtt` + a quantization allowance (`cwnd.rs`).
//!
//! The gains come from a four-state machine:
//! STARTUP (2/ln2, `startup.rs`) → DRAIN (1/2.885) → PROBE_BW (gain cycle
//! [1.25, 0.75, 1 ×6], `probe_bw.rs`) ⇄ PROBE_RTT (cwnd 4 packets for 200 ms
//! when min_rtt has not been refreshed in 10 s, `probe_rtt.rs`).
//!
//! Loss is NOT a congestion signal for BBR v1: `on_congestion_event` only saves
//! the window and enters packet conservation for the first round of recovery, as
//! Linux `bbr_set_cwnd_to_recover_or_restore` does (`cwnd.rs`).
//!
//! Units: like tcp_bbr.c, windows are kept in packets (segments of `mss` bytes)
//! and converted to bytes at the trait boundary (STYLE.md §4). Rates are
//! [`Bandwidth`] (bits/s), times [`SimTime`].
//!
//! What the sender must provide: `AckSample::rate` (a tcp_rate.c-style sample,
//! `prior_delivered`/`total_delivered` in bytes) on every ACK that delivers data,
//! and pacing at [`CongestionControl::pacing_rate`]. ACKs without a rate sample
//! still drive the window but do not update the model.
//!
//! Deliberately left out of this v1:
//! Linux's long-term "policer" bandwidth (`lt_bw`, added in 4.10), the ACK
//! aggregation allowance (`extra_acked`, added in 5.1) and the per-ACK loss
//! deduction `cwnd -= rs->losses` (fairlab's `AckSample` carries no per-ACK loss
//! count). PROBE_BW's starting phase is a parameter, not random (config.rs).

mod config;
mod cwnd;
pub(crate) mod min_max;
mod model;
mod pacing;
mod probe_bw;
mod probe_rtt;
mod startup;
#[cfg(test)]
mod tests;

pub use config::BbrConfig;

use super::{AckSample, CcError, CcInit, CcMetrics, CongestionControl, CongestionEvent, CongestionSignal, Params};
use min_max::MinMax;
use netunits::{Bandwidth, SimDuration, SimTime};

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
    /// Initial window in packets (also Linux's `TCP_INIT_CWND` role in `bbr_bdp`).
    init_cwnd: u64,
    /// Congestion window, packets.
    cwnd: u64,
    /// Linux sets `snd_ssthresh` on entering DRAIN; it is only reported.
    ssthresh: Option<u64>,
    mode: Mode,

    // --- path model (model.rs) ---
    /// Max filter of delivery rate in bit/s, keyed by round count.
    bw: MinMax,
    /// Packet-timed rounds elapsed.
    round_count: u64,
    /// Delivered bytes that mark the end of the current round.
    next_round_delivered: u64,
    /// This ACK started a new round.
    round_start: bool,
    /// Total bytes delivered on the connection (latest rate sample).
    delivered: u64,
    /// Lowest RTT in the current window, and when it was taken.
    min_rtt: Option<(SimDuration, SimTime)>,

    // --- startup (startup.rs) ---
    full_bw: Bandwidth,
    full_bw_count: u32,
    full_bw_reached: bool,

    // --- probe_bw (probe_bw.rs) ---
    cycle_idx: usize,
    cycle_stamp: SimTime,
    /// A loss episode began during this gain phase (stands in for Linux's
    /// `rs->losses` in `bbr_is_next_cycle_phase`).
    loss_in_phase: bool,

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
            init_cwnd,
            cwnd: init_cwnd,
            ssthresh: None,
            mode: Mode::Startup,
            bw: MinMax::new(0, 0),
            round_count: 0,
            next_round_delivered: 0,
            round_start: false,
            delivered: 0,
            min_rtt: None,
            full_bw: Bandwidth::from_bps(0),
            full_bw_count: 0,
            full_bw_reached: false,
            cycle_idx: 0,
            cycle_stamp: SimTime::ZERO,
            loss_in_phase: false,
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

    /// Current bottleneck-bandwidth estimate (the max filter's output).
    pub fn btl_bw(&self) -> Bandwidth {
        Bandwidth::from_bps(self.bw.get())
    }

    /// Current propagation-RTT estimate.
    pub fn min_rtt(&self) -> Option<SimDuration> {
        self.min_rtt.map(|(r, _)| r)
    }

    /// Current pacing gain.
    pub fn pacing_gain(&self) -> f64 {
        self.pacing_gain
    }

    /// Current PROBE_BW phase index (meaningful in PROBE_BW only).
    pub fn cycle_index(&self) -> usize {
        self.cycle_idx
    }

    /// Bytes to packets, rounding up (a partial packet still occupies a slot).
    fn pkts(&self, bytes: u64) -> u64 {
        bytes.div_ceil(self.mss)
    }

    /// The per-ACK model update, in `bbr_update_model`'s order.
    fn update_model(&mut self, ack: &AckSample) {
        self.update_bw(ack);
        self.update_cycle_phase(ack);
        self.check_full_bw_reached(ack);
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
            Mode::ProbeBw => (config::PACING_GAIN_CYCLE[self.cycle_idx], self.cfg.cwnd_gain),
            Mode::ProbeRtt => (1.0, 1.0),
        };
        self.pacing_gain = p;
        self.cwnd_gain = c;
    }

    /// Leave PROBE_RTT (or restart): back to STARTUP if the pipe was never
    /// filled, else PROBE_BW (Linux `bbr_reset_mode`).
    fn reset_mode(&mut self, now: SimTime) {
        if self.full_bw_reached {
            self.enter_probe_bw(now);
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
        self.update_model(ack);
        let bw = self.btl_bw();
        self.set_pacing_rate(ack, bw, self.pacing_gain);
        self.set_cwnd(ack, bw, self.cwnd_gain);
    }

    /// Linux `bbr_ssthresh` + the first-ACK part of
    /// `bbr_set_cwnd_to_recover_or_restore`: save the window, start packet
    /// conservation. No multiplicative decrease. ECN is ignored by BBR v1 (Linux
    /// enters CWR, which BBR's `cong_control` path does not act on) beyond saving
    /// the window.
    fn on_congestion_event(&mut self, ev: &CongestionEvent) {
        self.save_cwnd();
        if ev.signal == CongestionSignal::Ecn {
            return;
        }
        self.loss_in_phase = true;
        self.ca_state = CaState::Recovery;
        // Linux does `cwnd = packets_in_flight + acked` on the next ACK (which
        // `set_cwnd` still does); doing the flight part now keeps the sender from
        // bursting out the unused window before that ACK is processed.
        let flight = self.pkts(ev.in_flight).max(1);
        self.cwnd = self.cwnd.min(flight);
    }

    fn on_recovery_exit(&mut self, _now: SimTime) {
        self.ca_state = CaState::Open;
    }

    /// Linux `tcp_enter_loss` → `bbr_ssthresh` (save cwnd), `bbr_set_state(Loss)`
    /// (forget `full_bw`, treat the RTO as the end of a round); the TCP core then
    /// sets cwnd to 1 packet, from which `set_cwnd` slow-starts back.
    fn on_rto(&mut self, _now: SimTime, _in_flight: u64) {
        self.save_cwnd();
        self.ca_state = CaState::Loss;
        self.prev_ca_state = CaState::Loss;
        self.full_bw = Bandwidth::from_bps(0);
        self.round_start = true;
        self.packet_conservation = false;
        self.cwnd = 1;
    }

    /// Linux `bbr_undo_cwnd` resets full-pipe detection (the slow-down was
    /// spurious); the core then leaves recovery, which restores `prior_cwnd`.
    fn on_spurious_loss(&mut self, _now: SimTime) {
        self.full_bw = Bandwidth::from_bps(0);
        self.full_bw_count = 0;
        self.ca_state = CaState::Open;
        self.packet_conservation = false;
        self.cwnd = self.cwnd.max(self.prior_cwnd);
        self.prev_ca_state = CaState::Open;
    }

    /// Linux `bbr_cwnd_event(CA_EVENT_TX_START)` on an app-limited restart: pace at
    /// 1.0·btl_bw in PROBE_BW rather than re-probing into an empty pipe.
    fn on_idle_restart(&mut self, now: SimTime) {
        self.idle_restart = true;
        match self.mode {
            Mode::ProbeBw => {
                let r = self.rate_with_gain(self.btl_bw(), 1.0);
                if r.as_bps() > 0 {
                    self.pacing_rate = r;
                }
            }
            Mode::ProbeRtt => self.check_probe_rtt_done(now),
            _ => {}
        }
    }

    fn pacing_rate(&self) -> Option<Bandwidth> {
        Some(self.pacing_rate)
    }

    fn metrics(&self) -> CcMetrics {
        CcMetrics { cwnd: self.cwnd(), ssthresh: self.ssthresh(), pacing_rate: Some(self.pacing_rate), phase: self.mode.name() }
    }
}
