//! BLUE (Feng, Kandlur, Saha & Shin, IEEE/ACM ToN 10(4), 2002): one marking
//! probability `P_b` driven by loss and idle events instead of by queue length.
//!
//! Read this first (seed `002_b0279b100b55935b.txt` restates the algorithm as
//! pseudocode, which is what this file follows):
//! - Upon packet loss (buffer overflow) or `q_len > q_lim`: if more than
//!   `freeze_time` has passed since the last change, `P_b += d1`.
//! - Upon link idle: if more than `freeze_time` has passed, `P_b −= d2`.
//! - Every arrival is marked (ECN-capable and `ecn` on) or dropped with probability
//!   `P_b`.
//!
//! Idle events in a sans-IO queue: the link is idle when the owner asks for a packet
//! and the queue is empty (`dequeue` returns `None`). Because an owner might skip that
//! call when it can see the queue is empty, an arrival that finds the queue empty is
//! also treated as an idle event (the link has at most one packet's transmission
//! left). `freeze_time` keeps the two from counting twice. As in the pseudocode,
//! every event that passes the freeze check restarts the freeze clock, even an idle
//! event that finds `P_b` already at 0.
//!
//! [`BlueCore`] (the `P_b` state) and [`blue_enqueue`] are reused by ZRTT, MRTT and
//! PRTO, which replace the per-packet probability `P_b` with a per-flow `P_i`.

use rand::Rng;

use crate::{
    ConfigError, DropReason, DropTail, DropTailConfig, Limit, MarkReason, Packet, ParamReader, Qdisc, QdiscContext,
    SimDuration, SimRng, SimTime, Verdict,
};

/// BLUE configuration. Defaults are seed 002's "recommended settings" (its
/// PERFORMANCE EVALUATION section): freeze_time 50 ms, d1 = 0.02, d2 = 0.002,
/// q_lim = 100 packets.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlueConfig {
    /// Hard buffer limit: the scenario's buffer. An arrival that does not fit is a
    /// loss event.
    pub limit: Limit,
    /// Queue length in packets above which an arrival counts as a congestion event
    /// (seed 002's `q_lim`). Default 100 packets, capped at the scenario buffer: with
    /// a smaller buffer only overflow triggers increases. With a buffer of 100
    /// packets (seed 002's setting) the two events coincide.
    pub q_lim: u64,
    /// Minimum time between two changes of `P_b`. Default 50 ms (seed 002).
    pub freeze_time: SimDuration,
    /// Increment on a loss/`q_lim` event (`det_in`). Default 0.02 (seed 002).
    pub d1: f64,
    /// Decrement on a link-idle event (`det_de`). Default 0.002 (seed 002).
    pub d2: f64,
    /// Mark ECN-capable packets instead of dropping. Default on: seed 002 ran every
    /// experiment with ECN, and BLUE was designed around it (Feng et al. §1).
    pub ecn: bool,
}

impl BlueConfig {
    /// Seed 002's settings, with `q_lim` capped at the scenario buffer.
    pub fn defaults(ctx: &QdiscContext) -> Self {
        BlueConfig {
            limit: ctx.limit,
            q_lim: 100.min(ctx.limit_packets()),
            freeze_time: SimDuration::from_millis(50),
            d1: 0.02,
            d2: 0.002,
            ecn: true,
        }
    }

    /// Read the scenario's parameters on top of [`BlueConfig::defaults`].
    pub fn from_params(r: &mut ParamReader<'_>, ctx: &QdiscContext) -> Result<Self, ConfigError> {
        let d = Self::defaults(ctx);
        let cfg = BlueConfig {
            limit: d.limit,
            q_lim: r.u64("q_lim", d.q_lim, 1, u64::MAX, "packets, at least 1")?,
            freeze_time: r.duration(
                "freeze_time",
                d.freeze_time,
                SimDuration::from_micros(1),
                SimDuration::from_secs(3600),
                "nanoseconds, 1 us to 1 h",
            )?,
            d1: r.f64("d1", d.d1, f64::MIN_POSITIVE, 1.0, "a probability step in (0, 1]")?,
            d2: r.f64("d2", d.d2, f64::MIN_POSITIVE, 1.0, "a probability step in (0, 1]")?,
            ecn: r.bool("ecn", d.ecn)?,
        };
        cfg.validate_as(r.qdisc())?;
        Ok(cfg)
    }

