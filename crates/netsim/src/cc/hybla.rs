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
//! Both are counted per ACK, not per acknowledged segment, as Linux does (so a
//! delayed-ACK receiver halves them). The arithmetic is Linux 6.1's fixed point
//! (`hybla_cong_avoid`, `hybla_recalc_param`), because its rounding is large
//! at the windows of a 100 Mbit/s path:
//!
//! - ρ is kept in eighths, rounded down: ρ·8 = ⌊8·SRTT/RTT0⌋, at least 8.
//! - Slow start adds (2^⌊ρ⌋·F[ρ·8 mod 8] − 128)/128 with Linux's table
//!   F = 128·2^(k/8) rounded down, 2^⌊ρ⌋ capped at 2^16.
//! - Congestion avoidance adds ⌊128·ρ²/W⌋/128: the fraction is rounded down
//!   to 1/128 of a segment, so at ρ = 4 a window above 1024 segments gets
//!   +1/128 per ACK (W/128 per RTT, not 16), and above 2048 the increment is 0.
//!   Then Linux falls back to Reno's +1 per W ACKs (`snd_cwnd_cnt`).
//! - The leftover 1/128ths (`snd_cwnd_cents`) carry across losses.
//!
//! Loss: Reno's halving (Linux `tcp_reno_ssthresh`). Outside the Open state
//! (recovery) Linux falls back to Reno; recovery holds the window still here
//! anyway.
//!
//! After an RTO, Linux grows by Reno's slow start (+1 per acknowledged segment)
//! until the data outstanding at the timeout is acknowledged: `hybla_en` is off
//! outside the Open state, and CA_Loss lasts until `high_seq`. Here that is the
//! bytes in flight at the RTO, counted down by the ACKs.
//!
//! Deviation: Linux's `hybla_init` starts the window at ⌊ρ⌋ from the
//! handshake's RTT; the initial window here is the sender's (`CcInit`), because
//! the controller has no RTT before the first ACK.

use super::segwin::{undo_to_saved, SegWindow};
use super::{AckSample, CcError, CcInit, CcMetrics, CongestionControl, CongestionEvent, ParamReader, Params, RtoEpisode};
use netunits::{SimDuration, SimTime};

/// Largest window, segments (Linux `hybla_init`: `snd_cwnd_clamp = 65535`).
pub const CWND_CLAMP: u32 = 65535;

