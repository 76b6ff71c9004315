//! Linux's segment-counting Reno core and a packet-timed round tracker, shared by
//! the Linux-derived delay-family controllers (Vegas, Westwood+, TCP-LP,
//! Compound), which all fall back to Reno for slow start, the additive increase
//! or the loss response.
//!
//! Read this first: this mirrors `tcp_slow_start`, `tcp_cong_avoid_ai` and
//! `tcp_reno_ssthresh` in Linux `net/ipv4/tcp_cong.c` — windows in segments, a
//! per-ACK counter for the additive increase (STYLE.md §4) — not the RFC
//! byte-counting Reno of `reno.rs`. Linux's delay modules call exactly these
//! helpers, so their Reno parts keep Linux semantics here too.

use super::{AckSample, RtoEpisode};
use netunits::SimDuration;

/// A congestion window in segments with Linux's Reno growth and reduction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SegReno {
    /// Congestion window, segments.
    pub cwnd: u64,
    /// Slow-start threshold, segments (`u64::MAX` until the first reduction).
    pub ssthresh: u64,
    /// ACKed segments not yet turned into window growth (`snd_cwnd_cnt`).
    pub cnt: u64,
    /// (cwnd, ssthresh) before the last reduction, for undo.
    prior: Option<(u64, u64)>,
}

impl SegReno {
    /// Start at the initial window with an infinite ssthresh.
    pub(crate) fn new(iw_segments: u64) -> Self {
        SegReno { cwnd: iw_segments.max(1), ssthresh: u64::MAX, cnt: 0, prior: None }
    }

    /// `cwnd < ssthresh` (Linux `tcp_in_slow_start`).
    pub(crate) fn in_slow_start(&self) -> bool {
        self.cwnd < self.ssthresh
    }

    /// Slow start: +1 segment per segment ACKed, not past ssthresh; returns the
    /// ACKed segments left over once ssthresh is reached (`tcp_slow_start`).
    pub(crate) fn slow_start(&mut self, acked: u64) -> u64 {
        let cwnd = (self.cwnd + acked).min(self.ssthresh);
        let used = cwnd - self.cwnd;
        self.cwnd = cwnd;
        acked - used
    }

    /// Additive increase of one segment per `w` segments ACKed
    /// (`tcp_cong_avoid_ai`): with w = cwnd, +1 segment per RTT.
    pub(crate) fn cong_avoid_ai(&mut self, w: u64, acked: u64) {
        let w = w.max(1);
        // A window that shrank below the counter: credit at once.
        if self.cnt >= w {
            self.cnt = 0;
            self.cwnd += 1;
        }
        self.cnt += acked;
        if self.cnt >= w {
            let delta = self.cnt / w;
            self.cnt -= delta * w;
            self.cwnd += delta;
        }
    }

    /// Reno's per-ACK growth (`tcp_reno_cong_avoid` without the cwnd-limited
    /// check, which callers do with `ack.app_limited`).
    pub(crate) fn reno(&mut self, acked: u64) {
        let mut acked = acked;
        if self.in_slow_start() {
            acked = self.slow_start(acked);
            if acked == 0 {
                return;
            }
        }
        self.cong_avoid_ai(self.cwnd, acked);
    }

    /// Reno's per-ACK growth unless the ACK says the sender was not using the
    /// window (Linux `tcp_is_cwnd_limited`) or is in recovery.
    pub(crate) fn reno_on_ack(&mut self, ack: &AckSample) {
        if ack.in_recovery || ack.app_limited {
            return;
        }
        self.reno(ack.acked_segments as u64);
    }

    fn save(&mut self) {
        self.prior = Some((self.cwnd, self.ssthresh));
    }

    /// Loss episode: ssthresh = max(cwnd/2, 2) (`tcp_reno_ssthresh`), and cwnd =
    /// ssthresh on entering recovery (RFC 6675 §5, as the trait requires).
    pub(crate) fn halve(&mut self) {
        self.reduce_to(self.cwnd / 2);
    }

