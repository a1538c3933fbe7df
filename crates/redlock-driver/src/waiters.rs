//! The driver loop's bookkeeping: who waits for what on each operation ([`Waiters`]). It
//! turns requests into core calls and core events into answers; it never touches a socket or
//! a clock.

use std::time::Instant;

use rand_core::CryptoRng;
use redlock_core::{Acquired, Client, Event, Inspection, OpId, ReleaseOutcome, Resource};
use tokio::sync::watch;

use crate::error::LockError;
use crate::observe::{Observer, Step};
use crate::op_hash::OpMap;
use crate::request::{Acquire, Cmd, LockState, Reply, Request, Target};

/// Who waits for what on each operation in flight, and which acquired locks nobody holds.
///
/// The driver loop MUST hand every [`Cmd`](crate::Cmd) it receives to [`Waiters::command`] and every
/// `Event` it drains to [`Waiters::dispatch`], and SHOULD call [`Waiters::release_orphan`]
/// after each drain, before waiting.
#[derive(Default)]
pub struct Waiters {
    ops: OpMap<OpId, OpWaiters>,
    /// `lock()` calls by ticket, so that a dropped future can cancel its operation.
    tickets: OpMap<u64, OpId>,
    /// Locks acquired for a `lock()` future that was dropped.
    orphans: Vec<OpId>,
    /// Inspections and releases by token: one answer each, no lock state.
    queries: OpMap<OpId, Query>,
    /// Telemetry: requests and events from here, inputs and outputs from the loop.
    observer: Observer,
    /// Answers callers wait for: the replies held in `ops` and `queries` (see
    /// [`Waiters::callers_waiting`]), counted where each is stored and where each is sent or
    /// dropped.
    owed: usize,
}

/// Who waits for an operation on a lock this process does not hold.
enum Query {
    Inspect(Reply<Inspection>),
    ReleaseToken(Reply<Vec<ReleaseOutcome>>),
}

/// Who waits for what on one operation.
struct OpWaiters {
    ticket: u64,
    acquire: Option<Reply<(OpId, Acquired)>>,
    state: watch::Sender<LockState>,
    extend: Vec<Reply<Instant>>,
    release: Vec<Reply<Vec<ReleaseOutcome>>>,
}

impl Waiters {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// The loop's telemetry, which the loop MUST feed every input and output (see
    /// [`Observer`]); empty without the `tracing` and `metrics` features.
    pub fn observer(&mut self) -> &mut Observer {
        &mut self.observer
    }

    /// How many answers callers are waiting for (lock, extend, release, inspect calls): what
    /// a loop may batch for. With one, nothing but that caller can send the next request, so
    /// waiting for more only delays it.
    pub fn callers_waiting(&self) -> usize {
        self.owed
    }

    /// Feeds a request to the core: acquire, cancel, extend, release, inspect or release by
    /// token. Like every core input, the loop MUST drain the core before calling this.
    pub fn command<R: CryptoRng>(&mut self, now: Instant, client: &mut Client<R>, cmd: Cmd) {
        match cmd.0 {
            Request::Acquire(acquire) => self.acquire(now, client, acquire),
            Request::Cancel { ticket } => {
                // The `lock()` future was dropped before it made a guard: cancel the
                // acquisition, or release a lock nobody holds a guard for.
                if let Some(&op) = self.tickets.get(&ticket) {
                    self.observer.requested(now, op, Step::Cancel);
                    let _ = client.cancel(now, op);
                }
            }
            Request::Extend { op, reply } => self.extend(now, client, op, reply),
            Request::Release { op, reply } => {
                // Refused when already releasing (after a loss): wait for that release.
                let accepted = client.release(now, op).is_ok();
                match (self.ops.get_mut(&op), reply) {
                    (Some(w), Some(reply)) => {
                        w.release.push(reply);
                        self.owed += 1;
                    }
                    (None, Some(reply)) => drop(reply.send(Err(LockError::NotHeld))),
                    (_, None) => {}
                }
                if accepted && let Some(w) = self.ops.get_mut(&op) {
                    self.observer.requested(now, op, Step::Release);
                    // The release round replaces an extension in flight, whose answer will
                    // never come: the lock is no longer held for it.
                    self.owed -= w.answer_extensions(|| LockError::NotHeld);
                }
            }
            Request::Inspect { resource, reply } => match client.inspect(now, resource.clone()) {
                Ok(op) => {
                    self.observer.requested(now, op, Step::Inspect(&resource));
                    self.queries.insert(op, Query::Inspect(reply));
                    self.owed += 1;
                }
                Err(e) => drop(reply.send(Err(e.into()))),
            },
            Request::ReleaseToken {
                resource,
                token,
                reply,
            } => match client.release_token(now, resource.clone(), &token) {
                Ok(op) => {
                    self.observer
                        .requested(now, op, Step::ReleaseToken(&resource));
                    self.queries.insert(op, Query::ReleaseToken(reply));
                    self.owed += 1;
                }
                Err(e) => drop(reply.send(Err(e.into()))),
            },
        }
    }

