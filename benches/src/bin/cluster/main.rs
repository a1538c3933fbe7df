//! `cargo run --release -p redlock-benches --bin cluster [-- --quick] [--out PATH]`: our
//! drivers (redlock-tokio, redlock-async-std, redlock-blocking) and rslock against a
//! hand-written raw RESP baseline on 5 real local nodes, in one process. The tokio-based
//! subjects (raw, tokio, rslock) run on a `current_thread` and on a 2-worker `multi_thread`
//! runtime; the two drivers with their own thread (async-std, blocking) run once, in the
//! `current_thread` pass, and report as `own-thread`. Then `nodes` (cluster sizes 1 to 9) and
//! `release` (a release with one of 5 nodes paused against a healthy one) and
//! `held` (10,000 and 100,000 auto-extended locks, redlock-tokio only) each run on clusters
//! of their own; `kinds` (the lock kinds against the mutex, redlock-tokio only) runs on the
//! main nodes in the `current_thread` pass, and so does `sweep` (raw, tokio, blocking and rslock
//! at 1 to 64 workers). It prints markdown tables and writes the same as JSON (default
//! `target/cluster-bench.json` of the workspace), with SVG charts beside it ([`charts`]). `--runtime`,
//! `--scenario` and `--subject` run a subset, for profiling.

mod charts;
mod format;
mod held;
mod json;
mod kinds;
mod lock_kind;
mod raw;
mod raw_grant;
mod release_paused;
mod report;
mod scenario;
mod stats;
mod transport;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use redlock_testkit::Cluster;

use crate::kinds::KindsReport;
use crate::raw::{RawClient, Release};
use crate::report::{ContendedRow, Machine, Row};
use crate::scenario::{Peer, PeerSpec, Plan, Subject, SweepPlan, SweepPoint};
use crate::transport::{TRANSPORT_SUBJECTS, TransportUrls};

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
    /// Only these subjects (`--subject tokio,raw`), for profiling; without raw, no ratios.
    subjects: Option<Vec<String>>,
    /// Internal: run one `held` measurement of this many locks on `child_nodes` and print its
    /// result line (`--held-child N --held-nodes ADDR,ADDR,...`); see [`held::child`].
    held_child: Option<usize>,
    /// The nodes of a child process (`--held-nodes` or `--child-nodes`).
    child_nodes: Vec<SocketAddr>,
    /// Internal: be `contended2x4`'s second process for this subject
    /// (`--contended-child SUBJECT --contended-key KEY --contended-workers FIRST,COUNT,TOTAL
    /// --child-nodes ADDR,...`); see [`scenario::child`].
    contended_child: Option<String>,
    contended_key: String,
    contended_workers: (u32, u32, u32),
    /// The TLS and unix-socket URLs of the passes' nodes, for the transport subjects.
    transport: TransportUrls,
}

impl Args {
    /// Whether `--runtime` selects rows labelled `runtime` (a flavour or `own-thread`).
    fn wants_runtime(&self, runtime: &str) -> bool {
        self.runtime
            .as_ref()
            .is_none_or(|r| runtime.starts_with(r.as_str()))
    }

    /// Whether a pass on `flavour` has anything to run: its own rows, or (on
    /// `current_thread`) the `own-thread` ones.
    fn wants_pass(&self, flavour: Flavour) -> bool {
        self.wants_runtime(flavour.name())
            || (flavour.hosts_own_thread() && self.wants_runtime(OWN_THREAD))
    }

    /// Whether the pass on `flavour` has a scenario to run: not when `--scenario` names a
    /// scenario that runs on clusters of its own (`nodes`, `held`), or one that runs on the
    /// `current_thread` pass only (the contended ones, `kinds`, `sweep`) for the other pass.
    fn wants_scenarios_on(&self, flavour: Flavour) -> bool {
        let everywhere = ["serial", "concurrent32"];
        let current_thread = (CONTENDED.iter().map(|(name, _)| name)).chain(&["kinds", "sweep"]);
        everywhere.iter().any(|s| self.wants_scenario(s))
            || (flavour.hosts_own_thread()
                && current_thread.into_iter().any(|s| self.wants_scenario(s)))
    }

