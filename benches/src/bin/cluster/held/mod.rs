//! `held`: many locks held at once under auto-extension, `redlock-tokio` only (rslock has no
//! auto-extension, raw no locks to hold). It acquires N locks on distinct keys, holds them
//! for a window, counts renewals and lost locks, checks the keys on every node, releases them
//! and checks that the nodes are empty. It measures the bench process's RSS, never the
//! nodes'. Each lock count runs in a child process of its own ([`run`], [`child`]).

mod node;
mod row;

use std::io::Read;
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redlock_core::{AutoExtend, LockOptions, NodeFault, ReleaseOutcome};
use redlock_testkit::Cluster;
use redlock_tokio::{LockGuard, Redlock};
use tokio::task::JoinSet;

use self::node::{dbsize, pttl_scan};
use crate::scenario::Plan;
use crate::stats::rss_bytes;
use crate::{Flavour, NODES};

pub(crate) use node::{on_nodes, script_calls};
pub(crate) use row::{HeldEntry, HeldRow, table, verdicts};

/// `held`: each lock count in `plan.held_locks` on one fresh cluster, each in a child process
/// of its own (this binary with `--held-child`). In one process, memory the allocator kept
/// from earlier work is reused by the next run and hides part of its RSS: 10,000 locks
/// measured after 100,000 showed 960 bytes per lock, against 2,700 in a fresh process.
pub(crate) fn run(quick: bool, plan: Plan) -> Result<Vec<HeldRow>, String> {
    let cluster = Cluster::start(NODES).map_err(|e| format!("starting {NODES} nodes: {e}"))?;
    let nodes: Vec<String> = cluster
        .nodes()
        .iter()
        .map(|n| n.addr().to_string())
        .collect();
    eprintln!(
        "cluster bench: held: {NODES} nodes up: {}",
        cluster.urls().join(" ")
    );
    let exe = std::env::current_exe().map_err(|e| format!("held: this binary's path: {e}"))?;
    let mut out = Vec::new();
    for locks in plan.held_locks {
        let mut command = Command::new(&exe);
        command
            .args(["--held-child", &locks.to_string(), "--held-nodes"])
            .arg(nodes.join(","))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        if quick {
            command.arg("--quick");
        }
        let mut child = command
            .spawn()
            .map_err(|e| format!("held: starting {}: {e}", exe.display()))?;
        let bound = Instant::now() + CHILD_BOUND;
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if Instant::now() < bound => std::thread::sleep(Duration::from_millis(50)),
                Ok(None) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(format!("held: {locks} locks: over {:?}", CHILD_BOUND));
                }
                Err(e) => return Err(format!("held: waiting for the child: {e}")),
            }
        };
        let mut stdout = String::new();
        // The child prints one short line: it fits in the pipe, so reading after the exit
        // cannot deadlock.
        if let Some(mut pipe) = child.stdout.take() {
            let _ = pipe.read_to_string(&mut stdout);
        }
        if !status.success() {
            return Err(format!("held: {locks} locks: the child failed ({status})"));
        }
        out.push(row::decode(Flavour::MultiThread.name(), stdout.trim())?);
    }
    drop(cluster);
    Ok(out)
}

/// The child side of [`run`]: one run on a fresh 2-worker runtime, with the nodes
/// the parent started; prints the result line on stdout.
pub(crate) fn child(locks: usize, nodes: &[SocketAddr], plan: Plan) -> Result<(), String> {
    let flavour = Flavour::MultiThread;
    if nodes.is_empty() {
        return Err("--held-child needs --held-nodes".to_owned());
    }
    let urls: Vec<String> = nodes.iter().map(|a| format!("redis://{a}")).collect();
    let runtime = flavour.runtime()?;
    let task = hold(urls, nodes.to_vec(), locks, flavour.name(), plan);
    let result = runtime
        .block_on(runtime.spawn(task))
        .map_err(|e| format!("held run panicked: {e}"))
        .and_then(|r| r);
    runtime.shutdown_timeout(Duration::from_secs(2));
    println!("{}", row::encode(&result?));
    Ok(())
}

