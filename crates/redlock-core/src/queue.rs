//! Local queueing: the lock calls of one [`Client`](crate::Client) for one resource form a
//! line in arrival order. Only the first contends on the nodes (or holds the lock); the
//! others wait without sending anything, and the next one's first attempt starts as soon as
//! the one ahead lets go.
//!
//! Why: two lock calls of one client for one resource can never both hold it, so letting
//! both contend on the nodes only splits votes between them (with N nodes, neither may
//! reach a quorum) and leaves the order to random retry delays, which starves the unlucky.
//! In a line, a local hand-off costs one round trip: the next call's `SET NX` goes out
//! right behind the release on each node's connection, and each node runs them in that
//! order. Calls in other processes still contend as before.
//!
//! A line that met another client (an attempt found the lock held by someone else in the
//! last second) is *contested*, and hands over fairly instead: the releasing call keeps its
//! place until its release is done, and the next call's first attempt starts after a random
//! delay of at most the notification jitter. A waiter of another client hears of the same
//! release (notify.rs) at about the same moment and waits a delay drawn the same way, so
//! each has the same chance; without this the next local call, whose `SET` follows the
//! release on every connection, would win every hand-off and starve the other processes.
//!
//! Pure bookkeeping: who is first, who is next. When a call starts or gives up is the
//! [`Lock`](crate::Lock)'s business (its queued phase).

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use crate::id::OpId;
use crate::token::Resource;

/// The lines, one per resource with a lock call in flight.
///
/// A `BTreeMap`: resources are chosen by the application (maybe from its users' input), and
/// a hash map would need keys from a random seed the core does not read; a comparison of
/// two short byte strings is cheap.
#[derive(Debug, Default)]
pub(crate) struct Lines {
    lines: BTreeMap<Resource, Line>,
}

#[derive(Debug)]
struct Line {
    /// Contends on the nodes, or holds the lock.
    first: OpId,
    /// Wait, in arrival order.
    waiting: VecDeque<OpId>,
    /// Until when the line counts as contested: an attempt found the lock held by another
    /// client less than [`CONTESTED_FOR`] ago.
    contested_until: Option<Instant>,
}

/// How long a line stays contested after an attempt of it found another client holding the
/// lock.
pub(crate) const CONTESTED_FOR: Duration = Duration::from_secs(1);

impl Lines {
    /// Whether no lock call of this client is in line for `resource`: a new one goes first.
    pub(crate) fn is_free(&self, resource: &Resource) -> bool {
        !self.lines.contains_key(resource)
    }

    /// Puts `op` at the end of `resource`'s line (first, if there is none).
    pub(crate) fn join(&mut self, resource: &Resource, op: OpId) {
        match self.lines.get_mut(resource) {
            Some(line) => line.waiting.push_back(op),
            None => {
                let line = Line {
                    first: op,
                    waiting: VecDeque::new(),
                    contested_until: None,
                };
                self.lines.insert(resource.clone(), line);
            }
        }
    }

    /// An attempt of `resource`'s line found the lock held by another client at `now`.
    pub(crate) fn contest(&mut self, resource: &Resource, now: Instant) {
        if let Some(line) = self.lines.get_mut(resource) {
            line.contested_until = Some(crate::time::add(now, CONTESTED_FOR));
        }
    }

    /// Whether `resource`'s line is contested at `now`: then its hand-off waits for the
    /// release to be done and starts the next call after a random delay, so that a waiter
    /// of another client, told of the release at the same moment, has the same chance.
    pub(crate) fn is_contested(&self, resource: &Resource, now: Instant) -> bool {
        (self.lines.get(resource)).is_some_and(|l| l.contested_until.is_some_and(|t| now < t))
    }

    /// Takes `op` out of `resource`'s line. If it was first, the next call (if any) becomes
    /// first and is returned: its first attempt is due now.
    pub(crate) fn leave(&mut self, resource: &Resource, op: OpId) -> Option<OpId> {
        let line = self.lines.get_mut(resource)?;
        if line.first != op {
            line.waiting.retain(|&w| w != op);
            return None;
        }
        match line.waiting.pop_front() {
            Some(next) => {
                line.first = next;
                Some(next)
            }
            None => {
                self.lines.remove(resource);
                None
            }
        }
    }

    /// How many lock calls wait behind the first, over all resources.
    #[cfg(test)]
    fn waiting(&self) -> usize {
        self.lines.values().map(|l| l.waiting.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(n: u64) -> OpId {
        OpId::from_raw(n)
    }

    #[test]
    fn first_in_first_out_and_a_line_ends_with_its_last_call() {
        let r = Resource::new("r");
        let mut lines = Lines::default();
        assert!(lines.is_free(&r));
        for n in 0..4 {
            lines.join(&r, op(n));
        }
        assert!(!lines.is_free(&r));
        assert_eq!(lines.waiting(), 3);
        // One in the middle gives up: it leaves, nobody moves up.
        assert_eq!(lines.leave(&r, op(2)), None);
        assert_eq!(lines.leave(&r, op(0)), Some(op(1)));
        assert_eq!(lines.leave(&r, op(1)), Some(op(3)));
        assert_eq!(lines.leave(&r, op(3)), None);
        assert!(lines.is_free(&r));
        // Leaving twice, or a line that is gone, changes nothing.
        assert_eq!(lines.leave(&r, op(3)), None);
    }

    #[test]
    fn resources_have_lines_of_their_own() {
        let (a, b) = (Resource::new("a"), Resource::new("b"));
        let mut lines = Lines::default();
        lines.join(&a, op(0));
        lines.join(&b, op(1));
        lines.join(&a, op(2));
        assert_eq!(lines.leave(&b, op(1)), None);
        assert!(lines.is_free(&b));
        assert_eq!(lines.leave(&a, op(0)), Some(op(2)));
    }
}
