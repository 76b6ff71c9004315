//! PROBE_BW gain cycling (draft-00 "ProbeBW"; Cardwell et al. 2016 "Steady
//! state"; Linux `bbr_is_next_cycle_phase`, `bbr_advance_cycle_phase`).
//!
//! Eight phases of about one min_rtt each: 1.25 probes for more bandwidth,
//! 0.75 drains whatever queue that probe built, then six phases cruise at 1.0.

use super::config::{CYCLE_LEN, PACING_GAIN_CYCLE};
use super::{Bbr, Mode};
use crate::cc::AckSample;
use netunits::SimTime;

impl Bbr {
    /// Enter PROBE_BW at the configured phase (Linux draws it at random; see
    /// `BbrConfig::cycle_start`).
    pub(super) fn enter_probe_bw(&mut self, now: SimTime) {
        self.mode = Mode::ProbeBw;
        self.cycle_idx = self.cfg.cycle_start % CYCLE_LEN;
        self.cycle_stamp = now;
        self.loss_in_phase = false;
    }

    /// Advance the cycle when the current phase is done.
    pub(super) fn update_cycle_phase(&mut self, ack: &AckSample) {
        if self.mode == Mode::ProbeBw && self.is_next_cycle_phase(ack) {
            self.cycle_idx = (self.cycle_idx + 1) % CYCLE_LEN;
            self.cycle_stamp = ack.now;
            self.loss_in_phase = false;
        }
    }

    fn is_next_cycle_phase(&self, ack: &AckSample) -> bool {
        let Some((min_rtt, _)) = self.min_rtt else { return false };
        let full_length = ack.now.saturating_since(self.cycle_stamp) > min_rtt;
        let gain = PACING_GAIN_CYCLE[self.cycle_idx];
        if gain == 1.0 {
            return full_length;
        }
        let inflight = self.pkts(ack.prior_in_flight);
        let bw = self.btl_bw();
        if gain > 1.0 {
            // Probe until the flight reaches gain·BDP, but not past a loss: a
            // shallow buffer may not hold that much.
            full_length && (self.loss_in_phase || inflight >= self.inflight_target(bw, gain))
        } else {
            // Drain phase ends early once the queue is gone (flight ≤ BDP).
            full_length || inflight <= self.inflight_target(bw, 1.0)
        }
    }
}
