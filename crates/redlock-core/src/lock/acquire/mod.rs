//! Acquiring: one attempt after another, each with a fresh stored value, each failed one
//! released on all N nodes, until a quorum grants the lock in time or the retry policy
//! gives up.

use std::time::Instant;

use rand_core::CryptoRng;

use super::wait::Wait;
use super::{Ctx, Phase};
use crate::command::{Command, Vote};
use crate::fencing::{self, FenceQuorum, QuorumToken};
use crate::id::{NodeId, NodeName};
use crate::io::{AcquireFailure, AcquireOutcome, NodeFault, NodeOutcome};
use crate::kinds::{self, LockKind};
use crate::options::LockParams;
use crate::quorum::Decision;
use crate::round::{self, Round, Slot};
use crate::time;
use crate::token::Token;
use crate::waiters::Place;
use place::{answers, settled};

mod end;
mod granted;
mod place;

/// The acquiring phase: an attempt in flight, or the wait before the next one.
#[derive(Debug)]
pub(super) struct Acquiring {
    attempts: u32,
    first_start: Instant,
    /// The value of the attempt in flight (or of the last one).
    token: Token,
    /// The attempt in flight.
    round: Option<Round>,
    /// The wait for the next attempt, while none is in flight (wait.rs).
    wait: Option<Box<Wait>>,
    /// Attempts that a release or the holder's expiry started early: not counted against
    /// the policy's attempts.
    early_attempts: u32,
    /// Whether the lock listens for release notifications: an attempt found it held by
    /// another client, and notifications are on. It listens until it stops acquiring, so
    /// that its subscriptions are not made again for every attempt.
    listening: bool,
    /// Whether the call announced that it waits for another client (notify.rs).
    announced: bool,
    /// Its client cannot hear a quorum of nodes (place.rs, `poll_unheard`): it polls.
    unheard: bool,
    /// What each node answered in the last decided attempt, for a failure's statistics.
    last_nodes: Vec<NodeOutcome>,
    /// A fenced attempt granted by a quorum whose counters disagreed: the write-back is the
    /// round in flight (docs/safety.md, "Fencing").
    confirming: Option<Box<Confirming>>,
    /// The call's place in the waiters' queue on the nodes (waiters/mod.rs), once it found the
    /// lock held (or started in a contested line).
    place: Option<Box<Place>>,
    /// A node refused the queue's script: this call waits as if the queue were off.
    queue_refused: bool,
    /// Per node, after a waiter's failed attempt: whether the node may have set the key (it
    /// did not answer with the call's place), so that the cleanup goes there only.
    may_hold: Option<Vec<bool>>,
}

/// What a fenced attempt waits on while its write-back is in flight.
#[derive(Debug)]
struct Confirming {
    /// The attempt's start, `t0`: the validity still counts from it.
    started: Instant,
    /// The fencing token: the largest counter among the quorum's answers.
    value: u64,
    /// Raised nodes the token needs to be final.
    needed: usize,
    /// What each node answered to the acquire command.
    nodes: Vec<NodeOutcome>,
}

impl Acquiring {
    /// The first attempt, started at `now` (its `t0`).
    pub(super) fn start<R: CryptoRng + ?Sized>(ctx: &mut Ctx, now: Instant, rng: &mut R) -> Self {
        let mut acquiring = Self {
            attempts: 0,
            first_start: now,
            token: attempt_token(ctx.supplied_token.as_deref(), &ctx.params, rng),
            round: None,
            wait: None,
            early_attempts: 0,
            listening: false,
            announced: false,
            unheard: false,
            last_nodes: Vec::new(),
            confirming: None,
            place: None,
            queue_refused: false,
            may_hold: None,
        };
        acquiring.attempt(ctx, now);
        acquiring
    }

