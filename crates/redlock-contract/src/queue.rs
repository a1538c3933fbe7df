//! The waiters' queue's contract (docs/design.md, "The waiters' queue"): QUEUE_ACQUIRE,
//! QUEUE_LEAVE and QUEUE_RELEASE on the states of a resource's three keys (R, R:queue,
//! R:queue:until) that matter to them, with the reply, every key afterwards (each waiter's
//! ticket, each place's deadline, each set's expiry) and what a subscriber to R's release
//! channel hears, in order (the channel and the message: `next:<id>`, `grant:<id>`, or a
//! release's empty one), run against any [`Target`](crate::Target) by `queue_run`. The
//! table's rows for QUEUE_RELEASE name the holder's place `me` and its line's next call
//! `me2`; a waiter's id that ends in `~<ms>` carries its call's ttl, for which a release
//! grants R to it when it heads the queue (R set to its id; QUEUE_ACQUIRE turns R holding
//! the caller's id into the caller's hold, QUEUE_LEAVE deletes it: docs/design.md, "A
//! release that grants").
//!
//! | script | R, queue, deadlines | reply |
//! |---|---|---|
//! | QUEUE_ACQUIRE | free, nobody waits | 1, R set |
//! | QUEUE_ACQUIRE | held, nobody / one / one with longer-lived sets | `{rank, the node's now}`, our place, both sets' expiry at least the patience |
//! | QUEUE_ACQUIRE | held, ours (ticket 0; ticket 7 given) | `{1, the stored ticket}`; `{1, 7}`, the place renewed |
//! | QUEUE_ACQUIRE | free, we head (before another; alone) | 1, R set, our place gone, `next:w1` heard (nothing) |
//! | QUEUE_ACQUIRE | free, another heads | `{1, now}`, placed, R not set |
//! | QUEUE_ACQUIRE | free, the head lapsed (or lapsing at `now`) | 1, the lapsed place pruned, R set |
//! | QUEUE_ACQUIRE | held, the one waiter lapsed | `{0, now}`, pruned, placed first |
//! | QUEUE_ACQUIRE | ttl 0; queue or deadlines a string | ERR invalid expire time; WRONGTYPE, = |
//! | QUEUE_ACQUIRE | R granted to our id (we head); granted to `w1` (it heads) | 1, R our token for our ttl, our place renewed, nothing heard; `{1, the stored ticket}`, R = |
//! | QUEUE_ACQUIRE | R a sorted set | WRONGTYPE after our place was taken |
//! | QUEUE_LEAVE | held, we head before another | 1, our place gone, `next:w1` heard |
//! | QUEUE_LEAVE | held, behind another (a subscriber); alone | 1, our place gone, nothing heard; sets gone |
//! | QUEUE_LEAVE | not a waiter; no queue | 0, = |
//! | QUEUE_LEAVE | queue a string | WRONGTYPE, = |
//! | QUEUE_LEAVE | R granted to our id, we head; R granted to `w1`, it heads | 1, R gone, `next:w1` heard; 1, R =, nothing heard |
//! | QUEUE_LEAVE | R a sorted set | WRONGTYPE, =, nothing heard |
//! | QUEUE_RELEASE | ours, we head before another (heard; unheard) | `{2, -1}`; `{1, -1}`, R gone, our place gone, `next:w1` then the release heard |
//! | QUEUE_RELEASE | ours, we wait behind another | `{2, -1}`, R gone, our place gone, the release heard alone |
//! | QUEUE_RELEASE | ours, our next call placed behind a waiter (we had no place; we headed) | `{2, 1}`, its ticket the node's now, the release heard (after `next:w1`) |
//! | QUEUE_RELEASE | ours, our next call placed into an empty queue (we were alone; no queue) | `{2, 0}`, `next:me2` then the release heard |
//! | QUEUE_RELEASE | ours, our next call with ticket 7 before a waiter's 9 | `{2, 0}`, ticket 7, `next:me2` then the release heard |
//! | QUEUE_RELEASE | held by another; no R | `{0, 1}`; `{-1, -1}`: the places moved all the same, `next:w1` heard, no release |
//! | QUEUE_RELEASE | ours, the head lapsed (or lapsing at `now`) | pruned before the head is read: `next:w2` (`next:me2`) then the release |
//! | QUEUE_RELEASE | ours, the sets live longer | `{1, 1}`, their expiry stays |
//! | QUEUE_RELEASE | ours, neither id; a leaving id with no place | `{1, -1}`; `{2, -1}`: the release alone, the queue = |
//! | QUEUE_RELEASE | no R, no queue, neither id | `{-1, -1}`, nothing heard |
//! | QUEUE_RELEASE | R a sorted set; queue a string | WRONGTYPE after our place left, nothing heard; WRONGTYPE, = |
//! | QUEUE_RELEASE | ours, we head before `w1~10000` living the patience (`w1~100000` close to its end) | `{2, -1}`, R `w1~…` for its ttl (what is left of its place), its place kept, `grant:w1~…` alone heard |
//! | QUEUE_RELEASE | the same, nobody listening | `{1, -1}`, granted |
//! | QUEUE_RELEASE | R our leaving id, not our value | `{2, -1}`, deleted and granted to `w1~100000` |
//! | QUEUE_RELEASE | ours, we were alone, our next call `me2~10000` placed | `{2, 0}`, R gone (never granted to the release's own next call), `next:me2~10000` then the release heard |
//! | QUEUE_RELEASE | ours, the next head `w1~` (`w1~0`; `w1~10000` with no deadline) | `{2, -1}`, not granted: `next:<id>` then the release heard |
//! | QUEUE_RELEASE | R an empty string, neither id | `{0, -1}`, = |
//!
//! [`QUEUE_NEVER_PRUNES_CONTRACT`] is what the negative control's body
//! (QUEUE_ACQUIRE_NEVER_PRUNES) does instead where a place lapsed: keeps it, so the waiter
//! behind is refused.
//!
//! Every row runs three ways, as the kinds rows do (kinds.rs): `EVALSHA` after `SCRIPT
//! LOAD`, `EVAL` on an empty cache, and `EVALSHA` on an empty cache (`-NOSCRIPT`, nothing
//! changed). Times are [`Life`]s from the node's `now`: a ticket is a number (`Given`, the
//! tickets set up are small so the node's clock comes after them) or the node's `now` when
//! the script ran ([`Ticket::Node`], read back within [`SLACK_MS`](crate::SLACK_MS)). The
//! keys are those of `r` under `queue-contract:<row>:`.
//!
//! Each row mirrors the simulation's row of the same name
//! (`redlock_sim::kinds::queue::*_CASES`, `redlock_sim::kinds::queue_release::*_CASES`),
//! which tests/queue_sim.rs checks; the times
//! differ only in scale.

