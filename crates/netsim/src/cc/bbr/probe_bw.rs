//! PROBE_BW gain cycling (draft-00 "ProbeBW"; Cardwell et al. 2016 "Steady
//! state"; Linux `bbr_reset_probe_bw_mode`, `bbr_is_next_cycle_phase`,
//! `bbr_advance_cycle_phase`).
//!
//! Eight phases of about one min_rtt each: 1.25 probes for more bandwidth,
//! 0.75 drains whatever queue that probe built, then six phases cruise at 1.0.
//! Each entry starts at a random phase other than the 0.75 one, so that flows
//! which entered together (after a shared PROBE_RTT) do not probe in step.

use super::config::CYCLE_LEN;
use super::{Bbr, Mode};
use crate::cc::AckSample;
use netunits::SimTime;

/// Linux `bbr_cycle_rand`: the entry phase is drawn from 7 of the 8.
const CYCLE_RAND: u64 = 7;

/// SplitMix64's output function (Steele, Lea, Flood, "Fast splittable
/// pseudorandom number generators", OOPSLA 2014): a well-mixed hash of a u64.
fn mix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The PROBE_BW entry phase for a random `draw`: Linux's `CYCLE_LEN − 1 − r`,
/// r = draw mod 7, advanced once, so never phase 1 (the 0.75 drain).
fn entry_phase(draw: u64) -> usize {
    let r = (draw % CYCLE_RAND) as usize;
    (CYCLE_LEN - r) % CYCLE_LEN
}

impl Bbr {
    /// Enter PROBE_BW (Linux `bbr_reset_probe_bw_mode`): Linux sets
    /// `cycle_idx = CYCLE_LEN − 1 − r`, r uniform in [0, 7), then advances once,
    /// so the first phase is uniform over {0, 2, 3, …, 7} and its clock starts
    /// now. `BbrConfig::cycle_start` can pin the phase instead.
    pub(super) fn reset_probe_bw_mode(&mut self, now: SimTime) {
        self.mode = Mode::ProbeBw;
        self.probe_bw_entries += 1;
        let phase = match self.cfg.cycle_start {
            Some(i) => i % CYCLE_LEN,
            None => entry_phase(self.cycle_draw(now)),
        };
        self.cycle_idx = phase;
        self.cycle_stamp = now;
    }

    /// Linux's `prandom_u32_max` stand-in. Controllers own no RNG, so this hashes
    /// what this controller has been told: the time, the bytes delivered and lost
    /// and the entry count. Same scenario and seed ⇒ same phases; two flows
    /// differ as soon as their ACK histories do.
    fn cycle_draw(&self, now: SimTime) -> u64 {
        let key = now.as_nanos() ^ self.delivered.rotate_left(21) ^ self.lost_pkts.rotate_left(42) ^ self.probe_bw_entries.wrapping_mul(0xD6E8_FEB8_6659_FD93);
        mix64(key)
    }

    /// Advance the cycle when the current phase is done (Linux
    /// `bbr_update_cycle_phase`, `bbr_advance_cycle_phase`).
    pub(super) fn update_cycle_phase(&mut self, ack: &AckSample) {
        if self.mode == Mode::ProbeBw && self.is_next_cycle_phase(ack) {
            self.cycle_idx = (self.cycle_idx + 1) % CYCLE_LEN;
            self.cycle_stamp = self.delivered_stamp;
        }
    }

    /// Linux `bbr_is_next_cycle_phase`. A phase lasts at least min_rtt (measured
    /// from delivery times, `tp->delivered_mstamp`). The 1.25 phase also waits
    /// until the flight reaches 1.25·BDP, unless this ACK reported a loss (a
    /// shallow buffer may not hold that much); the 0.75 phase ends early once the
    /// flight is down to one BDP. The flight is the one before this ACK
    /// (`rs->prior_in_flight`); Linux's adjustment to the next departure time is
    /// not modelled (the sender has no EDT queue).
    fn is_next_cycle_phase(&self, ack: &AckSample) -> bool {
        let Some((min_rtt, _)) = self.min_rtt else { return false };
        let full_length = self.delivered_stamp.saturating_since(self.cycle_stamp) > min_rtt;
        let gain = self.pacing_gain;
        if gain == 1.0 {
            return full_length;
        }
        let inflight = self.pkts(ack.prior_in_flight);
        let bw = self.btl_bw();
        if gain > 1.0 {
            full_length && (self.rs_losses > 0 || inflight >= self.inflight_target(bw, gain))
        } else {
            full_length || inflight <= self.inflight_target(bw, 1.0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_phase_is_never_the_drain_phase_and_covers_the_other_seven() {
        // (CYCLE_LEN − r) mod 8 for r in 0..7 is {0, 7, 6, 5, 4, 3, 2}.
        let mut seen = [0u32; CYCLE_LEN];
        for k in 0..7000u64 {
            seen[entry_phase(mix64(k))] += 1;
        }
        assert_eq!(seen[1], 0, "phase 1 (0.75) is never entered");
        for (i, &n) in seen.iter().enumerate().filter(|(i, _)| *i != 1) {
            assert!((800..1200).contains(&n), "phase {i}: {n} of 7000 (uniform: 1000)");
        }
    }
}
