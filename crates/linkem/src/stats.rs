//! The `--stats` JSON lines: one bottleneck sample every `sample_interval`, and a
//! final one on shutdown. Fields (all integers; counters cumulative since start):
//! `t_ns`, `queue_bytes`, `queue_pkts`, `drops`, `marks`, `drops_by_reason`
//! (every `aqm::DropReason` by its stable name), `forwarded_pkts`,
//! `forwarded_bytes`. `t_ns` counts from the `ready` line and is the instant the
//! counters were read: for a periodic sample the first loop iteration at or after
//! its scheduled instant k·interval (normally microseconds after it; it is the END
//! of the interval, as DESIGN.md's Trace wants), for the final one the shutdown.
//! After the final sample, one more line holds only `health`: how well the loop
//! kept time ([`health_line`]), so the caller can tell a stalled host from the link.

use aqm::DropReason;
use netunits::{SimDuration, SimTime};
use serde_json::{json, Map, Value};

use crate::bridge::Bridge;
use crate::driver::Health;

/// One sample's JSON line (no trailing newline).
pub fn line(t: SimTime, b: &Bridge) -> String {
    let c = b.counters();
    let by_reason: Map<String, Value> = DropReason::ALL.iter().zip(c.drops.iter()).map(|(r, n)| (r.name().to_string(), json!(n))).collect();
    json!({
        "t_ns": t.as_nanos(),
        "queue_bytes": b.queue_bytes(),
        "queue_pkts": b.queue_packets(),
        "drops": c.total_drops(),
        "marks": c.total_marks(),
        "drops_by_reason": by_reason,
        "forwarded_pkts": b.totals().forwarded_pkts,
        "forwarded_bytes": b.totals().forwarded_bytes,
    })
    .to_string()
}

/// The shutdown's `{"health": {...}}` line (no trailing newline): every counter of
/// [`Health`], durations in ns. The exit summary on stderr says the same in words;
/// this is the form a program reads.
pub fn health_line(h: &Health) -> String {
    json!({
        "health": {
            "tx_errors": h.tx_errors,
            "first_tx_error": h.first_tx_error,
            "gso_frames": h.gso_frames,
            "truncated": h.truncated,
            "iterations": h.iterations,
            "max_late_ns": h.max_late_ns,
            "late_over_100us": h.late_over_100us,
            "late_over_1ms": h.late_over_1ms,
            "rx_wait_max_ns": h.rx_wait_max_ns,
            "rx_wait_over_1ms": h.rx_wait_over_1ms,
            "kernel_drops": h.kernel_drops,
            "ring_ports": h.ring_ports,
            "timer_late_max_ns": h.timer_late_max_ns,
            "spin_max_ns": h.spin_max_ns,
        }
    })
    .to_string()
}

/// Decides when periodic samples are due.
#[derive(Debug, Clone)]
pub struct Schedule {
    interval: SimDuration,
    next: SimTime,
}

impl Schedule {
    /// First sample at `interval` after the start.
    pub fn new(interval: SimDuration) -> Self {
        Schedule { interval, next: SimTime::ZERO + interval }
    }

    /// When the next sample is due.
    pub fn next_due(&self) -> SimTime {
        self.next
    }

    /// If a sample is due at `now`, its scheduled instant. A loop that fell behind by
    /// several intervals gets one sample (the latest due), not a burst of copies.
    pub fn take_due(&mut self, now: SimTime) -> Option<SimTime> {
        if now < self.next {
            return None;
        }
        let behind = (now - self.next).as_nanos() / self.interval.as_nanos();
        let t = self.next + self.interval.mul(behind);
        self.next = t + self.interval;
        Some(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_health_line_carries_every_counter_by_name() {
        let h = Health {
            tx_errors: 2,
            first_tx_error: Some("No buffer space available".into()),
            late_over_1ms: 14,
            max_late_ns: 20_463_000,
            kernel_drops: 3,
            ring_ports: 2,
            ..Health::default()
        };
        let v: Value = serde_json::from_str(&health_line(&h)).unwrap();
        let m = v["health"].as_object().unwrap();
        assert_eq!(v.as_object().unwrap().len(), 1, "the line holds health alone, never a sample's fields");
        assert_eq!(m.len(), 14);
        assert_eq!(m["late_over_1ms"], 14);
        assert_eq!(m["max_late_ns"], 20_463_000);
        assert_eq!(m["kernel_drops"], 3);
        assert_eq!(m["first_tx_error"], "No buffer space available");
        assert_eq!(m["rx_wait_over_1ms"], 0);
        let quiet: Value = serde_json::from_str(&health_line(&Health::default())).unwrap();
        assert!(quiet["health"]["first_tx_error"].is_null());
    }

    #[test]
    fn samples_fall_on_multiples_of_the_interval() {
        let mut s = Schedule::new(SimDuration::from_millis(100));
        assert_eq!(s.take_due(SimTime::from_millis(99)), None);
        assert_eq!(s.take_due(SimTime::from_millis(100)), Some(SimTime::from_millis(100)));
        assert_eq!(s.take_due(SimTime::from_millis(150)), None);
        assert_eq!(s.take_due(SimTime::from_micros(200_300)), Some(SimTime::from_millis(200)));
        // Stalled past three intervals: one sample at the latest due instant.
        assert_eq!(s.take_due(SimTime::from_millis(530)), Some(SimTime::from_millis(500)));
        assert_eq!(s.next_due(), SimTime::from_millis(600));
    }
}
