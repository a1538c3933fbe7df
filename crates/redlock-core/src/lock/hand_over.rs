//! Handing over: a held lock passes its hold to the next call of its client's line for the
//! same resource (queue.rs) without going to the nodes. The next call holds the same stored
//! value until the same deadline; the nodes never see a gap, and nothing is sent. Whether
//! the line allows it (not contested, no courtesy owed) is the client's to ask first; this
//! file says whether the two locks can share one hold, and moves it (docs/design.md,
//! "Hand-over").

use std::time::{Duration, Instant};

use super::{Ctx, Lock, Phase};
use crate::io::{AcquireStats, Acquired, Event, ReleaseOutcome};
use crate::time;

impl Lock {
    /// Hands this lock's hold over to `next`, a call queued behind it in its client's line,
    /// at `now`, if both can share it; returns whether it did (if not, neither changed).
    ///
    /// This lock reports [`Event::Released`] with every node
    /// [`ReleaseOutcome::HandedOver`] and is finished; `next` reports [`Event::Acquired`]
    /// with the same token and deadline, the validity left (`deadline - now`), and
    /// [`AcquireStats::handed_over`], and holds from now on: its extensions, its loss and
    /// its release are its own.
    ///
    /// Refused unless this lock holds and `next` waits in line, both are unfenced locks of
    /// the same kind with the same supplied value (if any), and more validity is left than
    /// `next` would accept from the nodes ([`least_validity`]). Never more validity than the
    /// nodes could give `next` ([`most_validity`]): a call that asked for a shorter ttl than
    /// the holder's has its deadline brought forward to it.
    pub(crate) fn hand_over(&mut self, now: Instant, next: &mut Self) -> bool {
        let (Phase::Held(held), Phase::Queued(_)) = (&self.phase, &next.phase) else {
            return false;
        };
        let (deadline, granted) = held.deadline_and_validity();
        let left = deadline.saturating_duration_since(now);
        if !shares_hold(&self.ctx, &next.ctx) || left <= least_validity(&next.ctx) {
            return false;
        }
        let params = &next.ctx.params;
        // docs/design.md, "Hand-over": the deadline is the old one, never refreshed: the keys
        // were set by the old call's attempt, and only its deadline is one they outlive
        // (algorithm.md §4); earlier if the new call's own ttl ends sooner. A negative
        // control counts the old validity again from now; another keeps the old deadline
        // past the new call's ttl.
        let deadline = match (params.carry_deadline, params.hand_over_within_ttl) {
            (true, true) => deadline.min(time::add(now, most_validity(&next.ctx))),
            (true, false) => deadline,
            (false, _) => time::add(now, granted),
        };
        let validity = deadline.saturating_duration_since(now);
        let token = held.token().clone();
        let hold = held.handed_over(params, deadline, now);
        let acquired = Acquired {
            op: next.ctx.op,
            resource: next.ctx.resource.clone(),
            token,
            deadline,
            validity,
            stats: AcquireStats {
                attempts: 0,
                // No attempt: the time in line is the caller's wait before one, as for any
                // call that waited in line (`elapsed` counts from the first attempt).
                elapsed: Duration::ZERO,
                nodes: Vec::new(),
                written_back: Vec::new(),
                handed_over: true,
            },
            fencing_token: None,
        };
        next.ctx.events.push_back(Event::Acquired(acquired));
        next.phase = Phase::Held(hold);
        // The place the hold kept in the waiters' queue is the new holder's to leave.
        next.ctx.succession = (self.ctx.succession.as_mut()).map(|s| Box::new(s.hand_over()));
        let nodes = vec![ReleaseOutcome::HandedOver; self.ctx.params.nodes];
        self.ctx.events.push_back(Event::Released {
            op: self.ctx.op,
            nodes,
        });
        self.phase = Phase::Finished;
        true
    }
}

/// Whether the holds of `from` and `to` are one: locks of one kind (a mutex of one resource
/// and a writer each hold their key their own way), neither fenced (a new holder needs a new,
/// larger fencing token, which only the nodes hand out: docs/safety.md, "Fencing"), and the
/// same supplied value or none (the stored value is the old call's, and a guard's token
/// gives back the value it stamps).
fn shares_hold(from: &Ctx, to: &Ctx) -> bool {
    from.params.kind == to.params.kind
        && from.fence_key.is_none()
        && to.fence_key.is_none()
        && from.supplied_token == to.supplied_token
}

/// The least validity a hand-over must leave the next call: more than its configured
/// `min_validity` (what it would refuse from the nodes too), and at least half of what an
/// acquisition on the nodes would give it at best (`ttl - drift`). A caller sizes its
/// critical section by the validity it expects; a hand-over never gives more than what is
/// left, so below half of it the next call goes to the nodes for a fresh one (a release
/// and an acquisition, as before), which costs one round trip.
fn least_validity(ctx: &Ctx) -> Duration {
    (most_validity(ctx) / 2).max(ctx.params.timing.min_validity)
}

/// The most validity a hand-over may give the next call: what an acquisition on the nodes
/// would give it at best (`ttl - drift`). A caller sizes its section, its renewals and its
/// loss by the ttl it asked for; a hold that ran on past it would be one it never asked for.
/// The keys themselves may outlive it, by no more than they would outlive the old call had
/// it kept holding: a crash of the process leaves them as the holder's crash would have.
fn most_validity(ctx: &Ctx) -> Duration {
    let timing = &ctx.params.timing;
    timing.ttl().saturating_sub(timing.drift())
}
