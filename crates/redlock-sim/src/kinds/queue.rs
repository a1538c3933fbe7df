//! The waiters' queue's scripts (docs/design.md, "The waiters' queue"). `KEYS[1]` = R (the
//! mutex's key), `KEYS[2]` = R:queue (member = a waiter's id, score = its ticket: the
//! order), `KEYS[3]` = R:queue:until (the same ids, score = the node-time ms at which the
//! place lapses unless renewed).
//!
//! QUEUE_ACQUIRE prunes the lapsed places (at most 64 a call, the earliest first), takes or
//! renews the caller's place, turns a grant made to the caller's id (R holding that id, set
//! by a release, queue_release.rs) into the caller's value and ttl, and sets R for the caller
//! if it is free and the caller heads the queue (the place stays until it leaves), else
//! answers `{rank, ticket}`. QUEUE_LEAVE deletes a grant made to the leaving id, then
//! removes its place, announcing the next head as `next:<id>` on R's release channel if it
//! was the head's. QUEUE_RELEASE, a release that leaves the holder's place, places its
//! line's next call and grants R to the head, is in queue_release.rs on the steps shared
//! here. Order only: who may set R; R itself is the mutex's key, set in one atomic step per
//! node (algorithm.md §3, §4).

use bytes::Bytes;

use super::case::State::{Absent, Deadlines, Str, Tickets};
use super::case::{Case, Expect, State, Table, Ticket};
use super::{Steps, expire_at_least, node_now, number, reply};
use crate::keyspace::Keys;
use crate::lua::{arity_error, lua_tonumber, release_channel, set_px_arg};
use crate::resp::ServerReply;

/// QUEUE_ACQUIRE (`ARGV[1]` token, `ARGV[2]` ttl ms, `ARGV[3]` the waiter's id, `ARGV[4]` its
/// ticket (0: the stored one, or the node's now), `ARGV[5]` its patience ms), word for word
/// from the core's waiters/mod.rs: the body the core sends and the model was written from. Change
/// both together (tests/kinds_scripts.rs pins its SHA1).
pub const QUEUE_ACQUIRE_SOURCE: &str = "local t = redis.call('TIME') local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) local first = redis.call('ZRANGE', KEYS[2], 0, 0)[1] local gone = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, 64) for i = 1, #gone do redis.call('ZREM', KEYS[2], gone[i]) redis.call('ZREM', KEYS[3], gone[i]) end local ticket = tonumber(ARGV[4]) if ticket == 0 then ticket = tonumber(redis.call('ZSCORE', KEYS[2], ARGV[3]) or now) end redis.call('ZADD', KEYS[2], ticket, ARGV[3]) redis.call('ZADD', KEYS[3], now + tonumber(ARGV[5]), ARGV[3]) for i = 2, 3 do if redis.call('PTTL', KEYS[i]) < tonumber(ARGV[5]) then redis.call('PEXPIRE', KEYS[i], ARGV[5]) end end if redis.call('GET', KEYS[1]) == ARGV[3] then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1 end local head = redis.call('ZRANGE', KEYS[2], 0, 0)[1] if head ~= first and head ~= ARGV[3] then redis.pcall('PUBLISH', 'redlock:released:' .. KEYS[1], 'next:' .. head) end if redis.call('EXISTS', KEYS[1]) == 0 and head == ARGV[3] then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1 end return {redis.call('ZRANK', KEYS[2], ARGV[3]), ticket}";

/// QUEUE_LEAVE (`ARGV[1]` the waiter's id), word for word from the core's waiters/mod.rs: the
/// body the core sends and the model was written from. Change both together
/// (tests/kinds_scripts.rs pins its SHA1).
pub const QUEUE_LEAVE_SOURCE: &str = "if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end local head = redis.call('ZRANGE', KEYS[2], 0, 0)[1] redis.call('ZREM', KEYS[3], ARGV[1]) local n = redis.call('ZREM', KEYS[2], ARGV[1]) if n == 1 and head == ARGV[1] then local nxt = redis.call('ZRANGE', KEYS[2], 0, 0)[1] if nxt then redis.pcall('PUBLISH', 'redlock:released:' .. KEYS[1], 'next:' .. nxt) end end return n";

