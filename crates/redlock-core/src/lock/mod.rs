//! [`Lock`]: the whole life of one lock (acquire with retries, hold, extend, lose, release)
//! as per-node requests and reply reading, with no connections.
//!
//! This is the operation layer: a library that owns its own Redis connections drives a
//! `Lock` directly, sending each [`Request`] to its node by any client and handing back the
//! reply. [`Client`](crate::Client) drives many of them over its own byte streams. The
//! decision rules are those of `docs/algorithm.md`; each is cited where it is applied.
//!
//! A lock is in one [`Phase`] at a time. Each phase owns its state (its round in flight, its
//! timers, its token) and its handlers, in acquire.rs, extend.rs and release.rs (and the
//! step from one lock's hold to the next call's, in hand_over.rs); a handler
//! updates its phase in place and returns the next phase when the lock moves on (`None`:
//! it stays), so a phase that stays is never moved. This file only routes replies and
//! timers to the phase; what every phase shares is in ctx.rs ([`Ctx`]), and which request
//! goes out next, in which form, in send.rs.

use std::sync::Arc;
use std::time::Instant;

use rand_core::CryptoRng;

use crate::command::Command;
use crate::config::Config;
use crate::error::UsageError;
use crate::id::{NodeId, OpId, RequestId};
use crate::io::{Event, NodeFault};
use crate::options::{LockOptions, LockParams};
use crate::resp::Reply;
use crate::round::Round;
use crate::token::{Resource, Token};

mod acquire;
mod ctx;
mod extend;
mod hand_over;
mod inspect;
mod queued;
mod release;
mod send;
mod wait;
mod waiting;

use acquire::Acquiring;
use ctx::Ctx;
use extend::Held;
use inspect::Inspecting;
use queued::Queued;
use release::{Expired, Releasing};

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
/// answered at once with `Err(NodeFault::Connection(..))` (say why, or use
/// [`NodeFault::closed`]), so a dead node never delays a decision. While the lock
/// [`is_waiting_for_release`](Self::is_waiting_for_release), a driver that does not hand it
/// the release notices of a quorum of nodes MUST call [`poll_unheard`](Self::poll_unheard)
/// after each input. The lock is over when [`is_finished`](Self::is_finished).
#[derive(Debug)]
pub struct Lock {
    ctx: Ctx,
    phase: Phase,
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

/// Where a lock is in its life. Each variant's state and handlers live in its own file.
#[derive(Debug)]
enum Phase {
    /// queued.rs: behind another lock call of the same client for the same resource.
    Queued(Queued),
    /// acquire.rs: an attempt in flight, or the wait before the next one.
    Acquiring(Acquiring),
    /// extend.rs: held; maybe an extension in flight.
    Held(Held),
    /// release.rs: lost at its deadline; the release waits until the keys should be gone.
    Expired(Expired),
    /// release.rs: the release round to all N nodes.
    Releasing(Releasing),
    /// inspect.rs: the read-only rounds of an inspection, one per plain read (boxed: on the
    /// rare operation).
    Inspecting(Box<Inspecting>),
    /// Nothing more to report (cleanup releases may still be in flight).
    Finished,
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
        Self::acquire_asked(now, op, config, resource, (options, None), false, rng)
    }

    /// Starts acquiring every resource of `resources` at once, all or none (a multi-lock,
    /// docs/kinds.md): sorted and deduplicated, each attempt sets every key on a node or none
    /// there. The first resource (in byte order) names the lock in its events, and its
    /// release channel is the one to listen on while waiting. A list of one resource is
    /// that resource's mutex.
    ///
    /// Refuses an empty list, a list naming one resource several times and nothing else, a
    /// kind other than [`LockKind::Mutex`](crate::LockKind::Mutex), and fencing.
    pub fn acquire_all<R: CryptoRng + ?Sized>(
        now: Instant,
        op: OpId,
        config: &Config,
        resources: impl IntoIterator<Item = Resource>,
        options: &LockOptions,
        rng: &mut R,
    ) -> Result<Self, UsageError> {
        let mut ctx = Ctx::with_set(op, config, resources, options)?;
        let phase = Phase::Acquiring(Acquiring::start(&mut ctx, now, rng));
        Ok(Self { ctx, phase })
    }

