//! Holding: extension rounds (manual or automatic), their retries within the remaining
//! validity, the auto-extension schedule, and losing the lock. Never sent after the
//! deadline.

use std::time::{Duration, Instant};

use rand_core::CryptoRng;

use super::release::{self, Expired};
use super::{Ctx, Phase};
use crate::command::Command;
use crate::id::NodeName;
use crate::io::{Event, LostReason, NodeFault};
use crate::options::LockParams;
use crate::quorum::{self, Decision};
use crate::round::Round;
use crate::time;
use crate::token::Token;

/// The held phase: the lock's token and deadline, its renewal timers, and the extension in
/// flight, if any.
#[derive(Debug)]
pub(super) struct Held {
    token: Token,
    deadline: Instant,
    /// The validity the last grant or extension reported (a negative control's hand-over
    /// keeps it: options.rs, `carry_deadline`).
    validity: Duration,
    acquired_at: Instant,
    renewals: u32,
    renew_at: Option<Instant>,
    /// Held for less than the ttl (a hold by grants: grant.rs) and not extended since: it is
    /// extended to the ttl once half of what it had is gone ([`top_up`](Self::top_up)).
    short: bool,
    retry_at: Option<Instant>,
    /// Faults of the last failed extension, reported if the deadline passes before the next
    /// succeeds.
    last_failure: Option<Vec<(NodeName, NodeFault)>>,
    /// The extension in flight.
    extension: Option<Round>,
}

impl Held {
    /// Held from `now` until `deadline`.
    pub(super) fn new(params: &LockParams, token: Token, deadline: Instant, now: Instant) -> Self {
        let mut held = Self {
            token,
            deadline,
            validity: deadline.saturating_duration_since(now),
            acquired_at: now,
            renewals: 0,
            renew_at: None,
            short: false,
            retry_at: None,
            last_failure: None,
            extension: None,
        };
        held.renew_at = held.renewal_time(params, now);
        held
    }

    /// The hold is shorter than the ttl (docs/design.md, "Why a hold by grants is safe"): it
    /// is extended to the ttl once half of what it has left at `now` is gone, or earlier if
    /// auto-extension renews first. Not at once: a critical section shorter than that (most
    /// on a contended key) ends with no extension on any node, and the extension of a hold
    /// taken in a hand-off is not sent in the middle of it, where every node is busy.
    pub(super) fn top_up(&mut self, now: Instant) {
        let half = self.deadline.saturating_duration_since(now) / 2;
        let at = time::add(now, half);
        self.short = true;
        self.renew_at = Some(self.renew_at.map_or(at, |r| r.min(at)));
    }

    pub(super) fn token_and_deadline(&self) -> (&Token, Instant) {
        (&self.token, self.deadline)
    }

    pub(super) fn token(&self) -> &Token {
        &self.token
    }

    /// The deadline, and the validity the last grant or extension reported.
    pub(super) fn deadline_and_validity(&self) -> (Instant, Duration) {
        (self.deadline, self.validity)
    }

    /// The hold as the next call of the line takes it over at `now` (hand_over.rs): the same
    /// token, held until `deadline`, with the faults of a failed extension (reported if the
    /// deadline passes first). Renewals follow `params`, the new call's auto-extension,
    /// counted from the hand-over: its `max_renewals` and `max_hold` bound its own hold, as
    /// they would had it acquired on the nodes; the old call's retry of a failed extension
    /// is its own policy's and ends with it. An extension in flight is left to the old call
    /// (its reply is dropped): it can only lengthen the keys' life, never shorten it.
    pub(super) fn handed_over(&self, params: &LockParams, deadline: Instant, now: Instant) -> Self {
        let mut held = Self::new(params, self.token.clone(), deadline, now);
        held.last_failure = self.last_failure.clone();
        if self.short {
            // Still short of the ttl: the new call tops it up as the old one would have.
            held.top_up(now);
        }
        held
    }

    pub(super) fn round(&self) -> Option<&Round> {
        self.extension.as_ref()
    }

    pub(super) fn round_mut(&mut self) -> Option<&mut Round> {
        self.extension.as_mut()
    }

    pub(super) fn is_extending(&self) -> bool {
        self.extension.is_some()
    }

