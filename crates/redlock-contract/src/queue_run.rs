//! Running the waiters' queue rows (queue.rs) against any [`Target`], as kinds_run.rs runs
//! the kinds rows (whose setting up, reading back and comparing of the keys it shares): set
//! each key up, load or flush the script, listen on R's release channel where the row says,
//! send, read every key back, compare the reply, the keys, and each message heard (its
//! channel and its payload). One [`QueueReport`] per run.

use redlock_core::RELEASE_CHANNEL_PREFIX;
use redlock_sim::script::sha1_hex;
use redlock_testkit::Reply;

use crate::kinds::Life;
use crate::kinds_run::{Seen, call, delete, put, read_key, time_ms, within};
use crate::queue::{QUEUE_CONTRACT, QueueCase, QueueKey, QueueReply, QueueScript, Ticket};
use crate::rows::{Row, RowsReport, run_each};
use crate::table::Send;
use crate::target::Target;

/// The bodies a queue run sends: [`QueueScripts::SPEC`], or a mutant in a script's place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueScripts {
    /// QUEUE_ACQUIRE.
    pub acquire: &'static str,
    /// QUEUE_LEAVE.
    pub leave: &'static str,
    /// QUEUE_RELEASE.
    pub release: &'static str,
}

impl QueueScripts {
    /// The bodies the core sends (its waiters/mod.rs).
    pub const SPEC: Self = Self {
        acquire: redlock_core::QUEUE_ACQUIRE_SCRIPT.body,
        leave: redlock_core::QUEUE_LEAVE_SCRIPT.body,
        release: redlock_core::QUEUE_RELEASE_SCRIPT.body,
    };

    /// QUEUE_ACQUIRE_NEVER_PRUNES (the core's negative control, as the simulation copied
    /// it) in QUEUE_ACQUIRE's place: a lapsed place is never pruned.
    pub const NEVER_PRUNES: Self = Self {
        acquire: redlock_sim::kinds::queue::QUEUE_ACQUIRE_NEVER_PRUNES_SOURCE,
        ..Self::SPEC
    };

    /// The body sent where the core sends `script`.
    pub fn body(&self, script: QueueScript) -> &'static str {
        match script {
            QueueScript::Acquire => self.acquire,
            QueueScript::Leave => self.leave,
            QueueScript::Release => self.release,
        }
    }
}

/// What a queue run found.
pub type QueueReport = RowsReport<QueueCase>;

impl Row for QueueCase {
    type Script = QueueScript;

    fn script(&self) -> QueueScript {
        self.script
    }

    fn name(&self) -> &'static str {
        self.name
    }
}

/// Runs the whole queue table on `target`, sending `scripts`' bodies.
pub fn run_queue(target: &mut dyn Target, scripts: QueueScripts) -> Result<QueueReport, String> {
    run_queue_rows(target, scripts, QUEUE_CONTRACT)
}

/// Runs `rows` on `target`; `Err` only when the target itself fails.
pub fn run_queue_rows(
    target: &mut dyn Target,
    scripts: QueueScripts,
    rows: &[QueueCase],
) -> Result<QueueReport, String> {
    run_each(target, "queue", rows, |target, case, send, i| {
        run_case(target, case, send, i, scripts.body(case.script))
    })
}

