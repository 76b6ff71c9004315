//! The dumbbell simulator: topology, event loop and sampling.
//!
//! Read this first. Per flow the path is
//!
//! ```text
//! sender ─(host jitter)─► access link (own rate, FIFO) ─► bottleneck queue (aqm,
//!   Accounted) ─► bottleneck link (serialisation at rate) ─► rtt/2 propagation ─►
//!   receiver ─► rtt/2 uncongested reverse path (pure delay) ─► sender
//! ```
//!
//! A flow's `rtt` is its two-way PROPAGATION delay, split equally between the two
//! directions (seed 001: netem "with the network delay split equally between the
//! forward and reverse paths"); serialisation (`Bandwidth::tx_time`, rounded up)
//! and queueing come on top.
//!
//! Every stage with a constant delay is a FIFO ring of `(arrival time, packet)`
//! that keeps ONE event in the heap, for its head: each flow's access link, and one
//! forward and one reverse propagation "pipe" per distinct one-way delay, shared by
//! all flows with that delay (arrivals leave the bottleneck, and ACKs leave the
//! receivers, in time order, so a constant delay keeps them in order). Each flow
//! has at most one timer (the endpoint reports its next wake-up; a wake-up earlier
//! than the armed one moves the timer, a later one waits until the timer fires and
//! finds nothing due). The queue therefore holds a few entries per flow and no
//! packet is ever heap-allocated on its own.
//!
//! Random streams (STYLE.md §9): the queue discipline draws from
//! `rng_stream(seed, 0)`, random loss from `rng_stream(seed, 1)`, and flow `i`'s
//! start and host jitter from `rng_stream(seed, 2^32 + i)`, its connection's own
//! random number (Linux's per-connection secrets) from `rng_stream(seed, 2^33 + i)`.

use std::collections::VecDeque;

use aqm::{Accounted, AnyQdisc, Limit, MarkReason, QdiscContext, Verdict};
use netunits::prefetch::{prefetch, prefetch_bytes};
use netunits::{rng_stream, Bandwidth, SimDuration, SimRng, SimTime};
use rand::{Rng, RngCore};

use crate::cc::{self, CcError, CcInit, ParamReader};
use crate::dccp::{DccpConfig, DccpFlow};
use crate::error::SimError;
use crate::event::{EvKind, EventQueue};
use crate::output::{AckProbe, BottleneckSamples, FlowSamples, FlowState, FlowTotals, QueueEvent, QueueTrace, RunOutput, RunTotals};
use crate::packet::{Ack, Pkt, WIRE_BYTES};
use crate::spec::{BufferSpec, ScenarioSpec, CCID2};
use crate::tcp::{TcpConfig, TcpFlow};

/// RNG component id of the queue discipline.
pub const QDISC_STREAM: u64 = 0;
/// RNG component id of the bottleneck's random loss.
pub const LOSS_STREAM: u64 = 1;
/// RNG component id of flow `i`'s jitter is `FLOW_STREAM_BASE + i`.
pub const FLOW_STREAM_BASE: u64 = 1 << 32;
/// RNG component id of flow `i`'s per-connection secret (`CcInit::connection_random`)
/// is `CONNECTION_STREAM_BASE + i`.
pub const CONNECTION_STREAM_BASE: u64 = 2 << 32;

/// From this many flows on, the event handlers prefetch the next events' flow
/// state (a few flows' state stays in cache and the extra loads would only cost).
/// Measured (alternating runs, CPU time): 64 flows ran 6 % faster without the
/// hints, 256 flows about 4 % faster with them, 1,000 flows need them.
const PREFETCH_MIN_FLOWS: usize = 100;

/// How often `progress` is called, in simulated time.
const PROGRESS_EVERY: u64 = 1_000_000_000;

#[derive(Debug)]
enum Endpoint {
    Tcp(TcpFlow),
    Dccp(DccpFlow),
}

impl Endpoint {
    #[inline]
    fn on_ack(&mut self, now: SimTime, ack: &Ack, out: &mut Vec<Pkt>) {
        match (self, ack) {
            (Endpoint::Tcp(t), Ack::Tcp(a)) => t.on_ack(now, a, out),
            (Endpoint::Dccp(d), Ack::Dccp(a)) => d.on_ack(now, a, out),
            _ => unreachable!("a flow's ACKs come from its own kind of receiver"),
        }
    }
    #[inline]
    fn on_data(&mut self, now: SimTime, p: &Pkt) -> Option<Ack> {
        match self {
            Endpoint::Tcp(t) => t.on_data(now, p).map(Ack::Tcp),
            Endpoint::Dccp(d) => d.on_data(now, p).map(Ack::Dccp),
        }
    }
    #[inline]
    fn on_timer(&mut self, now: SimTime, out: &mut Vec<Pkt>) -> Option<Ack> {
        match self {
            Endpoint::Tcp(t) => t.on_timer(now, out).map(Ack::Tcp),
            Endpoint::Dccp(d) => d.on_timer(now, out).map(Ack::Dccp),
        }
    }
    #[inline]
    fn next_wakeup(&self) -> SimTime {
        match self {
            Endpoint::Tcp(t) => t.next_wakeup(),
            Endpoint::Dccp(d) => d.next_wakeup(),
        }
    }
    /// Prefetch stage 2 for a coming ACK (the sender is in cache by now): what the
    /// sender points to.
    #[inline]
    fn prefetch_sender_heap(&self) {
        if let Endpoint::Tcp(t) = self {
            t.snd.prefetch_heap();
        }
    }
    /// The receiver's own wake-up (delayed ACK); the only deadline a data arrival
    /// can move, so arrivals need not touch the sender's state.
    #[inline]
    fn receiver_wakeup(&self) -> SimTime {
        match self {
            Endpoint::Tcp(t) => t.rcv.wakeup(),
            Endpoint::Dccp(d) => d.rcv.delack_deadline,
        }
    }
    /// The sender's own wake-up (start, RTO, pacing); the only deadline an ACK can
    /// move.
    #[inline]
    fn sender_wakeup(&self) -> SimTime {
        match self {
            Endpoint::Tcp(t) => t.snd.next_wakeup(),
            Endpoint::Dccp(d) => d.snd.next_wakeup(),
        }
    }
    fn app_bytes(&self) -> u64 {
        match self {
            Endpoint::Tcp(t) => t.rcv.app_bytes,
            Endpoint::Dccp(d) => d.rcv.app_bytes,
        }
    }
    fn retransmits(&self) -> u64 {
        match self {
            Endpoint::Tcp(t) => t.snd.retrans_segs,
            Endpoint::Dccp(_) => 0,
        }
    }
    fn finished_at(&self) -> Option<SimTime> {
        match self {
            Endpoint::Tcp(t) => t.snd.finished_at,
            Endpoint::Dccp(d) => d.snd.finished_at,
        }
    }
}

