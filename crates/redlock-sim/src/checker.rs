//! The safety checker and the run's records: hold intervals in true time per client and
//! resource, per-operation outcomes, and the overlap check of property (S).
//!
//! The driver reports what each client saw and did; the checker never looks at nodes. An
//! interval starts when a client handles `Acquired` and ends at the earliest of its deadline
//! (moved by every `Extended`, even a late one: the holder counts as continuous), the start
//! of its release or cancel, and `Lost`.
//!
//! Fencing ([`Checker::fencing_violation`]): of two fenced holds of one resource, the one
//! that ended before the other began has the smaller fencing token, and every fenced hold
//! has one.

use std::fmt;

use redlock_core::{AcquireFailure, LostReason, OpId, Resource, Token};

use crate::clock::SimTime;
use crate::linger::Linger;

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
    /// The fencing token the acquisition handed out, if any.
    pub fencing_token: Option<u64>,
}

/// A fenced hold without a token, or two fenced holds of one resource, one after the other,
/// whose tokens do not grow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FencingViolation {
    /// The scenario seed that produced it.
    pub seed: u64,
    /// The earlier hold (or the fenced hold without a token).
    pub earlier: Interval,
    /// The hold that began after `earlier` ended, with a token not above its token; `None`
    /// when `earlier` is a fenced hold without a token.
    pub later: Option<Interval>,
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
    /// Whether the lock options asked for fencing (`None`: they left it to the config).
    pub fenced: Option<bool>,
    /// When the client called `acquire`, in true time.
    pub started_at: SimTime,
    /// When `AcquireFailed` arrived (including after a cancel), in true time.
    pub failed_at: Option<SimTime>,
    /// Attempts made when `Acquired` arrived.
    pub acquired_after: Option<u32>,
    /// Nodes a fenced acquisition raised to its token (the write-back), when it succeeded.
    pub written_back: usize,
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
    /// The value the acquisition stored on the nodes, once acquired.
    pub stored: Option<Token>,
    /// When the first explicit extension was called while more than `N - q` nodes refused
    /// it for good (another type of key under the name; `refusal_watch.rs`).
    pub doomed_extend: Option<SimTime>,
    /// When `Lost` arrived, and why.
    pub lost_at: Option<(SimTime, LostReason)>,
}

/// Records holds and operations, and finds overlaps.
#[derive(Debug, Clone)]
pub struct Checker {
    seed: u64,
    intervals: Vec<Interval>,
    ops: Vec<OpRecord>,
    /// Keys found alive past their release's deadline (`linger.rs`).
    pub(crate) lingers: Vec<Linger>,
}

impl Checker {
    /// An empty record for the scenario `seed`.
    pub fn new(seed: u64) -> Self {
        Self {
            seed,
            intervals: Vec::new(),
            ops: Vec::new(),
            lingers: Vec::new(),
        }
    }

    /// The scenario seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Every hold so far (open ones end at their current deadline).
    pub fn intervals(&self) -> &[Interval] {
        &self.intervals
    }

    /// Every operation started so far.
    pub fn ops(&self) -> &[OpRecord] {
        &self.ops
    }