    /// Starts an acquisition of `target` (one resource, or a multi-lock's set); a usage
    /// error is answered at once.
    fn acquire<R: CryptoRng>(&mut self, now: Instant, client: &mut Client<R>, call: Acquire) {
        let Acquire {
            ticket,
            target,
            options,
            reply,
            state,
        } = call;
        let started = match target {
            Target::One(resource) => {
                let starting = self.observer.acquiring(now, client, &resource);
                (client.acquire_with(now, resource, &options)).map(|op| (op, starting))
            }
            Target::All(resources) => {
                // The set's first resource in byte order names the lock (docs/kinds.md); an
                // empty list is the core's usage error, and its span is dropped with it.
                let first = (resources.iter().min().cloned()).unwrap_or_else(|| Resource::from(""));
                let starting = self.observer.acquiring(now, client, &first);
                (client.acquire_all_with(now, resources, &options)).map(|op| (op, starting))
            }
        };
        let (op, starting) = match started {
            Ok(started) => started,
            Err(e) => return drop(reply.send(Err(e.into()))),
        };
        self.observer.started(op, starting);
        self.tickets.insert(ticket, op);
        let waiters = OpWaiters {
            ticket,
            acquire: Some(reply),
            state,
            extend: Vec::new(),
            release: Vec::new(),
        };
        self.ops.insert(op, waiters);
        self.owed += 1;
    }

    /// Extends a held lock; the answer comes with the core's event, or now if refused.
    fn extend<R: CryptoRng>(
        &mut self,
        now: Instant,
        client: &mut Client<R>,
        op: OpId,
        reply: Reply<Instant>,
    ) {
        if client.extend(now, op).is_err() {
            let lost = (self.ops.get(&op)).and_then(|w| w.state.borrow().lost.clone());
            let err = lost.map_or(LockError::NotHeld, LockError::Lost);
            return drop(reply.send(Err(err)));
        }
        self.observer.requested(now, op, Step::Extend);
        match self.ops.get_mut(&op) {
            Some(w) => {
                w.extend.push(reply);
                self.owed += 1;
            }
            None => drop(reply.send(Err(LockError::NotHeld))),
        }
    }

