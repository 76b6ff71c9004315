//! BBR v1 tests, through the trait, against the rules of the paper/draft and
//! the definitions in Linux `tcp_bbr.c`: closed forms and stated thresholds,
//! hand-computed, never numbers read back from this code.

use super::config::PACING_GAIN_CYCLE;
use super::*;
use crate::cc::testkit::ack_sample;
use crate::cc::testpath::{first_time_in, Path, PATH_MSS};
use crate::cc::{CcInit, RateSample};
use netunits::{Bandwidth, SimDuration, SimTime};

const MSS: u64 = 1000;

fn init() -> CcInit {
    crate::cc::testkit::init(10)
}

/// The configuration most tests use: the PROBE_BW entry phase pinned to 2 (the
/// default draws it, as Linux does).
fn cfg() -> BbrConfig {
    BbrConfig { cycle_start: Some(2), ..BbrConfig::default() }
}

/// A BBR with [`cfg`] for the test path.
fn path_bbr() -> Box<dyn CongestionControl> {
    Box::new(Bbr::new(cfg(), &init()))
}

fn params(json: &str) -> Params {
    match serde_json::from_str::<serde_json::Value>(json).unwrap() {
        serde_json::Value::Object(m) => m,
        _ => unreachable!(),
    }
}

/// Drives a [`Bbr`] directly with synthetic, round-structured ACKs: every ACK of
/// round k reports `prior_delivered` = the delivered count when round k began,
/// so exactly the first ACK of each round starts a new BBR round.
struct Driver {
    bbr: Bbr,
    now: SimTime,
    rtt: SimDuration,
    delivered: u64,
    in_recovery: bool,
    /// The application ran dry (Linux `tp->app_limited`).
    app_limited: bool,
    /// cwnd did not limit the sending (Linux `!tcp_is_cwnd_limited`), as for a
    /// paced BBR flow whose pipe stays below its 2·BDP window.
    cwnd_not_limiting: bool,
}

impl Driver {
    fn new(cfg: BbrConfig) -> Self {
        Driver { bbr: Bbr::new(cfg, &init()), now: SimTime::from_secs(1), rtt: SimDuration::from_millis(100), delivered: 0, in_recovery: false, app_limited: false, cwnd_not_limiting: false }
    }

    fn ack(&mut self, prior_delivered: u64, rate: Bandwidth, prior_in_flight: u64, in_flight: u64) {
        self.ack_pkts(1, prior_delivered, rate, prior_in_flight, in_flight);
    }

    /// One ACK for `pkts` packets. The sender's pipe went from `prior_in_flight`
    /// to `in_flight`; whatever left it beyond `pkts` was marked lost.
    fn ack_pkts(&mut self, pkts: u64, prior_delivered: u64, rate: Bandwidth, prior_in_flight: u64, in_flight: u64) {
        self.delivered += pkts * MSS;
        let a = AckSample {
            prior_in_flight,
            app_limited: self.app_limited || self.cwnd_not_limiting,
            conn_app_limited: self.app_limited,
            in_recovery: self.in_recovery,
            rate: Some(RateSample {
                delivered: pkts * MSS,
                interval: self.rtt,
                delivery_rate: rate,
                is_app_limited: false,
                prior_delivered,
                total_delivered: self.delivered,
            }),
            ..ack_sample(self.now, pkts as u32, self.rtt, in_flight)
        };
        self.bbr.on_ack(&a);
    }

    /// A round like [`Driver::round`] in which every `loss_every`-th ACK also
    /// reports one packet newly marked lost.
    fn lossy_round(&mut self, n: u64, rate: Bandwidth, flight: u64, loss_every: u64) {
        let start = self.delivered;
        let step = SimDuration::from_nanos(self.rtt.as_nanos() / n);
        for i in 0..n {
            self.now += step;
            let gone = if (i + 1) % loss_every == 0 { 2 } else { 1 };
            self.ack(start, rate, flight * MSS, (flight - gone) * MSS);
        }
    }

    /// One round of `n` ACKs spread over one RTT, all reporting `rate`, with the
    /// flight held at `flight` packets.
    fn round(&mut self, n: u64, rate: Bandwidth, flight: u64) {
        let start = self.delivered;
        let step = SimDuration::from_nanos(self.rtt.as_nanos() / n);
        for _ in 0..n {
            self.now += step;
            self.ack(start, rate, flight * MSS, (flight - 1) * MSS);
        }
    }
}

fn mbps(x: u64) -> Bandwidth {
    Bandwidth::from_mbps(x)
}

// ---------------------------------------------------------------- STARTUP

#[test]
fn startup_exits_on_the_third_round_without_25_percent_growth() {
    // Draft-00 "Estimating when Startup has filled the pipe": the pipe is full
    // after 3 consecutive rounds whose max bandwidth grew < 25%.
    let mut d = Driver::new(cfg());
    for r in [1, 2, 4, 8, 16] {
        d.round(10, mbps(r), 10);
        assert_eq!(d.bbr.mode(), Mode::Startup, "still growing at {r} Mbit/s");
    }
    // +20% is "flat" too (below the 25% threshold).
    d.round(10, mbps(16), 10);
    assert_eq!(d.bbr.mode(), Mode::Startup, "1 flat round");
    d.round(10, Bandwidth::from_bps(19_000_000), 10);
    assert_eq!(d.bbr.mode(), Mode::Startup, "2 flat rounds");
    d.round(1, mbps(16), 10);
    assert_ne!(d.bbr.mode(), Mode::Startup, "3rd flat round must end STARTUP");
    assert_eq!(d.bbr.btl_bw(), Bandwidth::from_bps(19_000_000), "btl_bw is the max sample");
}

