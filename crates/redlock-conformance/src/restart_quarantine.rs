//! The restart quarantine (docs/safety.md, "Restart quarantine") on real servers: a node killed with `kill -9`
//! and started again empty on the same port comes back with a new `run_id`; its votes for
//! acquisitions count as "no" (the failure names it, with the deadline) until the window has
//! passed since it started, and count again after. A node with AOF and `appendfsync always`
//! is not quarantined: it lost nothing.

use std::time::{Duration, Instant};

use redlock_core::{KeyState, NodeFault, QuarantineCause, RestartQuarantine};
use redlock_testkit::Cluster;

use crate::scenarios::eventually;
use crate::{AcquireFailure, ConfigBuilder, Driver, Guard, LockError, RetryPolicy};

/// The ttl, and so the window: 2 s plus the drift allowance (22 ms).
const TTL: Duration = Duration::from_secs(2);
/// Longer than any wait here can take on a loaded machine, far shorter than a hang.
const BOUND: Duration = Duration::from_secs(15);

fn quarantine_on(b: ConfigBuilder) -> ConfigBuilder {
    b.restart_quarantine(Some(RestartQuarantine::default()))
        .ttl(TTL)
        // Back within tens of milliseconds of the restart, well inside the window.
        .reconnect_backoff(Duration::from_millis(10), Duration::from_millis(50))
        .retry(RetryPolicy::once())
}

/// Waits until every node has answered on its connection (an inspection that none failed),
/// so that each node's `INFO` has been read and its run id is remembered: a restart is told
/// by a run id that changed, and a node first seen after its restart is trusted (young
/// nodes are quarantined only with `RestartQuarantine::young_nodes`). Then locks and releases
/// `resource` once.
fn wait_until_all_seen<D: Driver>(d: &D, resource: &str) {
    let mut last = None;
    let seen = eventually(BOUND, || match d.inspect(resource) {
        Ok(i) if !i.nodes.iter().any(|n| matches!(n, KeyState::Failed(_))) => true,
        other => {
            last = Some(other);
            false
        }
    });
    assert!(seen, "not every node answered: {last:?}");
    let g = d.try_lock(resource).expect("a lock on three healthy nodes");
    g.release().expect("a release report");
}

/// The quarantine fault for node `i` in a failed acquisition, if that is how it failed.
fn quarantined(e: &LockError, i: usize) -> Option<(Instant, QuarantineCause)> {
    let LockError::Acquire {
        reason: AcquireFailure::QuorumUnreachable { errors },
        ..
    } = e
    else {
        return None;
    };
    errors.iter().find_map(|(node, fault)| match fault {
        NodeFault::Quarantined { until, cause } if node.id().index() == i => Some((*until, *cause)),
        _ => None,
    })
}

/// Tries `resource` until an attempt fails naming node 0 as quarantined after a restart
/// (none may be granted before: node 0's vote decides), then until one is granted, which must
/// be no earlier than the deadline the quarantine named; every failure meanwhile is the
/// quarantine's (or this client's own earlier key, whose release has not landed yet).
/// `restarted`: when node 0 restarted, for the messages.
fn quarantined_then_granted<D: Driver>(d: &D, resource: &str, restarted: Instant) {
    let mut seen = None;
    let mut last = None;
    let found = eventually(BOUND, || match d.try_lock(resource) {
        Err(e) => {
            seen = quarantined(&e, 0);
            last = Some(e);
            seen.is_some()
        }
        Ok(g) => panic!(
            "granted {:?} after node 0's restart, with its vote: {:?}",
            restarted.elapsed(),
            g.release()
        ),
    });
    assert!(found, "node 0 was never reported quarantined: {last:?}");
    let (until, cause) = seen.expect("found");
    assert_eq!(cause, QuarantineCause::Restarted);
    let mut granted_at = None;
    let granted = eventually(BOUND, || match d.try_lock(resource) {
        Ok(g) => {
            granted_at = Some(Instant::now());
            g.release().expect("a release report");
            true
        }
        Err(e) => {
            let attempt_end = Instant::now();
            let own = matches!(
                &e,
                LockError::Acquire {
                    reason: AcquireFailure::Contended { .. },
                    ..
                }
            );
            assert!(
                quarantined(&e, 0).is_some() || own || attempt_end >= until,
                "failed for another reason during the quarantine: {e}"
            );
            false
        }
    });
    assert!(granted, "node 0's vote never counted again");
    assert!(
        granted_at.expect("granted") >= until,
        "granted before {until:?}"
    );
}

