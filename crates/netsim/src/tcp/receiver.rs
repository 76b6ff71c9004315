//! TCP receiver: cumulative ACK, SACK blocks (RFC 2018), D-SACK (RFC 2883),
//! delayed ACKs (RFC 5681 §4.2, RFC 1122 §4.2.3.2) with Linux's quick-ACK mode and
//! adaptive delayed-ACK timeout, and the ECN echo (RFC 3168 §6.1.3).
//!
//! Delayed ACKs as Linux (`tcp_event_data_recv`, `__tcp_ack_snd_check`,
//! `tcp_send_delayed_ack`, `tcp_delack_timer_handler`):
//! - quick-ACK mode: the first data segment, an in-order arrival after a gap
//!   longer than the receiver's RTO, and a duplicate segment allow up to 16
//!   immediate ACKs (`TCP_MAX_QUICKACKS`, bounded by rwnd / 2 MSS); a CE mark
//!   (the first one until CWR) and a not-ECN-capable segment after ECN-capable ones
//!   (a retransmission) allow 2; each ACK of new data uses one;
//! - otherwise every second full segment is ACKed at once, a lone one after
//!   `ato`: `ato` starts at the configured minimum (40 ms, `TCP_ATO_MIN`), follows
//!   the inter-arrival time (halved plus the gap, or towards the minimum for gaps
//!   up to half of it), doubles when the timer fires, and is capped by the
//!   receiver's RTO; the timer itself is at most max(SRTT, ato_min) once ato
//!   exceeds the minimum (the receiver's SRTT being the handshake RTT, the path's
//!   base RTT here).
//!
//! SACK compression as Linux (`__tcp_ack_snd_check`, `tcp_compressed_ack_kick`,
//! `tcp_sack_new_ofo_skb`; on unless the flow turns it off): while out-of-order
//! data is queued, the first three ACKs at each cumulative point go at once (the
//! sender's fast retransmit needs them), later ones are held until a timer of
//! min(1 ms, RTT/20) fires or 44 are held; quick-ACK mode, a CWR, a D-SACK and a
//! filled hole send at once, and every ACK sent carries what was held. A segment
//! that opens a SACK block behind two others, or grows one that is not among the
//! first two, first sends the held ACK as it stands (Linux 6.1's
//! `TCP_SACK_BLOCKS_EXPECTED`): with losses spread thin, nearly every arrival
//! sends the ACK of the one before, and no block leaves the four-block cache
//! unreported.
//!
//! Sequence numbers are segment indices (byte = index × MSS); the application
//! reads in-order data immediately.
//!
//! The advertised window (Linux `tcp_select_window`), when the flow has an
//! `rwnd_bytes`: the receive buffer is twice that (`tcp_adv_win_scale = 1`
//! advertises half the free buffer, `tcp_win_from_space`), and out-of-order data
//! occupies it at its payload (Linux coalesces contiguous segments into one skb,
//! `tcp_ooo_try_coalesce`, so `truesize` is close to the payload: 1.06× measured
//! on the vm backend), so the window is `rwnd − ⌈out-of-order payload / 2⌉`; its
//! right edge never moves left (RFC 9293 §3.8.6; Linux keeps `cur_win` when the
//! new window would shrink it). In a recovery with a window's worth of data above
//! the holes, the edge stays where it was until the repaired data outweighs half
//! of what is still out of order: a sender at the edge sends no new data while
//! the holes are repaired, its pipe drains, and then it sends up to a whole
//! window at once (docs/tcp-model.md, "Receive window").
//!
//! When that window is the autotuning maximum (no `rwnd` set by the user: Linux's
//! `tcp_moderate_rcvbuf`), the buffer starts at `tcp_rmem[1]` and grows as Linux
//! 6.1's dynamic right-sizing grows it (`tcp_rcv_space_adjust`, see [`Autotune`]);
//! the window (`rcv_ssthresh`) can grow only into the room that buffer leaves.

use std::collections::VecDeque;

use netunits::{SimDuration, SimTime};

use crate::packet::{ts_ms, Pkt, TcpAck as Ack, ACK_COOKIE, ACK_ECE, ACK_SYN, MAX_SACK_BLOCKS, NO_WINDOW_LIMIT, PF_CE, PF_CWR};

/// Linux `TCP_MAX_QUICKACKS`.
const MAX_QUICKACKS: u8 = 16;
/// Linux `sysctl_tcp_comp_sack_nr`: at most this many ACKs held back in a row.
const COMP_SACK_NR: u16 = 44;
/// Linux `sysctl_tcp_comp_sack_delay_ns`: the longest a held ACK waits, ns.
const COMP_SACK_DELAY_NS: u64 = 1_000_000;
/// Linux `TCP_FASTRETRANS_THRESH`: immediate ACKs per cumulative point first.
const COMP_IMMEDIATE: u8 = 3;
/// Linux `TCP_NUM_SACKS`: the blocks a receiver remembers (`selective_acks`);
/// an ACK with timestamps has room for [`MAX_SACK_BLOCKS`] of them.
const SACK_CACHE: usize = 4;
/// Linux 6.1 `TCP_SACK_BLOCKS_EXPECTED`: a block that changes at this position of
/// the cache or below sends what SACK compression holds first.
const SACK_BLOCKS_EXPECTED: usize = 2;
/// Linux `TCP_DELACK_MAX`, 200 ms: no delayed ACK waits longer.
const MAX_ATO_NS: u64 = 200_000_000;
/// The window a Linux receiver advertises first with the default `tcp_rmem`
/// (131072 B buffer, half of it for data), bytes.
const LINUX_INITIAL_RWND: u64 = 65_535;

/// Linux's default `tcp_rmem[1]`: the receive buffer a connection starts with.
const RMEM_DEFAULT: u64 = 131_072;
/// Linux `MAX_TCP_HEADER` (x86-64, 6.1) plus the aligned `struct sk_buff` (256)
/// and `struct skb_shared_info` (320): what `SKB_TRUESIZE(advmss +
/// MAX_TCP_HEADER)` adds to a segment's payload.
const SKB_OVERHEAD: u64 = 320 + 256 + 320;

