//! TCP behaviour against independent truths: link capacity, Jain's index of
//! identical flows, the Mathis/Padhye loss–throughput relation, RTT unfairness
//! under DropTail, and SACK vs NewReno recovery.

mod common;
use common::*;

/// One `cca` flow alone through a DropTail buffer of `buffer_bdp` × BDP.
fn alone(cca: &str, rate: u64, rtt_ms: u64, buffer_bdp: f64, secs: u64) -> netsim::RunOutput {
    let mut s = dumbbell(rate, bdp_packets(rate, rtt_ms, buffer_bdp), secs);
    s.flows.push(flow(cca, rtt_ms, 0));
    go(&s)
}

#[test]
fn one_reno_flow_fills_a_100mbit_link_with_a_bdp_buffer() {
    let rate = 100_000_000;
    let out = alone("reno", rate, 100, 1.0, 120);
    let util = mean_goodput(&out, 0, 20, 120) / payload_capacity(rate, 1448);
    // With a buffer of one BDP, Reno's halved window still fills the pipe
    // (Appenzeller et al.): the link never idles after slow start.
    assert!(util >= 0.95, "utilisation {util:.3}");
    assert!(util <= 1.0 + 1e-3, "cannot exceed the link: {util:.4}");
    assert_eq!(out.totals.flows[0].rtos, 0, "no timeouts in steady Reno");
}

#[test]
fn two_reno_flows_at_equal_rtt_share_fairly() {
    // Seed 001 set-up: 100 Mb/s, RTT 100 ms split equally, buffer = 100% BDP,
    // 300 s, flow 2 starts at 30 s, J(t) averaged over 60–300 s.
    let rate = 100_000_000;
    let mut s = dumbbell(rate, bdp_packets(rate, 100, 1.0), 300);
    s.start_jitter_ns = 10 * MS;
    s.flows.push(flow("reno", 100, 0));
    s.flows.push(flow("reno", 100, 30));
    let out = go(&s);
    let j = mean_jain(&out, 2, 60, 300);
    assert!(j >= 0.95, "mean J(t) = {j:.3}");
    let total: f64 = (0..2).map(|f| mean_goodput(&out, f, 60, 300)).sum();
    assert!(total / payload_capacity(rate, 1448) > 0.95, "the pair still fills the link");
}

/// Mathis et al. (1997): B = MSS/RTT · sqrt(3/(2p)) for one loss per 1/p packets,
/// with the window growing one MSS per RTT (byte counting makes delayed ACKs not
/// matter, RFC 3465).
fn mathis_bps(mss: f64, rtt_s: f64, p: f64) -> f64 {
    mss * 8.0 / rtt_s * (1.5 / p).sqrt()
}

/// Padhye et al. (1998) full model with b = 1 and timeout T0.
fn padhye_bps(mss: f64, rtt_s: f64, p: f64, t0_s: f64) -> f64 {
    let b = 1.0;
    let denom = rtt_s * (2.0 * b * p / 3.0).sqrt() + t0_s * (3.0 * (3.0 * b * p / 8.0).sqrt()).min(1.0) * p * (1.0 + 32.0 * p * p);
    mss * 8.0 / denom
}

fn random_loss_goodput(p: f64, duration_s: u64) -> (f64, f64, f64) {
    // A fast link with a deep buffer: the random loss, not the queue, limits the flow.
    let rate = 1_000_000_000;
    let mut s = dumbbell(rate, 100_000, duration_s);
    s.bottleneck.loss_rate = p;
    s.seed = 7;
    s.flows.push(flow("reno", 100, 0));
    let out = go(&s);
    assert_eq!(out.totals.drops_by_reason.iter().sum::<u64>(), 0, "no queue drops");
    assert!(out.totals.drops_random > 0);
    let measured = mean_goodput(&out, 0, 60, duration_s);
    // RTO ≈ SRTT + 200 ms floor (Linux-style RTO; see rtt.rs)
    (measured, mathis_bps(1448.0, 0.1, p), padhye_bps(1448.0, 0.1, p, 0.3))
}