    /// The first attempt, started at `now`, in the waiters' queue if the lock can wait there
    /// (its resource met other clients a moment ago: waiters/mod.rs).
    pub(super) fn start_in_queue<R: CryptoRng + ?Sized>(
        ctx: &mut Ctx,
        now: Instant,
        rng: &mut R,
    ) -> Self {
        let mut acquiring = Self::start_at(ctx, (now, now), true, rng);
        acquiring.wait = None;
        acquiring.attempt(ctx, now);
        acquiring
    }

    /// Whether a call in the waiters' queue listens for releases from its first attempt:
    /// its subscription then goes out ahead of that attempt on every connection, so that
    /// each announcement a node makes once it placed the call (`next:` when the call heads
    /// the queue there) reaches it. Subscribed only once placed, it missed any release
    /// between its place and its subscription, and waited for its place's renewal with the
    /// lock free (docs/design.md, "The waiters' queue").
    fn listens_from_the_start(&self, ctx: &Ctx) -> bool {
        self.place.is_some() && ctx.params.notify
    }

    /// The first attempt at `at`, later than `now` (the call's start, from which its wait
    /// counts); `queued`: in the waiters' queue, if the lock can wait there (its line met
    /// other clients: waiters/mod.rs).
    pub(super) fn start_at<R: CryptoRng + ?Sized>(
        ctx: &mut Ctx,
        (now, at): (Instant, Instant),
        queued: bool,
        rng: &mut R,
    ) -> Self {
        let place = queued
            .then(|| Self::new_place(ctx, (now, false), rng))
            .flatten();
        let mut acquiring = Self {
            attempts: 0,
            first_start: now,
            token: attempt_token(ctx.supplied_token.as_deref(), &ctx.params, rng),
            round: None,
            wait: Some(Box::new(Wait::new(ctx, now, at, (false, false)))),
            early_attempts: 0,
            listening: false,
            announced: false,
            unheard: false,
            last_nodes: Vec::new(),
            confirming: None,
            place: place.map(Box::new),
            queue_refused: false,
            may_hold: None,
        };
        acquiring.listening = acquiring.listens_from_the_start(ctx);
        acquiring
    }

    fn attempt(&mut self, ctx: &mut Ctx, now: Instant) {
        self.attempts += 1;
        let timing = &ctx.params.timing;
        let command = match (&ctx.kind, &ctx.fence_key) {
            // A kind beyond the mutex (kinds/mod.rs): its own acquire command.
            (Some(kind), _) => {
                let at = (&ctx.resource, &self.token, timing.ttl_ms);
                kind.acquire(ctx.params.kind_scripts, at)
            }
            (None, Some(fence)) => {
                let script = ctx.params.fenced_acquire_script;
                Command::fenced_acquire(&ctx.resource, fence, (&self.token, timing.ttl_ms), script)
            }
            (None, None) => match self.place.as_mut().and_then(|p| p.args()) {
                // A waiter: its place renewed, the key set only if it heads the queue.
                Some(args) => {
                    if let Some(place) = &mut self.place {
                        place.grants_mut().attempted();
                    }
                    let at = (&ctx.resource, &self.token, timing.ttl_ms);
                    Command::queued_acquire(ctx.params.queue_script, at, args)
                }
                None => Command::set_nx_px(&ctx.resource, &self.token, timing.ttl_ms),
            },
        };
        self.confirming = None;
        // algorithm.md §2: one command to all N nodes at once, each with until
        // t0 + attempt_timeout to answer.
        let deadline = time::add(now, timing.attempt_timeout);
        self.round = Some(ctx.new_round(command, now, deadline));
    }

    pub(super) fn round(&self) -> Option<&Round> {
        self.round.as_ref()
    }

    /// The attempt in flight, and the wait's probe.
    pub(super) fn rounds_mut(&mut self) -> (Option<&mut Round>, Option<&mut Round>) {
        let probe = self.wait.as_mut().and_then(|w| w.probe_mut());
        (self.round.as_mut(), probe)
    }

    /// When the next attempt (or the wait's probe deadline) is due.
    pub(super) fn timer(&self) -> Option<Instant> {
        self.wait.as_ref().map(|w| w.timer())
    }

