//! Every lock kind beyond the mutex, on the nodes named on the command line (default: three
//! nodes on 127.0.0.1:7001-7003): a multi-resource lock, readers and a writer, and a
//! counting semaphore, on smol's executor (async-std's `block_on` works the same).
//! docs/kinds.md has the rules (keys, scripts, quorum).
//!
//! ```sh
//! cargo run -p redlock-async-std --example kinds -- 127.0.0.1:7001 127.0.0.1:7002 127.0.0.1:7003
//! ```

use std::time::Duration;

use redlock_async_std::{AcquireFailure, LockError, Redlock};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let nodes = if args.is_empty() {
        vec![
            "127.0.0.1:7001".into(),
            "127.0.0.1:7002".into(),
            "127.0.0.1:7003".into(),
        ]
    } else {
        args
    };
    if let Err(e) = smol::block_on(run(&nodes)) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

async fn run(nodes: &[String]) -> Result<(), LockError> {
    let redlock = Redlock::builder(nodes)?
        .config(|c| c.ttl(Duration::from_secs(10)))
        .build()?;

    // A multi-lock: both accounts or neither, whatever order they are named in.
    let transfer = redlock.lock_all(["account:7", "account:3"]).await?;
    println!(
        "holding {:?} as {:?}",
        transfer.resources(),
        transfer.kind()
    );
    transfer.release().await?;

    // Readers share; a writer waits for them and then holds alone.
    let reader = redlock.read_lock("doc:1").await?;
    let another = redlock.read_lock("doc:1").await?;
    println!("two readers of doc:1, {:?} left", reader.validity());
    reader.release().await?;
    another.release().await?;
    let writer = redlock.write_lock("doc:1").await?;
    println!("the writer of doc:1, {:?}", writer.kind());
    writer.release().await?;

    // A semaphore of 2: two holders at once, and every holder asks for the same 2.
    let first = redlock.semaphore("pool", 2).await?;
    let second = redlock.semaphore("pool", 2).await?;
    match redlock.try_semaphore("pool", 3).await {
        Err(LockError::Acquire {
            reason:
                AcquireFailure::PermitsMismatch {
                    asked, in_place, ..
                },
            ..
        }) => println!("asked for {asked} permits, but the holders hold {in_place}"),
        other => println!("a third holder: {:?}", other.map(|g| g.kind())),
    }
    first.release().await?;
    second.release().await?;
    Ok(())
}
