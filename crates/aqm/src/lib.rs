//! Queue disciplines for the bottleneck, shared by the simulator (`netsim`) and the
//! live link emulator (`linkem`).
//!
//! Read this first:
//! - A discipline implements [`Qdisc`]: it decides what to admit, mark or drop and
//!   in what order packets leave. It owns the queued packets (CHOKe must pick a
//!   victim among them, FQ-CoDel keeps several queues).
//! - [`Accounted`] wraps any discipline and counts every drop and mark by reason
//!   (STYLE.md §10: disciplines decide, the wrapper counts). Those counters become
//!   the bottleneck samples of a `Trace`.
//! - Every entry point takes `now`; nothing here reads a clock, and every random
//!   draw comes from the `&mut SimRng` the owner hands in (STYLE.md §1, §9). No
//!   discipline knows whether the simulator or the emulator drives it.
//! - [`REGISTRY`] is the closed set of disciplines and [`build`] the one place that
//!   turns a scenario name into a discipline; an unknown name's error lists the
//!   allowed names (STYLE.md §7).
//! - Parameter units (after `fairlab.scenario` has parsed the human strings): durations
//!   are integer **nanoseconds**, probabilities and weights are floats, RED-style
//!   thresholds are in packets (of `mean_packet_bytes` in byte mode), sizes in bytes.
//!   `docs/qdiscs.md` lists every parameter, its default and where the default comes
//!   from.
//!
//! Map: `droptail` (FIFO, reused as the queue of most others), `red` (RED and
//! Adaptive RED; its averaging core is reused by `choke`), `blue` (its `P_b` core is
//! reused by `zrtt`, `mrtt`, `prto`), `codel` (its dequeue state machine is reused
//! per flow by `fq_codel`), `pie`, `csfq`.
#![deny(unsafe_code)]
#![warn(missing_docs)]

mod any;
mod blue;
mod choke;
mod codel;
mod csfq;
mod droptail;
mod fq_codel;
mod mrtt;
mod pie;
mod prto;
mod red;
mod zrtt;

pub use any::AnyQdisc;
pub use blue::{Blue, BlueConfig};
pub use choke::{Choke, ChokeConfig};
pub use codel::{Codel, CodelConfig};
pub use csfq::{Csfq, CsfqConfig};
pub use droptail::{DropTail, DropTailConfig, Limit};
pub use fq_codel::{FqCodel, FqCodelConfig};
pub use mrtt::{Mrtt, MrttConfig, MrttLaw};
pub use pie::{Pie, PieConfig};
pub use prto::{Prto, PrtoConfig, PrtoLaw};
pub use red::{Red, RedConfig};
pub use zrtt::{FlowRttView, MarkingLaw, RttAware, RttAwareConfig, RttSource, Zrtt, ZrttConfig, ZrttLaw};
pub use netunits::{SimDuration, SimRng, SimTime};

/// What a discipline needs to know about a packet. The packet type itself belongs
/// to the owner (simulator packet, emulator buffer) and implements [`Packet`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PacketMeta {
    /// Flow id, dense from 0 in the simulator; a hash of the 5-tuple in the emulator.
    pub flow: u32,
    /// Size on the wire in bytes (IP packet).
    pub bytes: u32,
    /// ECT(0)/ECT(1) set: an AQM may mark it instead of dropping (RFC 3168 §5).
    pub ecn_capable: bool,
    /// Sender's base-RTT hint in microseconds (ZRTT's 16-bit header field, seed
    /// 002); `None` when the sender carries none.
    pub rtt_hint_us: Option<u32>,
    /// A pure ACK or other control packet, not data.
    pub is_ack: bool,
    /// This flow's RTT in microseconds as estimated passively by whoever forwards the
    /// packet (the engine, or the link emulator from TCP timestamp echoes), for ZRTT,
    /// MRTT and PRTO with `rtt_source = "passive"`; `None` when no estimate exists.
    pub passive_rtt_us: Option<u32>,
}

/// A packet as a queue discipline sees it.
pub trait Packet {
    /// Header facts the discipline decides on.
    fn meta(&self) -> &PacketMeta;
    /// Set the ECN Congestion Experienced codepoint (RFC 3168 §5).
    fn mark_ce(&mut self);
}

/// Why a packet was dropped. Counted per reason in [`Counters`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DropReason {
    /// The buffer was full (tail drop, or a hard limit of any AQM).
    Overflow,
    /// An early, probabilistic drop (RED, BLUE, PIE, ZRTT, MRTT, PRTO on a non-ECN flow).
    Early,
    /// CHOKe: the arriving packet matched a randomly chosen queued packet's flow.
    ChokeMatch,
    /// Dropped at dequeue because it waited too long (CoDel, FQ-CoDel).
    Sojourn,
    /// Dropped against an estimated fair share (CSFQ).
    FairShare,
}

