//! The results as JSON (default `target/cluster-bench.json`): the markdown's numbers as serde
//! structs. Durations are in microseconds unless a field's name says otherwise; ratios have
//! four decimals; a ratio without a baseline is `null`.

use std::path::PathBuf;

use serde::Serialize;

use crate::format::{rounded, us};
use crate::held::{HeldEntry, HeldRow};
use crate::kinds::{KindsEntry, KindsReport};
use crate::report::{
    CONCURRENT_OPS_RATIO_MIN, CONTENDED_OPS_OVER_RSLOCK_MIN, CONTENDED_P99_OVER_RSLOCK_MAX,
    ContendedPeer, ContendedRow, FAIRNESS_MAX, Machine, NATIVE_OVER_SCRIPTS_MIN,
    NODES_P50_RATIO_MAX, NativeRatio, PeerRatio, Row, SERIAL_P50_RATIO_MAX, TOKIO_OVER_RSLOCK_MIN,
    nodes_ratios,
};
use crate::scenario::{SweepEntry, SweepPoint};
use crate::stats::Summary;

/// The whole report, pretty-printed.
pub(crate) fn json(
    rows: &[Row],
    held: &[HeldRow],
    kinds: Option<&KindsReport>,
    machine: &Machine,
    sweep: &[SweepPoint],
    charts: &[PathBuf],
) -> String {
    let report = Report {
        machine,
        quick: machine.quick,
        targets: Targets {
            serial_p50_ratio_max: SERIAL_P50_RATIO_MAX,
            concurrent32_ops_ratio_min: CONCURRENT_OPS_RATIO_MIN,
            concurrent32_tokio_over_rslock_min: TOKIO_OVER_RSLOCK_MIN,
            concurrent32_native_over_scripts_min: NATIVE_OVER_SCRIPTS_MIN,
            contended_ops_over_rslock_min: CONTENDED_OPS_OVER_RSLOCK_MIN,
            contended_p99_over_rslock_max: CONTENDED_P99_OVER_RSLOCK_MAX,
            contended_fairness_max: FAIRNESS_MAX,
        },
        results: rows.iter().map(ResultEntry::new).collect(),
        tokio_vs_rslock: PeerRatio::from_rows(rows).iter().map(Peer::new).collect(),
        native_vs_scripts: NativeRatio::from_rows(rows)
            .iter()
            .map(Native::new)
            .collect(),
        nodes_p50_ratio_9_over_3: nodes_ratios(rows)
            .into_iter()
            .map(|(subject, x)| NodesRatio {
                subject,
                ratio: rounded(x, 4),
                target_met: x <= NODES_P50_RATIO_MAX,
            })
            .collect(),
        contended_vs_rslock: ContendedPeer::from_rows(rows)
            .iter()
            .map(ContendedVsRslock::new)
            .collect(),
        held: held.iter().map(HeldRow::entry).collect(),
        kinds: kinds.map(KindsReport::entry),
        sweep: sweep.iter().map(SweepPoint::entry).collect(),
        charts: charts.iter().map(|c| c.display().to_string()).collect(),
    };
    // Plain structs of numbers, strings and options: serialising them cannot fail.
    let mut text = serde_json::to_string_pretty(&report).expect("the report serialises");
    text.push('\n');
    text
}

#[derive(Serialize)]
struct Report<'a> {
    machine: &'a Machine,
    quick: bool,
    targets: Targets,
    results: Vec<ResultEntry>,
    tokio_vs_rslock: Vec<Peer>,
    /// Present only when `tokio-scripts` ran.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    native_vs_scripts: Vec<Native>,
    nodes_p50_ratio_9_over_3: Vec<NodesRatio>,
    contended_vs_rslock: Vec<ContendedVsRslock>,
    held: Vec<HeldEntry>,
    /// The lock kinds against the mutex, when `kinds` ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    kinds: Option<KindsEntry>,
    /// Throughput against concurrency, when `sweep` ran.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    sweep: Vec<SweepEntry>,
    /// The SVG charts written beside this file.
    charts: Vec<String>,
}

