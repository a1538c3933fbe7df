//! [`Timing`]: the time parameters of one lock (the configuration's default, or a
//! [`LockOptions`](crate::LockOptions) override), derived from the ttl and checked together
//! (algorithm.md §2, §4).

use std::time::Duration;

use super::MAX_TTL_MS;
use crate::error::ConfigError;

/// The time parameters of one lock, derived from the ttl and checked together.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Timing {
    /// Lock time to live, whole milliseconds (what `PX` carries).
    pub(crate) ttl_ms: u64,
    /// Drift allowance proportional to the ttl, in `[0, 0.5)`.
    pub(crate) drift_factor: f64,
    /// Fixed drift allowance added to the proportional one.
    pub(crate) drift_floor: Duration,
    /// How long each node has to answer one acquire or extend attempt.
    pub(crate) attempt_timeout: Duration,
    /// The smallest validity accepted as a successful acquisition (exclusive).
    pub(crate) min_validity: Duration,
}

impl Timing {
    /// The ttl as a duration.
    pub(crate) fn ttl(&self) -> Duration {
        Duration::from_millis(self.ttl_ms)
    }

    /// `ttl * drift_factor + drift_floor`, rounded up to whole microseconds.
    pub(crate) fn drift(&self) -> Duration {
        crate::quorum::drift(self.ttl(), self.drift_factor, self.drift_floor)
    }

    /// The ttl in whole milliseconds, as `PX` carries it; anything finer is refused.
    pub(crate) fn whole_ms(ttl: Duration) -> Result<u64, ConfigError> {
        if !ttl.subsec_nanos().is_multiple_of(1_000_000) {
            return Err(ConfigError::new(
                "ttl",
                format!("{ttl:?} is not whole milliseconds (PX takes milliseconds)"),
            ));
        }
        Ok(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX))
    }

    /// Checks the rules, naming the field at fault and the numbers: a ttl too small for
    /// the drift allowance is the ttl's fault while some ttl up to the limit would do, and
    /// the drift floor's when none would.
    pub(crate) fn check(&self) -> Result<(), ConfigError> {
        self.check_ttl()?;
        let drift = self.drift();
        let usable = self.ttl().saturating_sub(drift);
        let below = || {
            format!(
                "below ttl - drift allowance = {:?} - {drift:?} = {usable:?}",
                self.ttl()
            )
        };
        if self.attempt_timeout.is_zero() {
            return Err(ConfigError::new(
                "attempt_timeout",
                format!(
                    "zero gives no node time to answer; it must be above zero and {}",
                    below()
                ),
            ));
        }
        if self.attempt_timeout >= usable {
            return Err(ConfigError::new(
                "attempt_timeout",
                format!("{:?} must be {}", self.attempt_timeout, below()),
            ));
        }
        if self.min_validity >= usable {
            return Err(ConfigError::new(
                "min_validity",
                format!("{:?} must be {}", self.min_validity, below()),
            ));
        }
        Ok(())
    }

    /// The ttl's own rules: below the limit, above zero, and longer than the drift allowance
    /// (each message names the ttl and the least one that works); and the drift factor's.
    fn check_ttl(&self) -> Result<(), ConfigError> {
        if self.ttl_ms > MAX_TTL_MS {
            return Err(ConfigError::new(
                "ttl",
                format!(
                    "{}ms is above the limit of {MAX_TTL_MS}ms (2^50 ms, about 35,700 years)",
                    self.ttl_ms
                ),
            ));
        }
        if !(0.0..0.5).contains(&self.drift_factor) {
            return Err(ConfigError::new(
                "drift_factor",
                format!("{} is outside [0, 0.5)", self.drift_factor),
            ));
        }
        let use_at_least = |min: Option<u64>| match min {
            Some(min) => format!("; use at least {:?}", Duration::from_millis(min)),
            None => String::new(),
        };
        if self.ttl_ms == 0 {
            return Err(ConfigError::new(
                "ttl",
                format!(
                    "zero, but a lock must expire{}",
                    use_at_least(self.min_ttl_ms())
                ),
            ));
        }
        let drift = self.drift();
        if !self.ttl().saturating_sub(drift).is_zero() {
            return Ok(());
        }
        let Some(min) = self.min_ttl_ms() else {
            return Err(ConfigError::new(
                "drift_floor",
                format!(
                    "{:?} leaves no validity for any ttl up to the limit of {MAX_TTL_MS}ms",
                    self.drift_floor
                ),
            ));
        };
        Err(ConfigError::new(
            "ttl",
            format!(
                "{:?} leaves no validity after the drift allowance of {drift:?} \
                 (ttl * {} + {:?}){}",
                self.ttl(),
                self.drift_factor,
                self.drift_floor,
                use_at_least(Some(min)),
            ),
        ))
    }

    /// The smallest whole-millisecond ttl that leaves validity above its default attempt
    /// timeout after this drift allowance, if any up to [`MAX_TTL_MS`]. The validity left
    /// grows with the ttl faster than the default attempt timeout does (by `1 - factor`, at
    /// least 0.5, against at most 1/20), so a binary search finds it (at most 51 steps).
    fn min_ttl_ms(&self) -> Option<u64> {
        let works = |ttl_ms: u64| {
            let ttl = Duration::from_millis(ttl_ms);
            let drift = crate::quorum::drift(ttl, self.drift_factor, self.drift_floor);
            ttl.saturating_sub(drift) > default_attempt_timeout(ttl)
        };
        if !works(MAX_TTL_MS) {
            return None;
        }
        let (mut fails, mut ok) = (0, MAX_TTL_MS);
        while ok - fails > 1 {
            let mid = fails + (ok - fails) / 2;
            if works(mid) {
                ok = mid;
            } else {
                fails = mid;
            }
        }
        Some(ok)
    }
}

/// 5% of the ttl, at most 1 s (algorithm.md §2), at least 1 µs.
pub(crate) fn default_attempt_timeout(ttl: Duration) -> Duration {
    (ttl / 20).clamp(Duration::from_micros(1), Duration::from_secs(1))
}
