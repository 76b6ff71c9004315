//! PROBE_RTT: every `min_rtt_window` (10 s) without a new minimum, cut the
//! window to `min_cwnd` (4 packets) for at least `probe_rtt_duration` (200 ms)
//! and one round, so the bottleneck queue drains and the propagation RTT shows
//! (draft-00 "ProbeRTT"; Cardwell et al. 2016; Linux `bbr_update_min_rtt`,
//! `bbr_check_probe_rtt_done`). Flows sharing a queue tend to synchronise their
//! PROBE_RTTs because draining it gives all of them a new minimum at once.

use super::{Bbr, Mode};
use crate::cc::AckSample;
use netunits::SimTime;

impl Bbr {
    /// Enter PROBE_RTT, remembering the window to restore on exit.
    pub(super) fn enter_probe_rtt(&mut self) {
        self.mode = Mode::ProbeRtt;
        self.save_cwnd();
        self.probe_rtt_done = None;
    }

    /// Per-ACK PROBE_RTT bookkeeping.
    pub(super) fn run_probe_rtt(&mut self, ack: &AckSample) {
        // Everything sent from now until the exit is at a deliberately low rate:
        // keep those samples out of the max filter (Linux `tp->app_limited`).
        self.app_limited_until = Some((self.delivered + ack.in_flight).max(1));
        let min_flight = self.cfg.min_cwnd_segments;
        match self.probe_rtt_done {
            None if self.pkts(ack.in_flight) <= min_flight => {
                // The flight is down to the minimum: hold it for the duration AND
                // a full round, whichever is longer.
                self.probe_rtt_done = Some(ack.now + self.cfg.probe_rtt_duration);
                self.probe_rtt_round_done = false;
                self.next_round_delivered = self.delivered;
            }
            None => {}
            Some(_) => {
                if self.round_start {
                    self.probe_rtt_round_done = true;
                }
                if self.probe_rtt_round_done {
                    self.check_probe_rtt_done(ack.now);
                }
            }
        }
    }

    /// Leave PROBE_RTT once its time is up: the current RTT becomes the fresh
    /// min_rtt stamp, the saved window comes back.
    pub(super) fn check_probe_rtt_done(&mut self, now: SimTime) {
        let Some(done) = self.probe_rtt_done else { return };
        if now <= done {
            return;
        }
        // Restart the 10 s clock even if no lower RTT was seen: the path was
        // probed, and the current estimate stands (draft-00 "ProbeRTT").
        if let Some((rtt, _)) = self.min_rtt {
            self.min_rtt = Some((rtt, now));
        }
        self.cwnd = self.cwnd.max(self.prior_cwnd);
        self.reset_mode(now);
    }
}
