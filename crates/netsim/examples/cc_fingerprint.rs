//! Behaviour fingerprint of every congestion controller, for refactors that must not
//! change behaviour: run it before and after and compare the output (`cmp`).
//!
//! `cargo run --profile profiling -p netsim --example cc_fingerprint [CCA] > fp.txt`
//!
//! For every registry entry (and a few parameter variants) it prints a hash of four
//! seeded random sequences of every trait hook, driven directly (so rare paths such
//! as spurious-loss undo are covered), and of five 60-s simulations (2–4 flows,
//! RTT 20–200 ms, droptail and RED, SACK on and off, ECN, random loss, host jitter,
//! a byte-limited, a window-limited and a late flow, 1 Gbit/s without delayed ACKs).
//! The hashes mean nothing alone; only equality between two builds does.
use netsim::cc::{self, AckSample, CcInit, CongestionEvent, CongestionSignal, Params, RateSample};
use netsim::{run, Bandwidth, ScenarioSpec, SimDuration, SimTime};

fn fnv(s: &str) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in s.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}

struct F<'a> {
    cca: &'a str,
    params: &'a str,
    rtt_ms: u64,
    ecn: bool,
    sack: bool,
    bytes: &'a str,
    rwnd: &'a str,
    start_ms: u64,
    delack: bool,
    stop: &'a str,
}

fn flow(f: &F) -> String {
    format!(
        r#"{{"cca": "{}", "params": {}, "rtt_ns": {}, "start_ns": {}, "stop_ns": {}, "bytes": {},
        "rwnd_bytes": {}, "ecn": {}, "mss": 1448, "sack": {}, "delayed_ack": {},
        "delack_timeout_ns": 40000000, "initial_cwnd": 10}}"#,
        f.cca,
        f.params,
        f.rtt_ms * 1_000_000,
        f.start_ms * 1_000_000,
        f.stop,
        f.bytes,
        f.rwnd,
        f.ecn,
        f.sack,
        f.delack
    )
}

fn scen(
    rate: u64,
    buf: u64,
    qdisc: &str,
    loss: f64,
    jitter: u64,
    dur_s: u64,
    flows: Vec<String>,
) -> ScenarioSpec {
    let json = format!(
        r#"{{"name": "fp", "seed": 11, "duration_ns": {}, "interval_ns": 100000000,
        "bottleneck": {{"rate_bps": {rate}, "buffer": {{"packets": {buf}}}, "qdisc": "{qdisc}", "params": {{}}, "loss_rate": {loss}}},
        "access_rate_bps": {}, "start_jitter_ns": 10000000, "host_jitter_ns": {jitter}, "flows": [{}]}}"#,
        dur_s * 1_000_000_000,
        rate * 10,
        flows.join(",")
    );
    ScenarioSpec::from_json(&json).expect("valid")
}

fn scenarios(cca: &str, p: &str) -> Vec<(&'static str, ScenarioSpec)> {
    let d = |rtt_ms| F {
        cca,
        params: p,
        rtt_ms,
        ecn: false,
        sack: true,
        bytes: "null",
        rwnd: "null",
        start_ms: 0,
        delack: true,
        stop: "null",
    };
    vec![
        (
            "A-2f-20ms-droptail-sack",
            scen(
                20_000_000,
                50,
                "droptail",
                0.0,
                0,
                60,
                vec![flow(&d(20)), flow(&d(20))],
            ),
        ),
        (
            "B-3f-100/200ms-red-nosack-ecn",
            scen(
                100_000_000,
                800,
                "red",
                0.0,
                0,
                60,
                vec![
                    flow(&F {
                        ecn: true,
                        sack: false,
                        ..d(100)
                    }),
                    flow(&F {
                        sack: false,
                        ..d(100)
                    }),
                    flow(&F {
                        sack: false,
                        ..d(200)
                    }),
                ],
            ),
        ),
        (
            "C-4f-mixed-loss0.001-jitter",
            scen(
                200_000_000,
                1000,
                "droptail",
                0.001,
                300_000,
                60,
                vec![
                    flow(&d(20)),
                    flow(&F {
                        bytes: "5000000",
                        ..d(100)
                    }),
                    flow(&F {
                        rwnd: "300000",
                        ..d(200)
                    }),
                    flow(&F {
                        start_ms: 5000,
                        stop: "40000000000",
                        ..d(100)
                    }),
                ],
            ),
        ),
        (
            "D-2f-200ms-1G-nodelack",
            scen(
                1_000_000_000,
                3000,
                "droptail",
                0.0,
                0,
                60,
                vec![
                    flow(&F {
                        delack: false,
                        ..d(200)
                    }),
                    flow(&F {
                        delack: false,
                        ..d(200)
                    }),
                ],
            ),
        ),
        (
            "E-2f-vs-reno-100ms-red-loss",
            scen(
                50_000_000,
                200,
                "red",
                0.001,
                100_000,
                60,
                vec![
                    flow(&F {
                        ecn: true,
                        ..d(100)
                    }),
                    flow(&F {
                        cca: "reno",
                        params: "{}",
                        ..d(100)
                    }),
                ],
            ),
        ),
    ]
}

