//! CoDel, Controlled Delay (RFC 8289), as Linux runs it (`sch_codel`,
//! include/net/codel_impl.h).
//!
//! Read this first: CoDel judges the *sojourn time* of each packet at dequeue. While
//! it has stayed at or above `target` for a whole `interval` (and more than one
//! MTU is queued), CoDel enters the dropping state: it drops (or ECN-marks) the head
//! packet and schedules the next drop `interval / sqrt(count)` later, the control
//! law of RFC 8289 §5.5 / §3.3. It leaves the dropping state as soon as a packet's
//! sojourn falls below `target`. This file follows the pseudocode semantics of RFC
//! 8289 §5 (`dodequeue`, `dequeue`, `control_law`), including the Linux-derived
//! re-entry rule that restarts `count` from the previous cycle's drop rate when the
//! queue went bad again within `16·interval`.
//!
//! Where the kernel's arithmetic differs from the RFC's exact one, this follows the
//! kernel, which is what fairlab's simulator is judged against (docs/validation/vm.md):
//! - Time is counted in ticks of 1024 ns (`CODEL_SHIFT`), truncated: target 5 ms is
//!   4882 ticks, interval 100 ms 97656; a packet may be dropped only when `now` is
//!   strictly after `first_above_time`.
//! - 1/sqrt(count) is not computed but estimated (`rec_inv_sqrt`, Q0.16) by one
//!   Newton step per increment of `count`, and on re-entry by one step from the
//!   last state's estimate. The estimate runs low early in a state (0.5 at count 2
//!   instead of 0.707), so the third drop comes half an interval after the second.
//!
//! [`CodelVars`] holds one instance of that state machine; FQ-CoDel keeps one per
//! flow queue.
//!
//! Choices where RFC 8289 leaves room:
//! - `maxpacket` (the "at most one MTU queued" test) is the largest packet seen at
//!   enqueue so far. Linux compares with the device MTU (`psched_mtu`); with
//!   full-sized segments on the bottleneck both are one full packet. The backlog
//!   compared with it is the whole qdisc's, as in Linux: FQ-CoDel's other flow
//!   queues count ([`Exemption`]).
//! - With `ecn` on, an ECN-capable packet that would be dropped is marked and sent
//!   instead, and CoDel behaves as if it had dropped it (`count` rises, the next
//!   signal is scheduled): the Linux `codel_dequeue` behaviour RFC 8289 §5 alludes to.

use crate::{
    ConfigError, DropReason, DropTail, DropTailConfig, Limit, MarkReason, Packet, ParamReader, Qdisc,
    QdiscContext, SimDuration, SimRng, SimTime, Stamped, Verdict,
};

/// CoDel configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CodelConfig {
    /// Hard buffer limit: the scenario's buffer (CoDel itself needs none, RFC 8289 §4.6).
    pub limit: Limit,
    /// Acceptable standing queue delay. Default 5 ms (RFC 8289 §4.4).
    pub target: SimDuration,
    /// Window over which the delay must stay above `target` before dropping, and the
    /// base of the control law. Default 100 ms (RFC 8289 §4.3).
    pub interval: SimDuration,
    /// Mark ECN-capable packets instead of dropping. Default off (Linux `tc codel`).
    pub ecn: bool,
}

impl CodelConfig {
    /// RFC 8289's recommended values with the scenario's buffer.
    pub fn defaults(ctx: &QdiscContext) -> Self {
        CodelConfig {
            limit: ctx.limit,
            target: SimDuration::from_millis(5),
            interval: SimDuration::from_millis(100),
            ecn: false,
        }
    }

    /// Read the scenario's parameters on top of [`CodelConfig::defaults`].
    pub fn from_params(r: &mut ParamReader<'_>, ctx: &QdiscContext) -> Result<Self, ConfigError> {
        let cfg = Self::read_over(r, Self::defaults(ctx))?;
        cfg.validate_as(r.qdisc())?;
        Ok(cfg)
    }

