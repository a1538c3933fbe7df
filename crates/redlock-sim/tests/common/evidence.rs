//! Evidence for a violation under late delivery: replays the run with the log on and picks
//! out the late releases (run by a node on a half-closed connection) that deleted the first
//! holder's key during its hold, and says whether an earlier lock call wrote them.

use redlock_core::RELEASE_SCRIPT;
use redlock_sim::{Report, Scenario, Sim};

/// A late release that deleted a holder's key.
pub struct LateRelease {
    /// The node's log line for it.
    pub line: String,
    /// The connection it came on lost its client side before the holder's lock call started,
    /// so an earlier call wrote it (else it may also be an earlier attempt of the same call).
    pub from_earlier_call: bool,
}

/// The late releases behind `report`'s violation, found by replaying `scenario` (the one
/// that produced `report`) with the log on. Empty without a violation or a supplied token.
pub fn late_releases(scenario: Scenario, report: &Report) -> Vec<LateRelease> {
    let Some(v) = &report.violation else {
        return Vec::new();
    };
    let holder = &v.first;
    let record = report
        .checker
        .ops()
        .iter()
        .find(|r| (r.client, r.op) == (holder.client, holder.op));
    let Some(token) = record.and_then(|r| r.token.as_ref()) else {
        return Vec::new();
    };
    let limit = scenario.time_limit;
    let mut sim = Sim::new(scenario);
    sim.enable_log();
    sim.run_until(limit, u64::MAX);
    let log = sim.log();
    let (start, end) = (millis(holder.start), millis(v.second.start));
    let c = holder.client;
    let call_started = log
        .iter()
        .rev()
        .filter(|l| l.contains(&format!(" client {c} calls Acquire")))
        .map(|l| time_of(l))
        .find(|t| *t <= start)
        .unwrap_or(0.0);
    // A release that deleted the holder's key: `<sha or body> 1 <resource> <token> ->
    // Int(1)`, or `Int(2)` when a waiter was subscribed to its release.
    let args = format!(
        " 1 {} {}",
        shown(&String::from_utf8_lossy(holder.resource.as_bytes())),
        shown(&String::from_utf8_lossy(token.as_bytes())),
    );
    let tails = [format!("{args} -> Int(1)"), format!("{args} -> Int(2)")];
    let script = [
        format!("EVALSHA {}", shown(RELEASE_SCRIPT.sha1)),
        format!("EVAL {}", shown(RELEASE_SCRIPT.body)),
    ];
    let mut found = Vec::new();
    for line in log {
        let Some(orphan) = orphan_of(line, c) else {
            continue;
        };
        let t = time_of(line);
        let Some(tail) = tails.iter().find(|tail| line.ends_with(tail.as_str())) else {
            continue;
        };
        if t < start || t > end {
            continue;
        }
        if !script
            .iter()
            .any(|s| line.contains(&format!(": {s}{tail}")))
        {
            continue;
        }
        let died = log
            .iter()
            .find(|l| l.contains(&format!("half-closed: orphan {orphan},")))
            .map_or(f64::MAX, |l| time_of(l));
        found.push(LateRelease {
            line: line.clone(),
            from_earlier_call: died < call_started,
        });
    }
    found
}

/// The orphan id of a log line `<time> node <n> <- orphan <id> of client <c>: ...`.
fn orphan_of(line: &str, client: usize) -> Option<usize> {
    let rest = line.split(" <- orphan ").nth(1)?;
    let (id, rest) = rest.split_once(' ')?;
    rest.starts_with(&format!("of client {client}: "))
        .then(|| id.parse().ok())
        .flatten()
}

/// The true time of a log line (`<ms>ms ...`), in milliseconds.
fn time_of(line: &str) -> f64 {
    let head = line.split("ms ").next().unwrap_or_default();
    head.parse().unwrap_or(f64::MAX)
}

fn millis(t: redlock_sim::SimTime) -> f64 {
    t.as_nanos() as f64 / 1e6
}

/// An argument as the simulation's log shows it (long ones cut to 20 characters).
fn shown(arg: &str) -> String {
    if arg.len() > 24 {
        format!("{}..", &arg[..20])
    } else {
        arg.to_owned()
    }
}