    /// Whether the pass on `flavour` runs `subject`, whose rows are labelled `runtime`. Raw
    /// runs in every pass that runs, as the baseline, unless `--subject` leaves it out; the
    /// [`OPT_IN_SUBJECTS`] run only when `--subject` names them.
    fn wants_subject(&self, subject: &str, runtime: &str) -> bool {
        let named = self
            .subjects
            .as_ref()
            .map(|s| s.iter().any(|s| s == subject));
        let chosen = if OPT_IN_SUBJECTS.contains(&subject) {
            named == Some(true)
        } else {
            named != Some(false)
        };
        chosen && (subject == "raw" || self.wants_runtime(runtime))
    }

    fn wants_scenario(&self, name: &str) -> bool {
        self.scenario.as_ref().is_none_or(|s| s == name)
    }
}

fn run() -> Result<(), String> {
    let mut args = parse_args()?;
    let plan = if args.quick { Plan::QUICK } else { Plan::FULL };
    if let Some(locks) = args.held_child {
        return held::child(locks, &args.child_nodes, plan);
    }
    if let Some(subject) = &args.contended_child {
        let spec = PeerSpec {
            subject: subject.clone(),
            nodes: args.child_nodes.clone(),
            key: args.contended_key.clone(),
            first: args.contended_workers.0,
            workers: args.contended_workers.1,
            total: args.contended_workers.2,
        };
        return scenario::child(&spec, plan);
    }
    // Dropped on every return below (and on panic), which kills the nodes.
    let cluster = transport::listeners(Cluster::builder().nodes(NODES), &args)
        .start()
        .map_err(|e| format!("starting {NODES} nodes: {e}"))?;
    args.transport = TransportUrls::of(&cluster);
    let server = format!("{} {}", cluster.server().kind(), cluster.server().version());
    let urls = cluster.urls();
    let addrs: Vec<SocketAddr> = cluster.nodes().iter().map(|n| n.addr()).collect();
    stats::watch_servers(cluster.nodes().iter().filter_map(|n| n.pid()));
    eprintln!(
        "cluster bench: {NODES} nodes of {server} up: {}",
        urls.join(" ")
    );

    let mut all = Pass::default();
    for flavour in [Flavour::CurrentThread, Flavour::MultiThread] {
        if !args.wants_scenarios_on(flavour) || !args.wants_pass(flavour) {
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
        all.add(result?);
    }
    drop(cluster);
    if args.wants_scenario("nodes") && args.wants_runtime(Flavour::CurrentThread.name()) {
        eprintln!("cluster bench: nodes {NODE_COUNTS:?}");
        all.rows.extend(nodes_scenario(plan, &args)?);
    }
    if args.wants_scenario("release") {
        eprintln!("cluster bench: release, one of {NODES} nodes paused");
        all.rows.extend(release_paused::run(plan, &args)?);
    }
    let mut held = Vec::new();
    let flavour = Flavour::MultiThread;
    if args.wants_scenario("held") && args.wants_subject("tokio", flavour.name()) {
        eprintln!("cluster bench: held {:?} locks", plan.held_locks);
        held = held::run(args.quick, plan)?;
    }

    if all.is_empty() && held.is_empty() {
        return Err(format!("--runtime and --subject select nothing; {USAGE}"));
    }
    let machine = Machine::detect(server, NODES, args.quick);
    write_report(&all, &held, &machine, &args.out)
}

/// Prints the markdown of every scenario that ran, writes the charts beside `out` and the
/// JSON to `out`, and lists the charts' paths (in the markdown and the JSON).
fn write_report(
    all: &Pass,
    held: &[held::HeldRow],
    machine: &Machine,
    out: &Path,
) -> Result<(), String> {
    let report = charts::Report {
        rows: &all.rows,
        kinds: all.kinds.as_ref(),
        sweep: &all.sweep,
        machine,
    };
    let (rows, kinds) = (report.rows, report.kinds);
    print!("{}", report::markdown(rows, held, machine));
    print!("{}", release_paused::markdown(rows));
    if let Some(kinds) = kinds {
        print!("{}", kinds.markdown());
    }
    print!("{}", scenario::sweep_markdown(report.sweep));
    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    }
    let charts = charts::write(&report, out)?;
    println!("\ncharts:\n");
    for chart in &charts {
        println!("- {}", chart.display());
    }
    let text = json::json(rows, held, kinds, machine, report.sweep, &charts);
    std::fs::write(out, text).map_err(|e| format!("writing {}: {e}", out.display()))?;
    eprintln!(
        "cluster bench: wrote {} and {} charts beside it",
        out.display(),
        charts.len()
    );
    Ok(())
}

