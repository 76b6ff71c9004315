//! ZRTT (Zhang & Ye, seed `002_b0279b100b55935b.txt`): RTT-aware marking on top of
//! BLUE, plus the machinery MRTT (`mrtt.rs`) and PRTO (`prto.rs`) share with it.
//!
//! Read this first:
//! - [`RttAware`] is BLUE (`blue.rs`'s `P_b` core and arrival path, reused) with a
//!   per-flow marking probability `P_i` in place of `P_b`. A [`MarkingLaw`] turns
//!   BLUE's `P_b`, its average `P_b^avg`, the flow's average RTT and the mean RTT of
//!   active flows into `P_i`. ZRTT, MRTT and PRTO differ only in the law.
//! - Per-flow RTT: an EWMA of the samples (seed 002 Eq. 3, `w_q = 0.1`), taken from
//!   the sender's hint (`PacketMeta::rtt_hint_us`, the 16-bit IP field of seed 002)
//!   or, with `rtt_source = "passive"`, from `PacketMeta::passive_rtt_us` (an estimate
//!   the engine or emulator makes, e.g. from TCP timestamp echoes).
//! - `RTT_savg` is the arithmetic mean of the per-flow averages over *active* flows
//!   (seed 002, after Eq. 3). "Active" is fairlab's definition: a flow whose last
//!   packet arrived within `active_window` (default `max(1 s, 2 × reference RTT)`, i.e.
//!   at least 20 BLUE freeze times and long enough for a window-limited flow with
//!   the longest RTT to send again). Inactive flows are pruned, and the mean
//!   recomputed from scratch, once per `freeze_time`; a flow's first sample joins the
//!   mean at once.
//! - `P_b^avg` is "calculated in the same way as RTT" (seed 002): an EWMA with
//!   weight `w_p = 0.1`, sampled once per `freeze_time` (BLUE changes `P_b` at most
//!   that often; sampling per packet would make the average depend on the packet
//!   rate). Missed samples during a quiet spell are applied in closed form.
//! - ZRTT's law: `P_i = (RTT_savg / RTT_i)^α · P_b` (Eq. 4), clamped to [0, 1], with
//!   `α = 2.0` while `P_b^avg ≤ 0.02` and `α = P_th / P_b^avg` above (the α
//!   equation, printed as "(9)" in the seed), `P_th = 0.05`. Note the formula jumps
//!   from α = 2 to α = 2.5 just above the switch point; fairlab keeps it as printed.
//! - A packet whose flow has no RTT estimate yet gets plain `P_b`. Marked if
//!   ECN-capable (and `ecn`), dropped otherwise, as BLUE.

use std::collections::BTreeMap;

use crate::blue::{blue_dequeue, blue_enqueue, BlueConfig, BlueCore};
use crate::{
    ConfigError, DropReason, DropTail, DropTailConfig, MarkReason, Packet, PacketMeta, ParamReader, Qdisc,
    QdiscContext, SimDuration, SimRng, SimTime, Verdict,
};

/// Where per-flow RTT samples come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RttSource {
    /// The sender's hint carried in the packet (`rtt_hint_us`), as seed 002.
    Hint,
    /// An estimate made by whoever forwards the packet (`passive_rtt_us`).
    Passive,
}

impl RttSource {
    fn sample(self, m: &PacketMeta) -> Option<u32> {
        match self {
            RttSource::Hint => m.rtt_hint_us,
            RttSource::Passive => m.passive_rtt_us,
        }
        .filter(|us| *us > 0)
    }
}

/// A flow's (or the active-flow mean's) RTT statistics, in seconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FlowRttView {
    /// Average RTT (seed 002 Eq. 3).
    pub rtt_s: f64,
    /// Mean deviation of the samples (RFC 6298 §2 `RTTVAR`, gain 1/4), for PRTO's RTO.
    pub rttvar_s: f64,
}

