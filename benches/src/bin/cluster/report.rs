//! The results as markdown tables (stdout), with the issues' targets checked; the same as
//! JSON is `json.rs`'s. Nothing here measures anything.

use std::fmt::Write as _;

use serde::Serialize;

use crate::format::{fixed, micros, ratio, verdict};
use crate::held::{self, HeldRow};
use crate::scenario::{Contended, fairness};
use crate::stats::Summary;

/// Serial: each of our drivers' p50 at most this many times raw's (benches/README.md).
pub(crate) const SERIAL_P50_RATIO_MAX: f64 = 1.2;
/// concurrent32: each of our drivers' cycles per second at least this share of raw's (the
/// cluster bench's first issue).
pub(crate) const CONCURRENT_OPS_RATIO_MIN: f64 = 0.8;
/// concurrent32: tokio's cycles per second at least this many times rslock's on the same
/// runtime flavour (benches/README.md).
pub(crate) const TOKIO_OVER_RSLOCK_MIN: f64 = 3.0;

/// concurrent32: redlock-tokio's cycles per second with native commands at least this many
/// times its own with scripts forced, on servers that have the commands (benches/README.md).
pub(crate) const NATIVE_OVER_SCRIPTS_MIN: f64 = 1.4;

/// Our drivers: the subjects the targets apply to.
const OURS: [&str; 10] = [
    "tokio",
    "tokio-j1",
    "tokio-noq",
    "blocking-noq",
    "async-std",
    "blocking",
    "blocking-j1",
    "tokio-scripts",
    "tokio-fenced",
    "tokio-fenced-scripts",
];

/// serial: a fenced lock's p50 at most this many times an unfenced one's (benches/README.md).
pub(crate) const FENCED_OVER_UNFENCED_MAX: f64 = 1.15;

/// One subject in one scenario, with the raw baseline of the same pass and scenario.
#[derive(Debug, Clone)]
pub(crate) struct Row {
    pub(crate) scenario: &'static str,
    /// The subject's runtime label: a tokio flavour, or `own-thread`.
    pub(crate) runtime: &'static str,
    pub(crate) subject: &'static str,
    pub(crate) summary: Summary,
    /// Raw's summary in the same scenario of the same pass; `None` if `--subject` left it out.
    pub(crate) baseline: Option<Summary>,
    /// The runtime flavour raw ran on (the pass's).
    pub(crate) baseline_runtime: &'static str,
    /// The contended scenarios only: their own numbers.
    pub(crate) contended: Option<ContendedRow>,
    /// `nodes` only: the cluster size.
    pub(crate) nodes: Option<usize>,
}

/// The contended scenarios' own numbers for one subject (its row's p50/p99 are acquire
/// waits, its ops/s sections per second).
#[derive(Debug, Clone)]
pub(crate) struct ContendedRow {
    /// Overlapping critical sections (or holder-flag violations); target 0.
    pub(crate) violations: u64,
    /// Lock calls that failed for want of the lock; the worker tries again.
    pub(crate) gave_up: u64,
    /// Of those, the ones that failed with `HeldLocally` (waited in the local queue too long).
    pub(crate) held_locally: u64,
    /// Sections per worker, across processes.
    pub(crate) per_worker: Vec<u64>,
    /// Hand-off latency: a release call's return to the next holder's lock call's return.
    pub(crate) handoff: Summary,
    /// Hand-offs where the next holder had the lock before the releaser's call returned.
    pub(crate) handoffs_early: u64,
    /// Attempts per section entered: mean, p99, and the extra ones per section (each
    /// section's attempts past its first); `None` where the client does not say. A
    /// section may need none (a local hand-over, a hold by grants); how far the extra ones
    /// are above 0 shows waiters colliding (the herd).
    pub(crate) attempts: Option<(f64, u32, f64)>,
    /// The critical sections' own length (their 1 ms sleep on the subject's runtime).
    pub(crate) section: Summary,
    /// The fan-out round trip to a quorum while the rounds ran (scenario/fan_out.rs).
    pub(crate) loaded_fan_out: Summary,
    /// The lock's dead time at each hand-off (section end to the next one's start).
    pub(crate) gap: Summary,
}

