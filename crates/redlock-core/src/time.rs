//! Time without surprises: saturating `Instant` arithmetic and the timer queue that gives
//! the client its next wake-up.
//!
//! The core never reads a clock. Every `Instant` comes from the caller's `now`; the attempt
//! start `t0` is the `now` passed to `acquire`/`extend`, before any byte is written, which
//! makes every validity computed from it conservative.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

use rand_core::Rng;

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

/// A min-queue of armed timers with lazy removal: the owner checks, when a timer pops,
/// whether it is still wanted, and [compacts](Self::compact) the queue when stale entries
/// could outnumber live ones.
///
/// Lazy removal alone keeps a stale entry until it reaches the top, so one long timer (a
/// held lock's deadline an hour away) kept every stale entry behind it: 10,000 finished
/// locks left 10,000 entries. An indexed heap would remove entries at once, but it has to
/// update every moved entry's position in its owner, a map lookup per swap on the hot path.
/// Compaction costs one comparison per push or removal and, amortized, O(log n) per entry.
#[derive(Debug)]
pub(crate) struct TimerQueue<K: Ord> {
    heap: BinaryHeap<Reverse<(Instant, K)>>,
}

impl<K: Ord> Default for TimerQueue<K> {
    fn default() -> Self {
        Self {
            heap: BinaryHeap::new(),
        }
    }
}

impl<K: Ord + Copy> TimerQueue<K> {
    pub(crate) fn new() -> Self {
        Self {
            heap: BinaryHeap::new(),
        }
    }

    pub(crate) fn push(&mut self, at: Instant, key: K) {
        self.heap.push(Reverse((at, key)));
    }

    /// The earliest armed timer.
    pub(crate) fn peek(&self) -> Option<(Instant, K)> {
        self.heap.peek().map(|Reverse(entry)| *entry)
    }

    /// Removes and returns the earliest timer if it is due at `now`.
    pub(crate) fn pop_due(&mut self, now: Instant) -> Option<(Instant, K)> {
        match self.peek() {
            Some((at, _)) if at <= now => self.heap.pop().map(|Reverse(entry)| entry),
            _ => None,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.heap.len()
    }

    /// Removes the earliest timer (used to drop stale entries).
    pub(crate) fn pop(&mut self) {
        self.heap.pop();
    }

    /// Whether the queue should be [compacted](Self::compact): it holds more than twice
    /// `live` entries (plus a little slack), where `live` bounds the timers still armed.
    #[inline]
    pub(crate) fn needs_compaction(&self, live: usize) -> bool {
        self.heap.len() > live.saturating_mul(2).saturating_add(COMPACTION_SLACK)
    }

    /// Keeps only the entries `armed` accepts, each once, and rebuilds the heap.
    ///
    /// Called when [`needs_compaction`](Self::needs_compaction) says so, this removes at
    /// least half the entries, each pushed once: O(log n) amortized per push. Duplicates go
    /// too, as a timer re-armed at a deadline it had before would otherwise count twice.
    pub(crate) fn compact(&mut self, mut armed: impl FnMut(Instant, K) -> bool) {
        let mut entries = std::mem::take(&mut self.heap).into_vec();
        entries.retain(|Reverse((at, key))| armed(*at, *key));
        entries.sort_unstable();
        entries.dedup();
        self.heap = BinaryHeap::from(entries);
    }
}

/// The shortest wait before a retry, whatever the policy says: time must move between two
/// attempts, or a retry that fails at once (every node down) would be due again at once.
pub(crate) const MIN_RETRY_DELAY: Duration = Duration::from_millis(1);

/// Entries a timer queue may hold beyond twice its live timers before it is compacted: keeps
/// a small queue from being compacted over and over.
const COMPACTION_SLACK: usize = 16;

/// About a century: the stand-in for "never" when a sum would overflow.
const FAR_FUTURE: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

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

    #[test]
    fn queue_pops_in_time_order_only_when_due() {
        let t = crate::test_epoch::epoch();
        let mut q = TimerQueue::new();
        q.push(t + Duration::from_millis(5), 2u32);
        q.push(t + Duration::from_millis(1), 1u32);
        assert_eq!(q.pop_due(t), None);
        assert_eq!(q.peek(), Some((t + Duration::from_millis(1), 1)));
        let later = t + Duration::from_millis(9);
        assert_eq!(q.pop_due(later).map(|e| e.1), Some(1));
        assert_eq!(q.pop_due(later).map(|e| e.1), Some(2));
        assert_eq!(q.pop_due(later), None);
    }

    #[test]
    fn compaction_keeps_live_entries_once() {
        let t = crate::test_epoch::epoch();
        let ms = Duration::from_millis;
        let mut q = TimerQueue::new();
        // Key k is armed at t + k ms; every other entry is stale, and key 3 is there twice.
        for k in 0..40u32 {
            q.push(t + ms(u64::from(k)), k);
            q.push(t + ms(1000 + u64::from(k)), k);
        }
        q.push(t + ms(3), 3);
        let live = 40;
        assert!(!q.needs_compaction(live));
        let live = 10;
        assert!(q.needs_compaction(live));
        q.compact(|at, k| k < 10 && at == t + ms(u64::from(k)));
        assert_eq!(q.len(), 10);
        assert!(!q.needs_compaction(live));
        let popped: Vec<u32> = std::iter::from_fn(|| q.pop_due(t + ms(5000)).map(|e| e.1))
            .take(100)
            .collect();
        assert_eq!(popped, (0..10).collect::<Vec<_>>());
    }
}
