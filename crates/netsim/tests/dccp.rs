//! DCCP/CCID2 (RFC 4340/4341) flows against independent truths.

mod common;
use common::*;

#[test]
fn one_ccid2_flow_fills_the_link_at_low_rtt() {
    // Seed 001: every protocol, DCCP/CCID2 included, reached ~95 Mb/s of the
    // 100 Mb/s testbed at the lower RTTs.
    let rate = 100_000_000;
    let mut s = dumbbell(rate, bdp_packets(rate, 25, 1.0), 60);
    s.flows.push(flow("ccid2", 25, 0));
    let out = go(&s);
    let g = mean_goodput(&out, 0, 10, 60);
    assert!(g >= 0.90 * payload_capacity(rate, 1448), "goodput {:.1} Mb/s", g / 1e6);
}

#[test]
fn ccid2_never_retransmits_and_delivers_each_datagram_once() {
    let mut s = dumbbell(20_000_000, 30, 60);
    s.bottleneck.loss_rate = 0.01;
    s.flows.push(flow("ccid2", 50, 0));
    let out = go(&s);
    let f = &out.totals.flows[0];
    assert_eq!(f.retransmits, 0);
    // Unreliable: what arrives is what the application gets, no more, no less.
    assert_eq!(f.app_bytes, f.bytes_delivered);
    assert_eq!(f.bytes_sent, f.bytes_delivered + f.bytes_dropped + f.bytes_in_flight);
    // Each datagram is sent once, so the random-loss fraction of datagrams is ≈ p
    // (binomial: 1 % ± a few tenths of a percent over tens of thousands).
    let lost = out.totals.drops_random as f64 / f.packets_sent as f64;
    assert!((lost - 0.01).abs() < 0.003, "random loss fraction {lost}");
}

/// Seed 001 set-up at 100 Mb/s, 50 ms, 1-BDP buffer, 300 s: flow `a` from 0 s,
/// flow `b` from 30 s; mean J(t) over 60–300 s, averaged over seeds 1–6 as the
/// paper averaged its runs (one seed alone lands on one of two outcomes: CCID2 vs
/// NewReno gave 0.844 or 0.871 by seed, before Reno's ssthresh followed Linux
/// 0.873 or 0.793).
fn seed001_pair_jain(a: &str, b: &str) -> f64 {
    let rate = 100_000_000;
    let seeds = 1..=6u64;
    let n = seeds.clone().count() as f64;
    seeds
        .map(|seed| {
            let mut s = dumbbell(rate, bdp_packets(rate, 50, 1.0), 300);
            s.seed = seed;
            s.start_jitter_ns = 10 * MS;
            s.flows.push(flow(a, 50, 0));
            s.flows.push(flow(b, 50, 30));
            // The paper's hosts ran Linux 2.6.22, whose receivers did not compress
            // SACKs (Linux 4.19 added it); with it J falls to 0.84 (CCID2 vs NewReno).
            // Their CCID2 was 2.6.22's too (the `bhatti2008-dccp` preset's choice):
            // today's (Ack Ratio from the window, no receiver timer) takes far less
            // against NewReno, on the kernel as in the simulator (J 0.71 here).
            for f in &mut s.flows {
                f.sack_compress = false;
                if f.cca == "ccid2" {
                    f.params.insert("kernel".into(), "2.6.22".into());
                }
            }
            mean_jain(&go(&s), 2, 60, 300)
        })
        .sum::<f64>()
        / n
}

#[test]
fn ccid2_and_newreno_share_fairly_at_equal_rtt() {
    // Seed 001 Table III/IV: DCCP/CCID2 vs NewReno keeps J ≈ 0.86–0.90 at all RTTs.
    let j = seed001_pair_jain("ccid2", "reno");
    assert!(j >= 0.85, "mean J(t) = {j:.3}");
}

#[test]
fn two_ccid2_flows_share_fairly() {
    let j = seed001_pair_jain("ccid2", "ccid2");
    assert!(j >= 0.9, "mean J(t) = {j:.3}");
}
