//! Fencing end to end: a storage that refuses a stale holder's write (docs/safety.md,
//! "Fencing").
//!
//! The storage stand-in (`redlock_testkit::fenced`) is a Redis key guarded by a
//! compare-token script: a write carries the writer's fencing token and is refused if the
//! storage has already accepted a larger one. A real database does the same with a column:
//! `UPDATE ... SET value = $1, fence = $2 WHERE id = $3 AND fence <= $2`, and zero rows
//! updated means "stale".
//!
//! Run with `cargo run -p redlock-tokio --example fenced_write` (`redis-server` on PATH):
//! it starts 3 lock nodes and a storage node, takes a fenced lock, writes, and shows a
//! write with an older token refused. The conformance suite's `kleppmann` scenario runs the
//! whole scenario on every driver, with the first holder paused (SIGSTOP) in a process of
//! its own.

use std::time::Duration;

use redlock_testkit::fenced::write_fenced;
use redlock_testkit::{Cluster, Conn};
use redlock_tokio::{LockOptions, Redlock};

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
