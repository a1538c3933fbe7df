//! The user's [`Handle`]: lock, try, lock with options, run a closure under a lock (the other
//! kinds' short forms are kinds.rs's). It only sends requests to the driver loop and awaits
//! the answers; the loop does the rest.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use redlock_core::{
    Config, Inspection, LockOptions, LostReason, ReleaseOutcome, Resource, RetryPolicy, Token,
    resource_set,
};
use tokio::sync::{mpsc, oneshot, watch};

use crate::error::{LockError, WithLockError};
use crate::guard::{LockGuard, LockRef};
use crate::request::{Acquire, Cmd, LockState, Request, Target};

/// A handle to a set of N nodes, served by a driver loop. Cheap to clone; `Send + Sync`.
///
/// The driver loop runs as long as a handle or a guard exists, or an operation (a background
/// release, say) is unfinished. The async drivers' `Redlock` derefs to this type; the blocking
/// driver's `Handle` wraps it.
#[derive(Debug, Clone)]
pub struct Handle {
    tx: mpsc::UnboundedSender<Cmd>,
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    config: Config,
    next_ticket: AtomicU64,
    /// The driver loop's clock: the core's deadlines are instants of it.
    clock: fn() -> Instant,
}

impl Handle {
    /// A handle sending to the driver loop that receives from `tx`'s channel.
    pub(crate) fn new(
        tx: mpsc::UnboundedSender<Cmd>,
        config: Config,
        clock: fn() -> Instant,
    ) -> Self {
        Self {
            tx,
            shared: Arc::new(Shared {
                config,
                next_ticket: AtomicU64::new(0),
                clock,
            }),
        }
    }

    /// The configuration in use.
    pub fn config(&self) -> &Config {
        &self.shared.config
    }

    /// Acquires `resource`, retrying per the configured policy.
    ///
    /// Dropping the returned future cancels the attempt and releases whatever it set.
    pub async fn lock(&self, resource: impl Into<Resource>) -> Result<LockGuard, LockError> {
        self.lock_with(resource, LockOptions::default()).await
    }

    /// Makes a single attempt to acquire `resource`.
    pub async fn try_lock(&self, resource: impl Into<Resource>) -> Result<LockGuard, LockError> {
        self.lock_with(resource, LockOptions::default().retry(self.once()))
            .await
    }

    /// Acquires with per-call options: ttl, wait, retry, token, auto-extension, and the
    /// lock's kind ([`LockOptions::kind`]: a reader, a writer or a semaphore; docs/kinds.md).
    pub async fn lock_with(
        &self,
        resource: impl Into<Resource>,
        options: LockOptions,
    ) -> Result<LockGuard, LockError> {
        self.acquire(Target::One(resource.into()), options).await
    }

    /// The configured retry policy cut to one attempt: what every `try_` call uses.
    pub(crate) fn once(&self) -> RetryPolicy {
        RetryPolicy {
            max_attempts: Some(1),
            max_wait: None,
            ..*self.config().retry()
        }
    }

    /// Sends the acquisition of `target` to the driver loop and waits for its guard.
    /// Dropping the future cancels the attempt and releases whatever it set.
    pub(crate) async fn acquire(
        &self,
        target: Target,
        options: LockOptions,
    ) -> Result<LockGuard, LockError> {
        let ticket = self.shared.next_ticket.fetch_add(1, Ordering::Relaxed);
        let (reply, rx) = oneshot::channel();
        let initial = LockState {
            deadline: (self.shared.clock)(),
            lost: None,
            released: None,
        };
        let (state, state_rx) = watch::channel(initial);
        let kind = options.kind;
        // The set the guard lists, as the core locks it; a list the core refuses is refused
        // here, before anything is sent.
        let set = match &target {
            Target::All(list) => Some(Arc::from(resource_set(list.iter().cloned())?)),
            Target::One(_) => None,
        };
        let cmd = Cmd(Request::Acquire(Acquire {
            ticket,
            target,
            options: Box::new(options),
            reply,
            state,
        }));
        self.tx.send(cmd).map_err(|_| LockError::Shutdown)?;
        let mut cancel = CancelOnDrop {
            tx: &self.tx,
            ticket,
            armed: true,
        };
        let result = rx.await;
        cancel.armed = false;
        let (op, acquired) = result.map_err(|_| LockError::Shutdown)??;
        Ok(LockGuard::new(LockRef {
            op,
            resource: acquired.resource,
            resources: set,
            kind,
            token: acquired.token,
            stats: Arc::new(acquired.stats),
            fencing_token: acquired.fencing_token,
            state: state_rx,
            tx: self.tx.clone(),
            clock: self.shared.clock,
        }))
    }

