//! The fencing contract (docs/safety.md, "Fencing tokens"): the fenced acquire and the fence write-back scripts,
//! and the script-free acquire's sorted-set commands, on every state of the lock's key K
//! and, where it matters, of its counter F (a sorted set whose member `n` is the count),
//! with the reply and the effect on both keys, run against any [`Target`].
//!
//! | command | K | F | reply | K after | F after |
//! |---|---|---|---|---|---|
//! | fenced acquire | absent | absent, behind | the floor + 1 | set | = reply |
//! | fenced acquire | absent | ahead | ahead + 1 | set | = reply |
//! | fenced acquire | absent | a string, a list | WRONGTYPE | set | = |
//! | fenced acquire | ours, another, wrong type, expiring | behind | nil | = | = |
//! | write-back | ours, expiring | absent, behind | 1 | = | raised |
//! | write-back | ours | ahead | 1 | = | = |
//! | write-back | ours | a string, a list | WRONGTYPE | = | = |
//! | write-back | absent, another | behind | 0 | = | = |
//! | write-back | wrong type | behind | WRONGTYPE | = | = |
//! | either, flushed cache | ours | behind | NOSCRIPT | = | = |
//! | `ZADD F GT raised n` | absent | absent | 1 | = | raised |
//! | `ZADD F GT raised n` | absent | behind | 0 | = | raised |
//! | `ZADD F GT raised n` | absent | ahead | 0 | = | = |
//! | `ZADD F GT raised n` | absent | a string, a list | WRONGTYPE | = | = |
//! | `ZINCRBY F 1 n` | absent | absent, behind, ahead | F + 1 (bulk) | = | = reply |
//! | `ZINCRBY F 1 n` | absent | a string, a list | WRONGTYPE | = | = |
//!
//! "The floor" depends on the server's clock, so it is checked by range, never by timing:
//! at least `TIME` seconds * 2^20 read before the command, at most that of a read after.
//! "Behind" is a counter of 5, "ahead" one of 2^52 (above any floor until the year 2^32 s),
//! "raised" is the write-back's number, [`RAISE_TO`], above "behind" and below "ahead". A
//! string F is what the scripts before the sorted set left behind. `ZADD ... GT` is marked
//! as Redis 6.2 and later, every Valkey; a target without it is skipped, and must refuse it
//! with `ERR syntax error`, as the older servers' parser does.

use std::fmt;

use redlock_testkit::Reply as Seen;

use crate::form::{FenceCommands, FenceForm, RAISE_TO, Scripts};
use crate::table::{ANOTHER_TOKEN, Family, LONG_TTL_MS, SHORT_TTL_MS, Send, State, TTL_MS};
use crate::target::Target;

/// A counter behind every floor and below [`RAISE_TO`].
const BEHIND: u64 = 5;
/// A counter ahead of every floor (2^52).
const AHEAD: u64 = 1 << 52;
/// A second of server time in fencing counts.
const PER_SECOND: u64 = 1 << 20;
/// The scratch key the `ZADD ... GT` probe uses.
const PROBE_KEY: &str = "fence-contract:probe";

/// One row: a fencing command on K and F in given states, and what must come of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FenceCase {
    /// The command and how it goes out.
    pub form: FenceForm,
    /// K before.
    pub key: KeyState,
    /// F before.
    pub fence: FenceState,
    /// The reply.
    pub reply: FenceReply,
    /// Whether the command leaves K set to our token with its ttl (else unchanged).
    pub sets_key: bool,
    /// F afterwards.
    pub fence_after: FenceAfter,
}

/// K before a fencing command: the same states as the lock contract's keys.
pub type KeyState = State;

/// F before the command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FenceState {
    /// No counter.
    Absent,
    /// A sorted set whose `n` is 5: behind every floor and [`RAISE_TO`].
    Behind,
    /// A sorted set whose `n` is 2^52: ahead of every floor and of [`RAISE_TO`].
    Ahead,
    /// A string `5` (the counter the scripts before the sorted set kept).
    WrongString,
    /// A list.
    WrongList,
}

