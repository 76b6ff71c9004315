//! TCP Veno (Fu & Liew, "TCP Veno: TCP Enhancement for Transmission over
//! Wireless Access Networks", IEEE JSAC 21(2), 2003; Linux `net/ipv4/tcp_veno.c`).
//!
//! Read this first: Veno is Reno that uses Vegas's backlog estimate to tell
//! congestion losses from random (wireless) losses (paper §II):
//!
//! - N = (cwnd/BaseRTT − cwnd/RTT)·BaseRTT = cwnd·(RTT − BaseRTT)/RTT, the
//!   packets this flow keeps queued (Vegas "Diff" × BaseRTT), with BaseRTT the
//!   smallest RTT seen and RTT the smallest sample since the last ACK (Linux).
//! - β = 3 packets: N < β is the "non-congestive" state, N ≥ β "congestive".
//! - Increase (§II-B): +1 segment per RTT when N < β; when N ≥ β only every
//!   other RTT (Linux: the +1 is skipped on alternate full windows).
//! - Decrease (§II-A): on loss ssthresh = cwnd·4/5 if N < β (probably a random
//!   loss), else cwnd/2 (Reno).
//! - With fewer than three RTT samples since the connection started (or
//!   restarted from idle) Veno is plain Reno (Linux `cntrtt <= 2`; Linux 6.1
//!   never resets the count on a loss, `veno_enable` leaves it).
//!
//! Arithmetic as Linux 6.1's `tcp_veno_cong_avoid`: RTTs in whole µs plus one
//! (`vrtt`), N doubled (`V_PARAM_SHIFT` = 1) with the expected window rounded
//! down, so 2N = 2W − ⌊2W·BaseRTT/RTT⌋ is compared with 2β = 6. Slow start is
//! Linux's (per acknowledged segment). A restart from idle re-initialises Veno,
//! BaseRTT included (`tcp_veno_cwnd_event` → `tcp_veno_init`).

use super::segwin::{undo_to_saved, SegWindow};
use super::{AckSample, CcError, CcInit, CcMetrics, CongestionControl, CongestionEvent, ParamReader, Params, RtoEpisode};
use netunits::{SimDuration, SimTime};

/// Veno's parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct VenoConfig {
    /// β, the backlog (packets) separating random from congestive loss (3).
    pub beta: f64,
    /// Window kept after a non-congestive loss (4/5).
    pub random_loss_factor: f64,
}

impl Default for VenoConfig {
    fn default() -> Self {
        VenoConfig { beta: 3.0, random_loss_factor: 0.8 }
    }
}

impl VenoConfig {
    /// Parameter line for `fairlab list ccas`.
    pub const PARAMS: &'static str = "beta = 3 (packets of backlog), random_loss_factor = 0.8";

    /// Read and validate from scenario parameters.
    pub fn from_params(p: &Params) -> Result<Self, CcError> {
        let mut r = ParamReader::new("veno", p);
        let beta = r.f64("beta", 3.0, 0.0, 1e6, "packets in [0, 1e6] (Fu & Liew: 3)")?;
        let f = r.f64("random_loss_factor", 0.8, 0.5, 1.0, "a number in [0.5, 1] (Fu & Liew: 4/5)")?;
        r.finish()?;
        Ok(VenoConfig { beta, random_loss_factor: f })
    }
}

#[derive(Clone, Copy, Debug)]
struct State {
    w: SegWindow,
    base_rtt: Option<SimDuration>,
    /// RTT samples since Veno was (re)enabled.
    cntrtt: u32,
    /// Backlog estimate N (packets) from the last computation.
    n: f64,
    /// Congestive state: skip the next +1.
    inc: bool,
}

/// TCP Veno.
#[derive(Clone, Debug)]
pub struct Veno {
    cfg: VenoConfig,
    s: State,
    undo: Option<State>,
}

impl Veno {
    /// A Veno controller.
    pub fn new(cfg: VenoConfig, init: &CcInit) -> Self {
        Veno { cfg, s: State { w: SegWindow::new(init), base_rtt: None, cntrtt: 0, n: 0.0, inc: true }, undo: None }
    }

    /// Name-table constructor.
    pub fn build(p: &Params, init: &CcInit) -> Result<Box<dyn CongestionControl>, CcError> {
        Ok(Box::new(Veno::new(VenoConfig::from_params(p)?, init)))
    }

    /// Backlog N from the last ACK, packets.
    pub fn backlog(&self) -> f64 {
        self.s.n
    }

