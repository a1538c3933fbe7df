//! What passes between the user's side and the driver loop: the requests handles and guards
//! send ([`Cmd`]), where the loop answers each ([`Reply`]), and what it publishes about a held
//! lock ([`LockState`]). Plain data; neither side's logic lives here.

use std::time::Instant;

use redlock_core::{
    Acquired, Inspection, LockOptions, LostReason, OpId, ReleaseOutcome, Resource, Token,
};
use tokio::sync::{oneshot, watch};

use crate::error::LockError;

/// A request from a [`Handle`](crate::Handle), [`LockGuard`](crate::LockGuard) or
/// [`LockRef`](crate::LockRef) to the driver loop. Opaque: the loop receives it from
/// [`DriverParts::commands`](crate::DriverParts::commands) and hands it to
/// [`Waiters::command`](crate::Waiters::command).
pub struct Cmd(pub(crate) Request);

/// The requests themselves.
pub(crate) enum Request {
    /// Acquire a lock.
    Acquire(Acquire),
    /// The `lock()` future was dropped before it returned a guard.
    Cancel {
        ticket: u64,
    },
    Extend {
        op: OpId,
        reply: Reply<Instant>,
    },
    /// Release; `reply` is `None` when a guard is dropped.
    Release {
        op: OpId,
        reply: Option<Reply<Vec<ReleaseOutcome>>>,
    },
    /// A read-only look at who holds `resource`.
    Inspect {
        resource: Resource,
        reply: Reply<Inspection>,
    },
    /// Release `resource` where it holds `token`: a lock this process does not hold.
    ReleaseToken {
        resource: Resource,
        token: Token,
        reply: Reply<Vec<ReleaseOutcome>>,
    },
}

/// A lock call: what to lock, how, and where to answer.
pub(crate) struct Acquire {
    /// The call's ticket, which a dropped `lock()` future cancels by.
    pub(crate) ticket: u64,
    /// The resource, or the multi-lock's set.
    pub(crate) target: Target,
    /// Boxed: the options are most of the request's size, and acquisitions are the one
    /// request that carries them.
    pub(crate) options: Box<LockOptions>,
    /// Where the acquisition's outcome goes.
    pub(crate) reply: Reply<(OpId, Acquired)>,
    /// Where the driver publishes the held lock's state.
    pub(crate) state: watch::Sender<LockState>,
}

/// What an acquisition locks: one resource (a lock of any kind), or a set of resources at
/// once (a multi-lock, docs/kinds.md "Multi-resource lock").
pub(crate) enum Target {
    /// One resource, taken as the options' kind.
    One(Resource),
    /// Every resource of the list, all or none (the core sorts and deduplicates it).
    All(Vec<Resource>),
}

/// Where the driver answers one request.
pub(crate) type Reply<T> = oneshot::Sender<Result<T, LockError>>;

/// What the driver publishes about one lock.
#[derive(Debug, Clone)]
pub(crate) struct LockState {
    pub(crate) deadline: Instant,
    pub(crate) lost: Option<LostReason>,
    pub(crate) released: Option<Vec<ReleaseOutcome>>,
}
