//! The counting semaphore's scripts. `KEYS[1]` = R:permits (member = a holder's token,
//! score = its deadline in ms of the node's `TIME`), `KEYS[2]` = R:permits:limit (k, in
//! decimal, expiring with the set), `KEYS[3]` = R (only to name the release channel).
//!
//! A node counts at most k live holders; the quorum that makes k holders a global bound
//! (floor(kN/(k+1)) + 1 nodes) is the core's. Holders in place with another k make
//! SEM_ACQUIRE return the error `-PERMITS <k in place>`, which the core turns into an error
//! naming both numbers where a quorum says it.

use bytes::Bytes;

use super::case::State::{Absent, Deadlines, List, Str};
use super::case::{Case, Expect, State, Table};
use super::{
    PERMITS_ERROR_PREFIX, Steps, announce, expire_at_least, freed, node_now, number, prune, reply,
    zadd,
};
use crate::keyspace::Keys;
use crate::lua::arity_error;
use crate::resp::ServerReply;

/// SEM_ACQUIRE (`ARGV[1]` token, `ARGV[2]` ttl ms, `ARGV[3]` k), word for word from the lock kinds' design: the body the core sends
/// and the model was written from. Change both together (tests/kinds_scripts.rs pins its SHA1).
pub const SEM_ACQUIRE_SOURCE: &str = "local t = redis.call('TIME') local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now) local n = redis.call('ZCARD', KEYS[1]) local k = redis.call('GET', KEYS[2]) if n > 0 and k and k ~= ARGV[3] then return redis.error_reply('PERMITS ' .. k) end if n >= tonumber(ARGV[3]) then return 0 end redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1]) if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end redis.call('SET', KEYS[2], ARGV[3], 'PX', redis.call('PTTL', KEYS[1])) return 1";

/// SEM_RELEASE (`ARGV[1]` token), word for word from the lock kinds' design: the body the core sends
/// and the model was written from. Change both together (tests/kinds_scripts.rs pins its SHA1).
pub const SEM_RELEASE_SOURCE: &str = "local t = redis.call('TIME') local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now) if redis.call('ZREM', KEYS[1], ARGV[1]) == 0 then return -1 end local s = redis.pcall('PUBLISH', 'redlock:released:' .. KEYS[3], '') if type(s) == 'number' and s > 0 then return 2 end return 1";

/// SEM_EXTEND (`KEYS[1]` = R:permits, `KEYS[2]` = R:permits:limit; `ARGV[1]` token, `ARGV[2]` ttl ms), word for word from the lock kinds' design: the body the core sends
/// and the model was written from. Change both together (tests/kinds_scripts.rs pins its SHA1).
pub const SEM_EXTEND_SOURCE: &str = "local t = redis.call('TIME') local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now) if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[2]), ARGV[1]) if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end redis.call('PEXPIRE', KEYS[2], redis.call('PTTL', KEYS[1])) return 1";

/// The mutant SEM_ACQUIRE_OFF_BY_ONE (a negative control: k + 1 holders per node), word for word from the lock kinds' design: the body the core sends
/// and the model was written from. Change both together (tests/kinds_scripts.rs pins its SHA1).
pub const SEM_ACQUIRE_OFF_BY_ONE_SOURCE: &str = "local t = redis.call('TIME') local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now) local n = redis.call('ZCARD', KEYS[1]) local k = redis.call('GET', KEYS[2]) if n > 0 and k and k ~= ARGV[3] then return redis.error_reply('PERMITS ' .. k) end if n > tonumber(ARGV[3]) then return 0 end redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1]) if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end redis.call('SET', KEYS[2], ARGV[3], 'PX', redis.call('PTTL', KEYS[1])) return 1";

/// SEM_ACQUIRE: prunes expired holders; the error `PERMITS <k>` if live holders are in
/// place under another k; 0 if k are; else adds the token with deadline `now + ttl`, keeps
/// the set alive at least `ttl`, writes k to the limit key expiring with the set, and
/// answers 1.
pub fn sem_acquire(keys: &mut Keys<'_>, k: &[Bytes], argv: &[Bytes]) -> ServerReply {
    reply(acquire_steps(keys, k, argv, false))
}

