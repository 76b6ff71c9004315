//! The bottleneck's per-packet trace (`RunOptions::queue_trace`) checked against
//! the run's own counters and against the queue disciplines' rules, computed
//! here from the trace's rows: every packet that reached the bottleneck has
//! exactly one arrival row, every drop the counters saw has a row, DropTail
//! refuses a packet exactly when it would not fit, and recording changes nothing.
mod common;

use common::*;
use netsim::{run_with, BufferSpec, QueueEvent, QueueTrace, RunOptions, RunOutput, ScenarioSpec};

fn traced(spec: &ScenarioSpec) -> (RunOutput, QueueTrace) {
    let mut out = run_with(
        spec,
        &RunOptions {
            queue_trace: true,
            ..Default::default()
        },
        &mut |_| true,
    )
    .expect("runs");
    let q = out.queue.take().expect("queue trace recorded");
    (out, q)
}

fn count(q: &QueueTrace, ev: QueueEvent) -> u64 {
    q.event.iter().filter(|&&e| e == ev as u8).count() as u64
}

fn two_flows(qdisc: &str, buffer: BufferSpec) -> ScenarioSpec {
    let mut s = dumbbell(20_000_000, 0, 20);
    s.bottleneck.buffer = buffer;
    s.bottleneck.qdisc = qdisc.into();
    s.host_jitter_ns = 120_000;
    s.flows.push(flow("cubic", 40, 0));
    s.flows.push(flow("reno", 40, 1));
    s
}

#[test]
fn recording_the_queue_changes_nothing_in_the_run() {
    let s = two_flows("droptail", BufferSpec::Bytes(50_000));
    let plain = go(&s);
    let (mut with, _) = traced(&s);
    with.queue = None;
    assert_eq!(plain, with);
}

#[test]
fn droptail_rows_account_for_every_packet_and_follow_the_tail_drop_rule() {
    let limit = 50_000;
    let s = two_flows("droptail", BufferSpec::Bytes(limit));
    let (out, q) = traced(&s);
    let n = q.t_ns.len();
    assert!(n > 10_000, "{n} rows");
    assert!(
        q.t_ns.windows(2).all(|w| w[0] <= w[1]),
        "rows in time order"
    );
    // DropTail decides on arrival alone: no marks, no later drops.
    assert_eq!(
        count(&q, QueueEvent::Marked)
            + count(&q, QueueEvent::MarkedLeaving)
            + count(&q, QueueEvent::DroppedFromQueue)
            + count(&q, QueueEvent::Lost),
        0
    );
    let dropped = count(&q, QueueEvent::Dropped);
    assert_eq!(
        dropped,
        out.totals.drops_by_reason.iter().sum::<u64>(),
        "one row per counted drop"
    );
    assert!(dropped > 20, "the buffer overflows ({dropped} drops)");
    // Byte-limited tail drop: refused exactly when the packet does not fit.
    for i in 0..n {
        let fits = q.backlog_bytes[i] + q.bytes[i] as u64 <= limit;
        assert_eq!(
            q.event[i] == QueueEvent::Queued as u8,
            fits,
            "row {i}: backlog {} + {} vs limit {limit}",
            q.backlog_bytes[i],
            q.bytes[i]
        );
    }
    // Per flow: packets sent = rows; drops = the sender's losses here (no other loss).
    for (f, ft) in out.totals.flows.iter().enumerate() {
        let rows = (0..n).filter(|&i| q.flow[i] == f as u32).count() as u64;
        // Every packet sent reaches the bottleneck, but for the few still on the
        // access link when the run ends.
        assert!(
            rows <= ft.packets_sent && ft.packets_sent - rows < 100,
            "flow {f}: {rows} arrival rows, {} packets sent",
            ft.packets_sent
        );
        let drop_bytes: u64 = (0..n)
            .filter(|&i| q.flow[i] == f as u32 && q.event[i] == QueueEvent::Dropped as u8)
            .map(|i| q.bytes[i] as u64)
            .sum();
        assert!(drop_bytes > 0, "flow {f} loses at the bottleneck");
    }
    // Queued packets leave or are still queued at the end: the backlog the trace
    // implies equals the queue's own count at every arrival.
    let mut backlog: i64 = 0;
    let mut last_t = 0;
    let rate_bytes_per_ns = 20_000_000.0 / 8.0 / 1e9;
    for i in 0..n {
        // Between arrivals the link drains at most rate × elapsed (plus one frame in service).
        let drained_max = ((q.t_ns[i] - last_t) as f64 * rate_bytes_per_ns) as i64 + 2 * 1514;
        let seen = q.backlog_bytes[i] as i64;
        assert!(
            seen <= backlog && seen >= backlog - drained_max,
            "row {i}: backlog {seen}, expected within [{}, {backlog}]",
            backlog - drained_max
        );
        backlog = seen
            + if q.event[i] == QueueEvent::Queued as u8 {
                q.bytes[i] as i64
            } else {
                0
            };
        last_t = q.t_ns[i];
    }
}

