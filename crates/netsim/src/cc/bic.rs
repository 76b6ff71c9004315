//! BIC-TCP (Xu, Harfoush & Rhee, "Binary Increase Congestion Control for Fast,
//! Long Distance Networks", INFOCOM 2004; Linux `net/ipv4/tcp_bic.c`).
//!
//! Read this first: after a loss BIC knows the window W_max where it last lost and
//! searches for the right window between cwnd and W_max (paper §3.1):
//!
//! - Binary search increase: each RTT move towards the midpoint of the search
//!   range. Linux moves a fixed fraction 1/B of the distance per RTT with
//!   `BICTCP_B` = 4 ("go to point (max+min)/N"), i.e. +(W_max − cwnd)/4 segments.
//! - Additive increase: never more than S_max = `max_increment` = 16 segments per
//!   RTT (paper §3.1, "Smax").
//! - Smoothing: within one B-th step of W_max the step becomes
//!   B/`smooth_part` = 1/5 segment per RTT (Linux `smooth_part` = 20).
//! - Max probing above W_max (paper §3.1 "slow start"): +1/5 segment per RTT just
//!   above, then (cwnd − W_max)/(B − 1) per RTT, then S_max per RTT beyond
//!   W_max + S_max·(B − 1).
//! - Below `low_window` = 14 segments BIC is Reno: +1 per RTT, halve on loss.
//! - Loss: ssthresh = cwnd·β with β = 819/1024 (paper: multiplicative decrease
//!   factor 0.8 of the window), W_max = cwnd, or cwnd·(1 + β)/2 with fast
//!   convergence when the loss came below the previous W_max (paper §3.2).
//! - Before the first loss the step is at least cwnd/20 per RTT (Linux: cnt ≤ 20).
//! - The per-segment `cnt` is scaled by the measured packets-per-ACK ratio (Linux
//!   `delayed_ack`, an EWMA ×16) in both kernel eras; 2.6.22 advanced its counter
//!   once per ACK, modern kernels once per acknowledged segment, so modern BIC
//!   grows about twice as fast in avoidance with delayed ACKs.
//!
//! `kernel` ("modern" default, or "2.6.22"): the BIC constants are identical in
//! both (`fast_convergence` 1, `max_increment` 16, `low_window` 14, β 819,
//! `initial_ssthresh` 0, `smooth_part` 20; checked against the 2.6.22 file). The
//! difference is the counting: 2.6.22 (`sysctl_tcp_abc` = 0) counts ACKs, modern
//! kernels acknowledged segments, in slow start and in congestion avoidance.
//!
//! Deviation: `cnt` is recomputed on every ACK (Linux at most once per jiffy while
//! cwnd is unchanged).

use super::segwin::{undo_to_saved, SegWindow};
use super::{AckSample, CcError, CcInit, CcMetrics, CongestionControl, CongestionEvent, ParamReader, Params, RtoEpisode};
use netunits::SimTime;

/// Linux `BICTCP_BETA_SCALE`.
const BETA_SCALE: u32 = 1024;
/// Linux `BICTCP_B`: the search moves 1/B of the way to W_max per RTT.
const B: u32 = 4;

/// BIC's parameters (defaults: Linux `tcp_bic.c`, same in 2.6.22 and today).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BicConfig {
    /// Count slow start per ACK as Linux 2.6.22 (`sysctl_tcp_abc` = 0) did.
    pub count_per_ack: bool,
    /// β ×1024 (819 ≈ 0.8).
    pub beta_1024: u32,
    /// S_max, segments per RTT (16).
    pub max_increment: u32,
    /// Below this window BIC behaves as Reno (14).
    pub low_window: u32,
    /// Smoothing divisor near W_max (20).
    pub smooth_part: u32,
    /// Fast convergence (on).
    pub fast_convergence: bool,
}

impl Default for BicConfig {
    fn default() -> Self {
        BicConfig { count_per_ack: false, beta_1024: 819, max_increment: 16, low_window: 14, smooth_part: 20, fast_convergence: true }
    }
}

impl BicConfig {
    /// Parameter line for `fairlab list ccas`.
    pub const PARAMS: &'static str = "kernel = \"modern\" | \"2.6.22\" (slow start per segment or per ACK), beta = 0.8, \
max_increment = 16, low_window = 14, smooth_part = 20, fast_convergence = true";

