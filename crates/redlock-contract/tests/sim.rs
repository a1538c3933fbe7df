//! The contract on the simulation's node model: the same table as on the real servers.

use std::io::Write as _;

use bytes::Bytes;
use redlock_contract::{
    CONTRACT, Case, FENCE_CONTRACT, Family, FenceCase, FenceForm, FenceState, Form, KeyState,
    Report, Scripts, Send, SimNode, State, Target, UNCHECKED_EXTEND_SCRIPT, run, run_rows,
};
use redlock_sim::profile::NodeMutant;
use redlock_sim::script::{FENCED_ACQUIRE_SOURCE, RAISE_FENCE_SOURCE, fenced_acquire_with};
use redlock_sim::{Keys, ServerProfile, ServerReply};
use redlock_testkit::Reply;

#[test]
fn the_node_model_does_what_the_table_says() {
    let report = run(&mut SimNode::new(), Scripts::CORE).expect("a simulated node answers");
    say("", &report);
    assert!(report.is_clean(), "{report}");
    assert!(report.skipped.iter().all(|(c, _)| c.form.since().is_some()));
    assert!(report.passed.len() >= 35, "{report}");
    assert_eq!(report.fence_passed.len(), FENCE_CONTRACT.len(), "{report}");
}

/// Every profile of the model runs what its server has, as the table says, and refuses the
/// rest as that server does; together they run every row, the native forms included.
#[test]
fn every_profile_keeps_the_contract_and_together_they_run_every_row() {
    let mut ran: Vec<Case> = Vec::new();
    let mut fence_ran: Vec<FenceCase> = Vec::new();
    for profile in ServerProfile::ALL {
        let report = run(&mut SimNode::with_profile(profile), Scripts::CORE).expect("answers");
        say("", &report);
        assert!(report.is_clean(), "{report}");
        for (case, why) in &report.skipped {
            assert!(case.form.since().is_some(), "{report}");
            let refused = why.contains("ERR unknown command") || why.contains("ERR syntax error");
            assert!(
                refused,
                "{} refused otherwise than a server: {why}",
                case.form
            );
        }
        for (case, why) in &report.fence_skipped {
            assert_eq!(case.form, FenceForm::ZaddGt, "{report}");
            assert!(why.ends_with("ERR syntax error"), "{why}");
            assert!(!profile.has_zadd_gt(), "{report}");
        }
        ran.extend(report.passed.iter().copied());
        fence_ran.extend(report.fence_passed.iter().copied());
    }
    let missing: Vec<String> = CONTRACT
        .iter()
        .filter(|c| !ran.contains(c))
        .map(|c| format!("{} × {}", c.form, c.state))
        .collect();
    assert!(missing.is_empty(), "rows no profile ran: {missing:?}");
    assert!(FENCE_CONTRACT.iter().all(|c| fence_ran.contains(c)));
}

/// Negative controls of the native commands: a node model whose `SET IFEQ` creates a missing
/// key, or whose `DELIFEQ` deletes without comparing, breaks exactly the rows it should.
#[test]
fn a_node_model_with_a_wrong_native_command_breaks_the_contract() {
    let broken = |mutant| {
        let profile = ServerProfile::VALKEY_9_1.with_mutant(mutant);
        let report = run(&mut SimNode::with_profile(profile), Scripts::CORE).expect("answers");
        say("negative control (failures expected): ", &report);
        report
            .failed
            .iter()
            .map(|(c, _)| (c.form, c.state))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        broken(NodeMutant::SetIfEqCreates),
        [(Form::SetIfEqPx, State::Absent)]
    );
    assert_eq!(
        broken(NodeMutant::DelIfEqUnchecked),
        [
            (Form::DelIfEq, State::Another),
            (Form::DelIfEq, State::WrongType)
        ]
    );
}

/// The model runs only the script text it was written from: an extend script without its
/// token check is unknown to it (`SCRIPT LOAD` and `EVAL` fail), so the simulation can no
/// longer pass with a script whose meaning it does not model. With the cache flushed the
/// node answers `-NOSCRIPT` to any SHA1, which the table expects.
#[test]
fn the_node_model_does_not_run_an_extend_script_it_was_not_written_from() {
    let scripts = Scripts {
        extend: &UNCHECKED_EXTEND_SCRIPT,
        ..Scripts::CORE
    };
    let report = run(&mut SimNode::new(), scripts).expect("a simulated node answers");
    say("negative control (failures expected): ", &report);
    let mut forms: Vec<Form> = report.failed.iter().map(|(c, _)| c.form).collect();
    forms.dedup();
    assert_eq!(
        forms,
        [Form::Extend(Send::Sha), Form::Extend(Send::Eval)],
        "{report}"
    );
    assert_eq!(report.failed.len(), 10, "every state of both, {report}");
}

