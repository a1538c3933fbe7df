//! The reader-writer lock's scripts. `KEYS[1]` = R (the writer's key, as a mutex's),
//! `KEYS[2]` = R:readers (member = a reader's token, score = its deadline in ms of the
//! node's `TIME`), `KEYS[3]` = R:writer-waiting (a waiting writer's token, `PX patience`).
//!
//! Writer preference, bounded: a writer that fails and will retry leaves the marker, which
//! keeps new readers out (readers in place keep their slots) for at most its patience; a
//! writer that succeeds deletes it; WRITE_ABANDON removes one's own marker on giving up. A
//! held writer is extended with the mutex's script on R and released by WRITE_RELEASE: the
//! mutex's release, and its own marker deleted where a node refused its granted attempt.

use bytes::Bytes;

use super::case::State::{Absent, Deadlines, Str};
use super::case::{Case, Expect, State, Table};
use super::{Steps, announce, expire_at_least, freed, node_now, number, prune, reply, zadd};
use crate::keyspace::Keys;
use crate::lua::{arity_error, set_px_arg};
use crate::resp::ServerReply;

/// READ_ACQUIRE (`ARGV[1]` token, `ARGV[2]` ttl ms), word for word from the lock kinds' design: the body the core sends
/// and the model was written from. Change both together (tests/kinds_scripts.rs pins its SHA1).
pub const READ_ACQUIRE_SOURCE: &str = "local t = redis.call('TIME') local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now) if redis.call('EXISTS', KEYS[1]) == 1 or redis.call('EXISTS', KEYS[3]) == 1 then return 0 end redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), ARGV[1]) if redis.call('PTTL', KEYS[2]) < tonumber(ARGV[2]) then redis.call('PEXPIRE', KEYS[2], ARGV[2]) end return 1";

/// WRITE_ACQUIRE (`ARGV[1]` token, `ARGV[2]` ttl ms, `ARGV[3]` patience ms, 0 = none), word for word from the lock kinds' design: the body the core sends
/// and the model was written from. Change both together (tests/kinds_scripts.rs pins its SHA1).
pub const WRITE_ACQUIRE_SOURCE: &str = "local t = redis.call('TIME') local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now) if redis.call('EXISTS', KEYS[1]) == 0 and redis.call('ZCARD', KEYS[2]) == 0 then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) redis.call('DEL', KEYS[3]) return 1 end if tonumber(ARGV[3]) > 0 then redis.call('SET', KEYS[3], ARGV[1], 'PX', ARGV[3]) end return 0";

/// WRITE_ABANDON (`KEYS[1]` = R:writer-waiting, `ARGV[1]` token), word for word from the lock kinds' design: the body the core sends
/// and the model was written from. Change both together (tests/kinds_scripts.rs pins its SHA1).
pub const WRITE_ABANDON_SOURCE: &str = "if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) return 1 end return 0";

/// WRITE_RELEASE (`ARGV[1]` token), word for word from the lock kinds' design: the body the core sends
/// and the model was written from. Change both together (tests/kinds_scripts.rs pins its SHA1).
pub const WRITE_RELEASE_SOURCE: &str = "local v = redis.call('GET', KEYS[1]) local r = 0 if v == ARGV[1] then redis.call('DEL', KEYS[1]) r = 1 local n = redis.pcall('PUBLISH', 'redlock:released:' .. KEYS[1], '') if type(n) == 'number' and n > 0 then r = 2 end elseif v == false then r = -1 end if redis.pcall('GET', KEYS[3]) == ARGV[1] then redis.call('DEL', KEYS[3]) end return r";