/// The mutant QUEUE_ACQUIRE_NEVER_PRUNES (a negative control: a dead waiter's place heads
/// the queue for good), word for word from the core's waiters/mod.rs (`_mutants`). Change both
/// together (tests/kinds_scripts.rs pins its SHA1).
pub const QUEUE_ACQUIRE_NEVER_PRUNES_SOURCE: &str = "local t = redis.call('TIME') local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) local first = redis.call('ZRANGE', KEYS[2], 0, 0)[1] local ticket = tonumber(ARGV[4]) if ticket == 0 then ticket = tonumber(redis.call('ZSCORE', KEYS[2], ARGV[3]) or now) end redis.call('ZADD', KEYS[2], ticket, ARGV[3]) redis.call('ZADD', KEYS[3], now + tonumber(ARGV[5]), ARGV[3]) for i = 2, 3 do if redis.call('PTTL', KEYS[i]) < tonumber(ARGV[5]) then redis.call('PEXPIRE', KEYS[i], ARGV[5]) end end if redis.call('GET', KEYS[1]) == ARGV[3] then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1 end local head = redis.call('ZRANGE', KEYS[2], 0, 0)[1] if head ~= first and head ~= ARGV[3] then redis.pcall('PUBLISH', 'redlock:released:' .. KEYS[1], 'next:' .. head) end if redis.call('EXISTS', KEYS[1]) == 0 and head == ARGV[3] then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1 end return {redis.call('ZRANK', KEYS[2], ARGV[3]), ticket}";

/// What a head's leave publishes before the next head's id
/// (the core's `NEXT_PREFIX`; a release publishes an empty message).
pub(super) const NEXT: &[u8] = b"next:";

/// At most this many lapsed places go per QUEUE_ACQUIRE (`LIMIT 0 64`).
const PRUNED_PER_CALL: usize = 64;

/// What a script's `redis.call` raises when an argument is nil (a `tonumber` that failed).
pub(super) const NIL_ARGUMENT: &str =
    "ERR Lua redis lib command arguments must be strings or integers";

/// QUEUE_ACQUIRE: prunes the lapsed places; takes or renews the caller's place (its ticket:
/// the one given, or the one stored, or the node's now; its deadline now + patience; both
/// sets' expiry at least the patience); 1 and R set to the token (`PX ttl`) if R holds the
/// caller's id (a grant); else announces the head if that made another waiter the head;
/// then 1 and R set if R is free and the caller heads the queue, else `{rank, ticket}`.
pub fn queue_acquire(keys: &mut Keys<'_>, k: &[Bytes], argv: &[Bytes]) -> ServerReply {
    reply(acquire_steps(keys, k, argv, true))
}

/// The model of [`QUEUE_ACQUIRE_NEVER_PRUNES_SOURCE`]: [`queue_acquire`] without the
/// pruning, so a lapsed place still heads the queue.
pub fn queue_acquire_never_pruning(
    keys: &mut Keys<'_>,
    k: &[Bytes],
    argv: &[Bytes],
) -> ServerReply {
    reply(acquire_steps(keys, k, argv, false))
}

/// QUEUE_ACQUIRE, pruning the lapsed places or (the mutant) not.
fn acquire_steps(keys: &mut Keys<'_>, k: &[Bytes], argv: &[Bytes], prunes: bool) -> Steps {
    let now = node_now(keys)?;
    let ([r, queue, until, ..], [token, ttl, id, ticket, patience, ..]) = (k, argv) else {
        return Err(arity_error());
    };
    let first = head(keys, queue)?;
    if prunes {
        prune_lapsed(keys, [queue, until], now)?;
    }
    let ticket = match lua_tonumber(ticket) {
        Some(0.0) => keys.zscore(queue, id)?.unwrap_or(now as f64),
        Some(given) => given,
        None => return Err(ServerReply::error(NIL_ARGUMENT)),
    };
    // The place, taken or renewed, also when granted (a grant on too few nodes keeps the
    // turn; the waiter leaves, QUEUE_LEAVE, once a quorum granted it).
    place(keys, [queue, until], (id, ticket), (now, patience))?;
    // R granted to our id by a release (queue_release.rs): ours, as this attempt's token
    // and ttl, whoever heads the queue now. `GET` raises on a key of another type, the
    // place written.
    if keys.get(r)?.as_ref() == Some(id) {
        keys.set(r, token.clone(), Some(set_px_arg(ttl)?));
        return Ok(ServerReply::Int(1));
    }
    // Another waiter heads the queue now (a lapsed head pruned, or this call's ticket
    // moved it back): it is told, as a leave would tell it.
    let head = head(keys, queue)?;
    if head != first && head.as_ref() != Some(id) {
        announce_next(keys, r, queue)?;
    }
    if !keys.exists(r) && head.as_ref() == Some(id) {
        keys.set(r, token.clone(), Some(set_px_arg(ttl)?));
        return Ok(ServerReply::Int(1));
    }
    Ok(ServerReply::Array(vec![
        ServerReply::Int(rank(keys, queue, id)?),
        ServerReply::Int(ticket as i64),
    ]))
}

