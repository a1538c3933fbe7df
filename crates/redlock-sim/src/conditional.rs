//! The writes a lock makes on a condition: `SET` with its options (`NX`, `IFEQ`, `PX`,
//! `EX`), and the native compare-and-delete commands `DELIFEQ` (Valkey 9) and
//! `DELEX key IFEQ` (Redis 8.4). Each runs only on a [`ServerProfile`] that has it; on one
//! that lacks it the node answers as that server does (`ERR syntax error` for an option
//! `SET` does not know, `ERR unknown command` for a command).
//!
//! What the native commands do, as Valkey 9.1.2 does it: a missing key is "not equal"
//! (`DELIFEQ` 0, `SET IFEQ` nil, and nothing is created), a key of another type is
//! `WRONGTYPE`.

use std::time::Duration;

use bytes::Bytes;

use crate::keyspace::Keys;
use crate::profile::{NodeMutant, ServerProfile, unknown_command};
use crate::resp::ServerReply;

/// Whether a command is one of the native commands a node may lack: the compare commands
/// (`DELIFEQ`, `DELEX`, `SET` with `IFEQ`) and the script-free fence's `ZADD ... GT`.
pub(crate) fn is_native(args: &[Bytes]) -> bool {
    let Some(name) = args.first() else {
        return false;
    };
    name.eq_ignore_ascii_case(b"DELIFEQ")
        || name.eq_ignore_ascii_case(b"DELEX")
        || (name.eq_ignore_ascii_case(b"SET")
            && args.iter().skip(3).any(|a| a.eq_ignore_ascii_case(b"IFEQ")))
        || (name.eq_ignore_ascii_case(b"ZADD")
            && args.iter().skip(2).any(|a| a.eq_ignore_ascii_case(b"GT")))
}

/// `SET key value [NX | IFEQ cmp] [PX ms | EX s]`; `None` for a wrong arity.
pub(crate) fn set(
    keys: &mut Keys<'_>,
    profile: &ServerProfile,
    rest: &[Bytes],
) -> Option<ServerReply> {
    let [key, value, opts @ ..] = rest else {
        return None;
    };
    let opts = match SetOptions::parse(opts, profile) {
        Ok(opts) => opts,
        Err(e) => return Some(e),
    };
    let reply = match &opts.ifeq {
        // `NX` looks at existence, whatever the type: a list in the way is "held".
        None if opts.nx && keys.exists(key) => ServerReply::Nil,
        None => {
            keys.set(key, value.clone(), opts.ttl);
            ServerReply::Ok
        }
        Some(cmp) => match keys.get(key) {
            Ok(Some(v)) if v == cmp => {
                keys.set(key, value.clone(), opts.ttl);
                ServerReply::Ok
            }
            Ok(None) if profile.mutant == Some(NodeMutant::SetIfEqCreates) => {
                keys.set(key, value.clone(), opts.ttl);
                ServerReply::Ok
            }
            Ok(_) => ServerReply::Nil,
            Err(e) => e.into(),
        },
    };
    Some(reply)
}

/// `DELIFEQ key value`: 1 if the key held `value` and was deleted, else 0.
pub(crate) fn delifeq(
    keys: &mut Keys<'_>,
    profile: &ServerProfile,
    name: &[u8],
    rest: &[Bytes],
) -> Option<ServerReply> {
    if !profile.delifeq {
        return Some(unknown_command(name, rest));
    }
    let [key, value] = rest else {
        return None;
    };
    if profile.mutant == Some(NodeMutant::DelIfEqUnchecked) {
        return Some(ServerReply::Int(i64::from(keys.del(key))));
    }
    Some(delete_if(keys, key, |v| v == value))
}

