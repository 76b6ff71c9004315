//! The congestion window: gain · BDP plus a quantization allowance, reached by
//! slow-starting toward it; packet conservation in the first round of recovery
//! (draft-00 "Congestion window", "Modulating cwnd in loss recovery"; Linux
//! `bbr_set_cwnd`, `bbr_set_cwnd_to_recover_or_restore`, `bbr_save_cwnd`,
//! `bbr_quantization_budget`).

use super::{Bbr, CaState, Mode};
use crate::cc::AckSample;
use netunits::Bandwidth;

/// Pacing rate below which Linux sends one-segment bursts, above it two
/// (`bbr_min_tso_rate`, 1.2 Mbit/s, used by `bbr_min_tso_segs`).
const MIN_TSO_RATE: u64 = 1_200_000;

impl Bbr {
    /// Send quantum in packets. Linux's `bbr_tso_segs_goal` sizes TSO bursts to
    /// ~1 ms of data, but never below `bbr_min_tso_segs` (1 packet below
    /// 1.2 Mbit/s, else 2). fairlab's sender emits single-MSS packets — there is
    /// no TSO/GSO engine to feed — so we keep only that floor: the part of the
    /// allowance that covers delayed-ACK pairs, which fairlab's receiver has.
    fn quantum(&self) -> u64 {
        if self.pacing_rate.as_bps() < MIN_TSO_RATE {
            1
        } else {
            2
        }
    }

    /// Linux `bbr_quantization_budget`: room for three quanta (sending host's
    /// queue, its segmentation engine, the receiver's ACK coalescing), rounded
    /// up to an even number of packets to suit delayed ACKs, plus 2 packets in
    /// the 1.25 probing phase so that small BDPs still reach above 1·BDP.
    fn quantization_budget(&self, cwnd: u64) -> u64 {
        let mut c = cwnd + 3 * self.quantum();
        c = c.div_ceil(2) * 2;
        if self.mode == Mode::ProbeBw && self.cycle_idx == 0 {
            c += 2;
        }
        c
    }

    /// gain · BDP with the quantization allowance, packets (Linux `bbr_inflight`).
    pub(super) fn inflight_target(&self, bw: Bandwidth, gain: f64) -> u64 {
        self.quantization_budget(self.bdp_pkts(bw, gain))
    }

    /// Remember the last "good" window before recovery or PROBE_RTT cuts it.
    pub(super) fn save_cwnd(&mut self) {
        if self.prev_ca_state < CaState::Recovery && self.mode != Mode::ProbeRtt {
            self.prior_cwnd = self.cwnd;
        } else {
            // Already cut: keep the larger of what we had saved and have now.
            self.prior_cwnd = self.prior_cwnd.max(self.cwnd);
        }
    }

    /// Recovery handling on an ACK: returns `Some(cwnd)` while packet
    /// conservation is in force (then the model's target is not applied).
    ///
    /// First ACK of recovery: cwnd = flight + newly ACKed (send one packet per
    /// packet ACKed) and a new round starts. After one round, cwnd may grow by
    /// `acked` per ACK (at most 2 packets out per packet ACKed). On leaving
    /// recovery the saved window comes back.
    fn recover_or_restore(&mut self, ack: &AckSample, acked: u64) -> Option<u64> {
        let mut cwnd = self.cwnd;
        let state = self.ca_state;
        let prev = self.prev_ca_state;
        let flight = self.pkts(ack.in_flight);
        if state == CaState::Recovery && prev != CaState::Recovery {
            self.packet_conservation = true;
            self.next_round_delivered = self.delivered; // the round starts now
            cwnd = flight + acked;
        } else if prev >= CaState::Recovery && state < CaState::Recovery {
            cwnd = cwnd.max(self.prior_cwnd);
            self.packet_conservation = false;
        }
        self.prev_ca_state = state;
        if self.packet_conservation {
            return Some(cwnd.max(flight + acked));
        }
        self.cwnd = cwnd;
        None
    }

    /// Linux `bbr_set_cwnd`.
    pub(super) fn set_cwnd(&mut self, ack: &AckSample, bw: Bandwidth, gain: f64) {
        let acked = ack.acked_segments as u64;
        if acked > 0 {
            if let Some(c) = self.recover_or_restore(ack, acked) {
                self.cwnd = c;
            } else {
                let target = self.inflight_target(bw, gain);
                if self.full_bw_reached {
                    // Slow-start toward the target, or snap down to it.
                    self.cwnd = (self.cwnd + acked).min(target);
                } else if self.cwnd < target || self.delivered < self.init_cwnd * self.mss {
                    // Before the pipe is full, never cut: the estimate is rising.
                    self.cwnd += acked;
                }
                self.cwnd = self.cwnd.max(self.cfg.min_cwnd_segments);
            }
        }
        if self.mode == Mode::ProbeRtt {
            self.cwnd = self.cwnd.min(self.cfg.min_cwnd_segments);
        }
    }
}
