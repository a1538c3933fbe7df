//! The multi-resource lock's scripts: all of a sorted, deduplicated set of resources or
//! none of them, each resource's key `R` holding the token (`PX ttl`), as the mutex's key
//! does; so a multi-lock, a mutex and a writer on one name exclude each other.
//!
//! `KEYS` is the set, sorted by the core, so every node sees it in one order; `ARGV[1]` is
//! the token, `ARGV[2]` the ttl in ms.

use bytes::Bytes;

use super::case::{Case, Expect, State, Table};
use super::{Steps, announce, freed, reply};
use crate::keyspace::Keys;
use crate::lua::{arity_error, millis_arg, set_px_arg};
use crate::resp::ServerReply;

/// MULTI_ACQUIRE of the lock kinds' design, word for word: the body the core sends and this
/// module's model was written from. Change both together (tests/kinds_scripts.rs pins its SHA1).
pub const MULTI_ACQUIRE_SOURCE: &str = "for i = 1, #KEYS do if redis.call('EXISTS', KEYS[i]) == 1 then return 0 end end for i = 1, #KEYS do redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2]) end return 1";

/// MULTI_RELEASE of the lock kinds' design, word for word: the body the core sends and this
/// module's model was written from. Change both together (tests/kinds_scripts.rs pins its SHA1).
pub const MULTI_RELEASE_SOURCE: &str = "local n = 0 local heard = false local other = false for i = 1, #KEYS do local v = redis.call('GET', KEYS[i]) if v == ARGV[1] then redis.call('DEL', KEYS[i]) n = n + 1 local s = redis.pcall('PUBLISH', 'redlock:released:' .. KEYS[i], '') if type(s) == 'number' and s > 0 then heard = true end elseif v then other = true end end if n > 0 then if heard then return 2 end return 1 elseif other then return 0 else return -1 end";

/// MULTI_EXTEND of the lock kinds' design, word for word: the body the core sends and this
/// module's model was written from. Change both together (tests/kinds_scripts.rs pins its SHA1).
pub const MULTI_EXTEND_SOURCE: &str = "for i = 1, #KEYS do if redis.call('GET', KEYS[i]) ~= ARGV[1] then return 0 end end for i = 1, #KEYS do redis.call('PEXPIRE', KEYS[i], ARGV[2]) end return 1";

/// MULTI_ACQUIRE: 0 if any key exists (of any type), else every key set to the token with
/// `PX ttl` and 1. All or none: a bad ttl fails the first `SET`, before any key is written.
pub fn multi_acquire(keys: &mut Keys<'_>, k: &[Bytes], argv: &[Bytes]) -> ServerReply {
    let [token, ttl, ..] = argv else {
        return arity_error();
    };
    if k.iter().any(|key| keys.exists(key)) {
        return ServerReply::Int(0);
    }
    if !k.is_empty() {
        let ttl = match set_px_arg(ttl) {
            Ok(ttl) => ttl,
            Err(e) => return e,
        };
        for key in k {
            keys.set(key, token.clone(), Some(ttl));
        }
    }
    ServerReply::Int(1)
}

/// MULTI_RELEASE: deletes each key that holds the token, announcing each on its channel;
/// 1 if any was ours (2 if a subscriber heard), 0 if none was but some key holds another
/// token, -1 if every key is missing. A key of another type ends the script at its `GET`,
/// after the keys before it were released.
pub fn multi_release(keys: &mut Keys<'_>, k: &[Bytes], argv: &[Bytes]) -> ServerReply {
    let Some(token) = argv.first() else {
        return arity_error();
    };
    reply(release_each(keys, k, token))
}

/// The loop of MULTI_RELEASE.
fn release_each(keys: &mut Keys<'_>, k: &[Bytes], token: &Bytes) -> Steps {
    let (mut released, mut heard, mut other) = (false, false, false);
    for key in k {
        match keys.get(key)? {
            Some(v) if v == token => {
                keys.del(key);
                released = true;
                heard |= announce(keys, key);
            }
            Some(_) => other = true,
            None => {}
        }
    }
    Ok(match (released, other) {
        (true, _) => freed(heard),
        (false, true) => ServerReply::Int(0),
        (false, false) => ServerReply::Int(-1),
    })
}

/// MULTI_EXTEND: if every key holds the token, each key's ttl is reset and 1; else nothing
/// changes and 0. A key of another type ends the script at its `GET`.
pub fn multi_extend(keys: &mut Keys<'_>, k: &[Bytes], argv: &[Bytes]) -> ServerReply {
    let [token, ttl, ..] = argv else {
        return arity_error();
    };
    reply(extend_all(keys, k, token, ttl))
}

/// The two loops of MULTI_EXTEND.
fn extend_all(keys: &mut Keys<'_>, k: &[Bytes], token: &Bytes, ttl: &Bytes) -> Steps {
    for key in k {
        if keys.get(key)?.as_ref() != Some(token) {
            return Ok(ServerReply::Int(0));
        }
    }
    if !k.is_empty() {
        let ttl = millis_arg(ttl)?;
        for key in k {
            keys.pexpire(key, ttl);
        }
    }
    Ok(ServerReply::Int(1))
}

