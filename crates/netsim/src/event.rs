//! The event queue: a binary min-heap keyed by `(time, sequence)` (STYLE.md §3).
//!
//! The sequence number comes from one counter owned by the queue, so two events at
//! the same nanosecond always pop in the order they were scheduled, on every run.
//! Events are small `Copy` values naming *what* happens to *which* flow; the state
//! they act on lives in the simulator, never in a boxed closure. Each per-flow FIFO
//! (access link, forward propagation, reverse propagation) keeps at most one event
//! in the heap (for its head packet), and each flow at most one live timer event,
//! so the heap stays small (a few entries per flow) however many packets are in
//! flight.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

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
    /// stop). Lazily re-armed: stale timer events are recognised on pop.
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
/// Timer events live in a second heap: there is one per flow (a thousand in a
/// 1,000-flow run) and they are rarely due, while packet events are few and hot.
/// `pop` compares the two heads by `(time, seq)`, so the order is exactly that of
/// a single heap.
///
/// The earliest non-timer event is held outside the heap (`front`): a handler very
/// often schedules the very next event (the next packet of a burst, the link's next
/// departure), and then neither a push nor a pop touches the heap.
#[derive(Debug, Default)]
pub(crate) struct EventQueue {
    front: Option<Event>,
    heap: BinaryHeap<Event>,
    timers: BinaryHeap<Event>,
    next_seq: u64,
}

impl EventQueue {
    /// An empty queue with room for `cap` events.
    pub fn with_capacity(cap: usize) -> Self {
        EventQueue { front: None, heap: BinaryHeap::with_capacity(cap), timers: BinaryHeap::with_capacity(cap), next_seq: 0 }
    }

    /// Schedule `kind` at `time` (ns).
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

    /// Schedule flow `f`'s timer at `time` (ns): `push(time, EvKind::Timer(f))`.
    #[inline]
    pub fn push_timer(&mut self, time: u64, f: u32) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.timers.push(Event { time, seq, kind: EvKind::Timer(f) });
    }

    /// The flow of the earliest pending timer event, if any (possibly a stale
    /// one): a hint for prefetching.
    #[inline]
    pub fn next_timer_flow(&self) -> Option<u32> {
        match self.timers.peek() {
            Some(Event { kind: EvKind::Timer(f), .. }) => Some(*f),
            _ => None,
        }
    }

    /// The earliest event, removed.
    #[inline]
    pub fn pop(&mut self) -> Option<Event> {
        let main = match self.front {
            Some(f) => Some(f),
            None => self.heap.peek().copied(),
        };
        match (main, self.timers.peek()) {
            // `Event`'s order is reversed: the earlier event compares greater.
            (Some(a), Some(b)) if *b > a => self.timers.pop(),
            (Some(_), _) => match self.front.take() {
                Some(f) => Some(f),
                None => self.heap.pop(),
            },
            (None, _) => self.timers.pop(),
        }
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
        let mut q = EventQueue::with_capacity(4);
        q.push(30, EvKind::LinkDone);
        q.push(10, EvKind::Timer(1));
        q.push(20, EvKind::Timer(2));
        let t: Vec<u64> = std::iter::from_fn(|| q.pop()).map(|e| e.time).collect();
        assert_eq!(t, vec![10, 20, 30]);
    }

    #[test]
    fn interleaved_pushes_and_pops_match_a_sorted_order() {
        // Exercise the `front` slot against a reference: every pop must return the
        // smallest (time, seq) scheduled so far.
        let mut q = EventQueue::with_capacity(4);
        let mut reference: Vec<(u64, u64)> = Vec::new();
        let mut x: u64 = 12345;
        let mut now = 0u64;
        let mut seq = 0u64;
        for step in 0..2000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let n = (x >> 60) % 3;
            for k in 0..n {
                let t = now + ((x >> (8 * k + 8)) & 0xff) % 50;
                let kind = if (x >> 40) % 4 == 0 { EvKind::Timer(step) } else { EvKind::LinkDone };
                q.push(t, kind);
                reference.push((t, seq));
                seq += 1;
            }
            if let Some(e) = q.pop() {
                reference.sort();
                let want = reference.remove(0);
                assert_eq!((e.time, e.seq), want);
                now = e.time;
            }
        }
    }

    #[test]
    fn many_timers_pop_in_time_then_sequence_order() {
        // Mostly timers (their own heap) against a sorted reference, with many ties.
        let mut q = EventQueue::with_capacity(4);
        let mut reference: Vec<(u64, u64)> = Vec::new();
        let mut x: u64 = 987654321;
        let mut now = 0u64;
        let mut seq = 0u64;
        for step in 0..20000u32 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let n = if step < 3000 { 2 } else { (x >> 61) % 3 };
            for k in 0..n {
                let t = now + ((x >> (8 * k + 8)) & 0x3f);
                if (x >> 50) % 8 == 0 {
                    q.push(t, EvKind::LinkDone);
                } else {
                    q.push_timer(t, step);
                }
                reference.push((t, seq));
                seq += 1;
            }
            if let Some(e) = q.pop() {
                let i = (0..reference.len()).min_by_key(|&i| reference[i]).unwrap();
                assert_eq!((e.time, e.seq), reference.swap_remove(i));
                now = e.time;
            }
        }
        while let Some(e) = q.pop() {
            let i = (0..reference.len()).min_by_key(|&i| reference[i]).unwrap();
            assert_eq!((e.time, e.seq), reference.swap_remove(i));
        }
        assert!(reference.is_empty());
    }

    #[test]
    fn same_time_events_pop_in_scheduling_order() {
        // STYLE.md §3: ties resolve by insertion sequence, never arbitrarily.
        let mut q = EventQueue::with_capacity(8);
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