/// The model of [`SEM_ACQUIRE_OFF_BY_ONE_SOURCE`]: [`sem_acquire`] that refuses only
/// beyond k + 1 holders (`n > k`).
pub fn sem_acquire_off_by_one(keys: &mut Keys<'_>, k: &[Bytes], argv: &[Bytes]) -> ServerReply {
    reply(acquire_steps(keys, k, argv, true))
}

/// SEM_ACQUIRE, or (`off_by_one`) its mutant.
fn acquire_steps(keys: &mut Keys<'_>, k: &[Bytes], argv: &[Bytes], off_by_one: bool) -> Steps {
    let ([permits, limit, ..], [token, ttl, permits_k, ..]) = (k, argv) else {
        return Err(arity_error());
    };
    let now = node_now(keys)?;
    prune(keys, permits, now)?;
    let n = keys.zcard(permits)?;
    // `k ~= ARGV[3]` compares the strings, not the numbers.
    if let Some(in_place) = keys
        .get(limit)?
        .filter(|in_place| n > 0 && in_place != permits_k)
    {
        let in_place = String::from_utf8_lossy(&in_place);
        return Err(ServerReply::error(format!(
            "{PERMITS_ERROR_PREFIX}{in_place}"
        )));
    }
    let (n, most) = (n as f64, number(permits_k)?);
    if if off_by_one { n > most } else { n >= most } {
        return Ok(ServerReply::Int(0));
    }
    zadd(keys, permits, token, (now as f64 + number(ttl)?, false))?;
    expire_at_least(keys, permits, ttl)?;
    // `SET limit k PX <PTTL of the set>`: an integer PX above zero.
    let px = keys.pttl_reply(permits);
    let Some(px) = u64::try_from(px).ok().filter(|&ms| ms > 0) else {
        return Err(ServerReply::error(
            "ERR invalid expire time in 'set' command",
        ));
    };
    keys.set(
        limit,
        permits_k.clone(),
        Some(std::time::Duration::from_millis(px)),
    );
    Ok(ServerReply::Int(1))
}

/// SEM_RELEASE: prunes expired holders; -1 if the token holds no live permit; else removes
/// it, announces on R's channel and answers 1 (2 if heard). The limit key stays, expiring
/// as it was.
pub fn sem_release(keys: &mut Keys<'_>, k: &[Bytes], argv: &[Bytes]) -> ServerReply {
    reply(release_steps(keys, k, argv))
}

/// The steps of SEM_RELEASE.
fn release_steps(keys: &mut Keys<'_>, k: &[Bytes], argv: &[Bytes]) -> Steps {
    let ([permits, _, r, ..], [token, ..]) = (k, argv) else {
        return Err(arity_error());
    };
    let now = node_now(keys)?;
    prune(keys, permits, now)?;
    if !keys.zrem(permits, token)? {
        return Ok(ServerReply::Int(-1));
    }
    Ok(freed(announce(keys, r)))
}

/// SEM_EXTEND: prunes expired holders; 0 if the token holds no live permit (an expired one
/// is never re-created); else moves its deadline to `now + ttl`, keeps the set alive at
/// least `ttl`, sets the limit key's expiry to the set's, and answers 1.
pub fn sem_extend(keys: &mut Keys<'_>, k: &[Bytes], argv: &[Bytes]) -> ServerReply {
    reply(extend_steps(keys, k, argv))
}

/// The steps of SEM_EXTEND.
fn extend_steps(keys: &mut Keys<'_>, k: &[Bytes], argv: &[Bytes]) -> Steps {
    let ([permits, limit, ..], [token, ttl, ..]) = (k, argv) else {
        return Err(arity_error());
    };
    let now = node_now(keys)?;
    prune(keys, permits, now)?;
    if keys.zscore(permits, token)?.is_none() {
        return Ok(ServerReply::Int(0));
    }
    zadd(keys, permits, token, (now as f64 + number(ttl)?, true))?;
    expire_at_least(keys, permits, ttl)?;
    // `PEXPIRE limit <PTTL of the set>`: a value at or below zero deletes the key.
    let px = u64::try_from(keys.pttl_reply(permits)).unwrap_or(0);
    keys.pexpire(limit, std::time::Duration::from_millis(px));
    Ok(ServerReply::Int(1))
}