/// A key holding our token (`t`) for 100 ms.
const OURS: State = State::Str("t", Some(100));
/// A key holding another's token (`u`) for 500 ms.
const THEIRS: State = State::Str("u", Some(500));
/// A sorted set under a lock's name: a key of another type.
const ZSET: State = State::Deadlines(&[("x", 1000)], None);
/// The arguments of an acquisition or extension: token `t`, ttl 100 ms.
const T100: &[&str] = &["t", "100"];

/// MULTI_ACQUIRE over the set {a, b}.
pub const MULTI_ACQUIRE_CASES: Table = Table {
    source: MULTI_ACQUIRE_SOURCE,
    keys: &["a", "b"],
    cases: &[
        Case::new(
            "all free",
            (&[State::Absent, State::Absent], T100),
            Expect::Int(1),
            &[OURS, OURS],
        ),
        Case::new(
            "one taken: none set",
            (&[State::Absent, THEIRS], T100),
            Expect::Int(0),
            &[State::Absent, THEIRS],
        ),
        Case::new(
            "already ours: still taken",
            (&[OURS, State::Absent], T100),
            Expect::Int(0),
            &[OURS, State::Absent],
        ),
        Case::new(
            "a sorted set exists",
            (&[State::Absent, ZSET], T100),
            Expect::Int(0),
            &[State::Absent, ZSET],
        ),
        Case::new(
            "a list exists",
            (&[State::List, State::Absent], T100),
            Expect::Int(0),
            &[State::List, State::Absent],
        ),
        Case::new(
            "a bad ttl sets nothing",
            (&[State::Absent, State::Absent], &["t", "0"]),
            Expect::Error("ERR invalid expire time"),
            &[State::Absent, State::Absent],
        ),
    ],
};

/// MULTI_RELEASE of the set {a, b} by token `t`.
pub const MULTI_RELEASE_CASES: Table = Table {
    source: MULTI_RELEASE_SOURCE,
    keys: &["a", "b"],
    cases: &[
        Case::new(
            "both ours",
            (&[OURS, OURS], &["t"]),
            Expect::Int(1),
            &[State::Absent, State::Absent],
        )
        .publishing(&["a", "b"]),
        Case::new(
            "both ours, b awaited",
            (&[OURS, OURS], &["t"]),
            Expect::Int(2),
            &[State::Absent, State::Absent],
        )
        .publishing(&["a", "b"])
        .heard(&["b"]),
        Case::new(
            "ours and another's",
            (&[OURS, THEIRS], &["t"]),
            Expect::Int(1),
            &[State::Absent, THEIRS],
        )
        .publishing(&["a"]),
        Case::new(
            "another's and missing",
            (&[THEIRS, State::Absent], &["t"]),
            Expect::Int(0),
            &[THEIRS, State::Absent],
        ),
        Case::new(
            "all missing",
            (&[State::Absent, State::Absent], &["t"]),
            Expect::Int(-1),
            &[State::Absent, State::Absent],
        ),
        Case::new(
            "a wrong type stops it, a stays released",
            (&[OURS, ZSET], &["t"]),
            Expect::Error("WRONGTYPE"),
            &[State::Absent, ZSET],
        )
        .publishing(&["a"]),
    ],
};

/// MULTI_EXTEND of the set {a, b} by token `t` to 300 ms.
pub const MULTI_EXTEND_CASES: Table = Table {
    source: MULTI_EXTEND_SOURCE,
    keys: &["a", "b"],
    cases: &[
        Case::new(
            "both ours",
            (&[OURS, OURS], &["t", "300"]),
            Expect::Int(1),
            &[State::Str("t", Some(300)), State::Str("t", Some(300))],
        ),
        Case::new(
            "one another's: nothing moves",
            (&[OURS, THEIRS], &["t", "300"]),
            Expect::Int(0),
            &[OURS, THEIRS],
        ),
        Case::new(
            "one expired: nothing moves",
            (&[OURS, State::Absent], &["t", "300"]),
            Expect::Int(0),
            &[OURS, State::Absent],
        ),
        Case::new(
            "a wrong type",
            (&[OURS, ZSET], &["t", "300"]),
            Expect::Error("WRONGTYPE"),
            &[OURS, ZSET],
        ),
    ],
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::case::check;

    #[test]
    fn multi_acquire_rows() {
        check(&MULTI_ACQUIRE_CASES, multi_acquire).unwrap();
    }

    #[test]
    fn multi_release_rows() {
        check(&MULTI_RELEASE_CASES, multi_release).unwrap();
    }

    #[test]
    fn multi_extend_rows() {
        check(&MULTI_EXTEND_CASES, multi_extend).unwrap();
    }
}