/// What one runtime pass measured: its rows, `kinds` and `sweep` (on `current_thread`); or
/// what the whole run did.
#[derive(Default)]
struct Pass {
    rows: Vec<Row>,
    kinds: Option<KindsReport>,
    sweep: Vec<SweepPoint>,
}

impl Pass {
    /// Adds another pass's results to these.
    fn add(&mut self, other: Self) {
        self.rows.extend(other.rows);
        self.kinds = self.kinds.take().or(other.kinds);
        self.sweep.extend(other.sweep);
    }

    fn is_empty(&self) -> bool {
        self.rows.is_empty() && self.kinds.is_none() && self.sweep.is_empty()
    }
}

/// The pass's scenarios for every selected subject on the current runtime, and `kinds` and
/// `sweep` on `current_thread`.
async fn run_flavour(
    flavour: Flavour,
    urls: Vec<String>,
    addrs: Vec<SocketAddr>,
    plan: Plan,
    args: Args,
) -> Result<Pass, String> {
    let plan = &plan;
    let name = flavour.name();
    let sweeps = flavour.hosts_own_thread() && args.wants_scenario("sweep");
    let subjects = if args.wants_scenario("serial") || args.wants_scenario("concurrent32") || sweeps
    {
        subjects(flavour, &urls, &addrs, &args).await?
    } else {
        Vec::new()
    };
    for subject in &subjects {
        subject
            .warm_up(plan.warmup)
            .await
            .map_err(|e| format!("{} on {name}: {e}", subject.name()))?;
    }
    let mut rows = Vec::new();
    if args.wants_scenario("serial") {
        let samples = scenario::serial(&subjects, plan).await?;
        rows.extend(scenario_rows("serial", flavour, &subjects, samples));
    }
    if args.wants_scenario("concurrent32") {
        let samples = scenario::concurrent(&subjects, plan).await?;
        rows.extend(scenario_rows("concurrent32", flavour, &subjects, samples));
    }
    let mut sweep = Vec::new();
    if sweeps {
        let points = if args.quick {
            SweepPlan::QUICK
        } else {
            SweepPlan::FULL
        };
        eprintln!("cluster bench: sweep, workers {:?}", points.workers);
        sweep = scenario::sweep(&subjects, &points, plan).await?;
    }
    for (scenario, processes) in CONTENDED {
        if flavour.hosts_own_thread() && args.wants_scenario(scenario) {
            let c = contended_scenario(scenario, processes, &urls, &addrs, plan, &args);
            rows.extend(c.await?);
        }
    }
    for subject in &subjects {
        if let Some((written_back, cycles)) = subject.write_backs() {
            println!(
                "{} on {name}: fencing write-backs in {written_back} of {cycles} acquisitions",
                subject.name()
            );
        }
    }
    let kinds = if flavour.hosts_own_thread()
        && args.wants_scenario("kinds")
        && args.wants_subject("tokio", name)
    {
        Some(kinds::run(&urls, &addrs, name, plan).await?)
    } else {
        None
    };
    Ok(Pass { rows, kinds, sweep })
}

