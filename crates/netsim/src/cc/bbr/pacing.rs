//! Pacing rate = pacing_gain · bw, 1% below (draft-00 "Pacing rate";
//! Linux `bbr_set_pacing_rate`, `bbr_init_pacing_rate_from_rtt`,
//! `bbr_pacing_margin_percent`). The rate is of payload, as Linux's
//! `sk_pacing_rate` is, and the sender charges each packet's payload against it.

use super::Bbr;
use crate::cc::AckSample;
use netunits::{Bandwidth, SimDuration};

impl Bbr {
    /// `gain · bw · (1 − margin)` (Linux `bbr_rate_bytes_per_sec`).
    pub(super) fn rate_with_gain(&self, bw: Bandwidth, gain: f64) -> Bandwidth {
        let margin = (100 - self.cfg.pacing_margin_percent.min(100)) as f64 / 100.0;
        Bandwidth::from_bps((bw.as_bps() as f64 * gain * margin) as u64)
    }

    /// Before any bandwidth sample: high_gain · cwnd / RTT, with the smoothed RTT
    /// if known, else a nominal 1 ms (Linux `bbr_init_pacing_rate_from_rtt`).
    pub(super) fn init_pacing_rate(&mut self, srtt: Option<SimDuration>) {
        let rtt = match srtt {
            Some(r) if r.as_nanos() > 0 => {
                self.has_seen_rtt = true;
                r
            }
            _ => SimDuration::from_millis(1),
        };
        let bw = Bandwidth::from_bytes_per(self.cwnd * self.mss, rtt).unwrap_or_default();
        self.pacing_rate = self.rate_with_gain(bw, self.cfg.high_gain);
    }

    /// Per-ACK pacing update (Linux `bbr_set_pacing_rate`).
    pub(super) fn set_pacing_rate(&mut self, ack: &AckSample, bw: Bandwidth, gain: f64) {
        if !self.has_seen_rtt && ack.srtt.as_nanos() > 0 {
            self.init_pacing_rate(Some(ack.srtt));
        }
        self.set_pacing_rate_gain(bw, gain);
    }

    /// Until the pipe is known to be full the rate only goes up, so a low early
    /// sample cannot slow STARTUP down (the second half of Linux
    /// `bbr_set_pacing_rate`).
    pub(super) fn set_pacing_rate_gain(&mut self, bw: Bandwidth, gain: f64) {
        let rate = self.rate_with_gain(bw, gain);
        if self.full_bw_reached || rate > self.pacing_rate {
            self.pacing_rate = rate;
        }
    }
}
