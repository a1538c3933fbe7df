//! Observability (docs/errors.md and the drivers' READMEs): a driver built with its `tracing` and `metrics` features,
//! watched through a capturing subscriber ([`Capture`]) and recorder ([`Recorded`]) while
//! it locks on real nodes. Both are the process's global ones (the driver loops run on
//! threads of their own), so a driver runs these scenarios in a test binary of its own, and
//! they take turns ([`serial`]).

pub mod capture;
pub mod recorder;

use std::sync::{Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use redlock_core::RestartQuarantine;
use redlock_testkit::{Cluster, ClusterBuilder, ServerKind};

pub use capture::{Capture, EventSeen, Seen};
pub use recorder::Recorded;

use crate::{ConfigBuilder, Inspection, LockError, ReleaseOutcome};

/// A driver as these scenarios use it: fewer calls than [`Driver`](crate::Driver), so that
/// each driver's adapter stays a few lines.
pub trait Subject: Clone + Send + Sync + Sized + 'static {
    /// The driver's guard.
    type Guard: Send + 'static;

    /// A handle on `urls` with a ttl of 10 s and the default retry policy.
    fn start(urls: &[String]) -> Result<Self, LockError> {
        Self::start_with(urls, |c| c)
    }
    /// [`start`](Self::start) with `configure` applied to the core configuration after the
    /// ttl.
    fn start_with(
        urls: &[String],
        configure: impl FnOnce(ConfigBuilder) -> ConfigBuilder,
    ) -> Result<Self, LockError>;
    /// Acquires, waiting per the retry policy.
    fn lock(&self, resource: &str) -> Result<Self::Guard, LockError>;
    /// One attempt.
    fn try_lock(&self, resource: &str) -> Result<Self::Guard, LockError>;
    /// Looks at `resource` on every node.
    fn inspect(&self, resource: &str) -> Result<Inspection, LockError>;
    /// The guard's token, as text.
    fn token(guard: &Self::Guard) -> String;
    /// Extends the guard's lock.
    fn extend(guard: &Self::Guard) -> Result<Instant, LockError>;
    /// Releases the guard's lock.
    fn release(guard: Self::Guard) -> Result<Vec<ReleaseOutcome>, LockError>;
}

/// One scenario at a time: they share the process's subscriber and recorder.
pub fn serial() -> MutexGuard<'static, ()> {
    static ONE: Mutex<()> = Mutex::new(());
    ONE.lock().unwrap_or_else(|e| e.into_inner())
}

/// One lock's life traced on 3 nodes with a password, where node 2's URL has a wrong one:
/// the `redlock.lock` span and its `redlock.acquire` (attempts, outcome, each node's vote
/// with its round trip, validity), `redlock.extend` and `redlock.release` spans; events
/// for connections, node 2's refused handshake, a loss and a disconnect. Neither token nor
/// either password appears anywhere in what was captured, at any level.
pub fn traced_lock<S: Subject>() {
    let _one = serial();
    let capture = Capture::global();
    let (cluster, urls, names) = wrong_password_on_node_2(Cluster::builder());
    let d = S::start(&urls).expect("build");
    // Every node answers an inspection or fails it, so node 2's handshake is over first.
    d.inspect("observe:warm-up")
        .expect("an inspection on 2 of 3 nodes");
    let guard = d.lock("observe:traced").expect("a quorum of 2 of 3");
    let token = S::token(&guard);
    S::extend(&guard).expect("extend");
    S::release(guard).expect("release");
    // A loss: the key disappears behind the lock's back; the next extension finds it gone.
    let lost = d.lock("observe:lost").expect("lock");
    let lost_token = S::token(&lost);
    for node in cluster.nodes() {
        node.command(&["DEL", "observe:lost"]).expect("DEL");
    }
    assert!(matches!(S::extend(&lost), Err(LockError::Lost(_))));
    drop(lost);
    cluster.node(1).kill().expect("kill node 1");
    // A request to every node, so that the client reads node 1's connection whatever its
    // idle sockets are watched for (its answer does not matter: node 2 refuses the client).
    let _ = d.inspect("observe:after-kill");
    let seen = wait_for(|| {
        let seen = capture.seen();
        let down = seen
            .events("node disconnected")
            .iter()
            .any(|e| field(e, "node") == names[1]);
        down.then_some(seen)
    });
    assert_lock_spans(&seen, &names);
    assert_events(&seen, &names);
    let dump = seen.dump();
    for secret in [&token, &lost_token, PASSWORD, WRONG_PASSWORD] {
        assert!(
            !dump.contains(secret),
            "{secret:?} in the captured output:\n{dump}"
        );
    }
}