/// READ_RELEASE (`ARGV[1]` token), word for word from the lock kinds' design: the body the core sends
/// and the model was written from. Change both together (tests/kinds_scripts.rs pins its SHA1).
pub const READ_RELEASE_SOURCE: &str = "local t = redis.call('TIME') local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now) if redis.call('ZREM', KEYS[2], ARGV[1]) == 0 then return -1 end if redis.call('ZCARD', KEYS[2]) == 0 then local s = redis.pcall('PUBLISH', 'redlock:released:' .. KEYS[1], '') if type(s) == 'number' and s > 0 then return 2 end end return 1";

/// READ_EXTEND (`KEYS[1]` = R:readers; `ARGV[1]` token, `ARGV[2]` ttl ms), word for word from the lock kinds' design: the body the core sends
/// and the model was written from. Change both together (tests/kinds_scripts.rs pins its SHA1).
pub const READ_EXTEND_SOURCE: &str = "local t = redis.call('TIME') local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now) if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[2]), ARGV[1]) if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 1";

/// The mutant WRITE_ACQUIRE_IGNORES_READERS (a negative control: a writer let in with live readers), word for word from the lock kinds' design: the body the core sends
/// and the model was written from. Change both together (tests/kinds_scripts.rs pins its SHA1).
pub const WRITE_ACQUIRE_IGNORES_READERS_SOURCE: &str = "local t = redis.call('TIME') local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now) if redis.call('EXISTS', KEYS[1]) == 0 then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) redis.call('DEL', KEYS[3]) return 1 end if tonumber(ARGV[3]) > 0 then redis.call('SET', KEYS[3], ARGV[1], 'PX', ARGV[3]) end return 0";

/// The mutant READ_EXTEND_RESURRECTS (a negative control: an extension that re-creates a pruned slot), word for word from the lock kinds' design: the body the core sends
/// and the model was written from. Change both together (tests/kinds_scripts.rs pins its SHA1).
pub const READ_EXTEND_RESURRECTS_SOURCE: &str = "local t = redis.call('TIME') local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1]) if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 1";

/// READ_ACQUIRE: prunes expired readers; 0 while a writer holds R or waits; else adds the
/// token with deadline `now + ttl`, keeps the set alive at least `ttl`, and answers 1.
pub fn read_acquire(keys: &mut Keys<'_>, k: &[Bytes], argv: &[Bytes]) -> ServerReply {
    reply(read_acquire_steps(keys, k, argv))
}

/// The steps of READ_ACQUIRE.
fn read_acquire_steps(keys: &mut Keys<'_>, k: &[Bytes], argv: &[Bytes]) -> Steps {
    let ([r, readers, waiting, ..], [token, ttl, ..]) = (k, argv) else {
        return Err(arity_error());
    };
    let now = node_now(keys)?;
    prune(keys, readers, now)?;
    // Lua's `or`: the marker is looked at only when R is free.
    if keys.exists(r) || keys.exists(waiting) {
        return Ok(ServerReply::Int(0));
    }
    zadd(keys, readers, token, (now as f64 + number(ttl)?, false))?;
    expire_at_least(keys, readers, ttl)?;
    Ok(ServerReply::Int(1))
}

/// WRITE_ACQUIRE: prunes expired readers; if R is free and no reader is left, sets R to the
/// token (`PX ttl`), deletes the waiting marker and answers 1; else leaves the marker for
/// `patience` ms when it is above 0, and answers 0.
pub fn write_acquire(keys: &mut Keys<'_>, k: &[Bytes], argv: &[Bytes]) -> ServerReply {
    reply(write_acquire_steps(keys, k, argv, true))
}

/// The model of [`WRITE_ACQUIRE_IGNORES_READERS_SOURCE`]: [`write_acquire`] that looks at R
/// alone, so a writer gets in with live readers.
pub fn write_acquire_ignoring_readers(
    keys: &mut Keys<'_>,
    k: &[Bytes],
    argv: &[Bytes],
) -> ServerReply {
    reply(write_acquire_steps(keys, k, argv, false))
}