#[test]
fn a_25_percent_step_restarts_the_flat_round_count() {
    let mut d = Driver::new(cfg());
    d.round(10, mbps(10), 10);
    d.round(10, mbps(10), 10);
    d.round(10, mbps(10), 10);
    // Two flat rounds so far; exactly +25% counts as growth.
    d.round(10, Bandwidth::from_bps(12_500_000), 10);
    d.round(10, Bandwidth::from_bps(12_500_000), 10);
    d.round(10, Bandwidth::from_bps(12_500_000), 10);
    assert_eq!(d.bbr.mode(), Mode::Startup);
    d.round(1, Bandwidth::from_bps(12_500_000), 10);
    assert_ne!(d.bbr.mode(), Mode::Startup);
}

#[test]
fn startup_pacing_and_cwnd_gain_is_2_over_ln2() {
    let mut d = Driver::new(cfg());
    d.round(10, mbps(8), 10);
    let g = 2.0 / std::f64::consts::LN_2;
    assert!((d.bbr.pacing_gain() - g).abs() < 1e-3, "gain {}", d.bbr.pacing_gain());
    let want = 8e6 * 2.885 * 0.99;
    let got = d.bbr.pacing_rate().unwrap().as_bps() as f64;
    assert!((got - want).abs() <= 2.0, "pacing {got} want {want}");
}

#[test]
fn startup_doubles_delivery_every_round_on_a_real_ack_clock() {
    // 100 Mbit/s, 100 ms: BDP = 1250 packets, so from IW 10 there are ~7 rounds
    // of pure doubling (Cardwell et al. 2016: 2/ln2 "doubles the sending rate
    // each round").
    let mut p = Path::new(Bandwidth::from_mbps(100), 100_000);
    let rtt = SimDuration::from_millis(100);
    let f = p.add(path_bbr(), rtt, SimTime::ZERO);
    p.run_until(SimTime::from_millis(800));
    // Delivered per base-RTT bucket, from the first ACK on.
    let first = p.flows[f].trace[0].0;
    let mut per_round = [0u64; 7];
    for (t, _, _) in &p.flows[f].trace {
        let k = (t.saturating_since(first).as_nanos() / rtt.as_nanos()) as usize;
        if k < per_round.len() {
            per_round[k] += 1;
        }
    }
    // Buckets 0-2 carry the start transient (the initial window goes out as a
    // burst and the first pacing rate is high_gain · IW / first RTT); from then on
    // the delivery-rate samples drive pacing and each round doubles.
    for k in 3..per_round.len() {
        let ratio = per_round[k] as f64 / per_round[k - 1] as f64;
        assert!((1.7..=2.3).contains(&ratio), "round {k}: {per_round:?}");
    }
}

#[test]
fn startup_ends_within_log2_bdp_plus_3_rounds_and_drain_brings_flight_to_one_bdp() {
    let mut p = Path::new(Bandwidth::from_mbps(10), 100_000);
    let rtt = SimDuration::from_millis(40);
    let f = p.add(path_bbr(), rtt, SimTime::ZERO);
    p.run_until(SimTime::from_secs(3));
    let bdp = p.bdp_pkts(rtt) as f64; // 50 packets
    let fl = &p.flows[f];
    let drain = first_time_in(fl, "drain").expect("enters DRAIN");
    let probe = first_time_in(fl, "probe_bw").expect("enters PROBE_BW");
    // Rounds to fill: log2(BDP / IW) of doubling at about the base RTT (+2 for
    // the start transient), then the round in which the rate first exceeds the
    // link and 3 flat rounds, each stretched by the STARTUP queue to at most
    // high_gain × base RTT (cwnd ≤ 2.885·BDP).
    let fill = (bdp / 10.0).log2().ceil() + 2.0;
    let flat = 4.0 * 2.885;
    let bound = SimTime::ZERO + SimDuration::from_secs_f64((fill + flat) * rtt.as_secs_f64());
    assert!(drain <= bound, "drain at {drain}, bound {bound}");
    // DRAIN ends when the flight is down to ~1 BDP (+ quantization: 3 quanta of
    // 2 packets, rounded to even), within a couple of rounds (drain gain 1/2.885
    // removes the 1.885·BDP STARTUP queue in about one round).
    let (_, _, flight) = *fl.trace.iter().find(|(t, _, _)| *t >= probe).unwrap();
    assert!((flight / PATH_MSS) as f64 <= bdp + 8.0, "flight {} pkts at PROBE_BW entry, BDP {bdp}", flight / PATH_MSS);
    assert!(probe.saturating_since(drain) <= rtt.mul(4), "drain lasted {}", probe.saturating_since(drain));
    // And the queue it leaves is small.
    let q = p.queue.iter().rev().find(|(t, _)| *t <= probe + rtt).unwrap().1;
    assert!((q as f64) < 0.3 * bdp, "queue {q} after drain");
}

// ---------------------------------------------------------------- PROBE_BW

/// A driver in PROBE_BW at 10 Mbit/s, 100 ms (BDP 125 packets), phase 2.
fn in_probe_bw(cfg: BbrConfig) -> Driver {
    let mut d = Driver::new(cfg);
    for _ in 0..4 {
        d.round(10, mbps(10), 10);
    }
    // STARTUP ended; a small flight ends DRAIN at once.
    assert_eq!(d.bbr.mode(), Mode::ProbeBw);
    d
}

