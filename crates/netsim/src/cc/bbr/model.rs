//! BBR's path model: packet-timed rounds, the max-bandwidth filter and the
//! min_rtt estimate (draft-00 "Network path model"; Linux `bbr_update_bw`,
//! `bbr_update_min_rtt`).

use super::{Bbr, Mode, TCP_INIT_CWND};
use crate::cc::AckSample;
use netunits::Bandwidth;

impl Bbr {
    /// Count rounds, run the long-term sampler, and feed the bandwidth filter
    /// (Linux `bbr_update_bw`).
    ///
    /// A round ends when a packet sent after the previous round ended is
    /// delivered: `prior_delivered` (the delivered count when the sampled packet
    /// was sent) has reached the mark recorded at the last round start
    /// (draft-00 "Tracking time for the BBR.BtlBw max filter").
    pub(super) fn update_bw(&mut self, ack: &AckSample) {
        self.round_start = false;
        let Some(rs) = ack.rate else { return };
        if rs.interval.as_nanos() == 0 {
            return; // not a valid observation
        }
        if rs.prior_delivered >= self.next_round_delivered {
            self.next_round_delivered = self.delivered;
            self.round_count += 1;
            self.round_start = true;
            // Packet conservation lasts one round of recovery (draft-00
            // "Modulating cwnd in loss recovery").
            self.packet_conservation = false;
        }
        let app_limited = self.sample_is_app_limited(ack);
        self.rs_app_limited = app_limited;
        self.lt_bw_sampling(self.rs_losses, app_limited);
        // An app-limited sample measures the application, not the path: it may
        // only RAISE the estimate (draft-00 "Delivery rate samples"; Cardwell et
        // al. 2016 "the filter ... ignores app-limited samples unless ...").
        let bw = rs.delivery_rate.as_bps();
        if !app_limited || bw >= self.bw.get() {
            self.bw.running_max(self.cfg.bw_window_rounds, self.round_count, bw);
        }
    }

    /// The sender's app-limited flag, or a packet sent while PROBE_RTT held the
    /// window down (Linux marks those via `tp->app_limited`; fairlab's sender
    /// does not know about PROBE_RTT, so the mark is kept here).
    pub(super) fn sample_is_app_limited(&mut self, ack: &AckSample) -> bool {
        let Some(rs) = ack.rate else { return ack.app_limited };
        let mut limited = rs.is_app_limited;
        if let Some(mark) = self.app_limited_until {
            if rs.prior_delivered <= mark {
                limited = true;
            }
            if rs.total_delivered > mark {
                self.app_limited_until = None;
            }
        }
        limited
    }

    /// Has the min_rtt estimate outlived its window (10 s)?
    pub(super) fn min_rtt_expired(&self, now: netunits::SimTime) -> bool {
        match self.min_rtt {
            None => false,
            Some((_, stamp)) => now > stamp + self.cfg.min_rtt_window,
        }
    }

    /// Update min_rtt with this ACK's RTT sample; enter and run PROBE_RTT
    /// (Linux `bbr_update_min_rtt`).
    pub(super) fn update_min_rtt(&mut self, ack: &AckSample) {
        let expired = self.min_rtt_expired(ack.now);
        if let Some(rtt) = ack.rtt {
            // An equal sample refreshes the stamp too (Linux `rtt_us <=
            // min_rtt_us`). An expired estimate is replaced by whatever the path
            // shows now, even if higher (draft-00 "BBR.RTprop min filter"); Linux
            // skips delayed-ACK samples there, a flag fairlab's ACKs do not carry.
            let lower = self.min_rtt.is_none_or(|(m, _)| rtt <= m);
            if lower || expired {
                self.min_rtt = Some((rtt, ack.now));
            }
        }
        // A zero PROBE_RTT duration disables the mode (Linux: bbr_probe_rtt_mode_ms > 0).
        let probe_rtt_enabled = self.cfg.probe_rtt_duration.as_nanos() > 0;
        if probe_rtt_enabled && expired && !self.idle_restart && self.mode != Mode::ProbeRtt {
            self.enter_probe_rtt();
        }
        if self.mode == Mode::ProbeRtt {
            self.run_probe_rtt(ack);
        }
        if ack.rate.is_some_and(|rs| rs.delivered > 0) {
            self.idle_restart = false;
        }
    }

    /// Bandwidth-delay product in packets with `gain`, rounded up (Linux
    /// `bbr_bdp`). Without an RTT sample yet, Linux's `TCP_INIT_CWND` (a safe cap).
    pub(super) fn bdp_pkts(&self, bw: Bandwidth, gain: f64) -> u64 {
        let Some((rtt, _)) = self.min_rtt else { return TCP_INIT_CWND };
        let bytes = bw.bytes_in(rtt) as f64 * gain;
        (bytes / self.mss as f64).ceil() as u64
    }
}