/// `redis.call('ZADD', queue, ticket, id) redis.call('ZADD', until, now + patience, id)`,
/// then `for i = 2, 3 do if redis.call('PTTL', KEYS[i]) < patience then
/// redis.call('PEXPIRE', KEYS[i], patience) end end`: a place taken or renewed, both sets
/// living at least the patience.
pub(super) fn place(
    keys: &mut Keys<'_>,
    [queue, until]: [&Bytes; 2],
    (id, ticket): (&Bytes, f64),
    (now, patience): (i64, &Bytes),
) -> Result<(), ServerReply> {
    keys.zset_update(queue, id, |_| Some(ticket))?;
    let deadline = now as f64 + number(patience)?;
    keys.zset_update(until, id, |_| Some(deadline))?;
    expire_at_least(keys, queue, patience)?;
    expire_at_least(keys, until, patience)?;
    Ok(())
}

/// `redis.call('ZRANK', queue, id)` of a waiter just placed: its 0-based place in line.
pub(super) fn rank(keys: &mut Keys<'_>, queue: &Bytes, id: &Bytes) -> Result<i64, ServerReply> {
    let order = keys.zset_in_order(queue)?;
    let at = order.iter().position(|(member, _)| member == id);
    Ok(at.unwrap_or(0) as i64)
}

/// QUEUE_LEAVE: R deleted if it holds the caller's id (a grant it will not take up); the
/// caller's place removed from both sets; if it headed the queue, the next head announced.
/// 1 if it had a place, else 0.
pub fn queue_leave(keys: &mut Keys<'_>, k: &[Bytes], argv: &[Bytes]) -> ServerReply {
    reply(leave_steps(keys, k, argv))
}

/// The steps of QUEUE_LEAVE.
fn leave_steps(keys: &mut Keys<'_>, k: &[Bytes], argv: &[Bytes]) -> Steps {
    let ([r, queue, until, ..], [id, ..]) = (k, argv) else {
        return Err(arity_error());
    };
    // A grant to our id, made by a release, goes with us (`GET` raises on a key of another
    // type, before anything is written).
    if keys.get(r)?.as_ref() == Some(id) {
        keys.del(r);
    }
    let head = head(keys, queue)?;
    keys.zrem(until, id)?;
    let left = keys.zrem(queue, id)?;
    if left && head.as_ref() == Some(id) {
        announce_next(keys, r, queue)?;
    }
    Ok(ServerReply::Int(i64::from(left)))
}

/// `local gone = redis.call('ZRANGEBYSCORE', until, '-inf', now, 'LIMIT', 0, 64)`, then
/// each one `ZREM`ed from the queue and from the deadlines.
pub(super) fn prune_lapsed(
    keys: &mut Keys<'_>,
    [queue, until]: [&Bytes; 2],
    now: i64,
) -> Result<(), ServerReply> {
    let order = keys.zset_in_order(until)?;
    let lapsed = order.into_iter().take_while(|(_, at)| *at <= now as f64);
    let gone: Vec<Bytes> = lapsed.take(PRUNED_PER_CALL).map(|(id, _)| id).collect();
    for id in &gone {
        keys.zrem(queue, id)?;
        keys.zrem(until, id)?;
    }
    Ok(())
}

/// `redis.call('ZRANGE', queue, 0, 0)[1]`: the id heading the queue, if any.
pub(super) fn head(keys: &mut Keys<'_>, queue: &Bytes) -> Result<Option<Bytes>, ServerReply> {
    let order = keys.zset_in_order(queue)?;
    Ok(order.into_iter().next().map(|(id, _)| id))
}

/// `local nxt = <head> if nxt then redis.pcall('PUBLISH', 'redlock:released:' .. R, 'next:'
/// .. nxt) end`: the new head told on R's release channel (a denied channel gone past, as
/// `pcall` does).
pub(super) fn announce_next(
    keys: &mut Keys<'_>,
    r: &Bytes,
    queue: &Bytes,
) -> Result<(), ServerReply> {
    if let Some(next) = head(keys, queue)? {
        let message = [NEXT, &next[..]].concat();
        let _ = keys.publish(release_channel(r), Bytes::from(message));
    }
    Ok(())
}

