//! CSFQ, Core-Stateless Fair Queueing (Stoica, Shenker & Zhang, SIGCOMM 1998), with
//! the edge and the core in one node.
//!
//! Read this first: in CSFQ an edge router estimates each flow's arrival rate `r_i`
//! by exponential averaging over packet inter-arrival times,
//! `r_new = (1 − e^(−T/K))·l/T + e^(−T/K)·r_old` (`T` the gap, `l` the packet
//! length, `K` the averaging constant), and writes it into the packet as a label.
//! A core router estimates the fair share `α` (the rate at which
//! `Σ min(r_i, α) = C`) and drops each packet with probability `max(0, 1 − α/r_i)`,
//! so every flow gets at most about `α`. Seed 002 uses CSFQ as a comparator.
//!
//! Here one node does both: `r_i` comes from this queue's own per-flow table, so the
//! label never leaves the node and relabelling (`min(r_i, α)` for the next hop) is
//! not needed.
//!
//! `α` estimation (the paper's heuristic): the aggregate arrival rate `A` and the
//! accepted rate `F` are estimated with the same exponential averaging (constant
//! `K_α`). While the link is congested (`A ≥ C`), every `K_c` the estimate is scaled
//! `α ← α·C/F`; while it is not, `α` becomes the largest `r_i` seen in the last
//! `K_c`. A buffer overflow lowers `α` by `overflow_decrease` (1 %).
//!
//! Where the sources leave room (fairlab's choices): the constants (`K = 100 ms`,
//! `K_α = K_c = 200 ms` by default; see `docs/qdiscs.md`), the first value of `α`
//! (the largest `r_i` seen so far when congestion first starts), and no 25 % cap on
//! successive overflow decreases. A flow's first packet has no gap to measure; its
//! rate starts at 0 (never dropped) and the next packet gives the first estimate.

use std::collections::BTreeMap;

use rand::Rng;

use crate::{
    ConfigError, DropReason, DropTail, DropTailConfig, Limit, MarkReason, Packet, ParamReader, Qdisc, QdiscContext,
    SimDuration, SimRng, SimTime, Verdict,
};

/// CSFQ configuration.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CsfqConfig {
    /// Hard buffer limit: the scenario's buffer.
    pub limit: Limit,
    /// Output link capacity `C` in bits/s: the scenario's bottleneck rate.
    pub rate_bps: u64,
    /// Per-flow rate averaging constant `K`. Default 100 ms.
    pub k: SimDuration,
    /// Aggregate-rate averaging constant `K_α`. Default 200 ms.
    pub k_alpha: SimDuration,
    /// Window between `α` updates, `K_c`. Default 200 ms.
    pub k_c: SimDuration,
    /// Fraction by which a buffer overflow lowers `α`. Default 0.01.
    pub overflow_decrease: f64,
}

impl CsfqConfig {
    /// Defaults with the scenario's buffer and rate.
    pub fn defaults(ctx: &QdiscContext) -> Self {
        CsfqConfig {
            limit: ctx.limit,
            rate_bps: ctx.rate_bps,
            k: SimDuration::from_millis(100),
            k_alpha: SimDuration::from_millis(200),
            k_c: SimDuration::from_millis(200),
            overflow_decrease: 0.01,
        }
    }

    /// Read the scenario's parameters on top of [`CsfqConfig::defaults`].
    pub fn from_params(r: &mut ParamReader<'_>, ctx: &QdiscContext) -> Result<Self, ConfigError> {
        let d = Self::defaults(ctx);
        let (lo, hi, allowed) = (SimDuration::from_micros(1), SimDuration::from_secs(3600), "nanoseconds, 1 us to 1 h");
        let cfg = CsfqConfig {
            k: r.duration("k", d.k, lo, hi, allowed)?,
            k_alpha: r.duration("k_alpha", d.k_alpha, lo, hi, allowed)?,
            k_c: r.duration("k_c", d.k_c, lo, hi, allowed)?,
            overflow_decrease: r.f64("overflow_decrease", d.overflow_decrease, 0.0, 0.5, "a fraction in [0, 0.5]")?,
            ..d
        };
        cfg.validate_as(r.qdisc())?;
        Ok(cfg)
    }

    /// Check ranges, naming `qdisc` in errors.
    pub fn validate_as(&self, qdisc: &'static str) -> Result<(), ConfigError> {
        let err = |param, value: String, allowed| Err(ConfigError { qdisc, param, value, allowed });
        if self.rate_bps == 0 {
            return err("rate_bps", "0".into(), "a link rate of at least 1 bit/s");
        }
        for (name, v) in [("k", self.k), ("k_alpha", self.k_alpha), ("k_c", self.k_c)] {
            if v.as_nanos() == 0 {
                return err(name, "0".into(), "nanoseconds, 1 us to 1 h");
            }
        }
        if !(0.0..=0.5).contains(&self.overflow_decrease) {
            return err("overflow_decrease", self.overflow_decrease.to_string(), "a fraction in [0, 0.5]");
        }
        DropTailConfig { limit: self.limit }.validate().map_err(|e| ConfigError { qdisc, ..e })
    }
}

