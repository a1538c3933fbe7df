//! Letting go: the phase after a loss at the deadline, the release round to all N nodes and
//! its report, and the silent cleanup releases of failed or cancelled attempts.

use std::time::Instant;

use super::{Ctx, Phase};
use crate::command::{Command, Vote};
use crate::id::NodeId;
use crate::io::{Event, NodeFault, ReleaseOutcome};
use crate::resp::Reply;
use crate::round::{Round, Slot};
use crate::time;
use crate::token::Token;
use crate::waiters;

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
        (self.release_at <= now).then(|| start(ctx, now, &self.token, true))
    }
}

/// The release round. [`Event::Released`] reports it once its outcome is decided: a
/// quorum of nodes answered (released, or "not held / expired"), or every node answered or
/// failed. Nodes still pending then are released in the background, bounded by the release
/// timeout, and the lock stays with its client until they are done.
#[derive(Debug)]
pub(super) struct Releasing {
    /// The round; taken once the release is decided.
    round: Option<Round>,
    /// Decided at a quorum of answers (a lock's release), not only once every node has
    /// answered (an operator's release of a token, whose per-node report is the point).
    early: bool,
}

impl Releasing {
    pub(super) fn round(&self) -> Option<&Round> {
        self.round.as_ref()
    }

    pub(super) fn round_mut(&mut self) -> Option<&mut Round> {
        self.round.as_mut()
    }

    /// A vote was counted: once the release is decided, it is reported and the lock's life
    /// is over; any node still pending is released in the background (until then, still
    /// releasing).
    #[inline]
    pub(super) fn on_vote(&mut self, ctx: &mut Ctx, now: Instant) -> Option<Phase> {
        let quorum = self.early.then_some(ctx.params.quorum);
        let round = (self.round)
            .take_if(|r| r.is_complete() || quorum.is_some_and(|q| answered(r) >= q))?;
        Some(on_decided(round, ctx, now))
    }
}

/// The release is decided: reports each node, [`ReleaseOutcome::Pending`] for those that
/// have not answered. They, and the nodes whose connection broke before they answered, get
/// the release in the background until the release's deadline: a key whose release was
/// lost would otherwise block every other client until its ttl.
fn on_decided(mut round: Round, ctx: &mut Ctx, now: Instant) -> Phase {
    let nodes: Vec<ReleaseOutcome> = round.slots.iter().map(release_outcome).collect();
    if ctx.params.release_in_background && round.continue_in_background(now) {
        ctx.cleanup.push(round);
    } else {
        ctx.recycle(round);
    }
    ctx.events.push_back(Event::Released { op: ctx.op, nodes });
    Phase::Finished
}

/// Nodes that answered the release: released, or nothing of ours to release (a fault is
/// not an answer).
fn answered(round: &Round) -> usize {
    (round.slots.iter())
        .filter(|s| {
            matches!(
                s,
                Slot::Done(Vote::Yes | Vote::No | Vote::Missing | Vote::NotHeldOrMissing)
            )
        })
        .count()
}

/// The release round of `token`'s keys, decided at a quorum of answers if `early` (see
/// [`Releasing`]).
pub(super) fn start(ctx: &mut Ctx, now: Instant, token: &Token, early: bool) -> Phase {
    // algorithm.md §6: release on ALL N nodes, whatever the votes were. Dropping an
    // extension in flight is safe: the release compares the same value.
    let round = Some(ctx.release_round(now, token, true));
    Phase::Releasing(Releasing { round, early })
}

impl Ctx {
    /// Reads `node`'s `reply` to the release round for what it says beyond the outcome:
    /// someone was subscribed to the release (the script answered 2: another client waits;
    /// command.rs, `RELEASE_SCRIPT`), and the rank of the next call the release placed
    /// (QUEUE_RELEASE's `{outcome, rank}`; waiters/mod.rs).
    ///
    /// A release that placed the next call of its line does not count as meeting another
    /// client by its listeners: that call listens from when the release goes out
    /// (lock/acquire/place.rs), so the nodes count it among them, and a line that read its
    /// own call there as another client would stay contested for as long as it had a call
    /// waiting, handing off through the nodes at every section with no other client left. A
    /// waiter of another client already in the queue shows as the placed call's rank
    /// instead: behind it, the call marks the line contested itself; one that comes later is
    /// heard as any is (docs/design.md, "Hearing of waiters"). The next call still yields as
    /// after any release that was listened for.
    pub(super) fn read_release(&mut self, node: NodeId, reply: Option<&Reply>) {
        let (outcome, placed) = match reply {
            Some(Reply::Integer(n)) => (*n, false),
            Some(Reply::Array(items)) => match waiters::released(items) {
                Some((outcome, rank)) => {
                    if let Some(succession) = &mut self.succession {
                        succession.on_rank(node, rank);
                    }
                    (outcome, rank.is_some() && self.params.placed_not_counted)
                }
                None => return,
            },
            _ => return,
        };
        if outcome == 2 {
            self.contested |= !placed;
            self.awaited = true;
        }
    }

