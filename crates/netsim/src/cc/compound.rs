//! Compound TCP (Tan, Song, Zhang, Sridharan, "A Compound TCP Approach for
//! High-speed and Long Distance Networks", IEEE INFOCOM 2006;
//! draft-sridharan-tcpm-ctcp-02, 2008). Windows' CTCP; Linux never merged it
//! (an out-of-tree port by Castellani, Hemminger and Andrew exists).
//!
//! Read this first. The send window is the sum of a loss-based Reno window and
//! a delay-based window (draft §3):
//!
//! ```text
//! win  = cwnd + dwnd
//! cwnd += 1/win per ACK in congestion avoidance (so win grows ≥ 1 per RTT)
//! once per round, with diff = win · (RTT − BaseRTT)/RTT  (packets queued):
//!   diff <  γ:  dwnd += max(α · win^k − 1, 0)         α = 1/8, k = 3/4
//!   diff >= γ:  dwnd  = max(dwnd − ζ · diff, 0)        ζ = 1,   γ = 30
//! on loss:      dwnd  = max(win · (1 − β) − cwnd/2, 0); cwnd = cwnd/2;  β = 1/2
//! ```
//!
//! So with an empty queue the total window grows like HighSpeed TCP
//! (α·win^k per RTT), and as the queue builds the delay component hands the
//! bandwidth back to the loss component, which then behaves like Reno. After a
//! loss the total is win·(1 − β) as long as dwnd stays positive.
//!
//! Choices: RTT is the lowest sample of the round and BaseRTT the lowest ever
//! (as Vegas, on which CTCP's delay estimator is built); slow start grows cwnd
//! only (dwnd = 0 until slow start ends, draft §3); the delay component is
//! only active while win ≥ `low_window` = 38 packets — the Linux port's
//! LOW_WINDOW, the same value as RFC 3649's Low_Window — below it CTCP is Reno.
//! γ is fixed (the draft's later "gamma auto-tuning" is not implemented).
//! `win^0.75` is computed as √win · ⁴√win so results do not depend on the
//! platform's `pow` (IEEE `sqrt` is exactly rounded).

use super::seg_reno::{RttRounds, SegReno};
use super::{AckSample, CcError, CcInit, CongestionControl, CongestionEvent, ParamReader, Params, RtoEpisode};
use netunits::SimTime;

/// Compound TCP parameters (draft-sridharan-tcpm-ctcp-02 §3 defaults).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CompoundConfig {
    /// Increase factor α = 1/8.
    pub alpha: f64,
    /// Multiplicative decrease β = 1/2 (of the total window).
    pub beta: f64,
    /// Exponent k = 0.75 (HighSpeed-like scalability).
    pub k: f64,
    /// Queue threshold γ = 30 packets.
    pub gamma: f64,
    /// Decrease factor ζ = 1 (dwnd loses ζ·diff per round above γ).
    pub zeta: f64,
    /// Below this total window (packets) the delay component is off: 38.
    pub low_window: u64,
}

impl Default for CompoundConfig {
    fn default() -> Self {
        CompoundConfig { alpha: 0.125, beta: 0.5, k: 0.75, gamma: 30.0, zeta: 1.0, low_window: 38 }
    }
}

impl CompoundConfig {
    /// Parameter line for `fairlab list ccas`.
    pub const PARAMS: &'static str = "alpha = 0.125, beta = 0.5, k = 0.75, gamma = 30 (packets), zeta = 1, low_window = 38 (packets)";

    /// Read and validate from scenario parameters.
    pub fn from_params(p: &Params) -> Result<Self, CcError> {
        let d = CompoundConfig::default();
        let mut r = ParamReader::new("compound", p);
        let alpha = r.f64("alpha", d.alpha, 0.0, 10.0, "a number in [0, 10] (default 1/8)")?;
        let beta = r.f64("beta", d.beta, 0.0, 0.99, "a number in [0, 0.99] (default 1/2)")?;
        let k = r.f64("k", d.k, 0.0, 1.0, "one of 0.5, 0.75 or 1 in practice; a number in [0, 1] (default 0.75)")?;
        let gamma = r.f64("gamma", d.gamma, 0.0, 10_000.0, "a number of packets in [0, 10000] (default 30)")?;
        let zeta = r.f64("zeta", d.zeta, 0.0, 10.0, "a number in [0, 10] (default 1)")?;
        let low_window = r.u64("low_window", d.low_window, 0, 100_000, "an integer number of packets in [0, 100000] (default 38)")?;
        r.finish()?;
        Ok(CompoundConfig { alpha, beta, k, gamma, zeta, low_window })
    }
}

