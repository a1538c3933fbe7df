//! The contract on a real server: the one the test kit finds (`redis-server` on `PATH`, or
//! `REDLOCK_SERVER_BIN`). CI runs this file on Redis 7.0 and on Valkey 9.1 (`cargo xtask
//! test --valkey PATH`). Each report goes to stderr uncaptured, so the cases a server skips
//! show in every run.

use std::io::Write as _;

use redlock_contract::{
    FENCE_CONTRACT, FenceForm, FenceState, Form, KeyState, RealNode, Report, Scripts, Send,
    SimNode, State, Target, UNCHECKED_EXTEND_SCRIPT, UNCHECKED_RAISE_FENCE_SCRIPT, run, run_rows,
};
use redlock_core::NO_FLOOR_FENCED_ACQUIRE_SCRIPT;
use redlock_sim::ServerProfile;
use redlock_testkit::{Cluster, Reply};

#[test]
fn every_command_does_what_the_table_says() {
    let cluster = Cluster::start(1).expect("start a node");
    let mut node = RealNode::connect(cluster.node(0), cluster.server()).expect("connect");
    let report = run(&mut node, Scripts::CORE).expect("the node answers");
    say("", &report);
    assert!(report.is_clean(), "{report}");
    // The core's own commands run on every server; only native ones may be skipped.
    assert!(report.skipped.iter().all(|(c, _)| c.form.since().is_some()));
    assert!(report.passed.len() >= 35, "{report}");
    assert_eq!(report.fence_passed.len(), FENCE_CONTRACT.len(), "{report}");
    assert!(report.fence_skipped.is_empty(), "{report}");
}

/// The negative control: the same table, with the extend script's token check removed,
/// fails on a real server, and exactly where the check matters.
#[test]
fn an_extend_script_without_its_token_check_breaks_the_contract() {
    let cluster = Cluster::start(1).expect("start a node");
    let mut node = RealNode::connect(cluster.node(0), cluster.server()).expect("connect");
    let scripts = Scripts {
        extend: &UNCHECKED_EXTEND_SCRIPT,
        ..Scripts::CORE
    };
    let report = run(&mut node, scripts).expect("the node answers");
    say("negative control (failures expected): ", &report);
    let failed: Vec<(Form, State)> = report
        .failed
        .iter()
        .map(|(c, _)| (c.form, c.state))
        .collect();
    let (sha, eval) = (Form::Extend(Send::Sha), Form::Extend(Send::Eval));
    assert_eq!(
        failed,
        [
            // It extends another client's key, and puts a ttl on a list.
            (sha, State::Another),
            (sha, State::WrongType),
            (eval, State::Another),
            (eval, State::WrongType),
        ],
        "{report}"
    );
    let (case, why) = &report.failed[0];
    assert_eq!(case.state, State::Another);
    assert!(why.contains("reply :1, expected :0"), "{why}");
    assert!(report.fence_failed.is_empty(), "{report}");
}

/// The fencing rows' negative control: a fence write-back without its token check fails on
/// a real server exactly where K is not ours, so a write-back that could raise the counter
/// for a lock already lost (and be counted toward the token) cannot pass.
#[test]
fn a_write_back_without_its_token_check_breaks_the_contract() {
    let cluster = Cluster::start(1).expect("start a node");
    let mut node = RealNode::connect(cluster.node(0), cluster.server()).expect("connect");
    let scripts = Scripts {
        raise_fence: &UNCHECKED_RAISE_FENCE_SCRIPT,
        ..Scripts::CORE
    };
    let report = run(&mut node, scripts).expect("the node answers");
    say("negative control (failures expected): ", &report);
    assert!(report.failed.is_empty(), "{report}");
    let failed: Vec<(FenceForm, KeyState)> = report
        .fence_failed
        .iter()
        .map(|(c, _)| (c.form, c.key))
        .collect();
    let raise = FenceForm::Raise(Send::Sha);
    assert_eq!(
        failed,
        [
            (raise, KeyState::Absent),
            (raise, KeyState::Another),
            (raise, KeyState::WrongType)
        ],
        "{report}"
    );
    assert!(report.fence_failed[0].1.contains("reply :1, expected :0"));
}

/// The no-floor fenced acquire (the core's own mutant script) fails on a real server
/// exactly where the floor matters: F missing or behind it.
#[test]
fn a_fenced_acquire_without_its_floor_breaks_the_contract() {
    let cluster = Cluster::start(1).expect("start a node");
    let mut node = RealNode::connect(cluster.node(0), cluster.server()).expect("connect");
    let scripts = Scripts {
        fenced_acquire: &NO_FLOOR_FENCED_ACQUIRE_SCRIPT,
        ..Scripts::CORE
    };
    let report = run(&mut node, scripts).expect("the node answers");
    say("negative control (failures expected): ", &report);
    assert!(report.failed.is_empty(), "{report}");
    let failed: Vec<(FenceForm, FenceState)> = report
        .fence_failed
        .iter()
        .map(|(c, _)| (c.form, c.fence))
        .collect();
    let (sha, eval) = (
        FenceForm::Acquire(Send::Sha),
        FenceForm::Acquire(Send::Eval),
    );
    assert_eq!(
        failed,
        [
            (sha, FenceState::Absent),
            (sha, FenceState::Behind),
            (eval, FenceState::Behind)
        ],
        "{report}"
    );
    assert!(report.fence_failed[0].1.contains("reply :1,"), "{report}");
}