#[test]
fn probe_bw_cycles_gains_in_order_starting_at_cycle_start() {
    let mut d = in_probe_bw(cfg());
    assert_eq!(d.bbr.cycle_index(), 2, "cycle_start = 2");
    let bdp = 125;
    let mut seen = vec![d.bbr.pacing_gain()];
    for _ in 0..9 {
        // A flight between 1·BDP and 1.25·BDP: the 1.25 phase ends on time only
        // if the flight reaches 1.25·BDP, so give it that much; the 0.75 phase
        // ends when the flight falls to BDP.
        let gain = d.bbr.pacing_gain();
        let flight = if gain > 1.0 { bdp * 5 / 4 + 12 } else if gain < 1.0 { bdp } else { bdp + 4 };
        // Slightly more than one min_rtt per phase.
        d.round(11, mbps(10), flight);
        seen.push(d.bbr.pacing_gain());
    }
    // From phase 2: 1,1,1,1,1,1 (phases 2..7), 1.25, 0.75, 1, 1.
    let expect: Vec<f64> = (0..10).map(|i| PACING_GAIN_CYCLE[(2 + i) % 8]).collect();
    assert_eq!(seen, expect);
}

#[test]
fn probe_bw_pacing_rate_is_gain_times_btl_bw_less_1_percent() {
    let mut d = in_probe_bw(cfg());
    for _ in 0..12 {
        let gain = d.bbr.pacing_gain();
        let want = 10e6 * gain * 0.99;
        let got = d.bbr.pacing_rate().unwrap().as_bps() as f64;
        assert!((got - want).abs() <= 2.0, "gain {gain}: pacing {got}, want {want}");
        let flight = if gain > 1.0 { 170 } else { 125 };
        d.round(11, mbps(10), flight);
    }
}

#[test]
fn probe_bw_cwnd_is_2_bdp_plus_quantization_allowance() {
    let mut d = in_probe_bw(cfg());
    // Cruise phase, ACKs spaced exactly at the 10 Mbit/s estimate (125 ACKs of
    // one 1000-byte packet per 100 ms). Linux `bbr_set_cwnd`: target =
    // bdp(bw, 2) + extra_acked, then `bbr_quantization_budget` adds 3 quanta of
    // 2 packets (below ~16 Mbit/s at MSS 1000, ~1 ms of pacing is < 2 packets)
    // and rounds up to even. An ACK stream at exactly `bw` restarts the
    // aggregation epoch on every ACK, so extra_acked = the 1 packet that ACK
    // carried.
    for _ in 0..2 {
        d.round(125, mbps(10), 125);
    }
    let bdp = 125u64;
    assert_eq!(d.bbr.extra_acked_cwnd(), 1);
    let want = (2 * bdp + 1 + 6).div_ceil(2) * 2;
    assert_eq!(d.bbr.cwnd(), want * MSS);
}

#[test]
fn max_filter_forgets_a_peak_after_10_rounds() {
    let mut d = in_probe_bw(cfg());
    d.round(20, mbps(20), 125);
    assert_eq!(d.bbr.btl_bw(), mbps(20));
    for _ in 0..9 {
        d.round(20, mbps(10), 125);
    }
    assert_eq!(d.bbr.btl_bw(), mbps(20), "still inside the 10-round window");
    for _ in 0..3 {
        d.round(20, mbps(10), 125);
    }
    assert_eq!(d.bbr.btl_bw(), mbps(10), "peak expired");
}

#[test]
fn app_limited_samples_cannot_lower_the_estimate_but_can_raise_it() {
    let mut d = in_probe_bw(cfg());
    let start = d.delivered;
    let limited = |d: &mut Driver, rate: Bandwidth| {
        d.delivered += MSS;
        let a = AckSample {
            app_limited: true,
            rate: Some(RateSample { delivered: MSS, interval: d.rtt, delivery_rate: rate, is_app_limited: true, prior_delivered: start, total_delivered: d.delivered }),
            ..ack_sample(d.now, 1, d.rtt, 9 * MSS)
        };
        d.bbr.on_ack(&a);
    };
    // Fifteen rounds of app-limited 1 Mbit/s: the 10 Mbit/s estimate stands.
    for _ in 0..15 {
        d.now += d.rtt;
        limited(&mut d, mbps(1));
    }
    assert_eq!(d.bbr.btl_bw(), mbps(10));
    limited(&mut d, mbps(30));
    assert_eq!(d.bbr.btl_bw(), mbps(30));
}

// ---------------------------------------------------------------- PROBE_RTT

