//! Scalable TCP (Kelly, "Scalable TCP: Improving Performance in Highspeed Wide
//! Area Networks", CCR 33(2), 2003; Linux `net/ipv4/tcp_scalable.c`).
//!
//! Read this first: Scalable TCP is MIMD. In congestion avoidance each
//! acknowledged segment adds a = 0.01 segments (so the window grows 1 % per RTT)
//! and a loss removes b = 0.125 of it (Kelly 2003 §2: "cwnd ← cwnd + 0.01" per
//! ACK, "cwnd ← cwnd − ⌈0.125·cwnd⌉" per loss event).
//!
//! Linux implements a = 0.01 as "+1 segment per min(cwnd, 100) acknowledged
//! segments" (`TCP_SCALABLE_AI_CNT` = 100): above 100 segments that is exactly
//! 1 % per RTT, below it Reno's +1 per RTT — Linux's stand-in for Kelly's legacy
//! window (Kelly uses Reno below lwnd = 16). The decrease is cwnd − cwnd/8
//! (`TCP_SCALABLE_MD_SCALE` = 3).
//!
//! `kernel = "2.6.22"`: that kernel counted ACKs, not segments, and used
//! `TCP_SCALABLE_AI_CNT` = 50 "to account for delayed ACK" (+1 after more than
//! min(cwnd, 50) ACKs), with slow start +1 per ACK (`sysctl_tcp_abc` = 0). Linux
//! moved to 100 per acknowledged segment in 2020, once stretch ACKs were counted
//! exactly (Pengcheng Yang's Scalable stretch-ACK fix).

use super::segwin::{undo_to_saved, SegWindow};
use super::{AckSample, CcError, CcInit, CcMetrics, CongestionControl, CongestionEvent, ParamReader, Params, RtoEpisode};
use netunits::SimTime;

/// Scalable TCP's parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScalableConfig {
    /// Count ACKs with AI count 50 as Linux 2.6.22 did (else segments, 100).
    pub per_ack_2_6_22: bool,
    /// Segments (or ACKs) per +1 once the window exceeds it: 1/a (Kelly: a = 0.01).
    pub ai_cnt: u32,
    /// Decrease shift: loss leaves cwnd − cwnd >> shift (3 → b = 0.125).
    pub md_shift: u32,
}

impl ScalableConfig {
    /// Parameter line for `fairlab list ccas`.
    pub const PARAMS: &'static str = "kernel = \"modern\" | \"2.6.22\" (ai_cnt 100 per segment, or 50 per ACK), ai_cnt, md_shift = 3 (b = 1/8)";

    /// Read and validate from scenario parameters.
    pub fn from_params(p: &Params) -> Result<Self, CcError> {
        let mut r = ParamReader::new("scalable", p);
        let old = r.choice("kernel", "modern", &["modern", "2.6.22"], "\"modern\" or \"2.6.22\"")? == "2.6.22";
        let ai = r.u64("ai_cnt", if old { 50 } else { 100 }, 1, 100_000, "an integer in [1, 100000] (Kelly a = 0.01 → 100)")?;
        let md = r.u64("md_shift", 3, 1, 10, "an integer in [1, 10] (b = 2^-md_shift; Kelly b = 0.125 → 3)")?;
        r.finish()?;
        Ok(ScalableConfig { per_ack_2_6_22: old, ai_cnt: ai as u32, md_shift: md as u32 })
    }
}

/// Scalable TCP.
#[derive(Clone, Debug)]
pub struct Scalable {
    cfg: ScalableConfig,
    w: SegWindow,
    /// The window before the last reduction, for undo.
    undo: Option<SegWindow>,
}

impl Scalable {
    /// A Scalable TCP controller.
    pub fn new(cfg: ScalableConfig, init: &CcInit) -> Self {
        Scalable { cfg, w: SegWindow::new(init), undo: None }
    }

    /// Name-table constructor.
    pub fn build(p: &Params, init: &CcInit) -> Result<Box<dyn CongestionControl>, CcError> {
        Ok(Box::new(Scalable::new(ScalableConfig::from_params(p)?, init)))
    }

    fn ssthresh_for(&self, cwnd: u32) -> u32 {
        (cwnd - (cwnd >> self.cfg.md_shift)).max(2)
    }
}