    /// Whether the lock waits to hear of a release (wait.rs).
    pub(super) fn is_listening(&self) -> bool {
        self.listening
    }

    /// The call found the lock held by another client: the first time, its client announces
    /// that it waits (notify.rs, `waiting_channel`; ctx.rs, `waits`).
    pub(super) fn starts_waiting(&mut self, ctx: &mut Ctx) {
        if !std::mem::replace(&mut self.announced, true) {
            ctx.waits = true;
        }
    }

    /// `node` announced a release of the resource.
    pub(super) fn on_notice<R: CryptoRng + ?Sized>(
        &mut self,
        ctx: &mut Ctx,
        now: Instant,
        node: NodeId,
        rng: &mut R,
    ) {
        // A waiter behind the queue's head lets the head go: a release wakes one waiter, not
        // every one (waiters/mod.rs); one on a node it heads counts for when it heads a quorum
        // (QUEUE_RELEASE announces a new head just before the release).
        if let Some(place) = (self.place.as_ref()).filter(|p| p.is_behind(ctx.params.quorum)) {
            if let Some(wait) = self.wait.as_mut().filter(|_| place.heads(node)) {
                wait.count_notice(node);
            }
            return;
        }
        if let Some(wait) = &mut self.wait {
            wait.on_notice(ctx, now, node, rng);
            // Due now (no jitter): the attempt starts in this step, not at the driver's
            // next timer tick, which may be a millisecond away.
            self.on_timer(ctx, now, rng);
        }
    }

    /// The retry is due: the next attempt, with a fresh value (algorithm.md §5, §7). Still
    /// acquiring.
    pub(super) fn on_timer<R: CryptoRng + ?Sized>(
        &mut self,
        ctx: &mut Ctx,
        now: Instant,
        rng: &mut R,
    ) -> Option<Phase> {
        let wait = self.wait.as_mut()?;
        wait.on_probe(ctx, now, rng);
        let (at, early) = wait.attempt_at();
        if at <= now {
            self.wait = None;
            self.early_attempts += u32::from(early);
            self.token = attempt_token(ctx.supplied_token.as_deref(), &ctx.params, rng);
            self.attempt(ctx, now);
        }
        None
    }

    /// A vote was counted: once the attempt in flight is decided, held or failed.
    #[inline]
    pub(super) fn on_vote<R: CryptoRng + ?Sized>(
        &mut self,
        ctx: &mut Ctx,
        now: Instant,
        rng: &mut R,
    ) -> Option<Phase> {
        if self.wait.is_some() {
            // A probe reply (no attempt is in flight while waiting): an attempt it makes
            // due now starts now.
            return self.on_timer(ctx, now, rng);
        }
        if let (Some(place), Some(round)) = (&mut self.place, &self.round)
            && round.command.is_queued_acquire()
        {
            // Each answer as it comes, in order with the node's announcements.
            place.on_answers(answers(round));
        }
        // Not decided yet: still acquiring, the round stays in flight. A waiter's failed
        // attempt also waits for every node's answer (or the attempt's deadline): each one
        // says where the call stands in that node's queue (waiters/mod.rs).
        let round = self.round.take_if(|r| Ctx::decided(r) && settled(r))?;
        self.on_decided(round, ctx, now, rng)
    }

