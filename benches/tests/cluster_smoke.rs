//! Runs `cluster --quick` end to end against real local nodes, so CI keeps the cluster bench
//! working. Asserts that it finishes within a bound, reports every scenario for every subject
//! (raw, tokio and rslock on both runtime flavours; async-std and blocking once, as
//! `own-thread`; contended8, contended2x4 and contended4x2 for tokio, blocking and rslock
//! with no violations, with fairness, hand-off latency and attempts per section; nodes for raw and tokio
//! at every cluster size; held for both lock counts with none lost, every key renewed and
//! released; sweep for raw, tokio, blocking and rslock at 1 and 64 workers), writes its SVG
//! charts beside the JSON, and stops its nodes; never how fast anything was.

use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn quick_run_reports_every_subject_and_stops_its_nodes() {
    let (stdout, stderr, json, charts) = run_quick(&[]);

    // The markdown table: a row per scenario, runtime and subject, each with numbers and
    // ratios to raw.
    for scenario in ["serial", "concurrent32"] {
        for (runtime, subject) in ROWS {
            let prefix = format!("| {scenario} | {runtime} | {subject} | ");
            let row = stdout
                .lines()
                .find(|l| l.starts_with(&prefix))
                .unwrap_or_else(|| panic!("no row {prefix:?} in:\n{stdout}"));
            assert!(
                !row.contains("NaN") && !row.contains('–'),
                "a subject ran no cycles: {row}"
            );
        }
    }
    // contended8, contended2x4 and contended4x2: tokio, blocking and rslock, sections done,
    // no violations, fairness and hand-off reported, ours set against rslock.
    for scenario in ["contended8", "contended2x4", "contended4x2"] {
        for (runtime, subject) in CONTENDED {
            let prefix = format!("| {scenario} | {runtime} | {subject} | ");
            let rows = stdout.lines().filter(|l| l.starts_with(&prefix)).count();
            // One row in the main table, one in the contended table.
            assert_eq!(rows, 2, "rows {prefix:?} in:\n{stdout}");
            let line = format!("- {scenario} / {runtime} / {subject}: violations == 0: met (0)");
            assert!(stdout.contains(&line), "no {line:?} in:\n{stdout}");
        }
        for (runtime, subject) in &CONTENDED[..2] {
            let line = format!("- {scenario} / {runtime} / {subject}: busiest / least busy");
            assert!(stdout.contains(&line), "no {line:?} in:\n{stdout}");
            let prefix = format!("| {scenario} | {subject} | ");
            assert!(stdout.lines().any(|l| l.starts_with(&prefix)), "{stdout}");
        }
    }
    // nodes: raw and tokio at every cluster size, with numbers and ratios to raw.
    for n in [1, 3, 5, 7, 9] {
        for subject in ["raw", "tokio"] {
            let prefix = format!("| nodes N={n} | current_thread | {subject} | ");
            let row = stdout
                .lines()
                .find(|l| l.starts_with(&prefix))
                .unwrap_or_else(|| panic!("no row {prefix:?} in:\n{stdout}"));
            assert!(!row.contains('–'), "no cycles: {row}");
        }
    }
    for subject in ["raw", "tokio"] {
        let line = format!("- nodes / {subject}: p50(N=9) / p50(N=3) <= 1.3: ");
        assert!(stdout.contains(&line), "no {line:?} in:\n{stdout}");
    }
    // release: each driver's release with a paused node against a healthy one.
    for subject in ["tokio", "async-std", "blocking"] {
        let line = format!("- release / {subject}: paused p50 / healthy p50 <= 2: ");
        assert!(stdout.contains(&line), "no {line:?} in:\n{stdout}");
    }
    // held: 1,000 and 10,000 locks (--quick), none lost, keys renewed, all released.
    for locks in [1_000, 10_000] {
        let prefix = format!("| {locks} | multi_thread(2) | ");
        assert!(
            stdout.lines().any(|l| l.starts_with(&prefix)),
            "no row {prefix:?} in:\n{stdout}"
        );
        // Each verdict line starts with its target and ends with the numbers.
        for target in [
            "lost == 0: met (0)",
            "every key on every node, min PTTL > ttl - window: met",
            "released, no key left, no node answer but Released or a timeout: met",
        ] {
            let line = format!("- held / {locks} locks: {target}");
            assert!(stdout.contains(&line), "no {line:?} in:\n{stdout}");
        }
    }
    // tokio against rslock, on both flavours (not the contended8 table's rows).
    for runtime in ["current_thread", "multi_thread(2)"] {
        let prefix = format!("| {runtime} | ");
        assert!(
            stdout
                .lines()
                .filter(|l| {
                    l.starts_with(&prefix) && !l.contains("| tokio |") && !l.contains("| rslock |")
                })
                .count()
                == 1,
            "no tokio/rslock row for {runtime} in:\n{stdout}"
        );
    }
    assert!(json.trim_start().starts_with('{') && json.trim_end().ends_with('}'));
    // serial and concurrent32: every row; the three contended scenarios: tokio, blocking,
    // rslock, and tokio and blocking against rslock; nodes: raw, tokio × 5; release: healthy
    // and paused for each driver.
    assert_eq!(
        json.matches("\"scenario\":").count(),
        2 * ROWS.len() + 3 * 3 + 3 * 2 + 10 + 2 * 3,
        "{json}"
    );
    assert_eq!(json.matches("\"violations\": 0,").count(), 9, "{json}");
    assert_eq!(json.matches("\"handoff_p99_us\":").count(), 9, "{json}");
    assert_eq!(json.matches("\"section_p50_us\":").count(), 9, "{json}");
    // Attempts per section: ours say, rslock does not.
    assert_eq!(json.matches("\"attempts_mean\":").count(), 6, "{json}");
    // The 10 nodes rows, plus the machine's node count.
    assert_eq!(json.matches("\"nodes\": ").count(), 11, "{json}");
    assert_eq!(json.matches("\"tokio_ops_per_s\":").count(), 2, "{json}");
    assert_eq!(json.matches("\"cycles\": 0,").count(), 0, "{json}");
    // Only the contended scenarios' nine rows and release's six have no raw baseline: 4 null
    // ratios each (p50, ops/s, CPU, server CPU).
    assert!(!json.contains("NaN"), "{json}");
    assert_eq!(json.matches("ratio\": null").count(), 60, "{json}");
    // held: two runs, each clean.
    for check in [
        "\"none_lost\": true",
        "\"keys_renewed\": true",
        "\"released_clean\": true",
    ] {
        assert_eq!(json.matches(check).count(), 2, "{check} in {json}");
    }

    // sweep: every subject at both ends, with a ratio to raw.
    for workers in [1, 64] {
        let prefix = format!("| {workers} | ");
        let row = stdout
            .lines()
            .find(|l| l.starts_with(&prefix))
            .unwrap_or_else(|| panic!("no sweep row {prefix:?} in:\n{stdout}"));
        assert_eq!(row.matches(" (").count(), 4, "{row}");
        for subject in ["raw", "tokio", "blocking", "rslock"] {
            assert!(
                row.contains(&format!("{subject}: ")),
                "no {subject} in {row}"
            );
        }
    }
    assert_eq!(json.matches("\"workers\": ").count(), 2 * 4, "{json}");
    // The charts: a CDF per scenario family and pass, kinds', the sweep's, the ceiling's;
    // each an SVG document, listed in the JSON.
    let names: Vec<&str> = charts.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names, CHARTS, "{stdout}");
    for (name, svg) in &charts {
        assert!(
            svg.starts_with("<svg ") && svg.trim_end().ends_with("</svg>"),
            "{name}"
        );
        assert!(
            json.contains(&format!("{name}.svg\"")),
            "{name} not in {json}"
        );
    }

    // The nodes are gone: nothing answers on the ports the bench announced (the main
    // cluster's, release's and held's).
    let ports: Vec<SocketAddr> = stderr
        .lines()
        .filter_map(|l| l.split_once(" up: "))
        .flat_map(|(_, urls)| {
            urls.split_whitespace()
                .filter_map(|u| u.strip_prefix("redis://")?.parse().ok())
        })
        .collect();
    assert_eq!(ports.len(), 15, "no node lists in:\n{stderr}");
    for addr in ports {
        let connected = TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok();
        assert!(
            !connected,
            "node {addr} still listens after the bench exited"
        );
    }
}

