//! Letting go: loss, the release round to all N nodes and its report, and the silent
//! cleanup releases of failed or cancelled attempts.

use std::time::Instant;

use super::{Lock, Phase};
use crate::command::{Command, Vote};
use crate::io::{Event, LostReason, NodeFault, ReleaseOutcome};
use crate::round::{Round, Slot};
use crate::time;
use crate::token::Token;

impl Lock {
    /// Reports the loss and lets go of the keys.
    ///
    /// Keys other nodes say are not ours are released at once: our remaining keys only
    /// block others. Past the deadline the keys are about to expire on their own; releasing
    /// them now would race that expiry, so the release waits until they should be gone
    /// (`t0 + ttl + drift` on our clock) and only cleans up after slow node clocks. The
    /// caller may release earlier.
    pub(super) fn lose(&mut self, now: Instant, reason: LostReason) {
        let immediate = matches!(reason, LostReason::NotOwned { .. });
        self.events.push_back(Event::Lost {
            op: self.op,
            reason,
        });
        let Phase::Held(h) = &self.phase else {
            return;
        };
        if immediate {
            return self.start_release(now);
        }
        self.main = None;
        let drift = self.params.timing.drift();
        self.phase = Phase::Expired {
            token: h.token.clone(),
            release_at: time::add(h.deadline, drift.saturating_mul(2)).max(now),
        };
    }

    pub(super) fn start_release(&mut self, now: Instant) {
        let token = match &self.phase {
            Phase::Held(h) => h.token.clone(),
            Phase::Expired { token, .. } => token.clone(),
            _ => return,
        };
        // algorithm.md §6: release on ALL N nodes, whatever the votes were. Dropping
        // an extension in flight is safe: on each connection the release follows it.
        let command = Command::release(&self.resource, &token);
        let deadline = time::add(now, self.params.release_timeout);
        let n = self.params.nodes;
        let slots = std::mem::take(&mut self.spare_slots);
        self.main = Some(Round::new(
            self.seq(),
            command,
            now,
            deadline,
            (n, n),
            slots,
        ));
        self.phase = Phase::Releasing;
    }

    pub(super) fn on_released(&mut self) {
        let Some(round) = self.main.take() else {
            return;
        };
        let nodes = round.slots.iter().map(release_outcome).collect();
        self.events
            .push_back(Event::Released { op: self.op, nodes });
        self.phase = Phase::Finished;
    }

    pub(super) fn push_cleanup(&mut self, now: Instant, token: &Token) {
        let command = Command::release(&self.resource, token);
        let deadline = time::add(now, self.params.release_timeout);
        let n = self.params.nodes;
        let slots = std::mem::take(&mut self.spare_slots);
        let round = Round::new(self.seq(), command, now, deadline, (n, n), slots);
        self.cleanup.push(round);
    }
}

pub(super) fn release_outcome(slot: &Slot) -> ReleaseOutcome {
    match slot {
        Slot::Done(Vote::Yes) => ReleaseOutcome::Released,
        Slot::Done(Vote::No) => ReleaseOutcome::NotHeld,
        Slot::Done(Vote::Missing) => ReleaseOutcome::AlreadyExpired,
        Slot::Done(Vote::Fault(f)) => ReleaseOutcome::Failed(f.clone()),
        // A complete round has every slot done; anything else is reported as a timeout.
        _ => ReleaseOutcome::Failed(NodeFault::Timeout),
    }
}