    /// The earliest of the deadline (if it ends the lock), the renewal and the retry.
    #[inline]
    pub(super) fn timer(&self, params: &LockParams) -> Option<Instant> {
        let deadline = params.deadline_ends_lock.then_some(self.deadline);
        [deadline, self.renew_at, self.retry_at]
            .into_iter()
            .flatten()
            .min()
    }

    /// Whether the lock has ended at its deadline by `now` (algorithm.md §9).
    pub(super) fn is_past_deadline(&self, params: &LockParams, now: Instant) -> bool {
        params.deadline_ends_lock && now >= self.deadline
    }

    /// A renewal or an extension's retry is due: the next extension.
    pub(super) fn on_timer(&mut self, ctx: &mut Ctx, now: Instant) -> Option<Phase> {
        let due = |t: Option<Instant>| t.is_some_and(|t| t <= now);
        if self.extension.is_none() && (due(self.renew_at) || due(self.retry_at)) {
            self.start_extend(ctx, now)
        } else {
            None
        }
    }

    /// Sends an extension by the ttl from `now` (still held), or reports the lock lost if
    /// its deadline has passed (algorithm.md §8).
    pub(super) fn start_extend(&mut self, ctx: &mut Ctx, now: Instant) -> Option<Phase> {
        let params = &ctx.params;
        if self.is_past_deadline(params, now) {
            return self.lose_at_deadline(ctx, now);
        }
        self.renew_at = None;
        self.retry_at = None;
        let timing = &params.timing;
        // A kind beyond the mutex extends by its own script (kinds/mod.rs), a writer as the
        // mutex does.
        let at = (&ctx.resource, &self.token, timing.ttl_ms);
        let kind = ctx.kind.as_ref();
        let command = match kind.and_then(|k| k.extend(params.kind_scripts, at)) {
            Some(command) => command,
            None => Command::extend(
                &ctx.resource,
                &self.token,
                timing.ttl_ms,
                params.extend_script,
            ),
        };
        let mut deadline = time::add(now, timing.attempt_timeout);
        if params.deadline_ends_lock {
            // Votes after the lock's deadline cannot save it.
            deadline = deadline.min(self.deadline);
        }
        self.extension = Some(ctx.new_round(command, now, deadline));
        None
    }

    /// A vote was counted: once the extension in flight is decided, extended, or failed.
    #[inline]
    pub(super) fn on_vote<R: CryptoRng + ?Sized>(
        &mut self,
        ctx: &mut Ctx,
        now: Instant,
        rng: &mut R,
    ) -> Option<Phase> {
        // Not decided yet: still held, the extension stays in flight.
        let round = self.extension.take_if(|r| Ctx::decided(r))?;
        self.on_decided(round, ctx, now, rng)
    }

    /// The extension in flight is decided: extended, or failed.
    fn on_decided<R: CryptoRng + ?Sized>(
        &mut self,
        round: Round,
        ctx: &mut Ctx,
        now: Instant,
        rng: &mut R,
    ) -> Option<Phase> {
        if round.decision() == Decision::Reached {
            self.on_quorum(round, ctx, now, rng)
        } else {
            self.on_failed(round, ctx, now, rng)
        }
    }

    /// Extended (still held), unless too little validity is left.
    fn on_quorum<R: CryptoRng + ?Sized>(
        &mut self,
        round: Round,
        ctx: &mut Ctx,
        now: Instant,
        rng: &mut R,
    ) -> Option<Phase> {
        // algorithm.md §8: validity counted from the extension's own t0.
        let deadline = ctx.deadline_from(round.started, now);
        let min = ctx.params.timing.min_validity;
        let Some(validity) = quorum::validity(deadline, now).filter(|v| *v > min) else {
            return self.on_failed(round, ctx, now, rng);
        };
        self.deadline = deadline;
        self.validity = validity;
        self.renewals += 1;
        self.short = false;
        self.last_failure = None;
        self.renew_at = self.renewal_time(&ctx.params, now);
        ctx.events.push_back(Event::Extended {
            op: ctx.op,
            deadline,
            validity,
        });
        ctx.recycle(round);
        None
    }

