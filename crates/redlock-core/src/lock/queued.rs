//! Queued: waiting behind another lock call of the same client for the same resource
//! (queue.rs), with nothing sent. The client starts the first attempt when the call ahead
//! lets go; the wait is bounded by the retry policy, as contending on the nodes would be.

use std::time::{Duration, Instant};

use rand_core::CryptoRng;

use super::acquire::Acquiring;
use super::{Ctx, Phase};
use crate::io::{AcquireFailure, AcquireStats, Event};
use crate::time;

/// The queued phase.
#[derive(Debug)]
pub(super) struct Queued {
    since: Instant,
    give_up_at: Instant,
}

impl Queued {
    pub(super) fn new(ctx: &Ctx, now: Instant) -> Self {
        Self {
            since: now,
            give_up_at: time::add(now, ctx.params.retry.longest_wait()),
        }
    }

    /// When the call gives up if it is still in line.
    pub(super) fn timer(&self) -> Instant {
        self.give_up_at
    }

    /// The call ahead let go: the first attempt, now, or after a random delay of at most
    /// the notification jitter if the line is `contested` (queue.rs). The time spent in
    /// line counts against the policy's overall wait, not against its attempts (none was
    /// made).
    pub(super) fn start<R: CryptoRng + ?Sized>(
        &self,
        ctx: &mut Ctx,
        now: Instant,
        contested: bool,
        rng: &mut R,
    ) -> Phase {
        let queued = now.saturating_duration_since(self.since);
        let retry = &mut ctx.params.retry;
        retry.max_wait = retry.max_wait.map(|w| w.saturating_sub(queued));
        if contested {
            let jitter = time::uniform(rng, Duration::ZERO, ctx.params.notification_jitter);
            return Phase::Acquiring(Acquiring::start_at(ctx, now, time::add(now, jitter), rng));
        }
        Phase::Acquiring(Acquiring::start(ctx, now, rng))
    }

    pub(super) fn on_timer(&self, ctx: &mut Ctx, now: Instant) -> Option<Phase> {
        (now >= self.give_up_at).then(|| self.fail(ctx, now, AcquireFailure::HeldLocally))
    }

    pub(super) fn cancel(&self, ctx: &mut Ctx, now: Instant) -> Option<Phase> {
        Some(self.fail(ctx, now, AcquireFailure::Cancelled))
    }

    fn fail(&self, ctx: &mut Ctx, now: Instant, reason: AcquireFailure) -> Phase {
        ctx.events.push_back(Event::AcquireFailed {
            op: ctx.op,
            resource: ctx.resource.clone(),
            reason,
            stats: AcquireStats {
                attempts: 0,
                elapsed: now.saturating_duration_since(self.since),
                nodes: Vec::new(),
                written_back: Vec::new(),
            },
        });
        Phase::Finished
    }
}
