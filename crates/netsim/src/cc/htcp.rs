//! H-TCP (Leith & Shorten, "H-TCP: TCP for high-speed and long-distance
//! networks", PFLDnet 2004; Leith, Shorten & Lee, "H-TCP: A framework for
//! congestion control in high-speed and long-distance networks", 2005; Linux
//! `net/ipv4/tcp_htcp.c`).
//!
//! Read this first: the additive increase depends on the time Δ since the last
//! congestion event ended, not on the window:
//!
//! - α(Δ) = 1 for Δ ≤ Δ_L = 1 s, else 1 + 10(Δ − Δ_L) + ((Δ − Δ_L)/2)²
//!   (Leith & Shorten 2004, Eq. 3).
//! - RTT scaling (Leith et al. 2005 §III-B, Linux `use_rtt_scaling`): α is scaled
//!   by RTT_min/RTT_ref with RTT_ref = 100 ms, the ratio clamped to [0.1, 2]
//!   (Linux clamps 100 ms/RTT_min to [0.5, 10]) and the result kept ≥ 1, so
//!   flows with different RTTs gain window at the same rate per second.
//! - Adaptive backoff (2005 §III-C): β = RTT_min/RTT_max clamped to [0.5, 0.8];
//!   the first congestion event uses 0.5 (Linux `modeswitch`), and with the
//!   bandwidth switch (Linux `use_bandwidth_switch`) a change of more than 20 % in
//!   the measured maximum throughput between events forces β = 0.5.
//! - α is finally multiplied by 2(1 − β) so that the average window matches a
//!   Reno-like AIMD with the same β (2005 §III-C; Linux
//!   `alpha = 2·factor·(1 − β)`), and each ACK adds α/cwnd.
//! - RTT_max only accepts samples in the Open state, after the first loss, more
//!   than 3 RTT_min after the last event, and at most 20 ms above the current
//!   RTT_max (outlier filter); it fades towards RTT_min by 5 % per event (Linux).
//!
//! Deviations: α and β are computed in f64 rather than Linux's ×128 fixed point
//! and integer jiffies (so α(Δ) is not floored to an integer), and RTT samples
//! come from `ack.rtt` (modern Linux uses `sample->rtt_us`).

use super::segwin::{undo_to_saved, SegWindow, INFINITE_SSTHRESH};
use super::{AckSample, CcError, CcInit, CcMetrics, CongestionControl, CongestionEvent, ParamReader, Params};
use netunits::{SimDuration, SimTime};

/// H-TCP's parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HtcpConfig {
    /// Δ_L, seconds (Leith & Shorten: 1 s).
    pub delta_l: f64,
    /// RTT scaling (Linux default on).
    pub rtt_scaling: bool,
    /// Bandwidth switch for β (Linux default on).
    pub bandwidth_switch: bool,
    /// β bounds (Linux `BETA_MIN` 0.5, `BETA_MAX` 0.8 ≈ 102/128).
    pub beta_min: f64,
    /// Upper bound on β.
    pub beta_max: f64,
}

impl Default for HtcpConfig {
    fn default() -> Self {
        HtcpConfig { delta_l: 1.0, rtt_scaling: true, bandwidth_switch: true, beta_min: 0.5, beta_max: 0.8 }
    }
}

impl HtcpConfig {
    /// Parameter line for `fairlab list ccas`.
    pub const PARAMS: &'static str = "delta_l = 1.0 (s), rtt_scaling = true, bandwidth_switch = true, beta_min = 0.5, beta_max = 0.8";