/// Every fencing row can fail on a real server: each of its wrong copies (one expectation
/// changed) is reported failed, alone.
#[test]
fn a_wrong_fencing_row_breaks_the_contract() {
    let cluster = Cluster::start(1).expect("start a node");
    let mut node = RealNode::connect(cluster.node(0), cluster.server()).expect("connect");
    for row in FENCE_CONTRACT {
        for wrong in row.wrong_copies() {
            let report = run_rows(&mut node, Scripts::CORE, &[], &[wrong]).expect("answers");
            assert!(report.fence_passed.is_empty(), "{wrong:?} passed: {report}");
            assert_eq!(report.fence_failed.len(), 1, "{report}");
        }
    }
}

/// The simulation's profile of this server answers `HELLO` and the native commands (had or
/// not) word for word as the server does; only the connection id may differ.
#[test]
fn the_simulated_profile_of_this_server_answers_as_it_does() {
    let cluster = Cluster::start(1).expect("start a node");
    let mut node = RealNode::connect(cluster.node(0), cluster.server()).expect("connect");
    let version = node.version().expect("a real server has a version");
    let Some(profile) = ServerProfile::ALL.into_iter().find(|p| {
        p.hello == redlock_sim::HelloAnswer::Reply
            && SimNode::with_profile(*p).version() == Some(version)
    }) else {
        let _ = writeln!(
            std::io::stderr(),
            "no simulated profile of {}",
            node.describe()
        );
        return;
    };
    let mut sim = SimNode::with_profile(profile);
    let commands: &[&[&str]] = &[
        &["HELLO"],
        &["DELIFEQ", "k", "v"],
        &["DELEX", "k", "IFEQ", "v"],
        &["SET", "k", "v", "IFEQ", "v", "PX", "100"],
        &["SET", "k", "v", "IFEQ", "v", "NX"],
        &["delifeq", "k"],
        &["RPUSH", "l", "x"],
        &["DELIFEQ", "l", "v"],
        &["SET", "l", "v", "IFEQ", "v", "PX", "100"],
        // The fencing counter's sorted-set commands, errors included.
        &["ZADD", "z", "GT", "10", "n"],
        &["ZADD", "z", "GT", "5", "n"],
        &["ZADD", "z", "gt", "CH", "20", "n"],
        &["ZINCRBY", "z", "1", "n"],
        &["ZINCRBY", "z", "1882849641776000", "m"],
        &["ZSCORE", "z", "n"],
        &["ZSCORE", "z", "m"],
        &["ZSCORE", "z", "x"],
        &["ZADD", "z", "XX", "CH", "1", "m", "2", "x"],
        &["ZADD", "z", "GT", "INCR", "-1", "m"],
        &["ZADD", "z", "inf", "i"],
        &["ZINCRBY", "z", "-inf", "i"],
        &["ZSCORE", "z", "i"],
        &["ZADD", "z", "GT", "LT", "1", "n"],
        &["ZADD", "z", "NX", "XX", "1", "n"],
        &["ZADD", "z", "INCR", "1", "n", "2", "m"],
        &["ZADD", "z", "GT", "1", "n", "m"],
        &["ZADD", "z", "GT", "1e400", "n"],
        &["ZADD", "z", "nan", "n"],
        &["ZINCRBY", "z", "x", "n"],
        &["ZADD", "z", "1"],
        &["ZINCRBY", "l", "1", "n"],
        &["ZSCORE", "l", "n"],
        &["ZADD", "l", "GT", "1", "n"],
        &["SET", "s", "5"],
        &["ZINCRBY", "s", "1", "n"],
        &["GET", "z"],
        &["DEL", "l", "z", "s"],
    ];
    for args in commands {
        let real = without_id(node.call(args).expect("the server answers"));
        let model = without_id(sim.call(args).expect("the model answers"));
        assert_eq!(model, real, "{args:?} on {}", node.describe());
    }
}

/// A `HELLO` reply with its connection id zeroed; any other reply as it is.
fn without_id(reply: Reply) -> Reply {
    match reply {
        Reply::Array(mut fields) => {
            if let Some(i) = fields
                .iter()
                .position(|f| *f == Reply::Bulk(b"id".to_vec()))
            {
                fields[i + 1] = Reply::Int(0);
            }
            Reply::Array(fields)
        }
        other => other,
    }
}

/// Prints past the test harness's capture, so a skip is never silent; `note` marks a
/// negative control, whose failures are expected.
fn say(note: &str, report: &Report) {
    let _ = write!(std::io::stderr(), "{note}{report}");
}
