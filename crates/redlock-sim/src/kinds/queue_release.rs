//! QUEUE_RELEASE, the release of a mutex held through the waiters' queue (docs/design.md,
//! "The waiters' queue"), on the same keys as the other queue scripts (queue.rs): `KEYS[1]`
//! = R, `KEYS[2]` = R:queue (ids by ticket), `KEYS[3]` = R:queue:until (ids by the node-time
//! ms at which each place lapses).
//!
//! In one step on the node: the lapsed places pruned (as QUEUE_ACQUIRE prunes them), the
//! leaving holder's place removed, the next call of the holder's line placed (its ticket,
//! its deadline, both sets living at least its patience), then R compared (`GET`, which
//! raises on a key of another type with the queue's work done) and deleted if it holds the
//! stored value or the leaving holder's id (a grant it had not taken up). Once R is
//! deleted, the node grants it to the queue's head if the head's id ends in `~<ms>` (its
//! call's ttl): R set to the head's id for that ttl or for what is left of the head's place,
//! whichever is shorter (at least 1 ms), and `grant:<id>` alone published on R's release
//! channel (docs/design.md, "A release that grants"). Otherwise, as a plain release: the
//! head announced as `next:<id>` if it is not the head the script found, then the
//! release's empty message, so a subscriber hears the next head before the release. The
//! outcome counts the subscribers of the grant or of the release message. Order only: the
//! release itself is the mutex's compare-and-delete (algorithm.md §4), and a grant is the
//! same atomic set of R as an acquisition (§3).

use bytes::Bytes;

use super::case::State::{Absent, Deadlines, Str, Tickets};
use super::case::{Case, Expect, State, Table, Ticket};
use super::queue::{
    BOTH_UNTIL, HELD, ME_THEN_W1, NIL_ARGUMENT, QUEUE_KEYS, R_A_SET, W1, W1_SECOND, W1_THEN_ME,
    W1_UNTIL, announce_next, head, place, prune_lapsed, rank,
};
use super::{Steps, announce, freed, node_now, reply};
use crate::keyspace::Keys;
use crate::lua::{arity_error, lua_tonumber, release_channel, set_px_arg};
use crate::resp::ServerReply;

/// QUEUE_RELEASE (`ARGV[1]` the stored value, `ARGV[2]` the leaving holder's id or '',
/// `ARGV[3]` the id of the next call of its line or '', `ARGV[4]` that call's ticket (0: the
/// node's now), `ARGV[5]` its patience ms), word for word from the core's waiters/mod.rs: the
/// body the core sends and the model was written from. Change both together
/// (tests/kinds_scripts.rs pins its SHA1).
pub const QUEUE_RELEASE_SOURCE: &str = "local t = redis.call('TIME') local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) local first = redis.call('ZRANGE', KEYS[2], 0, 0)[1] local gone = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, 64) for i = 1, #gone do redis.call('ZREM', KEYS[2], gone[i]) redis.call('ZREM', KEYS[3], gone[i]) end if ARGV[2] ~= '' then redis.call('ZREM', KEYS[2], ARGV[2]) redis.call('ZREM', KEYS[3], ARGV[2]) end local rank = -1 if ARGV[3] ~= '' then local ticket = tonumber(ARGV[4]) if ticket == 0 then ticket = now end redis.call('ZADD', KEYS[2], ticket, ARGV[3]) redis.call('ZADD', KEYS[3], now + tonumber(ARGV[5]), ARGV[3]) for i = 2, 3 do if redis.call('PTTL', KEYS[i]) < tonumber(ARGV[5]) then redis.call('PEXPIRE', KEYS[i], ARGV[5]) end end rank = redis.call('ZRANK', KEYS[2], ARGV[3]) end local head = redis.call('ZRANGE', KEYS[2], 0, 0)[1] local ch = 'redlock:released:' .. KEYS[1] local v = redis.call('GET', KEYS[1]) local out = 0 if v == ARGV[1] or (ARGV[2] ~= '' and v == ARGV[2]) then redis.call('DEL', KEYS[1]) local g = head and head ~= ARGV[3] and tonumber(string.match(head, '~(%d+)$')) if g then local left = tonumber(redis.call('ZSCORE', KEYS[3], head) or 0) - now if left < g then g = left end end local n if g and g >= 1 then redis.call('SET', KEYS[1], head, 'PX', g) n = redis.pcall('PUBLISH', ch, 'grant:' .. head) else if head and head ~= first then redis.pcall('PUBLISH', ch, 'next:' .. head) end n = redis.pcall('PUBLISH', ch, '') end if type(n) == 'number' and n > 0 then out = 2 else out = 1 end else if head and head ~= first then redis.pcall('PUBLISH', ch, 'next:' .. head) end if v == false then out = -1 end end return {out, rank}";

