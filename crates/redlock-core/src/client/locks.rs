//! The client's table of its operations: each [`Lock`] with what the client alone keeps
//! of it, where it stands in its resource's line (queue.rs) and whether its release channel
//! is watched (notify.rs). The [`Lock`] itself, which an embedder may drive directly,
//! knows of neither.

use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasherDefault;
use std::time::Instant;

use rand_core::CryptoRng;

use super::controls::ClientControls;
use crate::id::{NodeId, OpId, OpIdHasher};
use crate::lock::Lock;
use crate::node::Node;
use crate::notify::Watching;
use crate::queue::{HandOff, Lines};
use crate::token::Resource;
use crate::waiters::Ranks;

/// The operations not yet finished, by id: each one's [`Entry`]. Reads and writes the lock
/// alone as a map of locks would; [`entry_mut`](Self::entry_mut) reaches the client's marks.
///
/// Boxed: a lock is a large struct, and the table would copy it on every insertion, growth
/// and removal; an allocation costs less, the less so as an entry stays within
/// [`ENTRY_FAST_ALLOC`] bytes.
#[derive(Debug, Default)]
pub(super) struct Locks(HashMap<OpId, Box<Entry>, BuildHasherDefault<OpIdHasher>>);

/// The largest allocation glibc's per-thread cache serves (its fast path, for a block freed
/// and taken again on every lock); the parts of a lock that few locks use live out of line
/// (lock/ctx.rs) to stay within it.
const ENTRY_FAST_ALLOC: usize = 1032;
const _: () = assert!(
    size_of::<Entry>() <= ENTRY_FAST_ALLOC,
    "a lock grew past the fast path"
);

/// One operation of the client: the lock, and the client's marks beside it.
#[derive(Debug)]
pub(super) struct Entry {
    /// The operation.
    pub(super) lock: Lock,
    /// Whether the lock is in its resource's line (queue.rs): a lock call from when it
    /// starts until [`leave_line`](Self::leave_line) takes it out.
    in_line: bool,
    /// Whether the lock's release channel is watched for it (notify.rs, `Watching`).
    pub(super) subscribed: bool,
}

impl Locks {
    /// The lock `op`, if it is not finished.
    #[inline]
    pub(super) fn get(&self, op: &OpId) -> Option<&Lock> {
        self.0.get(op).map(|e| &e.lock)
    }

    /// The lock `op`, if it is not finished, to drive.
    #[inline]
    pub(super) fn get_mut(&mut self, op: &OpId) -> Option<&mut Lock> {
        self.0.get_mut(op).map(|e| &mut e.lock)
    }

    /// The lock `op`, if it is not finished and waits or holds in its resource's line.
    #[inline]
    pub(super) fn in_line(&self, op: OpId) -> Option<&Lock> {
        self.0.get(&op).filter(|e| e.in_line).map(|e| &e.lock)
    }

    /// The lock `op` with the client's marks, if it is not finished.
    #[inline]
    pub(super) fn entry_mut(&mut self, op: OpId) -> Option<&mut Entry> {
        self.0.get_mut(&op).map(|e| &mut **e)
    }

    /// Adds the lock `make` makes as `op`, in its resource's line if `in_line`; the lock, in
    /// its place. Nothing changes if `make` fails.
    pub(super) fn insert_with<E>(
        &mut self,
        op: OpId,
        in_line: bool,
        make: impl FnOnce() -> Result<Lock, E>,
    ) -> Result<&mut Lock, E> {
        let entry = Box::new(Entry {
            lock: make()?,
            in_line,
            subscribed: false,
        });
        Ok(&mut self.0.entry(op).insert_entry(entry).into_mut().lock)
    }

    /// Drops the finished lock `op`.
    #[inline]
    pub(super) fn remove(&mut self, op: &OpId) {
        self.0.remove(op);
    }

    /// Hands the hold of the lock `op` over to the next call of its resource's line at `now`
    /// (lock/hand_over.rs), if the line allows it (queue.rs, `Lines::hand_over_to`, told by
    /// `everywhere` whether the line hears waiters on every node) and the two locks can
    /// share the hold; returns that call, now first in the line. Nothing changes otherwise.
    pub(super) fn hand_over(
        &mut self,
        lines: &mut Lines,
        now: Instant,
        op: OpId,
        everywhere: impl FnOnce(&Resource) -> bool,
    ) -> Option<OpId> {
        let entry = self.0.get(&op)?;
        if !entry.in_line {
            return None;
        }
        let resource = entry.lock.resource();
        let next = lines.hand_over_to(resource, op, (now, everywhere(resource)))?;
        // Two distinct calls: the first of a line is never among those waiting behind it.
        let [Some(from), Some(to)] = self.0.get_disjoint_mut([&op, &next]) else {
            return None;
        };
        if !from.lock.hand_over(now, &mut to.lock) {
            return None;
        }
        from.in_line = false;
        lines.hand_over(from.lock.resource(), op);
        Some(next)
    }

