//! The wait between two attempts of an acquisition. The retry timer always runs
//! (algorithm.md §7). With release notifications on (notify.rs) and the lock held by
//! another client, two more things can end the wait early:
//! - the holder's expiry, read by a `PTTL` probe sent to every node right after the failed
//!   attempt (a mutex's only: the other kinds' holders are not one key's) (behind the subscription on each node's connection, so a release that happened
//!   before the subscription was active shows as a missing key);
//! - a quorum of nodes announcing a release.
//!
//! Either starts the next attempt after a random delay of at most the notification jitter,
//! so that the waiters of several clients, told at the same moment, seldom collide. An
//! early attempt is only an attempt: if the lock is still held, it fails like any other.

use std::time::{Duration, Instant};

use rand_core::CryptoRng;

use super::Ctx;
use crate::command::{Command, Vote};
use crate::id::NodeId;
use crate::quorum;
use crate::round::{Round, Slot};
use crate::time;
use crate::waiters::UNHEARD_POLL_EVERY;

/// The wait before the next attempt.
#[derive(Debug)]
pub(super) struct Wait {
    /// When the next attempt starts.
    at: Instant,
    /// Whether `at` was brought forward by a release or the holder's expiry: that attempt
    /// is not counted against the policy's attempts (its overall wait still bounds it).
    early: bool,
    /// The `PTTL` round to every node, until it is read.
    probe: Option<Round>,
    /// The nodes that announced a release during this wait, and how many.
    notified: Vec<bool>,
    notices: usize,
}

impl Wait {
    /// A wait until `at`, the retry delay's end; if `listening`, counting release notices,
    /// and if `probing` too, with a probe started now (a waiter behind the queue's head
    /// listens without probing: waiters/mod.rs).
    pub(super) fn new(
        ctx: &mut Ctx,
        now: Instant,
        at: Instant,
        (listening, probing): (bool, bool),
    ) -> Self {
        let n = ctx.params.nodes;
        // Only a mutex's holder shows in its key's ttl: a reader, a writer or a multi-lock
        // may be kept out by keys the probe does not read, and a missing key would only
        // start an early attempt for nothing (docs/kinds.md, "Waiting").
        let probe = (listening && probing && ctx.kind.is_none()).then(|| {
            let deadline = time::add(now, ctx.params.timing.attempt_timeout);
            let command = Command::pttl(&ctx.resource);
            Round::new(ctx.seq(), command, now, deadline, (n, n), Vec::new())
        });
        Self {
            at,
            early: false,
            probe,
            notified: if listening {
                vec![false; n]
            } else {
                Vec::new()
            },
            notices: 0,
        }
    }

    /// Whether the attempt at the end of this wait only renews a place behind the waiters'
    /// queue's head (waiters/mod.rs): not counted against the policy's attempts, as an attempt
    /// brought forward is not (the policy's overall wait still bounds it).
    pub(super) fn renewing(&mut self, renewing: bool) {
        self.early |= renewing;
    }

    /// Polls ([`poll_by`](Self::poll_by)) if the call cannot hear its turn: its client said
    /// so (`unheard`: acquire/place.rs, `poll_unheard`), or it waits with a place in the
    /// waiters' queue (`queued`) with release notifications off.
    pub(super) fn unheard(&mut self, ctx: &Ctx, now: Instant, (queued, unheard): (bool, bool)) {
        if unheard || (queued && !ctx.params.notify) {
            self.poll_by(time::add(now, UNHEARD_POLL_EVERY));
        }
    }

    /// The next attempt at `at` at the latest, as a renewal of the call's place (not
    /// counted against the policy's attempts): a waiter that cannot hear its turn polls
    /// (acquire/place.rs, `poll_unheard`).
    pub(super) fn poll_by(&mut self, at: Instant) {
        if at < self.at {
            self.at = at;
            self.early = true;
        }
    }

    /// The next deadline: the attempt, or the probe's if earlier.
    pub(super) fn timer(&self) -> Instant {
        match &self.probe {
            Some(probe) => self.at.min(probe.deadline),
            None => self.at,
        }
    }

    /// When the next attempt starts, and whether it was brought forward.
    pub(super) fn attempt_at(&self) -> (Instant, bool) {
        (self.at, self.early)
    }

    pub(super) fn probe_mut(&mut self) -> Option<&mut Round> {
        self.probe.as_mut()
    }