/// Why a packet was ECN-marked instead of dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MarkReason {
    /// An early, probabilistic mark (RED, BLUE, PIE, ZRTT, MRTT, PRTO).
    Early,
    /// Marked at dequeue for sojourn time (CoDel, FQ-CoDel).
    Sojourn,
}

/// What happened to a packet offered to [`Qdisc::enqueue`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Queued unchanged.
    Admit,
    /// Queued with CE set.
    Mark(MarkReason),
    /// Not queued. The packet is returned in the `dropped` sink with this reason.
    Drop(DropReason),
}

/// A queue discipline. `P` is the owner's packet type.
pub trait Qdisc<P: Packet> {
    /// Scenario name of the discipline (`droptail`, `red`, ...).
    fn name(&self) -> &'static str;

    /// Offer a packet at `now`. Every packet the call drops — the arriving one and
    /// any queued victims (CHOKe) — is pushed onto `dropped` with its reason, so the
    /// owner never loses track of a packet (byte conservation).
    fn enqueue(
        &mut self,
        now: SimTime,
        pkt: P,
        rng: &mut SimRng,
        dropped: &mut Vec<(P, DropReason)>,
    ) -> Verdict;

    /// Take the next packet to transmit at `now`, if any. Packets dropped or marked
    /// on the way out (CoDel) go to `dropped` / `marked`.
    fn dequeue(
        &mut self,
        now: SimTime,
        rng: &mut SimRng,
        dropped: &mut Vec<(P, DropReason)>,
        marked: &mut Vec<MarkReason>,
    ) -> Option<P>;

    /// Bytes queued now.
    fn len_bytes(&self) -> u64;
    /// Packets queued now.
    fn len_packets(&self) -> usize;
}

/// Drop and mark counters by reason, cumulative since the queue was built.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Packets admitted (including marked ones).
    pub enqueued_packets: u64,
    /// Bytes admitted.
    pub enqueued_bytes: u64,
    /// Packets handed out by `dequeue`.
    pub dequeued_packets: u64,
    /// Bytes handed out by `dequeue`.
    pub dequeued_bytes: u64,
    /// Dropped packets, indexed by [`DropReason`] in declaration order.
    pub drops: [u64; 5],
    /// Dropped bytes, same indexing.
    pub drop_bytes: [u64; 5],
    /// Marked packets, indexed by [`MarkReason`] in declaration order.
    pub marks: [u64; 2],
}

impl Counters {
    /// Total packets dropped for any reason.
    pub fn total_drops(&self) -> u64 {
        self.drops.iter().sum()
    }
    /// Total packets marked for any reason.
    pub fn total_marks(&self) -> u64 {
        self.marks.iter().sum()
    }
}

impl DropReason {
    /// All reasons, in the index order used by [`Counters::drops`].
    pub const ALL: [DropReason; 5] = [
        DropReason::Overflow,
        DropReason::Early,
        DropReason::ChokeMatch,
        DropReason::Sojourn,
        DropReason::FairShare,
    ];
    /// Stable lower-case name used in traces and reports.
    pub fn name(self) -> &'static str {
        match self {
            DropReason::Overflow => "overflow",
            DropReason::Early => "early",
            DropReason::ChokeMatch => "choke_match",
            DropReason::Sojourn => "sojourn",
            DropReason::FairShare => "fair_share",
        }
    }
    fn index(self) -> usize {
        self as usize
    }
}

impl MarkReason {
    /// All reasons, in the index order used by [`Counters::marks`].
    pub const ALL: [MarkReason; 2] = [MarkReason::Early, MarkReason::Sojourn];
    /// Stable lower-case name used in traces and reports.
    pub fn name(self) -> &'static str {
        match self {
            MarkReason::Early => "early",
            MarkReason::Sojourn => "sojourn",
        }
    }
    fn index(self) -> usize {
        self as usize
    }
}

/// Any discipline plus its counters. Owners talk to this, never to a bare discipline.
#[derive(Debug)]
pub struct Accounted<Q> {
    inner: Q,
    counters: Counters,
    drop_scratch_len: usize,
}

impl<Q> Accounted<Q> {
    /// Wrap a discipline with zeroed counters.
    pub fn new(inner: Q) -> Self {
        Accounted { inner, counters: Counters::default(), drop_scratch_len: 0 }
    }
    /// Counters so far.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }
    /// The wrapped discipline.
    pub fn inner(&self) -> &Q {
        &self.inner
    }
}

impl<Q> Accounted<Q> {
    fn count_new_drops<P: Packet>(&mut self, dropped: &[(P, DropReason)]) {
        for (p, r) in &dropped[self.drop_scratch_len..] {
            self.counters.drops[r.index()] += 1;
            self.counters.drop_bytes[r.index()] += p.meta().bytes as u64;
        }
    }

