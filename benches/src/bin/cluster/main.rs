//! `cargo run --release -p redlock-benches --bin cluster [-- --quick] [--out PATH]`: the
//! redlock-tokio driver against a hand-written raw RESP baseline on 5 real local nodes, on a
//! `current_thread` and on a 2-worker `multi_thread` runtime, in one process. It prints a
//! markdown table and writes the same as JSON (default `target/cluster-bench.json` of the
//! workspace). `--runtime`, `--scenario` and `--subject` run a subset, for profiling.

mod raw;
mod report;
mod resp;
mod scenario;
mod stats;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use redlock_testkit::Cluster;
use redlock_tokio::Redlock;

use crate::raw::RawClient;
use crate::report::{Machine, Row};
use crate::scenario::{Plan, Subject};

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cluster bench: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Command-line options.
#[derive(Debug, Clone)]
struct Args {
    quick: bool,
    out: PathBuf,
    /// Only this runtime flavour (`--runtime`), for profiling.
    runtime: Option<String>,
    /// Only this scenario (`--scenario`), for profiling.
    scenario: Option<String>,
    /// Only this subject (`--subject tokio|raw`), for profiling; the other's columns are 0.
    subject: Option<String>,
}

impl Args {
    fn wants_runtime(&self, flavour: Flavour) -> bool {
        self.runtime
            .as_ref()
            .is_none_or(|r| flavour.name().starts_with(r.as_str()))
    }

    fn wants_scenario(&self, name: &str) -> bool {
        self.scenario.as_ref().is_none_or(|s| s == name)
    }
}

fn run() -> Result<(), String> {
    let args = parse_args()?;
    let plan = if args.quick { Plan::QUICK } else { Plan::FULL };
    // Dropped on every return below (and on panic), which kills the nodes.
    let cluster = Cluster::start(NODES).map_err(|e| format!("starting {NODES} nodes: {e}"))?;
    let server = format!("{} {}", cluster.server().kind(), cluster.server().version());
    let urls = cluster.urls();
    let addrs: Vec<SocketAddr> = cluster.nodes().iter().map(|n| n.addr()).collect();
    eprintln!(
        "cluster bench: {NODES} nodes of {server} up: {}",
        urls.join(" ")
    );

    let mut rows = Vec::new();
    for flavour in [Flavour::CurrentThread, Flavour::MultiThread] {
        if !args.wants_runtime(flavour) {
            continue;
        }
        eprintln!("cluster bench: runtime {}", flavour.name());
        let runtime = flavour.runtime()?;
        // In a spawned task, not in `block_on`: on `multi_thread` the serial loop then runs on
        // a worker thread, as request handlers in a server do.
        let task = run_flavour(flavour, urls.clone(), addrs.clone(), plan, args.clone());
        let result = runtime
            .block_on(runtime.spawn(task))
            .map_err(|e| format!("{} run panicked: {e}", flavour.name()))
            .and_then(|r| r);
        // Bounded: a stuck task must not keep the process (and the nodes) alive.
        runtime.shutdown_timeout(Duration::from_secs(2));
        rows.extend(result?);
    }
    drop(cluster);

    let machine = Machine::detect(server, NODES, args.quick);
    print!("{}", report::markdown(&rows, &machine));
    if let Some(dir) = args.out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    }
    std::fs::write(&args.out, report::json(&rows, &machine))
        .map_err(|e| format!("writing {}: {e}", args.out.display()))?;
    eprintln!("cluster bench: wrote {}", args.out.display());
    Ok(())
}

