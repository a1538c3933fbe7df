//! The adapter against real redis-server nodes (redlock-testkit): exact per-node outcomes,
//! contention, a paused node, a killed node, extension and loss.
//!
//! redis-rs's own response timeout is turned off on these connections, so only the lock's
//! deadlines (fed from `poll_timeout`) can end a wait on a paused node.

use std::time::{Duration, Instant};

use redis::AsyncConnectionConfig;
use redis::aio::MultiplexedConnection;
use redlock_core::{
    AcquireFailure, AcquireOutcome, Config, LockOptions, LostReason, NodeFault, NodeId, NodeName,
    ReleaseOutcome, RetryPolicy, Token,
};
use redlock_redis_rs::{LockError, RedisLock};
use redlock_testkit::{Cluster, Reply};

const MS: Duration = Duration::from_millis(1);
const TTL: Duration = Duration::from_secs(10);
/// Slack for a loaded 2-core machine on top of any timing bound.
const SLACK: Duration = Duration::from_secs(1);

/// One attempt; attempt and release timeouts long enough to tell apart from 0; a ttl long
/// enough that no key a test checks for can expire on its own while the test runs.
fn config(n: usize) -> Config {
    Config::builder(n)
        .ttl(TTL)
        .attempt_timeout(300 * MS)
        .release_timeout(400 * MS)
        .retry(RetryPolicy::once())
        .build()
        .expect("valid config")
}

async fn connect(cluster: &Cluster) -> Vec<MultiplexedConnection> {
    let no_timeout = AsyncConnectionConfig::new().set_response_timeout(None);
    let mut nodes = Vec::new();
    for url in cluster.urls() {
        let client = redis::Client::open(url).expect("testkit url");
        let conn = client
            .get_multiplexed_async_connection_with_config(&no_timeout)
            .await
            .expect("connect to a running node");
        nodes.push(conn);
    }
    nodes
}

/// [`connect`], then the scripts loaded on every node (as an application does once per
/// connection), so no release or extension needs the `EVAL` resend.
async fn connect_loaded(cluster: &Cluster) -> Vec<MultiplexedConnection> {
    let mut conns = connect(cluster).await;
    for conn in &mut conns {
        redlock_redis_rs::load_scripts(conn)
            .await
            .expect("SCRIPT LOAD");
    }
    conns
}

fn opts() -> LockOptions {
    LockOptions::default()
}

/// The key's value on node `i`, read by the testkit's own blocking client.
fn value_on(c: &Cluster, i: usize, key: &str) -> Reply {
    c.node(i).command(&["GET", key]).expect("GET")
}

fn stored(token: &Token) -> Reply {
    Reply::Bulk(token.as_bytes().to_vec())
}

/// Runs a scenario under a hard limit, so an adapter that stops feeding the lock's timers
/// fails the test instead of hanging it.
async fn within(scenario: impl Future<Output = ()>) {
    let limit = Duration::from_secs(20);
    tokio::time::timeout(limit, scenario)
        .await
        .expect("scenario finished within 20 s");
}

/// Polls `f` every 20 ms until it holds or `limit` passes.
async fn eventually(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    loop {
        if f() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        tokio::time::sleep(20 * MS).await;
    }
}

/// Nodes by their default names (`node#i`): these configurations name no node.
/// Asserts that each node answered the release as `expected` says, or had not answered yet
/// when it returned ([`ReleaseOutcome::Pending`]: a release returns once a quorum has
/// answered and finishes the rest in the background), and that a quorum answered.
#[track_caller]
fn assert_report(report: &[ReleaseOutcome], expected: &[ReleaseOutcome]) {
    let pending = (report.iter()).filter(|o| **o == ReleaseOutcome::Pending);
    let ok = report.len() == expected.len()
        && pending.count() < expected.len().div_ceil(2)
        && (report.iter().zip(expected)).all(|(o, e)| o == e || *o == ReleaseOutcome::Pending);
    assert!(ok, "expected {expected:?} (some pending): {report:?}");
}

