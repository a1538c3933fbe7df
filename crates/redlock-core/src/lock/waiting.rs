//! What the client asks and tells a [`Lock`] about the waiters' queue (waiters/mod.rs;
//! docs/design.md, "The waiters' queue") and about other clients: whether it queues, the
//! nodes' wall clock for its ticket, a refusal of the queue's script, a node's announcement
//! of the next head, a call that starts in the queue, and whether the lock met another
//! client or started waiting for one (the client's line turns contested, and announces it:
//! queue.rs, notify.rs).

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use rand_core::CryptoRng;

use super::{Acquiring, Ctx, Lock, Phase};
use crate::config::Config;
use crate::error::UsageError;
use crate::id::{NodeId, OpId};
use crate::options::{LockOptions, LockParams};
use crate::token::Resource;

impl Lock {
    /// [`acquire`](Self::acquire), with the default options' parameters if the caller
    /// resolved them already (a client does, once). `in_queue`: the resource met other
    /// clients a moment ago (queue.rs), so the first attempt takes a place in the waiters'
    /// queue (waiters/mod.rs), and cannot pass the waiters there while the key is free between
    /// two holds.
    pub(crate) fn acquire_asked<R: CryptoRng + ?Sized>(
        now: Instant,
        op: OpId,
        config: &Config,
        resource: Resource,
        asked: (&LockOptions, Option<&Arc<LockParams>>),
        in_queue: bool,
        rng: &mut R,
    ) -> Result<Self, UsageError> {
        let mut ctx = Ctx::new(op, config, resource, asked)?;
        let acquiring = match in_queue {
            true => Acquiring::start_in_queue(&mut ctx, now, rng),
            false => Acquiring::start(&mut ctx, now, rng),
        };
        Ok(Self {
            ctx,
            phase: Phase::Acquiring(acquiring),
        })
    }

    /// `node` announced `id` as the next head of the resource's waiters' queue
    /// ([`NEXT_PREFIX`](crate::NEXT_PREFIX) and the id on the release channel) at `now`: if
    /// it is this lock's, the lock heads the queue there; heading it on a quorum of nodes, it
    /// tries at once, and else the next release it hears of wakes it (docs/design.md, "The
    /// waiters' queue").
    pub fn handle_next_notice<R: CryptoRng + ?Sized>(
        &mut self,
        now: Instant,
        node: NodeId,
        id: &[u8],
        rng: &mut R,
    ) {
        match &mut self.phase {
            Phase::Acquiring(a) => a.on_next(&mut self.ctx, now, (node, id), rng),
            // Placed by the release of the call ahead, not started yet (lock/queued.rs).
            Phase::Queued(q) => {
                if let Some(place) = &mut q.place {
                    place.on_early_next(node, id);
                }
            }
            _ => {}
        }
    }

    /// `node` announced at `now` that a release granted the key to `id`
    /// ([`GRANT_PREFIX`](crate::GRANT_PREFIX) and the id on the release channel), which
    /// heads the resource's waiters' queue there: if it is this lock's, the grant counts,
    /// and with a quorum of grants the lock holds, its value the id (docs/design.md, "A
    /// release that grants"); short of that, it heads the queue there as on
    /// [`handle_next_notice`](Self::handle_next_notice).
    pub fn handle_grant_notice<R: CryptoRng + ?Sized>(
        &mut self,
        now: Instant,
        node: NodeId,
        id: &[u8],
        rng: &mut R,
    ) {
        match &mut self.phase {
            Phase::Acquiring(a) => {
                if let Some(phase) = a.on_grant(&mut self.ctx, now, (node, id), rng) {
                    self.phase = phase;
                }
            }
            // Placed by the release of the call ahead, not started yet (lock/queued.rs).
            Phase::Queued(q) => {
                if let Some(place) = &mut q.place {
                    place.on_early_grant(node, id);
                }
            }
            _ => {}
        }
    }