/// An exponentially averaged rate in bits/s (the paper's estimator).
#[derive(Clone, Copy, Debug, Default)]
struct RateEstimate {
    bps: f64,
    last: Option<SimTime>,
}

impl RateEstimate {
    /// `r ← (1 − e^(−T/K))·l/T + e^(−T/K)·r`; as `T → 0` the first term tends to `l/K`.
    fn update(&mut self, now: SimTime, bytes: u32, k: SimDuration) {
        let bits = f64::from(bytes) * 8.0;
        if let Some(last) = self.last {
            let t = now.saturating_since(last).as_secs_f64();
            let k = k.as_secs_f64();
            let x = t / k;
            let fresh = if t > 0.0 { -(-x).exp_m1() * bits / t } else { bits / k };
            self.bps = fresh + (-x).exp() * self.bps;
        }
        self.last = Some(now);
    }
}

/// CSFQ with edge labelling and core dropping in one node.
#[derive(Debug)]
pub struct Csfq<P> {
    cfg: CsfqConfig,
    fifo: DropTail<P>,
    flows: BTreeMap<u32, RateEstimate>,
    arrivals: RateEstimate,
    accepted: RateEstimate,
    alpha: f64,
    tmp_alpha: f64,
    congested: bool,
    start_time: SimTime,
}

impl<P: Packet> Csfq<P> {
    /// Build CSFQ; fails on an invalid configuration.
    pub fn new(cfg: CsfqConfig) -> Result<Self, ConfigError> {
        cfg.validate_as("csfq")?;
        Ok(Csfq {
            fifo: DropTail::new(DropTailConfig { limit: cfg.limit })?,
            flows: BTreeMap::new(),
            arrivals: RateEstimate::default(),
            accepted: RateEstimate::default(),
            alpha: 0.0,
            tmp_alpha: 0.0,
            congested: false,
            start_time: SimTime::ZERO,
            cfg,
        })
    }

    /// The fair-share estimate `α` in bits/s (0 before the first congestion).
    pub fn alpha_bps(&self) -> f64 {
        self.alpha
    }

    /// A flow's estimated arrival rate in bits/s.
    pub fn flow_rate_bps(&self, flow: u32) -> Option<f64> {
        self.flows.get(&flow).map(|r| r.bps)
    }

    /// `max(0, 1 − α/r)` for a flow at rate `r_bps`; 0 before `α` is known or for a
    /// flow without a rate yet.
    pub fn drop_probability(&self, r_bps: f64) -> f64 {
        if self.alpha <= 0.0 || r_bps <= 0.0 {
            0.0
        } else {
            (1.0 - self.alpha / r_bps).max(0.0)
        }
    }

    /// The paper's `estimate_α` for one arrival carrying label `r`.
    fn estimate_alpha(&mut self, now: SimTime, r: f64) {
        let c = self.cfg.rate_bps as f64;
        if self.arrivals.bps >= c {
            if !self.congested {
                self.congested = true;
                self.start_time = now;
                if self.alpha <= 0.0 {
                    // First congestion: start from the largest rate seen.
                    self.alpha = self.tmp_alpha.max(r);
                }
            } else if now > self.start_time + self.cfg.k_c {
                if self.accepted.bps > 0.0 {
                    self.alpha *= c / self.accepted.bps;
                }
                self.start_time = now;
            }
        } else if self.congested {
            self.congested = false;
            self.start_time = now;
            self.tmp_alpha = 0.0;
        } else if now < self.start_time + self.cfg.k_c {
            self.tmp_alpha = self.tmp_alpha.max(r);
        } else {
            self.alpha = self.tmp_alpha.max(r);
            self.start_time = now;
            self.tmp_alpha = 0.0;
        }
    }
}

