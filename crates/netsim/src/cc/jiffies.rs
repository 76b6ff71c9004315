//! The kernel's coarse clock, for controllers whose Linux code keeps time in
//! jiffies (H-TCP, Westwood+): the rounding of a 4 ms tick is part of what they
//! compute, so the simulator rounds as the kernel does.
//!
//! Read this first: the validation kernel is Debian's Linux 6.1 for amd64,
//! built with CONFIG_HZ = 250. `msecs_to_jiffies` and `usecs_to_jiffies` round
//! UP (include/linux/jiffies.h); the jiffies counter itself counts whole ticks.

use netunits::{SimDuration, SimTime};

/// Kernel tick rate of the validation kernel (Debian amd64: CONFIG_HZ = 250).
pub const HZ: u64 = 250;

/// Linux `msecs_to_jiffies` (rounds up).
pub const fn ms_to_jiffies(ms: u64) -> u64 {
    (ms * HZ).div_ceil(1000)
}

/// Linux `usecs_to_jiffies` of a whole-microsecond sample (`rtt_us`; rounds up).
pub fn rtt_jiffies(rtt: SimDuration) -> u64 {
    ((rtt.as_nanos() / 1000) * HZ).div_ceil(1_000_000)
}

/// The jiffies counter at `now` (whole ticks since time zero).
pub fn jiffies(now: SimTime) -> u64 {
    (now.as_nanos() as u128 * HZ as u128 / 1_000_000_000) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_round_up_and_the_counter_down() {
        // 4 ms per jiffy: 10 ms → 2.5 → 3; 20 ms → 5; 100 ms → 25; 100.001 ms → 26.
        assert_eq!(ms_to_jiffies(10), 3);
        assert_eq!(ms_to_jiffies(20), 5);
        assert_eq!(rtt_jiffies(SimDuration::from_micros(100_000)), 25);
        assert_eq!(rtt_jiffies(SimDuration::from_micros(100_001)), 26);
        // Sub-microsecond parts are dropped first, as rtt_us is whole µs.
        assert_eq!(rtt_jiffies(SimDuration::from_nanos(100_000_999)), 25);
        assert_eq!(jiffies(SimTime::from_millis(7)), 1);
        assert_eq!(jiffies(SimTime::from_millis(8)), 2);
    }
}
