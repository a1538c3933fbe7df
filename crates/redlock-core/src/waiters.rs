//! The waiters' queue on the nodes (docs/design.md, "The waiters' queue"): while a mutex is
//! contended, the calls that wait for it (of any client) take places in a queue beside its
//! key on every node, and a node grants the key only to the queue's head. A release then
//! wakes one waiter, the head, instead of every waiter of every process (a herd).
//!
//! On each node, for resource `R`: `R:queue`, a sorted set of the waiters' ids scored by
//! their *tickets* (the order), and `R:queue:until`, the same ids scored by the node-time
//! millisecond at which each place lapses unless its waiter renews it. Both exist only
//! while someone waits, and expire with their last place.
//!
//! - A call that found the lock held waits in the queue: each attempt after that is
//!   [`QUEUE_ACQUIRE_SCRIPT`], which prunes lapsed places, sets the key if it is free and
//!   the call is the head (or the queue is empty), and else takes or renews the call's place.
//!   The first place a node gives is scored by the node's own clock; the call then sends the
//!   largest ticket its nodes gave as its ticket on every node, so that every node orders
//!   the waiters alike (docs/design.md, "The waiters' queue", why that rules out a
//!   livelock).
//! - A grant leaves the place where it is: a grant on too few nodes is released and the
//!   call keeps its turn. Once a quorum granted it, the call holds and keeps its place
//!   until its release ([`QUEUE_RELEASE_SCRIPT`], [`Succession`]), which leaves it, places
//!   the next call of the holder's line if the line is contested, announces the next head
//!   on the release channel (`next:<id>`), then releases and announces itself as before (an
//!   empty message). Only a call that is the head on a quorum of nodes tries at once when
//!   it hears of a release; the others keep their retry timers, which also renew their
//!   places. A call that gives up leaves ([`QUEUE_LEAVE_SCRIPT`]).
//! - A place lapses [`Place`]'s patience after its last renewal: a waiter that died, gave up
//!   unheard or lost its nodes blocks the queue for at most that long. A call that gives
//!   up leaves too.
//!
//! Order only: who may set the key. Safety stays the mutex's (algorithm.md §3, §4): the key
//! is set by one atomic step per node, and a quorum of them decides.

use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};

use crate::grant::Grants;
use crate::id::NodeId;
use crate::io::NodeFault;
use crate::script::Script;
use crate::token::Token;
use crate::vote::Vote;

/// A waiter's attempt (`KEYS` = R, R:queue, R:queue:until; `ARGV[1]` token, `ARGV[2]` ttl
/// ms, `ARGV[3]` the waiter's id, `ARGV[4]` its ticket (0: the one it has here, or the
/// node's clock now), `ARGV[5]` its patience ms): prunes the places whose deadline passed
/// (the node's `TIME`); 1 and R set to the token if a release granted R to this waiter
/// (grant.rs: R holds its id), or if R is free and the queue empty or headed by this
/// waiter (its place kept: the waiter leaves once a quorum granted it); else the place
/// taken or renewed (ticket, deadline now + patience, both sets' expiry at least that far)
/// and `{rank, ticket}`.
pub const QUEUE_ACQUIRE_SCRIPT: Script = Script {
    body: "local t = redis.call('TIME') local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) local first = redis.call('ZRANGE', KEYS[2], 0, 0)[1] local gone = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, 64) for i = 1, #gone do redis.call('ZREM', KEYS[2], gone[i]) redis.call('ZREM', KEYS[3], gone[i]) end local ticket = tonumber(ARGV[4]) if ticket == 0 then ticket = tonumber(redis.call('ZSCORE', KEYS[2], ARGV[3]) or now) end redis.call('ZADD', KEYS[2], ticket, ARGV[3]) redis.call('ZADD', KEYS[3], now + tonumber(ARGV[5]), ARGV[3]) for i = 2, 3 do if redis.call('PTTL', KEYS[i]) < tonumber(ARGV[5]) then redis.call('PEXPIRE', KEYS[i], ARGV[5]) end end if redis.call('GET', KEYS[1]) == ARGV[3] then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1 end local head = redis.call('ZRANGE', KEYS[2], 0, 0)[1] if head ~= first and head ~= ARGV[3] then redis.pcall('PUBLISH', 'redlock:released:' .. KEYS[1], 'next:' .. head) end if redis.call('EXISTS', KEYS[1]) == 0 and head == ARGV[3] then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1 end return {redis.call('ZRANK', KEYS[2], ARGV[3]), ticket}",
    sha1: "be6c33dc24a3b66256bbbb56a099fca83ec3027c",
};

