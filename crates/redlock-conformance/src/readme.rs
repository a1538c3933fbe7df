//! What every driver's README promises, checked once for all of them: the README shows the
//! compiled example word for word, and the README's program, run against real nodes, locks
//! with `lock(&key)` and, when it cannot, says why in a sentence that names each node by
//! address and never the password.

use redlock_driver::LockError;
use redlock_testkit::refused_ports;

use crate::scenarios::cluster;

/// Panics unless `readme` contains `example`'s program: the file less its first paragraph
/// (the doc line saying it is the README's example).
pub fn assert_readme_shows(readme: &str, example: &str) {
    let (_, code) = example
        .split_once("\n\n")
        .expect("a doc line, then the program");
    assert!(
        readme.contains(code),
        "the README's example differs from the compiled one:\n{code}"
    );
}

/// Runs a driver's README program, `lock_invoice(nodes, id)` (each driver's
/// `examples/readme_*.rs`, blocked on by the caller), against real nodes: it locks; on a key
/// another client holds it says so, by address; on ports nothing listens on it says
/// `connection refused` for each node, by address; a URL with a password is refused before
/// any connection, with the password hidden.
pub fn readme_program_locks_and_says_why(
    lock_invoice: impl Fn(&[&str], u64) -> Result<(), LockError>,
) {
    let c = cluster(3);
    let urls = c.urls();
    let nodes: Vec<&str> = urls.iter().map(String::as_str).collect();
    lock_invoice(&nodes, 42).expect("locked");

    // Another client holds invoices:7 on every node.
    for node in c.nodes() {
        let set = ["SET", "invoices:7", "another-client", "PX", "60000"];
        node.command(&set).expect("SET on the node");
    }
    let text = lock_invoice(&nodes, 7).expect_err("contended").to_string();
    assert!(
        text.starts_with("could not acquire the lock: another client holds it on 127.0.0.1:"),
        "{text}"
    );

    let down: Vec<String> = refused_ports(3)
        .expect("three free ports")
        .iter()
        .map(ToString::to_string)
        .collect();
    let down: Vec<&str> = down.iter().map(String::as_str).collect();
    let e = lock_invoice(&down, 42).expect_err("refused");
    assert_refused(&e.to_string(), &down);

    let e = lock_invoice(&["redis://user:hunter2@:6379"], 42).expect_err("no host");
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
