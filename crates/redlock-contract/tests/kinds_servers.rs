//! The kinds contract (kinds.rs) on a real server: the one the test kit finds
//! (`redis-server` on `PATH`, or `REDLOCK_SERVER_BIN`), as tests/servers.rs does; CI runs
//! this file on Redis 7.0 and on Valkey 9.1. The three mutant bodies of the design, each
//! sent in its script's place, must break it.

use std::io::Write as _;

use redlock_contract::{
    KINDS_CONTRACT, KindsReport, KindsScript, KindsScripts, READ_EXTEND_RESURRECTS, RealNode,
    SEM_ACQUIRE_OFF_BY_ONE, Send, WRITE_ACQUIRE_IGNORES_READERS, run_kinds, run_kinds_rows,
};
use redlock_testkit::Cluster;

/// A run of `scripts` on a fresh node of the found server.
fn run_on_a_server(scripts: KindsScripts) -> KindsReport {
    let cluster = Cluster::start(1).expect("start a node");
    let mut node = RealNode::connect(cluster.node(0), cluster.server()).expect("connect");
    run_kinds(&mut node, scripts).expect("the node answers")
}

#[test]
fn every_kinds_script_does_what_the_table_says() {
    let report = run_on_a_server(KindsScripts::SPEC);
    say("", &report);
    assert!(report.is_clean(), "{report}");
    assert_eq!(report.passed.len(), 3 * KINDS_CONTRACT.len(), "{report}");
}

/// What a run with `scripts` failed, as `(script, row)`, once per row: `EVALSHA` and `EVAL`
/// fail alike, `EVALSHA` on an empty cache never.
fn broken(scripts: KindsScripts) -> Vec<(KindsScript, &'static str)> {
    let report = run_on_a_server(scripts);
    say("negative control (failures expected): ", &report);
    let failed = report.failed_rows();
    assert!(failed.iter().all(|(_, _, send)| *send != Send::ShaFlushed));
    let pick = |want: Send| {
        let rows = failed.iter().filter(|r| r.2 == want);
        rows.map(|r| (r.0, r.1)).collect::<Vec<_>>()
    };
    assert_eq!(pick(Send::Sha), pick(Send::Eval), "{report}");
    pick(Send::Sha)
}

/// SEM_ACQUIRE_OFF_BY_ONE lets a third holder in where k = 2 are live.
#[test]
fn a_semaphore_acquire_off_by_one_breaks_the_contract() {
    let scripts = KindsScripts {
        sem_acquire: SEM_ACQUIRE_OFF_BY_ONE,
        ..KindsScripts::SPEC
    };
    assert_eq!(
        broken(scripts),
        [(KindsScript::SemAcquire, "two of two taken")]
    );
}

/// WRITE_ACQUIRE_IGNORES_READERS lets a writer in beside a live reader.
#[test]
fn a_writer_that_ignores_readers_breaks_the_contract() {
    let scripts = KindsScripts {
        write_acquire: WRITE_ACQUIRE_IGNORES_READERS,
        ..KindsScripts::SPEC
    };
    assert_eq!(
        broken(scripts),
        [
            (KindsScript::WriteAcquire, "a live reader: wait"),
            (KindsScript::WriteAcquire, "a live reader, no patience"),
        ]
    );
}

/// READ_EXTEND_RESURRECTS re-creates a slot that expired, or never was.
#[test]
fn a_read_extend_that_resurrects_breaks_the_contract() {
    let scripts = KindsScripts {
        read_extend: READ_EXTEND_RESURRECTS,
        ..KindsScripts::SPEC
    };
    assert_eq!(
        broken(scripts),
        [
            (KindsScript::ReadExtend, "ours expired: not re-created"),
            (KindsScript::ReadExtend, "not a reader"),
            (KindsScript::ReadExtend, "no readers"),
        ]
    );
}

/// Prints past the test harness's capture; `note` marks a negative control.
fn say(note: &str, report: &KindsReport) {
    let _ = write!(std::io::stderr(), "{note}{report}");
}

/// Every kinds row can fail on a real server: each of its wrong copies (one expectation
/// changed) fails where the script runs (`EVALSHA`, `EVAL`).
#[test]
fn a_wrong_kinds_row_breaks_the_contract() {
    let cluster = Cluster::start(1).expect("start a node");
    let mut node = RealNode::connect(cluster.node(0), cluster.server()).expect("connect");
    for row in KINDS_CONTRACT {
        for wrong in row.wrong_copies() {
            let report = run_kinds_rows(&mut node, KindsScripts::SPEC, &[wrong]).expect("answers");
            let sends: Vec<Send> = report.failed.iter().map(|(_, send, _)| *send).collect();
            assert_eq!(sends, [Send::Sha, Send::Eval], "{wrong:?} passed: {report}");
        }
    }
}