/// A waiter leaves (`KEYS` = R, R:queue, R:queue:until; `ARGV[1]` its id): R deleted if a
/// release granted it to the waiter (grant.rs), its place removed from both sets; if it
/// was the head, the next head announced. 1 if it had a place, else 0.
pub const QUEUE_LEAVE_SCRIPT: Script = Script {
    body: "if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end local head = redis.call('ZRANGE', KEYS[2], 0, 0)[1] redis.call('ZREM', KEYS[3], ARGV[1]) local n = redis.call('ZREM', KEYS[2], ARGV[1]) if n == 1 and head == ARGV[1] then local nxt = redis.call('ZRANGE', KEYS[2], 0, 0)[1] if nxt then redis.pcall('PUBLISH', 'redlock:released:' .. KEYS[1], 'next:' .. nxt) end end return n",
    sha1: "981baee101392ca6685fa8288bd2894386a0af56",
};

/// A release from the queue (`KEYS` = R, R:queue, R:queue:until; `ARGV[1]` the stored
/// value, `ARGV[2]` the leaving holder's id or '', `ARGV[3]` the id of the next call of the
/// holder's line or '', `ARGV[4]` its ticket (0: the node's clock now), `ARGV[5]` its
/// patience ms): prunes the lapsed places (at most 64), removes the holder's place, places
/// the next call (ticket, deadline now + patience, both sets' expiry at least that far),
/// then deletes R if it holds the value or the leaving id. Having deleted it, it grants R
/// to the head if the head's id carries a ttl and is not the next call just placed (its
/// line hands it the turn): R set to the head's id for the ttl or what is left of the
/// head's place, whichever is shorter, and `grant:<id>` published (grant.rs). Else it
/// announces the head as `next:<id>` if it changed, and the release as
/// [`RELEASE_SCRIPT`](crate::RELEASE_SCRIPT) does. Answers `{outcome, rank}`: the outcome
/// as the release script's (2, 1, 0, -1; 2 when the grant or release was heard), and the
/// next call's rank (-1 if none was placed).
pub const QUEUE_RELEASE_SCRIPT: Script = Script {
    body: "local t = redis.call('TIME') local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) local first = redis.call('ZRANGE', KEYS[2], 0, 0)[1] local gone = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, 64) for i = 1, #gone do redis.call('ZREM', KEYS[2], gone[i]) redis.call('ZREM', KEYS[3], gone[i]) end if ARGV[2] ~= '' then redis.call('ZREM', KEYS[2], ARGV[2]) redis.call('ZREM', KEYS[3], ARGV[2]) end local rank = -1 if ARGV[3] ~= '' then local ticket = tonumber(ARGV[4]) if ticket == 0 then ticket = now end redis.call('ZADD', KEYS[2], ticket, ARGV[3]) redis.call('ZADD', KEYS[3], now + tonumber(ARGV[5]), ARGV[3]) for i = 2, 3 do if redis.call('PTTL', KEYS[i]) < tonumber(ARGV[5]) then redis.call('PEXPIRE', KEYS[i], ARGV[5]) end end rank = redis.call('ZRANK', KEYS[2], ARGV[3]) end local head = redis.call('ZRANGE', KEYS[2], 0, 0)[1] local ch = 'redlock:released:' .. KEYS[1] local v = redis.call('GET', KEYS[1]) local out = 0 if v == ARGV[1] or (ARGV[2] ~= '' and v == ARGV[2]) then redis.call('DEL', KEYS[1]) local g = head and head ~= ARGV[3] and tonumber(string.match(head, '~(%d+)$')) if g then local left = tonumber(redis.call('ZSCORE', KEYS[3], head) or 0) - now if left < g then g = left end end local n if g and g >= 1 then redis.call('SET', KEYS[1], head, 'PX', g) n = redis.pcall('PUBLISH', ch, 'grant:' .. head) else if head and head ~= first then redis.pcall('PUBLISH', ch, 'next:' .. head) end n = redis.pcall('PUBLISH', ch, '') end if type(n) == 'number' and n > 0 then out = 2 else out = 1 end else if head and head ~= first then redis.pcall('PUBLISH', ch, 'next:' .. head) end if v == false then out = -1 end end return {out, rank}",
    sha1: "12dfd65967c5704cb57c9e933afa3d6e47c50b3b",
};

