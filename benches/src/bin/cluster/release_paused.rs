//! `release`: how long a release call takes with one of five nodes paused (SIGSTOP: its
//! connection stays open and it never answers) against the same driver's release on a
//! healthy cluster, in the same run (docs/algorithm.md §6). A release returns once a quorum has
//! answered, so the paused node must not show in its latency; before that it waited the
//! whole release timeout.
//!
//! Only the release call is timed, not the lock before it. Healthy and paused blocks take
//! turns on one cluster of its own; after each paused block the node resumes and answers
//! its backlog before the next healthy block starts.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use redlock_core::ReleaseOutcome;
use redlock_testkit::Cluster;

use crate::format::{fixed, micros, verdict};
use crate::report::Row;
use crate::scenario::Plan;
use crate::stats::{self, Samples, Stopwatch};
use crate::{Args, Flavour, OWN_THREAD, TTL};

/// The target: paused p50 at most this many times healthy p50, per driver.
pub(crate) const PAUSED_OVER_HEALTHY_MAX: f64 = 2.0;

/// The rows' scenario labels.
pub(crate) const HEALTHY: &str = "release healthy";
pub(crate) const PAUSED: &str = "release paused";

/// Runs the scenario on a fresh 5-node cluster for each driver `args` selects; two rows per
/// driver (healthy, paused).
pub(crate) fn run(plan: Plan, args: &Args) -> Result<Vec<Row>, String> {
    let cluster = Cluster::start(NODES).map_err(|e| format!("starting {NODES} nodes: {e}"))?;
    stats::watch_servers(cluster.nodes().iter().filter_map(|n| n.pid()));
    let urls = cluster.urls();
    eprintln!(
        "cluster bench: release: {NODES} nodes up: {}",
        urls.join(" ")
    );
    let flavour = Flavour::CurrentThread;
    let runtime = flavour.runtime()?;
    let mut drivers = Vec::new();
    for (name, label) in [
        ("tokio", flavour.name()),
        ("async-std", OWN_THREAD),
        ("blocking", OWN_THREAD),
    ] {
        if args.wants_subject(name, label) {
            drivers.push(runtime.block_on(async { Driver::build(name, &urls) })?);
        }
    }
    let result = runtime.block_on(measure(&cluster, &drivers, plan));
    // Whatever happened, the node runs again before the cluster is dropped.
    let _ = cluster.node(PAUSED_NODE).resume();
    runtime.shutdown_timeout(Duration::from_secs(2));
    let samples = result?;
    let mut rows = Vec::new();
    for (driver, [healthy, paused]) in drivers.iter().zip(samples) {
        for (scenario, samples) in [(HEALTHY, healthy), (PAUSED, paused)] {
            rows.push(Row {
                scenario,
                runtime: driver.runtime,
                subject: driver.name,
                summary: samples.summary(),
                baseline: None,
                // No raw baseline here: the healthy row is the paused row's.
                baseline_runtime: driver.runtime,
                contended: None,
                nodes: None,
            });
        }
    }
    Ok(rows)
}

/// The `release` section: each driver's p50s and the verdict line, if the scenario ran.
pub(crate) fn markdown(rows: &[Row]) -> String {
    let mut s = String::new();
    let pairs: Vec<(&Row, &Row)> = (rows.iter())
        .filter(|r| r.scenario == HEALTHY)
        .filter_map(|h| {
            let p = (rows.iter()).find(|p| p.scenario == PAUSED && p.subject == h.subject)?;
            Some((h, p))
        })
        .collect();
    if pairs.is_empty() {
        return s;
    }
    s.push_str(
        "\nrelease, one of 5 nodes paused against all healthy (same run, release call only):\n\n\
         | subject | runtime | p50 healthy | p50 paused | p99 healthy | p99 paused | \
         p50 paused / healthy |\n|---|---|---|---|---|---|---|\n",
    );
    for (h, p) in &pairs {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} |",
            h.subject,
            h.runtime,
            micros(h.summary.p50),
            micros(p.summary.p50),
            micros(h.summary.p99),
            micros(p.summary.p99),
            fixed(p50_ratio(h, p)),
        );
    }
    s.push('\n');
    for (h, p) in &pairs {
        let ratio = p50_ratio(h, p);
        let _ = writeln!(
            s,
            "- release / {}: paused p50 / healthy p50 <= {PAUSED_OVER_HEALTHY_MAX}: {} ({})",
            h.subject,
            verdict(ratio <= PAUSED_OVER_HEALTHY_MAX),
            fixed(ratio),
        );
    }
    s
}

fn p50_ratio(healthy: &Row, paused: &Row) -> f64 {
    crate::format::ratio(
        paused.summary.p50.as_secs_f64(),
        healthy.summary.p50.as_secs_f64(),
    )
}