/// The reply a row expects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FenceReply {
    /// An integer within the floor's range (server `TIME` seconds * 2^20), plus one.
    FloorPlusOne,
    /// F's number before, plus one.
    AheadPlusOne,
    /// The null bulk string.
    Nil,
    /// This integer.
    Int(i64),
    /// A score: this integer, as a bulk string of plain digits.
    Score(u64),
    /// An error with this code.
    Error(&'static str),
}

/// F after the command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FenceAfter {
    /// As before.
    Unchanged,
    /// `n` is the reply's number, persistent.
    Reply,
    /// `n` is [`RAISE_TO`], persistent.
    Raised,
}

/// The fencing part of the contract: 32 rows, run with [`CONTRACT`](crate::CONTRACT) by
/// the runner (run.rs).
#[rustfmt::skip]
pub const FENCE_CONTRACT: &[FenceCase] = &[
    row(ACQ, KeyState::Absent,    FenceState::Absent,    FenceReply::FloorPlusOne, true,  FenceAfter::Reply),
    row(ACQ, KeyState::Absent,    FenceState::Behind,    FenceReply::FloorPlusOne, true,  FenceAfter::Reply),
    row(ACQ, KeyState::Absent,    FenceState::Ahead,     FenceReply::AheadPlusOne, true,  FenceAfter::Reply),
    // The SET NX has run when ZSCORE F fails: K is set, and the reply is the error.
    row(ACQ, KeyState::Absent,    FenceState::WrongString, WRONGTYPE,              true,  FenceAfter::Unchanged),
    row(ACQ, KeyState::Absent,    FenceState::WrongList, WRONGTYPE,                true,  FenceAfter::Unchanged),
    row(ACQ, KeyState::Ours,      FenceState::Behind,    FenceReply::Nil,          false, FenceAfter::Unchanged),
    row(ACQ, KeyState::Another,   FenceState::Behind,    FenceReply::Nil,          false, FenceAfter::Unchanged),
    row(ACQ, KeyState::WrongType, FenceState::Behind,    FenceReply::Nil,          false, FenceAfter::Unchanged),
    row(ACQ, KeyState::Expiring,  FenceState::Behind,    FenceReply::Nil,          false, FenceAfter::Unchanged),
    row(ACQ_EVAL, KeyState::Absent, FenceState::Behind,  FenceReply::FloorPlusOne, true,  FenceAfter::Reply),
    row(ACQ_FLUSHED, KeyState::Absent, FenceState::Behind, NOSCRIPT,               false, FenceAfter::Unchanged),
    row(RAISE, KeyState::Ours,    FenceState::Absent,    FenceReply::Int(1),       false, FenceAfter::Raised),
    row(RAISE, KeyState::Ours,    FenceState::Behind,    FenceReply::Int(1),       false, FenceAfter::Raised),
    row(RAISE, KeyState::Ours,    FenceState::Ahead,     FenceReply::Int(1),       false, FenceAfter::Unchanged),
    row(RAISE, KeyState::Ours,    FenceState::WrongString, WRONGTYPE,              false, FenceAfter::Unchanged),
    row(RAISE, KeyState::Ours,    FenceState::WrongList, WRONGTYPE,                false, FenceAfter::Unchanged),
    row(RAISE, KeyState::Expiring, FenceState::Behind,   FenceReply::Int(1),       false, FenceAfter::Raised),
    row(RAISE, KeyState::Absent,  FenceState::Behind,    FenceReply::Int(0),       false, FenceAfter::Unchanged),
    row(RAISE, KeyState::Another, FenceState::Behind,    FenceReply::Int(0),       false, FenceAfter::Unchanged),
    row(RAISE, KeyState::WrongType, FenceState::Behind,  WRONGTYPE,                false, FenceAfter::Unchanged),
    row(RAISE_EVAL, KeyState::Ours, FenceState::Behind,  FenceReply::Int(1),       false, FenceAfter::Raised),
    row(RAISE_FLUSHED, KeyState::Ours, FenceState::Behind, NOSCRIPT,               false, FenceAfter::Unchanged),
    row(ZADD, KeyState::Absent,   FenceState::Absent,    FenceReply::Int(1),       false, FenceAfter::Raised),
    row(ZADD, KeyState::Absent,   FenceState::Behind,    FenceReply::Int(0),       false, FenceAfter::Raised),
    row(ZADD, KeyState::Absent,   FenceState::Ahead,     FenceReply::Int(0),       false, FenceAfter::Unchanged),
    row(ZADD, KeyState::Absent,   FenceState::WrongString, WRONGTYPE,              false, FenceAfter::Unchanged),
    row(ZADD, KeyState::Absent,   FenceState::WrongList, WRONGTYPE,                false, FenceAfter::Unchanged),
    row(ZINCR, KeyState::Absent,  FenceState::Absent,    FenceReply::Score(1),     false, FenceAfter::Reply),
    row(ZINCR, KeyState::Absent,  FenceState::Behind,    FenceReply::Score(BEHIND + 1), false, FenceAfter::Reply),
    row(ZINCR, KeyState::Absent,  FenceState::Ahead,     FenceReply::Score(AHEAD + 1), false, FenceAfter::Reply),
    row(ZINCR, KeyState::Absent,  FenceState::WrongString, WRONGTYPE,              false, FenceAfter::Unchanged),
    row(ZINCR, KeyState::Absent,  FenceState::WrongList, WRONGTYPE,                false, FenceAfter::Unchanged),
];