/// Direct trait driver: a seeded pseudo-random sequence of every hook.
fn drive(cca: &str, p: &str, seed: u64) -> u64 {
    let params: Params = serde_json::from_str(p).unwrap();
    let mut c = cc::build(
        cca,
        &params,
        &CcInit {
            mss: 1448,
            initial_cwnd_segments: 10,
            connection_random: 0,
            sent_before_attach: 0,
        },
    )
    .unwrap();
    let mut x = seed.wrapping_mul(0x9E3779B97F4A7C15) | 1;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut now = 1_000_000u64;
    let mut in_rec = false;
    let mut delivered = 0u64;
    let mut log = String::new();
    for i in 0..20000 {
        now += 1 + rnd() % 3_000_000;
        let t = SimTime::from_nanos(now);
        let cw = c.cwnd();
        let r = rnd() % 1000;
        let base = 20_000_000 + (seed % 4) * 40_000_000;
        let rtt = base + rnd() % (base / 2 + 1);
        if r < 900 {
            let segs = 1 + (rnd() % 3) as u32;
            let acked = segs as u64 * 1448;
            let prior = cw.max(acked)
                - if rnd() % 5 == 0 {
                    rnd() % (cw / 2 + 1)
                } else {
                    0
                };
            delivered += acked;
            let ack = AckSample {
                now: t,
                acked_bytes: acked,
                acked_segments: segs,
                cum_acked_segments: segs,
                rtt: if rnd() % 7 == 0 {
                    None
                } else {
                    Some(SimDuration::from_nanos(rtt))
                },
                srtt: SimDuration::from_nanos(rtt),
                min_rtt: SimDuration::from_nanos(base),
                prior_in_flight: prior,
                in_flight: prior.saturating_sub(acked),
                app_limited: rnd() % 13 == 0,
                conn_app_limited: false,
                in_recovery: in_rec,
                rate: Some(RateSample {
                    delivered: acked * 10,
                    interval: SimDuration::from_nanos(rtt),
                    delivery_rate: Bandwidth::from_bps(
                        ((acked * 10 * 8) as u128 * 1_000_000_000 / rtt as u128) as u64,
                    ),
                    is_app_limited: rnd() % 11 == 0,
                    prior_delivered: delivered.saturating_sub(acked * 10),
                    total_delivered: delivered,
                }),
                // The receiver stamped the ACK half the base RTT ago and echoes the
                // send time of the segment the sample times (no draws: the other
                // controllers' sequences stay as they were).
                tsval_ms: (now.saturating_sub(base / 2) / 1_000_000) as u32,
                tsecr_ms: (now.saturating_sub(rtt) / 1_000_000) as u32,
            };
            c.on_ack(&ack);
            if rnd() % 4 == 0 {
                c.on_packet_sent(t, 1448, prior);
            }
        } else if r < 940 {
            if !in_rec {
                let sig = if rnd() % 3 == 0 {
                    CongestionSignal::Ecn
                } else {
                    CongestionSignal::Loss
                };
                c.on_congestion_event(&CongestionEvent {
                    now: t,
                    signal: sig,
                    in_flight: cw,
                    srtt: SimDuration::from_nanos(rtt),
                    min_rtt: SimDuration::from_nanos(base),
                });
                in_rec = true;
            }
        } else if r < 970 {
            if in_rec {
                c.on_recovery_exit(t);
                in_rec = false;
            }
        } else if r < 980 {
            c.on_rto(t, cw, netsim::cc::RtoEpisode::New);
            in_rec = false;
        } else if r < 993 {
            c.on_spurious_loss(t);
        } else {
            now += 2_000_000_000;
            c.on_idle_restart(SimTime::from_nanos(now));
        }
        if i % 7 == 0 || r >= 900 {
            log.push_str(&format!("{i}:{:?}|", c.metrics()));
        }
    }
    fnv(&log)
}

fn main() {
    let only: Option<String> = std::env::args().nth(1);
    let mut variants: Vec<(String, String)> = cc::REGISTRY
        .iter()
        .map(|e| (e.name.to_string(), "{}".to_string()))
        .collect();
    for (n, p) in [
        ("cubic", r#"{"kernel": "2.6.22"}"#),
        ("bic", r#"{"kernel": "2.6.22"}"#),
        ("scalable", r#"{"kernel": "2.6.22"}"#),
        (
            "cubic",
            r#"{"hystart": false, "fast_convergence": false, "tcp_friendliness": false}"#,
        ),
        ("bic", r#"{"fast_convergence": false}"#),
        (
            "htcp",
            r#"{"rtt_scaling": false, "bandwidth_switch": false}"#,
        ),
    ] {
        if cc::REGISTRY.iter().any(|e| e.name == n) {
            variants.push((n.to_string(), p.to_string()));
        }
    }
    for (n, p) in &variants {
        if let Some(o) = &only {
            if o != n {
                continue;
            }
        }
        for seed in 0..4 {
            println!("{n} {p} drive{seed} {:016x}", drive(n, p, seed));
        }
        for (label, s) in scenarios(n, p) {
            let out = run(&s, &mut |_| true).expect("run");
            let mut o2 = out.clone();
            o2.totals.events = 0;
            println!(
                "{n} {p} {label} {:016x} noev={:016x}",
                fnv(&format!("{out:?}")),
                fnv(&format!("{o2:?}"))
            );
        }
    }
}
