//! What a lock holder sees: [`LockGuard`] (releases on drop) and [`LockRef`] (a cheap view
//! for code running under the lock). Both read the state the driver thread publishes in a
//! [`Watch`]; neither decides anything about the lock.

use std::ops::Deref;
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use redlock_core::{LockError, LostReason, OpId, ReleaseOutcome, Resource, Token};

use crate::Link;
use crate::driver::Cmd;

/// What the driver publishes about one lock.
#[derive(Debug, Clone)]
pub(crate) struct LockState {
    pub(crate) deadline: Instant,
    pub(crate) lost: Option<LostReason>,
    pub(crate) released: Option<Vec<ReleaseOutcome>>,
}

/// A [`LockState`] the driver updates and holders read or wait on.
#[derive(Debug)]
pub(crate) struct Watch {
    state: Mutex<LockState>,
    changed: Condvar,
}

impl Watch {
    /// The state of a lock being acquired; `deadline` is a placeholder until it is held.
    pub(crate) fn new(deadline: Instant) -> Self {
        let state = LockState {
            deadline,
            lost: None,
            released: None,
        };
        Self {
            state: Mutex::new(state),
            changed: Condvar::new(),
        }
    }

    pub(crate) fn get(&self) -> MutexGuard<'_, LockState> {
        // Writers only assign fields, so a poisoned state is still consistent.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn update(&self, f: impl FnOnce(&mut LockState)) {
        f(&mut self.get());
        self.changed.notify_all();
    }
}

/// A view of a held lock: token, deadline, remaining validity, loss, extension.
///
/// Cheap to clone; does not release anything when dropped.
#[derive(Debug, Clone)]
pub struct LockRef {
    pub(crate) op: OpId,
    pub(crate) resource: Resource,
    pub(crate) token: Token,
    pub(crate) watch: Arc<Watch>,
    pub(crate) link: Arc<Link>,
}

impl LockRef {
    /// The locked resource.
    pub fn resource(&self) -> &Resource {
        &self.resource
    }

    /// The token stored on the nodes.
    pub fn token(&self) -> &Token {
        &self.token
    }

    /// When the lock stops being safe to use (moved by each extension).
    pub fn deadline(&self) -> Instant {
        self.watch.get().deadline
    }

    /// Validity left now; zero once the deadline passed or the lock was lost.
    pub fn validity(&self) -> Duration {
        let state = self.watch.get();
        if state.lost.is_some() {
            return Duration::ZERO;
        }
        state.deadline.saturating_duration_since(Instant::now())
    }

    /// Whether the lock was lost.
    pub fn is_lost(&self) -> bool {
        self.watch.get().lost.is_some()
    }

    /// Why the lock was lost, if it was.
    pub fn lost_reason(&self) -> Option<LostReason> {
        self.watch.get().lost.clone()
    }

    /// Blocks until the lock is lost and returns the reason, or returns `None` once
    /// `timeout` passes or the lock is released (a released lock is never reported lost).
    pub fn wait_lost(&self, timeout: Duration) -> Option<LostReason> {
        let state = self.watch.get();
        let (state, _) = self
            .watch
            .changed
            .wait_timeout_while(state, timeout, |s| s.lost.is_none() && s.released.is_none())
            .unwrap_or_else(PoisonError::into_inner);
        state.lost.clone()
    }

    /// Extends the lock by its ttl from now; blocks until decided and returns the new
    /// deadline.
    ///
    /// Fails with [`LockError::Lost`] (sending nothing) if the deadline has passed.
    pub fn extend(&self) -> Result<Instant, LockError> {
        if let Some(reason) = self.lost_reason() {
            return Err(LockError::Lost(reason));
        }
        let (reply, rx) = mpsc::sync_channel(1);
        self.link.send(Cmd::Extend(self.op, reply))?;
        rx.recv().map_err(|_| LockError::Shutdown)?
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

    /// Releases the lock on every node; blocks until each node answered or timed out, and
    /// reports what each did.
    ///
    /// After a loss the release may already have happened; its report is returned.
    pub fn release(mut self) -> Result<Vec<ReleaseOutcome>, LockError> {
        self.released = true;
        if let Some(report) = self.lock.watch.get().released.clone() {
            return Ok(report);
        }
        let (reply, rx) = mpsc::sync_channel(1);
        self.lock
            .link
            .send(Cmd::Release(self.lock.op, Some(reply)))?;
        match rx.recv().map_err(|_| LockError::Shutdown)? {
            Ok(report) => Ok(report),
            // Finished meanwhile (released after a loss): its report is in the state.
            Err(e) => self.lock.watch.get().released.clone().ok_or(e),
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
            // Never blocks beyond a channel send: the driver thread releases in the
            // background. If the driver is gone the keys expire on their own.
            let _ = self.lock.link.send(Cmd::Release(self.lock.op, None));
        }
    }
}