    /// Offer a packet; see [`Qdisc::enqueue`].
    #[inline(always)]
    pub fn enqueue<P: Packet>(
        &mut self,
        now: SimTime,
        pkt: P,
        rng: &mut SimRng,
        dropped: &mut Vec<(P, DropReason)>,
    ) -> Verdict
    where
        Q: Qdisc<P>,
    {
        let bytes = pkt.meta().bytes as u64;
        self.drop_scratch_len = dropped.len();
        let v = self.inner.enqueue(now, pkt, rng, dropped);
        match v {
            Verdict::Admit | Verdict::Mark(_) => {
                self.counters.enqueued_packets += 1;
                self.counters.enqueued_bytes += bytes;
                if let Verdict::Mark(r) = v {
                    self.counters.marks[r.index()] += 1;
                }
            }
            Verdict::Drop(_) => {}
        }
        self.count_new_drops(dropped);
        v
    }

    /// Take the next packet; see [`Qdisc::dequeue`].
    #[inline]
    pub fn dequeue<P: Packet>(
        &mut self,
        now: SimTime,
        rng: &mut SimRng,
        dropped: &mut Vec<(P, DropReason)>,
        marked: &mut Vec<MarkReason>,
    ) -> Option<P>
    where
        Q: Qdisc<P>,
    {
        self.drop_scratch_len = dropped.len();
        let marks_before = marked.len();
        let out = self.inner.dequeue(now, rng, dropped, marked);
        if let Some(p) = &out {
            self.counters.dequeued_packets += 1;
            self.counters.dequeued_bytes += p.meta().bytes as u64;
        }
        for r in &marked[marks_before..] {
            self.counters.marks[r.index()] += 1;
        }
        self.count_new_drops(dropped);
        out
    }

    /// Bytes queued now.
    pub fn len_bytes<P: Packet>(&self) -> u64
    where
        Q: Qdisc<P>,
    {
        self.inner.len_bytes()
    }

    /// Packets queued now.
    pub fn len_packets<P: Packet>(&self) -> usize
    where
        Q: Qdisc<P>,
    {
        self.inner.len_packets()
    }
}

/// A configuration value a discipline refused, with the allowed range.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("qdisc {qdisc}: parameter `{param}` = {value} is not allowed; {allowed}")]
pub struct ConfigError {
    /// Discipline name.
    pub qdisc: &'static str,
    /// Parameter name as written in a scenario file.
    pub param: &'static str,
    /// The offending value, formatted.
    pub value: String,
    /// What would be accepted.
    pub allowed: &'static str,
}

#[cfg(test)]
pub(crate) mod testing {
    //! A minimal packet type for discipline unit tests.
    use super::*;

    #[derive(Clone, Debug, PartialEq)]
    pub struct TestPacket {
        pub meta: PacketMeta,
        pub ce: bool,
        pub id: u64,
    }

    impl TestPacket {
        pub fn new(id: u64, flow: u32, bytes: u32) -> Self {
            TestPacket { meta: PacketMeta { flow, bytes, ..Default::default() }, ce: false, id }
        }
    }

    impl Packet for TestPacket {
        fn meta(&self) -> &PacketMeta {
            &self.meta
        }
        fn mark_ce(&mut self) {
            self.ce = true;
        }
    }

    /// What one flow got from a [`run_link`] run.
    #[derive(Clone, Debug, Default)]
    pub struct FlowStats {
        pub offered: u64,
        pub delivered: u64,
        pub delivered_bytes: u64,
        pub dropped: u64,
        pub marked: u64,
        pub sojourns: Vec<SimDuration>,
    }

    impl FlowStats {
        pub fn loss_rate(&self) -> f64 {
            self.dropped as f64 / self.offered.max(1) as f64
        }
        pub fn max_sojourn(&self) -> SimDuration {
            self.sojourns.iter().copied().max().unwrap_or_default()
        }
        pub fn mean_sojourn_ms(&self) -> f64 {
            let n = self.sojourns.len().max(1) as f64;
            self.sojourns.iter().map(|d| d.as_secs_f64() * 1e3).sum::<f64>() / n
        }
    }

