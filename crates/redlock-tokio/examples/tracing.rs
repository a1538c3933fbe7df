//! The `tracing` feature: every lock call is a `redlock.lock` span with a `redlock.acquire`,
//! `redlock.extend` and `redlock.release` child, each closing with its outcome (attempts,
//! each node's vote and round trip, validity); connections and losses are events. Never a
//! token, never a password.
//!
//! Run with `cargo run -p redlock-tokio --features tracing --example tracing` (`redis-server`
//! on PATH): it starts 3 nodes, prints each span as it closes, locks, extends and releases,
//! stops one node to show a disconnect, and exits.

use std::time::Duration;

use redlock_testkit::Cluster;
use redlock_tokio::Redlock;
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::fmt::format::FmtSpan;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let nodes = Cluster::start(3)?;
    // Any subscriber will do; this one prints events and each span when it closes, with
    // its fields. Install it before building the handle: the driver's loop traces to the
    // global default.
    tracing_subscriber::fmt()
        .with_max_level(LevelFilter::DEBUG)
        .with_span_events(FmtSpan::CLOSE)
        .init();

    let redlock = Redlock::builder(nodes.urls())?
        .config(|c| c.ttl(Duration::from_secs(5)))
        .build()?;
    let guard = redlock.lock("invoices:42").await?;
    guard.extend().await?;
    guard.release().await?;

    // A node that goes away is a `node disconnected` event, then reconnection attempts.
    nodes.node(2).kill()?;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let guard = redlock.lock("invoices:43").await?;
    guard.release().await?;
    Ok(())
}