/// An endpoint on its own cache lines (a TCP flow is 512 bytes: eight whole lines
/// instead of nine partial ones).
#[derive(Debug)]
#[repr(align(64))]
struct EpSlot(Endpoint);

impl std::ops::Deref for EpSlot {
    type Target = Endpoint;
    #[inline]
    fn deref(&self) -> &Endpoint {
        &self.0
    }
}
impl std::ops::DerefMut for EpSlot {
    #[inline]
    fn deref_mut(&mut self) -> &mut Endpoint {
        &mut self.0
    }
}

/// Where an endpoint's receiver and sender lie inside its [`EpSlot`], as
/// `(offset, bytes)`: the prefetch hints for a coming arrival or ACK are issued by
/// address, because finding the parts through the enum would read the slot's
/// first line (its discriminant) — a demand miss in a many-flow run, and the
/// very stall the hint is for (9 % of a 1,000-flow run's event-loop samples sat
/// on those two reads). Taken from the run's first TCP endpoint, else its first
/// DCCP one; for a flow of the other kind the hint is merely less useful.
#[derive(Clone, Copy, Debug, Default)]
struct EpSpans {
    rcv: (usize, usize),
    snd: (usize, usize),
}

impl EpSpans {
    fn of(eps: &[EpSlot]) -> Self {
        let span = |slot: &EpSlot, part: *const u8, bytes: usize| ((part as usize).wrapping_sub(slot as *const EpSlot as usize), bytes);
        let tcp = eps.iter().find(|e| matches!(e.0, Endpoint::Tcp(_)));
        match tcp.or(eps.first()) {
            Some(slot) => match &slot.0 {
                Endpoint::Tcp(t) => EpSpans {
                    rcv: span(slot, &t.rcv as *const _ as *const u8, std::mem::size_of_val(&t.rcv)),
                    snd: span(slot, &t.snd as *const _ as *const u8, std::mem::size_of_val(&t.snd)),
                },
                Endpoint::Dccp(d) => EpSpans {
                    rcv: span(slot, &d.rcv as *const _ as *const u8, std::mem::size_of_val(&d.rcv)),
                    snd: span(slot, &d.snd as *const _ as *const u8, std::mem::size_of_val(&d.snd)),
                },
            },
            None => EpSpans::default(),
        }
    }
}

/// One flow's rarely touched facts (set-up, sampling). The per-packet state is
/// split off by access pattern so that a 1,000-flow run touches few cold cache
/// lines per packet: [`AccessLink`] (one line), [`Acct`], the dense [`InQueue`],
/// the endpoint (own `Vec`) and the dense `timer_armed` array.
#[derive(Debug)]
struct FlowSlot {
    mss: u64,
    rng: SimRng,
    start: u64,
    stop: u64,
    // sampling
    last_app: u64,
    last_retx: u64,
}

/// A flow's access link: everything `dispatch` and `on_access_out` touch, in one
/// cache line.
#[derive(Debug)]
#[repr(align(64))]
struct AccessLink {
    /// Packets on the access link: (arrival at the bottleneck, packet).
    q: VecDeque<(u64, Pkt)>,
    /// When the link finishes its last queued packet.
    free: u64,
    /// Host jitter never reorders a flow's own packets: last ready time.
    host_ready: u64,
    /// Access-link serialisation time of a full-sized packet.
    tx_full: u64,
    /// Wire bytes of a full-sized packet.
    full_wire: u32,
    /// One host-jitter draw per release rather than per packet: a sender that
    /// builds GSO packets (`tso_defer`) hands each skb to the stack whole, so the
    /// processing delay is the skb's and its segments leave back to back.
    jitter_per_release: bool,
}

/// The per-flow facts the bottleneck's service touches, 16 bytes a flow so a
/// thousand flows' worth (16 KB) stays in L1/L2: a packet leaves the queue up to
/// a buffer's worth of time after it entered, long after its flow's other state
/// left the cache.
#[derive(Clone, Copy, Debug)]
struct InQueue {
    /// Payload bytes of this flow in the bottleneck queue.
    bytes: u64,
    /// Index of this flow's forward propagation pipe.
    fwd_pipe: u32,
}

/// The per-flow counters the sending and receiving paths touch, kept apart from
/// the (large) endpoint state. Every place that bumps them touches this entry
/// anyway (bottleneck arrival follows dispatch within microseconds; a delivery
/// reads `rev_pipe` to send its ACK).
#[derive(Clone, Copy, Debug)]
#[repr(align(64))]
struct Acct {
    /// Payload bytes dropped at the bottleneck.
    bytes_dropped: u64,
    /// Payload bytes put on the access link, retransmissions included.
    bytes_sent: u64,
    /// Data packets put on the access link.
    packets_sent: u64,
    /// Payload bytes that reached the receiver.
    bytes_delivered: u64,
    /// Index of this flow's reverse propagation pipe.
    rev_pipe: u32,
}