/// WRITE_ACQUIRE, counting the live readers or (the mutant) not.
fn write_acquire_steps(
    keys: &mut Keys<'_>,
    k: &[Bytes],
    argv: &[Bytes],
    readers_count: bool,
) -> Steps {
    let ([r, readers, waiting, ..], [token, ttl, patience, ..]) = (k, argv) else {
        return Err(arity_error());
    };
    let now = node_now(keys)?;
    prune(keys, readers, now)?;
    // Lua's `and`: `ZCARD` runs only when R is free.
    if !keys.exists(r) && (!readers_count || keys.zcard(readers)? == 0) {
        keys.set(r, token.clone(), Some(set_px_arg(ttl)?));
        keys.del(waiting);
        return Ok(ServerReply::Int(1));
    }
    if number(patience)? > 0.0 {
        keys.set(waiting, token.clone(), Some(set_px_arg(patience)?));
    }
    Ok(ServerReply::Int(0))
}

/// WRITE_ABANDON: deletes the waiting marker if it is ours (1), else 0.
pub fn write_abandon(keys: &mut Keys<'_>, k: &[Bytes], argv: &[Bytes]) -> ServerReply {
    let (Some(waiting), Some(token)) = (k.first(), argv.first()) else {
        return arity_error();
    };
    match keys.get(waiting) {
        Ok(Some(v)) if v == token => {
            keys.del(waiting);
            ServerReply::Int(1)
        }
        Ok(_) => ServerReply::Int(0),
        Err(e) => e.into(),
    }
}

/// WRITE_RELEASE: the mutex's release of R (1, or 2 if a subscriber heard its announcement;
/// 0 if R holds another value, -1 if it is gone; R of another type is the error that ends
/// the script), then the marker deleted if it holds the token (a marker of another type is
/// left: `pcall`).
pub fn write_release(keys: &mut Keys<'_>, k: &[Bytes], argv: &[Bytes]) -> ServerReply {
    let ([r, _, waiting, ..], [token, ..]) = (k, argv) else {
        return arity_error();
    };
    let released = match keys.get(r) {
        Ok(Some(v)) if v == token => {
            keys.del(r);
            freed(announce(keys, r))
        }
        Ok(Some(_)) => ServerReply::Int(0),
        Ok(None) => ServerReply::Int(-1),
        Err(e) => return e.into(),
    };
    if matches!(keys.get(waiting), Ok(Some(v)) if v == token) {
        keys.del(waiting);
    }
    released
}

/// READ_RELEASE: prunes expired readers; -1 if the token holds no live slot; else removes
/// it and answers 1, announcing on R's channel (2 if heard) only when no reader is left.
pub fn read_release(keys: &mut Keys<'_>, k: &[Bytes], argv: &[Bytes]) -> ServerReply {
    reply(read_release_steps(keys, k, argv))
}

/// The steps of READ_RELEASE.
fn read_release_steps(keys: &mut Keys<'_>, k: &[Bytes], argv: &[Bytes]) -> Steps {
    let ([r, readers, ..], [token, ..]) = (k, argv) else {
        return Err(arity_error());
    };
    let now = node_now(keys)?;
    prune(keys, readers, now)?;
    if !keys.zrem(readers, token)? {
        return Ok(ServerReply::Int(-1));
    }
    if keys.zcard(readers)? == 0 {
        return Ok(freed(announce(keys, r)));
    }
    Ok(ServerReply::Int(1))
}

/// READ_EXTEND: prunes expired readers; 0 if the token holds no live slot (an expired one
/// is never re-created); else moves its deadline to `now + ttl`, keeps the set alive at
/// least `ttl`, and answers 1.
pub fn read_extend(keys: &mut Keys<'_>, k: &[Bytes], argv: &[Bytes]) -> ServerReply {
    reply(read_extend_steps(keys, k, argv, false))
}