    /// A lock call that waits in line behind another of the same client (queue.rs): nothing
    /// is sent until [`start_queued`](Self::start_queued); it gives up by itself when the
    /// retry policy's wait would have run out.
    pub(crate) fn queued(
        now: Instant,
        op: OpId,
        config: &Config,
        resource: Resource,
        asked: (&LockOptions, Option<&Arc<LockParams>>),
    ) -> Result<Self, UsageError> {
        let mut ctx = Ctx::new(op, config, resource, asked)?;
        let mut queued = Queued::new(&ctx, now);
        // A call that may not wait at all (a "try") fails at once.
        let phase = (queued.on_timer(&mut ctx, now)).unwrap_or(Phase::Queued(queued));
        Ok(Self { ctx, phase })
    }

    /// The call ahead in line let go: a queued lock starts its first attempt as `how` says
    /// (queue.rs): now, or later to let a waiter of another client go first; in the
    /// waiters' queue at its `ranks` if that call's release placed it there (waiters/mod.rs).
    pub(crate) fn start_queued<R: CryptoRng + ?Sized>(
        &mut self,
        now: Instant,
        how: (crate::queue::HandOff, Option<crate::waiters::Ranks>),
        rng: &mut R,
    ) {
        self.step(|phase, ctx| match phase {
            Phase::Queued(q) => Some(q.start(ctx, now, how, rng)),
            _ => None,
        });
    }

    /// Whether a node answered this lock's release that someone was subscribed to it:
    /// another client waits for the resource.
    pub(crate) fn release_awaited(&self) -> bool {
        self.ctx.awaited
    }

    /// Whether the lock is releasing (its release round to every node is in flight).
    pub(crate) fn is_releasing(&self) -> bool {
        matches!(self.phase, Phase::Releasing(_))
    }

    /// Whether the lock waits for another client to release the resource: its last attempt
    /// found it held, and release notifications are on
    /// ([`ConfigBuilder::release_notifications`](crate::ConfigBuilder::release_notifications)).
    ///
    /// While this is true, a driver that can SHOULD listen on the resource's
    /// [`release_channel`](crate::release_channel) on every node and hand each message to
    /// [`handle_release_notice`](Self::handle_release_notice); the lock then tries again as
    /// soon as a quorum of nodes announced a release. Without that it still reads the
    /// holder's remaining ttl (its `PTTL` requests); told so by
    /// [`poll_unheard`](Self::poll_unheard), which that driver MUST call, it polls instead.
    pub fn is_waiting_for_release(&self) -> bool {
        match &self.phase {
            Phase::Acquiring(a) => a.is_listening(),
            // Placed by the release of the call ahead (lock/queued.rs): it listens from when
            // that release goes out, so that no announcement for its place is missed.
            Phase::Queued(q) => q.place.is_some() && self.ctx.params.notify,
            _ => false,
        }
    }

    /// `node` announced a release of the resource (a message on its
    /// [`release_channel`](crate::release_channel)). Ignored unless
    /// [`is_waiting_for_release`](Self::is_waiting_for_release); a notification is only a
    /// hint, and an attempt it starts early that finds the lock held is an ordinary failed
    /// attempt.
    pub fn handle_release_notice<R: CryptoRng + ?Sized>(
        &mut self,
        now: Instant,
        node: NodeId,
        rng: &mut R,
    ) {
        // The lock's own cleanup release, not answered yet on that node, may be what was
        // announced (a release's announcement reaches its own connection before its reply):
        // it says nothing of the holder.
        let own = (self.ctx.cleanup.iter()).any(|r| r.awaits(node.index()));
        match &mut self.phase {
            Phase::Acquiring(a) if !own => a.on_notice(&mut self.ctx, now, node, rng),
            // Placed by the release of the call ahead, not started yet (lock/queued.rs).
            Phase::Queued(q) => {
                if let Some(place) = &mut q.place {
                    place.on_early_release(node);
                }
            }
            _ => {}
        }
    }

    /// Whether the lock needs its place in its resource's line: it waits in it, contends on
    /// the nodes or holds the lock. Once it releases, is lost or gives up, the next call in
    /// line may go.
    #[inline]
    pub(crate) fn needs_place(&self) -> bool {
        matches!(
            self.phase,
            Phase::Queued(_) | Phase::Acquiring(_) | Phase::Held(_)
        )
    }

    /// Starts a read-only inspection of `resource` on all N nodes: every kind's keys, by
    /// plain reads (`GET`, `PTTL`, `ZREVRANGE`, `ZCARD`, `TIME`; no script; docs/kinds.md,
    /// "Inspection"); [`Event::Inspected`] reports it once every node has answered or timed
    /// out.
    ///
    /// `now` is when the reads start: the reported validity counts from it.
    pub fn inspect(
        now: Instant,
        op: OpId,
        config: &Config,
        resource: Resource,
    ) -> Result<Self, UsageError> {
        let mut ctx = Ctx::new(op, config, resource, (&LockOptions::default(), None))?;
        let phase = Inspecting::start(&mut ctx, now);
        Ok(Self { ctx, phase })
    }