/// Packets propagating over one forward delay: (arrival, packet).
#[derive(Debug)]
struct FwdPipe {
    delay: u64,
    q: VecDeque<(u64, Pkt)>,
}

/// ACKs propagating over one reverse delay: (arrival, flow, ack).
#[derive(Debug)]
struct RevPipe {
    delay: u64,
    q: VecDeque<(u64, u32, Ack)>,
}

/// `rng.random_range(0..=max)`, inlined: the host-jitter draw of every data
/// packet. The same numbers from the same generator state as rand 0.9's
/// single-sample `UniformInt` for `u64` (one widening multiply of a 64-bit draw by
/// the range, and a second draw only when the first lands in the biased zone;
/// `tests::jitter_draw_is_rands_random_range` checks every result against rand's),
/// without the generic call and its `Result` (48 instructions a packet before).
#[inline(always)]
fn jitter_draw(rng: &mut SimRng, max: u64) -> u64 {
    let range = max.wrapping_add(1);
    if range == 0 {
        return rng.next_u64();
    }
    let m = u128::from(rng.next_u64()) * u128::from(range);
    let (hi, lo) = ((m >> 64) as u64, m as u64);
    if lo > range.wrapping_neg() {
        let hi2 = ((u128::from(rng.next_u64()) * u128::from(range)) >> 64) as u64;
        return hi + lo.checked_add(hi2).is_none() as u64;
    }
    hi
}

fn pipe_index(delays: &mut Vec<u64>, d: u64) -> u32 {
    match delays.iter().position(|&x| x == d) {
        Some(i) => i as u32,
        None => {
            delays.push(d);
            (delays.len() - 1) as u32
        }
    }
}

/// The simulator state for one run.
struct Sim {
    q: EventQueue,
    now: u64,
    end: u64,
    interval: u64,
    flows: Vec<FlowSlot>,
    eps: Vec<EpSlot>,
    links: Vec<AccessLink>,
    /// Per flow: the time its timer is armed for (`u64::MAX`: none). Dense, so
    /// deciding whether a new wake-up moves the timer touches no cold state.
    timer_armed: Vec<u64>,
    acct: Vec<Acct>,
    in_queue: Vec<InQueue>,
    access_rate: Bandwidth,
    host_jitter: u64,
    /// Prefetch the next events' per-flow state (`prefetch_*`): only worth it
    /// when the flows' state does not stay in cache anyway.
    prefetch: bool,
    /// Where to hint an endpoint's receiver and sender (see [`EpSpans`]).
    spans: EpSpans,
    fwd: Vec<FwdPipe>,
    rev: Vec<RevPipe>,
    /// An enum, not a boxed trait object: every packet goes through it twice.
    qdisc: Accounted<AnyQdisc<Pkt>>,
    qrng: SimRng,
    loss_rng: SimRng,
    loss_p: f64,
    link_rate: Bandwidth,
    tx_cache: (u32, u64),
    in_service: Option<Pkt>,
    drop_scratch: Vec<(Pkt, aqm::DropReason)>,
    mark_scratch: Vec<MarkReason>,
    out: Vec<Pkt>,
    events: u64,
    forwarded: u64,
    drops_random: u64,
    // sampling
    fs: FlowSamples,
    bs: BottleneckSamples,
    last_counters: aqm::Counters,
    last_random: u64,
    /// The per-ACK trace, when recorded.
    probe: Option<AckProbe>,
    /// The bottleneck's per-packet trace, when recorded.
    queue_trace: Option<QueueTrace>,
}

/// Run a scenario to completion.
///
/// `progress` is called about once per simulated second with the simulated time
/// reached; returning `false` aborts the run with [`SimError::Cancelled`]. The
/// engine reads no clock and prints nothing: same spec ⇒ bit-identical output.
pub fn run(spec: &ScenarioSpec, progress: &mut dyn FnMut(SimTime) -> bool) -> Result<RunOutput, SimError> {
    run_with(spec, &RunOptions::default(), progress)
}

/// What a run records beyond its samples and totals. None of it changes the run:
/// the same spec gives the same samples with any options.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunOptions {
    /// Record every TCP sender's state at each ACK ([`AckProbe`]).
    pub tcp_probe: bool,
    /// Record every packet's fate at the bottleneck ([`QueueTrace`]).
    pub queue_trace: bool,
}

/// [`run`], recording what `options` ask for.
pub fn run_with(spec: &ScenarioSpec, options: &RunOptions, progress: &mut dyn FnMut(SimTime) -> bool) -> Result<RunOutput, SimError> {
    let mut sim = Sim::new(spec)?;
    if options.tcp_probe {
        sim.probe = Some(AckProbe::default());
    }
    if options.queue_trace {
        sim.queue_trace = Some(QueueTrace::default());
    }
    sim.run(progress)?;
    Ok(sim.into_output())
}

/// Check that `spec` would run: every check [`run`] makes before its first event
/// (names, parameters, sizes), without simulating. A campaign planner calls it once
/// per condition, so a bad value is refused before hours of other runs, not after.
pub fn check(spec: &ScenarioSpec) -> Result<(), SimError> {
    Sim::new(spec).map(|_| ())
}

fn cc_field(i: usize, e: &CcError) -> String {
    match e {
        CcError::UnknownName { .. } => format!("flows[{i}].cca"),
        CcError::BadParam { .. } | CcError::UnknownParam { .. } => format!("flows[{i}].params"),
    }
}

