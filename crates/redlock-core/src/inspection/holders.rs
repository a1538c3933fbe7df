//! The shared kinds in an inspection (docs/kinds.md, "Inspection"): what one node holds in
//! a resource's readers, waiting-writer and permits keys ([`SharedKeys`]), and the pure
//! maths that reads N nodes' holders the way the algorithm would: a reader or permit holder
//! holds where it is live on at least its kind's quorum of nodes, for the q-th largest of
//! its remaining times less the drift allowance. Reading the nodes' replies into these is
//! reply.rs's.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;

use super::{Exclusive, KeyState, ReadTimes, ReadTiming, validity};
use crate::fault::NodeFault;

/// At most this many members of each sorted set of holders are read from a node
/// (`ZREVRANGE key 0 99 WITHSCORES`, latest deadline first): a set may be huge or hostile.
/// [`HolderSet::Read`]'s `more` counts the members left unread that may still be live.
pub const MAX_INSPECTED_HOLDERS: usize = 100;

/// One live member of a sorted set of holders on one node: a reader (`R:readers`) or a
/// permit holder (`R:permits`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SlotHolder {
    /// The holder's token, as stored (the member).
    pub token: Bytes,
    /// What is left until its deadline (the member's score) on the node's own clock, as its
    /// `TIME` answered; always more than zero (an expired member holds nothing).
    pub remaining: Duration,
}

/// What one node holds in one sorted set of holders (`R:readers` or `R:permits`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum HolderSet {
    /// The node answered its reads.
    Read {
        /// The live holders read, latest deadline first (at most
        /// [`MAX_INSPECTED_HOLDERS`]); expired members not yet pruned are left out.
        holders: Vec<SlotHolder>,
        /// How many members were left unread beyond the cap that may still be live (0 when
        /// the last one read had expired: the others expire no later).
        more: u64,
    },
    /// The node failed a read of the set or of its clock, or answered nonsense.
    Failed(NodeFault),
}

impl HolderSet {
    /// The live holders read (none for a failed node).
    pub fn holders(&self) -> &[SlotHolder] {
        match self {
            Self::Read { holders, .. } => holders,
            Self::Failed(_) => &[],
        }
    }

    /// Whether the node answered with nothing: no live holder, none unread.
    pub fn is_empty(&self) -> bool {
        matches!(self, Self::Read { holders, more: 0 } if holders.is_empty())
    }
}

/// What one node holds in a resource's keys of the shared kinds (docs/kinds.md, "Keys of a
/// resource").
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SharedKeys {
    /// The readers (`R:readers`).
    pub readers: HolderSet,
    /// A waiting writer's mark (`R:writer-waiting`: its token, for its patience).
    pub writer_waiting: KeyState,
    /// The permit holders (`R:permits`).
    pub permits: HolderSet,
    /// The semaphore's k (`R:permits:limit`); `None` without the key, or when the permits
    /// could not be read.
    pub permits_limit: Option<u32>,
}

/// A token as the nodes see it together: on how many nodes it is live, and how long it
/// stays valid where that is a quorum.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Agreed {
    /// The holder's (or waiting writer's) token.
    pub token: Bytes,
    /// On how many nodes it is live.
    pub nodes: usize,
    /// Its remaining validity when the reads completed: the q-th largest remaining time
    /// among those nodes, less the time the reads took and the drift allowance. `None`
    /// below the quorum, or with nothing left.
    pub validity: Option<Duration>,
}

/// The shared kinds' keys of a resource on every node, and what they add up to: the
/// readers and permit holders that hold (each on at least its kind's quorum of nodes), the
/// waiting writer's mark, and the semaphore's k ([`Inspection::shared`](super::Inspection::shared)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SharedHolders {
    /// What each node holds, indexed by node.
    pub nodes: Vec<SharedKeys>,
    /// The readers live on at least the configuration's quorum of nodes: those that hold
    /// the resource for reading, most widely held first.
    pub readers: Vec<Agreed>,
    /// The waiting writer's mark held on the most nodes, if any node holds one, with on
    /// how many (below a quorum too: while a mark lives on a node, no new reader gets in
    /// there). Its validity is that of a mark on a quorum.
    pub writer_waiting: Option<Agreed>,
    /// The permit holders live on at least [`permits_quorum`](Self::permits_quorum) nodes:
    /// those that hold one of the semaphore's permits, most widely held first.
    pub permits: Vec<Agreed>,
    /// The semaphore's k as most nodes that hold one say (`R:permits:limit`), if any does.
    pub permits_limit: Option<u32>,
    /// How many nodes a permit holder needs: the semaphore's quorum for
    /// [`permits_limit`](Self::permits_limit)
    /// ([`LockKind::quorum`](crate::LockKind::quorum)); every node when k is not known (the
    /// most any k needs).
    pub permits_quorum: usize,
}

