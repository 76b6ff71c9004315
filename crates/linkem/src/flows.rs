//! Dense flow ids and the passive per-flow RTT estimate.
//!
//! Flow ids: the first forward frame of a 5-tuple gets the next id from 0, the way
//! the simulator numbers flows, so per-flow disciplines (CHOKe, FQ-CoDel, CSFQ) can
//! index by it. Ids are never reused during a run.
//!
//! Passive RTT (fairlab issue 5, ZRTT/MRTT/PRTO with `rtt_source = "passive"`): the
//! idea of Nichols' `pping` — remember when a TSval was first seen going forward,
//! and when the receiver echoes it in TSecr (RFC 7323 §3, §4.3) the difference is
//! an RTT sample as seen from linkem. linkem sees the data before its forward delay
//! and the echo before its reverse delay, so the sample lacks the reverse one-way
//! delay, which linkem knows and adds. One pending TSval per flow is enough: a
//! sample per round trip. The estimate handed to the qdisc is the minimum sample
//! (the flow's base RTT, what ZRTT's header hint carries): samples are inflated by
//! queueing and by delayed ACKs, never deflated.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use netunits::{SimDuration, SimTime};

use crate::frame::FlowKey;

/// TSval/TSecr are 32-bit counters that wrap; "a is at or after b" in sequence
/// space (RFC 7323 §5.2 uses the same modular comparison).
fn ts_at_or_after(a: u32, b: u32) -> bool {
    a.wrapping_sub(b) < (1 << 31)
}

/// A `HashMap` keyed by header fields (flow keys, MACs), looked up a few times per
/// frame. std's default SipHash with a per-process random key resists crafted
/// collisions, which linkem's own namespaces do not send, and costs more than the
/// rest of the per-frame bookkeeping; this one is a multiply-fold hash, fixed-keyed.
pub type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FoldHasher>>;

/// Mixes each word into the state with a 64×64→128-bit multiply folded back to 64
/// bits, so every input bit reaches both the high bits (hashbrown's tag) and the low
/// bits (its bucket index).
#[derive(Default, Clone, Copy, Debug)]
pub struct FoldHasher(u64);

impl FoldHasher {
    /// An odd constant with no structure (the fractional digits of π).
    const K: u64 = 0x243f_6a88_85a3_08d3;

    fn mix(&mut self, word: u64) {
        let p = u128::from(self.0 ^ word) * u128::from(Self::K);
        self.0 = (p as u64) ^ ((p >> 64) as u64);
    }
}

