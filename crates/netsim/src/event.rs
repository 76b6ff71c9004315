//! The event queue: a binary min-heap keyed by `(time, sequence)` (STYLE.md §3).
//!
//! The sequence number comes from one counter owned by the queue, so two events at
//! the same nanosecond always pop in the order they were scheduled, on every run.
//! Events are small `Copy` values naming *what* happens to *which* flow; the state
//! they act on lives in the simulator, never in a boxed closure. Each per-flow FIFO
//! (access link, forward propagation, reverse propagation) keeps at most one event
//! in the heap (for its head packet), and each flow exactly one timer at most
//! ([`TimerHeap`]), so the queue stays small (a few entries per flow) however many
//! packets are in flight.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use crate::timers::TimerHeap;

/// What an event does. `u32` payloads are flow indices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EvKind {
    /// The head of flow `f`'s access-link FIFO reaches the bottleneck queue.
    AccessOut(u32),
    /// The bottleneck link finished serialising the packet in service.
    LinkDone,
    /// The head of forward propagation pipe `p` reaches its receiver.
    RecvArrive(u32),
    /// The head of reverse (ACK) pipe `p` reaches its sender.
    AckArrive(u32),
    /// Flow `f`'s endpoint asked to be woken (RTO, delayed ACK, pacing, start,
    /// stop). A flow has one timer; arming it again moves it.
    Timer(u32),
}

/// One scheduled event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Event {
    /// Simulated time in nanoseconds.
    pub time: u64,
    /// Tie-breaker from the queue's single counter.
    pub seq: u64,
    /// What happens.
    pub kind: EvKind,
}

/// Bits of a key's tag that hold the event kind (above the index bits).
const KIND_BITS: u32 = 3;
const K_ACCESS_OUT: u64 = 0;
const K_LINK_DONE: u64 = 1;
const K_RECV_ARRIVE: u64 = 2;
const K_ACK_ARRIVE: u64 = 3;
pub(crate) const K_TIMER: u64 = 4;

/// How a queue packs `(seq, kind, index)` into one `u64` tag:
/// `seq << (KIND_BITS + index_bits) | kind << index_bits | index`.
///
/// Why: the heap entry is then 16 bytes, `(time, tag)`, instead of 24, and
/// comparing two entries is comparing two `u64` pairs. Sequence numbers are unique,
/// so ordering by `(time, tag)` is exactly ordering by `(time, seq)` (STYLE.md §3):
/// the kind and index bits below never decide. The index gets just the bits the
/// run's flow and pipe count need, the sequence number the rest (51 bits with 1,000
/// flows); should a run ever exhaust them, [`EventQueue`] renumbers its pending
/// entries in order, which changes no ordering.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TagLayout {
    index_bits: u32,
}

impl TagLayout {
    /// A layout for indices below `n`.
    pub fn for_indices(n: usize) -> Self {
        let index_bits = (usize::BITS - n.leading_zeros()).max(1);
        TagLayout { index_bits }
    }
    #[inline(always)]
    fn seq_shift(self) -> u32 {
        self.index_bits + KIND_BITS
    }
    /// First sequence number that no longer fits.
    #[inline(always)]
    fn seq_limit(self) -> u64 {
        1u64 << (64 - self.seq_shift())
    }
    #[inline(always)]
    pub fn pack(self, seq: u64, kind: u64, index: u32) -> u64 {
        (seq << self.seq_shift()) | (kind << self.index_bits) | index as u64
    }
    #[inline(always)]
    pub fn seq(self, tag: u64) -> u64 {
        tag >> self.seq_shift()
    }
    #[inline(always)]
    pub fn index(self, tag: u64) -> u32 {
        (tag & ((1u64 << self.index_bits) - 1)) as u32
    }
    #[inline(always)]
    fn kind(self, tag: u64) -> u64 {
        (tag >> self.index_bits) & ((1 << KIND_BITS) - 1)
    }
    #[inline(always)]
    fn event(self, key: Key) -> Event {
        let i = self.index(key.tag);
        let kind = match self.kind(key.tag) {
            K_ACCESS_OUT => EvKind::AccessOut(i),
            K_LINK_DONE => EvKind::LinkDone,
            K_RECV_ARRIVE => EvKind::RecvArrive(i),
            K_ACK_ARRIVE => EvKind::AckArrive(i),
            _ => EvKind::Timer(i),
        };
        Event { time: key.time, seq: self.seq(key.tag), kind }
    }
}

