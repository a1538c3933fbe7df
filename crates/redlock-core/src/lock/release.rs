//! Letting go: the phase after a loss at the deadline, the release round to all N nodes and
//! its report, and the silent cleanup releases of failed or cancelled attempts.

use std::time::Instant;

use super::{Ctx, Phase};
use crate::command::{Command, Vote};
use crate::io::{Event, NodeFault, ReleaseOutcome};
use crate::round::{Round, Slot};
use crate::time;
use crate::token::Token;

/// Lost at its deadline; the release waits until the keys should have expired
/// (algorithm.md §14).
#[derive(Debug)]
pub(super) struct Expired {
    token: Token,
    release_at: Instant,
}

impl Expired {
    pub(super) fn new(token: Token, release_at: Instant) -> Self {
        Self { token, release_at }
    }

    pub(super) fn timer(&self) -> Instant {
        self.release_at
    }

    pub(super) fn token(&self) -> &Token {
        &self.token
    }

    /// The keys should be gone: the release starts (before that, still expired).
    pub(super) fn on_timer(&self, ctx: &mut Ctx, now: Instant) -> Option<Phase> {
        (self.release_at <= now).then(|| start(ctx, now, &self.token))
    }
}

/// The release round, reported by [`Event::Released`] once every node has answered or
/// timed out.
#[derive(Debug)]
pub(super) struct Releasing {
    round: Round,
}

impl Releasing {
    pub(super) fn round(&self) -> &Round {
        &self.round
    }

    pub(super) fn round_mut(&mut self) -> &mut Round {
        &mut self.round
    }

    /// A vote was counted: once every node has answered or timed out, the lock's life is
    /// over (until then, still releasing).
    #[inline]
    pub(super) fn on_vote(&self, ctx: &mut Ctx, now: Instant) -> Option<Phase> {
        self.round.is_complete().then(|| self.on_complete(ctx, now))
    }

    /// Every node has answered or timed out: reports each. Nodes whose connection broke
    /// before they answered get the release again in the background, on their next
    /// connection, until the release's deadline: the report does not wait for that.
    fn on_complete(&self, ctx: &mut Ctx, now: Instant) -> Phase {
        let nodes: Vec<ReleaseOutcome> = self.round.slots.iter().map(release_outcome).collect();
        let broken: Vec<bool> = (nodes.iter())
            .map(|o| matches!(o, ReleaseOutcome::Failed(NodeFault::Connection(_))))
            .collect();
        if broken.contains(&true) && now < self.round.deadline {
            let command = self.round.command.clone();
            let times = (now, self.round.deadline);
            let asked = broken.iter().filter(|&&b| b).count();
            let round = ctx.new_round_to(command, times, &broken, asked).resending();
            ctx.cleanup.push(round);
        }
        ctx.events.push_back(Event::Released { op: ctx.op, nodes });
        Phase::Finished
    }
}

/// The release round of `token`'s keys.
pub(super) fn start(ctx: &mut Ctx, now: Instant, token: &Token) -> Phase {
    // algorithm.md §6: release on ALL N nodes, whatever the votes were. Dropping an
    // extension in flight is safe: the release compares the same value.
    let round = ctx.release_round(now, token);
    Phase::Releasing(Releasing { round })
}

impl Ctx {
    /// A release round to all N nodes that waits for every one of them.
    fn release_round(&mut self, now: Instant, token: &Token) -> Round {
        let command = Command::release(&self.resource, token);
        let deadline = time::add(now, self.params.release_timeout);
        let n = self.params.nodes;
        let slots = std::mem::take(&mut self.spare_slots);
        Round::new(self.seq(), command, now, deadline, (n, n), slots)
    }

    /// Releases a failed or cancelled attempt's keys without reporting anything, sending
    /// again to a node whose connection broke (see [`Round::resending`]).
    pub(super) fn push_cleanup(&mut self, now: Instant, token: &Token) {
        let round = self.release_round(now, token).resending();
        self.cleanup.push(round);
    }
}

fn release_outcome(slot: &Slot) -> ReleaseOutcome {
    match slot {
        Slot::Done(Vote::Yes) => ReleaseOutcome::Released,
        Slot::Done(Vote::No) => ReleaseOutcome::NotHeld,
        Slot::Done(Vote::Missing) => ReleaseOutcome::AlreadyExpired,
        Slot::Done(Vote::NotHeldOrMissing) => ReleaseOutcome::NotHeldOrExpired,
        Slot::Done(Vote::Fault(f)) => ReleaseOutcome::Failed(f.clone()),
        // A complete round has every slot done; anything else is reported as a timeout.
        _ => ReleaseOutcome::Failed(NodeFault::Timeout),
    }
}
