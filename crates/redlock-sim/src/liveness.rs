//! The liveness property of release notifications (issue 14): while the resource is
//! released often, every waiter eventually acquires. A lock call *starves* if it never got
//! the lock (it gave up, or was still waiting when the run ended) although the lock became
//! free after the call began: some other hold of the resource ended (released, cancelled,
//! lost or expired) between the call's start and its end.
//!
//! Which calls count is up to the scenario: one whose retry policy outlasts every other
//! client's work (and that never cancels) must not starve, however its notifications were
//! lost, doubled, held back or never subscribed. Like [`Checker::violation`], this reads
//! the checker's records only.

use std::fmt;

use crate::checker::{Checker, Interval, OpRecord};
use crate::clock::SimTime;

/// A lock call that never acquired although the lock changed hands while it waited.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Starvation {
    /// The scenario seed that produced it.
    pub seed: u64,
    /// The call.
    pub op: OpRecord,
    /// When it stopped waiting: when it gave up, or the end of the run.
    pub until: SimTime,
    /// Holds of its resource by other calls that ended while it waited (each a moment the
    /// lock was free).
    pub freed: Vec<Interval>,
}

impl Checker {
    /// The first lock call (in start order) that starved by `end` (the true time the run
    /// stopped), if any; cancelled calls are left out.
    pub fn starvation(&self, end: SimTime) -> Option<Starvation> {
        let waiting = (self.ops().iter()).filter(|r| r.acquired_after.is_none() && !r.cancelled);
        for op in waiting {
            let until = op.failed_at.unwrap_or(end);
            let freed: Vec<Interval> = (self.intervals().iter())
                .filter(|iv| iv.resource == op.resource && (iv.client, iv.op) != (op.client, op.op))
                .filter(|iv| iv.end > op.started_at && iv.end <= until)
                .cloned()
                .collect();
            if !freed.is_empty() {
                return Some(Starvation {
                    seed: self.seed(),
                    op: op.clone(),
                    until,
                    freed,
                });
            }
        }
        None
    }
}

impl fmt::Display for Starvation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let how = match &self.op.failed {
            Some(reason) => format!("gave up ({reason:?})"),
            None => "was still waiting".to_owned(),
        };
        write!(
            f,
            "seed {}: client {} {} on {:?}, waiting since {}, {how} at {} although the lock \
             was freed {} times meanwhile (first: {})",
            self.seed,
            self.op.client,
            self.op.op,
            self.op.resource,
            self.op.started_at,
            self.until,
            self.freed.len(),
            self.freed[0],
        )
    }
}

#[cfg(test)]
mod tests {
    use redlock_core::{AcquireFailure, OpId, Resource};

    use super::*;

    fn ms(n: u64) -> SimTime {
        SimTime::from_duration(std::time::Duration::from_millis(n))
    }

    #[test]
    fn a_waiter_starves_if_it_never_acquires_while_the_lock_is_freed() {
        let (r, op) = (Resource::from("r"), OpId::from_raw(1));
        let mut c = Checker::new(9);
        c.started((0, op, ms(0)), r.clone(), (None, None));
        c.acquired(0, op, (ms(1), ms(500)), None);
        c.started((1, op, ms(5)), r.clone(), (None, None));
        assert_eq!(c.starvation(ms(10)), None, "the lock was never free");
        c.ended(0, op, ms(20));
        let s = c
            .starvation(ms(30))
            .expect("freed at 20 ms, still waiting at 30 ms");
        assert_eq!((s.op.client, s.until, s.freed.len()), (1, ms(30), 1));
        assert!(s.to_string().contains("was still waiting"), "{s}");
        // Giving up before the release is not starvation; after it is.
        c.record(1, op, |r| {
            r.failed = Some(AcquireFailure::Cancelled);
            r.failed_at = Some(ms(15));
        });
        assert_eq!(c.starvation(ms(30)), None);
        c.record(1, op, |r| r.failed_at = Some(ms(25)));
        assert!(
            c.starvation(ms(30))
                .is_some_and(|s| s.to_string().contains("gave up"))
        );
        // A cancelled call, or one that acquired, never starves.
        c.record(1, op, |r| r.cancelled = true);
        assert_eq!(c.starvation(ms(30)), None);
        c.record(1, op, |r| r.cancelled = false);
        c.acquired(1, op, (ms(24), ms(100)), None);
        c.record(1, op, |r| r.acquired_after = Some(3));
        assert_eq!(c.starvation(ms(30)), None);
    }
}
