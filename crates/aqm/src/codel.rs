//! CoDel, Controlled Delay (RFC 8289).
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
//! [`CodelVars`] holds one instance of that state machine; FQ-CoDel keeps one per
//! flow queue.
//!
//! Choices where RFC 8289 leaves room:
//! - `maxpacket` (the "less than one MTU queued" test) is the largest packet seen at
//!   enqueue so far.
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

/// RFC 8289 §5's per-queue variables.
#[derive(Clone, Debug, Default)]
pub(crate) struct CodelVars {
    /// Drops (or marks) since entering the dropping state.
    count: u32,
    /// `count` when the last dropping state was entered.
    lastcount: u32,
    dropping: bool,
    /// When the sojourn time will have been above target for a full interval.
    first_above_time: Option<SimTime>,
    /// When the next drop is due in the dropping state.
    drop_next: SimTime,
}

/// RFC 8289 §5.5: `t + interval / sqrt(count)`.
fn control_law(t: SimTime, interval: SimDuration, count: u32) -> SimTime {
    t + SimDuration::from_nanos((interval.as_nanos() as f64 / f64::from(count.max(1)).sqrt()).round() as u64)
}

impl CodelVars {
    /// Is CoDel in its dropping state?
    pub(crate) fn dropping(&self) -> bool {
        self.dropping
    }

    /// RFC 8289 §5.4 `dodequeue`: take the head and say whether it may be dropped.
    fn dodequeue<P: Packet>(
        &mut self,
        p: &CodelParams,
        now: SimTime,
        q: &mut DropTail<Stamped<P>>,
        maxpacket: u64,
    ) -> (Option<Stamped<P>>, bool) {
        let Some(s) = q.pop_front() else {
            self.first_above_time = None;
            return (None, false);
        };
        let sojourn = now.saturating_since(s.at);
        // Below target, or less than one MTU left queued: the queue is fine.
        if sojourn < p.target || q.len_bytes() <= maxpacket {
            self.first_above_time = None;
            return (Some(s), false);
        }
        match self.first_above_time {
            None => {
                self.first_above_time = Some(now + p.interval);
                (Some(s), false)
            }
            Some(t) => (Some(s), now >= t),
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

    /// RFC 8289 §5.5 `dequeue`. Dropped packets go to `dropped` with
    /// [`DropReason::Sojourn`]; marks are reported in `marked`.
    pub(crate) fn dequeue<P: Packet>(
        &mut self,
        p: &CodelParams,
        now: SimTime,
        q: &mut DropTail<Stamped<P>>,
        maxpacket: u64,
        dropped: &mut Vec<(P, DropReason)>,
        marked: &mut Vec<MarkReason>,
    ) -> Option<P> {
        let (mut head, mut ok_to_drop) = self.dodequeue(p, now, q, maxpacket);
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
                self.count += 1;
                match Self::signal(p, s, marked) {
                    Ok(m) => {
                        // Marked instead of dropped: it goes out; schedule the next signal.
                        self.drop_next = control_law(self.drop_next, p.interval, self.count);
                        return Some(m.pkt);
                    }
                    Err(d) => dropped.push((d.pkt, DropReason::Sojourn)),
                }
                (head, ok_to_drop) = self.dodequeue(p, now, q, maxpacket);
                if ok_to_drop {
                    self.drop_next = control_law(self.drop_next, p.interval, self.count);
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
                    (head, _) = self.dodequeue(p, now, q, maxpacket);
                }
            }
            self.dropping = true;
            // If the queue went bad again soon after the last dropping state, start
            // from that state's drop rate (RFC 8289 §5.5, the Linux variant).
            let delta = self.count.saturating_sub(self.lastcount);
            let since_next = now.as_nanos() as i128 - self.drop_next.as_nanos() as i128;
            self.count = if delta > 1 && since_next < 16 * p.interval.as_nanos() as i128 { delta } else { 1 };
            self.drop_next = control_law(now, p.interval, self.count);
            self.lastcount = self.count;
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
        self.vars.dequeue(&params, now, &mut self.fifo, self.maxpacket, dropped, marked)
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

    #[test]
    fn dropping_starts_one_interval_after_sojourn_first_exceeds_target() {
        // First dequeue at 20 ms already waits 20 ms > 5 ms: first_above_time = 120 ms,
        // so the first drop is at the first dequeue at or after 120 ms.
        let (drops, _, _) = run(20, 200, false);
        assert_eq!(drops.first(), Some(&120));
    }

    #[test]
    fn drop_spacing_follows_interval_over_sqrt_count() {
        // Delay 60 ms: dropping starts at 160 ms with count 1; drop k+1 is due
        // interval/sqrt(k) after drop k's due time (RFC 8289 §5.5). Dequeues happen on
        // whole milliseconds, so each drop is seen at the first tick at or after its
        // due time.
        let (drops, _, _) = run(60, 1500, false);
        assert_eq!(drops[0], 160);
        let mut due: f64 = 160.0 + 100.0;
        for (k, t) in drops.iter().enumerate().skip(1).take(10) {
            assert_eq!(*t, due.ceil() as u64, "drop {} at {t} ms, due {due}", k + 1);
            due += 100.0 / ((k + 1) as f64).sqrt();
        }
    }

    #[test]
    fn ecn_capable_packets_are_marked_on_the_same_schedule() {
        let (drops, marks, _) = run(60, 1500, true);
        assert!(drops.is_empty());
        assert_eq!(marks[0], 160);
        assert_eq!(marks[1], 260);
        assert_eq!(marks[2], (260.0 + 100.0 / 2f64.sqrt()).ceil() as u64);
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