pub use redlock_sim::kinds::case::Ticket;

use crate::kinds::{KindsKey, Life};

/// The queue's scripts, as the core sends them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueScript {
    /// QUEUE_ACQUIRE (token, ttl, id, ticket, patience).
    Acquire,
    /// QUEUE_LEAVE (id).
    Leave,
    /// QUEUE_RELEASE (value, the leaving holder's id or '', its next call's id or '', that
    /// call's ticket, its patience).
    Release,
}

impl QueueScript {
    /// The script's `KEYS` in a row: R, R:queue, R:queue:until of the resource `r`.
    pub fn keys(self) -> &'static [&'static str] {
        &["r", "r:queue", "r:queue:until"]
    }

    /// The waiters' ids among the row's `argv` (QUEUE_RELEASE: the leaving one's and the
    /// placed one's, each where given).
    pub fn ids(self, argv: &[&'static str]) -> Vec<&'static str> {
        let given = |at: usize| argv.get(at).copied().filter(|id| !id.is_empty());
        match self {
            Self::Acquire => given(2).into_iter().collect(),
            Self::Leave => given(0).into_iter().collect(),
            Self::Release => given(1).into_iter().chain(given(2)).collect(),
        }
    }
}

impl std::fmt::Display for QueueScript {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Acquire => "QUEUE_ACQUIRE",
            Self::Leave => "QUEUE_LEAVE",
            Self::Release => "QUEUE_RELEASE",
        })
    }
}

/// One key of a queue row, before or after the script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueKey {
    /// No key.
    Absent,
    /// A string (R): its value, its time to live.
    Str(&'static str, Life),
    /// The queue (R:queue): each waiter's id and ticket, and the set's time to live.
    Tickets(&'static [(&'static str, Ticket)], Life),
    /// The places' deadlines (R:queue:until): each waiter's id and deadline, and the set's
    /// time to live.
    Until(&'static [(&'static str, Life)], Life),
}

impl QueueKey {
    /// The key as a kinds row says it, where one can (all but the tickets).
    pub(crate) fn as_kinds(self) -> Option<KindsKey> {
        match self {
            Self::Absent => Some(KindsKey::Absent),
            Self::Str(value, life) => Some(KindsKey::Str(value, life)),
            Self::Until(members, life) => Some(KindsKey::Holders(members, life)),
            Self::Tickets(..) => None,
        }
    }

    /// The waiters the key names.
    pub(crate) fn members(self) -> Vec<&'static str> {
        match self {
            Self::Absent | Self::Str(..) => Vec::new(),
            Self::Tickets(members, _) => members.iter().map(|(m, _)| *m).collect(),
            Self::Until(members, _) => members.iter().map(|(m, _)| *m).collect(),
        }
    }
}