    /// Read `target`, `interval` and `ecn` over `d` (unvalidated): shared with
    /// FQ-CoDel, whose queues run this CoDel with other defaults.
    pub(crate) fn read_over(r: &mut ParamReader<'_>, d: CodelConfig) -> Result<Self, ConfigError> {
        Ok(CodelConfig {
            limit: d.limit,
            target: r.duration("target", d.target, SimDuration::from_micros(1), SimDuration::from_secs(10), "nanoseconds, 1 us to 10 s")?,
            interval: r.duration(
                "interval",
                d.interval,
                SimDuration::from_micros(1),
                SimDuration::from_secs(100),
                "nanoseconds, 1 us to 100 s, and more than target",
            )?,
            ecn: r.bool("ecn", d.ecn)?,
        })
    }

    /// The parameters one CoDel state machine runs with.
    pub(crate) fn params(&self) -> CodelParams {
        CodelParams { target: self.target, interval: self.interval, ecn: self.ecn }
    }

    /// Check ranges, naming `qdisc` in errors.
    pub fn validate_as(&self, qdisc: &'static str) -> Result<(), ConfigError> {
        if self.target.as_nanos() == 0 {
            return Err(ConfigError { qdisc, param: "target", value: "0".into(), allowed: "nanoseconds, 1 us to 10 s" });
        }
        if self.interval <= self.target {
            return Err(ConfigError {
                qdisc,
                param: "interval",
                value: self.interval.as_nanos().to_string(),
                allowed: "nanoseconds, 1 us to 100 s, and more than target",
            });
        }
        DropTailConfig { limit: self.limit }.validate().map_err(|e| ConfigError { qdisc, ..e })
    }
}

/// The parameters one CoDel state machine runs with.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CodelParams {
    pub(crate) target: SimDuration,
    pub(crate) interval: SimDuration,
    pub(crate) ecn: bool,
}

/// Linux CoDel's clock: nanoseconds >> 10, a tick of 1024 ns (`CODEL_SHIFT`,
/// include/net/codel.h). Every time CoDel compares — sojourn against target,
/// `first_above_time`, `drop_next` — is in these ticks, truncated, as Linux's are.
const CODEL_SHIFT: u32 = 10;

/// `t` on CoDel's clock. Linux keeps a wrapping u32 (2199 s of range with its
/// signed comparisons); a u64 never wraps and compares the same within that range.
fn ticks(ns: u64) -> u64 {
    ns >> CODEL_SHIFT
}

/// Bits of Linux's `rec_inv_sqrt` (a u16): 1/sqrt(count) in Q0.16.
const REC_INV_SQRT_BITS: u32 = 16;
/// Shift from `rec_inv_sqrt` to a Q0.32 number.
const REC_INV_SQRT_SHIFT: u32 = 32 - REC_INV_SQRT_BITS;
/// `rec_inv_sqrt` for count = 1: 0xFFFF, just below 1.0.
const REC_INV_SQRT_ONE: u16 = (u32::MAX >> REC_INV_SQRT_SHIFT) as u16;

/// RFC 8289 §5's per-queue variables, kept as Linux keeps them
/// (include/net/codel_impl.h): times in 1024-ns ticks and 1/sqrt(count) as a
/// Q0.16 estimate refined by one Newton step per change of `count`.
#[derive(Clone, Debug, Default)]
pub(crate) struct CodelVars {
    /// Drops (or marks) since entering the dropping state.
    count: u32,
    /// `count` when the last dropping state was entered.
    lastcount: u32,
    dropping: bool,
    /// Estimate of 1/sqrt(count), Q0.16 (Linux `rec_inv_sqrt`).
    rec_inv_sqrt: u16,
    /// When (ticks) the sojourn time will have been above target for a full interval.
    first_above_time: Option<u64>,
    /// When (ticks) the next drop is due in the dropping state.
    drop_next: u64,
}

/// The "at most one MTU queued" exemption of `codel_should_drop`: no drop while the
/// qdisc's backlog after the dequeue, `other_backlog` (bytes queued outside this
/// CoDel instance's queue: FQ-CoDel's other flow queues) plus this queue's, is at
/// most `mtu`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Exemption {
    /// One full packet in bytes (see the module doc for how it is chosen).
    pub(crate) mtu: u64,
    /// Bytes the qdisc holds outside the queue being dequeued.
    pub(crate) other_backlog: u64,
}