/// A native-command fallback traced: on 3 Redis 7 nodes, node 2 behind a proxy that delays
/// each way by 200 ms, the lock is decided by nodes 0 and 1 and extended at once, before
/// node 2's `HELLO` reply is read, so its extension goes out as `SET … IFEQ` (the node is
/// still probed); Redis 7 refuses that, and the node falls back to the script: an event
/// names the node and `SET`.
pub fn traced_fallback<S: Subject>() {
    let _one = serial();
    let capture = Capture::global();
    let cluster = (Cluster::builder().kinds([ServerKind::Redis; 3]).start())
        .unwrap_or_else(|e| panic!("{e}"));
    let slow = cluster.proxy(2);
    slow.set_latency(Duration::from_millis(200));
    let mut urls = cluster.urls();
    urls[2] = slow.url();
    let node2 = format!("127.0.0.1:{}", slow.addr().port());
    let d = S::start(&urls).expect("build");
    let guard = d
        .lock("observe:fallback")
        .expect("a quorum of nodes 0 and 1");
    S::extend(&guard).expect("extended by nodes 0 and 1");
    wait_for(|| {
        let seen = capture.seen();
        let fell_back = seen.events("node refused a native command; using the script instead");
        fell_back
            .iter()
            .any(|e| field(e, "node") == node2 && field(e, "command") == "SET")
            .then_some(())
    });
    S::release(guard).expect("release");
}

/// Said as it happens, not with a later lock event: node 2's refused handshake (a wrong
/// password), before any lock call; and the `-NOSCRIPT` of a Redis 7 node (which releases by
/// script) whose script cache was flushed behind the client's back, resent in full.
pub fn traced_refusal_and_noscript<S: Subject>() {
    let _one = serial();
    let capture = Capture::global();
    let builder = Cluster::builder().kinds([ServerKind::Redis; 3]);
    let (cluster, urls, names) = wrong_password_on_node_2(builder);
    let d = S::start(&urls).expect("build");
    // No lock call yet: only the connection being closed for the refusal can say it.
    let refused = wait_for(|| {
        let seen = capture.seen();
        let refused = seen.events("node refused the handshake");
        refused
            .into_iter()
            .find(|e| field(e, "node") == names[2])
            .cloned()
    });
    assert_eq!(field(&refused, "command"), "AUTH");
    assert!(
        field(&refused, "reply").starts_with("WRONGPASS"),
        "{refused:?}"
    );
    assert_eq!(refused.level, tracing::Level::WARN);

    let guard = d.lock("observe:noscript").expect("a quorum of 2 of 3");
    let flushed = cluster
        .node(0)
        .command(&["SCRIPT", "FLUSH"])
        .expect("SCRIPT FLUSH");
    assert_eq!(flushed, redlock_testkit::Reply::simple("OK"));
    S::release(guard).expect("released by EVAL on node 0");
    let noscript = wait_for(|| {
        let seen = capture.seen();
        let noscript = seen.events("node had no script cached (NOSCRIPT); sent it in full");
        noscript
            .into_iter()
            .find(|e| field(e, "node") == names[0])
            .cloned()
    });
    assert_eq!(
        (field(&noscript, "count"), field(&noscript, "total")),
        ("1", "1"),
        "{noscript:?}"
    );
    let seen = capture.seen();
    let others = seen.events("node had no script cached (NOSCRIPT); sent it in full");
    assert!(
        others.iter().all(|e| field(e, "node") == names[0]),
        "{others:?}"
    );
    let dump = seen.dump();
    for secret in [PASSWORD, WRONG_PASSWORD] {
        assert!(
            !dump.contains(secret),
            "{secret:?} in the captured output:\n{dump}"
        );
    }
}

