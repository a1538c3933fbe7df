//! [`Dice`]: the seeded randomness of a simulation (delays, faults, workload choices).
//!
//! Everything random in a run comes from ChaCha20 streams derived from the scenario seed,
//! drawn in a fixed order, so the same seed always gives the same run.

use std::time::Duration;

use chacha20::ChaCha20Rng;
use rand_core::{Rng, SeedableRng};

/// A seeded random source with the few draws a simulation needs.
#[derive(Debug)]
pub struct Dice {
    rng: ChaCha20Rng,
    /// The unused half of the last 64-bit draw: most draws need only 32 bits, and ChaCha20
    /// is the costliest thing in an unoptimised test build.
    spare: Option<u32>,
}

impl Dice {
    /// A stream determined by `seed` alone.
    pub fn new(seed: u64) -> Self {
        Self {
            rng: ChaCha20Rng::seed_from_u64(seed),
            spare: None,
        }
    }

    /// A fresh, independent ChaCha20 generator seeded from this stream (for a client core).
    pub fn fork_rng(&mut self) -> ChaCha20Rng {
        let mut seed = [0u8; 32];
        self.rng.fill_bytes(&mut seed);
        ChaCha20Rng::from_seed(seed)
    }

    /// A fresh, independent `Dice` seeded from this stream.
    pub fn fork(&mut self) -> Self {
        Self {
            rng: self.fork_rng(),
            spare: None,
        }
    }

    /// A raw 64-bit draw.
    pub fn next_u64(&mut self) -> u64 {
        self.rng.next_u64()
    }

    /// Uniform in `[lo, hi]` (inclusive); `lo` if the range is empty.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        let span = hi - lo + 1;
        // Multiply-shift: a draw scaled onto the span, negligible bias (spans of a few
        // seconds in nanoseconds fit 32 bits; longer ones take a full 64-bit draw).
        if span < 1 << 32 {
            lo + ((u64::from(self.next_u32()) * span) >> 32)
        } else {
            lo + ((u128::from(self.rng.next_u64()) * u128::from(span)) >> 64) as u64
        }
    }

    /// Uniform index in `0..n`.
    ///
    /// # Panics
    /// If `n` is zero.
    pub fn index(&mut self, n: usize) -> usize {
        assert!(n > 0, "cannot pick from nothing");
        self.range(0, n as u64 - 1) as usize
    }

    /// Uniform duration in `[lo, hi]`, nanosecond resolution.
    pub fn duration(&mut self, lo: Duration, hi: Duration) -> Duration {
        let lo_ns = u64::try_from(lo.as_nanos()).unwrap_or(u64::MAX);
        let hi_ns = u64::try_from(hi.as_nanos()).unwrap_or(u64::MAX);
        Duration::from_nanos(self.range(lo_ns, hi_ns))
    }

    /// Uniform duration in `[lo, hi]`, rounded to whole milliseconds (what `PX` carries).
    pub fn millis(&mut self, lo: Duration, hi: Duration) -> Duration {
        let lo_ms = u64::try_from(lo.as_millis()).unwrap_or(u64::MAX);
        let hi_ms = u64::try_from(hi.as_millis()).unwrap_or(u64::MAX);
        Duration::from_millis(self.range(lo_ms, hi_ms))
    }

    /// Uniform in `[lo, hi)`.
    pub fn float(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit()
    }

    /// True with probability `p` (clamped to `[0, 1]`).
    pub fn chance(&mut self, p: f64) -> bool {
        // Draw even when p is 0 or 1, so a knob change does not shift later draws.
        let u = self.unit();
        u < p
    }

    /// Uniform in `[0, 1)` with 32 bits.
    fn unit(&mut self) -> f64 {
        f64::from(self.next_u32()) / (1u64 << 32) as f64
    }

    fn next_u32(&mut self) -> u32 {
        if let Some(half) = self.spare.take() {
            return half;
        }
        let w = self.rng.next_u64();
        self.spare = Some((w >> 32) as u32);
        w as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_draws_and_ranges_hold() {
        let mut a = Dice::new(9);
        let mut b = Dice::new(9);
        for _ in 0..1000 {
            let (x, y) = (a.range(3, 17), b.range(3, 17));
            assert_eq!(x, y);
            assert!((3..=17).contains(&x));
        }
        assert_eq!(a.range(5, 5), 5);
        assert_eq!(a.range(6, 5), 6);
        let d = a.millis(Duration::from_millis(50), Duration::from_millis(500));
        assert_eq!(d.subsec_nanos() % 1_000_000, 0);
        assert!(!a.chance(0.0));
        assert!(a.chance(1.0));
    }
}