    /// Read and validate from scenario parameters.
    pub fn from_params(p: &Params) -> Result<Self, CcError> {
        let mut r = ParamReader::new("htcp", p);
        let delta_l = r.f64("delta_l", 1.0, 0.0, 60.0, "seconds in [0, 60] (Leith & Shorten: 1)")?;
        let rtt_scaling = r.bool("rtt_scaling", true)?;
        let bandwidth_switch = r.bool("bandwidth_switch", true)?;
        let beta_min = r.f64("beta_min", 0.5, 0.1, 0.95, "a number in [0.1, 0.95] (0.5)")?;
        let beta_max = r.f64("beta_max", 0.8, 0.1, 0.95, "a number in [0.1, 0.95], at least beta_min (0.8)")?;
        r.finish()?;
        if beta_max < beta_min {
            return Err(CcError::BadParam {
                cca: "htcp",
                param: "beta_max",
                value: beta_max.to_string(),
                allowed: "a number in [0.1, 0.95], at least beta_min (0.8)",
            });
        }
        Ok(HtcpConfig { delta_l, rtt_scaling, bandwidth_switch, beta_min, beta_max })
    }
}

/// RTT_ref for RTT scaling (Leith et al. 2005: 100 ms).
const RTT_REF: f64 = 0.1;

/// H-TCP α(Δ) before scaling (Leith & Shorten 2004, Eq. 3); Δ and Δ_L in seconds.
pub fn alpha_of_delta(delta: f64, delta_l: f64) -> f64 {
    if delta <= delta_l {
        1.0
    } else {
        let d = delta - delta_l;
        1.0 + 10.0 * d + (d / 2.0) * (d / 2.0)
    }
}

#[derive(Clone, Copy, Debug)]
struct State {
    w: SegWindow,
    /// Increase per RTT in segments, after scaling and the 2(1 − β) factor.
    alpha: f64,
    beta: f64,
    modeswitch: bool,
    min_rtt: Option<SimDuration>,
    max_rtt: Option<SimDuration>,
    /// End of the last congestion event (Linux `last_cong`).
    last_cong: Option<SimTime>,
    /// Linux CA state Open. Not the window's `in_recovery`: an RTO leaves Open
    /// (CA_Loss) until an ACK outside recovery, and H-TCP measures only in Open.
    open: bool,
    // Throughput measurement for the bandwidth switch (segments per second).
    packetcount: u32,
    lasttime: Option<SimTime>,
    bi: f64,
    max_b: f64,
    old_max_b: f64,
}

/// H-TCP.
#[derive(Clone, Debug)]
pub struct Htcp {
    cfg: HtcpConfig,
    s: State,
    undo: Option<State>,
}

impl Htcp {
    /// An H-TCP controller.
    pub fn new(cfg: HtcpConfig, init: &CcInit) -> Self {
        let s = State {
            w: SegWindow::new(init),
            alpha: 1.0,
            beta: cfg.beta_min,
            modeswitch: false,
            min_rtt: None,
            max_rtt: None,
            last_cong: None,
            open: true,
            packetcount: 0,
            lasttime: None,
            bi: 0.0,
            max_b: 0.0,
            old_max_b: 0.0,
        };
        Htcp { cfg, s, undo: None }
    }

    /// Name-table constructor.
    pub fn build(p: &Params, init: &CcInit) -> Result<Box<dyn CongestionControl>, CcError> {
        Ok(Box::new(Htcp::new(HtcpConfig::from_params(p)?, init)))
    }

    /// Seconds since the last congestion event ended.
    fn cong_time(&self, now: SimTime) -> f64 {
        self.s.last_cong.map_or(0.0, |t| (now - t).as_secs_f64())
    }

    /// Whole minimum RTTs since the last congestion event (Linux `htcp_ccount`).
    fn ccount(&self, now: SimTime) -> f64 {
        match self.s.min_rtt {
            Some(m) if m > SimDuration::ZERO => (self.cong_time(now) / m.as_secs_f64()).floor(),
            _ => 0.0,
        }
    }

