//! Native stand-ins for the Lua scripts the core sends, keyed by the SHA1 of the source they
//! model, and the registry nodes look them up in.
//!
//! A simulated node runs no Lua: [`Scripts`] maps each known body, and the SHA1 it computes
//! from that body, to a Rust function with the same effect. Each model carries the exact
//! source it was written from ([`RELEASE_SOURCE`], [`EXTEND_SOURCE`]), not the core's
//! constant: if the core ever sends another body (an extend script without its token check,
//! say), no model answers to it, and the node replies `-NOSCRIPT` and then an error instead of
//! running the old meaning silently. Tests may register more (e.g. a deliberately wrong
//! script); the per-node cache that makes `EVALSHA` answer `-NOSCRIPT` lives in the node.

use bytes::Bytes;
use sha1::{Digest, Sha1};
use std::fmt::Write as _;

use crate::keyspace::Keys;
pub use crate::lua::{RELEASE_CHANNEL_PREFIX, ScriptFn, millis_arg, release_channel};
use crate::lua::{TIME_DENIED_IN_SCRIPT, arity_error, lua_tonumber, release, set_px_arg};
use crate::resp::ServerReply;

/// The scripts nodes can run, each under its body and its SHA1.
#[derive(Debug, Clone)]
pub struct Scripts {
    entries: Vec<NativeScript>,
}

/// One script: its source (to recognise `EVAL`), its SHA1 (`EVALSHA`) and its effect.
#[derive(Debug, Clone)]
pub struct NativeScript {
    /// The Lua source the client sends with `EVAL`.
    pub body: &'static str,
    /// Lowercase hex SHA1 of `body`, computed here as the server computes it.
    pub sha1: String,
    /// What running it does.
    pub run: ScriptFn,
}

impl Default for Scripts {
    /// The models of the release, extend and fencing scripts, under the sources they were
    /// written from (which a test checks are `redlock-core`'s), and of the lock kinds'
    /// scripts (`kinds`).
    fn default() -> Self {
        let mut scripts = Self {
            entries: Vec::new(),
        };
        scripts.register(RELEASE_SOURCE, release);
        scripts.register(EXTEND_SOURCE, extend);
        scripts.register(FENCED_ACQUIRE_SOURCE, fenced_acquire);
        scripts.register(RAISE_FENCE_SOURCE, raise_fence);
        scripts.register_all(crate::kinds::MODELS);
        scripts
    }
}

impl Scripts {
    /// Adds (or replaces) the model `run` of the script whose source is exactly `body`,
    /// under `body` and its SHA1.
    pub fn register(&mut self, body: &'static str, run: ScriptFn) {
        let sha1 = sha1_hex(body);
        self.entries.retain(|e| e.sha1 != sha1);
        self.entries.push(NativeScript { body, sha1, run });
    }

