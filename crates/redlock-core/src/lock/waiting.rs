//! What the client asks and tells a [`Lock`] about the waiters' queue (waiters.rs;
//! docs/design.md, "The waiters' queue"): whether it queues, the nodes' wall clock for its
//! ticket, a refusal of the queue's script, a node's announcement of the next head, and a
//! call that starts in the queue.

use std::time::Instant;

use rand_core::CryptoRng;

use super::{Acquiring, Ctx, Lock, Phase};
use crate::config::Config;
use crate::error::UsageError;
use crate::id::{NodeId, OpId};
use crate::options::LockOptions;
use crate::token::Resource;

impl Lock {
    /// [`acquire`](Self::acquire) of a resource that met other clients a moment ago
    /// (queue.rs): the first attempt takes a place in the waiters' queue (waiters.rs), so
    /// that it cannot pass the waiters there while the key is free between two holds.
    pub(crate) fn acquire_in_queue<R: CryptoRng + ?Sized>(
        now: Instant,
        op: OpId,
        config: &Config,
        resource: Resource,
        options: &LockOptions,
        rng: &mut R,
    ) -> Result<Self, UsageError> {
        let mut ctx = Ctx::new(op, config, resource, options)?;
        let phase = Phase::Acquiring(Acquiring::start_in_queue(&mut ctx, now, rng));
        Ok(Self { ctx, phase })
    }

    /// `node` announced `id` as the next head of the resource's waiters' queue
    /// ([`NEXT_PREFIX`](crate::NEXT_PREFIX) and the id on the release channel): if it is this
    /// lock's, the lock heads the queue there, and the next release it hears of wakes it
    /// (docs/design.md, "The waiters' queue").
    pub fn handle_next_notice(&mut self, node: NodeId, id: &[u8]) {
        if let Phase::Acquiring(a) = &mut self.phase {
            a.on_next(node, id);
        }
    }

    /// Whether a node refused the waiters' queue's script to this lock since the last call
    /// (waiters.rs): the client then waits without the queue.
    #[inline]
    pub(crate) fn take_queue_refused(&mut self) -> bool {
        std::mem::take(&mut self.ctx.queue_refused)
    }

    /// Whether the lock would wait in the waiters' queue if contended (waiters.rs).
    pub(crate) fn queues(&self) -> bool {
        self.ctx.params.queue.is_some()
    }

    /// The nodes' wall clock read `ms` at `at`, as the client estimates it: a waiter's
    /// ticket (waiters.rs).
    pub(crate) fn set_wall_clock(&mut self, at: Instant, ms: u64) {
        self.ctx.wall = Some((at, ms));
    }

    /// This lock waits without the waiters' queue: its client's nodes refused its script.
    pub(crate) fn without_queue(&mut self) {
        self.ctx.params.queue = None;
    }
}
