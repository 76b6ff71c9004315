//! YeAH-TCP (Baiocchi, Castellani & Vacirca, "YeAH-TCP: Yet Another Highspeed
//! TCP", PFLDnet 2007; Linux `net/ipv4/tcp_yeah.c`).
//!
//! Read this first: YeAH switches between a fast mode (Scalable TCP's increase)
//! and a slow mode (Reno's) by looking at the queue it builds (paper §3):
//!
//! - Once per RTT, with RTT_min the smallest RTT sample of that round and
//!   RTT_base the smallest ever: Q = cwnd·(RTT_min − RTT_base)/RTT_min packets
//!   queued by this flow, and L = (RTT_min − RTT_base)/RTT_base.
//! - Slow mode when Q > Q_max = 80 packets or L > ϕ = 1/8; otherwise fast mode.
//! - Precautionary decongestion (§3.2): in slow mode with Q > Q_max the window
//!   drops by min(Q/γ, cwnd/2^ε) with γ = 1, ε = 1 (never below `reno_count`),
//!   and ssthresh follows it.
//! - Fast mode adds one segment per min(cwnd, 100) acknowledged (Scalable,
//!   a = 0.01); slow mode one per cwnd (Reno).
//! - Loss (§3.3): if fewer than ρ = 16 consecutive RTTs were spent in slow mode
//!   (no competing Reno flow), the window drops by Q, bounded to
//!   [cwnd/2^δ, cwnd/2] with δ = 3; otherwise by cwnd/2 (Reno behaviour).
//! - `reno_count` estimates a competing Reno flow's window; after ζ = 50 fast
//!   RTTs it is reset to 2 (Linux).
//!
//! Rounds come from [`RoundTracker`] (Linux: Vegas `beg_snd_nxt`). As in
//! Linux 6.1, the once-per-round judgement runs inside `cong_avoid`, so a round
//! that ends on an ACK in recovery or from an application-limited sender
//! (`tcp_is_cwnd_limited` false) is judged on the next ACK that may grow the
//! window, and the return to Open starts a fresh round with no samples
//! (`tcp_vegas_state` → `vegas_enable`).

use super::segwin::{undo_to_saved, RoundTracker, SegWindow};
use super::{AckSample, CcError, CcInit, CcMetrics, CongestionControl, CongestionEvent, ParamReader, Params, RtoEpisode};
use netunits::{SimDuration, SimTime};

/// YeAH parameters (defaults: Linux `tcp_yeah.c` = the paper's).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct YeahConfig {
    /// Q_max, packets (`TCP_YEAH_ALPHA` = 80).
    pub q_max: u32,
    /// 1/ϕ: slow mode when queueing delay exceeds RTT_base/phy (`TCP_YEAH_PHY` = 8).
    pub phy: u32,
    /// γ: fraction of the queue removed by decongestion (1).
    pub gamma: u32,
    /// ε: decongestion removes at most cwnd/2^ε (1).
    pub epsilon: u32,
    /// δ: a loss removes at least cwnd/2^δ (3).
    pub delta: u32,
    /// ρ: slow-mode RTTs that mean Reno competition (16).
    pub rho: u32,
    /// ζ: fast RTTs before `reno_count` resets (50).
    pub zeta: u32,
    /// Fast-mode (Scalable) AI count (100).
    pub scalable_ai_cnt: u32,
}

impl Default for YeahConfig {
    fn default() -> Self {
        YeahConfig { q_max: 80, phy: 8, gamma: 1, epsilon: 1, delta: 3, rho: 16, zeta: 50, scalable_ai_cnt: 100 }
    }
}

impl YeahConfig {
    /// Parameter line for `fairlab list ccas`.
    pub const PARAMS: &'static str = "q_max = 80, phy = 8 (ϕ = 1/8), gamma = 1, epsilon = 1, delta = 3, rho = 16, zeta = 50";