    /// Adds (or replaces) each `(body, model)` of `models`, as [`register`](Self::register).
    pub fn register_all(&mut self, models: &[(&'static str, ScriptFn)]) {
        for &(body, run) in models {
            self.register(body, run);
        }
    }

    /// The script with this SHA1 (case-insensitive, as Redis).
    pub fn by_sha(&self, sha1: &[u8]) -> Option<&NativeScript> {
        self.entries
            .iter()
            .find(|e| e.sha1.as_bytes().eq_ignore_ascii_case(sha1))
    }

    /// The script with exactly this source.
    pub fn by_body(&self, body: &[u8]) -> Option<&NativeScript> {
        self.entries.iter().find(|e| e.body.as_bytes() == body)
    }

    /// Every registered SHA1.
    pub fn shas(&self) -> impl Iterator<Item = &str> + '_ {
        self.entries.iter().map(|e| e.sha1.as_str())
    }
}

/// The lowercase hex SHA1 of a script's source: the name `EVALSHA` and `SCRIPT LOAD` use.
pub fn sha1_hex(body: &str) -> String {
    let mut hex = String::with_capacity(40);
    for byte in Sha1::digest(body.as_bytes()) {
        // Writing to a String cannot fail.
        let _ = write!(hex, "{byte:02x}");
    }
    hex
}

/// The source the release model (`release` here) was written from, word for word: `redlock-core`'s
/// `RELEASE_SCRIPT.body` when the model was written. Change both together.
pub const RELEASE_SOURCE: &str = "local v = redis.call('GET', KEYS[1]) if v == ARGV[1] then redis.call('DEL', KEYS[1]) local n = redis.pcall('PUBLISH', 'redlock:released:' .. KEYS[1], '') if type(n) == 'number' and n > 0 then return 2 end return 1 elseif v == false then return -1 else return 0 end";

/// The source the extend model (`extend` here) was written from, word for word: `redlock-core`'s
/// `EXTEND_SCRIPT.body` when the model was written. Change both together.
pub const EXTEND_SOURCE: &str = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end";

/// The source the fenced acquire model (`fenced_acquire` here) was written from, word for
/// word: `redlock-core`'s `FENCED_ACQUIRE_SCRIPT.body`. Change both together.
pub const FENCED_ACQUIRE_SOURCE: &str = "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then local floor = tonumber(redis.call('TIME')[1]) * 1048576 local n = tonumber(redis.call('ZSCORE', KEYS[2], 'n')) if n == nil or n < floor then redis.call('ZADD', KEYS[2], floor, 'n') end return tonumber(redis.call('ZINCRBY', KEYS[2], 1, 'n')) else return false end";

/// The source the fence write-back model (`raise_fence` here) was written from, word for
/// word: `redlock-core`'s `RAISE_FENCE_SCRIPT.body`. Change both together.
pub const RAISE_FENCE_SOURCE: &str = "if redis.call('GET', KEYS[1]) == ARGV[1] then local n = tonumber(redis.call('ZSCORE', KEYS[2], 'n')) if n == nil or n < tonumber(ARGV[2]) then redis.call('ZADD', KEYS[2], ARGV[2], 'n') end return 1 else return 0 end";

/// The source the no-floor mutant's model (`fenced_acquire_with(.., false)` here) was written
/// from, word for word: `redlock-core`'s `NO_FLOOR_FENCED_ACQUIRE_SCRIPT.body` (a negative
/// control behind its `_mutants` feature). Change both together.
pub const NO_FLOOR_FENCED_ACQUIRE_SOURCE: &str = "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return tonumber(redis.call('ZINCRBY', KEYS[2], 1, 'n')) else return false end";

/// The fencing floor's unit: a second of the node's wall clock is worth 2^20 counts.
pub const FENCE_FLOOR_PER_SECOND: u64 = 1 << 20;

/// The one member of the fencing counter's sorted set F, whose score is the count.
pub const FENCE_MEMBER: &[u8] = b"n";

/// `FENCED_ACQUIRE_SCRIPT`: `SET K token NX PX ttl`; if it set K, member `n` of the sorted
/// set F is raised to the floor (the node's wall seconds * 2^20) if missing or below it, then
/// incremented, and its new score is returned: `max(F, floor) + 1`. Else nil.
pub fn fenced_acquire(keys: &mut Keys<'_>, k: &[Bytes], argv: &[Bytes]) -> ServerReply {
    fenced_acquire_with(keys, k, argv, true)
}

/// The fenced acquire with or without its floor (`floor == false` is the model of
/// [`NO_FLOOR_FENCED_ACQUIRE_SOURCE`], a negative control: a counter that an empty restart
/// sends back to 1).
pub fn fenced_acquire_with(
    keys: &mut Keys<'_>,
    k: &[Bytes],
    argv: &[Bytes],
    floor: bool,
) -> ServerReply {
    let ([key, fence, ..], [token, ttl, ..]) = (k, argv) else {
        return arity_error();
    };
    let ttl = match set_px_arg(ttl) {
        Ok(ttl) => ttl,
        Err(e) => return e,
    };
    // `SET NX` sees a key of any type.
    if keys.exists(key) {
        return ServerReply::Nil;
    }
    keys.set(key, token.clone(), Some(ttl));
    // From here on the key is set: an error below ends the script with K written, as a real
    // server leaves it (a script's writes are not rolled back).
    let member = Bytes::from_static(FENCE_MEMBER);
    if floor {
        let Ok((secs, _)) = keys.time() else {
            // An ACL that denies `TIME` denies it inside the script, after K was set.
            return ServerReply::error(TIME_DENIED_IN_SCRIPT);
        };
        let floor = (secs * FENCE_FLOOR_PER_SECOND) as f64;
        // `ZSCORE`, then `ZADD F floor n` when `n` is missing or below the floor.
        let raised = keys.zset_update(fence, &member, |n| {
            n.is_none_or(|n| n < floor).then_some(floor)
        });
        if let Err(e) = raised {
            return e.into();
        }
    }
    // `ZINCRBY F 1 n`; Lua's `tonumber` of its reply, returned as an integer (truncated).
    match keys.zset_update(fence, &member, |n| Some(n.unwrap_or(0.0) + 1.0)) {
        Ok(n) => ServerReply::Int((n.unwrap_or(0.0) + 1.0) as i64),
        Err(e) => e.into(),
    }
}

/// `RAISE_FENCE_SCRIPT`: while K holds our token, raises member `n` of F to `ARGV[2]` if it
/// is missing or below, and answers 1; else 0.
fn raise_fence(keys: &mut Keys<'_>, k: &[Bytes], argv: &[Bytes]) -> ServerReply {
    let ([key, fence, ..], [token, value, ..]) = (k, argv) else {
        return arity_error();
    };
    match keys.get(key) {
        Ok(Some(v)) if v == token => {}
        Ok(_) => return ServerReply::Int(0),
        Err(e) => return e.into(),
    }
    let member = Bytes::from_static(FENCE_MEMBER);
    let counter = match keys.zscore(fence, &member) {
        Ok(n) => n,
        Err(e) => return e.into(),
    };
    // `n == nil or n < tonumber(ARGV[2])`: Lua compares only when `n` exists; `ZADD` then
    // reads `ARGV[2]` as a score itself.
    let target = lua_tonumber(value);
    let raise = match (counter, target) {
        (None, _) => true,
        (Some(n), Some(t)) => n < t,
        (Some(_), None) => {
            return ServerReply::error("ERR user_script:1: attempt to compare number with nil");
        }
    };
    if raise {
        let Some(score) = crate::sorted::parse_score(value) else {
            return ServerReply::error("ERR value is not a valid float");
        };
        if let Err(e) = keys.zset_update(fence, &member, |_| Some(score)) {
            return e.into();
        }
    }
    ServerReply::Int(1)
}

/// `EXTEND_SCRIPT`: 1 if our key's ttl was reset, 0 otherwise; never creates a key.
fn extend(keys: &mut Keys<'_>, k: &[Bytes], argv: &[Bytes]) -> ServerReply {
    let (Some(key), Some(token), Some(ttl)) = (k.first(), argv.first(), argv.get(1)) else {
        return arity_error();
    };
    let ttl = match millis_arg(ttl) {
        Ok(ttl) => ttl,
        Err(e) => return e,
    };
    match keys.get(key) {
        Ok(Some(v)) if v == token => ServerReply::Int(i64::from(keys.pexpire(key, ttl))),
        Ok(_) => ServerReply::Int(0),
        Err(e) => e.into(),
    }
}

#[cfg(test)]
mod tests {
    use redlock_core::{
        EXTEND_SCRIPT, FENCED_ACQUIRE_SCRIPT, NO_FLOOR_FENCED_ACQUIRE_SCRIPT, RAISE_FENCE_SCRIPT,
        RELEASE_SCRIPT,
    };

