//! How a Linux sender groups new data into GSO packets, and when it holds it back
//! (Linux 6.1 `tcp_tso_autosize`, `tcp_tso_should_defer`, `tcp_write_xmit`).
//!
//! Read this first: Linux TCP always builds GSO packets ("skbs" of several
//! segments), with or without offloads on the device; a device without TSO only
//! cuts them into MTU-sized frames in software, back to back. So even an
//! offloads-off host releases new data in units of one skb, and it sizes each skb
//! to about a millisecond of its pacing rate (TSO autosizing, Dumazet 2013,
//! Linux 3.12): at least `tcp_min_tso_segs` = 2 segments, at most 64 KB. Before sending
//! an skb that the window cannot take whole, the sender waits for the next ACK
//! rather than send a small one ("TSO deferral"), unless waiting looks costly.
//! Measured on the vm backend (Linux 6.1, 100 Mbit/s, 100 ms, two flows in
//! congestion avoidance with cwnd ≈ 526 and sRTT ≈ 150 ms, so 4-segment skbs):
//! 48 % of ACKs release nothing and 45 % release four segments, where a sender
//! without deferral releases two per ACK (docs/tcp-model.md, "How the kernel's
//! senders release segments").
//!
//! The write queue: `sendmsg` builds skbs of `tcp_xmit_size_goal` (64 KB less
//! headers, 45 full segments, or half the largest window the peer has offered if
//! that is less), and each transmission cuts at most one autosized piece off the
//! head skb. What is left of a head skb when it is smaller than a piece goes
//! without waiting once it fits (`skb != tail && limit >= skb->len`; one segment
//! takes the Nagle path, which sends full segments at once), so one release in
//! `45 / autosize` is a remainder. The queue is taken to be always full (a bulk
//! application), and an skb's size is fixed when it reaches the head rather than
//! when the application wrote it. Paced senders (BBR) keep their own per-skb
//! quantum and are not deferred.

use crate::cc::pacing::{linux_pacing_rate, GSO_MAX_SIZE, GSO_PAYLOAD_MAX, PACING_SHIFT};
use netunits::{SimDuration, SimTime};

/// Linux `sysctl_tcp_min_tso_segs`.
const MIN_TSO_SEGS: u64 = 2;
/// Linux `sysctl_tcp_tso_rtt_log`: below 2^(9+5) µs of min RTT skbs grow.
const TSO_RTT_LOG: u32 = 9;
/// Linux `sysctl_tcp_tso_win_divisor`: a third of the window is worth sending.
const TSO_WIN_DIVISOR: u64 = 3;
/// `tcp_tso_should_defer`: only defer when the last transmission was this recent.
const DEFER_RECENT: SimDuration = SimDuration::from_millis(1);

/// The sender's state the decision reads, in segments unless named otherwise.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SendState {
    pub now: SimTime,
    pub mss: u64,
    pub cwnd: u64,
    /// Slow-start threshold (`u64::MAX / mss` or more when unset).
    pub ssthresh: u64,
    /// Segments in flight (RFC 6675 pipe; Linux `tcp_packets_in_flight`).
    pub in_flight: u64,
    /// `snd_nxt − snd_una` (Linux `packets_out`).
    pub packets_out: u64,
    /// Room in the peer's window from `snd_nxt` (Linux `tcp_wnd_end − seq`).
    pub send_win: u64,
    /// The peer's whole window (Linux `snd_wnd`).
    pub snd_wnd: u64,
    /// Smoothed and minimum RTT; zero before the first sample.
    pub srtt: SimDuration,
    pub min_rtt: SimDuration,
    /// The last transmission of any segment (Linux `tcp_wstamp_ns`).
    pub last_tx: SimTime,
    /// When the oldest unacknowledged segment was (last) sent.
    pub head_sent: Option<SimTime>,
    /// In Recovery or Loss (Linux `icsk_ca_state >= TCP_CA_Recovery`).
    pub recovering: bool,
    /// Segments left in the skb at the head of the write queue.
    pub skb_left: u64,
}

/// What to do with the next skb of new data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Next {
    /// Send an skb of this many segments now.
    Send(u64),
    /// Wait for an ACK; the congestion window is what holds the skb back
    /// (Linux sets `is_cwnd_limited`).
    DeferCwnd,
    /// Wait for an ACK; the peer's window holds it back.
    DeferRwnd,
}

/// This sender's pacing rate as Linux keeps it ([`linux_pacing_rate`]), bytes per second.
pub(crate) fn pacing_rate(s: &SendState) -> Option<u64> {
    linux_pacing_rate(s.mss, s.cwnd, s.ssthresh, s.packets_out, s.srtt)
}

