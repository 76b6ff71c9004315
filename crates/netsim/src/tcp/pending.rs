//! Which outstanding segments are lost and waiting for their retransmission
//! (`LOST` set, `RETRANS` clear, never `SACKED`): one bit per segment index.
//!
//! Why: after a large loss (a 10 Gbit/s flow overshooting in slow start loses tens
//! of thousands of segments) RACK's loss detection (RFC 8985 §6.2, once per ACK)
//! and NextSeg (RFC 6675) walked the scoreboard one 40-byte entry at a time over
//! every such segment, which made recovery quadratic (78 % of a 10 Gbit/s run).
//! NextSeg now skips 64 segments per word of this bitmap (RACK walks its own
//! time-ordered list instead). The sender keeps it in step with the flags at every
//! place they change; its count equals the sender's `lost_pending` (checked in
//! the unit tests' lossy runs).

use std::collections::VecDeque;

/// A bit per segment index, for the indices from `base * 64` on.
#[derive(Debug, Default)]
pub(crate) struct PendingBits {
    words: VecDeque<u64>,
    /// Word number of `words[0]`.
    base: u64,
}

impl PendingBits {
    /// Set or clear the bit of segment `idx` (at or above the last `forget_below`).
    #[inline]
    pub fn set(&mut self, idx: u64, on: bool) {
        let w = (idx / 64 - self.base) as usize;
        if w >= self.words.len() {
            if !on {
                return;
            }
            self.words.resize(w + 1, 0);
        }
        let bit = 1u64 << (idx % 64);
        if on {
            self.words[w] |= bit;
        } else {
            self.words[w] &= !bit;
        }
    }

    /// Is the bit of `idx` set?
    #[cfg(test)]
    pub fn get(&self, idx: u64) -> bool {
        let w = (idx / 64).wrapping_sub(self.base) as usize;
        w < self.words.len() && self.words[w] >> (idx % 64) & 1 == 1
    }

    /// Clear every bit.
    pub fn clear(&mut self) {
        self.words.clear();
    }

    /// Drop the words wholly below `idx` (the cumulative ACK moved there).
    #[inline]
    pub fn forget_below(&mut self, idx: u64) {
        let w = idx / 64;
        while self.base < w {
            if self.words.pop_front().is_none() {
                self.base = w;
                break;
            }
            self.base += 1;
        }
    }

    /// The first index in `[from, end)` whose bit is `want`, or `end`.
    #[inline]
    pub fn next(&self, from: u64, end: u64, want: bool) -> u64 {
        let mut idx = from;
        while idx < end {
            let w = (idx / 64).wrapping_sub(self.base) as usize;
            let word = if w < self.words.len() {
                self.words[w]
            } else {
                0
            };
            let word = if want { word } else { !word };
            let rest = word >> (idx % 64);
            if rest != 0 {
                return (idx + rest.trailing_zeros() as u64).min(end);
            }
            idx = (idx / 64 + 1) * 64;
        }
        end
    }

    /// Set bits in `[from, end)`.
    #[cfg(test)]
    pub fn count(&self, from: u64, end: u64) -> u64 {
        (from..end).filter(|&i| self.get(i)).count() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_a_vec_of_bools() {
        let mut b = PendingBits::default();
        let mut reference = vec![false; 2000];
        let mut lo = 0u64;
        let mut x: u64 = 0x2545f4914f6cdd1d;
        for step in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let i = lo + x % 300;
            if (i as usize) < reference.len() {
                let on = (x >> 40) & 1 == 1;
                b.set(i, on);
                reference[i as usize] = on;
            }
            if step % 50 == 0 && lo < 1600 {
                lo += (x >> 50) % 20;
                b.forget_below(lo);
            }
            let from = lo + (x >> 20) % 200;
            let end = (from + (x >> 30) % 300).min(reference.len() as u64);
            for want in [true, false] {
                let expect = (from..end)
                    .find(|&k| reference[k as usize] == want)
                    .unwrap_or(end);
                assert_eq!(b.next(from, end, want), expect, "step {step}, want {want}");
            }
        }
    }

    #[test]
    fn clear_and_forget() {
        let mut b = PendingBits::default();
        b.set(5, true);
        b.set(130, true);
        assert_eq!(b.next(0, 200, true), 5);
        b.forget_below(128);
        assert_eq!(b.next(128, 200, true), 130);
        assert_eq!(b.next(128, 200, false), 128);
        b.clear();
        assert_eq!(b.next(128, 200, true), 200);
        b.set(300, true);
        assert!(b.get(300) && !b.get(299));
    }
}