impl ContendedRow {
    pub(crate) fn new(mut c: Contended) -> Self {
        c.attempts.sort_unstable();
        let attempts = (!c.attempts.is_empty()).then(|| {
            let sum: u64 = c.attempts.iter().map(|&a| u64::from(a)).sum();
            let extra: u64 = c
                .attempts
                .iter()
                .map(|&a| u64::from(a.saturating_sub(1)))
                .sum();
            let p99 = c.attempts[(c.attempts.len() - 1) * 99 / 100];
            let n = c.attempts.len() as f64;
            (sum as f64 / n, p99, extra as f64 / n)
        });
        Self {
            attempts,
            section: c.sections.clone().summary(),
            loaded_fan_out: c.loaded_fan_out.clone().summary(),
            gap: c.gaps.clone().summary(),
            violations: c.violations,
            gave_up: c.gave_up,
            held_locally: c.held_locally,
            per_worker: c.per_worker,
            handoff: c.handoffs.summary(),
            handoffs_early: c.handoffs_early,
        }
    }

    /// Busiest worker's sections over the least busy one's (infinite if one did none).
    pub(crate) fn fairness(&self) -> f64 {
        fairness(&self.per_worker)
    }
}

/// Contended scenarios: our drivers' sections/s at least this many times rslock's (benches/README.md).
pub(crate) const CONTENDED_OPS_OVER_RSLOCK_MIN: f64 = 1.5;
/// Contended scenarios: our drivers' p99 acquire wait at most this share of rslock's.
pub(crate) const CONTENDED_P99_OVER_RSLOCK_MAX: f64 = 0.1;
/// Contended scenarios: busiest worker's sections at most this many times the least busy's.
pub(crate) const FAIRNESS_MAX: f64 = 2.0;

/// One of our drivers against rslock in one contended scenario (benches/README.md).
#[derive(Debug, Clone)]
pub(crate) struct ContendedPeer<'a> {
    pub(crate) scenario: &'static str,
    pub(crate) ours: &'a Row,
    pub(crate) rslock: &'a Row,
}

impl<'a> ContendedPeer<'a> {
    /// One per contended scenario and driver of ours where rslock ran too.
    pub(crate) fn from_rows(rows: &'a [Row]) -> Vec<Self> {
        rows.iter()
            .filter(|r| r.contended.is_some() && OURS.contains(&r.subject))
            .filter_map(|ours| {
                let rslock = rows
                    .iter()
                    .find(|r| r.scenario == ours.scenario && r.subject == "rslock")?;
                Some(Self {
                    scenario: ours.scenario,
                    ours,
                    rslock,
                })
            })
            .collect()
    }

    /// Sections per second, ours over rslock's.
    pub(crate) fn ops_ratio(&self) -> f64 {
        ratio(self.ours.summary.ops_per_s, self.rslock.summary.ops_per_s)
    }

    /// p99 acquire wait, ours over rslock's.
    pub(crate) fn p99_ratio(&self) -> f64 {
        ratio(
            self.ours.summary.p99.as_secs_f64(),
            self.rslock.summary.p99.as_secs_f64(),
        )
    }

    /// The targets: (description, met, the number), in the verdict lines' order.
    pub(crate) fn targets(&self) -> Vec<(String, bool, String)> {
        let c = self.ours.contended.as_ref();
        let gave_up = c.map_or(0, |c| c.gave_up);
        let fair = c.map_or(f64::NAN, ContendedRow::fairness);
        vec![
            (
                format!("sections/s / rslock >= {CONTENDED_OPS_OVER_RSLOCK_MIN}"),
                self.ops_ratio() >= CONTENDED_OPS_OVER_RSLOCK_MIN,
                fixed(self.ops_ratio()),
            ),
            (
                format!("p99 wait / rslock <= {CONTENDED_P99_OVER_RSLOCK_MAX}"),
                self.p99_ratio() <= CONTENDED_P99_OVER_RSLOCK_MAX,
                fixed(self.p99_ratio()),
            ),
            ("gave up == 0".to_owned(), gave_up == 0, gave_up.to_string()),
            (
                format!("busiest / least busy worker <= {FAIRNESS_MAX}"),
                fair <= FAIRNESS_MAX,
                fixed(fair),
            ),
        ]
    }
}

/// `nodes`: p50(N = 9) / p50(N = 3) at most this (the target).
pub(crate) const NODES_P50_RATIO_MAX: f64 = 1.3;