    /// A fake link: packets arrive at the given instants and leave one at a time at
    /// `rate_bps`. When a transmission ends the link asks for the next packet even if
    /// the queue looks empty (that `None` is the "link idle" event BLUE listens to).
    /// Returns per-flow results indexed by flow id.
    pub fn run_link<Q: Qdisc<TestPacket> + ?Sized>(
        q: &mut Q,
        mut arrivals: Vec<(SimTime, TestPacket)>,
        rate_bps: u64,
        rng: &mut SimRng,
    ) -> Vec<FlowStats> {
        arrivals.sort_by_key(|(t, p)| (*t, p.id));
        let flows = arrivals.iter().map(|(_, p)| p.meta.flow as usize + 1).max().unwrap_or(0);
        let mut stats = vec![FlowStats::default(); flows];
        let mut born = std::collections::HashMap::new();
        let rate = netunits::Bandwidth::from_bps(rate_bps);
        let (mut dropped, mut marked) = (Vec::new(), Vec::new());
        let mut next_tx: Option<SimTime> = None;
        let mut it = arrivals.into_iter().peekable();
        loop {
            let ta = it.peek().map(|(t, _)| *t);
            match (next_tx, ta) {
                (Some(tx), _) if ta.is_none_or(|ta| tx <= ta) => {
                    match q.dequeue(tx, rng, &mut dropped, &mut marked) {
                        Some(p) => {
                            let st = &mut stats[p.meta.flow as usize];
                            st.delivered += 1;
                            st.delivered_bytes += u64::from(p.meta.bytes);
                            st.marked += u64::from(p.ce);
                            st.sojourns.push(tx - born[&p.id]);
                            next_tx = Some(tx + rate.tx_time(u64::from(p.meta.bytes)));
                        }
                        None => next_tx = None,
                    }
                }
                (_, Some(t)) => {
                    let (_, p) = it.next().unwrap();
                    stats[p.meta.flow as usize].offered += 1;
                    born.insert(p.id, t);
                    q.enqueue(t, p, rng, &mut dropped);
                    if next_tx.is_none() {
                        next_tx = Some(t);
                    }
                }
                (None, None) => break,
                (Some(_), None) => unreachable!(),
            }
            for (p, _) in dropped.drain(..) {
                stats[p.meta.flow as usize].dropped += 1;
            }
        }
        stats
    }

    /// Constant-rate arrivals of `bytes`-byte packets for `flow` from `start` to
    /// `end`, one every `gap`, ids from `first_id`.
    pub fn cbr(flow: u32, bytes: u32, start: SimTime, end: SimTime, gap: SimDuration, first_id: u64) -> Vec<(SimTime, TestPacket)> {
        let mut v = Vec::new();
        let mut t = start;
        let mut id = first_id;
        while t < end {
            v.push((t, TestPacket::new(id, flow, bytes)));
            id += 1;
            t += gap;
        }
        v
    }
}

/// A boxed discipline is itself a discipline, so owners can hold
/// `Accounted<Box<dyn Qdisc<P>>>` built from the name table.
impl<P: Packet> Qdisc<P> for Box<dyn Qdisc<P>> {
    fn name(&self) -> &'static str {
        (**self).name()
    }
    fn enqueue(&mut self, now: SimTime, pkt: P, rng: &mut SimRng, dropped: &mut Vec<(P, DropReason)>) -> Verdict {
        (**self).enqueue(now, pkt, rng, dropped)
    }
    fn dequeue(
        &mut self,
        now: SimTime,
        rng: &mut SimRng,
        dropped: &mut Vec<(P, DropReason)>,
        marked: &mut Vec<MarkReason>,
    ) -> Option<P> {
        (**self).dequeue(now, rng, dropped, marked)
    }
    fn len_bytes(&self) -> u64 {
        (**self).len_bytes()
    }
    fn len_packets(&self) -> usize {
        (**self).len_packets()
    }
}

/// Parameters of one discipline as the scenario's `[bottleneck.params]` table
/// (already unit-parsed by `fairlab.scenario`): a JSON object.
pub type Params = serde_json::Map<String, serde_json::Value>;

/// What every discipline is built with besides its own parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct QdiscContext {
    /// The scenario's buffer size (the hard limit of every discipline).
    pub limit: Limit,
    /// Bottleneck rate in bits/s (RED's idle-time estimate, PIE's drain rate).
    pub rate_bps: u64,
    /// Typical packet size in bytes (RED's `mean_pktsize`).
    pub mean_packet_bytes: u32,
    /// The scenario's reference RTT (the largest flow RTT unless set), for defaults
    /// that scale with it.
    pub reference_rtt: SimDuration,
}

impl QdiscContext {
    /// The buffer in packets: a byte limit counts packets of `mean_packet_bytes`
    /// (at least 1), for defaults that are stated in packets (RED thresholds, BLUE's
    /// `q_lim`).
    pub fn limit_packets(&self) -> u64 {
        match self.limit {
            Limit::Packets(n) => n,
            Limit::Bytes(b) => (b / u64::from(self.mean_packet_bytes.max(1))).max(1),
        }
    }
}

/// A queued packet with the instant it arrived, for disciplines that measure
/// sojourn time (CoDel, FQ-CoDel, PIE). It is a [`Packet`] itself, so those
/// disciplines reuse [`DropTail`] as their FIFO.
#[derive(Debug)]
pub(crate) struct Stamped<P> {
    pub(crate) pkt: P,
    pub(crate) at: SimTime,
}

impl<P: Packet> Packet for Stamped<P> {
    fn meta(&self) -> &PacketMeta {
        self.pkt.meta()
    }
    fn mark_ce(&mut self) {
        self.pkt.mark_ce()
    }
}