    /// Linux `htcp_alpha_update`.
    fn alpha_update(&mut self, now: SimTime) {
        let mut factor = alpha_of_delta(self.cong_time(now), self.cfg.delta_l);
        if self.cfg.rtt_scaling {
            if let Some(m) = self.s.min_rtt.filter(|m| *m > SimDuration::ZERO) {
                let ratio = (m.as_secs_f64() / RTT_REF).clamp(0.1, 2.0);
                factor = (factor * ratio).max(1.0);
            }
        }
        self.s.alpha = 2.0 * factor * (1.0 - self.s.beta);
    }

    /// Linux `htcp_beta_update`.
    fn beta_update(&mut self) {
        if self.cfg.bandwidth_switch {
            let (max_b, old) = (self.s.max_b, self.s.old_max_b);
            self.s.old_max_b = max_b;
            // More than ±20 % change in the best throughput: back off to β_min.
            if !(5.0 * max_b >= 4.0 * old && 5.0 * max_b <= 6.0 * old) {
                self.s.beta = self.cfg.beta_min;
                self.s.modeswitch = false;
                return;
            }
        }
        match (self.s.modeswitch, self.s.min_rtt, self.s.max_rtt) {
            (true, Some(min), Some(max)) if min > SimDuration::from_millis(10) && max > SimDuration::ZERO => {
                self.s.beta = (min.as_secs_f64() / max.as_secs_f64()).clamp(self.cfg.beta_min, self.cfg.beta_max);
            }
            _ => {
                self.s.beta = self.cfg.beta_min;
                self.s.modeswitch = true;
            }
        }
    }

    fn measure_rtt(&mut self, now: SimTime, rtt: SimDuration) {
        if self.s.min_rtt.is_none_or(|m| m > rtt) {
            self.s.min_rtt = Some(rtt);
        }
        let min = self.s.min_rtt.unwrap_or(rtt);
        if self.s.open && self.s.w.ssthresh != INFINITE_SSTHRESH && self.ccount(now) > 3.0 {
            let max = self.s.max_rtt.map_or(min, |m| m.max(min));
            // Outlier filter: grow RTT_max by at most 20 ms per sample.
            self.s.max_rtt = Some(if max < rtt && rtt <= max + SimDuration::from_millis(20) { rtt } else { max });
        }
    }

    fn measure_throughput(&mut self, now: SimTime, acked: u32) {
        if !self.cfg.bandwidth_switch {
            return;
        }
        if !self.s.open {
            self.s.packetcount = 0;
            self.s.lasttime = Some(now);
            return;
        }
        self.s.packetcount += acked;
        let last = *self.s.lasttime.get_or_insert(now);
        let Some(min) = self.s.min_rtt else { return };
        let need = self.s.w.cwnd.saturating_sub((self.s.alpha as u32).max(1));
        if self.s.packetcount >= need && now - last >= min && min > SimDuration::ZERO && now > last {
            let cur = self.s.packetcount as f64 / (now - last).as_secs_f64();
            if self.ccount(now) <= 3.0 {
                self.s.bi = cur;
                self.s.max_b = cur;
            } else {
                self.s.bi = (3.0 * self.s.bi + cur) / 4.0;
                self.s.max_b = self.s.max_b.max(self.s.bi);
            }
            self.s.packetcount = 0;
            self.s.lasttime = Some(now);
        }
    }

    /// Linux `htcp_recalc_ssthresh` (after `htcp_param_update`).
    fn recalc_ssthresh(&mut self, now: SimTime) -> u32 {
        self.beta_update();
        self.alpha_update(now);
        // Slowly fading memory of RTT_max (Linux: 95 %).
        if let (Some(min), Some(max)) = (self.s.min_rtt, self.s.max_rtt) {
            if max > min {
                self.s.max_rtt = Some(min + max.saturating_sub(min).mul_f64(0.95));
            }
        }
        ((self.s.w.cwnd as f64 * self.s.beta) as u32).max(2)
    }

    /// Current additive increase, segments per RTT.
    pub fn alpha(&self) -> f64 {
        self.s.alpha
    }

    /// Current backoff factor.
    pub fn beta(&self) -> f64 {
        self.s.beta
    }
}