/// The keys of a semaphore on `r`.
const SEM_KEYS: &[&str] = &["r:permits", "r:permits:limit", "r"];
/// Token `t`, ttl 100 ms, k = 2.
const T100_K2: &[&str] = &["t", "100", "2"];
/// k = 2, expiring in `ms`.
const fn k2(ms: u64) -> State {
    Str("2", Some(ms))
}

/// SEM_ACQUIRE on `r` by token `t` for 100 ms with k = 2.
pub const SEM_ACQUIRE_CASES: Table = Table {
    source: SEM_ACQUIRE_SOURCE,
    keys: SEM_KEYS,
    cases: &[
        Case::new(
            "free",
            (&[Absent, Absent, Absent], T100_K2),
            Expect::Int(1),
            &[Deadlines(&[("t", 100)], Some(100)), k2(100), Absent],
        ),
        Case::new(
            "one of two taken",
            (
                &[Deadlines(&[("u", 50)], Some(50)), k2(50), Absent],
                T100_K2,
            ),
            Expect::Int(1),
            &[
                Deadlines(&[("u", 50), ("t", 100)], Some(100)),
                k2(100),
                Absent,
            ],
        ),
        Case::new(
            "two of two taken",
            (
                &[Deadlines(&[("u", 50), ("v", 60)], Some(60)), k2(60), Absent],
                T100_K2,
            ),
            Expect::Int(0),
            &[Deadlines(&[("u", 50), ("v", 60)], Some(60)), k2(60), Absent],
        ),
        Case::new(
            "an expired holder is not counted",
            (
                &[Deadlines(&[("u", 0), ("v", 60)], Some(60)), k2(60), Absent],
                T100_K2,
            ),
            Expect::Int(1),
            &[
                Deadlines(&[("v", 60), ("t", 100)], Some(100)),
                k2(100),
                Absent,
            ],
        ),
        Case::new(
            "holders under another k",
            (
                &[
                    Deadlines(&[("u", 50)], Some(50)),
                    Str("3", Some(50)),
                    Absent,
                ],
                T100_K2,
            ),
            Expect::Error("PERMITS 3"),
            &[
                Deadlines(&[("u", 50)], Some(50)),
                Str("3", Some(50)),
                Absent,
            ],
        ),
        Case::new(
            "another k, no live holder: ours replaces it",
            (
                &[
                    Deadlines(&[("u", -5)], Some(50)),
                    Str("3", Some(50)),
                    Absent,
                ],
                T100_K2,
            ),
            Expect::Int(1),
            &[Deadlines(&[("t", 100)], Some(100)), k2(100), Absent],
        ),
        Case::new(
            "a live holder without a limit key",
            (
                &[Deadlines(&[("u", 50)], Some(50)), Absent, Absent],
                T100_K2,
            ),
            Expect::Int(1),
            &[
                Deadlines(&[("u", 50), ("t", 100)], Some(100)),
                k2(100),
                Absent,
            ],
        ),
        Case::new(
            "a longer set: the limit follows it",
            (
                &[Deadlines(&[("u", 400)], Some(500)), k2(500), Absent],
                T100_K2,
            ),
            Expect::Int(1),
            &[
                Deadlines(&[("u", 400), ("t", 100)], Some(500)),
                k2(500),
                Absent,
            ],
        ),
        Case::new(
            "permits of the wrong type",
            (&[Str("x", None), Absent, Absent], T100_K2),
            Expect::Error("WRONGTYPE"),
            &[Str("x", None), Absent, Absent],
        ),
        Case::new(
            "a limit of the wrong type",
            (&[Absent, List, Absent], T100_K2),
            Expect::Error("WRONGTYPE"),
            &[Absent, List, Absent],
        ),
    ],
};

/// SEM_ACQUIRE_OFF_BY_ONE where it differs from SEM_ACQUIRE.
pub const SEM_ACQUIRE_OFF_BY_ONE_CASES: Table = Table {
    source: SEM_ACQUIRE_OFF_BY_ONE_SOURCE,
    keys: SEM_KEYS,
    cases: &[Case::new(
        "a third of two",
        (
            &[Deadlines(&[("u", 50), ("v", 60)], Some(60)), k2(60), Absent],
            T100_K2,
        ),
        Expect::Int(1),
        &[
            Deadlines(&[("u", 50), ("v", 60), ("t", 100)], Some(100)),
            k2(100),
            Absent,
        ],
    )],
};