    /// The attempt in flight is decided: held, or failed.
    fn on_decided<R: CryptoRng + ?Sized>(
        &mut self,
        round: Round,
        ctx: &mut Ctx,
        now: Instant,
        rng: &mut R,
    ) -> Option<Phase> {
        let mut reached = round.decision() == Decision::Reached;
        if let Some(confirming) = self.confirming.take() {
            // The write-back of a fenced attempt.
            let mut written_back = round.nodes_voting_yes(&ctx.names);
            if ctx.params.fence_quorum == FenceQuorum::CountRefused {
                written_back.extend(round.nodes_voting_no(&ctx.names));
                reached = written_back.len() >= confirming.needed;
            }
            let reason = (!reached).then(|| acquire_failure(&round, &ctx.names));
            ctx.recycle(round);
            let Confirming {
                started,
                value,
                nodes,
                ..
            } = *confirming;
            return match reason {
                None => self.grant(ctx, now, rng, (started, Some(value)), nodes, written_back),
                Some(reason) => {
                    self.last_nodes = nodes;
                    self.on_attempt_failed(ctx, now, rng, reason)
                }
            };
        }
        if !reached {
            return self.on_failed_round(round, ctx, now, rng);
        }
        let nodes = outcomes(&round, &ctx.names);
        let started = round.started;
        if ctx.fence_key.is_none() {
            ctx.recycle(round);
            return self.grant(ctx, now, rng, (started, None), nodes, Vec::new());
        }
        self.on_fenced_quorum(round, ctx, now, rng, nodes)
    }

    /// The attempt in flight failed to reach its quorum: the next attempt, or the end. A
    /// semaphore's attempt decided by `-PERMITS` replies ends the call at once
    /// (kinds/mod.rs, `permits_failure`): it asked for another k than the holders in place.
    fn on_failed_round<R: CryptoRng + ?Sized>(
        &mut self,
        round: Round,
        ctx: &mut Ctx,
        now: Instant,
        rng: &mut R,
    ) -> Option<Phase> {
        self.last_nodes = outcomes(&round, &ctx.names);
        self.read_place(ctx, now, &round);
        let permits = match ctx.params.kind {
            LockKind::Semaphore { permits } => {
                kinds::permits_failure(&round.slots, &ctx.names, permits, ctx.params.quorum)
            }
            _ => None,
        };
        let reason = permits
            .clone()
            .unwrap_or_else(|| acquire_failure(&round, &ctx.names));
        ctx.recycle(round);
        if permits.is_some() {
            // algorithm.md §6: the nodes that granted a permit release it.
            ctx.push_cleanup(now, &self.token);
            return self.fail(ctx, now, reason);
        }
        self.on_attempt_failed(ctx, now, rng, reason)
    }

    /// A fenced attempt reached its quorum: the token is the largest counter among the
    /// answers. If a quorum's counters are already there, it is final at once; otherwise
    /// the nodes behind are raised to it while they still hold our key, and the token is
    /// final once a quorum holds it (docs/safety.md, "Fencing").
    fn on_fenced_quorum<R: CryptoRng + ?Sized>(
        &mut self,
        round: Round,
        ctx: &mut Ctx,
        now: Instant,
        rng: &mut R,
        nodes: Vec<NodeOutcome>,
    ) -> Option<Phase> {
        let counters: Vec<Option<u64>> = (round.slots.iter())
            .map(|slot| match slot {
                Slot::Done(Vote::Counter(n)) => Some(*n),
                _ => None,
            })
            .collect();
        let started = round.started;
        let deadline = round.deadline;
        ctx.recycle(round);
        let quorum = ctx.params.quorum;
        let QuorumToken {
            value,
            agreed,
            token,
            final_now,
        } = fencing::quorum_token(&counters, quorum, ctx.params.fence_quorum);
        if final_now {
            return self.grant(ctx, now, rng, (started, Some(token)), nodes, Vec::new());
        }
        let behind: Vec<bool> = (counters.iter())
            .map(|c| c.is_some_and(|n| n < value))
            .collect();
        let fence = ctx.fence_key.clone().unwrap_or_default();
        let command = Command::raise_fence(&ctx.resource, &fence, &self.token, value);
        let round = ctx.new_round_to(command, (now, deadline), &behind, quorum - agreed);
        self.round = Some(round);
        self.confirming = Some(Box::new(Confirming {
            started,
            value: token,
            needed: quorum - agreed,
            nodes,
        }));
        None
    }