/// `DELEX key [IFEQ value | IFNE value]`: without a condition deletes a key of any type;
/// with one, 1 if the string key met it and was deleted, else 0.
pub(crate) fn delex(
    keys: &mut Keys<'_>,
    profile: &ServerProfile,
    name: &[u8],
    rest: &[Bytes],
) -> Option<ServerReply> {
    if !profile.delex {
        return Some(unknown_command(name, rest));
    }
    let reply = match rest {
        [key] => ServerReply::Int(i64::from(keys.del(key))),
        [key, cond, value] if cond.eq_ignore_ascii_case(b"IFEQ") => {
            delete_if(keys, key, |v| v == value)
        }
        [key, cond, value] if cond.eq_ignore_ascii_case(b"IFNE") => {
            delete_if(keys, key, |v| v != value)
        }
        [_, _, _] => ServerReply::error("ERR syntax error"),
        _ => return None,
    };
    Some(reply)
}

/// Deletes the string at `key` if `keep` says so: 1 if deleted, 0 if not (or missing).
fn delete_if(keys: &mut Keys<'_>, key: &Bytes, delete: impl Fn(&Bytes) -> bool) -> ServerReply {
    match keys.get(key) {
        Ok(Some(v)) if delete(&v) => ServerReply::Int(i64::from(keys.del(key))),
        Ok(_) => ServerReply::Int(0),
        Err(e) => e.into(),
    }
}

/// The options of one `SET`.
#[derive(Debug, Default)]
struct SetOptions {
    nx: bool,
    ifeq: Option<Bytes>,
    ttl: Option<Duration>,
}

impl SetOptions {
    /// Reads `NX`, `IFEQ cmp` (where the profile has it), `PX ms`, `EX s`: the subset the
    /// core and tests use. `NX` with `IFEQ`, a repeated option, or an unknown one is
    /// `ERR syntax error`, as on the servers.
    fn parse(opts: &[Bytes], profile: &ServerProfile) -> Result<Self, ServerReply> {
        let syntax = || ServerReply::error("ERR syntax error");
        let mut out = Self::default();
        let mut i = 0;
        while i < opts.len() {
            let opt = opts[i].to_ascii_uppercase();
            match &opt[..] {
                b"NX" if out.ifeq.is_none() => out.nx = true,
                b"IFEQ" if profile.set_ifeq && !out.nx && out.ifeq.is_none() => {
                    out.ifeq = Some(opts.get(i + 1).ok_or_else(syntax)?.clone());
                    i += 1;
                }
                b"PX" | b"EX" => {
                    let arg = opts.get(i + 1).ok_or_else(syntax)?;
                    out.ttl = Some(ttl_arg(&opt, arg, out.ttl.is_some())?);
                    i += 1;
                }
                _ => return Err(syntax()),
            }
            i += 1;
        }
        Ok(out)
    }
}

