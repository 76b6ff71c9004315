//! TCP Hybla (Caini & Firrincieli, "TCP Hybla: a TCP enhancement for
//! heterogeneous networks", Int. J. Satellite Communications and Networking 22,
//! 2004; Linux `net/ipv4/tcp_hybla.c`).
//!
//! Read this first: Hybla removes Reno's dependence on RTT by making a long-RTT
//! flow grow, per second, like a reference flow with RTT0 = 25 ms. With the
//! normalised RTT ρ = RTT/RTT0 (at least 1; Linux uses the smallest smoothed RTT
//! seen), each ACK adds (paper §3, Eq. 6):
//!
//! - slow start: 2^ρ − 1 segments (so the window grows 2^ρ-fold per RTT),
//! - congestion avoidance: ρ²/W segments (so +ρ² segments per RTT).
//!
//! Both are counted per ACK, as in Linux, with the fractional part carried in an
//! accumulator (Linux `snd_cwnd_cents`, ×128; ours is f64 so 2^ρ is exact rather
//! than Linux's 1/8-step table). Loss: Reno's halving (Linux `tcp_reno_ssthresh`).
//! Outside the Open state (recovery) Linux falls back to Reno; recovery holds the
//! window still here anyway.
//!
//! Deviation: Linux's `hybla_init` starts the window at ρ (after setting it to 2);
//! the initial window here is the sender's (`CcInit`), because the controller has
//! no RTT before the first ACK.

use super::segwin::{undo_to_saved, SegWindow};
use super::{AckSample, CcError, CcInit, CcMetrics, CongestionControl, CongestionEvent, ParamReader, Params};
use netunits::{SimDuration, SimTime};

/// Largest window, segments (Linux `hybla_init`: `snd_cwnd_clamp = 65535`).
pub const CWND_CLAMP: u32 = 65535;

/// Hybla's parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HyblaConfig {
    /// RTT0, the reference RTT (paper and Linux `rtt0`: 25 ms).
    pub rtt0: SimDuration,
}

impl Default for HyblaConfig {
    fn default() -> Self {
        HyblaConfig { rtt0: SimDuration::from_millis(25) }
    }
}

impl HyblaConfig {
    /// Parameter line for `fairlab list ccas`.
    pub const PARAMS: &'static str = "rtt0_ms = 25 (reference RTT in ms)";

    /// Read and validate from scenario parameters.
    pub fn from_params(p: &Params) -> Result<Self, CcError> {
        let mut r = ParamReader::new("hybla", p);
        let ms = r.f64("rtt0_ms", 25.0, 0.1, 10_000.0, "milliseconds in [0.1, 10000] (Caini & Firrincieli: 25)")?;
        r.finish()?;
        Ok(HyblaConfig { rtt0: SimDuration::from_secs_f64(ms / 1000.0) })
    }
}

#[derive(Clone, Copy, Debug)]
struct State {
    w: SegWindow,
    rho: f64,
    min_srtt: Option<SimDuration>,
    /// Fractional segments not yet added.
    cents: f64,
}

/// TCP Hybla.
#[derive(Clone, Debug)]
pub struct Hybla {
    cfg: HyblaConfig,
    s: State,
    undo: Option<State>,
}

impl Hybla {
    /// A Hybla controller.
    pub fn new(cfg: HyblaConfig, init: &CcInit) -> Self {
        Hybla { cfg, s: State { w: SegWindow::new(init), rho: 1.0, min_srtt: None, cents: 0.0 }, undo: None }
    }

    /// Name-table constructor.
    pub fn build(p: &Params, init: &CcInit) -> Result<Box<dyn CongestionControl>, CcError> {
        Ok(Box::new(Hybla::new(HyblaConfig::from_params(p)?, init)))
    }

    /// ρ = max(RTT_min/RTT0, 1).
    pub fn rho(&self) -> f64 {
        self.s.rho
    }
}

