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
//! - RTT_max only accepts samples in the Open state and at most 20 ms above the
//!   current RTT_max (outlier filter), slow start included; it fades towards
//!   RTT_min by 5 % per event (Linux 6.1 `measure_rtt`; 2.6-era kernels also
//!   waited for the first loss and 3 RTT_min after each event).
//!
//! Arithmetic: Linux 6.1's, in jiffies at Debian's HZ = 250 (4 ms) and ×128
//! fixed point, because its rounding is not small: RTT samples are rounded UP
//! to whole jiffies (`usecs_to_jiffies`), so a 100.1 ms path has RTT_min = 26
//! jiffies and the RTT-scaling divisor ⌊8·HZ/(10·26)⌋ = 7 instead of 8 (α is
//! 8/7 of the paper's); α(Δ) is an integer (`factor`) and β = ⌊128·RTT_min/RTT_max⌋/128.
//!
//! After an RTO the state is CA_Loss (no RTT_max or throughput samples; Δ
//! restarts on the return to Open) until the bytes in flight at the timeout are
//! acknowledged (Linux: until `high_seq`).
//!
//! Deviations: RTT samples come from `ack.rtt` (Linux: `sample->rtt_us`). The
//! first throughput interval starts at the first ACK (Linux: at jiffy 0; no
//! sample completes during slow start either way).

use super::jiffies::{jiffies, ms_to_jiffies, rtt_jiffies, HZ};
use super::segwin::SegWindow;
use super::{AckSample, CcError, CcInit, CcMetrics, CongestionControl, CongestionEvent, ParamReader, Params, RtoEpisode};
use netunits::SimTime;

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

/// H-TCP α(Δ) before scaling (Leith & Shorten 2004, Eq. 3); Δ and Δ_L in seconds.
pub fn alpha_of_delta(delta: f64, delta_l: f64) -> f64 {
    if delta <= delta_l {
        1.0
    } else {
        let d = delta - delta_l;
        1.0 + 10.0 * d + (d / 2.0) * (d / 2.0)
    }
}

/// Linux `htcp_alpha_update`'s integer `factor` for Δ jiffies since the last
/// event and Δ_L jiffies: 1 + ⌊(10·d + ⌊(d/2)²/HZ⌋)/HZ⌋ with d = Δ − Δ_L.
pub fn factor_of_jiffies(delta: u64, delta_l: u64) -> u64 {
    if delta > delta_l {
        let d = delta - delta_l;
        1 + (10 * d + (d / 2) * (d / 2) / HZ) / HZ
    } else {
        1
    }
}

#[derive(Clone, Copy, Debug)]
struct State {
    w: SegWindow,
    /// Increase per RTT in segments ×128, after scaling and the 2(1 − β) factor.
    alpha: u64,
    /// Backoff ×128.
    beta: u64,
    modeswitch: bool,
    /// Jiffies; 0 = no sample yet (as Linux).
    min_rtt: u64,
    max_rtt: u64,
    /// End of the last congestion event, jiffies (Linux `last_cong`).
    last_cong: Option<u64>,
    /// Linux CA state Open. Not the window's `in_recovery`: an RTO leaves Open
    /// (CA_Loss) until an ACK outside recovery, and H-TCP measures only in Open.
    open: bool,
    /// Bytes still to be acknowledged before CA_Loss ends after an RTO (0: not in it).
    loss_left: u64,
    // Throughput measurement for the bandwidth switch (segments per second).
    packetcount: u64,
    lasttime: Option<u64>,
    bi: u64,
    max_b: u64,
    old_max_b: u64,
}

/// What Linux's `htcp_cwnd_undo` restores besides the window.
#[derive(Clone, Copy, Debug)]
struct Undo {
    w: SegWindow,
    last_cong: Option<u64>,
    max_rtt: u64,
    old_max_b: u64,
}