/// What a queue row's script answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueReply {
    /// An integer.
    Int(i64),
    /// The array `{rank, ticket}`: a place taken or renewed.
    Queued(i64, Ticket),
    /// QUEUE_RELEASE's array `{outcome, rank}`: the release's outcome (2, 1, 0, -1) and the
    /// next call's rank (-1: none placed).
    Released(i64, i64),
    /// An error raised by a command the script called, by the start of its text.
    Error(&'static str),
}

/// One row: a script, the keys before, the `ARGV`, and what must come of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueCase {
    /// The script.
    pub script: QueueScript,
    /// What the row shows (the simulation's row of the same name says the same).
    pub name: &'static str,
    /// R, R:queue and R:queue:until before.
    pub before: &'static [QueueKey],
    /// The script's `ARGV`.
    pub argv: &'static [&'static str],
    /// The reply.
    pub reply: QueueReply,
    /// The keys afterwards.
    pub after: &'static [QueueKey],
    /// Whether a subscriber listens on R's release channel during the call.
    pub heard: bool,
    /// What the script publishes on R's release channel, in order.
    pub said: &'static [&'static str],
}

impl QueueCase {
    /// The same row with a subscriber on R's release channel.
    pub const fn heard(self) -> Self {
        Self {
            heard: true,
            ..self
        }
    }

    /// The same row, publishing `messages` on R's release channel.
    pub const fn saying(self, messages: &'static [&'static str]) -> Self {
        Self {
            said: messages,
            ..self
        }
    }

    /// Wrong copies of this row, each with one expectation changed (the reply; the keys
    /// afterwards, where another state is at hand; what a subscriber hears, where one
    /// listens), every one of which a target that keeps the contract fails when the
    /// script runs: the negative control that shows no queue row passes whatever happens.
    pub fn wrong_copies(self) -> Vec<Self> {
        let reply = match self.reply {
            Int(n) => Int(if n == 0 { 1 } else { 0 }),
            Queued(rank, ticket) => Queued(rank + 1, ticket),
            Released(outcome, rank) => Released(outcome, rank + 1),
            Error(_) => Int(0),
        };
        let mut copies = vec![Self { reply, ..self }];
        let nothing: &[QueueKey] = &[Absent; 3];
        let after = if self.after != self.before {
            Some(self.before)
        } else {
            (self.after != nothing).then_some(nothing)
        };
        copies.extend(after.map(|after| Self { after, ..self }));
        if self.heard {
            let said: &[&str] = match self.said {
                [] => &["next:nobody"],
                [_, ..] => &["next:somebody-else"],
            };
            copies.push(Self { said, ..self });
        }
        copies
    }
}

