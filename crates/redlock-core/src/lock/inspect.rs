//! Inspecting: a read-only look at a resource's key on all N nodes, `GET` and `PTTL`
//! pipelined to each (plain commands, so it works where an ACL denies scripting), reported
//! as one [`Inspection`] once every node has answered both or timed out. It writes nothing
//! and holds nothing; the maths that reads the answers is in inspection.rs.

use std::time::Instant;

use super::{Ctx, Phase};
use crate::command::{Command, Vote};
use crate::inspection::{Inspection, KeyState};
use crate::io::{Event, NodeFault};
use crate::round::{Round, Slot};
use crate::time;

/// The two read rounds, sent together: each node gets its `GET`, then its `PTTL`, on one
/// connection.
#[derive(Debug)]
pub(super) struct Inspecting {
    get: Round,
    pttl: Round,
}

impl Inspecting {
    /// Both rounds, started at `now`, each waiting for every node until the release timeout.
    pub(super) fn start(ctx: &mut Ctx, now: Instant) -> Phase {
        let deadline = time::add(now, ctx.params.release_timeout);
        let n = ctx.params.nodes;
        let get = Command::get(&ctx.resource);
        let get = Round::new(ctx.seq(), get, now, deadline, (n, n), Vec::new());
        let pttl = Command::pttl(&ctx.resource);
        let pttl = Round::new(ctx.seq(), pttl, now, deadline, (n, n), Vec::new());
        Phase::Inspecting(Box::new(Self { get, pttl }))
    }

    /// The `GET` round and the `PTTL` round, in the order they are sent.
    pub(super) fn rounds_mut(&mut self) -> (&mut Round, &mut Round) {
        (&mut self.get, &mut self.pttl)
    }

    /// The `GET` round: both rounds share its start and deadline.
    pub(super) fn round(&self) -> &Round {
        &self.get
    }

    /// A vote was counted: once both rounds are complete, reports (else still inspecting).
    pub(super) fn on_vote(&self, ctx: &mut Ctx, now: Instant) -> Option<Phase> {
        (self.get.is_complete() && self.pttl.is_complete()).then(|| self.report(ctx, now))
    }

    /// At the deadline every read still unanswered is a timeout, and the report goes out.
    pub(super) fn on_timer(&mut self, ctx: &mut Ctx, now: Instant) -> Option<Phase> {
        if self.pttl.deadline <= now {
            self.get.expire();
            self.pttl.expire();
        }
        self.on_vote(ctx, now)
    }

    fn report(&self, ctx: &mut Ctx, now: Instant) -> Phase {
        let nodes = (self.get.slots.iter().zip(&self.pttl.slots))
            .map(|(get, pttl)| key_state(get, pttl))
            .collect();
        let timing = &ctx.params.timing;
        let inspection = Inspection::read(
            ctx.resource.clone(),
            nodes,
            ctx.params.quorum,
            (self.get.started, now),
            (timing.ttl(), timing.drift_factor, timing.drift_floor),
        );
        ctx.events.push_back(Event::Inspected {
            op: ctx.op,
            inspection,
        });
        Phase::Finished
    }
}

/// One node's key from its two answers. A key that expired between the reads is held with
/// no time left; one set between them was free when read.
fn key_state(get: &Slot, pttl: &Slot) -> KeyState {
    match (get, pttl) {
        (Slot::Done(Vote::Fault(f)), _) | (_, Slot::Done(Vote::Fault(f))) => {
            KeyState::Failed(f.clone())
        }
        (Slot::Done(Vote::Value(None)), Slot::Done(Vote::Ttl(_))) => KeyState::Free,
        (Slot::Done(Vote::Value(Some(value))), Slot::Done(Vote::Ttl(ms))) => KeyState::Held {
            value: value.clone(),
            // -1: no expiry; -2: gone since the GET, so nothing is left.
            ttl: match *ms {
                -1 => None,
                ms => Some(std::time::Duration::from_millis(ms.max(0).unsigned_abs())),
            },
        },
        // A complete round has every slot done with its command's votes; anything else is
        // reported as a timeout.
        _ => KeyState::Failed(NodeFault::Timeout),
    }
}
