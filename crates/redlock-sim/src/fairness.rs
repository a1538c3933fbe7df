//! The fairness property of the waiters' queue (docs/design.md, "The waiters' queue"): the
//! queue serves the waiters of all processes first come, first served, within the clock
//! error. A lock call that waited (it did not acquire at its first attempt) is *overtaken*
//! by a call of another client on the same resource that began more than a slack after it
//! and acquired before it did (or before it gave up, or the run ended).
//!
//! The slack is the scenario's to choose: the clock error (a place's ticket is the node's
//! wall clock when the place was taken) and the time from a call's start to the attempt
//! that takes its place. Overtakers come in two sorts, counted apart:
//! - *waiters*, calls that did not acquire at their first attempt either: they went
//!   through the queue (or raced for the lock as the A did), so each one that acquired
//!   first broke the queue's order. The property ([`Checker::unfairness`]) bounds these.
//! - *newcomers*, calls that acquired at their first attempt: a plain `SET NX` that landed
//!   while the key was free, in the gap between a release and the head's grant. The queue
//!   does not order them (the first attempt does not read it), so they are reported
//!   ([`Overtaken::newcomers`], [`Checker::overtakes`]) and not bounded.
//!
//! Like [`Checker::starvation`], this reads the checker's records only; calls whose client
//! died while they waited ([`Checker::cut_short`]) and cancelled calls are left out.

use std::fmt;
use std::time::Duration;

use crate::checker::{Checker, OpRecord};
use crate::clock::SimTime;
use crate::holds::HoldKind;

/// A waiting mutex call overtaken more often than a bound.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overtaken {
    /// The scenario seed that produced it.
    pub seed: u64,
    /// The call that waited.
    pub op: OpRecord,
    /// The waiters of other clients that began more than `slack` after it and acquired
    /// first.
    pub by: Vec<OpRecord>,
    /// How many newcomers (calls that acquired at their first attempt) of other clients
    /// that began more than `slack` after it acquired first too.
    pub newcomers: usize,
    /// The slack a later call needed to count.
    pub slack: Duration,
    /// The bound it broke.
    pub bound: usize,
}

impl Checker {
    /// For each mutex call that waited (it did not acquire at its first attempt: it
    /// acquired later, gave up, or still waited at `end`, the true time the run stopped),
    /// the calls of other clients on its resource that began more than `slack` after it
    /// and acquired before it acquired, gave up or `end`; in the order calls began.
    pub fn overtakes(&self, end: SimTime, slack: Duration) -> Vec<(&OpRecord, Vec<&OpRecord>)> {
        let acquired = |r: &OpRecord| {
            (self.intervals().iter())
                .find(|iv| (iv.client, iv.op) == (r.client, r.op))
                .map(|iv| iv.start)
        };
        let waited = (self.ops().iter())
            .filter(|r| r.kind == HoldKind::Exclusive && r.more.is_empty())
            .filter(|r| waited(r) && !r.cancelled && !self.cut_short(r));
        let mut out = Vec::new();
        for a in waited {
            let until = acquired(a).or(a.failed_at).unwrap_or(end);
            let later = a.started_at.saturating_add(slack);
            let by: Vec<&OpRecord> = (self.ops().iter())
                .filter(|b| b.client != a.client && b.resource == a.resource)
                .filter(|b| b.started_at > later)
                .filter(|b| acquired(b).is_some_and(|at| at < until))
                .collect();
            out.push((a, by));
        }
        out
    }

    /// The first waiting call (in the order calls began) overtaken by more than `bound`
    /// waiters, calls that did not acquire at their first attempt either (see
    /// [`overtakes`](Self::overtakes) and the module docs), if any.
    pub fn unfairness(&self, end: SimTime, slack: Duration, bound: usize) -> Option<Overtaken> {
        self.overtaken_past(end, slack, bound, waited)
    }

    /// The first waiting call overtaken by more than `bound` calls of other clients, waiters
    /// and newcomers alike (see [`overtakes`](Self::overtakes)), if any: the property of
    /// clients whose lines hand the lock from call to call, where a line that hears of a
    /// waiter late lets calls that came after it pass (docs/design.md, "Hearing of
    /// waiters").
    pub fn overtaken_by_calls(
        &self,
        end: SimTime,
        slack: Duration,
        bound: usize,
    ) -> Option<Overtaken> {
        self.overtaken_past(end, slack, bound, |_| true)
    }