impl CongestionControl for Htcp {
    fn name(&self) -> &'static str {
        "htcp"
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
        if self.s.last_cong.is_none() {
            self.s.last_cong = Some(ack.now);
        }
        if !ack.in_recovery && !self.s.open {
            // Back to Open without an explicit exit call.
            self.s.open = true;
            self.s.last_cong = Some(ack.now);
        }
        self.s.open = !ack.in_recovery;
        self.s.w.in_recovery = ack.in_recovery;
        if let Some(rtt) = ack.rtt {
            self.measure_rtt(ack.now, rtt);
        }
        self.measure_throughput(ack.now, ack.acked_segments);
        if ack.in_recovery || ack.app_limited {
            return;
        }
        if self.s.w.in_slow_start() {
            self.s.w.slow_start(ack.acked_segments);
            return;
        }
        // cwnd += α/cwnd per acknowledged segment.
        let w = &mut self.s.w;
        if w.cnt as f64 * self.s.alpha >= w.cwnd as f64 {
            w.cwnd += 1;
            w.cnt = 0;
            self.alpha_update(ack.now);
        } else {
            w.cnt += ack.acked_segments;
        }
    }

    fn on_congestion_event(&mut self, ev: &CongestionEvent) {
        self.undo = Some(self.s);
        let ss = self.recalc_ssthresh(ev.now);
        self.s.w.enter_recovery(ss);
        // Entering Recovery/CWR restarts the Δ clock (Linux `htcp_reset`).
        self.s.last_cong = Some(ev.now);
        self.s.open = false;
    }

    fn on_recovery_exit(&mut self, now: SimTime) {
        // Back to Open: Δ counts from here (Linux `htcp_state(TCP_CA_Open)`).
        self.s.last_cong = Some(now);
        self.s.open = true;
        // Not read by H-TCP (its phase follows `open`), but kept true to its meaning.
        self.s.w.in_recovery = false;
    }

    fn on_rto(&mut self, now: SimTime, _in_flight: u64) {
        self.undo = Some(self.s);
        let ss = self.recalc_ssthresh(now);
        self.s.w.enter_loss(ss);
        self.s.last_cong = Some(now);
        self.s.open = false;
    }

    fn on_spurious_loss(&mut self, _now: SimTime) {
        if undo_to_saved(&mut self.s, &mut self.undo, |s| &mut s.w).is_some() {
            self.s.open = true;
        }
    }

    fn on_idle_restart(&mut self, _now: SimTime) {
        self.s.w.idle_restart();
    }

    fn metrics(&self) -> CcMetrics {
        let phase = if !self.s.open {
            "recovery"
        } else if self.s.w.in_slow_start() {
            "slow_start"
        } else if self.s.alpha > 2.0 * (1.0 - self.s.beta) + 1e-9 {
            "high_speed"
        } else {
            "low_speed"
        };
        CcMetrics { cwnd: self.cwnd(), ssthresh: self.ssthresh(), pacing_rate: None, phase }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{init, params, Harness};
    use super::*;

    fn htcp(json: &str, rtt_ms: u64) -> Harness {
        Harness::new(Htcp::build(&params(json), &init(10)).unwrap(), SimDuration::from_millis(rtt_ms))
    }

    #[test]
    fn alpha_formula() {
        assert_eq!(alpha_of_delta(0.5, 1.0), 1.0);
        assert_eq!(alpha_of_delta(1.0, 1.0), 1.0);
        // Δ = 3 s: 1 + 10·2 + (2/2)² = 22.
        assert!((alpha_of_delta(3.0, 1.0) - 22.0).abs() < 1e-12);
        assert!((alpha_of_delta(5.0, 1.0) - (1.0 + 40.0 + 4.0)).abs() < 1e-12);
    }

    /// Growth per RTT in a window of rounds starting `delta` s after recovery.
    fn growth_at(rtt_ms: u64, delta: f64, rounds: u32) -> (f64, f64) {
        let mut h = htcp(r#"{"bandwidth_switch": false}"#, rtt_ms);
        // A large window keeps Linux's per-increment quantisation small: each +1
        // takes ⌈W/α⌉ counted segments plus the ACK that triggers it.
        h.grow_to(2000);
        h.loss_and_recover();
        let t0 = h.now;
        while (h.now - t0).as_secs_f64() < delta {
            h.round();
        }
        let w0 = h.cwnd_segs() as f64;
        let ta = (h.now - t0).as_secs_f64();
        for _ in 0..rounds {
            h.round();
        }
        let tb = (h.now - t0).as_secs_f64();
        ((h.cwnd_segs() as f64 - w0) / rounds as f64, (ta + tb) / 2.0)
    }

    #[test]
    fn per_rtt_increase_follows_alpha_of_delta_at_100ms() {
        // First loss: β = 0.5, so 2(1 − β) = 1 and RTT scaling is 1 at 100 ms.
        let (g, t_mid) = growth_at(100, 0.5, 3);
        assert!((g - 1.0).abs() <= 0.34, "low-speed growth {g}/RTT");
        let (g, t_mid2) = growth_at(100, 3.0, 3);
        let a = alpha_of_delta(t_mid2, 1.0);
        assert!((g - a).abs() <= 0.1 * a, "at Δ = {t_mid2:.2}s growth {g}/RTT vs α = {a:.1}");
        let _ = t_mid;
    }

    #[test]
    fn rtt_scaling_equalises_growth_per_second() {
        // α scaled by RTT/100 ms: per second, a 20 ms flow gains what a 100 ms one does.
        let (g100, t100) = growth_at(100, 3.0, 3);
        let (g20, t20) = growth_at(20, 3.0, 15);
        let (per_s_100, per_s_20) = (g100 / 0.1, g20 / 0.02);
        // Compare at the same Δ: normalise by α(Δ) at each midpoint.
        let (n100, n20) = (per_s_100 / alpha_of_delta(t100, 1.0), per_s_20 / alpha_of_delta(t20, 1.0));
        assert!((n100 - n20).abs() <= 0.12 * n100, "per second: {per_s_100:.1} @100ms vs {per_s_20:.1} @20ms");
    }

    #[test]
    fn adaptive_backoff_is_min_over_max_rtt_clamped() {
        for (max_ms, expect) in [(160u64, 100.0 / 160.0), (400, 0.5), (105, 0.8)] {
            let mut h = htcp(r#"{"bandwidth_switch": false}"#, 100);
            h.grow_to(100);
            h.loss_and_recover(); // first event: β = 0.5, modeswitch on
            // Queueing builds slowly (≤ 20 ms per step) after 3 RTTs.
            for _ in 0..5 {
                h.round();
            }
            while h.rtt < SimDuration::from_millis(max_ms) {
                h.rtt = (h.rtt + SimDuration::from_millis(10)).min(SimDuration::from_millis(max_ms));
                h.round();
            }
            h.round();
            let w = h.cwnd_segs() as f64;
            h.loss();
            let got = h.cwnd_segs() as f64;
            assert!((got - (w * expect).floor()).abs() <= 1.0, "RTT_max {max_ms}: {w} → {got}, β should be {expect}");
        }
    }

    #[test]
    fn first_loss_backs_off_by_half() {
        let mut h = htcp("{}", 100);
        h.grow_to(100);
        let w = h.cwnd_segs();
        h.loss();
        assert_eq!(h.cwnd_segs(), w / 2);
    }

    #[test]
    fn bad_params_name_the_parameter() {
        match Htcp::build(&params(r#"{"beta_min": 0.7, "beta_max": 0.6}"#), &init(10)).unwrap_err() {
            CcError::BadParam { param, .. } => assert_eq!(param, "beta_max"),
            e => panic!("{e}"),
        }
    }
}
