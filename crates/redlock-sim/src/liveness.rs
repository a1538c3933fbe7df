//! The liveness property of release notifications (docs/design.md, "Release notifications"): while the resource is
//! released often, every waiter eventually acquires. A lock call *starves* if it never got
//! the lock (it gave up, or was still waiting when the run ended) although the lock became
//! free after the call began: some other hold of the resource ended (released, cancelled,
//! lost or expired) between the call's start and its end.
//!
//! Which calls count is up to the scenario: one whose retry policy outlasts every other
//! client's work (and that never cancels) must not starve, however its notifications were
//! lost, doubled, held back or never subscribed. Like [`Checker::violation`], this reads
//! the checker's records only.
//!
//! The bounded form ([`Checker::handoff_starvation`]) is for waiters that may give up: a
//! call starves if, while it waited, another client handed the lock from one of its calls
//! to the next one already in its line (the core's local queue) more than a bound of times
//! in a row. Each such hand-off was a moment the lock was free and went to a call that had
//! queued behind the holder rather than to the waiter; the core's line promises to let a
//! waiter of another client go first (queue.rs, "contested"), which it may lose now and
//! then, never many times running.

use std::fmt;
use std::time::Duration;

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
    /// lock was free); in the bounded form, the holds another client handed to itself.
    pub freed: Vec<Interval>,
    /// The bound of the bounded form ([`Checker::handoff_starvation`]); `None` for the
    /// plain form.
    pub bound: Option<usize>,
}

