//! [`Lock`]: the whole life of one lock (acquire with retries, hold, extend, lose, release)
//! as per-node requests and reply reading, with no connections.
//!
//! This is the operation layer: a library that owns its own Redis connections drives a
//! `Lock` directly, sending each [`Request`] to its node by any client and handing back the
//! reply. [`Client`](crate::Client) drives many of them over its own byte streams. The
//! decision rules are those of `docs/algorithm.md`; each is cited where it is applied.

use std::collections::VecDeque;
use std::time::Instant;

use bytes::BytesMut;

use rand_core::CryptoRng;

use crate::command::{Command, Vote};
use crate::config::Config;
use crate::error::UsageError;
use crate::id::{NodeId, OpId, RequestId};
use crate::io::{AcquireFailure, Event, NodeFault};
use crate::options::{LockOptions, LockParams, ValidityFrom};
use crate::quorum::{self, Decision};
use crate::resp::Reply;
use crate::round::{Round, Slot};
use crate::token::{Resource, Token};

mod acquire;
mod extend;
mod release;

/// One lock's life, sans IO: acquire with retries, hold, extend, lose, release, as
/// per-node [`Request`]s and reply reading, with no connections.
///
/// For libraries that own their Redis connections: send each request's
/// [`Command`](crate::Command) to its node with any client and hand back the reply.
/// [`Client`](crate::Client) drives many locks over its own byte streams.
///
/// Call order: create with [`acquire`](Self::acquire); then repeatedly drain
/// [`poll_request`](Self::poll_request) (send each request) and
/// [`poll_event`](Self::poll_event); wait for a reply or [`poll_timeout`](Self::poll_timeout)
/// and feed it with [`handle_reply`](Self::handle_reply) or
/// [`handle_timeout`](Self::handle_timeout). A request to a node you cannot reach MUST be
/// answered at once with `Err(NodeFault::Disconnected)`, so a dead node never delays a
/// decision. The lock is over when [`is_finished`](Self::is_finished).
#[derive(Debug)]
pub struct Lock {
    op: OpId,
    resource: Resource,
    params: LockParams,
    supplied_token: Option<Token>,
    phase: Phase,
    /// The round the phase is waiting on: an acquire attempt, an extension or the release.
    main: Option<Round>,
    /// Releases of failed or cancelled attempts; they report nothing.
    cleanup: Vec<Round>,
    next_seq: u32,
    events: Events,
    /// The slots of the last finished round, kept for the next round's use.
    spare_slots: Vec<Slot>,
}

/// A request for one node, handed out by [`Lock::poll_request`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// Hand this back with the reply.
    pub id: RequestId,
    /// The node to send the command to.
    pub node: NodeId,
    /// The command.
    pub command: Command,
}

#[derive(Debug)]
enum Phase {
    Acquiring {
        attempts: u32,
        first_start: Instant,
        retry_at: Option<Instant>,
        /// The token of the attempt in flight (or of the last one).
        token: Token,
    },
    Held(Held),
    /// Lost at its deadline; the release waits until the keys should have expired.
    Expired {
        token: Token,
        release_at: Instant,
    },
    Releasing,
    Finished,
}

#[derive(Debug)]
struct Held {
    token: Token,
    deadline: Instant,
    acquired_at: Instant,
    renewals: u32,
    renew_at: Option<Instant>,
    retry_at: Option<Instant>,
    /// Faults of the last failed extension, reported if the deadline passes before the next
    /// succeeds.
    last_failure: Option<Vec<(NodeId, NodeFault)>>,
}

/// Events waiting for [`Lock::poll_event`]. The first is kept inline, so a lock that reports
/// one event at a time (the usual case) never allocates for them.
#[derive(Debug, Default)]
struct Events {
    /// The oldest event; set only while `rest` is empty, so it is always the oldest.
    first: Option<Event>,
    rest: VecDeque<Event>,
}

impl Events {
    #[inline]
    fn push_back(&mut self, event: Event) {
        if self.first.is_none() && self.rest.is_empty() {
            self.first = Some(event);
        } else {
            self.rest.push_back(event);
        }
    }

    #[inline]
    fn pop_front(&mut self) -> Option<Event> {
        // Checked before taking: `take` of an empty slot still moves a whole `Event`.
        if self.first.is_some() {
            self.first.take()
        } else {
            self.rest.pop_front()
        }
    }
}

impl Lock {
    /// Starts acquiring `resource`; the first attempt's requests are ready at once.
    ///
    /// `now` is `t0` of the first attempt: take it before sending anything.
    pub fn acquire<R: CryptoRng + ?Sized>(
        now: Instant,
        op: OpId,
        config: &Config,
        resource: Resource,
        options: &LockOptions,
        rng: &mut R,
    ) -> Result<Self, UsageError> {
        if resource.as_bytes().is_empty() {
            return Err(UsageError::EmptyResource);
        }
        let params = options.resolve(config).map_err(UsageError::InvalidOption)?;
        let token = acquire::attempt_token(options.token.as_ref(), &params, rng);
        let mut lock = Self {
            op,
            resource,
            params,
            supplied_token: options.token.clone(),
            phase: Phase::Finished,
            main: None,
            cleanup: Vec::new(),
            next_seq: 0,
            events: Events::default(),
            spare_slots: Vec::new(),
        };
        lock.phase = Phase::Acquiring {
            attempts: 0,
            first_start: now,
            retry_at: None,
            token,
        };
        lock.start_attempt::<R>(now, None);
        Ok(lock)
    }