    use std::time::Duration;

    use super::*;
    use crate::keyspace::{Keyspace, WALL_EPOCH_NANOS};

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    /// The tripwire: a change to a script the core sends fails here first, by name, and then
    /// every simulation that releases or extends (their nodes no longer know the body).
    #[test]
    fn the_models_were_written_from_the_scripts_the_core_sends() {
        assert_eq!(
            RELEASE_SCRIPT.body, RELEASE_SOURCE,
            "the core's release script changed: re-read it, then update `release` and \
             RELEASE_SOURCE together"
        );
        assert_eq!(
            EXTEND_SCRIPT.body, EXTEND_SOURCE,
            "the core's extend script changed: re-read it, then update `extend` and \
             EXTEND_SOURCE together"
        );
        assert_eq!(
            FENCED_ACQUIRE_SCRIPT.body, FENCED_ACQUIRE_SOURCE,
            "the core's fenced acquire script changed: re-read it, then update \
             `fenced_acquire` and FENCED_ACQUIRE_SOURCE together"
        );
        assert_eq!(
            RAISE_FENCE_SCRIPT.body, RAISE_FENCE_SOURCE,
            "the core's fence write-back script changed: re-read it, then update \
             `raise_fence` and RAISE_FENCE_SOURCE together"
        );
        assert_eq!(
            NO_FLOOR_FENCED_ACQUIRE_SCRIPT.body, NO_FLOOR_FENCED_ACQUIRE_SOURCE,
            "the core's no-floor mutant changed: re-read it, then update \
             `fenced_acquire_with` and NO_FLOOR_FENCED_ACQUIRE_SOURCE together"
        );
        assert_eq!(
            sha1_hex(NO_FLOOR_FENCED_ACQUIRE_SCRIPT.body),
            NO_FLOOR_FENCED_ACQUIRE_SCRIPT.sha1
        );
        let scripts = Scripts::default();
        let all = [
            &RELEASE_SCRIPT,
            &EXTEND_SCRIPT,
            &FENCED_ACQUIRE_SCRIPT,
            &RAISE_FENCE_SCRIPT,
        ];
        for script in all {
            let model = scripts
                .by_sha(script.sha1.as_bytes())
                .expect("keyed by SHA1");
            assert_eq!(model.body, script.body);
            assert_eq!(model.sha1, sha1_hex(script.body));
        }
    }

