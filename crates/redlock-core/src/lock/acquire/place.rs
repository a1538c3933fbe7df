//! The acquiring phase's part in the waiters' queue (waiters/mod.rs; docs/design.md, "The
//! waiters' queue"): the call's place, read from each answer as it comes and from the
//! nodes' announcements, and left once the call holds or gives up.

use std::time::Instant;

use rand_core::CryptoRng;

use super::Wait;
use super::{Acquiring, Ctx};
use crate::command::Vote;
use crate::grant;
use crate::id::NodeId;
use crate::io::NodeFault;
use crate::quorum::Decision;
use crate::round::{Round, Slot};
use crate::time;
use crate::waiters::{Place, UNHEARD_POLL_EVERY};

impl Acquiring {
    /// A place in the waiters' queue for this call, if it queues: an unfenced mutex with the
    /// queue on (options.rs); its id drawn from `rng`, the same on every node. `placed`: the
    /// release of the call ahead in its line places it (waiters/mod.rs, `Succession`).
    pub(crate) fn new_place<R: CryptoRng + ?Sized>(
        ctx: &Ctx,
        (now, placed): (Instant, bool),
        rng: &mut R,
    ) -> Option<Place> {
        let patience = ctx.params.queue?;
        let plain = ctx.kind.is_none() && ctx.fence_key.is_none();
        // The nodes' wall clock now, as the client estimated it when the call started.
        let ticket = ctx.wall.map_or(0, |(at, ms)| {
            let since = now.saturating_duration_since(at).as_millis();
            ms.saturating_add(u64::try_from(since).unwrap_or(u64::MAX))
        });
        // A release may grant the key (grant.rs) to a call that a release placed: its ticket
        // is the same on every node from the first, and it sends no attempt before its turn,
        // so it can count its grants. Not to a call that takes its place by an attempt (it
        // could not count them), nor to one that cannot hear them (notifications off: the
        // key would wait for its next attempt), nor where the caller supplied the value the
        // key must hold.
        let grantable = placed && ctx.params.notify && ctx.supplied_token.is_none();
        let grant_ttl = grantable.then_some(ctx.params.timing.ttl_ms);
        let id = grant::place_id(rng, grant_ttl);
        plain.then(|| Place::new(id, (ctx.params.nodes, now), patience, ticket))
    }

    /// A call whose place the release of the call ahead in its client's line took
    /// (waiters/mod.rs, `Succession`; `ranks`: its rank on each node that answered that
    /// release). Behind another waiter on a quorum of nodes, it makes no attempt yet: it
    /// waits its turn, listening, its retry timer renewing the place. Heading the queue (or
    /// placed by too few nodes), its first attempt is at `at`, with the same id and ticket.
    pub(crate) fn start_placed<R: CryptoRng + ?Sized>(
        ctx: &mut Ctx,
        (now, at): (Instant, Instant),
        mut place: Box<Place>,
        ranks: &[Option<u64>],
        rng: &mut R,
    ) -> Self {
        let mut acquiring = Self::start_at(ctx, (now, at), false, rng);
        let quorum = ctx.params.quorum;
        let placed = place.on_placed(ranks, quorum);
        // What the nodes announced while the call waited in its line comes after the ranks.
        let released = place.apply_early();
        let behind = placed && !place.is_head(quorum);
        acquiring.place = Some(place);
        // It listens from when the release that placed it went out.
        acquiring.listening = ctx.params.notify;
        if let Some(next) = acquiring.renewal_at(ctx, now).filter(|_| behind) {
            ctx.contested = true;
            acquiring.starts_waiting(ctx);
            let mut wait = Wait::new(ctx, now, next, (acquiring.listening, false));
            wait.renewing(true);
            wait.unheard(ctx, now, (true, acquiring.unheard));
            for node in released {
                wait.count_notice(node);
            }
            acquiring.wait = Some(Box::new(wait));
        }
        acquiring
    }

    /// When a waiter behind the queue's head on a quorum of nodes makes its next attempt,
    /// if it is one (`None` otherwise): a release wakes the head, and the waiter learns it
    /// heads the queue from the nodes' announcements, so its timer only renews its place,
    /// a third of the place's patience later (twice before it would lapse), not at every
    /// retry delay (each renewal is a script on every node, and an attempt in the call's
    /// statistics); never past the policy's overall wait. A waiter whose announcements are
    /// lost is woken by that renewal at the latest (docs/design.md, "The waiters' queue").
    pub(super) fn renewal_at(&self, ctx: &Ctx, now: Instant) -> Option<Instant> {
        let place = (self.place.as_ref()).filter(|p| p.is_behind(ctx.params.quorum))?;
        let give_up = time::add(self.first_start, ctx.params.retry.longest_wait());
        let renew = time::add(now, place.renew_every()).min(give_up);
        Some(renew.max(time::add(now, time::MIN_RETRY_DELAY)))
    }