/// Turns BLUE's state and RTTs into a per-flow marking probability.
pub trait MarkingLaw: Copy + std::fmt::Debug {
    /// Scenario name of the discipline using this law.
    const NAME: &'static str;
    /// `P_i` for a flow with statistics `flow`, given BLUE's `p_b`, its average
    /// `p_b_avg` and the mean over active flows `mean`. The caller clamps to [0, 1].
    fn probability(&self, p_b: f64, p_b_avg: f64, mean: &FlowRttView, flow: &FlowRttView) -> f64;
    /// Check the law's parameters.
    fn validate(&self) -> Result<(), ConfigError>;
}

/// ZRTT's law: seed 002 Eq. 4 with the adaptive α.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ZrttLaw {
    /// `P_th`, the protection threshold. Default 0.05 (seed 002).
    pub p_th: f64,
    /// α while `P_b^avg` is at or below `p_switch`. Default 2.0 (seed 002).
    pub alpha_max: f64,
    /// The `P_b^avg` at which α switches to `P_th / P_b^avg`. Default 0.02 (seed 002).
    pub p_switch: f64,
}

impl Default for ZrttLaw {
    fn default() -> Self {
        ZrttLaw { p_th: 0.05, alpha_max: 2.0, p_switch: 0.02 }
    }
}

impl ZrttLaw {
    /// The α equation of seed 002.
    pub fn alpha(&self, p_b_avg: f64) -> f64 {
        if p_b_avg <= self.p_switch {
            self.alpha_max
        } else {
            self.p_th / p_b_avg
        }
    }
}

impl MarkingLaw for ZrttLaw {
    const NAME: &'static str = "zrtt";
    fn probability(&self, p_b: f64, p_b_avg: f64, mean: &FlowRttView, flow: &FlowRttView) -> f64 {
        // Seed 002 Eq. 4.
        (mean.rtt_s / flow.rtt_s).powf(self.alpha(p_b_avg)) * p_b
    }
    fn validate(&self) -> Result<(), ConfigError> {
        let err = |param, v: f64, allowed| Err(ConfigError { qdisc: Self::NAME, param, value: v.to_string(), allowed });
        if !(self.p_th > 0.0 && self.p_th <= 1.0) {
            return err("p_th", self.p_th, "a probability in (0, 1]");
        }
        if !(self.alpha_max >= 0.0 && self.alpha_max <= 10.0) {
            return err("alpha_max", self.alpha_max, "an exponent in [0, 10]");
        }
        if !(self.p_switch > 0.0 && self.p_switch <= 1.0) {
            return err("p_switch", self.p_switch, "a probability in (0, 1]");
        }
        Ok(())
    }
}

/// What ZRTT, MRTT and PRTO share: BLUE's parameters and the RTT bookkeeping.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RttAwareConfig {
    /// BLUE underneath (seed 002's settings by default).
    pub blue: BlueConfig,
    /// Where RTT samples come from. Default the sender's hint (seed 002).
    pub rtt_source: RttSource,
    /// EWMA weight of the per-flow RTT. Default 0.1 (seed 002 Eq. 3).
    pub w_rtt: f64,
    /// EWMA weight of `P_b^avg`. Default 0.1 (seed 002: "in the same way as RTT").
    pub w_p: f64,
    /// A flow counts towards `RTT_savg` while its last packet is at most this old.
    /// Default `max(1 s, 2 × reference RTT)` (fairlab's choice; the seed is silent).
    pub active_window: SimDuration,
}

impl RttAwareConfig {
    /// Seed 002's settings and fairlab's active window.
    pub fn defaults(ctx: &QdiscContext) -> Self {
        RttAwareConfig {
            blue: BlueConfig::defaults(ctx),
            rtt_source: RttSource::Hint,
            w_rtt: 0.1,
            w_p: 0.1,
            active_window: SimDuration::from_secs(1).max(ctx.reference_rtt.mul(2)),
        }
    }

