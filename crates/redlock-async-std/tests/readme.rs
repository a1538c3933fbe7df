//! The README's example is the compiled `examples/readme_async_std.rs`, word for word.

#[test]
fn readme_example_is_the_compiled_example() {
    let example = include_str!("../examples/readme_async_std.rs");
    let (_, code) = example
        .split_once("\n\n")
        .expect("a doc line, then the program");
    assert!(
        include_str!("../README.md").contains(code),
        "README.md's example differs from examples/readme_async_std.rs"
    );
}

/// The README's program itself, run against real nodes: what it returns is what it prints.
#[allow(dead_code, unreachable_pub)]
#[path = "../examples/readme_async_std.rs"]
mod program;

/// A loopback port nothing listens on (bound, then let go).
fn refused_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
}

#[test]
fn the_readme_program_locks_and_says_why_it_cannot() {
    smol::block_on(run());
}

async fn run() {
    let c = redlock_testkit::Cluster::start(3).expect("3 nodes");
    let urls = c.urls();
    let nodes: Vec<&str> = urls.iter().map(String::as_str).collect();
    program::lock_invoice(&nodes, 42).await.expect("locked");

    // Contended: someone else holds invoices:7.
    let other = redlock_async_std::Redlock::builder(&nodes)
        .and_then(|b| b.build())
        .expect("other client");
    let held = other.lock("invoices:7").await.expect("held by the other");
    let e = program::lock_invoice(&nodes, 7)
        .await
        .expect_err("contended");
    let text = e.to_string();
    assert!(
        text.starts_with("could not acquire the lock: another client holds it on 127.0.0.1:"),
        "{text}"
    );
    held.release().await.expect("released");

    // Nothing listens: every node says so, by address.
    let ports = [refused_port(), refused_port(), refused_port()];
    let down: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let down: Vec<&str> = down.iter().map(String::as_str).collect();
    let e = program::lock_invoice(&down, 42).await.expect_err("refused");
    assert_refused(&e.to_string(), &down);

    // A bad URL fails before any connection, naming the URL, never a password.
    let e = program::lock_invoice(&["redis://user:hunter2@:6379"], 42)
        .await
        .expect_err("no host");
    let text = e.to_string();
    assert!(
        text.starts_with("invalid node URL `redis://user:***@:6379`: "),
        "{text}"
    );
    assert!(!format!("{e} {e:?}").contains("hunter2"), "{e:?}");
}

/// `could not acquire the lock: too many nodes failed: <node>: connection refused; ...`,
/// listing at least a deciding majority of `nodes` (the attempt is decided once two of three
/// have failed; the third may not have answered yet).
fn assert_refused(text: &str, nodes: &[&str]) {
    let list = (text.strip_prefix("could not acquire the lock: too many nodes failed: "))
        .unwrap_or_else(|| panic!("{text}"));
    let failed: Vec<&str> = list.split("; ").collect();
    assert!(failed.len() >= 2, "{text}");
    for entry in failed {
        let node = (entry.strip_suffix(": connection refused")).unwrap_or_else(|| panic!("{text}"));
        assert!(nodes.contains(&node), "{text}");
    }
}