/// Linux `tcp_tso_segs` (`tcp_tso_autosize`): segments per skb.
pub(crate) fn autosize(s: &SendState) -> u64 {
    let mut bytes = match pacing_rate(s) {
        Some(rate) => rate >> PACING_SHIFT,
        None => GSO_MAX_SIZE,
    };
    // Linux 5.18+: paths under ~16 ms of min RTT get larger skbs.
    let r = s.min_rtt.as_micros() >> TSO_RTT_LOG;
    if s.min_rtt.as_nanos() > 0 && r < 32 {
        bytes += GSO_MAX_SIZE >> r;
    }
    (bytes.min(GSO_MAX_SIZE) / s.mss).max(MIN_TSO_SEGS)
}

/// Linux `tcp_xmit_size_goal`: segments `sendmsg` puts in one skb, given the
/// largest window the peer has offered (`max_window`, bytes).
pub(crate) fn size_goal(mss: u64, max_window: u64) -> u64 {
    // tcp_bound_to_half_wnd: at most half the largest window (all of it below 536 B).
    let cutoff = if max_window > 536 { max_window / 2 } else { max_window };
    let bytes = if cutoff > 0 { GSO_PAYLOAD_MAX.min(cutoff) } else { GSO_PAYLOAD_MAX };
    (bytes / mss).max(1)
}