    /// Lost if other clients may hold the lock now; otherwise still held, with a retry.
    fn on_failed<R: CryptoRng + ?Sized>(
        &mut self,
        round: Round,
        ctx: &mut Ctx,
        now: Instant,
        rng: &mut R,
    ) -> Option<Phase> {
        let not_ours = round.nodes_voting_no(&ctx.names);
        // algorithm.md §9: more than N - q nodes without our key means another client may
        // hold the lock now.
        let tolerated = ctx.params.nodes - ctx.params.quorum;
        if not_ours.len() > tolerated {
            return self.lose(ctx, now, LostReason::NotOwned { nodes: not_ours });
        }
        let errors = round.faults(&ctx.names);
        ctx.recycle(round);
        // Nodes that refused for good (WRONGTYPE, NOPERM, ...) cannot say yes to a retry
        // either: with the "not ours" answers, if they leave no quorum, waiting out the
        // validity only delays the news.
        let for_good = ctx.params.refuse_for_good;
        let refused = (errors.iter())
            .filter(|(_, f)| for_good && f.is_permanent())
            .count();
        if not_ours.len() + refused > tolerated {
            let errors = errors
                .into_iter()
                .filter(|(_, f)| f.is_permanent())
                .collect();
            return self.lose(ctx, now, LostReason::Refused { errors, not_ours });
        }
        self.last_failure = Some(errors);
        // A failed extension does not delete a healthy lock: try again within the remaining
        // validity. If none is left, the deadline timer reports the loss.
        let ends = ctx.params.deadline_ends_lock;
        let retry = ctx.params.retry;
        let remaining = self.deadline.saturating_duration_since(now);
        let mut delay = time::uniform(rng, retry.delay_min, retry.delay_max);
        if ends {
            delay = delay.min(remaining / 2);
        }
        // Never retry in the same instant: with every node down the retry fails at once and
        // would be due again at once (found by fuzzing).
        let retry_at = time::add(now, delay.max(time::MIN_RETRY_DELAY));
        if !ends || retry_at < self.deadline {
            self.retry_at = Some(retry_at);
        }
        None
    }

    /// When auto-extension renews next, or `None` if it is off or its bounds are reached
    /// (algorithm.md §10).
    fn renewal_time(&self, params: &LockParams, now: Instant) -> Option<Instant> {
        let auto = params.auto_extend?;
        if auto.max_renewals.is_some_and(|max| self.renewals >= max) {
            return None;
        }
        let margin = params.timing.ttl().mul_f64(auto.renew_below);
        let at = self.deadline.checked_sub(margin).unwrap_or(now).max(now);
        if auto
            .max_hold
            .is_some_and(|max_hold| at >= time::add(self.acquired_at, max_hold))
        {
            return None;
        }
        Some(at)
    }

    /// The deadline passed: lost, for lack of a successful extension.
    pub(super) fn lose_at_deadline(&mut self, ctx: &mut Ctx, now: Instant) -> Option<Phase> {
        let reason = match self.last_failure.take() {
            Some(errors) => LostReason::QuorumUnreachable { errors },
            None => LostReason::DeadlinePassed,
        };
        self.lose(ctx, now, reason)
    }

    /// Reports the loss and lets go of the keys (algorithm.md §9, §14).
    ///
    /// Keys other nodes say are not ours are released at once: our remaining keys only
    /// block others. Past the deadline the keys are about to expire on their own; releasing
    /// them now would race that expiry, so the release waits until they should be gone
    /// (`t0 + ttl + drift` on our clock) and only cleans up after slow node clocks. The
    /// caller may release earlier. An extension in flight is dropped.
    fn lose(&self, ctx: &mut Ctx, now: Instant, reason: LostReason) -> Option<Phase> {
        let immediate = matches!(
            reason,
            LostReason::NotOwned { .. } | LostReason::Refused { .. }
        );
        ctx.events.push_back(Event::Lost { op: ctx.op, reason });
        if immediate {
            return Some(release::start(ctx, now, &self.token, true));
        }
        let drift = ctx.params.timing.drift();
        let release_at = time::add(self.deadline, drift.saturating_mul(2)).max(now);
        Some(Phase::Expired(Expired::new(self.token.clone(), release_at)))
    }
}