#[test]
fn probe_rtt_after_10_s_without_a_new_min_holds_4_packets_for_200_ms() {
    let mut p = Path::new(Bandwidth::from_mbps(10), 100_000);
    let rtt = SimDuration::from_millis(40);
    let f = p.add(path_bbr(), rtt, SimTime::ZERO);
    p.run_until(SimTime::from_secs(12));
    let fl = &p.flows[f];
    // min_rtt = base RTT + one packet's transmission; no sample can be lower.
    // A sample EQUAL to it refreshes its 10 s clock (Linux `bbr_update_min_rtt`:
    // `rtt_us <= min_rtt_us`), so PROBE_RTT comes 10 s after the last such
    // sample, and never earlier than 10 s after the first ACK.
    let first_ack = fl.trace[0].0;
    let enter = first_time_in(fl, "probe_rtt").expect("PROBE_RTT within 12 s");
    let min = fl.rtts.iter().map(|(_, r)| *r).min().unwrap();
    assert_eq!(min, rtt + Bandwidth::from_mbps(10).tx_time(PATH_MSS));
    let last_min = fl.rtts.iter().filter(|(t, r)| *r == min && *t < enter).map(|(t, _)| *t).max().unwrap();
    let expiry = last_min + SimDuration::from_secs(10);
    assert!(expiry >= first_ack + SimDuration::from_secs(10));
    assert!(enter > expiry && enter <= expiry + rtt.mul(2), "PROBE_RTT at {enter}, min_rtt expired {expiry}");
    // Inside PROBE_RTT the window is 4 packets...
    let exit = fl.phases.iter().find(|(t, ph)| *t > enter && *ph != "probe_rtt").expect("PROBE_RTT ends").0;
    for (t, cwnd, _) in &fl.trace {
        if *t > enter && *t < exit {
            assert!(*cwnd <= 4 * PATH_MSS, "cwnd {cwnd} at {t} in PROBE_RTT");
        }
    }
    // ...for at least 200 ms after the flight reached 4 packets, and about one
    // round more at most (the flight drains within a round, and exit waits for
    // one round at the low flight).
    let held = exit.saturating_since(enter);
    assert!(held >= SimDuration::from_millis(200), "held {held}");
    assert!(held <= SimDuration::from_millis(200) + rtt.mul(3), "held {held}");
    // And it returns to PROBE_BW (the pipe had been filled).
    assert_eq!(fl.phases.iter().find(|(t, _)| *t >= exit).unwrap().1, "probe_bw");
}

#[test]
fn a_lower_rtt_sample_postpones_probe_rtt() {
    let mut d = in_probe_bw(cfg());
    // 9 s of rounds, then a lower RTT: the 10 s clock restarts from there.
    for _ in 0..90 {
        d.round(10, mbps(10), 125);
    }
    d.rtt = SimDuration::from_millis(90);
    d.round(10, mbps(10), 125);
    d.rtt = SimDuration::from_millis(100);
    for _ in 0..50 {
        d.round(10, mbps(10), 125);
    }
    assert_ne!(d.bbr.mode(), Mode::ProbeRtt, "only ~5 s since the new minimum");
    assert_eq!(d.bbr.min_rtt(), Some(SimDuration::from_millis(90)));
}

// ---------------------------------------------------------------- loss

#[test]
fn loss_does_not_halve_cwnd_and_recovery_exit_restores_it() {
    let mut d = in_probe_bw(cfg());
    d.round(200, mbps(10), 125);
    let before = d.bbr.cwnd();
    // A loss with the full window in flight: packet conservation keeps cwnd at
    // the flight, not half of it.
    let ev = CongestionEvent { now: d.now, signal: CongestionSignal::Loss, in_flight: before, srtt: d.rtt, min_rtt: d.rtt };
    d.bbr.on_congestion_event(&ev);
    assert_eq!(d.bbr.cwnd(), before);
    d.in_recovery = true;
    // 20 packets were lost: the flight after the next ACK is 180 packets.
    // First recovery ACK: cwnd = flight after the ACK + packets ACKed (packet
    // conservation: one out per one in).
    // Later ACKs of that round hold it at max(cwnd, flight + acked).
    d.round(6, mbps(10), 181);
    assert_eq!(d.bbr.cwnd(), (180 + 1) * MSS);
    // The next round: conservation is over, cwnd grows by the packets ACKed
    // (slow start toward the target, at most 2 out per 1 in).
    d.round(5, mbps(10), 181);
    assert_eq!(d.bbr.cwnd(), (180 + 1 + 5) * MSS);
    d.in_recovery = false;
    d.bbr.on_recovery_exit(d.now);
    d.round(1, mbps(10), 10);
    // Restored to the saved window, then this ACK's own +1 toward the
    // 2·BDP + 6 = 256-packet target.
    assert_eq!(d.bbr.cwnd(), before + MSS, "prior cwnd restored on leaving recovery");
}

#[test]
fn ecn_is_ignored_by_bbr_v1() {
    // Two identical flows, one of which sees an ECN echo: nothing differs.
    let mut a = in_probe_bw(cfg());
    let mut b = in_probe_bw(cfg());
    a.round(200, mbps(10), 125);
    b.round(200, mbps(10), 125);
    let cw = a.bbr.cwnd();
    a.bbr.on_congestion_event(&CongestionEvent { now: a.now, signal: CongestionSignal::Ecn, in_flight: cw, srtt: a.rtt, min_rtt: a.rtt });
    assert_eq!(a.bbr.cwnd(), cw);
    for _ in 0..3 {
        a.round(50, mbps(10), 125);
        b.round(50, mbps(10), 125);
        assert_eq!(a.bbr.cwnd(), b.bbr.cwnd());
        assert_eq!(a.bbr.pacing_rate(), b.bbr.pacing_rate());
    }
}

#[test]
fn rto_drops_to_one_packet_and_slow_starts_back_to_the_target() {
    let mut d = in_probe_bw(cfg());
    d.round(200, mbps(10), 125);
    let before = d.bbr.cwnd();
    d.bbr.on_rto(d.now, before, crate::cc::RtoEpisode::New);
    assert_eq!(d.bbr.cwnd(), MSS);
    d.in_recovery = true;
    d.round(4, mbps(10), 5);
    // First ACK: 1 + 1, floored at the 4-packet minimum; then +1 per packet ACKed.
    assert_eq!(d.bbr.cwnd(), (4 + 3) * MSS);
    d.in_recovery = false;
    d.round(1, mbps(10), 5);
    // Saved window back, then this ACK's own +1 toward the 256-packet target.
    assert!(before < 256 * MSS);
    assert_eq!(d.bbr.cwnd(), before + MSS, "saved window restored when RTO recovery ends");
}