/// The subjects `args` selects for one runtime flavour, built on it.
async fn subjects(
    flavour: Flavour,
    urls: &[String],
    addrs: &[SocketAddr],
    args: &Args,
) -> Result<Vec<Arc<Subject>>, String> {
    let name = flavour.name();
    let mut subjects = Vec::new();
    for release in [Release::EvalSha, Release::Del, Release::DelIfEq] {
        if args.wants_subject(release.subject(), name) {
            let raw = RawClient::connect(addrs, TTL, release).await?;
            subjects.push(Subject::raw(raw, name));
        }
    }
    if args.wants_subject("tokio", name) {
        let redlock = redlock_tokio::Redlock::builder(urls)
            .and_then(|b| b.config(|c| c.ttl(TTL)).build())
            .map_err(|e| format!("tokio: build: {e}"))?;
        subjects.push(Subject::tokio(redlock, name));
    }
    if args.wants_subject("tokio-quiet", name) {
        let redlock = redlock_tokio::Redlock::builder(urls)
            .and_then(|b| b.config(|c| c.ttl(TTL).release_notifications(None)).build())
            .map_err(|e| format!("tokio-quiet: build: {e}"))?;
        subjects.push(Subject::tokio_over(redlock, "tokio-quiet", name));
    }
    if args.wants_subject("tokio-scripts", name) {
        let redlock = redlock_tokio::Redlock::builder(urls)
            .and_then(|b| b.config(|c| c.ttl(TTL).native_commands(false)).build())
            .map_err(|e| format!("tokio-scripts: build: {e}"))?;
        subjects.push(Subject::tokio_scripts(redlock, name));
    }
    if args.wants_subject("tokio-fenced", name) {
        let redlock = redlock_tokio::Redlock::builder(urls)
            .and_then(|b| {
                b.config(|c| c.ttl(TTL).fencing(redlock_core::Fencing::every_lock()))
                    .build()
            })
            .map_err(|e| format!("tokio-fenced: build: {e}"))?;
        subjects.push(Subject::tokio_fenced(redlock, name));
    }
    if args.wants_subject("tokio-fenced-scripts", name) {
        let redlock = redlock_tokio::Redlock::builder(urls)
            .and_then(|b| {
                b.config(|c| {
                    c.ttl(TTL)
                        .fencing(redlock_core::Fencing::every_lock())
                        .native_commands(false)
                })
                .build()
            })
            .map_err(|e| format!("tokio-fenced-scripts: build: {e}"))?;
        subjects.push(Subject::tokio_fenced_scripts(redlock, name));
    }
    if args.wants_subject("rslock", name) {
        // Connects lazily, on the first lock (in warm-up), on this runtime.
        subjects.push(Subject::rslock(
            rslock::LockManager::new(urls.to_vec()),
            name,
        ));
    }
    let over = transport::subjects(flavour, &args.transport, args)?;
    subjects.extend(over);
    if flavour.hosts_own_thread() {
        if args.wants_subject("async-std", OWN_THREAD) {
            let redlock = redlock_async_std::Redlock::builder(urls)
                .and_then(|b| b.config(|c| c.ttl(TTL)).build())
                .map_err(|e| format!("async-std: build: {e}"))?;
            subjects.push(Subject::async_std(redlock, name));
        }
        if args.wants_subject("blocking", OWN_THREAD) {
            let redlock = redlock_blocking::Redlock::builder(urls)
                .and_then(|b| b.config(|c| c.ttl(TTL)).build())
                .map_err(|e| format!("blocking: build: {e}"))?;
            subjects.push(Subject::blocking(redlock, name));
        }
    }
    Ok(subjects.into_iter().map(Arc::new).collect())
}