    /// The call holds: it keeps its place until its release, which leaves it (waiters/mod.rs,
    /// `Succession`): its leave folded into the release, one script fewer per hold.
    pub(super) fn keep_place(&mut self, ctx: &mut Ctx) {
        if let Some(place) = self.place.take() {
            (ctx.succession.get_or_insert_default()).keep(place.id().clone());
        }
    }

    /// `node` announced `id` as the next head of the resource's queue. A waiter that now
    /// heads it on a quorum of nodes tries at once: the key may be free already (QUEUE_RELEASE
    /// announces the new head in the same step as it releases, and a head that left or was
    /// ordered anew is announced with no release after it), and a refused attempt leaves it
    /// waiting as the head, for the next release (waiters/mod.rs).
    pub(crate) fn on_next<R: CryptoRng + ?Sized>(
        &mut self,
        ctx: &mut Ctx,
        now: Instant,
        (node, id): (NodeId, &[u8]),
        rng: &mut R,
    ) {
        let Some(place) = &mut self.place else {
            return;
        };
        let was_head = place.is_head(ctx.params.quorum);
        place.on_next(node, id);
        self.try_as_head(ctx, now, was_head, rng);
    }

    /// A waiting call that heads the queue on a quorum of nodes now, and did not before
    /// (`was_head`), tries at once.
    pub(super) fn try_as_head<R: CryptoRng + ?Sized>(
        &mut self,
        ctx: &mut Ctx,
        now: Instant,
        was_head: bool,
        rng: &mut R,
    ) {
        let heads = (self.place.as_ref()).is_some_and(|p| p.is_head(ctx.params.quorum));
        if !was_head
            && ctx.params.head_tries_at_once
            && heads
            && let Some(wait) = &mut self.wait
        {
            wait.bring_forward(ctx, now, rng);
            self.on_timer(ctx, now, rng);
        }
    }

    /// Whether the call can hear a release or its turn on a quorum of nodes, as its client
    /// sees it at `now`. If not and it waits, its next attempt comes [`UNHEARD_POLL_EVERY`]
    /// from `now` at the latest, not counted against the policy's attempts (waiters/mod.rs), and
    /// its waits read no holder's expiry (the poll comes first). Called after every change
    /// while it waits, so it polls.
    pub(crate) fn poll_unheard(&mut self, now: Instant, unheard: bool) {
        self.unheard = unheard;
        if unheard && let Some(wait) = &mut self.wait {
            wait.poll_by(time::add(now, UNHEARD_POLL_EVERY));
        }
    }

    /// Reads a failed attempt's answers into the call's place; a node that refused the
    /// queue's script ends the call's queueing (its places elsewhere are left).
    pub(super) fn read_place(&mut self, ctx: &mut Ctx, now: Instant, round: &Round) {
        let Some(place) = &mut self.place else {
            return;
        };
        place.on_answers(answers(round));
        place.on_attempt_end(ctx.params.quorum);
        if round.command.is_queued_acquire() {
            let placed = |s: &Slot| matches!(s, Slot::Done(Vote::Queued { .. }));
            self.may_hold = Some(round.slots.iter().map(|s| !placed(s)).collect());
        }
        let refused = (round.slots.iter()).any(|s| match s {
            Slot::Done(Vote::Fault(fault)) => refuses_the_queue(fault),
            _ => false,
        });
        if refused && round.command.is_queued_acquire() {
            self.leave(ctx, now);
            self.queue_refused = true;
            ctx.queue_refused = true;
        }
    }

    /// Leaves the queue on every node, if the call has a place: a node where it headed the
    /// queue announces the next head (waiters/mod.rs).
    pub(super) fn leave(&mut self, ctx: &mut Ctx, now: Instant) {
        if let Some(place) = self.place.take() {
            ctx.push_leave(now, place.id());
        }
    }
}

/// Whether a node's answer to a waiter's attempt refuses the queue's script for good: no
/// permission (`NOPERM`), no scripting (`unknown command`), a key of the queue's names used
/// otherwise (`WRONGTYPE`), a replica (`READONLY`). Not a passing error (`BUSY`, `OOM`).
fn refuses_the_queue(fault: &NodeFault) -> bool {
    match fault {
        NodeFault::Server { message, .. } => {
            fault.is_permanent() || message.starts_with("ERR unknown command")
        }
        _ => false,
    }
}

/// Each node's vote in `round`, `None` while it has not answered.
pub(super) fn answers(round: &Round) -> impl Iterator<Item = Option<&Vote>> {
    round.slots.iter().map(|slot| match slot {
        Slot::Done(vote) => Some(vote),
        _ => None,
    })
}

/// Whether a decided round is done with: any but a waiter's failed attempt, which waits for
/// its last answer.
pub(super) fn settled(round: &Round) -> bool {
    round.decision() == Decision::Reached
        || round.is_complete()
        || !round.command.is_queued_acquire()
}
