//! What an inspection reports ([`Inspection`], [`KeyState`]) and the pure maths that reads
//! N nodes' keys the way the algorithm would: the value a quorum agrees on, and its
//! remaining validity (the q-th largest remaining ttl among the nodes that agree, less
//! the drift allowance). The shared kinds' keys (readers, a waiting writer, permits) are
//! holders.rs's, and reading their replies reply.rs's; the round trips that gather every
//! key are in `lock/inspect.rs`.

use std::fmt;
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::fault::NodeFault;
use crate::quorum;
use crate::token::Resource;

mod holders;
pub(crate) mod reply;

pub use holders::{
    Agreed, HolderSet, MAX_INSPECTED_HOLDERS, SharedHolders, SharedKeys, SlotHolder,
};

/// What one node holds for a resource, as its `GET` and `PTTL` answered.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyState {
    /// No key: nobody holds the lock on this node.
    Free,
    /// The key holds `value`.
    Held {
        /// The stored value: a holder's token (see [`Token`](crate::Token)).
        value: Bytes,
        /// The remaining time to live; `None` if the key has no expiry (not a key a lock
        /// sets).
        ttl: Option<Duration>,
    },
    /// The node did not answer both reads (down, timed out, refused, wrong key type).
    Failed(NodeFault),
}

impl KeyState {
    /// The stored value, if the key exists.
    pub fn value(&self) -> Option<&Bytes> {
        match self {
            Self::Held { value, .. } => Some(value),
            Self::Free | Self::Failed(_) => None,
        }
    }
}

impl fmt::Display for KeyState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Free => f.write_str("free"),
            Self::Held { value, ttl } => {
                write!(f, "held by {}", String::from_utf8_lossy(value))?;
                match ttl {
                    Some(ttl) => write!(f, " for {} ms", ttl.as_millis()),
                    None => f.write_str(" without expiry"),
                }
            }
            Self::Failed(fault) => write!(f, "failed: {fault}"),
        }
    }
}

/// A read-only look at one resource on every node: who holds it where, whether a quorum
/// agrees on one holder, and how long that holder's lock stays valid; and the same for the
/// shared kinds (docs/kinds.md, "Inspection"): readers, a waiting writer's mark, permit
/// holders and the semaphore's k.
///
/// The reads of a node (`GET` and `PTTL` of the key, then the shared kinds' keys and the
/// node's `TIME`) are pipelined on one connection but are not atomic: a key that expires or
/// changes hands between them on a node is read as its value with the new key's ttl (or
/// none). An inspection is a report for people and for waiting, never a permission to act
/// on the resource: only holding the lock is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inspection {
    /// The resource inspected.
    pub resource: Resource,
    /// What each node holds, indexed by node.
    pub nodes: Vec<KeyState>,
    /// The quorum of the configuration: how many nodes must agree on a holder.
    pub quorum: usize,
    /// The value at least [`quorum`](Self::quorum) nodes hold, if any (at most one can).
    pub holder: Option<Bytes>,
    /// How many nodes hold the most widely held value (0 when every key is free).
    pub agreeing: usize,
    /// The holder's remaining validity when the reads completed: the q-th largest
    /// remaining ttl among the nodes holding its value, less the time the reads took and
    /// the drift allowance. `None` without a holder, or with nothing left.
    pub validity: Option<Duration>,
    /// When the holder's validity ends, on the caller's clock (`None` as for `validity`).
    pub deadline: Option<Instant>,
    /// The shared kinds' keys: readers, a waiting writer's mark, permit holders and the
    /// semaphore's k, per node and what they add up to (boxed: most resources have none,
    /// and an event carries the whole inspection).
    pub shared: Box<SharedHolders>,
}

/// When the reads of an inspection started and completed, on the caller's clock.
pub(crate) type ReadTimes = (Instant, Instant);

/// The timing an inspection's validities are read with: the configured lock ttl, the drift
/// factor and the drift floor (algorithm.md §4).
pub(crate) type ReadTiming = (Duration, f64, Duration);