    /// Your IO hands this lock's release notices (a release, its turn in the waiters' queue,
    /// or a grant: [`handle_release_notice`](Self::handle_release_notice),
    /// [`handle_next_notice`](Self::handle_next_notice),
    /// [`handle_grant_notice`](Self::handle_grant_notice)) from `hearing` nodes only. With
    /// fewer than a quorum, a waiting call polls instead: its next attempt comes within 10
    /// ms, not counted against the retry policy's attempts (docs/design.md, "A waiter that
    /// cannot hear polls"). A place it holds in the waiters' queue then never leaves the lock
    /// free for long while the others wait behind it.
    ///
    /// While [`is_waiting_for_release`](Self::is_waiting_for_release) is true, a driver that
    /// does not listen on a quorum of nodes MUST call this after every input it feeds the
    /// lock (with `hearing` 0 if it never listens); it may call it in any phase.
    pub fn poll_unheard(&mut self, now: Instant, hearing: usize) {
        if let Phase::Acquiring(a) = &mut self.phase {
            a.poll_unheard(now, hearing < self.ctx.params.quorum);
        }
    }

    /// Whether an attempt found the lock held by another client since the last call; the
    /// client marks the resource's line contested (queue.rs).
    #[inline]
    pub(crate) fn take_contested(&mut self) -> bool {
        std::mem::take(&mut self.ctx.contested)
    }

    /// Whether the call started waiting for another client's release since the last call:
    /// the client announces it (notify.rs, `waiting_channel`).
    #[inline]
    pub(crate) fn take_waits(&mut self) -> bool {
        std::mem::take(&mut self.ctx.waits)
    }

    /// Whether a node refused the waiters' queue's script to this lock since the last call
    /// (waiters/mod.rs): the client then waits without the queue.
    #[inline]
    pub(crate) fn take_queue_refused(&mut self) -> bool {
        std::mem::take(&mut self.ctx.queue_refused)
    }

    /// Whether the lock would wait in the waiters' queue if contended (waiters/mod.rs).
    pub(crate) fn queues(&self) -> bool {
        self.ctx.params.queue.is_some()
    }

    /// The nodes' wall clock read `ms` at `at`, as the client estimates it: a waiter's
    /// ticket (waiters/mod.rs).
    pub(crate) fn set_wall_clock(&mut self, at: Instant, ms: u64) {
        self.ctx.wall = Some((at, ms));
    }

    /// This lock waits without the waiters' queue: its client's nodes refused its script.
    pub(crate) fn without_queue(&mut self) {
        Arc::make_mut(&mut self.ctx.params).queue = None;
    }

    /// The call ahead in this queued lock's line is about to release in a contested line:
    /// this call takes its place in the waiters' queue with that release (waiters/mod.rs,
    /// `Succession`), if it would wait there and its ticket is known (the nodes' wall clock
    /// was read). Returns the place's packed args for the release to carry.
    pub(crate) fn take_place_at<R: CryptoRng + ?Sized>(
        &mut self,
        now: Instant,
        rng: &mut R,
    ) -> Option<Bytes> {
        let Phase::Queued(queued) = &mut self.phase else {
            return None;
        };
        self.ctx.wall?;
        let mut place = Acquiring::new_place(&self.ctx, (now, true), rng)?;
        let args = place.args()?;
        queued.place = Some(Box::new(place));
        Some(args)
    }

    /// This held lock's release will place the next call of its line, whose place's
    /// packed args are `next` (see [`take_place_at`](Self::take_place_at)); `false` (and
    /// nothing changes) unless it is a held mutex.
    pub(crate) fn place_next(&mut self, next: Bytes) -> bool {
        let held = self.can_place_next();
        if held {
            let nodes = self.ctx.params.nodes;
            (self.ctx.succession.get_or_insert_default()).place_next(next, nodes);
        }
        held
    }

    /// Whether this lock's release can place the next call of its line: it is a held mutex.
    pub(crate) fn can_place_next(&self) -> bool {
        matches!(self.phase, Phase::Held(_)) && self.ctx.kind.is_none()
    }

    /// The next call's rank on each node, as this lock's release placed it (`None` if it
    /// placed none).
    pub(crate) fn take_next_ranks(&mut self) -> Option<crate::waiters::Ranks> {
        self.ctx.succession.as_mut()?.take_ranks()
    }
}