/// Another holds R (token `u`, 100 ms).
pub(super) const HELD: State = Str("u", Some(100));
/// R set by a grant: our token `t` for the call's 100 ms.
const GRANTED: State = Str("t", Some(100));
/// R granted to our id `me` by a release, 50 ms left.
const GRANT_TO_ME: State = Str("me", Some(50));
/// R granted to `w1` by a release, 50 ms left.
const GRANT_TO_W1: State = Str("w1", Some(50));
/// R's name as a sorted set: a key of the wrong type for `GET`.
pub(super) const R_A_SET: State = Tickets(&[("x", Ticket::Given(1))], None);
/// The keys of the waiters' queue of `r`.
pub(super) const QUEUE_KEYS: &[&str] = &["r", "r:queue", "r:queue:until"];
/// Token `t`, ttl 100 ms, our id `me`, ticket 0 (the stored one or the node's), patience
/// 300 ms.
const ME: &[&str] = &["t", "100", "me", "0", "300"];
/// [`ME`] with the ticket 7 given.
const ME_TICKET_7: &[&str] = &["t", "100", "me", "7", "300"];
/// Our id alone (a leave).
const ME_LEAVES: &[&str] = &["me"];
/// Waiter `w1` (ticket 1) alone, the set expiring in 50 ms.
pub(super) const W1: State = Tickets(&[("w1", Ticket::Given(1))], Some(50));
/// `w1`'s place lasting 50 ms more, the set with it.
pub(super) const W1_UNTIL: State = Deadlines(&[("w1", 50)], Some(50));
/// `w1`'s place lapsed 10 ms ago, the set still there for 50 ms.
const W1_LAPSED: State = Deadlines(&[("w1", -10)], Some(50));
/// We head the queue (ticket 1), `w1` next (ticket 2).
pub(super) const ME_THEN_W1: State = Tickets(
    &[("me", Ticket::Given(1)), ("w1", Ticket::Given(2))],
    Some(50),
);
/// `w1` heads the queue (ticket 1), we are next (ticket 2).
pub(super) const W1_THEN_ME: State = Tickets(
    &[("w1", Ticket::Given(1)), ("me", Ticket::Given(2))],
    Some(50),
);
/// Both places lasting 50 ms more.
pub(super) const BOTH_UNTIL: State = Deadlines(&[("me", 50), ("w1", 50)], Some(50));
/// `w1`'s ticket 2 alone, once we left or were granted.
pub(super) const W1_SECOND: State = Tickets(&[("w1", Ticket::Given(2))], Some(50));
/// Our first place, taken with the node's ticket, the set living the patience.
const ME_PLACED: State = Tickets(&[("me", Ticket::Node)], Some(300));
/// Our place's deadline just written (now + patience), the set living as long.
const ME_UNTIL: State = Deadlines(&[("me", 300)], Some(300));