/// Three nodes of `builder` that require [`PASSWORD`], the client's URLs (node 2's with
/// [`WRONG_PASSWORD`]) and the nodes' names as spans and events give them.
fn wrong_password_on_node_2(builder: ClusterBuilder) -> (Cluster, Vec<String>, Vec<String>) {
    let cluster = (builder.password(PASSWORD).start()).unwrap_or_else(|e| panic!("{e}"));
    let mut urls: Vec<String> = cluster.nodes().iter().map(|n| n.client_url()).collect();
    urls[2] = format!(
        "redis://:{WRONG_PASSWORD}@127.0.0.1:{}",
        cluster.node(2).port()
    );
    let names: Vec<String> = (cluster.nodes().iter())
        .map(|n| format!("127.0.0.1:{}", n.port()))
        .collect();
    (cluster, urls, names)
}

/// No false alarm from the clock-rate check (docs/safety.md, "Checking the clock rates"):
/// on 3 healthy local nodes, whose clocks are the host's, 7.5 s of locking (a sample per
/// node per second, so at least one 5 s window closes on each) raise neither a clock-rate
/// nor a clock-step warning.
pub fn healthy_clocks<S: Subject>() {
    let _one = serial();
    let capture = Capture::global();
    let cluster = Cluster::builder().start().unwrap_or_else(|e| panic!("{e}"));
    let names: Vec<String> = (cluster.nodes().iter())
        .map(|n| format!("127.0.0.1:{}", n.port()))
        .collect();
    let d = S::start(&cluster.urls()).expect("build");
    let start = Instant::now();
    let mut cycles = 0;
    // Bounded by time and by count.
    while start.elapsed() < Duration::from_millis(7_500) && cycles < 100_000 {
        let guard = d.lock("observe:clocks").expect("lock");
        S::release(guard).expect("release");
        cycles += 1;
        thread::sleep(Duration::from_millis(5));
    }
    assert!(cycles > 0);
    let seen = capture.seen();
    for message in [
        "node clock rate outside the drift allowance",
        "node clock stepped",
    ] {
        let ours: Vec<&EventSeen> = (seen.events(message).into_iter())
            .filter(|e| names.iter().any(|n| field(e, "node") == n))
            .collect();
        assert!(ours.is_empty(), "after {cycles} cycles: {ours:?}");
    }
}

/// The restart quarantine traced (docs/safety.md, "Restart quarantine"): with the quarantine on, node 0 is
/// killed with `kill -9` and started again empty on its port; the reconnection finds a new
/// `run_id`, and a `WARN` event names the node, the cause and how long its votes do not
/// count.
pub fn traced_quarantine<S: Subject>() {
    let _one = serial();
    let capture = Capture::global();
    let cluster = Cluster::start(3).unwrap_or_else(|e| panic!("{e}"));
    let node0 = format!("127.0.0.1:{}", cluster.node(0).port());
    let d = S::start_with(&cluster.urls(), |c| {
        (c.restart_quarantine(Some(RestartQuarantine::default()))
            .ttl(Duration::from_secs(2)))
        .reconnect_backoff(Duration::from_millis(10), Duration::from_millis(50))
    })
    .expect("build");
    // Every node answers an inspection, so each connection's handshake is over.
    d.inspect("observe:quarantine").expect("an inspection");
    cluster
        .node(0)
        .restart_empty()
        .expect("restart node 0 empty");
    let event = wait_for(|| {
        let seen = capture.seen();
        let quarantined = seen.events("node quarantined: its votes for acquisitions do not count");
        (quarantined.iter())
            .find(|e| field(e, "node") == node0 && field(e, "cause").contains("restarted"))
            .map(|e| (*e).clone())
    });
    assert_eq!(event.level, tracing::Level::WARN, "{event:?}");
    let for_ms: f64 = field(&event, "for_ms").parse().expect("for_ms is a number");
    assert!(for_ms > 0.0 && for_ms <= 2_022.0, "{for_ms}");
}

