//! Fencing end to end: a storage that refuses a stale holder's write (docs/safety.md,
//! "Fencing").
//!
//! The storage stand-in is a Redis key guarded by a compare-token script: a write carries
//! the writer's fencing token and is refused if the storage has already accepted a larger
//! one. A real database does the same with a column: `UPDATE ... SET value = $1,
//! fence = $2 WHERE id = $3 AND fence <= $2`, and zero rows updated means "stale".
//!
//! Run with `cargo run -p redlock-tokio --example fenced_write` (`redis-server` on PATH):
//! it starts 3 lock nodes and a storage node, takes a fenced lock, writes, and shows a
//! write with an older token refused. `tests/kleppmann.rs` runs the whole scenario with
//! the first holder paused (SIGSTOP) in a process of its own.

use std::time::Duration;

use redlock_testkit::{Cluster, Conn, Reply};
use redlock_tokio::{LockOptions, Redlock};

/// The storage's write: `KEYS[1]` the item, `KEYS[2]` the largest token it accepted,
/// `ARGV[1]` the writer's token, `ARGV[2]` the value. Refuses a token below the largest.
pub const FENCED_WRITE: &str = "local seen = tonumber(redis.call('GET', KEYS[2]) or '0') local token = tonumber(ARGV[1]) if token < seen then return redis.error_reply('STALE token ' .. ARGV[1] .. ' is below ' .. string.format('%d', seen)) end redis.call('SET', KEYS[2], ARGV[1]) redis.call('SET', KEYS[1], ARGV[2]) return redis.status_reply('OK')";

/// Writes `value` to `item` with the writer's fencing `token`; `Err` with the storage's
/// answer if it refused (a holder whose lock was lost).
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

#[allow(dead_code)]
#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let nodes = Cluster::start(3)?;
    let storage = Cluster::start(1)?;
    let mut store = Conn::open(storage.node(0).addr(), Duration::from_secs(2))?;

    // The ten lines a user writes: a fenced lock, and its token with every write.
    let redlock = Redlock::builder(nodes.urls())?.build()?;
    let guard = redlock
        .lock_with("account:7", LockOptions::default().fenced(true))
        .await?;
    let token = guard.fencing_token().expect("a fenced lock has a token");
    write_fenced(&mut store, "account:7", token, "balance=100")?;
    guard.release().await?;

    let next = redlock
        .lock_with("account:7", LockOptions::default().fenced(true))
        .await?;
    let newer = next.fencing_token().expect("token");
    println!("tokens {token} then {newer}");
    write_fenced(&mut store, "account:7", newer, "balance=90")?;
    // A late write of the first holder, with its older token, is refused.
    match write_fenced(&mut store, "account:7", token, "balance=0") {
        Err(refusal) => println!("the stale write was refused: {refusal}"),
        Ok(()) => println!("the stale write was accepted: this must not happen"),
    }
    next.release().await?;
    Ok(())
}
