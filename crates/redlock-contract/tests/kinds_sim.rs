//! The kinds contract (kinds.rs) on the simulation's node model, as Redis 7 and as Valkey
//! 9; its mutant scripts' models caught; and the table agreeing with the simulation's own
//! rows (`redlock_sim::kinds::*_CASES`) wherever they share a row.

use std::io::Write as _;

use redlock_contract::{
    KINDS_CONTRACT, KindsKey, KindsReply, KindsReport, KindsScript, KindsScripts, Life,
    READ_EXTEND_RESURRECTS, SEM_ACQUIRE_OFF_BY_ONE, Send, SimNode, WRITE_ACQUIRE_IGNORES_READERS,
    run_kinds, run_kinds_rows,
};
use redlock_sim::ServerProfile;
use redlock_sim::kinds::case::{Expect, State, Table};
use redlock_sim::kinds::{MUTANT_MODELS, multi, rw, semaphore};

/// The profiles the kinds run as: the oldest and the newest server CI runs.
const PROFILES: [ServerProfile; 2] = [ServerProfile::REDIS_7_0, ServerProfile::VALKEY_9_1];

#[test]
fn the_node_model_does_what_the_kinds_table_says() {
    for profile in PROFILES {
        let report = run_kinds(&mut SimNode::with_profile(profile), KindsScripts::SPEC)
            .expect("a simulated node answers");
        say("", &report);
        assert!(report.is_clean(), "{report}");
        assert_eq!(report.passed.len(), 3 * KINDS_CONTRACT.len(), "{report}");
    }
}

/// The model with the mutants' models registered, on which a mutant body runs.
fn mutant_node(profile: ServerProfile) -> SimNode {
    let mut scripts = redlock_sim::Scripts::default();
    scripts.register_all(MUTANT_MODELS);
    SimNode::with_scripts(profile, scripts)
}

/// What a run with `scripts` failed, as `(script, row)`, once per row (the two sends that
/// run the script, `EVALSHA` and `EVAL`, fail alike; `EVALSHA` on an empty cache never).
fn broken(scripts: KindsScripts) -> Vec<(KindsScript, &'static str)> {
    let mut rows = Vec::new();
    for profile in PROFILES {
        let report = run_kinds(&mut mutant_node(profile), scripts).expect("answers");
        say("negative control (failures expected): ", &report);
        let failed = report.failed_rows();
        assert!(failed.iter().all(|(_, _, send)| *send != Send::ShaFlushed));
        let (sha, eval): (Vec<_>, Vec<_>) = failed.iter().partition(|r| r.2 == Send::Sha);
        let names = |v: Vec<&(KindsScript, &'static str, Send)>| {
            v.into_iter().map(|r| (r.0, r.1)).collect::<Vec<_>>()
        };
        let (sha, eval) = (names(sha), names(eval));
        assert_eq!(sha, eval, "{report}");
        rows = sha;
    }
    rows
}

#[test]
fn the_kinds_mutants_break_the_contract_on_the_model() {
    let off_by_one = KindsScripts {
        sem_acquire: SEM_ACQUIRE_OFF_BY_ONE,
        ..KindsScripts::SPEC
    };
    assert_eq!(
        broken(off_by_one),
        [(KindsScript::SemAcquire, "two of two taken")]
    );
    let ignores_readers = KindsScripts {
        write_acquire: WRITE_ACQUIRE_IGNORES_READERS,
        ..KindsScripts::SPEC
    };
    assert_eq!(
        broken(ignores_readers),
        [
            (KindsScript::WriteAcquire, "a live reader: wait"),
            (KindsScript::WriteAcquire, "a live reader, no patience"),
        ]
    );
    let resurrects = KindsScripts {
        read_extend: READ_EXTEND_RESURRECTS,
        ..KindsScripts::SPEC
    };
    assert_eq!(
        broken(resurrects),
        [
            (KindsScript::ReadExtend, "ours expired: not re-created"),
            (KindsScript::ReadExtend, "not a reader"),
            (KindsScript::ReadExtend, "no readers"),
        ]
    );
}