/// H-TCP.
#[derive(Clone, Debug)]
pub struct Htcp {
    cfg: HtcpConfig,
    /// Δ_L in jiffies.
    delta_l: u64,
    beta_min: u64,
    beta_max: u64,
    s: State,
    undo: Option<Undo>,
}

impl Htcp {
    /// An H-TCP controller.
    pub fn new(cfg: HtcpConfig, init: &CcInit) -> Self {
        let beta_min = (cfg.beta_min * 128.0).floor() as u64;
        let s = State {
            w: SegWindow::new(init),
            alpha: 128,
            beta: beta_min,
            modeswitch: false,
            min_rtt: 0,
            max_rtt: 0,
            last_cong: None,
            open: true,
            loss_left: 0,
            packetcount: 0,
            lasttime: None,
            bi: 0,
            max_b: 0,
            old_max_b: 0,
        };
        Htcp {
            cfg,
            delta_l: (cfg.delta_l * HZ as f64).round() as u64,
            beta_min,
            beta_max: (cfg.beta_max * 128.0).floor() as u64,
            s,
            undo: None,
        }
    }

    /// Name-table constructor.
    pub fn build(p: &Params, init: &CcInit) -> Result<Box<dyn CongestionControl>, CcError> {
        Ok(Box::new(Htcp::new(HtcpConfig::from_params(p)?, init)))
    }

    /// Jiffies since the last congestion event ended (Linux `htcp_cong_time`).
    fn cong_time(&self, now_j: u64) -> u64 {
        self.s.last_cong.map_or(0, |t| now_j.saturating_sub(t))
    }

    /// Whole minimum RTTs since the last congestion event (Linux `htcp_ccount`).
    fn ccount(&self, now_j: u64) -> u64 {
        self.cong_time(now_j) / self.s.min_rtt.max(1)
    }

    /// Linux `htcp_alpha_update`.
    fn alpha_update(&mut self, now_j: u64) {
        let mut factor = factor_of_jiffies(self.cong_time(now_j), self.delta_l);
        if self.cfg.rtt_scaling && self.s.min_rtt > 0 {
            // 100 ms/RTT_min in eighths, clamped to [0.5, 10].
            let scale = ((HZ << 3) / (10 * self.s.min_rtt)).clamp(1 << 2, 10 << 3);
            factor = ((factor << 3) / scale).max(1);
        }
        self.s.alpha = 2 * factor * (128 - self.s.beta);
        if self.s.alpha == 0 {
            self.s.alpha = 128;
        }
    }

    /// Linux `htcp_beta_update`.
    fn beta_update(&mut self) {
        if self.cfg.bandwidth_switch {
            let (max_b, old) = (self.s.max_b as u32, self.s.old_max_b as u32);
            self.s.old_max_b = max_b as u64;
            // Linux `between(5·maxB, 4·old, 6·old)` in wrapping u32: more than
            // ±20 % change in the best throughput backs off to β_min.
            let (lo, hi, x) = (old.wrapping_mul(4), old.wrapping_mul(6), max_b.wrapping_mul(5));
            if hi.wrapping_sub(lo) < x.wrapping_sub(lo) {
                self.s.beta = self.beta_min;
                self.s.modeswitch = false;
                return;
            }
        }
        if self.s.modeswitch && self.s.min_rtt > ms_to_jiffies(10) && self.s.max_rtt > 0 {
            self.s.beta = ((self.s.min_rtt << 7) / self.s.max_rtt).clamp(self.beta_min, self.beta_max);
        } else {
            self.s.beta = self.beta_min;
            self.s.modeswitch = true;
        }
    }

    /// Linux `measure_rtt` with a sample in jiffies.
    fn measure_rtt(&mut self, rtt_j: u64) {
        if self.s.min_rtt == 0 || self.s.min_rtt > rtt_j {
            self.s.min_rtt = rtt_j;
        }
        if self.s.open {
            if self.s.max_rtt < self.s.min_rtt {
                self.s.max_rtt = self.s.min_rtt;
            }
            // Outlier filter: grow RTT_max by at most 20 ms per sample.
            if self.s.max_rtt < rtt_j && rtt_j <= self.s.max_rtt + ms_to_jiffies(20) {
                self.s.max_rtt = rtt_j;
            }
        }
    }

