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

impl Ord for Event {
    fn cmp(&self, other: &Self) -> Ordering {
        // Reversed: BinaryHeap is a max-heap, we want the earliest (time, seq) first.
        (other.time, other.seq).cmp(&(self.time, self.seq))
    }
}
impl PartialOrd for Event {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

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
#[derive(Debug, Default)]
pub(crate) struct EventQueue {
    front: Option<Event>,
    heap: BinaryHeap<Event>,
    timers: TimerHeap,
    next_seq: u64,
}

impl EventQueue {
    /// An empty queue with room for `cap` packet events and `flows` timers.
    pub fn with_capacity(cap: usize, flows: usize) -> Self {
        EventQueue { front: None, heap: BinaryHeap::with_capacity(cap), timers: TimerHeap::with_capacity(flows), next_seq: 0 }
    }

    /// Schedule `kind` at `time` (ns); for `Timer(f)` see [`EventQueue::push_timer`].
    #[inline(always)]
    pub fn push(&mut self, time: u64, kind: EvKind) {
        if let EvKind::Timer(f) = kind {
            self.push_timer(time, f);
            return;
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        let ev = Event { time, seq, kind };
        // Invariant: `front`, when set, is earlier than everything in `heap`.
        // (`Event`'s order is reversed: earlier compares greater.)
        match self.front {
            Some(f) if ev > f => {
                self.heap.push(f);
                self.front = Some(ev);
            }
            Some(_) => self.heap.push(ev),
            None => match self.heap.peek() {
                Some(h) if *h > ev => self.heap.push(ev),
                _ => self.front = Some(ev),
            },
        }
    }

    /// Set flow `f`'s timer to `time` (ns), replacing any pending one: it pops as
    /// `Timer(f)`, ordered by `time` and then by when it was set.
    #[inline]
    pub fn push_timer(&mut self, time: u64, f: u32) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.timers.set(time, seq, f);
    }

    /// The flow of the earliest pending timer, if any: a hint for prefetching.
    #[inline]
    pub fn next_timer_flow(&self) -> Option<u32> {
        self.timers.peek().map(|t| t.flow)
    }

    /// The earliest event, removed.
    #[inline]
    pub fn pop(&mut self) -> Option<Event> {
        let main = match self.front {
            Some(f) => Some(f),
            None => self.heap.peek().copied(),
        };
        match (main, self.timers.peek()) {
            (Some(a), Some(t)) if (t.time, t.seq) < (a.time, a.seq) => self.pop_timer(),
            (Some(_), _) => match self.front.take() {
                Some(f) => Some(f),
                None => self.heap.pop(),
            },
            (None, _) => self.pop_timer(),
        }
    }

    #[inline]
    fn pop_timer(&mut self) -> Option<Event> {
        self.timers.pop().map(|t| Event { time: t.time, seq: t.seq, kind: EvKind::Timer(t.flow) })
    }

    /// Events scheduled.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.front.is_some() as usize + self.heap.len() + self.timers.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_in_time_order() {
        let mut q = EventQueue::with_capacity(4, 4);
        q.push(30, EvKind::LinkDone);
        q.push(10, EvKind::Timer(1));
        q.push(20, EvKind::Timer(2));
        let t: Vec<u64> = std::iter::from_fn(|| q.pop()).map(|e| e.time).collect();
        assert_eq!(t, vec![10, 20, 30]);
    }

    /// The reference model of the queue: every scheduled `(time, seq)`, where a
    /// flow's new timer replaces its pending one.
    #[derive(Default)]
    struct Reference {
        pending: Vec<(u64, u64, Option<u32>)>,
        seq: u64,
    }

    impl Reference {
        fn push(&mut self, t: u64, timer_of: Option<u32>) {
            if let Some(f) = timer_of {
                self.pending.retain(|e| e.2 != Some(f));
            }
            self.pending.push((t, self.seq, timer_of));
            self.seq += 1;
        }
        fn pop(&mut self) -> Option<(u64, u64)> {
            let i = (0..self.pending.len()).min_by_key(|&i| (self.pending[i].0, self.pending[i].1))?;
            let (t, s, _) = self.pending.swap_remove(i);
            Some((t, s))
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
            Checked { q: EventQueue::with_capacity(4, 4), reference: Reference::default() }
        }
        fn push(&mut self, t: u64, kind: EvKind) {
            let timer_of = if let EvKind::Timer(f) = kind { Some(f) } else { None };
            self.q.push(t, kind);
            self.reference.push(t, timer_of);
        }
        /// Pop from both and compare; the popped time, if any.
        fn pop(&mut self) -> Option<u64> {
            let e = self.q.pop();
            assert_eq!(e.map(|e| (e.time, e.seq)), self.reference.pop());
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
        // Exercise the `front` slot: few events, mostly packet events.
        let mut c = Checked::new();
        let (mut x, mut now) = (12345u64, 0u64);
        for step in 0..2000 {
            let r = lcg(&mut x);
            for k in 0..(r >> 60) % 3 {
                let t = now + ((r >> (8 * k + 8)) & 0xff) % 50;
                c.push(t, if (r >> 40) % 4 == 0 { EvKind::Timer(step % 7) } else { EvKind::LinkDone });
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
    fn same_time_events_pop_in_scheduling_order() {
        // STYLE.md §3: ties resolve by insertion sequence, never arbitrarily.
        let mut q = EventQueue::with_capacity(8, 8);
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
