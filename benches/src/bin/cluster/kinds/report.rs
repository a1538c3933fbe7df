//! `kinds`' results: [`KindsReport`], its targets (issue targets, benches/README.md "Lock
//! kinds"), its markdown and its JSON entry ([`KindsEntry`]). Nothing here measures.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use super::MUTEX;
use super::semaphore::{HOLD, SemaphoreRow};
use crate::format::{fixed, micros, ratio, rounded, us, verdict};
use crate::scenario::Subject;
use crate::stats::{Samples, Summary};

/// Serial: each targeted kind's p50 at most this many times the mutex's.
pub(crate) const SERIAL_OVER_MUTEX_MAX: f64 = 1.3;
/// Concurrent: 32 readers of one resource at least this share of 32 mutex workers' cycles/s.
pub(crate) const READERS_OVER_MUTEX_MIN: f64 = 0.7;
/// Semaphore: mean permits in their holders' sections while some contender waits, at
/// least this share of k.
pub(crate) const IN_USE_MIN: f64 = 0.9;

/// The serial subjects the target applies to; the others explain (benches/README.md).
const TARGETED: [&str; 4] = ["multi3", "reader", "writer", "semaphore8"];

/// Everything `kinds` measured in one run.
#[derive(Debug, Clone)]
pub(crate) struct KindsReport {
    pub(crate) runtime: &'static str,
    /// Workers of the concurrent part, each kind.
    pub(crate) workers: usize,
    /// The mutex first.
    pub(crate) serial: Vec<SerialRow>,
    /// 32 mutex workers on distinct (fresh) resources, 32 readers of one resource, and 32
    /// readers on distinct resources (the scripts' cost without the one resource's).
    pub(crate) mutexes: Summary,
    pub(crate) readers: Summary,
    pub(crate) readers_distinct: Summary,
    /// Of the concurrent cycles of each (mutexes, readers, readers on distinct resources),
    /// the releases some node was not sent for its backlog (`NodeFault::Backlogged`).
    pub(crate) backlogged: [u64; 3],
    pub(crate) semaphore: SemaphoreRow,
}

/// One kind's serial cycles.
#[derive(Debug, Clone)]
pub(crate) struct SerialRow {
    pub(crate) name: &'static str,
    pub(crate) summary: Summary,
    /// Its first cycle on the nodes (its scripts' first use), for the kinds with scripts.
    pub(crate) first_cycle: Option<FirstCycle>,
}

/// A kind's first cycle (`kinds::first_cycle`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct FirstCycle {
    pub(crate) time: Duration,
    /// Nodes whose release found nothing: it ran before the acquire's `EVAL`.
    pub(crate) overtaken: usize,
}

/// Pairs each serial subject with its samples and first cycle.
pub(super) fn serial_rows(
    subjects: &[Arc<Subject>],
    samples: Vec<Samples>,
    first_cycles: Vec<Option<FirstCycle>>,
) -> Vec<SerialRow> {
    (subjects.iter().zip(samples).zip(first_cycles))
        .map(|((subject, samples), first_cycle)| SerialRow {
            name: subject.name(),
            summary: samples.summary(),
            first_cycle,
        })
        .collect()
}

impl KindsReport {
    /// The report from the three parts; `concurrent` is the mutexes' samples, then the
    /// readers' of one resource, then those on distinct resources.
    pub(super) fn new(
        runtime: &'static str,
        workers: usize,
        serial: Vec<SerialRow>,
        concurrent: Vec<Samples>,
        backlogged: [u64; 3],
        semaphore: SemaphoreRow,
    ) -> Self {
        let mut concurrent = concurrent.into_iter().map(Samples::summary);
        let mutexes = concurrent
            .next()
            .unwrap_or_else(|| Samples::default().summary());
        let readers = concurrent
            .next()
            .unwrap_or_else(|| Samples::default().summary());
        let readers_distinct = concurrent
            .next()
            .unwrap_or_else(|| Samples::default().summary());
        Self {
            runtime,
            workers,
            serial,
            mutexes,
            readers,
            readers_distinct,
            backlogged,
            semaphore,
        }
    }

    fn mutex(&self) -> Option<&Summary> {
        (self.serial.iter())
            .find(|r| r.name == MUTEX)
            .map(|r| &r.summary)
    }

