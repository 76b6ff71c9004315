//! PIE, Proportional Integral controller Enhanced (RFC 8033).
//!
//! Read this first: arrivals are dropped (or marked) at random with probability
//! `drop_prob` (RFC 8033 §4.1). Every `t_update` the probability moves by
//! `α·(qdelay − target) + β·(qdelay − qdelay_old)` (delays in seconds, α and β in
//! Hz), scaled down while `drop_prob` is small (the auto-tuning table of §4.2), and
//! decays by 2 % per update while the queue stays empty (§4.2). A burst allowance of
//! `max_burst` suspends random drops after a quiet period (§4.4).
//!
//! Choices where RFC 8033 leaves room:
//! - **Queue delay from timestamps** (§4.3 permits it; Linux PIE's default since
//!   5.x): `qdelay` is the sojourn time of the most recently dequeued packet, or 0
//!   while the queue is empty. Departure-rate estimation (§5.2, Little's law) is
//!   not implemented: with a simulated clock the timestamps are exact.
//! - **Timer.** There are no timers here: updates that fell due since the last call
//!   run at the next `enqueue`/`dequeue`, one per elapsed `t_update`, in order.
//! - **Optional elements:** ECN (§5.1, mark only while `drop_prob ≤ mark_ecn_th`)
//!   and the 2 % cap on a single increase once `drop_prob ≥ 10 %` (§5.5) are
//!   included; derandomisation (§5.4) and active/inactive switching (§5.3) are not.
//! - The burst allowance starts full (a new queue is quiet).

use rand::Rng;

use crate::{
    ConfigError, DropReason, DropTail, DropTailConfig, Limit, MarkReason, Packet, ParamReader, Qdisc, QdiscContext,
    SimDuration, SimRng, SimTime, Stamped, Verdict,
};

/// PIE configuration.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PieConfig {
    /// Hard buffer limit: the scenario's buffer.
    pub limit: Limit,
    /// Target queue delay (`QDELAY_REF`). Default 15 ms (RFC 8033 §4.2, §6).
    pub target: SimDuration,
    /// Update period. Default 15 ms (RFC 8033 §4.2).
    pub t_update: SimDuration,
    /// Proportional gain in Hz. Default 0.125 (RFC 8033 §4.2).
    pub alpha: f64,
    /// Integral gain in Hz. Default 1.25 (RFC 8033 §4.2).
    pub beta: f64,
    /// Burst allowance. Default 150 ms (RFC 8033 §4.4).
    pub max_burst: SimDuration,
    /// Mark ECN-capable packets instead of dropping while `drop_prob ≤ mark_ecn_th`.
    /// Default off (Linux `tc pie`).
    pub ecn: bool,
    /// Above this probability ECN-capable packets are dropped too. Default 0.1
    /// (RFC 8033 §5.1's example).
    pub mark_ecn_th: f64,
    /// Typical packet size in bytes: no random drop while at most two such packets
    /// are queued (RFC 8033 §4.1, `2 * MEAN_PKTSIZE`).
    pub mean_packet_bytes: u32,
}

impl PieConfig {
    /// RFC 8033's defaults with the scenario's buffer.
    pub fn defaults(ctx: &QdiscContext) -> Self {
        PieConfig {
            limit: ctx.limit,
            target: SimDuration::from_millis(15),
            t_update: SimDuration::from_millis(15),
            alpha: 0.125,
            beta: 1.25,
            max_burst: SimDuration::from_millis(150),
            ecn: false,
            mark_ecn_th: 0.1,
            mean_packet_bytes: ctx.mean_packet_bytes,
        }
    }

    /// Read the scenario's parameters on top of [`PieConfig::defaults`].
    pub fn from_params(r: &mut ParamReader<'_>, ctx: &QdiscContext) -> Result<Self, ConfigError> {
        let d = Self::defaults(ctx);
        let (lo, hi) = (SimDuration::from_micros(1), SimDuration::from_secs(10));
        let cfg = PieConfig {
            target: r.duration("target", d.target, lo, hi, "nanoseconds, 1 us to 10 s")?,
            t_update: r.duration("t_update", d.t_update, lo, hi, "nanoseconds, 1 us to 10 s")?,
            alpha: r.f64("alpha", d.alpha, 0.0, 100.0, "Hz, 0 to 100")?,
            beta: r.f64("beta", d.beta, 0.0, 100.0, "Hz, 0 to 100")?,
            max_burst: r.duration("max_burst", d.max_burst, SimDuration::ZERO, hi, "nanoseconds, 0 to 10 s")?,
            ecn: r.bool("ecn", d.ecn)?,
            mark_ecn_th: r.f64("mark_ecn_th", d.mark_ecn_th, 0.0, 1.0, "a probability in [0, 1]")?,
            ..d
        };
        cfg.validate_as(r.qdisc())?;
        Ok(cfg)
    }