impl Sim {
    fn new(spec: &ScenarioSpec) -> Result<Self, SimError> {
        spec.validate()?;
        let b = &spec.bottleneck;
        let limit = match b.buffer {
            BufferSpec::Packets(n) => Limit::Packets(n),
            BufferSpec::Bytes(n) => Limit::Bytes(n),
        };
        let mean_mss = spec.flows.iter().map(|f| f.mss as u64).sum::<u64>() / spec.flows.len() as u64;
        let ctx = QdiscContext {
            limit,
            rate_bps: b.rate_bps,
            mean_packet_bytes: (mean_mss + WIRE_BYTES as u64) as u32,
            reference_rtt: SimDuration::from_nanos(spec.reference_rtt_ns()),
        };
        let qdisc = aqm::build_any::<Pkt>(&b.qdisc, &b.params, &ctx)?;
        let link_rate = Bandwidth::from_bps(b.rate_bps);
        let access_rate = Bandwidth::from_bps(spec.access_rate());
        let mut flows = Vec::with_capacity(spec.flows.len());
        let mut eps = Vec::with_capacity(spec.flows.len());
        let mut links = Vec::with_capacity(spec.flows.len());
        let mut timer_armed = Vec::with_capacity(spec.flows.len());
        let (mut fwd_delays, mut rev_delays) = (Vec::new(), Vec::new());
        let mut acct = Vec::with_capacity(spec.flows.len());
        let mut in_queue = Vec::with_capacity(spec.flows.len());
        // Flow and pipe indices are below the flow count (a pipe per distinct delay).
        let mut q = EventQueue::with_capacity(spec.flows.len() * 4 + 16, spec.flows.len(), spec.flows.len());
        for (i, f) in spec.flows.iter().enumerate() {
            let mut rng = rng_stream(spec.seed, FLOW_STREAM_BASE + i as u64);
            let jitter = if spec.start_jitter_ns > 0 { rng.random_range(0..=spec.start_jitter_ns) } else { 0 };
            let start = f.start_ns.saturating_add(jitter);
            let stop = f.stop_ns.unwrap_or(u64::MAX);
            let mss = f.mss as u64;
            // Ring capacities start small and double on demand: a ring much larger
            // than what is in flight makes its head sweep the whole allocation and
            // evict everything else from the cache (1,000-flow runs).
            let ring_hint = 32;
            let delack = SimDuration::from_nanos(f.delack_timeout_ns);
            let ep = if f.cca == CCID2 {
                let mut r = ParamReader::new(CCID2, &f.params);
                let read = |r: &mut ParamReader| -> Result<(u64, &'static str), cc::CcError> {
                    let ack_ratio = r.u64("ack_ratio", 2, 1, 1 << 15, "an integer Ack Ratio from 1 to 32768 (RFC 4341 §6.1.2; default 2)")?;
                    let kernel = r.choice("kernel", "6.1", &["6.1", "2.6.22"], "\"6.1\" (Ack Ratio sized from the window) or \"2.6.22\" (RFC 4341's Ack-loss rules)")?;
                    Ok((ack_ratio, kernel))
                };
                let (ack_ratio, kernel) = read(&mut r)
                    .and_then(|v| r.finish().map(|_| v))
                    .map_err(|e| SimError::Cc { field: format!("flows[{i}].params"), source: e })?;
                Endpoint::Dccp(DccpFlow::new(DccpConfig {
                    flow: i as u32,
                    mss: f.mss,
                    ecn: f.ecn,
                    bytes: f.bytes,
                    start: SimTime::from_nanos(start),
                    stop: SimTime::from_nanos(stop),
                    initial_cwnd: f.initial_cwnd,
                    ack_ratio,
                    linux_2622: kernel == "2.6.22",
                    delack_timeout: if f.delayed_ack { delack } else { SimDuration::from_millis(40) },
                    ring_hint,
                }))
            } else {
                // Its own stream, so drawing it changes no other random number.
                let connection_random = rng_stream(spec.seed, CONNECTION_STREAM_BASE + i as u64).next_u64();
                let init = CcInit {
                    mss,
                    initial_cwnd_segments: f.initial_cwnd,
                    connection_random,
                    sent_before_attach: u64::from(crate::tcp::sender::IPERF3_COOKIE_BYTES),
                };
                let ctl = cc::build(&f.cca, &f.params, &init).map_err(|e| SimError::Cc { field: cc_field(i, &e), source: e })?;
                Endpoint::Tcp(TcpFlow::new(
                    TcpConfig {
                        flow: i as u32,
                        mss: f.mss,
                        ecn: f.ecn,
                        sack: f.sack,
                        bytes: f.bytes,
                        start: SimTime::from_nanos(start),
                        stop: SimTime::from_nanos(stop),
                        rwnd_bytes: f.rwnd_bytes,
                        rwnd_autotune: f.rwnd_autotune,
                        delayed_ack: f.delayed_ack,
                        delack_timeout: delack,
                        base_rtt: SimDuration::from_nanos(f.rtt_ns),
                        ring_hint,
                        rack: f.rack,
                        tlp: f.tlp,
                        frto: f.frto,
                        tso_defer: f.tso_defer,
                        sack_compress: f.sack_compress,
                    },
                    ctl,
                ))
            };
            let full_wire = f.mss + WIRE_BYTES;
            q.push(start, EvKind::Timer(i as u32));
            in_queue.push(InQueue { bytes: 0, fwd_pipe: pipe_index(&mut fwd_delays, f.rtt_ns / 2) });
            acct.push(Acct {
                bytes_dropped: 0,
                bytes_sent: 0,
                packets_sent: 0,
                bytes_delivered: 0,
                rev_pipe: pipe_index(&mut rev_delays, f.rtt_ns - f.rtt_ns / 2),
            });
            eps.push(EpSlot(ep));
            links.push(AccessLink {
                q: VecDeque::with_capacity(ring_hint / 2),
                free: 0,
                host_ready: 0,
                tx_full: access_rate.tx_time(full_wire as u64).as_nanos(),
                full_wire,
                jitter_per_release: f.tso_defer && f.cca != CCID2,
            });
            timer_armed.push(start);
            flows.push(FlowSlot { mss, rng, start, stop, last_app: 0, last_retx: 0 });
        }
        let n_samples = (spec.duration_ns / spec.interval_ns) as usize + 1;
        let mut fs = FlowSamples::default();
        let cap = n_samples.saturating_mul(spec.flows.len()).min(1 << 24);
        fs.flow.reserve(cap);
        fs.t_ns.reserve(cap);
        fs.goodput_bps.reserve(cap);
        fs.cwnd_bytes.reserve(cap);
        fs.srtt_ns.reserve(cap);
        fs.rttvar_ns.reserve(cap);
        fs.retransmits.reserve(cap);
        fs.state.reserve(cap);
        fs.phase.reserve(cap);
        let spans = EpSpans::of(&eps);
        Ok(Sim {
            q,
            now: 0,
            end: spec.duration_ns,
            interval: spec.interval_ns,
            flows,
            eps,
            links,
            timer_armed,
            acct,
            in_queue,
            access_rate,
            host_jitter: spec.host_jitter_ns,
            prefetch: spec.flows.len() >= PREFETCH_MIN_FLOWS,
            spans,
            fwd: fwd_delays.into_iter().map(|delay| FwdPipe { delay, q: VecDeque::with_capacity(256) }).collect(),
            rev: rev_delays.into_iter().map(|delay| RevPipe { delay, q: VecDeque::with_capacity(256) }).collect(),
            qdisc: Accounted::new(qdisc),
            qrng: rng_stream(spec.seed, QDISC_STREAM),
            loss_rng: rng_stream(spec.seed, LOSS_STREAM),
            loss_p: b.loss_rate,
            link_rate,
            tx_cache: (0, 0),
            in_service: None,
            drop_scratch: Vec::with_capacity(16),
            mark_scratch: Vec::with_capacity(16),
            out: Vec::with_capacity(256),
            events: 0,
            forwarded: 0,
            drops_random: 0,
            fs,
            bs: BottleneckSamples::default(),
            last_counters: aqm::Counters::default(),
            last_random: 0,
            probe: None,
            queue_trace: None,
        })
    }