/// The ttl of `PX ms` or `EX s`; an error for a non-number, a non-positive one, or a
/// second ttl.
fn ttl_arg(opt: &[u8], arg: &[u8], repeated: bool) -> Result<Duration, ServerReply> {
    let n = std::str::from_utf8(arg)
        .ok()
        .and_then(|s| s.parse::<i64>().ok())
        .ok_or_else(|| ServerReply::error("ERR value is not an integer or out of range"))?;
    if repeated {
        return Err(ServerReply::error("ERR syntax error"));
    }
    if n <= 0 {
        return Err(ServerReply::error(
            "ERR invalid expire time in 'set' command",
        ));
    }
    let n = n as u64;
    Ok(if opt == b"PX" {
        Duration::from_millis(n)
    } else {
        Duration::from_secs(n)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keyspace::Keyspace;

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    fn args(v: &[&str]) -> Vec<Bytes> {
        v.iter().map(|s| b(s)).collect()
    }

    #[test]
    fn set_ifeq_compares_and_never_creates() {
        let valkey = ServerProfile::VALKEY_9_1;
        let mut space = Keyspace::new();
        let mut k = space.view(0, 0);
        let set_ifeq = |k: &mut Keys<'_>, cmp| {
            set(k, &valkey, &args(&["k", "t", "IFEQ", cmp, "PX", "100"])).unwrap()
        };
        assert_eq!(set_ifeq(&mut k, "t"), ServerReply::Nil);
        assert!(!k.exists(&b("k")), "a missing key stays missing");
        k.set(&b("k"), b("other"), None);
        assert_eq!(set_ifeq(&mut k, "t"), ServerReply::Nil);
        assert_eq!(k.get(&b("k")), Ok(Some(b("other"))));
        k.set(&b("k"), b("t"), None);
        assert_eq!(set_ifeq(&mut k, "t"), ServerReply::Ok);
        assert_eq!(k.pttl(&b("k")), Some(Some(Duration::from_millis(100))));
        assert_eq!(k.rpush(&b("l"), &[b("x")]), Ok(1));
        let wrong = set(&mut k, &valkey, &args(&["l", "t", "IFEQ", "t"])).unwrap();
        assert!(matches!(wrong, ServerReply::Error(e) if e.starts_with("WRONGTYPE")));
        let syntax = ServerReply::error("ERR syntax error");
        for bad in [
            &["k", "t", "IFEQ", "t", "NX"][..],
            &["k", "t", "NX", "IFEQ", "t"],
            &["k", "t", "IFEQ"],
            &["k", "t", "IFNE", "t"],
        ] {
            assert_eq!(set(&mut k, &valkey, &args(bad)).unwrap(), syntax, "{bad:?}");
        }
        let redis7 = ServerProfile::REDIS_7_0;
        let old = set(&mut k, &redis7, &args(&["k", "t", "IFEQ", "t", "PX", "9"]));
        assert_eq!(old.unwrap(), syntax, "Redis 7 has no IFEQ");
        let creates = valkey.with_mutant(NodeMutant::SetIfEqCreates);
        let set = set(&mut k, &creates, &args(&["gone", "t", "IFEQ", "t"])).unwrap();
        assert_eq!(set, ServerReply::Ok);
        assert!(k.exists(&b("gone")), "the mutant resurrects");
    }

    #[test]
    fn delifeq_and_delex_delete_only_an_equal_string() {
        let mut space = Keyspace::new();
        let mut k = space.view(0, 0);
        let (valkey, redis) = (ServerProfile::VALKEY_9_1, ServerProfile::REDIS_8_4);
        let del = |k: &mut Keys<'_>, p: &ServerProfile, a: &[&str]| match a[0] {
            "DELIFEQ" => delifeq(k, p, b"DELIFEQ", &args(&a[1..])),
            _ => delex(k, p, b"DELEX", &args(&a[1..])),
        };
        for (p, cmd) in [
            (&valkey, &["DELIFEQ", "k", "t"][..]),
            (&redis, &["DELEX", "k", "IFEQ", "t"]),
        ] {
            assert_eq!(del(&mut k, p, cmd), Some(ServerReply::Int(0)), "missing");
            k.set(&b("k"), b("other"), None);
            assert_eq!(del(&mut k, p, cmd), Some(ServerReply::Int(0)), "another");
            assert!(k.exists(&b("k")));
            k.set(&b("k"), b("t"), None);
            assert_eq!(del(&mut k, p, cmd), Some(ServerReply::Int(1)), "ours");
            assert!(!k.exists(&b("k")));
        }
        assert_eq!(k.rpush(&b("k"), &[b("x")]), Ok(1));
        let wrong = del(&mut k, &valkey, &["DELIFEQ", "k", "t"]).unwrap();
        assert!(matches!(wrong, ServerReply::Error(e) if e.starts_with("WRONGTYPE")));
        assert_eq!(del(&mut k, &valkey, &["DELIFEQ", "k"]), None, "arity");
        let unknown = del(&mut k, &redis, &["DELIFEQ", "k", "t"]).unwrap();
        assert!(
            matches!(unknown, ServerReply::Error(e) if e.starts_with("ERR unknown command 'DELIFEQ'"))
        );
        let unknown = del(&mut k, &valkey, &["DELEX", "k", "IFEQ", "t"]).unwrap();
        assert!(
            matches!(unknown, ServerReply::Error(e) if e.starts_with("ERR unknown command 'DELEX'"))
        );
        let unchecked = valkey.with_mutant(NodeMutant::DelIfEqUnchecked);
        k.set(&b("k"), b("other"), None);
        let del = del(&mut k, &unchecked, &["DELIFEQ", "k", "t"]);
        assert_eq!(del, Some(ServerReply::Int(1)), "the mutant deletes anyway");
    }
}