    /// The operation id events carry.
    pub fn op(&self) -> OpId {
        self.op
    }

    /// The resource being locked.
    pub fn resource(&self) -> &Resource {
        &self.resource
    }

    /// The token and deadline while the lock is held.
    pub fn held(&self) -> Option<(&Token, Instant)> {
        match &self.phase {
            Phase::Held(h) => Some((&h.token, h.deadline)),
            _ => None,
        }
    }

    /// Nothing more will be sent or reported; the lock can be dropped.
    #[inline]
    pub fn is_finished(&self) -> bool {
        matches!(self.phase, Phase::Finished) && self.main.is_none() && self.cleanup.is_empty()
    }

    /// The next request to send, if any. Drain after every call that changes the lock.
    pub fn poll_request(&mut self) -> Option<Request> {
        let (id, node, eval) = self.next_send()?;
        let command = self.round(id.round())?.command_for(eval);
        Some(Request { id, node, command })
    }

    /// The next request as (id, node, is the `EVAL` form), without building its command:
    /// cleanup releases first, then the main round.
    ///
    /// No order between rounds is needed for safety: every attempt stores its own value, so
    /// an older round's command that runs after a newer one's, on this connection or on a
    /// dead one whose bytes arrive late, compares another value and touches nothing of the
    /// newer attempt (see `acquire::attempt_token`).
    #[inline]
    pub(crate) fn next_send(&mut self) -> Option<(RequestId, NodeId, bool)> {
        for round in &mut self.cleanup {
            if let Some(send) = round.next_send() {
                return Some(send);
            }
        }
        self.main.as_mut()?.next_send()
    }

    /// Appends the RESP bytes of a request from [`next_send`](Self::next_send).
    pub(crate) fn encode_request(&self, id: RequestId, eval: bool, buf: &mut BytesMut) {
        if let Some(round) = self.round(id.round()) {
            round.encode_for(eval, buf);
        }
    }

    fn round(&self, seq: u32) -> Option<&Round> {
        self.cleanup.iter().chain(&self.main).find(|r| r.seq == seq)
    }

    /// The next event, if any.
    #[inline]
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// The earliest time at which [`handle_timeout`](Self::handle_timeout) has work.
    #[inline]
    pub fn poll_timeout(&self) -> Option<Instant> {
        let phase = match &self.phase {
            Phase::Acquiring { retry_at, .. } => *retry_at,
            Phase::Held(h) => {
                let deadline = self.params.deadline_ends_lock.then_some(h.deadline);
                [deadline, h.renew_at, h.retry_at]
                    .into_iter()
                    .flatten()
                    .min()
            }
            Phase::Expired { release_at, .. } => Some(*release_at),
            Phase::Releasing | Phase::Finished => None,
        };
        // Plain loops: this runs after every reply, and iterator chains of `Option`s cost
        // several times as much here.
        let mut next = phase;
        for round in self.cleanup.iter().chain(&self.main) {
            next = Some(next.map_or(round.deadline, |t| t.min(round.deadline)));
        }
        next
    }

    /// Feeds a node's reply (`Ok`) or failure (`Err`) to the request `id`.
    ///
    /// Replies to requests that no longer matter (timed out, decided, unknown) are ignored.
    pub fn handle_reply<R: CryptoRng + ?Sized>(
        &mut self,
        now: Instant,
        id: RequestId,
        reply: Result<&Reply, NodeFault>,
        rng: &mut R,
    ) {
        // A reply read late must not count past a deadline the driver has not fed us yet:
        // a vote after the round's deadline is a timeout, an extension after the lock's
        // deadline cannot save it.
        if self.poll_timeout().is_some_and(|t| t <= now) {
            self.handle_timeout(now, rng);
        }
        let seq = id.round();
        let rounds = self.cleanup.iter_mut().chain(self.main.as_mut());
        let Some(round) = rounds.into_iter().find(|r| r.seq == seq) else {
            return;
        };
        let vote = match reply {
            Ok(reply) => round.command.vote(reply),
            Err(fault) => Vote::Fault(fault),
        };
        round.handle_reply(id.node(), vote);
        self.progress(now, rng);
    }

