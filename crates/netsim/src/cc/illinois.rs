//! TCP-Illinois (Liu, Başar & Srikant, "TCP-Illinois: A loss- and delay-based
//! congestion control algorithm for high-speed networks", VALUETOOLS 2006 /
//! Performance Evaluation 65, 2008; Linux `net/ipv4/tcp_illinois.c`).
//!
//! Read this first: loss decides *when* to back off, queueing delay decides *how
//! much* to grow and to back off. Once per RTT the average queueing delay
//! d_a = avg RTT − base RTT and its maximum d_m = max RTT − base RTT set
//! (paper §3, Eqs. 2–3; Linux `alpha()`, `beta()`):
//!
//! - α (increase, segments per RTT): α_max = 10 while d_a ≤ d_1 = d_m/100, else
//!   κ1/(κ2 + d_a) with α(d_1) = α_max and α(d_m) = α_min = 0.3. After delay has
//!   been high, α returns to α_max only after θ = 5 consecutive low-delay RTTs.
//! - β (decrease): β_min = 1/8 while d_a ≤ d_2 = d_m/10, β_max = 1/2 from
//!   d_3 = 8·d_m/10, linear in between.
//! - Below `win_thresh` = 15 segments Illinois is Reno (α = 1, β = 1/2).
//! - Each ACK adds α/W (counted per acknowledged segment as Linux does); a loss
//!   leaves (1 − β)·W. An RTO resets α = 1, β = 1/2 (Linux `tcp_illinois_state`).
//!
//! Arithmetic is Linux 6.1's: RTTs in whole µs, α in 1/128 (α_min = ⌊0.3·128⌋
//! = 38, i.e. 0.297) and β in 1/64, each rounded down as `alpha()` and
//! `beta()` compute them; the increase counts the segments the ACK's cumulative
//! point passed (`ca->acked` = `pkts_acked`, SACKed ones included: the ACK that
//! ends a recovery counts the whole window behind the last hole), and a slow-start ACK's leftover beyond ssthresh is dropped
//! (`tcp_slow_start`'s return value is ignored). Linux updates α and β in
//! `cong_avoid` only, so a round that ends during recovery is judged on the
//! first ACK after it. The round boundary is [`RoundTracker`] rather than
//! `end_seq`. [`IllinoisConfig::alpha_curve`] and
//! [`IllinoisConfig::beta_curve`] are the paper's real-valued curves.

use super::segwin::{undo_to_saved, RoundTracker, SegWindow};
use super::{AckSample, CcError, CcInit, CcMetrics, CongestionControl, CongestionEvent, ParamReader, Params, RtoEpisode};
use netunits::{SimDuration, SimTime};

/// TCP-Illinois parameters (defaults: the paper and Linux).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IllinoisConfig {
    /// α_max (10).
    pub alpha_max: f64,
    /// α_min (0.3).
    pub alpha_min: f64,
    /// β_min (0.125).
    pub beta_min: f64,
    /// β_max (0.5).
    pub beta_max: f64,
    /// Reno below this window (Linux `win_thresh` = 15).
    pub win_thresh: u32,
    /// Low-delay RTTs before α returns to α_max (Linux `theta` = 5).
    pub theta: u32,
}

impl Default for IllinoisConfig {
    fn default() -> Self {
        IllinoisConfig { alpha_max: 10.0, alpha_min: 0.3, beta_min: 0.125, beta_max: 0.5, win_thresh: 15, theta: 5 }
    }
}

impl IllinoisConfig {
    /// Parameter line for `fairlab list ccas`.
    pub const PARAMS: &'static str = "alpha_max = 10, alpha_min = 0.3, beta_min = 0.125, beta_max = 0.5, win_thresh = 15, theta = 5";