    fn ssthresh_for(&self) -> u32 {
        let w = self.s.w.cwnd;
        if self.s.n < self.cfg.beta {
            ((w as f64 * self.cfg.random_loss_factor) as u32).max(2)
        } else {
            (w / 2).max(2)
        }
    }

    /// `tcp_veno_init`: BaseRTT forgotten, the next congestive +1 allowed. The
    /// sample count is not reset (6.1 never resets `cntrtt`; the struct is
    /// zeroed once, at connection start).
    fn forget_base_rtt(&mut self) {
        self.s.base_rtt = None;
        self.s.inc = true;
    }
}

impl CongestionControl for Veno {
    fn name(&self) -> &'static str {
        "veno"
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
        let rtt = ack.rtt;
        if let Some(r) = rtt {
            self.s.base_rtt = Some(self.s.base_rtt.map_or(r, |b| b.min(r)));
            self.s.cntrtt += 1;
        }
        if ack.in_recovery {
            return;
        }
        // Open again: Linux `veno_state` re-enables and restarts the count.
        self.s.w.in_recovery = false;
        if ack.app_limited {
            return;
        }
        let (Some(r), Some(base), true) = (rtt, self.s.base_rtt, self.s.cntrtt > 2) else {
            self.s.w.reno_cong_avoid(ack.acked_segments);
            return;
        };
        let w = &mut self.s.w;
        // 2N = 2·cwnd − ⌊2·cwnd·BaseRTT/RTT⌋, RTTs in µs + 1 (Linux `vrtt`).
        let vrtt = |d: SimDuration| d.as_nanos() / 1000 + 1;
        let target2 = (w.cwnd as u64 * vrtt(base) * 2) / vrtt(r);
        self.s.n = ((2 * w.cwnd as u64).saturating_sub(target2)) as f64 / 2.0;
        let mut acked = ack.acked_segments;
        if w.in_slow_start() {
            acked = w.slow_start(acked);
            if acked == 0 {
                return;
            }
        }
        if self.s.n < self.cfg.beta {
            let cw = w.cwnd;
            w.cong_avoid_ai(cw, acked);
        } else if w.cnt >= w.cwnd {
            // Congestive state: a full window earns +1 only every other time.
            if self.s.inc {
                w.cwnd += 1;
                self.s.inc = false;
            } else {
                self.s.inc = true;
            }
            w.cnt = 0;
        } else {
            w.cnt += acked;
        }
        w.cwnd = w.cwnd.max(2);
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
    }

    fn on_spurious_loss(&mut self, _now: SimTime) {
        if let Some(cur) = undo_to_saved(&mut self.s, &mut self.undo, |s| &mut s.w) {
            // What was measured about the path since the reduction stays: an undo
            // takes back a window decision, not what was learnt.
            self.s.base_rtt = cur.base_rtt;
        }
    }

    /// Linux answers `CA_EVENT_CWND_RESTART` with `tcp_veno_init` (the window
    /// restart itself is `tcp_cwnd_restart`'s).
    fn on_idle_restart(&mut self, _now: SimTime) {
        self.s.w.idle_restart();
        self.forget_base_rtt();
    }

    /// Linux `tcp_veno_cwnd_event` answers `CA_EVENT_TX_START` (a data packet,
    /// new or retransmitted, sent while `tcp_packets_in_flight` is 0: the first
    /// packet, and the first retransmission after a timeout) with
    /// `tcp_veno_init`: BaseRTT is learnt again from the samples that follow,
    /// which carry whatever queue the other flows hold, so N reads low and the
    /// next loss cuts by 1/5.
    fn on_packet_sent(&mut self, _now: SimTime, bytes: u64, in_flight: u64) {
        if super::starts_transmission(bytes, in_flight, self.s.w.mss) {
            self.forget_base_rtt();
        }
    }

    fn metrics(&self) -> CcMetrics {
        self.s.w.metrics(if self.s.n < self.cfg.beta { "non_congestive" } else { "congestive" })
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{ack_sample, init, params, Harness, MSS};
    use super::*;

    fn veno() -> Harness {
        Harness::new(Veno::build(&params("{}"), &init(10)).unwrap(), SimDuration::from_millis(100))
    }

    /// Grow to 50 segments without queueing, lose, recover.
    fn in_ca() -> Harness {
        let mut h = veno();
        h.grow_to(50);
        h.loss_and_recover();
        h
    }

    #[test]
    fn backlog_is_vegas_diff_times_base_rtt() {
        let mut c = Veno::new(VenoConfig::default(), &init(10));
        for rtt in [100u64, 100, 100, 125] {
            c.on_ack(&AckSample { min_rtt: SimDuration::from_millis(100), ..ack_sample(SimTime::from_secs(1), 1, SimDuration::from_millis(rtt), 9000) });
        }
        // Linux: 2N = 2W − ⌊2W·vBase/vRTT⌋ with W the window when N was
        // computed (before this ACK's slow-start increment), vRTT = µs + 1:
        // W = 13 → 26 − ⌊26·100001/125001⌋ = 26 − 20 = 6, N = 3 (exactly
        // (W/BaseRTT − W/RTT)·BaseRTT = 2.6 would be below β).
        let w = c.cwnd() / 1000 - 1;
        assert_eq!(w, 13);
        assert_eq!(c.backlog(), 3.0);
    }

    #[test]
    fn a_loss_does_not_reset_the_sample_count() {
        // Linux 6.1 resets cntrtt only in tcp_veno_init, so right after recovery
        // the first ACK is judged by Veno: with 30 % queueing delay N ≥ 3 and the
        // next loss halves, however few samples followed the first one.
        let mut h = in_ca();
        h.rtt = SimDuration::from_millis(130);
        h.ack(1);
        let w = h.cwnd_segs();
        h.loss();
        assert_eq!(h.cwnd_segs(), w / 2);
    }

    #[test]
    fn random_loss_keeps_four_fifths() {
        let mut h = in_ca();
        for _ in 0..3 {
            h.round();
        }
        let w = h.cwnd_segs();
        h.loss();
        assert_eq!(h.cwnd_segs(), w * 4 / 5);
    }

    #[test]
    fn congestive_loss_halves() {
        let mut h = in_ca();
        // 30 % queueing delay → N = 0.3/1.3·W ≈ 0.23W ≥ 3.
        h.rtt = SimDuration::from_millis(130);
        for _ in 0..3 {
            h.round();
        }
        let w = h.cwnd_segs();
        h.loss();
        assert_eq!(h.cwnd_segs(), w / 2);
    }

    #[test]
    fn growth_is_one_per_rtt_without_backlog_and_every_other_rtt_with_it() {
        let mut h = in_ca();
        h.round();
        let w = h.cwnd_segs();
        for _ in 0..6 {
            h.round();
        }
        assert_eq!(h.cwnd_segs(), w + 6);
        h.rtt = SimDuration::from_millis(150);
        h.round();
        let w = h.cwnd_segs();
        for _ in 0..6 {
            h.round();
        }
        assert!((h.cwnd_segs() - w).abs_diff(3) <= 1, "+{} in 6 congestive RTTs", h.cwnd_segs() - w);
    }

    #[test]
    fn a_packet_sent_with_nothing_in_flight_forgets_base_rtt() {
        // 30 % queueing delay over a 100-ms BaseRTT is congestive (N ≥ 3, the
        // loss halves: congestive_loss_halves). After a send with nothing in
        // flight (CA_EVENT_TX_START → tcp_veno_init) BaseRTT is relearnt as
        // 130 ms: N = 0 and the loss keeps four fifths.
        let mut h = in_ca();
        h.cc.on_packet_sent(h.now, MSS, MSS);
        h.rtt = SimDuration::from_millis(130);
        for _ in 0..3 {
            h.round();
        }
        let w = h.cwnd_segs();
        h.loss();
        assert_eq!(h.cwnd_segs(), w * 4 / 5);
    }

    #[test]
    fn an_idle_restart_keeps_the_sample_count_so_the_next_ack_is_judged() {
        // 30 % queueing delay: N ≥ 3 (congestive). After an idle restart Linux
        // has forgotten BaseRTT but not cntrtt (> 2), so the very next ACK sets
        // BaseRTT = 130 ms and computes N = 0 there: the next loss keeps four
        // fifths of the restarted window. Had the count been reset, that ACK
        // would grow the window as Reno, N would stay congestive and the loss halve.
        let mut h = in_ca();
        h.rtt = SimDuration::from_millis(130);
        for _ in 0..3 {
            h.round();
        }
        h.cc.on_idle_restart(h.now);
        h.ack(1);
        let w = h.cwnd_segs();
        h.loss();
        assert_eq!(h.cwnd_segs(), w * 4 / 5);
    }

    #[test]
    fn bad_params_name_the_parameter() {
        match Veno::build(&params(r#"{"random_loss_factor": 0.2}"#), &init(10)).unwrap_err() {
            CcError::BadParam { param, .. } => assert_eq!(param, "random_loss_factor"),
            e => panic!("{e}"),
        }
    }
}