    /// Linux `measure_achieved_throughput` (the bandwidth-switch part).
    fn measure_throughput(&mut self, now_j: u64, acked: u32) {
        if !self.cfg.bandwidth_switch {
            return;
        }
        if !self.s.open {
            self.s.packetcount = 0;
            self.s.lasttime = Some(now_j);
            return;
        }
        self.s.packetcount += acked as u64;
        let last = *self.s.lasttime.get_or_insert(now_j);
        let a = (self.s.alpha >> 7).max(1);
        let min = self.s.min_rtt;
        if a <= self.s.w.cwnd as u64 && self.s.packetcount >= self.s.w.cwnd as u64 - a && now_j - last >= min && min > 0 {
            let cur = self.s.packetcount * HZ / (now_j - last);
            if self.ccount(now_j) <= 3 {
                self.s.bi = cur;
                self.s.max_b = cur;
            } else {
                self.s.bi = (3 * self.s.bi + cur) / 4;
                self.s.max_b = self.s.max_b.max(self.s.bi);
            }
            self.s.packetcount = 0;
            self.s.lasttime = Some(now_j);
        }
    }

    /// Linux `htcp_recalc_ssthresh` (after `htcp_param_update`).
    fn recalc_ssthresh(&mut self, now_j: u64) -> u32 {
        self.beta_update();
        self.alpha_update(now_j);
        // Slowly fading memory of RTT_max (Linux: 95 %).
        let (min, max) = (self.s.min_rtt, self.s.max_rtt);
        if min > 0 && max > min {
            self.s.max_rtt = min + (max - min) * 95 / 100;
        }
        ((self.s.w.cwnd as u64 * self.s.beta >> 7) as u32).max(2)
    }

    /// A congestion event begins (Linux: `ssthresh`, then `htcp_state` →
    /// `htcp_reset`, which restarts the Δ clock and remembers what undo restores).
    fn enter_event(&mut self, now: SimTime) -> u32 {
        let now_j = jiffies(now);
        self.undo = Some(Undo { w: self.s.w, last_cong: self.s.last_cong, max_rtt: self.s.max_rtt, old_max_b: self.s.old_max_b });
        let ss = self.recalc_ssthresh(now_j);
        self.s.last_cong = Some(now_j);
        self.s.open = false;
        ss
    }

    /// Current additive increase, segments per RTT.
    pub fn alpha(&self) -> f64 {
        self.s.alpha as f64 / 128.0
    }

    /// Current backoff factor.
    pub fn beta(&self) -> f64 {
        self.s.beta as f64 / 128.0
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
        let now_j = jiffies(ack.now);
        if self.s.last_cong.is_none() {
            self.s.last_cong = Some(now_j);
        }
        // CA_Loss lasts through the ACK that completes it (Linux's pkts_acked
        // runs before the state machine moves to Open).
        let in_loss = self.s.loss_left > 0;
        self.s.loss_left = self.s.loss_left.saturating_sub(ack.acked_bytes);
        let open = !ack.in_recovery && !in_loss;
        if open && !self.s.open {
            // Back to Open without an explicit exit call (after CA_Loss).
            self.s.last_cong = Some(now_j);
        }
        self.s.open = open;
        self.s.w.in_recovery = ack.in_recovery;
        if let Some(rtt) = ack.rtt.filter(|r| r.as_nanos() >= 1000) {
            self.measure_rtt(rtt_jiffies(rtt));
        }
        self.measure_throughput(now_j, ack.acked_segments);
        if ack.in_recovery || ack.app_limited {
            return;
        }
        if self.s.w.in_slow_start() {
            self.s.w.slow_start(ack.acked_segments);
            return;
        }
        // cwnd += α/cwnd per acknowledged segment; the ACK that completes a +1
        // is not counted (Linux `htcp_cong_avoid`).
        let w = &mut self.s.w;
        if (w.cnt as u64 * self.s.alpha) >> 7 >= w.cwnd as u64 {
            w.cwnd += 1;
            w.cnt = 0;
            self.alpha_update(now_j);
        } else {
            w.cnt += ack.acked_segments;
        }
    }