    /// A release round to all N nodes, each with until the release timeout to answer;
    /// `held`: the release of a held lock, announced where it goes out as a native command
    /// (a failed attempt's cleanup is not: most often it deletes nothing, and a waiter
    /// woken by it would try for nothing).
    fn release_round(&mut self, now: Instant, token: &Token, held: bool) -> Round {
        // A kind beyond the mutex releases by its own script (kinds/mod.rs), a failed
        // writer's attempt as the mutex does.
        let kind = self.kind.as_ref();
        let command = match kind.and_then(|k| k.release(&self.resource, token, held)) {
            Some(command) => command,
            // A held mutex with work in the waiters' queue: its place to leave, or the next
            // call of its line to place (waiters/mod.rs, `Succession`). Never native.
            None => match (self.succession.as_ref())
                .and_then(|s| s.release_args())
                .filter(|_| held && kind.is_none())
            {
                Some(args) => Command::queue_release(&self.resource, token, args),
                None => Command::release(&self.resource, token),
            },
        };
        let command = if held { command.announced() } else { command };
        self.round_to_all(command, now)
    }

    /// A round of `command` to all N nodes that every node answers (a release or a
    /// writer's abandon), each with until the release timeout to answer.
    fn round_to_all(&mut self, command: Command, now: Instant) -> Round {
        let deadline = time::add(now, self.params.release_timeout);
        let n = self.params.nodes;
        let slots = std::mem::take(&mut self.spare_slots);
        Round::new(self.seq(), command, now, deadline, (n, n), slots)
    }

    /// A waiter that gives up leaves the waiters' queue (QUEUE_LEAVE, waiters/mod.rs) on every
    /// node, silently, as a cleanup: a node where `id` headed the queue announces the next.
    pub(super) fn push_leave(&mut self, now: Instant, id: &Token) {
        let command = Command::leave_queue(&self.resource, id);
        let deadline = time::add(now, self.params.timing.attempt_timeout);
        let everyone = vec![true; self.params.nodes];
        let round = self.new_round_to(command, (now, deadline), &everyone, 0);
        self.cleanup.push(round);
    }

    /// A writer that gives up: deletes its waiting mark (WRITE_ABANDON) on all N nodes,
    /// silently, as a cleanup release; nothing for the other kinds.
    pub(super) fn push_abandon(&mut self, now: Instant, token: &Token) {
        let abandon = (self.kind.as_ref()).and_then(|k| k.abandon(&self.resource, token));
        if let Some(command) = abandon {
            let round = self.round_to_all(command, now).resending();
            self.cleanup.push(round);
        }
    }

    /// Releases a failed or cancelled attempt's keys without reporting anything, sending
    /// again to a node whose connection broke (see [`Round::resending`]).
    pub(super) fn push_cleanup(&mut self, now: Instant, token: &Token) {
        let round = self.release_round(now, token, false).resending();
        self.cleanup.push(round);
    }

    /// [`push_cleanup`](Self::push_cleanup) to the nodes `to` marks only (a waiter's
    /// attempt that a node answered with its place did not set the key there: waiters/mod.rs);
    /// nothing if it marks none.
    pub(super) fn push_cleanup_to(&mut self, now: Instant, token: &Token, to: &[bool]) {
        if !to.iter().any(|t| *t) {
            return;
        }
        let command = Command::release(&self.resource, token);
        let deadline = time::add(now, self.params.release_timeout);
        let slots = std::mem::take(&mut self.spare_slots);
        let round = Round::to_nodes(self.seq(), command, (now, deadline), to, 0, slots);
        self.cleanup.push(round.resending());
    }
}

fn release_outcome(slot: &Slot) -> ReleaseOutcome {
    match slot {
        Slot::Done(Vote::Yes) => ReleaseOutcome::Released,
        Slot::Done(Vote::No) => ReleaseOutcome::NotHeld,
        Slot::Done(Vote::Missing) => ReleaseOutcome::AlreadyExpired,
        Slot::Done(Vote::NotHeldOrMissing) => ReleaseOutcome::NotHeldOrExpired,
        Slot::Done(Vote::Fault(f)) => ReleaseOutcome::Failed(f.clone()),
        // Decided before this node answered: it is still being released.
        Slot::Unsent | Slot::Sent(_) | Slot::Resend(_) => ReleaseOutcome::Pending,
        // Not in a release round: it sends to all, does not resend until decided, and reads
        // no other vote.
        _ => ReleaseOutcome::Failed(NodeFault::Timeout),
    }
}