    /// Starts releasing `resource` on all N nodes where it holds exactly `token` (the
    /// compare-and-delete of every release, by script or the node's own command), for a
    /// lock this process does not hold: an operator letting go of a stuck holder.
    /// [`Event::Released`] reports each node.
    ///
    /// `token` is compared with the whole stored value (for a stamped token, value and
    /// nonce, as an [`Inspection`](crate::Inspection) shows it); nothing else is touched.
    pub fn release_token(
        now: Instant,
        op: OpId,
        config: &Config,
        resource: Resource,
        token: &Token,
    ) -> Result<Self, UsageError> {
        let mut ctx = Ctx::new(op, config, resource, (&LockOptions::default(), None))?;
        let phase = release::start(&mut ctx, now, token, false);
        Ok(Self { ctx, phase })
    }

    /// The operation id events carry.
    pub fn op(&self) -> OpId {
        self.ctx.op
    }

    /// The resource being locked.
    pub fn resource(&self) -> &Resource {
        &self.ctx.resource
    }

    /// Whether the lock runs a kind's scripts (docs/kinds.md): any kind but a plain mutex of
    /// one resource.
    #[inline]
    pub(crate) fn runs_kind_scripts(&self) -> bool {
        self.ctx.kind.is_some()
    }

    /// Whether the lock hands out a fencing token.
    pub(crate) fn is_fenced(&self) -> bool {
        self.ctx.fence_key.is_some()
    }

    /// The lock's ttl.
    pub(crate) fn ttl(&self) -> std::time::Duration {
        self.ctx.params.timing.ttl()
    }

    /// The token and deadline while the lock is held.
    pub fn held(&self) -> Option<(&Token, Instant)> {
        match &self.phase {
            Phase::Held(h) => Some(h.token_and_deadline()),
            _ => None,
        }
    }

    /// Nothing more will be sent or reported; the lock can be dropped.
    #[inline]
    pub fn is_finished(&self) -> bool {
        matches!(self.phase, Phase::Finished) && self.ctx.cleanup.is_empty()
    }

    /// Whether the request `id` still waits for its node's reply in one of the lock's rounds
    /// (a reply to it would be read; otherwise it would be dropped).
    pub(crate) fn awaits(&mut self, id: RequestId) -> bool {
        let (seq, node) = (id.round(), id.node().index());
        if (self.ctx.cleanup.iter()).any(|r| r.seq == seq && r.awaits(node)) {
            return true;
        }
        (self.phase.round_with_seq(seq)).is_some_and(|r| r.awaits(node))
    }

    /// Whether the request `id` belongs to the acquisition attempt in flight (a vote a
    /// quarantine may veto).
    pub(crate) fn is_attempt(&self, id: RequestId) -> bool {
        match &self.phase {
            Phase::Acquiring(a) => a.round().is_some_and(|r| r.seq == id.round()),
            _ => false,
        }
    }

    /// The next event, if any.
    #[inline]
    pub fn poll_event(&mut self) -> Option<Event> {
        self.ctx.events.pop_front()
    }

