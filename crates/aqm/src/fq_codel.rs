//! FQ-CoDel, flow-queue CoDel (RFC 8290).
//!
//! Read this first: arrivals are hashed by flow into one of `flows` queues (RFC
//! 8290 §4.1.1). Queues are served by deficit round robin with a byte `quantum`
//! (§4.2), in two lists: a queue that becomes active joins `new_flows`, which is
//! served before `old_flows`, so sparse flows (that never build a queue) see almost
//! no delay (§4.4 "sparse flow optimisation"). Each queue runs its own CoDel state
//! machine ([`CodelVars`] from `codel.rs`, not a copy) at dequeue (§4.3). When the
//! buffer is full, a packet is dropped from the head of the queue holding the most
//! bytes (§4.1).
//!
//! Choices where RFC 8290 leaves room:
//! - **Hash perturbation.** Queue index = `mix(flow ⊕ k) mod flows`, with `k` drawn
//!   from the `rng` handed to the *first* `enqueue` call (the constructor gets no
//!   RNG; drawing there would need an API change). So `k`, and which flows share a
//!   queue, depend only on the run's seed: same seed ⇒ same collisions. With `n`
//!   flows in 1024 queues the chance that some pair collides is about
//!   `n(n−1)/2048` (≈ 17 % for 20 flows), as on a real Linux box; a scenario that
//!   must not have collisions can raise `flows`.
//! - **Overflow.** One packet from the head of the fattest queue per excess packet
//!   (Linux drops a batch, up to half that queue, for speed; the RFC asks only for
//!   the fattest queue).
//! - **CoDel's "one MTU queued" test** uses the flow queue's own backlog and the
//!   largest packet seen so far.
//! - `ecn` defaults to on, as RFC 8290 §5.2 recommends and Linux does.

use std::collections::VecDeque;

use rand::RngCore;

use crate::codel::{CodelConfig, CodelParams, CodelVars};
use crate::{
    unbounded_fifo, ConfigError, DropReason, DropTail, Limit, MarkReason, Packet, ParamReader, Qdisc, QdiscContext, SimRng,
    SimTime, Stamped, Verdict,
};

/// FQ-CoDel configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FqCodelConfig {
    /// The CoDel every queue runs, with the total buffer over all queues as its
    /// limit (the scenario's buffer; Linux's default would be 10240 packets).
    /// Target 5 ms and interval 100 ms as CoDel (RFC 8290 §5.1); ECN marking on
    /// by default, unlike CoDel's (RFC 8290 §5.2).
    pub codel: CodelConfig,
    /// Number of flow queues. Default 1024 (RFC 8290 §5.1, Linux).
    pub flows: u32,
    /// DRR quantum in bytes. Default 1514, an Ethernet MTU plus header (RFC 8290 §5.1).
    pub quantum: u32,
}

impl FqCodelConfig {
    /// RFC 8290's defaults with the scenario's buffer.
    pub fn defaults(ctx: &QdiscContext) -> Self {
        FqCodelConfig { codel: CodelConfig { ecn: true, ..CodelConfig::defaults(ctx) }, flows: 1024, quantum: 1514 }
    }

    /// Read the scenario's parameters on top of [`FqCodelConfig::defaults`].
    pub fn from_params(r: &mut ParamReader<'_>, ctx: &QdiscContext) -> Result<Self, ConfigError> {
        let d = Self::defaults(ctx);
        let cfg = FqCodelConfig {
            flows: r.u64("flows", u64::from(d.flows), 1, 65_536, "queues, 1 to 65536")? as u32,
            quantum: r.u64("quantum", u64::from(d.quantum), 64, 1 << 20, "bytes, 64 to 1 MiB")? as u32,
            codel: CodelConfig::read_over(r, d.codel)?,
        };
        cfg.validate_as(r.qdisc())?;
        Ok(cfg)
    }