/// A heap entry: 16 bytes, ordered by `(time, tag)` (see [`TagLayout`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Key {
    pub time: u64,
    pub tag: u64,
}

impl Key {
    /// `(time, tag)` as one number: comparing two of them is exactly the
    /// lexicographic order of the pairs, in a compare and a subtract-with-borrow
    /// instead of a branch per field (the queue compares keys a few dozen times
    /// per packet).
    #[inline(always)]
    fn wide(self) -> u128 {
        (self.time as u128) << 64 | self.tag as u128
    }
}

impl Ord for Key {
    #[inline(always)]
    fn cmp(&self, other: &Self) -> Ordering {
        self.wide().cmp(&other.wide())
    }
}
impl PartialOrd for Key {
    #[inline(always)]
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// A packet-event heap entry: [`Key`] in reverse order, because `BinaryHeap` is a
/// max-heap and the earliest `(time, tag)` must come first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Earliest(Key);

impl Ord for Earliest {
    #[inline(always)]
    fn cmp(&self, other: &Self) -> Ordering {
        other.0.cmp(&self.0)
    }
}
impl PartialOrd for Earliest {
    #[inline(always)]
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// `front` when empty: later than every real event (times stay below `u64::MAX`,
/// the engine's "never").
const NO_KEY: Key = Key { time: u64::MAX, tag: u64::MAX };

/// Min-heap of events with a deterministic tie-break.
///
/// Timers live in their own structure, one per flow ([`TimerHeap`]): there are a
/// thousand in a 1,000-flow run and they are rarely due, while packet events are
/// few and hot. `pop` compares the two heads by `(time, seq)`, so the order is
/// exactly that of a single queue.
///
/// The earliest non-timer event is held outside the heap (`front`): a handler very
/// often schedules the very next event (the next packet of a burst, the link's next
/// departure), and then neither a push nor a pop touches the heap.
#[derive(Debug)]
pub(crate) struct EventQueue {
    /// The earliest packet event (bar `link` and `recv0`), or [`NO_KEY`].
    front: Key,
    heap: BinaryHeap<Earliest>,
    /// The bottleneck link's pending `LinkDone`, or [`NO_KEY`]. The engine has at
    /// most one (one packet in service; a second would go to `front` or `heap`),
    /// about a third of all events, and a slot of its own keeps it out of the
    /// heap: 3.5 % fewer instructions and CPU time at 2 flows. A heap push right
    /// after a pop stalls on reading back the root the pop had just moved (a
    /// 16-byte vector store read as two 8-byte loads is not forwarded from the
    /// store buffer), so every event the heap does not see helps twice.
    link: Key,
    /// Forward pipe 0's pending head (`RecvArrive(0)`: every flow's, when all flows
    /// have one RTT), or [`NO_KEY`], the same way: another third of all events.
    /// With it, 2 flows run 4.7 % fewer instructions and 64 or 1,000 flows 4–5 %
    /// less CPU. (A third slot, for reverse pipe 0, made 1,000 flows slower.)
    recv0: Key,
    timers: TimerHeap,
    layout: TagLayout,
    next_seq: u64,
    /// `layout.seq_limit()`, or less in tests of the renumbering.
    seq_limit: u64,
}

impl EventQueue {
    /// An empty queue with room for `cap` packet events and `flows` timers, whose
    /// flow and pipe indices are all below `indices`.
    pub fn with_capacity(cap: usize, flows: usize, indices: usize) -> Self {
        let layout = TagLayout::for_indices(indices);
        EventQueue {
            front: NO_KEY,
            heap: BinaryHeap::with_capacity(cap),
            link: NO_KEY,
            recv0: NO_KEY,
            timers: TimerHeap::with_capacity(flows, layout),
            layout,
            next_seq: 0,
            seq_limit: layout.seq_limit(),
        }
    }

