//! How long before a deadline the loop stops sleeping and busy-polls instead.
//!
//! A timer wake-up is late by however long the host takes to schedule the loop
//! again: ~10–50 µs on an idle VM here, hundreds of µs on a busy or
//! oversubscribed one. A fixed spin window either wastes a core (too wide) or lets
//! every departure leave late by the difference (too narrow), and the delay budget
//! is ±0.5 ms. So the window follows the measured lateness of the loop's own timer
//! wake-ups, estimated the way RFC 6298 §2 estimates a retransmission timeout:
//! a smoothed mean plus four mean deviations, gains 1/8 and 1/4, within
//! [`SpinWindow::MIN_NS`, `SpinWindow::MAX_NS`].
//!
//! Samples only come from sleeps, and a wide window stops the loop sleeping when
//! deadlines are closer together than the window (a busy link): the estimate would
//! then stay wide for ever. So it also ages: every [`SpinWindow::AGE_NS`] without a
//! sample halves it, until the loop sleeps again and measures the host afresh.

/// The busy-poll window before each deadline, adapted to timer wake-up lateness.
#[derive(Debug, Clone)]
pub struct SpinWindow {
    /// Smoothed wake-up lateness (ns); `None` before the first sample.
    mean_ns: Option<f64>,
    /// Smoothed mean deviation of the lateness (ns).
    dev_ns: f64,
    /// When the estimate last changed (a sample or an ageing step), ns.
    touched_ns: u64,
}

impl Default for SpinWindow {
    fn default() -> Self {
        Self::new()
    }
}

impl SpinWindow {
    /// Never less: below this, spinning costs next to nothing and absorbs the
    /// common case on an idle machine.
    pub const MIN_NS: u64 = 50_000;
    /// Never more: a host that wakes the loop later than this cannot be helped by
    /// spinning (and a core spent spinning is taken from the endpoints).
    pub const MAX_NS: u64 = 1_000_000;
    /// Halve the estimate after this long without a sample.
    pub const AGE_NS: u64 = 1_000_000_000;

    /// A window of [`Self::MIN_NS`] until the first wake-up is measured.
    pub fn new() -> Self {
        SpinWindow { mean_ns: None, dev_ns: 0.0, touched_ns: 0 }
    }

    /// The current window (ns).
    pub fn ns(&self) -> u64 {
        let w = self.mean_ns.map_or(0.0, |m| m + 4.0 * self.dev_ns);
        (w as u64).clamp(Self::MIN_NS, Self::MAX_NS)
    }

    /// The window at monotonic instant `now_ns` (ns), after ageing the estimate.
    pub fn ns_at(&mut self, now_ns: u64) -> u64 {
        if now_ns.saturating_sub(self.touched_ns) >= Self::AGE_NS {
            self.touched_ns = now_ns;
            if let Some(m) = self.mean_ns.as_mut() {
                *m /= 2.0;
                self.dev_ns /= 2.0;
            }
        }
        self.ns()
    }

    /// The loop slept on its timer and woke, at monotonic instant `now_ns`,
    /// `late_ns` after the instant the timer was armed for.
    pub fn timer_woke(&mut self, now_ns: u64, late_ns: u64) {
        self.touched_ns = now_ns;
        // Lateness beyond MAX_NS cannot be spun away, and a single wake-up seconds
        // late (the process stopped, the VM paused) says nothing about the next
        // one: such a sample counts as MAX_NS, so a lone stall widens the window
        // for a few wake-ups only, while a host that is always that late keeps it
        // at MAX_NS.
        let x = late_ns.min(Self::MAX_NS) as f64;
        match self.mean_ns {
            None => {
                self.mean_ns = Some(x);
                self.dev_ns = x / 2.0;
            }
            Some(m) => {
                self.dev_ns += ((m - x).abs() - self.dev_ns) / 4.0;
                self.mean_ns = Some(m + (x - m) / 8.0);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_at_the_minimum_and_stays_there_on_a_prompt_host() {
        let mut w = SpinWindow::new();
        assert_eq!(w.ns(), SpinWindow::MIN_NS);
        for _ in 0..100 {
            w.timer_woke(0, 8_000);
        }
        assert_eq!(w.ns(), SpinWindow::MIN_NS);
    }

    #[test]
    fn widens_to_cover_a_host_that_wakes_late_and_narrows_again() {
        let mut w = SpinWindow::new();
        // A host that wakes the loop 300 ± 50 µs late: the window must cover it.
        for i in 0..200u64 {
            w.timer_woke(0, if i % 2 == 0 { 250_000 } else { 350_000 });
        }
        assert!(w.ns() >= 350_000, "window {} ns does not cover 350 µs wake-ups", w.ns());
        assert!(w.ns() <= 600_000, "window {} ns: mean 300 + 4 × dev 50 is 500 µs", w.ns());
        // The host calms down: back to the minimum.
        for _ in 0..200 {
            w.timer_woke(0, 5_000);
        }
        assert_eq!(w.ns(), SpinWindow::MIN_NS);
    }

    #[test]
    fn one_huge_stall_is_capped_and_soon_forgotten() {
        let mut w = SpinWindow::new();
        for _ in 0..50 {
            w.timer_woke(0, 10_000);
        }
        w.timer_woke(0, 10_000_000_000);
        assert_eq!(w.ns(), SpinWindow::MAX_NS);
        // Counted as one 1-ms sample: gone after 25 prompt wake-ups (a 4-ms
        // sample would hold the window wide for about 60).
        for _ in 0..25 {
            w.timer_woke(0, 10_000);
        }
        assert_eq!(w.ns(), SpinWindow::MIN_NS);
    }

    #[test]
    fn a_host_always_later_than_the_maximum_keeps_the_maximum() {
        let mut w = SpinWindow::new();
        for _ in 0..100 {
            w.timer_woke(0, 1_500_000);
        }
        assert_eq!(w.ns(), SpinWindow::MAX_NS);
    }

    #[test]
    fn a_wide_window_without_samples_ages_back_to_the_minimum() {
        let mut w = SpinWindow::new();
        let s = 1_000_000_000;
        for _ in 0..20 {
            w.timer_woke(0, 900_000);
        }
        assert!(w.ns_at(s / 2) >= 900_000, "no ageing within the first second");
        // Busy link: the loop never sleeps, so no samples; each second halves it.
        let mut last = w.ns_at(s);
        assert!(last < SpinWindow::MAX_NS);
        for k in 2..6 {
            let now = w.ns_at(k * s);
            assert!(now <= last, "ageing never widens: {now} after {last}");
            last = now;
        }
        assert_eq!(last, SpinWindow::MIN_NS, "five silent seconds bring 0.9 ms down to the minimum");
    }
}
