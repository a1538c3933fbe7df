//! Native stand-ins for the Lua scripts the core sends, keyed by SHA1, and the registry nodes
//! look them up in.
//!
//! A simulated node runs no Lua: [`Scripts`] maps each known body and SHA1 to a Rust function
//! with the same effect. Tests may register more (e.g. a deliberately wrong script); the
//! per-node cache that makes `EVALSHA` answer `-NOSCRIPT` lives in the node, not here.

use std::time::Duration;

use bytes::Bytes;
use redlock_core::{EXTEND_SCRIPT, RELEASE_SCRIPT, Script};

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
#[derive(Debug, Clone, Copy)]
pub struct NativeScript {
    /// The Lua source the client sends with `EVAL`.
    pub body: &'static str,
    /// Lowercase hex SHA1 of `body`.
    pub sha1: &'static str,
    /// What running it does.
    pub run: ScriptFn,
}

impl Default for Scripts {
    /// The release and extend scripts of `redlock-core`.
    fn default() -> Self {
        let mut scripts = Self {
            entries: Vec::new(),
        };
        scripts.register(&RELEASE_SCRIPT, release);
        scripts.register(&EXTEND_SCRIPT, extend);
        scripts
    }
}

impl Scripts {
    /// Adds (or replaces) a script.
    pub fn register(&mut self, script: &'static Script, run: ScriptFn) {
        self.entries.retain(|e| e.sha1 != script.sha1);
        self.entries.push(NativeScript {
            body: script.body,
            sha1: script.sha1,
            run,
        });
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
    pub fn shas(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.entries.iter().map(|e| e.sha1)
    }
}

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
    match keys.get(key) {
        Some(v) if v == token => {
            keys.del(key);
            ServerReply::Int(1)
        }
        None => ServerReply::Int(-1),
        Some(_) => ServerReply::Int(0),
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
        Some(v) if v == token => ServerReply::Int(i64::from(keys.pexpire(key, ttl))),
        _ => ServerReply::Int(0),
    }
}

fn arity_error() -> ServerReply {
    // What Lua would raise indexing a missing KEYS/ARGV entry, roughly.
    ServerReply::error("ERR Error running script: missing KEYS or ARGV")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keyspace::Keyspace;

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
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
        assert!(keys.get(&b("k")).is_none(), "extend never creates");
        keys.set(&b("k"), b("other"), ms);
        assert_eq!(rel(&mut keys, &k, &[b("t")]), ServerReply::Int(0));
        assert_eq!(ext(&mut keys, &k, &[b("t"), b("50")]), ServerReply::Int(0));
        keys.set(&b("k"), b("t"), ms);
        assert_eq!(ext(&mut keys, &k, &[b("t"), b("50")]), ServerReply::Int(1));
        assert_eq!(keys.pttl(&b("k")), Some(Some(Duration::from_millis(50))));
        assert_eq!(rel(&mut keys, &k, &[b("t")]), ServerReply::Int(1));
        assert!(keys.get(&b("k")).is_none());
        assert!(matches!(
            ext(&mut keys, &k, &[b("t"), b("x")]),
            ServerReply::Error(_)
        ));
    }
}
