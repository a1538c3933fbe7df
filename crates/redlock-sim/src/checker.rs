//! The safety checker and the run's records: hold intervals in true time per client and
//! resource, per-operation outcomes, and the overlap check of property (S), generalized to
//! the lock kinds (`holds.rs`: exclusive holds and writers exclude each other, a writer
//! excludes readers, at most k permit holders agreeing on k).
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
use std::time::Duration;

use redlock_core::{AcquireFailure, LostReason, OpId, Resource, Token};

use crate::clock::SimTime;
use crate::holds::{Conflict, Hold, HoldKind, conflict, permits_conflict};
use crate::linger::Linger;

/// One client's hold of one resource (or of a multi-lock's set), in true time:
/// `[start, end)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interval {
    /// The holding client.
    pub client: usize,
    /// The operation (per client).
    pub op: OpId,
    /// The resource held (a multi-lock's first).
    pub resource: Resource,
    /// The rest of a multi-lock's set, in order; empty for every other hold.
    pub more: Vec<Resource>,
    /// What kind of hold it is (a mutex's is [`HoldKind::Exclusive`]).
    pub kind: HoldKind,
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

/// Two holds of one resource that overlap and may not (property (S) is broken, or a
/// kind's rule: `holds.rs`), or more permit holders at once than k.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The scenario seed that produced it.
    pub seed: u64,
    /// The earlier hold.
    pub first: Interval,
    /// The hold that started before `first` ended.
    pub second: Interval,
    /// Which rule they broke (two mutex holders: [`Conflict::Exclusive`]).
    pub conflict: Conflict,
    /// Every permit holder at that moment for [`Conflict::OverPermits`], in order of start;
    /// empty otherwise.
    pub holders: Vec<Interval>,
}

/// What became of one lock operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpRecord {
    /// The client.
    pub client: usize,
    /// The operation (per client).
    pub op: OpId,
    /// The resource asked for (a multi-lock's first, in the core's order).
    pub resource: Resource,
    /// The rest of a multi-lock's set, in order; empty for every other call.
    pub more: Vec<Resource>,
    /// The kind of hold asked for (a mutex's is [`HoldKind::Exclusive`]).
    pub kind: HoldKind,
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
    /// The ttl the lock options asked for (`None`: the config's).
    pub ttl: Option<Duration>,
    /// The validity `Acquired` told, once acquired.
    pub validity: Option<Duration>,
}

/// Records holds and operations, and finds overlaps.
#[derive(Debug, Clone)]
pub struct Checker {
    seed: u64,
    intervals: Vec<Interval>,
    ops: Vec<OpRecord>,
    /// Keys found alive past their release's deadline (`linger.rs`).
    pub(crate) lingers: Vec<Linger>,
    /// Clients that died, and when (`death.rs`), in order.
    deaths: Vec<(usize, SimTime)>,
}