/// Reads the nodes' shared keys, `quorum` being the configuration's: readers on at least
/// `quorum` nodes, the most widely held waiting mark, and permit holders on at least
/// `semaphore_quorum(k)` nodes for the k most nodes hold (the caller's
/// [`LockKind::quorum`](crate::LockKind::quorum); all nodes if no node holds a k).
pub(crate) fn agree(
    shared: Vec<SharedKeys>,
    (quorum, semaphore_quorum): (usize, &dyn Fn(u32) -> usize),
    times: ReadTimes,
    timing: ReadTiming,
) -> SharedHolders {
    let n = shared.len();
    let readers = on_quorum(shared.iter().map(|s| &s.readers), quorum, times, timing);
    let marks: Vec<KeyState> = shared.iter().map(|s| s.writer_waiting.clone()).collect();
    let mark = Exclusive::read(&marks, quorum, times, timing);
    let writer_waiting = mark.holder.map(|token| Agreed {
        token,
        nodes: mark.agreeing,
        validity: mark.validity,
    });
    let permits_limit = most_common(shared.iter().filter_map(|s| s.permits_limit));
    let permits_quorum = match permits_limit {
        Some(k) => semaphore_quorum(k),
        None => n,
    };
    let permits = on_quorum(
        shared.iter().map(|s| &s.permits),
        permits_quorum,
        times,
        timing,
    );
    SharedHolders {
        nodes: shared,
        readers,
        writer_waiting,
        permits,
        permits_limit,
        permits_quorum,
    }
}

/// The tokens live on at least `quorum` of the nodes' sets, each with its validity; most
/// widely held first, then by token.
fn on_quorum<'a>(
    sets: impl Iterator<Item = &'a HolderSet>,
    quorum: usize,
    times: ReadTimes,
    timing: ReadTiming,
) -> Vec<Agreed> {
    // A token is a member at most once per node's set, so its list has one time per node.
    let mut seen: BTreeMap<&Bytes, Vec<Duration>> = BTreeMap::new();
    for set in sets {
        for holder in set.holders() {
            seen.entry(&holder.token)
                .or_default()
                .push(holder.remaining);
        }
    }
    let mut agreed: Vec<Agreed> = (seen.into_iter())
        .filter(|(_, left)| left.len() >= quorum.max(1))
        .map(|(token, mut remaining)| {
            remaining.sort_unstable_by(|a, b| b.cmp(a));
            Agreed {
                token: token.clone(),
                nodes: remaining.len(),
                validity: validity(&remaining, quorum, times, timing).1,
            }
        })
        .collect();
    agreed.sort_by(|a, b| b.nodes.cmp(&a.nodes).then_with(|| a.token.cmp(&b.token)));
    agreed
}