    /// Read BLUE's and the RTT parameters.
    pub fn from_params(r: &mut ParamReader<'_>, ctx: &QdiscContext) -> Result<Self, ConfigError> {
        let d = Self::defaults(ctx);
        let source = r.choice("rtt_source", "hint", &["hint", "passive"], "\"hint\" or \"passive\"")?;
        let cfg = RttAwareConfig {
            blue: BlueConfig::from_params(r, ctx)?,
            rtt_source: if source == "passive" { RttSource::Passive } else { RttSource::Hint },
            w_rtt: r.f64("w_rtt", d.w_rtt, f64::MIN_POSITIVE, 1.0, "a weight in (0, 1]")?,
            w_p: r.f64("w_p", d.w_p, f64::MIN_POSITIVE, 1.0, "a weight in (0, 1]")?,
            active_window: r.duration(
                "active_window",
                d.active_window,
                SimDuration::from_millis(1),
                SimDuration::from_secs(3600),
                "nanoseconds, 1 ms to 1 h",
            )?,
        };
        cfg.validate_as(r.qdisc())?;
        Ok(cfg)
    }

    /// Check ranges, naming `qdisc` in errors.
    pub fn validate_as(&self, qdisc: &'static str) -> Result<(), ConfigError> {
        let err = |param, v: String, allowed| Err(ConfigError { qdisc, param, value: v, allowed });
        if !(self.w_rtt > 0.0 && self.w_rtt <= 1.0) {
            return err("w_rtt", self.w_rtt.to_string(), "a weight in (0, 1]");
        }
        if !(self.w_p > 0.0 && self.w_p <= 1.0) {
            return err("w_p", self.w_p.to_string(), "a weight in (0, 1]");
        }
        if self.active_window.as_nanos() == 0 {
            return err("active_window", "0".into(), "nanoseconds, 1 ms to 1 h");
        }
        self.blue.validate_as(qdisc)
    }
}

/// ZRTT's configuration: the shared part plus its law.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ZrttConfig {
    /// BLUE and RTT bookkeeping.
    pub base: RttAwareConfig,
    /// `P_th`, α and the switch point.
    pub law: ZrttLaw,
}

impl ZrttConfig {
    /// Read ZRTT's parameters.
    pub fn from_params(r: &mut ParamReader<'_>, ctx: &QdiscContext) -> Result<Self, ConfigError> {
        let d = ZrttLaw::default();
        let base = RttAwareConfig::from_params(r, ctx)?;
        let law = ZrttLaw {
            p_th: r.f64("p_th", d.p_th, f64::MIN_POSITIVE, 1.0, "a probability in (0, 1]")?,
            alpha_max: r.f64("alpha_max", d.alpha_max, 0.0, 10.0, "an exponent in [0, 10]")?,
            p_switch: r.f64("p_switch", d.p_switch, f64::MIN_POSITIVE, 1.0, "a probability in (0, 1]")?,
        };
        law.validate()?;
        Ok(ZrttConfig { base, law })
    }
}

#[derive(Clone, Copy, Debug)]
struct FlowRtt {
    avg_us: f64,
    var_us: f64,
    last_seen: SimTime,
}

/// BLUE with a per-flow marking probability from a [`MarkingLaw`].
#[derive(Debug)]
pub struct RttAware<P, L> {
    cfg: RttAwareConfig,
    law: L,
    core: BlueCore,
    fifo: DropTail<P>,
    flows: BTreeMap<u32, FlowRtt>,
    /// Sums of `avg_us` and `var_us` over the flows in `flows` (all of them count
    /// as active until the next prune).
    sum_avg_us: f64,
    sum_var_us: f64,
    p_b_avg: f64,
    next_refresh: SimTime,
}

/// ZRTT: [`RttAware`] with [`ZrttLaw`].
pub type Zrtt<P> = RttAware<P, ZrttLaw>;

impl<P: Packet> Zrtt<P> {
    /// Build ZRTT from its configuration.
    pub fn from_config(cfg: ZrttConfig) -> Result<Self, ConfigError> {
        RttAware::new(cfg.base, cfg.law)
    }
}

