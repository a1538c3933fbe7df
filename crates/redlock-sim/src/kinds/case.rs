//! The rows that say what each kinds script does: the state of its keys before, the call,
//! the reply, the state after and what it announced. The tables are plain data (`const`)
//! so that the contract crate can run the same rows on real servers; [`check`] runs one
//! row against a model here.
//!
//! Times in a row are relative to the node's clock when the script runs: a member's
//! deadline is `now + offset` milliseconds of the node's `TIME` (an offset `<= 0` is an
//! expired member, still stored), a key's time to live is in milliseconds from then.

use bytes::Bytes;

use crate::keyspace::{Keys, Keyspace, WALL_EPOCH_NANOS};
use crate::lua::{ScriptFn, release_channel};
use crate::resp::ServerReply;

/// One key's state before or after a row.
#[derive(Debug, Clone, Copy)]
pub enum State {
    /// No such key.
    Absent,
    /// A string with its value and time to live in ms (`None`: persistent).
    Str(&'static str, Option<u64>),
    /// A sorted set of holders: each member with its deadline as an offset in ms from the
    /// node's `now`, and the set's own time to live (`None`: persistent). Never empty.
    Deadlines(&'static [(&'static str, i64)], Option<u64>),
    /// A waiters' queue (`R:queue`): each waiter's id with its ticket, and the set's own
    /// time to live (`None`: persistent). Never empty.
    Tickets(&'static [(&'static str, Ticket)], Option<u64>),
    /// A list: a key of a type no kinds script writes.
    List,
}

/// A waiter's ticket: the score that orders it in a queue (`R:queue`), and what
/// QUEUE_ACQUIRE answers beside the rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ticket {
    /// This number: a ticket given (`ARGV[4]`) or set up before the row.
    Given(u64),
    /// The node's `now` in ms when the script ran (a first place's ticket); [`NOW_MS`] here.
    Node,
}

/// What a row's call answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// An integer reply.
    Int(i64),
    /// An error reply starting with this text.
    Error(&'static str),
    /// QUEUE_ACQUIRE's place: the array `{rank, ticket}` (rank 0-based).
    Queued(i64, Ticket),
    /// QUEUE_RELEASE's array `{outcome, rank}`: the release's outcome (2, 1, 0, -1) and the
    /// next call's 0-based rank (-1: none placed).
    Released(i64, i64),
}

/// One row: the keys' states before (one per key of the table, in order), the `ARGV`, the
/// reply and the states after.
#[derive(Debug, Clone, Copy)]
pub struct Case {
    /// What the row shows.
    pub name: &'static str,
    /// Each key's state before the call.
    pub before: &'static [State],
    /// The script's `ARGV`.
    pub argv: &'static [&'static str],
    /// The reply.
    pub reply: Expect,
    /// Each key's state after the call.
    pub after: &'static [State],
    /// Resources whose release channel (`redlock:released:` .. R) has one subscriber
    /// during the call (a `PUBLISH` there counts 1).
    pub heard: &'static [&'static str],
    /// The resources on whose release channel the call published, in order.
    pub published: &'static [&'static str],
    /// What each publication said, in order, where it said something (a queue's
    /// `next:<id>`); empty: every one was a release's empty message.
    pub said: &'static [&'static str],
}

impl Case {
    /// A row that publishes nothing and has no subscribers.
    pub const fn new(
        name: &'static str,
        (before, argv): (&'static [State], &'static [&'static str]),
        reply: Expect,
        after: &'static [State],
    ) -> Self {
        Self {
            name,
            before,
            argv,
            reply,
            after,
            heard: &[],
            published: &[],
            said: &[],
        }
    }

    /// The same row, its publications saying `messages`, in order.
    pub const fn saying(self, messages: &'static [&'static str]) -> Self {
        Self {
            said: messages,
            ..self
        }
    }

    /// The same row, announcing the release of `resources`.
    pub const fn publishing(self, resources: &'static [&'static str]) -> Self {
        Self {
            published: resources,
            ..self
        }
    }

    /// The same row, with one subscriber to the release channel of each of `resources`.
    pub const fn heard(self, resources: &'static [&'static str]) -> Self {
        Self {
            heard: resources,
            ..self
        }
    }
}

/// One script's rows: its source, its `KEYS` (the same for every row) and the rows.
#[derive(Debug, Clone, Copy)]
pub struct Table {
    /// The Lua body the rows are about.
    pub source: &'static str,
    /// The script's `KEYS`.
    pub keys: &'static [&'static str],
    /// The rows.
    pub cases: &'static [Case],
}

/// The node's local clock during a row (expiry is measured on it).
const LOCAL_NANOS: u64 = 1_000_000_000;
/// The node's wall clock during a row: 1,000.25 ms past [`WALL_EPOCH_NANOS`], so `now`
/// (whole milliseconds, rounded down as the scripts do) is [`NOW_MS`].
const WALL_NANOS: u64 = WALL_EPOCH_NANOS + 1_000_250_000;
/// The scripts' `now` during a row, in ms of the node's `TIME`.
pub const NOW_MS: i64 = 1_700_000_001_000;

/// Runs every row of `table` against `run`; the first row that differs, described.
pub fn check(table: &Table, run: ScriptFn) -> Result<(), String> {
    table.cases.iter().try_for_each(|case| {
        check_case(table.keys, case, run).map_err(|e| format!("{}: {e}", case.name))
    })
}