/// A target that lacks what its version should have fails, rather than skipping quietly:
/// the simulated node (no native commands) passed off as Valkey 9.1 contradicts the marks of
/// `DELIFEQ` and `SET IFEQ`, and as Redis 7.0 contradicts none.
#[test]
fn a_server_that_lacks_what_its_version_should_have_is_reported() {
    let mut valkey = Pretend(SimNode::new(), (Family::Valkey, 9, 1));
    let report = run(&mut valkey, Scripts::CORE).expect("a simulated node answers");
    assert!(!report.is_clean());
    assert!(report.failed.is_empty(), "{report}");
    let wrong: Vec<&str> = report
        .disagreements
        .iter()
        .map(|d| &d[..d.find(':').unwrap_or(0)])
        .collect();
    assert_eq!(wrong, ["DELIFEQ", "SET IFEQ PX"], "{report}");
    let mut redis = Pretend(SimNode::new(), (Family::Redis, 7, 0));
    let report = run(&mut redis, Scripts::CORE).expect("a simulated node answers");
    assert!(report.is_clean(), "{report}");
}

/// A target with a version it does not have.
struct Pretend(SimNode, (Family, u32, u32));

impl Target for Pretend {
    fn describe(&self) -> String {
        format!(
            "{} as {} {}.{}",
            self.0.describe(),
            self.1.0,
            self.1.1,
            self.1.2
        )
    }

    fn version(&self) -> Option<(Family, u32, u32)> {
        Some(self.1)
    }

    fn call(&mut self, args: &[&str]) -> Result<Reply, String> {
        self.0.call(args)
    }
}

/// Prints past the test harness's capture, so a skip is never silent; `note` marks a
/// negative control, whose failures are expected.
fn say(note: &str, report: &Report) {
    let _ = write!(std::io::stderr(), "{note}{report}");
}

/// Negative controls of the fencing models: a node whose fenced acquire has no floor, or
/// whose write-back raises F without checking K, breaks exactly the rows it should.
#[test]
fn a_node_model_with_a_wrong_fencing_script_breaks_the_contract() {
    let broken = |source: &'static str, model: redlock_sim::ScriptFn| {
        let mut scripts = redlock_sim::Scripts::default();
        scripts.register(source, model);
        let mut node = SimNode::with_scripts(ServerProfile::REDIS_7_0, scripts);
        let report = run(&mut node, Scripts::CORE).expect("answers");
        say("negative control (failures expected): ", &report);
        assert!(report.failed.is_empty(), "{report}");
        let rows = report.fence_failed.iter();
        rows.map(|(c, _)| (c.form, c.key, c.fence))
            .collect::<Vec<_>>()
    };
    let (acq, acq_eval) = (
        FenceForm::Acquire(Send::Sha),
        FenceForm::Acquire(Send::Eval),
    );
    assert_eq!(
        broken(FENCED_ACQUIRE_SOURCE, no_floor),
        [
            (acq, KeyState::Absent, FenceState::Absent),
            (acq, KeyState::Absent, FenceState::Behind),
            (acq_eval, KeyState::Absent, FenceState::Behind),
        ]
    );
    let raise = FenceForm::Raise(Send::Sha);
    assert_eq!(
        broken(RAISE_FENCE_SOURCE, unchecked_raise),
        [
            (raise, KeyState::Absent, FenceState::Behind),
            (raise, KeyState::Another, FenceState::Behind),
            (raise, KeyState::WrongType, FenceState::Behind),
        ]
    );
}

/// Every fencing row can fail on the model: each of its wrong copies (one expectation
/// changed) is reported failed, alone.
#[test]
fn a_wrong_fencing_row_breaks_the_contract() {
    let mut node = SimNode::new();
    for row in FENCE_CONTRACT {
        for wrong in row.wrong_copies() {
            let report = run_rows(&mut node, Scripts::CORE, &[], &[wrong]).expect("answers");
            assert!(report.fence_passed.is_empty(), "{wrong:?} passed: {report}");
            assert_eq!(report.fence_failed.len(), 1, "{report}");
        }
    }
}

/// The fenced acquire without its floor: F + 1 only.
fn no_floor(keys: &mut Keys<'_>, k: &[Bytes], argv: &[Bytes]) -> ServerReply {
    fenced_acquire_with(keys, k, argv, false)
}

/// The write-back without its token check: raises `n` of F whoever holds K.
fn unchecked_raise(keys: &mut Keys<'_>, k: &[Bytes], argv: &[Bytes]) -> ServerReply {
    let ([_, fence, ..], [_, value, ..]) = (k, argv) else {
        return ServerReply::error("ERR wrong number of arguments");
    };
    let target = std::str::from_utf8(value)
        .ok()
        .and_then(|v| v.parse::<f64>().ok());
    let Some(target) = target else {
        return ServerReply::error("ERR value is not a valid float");
    };
    let raised = keys.zset_update(fence, &Bytes::from_static(b"n"), |n| {
        n.is_none_or(|n| n < target).then_some(target)
    });
    match raised {
        Ok(_) => ServerReply::Int(1),
        Err(e) => e.into(),
    }
}
