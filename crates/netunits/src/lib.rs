//! Units shared by fairlab's engine (`netsim`), queue disciplines (`aqm`) and link
//! emulator (`linkem`).
//!
//! Read this first: time is an integer number of nanoseconds (`SimTime` for an
//! instant, `SimDuration` for a span), rates are bits per second (`Bandwidth`), and
//! sizes are plain `u64` bytes. Human strings ("100Mbit", "25ms") are parsed in
//! Python's `fairlab.scenario` and arrive here already as integers (DESIGN.md,
//! "Units"). Nanoseconds, not milliseconds: a 1500 B packet at 100 Gbit/s takes 120 ns.
//!
//! This crate reads no clock. The link emulator converts wall-clock time to
//! `SimTime` once, at its edge (STYLE.md §1).
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod prefetch;

use std::fmt;
use std::ops::{Add, AddAssign, Sub};

/// The RNG every random choice in a run draws from. Each component gets its own
/// stream derived from `(run seed, component id)` by [`rng_stream`] (STYLE.md §9).
pub type SimRng = rand_chacha::ChaCha8Rng;

/// A seeded RNG stream for one component of a run. Streams with different
/// `component` ids are independent, so adding a flow does not change the drop
/// sequence of a RED queue.
pub fn rng_stream(seed: u64, component: u64) -> SimRng {
    use rand::SeedableRng;
    let mut rng = SimRng::seed_from_u64(seed);
    rng.set_stream(component);
    rng
}

const NANOS_PER_MICRO: u64 = 1_000;
const NANOS_PER_MILLI: u64 = 1_000_000;
const NANOS_PER_SEC: u64 = 1_000_000_000;

/// An instant of simulated (or emulator) time, in nanoseconds since the run began.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SimTime(u64);

/// A span of time in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SimDuration(u64);

impl SimTime {
    /// The start of the run.
    pub const ZERO: SimTime = SimTime(0);
    /// Later than any event a run can hold.
    pub const MAX: SimTime = SimTime(u64::MAX);

    /// An instant `ns` nanoseconds after the start.
    pub const fn from_nanos(ns: u64) -> Self {
        SimTime(ns)
    }
    /// An instant `us` microseconds after the start.
    pub const fn from_micros(us: u64) -> Self {
        SimTime(us * NANOS_PER_MICRO)
    }
    /// An instant `ms` milliseconds after the start.
    pub const fn from_millis(ms: u64) -> Self {
        SimTime(ms * NANOS_PER_MILLI)
    }
    /// An instant `s` seconds after the start.
    pub const fn from_secs(s: u64) -> Self {
        SimTime(s * NANOS_PER_SEC)
    }
    /// Nanoseconds since the start.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }
    /// Seconds since the start, as a float (for sampling and reports only).
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / NANOS_PER_SEC as f64
    }
    /// The span from `earlier` to `self`, or `None` if `earlier` is later.
    pub fn checked_since(self, earlier: SimTime) -> Option<SimDuration> {
        self.0.checked_sub(earlier.0).map(SimDuration)
    }
    /// The span from `earlier` to `self`, zero if `earlier` is later.
    pub fn saturating_since(self, earlier: SimTime) -> SimDuration {
        SimDuration(self.0.saturating_sub(earlier.0))
    }
}

impl SimDuration {
    /// No time at all.
    pub const ZERO: SimDuration = SimDuration(0);
    /// The longest representable span.
    pub const MAX: SimDuration = SimDuration(u64::MAX);

    /// A span of `ns` nanoseconds.
    pub const fn from_nanos(ns: u64) -> Self {
        SimDuration(ns)
    }
    /// A span of `us` microseconds.
    pub const fn from_micros(us: u64) -> Self {
        SimDuration(us * NANOS_PER_MICRO)
    }
    /// A span of `ms` milliseconds.
    pub const fn from_millis(ms: u64) -> Self {
        SimDuration(ms * NANOS_PER_MILLI)
    }
    /// A span of `s` seconds.
    pub const fn from_secs(s: u64) -> Self {
        SimDuration(s * NANOS_PER_SEC)
    }
    /// A span of `s` seconds given as a float, rounded to the nearest nanosecond.
    /// Negative or non-finite input gives zero.
    pub fn from_secs_f64(s: f64) -> Self {
        if s.is_finite() && s > 0.0 {
            SimDuration((s * NANOS_PER_SEC as f64).round() as u64)
        } else {
            SimDuration(0)
        }
    }
    /// Length in nanoseconds.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }
    /// Length in microseconds, truncated.
    pub const fn as_micros(self) -> u64 {
        self.0 / NANOS_PER_MICRO
    }
    /// Length in seconds, as a float.
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / NANOS_PER_SEC as f64
    }
    /// `self - other`, or `None` on underflow.
    pub fn checked_sub(self, other: SimDuration) -> Option<SimDuration> {
        self.0.checked_sub(other.0).map(SimDuration)
    }
    /// `self - other`, zero on underflow.
    pub fn saturating_sub(self, other: SimDuration) -> SimDuration {
        SimDuration(self.0.saturating_sub(other.0))
    }
    /// `self * k`, saturating.
    pub fn mul(self, k: u64) -> SimDuration {
        SimDuration(self.0.saturating_mul(k))
    }
    /// `self * f` for a non-negative factor, rounded to the nearest nanosecond.
    pub fn mul_f64(self, f: f64) -> SimDuration {
        SimDuration::from_secs_f64(self.as_secs_f64() * f)
    }
}