    /// Read and validate from scenario parameters.
    pub fn from_params(p: &Params) -> Result<Self, CcError> {
        let mut r = ParamReader::new("illinois", p);
        let alpha_max = r.f64("alpha_max", 10.0, 0.01, 1000.0, "a number in [0.01, 1000], above alpha_min (10)")?;
        let alpha_min = r.f64("alpha_min", 0.3, 0.01, 1000.0, "a number in [0.01, 1000], below alpha_max (0.3)")?;
        let beta_min = r.f64("beta_min", 0.125, 0.0, 0.95, "a number in [0, 0.95], at most beta_max (0.125)")?;
        let beta_max = r.f64("beta_max", 0.5, 0.0, 0.95, "a number in [0, 0.95], at least beta_min (0.5)")?;
        let win_thresh = r.u64("win_thresh", 15, 0, 1 << 20, "an integer in [0, 1048576] segments (15)")?;
        let theta = r.u64("theta", 5, 1, 1000, "an integer in [1, 1000] RTTs (5)")?;
        r.finish()?;
        if alpha_min >= alpha_max {
            return Err(CcError::BadParam { cca: "illinois", param: "alpha_min", value: alpha_min.to_string(), allowed: "a number in [0.01, 1000], below alpha_max (0.3)" });
        }
        if beta_min > beta_max {
            return Err(CcError::BadParam { cca: "illinois", param: "beta_min", value: beta_min.to_string(), allowed: "a number in [0, 0.95], at most beta_max (0.125)" });
        }
        Ok(IllinoisConfig { alpha_max, alpha_min, beta_min, beta_max, win_thresh: win_thresh as u32, theta: theta as u32 })
    }

    /// Paper Eq. 2 / Linux `alpha()` without the θ hysteresis: α for average
    /// queueing delay `da` and maximum `dm` (any unit).
    pub fn alpha_curve(&self, da: f64, dm: f64) -> f64 {
        let d1 = dm / 100.0;
        if da <= d1 {
            return self.alpha_max;
        }
        // κ1/(κ2 + da) through (d1, α_max) and (dm, α_min), written relative to d1.
        let (dm, da) = (dm - d1, da - d1);
        dm * self.alpha_max / (dm + da * (self.alpha_max - self.alpha_min) / self.alpha_min)
    }

    /// Paper Eq. 3 / Linux `beta()`.
    pub fn beta_curve(&self, da: f64, dm: f64) -> f64 {
        let (d2, d3) = (dm / 10.0, 8.0 * dm / 10.0);
        if da <= d2 {
            self.beta_min
        } else if da >= d3 || d3 <= d2 {
            self.beta_max
        } else {
            (self.beta_min * d3 - self.beta_max * d2 + (self.beta_max - self.beta_min) * da) / (d3 - d2)
        }
    }
}

/// A sample in whole microseconds (Linux `rtt_us`).
fn us(d: SimDuration) -> u64 {
    d.as_nanos() / 1000
}

#[derive(Clone, Copy, Debug)]
struct State {
    w: SegWindow,
    alpha: f64,
    beta: f64,
    base_rtt: Option<SimDuration>,
    max_rtt: Option<SimDuration>,
    sum_rtt_us: u64,
    cnt_rtt: u32,
    rtt_above: bool,
    rtt_low: u32,
    round: RoundTracker,
    /// A round ended during recovery: judge it on the next ACK outside it.
    update_due: bool,
    /// α ×128 and β ×64, as Linux keeps them.
    alpha_fp: u64,
    beta_fp: u64,
}

/// Linux `RTT_MAX`: samples are capped so that the α arithmetic cannot wrap.
const RTT_MAX_US: u64 = u32::MAX as u64 / 1280;

/// TCP-Illinois.
#[derive(Clone, Debug)]
pub struct Illinois {
    cfg: IllinoisConfig,
    s: State,
    undo: Option<State>,
}

impl Illinois {
    /// An Illinois controller (α starts at α_max, β at β_max as in Linux).
    pub fn new(cfg: IllinoisConfig, init: &CcInit) -> Self {
        let s = State {
            w: SegWindow::new(init),
            alpha: cfg.alpha_max,
            beta: cfg.beta_max,
            base_rtt: None,
            max_rtt: None,
            sum_rtt_us: 0,
            cnt_rtt: 0,
            rtt_above: false,
            rtt_low: 0,
            round: RoundTracker::after(init.sent_before_attach),
            update_due: false,
            alpha_fp: (cfg.alpha_max * 128.0).floor() as u64,
            beta_fp: (cfg.beta_max * 64.0).floor() as u64,
        };
        Illinois { cfg, s, undo: None }
    }

    /// Name-table constructor.
    pub fn build(p: &Params, init: &CcInit) -> Result<Box<dyn CongestionControl>, CcError> {
        Ok(Box::new(Illinois::new(IllinoisConfig::from_params(p)?, init)))
    }

    /// Linux `update_params`, once per RTT.
    fn fp(&self) -> (u64, u64, u64, u64) {
        let c = &self.cfg;
        ((c.alpha_min * 128.0).floor() as u64, (c.alpha_max * 128.0).floor() as u64, (c.beta_min * 64.0).floor() as u64, (c.beta_max * 64.0).floor() as u64)
    }

