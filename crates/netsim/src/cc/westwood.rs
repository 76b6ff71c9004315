//! TCP Westwood+ (Mascolo, Casetti, Gerla, Sanadidi, Wang, "TCP Westwood:
//! Bandwidth Estimation for Enhanced Transport over Wireless Links", MobiCom
//! 2001; Grieco & Mascolo, "Performance evaluation and comparison of Westwood+,
//! New Reno, and Vegas TCP congestion control", ACM CCR 34(2), 2004; Linux
//! `tcp_westwood.c`).
//!
//! Read this first. Probing is Reno's. What differs is the reaction to loss:
//! instead of halving, Westwood+ sets the window to the bandwidth it measured
//! times the smallest RTT, i.e. the pipe size without queue ("faster recovery"):
//!
//! ```text
//! ssthresh = BWE · RTT_min / MSS        (segments, at least 2)
//! fast recovery: cwnd = min(cwnd, ssthresh)   RTO: cwnd = 1
//! ```
//!
//! BWE (Westwood+, the 2004 fix of the 2001 per-ACK estimator): once per RTT
//! (but at least every 50 ms), take `bytes ACKed in the interval / interval`
//! and low-pass it, `new = 7/8 old + 1/8 sample`. Linux runs the sample through
//! two such stages in cascade (`bw_ns_est`, then `bw_est`); we do the same.
//! Because a random (non-congestion) loss leaves BWE intact, Westwood+ keeps
//! far more of its window than Reno on lossy links — the point of the design.
//!
//! As Linux 6.1 does it: a loss episode starts with Reno's halving
//! (`tcp_reno_ssthresh`), so recovery's PRR steers towards cwnd/2, and when
//! recovery completes (`CA_EVENT_COMPLETE_CWR`) `cwnd = ssthresh = BWE·RTT_min`
//! — a jump up when the pipe estimate exceeds half the window. An RTO sets
//! ssthresh = BWE·RTT_min at once (`CA_EVENT_LOSS`).
//!
//! Arithmetic in the kernel's units ([`super::jiffies`], HZ = 250): RTT samples
//! rounded up to whole 4 ms jiffies, intervals in whole jiffies, the minimum
//! interval HZ/20 = 12 jiffies (48 ms), bandwidth in whole bytes per jiffy and
//! integer 7/8 filters. The rounded-up RTT_min matters: at 25.1 ms it is 7
//! jiffies (28 ms), so BWE·RTT_min is 12 % above the pipe.
//!
//! Deviations: before the first bandwidth sample Linux's BWE is 0 and its
//! window after recovery 2 segments; here the window is left alone then. The
//! first sampling interval starts at the first ACK (Linux: at connection set-up).

use super::jiffies::{jiffies, rtt_jiffies, HZ};
use super::seg_reno::SegReno;
use super::{AckSample, CcError, CcInit, CongestionControl, CongestionEvent, ParamReader, Params, RtoEpisode};
use netunits::{SimDuration, SimTime};

/// Westwood+ parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WestwoodConfig {
    /// Shortest bandwidth-sampling interval, 50 ms (Linux
    /// `TCP_WESTWOOD_RTT_MIN` = HZ/20: shorter samples are too noisy).
    pub min_sample_interval: SimDuration,
}

impl Default for WestwoodConfig {
    fn default() -> Self {
        WestwoodConfig { min_sample_interval: SimDuration::from_millis(50) }
    }
}

impl WestwoodConfig {
    /// Parameter line for `fairlab list ccas`.
    pub const PARAMS: &'static str = "min_sample_ms = 50 (shortest bandwidth sample interval)";

    /// Read and validate from scenario parameters.
    pub fn from_params(p: &Params) -> Result<Self, CcError> {
        let mut r = ParamReader::new("westwood", p);
        let ms = r.u64("min_sample_ms", 50, 1, 10_000, "an integer in [1, 10000] ms (default 50, Linux TCP_WESTWOOD_RTT_MIN)")?;
        r.finish()?;
        Ok(WestwoodConfig { min_sample_interval: SimDuration::from_millis(ms) })
    }
}