/// Acquires `locks` locks with a fresh `Redlock` on `urls`, holds them for
/// `plan.held_window` from the last acquisition, then releases them. An error ends the run:
/// a failed acquire or release, a phase over its time bound, a node that does not answer.
async fn hold(
    urls: Vec<String>,
    addrs: Vec<SocketAddr>,
    locks: usize,
    runtime: &'static str,
    plan: Plan,
) -> Result<HeldRow, String> {
    let ttl = plan.held_ttl;
    let window = plan.held_window;
    // Before the `Redlock` exists, so its connections and buffers count as the locks' cost.
    let rss_before = rss_bytes();
    let redlock = Redlock::builder(&urls)
        .and_then(|b| b.config(|c| c.ttl(ttl)).build())
        .map_err(|e| format!("held: build: {e}"))?;
    // "Renew at 1/3": once a third of the ttl has passed, i.e. below 2/3 of it remaining.
    let auto = AutoExtend {
        renew_below: RENEW_BELOW,
        max_renewals: None,
        // Bounded, as the core requires; far beyond this scenario's own time bounds.
        max_hold: Some(window + ACQUIRE_BOUND + RELEASE_BOUND),
    };
    let options = LockOptions::default().auto_extend(Some(auto));
    let keys = Keys::new(locks);

    let (guards, acquire) = acquire_all(&redlock, &keys, &options).await?;
    let rss_held = rss_bytes();
    eprintln!(
        "cluster bench: held {locks}: acquired in {:.1} s, holding for {window:?}",
        acquire.as_secs_f64()
    );
    let watched = watch(&guards, &addrs, ttl, window).await?;
    let rss_end = rss_bytes();
    let lost = guards.iter().filter(|g| g.lost_reason().is_some()).count();
    let on_keys = check_keys(&addrs, &keys).await?;
    let (release, outcomes) = release_all(guards).await?;
    drop(redlock);
    // A release returns once a quorum has answered; the other nodes' answers may still be
    // on their way (bounded by the release timeout, under a second here).
    let mut dbsize_after = on_nodes(&addrs, dbsize).await?;
    for _ in 0..KEYS_LEFT_POLLS {
        if dbsize_after.iter().sum::<u64>() == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        dbsize_after = on_nodes(&addrs, dbsize).await?;
    }
    let rss_released = rss_bytes();

    Ok(HeldRow {
        runtime,
        locks,
        ttl,
        renew_below: RENEW_BELOW,
        held_for: watched.held_for,
        acquire,
        renewals: watched.renewals,
        node_extends_min: watched.node_extends.iter().copied().min().unwrap_or(0),
        node_extends_max: watched.node_extends.iter().copied().max().unwrap_or(0),
        lost,
        min_validity: watched.min_validity,
        keys_held_min: on_keys.dbsize.iter().copied().min().unwrap_or(0),
        keys_missing: on_keys.missing,
        min_pttl: on_keys.min_pttl,
        release,
        release_partial: outcomes.partial,
        release_node_timeouts: outcomes.timeouts,
        release_node_other: outcomes.other,
        keys_left: dbsize_after.iter().sum(),
        rss_before,
        rss_held,
        rss_end,
        rss_released,
    })
}

/// Phase 1: acquires every key, `IN_FLIGHT` at a time: the guards, and how long it took from the
/// second lock on. The driver connects in the background: the first lock retries for up
/// to `CONNECT_GRACE`.
async fn acquire_all(
    redlock: &Redlock,
    keys: &Keys,
    options: &LockOptions,
) -> Result<(Vec<LockGuard>, Duration), String> {
    let first = connected(redlock, keys, options).await?;
    let guards = Arc::new(Mutex::new(Vec::with_capacity(keys.count)));
    let t_acquire = Instant::now();
    push(&guards, first);
    let next = Arc::new(AtomicUsize::new(1));
    let mut workers = JoinSet::new();
    for _ in 0..IN_FLIGHT.min(keys.count) {
        let (redlock, keys, options) = (redlock.clone(), keys.clone(), options.clone());
        let (next, guards) = (Arc::clone(&next), Arc::clone(&guards));
        workers.spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= keys.count {
                    return Ok(());
                }
                if t_acquire.elapsed() > ACQUIRE_BOUND {
                    return Err(format!("held: acquiring took over {ACQUIRE_BOUND:?}"));
                }
                let lock = redlock.lock_with(keys.name(i), options.clone());
                let guard = tokio::time::timeout(OP_TIMEOUT, lock)
                    .await
                    .map_err(|_| {
                        format!("held: lock {i} of {} took over {OP_TIMEOUT:?}", keys.count)
                    })?
                    .map_err(|e| format!("held: lock {i} of {}: {e}", keys.count))?;
                push(&guards, guard);
            }
        });
    }
    join_all(&mut workers).await?;
    let acquire = t_acquire.elapsed();
    let guards: Vec<LockGuard> = std::mem::take(&mut *lock_vec(&guards));
    if guards.len() != keys.count {
        return Err(format!(
            "held: {} of {} locks acquired",
            guards.len(),
            keys.count
        ));
    }
    Ok((guards, acquire))
}