/// A FIFO without a limit of its own (the discipline around it enforces one).
pub(crate) fn unbounded_fifo<P: Packet>() -> DropTail<P> {
    DropTail::new(DropTailConfig { limit: Limit::Packets(u64::MAX) }).expect("u64::MAX is a valid limit")
}

/// One row of the name table.
#[derive(Clone, Copy)]
pub struct QdiscEntry {
    /// Scenario name.
    pub name: &'static str,
    /// One line for `fairlab list qdiscs` and the docs.
    pub summary: &'static str,
    /// Parameters with their defaults, one line.
    pub params: &'static str,
}

impl std::fmt::Debug for QdiscEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QdiscEntry").field("name", &self.name).finish()
    }
}

// Discipline modules: one file each. Add `mod x;` above (with the `pub use`), one
// `QdiscEntry` here and one arm in `build`.
/// The closed name table (STYLE.md §7).
pub static REGISTRY: &[QdiscEntry] = &[
    QdiscEntry {
        name: "droptail",
        summary: "FIFO, drops arrivals when the buffer is full (packets or bytes)",
        params: "(none: the buffer is the scenario's `buffer`)",
    },
    QdiscEntry {
        name: "red",
        summary: "RED (Floyd & Jacobson 1993): EWMA average queue, early drop/mark between thresholds; gentle, byte mode, Adaptive RED",
        params: "w_q=0.002 (adaptive: 1-exp(-1/C)), min_th=max_th/3, max_th=buffer/4 [packets], max_p=0.1, gentle=false (adaptive: true), byte_mode=false, ecn=false, adaptive=false, adapt_interval=0.5s",
    },
    QdiscEntry {
        name: "choke",
        summary: "CHOKe (Pan, Prabhakar, Psounis 2000): RED plus drop-both when the arrival matches a random queued packet's flow",
        params: "same as red: w_q=0.002, min_th=max_th/3, max_th=buffer/4 [packets], max_p=0.1, gentle=false, byte_mode=false, ecn=false, adaptive=false, adapt_interval=0.5s",
    },
    QdiscEntry {
        name: "blue",
        summary: "BLUE (Feng, Kandlur, Saha, Shin 2002): marking probability raised on loss, lowered on link idle",
        params: "freeze_time=50ms, d1=0.02, d2=0.002, q_lim=100 packets (capped at the buffer), ecn=true [seed 002]",
    },
    QdiscEntry {
        name: "codel",
        summary: "CoDel (RFC 8289): drops or marks at dequeue once sojourn time stays above target for an interval",
        params: "target=5ms, interval=100ms, ecn=false [RFC 8289 §4.3-4.4]",
    },
    QdiscEntry {
        name: "fq_codel",
        summary: "FQ-CoDel (RFC 8290): hashed flow queues, DRR with new/old lists, CoDel per queue, drop from the fattest queue",
        params: "flows=1024, quantum=1514 bytes, target=5ms, interval=100ms, ecn=true [RFC 8290 §5]",
    },
    QdiscEntry {
        name: "pie",
        summary: "PIE (RFC 8033): random early drop with a PI controller on queue delay (from timestamps), auto-tuned gains, burst allowance",
        params: "target=15ms, t_update=15ms, alpha=0.125, beta=1.25, max_burst=150ms, ecn=false, mark_ecn_th=0.1 [RFC 8033 §4, §5.1]",
    },
    QdiscEntry {
        name: "zrtt",
        summary: "ZRTT (Zhang & Ye, seed 002): BLUE with per-flow P_i = (RTT_savg/RTT_i)^alpha * P_b, alpha adapted to P_b^avg",
        params: "BLUE's (freeze_time=50ms, d1=0.02, d2=0.002, q_lim=100, ecn=true) + rtt_source=\"hint\"|\"passive\", w_rtt=0.1, w_p=0.1, active_window=max(1s, 2*reference_rtt), p_th=0.05, alpha_max=2.0, p_switch=0.02",
    },
    QdiscEntry {
        name: "mrtt",
        summary: "MRTT (after Matsuda et al. 2002, as seed 002 re-implements it): BLUE with P_i = (RTT_savg/RTT_i)^alpha * P_b, fixed alpha",
        params: "BLUE's and ZRTT's RTT parameters (rtt_source, w_rtt, w_p, active_window) + alpha=2.0",
    },
    QdiscEntry {
        name: "prto",
        summary: "PRTO (after Habib et al. 2002, as seed 002 re-implements it): BLUE with P_i equalising Padhye-model throughput (RTT and RTO aware)",
        params: "BLUE's and ZRTT's RTT parameters (rtt_source, w_rtt, w_p, active_window) + b=1, rto_min=200ms",
    },
    QdiscEntry {
        name: "csfq",
        summary: "CSFQ (Stoica, Shenker, Zhang 1998), edge and core in one node: per-flow rate estimate, fair share alpha, drop with max(0, 1 - alpha/r)",
        params: "k=100ms, k_alpha=200ms, k_c=200ms, overflow_decrease=0.01 (capacity = the scenario's rate)",
    },
    // -- entries --
];