/// The model of [`READ_EXTEND_RESURRECTS_SOURCE`]: an extension without the prune or the
/// membership check, which adds the slot whether or not it was still there.
pub fn read_extend_resurrecting(keys: &mut Keys<'_>, k: &[Bytes], argv: &[Bytes]) -> ServerReply {
    reply(read_extend_steps(keys, k, argv, true))
}

/// READ_EXTEND, or (`resurrect`) the mutant that re-creates the slot.
fn read_extend_steps(keys: &mut Keys<'_>, k: &[Bytes], argv: &[Bytes], resurrect: bool) -> Steps {
    let ([readers, ..], [token, ttl, ..]) = (k, argv) else {
        return Err(arity_error());
    };
    let now = node_now(keys)?;
    if !resurrect {
        prune(keys, readers, now)?;
        if keys.zscore(readers, token)?.is_none() {
            return Ok(ServerReply::Int(0));
        }
    }
    zadd(
        keys,
        readers,
        token,
        (now as f64 + number(ttl)?, !resurrect),
    )?;
    expire_at_least(keys, readers, ttl)?;
    Ok(ServerReply::Int(1))
}

/// A writer holds R (another's token `u`, 100 ms).
const WRITER: State = Str("u", Some(100));
/// Another writer waits (its token `w`, 200 ms of patience).
const WAITING: State = Str("w", Some(200));
/// One live reader `u` (deadline in 50 ms), the set expiring with it.
const READER: State = Deadlines(&[("u", 50)], Some(50));
/// The keys of a reader-writer lock on `r`.
const RW_KEYS: &[&str] = &["r", "r:readers", "r:writer-waiting"];
/// Token `t`, ttl 100 ms.
const T100: &[&str] = &["t", "100"];
/// Token `t`, ttl 100 ms, patience 250 ms.
const T100_WAIT: &[&str] = &["t", "100", "250"];

/// READ_ACQUIRE on `r` by token `t` for 100 ms.
pub const READ_ACQUIRE_CASES: Table = Table {
    source: READ_ACQUIRE_SOURCE,
    keys: RW_KEYS,
    cases: &[
        Case::new(
            "free",
            (&[Absent, Absent, Absent], T100),
            Expect::Int(1),
            &[Absent, Deadlines(&[("t", 100)], Some(100)), Absent],
        ),
        Case::new(
            "beside a reader: the set's expiry grows",
            (&[Absent, READER, Absent], T100),
            Expect::Int(1),
            &[
                Absent,
                Deadlines(&[("u", 50), ("t", 100)], Some(100)),
                Absent,
            ],
        ),
        Case::new(
            "beside a longer reader: the expiry stays",
            (&[Absent, Deadlines(&[("u", 400)], Some(500)), Absent], T100),
            Expect::Int(1),
            &[
                Absent,
                Deadlines(&[("u", 400), ("t", 100)], Some(500)),
                Absent,
            ],
        ),
        Case::new(
            "the expired pruned: the emptied set goes, its expiry too",
            (
                &[
                    Absent,
                    Deadlines(&[("u", 0), ("v", -10)], Some(200)),
                    Absent,
                ],
                T100,
            ),
            Expect::Int(1),
            &[Absent, Deadlines(&[("t", 100)], Some(100)), Absent],
        ),
        Case::new(
            "a writer holds",
            (&[WRITER, READER, Absent], T100),
            Expect::Int(0),
            &[WRITER, READER, Absent],
        ),
        Case::new(
            "a writer waits",
            (&[Absent, READER, WAITING], T100),
            Expect::Int(0),
            &[Absent, READER, WAITING],
        ),
        Case::new(
            "refused, the expired still pruned",
            (&[WRITER, Deadlines(&[("v", -5)], Some(100)), Absent], T100),
            Expect::Int(0),
            &[WRITER, Absent, Absent],
        ),
        Case::new(
            "R of another type excludes",
            (&[Deadlines(&[("n", 9)], None), Absent, Absent], T100),
            Expect::Int(0),
            &[Deadlines(&[("n", 9)], None), Absent, Absent],
        ),
        Case::new(
            "readers of the wrong type",
            (&[Absent, Str("x", None), Absent], T100),
            Expect::Error("WRONGTYPE"),
            &[Absent, Str("x", None), Absent],
        ),
        Case::new(
            "ours again: the deadline moves",
            (&[Absent, Deadlines(&[("t", 20)], Some(20)), Absent], T100),
            Expect::Int(1),
            &[Absent, Deadlines(&[("t", 100)], Some(100)), Absent],
        ),
    ],
};

