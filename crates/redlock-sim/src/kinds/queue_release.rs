//! QUEUE_RELEASE, the release of a mutex held through the waiters' queue (docs/design.md,
//! "The waiters' queue"), on the same keys as the other queue scripts (queue.rs): `KEYS[1]`
//! = R, `KEYS[2]` = R:queue (ids by ticket), `KEYS[3]` = R:queue:until (ids by the node-time
//! ms at which each place lapses).
//!
//! In one step on the node: the lapsed places pruned (as QUEUE_ACQUIRE prunes them), the
//! leaving holder's place removed, the next call of the holder's line placed (its ticket,
//! its deadline, both sets living at least its patience), the queue's head announced as
//! `next:<id>` on R's release channel if it is not the head the script found, then R
//! compared and deleted by the release script's model (script.rs, `RELEASE_SCRIPT`), with
//! its empty announcement. So a subscriber hears the next head before the release. Order only:
//! the release itself is the mutex's compare-and-delete (algorithm.md §4).

use bytes::Bytes;

use super::case::State::{Absent, Deadlines, Str, Tickets};
use super::case::{Case, Expect, State, Table, Ticket};
use super::queue::{
    BOTH_UNTIL, HELD, ME_THEN_W1, NIL_ARGUMENT, QUEUE_KEYS, W1, W1_SECOND, W1_THEN_ME, W1_UNTIL,
    announce_next, head, place, prune_lapsed, rank,
};
use super::{Steps, node_now, reply};
use crate::keyspace::Keys;
use crate::lua::release;
use crate::lua::{arity_error, lua_tonumber};
use crate::resp::ServerReply;

/// QUEUE_RELEASE (`ARGV[1]` the stored value, `ARGV[2]` the leaving holder's id or '',
/// `ARGV[3]` the id of the next call of its line or '', `ARGV[4]` that call's ticket (0: the
/// node's now), `ARGV[5]` its patience ms), word for word from the core's waiters.rs: the
/// body the core sends and the model was written from. Change both together
/// (tests/kinds_scripts.rs pins its SHA1).
pub const QUEUE_RELEASE_SOURCE: &str = "local t = redis.call('TIME') local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) local first = redis.call('ZRANGE', KEYS[2], 0, 0)[1] local gone = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, 64) for i = 1, #gone do redis.call('ZREM', KEYS[2], gone[i]) redis.call('ZREM', KEYS[3], gone[i]) end if ARGV[2] ~= '' then redis.call('ZREM', KEYS[2], ARGV[2]) redis.call('ZREM', KEYS[3], ARGV[2]) end local rank = -1 if ARGV[3] ~= '' then local ticket = tonumber(ARGV[4]) if ticket == 0 then ticket = now end redis.call('ZADD', KEYS[2], ticket, ARGV[3]) redis.call('ZADD', KEYS[3], now + tonumber(ARGV[5]), ARGV[3]) for i = 2, 3 do if redis.call('PTTL', KEYS[i]) < tonumber(ARGV[5]) then redis.call('PEXPIRE', KEYS[i], ARGV[5]) end end rank = redis.call('ZRANK', KEYS[2], ARGV[3]) end local head = redis.call('ZRANGE', KEYS[2], 0, 0)[1] if head and head ~= first then redis.pcall('PUBLISH', 'redlock:released:' .. KEYS[1], 'next:' .. head) end local v = redis.call('GET', KEYS[1]) local out = 0 if v == ARGV[1] then redis.call('DEL', KEYS[1]) local n = redis.pcall('PUBLISH', 'redlock:released:' .. KEYS[1], '') if type(n) == 'number' and n > 0 then out = 2 else out = 1 end elseif v == false then out = -1 end return {out, rank}";

/// QUEUE_RELEASE: prunes the lapsed places; removes the leaving holder's place; places the
/// next call of its line (its ticket: the one given, or the node's now; its deadline now +
/// patience; both sets' expiry at least the patience); announces the head if it is not the
/// one found; then deletes R if it holds the value, announcing the release. Answers
/// `{outcome, rank}`: 2 (deleted, someone heard), 1 (deleted), 0 (another value), -1 (no
/// R); the next call's rank, -1 if none was placed.
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
    // The head changed (the holder's place left, a lapsed head pruned, the next call put
    // first): it is told before the release is, so it tries first when it hears.
    let now_first = head(keys, queue)?;
    if now_first.is_some() && now_first != first {
        announce_next(keys, r, queue)?;
    }
    // RELEASE_SCRIPT's compare-and-delete and its announcement; its `GET` raises on a key
    // of another type, with the queue's work done.
    let outcome = release(keys, std::slice::from_ref(r), std::slice::from_ref(value));
    if matches!(outcome, ServerReply::Error(_)) {
        return Err(outcome);
    }
    Ok(ServerReply::Array(vec![outcome, ServerReply::Int(placed)]))
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
/// R's name as a sorted set: a key of the wrong type for `GET`.
const R_A_SET: State = Tickets(&[("x", Ticket::Given(1))], None);

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
            "R of the wrong type: the places moved and announced, then WRONGTYPE",
            (&[R_A_SET, ME_THEN_W1, BOTH_UNTIL], LEAVE),
            Expect::Error("WRONGTYPE"),
            &[R_A_SET, W1_SECOND, W1_UNTIL],
        )
        .publishing(&["r"])
        .saying(&["next:w1"])
        .heard(&["r"]),
        Case::new(
            "the queue of the wrong type",
            (&[OURS, Str("x", None), Absent], LEAVE),
            Expect::Error("WRONGTYPE"),
            &[OURS, Str("x", None), Absent],
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
}
