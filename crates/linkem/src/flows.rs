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

use netunits::{SimDuration, SimTime};

use crate::frame::FlowKey;

/// TSval/TSecr are 32-bit counters that wrap; "a is at or after b" in sequence
/// space (RFC 7323 §5.2 uses the same modular comparison).
fn ts_at_or_after(a: u32, b: u32) -> bool {
    a.wrapping_sub(b) < (1 << 31)
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
    ids: HashMap<FlowKey, u32>,
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
}