fn nodes(ids: &[usize]) -> Vec<NodeName> {
    ids.iter()
        .map(|&i| NodeName::unnamed(NodeId::new(i)))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_and_release_report_each_node() {
    within(async {
        let c = Cluster::start(3).expect("3 nodes");
        // No script cached: the release's EVALSHA gets -NOSCRIPT, which must reach the lock as an
        // error reply (not a fault) for it to resend the script as EVAL.
        for i in 0..3 {
            c.node(i)
                .command(&["SCRIPT", "FLUSH"])
                .expect("SCRIPT FLUSH");
        }
        // A quorum of all 3, so the decision waits for every node and each outcome is known.
        let all_three = Config::builder(3)
            .quorum(3)
            .retry(RetryPolicy::once())
            .build()
            .expect("valid config");
        let (lock, acquired) = RedisLock::acquire(connect(&c).await, &all_three, "a", &opts())
            .await
            .expect("acquired");
        let outcomes: Vec<_> = acquired.stats.nodes.iter().map(|n| &n.outcome).collect();
        assert_eq!(outcomes, vec![&AcquireOutcome::Locked; 3]);
        assert_eq!(acquired.stats.attempts, 1);
        assert_eq!(lock.lock().held().map(|(t, _)| t), Some(&acquired.token));
        for i in 0..3 {
            assert_eq!(value_on(&c, i, "a"), stored(&acquired.token), "node {i}");
        }
        let released = lock.release().await.expect("released");
        assert_report(&released, &vec![ReleaseOutcome::Released; 3]);
        let sha = redlock_core::RELEASE_SCRIPT.sha1;
        for i in 0..3 {
            // A node still pending when the release returned is released in the background.
            let gone = || value_on(&c, i, "a") == Reply::Nil;
            assert!(eventually(SLACK, gone).await, "node {i}");
            let cached = || {
                let exists = c.node(i).command(&["SCRIPT", "EXISTS", sha]);
                exists.expect("EXISTS") == Reply::Array(vec![Reply::Int(1)])
            };
            assert!(eventually(SLACK, cached).await, "EVAL ran on node {i}");
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn second_lock_is_contended_until_the_first_is_released() {
    within(async {
        let c = Cluster::start(3).expect("3 nodes");
        let (first, acquired) = RedisLock::acquire(connect(&c).await, &config(3), "c", &opts())
            .await
            .expect("first acquired");
        let second = RedisLock::acquire(connect(&c).await, &config(3), "c", &opts()).await;
        let err = second.expect_err("held by the first");
        // The second "no" of 3 decides (more than N - q = 1): whichever two answered first.
        let LockError::Acquire {
            reason: AcquireFailure::Contended { nodes: held },
            stats,
        } = &err
        else {
            panic!("{err:?}")
        };
        assert_eq!(stats.attempts, 1, "{err}");
        assert_eq!(held.len(), 2, "{err}");
        assert!(
            held[0] != held[1] && held.iter().all(|n| n.id().index() < 3),
            "{err}"
        );
        for i in 0..3 {
            assert_eq!(value_on(&c, i, "c"), stored(&acquired.token), "node {i}");
        }
        let released = first.release().await.expect("released");
        assert_report(&released, &vec![ReleaseOutcome::Released; 3]);
        let (again, _) = RedisLock::acquire(connect(&c).await, &config(3), "c", &opts())
            .await
            .expect("free again");
        again.release().await.expect("released");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_attempt_releases_what_it_set() {
    within(async {
        let c = Cluster::start(3).expect("3 nodes");
        for i in 0..2 {
            let set = c.node(i).command(&["SET", "f", "other", "PX", "10000"]);
            assert_eq!(set.expect("SET"), Reply::Simple("OK".into()));
        }
        let err = RedisLock::acquire(connect(&c).await, &config(3), "f", &opts())
            .await
            .expect_err("held on 2 of 3");
        let contended = AcquireFailure::Contended {
            nodes: nodes(&[0, 1]),
        };
        assert!(
            matches!(&err, LockError::Acquire { reason, .. } if *reason == contended),
            "{err}"
        );
        // Node 2 said yes; the failed attempt's release (EVALSHA, then EVAL) deletes it.
        assert!(eventually(SLACK, || value_on(&c, 2, "f") == Reply::Nil).await);
        for i in 0..2 {
            assert_eq!(
                value_on(&c, i, "f"),
                Reply::Bulk(b"other".to_vec()),
                "node {i}"
            );
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_node_delays_nothing_beyond_the_lock_deadlines() {
    within(async {
        let c = Cluster::start(3).expect("3 nodes");
        let config = config(3);
        // Cached scripts: the releases queued on the paused node need no EVAL resend,
        // which the lock no longer makes once their round's deadline has passed.
        let conns = connect_loaded(&c).await;
        c.node(2).pause().expect("SIGSTOP");

        // Two yes votes decide: the paused node is not waited for at all.
        let start = Instant::now();
        let (lock, acquired) = RedisLock::acquire(conns.clone(), &config, "p", &opts())
            .await
            .expect("2 of 3 up");
        assert!(start.elapsed() <= config.attempt_timeout() + SLACK);
        let pending = AcquireOutcome::Pending;
        let outcomes = &acquired.stats.nodes;
        assert_eq!(outcomes[2].outcome, pending, "{outcomes:?}");
        // The release returns once the two others have released: the paused node is
        // reported pending, released in the background until the release deadline.
        let released = lock.release().await.expect("released");
        let expected = vec![
            ReleaseOutcome::Released,
            ReleaseOutcome::Released,
            ReleaseOutcome::Pending,
        ];
        assert_eq!(released, expected);

        // One no and one silent node: only the attempt deadline can decide, and it does.
        c.node(0)
            .command(&["SET", "q", "other", "PX", "10000"])
            .expect("SET");
        let start = Instant::now();
        let err = RedisLock::acquire(conns.clone(), &config, "q", &opts())
            .await
            .expect_err("no quorum");
        let took = start.elapsed();
        assert!(took >= config.attempt_timeout(), "{took:?}");
        assert!(took <= config.attempt_timeout() + SLACK, "{took:?}");
        let contended = AcquireFailure::Contended { nodes: nodes(&[0]) };
        assert!(
            matches!(&err, LockError::Acquire { reason, .. } if *reason == contended),
            "{err}"
        );

        // Resumed, the node runs the late SETs and then their releases, in order.
        c.node(2).resume().expect("SIGCONT");
        let gone = || value_on(&c, 2, "p") == Reply::Nil && value_on(&c, 2, "q") == Reply::Nil;
        assert!(eventually(SLACK, gone).await);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_nodes_fail_at_once() {
    within(async {
        let c = Cluster::start(3).expect("3 nodes");
        let config = config(3);
        let conns = connect(&c).await;
        c.node(1).kill().expect("SIGKILL");

        let (lock, acquired) = RedisLock::acquire(conns.clone(), &config, "k", &opts())
            .await
            .expect("quorum of 2 without node 1");
        assert_eq!(acquired.stats.nodes[0].outcome, AcquireOutcome::Locked);
        assert_eq!(acquired.stats.nodes[2].outcome, AcquireOutcome::Locked);
        // A dead node fails its request at once, before the release deadline: node 1 is
        // reported disconnected (not timed out), or pending if the two others answered first.
        let start = Instant::now();
        let released = lock.release().await.expect("released");
        assert!(start.elapsed() < config.release_timeout());
        assert_eq!(released[0], ReleaseOutcome::Released);
        assert!(
            matches!(
                &released[1],
                ReleaseOutcome::Failed(NodeFault::Connection(_)) | ReleaseOutcome::Pending
            ),
            "{released:?}"
        );
        assert_eq!(released[2], ReleaseOutcome::Released);

        c.node(2).kill().expect("SIGKILL");
        let start = Instant::now();
        let err = RedisLock::acquire(conns, &config, "k2", &opts())
            .await
            .expect_err("1 of 3 up");
        assert!(start.elapsed() < config.attempt_timeout());
        // Nodes 1 and 2 fail as connections (closed or reset), named as the config names them.
        let LockError::Acquire {
            reason: AcquireFailure::QuorumUnreachable { errors },
            ..
        } = &err
        else {
            panic!("{err:?}")
        };
        let failed: Vec<NodeId> = errors.iter().map(|(n, _)| n.id()).collect();
        assert_eq!(failed, [NodeId::new(1), NodeId::new(2)], "{err}");
        assert!(
            (errors.iter()).all(|(_, f)| matches!(f, NodeFault::Connection(_))),
            "{err}"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extension_moves_the_deadline_and_replaced_keys_lose_the_lock() {
    within(async {
        let c = Cluster::start(3).expect("3 nodes");
        let config = config(3);
        let conns = connect_loaded(&c).await;
        let (mut lock, acquired) = RedisLock::acquire(conns, &config, "e", &opts())
            .await
            .expect("acquired");
        tokio::time::sleep(500 * MS).await;
        let deadline = lock.extend().await.expect("extended");
        assert!(deadline >= acquired.deadline + 500 * MS);
        assert_eq!(lock.lock().held().map(|(_, d)| d), Some(deadline));
        // The extension is decided by 2 of 3; the third node's may land just after. Without
        // it every PTTL would be at most 10 000 - 500 ms.
        let pttl = |i: usize| match c.node(i).command(&["PTTL", "e"]) {
            Ok(Reply::Int(ms)) => ms,
            other => panic!("PTTL on node {i}: {other:?}"),
        };
        let extended = || (0..3).all(|i| (9500..=10_000).contains(&pttl(i)));
        assert!(eventually(SLACK, extended).await);

        // Someone else's value on 2 of 3 nodes: more than N - q are no longer ours.
        for i in 0..2 {
            c.node(i).command(&["SET", "e", "other"]).expect("SET");
        }
        let err = lock.extend().await.expect_err("lost");
        let not_owned = LostReason::NotOwned {
            nodes: nodes(&[0, 1]),
        };
        assert_eq!(err, LockError::Lost(not_owned), "{err}");
        let released = lock.release().await.expect("the loss's release");
        let expected = vec![
            ReleaseOutcome::NotHeld,
            ReleaseOutcome::NotHeld,
            ReleaseOutcome::Released,
        ];
        assert_report(&released, &expected);
        for i in 0..2 {
            assert_eq!(
                value_on(&c, i, "e"),
                Reply::Bulk(b"other".to_vec()),
                "node {i}"
            );
        }
        // Decided at a quorum (nodes 0 and 1): node 2's release may still be on its way.
        assert!(eventually(SLACK, || value_on(&c, 2, "e") == Reply::Nil).await);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_errors_are_returned_before_any_command() {
    within(async {
        let c = Cluster::start(1).expect("1 node");
        let err = RedisLock::acquire(connect(&c).await, &config(3), "u", &opts())
            .await
            .expect_err("3 nodes configured, 1 connection");
        assert_eq!(
            err,
            LockError::NodeCount {
                config: 3,
                connections: 1
            }
        );
        let err = RedisLock::acquire(connect(&c).await, &config(1), "", &opts())
            .await
            .expect_err("empty resource");
        assert_eq!(
            err,
            LockError::Usage(redlock_core::UsageError::EmptyResource),
            "{err}"
        );
        assert_eq!(
            c.node(0).command(&["DBSIZE"]).expect("DBSIZE"),
            Reply::Int(0)
        );
    })
    .await;
}