impl FenceCase {
    /// Three wrong copies of this row, each with one expectation changed (the reply, whether
    /// K is set, F afterwards), every one of which a target that keeps the contract fails:
    /// the negative control that shows no fencing row passes whatever happens.
    pub fn wrong_copies(self) -> [Self; 3] {
        let reply = match self.reply {
            FenceReply::FloorPlusOne => FenceReply::AheadPlusOne,
            FenceReply::AheadPlusOne => FenceReply::FloorPlusOne,
            FenceReply::Nil => FenceReply::Int(0),
            FenceReply::Int(n) => FenceReply::Int(1 - n),
            FenceReply::Score(n) => FenceReply::Score(n + 1),
            FenceReply::Error(_) => FenceReply::Nil,
        };
        let fence_after = match self.fence_after {
            FenceAfter::Unchanged => FenceAfter::Raised,
            FenceAfter::Reply | FenceAfter::Raised => FenceAfter::Unchanged,
        };
        [
            Self { reply, ..self },
            Self {
                sets_key: !self.sets_key,
                ..self
            },
            Self {
                fence_after,
                ..self
            },
        ]
    }
}

impl FenceForm {
    /// Whether a server of `family` and version has this command: the scripts everywhere,
    /// `ZADD ... GT` from Redis 6.2 and on every Valkey, `ZINCRBY` everywhere.
    pub fn available_on(self, family: Family, major: u32, minor: u32) -> bool {
        match self {
            Self::ZaddGt => family == Family::Valkey || (major, minor) >= (6, 2),
            Self::Acquire(_) | Self::Raise(_) | Self::Zincrby => true,
        }
    }
}

const ACQ: FenceForm = FenceForm::Acquire(Send::Sha);
const ACQ_EVAL: FenceForm = FenceForm::Acquire(Send::Eval);
const ACQ_FLUSHED: FenceForm = FenceForm::Acquire(Send::ShaFlushed);
const RAISE: FenceForm = FenceForm::Raise(Send::Sha);
const RAISE_EVAL: FenceForm = FenceForm::Raise(Send::Eval);
const RAISE_FLUSHED: FenceForm = FenceForm::Raise(Send::ShaFlushed);
const ZADD: FenceForm = FenceForm::ZaddGt;
const ZINCR: FenceForm = FenceForm::Zincrby;
const WRONGTYPE: FenceReply = FenceReply::Error("WRONGTYPE");
const NOSCRIPT: FenceReply = FenceReply::Error("NOSCRIPT");