/// Runs one row one way; `Ok(Some(why))` if it broke the contract.
fn run_case(
    target: &mut dyn Target,
    case: &QueueCase,
    send: Send,
    i: usize,
    body: &'static str,
) -> Result<Option<String>, String> {
    let prefix = format!("queue-contract:{i}:");
    let names = case.script.keys().iter();
    let keys: Vec<String> = names.map(|k| format!("{prefix}{k}")).collect();
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    delete(target, &keys)?;
    if let Some(why) = set_up(target, &keys, case, (send, body))? {
        delete(target, &keys)?;
        return Ok(Some(why));
    }
    let channel = format!("{RELEASE_CHANNEL_PREFIX}{prefix}r");
    if case.heard {
        target.listen(std::slice::from_ref(&channel))?;
    }
    let sha = sha1_hex(body);
    let mut command = match send {
        Send::Eval => vec!["EVAL", body],
        Send::Sha | Send::ShaFlushed => vec!["EVALSHA", sha.as_str()],
    };
    command.push("3");
    command.extend(&keys);
    command.extend(case.argv);
    let reply = call(target, &command)?;
    let heard = if case.heard {
        target.heard()?
    } else {
        Vec::new()
    };
    let now = time_ms(target)?;
    let members = candidates(case);
    let mut seen = Vec::new();
    for key in &keys {
        seen.push(read_key(target, key, &members)?);
    }
    delete(target, &keys)?;
    let done = Outcome { reply, seen, heard };
    let why = compare(case, send, &done, (&channel, now));
    Ok((!why.is_empty()).then(|| why.join("; ")))
}

/// What a target did with one row sent one way.
struct Outcome {
    /// The script's reply.
    reply: Reply,
    /// Each key, read back afterwards.
    seen: Vec<Seen>,
    /// Each message the listener heard: its channel and payload.
    heard: Vec<(String, Vec<u8>)>,
}

/// What differs between what a row sent one way must come to (the table's row, or under
/// `EVALSHA` on an empty cache `-NOSCRIPT`, nothing changed and nothing heard) and what the
/// target did: the reply, each key read back at `now`, the messages heard on `channel`.
fn compare(
    case: &QueueCase,
    send: Send,
    done: &Outcome,
    (channel, now): (&str, i64),
) -> Vec<String> {
    let Outcome { reply, seen, heard } = done;
    let flushed = send == Send::ShaFlushed;
    let mut why = Vec::new();
    let reply_ok = match (flushed, case.reply, reply) {
        (true, _, Reply::Error(e)) => e.starts_with("NOSCRIPT"),
        (false, QueueReply::Int(n), Reply::Int(m)) => n == *m,
        (false, QueueReply::Error(start), Reply::Error(e)) => e.starts_with(start),
        (false, QueueReply::Queued(rank, ticket), Reply::Array(items)) => match &items[..] {
            [Reply::Int(r), Reply::Int(t)] => *r == rank && ticket_is(ticket, *t as f64, now),
            _ => false,
        },
        (false, QueueReply::Released(outcome, rank), Reply::Array(items)) => {
            items[..] == [Reply::Int(outcome), Reply::Int(rank)]
        }
        _ => false,
    };
    if !reply_ok {
        let want = if flushed { "NOSCRIPT" } else { "the row's" };
        why.push(format!("reply {reply}, expected {want} {:?}", case.reply));
    }
    let after = if flushed { case.before } else { case.after };
    for ((name, want), seen) in case.script.keys().iter().zip(after).zip(seen) {
        if !admits(seen, *want, now) {
            why.push(format!("{name}: {seen}, expected {want:?}"));
        }
    }
    let said = if flushed || !case.heard {
        &[][..]
    } else {
        case.said
    };
    let want: Vec<(String, Vec<u8>)> = said
        .iter()
        .map(|m| (channel.to_owned(), m.as_bytes().to_vec()))
        .collect();
    if *heard != want {
        why.push(format!("heard {heard:?}, expected {want:?}"));
    }
    why
}

