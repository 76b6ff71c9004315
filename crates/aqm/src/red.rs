//! RED, Random Early Detection (Floyd & Jacobson 1993, "FJ93" below), with the
//! gentle variant, byte mode, ECN marking and Adaptive RED (Floyd, Gummadi &
//! Shenker 2001, "ARED" below).
//!
//! Read this first:
//! - FJ93 §4 and its Fig. 2 give the whole algorithm: an EWMA of the queue length on
//!   every arrival, a linear marking probability `p_b` between `min_th` and `max_th`,
//!   and the count-based spacing `p_a = p_b / (1 − count·p_b)` that makes the gaps
//!   between marks roughly uniform instead of geometric.
//! - When a packet arrives to an empty queue the average decays as if `m` packets of
//!   typical size had been sent on the idle link: `avg ← (1 − w_q)^m · avg`, with
//!   `m = idle time / transmission time of a mean packet` (FJ93 §4, Fig. 2, the
//!   `f(time − q_time)` function).
//! - The averaging and marking live in [`RedCore`], which CHOKe reuses
//!   (`choke.rs`); [`Red`] is that core in front of the [`DropTail`] FIFO.
//! - Forced drops (above `max_th`, or above `2·max_th` in gentle mode) are drops even
//!   for ECN-capable packets, as in ns-2; only the probabilistic region marks.
//!   The scenario's buffer is a hard limit on top of RED (DropReason::Overflow).

use rand::Rng;

use crate::{
    ConfigError, DropReason, DropTail, DropTailConfig, Limit, MarkReason, Packet, PacketMeta, ParamReader, Qdisc,
    QdiscContext, SimDuration, SimRng, SimTime, Verdict,
};
use netunits::Bandwidth;

/// RED configuration. Thresholds are in packets, or in units of
/// `mean_packet_bytes` when `byte_mode` is on (the queue is then measured in bytes).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RedConfig {
    /// Hard buffer limit: the scenario's buffer.
    pub limit: Limit,
    /// EWMA weight of the average queue. Default 0.002 (the value of FJ93's
    /// simulations); with `adaptive`, `1 − exp(−1/C)` for a link of `C` packets/s
    /// (ARED's automatic setting).
    pub w_q: f64,
    /// Lower threshold. Default `max_th / 3` (iproute2 `tc red`'s rule, after
    /// Floyd's REDparameters note).
    pub min_th: f64,
    /// Upper threshold. Default a quarter of the buffer in packets (iproute2 `tc
    /// red`'s default when only the limit is given).
    pub max_th: f64,
    /// `p_b` at `max_th`. Default 0.1 (FJ93's simulations use 1/50..1/10; ns-2 and
    /// ARED start at 0.1).
    pub max_p: f64,
    /// Gentle RED: between `max_th` and `2·max_th` the probability rises linearly
    /// from `max_p` to 1 instead of jumping to 1 (Floyd 2000, "Recommendation on
    /// using the gentle variant of RED"). Default off (FJ93, Linux); on with
    /// `adaptive`, as ARED recommends.
    pub gentle: bool,
    /// Byte mode (FJ93 §4, "byte mode"): the queue is measured in bytes and `p_b` is
    /// scaled by `packet bytes / mean_packet_bytes`, so large packets are marked
    /// more often. Default off.
    pub byte_mode: bool,
    /// Mark ECN-capable packets instead of dropping them in the probabilistic region
    /// (RFC 3168 §7). Default off (Linux `tc red` and ns-2 default).
    pub ecn: bool,
    /// Adaptive RED: adapt `max_p` by AIMD every `adapt_interval` so the average
    /// stays between `min_th + 0.4·(max_th − min_th)` and `min_th + 0.6·(max_th −
    /// min_th)` (ARED Fig. 2). Default off.
    pub adaptive: bool,
    /// ARED's adaptation interval. Default 0.5 s (ARED Fig. 2).
    pub adapt_interval: SimDuration,
    /// Link rate in bits/s, for the idle-time correction.
    pub rate_bps: u64,
    /// Typical packet size in bytes (ns-2's `mean_pktsize`), for the idle-time
    /// correction and byte mode.
    pub mean_packet_bytes: u32,
}

