//! The waiters' queue contract (queue.rs) on a real server: the one the test kit finds
//! (`redis-server` on `PATH`, or `REDLOCK_SERVER_BIN`), as tests/kinds_servers.rs does; CI
//! runs this file on Redis 7.0 and on Valkey 9.1. The never-prunes mutant body, sent in
//! QUEUE_ACQUIRE's place, must break it where a place lapsed, and do what its own rows say.

use std::io::Write as _;

use redlock_contract::{
    BROKEN_BY_NEVER_PRUNES, QUEUE_CONTRACT, QUEUE_NEVER_PRUNES_CONTRACT, QueueCase, QueueReport,
    QueueScript, QueueScripts, RealNode, Send, run_queue_rows,
};
use redlock_testkit::Cluster;

/// A run of `rows` with `scripts` on a fresh node of the found server.
fn run_on_a_server(scripts: QueueScripts, rows: &[QueueCase]) -> QueueReport {
    let cluster = Cluster::start(1).expect("start a node");
    let mut node = RealNode::connect(cluster.node(0), cluster.server()).expect("connect");
    run_queue_rows(&mut node, scripts, rows).expect("the node answers")
}

#[test]
fn every_queue_script_does_what_the_table_says() {
    let report = run_on_a_server(QueueScripts::SPEC, QUEUE_CONTRACT);
    say("", &report);
    assert!(report.is_clean(), "{report}");
    assert_eq!(report.passed.len(), 3 * QUEUE_CONTRACT.len(), "{report}");
}

/// QUEUE_ACQUIRE_NEVER_PRUNES keeps a lapsed place at the head.
#[test]
fn a_queue_that_never_prunes_breaks_the_contract() {
    let report = run_on_a_server(QueueScripts::NEVER_PRUNES, QUEUE_CONTRACT);
    say("negative control (failures expected): ", &report);
    assert!(report.failed_by(Send::ShaFlushed).is_empty(), "{report}");
    assert_eq!(
        report.failed_by(Send::Sha),
        report.failed_by(Send::Eval),
        "{report}"
    );
    let broken = BROKEN_BY_NEVER_PRUNES.map(|name| (QueueScript::Acquire, name));
    assert_eq!(report.failed_by(Send::Sha), broken, "{report}");
    let mutant = run_on_a_server(QueueScripts::NEVER_PRUNES, QUEUE_NEVER_PRUNES_CONTRACT);
    say("", &mutant);
    assert!(mutant.is_clean(), "{mutant}");
}

/// Prints past the test harness's capture; `note` marks a negative control.
fn say(note: &str, report: &QueueReport) {
    let _ = write!(std::io::stderr(), "{note}{report}");
}

/// Every queue row can fail on a real server: each of its wrong copies (one expectation
/// changed) fails where the script runs (`EVALSHA`, `EVAL`).
#[test]
fn a_wrong_queue_row_breaks_the_contract() {
    let cluster = Cluster::start(1).expect("start a node");
    let mut node = RealNode::connect(cluster.node(0), cluster.server()).expect("connect");
    for row in QUEUE_CONTRACT {
        for wrong in row.wrong_copies() {
            let report = run_queue_rows(&mut node, QueueScripts::SPEC, &[wrong]).expect("answers");
            let sends: Vec<Send> = report.failed.iter().map(|(_, send, _)| *send).collect();
            assert_eq!(sends, [Send::Sha, Send::Eval], "{wrong:?} passed: {report}");
        }
    }
}