/// Linux `tcp_write_xmit` for the next piece of new data: its size
/// (`tcp_cwnd_test`, `tcp_mss_split_point`), or deferral (`tcp_tso_should_defer`).
/// The caller has checked that cwnd and the peer's window both have room.
pub(crate) fn next_skb(s: &SendState) -> Next {
    debug_assert!(s.cwnd > s.in_flight && s.send_win > 0 && s.skb_left > 0);
    let max_segs = autosize(s);
    let cong_room = s.cwnd - s.in_flight;
    // tcp_cwnd_test: never more than half the window in one skb.
    let quota = (s.cwnd / 2).max(1).min(cong_room);
    let send = Next::Send(quota.min(max_segs).min(s.send_win).min(s.skb_left));
    // A one-segment skb takes the Nagle path: a full segment goes at once.
    if s.skb_left == 1 || s.recovering || s.now.saturating_since(s.last_tx) > DEFER_RECENT {
        return send;
    }
    let limit = cong_room.min(s.send_win);
    // A whole autosized piece fits, or the rest of the head skb does (it is not
    // the queue's tail, so waiting would not make it any larger).
    if limit >= max_segs || limit >= s.skb_left {
        return send;
    }
    // At least a third of the window may go: worth it.
    if limit * s.mss >= s.snd_wnd.min(s.cwnd).saturating_mul(s.mss) / TSO_WIN_DIVISOR {
        return send;
    }
    // The oldest outstanding segment's ACK is expected an sRTT after it left;
    // when that is more than min(sRTT/2, 1 ms) away, waiting costs too much.
    match s.head_sent {
        None => return send,
        Some(h) => {
            let soon = SimDuration::from_nanos(s.srtt.as_nanos() / 2).min(SimDuration::from_millis(1));
            if h + s.srtt > s.now + soon {
                return send;
            }
        }
    }
    if cong_room < s.send_win {
        Next::DeferCwnd
    } else {
        Next::DeferRwnd
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ca(cwnd: u64, in_flight: u64) -> SendState {
        SendState {
            now: SimTime::from_millis(10_000),
            mss: 1448,
            cwnd,
            ssthresh: cwnd,
            in_flight,
            packets_out: in_flight,
            send_win: 10_000,
            snd_wnd: 10_000,
            srtt: SimDuration::from_millis(150),
            min_rtt: SimDuration::from_millis(100),
            last_tx: SimTime::from_micros(10_000_000 - 250),
            head_sent: Some(SimTime::from_millis(9_850)),
            recovering: false,
            skb_left: 45,
        }
    }

    #[test]
    fn autosize_is_a_millisecond_of_the_pacing_rate() {
        // The vm trace's flows: cwnd 526, sRTT 150 ms. Rate = 1448 · 1.2 · 526 /
        // 0.15 = 6,093,184 B/s; >> 10 = 5,950 B = 4 segments.
        let s = ca(526, 524);
        assert_eq!(pacing_rate(&s), Some(6_093_184));
        assert_eq!(autosize(&s), 4);
        // Slow start (cwnd < ssthresh/2): 200 %. 1448 · 2 · 1000 / 0.12 =
        // 24,133,333 B/s >> 10 = 23,567 B = 16 segments.
        let mut ss = ca(1000, 990);
        ss.ssthresh = u64::MAX / 1448;
        ss.srtt = SimDuration::from_millis(120);
        assert_eq!(autosize(&ss), 16);
        // Small windows: at least two; no RTT sample yet: 64 KB = 45 segments.
        assert_eq!(autosize(&ca(10, 8)), 2);
        let mut none = ca(10, 8);
        none.srtt = SimDuration::ZERO;
        assert_eq!(autosize(&none), 45);
        // A 2-ms path: 64 KB >> (2000 >> 9 = 3) = 8 KB more: 11 segments, not 5.
        let mut lan = ca(10, 8);
        lan.srtt = SimDuration::from_millis(2);
        lan.min_rtt = SimDuration::from_millis(2);
        // 1448 · 1.2 · 10 / 0.002 = 8,688,000 B/s >> 10 = 8,484; + 8,192 = 16,676 B.
        assert_eq!(autosize(&lan), 11);
    }

    #[test]
    fn waits_until_a_whole_skb_fits() {
        // Two segments of room, four-segment skbs: wait (cwnd-limited).
        assert_eq!(next_skb(&ca(526, 524)), Next::DeferCwnd);
        // Four: send them; six: still one skb of four.
        assert_eq!(next_skb(&ca(526, 522)), Next::Send(4));
        assert_eq!(next_skb(&ca(526, 520)), Next::Send(4));
        // The peer's window is the tighter limit: wait, rwnd-limited.
        let mut r = ca(526, 524);
        r.send_win = 1;
        assert_eq!(next_skb(&r), Next::DeferRwnd);
    }

    #[test]
    fn the_rest_of_the_head_skb_goes_once_it_fits() {
        // 45-segment skbs cut into pieces of 4 leave one segment: it goes at once
        // (Nagle path), even with no room for a piece.
        let mut s = ca(526, 525);
        s.skb_left = 1;
        assert_eq!(next_skb(&s), Next::Send(1));
        // Three left, three free: sent; three left, two free: wait.
        s.skb_left = 3;
        s.in_flight = 523;
        assert_eq!(next_skb(&s), Next::Send(3));
        s.in_flight = 524;
        assert_eq!(next_skb(&s), Next::DeferCwnd);
        // A piece never crosses into the next skb: 6 free, 3 left in this one.
        s.in_flight = 520;
        assert_eq!(next_skb(&s), Next::Send(3));
    }

    #[test]
    fn sendmsg_fills_skbs_to_64_kb_or_half_the_largest_window() {
        // (65,536 − 1 − 320) / 1448 = 45.03; half of a 64 KB window: 32,768 / 1448 = 22.6.
        assert_eq!(size_goal(1448, 10_000_000), 45);
        assert_eq!(size_goal(1448, 65_535), 22);
        assert_eq!(size_goal(1448, 2_000), 1);
    }

    #[test]
    fn sends_at_once_when_waiting_looks_costly() {
        // In recovery.
        let mut s = ca(526, 524);
        s.recovering = true;
        assert_eq!(next_skb(&s), Next::Send(2));
        // Nothing sent for more than 1 ms.
        let mut s = ca(526, 524);
        s.last_tx = SimTime::from_micros(10_000_000 - 1_001);
        assert_eq!(next_skb(&s), Next::Send(2));
        // Linux: the head's ACK is due at head + sRTT; more than min(sRTT/2, 1 ms)
        // = 1 ms away, so send. The head left 148.9 ms ago (ACK due in 1.1 ms):
        // send; 149 ms ago (due in exactly 1 ms): wait.
        let mut s = ca(526, 524);
        s.head_sent = Some(SimTime::from_micros(10_000_000 - 148_900));
        assert_eq!(next_skb(&s), Next::Send(2));
        s.head_sent = Some(SimTime::from_millis(10_000 - 149));
        assert_eq!(next_skb(&s), Next::DeferCwnd);
        // A third of the window is free: cwnd 12, 4 free.
        let mut s = ca(12, 8);
        s.srtt = SimDuration::from_millis(1);
        s.min_rtt = SimDuration::from_millis(100);
        // 1448 · 1.2 · 12 / 0.001 = 20.9 MB/s >> 10 = 14 segments per skb; 4 free
        // ≥ 12/3: send the four (tcp_cwnd_test caps one skb at cwnd/2 = 6).
        assert_eq!(autosize(&s), 14);
        assert_eq!(next_skb(&s), Next::Send(4));
        s.in_flight = 9;
        s.head_sent = Some(s.now);
        // 3 free < 12/3, but the head has just left: its ACK is a round trip away.
        assert_eq!(next_skb(&s), Next::Send(3));
    }
}