    #[test]
    fn a_body_the_models_were_not_written_from_is_unknown() {
        let scripts = Scripts::default();
        let unchecked = "return redis.call('PEXPIRE', KEYS[1], ARGV[2])";
        assert!(scripts.by_body(unchecked.as_bytes()).is_none());
        assert!(scripts.by_sha(sha1_hex(unchecked).as_bytes()).is_none());
        // One byte off is another script.
        let spaced = format!("{EXTEND_SOURCE} ");
        assert!(scripts.by_body(spaced.as_bytes()).is_none());
    }

    #[test]
    fn release_and_extend_compare_tokens() {
        let scripts = Scripts::default();
        let rel = scripts
            .by_sha(sha1_hex(RELEASE_SOURCE).to_uppercase().as_bytes())
            .unwrap()
            .run;
        let ext = scripts.by_body(EXTEND_SCRIPT.body.as_bytes()).unwrap().run;
        let mut space = Keyspace::new();
        let mut keys = space.view(0, 0);
        let (k, ms) = ([b("k")], Some(Duration::from_millis(100)));
        assert_eq!(rel(&mut keys, &k, &[b("t")]), ServerReply::Int(-1));
        assert_eq!(ext(&mut keys, &k, &[b("t"), b("50")]), ServerReply::Int(0));
        assert!(!keys.exists(&b("k")), "extend never creates");
        keys.set(&b("k"), b("other"), ms);
        assert_eq!(rel(&mut keys, &k, &[b("t")]), ServerReply::Int(0));
        assert_eq!(ext(&mut keys, &k, &[b("t"), b("50")]), ServerReply::Int(0));
        keys.set(&b("k"), b("t"), ms);
        assert_eq!(ext(&mut keys, &k, &[b("t"), b("50")]), ServerReply::Int(1));
        assert_eq!(keys.pttl(&b("k")), Some(Some(Duration::from_millis(50))));
        assert_eq!(
            keys.take_published(),
            Vec::new(),
            "nothing deleted, nothing said"
        );
        assert_eq!(rel(&mut keys, &k, &[b("t")]), ServerReply::Int(1));
        assert!(!keys.exists(&b("k")));
        let said = (b("redlock:released:k"), Bytes::new());
        assert_eq!(keys.take_published(), vec![said], "a delete is announced");
        // Someone subscribed to the key's channel heard it: 2 (a waiter).
        keys.set(&b("k"), b("t"), ms);
        keys.set_receivers([(b("redlock:released:k"), 1)].into_iter().collect());
        assert_eq!(rel(&mut keys, &k, &[b("t")]), ServerReply::Int(2));
        keys.take_published();
        // `pcall`: a channel the ACL denies does not fail the release.
        keys.set(&b("k"), b("t"), ms);
        keys.deny_channels();
        assert_eq!(rel(&mut keys, &k, &[b("t")]), ServerReply::Int(1));
        assert!(!keys.exists(&b("k")));
        assert_eq!(keys.take_published(), Vec::new());
        assert!(matches!(
            ext(&mut keys, &k, &[b("t"), b("x")]),
            ServerReply::Error(_)
        ));
    }

    /// Member `n` of F, as `ZSCORE` reads it.
    fn score(keys: &mut Keys<'_>, fence: &str) -> Result<Option<f64>, crate::WrongType> {
        keys.zscore(&b(fence), &b("n"))
    }