    /// The first waiting call overtaken by more than `bound` of the calls `counts` accepts.
    fn overtaken_past(
        &self,
        end: SimTime,
        slack: Duration,
        bound: usize,
        counts: fn(&OpRecord) -> bool,
    ) -> Option<Overtaken> {
        let (op, by) = (self.overtakes(end, slack).into_iter())
            .find(|(_, by)| by.iter().filter(|b| counts(b)).count() > bound)?;
        let (waiters, newcomers): (Vec<&OpRecord>, Vec<&OpRecord>) =
            by.into_iter().partition(|b| waited(b));
        Some(Overtaken {
            seed: self.seed(),
            op: op.clone(),
            by: waiters.into_iter().cloned().collect(),
            newcomers: newcomers.len(),
            slack,
            bound,
        })
    }
}

/// The longest time a resource was free while a call waited for it (see
/// [`Checker::idle_while_waiting`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Idle {
    /// The scenario seed that produced it.
    pub seed: u64,
    /// The call that waited.
    pub op: OpRecord,
    /// When the resource was free from, in true time.
    pub from: SimTime,
    /// For how long.
    pub gap: Duration,
}

impl Checker {
    /// The longest stretch of true time during which no one held a resource while a mutex
    /// call that waited for it (it did not acquire at its first attempt) still waited: a
    /// waiter that was not told its turn came, and the lock sat free. Calls whose client
    /// died while they waited and cancelled calls are left out; `end` is when the run
    /// stopped.
    pub fn idle_while_waiting(&self, end: SimTime) -> Option<Idle> {
        self.idle_beyond(end, Duration::ZERO)
    }

    /// [`idle_while_waiting`](Self::idle_while_waiting), leaving out a stretch of at most
    /// `courtesy` that began when the waiting call's own client let go: a line's courtesy
    /// hand-off (the core's queue.rs), whose next call waits the retry policy's longest delay
    /// on purpose, so that a waiter of another client that hears of nothing and is not in the
    /// waiters' queue finds the lock free at its next try. A waiter of another client is
    /// never left out.
    pub fn idle_while_waiting_but_courtesy(
        &self,
        end: SimTime,
        courtesy: Duration,
    ) -> Option<Idle> {
        self.idle_beyond(end, courtesy)
    }

    fn idle_beyond(&self, end: SimTime, courtesy: Duration) -> Option<Idle> {
        let mut worst: Option<Idle> = None;
        let waited = (self.ops().iter())
            .filter(|r| r.kind == HoldKind::Exclusive && r.more.is_empty())
            .filter(|r| waited(r) && !r.cancelled && !self.cut_short(r));
        for op in waited {
            let acquired = (self.intervals().iter())
                .find(|iv| (iv.client, iv.op) == (op.client, op.op))
                .map(|iv| iv.start);
            let until = acquired.or(op.failed_at).unwrap_or(end);
            let mut holds: Vec<(SimTime, SimTime, usize)> = (self.intervals().iter())
                .filter(|iv| iv.resource == op.resource)
                .map(|iv| (iv.start, iv.end, iv.client))
                .collect();
            holds.sort();
            let mut free_from = op.started_at;
            // Whether the stretch from `free_from` began with a hold of the call's client.
            let mut own = (holds.iter())
                .filter(|&&(_, stop, _)| stop <= free_from)
                .max_by_key(|&&(_, stop, _)| stop)
                .is_some_and(|&(_, _, client)| client == op.client);
            let mut longest = (Duration::ZERO, free_from);
            let mut stretch = |from: SimTime, to: SimTime, own: bool| {
                let gap = to.saturating_sub(from);
                if !(own && gap <= courtesy) {
                    longest = longest.max((gap, from));
                }
            };
            for (start, stop, client) in holds {
                if start >= until {
                    break;
                }
                if start > free_from {
                    stretch(free_from, start, own);
                }
                if stop > free_from {
                    free_from = stop;
                    own = client == op.client;
                }
            }
            if until > free_from {
                stretch(free_from, until, own);
            }
            if worst.as_ref().is_none_or(|w| longest.0 > w.gap) {
                worst = Some(Idle {
                    seed: self.seed(),
                    op: op.clone(),
                    from: longest.1,
                    gap: longest.0,
                });
            }
        }
        worst
    }
}