    fn run(&mut self, progress: &mut dyn FnMut(SimTime) -> bool) -> Result<(), SimError> {
        let mut next_sample = self.interval;
        let mut next_progress = PROGRESS_EVERY;
        while let Some(ev) = self.q.pop() {
            if ev.time > self.end {
                break;
            }
            while ev.time > next_sample {
                self.sample(next_sample);
                next_sample += self.interval;
            }
            while ev.time >= next_progress {
                if !progress(SimTime::from_nanos(next_progress)) {
                    return Err(SimError::Cancelled { at: SimTime::from_nanos(next_progress) });
                }
                next_progress += PROGRESS_EVERY;
            }
            self.now = ev.time;
            self.events += 1;
            match ev.kind {
                EvKind::AccessOut(f) => self.on_access_out(f as usize),
                EvKind::LinkDone => self.on_link_done(),
                EvKind::RecvArrive(f) => self.on_recv_arrive(f as usize),
                EvKind::AckArrive(f) => self.on_ack_arrive(f as usize),
                EvKind::Timer(f) => self.on_timer(f as usize),
            }
        }
        while next_sample <= self.end {
            self.sample(next_sample);
            next_sample += self.interval;
        }
        if !progress(SimTime::from_nanos(self.end)) {
            return Err(SimError::Cancelled { at: SimTime::from_nanos(self.end) });
        }
        Ok(())
    }

    #[inline]
    fn now(&self) -> SimTime {
        SimTime::from_nanos(self.now)
    }

    #[inline]
    fn on_access_out(&mut self, f: usize) {
        let link = &mut self.links[f];
        let (_, pkt) = link.q.pop_front().expect("an AccessOut event has a head packet");
        match link.q.front() {
            Some(&(t, _)) => self.q.push(t, EvKind::AccessOut(f as u32)),
            // Rewind the empty ring to its first slot, so a flow's bursts reuse the
            // same cache line instead of sweeping the whole allocation.
            None => link.q.clear(),
        }
        self.bottleneck_arrive(pkt);
    }

    #[inline]
    fn bottleneck_arrive(&mut self, pkt: Pkt) {
        let f = pkt.meta.flow as usize;
        if self.loss_p > 0.0 && self.loss_rng.random::<f64>() < self.loss_p {
            self.drops_random += 1;
            self.acct[f].bytes_dropped += pkt.len as u64;
            if let Some(q) = self.queue_trace.as_mut() {
                q.push(self.now, f as u32, pkt.seq, pkt.meta.bytes, self.qdisc.len_bytes(), QueueEvent::Lost);
            }
            return;
        }
        self.in_queue[f].bytes += pkt.len as u64;
        let now = self.now();
        if self.queue_trace.is_some() {
            self.enqueue_traced(now, pkt);
        } else {
            self.qdisc.enqueue(now, pkt, &mut self.qrng, &mut self.drop_scratch);
        }
        if !self.drop_scratch.is_empty() {
            self.account_drops();
        }
        if self.in_service.is_none() {
            self.start_service();
        }
    }

    /// [`Self::bottleneck_arrive`]'s enqueue when the queue trace is on: the
    /// arriving packet's fate, then any queued packet the same enqueue dropped
    /// (CHOKe's victim).
    #[cold]
    fn enqueue_traced(&mut self, now: SimTime, pkt: Pkt) {
        let (flow, seq, bytes) = (pkt.meta.flow, pkt.seq, pkt.meta.bytes);
        let backlog = self.qdisc.len_bytes();
        let before = self.drop_scratch.len();
        let verdict = self.qdisc.enqueue(now, pkt, &mut self.qrng, &mut self.drop_scratch);
        let q = self.queue_trace.as_mut().expect("queue trace on");
        let t = self.now;
        let event = match verdict {
            Verdict::Admit => QueueEvent::Queued,
            Verdict::Mark(_) => QueueEvent::Marked,
            Verdict::Drop(_) => QueueEvent::Dropped,
        };
        q.push(t, flow, seq, bytes, backlog, event);
        let mut own = event == QueueEvent::Dropped;
        for (p, _) in &self.drop_scratch[before..] {
            if own && (p.meta.flow, p.seq, p.meta.bytes) == (flow, seq, bytes) {
                own = false; // the arriving packet, traced above
                continue;
            }
            q.push(t, p.meta.flow, p.seq, p.meta.bytes, backlog, QueueEvent::DroppedFromQueue);
        }
    }

