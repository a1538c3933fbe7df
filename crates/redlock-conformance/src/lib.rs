//! The driver conformance suite: every integration scenario written once against the
//! [`Driver`] adapter trait and run for each driver against real servers.
//!
//! Adding a driver means implementing [`Driver`] and [`Guard`] (blocking calls; an async
//! driver wraps each call in its executor's `block_on`) and invoking
//! [`conformance_suite!`] in one of its test files. Scenarios use threads for concurrency,
//! bound every loop in count and time, and start their nodes through `redlock-testkit`,
//! which stops them on drop.

use std::thread;
use std::time::{Duration, Instant};

pub use redlock_core::{
    AcquireFailure, AcquireStats, Config, ConfigBuilder, Inspection, LockKind, LockOptions,
    LostReason, ReleaseOutcome, RetryPolicy,
};
pub use redlock_driver::LockError;

pub mod acl;
pub mod broken_link;
pub mod closed_after_reply;
pub mod composition;
pub mod defects;
pub mod errors;
pub mod fencing;
pub mod inspection;
pub mod kinds;
pub mod kleppmann;
pub mod late_delivery;
pub mod mixed;
pub mod node_faults;
pub mod notification;
pub mod observe;
pub mod queueing;
pub mod readme;
pub mod release_quorum;
pub mod restart_quarantine;
pub mod rules;
pub mod scenarios;
pub mod servers;
pub mod transport;
pub mod waiters;

/// A driver under test, seen through blocking calls.
pub trait Driver: Clone + Send + Sync + Sized + 'static {
    /// The driver's lock guard, adapted.
    type Guard: Guard;

    /// Builds a driver for `urls`, with `configure` applied to the core configuration.
    fn build(
        urls: &[String],
        configure: impl FnOnce(ConfigBuilder) -> ConfigBuilder,
    ) -> Result<Self, LockError>;

    /// [`build`](Self::build) with a connect timeout (the driver's, not the core's).
    fn build_with_connect_timeout(
        urls: &[String],
        connect_timeout: Duration,
        configure: impl FnOnce(ConfigBuilder) -> ConfigBuilder,
    ) -> Result<Self, LockError>;

    /// The configuration in use.
    fn config(&self) -> &Config;

    /// The driver's `Redlock` handle as `{:?}` prints it.
    fn handle_debug(&self) -> String;

    /// Acquires with per-call options, waiting per the retry policy.
    fn lock_with(&self, resource: &str, options: LockOptions) -> Result<Self::Guard, LockError>;

    /// Acquires every resource of `resources` at once (a multi-lock) with per-call options,
    /// waiting per the retry policy.
    fn lock_all_with(
        &self,
        resources: &[&str],
        options: LockOptions,
    ) -> Result<Self::Guard, LockError>;

    /// Starts acquiring with `options` (one resource: a lock of the options' kind; several:
    /// a multi-lock) and gives up after `after` without a guard: an async driver drops its
    /// future, a blocking one uses a wait bound. Returns once given up.
    fn abandon_after(&self, resources: &[&str], options: LockOptions, after: Duration);

    /// One attempt, no retry.
    fn try_lock(&self, resource: &str) -> Result<Self::Guard, LockError>;

    /// Runs a closure under `with_lock` (auto-extension) that sleeps `hold` and returns
    /// the validity it saw at the end.
    fn with_lock_holding(&self, resource: &str, hold: Duration) -> Result<Duration, LockError>;

    /// Runs a closure under `with_lock` that blocks its thread with [`sleep_past`] until
    /// `past` after the lock's deadline, then returns `Ok`; the lock error, if any.
    fn with_lock_past_deadline(&self, resource: &str, past: Duration) -> Result<(), LockError>;

    /// Looks at `resource` on every node without changing anything.
    fn inspect(&self, resource: &str) -> Result<Inspection, LockError>;

    /// Releases `resource` where it holds exactly `token`; each node's outcome.
    fn release_token(&self, resource: &str, token: &str) -> ReleaseResult;

    /// Starts acquiring `resource` with the configured policy and gives up after `after`
    /// without a guard ([`abandon_after`](Self::abandon_after)). Returns once given up.
    fn abandon_lock_after(&self, resource: &str, after: Duration) {
        self.abandon_after(&[resource], LockOptions::default(), after);
    }

    /// Acquires with the configured policy.
    fn lock(&self, resource: &str) -> Result<Self::Guard, LockError> {
        self.lock_with(resource, LockOptions::default())
    }
}

