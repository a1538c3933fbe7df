//! The driver conformance suite: every integration scenario written once against the
//! [`Driver`] adapter trait and run for each driver against real servers.
//!
//! Adding a driver means implementing [`Driver`] and [`Guard`] (blocking calls; an async
//! driver wraps each call in its executor's `block_on`) and invoking
//! [`conformance_suite!`] in one of its test files. Scenarios use threads for concurrency,
//! bound every loop in count and time, and start their nodes through `redlock-testkit`,
//! which stops them on drop.

use std::time::{Duration, Instant};

pub use redlock_core::{
    Config, ConfigBuilder, LockError, LockOptions, LostReason, ReleaseOutcome, RetryPolicy,
};

pub mod late_delivery;
pub mod scenarios;

/// A driver under test, seen through blocking calls.
pub trait Driver: Clone + Send + Sync + Sized + 'static {
    /// The driver's lock guard, adapted.
    type Guard: Guard;

    /// Builds a driver for `urls`, with `configure` applied to the core configuration.
    fn build(
        urls: &[String],
        configure: impl FnOnce(ConfigBuilder) -> ConfigBuilder,
    ) -> Result<Self, LockError>;

    /// The configuration in use.
    fn config(&self) -> &Config;

    /// Acquires with per-call options, waiting per the retry policy.
    fn lock_with(&self, resource: &str, options: LockOptions) -> Result<Self::Guard, LockError>;

    /// One attempt, no retry.
    fn try_lock(&self, resource: &str) -> Result<Self::Guard, LockError>;

    /// Starts acquiring and gives up after `after` without a guard: an async driver drops
    /// its `lock()` future, a blocking one uses a wait bound. Returns once given up.
    fn abandon_lock_after(&self, resource: &str, after: Duration);

    /// Runs a closure under `with_lock` (auto-extension) that sleeps `hold` and returns
    /// the validity it saw at the end.
    fn with_lock_holding(&self, resource: &str, hold: Duration) -> Result<Duration, LockError>;

    /// Acquires with the configured policy.
    fn lock(&self, resource: &str) -> Result<Self::Guard, LockError> {
        self.lock_with(resource, LockOptions::default())
    }
}

/// A held lock, seen through blocking calls.
pub trait Guard: Send + 'static {
    /// The token stored on the nodes, as text.
    fn token(&self) -> String;
    /// Validity left now.
    fn validity(&self) -> Duration;
    /// Why the lock was lost, if it was.
    fn lost_reason(&self) -> Option<LostReason>;
    /// Extends by the ttl; the new deadline.
    fn extend(&self) -> Result<Instant, LockError>;
    /// Releases on every node and reports each.
    fn release(self) -> Result<Vec<ReleaseOutcome>, LockError>;
}

/// Generates one `#[test]` per scenario for a driver adapter type.
#[macro_export]
macro_rules! conformance_suite {
    ($driver:ty) => {
        $crate::conformance_suite!(@tests $driver;
            mutual_exclusion,
            minority_down_works_majority_down_fails_in_bounded_time,
            paused_node_is_outwaited_and_rejoins,
            restarted_node_is_reconnected,
            expired_lock_reports_lost_and_leaves_the_next_holder_alone,
            auto_extension_outlasts_a_contender,
            release_spares_another_token,
            release_survives_script_flush,
            abandoned_acquisition_leaves_no_key,
            garbage_node_is_a_failed_vote,
            thousand_auto_extended_locks,
            single_node,
            silent_node_is_outwaited,
            refused_connections_fail_fast,
            bad_urls_and_configs_are_named,
        );
        $crate::conformance_suite!(@late $driver;
            late_release_of_an_earlier_attempt_spares_the_next,
            late_release_of_an_earlier_call_with_the_same_value_spares_the_next,
            reused_values_under_late_delivery_never_overlap,
        );
    };
    (@late $driver:ty; $($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                $crate::late_delivery::$name::<$driver>();
            }
        )*
    };
    (@tests $driver:ty; $($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                $crate::scenarios::$name::<$driver>();
            }
        )*
    };
}
