//! The waiters' queue contract (queue.rs) on the simulation's node model, as Redis 7 and as
//! Valkey 9; the never-prunes mutant's model caught; and the table agreeing with the
//! simulation's own rows (`redlock_sim::kinds::queue::*_CASES`), row by row.

use std::io::Write as _;

use redlock_contract::{
    BROKEN_BY_NEVER_PRUNES, Life, QUEUE_CONTRACT, QUEUE_NEVER_PRUNES_CONTRACT, QueueCase, QueueKey,
    QueueReply, QueueReport, QueueScript, QueueScripts, Send, SimNode, run_queue, run_queue_rows,
};
use redlock_sim::ServerProfile;
use redlock_sim::kinds::case::{Expect, State, Table, Ticket};
use redlock_sim::kinds::{MUTANT_MODELS, queue, queue_release};

/// The profiles the queue runs as: the oldest and the newest server CI runs.
const PROFILES: [ServerProfile; 2] = [ServerProfile::REDIS_7_0, ServerProfile::VALKEY_9_1];

/// The model with the mutants' models registered, on which a mutant body runs.
fn mutant_node(profile: ServerProfile) -> SimNode {
    let mut scripts = redlock_sim::Scripts::default();
    scripts.register_all(MUTANT_MODELS);
    SimNode::with_scripts(profile, scripts)
}

#[test]
fn the_node_model_does_what_the_queue_table_says() {
    for profile in PROFILES {
        let report = run_queue(&mut SimNode::with_profile(profile), QueueScripts::SPEC)
            .expect("a simulated node answers");
        say("", &report);
        assert!(report.is_clean(), "{report}");
        assert_eq!(report.passed.len(), 3 * QUEUE_CONTRACT.len(), "{report}");
    }
}

/// The never-prunes body keeps a lapsed place: the rows that need the pruning fail (each
/// where the script runs, by `EVALSHA` and `EVAL`), and the mutant's own rows pass.
#[test]
fn the_never_prunes_mutant_breaks_the_queue_contract_on_the_model() {
    for profile in PROFILES {
        let report =
            run_queue(&mut mutant_node(profile), QueueScripts::NEVER_PRUNES).expect("answers");
        say("negative control (failures expected): ", &report);
        assert!(report.failed_by(Send::ShaFlushed).is_empty(), "{report}");
        assert_eq!(
            report.failed_by(Send::Sha),
            report.failed_by(Send::Eval),
            "{report}"
        );
        let broken = BROKEN_BY_NEVER_PRUNES.map(|name| (QueueScript::Acquire, name));
        assert_eq!(report.failed_by(Send::Sha), broken, "{report}");
        let mutant = run_queue_rows(
            &mut mutant_node(profile),
            QueueScripts::NEVER_PRUNES,
            QUEUE_NEVER_PRUNES_CONTRACT,
        )
        .expect("answers");
        assert!(mutant.is_clean(), "{mutant}");
        let spec = run_queue_rows(
            &mut SimNode::with_profile(profile),
            QueueScripts::SPEC,
            QUEUE_NEVER_PRUNES_CONTRACT,
        )
        .expect("answers");
        assert_eq!(
            spec.failed.len(),
            2 * QUEUE_NEVER_PRUNES_CONTRACT.len(),
            "{spec}"
        );
    }
}

/// Every row of the simulation's queue tables has a row of the same name here, and they
/// agree: the same reply, the same keys before and after (value, waiters, tickets, which
/// deadlines have passed, whether each key expires), the same subscriber and messages.
#[test]
fn the_queue_table_agrees_with_the_simulations_rows() {
    let tables = [
        (
            QueueScript::Acquire,
            queue::QUEUE_ACQUIRE_CASES,
            QUEUE_CONTRACT,
        ),
        (QueueScript::Leave, queue::QUEUE_LEAVE_CASES, QUEUE_CONTRACT),
        (
            QueueScript::Release,
            queue_release::QUEUE_RELEASE_CASES,
            QUEUE_CONTRACT,
        ),
        (
            QueueScript::Acquire,
            queue::QUEUE_ACQUIRE_NEVER_PRUNES_CASES,
            QUEUE_NEVER_PRUNES_CONTRACT,
        ),
    ];
    let mut shared = 0;
    for (script, table, ours) in tables {
        assert_eq!(table.keys, script.keys(), "{script}");
        shared += agree(script, &table, ours);
    }
    assert_eq!(
        queue::QUEUE_ACQUIRE_CASES.source,
        QueueScripts::SPEC.acquire
    );
    assert_eq!(queue::QUEUE_LEAVE_CASES.source, QueueScripts::SPEC.leave);
    assert_eq!(
        queue_release::QUEUE_RELEASE_CASES.source,
        QueueScripts::SPEC.release
    );
    assert_eq!(
        queue::QUEUE_ACQUIRE_NEVER_PRUNES_CASES.source,
        QueueScripts::NEVER_PRUNES.acquire
    );
    let total = QUEUE_CONTRACT.len() + QUEUE_NEVER_PRUNES_CONTRACT.len();
    assert_eq!(
        shared, total,
        "every queue row mirrors one of the simulation's"
    );
}