#[test]
fn aqm_drops_after_queueing_and_marks_get_rows_of_their_own() {
    // CHOKe drops a queued packet of the arriving packet's flow along with it.
    let (out, q) = traced(&two_flows("choke", BufferSpec::Packets(60)));
    let total_drops = out.totals.drops_by_reason.iter().sum::<u64>();
    assert!(
        count(&q, QueueEvent::DroppedFromQueue) > 0,
        "CHOKe victims traced"
    );
    assert_eq!(
        count(&q, QueueEvent::Dropped) + count(&q, QueueEvent::DroppedFromQueue),
        total_drops
    );

    // CoDel drops (or marks) at the head, as packets leave.
    let mut s = two_flows("codel", BufferSpec::Packets(1000));
    let (out, q) = traced(&s);
    let total_drops = out.totals.drops_by_reason.iter().sum::<u64>();
    assert!(
        count(&q, QueueEvent::DroppedFromQueue) > 0,
        "CoDel's head drops traced"
    );
    assert_eq!(
        count(&q, QueueEvent::Dropped) + count(&q, QueueEvent::DroppedFromQueue),
        total_drops
    );

    // Marks, at the head (CoDel) and on arrival (RED), one row each.
    for f in &mut s.flows {
        f.ecn = true;
    }
    s.bottleneck.params = serde_json::from_str(r#"{"ecn": true}"#).unwrap();
    let (out, q) = traced(&s);
    assert!(out.totals.marks > 0);
    assert_eq!(count(&q, QueueEvent::MarkedLeaving), out.totals.marks, "one row per CE mark, as packets leave (CoDel)");
    assert_eq!(count(&q, QueueEvent::Marked), 0);
    s.bottleneck.qdisc = "red".into();
    s.bottleneck.params =
        serde_json::from_str(r#"{"ecn": true, "min_th": 10, "max_th": 30}"#).unwrap();
    let (out, q) = traced(&s);
    assert!(out.totals.marks > 0);
    assert_eq!(count(&q, QueueEvent::Marked), out.totals.marks, "one row per CE mark, as packets arrive (RED)");
    assert_eq!(count(&q, QueueEvent::MarkedLeaving), 0);
}

#[test]
fn random_loss_is_traced_before_the_queue() {
    let mut s = two_flows("droptail", BufferSpec::Packets(1000));
    s.bottleneck.loss_rate = 0.001;
    let (out, q) = traced(&s);
    assert_eq!(count(&q, QueueEvent::Lost), out.totals.drops_random);
    assert!(out.totals.drops_random > 10);
}

/// Mean length (in packets) of flow 0's runs of arrivals at the bottleneck that
/// follow each other at exactly the access link's frame time: the packets one
/// host release put on the wire back to back.
fn mean_back_to_back_run(q: &QueueTrace, frame_ns: u64) -> f64 {
    let arrivals: Vec<u64> = (0..q.t_ns.len())
        .filter(|&i| q.flow[i] == 0 && q.event[i] == QueueEvent::Queued as u8)
        .map(|i| q.t_ns[i])
        .collect();
    let (mut runs, mut packets, mut run) = (0u64, 0u64, 1u64);
    for w in arrivals.windows(2) {
        if w[1] - w[0] == frame_ns {
            run += 1;
        } else {
            runs += 1;
            packets += run;
            run = 1;
        }
    }
    packets as f64 / runs.max(1) as f64
}

#[test]
fn host_jitter_delays_a_gso_packet_whole_and_splits_the_plain_senders_pairs() {
    // Linux hands each GSO packet to the stack as one skb, so the host's
    // processing delay is the skb's: its segments reach the router back to
    // back however late it leaves. The plain sender's jitter is drawn per
    // packet, which is what breaks up its pairs. A buffer no flow fills, so
    // nothing but the sender shapes the arrivals; 1 Gbit/s access links.
    let frame_ns = 1514 * 8; // ns per frame at 1 Gbit/s
    let runs = |gso: bool, jitter_ns: u64| {
        let mut s = dumbbell(100_000_000, 10_000, 10);
        s.access_rate_bps = Some(1_000_000_000);
        s.host_jitter_ns = jitter_ns;
        let mut f = flow("reno", 20, 0);
        f.tso_defer = gso;
        f.rwnd_bytes = Some(300_000); // below the buffer: no loss, steady releases
        s.flows.push(f);
        mean_back_to_back_run(&traced(&s).1, frame_ns)
    };
    let (gso_still, gso_jittered) = (runs(true, 0), runs(true, 200_000));
    assert!(gso_still >= 3.0, "GSO releases of several segments: mean run {gso_still}");
    assert!(gso_jittered >= 0.95 * gso_still, "jitter split GSO packets: {gso_jittered} vs {gso_still}");
    let (plain_still, plain_jittered) = (runs(false, 0), runs(false, 200_000));
    assert!(plain_jittered < 0.8 * plain_still, "per-packet jitter keeps pairs: {plain_jittered} vs {plain_still}");
}