    /// Hands a core event to whoever waits on its operation.
    pub fn dispatch(&mut self, event: Event) {
        self.observer.event(&event);
        let Some(op) = event.op() else {
            // News of a node (the restart quarantine, the clock check): for the observer
            // only; an acquisition the quarantine changes says so in its own outcome
            // (`NodeFault::Quarantined`).
            return;
        };
        if let Some(query) = self.queries.remove(&op) {
            self.owed -= 1;
            return query.answer(event);
        }
        let Some(w) = self.ops.get_mut(&op) else {
            return;
        };
        match event {
            Event::Acquired(acquired) => {
                set_deadline(&w.state, acquired.deadline);
                let reply = w.acquire.take();
                self.owed -= usize::from(reply.is_some());
                let delivered = reply.is_some_and(|reply| reply.send(Ok((op, acquired))).is_ok());
                if !delivered {
                    // The `lock()` future is gone: nobody will ever release this lock.
                    self.orphans.push(op);
                }
            }
            Event::AcquireFailed { reason, stats, .. } => {
                if let Some(reply) = w.acquire.take() {
                    self.owed -= 1;
                    let _ = reply.send(Err(LockError::Acquire { reason, stats }));
                }
                self.forget(op);
            }
            Event::Extended { deadline, .. } => {
                set_deadline(&w.state, deadline);
                self.owed -= w.extend.len();
                for reply in w.extend.drain(..) {
                    let _ = reply.send(Ok(deadline));
                }
            }
            Event::Lost { reason, .. } => {
                // Also emitted for a lock whose release is pending (released past its
                // deadline): the release waiters wait on for `Released`.
                w.state.send_modify(|s| s.lost = Some(reason.clone()));
                self.owed -= w.answer_extensions(|| LockError::Lost(reason.clone()));
            }
            Event::Released { nodes, .. } => {
                w.state.send_modify(|s| s.released = Some(nodes.clone()));
                self.owed -= w.release.len();
                // The last answer takes the report itself: one copy fewer per release.
                if let Some(last) = w.release.pop() {
                    for reply in w.release.drain(..) {
                        let _ = reply.send(Ok(nodes.clone()));
                    }
                    let _ = last.send(Ok(nodes));
                }
                self.forget(op);
            }
            _ => {}
        }
    }

    /// Releases one lock that was acquired for a dropped `lock()` future, if there is one,
    /// and says whether it did. Nobody else will ever release such a lock. Call it after a
    /// drain (it is a core input), once per loop turn, until it returns `false`.
    pub fn release_orphan<R: CryptoRng>(&mut self, now: Instant, client: &mut Client<R>) -> bool {
        let Some(op) = self.orphans.pop() else {
            return false;
        };
        if client.release(now, op).is_ok() {
            self.observer.requested(now, op, Step::Release);
        }
        true
    }

    /// Drops a finished operation. Whoever still waits on it is answered "not held": a
    /// dropped answer would read as [`LockError::Shutdown`], which means the driver is gone.
    fn forget(&mut self, op: OpId) {
        if let Some(mut w) = self.ops.remove(&op) {
            // Every reply it holds is answered or dropped here.
            self.owed -= usize::from(w.acquire.is_some()) + w.extend.len() + w.release.len();
            self.tickets.remove(&w.ticket);
            w.answer_extensions(|| LockError::NotHeld);
            for reply in w.release.drain(..) {
                let _ = reply.send(Err(LockError::NotHeld));
            }
        }
    }
}

impl Query {
    /// Answers with the operation's one event (any other cannot come: see `Lock`).
    fn answer(self, event: Event) {
        match (self, event) {
            (Self::Inspect(reply), Event::Inspected { inspection, .. }) => {
                let _ = reply.send(Ok(inspection));
            }
            (Self::ReleaseToken(reply), Event::Released { nodes, .. }) => {
                let _ = reply.send(Ok(nodes));
            }
            // Dropping the reply reads as `Shutdown`; a mismatch would be a core bug.
            _ => debug_assert!(false, "an operation's event of another kind"),
        }
    }
}

/// Moves a lock's deadline without waking anyone: a guard reads it when asked, and what a
/// guard waits for (`LockRef::lost`) is a loss or a release, never a deadline. Waking the
/// channel's waiters costs a lock and a scan of its notifiers per acquisition and extension.
fn set_deadline(state: &watch::Sender<LockState>, deadline: Instant) {
    state.send_if_modified(|s| {
        s.deadline = deadline;
        false
    });
}

impl OpWaiters {
    /// Answers every extension waiting on this operation with `err()`; returns how many.
    fn answer_extensions(&mut self, err: impl Fn() -> LockError) -> usize {
        let answered = self.extend.len();
        for reply in self.extend.drain(..) {
            let _ = reply.send(Err(err()));
        }
        answered
    }
}