impl RedConfig {
    /// Defaults derived from the scenario (see the field docs for sources).
    pub fn defaults(ctx: &QdiscContext) -> Self {
        let buffer = ctx.limit_packets() as f64;
        let max_th = buffer / 4.0;
        RedConfig {
            limit: ctx.limit,
            w_q: 0.002,
            min_th: max_th / 3.0,
            max_th,
            max_p: 0.1,
            gentle: false,
            byte_mode: false,
            ecn: false,
            adaptive: false,
            adapt_interval: SimDuration::from_millis(500),
            rate_bps: ctx.rate_bps,
            mean_packet_bytes: ctx.mean_packet_bytes,
        }
    }

    /// ARED's automatic setting: `w_q = 1 − exp(−1/C)`, `C` the link capacity in mean packets per second.
    pub fn ared_w_q(rate_bps: u64, mean_packet_bytes: u32) -> f64 {
        let c = rate_bps as f64 / (8.0 * f64::from(mean_packet_bytes.max(1)));
        if c <= 1.0 {
            0.002
        } else {
            1.0 - (-1.0 / c).exp()
        }
    }

    /// Read the scenario's parameters on top of [`RedConfig::defaults`], then validate.
    pub fn from_params(r: &mut ParamReader<'_>, ctx: &QdiscContext) -> Result<Self, ConfigError> {
        let d = Self::defaults(ctx);
        let adaptive = r.bool("adaptive", false)?;
        let w_default = if adaptive { Self::ared_w_q(ctx.rate_bps, ctx.mean_packet_bytes) } else { d.w_q };
        let cfg = RedConfig {
            adaptive,
            w_q: r.f64("w_q", w_default, f64::MIN_POSITIVE, 1.0, "a weight in (0, 1]")?,
            min_th: r.f64("min_th", d.min_th, 0.0, 1e12, "packets, at least 0")?,
            max_th: r.f64("max_th", d.max_th, f64::MIN_POSITIVE, 1e12, "packets, greater than min_th")?,
            max_p: r.f64("max_p", d.max_p, f64::MIN_POSITIVE, 1.0, "a probability in (0, 1]")?,
            gentle: r.bool("gentle", adaptive)?,
            byte_mode: r.bool("byte_mode", d.byte_mode)?,
            ecn: r.bool("ecn", d.ecn)?,
            adapt_interval: r.duration(
                "adapt_interval",
                d.adapt_interval,
                SimDuration::from_millis(1),
                SimDuration::from_secs(3600),
                "nanoseconds, 1 ms to 1 h",
            )?,
            ..d
        };
        cfg.validate_as(r.qdisc())?;
        Ok(cfg)
    }

    /// Check ranges and the cross-field rules, naming `qdisc` in errors.
    pub fn validate_as(&self, qdisc: &'static str) -> Result<(), ConfigError> {
        let err = |param, value: String, allowed| Err(ConfigError { qdisc, param, value, allowed });
        if !(self.w_q > 0.0 && self.w_q <= 1.0) {
            return err("w_q", self.w_q.to_string(), "a weight in (0, 1]");
        }
        if !(self.min_th >= 0.0 && self.min_th.is_finite()) {
            return err("min_th", self.min_th.to_string(), "packets, at least 0");
        }
        if !(self.max_th > self.min_th && self.max_th.is_finite()) {
            return err("max_th", self.max_th.to_string(), "packets, greater than min_th");
        }
        if !(self.max_p > 0.0 && self.max_p <= 1.0) {
            return err("max_p", self.max_p.to_string(), "a probability in (0, 1]");
        }
        if self.rate_bps == 0 {
            return err("rate_bps", "0".into(), "a link rate of at least 1 bit/s");
        }
        if self.mean_packet_bytes == 0 {
            return err("mean_packet_bytes", "0".into(), "at least 1 byte");
        }
        if self.adapt_interval.as_nanos() == 0 {
            return err("adapt_interval", "0".into(), "nanoseconds, 1 ms to 1 h");
        }
        DropTailConfig { limit: self.limit }.validate().map_err(|e| ConfigError { qdisc, ..e })
    }
}

/// What RED decided for one arrival.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RedAction {
    /// Below `min_th`, or the coin said no.
    Admit,
    /// Probabilistic region, ECN-capable packet, `ecn` on.
    Mark,
    /// Probabilistic or forced drop.
    Drop,
}