    #[inline(always)]
    fn take_seq(&mut self) -> u64 {
        if self.next_seq == self.seq_limit {
            self.renumber();
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        seq
    }

    /// Schedule `kind` at `time` (ns); for `Timer(f)` see [`EventQueue::push_timer`].
    #[inline(always)]
    pub fn push(&mut self, time: u64, kind: EvKind) {
        let (k, i) = match kind {
            EvKind::Timer(f) => {
                self.push_timer(time, f);
                return;
            }
            EvKind::AccessOut(i) => (K_ACCESS_OUT, i),
            EvKind::LinkDone => (K_LINK_DONE, 0),
            EvKind::RecvArrive(i) => (K_RECV_ARRIVE, i),
            EvKind::AckArrive(i) => (K_ACK_ARRIVE, i),
        };
        let seq = self.take_seq();
        let key = Key { time, tag: self.layout.pack(seq, k, i) };
        if k == K_LINK_DONE && self.link == NO_KEY {
            self.link = key;
        } else if k == K_RECV_ARRIVE && i == 0 && self.recv0 == NO_KEY {
            self.recv0 = key;
        } else {
            self.insert(key);
        }
    }

    /// Put a packet event in `front` or the heap.
    #[inline(always)]
    fn insert(&mut self, key: Key) {
        // Invariant: `front`, when set, is earlier than everything in `heap`.
        if self.front != NO_KEY {
            if key < self.front {
                self.heap.push(Earliest(std::mem::replace(&mut self.front, key)));
            } else {
                self.heap.push(Earliest(key));
            }
        } else {
            match self.heap.peek() {
                Some(h) if h.0 < key => self.heap.push(Earliest(key)),
                _ => self.front = key,
            }
        }
    }

    /// Set flow `f`'s timer to `time` (ns), replacing any pending one: it pops as
    /// `Timer(f)`, ordered by `time` and then by when it was set.
    #[inline]
    pub fn push_timer(&mut self, time: u64, f: u32) {
        let seq = self.take_seq();
        self.timers.set(Key { time, tag: self.layout.pack(seq, K_TIMER, f) });
    }

    /// The flow of the earliest pending timer, if any: a hint for prefetching.
    #[inline]
    pub fn next_timer_flow(&self) -> Option<u32> {
        self.timers.peek().map(|t| self.layout.index(t.tag))
    }

    /// The earliest event, removed.
    #[inline]
    pub fn pop(&mut self) -> Option<Event> {
        let timer = self.timers.peek().copied().unwrap_or(NO_KEY);
        // The earliest other packet event: `front`, else the heap's root.
        let packet = if self.front != NO_KEY { self.front } else { self.heap.peek().map_or(NO_KEY, |e| e.0) };
        // Keys are unique; only the "none" sentinels compare equal.
        let key = if self.link < packet && self.link < timer && self.link < self.recv0 {
            std::mem::replace(&mut self.link, NO_KEY)
        } else if self.recv0 < packet && self.recv0 < timer {
            std::mem::replace(&mut self.recv0, NO_KEY)
        } else if packet < timer {
            if self.front != NO_KEY {
                self.front = NO_KEY;
            } else {
                self.heap.pop();
            }
            packet
        } else if timer != NO_KEY {
            self.timers.pop();
            timer
        } else {
            return None;
        };
        Some(self.layout.event(key))
    }

    /// Give every pending entry a new sequence number, from 0, in `(time, seq)`
    /// order: the order is unchanged and the counter can go on. Only a run of
    /// about 2^(61 − index bits) events gets here (2^51 with 1,000 flows).
    #[cold]
    fn renumber(&mut self) {
        let mut all: Vec<Key> = self.heap.drain().map(|e| e.0).collect();
        if self.front != NO_KEY {
            all.push(std::mem::replace(&mut self.front, NO_KEY));
        }
        if self.link != NO_KEY {
            all.push(std::mem::replace(&mut self.link, NO_KEY));
        }
        if self.recv0 != NO_KEY {
            all.push(std::mem::replace(&mut self.recv0, NO_KEY));
        }
        while let Some(t) = self.timers.pop() {
            all.push(t);
        }
        all.sort_unstable();
        let l = self.layout;
        for (seq, key) in all.iter_mut().enumerate() {
            key.tag = l.pack(seq as u64, l.kind(key.tag), l.index(key.tag));
        }
        self.next_seq = all.len() as u64;
        for key in all {
            if l.kind(key.tag) == K_TIMER {
                self.timers.set(key);
            } else if l.kind(key.tag) == K_LINK_DONE && self.link == NO_KEY {
                self.link = key;
            } else if l.kind(key.tag) == K_RECV_ARRIVE && l.index(key.tag) == 0 && self.recv0 == NO_KEY {
                self.recv0 = key;
            } else {
                self.insert(key);
            }
        }
    }

    /// Events scheduled.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        (self.front != NO_KEY) as usize + (self.link != NO_KEY) as usize + (self.recv0 != NO_KEY) as usize + self.heap.len() + self.timers.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_in_time_order() {
        let mut q = EventQueue::with_capacity(4, 4, 8);
        q.push(30, EvKind::LinkDone);
        q.push(10, EvKind::Timer(1));
        q.push(20, EvKind::Timer(2));
        let t: Vec<u64> = std::iter::from_fn(|| q.pop()).map(|e| e.time).collect();
        assert_eq!(t, vec![10, 20, 30]);
    }