/// A negative control's QUEUE_ACQUIRE (`_mutants`, `QueueNeverPrunes`): the same without
/// the pruning, so a dead waiter's place heads the queue for good.
#[cfg(feature = "_mutants")]
pub const QUEUE_ACQUIRE_NEVER_PRUNES_SCRIPT: Script = Script {
    body: "local t = redis.call('TIME') local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) local first = redis.call('ZRANGE', KEYS[2], 0, 0)[1] local ticket = tonumber(ARGV[4]) if ticket == 0 then ticket = tonumber(redis.call('ZSCORE', KEYS[2], ARGV[3]) or now) end redis.call('ZADD', KEYS[2], ticket, ARGV[3]) redis.call('ZADD', KEYS[3], now + tonumber(ARGV[5]), ARGV[3]) for i = 2, 3 do if redis.call('PTTL', KEYS[i]) < tonumber(ARGV[5]) then redis.call('PEXPIRE', KEYS[i], ARGV[5]) end end if redis.call('GET', KEYS[1]) == ARGV[3] then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1 end local head = redis.call('ZRANGE', KEYS[2], 0, 0)[1] if head ~= first and head ~= ARGV[3] then redis.pcall('PUBLISH', 'redlock:released:' .. KEYS[1], 'next:' .. head) end if redis.call('EXISTS', KEYS[1]) == 0 and head == ARGV[3] then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1 end return {redis.call('ZRANK', KEYS[2], ARGV[3]), ticket}",
    sha1: "fbef26a1c0e8dec6738f9966f3ee2e34dde91d7e",
};

/// How soon a waiting call tries again when its client cannot hear a release or its turn on
/// a quorum of nodes (no RESP3 connection, channels denied; with notifications off, a call
/// with a place in the queue). As the queue's head, the key waits free for it until it
/// tries: a waiter that learned it heads the queue only at its place's renewal (a third of
/// its patience, about 280 ms by default) left the lock idle that long at every turn. And a
/// call outside the queue (fenced, another kind) competes with such waiters for the moments
/// the key is free (docs/design.md, "A waiter that cannot hear polls"). Each try is a command on
/// every node: the cost of not hearing, paid by the waiters that cannot.
pub(crate) const UNHEARD_POLL_EVERY: Duration = Duration::from_millis(10);

/// The suffix of a resource's queue key: `R:queue`.
pub const QUEUE_SUFFIX: &str = ":queue";

/// The suffix of a resource's place deadlines key: `R:queue:until`.
pub const QUEUE_UNTIL_SUFFIX: &str = ":queue:until";

/// What a grant through the queue publishes on the release channel, before the next head's
/// id (a release publishes an empty message).
pub const NEXT_PREFIX: &[u8] = b"next:";

/// Which queue script a command runs, and so its arguments and how its reply reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum QueueUse {
    /// QUEUE_ACQUIRE: 1, or `{rank, ticket}`.
    Acquire,
    /// QUEUE_LEAVE: 1 or 0.
    Leave,
    /// QUEUE_RELEASE: `{outcome, rank}`.
    Release,
}

/// A waiter's ticket and patience and id, packed into the command's extra slot (as
/// kinds/args.rs packs a kind's keys): the ticket and the patience as 8 bytes little-endian
/// each, then the id.
pub(crate) fn pack(ticket: u64, patience_ms: u64, id: &Token) -> Bytes {
    let id = id.as_bytes();
    let mut packed = BytesMut::with_capacity(16 + id.len());
    packed.extend_from_slice(&ticket.to_le_bytes());
    packed.extend_from_slice(&patience_ms.to_le_bytes());
    packed.extend_from_slice(id);
    packed.freeze()
}

/// A release's queue args ([`QUEUE_RELEASE_SCRIPT`]), packed into the command's extra slot:
/// the holder's id (`leaving`) and the next call's [`pack`]ed args (`next`), either empty
/// for none; the holder's id's length first, as 8 bytes little-endian.
pub(crate) fn pack_release(leaving: Option<&Token>, next: Option<&Bytes>) -> Bytes {
    let leaving = leaving.map_or(&[][..], Token::as_bytes);
    let next = next.map_or(&[][..], |n| &n[..]);
    let mut packed = BytesMut::with_capacity(8 + leaving.len() + next.len());
    packed.extend_from_slice(&(leaving.len() as u64).to_le_bytes());
    packed.extend_from_slice(leaving);
    packed.extend_from_slice(next);
    packed.freeze()
}