    /// The earliest time at which [`handle_timeout`](Self::handle_timeout) has work.
    #[inline]
    pub fn poll_timeout(&self) -> Option<Instant> {
        let mut next = match &self.phase {
            Phase::Acquiring(a) => a.timer(),
            Phase::Held(h) => h.timer(&self.ctx.params),
            Phase::Expired(e) => Some(e.timer()),
            Phase::Queued(q) => Some(q.timer()),
            Phase::Releasing(_) | Phase::Inspecting(_) | Phase::Finished => None,
        };
        // Plain loops: this runs after every reply, and iterator chains of `Option`s cost
        // several times as much here.
        for round in self.ctx.cleanup.iter().chain(self.phase.round()) {
            next = Some(next.map_or(round.deadline, |t| t.min(round.deadline)));
        }
        for round in &self.ctx.cleanup {
            if let Some(at) = round.resend_at() {
                next = Some(next.map_or(at, |t| t.min(at)));
            }
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
        self.handle_vote(now, id, reply, None, rng);
    }

    /// [`handle_reply`](Self::handle_reply) from a node whose grant of an acquisition does
    /// not count if `veto` (a quarantined node: quarantine.rs): a "yes" to the attempt in
    /// flight is recorded as this fault. Its key is released with the attempt's others if
    /// the attempt fails, with the lock's if it holds. Other rounds (extensions, releases,
    /// cleanups, probes) take the reply as it is.
    pub(crate) fn handle_vote<R: CryptoRng + ?Sized>(
        &mut self,
        now: Instant,
        id: RequestId,
        reply: Result<&Reply, NodeFault>,
        veto: Option<NodeFault>,
        rng: &mut R,
    ) {
        // A reply read late must not count past a deadline the driver has not fed us yet:
        // a vote after the round's deadline is a timeout, an extension after the lock's
        // deadline cannot save it.
        if self.poll_timeout().is_some_and(|t| t <= now) {
            self.handle_timeout(now, rng);
        }
        if let Phase::Releasing(r) = &self.phase
            && r.round().is_some_and(|r| r.seq == id.round())
        {
            self.ctx
                .read_release(id.node(), reply.as_ref().ok().copied());
        }
        let seq = id.round();
        let veto = veto.filter(|_| match &self.phase {
            Phase::Acquiring(a) => a.round().is_some_and(|r| r.seq == seq),
            _ => false,
        });
        let cleanup = self.ctx.cleanup.iter().position(|r| r.seq == seq);
        let round = match cleanup {
            Some(i) => &mut self.ctx.cleanup[i],
            None => match self.phase.round_with_seq(seq) {
                Some(round) => round,
                // Not a round in flight: decided, timed out or unknown.
                None => return,
            },
        };
        round.handle_reply_vetoed(id.node(), reply, veto);
        if cleanup.is_some() {
            round.arm_resend(now);
            self.ctx.cleanup.retain(|r| !r.is_complete());
        } else {
            self.on_vote(now, rng);
        }
    }

    /// Handles every timer due at `now`: node deadlines, retries, renewals, the lock deadline.
    pub fn handle_timeout<R: CryptoRng + ?Sized>(&mut self, now: Instant, rng: &mut R) {
        self.ctx
            .cleanup
            .retain(|r| r.deadline > now && !r.is_complete());
        for round in &mut self.ctx.cleanup {
            round.resend_due(now);
        }
        // algorithm.md §9: past the deadline the lock is lost, whatever is in flight; a late
        // extension reply can no longer bring it back. Falls through: if the keys should be
        // gone already, the release starts now.
        self.lose_if_past_deadline(now);
        if let Some(round) = self.phase.round_mut().filter(|r| r.deadline <= now) {
            round.expire();
            self.on_vote(now, rng);
        }
        self.step(|phase, ctx| match phase {
            Phase::Acquiring(a) => a.on_timer(ctx, now, rng),
            Phase::Held(h) => h.on_timer(ctx, now),
            Phase::Expired(e) => e.on_timer(ctx, now),
            Phase::Queued(q) => q.on_timer(ctx, now),
            Phase::Inspecting(i) => i.on_timer(ctx, now),
            Phase::Releasing(_) | Phase::Finished => None,
        });
    }

    /// Starts an extension by the lock's ttl, counted from `now`.
    ///
    /// If an extension is already in flight this joins it. If the deadline has passed the
    /// lock is reported [`Event::Lost`] and nothing is sent (algorithm.md §8).
    pub fn extend(&mut self, now: Instant) -> Result<(), UsageError> {
        match &self.phase {
            Phase::Held(h) if h.is_extending() => Ok(()),
            Phase::Held(_) => {
                self.step(|phase, ctx| match phase {
                    Phase::Held(h) => h.start_extend(ctx, now),
                    _ => None,
                });
                Ok(())
            }
            _ => Err(UsageError::NotHeld(self.ctx.op)),
        }
    }

    /// Releases a held (or lost but not yet released) lock on all N nodes;
    /// [`Event::Released`] reports each node once a quorum has answered (the others are
    /// [`ReleaseOutcome::Pending`](crate::ReleaseOutcome::Pending), released in the
    /// background until the release timeout: keep driving the lock until
    /// [`is_finished`](Self::is_finished)).
    ///
    /// A release at or after the deadline first reports [`Event::Lost`]: the lock was no
    /// longer held when the caller let go, whatever the timers have been fed so far.
    pub fn release(&mut self, now: Instant) -> Result<(), UsageError> {
        self.lose_if_past_deadline(now);
        match &self.phase {
            Phase::Held(_) | Phase::Expired(_) => {
                self.step(|phase, ctx| phase.release(ctx, now));
                Ok(())
            }
            _ => Err(UsageError::NotHeld(self.ctx.op)),
        }
    }

    /// Gives up: an acquisition ends with
    /// [`AcquireFailure::Cancelled`](crate::AcquireFailure::Cancelled) and whatever it may
    /// have set is released; a held lock is released (after [`Event::Lost`] if its deadline
    /// has passed, as for [`release`](Self::release)). Does nothing once releasing.
    pub fn cancel(&mut self, now: Instant) {
        self.lose_if_past_deadline(now);
        self.step(|phase, ctx| match phase {
            Phase::Acquiring(a) => a.cancel(ctx, now),
            Phase::Queued(q) => q.cancel(ctx, now),
            Phase::Held(_) | Phase::Expired(_) => phase.release(ctx, now),
            // Reads leave nothing behind: dropped, their late answers swallowed.
            Phase::Inspecting(_) => Some(Phase::Finished),
            Phase::Releasing(_) | Phase::Finished => None,
        });
    }

    /// Lets `f` handle something in the phase, then moves to the phase it returns, if any.
    #[inline]
    fn step(&mut self, f: impl FnOnce(&mut Phase, &mut Ctx) -> Option<Phase>) {
        if let Some(next) = f(&mut self.phase, &mut self.ctx) {
            self.phase = next;
        }
    }

    /// After a vote or expiry on the phase's round: the phase decides once the round is.
    #[inline]
    fn on_vote<R: CryptoRng + ?Sized>(&mut self, now: Instant, rng: &mut R) {
        self.step(|phase, ctx| match phase {
            Phase::Acquiring(a) => a.on_vote(ctx, now, rng),
            Phase::Held(h) => h.on_vote(ctx, now, rng),
            Phase::Releasing(r) => r.on_vote(ctx, now),
            Phase::Inspecting(i) => i.on_vote(ctx, now),
            Phase::Queued(_) | Phase::Expired(_) | Phase::Finished => None,
        });
    }

    /// Reports a held lock lost if `now` is at or past its deadline (algorithm.md §9),
    /// without waiting for the deadline timer to be fed.
    fn lose_if_past_deadline(&mut self, now: Instant) {
        self.step(|phase, ctx| match phase {
            Phase::Held(h) if h.is_past_deadline(&ctx.params, now) => h.lose_at_deadline(ctx, now),
            _ => None,
        });
    }
}

impl Phase {
    /// The round the phase waits on: an acquire attempt, an extension or the release.
    #[inline]
    fn round(&self) -> Option<&Round> {
        match self {
            Self::Acquiring(a) => a.round(),
            Self::Held(h) => h.round(),
            Self::Releasing(r) => r.round(),
            Self::Inspecting(i) => Some(i.round()),
            Self::Queued(_) | Self::Expired(_) | Self::Finished => None,
        }
    }