/// Every row of the simulation's tables has a row of the same name here, and they agree:
/// the same reply, the same keys before and after (type, value, members, which deadlines
/// have passed), the same subscribers and announcements. Only the time scale differs.
#[test]
fn the_kinds_table_agrees_with_the_simulations_rows() {
    let tables = [
        (KindsScript::MultiAcquire, multi::MULTI_ACQUIRE_CASES),
        (KindsScript::MultiRelease, multi::MULTI_RELEASE_CASES),
        (KindsScript::MultiExtend, multi::MULTI_EXTEND_CASES),
        (KindsScript::ReadAcquire, rw::READ_ACQUIRE_CASES),
        (KindsScript::WriteAcquire, rw::WRITE_ACQUIRE_CASES),
        (KindsScript::WriteAbandon, rw::WRITE_ABANDON_CASES),
        (KindsScript::WriteRelease, rw::WRITE_RELEASE_CASES),
        (KindsScript::ReadRelease, rw::READ_RELEASE_CASES),
        (KindsScript::ReadExtend, rw::READ_EXTEND_CASES),
        (KindsScript::SemAcquire, semaphore::SEM_ACQUIRE_CASES),
        (KindsScript::SemRelease, semaphore::SEM_RELEASE_CASES),
        (KindsScript::SemExtend, semaphore::SEM_EXTEND_CASES),
    ];
    let mut shared = 0;
    for (script, table) in tables {
        assert_eq!(table.source, KindsScripts::SPEC.body(script), "{script}");
        assert_eq!(table.keys, script.keys(), "{script}");
        shared += agree(script, &table);
    }
    let _ = writeln!(
        std::io::stderr(),
        "{shared} of {} kinds rows mirror the simulation's",
        KINDS_CONTRACT.len()
    );
}

/// Checks each of the simulation's rows of `script` against the row of the same name;
/// how many there were.
fn agree(script: KindsScript, table: &Table) -> usize {
    for sim in table.cases {
        let ours = KINDS_CONTRACT
            .iter()
            .find(|c| c.script == script && c.name == sim.name);
        let Some(ours) = ours else {
            panic!("{script}: no row mirrors the simulation's {:?}", sim.name)
        };
        let what = format!("{script}: {}", sim.name);
        let reply = match (sim.reply, ours.reply) {
            (Expect::Int(a), KindsReply::Int(b)) => a == b,
            (Expect::Error(a), KindsReply::Error(b) | KindsReply::Returned(b)) => a == b,
            _ => false,
        };
        assert!(reply, "{what}: {:?} and {:?}", sim.reply, ours.reply);
        for (sim_key, key) in sim.before.iter().zip(ours.before) {
            assert_eq!(shape(*sim_key), shape_of(*key), "{what}: before");
        }
        for (sim_key, key) in sim.after.iter().zip(ours.after) {
            assert_eq!(shape(*sim_key), shape_of(*key), "{what}: after");
        }
        assert_eq!(sim.heard, ours.heard, "{what}: subscribers");
        assert_eq!(sim.published, ours.published, "{what}: announced");
    }
    table.cases.len()
}

/// A key as both tables can say it: its type and value, its members and whether each one's
/// deadline has passed, and whether it expires; not when.
#[derive(Debug, PartialEq, Eq)]
enum Shape {
    Absent,
    Str(&'static str, bool),
    Holders(Vec<(&'static str, bool)>, bool),
    List,
}

fn shape(state: State) -> Shape {
    match state {
        State::Absent => Shape::Absent,
        State::Str(v, ttl) => Shape::Str(v, ttl.is_some()),
        State::Deadlines(members, ttl) => {
            let mut live: Vec<_> = members.iter().map(|(m, at)| (*m, *at > 0)).collect();
            live.sort_unstable();
            Shape::Holders(live, ttl.is_some())
        }
        State::List => Shape::List,
        State::Tickets(..) => unreachable!("a queue's tickets: queue_sim.rs compares those"),
    }
}

fn shape_of(key: KindsKey) -> Shape {
    let expires = |life: Life| life != Life::Forever;
    match key {
        KindsKey::Absent => Shape::Absent,
        KindsKey::Str(v, life) => Shape::Str(v, expires(life)),
        KindsKey::Holders(members, life) => {
            let live = |at: Life| at.ms().is_some_and(|ms| ms > 0);
            let mut members: Vec<_> = members.iter().map(|(m, at)| (*m, live(*at))).collect();
            members.sort_unstable();
            Shape::Holders(members, expires(life))
        }
        KindsKey::List => Shape::List,
    }
}

/// Prints past the test harness's capture; `note` marks a negative control.
fn say(note: &str, report: &KindsReport) {
    let _ = write!(std::io::stderr(), "{note}{report}");
}

/// Every kinds row can fail on the model: each of its wrong copies (one expectation
/// changed) fails where the script runs (`EVALSHA`, `EVAL`).
#[test]
fn a_wrong_kinds_row_breaks_the_contract() {
    let mut node = SimNode::new();
    let mut copies = 0;
    for row in KINDS_CONTRACT {
        for wrong in row.wrong_copies() {
            let report = run_kinds_rows(&mut node, KindsScripts::SPEC, &[wrong]).expect("answers");
            let sends: Vec<Send> = report.failed.iter().map(|(_, send, _)| *send).collect();
            assert_eq!(sends, [Send::Sha, Send::Eval], "{wrong:?} passed: {report}");
            copies += 1;
        }
    }
    assert!(copies >= 2 * KINDS_CONTRACT.len(), "{copies}");
}