/// Runs `cluster --quick` with `extra` arguments within [`RUN_BOUND`], asserts it succeeded,
/// and returns its stdout, stderr and JSON report, and the charts it listed (each as its file
/// name after the JSON's stem and its text); removes the files.
fn run_quick(extra: &[&str]) -> (String, String, String, Vec<(String, String)>) {
    let out = std::env::temp_dir().join(format!(
        "cluster-bench-smoke-{}-{}.json",
        std::process::id(),
        extra.len()
    ));
    let mut child = Command::new(env!("CARGO_BIN_EXE_cluster"))
        .args(["--quick", "--out"])
        .arg(&out)
        .args(extra)
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
    let json = std::fs::read_to_string(&out).expect("read the JSON report");
    let _ = std::fs::remove_file(&out);
    let stem = out.with_extension("");
    let stem = stem.to_string_lossy();
    let mut charts = Vec::new();
    for path in stdout
        .lines()
        .filter_map(|l| l.strip_prefix("- ")?.strip_suffix(".svg"))
    {
        let file = format!("{path}.svg");
        let svg = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{file}: {e}"));
        let _ = std::fs::remove_file(&file);
        let name = path.strip_prefix(&format!("{stem}-")).unwrap_or(path);
        charts.push((name.to_owned(), svg));
    }
    (stdout, stderr, json, charts)
}

