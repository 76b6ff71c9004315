//! Windowed min/max filter (Kathleen Nichols' algorithm, as used by BBR for its
//! bottleneck-bandwidth max filter; Linux keeps the same idea in
//! `lib/win_minmax.c`).
//!
//! Read this first: the filter answers "what is the best (max or min) value seen
//! in the last `window` time units" in O(1) memory by keeping three candidates:
//! the best, the best among samples newer than it, and the best among samples
//! newer than that. When the best ages out of the window, the second takes its
//! place. Time is any monotone `u64` — BBR uses the packet-timed round count.
//!
//! The answer is exact when samples arrive in every sub-window; when they do not,
//! the estimate can hold a value up to one window past its nominal expiry, which
//! is the accepted approximation of the algorithm (Nichols; Cardwell et al. 2016).

/// One kept sample: when it was taken and its value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Sample {
    t: u64,
    v: u64,
}

/// A windowed running maximum (or minimum) of `u64` values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct MinMax {
    /// `s[0]` best overall, `s[1]` best after `s[0]`, `s[2]` best after `s[1]`.
    s: [Sample; 3],
}

impl MinMax {
    /// A filter holding `v` taken at time `t` as its only sample.
    pub(crate) fn new(t: u64, v: u64) -> Self {
        let x = Sample { t, v };
        MinMax { s: [x; 3] }
    }

    /// The current best value.
    pub(crate) fn get(&self) -> u64 {
        self.s[0].v
    }

    /// Forget everything and start again from `(t, v)`.
    pub(crate) fn reset(&mut self, t: u64, v: u64) -> u64 {
        *self = MinMax::new(t, v);
        v
    }

    /// Add a sample to a running MAXIMUM over `window`; returns the max.
    pub(crate) fn running_max(&mut self, window: u64, t: u64, v: u64) -> u64 {
        self.update(window, t, v, |new, old| new >= old)
    }

    /// Add a sample to a running MINIMUM over `window`; returns the min.
    #[allow(dead_code)] // the min_rtt filter of BBR v1 is a plain expiring min; kept for tests and BBRv2-style users
    pub(crate) fn running_min(&mut self, window: u64, t: u64, v: u64) -> u64 {
        self.update(window, t, v, |new, old| new <= old)
    }

    /// `better(a, b)`: a is at least as good as b (>= for max, <= for min).
    fn update(&mut self, window: u64, t: u64, v: u64, better: impl Fn(u64, u64) -> bool) -> u64 {
        let new = Sample { t, v };
        // A new overall best, or nothing recent enough survives: start over.
        if better(v, self.s[0].v) || t.saturating_sub(self.s[2].t) > window {
            return self.reset(t, v);
        }
        // A newer sample at least as good as a candidate replaces it and every
        // candidate after it (they are older AND no better).
        if better(v, self.s[1].v) {
            self.s[1] = new;
            self.s[2] = new;
        } else if better(v, self.s[2].v) {
            self.s[2] = new;
        }
        self.age(window, new)
    }

    /// Promote candidates as the best ages, and refresh candidates that have sat
    /// unchanged for a quarter / half window so that a decaying signal is
    /// tracked by fresh samples (Nichols' sub-window rule).
    fn age(&mut self, window: u64, new: Sample) -> u64 {
        let dt = new.t.saturating_sub(self.s[0].t);
        if dt > window {
            // The best expired: shift the candidates up, the newest fills in.
            self.s[0] = self.s[1];
            self.s[1] = self.s[2];
            self.s[2] = new;
            if new.t.saturating_sub(self.s[0].t) > window {
                self.s[0] = self.s[1];
                self.s[1] = self.s[2];
                self.s[2] = new;
            }
        } else if self.s[1].t == self.s[0].t && dt > window / 4 {
            // A quarter window passed with no second candidate: take this one.
            self.s[1] = new;
            self.s[2] = new;
        } else if self.s[2].t == self.s[1].t && dt > window / 2 {
            // Half a window passed with no third candidate: take this one.
            self.s[2] = new;
        }
        self.s[0].v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_holds_the_peak_for_the_whole_window() {
        let mut f = MinMax::new(0, 0);
        assert_eq!(f.running_max(10, 0, 100), 100);
        // Lower samples inside the window never displace the peak.
        for t in 1..=10 {
            assert_eq!(f.running_max(10, t, 50), 100, "t = {t}");
        }
    }

    #[test]
    fn max_expires_after_the_window_and_the_next_best_takes_over() {
        let mut f = MinMax::new(0, 0);
        f.running_max(10, 0, 100);
        for t in 1..=10 {
            f.running_max(10, t, 60);
        }
        // t = 11 is more than 10 rounds after the peak at t = 0: it is gone, and
        // the best remaining sample (60) is what the filter reports.
        assert_eq!(f.running_max(10, 11, 40), 60);
    }

    #[test]
    fn a_higher_sample_replaces_the_max_at_once() {
        let mut f = MinMax::new(0, 0);
        f.running_max(10, 0, 100);
        assert_eq!(f.running_max(10, 3, 150), 150);
        assert_eq!(f.running_max(10, 4, 10), 150);
    }

    #[test]
    fn max_tracks_a_falling_signal_within_about_one_window() {
        // Samples fall by 1 per unit; the filter must follow with a lag of at most
        // one window plus a sub-window (the algorithm's stated bound).
        let mut f = MinMax::new(0, 0);
        let w = 8;
        for t in 0..100u64 {
            let v = 1000 - t;
            let m = f.running_max(w, t, v);
            assert!(m >= v, "max below the current sample at t={t}");
            assert!(m <= v + w + w / 2 + 1, "stale max {m} at t={t} (sample {v})");
        }
    }

    #[test]
    fn min_is_the_mirror_image() {
        let mut f = MinMax::new(0, u64::MAX);
        assert_eq!(f.running_min(10, 0, 30), 30);
        assert_eq!(f.running_min(10, 5, 40), 30);
        assert_eq!(f.running_min(10, 6, 20), 20);
        for t in 7..=16 {
            f.running_min(10, t, 50);
        }
        // 20 (t=6) expired at t=17; only the 50s remain.
        assert_eq!(f.running_min(10, 17, 50), 50);
    }

    #[test]
    fn a_gap_longer_than_the_window_restarts_the_filter() {
        let mut f = MinMax::new(0, 0);
        f.running_max(10, 0, 100);
        assert_eq!(f.running_max(10, 50, 7), 7);
    }
}