/// A subject of the contended scenarios (`tokio`, `blocking`, `rslock`, or `tokio-j1` and
/// `blocking-j1`: ours with a release-notification jitter (`ReleaseNotifications::jitter`) of 1 ms,
/// or `tokio-noq` and `blocking-noq`: ours without the waiters' queue), with the retry: 20
/// attempts, delay uniform in 0–10 ms. Our drivers: `RetryPolicy` with `delay_min` 0 and
/// `delay_max` 10 ms (the core never waits under 1 ms); rslock: `set_retry(20, 10 ms)`, 20
/// attempts in all, delay uniform in whole ms 0..10. Or `raw-grant`, the floor of a hand-off
/// between processes ([`raw_grant`]; `raw-grant-all` with its grants on one channel that
/// every process hears, `raw-grant-q` with the queue script's calls), which has no retry:
/// it never tries twice.
async fn contended_subject(
    name: &str,
    urls: &[String],
    addrs: &[SocketAddr],
) -> Result<Subject, String> {
    let flavour = Flavour::CurrentThread.name();
    let retry = redlock_core::RetryPolicy {
        max_attempts: Some(CONTENDED_ATTEMPTS),
        max_wait: None,
        delay_min: Duration::ZERO,
        delay_max: CONTENDED_DELAY_MAX,
    };
    let jitter = if name.ends_with("-j1") {
        Duration::from_millis(1)
    } else {
        redlock_core::DEFAULT_NOTIFICATION_JITTER
    };
    let queue = (!name.ends_with("-noq")).then(redlock_core::WaiterQueue::default);
    let config = |c: redlock_core::ConfigBuilder| {
        c.ttl(TTL)
            .retry(retry)
            .release_notifications(Some(redlock_core::ReleaseNotifications { jitter }))
            .waiter_queue(queue)
    };
    match name {
        "tokio" | "tokio-j1" | "tokio-noq" => redlock_tokio::Redlock::builder(urls)
            .and_then(|b| b.config(config).build())
            .map(|r| Subject::tokio_over(r, contended_name(name), flavour))
            .map_err(|e| format!("{name}: build: {e}")),
        "blocking" | "blocking-j1" | "blocking-noq" => redlock_blocking::Redlock::builder(urls)
            .and_then(|b| b.config(config).build())
            .map(|r| Subject::blocking_over(r, contended_name(name), flavour))
            .map_err(|e| format!("{name}: build: {e}")),
        "raw-grant" | "raw-grant-all" | "raw-grant-q" => {
            let floor = raw_grant::Floor::named(name).ok_or(format!("{name}: not a floor"))?;
            raw_grant::RawGrant::connect(addrs, TTL, floor)
                .await
                .map(|g| Subject::raw_grant(g, contended_name(name), flavour))
        }
        "rslock" => {
            let mut manager = rslock::LockManager::new(urls.to_vec());
            manager.set_retry(CONTENDED_ATTEMPTS, CONTENDED_DELAY_MAX);
            Ok(Subject::rslock(manager, flavour))
        }
        _ => Err(format!("{name}: not a subject of the contended scenarios")),
    }
}

/// The name of one of our contended subjects, as its rows carry it.
fn contended_name(name: &str) -> &'static str {
    match name {
        "tokio-j1" => "tokio-j1",
        "tokio-noq" => "tokio-noq",
        "blocking" => "blocking",
        "blocking-j1" => "blocking-j1",
        "blocking-noq" => "blocking-noq",
        "raw-grant" => "raw-grant",
        "raw-grant-all" => "raw-grant-all",
        "raw-grant-q" => "raw-grant-q",
        _ => "tokio",
    }
}

/// A contended scenario (`processes` of them on one key, [`CONTENDED`]) for tokio, blocking
/// and rslock (raw has no retry and is left out), and the jitter subjects when named, on
/// the `current_thread` pass.
async fn contended_scenario(
    scenario: &'static str,
    processes: u32,
    urls: &[String],
    addrs: &[SocketAddr],
    plan: &Plan,
    args: &Args,
) -> Result<Vec<Row>, String> {
    let name = Flavour::CurrentThread.name();
    let mut subjects = Vec::new();
    let candidates = [
        ("tokio", name),
        ("tokio-j1", name),
        ("tokio-noq", name),
        ("blocking", OWN_THREAD),
        ("blocking-j1", OWN_THREAD),
        ("blocking-noq", OWN_THREAD),
        ("rslock", name),
        ("raw-grant", name),
        ("raw-grant-all", name),
        ("raw-grant-q", name),
    ];
    for (subject, runtime) in candidates {
        if args.wants_subject(subject, runtime) {
            subjects.push(Arc::new(contended_subject(subject, urls, addrs).await?));
        }
    }
    for subject in &subjects {
        subject
            .warm_up(plan.warmup.min(20))
            .await
            .map_err(|e| format!("{} on {name}: {e}", subject.name()))?;
    }
    let workers = u32::try_from(plan.contended_workers).unwrap_or(8);
    let each = workers / processes.max(1);
    let mut peers = Vec::new();
    for subject in &subjects {
        let mut others = Vec::new();
        for p in 1..processes {
            let spec = PeerSpec {
                subject: subject.name().to_owned(),
                nodes: addrs.to_vec(),
                key: scenario::key(subject),
                first: p * each,
                workers: each,
                total: workers,
            };
            others.push(Peer::spawn(&spec, args.quick).await?);
        }
        peers.push(others);
    }
    let results = scenario::contended(&subjects, &mut peers, (each, addrs), plan).await?;
    drop(peers);
    let counts: Vec<String> = subjects
        .iter()
        .zip(&results)
        .map(|(s, c)| format!("{} {}", s.name(), c.waits.len()))
        .collect();
    eprintln!(
        "cluster bench: {scenario} on {name}: sections: {}",
        counts.join(", ")
    );
    Ok(subjects
        .iter()
        .zip(results)
        .map(|(subject, c)| Row {
            scenario,
            runtime: subject.runtime(),
            subject: subject.name(),
            summary: c.waits.clone().summary(),
            baseline: None,
            baseline_runtime: name,
            contended: Some(ContendedRow::new(c)),
            nodes: None,
        })
        .collect())
}