/// What a release that grants R publishes before the head's id (the core's `GRANT_PREFIX`),
/// in place of the release's empty message.
const GRANT: &[u8] = b"grant:";

/// QUEUE_RELEASE: prunes the lapsed places; removes the leaving holder's place; places the
/// next call of its line (its ticket: the one given, or the node's now; its deadline now +
/// patience; both sets' expiry at least the patience); then deletes R if it holds the value
/// or the leaving id, and grants it to a head whose id carries a ttl (`grant:<id>`), else
/// announces the head if it is not the one found, and the release. Answers `{outcome,
/// rank}`: 2 (deleted, someone heard), 1 (deleted), 0 (another value), -1 (no R); the next
/// call's rank, -1 if none was placed.
pub fn queue_release(keys: &mut Keys<'_>, k: &[Bytes], argv: &[Bytes]) -> ServerReply {
    reply(release_steps(keys, k, argv))
}

/// The steps of QUEUE_RELEASE.
fn release_steps(keys: &mut Keys<'_>, k: &[Bytes], argv: &[Bytes]) -> Steps {
    let now = node_now(keys)?;
    let ([r, queue, until, ..], [value, leaving, next, ticket, patience, ..]) = (k, argv) else {
        return Err(arity_error());
    };
    let first = head(keys, queue)?;
    prune_lapsed(keys, [queue, until], now)?;
    if !leaving.is_empty() {
        keys.zrem(queue, leaving)?;
        keys.zrem(until, leaving)?;
    }
    let mut placed = -1;
    if !next.is_empty() {
        let ticket = match lua_tonumber(ticket) {
            Some(0.0) => now as f64,
            Some(given) => given,
            // `ZADD` with a nil score.
            None => return Err(ServerReply::error(NIL_ARGUMENT)),
        };
        place(keys, [queue, until], (next, ticket), (now, patience))?;
        placed = rank(keys, queue, next)?;
    }
    let now_first = head(keys, queue)?;
    // The head changed (the holder's place left, a lapsed head pruned, the next call put
    // first): where nothing is granted it is told, before the release, so it tries first.
    let changed = now_first.is_some() && now_first != first;
    // The compare: `GET` raises on a key of another type, with the queue's work done and
    // nothing announced.
    let held = keys.get(r)?;
    let ours = |v: &Bytes| v == value || (!leaving.is_empty() && v == leaving);
    if !held.as_ref().is_some_and(ours) {
        if changed {
            announce_next(keys, r, queue)?;
        }
        let outcome = if held.is_none() { -1 } else { 0 };
        return Ok(answer(ServerReply::Int(outcome), placed));
    }
    keys.del(r);
    // Never to the release's own next call: its line hands it the turn, and a line that
    // yields leaves the key free for the others (docs/design.md, "A release that grants").
    let grantee = now_first.as_ref().filter(|head| *head != next);
    let heard = match grant(keys, [r, until], grantee, now)? {
        Some(heard) => heard,
        None => {
            if changed {
                announce_next(keys, r, queue)?;
            }
            announce(keys, r)
        }
    };
    Ok(answer(freed(heard), placed))
}

/// `{outcome, rank}`.
fn answer(outcome: ServerReply, placed: i64) -> ServerReply {
    ServerReply::Array(vec![outcome, ServerReply::Int(placed)])
}