    /// `f` of `row` over `f` of the mutex's serial row.
    fn over_mutex(&self, row: &SerialRow, f: impl Fn(&Summary) -> f64) -> f64 {
        self.mutex()
            .map_or(f64::NAN, |m| ratio(f(&row.summary), f(m)))
    }

    /// Readers' cycles/s over the mutexes'.
    pub(crate) fn readers_over_mutexes(&self) -> f64 {
        ratio(self.readers.ops_per_s, self.mutexes.ops_per_s)
    }

    /// The semaphore's mean permits in section while some contender waits, over k.
    pub(crate) fn in_use(&self) -> f64 {
        self.semaphore.in_use.in_section / f64::from(self.semaphore.permits)
    }

    /// The markdown: three tables and a verdict line per target.
    pub(crate) fn markdown(&self) -> String {
        let mut s = format!(
            "\nkinds (redlock-tokio on {}, ratios to the mutex of the same run):\n\n\
             | kind | p50 | p99 | ops/s | p50 / mutex | p99 / mutex | server CPU/cycle | \
             server CPU / mutex | first cycle (nodes whose release ran first) |\n|---|---|---|---|---|---|---|---|---|\n",
            self.runtime
        );
        for r in &self.serial {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {:.0} | {} | {} | {} | {} | {} |",
                r.name,
                micros(r.summary.p50),
                micros(r.summary.p99),
                r.summary.ops_per_s,
                fixed(self.over_mutex(r, |x| x.p50.as_secs_f64())),
                fixed(self.over_mutex(r, |x| x.p99.as_secs_f64())),
                micros(r.summary.server_cpu_per_cycle),
                fixed(self.over_mutex(r, |x| x.server_cpu_per_cycle.as_secs_f64())),
                r.first_cycle.map_or("–".to_owned(), |f| format!(
                    "{} ({})",
                    micros(f.time),
                    f.overtaken
                )),
            );
        }
        s.push_str(
            "\n| workers | resources | cycles/s | p50 | p99 | server CPU/cycle | \
             releases with a node backlogged |\n|---|---|---|---|---|---|---|\n",
        );
        let subjects = [
            ("mutexes", "distinct (fresh per cycle)", &self.mutexes),
            ("readers", "one", &self.readers),
            (
                "readers",
                "distinct (fresh per cycle)",
                &self.readers_distinct,
            ),
        ];
        for ((who, on, x), backlogged) in subjects.into_iter().zip(self.backlogged) {
            let _ = writeln!(
                s,
                "| {} {who} | {on} | {:.0} | {} | {} | {} | {backlogged} of {} |",
                self.workers,
                x.ops_per_s,
                micros(x.p50),
                micros(x.p99),
                micros(x.server_cpu_per_cycle),
                x.cycles,
            );
        }
        s.push_str(&semaphore_table(&self.semaphore));
        s.push('\n');
        self.verdicts(&mut s);
        s
    }

    fn verdicts(&self, s: &mut String) {
        for r in self.serial.iter().filter(|r| TARGETED.contains(&r.name)) {
            let x = self.over_mutex(r, |x| x.p50.as_secs_f64());
            let _ = writeln!(
                s,
                "- kinds / serial / {}: p50 / mutex p50 <= {SERIAL_OVER_MUTEX_MAX}: {} ({})",
                r.name,
                verdict(x <= SERIAL_OVER_MUTEX_MAX),
                fixed(x),
            );
        }
        let x = self.readers_over_mutexes();
        let _ = writeln!(
            s,
            "- kinds / concurrent32: readers of one resource / mutexes on distinct resources, \
             cycles/s >= {READERS_OVER_MUTEX_MIN}: {} ({})",
            verdict(x >= READERS_OVER_MUTEX_MIN),
            fixed(x),
        );
        let sem = &self.semaphore;
        let _ = writeln!(
            s,
            "- kinds / semaphore k={} with {} contenders: mean permits in use while one waits / k \
             >= {IN_USE_MIN}: {} ({})",
            sem.permits,
            sem.contenders,
            verdict(self.in_use() >= IN_USE_MIN),
            fixed(self.in_use()),
        );
        let most = sem.in_use.most_in_section;
        let _ = writeln!(
            s,
            "- kinds / semaphore k={}: most holders in their section at once <= k: {} ({most})",
            sem.permits,
            verdict(most <= sem.permits),
        );
    }

    /// The JSON entry.
    pub(crate) fn entry(&self) -> KindsEntry {
        let serial = (self.serial.iter())
            .map(|r| SerialEntry {
                kind: r.name,
                p50_us: us(r.summary.p50),
                p99_us: us(r.summary.p99),
                ops_per_s: rounded(r.summary.ops_per_s, 1),
                server_cpu_us_per_cycle: us(r.summary.server_cpu_per_cycle),
                first_cycle_us: r.first_cycle.and_then(|f| us(f.time)),
                first_cycle_releases_overtaken: r.first_cycle.map(|f| f.overtaken),
                p50_over_mutex: rounded(self.over_mutex(r, |x| x.p50.as_secs_f64()), 4),
                met: TARGETED
                    .contains(&r.name)
                    .then(|| self.over_mutex(r, |x| x.p50.as_secs_f64()) <= SERIAL_OVER_MUTEX_MAX),
            })
            .collect();
        let sem = &self.semaphore;
        KindsEntry {
            runtime: self.runtime,
            serial_p50_over_mutex_max: SERIAL_OVER_MUTEX_MAX,
            readers_over_mutexes_min: READERS_OVER_MUTEX_MIN,
            semaphore_in_use_min: IN_USE_MIN,
            serial,
            mutexes_cycles_per_s: rounded(self.mutexes.ops_per_s, 1),
            readers_cycles_per_s: rounded(self.readers.ops_per_s, 1),
            readers_distinct_cycles_per_s: rounded(self.readers_distinct.ops_per_s, 1),
            releases_backlogged: self.backlogged,
            readers_over_mutexes: rounded(self.readers_over_mutexes(), 4),
            readers_met: self.readers_over_mutexes() >= READERS_OVER_MUTEX_MIN,
            semaphore: SemaphoreEntry {
                permits: sem.permits,
                contenders: sem.contenders,
                hold_ms: HOLD.as_millis(),
                window_s: rounded(sem.window.as_secs_f64(), 3),
                queued_s: rounded(sem.in_use.queued.as_secs_f64(), 3),
                permits_granted: sem.in_use.acquired,
                in_section_mean: rounded(sem.in_use.in_section, 3),
                held_mean: rounded(sem.in_use.held, 3),
                in_use_over_k: rounded(self.in_use(), 4),
                met: self.in_use() >= IN_USE_MIN,
                most_in_section: sem.in_use.most_in_section,
                idle_per_handoff_us: idle_per_handoff(sem).and_then(us),
                wait_p50_us: us(sem.waits.clone().summary().p50),
                wait_p99_us: us(sem.waits.clone().summary().p99),
                attempts_per_permit: rounded(attempts_mean(&sem.attempts), 3),
                node_scripts_per_permit: rounded(scripts_per_permit(sem), 3),
                granted_at_first_attempt: rounded(first_attempt_share(sem), 4),
                gave_up: sem.gave_up,
                permits_per_contender: sem.per_contender.clone(),
            },
        }
    }
}

