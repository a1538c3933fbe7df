//! A storage stand-in that checks fencing tokens (docs/safety.md, "Fencing"): a Redis key
//! guarded by a compare-token script. It is the pattern a real database follows, not a
//! lock: the lock's nodes are elsewhere.
//!
//! A write carries the writer's fencing token and is refused if the storage has already
//! accepted a larger one. A database does the same with a column: `UPDATE ... SET value =
//! $1, fence = $2 WHERE id = $3 AND fence <= $2`, and zero rows updated means "stale".

use crate::{Conn, Reply};

/// The storage's write: `KEYS[1]` the item, `KEYS[2]` the largest token it accepted,
/// `ARGV[1]` the writer's token, `ARGV[2]` the value. Refuses a token below the largest
/// with `-STALE token <t> is below <largest>`.
pub const FENCED_WRITE: &str = "local seen = tonumber(redis.call('GET', KEYS[2]) or '0') local token = tonumber(ARGV[1]) if token < seen then return redis.error_reply('STALE token ' .. ARGV[1] .. ' is below ' .. string.format('%d', seen)) end redis.call('SET', KEYS[2], ARGV[1]) redis.call('SET', KEYS[1], ARGV[2]) return redis.status_reply('OK')";

/// Writes `value` to `item` on `store` with the writer's fencing `token`; `Err` with the
/// storage's answer if it refused (a holder whose lock was lost) or the write failed.
pub fn write_fenced(store: &mut Conn, item: &str, token: u64, value: &str) -> Result<(), String> {
    let seen = format!("{item}:largest-token");
    let token = token.to_string();
    let args = ["EVAL", FENCED_WRITE, "2", item, &seen, &token, value];
    match store.command(&args) {
        Ok(Reply::Simple(ok)) if ok == "OK" => Ok(()),
        Ok(other) => Err(format!("{other:?}")),
        Err(e) => Err(e.to_string()),
    }
}
