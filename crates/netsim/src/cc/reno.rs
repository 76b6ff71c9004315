//! Reno / NewReno window management (RFC 5681, RFC 3465, RFC 6675).
//!
//! Read this first: this is the byte-counting Reno of the RFCs, not Linux's
//! segment-counting `tcp_reno_cong_avoid`. With SACK loss recovery in the sender
//! (RFC 6675) it is what the seeds and most papers call NewReno/SACK.
//!
//! - Slow start (RFC 5681 §3.1, Eq. 2 with RFC 3465 §2.2 ABC): each ACK adds
//!   `min(acked, L·SMSS)` with L = 2, never past ssthresh; bytes left over when
//!   ssthresh is reached count towards congestion avoidance.
//! - Congestion avoidance (RFC 5681 §3.1, RFC 3465 §2.1): a byte counter collects
//!   acknowledged bytes; each time it reaches cwnd, cwnd grows by one SMSS, i.e.
//!   +1 SMSS per window of data acknowledged.
//! - Loss episode (Linux `tcp_reno_ssthresh`): ssthresh = max(cwnd/2, 2·SMSS),
//!   cwnd = ssthresh. The sender calls us once per episode; ACKs during
//!   recovery (`ack.in_recovery`) never grow the window. RFC 5681 Eq. 4 halves
//!   FlightSize instead; the two differ when cwnd is above what is in flight — a
//!   sender held by the receive window, whose cwnd Linux keeps growing in slow
//!   start up to twice what is outstanding (`tcp_is_cwnd_limited`). On the vm
//!   backend such a Reno (Illinois vs Reno, 100 ms, 2.5 MB window) left slow start
//!   with ssthresh 1,014 from a cwnd of ~2,028 while at most 1,726 segments were
//!   out; FlightSize/2 had given 859 (docs/validation/vm.md).
//! - RTO (Linux `tcp_enter_loss`): ssthresh as above, cwnd = 1 SMSS (the loss window).
//! - Idle restart (RFC 5681 §4.1): cwnd = min(cwnd, RW), RW = min(IW, cwnd).
//! - Spurious undo (RFC 3522 / Linux `tcp_undo_cwnd_reduction`): cwnd and
//!   ssthresh go back to at least their pre-reduction values.
//! - Like Linux (`tcp_is_cwnd_limited`) and RFC 7661's spirit, an ACK from an
//!   application-limited sender does not grow the window.
//!
//! Against Linux 6.1's `tcp_reno_cong_avoid` / `tcp_reno_ssthresh` (audited
//! hook by hook): the congestion-avoidance increase is the same (+1 segment
//! per cwnd of acknowledged segments, counted per segment, not per ACK; a
//! stretch ACK that covers more than a window earns only one segment here where
//! `tcp_cong_avoid_ai` credits ⌊acked/cwnd⌋). A deliberate difference,
//! invisible with full-sized segments and ACKs of at most two segments: slow
//! start counts at most L = 2 segments per ACK (RFC 3465; Linux counts all).
//! The delay-based modules' Reno parts use Linux's own arithmetic
//! (`seg_reno.rs`).

use super::{AckSample, CcError, CcInit, CcMetrics, CongestionControl, CongestionEvent, ParamReader, Params, RtoEpisode};
use netunits::SimTime;

/// Reno's parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RenoConfig {
    /// Appropriate Byte Counting limit L in slow start, in segments. RFC 3465 §2.2:
    /// "L = 2*SMSS bytes" is the RECOMMENDED limit; L = 1 is RFC 5681's Eq. 2.
    pub abc_limit_segments: u64,
}

impl Default for RenoConfig {
    /// RFC 3465 §2.2: L = 2·SMSS.
    fn default() -> Self {
        RenoConfig { abc_limit_segments: 2 }
    }
}

impl RenoConfig {
    /// Parameter line for `fairlab list ccas`.
    pub const PARAMS: &'static str = "abc_l = 2 (RFC 3465 slow-start byte-counting limit, 1 or 2 segments)";

    /// Read and validate from scenario parameters.
    pub fn from_params(p: &Params) -> Result<Self, CcError> {
        let mut r = ParamReader::new("reno", p);
        let abc = r.u64("abc_l", 2, 1, 2, "an integer 1 or 2 (RFC 3465 §2.2: L must not exceed 2 segments)")?;
        r.finish()?;
        Ok(RenoConfig { abc_limit_segments: abc })
    }
}

/// Reno state, in bytes.
#[derive(Clone, Debug)]
pub struct Reno {
    cfg: RenoConfig,
    mss: u64,
    iw: u64,
    cwnd: u64,
    ssthresh: u64,
    /// RFC 3465 §2.1 byte counter for congestion avoidance.
    bytes_acked: u64,
    /// (cwnd, ssthresh) before the last reduction, for spurious-loss undo.
    prior: Option<(u64, u64)>,
}