    /// Looks at `resource` on every node without changing anything: each node's holder (its
    /// stored value) and remaining ttl, whether a quorum agrees on one holder, and that
    /// holder's remaining validity as the algorithm computes it; and the same for readers,
    /// a waiting writer and permit holders ([`Inspection::shared`]). Plain reads (`GET`,
    /// `PTTL`, `ZREVRANGE`, `ZCARD`, `TIME`), so it works where an ACL denies scripting. See
    /// [`Inspection`] for what it cannot promise.
    pub async fn inspect(&self, resource: impl Into<Resource>) -> Result<Inspection, LockError> {
        let (reply, rx) = oneshot::channel();
        let resource = resource.into();
        self.send(Request::Inspect { resource, reply })?;
        rx.await.map_err(|_| LockError::Shutdown)?
    }

    /// Releases `resource` on every node where it holds exactly `token` (the whole stored
    /// value, as [`inspect`](Self::inspect) shows it), and reports each node. For letting go
    /// of a lock on purpose that this handle does not hold, such as a stuck holder's; a key
    /// holding any other value is left alone.
    pub async fn release_token(
        &self,
        resource: impl Into<Resource>,
        token: Token,
    ) -> Result<Vec<ReleaseOutcome>, LockError> {
        let (reply, rx) = oneshot::channel();
        let resource = resource.into();
        self.send(Request::ReleaseToken {
            resource,
            token,
            reply,
        })?;
        rx.await.map_err(|_| LockError::Shutdown)?
    }

    fn send(&self, request: Request) -> Result<(), LockError> {
        self.tx.send(Cmd(request)).map_err(|_| LockError::Shutdown)
    }

    /// Runs `f` under the lock with auto-extension, then releases.
    ///
    /// If the lock is lost while `f` runs, `f` can see it through [`LockRef::lost`], and the
    /// result is [`WithLockError::Lock`] with [`LockError::Lost`]. So it is if `f` returns at
    /// or after the lock's deadline by the driver loop's clock, even before the loop has
    /// noticed the deadline: `f`'s work may have outlived the lock. An error from `f` wins
    /// over any lock error.
    pub async fn with_lock<T, E, F, Fut>(
        &self,
        resource: impl Into<Resource>,
        f: F,
    ) -> Result<T, WithLockError<E>>
    where
        F: FnOnce(LockRef) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let auto = self.config().auto_extend().copied().unwrap_or_default();
        let options = LockOptions::default().auto_extend(Some(auto));
        let guard = self
            .lock_with(resource, options)
            .await
            .map_err(WithLockError::Lock)?;
        let result = f(guard.lock_ref()).await;
        // Decided here, by the clock, not only by the loop's report: the loop notices the
        // deadline when its timer fires, which may be after `f` returned (a busy or blocked
        // loop; a current-thread runtime that `f` blocked).
        let ended = (self.shared.clock)();
        let lost = guard
            .lost_reason()
            .or_else(|| (ended >= guard.deadline()).then_some(LostReason::DeadlinePassed));
        let released = guard.release().await;
        match (result, lost, released) {
            (Err(e), _, _) => Err(WithLockError::Closure(e)),
            (Ok(_), Some(reason), _) => Err(WithLockError::Lock(LockError::Lost(reason))),
            (Ok(_), None, Err(e)) => Err(WithLockError::Lock(e)),
            (Ok(value), None, Ok(_)) => Ok(value),
        }
    }
}

/// Cancels an acquisition whose future is dropped before it returned a guard.
struct CancelOnDrop<'a> {
    tx: &'a mpsc::UnboundedSender<Cmd>,
    ticket: u64,
    armed: bool,
}

impl Drop for CancelOnDrop<'_> {
    fn drop(&mut self) {
        if self.armed {
            let _ = self.tx.send(Cmd(Request::Cancel {
                ticket: self.ticket,
            }));
        }
    }
}