/// The holder's id and the next call's packed args of [`pack_release`]d bytes (empty for
/// none, or if too short: never made so).
fn unpack_release(packed: &[u8]) -> (&[u8], &[u8]) {
    let Some((len, rest)) = packed.split_first_chunk::<8>() else {
        return (&[], &[]);
    };
    let len = usize::try_from(u64::from_le_bytes(*len)).unwrap_or(usize::MAX);
    match rest.split_at_checked(len) {
        Some((leaving, next)) => (leaving, next),
        None => (&[], &[]),
    }
}

/// The ticket, patience and id of [`pack`]ed bytes (zeros and nothing if too short: never
/// made so).
fn unpack(packed: &[u8]) -> (u64, u64, &[u8]) {
    let Some((ticket, rest)) = packed.split_first_chunk::<8>() else {
        return (0, 0, &[]);
    };
    let Some((patience, id)) = rest.split_first_chunk::<8>() else {
        return (0, 0, &[]);
    };
    (
        u64::from_le_bytes(*ticket),
        u64::from_le_bytes(*patience),
        id,
    )
}

/// `key` followed by `suffix`.
fn suffixed(key: &[u8], suffix: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(key.len() + suffix.len());
    out.extend_from_slice(key);
    out.extend_from_slice(suffix.as_bytes());
    out
}

/// A queue script call's arguments, handed to `f`: `[EVALSHA sha | EVAL body] 3 R R:queue
/// R:queue:until`, then the token, ttl, id, ticket and patience (QUEUE_ACQUIRE), the id
/// (QUEUE_LEAVE, whose command carries the id as its token), or the token, the holder's id,
/// and the next call's id, ticket and patience (QUEUE_RELEASE; '' and 0 for none).
#[cold]
pub(crate) fn script_args(
    call: [&[u8]; 2],
    usage: QueueUse,
    (key, packed): (&[u8], &[u8]),
    [token, ttl]: [&[u8]; 2],
    f: impl FnOnce(&[&[u8]]),
) {
    let (queue, until) = (
        suffixed(key, QUEUE_SUFFIX),
        suffixed(key, QUEUE_UNTIL_SUFFIX),
    );
    let [name, script] = call;
    match usage {
        QueueUse::Leave => f(&[name, script, b"3", key, &queue, &until, token]),
        QueueUse::Release => {
            let (leaving, next) = unpack_release(packed);
            let (ticket, patience, id) = unpack(next);
            let (ticket, patience) = (ticket.to_string(), patience.to_string());
            let args = [name, script, b"3", key, &queue, &until, token, leaving, id];
            f(&[&args[..], &[ticket.as_bytes(), patience.as_bytes()]].concat())
        }
        QueueUse::Acquire => {
            let (ticket, patience, id) = unpack(packed);
            let (ticket, patience) = (ticket.to_string(), patience.to_string());
            let args = [name, script, b"3", key, &queue, &until, token, ttl, id];
            f(&[&args[..], &[ticket.as_bytes(), patience.as_bytes()]].concat())
        }
    }
}

/// The ticket a waiter takes at `now`: the median of the nodes' wall clocks in ms, each
/// estimated from its last `TIME` reading (`since_epoch` read at `read_at` on our clock) and
/// the time since. The same number goes to every node, so every node orders the waiters
/// alike from their first places on (docs/design.md, "The waiters' queue"); and the clocks
/// of different clients' nodes agree to within their spread, which bounds how far from
/// first come, first served the order may be. `None` without any reading (the nodes then
/// give the first tickets themselves).
pub(crate) fn ticket(
    readings: impl Iterator<Item = (Duration, Instant)>,
    now: Instant,
) -> Option<u64> {
    // On the stack for up to `INLINE` nodes: a clock reading computes it each time.
    const INLINE: usize = 16;
    let (mut inline, mut spilled, mut n) = ([0u64; INLINE], Vec::new(), 0);
    for (since_epoch, read_at) in readings {
        let at = since_epoch.saturating_add(now.saturating_duration_since(read_at));
        let ms = u64::try_from(at.as_millis()).unwrap_or(u64::MAX);
        if n < INLINE {
            inline[n] = ms;
        } else {
            if n == INLINE {
                spilled.extend_from_slice(&inline);
            }
            spilled.push(ms);
        }
        n += 1;
    }
    let ms = if n <= INLINE {
        &mut inline[..n]
    } else {
        &mut spilled[..]
    };
    ms.sort_unstable();
    ms.get(ms.len() / 2).copied()
}