/// SEM_RELEASE of `r` by token `t`.
pub const SEM_RELEASE_CASES: Table = Table {
    source: SEM_RELEASE_SOURCE,
    keys: SEM_KEYS,
    cases: &[
        Case::new(
            "the only holder: the limit stays",
            (&[Deadlines(&[("t", 50)], Some(50)), k2(50), Absent], &["t"]),
            Expect::Int(1),
            &[Absent, k2(50), Absent],
        )
        .publishing(&["r"]),
        Case::new(
            "a waiter heard",
            (&[Deadlines(&[("t", 50)], Some(50)), k2(50), Absent], &["t"]),
            Expect::Int(2),
            &[Absent, k2(50), Absent],
        )
        .publishing(&["r"])
        .heard(&["r"]),
        Case::new(
            "another holder stays: still announced",
            (
                &[Deadlines(&[("t", 50), ("u", 60)], Some(60)), k2(60), Absent],
                &["t"],
            ),
            Expect::Int(1),
            &[Deadlines(&[("u", 60)], Some(60)), k2(60), Absent],
        )
        .publishing(&["r"]),
        Case::new(
            "not a holder",
            (&[Deadlines(&[("u", 60)], Some(60)), k2(60), Absent], &["t"]),
            Expect::Int(-1),
            &[Deadlines(&[("u", 60)], Some(60)), k2(60), Absent],
        ),
        Case::new(
            "our permit expired",
            (
                &[Deadlines(&[("t", 0), ("u", 60)], Some(60)), k2(60), Absent],
                &["t"],
            ),
            Expect::Int(-1),
            &[Deadlines(&[("u", 60)], Some(60)), k2(60), Absent],
        ),
        Case::new(
            "wrong type",
            (&[Str("x", None), Absent, Absent], &["t"]),
            Expect::Error("WRONGTYPE"),
            &[Str("x", None), Absent, Absent],
        ),
    ],
};

/// SEM_EXTEND of `r` by token `t` to 300 ms.
pub const SEM_EXTEND_CASES: Table = Table {
    source: SEM_EXTEND_SOURCE,
    keys: &["r:permits", "r:permits:limit"],
    cases: &[
        Case::new(
            "ours",
            (&[Deadlines(&[("t", 50)], Some(50)), k2(50)], &["t", "300"]),
            Expect::Int(1),
            &[Deadlines(&[("t", 300)], Some(300)), k2(300)],
        ),
        Case::new(
            "ours, the set lives longer",
            (
                &[Deadlines(&[("t", 50), ("u", 450)], Some(500)), k2(500)],
                &["t", "300"],
            ),
            Expect::Int(1),
            &[Deadlines(&[("t", 300), ("u", 450)], Some(500)), k2(500)],
        ),
        Case::new(
            "ours expired: not re-created",
            (
                &[Deadlines(&[("t", 0), ("u", 60)], Some(60)), k2(60)],
                &["t", "300"],
            ),
            Expect::Int(0),
            &[Deadlines(&[("u", 60)], Some(60)), k2(60)],
        ),
        Case::new(
            "no holders",
            (&[Absent, Absent], &["t", "300"]),
            Expect::Int(0),
            &[Absent, Absent],
        ),
        Case::new(
            "ours, the limit key gone: not re-created",
            (&[Deadlines(&[("t", 50)], Some(50)), Absent], &["t", "300"]),
            Expect::Int(1),
            &[Deadlines(&[("t", 300)], Some(300)), Absent],
        ),
        Case::new(
            "wrong type",
            (&[Str("x", None), Absent], &["t", "300"]),
            Expect::Error("WRONGTYPE"),
            &[Str("x", None), Absent],
        ),
    ],
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::case::check;

    #[test]
    fn sem_acquire_rows() {
        check(&SEM_ACQUIRE_CASES, sem_acquire).unwrap();
        check(&SEM_ACQUIRE_OFF_BY_ONE_CASES, sem_acquire_off_by_one).unwrap();
        let differs = check(&SEM_ACQUIRE_OFF_BY_ONE_CASES, sem_acquire);
        assert!(differs.is_err(), "the mutant's row is not the script's");
    }

    #[test]
    fn sem_release_rows() {
        check(&SEM_RELEASE_CASES, sem_release).unwrap();
    }

    #[test]
    fn sem_extend_rows() {
        check(&SEM_EXTEND_CASES, sem_extend).unwrap();
    }
}
