//! One `held` run's result: [`HeldRow`], its targets, its markdown and its JSON entry
//! ([`HeldEntry`]), and the one-line form ([`encode`], [`decode`]) a child process hands its
//! parent.

use std::fmt::Write as _;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::format::{ratio, rounded, secs, verdict};

/// `held`: one run of N locks held under auto-extension (redlock-tokio only).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct HeldRow {
    /// Not in the child's line: the parent knows the runtime it asked for.
    #[serde(skip)]
    pub(crate) runtime: &'static str,
    pub(crate) locks: usize,
    pub(crate) ttl: Duration,
    /// Auto-extension renews when less than this share of the ttl remains.
    pub(crate) renew_below: f64,
    /// How long all locks were held (the window, as measured).
    pub(crate) held_for: Duration,
    /// From the second lock's acquire to the last's (the first waits for the connections).
    pub(crate) acquire: Duration,
    /// Deadline moves the guards showed during the window.
    pub(crate) renewals: u64,
    /// Extension scripts each node ran during the window: the fewest and most of any node.
    pub(crate) node_extends_min: u64,
    pub(crate) node_extends_max: u64,
    /// Guards reporting a loss at the end of the window.
    pub(crate) lost: usize,
    /// The least validity any guard had left at any sample of the window.
    pub(crate) min_validity: Duration,
    /// After the window: the fewest keys on any node (`DBSIZE`), the keys missing or without
    /// expiry over all nodes, and the smallest PTTL of any key on any node.
    pub(crate) keys_held_min: u64,
    pub(crate) keys_missing: u64,
    pub(crate) min_pttl: Option<Duration>,
    pub(crate) release: Duration,
    /// Releases that some node did not answer with `Released`, and the node answers that
    /// were not: `Failed(Timeout)` (answered after the release timeout), and anything else.
    pub(crate) release_partial: u64,
    pub(crate) release_node_timeouts: u64,
    pub(crate) release_node_other: u64,
    /// Keys on all nodes after the release (`DBSIZE`).
    pub(crate) keys_left: u64,
    /// This process's RSS in bytes: before building the `Redlock`, with every lock held,
    /// at the end of the window, and after the release with the `Redlock` dropped.
    pub(crate) rss_before: u64,
    pub(crate) rss_held: u64,
    pub(crate) rss_end: u64,
    pub(crate) rss_released: u64,
}

impl HeldRow {
    pub(crate) fn renewals_per_s(&self) -> f64 {
        ratio(self.renewals as f64, self.held_for.as_secs_f64())
    }

    /// RSS growth per lock from before the `Redlock` to `rss` (negative if it shrank).
    pub(crate) fn rss_per_lock(&self, rss: u64) -> f64 {
        ratio(rss as f64 - self.rss_before as f64, self.locks as f64)
    }

    /// The target: no lock lost.
    pub(crate) fn none_lost(&self) -> bool {
        self.lost == 0
    }

    /// Every key on every node, none with a PTTL as low as an unrenewed key of the window's
    /// start would have (ttl − window).
    pub(crate) fn keys_renewed(&self) -> bool {
        let floor = self.ttl.saturating_sub(self.held_for);
        self.keys_missing == 0
            && self.keys_held_min == self.locks as u64
            && self.min_pttl.is_some_and(|p| p > floor)
    }

    /// No key left on any node, and no node answered a release with anything but `Released`
    /// or a timeout (a late answer still deletes the key, which `keys_left` checks).
    pub(crate) fn released_clean(&self) -> bool {
        self.release_node_other == 0 && self.keys_left == 0
    }
}

/// The `held` table, one row per lock count; empty without runs.
pub(crate) fn table(held: &[HeldRow]) -> String {
    if held.is_empty() {
        return String::new();
    }
    let mut s = format!(
        "\nheld (redlock-tokio, ttl {}, renew below 2/3 of it, RSS of this process only):\n\n\
         | locks | runtime | acquire | held for | renewals | renewals/s | node extends | lost | \
         min validity | min PTTL | RSS/lock held | RSS/lock end |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|\n",
        held.first().map_or("?".to_owned(), |h| secs(h.ttl)),
    );
    for h in held {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {:.0} | {}–{} | {} | {} | {} | {:.0} B | {:.0} B |",
            h.locks,
            h.runtime,
            secs(h.acquire),
            secs(h.held_for),
            h.renewals,
            h.renewals_per_s(),
            h.node_extends_min,
            h.node_extends_max,
            h.lost,
            secs(h.min_validity),
            h.min_pttl.map_or("none".to_owned(), secs),
            h.rss_per_lock(h.rss_held),
            h.rss_per_lock(h.rss_end),
        );
    }
    s
}

/// The `held` verdict lines, three per run.
pub(crate) fn verdicts(held: &[HeldRow]) -> String {
    let mut s = String::new();
    for h in held {
        let _ = writeln!(
            s,
            "- held / {} locks: lost == 0: {} ({})",
            h.locks,
            verdict(h.none_lost()),
            h.lost
        );
        let _ = writeln!(
            s,
            "- held / {} locks: every key on every node, min PTTL > ttl - window: {} \
             ({} missing, min PTTL {})",
            h.locks,
            verdict(h.keys_renewed()),
            h.keys_missing,
            h.min_pttl.map_or("none".to_owned(), secs),
        );
        let _ = writeln!(
            s,
            "- held / {} locks: released, no key left, no node answer but Released or a \
             timeout: {} ({} left; {} releases partial: {} node timeouts, {} other)",
            h.locks,
            verdict(h.released_clean()),
            h.keys_left,
            h.release_partial,
            h.release_node_timeouts,
            h.release_node_other,
        );
    }
    s
}