impl Inspection {
    /// Reads the nodes' keys: the holder a quorum agrees on and its validity, for reads
    /// started at `started` and complete at `done`, and the shared kinds' holders
    /// (holders.rs; `semaphore_quorum` gives a semaphore's quorum for its k). `ttl` is the
    /// configured lock ttl: the drift allowance is that of the longer of it and the largest
    /// (finite) ttl seen, since the holder's ttl is at least what remains of it.
    pub(crate) fn read(
        resource: Resource,
        (nodes, shared): (Vec<KeyState>, Vec<SharedKeys>),
        (quorum, semaphore_quorum): (usize, &dyn Fn(u32) -> usize),
        times: ReadTimes,
        timing: ReadTiming,
    ) -> Self {
        let exclusive = Exclusive::read(&nodes, quorum, times, timing);
        Self {
            resource,
            nodes,
            quorum,
            holder: exclusive
                .holder
                .filter(|_| exclusive.agreeing >= quorum.max(1)),
            agreeing: exclusive.agreeing,
            validity: exclusive.validity,
            deadline: exclusive.deadline,
            shared: Box::new(holders::agree(
                shared,
                (quorum, semaphore_quorum),
                times,
                timing,
            )),
        }
    }
}

/// A string key read on every node (`R`, `R:writer-waiting`): the value held on the most
/// nodes, on how many, and its validity if that is at least a quorum.
pub(crate) struct Exclusive {
    /// The value held on the most nodes (the first such on a tie), quorum or not.
    pub(crate) holder: Option<Bytes>,
    /// On how many nodes.
    pub(crate) agreeing: usize,
    /// Its remaining validity, if it is held on a quorum and time is left.
    pub(crate) validity: Option<Duration>,
    /// When that validity ends (`None` as for `validity`).
    pub(crate) deadline: Option<Instant>,
}

impl Exclusive {
    /// Reads `nodes`' states of one key against `quorum`.
    pub(crate) fn read(
        nodes: &[KeyState],
        quorum: usize,
        times: ReadTimes,
        timing: ReadTiming,
    ) -> Self {
        let (holder, agreeing) = most_held(nodes);
        let (deadline, validity) = match &holder {
            Some(holder) if agreeing >= quorum.max(1) => {
                validity(&agreeing_ttls(nodes, holder), quorum, times, timing)
            }
            _ => (None, None),
        };
        Self {
            holder,
            agreeing,
            validity,
            deadline,
        }
    }
}

/// The deadline and remaining validity of a value held on nodes with remaining times `ttls`
/// (largest first; `Duration::MAX` for no expiry), read at `times`: the q-th largest less
/// the drift allowance, counted from the start of the reads, and what is left of it at
/// their end (algorithm.md §4). `(None, None)` with fewer than `quorum` times, or nothing
/// left.
pub(crate) fn validity(
    ttls: &[Duration],
    quorum: usize,
    (started, done): ReadTimes,
    (ttl, drift_factor, drift_floor): ReadTiming,
) -> (Option<Instant>, Option<Duration>) {
    let Some(&qth) = ttls.get(quorum.max(1) - 1) else {
        return (None, None);
    };
    let finite = ttls.iter().copied().filter(|t| *t != Duration::MAX);
    let longest = finite.max().unwrap_or_default().max(ttl);
    let drift = quorum::drift(longest, drift_factor, drift_floor);
    let deadline = quorum::deadline(started, qth, drift);
    match quorum::validity(deadline, done) {
        Some(validity) => (Some(deadline), Some(validity)),
        None => (None, None),
    }
}

/// The value held on the most nodes, and on how many (the first such value on a tie).
fn most_held(nodes: &[KeyState]) -> (Option<Bytes>, usize) {
    let mut best: (Option<Bytes>, usize) = (None, 0);
    for value in nodes.iter().filter_map(KeyState::value) {
        let count = nodes.iter().filter(|n| n.value() == Some(value)).count();
        if count > best.1 {
            best = (Some(value.clone()), count);
        }
    }
    best
}