    /// A quorum granted the attempt started at `started` (and confirmed its fencing token,
    /// if any): held, unless too little validity is left.
    fn grant<R: CryptoRng + ?Sized>(
        &mut self,
        ctx: &mut Ctx,
        now: Instant,
        rng: &mut R,
        (started, fencing_token): (Instant, Option<u64>),
        nodes: Vec<NodeOutcome>,
        written_back: Vec<NodeName>,
    ) -> Option<Phase> {
        // algorithm.md §4: validity = ttl - (t1 - t0) - drift, t0 = the attempt's start, and
        // the deadline is t0 + ttl - drift.
        let deadline = ctx.deadline_from(started, now);
        match self.hold(ctx, now, deadline, (fencing_token, nodes, written_back)) {
            Ok(held) => Some(Phase::Held(held)),
            Err(nodes) => {
                self.last_nodes = nodes;
                self.on_attempt_failed(ctx, now, rng, AcquireFailure::ValidityExhausted)
            }
        }
    }

    /// Fails the lock, or schedules the next attempt (still acquiring).
    fn on_attempt_failed<R: CryptoRng + ?Sized>(
        &mut self,
        ctx: &mut Ctx,
        now: Instant,
        rng: &mut R,
        reason: AcquireFailure,
    ) -> Option<Phase> {
        // algorithm.md §6: release on ALL N nodes, also those that did not answer, since a
        // lost reply can hide a successful SET; but for a waiter's attempt, not where the
        // node answered with the call's place: its key was not set there (waiters/mod.rs).
        match self.may_hold.take() {
            Some(to) => ctx.push_cleanup_to(now, &self.token, &to),
            None => ctx.push_cleanup(now, &self.token),
        }
        let retry = ctx.params.retry;
        let counted = self.attempts.saturating_sub(self.early_attempts);
        if retry.max_attempts.is_some_and(|max| counted >= max) {
            return self.fail(ctx, now, reason);
        }
        if self.early_attempts > 0 && now >= time::add(self.first_start, retry.longest_wait()) {
            // Early attempts are not counted; the wait they are part of is bounded as the
            // retries would be.
            let last = Some(Box::new(reason));
            return self.fail(ctx, now, AcquireFailure::WaitDeadline { last });
        }
        // algorithm.md §7: a random delay, never retrying in the same instant (a zero delay
        // with every node down would spin).
        let mut delay = time::uniform(rng, retry.delay_min, retry.delay_max);
        if let Some(f) = &ctx.params.retry_delay {
            delay = f.delay(self.attempts, delay);
        }
        let renewal = self.renewal_at(ctx, now);
        let next = renewal.unwrap_or(time::add(now, delay.max(time::MIN_RETRY_DELAY)));
        if retry
            .max_wait
            .is_some_and(|wait| next > time::add(self.first_start, wait))
        {
            // The last attempt's reason stays: "contended on 3 nodes" is what a caller who
            // waited needs to hear, not only that the wait ran out.
            let last = Some(Box::new(reason));
            return self.fail(ctx, now, AcquireFailure::WaitDeadline { last });
        }
        // Another client holds it: listen for its release and read when its keys expire.
        let held = matches!(reason, AcquireFailure::Contended { .. });
        let first_place = held && self.place.is_none() && !self.queue_refused;
        if first_place && let Some(place) = Self::new_place(ctx, (now, false), rng) {
            // The call takes its place in the queue at once (an early attempt, not counted):
            // waiting without one, it would be passed by every waiter that placed itself
            // meanwhile.
            self.place = Some(Box::new(place));
            self.listening |= ctx.params.notify;
            ctx.contested = true;
            self.starts_waiting(ctx);
            return self.attempt_at_once(ctx, now, rng);
        }
        if (self.place.as_ref()).is_some_and(|p| p.needs_agreement()) {
            // Placed with the nodes' own tickets: the agreed one goes out at once, before
            // the nodes' orders can wake two heads (waiters/mod.rs).
            return self.attempt_at_once(ctx, now, rng);
        }
        self.listening |= ctx.params.notify && held;
        ctx.contested |= held;
        if held {
            self.starts_waiting(ctx);
        }
        // Only the queue's head reads the holder's expiry: the others wait their turn.
        let head = (self.place.as_ref()).is_none_or(|p| p.is_head(ctx.params.quorum));
        // Once it found the lock held, the call listens until it stops acquiring: a later
        // attempt that timed out says nothing of the holder.
        let mut wait = Wait::new(ctx, now, next, (self.listening, head && !self.unheard));
        wait.renewing(renewal.is_some());
        wait.unheard(ctx, now, (self.place.is_some(), self.unheard));
        // A node that granted this attempt had the key free: released already, for the
        // count of releases that wakes the call (its cleanup frees it again). A release
        // still on its way to the other nodes then completes a quorum.
        let granted = (self.last_nodes.iter()).map(|n| n.outcome == AcquireOutcome::Locked);
        wait.count_released(granted);
        self.wait = Some(Box::new(wait));
        None
    }