    fn on_congestion_event(&mut self, ev: &CongestionEvent) {
        let ss = self.enter_event(ev.now);
        self.s.w.enter_recovery(ss);
    }

    fn on_recovery_exit(&mut self, now: SimTime) {
        // Back to Open: Δ counts from here (Linux `htcp_state(TCP_CA_Open)`).
        self.s.last_cong = Some(jiffies(now));
        self.s.open = true;
        // Not read by H-TCP (its phase follows `open`), but kept true to its meaning.
        self.s.w.in_recovery = false;
    }

    fn on_rto(&mut self, now: SimTime, in_flight: u64, episode: RtoEpisode) {
        let ss = match episode {
            RtoEpisode::New => self.enter_event(now),
            // `htcp_state` on CA_Loss (`htcp_reset`) restarts the Δ clock
            // whether or not the ssthresh op ran.
            RtoEpisode::Ongoing => {
                self.s.last_cong = Some(jiffies(now));
                self.s.open = false;
                self.s.w.ssthresh
            }
        };
        self.s.w.enter_loss(ss);
        self.s.loss_left = in_flight.max(1);
    }

    /// Linux `htcp_cwnd_undo`: the Δ clock, RTT_max and the old best throughput
    /// come back with the window; α and β stay as the event set them.
    fn on_spurious_loss(&mut self, _now: SimTime) {
        if let Some(u) = self.undo.take() {
            let mut w = u.w;
            w.undo_from(&self.s.w);
            self.s.w = w;
            self.s.last_cong = u.last_cong;
            self.s.max_rtt = u.max_rtt;
            self.s.old_max_b = u.old_max_b;
            self.s.open = true;
            self.s.loss_left = 0;
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
        } else if self.s.alpha > 2 * (128 - self.s.beta) {
            "high_speed"
        } else {
            "low_speed"
        };
        CcMetrics { cwnd: self.cwnd(), ssthresh: self.ssthresh(), pacing_rate: None, phase }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{ack_sample, init, params, Harness};
    use super::*;
    use netunits::SimDuration;

    fn htcp(json: &str, rtt_ms: u64) -> Harness {
        Harness::new(Htcp::build(&params(json), &init(10)).unwrap(), SimDuration::from_millis(rtt_ms))
    }

    fn raw(json: &str) -> Htcp {
        Htcp::new(HtcpConfig::from_params(&params(json)).unwrap(), &init(10))
    }

    #[test]
    fn alpha_formula() {
        assert_eq!(alpha_of_delta(0.5, 1.0), 1.0);
        assert_eq!(alpha_of_delta(1.0, 1.0), 1.0);
        // Δ = 3 s: 1 + 10·2 + (2/2)² = 22.
        assert!((alpha_of_delta(3.0, 1.0) - 22.0).abs() < 1e-12);
        assert!((alpha_of_delta(5.0, 1.0) - (1.0 + 40.0 + 4.0)).abs() < 1e-12);
    }

    #[test]
    fn linux_integer_factor_in_jiffies() {
        // HZ = 250. Δ = 3 s = 750 jiffies, Δ_L = 250: d = 500,
        // 1 + ⌊(5000 + ⌊250²/250⌋)/250⌋ = 1 + ⌊5250/250⌋ = 22 (the formula's 22).
        assert_eq!(factor_of_jiffies(750, 250), 22);
        // Δ = 1.1 s = 275 jiffies: d = 25, 1 + ⌊(250 + 0)/250⌋ = 2; 1.096 s = 274
        // jiffies: d = 24, 1 + ⌊(240 + 0)/250⌋ = 1, where Eq. 3 gives 1.96.
        assert_eq!(factor_of_jiffies(275, 250), 2);
        assert_eq!(factor_of_jiffies(274, 250), 1);
        assert_eq!(factor_of_jiffies(250, 250), 1);
    }

    #[test]
    fn rtt_scaling_divides_by_linux_integer_scale() {
        // α = 2·factor'·(128 − β) with factor' = ⌊8·factor/scale⌋, scale =
        // clamp(⌊8·HZ/(10·RTT_min)⌋, 4, 80); β = 64 (first event), Δ = 3 s.
        for (min_rtt_j, expect_alpha) in [
            (25u64, 2 * 22 * 64),              // 100 ms: scale 8, factor 22
            (26, 2 * (176 / 7) * 64),          // 104 ms: scale ⌊2000/260⌋ = 7 → 25
            (7, 2 * (176 / 28) * 64),          // 28 ms: scale 28 → 6
            (200, 2 * (176 / 4) * 64),         // 800 ms: scale 1 clamped to 4 → 44
        ] {
            let mut c = raw("{}");
            c.s.min_rtt = min_rtt_j;
            c.s.beta = 64;
            c.s.last_cong = Some(1000);
            c.alpha_update(1750);
            assert_eq!(c.s.alpha, expect_alpha, "RTT_min {min_rtt_j} jiffies");
        }
        // Without scaling: α = 2·22·64/128 = 22 segments per RTT.
        let mut c = raw(r#"{"rtt_scaling": false}"#);
        c.s.min_rtt = 7;
        c.s.beta = 64;
        c.s.last_cong = Some(1000);
        c.alpha_update(1750);
        assert_eq!(c.alpha(), 22.0);
    }

    #[test]
    fn increase_takes_one_segment_per_cwnd_over_alpha_acked_plus_the_completing_ack() {
        // α = 2816/128 = 22, cwnd 1000: the +1 comes on the ACK that finds
        // ⌊cnt·2816/128⌋ ≥ 1000, i.e. cnt = ⌈1000·128/2816⌉ = 46 counted
        // segments, so on the 47th ACK, which itself is not counted.
        let mut c = raw(r#"{"bandwidth_switch": false}"#);
        c.s.w.cwnd = 1000;
        c.s.w.ssthresh = 500;
        c.s.alpha = 2816;
        // Δ stays 0 (well below Δ_L), so the α update on the +1 gives
        // 2·1·(128 − 64) = 128 afterwards.
        let mut n = 0;
        let ack = |c: &mut Htcp| {
            c.on_ack(&ack_sample(SimTime::from_millis(1), 1, SimDuration::from_millis(100), 999_000))
        };
        while c.s.w.cwnd == 1000 {
            ack(&mut c);
            n += 1;
        }
        assert_eq!((n, c.s.w.cwnd, c.s.w.cnt), (47, 1001, 0));
        assert_eq!(c.s.alpha, 128);
    }

    #[test]
    fn beta_is_min_over_max_rtt_in_128ths_clamped() {
        for (min_j, max_j, expect) in [(25u64, 40u64, 80u64), (25, 26, 102), (25, 100, 64), (2, 4, 64)] {
            let mut c = raw(r#"{"bandwidth_switch": false}"#);
            c.s.modeswitch = true;
            c.s.min_rtt = min_j;
            c.s.max_rtt = max_j;
            c.beta_update();
            // ⌊25·128/40⌋ = 80; ⌊3200/26⌋ = 123 → 102 (BETA_MAX); 32 → 64; and
            // RTT_min = 2 jiffies is not above msecs_to_jiffies(10) = 3 → β_min.
            assert_eq!(c.s.beta, expect, "RTT {min_j}/{max_j}");
        }
    }

    #[test]
    fn rtt_max_tracks_slow_start_samples_within_20ms_steps() {
        // Linux 6.1 measure_rtt: in Open, RTT_max rises to any sample at most
        // msecs_to_jiffies(20) = 5 jiffies above it, before the first loss too.
        let mut c = raw("{}");
        c.measure_rtt(25);
        assert_eq!((c.s.min_rtt, c.s.max_rtt), (25, 25));
        c.measure_rtt(31); // 6 jiffies above: an outlier
        assert_eq!(c.s.max_rtt, 25);
        c.measure_rtt(30);
        c.measure_rtt(35);
        assert_eq!(c.s.max_rtt, 35);
        c.s.open = false; // not in recovery
        c.measure_rtt(36);
        assert_eq!(c.s.max_rtt, 35);
    }

    #[test]
    fn second_loss_backs_off_by_rtt_min_over_rtt_max() {
        // 100 ms path whose queue adds up to 60 ms: RTT_max 160 ms = 40 jiffies,
        // RTT_min 25, β = ⌊25·128/40⌋ = 80 at the second event (the first sets
        // modeswitch and uses 64).
        let mut h = htcp(r#"{"bandwidth_switch": false}"#, 100);
        h.grow_to(100);
        let w = h.cwnd_segs();
        h.loss_and_recover();
        assert_eq!(h.cwnd_segs(), w * 64 / 128);
        while h.rtt < SimDuration::from_millis(160) {
            h.rtt += SimDuration::from_millis(10);
            h.round();
        }
        h.round();
        let w = h.cwnd_segs();
        h.loss();
        assert_eq!(h.cwnd_segs(), w * 80 / 128);
    }

    #[test]
    fn per_rtt_increase_follows_the_integer_factor() {
        // At 100 ms (RTT_min 25 jiffies, scale 8) and β = 0.5 the increase per
        // RTT is the integer factor; between 3 s and 3.3 s after recovery it is
        // 22 to 25 (Eq. 3: 22 to 25.3), measured over three rounds.
        let mut h = htcp(r#"{"bandwidth_switch": false}"#, 100);
        h.grow_to(2000);
        h.loss_and_recover();
        let t0 = h.now;
        while (h.now - t0).as_secs_f64() < 3.0 {
            h.round();
        }
        let w0 = h.cwnd_segs();
        for _ in 0..3 {
            h.round();
        }
        let g = (h.cwnd_segs() - w0) as f64 / 3.0;
        assert!((21.0..=25.0).contains(&g), "growth {g}/RTT");
    }

    #[test]
    fn undo_restores_the_clock_and_rtt_max_not_alpha() {
        let mut h = htcp("{}", 100);
        h.grow_to(100);
        let w = h.cwnd_segs();
        h.loss();
        h.cc.on_spurious_loss(h.now);
        assert_eq!(h.cwnd_segs(), w);
    }

    #[test]
    fn after_an_rto_it_leaves_open_until_the_flight_is_acknowledged() {
        // RTO with 5 segments in flight: the 5 ACKs that repair it are CA_Loss,
        // (no RTT_max or throughput samples there); the next one is Open again.
        let mut h = htcp("{}", 100);
        h.grow_to(50);
        h.cc.on_rto(h.now, 5000, crate::cc::RtoEpisode::New);
        h.rtt = SimDuration::from_millis(104); // 26 jiffies, within 20 ms of 25
        for _ in 0..5 {
            h.ack(1);
        }
        assert_eq!(h.cc.metrics().phase, "recovery");
        h.ack(1);
        assert_ne!(h.cc.metrics().phase, "recovery");
    }

    #[test]
    fn bad_params_name_the_parameter() {
        match Htcp::build(&params(r#"{"beta_min": 0.7, "beta_max": 0.6}"#), &init(10)).unwrap_err() {
            CcError::BadParam { param, .. } => assert_eq!(param, "beta_max"),
            e => panic!("{e}"),
        }
    }
}