    /// Check ranges, naming `qdisc` in errors.
    pub fn validate_as(&self, qdisc: &'static str) -> Result<(), ConfigError> {
        let err = |param, value: String, allowed| Err(ConfigError { qdisc, param, value, allowed });
        if self.q_lim == 0 {
            return err("q_lim", "0".into(), "packets, at least 1");
        }
        if self.freeze_time.as_nanos() == 0 {
            return err("freeze_time", "0".into(), "nanoseconds, 1 us to 1 h");
        }
        if !(self.d1 > 0.0 && self.d1 <= 1.0) {
            return err("d1", self.d1.to_string(), "a probability step in (0, 1]");
        }
        if !(self.d2 > 0.0 && self.d2 <= 1.0) {
            return err("d2", self.d2.to_string(), "a probability step in (0, 1]");
        }
        DropTailConfig { limit: self.limit }.validate().map_err(|e| ConfigError { qdisc, ..e })
    }
}

/// BLUE's marking probability and its freeze clock.
#[derive(Clone, Debug)]
pub(crate) struct BlueCore {
    p: f64,
    /// Time of the last change; `None` before the first, so the first event acts at once.
    last_update: Option<SimTime>,
    freeze_time: SimDuration,
    d1: f64,
    d2: f64,
}

impl BlueCore {
    pub(crate) fn new(cfg: &BlueConfig) -> Self {
        BlueCore { p: 0.0, last_update: None, freeze_time: cfg.freeze_time, d1: cfg.d1, d2: cfg.d2 }
    }

    /// `P_b`.
    pub(crate) fn p(&self) -> f64 {
        self.p
    }

    fn thawed(&self, now: SimTime) -> bool {
        // Seed 002: "If ((now − last_update) > freeze_time)", strictly greater.
        self.last_update.is_none_or(|t| now.saturating_since(t) > self.freeze_time)
    }

    /// Loss or `q_len > q_lim`: `P_b += d1` unless frozen.
    pub(crate) fn congestion(&mut self, now: SimTime) {
        if self.thawed(now) {
            self.p = (self.p + self.d1).min(1.0);
            self.last_update = Some(now);
        }
    }

    /// Link idle: `P_b −= d2` unless frozen.
    pub(crate) fn link_idle(&mut self, now: SimTime) {
        if self.thawed(now) {
            self.p = (self.p - self.d2).max(0.0);
            self.last_update = Some(now);
        }
    }
}

/// BLUE's arrival path with the per-packet probability supplied by the caller:
/// idle and congestion events first, then mark or drop with probability `p`.
/// `p_of` sees the core after this arrival's events (ZRTT scales its `P_b`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn blue_enqueue<P: Packet>(
    core: &mut BlueCore,
    fifo: &mut DropTail<P>,
    q_lim: u64,
    ecn: bool,
    now: SimTime,
    mut pkt: P,
    p_of: impl FnOnce(&BlueCore, &P) -> f64,
    rng: &mut SimRng,
    dropped: &mut Vec<(P, DropReason)>,
) -> Verdict {
    if fifo.len_packets() == 0 {
        core.link_idle(now);
    }
    if !fifo.fits(u64::from(pkt.meta().bytes)) {
        core.congestion(now);
        dropped.push((pkt, DropReason::Overflow));
        return Verdict::Drop(DropReason::Overflow);
    }
    // q_len counts the arrival: the queue would hold more than q_lim packets.
    if fifo.len_packets() as u64 + 1 > q_lim {
        core.congestion(now);
    }
    let p = p_of(core, &pkt).clamp(0.0, 1.0);
    if p > 0.0 && rng.random::<f64>() < p {
        if ecn && pkt.meta().ecn_capable {
            pkt.mark_ce();
            fifo.push_back(pkt);
            return Verdict::Mark(MarkReason::Early);
        }
        dropped.push((pkt, DropReason::Early));
        return Verdict::Drop(DropReason::Early);
    }
    fifo.push_back(pkt);
    Verdict::Admit
}

