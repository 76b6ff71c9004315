//! The `--stats` JSON lines: one bottleneck sample every `sample_interval`, and a
//! final one on shutdown. Fields (all integers; counters cumulative since start):
//! `t_ns`, `queue_bytes`, `queue_pkts`, `drops`, `marks`, `drops_by_reason`
//! (every `aqm::DropReason` by its stable name), `forwarded_pkts`,
//! `forwarded_bytes`. `t_ns` counts from the `ready` line and is the instant the
//! counters were read: for a periodic sample the first loop iteration at or after
//! its scheduled instant k·interval (normally microseconds after it; it is the END
//! of the interval, as DESIGN.md's Trace wants), for the final one the shutdown.

use aqm::DropReason;
use netunits::{SimDuration, SimTime};
use serde_json::{json, Map, Value};

use crate::bridge::Bridge;

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
