//! ACK-aggregation allowance (Linux 5.1+, `bbr_update_ack_aggregation`,
//! `bbr_extra_acked`, `bbr_ack_aggregation_cwnd`).
//!
//! When ACKs arrive in bursts (delayed or stretched ACKs, receive offloads,
//! host scheduling), data is acknowledged faster than `bw` for a while and then
//! not at all; a cwnd of exactly gain·BDP would stall the sender during the
//! silences. BBR measures the excess: in an "ACK epoch" that starts whenever the
//! ACKed data falls back to what `bw` predicts, `extra_acked = acked − bw·(time
//! since the epoch started)`. The windowed max of that excess (two buckets of 5
//! packet-timed rounds, so the max of the last 5–10 rounds), capped by cwnd and
//! by 100 ms worth of `bw`, is added to the cwnd target once the pipe is full.

use super::Bbr;
use crate::cc::AckSample;
use netunits::{SimDuration, SimTime};

/// Rounds per `extra_acked` bucket (Linux `bbr_extra_acked_win_rtts`).
pub(crate) const EXTRA_ACKED_WIN_ROUNDS: u32 = 5;
/// Cap of the allowance in time at `bw` (Linux `bbr_extra_acked_max_us`).
pub(crate) const EXTRA_ACKED_MAX: SimDuration = SimDuration::from_millis(100);
/// An epoch is restarted after this many packets ACKed, however old (Linux
/// `bbr_ack_epoch_acked_reset_thresh`, 2^20).
const EPOCH_ACKED_RESET: u64 = 1 << 20;
/// Linux keeps `ack_epoch_acked` in 20 bits and `extra_acked[]` in u16.
const EPOCH_ACKED_MAX: u64 = (1 << 20) - 1;
const EXTRA_ACKED_MAX_PKTS: u64 = u16::MAX as u64;

/// State of the ACK-aggregation estimator (Linux `struct bbr`'s
/// `ack_epoch_mstamp`, `ack_epoch_acked`, `extra_acked[2]`,
/// `extra_acked_win_rtts`, `extra_acked_win_idx`).
#[derive(Clone, Debug, Default)]
pub(crate) struct AckAggregation {
    epoch_start: SimTime,
    /// Packets (S)ACKed in this epoch.
    epoch_acked: u64,
    /// Max excess per bucket, packets.
    extra_acked: [u64; 2],
    /// Rounds since the current bucket was started.
    win_rounds: u32,
    win_idx: usize,
}

impl AckAggregation {
    /// Start a new epoch now (Linux `bbr_cwnd_event(CA_EVENT_TX_START)`).
    pub(crate) fn restart_epoch(&mut self, now: SimTime) {
        self.epoch_start = now;
        self.epoch_acked = 0;
    }

    /// Max excess over the last 5–10 rounds, packets (Linux `bbr_extra_acked`).
    pub(crate) fn extra_acked(&self) -> u64 {
        self.extra_acked[0].max(self.extra_acked[1])
    }
}

impl Bbr {
    /// Linux `bbr_update_ack_aggregation`, called after `update_bw`.
    pub(super) fn update_ack_aggregation(&mut self, ack: &AckSample) {
        let acked = ack.acked_segments as u64;
        // Only ACKs that deliver data and carry a valid rate sample count.
        if acked == 0 || ack.rate.is_none_or(|rs| rs.interval.as_nanos() == 0) {
            return;
        }
        let bw = self.bw();
        let cwnd = self.cwnd;
        let round_start = self.round_start;
        let now = self.delivered_stamp;
        let mss = self.mss;
        let a = &mut self.aggr;
        if round_start {
            a.win_rounds = (a.win_rounds + 1).min(0x1F);
            if a.win_rounds >= EXTRA_ACKED_WIN_ROUNDS {
                a.win_rounds = 0;
                a.win_idx ^= 1;
                a.extra_acked[a.win_idx] = 0;
            }
        }
        // Packets `bw` would have delivered since the epoch began.
        let mut expected = bw.bytes_in(now.saturating_since(a.epoch_start)) / mss;
        // The ACK rate fell back to (or below) `bw`, or the epoch is very old:
        // start a new one here.
        if a.epoch_acked <= expected || a.epoch_acked + acked >= EPOCH_ACKED_RESET {
            a.epoch_acked = 0;
            a.epoch_start = now;
            expected = 0;
        }
        a.epoch_acked = (a.epoch_acked + acked).min(EPOCH_ACKED_MAX);
        let extra = (a.epoch_acked - expected).min(cwnd).min(EXTRA_ACKED_MAX_PKTS);
        if extra > a.extra_acked[a.win_idx] {
            a.extra_acked[a.win_idx] = extra;
        }
    }

    /// Linux `bbr_ack_aggregation_cwnd`: the windowed max excess, capped at
    /// 100 ms of `bw`, and only once STARTUP has filled the pipe (extra_acked
    /// gain 1.0, Linux `bbr_extra_acked_gain`).
    pub(super) fn ack_aggregation_cwnd(&self) -> u64 {
        if !self.full_bw_reached {
            return 0;
        }
        let max_aggr = self.bw().bytes_in(EXTRA_ACKED_MAX) / self.mss;
        self.aggr.extra_acked().min(max_aggr)
    }
}