    /// [`Self::start_service`]'s record when the queue trace is on: the drops the
    /// dequeue made, and the CE mark it set on the departing packet.
    #[cold]
    fn trace_dequeue(&mut self, departing: Option<&Pkt>, marked: bool) {
        let backlog = self.qdisc.len_bytes();
        let q = self.queue_trace.as_mut().expect("queue trace on");
        for (p, _) in &self.drop_scratch {
            q.push(self.now, p.meta.flow, p.seq, p.meta.bytes, backlog, QueueEvent::DroppedFromQueue);
        }
        if let (Some(p), true) = (departing, marked) {
            q.push(self.now, p.meta.flow, p.seq, p.meta.bytes, backlog, QueueEvent::MarkedLeaving);
        }
    }

    #[inline]
    fn account_drops(&mut self) {
        for (p, _) in self.drop_scratch.drain(..) {
            let f = p.meta.flow as usize;
            self.in_queue[f].bytes -= p.len as u64;
            self.acct[f].bytes_dropped += p.len as u64;
        }
    }

    /// Bottleneck serialisation time of an IP packet of `bytes`, in its
    /// Ethernet frame.
    #[inline]
    fn bneck_tx(&mut self, bytes: u32) -> u64 {
        if self.tx_cache.0 != bytes {
            self.tx_cache = (bytes, self.link_rate.tx_time(bytes as u64).as_nanos());
        }
        self.tx_cache.1
    }

    #[inline(always)]
    fn start_service(&mut self) {
        let now = self.now();
        let p = self.qdisc.dequeue(now, &mut self.qrng, &mut self.drop_scratch, &mut self.mark_scratch);
        if self.queue_trace.is_some() {
            let marked = !self.mark_scratch.is_empty();
            self.trace_dequeue(p.as_ref(), marked);
        }
        self.mark_scratch.clear();
        if !self.drop_scratch.is_empty() {
            self.account_drops();
        }
        if let Some(p) = p {
            self.in_queue[p.meta.flow as usize].bytes -= p.len as u64;
            let tx = self.bneck_tx(p.meta.bytes);
            self.in_service = Some(p);
            self.q.push(self.now + tx, EvKind::LinkDone);
        }
    }

    #[inline]
    fn on_link_done(&mut self) {
        let p = self.in_service.take().expect("LinkDone with a packet in service");
        self.forwarded += 1;
        let pi = self.in_queue[p.meta.flow as usize].fwd_pipe;
        let pipe = &mut self.fwd[pi as usize];
        let at = self.now + pipe.delay;
        pipe.q.push_back((at, p));
        if pipe.q.len() == 1 {
            self.q.push(at, EvKind::RecvArrive(pi));
        }
        self.start_service();
    }

    #[inline]
    fn on_recv_arrive(&mut self, pi: usize) {
        let now = self.now();
        let pipe = &mut self.fwd[pi];
        let (_, p) = pipe.q.pop_front().expect("a RecvArrive event has a head packet");
        if let Some(&(t, _)) = pipe.q.front() {
            self.q.push(t, EvKind::RecvArrive(pi as u32));
        }
        // Prefetch (a hint) the receiver and accounting entry of the arrival three
        // ahead: in a many-flow run they are cold, and the loads need a few
        // events' time to land (three measured slightly better than two).
        if self.prefetch {
            if let Some((_, ahead)) = self.fwd[pi].q.get(2) {
                let g = ahead.meta.flow as usize;
                let (at, len) = self.spans.rcv;
                prefetch_bytes(&self.eps[g], at, len);
                prefetch(&self.acct[g]);
            }
        }
        let f = p.meta.flow as usize;
        self.acct[f].bytes_delivered += p.len as u64;
        let ep = &mut self.eps[f];
        let ack = ep.on_data(now, &p);
        let w = ep.receiver_wakeup();
        self.arm_by(f, w);
        if let Some(ack) = ack {
            self.send_ack(f, ack);
        }
    }

    #[inline(always)]
    fn send_ack(&mut self, f: usize, ack: Ack) {
        let pi = self.acct[f].rev_pipe;
        let pipe = &mut self.rev[pi as usize];
        let at = self.now + pipe.delay;
        pipe.q.push_back((at, f as u32, ack));
        if pipe.q.len() == 1 {
            self.q.push(at, EvKind::AckArrive(pi));
        }
    }

    #[inline]
    fn on_ack_arrive(&mut self, pi: usize) {
        let now = self.now();
        let pipe = &mut self.rev[pi];
        let (_, f, ack) = pipe.q.pop_front().expect("an AckArrive event has a head ACK");
        let next = pipe.q.front().map(|&(t, g, _)| (t, g as usize));
        let ahead = pipe.q.get(2).map(|&(_, g, _)| g as usize);
        if let Some((t, _)) = next {
            self.q.push(t, EvKind::AckArrive(pi as u32));
        }
        // Prefetch (hints) in two stages, because the sender's heap parts can only
        // be located once the sender itself is in cache: the ACK three ahead gets
        // its sender, access link and timer slot, the next ACK (stage 1 two ACKs
        // ago) its scoreboard and controller.
        if self.prefetch {
            if let Some(g) = ahead {
                let (at, len) = self.spans.snd;
                prefetch_bytes(&self.eps[g], at, len);
                prefetch(&self.links[g]);
                prefetch(&self.timer_armed[g]);
                if self.host_jitter > 0 {
                    // Its packets' host-jitter draws read the flow's generator.
                    prefetch(&self.flows[g].rng);
                }
            }
            if let Some((_, g)) = next {
                self.eps[g].prefetch_sender_heap();
                // Where this ACK's packets will go: the tail of the flow's access
                // ring (its `AccessLink` was hinted two ACKs ago).
                let ring = &self.links[g].q;
                match ring.back() {
                    Some(last) => prefetch(last),
                    None => prefetch(ring.as_slices().0),
                }
            }
        }
        let f = f as usize;
        let ep = &mut self.eps[f];
        if let (Some(probe), Endpoint::Tcp(t), Ack::Tcp(a)) = (self.probe.as_mut(), &ep.0, &ack) {
            if !a.syn() {
                t.snd.probe_into(now, f as u32, probe);
            }
        }
        ep.on_ack(now, &ack, &mut self.out);
        // Invariant: `timer_armed` ≤ every deadline as of the last handler; an ACK
        // moves only the sender's, so only that one needs checking.
        let w = ep.sender_wakeup();
        self.arm_by(f, w);
        self.dispatch(f);
    }

