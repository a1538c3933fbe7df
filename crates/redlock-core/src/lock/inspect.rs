//! Inspecting: a read-only look at every key of a resource on all N nodes, by plain
//! commands (so it works where an ACL denies scripting), pipelined to each node in one
//! order: `GET` and `PTTL` of `R`, the node's `TIME`, `ZREVRANGE … WITHSCORES` and `ZCARD`
//! of `R:readers`, `GET` and `PTTL` of `R:writer-waiting`, the same two of `R:permits`,
//! and `GET` of `R:permits:limit` (docs/kinds.md, "Inspection"). One round per read; one
//! [`Inspection`] once every node has answered all of them or timed out. It writes nothing
//! and holds nothing; reading the answers is inspection.rs's.

use std::time::{Duration, Instant};

use bytes::Bytes;

use super::{Ctx, Phase};
use crate::command::{Command, Vote};
use crate::inspection::reply::{self, Answer, SharedRead};
use crate::inspection::{HolderSet, Inspection, KeyState, SharedKeys};
use crate::io::{Event, NodeFault};
use crate::kinds::LockKind;
use crate::round::{Round, Slot};
use crate::time;
use crate::token::Resource;

/// The reads, one round each, sent together to every node.
#[derive(Debug)]
pub(super) struct Inspecting {
    /// One round per read, in [`Read`] order.
    rounds: Vec<Round>,
}

/// Which read a round is, as its index in [`Inspecting::rounds`].
#[derive(Debug, Clone, Copy)]
enum Read {
    /// `GET R`.
    Get,
    /// `PTTL R`.
    Pttl,
    /// `TIME`.
    Time,
    /// `ZREVRANGE R:readers 0 cap-1 WITHSCORES`.
    Readers,
    /// `ZCARD R:readers`.
    ReaderCount,
    /// `GET R:writer-waiting`.
    Mark,
    /// `PTTL R:writer-waiting`.
    MarkTtl,
    /// `ZREVRANGE R:permits 0 cap-1 WITHSCORES`.
    Permits,
    /// `ZCARD R:permits`.
    PermitCount,
    /// `GET R:permits:limit`.
    Limit,
}

impl Inspecting {
    /// Every read's round, started at `now`, each waiting for every node until the release
    /// timeout.
    pub(super) fn start(ctx: &mut Ctx, now: Instant) -> Phase {
        let deadline = time::add(now, ctx.params.release_timeout);
        let n = ctx.params.nodes;
        let resource = &ctx.resource;
        let key = |suffix: &str| {
            let mut key = resource.as_bytes().to_vec();
            key.extend_from_slice(suffix.as_bytes());
            Resource::from(key)
        };
        let (readers, mark, permits) = (key(":readers"), key(":writer-waiting"), key(":permits"));
        let commands = [
            Command::get(resource),
            Command::pttl(resource),
            Command::shared_read(SharedRead::Time, resource),
            Command::shared_read(SharedRead::Members, &readers),
            Command::shared_read(SharedRead::Count, &readers),
            Command::get(&mark),
            Command::pttl(&mark),
            Command::shared_read(SharedRead::Members, &permits),
            Command::shared_read(SharedRead::Count, &permits),
            Command::get(&key(":permits:limit")),
        ];
        let rounds = (commands.into_iter())
            .map(|command| Round::new(ctx.seq(), command, now, deadline, (n, n), Vec::new()))
            .collect();
        Phase::Inspecting(Box::new(Self { rounds }))
    }

    /// The rounds, in the order each node is sent them.
    pub(super) fn rounds_mut(&mut self) -> &mut [Round] {
        &mut self.rounds
    }

    /// The first read's round: every round shares its start and deadline.
    pub(super) fn round(&self) -> &Round {
        // `start` makes one round per read: never empty.
        &self.rounds[Read::Get as usize]
    }

    /// A vote was counted: once every round is complete, reports (else still inspecting).
    pub(super) fn on_vote(&self, ctx: &mut Ctx, now: Instant) -> Option<Phase> {
        (self.rounds.iter().all(Round::is_complete)).then(|| self.report(ctx, now))
    }