    #[test]
    fn the_fenced_acquire_counts_from_the_floor_and_sets_the_key_first() {
        let scripts = Scripts::default();
        let acq = scripts
            .by_body(FENCED_ACQUIRE_SCRIPT.body.as_bytes())
            .unwrap()
            .run;
        let mut space = Keyspace::new();
        // Wall clock 1,000.5 s after the epoch: the floor is 1,700,001,000 * 2^20.
        let mut keys = space.view_at(0, 0, WALL_EPOCH_NANOS + 1_000_500_000_000);
        let floor = 1_700_001_000 * FENCE_FLOOR_PER_SECOND as i64;
        let kf = [b("k"), b("k:fence")];
        assert_eq!(
            acq(&mut keys, &kf, &[b("t"), b("100")]),
            ServerReply::Int(floor + 1)
        );
        assert_eq!(keys.pttl(&b("k")), Some(Some(Duration::from_millis(100))));
        assert_eq!(score(&mut keys, "k:fence"), Ok(Some((floor + 1) as f64)));
        assert_eq!(keys.pttl(&b("k:fence")), Some(None), "F is persistent");
        assert_eq!(acq(&mut keys, &kf, &[b("u"), b("100")]), ServerReply::Nil);
        keys.del(&b("k"));
        assert_eq!(
            acq(&mut keys, &kf, &[b("u"), b("100")]),
            ServerReply::Int(floor + 2),
            "within the second the counter counts"
        );
        // A counter ahead of the floor counts on from where it is.
        keys.del(&b("k"));
        let ahead = (1u64 << 52) as f64;
        keys.zset_update(&b("k:fence"), &b("n"), |_| Some(ahead))
            .unwrap();
        let reply = acq(&mut keys, &kf, &[b("v"), b("100")]);
        assert_eq!(reply, ServerReply::Int((1 << 52) + 1));
        // F of the wrong type (a string: the old counter; a list): K is set, then it fails.
        for wrong in ["string", "list"] {
            keys.del(&b("k"));
            keys.del(&b("k:fence"));
            if wrong == "string" {
                keys.set(&b("k:fence"), b("5"), None);
            } else {
                keys.rpush(&b("k:fence"), &[b("x")]).unwrap();
            }
            let reply = acq(&mut keys, &kf, &[b("v"), b("100")]);
            assert!(matches!(reply, ServerReply::Error(e) if e.starts_with("WRONGTYPE")));
            assert_eq!(keys.get(&b("k")), Ok(Some(b("v"))), "SET NX ran first");
        }
        // A list K: SET NX sees it (nil).
        keys.rpush(&b("l"), &[b("x")]).unwrap();
        let lf = [b("l"), b("l:fence")];
        assert_eq!(acq(&mut keys, &lf, &[b("v"), b("100")]), ServerReply::Nil);
        // Without the floor the counter restarts from 1.
        let mut space = Keyspace::new();
        let mut keys = space.view_at(0, 0, WALL_EPOCH_NANOS);
        let reply = fenced_acquire_with(&mut keys, &kf, &[b("t"), b("100")], false);
        assert_eq!(reply, ServerReply::Int(1));
        assert_eq!(score(&mut keys, "k:fence"), Ok(Some(1.0)));
    }

    #[test]
    fn the_write_back_raises_only_while_k_is_ours_and_never_lowers() {
        let raise = Scripts::default()
            .by_sha(RAISE_FENCE_SCRIPT.sha1.as_bytes())
            .unwrap()
            .run;
        let mut space = Keyspace::new();
        let mut keys = space.view(0, 0);
        let kf = [b("k"), b("k:fence")];
        let ms = Some(Duration::from_millis(100));
        assert_eq!(
            raise(&mut keys, &kf, &[b("t"), b("9")]),
            ServerReply::Int(0)
        );
        assert!(!keys.exists(&b("k:fence")), "K missing: F untouched");
        keys.set(&b("k"), b("other"), ms);
        assert_eq!(
            raise(&mut keys, &kf, &[b("t"), b("9")]),
            ServerReply::Int(0)
        );
        keys.set(&b("k"), b("t"), ms);
        assert_eq!(
            raise(&mut keys, &kf, &[b("t"), b("9")]),
            ServerReply::Int(1)
        );
        assert_eq!(score(&mut keys, "k:fence"), Ok(Some(9.0)), "added");
        assert_eq!(
            raise(&mut keys, &kf, &[b("t"), b("20")]),
            ServerReply::Int(1)
        );
        assert_eq!(score(&mut keys, "k:fence"), Ok(Some(20.0)), "raised");
        assert_eq!(
            raise(&mut keys, &kf, &[b("t"), b("5")]),
            ServerReply::Int(1)
        );
        assert_eq!(score(&mut keys, "k:fence"), Ok(Some(20.0)), "never lowered");
        let junk = raise(&mut keys, &kf, &[b("t"), b("x")]);
        assert!(matches!(junk, ServerReply::Error(e) if e.contains("compare")));
        keys.set(&b("k:fence"), b("5"), None);
        let wrong = raise(&mut keys, &kf, &[b("t"), b("9")]);
        assert!(matches!(wrong, ServerReply::Error(e) if e.starts_with("WRONGTYPE")));
        keys.del(&b("k"));
        keys.rpush(&b("k"), &[b("x")]).unwrap();
        let wrong = raise(&mut keys, &kf, &[b("t"), b("9")]);
        assert!(matches!(wrong, ServerReply::Error(e) if e.starts_with("WRONGTYPE")));
    }
}