    /// The line's next call `to` takes over the release channel `from` kept
    /// ([`Entry::wants_channel`]), subscribed as it is on every node that has it, so that the
    /// line's hand-off sends no `UNSUBSCRIBE` and its next wait no `SUBSCRIBE` (notify.rs,
    /// `Watching::pass`).
    pub(super) fn pass_channel(&mut self, watching: &mut Watching, (from, to): (OpId, OpId)) {
        let [Some(old), Some(new)] = self.0.get_disjoint_mut([&from, &to]) else {
            return;
        };
        if std::mem::take(&mut old.subscribed) {
            new.subscribed = watching.pass(old.lock.resource(), (from, to)) || new.subscribed;
        }
    }

    /// Before the lock `op` releases in a contested line: the next call of its line takes
    /// its place in the waiters' queue with that release (waiters/mod.rs, `Succession`), if the
    /// line is contested and both locks can; that call, returned, then listens for releases
    /// (the client pumps it before the release goes out). Nothing changes otherwise.
    pub(super) fn place_next<R: CryptoRng + ?Sized>(
        &mut self,
        lines: &Lines,
        now: Instant,
        op: OpId,
        rng: &mut R,
    ) -> Option<OpId> {
        let entry = self
            .0
            .get(&op)
            .filter(|e| e.in_line && e.lock.can_place_next())?;
        let next = lines.next_to_place(entry.lock.resource(), op, now)?;
        let [Some(from), Some(to)] = self.0.get_disjoint_mut([&op, &next]) else {
            return None;
        };
        let args = to.lock.take_place_at(now, rng)?;
        from.lock.place_next(args).then_some(next)
    }

    /// How many operations are not finished.
    pub(super) fn len(&self) -> usize {
        self.0.len()
    }
}

impl Entry {
    /// Takes the lock out of its resource's line once it no longer needs its place there,
    /// and returns the next call in line with how it starts (queue.rs), and its rank on each
    /// node if the lock's release placed it in the waiters' queue. A contested line, or
    /// one that owes a courtesy hand-off, keeps the releasing lock's place until its release
    /// is done: its next call then starts when a waiter of another client hears of the
    /// release, or has tried on its timer.
    #[inline]
    pub(super) fn leave_line(
        &mut self,
        lines: &mut Lines,
        now: Instant,
    ) -> Option<(OpId, (HandOff, Option<Ranks>))> {
        let lock = &mut self.lock;
        if lock.take_contested() {
            // Also after the lock left its line: the next hand-off of the line is fair.
            lines.contest(lock.resource(), now);
        }
        if lock.take_queue_refused() {
            lines.refuse_queue();
        }
        if !self.in_line || lock.needs_place() {
            return None;
        }
        let contested = lines.is_contested(lock.resource(), now);
        let courtesy = lines.owes_courtesy(lock.resource(), now);
        if (contested || courtesy) && lock.is_releasing() {
            return None;
        }
        self.in_line = false;
        // The next call yields only if another client waited for this very release.
        let yields = contested && lock.release_awaited();
        let ranks = lock.take_next_ranks();
        let (next, how) = lines.leave(lock.resource(), lock.op(), now, yields)?;
        Some((next, (how, ranks)))
    }

    /// Whether the lock's release channel is to be watched for it: from when it first waits
    /// for a release, also while it holds, until its release starts (docs/design.md, "Kept
    /// while held"). Nobody else releases the key while it holds, so the channel is quiet
    /// then; the line's next call, placed ahead of the release, takes it over, and a release
    /// that nobody of the line waits behind gives it up before it goes out, so that the
    /// nodes' count of the release's listeners (`release_awaited`) is of other clients.
    /// `controls`: the client's, whose negative control keeps the channel through the
    /// release.
    pub(super) fn wants_channel(&self, controls: &ClientControls) -> bool {
        let lock = &self.lock;
        let released = lock.is_releasing() && controls.free_channel_to_release;
        lock.is_waiting_for_release() || (self.subscribed && !released && !lock.is_finished())
    }

    /// Watches the lock's release channel or stops, as [`wants_channel`](Self::wants_channel)
    /// says (notify.rs); nodes with commands to send join `dirty`.
    pub(super) fn watch(
        &mut self,
        controls: &ClientControls,
        watching: &mut Watching,
        nodes: &mut [Node],
        dirty: &mut VecDeque<NodeId>,
    ) {
        let wants = self.wants_channel(controls);
        self.subscribed = wants;
        let (op, resource) = (self.lock.op(), self.lock.resource());
        watching.watch(op, resource, wants, nodes, dirty);
    }
}
