//! Property (S) when a driver keeps reading connections the client replaced (connection
//! generations: docs/design.md, "Connections: generations and reasons"): with links cut every few milliseconds while replies are in
//! flight, every reply that reaches a given-up connection is fed to the client under that
//! connection's `ConnId`. The client ignores input from any connection but the node's
//! current one; credited to the new connection instead, an old `+OK` would answer the new
//! connection's first request (replies are matched by position), and a `SET` that never
//! succeeded would count as a vote.

mod common;

use common::{MUTANT_BUDGET, assert_safe, family_count, first_violation, stale_reads};

#[test]
fn replies_read_from_replaced_connections_are_ignored() {
    let (mut stale, mut cuts) = (0, 0);
    for seed in 0..family_count() {
        let report = assert_safe(stale_reads(seed, false));
        stale += u64::from(report.stats.stale_reads);
        cuts += u64::from(report.stats.cuts);
    }
    // The family must exercise the rule, or passing it says nothing.
    assert!(cuts > 100, "only {cuts} cuts");
    assert!(stale > 100, "only {stale} stale reads");
}

/// The negative control: the same stale bytes fed under the node's *current* connection, as
/// a driver without generations would, break property (S) within the mutant budget.
#[test]
fn replies_credited_to_the_new_connection_break_mutual_exclusion() {
    let report = first_violation(MUTANT_BUDGET, |seed| stale_reads(seed, true))
        .expect("a driver that mixes up its connections is caught");
    println!("caught at seed {}", report.seed);
}
