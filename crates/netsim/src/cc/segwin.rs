//! Linux-style window bookkeeping in segments, shared by the Linux-derived
//! controllers (CUBIC, BIC, HighSpeed, H-TCP, Scalable, Hybla, Illinois, Veno,
//! YeAH).
//!
//! Read this first: Linux keeps `snd_cwnd` and `snd_ssthresh` in segments and grows
//! the window with a per-ACK counter `snd_cwnd_cnt` (STYLE.md §4). These helpers
//! mirror the semantics of the shared routines in `net/ipv4/tcp_cong.c` (modern
//! kernels): `tcp_slow_start` (cwnd += acked segments, capped at ssthresh, the rest
//! returned), `tcp_cong_avoid_ai` (+1 segment per `w` acked segments) and
//! `tcp_reno_cong_avoid`. The conversion to bytes happens only in
//! [`SegWindow::cwnd_bytes`] / [`SegWindow::ssthresh_bytes`], with the MSS the
//! controller was built with.
//!
//! The reaction to an episode is RFC 6675's: ssthresh from the algorithm's own rule
//! and cwnd = ssthresh at once (Linux reaches the same point gradually via PRR,
//! RFC 6937). An RTO sets cwnd to 1 segment (RFC 5681 §3.1, Linux `tcp_enter_loss`).
//! So every controller here handles an episode the same way: save its whole
//! (`Copy`) state, let its `ssthresh` rule run, then [`SegWindow::enter_recovery`]
//! or [`SegWindow::enter_loss`]; a spurious-loss undo is [`undo_to_saved`].

use super::{CcInit, CcMetrics};

/// "No threshold yet": Linux `TCP_INFINITE_SSTHRESH`, reported as `u64::MAX` bytes.
pub(crate) const INFINITE_SSTHRESH: u32 = u32::MAX;

/// Window, threshold and per-ACK counter in segments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SegWindow {
    /// `snd_cwnd`, segments (never below 1).
    pub cwnd: u32,
    /// `snd_ssthresh`, segments.
    pub ssthresh: u32,
    /// `snd_cwnd_cnt`: segments acknowledged towards the next +1.
    pub cnt: u32,
    /// Bytes per segment (the controller's MSS).
    pub mss: u64,
    /// Initial window, segments (for idle restart).
    pub iw: u32,
    /// A loss episode is under way (the trace shows "recovery"): set on entering
    /// recovery, cleared by its exit, an ACK outside recovery, an RTO or an undo.
    pub in_recovery: bool,
}

impl SegWindow {
    /// Initial window from `init`, no threshold.
    pub(crate) fn new(init: &CcInit) -> Self {
        let iw = init.initial_cwnd_segments.clamp(1, u32::MAX as u64) as u32;
        SegWindow { cwnd: iw, ssthresh: INFINITE_SSTHRESH, cnt: 0, mss: init.mss.max(1), iw, in_recovery: false }
    }

    /// Linux `tcp_in_slow_start`: cwnd < ssthresh.
    pub(crate) fn in_slow_start(&self) -> bool {
        self.cwnd < self.ssthresh
    }

    /// Linux `tcp_slow_start`: grow by `acked` segments but not past ssthresh;
    /// return the acked segments left over for congestion avoidance.
    pub(crate) fn slow_start(&mut self, acked: u32) -> u32 {
        let new = self.cwnd.saturating_add(acked).min(self.ssthresh);
        let used = new - self.cwnd;
        self.cwnd = new;
        acked - used
    }

    /// Linux `tcp_cong_avoid_ai`: +1 segment for every `w` segments acknowledged
    /// (so +cwnd/w segments per RTT). `w` of 0 is treated as 1.
    pub(crate) fn cong_avoid_ai(&mut self, w: u32, acked: u32) {
        let w = w.max(1);
        // A counter left over from a larger w credits at once (as Linux does).
        if self.cnt >= w {
            self.cnt = 0;
            self.cwnd = self.cwnd.saturating_add(1);
        }
        self.cnt = self.cnt.saturating_add(acked);
        if self.cnt >= w {
            let delta = self.cnt / w;
            self.cnt -= delta * w;
            self.cwnd = self.cwnd.saturating_add(delta);
        }
    }

    /// Linux `tcp_reno_cong_avoid` (after the cwnd-limited check): slow start,
    /// then +1 segment per window acknowledged.
    pub(crate) fn reno_cong_avoid(&mut self, acked: u32) {
        let mut acked = acked;
        if self.in_slow_start() {
            acked = self.slow_start(acked);
            if acked == 0 {
                return;
            }
        }
        let w = self.cwnd;
        self.cong_avoid_ai(w, acked);
    }