    /// Handles every timer due at `now`: node deadlines, retries, renewals, the lock deadline.
    pub fn handle_timeout<R: CryptoRng + ?Sized>(&mut self, now: Instant, rng: &mut R) {
        self.cleanup
            .retain(|r| r.deadline > now && !r.is_complete());
        // algorithm.md §9: past the deadline the lock is lost, whatever is in flight;
        // a late extension reply can no longer bring it back. Falls through: if the keys
        // should be gone already, the release starts now.
        self.lose_if_past_deadline(now);
        if let Some(round) = self.main.as_mut().filter(|r| r.deadline <= now) {
            round.expire();
            self.progress(now, rng);
        }
        match &mut self.phase {
            Phase::Acquiring { retry_at, .. } if retry_at.is_some_and(|t| t <= now) => {
                *retry_at = None;
                self.start_attempt(now, Some(rng));
            }
            Phase::Held(h) if self.main.is_none() => {
                let due = |t: Option<Instant>| t.is_some_and(|t| t <= now);
                if due(h.renew_at) || due(h.retry_at) {
                    self.start_extend(now);
                }
            }
            Phase::Expired { release_at, .. } if *release_at <= now => self.start_release(now),
            _ => {}
        }
    }

    /// Starts an extension by the lock's ttl, counted from `now`.
    ///
    /// If an extension is already in flight this joins it. If the deadline has passed the
    /// lock is reported [`Event::Lost`] and nothing is sent (algorithm.md §8).
    pub fn extend(&mut self, now: Instant) -> Result<(), UsageError> {
        match &self.phase {
            Phase::Held(_) if self.main.is_some() => Ok(()),
            Phase::Held(_) => {
                self.start_extend(now);
                Ok(())
            }
            _ => Err(UsageError::NotHeld(self.op)),
        }
    }

    /// Releases a held (or lost but not yet released) lock on all N nodes;
    /// [`Event::Released`] reports each node.
    ///
    /// A release at or after the deadline first reports [`Event::Lost`]: the lock was no
    /// longer held when the caller let go, whatever the timers have been fed so far.
    pub fn release(&mut self, now: Instant) -> Result<(), UsageError> {
        self.lose_if_past_deadline(now);
        match &self.phase {
            Phase::Held(_) | Phase::Expired { .. } => {
                self.start_release(now);
                Ok(())
            }
            _ => Err(UsageError::NotHeld(self.op)),
        }
    }

    /// Gives up: an acquisition ends with [`AcquireFailure::Cancelled`] and whatever it may
    /// have set is released; a held lock is released (after [`Event::Lost`] if its deadline
    /// has passed, as for [`release`](Self::release)). Does nothing once releasing.
    pub fn cancel(&mut self, now: Instant) {
        self.lose_if_past_deadline(now);
        match &self.phase {
            Phase::Acquiring { token, .. } => {
                if self.main.take().is_some() {
                    // The attempt in flight may have set keys we will never hear about.
                    let token = token.clone();
                    self.push_cleanup(now, &token);
                }
                self.finish_acquire(AcquireFailure::Cancelled);
            }
            Phase::Held(_) | Phase::Expired { .. } => self.start_release(now),
            Phase::Releasing | Phase::Finished => {}
        }
    }

    // ---- lifecycle steps ----

    /// Reads the main round after a vote or expiry, and drops finished cleanup rounds.
    fn progress<R: CryptoRng + ?Sized>(&mut self, now: Instant, rng: &mut R) {
        self.cleanup.retain(|r| !r.is_complete());
        let Some(round) = &self.main else {
            return;
        };
        match (&self.phase, round.decision()) {
            (Phase::Acquiring { .. }, Decision::Reached) => self.on_acquire_quorum(now, rng),
            (Phase::Acquiring { .. }, Decision::Impossible) => {
                let reason = Self::acquire_failure(round);
                self.on_attempt_failed(now, rng, reason);
            }
            (Phase::Held(_), Decision::Reached) => self.on_extend_quorum(now, rng),
            (Phase::Held(_), Decision::Impossible) => self.on_extend_failed(now, rng),
            (Phase::Releasing, _) if round.is_complete() => self.on_released(),
            _ => {}
        }
    }

    // ---- helpers ----

    /// Reports a held lock lost if `now` is at or past its deadline (algorithm.md §9),
    /// without waiting for the deadline timer to be fed.
    fn lose_if_past_deadline(&mut self, now: Instant) {
        if let Phase::Held(h) = &self.phase
            && now >= h.deadline
            && self.params.deadline_ends_lock
        {
            let reason = Self::deadline_reason(h);
            self.lose(now, reason);
        }
    }

    fn new_round(&mut self, command: Command, now: Instant, deadline: Instant) -> Round {
        let n = self.params.nodes;
        let q = self.params.quorum;
        let slots = std::mem::take(&mut self.spare_slots);
        Round::new(self.seq(), command, now, deadline, (n, q), slots)
    }

    /// Keeps a finished round's slots for the next round (saves an allocation per round).
    fn recycle(&mut self, round: Round) {
        self.spare_slots = round.slots;
    }

    fn seq(&mut self) -> u32 {
        self.next_seq = self.next_seq.wrapping_add(1);
        self.next_seq
    }

    /// `t0 + ttl - drift` for a round started at `t0` and decided at `t1`.
    fn deadline_from(&self, t0: Instant, t1: Instant) -> Instant {
        let start = match self.params.validity_from {
            ValidityFrom::AttemptStart => t0,
            ValidityFrom::Decision => t1,
        };
        let timing = &self.params.timing;
        quorum::deadline(start, timing.ttl(), timing.drift())
    }
}