/// Both scenarios for both subjects on the current runtime.
async fn run_flavour(
    flavour: Flavour,
    urls: Vec<String>,
    addrs: Vec<SocketAddr>,
    plan: Plan,
    args: Args,
) -> Result<Vec<Row>, String> {
    let plan = &plan;
    let redlock = Redlock::builder(&urls)
        .and_then(|b| b.config(|c| c.ttl(TTL)).build())
        .map_err(|e| format!("tokio: build: {e}"))?;
    let raw = RawClient::connect(&addrs, TTL).await?;
    let mut subjects = [
        Subject::tokio(redlock, flavour.name()),
        Subject::raw(raw, flavour.name()),
    ];
    for subject in &mut subjects {
        subject.enabled = args.subject.as_ref().is_none_or(|s| s == subject.name());
        if subject.enabled {
            subject.warm_up(plan.warmup).await?;
        }
    }
    let subjects = subjects.map(Arc::new);
    let mut rows = Vec::new();
    if args.wants_scenario("serial") {
        let [tokio, raw] = scenario::serial(&subjects, plan).await?;
        rows.push(row("serial", flavour, tokio, raw));
    }
    if args.wants_scenario("concurrent32") {
        let [tokio, raw] = scenario::concurrent(&subjects, plan).await?;
        rows.push(row("concurrent32", flavour, tokio, raw));
    }
    Ok(rows)
}

fn row(
    scenario: &'static str,
    flavour: Flavour,
    tokio: stats::Samples,
    raw: stats::Samples,
) -> Row {
    eprintln!(
        "cluster bench: {scenario} on {}: {} tokio cycles, {} raw cycles",
        flavour.name(),
        tokio.len(),
        raw.len()
    );
    Row {
        scenario,
        flavour: flavour.name(),
        tokio: tokio.summary(),
        raw: raw.summary(),
    }
}

#[derive(Debug, Clone, Copy)]
enum Flavour {
    CurrentThread,
    MultiThread,
}

impl Flavour {
    fn name(self) -> &'static str {
        match self {
            Self::CurrentThread => "current_thread",
            Self::MultiThread => "multi_thread(2)",
        }
    }

    fn runtime(self) -> Result<tokio::runtime::Runtime, String> {
        let mut builder = match self {
            Self::CurrentThread => tokio::runtime::Builder::new_current_thread(),
            Self::MultiThread => {
                let mut b = tokio::runtime::Builder::new_multi_thread();
                b.worker_threads(2);
                b
            }
        };
        builder
            .enable_all()
            .build()
            .map_err(|e| format!("building the {} runtime: {e}", self.name()))
    }
}

fn parse_args() -> Result<Args, String> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap_or(Path::new("."));
    let mut args = Args {
        quick: false,
        out: workspace.join("target").join("cluster-bench.json"),
        runtime: None,
        scenario: None,
        subject: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--quick" => args.quick = true,
            "--out" => args.out = it.next().ok_or("--out needs a path")?.into(),
            "--runtime" => args.runtime = Some(it.next().ok_or("--runtime needs a flavour")?),
            "--scenario" => args.scenario = Some(it.next().ok_or("--scenario needs a name")?),
            "--subject" => args.subject = Some(it.next().ok_or("--subject needs a name")?),
            _ => return Err(format!("unknown argument {arg:?}; {USAGE}")),
        }
    }
    let runtime_ok = args.runtime.as_deref().is_none_or(|r| {
        [Flavour::CurrentThread, Flavour::MultiThread]
            .iter()
            .any(|f| !r.is_empty() && f.name().starts_with(r))
    });
    let scenario_ok = args
        .scenario
        .as_deref()
        .is_none_or(|s| ["serial", "concurrent32"].contains(&s));
    let subject_ok = args
        .subject
        .as_deref()
        .is_none_or(|s| ["tokio", "raw"].contains(&s));
    if !(runtime_ok && scenario_ok && subject_ok) {
        return Err(format!(
            "unknown --runtime, --scenario or --subject; {USAGE}"
        ));
    }
    Ok(args)
}

/// Nodes in the cluster, as the issue asks.
const NODES: usize = 5;

/// The lock ttl for both subjects.
const TTL: Duration = Duration::from_secs(10);

const USAGE: &str = "usage: cluster [--quick] [--out PATH] [--runtime current_thread|multi_thread] \
                     [--scenario serial|concurrent32] [--subject tokio|raw]";