/// One Newton–Raphson step of 1/sqrt(count) from the current estimate x:
/// x' = x/2 · (3 − count·x²), in Linux's fixed point (`codel_Newton_step`). Linux
/// takes one step per increment of `count` instead of a square root, so the
/// estimate lags the exact value: 0.5 rather than 0.707 at count 2, 0.5625 rather
/// than 0.577 at 3 — the third drop of an episode comes half an interval after the second.
fn newton_step(rec_inv_sqrt: u16, count: u32) -> u16 {
    let invsqrt = u64::from(rec_inv_sqrt) << REC_INV_SQRT_SHIFT;
    let invsqrt2 = (invsqrt * invsqrt) >> 32;
    // The kernel's u64 arithmetic: the product wraps, the subtraction too.
    let mut val = (3u64 << 32).wrapping_sub(u64::from(count).wrapping_mul(invsqrt2));
    val >>= 2; // room for the multiply below
    val = val.wrapping_mul(invsqrt) >> (32 - 2 + 1);
    (val >> REC_INV_SQRT_SHIFT) as u16
}

/// RFC 8289 §5.5's `t + interval / sqrt(count)` as Linux computes it
/// (`codel_control_law`): interval × rec_inv_sqrt in Q0.32, truncated.
fn control_law(t: u64, interval: u64, rec_inv_sqrt: u16) -> u64 {
    t + ((interval * (u64::from(rec_inv_sqrt) << REC_INV_SQRT_SHIFT)) >> 32)
}

impl CodelParams {
    fn target_ticks(&self) -> u64 {
        ticks(self.target.as_nanos())
    }
    fn interval_ticks(&self) -> u64 {
        ticks(self.interval.as_nanos())
    }
}

impl CodelVars {
    /// Is CoDel in its dropping state?
    pub(crate) fn dropping(&self) -> bool {
        self.dropping
    }

    /// RFC 8289 §5.4 `dodequeue` (Linux `codel_should_drop`): take the head and
    /// say whether it may be dropped.
    fn dodequeue<P: Packet>(
        &mut self,
        p: &CodelParams,
        now: u64,
        q: &mut DropTail<Stamped<P>>,
        exempt: Exemption,
    ) -> (Option<Stamped<P>>, bool) {
        let Some(s) = q.pop_front() else {
            self.first_above_time = None;
            return (None, false);
        };
        let sojourn = now.saturating_sub(ticks(s.at.as_nanos()));
        // Below target, or at most one MTU left queued: the queue is fine. Linux
        // counts the whole qdisc's backlog here (`codel_should_drop`'s `*backlog`:
        // FQ-CoDel passes `sch->qstats.backlog`, every flow queue's bytes).
        if sojourn < p.target_ticks() || exempt.other_backlog + q.len_bytes() <= exempt.mtu {
            self.first_above_time = None;
            return (Some(s), false);
        }
        match self.first_above_time {
            None => {
                self.first_above_time = Some(now + p.interval_ticks());
                (Some(s), false)
            }
            // Strictly after, as Linux's `codel_time_after`.
            Some(t) => (Some(s), now > t),
        }
    }

    /// Mark `s` if ECN applies; returns the packet back if it must be dropped instead.
    fn signal<P: Packet>(p: &CodelParams, mut s: Stamped<P>, marked: &mut Vec<MarkReason>) -> Result<Stamped<P>, Stamped<P>> {
        if p.ecn && s.meta().ecn_capable {
            s.mark_ce();
            marked.push(MarkReason::Sojourn);
            Ok(s)
        } else {
            Err(s)
        }
    }

