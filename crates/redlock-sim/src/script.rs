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

use std::fmt::Write as _;
use std::time::Duration;

use bytes::Bytes;
use sha1::{Digest, Sha1};

use crate::keyspace::Keys;
use crate::resp::ServerReply;

/// A script's effect: runs atomically on one database with `KEYS` and `ARGV`.
pub type ScriptFn = fn(&mut Keys<'_>, &[Bytes], &[Bytes]) -> ServerReply;

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
    /// The models of the release and extend scripts, under the sources they were written
    /// from (which a test checks are `redlock-core`'s).
    fn default() -> Self {
        let mut scripts = Self {
            entries: Vec::new(),
        };
        scripts.register(RELEASE_SOURCE, release);
        scripts.register(EXTEND_SOURCE, extend);
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
pub const RELEASE_SOURCE: &str = "local v = redis.call('GET', KEYS[1]) if v == ARGV[1] then return redis.call('DEL', KEYS[1]) elseif v == false then return -1 else return 0 end";

/// The source the extend model (`extend` here) was written from, word for word: `redlock-core`'s
/// `EXTEND_SCRIPT.body` when the model was written. Change both together.
pub const EXTEND_SOURCE: &str = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end";

/// Parses a script argument as a millisecond count, as `PEXPIRE` would.
pub fn millis_arg(arg: &[u8]) -> Result<Duration, ServerReply> {
    std::str::from_utf8(arg)
        .ok()
        .and_then(|s| s.parse::<i64>().ok())
        .map(|ms| Duration::from_millis(u64::try_from(ms).unwrap_or(0)))
        .ok_or_else(|| ServerReply::error("ERR value is not an integer or out of range"))
}

/// `RELEASE_SCRIPT`: 1 if our key was deleted, -1 if missing, 0 if another token holds it.
fn release(keys: &mut Keys<'_>, k: &[Bytes], argv: &[Bytes]) -> ServerReply {
    let (Some(key), Some(token)) = (k.first(), argv.first()) else {
        return arity_error();
    };
    // `GET` raises on a key of another type, which ends the script with that error.
    match keys.get(key) {
        Ok(Some(v)) if v == token => {
            keys.del(key);
            ServerReply::Int(1)
        }
        Ok(None) => ServerReply::Int(-1),
        Ok(Some(_)) => ServerReply::Int(0),
        Err(e) => e.into(),
    }
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

fn arity_error() -> ServerReply {
    // What Lua would raise indexing a missing KEYS/ARGV entry, roughly.
    ServerReply::error("ERR Error running script: missing KEYS or ARGV")
}

#[cfg(test)]
mod tests {
    use redlock_core::{EXTEND_SCRIPT, RELEASE_SCRIPT};

    use super::*;
    use crate::keyspace::Keyspace;

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
        let scripts = Scripts::default();
        for script in [&RELEASE_SCRIPT, &EXTEND_SCRIPT] {
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
            .by_sha(RELEASE_SCRIPT.sha1.to_uppercase().as_bytes())
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
        assert_eq!(rel(&mut keys, &k, &[b("t")]), ServerReply::Int(1));
        assert!(!keys.exists(&b("k")));
        assert!(matches!(
            ext(&mut keys, &k, &[b("t"), b("x")]),
            ServerReply::Error(_)
        ));
    }
}
