//! ACL users without scripting (docs/design.md, "Native commands"). Where the server has commands of its own
//! for releases and extensions (Valkey 9: `DELIFEQ`, `SET … IFEQ`), a user who may not run
//! scripts can still lock, extend and release; where it has not (Redis 7), or with
//! `native_commands(false)`, the release and the extension fail with the node's `NOPERM`
//! naming `evalsha`. The nodes are started from both binaries whatever the default server.

use std::time::Duration;

use redlock_testkit::{Cluster, Conn, ServerKind};

use crate::scenarios::eventually;
use crate::servers;
use crate::{Driver, Guard, LockError, ReleaseOutcome, RetryPolicy, assert_report};

/// The commands taken from the clients' user: every way to run a script.
const NO_SCRIPTS: [&str; 3] = ["eval", "evalsha", "script"];

/// An ACL user `locker` without scripting (`-eval -evalsha -script`): on Valkey 9 lock,
/// extend and release all work, and the nodes ran no script; with `native_commands(false)`
/// on the same nodes, the release and the extension fail with `NOPERM` naming `evalsha`.
/// On Redis 7 the same user gets that `NOPERM` with the default configuration.
pub fn scripting_denied_by_acl<D: Driver>() {
    let valkey = no_scripts(ServerKind::Valkey);
    let noperm = evalsha_noperm(&valkey);
    assert!(noperm.contains("locker"), "{noperm}");
    let d = D::build(&client_urls(&valkey), |b| {
        b.ttl(Duration::from_secs(5)).retry(RetryPolicy::once())
    })
    .unwrap();
    let g = d.lock("acl").expect("SET is allowed");
    g.extend().expect("SET IFEQ needs no scripting permission");
    assert_report(&g.release(), &ReleaseOutcome::Released, 3);
    for node in valkey.nodes() {
        assert_eq!(servers::release_command(node.server()), "DELIFEQ");
        assert!(servers::calls(node, "delifeq") > 0, "{}", node.server());
        let gone = || node.command(&["EXISTS", "acl"]).unwrap().as_int() == Some(0);
        assert!(
            eventually(Duration::from_secs(1), gone),
            "{}",
            node.server()
        );
    }
    // The control: scripts forced on the same nodes are refused.
    let scripts = D::build(&client_urls(&valkey), |b| {
        b.ttl(Duration::from_secs(1))
            .retry(RetryPolicy::once())
            .native_commands(false)
    })
    .unwrap();
    assert_scripts_refused(&scripts, &noperm);

    let redis = no_scripts(ServerKind::Redis);
    let noperm = evalsha_noperm(&redis);
    let d = D::build(&client_urls(&redis), |b| {
        b.ttl(Duration::from_secs(1)).retry(RetryPolicy::once())
    })
    .unwrap();
    assert_scripts_refused(&d, &noperm);
}

/// Three nodes of `kind` whose clients log in as `locker`, who may not run scripts; a
/// Valkey of 9 or later, whose `DELIFEQ` and `SET … IFEQ` the scenario expects.
fn no_scripts(kind: ServerKind) -> Cluster {
    Cluster::builder()
        .kinds([kind; 3])
        .min_version(ServerKind::Valkey, 9)
        .user("locker", "pw")
        .deny(NO_SCRIPTS)
        .start()
        .unwrap_or_else(|e| panic!("{e}"))
}

fn client_urls(c: &Cluster) -> Vec<String> {
    c.nodes().iter().map(|n| n.client_url()).collect()
}

/// What node 0 answers `locker` for an `EVALSHA`: its `NOPERM`, as the driver must repeat it.
fn evalsha_noperm(c: &Cluster) -> String {
    let node = c.node(0);
    let mut conn = Conn::open(node.addr(), Duration::from_secs(1)).expect("connect");
    let auth = conn.command(&["AUTH", "locker", "pw"]).expect("AUTH");
    assert!(!matches!(auth, redlock_testkit::Reply::Error(_)), "{auth}");
    let sha = redlock_core::RELEASE_SCRIPT.sha1;
    match conn
        .command(&["EVALSHA", sha, "1", "k", "v"])
        .expect("a reply")
    {
        redlock_testkit::Reply::Error(text) => {
            assert!(
                text.starts_with("NOPERM") && text.ends_with("'evalsha' command"),
                "{text}"
            );
            text
        }
        other => panic!("EVALSHA was not refused: {other}"),
    }
}

/// The lock is taken (`SET` is allowed) but its release reports every node refusing
/// `EVALSHA` with `noperm`, and an extension is lost on it.
fn assert_scripts_refused<D: Driver>(d: &D, noperm: &str) {
    let g = d.lock("acl:release").expect("SET is allowed");
    let report = g.release().expect("a report");
    assert_eq!(report.len(), 3, "{report:?}");
    for outcome in report {
        let ReleaseOutcome::Failed(fault) = &outcome else {
            panic!("released without scripting: {outcome:?}");
        };
        assert_eq!(fault.to_string(), format!("EVALSHA was refused: {noperm}"));
    }
    let g = d.lock("acl:extend").expect("SET is allowed");
    let err = g.extend().expect_err("EVALSHA denied");
    assert!(matches!(err, LockError::Lost(_)), "{err}");
    let text = err.to_string();
    assert!(
        text.contains(&format!("EVALSHA was refused: {noperm}")) && !text.contains("SET was"),
        "{text}"
    );
}
