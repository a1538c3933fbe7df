//! The driver under `smol::block_on` with a `smol::Executor` (run by the test thread and one
//! more): a subset of the scenarios, enough to show the async-io reactor is shared.

mod common;

scenario_tests!(on_smol;
    mutual_exclusion(5),
    minority_down_works_majority_down_fails_in_bounded_time(5),
    dropped_lock_future_leaves_no_key(5),
    single_node(1),
    auto_extension_outlasts_a_contender(5),
    thousand_auto_extended_locks(5),
);