/// A row that publishes nothing and has no subscriber.
const fn row(
    script: QueueScript,
    name: &'static str,
    (before, argv): (&'static [QueueKey], &'static [&'static str]),
    reply: QueueReply,
    after: &'static [QueueKey],
) -> QueueCase {
    QueueCase {
        script,
        name,
        before,
        argv,
        reply,
        after,
        heard: false,
        said: &[],
    }
}

use Life::{Command, Expired, Forever, Long, Now, Patience, Short};
use QueueKey::{Absent, Str, Tickets, Until};
use QueueReply::{Error, Int, Queued, Released};
use QueueScript::{Acquire, Leave, Release};
use Ticket::{Given, Node};

/// Token `t`, ttl [`TTL_MS`](crate::TTL_MS), our id `me`, ticket 0 (the stored one or the
/// node's), patience [`PATIENCE_MS`](crate::PATIENCE_MS).
const ME: &[&str] = &["t", "100000", "me", "0", "50000"];
/// [`ME`] with the ticket 7 given.
const ME_TICKET_7: &[&str] = &["t", "100000", "me", "7", "50000"];
/// Our id alone (a leave).
const ME_LEAVES: &[&str] = &["me"];
/// Another holds R.
const HELD: QueueKey = Str("u", Long);
/// R set by a grant: our token for the command's ttl.
const GRANTED: QueueKey = Str("t", Command);
/// Waiter `w1` (ticket 1) alone, the set close to its expiry.
const W1: QueueKey = Tickets(&[("w1", Given(1))], Short);
/// `w1`'s live place, the set expiring with it.
const W1_UNTIL: QueueKey = Until(&[("w1", Short)], Short);
/// `w1`'s place lapsed, the set still there.
const W1_LAPSED: QueueKey = Until(&[("w1", Expired)], Short);
/// We head the queue (ticket 1), `w1` next (ticket 2).
const ME_THEN_W1: QueueKey = Tickets(&[("me", Given(1)), ("w1", Given(2))], Short);
/// `w1` heads the queue (ticket 1), we are next (ticket 2).
const W1_THEN_ME: QueueKey = Tickets(&[("w1", Given(1)), ("me", Given(2))], Short);
/// Both places live.
const BOTH_UNTIL: QueueKey = Until(&[("me", Short), ("w1", Short)], Short);
/// `w1`'s ticket 2 alone, once we left or were granted.
const W1_SECOND: QueueKey = Tickets(&[("w1", Given(2))], Short);
/// Our first place, with the node's ticket, the set living the patience.
const ME_PLACED: QueueKey = Tickets(&[("me", Node)], Patience);
/// Our place's deadline just written (now + patience), the set living as long.
const ME_UNTIL: QueueKey = Until(&[("me", Patience)], Patience);
/// A string where a sorted set belongs.
const STRING: QueueKey = Str("x", Forever);
/// R held by our value.
const OURS: QueueKey = Str("t", Long);
/// Our value `t`; our place `me` leaves; no next call.
const LEAVE: &[&str] = &["t", "me", "", "0", "50000"];
/// Our value `t`; we had no place; our line's next call `me2` placed with the node's ticket.
const NEXT_CALL: &[&str] = &["t", "", "me2", "0", "50000"];
/// [`LEAVE`] and [`NEXT_CALL`] at once.
const LEAVE_AND_NEXT: &[&str] = &["t", "me", "me2", "0", "50000"];
/// [`NEXT_CALL`] with the ticket 7 given.
const NEXT_TICKET_7: &[&str] = &["t", "", "me2", "7", "50000"];
/// Our value `t` and neither id: the release alone.
const RELEASE_ONLY: &[&str] = &["t", "", "", "0", "50000"];
/// The next call placed alone, with the node's ticket, the set living the patience.
const ME2_PLACED: QueueKey = Tickets(&[("me2", Node)], Patience);
/// The next call's deadline just written, the set living as long.
const ME2_UNTIL: QueueKey = Until(&[("me2", Patience)], Patience);
/// `w1`'s place and the next call's, both sets living the patience.
const W1_ME2_UNTIL: QueueKey = Until(&[("w1", Short), ("me2", Patience)], Patience);
/// R's name as a sorted set: a key of the wrong type for `GET`.
const R_A_SET: QueueKey = Tickets(&[("x", Given(1))], Forever);
/// R granted to our id `me` by a release.
const GRANT_TO_ME: QueueKey = Str("me", Short);
/// R granted to `w1` by a release.
const GRANT_TO_W1: QueueKey = Str("w1", Short);
/// Our value `t`; our place `me` leaves; our line's next call `me2~10000` (its id carrying
/// its call's ttl, [`SHORT_TTL_MS`](crate::SHORT_TTL_MS)) placed with the node's ticket.
const LEAVE_AND_NEXT_WITH_TTL: &[&str] = &["t", "me", "me2~10000", "0", "50000"];
/// We head the queue (ticket 1), `w1~10000` next (ticket 2): its id carries its call's ttl,
/// [`SHORT_TTL_MS`](crate::SHORT_TTL_MS).
const ME_THEN_W1_10S: QueueKey = Tickets(&[("me", Given(1)), ("w1~10000", Given(2))], Patience);
/// Our place live, `w1~10000`'s living the patience: longer than its ttl.
const ME_W1_10S_UNTIL: QueueKey = Until(&[("me", Short), ("w1~10000", Patience)], Patience);
/// We head the queue (ticket 1), `w1~100000` next (ticket 2): its call's ttl
/// [`TTL_MS`](crate::TTL_MS).
const ME_THEN_W1_100S: QueueKey = Tickets(&[("me", Given(1)), ("w1~100000", Given(2))], Short);
/// Both places close to their end: `w1~100000`'s shorter than its ttl.
const ME_W1_100S_UNTIL: QueueKey = Until(&[("me", Short), ("w1~100000", Short)], Short);
/// `w1~100000` alone once we left.
const W1_100S: QueueKey = Tickets(&[("w1~100000", Given(2))], Short);
/// `w1~100000`'s live place, the set expiring with it.
const W1_100S_UNTIL: QueueKey = Until(&[("w1~100000", Short)], Short);
/// R granted to `w1~100000` for what is left of its place.
const GRANTED_W1_100S: QueueKey = Str("w1~100000", Short);

/// The waiters' queue's part of the contract, run by `run_queue`.
#[rustfmt::skip]
pub const QUEUE_CONTRACT: &[QueueCase] = &[
    // QUEUE_ACQUIRE: prune, take or renew the place, grant a free R to the head, else answer the place.
    row(Acquire, "free, nobody waits: placed and granted", (&[Absent, Absent, Absent], ME), Int(1), &[GRANTED, ME_PLACED, ME_UNTIL]),
    row(Acquire, "held: placed first with the node's ticket", (&[HELD, Absent, Absent], ME), Queued(0, Node), &[HELD, ME_PLACED, ME_UNTIL]),
    row(Acquire, "held, one waiting: placed second, both sets live the patience", (&[HELD, W1, W1_UNTIL], ME), Queued(1, Node), &[HELD, Tickets(&[("w1", Given(1)), ("me", Node)], Patience), Until(&[("w1", Short), ("me", Patience)], Patience)]),
    row(Acquire, "held, the sets live longer: their expiry stays", (&[HELD, Tickets(&[("w1", Given(1))], Long), Until(&[("w1", Long)], Long)], ME), Queued(1, Node), &[HELD, Tickets(&[("w1", Given(1)), ("me", Node)], Long), Until(&[("w1", Long), ("me", Patience)], Long)]),
    row(Acquire, "ours again: the stored ticket kept, the place renewed", (&[HELD, W1_THEN_ME, BOTH_UNTIL], ME), Queued(1, Given(2)), &[HELD, Tickets(&[("w1", Given(1)), ("me", Given(2))], Patience), Until(&[("me", Patience), ("w1", Short)], Patience)]),
    row(Acquire, "a given ticket overwrites the stored one: the new head announced", (&[HELD, ME_THEN_W1, BOTH_UNTIL], ME_TICKET_7), Queued(1, Given(7)), &[HELD, Tickets(&[("w1", Given(2)), ("me", Given(7))], Patience), Until(&[("me", Patience), ("w1", Short)], Patience)]).saying(&["next:w1"]).heard(),
    row(Acquire, "held, a lapsed head pruned: the new head announced", (&[HELD, Tickets(&[("w1", Given(1)), ("w2", Given(2))], Short), Until(&[("w1", Expired), ("w2", Short)], Short)], ME), Queued(1, Node), &[HELD, Tickets(&[("w2", Given(2)), ("me", Node)], Patience), Until(&[("w2", Short), ("me", Patience)], Patience)]).saying(&["next:w2"]).heard(),
    row(Acquire, "the head, free: granted, its place renewed until it leaves", (&[Absent, ME_THEN_W1, BOTH_UNTIL], ME), Int(1), &[GRANTED, Tickets(&[("me", Given(1)), ("w1", Given(2))], Patience), Until(&[("me", Patience), ("w1", Short)], Patience)]).heard(),
    row(Acquire, "the head alone, free: granted, its place renewed", (&[Absent, Tickets(&[("me", Given(1))], Short), Until(&[("me", Short)], Short)], ME), Int(1), &[GRANTED, Tickets(&[("me", Given(1))], Patience), ME_UNTIL]),
    row(Acquire, "not the head, free: placed, not granted", (&[Absent, W1, W1_UNTIL], ME), Queued(1, Node), &[Absent, Tickets(&[("w1", Given(1)), ("me", Node)], Patience), Until(&[("w1", Short), ("me", Patience)], Patience)]),
    row(Acquire, "a lapsed head pruned: the next waiter granted", (&[Absent, W1_THEN_ME, Until(&[("w1", Expired), ("me", Short)], Short)], ME), Int(1), &[GRANTED, Tickets(&[("me", Given(2))], Patience), ME_UNTIL]),
    row(Acquire, "the head's place lapsing this very ms: pruned, the next waiter granted", (&[Absent, W1_THEN_ME, Until(&[("w1", Now), ("me", Short)], Short)], ME), Int(1), &[GRANTED, Tickets(&[("me", Given(2))], Patience), ME_UNTIL]),
    row(Acquire, "held, a lapsed waiter pruned: placed first", (&[HELD, W1, W1_LAPSED], ME), Queued(0, Node), &[HELD, ME_PLACED, ME_UNTIL]),
    row(Acquire, "a bad ttl: placed, R not set", (&[Absent, Absent, Absent], &["t", "0", "me", "0", "50000"]), Error("ERR invalid expire time"), &[Absent, ME_PLACED, ME_UNTIL]),
    row(Acquire, "the queue of the wrong type", (&[HELD, STRING, Absent], ME), Error("WRONGTYPE"), &[HELD, STRING, Absent]),
    row(Acquire, "the deadlines of the wrong type", (&[HELD, Absent, STRING], ME), Error("WRONGTYPE"), &[HELD, Absent, STRING]),
    row(Acquire, "a grant to our id: R ours, our token for our ttl", (&[GRANT_TO_ME, ME_THEN_W1, BOTH_UNTIL], ME), Int(1), &[GRANTED, Tickets(&[("me", Given(1)), ("w1", Given(2))], Patience), Until(&[("me", Patience), ("w1", Short)], Patience)]).heard(),
    row(Acquire, "a grant to another id: we stay queued", (&[GRANT_TO_W1, W1_THEN_ME, BOTH_UNTIL], ME), Queued(1, Given(2)), &[GRANT_TO_W1, Tickets(&[("w1", Given(1)), ("me", Given(2))], Patience), Until(&[("me", Patience), ("w1", Short)], Patience)]).heard(),
    row(Acquire, "R of the wrong type: placed, then WRONGTYPE", (&[R_A_SET, Absent, Absent], ME), Error("WRONGTYPE"), &[R_A_SET, ME_PLACED, ME_UNTIL]),
    // QUEUE_LEAVE: the place goes; the next head is told if the head left.
    row(Leave, "the head leaves: the next head announced", (&[HELD, ME_THEN_W1, BOTH_UNTIL], ME_LEAVES), Int(1), &[HELD, W1_SECOND, W1_UNTIL]).saying(&["next:w1"]).heard(),
    row(Leave, "a waiter behind leaves: nobody announced", (&[HELD, W1_THEN_ME, BOTH_UNTIL], ME_LEAVES), Int(1), &[HELD, W1, W1_UNTIL]).heard(),
    row(Leave, "the last waiter leaves: the sets go", (&[HELD, Tickets(&[("me", Given(1))], Short), ME_UNTIL], ME_LEAVES), Int(1), &[HELD, Absent, Absent]),
    row(Leave, "not a waiter: 0", (&[HELD, W1, W1_UNTIL], ME_LEAVES), Int(0), &[HELD, W1, W1_UNTIL]),
    row(Leave, "no queue: 0", (&[Absent, Absent, Absent], ME_LEAVES), Int(0), &[Absent, Absent, Absent]),
    row(Leave, "the queue of the wrong type", (&[HELD, STRING, Absent], ME_LEAVES), Error("WRONGTYPE"), &[HELD, STRING, Absent]),
    row(Leave, "a grant to our id goes with us: R deleted, the next head announced", (&[GRANT_TO_ME, ME_THEN_W1, BOTH_UNTIL], ME_LEAVES), Int(1), &[Absent, W1_SECOND, W1_UNTIL]).saying(&["next:w1"]).heard(),
    row(Leave, "a grant to another id kept", (&[GRANT_TO_W1, W1_THEN_ME, BOTH_UNTIL], ME_LEAVES), Int(1), &[GRANT_TO_W1, W1, W1_UNTIL]).heard(),
    row(Leave, "R of the wrong type: WRONGTYPE, nothing changed", (&[R_A_SET, ME_THEN_W1, BOTH_UNTIL], ME_LEAVES), Error("WRONGTYPE"), &[R_A_SET, ME_THEN_W1, BOTH_UNTIL]).heard(),
    // QUEUE_RELEASE: prune, our place out, our next call in, the head told if it changed, then the release.
    row(Release, "the head leaves: the next head announced, then the release", (&[OURS, ME_THEN_W1, BOTH_UNTIL], LEAVE), Released(2, -1), &[Absent, W1_SECOND, W1_UNTIL]).saying(&["next:w1", ""]).heard(),
    row(Release, "the head leaves, nobody listening: 1", (&[OURS, ME_THEN_W1, BOTH_UNTIL], LEAVE), Released(1, -1), &[Absent, W1_SECOND, W1_UNTIL]).saying(&["next:w1", ""]),
    row(Release, "a holder behind another leaves: nobody announced", (&[OURS, W1_THEN_ME, BOTH_UNTIL], LEAVE), Released(2, -1), &[Absent, W1, W1_UNTIL]).saying(&[""]).heard(),
    row(Release, "the next call behind another waiter: rank 1, not announced", (&[OURS, W1, W1_UNTIL], NEXT_CALL), Released(2, 1), &[Absent, Tickets(&[("w1", Given(1)), ("me2", Node)], Patience), W1_ME2_UNTIL]).saying(&[""]).heard(),
    row(Release, "the head leaves, its next call behind the next head: rank 1", (&[OURS, ME_THEN_W1, BOTH_UNTIL], LEAVE_AND_NEXT), Released(2, 1), &[Absent, Tickets(&[("w1", Given(2)), ("me2", Node)], Patience), W1_ME2_UNTIL]).saying(&["next:w1", ""]).heard(),
    row(Release, "the holder alone leaves, its next call placed: rank 0, announced", (&[OURS, Tickets(&[("me", Given(1))], Short), Until(&[("me", Short)], Short)], LEAVE_AND_NEXT), Released(2, 0), &[Absent, ME2_PLACED, ME2_UNTIL]).saying(&["next:me2", ""]).heard(),
    row(Release, "no queue, the next call placed: rank 0, announced", (&[OURS, Absent, Absent], NEXT_CALL), Released(2, 0), &[Absent, ME2_PLACED, ME2_UNTIL]).saying(&["next:me2", ""]).heard(),
    row(Release, "a given ticket places the next call by it: ahead of a waiter, announced", (&[OURS, Tickets(&[("w1", Given(9))], Short), W1_UNTIL], NEXT_TICKET_7), Released(2, 0), &[Absent, Tickets(&[("me2", Given(7)), ("w1", Given(9))], Patience), W1_ME2_UNTIL]).saying(&["next:me2", ""]).heard(),
    row(Release, "held by another value: 0, the places still moved", (&[HELD, ME_THEN_W1, BOTH_UNTIL], LEAVE_AND_NEXT), Released(0, 1), &[HELD, Tickets(&[("w1", Given(2)), ("me2", Node)], Patience), W1_ME2_UNTIL]).saying(&["next:w1"]).heard(),
    row(Release, "no R: -1, our place still left", (&[Absent, ME_THEN_W1, BOTH_UNTIL], LEAVE), Released(-1, -1), &[Absent, W1_SECOND, W1_UNTIL]).saying(&["next:w1"]).heard(),
    row(Release, "a lapsed head pruned before the head is read: the new head announced", (&[OURS, Tickets(&[("w1", Given(1)), ("w2", Given(2))], Short), Until(&[("w1", Expired), ("w2", Short)], Short)], NEXT_CALL), Released(2, 1), &[Absent, Tickets(&[("w2", Given(2)), ("me2", Node)], Patience), Until(&[("w2", Short), ("me2", Patience)], Patience)]).saying(&["next:w2", ""]).heard(),
    row(Release, "the head's place lapsing this very ms: pruned, the next call heads", (&[OURS, W1, Until(&[("w1", Now)], Short)], NEXT_CALL), Released(2, 0), &[Absent, ME2_PLACED, ME2_UNTIL]).saying(&["next:me2", ""]).heard(),
    row(Release, "the sets live longer: their expiry stays", (&[OURS, Tickets(&[("w1", Given(1))], Long), Until(&[("w1", Long)], Long)], NEXT_CALL), Released(1, 1), &[Absent, Tickets(&[("w1", Given(1)), ("me2", Node)], Long), Until(&[("w1", Long), ("me2", Patience)], Long)]).saying(&[""]),
    row(Release, "neither id: the release alone", (&[OURS, W1, W1_UNTIL], RELEASE_ONLY), Released(1, -1), &[Absent, W1, W1_UNTIL]).saying(&[""]),
    row(Release, "a leaving id that has no place: the release alone", (&[OURS, W1, W1_UNTIL], LEAVE), Released(2, -1), &[Absent, W1, W1_UNTIL]).saying(&[""]).heard(),
    row(Release, "no R, no queue, neither id: -1, nothing announced", (&[Absent, Absent, Absent], RELEASE_ONLY), Released(-1, -1), &[Absent, Absent, Absent]).heard(),
    row(Release, "R of the wrong type: the places moved, then WRONGTYPE, nothing announced", (&[R_A_SET, ME_THEN_W1, BOTH_UNTIL], LEAVE), Error("WRONGTYPE"), &[R_A_SET, W1_SECOND, W1_UNTIL]).heard(),
    row(Release, "the queue of the wrong type", (&[OURS, STRING, Absent], LEAVE), Error("WRONGTYPE"), &[OURS, STRING, Absent]).heard(),
    // QUEUE_RELEASE that grants: R deleted, set for a head whose id ends in `~<ms>`, `grant:<id>` alone told.
    row(Release, "a head with a ttl shorter than its place: granted for its ttl, told alone", (&[OURS, ME_THEN_W1_10S, ME_W1_10S_UNTIL], LEAVE), Released(2, -1), &[Str("w1~10000", Short), Tickets(&[("w1~10000", Given(2))], Patience), Until(&[("w1~10000", Patience)], Patience)]).saying(&["grant:w1~10000"]).heard(),
    row(Release, "a head whose place has less left than its ttl: granted for what is left", (&[OURS, ME_THEN_W1_100S, ME_W1_100S_UNTIL], LEAVE), Released(2, -1), &[GRANTED_W1_100S, W1_100S, W1_100S_UNTIL]).saying(&["grant:w1~100000"]).heard(),
    row(Release, "a grant nobody hears: 1", (&[OURS, ME_THEN_W1_100S, ME_W1_100S_UNTIL], LEAVE), Released(1, -1), &[GRANTED_W1_100S, W1_100S, W1_100S_UNTIL]).saying(&["grant:w1~100000"]),
    row(Release, "R holding the leaving id, not the value: deleted, granted to the head", (&[GRANT_TO_ME, ME_THEN_W1_100S, ME_W1_100S_UNTIL], LEAVE), Released(2, -1), &[GRANTED_W1_100S, W1_100S, W1_100S_UNTIL]).saying(&["grant:w1~100000"]).heard(),
    row(Release, "its next call heads with a ttl: not granted (its own line's), announced, rank 0", (&[OURS, Tickets(&[("me", Given(1))], Short), Until(&[("me", Short)], Short)], LEAVE_AND_NEXT_WITH_TTL), Released(2, 0), &[Absent, Tickets(&[("me2~10000", Node)], Patience), Until(&[("me2~10000", Patience)], Patience)]).saying(&["next:me2~10000", ""]).heard(),
    row(Release, "a head with `~` and no digits: announced, then the release, no grant", (&[OURS, Tickets(&[("me", Given(1)), ("w1~", Given(2))], Short), Until(&[("me", Short), ("w1~", Short)], Short)], LEAVE), Released(2, -1), &[Absent, Tickets(&[("w1~", Given(2))], Short), Until(&[("w1~", Short)], Short)]).saying(&["next:w1~", ""]).heard(),
    row(Release, "a head asking for 0 ms: announced, then the release, no grant", (&[OURS, Tickets(&[("me", Given(1)), ("w1~0", Given(2))], Short), Until(&[("me", Short), ("w1~0", Short)], Short)], LEAVE), Released(2, -1), &[Absent, Tickets(&[("w1~0", Given(2))], Short), Until(&[("w1~0", Short)], Short)]).saying(&["next:w1~0", ""]).heard(),
    row(Release, "a head with a ttl but no deadline: announced, then the release, no grant", (&[OURS, ME_THEN_W1_10S, Until(&[("me", Short)], Short)], LEAVE), Released(2, -1), &[Absent, Tickets(&[("w1~10000", Given(2))], Patience), Absent]).saying(&["next:w1~10000", ""]).heard(),
    row(Release, "an empty R and no leaving id: another value, 0", (&[Str("", Long), W1, W1_UNTIL], RELEASE_ONLY), Released(0, -1), &[Str("", Long), W1, W1_UNTIL]).heard(),
];

/// What QUEUE_ACQUIRE_NEVER_PRUNES does where it differs from QUEUE_ACQUIRE: a lapsed place
/// stays, and heads the queue.
#[rustfmt::skip]
pub const QUEUE_NEVER_PRUNES_CONTRACT: &[QueueCase] = &[
    row(Acquire, "a lapsed head kept: the next waiter refused", (&[Absent, W1_THEN_ME, Until(&[("w1", Expired), ("me", Short)], Short)], ME), Queued(1, Given(2)), &[Absent, Tickets(&[("w1", Given(1)), ("me", Given(2))], Patience), Until(&[("w1", Expired), ("me", Patience)], Patience)]),
    row(Acquire, "held, a lapsed waiter kept: placed second", (&[HELD, W1, W1_LAPSED], ME), Queued(1, Node), &[HELD, Tickets(&[("w1", Given(1)), ("me", Node)], Patience), Until(&[("w1", Expired), ("me", Patience)], Patience)]),
];

/// The QUEUE_ACQUIRE rows of [`QUEUE_CONTRACT`] that QUEUE_ACQUIRE_NEVER_PRUNES breaks: the
/// four where a place lapsed, and the deadlines of the wrong type (the mutant writes our
/// place in the queue before it first reads the deadlines, and then fails).
pub const BROKEN_BY_NEVER_PRUNES: [&str; 5] = [
    "held, a lapsed head pruned: the new head announced",
    "a lapsed head pruned: the next waiter granted",
    "the head's place lapsing this very ms: pruned, the next waiter granted",
    "held, a lapsed waiter pruned: placed first",
    "the deadlines of the wrong type",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_has_a_state_per_key_and_a_name_of_its_own() {
        for table in [QUEUE_CONTRACT, QUEUE_NEVER_PRUNES_CONTRACT] {
            for (i, case) in table.iter().enumerate() {
                assert_eq!(case.before.len(), 3, "{}", case.name);
                assert_eq!(case.after.len(), 3, "{}", case.name);
                let argc = match case.script {
                    Leave => 1,
                    Acquire | Release => 5,
                };
                assert_eq!(case.argv.len(), argc, "{}", case.name);
                let twice = table[..i]
                    .iter()
                    .any(|c| c.script == case.script && c.name == case.name);
                assert!(!twice, "{}: {} twice", case.script, case.name);
            }
        }
    }

    #[test]
    fn the_arguments_are_the_tables_times() {
        assert_eq!(ME[1].parse::<u64>().unwrap(), crate::TTL_MS);
        assert_eq!(ME[4].parse::<u64>().unwrap(), crate::PATIENCE_MS);
        assert_eq!(ME_TICKET_7[4], ME[4]);
        for argv in [
            LEAVE,
            NEXT_CALL,
            LEAVE_AND_NEXT,
            NEXT_TICKET_7,
            RELEASE_ONLY,
            LEAVE_AND_NEXT_WITH_TTL,
        ] {
            assert_eq!(argv[4], ME[4]);
        }
        let asked = |id: &str| {
            id.rsplit_once('~')
                .map(|(_, ms)| ms.parse::<u64>().unwrap())
        };
        assert_eq!(asked(LEAVE_AND_NEXT_WITH_TTL[2]), Some(crate::SHORT_TTL_MS));
        let ids = [ME_THEN_W1_10S, ME_THEN_W1_100S].map(|k| k.members()[1]);
        let ids = ids.map(|id| asked(id).unwrap());
        assert_eq!(ids, [crate::SHORT_TTL_MS, crate::TTL_MS]);
    }
}