/// Checks each of the simulation's rows of `script` against the row of the same name in
/// `rows`; how many there were.
fn agree(script: QueueScript, table: &Table, rows: &[QueueCase]) -> usize {
    for sim in table.cases {
        let ours = rows
            .iter()
            .find(|c| c.script == script && c.name == sim.name);
        let Some(ours) = ours else {
            panic!("{script}: no row mirrors the simulation's {:?}", sim.name)
        };
        let what = format!("{script}: {}", sim.name);
        let reply = match (sim.reply, ours.reply) {
            (Expect::Int(a), QueueReply::Int(b)) => a == b,
            (Expect::Error(a), QueueReply::Error(b)) => a == b,
            (Expect::Queued(a, s), QueueReply::Queued(b, t)) => a == b && s == t,
            (Expect::Released(a, r), QueueReply::Released(b, s)) => a == b && r == s,
            _ => false,
        };
        assert!(reply, "{what}: {:?} and {:?}", sim.reply, ours.reply);
        for (sim_key, key) in sim.before.iter().zip(ours.before) {
            assert_eq!(shape(*sim_key), shape_of(*key), "{what}: before");
        }
        for (sim_key, key) in sim.after.iter().zip(ours.after) {
            assert_eq!(shape(*sim_key), shape_of(*key), "{what}: after");
        }
        assert_eq!(sim.heard == ["r"], ours.heard, "{what}: a subscriber");
        // Every publication is on R's channel; the simulation's row says its messages, or
        // leaves them empty where each was a release's empty message.
        assert!(sim.published.iter().all(|r| *r == "r"), "{what}: published");
        let said: Vec<&str> = match sim.said {
            [] => vec![""; sim.published.len()],
            said => said.to_vec(),
        };
        assert_eq!(said, ours.said, "{what}: said");
    }
    table.cases.len()
}

/// A key as both tables can say it: its value, its waiters with their tickets or whether
/// each one's deadline has passed, and whether it expires; not when.
#[derive(Debug, PartialEq, Eq)]
enum Shape {
    Absent,
    Str(&'static str, bool),
    Tickets(Vec<(&'static str, Ticket)>, bool),
    Until(Vec<(&'static str, bool)>, bool),
}

fn shape(state: State) -> Shape {
    match state {
        State::Absent => Shape::Absent,
        State::Str(v, ttl) => Shape::Str(v, ttl.is_some()),
        State::Tickets(members, ttl) => {
            let mut members = members.to_vec();
            members.sort_unstable_by_key(|(m, _)| *m);
            Shape::Tickets(members, ttl.is_some())
        }
        State::Deadlines(members, ttl) => {
            let mut live: Vec<_> = members.iter().map(|(m, at)| (*m, *at > 0)).collect();
            live.sort_unstable();
            Shape::Until(live, ttl.is_some())
        }
        State::List => panic!("no queue row has a list"),
    }
}

fn shape_of(key: QueueKey) -> Shape {
    let expires = |life: Life| life != Life::Forever;
    match key {
        QueueKey::Absent => Shape::Absent,
        QueueKey::Str(v, life) => Shape::Str(v, expires(life)),
        QueueKey::Tickets(members, life) => {
            let mut members = members.to_vec();
            members.sort_unstable_by_key(|(m, _)| *m);
            Shape::Tickets(members, expires(life))
        }
        QueueKey::Until(members, life) => {
            let live = |at: Life| at.ms().is_some_and(|ms| ms > 0);
            let mut members: Vec<_> = members.iter().map(|(m, at)| (*m, live(*at))).collect();
            members.sort_unstable();
            Shape::Until(members, expires(life))
        }
    }
}

/// Prints past the test harness's capture; `note` marks a negative control.
fn say(note: &str, report: &QueueReport) {
    let _ = write!(std::io::stderr(), "{note}{report}");
}

/// Every queue row can fail on the model: each of its wrong copies (one expectation
/// changed) fails where the script runs (`EVALSHA`, `EVAL`).
#[test]
fn a_wrong_queue_row_breaks_the_contract() {
    let mut node = SimNode::new();
    let mut copies = 0;
    for row in QUEUE_CONTRACT {
        for wrong in row.wrong_copies() {
            let report = run_queue_rows(&mut node, QueueScripts::SPEC, &[wrong]).expect("answers");
            let sends: Vec<Send> = report.failed.iter().map(|(_, send, _)| *send).collect();
            assert_eq!(sends, [Send::Sha, Send::Eval], "{wrong:?} passed: {report}");
            copies += 1;
        }
    }
    assert!(copies >= 2 * QUEUE_CONTRACT.len(), "{copies}");
}
