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
#[derive(Debug, Default)]
pub(crate) struct EventQueue {
    heap: BinaryHeap<Event>,
    timers: BinaryHeap<Event>,
    next_seq: u64,
}

impl EventQueue {
    /// An empty queue with room for `cap` events.
    pub fn with_capacity(cap: usize) -> Self {
        EventQueue { heap: BinaryHeap::with_capacity(cap), timers: BinaryHeap::with_capacity(cap), next_seq: 0 }
    }

    /// Schedule `kind` at `time` (ns).
    #[inline]
    pub fn push(&mut self, time: u64, kind: EvKind) {
        let seq = self.next_seq;
        self.next_seq += 1;
        let ev = Event { time, seq, kind };
        if matches!(kind, EvKind::Timer(_)) {
            self.timers.push(ev);
        } else {
            self.heap.push(ev);
        }
    }

    /// The earliest event, removed.
    #[inline]
    pub fn pop(&mut self) -> Option<Event> {
        match (self.heap.peek(), self.timers.peek()) {
            // `Event`'s order is reversed: the earlier event compares greater.
            (Some(a), Some(b)) if b > a => self.timers.pop(),
            (Some(_), _) => self.heap.pop(),
            (None, _) => self.timers.pop(),
        }
    }

    /// Events scheduled.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.heap.len() + self.timers.len()
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