impl fmt::Display for Idle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = &self.op;
        write!(
            f,
            "seed {}: {:?} was free for {:?} from {} while client {} {} waited for it (since {})",
            self.seed, op.resource, self.gap, self.from, op.client, op.op, op.started_at
        )
    }
}

/// Whether the call did not acquire at its first attempt (it acquired later, or never).
pub(crate) fn waited(op: &OpRecord) -> bool {
    op.acquired_after != Some(1)
}

impl fmt::Display for Overtaken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = &self.op;
        write!(
            f,
            "seed {}: client {} {} on {:?}, waiting since {}, was overtaken by {} waiters (bound \
             {}) and {} newcomers of other clients that began over {:?} after it",
            self.seed,
            op.client,
            op.op,
            op.resource,
            op.started_at,
            self.by.len(),
            self.bound,
            self.newcomers,
            self.slack,
        )?;
        match self.by.first() {
            Some(first) => write!(
                f,
                "; the first waiter: client {} at {}",
                first.client, first.started_at
            ),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use redlock_core::{OpId, Resource};

    use super::*;

    fn ms(n: u64) -> SimTime {
        SimTime::from_duration(Duration::from_millis(n))
    }

    #[test]
    fn a_waiter_is_overtaken_by_later_calls_of_other_clients_that_acquire_first() {
        let (r, op) = (Resource::from("r"), OpId::from_raw);
        let mut c = Checker::new(3);
        // Client 0 holds from 0 to 100 ms; client 1 waits from 10 ms on.
        c.started((0, op(1), ms(0)), r.clone(), (None, None));
        c.acquired(0, op(1), (ms(0), ms(500)), None);
        c.record(0, op(1), |r| r.acquired_after = Some(1));
        c.ended(0, op(1), ms(100));
        c.started((1, op(1), ms(10)), r.clone(), (None, None));
        // A waiter of client 2 from 15 ms, a newcomer of client 0 at 30 ms, a waiter of
        // client 2 at 40 ms: (client, op, start, acquired, attempts).
        for (client, n, start, at, attempts) in
            [(2, 1, 15, 100, 3), (0, 2, 30, 150, 1), (2, 2, 40, 200, 2)]
        {
            c.started((client, op(n), ms(start)), r.clone(), (None, None));
            c.acquired(client, op(n), (ms(at), ms(at + 50)), None);
            c.record(client, op(n), |r| r.acquired_after = Some(attempts));
            c.ended(client, op(n), ms(at + 50));
        }
        let slack = Duration::from_millis(10);
        let counts = |c: &Checker, slack| -> Vec<usize> {
            (c.overtakes(ms(300), slack).iter())
                .map(|(_, by)| by.len())
                .collect()
        };
        assert_eq!(
            counts(&c, slack),
            [2, 0, 0],
            "the 15 ms waiter is within the slack"
        );
        assert!(
            c.unfairness(ms(300), slack, 0).is_some(),
            "the 40 ms waiter, still waiting"
        );
        c.acquired(1, op(1), (ms(180), ms(400)), None);
        c.record(1, op(1), |r| r.acquired_after = Some(4));
        assert_eq!(counts(&c, slack), [1, 0, 0], "the newcomer only, by 180 ms");
        assert_eq!(
            c.unfairness(ms(300), slack, 0),
            None,
            "newcomers are not bounded"
        );
        let o = (c.unfairness(ms(300), Duration::ZERO, 0)).expect("the 15 ms waiter counts");
        assert_eq!((o.op.client, o.by.len(), o.newcomers), (1, 1, 1));
        assert!(
            o.to_string()
                .contains("overtaken by 1 waiters (bound 0) and 1 newcomers"),
            "{o}"
        );
        // A waiter whose client died is left out.
        let mut dead = Checker::new(3);
        dead.started((1, op(1), ms(10)), r.clone(), (None, None));
        dead.started((2, op(1), ms(40)), r.clone(), (None, None));
        dead.acquired(2, op(1), (ms(50), ms(90)), None);
        dead.record(2, op(1), |r| r.acquired_after = Some(2));
        assert!(dead.unfairness(ms(300), slack, 0).is_some());
        dead.died(1, ms(45));
        assert_eq!(dead.unfairness(ms(300), slack, 0), None);
    }
}