/// QUEUE_ACQUIRE's array reply `{rank, ticket}` as a vote; `None` if it is not one.
pub(crate) fn queued_vote(items: &[crate::resp::Reply]) -> Option<Vote> {
    use crate::resp::Reply;
    match items {
        [Reply::Integer(rank), Reply::Integer(ticket)] => Some(Vote::Queued {
            rank: u64::try_from(*rank).ok()?,
            ticket: u64::try_from(*ticket).ok()?,
        }),
        _ => None,
    }
}

/// QUEUE_RELEASE's array reply `{outcome, rank}`: the release's outcome (as
/// [`RELEASE_SCRIPT`](crate::RELEASE_SCRIPT)'s answer) and the next call's rank, if one was
/// placed; `None` if it is not one.
pub(crate) fn released(items: &[crate::resp::Reply]) -> Option<(i64, Option<u64>)> {
    use crate::resp::Reply;
    match items {
        [Reply::Integer(outcome @ -1..=2), Reply::Integer(rank)] => {
            Some((*outcome, u64::try_from(*rank).ok()))
        }
        _ => None,
    }
}

/// A call's rank in the waiters' queue on each node (`None`: not heard, or not placed).
pub(crate) type Ranks = Vec<Option<u64>>;

/// What the release of a held mutex does in the waiters' queue ([`QUEUE_RELEASE_SCRIPT`]):
/// the holder leaves the place it kept from its grant (its leave folded into its release),
/// and the next call of its client's line, if the line is contested, takes its place with
/// the same script, so that it waits its turn without a place attempt of its own.
#[derive(Debug, Default)]
pub(crate) struct Succession {
    /// The holder's waiter id, if it was granted from the queue.
    leaving: Option<Token>,
    /// The next call's [`pack`]ed args, if the release places it.
    next: Option<Bytes>,
    /// Per node, the next call's rank as the release's answers give it (`None` until one
    /// does, or if it placed nothing); empty unless the release places the next call.
    ranks: Ranks,
}

impl Succession {
    /// The holder keeps its place `id` until its release (a grant from the queue).
    pub(crate) fn keep(&mut self, id: Token) {
        self.leaving = Some(id);
    }

    /// The release will place the next call, whose [`pack`]ed args are `next`, over `nodes`.
    pub(crate) fn place_next(&mut self, next: Bytes, nodes: usize) {
        self.next = Some(next);
        self.ranks = vec![None; nodes];
    }

    /// Passes the holder's place on to the call that takes its hold by a hand-over.
    pub(crate) fn hand_over(&mut self) -> Self {
        Self {
            leaving: self.leaving.take(),
            ..Self::default()
        }
    }

    /// The release's queue args ([`pack_release`]) if it has any queue work, else `None`
    /// (the plain release then goes out, in its native form where the node has one).
    pub(crate) fn release_args(&self) -> Option<Bytes> {
        (self.leaving.is_some() || self.next.is_some())
            .then(|| pack_release(self.leaving.as_ref(), self.next.as_ref()))
    }

    /// `node` answered the release with the next call's `rank` there.
    pub(crate) fn on_rank(&mut self, node: NodeId, rank: Option<u64>) {
        if let Some(slot) = self.ranks.get_mut(node.index()) {
            *slot = rank;
        }
    }

    /// The next call's rank on each node, once its place went out with the release
    /// (`None` otherwise).
    pub(crate) fn take_ranks(&mut self) -> Option<Ranks> {
        self.next.take()?;
        Some(std::mem::take(&mut self.ranks))
    }
}