// ---------------------------------------------------------------- behaviour

#[test]
fn bbr_keeps_the_queue_far_below_a_5_bdp_buffer_and_fills_the_link() {
    let rtt = SimDuration::from_millis(40);
    let rate = Bandwidth::from_mbps(10);
    let mut p = Path::new(rate, 250); // 5 BDP
    let f = p.add(path_bbr(), rtt, SimTime::ZERO);
    p.run_until(SimTime::from_secs(8));
    let bdp = p.bdp_pkts(rtt);
    // Steady state (after STARTUP/DRAIN): the 1.25 probe adds at most a quarter
    // BDP plus the 2-packet phase allowance and quantization (≈ 8 packets).
    let max_q = p.queue.iter().filter(|(t, _)| *t >= SimTime::from_secs(2)).map(|(_, q)| *q).max().unwrap();
    assert!(max_q <= bdp / 4 + 10, "queue peak {max_q} packets, BDP {bdp}");
    assert_eq!(p.flows[f].lost, 0);
    let util = p.goodput_bps(f) / rate.as_bps() as f64;
    assert!(util > 0.9, "utilisation {util}");
}

// ---------------------------------------------------------------- cwnd details

#[test]
fn quantization_budget_is_three_bursts_of_a_millisecond_of_pacing() {
    // Linux `bbr_tso_segs_goal` = max((sk_pacing_rate >> 10) / MSS, min_tso_segs)
    // with min_tso_segs 1 below 1.2 Mbit/s, else 2; `bbr_quantization_budget`
    // adds 3 of those and rounds up to even.
    let mut d = Driver::new(cfg());
    for _ in 0..4 {
        d.round(10, mbps(100), 10);
    }
    assert_eq!(d.bbr.mode(), Mode::ProbeBw);
    // 100 Mbit/s · 0.99 = 12 375 000 B/s; >> 10 = 12 084 B = 12 packets of 1000 B.
    for _ in 0..3 {
        // 1250 ACKs per 100 ms: exactly the 100 Mbit/s estimate, extra_acked = 1.
        d.round(1250, mbps(100), 1250);
    }
    assert_eq!(d.bbr.tso_segs_goal(), 12);
    assert_eq!(d.bbr.extra_acked_cwnd(), 1);
    let bdp = 1250u64;
    assert_eq!(d.bbr.cwnd(), (2 * bdp + 1 + 3 * 12).div_ceil(2) * 2 * MSS);

    // Below 1.2 Mbit/s the quantum is one packet; between, two.
    let mut slow = Driver::new(cfg());
    for _ in 0..4 {
        slow.round(10, Bandwidth::from_bps(1_000_000), 10);
    }
    assert_eq!((slow.bbr.mode(), slow.bbr.pacing_gain()), (Mode::ProbeBw, 1.0));
    assert!(slow.bbr.payload_pacing_rate().as_bps() < 1_200_000);
    assert_eq!(slow.bbr.tso_segs_goal(), 1);
    let mid = in_probe_bw(cfg()); // 10 Mbit/s: 1 237 500 B/s >> 10 = 1208 B, 1 packet, floor 2
    assert_eq!(mid.bbr.tso_segs_goal(), 2);
}

#[test]
fn each_ack_takes_its_newly_lost_packets_off_cwnd() {
    // Linux `bbr_set_cwnd_to_recover_or_restore`: cwnd = max(cwnd − rs->losses, 1),
    // then (outside packet conservation) `bbr_set_cwnd`: min(cwnd + acked, target).
    let mut d = in_probe_bw(cfg());
    for _ in 0..2 {
        d.round(125, mbps(10), 125);
    }
    let target = (2 * 125 + 1 + 6u64).div_ceil(2) * 2;
    assert_eq!(d.bbr.cwnd(), target * MSS);
    let start = d.delivered;
    d.now += SimDuration::from_micros(800);
    // The pipe fell from 130 to 124 packets: 1 delivered, 5 newly marked lost.
    d.ack(start, mbps(10), 130 * MSS, 124 * MSS);
    assert_eq!(d.bbr.cwnd(), (target - 5 + 1) * MSS);
    // A late arrival (delivered without leaving the pipe) is not a negative loss.
    d.now += SimDuration::from_micros(800);
    d.ack(start, mbps(10), 124 * MSS, 124 * MSS);
    assert_eq!(d.bbr.cwnd(), (target - 5 + 2) * MSS);
    // In recovery after the conservation round, the same deduction applies.
    let ev = CongestionEvent { now: d.now, signal: CongestionSignal::Loss, in_flight: 120 * MSS, srtt: d.rtt, min_rtt: d.rtt };
    d.bbr.on_congestion_event(&ev);
    d.in_recovery = true;
    d.round(3, mbps(10), 121); // first recovery ACK: flight 120 + 1
    assert_eq!(d.bbr.cwnd(), 121 * MSS);
    d.round(2, mbps(10), 121); // conservation over: +1 per ACK
    assert_eq!(d.bbr.cwnd(), 123 * MSS);
    let start = d.delivered;
    d.now += SimDuration::from_micros(800);
    d.ack(start, mbps(10), 121 * MSS, 117 * MSS); // 3 lost, 1 acked
    assert_eq!(d.bbr.cwnd(), (123 - 3 + 1) * MSS);
}

