//! What a lock holder sees: [`LockGuard`] (releases on drop) and [`LockRef`] (a cheap view
//! for code running under the lock). Both read the state the driver loop publishes and send
//! their requests to it; neither touches a socket.

use std::ops::Deref;
use std::sync::Arc;
use std::time::{Duration, Instant};

use redlock_core::{AcquireStats, LockKind, LostReason, OpId, ReleaseOutcome, Resource, Token};
use tokio::sync::{mpsc, oneshot, watch};

use crate::error::LockError;
use crate::request::{Cmd, LockState, Request};

/// A view of a held lock: what it holds (kind, resources), token, deadline, remaining
/// validity, loss, extension.
///
/// Cheap to clone; does not release anything when dropped.
#[derive(Debug, Clone)]
pub struct LockRef {
    pub(crate) op: OpId,
    /// The resource that names the lock: a multi-lock's first in byte order.
    pub(crate) resource: Resource,
    /// A multi-lock's set in byte order; `None` for a lock of one resource, which is
    /// `resource` (no allocation per lock for the common case).
    pub(crate) resources: Option<Arc<[Resource]>>,
    /// The kind the lock was taken as (a multi-lock is a mutex of each resource).
    pub(crate) kind: LockKind,
    pub(crate) token: Token,
    /// How the acquisition went.
    pub(crate) stats: Arc<AcquireStats>,
    /// The fencing token of a fenced lock.
    pub(crate) fencing_token: Option<u64>,
    pub(crate) state: watch::Receiver<LockState>,
    pub(crate) tx: mpsc::UnboundedSender<Cmd>,
    /// The driver loop's clock, which the deadline is an instant of.
    pub(crate) clock: fn() -> Instant,
}

impl LockRef {
    /// The locked resource; a multi-lock's first resource in byte order, which names it
    /// (see [`resources`](Self::resources) for them all).
    pub fn resource(&self) -> &Resource {
        &self.resource
    }

    /// Every resource this lock holds: the one resource, or a multi-lock's set sorted by
    /// bytes and deduplicated (docs/kinds.md, "Multi-resource lock").
    pub fn resources(&self) -> &[Resource] {
        match &self.resources {
            Some(set) => set,
            None => std::slice::from_ref(&self.resource),
        }
    }

    /// The kind this lock was taken as: [`LockKind::Mutex`] (a plain lock, and each
    /// resource of a multi-lock), [`LockKind::Read`], [`LockKind::Write`] or
    /// [`LockKind::Semaphore`] with its permits.
    pub fn kind(&self) -> LockKind {
        self.kind
    }

    /// The token stored on the nodes.
    pub fn token(&self) -> &Token {
        &self.token
    }

    /// How the acquisition went: attempts, time spent, and each node's answer in the
    /// successful attempt (a failure carries the same in [`LockError::Acquire`]).
    pub fn stats(&self) -> &AcquireStats {
        &self.stats
    }

    /// The fencing token of a fenced lock ([`LockOptions::fenced`], or fencing on in the
    /// configuration): pass it with every write to the storage the lock protects, which
    /// refuses a write whose token is below the largest it has seen. `None` when the lock
    /// is not fenced. See [`Acquired::fencing_token`](redlock_core::Acquired::fencing_token).
    ///
    /// [`LockOptions::fenced`]: redlock_core::LockOptions::fenced
    pub fn fencing_token(&self) -> Option<u64> {
        self.fencing_token
    }

    /// When the lock stops being safe to use (moved by each extension).
    pub fn deadline(&self) -> Instant {
        self.state.borrow().deadline
    }

    /// Validity left now, by the driver loop's clock; zero once the deadline passed or the
    /// lock was lost.
    pub fn validity(&self) -> Duration {
        let state = self.state.borrow();
        if state.lost.is_some() {
            return Duration::ZERO;
        }
        state.deadline.saturating_duration_since((self.clock)())
    }

    /// Why the lock was lost, if it was.
    pub fn lost_reason(&self) -> Option<LostReason> {
        self.state.borrow().lost.clone()
    }

    /// Resolves when the lock is lost, with the reason. Pending forever while it is held,
    /// and after it was released: a released lock is never reported lost. Use
    /// [`lost_or_released`](Self::lost_or_released) to wait for either.
    pub async fn lost(&self) -> LostReason {
        match self.lost_or_released().await {
            Some(reason) => reason,
            None => std::future::pending().await,
        }
    }

    /// Resolves when the lock ends: with the reason if it was lost, with `None` if it was
    /// released first. A lock whose driver is gone counts as lost.
    pub async fn lost_or_released(&self) -> Option<LostReason> {
        let mut state = self.state.clone();
        match state
            .wait_for(|s| s.lost.is_some() || s.released.is_some())
            .await
        {
            Ok(s) => s.lost.clone(),
            Err(_) => Some(self.lost_reason().unwrap_or(LostReason::DeadlinePassed)),
        }
    }

    /// Extends the lock by its ttl from now; returns the new deadline.
    ///
    /// Fails with [`LockError::Lost`] (sending nothing) if the deadline has passed.
    pub async fn extend(&self) -> Result<Instant, LockError> {
        if let Some(reason) = self.lost_reason() {
            return Err(LockError::Lost(reason));
        }
        let (reply, rx) = oneshot::channel();
        let cmd = Cmd(Request::Extend { op: self.op, reply });
        self.tx.send(cmd).map_err(|_| LockError::Shutdown)?;
        rx.await.map_err(|_| LockError::Shutdown)?
    }
}

/// A held lock. Dropping it releases the lock in the background.
#[derive(Debug)]
pub struct LockGuard {
    lock: LockRef,
    released: bool,
}

impl LockGuard {
    pub(crate) fn new(lock: LockRef) -> Self {
        Self {
            lock,
            released: false,
        }
    }

    /// A view to hand to code running under the lock.
    pub fn lock_ref(&self) -> LockRef {
        self.lock.clone()
    }

    /// Releases the lock on every node and reports what each did.
    ///
    /// After a loss the release may already have happened; its report is returned.
    pub async fn release(mut self) -> Result<Vec<ReleaseOutcome>, LockError> {
        self.released = true;
        if let Some(report) = self.lock.state.borrow().released.clone() {
            return Ok(report);
        }
        let (reply, rx) = oneshot::channel();
        let cmd = Cmd(Request::Release {
            op: self.lock.op,
            reply: Some(reply),
        });
        self.lock.tx.send(cmd).map_err(|_| LockError::Shutdown)?;
        match rx.await.map_err(|_| LockError::Shutdown)? {
            Ok(report) => Ok(report),
            // Finished meanwhile (released after a loss): its report is in the state.
            Err(e) => self.lock.state.borrow().released.clone().ok_or(e),
        }
    }
}

impl Deref for LockGuard {
    type Target = LockRef;

    fn deref(&self) -> &LockRef {
        &self.lock
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if !self.released {
            // Never blocks: the driver loop releases in the background. If the driver is
            // gone the keys expire on their own.
            let _ = self.lock.tx.send(Cmd(Request::Release {
                op: self.lock.op,
                reply: None,
            }));
        }
    }
}