impl Reno {
    /// A Reno controller with `cfg`, starting at the initial window with an
    /// infinite ssthresh (RFC 5681 §3.1: "arbitrarily high").
    pub fn new(cfg: RenoConfig, init: &CcInit) -> Self {
        let mss = init.mss.max(1);
        let iw = init.initial_cwnd_segments.max(1) * mss;
        Reno { cfg, mss, iw, cwnd: iw, ssthresh: u64::MAX, bytes_acked: 0, prior: None }
    }

    /// Name-table constructor.
    pub fn build(p: &Params, init: &CcInit) -> Result<Box<dyn CongestionControl>, CcError> {
        Ok(Box::new(Reno::new(RenoConfig::from_params(p)?, init)))
    }

    /// Linux `tcp_reno_ssthresh`: half the window, at least two segments.
    fn halved(&self) -> u64 {
        (self.cwnd / 2).max(2 * self.mss)
    }
}

impl CongestionControl for Reno {
    fn name(&self) -> &'static str {
        "reno"
    }

    fn cwnd(&self) -> u64 {
        self.cwnd
    }

    fn ssthresh(&self) -> u64 {
        self.ssthresh
    }

    fn on_ack(&mut self, ack: &AckSample) {
        if ack.in_recovery || ack.app_limited || ack.acked_bytes == 0 {
            return;
        }
        let mut acked = ack.acked_bytes;
        if self.cwnd < self.ssthresh {
            // RFC 3465 §2.2: count at most L·SMSS per ACK, and stop at ssthresh;
            // the counted bytes past ssthresh are congestion-avoidance credit.
            let counted = acked.min(self.cfg.abc_limit_segments * self.mss);
            let inc = counted.min(self.ssthresh - self.cwnd);
            self.cwnd += inc;
            if self.cwnd < self.ssthresh {
                return;
            }
            acked = counted - inc;
        }
        // RFC 3465 §2.1 / RFC 5681 §3.1: +1 SMSS each time a full cwnd is acked.
        self.bytes_acked += acked;
        if self.bytes_acked >= self.cwnd {
            self.bytes_acked -= self.cwnd;
            self.cwnd += self.mss;
        }
    }

    fn on_congestion_event(&mut self, _ev: &CongestionEvent) {
        self.prior = Some((self.cwnd, self.ssthresh));
        self.ssthresh = self.halved();
        self.cwnd = self.ssthresh;
        self.bytes_acked = 0;
    }

    fn on_rto(&mut self, _now: SimTime, _in_flight: u64, episode: RtoEpisode) {
        if episode == RtoEpisode::New {
            self.prior = Some((self.cwnd, self.ssthresh));
            self.ssthresh = self.halved();
        }
        self.cwnd = self.mss;
        self.bytes_acked = 0;
    }

    fn on_spurious_loss(&mut self, _now: SimTime) {
        if let Some((c, s)) = self.prior.take() {
            self.cwnd = self.cwnd.max(c);
            self.ssthresh = if s == u64::MAX { s } else { self.ssthresh.max(s) };
        }
    }

    fn on_idle_restart(&mut self, _now: SimTime) {
        self.cwnd = self.cwnd.min(self.iw);
        self.bytes_acked = 0;
    }

    fn metrics(&self) -> CcMetrics {
        CcMetrics {
            cwnd: self.cwnd,
            ssthresh: self.ssthresh,
            pacing_rate: None,
            phase: if self.cwnd < self.ssthresh { "slow_start" } else { "congestion_avoidance" },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{init, params, Harness, MSS};
    use super::super::CongestionSignal;
    use super::*;
    use netunits::SimDuration;

    fn reno(iw: u64) -> Harness {
        Harness::new(Reno::build(&params("{}"), &init(iw)).unwrap(), SimDuration::from_millis(100))
    }

    #[test]
    fn starts_at_initial_window_with_infinite_ssthresh() {
        let h = reno(10);
        assert_eq!(h.cc.cwnd(), 10 * MSS);
        assert_eq!(h.cc.ssthresh(), u64::MAX);
        assert_eq!(h.cc.metrics().phase, "slow_start");
    }

    #[test]
    fn slow_start_doubles_per_rtt_with_one_segment_acks() {
        let mut h = reno(10);
        for k in 1..=5u64 {
            h.round();
            assert_eq!(h.cwnd_segs(), 10 << k);
        }
    }

    #[test]
    fn abc_limits_slow_start_to_two_segments_per_ack() {
        // RFC 3465 §2.2: an ACK for 4 segments adds only L = 2.
        let mut h = reno(10);
        h.ack(4);
        assert_eq!(h.cc.cwnd(), 12 * MSS);
        let mut h1 = Harness::new(Reno::build(&params(r#"{"abc_l": 1}"#), &init(10)).unwrap(), h.rtt);
        h1.ack(4);
        assert_eq!(h1.cc.cwnd(), 11 * MSS);
    }

    #[test]
    fn congestion_avoidance_adds_one_mss_per_rtt() {
        let mut h = reno(10);
        h.grow_to(40);
        h.loss_and_recover();
        let w0 = h.cwnd_segs();
        assert_eq!(h.cc.cwnd(), h.cc.ssthresh());
        for k in 1..=10 {
            h.round();
            assert_eq!(h.cwnd_segs(), w0 + k, "after {k} rounds");
        }
        assert_eq!(h.cc.metrics().phase, "congestion_avoidance");
    }

    #[test]
    fn loss_sets_ssthresh_to_half_the_window_once_per_episode() {
        let mut h = reno(10);
        h.grow_to(64);
        let flight = h.cc.cwnd();
        h.loss();
        assert_eq!(h.cc.ssthresh(), flight / 2);
        assert_eq!(h.cc.cwnd(), flight / 2);
        // ACKs during recovery leave the window alone.
        for _ in 0..100 {
            h.ack(1);
        }
        assert_eq!(h.cc.cwnd(), flight / 2);
        h.exit_recovery();
        assert_eq!(h.cc.cwnd(), flight / 2);
    }

    #[test]
    fn loss_halves_the_window_not_the_flight_as_linux() {
        // A sender held by the receive window: cwnd 2,028 segments, 1,726 in
        // flight (the vm trace of Illinois vs Reno). Linux's tcp_reno_ssthresh
        // gives 1,014; RFC 5681's FlightSize/2 would give 863.
        let mut h = reno(10);
        h.grow_to(2028);
        let ev = CongestionEvent {
            now: h.now,
            signal: CongestionSignal::Loss,
            in_flight: 1726 * MSS,
            srtt: h.rtt,
            min_rtt: h.min_rtt,
        };
        h.cc.on_congestion_event(&ev);
        assert_eq!(h.cc.ssthresh(), 1014 * MSS);
        assert_eq!(h.cc.cwnd(), 1014 * MSS);
        // An RTO likewise halves the window, whatever is in flight.
        let mut r = reno(10);
        r.grow_to(100);
        r.cc.on_rto(r.now, 10 * MSS, crate::cc::RtoEpisode::New);
        assert_eq!((r.cc.ssthresh(), r.cc.cwnd()), (50 * MSS, MSS));
    }

    #[test]
    fn ssthresh_floor_is_two_segments() {
        let mut h = reno(1);
        h.loss();
        assert_eq!(h.cc.ssthresh(), 2 * MSS);
    }

    #[test]
    fn rto_collapses_to_one_segment_then_slow_starts_to_ssthresh() {
        let mut h = reno(10);
        h.grow_to(40);
        let flight = h.cc.cwnd();
        h.cc.on_rto(h.now, flight, crate::cc::RtoEpisode::New);
        assert_eq!(h.cc.cwnd(), MSS);
        assert_eq!(h.cc.ssthresh(), flight / 2);
        // Slow start (doubling) up to ssthresh, then linear.
        h.round();
        assert_eq!(h.cwnd_segs(), 2);
        h.grow_to(flight / 2 / MSS);
        assert_eq!(h.cc.cwnd(), flight / 2);
    }

    #[test]
    fn spurious_loss_restores_prior_window() {
        let mut h = reno(10);
        h.grow_to(30);
        let (c, s) = (h.cc.cwnd(), h.cc.ssthresh());
        h.loss();
        h.cc.on_spurious_loss(h.now);
        assert_eq!((h.cc.cwnd(), h.cc.ssthresh()), (c, s));
    }

    #[test]
    fn app_limited_acks_do_not_grow() {
        let mut h = reno(10);
        h.app_limited = true;
        h.round();
        assert_eq!(h.cwnd_segs(), 10);
    }

    #[test]
    fn idle_restart_returns_to_initial_window() {
        let mut h = reno(10);
        h.grow_to(50);
        h.cc.on_idle_restart(h.now);
        assert_eq!(h.cwnd_segs(), 10);
    }

    #[test]
    fn bad_params_are_refused_with_their_name() {
        let e = Reno::build(&params(r#"{"abc_l": 3}"#), &init(10)).unwrap_err();
        assert!(matches!(e, CcError::BadParam { param: "abc_l", .. }), "{e}");
        let e = Reno::build(&params(r#"{"beta": 0.5}"#), &init(10)).unwrap_err();
        assert!(e.to_string().contains("beta"), "{e}");
    }
}