/// Linux 6.1's receive-buffer autotuning (`tcp_rcv_space_adjust`,
/// `tcp_init_buffer_space`, `tcp_rcv_rtt_measure_ts`), for a receiver whose
/// application reads every in-order byte at once.
///
/// Once per receiver RTT the bytes copied to the application over the last RTT
/// (`copied`) are compared with those of the period before (`space`); if more, the
/// buffer becomes `(2·copied + 16·advmss)` plus twice the growth `(copied −
/// space)/space` of that, in segments of `rcvmem` bytes each, up to `tcp_rmem[2]`,
/// and the window's ceiling (`window_clamp`) follows at half the buffer. The RTT is
/// the receiver's own, from timestamp echoes (an EWMA of ⅛, in whole
/// milliseconds as Linux's TS clock ticks). This is why the window a Linux sender
/// sees in slow start is 45, 45, 118, 278, 543, 1,038, … segments (vm backend,
/// 100 Mbit/s, 100 ms, seed 42: round 1's 10 segments do not exceed the first
/// period's 14,480 bytes, so nothing grows before round 3, and round 5's 160
/// segments give exactly 1,038), not 63, 103, 183, … as a window that grows from
/// the first segment does.
#[derive(Debug)]
struct Autotune {
    /// `tcp_rmem[2]`, bytes.
    rmem_max: u64,
    /// `sk_rcvbuf`, bytes.
    rcvbuf: u64,
    /// `window_clamp`, bytes.
    window_clamp: u64,
    /// `rcvq_space.space`: bytes copied in the last period that grew the buffer.
    space: u64,
    /// `rcvq_space.seq`: application bytes when the current period began.
    seq: u64,
    /// `rcvq_space.time`: when it began (`None` until the connection's first data,
    /// Linux's establishment with the handshake's last ACK).
    time: Option<SimTime>,
    /// `rcv_rtt_est.rtt_us` (µs, scaled by 8 as Linux keeps it); 0 = no sample.
    rtt8_us: u64,
    /// `rcv_rtt_last_tsecr`.
    last_tsecr: Option<u16>,
    /// `SKB_TRUESIZE(advmss + MAX_TCP_HEADER)`, raised in 128-byte steps until half
    /// of it holds a segment (`tcp_win_from_space` with `tcp_adv_win_scale = 1`).
    rcvmem: u64,
}

/// Linux `tcp_win_from_space` with `tcp_adv_win_scale = 1`: half the space holds data.
#[inline]
fn win_from_space(space: u64) -> u64 {
    space - space / 2
}

impl Autotune {
    /// `tcp_init_buffer_space` with Linux's defaults: a 131,072-byte buffer, so a
    /// window ceiling of 65,536 less one segment kept in reserve (`tcp_app_win`).
    fn new(mss: u64, rmem_max: u64) -> Self {
        let mut rcvmem = mss + SKB_OVERHEAD;
        while win_from_space(rcvmem) < mss {
            rcvmem += 128;
        }
        let rcvbuf = RMEM_DEFAULT.min(rmem_max);
        let window_clamp = win_from_space(rcvbuf).saturating_sub(mss).max(2 * mss);
        Autotune {
            rmem_max,
            rcvbuf,
            window_clamp,
            // min(rcv_ssthresh, rcv_wnd, TCP_INIT_CWND · advmss)
            space: (10 * mss).min(window_clamp),
            seq: 0,
            time: None,
            rtt8_us: 0,
            last_tsecr: None,
            rcvmem,
        }
    }

    /// `tcp_rcv_rtt_measure_ts` and `tcp_rcv_rtt_update` (timestamp mode): one
    /// sample per new echoed timestamp, from full-sized segments.
    fn measure_rtt(&mut self, now: SimTime, tsecr: u16, full_sized: bool) {
        if self.last_tsecr == Some(tsecr) {
            return;
        }
        self.last_tsecr = Some(tsecr);
        if !full_sized {
            return;
        }
        let sample_us = (ts_ms(now).wrapping_sub(tsecr) as u64).max(1) * 1000;
        self.rtt8_us = if self.rtt8_us == 0 {
            sample_us << 3
        } else {
            self.rtt8_us - (self.rtt8_us >> 3) + sample_us
        };
    }

    /// `tcp_rcv_space_adjust`, after the application read up to `app_bytes`.
    fn adjust(&mut self, now: SimTime, app_bytes: u64, mss: u64) {
        let Some(start) = self.time else { return };
        if self.rtt8_us == 0 || now.saturating_since(start).as_nanos() < (self.rtt8_us >> 3) * 1000 {
            return;
        }
        let copied = app_bytes - self.seq;
        if copied > self.space {
            let mut rcvwin = 2 * copied as u128 + 16 * mss as u128;
            // "Accommodate for sender rate increase (eg. slow start)".
            let grow = rcvwin * (copied - self.space) as u128 / self.space as u128;
            rcvwin += 2 * grow;
            let rcvbuf = ((rcvwin / mss as u128) * self.rcvmem as u128).min(self.rmem_max as u128) as u64;
            if rcvbuf > self.rcvbuf {
                self.rcvbuf = rcvbuf;
                self.window_clamp = win_from_space(rcvbuf);
            }
            self.space = copied;
        }
        self.seq = app_bytes;
        self.time = Some(now);
    }
}

/// One out-of-order range `[start, end)`.
#[derive(Clone, Copy, Debug)]
struct OooRange {
    start: u64,
    end: u64,
}

/// The receiving half of a TCP flow.
///
/// `repr(C)`, ordered by use: an in-order arrival reads only the first 128 bytes
/// (two cache lines when the flow is line-aligned, as the simulator keeps it);
/// the SACK cache and the last segment's length come after.
#[derive(Debug)]
#[repr(C)]
pub(crate) struct TcpReceiver {
    /// Next expected segment.
    rcv_nxt: u64,
    /// Delayed-ACK timer, `SimTime::MAX` when not running.
    pub(crate) delack_deadline: SimTime,
    /// In-order payload bytes handed to the application (goodput).
    pub(crate) app_bytes: u64,
    /// Out-of-order ranges above `rcv_nxt`, sorted, disjoint, non-adjacent.
    ooo: VecDeque<OooRange>,
    /// Full-sized segments received since the last ACK (at most 2: an ACK
    /// resets it).
    unacked: u16,
    /// Valid entries of `recent`.
    nrecent: u8,
    sack: bool,
    ecn: bool,
    delayed_ack: bool,
    /// RFC 3168 §6.1.3: set ECE on every ACK from a CE arrival until a CWR arrives.
    ece: bool,
    /// Immediate ACKs left in quick-ACK mode (Linux `icsk_ack.quick`).
    quick: u8,
    /// Not-ECT segments after ECT ones are retransmissions (Linux `TCP_ECN_SEEN`).
    ecn_seen: bool,
    /// A CWR arrived on this segment: ACK at once (Linux `tcp_ecn_accept_cwr`).
    ack_now: bool,
    /// RFC 7323 §4.3 TS.Recent (Linux `ts_recent`): the timestamp every ACK echoes;
    /// `None` before the first segment.
    ts_recent: Option<u16>,
    // second line
    mss: u64,
    /// Adaptive delayed-ACK timeout (Linux `icsk_ack.ato`), ns; 0 before data.
    ato: u64,
    /// Arrival time of the last in-order data segment (Linux `lrcvtime`).
    lrcv: SimTime,
    /// The receiver's RTO and SRTT, from the handshake RTT (base RTT).
    rto: u64,
    srtt: u64,
    /// Largest receive window, bytes (quick-ACK budget = rwnd / 2 MSS).
    rwnd: u64,
    total_segs: u64,
    delack_timeout: SimDuration,
    last_seg_len: u64,
    /// `rwnd_bytes` in segments: the window with an empty out-of-order queue
    /// (`None`: no limit).
    wnd_max: Option<u64>,
    /// Right edge of the advertised window (segment index; Linux `rcv_wup +
    /// rcv_wnd`), never moved left.
    wnd_end: u64,
    /// Segments held in `ooo`.
    ooo_segs: u64,
    /// The window's growth limit, segments (Linux `rcv_ssthresh`): 64 KB at
    /// first, two segments more per segment received, up to `wnd_max`.
    rcv_ssthresh: u64,
    /// Receive-buffer autotuning, when the window is the autotuning maximum.
    tune: Option<Autotune>,
    /// SACK compression on (Linux default since 4.19).
    sack_compress: bool,
    /// ACKs held back since the last one sent (Linux `compressed_ack`).
    compressed: u16,
    /// Immediate duplicate ACKs sent at `comp_cum` (Linux `dup_ack_counter`).
    dup_acks: u8,
    /// The cumulative point those were for (Linux `compressed_ack_rcv_nxt`).
    comp_cum: u64,
    /// When the held ACK goes (Linux `compressed_ack_timer`); MAX when none.
    comp_deadline: SimTime,
    /// Linux's SACK cache (`selective_acks`), newest first (RFC 2018 §4: the first
    /// block reports the newest arrival, the others the most recently reported
    /// blocks). Built from arriving segments as Linux builds it
    /// (`tcp_sack_new_ofo_skb`): a block forgotten when a fifth pushed it out is
    /// not reported again, even when a later segment joins its range.
    recent: [(u64, u64); SACK_CACHE],
}