    /// Check ranges, naming `qdisc` in errors.
    pub fn validate_as(&self, qdisc: &'static str) -> Result<(), ConfigError> {
        let err = |param, value: String, allowed| Err(ConfigError { qdisc, param, value, allowed });
        if self.target.as_nanos() == 0 {
            return err("target", "0".into(), "nanoseconds, 1 us to 10 s");
        }
        if self.t_update.as_nanos() == 0 {
            return err("t_update", "0".into(), "nanoseconds, 1 us to 10 s");
        }
        if !(self.alpha >= 0.0 && self.alpha <= 100.0) {
            return err("alpha", self.alpha.to_string(), "Hz, 0 to 100");
        }
        if !(self.beta >= 0.0 && self.beta <= 100.0) {
            return err("beta", self.beta.to_string(), "Hz, 0 to 100");
        }
        if !(0.0..=1.0).contains(&self.mark_ecn_th) {
            return err("mark_ecn_th", self.mark_ecn_th.to_string(), "a probability in [0, 1]");
        }
        DropTailConfig { limit: self.limit }.validate().map_err(|e| ConfigError { qdisc, ..e })
    }
}

/// PIE in front of a FIFO of timestamped packets.
#[derive(Debug)]
pub struct Pie<P> {
    cfg: PieConfig,
    fifo: DropTail<Stamped<P>>,
    drop_prob: f64,
    qdelay_old: SimDuration,
    /// Sojourn of the last departure (the timestamp estimate of §4.3).
    last_sojourn: SimDuration,
    burst_allowance: SimDuration,
    next_update: SimTime,
}

impl<P: Packet> Pie<P> {
    /// Build PIE; fails on an invalid configuration.
    pub fn new(cfg: PieConfig) -> Result<Self, ConfigError> {
        cfg.validate_as("pie")?;
        Ok(Pie {
            fifo: DropTail::new(DropTailConfig { limit: cfg.limit })?,
            drop_prob: 0.0,
            qdelay_old: SimDuration::ZERO,
            last_sojourn: SimDuration::ZERO,
            burst_allowance: cfg.max_burst,
            next_update: SimTime::ZERO + cfg.t_update,
            cfg,
        })
    }

    /// The current drop probability.
    pub fn drop_prob(&self) -> f64 {
        self.drop_prob
    }

    /// The current queue-delay estimate (§4.3, timestamps).
    pub fn qdelay(&self) -> SimDuration {
        if self.fifo.len_packets() == 0 {
            SimDuration::ZERO
        } else {
            self.last_sojourn
        }
    }

    fn run_updates(&mut self, now: SimTime) {
        let mut n = 0u32;
        while now >= self.next_update {
            // After 10^4 idle updates drop_prob is 0.98^10^4 ≈ 0: skip the rest.
            if n < 10_000 {
                self.update();
            }
            n += 1;
            self.next_update += self.cfg.t_update;
            if n >= 10_000 {
                let behind = (now - self.next_update).as_nanos() / self.cfg.t_update.as_nanos();
                self.next_update += self.cfg.t_update.mul(behind + 1);
                break;
            }
        }
    }

    /// RFC 8033 §4.2 (drop probability), §5.5 (cap) and §4.4 (burst allowance).
    fn update(&mut self) {
        let qdelay = self.qdelay();
        let (cur, old, target) = (qdelay.as_secs_f64(), self.qdelay_old.as_secs_f64(), self.cfg.target.as_secs_f64());
        let mut p = self.cfg.alpha * (cur - target) + self.cfg.beta * (cur - old);
        // §4.2 auto-tuning: smaller steps while drop_prob is small.
        let dp = self.drop_prob;
        p /= if dp < 0.000_001 {
            2048.0
        } else if dp < 0.000_01 {
            512.0
        } else if dp < 0.000_1 {
            128.0
        } else if dp < 0.001 {
            32.0
        } else if dp < 0.01 {
            8.0
        } else if dp < 0.1 {
            2.0
        } else {
            1.0
        };
        // §5.5: once at 10 % or more, one update may raise drop_prob by at most 2 %.
        if dp >= 0.1 && p > 0.02 {
            p = 0.02;
        }
        self.drop_prob += p;
        // §4.2: decay while the queue stays empty.
        if qdelay.as_nanos() == 0 && self.qdelay_old.as_nanos() == 0 {
            self.drop_prob *= 0.98;
        }
        self.drop_prob = self.drop_prob.clamp(0.0, 1.0);
        // §4.4: spend the burst allowance; refill it once the queue is quiet again.
        self.burst_allowance = self.burst_allowance.saturating_sub(self.cfg.t_update);
        let half = SimDuration::from_nanos(self.cfg.target.as_nanos() / 2);
        if self.drop_prob == 0.0 && qdelay < half && self.qdelay_old < half {
            self.burst_allowance = self.cfg.max_burst;
        }
        self.qdelay_old = qdelay;
    }
}