/// The value given most often (the largest such on a tie), if any.
fn most_common(values: impl Iterator<Item = u32>) -> Option<u32> {
    let mut counts: BTreeMap<u32, usize> = BTreeMap::new();
    for value in values {
        *counts.entry(value).or_default() += 1;
    }
    // `max_by_key` keeps the last maximum: the largest value among equal counts.
    counts
        .into_iter()
        .max_by_key(|(_, count)| *count)
        .map(|(value, _)| value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(holders: &[(&'static str, u64)]) -> HolderSet {
        HolderSet::Read {
            holders: (holders.iter())
                .map(|&(t, ms)| SlotHolder {
                    token: Bytes::from_static(t.as_bytes()),
                    remaining: Duration::from_millis(ms),
                })
                .collect(),
            more: 0,
        }
    }

    fn node(readers: HolderSet, permits: HolderSet, limit: Option<u32>) -> SharedKeys {
        SharedKeys {
            readers,
            writer_waiting: KeyState::Free,
            permits,
            permits_limit: limit,
        }
    }

    /// The semaphore's quorum on `n` nodes with the configuration's `q`.
    fn sem(n: usize, q: usize) -> impl Fn(u32) -> usize {
        move |k| crate::LockKind::semaphore(k).quorum(n, q)
    }

    const TIMING: ReadTiming = (Duration::from_secs(10), 0.01, Duration::from_millis(2));

    #[test]
    fn readers_on_a_quorum_hold_for_the_qth_largest_remaining_time() {
        let t0 = crate::test_epoch::epoch();
        let done = t0 + Duration::from_millis(3);
        let empty = || set(&[]);
        let nodes = [
            node(set(&[("a", 9_000), ("b", 5_000)]), empty(), None),
            node(set(&[("a", 8_000), ("b", 4_000)]), empty(), None),
            node(set(&[("a", 7_000)]), empty(), None),
            node(HolderSet::Failed(NodeFault::Timeout), empty(), None),
            node(set(&[("c", 9_000)]), empty(), None),
        ];
        let h = agree(nodes.to_vec(), (3, &sem(5, 3)), (t0, done), TIMING);
        // "b" on 2 of 5 and "c" on 1 hold nothing; "a": 3rd largest 7000, drift 102 ms.
        let a = Agreed {
            token: Bytes::from_static(b"a"),
            nodes: 3,
            validity: Some(Duration::from_millis(7_000 - 102 - 3)),
        };
        assert_eq!(h.readers, [a]);
        assert_eq!(
            (h.permits.len(), h.permits_limit, h.permits_quorum),
            (0, None, 5)
        );
        assert_eq!(h.writer_waiting, None);
    }

    #[test]
    fn permit_holders_need_the_semaphores_quorum_for_the_k_most_nodes_hold() {
        let t0 = crate::test_epoch::epoch();
        let two = || set(&[("p", 5_000), ("q", 5_000)]);
        let only_p = || set(&[("p", 5_000)]);
        // k = 2 on 5 nodes needs 4 (floor(10/3) + 1): "p" on 4 holds, "q" on 3 does not.
        let mut nodes: Vec<SharedKeys> = (0..3).map(|_| node(set(&[]), two(), Some(2))).collect();
        nodes.push(node(set(&[]), only_p(), Some(2)));
        nodes.push(node(set(&[]), set(&[]), Some(3)));
        let h = agree(nodes.to_vec(), (3, &sem(5, 3)), (t0, t0), TIMING);
        assert_eq!((h.permits_limit, h.permits_quorum), (Some(2), 4));
        let tokens: Vec<&[u8]> = h.permits.iter().map(|a| &a.token[..]).collect();
        assert_eq!(tokens, [b"p"]);
        assert_eq!(
            h.permits[0].validity,
            Some(Duration::from_millis(5_000 - 102))
        );
        // No k anywhere: every node is needed.
        let nodes: Vec<SharedKeys> = (0..3).map(|_| node(set(&[]), only_p(), None)).collect();
        let h = agree(nodes.to_vec(), (2, &sem(3, 2)), (t0, t0), TIMING);
        assert_eq!((h.permits_quorum, h.permits.len()), (3, 1));
    }

    #[test]
    fn the_waiting_mark_is_reported_below_a_quorum_with_no_validity() {
        let t0 = crate::test_epoch::epoch();
        let marked = KeyState::Held {
            value: Bytes::from_static(b"w"),
            ttl: Some(Duration::from_millis(4_000)),
        };
        let mut nodes: Vec<SharedKeys> = (0..3).map(|_| node(set(&[]), set(&[]), None)).collect();
        nodes[1].writer_waiting = marked.clone();
        let h = agree(nodes.to_vec(), (2, &sem(3, 2)), (t0, t0), TIMING);
        let w = h.writer_waiting.expect("a mark");
        assert_eq!((&w.token[..], w.nodes, w.validity), (&b"w"[..], 1, None));
        nodes[2].writer_waiting = marked;
        let w = agree(nodes.to_vec(), (2, &sem(3, 2)), (t0, t0), TIMING)
            .writer_waiting
            .unwrap();
        assert_eq!(w.validity, Some(Duration::from_millis(4_000 - 102)));
        assert!(
            agree(vec![], (2, &sem(0, 2)), (t0, t0), TIMING)
                .readers
                .is_empty()
        );
    }

    #[test]
    fn most_common_takes_the_larger_on_a_tie() {
        assert_eq!(most_common([2, 3, 3, 2].into_iter()), Some(3));
        assert_eq!(most_common([2, 2, 3].into_iter()), Some(2));
        assert_eq!(most_common(std::iter::empty()), None);
    }
}