// ---------------------------------------------------------------- ACK aggregation

/// One ACK, `gap` after the previous one, covering `pkts` packets, in the
/// current round, with the flight held at 125 packets.
fn burst(d: &mut Driver, gap: SimDuration, pkts: u64) {
    d.now += gap;
    let start = d.delivered;
    // In flight after the ACK: the 125-packet window less what it acknowledged,
    // none once a burst ACKs more than the window held (not a wrapped u64).
    d.ack_pkts(pkts, start, mbps(10), 125 * MSS, 125u64.saturating_sub(pkts) * MSS);
}

#[test]
fn ack_aggregation_adds_the_excess_acked_over_bw_to_the_cwnd_target() {
    // Linux `bbr_update_ack_aggregation`: an epoch restarts whenever the data
    // ACKed since it began is ≤ bw · elapsed; extra_acked = acked − bw · elapsed.
    let mut d = in_probe_bw(cfg());
    for _ in 0..2 {
        d.round(125, mbps(10), 125);
    }
    assert_eq!(d.bbr.extra_acked_cwnd(), 1);
    // 20 ms of silence, then one ACK for 25 packets. bw · 20.8 ms = 26 packets ≥
    // the 1 ACKed since the last epoch start: a new epoch starts with this ACK,
    // whose 25 packets are all excess.
    burst(&mut d, SimDuration::from_micros(20_800), 25);
    assert_eq!(d.bbr.extra_acked_cwnd(), 25);
    // ACKs at exactly bw after it keep acked − expected at 25.
    for _ in 0..50 {
        burst(&mut d, SimDuration::from_micros(800), 1);
    }
    assert_eq!(d.bbr.extra_acked_cwnd(), 25);
    // cwnd target = 2·BDP + 25, + 3·2, rounded to even; cwnd climbs to it.
    assert_eq!(d.bbr.cwnd(), (2 * 125 + 25 + 6u64).div_ceil(2) * 2 * MSS);

    // The allowance is capped at 100 ms of bw (125 packets at 10 Mbit/s,
    // `bbr_extra_acked_max_us`), even for a 200-packet burst.
    burst(&mut d, SimDuration::from_millis(300), 200);
    assert_eq!(d.bbr.extra_acked_cwnd(), 125);
}

#[test]
fn an_aggregation_burst_is_forgotten_after_5_to_10_rounds() {
    // Linux keeps extra_acked in two buckets of `bbr_extra_acked_win_rtts` = 5
    // rounds and reports the max of both: a burst counts for 5–10 rounds.
    let mut d = in_probe_bw(cfg());
    d.round(20, mbps(10), 125);
    burst(&mut d, SimDuration::from_millis(20), 25);
    assert_eq!(d.bbr.extra_acked_cwnd(), 25);
    // Slow ACKs (20 per 100 ms, well below bw): every epoch ends within 5 ACKs,
    // the excess of each later ACK is 1.
    for _ in 0..4 {
        d.round(20, mbps(10), 125);
    }
    assert_eq!(d.bbr.extra_acked_cwnd(), 25, "still within 5 rounds");
    for _ in 0..6 {
        d.round(20, mbps(10), 125);
    }
    assert_eq!(d.bbr.extra_acked_cwnd(), 1, "gone after 10 rounds");
}

#[test]
fn no_aggregation_allowance_before_the_pipe_is_full() {
    // `bbr_ack_aggregation_cwnd` returns 0 until STARTUP has filled the pipe.
    let mut d = Driver::new(cfg());
    d.round(10, mbps(10), 10);
    burst(&mut d, SimDuration::from_millis(50), 8);
    assert_eq!(d.bbr.mode(), Mode::Startup);
    assert_eq!(d.bbr.extra_acked_cwnd(), 0);
}

// ---------------------------------------------------------------- PROBE_BW details

#[test]
fn the_probe_phase_ends_at_min_rtt_on_a_loss_even_below_its_inflight_target() {
    // Linux `bbr_is_next_cycle_phase`, gain > 1: is_full_length && (rs->losses ||
    // inflight >= bbr_inflight(bw, 1.25)).
    let mut d = in_probe_bw(BbrConfig { cycle_start: Some(0), ..cfg() });
    assert_eq!(d.bbr.cycle_index(), 0);
    // Flight 130 < 1.25·125 + budget: the phase outlasts min_rtt without loss.
    d.round(10, mbps(10), 130);
    d.round(10, mbps(10), 130);
    assert_eq!(d.bbr.cycle_index(), 0, "no loss, flight below target: keep probing");
    // One ACK reporting a loss ends it.
    let start = d.delivered;
    d.now += SimDuration::from_millis(1);
    d.ack(start, mbps(10), 130 * MSS, 128 * MSS);
    assert_eq!(d.bbr.cycle_index(), 1);
    assert_eq!(d.bbr.pacing_gain(), 0.75);
}

#[test]
fn a_loss_before_min_rtt_does_not_end_the_probe_phase() {
    let mut d = in_probe_bw(BbrConfig { cycle_start: Some(0), ..cfg() });
    let start = d.delivered;
    d.now += SimDuration::from_millis(10);
    d.ack(start, mbps(10), 130 * MSS, 128 * MSS);
    assert_eq!(d.bbr.cycle_index(), 0);
}