impl<P: Packet, L: MarkingLaw> RttAware<P, L> {
    /// Build the discipline; fails on an invalid configuration.
    pub fn new(cfg: RttAwareConfig, law: L) -> Result<Self, ConfigError> {
        cfg.validate_as(L::NAME)?;
        law.validate()?;
        Ok(RttAware {
            core: BlueCore::new(&cfg.blue),
            fifo: DropTail::new(DropTailConfig { limit: cfg.blue.limit })?,
            flows: BTreeMap::new(),
            sum_avg_us: 0.0,
            sum_var_us: 0.0,
            p_b_avg: 0.0,
            next_refresh: SimTime::ZERO + cfg.blue.freeze_time,
            law,
            cfg,
        })
    }

    /// BLUE's marking probability `P_b`.
    pub fn p_b(&self) -> f64 {
        self.core.p()
    }

    /// `P_b^avg`, the EWMA of `P_b` sampled once per freeze time.
    pub fn p_b_avg(&self) -> f64 {
        self.p_b_avg
    }

    /// Number of flows counted as active.
    pub fn active_flows(&self) -> usize {
        self.flows.len()
    }

    /// `RTT_savg` in microseconds (`None` with no active flow).
    pub fn rtt_savg_us(&self) -> Option<f64> {
        (!self.flows.is_empty()).then(|| self.sum_avg_us / self.flows.len() as f64)
    }

    /// A flow's average RTT in microseconds (Eq. 3), if it is active.
    pub fn flow_rtt_us(&self, flow: u32) -> Option<f64> {
        self.flows.get(&flow).map(|f| f.avg_us)
    }

    /// The law in force.
    pub fn law(&self) -> &L {
        &self.law
    }

    /// `P_i` for `flow` in the current state (before clamping is applied by the
    /// decision, this is already clamped to [0, 1]); `P_b` for an unknown flow.
    pub fn flow_probability(&self, flow: u32) -> f64 {
        Self::probability_of(&self.law, self.core.p(), self.p_b_avg, self.mean_view(), self.flows.get(&flow))
    }

    fn mean_view(&self) -> Option<FlowRttView> {
        let n = self.flows.len() as f64;
        (n > 0.0).then(|| FlowRttView { rtt_s: self.sum_avg_us / n * 1e-6, rttvar_s: self.sum_var_us / n * 1e-6 })
    }

    fn probability_of(law: &L, p_b: f64, p_b_avg: f64, mean: Option<FlowRttView>, f: Option<&FlowRtt>) -> f64 {
        match (mean, f) {
            (Some(m), Some(f)) if f.avg_us > 0.0 => {
                let v = FlowRttView { rtt_s: f.avg_us * 1e-6, rttvar_s: f.var_us * 1e-6 };
                let p = law.probability(p_b, p_b_avg, &m, &v);
                if p.is_nan() {
                    p_b
                } else {
                    p.clamp(0.0, 1.0)
                }
            }
            _ => p_b,
        }
    }

    /// Seed 002 Eq. 3 for the RTT and RFC 6298 §2.3's mean deviation (gain 1/4).
    fn observe(&mut self, flow: u32, sample_us: u32, now: SimTime) {
        let x = f64::from(sample_us);
        match self.flows.get_mut(&flow) {
            Some(f) => {
                let (old_avg, old_var) = (f.avg_us, f.var_us);
                f.var_us = 0.75 * f.var_us + 0.25 * (f.avg_us - x).abs();
                f.avg_us = (1.0 - self.cfg.w_rtt) * f.avg_us + self.cfg.w_rtt * x;
                f.last_seen = now;
                self.sum_avg_us += f.avg_us - old_avg;
                self.sum_var_us += f.var_us - old_var;
            }
            None => {
                // First sample: the average starts at the sample, RTTVAR at half of it
                // (RFC 6298 §2.2).
                self.flows.insert(flow, FlowRtt { avg_us: x, var_us: x / 2.0, last_seen: now });
                self.sum_avg_us += x;
                self.sum_var_us += x / 2.0;
            }
        }
    }