/// `nodes`: serial cycles of raw and tokio on a fresh cluster of each size in
/// [`NODE_COUNTS`], on a `current_thread` runtime; each cluster is dropped before the next.
fn nodes_scenario(plan: Plan, args: &Args) -> Result<Vec<Row>, String> {
    let flavour = Flavour::CurrentThread;
    let name = flavour.name();
    let plan = Plan {
        serial_cycles: plan.nodes_cycles,
        serial_blocks: 4,
        ..plan
    };
    let mut rows = Vec::new();
    for (n, label) in NODE_COUNTS.into_iter().zip(NODE_LABELS) {
        let cluster = Cluster::start(n).map_err(|e| format!("starting {n} nodes: {e}"))?;
        let urls = cluster.urls();
        let addrs: Vec<SocketAddr> = cluster.nodes().iter().map(|node| node.addr()).collect();
        stats::watch_servers(cluster.nodes().iter().filter_map(|node| node.pid()));
        let runtime = flavour.runtime()?;
        let args = args.clone();
        let task = async move {
            let mut subjects = Vec::new();
            if args.wants_subject("raw", name) {
                let raw = RawClient::connect(&addrs, TTL, Release::EvalSha).await?;
                subjects.push(Subject::raw(raw, name));
            }
            if args.wants_subject("tokio", name) {
                let redlock = redlock_tokio::Redlock::builder(&urls)
                    .and_then(|b| b.config(|c| c.ttl(TTL)).build())
                    .map_err(|e| format!("tokio: build: {e}"))?;
                subjects.push(Subject::tokio(redlock, name));
            }
            if args.wants_subject("tokio-fenced", name) {
                let redlock = redlock_tokio::Redlock::builder(&urls)
                    .and_then(|b| {
                        b.config(|c| c.ttl(TTL).fencing(redlock_core::Fencing::every_lock()))
                            .build()
                    })
                    .map_err(|e| format!("tokio-fenced: build: {e}"))?;
                subjects.push(Subject::tokio_fenced(redlock, name));
            }
            let subjects: Vec<Arc<Subject>> = subjects.into_iter().map(Arc::new).collect();
            for subject in &subjects {
                subject
                    .warm_up(plan.warmup.min(50))
                    .await
                    .map_err(|e| format!("{} on {n} nodes: {e}", subject.name()))?;
            }
            let samples = scenario::serial(&subjects, &plan).await?;
            for subject in &subjects {
                if let Some((written_back, cycles)) = subject.write_backs() {
                    println!(
                        "{} on {n} nodes: fencing write-backs in {written_back} of {cycles} acquisitions",
                        subject.name()
                    );
                }
            }
            let mut rows = scenario_rows(label, flavour, &subjects, samples);
            for row in &mut rows {
                row.nodes = Some(n);
            }
            Ok::<_, String>(rows)
        };
        let result = runtime
            .block_on(runtime.spawn(task))
            .map_err(|e| format!("nodes run panicked: {e}"))
            .and_then(|r| r);
        runtime.shutdown_timeout(Duration::from_secs(2));
        drop(cluster);
        rows.extend(result?);
    }
    Ok(rows)
}

