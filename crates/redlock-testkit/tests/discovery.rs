//! Finding the server binary: the one-sentence error when there is none, the
//! `REDLOCK_SERVER_BIN` default (checked in a child run of this binary, so this process's
//! environment is never mutated), and the reported kind and version.

use std::process::Command;

use redlock_testkit::{Cluster, Error, ServerBin, ServerKind};

/// Set in the child run of [`env_var_is_the_default_binary`].
const CHILD_ENV: &str = "REDLOCK_TESTKIT_ENV_CHILD";

#[test]
fn missing_binary_is_one_clear_sentence() {
    let err = Cluster::builder()
        .nodes(1)
        .server_bin("/nonexistent")
        .start()
        .unwrap_err();
    assert!(matches!(err, Error::NoServer { .. }), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.starts_with("no redis-server found at /nonexistent"),
        "{msg}"
    );
    assert!(msg.contains("apt-get install -y redis-server"), "{msg}");
    assert!(msg.contains("REDLOCK_SERVER_BIN"), "{msg}");
    assert!(!msg.contains('\n'), "{msg}");
    assert_eq!(
        msg.matches(". ").count(),
        0,
        "more than one sentence: {msg}"
    );
}

#[test]
fn env_var_is_the_default_binary() {
    if std::env::var_os(CHILD_ENV).is_some() {
        let err = Cluster::start(1).unwrap_err();
        println!("\nERROR {err}");
        return;
    }
    let msg = child_error(
        "env_var_is_the_default_binary",
        &[(CHILD_ENV, "1"), ("REDLOCK_SERVER_BIN", "/nonexistent")],
    );
    assert!(
        msg.starts_with("no redis-server found at /nonexistent"),
        "{msg}"
    );
}

#[test]
fn a_binary_that_is_not_a_server_is_rejected() {
    let err = Cluster::builder()
        .nodes(1)
        .server_bin("/bin/true")
        .start()
        .unwrap_err();
    assert!(matches!(err, Error::UnknownServer { .. }), "{err:?}");
}

#[test]
fn kind_and_version_match_the_running_server() {
    let cluster = Cluster::start(1).unwrap();
    let server = cluster.server();
    assert!(server.major() >= 6, "{server}");
    let info = cluster.node(0).command(&["INFO", "server"]).unwrap();
    let info = info.as_str().unwrap();
    let field = match server.kind() {
        ServerKind::Redis => "redis_version:",
        ServerKind::Valkey => "valkey_version:",
        other => panic!("unexpected kind {other}"),
    };
    let reported = info
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .unwrap_or_else(|| panic!("no {field} in {info}"));
    assert_eq!(reported.trim(), server.version());
    println!("testing against {server}");
}

#[test]
fn zero_nodes_and_bad_options() {
    let empty = Cluster::builder().nodes(0).start().unwrap();
    assert!(empty.is_empty());
    let err = Cluster::builder()
        .nodes(1)
        .user("two words", "pw")
        .start()
        .unwrap_err();
    assert!(matches!(err, Error::Config(_)), "{err:?}");
    let err = Cluster::builder()
        .nodes(1)
        .command_timeout(std::time::Duration::ZERO)
        .start()
        .unwrap_err();
    assert!(matches!(err, Error::Config(_)), "{err:?}");
}

/// Set in the child run of [`a_missing_second_server_is_one_clear_sentence`].
const KIND_CHILD_ENV: &str = "REDLOCK_TESTKIT_KIND_CHILD";
/// Set in the child runs of [`a_test_that_needs_valkey_9_says_which_binary_and_how_to_name_it`].
const VERSION_CHILD_ENV: &str = "REDLOCK_TESTKIT_VERSION_CHILD";

/// A cluster of mixed servers runs each node on the binary of its kind, whichever is the
/// default (CI runs this with Redis and with Valkey as the default).
#[test]
fn mixed_cluster_runs_each_kind() {
    use ServerKind::{Redis, Valkey};
    let cluster = Cluster::builder()
        .kinds([Redis, Valkey, Redis])
        .start()
        .unwrap();
    assert_eq!(cluster.len(), 3);
    for (node, kind) in cluster.nodes().iter().zip([Redis, Valkey, Redis]) {
        assert_eq!(node.server().kind(), kind, "{}", node.server());
        let info = node.command(&["INFO", "server"]).unwrap();
        let field = match kind {
            Redis => "redis_version:",
            _ => "valkey_version:",
        };
        let info = info.as_str().unwrap();
        let reported = info.lines().find_map(|l| l.strip_prefix(field));
        assert_eq!(reported.map(str::trim), Some(node.server().version()));
    }
    assert_eq!(cluster.server(), cluster.node(0).server());
}