/// Comma-separated names of every discipline.
pub fn known_names() -> String {
    REGISTRY.iter().map(|e| e.name).collect::<Vec<_>>().join(", ")
}

/// A qdisc name or parameter the scenario got wrong.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum BuildError {
    /// Not in the name table.
    #[error("unknown qdisc `{name}`; known: {known}")]
    UnknownName {
        /// What the scenario said.
        name: String,
        /// Comma-separated allowed names.
        known: String,
    },
    /// The scenario gave a parameter this discipline does not have.
    #[error("qdisc {qdisc} has no parameter `{param}`; its parameters: {known}")]
    UnknownParam {
        /// Discipline name.
        qdisc: &'static str,
        /// The key the scenario gave.
        param: String,
        /// Comma-separated parameters the discipline reads.
        known: String,
    },
    /// A parameter was refused.
    #[error(transparent)]
    Config(#[from] ConfigError),
}

/// Build the discipline `name` for packets of type `P`, boxed.
pub fn build<P: Packet + 'static>(name: &str, params: &Params, ctx: &QdiscContext) -> Result<Box<dyn Qdisc<P>>, BuildError> {
    Ok(Box::new(build_any::<P>(name, params, ctx)?))
}

/// Build the discipline `name` for packets of type `P`, as an [`AnyQdisc`] (no
/// virtual call per packet).
pub fn build_any<P: Packet>(name: &str, params: &Params, ctx: &QdiscContext) -> Result<AnyQdisc<P>, BuildError> {
    let mut r = ParamReader::new(static_name(name)?, params);
    let q = match name {
        "droptail" => AnyQdisc::DropTail(DropTail::new(DropTailConfig { limit: ctx.limit })?),
        "red" => AnyQdisc::Red(Red::new(RedConfig::from_params(&mut r, ctx)?)?),
        "choke" => AnyQdisc::Choke(Choke::new(ChokeConfig::from_params(&mut r, ctx)?)?),
        "blue" => AnyQdisc::Blue(Blue::new(BlueConfig::from_params(&mut r, ctx)?)?),
        "codel" => AnyQdisc::Codel(Codel::new(CodelConfig::from_params(&mut r, ctx)?)?),
        "fq_codel" => AnyQdisc::FqCodel(FqCodel::new(FqCodelConfig::from_params(&mut r, ctx)?)?),
        "pie" => AnyQdisc::Pie(Pie::new(PieConfig::from_params(&mut r, ctx)?)?),
        "zrtt" => AnyQdisc::Zrtt(Zrtt::from_config(ZrttConfig::from_params(&mut r, ctx)?)?),
        "mrtt" => AnyQdisc::Mrtt(Mrtt::from_config(MrttConfig::from_params(&mut r, ctx)?)?),
        "prto" => AnyQdisc::Prto(Prto::from_config(PrtoConfig::from_params(&mut r, ctx)?)?),
        "csfq" => AnyQdisc::Csfq(Csfq::new(CsfqConfig::from_params(&mut r, ctx)?)?),
        // -- build arms --
        _ => unreachable!("static_name checked the name"),
    };
    r.finish()?;
    Ok(q)
}

fn static_name(name: &str) -> Result<&'static str, BuildError> {
    REGISTRY
        .iter()
        .find(|e| e.name == name)
        .map(|e| e.name)
        .ok_or_else(|| BuildError::UnknownName { name: name.to_string(), known: known_names() })
}

/// Reads typed parameters, refusing unknown keys and out-of-range values.
#[derive(Debug)]
pub struct ParamReader<'a> {
    qdisc: &'static str,
    params: &'a Params,
    seen: Vec<&'static str>,
}

impl<'a> ParamReader<'a> {
    /// Start reading `params` for discipline `qdisc`.
    pub fn new(qdisc: &'static str, params: &'a Params) -> Self {
        ParamReader { qdisc, params, seen: Vec::new() }
    }

    /// A float in `[lo, hi]`, or `default` when absent.
    pub fn f64(&mut self, key: &'static str, default: f64, lo: f64, hi: f64, allowed: &'static str) -> Result<f64, ConfigError> {
        self.seen.push(key);
        match self.params.get(key) {
            None => Ok(default),
            Some(v) => match v.as_f64() {
                Some(x) if x.is_finite() && x >= lo && x <= hi => Ok(x),
                _ => Err(ConfigError { qdisc: self.qdisc, param: key, value: v.to_string(), allowed }),
            },
        }
    }

    /// A non-negative integer in `[lo, hi]`, or `default` when absent.
    pub fn u64(&mut self, key: &'static str, default: u64, lo: u64, hi: u64, allowed: &'static str) -> Result<u64, ConfigError> {
        self.seen.push(key);
        match self.params.get(key) {
            None => Ok(default),
            Some(v) => match v.as_u64() {
                Some(x) if x >= lo && x <= hi => Ok(x),
                _ => Err(ConfigError { qdisc: self.qdisc, param: key, value: v.to_string(), allowed }),
            },
        }
    }