/// Healthy and paused blocks in turn, drivers taking turns within each; per driver, its
/// healthy and its paused samples.
async fn measure(
    cluster: &Cluster,
    drivers: &[Driver],
    plan: Plan,
) -> Result<Vec<[Samples; 2]>, String> {
    let blocks = plan.serial_blocks;
    let per_block = plan.nodes_cycles.div_ceil(blocks);
    for driver in drivers {
        // Connects, and loads the scripts, before anything is measured.
        for i in 0..plan.warmup.min(50) {
            driver.cycle(&format!("release:warm:{i}")).await?;
        }
    }
    let mut out: Vec<[Samples; 2]> = drivers.iter().map(|_| Default::default()).collect();
    let node = cluster.node(PAUSED_NODE);
    for block in 0..blocks {
        for (state, paused) in [(0, false), (1, true)] {
            if paused {
                node.pause()
                    .map_err(|e| format!("pausing node {PAUSED_NODE}: {e}"))?;
            }
            for (d, driver) in drivers.iter().enumerate() {
                let start = Stopwatch::start();
                let mut samples = Samples::with_capacity(per_block);
                for i in 0..per_block {
                    let key = format!("release:{}:{block}:{state}:{i}", driver.name);
                    samples.push(driver.cycle(&key).await?);
                }
                samples.add_block(&start);
                out[d][state].merge(samples);
            }
            if paused {
                node.resume()
                    .map_err(|e| format!("resuming node {PAUSED_NODE}: {e}"))?;
                // Answered after its backlog: the next healthy block starts healthy.
                node.command_with_timeout(&["PING"], Duration::from_secs(10))
                    .map_err(|e| format!("node {PAUSED_NODE} after resume: {e}"))?;
            }
        }
    }
    Ok(out)
}

/// One driver under test.
struct Driver {
    name: &'static str,
    runtime: &'static str,
    client: Client,
}

enum Client {
    Tokio(redlock_tokio::Redlock),
    AsyncStd(redlock_async_std::Redlock),
    Blocking(redlock_blocking::Redlock),
}

impl Driver {
    /// Built inside the runtime (tokio's driver spawns its loop on it).
    fn build(name: &'static str, urls: &[String]) -> Result<Self, String> {
        let err = |e| format!("{name}: build: {e}");
        let (client, runtime) = match name {
            "tokio" => (
                Client::Tokio(
                    redlock_tokio::Redlock::builder(urls)
                        .and_then(|b| b.config(|c| c.ttl(TTL)).build())
                        .map_err(err)?,
                ),
                Flavour::CurrentThread.name(),
            ),
            "async-std" => (
                Client::AsyncStd(
                    redlock_async_std::Redlock::builder(urls)
                        .and_then(|b| b.config(|c| c.ttl(TTL)).build())
                        .map_err(err)?,
                ),
                OWN_THREAD,
            ),
            _ => (
                Client::Blocking(
                    redlock_blocking::Redlock::builder(urls)
                        .and_then(|b| b.config(|c| c.ttl(TTL)).build())
                        .map_err(err)?,
                ),
                OWN_THREAD,
            ),
        };
        Ok(Self {
            name,
            runtime,
            client,
        })
    }

    /// Locks `key` and releases it; how long the release call took. An error if either
    /// fails, if a quorum did not release, or if the cycle takes over [`CYCLE_TIMEOUT`].
    async fn cycle(&self, key: &str) -> Result<Duration, String> {
        let name = self.name;
        let key = key.to_owned();
        let cycle = async {
            let (took, nodes) = match &self.client {
                Client::Tokio(r) => {
                    let g = r
                        .lock(key)
                        .await
                        .map_err(|e| format!("{name}: lock: {e}"))?;
                    let t0 = Instant::now();
                    let nodes = g.release().await;
                    (t0.elapsed(), nodes)
                }
                Client::AsyncStd(r) => {
                    let g = r
                        .lock(key)
                        .await
                        .map_err(|e| format!("{name}: lock: {e}"))?;
                    let t0 = Instant::now();
                    let nodes = g.release().await;
                    (t0.elapsed(), nodes)
                }
                Client::Blocking(r) => {
                    let r = r.clone();
                    tokio::task::spawn_blocking(move || {
                        let g = r.lock(key).map_err(|e| format!("{name}: lock: {e}"))?;
                        let t0 = Instant::now();
                        let nodes = g.release();
                        Ok::<_, String>((t0.elapsed(), nodes))
                    })
                    .await
                    .map_err(|e| format!("{name}: thread panicked: {e}"))??
                }
            };
            let nodes = nodes.map_err(|e| format!("{name}: release: {e}"))?;
            let released = (nodes.iter()).filter(|n| **n == ReleaseOutcome::Released);
            if released.count() <= NODES / 2 {
                return Err(format!("{name}: release: no quorum released: {nodes:?}"));
            }
            Ok(took)
        };
        tokio::time::timeout(CYCLE_TIMEOUT, cycle)
            .await
            .map_err(|_| format!("{name}: a cycle took over {CYCLE_TIMEOUT:?}"))?
    }
}

/// Nodes in the scenario's cluster, as the issue asks.
const NODES: usize = 5;
/// The node that is paused in the paused blocks.
const PAUSED_NODE: usize = 4;
/// A lock and release: far above the release timeout (half a second for the 10 s ttl).
const CYCLE_TIMEOUT: Duration = Duration::from_secs(10);
