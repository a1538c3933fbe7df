//! `sweep`: throughput against concurrency. [`super::concurrent`] at each worker count of
//! [`SweepPlan`] (1, 2, 4, ..., 64) for raw, tokio, blocking and rslock on the
//! `current_thread` pass; its markdown table and JSON entries. The chart is `charts/`'s.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use super::{Plan, Subject, concurrent};
use crate::format::{fixed, micros, ratio, rounded, us};
use crate::stats::Summary;

/// The worker counts of a sweep and how long each subject runs at each.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SweepPlan {
    /// Workers at each point, ascending.
    pub(crate) workers: &'static [usize],
    /// Measured time per subject at each point.
    pub(crate) time: Duration,
    /// Rounds that time is split into, subjects taking turns (as in `concurrent32`).
    pub(crate) rounds: u32,
}

impl SweepPlan {
    /// Seven points of 2 s per subject: about a minute for four subjects.
    pub(crate) const FULL: Self = Self {
        workers: &[1, 2, 4, 8, 16, 32, 64],
        time: Duration::from_secs(2),
        rounds: 4,
    };

    /// The two ends only, 0.5 s each: the smoke test runs it in CI.
    pub(crate) const QUICK: Self = Self {
        workers: &[1, 64],
        time: Duration::from_millis(500),
        rounds: 1,
    };
}

/// One subject at one worker count.
#[derive(Debug, Clone)]
pub(crate) struct SweepPoint {
    pub(crate) subject: &'static str,
    /// The subject's runtime label (`current_thread`, or `own-thread` for blocking).
    pub(crate) runtime: &'static str,
    pub(crate) workers: usize,
    pub(crate) summary: Summary,
}

/// A [`SweepPoint`] as the JSON holds it.
#[derive(Serialize)]
pub(crate) struct SweepEntry {
    subject: &'static str,
    runtime: &'static str,
    workers: usize,
    ops_per_s: Option<f64>,
    p50_us: Option<f64>,
    p99_us: Option<f64>,
    cpu_us_per_cycle: Option<f64>,
}

/// The idle time before each point.
const DRAIN: Duration = Duration::from_millis(500);

/// The subjects a sweep measures, of those the pass built.
pub(crate) const SWEEP_SUBJECTS: [&str; 4] = ["raw", "tokio", "blocking", "rslock"];

/// Runs `concurrent32`'s loop at every worker count of `sweep` for the [`SWEEP_SUBJECTS`]
/// among `subjects`; the points come by worker count, then in `subjects`' order.
pub(crate) async fn sweep(
    subjects: &[Arc<Subject>],
    sweep: &SweepPlan,
    plan: &Plan,
) -> Result<Vec<SweepPoint>, String> {
    let subjects: Vec<Arc<Subject>> = (subjects.iter())
        .filter(|s| SWEEP_SUBJECTS.contains(&s.name()))
        .cloned()
        .collect();
    let mut points = Vec::new();
    for &workers in sweep.workers {
        // A cycle returns at a quorum, leaving requests on the slowest nodes; an idle gap
        // lets them drain, so that no point starts with another's backlog.
        tokio::time::sleep(DRAIN).await;
        let at = Plan {
            workers,
            concurrent_time: sweep.time,
            concurrent_rounds: sweep.rounds,
            ..*plan
        };
        let samples = concurrent(&subjects, &at).await?;
        points.extend(
            subjects
                .iter()
                .zip(samples)
                .map(|(subject, samples)| SweepPoint {
                    subject: subject.name(),
                    runtime: subject.runtime(),
                    workers,
                    summary: samples.summary(),
                }),
        );
    }
    Ok(points)
}

/// The sweep's table: ops/s of each subject at each worker count, and each over raw's.
pub(crate) fn markdown(points: &[SweepPoint]) -> String {
    let mut s = String::new();
    let Some(first) = points.first() else {
        return s;
    };
    let subjects: Vec<&str> = (points.iter())
        .filter(|p| p.workers == first.workers)
        .map(|p| p.subject)
        .collect();
    let _ = write!(
        s,
        "\nsweep: ops/s against workers (ratio to raw)\n\n| workers |"
    );
    for subject in &subjects {
        let _ = write!(s, " {subject} |");
    }
    let _ = write!(s, " p50 / p99 |\n|---|");
    s.push_str(&"---|".repeat(subjects.len() + 1));
    s.push('\n');
    let mut counts: Vec<usize> = points.iter().map(|p| p.workers).collect();
    counts.dedup();
    for workers in counts {
        let row: Vec<&SweepPoint> = points.iter().filter(|p| p.workers == workers).collect();
        let raw = row.iter().find(|p| p.subject == "raw");
        let _ = write!(s, "| {workers} |");
        for p in &row {
            let over_raw = raw.map_or(f64::NAN, |r| {
                ratio(p.summary.ops_per_s, r.summary.ops_per_s)
            });
            let _ = write!(s, " {:.0} ({}) |", p.summary.ops_per_s, fixed(over_raw));
        }
        let tails: Vec<String> = (row.iter())
            .map(|p| {
                let (p50, p99) = (micros(p.summary.p50), micros(p.summary.p99));
                format!("{}: {p50} / {p99}", p.subject)
            })
            .collect();
        let _ = writeln!(s, " {} |", tails.join(", "));
    }
    s
}

impl SweepPoint {
    /// Its JSON entry.
    pub(crate) fn entry(&self) -> SweepEntry {
        SweepEntry {
            subject: self.subject,
            runtime: self.runtime,
            workers: self.workers,
            ops_per_s: rounded(self.summary.ops_per_s, 1),
            p50_us: us(self.summary.p50),
            p99_us: us(self.summary.p99),
            cpu_us_per_cycle: us(self.summary.cpu_per_cycle),
        }
    }
}
