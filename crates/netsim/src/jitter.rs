//! The per-packet host-jitter draw: each data packet waits a uniform
//! `U[0, host_jitter_ns]` nanoseconds at its sender (docs/scenario-format.md).
//!
//! Why not the flow's ChaCha stream, as before: a 1,000-flow run draws once per
//! packet from a thousand different ChaCha states (about 300 bytes each, plus a
//! 256-byte block to refill every 64 draws), all cold in cache; the draw was ~10 %
//! of such a run. Here each flow carries 8 bytes of generator state next to the
//! counters the same packet updates anyway.
//!
//! The generator is SplitMix64 (Steele, Lea & Flood 2014, "Fast Splittable
//! Pseudorandom Number Generators", OOPSLA; the generator of Java's
//! `SplittableRandom`): a Weyl sequence with period 2^64 passed through a
//! 64-bit mixing function; its output passes BigCrush and PractRand. Each flow's
//! state is seeded with one 64-bit draw from the flow's own ChaCha stream
//! (`rng_stream(seed, 2^32 + i)`, STYLE.md §9), so runs stay reproducible from the
//! seed and flows draw from unrelated points of the sequence (two flows' windows of
//! even 2^40 draws overlap with probability below 2^-23).
//!
//! The bounded draw is Lemire's multiply-shift with rejection (Lemire 2019, "Fast
//! Random Integer Generation in an Interval", ACM TOMACS 29(1)): for `n = bound + 1`
//! outcomes, the high word of `x · n` is uniform on `[0, n)` once the rare `x` whose
//! low word falls below `2^64 mod n` are rejected (probability `n / 2^64`, about
//! 10^-14 for a 120 µs bound). The draw is therefore exactly uniform on
//! `[0, bound]`, the same distribution as the ChaCha-based `random_range(0..=bound)`
//! it replaces (which uses the same method); only the particular values differ.

use rand::RngCore;

use netunits::SimRng;

/// One flow's host-jitter generator (see the module docs).
#[derive(Clone, Copy, Debug)]
pub(crate) struct JitterRng {
    state: u64,
}

/// SplitMix64's Weyl increment: 2^64 / φ, odd.
const GOLDEN_GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

impl JitterRng {
    /// A generator seeded with the next 64 bits of the flow's stream.
    pub fn seeded_from(rng: &mut SimRng) -> Self {
        JitterRng { state: rng.next_u64() }
    }

    /// The next 64 uniform bits (SplitMix64).
    #[inline(always)]
    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GOLDEN_GAMMA);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform on `[0, bound]` (Lemire's method, exact).
    #[inline]
    pub fn up_to(&mut self, bound: u64) -> u64 {
        let n = bound.wrapping_add(1);
        if n == 0 {
            return self.next_u64();
        }
        let mut m = self.next_u64() as u128 * n as u128;
        if (m as u64) < n {
            let threshold = n.wrapping_neg() % n;
            while (m as u64) < threshold {
                m = self.next_u64() as u128 * n as u128;
            }
        }
        (m >> 64) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netunits::rng_stream;

    #[test]
    fn splitmix64_matches_the_published_reference_values() {
        // The first outputs of SplitMix64 seeded with 1234567, as printed by the
        // reference C implementation (Vigna, prng.di.unimi.it/splitmix64.c).
        let mut g = JitterRng { state: 1234567 };
        let got: Vec<u64> = (0..3).map(|_| g.next_u64()).collect();
        assert_eq!(got, vec![6457827717110365317, 3203168211198807973, 9817491932198370423]);
    }

    #[test]
    fn draws_stay_in_range_and_cover_it_uniformly() {
        // 10 outcomes, 200,000 draws: every count within 5 standard deviations of
        // 20,000 (binomial sd = sqrt(200000 · 0.1 · 0.9) ≈ 134), and a chi-square
        // statistic (9 degrees of freedom) below 27.9, its 0.001 quantile.
        let mut g = JitterRng::seeded_from(&mut rng_stream(7, 1 << 32));
        let mut counts = [0u64; 10];
        for _ in 0..200_000 {
            let x = g.up_to(9);
            assert!(x <= 9);
            counts[x as usize] += 1;
        }
        let chi2: f64 = counts.iter().map(|&c| (c as f64 - 20_000.0).powi(2) / 20_000.0).sum();
        assert!(counts.iter().all(|&c| c.abs_diff(20_000) < 5 * 134), "{counts:?}");
        assert!(chi2 < 27.9, "chi2 = {chi2}, counts {counts:?}");
    }

    #[test]
    fn the_mean_of_a_packet_time_bound_is_half_of_it() {
        // U[0, 120000]: mean 60000, sd 34641; over 100,000 draws the sample mean's
        // sd is 110 ns, so it must lie within 550 ns (5 sd) of 60000.
        let mut g = JitterRng::seeded_from(&mut rng_stream(1, (1 << 32) + 5));
        let mean = (0..100_000).map(|_| g.up_to(120_000) as f64).sum::<f64>() / 100_000.0;
        assert!((mean - 60_000.0).abs() < 550.0, "mean {mean}");
    }

    #[test]
    fn edge_bounds() {
        let mut g = JitterRng { state: 99 };
        assert!((0..1000).all(|_| g.up_to(0) == 0));
        // n = 2^63 + 1 rejects almost half of all 64-bit words: still in range.
        assert!((0..1000).all(|_| g.up_to(1 << 63) <= 1 << 63));
        // bound = u64::MAX: every word is a valid draw.
        let _ = g.up_to(u64::MAX);
    }

    #[test]
    fn the_same_stream_gives_the_same_draws() {
        let a: Vec<u64> = {
            let mut g = JitterRng::seeded_from(&mut rng_stream(3, 1 << 32));
            (0..5).map(|_| g.up_to(1000)).collect()
        };
        let mut g = JitterRng::seeded_from(&mut rng_stream(3, 1 << 32));
        assert_eq!(a, (0..5).map(|_| g.up_to(1000)).collect::<Vec<_>>());
        let mut other = JitterRng::seeded_from(&mut rng_stream(3, (1 << 32) + 1));
        assert_ne!(a, (0..5).map(|_| other.up_to(1000)).collect::<Vec<_>>());
    }
}
