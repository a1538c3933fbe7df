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

mod place;

use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};

use crate::id::NodeId;
use crate::script::Script;
use crate::token::Token;
use crate::vote::Vote;

pub(crate) use place::Place;

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