fn assert_loss_model(p: f64, duration_s: u64) {
    let (m, mathis, padhye) = random_loss_goodput(p, duration_s);
    let ok = |model: f64| (m / model - 1.0).abs() <= 0.20;
    assert!(
        ok(mathis) || ok(padhye),
        "p = {p}: measured {:.3} Mb/s, Mathis {:.3}, Padhye {:.3}",
        m / 1e6,
        mathis / 1e6,
        padhye / 1e6
    );
}

#[test]
fn random_loss_1e_4_matches_mathis_or_padhye() {
    assert_loss_model(1e-4, 1500);
}

#[test]
fn random_loss_1e_3_matches_mathis_or_padhye() {
    assert_loss_model(1e-3, 1000);
}

#[test]
fn random_loss_1e_2_matches_mathis_or_padhye() {
    assert_loss_model(1e-2, 1000);
}

#[test]
fn receiver_window_caps_throughput_at_rwnd_per_rtt() {
    // Window-limited: at most rwnd bytes per RTT, whatever the link (RFC 793/7323).
    let rate = 1_000_000_000;
    let mut s = dumbbell(rate, 1000, 30);
    let mut f = flow("reno", 50, 0);
    f.rwnd_bytes = Some(64 * 1024);
    s.flows.push(f);
    let out = go(&s);
    let g = mean_goodput(&out, 0, 5, 30);
    let segs = (64 * 1024 / 1448) as f64; // whole segments fit in the window
    let limit = segs * 1448.0 * 8.0 / 0.050;
    assert!(g <= limit * 1.001 && g >= 0.9 * limit, "goodput {:.2} Mb/s vs rwnd/RTT {:.2}", g / 1e6, limit / 1e6);
    assert_eq!(out.totals.drops_by_reason[0], 0, "a window-limited flow never fills the queue");
}

#[test]
fn reno_throughput_ratio_grows_with_rtt_ratio_under_droptail() {
    let rate = 100_000_000;
    let mut ratios = Vec::new();
    for short in [100u64, 50, 25] {
        // Mean over three seeds: one run's ratio moves by ±30 % with where the
        // losses fall (2× RTT, five seeds: 2.6–4.4), more than the 2× → 4× step.
        let seeds = 1..=3u64;
        let ratio = seeds
            .clone()
            .map(|seed| {
                let mut s = dumbbell(rate, bdp_packets(rate, 100, 1.0), 200);
                s.seed = seed;
                s.start_jitter_ns = 10 * MS;
                // The default users run: one frame time of host jitter (120 µs at
                // 100 Mbit/s), which breaks DropTail's phase lock (Floyd & Jacobson 1992).
                s.host_jitter_ns = 120_000;
                s.flows.push(flow("reno", short, 0));
                s.flows.push(flow("reno", 100, 0));
                let out = go(&s);
                mean_goodput(&out, 0, 40, 200) / mean_goodput(&out, 1, 40, 200)
            })
            .sum::<f64>()
            / seeds.count() as f64;
        ratios.push(ratio);
        eprintln!("rtt {short} vs 100: mean ratio {ratio:.3}");
    }
    // Equal RTTs share about equally; a shorter RTT wins more (AIMD's RTT bias,
    // throughput ∝ 1/RTT^a with 1 ≤ a ≤ 2 under synchronised DropTail loss).
    assert!((ratios[0] - 1.0).abs() < 0.5, "equal RTT ratio {:.2}", ratios[0]);
    assert!(ratios[1] > ratios[0] && ratios[2] > ratios[1], "ratios {ratios:?}");
    assert!(ratios[2] > 1.5, "4× RTT ratio gives {:.2}", ratios[2]);
}

/// A slow-start overshoot into a small buffer loses many packets of one window.
fn overshoot(sack: bool) -> netsim::RunOutput {
    let rate = 100_000_000;
    let mut s = dumbbell(rate, 60, 20);
    s.interval_ns = 10 * MS;
    let mut f = flow("reno", 100, 0);
    f.sack = sack;
    s.flows.push(f);
    go(&s)
}

fn first_recovery_duration_ns(out: &netsim::RunOutput) -> u64 {
    let f = &out.flows;
    let idx: Vec<usize> = (0..f.t_ns.len()).filter(|&i| f.state[i] == netsim::FlowState::Recovery as u8).collect();
    assert!(!idx.is_empty(), "the overshoot must cause a recovery");
    // contiguous run of recovery samples from the first one
    let mut n = 1;
    while n < idx.len() && idx[n] == idx[0] + n {
        n += 1;
    }
    n as u64 * 10 * MS
}

