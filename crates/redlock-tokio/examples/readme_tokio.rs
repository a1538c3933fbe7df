//! The example of this crate's README.md, compiled (keep the two identical).

use redlock_tokio::Redlock;
use std::time::Duration;

#[tokio::main]
async fn main() -> Result<(), redlock_tokio::LockError> {
    let redlock = Redlock::builder(["127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"])?
        .config(|c| c.ttl(Duration::from_secs(10)))
        .build()?;
    let guard = redlock.lock("invoices:42").await?;
    // ... check guard.validity() before each side effect ...
    guard.release().await?;
    Ok(())
}
