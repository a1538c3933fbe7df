//! The example of this crate's README.md, compiled (keep the two identical).

use redlock_async_std::Redlock;
use std::time::Duration;

fn main() {
    let nodes = ["127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"];
    if let Err(e) = smol::block_on(lock_invoice(&nodes, 42)) {
        // A sentence naming each node and why, e.g. "could not acquire the lock: another
        // client holds it on 127.0.0.1:7001, 127.0.0.1:7002".
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

pub async fn lock_invoice(nodes: &[&str], id: u64) -> Result<(), redlock_async_std::LockError> {
    let redlock = Redlock::builder(nodes)?
        .config(|c| c.ttl(Duration::from_secs(10)))
        .build()?;
    let key = format!("invoices:{id}");
    let guard = redlock.lock(&key).await?;
    println!("locked {key} after {}", guard.stats());
    // ... check guard.validity() before each side effect ...
    guard.release().await?;
    Ok(())
}
