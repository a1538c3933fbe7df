//! Demo: starts five local nodes (through the test kit), then shows a lock taken, contended,
//! auto-extended, surviving two dead nodes, and failing cleanly without a majority.
//!
//! Run with `cargo xtask demo` (it installs `redis-server` when missing).

use std::time::{Duration, Instant};

use redlock_testkit::Cluster;
use redlock_tokio::{AcquireFailure, LockError, LockOptions, Redlock, RetryPolicy};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cluster = Cluster::start(5)?;
    println!("started {} nodes: {:?}", cluster.len(), cluster.urls());
    let redlock = Redlock::builder(cluster.urls())?
        .config(|c| c.ttl(Duration::from_secs(2)))
        .build()?;

    let start = Instant::now();
    let guard = redlock.lock("demo:invoice-42").await?;
    println!(
        "locked demo:invoice-42 in {:?}: token {}, validity {:?}",
        start.elapsed(),
        guard.token(),
        guard.validity()
    );

    match redlock.try_lock("demo:invoice-42").await {
        Err(LockError::Acquire {
            reason: AcquireFailure::Contended { nodes },
            ..
        }) => {
            println!("a second try is refused: held on {} nodes", nodes.len())
        }
        other => println!("unexpected: {other:?}"),
    }

    let deadline = guard.extend().await?;
    println!("extended; validity now {:?}", deadline - Instant::now());
    println!("released: {:?}", guard.release().await?);

    let total = redlock
        .with_lock("demo:batch", |lock| async move {
            // Auto-extension keeps a 2 s lock alive while this runs for 3 s.
            tokio::time::sleep(Duration::from_secs(3)).await;
            Ok::<_, std::io::Error>(lock.validity())
        })
        .await?;
    println!("with_lock ran 3 s under a 2 s ttl; validity at the end {total:?}");

    cluster.node(0).kill()?;
    cluster.node(1).kill()?;
    let guard = redlock.lock("demo:invoice-43").await?;
    println!(
        "2 of 5 nodes killed: still locked, validity {:?}",
        guard.validity()
    );
    println!("released: {:?}", guard.release().await?);

    cluster.node(2).kill()?;
    let once = LockOptions::default().retry(RetryPolicy::once());
    match redlock.lock_with("demo:invoice-44", once).await {
        Err(e) => println!("3 of 5 nodes killed: {e}"),
        Ok(_) => println!("unexpected: locked without a majority"),
    }
    Ok(())
}