impl Add<SimDuration> for SimTime {
    type Output = SimTime;
    fn add(self, d: SimDuration) -> SimTime {
        SimTime(self.0.saturating_add(d.0))
    }
}
impl AddAssign<SimDuration> for SimTime {
    fn add_assign(&mut self, d: SimDuration) {
        self.0 = self.0.saturating_add(d.0);
    }
}
impl Add for SimDuration {
    type Output = SimDuration;
    fn add(self, d: SimDuration) -> SimDuration {
        SimDuration(self.0.saturating_add(d.0))
    }
}
impl AddAssign for SimDuration {
    fn add_assign(&mut self, d: SimDuration) {
        self.0 = self.0.saturating_add(d.0);
    }
}
/// Subtracting instants that might be out of order is an error in the caller; use
/// [`SimTime::checked_since`] where that can happen. This saturates to zero.
impl Sub for SimTime {
    type Output = SimDuration;
    fn sub(self, earlier: SimTime) -> SimDuration {
        self.saturating_since(earlier)
    }
}

impl fmt::Display for SimTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.9}s", self.as_secs_f64())
    }
}
impl fmt::Display for SimDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.9}s", self.as_secs_f64())
    }
}

/// A link or sending rate in bits per second.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Bandwidth(u64);

impl Bandwidth {
    /// `bps` bits per second.
    pub const fn from_bps(bps: u64) -> Self {
        Bandwidth(bps)
    }
    /// `mbps` megabits (10^6) per second.
    pub const fn from_mbps(mbps: u64) -> Self {
        Bandwidth(mbps * 1_000_000)
    }
    /// `gbps` gigabits (10^9) per second.
    pub const fn from_gbps(gbps: u64) -> Self {
        Bandwidth(gbps * 1_000_000_000)
    }
    /// Bits per second.
    pub const fn as_bps(self) -> u64 {
        self.0
    }
    /// The rate at which `bytes` are delivered in `d`; `None` when `d` is zero.
    pub fn from_bytes_per(bytes: u64, d: SimDuration) -> Option<Bandwidth> {
        if d.as_nanos() == 0 {
            return None;
        }
        let bits = bytes as u128 * 8 * NANOS_PER_SEC as u128;
        Some(Bandwidth((bits / d.as_nanos() as u128).min(u64::MAX as u128) as u64))
    }
    /// Time to serialise `bytes` at this rate, rounded UP to the next nanosecond so
    /// a link never runs faster than configured. A zero rate never finishes.
    pub fn tx_time(self, bytes: u64) -> SimDuration {
        if self.0 == 0 {
            return SimDuration::MAX;
        }
        let bits = bytes as u128 * 8 * NANOS_PER_SEC as u128;
        let ns = bits.div_ceil(self.0 as u128);
        SimDuration(ns.min(u64::MAX as u128) as u64)
    }
    /// Bytes carried in `d` at this rate (bandwidth-delay product), truncated.
    pub fn bytes_in(self, d: SimDuration) -> u64 {
        let bits = self.0 as u128 * d.as_nanos() as u128 / NANOS_PER_SEC as u128;
        (bits / 8).min(u64::MAX as u128) as u64
    }
}

impl fmt::Display for Bandwidth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} bit/s", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tx_time_of_full_packet_at_100_gbit_is_120_ns() {
        assert_eq!(Bandwidth::from_gbps(100).tx_time(1500), SimDuration::from_nanos(120));
    }

    #[test]
    fn tx_time_rounds_up() {
        // 1 byte at 3 bit/s = 8/3 s = 2.666..s -> 2_666_666_667 ns
        assert_eq!(Bandwidth::from_bps(3).tx_time(1).as_nanos(), 2_666_666_667);
    }

    #[test]
    fn bdp_of_100_mbit_and_100_ms_is_1_25_mb() {
        assert_eq!(Bandwidth::from_mbps(100).bytes_in(SimDuration::from_millis(100)), 1_250_000);
    }

    #[test]
    fn rate_from_bytes_round_trips() {
        let r = Bandwidth::from_bytes_per(1_250_000, SimDuration::from_millis(100)).unwrap();
        assert_eq!(r, Bandwidth::from_mbps(100));
        assert!(Bandwidth::from_bytes_per(1, SimDuration::ZERO).is_none());
    }

    #[test]
    fn time_arithmetic_saturates_instead_of_wrapping() {
        let t = SimTime::from_secs(1);
        assert_eq!(SimTime::ZERO.checked_since(t), None);
        assert_eq!(SimTime::ZERO - t, SimDuration::ZERO);
        assert_eq!(SimTime::MAX + SimDuration::from_secs(1), SimTime::MAX);
    }

    #[test]
    fn rng_streams_differ_by_component_and_repeat_by_seed() {
        use rand::RngCore;
        let a1 = rng_stream(7, 1).next_u64();
        let a2 = rng_stream(7, 1).next_u64();
        let b = rng_stream(7, 2).next_u64();
        let c = rng_stream(8, 1).next_u64();
        assert_eq!(a1, a2);
        assert_ne!(a1, b);
        assert_ne!(a1, c);
    }
}