/// Compound TCP state (windows in packets).
#[derive(Clone, Debug)]
pub struct Compound {
    cfg: CompoundConfig,
    mss: u64,
    /// The loss-based component `cwnd` (with ssthresh, compared to `win`).
    w: SegReno,
    /// The delay-based component, packets (fractional between rounds).
    dwnd: f64,
    rounds: RttRounds,
    last_diff: Option<f64>,
    decisions: u64,
    /// (cwnd, dwnd, ssthresh) before the last reduction, for undo.
    prior: Option<(u64, f64, u64)>,
}

impl Compound {
    /// A Compound TCP controller at the initial window.
    pub fn new(cfg: CompoundConfig, init: &CcInit) -> Self {
        Compound {
            cfg,
            mss: init.mss.max(1),
            w: SegReno::new(init.initial_cwnd_segments),
            dwnd: 0.0,
            rounds: RttRounds::after(init.sent_before_attach),
            last_diff: None,
            decisions: 0,
            prior: None,
        }
    }

    /// Name-table constructor.
    pub fn build(p: &Params, init: &CcInit) -> Result<Box<dyn CongestionControl>, CcError> {
        Ok(Box::new(Compound::new(CompoundConfig::from_params(p)?, init)))
    }

    /// Total window `cwnd + dwnd`, whole packets.
    pub fn win(&self) -> u64 {
        self.w.cwnd + self.dwnd.floor() as u64
    }

    /// The delay-based component, packets.
    pub fn dwnd(&self) -> f64 {
        self.dwnd
    }

    /// The loss-based component, packets.
    pub fn loss_cwnd(&self) -> u64 {
        self.w.cwnd
    }

    /// diff of the last per-round decision, packets.
    pub fn last_diff(&self) -> Option<f64> {
        self.last_diff
    }

    /// Number of per-round dwnd decisions taken.
    pub fn decisions(&self) -> u64 {
        self.decisions
    }

    fn in_slow_start(&self) -> bool {
        self.win() < self.w.ssthresh
    }

    /// win^k, with the default k = 3/4 done by square roots (exactly rounded).
    fn win_pow_k(&self, win: f64) -> f64 {
        if self.cfg.k == 0.75 {
            let s = win.sqrt();
            s * s.sqrt()
        } else {
            win.powf(self.cfg.k)
        }
    }

    /// The once-per-round dwnd update (draft §3).
    fn end_of_round(&mut self) {
        let (Some(rtt), Some(base)) = (self.rounds.round_min_rtt, self.rounds.base_rtt) else { return };
        let win = self.win();
        if self.in_slow_start() || self.rounds.round_samples == 0 {
            return;
        }
        if win < self.cfg.low_window {
            // Small windows: plain Reno (delay component off).
            self.dwnd = 0.0;
            return;
        }
        let w = win as f64;
        let (r, b) = (rtt.as_secs_f64(), base.as_secs_f64());
        let diff = w * (r - b) / r;
        self.last_diff = Some(diff);
        self.decisions += 1;
        if diff < self.cfg.gamma {
            self.dwnd += (self.cfg.alpha * self.win_pow_k(w) - 1.0).max(0.0);
        } else {
            self.dwnd = (self.dwnd - self.cfg.zeta * diff).max(0.0);
        }
    }
}