impl<P: Packet> Qdisc<P> for Csfq<P> {
    fn name(&self) -> &'static str {
        "csfq"
    }

    fn enqueue(&mut self, now: SimTime, pkt: P, rng: &mut SimRng, dropped: &mut Vec<(P, DropReason)>) -> Verdict {
        let bytes = pkt.meta().bytes;
        // Edge: label the packet with its flow's rate.
        let est = self.flows.entry(pkt.meta().flow).or_default();
        est.update(now, bytes, self.cfg.k);
        let r = est.bps;
        // Core: aggregate arrival rate, then the probabilistic drop.
        self.arrivals.update(now, bytes, self.cfg.k_alpha);
        let p = self.drop_probability(r);
        let verdict = if p > 0.0 && rng.random::<f64>() < p {
            Verdict::Drop(DropReason::FairShare)
        } else if !self.fifo.fits(u64::from(bytes)) {
            // Overflow: α was too high.
            self.alpha *= 1.0 - self.cfg.overflow_decrease;
            Verdict::Drop(DropReason::Overflow)
        } else {
            self.accepted.update(now, bytes, self.cfg.k_alpha);
            Verdict::Admit
        };
        self.estimate_alpha(now, r);
        match verdict {
            Verdict::Drop(reason) => dropped.push((pkt, reason)),
            _ => self.fifo.push_back(pkt),
        }
        verdict
    }

    fn dequeue(
        &mut self,
        _now: SimTime,
        _rng: &mut SimRng,
        _dropped: &mut Vec<(P, DropReason)>,
        _marked: &mut Vec<MarkReason>,
    ) -> Option<P> {
        self.fifo.pop_front()
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
    use crate::testing::{cbr, run_link, TestPacket};

    fn csfq(limit: u64) -> Csfq<TestPacket> {
        Csfq::new(CsfqConfig::defaults(&ctx(Limit::Packets(limit)))).unwrap()
    }

    #[test]
    fn the_rate_estimate_is_the_exponential_average_of_l_over_t() {
        // Constant gap T and length l: r_n = R + (r_1 − R)·e^(−(n−1)T/K), R = l/T.
        let mut q = csfq(100_000);
        let mut rng = netunits::rng_stream(1, 0);
        let (mut d, mut m) = (Vec::new(), Vec::new());
        let gap = SimDuration::from_millis(2);
        let (l, t, k): (f64, f64, f64) = (1000.0 * 8.0, 0.002, 0.1);
        let big_r = l / t;
        let r1 = (1.0 - (-t / k).exp()) * big_r;
        for n in 0..=100u64 {
            q.enqueue(SimTime::ZERO + gap.mul(n), TestPacket::new(n, 0, 1000), &mut rng, &mut d);
            q.dequeue(SimTime::ZERO + gap.mul(n), &mut rng, &mut d, &mut m);
            if n >= 1 {
                let expect = big_r + (r1 - big_r) * (-((n - 1) as f64) * t / k).exp();
                let got = q.flow_rate_bps(0).unwrap();
                assert!((got / expect - 1.0).abs() < 1e-9, "n {n}: {got} vs {expect}");
            }
        }
    }

    #[test]
    fn drops_follow_one_minus_alpha_over_r() {
        // One flow at 20 Mbit/s on a 10 Mbit/s link; α held at 5 Mbit/s (k_c made
        // huge so the estimator does not move it): p = 1 − 5/20 = 0.75.
        let cfg = CsfqConfig { k_c: SimDuration::from_secs(3600), ..CsfqConfig::defaults(&ctx(Limit::Packets(100_000))) };
        let mut q = Csfq::new(cfg).unwrap();
        let mut rng = netunits::rng_stream(2, 0);
        let (mut d, mut m) = (Vec::new(), Vec::new());
        let gap = SimDuration::from_micros(600);
        let mut t = SimTime::ZERO;
        for i in 0..3000 {
            q.enqueue(t, TestPacket::new(i, 0, 1500), &mut rng, &mut d);
            q.dequeue(t, &mut rng, &mut d, &mut m);
            t += gap;
        }
        q.alpha = 5e6;
        let r = q.flow_rate_bps(0).unwrap();
        assert!((r / 20e6 - 1.0).abs() < 1e-3, "{r}");
        let p = q.drop_probability(r);
        assert!((p - (1.0 - 5e6 / r)).abs() < 1e-12);
        let n = 20_000;
        let mut drops = 0;
        for i in 0..n {
            if q.enqueue(t, TestPacket::new(10_000 + i, 0, 1500), &mut rng, &mut d) == Verdict::Drop(DropReason::FairShare) {
                drops += 1;
            }
            q.dequeue(t, &mut rng, &mut d, &mut m);
            t += gap;
        }
        assert_eq!(q.alpha_bps(), 5e6);
        let (n, p) = (n as f64, 0.75);
        let sd = (n * p * (1.0 - p)).sqrt();
        assert!((drops as f64 - n * p).abs() < 4.0 * sd, "{drops}");
    }

    #[test]
    fn unresponsive_flows_converge_to_max_min_fair_shares() {
        // 10 Mbit/s link; flows offer 8, 2 and 6 Mbit/s. Max-min: min(8,α)+2+min(6,α) = 10
        // gives α = 4, so the flows should get 4, 2 and 4 Mbit/s.
        let end = SimTime::from_secs(30);
        let mut arr = cbr(0, 1000, SimTime::ZERO, end, SimDuration::from_micros(1000), 0);
        arr.extend(cbr(1, 1000, SimTime::from_micros(333), end, SimDuration::from_micros(4000), 1_000_000));
        arr.extend(cbr(2, 1000, SimTime::from_micros(777), end, SimDuration::from_nanos(1_333_333), 2_000_000));
        let c = QdiscContext { rate_bps: 10_000_000, ..ctx(Limit::Packets(100)) };
        let mut q = Csfq::new(CsfqConfig::defaults(&c)).unwrap();
        let s = run_link(&mut q, arr, c.rate_bps, &mut netunits::rng_stream(3, 0));
        let mbps = |i: usize| s[i].delivered_bytes as f64 * 8.0 / 30.0 / 1e6;
        for (i, fair) in [(0, 4.0), (1, 2.0), (2, 4.0)] {
            assert!((mbps(i) - fair).abs() < 0.1 * fair + 0.2, "flow {i}: {:.2} Mbit/s, fair {fair}", mbps(i));
        }
        assert!(s[1].loss_rate() < 0.02, "the flow below its fair share loses little: {}", s[1].loss_rate());
    }
}