const fn row(
    form: FenceForm,
    key: KeyState,
    fence: FenceState,
    reply: FenceReply,
    sets_key: bool,
    fence_after: FenceAfter,
) -> FenceCase {
    FenceCase {
        form,
        key,
        fence,
        reply,
        sets_key,
        fence_after,
    }
}

/// Runs one row on `fence-contract:<i>` and its counter, sending `scripts` where the core
/// sends its fencing scripts; `Ok(Some(why))` if it broke the contract.
pub(crate) fn run_case(
    target: &mut dyn Target,
    case: FenceCase,
    i: usize,
    scripts: Scripts,
) -> Result<Option<String>, String> {
    let key = format!("fence-contract:{i}");
    let commands = FenceCommands::new(&key, i as u64);
    let (args, token) = commands.args(case.form, scripts);
    let fence = commands.fence_key().to_owned();
    call(target, &["DEL", &key, &fence])?;
    set_key(target, &key, case.key, token)?;
    set_fence(target, &fence, case.fence)?;
    if let Some(why) = set_cache(target, case.form, scripts)? {
        call(target, &["DEL", &key, &fence])?;
        return Ok(Some(why));
    }
    let before = time(target)?;
    let sent: Vec<&str> = args.iter().map(String::as_str).collect();
    let reply = call(target, &sent)?;
    let after = time(target)?;
    let seen = [
        call(target, &["GET", &key])?,
        call(target, &["PTTL", &key])?,
        call(target, &["ZSCORE", &fence, "n"])?,
        call(target, &["GET", &fence])?,
        call(target, &["PTTL", &fence])?,
    ];
    call(target, &["DEL", &key, &fence])?;
    let mut why = Vec::new();
    if !reply_matches(case.reply, &reply, (before, after)) {
        why.push(format!("reply {reply}, expected {}", case.reply));
    }
    if !key_matches(case, token, &seen[0], &seen[1]) {
        why.push(format!("K {} (PTTL {})", seen[0], seen[1]));
    }
    if !fence_matches(case, &reply, [&seen[2], &seen[3]], &seen[4]) {
        let (score, get, pttl) = (&seen[2], &seen[3], &seen[4]);
        why.push(format!("F: ZSCORE n {score}, GET {get} (PTTL {pttl})"));
    }
    Ok((!why.is_empty()).then(|| why.join("; ")))
}

/// Whether `target` has `ZADD ... GT`, asked on a scratch key, and how we know: only
/// `ERR syntax error` (the older servers' parser stopping at `GT`) counts as lacking it.
pub(crate) fn zadd_gt_support(target: &mut dyn Target) -> Result<(bool, String), String> {
    let probe = ["ZADD", PROBE_KEY, "GT", "1", "n"];
    call(target, &["DEL", PROBE_KEY])?;
    let reply = call(target, &probe)?;
    call(target, &["DEL", PROBE_KEY])?;
    let lacks = matches!(&reply, Seen::Error(e) if e == "ERR syntax error");
    Ok((!lacks, format!("`{}` answered {reply}", probe.join(" "))))
}

fn set_key(target: &mut dyn Target, key: &str, state: KeyState, token: &str) -> Result<(), String> {
    let (long, short) = (LONG_TTL_MS.to_string(), SHORT_TTL_MS.to_string());
    match state {
        KeyState::Absent => return Ok(()),
        KeyState::Ours => call(target, &["SET", key, token, "PX", &long])?,
        KeyState::Another => call(target, &["SET", key, ANOTHER_TOKEN, "PX", &long])?,
        KeyState::Expiring => call(target, &["SET", key, token, "PX", &short])?,
        KeyState::WrongType => call(target, &["RPUSH", key, "not-a-lock"])?,
    };
    Ok(())
}