impl CongestionControl for Scalable {
    fn name(&self) -> &'static str {
        "scalable"
    }

    fn cwnd(&self) -> u64 {
        self.w.cwnd_bytes()
    }

    fn ssthresh(&self) -> u64 {
        self.w.ssthresh_bytes()
    }

    fn on_ack(&mut self, ack: &AckSample) {
        if ack.acked_segments == 0 || ack.in_recovery {
            return;
        }
        self.w.in_recovery = false;
        if ack.app_limited {
            return;
        }
        let w = &mut self.w;
        if self.cfg.per_ack_2_6_22 {
            if w.cwnd <= w.ssthresh {
                w.cwnd += 1;
            } else {
                w.cnt += 1;
                if w.cnt > w.cwnd.min(self.cfg.ai_cnt) {
                    w.cwnd += 1;
                    w.cnt = 0;
                }
            }
            return;
        }
        let mut acked = ack.acked_segments;
        if w.in_slow_start() {
            acked = w.slow_start(acked);
            if acked == 0 {
                return;
            }
        }
        let n = w.cwnd.min(self.cfg.ai_cnt);
        w.cong_avoid_ai(n, acked);
    }

    fn on_congestion_event(&mut self, _ev: &CongestionEvent) {
        self.undo = Some(self.w);
        let ss = self.ssthresh_for(self.w.cwnd);
        self.w.enter_recovery(ss);
    }

    fn on_recovery_exit(&mut self, _now: SimTime) {
        self.w.in_recovery = false;
    }

    fn on_rto(&mut self, _now: SimTime, _in_flight: u64, episode: RtoEpisode) {
        let ss = episode.ssthresh(self.w.ssthresh, || {
            self.undo = Some(self.w);
            self.ssthresh_for(self.w.cwnd)
        });
        self.w.enter_loss(ss);
    }

    fn on_spurious_loss(&mut self, _now: SimTime) {
        undo_to_saved(&mut self.w, &mut self.undo, |w| w);
    }

    fn on_idle_restart(&mut self, _now: SimTime) {
        self.w.idle_restart();
    }

    fn metrics(&self) -> CcMetrics {
        self.w.metrics(if self.w.cwnd >= self.cfg.ai_cnt { "scalable" } else { "legacy" })
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{init, params, Harness};
    use super::*;
    use netunits::SimDuration;

    fn sc(json: &str) -> Harness {
        Harness::new(Scalable::build(&params(json), &init(10)).unwrap(), SimDuration::from_millis(100))
    }

    #[test]
    fn loss_leaves_seven_eighths() {
        let mut h = sc("{}");
        h.grow_to(1000);
        let w = h.cwnd_segs();
        h.loss_and_recover();
        assert_eq!(h.cwnd_segs(), w - w / 8);
    }

    #[test]
    fn grows_one_percent_per_rtt_above_100_segments() {
        let mut h = sc("{}");
        h.grow_to(1200);
        h.loss_and_recover(); // 1050
        let w0 = h.cwnd_segs() as f64;
        for k in 1..=20 {
            h.round();
            let expect = w0 * 1.01f64.powi(k);
            // Integer steps lose at most one segment per round to truncation.
            let got = h.cwnd_segs() as f64;
            assert!(got <= expect + 1.0 && got >= expect - k as f64, "round {k}: {got} vs {expect:.1}");
        }
    }

    #[test]
    fn below_100_segments_it_is_reno_like() {
        let mut h = sc("{}");
        h.grow_to(60);
        h.loss_and_recover();
        let w0 = h.cwnd_segs();
        for k in 1..=5 {
            h.round();
            assert_eq!(h.cwnd_segs(), w0 + k);
        }
    }

    #[test]
    fn kernel_2_6_22_counts_acks_with_ai_50() {
        // Delayed ACKs (2 segments each): 50 ACKs ≈ 100 segments → ≈ 1 % per RTT.
        let mut h = sc(r#"{"kernel": "2.6.22"}"#);
        h.segs_per_ack = 2;
        h.grow_to(1000);
        h.loss_and_recover();
        let w0 = h.cwnd_segs() as f64;
        for _ in 0..10 {
            h.round();
        }
        // +1 per 51 ACKs, w/2 ACKs per round: growth w/102 per RTT.
        let expect = w0 * (1.0 + 1.0 / 102.0f64).powi(10);
        assert!((h.cwnd_segs() as f64 - expect).abs() <= 10.0, "{} vs {expect:.1}", h.cwnd_segs());
    }

    #[test]
    fn bad_params_name_the_parameter() {
        match Scalable::build(&params(r#"{"md_shift": 0}"#), &init(10)).unwrap_err() {
            CcError::BadParam { param, .. } => assert_eq!(param, "md_shift"),
            e => panic!("{e}"),
        }
    }
}