impl TcpReceiver {
    /// `base_rtt` stands for the RTT the receiver measured on the handshake;
    /// `rwnd` for its advertised window (Linux's initial 64 KB when unset), which
    /// with `autotune` is the largest window autotuning reaches (a buffer of twice
    /// that, `tcp_rmem[2]`) rather than a fixed buffer's (`SO_RCVBUF`, which
    /// switches autotuning off in Linux).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        mss: u64,
        total_segs: u64,
        last_seg_len: u64,
        sack: bool,
        ecn: bool,
        delayed_ack: bool,
        delack_timeout: SimDuration,
        base_rtt: SimDuration,
        rwnd: Option<u64>,
        autotune: bool,
        sack_compress: bool,
    ) -> Self {
        let tune = match rwnd {
            Some(r) if autotune => Some(Autotune::new(mss, 2 * r)),
            _ => None,
        };
        let first_window = match &tune {
            Some(t) => t.window_clamp / mss,
            None => LINUX_INITIAL_RWND / mss,
        };
        let srtt = base_rtt.as_nanos();
        // RFC 6298 (2.2)–(2.4) after one sample R: SRTT = R, RTTVAR = R/2,
        // RTO = R + max(4·R/2, 200 ms) (Linux floors the variance term).
        let rto = srtt + (2 * srtt).max(crate::rtt::MIN_RTO.as_nanos());
        TcpReceiver {
            quick: 0,
            ecn_seen: false,
            ack_now: false,
            sack_compress,
            compressed: 0,
            dup_acks: 0,
            comp_cum: u64::MAX,
            comp_deadline: SimTime::MAX,
            ato: 0,
            lrcv: SimTime::ZERO,
            rto,
            srtt,
            rwnd: rwnd.unwrap_or(LINUX_INITIAL_RWND),
            wnd_max: rwnd.map(|r| (r / mss).max(1)),
            wnd_end: 0,
            ooo_segs: 0,
            rcv_ssthresh: rwnd.map_or(u64::MAX, |r| (r / mss).max(1).min(first_window)),
            tune,
            mss,
            total_segs,
            last_seg_len,
            sack,
            ecn,
            delayed_ack,
            delack_timeout,
            rcv_nxt: 0,
            ooo: VecDeque::new(),
            recent: [(0, 0); SACK_CACHE],
            nrecent: 0,
            unacked: 0,
            ts_recent: None,
            delack_deadline: SimTime::MAX,
            ece: false,
            app_bytes: 0,
        }
    }

    /// Payload bytes of segments `[a, b)`.
    #[inline]
    fn bytes_of(&self, a: u64, b: u64) -> u64 {
        if b == self.total_segs && b > a {
            (b - a - 1) * self.mss + self.last_seg_len
        } else {
            (b - a) * self.mss
        }
    }

    /// Linux `tcp_incr_quickack`: allow up to `max` immediate ACKs.
    #[inline]
    fn incr_quickack(&mut self, max: u8) {
        let by_window = (self.rwnd / (2 * self.mss)).max(2).min(max as u64) as u8;
        self.quick = self.quick.max(by_window);
    }

    /// Linux `tcp_enter_quickack_mode`.
    #[inline]
    fn enter_quickack(&mut self, max: u8) {
        self.incr_quickack(max);
        self.ato = self.ato_min();
    }

    #[inline]
    fn ato_min(&self) -> u64 {
        self.delack_timeout.as_nanos()
    }

    /// Linux `tcp_event_data_recv`: the delayed-ACK engine learns the arrival
    /// pattern from in-order data.
    #[inline]
    fn data_recv_timing(&mut self, now: SimTime) {
        let min = self.ato_min();
        if self.ato == 0 {
            self.incr_quickack(MAX_QUICKACKS);
            self.ato = min;
        } else {
            let m = now.saturating_since(self.lrcv).as_nanos();
            if m <= min / 2 {
                self.ato = self.ato / 2 + min / 2;
            } else if m < self.ato {
                self.ato = (self.ato / 2 + m).min(self.rto);
            } else if m > self.rto {
                // A long silence: the sender restarts from a small window.
                self.incr_quickack(MAX_QUICKACKS);
            }
        }
        self.lrcv = now;
    }

    /// A data segment arrived; returns the ACK to send now, if any.
    #[inline]
    pub fn on_data(&mut self, now: SimTime, pkt: &Pkt) -> Option<Ack> {
        // RFC 7323 §4.3 as Linux `tcp_replace_ts_recent`: a segment at or below the
        // left edge of the last ACK sent (`rcv_wup`, here `rcv_nxt` less the in-order
        // segments not yet ACKed) sets TS.Recent, if not older (PAWS). So a delayed
        // ACK echoes the first of its two segments, and the ACK of a retransmission
        // that fills a hole echoes the retransmission, not the segments above it.
        if pkt.seq + self.unacked as u64 <= self.rcv_nxt
            && self.ts_recent.is_none_or(|r| pkt.tsval.wrapping_sub(r) as i16 >= 0)
        {
            self.ts_recent = Some(pkt.tsval);
        }
        if let Some(t) = self.tune.as_mut() {
            // Established with the handshake's last ACK, which travels with the
            // first data; the buffer's first measuring period starts there.
            t.time.get_or_insert(now);
            t.measure_rtt(now, pkt.aux, pkt.len as u64 >= self.mss);
        }
        if self.ecn {
            // RFC 3168 §6.1.3: CWR ends the echo; a CE on the same packet restarts it.
            if pkt.flags & PF_CWR != 0 {
                self.ece = false;
                // The sender has just reduced, perhaps to one segment: ACK now.
                self.ack_now = true;
            }
            if pkt.flags & PF_CE != 0 {
                if !self.ece {
                    // Linux: do not delay ACKs while the sender may be at a tiny window.
                    self.enter_quickack(2);
                }
                self.ece = true;
                self.ecn_seen = true;
            } else if pkt.meta.ecn_capable {
                self.ecn_seen = true;
            } else if self.ecn_seen {
                // Not ECN-capable after ECN-capable segments: a retransmission.
                self.enter_quickack(2);
            }
        }
        let s = pkt.seq;
        if s == self.rcv_nxt {
            self.rcv_nxt += 1;
            let mut filled_gap = false;
            if let Some(first) = self.ooo.front() {
                if first.start == self.rcv_nxt {
                    let end = first.end;
                    self.ooo_segs -= end - first.start;
                    self.ooo.pop_front();
                    self.rcv_nxt = end;
                    filled_gap = true;
                }
            }
            if filled_gap {
                self.forget_recent_below(self.rcv_nxt);
            }
            let newly = self.bytes_of(s, self.rcv_nxt);
            self.app_bytes += newly;
            self.data_recv_timing(now);
            self.grow_window();
            let (app, mss) = (self.app_bytes, self.mss);
            if let Some(t) = self.tune.as_mut() {
                // The application reads at once (`tcp_recvmsg` → `tcp_rcv_space_adjust`).
                t.adjust(now, app, mss);
            }
            if filled_gap || !self.ooo.is_empty() {
                // RFC 5681 §4.2: ACK at once when a segment fills (part of) a gap.
                return Some(self.make_ack(now));
            }
            self.unacked += 1;
            // RFC 5681 §4.2 / RFC 1122 §4.2.3.2: ACK at least every second
            // full-sized segment; otherwise within the delayed-ACK timeout.
            // Quick-ACK mode and a CWR ACK every segment (Linux).
            if !self.delayed_ack || self.unacked >= 2 || self.quick > 0 || self.ack_now {
                return Some(self.make_ack_inline(now));
            }
            // Linux `tcp_send_delayed_ack`: past the minimum, the timeout is
            // bounded by the RTT (what one more RTT of waiting costs the sender).
            let mut ato = self.ato;
            if ato > self.ato_min() {
                ato = ato.min(self.srtt.max(self.ato_min())).min(MAX_ATO_NS);
            }
            self.delack_deadline = self.delack_deadline.min(now + SimDuration::from_nanos(ato));
            None
        } else if s > self.rcv_nxt {
            // The ranges are sorted, disjoint and never adjacent (`insert_ooo`), so
            // only the first one ending above `s` can hold it: a binary search, not
            // a scan of every range (after a 10 Gbit/s slow-start overshoot there
            // are thousands, and the scan was a third of the run).
            let i = self.ooo.partition_point(|r| r.end <= s);
            let dup = self.ooo.get(i).is_some_and(|r| r.start <= s);
            #[cfg(test)]
            assert_eq!(dup, self.ooo.iter().any(|r| r.start <= s && s < r.end), "out-of-order ranges out of order");
            // Linux 6.1 `tcp_sack_new_ofo_skb`: a segment that opens a block behind
            // two or more, or grows one that is not among the first two, first
            // sends the ACK that SACK compression holds, as it stands (before this
            // segment), so no block leaves the cache unreported.
            let flush = !dup
                && self.compressed > 0
                && self.quick == 0
                && !self.ack_now
                && self.sack_cache_slot(s).map_or(self.nrecent as usize >= SACK_BLOCKS_EXPECTED, |k| k >= SACK_BLOCKS_EXPECTED);
            let flushed = flush.then(|| self.make_ack(now));
            self.insert_ooo(s);
            // Linux adds duplicates to the cache too (`goto add_sack`).
            self.sack_cache_add(s);
            if !dup {
                self.ooo_segs += 1;
            }
            if self.sack {
                // Linux `tcp_data_queue_ofo` grows the window for SACK flows too.
                self.grow_window();
            }
            if let Some(ack) = flushed {
                // This segment's own ACK is then held (`__tcp_ack_snd_check`).
                let held = self.hold_sack(now, false);
                debug_assert!(held, "a flush happens only while ACKs are held");
                return Some(ack);
            }
            if self.hold_sack(now, dup) {
                return None;
            }
            // RFC 5681 §4.2: an out-of-order segment is ACKed immediately (dupack).
            let mut ack = self.make_ack(now);
            if dup && self.sack {
                // RFC 2883 §4 (2): a duplicate above the cumulative point is D-SACKed too.
                ack.set_dsack(s);
            }
            Some(ack)
        } else {
            // Old duplicate (spurious retransmission): ACK at once (RFC 5681 §4.2)
            // and report it in a D-SACK block (RFC 2883 §4 (1); Linux tcp_dsack_set);
            // the sender's window may be tiny after a timeout: quick-ACK mode.
            self.enter_quickack(MAX_QUICKACKS);
            let mut ack = self.make_ack(now);
            if self.sack {
                ack.set_dsack(s);
            }
            Some(ack)
        }
    }

    /// The receiver's next deadline: the delayed ACK's or a held SACK's.
    #[inline]
    pub(crate) fn wakeup(&self) -> SimTime {
        self.delack_deadline.min(self.comp_deadline)
    }

    /// Linux `__tcp_ack_snd_check` with out-of-order data queued: whether to hold
    /// this ACK back (SACK compression). Quick-ACK mode, a CWR and `now_anyway` (a
    /// D-SACK, a flush) send at once; so do the first three ACKs at each cumulative
    /// point; then up to 44 are held, until a timer of min(1 ms, RTT/20) sends one.
    fn hold_sack(&mut self, now: SimTime, now_anyway: bool) -> bool {
        if !(self.sack_compress && self.sack) || now_anyway || self.quick > 0 || self.ack_now {
            return false;
        }
        if self.compressed >= COMP_SACK_NR {
            return false;
        }
        if self.comp_cum != self.rcv_nxt {
            self.comp_cum = self.rcv_nxt;
            self.dup_acks = 0;
        }
        if self.dup_acks < COMP_IMMEDIATE {
            self.dup_acks += 1;
            return false;
        }
        self.compressed += 1;
        if self.comp_deadline == SimTime::MAX {
            // The smaller of the receiver's RTT estimate and its SRTT, /20.
            let rtt_ns = match &self.tune {
                Some(t) if t.rtt8_us > 0 => ((t.rtt8_us >> 3) * 1000).min(self.srtt),
                _ => self.srtt,
            };
            self.comp_deadline = now + SimDuration::from_nanos(COMP_SACK_DELAY_NS.min(rtt_ns / 20));
        }
        true
    }

    /// The delayed-ACK timer or the held SACK's, if due.
    pub fn on_timer(&mut self, now: SimTime) -> Option<Ack> {
        if now >= self.comp_deadline {
            self.comp_deadline = SimTime::MAX;
            if self.compressed > 0 {
                return Some(self.make_ack(now));
            }
        }
        if now >= self.delack_deadline {
            // Linux `tcp_delack_timer_handler`: the timer fired, so the sender was
            // waiting on us; wait less eagerly next time (ato doubles, up to RTO).
            self.ato = (self.ato * 2).min(self.rto).max(self.ato_min());
            return Some(self.make_ack(now));
        }
        None
    }

    /// Records out-of-order segment `s` in the sorted, disjoint, never adjacent
    /// ranges (a duplicate changes nothing).
    fn insert_ooo(&mut self, s: u64) {
        let i = self.ooo.partition_point(|r| r.end < s);
        if i < self.ooo.len() {
            let r = self.ooo[i];
            if r.start <= s && s < r.end {
                return; // duplicate of an out-of-order segment
            }
            if r.end == s {
                let mut end = s + 1;
                if i + 1 < self.ooo.len() && self.ooo[i + 1].start == s + 1 {
                    end = self.ooo[i + 1].end;
                    self.ooo.remove(i + 1);
                }
                self.ooo[i].end = end;
                return;
            }
            if r.start == s + 1 {
                self.ooo[i].start = s;
                return;
            }
        }
        self.ooo.insert(i, OooRange { start: s, end: s + 1 });
    }

    /// The position of the cached SACK block segment `s` joins (Linux
    /// `tcp_sack_extend`: overlaps or touches), if any.
    fn sack_cache_slot(&self, s: u64) -> Option<usize> {
        self.recent[..self.nrecent as usize].iter().position(|&(x, y)| x <= s + 1 && s <= y)
    }

    /// Linux 6.1 `tcp_sack_new_ofo_skb` for segment `s`: the block it joins grows
    /// and moves to the front, and takes in any other block it now reaches
    /// (`tcp_sack_maybe_coalesce`); otherwise a new block goes in front and,
    /// when the cache is full, the oldest is forgotten.
    fn sack_cache_add(&mut self, s: u64) {
        let n = self.nrecent as usize;
        if let Some(k) = self.sack_cache_slot(s) {
            let (x, y) = self.recent[k];
            self.recent.copy_within(0..k, 1);
            self.recent[0] = (x.min(s), y.max(s + 1));
            let mut kept = 1;
            for j in 1..n {
                let (x, y) = self.recent[j];
                let (a, b) = self.recent[0];
                if x <= b && a <= y {
                    self.recent[0] = (a.min(x), b.max(y));
                } else {
                    self.recent[kept] = (x, y);
                    kept += 1;
                }
            }
            self.nrecent = kept as u8;
        } else {
            let keep = n.min(SACK_CACHE - 1);
            self.recent.copy_within(0..keep, 1);
            self.recent[0] = (s, s + 1);
            self.nrecent = (keep + 1) as u8;
        }
    }

    /// Linux `tcp_grow_window`: while the window is below its limit, each
    /// full-sized segment raises `rcv_ssthresh` by two segments (a 1448-byte
    /// segment's skb fits in the buffer space it is advertised with, so `incr =
    /// 2·advmss`) and asks for an immediate ACK (`icsk_ack.quick |= 1`): a
    /// receiver ACKs every segment while its window grows, and the window grows
    /// threefold per round trip from its first 64 KB.
    fn grow_window(&mut self) {
        if let Some(t) = &self.tune {
            // Linux 6.1: room = min(window_clamp, tcp_space) − rcv_ssthresh, the free
            // space being half the buffer less what out-of-order data holds.
            let clamp = t.window_clamp / self.mss;
            let space = (win_from_space(t.rcvbuf) / self.mss).saturating_sub(self.ooo_segs.div_ceil(2));
            let room = clamp.min(space).saturating_sub(self.rcv_ssthresh);
            if room > 0 {
                self.rcv_ssthresh += room.min(2);
                self.quick |= 1;
            }
            return;
        }
        if let Some(max) = self.wnd_max {
            if self.rcv_ssthresh < max {
                self.rcv_ssthresh = (self.rcv_ssthresh + 2).min(max);
                self.quick |= 1;
            }
        }
    }

    /// The window to advertise now, in segments from `rcv_nxt` (see the module
    /// notes; Linux `tcp_select_window`).
    fn window(&mut self) -> u32 {
        let Some(mut max) = self.wnd_max else { return NO_WINDOW_LIMIT };
        if let Some(t) = &self.tune {
            max = max.min(win_from_space(t.rcvbuf) / self.mss);
        }
        let free = max.saturating_sub(self.ooo_segs.div_ceil(2)).min(self.rcv_ssthresh);
        self.wnd_end = self.wnd_end.max(self.rcv_nxt + free);
        (self.wnd_end - self.rcv_nxt).min(NO_WINDOW_LIMIT as u64 - 1) as u32
    }

    /// The SYN-ACK answering a SYN: the first window (Linux's 64 KB, or the
    /// flow's `rwnd` if smaller).
    pub fn syn_ack(&mut self, now: SimTime) -> Ack {
        Ack { flags: ACK_SYN, tsval: ts_ms(now), wnd: self.window(), ..Ack::default() }
    }

    /// The immediate ACK of the application's greeting (iperf3's cookie): Linux's
    /// receiver is still in quick-ACK mode this early in the connection
    /// (`tcp_incr_quickack` at establishment), so it answers at once, echoing the
    /// greeting's timestamp. The greeting is not data the flow delivers.
    pub fn cookie_ack(&mut self, now: SimTime, pkt: &Pkt) -> Ack {
        Ack { flags: ACK_COOKIE, tsval: ts_ms(now), tsecr: pkt.tsval, wnd: self.window(), ..Ack::default() }
    }

    fn forget_recent_below(&mut self, cum: u64) {
        let mut n = 0;
        for k in 0..self.nrecent as usize {
            if self.recent[k].1 > cum {
                self.recent[n] = self.recent[k];
                n += 1;
            }
        }
        self.nrecent = n as u8;
    }

    fn make_ack(&mut self, now: SimTime) -> Ack {
        self.make_ack_inline(now)
    }

    /// [`Self::make_ack`], inlined where the receiver acknowledges every second
    /// segment in order (half of all data packets).
    #[inline(always)]
    fn make_ack_inline(&mut self, now: SimTime) -> Ack {
        self.unacked = 0;
        self.delack_deadline = SimTime::MAX;
        // Any ACK sent carries what was held (Linux `tcp_event_ack_sent`).
        self.compressed = 0;
        self.comp_deadline = SimTime::MAX;
        self.ack_now = false;
        // Linux `tcp_dec_quickack_mode`: one quick ACK used; leaving the mode
        // resets ato to its minimum.
        if self.quick > 0 {
            self.quick -= 1;
            if self.quick == 0 {
                self.ato = self.ato_min();
            }
        }
        let flags = if self.ece { ACK_ECE } else { 0 };
        let tsecr = self.ts_recent.unwrap_or(0);
        let mut ack = Ack { cum: self.rcv_nxt, flags, tsval: ts_ms(now), tsecr, wnd: self.window(), ..Ack::default() };
        if self.sack && !self.ooo.is_empty() {
            // RFC 2018 §4: the first block holds the newest arrival (`sack_cache_add`
            // put it first); the others repeat the most recently reported blocks.
            let n = (self.nrecent as usize).min(MAX_SACK_BLOCKS);
            ack.blocks[..n].copy_from_slice(&self.recent[..n]);
            ack.nblocks = n as u8;
        }
        ack
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aqm::PacketMeta;

    fn seg(seq: u64) -> Pkt {
        Pkt { meta: PacketMeta::default(), seq, len: 1000, flags: 0, aux: 0, tsval: 0 }
    }
    fn rx(delayed: bool) -> TcpReceiver {
        rx_rtt(delayed, 25)
    }
    fn rx_rtt(delayed: bool, rtt_ms: u64) -> TcpReceiver {
        TcpReceiver::new(1000, u64::MAX, 1000, true, true, delayed, SimDuration::from_millis(40), SimDuration::from_millis(rtt_ms), None, false, false)
    }

    /// Feed in-order segments `from..to` at `t`; returns how many were ACKed at once.
    fn feed(r: &mut TcpReceiver, from: u64, to: u64, t: SimTime) -> usize {
        (from..to).filter(|&k| r.on_data(t, &seg(k)).is_some()).count()
    }

    /// A slow start as the receiver sees it: round `r` (every 100 ms) brings
    /// 10·2^r full segments 0.12 ms apart, each echoing the timestamp of the ACK
    /// that released it, one RTT earlier. Returns the largest window (segments)
    /// advertised in each round.
    fn slow_start_windows(r: &mut TcpReceiver, rounds: u32) -> Vec<u32> {
        let (t0, rtt, gap) = (1_000_000_000u64, 100_000_000u64, 120_000u64);
        let mut seq = 0;
        let mut out = vec![];
        for round in 0..rounds as u64 {
            let mut largest = 0;
            for k in 0..(10u64 << round) {
                let t = SimTime::from_nanos(t0 + round * rtt + k * gap);
                let echo = SimTime::from_nanos(t0 + round * rtt + k * gap - rtt);
                let p = Pkt { meta: PacketMeta::default(), seq, len: 1448, flags: 0, aux: ts_ms(echo), tsval: 0 };
                seq += 1;
                if let Some(a) = r.on_data(t, &p) {
                    largest = largest.max(a.wnd);
                }
            }
            out.push(largest);
        }
        out
    }

    fn stamped(seq: u64, tsval: u16) -> Pkt {
        Pkt { tsval, ..seg(seq) }
    }

    #[test]
    fn every_ack_echoes_the_first_segment_since_the_last_ack() {
        // RFC 7323 §4.3 / Linux tcp_replace_ts_recent: TS.Recent is set by a
        // segment at or below the last ACK's edge (rcv_wup). Quick ACKs first
        // (each segment ACKed), then pairs: the ACK sent on the second segment
        // of a pair echoes the first one's TSval, not its own.
        let mut r = rx(true);
        let mut last_acked: Option<u64> = None;
        let mut pairs = 0;
        for k in 0..200u64 {
            let t = SimTime::from_micros(1_000 * k);
            if let Some(a) = r.on_data(t, &stamped(k, 1000 + k as u16)) {
                let first = last_acked.map_or(0, |j| j + 1);
                assert_eq!(a.tsecr, 1000 + first as u16, "ACK on segment {k}");
                pairs += (k > first) as u32;
                last_acked = Some(k);
            }
        }
        assert!(pairs > 50, "{pairs} delayed ACKs");
    }

    #[test]
    fn out_of_order_segments_do_not_set_the_echo_and_the_repair_does() {
        // 0..3 arrive (quick ACKs, the last echoing 2's TSval 12); 3 is lost; 4
        // and 5 arrive out of order and are ACKed at once, still echoing 12;
        // the retransmission of 3, stamped 90, fills the hole and its ACK echoes 90.
        let mut r = rx(true);
        let t = SimTime::from_millis(1);
        for k in 0..3u64 {
            r.on_data(t, &stamped(k, 10 + k as u16));
        }
        let a = r.on_data(t, &stamped(4, 14)).expect("out of order: ACK at once");
        assert_eq!((a.cum, a.tsecr), (3, 12));
        let a = r.on_data(t, &stamped(5, 15)).expect("out of order: ACK at once");
        assert_eq!((a.cum, a.tsecr), (3, 12));
        let a = r.on_data(SimTime::from_millis(90), &stamped(3, 90)).expect("fills the hole: ACK at once");
        assert_eq!((a.cum, a.tsecr), (6, 90));
        // An older TSval never replaces a newer one (PAWS), even at the edge.
        let a = r.on_data(SimTime::from_millis(91), &stamped(2, 40)).expect("an old duplicate is ACKed at once");
        assert_eq!(a.tsecr, 90);
    }

    #[test]
    fn sacks_are_compressed_after_three_per_cumulative_point_as_linux_does() {
        // By hand from Linux 6.1 `__tcp_ack_snd_check`: RTT 25 ms, so a held ACK
        // waits min(1 ms, 25 ms / 20) = 1 ms. Segment 40 is lost; 41.. arrive 0.12 ms
        // apart. The first three out-of-order arrivals are ACKed at once (the
        // sender's fast retransmit needs them); the next ones are held and one ACK
        // leaves when the timer fires, carrying the newest block; then three more
        // at once only if the cumulative point moves.
        let mut r = TcpReceiver::new(1000, u64::MAX, 1000, true, false, true, SimDuration::from_millis(40),
                                     SimDuration::from_millis(25), None, false, true);
        let t0 = SimTime::from_millis(1000);
        feed(&mut r, 0, 40, t0); // leaves quick-ACK mode (16 quick ACKs at the start)
        assert_eq!(r.quick, 0);
        let at = |k: u64| t0 + SimDuration::from_micros(120 * k);
        let sent: Vec<bool> = (41..52).map(|k| r.on_data(at(k), &seg(k)).is_some()).collect();
        assert_eq!(sent, [true, true, true, false, false, false, false, false, false, false, false]);
        assert_eq!(r.wakeup(), at(44) + SimDuration::from_millis(1));
        assert_eq!(r.on_timer(at(44) + SimDuration::from_micros(999)), None);
        let held = r.on_timer(at(44) + SimDuration::from_millis(1)).expect("the held ACK leaves");
        assert_eq!((held.cum, held.nblocks, held.blocks[0]), (40, 1, (41, 52)));
        assert_eq!(r.wakeup(), SimTime::MAX);
        // Still at cumulative point 40: the next arrival is held again.
        assert!(r.on_data(at(52), &seg(52)).is_none());
        // The retransmission fills the hole: ACKed at once (RFC 5681 §4.2), and
        // it carries the held one.
        let a = r.on_data(at(53), &seg(40)).expect("a filled hole is ACKed at once");
        assert_eq!((a.cum, a.nblocks), (53, 0));
        assert_eq!(r.wakeup(), SimTime::MAX);
        // Off, every out-of-order arrival is ACKed.
        let mut off = rx_rtt(true, 25);
        feed(&mut off, 0, 40, t0);
        assert!((41..52).all(|k| off.on_data(at(k), &seg(k)).is_some()));
    }

    #[test]
    fn forty_four_held_acks_send_one_and_a_full_sack_cache_flushes() {
        let mut r = TcpReceiver::new(1000, u64::MAX, 1000, true, false, true, SimDuration::from_millis(40),
                                     SimDuration::from_secs(1), None, false, true);
        let t0 = SimTime::from_millis(1000);
        feed(&mut r, 0, 40, t0);
        // RTT 1 s: the timer is 1 ms; arrivals 1 µs apart, so 44 are held within it.
        let at = |k: u64| t0 + SimDuration::from_micros(k);
        let sent: Vec<u64> = (41..41 + 3 + 44 + 1).filter(|&k| r.on_data(at(k), &seg(k)).is_some()).collect();
        assert_eq!(sent, vec![41, 42, 43, 41 + 3 + 44]);
        // By hand from Linux 6.1 `tcp_sack_new_ofo_skb`: a segment that opens a
        // block behind two others (or grows one behind them) while ACKs are held
        // first sends the held ACK as it stands, and its own is held.
        let mut r = TcpReceiver::new(1000, u64::MAX, 1000, true, false, true, SimDuration::from_millis(40),
                                     SimDuration::from_secs(1), None, false, true);
        feed(&mut r, 0, 40, t0);
        let mut sent = vec![];
        for k in [41u64, 43, 45, 46, 47, 48, 49, 51] {
            if let Some(a) = r.on_data(at(k), &seg(k)) {
                sent.push((k, a.nblocks, a.blocks[0]));
            }
        }
        // 41, 43, 45 at once (three per point); 46–49 grow the first block and are
        // held; 51 opens a fourth: the held ACK leaves without it.
        assert_eq!(sent, vec![(41, 1, (41, 42)), (43, 2, (43, 44)), (45, 3, (45, 46)), (51, 3, (45, 50))]);
        // 53 opens a fifth: the held ACK (51 first) leaves, and the cache of four
        // forgets (41, 42), which three ACKs reported.
        let a = r.on_data(at(53), &seg(53)).expect("a fifth block flushes");
        assert_eq!(a.blocks, [(51, 52), (45, 50), (43, 44)]);
        // 42 joins (43, 44), fourth in the cache: a flush, then it moves to the
        // front as (42, 44) — Linux no longer knows 41 is there.
        let a = r.on_data(at(54), &seg(42)).expect("a block behind two grows: flush");
        assert_eq!(a.blocks, [(53, 54), (51, 52), (45, 50)]);
        let held = r.on_timer(at(54) + SimDuration::from_millis(1)).expect("the held ACK leaves on its timer");
        assert_eq!((held.cum, held.blocks), (40, [(42, 44), (53, 54), (51, 52)]));
    }

    #[test]
    fn an_autotuned_buffer_grows_as_linux_right_sizes_it() {
        // 2,500,000 B: the autotuning maximum of a 100 Mbit/s, 100 ms path with a
        // 1-BDP buffer (tcp_rmem[2] = 5,000,000). By hand (Linux 6.1
        // tcp_rcv_space_adjust; rcvmem = 1448 + 896 raised to 2,984 so that half
        // holds a segment): the buffer starts at 131,072 B, window clamp 65,536 −
        // 1,448 = 64,088 B = 44 segments, and nothing grows in round 0 (no room).
        // Each round's first segment ends a measuring period of one RTT; with
        // copied = 160 segments (round 4) against 80 before, rcvwin = 2·231,680 +
        // 16·1,448 = 486,528, plus twice 486,528·(231,680 − 115,840)/115,840 =
        // 1,459,584 B = 1,008 segments of 2,984 B: a 3,007,872-B buffer and a
        // 1,503,936-B clamp, 1,038 segments — the window the kernel's trace shows
        // in that round (vm backend, docs/tcp-model.md). Round 6's period (320
        // against 160) asks for 5,872,512 B, capped at tcp_rmem[2]: the whole
        // 1,726-segment window.
        let mut r = TcpReceiver::new(1448, u64::MAX, 1448, true, false, true, SimDuration::from_millis(40), SimDuration::from_millis(100), Some(2_500_000), true, false);
        let w = slow_start_windows(&mut r, 7);
        assert_eq!(w[0], 44, "no room to grow before the buffer does: {w:?}");
        assert_eq!(w[5], 1038, "{w:?}");
        assert_eq!(w[6], 1726, "{w:?}");
        assert!(w.windows(2).all(|p| p[0] <= p[1]), "{w:?}");
        // A fixed buffer of the same size (SO_RCVBUF: no autotuning) has room from
        // the first segment: two segments more per segment from Linux's first 64 KB
        // (45 segments), 45 + 2·(10 + 20 + … + 320) = 1,305 by round 5.
        let mut fixed = TcpReceiver::new(1448, u64::MAX, 1448, true, false, true, SimDuration::from_millis(40), SimDuration::from_millis(100), Some(2_500_000), false, false);
        let w = slow_start_windows(&mut fixed, 7);
        assert_eq!((w[0], w[5], w[6]), (45 + 20, 1305, 1726), "{w:?}");
    }

    #[test]
    fn the_receivers_rtt_comes_from_timestamp_echoes_in_whole_milliseconds() {
        let mut t = Autotune::new(1448, 5_000_000);
        let at = |ms: u64| SimTime::from_nanos(ms * 1_000_000 + 300_000);
        t.measure_rtt(at(1100), ts_ms(at(1000)), true);
        assert_eq!(t.rtt8_us, 8 * 100_000, "first sample taken whole");
        t.measure_rtt(at(1101), ts_ms(at(1000)), true);
        assert_eq!(t.rtt8_us, 8 * 100_000, "one sample per echoed timestamp");
        t.measure_rtt(at(1160), ts_ms(at(1001)), false);
        assert_eq!(t.rtt8_us, 8 * 100_000, "short segments are not timed");
        t.measure_rtt(at(1170), ts_ms(at(1010)), true);
        // EWMA of 1/8: 100 ms + (160 − 100)/8 = 107.5 ms.
        assert_eq!(t.rtt8_us, 8 * 107_500);
        // The 16-bit clock wraps every 65.536 s; differences do not care.
        let mut w = Autotune::new(1448, 5_000_000);
        w.measure_rtt(at(65_600), ts_ms(at(65_500)), true);
        assert_eq!(w.rtt8_us, 8 * 100_000);
    }

    #[test]
    fn out_of_order_data_holds_the_window_edge_until_the_holes_drain() {
        // rwnd 10 segments. In order 0..5: edge 5 + 10 = 15. Holes at 5 and 10;
        // 6..10 and 11..15 arrive: 8 segments out of order, window 10 − 8/2 = 6
        // from rcv_nxt 5 would end at 11, left of 15, so the edge stays at 15.
        let mut r = TcpReceiver::new(1000, u64::MAX, 1000, true, false, false, SimDuration::from_millis(40), SimDuration::from_millis(100), Some(10_000), false, false);
        let t = SimTime::from_millis(1);
        let mut last = None;
        for k in 0..5 {
            last = r.on_data(t, &seg(k));
        }
        let a = last.unwrap();
        assert_eq!((a.cum, a.wnd), (5, 10));
        for k in (6..10).chain(11..15) {
            last = r.on_data(t, &seg(k));
        }
        let a = last.unwrap();
        assert_eq!((a.cum, a.cum + a.wnd as u64), (5, 15));
        // Segment 5 fills the first hole: rcv_nxt 10, 4 segments still out of
        // order (half of them count), 10 + 10 − 2 = 18 > 15: the edge moves to 18.
        let a = r.on_data(t, &seg(5)).unwrap();
        assert_eq!((a.cum, a.wnd), (10, 8));
        // Segment 10 fills the last: rcv_nxt 15, nothing out of order: 15 + 10.
        let a = r.on_data(t, &seg(10)).unwrap();
        assert_eq!((a.cum, a.wnd), (15, 10));
        // Without an rwnd there is no limit.
        let mut free = rx(false);
        assert_eq!(free.on_data(t, &seg(0)).unwrap().wnd, NO_WINDOW_LIMIT);
    }

    #[test]
    fn the_window_grows_two_segments_per_segment_and_each_is_acked_at_once() {
        // rwnd 100 segments of 1000 B; Linux starts at 64 KB: ⌊65535/1000⌋ = 65.
        // Each in-order segment adds 2 up to 100 and is ACKed at once: after
        // segment k the window is min(65 + 2(k + 1), 100) from k + 1. The first
        // segment's quick-ACK budget is 16; `quick |= 1` makes it 17 on every
        // growing segment and its ACK takes it back to 16, so when segment 17 has
        // brought the window to 100, 16 quick ACKs remain (segments 18..33); then
        // every second segment.
        let mut r = TcpReceiver::new(1000, u64::MAX, 1000, true, false, true, SimDuration::from_millis(40), SimDuration::from_millis(100), Some(100_000), false, false);
        assert_eq!(r.syn_ack(SimTime::ZERO).wnd, 65);
        let t = SimTime::from_millis(1);
        for k in 0..18u64 {
            let a = r.on_data(t, &seg(k)).expect("ACKed at once while the window grows");
            assert_eq!((a.cum, a.wnd as u64), (k + 1, (65 + 2 * (k + 1)).min(100)));
        }
        assert_eq!(feed(&mut r, 18, 34, t), 16);
        assert!(r.on_data(t, &seg(34)).is_none());
        let a = r.on_data(t, &seg(35)).unwrap();
        assert_eq!((a.cum, a.wnd), (36, 100));
    }

    #[test]
    fn quick_ack_mode_acks_the_first_16_segments_then_every_second() {
        // Linux: the first data segment enters quick-ACK mode with
        // min(rwnd / (2·MSS), 16) = min(65535 / 2000, 16) = 16 immediate ACKs.
        let mut r = rx(true);
        let t = SimTime::from_millis(1);
        assert_eq!(feed(&mut r, 0, 16, t), 16);
        // Then RFC 5681 §4.2's every second segment, a lone one on the timer.
        assert!(r.on_data(t, &seg(16)).is_none());
        assert_eq!(r.delack_deadline, SimTime::from_millis(41));
        assert_eq!(r.on_data(t, &seg(17)).unwrap().cum, 18);
        assert!(r.on_data(t, &seg(18)).is_none());
        assert!(r.on_timer(SimTime::from_millis(40)).is_none());
        assert_eq!(r.on_timer(SimTime::from_millis(41)).unwrap().cum, 19);
        assert_eq!(r.app_bytes, 19_000);
    }

    #[test]
    fn the_delayed_ack_timeout_adapts_and_is_bounded_by_the_rtt() {
        // Base RTT 100 ms: receiver RTO = 100 + max(2·100, 200) = 300 ms. After
        // quick-ACK mode, lone segments 150 ms apart (m > ato, < RTO: ato kept).
        // Each timer expiry doubles ato (40 → 80 → 160 → 300 cap) and the timer
        // itself is min(ato, max(SRTT, 40 ms)) once ato > 40 ms: 40, 80, 100, 100.
        let mut r = rx_rtt(true, 100);
        let mut t = SimTime::from_millis(1);
        feed(&mut r, 0, 16, t);
        let mut waits = Vec::new();
        for k in 16..20 {
            t = t + SimDuration::from_millis(150);
            assert!(r.on_data(t, &seg(k)).is_none());
            waits.push(r.delack_deadline.saturating_since(t).as_nanos() / 1_000_000);
            assert_eq!(r.on_timer(r.delack_deadline).unwrap().cum, k + 1);
        }
        assert_eq!(waits, [40, 80, 100, 100]);
        // Back-to-back arrivals (gap ≤ ato_min/2) pull ato back towards 40 ms:
        // ato = ato/2 + 20 ms.
        let before = r.ato;
        feed(&mut r, 20, 21, t + SimDuration::from_millis(1));
        assert_eq!(r.ato, before / 2 + 20_000_000);
    }

    #[test]
    fn ce_and_duplicates_re_enter_quick_ack_mode() {
        let mut r = rx(true);
        let t = SimTime::from_millis(1);
        let ect = |k: u64| {
            let mut p = seg(k);
            p.meta.ecn_capable = true;
            p
        };
        let feed_ect = |r: &mut TcpReceiver, from: u64, to: u64| (from..to).filter(|&k| r.on_data(t, &ect(k)).is_some()).count();
        assert_eq!(feed_ect(&mut r, 0, 16), 16);
        assert_eq!(feed_ect(&mut r, 16, 18), 1, "quick-ACK mode over: every second segment");
        // A CE mark (the first one until CWR): two quick ACKs (Linux
        // `tcp_enter_quickack_mode(sk, 2)`), then every second segment again.
        let mut ce = ect(18);
        ce.flags = PF_CE;
        assert!(r.on_data(t, &ce).unwrap().ece());
        assert!(r.on_data(t, &ect(19)).is_some());
        assert_eq!(feed_ect(&mut r, 20, 22), 1);
        // A not-ECN-capable segment after ECN-capable ones is a retransmission:
        // two quick ACKs as well.
        assert!(r.on_data(t, &seg(22)).is_some());
        assert!(r.on_data(t, &ect(23)).is_some());
        assert_eq!(feed_ect(&mut r, 24, 26), 1);
        // A duplicate (a spurious retransmission) is D-SACKed and gives 16
        // (one spent on the duplicate's own ACK).
        let a = r.on_data(t, &ect(3)).unwrap();
        assert_eq!((a.cum, a.dsack()), (26, Some(3)));
        assert_eq!(feed_ect(&mut r, 26, 41), 15);
        assert_eq!(feed_ect(&mut r, 41, 43), 1);
    }

    #[test]
    fn out_of_order_is_acked_at_once_with_sack_blocks_most_recent_first() {
        let mut r = rx(true);
        let t = SimTime::ZERO;
        r.on_data(t, &seg(0));
        let a = r.on_data(t, &seg(2)).unwrap();
        assert_eq!((a.cum, a.nblocks, a.blocks[0]), (1, 1, (2, 3)));
        let a = r.on_data(t, &seg(5)).unwrap();
        assert_eq!((a.nblocks, a.blocks[0], a.blocks[1]), (2, (5, 6), (2, 3)));
        let a = r.on_data(t, &seg(3)).unwrap();
        assert_eq!((a.nblocks, a.blocks[0], a.blocks[1]), (2, (2, 4), (5, 6)));
        // filling the hole at 1 acks immediately and jumps over [2,4)
        let a = r.on_data(t, &seg(1)).unwrap();
        assert_eq!((a.cum, a.nblocks, a.blocks[0]), (4, 1, (5, 6)));
        assert_eq!(r.app_bytes, 4000);
    }

    #[test]
    fn ece_is_echoed_until_cwr() {
        let mut r = rx(false);
        let mut p = seg(0);
        p.flags = PF_CE;
        assert!(r.on_data(SimTime::ZERO, &p).unwrap().ece());
        assert!(r.on_data(SimTime::ZERO, &seg(1)).unwrap().ece());
        let mut p = seg(2);
        p.flags = PF_CWR;
        assert!(!r.on_data(SimTime::ZERO, &p).unwrap().ece());
    }
}