    /// At the deadline every read still unanswered is a timeout, and the report goes out.
    pub(super) fn on_timer(&mut self, ctx: &mut Ctx, now: Instant) -> Option<Phase> {
        if self.round().deadline <= now {
            self.rounds.iter_mut().for_each(Round::expire);
        }
        self.on_vote(ctx, now)
    }

    fn report(&self, ctx: &mut Ctx, now: Instant) -> Phase {
        let n = self.round().slots.len();
        let nodes = (0..n)
            .map(|i| key_state(self.slot(Read::Get, i), self.slot(Read::Pttl, i)))
            .collect();
        let shared = (0..n).map(|i| self.shared_keys(i)).collect();
        let timing = &ctx.params.timing;
        let quorum = ctx.params.quorum;
        let semaphore_quorum = |k| LockKind::semaphore(k).quorum(n, quorum);
        let inspection = Inspection::read(
            ctx.resource.clone(),
            (nodes, shared),
            (quorum, &semaphore_quorum),
            (self.round().started, now),
            (timing.ttl(), timing.drift_factor, timing.drift_floor),
        );
        ctx.events.push_back(Event::Inspected {
            op: ctx.op,
            inspection,
        });
        Phase::Finished
    }

    /// Node `i`'s slot in the round of `read` (a timeout if there is none: never, as every
    /// round has a slot per node).
    fn slot(&self, read: Read, i: usize) -> &Slot {
        const NONE: Slot = Slot::Done(Vote::Fault(NodeFault::Timeout));
        (self.rounds.get(read as usize))
            .and_then(|r| r.slots.get(i))
            .unwrap_or(&NONE)
    }

    /// Node `i`'s shared keys from its answers (inspection/reply.rs reads them).
    fn shared_keys(&self, i: usize) -> SharedKeys {
        let answer = |read| answer(self.slot(read, i));
        let clock = reply::node_clock(answer(Read::Time));
        let set =
            |name, members, count| reply::holder_set(name, &clock, answer(members), answer(count));
        let mut permits = set("permits", Read::Permits, Read::PermitCount);
        // k goes with the permits: a limit that makes no sense fails them.
        let permits_limit = match value(self.slot(Read::Limit, i)).and_then(reply::permits_limit) {
            Ok(limit) if matches!(permits, HolderSet::Read { .. }) => limit,
            Ok(_) => None,
            Err(fault) => {
                permits = HolderSet::Failed(fault);
                None
            }
        };
        SharedKeys {
            readers: set("readers", Read::Readers, Read::ReaderCount),
            writer_waiting: key_state(self.slot(Read::Mark, i), self.slot(Read::MarkTtl, i)),
            permits,
            permits_limit,
        }
    }
}

/// One node's string key from its `GET` and `PTTL` answers. A key that expired between the
/// reads is held with no time left; one set between them was free when read.
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
                ms => Some(Duration::from_millis(ms.max(0).unsigned_abs())),
            },
        },
        // A complete round has every slot done with its command's votes; anything else is
        // reported as a timeout.
        _ => KeyState::Failed(NodeFault::Timeout),
    }
}

/// A `ZREVRANGE`, `ZCARD` or `TIME` answer from its slot: the reply, or the node's fault.
fn answer(slot: &Slot) -> Answer<'_> {
    match slot {
        Slot::Done(Vote::Read(reply)) => Ok(reply),
        Slot::Done(Vote::Fault(fault)) => Err(fault.clone()),
        // As in `key_state`: a complete round holds only its command's votes.
        _ => Err(NodeFault::Timeout),
    }
}

/// A `GET` answer from its slot: the value (`None` without the key), or the node's fault.
fn value(slot: &Slot) -> Result<Option<&Bytes>, NodeFault> {
    match slot {
        Slot::Done(Vote::Value(value)) => Ok(value.as_ref()),
        Slot::Done(Vote::Fault(fault)) => Err(fault.clone()),
        _ => Err(NodeFault::Timeout),
    }
}
