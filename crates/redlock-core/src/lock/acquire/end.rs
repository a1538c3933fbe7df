//! How an acquisition ends without a hold: the caller gives up (a cancel), or its retry
//! policy does. What the attempt in flight may have set is released, a writer's waiting
//! mark deleted (docs/kinds.md), the call's place in the waiters' queue left (waiters.rs),
//! and the failure reported with the call's statistics.

use std::time::Instant;

use super::{Acquiring, Ctx, Phase, outcomes};
use crate::io::{AcquireFailure, AcquireStats, Event};

impl Acquiring {
    /// Gives up: the attempt in flight, if any, may have set keys we will never hear about,
    /// so it is released.
    pub(crate) fn cancel(&mut self, ctx: &mut Ctx, now: Instant) -> Option<Phase> {
        self.wait = None;
        if let Some(round) = self.round.take() {
            // The statistics show the attempt cut short: its answers so far.
            self.last_nodes = outcomes(&round, &ctx.names);
            ctx.push_cleanup(now, &self.token);
        }
        self.fail(ctx, now, AcquireFailure::Cancelled)
    }

    /// Ends the call with `reason`: a writer's waiting mark deleted, the call's place in the
    /// waiters' queue left, the failure reported.
    pub(super) fn fail(
        &mut self,
        ctx: &mut Ctx,
        now: Instant,
        reason: AcquireFailure,
    ) -> Option<Phase> {
        if self.attempts > 0 {
            // A writer that gives up deletes its waiting mark, so that it does not keep
            // readers out (docs/kinds.md, "Reader-writer lock"); the other kinds leave none.
            ctx.push_abandon(now, &self.token);
        }
        self.leave(ctx, now);
        let nodes = std::mem::take(&mut self.last_nodes);
        ctx.events.push_back(Event::AcquireFailed {
            op: ctx.op,
            resource: ctx.resource.clone(),
            reason,
            stats: AcquireStats {
                attempts: self.attempts,
                elapsed: now.saturating_duration_since(self.first_start),
                nodes,
                written_back: Vec::new(),
                handed_over: false,
            },
        });
        Some(Phase::Finished)
    }
}