    /// RFC 8289 §5.5 `dequeue`, as Linux's `codel_dequeue`. Dropped packets go
    /// to `dropped` with [`DropReason::Sojourn`]; marks are reported in `marked`.
    pub(crate) fn dequeue<P: Packet>(
        &mut self,
        p: &CodelParams,
        now: SimTime,
        q: &mut DropTail<Stamped<P>>,
        exempt: Exemption,
        dropped: &mut Vec<(P, DropReason)>,
        marked: &mut Vec<MarkReason>,
    ) -> Option<P> {
        if q.len_packets() == 0 {
            // Linux `codel_dequeue` on an empty queue leaves the dropping state and
            // nothing else: `first_above_time` survives (it is cleared only when the
            // drop loop empties the queue, in `codel_should_drop`), so a flow queue of
            // FQ-CoDel that empties briefly while its packets still wait too long keeps
            // its clock.
            self.dropping = false;
            return None;
        }
        let now = ticks(now.as_nanos());
        let interval = p.interval_ticks();
        let (mut head, mut ok_to_drop) = self.dodequeue(p, now, q, exempt);
        let Some(_) = head else {
            self.dropping = false;
            return None;
        };
        if self.dropping {
            if !ok_to_drop {
                // Sojourn went below target: leave the dropping state.
                self.dropping = false;
            }
            while self.dropping && now >= self.drop_next {
                let Some(s) = head.take() else { break };
                self.count = self.count.wrapping_add(1);
                self.rec_inv_sqrt = newton_step(self.rec_inv_sqrt, self.count);
                match Self::signal(p, s, marked) {
                    Ok(m) => {
                        // Marked instead of dropped: it goes out; schedule the next signal.
                        self.drop_next = control_law(self.drop_next, interval, self.rec_inv_sqrt);
                        return Some(m.pkt);
                    }
                    Err(d) => dropped.push((d.pkt, DropReason::Sojourn)),
                }
                (head, ok_to_drop) = self.dodequeue(p, now, q, exempt);
                if ok_to_drop {
                    self.drop_next = control_law(self.drop_next, interval, self.rec_inv_sqrt);
                } else {
                    self.dropping = false;
                }
            }
        } else if ok_to_drop {
            let s = head.take().expect("checked above");
            match Self::signal(p, s, marked) {
                Ok(m) => head = Some(m),
                Err(d) => {
                    dropped.push((d.pkt, DropReason::Sojourn));
                    (head, _) = self.dodequeue(p, now, q, exempt);
                }
            }
            self.dropping = true;
            // If the queue went bad again soon after the last dropping state, start
            // from that state's drop rate (RFC 8289 §5.5, the Linux variant): count
            // restarts at the drops of the last state, and 1/sqrt(count) takes ONE
            // Newton step from the last state's estimate (Linux does not recompute
            // it; "next Newton steps will correct it").
            let delta = self.count.wrapping_sub(self.lastcount);
            let since_next = now as i128 - self.drop_next as i128;
            if delta > 1 && since_next < 16 * i128::from(interval) {
                self.count = delta;
                self.rec_inv_sqrt = newton_step(self.rec_inv_sqrt, self.count);
            } else {
                self.count = 1;
                self.rec_inv_sqrt = REC_INV_SQRT_ONE;
            }
            self.lastcount = self.count;
            self.drop_next = control_law(now, interval, self.rec_inv_sqrt);
        }
        head.map(|s| s.pkt)
    }
}

/// CoDel in front of a FIFO of timestamped packets.
#[derive(Debug)]
pub struct Codel<P> {
    cfg: CodelConfig,
    vars: CodelVars,
    fifo: DropTail<Stamped<P>>,
    maxpacket: u64,
}

impl<P: Packet> Codel<P> {
    /// Build CoDel; fails on an invalid configuration.
    pub fn new(cfg: CodelConfig) -> Result<Self, ConfigError> {
        cfg.validate_as("codel")?;
        let fifo = DropTail::new(DropTailConfig { limit: cfg.limit })?;
        Ok(Codel { cfg, vars: CodelVars::default(), fifo, maxpacket: 0 })
    }

    /// Is CoDel in its dropping state?
    pub fn dropping(&self) -> bool {
        self.vars.dropping()
    }

    fn params(&self) -> CodelParams {
        self.cfg.params()
    }
}

