//! Virtual time and the skewed local clocks of simulated clients and nodes.
//!
//! True time ([`SimTime`]) belongs to the scheduler alone. Each process reads a [`Clock`]
//! that runs at its own constant rate, maps true time to a local `std::time::Instant` (origin
//! plus a duration) and back. All arithmetic is integer, so runs are bit-for-bit repeatable.

use std::fmt;
use std::time::{Duration, Instant};

/// A point in true (virtual) time: nanoseconds since the simulation started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct SimTime(u64);

impl SimTime {
    /// The start of every simulation.
    pub const ZERO: Self = Self(0);

    /// The time `d` after the start.
    pub fn from_duration(d: Duration) -> Self {
        Self(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
    }

    /// Nanoseconds since the start.
    pub fn as_nanos(self) -> u64 {
        self.0
    }

    /// Time since the start.
    pub fn since_start(self) -> Duration {
        Duration::from_nanos(self.0)
    }

    /// `self + d`, saturating.
    pub fn saturating_add(self, d: Duration) -> Self {
        Self(self.0.saturating_add(Self::from_duration(d).0))
    }

    /// `self - earlier`, or zero if `earlier` is later.
    pub fn saturating_sub(self, earlier: Self) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

impl fmt::Display for SimTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.6}ms", self.0 as f64 / 1e6)
    }
}

/// A local clock running at a constant rate relative to true time.
///
/// The rate is in parts per billion: `1_000_000_000` is exact, `1_004_000_000` runs 0.4%
/// fast. Local readings are `origin + true * rate`, rounded down, so they never go
/// backwards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Clock {
    origin: Instant,
    rate_ppb: u64,
}

impl Clock {
    /// A clock reading `origin` at true time zero and running at `rate_ppb` / 1e9.
    ///
    /// # Panics
    /// If `rate_ppb` is zero (a stopped clock cannot be inverted).
    pub fn new(origin: Instant, rate_ppb: u64) -> Self {
        assert!(rate_ppb > 0, "a clock rate must be positive");
        Self { origin, rate_ppb }
    }

    /// A clock whose rate is `1 + skew`, where `skew` is clamped to (-0.5, 0.5).
    pub fn with_skew(origin: Instant, skew: f64) -> Self {
        let skew = skew.clamp(-0.499_999, 0.499_999);
        let rate = (PPB as f64 * (1.0 + skew)).round() as u64;
        Self::new(origin, rate)
    }

    /// The rate relative to true time, as a fraction (1.0 = exact).
    pub fn rate(&self) -> f64 {
        self.rate_ppb as f64 / PPB as f64
    }

    /// Local nanoseconds elapsed since the origin at true time `t`.
    pub fn local_nanos(&self, t: SimTime) -> u64 {
        let local = u128::from(t.0) * u128::from(self.rate_ppb) / u128::from(PPB);
        u64::try_from(local).unwrap_or(u64::MAX)
    }

    /// The local `Instant` at true time `t`.
    pub fn instant(&self, t: SimTime) -> Instant {
        self.origin + Duration::from_nanos(self.local_nanos(t))
    }

    /// The earliest true time at which this clock reads at least `local_nanos`.
    pub fn true_time_of_nanos(&self, local_nanos: u64) -> SimTime {
        // ceil(local * 1e9 / rate): the smallest t with floor(t * rate / 1e9) >= local.
        let num = u128::from(local_nanos) * u128::from(PPB);
        let t = num.div_ceil(u128::from(self.rate_ppb));
        SimTime(u64::try_from(t).unwrap_or(u64::MAX))
    }

    /// The earliest true time at which this clock reads at least `at`.
    pub fn true_time_of(&self, at: Instant) -> SimTime {
        let local = at.saturating_duration_since(self.origin).as_nanos();
        self.true_time_of_nanos(u64::try_from(local).unwrap_or(u64::MAX))
    }

    /// How far `at` is from the origin, on this clock.
    pub fn nanos_of(&self, at: Instant) -> u64 {
        let local = at.saturating_duration_since(self.origin).as_nanos();
        u64::try_from(local).unwrap_or(u64::MAX)
    }
}

/// Parts per billion in a rate of 1.
const PPB: u64 = 1_000_000_000;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inverse_is_the_first_instant_reaching_the_reading() {
        let origin = Instant::now();
        for skew in [-0.05, -0.004, 0.0, 0.003, 0.05] {
            let c = Clock::with_skew(origin, skew);
            for local in [0u64, 1, 7, 999_999, 123_456_789_012] {
                let t = c.true_time_of_nanos(local);
                assert!(c.local_nanos(t) >= local);
                if t.0 > 0 {
                    assert!(c.local_nanos(SimTime(t.0 - 1)) < local);
                }
            }
        }
    }

    #[test]
    fn skewed_clocks_drift_apart_at_their_rates() {
        let origin = Instant::now();
        let fast = Clock::with_skew(origin, 0.01);
        let slow = Clock::with_skew(origin, -0.01);
        let t = SimTime::from_duration(Duration::from_secs(100));
        assert_eq!(fast.local_nanos(t), 101_000_000_000);
        assert_eq!(slow.local_nanos(t), 99_000_000_000);
        assert_eq!(fast.instant(t) - slow.instant(t), Duration::from_secs(2));
    }
}