/// The spans of `observe:traced` and `observe:lost`.
fn assert_lock_spans(seen: &Seen, names: &[String]) {
    let acquire = one(seen.spans_with("redlock.acquire", "resource", "observe:traced"));
    let lock = seen
        .spans
        .get(&acquire.parent.expect("a parent"))
        .expect("the lock span");
    assert_eq!(lock.name, "redlock.lock");
    assert!(lock.fields["op"].parse::<u64>().is_ok(), "{lock:?}");
    let f = &acquire.fields;
    assert_eq!(
        (f["attempts"].as_str(), f["outcome"].as_str()),
        ("1", "acquired"),
        "{f:?}"
    );
    assert!(
        f["validity_ms"].parse::<f64>().is_ok_and(|v| v > 0.0),
        "{f:?}"
    );
    assert!(f["elapsed_ms"].parse::<f64>().is_ok(), "{f:?}");
    let votes = &f["votes"];
    for name in &names[..2] {
        assert!(votes.contains(&format!("{name}: locked (rtt ")), "{votes}");
    }
    // Node 2 refused its session; its vote is that fault, without a round trip (or, had it
    // been reconnecting while the quorum was reached, no answer yet).
    let node2 = &names[2];
    let refused = "AUTH was refused: WRONGPASS invalid username-password pair or user is disabled.";
    assert!(
        votes.ends_with(&format!("{node2}: {refused}"))
            || votes.ends_with(&format!("{node2}: no answer yet")),
        "{votes}"
    );
    let extend = one(seen.spans_with("redlock.extend", "resource", "observe:traced"));
    assert_eq!(extend.fields["outcome"], "extended", "{extend:?}");
    assert!(
        extend.fields["validity_ms"].parse::<f64>().is_ok(),
        "{extend:?}"
    );
    let release = one(seen.spans_with("redlock.release", "resource", "observe:traced"));
    assert_eq!(
        release.fields["outcome"], "released on 2 of 3",
        "{release:?}"
    );
    assert!(
        release.fields["votes"].contains(&format!("{}: released (rtt ", names[0])),
        "{release:?}"
    );
    let extend = one(seen.spans_with("redlock.extend", "resource", "observe:lost"));
    assert_eq!(extend.fields["outcome"], "lost", "{extend:?}");
}

/// Connections, the refused handshake, the loss and the disconnect.
fn assert_events(seen: &Seen, names: &[String]) {
    for name in &names[..2] {
        let up = seen.events("node connected");
        assert!(
            up.iter()
                .any(|e| field(e, "node") == name && e.level == tracing::Level::INFO),
            "{up:?}"
        );
    }
    let refused = seen.events("node refused the handshake");
    let refused = (refused.iter())
        .find(|e| field(e, "node") == names[2])
        .unwrap_or_else(|| panic!("no refused handshake of node 2:\n{}", seen.dump()));
    assert_eq!(field(refused, "command"), "AUTH");
    assert!(
        field(refused, "reply").starts_with("WRONGPASS"),
        "{refused:?}"
    );
    let lost = seen.events("lock lost");
    let lost = (lost.iter())
        .find(|e| {
            e.parent
                .and_then(|p| seen.spans.get(&p))
                .is_some_and(|s| seen.inherited(s, "resource") == Some("observe:lost"))
        })
        .expect("a loss in the span of observe:lost");
    assert_eq!(lost.level, tracing::Level::WARN);
    assert!(
        field(lost, "reason").contains("our token is gone from"),
        "{lost:?}"
    );
}