    /// Once per freeze time: sample `P_b` into `P_b^avg`, prune inactive flows and
    /// recompute the sums.
    fn refresh_until(&mut self, now: SimTime) {
        if now < self.next_refresh {
            return;
        }
        let period = self.cfg.blue.freeze_time;
        let k = (now - self.next_refresh).as_nanos() / period.as_nanos() + 1;
        // k samples of a constant P_b: avg ← P_b + (avg − P_b)(1 − w)^k.
        let p = self.core.p();
        let keep = (1.0 - self.cfg.w_p).powf(k as f64);
        self.p_b_avg = p + (self.p_b_avg - p) * keep;
        self.next_refresh += period.mul(k);
        let window = self.cfg.active_window;
        self.flows.retain(|_, f| now.saturating_since(f.last_seen) <= window);
        self.sum_avg_us = self.flows.values().map(|f| f.avg_us).sum();
        self.sum_var_us = self.flows.values().map(|f| f.var_us).sum();
    }
}

impl<P: Packet, L: MarkingLaw> Qdisc<P> for RttAware<P, L> {
    fn name(&self) -> &'static str {
        L::NAME
    }

    fn enqueue(&mut self, now: SimTime, pkt: P, rng: &mut SimRng, dropped: &mut Vec<(P, DropReason)>) -> Verdict {
        self.refresh_until(now);
        let flow = pkt.meta().flow;
        match self.cfg.rtt_source.sample(pkt.meta()) {
            Some(us) => self.observe(flow, us, now),
            None => {
                if let Some(f) = self.flows.get_mut(&flow) {
                    f.last_seen = now;
                }
            }
        }
        let (law, p_b_avg, mean, f) = (self.law, self.p_b_avg, self.mean_view(), self.flows.get(&flow).copied());
        let (q_lim, ecn) = (self.cfg.blue.q_lim, self.cfg.blue.ecn);
        let p_of = move |core: &BlueCore, _: &P| Self::probability_of(&law, core.p(), p_b_avg, mean, f.as_ref());
        blue_enqueue(&mut self.core, &mut self.fifo, q_lim, ecn, now, pkt, p_of, rng, dropped)
    }

    fn dequeue(
        &mut self,
        now: SimTime,
        _rng: &mut SimRng,
        _dropped: &mut Vec<(P, DropReason)>,
        _marked: &mut Vec<MarkReason>,
    ) -> Option<P> {
        self.refresh_until(now);
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
pub(crate) mod tests {
    use super::*;
    use crate::red::tests::ctx;
    use crate::testing::TestPacket;
    use crate::Limit;

    pub(crate) fn ms(x: u64) -> SimTime {
        SimTime::from_millis(x)
    }

    pub(crate) fn pkt(id: u64, flow: u32, rtt_ms: Option<u32>) -> TestPacket {
        let mut p = TestPacket::new(id, flow, 1500);
        p.meta.rtt_hint_us = rtt_ms.map(|m| m * 1000);
        p.meta.ecn_capable = true;
        p
    }

    pub(crate) fn base(limit: u64) -> RttAwareConfig {
        RttAwareConfig::defaults(&ctx(Limit::Packets(limit)))
    }

    /// Raise `P_b` to `steps·d1` by overflowing a 2-packet buffer once per 60 ms,
    /// starting at `t0` ms, then leave one packet queued. Returns the next free time (ms).
    pub(crate) fn raise_p_b<L: MarkingLaw>(q: &mut RttAware<TestPacket, L>, steps: u64, t0: u64) -> u64 {
        let mut rng = netunits::rng_stream(99, 0);
        let (mut d, mut m) = (Vec::new(), Vec::new());
        let mut t = t0;
        for _ in 0..steps {
            t += 60;
            while q.len_packets() < 2 {
                q.fifo.push_back(TestPacket::new(0, 999, 1500));
            }
            let before = q.p_b();
            q.enqueue(ms(t), TestPacket::new(0, 999, 1500), &mut rng, &mut d);
            assert!(q.p_b() > before, "overflow at {t} ms must raise P_b");
        }
        while q.len_packets() > 1 {
            q.dequeue(ms(t), &mut rng, &mut d, &mut m);
        }
        t
    }

    fn zrtt(limit: u64) -> Zrtt<TestPacket> {
        Zrtt::from_config(ZrttConfig { base: base(limit), law: ZrttLaw::default() }).unwrap()
    }

    #[test]
    fn per_flow_rtt_is_the_eq3_ewma_and_savg_the_mean_of_active_flows() {
        let mut q = zrtt(2);
        let mut rng = netunits::rng_stream(1, 0);
        let (mut d, mut m) = (Vec::new(), Vec::new());
        q.enqueue(ms(1), pkt(0, 1, Some(100)), &mut rng, &mut d);
        q.dequeue(ms(1), &mut rng, &mut d, &mut m);
        q.enqueue(ms(2), pkt(1, 1, Some(200)), &mut rng, &mut d);
        q.dequeue(ms(2), &mut rng, &mut d, &mut m);
        // Eq. 3: 0.9·100 + 0.1·200 = 110 ms.
        assert!((q.flow_rtt_us(1).unwrap() - 110_000.0).abs() < 1e-6);
        q.enqueue(ms(3), pkt(2, 2, Some(50)), &mut rng, &mut d);
        assert!((q.rtt_savg_us().unwrap() - 80_000.0).abs() < 1e-6);
        // Flow 2 goes quiet; after the active window it no longer counts.
        let w = q.cfg.active_window.as_nanos() / 1_000_000;
        q.dequeue(ms(3), &mut rng, &mut d, &mut m);
        for t in (10..w + 200).step_by(10) {
            q.enqueue(ms(t), pkt(100 + t, 1, Some(110)), &mut rng, &mut d);
            q.dequeue(ms(t), &mut rng, &mut d, &mut m);
        }
        assert_eq!(q.active_flows(), 1);
        assert!((q.rtt_savg_us().unwrap() - 110_000.0).abs() < 1e-6);
    }

    #[test]
    fn p_i_follows_eq4_with_alpha_two_at_low_congestion() {
        let mut q = zrtt(2);
        let mut rng = netunits::rng_stream(2, 0);
        let mut d = Vec::new();
        q.enqueue(ms(1), pkt(1, 1, Some(50)), &mut rng, &mut d);
        q.enqueue(ms(1), pkt(2, 2, Some(200)), &mut rng, &mut d);
        raise_p_b(&mut q, 1, 1);
        let p_b = q.p_b();
        assert!((p_b - 0.02).abs() < 1e-12);
        assert!(q.p_b_avg() <= 0.02);
        // RTT_savg = 125 ms; α = 2: P_1 = (125/50)²·P_b, P_2 = (125/200)²·P_b.
        assert!((q.flow_probability(1) - 6.25 * p_b).abs() < 1e-12);
        assert!((q.flow_probability(2) - 0.390_625 * p_b).abs() < 1e-12);
        // A flow without any RTT sample gets P_b itself.
        assert_eq!(q.flow_probability(77), p_b);
    }

    #[test]
    fn marks_are_drawn_with_p_i() {
        let mut q = zrtt(2);
        let mut rng = netunits::rng_stream(3, 0);
        let (mut d, mut m) = (Vec::new(), Vec::new());
        q.enqueue(ms(1), pkt(1, 1, Some(50)), &mut rng, &mut d);
        q.enqueue(ms(1), pkt(2, 2, Some(200)), &mut rng, &mut d);
        let t = raise_p_b(&mut q, 1, 1);
        let n = 20_000u64;
        let mut marks = [0u64; 2];
        for i in 0..n {
            // Same instant: no refresh and no freeze expiry; one packet stays queued so
            // there is neither an idle event nor an overflow, and the RTT samples equal
            // the averages so P_i stays put.
            let (flow, rtt) = if i % 2 == 0 { (1, 50) } else { (2, 200) };
            match q.enqueue(ms(t), pkt(10 + i, flow, Some(rtt)), &mut rng, &mut d) {
                Verdict::Mark(_) => marks[flow as usize - 1] += 1,
                v => assert_eq!(v, Verdict::Admit),
            }
            q.dequeue(ms(t), &mut rng, &mut d, &mut m);
        }
        for (i, p) in [q.flow_probability(1), q.flow_probability(2)].into_iter().enumerate() {
            let n = (n / 2) as f64;
            let sd = (n * p * (1.0 - p)).sqrt();
            assert!((marks[i] as f64 - n * p).abs() < 4.0 * sd, "flow {}: {} vs {}", i + 1, marks[i], n * p);
        }
    }

    #[test]
    fn p_b_avg_is_an_ewma_sampled_per_freeze_time_and_alpha_switches_above_two_percent() {
        let mut q = zrtt(2);
        let mut rng = netunits::rng_stream(4, 0);
        let (mut d, mut m) = (Vec::new(), Vec::new());
        q.enqueue(ms(1), pkt(1, 1, Some(50)), &mut rng, &mut d);
        q.enqueue(ms(1), pkt(2, 2, Some(200)), &mut rng, &mut d);
        let t = raise_p_b(&mut q, 5, 1);
        let p_b = q.p_b();
        assert!((p_b - 0.1).abs() < 1e-12);
        let a0 = q.p_b_avg();
        // 40 further freeze periods with P_b held at 0.1 (one packet always queued).
        let t1 = q.next_refresh.as_nanos() / 1_000_000;
        for k in 0..40 {
            q.enqueue(ms(t1 + 50 * k), pkt(100 + k, 1, Some(50)), &mut rng, &mut d);
            q.dequeue(ms(t1 + 50 * k), &mut rng, &mut d, &mut m);
        }
        assert_eq!(q.p_b(), p_b, "no BLUE event in between");
        let expect = p_b + (a0 - p_b) * 0.9f64.powi(40);
        assert!((q.p_b_avg() - expect).abs() < 1e-12, "{} vs {expect}", q.p_b_avg());
        assert!(t < t1);
        // α = P_th / P_b^avg now.
        let alpha = 0.05 / q.p_b_avg();
        let savg = q.rtt_savg_us().unwrap();
        let expect1 = (savg / q.flow_rtt_us(1).unwrap()).powf(alpha) * p_b;
        assert!((q.flow_probability(1) - expect1.min(1.0)).abs() < 1e-12);
        assert!((q.law().alpha(q.p_b_avg()) - alpha).abs() < 1e-15);
        assert_eq!(q.law().alpha(0.02), 2.0);
    }

    #[test]
    fn passive_mode_reads_passive_rtt_and_ignores_the_hint() {
        let cfg = RttAwareConfig { rtt_source: RttSource::Passive, ..base(100) };
        let mut q = Zrtt::<TestPacket>::from_config(ZrttConfig { base: cfg, law: ZrttLaw::default() }).unwrap();
        let mut rng = netunits::rng_stream(5, 0);
        let mut d = Vec::new();
        let mut p = pkt(1, 1, Some(50));
        q.enqueue(ms(1), p.clone(), &mut rng, &mut d);
        assert_eq!(q.flow_rtt_us(1), None);
        p.meta.passive_rtt_us = Some(80_000);
        q.enqueue(ms(2), p, &mut rng, &mut d);
        assert_eq!(q.flow_rtt_us(1), Some(80_000.0));
    }

    #[test]
    fn rtt_source_must_be_hint_or_passive() {
        let mut p = crate::Params::new();
        p.insert("rtt_source".into(), serde_json::json!("sender"));
        let e = crate::build::<TestPacket>("zrtt", &p, &ctx(Limit::Packets(100))).err().unwrap();
        assert!(e.to_string().contains("rtt_source") && e.to_string().contains("passive"), "{e}");
    }
}