    /// A loss/ECN episode begins: ssthresh = `ssthresh` (at least 2, Linux's floor
    /// in every `ssthresh` op), cwnd = ssthresh (RFC 6675 §5), counter cleared.
    pub(crate) fn enter_recovery(&mut self, ssthresh: u32) {
        self.ssthresh = ssthresh.max(2);
        self.cwnd = self.ssthresh;
        self.cnt = 0;
        self.in_recovery = true;
    }

    /// RTO: ssthresh = `ssthresh` (at least 2), cwnd = 1 segment (RFC 5681 §3.1
    /// loss window; Linux `tcp_enter_loss`). The trace shows slow start again.
    pub(crate) fn enter_loss(&mut self, ssthresh: u32) {
        self.ssthresh = ssthresh.max(2);
        self.cwnd = 1;
        self.cnt = 0;
        self.in_recovery = false;
    }

    /// Spurious-loss undo (Linux `tcp_undo_cwnd_reduction`): `self` is the window
    /// saved before the reduction; keep the larger of it and the `current` window,
    /// and for ssthresh the larger of the current one and Linux's
    /// `prior_ssthresh` = `tcp_current_ssthresh` at the reduction, i.e.
    /// max(saved ssthresh, ¾ saved cwnd) — unless the saved one was still "infinite".
    pub(crate) fn undo_from(&mut self, current: &SegWindow) {
        if self.ssthresh != INFINITE_SSTHRESH {
            let prior = self.ssthresh.max((self.cwnd >> 1) + (self.cwnd >> 2));
            self.ssthresh = current.ssthresh.max(prior);
        }
        self.cwnd = current.cwnd.max(self.cwnd);
        self.in_recovery = false;
    }

    /// Idle restart, RFC 5681 §4.1: cwnd = min(cwnd, IW). Like Linux
    /// `tcp_cwnd_restart`, remember 3/4 of the old window in ssthresh
    /// (`tcp_current_ssthresh`) so slow start climbs back quickly.
    pub(crate) fn idle_restart(&mut self) {
        if self.cwnd > self.iw {
            let keep = (self.cwnd as u64 * 3 / 4) as u32;
            // max(ssthresh, 3/4·cwnd); an infinite ssthresh stays infinite.
            self.ssthresh = self.ssthresh.max(keep);
            self.cwnd = self.iw;
        }
        self.cnt = 0;
    }

    /// Congestion window in bytes.
    pub(crate) fn cwnd_bytes(&self) -> u64 {
        self.cwnd.max(1) as u64 * self.mss
    }

    /// Slow-start threshold in bytes (`u64::MAX` while infinite).
    pub(crate) fn ssthresh_bytes(&self) -> u64 {
        if self.ssthresh == INFINITE_SSTHRESH {
            u64::MAX
        } else {
            self.ssthresh as u64 * self.mss
        }
    }

    /// Trace view: "recovery" during a loss episode, "slow_start" below
    /// ssthresh, otherwise the controller's own congestion-avoidance `ca_phase`.
    pub(crate) fn metrics(&self, ca_phase: &'static str) -> CcMetrics {
        let phase = if self.in_recovery {
            "recovery"
        } else if self.in_slow_start() {
            "slow_start"
        } else {
            ca_phase
        };
        CcMetrics { cwnd: self.cwnd_bytes(), ssthresh: self.ssthresh_bytes(), pacing_rate: None, phase }
    }
}

/// Spurious-loss undo (Linux `undo_cwnd`) for a controller that saves its whole
/// `Copy` state in `saved` before each reduction: bring that state back, with
/// the larger of the two windows ([`SegWindow::undo_from`]; `window` picks the
/// window out of a state). Returns the state it replaced, so that the caller can
/// keep what it has measured about the path since; `None` if nothing was saved.
pub(crate) fn undo_to_saved<S: Copy>(state: &mut S, saved: &mut Option<S>, window: fn(&mut S) -> &mut SegWindow) -> Option<S> {
    let prior = saved.take()?;
    let mut replaced = std::mem::replace(state, prior);
    let current = *window(&mut replaced);
    window(state).undo_from(&current);
    Some(replaced)
}

/// Round-trip boundaries without sequence numbers: a round ends once the bytes in
/// flight at its start are acknowledged, and the next ACK opens a new one. This
/// is Linux's "ACK after the `snd_nxt` recorded at the round start" (Vegas,
/// Illinois, YeAH, HyStart) seen from the controller's side of the trait.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct RoundTracker {
    left: u64,
    started: bool,
}

