//! The Lua scripts of the lock kinds beyond the mutex (docs/kinds.md, "Scripts"), exactly
//! as the design gives them: the simulation registers its models under these bodies and the
//! contract table runs them on real servers. Each is sent as `EVALSHA` of its SHA1 and as
//! `EVAL` after `-NOSCRIPT` (algorithm.md §12); command.rs's tests check each SHA1. Scripts that keep a deadline read the node's
//! own clock (`TIME`), the clock `PX` uses there (docs/kinds.md, "Node time").

use crate::script::Script;

/// All or none (`KEYS` = the sorted, deduplicated resources; `ARGV[1]` token, `ARGV[2]`
/// ttl ms): 1 if every key was free and is now ours, 0 (nothing set) if any key exists.
pub const MULTI_ACQUIRE_SCRIPT: Script = Script {
    body: "for i = 1, #KEYS do if redis.call('EXISTS', KEYS[i]) == 1 then return 0 end end for i = 1, #KEYS do redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2]) end return 1",
    sha1: "dc07deb80cfd3448180030e6296446cfc2fdfe04",
};

/// Deletes each key of the set that holds our token (`ARGV[1]`) and announces each on its
/// release channel: 1 if any was ours (2 if a subscriber heard), 0 if none was ours but some
/// key holds another token, -1 if every key was missing.
pub const MULTI_RELEASE_SCRIPT: Script = Script {
    body: "local n = 0 local heard = false local other = false for i = 1, #KEYS do local v = redis.call('GET', KEYS[i]) if v == ARGV[1] then redis.call('DEL', KEYS[i]) n = n + 1 local s = redis.pcall('PUBLISH', 'redlock:released:' .. KEYS[i], '') if type(s) == 'number' and s > 0 then heard = true end elseif v then other = true end end if n > 0 then if heard then return 2 end return 1 elseif other then return 0 else return -1 end",
    sha1: "6ef052ea23ac6e17fe9814b09b580fe545fb4c43",
};

/// All keys ours, or nothing changes (`ARGV[1]` token, `ARGV[2]` ttl ms): 1 if every key's
/// ttl was reset, 0 otherwise. It never creates a missing key.
pub const MULTI_EXTEND_SCRIPT: Script = Script {
    body: "for i = 1, #KEYS do if redis.call('GET', KEYS[i]) ~= ARGV[1] then return 0 end end for i = 1, #KEYS do redis.call('PEXPIRE', KEYS[i], ARGV[2]) end return 1",
    sha1: "56159681025295dcd63df963c495694f593a40ce",
};

/// A reader's slot (`KEYS` = R, R:readers, R:writer-waiting; `ARGV[1]` token, `ARGV[2]` ttl
/// ms): prunes expired readers at the node's `TIME`; 0 if a writer holds R or waits
/// (R:writer-waiting), else adds the slot with its deadline and returns 1.
pub const READ_ACQUIRE_SCRIPT: Script = Script {
    body: "local t = redis.call('TIME') local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now) if redis.call('EXISTS', KEYS[1]) == 1 or redis.call('EXISTS', KEYS[3]) == 1 then return 0 end redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), ARGV[1]) if redis.call('PTTL', KEYS[2]) < tonumber(ARGV[2]) then redis.call('PEXPIRE', KEYS[2], ARGV[2]) end return 1",
    sha1: "c6828516496aeb2aaff6faff4aee5f987af2a21b",
};

/// A writer (`KEYS` = R, R:readers, R:writer-waiting; `ARGV[1]` token, `ARGV[2]` ttl ms,
/// `ARGV[3]` patience ms, 0 = none): 1 and R set (the waiting mark deleted) if R is free and
/// no live reader remains; else 0, leaving R:writer-waiting = token for the patience, so no
/// new reader gets in while the writer retries.
pub const WRITE_ACQUIRE_SCRIPT: Script = Script {
    body: "local t = redis.call('TIME') local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now) if redis.call('EXISTS', KEYS[1]) == 0 and redis.call('ZCARD', KEYS[2]) == 0 then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) redis.call('DEL', KEYS[3]) return 1 end if tonumber(ARGV[3]) > 0 then redis.call('SET', KEYS[3], ARGV[1], 'PX', ARGV[3]) end return 0",
    sha1: "6e29c1230d98787635fb1a5cf272559eb221803f",
};