/// A lock's counters, histograms and gauges moving: acquired, failed (contended), extended,
/// lost (not owned), released; acquire latency, hand-off wait (a second call of the same
/// client waiting in line), each node's round trips; held locks back to where they were.
/// `redlock_nodes_up` has a scenario of its own ([`nodes_up_per_node_and_handle`]).
pub fn counted_lock<S: Subject>() {
    let _one = serial();
    let m = Recorded::global();
    let cluster = Cluster::start(3).unwrap_or_else(|e| panic!("{e}"));
    let urls = cluster.urls();
    let before = Snapshot::take(m, &cluster);
    let (d, other) = (
        S::start(&urls).expect("build"),
        S::start(&urls).expect("build"),
    );
    let g = d.lock("observe:counted").expect("lock");
    assert_eq!(m.gauge("redlock_held_locks") - before.held, 1.0);
    S::extend(&g).expect("extend");
    assert!(
        other.try_lock("observe:counted").is_err(),
        "another client's try"
    );
    // A second call of the same client waits in line until the first lets go.
    let waiting = thread::spawn({
        let d = d.clone();
        move || d.lock("observe:counted").map(S::release)
    });
    thread::sleep(HANDOFF);
    S::release(g).expect("release");
    waiting
        .join()
        .expect("the waiting call")
        .expect("its lock")
        .expect("its release");
    let lost = d.lock("observe:counted-lost").expect("lock");
    for node in cluster.nodes() {
        node.command(&["DEL", "observe:counted-lost"]).expect("DEL");
    }
    assert!(matches!(S::extend(&lost), Err(LockError::Lost(_))));
    drop(lost);
    // The loss's own release.
    wait_for(|| (m.counter("redlock_released_total") == before.released + 3).then_some(()));
    let delta = |key: &str| m.counter(key) - before.counters.get(key).copied().unwrap_or(0);
    assert_eq!(delta("redlock_acquired_total"), 3);
    assert_eq!(delta("redlock_acquire_failed_total{reason=contended}"), 1);
    assert_eq!(delta("redlock_extended_total"), 1);
    assert_eq!(delta("redlock_lost_total{reason=not_owned}"), 1);
    assert_eq!(m.gauge("redlock_held_locks"), before.held);
    let acquire = m.samples("redlock_acquire_seconds");
    assert_eq!(acquire.len() - before.acquire, 3);
    let handoff = m.samples("redlock_handoff_wait_seconds");
    assert_eq!(handoff.len() - before.handoff, 1, "{handoff:?}");
    assert!(
        handoff
            .last()
            .is_some_and(|w| *w >= HANDOFF.as_secs_f64() / 2.0),
        "{handoff:?}"
    );
    for (key, n) in &before.round_trips {
        assert!(
            m.samples(key).len() > *n,
            "no round trip in {key}: {:?}",
            m.keys()
        );
    }
    drop((d, other));
}

/// `redlock_nodes_up` is one series per node and handle, labelled by the node's address
/// (never its password): two handles on three nodes are six series at 1 (not one gauge at
/// 6); a node killed drops to 0 in both handles while the others stay at 1; and when the
/// handles are gone their series are 0.
pub fn nodes_up_per_node_and_handle<S: Subject>() {
    let _one = serial();
    let m = Recorded::global();
    let cluster = Cluster::builder()
        .nodes(3)
        .password("hunter2")
        .start()
        .unwrap_or_else(|e| panic!("{e}"));
    let urls = cluster.urls();
    let ports: Vec<u16> = cluster.nodes().iter().map(|n| n.port()).collect();
    let handles_before = nodes_up_series(m, &ports)
        .into_iter()
        .map(|(handle, _, _)| handle)
        .collect::<std::collections::BTreeSet<_>>();
    let (d, other) = (
        S::start(&urls).expect("build"),
        S::start(&urls).expect("build"),
    );
    // The series of the two new handles, as (handle, port) -> value.
    let ours = || {
        (nodes_up_series(m, &ports).into_iter())
            .filter(|(handle, _, _)| !handles_before.contains(handle))
            .map(|(handle, port, value)| ((handle, port), value))
            .collect::<std::collections::BTreeMap<_, _>>()
    };
    let all_up = wait_for(|| {
        let series = ours();
        (series.len() == 6 && series.values().all(|v| *v == 1.0)).then_some(series)
    });
    let handles: std::collections::BTreeSet<&String> = all_up.keys().map(|(h, _)| h).collect();
    assert_eq!(handles.len(), 2, "{all_up:?}");
    assert!(
        !m.keys().iter().any(|k| k.contains("hunter2")),
        "a password in a label"
    );
    cluster.node(0).kill().expect("kill node 0");
    // A lock call notices the dead node if the idle connection has not yet.
    let _ = d.try_lock("observe:nodes-up").map(S::release);
    let _ = other.try_lock("observe:nodes-up").map(S::release);
    wait_for(|| {
        let series = ours();
        let down = |(_, port): &(String, u16)| *port == ports[0];
        let ok = series.len() == 6
            && (series.iter()).all(|(key, v)| *v == if down(key) { 0.0 } else { 1.0 });
        ok.then_some(())
    });
    drop((d, other));
    // The loops end with their handles and their series drop to 0.
    wait_for(|| ours().values().all(|v| *v == 0.0).then_some(()));
}

