//! One clock under tokio's paused time: the guard's `validity()` counts down only as tokio's
//! clock moves, and the driver loop reports the loss exactly when it reaches zero. A guard
//! that read std's clock would see almost no time pass here, and a loop that read it would
//! never see the deadline.

use std::time::Duration;

use redlock_testkit::Cluster;
use redlock_tokio::{AutoExtend, LockOptions, LostReason, Redlock};

#[test]
fn validity_and_the_core_agree_on_paused_time() {
    let c = Cluster::start(1).expect("start a test node");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    rt.block_on(async {
        let redlock = Redlock::builder(c.urls())
            .expect("urls")
            .config(|c| c.ttl(Duration::from_secs(10)))
            .build()
            .expect("build");
        // Acquired on real time: paused time would let the attempt's timer overtake the
        // node's reply. No auto-extension, so the deadline stays where it is.
        let options = LockOptions::default().auto_extend(None::<AutoExtend>);
        let guard = redlock.lock_with("paused", options).await.expect("lock");

        tokio::time::pause();
        let left = guard.validity();
        assert!(left > Duration::from_secs(5), "{left:?}");
        // Paused: nothing moves until we advance.
        tokio::task::yield_now().await;
        assert_eq!(guard.validity(), left);

        tokio::time::advance(left - MS).await;
        assert_eq!(guard.validity(), MS, "the guard reads tokio's clock");
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert_eq!(guard.lost_reason(), None, "lost before its deadline");

        tokio::time::advance(MS).await;
        assert_eq!(guard.validity(), Duration::ZERO);
        // The loop's timer counts in the same clock: the loss comes now, not 10 s later.
        let lost = tokio::time::timeout(5 * MS, guard.lost()).await;
        assert_eq!(lost, Ok(LostReason::DeadlinePassed));
    });
}

const MS: Duration = Duration::from_millis(1);