impl CongestionControl for Hybla {
    fn name(&self) -> &'static str {
        "hybla"
    }

    fn cwnd(&self) -> u64 {
        self.s.w.cwnd_bytes()
    }

    fn ssthresh(&self) -> u64 {
        self.s.w.ssthresh_bytes()
    }

    fn on_ack(&mut self, ack: &AckSample) {
        if ack.acked_segments == 0 {
            return;
        }
        // ρ from the smallest smoothed RTT seen (Linux `hybla_recalc_param`).
        if ack.srtt > SimDuration::ZERO && self.s.min_srtt.is_none_or(|m| ack.srtt < m) {
            self.s.min_srtt = Some(ack.srtt);
            self.s.rho = (ack.srtt.as_secs_f64() / self.cfg.rtt0.as_secs_f64()).max(1.0);
        }
        if ack.in_recovery {
            return;
        }
        self.s.w.in_recovery = false;
        if ack.app_limited {
            return;
        }
        let rho = self.s.rho;
        let w = &mut self.s.w;
        let slow = w.in_slow_start();
        let inc = if slow { rho.exp2() - 1.0 } else { rho * rho / w.cwnd as f64 };
        self.s.cents += inc;
        // (The epsilon keeps k additions of 1/k from landing just below 1.)
        let whole = (self.s.cents + 1e-9).floor();
        self.s.cents -= whole;
        // Linux `hybla_init` clamps the window at 65535 segments: with ρ = 24 one
        // slow-start ACK alone would add 2^24 − 1.
        w.cwnd = (w.cwnd as f64 + whole).min(CWND_CLAMP as f64) as u32;
        if slow && w.cwnd > w.ssthresh {
            w.cwnd = w.ssthresh;
        }
    }

    fn on_congestion_event(&mut self, _ev: &CongestionEvent) {
        self.undo = Some(self.s);
        let ss = self.s.w.cwnd / 2;
        self.s.w.enter_recovery(ss);
        self.s.cents = 0.0;
    }

    fn on_recovery_exit(&mut self, _now: SimTime) {
        self.s.w.in_recovery = false;
    }

    fn on_rto(&mut self, _now: SimTime, _in_flight: u64) {
        self.undo = Some(self.s);
        let ss = self.s.w.cwnd / 2;
        self.s.w.enter_loss(ss);
        self.s.cents = 0.0;
    }

    fn on_spurious_loss(&mut self, _now: SimTime) {
        if let Some(cur) = undo_to_saved(&mut self.s, &mut self.undo, |s| &mut s.w) {
            // What was measured about the path since the reduction stays: an undo
            // takes back a window decision, not what was learnt.
            self.s.rho = cur.rho;
            self.s.min_srtt = cur.min_srtt;
        }
    }

    fn on_idle_restart(&mut self, _now: SimTime) {
        self.s.w.idle_restart();
    }

    fn metrics(&self) -> CcMetrics {
        self.s.w.metrics("congestion_avoidance")
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{init, params, Harness};
    use super::*;

    fn hybla(rtt_ms: u64) -> Harness {
        Harness::new(Hybla::build(&params("{}"), &init(2)).unwrap(), SimDuration::from_millis(rtt_ms))
    }

    #[test]
    fn slow_start_multiplies_by_two_to_the_rho_per_rtt() {
        // RTT 50 ms → ρ = 2: each ACK adds 3, so a round of W ACKs makes 4W.
        let mut h = hybla(50);
        h.ack(1); // learn ρ (and add 2^ρ − 1 = 3)
        assert_eq!(h.cwnd_segs(), 5);
        h.round();
        assert_eq!(h.cwnd_segs(), 20);
        h.round();
        assert_eq!(h.cwnd_segs(), 80);
    }

    #[test]
    fn rho_is_rtt_over_25ms_but_at_least_one() {
        for (rtt, rho) in [(10u64, 1.0), (25, 1.0), (100, 4.0), (600, 24.0)] {
            let mut c = Hybla::new(HyblaConfig::default(), &init(2));
            c.on_ack(&AckSample {
                now: SimTime::from_millis(1),
                acked_bytes: 1000,
                acked_segments: 1,
                rtt: Some(SimDuration::from_millis(rtt)),
                srtt: SimDuration::from_millis(rtt),
                min_rtt: SimDuration::from_millis(rtt),
                prior_in_flight: 2000,
                in_flight: 1000,
                app_limited: false,
                in_recovery: false,
                rate: None,
            });
            assert!((c.rho() - rho).abs() < 1e-9, "RTT {rtt} ms: ρ = {}", c.rho());
        }
    }

    #[test]
    fn congestion_avoidance_adds_rho_squared_per_rtt() {
        // RTT 100 ms → ρ = 4 → +16 segments per RTT (ρ²/W on each of W ACKs; the
        // window rising within the round costs ρ²·ρ²/(2W) ≈ 0.1 here).
        let mut h = hybla(100);
        h.grow_to(2000);
        h.loss_and_recover();
        for k in 1..=5 {
            let w = h.cwnd_segs();
            h.round();
            let step = h.cwnd_segs() as i64 - w as i64;
            assert!((step - 16).abs() <= 1, "round {k}: step {step}");
        }
    }

    #[test]
    fn sending_rate_grows_at_the_same_pace_at_any_rtt() {
        // Rate W/RTT grows by ρ²/RTT per RTT = 1/RTT0² segments/s per second,
        // whatever the RTT (the point of Hybla).
        let mut per_s2 = Vec::new();
        for rtt in [50u64, 200] {
            let mut h = hybla(rtt);
            h.grow_to(4000);
            h.loss_and_recover();
            let r = h.rtt.as_secs_f64();
            let (w0, t0) = (h.cwnd_segs() as f64, h.now);
            for _ in 0..(2000 / rtt) {
                h.round();
            }
            let dt = (h.now - t0).as_secs_f64();
            per_s2.push((h.cwnd_segs() as f64 - w0) / r / dt);
        }
        let expect = 1.0 / (0.025f64 * 0.025);
        for g in &per_s2 {
            assert!((g - expect).abs() <= 0.05 * expect, "rate growth {g:.0} seg/s² vs {expect:.0}");
        }
    }

    #[test]
    fn slow_start_at_huge_rho_stops_at_the_linux_clamp() {
        let mut h = hybla(600); // ρ = 24
        h.ack(1);
        assert_eq!(h.cwnd_segs(), CWND_CLAMP as u64);
    }

    #[test]
    fn loss_halves() {
        let mut h = hybla(100);
        h.grow_to(100);
        let w = h.cwnd_segs();
        h.loss();
        assert_eq!(h.cwnd_segs(), w / 2);
    }

    #[test]
    fn bad_params_name_the_parameter() {
        match Hybla::build(&params(r#"{"rtt0_ms": 0}"#), &init(10)).unwrap_err() {
            CcError::BadParam { param, .. } => assert_eq!(param, "rtt0_ms"),
            e => panic!("{e}"),
        }
    }
}