    /// A boolean, or `default` when absent.
    pub fn bool(&mut self, key: &'static str, default: bool) -> Result<bool, ConfigError> {
        self.seen.push(key);
        match self.params.get(key) {
            None => Ok(default),
            Some(v) => v.as_bool().ok_or_else(|| ConfigError {
                qdisc: self.qdisc,
                param: key,
                value: v.to_string(),
                allowed: "true or false",
            }),
        }
    }

    /// A duration given as integer nanoseconds (the scenario has already parsed
    /// "5ms"), in `[lo, hi]`, or `default` when absent.
    pub fn duration(
        &mut self,
        key: &'static str,
        default: SimDuration,
        lo: SimDuration,
        hi: SimDuration,
        allowed: &'static str,
    ) -> Result<SimDuration, ConfigError> {
        let ns = self.u64(key, default.as_nanos(), lo.as_nanos(), hi.as_nanos(), allowed)?;
        Ok(SimDuration::from_nanos(ns))
    }

    /// One of a fixed set of strings, or `default` when absent.
    pub fn choice(
        &mut self,
        key: &'static str,
        default: &'static str,
        options: &'static [&'static str],
        allowed: &'static str,
    ) -> Result<&'static str, ConfigError> {
        self.seen.push(key);
        match self.params.get(key) {
            None => Ok(default),
            Some(v) => v
                .as_str()
                .and_then(|s| options.iter().copied().find(|o| *o == s))
                .ok_or_else(|| ConfigError { qdisc: self.qdisc, param: key, value: v.to_string(), allowed }),
        }
    }

    /// Name of the discipline being read (for errors raised after reading).
    pub fn qdisc(&self) -> &'static str {
        self.qdisc
    }

    /// Call last: fails if the scenario gave a key no reader asked for.
    pub fn finish(self) -> Result<(), BuildError> {
        match self.params.keys().find(|k| !self.seen.iter().any(|s| s == k)) {
            Some(k) => Err(BuildError::UnknownParam {
                qdisc: self.qdisc,
                param: k.clone(),
                known: if self.seen.is_empty() { "(none)".to_string() } else { self.seen.join(", ") },
            }),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod registry_tests {
    //! Invariants every discipline in [`REGISTRY`] must keep, checked through `build`.
    use super::testing::TestPacket;
    use super::*;
    use rand::Rng;

    fn ctx(limit: Limit) -> QdiscContext {
        QdiscContext {
            limit,
            rate_bps: 10_000_000,
            mean_packet_bytes: 1000,
            reference_rtt: SimDuration::from_millis(100),
        }
    }

    /// What one run of the random workload produced, in order.
    #[derive(Debug, PartialEq)]
    struct Log {
        verdicts: Vec<Verdict>,
        out: Vec<u64>,
        dropped: Vec<(u64, DropReason)>,
    }

    /// An overloaded random workload: 8 flows, sizes 64..=1500 B, a mix of ECN-capable
    /// packets and RTT hints, enqueue with probability 0.6 per step, time moving
    /// 0..2 ms per step; then a drain. Checks conservation and returns the log.
    fn random_run(name: &str, limit: Limit, seed: u64) -> Log {
        let c = ctx(limit);
        let mut q = Accounted::new(build::<TestPacket>(name, &Params::new(), &c).unwrap());
        let mut work = netunits::rng_stream(seed, 1);
        let mut rng = netunits::rng_stream(seed, 2);
        let (mut dropped, mut marked) = (Vec::new(), Vec::new());
        let mut log = Log { verdicts: Vec::new(), out: Vec::new(), dropped: Vec::new() };
        let (mut offered, mut offered_bytes, mut out_bytes) = (0u64, 0u64, 0u64);
        let mut t = SimTime::ZERO;
        let mut id = 0;
        for step in 0..30_000 {
            t += SimDuration::from_micros(work.random_range(0..2000));
            let enqueue = work.random_bool(0.6);
            if enqueue || step % 1000 == 999 {
                let flow = work.random_range(0..8u32);
                let mut p = TestPacket::new(id, flow, work.random_range(64..=1500));
                p.meta.ecn_capable = work.random_bool(0.5);
                p.meta.rtt_hint_us = Some(20_000 * (flow + 1));
                p.meta.passive_rtt_us = p.meta.rtt_hint_us;
                id += 1;
                offered += 1;
                offered_bytes += u64::from(p.meta.bytes);
                log.verdicts.push(q.enqueue(t, p, &mut rng, &mut dropped));
            } else if let Some(p) = q.dequeue(t, &mut rng, &mut dropped, &mut marked) {
                out_bytes += u64::from(p.meta.bytes);
                log.out.push(p.id);
            }
            for (p, r) in dropped.drain(..) {
                log.dropped.push((p.id, r));
            }
        }
        // Drain.
        let mut guard = 0;
        while q.len_packets::<TestPacket>() > 0 {
            t += SimDuration::from_millis(1);
            if let Some(p) = q.dequeue(t, &mut rng, &mut dropped, &mut marked) {
                out_bytes += u64::from(p.meta.bytes);
                log.out.push(p.id);
            }
            for (p, r) in dropped.drain(..) {
                log.dropped.push((p.id, r));
            }
            guard += 1;
            assert!(guard < 1_000_000, "{name}: drain does not end");
        }
        assert_eq!(q.len_bytes::<TestPacket>(), 0, "{name}: empty queue holds bytes");
        // Every offered packet left exactly once: sent or dropped.
        let mut seen = vec![0u8; offered as usize];
        for i in log.out.iter().chain(log.dropped.iter().map(|(i, _)| i)) {
            seen[*i as usize] += 1;
        }
        assert!(seen.iter().all(|s| *s == 1), "{name}: a packet was lost or duplicated");
        // Bytes: offered = dequeued + dropped; the wrapper's counters agree.
        let k = q.counters();
        let dropped_bytes: u64 = k.drop_bytes.iter().sum();
        assert_eq!(offered_bytes, out_bytes + dropped_bytes, "{name}: bytes not conserved");
        assert_eq!(k.dequeued_bytes, out_bytes, "{name}");
        assert_eq!(k.total_drops(), log.dropped.len() as u64, "{name}");
        assert_eq!(k.enqueued_packets + log.verdicts.iter().filter(|v| matches!(v, Verdict::Drop(_))).count() as u64, offered);
        // Admitted = dequeued + dropped after admission (+ queued, now 0).
        let arrival_drop_bytes = offered_bytes - k.enqueued_bytes;
        assert_eq!(k.enqueued_bytes, k.dequeued_bytes + (dropped_bytes - arrival_drop_bytes), "{name}: admitted bytes");
        assert!(k.total_drops() > 0, "{name}: the workload should overload the queue");
        log
    }

    #[test]
    fn every_discipline_conserves_bytes_under_a_random_workload() {
        for e in REGISTRY {
            for limit in [Limit::Packets(50), Limit::Bytes(60_000)] {
                random_run(e.name, limit, 11);
            }
        }
    }

    #[test]
    fn same_seed_same_decisions() {
        for e in REGISTRY {
            let a = random_run(e.name, Limit::Packets(50), 5);
            let b = random_run(e.name, Limit::Packets(50), 5);
            assert_eq!(a, b, "{}: two runs with one seed differ", e.name);
        }
    }

    #[test]
    fn every_entry_builds_with_defaults_and_reports_its_name() {
        for e in REGISTRY {
            let q = build::<TestPacket>(e.name, &Params::new(), &ctx(Limit::Packets(100))).unwrap();
            assert_eq!(q.name(), e.name);
            assert!(!e.params.is_empty() && !e.summary.is_empty());
        }
    }

    #[test]
    fn unknown_names_and_parameters_are_refused_with_the_allowed_values() {
        let e = build::<TestPacket>("sfq", &Params::new(), &ctx(Limit::Packets(100))).err().unwrap();
        assert!(e.to_string().contains("fq_codel") && e.to_string().contains("zrtt"), "{e}");
        for entry in REGISTRY {
            let mut p = Params::new();
            p.insert("no_such_knob".into(), serde_json::json!(1));
            let e = build::<TestPacket>(entry.name, &p, &ctx(Limit::Packets(100))).err().unwrap();
            assert!(e.to_string().contains("no_such_knob"), "{}: {e}", entry.name);
        }
    }

    #[test]
    fn every_documented_parameter_is_accepted() {
        // Each `name=` in an entry's `params` line must be a key `build` accepts with its
        // documented default.
        for e in REGISTRY {
            for key in e.params.split([',', ' ', '(', ')', '+', '[']).filter_map(|w| w.split_once('=').map(|(k, _)| k)) {
                let key = key.trim();
                if key.is_empty() {
                    continue;
                }
                let q = build::<TestPacket>(e.name, &Params::new(), &ctx(Limit::Packets(100))).unwrap();
                drop(q);
                let mut p = Params::new();
                // Any value of the right type will do: try the types in turn.
                let ok = [serde_json::json!(true), serde_json::json!(0.05), serde_json::json!(50_000_000u64), serde_json::json!("hint")]
                    .into_iter()
                    .any(|v| {
                        p.insert(key.to_string(), v);
                        match build::<TestPacket>(e.name, &p, &ctx(Limit::Packets(100))) {
                            Ok(_) => true,
                            Err(BuildError::Config(_)) => true, // known, only the value type was wrong
                            Err(_) => false,
                        }
                    });
                assert!(ok, "{}: documented parameter `{key}` is unknown to build", e.name);
            }
        }
    }
}
