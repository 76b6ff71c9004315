//! DropTail: a FIFO that refuses arrivals once full, with the limit in packets
//! (Linux `pfifo`) or bytes (`bfifo`).

use std::collections::VecDeque;

use crate::{ConfigError, DropReason, MarkReason, Packet, Qdisc, SimRng, SimTime, Verdict};

/// The buffer limit of a FIFO.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    /// At most this many packets queued (ns-2/ns-3 and Linux `pfifo` semantics).
    Packets(u64),
    /// At most this many bytes queued (Linux `bfifo`): an arrival that would exceed
    /// the limit is dropped.
    Bytes(u64),
}

/// DropTail configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DropTailConfig {
    /// Buffer size.
    pub limit: Limit,
}

impl DropTailConfig {
    /// Check the limit: a zero buffer would drop every packet.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let (v, ok) = match self.limit {
            Limit::Packets(n) => (n, n >= 1),
            Limit::Bytes(n) => (n, n >= 1),
        };
        if ok {
            Ok(())
        } else {
            Err(ConfigError {
                qdisc: "droptail",
                param: "limit",
                value: v.to_string(),
                allowed: "at least 1 packet or 1 byte",
            })
        }
    }
}

/// A tail-drop FIFO.
#[derive(Debug)]
pub struct DropTail<P> {
    limit: Limit,
    queue: VecDeque<P>,
    bytes: u64,
}

impl<P: Packet> DropTail<P> {
    /// Build a FIFO; fails on a zero limit.
    pub fn new(cfg: DropTailConfig) -> Result<Self, ConfigError> {
        cfg.validate()?;
        Ok(DropTail { limit: cfg.limit, queue: VecDeque::new(), bytes: 0 })
    }

    /// Would `bytes` more fit under the limit?
    pub fn fits(&self, bytes: u64) -> bool {
        match self.limit {
            Limit::Packets(n) => (self.queue.len() as u64) < n,
            Limit::Bytes(n) => self.bytes + bytes <= n,
        }
    }

    /// Append without checking the limit (for disciplines built on a FIFO that
    /// already decided to admit).
    pub fn push_back(&mut self, pkt: P) {
        self.bytes += pkt.meta().bytes as u64;
        self.queue.push_back(pkt);
    }

    /// Remove the head packet.
    pub fn pop_front(&mut self) -> Option<P> {
        let p = self.queue.pop_front()?;
        self.bytes -= p.meta().bytes as u64;
        Some(p)
    }

    /// Queued packets, head first.
    pub fn iter(&self) -> impl Iterator<Item = &P> {
        self.queue.iter()
    }

    /// Remove the packet at `index` (0 = head), for disciplines that drop from the
    /// middle of the queue (CHOKe).
    pub fn remove(&mut self, index: usize) -> Option<P> {
        let p = self.queue.remove(index)?;
        self.bytes -= p.meta().bytes as u64;
        Some(p)
    }

    /// The packet at `index` (0 = head).
    pub fn get(&self, index: usize) -> Option<&P> {
        self.queue.get(index)
    }
}

impl<P: Packet> Qdisc<P> for DropTail<P> {
    fn name(&self) -> &'static str {
        "droptail"
    }

    fn enqueue(
        &mut self,
        _now: SimTime,
        pkt: P,
        _rng: &mut SimRng,
        dropped: &mut Vec<(P, DropReason)>,
    ) -> Verdict {
        if self.fits(pkt.meta().bytes as u64) {
            self.push_back(pkt);
            Verdict::Admit
        } else {
            dropped.push((pkt, DropReason::Overflow));
            Verdict::Drop(DropReason::Overflow)
        }
    }

    fn dequeue(
        &mut self,
        _now: SimTime,
        _rng: &mut SimRng,
        _dropped: &mut Vec<(P, DropReason)>,
        _marked: &mut Vec<MarkReason>,
    ) -> Option<P> {
        self.pop_front()
    }

    fn len_bytes(&self) -> u64 {
        self.bytes
    }

    fn len_packets(&self) -> usize {
        self.queue.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::TestPacket;
    use crate::Accounted;

    fn rng() -> SimRng {
        netunits::rng_stream(1, 0)
    }

    #[test]
    fn packet_limit_admits_exactly_n_then_drops() {
        let mut q = Accounted::new(DropTail::new(DropTailConfig { limit: Limit::Packets(3) }).unwrap());
        let mut r = rng();
        let mut dropped = Vec::new();
        for i in 0..5 {
            q.enqueue(SimTime::ZERO, TestPacket::new(i, 0, 1500), &mut r, &mut dropped);
        }
        assert_eq!(q.len_packets::<TestPacket>(), 3);
        assert_eq!(dropped.iter().map(|(p, _)| p.id).collect::<Vec<_>>(), vec![3, 4]);
        assert_eq!(q.counters().drops[DropReason::Overflow as usize], 2);
        assert_eq!(q.counters().drop_bytes[0], 3000);
    }

    #[test]
    fn byte_limit_drops_the_packet_that_would_overflow() {
        let mut q = DropTail::new(DropTailConfig { limit: Limit::Bytes(3000) }).unwrap();
        let mut r = rng();
        let mut dropped = Vec::new();
        assert_eq!(q.enqueue(SimTime::ZERO, TestPacket::new(0, 0, 1500), &mut r, &mut dropped), Verdict::Admit);
        assert_eq!(q.enqueue(SimTime::ZERO, TestPacket::new(1, 0, 1500), &mut r, &mut dropped), Verdict::Admit);
        assert_eq!(
            q.enqueue(SimTime::ZERO, TestPacket::new(2, 0, 1), &mut r, &mut dropped),
            Verdict::Drop(DropReason::Overflow)
        );
        assert_eq!(q.len_bytes(), 3000);
    }

    #[test]
    fn fifo_order_and_byte_count_are_kept() {
        let mut q = DropTail::new(DropTailConfig { limit: Limit::Packets(10) }).unwrap();
        let mut r = rng();
        let (mut d, mut m) = (Vec::new(), Vec::new());
        for i in 0..4 {
            q.enqueue(SimTime::ZERO, TestPacket::new(i, 0, 100 + i as u32), &mut r, &mut d);
        }
        let ids: Vec<u64> = std::iter::from_fn(|| q.dequeue(SimTime::ZERO, &mut r, &mut d, &mut m))
            .map(|p| p.id)
            .collect();
        assert_eq!(ids, vec![0, 1, 2, 3]);
        assert_eq!(q.len_bytes(), 0);
    }

    #[test]
    fn zero_limit_is_refused_with_the_allowed_range() {
        let e = DropTail::<TestPacket>::new(DropTailConfig { limit: Limit::Packets(0) }).unwrap_err();
        assert!(e.to_string().contains("at least 1"));
    }
}