/// `local g = head and head ~= ARGV[3] and tonumber(string.match(head, '~(%d+)$'))` (the
/// caller passes the head only if it is not the next call just placed), lowered to what is
/// left of the head's place (`ZSCORE` on the deadlines, 0 if none, minus now); `if g and g >= 1`,
/// `SET R head PX g` and `redis.pcall('PUBLISH', ch, 'grant:' .. head)`: whether a
/// subscriber heard the grant, `None` where nothing was granted.
fn grant(
    keys: &mut Keys<'_>,
    [r, until]: [&Bytes; 2],
    head: Option<&Bytes>,
    now: i64,
) -> Result<Option<bool>, ServerReply> {
    let Some((head, ttl)) = head.and_then(|id| asked_ttl(id).map(|ttl| (id, ttl))) else {
        return Ok(None);
    };
    let left = keys.zscore(until, head)?.unwrap_or(0.0) - now as f64;
    let g = if left < ttl { left } else { ttl };
    if g < 1.0 {
        return Ok(None);
    }
    // Lua hands `SET` the number's digits: a whole number of ms, else not an integer (past
    // 10^17 ms Redis 7.0 writes an exponent, which `SET` refuses; Valkey the digits).
    let px = set_px_arg(format!("{g}").as_bytes())?;
    keys.set(r, head.clone(), Some(px));
    let message = Bytes::from([GRANT, &head[..]].concat());
    let heard = keys.publish(release_channel(r), message);
    Ok(Some(matches!(heard, Ok(n) if n > 0)))
}

/// `tonumber(string.match(id, '~(%d+)$'))`: the ttl a waiter's id ends with (`~` and one
/// digit or more, after the id's last `~`), if it does.
fn asked_ttl(id: &Bytes) -> Option<f64> {
    let at = id.iter().rposition(|&b| b == b'~')?;
    let digits = &id[at + 1..];
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    // Only digits: a number, `inf` past what a double holds, as Lua's `tonumber`.
    std::str::from_utf8(digits).ok()?.parse().ok()
}

/// R held by our value `t` (100 ms left).
const OURS: State = Str("t", Some(100));
/// Our value `t`; our place `me` leaves; no next call (ticket 0, patience 300 ms unused).
const LEAVE: &[&str] = &["t", "me", "", "0", "300"];
/// Our value `t`; we had no place; our line's next call `me2` placed with the node's ticket
/// and 300 ms of patience.
const NEXT_CALL: &[&str] = &["t", "", "me2", "0", "300"];
/// [`LEAVE`] and [`NEXT_CALL`] at once: our place leaves, our next call is placed.
const LEAVE_AND_NEXT: &[&str] = &["t", "me", "me2", "0", "300"];
/// [`NEXT_CALL`] with the ticket 7 given.
const NEXT_TICKET_7: &[&str] = &["t", "", "me2", "7", "300"];
/// Our value `t` and neither id: the release alone.
const RELEASE_ONLY: &[&str] = &["t", "", "", "0", "300"];
/// We hold R and head the queue alone (ticket 1).
const ME_ALONE: State = Tickets(&[("me", Ticket::Given(1))], Some(50));
/// Our place lasting 50 ms more, the set with it.
const ME_UNTIL: State = Deadlines(&[("me", 50)], Some(50));
/// The next call placed alone, with the node's ticket, the set living the patience.
const ME2_PLACED: State = Tickets(&[("me2", Ticket::Node)], Some(300));
/// The next call's deadline just written (now + patience), the set living as long.
const ME2_UNTIL: State = Deadlines(&[("me2", 300)], Some(300));
/// `w1`'s place and the next call's, both sets living the patience.
const W1_ME2_UNTIL: State = Deadlines(&[("w1", 50), ("me2", 300)], Some(300));
/// Our value `t`; our place `me` leaves; our line's next call `me2~10000` (its id carrying
/// its call's ttl, 10 s) placed with the node's ticket and 300 ms of patience.
const LEAVE_AND_NEXT_WITH_TTL: &[&str] = &["t", "me", "me2~10000", "0", "300"];
/// We head the queue (ticket 1), `w1~10000` next (ticket 2): its id carries its call's ttl,
/// 10 s.
const ME_THEN_W1_10S: State = Tickets(
    &[("me", Ticket::Given(1)), ("w1~10000", Ticket::Given(2))],
    Some(20_000),
);
/// Our place lasting 50 ms more, `w1~10000`'s 20 s: longer than its ttl.
const ME_W1_10S_UNTIL: State = Deadlines(&[("me", 50), ("w1~10000", 20_000)], Some(20_000));
/// We head the queue (ticket 1), `w1~100000` next (ticket 2): its call's ttl 100 s.
const ME_THEN_W1_100S: State = Tickets(
    &[("me", Ticket::Given(1)), ("w1~100000", Ticket::Given(2))],
    Some(50),
);
/// Both places lasting 50 ms more: `w1~100000`'s shorter than its ttl.
const ME_W1_100S_UNTIL: State = Deadlines(&[("me", 50), ("w1~100000", 50)], Some(50));
/// `w1~100000` alone once we left, its place 50 ms more.
const W1_100S: State = Tickets(&[("w1~100000", Ticket::Given(2))], Some(50));
/// `w1~100000`'s place lasting 50 ms more, the set with it.
const W1_100S_UNTIL: State = Deadlines(&[("w1~100000", 50)], Some(50));
/// R granted to `w1~100000` for what is left of its place.
const GRANTED_W1_100S: State = Str("w1~100000", Some(50));

