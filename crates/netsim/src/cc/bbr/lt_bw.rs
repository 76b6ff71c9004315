//! Long-term ("LT") bandwidth sampling: token-bucket policer detection (Linux
//! 4.10+, `bbr_lt_bw_sampling`, `bbr_lt_bw_interval_done`,
//! `bbr_reset_lt_bw_sampling[_interval]`).
//!
//! A policer lets a burst through, then drops everything above its token rate.
//! BBR's max filter would keep the burst rate and the flow would lose heavily
//! forever. So after the first loss BBR measures delivered/elapsed over
//! intervals of 4–16 packet-timed rounds that end in a loss; an interval whose
//! loss ratio is at least 50/256 (≈ 20%) counts. Two consecutive such intervals
//! with rates within 1/8 (or 4 kbit/s) of each other mean "policed": BBR then
//! steers by their average (`lt_bw`) at pacing gain 1 for 48 rounds, after which
//! it resets and probes again. Ordinary congestion loss at a shared droptail
//! queue rarely reaches 20% over four rounds, so this mostly stays idle; it can
//! fire during STARTUP's overshoot into a shallow buffer, as in Linux.

use super::{Bbr, Mode};
use netunits::{Bandwidth, SimTime};

/// Minimum rounds in a sampling interval (Linux `bbr_lt_intvl_min_rtts`).
pub(crate) const LT_INTVL_MIN_ROUNDS: u32 = 4;
/// Loss ratio, in 1/256, that makes an interval lossy (Linux `bbr_lt_loss_thresh`).
pub(crate) const LT_LOSS_THRESH: u64 = 50;
/// Two intervals are "consistent" if their rates differ by at most 1/8 ...
pub(crate) const LT_BW_RATIO_DIV: u64 = 8;
/// ... or by at most 4 kbit/s (Linux `bbr_lt_bw_ratio`, `bbr_lt_bw_diff`).
pub(crate) const LT_BW_DIFF_BPS: u64 = 4_000;
/// Rounds to use `lt_bw` for once policing is detected (Linux `bbr_lt_bw_max_rtts`).
pub(crate) const LT_BW_MAX_ROUNDS: u32 = 48;

/// Long-term sampler state (Linux `struct bbr`'s `lt_*` fields).
#[derive(Clone, Debug, Default)]
pub(crate) struct LtBw {
    /// Taking samples now (a loss has been seen)?
    is_sampling: bool,
    /// Rounds in this interval, or rounds `lt_bw` has been in use.
    rounds: u32,
    /// Rate of the previous lossy interval, then the policed rate.
    bw: Bandwidth,
    use_bw: bool,
    /// Interval start: delivered packets, lost packets, and the delivery time in
    /// whole milliseconds (Linux keeps `lt_last_stamp` in ms).
    last_delivered: u64,
    last_lost: u64,
    last_stamp_ms: u64,
}

impl LtBw {
    /// The policed rate, while it is in use.
    pub(crate) fn bw_in_use(&self) -> Option<Bandwidth> {
        self.use_bw.then_some(self.bw)
    }
}

fn millis(t: SimTime) -> u64 {
    t.as_nanos() / 1_000_000
}

impl Bbr {
    /// Start a new sampling interval here (Linux
    /// `bbr_reset_lt_bw_sampling_interval`).
    fn reset_lt_bw_sampling_interval(&mut self) {
        self.lt.last_stamp_ms = millis(self.delivered_stamp);
        self.lt.last_delivered = self.delivered_pkts;
        self.lt.last_lost = self.lost_pkts;
        self.lt.rounds = 0;
    }

    /// Forget the long-term estimate (Linux `bbr_reset_lt_bw_sampling`).
    pub(super) fn reset_lt_bw_sampling(&mut self) {
        self.lt.bw = Bandwidth::from_bps(0);
        self.lt.use_bw = false;
        self.lt.is_sampling = false;
        self.reset_lt_bw_sampling_interval();
    }

    /// An interval ended lossy at rate `bw`: policed if it matches the previous
    /// one (Linux `bbr_lt_bw_interval_done`).
    fn lt_bw_interval_done(&mut self, bw: Bandwidth) {
        let prev = self.lt.bw.as_bps();
        if prev > 0 {
            let diff = bw.as_bps().abs_diff(prev);
            // Linux: diff·256 ≤ (256/8)·lt_bw, or diff as a paced rate (with the
            // 1% margin, `bbr_rate_bytes_per_sec`) ≤ 4 kbit/s.
            let close = diff * LT_BW_RATIO_DIV <= prev || self.rate_with_gain(Bandwidth::from_bps(diff), 1.0).as_bps() <= LT_BW_DIFF_BPS;
            if close {
                self.lt.bw = Bandwidth::from_bps((bw.as_bps() + prev) / 2);
                self.lt.use_bw = true;
                self.pacing_gain = 1.0; // try to avoid drops
                self.lt.rounds = 0;
                return;
            }
        }
        self.lt.bw = bw;
        self.reset_lt_bw_sampling_interval();
    }

    /// Linux `bbr_lt_bw_sampling`, once per ACK with a valid rate sample (and
    /// once on RTO with `losses = 1`). `losses` is this ACK's newly lost
    /// packets, `app_limited` the sample's flag.
    pub(super) fn lt_bw_sampling(&mut self, losses: u64, app_limited: bool) {
        if self.lt.use_bw {
            // Policed: after 48 rounds, forget it and probe again.
            if self.mode == Mode::ProbeBw && self.round_start {
                self.lt.rounds += 1;
                if self.lt.rounds >= LT_BW_MAX_ROUNDS {
                    self.reset_lt_bw_sampling();
                    let now = self.delivered_stamp;
                    self.reset_probe_bw_mode(now);
                }
            }
            return;
        }
        // Start at the first loss, when a policer's token bucket is empty; earlier
        // samples would include the burst it let through.
        if !self.lt.is_sampling {
            if losses == 0 {
                return;
            }
            self.reset_lt_bw_sampling_interval();
            self.lt.is_sampling = true;
        }
        // Running out of data would make the estimate too low.
        if app_limited {
            self.reset_lt_bw_sampling();
            return;
        }
        if self.round_start {
            self.lt.rounds += 1;
        }
        if self.lt.rounds < LT_INTVL_MIN_ROUNDS {
            return;
        }
        if self.lt.rounds > 4 * LT_INTVL_MIN_ROUNDS {
            self.reset_lt_bw_sampling(); // interval too long
            return;
        }
        // End the interval at a loss (the tokens were used up).
        if losses == 0 {
            return;
        }
        let lost = self.lost_pkts - self.lt.last_lost;
        let delivered = self.delivered_pkts - self.lt.last_delivered;
        // Lossy enough (lost/delivered ≥ 50/256)? If not, keep waiting.
        if delivered == 0 || (lost << 8) < LT_LOSS_THRESH * delivered {
            return;
        }
        let t_ms = millis(self.delivered_stamp).saturating_sub(self.lt.last_stamp_ms);
        if t_ms < 1 {
            return; // under a millisecond: wait
        }
        let bytes = delivered * self.mss;
        let bw = Bandwidth::from_bps((bytes as u128 * 8 * 1000 / t_ms as u128).min(u64::MAX as u128) as u64);
        self.lt_bw_interval_done(bw);
    }
}
