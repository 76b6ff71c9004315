//! CHOKe, "CHOose and Keep for responsive flows, CHOose and Kill for unresponsive
//! flows" (Pan, Prabhakar & Psounis, INFOCOM 2000, the algorithm of their Fig. 1).
//!
//! Read this first: CHOKe is RED plus one comparison. On each arrival the RED
//! average is updated ([`RedCore`], shared with `red.rs`, not copied). If the average
//! is at or above `min_th`, one queued packet is drawn uniformly at random; if it
//! belongs to the arriving packet's flow, both are dropped
//! ([`DropReason::ChokeMatch`]). Otherwise the arrival gets RED's treatment (early
//! drop/mark between the thresholds, forced drop above). A flow holding a large
//! share of the buffer is therefore likely to be hit, which is what protects light
//! flows from a heavy one.
//!
//! Pairs are dropped even when ECN-capable: a match is a penalty, not a congestion
//! signal (the paper drops both). The paper's variant with several candidates per
//! arrival is not implemented (one candidate, as in its basic algorithm).

use rand::Rng;

use crate::red::{red_admit, red_dequeue, RedConfig, RedCore};
use crate::{ConfigError, DropReason, DropTail, DropTailConfig, MarkReason, Packet, ParamReader, Qdisc, QdiscContext, SimRng, SimTime, Verdict};

/// CHOKe takes RED's parameters and defaults unchanged (the paper runs CHOKe with
/// RED's thresholds; Linux `sch_choke` reads the same `tc red` options).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ChokeConfig {
    /// RED's averaging, thresholds and marking.
    pub red: RedConfig,
}

impl ChokeConfig {
    /// Read RED's parameters for `choke`.
    pub fn from_params(r: &mut ParamReader<'_>, ctx: &QdiscContext) -> Result<Self, ConfigError> {
        Ok(ChokeConfig { red: RedConfig::from_params(r, ctx)? })
    }
}

/// CHOKe in front of a FIFO.
#[derive(Debug)]
pub struct Choke<P> {
    core: RedCore,
    fifo: DropTail<P>,
}

impl<P: Packet> Choke<P> {
    /// Build CHOKe; fails on an invalid RED configuration.
    pub fn new(cfg: ChokeConfig) -> Result<Self, ConfigError> {
        cfg.red.validate_as("choke")?;
        Ok(Choke { core: RedCore::new(cfg.red), fifo: DropTail::new(DropTailConfig { limit: cfg.red.limit })? })
    }

    /// RED's average queue.
    pub fn avg(&self) -> f64 {
        self.core.avg()
    }
}

