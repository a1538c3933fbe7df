//! Starting and changing operations: the lock calls (each joins its resource's line:
//! queue.rs), a read-only inspection, a release by token, and extending, releasing or
//! cancelling a lock. Each checks that the client was drained, clamps `now`, changes the
//! lock and pumps it (client/pump.rs).

use std::sync::Arc;
use std::time::Instant;

use rand_core::CryptoRng;

use super::Client;
use crate::config::Config;
use crate::error::UsageError;
use crate::id::OpId;
use crate::lock::Lock;
use crate::options::{LockOptions, LockParams};
use crate::policy::RetryPolicy;
use crate::token::{Resource, Token};

/// What a new operation is made from: the client's configuration, and the default options'
/// parameters it resolved once (`Client::defaults`).
type Settings<'a> = (&'a Config, Option<&'a Arc<LockParams>>);

impl<R: CryptoRng> Client<R> {
    /// Starts acquiring `resource` with the configured retry policy.
    ///
    /// `now` is `t0` of the first attempt. The outcome comes as
    /// [`Event::Acquired`](crate::Event::Acquired) or
    /// [`Event::AcquireFailed`](crate::Event::AcquireFailed) carrying the returned id.
    pub fn acquire(&mut self, now: Instant, resource: Resource) -> Result<OpId, UsageError> {
        self.acquire_with(now, resource, &LockOptions::default())
    }

    /// Makes one attempt to acquire `resource`, without retry.
    pub fn try_acquire(&mut self, now: Instant, resource: Resource) -> Result<OpId, UsageError> {
        let once = RetryPolicy {
            max_attempts: Some(1),
            max_wait: None,
            ..self.config.retry
        };
        self.acquire_with(now, resource, &LockOptions::default().retry(once))
    }

    /// Starts acquiring `resource` with per-lock options (ttl, token, retry, auto-extension).
    ///
    /// Lock calls of this client for one resource queue in arrival order: while an earlier
    /// one contends on the nodes or holds the lock, this one waits without sending anything
    /// and makes its first attempt as soon as that one releases, is lost or gives up. It
    /// waits at most as long as its retry policy would have let it retry (the overall wait,
    /// or every delay at its longest), then fails with
    /// [`AcquireFailure::HeldLocally`](crate::AcquireFailure::HeldLocally); a single attempt
    /// fails so at once.
    ///
    /// Readers and permit holders ([`LockKind::is_shared`](crate::LockKind::is_shared)) do
    /// not wait in that line: several of them may hold together, so each contends on the
    /// nodes at once (docs/kinds.md, "The local line").
    pub fn acquire_with(
        &mut self,
        now: Instant,
        resource: Resource,
        options: &LockOptions,
    ) -> Result<OpId, UsageError> {
        let in_line = !options.kind.is_shared();
        let first = !in_line || self.lines.is_free(&resource);
        // A resource that other clients wanted a moment ago: the call starts in the
        // waiters' queue, as a contested line's next call does (queue.rs, waiters/mod.rs).
        let in_queue = first && self.lines.recently_contested(&resource, now);
        self.start(now, in_line, |now, op, (config, defaults), rng| {
            let asked = (options, defaults);
            if first {
                Lock::acquire_asked(now, op, config, resource, asked, in_queue, rng)
            } else {
                Lock::queued(now, op, config, resource, asked)
            }
        })
    }