#[test]
fn probe_bw_is_entered_at_a_random_phase_never_the_drain_phase() {
    // Linux `bbr_reset_probe_bw_mode`: phase uniform over {0, 2, 3, ..., 7}.
    let mut phases = std::collections::BTreeSet::new();
    for k in 0..64u64 {
        let mut d = Driver::new(BbrConfig::default());
        d.now += SimDuration::from_micros(137 * k);
        for _ in 0..4 {
            d.round(10, mbps(10), 10);
        }
        assert_eq!(d.bbr.mode(), Mode::ProbeBw);
        phases.insert(d.bbr.cycle_index());
    }
    assert!(!phases.contains(&1), "entered the 0.75 phase: {phases:?}");
    assert!(phases.len() >= 6, "phases seen {phases:?}");
    // The draw is a function of the controller's inputs: same inputs, same phase.
    let run = || {
        let mut d = Driver::new(BbrConfig::default());
        for _ in 0..4 {
            d.round(10, mbps(10), 10);
        }
        d.bbr.cycle_index()
    };
    assert_eq!(run(), run());
}

#[test]
fn an_idle_restart_paces_at_bw_instead_of_probing() {
    // Linux `bbr_cwnd_event(CA_EVENT_TX_START)` when app-limited: in PROBE_BW,
    // `bbr_set_pacing_rate(bw, BBR_UNIT)`.
    let mut d = in_probe_bw(BbrConfig { cycle_start: Some(0), ..cfg() });
    assert_eq!(d.bbr.pacing_gain(), 1.25);
    let probing = 10e6 * 1.25 * 0.99;
    assert!((d.bbr.payload_pacing_rate().as_bps() as f64 - probing).abs() <= 2.0);
    // Not application-limited (e.g. an RTO restart): no event, even when the
    // last ACK found cwnd not limiting (BBR asks `tp->app_limited`, not
    // `tcp_is_cwnd_limited`).
    d.cwnd_not_limiting = true;
    d.ack(d.delivered, mbps(10), MSS, 0);
    d.bbr.on_packet_sent(d.now, MSS, MSS);
    assert!((d.bbr.payload_pacing_rate().as_bps() as f64 - probing).abs() <= 2.0);
    d.cwnd_not_limiting = false;
    // The application ran dry, everything was ACKed, and now it sends again.
    d.app_limited = true;
    let start = d.delivered;
    d.now += SimDuration::from_millis(1);
    d.ack(start, mbps(10), MSS, 0);
    d.now += SimDuration::from_secs(1);
    d.bbr.on_packet_sent(d.now, MSS, MSS);
    assert!((d.bbr.payload_pacing_rate().as_bps() as f64 - 10e6 * 0.99).abs() <= 2.0);
}

#[test]
fn an_equal_rtt_sample_refreshes_the_min_rtt_clock() {
    // Linux `bbr_update_min_rtt`: `rs->rtt_us <= bbr->min_rtt_us` restarts the
    // 10 s window, so a flow that keeps seeing its minimum never probes.
    let mut d = in_probe_bw(cfg());
    for _ in 0..120 {
        d.round(10, mbps(10), 125);
    }
    assert_ne!(d.bbr.mode(), Mode::ProbeRtt, "12 s of RTT samples equal to min_rtt");
    // One millisecond above it, the 10 s window runs out.
    d.rtt = SimDuration::from_millis(101);
    for _ in 0..99 {
        d.round(10, mbps(10), 125);
    }
    assert_ne!(d.bbr.mode(), Mode::ProbeRtt, "9.9 s after the last minimum");
    d.round(20, mbps(10), 125);
    // Expired: the current sample replaces the estimate and PROBE_RTT begins.
    assert_eq!(d.bbr.mode(), Mode::ProbeRtt);
    assert_eq!(d.bbr.min_rtt(), Some(SimDuration::from_millis(101)));
}

// ---------------------------------------------------------------- long-term bw

/// In PROBE_BW at 10 Mbit/s, then `rounds` rounds delivering `n` packets per
/// 100 ms with every `loss_every`-th ACK reporting a loss.
fn policed(d: &mut Driver, rounds: u64, n: u64, loss_every: u64) {
    for _ in 0..rounds {
        d.lossy_round(n, Bandwidth::from_bps(n * MSS * 8 * 10), 125, loss_every);
    }
}

#[test]
fn two_lossy_intervals_at_a_consistent_rate_switch_to_the_policed_rate() {
    // Linux `bbr_lt_bw_sampling`: sampling starts at the first loss; an interval
    // ends at a loss after ≥ 4 rounds if lost/delivered ≥ 50/256; its rate is
    // delivered / elapsed (ms). Two such intervals within 1/8 of each other:
    // lt_bw = their mean, used with pacing gain 1.
    let mut d = in_probe_bw(BbrConfig { cycle_start: Some(0), ..cfg() });
    // 50 packets per 100 ms = 4 Mbit/s, every ACK with one loss (ratio 1).
    // Interval 1 starts at the first ACK of round 1 and ends at the first ACK of
    // round 4: 150 packets in 300 ms = 4 Mbit/s. Interval 2 ends at the first
    // ACK of round 8: 200 packets in 400 ms = 4 Mbit/s.
    policed(&mut d, 7, 50, 1);
    assert!(!d.bbr.lt_bw_in_use(), "one interval is not enough");
    let start = d.delivered;
    d.now += SimDuration::from_millis(2);
    d.ack(start, mbps(4), 125 * MSS, 123 * MSS);
    assert!(d.bbr.lt_bw_in_use());
    assert_eq!(d.bbr.bw(), Bandwidth::from_mbps(4));
    assert_eq!(d.bbr.pacing_gain(), 1.0, "no gain cycling while policed");
    assert!((d.bbr.payload_pacing_rate().as_bps() as f64 - 4e6 * 0.99).abs() <= 2.0);
    // Used for 48 rounds (`bbr_lt_bw_max_rtts`), then forgotten.
    for _ in 0..47 {
        d.round(50, mbps(4), 125);
    }
    assert!(d.bbr.lt_bw_in_use(), "47 rounds later");
    d.round(50, mbps(4), 125);
    assert!(!d.bbr.lt_bw_in_use(), "48 rounds later");
    assert_eq!(d.bbr.mode(), Mode::ProbeBw);
}

