//! Runs `cluster --quick` end to end against real local nodes, so CI keeps the cluster bench
//! working. Asserts that it finishes within a bound, reports every scenario for both
//! subjects, and stops its nodes; never how fast anything was.

use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn quick_run_reports_both_subjects_and_stops_its_nodes() {
    let out = std::env::temp_dir().join(format!("cluster-bench-smoke-{}.json", std::process::id()));
    let mut child = Command::new(env!("CARGO_BIN_EXE_cluster"))
        .args(["--quick", "--out"])
        .arg(&out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the cluster bench");
    let deadline = Instant::now() + RUN_BOUND;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the cluster bench") {
            break status;
        }
        if Instant::now() > deadline {
            // Killing the bench skips its `Drop`s; its nodes are left for the OS to reap.
            let _ = child.kill();
            let _ = child.wait();
            panic!("cluster --quick did not finish within {RUN_BOUND:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stdout = String::new();
    let mut stderr = String::new();
    child
        .stdout
        .take()
        .map(|mut s| s.read_to_string(&mut stdout));
    child
        .stderr
        .take()
        .map(|mut s| s.read_to_string(&mut stderr));
    assert!(
        status.success(),
        "cluster --quick failed: {status}\n{stderr}"
    );

    // The markdown table: a row per scenario and runtime, with numbers for both subjects.
    for scenario in ["serial", "concurrent32"] {
        for runtime in ["current_thread", "multi_thread(2)"] {
            let prefix = format!("| {scenario} | {runtime} | ");
            let row = stdout
                .lines()
                .find(|l| l.starts_with(&prefix))
                .unwrap_or_else(|| panic!("no row {prefix:?} in:\n{stdout}"));
            assert!(!row.contains("NaN"), "a subject ran no cycles: {row}");
        }
    }
    let json = std::fs::read_to_string(&out).expect("read the JSON report");
    let _ = std::fs::remove_file(&out);
    assert!(json.trim_start().starts_with('{') && json.trim_end().ends_with('}'));
    assert_eq!(json.matches("\"scenario\":").count(), 4, "{json}");
    assert_eq!(json.matches("\"cycles\": 0,").count(), 0, "{json}");
    assert!(!json.contains("null,") && !json.contains("NaN"), "{json}");

    // The nodes are gone: nothing answers on the ports the bench announced.
    let ports: Vec<SocketAddr> = stderr
        .lines()
        .find_map(|l| l.split_once(" up: "))
        .map(|(_, urls)| {
            urls.split_whitespace()
                .filter_map(|u| u.strip_prefix("redis://")?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(ports.len(), 5, "no node list in:\n{stderr}");
    for addr in ports {
        let connected = TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok();
        assert!(
            !connected,
            "node {addr} still listens after the bench exited"
        );
    }
}

/// `--quick` takes a few seconds (about 4 s of it timed); allow for a slow debug build on a
/// loaded machine.
const RUN_BOUND: Duration = Duration::from_secs(90);