/// p50(N = 9) / p50(N = 3) for each subject that ran `nodes` at both sizes.
pub(crate) fn nodes_ratios(rows: &[Row]) -> Vec<(&'static str, f64)> {
    let p50 = |subject: &str, n: usize| {
        rows.iter()
            .find(|r| r.subject == subject && r.nodes == Some(n))
            .map(|r| r.summary.p50.as_secs_f64())
    };
    let mut out: Vec<(&'static str, f64)> = Vec::new();
    for r in rows {
        if r.nodes.is_none() || out.iter().any(|(s, _)| *s == r.subject) {
            continue;
        }
        if let (Some(a), Some(b)) = (p50(r.subject, 9), p50(r.subject, 3)) {
            out.push((r.subject, ratio(a, b)));
        }
    }
    out
}

/// tokio against rslock in `concurrent32` on one runtime flavour (benches/README.md).
#[derive(Debug, Clone)]
pub(crate) struct PeerRatio {
    pub(crate) runtime: &'static str,
    pub(crate) tokio_ops: f64,
    pub(crate) rslock_ops: f64,
}

/// Where the numbers were taken (in the JSON as `machine`, with `quick` beside it).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Machine {
    pub(crate) nproc: usize,
    pub(crate) cpu: String,
    pub(crate) server: String,
    pub(crate) nodes: usize,
    #[serde(skip)]
    pub(crate) quick: bool,
}

impl Row {
    fn base(&self, f: impl Fn(&Summary) -> f64) -> f64 {
        self.baseline
            .as_ref()
            .map_or(f64::NAN, |b| ratio(f(&self.summary), f(b)))
    }

    pub(crate) fn p50_ratio(&self) -> f64 {
        self.base(|s| s.p50.as_secs_f64())
    }

    pub(crate) fn ops_ratio(&self) -> f64 {
        self.base(|s| s.ops_per_s)
    }

    pub(crate) fn cpu_ratio(&self) -> f64 {
        self.base(|s| s.cpu_per_cycle.as_secs_f64())
    }

    pub(crate) fn server_cpu_ratio(&self) -> f64 {
        self.base(|s| s.server_cpu_per_cycle.as_secs_f64())
    }

    /// The issues' target against raw for this row, if it has one: (description, met).
    pub(crate) fn target(&self) -> Option<(String, bool)> {
        if !OURS.contains(&self.subject) || self.baseline.is_none() {
            return None;
        }
        match self.scenario {
            "serial" => Some((
                format!("p50 / raw <= {SERIAL_P50_RATIO_MAX}"),
                self.p50_ratio() <= SERIAL_P50_RATIO_MAX,
            )),
            "concurrent32" => Some((
                format!("ops/s / raw >= {CONCURRENT_OPS_RATIO_MIN}"),
                self.ops_ratio() >= CONCURRENT_OPS_RATIO_MIN,
            )),
            _ => None,
        }
    }
}

impl PeerRatio {
    /// One per runtime flavour where both tokio and rslock ran `concurrent32`.
    pub(crate) fn from_rows(rows: &[Row]) -> Vec<Self> {
        let find = |runtime: &str, subject: &str| {
            rows.iter()
                .find(|r| {
                    r.scenario == "concurrent32" && r.runtime == runtime && r.subject == subject
                })
                .map(|r| r.summary.ops_per_s)
        };
        let mut out: Vec<Self> = Vec::new();
        for r in rows {
            if r.subject != "tokio" || out.iter().any(|p| p.runtime == r.runtime) {
                continue;
            }
            if let (Some(tokio_ops), Some(rslock_ops)) =
                (find(r.runtime, "tokio"), find(r.runtime, "rslock"))
            {
                out.push(Self {
                    runtime: r.runtime,
                    tokio_ops,
                    rslock_ops,
                });
            }
        }
        out
    }

    pub(crate) fn ratio(&self) -> f64 {
        ratio(self.tokio_ops, self.rslock_ops)
    }

    pub(crate) fn met(&self) -> bool {
        self.ratio() >= TOKIO_OVER_RSLOCK_MIN
    }
}

/// redlock-tokio with native commands (`tokio`) against itself with scripts forced
/// (`tokio-scripts`) in one scenario on one runtime flavour (benches/README.md).
#[derive(Debug, Clone)]
pub(crate) struct NativeRatio {
    pub(crate) scenario: &'static str,
    pub(crate) runtime: &'static str,
    pub(crate) native: Summary,
    pub(crate) scripts: Summary,
}