    /// The round the phase waits on: an attempt's (never its `PTTL` probe, whose deadline
    /// the waiting step reads: lock/wait.rs), an extension's, a release's, an inspection's
    /// first read.
    #[inline]
    fn round_mut(&mut self) -> Option<&mut Round> {
        match self {
            Self::Inspecting(i) => i.rounds_mut().first_mut(),
            _ => self.rounds_mut().0,
        }
    }

    /// The phase's rounds in flight: the one above, and the others sent after it (an
    /// attempt's `PTTL` probe; an inspection's reads).
    #[inline]
    fn rounds_mut(&mut self) -> (Option<&mut Round>, &mut [Round]) {
        match self {
            Self::Acquiring(a) => {
                let (attempt, probe) = a.rounds_mut();
                (attempt, probe.map_or(&mut [][..], std::slice::from_mut))
            }
            Self::Held(h) => (h.round_mut(), &mut []),
            Self::Releasing(r) => (r.round_mut(), &mut []),
            Self::Inspecting(i) => (None, i.rounds_mut()),
            Self::Queued(_) | Self::Expired(_) | Self::Finished => (None, &mut []),
        }
    }

    /// The phase's round numbered `seq`, if it is in flight.
    #[inline]
    fn round_with_seq(&mut self, seq: u32) -> Option<&mut Round> {
        let (first, more) = self.rounds_mut();
        match first {
            Some(round) if round.seq == seq => Some(round),
            _ => more.iter_mut().find(|r| r.seq == seq),
        }
    }

    /// Lets go of a held or expired lock: the release round to all N nodes.
    fn release(&self, ctx: &mut Ctx, now: Instant) -> Option<Self> {
        match self {
            Self::Held(h) => Some(release::start(ctx, now, h.token(), true)),
            Self::Expired(e) => Some(release::start(ctx, now, e.token(), true)),
            Self::Queued(_)
            | Self::Acquiring(_)
            | Self::Releasing(_)
            | Self::Inspecting(_)
            | Self::Finished => None,
        }
    }
}
