//! `with_lock` on a current-thread runtime whose closure blocks the runtime's only thread, so
//! the driver task cannot run while the lock expires (a review's finding). The loop never handles
//! the deadline before the closure returns; `with_lock` must still report the loss.

use std::convert::Infallible;
use std::thread;
use std::time::Duration;

use redlock_testkit::Cluster;
use redlock_tokio::{LockError, LockOptions, LostReason, Redlock, RetryPolicy, WithLockError};

#[test]
fn closure_blocking_while_another_client_locks_is_lost() {
    let c = Cluster::start(3).expect("start test nodes");
    let urls = c.urls();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let redlock = {
        let _entered = rt.enter();
        Redlock::builder(&urls)
            .and_then(|b| b.config(|c| c.ttl(Duration::from_millis(300))).build())
            .expect("build")
    };
    let mut second = None;
    let result = rt.block_on(redlock.with_lock("blocked", |_lock| async {
        // Blocks this runtime's only thread until a second client, on a runtime of its
        // own, holds the same resource: our keys have expired by then, so our deadline has
        // passed, by construction rather than by timing.
        let other = thread::spawn(move || lock_and_release(&urls));
        second = Some(other.join().expect("the second client's thread"));
        Ok::<_, Infallible>(())
    }));
    assert_eq!(second, Some(Ok(())), "the second client never got the lock");
    assert!(
        matches!(
            result,
            Err(WithLockError::Lock(LockError::Lost(
                LostReason::DeadlinePassed
            )))
        ),
        "{result:?}"
    );
}

/// Locks "blocked" as a second client, waiting up to 5 s, then releases it.
fn lock_and_release(urls: &[String]) -> Result<(), LockError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(|e| LockError::Start(e.to_string()))?;
    rt.block_on(async {
        let other = Redlock::new(urls)?;
        let wait = LockOptions::default().retry(RetryPolicy {
            max_attempts: None,
            max_wait: Some(Duration::from_secs(5)),
            delay_min: Duration::from_millis(10),
            delay_max: Duration::from_millis(20),
        });
        other.lock_with("blocked", wait).await?.release().await?;
        Ok(())
    })
}