impl RoundTracker {
    /// The rounds of a controller attached with `sent` bytes already in flight
    /// ([`super::CcInit::sent_before_attach`]): Linux records `snd_nxt` as the
    /// round's end when it attaches, so the ACK of those bytes opens no round and
    /// the first ACK beyond them opens the first.
    pub(crate) fn after(sent: u64) -> Self {
        RoundTracker { left: sent, started: sent > 0 }
    }

    /// Feed one ACK; true when it opens a new round.
    pub(crate) fn on_ack(&mut self, acked_bytes: u64, in_flight_after: u64) -> bool {
        if self.started && self.left > 0 {
            self.left = self.left.saturating_sub(acked_bytes);
            false
        } else {
            self.started = true;
            self.left = in_flight_after.max(1);
            true
        }
    }

    /// Forget the current round (the next ACK opens one).
    pub(crate) fn reset(&mut self) {
        *self = RoundTracker::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tracker_attached_after_the_greeting_opens_its_first_round_beyond_it() {
        // Linux (Illinois `rtt_reset`, YeAH's Vegas half) records snd_nxt when the
        // controller attaches, after iperf3's 37-byte cookie: the cookie's ACK
        // opens no round, the first data ACK opens the first, which lasts the
        // rest of the flight of 10.
        const SEG: u64 = 1448;
        let mut r = RoundTracker::after(37);
        assert!(!r.on_ack(37, 0), "the cookie's ACK");
        assert!(r.on_ack(SEG, 9 * SEG), "the first data ACK");
        for k in 0..9 {
            assert!(!r.on_ack(SEG, 9 * SEG), "ACK {k} of the first round");
        }
        assert!(r.on_ack(SEG, 18 * SEG), "the first ACK of the second flight");
        // Attached before the cookie, the round would open on the cookie's ACK
        // and the first data ACK would close it: every round one ACK late.
        let mut early = RoundTracker::default();
        assert!(early.on_ack(37, 0));
        assert!(!early.on_ack(SEG, 9 * SEG));
        assert!(early.on_ack(SEG, 8 * SEG));
    }

    fn w(cwnd: u32, ssthresh: u32) -> SegWindow {
        SegWindow { cwnd, ssthresh, cnt: 0, mss: 1000, iw: 10, in_recovery: false }
    }

    #[test]
    fn slow_start_stops_at_ssthresh_and_returns_the_rest() {
        let mut s = w(10, 12);
        assert_eq!(s.slow_start(5), 3);
        assert_eq!(s.cwnd, 12);
    }

    #[test]
    fn ai_adds_one_per_w_acked() {
        let mut s = w(10, 5);
        for _ in 0..30 {
            s.cong_avoid_ai(10, 1);
        }
        assert_eq!(s.cwnd, 13);
        // Stretch ACK: 25 segments with w = 10 is +2, 5 carried.
        let mut s = w(10, 5);
        s.cong_avoid_ai(10, 25);
        assert_eq!((s.cwnd, s.cnt), (12, 5));
    }

    #[test]
    fn undo_brings_back_the_saved_window_and_ends_the_episode() {
        let mut s = w(40, 30);
        let mut saved = Some(s);
        s.enter_recovery(20);
        assert_eq!((s.cwnd, s.ssthresh, s.in_recovery), (20, 20, true));
        assert_eq!(s.metrics("ca").phase, "recovery");
        s.cwnd = 25; // grown since the reduction
        let replaced = undo_to_saved(&mut s, &mut saved, |w| w);
        assert_eq!(replaced.map(|r| r.cwnd), Some(25));
        assert_eq!((s.cwnd, s.ssthresh, s.in_recovery), (40, 30, false));
        assert_eq!(s.metrics("ca").phase, "ca");
        assert!(undo_to_saved(&mut s, &mut saved, |w| w).is_none(), "one undo per saved state");
    }

    #[test]
    fn undo_restores_linux_prior_ssthresh_of_three_quarters_of_the_window() {
        // tcp_enter_recovery saved prior_ssthresh = tcp_current_ssthresh =
        // max(10, (40 >> 1) + (40 >> 2)) = 30; the undo takes max(20, 30).
        let mut s = w(40, 10);
        let mut saved = Some(s);
        s.enter_recovery(20);
        undo_to_saved(&mut s, &mut saved, |w| w);
        assert_eq!((s.cwnd, s.ssthresh), (40, 30));
    }

    #[test]
    fn idle_restart_keeps_three_quarters_in_ssthresh() {
        let mut s = w(100, 50);
        s.idle_restart();
        assert_eq!((s.cwnd, s.ssthresh), (10, 75));
        let mut s = w(100, INFINITE_SSTHRESH);
        s.idle_restart();
        assert_eq!((s.cwnd, s.ssthresh), (10, INFINITE_SSTHRESH));
    }
}