/// The semaphore's table.
fn semaphore_table(sem: &SemaphoreRow) -> String {
    let waits = sem.waits.clone().summary();
    let sections = sem.sections.clone().summary();
    let in_use = &sem.in_use;
    let granted_per_s = ratio(in_use.acquired as f64, sem.window.as_secs_f64());
    let most_per_s = ratio(f64::from(sem.permits), sections.p50.as_secs_f64());
    let mut attempts = sem.attempts.clone();
    attempts.sort_unstable();
    let attempts_p99 = attempts
        .get(attempts.len().saturating_sub(1) * 99 / 100)
        .copied()
        .unwrap_or(0);
    format!(
        "\n| k | contenders | hold p50 | window | someone waiting | permits/s | k / hold | \
         in section / k | held / k | most in section | idle per hand-off | wait p50 | \
         wait p99 | attempts per permit, mean / p99 | granted at the first attempt | \
         node scripts per permit | permits per contender | gave up |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n\
         | {} | {} | {} | {:.1} s | {:.1} s | {:.0} | {:.0} | {} | {} | {} | {} | {} | {} | \
         {:.2} / {} | {} | {} | {}–{} | {} |\n{}",
        sem.permits,
        sem.contenders,
        micros(sections.p50),
        sem.window.as_secs_f64(),
        in_use.queued.as_secs_f64(),
        granted_per_s,
        most_per_s,
        fixed(in_use.in_section / f64::from(sem.permits)),
        fixed(in_use.held / f64::from(sem.permits)),
        in_use.most_in_section,
        idle_per_handoff(sem).map_or("–".to_owned(), micros),
        micros(waits.p50),
        micros(waits.p99),
        attempts_mean(&sem.attempts),
        attempts_p99,
        fixed(first_attempt_share(sem)),
        fixed(scripts_per_permit(sem)),
        sem.per_contender.iter().min().unwrap_or(&0),
        sem.per_contender.iter().max().unwrap_or(&0),
        sem.gave_up,
        sem.gave_up_reason
            .as_ref()
            .map_or(String::new(), |r| format!(
                "\nThe first call that gave up: {r}.\n"
            )),
    )
}