    /// A probe reply was counted, or the probe's deadline passed: once every node answered
    /// or timed out, its answers may bring the attempt forward.
    pub(super) fn on_probe<R: CryptoRng + ?Sized>(&mut self, ctx: &Ctx, now: Instant, rng: &mut R) {
        let Some(probe) = self.probe.as_mut() else {
            return;
        };
        if probe.deadline <= now {
            probe.expire();
        }
        if !probe.is_complete() {
            return;
        }
        let free_in = quorum_free_in(&probe.slots, ctx.params.quorum);
        self.probe = None;
        if let Some(free_in) = free_in {
            // The nodes' clocks and ours may run at slightly different rates: the allowance
            // of a lock that long, so the attempt never comes before the keys expire.
            let drift = (
                ctx.params.timing.drift_factor,
                ctx.params.timing.drift_floor,
            );
            let allowance = match free_in {
                Duration::ZERO => Duration::ZERO,
                ttl => quorum::drift(ttl, drift.0, drift.1),
            };
            let at = time::add(now, free_in.saturating_add(allowance));
            self.bring_forward(ctx, at, rng);
        }
    }

    /// Counts the nodes marked in `released` as having announced a release (their key was
    /// free at the last attempt), without bringing the attempt forward.
    pub(super) fn count_released(&mut self, released: impl Iterator<Item = bool>) {
        for (seen, released) in self.notified.iter_mut().zip(released) {
            if released && !std::mem::replace(seen, true) {
                self.notices += 1;
            }
        }
    }

    /// `node` announced a release, counted without bringing the attempt forward.
    pub(super) fn count_notice(&mut self, node: NodeId) {
        if let Some(seen) = self.notified.get_mut(node.index())
            && !std::mem::replace(seen, true)
        {
            self.notices += 1;
        }
    }

    /// `node` announced a release: once a quorum did, the attempt is brought forward.
    pub(super) fn on_notice<R: CryptoRng + ?Sized>(
        &mut self,
        ctx: &Ctx,
        now: Instant,
        node: NodeId,
        rng: &mut R,
    ) {
        if self.notified.get(node.index()).is_none() {
            return;
        }
        self.count_notice(node);
        if self.notices >= ctx.params.quorum {
            self.bring_forward(ctx, now, rng);
        }
    }

    /// The next attempt at `at` plus a random delay of at most the jitter, if that is
    /// earlier than planned (a quorum announced a release, or the waiter just learned it
    /// heads the queue: waiters/mod.rs).
    pub(super) fn bring_forward<R: CryptoRng + ?Sized>(
        &mut self,
        ctx: &Ctx,
        at: Instant,
        rng: &mut R,
    ) {
        let jitter = time::uniform(rng, Duration::ZERO, ctx.params.notification_jitter);
        let at = time::add(at, jitter);
        if at < self.at {
            self.at = at;
            self.early = true;
        }
    }
}

/// How long until the lock's keys are gone from a quorum of nodes, from the probe's answers:
/// the quorum-th shortest remaining ttl, a missing key counting as zero. `None` when fewer
/// than a quorum of nodes gave a ttl (failed, no answer, or a key without expiry).
fn quorum_free_in(slots: &[Slot], quorum: usize) -> Option<Duration> {
    let mut ttls: Vec<u64> = (slots.iter())
        .filter_map(|slot| match slot {
            Slot::Done(Vote::Ttl(-2)) => Some(0),
            Slot::Done(Vote::Ttl(ms)) if *ms >= 0 => Some(ms.unsigned_abs()),
            _ => None,
        })
        .collect();
    ttls.sort_unstable();
    let ms = *ttls.get(quorum.checked_sub(1)?)?;
    Some(Duration::from_millis(ms))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::NodeFault;

    fn ttl(ms: i64) -> Slot {
        Slot::Done(Vote::Ttl(ms))
    }

    #[test]
    fn the_keys_are_gone_from_a_quorum_at_the_quorum_th_shortest_ttl() {
        let slots = [ttl(300), ttl(-2), ttl(100), ttl(-1), ttl(200)];
        assert_eq!(quorum_free_in(&slots, 3), Some(Duration::from_millis(200)));
        assert_eq!(quorum_free_in(&slots, 1), Some(Duration::ZERO));
        // Only four nodes gave a ttl (one key has no expiry): a quorum of 5 cannot be free.
        assert_eq!(quorum_free_in(&slots, 5), None);
        let failed = Slot::Done(Vote::Fault(NodeFault::Timeout));
        let slots = [failed.clone(), failed, ttl(5)];
        assert_eq!(quorum_free_in(&slots, 2), None);
        assert_eq!(quorum_free_in(&slots, 0), None);
    }
}