/// A writer that gives up deletes its waiting mark (`KEYS[1]` = R:writer-waiting, `ARGV[1]`
/// token): 1 if the mark was ours, 0 otherwise.
pub const WRITE_ABANDON_SCRIPT: Script = Script {
    body: "if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) return 1 end return 0",
    sha1: "e212a91aa9756e471f2c4b7c088d396d70748b11",
};

/// Releases a held writer (`KEYS` = R, R:readers, R:writer-waiting; `ARGV[1]` token): as
/// the mutex's release on R (1, or 2 if a subscriber heard its announcement; 0 if R holds
/// another value, -1 if it is gone), and deletes R:writer-waiting if it holds the token: the
/// mark the writer left where a node refused its granted attempt (docs/kinds.md,
/// "Reader-writer lock"). A mark of another type is left alone (`pcall`).
pub const WRITE_RELEASE_SCRIPT: Script = Script {
    body: "local v = redis.call('GET', KEYS[1]) local r = 0 if v == ARGV[1] then redis.call('DEL', KEYS[1]) r = 1 local n = redis.pcall('PUBLISH', 'redlock:released:' .. KEYS[1], '') if type(n) == 'number' and n > 0 then r = 2 end elseif v == false then r = -1 end if redis.pcall('GET', KEYS[3]) == ARGV[1] then redis.call('DEL', KEYS[3]) end return r",
    sha1: "5a869c2fb819934263bd828a9ca749afea8ddca2",
};

/// Frees a reader's slot (`KEYS` = R, R:readers, R:writer-waiting; `ARGV[1]` token): -1 if
/// the slot is gone (expired or never set), else 1; when the last reader leaves it announces
/// the release on R's channel and answers 2 if a subscriber heard.
pub const READ_RELEASE_SCRIPT: Script = Script {
    body: "local t = redis.call('TIME') local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now) if redis.call('ZREM', KEYS[2], ARGV[1]) == 0 then return -1 end if redis.call('ZCARD', KEYS[2]) == 0 then local s = redis.pcall('PUBLISH', 'redlock:released:' .. KEYS[1], '') if type(s) == 'number' and s > 0 then return 2 end end return 1",
    sha1: "445e27ac61f3e2dd5b8c2e4d863f1d16b12be140",
};

/// Moves a reader's deadline (`KEYS[1]` = R:readers; `ARGV[1]` token, `ARGV[2]` ttl ms): 1
/// if the slot was live, 0 otherwise. It never re-creates an expired slot (`ZADD XX` after
/// the prune).
pub const READ_EXTEND_SCRIPT: Script = Script {
    body: "local t = redis.call('TIME') local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now) if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[2]), ARGV[1]) if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 1",
    sha1: "1ce34b6bde9b739bdb4e8ebad47f8d7f476ba221",
};

/// A permit (`KEYS` = R:permits, R:permits:limit, R; `ARGV[1]` token, `ARGV[2]` ttl ms,
/// `ARGV[3]` k): the error `-PERMITS <k in place>` if live holders agreed on another k, 0
/// if k live holders are there, else 1 with the slot added and the limit kept alive with
/// the set.
pub const SEM_ACQUIRE_SCRIPT: Script = Script {
    body: "local t = redis.call('TIME') local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now) local n = redis.call('ZCARD', KEYS[1]) local k = redis.call('GET', KEYS[2]) if n > 0 and k and k ~= ARGV[3] then return redis.error_reply('PERMITS ' .. k) end if n >= tonumber(ARGV[3]) then return 0 end redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1]) if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end redis.call('SET', KEYS[2], ARGV[3], 'PX', redis.call('PTTL', KEYS[1])) return 1",
    sha1: "733158110e8faa37adcdbff159f8796dfc5f4ca0",
};