/// What [`watch`] saw during the window.
struct Watched {
    held_for: Duration,
    renewals: u64,
    min_validity: Duration,
    /// Extension scripts each node ran during the window.
    node_extends: Vec<u64>,
}

/// Phase 2: holds for `window`. Renewals are counted as moves of each guard's deadline (each
/// `Extended` event moves it, strictly later), sampled often enough that no lock renews
/// twice between two samples. The nodes count the extension scripts they ran, as a
/// cross-check.
async fn watch(
    guards: &[LockGuard],
    addrs: &[SocketAddr],
    ttl: Duration,
    window: Duration,
) -> Result<Watched, String> {
    let scripts_before = on_nodes(addrs, script_calls).await?;
    let t_window = Instant::now();
    let mut last: Vec<Instant> = guards.iter().map(|g| g.deadline()).collect();
    let mut renewals = 0u64;
    let mut min_validity = ttl;
    let interval = ttl / SAMPLES_PER_TTL;
    loop {
        let done = t_window.elapsed() >= window;
        for (guard, seen) in guards.iter().zip(&mut last) {
            let deadline = guard.deadline();
            if deadline != *seen {
                renewals += 1;
                *seen = deadline;
            }
            min_validity = min_validity.min(guard.validity());
        }
        if done {
            break;
        }
        let left = window.saturating_sub(t_window.elapsed());
        tokio::time::sleep(interval.min(left)).await;
    }
    let held_for = t_window.elapsed();
    let scripts_after = on_nodes(addrs, script_calls).await?;
    Ok(Watched {
        held_for,
        renewals,
        min_validity,
        node_extends: scripts_after
            .iter()
            .zip(&scripts_before)
            .map(|(a, b)| a.saturating_sub(*b))
            .collect(),
    })
}

/// What [`check_keys`] found on the nodes.
struct OnKeys {
    /// `DBSIZE` of each node.
    dbsize: Vec<u64>,
    /// Keys missing or without expiry, over all nodes.
    missing: u64,
    /// The smallest PTTL of any key on any node.
    min_pttl: Option<Duration>,
}

/// Phase 3: every key on every node, with a PTTL only a renewal in the window can explain.
async fn check_keys(addrs: &[SocketAddr], keys: &Keys) -> Result<OnKeys, String> {
    let names: Arc<Vec<String>> = Arc::new((0..keys.count).map(|i| keys.name(i)).collect());
    let dbsize = on_nodes(addrs, dbsize).await?;
    let pttls = on_nodes(addrs, move |addr| pttl_scan(addr, &names)).await?;
    Ok(OnKeys {
        dbsize,
        missing: pttls.iter().map(|p| p.missing).sum(),
        min_pttl: pttls.iter().filter_map(|p| p.min).min(),
    })
}

/// Phase 4: releases every guard, `IN_FLIGHT` at a time: how long it took, and the nodes'
/// answers. On a busy machine a node may answer after the release timeout (the attempt
/// timeout, 1 s at this ttl): the script still runs when the node gets to it, which the
/// caller's `DBSIZE` checks. Other answers are counted apart.
async fn release_all(guards: Vec<LockGuard>) -> Result<(Duration, ReleaseCounts), String> {
    let t_release = Instant::now();
    let count = guards.len();
    let guards = Arc::new(Mutex::new(guards));
    let mut workers = JoinSet::new();
    for _ in 0..IN_FLIGHT.min(count) {
        let guards = Arc::clone(&guards);
        workers.spawn(async move {
            let mut outcomes = ReleaseCounts::default();
            loop {
                let Some(guard) = lock_vec(&guards).pop() else {
                    return Ok(outcomes);
                };
                if t_release.elapsed() > RELEASE_BOUND {
                    return Err(format!("held: releasing took over {RELEASE_BOUND:?}"));
                }
                let nodes = tokio::time::timeout(OP_TIMEOUT, guard.release())
                    .await
                    .map_err(|_| format!("held: a release took over {OP_TIMEOUT:?}"))?
                    .map_err(|e| format!("held: release: {e}"))?;
                outcomes.add(&nodes);
            }
        });
    }
    let mut outcomes = ReleaseCounts::default();
    while let Some(joined) = workers.join_next().await {
        let counts = joined.map_err(|e| format!("held: worker panicked: {e}"))??;
        outcomes.partial += counts.partial;
        outcomes.timeouts += counts.timeouts;
        outcomes.other += counts.other;
    }
    Ok((t_release.elapsed(), outcomes))
}