/// WRITE_ACQUIRE on `r` by token `t` for 100 ms, with 250 ms of patience unless said.
pub const WRITE_ACQUIRE_CASES: Table = Table {
    source: WRITE_ACQUIRE_SOURCE,
    keys: RW_KEYS,
    cases: &[
        Case::new(
            "free",
            (&[Absent, Absent, Absent], T100_WAIT),
            Expect::Int(1),
            &[Str("t", Some(100)), Absent, Absent],
        ),
        Case::new(
            "free: another's marker goes",
            (&[Absent, Absent, WAITING], T100_WAIT),
            Expect::Int(1),
            &[Str("t", Some(100)), Absent, Absent],
        ),
        Case::new(
            "a live reader: wait",
            (&[Absent, READER, Absent], T100_WAIT),
            Expect::Int(0),
            &[Absent, READER, Str("t", Some(250))],
        ),
        Case::new(
            "a live reader, no patience",
            (&[Absent, READER, Absent], &["t", "100", "0"]),
            Expect::Int(0),
            &[Absent, READER, Absent],
        ),
        Case::new(
            "only expired readers",
            (
                &[Absent, Deadlines(&[("u", 0)], Some(100)), Absent],
                T100_WAIT,
            ),
            Expect::Int(1),
            &[Str("t", Some(100)), Absent, Absent],
        ),
        Case::new(
            "a writer holds: our marker replaces another's",
            (&[WRITER, Absent, WAITING], T100_WAIT),
            Expect::Int(0),
            &[WRITER, Absent, Str("t", Some(250))],
        ),
        Case::new(
            "readers of the wrong type",
            (&[Absent, Str("x", None), Absent], T100_WAIT),
            Expect::Error("WRONGTYPE"),
            &[Absent, Str("x", None), Absent],
        ),
    ],
};

/// WRITE_ACQUIRE_IGNORES_READERS where it differs from WRITE_ACQUIRE.
pub const WRITE_ACQUIRE_IGNORES_READERS_CASES: Table = Table {
    source: WRITE_ACQUIRE_IGNORES_READERS_SOURCE,
    keys: RW_KEYS,
    cases: &[Case::new(
        "in with a live reader",
        (&[Absent, READER, Absent], T100_WAIT),
        Expect::Int(1),
        &[Str("t", Some(100)), READER, Absent],
    )],
};

/// WRITE_ABANDON of `r`'s marker by token `t`.
pub const WRITE_ABANDON_CASES: Table = Table {
    source: WRITE_ABANDON_SOURCE,
    keys: &["r:writer-waiting"],
    cases: &[
        Case::new(
            "ours",
            (&[Str("t", Some(250))], &["t"]),
            Expect::Int(1),
            &[Absent],
        ),
        Case::new(
            "another's",
            (&[WAITING], &["t"]),
            Expect::Int(0),
            &[WAITING],
        ),
        Case::new("none", (&[Absent], &["t"]), Expect::Int(0), &[Absent]),
        Case::new(
            "wrong type",
            (&[READER], &["t"]),
            Expect::Error("WRONGTYPE"),
            &[READER],
        ),
    ],
};