/// Westwood+ state.
#[derive(Clone, Debug)]
pub struct Westwood {
    mss: u64,
    /// Shortest sampling interval in jiffies (HZ/20 = 12 by default, as Linux).
    min_interval_j: u64,
    w: SegReno,
    /// Bytes ACKed in the current sampling interval.
    bk: u64,
    /// Start of the current sampling interval, jiffies (first ACK seen).
    win_start: Option<u64>,
    /// First filter stage, bytes per jiffy.
    bw_ns_est: u64,
    /// Second filter stage: the bandwidth estimate BWE, bytes per jiffy.
    bw_est: u64,
    /// Bandwidth samples taken so far.
    samples: u64,
    /// Latest RTT sample, jiffies (rounded up).
    rtt: Option<u64>,
    /// Smallest RTT since the last reset, jiffies.
    rtt_min: Option<u64>,
    /// After an RTO, take the next RTT sample as the new minimum (Linux
    /// `reset_rtt_min`: the path may have changed).
    reset_rtt_min: bool,
}

impl Westwood {
    /// A Westwood+ controller at the initial window.
    pub fn new(cfg: WestwoodConfig, init: &CcInit) -> Self {
        Westwood {
            mss: init.mss.max(1),
            min_interval_j: (cfg.min_sample_interval.as_nanos() as u128 * HZ as u128 / 1_000_000_000).max(1) as u64,
            w: SegReno::new(init.initial_cwnd_segments),
            bk: 0,
            win_start: None,
            bw_ns_est: 0,
            bw_est: 0,
            samples: 0,
            rtt: None,
            rtt_min: None,
            reset_rtt_min: true,
        }
    }

    /// Name-table constructor.
    pub fn build(p: &Params, init: &CcInit) -> Result<Box<dyn CongestionControl>, CcError> {
        Ok(Box::new(Westwood::new(WestwoodConfig::from_params(p)?, init)))
    }

    /// The bandwidth estimate BWE in bytes per second.
    pub fn bandwidth_estimate(&self) -> f64 {
        (self.bw_est * HZ) as f64
    }

    /// Number of bandwidth samples taken.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// RTT_min as Westwood+ tracks it (whole jiffies).
    pub fn rtt_min(&self) -> Option<SimDuration> {
        self.rtt_min.map(|j| SimDuration::from_nanos(j * 1_000_000_000 / HZ))
    }

    /// Close the sampling interval if it has lasted more than max(RTT, HZ/20)
    /// jiffies (Linux `westwood_update_window`).
    fn update_window(&mut self, now_j: u64) {
        let Some(start) = self.win_start else {
            self.win_start = Some(now_j);
            return;
        };
        let Some(rtt) = self.rtt else { return };
        let delta = now_j.saturating_sub(start);
        if delta > rtt.max(self.min_interval_j) {
            self.filter(self.bk / delta);
            self.bk = 0;
            self.win_start = Some(now_j);
        }
    }

    /// Two cascaded integer 7/8 low-pass stages (Linux `westwood_do_filter`);
    /// while both are 0 a sample fills both.
    fn filter(&mut self, sample: u64) {
        if self.bw_ns_est == 0 && self.bw_est == 0 {
            self.bw_ns_est = sample;
            self.bw_est = sample;
        } else {
            self.bw_ns_est = (7 * self.bw_ns_est + sample) >> 3;
            self.bw_est = (7 * self.bw_est + self.bw_ns_est) >> 3;
        }
        self.samples += 1;
    }

    /// BWE · RTT_min in segments, at least 2 (Linux `tcp_westwood_bw_rttmin`);
    /// `None` before the first bandwidth sample.
    fn bw_rttmin_segments(&self) -> Option<u64> {
        let rtt_min = self.rtt_min?;
        if self.samples == 0 {
            return None;
        }
        Some((self.bw_est * rtt_min / self.mss).max(2))
    }
}

