//! HighSpeed TCP (RFC 3649; Linux `net/ipv4/tcp_highspeed.c`).
//!
//! Read this first: HighSpeed TCP is Reno with window-dependent AIMD parameters
//! (RFC 3649 §5): each ACK adds a(w)/w segments and a loss leaves (1 − b(w))·w.
//! Up to Low_Window = 38 segments a(w) = 1 and b(w) = 0.5, exactly Reno. Above it
//! b(w) falls linearly in log w from 0.5 to High_Decrease = 0.1 at High_Window =
//! 83000 segments (RFC 3649 §5 "b(w)"), and a(w) = w²·p(w)·2b(w)/(2 − b(w)) with
//! the response function p(w) of §5.
//!
//! The table [`AIMD`] is RFC 3649 Appendix B as Linux uses it: the window bounds
//! at which a(w) steps to the next integer, with b(w) in 1/256ths. Linux picks
//! the row i with row[i−1].w < cwnd ≤ row[i].w and then uses a = i + 1 and
//! b = row[i].b/256; we do the same. The tests check every row against the §5
//! formulas rather than trusting the numbers.
//!
//! Slow start is Linux's (per acknowledged segment up to ssthresh); RFC 3742
//! limited slow start, which RFC 3649 mentions, is not in current Linux and not
//! here. The CA increase is counted per ACK as in Linux (`snd_cwnd_cnt += a`).
//!
//! The row is state, as Linux's `ca->ai`: moved to fit the window on each
//! congestion-avoidance ACK only, and read as it stands by the loss response
//! (`hstcp_ssthresh`). So a loss that ends slow start still uses row 0 and
//! halves the window whatever its size (Linux 6.1 does; RFC 3649 would take
//! b(w)), and after a reduction the row catches up on the next CA ACK.

use super::segwin::{undo_to_saved, SegWindow};
use super::{AckSample, CcError, CcInit, CcMetrics, CongestionControl, CongestionEvent, ParamReader, Params, RtoEpisode};
use netunits::SimTime;

/// RFC 3649 Appendix B: (window bound w in segments, b(w)·256 rounded down), one
/// row per integer a(w) = row index + 1 (a = 1 at 38 up to a = 72 at 89053).
pub const AIMD: [(u32, u32); 72] = [
    (38, 128), (118, 112), (221, 104), (347, 98), (495, 93), (663, 89),
    (851, 86), (1058, 83), (1284, 81), (1529, 78), (1793, 76), (2076, 74),
    (2378, 72), (2699, 71), (3039, 69), (3399, 68), (3778, 66), (4177, 65),
    (4596, 64), (5036, 62), (5497, 61), (5979, 60), (6483, 59), (7009, 58),
    (7558, 57), (8130, 56), (8726, 55), (9346, 54), (9991, 53), (10661, 52),
    (11358, 52), (12082, 51), (12834, 50), (13614, 49), (14424, 48), (15265, 48),
    (16137, 47), (17042, 46), (17981, 45), (18955, 45), (19965, 44), (21013, 43),
    (22101, 43), (23230, 42), (24402, 41), (25618, 41), (26881, 40), (28193, 39),
    (29557, 39), (30975, 38), (32450, 38), (33986, 37), (35586, 36), (37253, 36),
    (38992, 35), (40808, 35), (42707, 34), (44694, 33), (46776, 33), (48961, 32),
    (51258, 32), (53677, 31), (56230, 30), (58932, 30), (61799, 29), (64851, 28),
    (68113, 28), (71617, 27), (75401, 26), (79517, 26), (84035, 25), (89053, 24),
];

/// Row index for window `w` (segments): smallest i with w ≤ AIMD[i].0, or the last.
pub fn row_for(w: u32) -> usize {
    AIMD.iter().position(|&(bound, _)| w <= bound).unwrap_or(AIMD.len() - 1)
}

/// a(w) in segments per RTT (RFC 3649 Appendix B, Linux indexing).
pub fn a_of(w: u32) -> u32 {
    row_for(w) as u32 + 1
}

