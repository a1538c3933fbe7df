//! Time without surprises: saturating `Instant` arithmetic, and the timer queue (with its
//! key, [`Timer`]) that gives the client its next wake-up.
//!
//! The core never reads a clock. Every `Instant` comes from the caller's `now`; the attempt
//! start `t0` is the `now` passed to `acquire`/`extend`, before any byte is written, which
//! makes every validity computed from it conservative.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::hash::{BuildHasher, Hash, Hasher};
use std::time::{Duration, Instant};

use rand_core::Rng;

use crate::id::{NodeId, OpId};

/// `t + d`, saturating at a point about a century after `t` instead of panicking.
pub(crate) fn add(t: Instant, d: Duration) -> Instant {
    t.checked_add(d)
        .or_else(|| t.checked_add(FAR_FUTURE))
        // A platform whose Instant cannot reach a century ahead still cannot overflow here.
        .unwrap_or(t)
}

/// A delay drawn uniformly from `[min, max]` with the caller's RNG.
pub(crate) fn uniform<R: Rng + ?Sized>(rng: &mut R, min: Duration, max: Duration) -> Duration {
    let span = max.saturating_sub(min).as_nanos().min(u128::from(u64::MAX)) as u64;
    if span == 0 {
        return min;
    }
    // Multiply-shift maps a 64-bit draw onto [0, span] with negligible bias.
    let offset = ((u128::from(rng.next_u64()) * (u128::from(span) + 1)) >> 64) as u64;
    min.saturating_add(Duration::from_nanos(offset))
}

/// The timers armed for a set of keys (at most one per key), earliest first.
///
/// The queue knows what is armed: [`arm`](Self::arm) sets or clears a key's timer, and the
/// entry it replaces goes stale. Stale entries are dropped when they reach the top, and the
/// whole queue is compacted when they could outnumber the armed ones (more than twice the
/// armed timers plus a small slack), so a long timer (a held lock's deadline an hour away)
/// never keeps the stale entries of every key that came and went behind it. An indexed heap
/// would remove entries at once, but it would have to update every moved entry's position,
/// a map update per swap; compaction is O(log n) per entry, amortized.
#[derive(Debug)]
pub(crate) struct TimerQueue<K, S> {
    heap: BinaryHeap<Reverse<(Instant, K)>>,
    /// The armed timer of each key; a heap entry that disagrees is stale.
    armed: HashMap<K, Instant, S>,
    /// The heap's top is known to be armed: set when it was checked, cleared by every
    /// change to the queue.
    top_armed: bool,
}

impl<K: Ord, S: Default> Default for TimerQueue<K, S> {
    fn default() -> Self {
        Self {
            heap: BinaryHeap::new(),
            armed: HashMap::default(),
            top_armed: false,
        }
    }
}

impl<K: Ord + Hash + Copy, S: BuildHasher> TimerQueue<K, S> {
    /// Arms `key`'s timer at `at`, or disarms it (`None`). Arming it where it already is
    /// changes nothing.
    #[inline]
    pub(crate) fn arm(&mut self, key: K, at: Option<Instant>) {
        match at {
            Some(at) => {
                // The usual case (a lock re-armed after a reply that moved no timer): a
                // lookup, cheaper than an insert.
                if self.armed.get(&key) == Some(&at) {
                    return;
                }
                self.armed.insert(key, at);
                self.heap.push(Reverse((at, key)));
            }
            None => {
                if self.armed.remove(&key).is_none() {
                    return;
                }
            }
        }
        self.top_armed = false;
        if self.heap.len() > self.armed.len().saturating_mul(2) + COMPACTION_SLACK {
            self.compact();
        }
    }

    /// The earliest armed timer.
    #[inline]
    pub(crate) fn next(&mut self) -> Option<Instant> {
        while let Some(&Reverse((at, key))) = self.heap.peek() {
            if self.top_armed || self.armed.get(&key) == Some(&at) {
                self.top_armed = true;
                return Some(at);
            }
            self.heap.pop();
        }
        None
    }

    /// Disarms and returns the earliest armed timer if it is due at `now`.
    pub(crate) fn pop_due(&mut self, now: Instant) -> Option<(Instant, K)> {
        if self.next()? > now {
            return None;
        }
        let Reverse((at, key)) = self.heap.pop()?;
        self.armed.remove(&key);
        self.top_armed = false;
        Some((at, key))
    }