    /// Check ranges, naming `qdisc` in errors.
    pub fn validate_as(&self, qdisc: &'static str) -> Result<(), ConfigError> {
        let err = |param, value: String, allowed| Err(ConfigError { qdisc, param, value, allowed });
        if self.flows == 0 || self.flows > 65_536 {
            return err("flows", self.flows.to_string(), "queues, 1 to 65536");
        }
        if self.quantum < 64 {
            return err("quantum", self.quantum.to_string(), "bytes, 64 to 1 MiB");
        }
        self.codel.validate_as(qdisc)
    }
}

/// Which DRR list a queue is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum List {
    None,
    New,
    Old,
}

#[derive(Debug)]
struct FlowQueue<P> {
    fifo: DropTail<Stamped<P>>,
    codel: CodelVars,
    deficit: i64,
    list: List,
}

/// FQ-CoDel.
#[derive(Debug)]
pub struct FqCodel<P> {
    cfg: FqCodelConfig,
    queues: Vec<FlowQueue<P>>,
    new_flows: VecDeque<usize>,
    old_flows: VecDeque<usize>,
    /// Hash perturbation, drawn on the first enqueue.
    perturbation: Option<u64>,
    bytes: u64,
    packets: usize,
    maxpacket: u64,
}

/// A 64-bit finaliser (the multiply–xorshift mix of SplitMix64): every input bit
/// affects every output bit, so consecutive flow ids spread over the queues.
fn mix64(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

impl<P: Packet> FqCodel<P> {
    /// Build FQ-CoDel; fails on an invalid configuration.
    pub fn new(cfg: FqCodelConfig) -> Result<Self, ConfigError> {
        cfg.validate_as("fq_codel")?;
        let queues = (0..cfg.flows)
            .map(|_| FlowQueue { fifo: unbounded_fifo(), codel: CodelVars::default(), deficit: 0, list: List::None })
            .collect();
        Ok(FqCodel {
            cfg,
            queues,
            new_flows: VecDeque::new(),
            old_flows: VecDeque::new(),
            perturbation: None,
            bytes: 0,
            packets: 0,
            maxpacket: 0,
        })
    }

    /// The queue index a flow id maps to (after the first enqueue fixed the hash).
    pub fn queue_of(&self, flow: u32) -> Option<usize> {
        self.perturbation.map(|k| (mix64(u64::from(flow) ^ k) % u64::from(self.cfg.flows)) as usize)
    }

    fn over_limit(&self) -> bool {
        match self.cfg.codel.limit {
            Limit::Packets(n) => self.packets as u64 > n,
            Limit::Bytes(n) => self.bytes > n,
        }
    }

    fn params(&self) -> CodelParams {
        self.cfg.codel.params()
    }
}

impl<P: Packet> Qdisc<P> for FqCodel<P> {
    fn name(&self) -> &'static str {
        "fq_codel"
    }

    fn enqueue(&mut self, now: SimTime, pkt: P, rng: &mut SimRng, dropped: &mut Vec<(P, DropReason)>) -> Verdict {
        if self.perturbation.is_none() {
            self.perturbation = Some(rng.next_u64());
        }
        let idx = self.queue_of(pkt.meta().flow).expect("perturbation drawn above");
        let bytes = u64::from(pkt.meta().bytes);
        self.maxpacket = self.maxpacket.max(bytes);
        let q = &mut self.queues[idx];
        q.fifo.push_back(Stamped { pkt, at: now });
        if q.list == List::None {
            // RFC 8290 §4.1: a queue that becomes active joins new_flows with a full quantum.
            q.list = List::New;
            q.deficit = i64::from(self.cfg.quantum);
            self.new_flows.push_back(idx);
        }
        self.bytes += bytes;
        self.packets += 1;
        let mut arrival_dropped = false;
        while self.over_limit() {
            // RFC 8290 §4.1: drop from the head of the queue with the largest backlog.
            let fattest = (0..self.queues.len())
                .max_by_key(|&i| (self.queues[i].fifo.len_bytes(), std::cmp::Reverse(i)))
                .expect("at least one queue");
            let fq = &mut self.queues[fattest];
            arrival_dropped |= fattest == idx && fq.fifo.len_packets() == 1;
            let victim = fq.fifo.pop_front().expect("the fattest queue holds the excess");
            self.bytes -= u64::from(victim.meta().bytes);
            self.packets -= 1;
            dropped.push((victim.pkt, DropReason::Overflow));
        }
        if arrival_dropped {
            Verdict::Drop(DropReason::Overflow)
        } else {
            Verdict::Admit
        }
    }

    fn dequeue(
        &mut self,
        now: SimTime,
        _rng: &mut SimRng,
        dropped: &mut Vec<(P, DropReason)>,
        marked: &mut Vec<MarkReason>,
    ) -> Option<P> {
        let params = self.params();
        loop {
            // RFC 8290 §4.2: new_flows first, then old_flows.
            let (idx, from_new) = match (self.new_flows.front(), self.old_flows.front()) {
                (Some(&i), _) => (i, true),
                (None, Some(&i)) => (i, false),
                (None, None) => return None,
            };
            let list = if from_new { &mut self.new_flows } else { &mut self.old_flows };
            let q = &mut self.queues[idx];
            if q.deficit <= 0 {
                // Quantum used up: refill and go to the back of old_flows.
                q.deficit += i64::from(self.cfg.quantum);
                list.pop_front();
                q.list = List::Old;
                self.old_flows.push_back(idx);
                continue;
            }
            let (b0, n0) = (q.fifo.len_bytes(), q.fifo.len_packets());
            let exempt = crate::codel::Exemption { mtu: self.maxpacket, other_backlog: self.bytes - b0 };
            let out = q.codel.dequeue(&params, now, &mut q.fifo, exempt, dropped, marked);
            self.bytes -= b0 - q.fifo.len_bytes();
            self.packets -= n0 - q.fifo.len_packets();
            match out {
                Some(p) => {
                    q.deficit -= i64::from(p.meta().bytes);
                    return Some(p);
                }
                None => {
                    // Empty: a new queue moves to old_flows (so it cannot stay "new" by
                    // emptying and refilling); an old one leaves the lists (§4.2).
                    list.pop_front();
                    if from_new {
                        q.list = List::Old;
                        self.old_flows.push_back(idx);
                    } else {
                        q.list = List::None;
                    }
                }
            }
        }
    }

    fn len_bytes(&self) -> u64 {
        self.bytes
    }

    fn len_packets(&self) -> usize {
        self.packets
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::red::tests::ctx;
    use crate::testing::{cbr, run_link, TestPacket};
    use crate::Codel;
    use netunits::SimDuration;

    fn fq(limit: u64) -> FqCodel<TestPacket> {
        FqCodel::new(FqCodelConfig::defaults(&ctx(Limit::Packets(limit)))).unwrap()
    }

    #[test]
    fn a_sparse_flow_does_not_wait_behind_a_bulk_flow() {
        // 10 Mbit/s link. Flow 0 offers 1500 B every 1 ms (1.25× the link); flow 1 sends
        // 200 B every 10 ms. In FQ-CoDel flow 1's queue is always new and served
        // first, so it waits at most for the packet already on the wire:
        // 1500 B at 10 Mbit/s = 1.2 ms. Under plain CoDel it waits behind flow 0's queue.
        // (Flow 1 starts once flow 0's queue has moved to old_flows; before that, a
        // newcomer waits for the other new queue's quantum as well.)
        let end = SimTime::from_secs(10);
        let mut arr = cbr(0, 1500, SimTime::ZERO, end, SimDuration::from_millis(1), 0);
        arr.extend(cbr(1, 200, SimTime::from_micros(100_500), end, SimDuration::from_millis(10), 1_000_000));
        let mut f = fq(1000);
        let s = run_link(&mut f, arr.clone(), 10_000_000, &mut netunits::rng_stream(1, 0));
        assert_ne!(f.queue_of(0), f.queue_of(1), "this seed must not collide the two flows");
        assert_eq!(s[1].dropped, 0);
        assert!(s[1].max_sojourn() <= SimDuration::from_micros(1200), "{:?}", s[1].max_sojourn());
        assert!(s[0].mean_sojourn_ms() > 5.0, "the bulk flow keeps a standing queue: {}", s[0].mean_sojourn_ms());
        let mut c = Codel::new(CodelConfig::defaults(&ctx(Limit::Packets(1000)))).unwrap();
        let sc = run_link(&mut c, arr, 10_000_000, &mut netunits::rng_stream(1, 0));
        assert!(sc[1].mean_sojourn_ms() > 5.0, "plain CoDel shares the delay: {}", sc[1].mean_sojourn_ms());
    }

    #[test]
    fn drr_shares_bytes_not_packets() {
        // Two saturating flows, 1500 B and 500 B packets: DRR with a byte quantum
        // gives each half the link in bytes (RFC 8290 §4.2). CoDel marks (ECN) rather
        // than drops so both queues stay backlogged.
        let mut q = fq(100_000);
        let mut rng = netunits::rng_stream(2, 0);
        let (mut d, mut m) = (Vec::new(), Vec::new());
        for i in 0..3000u64 {
            let mut a = TestPacket::new(i, 0, 1500);
            let mut b = TestPacket::new(10_000 + 3 * i, 1, 500);
            a.meta.ecn_capable = true;
            b.meta.ecn_capable = true;
            q.enqueue(SimTime::ZERO, a, &mut rng, &mut d);
            q.enqueue(SimTime::ZERO, b, &mut rng, &mut d);
            for k in 1..3 {
                let mut b = TestPacket::new(10_000 + 3 * i + k, 1, 500);
                b.meta.ecn_capable = true;
                q.enqueue(SimTime::ZERO, b, &mut rng, &mut d);
            }
        }
        let mut sent = [0u64; 2];
        for _ in 0..4000 {
            let p = q.dequeue(SimTime::from_millis(1), &mut rng, &mut d, &mut m).unwrap();
            sent[p.meta.flow as usize] += u64::from(p.meta.bytes);
        }
        let share = sent[0] as f64 / (sent[0] + sent[1]) as f64;
        assert!((share - 0.5).abs() < 0.01, "byte share {share}");
    }

    #[test]
    fn overflow_drops_from_the_head_of_the_fattest_queue() {
        let mut q = fq(10);
        let mut rng = netunits::rng_stream(3, 0);
        let mut d = Vec::new();
        for i in 0..8 {
            q.enqueue(SimTime::ZERO, TestPacket::new(i, 0, 1500), &mut rng, &mut d);
        }
        for i in 8..10 {
            q.enqueue(SimTime::ZERO, TestPacket::new(i, 1, 1500), &mut rng, &mut d);
        }
        assert_ne!(q.queue_of(0), q.queue_of(1));
        let v = q.enqueue(SimTime::ZERO, TestPacket::new(10, 1, 1500), &mut rng, &mut d);
        assert_eq!(v, Verdict::Admit);
        assert_eq!(d.len(), 1);
        assert_eq!((d[0].0.id, d[0].1), (0, DropReason::Overflow));
        assert_eq!(q.len_packets(), 10);
    }

    #[test]
    fn same_seed_same_hash_different_seed_can_differ() {
        let map = |seed| {
            let mut q = fq(100);
            let mut d = Vec::new();
            q.enqueue(SimTime::ZERO, TestPacket::new(0, 0, 100), &mut netunits::rng_stream(seed, 0), &mut d);
            (0..64).map(|f| q.queue_of(f).unwrap()).collect::<Vec<_>>()
        };
        assert_eq!(map(1), map(1));
        assert_ne!(map(1), map(2));
    }
}
