//! The pure maths of the algorithm: drift allowance, validity, deadline and the vote tally
//! that decides a round as early as the votes allow.
//!
//! Everything here is a function of its arguments: no state, no clock. Time arithmetic
//! never wraps or panics: a value that would overflow saturates, and a validity that would
//! be negative is `None` (the unsigned-underflow bug of several peer clients).

use std::time::{Duration, Instant};

/// The clock-drift allowance: `ttl * factor + floor` (algorithm.md §4), to the
/// nearest nanosecond.
pub(crate) fn drift(ttl: Duration, factor: f64, floor: Duration) -> Duration {
    // ttl <= 2^50 ms and factor < 0.5: the product fits an f64 and a Duration. Rounding to
    // the nearest nanosecond (not up) keeps 900 ms * 0.01 at exactly 9 ms despite f64 error.
    let nanos = (ttl.as_nanos() as f64 * factor).round();
    let proportional = Duration::from_nanos(nanos as u64);
    proportional.saturating_add(floor)
}

/// The lock's deadline on the client's clock: `t0 + ttl - drift`.
///
/// `t0` is the `now` at which the attempt started, before any byte was written: this is the
/// conservative choice, since the keys cannot have been set before it.
pub(crate) fn deadline(t0: Instant, ttl: Duration, drift: Duration) -> Instant {
    crate::time::add(t0, ttl.saturating_sub(drift))
}

/// Validity left when the quorum was reached at `t_quorum`: `deadline - t_quorum`, or `None`
/// if nothing is left.
pub(crate) fn validity(deadline: Instant, t_quorum: Instant) -> Option<Duration> {
    deadline
        .checked_duration_since(t_quorum)
        .filter(|v| !v.is_zero())
}

/// Votes of one round, and what they already decide.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tally {
    nodes: usize,
    quorum: usize,
    yes: usize,
    other: usize,
}

/// What a tally decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Not yet: more votes could go either way.
    Open,
    /// At least q nodes said yes.
    Reached,
    /// More than `N - q` nodes said something else: q yes votes are no longer possible.
    Impossible,
}

impl Tally {
    pub(crate) fn new(nodes: usize, quorum: usize) -> Self {
        Self {
            nodes,
            quorum,
            yes: 0,
            other: 0,
        }
    }

    /// Counts one node's vote.
    pub(crate) fn add(&mut self, yes: bool) {
        if yes {
            self.yes += 1;
        } else {
            self.other += 1;
        }
    }

    /// The decision so far. Success wins when both hold, which needs more votes than nodes
    /// and so never happens for a well-formed round.
    #[inline]
    pub(crate) fn decision(&self) -> Decision {
        if self.yes >= self.quorum {
            Decision::Reached
        } else if self.other > self.nodes - self.quorum {
            Decision::Impossible
        } else {
            Decision::Open
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn drift_defaults() {
        assert_eq!(drift(10_000 * MS, 0.01, 2 * MS), 102 * MS);
        assert_eq!(drift(MS, 0.01, 2 * MS), Duration::from_micros(2010));
        assert_eq!(drift(MS, 0.0, Duration::ZERO), Duration::ZERO);
        assert_eq!(
            drift(3 * MS, 0.001, Duration::ZERO),
            Duration::from_micros(3)
        );
        // f64 error does not leak into the result: 0.9 s * 0.01 is exactly 9 ms.
        assert_eq!(drift(900 * MS, 0.01, Duration::ZERO), 9 * MS);
        assert_eq!(
            drift(Duration::from_nanos(1_000_001), 0.49, Duration::ZERO),
            Duration::from_nanos(490_000)
        );
    }

    #[test]
    fn validity_at_the_boundaries() {
        let t0 = crate::test_epoch::epoch();
        let ttl = 1000 * MS;
        let d = drift(ttl, 0.01, 2 * MS); // 12 ms
        let dl = deadline(t0, ttl, d);
        assert_eq!(dl - t0, 988 * MS);
        // Elapsed just under ttl - drift: a sliver of validity.
        let just_under = t0 + 988 * MS - Duration::from_nanos(1);
        assert_eq!(validity(dl, just_under), Some(Duration::from_nanos(1)));
        // Exactly at and past ttl - drift: nothing; never a wrapped-around huge value.
        assert_eq!(validity(dl, t0 + 988 * MS), None);
        assert_eq!(validity(dl, t0 + 5000 * MS), None);
        // Immediately: exactly ttl - drift, never more.
        assert_eq!(validity(dl, t0), Some(988 * MS));
    }

    #[test]
    fn deadline_near_the_largest_ttl_does_not_overflow() {
        let t0 = crate::test_epoch::epoch();
        let ttl = Duration::from_millis(crate::MAX_TTL_MS);
        let d = drift(ttl, 0.49, Duration::from_secs(1));
        let dl = deadline(t0, ttl, d);
        assert!(dl > t0);
        assert!(validity(dl, t0).unwrap() <= ttl - d);
        // Saturates instead of panicking on an absurd duration.
        let far = deadline(t0, Duration::MAX, Duration::ZERO);
        assert!(far > t0);
        // A drift larger than the ttl leaves no validity instead of underflowing.
        assert_eq!(validity(deadline(t0, MS, 2 * MS), t0), None);
    }

    #[test]
    fn tally_decides_as_early_as_possible() {
        // N = 5, q = 3: fails at the third non-yes, succeeds at the third yes.
        let mut t = Tally::new(5, 3);
        t.add(false);
        t.add(false);
        assert_eq!(t.decision(), Decision::Open);
        t.add(true);
        t.add(true);
        assert_eq!(t.decision(), Decision::Open);
        t.add(false);
        assert_eq!(t.decision(), Decision::Impossible);

        let mut t = Tally::new(5, 3);
        for _ in 0..3 {
            assert_eq!(t.decision(), Decision::Open);
            t.add(true);
        }
        assert_eq!(t.decision(), Decision::Reached);

        // q = N: one failure decides.
        let mut t = Tally::new(3, 3);
        t.add(false);
        assert_eq!(t.decision(), Decision::Impossible);
        // N = 1.
        let mut t = Tally::new(1, 1);
        t.add(true);
        assert_eq!(t.decision(), Decision::Reached);
    }
}