/// Every `redlock_nodes_up` series of a node on `ports` (loopback): its handle label, the
/// node's port and the gauge's value.
fn nodes_up_series(m: &Recorded, ports: &[u16]) -> Vec<(String, u16, f64)> {
    (m.keys().into_iter())
        .filter_map(|key| {
            let labels = key.strip_prefix("redlock_nodes_up{handle=")?;
            let (handle, node) = labels.strip_suffix('}')?.split_once(",node=127.0.0.1:")?;
            let port: u16 = node.parse().ok()?;
            ports
                .contains(&port)
                .then(|| (handle.to_owned(), port, m.gauge(&key)))
        })
        .collect()
}

/// What the recorder held before a scenario.
struct Snapshot {
    counters: std::collections::BTreeMap<String, u64>,
    released: u64,
    held: f64,
    acquire: usize,
    handoff: usize,
    round_trips: Vec<(String, usize)>,
}

impl Snapshot {
    fn take(m: &Recorded, cluster: &Cluster) -> Self {
        let counters = (COUNTERS.iter())
            .map(|k| (k.to_string(), m.counter(k)))
            .collect();
        let round_trips = (cluster.nodes().iter())
            .map(|n| {
                format!(
                    "redlock_node_round_trip_seconds{{node=127.0.0.1:{}}}",
                    n.port()
                )
            })
            .map(|k| (k.clone(), m.samples(&k).len()))
            .collect();
        Self {
            counters,
            released: m.counter("redlock_released_total"),
            held: m.gauge("redlock_held_locks"),
            acquire: m.samples("redlock_acquire_seconds").len(),
            handoff: m.samples("redlock_handoff_wait_seconds").len(),
            round_trips,
        }
    }
}

/// Polls `f` every 10 ms until it returns something, for at most 10 s.
fn wait_for<T>(mut f: impl FnMut() -> Option<T>) -> T {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(found) = f() {
            return found;
        }
        assert!(Instant::now() < until, "not seen within 10 s");
        thread::sleep(Duration::from_millis(10));
    }
}

fn one<T: std::fmt::Debug>(mut found: Vec<T>) -> T {
    assert_eq!(found.len(), 1, "{found:?}");
    found.remove(0)
}

fn field<'a>(event: &'a EventSeen, name: &str) -> &'a str {
    event.fields.get(name).map_or("", String::as_str)
}

const PASSWORD: &str = "observe-pw-5f1c0d";
const WRONG_PASSWORD: &str = "wrong-pw-93ab7e";
/// How long the second call waits in line before the first releases.
const HANDOFF: Duration = Duration::from_millis(100);
const COUNTERS: [&str; 4] = [
    "redlock_acquired_total",
    "redlock_acquire_failed_total{reason=contended}",
    "redlock_extended_total",
    "redlock_lost_total{reason=not_owned}",
];