/// How long a permit stood free, on average, between a holder leaving its section and the
/// next getting it, while someone waited: (k − mean in section) × time waited, over the
/// permits granted in the window.
fn idle_per_handoff(sem: &SemaphoreRow) -> Option<Duration> {
    let idle = (f64::from(sem.permits) - sem.in_use.in_section) * sem.in_use.queued.as_secs_f64();
    let x = ratio(idle, sem.in_use.acquired as f64);
    x.is_finite().then(|| Duration::from_secs_f64(x.max(0.0)))
}

/// The share of permits granted at a call's first attempt. Every call but a contender's
/// first starts right after its own release, while others wait: a high share means the
/// releasing contender takes a permit back before the waiters, told by the release
/// notification, try again.
fn first_attempt_share(sem: &SemaphoreRow) -> f64 {
    let first = sem.attempts.iter().filter(|&&a| a == 1).count();
    ratio(first as f64, sem.attempts.len() as f64)
}

/// Scripts the nodes ran per permit granted: 10 (5 acquires, 5 releases) if every permit took
/// one attempt; each failed attempt adds 5 acquires and 5 cleanup releases.
fn scripts_per_permit(sem: &SemaphoreRow) -> f64 {
    ratio(sem.node_scripts as f64, sem.attempts.len() as f64)
}

fn attempts_mean(attempts: &[u32]) -> f64 {
    let sum: u64 = attempts.iter().map(|&a| u64::from(a)).sum();
    ratio(sum as f64, attempts.len() as f64)
}

/// `kinds` in the JSON report. Durations in microseconds unless named otherwise.
#[derive(Serialize)]
pub(crate) struct KindsEntry {
    runtime: &'static str,
    serial_p50_over_mutex_max: f64,
    readers_over_mutexes_min: f64,
    semaphore_in_use_min: f64,
    serial: Vec<SerialEntry>,
    mutexes_cycles_per_s: Option<f64>,
    readers_cycles_per_s: Option<f64>,
    readers_distinct_cycles_per_s: Option<f64>,
    /// Mutexes, readers, readers on distinct resources: releases some node was not sent.
    releases_backlogged: [u64; 3],
    readers_over_mutexes: Option<f64>,
    readers_met: bool,
    semaphore: SemaphoreEntry,
}

/// One kind's serial numbers; `met` is `null` for the mutex and the explaining subjects.
#[derive(Serialize)]
struct SerialEntry {
    kind: &'static str,
    p50_us: Option<f64>,
    p99_us: Option<f64>,
    ops_per_s: Option<f64>,
    server_cpu_us_per_cycle: Option<f64>,
    first_cycle_us: Option<f64>,
    first_cycle_releases_overtaken: Option<usize>,
    p50_over_mutex: Option<f64>,
    met: Option<bool>,
}

/// The semaphore in use.
#[derive(Serialize)]
struct SemaphoreEntry {
    permits: u32,
    contenders: usize,
    hold_ms: u128,
    window_s: Option<f64>,
    queued_s: Option<f64>,
    permits_granted: u64,
    in_section_mean: Option<f64>,
    held_mean: Option<f64>,
    in_use_over_k: Option<f64>,
    met: bool,
    most_in_section: u32,
    idle_per_handoff_us: Option<f64>,
    wait_p50_us: Option<f64>,
    wait_p99_us: Option<f64>,
    attempts_per_permit: Option<f64>,
    node_scripts_per_permit: Option<f64>,
    granted_at_first_attempt: Option<f64>,
    gave_up: u64,
    permits_per_contender: Vec<u64>,
}