    fn on_timer(&mut self, f: usize) {
        // A flow's timer is moved, never duplicated, so every timer event is live.
        debug_assert_eq!(self.timer_armed[f], self.now);
        self.timer_armed[f] = u64::MAX;
        // Prefetch (a hint) the next timer's flow: timer events visit the flows in
        // no particular order, so their state is cold.
        if let (true, Some(g)) = (self.prefetch, self.q.next_timer_flow()) {
            prefetch(&self.eps[g as usize]);
        }
        let now = self.now();
        let ack = self.eps[f].on_timer(now, &mut self.out);
        if let Some(a) = ack {
            self.send_ack(f, a);
        }
        self.dispatch(f);
        self.rearm(f);
    }

    /// Make sure the flow's timer is set at or before the endpoint's next wake-up
    /// (`timer_armed` ≤ every deadline of the flow after each handler).
    #[inline]
    fn rearm(&mut self, f: usize) {
        let w = self.eps[f].next_wakeup();
        self.arm_by(f, w);
    }

    /// Move the flow's timer to `w` if that is earlier than where it is armed
    /// (a later wake-up waits for the armed timer to fire and find nothing due).
    #[inline(always)]
    fn arm_by(&mut self, f: usize, w: SimTime) {
        let w = w.as_nanos();
        if w < self.timer_armed[f] {
            self.timer_armed[f] = w;
            self.q.push_timer(w, f as u32);
        }
    }

    /// Move the packets the endpoint just emitted onto its access link.
    #[inline(always)]
    fn dispatch(&mut self, f: usize) {
        if self.out.is_empty() {
            return;
        }
        let now = self.now;
        let link = &mut self.links[f];
        let acct = &mut self.acct[f];
        // The new head's departure, when the link was idle: remembered here rather
        // than read back from the ring (a 1,000-flow run stalled on that load).
        let mut new_head = if link.q.is_empty() { None } else { Some(u64::MAX) };
        let release_jitter = if link.jitter_per_release && self.host_jitter > 0 {
            Some(jitter_draw(&mut self.flows[f].rng, self.host_jitter))
        } else {
            None
        };
        for p in self.out.drain(..) {
            acct.bytes_sent += p.len as u64;
            acct.packets_sent += 1;
            let mut ready = now;
            if let Some(j) = release_jitter {
                ready += j;
            } else if self.host_jitter > 0 {
                ready += jitter_draw(&mut self.flows[f].rng, self.host_jitter);
            }
            // Host jitter never reorders a flow's own packets.
            ready = ready.max(link.host_ready);
            link.host_ready = ready;
            let tx = if p.meta.bytes == link.full_wire {
                link.tx_full
            } else {
                self.access_rate.tx_time(p.meta.bytes as u64).as_nanos()
            };
            let depart = ready.max(link.free) + tx;
            link.free = depart;
            link.q.push_back((depart, p));
            new_head.get_or_insert(depart);
        }
        if let Some(t) = new_head.filter(|&t| t != u64::MAX) {
            self.q.push(t, EvKind::AccessOut(f as u32));
        }
    }

    fn sample(&mut self, t: u64) {
        let iv = self.interval;
        let secs = iv as f64 / 1e9;
        for (i, (slot, ep)) in self.flows.iter_mut().zip(&self.eps).enumerate() {
            let app = ep.app_bytes();
            let retx = ep.retransmits();
            let d_app = app - slot.last_app;
            let d_retx = retx - slot.last_retx;
            slot.last_app = app;
            slot.last_retx = retx;
            let finish = ep.finished_at().map_or(u64::MAX, |x| x.as_nanos()).min(slot.stop);
            // Emit while the interval (t − iv, t] overlaps the active period (start, finish].
            if !(slot.start < t && t - iv < finish) {
                continue;
            }
            let (cwnd, srtt, rttvar, state, phase) = match &ep.0 {
                Endpoint::Tcp(tf) => {
                    let m = tf.snd.cc.metrics();
                    let st = if tf.snd.finished_at.is_some() { FlowState::Idle as u8 } else { tf.snd.state.code() };
                    (tf.snd.cwnd() as f64, tf.snd.rtt.srtt(), tf.snd.rtt.rttvar(), st, m.phase)
                }
                Endpoint::Dccp(df) => {
                    let st = if df.snd.finished_at.is_some() { FlowState::Idle as u8 } else { FlowState::Open as u8 };
                    ((df.snd.cwnd * slot.mss) as f64, df.snd.rtt.srtt(), df.snd.rtt.rttvar(), st, df.phase())
                }
            };
            self.fs.flow.push(i as u32);
            self.fs.t_ns.push(t);
            self.fs.goodput_bps.push(d_app as f64 * 8.0 / secs);
            self.fs.cwnd_bytes.push(cwnd);
            self.fs.srtt_ns.push(srtt.as_nanos());
            self.fs.rttvar_ns.push(rttvar.as_nanos());
            self.fs.retransmits.push(d_retx);
            self.fs.state.push(state);
            self.fs.phase.push(phase);
        }
        let c = self.qdisc.counters().clone();
        let qb = self.qdisc.len_bytes::<Pkt>();
        let qp = self.qdisc.len_packets::<Pkt>() as u64;
        let d_random = self.drops_random - self.last_random;
        self.bs.t_ns.push(t);
        self.bs.queue_bytes.push(qb);
        self.bs.queue_pkts.push(qp);
        self.bs.drops.push(c.total_drops() - self.last_counters.total_drops() + d_random);
        self.bs.marks.push(c.total_marks() - self.last_counters.total_marks());
        for r in 0..5 {
            self.bs.drops_by_reason[r].push(c.drops[r] - self.last_counters.drops[r]);
        }
        self.bs.drops_random.push(d_random);
        self.last_counters = c;
        self.last_random = self.drops_random;
    }

