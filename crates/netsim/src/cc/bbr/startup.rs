//! STARTUP and DRAIN (draft-00 "Startup", "Drain"; Linux
//! `bbr_check_full_bw_reached`, `bbr_check_drain`).
//!
//! STARTUP paces at 2/ln 2 · btl_bw, which doubles the delivery rate every
//! round, until three consecutive rounds (non-app-limited) fail to raise the
//! max-filtered bandwidth by 25%: the pipe is full. DRAIN then paces at
//! ln 2 / 2 until the flight falls to one BDP, removing the queue STARTUP built.

use super::{Bbr, Mode};
use crate::cc::AckSample;
use netunits::Bandwidth;

impl Bbr {
    /// Full-pipe detection, once per round (Linux `bbr_check_full_bw_reached`).
    pub(super) fn check_full_bw_reached(&mut self) {
        if self.full_bw_reached || !self.round_start {
            return;
        }
        // App-limited rounds say nothing about the pipe (`rs->is_app_limited`,
        // which includes PROBE_RTT's marking).
        if self.rs_app_limited {
            return;
        }
        let max_bw = self.bw.get();
        let threshold = self.full_bw.as_bps() as f64 * self.cfg.full_bw_growth;
        if max_bw as f64 >= threshold {
            // Still growing: remember this level and start counting again.
            self.full_bw = Bandwidth::from_bps(max_bw);
            self.full_bw_count = 0;
            return;
        }
        self.full_bw_count += 1;
        self.full_bw_reached = self.full_bw_count >= self.cfg.full_bw_rounds;
    }

    /// STARTUP → DRAIN when the pipe is full; DRAIN → PROBE_BW (at a random
    /// phase) when the flight is down to one BDP plus the quantization allowance
    /// (Linux `bbr_check_drain`).
    pub(super) fn check_drain(&mut self, ack: &AckSample) {
        if self.mode == Mode::Startup && self.full_bw_reached {
            self.mode = Mode::Drain;
            self.ssthresh = Some(self.inflight_target(self.btl_bw(), 1.0));
        }
        // Linux compares an estimate of packets still in the network at the next
        // departure time (EDT pacing in the qdisc); fairlab's sender has no such
        // queue, so the flight after this ACK is the same quantity.
        if self.mode == Mode::Drain && self.pkts(ack.in_flight) <= self.inflight_target(self.btl_bw(), 1.0) {
            self.reset_probe_bw_mode(ack.now);
        }
    }
}
