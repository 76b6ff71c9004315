//! RTT estimation and the retransmission timeout (RFC 6298), shared by the TCP
//! and DCCP/CCID2 senders (RFC 4341 §5 uses TCP's RTO rules).

use netunits::SimDuration;

/// RFC 6298 (2.1): RTO before any RTT measurement, 1 s.
pub(crate) const INITIAL_RTO: SimDuration = SimDuration::from_secs(1);
/// Minimum RTO, 200 ms as Linux `TCP_RTO_MIN` (RFC 6298 (2.4) allows a lower
/// minimum than 1 s). Linux applies it to the variance term (`tcp_rtt_estimator`
/// floors `mdev_max` at `tcp_rto_min`), so RTO ≥ SRTT + 200 ms; we do the same.
pub(crate) const MIN_RTO: SimDuration = SimDuration::from_millis(200);
/// Maximum RTO, 120 s as Linux `TCP_RTO_MAX` (RFC 6298 (2.5): at least 60 s).
pub(crate) const MAX_RTO: SimDuration = SimDuration::from_secs(120);

/// Bits of [`RttEstimator::rto_backoff`] below the backoff count: the RTO in
/// nanoseconds is at most [`MAX_RTO`] (< 2^37).
const RTO_BITS: u32 = 56;
const _: () = assert!(MAX_RTO.as_nanos() < 1 << RTO_BITS);

/// SRTT / RTTVAR / RTO with exponential backoff. 32 bytes (part of every TCP
/// flow's hot state).
#[derive(Clone, Debug)]
pub(crate) struct RttEstimator {
    /// 0 before the first sample, at least 1 ns after (samples are at least
    /// 1 ns, and the average of values ≥ 1 rounds down to ≥ 1): "has a sample".
    srtt: u64,
    rttvar: u64,
    min_rtt: u64,
    /// The RTO in force ([`Self::rto`]), in ns, in the low [`RTO_BITS`] bits, and
    /// above them the number of RTO doublings in force (RFC 6298 (5.5); at most
    /// 40, cleared by a valid sample). Kept up to date by every change: the
    /// senders read the RTO two or three times per ACK, and it changes only with
    /// a sample or a backoff.
    rto_backoff: u64,
}

impl RttEstimator {
    pub fn new() -> Self {
        let mut e = RttEstimator { srtt: 0, rttvar: 0, min_rtt: u64::MAX, rto_backoff: 0 };
        e.set_backoff(0);
        e
    }

    #[inline]
    fn has_sample(&self) -> bool {
        self.srtt != 0
    }

    #[inline]
    fn backoff(&self) -> u32 {
        (self.rto_backoff >> RTO_BITS) as u32
    }

    /// Set the backoff count and recompute the RTO it gives.
    #[inline]
    fn set_backoff(&mut self, backoff: u32) {
        let rto = self.compute_rto(backoff).as_nanos();
        self.rto_backoff = u64::from(backoff) << RTO_BITS | rto;
    }

    /// Feed a valid sample (Karn's rule already applied by the caller,
    /// RFC 6298 §3). Clears the backoff (RFC 6298 (5.7) last paragraph: the backed-off
    /// RTO is kept until a new valid sample).
    #[inline]
    pub fn sample(&mut self, r: SimDuration) {
        self.sample_two(r, r);
    }

    /// Feed the two samples one TCP ACK gives (Linux `tcp_ack_update_rtt`): `r`,
    /// timed on the oldest segment the ACK newly delivers, drives SRTT and RTTVAR;
    /// `newest`, timed on the newest, the minimum (`tcp_update_rtt_min` takes
    /// `ca_rtt_us`).
    #[inline]
    pub fn sample_two(&mut self, r: SimDuration, newest: SimDuration) {
        let r = r.as_nanos().max(1);
        if !self.has_sample() {
            // RFC 6298 (2.2): SRTT <- R, RTTVAR <- R/2.
            self.srtt = r;
            self.rttvar = r / 2;
        } else {
            // RFC 6298 (2.3): alpha = 1/8, beta = 1/4.
            let err = self.srtt.abs_diff(r);
            self.rttvar = (3 * self.rttvar + err) / 4;
            self.srtt = (7 * self.srtt + r) / 8;
        }
        self.min_rtt = self.min_rtt.min(newest.as_nanos().max(1));
        debug_assert!(self.has_sample());
        self.set_backoff(0);
    }

