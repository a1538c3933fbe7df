//! Kleppmann's scenario end to end (docs/safety.md, "Fencing"), for every driver: holder A
//! takes a fenced lock in a process of its own and is stopped (SIGSTOP) past its validity;
//! B takes the lock and writes; A resumes and writes with its older token, and the storage
//! stand-in ([`redlock_testkit::fenced`]) refuses it. Without fencing both writes would land:
//! the lease alone cannot stop A.

use std::io::Write;
use std::time::{Duration, Instant};

use redlock_testkit::fenced::write_fenced;
use redlock_testkit::{ChildTest, Cluster, Conn, Reply};

use crate::{Driver, Guard, LockOptions};

/// Set in the child run that plays holder A: the nodes' URLs (comma-separated), a space,
/// and the storage's address.
const HOLDER_ENV: &str = "REDLOCK_KLEPPMANN_HOLDER";
/// The lock's ttl: A is stopped for longer, B waits for A's keys to expire.
const TTL: Duration = Duration::from_millis(1_000);
/// The item both holders write.
const ITEM: &str = "account:7";
/// How long the test waits for any one line of the child.
const LINE_WAIT: Duration = Duration::from_secs(20);

/// A is stopped past its validity, B acquires and writes with a larger token, and A's late
/// write with its own token is refused; the storage keeps B's value.
pub fn a_paused_holder_s_late_write_is_refused<D: Driver>() {
    if let Ok(args) = std::env::var(HOLDER_ENV) {
        let (nodes, store) = args.split_once(' ').expect("nodes and storage");
        return holder_a::<D>(nodes, store);
    }
    let nodes = Cluster::start(3).expect("start the lock's nodes");
    let storage = Cluster::start(1).expect("start the storage node");
    let env = format!("{} {}", nodes.urls().join(","), storage.node(0).addr());
    let mut a = ChildTest::spawn(HOLDER_ENV, &env).expect("run holder A");
    let token_a: u64 = a
        .line("TOKEN ", LINE_WAIT)
        .expect("A's token")
        .parse()
        .unwrap();

    // A is stopped, and stays stopped past its validity.
    a.pause().expect("SIGSTOP holder A");
    let stopped = Instant::now();
    let b = D::build(&nodes.urls(), |c| c.ttl(TTL)).expect("driver");
    // B waits for the lock: it is free once A's keys expire.
    let options = LockOptions::default()
        .fenced(true)
        .max_wait(b.config(), 5 * TTL);
    let guard = b
        .lock_with(ITEM, options)
        .expect("free once A's keys expire");
    assert!(
        stopped.elapsed() >= TTL / 2,
        "B got the lock while A's was valid"
    );
    let token_b = guard.fencing_token().expect("a fenced lock has a token");
    assert!(token_b > token_a, "{token_b} after {token_a}");
    let mut store = Conn::open(storage.node(0).addr(), Duration::from_secs(2)).unwrap();
    write_fenced(&mut store, ITEM, token_b, "written by B").expect("B's write");

    // A wakes up and writes, still believing it holds the lock.
    a.resume().expect("SIGCONT holder A");
    a.send_line("go").expect("tell A to write");
    let answer = a.line("WRITE ", LINE_WAIT).expect("A's write");
    assert!(
        answer.starts_with("refused"),
        "A's stale write was {answer}"
    );
    assert!(answer.contains("STALE"), "{answer}");
    let value = storage.node(0).command(&["GET", ITEM]).unwrap();
    assert_eq!(value, Reply::Bulk(b"written by B".to_vec()));
    guard.release().expect("release");
    assert!(a.wait(LINE_WAIT).expect("wait for A"), "holder A failed");
}

/// Holder A, in the child: lock, say the token, wait for a line on stdin (it is stopped
/// meanwhile), then write with its token and say what the storage answered.
fn holder_a<D: Driver>(nodes: &str, store: &str) {
    let urls: Vec<String> = nodes.split(',').map(str::to_owned).collect();
    let a = D::build(&urls, |c| c.ttl(TTL)).expect("driver");
    let guard = a
        .lock_with(ITEM, LockOptions::default().fenced(true))
        .expect("the lock is free");
    let token = guard.fencing_token().expect("a fenced lock has a token");
    say(&format!("TOKEN {token}"));
    let mut line = String::new();
    std::io::stdin()
        .read_line(&mut line)
        .expect("the test's go");
    let store = store.parse().expect("the storage's address");
    let mut store = Conn::open(store, Duration::from_secs(2)).expect("connect to storage");
    match write_fenced(&mut store, ITEM, token, "written by A") {
        Ok(()) => say("WRITE accepted"),
        Err(refusal) => say(&format!("WRITE refused {refusal}")),
    }
    // The lock is long gone on the nodes; its release only finds B's keys, or none.
    drop(guard);
}

/// One line to the test, at once.
fn say(line: &str) {
    let mut out = std::io::stdout();
    writeln!(out, "{line}").expect("stdout");
    out.flush().expect("stdout");
}