    /// Loss episode with a controller-chosen ssthresh (floored at 2 segments).
    pub(crate) fn reduce_to(&mut self, ssthresh: u64) {
        self.save();
        self.ssthresh = ssthresh.max(2);
        self.cwnd = self.ssthresh;
        self.cnt = 0;
    }

    /// RTO: cwnd = 1 segment (RFC 5681 §3.1 loss window); for a new episode
    /// ssthresh = max(cwnd/2, 2) (Linux asks the `ssthresh` op, i.e. the window,
    /// not FlightSize).
    pub(crate) fn rto(&mut self, episode: RtoEpisode) {
        self.rto_with(self.cwnd / 2, episode);
    }

    /// RTO with a controller-chosen ssthresh (floored at 2 segments) for a new
    /// episode; inside one, ssthresh and the saved window stay.
    pub(crate) fn rto_with(&mut self, ssthresh: u64, episode: RtoEpisode) {
        if episode == RtoEpisode::New {
            self.save();
            self.ssthresh = ssthresh.max(2);
        }
        self.cwnd = 1;
        self.cnt = 0;
    }

    /// Spurious reduction: back to at least the window from before it
    /// (`tcp_reno_undo_cwnd`) and to at least Linux's `prior_ssthresh` =
    /// `tcp_current_ssthresh` then, max(ssthresh, ¾ cwnd) (`tcp_undo_cwnd_reduction`).
    pub(crate) fn undo(&mut self) {
        if let Some((c, s)) = self.prior.take() {
            self.cwnd = self.cwnd.max(c);
            self.ssthresh = if s == u64::MAX { s } else { self.ssthresh.max(s.max((c >> 1) + (c >> 2))) };
        }
    }
}

/// Packet-timed rounds from ACK accounting alone: a round ends when every byte
/// that was in flight when it began has been acknowledged — Linux's
/// "`ack` after `beg_snd_nxt`" test (tcp_vegas.c) without sequence numbers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct AckRounds {
    acked_total: u64,
    end_mark: u64,
}

impl AckRounds {
    /// The rounds of a controller attached with `sent` bytes already in flight
    /// ([`super::CcInit::sent_before_attach`]): Linux sets `beg_snd_nxt` to
    /// `snd_nxt` when it attaches, so the ACK of those bytes ends no round.
    pub(crate) fn after(sent: u64) -> Self {
        AckRounds { acked_total: 0, end_mark: sent }
    }

    /// Account an ACK; true if it ended the current round (and started the next).
    pub(crate) fn on_ack(&mut self, ack: &AckSample) -> bool {
        self.acked_total += ack.acked_bytes;
        if self.acked_total > self.end_mark {
            self.end_mark = self.acked_total + ack.in_flight.max(1);
            true
        } else {
            false
        }
    }

    /// Start a fresh round now (after recovery, RTO or idle: the data in flight
    /// was sent under different conditions). The next ACK ends it.
    pub(crate) fn restart(&mut self) {
        self.end_mark = self.acked_total;
    }
}

/// [`AckRounds`] with the RTT samples a Vegas-style controller judges each round
/// by (Linux `tcp_vegas_pkts_acked`): BaseRTT, the lowest RTT ever seen, and the
/// current round's minimum RTT and sample count.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct RttRounds {
    rounds: AckRounds,
    /// Lowest RTT seen (BaseRTT).
    pub base_rtt: Option<SimDuration>,
    /// Lowest RTT of the current round.
    pub round_min_rtt: Option<SimDuration>,
    /// RTT samples in the current round.
    pub round_samples: u32,
}

impl RttRounds {
    /// No samples yet; the first round ends after `sent` bytes ([`AckRounds::after`]).
    pub(crate) fn after(sent: u64) -> Self {
        RttRounds { rounds: AckRounds::after(sent), ..Self::default() }
    }