/// A waiting call's place in the queues of the nodes, as far as it knows.
#[derive(Debug)]
pub(crate) struct Place {
    /// The waiter's id: drawn once per call, the same on every node and every attempt.
    id: Token,
    /// The ticket sent: 0 until a node gave one, then the largest any gave.
    ticket: u64,
    /// How long a place lasts after its last renewal, in ms.
    patience_ms: u64,
    /// Per node: whether the call heads the queue there, as last heard (a rank, or a grant's
    /// `next:` announcement).
    head: Vec<bool>,
    /// Whether the last attempt had answers from fewer than a quorum: the next attempt is
    /// a plain one, which renews no place (so the places it cannot reach lapse).
    lapsed: bool,
    /// Whether a node answered with the call's place yet.
    placed: bool,
    /// The ticket the last attempt sent (0: the nodes gave their own clocks).
    sent: u64,
    /// Per node: whether its answer to the attempt in flight was read (each is read as it
    /// comes, in order with the node's announcements: a later `next:` wins over an earlier
    /// rank, and the other way round).
    read: Vec<bool>,
    /// How many nodes' answers to the attempt in flight showed the script ran there.
    answered: usize,
    /// Per node, what its announcements said while the call waited in its client's line,
    /// its place taken by the release of the call ahead but its ranks not read yet
    /// ([`Place::on_early_next`]): whether the last `next:` named it, and whether a release
    /// followed.
    early: Vec<Early>,
    /// The grants of the key to the call that releases made (grant.rs).
    grants: Grants,
}

/// What a node announced to a placed call before its ranks were read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Early {
    /// The last `next:` heard: whether it named the call (`None`: none heard).
    next: Option<bool>,
    /// A release was announced after it (or with no `next:` heard).
    released: bool,
}

impl Place {
    /// A new place for a call over `nodes` nodes, drawn at `drawn`, with `patience_ms` and
    /// its `ticket` (0: the nodes give one).
    pub(crate) fn new(
        id: Token,
        (nodes, drawn): (usize, Instant),
        patience_ms: u64,
        ticket: u64,
    ) -> Self {
        Self {
            grants: Grants::new(nodes, drawn),
            id,
            ticket,
            patience_ms,
            head: vec![false; nodes],
            lapsed: false,
            placed: false,
            sent: 0,
            read: vec![false; nodes],
            answered: 0,
            early: Vec::new(),
        }
    }

    /// The waiter's id.
    pub(crate) fn id(&self) -> &Token {
        &self.id
    }

    /// The packed ticket, patience and id the next QUEUE_ACQUIRE carries; `None` while the
    /// place has lapsed (the next attempt is a plain one).
    pub(crate) fn args(&mut self) -> Option<Bytes> {
        if self.lapsed {
            return None;
        }
        self.sent = self.ticket;
        self.read.fill(false);
        self.answered = 0;
        Some(pack(self.ticket, self.patience_ms, &self.id))
    }

    /// Whether the places were taken with the nodes' own clocks as tickets (the client had
    /// no reading of them yet): they may order the waiters differently, so the call sends
    /// the ticket it agreed on (the largest) at once, not at its next retry.
    pub(crate) fn needs_agreement(&self) -> bool {
        self.placed && self.sent == 0 && !self.lapsed
    }