impl NativeRatio {
    /// One per scenario and runtime flavour where both ran.
    pub(crate) fn from_rows(rows: &[Row]) -> Vec<Self> {
        rows.iter()
            .filter(|r| r.subject == "tokio" && r.nodes.is_none() && r.contended.is_none())
            .filter_map(|native| {
                let scripts = rows.iter().find(|r| {
                    r.subject == "tokio-scripts"
                        && r.scenario == native.scenario
                        && r.runtime == native.runtime
                })?;
                Some(Self {
                    scenario: native.scenario,
                    runtime: native.runtime,
                    native: native.summary,
                    scripts: scripts.summary,
                })
            })
            .collect()
    }

    /// Cycles per second, native over scripts.
    pub(crate) fn ops_ratio(&self) -> f64 {
        ratio(self.native.ops_per_s, self.scripts.ops_per_s)
    }

    /// p50, native over scripts.
    pub(crate) fn p50_ratio(&self) -> f64 {
        ratio(
            self.native.p50.as_secs_f64(),
            self.scripts.p50.as_secs_f64(),
        )
    }

    /// The nodes' CPU per cycle, native over scripts.
    pub(crate) fn server_cpu_ratio(&self) -> f64 {
        ratio(
            self.native.server_cpu_per_cycle.as_secs_f64(),
            self.scripts.server_cpu_per_cycle.as_secs_f64(),
        )
    }

    /// The target, for `concurrent32` only: (description, met).
    pub(crate) fn target(&self) -> Option<(String, bool)> {
        (self.scenario == "concurrent32").then(|| {
            (
                format!("tokio / tokio-scripts ops/s >= {NATIVE_OVER_SCRIPTS_MIN}"),
                self.ops_ratio() >= NATIVE_OVER_SCRIPTS_MIN,
            )
        })
    }
}

impl Machine {
    /// `nproc`, `/proc/cpuinfo`'s model name, and the server binary's name and version.
    pub(crate) fn detect(server: String, nodes: usize, quick: bool) -> Self {
        let nproc = std::thread::available_parallelism().map_or(0, usize::from);
        let cpu = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|info| {
                info.lines()
                    .find_map(|l| l.strip_prefix("model name"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, name)| name.trim().to_owned())
            })
            .unwrap_or_else(|| "unknown".to_owned());
        Self {
            nproc,
            cpu,
            server,
            nodes,
            quick,
        }
    }
}

/// The markdown tables, a machine line, and one line per target.
pub(crate) fn markdown(rows: &[Row], held: &[HeldRow], machine: &Machine) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{} nodes ({}), nproc = {}, CPU `{}`{}\n",
        machine.nodes,
        machine.server,
        machine.nproc,
        machine.cpu,
        if machine.quick { ", --quick" } else { "" }
    );
    let peers = PeerRatio::from_rows(rows);
    rows_table(&mut s, rows);
    peers_table(&mut s, &peers);
    let natives = NativeRatio::from_rows(rows);
    natives_table(&mut s, &natives);
    contended_table(&mut s, rows);
    nodes_table(&mut s, rows);
    s.push_str(&held::table(held));
    s.push('\n');
    s.push_str(&held::verdicts(held));
    verdict_lines(&mut s, rows, &peers);
    for n in &natives {
        if let Some((target, met)) = n.target() {
            let _ = writeln!(
                s,
                "- {} / {}: {target}: {} ({})",
                n.scenario,
                n.runtime,
                verdict(met),
                fixed(n.ops_ratio()),
            );
        }
    }
    s
}

fn natives_table(s: &mut String, natives: &[NativeRatio]) {
    if natives.is_empty() {
        return;
    }
    s.push_str(
        "\nredlock-tokio, native commands (tokio) against scripts forced (tokio-scripts):\n\n\
         | scenario | runtime | ops/s native | ops/s scripts | ops/s native / scripts | \
         p50 native / scripts | server CPU/cycle native | server CPU/cycle scripts | \
         server CPU native / scripts |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    for n in natives {
        let _ = writeln!(
            s,
            "| {} | {} | {:.0} | {:.0} | {} | {} | {} | {} | {} |",
            n.scenario,
            n.runtime,
            n.native.ops_per_s,
            n.scripts.ops_per_s,
            fixed(n.ops_ratio()),
            fixed(n.p50_ratio()),
            micros(n.native.server_cpu_per_cycle),
            micros(n.scripts.server_cpu_per_cycle),
            fixed(n.server_cpu_ratio()),
        );
    }
}