/// 3 nodes; node 0 is killed and restarted empty on its port, node 1 is killed, so node 0's
/// vote decides: every acquisition fails naming node 0 as quarantined after a restart,
/// until the deadline it names; after it, the lock is granted.
pub fn a_node_restarted_empty_votes_no_until_its_window_passes<D: Driver>() {
    let c = Cluster::start(3).expect("start test nodes");
    let d = D::build(&c.urls(), quarantine_on).unwrap();
    wait_until_all_seen(&d, "quarantine");
    c.node(0).restart_empty().expect("restart node 0 empty");
    c.node(1).kill().expect("kill node 1");
    quarantined_then_granted(&d, "quarantine", Instant::now());
}

/// The same restart with AOF and `appendfsync always`: the node kept its keys, so it is not
/// quarantined, and its vote decides at once.
pub fn a_node_that_syncs_every_write_is_not_quarantined<D: Driver>() {
    let c = Cluster::builder()
        .aof(true)
        .start()
        .expect("start AOF nodes");
    let d = D::build(&c.urls(), quarantine_on).unwrap();
    wait_until_all_seen(&d, "durable");
    c.node(0).restart().expect("restart node 0 with its data");
    c.node(1).kill().expect("kill node 1");
    let mut last = None;
    let granted = eventually(BOUND, || match d.try_lock("durable") {
        Ok(g) => {
            g.release().expect("a release report");
            true
        }
        Err(e) => {
            assert!(quarantined(&e, 0).is_none(), "quarantined: {e}");
            last = Some(e);
            false
        }
    });
    assert!(granted, "never granted with node 0's vote: {last:?}");
}

/// A fresh client (each `redlock exec` is one) has never seen a node's previous process,
/// but the handshakes tell it: five nodes, node 0 killed with `kill -9` and started again
/// empty seconds after the others, nodes 1 and 2 killed so that node 0's vote decides. A
/// client built now is refused, naming node 0 as restarted, until the window has passed
/// since node 0 started; then granted. A cluster started together is granted at once, in
/// one attempt.
pub fn a_fresh_client_refuses_a_node_that_started_long_after_its_peers<D: Driver>() {
    // The quarantine's ttl (2 s, and its 22 ms of drift) is long next to how late a
    // loaded machine reads a reply, so the first attempt comes well inside the window; and
    // short next to the gap between the starts (5 s), which must exceed it and the second
    // uptimes are rounded to. Attempts may take 500 ms.
    let short = |b: ConfigBuilder| quarantine_on(b).attempt_timeout(Duration::from_millis(500));
    let c = Cluster::start(5).expect("start test nodes");
    let d = D::build(&c.urls(), short).unwrap();
    let g = d
        .try_lock("fresh")
        .expect("a cluster started together: granted at once");
    assert_eq!(g.stats().attempts, 1, "{}", g.stats());
    g.release().expect("a release report");
    drop(d);
    std::thread::sleep(Duration::from_secs(5));
    c.node(0).restart_empty().expect("restart node 0 empty");
    c.node(1).kill().expect("kill node 1");
    c.node(2).kill().expect("kill node 2");
    let restarted = Instant::now();
    let d = D::build(&c.urls(), short).unwrap();
    quarantined_then_granted(&d, "fresh", restarted);
}

/// One server named twice, by its port and by its unix socket with another database (no
/// address check can tell): its handshakes report one run id, so the client counts it once. Three names of two
/// servers: granted while both answer; with the other server killed, the two names of the
/// first are no quorum, and every attempt says why.
pub fn a_server_named_twice_votes_once<D: Driver>() {
    let c = (Cluster::builder().nodes(2).unix_socket_too().start()).expect("start test nodes");
    // Database 1 through the socket: its SET does not meet the one through the port, so
    // the server would grant twice.
    let urls = vec![
        c.node(0).url(),
        format!("{}?db=1", c.node(0).unix_url().expect("a unix socket")),
        c.node(1).url(),
    ];
    let d = D::build(&urls, quarantine_on).unwrap();
    let mut last = None;
    let granted = eventually(BOUND, || match d.try_lock("twice") {
        Ok(g) => {
            g.release().expect("a release report");
            true
        }
        Err(e) => {
            last = Some(e);
            false
        }
    });
    assert!(granted, "two servers never granted: {last:?}");
    c.node(1).kill().expect("kill node 1");
    let mut seen = false;
    let mut last = None;
    for _ in 0..5 {
        match d.try_lock("twice") {
            Ok(g) => panic!("granted by one server named twice: {:?}", g.release()),
            Err(e) => {
                last = Some(e.to_string());
                let LockError::Acquire {
                    reason: AcquireFailure::QuorumUnreachable { errors },
                    ..
                } = &e
                else {
                    continue;
                };
                seen |= errors.iter().any(|(node, fault)| {
                    node.id().index() == 1
                        && matches!(
                            fault,
                            NodeFault::Quarantined {
                                cause: QuarantineCause::SameServer,
                                ..
                            }
                        )
                });
            }
        }
    }
    assert!(
        seen,
        "the second name of node 0 was never said to be the same server: {last:?}"
    );
}