    /// Linux `update_params`, once per round.
    fn update_params(&mut self) {
        let (_, _, _, beta_base) = self.fp();
        if self.s.w.cwnd < self.cfg.win_thresh {
            self.s.alpha_fp = 128;
            self.s.beta_fp = beta_base;
        } else if self.s.cnt_rtt > 0 {
            let base = self.s.base_rtt.map_or(0, us);
            let dm = self.s.max_rtt.map_or(0, us).saturating_sub(base);
            let da = (self.s.sum_rtt_us / self.s.cnt_rtt as u64).saturating_sub(base);
            self.s.alpha_fp = self.alpha_with_hysteresis(da, dm);
            self.s.beta_fp = self.beta_fp_of(da, dm);
        }
        self.s.alpha = self.s.alpha_fp as f64 / 128.0;
        self.s.beta = self.s.beta_fp as f64 / 64.0;
        self.s.sum_rtt_us = 0;
        self.s.cnt_rtt = 0;
    }

    /// Linux `alpha()` in 1/128, delays in µs.
    fn alpha_with_hysteresis(&mut self, da: u64, dm: u64) -> u64 {
        let (a_min, a_max, _, _) = self.fp();
        let d1 = dm / 100;
        if da <= d1 {
            if !self.s.rtt_above {
                return a_max;
            }
            // θ good RTTs before jumping back to α_max.
            self.s.rtt_low += 1;
            if self.s.rtt_low < self.cfg.theta {
                return self.s.alpha_fp;
            }
            self.s.rtt_low = 0;
            self.s.rtt_above = false;
            return a_max;
        }
        self.s.rtt_above = true;
        let (dm, da) = (dm - d1, da - d1);
        dm * a_max / (dm + da * (a_max - a_min) / a_min.max(1))
    }

    /// Linux `beta()` in 1/64, delays in µs.
    fn beta_fp_of(&self, da: u64, dm: u64) -> u64 {
        let (_, _, b_min, b_max) = self.fp();
        let d2 = dm / 10;
        if da <= d2 {
            return b_min;
        }
        let d3 = 8 * dm / 10;
        if da >= d3 || d3 <= d2 {
            return b_max;
        }
        (b_min * d3 + (b_max - b_min) * da - b_max * d2) / (d3 - d2)
    }

    /// Linux `tcp_illinois_ssthresh`: cwnd − (cwnd·β ×64 >> 6), at least 2.
    fn ssthresh_for(&self) -> u32 {
        let w = self.s.w.cwnd as u64;
        (w - ((w * self.s.beta_fp) >> 6)).max(2) as u32
    }

    /// Current α (segments per RTT) and β.
    pub fn alpha_beta(&self) -> (f64, f64) {
        (self.s.alpha, self.s.beta)
    }
}