/// WRITE_RELEASE of `r` by token `t`.
pub const WRITE_RELEASE_CASES: Table = Table {
    source: WRITE_RELEASE_SOURCE,
    keys: RW_KEYS,
    cases: &[
        Case::new(
            "ours",
            (&[Str("t", Some(100)), Absent, Absent], &["t"]),
            Expect::Int(1),
            &[Absent, Absent, Absent],
        )
        .publishing(&["r"]),
        Case::new(
            "ours, a waiter heard",
            (&[Str("t", Some(100)), Absent, Absent], &["t"]),
            Expect::Int(2),
            &[Absent, Absent, Absent],
        )
        .publishing(&["r"])
        .heard(&["r"]),
        Case::new(
            "ours and our marker",
            (&[Str("t", Some(100)), Absent, Str("t", Some(250))], &["t"]),
            Expect::Int(1),
            &[Absent, Absent, Absent],
        )
        .publishing(&["r"]),
        Case::new(
            "another's marker stays",
            (&[Str("t", Some(100)), Absent, WAITING], &["t"]),
            Expect::Int(1),
            &[Absent, Absent, WAITING],
        )
        .publishing(&["r"]),
        Case::new(
            "R gone, our marker goes",
            (&[Absent, Absent, Str("t", Some(250))], &["t"]),
            Expect::Int(-1),
            &[Absent, Absent, Absent],
        ),
        Case::new(
            "another holds R, our marker goes",
            (&[WRITER, Absent, Str("t", Some(250))], &["t"]),
            Expect::Int(0),
            &[WRITER, Absent, Absent],
        ),
        Case::new(
            "a marker of another type stays",
            (&[Str("t", Some(100)), Absent, READER], &["t"]),
            Expect::Int(1),
            &[Absent, Absent, READER],
        )
        .publishing(&["r"]),
        Case::new(
            "R of another type",
            (&[READER, Absent, Str("t", Some(250))], &["t"]),
            Expect::Error("WRONGTYPE"),
            &[READER, Absent, Str("t", Some(250))],
        ),
    ],
};

/// READ_RELEASE of `r` by token `t`.
pub const READ_RELEASE_CASES: Table = Table {
    source: READ_RELEASE_SOURCE,
    keys: &["r", "r:readers"],
    cases: &[
        Case::new(
            "the last reader",
            (&[Absent, Deadlines(&[("t", 50)], Some(50))], &["t"]),
            Expect::Int(1),
            &[Absent, Absent],
        )
        .publishing(&["r"]),
        Case::new(
            "the last reader, a writer waits",
            (&[Absent, Deadlines(&[("t", 50)], Some(50))], &["t"]),
            Expect::Int(2),
            &[Absent, Absent],
        )
        .publishing(&["r"])
        .heard(&["r"]),
        Case::new(
            "another reader stays: no announcement",
            (
                &[Absent, Deadlines(&[("t", 50), ("u", 80)], Some(80))],
                &["t"],
            ),
            Expect::Int(1),
            &[Absent, Deadlines(&[("u", 80)], Some(80))],
        ),
        Case::new(
            "not a reader",
            (&[Absent, Deadlines(&[("u", 80)], Some(80))], &["t"]),
            Expect::Int(-1),
            &[Absent, Deadlines(&[("u", 80)], Some(80))],
        ),
        Case::new(
            "our slot expired",
            (
                &[Absent, Deadlines(&[("t", 0), ("u", 80)], Some(80))],
                &["t"],
            ),
            Expect::Int(-1),
            &[Absent, Deadlines(&[("u", 80)], Some(80))],
        ),
        Case::new(
            "no readers",
            (&[Absent, Absent], &["t"]),
            Expect::Int(-1),
            &[Absent, Absent],
        ),
        Case::new(
            "the last live reader",
            (
                &[Absent, Deadlines(&[("t", 50), ("u", -1)], Some(50))],
                &["t"],
            ),
            Expect::Int(1),
            &[Absent, Absent],
        )
        .publishing(&["r"]),
        Case::new(
            "wrong type",
            (&[Absent, Str("x", None)], &["t"]),
            Expect::Error("WRONGTYPE"),
            &[Absent, Str("x", None)],
        ),
    ],
};