#[test]
fn sack_recovers_a_multi_loss_window_in_about_one_rtt_where_newreno_takes_one_rtt_per_loss() {
    let sack = overshoot(true);
    let reno = overshoot(false);
    let drops_sack = sack.totals.drops_by_reason[0];
    let drops_reno = reno.totals.drops_by_reason[0];
    assert!(drops_sack >= 10 && drops_reno >= 10, "many losses in one window: {drops_sack}, {drops_reno}");
    assert_eq!(sack.totals.flows[0].rtos, 0, "SACK needs no timeout");
    // One window reduction per loss episode, however many packets it lost: halving
    // once per loss (≥ 10 losses) would leave Reno at its 2-segment floor.
    for out in [&sack, &reno] {
        let f = &out.flows;
        let after = (0..f.t_ns.len()).find(|&i| f.state[i] == netsim::FlowState::Recovery as u8).unwrap();
        let cwnd_pkts = f.cwnd_bytes[after] / 1448.0;
        assert!(cwnd_pkts > 20.0, "cwnd in recovery {cwnd_pkts:.0} packets");
    }
    let t_sack = first_recovery_duration_ns(&sack);
    let t_reno = first_recovery_duration_ns(&reno);
    // RFC 6675 repairs all holes of the window within ~1-2 RTTs (plus queueing);
    // RFC 6582 repairs one hole per RTT (a partial ACK per retransmission).
    assert!(t_sack <= 400 * MS, "SACK recovery took {} ms", t_sack / MS);
    assert!(t_reno >= 5 * t_sack, "NewReno {} ms vs SACK {} ms", t_reno / MS, t_sack / MS);
}

#[test]
fn paced_bbr_flow_fills_the_link_with_a_shallow_buffer_where_reno_cannot() {
    // BBR steers by the sender's delivery-rate samples (tcp_rate.c semantics) and
    // paces; with samples right it runs the link near capacity even when the buffer
    // is far below one BDP. A loss-based flow cannot: with a buffer of b BDP, Reno's
    // window saws between (1 + b)/2 and 1 + b BDP and the link idles while it is
    // below 1. Sending W per RTT with the RTT stretched to W above 1 gives the
    // utilisation U(b) = [∫_{(1+b)/2}^{1+b} W dW] / [∫_{(1+b)/2}^{1} dW + ∫_1^{1+b} W dW]
    // = 0.818 at b = 0.1 (the classic sawtooth model, Appenzeller et al. 2004 §2).
    let rate = 100_000_000;
    let b = 0.1;
    let cap = payload_capacity(rate, 1448);
    let bbr = mean_goodput(&alone("bbr", rate, 50, b, 40), 0, 10, 40) / cap;
    let reno = mean_goodput(&alone("reno", rate, 50, b, 150), 0, 30, 150) / cap;
    let w_min = (1.0 + b) / 2.0;
    let sent = ((1.0 + b) * (1.0 + b) - w_min * w_min) / 2.0;
    let model = sent / ((1.0 - w_min) + ((1.0 + b) * (1.0 + b) - 1.0) / 2.0);
    println!("buffer {b} BDP: BBR {bbr:.3}, Reno {reno:.3} (sawtooth model {model:.3}) of capacity");
    assert!(bbr >= 0.85, "BBR utilisation {bbr:.3}");
    assert!((reno - model).abs() <= 0.05, "Reno utilisation {reno:.3}, sawtooth model {model:.3}");
    assert!(bbr >= reno + 0.05, "BBR {bbr:.3} should clearly beat Reno {reno:.3} in a shallow buffer");
}