/// The opt-in subjects (not in a default run): raw releasing by plain `DEL`, and
/// redlock-tokio with scripts forced beside the default, with the native/scripts table. Runs
/// on whatever server the kit finds (`raw-delifeq` needs Valkey 9, so it is not named).
#[test]
fn opt_in_subjects_report_native_against_scripts() {
    let args = [
        "--runtime",
        "current_thread",
        "--scenario",
        "concurrent32",
        "--subject",
        "raw,raw-del,tokio,tokio-scripts",
    ];
    let (stdout, _, json, _) = run_quick(&args);
    for subject in ["raw", "raw-del", "tokio", "tokio-scripts"] {
        let prefix = format!("| concurrent32 | current_thread | {subject} | ");
        let row = stdout
            .lines()
            .find(|l| l.starts_with(&prefix))
            .unwrap_or_else(|| panic!("no row {prefix:?} in:\n{stdout}"));
        assert!(!row.contains("NaN") && !row.contains('–'), "{row}");
    }
    let line = "- concurrent32 / current_thread: tokio / tokio-scripts ops/s >= 1.4: ";
    assert!(stdout.contains(line), "no {line:?} in:\n{stdout}");
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("| concurrent32 | current_thread | ")
                && l.matches('|').count() == 10),
        "no native/scripts row in:\n{stdout}"
    );
    assert_eq!(json.matches("\"native_ops_per_s\":").count(), 1, "{json}");
    assert_eq!(json.matches("\"scenario\":").count(), 4 + 1, "{json}");
}

/// The rows each scenario has: (runtime label, subject).
/// The contended scenarios' subjects (ours first, then rslock) and their runtime labels.
const CONTENDED: [(&str, &str); 3] = [
    ("current_thread", "tokio"),
    ("own-thread", "blocking"),
    ("current_thread", "rslock"),
];

const ROWS: [(&str, &str); 8] = [
    ("current_thread", "raw"),
    ("current_thread", "tokio"),
    ("current_thread", "rslock"),
    ("own-thread", "async-std"),
    ("own-thread", "blocking"),
    ("multi_thread(2)", "raw"),
    ("multi_thread(2)", "tokio"),
    ("multi_thread(2)", "rslock"),
];

/// The charts of a whole `--quick` run, in the order the bench writes them.
const CHARTS: [&str; 13] = [
    "cdf-serial-current_thread",
    "cdf-concurrent32-current_thread",
    "cdf-contended8-current_thread",
    "cdf-contended2x4-current_thread",
    "cdf-contended4x2-current_thread",
    "cdf-serial-multi_thread-2",
    "cdf-concurrent32-multi_thread-2",
    "cdf-nodes-current_thread",
    "cdf-release-current_thread",
    "cdf-kinds-serial",
    "cdf-kinds-concurrent",
    "throughput",
    "contended",
];

/// `--quick` takes about 40 s in a debug build (held's two 3 s windows, the contended
/// scenarios' 12 s and sweep's 4 s included); allow for a loaded machine.
const RUN_BOUND: Duration = Duration::from_secs(150);

/// `raw-grant`, the floor of a hand-off between processes, with its grants addressed to the
/// next worker, heard by every process (`raw-grant-all`) or made by the queue script's calls
/// (`raw-grant-q`): in `contended4x2` the ring gives
/// every worker of the four processes its turns, each taken by a grant (no attempt) after
/// the round's first, with no two sections overlapping.
#[test]
fn raw_grant_rings_through_every_process() {
    let args = [
        "--runtime",
        "current_thread",
        "--scenario",
        "contended4x2",
        "--subject",
        "raw-grant,raw-grant-all,raw-grant-q",
    ];
    let (stdout, _, _, _) = run_quick(&args);
    for subject in ["raw-grant", "raw-grant-all", "raw-grant-q"] {
        rings_through_every_process(&stdout, subject);
    }
}

/// The checks of [`raw_grant_rings_through_every_process`] on one subject's row.
fn rings_through_every_process(stdout: &str, subject: &str) {
    let prefix = format!("| contended4x2 | current_thread | {subject} | ");
    let row = stdout
        .lines()
        .filter(|l| l.starts_with(&prefix))
        .find(|l| l.matches('|').count() > 14)
        .unwrap_or_else(|| panic!("no contended row {prefix:?} in:\n{stdout}"));
    let cells: Vec<&str> = row.split('|').map(str::trim).collect();
    let per_worker: Vec<u64> = (cells[10].split(' '))
        .map(|n| n.parse().unwrap_or_else(|_| panic!("{row}")))
        .collect();
    assert_eq!(per_worker.len(), 8, "{row}");
    assert!(
        per_worker.iter().all(|n| *n >= 5),
        "a worker missed its turns: {row}"
    );
    assert_eq!(cells[12], "0", "violations: {row}");
    let mean: f64 = (cells[14].split(" / ").next())
        .and_then(|m| m.parse().ok())
        .unwrap_or_else(|| panic!("{row}"));
    assert!(mean < 0.1, "turns not taken by grants: {row}");
}
