//! The congestion window: gain · BDP plus the ACK-aggregation and quantization
//! allowances, reached by slow-starting toward it; per-ACK loss deduction and
//! packet conservation in the first round of recovery (draft-00 "Congestion
//! window", "Modulating cwnd in loss recovery"; Linux `bbr_set_cwnd`,
//! `bbr_set_cwnd_to_recover_or_restore`, `bbr_save_cwnd`, `bbr_inflight`,
//! `bbr_quantization_budget`, `bbr_tso_segs_goal`).

use super::{Bbr, CaState, Mode, TCP_INIT_CWND};
use crate::cc::pacing::{GSO_PAYLOAD_MAX, PACING_SHIFT};
use crate::cc::AckSample;
use netunits::Bandwidth;

/// Pacing rate below which Linux sends one-segment bursts, above it two
/// (`bbr_min_tso_rate`, 1.2 Mbit/s, used by `bbr_min_tso_segs`).
const MIN_TSO_RATE: u64 = 1_200_000;
/// A send burst is ~1 ms of the pacing rate (`PACING_SHIFT`), at most one GSO
/// packet's payload (`GSO_PAYLOAD_MAX`) and at most 127 segments (`bbr_tso_segs_goal`'s `0x7F`).
const MAX_BURST_SEGS: u64 = 0x7F;

impl Bbr {
    /// Linux `bbr_tso_segs_goal`: the send quantum in packets, ~1 ms of the
    /// pacing rate, at least `bbr_min_tso_segs` (1 packet below 1.2 Mbit/s, else
    /// 2). Linux budgets cwnd for bursts of this size whether or not the device
    /// segments them (it ignores the driver's GSO limits here), so this mirrors
    /// the window Linux keeps, not netsim's sender, which sends single packets.
    pub(super) fn tso_segs_goal(&self) -> u64 {
        let rate_bytes = self.pacing_rate.as_bps() / 8;
        let min_segs = if self.pacing_rate.as_bps() < MIN_TSO_RATE { 1 } else { 2 };
        let bytes = (rate_bytes >> PACING_SHIFT).min(GSO_PAYLOAD_MAX);
        (bytes / self.mss).max(min_segs).min(MAX_BURST_SEGS)
    }

    /// Linux `bbr_quantization_budget`: room for three quanta (sending host's
    /// queue, its segmentation engine, the receiver's ACK coalescing), rounded
    /// up to an even number of packets to suit delayed ACKs, plus 2 packets in
    /// the 1.25 probing phase so that small BDPs still reach above 1·BDP.
    fn quantization_budget(&self, cwnd: u64) -> u64 {
        let mut c = cwnd + 3 * self.tso_segs_goal();
        c = c.div_ceil(2) * 2;
        if self.mode == Mode::ProbeBw && self.cycle_idx == 0 {
            c += 2;
        }
        c
    }

    /// gain · BDP with the quantization allowance, packets (Linux `bbr_inflight`;
    /// no aggregation allowance: this is the flight target of the gain cycle).
    pub(super) fn inflight_target(&self, bw: Bandwidth, gain: f64) -> u64 {
        self.quantization_budget(self.bdp_pkts(bw, gain))
    }

    /// The cwnd target (the middle of Linux `bbr_set_cwnd`): gain · BDP plus the
    /// ACK-aggregation allowance, then the quantization budget.
    pub(super) fn cwnd_target(&self, bw: Bandwidth, gain: f64) -> u64 {
        self.quantization_budget(self.bdp_pkts(bw, gain) + self.ack_aggregation_cwnd())
    }

    /// Remember the last "good" window before recovery or PROBE_RTT cuts it
    /// (Linux `bbr_save_cwnd`).
    pub(super) fn save_cwnd(&mut self) {
        if self.prev_ca_state < CaState::Recovery && self.mode != Mode::ProbeRtt {
            self.prior_cwnd = self.cwnd;
        } else {
            // Already cut: keep the larger of what we had saved and have now.
            self.prior_cwnd = self.prior_cwnd.max(self.cwnd);
        }
    }

    /// Linux `bbr_set_cwnd_to_recover_or_restore`: the window after this ACK's
    /// loss deduction and recovery transitions, and whether packet conservation
    /// is in force (then the model's target is not applied to it).
    ///
    /// Every ACK first takes the packets it newly marked lost off cwnd (an ACK
    /// for P packets then releases at most 2·P after the slow start below).
    /// First ACK of recovery: cwnd = flight + newly ACKed (one packet out per
    /// packet ACKed) and a new round starts. After one round, cwnd may grow by
    /// `acked` per ACK. On leaving recovery the saved window comes back.
    fn recover_or_restore(&mut self, ack: &AckSample, acked: u64) -> (u64, bool) {
        let mut cwnd = self.cwnd;
        if self.rs_losses > 0 {
            cwnd = cwnd.saturating_sub(self.rs_losses).max(1);
        }
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
            (cwnd.max(flight + acked), true)
        } else {
            (cwnd, false)
        }
    }

    /// Linux `bbr_set_cwnd`: slow-start toward the target (if the estimate is
    /// growing, or losses have drawn cwnd below it) or snap down to it; never
    /// below 4 packets, and at most 4 in PROBE_RTT.
    pub(super) fn set_cwnd(&mut self, ack: &AckSample, bw: Bandwidth, gain: f64) {
        let acked = ack.acked_segments as u64;
        if acked > 0 {
            let (cwnd, conserving) = self.recover_or_restore(ack, acked);
            self.cwnd = if conserving { cwnd } else { self.grow_toward_target(cwnd, acked, bw, gain) };
        }
        if self.mode == Mode::ProbeRtt {
            self.cwnd = self.cwnd.min(self.cfg.min_cwnd_segments);
        }
    }

    /// The model's part of Linux `bbr_set_cwnd`: after the pipe is full, grow by
    /// `acked` up to the target and snap down to it; before, never cut (the
    /// estimate is rising). At least `min_cwnd` packets.
    fn grow_toward_target(&self, cwnd: u64, acked: u64, bw: Bandwidth, gain: f64) -> u64 {
        let target = self.cwnd_target(bw, gain);
        let grown = if self.full_bw_reached {
            (cwnd + acked).min(target)
        } else if cwnd < target || self.delivered < TCP_INIT_CWND * self.mss {
            cwnd + acked
        } else {
            cwnd
        };
        grown.max(self.cfg.min_cwnd_segments)
    }
}