    /// Reads the answers to the attempt in flight that came since the last call (`votes`:
    /// one per node, `None` while unanswered): each node's rank, and the largest ticket
    /// given.
    pub(crate) fn on_answers<'v>(&mut self, votes: impl Iterator<Item = Option<&'v Vote>>) {
        let nodes = self.head.iter_mut().zip(&mut self.read);
        for ((head, read), vote) in nodes.zip(votes) {
            let Some(vote) = vote.filter(|_| !*read) else {
                continue;
            };
            *read = true;
            let (is_head, ran) = match vote {
                Vote::Queued { rank, ticket } => {
                    self.ticket = self.ticket.max(*ticket);
                    self.placed = true;
                    (*rank == 0, true)
                }
                // Granted here: this call heads the queue there, its place kept (a grant
                // on too few nodes keeps the turn).
                Vote::Yes => (true, true),
                // The script ran (a quarantined node's answer is vetoed, not lost): the
                // place was renewed there.
                Vote::No | Vote::Fault(NodeFault::Quarantined { .. }) => (false, true),
                _ => (false, false),
            };
            *head = is_head;
            self.answered += usize::from(ran);
        }
    }

    /// The attempt in flight ended: a node that never answered counts as not headed by
    /// this call, and a place with answers from fewer than `quorum` nodes lapses until an
    /// attempt has them again.
    pub(crate) fn on_attempt_end(&mut self, quorum: usize) {
        for (head, read) in self.head.iter_mut().zip(&self.read) {
            *head &= *read;
        }
        self.lapsed = self.answered < quorum;
    }

    /// The release of the call ahead in its client's line placed this call
    /// ([`Succession`]): `ranks`, its rank on each node that answered. Returns whether a
    /// quorum did; if so the place stands as after an attempt, else the call's next attempt
    /// takes it with the same id and ticket.
    pub(crate) fn on_placed(&mut self, ranks: &[Option<u64>], quorum: usize) -> bool {
        let ticket = self.ticket;
        let votes: Vec<Option<Vote>> = (ranks.iter())
            .map(|r| r.map(|rank| Vote::Queued { rank, ticket }))
            .collect();
        self.on_answers(votes.iter().map(Option::as_ref));
        let placed = self.answered >= quorum;
        if placed {
            self.on_attempt_end(quorum);
        }
        placed
    }

    /// `node` announced `id` as its queue's next head while the call waited in its line,
    /// placed by the release of the call ahead (it listens from when that release went out:
    /// docs/design.md, "The waiters' queue"). Read after the ranks that release answered
    /// ([`apply_early`](Self::apply_early)): on each connection a node's announcements
    /// follow its answer to the release, so they are the later word.
    pub(crate) fn on_early_next(&mut self, node: NodeId, id: &[u8]) {
        let heads = id == self.id.as_bytes();
        if let Some(early) = self.early_at(node) {
            *early = Early {
                next: Some(heads),
                released: false,
            };
        }
    }

    /// `node` announced that a release granted the key to `id` while the call waited in its
    /// line (see [`on_early_next`](Self::on_early_next)); a grant to this call counts from
    /// the moment its place was drawn, before the release that placed it went out.
    pub(crate) fn on_early_grant(&mut self, node: NodeId, id: &[u8]) {
        self.on_early_next(node, id);
        if id == self.id.as_bytes() {
            self.grants.heard(node);
        }
    }

    /// `node` announced a release while the call waited in its line (see
    /// [`on_early_next`](Self::on_early_next)).
    pub(crate) fn on_early_release(&mut self, node: NodeId) {
        if let Some(early) = self.early_at(node) {
            early.released = true;
        }
    }

    fn early_at(&mut self, node: NodeId) -> Option<&mut Early> {
        if self.early.is_empty() {
            self.early = vec![Early::default(); self.head.len()];
        }
        self.early.get_mut(node.index())
    }

    /// Once the ranks are read ([`on_placed`](Self::on_placed)): the announcements heard
    /// before them win, and the nodes the call heads that announced a release since are
    /// returned, each a notice the call's wait counts.
    pub(crate) fn apply_early(&mut self) -> Vec<NodeId> {
        let mut released = Vec::new();
        for (i, early) in std::mem::take(&mut self.early).into_iter().enumerate() {
            if let (Some(heads), Some(head)) = (early.next, self.head.get_mut(i)) {
                *head = heads;
            }
            if early.released && self.head.get(i).is_some_and(|h| *h) {
                released.push(NodeId::new(i));
            }
        }
        released
    }

    /// `node` announced `id` as its queue's next head.
    pub(crate) fn on_next(&mut self, node: NodeId, id: &[u8]) {
        if let Some(head) = self.head.get_mut(node.index()) {
            *head = id == self.id.as_bytes();
        }
    }

    /// `node` announced that a release granted the key to `id` (grant.rs): if it is this
    /// call's, the call heads the queue there and the grant is counted where it may be.
    /// Returns whether it was this call's.
    pub(crate) fn on_grant(&mut self, node: NodeId, id: &[u8]) -> bool {
        self.on_next(node, id);
        let ours = id == self.id.as_bytes();
        if ours {
            self.grants.heard(node);
        }
        ours
    }

    /// The grants of the key to the call that releases made (grant.rs).
    pub(crate) fn grants(&self) -> &Grants {
        &self.grants
    }

    /// [`grants`](Self::grants), to change.
    pub(crate) fn grants_mut(&mut self) -> &mut Grants {
        &mut self.grants
    }

    /// With grants counted from `quorum` nodes: the moment the hold's validity counts from,
    /// and how long it lasts at the least from there (grant.rs).
    pub(crate) fn granted(&self, quorum: usize, ttl: Duration) -> Option<(Instant, Duration)> {
        let origin = self.grants.origin(quorum)?;
        Some((origin, crate::grant::span(ttl, self.patience_ms)))
    }

    /// Whether the call has a place and heads the queue on fewer than `quorum` nodes: a
    /// release wakes another waiter.
    pub(crate) fn is_behind(&self, quorum: usize) -> bool {
        self.placed && !self.is_head(quorum)
    }

    /// How often a waiter behind the head renews its place: a third of its patience, so
    /// that the place is renewed twice before it would lapse.
    pub(crate) fn renew_every(&self) -> Duration {
        Duration::from_millis(self.patience_ms / 3)
    }

    /// Whether the call heads the queue on `node`, as last heard.
    pub(crate) fn heads(&self, node: NodeId) -> bool {
        self.head.get(node.index()).is_some_and(|h| *h)
    }

    /// Whether the call heads the queue on at least `quorum` nodes: the one waiter a
    /// release wakes.
    pub(crate) fn is_head(&self, quorum: usize) -> bool {
        self.head.iter().filter(|h| **h).count() >= quorum
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resp::Reply;

    #[test]
    fn packed_args_unpack() {
        let id = Token::new("w1").unwrap();
        let packed = pack(17, 900, &id);
        assert_eq!(unpack(&packed), (17, 900, &b"w1"[..]));
        assert_eq!(unpack(&packed[..9]), (0, 0, &b""[..]));
    }

    #[test]
    fn a_place_follows_ranks_tickets_and_announcements() {
        let mut place = Place::new(
            Token::new("w1").unwrap(),
            (3, crate::test_epoch::epoch()),
            500,
            0,
        );
        let votes = [
            Vote::Queued { rank: 0, ticket: 5 },
            Vote::Queued { rank: 1, ticket: 9 },
            Vote::Fault(NodeFault::Timeout),
        ];
        place.args();
        place.on_answers(votes.iter().map(Some));
        place.on_attempt_end(2);
        assert!(!place.is_head(2));
        assert!(place.needs_agreement(), "placed with the nodes' tickets");
        assert_eq!(unpack(&place.args().unwrap()), (9, 500, &b"w1"[..]));
        assert!(!place.needs_agreement(), "the agreed ticket sent");
        place.on_next(NodeId::new(1), b"w1");
        assert!(place.is_head(2));
        place.on_next(NodeId::new(1), b"w2");
        assert!(!place.is_head(2));
        // An announcement read after a node's answer wins over it.
        place.args();
        place.on_answers([None, Some(&votes[1]), None].into_iter());
        place.on_next(NodeId::new(1), b"w1");
        place.on_answers([None, Some(&votes[1]), None].into_iter());
        assert!(place.head[1], "the rank read once, before the announcement");
        // Answers from one node of three: lapsed, the next attempt plain.
        place.on_attempt_end(2);
        assert_eq!(place.args(), None);
        assert!(!place.needs_agreement());
    }

    #[test]
    fn a_ticket_is_the_median_of_the_nodes_clocks_now() {
        let read_at = crate::test_epoch::epoch();
        let now = read_at + Duration::from_millis(7);
        let ms = |list: &[u64]| -> Vec<(Duration, Instant)> {
            (list.iter())
                .map(|&m| (Duration::from_millis(m), read_at))
                .collect()
        };
        assert_eq!(ticket(std::iter::empty(), now), None);
        assert_eq!(ticket(ms(&[50, 10, 30]).into_iter(), now), Some(37));
        // More nodes than fit on the stack: the same median.
        let many: Vec<u64> = (0..41).rev().map(|i| 1000 + i * 10).collect();
        assert_eq!(ticket(ms(&many).into_iter(), now), Some(1207));
        assert_eq!(ticket(ms(&many[..17]).into_iter(), now), Some(1327));
    }

    #[test]
    fn the_reply_reads_as_rank_and_ticket() {
        let reply = [Reply::Integer(2), Reply::Integer(1_700_000_000_000)];
        assert_eq!(
            queued_vote(&reply),
            Some(Vote::Queued {
                rank: 2,
                ticket: 1_700_000_000_000
            })
        );
        assert_eq!(queued_vote(&[Reply::Integer(-1), Reply::Integer(3)]), None);
        assert_eq!(queued_vote(&[Reply::Integer(1)]), None);
    }
}