    fn into_output(self) -> RunOutput {
        // Payload still propagating, per flow (one pass over each pipe).
        let mut propagating = vec![0u64; self.flows.len()];
        for pipe in &self.fwd {
            for (_, p) in &pipe.q {
                propagating[p.meta.flow as usize] += p.len as u64;
            }
        }
        let mut flows = Vec::with_capacity(self.flows.len());
        for (i, (s, ep)) in self.flows.iter().zip(&self.eps).enumerate() {
            let mut in_flight = self.in_queue[i].bytes + propagating[i];
            in_flight += self.links[i].q.iter().map(|(_, p)| p.len as u64).sum::<u64>();
            if let Some(p) = &self.in_service {
                if p.meta.flow as usize == i {
                    in_flight += p.len as u64;
                }
            }
            let (retx, rtos, cev) = match &ep.0 {
                Endpoint::Tcp(t) => (t.snd.retrans_segs, t.snd.rto_count, t.snd.congestion_events),
                Endpoint::Dccp(d) => (0, d.snd.rto_count, d.snd.congestion_events),
            };
            flows.push(FlowTotals {
                bytes_sent: self.acct[i].bytes_sent,
                bytes_delivered: self.acct[i].bytes_delivered,
                bytes_dropped: self.acct[i].bytes_dropped,
                bytes_in_flight: in_flight,
                app_bytes: ep.app_bytes(),
                packets_sent: self.acct[i].packets_sent,
                retransmits: retx,
                rtos,
                congestion_events: cev,
                completed_ns: ep.finished_at().map(|t| t.as_nanos()),
                started_ns: s.start,
            });
        }
        let c = self.qdisc.counters();
        RunOutput {
            flows: self.fs,
            bottleneck: self.bs,
            totals: RunTotals {
                events: self.events,
                bottleneck_packets: self.forwarded,
                drops_by_reason: c.drops,
                drops_random: self.drops_random,
                marks: c.total_marks(),
                flows,
            },
            probe: self.probe,
            queue: self.queue_trace,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The inlined host-jitter draw gives exactly rand's `random_range(0..=max)`,
    /// draw for draw, for small, odd, power-of-two and huge bounds (where the
    /// second draw is frequent) and the full range.
    #[test]
    fn jitter_draw_is_rands_random_range() {
        for (k, max) in [0u64, 1, 2, 3, 7, 120_000, 1 << 20, 999_999_937, (1 << 63) + 12345, u64::MAX - 1, u64::MAX].into_iter().enumerate() {
            let mut a = rng_stream(11, k as u64);
            let mut b = rng_stream(11, k as u64);
            for i in 0..20_000 {
                assert_eq!(jitter_draw(&mut a, max), b.random_range(0..=max), "max {max}, draw {i}");
            }
            assert_eq!(a.next_u64(), b.next_u64(), "max {max}: both consumed the same draws");
        }
    }

    /// Lossy runs inside the library's own test build, where every RACK loss
    /// detection compares its time-ordered walk with a scan in sequence order and
    /// checks the lost-and-waiting bitmap against the flags (tcp/sender.rs): a
    /// 1 Gbit/s overshoot into a 0.1-BDP buffer (thousands lost at once, RTOs),
    /// and random loss with reordering-free SACK recovery and undo.
    #[test]
    fn rack_walks_agree_with_the_sequence_scan_under_heavy_loss() {
        let flow = |cca: &str, rtt: u64, ecn: bool| {
            format!(
                r#"{{"cca": "{cca}", "params": {{}}, "rtt_ns": {rtt}, "start_ns": 0, "stop_ns": null, "bytes": null,
                "rwnd_bytes": null, "ecn": {ecn}, "mss": 1448, "sack": true, "delayed_ack": true,
                "delack_timeout_ns": 40000000, "initial_cwnd": 10}}"#
            )
        };
        for (rate, buf, loss, secs, flows) in [
            (1_000_000_000u64, 800u64, 0.0, 4u64, vec![flow("reno", 100_000_000, false), flow("cubic", 60_000_000, false)]),
            (20_000_000, 60, 0.01, 20, vec![flow("reno", 40_000_000, false), flow("bic", 100_000_000, true), flow("cubic", 200_000_000, false)]),
        ] {
            let json = format!(
                r#"{{"name": "rack", "seed": 3, "duration_ns": {}, "interval_ns": 1000000000,
                "bottleneck": {{"rate_bps": {rate}, "buffer": {{"packets": {buf}}}, "qdisc": "droptail", "params": {{}}, "loss_rate": {loss}}},
                "access_rate_bps": {}, "start_jitter_ns": 10000000, "host_jitter_ns": 1000, "flows": [{}]}}"#,
                secs * 1_000_000_000,
                rate * 10,
                flows.join(",")
            );
            let out = run(&ScenarioSpec::from_json(&json).unwrap(), &mut |_| true).unwrap();
            let retx: u64 = out.totals.flows.iter().map(|f| f.retransmits).sum();
            assert!(retx > 100, "the scenario must lose packets to test anything ({retx} retransmissions)");
        }
    }
}