    /// Starts acquiring every resource of `resources` at once, all or none, with the
    /// configured retry policy (a multi-lock, docs/kinds.md); see [`Lock::acquire_all`].
    ///
    /// ```no_run
    /// # fn driver_clock() -> std::time::Instant { unimplemented!("the driver's monotonic clock") }
    /// # use redlock_core::{Client, Config, Resource};
    /// # let mut client = Client::new(Config::builder(3).build()?, rand_core::UnwrapErr(getrandom::SysRng));
    /// # while !matches!(client.poll_output(), redlock_core::Output::Idle | redlock_core::Output::Timeout(_)) {}
    /// let op = client.acquire_all(driver_clock(), [Resource::from("a"), Resource::from("b")])?;
    /// # let _ = op;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn acquire_all(
        &mut self,
        now: Instant,
        resources: impl IntoIterator<Item = Resource>,
    ) -> Result<OpId, UsageError> {
        self.acquire_all_with(now, resources, &LockOptions::default())
    }

    /// Makes one attempt to acquire every resource of `resources` at once, without retry.
    pub fn try_acquire_all(
        &mut self,
        now: Instant,
        resources: impl IntoIterator<Item = Resource>,
    ) -> Result<OpId, UsageError> {
        let once = RetryPolicy {
            max_attempts: Some(1),
            max_wait: None,
            ..self.config.retry
        };
        let options = LockOptions::default().retry(once);
        self.acquire_all_with(now, resources, &options)
    }

    /// Starts acquiring every resource of `resources` at once with per-lock options; see
    /// [`Lock::acquire_all`]. The outcome comes as one
    /// [`Event::Acquired`](crate::Event::Acquired) or
    /// [`Event::AcquireFailed`](crate::Event::AcquireFailed), named by the first resource.
    ///
    /// A multi-lock does not wait in the client's local lines (queue.rs): it contends on
    /// the nodes at once (docs/kinds.md, "The local line").
    pub fn acquire_all_with(
        &mut self,
        now: Instant,
        resources: impl IntoIterator<Item = Resource>,
        options: &LockOptions,
    ) -> Result<OpId, UsageError> {
        self.start(now, false, |now, op, (config, _), rng| {
            Lock::acquire_all(now, op, config, resources, options, rng)
        })
    }

    /// Starts the operation `make` creates under a fresh id, from the configuration and the
    /// default options' parameters (`Settings`) (a usage error changes nothing),
    /// at the end of its resource's line if `in_line` (lock calls; queue.rs).
    fn start(
        &mut self,
        now: Instant,
        in_line: bool,
        make: impl FnOnce(Instant, OpId, Settings<'_>, &mut R) -> Result<Lock, UsageError>,
    ) -> Result<OpId, UsageError> {
        self.check_drained()?;
        let now = self.clock(now);
        let op = OpId::from_raw(self.next_op);
        // Made straight into its place in the table, then changed there: a lock is a large
        // struct, and each move of it is a copy.
        let settings = (&self.config, self.defaults.as_ref());
        let rng = &mut self.rng;
        let lock = match (self.locks).insert_with(op, in_line, || make(now, op, settings, rng)) {
            Ok(lock) => lock,
            Err(e) => {
                self.drained = true;
                return Err(e);
            }
        };
        self.next_op += 1;
        if self.lines.queue_refused() {
            // A node refused the queue's script to an earlier call (client/locks.rs).
            lock.without_queue();
        }
        if lock.queues()
            && let Some((at, ms)) = self.health.wall()
        {
            lock.set_wall_clock(at, ms);
        }
        let (ttl, fenced) = (lock.ttl(), lock.is_fenced());
        let (config, nodes) = (&self.config, &mut self.nodes[..]);
        (self.health).lock_started((config, nodes), now, (ttl, fenced), &mut self.events);
        if in_line {
            self.lines.join(lock.resource(), op, now);
            if self.config.release_notifications.is_some() {
                let nodes = (&mut self.nodes[..], &mut self.dirty);
                let (lines, watching) = (&mut self.lines, &mut self.watching);
                super::hearing::follow_line(lines, watching, nodes, lock.resource(), now);
            }
        }
        self.pump(now, op);
        Ok(op)
    }

    /// Starts a read-only inspection of `resource` on every node; see [`Lock::inspect`].
    /// The outcome comes as [`Event::Inspected`](crate::Event::Inspected) carrying the
    /// returned id.
    pub fn inspect(&mut self, now: Instant, resource: Resource) -> Result<OpId, UsageError> {
        self.start(now, false, |now, op, (config, _), _| {
            Lock::inspect(now, op, config, resource)
        })
    }

    /// Starts releasing `resource` where it holds exactly `token`, on every node, for a
    /// lock this client does not hold; see [`Lock::release_token`]. The outcome comes as
    /// [`Event::Released`](crate::Event::Released) carrying the returned id.
    pub fn release_token(
        &mut self,
        now: Instant,
        resource: Resource,
        token: &Token,
    ) -> Result<OpId, UsageError> {
        self.start(now, false, |now, op, (config, _), _| {
            Lock::release_token(now, op, config, resource, token)
        })
    }

    /// Extends a held lock by its ttl from `now`; see [`Lock::extend`].
    pub fn extend(&mut self, now: Instant, op: OpId) -> Result<(), UsageError> {
        self.mutate(now, op, |lock, now| lock.extend(now))
    }

    /// Releases a held lock on all nodes; see [`Lock::release`].
    ///
    /// If another lock call of this client waits in line for the resource, the hold is
    /// handed over to it instead, and nothing is sent: this lock's
    /// [`Event::Released`](crate::Event::Released) reports every node
    /// [`ReleaseOutcome::HandedOver`](crate::ReleaseOutcome::HandedOver), and the next
    /// call's [`Event::Acquired`](crate::Event::Acquired) carries the same token and
    /// deadline, the validity left and
    /// [`AcquireStats::handed_over`](crate::AcquireStats::handed_over). Not when the line
    /// yields to other clients, for a fenced lock, or with too little validity left
    /// (docs/design.md, "Local queueing"): then the release goes to the nodes and the next
    /// call acquires there.
    pub fn release(&mut self, now: Instant, op: OpId) -> Result<(), UsageError> {
        self.check_drained()?;
        let now = self.clock(now);
        if self.config.release_notifications.is_some() {
            // Listening while it may hand over, and not while it is contested.
            self.follow_line_of(now, op);
        }
        if self.lines.any_waited() {
            let (watching, nodes) = (&self.watching, &self.nodes[..]);
            let everywhere = |resource: &Resource| watching.hears_everywhere(resource, nodes);
            if let Some(next) = self.locks.hand_over(&mut self.lines, now, op, everywhere) {
                self.locks.pass_channel(&mut self.watching, (op, next));
                // The new holder's `Acquired` goes out before the old one's `Released`: a
                // driver that wakes each caller as it reads its event starts the next
                // section first (docs/design.md, "Hand-over").
                self.pump(now, next);
                self.pump(now, op);
                return Ok(());
            }
            if let Some(next) = (self.locks).place_next(&self.lines, now, op, &mut self.rng) {
                // Its subscription goes out ahead of the release that places it, so that every
                // announcement a node makes for its place reaches it.
                self.pump(now, next);
            }
        }
        self.change(now, op, |lock, now| lock.release(now))
    }

    /// Cancels an acquisition or releases a held lock; see [`Lock::cancel`].
    pub fn cancel(&mut self, now: Instant, op: OpId) -> Result<(), UsageError> {
        self.mutate(now, op, |lock, now| {
            lock.cancel(now);
            Ok(())
        })
    }

    /// Changes the lock `op` by `f` and pumps it; a usage error (an unknown `op`, or one
    /// `f` returns) changes nothing.
    fn mutate(
        &mut self,
        now: Instant,
        op: OpId,
        f: impl FnOnce(&mut Lock, Instant) -> Result<(), UsageError>,
    ) -> Result<(), UsageError> {
        self.check_drained()?;
        let now = self.clock(now);
        self.change(now, op, f)
    }

    /// [`mutate`](Self::mutate) once the client was found drained and `now` clamped.
    fn change(
        &mut self,
        now: Instant,
        op: OpId,
        f: impl FnOnce(&mut Lock, Instant) -> Result<(), UsageError>,
    ) -> Result<(), UsageError> {
        let result = match self.locks.get_mut(&op) {
            Some(lock) => f(lock, now),
            None => Err(UsageError::UnknownOp(op)),
        };
        match result {
            Ok(()) => self.pump(now, op),
            // Nothing changed: still drained.
            Err(_) => self.drained = true,
        }
        result
    }
}