/// QUEUE_RELEASE of `r` by value `t`: our place `me` leaving, our line's next call `me2`.
pub const QUEUE_RELEASE_CASES: Table = Table {
    source: QUEUE_RELEASE_SOURCE,
    keys: QUEUE_KEYS,
    cases: &[
        Case::new(
            "the head leaves: the next head announced, then the release",
            (&[OURS, ME_THEN_W1, BOTH_UNTIL], LEAVE),
            Expect::Released(2, -1),
            &[Absent, W1_SECOND, W1_UNTIL],
        )
        .publishing(&["r", "r"])
        .saying(&["next:w1", ""])
        .heard(&["r"]),
        Case::new(
            "the head leaves, nobody listening: 1",
            (&[OURS, ME_THEN_W1, BOTH_UNTIL], LEAVE),
            Expect::Released(1, -1),
            &[Absent, W1_SECOND, W1_UNTIL],
        )
        .publishing(&["r", "r"])
        .saying(&["next:w1", ""]),
        Case::new(
            "a holder behind another leaves: nobody announced",
            (&[OURS, W1_THEN_ME, BOTH_UNTIL], LEAVE),
            Expect::Released(2, -1),
            &[Absent, W1, W1_UNTIL],
        )
        .publishing(&["r"])
        .heard(&["r"]),
        Case::new(
            "the next call behind another waiter: rank 1, not announced",
            (&[OURS, W1, W1_UNTIL], NEXT_CALL),
            Expect::Released(2, 1),
            &[
                Absent,
                Tickets(
                    &[("w1", Ticket::Given(1)), ("me2", Ticket::Node)],
                    Some(300),
                ),
                W1_ME2_UNTIL,
            ],
        )
        .publishing(&["r"])
        .heard(&["r"]),
        Case::new(
            "the head leaves, its next call behind the next head: rank 1",
            (&[OURS, ME_THEN_W1, BOTH_UNTIL], LEAVE_AND_NEXT),
            Expect::Released(2, 1),
            &[
                Absent,
                Tickets(
                    &[("w1", Ticket::Given(2)), ("me2", Ticket::Node)],
                    Some(300),
                ),
                W1_ME2_UNTIL,
            ],
        )
        .publishing(&["r", "r"])
        .saying(&["next:w1", ""])
        .heard(&["r"]),
        Case::new(
            "the holder alone leaves, its next call placed: rank 0, announced",
            (&[OURS, ME_ALONE, ME_UNTIL], LEAVE_AND_NEXT),
            Expect::Released(2, 0),
            &[Absent, ME2_PLACED, ME2_UNTIL],
        )
        .publishing(&["r", "r"])
        .saying(&["next:me2", ""])
        .heard(&["r"]),
        Case::new(
            "no queue, the next call placed: rank 0, announced",
            (&[OURS, Absent, Absent], NEXT_CALL),
            Expect::Released(2, 0),
            &[Absent, ME2_PLACED, ME2_UNTIL],
        )
        .publishing(&["r", "r"])
        .saying(&["next:me2", ""])
        .heard(&["r"]),
        Case::new(
            "a given ticket places the next call by it: ahead of a waiter, announced",
            (
                &[
                    OURS,
                    Tickets(&[("w1", Ticket::Given(9))], Some(50)),
                    W1_UNTIL,
                ],
                NEXT_TICKET_7,
            ),
            Expect::Released(2, 0),
            &[
                Absent,
                Tickets(
                    &[("me2", Ticket::Given(7)), ("w1", Ticket::Given(9))],
                    Some(300),
                ),
                W1_ME2_UNTIL,
            ],
        )
        .publishing(&["r", "r"])
        .saying(&["next:me2", ""])
        .heard(&["r"]),
        Case::new(
            "held by another value: 0, the places still moved",
            (&[HELD, ME_THEN_W1, BOTH_UNTIL], LEAVE_AND_NEXT),
            Expect::Released(0, 1),
            &[
                HELD,
                Tickets(
                    &[("w1", Ticket::Given(2)), ("me2", Ticket::Node)],
                    Some(300),
                ),
                W1_ME2_UNTIL,
            ],
        )
        .publishing(&["r"])
        .saying(&["next:w1"])
        .heard(&["r"]),
        Case::new(
            "no R: -1, our place still left",
            (&[Absent, ME_THEN_W1, BOTH_UNTIL], LEAVE),
            Expect::Released(-1, -1),
            &[Absent, W1_SECOND, W1_UNTIL],
        )
        .publishing(&["r"])
        .saying(&["next:w1"])
        .heard(&["r"]),
        Case::new(
            "a lapsed head pruned before the head is read: the new head announced",
            (
                &[
                    OURS,
                    Tickets(
                        &[("w1", Ticket::Given(1)), ("w2", Ticket::Given(2))],
                        Some(50),
                    ),
                    Deadlines(&[("w1", -10), ("w2", 50)], Some(50)),
                ],
                NEXT_CALL,
            ),
            Expect::Released(2, 1),
            &[
                Absent,
                Tickets(
                    &[("w2", Ticket::Given(2)), ("me2", Ticket::Node)],
                    Some(300),
                ),
                Deadlines(&[("w2", 50), ("me2", 300)], Some(300)),
            ],
        )
        .publishing(&["r", "r"])
        .saying(&["next:w2", ""])
        .heard(&["r"]),
        Case::new(
            "the head's place lapsing this very ms: pruned, the next call heads",
            (&[OURS, W1, Deadlines(&[("w1", 0)], Some(50))], NEXT_CALL),
            Expect::Released(2, 0),
            &[Absent, ME2_PLACED, ME2_UNTIL],
        )
        .publishing(&["r", "r"])
        .saying(&["next:me2", ""])
        .heard(&["r"]),
        Case::new(
            "the sets live longer: their expiry stays",
            (
                &[
                    OURS,
                    Tickets(&[("w1", Ticket::Given(1))], Some(500)),
                    Deadlines(&[("w1", 400)], Some(500)),
                ],
                NEXT_CALL,
            ),
            Expect::Released(1, 1),
            &[
                Absent,
                Tickets(
                    &[("w1", Ticket::Given(1)), ("me2", Ticket::Node)],
                    Some(500),
                ),
                Deadlines(&[("w1", 400), ("me2", 300)], Some(500)),
            ],
        )
        .publishing(&["r"]),
        Case::new(
            "neither id: the release alone",
            (&[OURS, W1, W1_UNTIL], RELEASE_ONLY),
            Expect::Released(1, -1),
            &[Absent, W1, W1_UNTIL],
        )
        .publishing(&["r"]),
        Case::new(
            "a leaving id that has no place: the release alone",
            (&[OURS, W1, W1_UNTIL], LEAVE),
            Expect::Released(2, -1),
            &[Absent, W1, W1_UNTIL],
        )
        .publishing(&["r"])
        .heard(&["r"]),
        Case::new(
            "no R, no queue, neither id: -1, nothing announced",
            (&[Absent, Absent, Absent], RELEASE_ONLY),
            Expect::Released(-1, -1),
            &[Absent, Absent, Absent],
        )
        .heard(&["r"]),
        Case::new(
            "R of the wrong type: the places moved, then WRONGTYPE, nothing announced",
            (&[R_A_SET, ME_THEN_W1, BOTH_UNTIL], LEAVE),
            Expect::Error("WRONGTYPE"),
            &[R_A_SET, W1_SECOND, W1_UNTIL],
        )
        .heard(&["r"]),
        Case::new(
            "the queue of the wrong type",
            (&[OURS, Str("x", None), Absent], LEAVE),
            Expect::Error("WRONGTYPE"),
            &[OURS, Str("x", None), Absent],
        )
        .heard(&["r"]),
        Case::new(
            "a head with a ttl shorter than its place: granted for its ttl, told alone",
            (&[OURS, ME_THEN_W1_10S, ME_W1_10S_UNTIL], LEAVE),
            Expect::Released(2, -1),
            &[
                Str("w1~10000", Some(10_000)),
                Tickets(&[("w1~10000", Ticket::Given(2))], Some(20_000)),
                Deadlines(&[("w1~10000", 20_000)], Some(20_000)),
            ],
        )
        .publishing(&["r"])
        .saying(&["grant:w1~10000"])
        .heard(&["r"]),
        Case::new(
            "a head whose place has less left than its ttl: granted for what is left",
            (&[OURS, ME_THEN_W1_100S, ME_W1_100S_UNTIL], LEAVE),
            Expect::Released(2, -1),
            &[GRANTED_W1_100S, W1_100S, W1_100S_UNTIL],
        )
        .publishing(&["r"])
        .saying(&["grant:w1~100000"])
        .heard(&["r"]),
        Case::new(
            "a grant nobody hears: 1",
            (&[OURS, ME_THEN_W1_100S, ME_W1_100S_UNTIL], LEAVE),
            Expect::Released(1, -1),
            &[GRANTED_W1_100S, W1_100S, W1_100S_UNTIL],
        )
        .publishing(&["r"])
        .saying(&["grant:w1~100000"]),
        Case::new(
            "R holding the leaving id, not the value: deleted, granted to the head",
            (
                &[Str("me", Some(100)), ME_THEN_W1_100S, ME_W1_100S_UNTIL],
                LEAVE,
            ),
            Expect::Released(2, -1),
            &[GRANTED_W1_100S, W1_100S, W1_100S_UNTIL],
        )
        .publishing(&["r"])
        .saying(&["grant:w1~100000"])
        .heard(&["r"]),
        Case::new(
            "its next call heads with a ttl: not granted (its own line's), announced, rank 0",
            (&[OURS, ME_ALONE, ME_UNTIL], LEAVE_AND_NEXT_WITH_TTL),
            Expect::Released(2, 0),
            &[
                Absent,
                Tickets(&[("me2~10000", Ticket::Node)], Some(300)),
                Deadlines(&[("me2~10000", 300)], Some(300)),
            ],
        )
        .publishing(&["r", "r"])
        .saying(&["next:me2~10000", ""])
        .heard(&["r"]),
        Case::new(
            "a head with `~` and no digits: announced, then the release, no grant",
            (
                &[
                    OURS,
                    Tickets(
                        &[("me", Ticket::Given(1)), ("w1~", Ticket::Given(2))],
                        Some(50),
                    ),
                    Deadlines(&[("me", 50), ("w1~", 50)], Some(50)),
                ],
                LEAVE,
            ),
            Expect::Released(2, -1),
            &[
                Absent,
                Tickets(&[("w1~", Ticket::Given(2))], Some(50)),
                Deadlines(&[("w1~", 50)], Some(50)),
            ],
        )
        .publishing(&["r", "r"])
        .saying(&["next:w1~", ""])
        .heard(&["r"]),
        Case::new(
            "a head asking for 0 ms: announced, then the release, no grant",
            (
                &[
                    OURS,
                    Tickets(
                        &[("me", Ticket::Given(1)), ("w1~0", Ticket::Given(2))],
                        Some(50),
                    ),
                    Deadlines(&[("me", 50), ("w1~0", 50)], Some(50)),
                ],
                LEAVE,
            ),
            Expect::Released(2, -1),
            &[
                Absent,
                Tickets(&[("w1~0", Ticket::Given(2))], Some(50)),
                Deadlines(&[("w1~0", 50)], Some(50)),
            ],
        )
        .publishing(&["r", "r"])
        .saying(&["next:w1~0", ""])
        .heard(&["r"]),
        Case::new(
            "a head with a ttl but no deadline: announced, then the release, no grant",
            (&[OURS, ME_THEN_W1_10S, ME_UNTIL], LEAVE),
            Expect::Released(2, -1),
            &[
                Absent,
                Tickets(&[("w1~10000", Ticket::Given(2))], Some(20_000)),
                Absent,
            ],
        )
        .publishing(&["r", "r"])
        .saying(&["next:w1~10000", ""])
        .heard(&["r"]),
        Case::new(
            "an empty R and no leaving id: another value, 0",
            (&[Str("", Some(100)), W1, W1_UNTIL], RELEASE_ONLY),
            Expect::Released(0, -1),
            &[Str("", Some(100)), W1, W1_UNTIL],
        )
        .heard(&["r"]),
    ],
};

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;
    use crate::clock::{Clock, SimTime};
    use crate::kinds::case::check;
    use crate::node::Node;
    use crate::script::Scripts;

    /// The tripwire: a change to the script the core sends fails here first, by name.
    #[test]
    fn the_model_was_written_from_the_script_the_core_sends() {
        let script = redlock_core::QUEUE_RELEASE_SCRIPT;
        assert_eq!(script.body, QUEUE_RELEASE_SOURCE);
        assert_eq!(crate::script::sha1_hex(script.body), script.sha1);
        assert_eq!(redlock_core::GRANT_PREFIX, GRANT);
    }

    #[test]
    fn queue_release_rows() {
        check(&QUEUE_RELEASE_CASES, queue_release).unwrap();
    }

    /// Through a node: the subscriber receives the next head's announcement, then the
    /// release's empty message, and the caller `{2, rank}`; a second release answers -1
    /// and announces nothing.
    #[test]
    fn a_subscriber_hears_the_next_head_before_the_release() {
        let scripts = Scripts::default();
        let mut node = Node::new(Clock::with_skew(Instant::now(), 0.0), &scripts, true);
        let (mut waiter, mut caller) = (node.accept(), node.accept());
        let run = |node: &mut Node, session: &mut crate::pubsub::Session, args: &[&str]| {
            let args: Vec<Bytes> = args
                .iter()
                .map(|a| Bytes::copy_from_slice(a.as_bytes()))
                .collect();
            node.run(SimTime::ZERO, session, &args, &scripts)
                .into_resp2()
        };
        run(&mut node, &mut waiter, &["SUBSCRIBE", "redlock:released:r"]);
        let far = "99999999999999";
        let set_up: [&[&str]; 3] = [
            &["SET", "r", "t", "PX", "500"],
            &["ZADD", "r:queue", "1", "me", "2", "w1"],
            &["ZADD", "r:queue:until", far, "me", far, "w1"],
        ];
        for command in set_up {
            run(&mut node, &mut caller, command);
        }
        let sha = crate::script::sha1_hex(QUEUE_RELEASE_SOURCE);
        let keys = ["3", "r", "r:queue", "r:queue:until"];
        let release = [&["EVALSHA", sha.as_str()][..], &keys, LEAVE_AND_NEXT].concat();
        let answer = |outcome, rank| ServerReply::Array(vec![outcome, ServerReply::Int(rank)]);
        let reply = run(&mut node, &mut caller, &release);
        assert_eq!(reply, answer(ServerReply::Int(2), 1));
        let heard: Vec<(Bytes, Bytes)> = node
            .take_deliveries()
            .into_iter()
            .map(|d| (d.channel, d.payload))
            .collect();
        let channel = Bytes::from_static(b"redlock:released:r");
        let said = |m: &'static [u8]| (channel.clone(), Bytes::from_static(m));
        assert_eq!(heard, [said(b"next:w1"), said(b"")]);
        let again = run(&mut node, &mut caller, &release);
        assert_eq!(again, answer(ServerReply::Int(-1), 1));
        assert!(node.take_deliveries().is_empty(), "the head did not change");
    }

    /// Through a node: a release grants R to a head whose id carries its ttl, the subscriber
    /// hears `grant:<id>` alone, and the head's next QUEUE_ACQUIRE turns the grant into its
    /// own hold (its token, its ttl), its place kept until it leaves.
    #[test]
    fn a_granted_head_hears_the_grant_and_its_attempt_takes_it_up() {
        let scripts = Scripts::default();
        let mut node = Node::new(Clock::with_skew(Instant::now(), 0.0), &scripts, true);
        let (mut waiter, mut caller) = (node.accept(), node.accept());
        let run = |node: &mut Node, session: &mut crate::pubsub::Session, args: &[&str]| {
            let args: Vec<Bytes> = args
                .iter()
                .map(|a| Bytes::copy_from_slice(a.as_bytes()))
                .collect();
            node.run(SimTime::ZERO, session, &args, &scripts)
                .into_resp2()
        };
        run(&mut node, &mut waiter, &["SUBSCRIBE", "redlock:released:r"]);
        let far = "99999999999999";
        let set_up: [&[&str]; 3] = [
            &["SET", "r", "t", "PX", "500"],
            &["ZADD", "r:queue", "1", "me", "2", "w1~400"],
            &["ZADD", "r:queue:until", far, "me", far, "w1~400"],
        ];
        for command in set_up {
            run(&mut node, &mut caller, command);
        }
        let keys = ["3", "r", "r:queue", "r:queue:until"];
        let sha = crate::script::sha1_hex(QUEUE_RELEASE_SOURCE);
        let release = [&["EVALSHA", sha.as_str()][..], &keys, LEAVE].concat();
        let released = ServerReply::Array(vec![ServerReply::Int(2), ServerReply::Int(-1)]);
        assert_eq!(run(&mut node, &mut caller, &release), released);
        let heard: Vec<Bytes> = node
            .take_deliveries()
            .into_iter()
            .map(|d| d.payload)
            .collect();
        assert_eq!(heard, [Bytes::from_static(b"grant:w1~400")]);
        assert_eq!(
            run(&mut node, &mut caller, &["GET", "r"]),
            ServerReply::Bulk(Bytes::from_static(b"w1~400"))
        );
        let pttl = run(&mut node, &mut caller, &["PTTL", "r"]);
        assert_eq!(
            pttl,
            ServerReply::Int(400),
            "the ttl, shorter than the place"
        );
        let acquire_sha = crate::script::sha1_hex(super::super::queue::QUEUE_ACQUIRE_SOURCE);
        let argv = ["u", "100", "w1~400", "0", "300"];
        let acquire = [&["EVALSHA", acquire_sha.as_str()][..], &keys, &argv].concat();
        assert_eq!(run(&mut node, &mut caller, &acquire), ServerReply::Int(1));
        assert_eq!(
            run(&mut node, &mut caller, &["GET", "r"]),
            ServerReply::Bulk(Bytes::from_static(b"u"))
        );
        assert_eq!(
            run(&mut node, &mut caller, &["PTTL", "r"]),
            ServerReply::Int(100)
        );
        let place = run(&mut node, &mut caller, &["ZSCORE", "r:queue", "w1~400"]);
        assert_eq!(place, ServerReply::Bulk(Bytes::from_static(b"2")));
        assert!(
            node.take_deliveries().is_empty(),
            "a grant taken up is not told"
        );
    }

    /// `'~(%d+)$'`: one digit or more after the id's last `~`, and nothing else.
    #[test]
    fn the_ttl_an_id_asks_for() {
        let asked = |id: &'static str| asked_ttl(&Bytes::from_static(id.as_bytes()));
        assert_eq!(asked("w1~200"), Some(200.0));
        assert_eq!(asked("a~b~007"), Some(7.0));
        // Past what a double holds: `inf`, as Lua's `tonumber` (`strtod`) reads it.
        let huge = Bytes::from(format!("w1~{}", "9".repeat(400)));
        assert_eq!(asked_ttl(&huge), Some(f64::INFINITY));
        for none in ["w1", "w1~", "w1~x", "w1~20x", "w1~-5", "w1~2.5", "w1~20~"] {
            assert_eq!(asked(none), None, "{none}");
        }
    }
}