/// One line per subject and scenario, with the ratios to raw.
fn rows_table(s: &mut String, rows: &[Row]) {
    if !rows.is_empty() {
        s.push_str(
            "| scenario | runtime | subject | p50 | p99 | ops/s | p50 / raw | ops/s / raw | \
             CPU/cycle | CPU / raw | switches/cycle | server CPU/cycle | server CPU / raw |\n\
             |---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
        );
    }
    for r in rows {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {:.0} | {} | {} | {} | {} | {:.2} | {} | {} |",
            r.scenario,
            r.runtime,
            r.subject,
            micros(r.summary.p50),
            micros(r.summary.p99),
            r.summary.ops_per_s,
            fixed(r.p50_ratio()),
            fixed(r.ops_ratio()),
            micros(r.summary.cpu_per_cycle),
            fixed(r.cpu_ratio()),
            r.summary.switches_per_cycle,
            micros(r.summary.server_cpu_per_cycle),
            fixed(r.server_cpu_ratio()),
        );
    }
    if let Some(other) = rows.iter().find(|r| r.runtime != r.baseline_runtime) {
        let _ = writeln!(
            s,
            "\n`{}` rows are compared with raw on `{}`, which ran in the same blocks.",
            crate::OWN_THREAD,
            other.baseline_runtime,
        );
    }
}

fn peers_table(s: &mut String, peers: &[PeerRatio]) {
    if peers.is_empty() {
        return;
    }
    s.push_str(
        "\nconcurrent32, tokio against rslock:\n\n\
         | runtime | tokio ops/s | rslock ops/s | tokio / rslock |\n|---|---|---|---|\n",
    );
    for p in peers {
        let _ = writeln!(
            s,
            "| {} | {:.0} | {:.0} | {} |",
            p.runtime,
            p.tokio_ops,
            p.rslock_ops,
            fixed(p.ratio())
        );
    }
}

/// The contended scenarios' own numbers, and ours against rslock.
fn contended_table(s: &mut String, rows: &[Row]) {
    if !rows.iter().any(|r| r.contended.is_some()) {
        return;
    }
    s.push_str(
        "\ncontended (p50/p99 above are acquire waits, ops/s are sections/s; hand-off: a \
         release call's return to the next holder's lock call's return, 0 when the next \
         holder's returned first, an early hand-off):\n\n\
         | scenario | runtime | subject | sections/s | wait p50 | wait p99 | hand-off p50 | \
         hand-off p99 | early hand-offs | sections per worker | busiest / least | violations \
         | gave up (held locally) | attempts per section, mean / p99 / extra | section p50 \
         | fan-out under load, p50 / p99 | gap p50 / p99 |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let Some(c) = &r.contended else { continue };
        let per_worker: Vec<String> = c.per_worker.iter().map(u64::to_string).collect();
        let _ = writeln!(
            s,
            "| {} | {} | {} | {:.0} | {} | {} | {} | {} | {} of {} | {} | {} | {} | {} ({}) | {} | {} \
             | {} / {} | {} / {} |",
            r.scenario,
            r.runtime,
            r.subject,
            r.summary.ops_per_s,
            micros(r.summary.p50),
            micros(r.summary.p99),
            micros(c.handoff.p50),
            micros(c.handoff.p99),
            c.handoffs_early,
            c.handoff.cycles,
            per_worker.join(" "),
            fixed(c.fairness()),
            c.violations,
            c.gave_up,
            c.held_locally,
            c.attempts.map_or("–".to_owned(), |(mean, p99, extra)| {
                format!("{mean:.2} / {p99} / {extra:.2}")
            }),
            micros(c.section.p50),
            micros(c.loaded_fan_out.p50),
            micros(c.loaded_fan_out.p99),
            micros(c.gap.p50),
            micros(c.gap.p99),
        );
    }
    let peers = ContendedPeer::from_rows(rows);
    if peers.is_empty() {
        return;
    }
    s.push_str(
        "\ncontended, ours against rslock:\n\n\
         | scenario | subject | sections/s / rslock | wait p99 / rslock |\n|---|---|---|---|\n",
    );
    for p in &peers {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} |",
            p.scenario,
            p.ours.subject,
            fixed(p.ops_ratio()),
            fixed(p.p99_ratio()),
        );
    }
}