/// Without a valkey-server beside a Redis default, a mixed cluster fails with one sentence
/// naming `REDLOCK_VALKEY_BIN` (in a child run, so this process's environment is kept).
#[test]
fn a_missing_second_server_is_one_clear_sentence() {
    if std::env::var_os(KIND_CHILD_ENV).is_some() {
        let err = Cluster::builder()
            .kinds([ServerKind::Redis, ServerKind::Valkey])
            .start()
            .unwrap_err();
        println!("\nERROR {err}");
        return;
    }
    let msg = child_error(
        "a_missing_second_server_is_one_clear_sentence",
        &[
            (KIND_CHILD_ENV, "1"),
            ("REDLOCK_SERVER_BIN", "redis-server"),
            ("REDLOCK_VALKEY_BIN", "/nonexistent/valkey-server"),
        ],
    );
    assert!(
        msg.starts_with("this test needs a valkey-server beside the default server"),
        "{msg}"
    );
    assert!(msg.contains("/nonexistent/valkey-server"), "{msg}");
    assert!(msg.contains("set REDLOCK_VALKEY_BIN to"), "{msg}");
    assert!(!msg.contains('\n'), "{msg}");
    assert_eq!(
        msg.matches(". ").count(),
        0,
        "more than one sentence: {msg}"
    );
}

/// A test that needs Valkey 9 (`min_version(Valkey, 9)`) takes the Valkey 9 named by
/// `REDLOCK_VALKEY_BIN` over an older default; with only the older one it fails before any
/// node starts, in one sentence naming the binary found and the variable to set. The
/// binaries are two scripts that answer `--version` as Valkey 8.0.1 and 9.1.2 would (only
/// the choice is under test; no node is started), run in a child with that environment.
#[test]
fn a_test_that_needs_valkey_9_says_which_binary_and_how_to_name_it() {
    if std::env::var_os(VERSION_CHILD_ENV).is_some() {
        let needs_9 = Cluster::builder()
            .kinds([ServerKind::Valkey])
            .min_version(ServerKind::Valkey, 9);
        match ServerBin::of_kind_at_least(ServerKind::Valkey, 9) {
            Ok(bin) => println!("\nFOUND {bin}"),
            Err(err) => {
                // The cluster fails with the same sentence, before starting anything.
                let from_cluster = needs_9.start().err().map(|e| e.to_string());
                assert_eq!(from_cluster, Some(err.to_string()));
                println!("\nERROR {err}");
            }
        }
        return;
    }
    let dir = std::env::temp_dir().join(format!("redlock-versions-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let fake = |name: &str, version: &str| {
        let path = dir.join(name);
        let script = format!("#!/bin/sh\necho 'Valkey server v={version} sha=00000000:0'\n");
        std::fs::write(&path, script).unwrap();
        let mode = std::os::unix::fs::PermissionsExt::from_mode(0o755);
        std::fs::set_permissions(&path, mode).unwrap();
        path.to_string_lossy().into_owned()
    };
    let (old, new) = (fake("valkey-8", "8.0.1"), fake("valkey-9", "9.1.2"));
    let run = |env: &[(&str, &str)]| {
        let mut env = env.to_vec();
        env.push((VERSION_CHILD_ENV, "1"));
        child_line(
            "a_test_that_needs_valkey_9_says_which_binary_and_how_to_name_it",
            &env,
        )
    };
    let both = run(&[("REDLOCK_SERVER_BIN", &old), ("REDLOCK_VALKEY_BIN", &new)]);
    let only_old = run(&[("REDLOCK_SERVER_BIN", &old), ("REDLOCK_VALKEY_BIN", &old)]);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(both, format!("FOUND Valkey 9.1.2 ({new})"));
    assert_eq!(
        only_old,
        format!(
            "ERROR this test needs Valkey 9 or later and found only Valkey 8.0.1 ({old}): set \
             REDLOCK_VALKEY_BIN to a valkey-server 9 binary (`.ci/install-servers.sh` installs \
             one and prints its path; `cargo xtask test --valkey PATH` sets it for every test)"
        )
    );
}

/// Runs `test` alone in a child of this test binary with `env` set, and returns the error
/// the child printed on its `ERROR ` line.
fn child_error(test: &str, env: &[(&str, &str)]) -> String {
    child_line(test, env)
        .strip_prefix("ERROR ")
        .unwrap_or_else(|| panic!("the child printed no error"))
        .to_owned()
}

/// Runs `test` alone in a child of this test binary with `env` set, and returns the line
/// the child printed that starts with `ERROR ` or `FOUND `.
fn child_line(test: &str, env: &[(&str, &str)]) -> String {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .envs(env.iter().copied())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout
        .lines()
        .find(|l| l.starts_with("ERROR ") || l.starts_with("FOUND "))
        .unwrap_or_else(|| panic!("child printed no error: {stdout}"))
        .to_owned()
}
