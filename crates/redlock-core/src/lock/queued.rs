//! Queued: waiting behind another lock call of the same client for the same resource
//! (queue.rs), with nothing sent. The client starts the first attempt when the call ahead
//! lets go; the wait is bounded by the retry policy, as contending on the nodes would be.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rand_core::CryptoRng;

use super::acquire::Acquiring;
use super::{Ctx, Phase};
use crate::io::{AcquireFailure, AcquireStats, Event};
use crate::queue::{CONTESTED_YIELD, HandOff};
use crate::time;
use crate::waiters::{Place, Ranks};

/// The queued phase.
#[derive(Debug)]
pub(super) struct Queued {
    since: Instant,
    give_up_at: Instant,
    /// The place in the waiters' queue that the release of the call ahead takes for this
    /// call (QUEUE_RELEASE; waiters/mod.rs), once the client asked for it.
    pub(super) place: Option<Box<Place>>,
}

impl Queued {
    pub(super) fn new(ctx: &Ctx, now: Instant) -> Self {
        Self {
            since: now,
            give_up_at: time::add(now, ctx.params.retry.longest_wait()),
            place: None,
        }
    }

    /// When the call gives up if it is still in line.
    pub(super) fn timer(&self) -> Instant {
        self.give_up_at
    }

    /// The call ahead let go: the first attempt, now ([`HandOff::Direct`]), or, if the
    /// line yields to a waiter of another client (queue.rs), [`CONTESTED_YIELD`] later
    /// (plus a random delay of at most the notification jitter) for one that heard of the
    /// release, or the retry policy's longest delay later for one that may not have (a
    /// courtesy hand-off). The time spent in line counts against the policy's overall wait,
    /// not against its attempts (none was made).
    ///
    /// A call whose place the release of the call ahead took (QUEUE_RELEASE, `ranks`: its
    /// rank on each node that answered that release) starts in the waiters' queue with that
    /// place: its first attempt at the same moment if it heads the queue on a quorum, else it
    /// waits its turn without one (waiters/mod.rs).
    pub(super) fn start<R: CryptoRng + ?Sized>(
        &mut self,
        ctx: &mut Ctx,
        now: Instant,
        (how, ranks): (HandOff, Option<Ranks>),
        rng: &mut R,
    ) -> Phase {
        let queued = now.saturating_duration_since(self.since);
        if let Some(wait) = ctx.params.retry.max_wait {
            Arc::make_mut(&mut ctx.params).retry.max_wait = Some(wait.saturating_sub(queued));
        }
        let delay_max = ctx.params.retry.delay_max;
        let place = self.place.take();
        let gap = match how {
            // At once, its request right behind the release on every connection; in the
            // waiters' queue if it can wait there, so that a waiter of another client that
            // the line has not heard of yet keeps its turn (waiters/mod.rs).
            HandOff::Direct if place.is_none() => {
                return Phase::Acquiring(Acquiring::start_in_queue(ctx, now, rng));
            }
            HandOff::Direct => Duration::ZERO,
            // The waiters of other clients try as soon as they hear of the release: this
            // call lets them go first (queue.rs); in the waiters' queue, its first attempt
            // then takes its place behind those already there (waiters/mod.rs), and those that
            // wait without it (a fenced lock, another kind) had their head start.
            HandOff::Contested | HandOff::Queued => CONTESTED_YIELD,
            // A waiter that hears of nothing tries on its timer within its longest retry
            // delay.
            HandOff::Courtesy => delay_max.saturating_add(CONTESTED_YIELD),
        };
        let jitter = time::uniform(rng, Duration::ZERO, ctx.params.notification_jitter);
        let at = time::add(now, gap.saturating_add(jitter));
        if let Some(place) = place {
            let ranks = ranks.unwrap_or_default();
            let mut placed = Acquiring::start_placed(ctx, (now, at), place, &ranks, rng);
            // A release may have granted it the key already (grant.rs).
            if let Some(held) = placed.hold_by_grants(ctx, now) {
                return held;
            }
            placed.claim_grants(ctx, now, rng);
            return Phase::Acquiring(placed);
        }
        // In the waiters' queue if the lock can wait there (one that cannot is handed off
        // `Contested`); after a courtesy hand-off too, so that a waiter that hears of
        // nothing keeps its place when its timer fires.
        let in_queue = how != HandOff::Contested;
        Phase::Acquiring(Acquiring::start_at(ctx, (now, at), in_queue, rng))
    }

    pub(super) fn on_timer(&mut self, ctx: &mut Ctx, now: Instant) -> Option<Phase> {
        (now >= self.give_up_at).then(|| self.fail(ctx, now, AcquireFailure::HeldLocally))
    }

    pub(super) fn cancel(&mut self, ctx: &mut Ctx, now: Instant) -> Option<Phase> {
        Some(self.fail(ctx, now, AcquireFailure::Cancelled))
    }

    /// Ends the call without an attempt; a place the release of the call ahead took for it
    /// is left (it would hold up the queue until its patience lapsed).
    fn fail(&mut self, ctx: &mut Ctx, now: Instant, reason: AcquireFailure) -> Phase {
        if let Some(place) = self.place.take() {
            ctx.push_leave(now, place.id());
        }
        ctx.events.push_back(Event::AcquireFailed {
            op: ctx.op,
            resource: ctx.resource.clone(),
            reason,
            stats: AcquireStats {
                attempts: 0,
                elapsed: now.saturating_duration_since(self.since),
                nodes: Vec::new(),
                written_back: Vec::new(),
                handed_over: false,
            },
        });
        Phase::Finished
    }
}