/// QUEUE_ACQUIRE on `r` by token `t` for 100 ms, as waiter `me` with 300 ms of patience.
pub const QUEUE_ACQUIRE_CASES: Table = Table {
    source: QUEUE_ACQUIRE_SOURCE,
    keys: QUEUE_KEYS,
    cases: &[
        Case::new(
            "free, nobody waits: placed and granted",
            (&[Absent, Absent, Absent], ME),
            Expect::Int(1),
            &[GRANTED, ME_PLACED, ME_UNTIL],
        ),
        Case::new(
            "held: placed first with the node's ticket",
            (&[HELD, Absent, Absent], ME),
            Expect::Queued(0, Ticket::Node),
            &[HELD, ME_PLACED, ME_UNTIL],
        ),
        Case::new(
            "held, one waiting: placed second, both sets live the patience",
            (&[HELD, W1, W1_UNTIL], ME),
            Expect::Queued(1, Ticket::Node),
            &[
                HELD,
                Tickets(&[("w1", Ticket::Given(1)), ("me", Ticket::Node)], Some(300)),
                Deadlines(&[("w1", 50), ("me", 300)], Some(300)),
            ],
        ),
        Case::new(
            "held, the sets live longer: their expiry stays",
            (
                &[
                    HELD,
                    Tickets(&[("w1", Ticket::Given(1))], Some(500)),
                    Deadlines(&[("w1", 400)], Some(500)),
                ],
                ME,
            ),
            Expect::Queued(1, Ticket::Node),
            &[
                HELD,
                Tickets(&[("w1", Ticket::Given(1)), ("me", Ticket::Node)], Some(500)),
                Deadlines(&[("w1", 400), ("me", 300)], Some(500)),
            ],
        ),
        Case::new(
            "ours again: the stored ticket kept, the place renewed",
            (&[HELD, W1_THEN_ME, BOTH_UNTIL], ME),
            Expect::Queued(1, Ticket::Given(2)),
            &[
                HELD,
                Tickets(
                    &[("w1", Ticket::Given(1)), ("me", Ticket::Given(2))],
                    Some(300),
                ),
                Deadlines(&[("me", 300), ("w1", 50)], Some(300)),
            ],
        ),
        Case::new(
            "a given ticket overwrites the stored one: the new head announced",
            (&[HELD, ME_THEN_W1, BOTH_UNTIL], ME_TICKET_7),
            Expect::Queued(1, Ticket::Given(7)),
            &[
                HELD,
                Tickets(
                    &[("w1", Ticket::Given(2)), ("me", Ticket::Given(7))],
                    Some(300),
                ),
                Deadlines(&[("me", 300), ("w1", 50)], Some(300)),
            ],
        )
        .publishing(&["r"])
        .saying(&["next:w1"])
        .heard(&["r"]),
        Case::new(
            "held, a lapsed head pruned: the new head announced",
            (
                &[
                    HELD,
                    Tickets(
                        &[("w1", Ticket::Given(1)), ("w2", Ticket::Given(2))],
                        Some(50),
                    ),
                    Deadlines(&[("w1", -10), ("w2", 50)], Some(50)),
                ],
                ME,
            ),
            Expect::Queued(1, Ticket::Node),
            &[
                HELD,
                Tickets(&[("w2", Ticket::Given(2)), ("me", Ticket::Node)], Some(300)),
                Deadlines(&[("w2", 50), ("me", 300)], Some(300)),
            ],
        )
        .publishing(&["r"])
        .saying(&["next:w2"])
        .heard(&["r"]),
        Case::new(
            "the head, free: granted, its place renewed until it leaves",
            (&[Absent, ME_THEN_W1, BOTH_UNTIL], ME),
            Expect::Int(1),
            &[
                GRANTED,
                Tickets(
                    &[("me", Ticket::Given(1)), ("w1", Ticket::Given(2))],
                    Some(300),
                ),
                Deadlines(&[("me", 300), ("w1", 50)], Some(300)),
            ],
        )
        .heard(&["r"]),
        Case::new(
            "the head alone, free: granted, its place renewed",
            (
                &[
                    Absent,
                    Tickets(&[("me", Ticket::Given(1))], Some(50)),
                    Deadlines(&[("me", 50)], Some(50)),
                ],
                ME,
            ),
            Expect::Int(1),
            &[
                GRANTED,
                Tickets(&[("me", Ticket::Given(1))], Some(300)),
                ME_UNTIL,
            ],
        ),
        Case::new(
            "not the head, free: placed, not granted",
            (&[Absent, W1, W1_UNTIL], ME),
            Expect::Queued(1, Ticket::Node),
            &[
                Absent,
                Tickets(&[("w1", Ticket::Given(1)), ("me", Ticket::Node)], Some(300)),
                Deadlines(&[("w1", 50), ("me", 300)], Some(300)),
            ],
        ),
        Case::new(
            "a lapsed head pruned: the next waiter granted",
            (
                &[
                    Absent,
                    W1_THEN_ME,
                    Deadlines(&[("w1", -10), ("me", 50)], Some(50)),
                ],
                ME,
            ),
            Expect::Int(1),
            &[
                GRANTED,
                Tickets(&[("me", Ticket::Given(2))], Some(300)),
                ME_UNTIL,
            ],
        ),
        Case::new(
            "the head's place lapsing this very ms: pruned, the next waiter granted",
            (
                &[
                    Absent,
                    W1_THEN_ME,
                    Deadlines(&[("w1", 0), ("me", 50)], Some(50)),
                ],
                ME,
            ),
            Expect::Int(1),
            &[
                GRANTED,
                Tickets(&[("me", Ticket::Given(2))], Some(300)),
                ME_UNTIL,
            ],
        ),
        Case::new(
            "held, a lapsed waiter pruned: placed first",
            (&[HELD, W1, W1_LAPSED], ME),
            Expect::Queued(0, Ticket::Node),
            &[HELD, ME_PLACED, ME_UNTIL],
        ),
        Case::new(
            "a bad ttl: placed, R not set",
            (&[Absent, Absent, Absent], &["t", "0", "me", "0", "300"]),
            Expect::Error("ERR invalid expire time"),
            &[Absent, ME_PLACED, ME_UNTIL],
        ),
        Case::new(
            "the queue of the wrong type",
            (&[HELD, Str("x", None), Absent], ME),
            Expect::Error("WRONGTYPE"),
            &[HELD, Str("x", None), Absent],
        ),
        Case::new(
            "the deadlines of the wrong type",
            (&[HELD, Absent, Str("x", None)], ME),
            Expect::Error("WRONGTYPE"),
            &[HELD, Absent, Str("x", None)],
        ),
        Case::new(
            "a grant to our id: R ours, our token for our ttl",
            (&[GRANT_TO_ME, ME_THEN_W1, BOTH_UNTIL], ME),
            Expect::Int(1),
            &[
                GRANTED,
                Tickets(
                    &[("me", Ticket::Given(1)), ("w1", Ticket::Given(2))],
                    Some(300),
                ),
                Deadlines(&[("me", 300), ("w1", 50)], Some(300)),
            ],
        )
        .heard(&["r"]),
        Case::new(
            "a grant to another id: we stay queued",
            (&[GRANT_TO_W1, W1_THEN_ME, BOTH_UNTIL], ME),
            Expect::Queued(1, Ticket::Given(2)),
            &[
                GRANT_TO_W1,
                Tickets(
                    &[("w1", Ticket::Given(1)), ("me", Ticket::Given(2))],
                    Some(300),
                ),
                Deadlines(&[("me", 300), ("w1", 50)], Some(300)),
            ],
        )
        .heard(&["r"]),
        Case::new(
            "R of the wrong type: placed, then WRONGTYPE",
            (&[R_A_SET, Absent, Absent], ME),
            Expect::Error("WRONGTYPE"),
            &[R_A_SET, ME_PLACED, ME_UNTIL],
        ),
    ],
};