/// One row per subject, each with raw's summary (if raw ran) as its baseline.
fn scenario_rows(
    scenario: &'static str,
    flavour: Flavour,
    subjects: &[Arc<Subject>],
    samples: Vec<stats::Samples>,
) -> Vec<Row> {
    let counts: Vec<String> = subjects
        .iter()
        .zip(&samples)
        .map(|(s, x)| format!("{} {}", s.name(), x.len()))
        .collect();
    eprintln!(
        "cluster bench: {scenario} on {}: cycles: {}",
        flavour.name(),
        counts.join(", ")
    );
    let summaries: Vec<_> = samples.into_iter().map(stats::Samples::summary).collect();
    let baseline = subjects
        .iter()
        .position(|s| s.name() == "raw")
        .map(|i| summaries[i]);
    subjects
        .iter()
        .zip(summaries)
        .map(|(subject, summary)| Row {
            scenario,
            runtime: subject.runtime(),
            subject: subject.name(),
            summary,
            baseline,
            baseline_runtime: flavour.name(),
            contended: None,
            nodes: None,
        })
        .collect()
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

    /// The pass that also runs the `own-thread` subjects (async-std, blocking).
    fn hosts_own_thread(self) -> bool {
        matches!(self, Self::CurrentThread)
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
        subjects: None,
        held_child: None,
        child_nodes: Vec::new(),
        contended_child: None,
        contended_key: String::new(),
        contended_workers: (0, 0, 0),
        transport: TransportUrls::default(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--quick" => args.quick = true,
            "--out" => args.out = it.next().ok_or("--out needs a path")?.into(),
            "--runtime" => args.runtime = Some(it.next().ok_or("--runtime needs a flavour")?),
            "--scenario" => args.scenario = Some(it.next().ok_or("--scenario needs a name")?),
            "--held-child" => {
                let n = it.next().ok_or("--held-child needs a lock count")?;
                args.held_child = Some(n.parse().map_err(|e| format!("--held-child: {e}"))?);
            }
            "--held-nodes" | "--child-nodes" => {
                let nodes = it.next().ok_or("--child-nodes needs addresses")?;
                args.child_nodes = nodes
                    .split(',')
                    .map(|a| a.parse().map_err(|e| format!("{arg} {a}: {e}")))
                    .collect::<Result<_, String>>()?;
            }
            "--contended-child" => {
                args.contended_child = Some(it.next().ok_or("--contended-child needs a subject")?);
            }
            "--contended-key" => {
                args.contended_key = it.next().ok_or("--contended-key needs a key")?;
            }
            "--contended-workers" => {
                let spec = it.next().unwrap_or_default();
                args.contended_workers = contended_workers(&spec)?;
            }
            "--subject" => {
                let names = it.next().ok_or("--subject needs a name")?;
                args.subjects = Some(names.split(',').map(str::to_owned).collect());
            }
            _ => return Err(format!("unknown argument {arg:?}; {USAGE}")),
        }
    }
    check_names(&args)?;
    Ok(args)
}

/// `--contended-workers FIRST,COUNT,TOTAL`: a child's workers and every process's together.
fn contended_workers(spec: &str) -> Result<(u32, u32, u32), String> {
    let numbers: Vec<u32> = (spec.split(',')).map_while(|n| n.parse().ok()).collect();
    match numbers[..] {
        [first, count, total] => Ok((first, count, total)),
        _ => Err(format!(
            "--contended-workers {spec:?}: not FIRST,COUNT,TOTAL"
        )),
    }
}

/// Every `--runtime`, `--scenario` and `--subject` named is one the bench knows.
fn check_names(args: &Args) -> Result<(), String> {
    let runtime_ok = args.runtime.as_deref().is_none_or(|r| {
        [
            Flavour::CurrentThread.name(),
            Flavour::MultiThread.name(),
            OWN_THREAD,
        ]
        .iter()
        .any(|name| !r.is_empty() && name.starts_with(r))
    });
    let scenario_ok = args
        .scenario
        .as_deref()
        .is_none_or(|s| SCENARIOS.contains(&s));
    let subject_ok = args.subjects.as_deref().is_none_or(|s| {
        s.iter()
            .all(|s| SUBJECTS.contains(&s.as_str()) || OPT_IN_SUBJECTS.contains(&s.as_str()))
    });
    if !(runtime_ok && scenario_ok && subject_ok) {
        return Err(format!(
            "unknown --runtime, --scenario or --subject; {USAGE}"
        ));
    }
    Ok(())
}

/// Nodes in the cluster, as the issue asks.
const NODES: usize = 5;

