//! How an acquisition ends: held, the call's place kept for its release and the caller
//! told; or without a hold, the caller giving up (a cancel) or its retry policy. What the
//! attempt in flight may have set is released, a writer's waiting mark deleted
//! (docs/kinds.md), the call's place in the waiters' queue left (waiters/mod.rs), and the
//! failure reported with the call's statistics.

use std::time::Instant;

use super::super::extend::Held;
use super::{Acquiring, Ctx, Phase, outcomes};
use crate::id::NodeName;
use crate::io::{AcquireFailure, AcquireStats, Acquired, Event, NodeOutcome};
use crate::quorum;

impl Acquiring {
    /// Held until `deadline`, if more than the minimum validity is left at `now`: the
    /// call's place kept for its release, and the caller told; else the nodes' outcomes
    /// back.
    pub(super) fn hold(
        &mut self,
        ctx: &mut Ctx,
        now: Instant,
        deadline: Instant,
        (fencing_token, nodes, written_back): (Option<u64>, Vec<NodeOutcome>, Vec<NodeName>),
    ) -> Result<Held, Vec<NodeOutcome>> {
        let validity = quorum::validity(deadline, now);
        let Some(validity) = validity.filter(|v| *v > ctx.params.timing.min_validity) else {
            return Err(nodes);
        };
        let acquired = Acquired {
            op: ctx.op,
            resource: ctx.resource.clone(),
            token: self.token.clone(),
            deadline,
            validity,
            stats: AcquireStats {
                attempts: self.attempts,
                elapsed: now.saturating_duration_since(self.first_start),
                nodes,
                written_back,
                handed_over: false,
            },
            fencing_token,
        };
        self.keep_place(ctx);
        ctx.events.push_back(Event::Acquired(acquired));
        Ok(Held::new(&ctx.params, self.token.clone(), deadline, now))
    }

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