/// RED's state: the average queue, the count since the last mark, the idle clock
/// and (ARED) the current `max_p`. Shared by RED and CHOKe.
#[derive(Clone, Debug)]
pub(crate) struct RedCore {
    cfg: RedConfig,
    avg: f64,
    /// Packets since the last mark while in the marking region; −1 below `min_th`
    /// (FJ93 Fig. 2).
    count: i64,
    /// Start of the current idle period (queue empty), if the queue is empty.
    idle_since: Option<SimTime>,
    max_p: f64,
    next_adapt: SimTime,
    /// Transmission time of a mean packet: the unit of the idle correction.
    ptc: SimDuration,
}

impl RedCore {
    pub(crate) fn new(cfg: RedConfig) -> Self {
        let ptc = Bandwidth::from_bps(cfg.rate_bps).tx_time(u64::from(cfg.mean_packet_bytes)).max(SimDuration::from_nanos(1));
        RedCore {
            avg: 0.0,
            count: -1,
            idle_since: Some(SimTime::ZERO),
            max_p: cfg.max_p,
            next_adapt: SimTime::ZERO + cfg.adapt_interval,
            ptc,
            cfg,
        }
    }

    pub(crate) fn config(&self) -> &RedConfig {
        &self.cfg
    }

    pub(crate) fn avg(&self) -> f64 {
        self.avg
    }

    pub(crate) fn max_p(&self) -> f64 {
        self.max_p
    }

    /// Update the average for an arrival that finds `backlog_*` queued (FJ93 Fig. 2),
    /// then run any ARED adaptations that fell due.
    pub(crate) fn on_arrival(&mut self, now: SimTime, backlog_bytes: u64, backlog_packets: usize) {
        let q = if self.cfg.byte_mode {
            backlog_bytes as f64 / f64::from(self.cfg.mean_packet_bytes)
        } else {
            backlog_packets as f64
        };
        match self.idle_since.take() {
            Some(t0) if backlog_packets == 0 => {
                // FJ93 Fig. 2: m = f(time − q_time), the packets the idle link could have sent.
                let m = (now - t0).as_nanos() as f64 / self.ptc.as_nanos() as f64;
                self.avg *= (1.0 - self.cfg.w_q).powf(m);
            }
            _ => self.avg += self.cfg.w_q * (q - self.avg),
        }
        if self.cfg.adaptive {
            self.adapt_until(now);
        }
    }

    /// The queue became empty at `now`: the idle period starts (FJ93 Fig. 2, `q_time`).
    pub(crate) fn queue_emptied(&mut self, now: SimTime) {
        if self.idle_since.is_none() {
            self.idle_since = Some(now);
        }
    }

    /// Is the average at or above `min_th`? (CHOKe samples a victim only then.)
    pub(crate) fn above_min(&self) -> bool {
        self.avg >= self.cfg.min_th
    }

    /// The marking probability `p_b` for the current average, before count spacing
    /// and byte scaling; `None` in the forced-drop region.
    pub(crate) fn p_b(&self) -> Option<f64> {
        let (min, max) = (self.cfg.min_th, self.cfg.max_th);
        if self.avg < min {
            Some(0.0)
        } else if self.avg < max {
            // FJ93 Fig. 2: p_b = max_p (avg − min_th) / (max_th − min_th)
            Some(self.max_p * (self.avg - min) / (max - min))
        } else if self.cfg.gentle && self.avg < 2.0 * max {
            // Gentle RED: from max_p at max_th to 1 at 2·max_th.
            Some(self.max_p + (1.0 - self.max_p) * (self.avg - max) / max)
        } else {
            None
        }
    }

    /// RED's decision for an arrival (call after [`RedCore::on_arrival`]).
    pub(crate) fn decide(&mut self, rng: &mut SimRng, meta: &PacketMeta) -> RedAction {
        let Some(mut p_b) = self.p_b() else {
            self.count = 0;
            return RedAction::Drop;
        };
        if self.avg < self.cfg.min_th {
            self.count = -1;
            return RedAction::Admit;
        }
        self.count += 1;
        if self.cfg.byte_mode {
            // FJ93 §4 byte mode: p_b ← p_b · PacketSize / MeanPacketSize.
            p_b = (p_b * f64::from(meta.bytes) / f64::from(self.cfg.mean_packet_bytes)).min(1.0);
        }
        // FJ93 Fig. 2: p_a = p_b / (1 − count·p_b), 1 once count·p_b reaches 1.
        let denom = 1.0 - self.count as f64 * p_b;
        let p_a = if denom <= 0.0 { 1.0 } else { (p_b / denom).min(1.0) };
        if p_a > 0.0 && rng.random::<f64>() < p_a {
            self.count = 0;
            if self.cfg.ecn && meta.ecn_capable {
                RedAction::Mark
            } else {
                RedAction::Drop
            }
        } else {
            RedAction::Admit
        }
    }