impl<P: Packet> Qdisc<P> for Codel<P> {
    fn name(&self) -> &'static str {
        "codel"
    }

    fn enqueue(&mut self, now: SimTime, pkt: P, _rng: &mut SimRng, dropped: &mut Vec<(P, DropReason)>) -> Verdict {
        let bytes = u64::from(pkt.meta().bytes);
        if !self.fifo.fits(bytes) {
            dropped.push((pkt, DropReason::Overflow));
            return Verdict::Drop(DropReason::Overflow);
        }
        self.maxpacket = self.maxpacket.max(bytes);
        self.fifo.push_back(Stamped { pkt, at: now });
        Verdict::Admit
    }

    fn dequeue(
        &mut self,
        now: SimTime,
        _rng: &mut SimRng,
        dropped: &mut Vec<(P, DropReason)>,
        marked: &mut Vec<MarkReason>,
    ) -> Option<P> {
        let params = self.params();
        let exempt = Exemption { mtu: self.maxpacket, other_backlog: 0 };
        self.vars.dequeue(&params, now, &mut self.fifo, exempt, dropped, marked)
    }

    fn len_bytes(&self) -> u64 {
        self.fifo.len_bytes()
    }

    fn len_packets(&self) -> usize {
        self.fifo.len_packets()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::red::tests::ctx;
    use crate::testing::TestPacket;

    /// One packet arrives every millisecond from t = 0; from t = `delay` ms on, one
    /// packet is dequeued every millisecond, so each packet waits `delay` ms until
    /// drops shorten the queue. Returns the dequeue instants (ms) at which packets
    /// were dropped or marked, and the number of packets delivered.
    fn run(delay: u64, until_ms: u64, ecn: bool) -> (Vec<u64>, Vec<u64>, usize) {
        let cfg = CodelConfig { ecn, ..CodelConfig::defaults(&ctx(Limit::Packets(10_000))) };
        let mut q = Codel::new(cfg).unwrap();
        let mut rng = netunits::rng_stream(1, 0);
        let (mut d, mut m) = (Vec::new(), Vec::new());
        let (mut drops, mut marks, mut delivered) = (Vec::new(), Vec::new(), 0);
        for t in 0..until_ms {
            let now = SimTime::from_millis(t);
            let mut p = TestPacket::new(t, 0, 1500);
            p.meta.ecn_capable = ecn;
            q.enqueue(now, p, &mut rng, &mut d);
            if t >= delay {
                let (nd, nm) = (d.len(), m.len());
                if q.dequeue(now, &mut rng, &mut d, &mut m).is_some() {
                    delivered += 1;
                }
                drops.extend(std::iter::repeat_n(t, d.len() - nd));
                marks.extend(std::iter::repeat_n(t, m.len() - nm));
            }
        }
        (drops, marks, delivered)
    }

    #[test]
    fn no_drops_while_sojourn_is_below_target() {
        let (drops, marks, _) = run(4, 3000, false);
        assert!(drops.is_empty() && marks.is_empty());
    }

    /// Linux's 1/sqrt(count) estimates (Q0.16) for count = 1..10, worked by hand
    /// from `codel_Newton_step`, x' = x/2 · (3 − count·x²) in fixed point, starting
    /// from 0xFFFF: e.g. count 2: x = 0xFFFF/2^16 ≈ 1, x' = 0.5·(3 − 2) = 0.5 →
    /// 32769 (the truncations leave it just above 2^15); count 3: 0.5/2 · (3 −
    /// 3·0.25) = 0.5625 = 36864/2^16 exactly. The exact values would be 46341 and
    /// 37837.
    const LINUX_REC_INV_SQRT: [u16; 10] = [65535, 32769, 36864, 31968, 28935, 26481, 24588, 23037, 21746, 20647];

    #[test]
    fn one_newton_step_per_count_gives_linux_estimates() {
        let mut x = REC_INV_SQRT_ONE;
        assert_eq!(x, LINUX_REC_INV_SQRT[0]);
        for count in 2..=10u32 {
            x = newton_step(x, count);
            assert_eq!(x, LINUX_REC_INV_SQRT[count as usize - 1], "count {count}");
        }
        // ... and they converge on 1/sqrt(count): within 1% by count 10.
        let exact = 65536.0 / 10f64.sqrt();
        assert!((f64::from(x) - exact).abs() / exact < 0.01, "{x} vs {exact}");
    }

    #[test]
    fn the_clock_ticks_in_1024_ns_units() {
        // 5 ms = 4882.8 ticks -> 4882; 100 ms = 97656.25 -> 97656 (Linux
        // `MS2TIME`); 1023 ns is still tick 0.
        let p = CodelConfig::defaults(&ctx(Limit::Packets(10))).params();
        assert_eq!((p.target_ticks(), p.interval_ticks()), (4882, 97656));
        assert_eq!((ticks(1023), ticks(1024), ticks(120_000_000)), (0, 1, 117_187));
        // control law at count 1: 97656 · 0xFFFF / 2^16 = 97654.5 -> 97654 ticks.
        assert_eq!(control_law(0, 97656, REC_INV_SQRT_ONE), 97654);
    }

    #[test]
    fn dropping_starts_strictly_after_one_interval_on_the_tick_clock() {
        // First dequeue at 20 ms already waits 20 ms > 5 ms: first_above_time =
        // tick(20 ms) + 97656 = 19531 + 97656 = 117187, which is tick(120 ms)
        // (117187.5 truncated). Linux drops only when now is strictly after it, so
        // not at 120 ms but at 121 ms (tick 118164).
        let (drops, _, _) = run(20, 200, false);
        assert_eq!(drops.first(), Some(&121));
    }

    /// The whole milliseconds at which drops (or marks) k = 1..n fall: drop 1 at
    /// `first_ms`, then drop k+1 is due interval·rec_inv_sqrt(count k) ticks after
    /// drop k's due tick (RFC 8289 §5.5 with Linux's estimates), seen by the first
    /// 1-ms dequeue at or after it.
    fn linux_schedule(first_ms: u64, n: usize) -> Vec<u64> {
        let tick_of = |ms: u64| (ms * 1_000_000) >> 10;
        let mut out = vec![first_ms];
        let mut due = tick_of(first_ms);
        for rec in LINUX_REC_INV_SQRT.iter().take(n - 1) {
            due += (97656 * u64::from(*rec)) >> 16;
            let mut t = *out.last().unwrap();
            while tick_of(t) < due {
                t += 1;
            }
            out.push(t);
        }
        out
    }

    #[test]
    fn drop_spacing_follows_linux_control_law() {
        // Delay 60 ms: first_above_time = 58593 + 97656 = 156249 ticks; 160 ms is
        // tick 156250, strictly after: drop 1 at 160 ms. Then 260, 310 (not 331: the
        // count-2 estimate is 0.5, not 0.707), 367, 416, 460, ...
        let (drops, _, _) = run(60, 1500, false);
        let want = linux_schedule(160, 10);
        assert_eq!(want[..5], [160, 260, 310, 367, 416]);
        assert_eq!(drops[..10], want[..]);
    }

    #[test]
    fn ecn_capable_packets_are_marked_on_the_same_schedule() {
        let (drops, marks, _) = run(60, 1500, true);
        assert!(drops.is_empty());
        assert_eq!(marks[..10], linux_schedule(160, 10)[..]);
    }

    #[test]
    fn reentry_takes_one_newton_step_from_the_last_estimate() {
        // The last dropping state ended at count 4 (estimate 31968) having entered
        // at count 1, and its next drop was due at tick 1_000_000. The queue goes
        // bad again at tick 1_100_000 (< 16 intervals later): count restarts at
        // 4 − 1 = 3 and the estimate takes ONE step from 31968 with count 3:
        // x = 0.48779, x/2 · (3 − 3x²) = 0.55759 -> 36542 (exact 1/sqrt(3) would be
        // 37837); the next drop is due 97656 · 36542 / 2^16 = 54451.9 -> 54451 ticks later.
        let p = CodelConfig::defaults(&ctx(Limit::Packets(10_000))).params();
        let now_ticks = 1_100_000u64;
        let now = SimTime::from_nanos(now_ticks << CODEL_SHIFT);
        let mut v = CodelVars {
            count: 4,
            lastcount: 1,
            dropping: false,
            rec_inv_sqrt: 31968,
            first_above_time: Some(now_ticks - 1),
            drop_next: 1_000_000,
        };
        let mut fifo = DropTail::new(DropTailConfig { limit: Limit::Packets(100) }).unwrap();
        for i in 0..10 {
            fifo.push_back(Stamped { pkt: TestPacket::new(i, 0, 1500), at: SimTime::ZERO });
        }
        let (mut d, mut m) = (Vec::new(), Vec::new());
        v.dequeue(&p, now, &mut fifo, Exemption { mtu: 1500, other_backlog: 0 }, &mut d, &mut m);
        assert_eq!(d.len(), 1);
        assert!(v.dropping);
        assert_eq!((v.count, v.lastcount, v.rec_inv_sqrt), (3, 3, 36542));
        assert_eq!(v.drop_next, now_ticks + 54451);
    }

    /// A queue of one 1500-B packet, enqueued at `at_ms`.
    fn one_packet(id: u64, at_ms: u64) -> DropTail<Stamped<TestPacket>> {
        let mut fifo = DropTail::new(DropTailConfig { limit: Limit::Packets(100) }).unwrap();
        fifo.push_back(Stamped { pkt: TestPacket::new(id, 0, 1500), at: SimTime::from_millis(at_ms) });
        fifo
    }

    #[test]
    fn the_one_mtu_exemption_counts_the_whole_qdiscs_backlog() {
        // A queue that never holds more than its head, each packet 50 ms old when it
        // leaves. Alone (nothing else queued) the exemption holds and nothing is ever
        // dropped. Behind 100 kB in other queues (FQ-CoDel's other flows, which Linux
        // counts: `sch->qstats.backlog`), the sojourn decides: first_above_time is set
        // at the first dequeue (50 ms = tick 48828, + 97656 = 146484); 150 ms is tick
        // 146484 too, not strictly after, so the first drop comes at 151 ms.
        let p = CodelConfig::defaults(&ctx(Limit::Packets(10_000))).params();
        for (other, first_drop) in [(0u64, None), (100_000, Some(151u64))] {
            let mut v = CodelVars::default();
            let (mut d, mut m) = (Vec::new(), Vec::new());
            let mut dropped_at = None;
            for t in 50..400u64 {
                let mut fifo = one_packet(t, t - 50);
                v.dequeue(&p, SimTime::from_millis(t), &mut fifo, Exemption { mtu: 1500, other_backlog: other }, &mut d, &mut m);
                if !d.is_empty() && dropped_at.is_none() {
                    dropped_at = Some(t);
                }
            }
            assert_eq!(dropped_at, first_drop, "other backlog {other} B");
        }
    }

    #[test]
    fn an_empty_dequeue_leaves_the_dropping_state_but_keeps_first_above_time() {
        // Linux `codel_dequeue` returns at once on an empty queue, clearing only
        // `dropping`; the next packet that still waits too long finds the clock running.
        let p = CodelConfig::defaults(&ctx(Limit::Packets(10_000))).params();
        let exempt = Exemption { mtu: 1500, other_backlog: 100_000 };
        let mut v = CodelVars { dropping: true, first_above_time: Some(123_456), ..CodelVars::default() };
        let mut empty = DropTail::new(DropTailConfig { limit: Limit::Packets(100) }).unwrap();
        let (mut d, mut m) = (Vec::new(), Vec::new());
        assert!(v.dequeue::<TestPacket>(&p, SimTime::from_millis(100), &mut empty, exempt, &mut d, &mut m).is_none());
        assert!(!v.dropping);
        assert_eq!(v.first_above_time, Some(123_456));
        // tick(200 ms) = 195312 > 123456: the next late packet may be dropped at once.
        let mut fifo = one_packet(1, 150);
        v.dequeue(&p, SimTime::from_millis(200), &mut fifo, exempt, &mut d, &mut m);
        assert_eq!(d.len(), 1);
        assert!(v.dropping);
    }

    #[test]
    fn leaves_the_dropping_state_when_sojourn_falls_below_target() {
        let cfg = CodelConfig::defaults(&ctx(Limit::Packets(10_000)));
        let mut q = Codel::new(cfg).unwrap();
        let mut rng = netunits::rng_stream(1, 0);
        let (mut d, mut m) = (Vec::new(), Vec::new());
        for i in 0..200 {
            q.enqueue(SimTime::ZERO, TestPacket::new(i, 0, 1500), &mut rng, &mut d);
        }
        for t in [10, 120, 130] {
            q.dequeue(SimTime::from_millis(t), &mut rng, &mut d, &mut m);
        }
        assert!(q.dropping());
        // A fresh packet behind an emptied queue: sojourn 0.
        while q.len_packets() > 0 {
            q.fifo.pop_front();
        }
        q.enqueue(SimTime::from_millis(140), TestPacket::new(999, 0, 1500), &mut rng, &mut d);
        q.enqueue(SimTime::from_millis(140), TestPacket::new(1000, 0, 1500), &mut rng, &mut d);
        q.dequeue(SimTime::from_millis(141), &mut rng, &mut d, &mut m);
        assert!(!q.dropping());
    }

    #[test]
    fn interval_must_exceed_target() {
        let mut p = crate::Params::new();
        p.insert("target".into(), serde_json::json!(200_000_000u64));
        let e = crate::build::<TestPacket>("codel", &p, &ctx(Limit::Packets(100))).err().unwrap();
        assert!(e.to_string().contains("interval"), "{e}");
    }
}