/// The issues' targets the verdicts were checked against.
#[derive(Serialize)]
struct Targets {
    serial_p50_ratio_max: f64,
    concurrent32_ops_ratio_min: f64,
    concurrent32_tokio_over_rslock_min: f64,
    concurrent32_native_over_scripts_min: f64,
    contended_ops_over_rslock_min: f64,
    contended_p99_over_rslock_max: f64,
    contended_fairness_max: f64,
}

/// redlock-tokio with native commands against itself with scripts forced.
#[derive(Serialize)]
struct Native {
    scenario: &'static str,
    runtime: &'static str,
    native_ops_per_s: Option<f64>,
    scripts_ops_per_s: Option<f64>,
    ops_ratio: Option<f64>,
    p50_ratio: Option<f64>,
    native_server_cpu_us_per_cycle: Option<f64>,
    scripts_server_cpu_us_per_cycle: Option<f64>,
    server_cpu_ratio: Option<f64>,
    /// `null` outside `concurrent32`.
    target_met: Option<bool>,
}

impl Native {
    fn new(n: &NativeRatio) -> Self {
        Self {
            scenario: n.scenario,
            runtime: n.runtime,
            native_ops_per_s: rounded(n.native.ops_per_s, 1),
            scripts_ops_per_s: rounded(n.scripts.ops_per_s, 1),
            ops_ratio: rounded(n.ops_ratio(), 4),
            p50_ratio: rounded(n.p50_ratio(), 4),
            native_server_cpu_us_per_cycle: us(n.native.server_cpu_per_cycle),
            scripts_server_cpu_us_per_cycle: us(n.scripts.server_cpu_per_cycle),
            server_cpu_ratio: rounded(n.server_cpu_ratio(), 4),
            target_met: n.target().map(|(_, met)| met),
        }
    }
}

/// One subject in one scenario.
#[derive(Serialize)]
struct ResultEntry {
    scenario: &'static str,
    runtime: &'static str,
    subject: &'static str,
    baseline_runtime: &'static str,
    summary: SummaryJson,
    p50_ratio: Option<f64>,
    ops_ratio: Option<f64>,
    cpu_ratio: Option<f64>,
    server_cpu_ratio: Option<f64>,
    /// `null` where the row has no target.
    target_met: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    violations: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    gave_up: Option<u64>,
    /// The contended scenarios only: their own numbers.
    #[serde(skip_serializing_if = "Option::is_none")]
    contended: Option<ContendedJson>,
    #[serde(skip_serializing_if = "Option::is_none")]
    nodes: Option<usize>,
}

/// A contended row's own numbers; `vs_rslock` for our drivers where rslock ran too.
#[derive(Serialize)]
struct ContendedJson {
    held_locally: u64,
    sections_per_worker: Vec<u64>,
    /// `null` when a worker completed no section.
    busiest_over_least_busy: Option<f64>,
    handoffs: usize,
    handoff_p50_us: Option<f64>,
    handoff_p99_us: Option<f64>,
    handoffs_before_release_returned: u64,
    /// Attempts per section entered, where the client says (not rslock).
    #[serde(skip_serializing_if = "Option::is_none")]
    attempts_mean: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    attempts_p99: Option<u32>,
    /// Attempts past each section's first, per section (0 for a section that needed one or
    /// none), where the client says.
    #[serde(skip_serializing_if = "Option::is_none")]
    extra_attempts_per_section: Option<f64>,
    /// The critical sections' own length, p50 (their 1 ms sleep on the subject's runtime).
    section_p50_us: Option<f64>,
    /// The fan-out round trip to a quorum of the nodes while the rounds ran, p50 and p99.
    loaded_fan_out_p50_us: Option<f64>,
    loaded_fan_out_p99_us: Option<f64>,
    /// The lock's dead time at each hand-off (a section's end to the next one's start), p50
    /// and p99.
    gap_p50_us: Option<f64>,
    gap_p99_us: Option<f64>,
}