impl<P: Packet> Qdisc<P> for Pie<P> {
    fn name(&self) -> &'static str {
        "pie"
    }

    fn enqueue(&mut self, now: SimTime, mut pkt: P, rng: &mut SimRng, dropped: &mut Vec<(P, DropReason)>) -> Verdict {
        self.run_updates(now);
        if !self.fifo.fits(u64::from(pkt.meta().bytes)) {
            dropped.push((pkt, DropReason::Overflow));
            return Verdict::Drop(DropReason::Overflow);
        }
        // §4.1: no random drop during a burst allowance, while the delay was low and
        // drop_prob moderate, or with at most two packets queued.
        let half = SimDuration::from_nanos(self.cfg.target.as_nanos() / 2);
        let safe = self.burst_allowance.as_nanos() > 0
            || (self.qdelay_old < half && self.drop_prob < 0.2)
            || self.fifo.len_bytes() <= 2 * u64::from(self.cfg.mean_packet_bytes);
        if !safe && self.drop_prob > 0.0 && rng.random::<f64>() < self.drop_prob {
            if self.cfg.ecn && pkt.meta().ecn_capable && self.drop_prob <= self.cfg.mark_ecn_th {
                pkt.mark_ce();
                self.fifo.push_back(Stamped { pkt, at: now });
                return Verdict::Mark(MarkReason::Early);
            }
            dropped.push((pkt, DropReason::Early));
            return Verdict::Drop(DropReason::Early);
        }
        self.fifo.push_back(Stamped { pkt, at: now });
        Verdict::Admit
    }

    fn dequeue(
        &mut self,
        now: SimTime,
        _rng: &mut SimRng,
        _dropped: &mut Vec<(P, DropReason)>,
        _marked: &mut Vec<MarkReason>,
    ) -> Option<P> {
        self.run_updates(now);
        let s = self.fifo.pop_front()?;
        self.last_sojourn = now.saturating_since(s.at);
        Some(s.pkt)
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

    fn pie() -> Pie<TestPacket> {
        Pie::new(PieConfig::defaults(&ctx(Limit::Packets(1000)))).unwrap()
    }

    fn ms(x: u64) -> SimTime {
        SimTime::from_millis(x)
    }

    /// RFC 8033 §4.2's scale factor for the current drop_prob.
    fn scale(dp: f64) -> f64 {
        [(1e-6, 2048.0), (1e-5, 512.0), (1e-4, 128.0), (1e-3, 32.0), (1e-2, 8.0), (1e-1, 2.0)]
            .iter()
            .find(|(lim, _)| dp < *lim)
            .map_or(1.0, |(_, s)| *s)
    }

    #[test]
    fn drop_probability_follows_the_pi_update_with_auto_tuning() {
        let mut q = pie();
        let mut rng = netunits::rng_stream(1, 0);
        let (mut d, mut m) = (Vec::new(), Vec::new());
        for i in 0..5 {
            q.enqueue(ms(0), TestPacket::new(i, 0, 1500), &mut rng, &mut d);
        }
        // A departure at 14 ms that waited 14 ms; the update at 15 ms sees qdelay = 14 ms.
        q.dequeue(ms(14), &mut rng, &mut d, &mut m);
        q.dequeue(ms(15), &mut rng, &mut d, &mut m);
        let (a, b, t) = (0.125, 1.25, 0.015);
        let p1 = (a * (0.014 - t) + b * (0.014 - 0.0)) / scale(0.0);
        assert!((q.drop_prob() - p1).abs() < 1e-15, "{} vs {p1}", q.drop_prob());
        // The 15 ms departure waited 15 ms; next a departure at 29 ms that waited 29 ms.
        q.dequeue(ms(29), &mut rng, &mut d, &mut m);
        q.enqueue(ms(30), TestPacket::new(9, 0, 1500), &mut rng, &mut d);
        let p2 = p1 + (a * (0.029 - t) + b * (0.029 - 0.014)) / scale(p1);
        assert!((q.drop_prob() - p2).abs() < 1e-15, "{} vs {p2}", q.drop_prob());
    }

    #[test]
    fn an_empty_queue_decays_drop_prob_by_two_percent_per_update() {
        let mut q = pie();
        q.drop_prob = 0.5;
        let mut rng = netunits::rng_stream(1, 0);
        let mut d = Vec::new();
        q.enqueue(ms(15), TestPacket::new(0, 0, 1500), &mut rng, &mut d);
        // qdelay = qdelay_old = 0: p = α(0 − 0.015), unscaled at 0.5, then × 0.98.
        let expect = (0.5 - 0.125 * 0.015) * 0.98;
        assert!((q.drop_prob() - expect).abs() < 1e-15);
    }

    #[test]
    fn a_single_increase_is_capped_at_two_percent_above_ten_percent() {
        let mut q = pie();
        q.drop_prob = 0.2;
        let mut rng = netunits::rng_stream(1, 0);
        let (mut d, mut m) = (Vec::new(), Vec::new());
        for i in 0..3 {
            q.enqueue(ms(0), TestPacket::new(i, 0, 1500), &mut rng, &mut d);
        }
        q.dequeue(ms(14), &mut rng, &mut d, &mut m);
        q.run_updates(ms(15));
        // Unscaled step would be 0.125·(−0.001) + 1.25·0.014 = 0.017375 < 0.02: kept.
        assert!((q.drop_prob() - (0.2 + 0.017_375)).abs() < 1e-12);
        q.dequeue(ms(29), &mut rng, &mut d, &mut m);
        q.run_updates(ms(30));
        // 0.125·0.014 + 1.25·0.015 = 0.0205 > 0.02: capped.
        assert!((q.drop_prob() - (0.217_375 + 0.02)).abs() < 1e-12);
    }

    #[test]
    fn arrivals_are_dropped_with_drop_prob_once_the_safeguards_are_off() {
        for (ecn, p, expect_mark) in [(false, 0.3, false), (true, 0.3, false), (true, 0.05, true)] {
            let cfg = PieConfig { ecn, ..PieConfig::defaults(&ctx(Limit::Packets(100_000))) };
            let mut q = Pie::new(cfg).unwrap();
            let mut rng = netunits::rng_stream(7, 0);
            let (mut d, mut m) = (Vec::new(), Vec::new());
            for i in 0..10 {
                q.fifo.push_back(Stamped { pkt: TestPacket::new(i, 0, 1500), at: SimTime::ZERO });
            }
            // Burst allowance spent, delay above target/2: only drop_prob decides.
            q.burst_allowance = SimDuration::ZERO;
            q.qdelay_old = SimDuration::from_millis(20);
            q.drop_prob = p;
            q.next_update = SimTime::MAX;
            let n = 20_000;
            let mut hits = 0;
            for i in 0..n {
                let mut pk = TestPacket::new(100 + i, 1, 1500);
                pk.meta.ecn_capable = ecn;
                match q.enqueue(ms(1), pk, &mut rng, &mut d) {
                    Verdict::Admit => {
                        q.dequeue(ms(1), &mut rng, &mut d, &mut m);
                    }
                    Verdict::Mark(_) => {
                        assert!(expect_mark);
                        hits += 1;
                        q.dequeue(ms(1), &mut rng, &mut d, &mut m);
                    }
                    Verdict::Drop(r) => {
                        assert!(!expect_mark);
                        assert_eq!(r, DropReason::Early);
                        hits += 1;
                    }
                }
            }
            let n = n as f64;
            let sd = (n * p * (1.0 - p)).sqrt();
            assert!((hits as f64 - n * p).abs() < 4.0 * sd, "ecn {ecn} p {p}: {hits}");
        }
    }

    #[test]
    fn the_burst_allowance_suspends_random_drops() {
        let mut q = pie();
        let mut rng = netunits::rng_stream(1, 0);
        let mut d = Vec::new();
        for i in 0..10 {
            q.fifo.push_back(Stamped { pkt: TestPacket::new(i, 0, 1500), at: SimTime::ZERO });
        }
        q.qdelay_old = SimDuration::from_millis(20);
        q.drop_prob = 0.9;
        q.next_update = SimTime::MAX;
        for i in 0..500 {
            assert_eq!(q.enqueue(ms(1), TestPacket::new(100 + i, 1, 1500), &mut rng, &mut d), Verdict::Admit);
        }
    }
}
