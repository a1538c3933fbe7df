//! One `held` run's result: [`HeldRow`], its targets, its markdown and JSON, and the one-line
//! form ([`encode`], [`decode`]) a child process hands its parent.

use std::fmt::Write as _;
use std::time::Duration;

use crate::report::{number, quote, ratio, secs, verdict};

/// `held`: one run of N locks held under auto-extension (redlock-tokio only).
#[derive(Debug, Clone)]
pub(crate) struct HeldRow {
    pub(crate) runtime: &'static str,
    pub(crate) locks: usize,
    pub(crate) ttl: Duration,
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

/// The `held` runs as the entries of a JSON array (durations in ms or s, as named).
pub(crate) fn json(held: &[HeldRow]) -> String {
    let mut s = String::new();
    for (i, h) in held.iter().enumerate() {
        let _ = write!(
            s,
            "    {{\"runtime\": {}, \"locks\": {}, \"ttl_ms\": {}, \"renew_below\": {:.4}, \
             \"acquire_s\": {:.3}, \"held_s\": {:.3}, \"renewals\": {}, \
             \"renewals_per_s\": {}, \"node_extends_min\": {}, \"node_extends_max\": {}, \
             \"lost\": {}, \"min_validity_ms\": {}, \"keys_held_min\": {}, \
             \"keys_missing\": {}, \"min_pttl_ms\": {}, \"release_s\": {:.3}, \
             \"release_partial\": {}, \"release_node_timeouts\": {}, \
             \"release_node_other\": {}, \"keys_left\": {}, \"rss_before\": {}, \"rss_held\": {}, \
             \"rss_end\": {}, \"rss_released\": {}, \"rss_per_lock_held\": {}, \
             \"rss_per_lock_end\": {}, \"none_lost\": {}, \"keys_renewed\": {}, \
             \"released_clean\": {}}}",
            quote(h.runtime),
            h.locks,
            h.ttl.as_millis(),
            super::RENEW_BELOW,
            h.acquire.as_secs_f64(),
            h.held_for.as_secs_f64(),
            h.renewals,
            number(h.renewals_per_s()),
            h.node_extends_min,
            h.node_extends_max,
            h.lost,
            h.min_validity.as_millis(),
            h.keys_held_min,
            h.keys_missing,
            h.min_pttl
                .map_or("null".to_owned(), |p| p.as_millis().to_string()),
            h.release.as_secs_f64(),
            h.release_partial,
            h.release_node_timeouts,
            h.release_node_other,
            h.keys_left,
            h.rss_before,
            h.rss_held,
            h.rss_end,
            h.rss_released,
            number(h.rss_per_lock(h.rss_held)),
            number(h.rss_per_lock(h.rss_end)),
            h.none_lost(),
            h.keys_renewed(),
            h.released_clean(),
        );
        s.push_str(if i + 1 < held.len() { ",\n" } else { "\n" });
    }
    s
}

/// The result as one line of `name=value` pairs (durations and bytes as integers).
pub(crate) fn encode(h: &HeldRow) -> String {
    let ns = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
    let fields: [(&str, u64); 21] = [
        ("locks", h.locks as u64),
        ("ttl_ns", ns(h.ttl)),
        ("held_ns", ns(h.held_for)),
        ("acquire_ns", ns(h.acquire)),
        ("renewals", h.renewals),
        ("node_extends_min", h.node_extends_min),
        ("node_extends_max", h.node_extends_max),
        ("lost", h.lost as u64),
        ("min_validity_ns", ns(h.min_validity)),
        ("keys_held_min", h.keys_held_min),
        ("keys_missing", h.keys_missing),
        // No key with a PTTL at all: `u64::MAX`.
        ("min_pttl_ns", h.min_pttl.map_or(u64::MAX, ns)),
        ("release_ns", ns(h.release)),
        ("release_partial", h.release_partial),
        ("release_node_timeouts", h.release_node_timeouts),
        ("release_node_other", h.release_node_other),
        ("keys_left", h.keys_left),
        ("rss_before", h.rss_before),
        ("rss_held", h.rss_held),
        ("rss_end", h.rss_end),
        ("rss_released", h.rss_released),
    ];
    let pairs: Vec<String> = fields.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("{LINE_TAG} {}", pairs.join(" "))
}

/// Parses [`encode`]'s line; every field is required.
pub(crate) fn decode(runtime: &'static str, line: &str) -> Result<HeldRow, String> {
    let bad = || format!("held: not a result line: {line:?}");
    let rest = line.strip_prefix(LINE_TAG).ok_or_else(bad)?;
    let fields: Vec<(&str, u64)> = rest
        .split_whitespace()
        .map(|pair| {
            let (k, v) = pair.split_once('=')?;
            Some((k, v.parse().ok()?))
        })
        .collect::<Option<_>>()
        .ok_or_else(bad)?;
    let get = |name: &str| {
        fields
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| *v)
            .ok_or_else(|| format!("held: no {name} in {line:?}"))
    };
    let dur = |name: &str| get(name).map(Duration::from_nanos);
    let count = |name: &str| get(name).and_then(|v| usize::try_from(v).map_err(|_| bad()));
    let min_pttl = get("min_pttl_ns")?;
    Ok(HeldRow {
        runtime,
        locks: count("locks")?,
        ttl: dur("ttl_ns")?,
        held_for: dur("held_ns")?,
        acquire: dur("acquire_ns")?,
        renewals: get("renewals")?,
        node_extends_min: get("node_extends_min")?,
        node_extends_max: get("node_extends_max")?,
        lost: count("lost")?,
        min_validity: dur("min_validity_ns")?,
        keys_held_min: get("keys_held_min")?,
        keys_missing: get("keys_missing")?,
        min_pttl: (min_pttl != u64::MAX).then(|| Duration::from_nanos(min_pttl)),
        release: dur("release_ns")?,
        release_partial: get("release_partial")?,
        release_node_timeouts: get("release_node_timeouts")?,
        release_node_other: get("release_node_other")?,
        keys_left: get("keys_left")?,
        rss_before: get("rss_before")?,
        rss_held: get("rss_held")?,
        rss_end: get("rss_end")?,
        rss_released: get("rss_released")?,
    })
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
        assert!(decode("x", "held-result locks=1").is_err());
        assert!(decode("x", "something else").is_err());
    }
}
