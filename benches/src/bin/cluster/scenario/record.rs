//! The contended scenarios' per-section records and what is derived from them once a round
//! is over: hand-off latency, overlapping critical sections (violations, also across
//! processes), and sections per worker (fairness). Pure functions of the records.
//!
//! Every timestamp is nanoseconds since the Unix epoch (`SystemTime`), so that the records
//! of two processes on one machine share a clock; waits are measured with `Instant`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::stats::Samples;

/// One critical section that was entered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SectionRecord {
    /// The worker, numbered across processes (0..8).
    pub(crate) worker: u32,
    /// From the lock call to its success, in nanoseconds (`Instant`).
    pub(crate) wait_ns: u64,
    /// When the lock call returned the lock.
    pub(crate) acquired: u64,
    /// When the critical section started (after `acquired`) and ended (before the release
    /// was sent).
    pub(crate) entered: u64,
    pub(crate) left: u64,
    /// When the release call returned (its reply).
    pub(crate) released: u64,
    /// Attempts the lock call made (its `AcquireStats`: 0 for a local hand-over or a hold
    /// by grants); `None` where the client does not say (rslock).
    #[serde(default)]
    pub(crate) attempts: Option<u32>,
}

/// What one round showed, from the records of every process that ran it.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct RoundAnalysis {
    /// Hand-off latencies: the next holder's `acquired` minus the previous holder's
    /// `released`, in critical-section order; a negative one counts as zero.
    pub(crate) handoffs: Vec<Duration>,
    /// Hand-offs where the next holder had the lock before the previous holder's release
    /// call returned (counted as zero in `handoffs`).
    pub(crate) handoffs_early: u64,
    /// Critical sections that started before an earlier one (in start order) ended.
    pub(crate) overlaps: u64,
    /// The lock's dead time at each hand-off: the next section's `entered` minus the
    /// previous one's `left` (zero for an overlap). What a hand-off costs the throughput:
    /// sections per second are one over the section plus this.
    pub(crate) gaps: Vec<Duration>,
}

/// Now, in nanoseconds since the Unix epoch; 0 if the clock is before it.
pub(crate) fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// Hand-offs and overlaps of one round's records (any order, any processes).
pub(crate) fn analyse(records: &[SectionRecord]) -> RoundAnalysis {
    let mut sorted: Vec<&SectionRecord> = records.iter().collect();
    sorted.sort_by_key(|r| (r.entered, r.left));
    let mut out = RoundAnalysis::default();
    let mut latest_left = 0;
    for (i, r) in sorted.iter().enumerate() {
        if i > 0 && r.entered < latest_left {
            out.overlaps += 1;
        }
        latest_left = latest_left.max(r.left);
        if let Some(prev) = i.checked_sub(1).map(|j| sorted[j]) {
            let gap = r.entered.saturating_sub(prev.left);
            out.gaps.push(Duration::from_nanos(gap));
            match r.acquired.checked_sub(prev.released) {
                Some(ns) => out.handoffs.push(Duration::from_nanos(ns)),
                None => {
                    out.handoffs_early += 1;
                    out.handoffs.push(Duration::ZERO);
                }
            }
        }
    }
    out
}

/// The environment variable naming a file that every process of a contended scenario
/// appends its sections to, one JSON line each (`subject`, `pid` and the record's fields),
/// for an outside analysis such as `benches/scripts/handoff_gap.py` (benches/README.md,
/// "Where a hand-off's dead time goes").
pub(crate) const RECORDS_ENV: &str = "REDLOCK_BENCH_RECORDS";

/// Appends `records` of `subject` to the file [`RECORDS_ENV`] names, if it is set, in one
/// write (the processes of a round append to the same file). A file that cannot be written
/// is reported on stderr, and the run goes on.
pub(crate) fn append_to_env_file(subject: &str, records: &[SectionRecord]) {
    use std::io::Write as _;
    let Some(path) = std::env::var_os(RECORDS_ENV) else {
        return;
    };
    let pid = std::process::id();
    let mut lines = String::new();
    for r in records {
        let line = serde_json::json!({ "subject": subject, "pid": pid, "record": r });
        lines.push_str(&line.to_string());
        lines.push('\n');
    }
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(lines.as_bytes()));
    if let Err(e) = written {
        eprintln!(
            "cluster bench: {RECORDS_ENV}={}: {e}",
            path.to_string_lossy()
        );
    }
}

/// Sections per worker: `counts[w]` gains one per record of worker `w` (grown as needed).
pub(crate) fn count_workers(counts: &mut Vec<u64>, records: &[SectionRecord]) {
    for r in records {
        let w = r.worker as usize;
        if counts.len() <= w {
            counts.resize(w + 1, 0);
        }
        counts[w] += 1;
    }
}

/// Busiest worker's sections over the least busy one's: infinite if a worker did none, NaN
/// if there are no workers.
pub(crate) fn fairness(counts: &[u64]) -> f64 {
    match (counts.iter().max(), counts.iter().min()) {
        (Some(&max), Some(&min)) => max as f64 / min as f64,
        _ => f64::NAN,
    }
}

/// The waits of `records` as samples (no wall time).
pub(crate) fn waits(records: &[SectionRecord]) -> Samples {
    let mut samples = Samples::with_capacity(records.len());
    for r in records {
        samples.push(Duration::from_nanos(r.wait_ns));
    }
    samples
}

/// What one process ran in one round: its records and counters (the second process sends
/// this to the first as one JSON line).
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub(crate) struct RoundPart {
    pub(crate) records: Vec<SectionRecord>,
    pub(crate) flag_violations: u64,
    pub(crate) gave_up: u64,
    pub(crate) held_locally: u64,
}

impl RoundPart {
    pub(super) fn merge(&mut self, other: Self) {
        self.records.extend(other.records);
        self.flag_violations += other.flag_violations;
        self.gave_up += other.gave_up;
        self.held_locally += other.held_locally;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(worker: u32, acquired: u64, released: u64) -> SectionRecord {
        SectionRecord {
            worker,
            wait_ns: 5,
            acquired,
            entered: acquired + 1,
            left: released - 1,
            released,
            attempts: Some(1),
        }
    }

    #[test]
    fn handoffs_follow_section_order_and_clamp_early_ones() {
        // Out of order on purpose; worker 2 got the lock 1 ns before worker 1's release
        // call returned (but entered after worker 1 left).
        let records = [rec(1, 100, 200), rec(0, 10, 50), rec(2, 199, 300)];
        let a = analyse(&records);
        assert_eq!(
            a.handoffs,
            [Duration::from_nanos(50), Duration::from_nanos(0)]
        );
        assert_eq!(a.handoffs_early, 1);
        assert_eq!(a.overlaps, 0);
    }

    #[test]
    fn overlapping_sections_are_violations_even_when_nested() {
        let long = rec(0, 0, 1_000);
        let records = [long, rec(1, 10, 20), rec(2, 30, 40), rec(3, 2_000, 2_100)];
        assert_eq!(analyse(&records).overlaps, 2);
    }

    #[test]
    fn fairness_is_busiest_over_least_busy() {
        let mut counts = Vec::new();
        count_workers(&mut counts, &[rec(0, 1, 3), rec(2, 4, 6), rec(2, 7, 9)]);
        assert_eq!(counts, [1, 0, 2]);
        assert!(fairness(&counts).is_infinite());
        assert!((fairness(&[4, 2, 3]) - 2.0).abs() < 1e-12);
        assert!(fairness(&[]).is_nan());
        assert_eq!(waits(&[rec(0, 1, 3)]).len(), 1);
    }
}