/// What the nodes answered to the releases.
#[derive(Debug, Default)]
struct ReleaseCounts {
    /// Releases that some node did not answer with `Released`.
    partial: u64,
    /// Node answers `Failed(Timeout)`.
    timeouts: u64,
    /// Every other node answer but `Released`.
    other: u64,
}

impl ReleaseCounts {
    fn add(&mut self, nodes: &[ReleaseOutcome]) {
        let mut partial = false;
        for node in nodes {
            match node {
                ReleaseOutcome::Released => continue,
                // Not answered when the release returned (a quorum had): released in the
                // background, which `keys_left` checks.
                ReleaseOutcome::Pending => {}
                ReleaseOutcome::Failed(NodeFault::Timeout) => self.timeouts += 1,
                _ => self.other += 1,
            }
            partial = true;
        }
        self.partial += u64::from(partial);
    }
}

/// The bench's key names for one run: `held:PID:N:i`.
#[derive(Clone)]
struct Keys {
    prefix: Arc<str>,
    count: usize,
}

impl Keys {
    fn new(count: usize) -> Self {
        Self {
            prefix: format!("held:{}:{count}:", std::process::id()).into(),
            count,
        }
    }

    fn name(&self, i: usize) -> String {
        format!("{}{i}", self.prefix)
    }
}

/// Acquires key 0, retrying for up to [`CONNECT_GRACE`] while the driver connects.
async fn connected(
    redlock: &Redlock,
    keys: &Keys,
    options: &LockOptions,
) -> Result<LockGuard, String> {
    let grace = Instant::now() + CONNECT_GRACE;
    loop {
        let lock = redlock.lock_with(keys.name(0), options.clone());
        match tokio::time::timeout(OP_TIMEOUT, lock).await {
            Ok(Ok(guard)) => return Ok(guard),
            _ if Instant::now() < grace => tokio::time::sleep(Duration::from_millis(20)).await,
            Ok(Err(e)) => return Err(format!("held: first lock: {e}")),
            Err(_) => return Err(format!("held: first lock took over {OP_TIMEOUT:?}")),
        }
    }
}

fn push(guards: &Mutex<Vec<LockGuard>>, guard: LockGuard) {
    lock_vec(guards).push(guard);
}

fn lock_vec(guards: &Mutex<Vec<LockGuard>>) -> std::sync::MutexGuard<'_, Vec<LockGuard>> {
    // A worker that panicked while pushing left a valid `Vec`; the panic is reported by
    // `join_all`.
    guards
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

async fn join_all(workers: &mut JoinSet<Result<(), String>>) -> Result<(), String> {
    while let Some(joined) = workers.join_next().await {
        joined.map_err(|e| format!("held: worker panicked: {e}"))??;
    }
    Ok(())
}

/// How long a child may take: its acquire and release bounds, the window, and its node
/// queries, with room to spare.
const CHILD_BOUND: Duration = Duration::from_secs(600);

/// Checks of the nodes' key counts after the releases, 20 ms apart, until none is left: the
/// nodes a release did not wait for answer within its release timeout (under a second).
const KEYS_LEFT_POLLS: u32 = 100;

/// "Renew at 1/3" of the ttl: renew when less than 2/3 of it remains.
const RENEW_BELOW: f64 = 2.0 / 3.0;

/// Locks acquired (and later released) at once.
const IN_FLIGHT: usize = 256;

/// Deadline samples per ttl: a lock renews every third of a ttl, so at 30 per ttl no lock
/// can renew twice between two samples.
const SAMPLES_PER_TTL: u32 = 30;

/// One acquire or release taking longer means a node or the driver is stuck.
const OP_TIMEOUT: Duration = Duration::from_secs(5);

/// Bounds on the acquire and release phases.
const ACQUIRE_BOUND: Duration = Duration::from_secs(180);
const RELEASE_BOUND: Duration = Duration::from_secs(180);

/// How long the first lock may wait for the driver to connect.
const CONNECT_GRACE: Duration = Duration::from_secs(5);