/// Runs one row on an empty node whose keys are set to the row's `before`.
fn check_case(names: &[&'static str], case: &Case, run: ScriptFn) -> Result<(), String> {
    let bytes = |s: &&'static str| Bytes::from_static(s.as_bytes());
    let keys_of: Vec<Bytes> = names.iter().map(bytes).collect();
    let argv: Vec<Bytes> = case.argv.iter().map(bytes).collect();
    if case.before.len() != names.len() || case.after.len() != names.len() {
        return Err("a state per key, before and after".to_owned());
    }
    let mut space = Keyspace::new();
    let mut keys = space.view_at(0, LOCAL_NANOS, WALL_NANOS);
    for (key, state) in keys_of.iter().zip(case.before) {
        put(&mut keys, key, *state);
    }
    let channel = |r: &&str| release_channel(r.as_bytes());
    keys.set_receivers(case.heard.iter().map(|r| (channel(r), 1)).collect());
    let reply = run(&mut keys, &keys_of, &argv);
    let answered = match (&reply, case.reply) {
        (ServerReply::Int(n), Expect::Int(m)) => *n == m,
        (ServerReply::Error(e), Expect::Error(prefix)) => e.starts_with(prefix),
        (ServerReply::Array(items), Expect::Queued(rank, ticket)) => {
            items[..]
                == [
                    ServerReply::Int(rank),
                    ServerReply::Int(score(ticket) as i64),
                ]
        }
        (ServerReply::Array(items), Expect::Released(outcome, rank)) => {
            items[..] == [ServerReply::Int(outcome), ServerReply::Int(rank)]
        }
        _ => false,
    };
    if !answered {
        return Err(format!("replied {reply:?}, not {:?}", case.reply));
    }
    for (key, state) in keys_of.iter().zip(case.after) {
        look(&mut keys, key, *state)?;
    }
    let (published, said): (Vec<Bytes>, Vec<Bytes>) = keys.take_published().into_iter().unzip();
    let expected: Vec<Bytes> = case.published.iter().map(channel).collect();
    if published != expected {
        return Err(format!("published on {published:?}, not {expected:?}"));
    }
    let saying = |s: &&'static str| Bytes::from_static(s.as_bytes());
    let expected: Vec<Bytes> = match case.said {
        [] => vec![Bytes::new(); said.len()],
        messages => messages.iter().map(saying).collect(),
    };
    if said != expected {
        return Err(format!("said {said:?}, not {expected:?}"));
    }
    Ok(())
}

/// A ticket's score during a row.
fn score(ticket: Ticket) -> f64 {
    match ticket {
        Ticket::Given(n) => n as f64,
        Ticket::Node => NOW_MS as f64,
    }
}

/// Writes `state` at `key`.
fn put(keys: &mut Keys<'_>, key: &Bytes, state: State) {
    let ms = |ttl: Option<u64>| ttl.map(std::time::Duration::from_millis);
    match state {
        State::Absent => {}
        State::Str(value, ttl) => keys.set(key, Bytes::from_static(value.as_bytes()), ms(ttl)),
        State::Deadlines(members, ttl) => {
            for (member, offset) in members {
                let score = (NOW_MS + offset) as f64;
                let member = Bytes::from_static(member.as_bytes());
                keys.zset_update(key, &member, |_| Some(score))
                    .expect("a new set");
            }
            if let Some(ttl) = ms(ttl) {
                keys.pexpire(key, ttl);
            }
        }
        State::Tickets(members, ttl) => {
            for (member, ticket) in members {
                let member = Bytes::from_static(member.as_bytes());
                keys.zset_update(key, &member, |_| Some(score(*ticket)))
                    .expect("a new set");
            }
            if let Some(ttl) = ms(ttl) {
                keys.pexpire(key, ttl);
            }
        }
        State::List => {
            keys.rpush(key, &[Bytes::from_static(b"x")])
                .expect("a new list");
        }
    }
}

/// Whether `key` is in `state`; what differs, if not.
fn look(keys: &mut Keys<'_>, key: &Bytes, state: State) -> Result<(), String> {
    let pttl = |ttl: Option<u64>| ttl.map_or(-1, |ms| i64::try_from(ms).unwrap_or(i64::MAX));
    let seen = keys.pttl_reply(key);
    let (same, ttl) = match state {
        State::Absent => (!keys.exists(key), -2),
        State::Str(value, ttl) => {
            let value = Bytes::from_static(value.as_bytes());
            (keys.get(key) == Ok(Some(value)), pttl(ttl))
        }
        State::Deadlines(members, ttl) => {
            let mut same = keys.zcard(key) == Ok(members.len());
            for (member, offset) in members {
                let score = keys.zscore(key, &Bytes::from_static(member.as_bytes()));
                same &= score == Ok(Some((NOW_MS + offset) as f64));
            }
            (same, pttl(ttl))
        }
        State::Tickets(members, ttl) => {
            let mut same = keys.zcard(key) == Ok(members.len());
            for (member, ticket) in members {
                let seen = keys.zscore(key, &Bytes::from_static(member.as_bytes()));
                same &= seen == Ok(Some(score(*ticket)));
            }
            (same, pttl(ttl))
        }
        State::List => (keys.get(key).is_err() && keys.zcard(key).is_err(), -1),
    };
    if same && seen == ttl {
        return Ok(());
    }
    let value = (keys.get(key), keys.zcard(key));
    Err(format!(
        "{key:?} is not {state:?}: value {value:?}, pttl {seen}"
    ))
}
