//! Helpers shared by the scenario tests: spec builders and independent metrics
//! (Jain's index is computed here from its definition, seed 001 Eq. (1), never
//! taken from the engine).
#![allow(dead_code)]

use netsim::{run, BottleneckSpec, BufferSpec, FlowSpec, RunOutput, ScenarioSpec};

pub const MS: u64 = 1_000_000;
pub const S: u64 = 1_000_000_000;

/// A dumbbell with no flows yet, DropTail, no jitter.
pub fn dumbbell(rate_bps: u64, buffer_pkts: u64, duration_s: u64) -> ScenarioSpec {
    ScenarioSpec {
        name: "test".into(),
        seed: 1,
        duration_ns: duration_s * S,
        interval_ns: S,
        bottleneck: BottleneckSpec {
            rate_bps,
            buffer: BufferSpec::Packets(buffer_pkts),
            qdisc: "droptail".into(),
            params: Default::default(),
            reference_rtt_ns: None,
            loss_rate: 0.0,
        },
        access_rate_bps: None,
        start_jitter_ns: 0,
        host_jitter_ns: 0,
        flows: vec![],
    }
}

/// A bulk flow with the defaults of the resolved JSON (MSS 1448, SACK, delayed ACK).
pub fn flow(cca: &str, rtt_ms: u64, start_s: u64) -> FlowSpec {
    FlowSpec {
        cca: cca.into(),
        params: Default::default(),
        rtt_ns: rtt_ms * MS,
        start_ns: start_s * S,
        stop_ns: None,
        bytes: None,
        rwnd_bytes: None,
        rwnd_autotune: false,
        tso_defer: false,
        sack_compress: true,
        ecn: false,
        mss: 1448,
        sack: true,
        delayed_ack: true,
        delack_timeout_ns: 40 * MS,
        initial_cwnd: 10,
        rack: true,
        tlp: true,
        frto: true,
    }
}

/// Buffer of `frac` × BDP in 1500-byte packets.
pub fn bdp_packets(rate_bps: u64, rtt_ms: u64, frac: f64) -> u64 {
    ((rate_bps as f64 / 8.0 * rtt_ms as f64 / 1e3 * frac) / 1500.0).round().max(1.0) as u64
}

pub fn go(spec: &ScenarioSpec) -> RunOutput {
    run(spec, &mut |_| true).expect("scenario runs")
}

/// Goodput samples of `flow` with `lo < t ≤ hi` (seconds).
pub fn goodput(out: &RunOutput, flow: u32, lo_s: u64, hi_s: u64) -> Vec<(u64, f64)> {
    let f = &out.flows;
    (0..f.t_ns.len())
        .filter(|&i| f.flow[i] == flow && f.t_ns[i] > lo_s * S && f.t_ns[i] <= hi_s * S)
        .map(|i| (f.t_ns[i], f.goodput_bps[i]))
        .collect()
}

pub fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len() as f64
}

/// Mean goodput (bit/s) of `flow` over the samples with `lo < t ≤ hi` (seconds).
pub fn mean_goodput(out: &RunOutput, flow: u32, lo_s: u64, hi_s: u64) -> f64 {
    mean(&goodput(out, flow, lo_s, hi_s).iter().map(|x| x.1).collect::<Vec<_>>())
}

/// Jain's fairness index (seed 001 Eq. (1)): (Σx)² / (n Σx²).
pub fn jain(xs: &[f64]) -> f64 {
    let s: f64 = xs.iter().sum();
    let s2: f64 = xs.iter().map(|x| x * x).sum();
    if s2 == 0.0 {
        1.0
    } else {
        s * s / (xs.len() as f64 * s2)
    }
}

/// Mean J(t) over `lo < t ≤ hi` for flows `0..n` (seed 001 Eq. (2)).
pub fn mean_jain(out: &RunOutput, n: u32, lo_s: u64, hi_s: u64) -> f64 {
    let series: Vec<Vec<(u64, f64)>> = (0..n).map(|f| goodput(out, f, lo_s, hi_s)).collect();
    let len = series[0].len();
    assert!(series.iter().all(|s| s.len() == len), "aligned samples");
    let js: Vec<f64> = (0..len)
        .map(|k| {
            let xs: Vec<f64> = series.iter().map(|s| s[k].1).collect();
            jain(&xs)
        })
        .collect();
    mean(&js)
}

/// Largest goodput the link can carry with `mss`-byte payloads in 52-byte-header packets.
pub fn payload_capacity(rate_bps: u64, mss: u64) -> f64 {
    // Payload per Ethernet frame: MSS of MSS + 52 (IP/TCP/timestamps) + 14 (MAC).
    rate_bps as f64 * mss as f64 / (mss + 52 + 14) as f64
}

#[test]
fn jain_of_worked_example_from_seed_003() {
    // seed 003: throughputs 5, 3, 1 give J = 81 / (3 * 35) = 0.771...
    assert!((jain(&[5.0, 3.0, 1.0]) - 0.7714).abs() < 1e-3);
}