    /// The reference model of the queue: every scheduled `(time, seq, kind)`,
    /// where a flow's new timer replaces its pending one.
    #[derive(Default)]
    struct Reference {
        pending: Vec<(u64, u64, EvKind)>,
        seq: u64,
    }

    impl Reference {
        fn push(&mut self, t: u64, kind: EvKind) {
            if let EvKind::Timer(_) = kind {
                self.pending.retain(|e| e.2 != kind);
            }
            self.pending.push((t, self.seq, kind));
            self.seq += 1;
        }
        fn pop(&mut self) -> Option<(u64, u64, EvKind)> {
            let i = (0..self.pending.len()).min_by_key(|&i| (self.pending[i].0, self.pending[i].1))?;
            Some(self.pending.swap_remove(i))
        }
    }

    /// The queue under test driven in lockstep with [`Reference`]: every pop must
    /// return what the reference pops.
    struct Checked {
        q: EventQueue,
        reference: Reference,
    }

    impl Checked {
        fn new() -> Self {
            Checked { q: EventQueue::with_capacity(4, 4, 1000), reference: Reference::default() }
        }
        /// A queue whose sequence numbers run out after `limit`, so it renumbers.
        fn with_seq_limit(limit: u64) -> Self {
            let mut c = Checked::new();
            c.q.seq_limit = limit;
            c
        }
        fn push(&mut self, t: u64, kind: EvKind) {
            self.q.push(t, kind);
            self.reference.push(t, kind);
        }
        /// Pop from both and compare; the popped time, if any. After a renumbering
        /// the queue's sequence numbers differ from the reference's, but never
        /// what pops, in which order.
        fn pop(&mut self) -> Option<u64> {
            let e = self.q.pop();
            let want = self.reference.pop();
            assert_eq!(e.map(|e| (e.time, e.kind)), want.map(|w| (w.0, w.2)));
            if self.q.seq_limit == self.q.layout.seq_limit() {
                assert_eq!(e.map(|e| e.seq), want.map(|w| w.1));
            }
            e.map(|e| e.time)
        }
    }

    /// A 64-bit LCG step (Knuth's MMIX constants): cheap reproducible test input.
    fn lcg(x: &mut u64) -> u64 {
        *x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        *x
    }

