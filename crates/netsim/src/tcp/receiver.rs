//! TCP receiver: cumulative ACK, SACK blocks (RFC 2018), delayed ACKs
//! (RFC 5681 §4.2, RFC 1122 §4.2.3.2) and the ECN echo (RFC 3168 §6.1.3).
//!
//! Sequence numbers are segment indices (byte = index × MSS); the application
//! reads in-order data immediately, so the advertised window never shrinks and is
//! applied at the sender as a constant `rwnd_bytes` cap.

use std::collections::VecDeque;

use netunits::{SimDuration, SimTime};

use crate::packet::{Ack, Pkt, MAX_SACK_BLOCKS, PF_CE, PF_CWR};

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
    // second line
    mss: u64,
    total_segs: u64,
    delack_timeout: SimDuration,
    last_seg_len: u64,
    /// The ranges most recently grown, newest first (RFC 2018 §4: the first SACK
    /// block reports the newest arrival, the others the most recently reported
    /// blocks). Kept like Linux's `selective_acks` cache so building an ACK never
    /// scans all holes.
    recent: [(u64, u64); MAX_SACK_BLOCKS],
}

impl TcpReceiver {
    pub fn new(mss: u64, total_segs: u64, last_seg_len: u64, sack: bool, ecn: bool, delayed_ack: bool, delack_timeout: SimDuration) -> Self {
        TcpReceiver {
            mss,
            total_segs,
            last_seg_len,
            sack,
            ecn,
            delayed_ack,
            delack_timeout,
            rcv_nxt: 0,
            ooo: VecDeque::new(),
            recent: [(0, 0); MAX_SACK_BLOCKS],
            nrecent: 0,
            unacked: 0,
            delack_deadline: SimTime::MAX,
            ece: false,
            app_bytes: 0,
        }
    }

    /// Prefetch this receiver's state (a hint for an arrival a few events ahead).
    #[inline]
    pub(crate) fn prefetch(&self) {
        netunits::prefetch::prefetch(self);
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

    /// A data segment arrived; returns the ACK to send now, if any.
    #[inline]
    pub fn on_data(&mut self, now: SimTime, pkt: &Pkt) -> Option<Ack> {
        if self.ecn {
            // RFC 3168 §6.1.3: CWR ends the echo; a CE on the same packet restarts it.
            if pkt.flags & PF_CWR != 0 {
                self.ece = false;
            }
            if pkt.flags & PF_CE != 0 {
                self.ece = true;
            }
        }
        let s = pkt.seq;
        if s == self.rcv_nxt {
            self.rcv_nxt += 1;
            let mut filled_gap = false;
            if let Some(first) = self.ooo.front() {
                if first.start == self.rcv_nxt {
                    let end = first.end;
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
            if filled_gap || !self.ooo.is_empty() {
                // RFC 5681 §4.2: ACK at once when a segment fills (part of) a gap.
                return Some(self.make_ack(Some(s)));
            }
            self.unacked += 1;
            // RFC 5681 §4.2 / RFC 1122 §4.2.3.2: ACK at least every second
            // full-sized segment; otherwise within the delayed-ACK timeout.
            if !self.delayed_ack || self.unacked >= 2 {
                return Some(self.make_ack(None));
            }
            if self.delack_deadline == SimTime::MAX {
                self.delack_deadline = now + self.delack_timeout;
            }
            None
        } else if s > self.rcv_nxt {
            let dup = self.ooo.iter().any(|r| r.start <= s && s < r.end);
            self.insert_ooo(s);
            // RFC 5681 §4.2: an out-of-order segment is ACKed immediately (dupack).
            let mut ack = self.make_ack(Some(s));
            if dup && self.sack {
                // RFC 2883 §4 (2): a duplicate above the cumulative point is D-SACKed too.
                ack.dsack = Some(s);
            }
            Some(ack)
        } else {
            // Old duplicate (spurious retransmission): ACK at once (RFC 5681 §4.2)
            // and report it in a D-SACK block (RFC 2883 §4 (1); Linux tcp_dsack_set).
            let mut ack = self.make_ack(None);
            if self.sack {
                ack.dsack = Some(s);
            }
            Some(ack)
        }
    }

    /// The delayed-ACK timer, if due.
    pub fn on_timer(&mut self, now: SimTime) -> Option<Ack> {
        if now >= self.delack_deadline {
            return Some(self.make_ack(None));
        }
        None
    }

    fn insert_ooo(&mut self, s: u64) {
        let i = self.ooo.partition_point(|r| r.end < s);
        let mut merged = None;
        if i < self.ooo.len() {
            let r = self.ooo[i];
            if r.start <= s && s < r.end {
                merged = Some((r.start, r.end)); // duplicate of an out-of-order segment
            } else if r.end == s {
                let mut end = s + 1;
                if i + 1 < self.ooo.len() && self.ooo[i + 1].start == s + 1 {
                    end = self.ooo[i + 1].end;
                    self.ooo.remove(i + 1);
                }
                self.ooo[i].end = end;
                merged = Some((r.start, end));
            } else if r.start == s + 1 {
                self.ooo[i].start = s;
                merged = Some((s, r.end));
            }
        }
        let (a, b) = merged.unwrap_or_else(|| {
            self.ooo.insert(i, OooRange { start: s, end: s + 1 });
            (s, s + 1)
        });
        // Newest block first; drop cached blocks it now covers (they merged into it).
        let mut next = [(0u64, 0u64); MAX_SACK_BLOCKS];
        next[0] = (a, b);
        let mut n = 1;
        for k in 0..self.nrecent as usize {
            let (x, y) = self.recent[k];
            if (y <= a || x >= b) && n < MAX_SACK_BLOCKS {
                next[n] = (x, y);
                n += 1;
            }
        }
        self.recent = next;
        self.nrecent = n as u8;
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

    fn make_ack(&mut self, just_received: Option<u64>) -> Ack {
        self.unacked = 0;
        self.delack_deadline = SimTime::MAX;
        let mut ack = Ack { cum: self.rcv_nxt, ece: self.ece, ..Ack::default() };
        if self.sack && !self.ooo.is_empty() {
            // RFC 2018 §4: the first block holds the segment that triggered this ACK
            // (insert_ooo put it first in `recent`); the others repeat the most
            // recently reported blocks.
            let _ = just_received;
            let n = self.nrecent as usize;
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
        Pkt { meta: PacketMeta::default(), seq, len: 1000, flags: 0, aux: 0 }
    }
    fn rx(delayed: bool) -> TcpReceiver {
        TcpReceiver::new(1000, u64::MAX, 1000, true, true, delayed, SimDuration::from_millis(40))
    }

    #[test]
    fn delayed_ack_every_second_segment_or_timer() {
        let mut r = rx(true);
        let t = SimTime::from_millis(1);
        assert!(r.on_data(t, &seg(0)).is_none());
        assert_eq!(r.delack_deadline, SimTime::from_millis(41));
        assert_eq!(r.on_data(t, &seg(1)).unwrap().cum, 2);
        assert!(r.on_data(t, &seg(2)).is_none());
        assert!(r.on_timer(SimTime::from_millis(40)).is_none());
        assert_eq!(r.on_timer(SimTime::from_millis(41)).unwrap().cum, 3);
        assert_eq!(r.app_bytes, 3000);
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
        assert!(r.on_data(SimTime::ZERO, &p).unwrap().ece);
        assert!(r.on_data(SimTime::ZERO, &seg(1)).unwrap().ece);
        let mut p = seg(2);
        p.flags = PF_CWR;
        assert!(!r.on_data(SimTime::ZERO, &p).unwrap().ece);
    }
}
