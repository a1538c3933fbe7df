//! Every lock kind beyond the mutex, on the nodes named on the command line (default: three
//! nodes on 127.0.0.1:7001-7003): a multi-resource lock, readers and a writer, and a
//! counting semaphore. docs/kinds.md has the rules (keys, scripts, quorum).
//!
//! ```sh
//! cargo run -p redlock-blocking --example kinds -- 127.0.0.1:7001 127.0.0.1:7002 127.0.0.1:7003
//! ```

use std::time::Duration;

use redlock_blocking::{AcquireFailure, LockError, Redlock};

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
    if let Err(e) = run(&nodes) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run(nodes: &[String]) -> Result<(), LockError> {
    let redlock = Redlock::builder(nodes)?
        .config(|c| c.ttl(Duration::from_secs(10)))
        .build()?;

    // A multi-lock: both accounts or neither, whatever order they are named in.
    let transfer = redlock.lock_all(["account:7", "account:3"])?;
    println!(
        "holding {:?} as {:?}",
        transfer.resources(),
        transfer.kind()
    );
    transfer.release()?;

    // Readers share; a writer waits for them and then holds alone.
    let reader = redlock.read_lock("doc:1")?;
    let another = redlock.read_lock("doc:1")?;
    println!("two readers of doc:1, {:?} left", reader.validity());
    reader.release()?;
    another.release()?;
    let writer = redlock.write_lock("doc:1")?;
    println!("the writer of doc:1, {:?}", writer.kind());
    writer.release()?;

    // A semaphore of 2: two holders at once, and every holder asks for the same 2.
    let first = redlock.semaphore("pool", 2)?;
    let second = redlock.semaphore("pool", 2)?;
    match redlock.try_semaphore("pool", 3) {
        Err(LockError::Acquire {
            reason:
                AcquireFailure::PermitsMismatch {
                    asked, in_place, ..
                },
            ..
        }) => println!("asked for {asked} permits, but the holders hold {in_place}"),
        other => println!("a third holder: {:?}", other.map(|g| g.kind())),
    }
    first.release()?;
    second.release()?;
    Ok(())
}