fn set_fence(target: &mut dyn Target, fence: &str, state: FenceState) -> Result<(), String> {
    match state {
        FenceState::Absent => return Ok(()),
        FenceState::Behind => call(target, &["ZADD", fence, &BEHIND.to_string(), "n"])?,
        FenceState::Ahead => call(target, &["ZADD", fence, &AHEAD.to_string(), "n"])?,
        FenceState::WrongString => call(target, &["SET", fence, &BEHIND.to_string()])?,
        FenceState::WrongList => call(target, &["RPUSH", fence, "not-a-counter"])?,
    };
    Ok(())
}

/// Loads the form's script (`EVALSHA`) or empties the cache (flushed, and `EVAL`);
/// `Ok(Some(why))` if the target would not load it.
fn set_cache(
    target: &mut dyn Target,
    form: FenceForm,
    scripts: Scripts,
) -> Result<Option<String>, String> {
    let (script, send) = match form {
        FenceForm::Acquire(send) => (scripts.fenced_acquire, send),
        FenceForm::Raise(send) => (scripts.raise_fence, send),
        FenceForm::ZaddGt | FenceForm::Zincrby => return Ok(None),
    };
    if send != Send::Sha {
        call(target, &["SCRIPT", "FLUSH"])?;
        return Ok(None);
    }
    let reply = call(target, &["SCRIPT", "LOAD", script.body])?;
    Ok(match reply {
        Seen::Bulk(sha) if sha == script.sha1.as_bytes() => None,
        other => Some(format!(
            "loading the script: SCRIPT LOAD answered {other}, its SHA1 is {}",
            script.sha1
        )),
    })
}

/// The server's `TIME`, whole seconds.
fn time(target: &mut dyn Target) -> Result<u64, String> {
    let reply = call(target, &["TIME"])?;
    let secs = match &reply {
        Seen::Array(parts) => match parts.first() {
            Some(Seen::Bulk(s)) => std::str::from_utf8(s).ok().and_then(|s| s.parse().ok()),
            _ => None,
        },
        _ => None,
    };
    secs.ok_or_else(|| format!("TIME answered {reply}"))
}

fn reply_matches(expected: FenceReply, got: &Seen, (before, after): (u64, u64)) -> bool {
    let floor = (before * PER_SECOND) as i64 + 1..=(after * PER_SECOND) as i64 + 1;
    match (expected, got) {
        (FenceReply::FloorPlusOne, Seen::Int(n)) => floor.contains(n),
        (FenceReply::AheadPlusOne, Seen::Int(n)) => *n == AHEAD as i64 + 1,
        (FenceReply::Nil, Seen::Nil) => true,
        (FenceReply::Int(n), Seen::Int(m)) => n == *m,
        (FenceReply::Score(n), Seen::Bulk(b)) => *b == n.to_string().into_bytes(),
        (FenceReply::Error(code), Seen::Error(e)) => e.split(' ').next() == Some(code),
        _ => false,
    }
}

fn key_matches(case: FenceCase, token: &str, value: &Seen, pttl: &Seen) -> bool {
    let ms = |n: u64| n as i64;
    let ours = Seen::Bulk(token.as_bytes().to_vec());
    let (want, ttl) = match (case.sets_key, case.key) {
        (true, _) => (ours, ms(SHORT_TTL_MS) + 1..=ms(TTL_MS)),
        (false, KeyState::Absent) => (Seen::Nil, -2..=-2),
        (false, KeyState::Ours) => (ours, ms(TTL_MS) + 1..=ms(LONG_TTL_MS)),
        (false, KeyState::Expiring) => (ours, 1..=ms(SHORT_TTL_MS)),
        (false, KeyState::Another) => (
            Seen::Bulk(ANOTHER_TOKEN.as_bytes().to_vec()),
            ms(TTL_MS) + 1..=ms(LONG_TTL_MS),
        ),
        (false, KeyState::WrongType) => return is_wrongtype(value) && *pttl == Seen::Int(-1),
    };
    *value == want && matches!(pttl, Seen::Int(n) if ttl.contains(n))
}