    /// ARED Fig. 2, once per elapsed interval (the timer of the paper becomes a
    /// catch-up on the next arrival: this code has no timers).
    fn adapt_until(&mut self, now: SimTime) {
        let mut steps = 0;
        while now >= self.next_adapt {
            // After ~200 steps at one average, max_p has hit its bound either way.
            if steps < 200 {
                self.adapt_once();
            }
            steps += 1;
            self.next_adapt += self.cfg.adapt_interval;
            if steps >= 200 {
                let behind = (now - self.next_adapt).as_nanos() / self.cfg.adapt_interval.as_nanos();
                self.next_adapt += self.cfg.adapt_interval.mul(behind + 1);
                break;
            }
        }
    }

    fn adapt_once(&mut self) {
        let (min, max) = (self.cfg.min_th, self.cfg.max_th);
        let (lo, hi) = (min + 0.4 * (max - min), min + 0.6 * (max - min));
        if self.avg > hi && self.max_p <= 0.5 {
            // Additive increase: alpha = min(0.01, max_p/4) (ARED Fig. 2).
            self.max_p += (self.max_p / 4.0).min(0.01);
        } else if self.avg < lo && self.max_p >= 0.01 {
            // Multiplicative decrease: beta = 0.9 (ARED Fig. 2).
            self.max_p *= 0.9;
        }
    }
}

/// RED's decision and the hard limit applied to one arrival, after
/// [`RedCore::on_arrival`]: queue, mark-and-queue, or drop. Shared with CHOKe.
pub(crate) fn red_admit<P: Packet>(
    core: &mut RedCore,
    fifo: &mut DropTail<P>,
    now: SimTime,
    mut pkt: P,
    rng: &mut SimRng,
    dropped: &mut Vec<(P, DropReason)>,
) -> Verdict {
    let verdict = match core.decide(rng, pkt.meta()) {
        RedAction::Drop => Verdict::Drop(DropReason::Early),
        _ if !fifo.fits(u64::from(pkt.meta().bytes)) => Verdict::Drop(DropReason::Overflow),
        RedAction::Mark => Verdict::Mark(MarkReason::Early),
        RedAction::Admit => Verdict::Admit,
    };
    match verdict {
        Verdict::Drop(reason) => {
            dropped.push((pkt, reason));
            if fifo.len_packets() == 0 {
                core.queue_emptied(now);
            }
        }
        Verdict::Mark(_) => {
            pkt.mark_ce();
            fifo.push_back(pkt);
        }
        Verdict::Admit => fifo.push_back(pkt),
    }
    verdict
}

/// Take the head packet and start RED's idle clock if that emptied the queue.
pub(crate) fn red_dequeue<P: Packet>(core: &mut RedCore, fifo: &mut DropTail<P>, now: SimTime) -> Option<P> {
    let p = fifo.pop_front();
    if fifo.len_packets() == 0 {
        core.queue_emptied(now);
    }
    p
}

/// RED in front of a FIFO.
#[derive(Debug)]
pub struct Red<P> {
    core: RedCore,
    fifo: DropTail<P>,
}

impl<P: Packet> Red<P> {
    /// Build RED; fails on an invalid configuration.
    pub fn new(cfg: RedConfig) -> Result<Self, ConfigError> {
        cfg.validate_as("red")?;
        Ok(Red { core: RedCore::new(cfg), fifo: DropTail::new(DropTailConfig { limit: cfg.limit })? })
    }

    /// The average queue (packets, or mean packets in byte mode).
    pub fn avg(&self) -> f64 {
        self.core.avg()
    }

    /// The current `max_p` (changes only with `adaptive`).
    pub fn max_p(&self) -> f64 {
        self.core.max_p()
    }

    /// The configuration in force.
    pub fn config(&self) -> &RedConfig {
        self.core.config()
    }
}