/// QUEUE_ACQUIRE_NEVER_PRUNES where it differs from QUEUE_ACQUIRE.
pub const QUEUE_ACQUIRE_NEVER_PRUNES_CASES: Table = Table {
    source: QUEUE_ACQUIRE_NEVER_PRUNES_SOURCE,
    keys: QUEUE_KEYS,
    cases: &[
        Case::new(
            "a lapsed head kept: the next waiter refused",
            (
                &[
                    Absent,
                    W1_THEN_ME,
                    Deadlines(&[("w1", -10), ("me", 50)], Some(50)),
                ],
                ME,
            ),
            Expect::Queued(1, Ticket::Given(2)),
            &[
                Absent,
                Tickets(
                    &[("w1", Ticket::Given(1)), ("me", Ticket::Given(2))],
                    Some(300),
                ),
                Deadlines(&[("w1", -10), ("me", 300)], Some(300)),
            ],
        ),
        Case::new(
            "held, a lapsed waiter kept: placed second",
            (&[HELD, W1, W1_LAPSED], ME),
            Expect::Queued(1, Ticket::Node),
            &[
                HELD,
                Tickets(&[("w1", Ticket::Given(1)), ("me", Ticket::Node)], Some(300)),
                Deadlines(&[("w1", -10), ("me", 300)], Some(300)),
            ],
        ),
    ],
};