    /// Read and validate from scenario parameters.
    pub fn from_params(p: &Params) -> Result<Self, CcError> {
        let mut r = ParamReader::new("yeah", p);
        let q_max = r.u64("q_max", 80, 1, 1 << 20, "packets in [1, 1048576] (80)")?;
        let phy = r.u64("phy", 8, 1, 1024, "an integer in [1, 1024] (ϕ = 1/phy; 8)")?;
        let gamma = r.u64("gamma", 1, 1, 64, "an integer in [1, 64] (1)")?;
        let epsilon = r.u64("epsilon", 1, 0, 16, "an integer in [0, 16] (1)")?;
        let delta = r.u64("delta", 3, 1, 16, "an integer in [1, 16] (3)")?;
        let rho = r.u64("rho", 16, 1, 1 << 20, "RTTs in [1, 1048576] (16)")?;
        let zeta = r.u64("zeta", 50, 1, 1 << 20, "RTTs in [1, 1048576] (50)")?;
        r.finish()?;
        Ok(YeahConfig {
            q_max: q_max as u32,
            phy: phy as u32,
            gamma: gamma as u32,
            epsilon: epsilon as u32,
            delta: delta as u32,
            rho: rho as u32,
            zeta: zeta as u32,
            scalable_ai_cnt: 100,
        })
    }
}

#[derive(Clone, Copy, Debug)]
struct State {
    w: SegWindow,
    base_rtt: Option<SimDuration>,
    /// Smallest RTT sample in the current round.
    round_min_rtt: Option<SimDuration>,
    cnt_rtt: u32,
    round: RoundTracker,
    last_q: u32,
    /// Consecutive slow-mode RTTs (0 = fast mode).
    doing_reno_now: u32,
    reno_count: u32,
    fast_count: u32,
    /// The round ended; judge it on the next ACK that reaches `cong_avoid`.
    round_due: bool,
}

/// YeAH-TCP.
#[derive(Clone, Debug)]
pub struct Yeah {
    cfg: YeahConfig,
    s: State,
    undo: Option<State>,
}

impl Yeah {
    /// A YeAH controller.
    pub fn new(cfg: YeahConfig, init: &CcInit) -> Self {
        let s = State {
            w: SegWindow::new(init),
            base_rtt: None,
            round_min_rtt: None,
            cnt_rtt: 0,
            round: RoundTracker::after(init.sent_before_attach),
            last_q: 0,
            doing_reno_now: 0,
            reno_count: 2,
            fast_count: 0,
            round_due: false,
        };
        Yeah { cfg, s, undo: None }
    }

    /// Name-table constructor.
    pub fn build(p: &Params, init: &CcInit) -> Result<Box<dyn CongestionControl>, CcError> {
        Ok(Box::new(Yeah::new(YeahConfig::from_params(p)?, init)))
    }

    /// True in slow (Reno) mode.
    pub fn slow_mode(&self) -> bool {
        self.s.doing_reno_now > 0
    }

    /// Queue estimate Q from the last round, packets.
    pub fn last_queue(&self) -> u32 {
        self.s.last_q
    }

    /// End of a round: Q, mode switch and precautionary decongestion.
    fn end_round(&mut self) {
        let (Some(rtt), Some(base), true) = (self.s.round_min_rtt, self.s.base_rtt, self.s.cnt_rtt > 2) else {
            self.s.cnt_rtt = 0;
            self.s.round_min_rtt = None;
            return;
        };
        let c = self.cfg;
        let s = &mut self.s;
        let cwnd = s.w.cwnd;
        let queue_delay = rtt.saturating_sub(base);
        let q = (cwnd as u128 * queue_delay.as_nanos() as u128 / rtt.as_nanos().max(1) as u128) as u32;
        if q > c.q_max || queue_delay.as_nanos() > base.as_nanos() / c.phy as u64 {
            if q > c.q_max && cwnd > s.reno_count {
                let reduction = (q / c.gamma).min(cwnd >> c.epsilon);
                s.w.cwnd = (cwnd - reduction).max(s.reno_count).max(1);
                s.w.ssthresh = s.w.cwnd;
            }
            s.reno_count = if s.reno_count <= 2 { (s.w.cwnd >> 1).max(2) } else { s.reno_count + 1 };
            s.doing_reno_now = s.doing_reno_now.saturating_add(1).min(0xff_ffff);
        } else {
            s.fast_count += 1;
            if s.fast_count > c.zeta {
                s.reno_count = 2;
                s.fast_count = 0;
            }
            s.doing_reno_now = 0;
        }
        s.last_q = q;
        s.cnt_rtt = 0;
        s.round_min_rtt = None;
    }