/// A held lock, seen through blocking calls.
pub trait Guard: Send + 'static {
    /// The token stored on the nodes, as text.
    fn token(&self) -> String;
    /// The kind the lock was taken as.
    fn kind(&self) -> LockKind;
    /// Every resource it holds, as text (a multi-lock's in byte order).
    fn resources(&self) -> Vec<String>;
    /// Validity left now.
    fn validity(&self) -> Duration;
    /// Why the lock was lost, if it was.
    fn lost_reason(&self) -> Option<LostReason>;
    /// How the acquisition went (attempts, time, each node's answer).
    fn stats(&self) -> AcquireStats;
    /// The fencing token of a fenced lock.
    fn fencing_token(&self) -> Option<u64>;
    /// Extends by the ttl; the new deadline.
    fn extend(&self) -> Result<Instant, LockError>;
    /// Releases on every node and reports each.
    fn release(self) -> Result<Vec<ReleaseOutcome>, LockError>;
    /// Starts an extension and, `after` later, a release, without waiting for the
    /// extension's answer (an async driver joins the two futures, a blocking one calls them
    /// from two threads); both answers.
    fn extend_then_release(self, after: Duration) -> (Result<Instant, LockError>, ReleaseResult);
}

/// What [`Guard::release`] returns.
pub type ReleaseResult = Result<Vec<ReleaseOutcome>, LockError>;

/// Asserts that `report` is a release report of `nodes` nodes on which every node that had
/// answered answered `expected`. A release returns once a quorum has answered, so a node
/// may still be [`ReleaseOutcome::Pending`] (released in the background, bounded by the
/// release timeout); a quorum (`nodes / 2 + 1`) must have answered.
#[track_caller]
pub fn assert_report(report: &ReleaseResult, expected: &ReleaseOutcome, nodes: usize) {
    let ok = report.as_ref().is_ok_and(|r| {
        let answered = r.iter().filter(|o| *o == expected).count();
        r.len() == nodes
            && answered > nodes / 2
            && (r.iter()).all(|o| o == expected || *o == ReleaseOutcome::Pending)
    });
    assert!(
        ok,
        "expected {expected:?} on {nodes} nodes (some pending): {report:?}"
    );
}

/// Blocks the calling thread until `past` after `deadline` by std's clock (the drivers'
/// clock in these tests), and returns as soon after as it can: a sleep to just short of it,
/// then yields.
pub fn sleep_past(deadline: Instant, past: Duration) {
    let Some(until) = deadline.checked_add(past) else {
        return;
    };
    let early = until.checked_sub(2 * SPIN).unwrap_or(until);
    thread::sleep(early.saturating_duration_since(Instant::now()));
    while Instant::now() < until {
        thread::yield_now();
    }
}

/// How long [`sleep_past`] spins rather than sleeps, twice over.
const SPIN: Duration = Duration::from_millis(1);