impl CongestionControl for Westwood {
    fn name(&self) -> &'static str {
        "westwood"
    }

    fn cwnd(&self) -> u64 {
        self.w.cwnd * self.mss
    }

    fn ssthresh(&self) -> u64 {
        self.w.ssthresh.saturating_mul(self.mss)
    }

    fn on_ack(&mut self, ack: &AckSample) {
        if let Some(r) = ack.rtt.filter(|r| r.as_nanos() >= 1000) {
            self.rtt = Some(rtt_jiffies(r));
        }
        // Bandwidth accounting runs on every ACK, recovery included: ACKs in
        // recovery measure delivery as well (Linux `tcp_westwood_ack`).
        self.update_window(jiffies(ack.now));
        self.bk += ack.acked_bytes;
        if let Some(r) = self.rtt {
            self.rtt_min = Some(match self.rtt_min {
                Some(m) if !self.reset_rtt_min => m.min(r),
                _ => r,
            });
            self.reset_rtt_min = false;
        }
        self.w.reno_on_ack(ack);
    }

    /// Linux: the `ssthresh` op is `tcp_reno_ssthresh`; the Westwood rule waits
    /// for the end of recovery.
    fn on_congestion_event(&mut self, _ev: &CongestionEvent) {
        self.w.halve();
    }

    /// Linux `CA_EVENT_COMPLETE_CWR`: cwnd = ssthresh = BWE·RTT_min, with the
    /// estimate as it is at the end of recovery.
    fn on_recovery_exit(&mut self, _now: SimTime) {
        if let Some(s) = self.bw_rttmin_segments() {
            self.w.ssthresh = s;
            self.w.cwnd = s;
        }
    }

    /// Linux `CA_EVENT_LOSS`: ssthresh = BWE·RTT_min, cwnd = 1, and RTT_min is
    /// re-learnt from the next sample.
    fn on_rto(&mut self, _now: SimTime, _in_flight: u64, episode: RtoEpisode) {
        // Linux: ssthresh from BWE·RTT_min is CA_EVENT_LOSS's, sent only for a
        // new episode (`tcp_enter_loss`).
        match (episode, self.bw_rttmin_segments()) {
            (RtoEpisode::New, Some(s)) => self.w.rto_with(s, episode),
            _ => self.w.rto(episode),
        }
        if episode == RtoEpisode::New {
            self.reset_rtt_min = true;
        }
    }

    fn on_spurious_loss(&mut self, _now: SimTime) {
        self.w.undo();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::testpath::{Path, Synth, PATH_MSS};
    use crate::cc::{build, CongestionSignal};
    use netunits::Bandwidth;

    fn init() -> CcInit {
        crate::cc::testkit::init(10)
    }

    /// ACK one segment every `gap` with RTT `rtt` until `n` more bandwidth
    /// samples have been taken.
    fn ack_at_rate(s: &mut Synth<Westwood>, gap: SimDuration, rtt: SimDuration, n: u64) {
        let target = s.cc.samples() + n;
        while s.cc.samples() < target {
            s.now += gap;
            s.ack(rtt);
        }
    }

    #[test]
    fn bandwidth_estimate_is_acked_bytes_over_the_interval() {
        let mut s = Synth::new(Westwood::new(WestwoodConfig::default(), &init()));
        // 1 segment (1000 B) per ms = 1 MB/s.
        ack_at_rate(&mut s, SimDuration::from_millis(1), SimDuration::from_millis(100), 5);
        assert!((s.cc.bandwidth_estimate() - 1e6).abs() < 1e6 * 0.01, "{}", s.cc.bandwidth_estimate());
    }

    #[test]
    fn estimate_follows_a_step_as_two_cascaded_7_8_filters() {
        // After a step R1 → R2 the two-stage filter's error after n samples is
        // (R1 − R2)·a^n·(1 + n(1 − a)) with a = 7/8 (first stage a^n, second the
        // convolution of the two geometric responses).
        let mut s = Synth::new(Westwood::new(WestwoodConfig::default(), &init()));
        let rtt = SimDuration::from_millis(100);
        ack_at_rate(&mut s, SimDuration::from_millis(1), rtt, 4); // R1 = 1e6 B/s
        let (r1, r2) = (1e6, 2e6);
        for n in 1..=12u64 {
            ack_at_rate(&mut s, SimDuration::from_micros(500), rtt, 1); // R2 = 2e6 B/s
            let a: f64 = 7.0 / 8.0;
            let want = r2 + (r1 - r2) * a.powi(n as i32) * (1.0 + n as f64 / 8.0);
            let got = s.cc.bandwidth_estimate();
            assert!((got - want).abs() < 0.01 * r2, "n={n}: {got} vs {want}");
        }
    }

    #[test]
    fn loss_sets_ssthresh_to_bwe_times_rtt_min() {
        let mut s = Synth::new(Westwood::new(WestwoodConfig::default(), &init()));
        // 1 MB/s with RTT_min 80 ms (one early sample), then 100 ms samples.
        s.ack(SimDuration::from_millis(80));
        ack_at_rate(&mut s, SimDuration::from_millis(1), SimDuration::from_millis(100), 10);
        // 80 ms is 20 jiffies exactly.
        assert_eq!(s.cc.rtt_min(), Some(SimDuration::from_millis(80)));
        // BWE = 1e6 B/s = 4000 B per jiffy; BWE · RTT_min = 4000 · 20 = 80 000 B
        // = 80 segments (Linux tcp_westwood_bw_rttmin).
        let cwnd = s.cwnd();
        assert!(cwnd > 160, "window {cwnd} must exceed twice the pipe for the test");
        s.loss(CongestionSignal::Loss);
        let bw_per_jiffy = (s.cc.bandwidth_estimate() / 250.0) as u64;
        let want = bw_per_jiffy * 20 / PATH_MSS;
        assert!((79..=80).contains(&want), "{want}");
        // Linux's ssthresh op is Reno's: recovery steers towards cwnd/2 ...
        assert_eq!(s.cwnd(), cwnd / 2);
        assert_eq!(s.cc.ssthresh(), cwnd / 2 * PATH_MSS);
        // ... and recovery's end (COMPLETE_CWR) sets cwnd = ssthresh = BWE·RTT_min.
        s.cc.on_recovery_exit(s.now);
        assert_eq!(s.cwnd(), want);
        assert_eq!(s.cc.ssthresh(), want * PATH_MSS);
        s.cc.on_rto(s.now, 0, crate::cc::RtoEpisode::New);
        assert_eq!(s.cwnd(), 1, "RTO: one segment");
        assert_eq!(s.cc.ssthresh(), want * PATH_MSS, "RTO: ssthresh = BWE·RTT_min");
    }

    #[test]
    fn rtt_min_counts_in_whole_jiffies_rounded_up() {
        // 1 MB/s ≈ 4000 B per jiffy (the integer filters settle a little
        // below) with RTT 25.1 ms: RTT_min = ⌈25.1/4⌉ = 7 jiffies, so the window
        // after recovery is ⌊BWE·7/1000⌋ ≈ 27–28 segments where the pipe holds
        // 25.1 (Linux usecs_to_jiffies in tcp_westwood_pkts_acked).
        let mut s = Synth::new(Westwood::new(WestwoodConfig::default(), &init()));
        ack_at_rate(&mut s, SimDuration::from_millis(1), SimDuration::from_micros(25_100), 30);
        assert_eq!(s.cc.rtt_min(), Some(SimDuration::from_millis(28)));
        let bw_per_jiffy = (s.cc.bandwidth_estimate() / 250.0) as u64;
        assert!((3950..=4000).contains(&bw_per_jiffy), "{bw_per_jiffy}");
        s.loss(CongestionSignal::Loss);
        s.cc.on_recovery_exit(s.now);
        assert_eq!(s.cwnd(), bw_per_jiffy * 7 / 1000);
        assert!(s.cwnd() >= 27);
    }

    #[test]
    fn loss_before_any_bandwidth_sample_halves_like_reno() {
        let mut s = Synth::new(Westwood::new(WestwoodConfig::default(), &init()));
        s.ack(SimDuration::from_millis(100));
        s.loss(CongestionSignal::Loss);
        assert_eq!(s.cwnd(), 11 / 2);
    }

    #[test]
    fn under_random_loss_westwood_fills_the_link_better_than_reno() {
        // 10 Mbit/s, 40 ms, 1% random loss, buffer of one BDP. Reno's rate is
        // bounded by Mathis et al.: ≈ 1.22·MSS/(RTT·√p) ≈ 2.4 Mbit/s; Westwood+
        // keeps cwnd ≈ BWE·RTT_min after a random loss, so it should do clearly
        // better (Mascolo et al. 2001 §4; Grieco & Mascolo 2004).
        let run = |name: &str| {
            let mut p = Path::new(Bandwidth::from_mbps(10), 50);
            p.random_loss = 0.01;
            let f = p.add(build(name, &Params::new(), &init()).unwrap(), SimDuration::from_millis(40), SimTime::ZERO);
            p.run_until(SimTime::from_secs(30));
            p.goodput_bps(f)
        };
        let (ww, reno) = (run("westwood"), run("reno"));
        eprintln!("goodput under 1% loss: westwood {ww:.0} bit/s, reno {reno:.0} bit/s");
        assert!(reno < 4.0e6, "reno {reno} should be near its Mathis bound");
        assert!(ww > 1.3 * reno, "westwood {ww} vs reno {reno}");
    }

    #[test]
    fn params_are_validated() {
        let p = |s: &str| match serde_json::from_str::<serde_json::Value>(s).unwrap() {
            serde_json::Value::Object(m) => m,
            _ => unreachable!(),
        };
        let e = Westwood::build(&p(r#"{"min_sample_ms": 0}"#), &init()).unwrap_err();
        assert!(matches!(e, CcError::BadParam { param: "min_sample_ms", .. }), "{e}");
        let e = Westwood::build(&p(r#"{"beta": 1}"#), &init()).unwrap_err();
        assert!(e.to_string().contains("beta"));
    }
}