impl Checker {
    /// The first lock call (in start order) that starved by `end` (the true time the run
    /// stopped), if any; cancelled calls, and calls whose client died while they waited
    /// ([`Checker::cut_short`]), are left out.
    pub fn starvation(&self, end: SimTime) -> Option<Starvation> {
        let waiting = (self.ops().iter())
            .filter(|r| r.acquired_after.is_none() && !r.cancelled && !self.cut_short(r));
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
                    bound: None,
                });
            }
        }
        None
    }

    /// The first lock call (in start order) that waited while another client handed the
    /// lock to itself more than `max_handoffs` times in a row, by `end` (the true time the
    /// run stopped); cancelled calls are left out. A hand-off is a hold of the resource that
    /// ended after the call began, followed (by start) by the same other client's next hold,
    /// by a call it made before the first hold ended (queued in its line), that began
    /// before the call acquired, gave up or the run ended. A hold of any other client (the
    /// waiter's too) ends the row. Calls whose client died while they waited are left out.
    pub fn handoff_starvation(&self, end: SimTime, max_handoffs: usize) -> Option<Starvation> {
        self.handoff_starvation_after(end, max_handoffs, Duration::ZERO)
    }

    /// [`handoff_starvation`](Self::handoff_starvation), counting only hand-offs of holds
    /// that ended once the call had waited `patience`: for a waiter that hears of no release
    /// (it cannot subscribe), which a line lets go first only once it has handed over
    /// locally for a while (queue.rs in the core, courtesy hand-offs).
    pub fn handoff_starvation_after(
        &self,
        end: SimTime,
        max_handoffs: usize,
        patience: Duration,
    ) -> Option<Starvation> {
        let mut holds: Vec<&Interval> = self.intervals().iter().collect();
        holds.sort_by(|a, b| (&a.resource, a.start).cmp(&(&b.resource, b.start)));
        let called = |iv: &Interval| {
            (self.ops().iter().rev())
                .find(|r| (r.client, r.op) == (iv.client, iv.op))
                .map(|r| r.started_at)
        };
        let waiting = (self.ops().iter()).filter(|r| !r.cancelled && !self.cut_short(r));
        for op in waiting {
            let acquired = (holds.iter()).find(|iv| (iv.client, iv.op) == (op.client, op.op));
            let until = match (acquired, op.failed_at) {
                (Some(iv), _) => iv.start,
                (None, Some(failed)) => failed,
                (None, None) => end,
            };
            // A call queued behind a call of its own client (its line in the core) waits for
            // the lock only once that one let go.
            let first_in_line = (holds.iter())
                .filter(|iv| iv.client == op.client && iv.resource == op.resource)
                .filter(|iv| (iv.client, iv.op) != (op.client, op.op))
                .filter(|iv| iv.end > op.started_at && iv.start < until)
                .map(|iv| iv.end)
                .fold(op.started_at, SimTime::max);
            let counted_from = first_in_line.saturating_add(patience);
            let (mut row, mut longest) = (Vec::new(), Vec::new());
            let line = holds.iter().filter(|iv| iv.resource == op.resource);
            for (a, b) in line.clone().zip(line.skip(1)) {
                if b.start >= until {
                    break;
                }
                let local = a.client == b.client && a.client != op.client;
                let queued = called(b).is_some_and(|at| at < a.end);
                if local && queued && a.end > counted_from {
                    row.push((*b).clone());
                    if row.len() > longest.len() {
                        longest.clone_from(&row);
                    }
                } else {
                    row.clear();
                }
            }
            if longest.len() > max_handoffs {
                return Some(Starvation {
                    seed: self.seed(),
                    op: op.clone(),
                    until,
                    freed: longest,
                    bound: Some(max_handoffs),
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
            None if self.op.acquired_after.is_some() => "acquired".to_owned(),
            None => "was still waiting".to_owned(),
        };
        let op = &self.op;
        write!(
            f,
            "seed {}: client {} {} on {:?}, waiting since {}, {how} at {} ",
            self.seed, op.client, op.op, op.resource, op.started_at, self.until
        )?;
        let (times, first) = (self.freed.len(), &self.freed[0]);
        match self.bound {
            Some(bound) => write!(
                f,
                "after client {} handed the lock to its own next call {times} times in a row \
                 meanwhile (bound {bound}; first: {first})",
                first.client
            ),
            None => write!(
                f,
                "although the lock was freed {times} times meanwhile (first: {first})"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use redlock_core::{AcquireFailure, OpId, Resource};

    use super::*;

    fn ms(n: u64) -> SimTime {
        SimTime::from_duration(Duration::from_millis(n))
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

    #[test]
    fn a_waiter_starves_if_another_client_hands_the_lock_to_itself_too_often() {
        let r = Resource::from("r");
        let op = OpId::from_raw;
        let mut c = Checker::new(4);
        // Client 0 holds from 0 to 10 ms; the waiter (client 1, op 1) starts at 5 ms.
        c.started((0, op(1), ms(0)), r.clone(), (None, None));
        c.acquired(0, op(1), (ms(0), ms(500)), None);
        c.started((1, op(1), ms(5)), r.clone(), (None, None));
        // Client 0's next calls, each made while the one ahead held (queued): hand-offs.
        for n in 2..=4u64 {
            c.started((0, op(n), ms(10 * n - 15)), r.clone(), (None, None));
            c.ended(0, op(n - 1), ms(10 * n - 10));
            c.acquired(0, op(n), (ms(10 * n - 10), ms(500)), None);
        }
        // A call made after the one ahead let go is no hand-off of the line.
        c.ended(0, op(4), ms(40));
        c.started((0, op(5), ms(41)), r.clone(), (None, None));
        c.acquired(0, op(5), (ms(42), ms(500)), None);
        c.ended(0, op(5), ms(50));
        assert_eq!(
            c.handoff_starvation(ms(60), 3),
            None,
            "3 hand-offs, bound 3"
        );
        let s = c
            .handoff_starvation(ms(60), 2)
            .expect("3 hand-offs, bound 2");
        assert_eq!((s.op.client, s.freed.len(), s.bound), (1, 3, Some(2)));
        assert!(
            s.to_string()
                .contains("3 times in a row meanwhile (bound 2"),
            "{s}"
        );
        // Only the hand-offs before the waiter acquired count.
        c.acquired(1, op(1), (ms(25), ms(500)), None);
        c.record(1, op(1), |r| r.acquired_after = Some(2));
        assert_eq!(
            c.handoff_starvation(ms(60), 2),
            None,
            "2 hand-offs before 25 ms"
        );
        assert!(c.handoff_starvation(ms(60), 1).is_some());
        // A hold of another client ends the row.
        let mut c = Checker::new(6);
        c.started((1, op(9), ms(1)), r.clone(), (None, None));
        for (n, client) in [(1u64, 0), (2, 0), (3, 0), (4, 2), (5, 0), (6, 0)] {
            c.started((client, op(n), ms(10 * n - 5)), r.clone(), (None, None));
            c.acquired(client, op(n), (ms(10 * n), ms(500)), None);
            c.ended(client, op(n), ms(10 * n + 10));
        }
        assert_eq!(c.handoff_starvation(ms(90), 2), None, "rows of 2 and 1");
        assert!(c.handoff_starvation(ms(90), 1).is_some());
        // Its own client's hand-offs, and cancelled calls, never count.
        let mut c = Checker::new(5);
        for n in 1..=3u64 {
            c.started((0, op(n), ms(0)), r.clone(), (None, None));
        }
        c.acquired(0, op(1), (ms(0), ms(500)), None);
        for n in 2..=3u64 {
            c.ended(0, op(n - 1), ms(10 * n));
            c.acquired(0, op(n), (ms(10 * n), ms(500)), None);
        }
        assert_eq!(c.handoff_starvation(ms(60), 0), None, "one client only");
        c.started((1, op(1), ms(1)), r.clone(), (None, None));
        assert!(c.handoff_starvation(ms(60), 1).is_some());
        c.record(1, op(1), |r| r.cancelled = true);
        assert_eq!(c.handoff_starvation(ms(60), 0), None, "cancelled");
    }
}