/// b(w) as a fraction (RFC 3649 Appendix B, in Linux's 1/256 steps).
pub fn b_of(w: u32) -> f64 {
    AIMD[row_for(w)].1 as f64 / 256.0
}

/// HighSpeed TCP has no tunables in Linux; the table is the RFC's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HighSpeedConfig;

impl HighSpeedConfig {
    /// Parameter line for `fairlab list ccas`.
    pub const PARAMS: &'static str = "(none; RFC 3649 Appendix B table)";

    /// Read and validate (refuses any parameter).
    pub fn from_params(p: &Params) -> Result<Self, CcError> {
        ParamReader::new("highspeed", p).finish()?;
        Ok(HighSpeedConfig)
    }
}

/// HighSpeed TCP.
#[derive(Clone, Debug)]
pub struct HighSpeed {
    w: SegWindow,
    /// The window before the last reduction, for undo.
    undo: Option<SegWindow>,
    /// Row of [`AIMD`] in use (Linux `ca->ai`), moved only in congestion avoidance.
    ai: usize,
}

impl HighSpeed {
    /// A HighSpeed controller.
    pub fn new(_cfg: HighSpeedConfig, init: &CcInit) -> Self {
        HighSpeed { w: SegWindow::new(init), undo: None, ai: 0 }
    }

    /// Name-table constructor.
    pub fn build(p: &Params, init: &CcInit) -> Result<Box<dyn CongestionControl>, CcError> {
        Ok(Box::new(HighSpeed::new(HighSpeedConfig::from_params(p)?, init)))
    }

    /// Linux `hstcp_ssthresh`: w − w·b with b from the current row.
    fn ssthresh_for(&self) -> u32 {
        let (w, md) = (self.w.cwnd as u64, AIMD[self.ai].1 as u64);
        (w - ((w * md) >> 8)).max(2) as u32
    }

    /// Linux `hstcp_cong_avoid`: move the row until AIMD[ai − 1].w < cwnd ≤ AIMD[ai].w.
    fn update_row(&mut self) {
        let cwnd = self.w.cwnd;
        while self.ai < AIMD.len() - 1 && cwnd > AIMD[self.ai].0 {
            self.ai += 1;
        }
        while self.ai > 0 && cwnd <= AIMD[self.ai - 1].0 {
            self.ai -= 1;
        }
    }
}