impl<P: Packet> Qdisc<P> for Red<P> {
    fn name(&self) -> &'static str {
        "red"
    }

    fn enqueue(&mut self, now: SimTime, pkt: P, rng: &mut SimRng, dropped: &mut Vec<(P, DropReason)>) -> Verdict {
        self.core.on_arrival(now, self.fifo.len_bytes(), self.fifo.len_packets());
        red_admit(&mut self.core, &mut self.fifo, now, pkt, rng, dropped)
    }

    fn dequeue(
        &mut self,
        now: SimTime,
        _rng: &mut SimRng,
        _dropped: &mut Vec<(P, DropReason)>,
        _marked: &mut Vec<MarkReason>,
    ) -> Option<P> {
        red_dequeue(&mut self.core, &mut self.fifo, now)
    }

    fn len_bytes(&self) -> u64 {
        self.fifo.len_bytes()
    }

    fn len_packets(&self) -> usize {
        self.fifo.len_packets()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::testing::TestPacket;
    use crate::Accounted;

    pub(crate) fn ctx(limit: Limit) -> QdiscContext {
        QdiscContext {
            limit,
            rate_bps: 10_000_000,
            mean_packet_bytes: 1500,
            reference_rtt: SimDuration::from_millis(100),
        }
    }

    /// Thresholds 5/15, max_p 0.1, w_q = 1 (the average is the instantaneous queue),
    /// large buffer: the marking rule can be exercised at a chosen queue length.
    pub(crate) fn instant_cfg() -> RedConfig {
        RedConfig { w_q: 1.0, min_th: 5.0, max_th: 15.0, max_p: 0.1, ..RedConfig::defaults(&ctx(Limit::Packets(1000))) }
    }

    /// RED with `level` packets already queued (pushed past the discipline, so the
    /// forced-drop region can be reached).
    pub(crate) fn prefilled(cfg: RedConfig, level: usize) -> Red<TestPacket> {
        let mut q = Red::new(cfg).unwrap();
        for i in 0..level {
            q.fifo.push_back(TestPacket::new(1_000_000 + i as u64, 0, 1500));
        }
        q
    }

    /// Offer `n` packets one at a time to a queue holding some backlog, dequeuing one
    /// after every admission so the backlog stays constant. Returns the verdicts.
    pub(crate) fn verdicts_at_level<Q: Qdisc<TestPacket>>(q: &mut Q, n: usize, ecn: bool, seed: u64) -> Vec<Verdict> {
        let mut rng = netunits::rng_stream(seed, 3);
        let (mut d, mut m) = (Vec::new(), Vec::new());
        let level = q.len_packets();
        let mut t = SimTime::ZERO;
        let mut out = Vec::with_capacity(n);
        for id in 0..n as u64 {
            t += SimDuration::from_micros(10);
            let mut p = TestPacket::new(id, 1, 1500);
            p.meta.ecn_capable = ecn;
            let v = q.enqueue(t, p, &mut rng, &mut d);
            if !matches!(v, Verdict::Drop(_)) {
                q.dequeue(t, &mut rng, &mut d, &mut m);
            }
            assert_eq!(q.len_packets(), level);
            out.push(v);
        }
        out
    }

    /// Expected gap between marks under FJ93's count rule for a constant `p_b`:
    /// after a mark count restarts at 1, so P(gap > n) = (1 − (n+1)·p_b)/(1 − p_b)
    /// while (n+1)·p_b < 1 and 0 afterwards (telescoping product of 1 − p_a).
    pub(crate) fn expected_gap(p_b: f64) -> f64 {
        let mut e = 0.0;
        let mut n = 0.0;
        while (n + 1.0) * p_b < 1.0 {
            e += (1.0 - (n + 1.0) * p_b) / (1.0 - p_b);
            n += 1.0;
        }
        e
    }

    fn drop_gaps(v: &[Verdict]) -> Vec<usize> {
        let idx: Vec<usize> = v.iter().enumerate().filter(|(_, v)| matches!(v, Verdict::Drop(_))).map(|(i, _)| i).collect();
        idx.windows(2).map(|w| w[1] - w[0]).collect()
    }

    #[test]
    fn average_follows_the_ewma_closed_form_for_a_constant_queue() {
        let w = 0.002;
        let cfg = RedConfig { w_q: w, min_th: 500.0, max_th: 900.0, ..RedConfig::defaults(&ctx(Limit::Packets(1000))) };
        let mut q = Red::new(cfg).unwrap();
        let mut rng = netunits::rng_stream(1, 0);
        let (mut d, mut m) = (Vec::new(), Vec::new());
        let level = 40;
        for i in 0..level {
            q.enqueue(SimTime::ZERO, TestPacket::new(i, 0, 1500), &mut rng, &mut d);
        }
        let a0 = q.avg();
        let k = 1000;
        for i in 0..k {
            q.enqueue(SimTime::from_micros(i + 1), TestPacket::new(1000 + i, 0, 1500), &mut rng, &mut d);
            q.dequeue(SimTime::from_micros(i + 1), &mut rng, &mut d, &mut m);
        }
        // avg_k = q + (avg_0 − q)(1 − w)^k for a constant queue q (the EWMA of FJ93 Fig. 2).
        let expect = level as f64 + (a0 - level as f64) * (1.0 - w).powi(k as i32);
        assert!((q.avg() - expect).abs() < 1e-9 * expect, "{} vs {}", q.avg(), expect);
        assert!(d.is_empty());
    }

    #[test]
    fn idle_time_decays_the_average_by_m_mean_packet_times() {
        let w = 0.01;
        let cfg = RedConfig { w_q: w, min_th: 500.0, max_th: 900.0, ..RedConfig::defaults(&ctx(Limit::Packets(1000))) };
        let mut q = Red::new(cfg).unwrap();
        let mut rng = netunits::rng_stream(1, 0);
        let (mut d, mut m) = (Vec::new(), Vec::new());
        for i in 0..50 {
            q.enqueue(SimTime::ZERO, TestPacket::new(i, 0, 1500), &mut rng, &mut d);
        }
        while q.dequeue(SimTime::from_millis(1), &mut rng, &mut d, &mut m).is_some() {}
        let before = q.avg();
        // 1500 B at 10 Mbit/s take 1.2 ms, so 120 ms idle is m = 100 packet times.
        q.enqueue(SimTime::from_millis(121), TestPacket::new(99, 0, 1500), &mut rng, &mut d);
        let expect = before * (1.0 - w).powi(100);
        assert!((q.avg() - expect).abs() < 1e-9, "{} vs {}", q.avg(), expect);
    }

    #[test]
    fn no_early_drops_below_min_th() {
        let mut q = prefilled(instant_cfg(), 4);
        let v = verdicts_at_level(&mut q, 5000, false, 7);
        assert!(v.iter().all(|v| *v == Verdict::Admit));
    }

    #[test]
    fn drop_rate_between_thresholds_matches_p_b_with_count_spacing() {
        // avg = q (w_q = 1); p_b = max_p (avg − min)/(max − min) (FJ93 Fig. 2).
        for (level, seed) in [(8usize, 11u64), (10, 12), (13, 13)] {
            let cfg = instant_cfg();
            let p_b = cfg.max_p * (level as f64 - cfg.min_th) / (cfg.max_th - cfg.min_th);
            let mut q = prefilled(cfg, level);
            let n = 100_000;
            let v = verdicts_at_level(&mut q, n, false, seed);
            let drops = v.iter().filter(|v| **v == Verdict::Drop(DropReason::Early)).count() as f64;
            // Long-run fraction of a renewal process = 1 / mean gap.
            let p = 1.0 / expected_gap(p_b);
            let sd = (n as f64 * p * (1.0 - p)).sqrt();
            assert!((drops - n as f64 * p).abs() < 4.0 * sd, "level {level}: {drops} drops, expected {}", n as f64 * p);
        }
    }

    #[test]
    fn count_spacing_makes_gaps_uniform_not_geometric() {
        // p_b = 0.05: gaps are uniform on 1..=19 (never 20 or more), variance (19²−1)/12 = 30,
        // where independent drops at the same rate would give a geometric gap with
        // variance (1−p)/p² ≈ 90.
        let mut q = prefilled(instant_cfg(), 10);
        let v = verdicts_at_level(&mut q, 200_000, false, 5);
        let gaps = drop_gaps(&v);
        assert!(gaps.len() > 1000);
        assert!(*gaps.iter().max().unwrap() <= 19);
        let mean = gaps.iter().sum::<usize>() as f64 / gaps.len() as f64;
        let var = gaps.iter().map(|g| (*g as f64 - mean).powi(2)).sum::<f64>() / gaps.len() as f64;
        assert!((mean - 10.0).abs() < 0.2, "mean gap {mean}");
        assert!((var - 30.0).abs() < 3.0, "gap variance {var}");
        // Every gap length 1..=19 is about equally likely (1/19 each).
        for g in 1..=19 {
            let f = gaps.iter().filter(|x| **x == g).count() as f64 / gaps.len() as f64;
            assert!((f - 1.0 / 19.0).abs() < 0.01, "gap {g}: {f}");
        }
    }

    #[test]
    fn above_max_th_every_packet_is_dropped_unless_gentle() {
        let mut q = prefilled(instant_cfg(), 18);
        let v = verdicts_at_level(&mut q, 2000, true, 3);
        assert!(v.iter().all(|v| *v == Verdict::Drop(DropReason::Early)), "forced drops even for ECN packets");
    }

    #[test]
    fn gentle_region_ramps_from_max_p_to_one() {
        let cfg = RedConfig { gentle: true, ..instant_cfg() };
        for (level, seed) in [(18usize, 21u64), (20, 22)] {
            let mut q = prefilled(cfg, level);
            // Gentle: p_b = max_p + (1 − max_p)(avg − max_th)/max_th. (Once p_b ≥ 0.5 the
            // count rule drops every packet: count restarts at 1 and p_b/(1 − p_b) ≥ 1.)
            let p_b = cfg.max_p + (1.0 - cfg.max_p) * (level as f64 - cfg.max_th) / cfg.max_th;
            let n = 50_000;
            let v = verdicts_at_level(&mut q, n, false, seed);
            let drops = v.iter().filter(|v| matches!(v, Verdict::Drop(_))).count() as f64;
            let p = 1.0 / expected_gap(p_b);
            let sd = (n as f64 * p * (1.0 - p)).sqrt();
            assert!((drops - n as f64 * p).abs() < 4.0 * sd, "level {level}: {drops} vs {}", n as f64 * p);
            assert!(drops < n as f64);
        }
        // At or beyond 2·max_th everything is dropped.
        let mut q = prefilled(cfg, 30);
        let v = verdicts_at_level(&mut q, 1000, false, 1);
        assert!(v.iter().all(|v| matches!(v, Verdict::Drop(_))));
    }

    #[test]
    fn ecn_capable_packets_are_marked_not_dropped_in_the_early_region() {
        let cfg = RedConfig { ecn: true, ..instant_cfg() };
        let mut q = Accounted::new(Red::new(cfg).unwrap());
        let mut rng = netunits::rng_stream(2, 3);
        let (mut d, mut m) = (Vec::new(), Vec::new());
        let mut marked_ce = 0;
        for i in 0..10u64 {
            q.enqueue(SimTime::ZERO, TestPacket::new(i, 0, 1500), &mut rng, &mut d);
        }
        for i in 0..20_000u64 {
            let mut p = TestPacket::new(100 + i, 1, 1500);
            p.meta.ecn_capable = true;
            let v = q.enqueue(SimTime::from_micros(i), p, &mut rng, &mut d);
            assert!(!matches!(v, Verdict::Drop(_)));
            let out = q.dequeue(SimTime::from_micros(i), &mut rng, &mut d, &mut m).unwrap();
            marked_ce += usize::from(out.ce);
        }
        assert!(d.is_empty());
        let marks = q.counters().marks[MarkReason::Early as usize];
        assert!(marks > 1000, "{marks}");
        // Every mark reached the packet; the 10 pre-filled packets were not ECN-capable.
        assert!(marked_ce as u64 <= marks && marks - marked_ce as u64 <= 10);
        // The same queue without `ecn` drops instead.
        let mut q = prefilled(instant_cfg(), 10);
        let v = verdicts_at_level(&mut q, 5000, true, 2);
        assert!(v.contains(&Verdict::Drop(DropReason::Early)));
        assert!(!v.iter().any(|v| matches!(v, Verdict::Mark(_))));
    }

    #[test]
    fn byte_mode_marks_large_packets_more_often() {
        // avg = 10 mean packets; p_b = 0.05 for a 1500 B packet and 0.05·500/1500 for 500 B.
        let cfg = RedConfig { byte_mode: true, ..instant_cfg() };
        let mut rng = netunits::rng_stream(4, 0);
        let mut core = RedCore::new(cfg);
        core.on_arrival(SimTime::from_micros(1), 15_000, 10);
        let small = PacketMeta { bytes: 500, ..Default::default() };
        let n = 60_000;
        let mut drops = 0;
        for _ in 0..n {
            if core.decide(&mut rng, &small) == RedAction::Drop {
                drops += 1;
            }
        }
        let p = 1.0 / expected_gap(0.05 * 500.0 / 1500.0);
        let sd = (n as f64 * p * (1.0 - p)).sqrt();
        assert!((drops as f64 - n as f64 * p).abs() < 4.0 * sd, "{drops} vs {}", n as f64 * p);
    }

    #[test]
    fn the_buffer_is_a_hard_limit() {
        let cfg = RedConfig { limit: Limit::Packets(3), min_th: 100.0, max_th: 200.0, ..instant_cfg() };
        let mut q = Red::new(cfg).unwrap();
        let mut rng = netunits::rng_stream(1, 0);
        let mut d = Vec::new();
        let v: Vec<Verdict> = (0..4).map(|i| q.enqueue(SimTime::ZERO, TestPacket::new(i, 0, 1500), &mut rng, &mut d)).collect();
        assert_eq!(v[3], Verdict::Drop(DropReason::Overflow));
        assert_eq!(q.len_packets(), 3);
    }

    #[test]
    fn adaptive_red_moves_max_p_by_aimd_every_interval() {
        // Target band: [5 + 0.4·10, 5 + 0.6·10] = [9, 11] packets.
        let cfg = RedConfig { adaptive: true, gentle: true, ..instant_cfg() };
        let mut q = Red::new(cfg).unwrap();
        let mut rng = netunits::rng_stream(1, 0);
        let (mut d, mut m) = (Vec::new(), Vec::new());
        let mut id = 0;
        let mut offer = |q: &mut Red<TestPacket>, t: SimTime, level: usize| {
            while q.len_packets() < level {
                q.enqueue(t, TestPacket::new(id, 0, 1500), &mut rng, &mut d);
                id += 1;
            }
            while q.len_packets() > level {
                q.dequeue(t, &mut rng, &mut d, &mut m);
            }
            q.enqueue(t, TestPacket::new(id, 0, 1500), &mut rng, &mut d);
            id += 1;
        };
        // Average 13 > 11 at t = 0.5 s: max_p += min(0.01, 0.1/4) = 0.01.
        offer(&mut q, SimTime::from_millis(499), 13);
        assert_eq!(q.max_p(), 0.1);
        offer(&mut q, SimTime::from_millis(500), 13);
        assert!((q.max_p() - 0.11).abs() < 1e-12);
        // Not again within the same interval.
        offer(&mut q, SimTime::from_millis(900), 13);
        assert!((q.max_p() - 0.11).abs() < 1e-12);
        // Inside the band: unchanged.
        offer(&mut q, SimTime::from_millis(1000), 10);
        assert!((q.max_p() - 0.11).abs() < 1e-12);
        // Below the band: max_p *= 0.9.
        offer(&mut q, SimTime::from_millis(1500), 6);
        assert!((q.max_p() - 0.099).abs() < 1e-12);
    }

    #[test]
    fn default_thresholds_come_from_the_buffer() {
        let c = RedConfig::defaults(&ctx(Limit::Packets(120)));
        assert_eq!((c.min_th, c.max_th), (10.0, 30.0));
        // A byte buffer counts mean packets: 180 kB / 1500 B = 120 packets.
        let c = RedConfig::defaults(&ctx(Limit::Bytes(180_000)));
        assert_eq!((c.min_th, c.max_th), (10.0, 30.0));
    }

    #[test]
    fn bad_parameters_name_the_parameter_and_range() {
        let mut p = crate::Params::new();
        p.insert("max_p".into(), serde_json::json!(1.5));
        let e = crate::build::<TestPacket>("red", &p, &ctx(Limit::Packets(100))).err().unwrap();
        assert!(e.to_string().contains("max_p") && e.to_string().contains("(0, 1]"), "{e}");
        let mut p = crate::Params::new();
        p.insert("min_th".into(), serde_json::json!(20.0));
        p.insert("max_th".into(), serde_json::json!(10.0));
        let e = crate::build::<TestPacket>("red", &p, &ctx(Limit::Packets(100))).err().unwrap();
        assert!(e.to_string().contains("max_th") && e.to_string().contains("greater than min_th"), "{e}");
    }
}