/// Generates one `#[test]` per scenario for a driver adapter type.
#[macro_export]
macro_rules! conformance_suite {
    ($driver:ty) => {
        $crate::conformance_suite!(@tests $driver;
            scenarios::mutual_exclusion,
            scenarios::minority_down_works_majority_down_fails_in_bounded_time,
            scenarios::paused_node_is_outwaited_and_rejoins,
            scenarios::restarted_node_is_reconnected,
            scenarios::expired_lock_reports_lost_and_leaves_the_next_holder_alone,
            scenarios::auto_extension_outlasts_a_contender,
            scenarios::release_spares_another_token,
            scenarios::release_survives_script_flush,
            scenarios::abandoned_acquisition_leaves_no_key,
            scenarios::garbage_node_is_a_failed_vote,
            scenarios::thousand_auto_extended_locks,
            scenarios::single_node,
            scenarios::silent_node_is_outwaited,
            scenarios::refused_connections_fail_fast,
            scenarios::bad_urls_and_configs_are_named,
            scenarios::debug_output_hides_passwords,
            scenarios::statistics_on_success_and_failure,
            queueing::a_hundred_calls_of_one_client_take_turns_without_retrying,
            notification::a_waiter_gets_the_lock_as_soon_as_it_is_released,
            notification::a_dropped_subscription_falls_back_to_the_timer_and_is_made_again,
            notification::a_node_denying_the_channel_keeps_its_connection,
            waiters::waiters_of_other_clients_take_turns_in_order,
            waiters::a_dead_waiter_holds_the_queue_no_longer_than_its_place_lasts,
            waiters::a_contested_lines_next_call_takes_its_turn_at_one_attempt,
            waiters::a_line_handing_over_lets_a_new_waiter_in_within_a_few_sections,
            waiters::a_line_that_met_another_client_hands_over_again_once_alone,
            waiters::a_waiter_that_cannot_hear_polls_and_gets_the_lock_soon,
            node_faults::a_release_after_client_kill_leaves_no_key,
            node_faults::an_extension_refused_for_good_is_lost_at_once,
            restart_quarantine::a_node_restarted_empty_votes_no_until_its_window_passes,
            restart_quarantine::a_node_that_syncs_every_write_is_not_quarantined,
            restart_quarantine::a_fresh_client_refuses_a_node_that_started_long_after_its_peers,
            restart_quarantine::a_server_named_twice_votes_once,
            defects::extreme_durations_keep_the_driver_alive,
            defects::with_lock_past_the_deadline_is_lost,
            defects::extension_racing_release_is_never_shutdown,
            defects::paused_node_backlog_is_capped,
            release_quorum::release_returns_at_quorum_and_finishes_on_the_paused_node,
            release_quorum::a_release_lost_on_a_broken_link_is_resent_in_the_background,
            broken_link::an_extension_lost_on_a_broken_link_is_not_resent,
            closed_after_reply::a_node_that_closes_right_after_a_reply_is_reconnected_while_idle,
            late_delivery::late_release_of_an_earlier_attempt_spares_the_next,
            late_delivery::late_release_of_an_earlier_call_with_the_same_value_spares_the_next,
            late_delivery::reused_values_under_late_delivery_never_overlap,
            rules::extension_spares_another_token,
            rules::extension_never_recreates_a_missing_key,
            inspection::inspection_shows_the_holder_and_release_by_token_frees_it,
            inspection::inspection_works_where_scripts_are_denied,
            fencing::fencing_tokens_grow_across_clients,
            fencing::a_counter_behind_is_written_back_and_an_empty_restart_keeps_tokens_growing,
            fencing::a_fenced_lock_without_scripting_permission_fails_naming_each_node,
            kleppmann::a_paused_holder_s_late_write_is_refused,
            mixed::mixed_cluster_3_redis_2_valkey,
            mixed::mixed_cluster_2_redis_3_valkey,
            acl::scripting_denied_by_acl,
            transport::tls_lock_and_release,
            transport::mtls_required_and_supplied,
            transport::tls_untrusted_ca,
            transport::tls_name_mismatch,
            transport::tls_expired_certificate,
            transport::tls_ca_certificate_as_server_certificate,
            transport::tls_and_plain_mixed_up,
            transport::tls_unreadable_ca_file,
            transport::unix_socket_lock_and_release,
            transport::unix_socket_missing,
            errors::errors_refused_connection,
            errors::errors_connect_timeout,
            errors::errors_dns_failure,
            errors::errors_wrong_password,
            errors::errors_no_password,
            errors::errors_noperm_on_set,
            errors::errors_noperm_on_evalsha,
            errors::errors_noperm_on_delifeq,
            errors::errors_wrongtype,
            errors::errors_oom,
            errors::errors_readonly_replica,
            errors::errors_not_a_redis_port,
            errors::errors_url_without_host,
            errors::errors_url_port_not_a_number,
            errors::errors_url_port_zero,
            errors::errors_url_port_out_of_range,
            errors::errors_url_unknown_scheme,
            errors::errors_ttl_zero,
            errors::errors_ttl_too_small,
            errors::errors_ttl_too_large,
            errors::errors_empty_resource,
            composition::a_later_holder_never_gets_a_smaller_fencing_token_after_an_empty_restart,
            composition::a_waiter_of_another_client_gets_the_lock_from_a_busy_line,
            composition::a_waiter_that_cannot_subscribe_gets_the_lock_from_a_busy_line,
            composition::releases_refused_late_leave_no_key,
            kinds::overlapping_multi_locks_never_hold_together_and_both_finish,
            kinds::a_node_holding_part_of_a_set_votes_no_and_keeps_nothing,
            kinds::readers_overlap_and_a_writer_holds_alone,
            kinds::a_writer_behind_a_stream_of_readers_gets_in,
            kinds::a_reader_s_slot_is_gone_after_its_release_and_after_its_ttl,
            kinds::a_node_that_answers_last_takes_part_in_readers_after_its_first_use,
            kinds::a_third_holder_of_two_permits_waits_until_one_releases,
            kinds::a_holder_asking_another_k_gets_the_permits_error,
            kinds::a_semaphore_of_two_on_five_nodes_needs_four,
            kinds::a_cancelled_acquisition_of_each_kind_leaves_nothing_on_any_node,
            kinds::a_node_killed_mid_hold_and_every_kind_is_still_released_on_the_others,
            kinds::a_writer_granted_beside_a_refusing_node_leaves_no_mark_after_its_release,
            kinds::the_kinds_wrong_calls_are_refused_with_their_messages,
        );
    };
    (@tests $driver:ty; $($module:ident::$name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                $crate::$module::$name::<$driver>();
            }
        )*
    };
}
