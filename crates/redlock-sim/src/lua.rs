//! What the script models share with the Lua they stand for: the model's signature, how
//! a script's arguments read (Lua's `tonumber`, `SET`'s `PX`, `PEXPIRE`'s milliseconds),
//! the errors a script raises, and a release (its compare-and-delete and the channel it
//! announces on, which the queue's release runs too). A leaf: `script`
//! (the mutex's and fencing models, the registry) and `kinds` (the lock kinds' models)
//! both build on it.

use std::time::Duration;

use bytes::Bytes;

use crate::keyspace::Keys;
use crate::resp::ServerReply;

/// A script's effect: runs atomically on one database with `KEYS` and `ARGV`.
pub type ScriptFn = fn(&mut Keys<'_>, &[Bytes], &[Bytes]) -> ServerReply;

/// The channel a release that deleted `key` publishes on: `redlock:released:<key>`.
pub fn release_channel(key: &[u8]) -> Bytes {
    let mut channel = Vec::with_capacity(RELEASE_CHANNEL_PREFIX.len() + key.len());
    channel.extend_from_slice(RELEASE_CHANNEL_PREFIX);
    channel.extend_from_slice(key);
    Bytes::from(channel)
}

/// The prefix of [`release_channel`].
pub const RELEASE_CHANNEL_PREFIX: &[u8] = b"redlock:released:";

/// What a script's `redis.call('TIME')` raises where an ACL denies `TIME`.
pub(crate) const TIME_DENIED_IN_SCRIPT: &str =
    "ERR The user executing the script can't run this command or subcommand";

/// Lua 5.1's `tonumber` on a string, for the decimal numbers a counter holds: surrounding
/// spaces allowed, an integer or a finite decimal (hexadecimal is left out, as no counter
/// is written so), else nil.
pub(crate) fn lua_tonumber(text: &[u8]) -> Option<f64> {
    let text = std::str::from_utf8(text).ok()?.trim();
    let numeric = |c: char| c.is_ascii_digit() || matches!(c, '+' | '-' | '.' | 'e' | 'E');
    if text.is_empty() || !text.chars().all(numeric) {
        return None;
    }
    text.parse::<f64>().ok().filter(|n| n.is_finite())
}

/// `SET`'s `PX` argument inside a script: an integer above zero.
pub(crate) fn set_px_arg(arg: &[u8]) -> Result<Duration, ServerReply> {
    let ms = std::str::from_utf8(arg)
        .ok()
        .and_then(|s| s.parse::<i64>().ok());
    match ms {
        Some(ms) if ms > 0 => Ok(Duration::from_millis(ms.unsigned_abs())),
        Some(_) => Err(ServerReply::error(
            "ERR invalid expire time in 'set' command",
        )),
        None => Err(ServerReply::error(
            "ERR value is not an integer or out of range",
        )),
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

/// What a model answers when `KEYS` or `ARGV` lacks an entry it reads.
pub(crate) fn arity_error() -> ServerReply {
    // What Lua would raise indexing a missing KEYS/ARGV entry, roughly.
    ServerReply::error("ERR Error running script: missing KEYS or ARGV")
}

/// `RELEASE_SCRIPT`: 1 if our key was deleted (and an empty message published on its
/// [`release_channel`]), 2 if so and someone received the message (a waiter), -1 if
/// missing, 0 if another token holds it.
pub(crate) fn release(keys: &mut Keys<'_>, k: &[Bytes], argv: &[Bytes]) -> ServerReply {
    let (Some(key), Some(token)) = (k.first(), argv.first()) else {
        return arity_error();
    };
    // `GET` raises on a key of another type, which ends the script with that error.
    match keys.get(key) {
        Ok(Some(v)) if v == token => {
            keys.del(key);
            // `redis.pcall`: a denied channel returns an error the script goes past.
            match keys.publish(release_channel(key), Bytes::new()) {
                Ok(n) if n > 0 => ServerReply::Int(2),
                _ => ServerReply::Int(1),
            }
        }
        Ok(None) => ServerReply::Int(-1),
        Ok(Some(_)) => ServerReply::Int(0),
        Err(e) => e.into(),
    }
}