    /// Take the ACK's RTT sample, if it has one (also during recovery).
    pub(crate) fn sample(&mut self, ack: &AckSample) {
        if let Some(rtt) = ack.rtt {
            let rtt = rtt.max(SimDuration::from_nanos(1)); // never a zero BaseRTT
            self.base_rtt = Some(self.base_rtt.map_or(rtt, |b| b.min(rtt)));
            self.round_min_rtt = Some(self.round_min_rtt.map_or(rtt, |m| m.min(rtt)));
            self.round_samples += 1;
        }
    }

    /// Account an ACK; true if it ended the current round. Judge the round from
    /// the samples, then call [`RttRounds::next_round`].
    pub(crate) fn round_ended(&mut self, ack: &AckSample) -> bool {
        self.rounds.on_ack(ack)
    }

    /// Forget the judged round's samples.
    pub(crate) fn next_round(&mut self) {
        self.round_min_rtt = None;
        self.round_samples = 0;
    }

    /// Begin a fresh round with no samples now (Linux `vegas_enable`; see
    /// [`AckRounds::restart`]).
    pub(crate) fn restart(&mut self) {
        self.rounds.restart();
        self.next_round();
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::ack_sample;
    use super::*;
    use netunits::SimTime;

    #[test]
    fn slow_start_adds_one_per_acked_segment_and_stops_at_ssthresh() {
        let mut w = SegReno::new(10);
        w.ssthresh = 15;
        assert_eq!(w.slow_start(3), 0);
        assert_eq!(w.cwnd, 13);
        assert_eq!(w.slow_start(4), 2, "two ACKed segments left over past ssthresh");
        assert_eq!(w.cwnd, 15);
    }

    #[test]
    fn congestion_avoidance_adds_one_segment_per_window_acked() {
        let mut w = SegReno::new(20);
        w.ssthresh = 20;
        for _ in 0..20 {
            w.reno(1);
        }
        assert_eq!(w.cwnd, 21);
        for _ in 0..21 {
            w.reno(1);
        }
        assert_eq!(w.cwnd, 22);
    }

    #[test]
    fn halve_rto_and_undo() {
        let mut w = SegReno::new(40);
        w.halve();
        assert_eq!((w.cwnd, w.ssthresh), (20, 20));
        w.undo();
        assert_eq!(w.cwnd, 40);
        // Infinite before the reduction: infinite again.
        assert_eq!(w.ssthresh, u64::MAX);
        // Finite before: max(ssthresh now, max(10, ¾·40 = 30)) = 30.
        w.ssthresh = 10;
        w.halve();
        w.undo();
        assert_eq!((w.cwnd, w.ssthresh), (40, 30));
        w.rto(crate::cc::RtoEpisode::New);
        assert_eq!((w.cwnd, w.ssthresh), (1, 20));
        let mut small = SegReno::new(3);
        small.halve();
        assert_eq!(small.ssthresh, 2, "floored at 2 segments");
    }

    /// One MSS-sized ACK at a time, with `in_flight` bytes left outstanding after it.
    fn seg_ack(in_flight: u64) -> AckSample {
        ack_sample(SimTime::from_millis(1), 1, SimDuration::from_millis(100), in_flight)
    }

    #[test]
    fn a_round_ends_strictly_after_the_data_in_flight_at_its_start() {
        // Linux tcp_vegas.c ends a round when `after(ack, beg_snd_nxt)`: the ACK
        // that covers exactly the data in flight when the round began does not end
        // it, the next one does (the kernel's slow-start rounds grow 10 → 21 → 43,
        // not 10 → 19 → 37, in a traced Vegas run).
        let mut r = AckRounds::default();
        assert!(r.on_ack(&seg_ack(10_000)), "the first ACK opens the first round");
        // 10 segments were in flight after it: the 10th ACK reaches the mark exactly.
        for k in 1..=10 {
            assert!(!r.on_ack(&seg_ack(10_000)), "ACK {k} of the round ended it early");
        }
        assert!(r.on_ack(&seg_ack(20_000)), "the 11th ACK is the first after the mark");
        r.restart();
        assert!(r.on_ack(&seg_ack(0)), "after a restart the next ACK ends the round");
    }
}