#[test]
fn rack_tlp_repairs_lost_retransmissions_that_dupthresh_leaves_to_the_rto() {
    // A Reno flow on a 10 Mb/s, 50 ms path with 3 % random loss: about 3 % of
    // the retransmissions are lost as well. RFC 6675's DupThresh marking never
    // re-marks a retransmission, so each lost one waits for the RTO (RFC 8985
    // §2.2); RACK marks it lost one RTT after a segment sent later is delivered,
    // and the tail probe covers lost tails. Timeouts remain possible with RACK-TLP
    // (a whole small window lost), but must be far fewer.
    let rate = 10_000_000;
    let run = |rack: bool| {
        (1..=3)
            .map(|seed| {
                let mut s = dumbbell(rate, bdp_packets(rate, 50, 1.0), 60);
                s.seed = seed;
                s.bottleneck.loss_rate = 0.03;
                let mut f = flow("reno", 50, 0);
                f.rack = rack;
                f.tlp = rack;
                s.flows.push(f);
                let out = go(&s);
                (out.totals.flows[0].rtos, out.totals.flows[0].retransmits)
            })
            .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
    };
    let (dupthresh, rack) = (run(false), run(true));
    eprintln!("(RTOs, retransmits): DupThresh {dupthresh:?}, RACK-TLP {rack:?}");
    // Expected lost retransmissions with DupThresh: 3 % of the retransmissions.
    assert!(dupthresh.0 as f64 >= 0.5 * 0.03 * dupthresh.1 as f64, "{dupthresh:?}");
    assert!(rack.0 * 3 < dupthresh.0, "RACK-TLP {rack:?} vs DupThresh {dupthresh:?}");
}

#[test]
fn a_short_transfer_takes_the_handshake_and_the_cookie_round_trips_first() {
    // 10 segments (14,480 B) on an idle 10 Mb/s path with 50 ms of propagation
    // (access links 100 Mb/s): one round trip for SYN / SYN-ACK, one for
    // iperf3's 37-byte cookie and its ACK, then the initial window of 10 in one
    // flight, each segment ACKed at once (quick-ACK mode). Hand derivation, in
    // ms: SYN (60 B + 14 B Ethernet) on the access link 0.00592 and the
    // bottleneck 0.0592, 25 there and 25 back; the cookie (37 + 52 + 14 = 103 B)
    // 0.00824 and 0.0824, 25 there and 25 back; the first data frame (1514 B)
    // 0.12112 on the access link, then 10 × 1.2112 on the bottleneck (the others
    // queue behind it), 25 to the receiver and the last ACK 25 back:
    // 50 + 0.00592 + 0.0592 + 50 + 0.00824 + 0.0824 + 0.12112 + 12.112 + 50 = 162.389.
    let rate = 10_000_000;
    let mut s = dumbbell(rate, 100, 2);
    let mut f = flow("reno", 50, 0);
    f.bytes = Some(10 * 1448);
    s.flows.push(f);
    let out = go(&s);
    let fct = out.totals.flows[0].completed_ns.expect("completes") as f64 / 1e6;
    eprintln!("FCT {fct:.3} ms");
    assert!((fct - 162.389).abs() < 0.002, "FCT {fct:.4} ms");
}

#[test]
fn bbr_limited_by_the_receive_window_is_not_application_limited() {
    // A receive window of one BDP plus the buffer (what a Linux receiver with the
    // vm and live backends' tcp_rmem advertises) lets a paced BBR flow keep its
    // queue inside the buffer. A window stall is not an application stall (Linux
    // `tcp_rate_check_app_limited` needs less than one MSS unsent): had the stall
    // marked every sample app-limited, BBR would never see three rounds without
    // growth, stay in STARTUP at gain 2.89 and overflow the buffer for the whole
    // run (the simulator did: 8,500 retransmissions in 20 s).
    let rate = 100_000_000;
    let buffer = bdp_packets(rate, 100, 1.0);
    let mut s = dumbbell(rate, buffer, 30);
    let mut f = flow("bbr", 100, 0);
    f.rwnd_bytes = Some(2_500_000);
    s.flows.push(f);
    let out = go(&s);
    let late: u64 = (0..out.flows.t_ns.len())
        .filter(|&i| out.flows.t_ns[i] > 10 * S)
        .map(|i| out.flows.retransmits[i])
        .sum();
    assert_eq!(late, 0, "retransmissions after 10 s");
    let util = mean_goodput(&out, 0, 10, 30) / payload_capacity(rate, 1448);
    assert!(util > 0.9, "utilisation {util:.3}");
}