/// The lock ttl for every subject.
pub(crate) const TTL: Duration = Duration::from_secs(10);

/// The runtime label of the drivers that run their own thread (async-std, blocking).
pub(crate) const OWN_THREAD: &str = "own-thread";

/// Every scenario `--scenario` takes.
const SCENARIOS: [&str; 10] = [
    "serial",
    "concurrent32",
    "sweep",
    "contended8",
    "contended2x4",
    "contended4x2",
    "nodes",
    "release",
    "held",
    "kinds",
];

/// The contended scenarios, each with how many processes share its 8 workers.
const CONTENDED: [(&str, u32); 3] = [("contended8", 1), ("contended2x4", 2), ("contended4x2", 4)];

/// The contended scenarios: attempts per acquire and the longest delay between them.
const CONTENDED_ATTEMPTS: u32 = 20;
const CONTENDED_DELAY_MAX: Duration = Duration::from_millis(10);

/// `nodes`: the cluster sizes, and the scenario label of each one's rows.
const NODE_COUNTS: [usize; 5] = [1, 3, 5, 7, 9];
const NODE_LABELS: [&str; 5] = [
    "nodes N=1",
    "nodes N=3",
    "nodes N=5",
    "nodes N=7",
    "nodes N=9",
];

/// Every subject that runs by default, in the order each pass runs them.
const SUBJECTS: [&str; 5] = ["raw", "tokio", "rslock", "async-std", "blocking"];

/// Subjects that run only when `--subject` names them, in the `serial` and `concurrent32`
/// scenarios of the tokio flavours: the raw client releasing by plain `DEL` (a
/// ceiling, not a correct release) or by `DELIFEQ` (Valkey 9), and redlock-tokio with
/// native commands turned off (scripts on every server), to set against `tokio`, or with
/// release notifications off (`tokio-quiet`: a release without its `PUBLISH`, as the raw
/// client's); and, in the
/// contended scenarios only, `tokio-j1` and `blocking-j1`: ours with a
/// release-notification jitter of 1 ms, to set against the default of none (the herd: benches/README.md, "Hand-off"),
/// and `tokio-noq` and `blocking-noq`: ours without the waiters' queue, to set against it,
/// and `raw-grant`: the floor of a hand-off between processes ([`raw_grant`]), with
/// `raw-grant-all` (every grant heard by every process) and `raw-grant-q` (the queue
/// script's calls).
pub(crate) const OPT_IN_SUBJECTS: [&str; 17] = [
    "raw-grant",
    "raw-grant-all",
    "raw-grant-q",
    "tokio-quiet",
    "tokio-j1",
    "blocking-j1",
    "tokio-noq",
    "blocking-noq",
    "raw-del",
    "raw-delifeq",
    "tokio-scripts",
    "tokio-fenced",
    "tokio-fenced-scripts",
    TRANSPORT_SUBJECTS[0],
    TRANSPORT_SUBJECTS[1],
    TRANSPORT_SUBJECTS[2],
    TRANSPORT_SUBJECTS[3],
];

const USAGE: &str = "usage: cluster [--quick] [--out PATH] \
                     [--runtime current_thread|multi_thread|own-thread] \
                     [--scenario serial|concurrent32|sweep|contended8|contended2x4|contended4x2|nodes|release|held|kinds] \
                     [--subject raw,tokio,rslock,async-std,blocking,raw-grant,raw-grant-all,raw-grant-q,tokio-j1,blocking-j1,tokio-noq,blocking-noq,\
                     raw-del,raw-delifeq,tokio-quiet,tokio-scripts,tokio-fenced,tokio-fenced-scripts,\
                     tokio-tls,tokio-unix,blocking-tls,blocking-unix]";

#[cfg(test)]
mod tests {
    use super::contended_workers;

    #[test]
    fn contended_workers_takes_three_numbers_and_names_a_bad_spec() {
        assert_eq!(contended_workers("4,2,8"), Ok((4, 2, 8)));
        for bad in ["", "4,2", "4,2,8,1", "4,x,8", "-1,2,8", "4,,8"] {
            let err = contended_workers(bad).unwrap_err();
            assert!(
                err.contains("FIRST,COUNT,TOTAL") && err.contains(bad),
                "{err}"
            );
        }
    }
}