/// Frees a permit (`KEYS` = R:permits, R:permits:limit, R; `ARGV[1]` token) and announces it
/// on R's channel: -1 if the slot is gone, else 1 (2 if a subscriber heard).
pub const SEM_RELEASE_SCRIPT: Script = Script {
    body: "local t = redis.call('TIME') local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now) if redis.call('ZREM', KEYS[1], ARGV[1]) == 0 then return -1 end local s = redis.pcall('PUBLISH', 'redlock:released:' .. KEYS[3], '') if type(s) == 'number' and s > 0 then return 2 end return 1",
    sha1: "20a51b377419d9d5c2be03a16f76f6d021b89533",
};

/// Moves a permit's deadline (`KEYS` = R:permits, R:permits:limit; `ARGV[1]` token, `ARGV[2]`
/// ttl ms): READ_EXTEND's rule, and the limit key kept alive with the set.
pub const SEM_EXTEND_SCRIPT: Script = Script {
    body: "local t = redis.call('TIME') local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now) if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[2]), ARGV[1]) if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end redis.call('PEXPIRE', KEYS[2], redis.call('PTTL', KEYS[1])) return 1",
    sha1: "b3a4cd9bb9d5321973bf23ba70c08ed02e651c2b",
};

/// READ_EXTEND that re-creates a pruned (expired) reader slot, for the simulation's
/// negative control only.
#[cfg(feature = "_mutants")]
#[doc(hidden)]
pub const READ_EXTEND_RESURRECTS_SCRIPT: Script = Script {
    body: "local t = redis.call('TIME') local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1]) if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 1",
    sha1: "b93a1f11d669bbc5760a8b551aa98e9c42a7984b",
};

/// SEM_ACQUIRE with `n > k` for `n >= k` (k + 1 holders per node), for the simulation's
/// negative control only.
#[cfg(feature = "_mutants")]
#[doc(hidden)]
pub const SEM_ACQUIRE_OFF_BY_ONE_SCRIPT: Script = Script {
    body: "local t = redis.call('TIME') local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now) local n = redis.call('ZCARD', KEYS[1]) local k = redis.call('GET', KEYS[2]) if n > 0 and k and k ~= ARGV[3] then return redis.error_reply('PERMITS ' .. k) end if n > tonumber(ARGV[3]) then return 0 end redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1]) if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end redis.call('SET', KEYS[2], ARGV[3], 'PX', redis.call('PTTL', KEYS[1])) return 1",
    sha1: "fd0d8a50070b58678fd9a86bfac66e85df120b32",
};

/// WRITE_ACQUIRE that checks only R (a writer let in with live readers), for the
/// simulation's negative control only.
#[cfg(feature = "_mutants")]
#[doc(hidden)]
pub const WRITE_ACQUIRE_IGNORES_READERS_SCRIPT: Script = Script {
    body: "local t = redis.call('TIME') local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now) if redis.call('EXISTS', KEYS[1]) == 0 then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) redis.call('DEL', KEYS[3]) return 1 end if tonumber(ARGV[3]) > 0 then redis.call('SET', KEYS[3], ARGV[1], 'PX', ARGV[3]) end return 0",
    sha1: "db1c692439a0108d608e4253fedb49359833e985",
};

/// Every normative script of the kinds (docs/kinds.md, "Scripts"), as a node that lost one
/// loads them again (session/mod.rs, `Session::reload_scripts`).
pub(crate) const KIND_SCRIPTS: [&Script; 12] = [
    &MULTI_ACQUIRE_SCRIPT,
    &MULTI_RELEASE_SCRIPT,
    &MULTI_EXTEND_SCRIPT,
    &READ_ACQUIRE_SCRIPT,
    &WRITE_ACQUIRE_SCRIPT,
    &WRITE_ABANDON_SCRIPT,
    &WRITE_RELEASE_SCRIPT,
    &READ_RELEASE_SCRIPT,
    &READ_EXTEND_SCRIPT,
    &SEM_ACQUIRE_SCRIPT,
    &SEM_RELEASE_SCRIPT,
    &SEM_EXTEND_SCRIPT,
];