    /// Read and validate from scenario parameters.
    pub fn from_params(p: &Params) -> Result<Self, CcError> {
        let mut r = ParamReader::new("bic", p);
        let kernel = r.choice("kernel", "modern", &["modern", "2.6.22"], "\"modern\" or \"2.6.22\"")?;
        let beta = r.f64("beta", 819.0 / 1024.0, 0.1, 0.95, "a number in [0.1, 0.95] (Linux: 819/1024)")?;
        let max_inc = r.u64("max_increment", 16, 1, 1 << 20, "an integer in [1, 1048576] segments")?;
        let low = r.u64("low_window", 14, 1, 1 << 20, "an integer in [1, 1048576] segments")?;
        let smooth = r.u64("smooth_part", 20, 1, 1000, "an integer in [1, 1000]")?;
        let fc = r.bool("fast_convergence", true)?;
        r.finish()?;
        Ok(BicConfig {
            count_per_ack: kernel == "2.6.22",
            beta_1024: (beta * BETA_SCALE as f64).round() as u32,
            max_increment: max_inc as u32,
            low_window: low as u32,
            smooth_part: smooth as u32,
            fast_convergence: fc,
        })
    }
}

#[derive(Clone, Copy, Debug)]
struct State {
    w: SegWindow,
    cnt: u32,
    last_max_cwnd: u32,
    /// Packets per ACK ×16.
    delayed_ack: u32,
    phase: &'static str,
}

/// BIC-TCP.
#[derive(Clone, Debug)]
pub struct Bic {
    cfg: BicConfig,
    s: State,
    undo: Option<State>,
}

impl Bic {
    /// A BIC controller.
    pub fn new(cfg: BicConfig, init: &CcInit) -> Self {
        let s = State { w: SegWindow::new(init), cnt: 0, last_max_cwnd: 0, delayed_ack: 2 << 4, phase: "slow_start" };
        Bic { cfg, s, undo: None }
    }

    /// Name-table constructor.
    pub fn build(p: &Params, init: &CcInit) -> Result<Box<dyn CongestionControl>, CcError> {
        Ok(Box::new(Bic::new(BicConfig::from_params(p)?, init)))
    }

    /// W_max remembered from the last loss, segments.
    pub fn w_max(&self) -> u32 {
        self.s.last_max_cwnd
    }

    /// Linux `bictcp_update`: ACKs per +1 segment for the current search state.
    fn update(&mut self) {
        let c = &self.cfg;
        let cwnd = self.s.w.cwnd;
        let wmax = self.s.last_max_cwnd;
        let (cnt, phase) = if cwnd <= c.low_window {
            (cwnd, "reno")
        } else if cwnd < wmax {
            let dist = (wmax - cwnd) / B;
            if dist > c.max_increment {
                (cwnd / c.max_increment, "additive_increase")
            } else if dist <= 1 {
                (cwnd * c.smooth_part / B, "binary_search")
            } else {
                (cwnd / dist, "binary_search")
            }
        } else if cwnd < wmax + B {
            (cwnd * c.smooth_part / B, "max_probing")
        } else if cwnd < wmax + c.max_increment * (B - 1) {
            (cwnd * (B - 1) / (cwnd - wmax), "max_probing")
        } else {
            (cwnd / c.max_increment, "max_probing")
        };
        let mut cnt = cnt;
        if wmax == 0 && cnt > 20 {
            // No loss yet: at least +5 % per RTT.
            cnt = 20;
        }
        // Per-packet counter → per-ACK counter.
        cnt = (cnt << 4) / self.s.delayed_ack.max(1);
        self.s.cnt = cnt.max(1);
        self.s.phase = phase;
    }

    fn recalc_ssthresh(&mut self) -> u32 {
        let cwnd = self.s.w.cwnd;
        let b = self.cfg.beta_1024 as u64;
        self.s.last_max_cwnd = if cwnd < self.s.last_max_cwnd && self.cfg.fast_convergence {
            (cwnd as u64 * (BETA_SCALE as u64 + b) / (2 * BETA_SCALE as u64)) as u32
        } else {
            cwnd
        };
        if cwnd <= self.cfg.low_window {
            (cwnd / 2).max(2)
        } else {
            ((cwnd as u64 * b / BETA_SCALE as u64) as u32).max(2)
        }
    }
}