/// Whether F, as `ZSCORE F n` and `GET F` read it (`read`) with its PTTL, is what the row
/// says: a counter is a persistent sorted set, which `GET` refuses.
fn fence_matches(case: FenceCase, reply: &Seen, read: [&Seen; 2], pttl: &Seen) -> bool {
    let [score, get] = read;
    let counter = |n: u64| {
        *score == Seen::Bulk(n.to_string().into_bytes())
            && is_wrongtype(get)
            && *pttl == Seen::Int(-1)
    };
    match (case.fence_after, case.fence) {
        (FenceAfter::Reply, _) => reply_number(reply).is_some_and(counter),
        (FenceAfter::Raised, _) => counter(RAISE_TO),
        (FenceAfter::Unchanged, FenceState::Absent) => {
            (score, get, pttl) == (&Seen::Nil, &Seen::Nil, &Seen::Int(-2))
        }
        (FenceAfter::Unchanged, FenceState::Behind) => counter(BEHIND),
        (FenceAfter::Unchanged, FenceState::Ahead) => counter(AHEAD),
        (FenceAfter::Unchanged, FenceState::WrongString) => {
            is_wrongtype(score) && *get == Seen::Bulk(BEHIND.to_string().into_bytes())
        }
        (FenceAfter::Unchanged, FenceState::WrongList) => is_wrongtype(score) && is_wrongtype(get),
    }
}

/// The counter a reply carries: an integer (the scripts) or a score's digits (`ZINCRBY`).
fn reply_number(reply: &Seen) -> Option<u64> {
    match reply {
        Seen::Int(n) => u64::try_from(*n).ok(),
        Seen::Bulk(b) => std::str::from_utf8(b).ok()?.parse().ok(),
        _ => None,
    }
}

fn is_wrongtype(value: &Seen) -> bool {
    matches!(value, Seen::Error(e) if e.starts_with("WRONGTYPE"))
}

fn call(target: &mut dyn Target, args: &[&str]) -> Result<Seen, String> {
    target
        .call(args)
        .map_err(|e| format!("{}: `{}` failed: {e}", target.describe(), args[0]))
}

impl fmt::Display for FenceForm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (script, send) = match self {
            Self::Acquire(send) => ("fenced acquire", send),
            Self::Raise(send) => ("fence write-back", send),
            Self::ZaddGt => return write!(f, "ZADD F GT {RAISE_TO} n"),
            Self::Zincrby => return f.write_str("ZINCRBY F 1 n"),
        };
        match send {
            Send::Sha => write!(f, "{script} EVALSHA"),
            Send::ShaFlushed => write!(f, "{script} EVALSHA (cache flushed)"),
            Send::Eval => write!(f, "{script} EVAL"),
        }
    }
}

impl fmt::Display for FenceState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Absent => "absent",
            Self::Behind => "behind",
            Self::Ahead => "ahead",
            Self::WrongString => "a string",
            Self::WrongList => "a list",
        })
    }
}

impl fmt::Display for FenceReply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::FloorPlusOne => f.write_str(":<TIME seconds * 2^20 + 1>"),
            Self::AheadPlusOne => write!(f, ":{}", AHEAD + 1),
            Self::Nil => f.write_str("nil"),
            Self::Int(n) => write!(f, ":{n}"),
            Self::Score(n) => write!(f, "\"{n}\""),
            Self::Error(code) => write!(f, "-{code} ..."),
        }
    }
}
