//! Kleppmann's scenario end to end (docs/safety.md, "Fencing"): holder A takes a fenced
//! lock in a process of its own and is stopped (SIGSTOP) past its validity; B takes the
//! lock and writes; A resumes and writes with its older token, and the storage refuses it.
//! Without fencing both writes would land: the lease alone cannot stop A.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use redlock_testkit::{Cluster, Conn, Reply};
use redlock_tokio::{LockOptions, Redlock};

#[allow(dead_code, unreachable_pub)]
#[path = "../examples/fenced_write.rs"]
mod example;

/// Set in the child run that plays holder A.
const CHILD_ENV: &str = "REDLOCK_KLEPPMANN_HOLDER";
const TTL: Duration = Duration::from_millis(1_000);
const ITEM: &str = "account:7";

/// Holder A, in the child: lock, say the token, wait for a line on stdin (it is stopped
/// meanwhile), then write with its token and say what the storage answered.
fn holder_a(nodes: &str, store: &str) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let _runtime = rt.enter();
    let redlock = Redlock::builder(nodes.split(','))
        .unwrap()
        .config(|c| c.ttl(TTL))
        .build()
        .unwrap();
    let guard = rt
        .block_on(redlock.lock_with(ITEM, LockOptions::default().fenced(true)))
        .unwrap();
    let token = guard.fencing_token().unwrap();
    println!("TOKEN {token}");
    std::io::stdout().flush().unwrap();
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
    let mut store = Conn::open(store.parse().unwrap(), Duration::from_secs(2)).unwrap();
    match example::write_fenced(&mut store, ITEM, token, "written by A") {
        Ok(()) => println!("WRITE accepted"),
        Err(refusal) => println!("WRITE refused {refusal}"),
    }
    std::io::stdout().flush().unwrap();
}

/// Kills the child if the test fails before it ends.
struct Reaper(Child);

impl Drop for Reaper {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-CONT", &self.0.id().to_string()])
            .status();
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn signal(child: &Child, sig: &str) {
    let status = Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .expect("kill(1)");
    assert!(status.success(), "kill {sig} failed");
}

#[test]
fn a_paused_holder_s_late_write_is_refused() {
    if let Ok(args) = std::env::var(CHILD_ENV) {
        let (nodes, store) = args.split_once(' ').unwrap();
        return holder_a(nodes, store);
    }
    let nodes = Cluster::start(3).unwrap();
    let storage = Cluster::start(1).unwrap();
    let child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_paused_holder_s_late_write_is_refused",
            "--nocapture",
        ])
        .arg("--test-threads=1")
        .env(
            CHILD_ENV,
            format!("{} {}", nodes.urls().join(","), storage.node(0).addr()),
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut child = Reaper(child);
    // The child's lines, read on a thread so that every wait below is bounded.
    let (tx, rx) = mpsc::channel();
    let stdout = child.0.stdout.take().unwrap();
    thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let line = |prefix: &str| -> String {
        let deadline = Instant::now() + Duration::from_secs(20);
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            let Ok(line) = rx.recv_timeout(left) else {
                break;
            };
            // The test harness prints the test's name on the same line, before it.
            if let Some(at) = line.find(prefix) {
                return line[at + prefix.len()..].trim().to_owned();
            }
        }
        panic!("holder A did not say {prefix:?} within 20 s");
    };
    let token_a: u64 = line("TOKEN ").parse().unwrap();

    // A is stopped, and stays stopped past its validity.
    signal(&child.0, "-STOP");
    let stopped = Instant::now();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let _runtime = rt.enter();
    let redlock = Redlock::builder(nodes.urls())
        .unwrap()
        .config(|c| c.ttl(TTL))
        .build()
        .unwrap();
    // B waits for the lock: it is free once A's keys expire.
    let options = LockOptions::default()
        .fenced(true)
        .max_wait(redlock.config(), 5 * TTL);
    let guard = rt.block_on(redlock.lock_with(ITEM, options)).unwrap();
    assert!(
        stopped.elapsed() >= TTL / 2,
        "B got the lock while A's was valid"
    );
    let token_b = guard.fencing_token().unwrap();
    assert!(token_b > token_a, "{token_b} after {token_a}");
    let mut store = Conn::open(storage.node(0).addr(), Duration::from_secs(2)).unwrap();
    example::write_fenced(&mut store, ITEM, token_b, "written by B").unwrap();

    // A wakes up and writes, still believing it holds the lock.
    signal(&child.0, "-CONT");
    child.0.stdin.as_mut().unwrap().write_all(b"go\n").unwrap();
    let answer = line("WRITE ");
    assert!(
        answer.starts_with("refused"),
        "A's stale write was {answer}"
    );
    assert!(answer.contains("STALE"), "{answer}");
    let value = storage.node(0).command(&["GET", ITEM]).unwrap();
    assert_eq!(value, Reply::Bulk(b"written by B".to_vec()));
    rt.block_on(guard.release()).unwrap();
    assert!(child.0.wait().unwrap().success());
}