/// QUEUE_LEAVE of waiter `me` from `r`'s queue.
pub const QUEUE_LEAVE_CASES: Table = Table {
    source: QUEUE_LEAVE_SOURCE,
    keys: QUEUE_KEYS,
    cases: &[
        Case::new(
            "the head leaves: the next head announced",
            (&[HELD, ME_THEN_W1, BOTH_UNTIL], ME_LEAVES),
            Expect::Int(1),
            &[HELD, W1_SECOND, W1_UNTIL],
        )
        .publishing(&["r"])
        .saying(&["next:w1"])
        .heard(&["r"]),
        Case::new(
            "a waiter behind leaves: nobody announced",
            (&[HELD, W1_THEN_ME, BOTH_UNTIL], ME_LEAVES),
            Expect::Int(1),
            &[HELD, W1, W1_UNTIL],
        )
        .heard(&["r"]),
        Case::new(
            "the last waiter leaves: the sets go",
            (
                &[
                    HELD,
                    Tickets(&[("me", Ticket::Given(1))], Some(50)),
                    ME_UNTIL,
                ],
                ME_LEAVES,
            ),
            Expect::Int(1),
            &[HELD, Absent, Absent],
        ),
        Case::new(
            "not a waiter: 0",
            (&[HELD, W1, W1_UNTIL], ME_LEAVES),
            Expect::Int(0),
            &[HELD, W1, W1_UNTIL],
        ),
        Case::new(
            "no queue: 0",
            (&[Absent, Absent, Absent], ME_LEAVES),
            Expect::Int(0),
            &[Absent, Absent, Absent],
        ),
        Case::new(
            "the queue of the wrong type",
            (&[HELD, Str("x", None), Absent], ME_LEAVES),
            Expect::Error("WRONGTYPE"),
            &[HELD, Str("x", None), Absent],
        ),
        Case::new(
            "a grant to our id goes with us: R deleted, the next head announced",
            (&[GRANT_TO_ME, ME_THEN_W1, BOTH_UNTIL], ME_LEAVES),
            Expect::Int(1),
            &[Absent, W1_SECOND, W1_UNTIL],
        )
        .publishing(&["r"])
        .saying(&["next:w1"])
        .heard(&["r"]),
        Case::new(
            "a grant to another id kept",
            (&[GRANT_TO_W1, W1_THEN_ME, BOTH_UNTIL], ME_LEAVES),
            Expect::Int(1),
            &[GRANT_TO_W1, W1, W1_UNTIL],
        )
        .heard(&["r"]),
        Case::new(
            "R of the wrong type: WRONGTYPE, nothing changed",
            (&[R_A_SET, ME_THEN_W1, BOTH_UNTIL], ME_LEAVES),
            Expect::Error("WRONGTYPE"),
            &[R_A_SET, ME_THEN_W1, BOTH_UNTIL],
        )
        .heard(&["r"]),
    ],
};

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use bytes::BytesMut;

    use super::*;
    use crate::clock::{Clock, SimTime};
    use crate::keyspace::Keyspace;
    use crate::kinds::case::check;
    use crate::node::Node;
    use crate::resp::Protocol;
    use crate::script::Scripts;

    /// The tripwire: a change to a queue script the core sends fails here first, by name.
    #[test]
    fn the_models_were_written_from_the_scripts_the_core_sends() {
        assert_eq!(
            redlock_core::QUEUE_ACQUIRE_SCRIPT.body,
            QUEUE_ACQUIRE_SOURCE
        );
        assert_eq!(redlock_core::QUEUE_LEAVE_SCRIPT.body, QUEUE_LEAVE_SOURCE);
        assert_eq!(
            redlock_core::QUEUE_ACQUIRE_NEVER_PRUNES_SCRIPT.body,
            QUEUE_ACQUIRE_NEVER_PRUNES_SOURCE
        );
        for script in [
            &redlock_core::QUEUE_ACQUIRE_SCRIPT,
            &redlock_core::QUEUE_LEAVE_SCRIPT,
            &redlock_core::QUEUE_ACQUIRE_NEVER_PRUNES_SCRIPT,
        ] {
            assert_eq!(crate::script::sha1_hex(script.body), script.sha1);
        }
        assert_eq!(redlock_core::NEXT_PREFIX, NEXT);
        let suffixes = [redlock_core::QUEUE_SUFFIX, redlock_core::QUEUE_UNTIL_SUFFIX];
        let named: Vec<String> = suffixes.iter().map(|s| format!("r{s}")).collect();
        assert_eq!(QUEUE_KEYS[1..], named[..]);
    }

    #[test]
    fn queue_acquire_rows() {
        check(&QUEUE_ACQUIRE_CASES, queue_acquire).unwrap();
        check(
            &QUEUE_ACQUIRE_NEVER_PRUNES_CASES,
            queue_acquire_never_pruning,
        )
        .unwrap();
        let differs = check(&QUEUE_ACQUIRE_NEVER_PRUNES_CASES, queue_acquire);
        assert!(differs.is_err(), "the mutant's rows are not the script's");
        let differs = check(&QUEUE_ACQUIRE_CASES, queue_acquire_never_pruning);
        assert!(differs.is_err(), "the script's rows are not the mutant's");
    }

    #[test]
    fn queue_leave_rows() {
        check(&QUEUE_LEAVE_CASES, queue_leave).unwrap();
    }

    /// `LIMIT 0 64`: one call prunes the 64 earliest lapsed places, the next call more.
    #[test]
    fn a_call_prunes_at_most_64_places() {
        let b = |s: &str| Bytes::copy_from_slice(s.as_bytes());
        let mut space = Keyspace::new();
        let mut keys = space.view(0, 0);
        let names: Vec<Bytes> = QUEUE_KEYS.iter().map(|k| b(k)).collect();
        keys.set(&names[0], b("u"), None);
        for i in 0..70 {
            let id = b(&format!("dead{i:02}"));
            keys.zset_update(&names[1], &id, |_| Some(f64::from(i)))
                .unwrap();
            keys.zset_update(&names[2], &id, |_| Some(f64::from(i)))
                .unwrap();
        }
        let argv: Vec<Bytes> = ME.iter().map(|a| b(a)).collect();
        let first = queue_acquire(&mut keys, &names, &argv);
        // The node's ticket is `now`; only the rank is looked at here.
        assert!(matches!(&first, ServerReply::Array(r) if r[0] == ServerReply::Int(6)));
        assert_eq!(keys.zcard(&names[2]), Ok(7));
        let first_left = keys.zscore(&names[1], &b("dead64"));
        assert_eq!(first_left, Ok(Some(64.0)), "the earliest went first");
        let second = queue_acquire(&mut keys, &names, &argv);
        let ServerReply::Array(second) = second else {
            panic!("placed")
        };
        assert_eq!(second[0], ServerReply::Int(0));
        assert_eq!(keys.zcard(&names[1]), Ok(1));
    }

    /// A grant through the queue reaches a subscriber as a real server writes it: the
    /// push frame carries the payload `next:<id>` (RESP3 `>3`; an array in RESP2), as
    /// redis-server 7.0.15 writes a `PUBLISH` with a payload.
    #[test]
    fn a_subscriber_reads_the_next_head_in_the_message() {
        let scripts = Scripts::default();
        let mut node = Node::new(Clock::with_skew(Instant::now(), 0.0), &scripts, true);
        let (mut waiter, mut resp2, mut caller) = (node.accept(), node.accept(), node.accept());
        let mut run = |session: &mut crate::pubsub::Session, args: &[&str]| {
            let args: Vec<Bytes> = args
                .iter()
                .map(|a| Bytes::copy_from_slice(a.as_bytes()))
                .collect();
            node.run(SimTime::ZERO, session, &args, &scripts)
                .into_resp2()
        };
        run(&mut waiter, &["HELLO", "3"]);
        run(&mut waiter, &["SUBSCRIBE", "redlock:released:r"]);
        run(&mut resp2, &["SUBSCRIBE", "redlock:released:r"]);
        let sha = crate::script::sha1_hex(QUEUE_ACQUIRE_SOURCE);
        let keys = ["3", "r", "r:queue", "r:queue:until"];
        let acquire = |id: &'static str| {
            let argv = ["t", "100", id, "0", "300"];
            [&["EVALSHA", sha.as_str()][..], &keys, &argv].concat()
        };
        run(&mut caller, &["SET", "r", "u", "PX", "50"]);
        for (rank, id) in [(0, "me"), (1, "w1")] {
            let reply = run(&mut caller, &acquire(id));
            let ServerReply::Array(items) = reply else {
                panic!("placed")
            };
            assert_eq!(items[0], ServerReply::Int(rank));
        }
        run(&mut caller, &["DEL", "r"]);
        assert_eq!(run(&mut caller, &acquire("me")), ServerReply::Int(1));
        // Granted with its place kept (nothing announced): the head's leave announces the
        // next.
        let leave_sha = crate::script::sha1_hex(QUEUE_LEAVE_SOURCE);
        let leave = [&["EVALSHA", leave_sha.as_str()][..], &keys, &["me"]].concat();
        assert_eq!(run(&mut caller, &leave), ServerReply::Int(1));
        let deliveries = node.take_deliveries();
        let bytes = |d: &crate::pubsub::Delivery, protocol| {
            let mut out = BytesMut::new();
            d.frame().encode(&mut out, protocol);
            out.freeze()
        };
        let [first, second] = &deliveries[..] else {
            panic!("two subscribers")
        };
        let (to_waiter, to_resp2) = if first.session == waiter.id() {
            (first, second)
        } else {
            (second, first)
        };
        assert_eq!(
            &bytes(to_waiter, Protocol::Resp3)[..],
            b">3\r\n$7\r\nmessage\r\n$18\r\nredlock:released:r\r\n$7\r\nnext:w1\r\n"
        );
        assert_eq!(
            &bytes(to_resp2, Protocol::Resp2)[..],
            b"*3\r\n$7\r\nmessage\r\n$18\r\nredlock:released:r\r\n$7\r\nnext:w1\r\n"
        );
    }
}