impl Checker {
    /// An empty record for the scenario `seed`.
    pub fn new(seed: u64) -> Self {
        Self {
            seed,
            intervals: Vec::new(),
            ops: Vec::new(),
            lingers: Vec::new(),
            deaths: Vec::new(),
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

    /// The clients that died, with the true time of each death, in order. A dead client's
    /// open hold ends at its deadline (its keys stay until they expire), as any hold never
    /// released.
    pub fn deaths(&self) -> &[(usize, SimTime)] {
        &self.deaths
    }

    /// Client `client` died at `at` (true time): its calls still open then never finish.
    pub fn died(&mut self, client: usize, at: SimTime) {
        self.deaths.push((client, at));
    }

    /// Whether `op`'s client died before the call acquired or gave up: a call that never
    /// finished, left out of the liveness and fairness properties (a dead process waits for
    /// nothing).
    pub fn cut_short(&self, op: &OpRecord) -> bool {
        let died = (self.deaths.iter()).find(|(c, _)| *c == op.client);
        died.is_some_and(|(_, at)| {
            let acquired =
                (self.intervals.iter()).find(|iv| (iv.client, iv.op) == (op.client, op.op));
            acquired.is_none_or(|iv| iv.start > *at) && op.failed_at.is_none_or(|f| f > *at)
        })
    }

    /// The first key found on a reachable node past its release's deadline, if any (only
    /// scenarios with [`Scenario::release_linger`](crate::Scenario::release_linger) look).
    pub fn linger(&self) -> Option<&Linger> {
        self.lingers.first()
    }

    /// The first pair of overlapping holds on one resource by different operations that
    /// may not overlap ([`Violation::conflict`]), if any; else the first moment more permit
    /// holders of a resource than k, or holders disagreeing on k, are in place at once.
    /// Touching holds (`[a, b)` and `[b, c)`) do not overlap.
    pub fn violation(&self) -> Option<Violation> {
        self.exclusion_violation()
            .or_else(|| self.permits_violation())
    }

    /// The pairwise rules: for each resource, holds in order of start, each against the
    /// later ones that start before it ends.
    fn exclusion_violation(&self) -> Option<Violation> {
        let mut sorted: Vec<(&Resource, &Interval)> = (self.intervals.iter())
            .filter(|iv| !matches!(iv.kind, HoldKind::Permit(_)))
            .flat_map(|iv| iv.resources().map(move |r| (r, iv)))
            .collect();
        sorted.sort_by(|(r, a), (s, b)| (*r, a.start).cmp(&(*s, b.start)));
        for (i, (resource, a)) in sorted.iter().enumerate() {
            for (other, b) in &sorted[i + 1..] {
                if other != resource || b.start >= a.end {
                    break;
                }
                if !a.overlaps(b) {
                    continue;
                }
                if let Some(conflict) = conflict(a.kind, b.kind) {
                    return Some(self.pair(a, b, conflict));
                }
            }
        }
        None
    }

    /// The semaphore's rules: for each resource, at each permit hold's start, the holds of
    /// other operations still in place with it.
    fn permits_violation(&self) -> Option<Violation> {
        let mut permits: Vec<(&Interval, u32)> = (self.intervals.iter())
            .filter_map(|iv| match iv.kind {
                HoldKind::Permit(k) => Some((iv, k)),
                _ => None,
            })
            .collect();
        permits.sort_by(|(a, _), (b, _)| (&a.resource, a.start).cmp(&(&b.resource, b.start)));
        for (i, (later, k)) in permits.iter().enumerate() {
            let same = permits[..i]
                .iter()
                .filter(|(e, _)| e.resource == later.resource && e.overlaps(later));
            let mut held: Vec<(&Interval, u32)> = same.copied().collect();
            held.push((later, *k));
            let ks: Vec<u32> = held.iter().map(|(_, k)| *k).collect();
            if let Some(conflict) = permits_conflict(&ks) {
                let first = held
                    .iter()
                    .find(|(_, k)| Some(k) != ks.last())
                    .unwrap_or(&held[0]);
                let mut v = self.pair(first.0, later, conflict);
                if matches!(v.conflict, Conflict::OverPermits { .. }) {
                    v.holders = held.iter().map(|(iv, _)| (*iv).clone()).collect();
                }
                return Some(v);
            }
        }
        None
    }

    /// The violation of `conflict` by `first` and `second`.
    fn pair(&self, first: &Interval, second: &Interval, conflict: Conflict) -> Violation {
        Violation {
            seed: self.seed,
            first: first.clone(),
            second: second.clone(),
            conflict,
            holders: Vec::new(),
        }
    }

    /// The first operation told a validity above the ttl its options asked for, if any: the
    /// keys of its hold would outlive the ttl its caller chose, so had it died holding them
    /// the other clients would wait longer than that ttl (docs/design.md, "Hand-over").
    pub fn validity_beyond_ttl(&self) -> Option<&OpRecord> {
        self.ops
            .iter()
            .find(|r| matches!((r.ttl, r.validity), (Some(ttl), Some(v)) if v > ttl))
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

    /// Client `client` called for `hold` at `at` (true time) as operation `op`, with
    /// these token and fencing options. An empty multi-lock set (which the core refuses
    /// before any operation exists) is not recorded.
    pub(crate) fn started(
        &mut self,
        (client, op, at): (usize, OpId, SimTime),
        hold: impl Into<Hold>,
        (token, fenced): (Option<Token>, Option<bool>),
    ) {
        let Some((kind, resource, more)) = hold.into().split() else {
            return;
        };
        self.ops.push(OpRecord {
            client,
            op,
            resource,
            more,
            kind,
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
            ttl: None,
            validity: None,
        });
    }

    /// The operation's acquisition succeeded: a hold of what it asked for (its kind and
    /// resources, as [`started`](Self::started) recorded them), from `at` to `deadline`.
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
        let held = (record.kind, record.resource.clone(), record.more.clone());
        self.push((client, op), (at, deadline), held, fencing_token);
    }

    /// Records a hold of any kind in one call: `hold` says what it holds (a mutex, a
    /// multi-lock's set, a reader, a writer, a permit with its k), from `start` to
    /// `deadline` (moved by [`extended`](Self::extended), ended by [`ended`](Self::ended),
    /// as a mutex's). An empty multi-lock set holds nothing and is not recorded.
    pub fn held(
        &mut self,
        (client, op): (usize, OpId),
        (start, deadline): (SimTime, SimTime),
        hold: Hold,
        fencing_token: Option<u64>,
    ) {
        if let Some(split) = hold.split() {
            self.push((client, op), (start, deadline), split, fencing_token);
        }
    }

    /// Appends an open hold.
    fn push(
        &mut self,
        (client, op): (usize, OpId),
        (start, deadline): (SimTime, SimTime),
        (kind, resource, more): (HoldKind, Resource, Vec<Resource>),
        fencing_token: Option<u64>,
    ) {
        self.intervals.push(Interval {
            client,
            op,
            resource,
            more,
            kind,
            start,
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
    pub fn extended(&mut self, client: usize, op: OpId, deadline: SimTime) {
        if let Some(iv) = self.open_mut(client, op) {
            iv.deadline = deadline;
            iv.end = deadline;
        }
    }

    /// The hold ends at `at` (release or cancel started, or the lock was lost), or at its
    /// deadline if that came first.
    pub fn ended(&mut self, client: usize, op: OpId, at: SimTime) {
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

impl Interval {
    /// Every resource the hold holds: its one resource, or a multi-lock's set.
    pub fn resources(&self) -> impl Iterator<Item = &Resource> {
        std::iter::once(&self.resource).chain(&self.more)
    }

    /// Whether the two holds are of different operations and share some instant (both
    /// non-empty; touching ends do not count).
    fn overlaps(&self, other: &Self) -> bool {
        (self.client, self.op) != (other.client, other.op)
            && self.start < self.end
            && other.start < other.end
            && self.start < other.end
            && other.start < self.end
    }
}

impl fmt::Display for Interval {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "client {} {} on {:?}",
            self.client, self.op, self.resource
        )?;
        for r in &self.more {
            write!(f, "+{r:?}")?;
        }
        match self.kind {
            HoldKind::Exclusive => {}
            HoldKind::Reader => write!(f, " (reader)")?,
            HoldKind::Writer => write!(f, " (writer)")?,
            HoldKind::Permit(k) => write!(f, " (permit of {k})")?,
        }
        write!(f, " held [{}, {})", self.start, self.end)
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
        let (seed, first, second) = (self.seed, &self.first, &self.second);
        match &self.conflict {
            Conflict::Exclusive => write!(
                f,
                "seed {seed}: two holders at once: {first} overlaps {second}"
            ),
            Conflict::WriterAndReader => write!(
                f,
                "seed {seed}: a writer and a reader at once: {first} overlaps {second}"
            ),
            Conflict::PermitsDisagree => write!(
                f,
                "seed {seed}: permit holders disagree on k: {first} overlaps {second}"
            ),
            Conflict::OverPermits { k, holders } => {
                write!(f, "seed {seed}: {holders} permit holders of {k} at once:")?;
                for holder in &self.holders {
                    write!(f, " {holder};")?;
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> SimTime {
        SimTime::from_duration(Duration::from_millis(n))
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
    fn an_acquisition_holds_the_kind_and_set_its_call_asked_for() {
        let (a, b) = (Resource::from("a"), Resource::from("b"));
        let op = OpId::from_raw(1);
        let mut c = Checker::new(4);
        c.started(
            (0, op, ms(0)),
            Hold::Exclusive(vec![a.clone(), b.clone()]),
            (None, None),
        );
        c.started((1, op, ms(0)), Hold::Reader(b.clone()), (None, None));
        c.started((2, op, ms(0)), b.clone(), (None, None));
        assert_eq!(
            (c.ops()[0].kind, &c.ops()[0].more),
            (HoldKind::Exclusive, &vec![b.clone()])
        );
        assert_eq!(c.ops()[1].kind, HoldKind::Reader);
        c.acquired(0, op, (ms(0), ms(100)), None);
        c.acquired(1, op, (ms(10), ms(100)), None);
        assert_eq!(c.violation(), None, "a multi-lock ignores readers");
        c.acquired(2, op, (ms(20), ms(100)), None);
        let v = c
            .violation()
            .expect("the mutex of b overlaps the set {a, b}");
        assert_eq!(
            (v.first.client, v.second.client, v.conflict),
            (0, 2, Conflict::Exclusive)
        );
        assert_eq!(v.first.more, vec![b]);
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

    /// A checker holding `holds`, each `(client, [start, end), hold)` of operation 0.
    fn holding(holds: Vec<(usize, (u64, u64), Hold)>) -> Checker {
        let mut c = Checker::new(9);
        for (client, (start, end), hold) in holds {
            c.held(
                (client, OpId::from_raw(0)),
                (ms(start), ms(end)),
                hold,
                None,
            );
        }
        c
    }

    fn mutex(r: &str) -> Hold {
        Hold::Exclusive(vec![Resource::from(r)])
    }

    fn multi(rs: &[&str]) -> Hold {
        Hold::Exclusive(rs.iter().map(|r| Resource::from(*r)).collect())
    }

    fn permit(r: &str, k: u32) -> Hold {
        Hold::Permit {
            resource: Resource::from(r),
            k,
        }
    }

    #[test]
    fn multi_locks_exclude_each_other_and_mutexes_on_any_shared_resource() {
        let apart = holding(vec![
            (0, (0, 100), multi(&["a", "b"])),
            (1, (0, 100), multi(&["c", "d"])),
            (2, (0, 100), mutex("e")),
        ]);
        assert_eq!(apart.violation(), None, "disjoint sets");
        let shared = holding(vec![
            (0, (0, 100), multi(&["a", "b"])),
            (1, (50, 150), multi(&["b", "c"])),
        ]);
        let v = shared.violation().expect("both hold b in [50, 100)");
        assert_eq!(
            (v.first.client, v.second.client, v.conflict.clone()),
            (0, 1, Conflict::Exclusive)
        );
        assert!(
            v.to_string().contains(r#"Resource("a")+Resource("b")"#),
            "{v}"
        );
        let with_mutex = holding(vec![
            (0, (0, 100), multi(&["a", "b"])),
            (1, (99, 150), mutex("b")),
        ]);
        assert!(
            with_mutex.violation().is_some(),
            "a mutex is a one-resource set"
        );
        let touching = holding(vec![
            (0, (0, 100), multi(&["a", "b"])),
            (1, (100, 150), multi(&["b"])),
            (2, (150, 150), mutex("a")),
        ]);
        assert_eq!(
            touching.violation(),
            None,
            "[0,100) and [100,150) only touch"
        );
        let mut empty = holding(vec![(0, (0, 100), multi(&[]))]);
        assert!(empty.intervals().is_empty(), "an empty set holds nothing");
        empty.held((1, OpId::from_raw(0)), (ms(0), ms(9)), mutex("a"), None);
        assert_eq!(empty.violation(), None);
    }

    #[test]
    fn a_writer_excludes_readers_and_writers_and_readers_share() {
        let (r, w) = (
            || Hold::Reader(Resource::from("r")),
            || Hold::Writer(Resource::from("r")),
        );
        let readers = holding(vec![
            (0, (0, 100), r()),
            (1, (10, 90), r()),
            (2, (20, 30), r()),
        ]);
        assert_eq!(readers.violation(), None, "readers share");
        let writer_reader = holding(vec![(0, (0, 100), r()), (1, (99, 150), w())]);
        let v = writer_reader.violation().expect("a writer among readers");
        assert_eq!(v.conflict, Conflict::WriterAndReader);
        assert!(v.to_string().contains("a writer and a reader"), "{v}");
        let after = holding(vec![
            (0, (0, 100), r()),
            (1, (100, 150), w()),
            (2, (150, 200), r()),
        ]);
        assert_eq!(after.violation(), None, "touching only");
        let writers = holding(vec![(0, (0, 100), w()), (1, (50, 60), w())]);
        assert_eq!(
            writers.violation().map(|v| v.conflict),
            Some(Conflict::Exclusive)
        );
        let writer_mutex = holding(vec![(0, (0, 100), w()), (1, (50, 60), mutex("r"))]);
        assert!(
            writer_mutex.violation().is_some(),
            "a writer holds R as a mutex does"
        );
        let reader_mutex = holding(vec![(0, (0, 100), r()), (1, (50, 60), mutex("r"))]);
        assert_eq!(
            reader_mutex.violation(),
            None,
            "a mutex does not look at readers"
        );
        let elsewhere = holding(vec![
            (0, (0, 100), r()),
            (1, (0, 100), Hold::Writer(Resource::from("s"))),
        ]);
        assert_eq!(elsewhere.violation(), None);
    }

    #[test]
    fn at_most_k_permit_holders_at_once_all_agreeing_on_k() {
        let two = holding(vec![
            (0, (0, 100), permit("s", 2)),
            (1, (10, 100), permit("s", 2)),
            (2, (100, 200), permit("s", 2)),
            (3, (0, 100), permit("t", 2)),
            (4, (0, 100), mutex("s")),
        ]);
        assert_eq!(
            two.violation(),
            None,
            "two of two; the third starts as they end"
        );
        let three = holding(vec![
            (0, (0, 100), permit("s", 2)),
            (1, (10, 100), permit("s", 2)),
            (2, (99, 200), permit("s", 2)),
        ]);
        let v = three.violation().expect("three of two in [99, 100)");
        assert_eq!(v.conflict, Conflict::OverPermits { k: 2, holders: 3 });
        let clients: Vec<usize> = v.holders.iter().map(|h| h.client).collect();
        assert_eq!(clients, [0, 1, 2]);
        assert!(v.to_string().contains("3 permit holders of 2"), "{v}");
        let disagree = holding(vec![
            (0, (0, 100), permit("s", 3)),
            (1, (50, 60), permit("s", 2)),
        ]);
        let v = disagree.violation().expect("k = 3 and k = 2 at once");
        assert_eq!(
            (v.conflict, v.first.client, v.second.client),
            (Conflict::PermitsDisagree, 0, 1)
        );
        let in_turn = holding(vec![
            (0, (0, 100), permit("s", 3)),
            (1, (100, 160), permit("s", 1)),
        ]);
        assert_eq!(in_turn.violation(), None, "another k once the holders left");
    }

    #[test]
    fn an_extension_and_an_end_move_any_kind_of_hold() {
        let op = OpId::from_raw(0);
        let mut c = holding(vec![(0, (0, 100), Hold::Reader(Resource::from("r")))]);
        c.held(
            (1, op),
            (ms(150), ms(200)),
            Hold::Writer(Resource::from("r")),
            None,
        );
        assert_eq!(c.violation(), None);
        c.extended(0, op, ms(160));
        assert_eq!(
            c.violation().map(|v| v.conflict),
            Some(Conflict::WriterAndReader)
        );
        c.ended(0, op, ms(150));
        assert_eq!(c.violation(), None, "released as the writer came in");
    }
}