/// Linux `hybla_fraction`: 2^(k/8) in 1/128ths, rounded down, for k = 0..7.
const FRACTION_2_POW_K_OVER_8: [u32; 8] = [128, 139, 152, 165, 181, 197, 215, 234];

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
    /// ρ in eighths (Linux `rho_3ls`), at least 8.
    rho_8ths: u32,
    min_srtt: Option<SimDuration>,
    /// Fractional segments not yet added, in 1/128ths (Linux `snd_cwnd_cents`).
    cents: u32,
    /// Bytes still to be acknowledged before CA_Loss ends after an RTO (0: Open).
    loss_left: u64,
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
        Hybla { cfg, s: State { w: SegWindow::new(init), rho_8ths: 8, min_srtt: None, cents: 0, loss_left: 0 }, undo: None }
    }

    /// Name-table constructor.
    pub fn build(p: &Params, init: &CcInit) -> Result<Box<dyn CongestionControl>, CcError> {
        Ok(Box::new(Hybla::new(HyblaConfig::from_params(p)?, init)))
    }

    /// ρ = max(RTT_min/RTT0, 1), in Linux's eighths.
    pub fn rho(&self) -> f64 {
        self.s.rho_8ths as f64 / 8.0
    }

    /// The per-ACK increment in 1/128 segment (Linux `increment`).
    fn increment(&self, slow_start: bool) -> u32 {
        let rho8 = self.s.rho_8ths;
        let (rho, frac) = (rho8 >> 3, rho8 & 7);
        if slow_start {
            (1u32 << rho.min(16)) * FRACTION_2_POW_K_OVER_8[frac as usize] - 128
        } else {
            // ρ² in 1/128ths is (8ρ)²·2; divided by the window, rounded down.
            ((rho8 as u64 * rho8 as u64 * 2) / self.s.w.cwnd.max(1) as u64) as u32
        }
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
            let eighths = 8 * ack.srtt.as_nanos() as u128 / self.cfg.rtt0.as_nanos().max(1) as u128;
            self.s.rho_8ths = eighths.clamp(8, u32::MAX as u128 / 4) as u32;
        }
        if ack.in_recovery {
            return;
        }
        self.s.w.in_recovery = false;
        let in_loss = self.s.loss_left > 0;
        self.s.loss_left = self.s.loss_left.saturating_sub(ack.acked_bytes);
        if ack.app_limited {
            return;
        }
        if in_loss {
            // CA_Loss: hybla_en is off, Linux uses tcp_reno_cong_avoid.
            self.s.w.reno_cong_avoid(ack.acked_segments);
            return;
        }
        let slow = self.s.w.in_slow_start();
        let inc = self.increment(slow);
        let w = &mut self.s.w;
        if !slow && inc < 128 {
            w.cnt = w.cnt.saturating_add(1);
        }
        w.cwnd = w.cwnd.saturating_add(inc >> 7);
        self.s.cents += inc % 128;
        while self.s.cents >= 128 {
            w.cwnd = w.cwnd.saturating_add(1);
            self.s.cents -= 128;
            w.cnt = 0;
        }
        // No fraction at all (W > 128·ρ²): Reno's +1 per window of ACKs.
        if inc == 0 && w.cnt >= w.cwnd {
            w.cwnd += 1;
            w.cnt = 0;
        }
        if slow {
            w.cwnd = w.cwnd.min(w.ssthresh);
        }
        // Linux `hybla_init` clamps the window at 65535 segments: with ρ = 24 one
        // slow-start ACK alone would add 2^16·1.x.
        w.cwnd = w.cwnd.min(CWND_CLAMP);
    }

    fn on_congestion_event(&mut self, _ev: &CongestionEvent) {
        self.undo = Some(self.s);
        let ss = self.s.w.cwnd / 2;
        self.s.w.enter_recovery(ss);
    }

    fn on_recovery_exit(&mut self, _now: SimTime) {
        self.s.w.in_recovery = false;
    }

    fn on_rto(&mut self, _now: SimTime, in_flight: u64, episode: RtoEpisode) {
        let ss = episode.ssthresh(self.s.w.ssthresh, || {
            self.undo = Some(self.s);
            self.s.w.cwnd / 2
        });
        self.s.w.enter_loss(ss);
        self.s.loss_left = in_flight.max(1);
    }

    fn on_spurious_loss(&mut self, _now: SimTime) {
        if let Some(cur) = undo_to_saved(&mut self.s, &mut self.undo, |s| &mut s.w) {
            // What was measured about the path since the reduction stays: an undo
            // takes back a window decision, not what was learnt.
            self.s.rho_8ths = cur.rho_8ths;
            self.s.min_srtt = cur.min_srtt;
            self.s.cents = cur.cents;
            self.s.loss_left = 0;
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
    use super::super::testkit::{ack_sample, init, params, Harness};
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
            c.on_ack(&ack_sample(SimTime::from_millis(1), 1, SimDuration::from_millis(rtt), 1000));
            assert!((c.rho() - rho).abs() < 1e-9, "RTT {rtt} ms: ρ = {}", c.rho());
        }
    }

    /// A Hybla in congestion avoidance at window `w` segments with SRTT `srtt_us`.
    fn in_ca(srtt_us: u64, w: u32) -> Hybla {
        let mut c = Hybla::new(HyblaConfig::default(), &init(10));
        c.s.w.cwnd = w;
        c.s.w.ssthresh = w;
        let srtt = SimDuration::from_micros(srtt_us);
        c.on_ack(&ack_at(srtt, false));
        c.s.w.cwnd = w; // forget the first ACK's growth
        c.s.w.cnt = 0;
        c.s.cents = 0;
        c
    }

    fn ack_at(srtt: SimDuration, app_limited: bool) -> AckSample {
        AckSample { app_limited, ..ack_sample(SimTime::from_millis(1), 1, srtt, 1000) }
    }

    /// ACKs (one segment each) until the window first grows.
    fn acks_to_grow(c: &mut Hybla) -> u32 {
        let (w0, srtt) = (c.s.w.cwnd, c.s.min_srtt.unwrap());
        for n in 1..100_000 {
            c.on_ack(&ack_at(srtt, false));
            if c.s.w.cwnd > w0 {
                assert_eq!(c.s.w.cwnd, w0 + 1, "one segment at a time");
                return n;
            }
        }
        panic!("never grew");
    }

    #[test]
    fn congestion_avoidance_rounds_rho_squared_over_w_down_to_128ths() {
        // Linux hybla_cong_avoid at SRTT 100 ms: ρ·8 = 32, ρ² in 1/128ths =
        // 32²·2 = 2048, and each ACK adds ⌊2048/W⌋/128 of a segment.
        // W = 200: ⌊2048/200⌋ = 10 → +1 once 13 ACKs have added 130/128.
        assert_eq!(acks_to_grow(&mut in_ca(100_000, 200)), 13);
        // W = 1000: 2 per ACK → 64 ACKs (the paper's ρ²/W would need 62.5).
        assert_eq!(acks_to_grow(&mut in_ca(100_000, 1000)), 64);
        // W = 1500: 1 per ACK → 128 ACKs, i.e. +11.7 per RTT instead of ρ² = 16.
        assert_eq!(acks_to_grow(&mut in_ca(100_000, 1500)), 128);
        // W = 3000: ⌊2048/3000⌋ = 0 → Reno's +1 once W ACKs are counted.
        assert_eq!(acks_to_grow(&mut in_ca(100_000, 3000)), 3000);
        // SRTT 110 ms: ρ·8 = ⌊8·110/25⌋ = 35, 35²·2 = 2450; W = 1000 → 2 per ACK,
        // the same 64 ACKs as at 100 ms (the exact ρ² = 19.4 would need 51.6).
        assert_eq!(acks_to_grow(&mut in_ca(110_000, 1000)), 64);
    }

    #[test]
    fn slow_start_uses_the_eighths_table() {
        // SRTT 37.5 ms: ρ·8 = 12, so ⌊ρ⌋ = 1 and k = 4: the increment is
        // 2·181 − 128 = 234/128 per ACK (2^1.5 − 1 = 1.83 exactly): +1 and 106
        // left, then +1 and 212 → +1 more and 84 left.
        let mut c = Hybla::new(HyblaConfig::default(), &init(2));
        let srtt = SimDuration::from_micros(37_500);
        c.on_ack(&ack_at(srtt, false));
        assert_eq!((c.s.w.cwnd, c.s.cents), (3, 106));
        c.on_ack(&ack_at(srtt, false));
        assert_eq!((c.s.w.cwnd, c.s.cents), (5, 84));
        assert_eq!(c.rho(), 1.5);
    }

    #[test]
    fn after_an_rto_reno_slow_start_until_the_flight_is_acknowledged() {
        // SRTT 100 ms (ρ = 4: Hybla's slow start adds 15 per ACK). RTO with 5
        // segments in flight: cwnd 1, ssthresh 100; the next 5 one-segment ACKs
        // are CA_Loss, +1 each (tcp_reno_cong_avoid), then Hybla's +15.
        let mut c = in_ca(100_000, 200);
        c.on_rto(SimTime::from_secs(1), 5000, crate::cc::RtoEpisode::New);
        assert_eq!((c.s.w.cwnd, c.s.w.ssthresh), (1, 100));
        for k in 1..=5 {
            c.on_ack(&ack_at(SimDuration::from_millis(100), false));
            assert_eq!(c.s.w.cwnd, 1 + k);
        }
        c.on_ack(&ack_at(SimDuration::from_millis(100), false));
        assert_eq!(c.s.w.cwnd, 6 + 15);
    }

    #[test]
    fn an_application_limited_ack_does_not_grow() {
        let mut c = in_ca(100_000, 200);
        c.on_ack(&ack_at(SimDuration::from_millis(100), true));
        assert_eq!((c.s.w.cwnd, c.s.cents), (200, 0));
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