impl CongestionControl for Illinois {
    fn name(&self) -> &'static str {
        "illinois"
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
        // Linux `tcp_illinois_acked`: every RTT sample feeds base/max/average.
        if let Some(rtt) = ack.rtt {
            let rtt = SimDuration::from_micros(us(rtt).min(RTT_MAX_US));
            self.s.base_rtt = Some(self.s.base_rtt.map_or(rtt, |b| b.min(rtt)));
            self.s.max_rtt = Some(self.s.max_rtt.map_or(rtt, |m| m.max(rtt)));
            self.s.sum_rtt_us += us(rtt);
            self.s.cnt_rtt += 1;
        }
        if self.s.round.on_ack(ack.acked_bytes, ack.in_flight) {
            self.s.update_due = true;
        }
        if ack.in_recovery {
            return;
        }
        if self.s.update_due {
            self.s.update_due = false;
            self.update_params();
        }
        self.s.w.in_recovery = false;
        if ack.app_limited {
            return;
        }
        let w = &mut self.s.w;
        if w.in_slow_start() {
            w.slow_start(ack.acked_segments);
            return;
        }
        // W += α/W per acknowledged segment, as Linux counts it: segments pile
        // up in the counter until ⌊counter·α/128⌋ reaches W, then the window
        // grows by ⌊that/W⌋ and the counter restarts. Linux counts the ACK's
        // `pkts_acked` (`ca->acked`, set in `tcp_illinois_acked`): the segments
        // the cumulative ACK passed, SACKed ones included, so the ACK that ends a
        // recovery counts the whole window it passes.
        w.cnt = w.cnt.saturating_add(ack.cum_acked_segments);
        let delta = (w.cnt as u64 * self.s.alpha_fp) >> 7;
        if delta >= w.cwnd as u64 {
            w.cwnd = w.cwnd.saturating_add((delta / w.cwnd as u64) as u32);
            w.cnt = 0;
        }
    }

    fn on_congestion_event(&mut self, _ev: &CongestionEvent) {
        self.undo = Some(self.s);
        let ss = self.ssthresh_for();
        self.s.w.enter_recovery(ss);
    }

    fn on_recovery_exit(&mut self, _now: SimTime) {
        self.s.w.in_recovery = false;
    }

    fn on_rto(&mut self, _now: SimTime, _in_flight: u64, episode: RtoEpisode) {
        let ss = episode.ssthresh(self.s.w.ssthresh, || {
            self.undo = Some(self.s);
            self.ssthresh_for()
        });
        self.s.w.enter_loss(ss);
        // CA_Loss: back to Reno-like parameters and a fresh round.
        let beta_base = self.fp().3;
        self.s.alpha_fp = 128;
        self.s.beta_fp = beta_base;
        self.s.alpha = 1.0;
        self.s.beta = beta_base as f64 / 64.0;
        self.s.rtt_low = 0;
        self.s.rtt_above = false;
        self.s.sum_rtt_us = 0;
        self.s.cnt_rtt = 0;
        self.s.update_due = false;
        self.s.round.reset();
    }

    fn on_spurious_loss(&mut self, _now: SimTime) {
        if let Some(cur) = undo_to_saved(&mut self.s, &mut self.undo, |s| &mut s.w) {
            // What was measured about the path since the reduction stays: an undo
            // takes back a window decision, not what was learnt.
            self.s.base_rtt = cur.base_rtt;
            self.s.max_rtt = cur.max_rtt;
        }
    }

    fn on_idle_restart(&mut self, _now: SimTime) {
        self.s.w.idle_restart();
    }

    fn metrics(&self) -> CcMetrics {
        self.s.w.metrics(if self.s.alpha_fp >= self.fp().1 { "low_delay" } else { "high_delay" })
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{ack_sample, init, params, Harness};
    use super::*;

    #[test]
    fn alpha_and_beta_curves_hit_their_anchor_points() {
        let c = IllinoisConfig::default();
        let dm = 100.0;
        // α(d ≤ d1) = α_max, α(dm) = α_min, and α = κ1/(κ2 + d) in between.
        assert_eq!(c.alpha_curve(0.5, dm), 10.0);
        assert!((c.alpha_curve(dm, dm) - 0.3).abs() < 1e-12);
        let (d1, dmx) = (1.0, 100.0);
        let k2 = (0.3 * dmx - 10.0 * d1) / (10.0 - 0.3);
        let k1 = 10.0 * (d1 + k2);
        for d in [2.0, 10.0, 50.0] {
            assert!((c.alpha_curve(d, dm) - k1 / (k2 + d)).abs() < 1e-9, "α({d})");
        }
        // β: 1/8 up to dm/10, 1/2 from 8dm/10, linear in between.
        assert_eq!(c.beta_curve(10.0, dm), 0.125);
        assert_eq!(c.beta_curve(80.0, dm), 0.5);
        assert!((c.beta_curve(45.0, dm) - (0.125 + 0.375 * 35.0 / 70.0)).abs() < 1e-12);
    }

    #[test]
    fn alpha_and_beta_in_linux_fixed_point() {
        // Base 100 ms, max 200 ms, average 145 ms: d_m = 100000 µs, d_a = 45000 µs.
        // Linux alpha(): d1 = 1000, 99000·1280 / (99000 + ⌊44000·1242/38⌋)
        // = 126720000 / 1537105 = 82 (0.641). beta(): d2 = 10000, d3 = 80000,
        // (8·80000 + 24·45000 − 32·10000)/70000 = 20 (0.3125).
        let mut c = Illinois::new(IllinoisConfig::default(), &init(10));
        c.s.w.cwnd = 300;
        for (i, rtt) in [100u64, 200, 135].into_iter().enumerate() {
            let d = SimDuration::from_millis(rtt);
            c.on_ack(&AckSample {
                acked_bytes: 0,
                min_rtt: SimDuration::from_millis(100),
                prior_in_flight: 1_000_000,
                app_limited: true,
                ..ack_sample(SimTime::from_millis(1 + i as u64), 1, d, 1_000_000)
            });
        }
        c.s.cnt_rtt = 3;
        c.s.sum_rtt_us = 435_000;
        c.update_params();
        assert_eq!((c.s.alpha_fp, c.s.beta_fp), (82, 20));
        // tcp_illinois_ssthresh: 300 − (300·20 >> 6) = 300 − 93 = 207.
        assert_eq!(c.ssthresh_for(), 207);
        // At d_a = d_m: α = 99000·1280/(99000 + ⌊99000·1242/38⌋) = 38 = α_min.
        assert_eq!(c.alpha_with_hysteresis(100_000, 100_000), 38);
    }

    #[test]
    fn the_ack_that_ends_a_recovery_counts_every_segment_it_passes() {
        // Linux `tcp_illinois_acked` sets `ca->acked = pkts_acked`: the segments
        // the cumulative ACK removed, SACKed ones included. The ACK that ends a
        // recovery delivers one new segment (the last repaired hole) but passes
        // the 100 SACKed behind it: at α = 1 (128/128) and W = 100 that is
        // ⌊100·128 >> 7⌋ = 100 ≥ W, so W becomes 101 and the counter restarts.
        let ack = |delivered: u32, passed: u32| AckSample {
            acked_bytes: delivered as u64 * 1448,
            cum_acked_segments: passed,
            rtt: None,
            prior_in_flight: 150_000,
            ..ack_sample(SimTime::from_millis(1), delivered, SimDuration::from_millis(100), 145_000)
        };
        let mut c = Illinois::new(IllinoisConfig::default(), &init(10));
        (c.s.w.cwnd, c.s.w.ssthresh, c.s.w.cnt, c.s.alpha_fp) = (100, 100, 0, 128);
        c.on_ack(&ack(1, 100));
        assert_eq!((c.s.w.cwnd, c.s.w.cnt), (101, 0));
        // An ordinary ACK of two segments passes two: the counter only grows.
        c.on_ack(&ack(2, 2));
        assert_eq!((c.s.w.cwnd, c.s.w.cnt), (101, 2));
    }

    fn ill() -> Harness {
        Harness::new(Illinois::build(&params("{}"), &init(10)).unwrap(), SimDuration::from_millis(100))
    }

    #[test]
    fn without_queueing_it_grows_alpha_max_per_rtt_and_backs_off_by_beta_min() {
        let mut h = ill();
        h.grow_to(200);
        // Establish d_m: one round with a 100 ms queueing spike, then none.
        h.rtt = SimDuration::from_millis(200);
        h.round();
        h.rtt = SimDuration::from_millis(100);
        h.loss_and_recover();
        for _ in 0..8 {
            h.round();
        }
        let w = h.cwnd_segs();
        h.round();
        let step = h.cwnd_segs() - w;
        assert!(step.abs_diff(10) <= 1, "step {step} vs α_max 10");
        let w = h.cwnd_segs();
        h.loss();
        let expect = w - (w as f64 * 0.125).floor() as u64;
        assert_eq!(h.cwnd_segs(), expect);
    }

    #[test]
    fn at_high_delay_it_grows_alpha_min_per_rtt_and_halves() {
        let mut h = ill();
        h.grow_to(200);
        h.loss_and_recover();
        h.rtt = SimDuration::from_millis(200); // queueing delay = d_m
        for _ in 0..5 {
            h.round();
        }
        h.loss_and_recover();
        for _ in 0..3 {
            h.round();
        }
        let w = h.cwnd_segs();
        for _ in 0..10 {
            h.round();
        }
        // 10 RTTs at α_min = 0.3 → +3.
        assert!((h.cwnd_segs() - w).abs_diff(3) <= 1, "+{} in 10 RTTs", h.cwnd_segs() - w);
        let w = h.cwnd_segs();
        h.loss();
        assert_eq!(h.cwnd_segs(), w - w / 2);
    }

    #[test]
    fn small_windows_are_reno() {
        let mut h = ill();
        h.grow_to(12);
        h.loss_and_recover();
        let w = h.cwnd_segs();
        h.round();
        h.round();
        h.round();
        assert_eq!(h.cwnd_segs(), w + 3);
    }

    #[test]
    fn bad_params_name_the_parameter() {
        match Illinois::build(&params(r#"{"alpha_min": 20}"#), &init(10)).unwrap_err() {
            CcError::BadParam { param, .. } => assert_eq!(param, "alpha_min"),
            e => panic!("{e}"),
        }
    }
}
