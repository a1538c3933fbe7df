//! What a lock holder sees: [`LockGuard`] (releases on drop) and [`LockRef`] (a cheap view
//! for code running under the lock). Blocking faces on `redlock-driver`'s guard and view:
//! they read the state the driver thread publishes and wait for its answers by parking.

use std::ops::Deref;
use std::time::{Duration, Instant};

use redlock_core::{AcquireStats, LockKind, LostReason, ReleaseOutcome, Resource, Token};
use redlock_driver::{LockError, Start};

use crate::MioThread;

use crate::park::{block_on, block_until};

/// A view of a held lock: what it holds (kind, resources), token, deadline, remaining
/// validity, loss, extension.
///
/// Cheap to clone; does not release anything when dropped.
#[derive(Debug, Clone)]
pub struct LockRef(pub(crate) redlock_driver::LockRef);

impl LockRef {
    /// The locked resource.
    pub fn resource(&self) -> &Resource {
        self.0.resource()
    }

    /// Every resource this lock holds: the one resource, or a multi-lock's set in byte
    /// order. See [`redlock_driver::LockRef::resources`].
    pub fn resources(&self) -> &[Resource] {
        self.0.resources()
    }

    /// The kind this lock was taken as (a multi-lock is a mutex of each resource).
    pub fn kind(&self) -> LockKind {
        self.0.kind()
    }

    /// The token stored on the nodes.
    pub fn token(&self) -> &Token {
        self.0.token()
    }

    /// How the acquisition went: attempts, time spent, and each node's answer in the
    /// successful attempt (a failure carries the same in [`LockError::Acquire`]).
    pub fn stats(&self) -> &AcquireStats {
        self.0.stats()
    }

    /// The fencing token of a fenced lock; `None` when the lock is not fenced. See
    /// [`redlock_driver::LockRef::fencing_token`].
    pub fn fencing_token(&self) -> Option<u64> {
        self.0.fencing_token()
    }

    /// When the lock stops being safe to use (moved by each extension).
    pub fn deadline(&self) -> Instant {
        self.0.deadline()
    }

    /// Validity left now; zero once the deadline passed or the lock was lost.
    pub fn validity(&self) -> Duration {
        self.0.validity()
    }

    /// Whether the lock was lost.
    pub fn is_lost(&self) -> bool {
        self.0.lost_reason().is_some()
    }

    /// Why the lock was lost, if it was.
    pub fn lost_reason(&self) -> Option<LostReason> {
        self.0.lost_reason()
    }

    /// Blocks until the lock is lost and returns the reason, or returns `None` once
    /// `timeout` passes or the lock is released (a released lock is never reported lost).
    pub fn wait_lost(&self, timeout: Duration) -> Option<LostReason> {
        let deadline = MioThread::now().checked_add(timeout);
        block_until(self.0.lost_or_released(), deadline).flatten()
    }

    /// Extends the lock by its ttl from now; blocks until decided and returns the new
    /// deadline.
    ///
    /// Fails with [`LockError::Lost`] (sending nothing) if the deadline has passed.
    pub fn extend(&self) -> Result<Instant, LockError> {
        block_on(self.0.extend())
    }
}

/// A held lock. Dropping it releases the lock in the background, never blocking the
/// dropping thread beyond a channel send.
#[derive(Debug)]
pub struct LockGuard {
    guard: redlock_driver::LockGuard,
    view: LockRef,
}

impl LockGuard {
    pub(crate) fn new(guard: redlock_driver::LockGuard) -> Self {
        let view = LockRef(guard.lock_ref());
        Self { guard, view }
    }

    /// A view to hand to code running under the lock.
    pub fn lock_ref(&self) -> LockRef {
        self.view.clone()
    }

    /// Releases the lock on every node; blocks until each node answered or timed out, and
    /// reports what each did.
    ///
    /// After a loss the release may already have happened; its report is returned.
    pub fn release(self) -> Result<Vec<ReleaseOutcome>, LockError> {
        block_on(self.guard.release())
    }
}

impl Deref for LockGuard {
    type Target = LockRef;

    fn deref(&self) -> &LockRef {
        &self.view
    }
}