    /// Entries held, stale ones included.
    pub(crate) fn len(&self) -> usize {
        self.heap.len()
    }

    /// Keeps only the armed entries, each once, and rebuilds the heap. Called when more
    /// than half the entries are stale, so it removes at least half of them, each pushed
    /// once: O(log n) amortized per push.
    fn compact(&mut self) {
        let mut entries = std::mem::take(&mut self.heap).into_vec();
        entries.retain(|Reverse((at, key))| self.armed.get(key) == Some(at));
        entries.sort_unstable();
        entries.dedup();
        self.heap = BinaryHeap::from(entries);
    }
}

/// The shortest wait before a retry, whatever the policy says: time must move between two
/// attempts, or a retry that fails at once (every node down) would be due again at once.
pub(crate) const MIN_RETRY_DELAY: Duration = Duration::from_millis(1);

/// Entries a timer queue may hold beyond twice its armed timers before it is compacted:
/// keeps a small queue from being compacted over and over.
const COMPACTION_SLACK: usize = 16;

/// About a century: the stand-in for "never" when a sum would overflow.
const FAR_FUTURE: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// What a timer of the client wakes: a lock (its next deadline) or a down node (its
/// reconnection). The key of the client's [`TimerQueue`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Timer {
    /// A down node's reconnection is due.
    Node(NodeId),
    /// A lock has work at its next deadline (`Lock::poll_timeout`).
    Op(OpId),
}

impl Hash for Timer {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // One word per key: the derived hash would also write the discriminant.
        state.write_u64(match *self {
            Self::Op(op) => op.as_raw() << 1,
            Self::Node(node) => ((node.index() as u64) << 1) | 1,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_stays_in_range() {
        use chacha20::ChaCha20Rng;
        use rand_core::SeedableRng;
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        let (lo, hi) = (Duration::from_millis(50), Duration::from_millis(250));
        let draws: Vec<_> = (0..1000).map(|_| uniform(&mut rng, lo, hi)).collect();
        assert!(draws.iter().all(|d| (lo..=hi).contains(d)));
        assert!(draws.iter().any(|d| *d < Duration::from_millis(60)));
        assert!(draws.iter().any(|d| *d > Duration::from_millis(240)));
        assert_eq!(uniform(&mut rng, lo, lo), lo);
    }

    #[test]
    fn add_saturates() {
        let t = crate::test_epoch::epoch();
        assert_eq!(add(t, Duration::from_secs(1)), t + Duration::from_secs(1));
        assert!(add(t, Duration::MAX) > t);
    }

    type Queue = TimerQueue<u32, std::hash::RandomState>;

    #[test]
    fn queue_pops_armed_timers_in_time_order_only_when_due() {
        let t = crate::test_epoch::epoch();
        let ms = Duration::from_millis;
        let mut q = Queue::default();
        q.arm(2, Some(t + ms(5)));
        q.arm(1, Some(t + ms(1)));
        q.arm(3, Some(t + ms(2)));
        q.arm(3, None);
        assert_eq!(q.pop_due(t), None);
        assert_eq!(q.next(), Some(t + ms(1)));
        let later = t + ms(9);
        assert_eq!(q.pop_due(later).map(|e| e.1), Some(1));
        assert_eq!(q.pop_due(later).map(|e| e.1), Some(2));
        assert_eq!(q.pop_due(later), None);
        assert_eq!(q.next(), None);
    }

    #[test]
    fn stale_entries_are_compacted_away() {
        let t = crate::test_epoch::epoch();
        let ms = Duration::from_millis;
        let mut q = Queue::default();
        // Key k ends up armed at t + k ms for k < 10; every other entry goes stale.
        for k in 0..40u32 {
            q.arm(k, Some(t + ms(1000 + u64::from(k))));
            q.arm(k, (k < 10).then(|| t + ms(u64::from(k))));
            assert!(q.len() <= 2 * 40 + COMPACTION_SLACK);
        }
        q.arm(3, Some(t + ms(3)));
        assert!(q.len() <= 2 * 10 + COMPACTION_SLACK);
        let popped: Vec<u32> = std::iter::from_fn(|| q.pop_due(t + ms(5000)).map(|e| e.1))
            .take(100)
            .collect();
        assert_eq!(popped, (0..10).collect::<Vec<_>>());
        assert_eq!(q.len(), 0);
    }
}