impl CongestionControl for Bic {
    fn name(&self) -> &'static str {
        "bic"
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
        if ack.in_recovery {
            return;
        }
        self.s.w.in_recovery = false;
        // `bictcp_acked` in the Open state: 16·ratio' = 15·ratio + sample.
        let d = self.s.delayed_ack;
        self.s.delayed_ack = (d + ack.acked_segments).saturating_sub(d >> 4).max(1);
        if ack.app_limited {
            return;
        }
        if self.cfg.count_per_ack {
            // Linux 2.6.22: one count per ACK, in slow start and in avoidance.
            if self.s.w.in_slow_start() {
                self.s.w.slow_start(1);
                self.s.phase = "slow_start";
            } else {
                self.update();
                let cnt = self.s.cnt;
                self.s.w.cong_avoid_ai(cnt, 1);
            }
            return;
        }
        // Modern Linux (`bictcp_cong_avoid`): slow start takes what it needs of
        // the acknowledged segments and the rest counts towards `cnt`, one count
        // per segment (`tcp_cong_avoid_ai(tp, ca->cnt, acked)`). `cnt` is still
        // divided by the packets-per-ACK ratio, a correction made when the count
        // was per ACK: with delayed ACKs today's BIC therefore grows about twice
        // the paper's steps per RTT (32 segments at most, not 16). The vm backend
        // shows it: BIC took 80 % against CUBIC on Linux 6.1 (100 ms, 1 BDP),
        // 65 % in the simulator when it counted per ACK.
        let mut acked = ack.acked_segments;
        if self.s.w.in_slow_start() {
            acked = self.s.w.slow_start(acked);
            self.s.phase = "slow_start";
            if acked == 0 {
                return;
            }
        }
        self.update();
        let cnt = self.s.cnt;
        self.s.w.cong_avoid_ai(cnt, acked);
    }

    fn on_congestion_event(&mut self, _ev: &CongestionEvent) {
        self.undo = Some(self.s);
        let ss = self.recalc_ssthresh();
        self.s.w.enter_recovery(ss);
    }

    fn on_recovery_exit(&mut self, _now: SimTime) {
        self.s.w.in_recovery = false;
    }

    fn on_rto(&mut self, _now: SimTime, _in_flight: u64, episode: RtoEpisode) {
        let ss = episode.ssthresh(self.s.w.ssthresh, || {
            self.undo = Some(self.s);
            self.recalc_ssthresh()
        });
        // CA_Loss: `bictcp_reset`.
        self.s.last_max_cwnd = 0;
        self.s.delayed_ack = 2 << 4;
        self.s.cnt = 0;
        self.s.w.enter_loss(ss);
    }

    fn on_spurious_loss(&mut self, _now: SimTime) {
        undo_to_saved(&mut self.s, &mut self.undo, |s| &mut s.w);
    }

    fn on_idle_restart(&mut self, _now: SimTime) {
        self.s.w.idle_restart();
    }

    fn metrics(&self) -> CcMetrics {
        self.s.w.metrics(if self.s.phase == "slow_start" { "congestion_avoidance" } else { self.s.phase })
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{init, params, Harness, MSS};
    use super::*;
    use netunits::SimDuration;

    fn bic(json: &str) -> Harness {
        Harness::new(Bic::build(&params(json), &init(10)).unwrap(), SimDuration::from_millis(100))
    }

    /// Grow to `w`, lose, recover: W_max = w, cwnd = w·β. The receiver ACKs every
    /// second segment (RFC 1122 delayed ACKs), which is what Linux's packets-per-ACK
    /// estimate starts from (ratio 2). With one-segment ACKs that integer EWMA
    /// cannot fall below 31/16 (16·r' = 16·r + 1 − ⌊r⌋ is stuck at 31), so Linux
    /// BIC then grows almost twice as fast as designed; we reproduce that quirk.
    fn after_loss_at(kernel: &str, w: u64) -> Harness {
        let mut h = bic(&format!(r#"{{"kernel": "{kernel}"}}"#));
        h.segs_per_ack = 2;
        h.grow_to(w);
        h.loss_and_recover();
        h
    }

    /// Steps per RTT relative to the paper's (Xu et al. 2004): 2.6.22 counted ACKs
    /// and divided `cnt` by the packets-per-ACK ratio, which cancel; modern Linux
    /// counts segments (`tcp_cong_avoid_ai(tp, ca->cnt, acked)`, since 4.0) and
    /// still divides, so with 2 segments per ACK every step is twice the paper's.
    const KERNELS: [(&str, u64); 2] = [("2.6.22", 1), ("modern", 2)];

    #[test]
    fn loss_keeps_beta_0_8_and_remembers_wmax() {
        let h = after_loss_at("modern", 200);
        assert_eq!(h.cwnd_segs(), 200 * 819 / 1024);
        assert_eq!(h.cc.ssthresh(), 200 * 819 / 1024 * MSS);
    }

    #[test]
    fn binary_search_moves_a_quarter_of_the_remaining_distance_each_rtt() {
        // Linux B = 4: every ACK moves 1/(4·cwnd) of the remaining distance to
        // W_max, so one RTT's step lies between a quarter of the distance left at
        // its end and a quarter of the distance at its start (times the kernel's
        // counting factor).
        for (kernel, k) in KERNELS {
            let mut h = after_loss_at(kernel, 400);
            for _ in 0..4 {
                let w = h.cwnd_segs();
                if (400 - w) / 4 <= 2 {
                    break;
                }
                h.round();
                let w1 = h.cwnd_segs();
                let kf = k as f64;
                let (lo, hi) = (kf * ((400 - w1) as f64 / 4.0 - 1.0), kf * ((400 - w) as f64 / 4.0 + 1.0));
                let step = (w1 - w) as f64;
                assert!(lo <= step && step <= hi, "{kernel}: from {w}: step {step} not in [{lo}, {hi}]");
            }
            // The search converges on W_max from below without passing it.
            assert!(h.cwnd_segs() <= 400, "{kernel}: {}", h.cwnd_segs());
        }
    }

    #[test]
    fn far_below_wmax_growth_is_capped_at_smax() {
        for (kernel, k) in KERNELS {
            let mut h = after_loss_at(kernel, 1000);
            let w = h.cwnd_segs();
            assert!((1000 - w) / 4 > 16);
            h.round();
            assert!((h.cwnd_segs() - w).abs_diff(16 * k) <= k, "{kernel}: step {}", h.cwnd_segs() - w);
        }
    }

    #[test]
    fn max_probing_reaches_smax_per_rtt_far_above_wmax() {
        for (kernel, k) in KERNELS {
            let mut h = after_loss_at(kernel, 100);
            // Climb past W_max + S_max·(B−1) = 148.
            h.grow_to(150);
            let w = h.cwnd_segs();
            h.round();
            assert!((h.cwnd_segs() - w).abs_diff(16 * k) <= k, "{kernel}: step {}", h.cwnd_segs() - w);
        }
    }

    #[test]
    fn small_windows_behave_as_reno() {
        // Below low_window BIC's cnt is cwnd: Reno's +1 per RTT in 2.6.22, +2 in
        // a modern kernel with delayed ACKs (the same double counting).
        for (kernel, k) in KERNELS {
            let mut h = after_loss_at(kernel, 12);
            assert_eq!(h.cwnd_segs(), 6);
            for r in 1..=3 {
                h.round();
                assert_eq!(h.cwnd_segs(), 6 + k * r, "{kernel}");
            }
        }
    }

    #[test]
    fn fast_convergence_lowers_wmax() {
        let mut c = Bic::new(BicConfig::default(), &init(10));
        c.s.last_max_cwnd = 200;
        c.s.w.cwnd = 150;
        c.recalc_ssthresh();
        // W_max = cwnd·(1 + β)/2.
        assert_eq!(c.w_max(), (150.0 * (1.0 + 819.0 / 1024.0) / 2.0) as u32);
    }

    #[test]
    fn kernel_2_6_22_slow_start_counts_acks() {
        let mut h = Harness::new(Bic::build(&params(r#"{"kernel": "2.6.22"}"#), &init(10)).unwrap(), SimDuration::from_millis(100));
        h.ack(2);
        h.ack(2);
        assert_eq!(h.cwnd_segs(), 12);
        let mut m = bic("{}");
        m.ack(2);
        m.ack(2);
        assert_eq!(m.cwnd_segs(), 14);
    }

    #[test]
    fn bad_params_name_the_parameter() {
        match Bic::build(&params(r#"{"low_window": 0}"#), &init(10)).unwrap_err() {
            CcError::BadParam { param, .. } => assert_eq!(param, "low_window"),
            e => panic!("{e}"),
        }
    }
}