impl ContendedJson {
    fn new(c: &ContendedRow) -> Self {
        Self {
            held_locally: c.held_locally,
            sections_per_worker: c.per_worker.clone(),
            busiest_over_least_busy: rounded(c.fairness(), 4),
            handoffs: c.handoff.cycles,
            handoff_p50_us: us(c.handoff.p50),
            handoff_p99_us: us(c.handoff.p99),
            handoffs_before_release_returned: c.handoffs_early,
            attempts_mean: c.attempts.and_then(|(mean, _, _)| rounded(mean, 3)),
            attempts_p99: c.attempts.map(|(_, p99, _)| p99),
            extra_attempts_per_section: c.attempts.and_then(|(_, _, extra)| rounded(extra, 3)),
            section_p50_us: us(c.section.p50),
            loaded_fan_out_p50_us: us(c.loaded_fan_out.p50),
            loaded_fan_out_p99_us: us(c.loaded_fan_out.p99),
            gap_p50_us: us(c.gap.p50),
            gap_p99_us: us(c.gap.p99),
        }
    }
}

/// One of our drivers against rslock in one contended scenario.
#[derive(Serialize)]
struct ContendedVsRslock {
    scenario: &'static str,
    subject: &'static str,
    runtime: &'static str,
    sections_per_s_over_rslock: Option<f64>,
    wait_p99_over_rslock: Option<f64>,
    /// The targets, in order: sections/s, p99, gave up, fairness.
    targets_met: Vec<bool>,
}

impl ContendedVsRslock {
    fn new(p: &ContendedPeer<'_>) -> Self {
        Self {
            scenario: p.scenario,
            subject: p.ours.subject,
            runtime: p.ours.runtime,
            sections_per_s_over_rslock: rounded(p.ops_ratio(), 4),
            wait_p99_over_rslock: rounded(p.p99_ratio(), 4),
            targets_met: p.targets().into_iter().map(|(_, met, _)| met).collect(),
        }
    }
}

#[derive(Serialize)]
struct SummaryJson {
    cycles: usize,
    p50_us: Option<f64>,
    p99_us: Option<f64>,
    ops_per_s: Option<f64>,
    cpu_us_per_cycle: Option<f64>,
    /// Times a thread of the bench process was switched onto a CPU, per cycle.
    switches_per_cycle: Option<f64>,
    /// The nodes' CPU (all 5 processes) per cycle.
    server_cpu_us_per_cycle: Option<f64>,
}

/// tokio against rslock on one runtime flavour.
#[derive(Serialize)]
struct Peer {
    runtime: &'static str,
    tokio_ops_per_s: Option<f64>,
    rslock_ops_per_s: Option<f64>,
    ratio: Option<f64>,
    target_met: bool,
}

/// p50(N = 9) / p50(N = 3) of one subject.
#[derive(Serialize)]
struct NodesRatio {
    subject: &'static str,
    ratio: Option<f64>,
    target_met: bool,
}

impl ResultEntry {
    fn new(r: &Row) -> Self {
        Self {
            scenario: r.scenario,
            runtime: r.runtime,
            subject: r.subject,
            baseline_runtime: r.baseline_runtime,
            summary: SummaryJson::new(&r.summary),
            p50_ratio: rounded(r.p50_ratio(), 4),
            ops_ratio: rounded(r.ops_ratio(), 4),
            cpu_ratio: rounded(r.cpu_ratio(), 4),
            server_cpu_ratio: rounded(r.server_cpu_ratio(), 4),
            target_met: r.target().map(|(_, met)| met),
            violations: r.contended.as_ref().map(|c| c.violations),
            gave_up: r.contended.as_ref().map(|c| c.gave_up),
            contended: r.contended.as_ref().map(ContendedJson::new),
            nodes: r.nodes,
        }
    }
}

impl SummaryJson {
    fn new(s: &Summary) -> Self {
        Self {
            cycles: s.cycles,
            p50_us: us(s.p50),
            p99_us: us(s.p99),
            ops_per_s: rounded(s.ops_per_s, 1),
            cpu_us_per_cycle: us(s.cpu_per_cycle),
            switches_per_cycle: rounded(s.switches_per_cycle, 2),
            server_cpu_us_per_cycle: us(s.server_cpu_per_cycle),
        }
    }
}

impl Peer {
    fn new(p: &PeerRatio) -> Self {
        Self {
            runtime: p.runtime,
            tokio_ops_per_s: rounded(p.tokio_ops, 1),
            rslock_ops_per_s: rounded(p.rslock_ops, 1),
            ratio: rounded(p.ratio(), 4),
            target_met: p.met(),
        }
    }
}