/// One `held` run in the JSON report (durations in ms or s, as named).
#[derive(Debug, Serialize)]
pub(crate) struct HeldEntry {
    runtime: &'static str,
    locks: usize,
    ttl_ms: u128,
    renew_below: Option<f64>,
    acquire_s: Option<f64>,
    held_s: Option<f64>,
    renewals: u64,
    renewals_per_s: Option<f64>,
    node_extends_min: u64,
    node_extends_max: u64,
    lost: usize,
    min_validity_ms: u128,
    keys_held_min: u64,
    keys_missing: u64,
    min_pttl_ms: Option<u128>,
    release_s: Option<f64>,
    release_partial: u64,
    release_node_timeouts: u64,
    release_node_other: u64,
    keys_left: u64,
    rss_before: u64,
    rss_held: u64,
    rss_end: u64,
    rss_released: u64,
    rss_per_lock_held: Option<f64>,
    rss_per_lock_end: Option<f64>,
    none_lost: bool,
    keys_renewed: bool,
    released_clean: bool,
}

impl HeldRow {
    /// This run's entry in the JSON report.
    pub(crate) fn entry(&self) -> HeldEntry {
        HeldEntry {
            runtime: self.runtime,
            locks: self.locks,
            ttl_ms: self.ttl.as_millis(),
            renew_below: rounded(self.renew_below, 4),
            acquire_s: rounded(self.acquire.as_secs_f64(), 3),
            held_s: rounded(self.held_for.as_secs_f64(), 3),
            renewals: self.renewals,
            renewals_per_s: rounded(self.renewals_per_s(), 4),
            node_extends_min: self.node_extends_min,
            node_extends_max: self.node_extends_max,
            lost: self.lost,
            min_validity_ms: self.min_validity.as_millis(),
            keys_held_min: self.keys_held_min,
            keys_missing: self.keys_missing,
            min_pttl_ms: self.min_pttl.map(|p| p.as_millis()),
            release_s: rounded(self.release.as_secs_f64(), 3),
            release_partial: self.release_partial,
            release_node_timeouts: self.release_node_timeouts,
            release_node_other: self.release_node_other,
            keys_left: self.keys_left,
            rss_before: self.rss_before,
            rss_held: self.rss_held,
            rss_end: self.rss_end,
            rss_released: self.rss_released,
            rss_per_lock_held: rounded(self.rss_per_lock(self.rss_held), 4),
            rss_per_lock_end: rounded(self.rss_per_lock(self.rss_end), 4),
            none_lost: self.none_lost(),
            keys_renewed: self.keys_renewed(),
            released_clean: self.released_clean(),
        }
    }
}

/// The result as one line: [`LINE_TAG`] and the row as JSON.
pub(crate) fn encode(h: &HeldRow) -> String {
    // Numbers, durations and options only: serialising cannot fail.
    let json = serde_json::to_string(h).expect("a held row serialises");
    format!("{LINE_TAG} {json}")
}

/// Parses [`encode`]'s line; every field is required.
pub(crate) fn decode(runtime: &'static str, line: &str) -> Result<HeldRow, String> {
    let rest = line
        .strip_prefix(LINE_TAG)
        .ok_or_else(|| format!("held: not a result line: {line:?}"))?;
    let row: HeldRow =
        serde_json::from_str(rest).map_err(|e| format!("held: bad result line {line:?}: {e}"))?;
    Ok(HeldRow { runtime, ..row })
}

/// How the child's result line starts.
const LINE_TAG: &str = "held-result";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_result_line_round_trips() {
        let row = HeldRow {
            runtime: "multi_thread(2)",
            locks: 100_000,
            ttl: Duration::from_secs(30),
            renew_below: 2.0 / 3.0,
            held_for: Duration::from_millis(20_004),
            acquire: Duration::from_millis(2_213),
            renewals: 200_000,
            node_extends_min: 199_990,
            node_extends_max: 200_000,
            lost: 0,
            min_validity: Duration::from_millis(19_900),
            keys_held_min: 100_000,
            keys_missing: 0,
            min_pttl: None,
            release: Duration::from_millis(2_682),
            release_partial: 256,
            release_node_timeouts: 256,
            release_node_other: 0,
            keys_left: 0,
            rss_before: 24_727_552,
            rss_held: 248_381_440,
            rss_end: 266_809_344,
            rss_released: 272_220_160,
        };
        let back = decode("multi_thread(2)", &encode(&row)).expect("decodes");
        assert_eq!(format!("{back:?}"), format!("{row:?}"));
        let pttl = HeldRow {
            min_pttl: Some(Duration::from_millis(27_100)),
            ..row
        };
        assert_eq!(
            decode("x", &encode(&pttl)).expect("decodes").min_pttl,
            pttl.min_pttl
        );
        assert!(decode("x", "held-result {\"locks\": 1}").is_err());
        assert!(decode("x", "something else").is_err());
    }
}