/// The remaining ttls of the nodes holding `value`, largest first; a key without expiry
/// counts as the longest possible.
fn agreeing_ttls(nodes: &[KeyState], value: &Bytes) -> Vec<Duration> {
    let mut ttls: Vec<Duration> = (nodes.iter())
        .filter_map(|n| match n {
            KeyState::Held { value: v, ttl } if v == value => Some(ttl.unwrap_or(Duration::MAX)),
            _ => None,
        })
        .collect();
    ttls.sort_unstable_by(|a, b| b.cmp(a));
    ttls
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The inspection of the key R alone on `nodes`, with `quorum`.
    fn mutex(
        nodes: Vec<KeyState>,
        quorum: usize,
        times: ReadTimes,
        timing: ReadTiming,
    ) -> Inspection {
        Inspection::read(
            Resource::from("r"),
            (nodes, vec![]),
            (quorum, &|_| quorum),
            times,
            timing,
        )
    }

    fn held(value: &'static str, ms: u64) -> KeyState {
        KeyState::Held {
            value: Bytes::from_static(value.as_bytes()),
            ttl: Some(Duration::from_millis(ms)),
        }
    }

    #[test]
    fn the_qth_largest_agreeing_ttl_less_elapsed_time_and_drift() {
        let t0 = crate::test_epoch::epoch();
        let done = t0 + Duration::from_millis(5);
        let nodes = vec![
            held("a", 9_000),
            held("a", 7_000),
            held("b", 9_500),
            held("a", 8_000),
            KeyState::Free,
        ];
        let timing = (Duration::from_secs(10), 0.01, Duration::from_millis(2));
        let i = mutex(nodes, 3, (t0, done), timing);
        assert_eq!(i.holder.as_deref(), Some(&b"a"[..]));
        assert_eq!(i.agreeing, 3);
        // q-th (3rd) largest of 9000, 8000, 7000 is 7000; drift of 10 s is 102 ms.
        assert_eq!(i.deadline, Some(t0 + Duration::from_millis(7_000 - 102)));
        assert_eq!(i.validity, Some(Duration::from_millis(7_000 - 102 - 5)));
    }

    #[test]
    fn no_holder_without_a_quorum_and_none_for_nothing_left() {
        let t0 = crate::test_epoch::epoch();
        let timing = (Duration::from_secs(1), 0.01, Duration::from_millis(2));
        let split = vec![held("a", 900), held("b", 900), KeyState::Free];
        let i = mutex(split, 2, (t0, t0), timing);
        assert_eq!((i.holder, i.agreeing, i.validity), (None, 1, None));
        let nearly_gone = vec![held("a", 10), held("a", 5), KeyState::Free];
        let i = mutex(nearly_gone, 2, (t0, t0), timing);
        assert_eq!(i.holder.as_deref(), Some(&b"a"[..]));
        assert_eq!((i.validity, i.deadline), (None, None), "5 ms < 12 ms drift");
        let free = vec![KeyState::Free; 3];
        let i = mutex(free, 2, (t0, t0), timing);
        assert_eq!((i.holder, i.agreeing), (None, 0));
    }

    #[test]
    fn a_key_without_expiry_counts_as_the_longest_and_the_drift_follows_the_longest_ttl() {
        let t0 = crate::test_epoch::epoch();
        let timing = (Duration::from_millis(100), 0.01, Duration::from_millis(2));
        let forever = KeyState::Held {
            value: Bytes::from_static(b"a"),
            ttl: None,
        };
        let nodes = vec![forever, held("a", 60_000), held("a", 50_000)];
        let i = mutex(nodes, 2, (t0, t0), timing);
        // 2nd largest of (unbounded, 60 s, 50 s); drift of the longest finite ttl, 60 s,
        // not of the configured 100 ms.
        assert_eq!(i.validity, Some(Duration::from_millis(60_000 - 602)));
        let nodes = vec![held("a", 60_000), held("a", 50_000), KeyState::Free];
        let i = mutex(nodes, 2, (t0, t0), timing);
        assert_eq!(i.validity, Some(Duration::from_millis(50_000 - 602)));
    }
}