impl<P: Packet> Qdisc<P> for Choke<P> {
    fn name(&self) -> &'static str {
        "choke"
    }

    fn enqueue(&mut self, now: SimTime, pkt: P, rng: &mut SimRng, dropped: &mut Vec<(P, DropReason)>) -> Verdict {
        self.core.on_arrival(now, self.fifo.len_bytes(), self.fifo.len_packets());
        let n = self.fifo.len_packets();
        if self.core.above_min() && n > 0 {
            // Pan et al. Fig. 1: draw one queued packet uniformly at random.
            let i = rng.random_range(0..n);
            let same_flow = self.fifo.get(i).is_some_and(|v| v.meta().flow == pkt.meta().flow);
            if same_flow {
                let victim = self.fifo.remove(i).expect("index drawn below the length");
                dropped.push((victim, DropReason::ChokeMatch));
                dropped.push((pkt, DropReason::ChokeMatch));
                if self.fifo.len_packets() == 0 {
                    self.core.queue_emptied(now);
                }
                return Verdict::Drop(DropReason::ChokeMatch);
            }
        }
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
mod tests {
    use super::*;
    use crate::red::tests::{ctx, expected_gap, instant_cfg};
    use crate::testing::{cbr, run_link, TestPacket};
    use crate::{Limit, Red, SimDuration};

    fn prefilled(red: RedConfig, flows: &[u32]) -> Choke<TestPacket> {
        let mut q = Choke::new(ChokeConfig { red }).unwrap();
        for (i, f) in flows.iter().enumerate() {
            q.fifo.push_back(TestPacket::new(1_000_000 + i as u64, *f, 1500));
        }
        q
    }

    #[test]
    fn an_arrival_matching_the_drawn_packet_is_dropped_with_it() {
        let mut q = prefilled(instant_cfg(), &[7; 8]);
        let mut rng = netunits::rng_stream(1, 0);
        let mut d = Vec::new();
        let v = q.enqueue(SimTime::from_micros(1), TestPacket::new(1, 7, 1500), &mut rng, &mut d);
        assert_eq!(v, Verdict::Drop(DropReason::ChokeMatch));
        assert_eq!(d.len(), 2);
        assert!(d.iter().all(|(p, r)| p.meta.flow == 7 && *r == DropReason::ChokeMatch));
        assert_eq!(d[1].0.id, 1, "the arrival is the second packet reported");
        assert_eq!(q.len_packets(), 7);
    }

    #[test]
    fn below_min_th_nothing_is_compared() {
        let mut q = prefilled(instant_cfg(), &[7; 4]);
        let mut rng = netunits::rng_stream(1, 0);
        let mut d = Vec::new();
        let v = q.enqueue(SimTime::from_micros(1), TestPacket::new(1, 7, 1500), &mut rng, &mut d);
        assert_eq!(v, Verdict::Admit);
        assert!(d.is_empty());
    }

    #[test]
    fn match_probability_is_the_flows_share_of_the_queue() {
        // 3 of 10 queued packets belong to flow A: a uniform draw matches with p = 0.3.
        // RED's own probability is made negligible (max_p tiny, max_th far away).
        let red = RedConfig { max_th: 1000.0, max_p: 1e-12, ..instant_cfg() };
        let flows = [1, 2, 1, 2, 2, 1, 2, 2, 2, 2];
        let mut rng = netunits::rng_stream(9, 0);
        let n = 20_000;
        let mut matches = 0;
        for i in 0..n {
            let mut q = prefilled(red, &flows);
            let mut d = Vec::new();
            if q.enqueue(SimTime::from_micros(1), TestPacket::new(i, 1, 1500), &mut rng, &mut d)
                == Verdict::Drop(DropReason::ChokeMatch)
            {
                matches += 1;
            }
        }
        let (p, n) = (0.3, n as f64);
        let sd = (n * p * (1.0 - p)).sqrt();
        assert!((matches as f64 - n * p).abs() < 4.0 * sd, "{matches}");
    }

    #[test]
    fn without_a_match_choke_is_red() {
        // Every arrival is a new flow, so no draw can match; the early drop fraction must
        // follow RED's rule for avg = 10 (p_b = 0.05 with count spacing).
        let mut q = prefilled(instant_cfg(), &[0; 10]);
        let mut rng = netunits::rng_stream(3, 0);
        let (mut d, mut m) = (Vec::new(), Vec::new());
        let n = 100_000u64;
        let mut drops = 0;
        for i in 0..n {
            let t = SimTime::from_micros(i + 1);
            let v = q.enqueue(t, TestPacket::new(i, 100 + i as u32, 1500), &mut rng, &mut d);
            if v == Verdict::Drop(DropReason::Early) {
                drops += 1;
            } else {
                q.dequeue(t, &mut rng, &mut d, &mut m);
            }
        }
        let p = 1.0 / expected_gap(0.05);
        let sd = (n as f64 * p * (1.0 - p)).sqrt();
        assert!((drops as f64 - n as f64 * p).abs() < 4.0 * sd, "{drops}");
    }

    #[test]
    fn a_light_flow_is_protected_from_a_heavy_unresponsive_one() {
        // 10 Mbit/s link (833 packets/s of 1500 B). Flow 0 sends 1667 packets/s without
        // backing off; flow 1 sends 167 packets/s. RED drops both at the same rate;
        // CHOKe must hit the heavy flow much harder (Pan et al. §4).
        let end = SimTime::from_secs(20);
        let mut arrivals = cbr(0, 1500, SimTime::ZERO, end, SimDuration::from_micros(600), 0);
        arrivals.extend(cbr(1, 1500, SimTime::from_micros(301), end, SimDuration::from_millis(6), 1_000_000));
        let c = QdiscContext { rate_bps: 10_000_000, ..ctx(Limit::Packets(200)) };
        let red_cfg = RedConfig::defaults(&c);
        let mut red = Red::new(red_cfg).unwrap();
        let mut choke = Choke::new(ChokeConfig { red: red_cfg }).unwrap();
        let r = run_link(&mut red, arrivals.clone(), c.rate_bps, &mut netunits::rng_stream(5, 0));
        let k = run_link(&mut choke, arrivals, c.rate_bps, &mut netunits::rng_stream(5, 0));
        let (red_light, choke_light) = (r[1].loss_rate(), k[1].loss_rate());
        let choke_heavy = k[0].loss_rate();
        assert!((r[0].loss_rate() - red_light).abs() < 0.1, "RED treats both alike: {} vs {}", r[0].loss_rate(), red_light);
        assert!(choke_light < 0.5 * red_light, "light flow loss: CHOKe {choke_light} vs RED {red_light}");
        assert!(choke_heavy > 2.0 * choke_light, "heavy {choke_heavy} vs light {choke_light}");
        assert!(k[1].delivered > r[1].delivered);
    }
}
