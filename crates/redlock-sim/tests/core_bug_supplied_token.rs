//! Regression test for a safety bug the simulation found in `redlock-core`: with a
//! caller-supplied token (`LockOptions::token`), a failed attempt's cleanup release could
//! delete the next attempt's key on a node, so two clients held the lock at once.
//!
//! How: attempt k's cleanup release goes out as `EVALSHA` and meets `-NOSCRIPT` (the node's
//! script cache was flushed, or preloading is off); attempt k+1 starts after a short retry
//! delay and its `SET key T NX PX` was already on the wire when the round resent the release
//! as `EVAL`. The node ran `SET` (OK, key = T), then `EVAL release(T)`, which deleted that
//! key because the token is the same. The client counted the node as locked and reported
//! `Acquired` with fewer real keys than a quorum; another client then locked a quorum. Fresh
//! per-attempt tokens are immune (the stale release compares another token), which the
//! first test shows. Fixed in the core by 323c4e6 (a round's request to a node waits while an
//! older cleanup round is open there); the second test guards it, and on failure prints the
//! node's `SET`-then-`EVAL` pair from a replay of the failing seed.
//!
//! That fix orders requests on one connection only. If the connection's client side dies
//! while the cleanup release is still on its way (a half-close with late delivery), the
//! cleanup counts as failed, the next attempt's `SET` goes out on a new connection, and the
//! late release can again delete its key, shown by `tests/late_delivery.rs`.
//! The scenarios here have no half-closes, so they test the one-connection case alone.

mod common;

use common::{assert_safe, reorder};
use redlock_sim::Sim;

const SEEDS: u64 = 40;

#[test]
fn fresh_tokens_survive_resent_cleanup_releases() {
    for seed in 0..SEEDS {
        assert_safe(reorder(seed, false));
    }
}

#[test]
fn supplied_tokens_survive_resent_cleanup_releases() {
    for seed in 0..SEEDS {
        let report = Sim::new(reorder(seed, true)).run();
        if let Some(v) = report.violation {
            // The workload's supplied tokens are `c<client>-o<op number from 1>`.
            let tokens =
                [&v.first, &v.second].map(|iv| format!("c{}-o{}", iv.client, iv.op.as_raw() + 1));
            let evidence: Vec<String> = resent_release_after_set(seed)
                .into_iter()
                .filter(|pair| tokens.iter().any(|t| pair.contains(&format!(" {t} "))))
                .collect();
            panic!(
                "property (S) broken: {v}\nOn one node, in a row, a holder's SET and the resent \
                 EVAL release of its earlier attempt (same token):\n{}",
                evidence.join("\n")
            );
        }
    }
}

/// Replays `seed` with the log on and returns each `SET key T -> OK` immediately followed,
/// on the same node, by an `EVAL` release of `T` that deleted the key.
fn resent_release_after_set(seed: u64) -> Vec<String> {
    let scenario = reorder(seed, true);
    let limit = scenario.time_limit;
    let mut sim = Sim::new(scenario);
    sim.enable_log();
    sim.run_until(limit, u64::MAX);
    let mut pairs = Vec::new();
    let mut last_set: Vec<Option<&String>> = vec![None; 8];
    for line in sim.log() {
        let Some(node) = node_of(line) else {
            continue;
        };
        if let Some(set) = last_set[node].take() {
            let token = set.split_whitespace().skip_while(|w| *w != "SET").nth(2);
            let deleted_by_eval = line.contains(": EVAL ") && line.ends_with("-> Int(1)");
            if deleted_by_eval && token.is_some_and(|t| line.contains(&format!(" {t} "))) {
                pairs.push(format!("{set}\n{line}"));
            }
        }
        if line.contains(": SET ") && line.ends_with("-> Ok") {
            last_set[node] = Some(line);
        }
    }
    pairs
}

/// The node index of a log line `<time> node <n> <- client ...`.
fn node_of(line: &str) -> Option<usize> {
    let head = line.split(" <- ").next()?;
    head.split("node ").nth(1)?.parse().ok()
}