    /// An early attempt now, not counted against the policy's attempts: still acquiring.
    fn attempt_at_once<R: CryptoRng + ?Sized>(
        &mut self,
        ctx: &mut Ctx,
        now: Instant,
        rng: &mut R,
    ) -> Option<Phase> {
        self.early_attempts += 1;
        self.token = attempt_token(ctx.supplied_token.as_deref(), &ctx.params, rng);
        self.attempt(ctx, now);
        None
    }
}

fn acquire_failure(round: &Round, names: &[NodeName]) -> AcquireFailure {
    let held = round.nodes_voting_no(names);
    if held.is_empty() {
        AcquireFailure::QuorumUnreachable {
            errors: round.faults(names),
        }
    } else {
        AcquireFailure::Contended { nodes: held }
    }
}

/// Each node's answer in `round`, by name, in node order.
fn outcomes(round: &Round, names: &[NodeName]) -> Vec<NodeOutcome> {
    (round.slots.iter().enumerate())
        .map(|(i, slot)| NodeOutcome {
            node: round::name(names, i),
            outcome: acquire_outcome(slot),
        })
        .collect()
}

/// The value one attempt stores: a fresh generated token, or the supplied value stamped
/// with a fresh nonce. No two attempts, of one lock call or of any two, store the same
/// value, so a command of an earlier attempt that reaches a node late, on any connection
/// (a cleanup release, a resent `EVAL`, a release or extension of an earlier lock call with
/// the same supplied value), compares a value that is not this attempt's and leaves its key
/// alone. Ordering commands per connection cannot give that: a dead connection's bytes may
/// still reach the node after a new connection's (docs/design.md, "Stored values").
fn attempt_token<R: CryptoRng + ?Sized>(
    supplied: Option<&Token>,
    params: &LockParams,
    rng: &mut R,
) -> Token {
    match supplied {
        Some(value) if params.stamp_supplied => value.stamped(rng),
        Some(value) => value.clone(),
        None => Token::generate(rng),
    }
}

fn acquire_outcome(slot: &Slot) -> AcquireOutcome {
    match slot {
        Slot::Done(Vote::Yes | Vote::Counter(_)) => AcquireOutcome::Locked,
        // Queued: held, or kept for the queue's head (waiters/mod.rs).
        Slot::Done(Vote::No | Vote::Queued { .. }) => AcquireOutcome::Held,
        Slot::Done(Vote::Fault(f)) => AcquireOutcome::Failed(f.clone()),
        // The semaphore's `-PERMITS k` error reply (kinds/mod.rs).
        Slot::Done(Vote::Permits(k)) => AcquireOutcome::Failed(NodeFault::Server {
            command: "EVALSHA",
            message: format!("PERMITS {k}"),
        }),
        Slot::Done(other) => {
            AcquireOutcome::Failed(NodeFault::Protocol(format!("unexpected vote {other:?}")))
        }
        _ => AcquireOutcome::Pending,
    }
}
