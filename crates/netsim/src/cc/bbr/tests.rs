//! BBR v1 tests, through the trait, against the rules of the paper/draft:
//! closed forms and stated thresholds, never numbers read back from this code.

use super::config::PACING_GAIN_CYCLE;
use super::*;
use crate::cc::testpath::{first_time_in, Path, PATH_MSS};
use crate::cc::{build, CcInit, RateSample};
use netunits::{Bandwidth, SimDuration, SimTime};

const MSS: u64 = 1000;

fn init() -> CcInit {
    CcInit { mss: MSS, initial_cwnd_segments: 10 }
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
}

impl Driver {
    fn new(cfg: BbrConfig) -> Self {
        Driver { bbr: Bbr::new(cfg, &init()), now: SimTime::from_secs(1), rtt: SimDuration::from_millis(100), delivered: 0, in_recovery: false }
    }

    fn ack(&mut self, prior_delivered: u64, rate: Bandwidth, prior_in_flight: u64, in_flight: u64) {
        self.delivered += MSS;
        let a = AckSample {
            now: self.now,
            acked_bytes: MSS,
            acked_segments: 1,
            rtt: Some(self.rtt),
            srtt: self.rtt,
            min_rtt: self.rtt,
            prior_in_flight,
            in_flight,
            app_limited: false,
            in_recovery: self.in_recovery,
            rate: Some(RateSample {
                delivered: MSS,
                interval: self.rtt,
                delivery_rate: rate,
                is_app_limited: false,
                prior_delivered,
                total_delivered: self.delivered,
            }),
        };
        self.bbr.on_ack(&a);
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
    let mut d = Driver::new(BbrConfig::default());
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
    let mut d = Driver::new(BbrConfig::default());
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
    let mut d = Driver::new(BbrConfig::default());
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
    let f = p.add(build("bbr", &Params::new(), &init()).unwrap(), rtt, SimTime::ZERO);
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
    let f = p.add(build("bbr", &Params::new(), &init()).unwrap(), rtt, SimTime::ZERO);
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
    let mut d = in_probe_bw(BbrConfig::default());
    assert_eq!(d.bbr.cycle_index(), 2, "default cycle_start");
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
    let mut d = in_probe_bw(BbrConfig::default());
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
    let mut d = in_probe_bw(BbrConfig::default());
    // Cruise phase: cwnd converges to 2·BDP + 3·2 packets, rounded up to even.
    for _ in 0..2 {
        d.round(200, mbps(10), 125);
    }
    let bdp = 125u64;
    let want = (2 * bdp + 6).div_ceil(2) * 2;
    assert_eq!(d.bbr.cwnd(), want * MSS);
}

#[test]
fn max_filter_forgets_a_peak_after_10_rounds() {
    let mut d = in_probe_bw(BbrConfig::default());
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
    let mut d = in_probe_bw(BbrConfig::default());
    let start = d.delivered;
    let limited = |d: &mut Driver, rate: Bandwidth| {
        d.delivered += MSS;
        let a = AckSample {
            now: d.now,
            acked_bytes: MSS,
            acked_segments: 1,
            rtt: Some(d.rtt),
            srtt: d.rtt,
            min_rtt: d.rtt,
            prior_in_flight: 10 * MSS,
            in_flight: 9 * MSS,
            app_limited: true,
            in_recovery: false,
            rate: Some(RateSample { delivered: MSS, interval: d.rtt, delivery_rate: rate, is_app_limited: true, prior_delivered: start, total_delivered: d.delivered }),
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
    let f = p.add(build("bbr", &Params::new(), &init()).unwrap(), rtt, SimTime::ZERO);
    p.run_until(SimTime::from_secs(12));
    let fl = &p.flows[f];
    // min_rtt = base RTT + one packet's transmission, first seen on the first
    // ACK; no later sample can be lower, so it expires 10 s later.
    let first_ack = fl.trace[0].0;
    let enter = first_time_in(fl, "probe_rtt").expect("PROBE_RTT within 12 s");
    let expiry = first_ack + SimDuration::from_secs(10);
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
    let mut d = in_probe_bw(BbrConfig::default());
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
    let mut d = in_probe_bw(BbrConfig::default());
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
    let mut a = in_probe_bw(BbrConfig::default());
    let mut b = in_probe_bw(BbrConfig::default());
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
    let mut d = in_probe_bw(BbrConfig::default());
    d.round(200, mbps(10), 125);
    let before = d.bbr.cwnd();
    d.bbr.on_rto(d.now, before);
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
    let f = p.add(build("bbr", &Params::new(), &init()).unwrap(), rtt, SimTime::ZERO);
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
    assert_eq!(ok.cfg.cycle_start, 0);
}

#[test]
fn metrics_name_the_phase() {
    let d = Driver::new(BbrConfig::default());
    let m = d.bbr.metrics();
    assert_eq!(m.phase, "startup");
    assert_eq!(m.ssthresh, u64::MAX);
    assert!(m.pacing_rate.is_some());
    assert_eq!(d.bbr.name(), "bbr");
}