    /// The first key found on a reachable node past its release's deadline, if any (only
    /// scenarios with [`Scenario::release_linger`](crate::Scenario::release_linger) look).
    pub fn linger(&self) -> Option<&Linger> {
        self.lingers.first()
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

    /// The first fenced hold without a token, else the first pair of holds of one resource
    /// where the earlier ended before the later began and the later's token is not above
    /// the earlier's (holds without a token are left out: they are not fenced).
    pub fn fencing_violation(&self) -> Option<FencingViolation> {
        let violation = |earlier: &Interval, later: Option<&Interval>| FencingViolation {
            seed: self.seed,
            earlier: earlier.clone(),
            later: later.cloned(),
        };
        for iv in &self.intervals {
            let fenced = self
                .ops
                .iter()
                .rev()
                .find(|r| r.client == iv.client && r.op == iv.op);
            if fenced.is_some_and(|r| r.fenced == Some(true)) && iv.fencing_token.is_none() {
                return Some(violation(iv, None));
            }
        }
        let mut fenced: Vec<&Interval> = (self.intervals.iter())
            .filter(|iv| iv.fencing_token.is_some())
            .collect();
        fenced.sort_by(|a, b| (&a.resource, a.start).cmp(&(&b.resource, b.start)));
        for (i, later) in fenced.iter().enumerate() {
            let same = fenced[..i]
                .iter()
                .rev()
                .take_while(|e| e.resource == later.resource);
            for earlier in same {
                let before = earlier.end <= later.start;
                if before && earlier.fencing_token >= later.fencing_token {
                    return Some(violation(earlier, Some(later)));
                }
            }
        }
        None
    }

    pub(crate) fn started(
        &mut self,
        (client, op, at): (usize, OpId, SimTime),
        resource: Resource,
        (token, fenced): (Option<Token>, Option<bool>),
    ) {
        self.ops.push(OpRecord {
            client,
            op,
            resource,
            token,
            fenced,
            started_at: at,
            failed_at: None,
            acquired_after: None,
            written_back: 0,
            failed: None,
            cancelled: false,
            extended: 0,
            lost: false,
            released: false,
            stored: None,
            doomed_extend: None,
            lost_at: None,
        });
    }

    pub(crate) fn acquired(
        &mut self,
        client: usize,
        op: OpId,
        (at, deadline): (SimTime, SimTime),
        fencing_token: Option<u64>,
    ) {
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
            fencing_token,
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

impl fmt::Display for FencingViolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.later {
            None => write!(
                f,
                "seed {}: a fenced hold without a token: {}",
                self.seed, self.earlier
            ),
            Some(later) => write!(
                f,
                "seed {}: fencing tokens do not grow: {} (token {:?}) ended before {} (token {:?})",
                self.seed, self.earlier, self.earlier.fencing_token, later, later.fencing_token
            ),
        }
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
        c.started((0, op, ms(0)), r.clone(), (None, None));
        c.started((1, op, ms(0)), r.clone(), (None, None));
        c.acquired(0, op, (ms(0), ms(100)), None);
        c.ended(0, op, ms(50));
        c.acquired(1, op, (ms(50), ms(150)), None);
        assert_eq!(c.violation(), None, "[0,50) and [50,150) only touch");
        c.started((2, op, ms(0)), r.clone(), (None, None));
        c.acquired(2, op, (ms(140), ms(200)), None);
        let v = c.violation().expect("[50,150) and [140,200) overlap");
        assert_eq!((v.first.client, v.second.client), (1, 2));
        assert!(v.to_string().starts_with("seed 1:"));
    }

    #[test]
    fn a_late_extension_keeps_the_hold_continuous() {
        let (r, op) = (Resource::from("r"), OpId::from_raw(3));
        let mut c = Checker::new(2);
        c.started((0, op, ms(0)), r.clone(), (None, None));
        c.acquired(0, op, (ms(0), ms(100)), None);
        c.started((1, op, ms(0)), r.clone(), (None, None));
        c.acquired(1, op, (ms(120), ms(200)), None);
        c.ended(1, op, ms(130));
        assert_eq!(c.violation(), None);
        c.extended(0, op, ms(300));
        assert!(c.violation().is_some(), "[0,300) now covers [120,130)");
    }

    #[test]
    fn fencing_tokens_must_grow_from_one_hold_to_the_next() {
        let r = Resource::from("r");
        let op = |n| OpId::from_raw(n);
        let mut c = Checker::new(3);
        for (client, fenced) in [(0, true), (1, true), (2, true), (3, false)] {
            c.started((client, op(1), ms(0)), r.clone(), (None, Some(fenced)));
        }
        c.acquired(0, op(1), (ms(0), ms(100)), Some(5));
        c.ended(0, op(1), ms(50));
        c.acquired(3, op(1), (ms(50), ms(60)), None);
        c.acquired(1, op(1), (ms(60), ms(150)), Some(9));
        assert_eq!(
            c.fencing_violation(),
            None,
            "5 then 9; the unfenced hold is left out"
        );
        c.acquired(2, op(1), (ms(200), ms(300)), Some(9));
        let v = c.fencing_violation().expect("9 then 9");
        assert_eq!((v.earlier.client, v.later.map(|l| l.client)), (1, Some(2)));
        let mut c = Checker::new(4);
        c.started((0, op(1), ms(0)), r.clone(), (None, Some(true)));
        c.acquired(0, op(1), (ms(0), ms(100)), None);
        let v = c
            .fencing_violation()
            .expect("a fenced hold without a token");
        assert!(v.later.is_none() && v.to_string().contains("without a token"));
    }
}