impl CongestionControl for Compound {
    fn name(&self) -> &'static str {
        "compound"
    }

    fn cwnd(&self) -> u64 {
        self.win() * self.mss
    }

    fn ssthresh(&self) -> u64 {
        self.w.ssthresh.saturating_mul(self.mss)
    }

    fn on_ack(&mut self, ack: &AckSample) {
        self.rounds.sample(ack);
        if ack.in_recovery {
            return;
        }
        // The round's decision uses the window the round was sent with, so it
        // comes before this ACK's own growth.
        if self.rounds.round_ended(ack) {
            self.end_of_round();
            self.rounds.next_round();
        }
        if ack.app_limited {
            return;
        }
        let acked = ack.acked_segments as u64;
        if self.in_slow_start() {
            // Slow start on cwnd alone, up to ssthresh − dwnd (win = ssthresh).
            let room = self.w.ssthresh.saturating_sub(self.win());
            let used = acked.min(room);
            self.w.cwnd += used;
            if acked > used {
                let win = self.win();
                self.w.cong_avoid_ai(win, acked - used);
            }
        } else {
            // cwnd += 1/win per ACK (draft §3), i.e. +1 per win ACKed.
            let win = self.win();
            self.w.cong_avoid_ai(win, acked);
        }
    }

    /// draft §3: dwnd = max(win·(1−β) − cwnd/2, 0), cwnd = cwnd/2; ssthresh is
    /// the new total window, so growth resumes in congestion avoidance.
    fn on_congestion_event(&mut self, _ev: &CongestionEvent) {
        self.prior = Some((self.w.cwnd, self.dwnd, self.w.ssthresh));
        let win = self.win() as f64;
        let half = (self.w.cwnd / 2).max(1);
        self.dwnd = (win * (1.0 - self.cfg.beta) - self.w.cwnd as f64 / 2.0).max(0.0);
        self.w.cwnd = half;
        self.w.cnt = 0;
        self.w.ssthresh = self.win().max(2);
        self.rounds.restart();
    }

    fn on_recovery_exit(&mut self, _now: SimTime) {
        self.rounds.restart();
    }

    /// RTO: both components restart (dwnd = 0, cwnd = 1), ssthresh = win/2.
    fn on_rto(&mut self, _now: SimTime, _in_flight: u64, episode: RtoEpisode) {
        if episode == RtoEpisode::New {
            self.prior = Some((self.w.cwnd, self.dwnd, self.w.ssthresh));
            self.w.ssthresh = (self.win() / 2).max(2);
        }
        self.w.cwnd = 1;
        self.w.cnt = 0;
        self.dwnd = 0.0;
        self.rounds.restart();
    }

    fn on_spurious_loss(&mut self, _now: SimTime) {
        if let Some((c, d, s)) = self.prior.take() {
            self.w.cwnd = self.w.cwnd.max(c);
            self.dwnd = self.dwnd.max(d);
            self.w.ssthresh = self.w.ssthresh.max(s);
        }
    }

    fn on_idle_restart(&mut self, _now: SimTime) {
        // The Linux port keeps BaseRTT across idle ("CTCP spec keeps baseRTT").
        self.rounds.restart();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::testpath::Synth;
    use crate::cc::CongestionSignal;
    use netunits::SimDuration;

    fn init() -> CcInit {
        crate::cc::testkit::init(10)
    }

    const BASE: SimDuration = SimDuration::from_millis(100);

    /// ACK one segment at a time at `rtt` until the next dwnd decision; returns
    /// (win, dwnd) just before the deciding ACK.
    fn next_decision(s: &mut Synth<Compound>, rtt: SimDuration) -> (u64, f64) {
        let n = s.cc.decisions();
        for _ in 0..1_000_000 {
            let before = (s.cc.win(), s.cc.dwnd());
            s.now += SimDuration::from_nanos(rtt.as_nanos() / before.0.max(1));
            s.ack(rtt);
            if s.cc.decisions() > n {
                return before;
            }
        }
        panic!("no decision");
    }

    /// A flow in congestion avoidance with win ≥ 40 (ssthresh forced to 40).
    fn in_ca() -> Synth<Compound> {
        let mut s = Synth::new(Compound::new(CompoundConfig::default(), &init()));
        s.cc.w.ssthresh = 40;
        while s.cc.win() < 40 {
            s.ack(BASE);
        }
        assert_eq!(s.cc.dwnd(), 0.0, "no delay component in slow start");
        s
    }

    #[test]
    fn dwnd_grows_by_alpha_win_to_the_k_minus_one_without_queue() {
        let mut s = in_ca();
        for _ in 0..8 {
            let (win, dwnd) = next_decision(&mut s, BASE);
            assert_eq!(s.cc.last_diff(), Some(0.0));
            let want = dwnd + (0.125 * (win as f64).powf(0.75) - 1.0).max(0.0);
            assert!((s.cc.dwnd() - want).abs() < 1e-9, "win {win}: dwnd {} want {want}", s.cc.dwnd());
        }
        assert!(s.cc.dwnd() > 0.0);
    }

    #[test]
    fn total_window_grows_like_alpha_win_to_the_k_per_rtt() {
        // Loss component +1/RTT plus delay component α·win^k − 1 per RTT: the
        // total grows by ≈ α·win^k per round (draft §3, the HSTCP-like law).
        let mut s = in_ca();
        for _ in 0..30 {
            next_decision(&mut s, BASE);
        }
        let (w0, _) = next_decision(&mut s, BASE);
        let (w1, _) = next_decision(&mut s, BASE);
        let growth = w1 as f64 - w0 as f64;
        let want = 0.125 * (w0 as f64).powf(0.75);
        assert!((growth - want).abs() <= 1.5, "grew {growth} per round, α·win^k = {want}");
    }

    #[test]
    fn dwnd_shrinks_by_zeta_diff_above_gamma() {
        let mut s = in_ca();
        for _ in 0..40 {
            next_decision(&mut s, BASE);
        }
        assert!(s.cc.dwnd() > 40.0, "dwnd {}", s.cc.dwnd());
        // RTT for diff = 60 > γ at the current window: diff = win·(RTT − base)/RTT.
        let win = s.cc.win() as f64;
        let rtt = SimDuration::from_secs_f64(BASE.as_secs_f64() * win / (win - 60.0));
        // The first decision after the change may mix RTTs; check the next ones
        // against the rule (diff falls as dwnd, hence win, shrinks).
        next_decision(&mut s, rtt);
        let mut shrank = 0;
        for _ in 0..3 {
            let (_, dwnd) = next_decision(&mut s, rtt);
            let diff = s.cc.last_diff().unwrap();
            if diff >= 30.0 {
                shrank += 1;
                assert!((s.cc.dwnd() - (dwnd - diff).max(0.0)).abs() < 1e-9, "dwnd {} from {dwnd} − {diff}", s.cc.dwnd());
            } else {
                assert!(s.cc.dwnd() >= dwnd, "diff {diff} < γ must not shrink dwnd");
            }
        }
        assert!(shrank >= 1);
    }

    #[test]
    fn loss_sets_dwnd_to_win_times_one_minus_beta_minus_half_cwnd() {
        let mut s = in_ca();
        for _ in 0..40 {
            next_decision(&mut s, BASE);
        }
        let (cwnd, win) = (s.cc.loss_cwnd(), s.cc.win());
        s.loss(CongestionSignal::Loss);
        let want_dwnd = (win as f64 * 0.5 - cwnd as f64 / 2.0).max(0.0);
        assert!((s.cc.dwnd() - want_dwnd).abs() < 1e-9);
        assert_eq!(s.cc.loss_cwnd(), cwnd / 2);
        // With dwnd > 0 the total is halved (up to rounding).
        assert!(s.cc.win().abs_diff(win / 2) <= 1, "win {} from {win}", s.cc.win());
        s.cc.on_spurious_loss(s.now);
        assert_eq!(s.cc.win(), win);
    }

    #[test]
    fn dwnd_is_floored_at_zero_on_loss() {
        // Right after slow start dwnd = 0 and win = cwnd: win/2 − cwnd/2 = 0.
        let mut s = in_ca();
        let cwnd = s.cc.loss_cwnd();
        s.loss(CongestionSignal::Loss);
        assert_eq!(s.cc.dwnd(), 0.0);
        assert_eq!(s.cc.win(), cwnd / 2);
    }

    #[test]
    fn below_low_window_it_is_reno() {
        let mut s = Synth::new(Compound::new(CompoundConfig::default(), &init()));
        s.cc.w.ssthresh = 20;
        for _ in 0..10 {
            s.round(BASE);
        }
        assert_eq!(s.cc.dwnd(), 0.0);
        assert_eq!(s.cc.decisions(), 0);
        // Reno: +1 per RTT from 20.
        assert!((28..=31).contains(&s.cc.win()), "win {}", s.cc.win());
        s.cc.on_rto(s.now, 0, crate::cc::RtoEpisode::New);
        assert_eq!(s.cwnd(), 1);
    }

    #[test]
    fn params_are_validated() {
        let p = |s: &str| match serde_json::from_str::<serde_json::Value>(s).unwrap() {
            serde_json::Value::Object(m) => m,
            _ => unreachable!(),
        };
        let e = Compound::build(&p(r#"{"beta": 1.0}"#), &init()).unwrap_err();
        assert!(matches!(e, CcError::BadParam { param: "beta", .. }), "{e}");
        let e = Compound::build(&p(r#"{"k": 2}"#), &init()).unwrap_err();
        assert!(matches!(e, CcError::BadParam { param: "k", .. }));
        let e = Compound::build(&p(r#"{"eta": 1}"#), &init()).unwrap_err();
        assert!(e.to_string().contains("eta"));
        assert!(Compound::build(&p(r#"{"gamma": 5, "low_window": 0}"#), &init()).is_ok());
    }
}