/// Puts the row's keys in their states before (tickets as given or the node's `now`,
/// deadlines from `now`), then loads the script (`EVALSHA`) or empties the cache;
/// `Ok(Some(why))` if the target would not.
fn set_up(
    target: &mut dyn Target,
    keys: &[&str],
    case: &QueueCase,
    (send, body): (Send, &'static str),
) -> Result<Option<String>, String> {
    let now = time_ms(target)?;
    for (key, state) in keys.iter().zip(case.before) {
        let unready = match (state.as_kinds(), *state) {
            (Some(kinds), _) => put(target, key, kinds, now)?,
            (None, QueueKey::Tickets(members, life)) => {
                put_tickets(target, key, members, life, now)?
            }
            (None, _) => None,
        };
        if let Some(why) = unready {
            return Ok(Some(format!("setting up {key}: {why}")));
        }
    }
    if send != Send::Sha {
        let reply = call(target, &["SCRIPT", "FLUSH"])?;
        return Ok((reply != Reply::Simple("OK".into())).then(|| format!("SCRIPT FLUSH: {reply}")));
    }
    let reply = call(target, &["SCRIPT", "LOAD", body])?;
    let want = Reply::Bulk(sha1_hex(body).into_bytes());
    Ok((reply != want).then(|| format!("loading the script: SCRIPT LOAD answered {reply}")))
}

/// Writes a queue of `members` at `key` (absent before), expiring after `life`.
fn put_tickets(
    target: &mut dyn Target,
    key: &str,
    members: &[(&str, Ticket)],
    life: Life,
    now: i64,
) -> Result<Option<String>, String> {
    for (member, ticket) in members {
        let score = match ticket {
            Ticket::Given(n) => n.to_string(),
            Ticket::Node => now.to_string(),
        };
        let reply = call(target, &["ZADD", key, &score, member])?;
        if reply != Reply::Int(1) {
            return Ok(Some(format!(
                "`ZADD {key} {score} {member}` answered {reply}"
            )));
        }
    }
    if let Some(ms) = life.ms().filter(|ms| *ms > 0) {
        let reply = call(target, &["PEXPIRE", key, &ms.to_string()])?;
        if reply != Reply::Int(1) {
            return Ok(Some(format!("`PEXPIRE {key} {ms}` answered {reply}")));
        }
    }
    Ok(None)
}

/// Every waiter a key may hold after the row: those of its states and the row's own id.
fn candidates(case: &QueueCase) -> Vec<&'static str> {
    let states = case.before.iter().chain(case.after);
    let mut members: Vec<&'static str> = states.flat_map(|s| s.members()).collect();
    members.extend(case.script.ids(case.argv));
    members.sort_unstable();
    members.dedup();
    members
}

/// Whether a key read back at the node's `now` (ms) is `want`.
fn admits(seen: &Seen, want: QueueKey, now: i64) -> bool {
    if let Some(kinds) = want.as_kinds() {
        return seen.admits(kinds, now);
    }
    let (QueueKey::Tickets(members, life), Seen::Set(scores, pttl)) = (want, seen) else {
        return false;
    };
    let member = |m: &str| members.iter().find(|(name, _)| *name == m);
    let each = scores.iter().all(|(m, score)| match (member(m), score) {
        (None, None) => true,
        (Some((_, ticket)), Some(s)) => ticket_is(*ticket, *s, now),
        _ => false,
    });
    each && within(life, *pttl)
}

/// Whether `score`, read back at the node's `now`, is `ticket`: the number given, or a
/// `now` of the node's at most [`SLACK_MS`](crate::SLACK_MS) before.
fn ticket_is(ticket: Ticket, score: f64, now: i64) -> bool {
    match ticket {
        Ticket::Given(n) => score == n as f64,
        Ticket::Node => within(Life::Now, score as i64 - now),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ticket_is_its_number_or_a_recent_now() {
        let now = 1_700_000_000_000;
        assert!(ticket_is(Ticket::Given(7), 7.0, now));
        assert!(!ticket_is(Ticket::Given(7), 8.0, now));
        assert!(ticket_is(Ticket::Node, (now - 3) as f64, now));
        assert!(
            !ticket_is(Ticket::Node, (now + 1) as f64, now),
            "not from later"
        );
        assert!(!ticket_is(Ticket::Node, 7.0, now));
    }

    #[test]
    fn the_candidates_are_every_waiter_named_and_the_caller() {
        let case = QUEUE_CONTRACT[2];
        assert_eq!(candidates(&case), ["me", "w1"]);
    }
}