    fn ssthresh_for(&mut self) -> u32 {
        let cwnd = self.s.w.cwnd;
        let half = (cwnd >> 1).max(2);
        let reduction = if self.s.doing_reno_now < self.cfg.rho { self.s.last_q.min(half).max(cwnd >> self.cfg.delta) } else { half };
        self.s.fast_count = 0;
        self.s.reno_count = (self.s.reno_count >> 1).max(2);
        (cwnd.saturating_sub(reduction)).max(2)
    }

    /// Linux `vegas_enable` (on every return to Open): a fresh round with no samples.
    fn fresh_round(&mut self) {
        self.s.round.reset();
        self.s.round_due = false;
        self.s.cnt_rtt = 0;
        self.s.round_min_rtt = None;
    }

    /// `tcp_vegas_init`: BaseRTT forgotten, and a fresh round.
    fn forget_path(&mut self) {
        self.s.base_rtt = None;
        self.fresh_round();
    }
}

impl CongestionControl for Yeah {
    fn name(&self) -> &'static str {
        "yeah"
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
        if let Some(r) = ack.rtt {
            self.s.base_rtt = Some(self.s.base_rtt.map_or(r, |b| b.min(r)));
            self.s.round_min_rtt = Some(self.s.round_min_rtt.map_or(r, |m| m.min(r)));
            self.s.cnt_rtt += 1;
        }
        if self.s.round.on_ack(ack.acked_bytes, ack.in_flight) {
            self.s.round_due = true;
        }
        if ack.in_recovery {
            return;
        }
        self.s.w.in_recovery = false;
        if ack.app_limited {
            return;
        }
        let w = &mut self.s.w;
        let mut acked = ack.acked_segments;
        if w.in_slow_start() {
            acked = w.slow_start(acked);
        }
        if acked > 0 {
            let n = if self.s.doing_reno_now == 0 { w.cwnd.min(self.cfg.scalable_ai_cnt) } else { w.cwnd };
            w.cong_avoid_ai(n, acked);
        }
        if self.s.round_due {
            self.s.round_due = false;
            self.end_round();
        }
    }

    fn on_congestion_event(&mut self, _ev: &CongestionEvent) {
        self.undo = Some(self.s);
        let ss = self.ssthresh_for();
        self.s.w.enter_recovery(ss);
    }

    /// Back to Open: Linux `vegas_enable` starts a fresh round with no samples.
    fn on_recovery_exit(&mut self, _now: SimTime) {
        self.s.w.in_recovery = false;
        self.fresh_round();
    }

    fn on_rto(&mut self, _now: SimTime, _in_flight: u64, episode: RtoEpisode) {
        let ss = episode.ssthresh(self.s.w.ssthresh, || {
            self.undo = Some(self.s);
            self.ssthresh_for()
        });
        self.s.w.enter_loss(ss);
        self.fresh_round();
    }

    fn on_spurious_loss(&mut self, _now: SimTime) {
        if let Some(cur) = undo_to_saved(&mut self.s, &mut self.undo, |s| &mut s.w) {
            // What was measured about the path since the reduction stays: an undo
            // takes back a window decision, not what was learnt.
            self.s.base_rtt = cur.base_rtt;
        }
    }

    /// Linux `tcp_vegas_cwnd_event` (YeAH's `cwnd_event`): a restart from idle
    /// re-initialises the Vegas part, BaseRTT included (the path may have changed).
    fn on_idle_restart(&mut self, _now: SimTime) {
        self.s.w.idle_restart();
        self.forget_path();
    }

    /// YeAH's `cwnd_event` is Vegas's, so `CA_EVENT_TX_START` (a data packet,
    /// new or retransmitted, sent while `tcp_packets_in_flight` is 0) runs
    /// `tcp_vegas_init` too: BaseRTT is forgotten and a fresh round begins,
    /// YeAH's own counters stay. Besides the first packet this is the first
    /// retransmission after a timeout, when `tcp_enter_loss` has marked every
    /// outstanding segment lost; BaseRTT is then learnt again from samples that
    /// carry whatever queue the other flows hold.
    fn on_packet_sent(&mut self, _now: SimTime, bytes: u64, in_flight: u64) {
        if super::starts_transmission(bytes, in_flight, self.s.w.mss) {
            self.forget_path();
        }
    }

    fn metrics(&self) -> CcMetrics {
        self.s.w.metrics(if self.s.doing_reno_now > 0 { "slow_mode" } else { "fast_mode" })
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{ack_sample, init, params, Harness};
    use super::*;

    fn yeah() -> Harness {
        Harness::new(Yeah::build(&params("{}"), &init(10)).unwrap(), SimDuration::from_millis(100))
    }

    #[test]
    fn fast_mode_grows_like_scalable_without_queueing() {
        let mut h = yeah();
        h.grow_to(1000);
        h.loss_and_recover();
        h.round();
        let w0 = h.cwnd_segs() as f64;
        for _ in 0..10 {
            h.round();
        }
        assert_eq!(h.cc.metrics().phase, "fast_mode");
        let expect = w0 * 1.01f64.powi(10);
        assert!((h.cwnd_segs() as f64 - expect).abs() <= 10.0, "{} vs {expect:.0}", h.cwnd_segs());
    }

    #[test]
    fn queueing_delay_above_phi_switches_to_reno_growth() {
        let mut h = yeah();
        h.grow_to(50);
        h.loss_and_recover();
        // L = 15/100 > 1/8, Q = W·15/115 < 80: slow mode, no decongestion.
        h.rtt = SimDuration::from_millis(115);
        h.round();
        h.round();
        assert_eq!(h.cc.metrics().phase, "slow_mode");
        let w = h.cwnd_segs();
        for _ in 0..5 {
            h.round();
        }
        assert!((h.cwnd_segs() - w).abs_diff(5) <= 1, "+{} in 5 slow RTTs", h.cwnd_segs() - w);
    }

    #[test]
    fn queue_above_q_max_triggers_precautionary_decongestion() {
        let mut h = yeah();
        h.grow_to(1000);
        h.loss_and_recover();
        h.round();
        let w = h.cwnd_segs();
        // RTT doubles: Q = W/2 > 80 → cwnd drops by min(Q, W/2) = W/2.
        h.rtt = SimDuration::from_millis(200);
        h.round();
        h.round();
        assert!(h.cwnd_segs() < w * 3 / 5, "{} → {}", w, h.cwnd_segs());
        // ssthresh followed the cut (the window has since grown by Reno steps).
        let ss = h.cc.ssthresh() / 1000;
        assert!(ss < w * 3 / 5 && ss + 2 >= h.cwnd_segs(), "ssthresh {ss}, cwnd {}", h.cwnd_segs());
    }

    #[test]
    fn loss_in_fast_mode_removes_the_queue_bounded_below_by_an_eighth() {
        let mut h = yeah();
        h.grow_to(400);
        h.loss_and_recover();
        for _ in 0..3 {
            h.round();
        }
        // No queue: reduction = max(Q = 0, W/8) = W/8.
        let w = h.cwnd_segs();
        h.loss();
        assert_eq!(h.cwnd_segs(), w - (w >> 3));
    }

    #[test]
    fn long_slow_mode_means_reno_halving() {
        let mut h = yeah();
        h.grow_to(50);
        h.loss_and_recover();
        h.rtt = SimDuration::from_millis(115);
        for _ in 0..20 {
            h.round();
        }
        let w = h.cwnd_segs();
        h.loss();
        assert_eq!(h.cwnd_segs(), w - w / 2);
    }

    fn ack_at(y: &mut Yeah, rtt_ms: u64, app_limited: bool) {
        let rtt = SimDuration::from_millis(rtt_ms);
        y.on_ack(&AckSample { min_rtt: SimDuration::from_millis(100), app_limited, ..ack_sample(SimTime::from_secs(1), 1, rtt, 10_000) });
    }

    #[test]
    fn a_round_ending_on_an_app_limited_ack_is_judged_on_the_next_cwnd_limited_one() {
        // Linux runs the YeAH judgement in cong_avoid, after the
        // tcp_is_cwnd_limited check. The first ACK opens a round of 10 000
        // bytes in flight; the 11th ends it. RTT 150 ms over a base of 100 ms is
        // above BaseRTT/8, so the judgement switches to slow (Reno) mode.
        let mut y = Yeah::new(YeahConfig::default(), &init(10));
        ack_at(&mut y, 100, false);
        for _ in 0..9 {
            ack_at(&mut y, 150, false);
        }
        ack_at(&mut y, 150, true);
        assert!(!y.slow_mode(), "judged on an application-limited ACK");
        ack_at(&mut y, 150, false);
        assert!(y.slow_mode());
    }

    #[test]
    fn idle_restart_forgets_base_rtt() {
        let mut y = Yeah::new(YeahConfig::default(), &init(10));
        ack_at(&mut y, 100, false);
        assert_eq!(y.s.base_rtt, Some(SimDuration::from_millis(100)));
        y.on_idle_restart(SimTime::from_secs(2));
        assert_eq!(y.s.base_rtt, None);
        ack_at(&mut y, 150, false);
        assert_eq!(y.s.base_rtt, Some(SimDuration::from_millis(150)));
    }

    #[test]
    fn a_packet_sent_with_nothing_in_flight_forgets_base_rtt_and_the_queue_it_measured() {
        // Linux: CA_EVENT_TX_START → tcp_vegas_init. BaseRTT 100 ms, then every
        // sample 150 ms (L = 1/2 > 1/8): the next judgement is slow mode. After
        // a send with nothing in flight (the first retransmission after a
        // timeout) BaseRTT is relearnt as 150 ms, so the same samples show no
        // queue and the flow stays in fast mode.
        let run = |tx_start: bool| {
            let mut y = Yeah::new(YeahConfig::default(), &init(10));
            ack_at(&mut y, 100, false);
            if tx_start {
                y.on_packet_sent(SimTime::from_secs(1), 1000, 1000);
            }
            for _ in 0..30 {
                ack_at(&mut y, 150, false);
            }
            y.slow_mode()
        };
        assert!(run(false));
        assert!(!run(true));
        // A packet sent with more than itself in flight changes nothing.
        let mut y = Yeah::new(YeahConfig::default(), &init(10));
        ack_at(&mut y, 100, false);
        y.on_packet_sent(SimTime::from_secs(1), 1000, 3000);
        assert_eq!(y.s.base_rtt, Some(SimDuration::from_millis(100)));
    }

    #[test]
    fn bad_params_name_the_parameter() {
        match Yeah::build(&params(r#"{"q_max": 0}"#), &init(10)).unwrap_err() {
            CcError::BadParam { param, .. } => assert_eq!(param, "q_max"),
            e => panic!("{e}"),
        }
    }
}