/// BLUE's departure path: an empty queue when the link asks is a link-idle event.
pub(crate) fn blue_dequeue<P: Packet>(core: &mut BlueCore, fifo: &mut DropTail<P>, now: SimTime) -> Option<P> {
    let p = fifo.pop_front();
    if p.is_none() {
        core.link_idle(now);
    }
    p
}

/// BLUE in front of a FIFO.
#[derive(Debug)]
pub struct Blue<P> {
    cfg: BlueConfig,
    core: BlueCore,
    fifo: DropTail<P>,
}

impl<P: Packet> Blue<P> {
    /// Build BLUE; fails on an invalid configuration.
    pub fn new(cfg: BlueConfig) -> Result<Self, ConfigError> {
        cfg.validate_as("blue")?;
        Ok(Blue { core: BlueCore::new(&cfg), fifo: DropTail::new(DropTailConfig { limit: cfg.limit })?, cfg })
    }

    /// The marking probability `P_b` (ZRTT's input, seed 002 Eq. 4).
    pub fn p_b(&self) -> f64 {
        self.core.p()
    }

    /// The configuration in force.
    pub fn config(&self) -> &BlueConfig {
        &self.cfg
    }
}

impl<P: Packet> Qdisc<P> for Blue<P> {
    fn name(&self) -> &'static str {
        "blue"
    }

    fn enqueue(&mut self, now: SimTime, pkt: P, rng: &mut SimRng, dropped: &mut Vec<(P, DropReason)>) -> Verdict {
        let (q_lim, ecn) = (self.cfg.q_lim, self.cfg.ecn);
        blue_enqueue(&mut self.core, &mut self.fifo, q_lim, ecn, now, pkt, |c, _| c.p(), rng, dropped)
    }

    fn dequeue(
        &mut self,
        now: SimTime,
        _rng: &mut SimRng,
        _dropped: &mut Vec<(P, DropReason)>,
        _marked: &mut Vec<MarkReason>,
    ) -> Option<P> {
        blue_dequeue(&mut self.core, &mut self.fifo, now)
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

    fn blue(limit: u64, q_lim: u64) -> Blue<TestPacket> {
        Blue::new(BlueConfig { q_lim, ..BlueConfig::defaults(&ctx(Limit::Packets(limit))) }).unwrap()
    }

    fn ms(x: u64) -> SimTime {
        SimTime::from_millis(x)
    }

    #[test]
    fn overflow_raises_p_b_by_d1_at_most_once_per_freeze_time() {
        let mut q = blue(5, 100);
        let mut rng = netunits::rng_stream(1, 0);
        let mut d = Vec::new();
        for i in 0..5 {
            assert_eq!(q.enqueue(ms(0), TestPacket::new(i, 0, 1500), &mut rng, &mut d), Verdict::Admit);
        }
        assert_eq!(q.p_b(), 0.0);
        let mut over = |q: &mut Blue<TestPacket>, t: SimTime| q.enqueue(t, TestPacket::new(99, 0, 1500), &mut rng, &mut d);
        // The first arrival found the queue empty at 0 ms: an idle event (P_b stays 0,
        // but the freeze clock starts, as in seed 002's pseudocode).
        assert_eq!(over(&mut q, ms(30)), Verdict::Drop(DropReason::Overflow));
        assert_eq!(q.p_b(), 0.0);
        // First loss after the freeze: P_b = d1.
        over(&mut q, ms(60));
        assert!((q.p_b() - 0.02).abs() < 1e-12);
        // Frozen for 50 ms (strictly more than freeze_time must pass).
        over(&mut q, ms(80));
        over(&mut q, ms(110));
        assert!((q.p_b() - 0.02).abs() < 1e-12);
        over(&mut q, ms(110) + SimDuration::from_nanos(1));
        assert!((q.p_b() - 0.04).abs() < 1e-12);
    }

    #[test]
    fn a_queue_above_q_lim_is_a_congestion_event_too() {
        let mut q = blue(1000, 10);
        let mut rng = netunits::rng_stream(1, 0);
        let mut d = Vec::new();
        for i in 0..10 {
            q.enqueue(ms(0), TestPacket::new(i, 0, 1500), &mut rng, &mut d);
        }
        assert_eq!(q.p_b(), 0.0);
        q.enqueue(ms(60), TestPacket::new(10, 0, 1500), &mut rng, &mut d);
        assert!((q.p_b() - 0.02).abs() < 1e-12);
    }

    #[test]
    fn link_idle_lowers_p_b_by_d2_at_most_once_per_freeze_time_and_not_below_zero() {
        let mut q = blue(5, 100);
        let mut rng = netunits::rng_stream(1, 0);
        let (mut d, mut m) = (Vec::new(), Vec::new());
        for i in 0..5 {
            q.enqueue(ms(0), TestPacket::new(i, 0, 1500), &mut rng, &mut d);
        }
        q.enqueue(ms(60), TestPacket::new(5, 0, 1500), &mut rng, &mut d);
        assert!((q.p_b() - 0.02).abs() < 1e-12);
        while q.dequeue(ms(70), &mut rng, &mut d, &mut m).is_some() {}
        // The `None` at 70 ms is inside the freeze window of the 60 ms increase.
        assert!((q.p_b() - 0.02).abs() < 1e-12);
        assert!(q.dequeue(ms(111), &mut rng, &mut d, &mut m).is_none());
        assert!((q.p_b() - 0.018).abs() < 1e-12);
        q.dequeue(ms(150), &mut rng, &mut d, &mut m);
        assert!((q.p_b() - 0.018).abs() < 1e-12);
        // Nine more spaced idles take it to 0 and it stays there.
        for k in 0..20 {
            q.dequeue(ms(200 + 60 * k), &mut rng, &mut d, &mut m);
        }
        assert_eq!(q.p_b(), 0.0);
    }

    #[test]
    fn arrivals_are_marked_or_dropped_with_probability_p_b() {
        for ecn_capable in [true, false] {
            let mut q = blue(5, 100);
            let mut rng = netunits::rng_stream(2, 0);
            let (mut d, mut m) = (Vec::new(), Vec::new());
            for i in 0..5 {
                q.enqueue(ms(0), TestPacket::new(i, 0, 1500), &mut rng, &mut d);
            }
            // Five losses 60 ms apart: P_b = 5·d1 = 0.1.
            for k in 1..=5 {
                q.enqueue(ms(60 * k), TestPacket::new(99, 0, 1500), &mut rng, &mut d);
            }
            assert!((q.p_b() - 0.1).abs() < 1e-12);
            d.clear();
            // Keep 4..5 packets queued: no idle, no overflow, below q_lim.
            q.dequeue(ms(400), &mut rng, &mut d, &mut m);
            let n = 20_000;
            let mut hits = 0;
            for i in 0..n {
                let mut p = TestPacket::new(1000 + i, 1, 1500);
                p.meta.ecn_capable = ecn_capable;
                match q.enqueue(ms(400), p, &mut rng, &mut d) {
                    Verdict::Mark(_) => {
                        assert!(ecn_capable);
                        hits += 1;
                        q.dequeue(ms(400), &mut rng, &mut d, &mut m);
                    }
                    Verdict::Drop(r) => {
                        assert!(!ecn_capable);
                        assert_eq!(r, DropReason::Early);
                        hits += 1;
                    }
                    Verdict::Admit => {
                        q.dequeue(ms(400), &mut rng, &mut d, &mut m);
                    }
                }
            }
            assert!((q.p_b() - 0.1).abs() < 1e-12);
            let (p, n) = (0.1, n as f64);
            let sd = (n * p * (1.0 - p)).sqrt();
            assert!((hits as f64 - n * p).abs() < 4.0 * sd, "{hits}");
        }
    }

    #[test]
    fn q_lim_defaults_to_100_capped_by_the_buffer() {
        assert_eq!(BlueConfig::defaults(&ctx(Limit::Packets(1000))).q_lim, 100);
        assert_eq!(BlueConfig::defaults(&ctx(Limit::Packets(40))).q_lim, 40);
    }
}