fn nodes_table(s: &mut String, rows: &[Row]) {
    if !rows.iter().any(|r| r.nodes.is_some()) {
        return;
    }
    s.push_str(
        "\nnodes, serial p50 per cluster size:\n\n| subject | N | p50 | p99 |\n|---|---|---|---|\n",
    );
    for r in rows {
        if let Some(n) = r.nodes {
            let _ = writeln!(
                s,
                "| {} | {n} | {} | {} |",
                r.subject,
                micros(r.summary.p50),
                micros(r.summary.p99)
            );
        }
    }
}

/// The verdict lines of everything but `held`: contended8, nodes, raw ratios, rslock.
fn verdict_lines(s: &mut String, rows: &[Row], peers: &[PeerRatio]) {
    for r in rows {
        if let Some(c) = &r.contended {
            let _ = writeln!(
                s,
                "- {} / {} / {}: violations == 0: {} ({})",
                r.scenario,
                r.runtime,
                r.subject,
                verdict(c.violations == 0),
                c.violations,
            );
        }
    }
    for p in ContendedPeer::from_rows(rows) {
        for (target, met, number) in p.targets() {
            let _ = writeln!(
                s,
                "- {} / {} / {}: {target}: {} ({number})",
                p.scenario,
                p.ours.runtime,
                p.ours.subject,
                verdict(met),
            );
        }
    }
    for (subject, x) in &nodes_ratios(rows) {
        let _ = writeln!(
            s,
            "- nodes / {subject}: p50(N=9) / p50(N=3) <= {NODES_P50_RATIO_MAX}: {} ({})",
            verdict(*x <= NODES_P50_RATIO_MAX),
            fixed(*x),
        );
    }
    for r in rows {
        if let Some((target, met)) = r.target() {
            let _ = writeln!(
                s,
                "- {} / {} / {}: {target}: {} ({})",
                r.scenario,
                r.runtime,
                r.subject,
                verdict(met),
                fixed(if r.scenario == "serial" {
                    r.p50_ratio()
                } else {
                    r.ops_ratio()
                }),
            );
        }
    }
    fenced_lines(s, rows);
    for p in peers {
        let _ = writeln!(
            s,
            "- concurrent32 / {}: tokio / rslock ops/s >= {TOKIO_OVER_RSLOCK_MIN}: {} ({})",
            p.runtime,
            verdict(p.met()),
            fixed(p.ratio()),
        );
    }
}

/// serial: fenced (`tokio-fenced`, the pipeline where the server has it) and fenced by
/// script (`tokio-fenced-scripts`) against unfenced (`tokio`), p50 and the nodes' CPU, where
/// they ran in the same pass (benches/README.md).
fn fenced_lines(s: &mut String, rows: &[Row]) {
    let serial = |subject: &str, runtime: &str| {
        rows.iter()
            .find(|r| r.scenario == "serial" && r.subject == subject && r.runtime == runtime)
    };
    for unfenced in rows
        .iter()
        .filter(|r| r.scenario == "serial" && r.subject == "tokio")
    {
        for fenced in ["tokio-fenced", "tokio-fenced-scripts"] {
            let Some(f) = serial(fenced, unfenced.runtime) else {
                continue;
            };
            let p50 = ratio(
                f.summary.p50.as_secs_f64(),
                unfenced.summary.p50.as_secs_f64(),
            );
            let cpu = ratio(
                f.summary.server_cpu_per_cycle.as_secs_f64(),
                unfenced.summary.server_cpu_per_cycle.as_secs_f64(),
            );
            let _ = writeln!(
                s,
                "- serial / {} / {fenced}: p50 / tokio p50 <= {FENCED_OVER_UNFENCED_MAX}: {} \
                 ({}; server CPU {})",
                unfenced.runtime,
                verdict(p50 <= FENCED_OVER_UNFENCED_MAX),
                fixed(p50),
                fixed(cpu),
            );
        }
    }
}
