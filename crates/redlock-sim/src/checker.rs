//! The safety checker and the run's records: hold intervals in true time per client and
//! resource, per-operation outcomes, and the overlap check of property (S).
//!
//! The driver reports what each client saw and did; the checker never looks at nodes. An
//! interval starts when a client handles `Acquired` and ends at the earliest of its deadline
//! (moved by every `Extended`, even a late one: the holder counts as continuous), the start
//! of its release or cancel, and `Lost`.

use std::fmt;

use redlock_core::{AcquireFailure, OpId, Resource, Token};

use crate::clock::SimTime;

/// One client's hold of one resource, in true time: `[start, end)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interval {
    /// The holding client.
    pub client: usize,
    /// The operation (per client).
    pub op: OpId,
    /// The resource held.
    pub resource: Resource,
    /// When the client handled `Acquired`.
    pub start: SimTime,
    /// When the hold ended (see the module docs); the deadline while still open.
    pub end: SimTime,
    /// The true time at which the client's clock reaches the lock's current deadline.
    deadline: SimTime,
    /// Whether the hold was ended by a release, cancel or loss.
    closed: bool,
}

/// Two holds of one resource that overlap: property (S) is broken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The scenario seed that produced it.
    pub seed: u64,
    /// The earlier hold.
    pub first: Interval,
    /// The hold that started before `first` ended.
    pub second: Interval,
}

/// What became of one lock operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpRecord {
    /// The client.
    pub client: usize,
    /// The operation (per client).
    pub op: OpId,
    /// The resource asked for.
    pub resource: Resource,
    /// The caller-supplied token, if any.
    pub token: Option<Token>,
    /// Attempts made when `Acquired` arrived.
    pub acquired_after: Option<u32>,
    /// Why the acquisition failed, if it did (including cancellation).
    pub failed: Option<AcquireFailure>,
    /// The workload cancelled the acquisition.
    pub cancelled: bool,
    /// Successful extensions (explicit or automatic).
    pub extended: u32,
    /// The lock was reported lost.
    pub lost: bool,
    /// `Released` arrived (the operation is over).
    pub released: bool,
}

/// Records holds and operations, and finds overlaps.
#[derive(Debug, Clone)]
pub struct Checker {
    seed: u64,
    intervals: Vec<Interval>,
    ops: Vec<OpRecord>,
}

impl Checker {
    /// An empty record for the scenario `seed`.
    pub fn new(seed: u64) -> Self {
        Self {
            seed,
            intervals: Vec::new(),
            ops: Vec::new(),
        }
    }

    /// Every hold so far (open ones end at their current deadline).
    pub fn intervals(&self) -> &[Interval] {
        &self.intervals
    }

    /// Every operation started so far.
    pub fn ops(&self) -> &[OpRecord] {
        &self.ops
    }

    /// The first pair of overlapping holds on one resource by different operations, if any.
    pub fn violation(&self) -> Option<Violation> {
        let mut sorted: Vec<&Interval> = self.intervals.iter().collect();
        sorted.sort_by(|a, b| (&a.resource, a.start).cmp(&(&b.resource, b.start)));
        for (i, a) in sorted.iter().enumerate() {
            for b in &sorted[i + 1..] {
                if b.resource != a.resource || b.start >= a.end {
                    break;
                }
                if (a.client, a.op) != (b.client, b.op) && a.start < a.end && b.start < b.end {
                    return Some(Violation {
                        seed: self.seed,
                        first: (*a).clone(),
                        second: (*b).clone(),
                    });
                }
            }
        }
        None
    }

    pub(crate) fn started(
        &mut self,
        client: usize,
        op: OpId,
        resource: Resource,
        token: Option<Token>,
    ) {
        self.ops.push(OpRecord {
            client,
            op,
            resource,
            token,
            acquired_after: None,
            failed: None,
            cancelled: false,
            extended: 0,
            lost: false,
            released: false,
        });
    }

    pub(crate) fn acquired(&mut self, client: usize, op: OpId, at: SimTime, deadline: SimTime) {
        let Some(record) = self.op_mut(client, op) else {
            return;
        };
        let resource = record.resource.clone();
        self.intervals.push(Interval {
            client,
            op,
            resource,
            start: at,
            end: deadline,
            deadline,
            closed: false,
        });
    }

    pub(crate) fn record(&mut self, client: usize, op: OpId, f: impl FnOnce(&mut OpRecord)) {
        if let Some(r) = self.op_mut(client, op) {
            f(r);
        }
    }

    /// An extension moved the deadline; the hold stays continuous.
    pub(crate) fn extended(&mut self, client: usize, op: OpId, deadline: SimTime) {
        if let Some(iv) = self.open_mut(client, op) {
            iv.deadline = deadline;
            iv.end = deadline;
        }
    }

    /// The hold ends at `at` (release or cancel started, or the lock was lost), or at its
    /// deadline if that came first.
    pub(crate) fn ended(&mut self, client: usize, op: OpId, at: SimTime) {
        if let Some(iv) = self.open_mut(client, op) {
            iv.end = iv.deadline.min(at);
            iv.closed = true;
        }
    }

    fn op_mut(&mut self, client: usize, op: OpId) -> Option<&mut OpRecord> {
        self.ops
            .iter_mut()
            .rev()
            .find(|r| r.client == client && r.op == op)
    }

    fn open_mut(&mut self, client: usize, op: OpId) -> Option<&mut Interval> {
        self.intervals
            .iter_mut()
            .rev()
            .find(|iv| iv.client == client && iv.op == op && !iv.closed)
    }
}

impl fmt::Display for Interval {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "client {} {} on {:?} held [{}, {})",
            self.client, self.op, self.resource, self.start, self.end
        )
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "seed {}: two holders at once: {} overlaps {}",
            self.seed, self.first, self.second
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> SimTime {
        SimTime::from_duration(std::time::Duration::from_millis(n))
    }

    #[test]
    fn overlaps_are_found_and_touching_holds_are_not() {
        let (r, op) = (Resource::from("r"), OpId::from_raw(0));
        let mut c = Checker::new(1);
        c.started(0, op, r.clone(), None);
        c.started(1, op, r.clone(), None);
        c.acquired(0, op, ms(0), ms(100));
        c.ended(0, op, ms(50));
        c.acquired(1, op, ms(50), ms(150));
        assert_eq!(c.violation(), None, "[0,50) and [50,150) only touch");
        c.started(2, op, r.clone(), None);
        c.acquired(2, op, ms(140), ms(200));
        let v = c.violation().expect("[50,150) and [140,200) overlap");
        assert_eq!((v.first.client, v.second.client), (1, 2));
        assert!(v.to_string().starts_with("seed 1:"));
    }

    #[test]
    fn a_late_extension_keeps_the_hold_continuous() {
        let (r, op) = (Resource::from("r"), OpId::from_raw(3));
        let mut c = Checker::new(2);
        c.started(0, op, r.clone(), None);
        c.acquired(0, op, ms(0), ms(100));
        c.started(1, op, r.clone(), None);
        c.acquired(1, op, ms(120), ms(200));
        c.ended(1, op, ms(130));
        assert_eq!(c.violation(), None);
        c.extended(0, op, ms(300));
        assert!(c.violation().is_some(), "[0,300) now covers [120,130)");
    }
}