#[test]
fn lossy_intervals_at_different_rates_are_not_a_policer() {
    // Interval 1: 4 Mbit/s (150 packets / 300 ms). Interval 2 at 40 packets per
    // round: 49 + 3·40 + 1 = 170 packets / 400 ms = 3.4 Mbit/s. The difference,
    // 0.6 Mbit/s, exceeds 4 Mbit/s / 8 and 4 kbit/s.
    let mut d = in_probe_bw(cfg());
    policed(&mut d, 4, 50, 1);
    policed(&mut d, 4, 40, 1);
    assert!(!d.bbr.lt_bw_in_use());
}

#[test]
fn loss_below_50_of_256_never_looks_like_a_policer() {
    // One loss in 6 ACKs: 1/6 = 0.167 < 50/256 = 0.195.
    let mut d = in_probe_bw(cfg());
    policed(&mut d, 30, 50, 6);
    assert!(!d.bbr.lt_bw_in_use());
    assert_eq!(d.bbr.bw(), d.bbr.btl_bw());
}

#[test]
fn an_undo_forgets_the_policed_rate() {
    // Linux `bbr_undo_cwnd` → `bbr_reset_lt_bw_sampling`.
    let mut d = in_probe_bw(cfg());
    policed(&mut d, 8, 50, 1);
    assert!(d.bbr.lt_bw_in_use());
    d.bbr.on_spurious_loss(d.now);
    assert!(!d.bbr.lt_bw_in_use());
}

// ---------------------------------------------------------------- competition

#[test]
fn bbr_takes_most_of_a_1_bdp_buffer_from_cubic() {
    // Published BBR v1 behaviour (Hock et al. 2017; Ware et al., IMC 2019): with
    // a buffer of ≤ 1–2 BDP, BBR's in-flight cap (2 · its bw estimate · min_rtt)
    // leaves a loss-based flow little: BBR keeps most of the link. Linux 6.18 on
    // fairlab's live path gave BBR 84 and CUBIC 8.5 Mbit/s at 100 Mbit/s
    // (docs/validation/live.md). Here: 10 Mbit/s, 40 ms, 1 BDP (50 packets).
    let rate = Bandwidth::from_mbps(10);
    let rtt = SimDuration::from_millis(40);
    let mut p = Path::new(rate, 50);
    let c = p.add(crate::cc::build("cubic", &Params::new(), &init()).unwrap(), rtt, SimTime::ZERO);
    let b = p.add(path_bbr(), rtt, SimTime::from_millis(3));
    p.run_until(SimTime::from_secs(60));
    let (gc, gb) = (p.goodput_bps(c), p.goodput_bps(b));
    eprintln!("1 BDP: bbr {:.2}, cubic {:.2} Mbit/s", gb / 1e6, gc / 1e6);
    // "Most of the link": at least 60 %. This one deterministic run gave 6.90/3.00
    // before CUBIC kept Linux's jiffy clock and 6.51/3.40 after; the whole simulator
    // gives 6.4/3.1 over five seeds with either, so a 2x line sat on the noise.
    assert!(gb > 1.5 * gc, "bbr {:.2} vs cubic {:.2} Mbit/s", gb / 1e6, gc / 1e6);
    assert!(gb + gc > 0.9 * rate.as_bps() as f64);
}

// ---------------------------------------------------------------- params

#[test]
fn params_are_validated_with_the_allowed_values_named() {
    let e = Bbr::build(&params(r#"{"cycle_start": 1}"#), &init()).unwrap_err();
    assert!(matches!(e, CcError::BadParam { param: "cycle_start", .. }), "{e}");
    assert!(e.to_string().contains("0 or 2..=7"), "{e}");
    let e = Bbr::build(&params(r#"{"cycle_start": 8}"#), &init()).unwrap_err();
    assert!(matches!(e, CcError::BadParam { param: "cycle_start", .. }));
    let e = Bbr::build(&params(r#"{"high_gian": 3}"#), &init()).unwrap_err();
    assert!(e.to_string().contains("high_gian"), "{e}");
    let e = Bbr::build(&params(r#"{"cwnd_gain": 0.5}"#), &init()).unwrap_err();
    assert!(matches!(e, CcError::BadParam { param: "cwnd_gain", .. }));
    let ok = Bbr::new(BbrConfig::from_params(&params(r#"{"cycle_start": 0, "probe_rtt_ms": 0}"#)).unwrap(), &init());
    assert_eq!(ok.cfg.cycle_start, Some(0));
}

#[test]
fn metrics_name_the_phase() {
    let d = Driver::new(cfg());
    let m = d.bbr.metrics();
    assert_eq!(m.phase, "startup");
    assert_eq!(m.ssthresh, u64::MAX);
    assert!(m.pacing_rate.is_some());
    assert_eq!(d.bbr.name(), "bbr");
}