impl CongestionControl for HighSpeed {
    fn name(&self) -> &'static str {
        "highspeed"
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
        if self.w.in_slow_start() {
            self.w.slow_start(ack.acked_segments);
        } else {
            self.update_row();
            let a = self.ai as u32 + 1;
            let w = &mut self.w;
            // RFC 3649 §5: w += a(w)/w per ACK.
            w.cnt = w.cnt.saturating_add(a);
            if w.cnt >= w.cwnd {
                w.cnt -= w.cwnd;
                w.cwnd += 1;
            }
        }
    }

    fn on_congestion_event(&mut self, _ev: &CongestionEvent) {
        self.undo = Some(self.w);
        let ss = self.ssthresh_for();
        self.w.enter_recovery(ss);
    }

    fn on_recovery_exit(&mut self, _now: SimTime) {
        self.w.in_recovery = false;
    }

    fn on_rto(&mut self, _now: SimTime, _in_flight: u64, episode: RtoEpisode) {
        let ss = episode.ssthresh(self.w.ssthresh, || {
            self.undo = Some(self.w);
            self.ssthresh_for()
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
        self.w.metrics(if self.w.cwnd <= AIMD[0].0 { "congestion_avoidance" } else { "highspeed" })
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::{init, params, Harness};
    use super::*;
    use netunits::SimDuration;

    // RFC 3649 §5 constants.
    const LOW_W: f64 = 38.0;
    const HIGH_W: f64 = 83000.0;
    const HIGH_P: f64 = 1e-7;
    const HIGH_DECREASE: f64 = 0.1;

    /// RFC 3649 §5: b(w) linear in log w between (38, 0.5) and (83000, 0.1).
    fn b_rfc(w: f64) -> f64 {
        (HIGH_DECREASE - 0.5) * (w.ln() - LOW_W.ln()) / (HIGH_W.ln() - LOW_W.ln()) + 0.5
    }

    /// RFC 3649 §5: p(w) log-linear between (38, 1.5/38²) and (83000, 10⁻⁷), and
    /// a(w) = w²·p(w)·2b(w)/(2 − b(w)).
    fn a_rfc(w: f64) -> f64 {
        let low_p: f64 = 1.5 / (LOW_W * LOW_W);
        let p = ((w.ln() - LOW_W.ln()) / (HIGH_W.ln() - LOW_W.ln()) * (HIGH_P.ln() - low_p.ln()) + low_p.ln()).exp();
        let b = b_rfc(w);
        w * w * p * 2.0 * b / (2.0 - b)
    }

    #[test]
    fn table_points_match_rfc_3649() {
        assert_eq!((a_of(38), b_of(38)), (1, 0.5));
        assert_eq!(a_of(30), 1);
        let (a, b) = (a_of(83000), b_of(83000));
        assert!((70..=72).contains(&a), "a(83000) = {a}");
        assert!((b - 0.1).abs() < 0.01, "b(83000) = {b}");
    }

    #[test]
    fn every_row_agrees_with_the_section_5_formulas() {
        for (i, &(w, md)) in AIMD.iter().enumerate() {
            let b = md as f64 / 256.0;
            assert!((b - b_rfc(w as f64)).abs() < 1.0 / 256.0 + 1e-9, "row {i}: b {b} vs {}", b_rfc(w as f64));
            // At each row bound the formula's a(w) is the row's integer a or up to
            // 5 % above it: Appendix B rounds a(w) down to whole segments (and its
            // p(w) differs slightly from the §5 interpolation).
            let a = (i + 1) as f64;
            let d = a_rfc(w as f64) - a;
            assert!((-1e-9..=0.05 * a).contains(&d), "row {i}: a {a} vs {}", a_rfc(w as f64));
        }
    }

    fn hs() -> Harness {
        Harness::new(HighSpeed::build(&params("{}"), &init(10)).unwrap(), SimDuration::from_millis(100))
    }

    #[test]
    fn below_low_window_it_is_reno() {
        let mut h = hs();
        h.grow_to(30);
        let w = h.cwnd_segs();
        h.loss_and_recover();
        assert_eq!(h.cwnd_segs(), w / 2);
        h.round();
        assert_eq!(h.cwnd_segs(), w / 2 + 1);
    }

    #[test]
    fn a_loss_out_of_slow_start_halves_and_later_losses_use_b_of_w() {
        let mut h = hs();
        h.grow_to(2000);
        let w = h.cwnd_segs();
        h.loss_and_recover();
        // Linux hstcp_ssthresh with ca->ai still 0 (slow start never moved it):
        // w − (w·128 >> 8) = w/2, not RFC 3649's (1 − b(w))·w.
        assert_eq!(h.cwnd_segs(), w - (w * 128 >> 8));
        // The first CA ACK moves the row: at 1000 segments row 7 (851 < w ≤ 1058),
        // a = 8; a round of ~1000 ACKs adds ⌊8·1000/1000⌋ ≈ 8.
        let w0 = h.cwnd_segs() as u32;
        assert_eq!(a_of(w0), 8);
        h.round();
        let step = h.cwnd_segs() as u32 - w0;
        assert!((7..=8).contains(&step), "step {step} vs a(w) = 8");
        // The next loss uses the row the last CA ACK chose: (1 − md/256)·w.
        let w = h.cwnd_segs() as u32;
        h.loss_and_recover();
        let md = AIMD[row_for(w)].1;
        assert_eq!(h.cwnd_segs() as u32, w - ((w * md) >> 8), "md {md}/256 at w {w}");
        assert!(md < 128);
    }

    #[test]
    fn any_param_is_refused() {
        assert!(HighSpeed::build(&params(r#"{"a": 1}"#), &init(10)).is_err());
    }
}