    /// Smoothed RTT (zero before the first sample).
    #[inline]
    pub fn srtt(&self) -> SimDuration {
        SimDuration::from_nanos(self.srtt)
    }
    /// RTT variation.
    #[inline]
    pub fn rttvar(&self) -> SimDuration {
        SimDuration::from_nanos(self.rttvar)
    }
    /// Lowest sample seen (zero before the first).
    #[inline]
    pub fn min_rtt(&self) -> SimDuration {
        SimDuration::from_nanos(if self.has_sample() { self.min_rtt } else { 0 })
    }

    /// The RTO without backoff: RFC 6298 (2.3) `SRTT + max(G, K*RTTVAR)` with K = 4,
    /// the variance term floored at [`MIN_RTO`] as Linux does, clamped to
    /// [`MAX_RTO`]; [`INITIAL_RTO`] before the first sample.
    #[inline]
    pub fn base_rto(&self) -> SimDuration {
        if !self.has_sample() {
            return INITIAL_RTO;
        }
        let var = (4 * self.rttvar).max(MIN_RTO.as_nanos());
        SimDuration::from_nanos((self.srtt + var).min(MAX_RTO.as_nanos()))
    }

    /// The RTO in force, with backoff (RFC 6298 (5.5)), at most [`MAX_RTO`].
    #[inline]
    pub fn rto(&self) -> SimDuration {
        let rto = SimDuration::from_nanos(self.rto_backoff & ((1 << RTO_BITS) - 1));
        debug_assert_eq!(rto, self.compute_rto(self.backoff()));
        rto
    }

    /// [`Self::rto`] from the estimator's state, with `backoff` doublings.
    #[inline]
    fn compute_rto(&self, backoff: u32) -> SimDuration {
        let b = self.base_rto().as_nanos();
        let shifted = if backoff >= 40 { u64::MAX } else { b.saturating_mul(1u64 << backoff) };
        SimDuration::from_nanos(shifted.min(MAX_RTO.as_nanos()))
    }

    /// The timer expired: double the RTO (RFC 6298 (5.5)).
    pub fn back_off(&mut self) {
        self.set_backoff((self.backoff() + 1).min(40));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_sample_sets_srtt_and_half_variance() {
        let mut e = RttEstimator::new();
        assert_eq!(e.rto(), INITIAL_RTO);
        e.sample(SimDuration::from_millis(100));
        assert_eq!(e.srtt(), SimDuration::from_millis(100));
        assert_eq!(e.rttvar(), SimDuration::from_millis(50));
        // 100 ms + max(4 * 50 ms, 200 ms) = 300 ms
        assert_eq!(e.rto(), SimDuration::from_millis(300));
    }

    #[test]
    fn steady_samples_converge_and_rto_floor_holds() {
        let mut e = RttEstimator::new();
        for _ in 0..200 {
            e.sample(SimDuration::from_millis(50));
        }
        assert_eq!(e.srtt(), SimDuration::from_millis(50));
        // variance decays to ~0, the 200 ms floor applies to it
        assert_eq!(e.rto(), SimDuration::from_millis(250));
    }

    #[test]
    fn backoff_doubles_and_is_capped_and_cleared_by_a_sample() {
        let mut e = RttEstimator::new();
        e.sample(SimDuration::from_millis(100));
        e.back_off();
        assert_eq!(e.rto(), SimDuration::from_millis(600));
        for _ in 0..20 {
            e.back_off();
        }
        assert_eq!(e.rto(), MAX_RTO);
        e.sample(SimDuration::from_millis(100));
        assert!(e.rto() < SimDuration::from_secs(1));
    }
}
