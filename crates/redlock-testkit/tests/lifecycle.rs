//! Nothing the kit starts outlives it: not after a drop, not after a panicking test, not even
//! after a process exit that skips destructors (the watchdog's job). The last case runs this
//! test binary again as a child, so no global state of this process is touched.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use redlock_testkit::Cluster;

/// Set in the child run of [`exit_without_destructors_still_kills_servers`].
const CHILD_ENV: &str = "REDLOCK_TESTKIT_EXIT_CHILD";

#[test]
fn drop_kills_every_process_and_removes_dirs() {
    let cluster = Cluster::start(3).unwrap();
    let pids: Vec<u32> = cluster.nodes().iter().map(|n| n.pid().unwrap()).collect();
    let dirs: Vec<PathBuf> = cluster.nodes().iter().map(|n| n.data_dir()).collect();
    assert!(pids.iter().all(|&p| alive(p)));
    assert!(dirs.iter().all(|d| d.is_dir()));
    cluster.node(1).pause().unwrap(); // a stopped process must die too

    drop(cluster);
    for pid in pids {
        assert!(!alive(pid), "pid {pid} survived the drop");
    }
    for dir in dirs {
        assert!(!dir.exists(), "{} survived the drop", dir.display());
    }
}

#[test]
fn panicking_test_still_cleans_up() {
    let (tx, rx) = std::sync::mpsc::channel();
    let outcome = thread::spawn(move || {
        let cluster = Cluster::start(2).unwrap();
        let pids: Vec<u32> = cluster.nodes().iter().map(|n| n.pid().unwrap()).collect();
        tx.send(pids).unwrap();
        panic!("deliberate panic with a live cluster");
    })
    .join();
    assert!(outcome.is_err());
    for pid in rx.recv().unwrap() {
        assert!(!alive(pid), "pid {pid} survived the panic");
    }
}

#[test]
fn exit_without_destructors_still_kills_servers() {
    if std::env::var_os(CHILD_ENV).is_some() {
        // Child: start nodes, report their pids, and exit without running any destructor.
        let cluster = Cluster::start(2).unwrap();
        let pids: Vec<String> = cluster
            .nodes()
            .iter()
            .map(|n| n.pid().unwrap().to_string())
            .collect();
        println!("\nPIDS {}", pids.join(" "));
        for node in cluster.nodes() {
            // Without destructors the temp dirs stay behind: the parent removes them.
            println!("\nDIR {}", node.data_dir().parent().unwrap().display());
        }
        std::process::exit(0);
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "exit_without_destructors_still_kills_servers",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("PIDS "))
        .unwrap_or_else(|| panic!("child printed no pids: {stdout}"));
    let pids: Vec<u32> = line.split(' ').map(|p| p.parse().unwrap()).collect();
    assert_eq!(pids.len(), 2);
    // The watchdogs fire as soon as the child's pipes close; allow them a bounded moment.
    let deadline = Instant::now() + Duration::from_secs(5);
    while pids.iter().any(|&p| alive(p)) {
        assert!(
            Instant::now() < deadline,
            "orphaned servers survived: {pids:?}"
        );
        thread::sleep(Duration::from_millis(10));
    }
    for dir in stdout.lines().filter_map(|l| l.strip_prefix("DIR ")) {
        assert!(dir.contains("redlock-testkit"), "{dir}");
        std::fs::remove_dir_all(dir).unwrap();
    }
}

/// True while `pid` exists and is not a zombie. Orphans are reaped by init, so a killed
/// orphan may linger briefly as a zombie: that counts as dead.
fn alive(pid: u32) -> bool {
    let stat = Path::new("/proc").join(pid.to_string()).join("stat");
    match std::fs::read_to_string(stat) {
        Err(_) => false,
        Ok(s) => !matches!(
            s.rsplit_once(')')
                .and_then(|(_, rest)| rest.trim_start().chars().next()),
            Some('Z' | 'X')
        ),
    }
}