    #[test]
    fn interleaved_pushes_and_pops_match_a_sorted_order() {
        // Exercise `front` and the slots: few events, mostly packet events.
        let mut c = Checked::new();
        let (mut x, mut now) = (12345u64, 0u64);
        for step in 0..2000 {
            let r = lcg(&mut x);
            for k in 0..(r >> 60) % 3 {
                let t = now + ((r >> (8 * k + 8)) & 0xff) % 50;
                c.push(t, [EvKind::Timer(step % 7), EvKind::LinkDone, EvKind::RecvArrive(0), EvKind::LinkDone][(r >> 40) as usize % 4]);
            }
            now = c.pop().unwrap_or(now);
        }
    }

    #[test]
    fn many_timers_pop_in_time_then_sequence_order() {
        // Mostly timers of a thousand flows, re-armed often, with many ties.
        let mut c = Checked::new();
        let (mut x, mut now) = (987654321u64, 0u64);
        for step in 0..20000u32 {
            let r = lcg(&mut x);
            let n = if step < 3000 { 2 } else { (r >> 61) % 3 };
            for k in 0..n {
                let t = now + ((r >> (8 * k + 8)) & 0x3f);
                let flow = ((r >> (8 * k + 20)) % 1000) as u32;
                c.push(t, if (r >> 50) % 8 == 0 { EvKind::LinkDone } else { EvKind::Timer(flow) });
            }
            now = c.pop().unwrap_or(now);
        }
        while c.pop().is_some() {}
        assert_eq!(c.reference.pop(), None);
    }

    #[test]
    fn renumbering_keeps_the_order() {
        // Sequence numbers run out every 50 schedules: the queue renumbers its
        // pending events (in order) many times, and must pop exactly as before.
        let mut c = Checked::with_seq_limit(50);
        let (mut x, mut now) = (42u64, 0u64);
        for step in 0..20000u32 {
            let r = lcg(&mut x);
            for k in 0..(r >> 61) % 3 {
                let t = now + ((r >> (8 * k + 8)) & 0x1f);
                let i = ((r >> (8 * k + 20)) % 40) as u32;
                // RecvArrive of pipes 0 and 1: pipe 0's has a slot, like LinkDone.
                let kinds = [EvKind::Timer(i), EvKind::LinkDone, EvKind::AckArrive(i), EvKind::AccessOut(i), EvKind::RecvArrive(i % 2)];
                c.push(t, kinds[(r >> 40) as usize % kinds.len()]);
            }
            if step % 3 != 0 {
                now = c.pop().unwrap_or(now);
            }
        }
        while c.pop().is_some() {}
    }

    #[test]
    fn tags_round_trip() {
        for n in [1usize, 2, 3, 1000, 1 << 21, u32::MAX as usize / 2] {
            let l = TagLayout::for_indices(n);
            let top = (n - 1) as u32;
            let seq = l.seq_limit() - 1;
            let tag = l.pack(seq, K_TIMER, top);
            assert_eq!((l.seq(tag), l.kind(tag), l.index(tag)), (seq, K_TIMER, top), "n = {n}");
            // The sequence number decides the order whatever the kind and index.
            assert!(l.pack(5, K_ACCESS_OUT, top) < l.pack(6, K_ACCESS_OUT, 0));
        }
    }

    #[test]
    fn same_time_events_pop_in_scheduling_order() {
        // STYLE.md §3: ties resolve by insertion sequence, never arbitrarily.
        let mut q = EventQueue::with_capacity(8, 8, 8);
        for f in 0..5 {
            q.push(7, EvKind::Timer(f));
        }
        q.push(3, EvKind::LinkDone);
        assert_eq!(q.len(), 6);
        assert_eq!(q.pop().unwrap().kind, EvKind::LinkDone);
        let order: Vec<EvKind> = std::iter::from_fn(|| q.pop()).map(|e| e.kind).collect();
        assert_eq!(order, (0..5).map(EvKind::Timer).collect::<Vec<_>>());
    }
}