/// READ_EXTEND of `r:readers` by token `t` to 300 ms.
pub const READ_EXTEND_CASES: Table = Table {
    source: READ_EXTEND_SOURCE,
    keys: &["r:readers"],
    cases: &[
        Case::new(
            "ours",
            (&[Deadlines(&[("t", 50)], Some(50))], &["t", "300"]),
            Expect::Int(1),
            &[Deadlines(&[("t", 300)], Some(300))],
        ),
        Case::new(
            "ours, the set lives longer",
            (
                &[Deadlines(&[("t", 50), ("u", 450)], Some(500))],
                &["t", "300"],
            ),
            Expect::Int(1),
            &[Deadlines(&[("t", 300), ("u", 450)], Some(500))],
        ),
        Case::new(
            "ours expired: not re-created",
            (
                &[Deadlines(&[("t", 0), ("u", 80)], Some(80))],
                &["t", "300"],
            ),
            Expect::Int(0),
            &[Deadlines(&[("u", 80)], Some(80))],
        ),
        Case::new(
            "not a reader",
            (&[Deadlines(&[("u", 80)], Some(80))], &["t", "300"]),
            Expect::Int(0),
            &[Deadlines(&[("u", 80)], Some(80))],
        ),
        Case::new(
            "no readers",
            (&[Absent], &["t", "300"]),
            Expect::Int(0),
            &[Absent],
        ),
        Case::new(
            "wrong type",
            (&[Str("x", None)], &["t", "300"]),
            Expect::Error("WRONGTYPE"),
            &[Str("x", None)],
        ),
    ],
};

/// READ_EXTEND_RESURRECTS where it differs from READ_EXTEND.
pub const READ_EXTEND_RESURRECTS_CASES: Table = Table {
    source: READ_EXTEND_RESURRECTS_SOURCE,
    keys: &["r:readers"],
    cases: &[
        Case::new(
            "ours expired: re-created",
            (
                &[Deadlines(&[("t", 0), ("u", 80)], Some(80))],
                &["t", "300"],
            ),
            Expect::Int(1),
            &[Deadlines(&[("t", 300), ("u", 80)], Some(300))],
        ),
        Case::new(
            "no readers: created",
            (&[Absent], &["t", "300"]),
            Expect::Int(1),
            &[Deadlines(&[("t", 300)], Some(300))],
        ),
    ],
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::case::check;

    #[test]
    fn read_acquire_rows() {
        check(&READ_ACQUIRE_CASES, read_acquire).unwrap();
    }

    #[test]
    fn write_acquire_rows() {
        check(&WRITE_ACQUIRE_CASES, write_acquire).unwrap();
        check(
            &WRITE_ACQUIRE_IGNORES_READERS_CASES,
            write_acquire_ignoring_readers,
        )
        .unwrap();
        let differs = check(&WRITE_ACQUIRE_IGNORES_READERS_CASES, write_acquire);
        assert!(differs.is_err(), "the mutant's row is not the script's");
    }

    #[test]
    fn write_abandon_rows() {
        check(&WRITE_ABANDON_CASES, write_abandon).unwrap();
    }

    #[test]
    fn write_release_rows() {
        check(&WRITE_RELEASE_CASES, write_release).unwrap();
    }

    #[test]
    fn read_release_rows() {
        check(&READ_RELEASE_CASES, read_release).unwrap();
    }

    #[test]
    fn read_extend_rows() {
        check(&READ_EXTEND_CASES, read_extend).unwrap();
        check(&READ_EXTEND_RESURRECTS_CASES, read_extend_resurrecting).unwrap();
        let differs = check(&READ_EXTEND_RESURRECTS_CASES, read_extend);
        assert!(differs.is_err(), "the mutant's rows are not the script's");
    }
}
