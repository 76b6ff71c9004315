//! Bytes per reporting interval, sans-IO: the caller passes every time in.
//!
//! The timing rule (docs/dccpgen.md, "Timing"): times are nanoseconds of
//! CLOCK_MONOTONIC since the connection's start `t0`. Interval `k` covers
//! `[k·I, (k+1)·I)`. The bytes of one read (server) or one send (client) belong
//! to the interval holding the instant that call RETURNED. The run ends at `end`
//! (the deadline, or the end of the connection if that came first); the last
//! interval is `[k·I, end)` and may be short. Reported boundaries are this
//! nominal grid, not the instants of the calls.

/// One reporting interval's totals.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Interval {
    /// Start, ns since `t0`.
    pub start_ns: u64,
    /// End, ns since `t0` (exclusive).
    pub end_ns: u64,
    /// Payload bytes moved in `[start, end)`.
    pub bytes: u64,
    /// Calls that moved them (DCCP: datagrams, as each read/send is one).
    pub packets: u64,
}

impl Interval {
    /// Length in seconds.
    pub fn seconds(&self) -> f64 {
        (self.end_ns - self.start_ns) as f64 / 1e9
    }

    /// Mean rate over the interval, bits/s (0 for an empty-length interval).
    pub fn bits_per_second(&self) -> f64 {
        let s = self.seconds();
        if s > 0.0 {
            self.bytes as f64 * 8.0 / s
        } else {
            0.0
        }
    }
}

/// Accumulates `(time, bytes)` events into intervals of fixed length.
#[derive(Debug)]
pub struct Meter {
    interval_ns: u64,
    /// `(bytes, packets)` per interval index, grown on demand.
    totals: Vec<(u64, u64)>,
}

impl Meter {
    /// A meter with intervals of `interval_ns` (> 0).
    pub fn new(interval_ns: u64) -> Meter {
        assert!(interval_ns > 0, "interval must be positive");
        Meter { interval_ns, totals: Vec::new() }
    }

    /// The interval length, ns.
    pub fn interval_ns(&self) -> u64 {
        self.interval_ns
    }

    /// Count `bytes` moved by one call that returned at `t_ns` since `t0`.
    pub fn record(&mut self, t_ns: u64, bytes: u64) {
        let k = (t_ns / self.interval_ns) as usize;
        if self.totals.len() <= k {
            self.totals.resize(k + 1, (0, 0));
        }
        self.totals[k].0 += bytes;
        self.totals[k].1 += 1;
    }

    /// The intervals of a run that ended at `end_ns`: every grid interval
    /// up to `end_ns` (empty ones included, as zero bytes), the last cut at
    /// `end_ns`. An event at or after `end_ns` goes to the last interval; the
    /// caller's loop never records one (it stops counting at the end).
    pub fn finish(&self, end_ns: u64) -> Vec<Interval> {
        let n = end_ns.div_ceil(self.interval_ns) as usize;
        let mut out: Vec<Interval> = (0..n)
            .map(|k| {
                let start_ns = k as u64 * self.interval_ns;
                let (bytes, packets) = self.totals.get(k).copied().unwrap_or((0, 0));
                Interval { start_ns, end_ns: (start_ns + self.interval_ns).min(end_ns), bytes, packets }
            })
            .collect();
        if let Some(last) = out.last_mut() {
            for &(b, p) in self.totals.iter().skip(n) {
                last.bytes += b;
                last.packets += p;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn bytes_land_in_the_interval_their_call_returned_in() {
        let mut m = Meter::new(500 * MS);
        m.record(0, 100);
        m.record(500 * MS - 1, 50); // last ns of interval 0
        m.record(500 * MS, 7); // first ns of interval 1
        m.record(1250 * MS, 1000);
        let iv = m.finish(1300 * MS);
        // Hand-computed: [0,0.5) 150 B; [0.5,1.0) 7 B; [1.0,1.3) 1000 B.
        assert_eq!(
            iv,
            vec![
                Interval { start_ns: 0, end_ns: 500 * MS, bytes: 150, packets: 2 },
                Interval { start_ns: 500 * MS, end_ns: 1000 * MS, bytes: 7, packets: 1 },
                Interval { start_ns: 1000 * MS, end_ns: 1300 * MS, bytes: 1000, packets: 1 },
            ]
        );
        assert_eq!(iv[0].bits_per_second(), 2400.0); // 150 B * 8 / 0.5 s
        assert_eq!(iv[1].bits_per_second(), 112.0); // 7 * 8 / 0.5
        assert!((iv[2].bits_per_second() - 8000.0 / 0.3).abs() < 1e-6); // 1000 * 8 / 0.3
        assert!((iv[2].seconds() - 0.3).abs() < 1e-12);
    }

    #[test]
    fn silent_intervals_are_reported_as_zero() {
        let mut m = Meter::new(1000 * MS);
        m.record(200 * MS, 10);
        m.record(3500 * MS, 20);
        let iv = m.finish(4000 * MS);
        assert_eq!(iv.iter().map(|i| i.bytes).collect::<Vec<_>>(), vec![10, 0, 0, 20]);
        assert_eq!(iv.iter().map(|i| i.packets).collect::<Vec<_>>(), vec![1, 0, 0, 1]);
    }

    #[test]
    fn an_end_on_a_boundary_adds_no_empty_interval() {
        let m = Meter::new(250 * MS);
        let iv = m.finish(1000 * MS);
        assert_eq!(iv.len(), 4);
        assert_eq!(iv[3], Interval { start_ns: 750 * MS, end_ns: 1000 * MS, bytes: 0, packets: 0 });
    }

    #[test]
    fn the_grid_is_contiguous_and_the_sum_is_conserved() {
        // A pseudo-random byte sequence (LCG), invariants checked against a plain sum.
        let mut m = Meter::new(333 * MS);
        let (mut t, mut x, mut total) = (0u64, 12345u64, 0u64);
        while t < 5000 * MS {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let bytes = 1 + (x >> 33) % 1500;
            m.record(t, bytes);
            total += bytes;
            t += 1 + (x >> 20) % (40 * MS);
        }
        let end = t.max(5000 * MS);
        let iv = m.finish(end);
        assert_eq!(iv.len() as u64, end.div_ceil(333 * MS));
        assert_eq!(iv.iter().map(|i| i.bytes).sum::<u64>(), total);
        assert_eq!(iv[0].start_ns, 0);
        for w in iv.windows(2) {
            assert_eq!(w[0].end_ns, w[1].start_ns);
        }
        assert_eq!(iv.last().unwrap().end_ns, end);
    }

    #[test]
    fn a_run_that_ended_at_once_has_no_interval() {
        let m = Meter::new(MS);
        assert!(m.finish(0).is_empty());
    }

    #[test]
    fn an_event_at_the_end_instant_goes_to_the_last_interval() {
        let mut m = Meter::new(1000 * MS);
        m.record(2000 * MS, 5);
        let iv = m.finish(2000 * MS);
        assert_eq!(iv.len(), 2);
        assert_eq!(iv[1].bytes, 5);
    }
}