impl Hasher for FoldHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.mix(u64::from_le_bytes(c.try_into().expect("8 bytes")));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            // The length keeps "ab" and "ab\0" apart.
            self.mix(u64::from_le_bytes(w) ^ ((rest.len() as u64) << 59));
        }
    }
    fn write_u8(&mut self, x: u8) {
        self.mix(u64::from(x));
    }
    fn write_u16(&mut self, x: u16) {
        self.mix(u64::from(x));
    }
    fn write_u32(&mut self, x: u32) {
        self.mix(u64::from(x));
    }
    fn write_u64(&mut self, x: u64) {
        self.mix(x);
    }
    fn write_usize(&mut self, x: usize) {
        self.mix(x as u64);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

#[derive(Clone, Debug, Default)]
struct RttState {
    /// The TSval being timed and when it was first seen forward.
    pending: Option<(u32, SimTime)>,
    /// The last TSval seen forward (a new value starts a new measurement).
    last_tsval: Option<u32>,
    /// Smallest sample so far, in microseconds.
    min_us: Option<u32>,
}

/// Flow ids by key, and each flow's passive RTT state.
#[derive(Debug, Default)]
pub struct FlowTable {
    ids: FastMap<FlowKey, u32>,
    rtt: Vec<RttState>,
}

impl FlowTable {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// The id of `key`, allocating the next one on first sight.
    pub fn id(&mut self, key: FlowKey) -> u32 {
        let next = self.rtt.len() as u32;
        let id = *self.ids.entry(key).or_insert(next);
        if id == next {
            self.rtt.push(RttState::default());
        }
        id
    }

    /// The id of `key` if it has one.
    pub fn get(&self, key: &FlowKey) -> Option<u32> {
        self.ids.get(key).copied()
    }

    /// Number of flows seen.
    pub fn len(&self) -> usize {
        self.rtt.len()
    }

    /// Whether no flow has been seen.
    pub fn is_empty(&self) -> bool {
        self.rtt.is_empty()
    }

    /// A forward segment of flow `id` carrying `tsval` was seen at `now`.
    pub fn on_forward_tsval(&mut self, id: u32, tsval: u32, now: SimTime) {
        let st = &mut self.rtt[id as usize];
        // Time only the first segment carrying a new TSval: later segments with the
        // same TSval were sent later, and pairing their echo with the first
        // sighting would still be right, but re-arming would overwrite the time.
        if st.last_tsval != Some(tsval) {
            st.last_tsval = Some(tsval);
            if st.pending.is_none() {
                st.pending = Some((tsval, now));
            }
        }
    }

    /// A reverse segment echoing `tsecr` for forward flow `id` was seen at `now`;
    /// it still has `reverse_delay` to travel to the sender. Returns the sample.
    pub fn on_reverse_tsecr(&mut self, id: u32, tsecr: u32, now: SimTime, reverse_delay: SimDuration) -> Option<SimDuration> {
        let st = &mut self.rtt[id as usize];
        let (tsval, seen) = st.pending?;
        if tsecr == tsval {
            st.pending = None;
            let sample = now.saturating_since(seen) + reverse_delay;
            let us = u32::try_from(sample.as_micros()).unwrap_or(u32::MAX);
            st.min_us = Some(st.min_us.map_or(us, |m| m.min(us)));
            Some(sample)
        } else {
            // The receiver echoed a later TSval (ours was never echoed, e.g. it was
            // lost or the echo skipped it): give up on this one; the next new TSval
            // starts a fresh measurement.
            if ts_at_or_after(tsecr, tsval) {
                st.pending = None;
            }
            None
        }
    }

    /// The flow's passive RTT estimate in microseconds, if any sample exists.
    pub fn passive_rtt_us(&self, id: u32) -> Option<u32> {
        self.rtt.get(id as usize).and_then(|s| s.min_us)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(sport: u16) -> FlowKey {
        FlowKey::V4 { src: [1, 1, 1, 1], dst: [2, 2, 2, 2], proto: 6, sport, dport: 80 }
    }

    #[test]
    fn ids_are_dense_from_zero_and_stable() {
        let mut t = FlowTable::new();
        assert_eq!(t.id(key(1)), 0);
        assert_eq!(t.id(key(2)), 1);
        assert_eq!(t.id(key(1)), 0);
        assert_eq!(t.get(&key(3)), None);
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn rtt_sample_is_echo_time_minus_first_sighting_plus_reverse_delay() {
        let mut t = FlowTable::new();
        let f = t.id(key(1));
        t.on_forward_tsval(f, 100, SimTime::from_millis(0));
        // Same TSval again later must not move the start time.
        t.on_forward_tsval(f, 100, SimTime::from_millis(3));
        let s = t.on_reverse_tsecr(f, 100, SimTime::from_millis(30), SimDuration::from_millis(20));
        assert_eq!(s, Some(SimDuration::from_millis(50)));
        assert_eq!(t.passive_rtt_us(f), Some(50_000));
        // A later, larger sample does not raise the minimum.
        t.on_forward_tsval(f, 101, SimTime::from_millis(40));
        t.on_reverse_tsecr(f, 101, SimTime::from_millis(80), SimDuration::from_millis(20));
        assert_eq!(t.passive_rtt_us(f), Some(50_000));
    }

    #[test]
    fn an_echo_of_a_later_tsval_abandons_the_pending_one() {
        let mut t = FlowTable::new();
        let f = t.id(key(1));
        t.on_forward_tsval(f, u32::MAX, SimTime::from_millis(0)); // wraps next
        assert_eq!(t.on_reverse_tsecr(f, 5, SimTime::from_millis(10), SimDuration::ZERO), None);
        assert_eq!(t.passive_rtt_us(f), None);
        // Next new TSval is timed afresh.
        t.on_forward_tsval(f, 6, SimTime::from_millis(20));
        assert_eq!(t.on_reverse_tsecr(f, 6, SimTime::from_millis(21), SimDuration::ZERO), Some(SimDuration::from_millis(1)));
        // An older echo (reordering) keeps a pending measurement alive.
        t.on_forward_tsval(f, 9, SimTime::from_millis(30));
        assert_eq!(t.on_reverse_tsecr(f, 8, SimTime::from_millis(31), SimDuration::ZERO), None);
        assert!(t.on_reverse_tsecr(f, 9, SimTime::from_millis(32), SimDuration::ZERO).is_some());
    }

    #[test]
    fn the_fold_hash_spreads_similar_keys_over_buckets() {
        use std::hash::BuildHasher;
        // 4096 flows that differ only in the source port, as iperf3's parallel
        // streams do: no full-hash collision, and the low 7 bits (a 128-bucket
        // table's index) fill every bucket roughly evenly.
        let b = BuildHasherDefault::<FoldHasher>::default();
        let hashes: Vec<u64> = (0..4096u16).map(|p| b.hash_one(key(40_000 + p))).collect();
        let mut sorted = hashes.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), hashes.len());
        let mut buckets = [0u32; 128];
        for h in &hashes {
            buckets[(h & 127) as usize] += 1;
        }
        // 32 expected per bucket; a fair hash stays well inside 8..64.
        assert!(buckets.iter().all(|&n| (8..64).contains(&n)), "{buckets:?}");
    }
}
