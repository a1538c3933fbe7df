//! The fencing scripts' contract (issue 12): the fenced acquire and the fence write-back on
//! every state of the lock's key K and, where it matters, of its counter F, with the reply
//! and the effect on both keys, run against any [`Target`].
//!
//! | command | K | F | reply | K after | F after |
//! |---|---|---|---|---|---|
//! | fenced acquire | absent | absent, behind | the floor | set | = reply |
//! | fenced acquire | absent | ahead | ahead + 1 | set | = reply |
//! | fenced acquire | absent | wrong type | WRONGTYPE | set | = |
//! | fenced acquire | ours, another, wrong type, expiring | behind | nil | = | = |
//! | write-back | ours, expiring | absent, behind | 1 | = | raised |
//! | write-back | ours | ahead | 1 | = | = |
//! | write-back | ours | wrong type | WRONGTYPE | = | = |
//! | write-back | absent, another | behind | 0 | = | = |
//! | write-back | wrong type | behind | WRONGTYPE | = | = |
//! | either, flushed cache | ours | behind | NOSCRIPT | = | = |
//!
//! "The floor" depends on the server's clock, so it is checked by range, never by timing:
//! at least `TIME` seconds * 2^20 read before the command, at most that of a read after.
//! "Behind" is a counter of 5, "ahead" one of 2^52 (above any floor until the year 2^32 s),
//! "raised" is the write-back's number, [`RAISE_TO`], above "behind" and below "ahead".

use std::fmt;
use std::time::{Duration, Instant};

use chacha20::ChaCha20Rng;
use rand_core::SeedableRng;
use redlock_core::{
    Config, Event, FENCED_ACQUIRE_SCRIPT, Lock, LockOptions, OpId, RAISE_FENCE_SCRIPT, Reply,
    Request, Resource,
};
use redlock_testkit::Reply as Seen;

use crate::form::Scripts;
use crate::run::Target;
use crate::table::{ANOTHER_TOKEN, LONG_TTL_MS, SHORT_TTL_MS, Send, State, TTL_MS};

/// The number the write-back rows raise F to.
pub const RAISE_TO: u64 = 1_000_000;
/// A counter behind every floor and below [`RAISE_TO`].
const BEHIND: u64 = 5;
/// A counter ahead of every floor (2^52).
const AHEAD: u64 = 1 << 52;
/// A second of server time in fencing counts.
const PER_SECOND: u64 = 1 << 20;

/// One row: a fencing script on K and F in given states, and what must come of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FenceCase {
    /// The script and how it goes out.
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

/// A fencing script, as the core sends it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FenceForm {
    /// `FENCED_ACQUIRE_SCRIPT`.
    Acquire(Send),
    /// `RAISE_FENCE_SCRIPT` with [`RAISE_TO`].
    Raise(Send),
}

/// K before a fencing command: the same states as the lock contract's keys.
pub type KeyState = State;

/// F before the command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FenceState {
    /// No counter.
    Absent,
    /// 5: behind every floor and [`RAISE_TO`].
    Behind,
    /// 2^52: ahead of every floor and of [`RAISE_TO`].
    Ahead,
    /// A list.
    WrongType,
}

/// The reply a row expects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FenceReply {
    /// An integer within the floor's range (server `TIME` seconds * 2^20).
    Floor,
    /// F's number before, plus one.
    AheadPlusOne,
    /// The null bulk string.
    Nil,
    /// This integer.
    Int(i64),
    /// An error with this code.
    Error(&'static str),
}

/// F after the command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FenceAfter {
    /// As before.
    Unchanged,
    /// The reply's number, persistent.
    Reply,
    /// [`RAISE_TO`], persistent.
    Raised,
}

/// The fencing part of the contract: 20 rows, run with [`CONTRACT`](crate::CONTRACT) by
/// [`run`](crate::run).
#[rustfmt::skip]
pub const FENCE_CONTRACT: &[FenceCase] = &[
    row(ACQ, KeyState::Absent,    FenceState::Absent,    FenceReply::Floor,        true,  FenceAfter::Reply),
    row(ACQ, KeyState::Absent,    FenceState::Behind,    FenceReply::Floor,        true,  FenceAfter::Reply),
    row(ACQ, KeyState::Absent,    FenceState::Ahead,     FenceReply::AheadPlusOne, true,  FenceAfter::Reply),
    // The SET NX has run when GET F fails: K is set, and the reply is the error.
    row(ACQ, KeyState::Absent,    FenceState::WrongType, WRONGTYPE,                true,  FenceAfter::Unchanged),
    row(ACQ, KeyState::Ours,      FenceState::Behind,    FenceReply::Nil,          false, FenceAfter::Unchanged),
    row(ACQ, KeyState::Another,   FenceState::Behind,    FenceReply::Nil,          false, FenceAfter::Unchanged),
    row(ACQ, KeyState::WrongType, FenceState::Behind,    FenceReply::Nil,          false, FenceAfter::Unchanged),
    row(ACQ, KeyState::Expiring,  FenceState::Behind,    FenceReply::Nil,          false, FenceAfter::Unchanged),
    row(ACQ_EVAL, KeyState::Absent, FenceState::Behind,  FenceReply::Floor,        true,  FenceAfter::Reply),
    row(ACQ_FLUSHED, KeyState::Absent, FenceState::Behind, NOSCRIPT,               false, FenceAfter::Unchanged),
    row(RAISE, KeyState::Ours,    FenceState::Absent,    FenceReply::Int(1),       false, FenceAfter::Raised),
    row(RAISE, KeyState::Ours,    FenceState::Behind,    FenceReply::Int(1),       false, FenceAfter::Raised),
    row(RAISE, KeyState::Ours,    FenceState::Ahead,     FenceReply::Int(1),       false, FenceAfter::Unchanged),
    row(RAISE, KeyState::Ours,    FenceState::WrongType, WRONGTYPE,                false, FenceAfter::Unchanged),
    row(RAISE, KeyState::Expiring, FenceState::Behind,   FenceReply::Int(1),       false, FenceAfter::Raised),
    row(RAISE, KeyState::Absent,  FenceState::Behind,    FenceReply::Int(0),       false, FenceAfter::Unchanged),
    row(RAISE, KeyState::Another, FenceState::Behind,    FenceReply::Int(0),       false, FenceAfter::Unchanged),
    row(RAISE, KeyState::WrongType, FenceState::Behind,  WRONGTYPE,                false, FenceAfter::Unchanged),
    row(RAISE_EVAL, KeyState::Ours, FenceState::Behind,  FenceReply::Int(1),       false, FenceAfter::Raised),
    row(RAISE_FLUSHED, KeyState::Ours, FenceState::Behind, NOSCRIPT,               false, FenceAfter::Unchanged),
];

impl FenceCase {
    /// Three wrong copies of this row, each with one expectation changed (the reply, whether
    /// K is set, F afterwards), every one of which a target that keeps the contract fails:
    /// the negative control that shows no fencing row passes whatever happens.
    pub fn wrong_copies(self) -> [Self; 3] {
        let reply = match self.reply {
            FenceReply::Floor => FenceReply::AheadPlusOne,
            FenceReply::AheadPlusOne => FenceReply::Floor,
            FenceReply::Nil => FenceReply::Int(0),
            FenceReply::Int(n) => FenceReply::Int(1 - n),
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

const ACQ: FenceForm = FenceForm::Acquire(Send::Sha);
const ACQ_EVAL: FenceForm = FenceForm::Acquire(Send::Eval);
const ACQ_FLUSHED: FenceForm = FenceForm::Acquire(Send::ShaFlushed);
const RAISE: FenceForm = FenceForm::Raise(Send::Sha);
const RAISE_EVAL: FenceForm = FenceForm::Raise(Send::Eval);
const RAISE_FLUSHED: FenceForm = FenceForm::Raise(Send::ShaFlushed);
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

/// The core's fencing commands on one key, taken from fenced [`Lock`]s as they send them.
#[derive(Debug, Clone)]
pub struct FenceCommands {
    /// The acquire's `EVALSHA` and `EVAL`, and the token they store.
    acquire: [Vec<String>; 2],
    acquire_token: String,
    /// The write-back's `EVALSHA` and `EVAL` (its number replaced by [`RAISE_TO`]), and the
    /// token it compares.
    raise: [Vec<String>; 2],
    raise_token: String,
}

impl FenceCommands {
    /// Drives a fenced one-node lock (acquire, `-NOSCRIPT`, `EVAL`) and a fenced three-node
    /// lock whose quorum answers 5 and 7, so that it writes 7 back to the first node
    /// (`-NOSCRIPT`, `EVAL`), and keeps the commands.
    pub fn new(key: &str, seed: u64) -> Self {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let now = Instant::now();
        let options = LockOptions::default()
            .ttl(Duration::from_millis(TTL_MS))
            .fenced(true);
        let lock = |nodes: usize, rng: &mut ChaCha20Rng| {
            let config = Config::builder(nodes).build().expect("a valid config");
            let resource = Resource::new(key.to_owned());
            Lock::acquire(now, OpId::from_raw(1), &config, resource, &options, rng)
                .expect("a fenced lock")
        };
        let mut one = lock(1, &mut rng);
        let sha = one.poll_request().expect("the acquire");
        one.handle_reply(now, sha.id, Ok(&noscript()), &mut rng);
        let eval = one.poll_request().expect("the EVAL resend");
        let acquire = [args(&sha), args(&eval)];
        let acquire_token = acquire[0][5].clone();
        let mut three = lock(3, &mut rng);
        let sent: Vec<Request> = std::iter::from_fn(|| three.poll_request()).collect();
        three.handle_reply(now, sent[0].id, Ok(&Reply::Integer(5)), &mut rng);
        three.handle_reply(now, sent[1].id, Ok(&Reply::Integer(7)), &mut rng);
        let sha = three.poll_request().expect("the write-back");
        three.handle_reply(now, sha.id, Ok(&noscript()), &mut rng);
        let eval = three.poll_request().expect("the write-back's EVAL resend");
        let mut raise = [args(&sha), args(&eval)];
        for r in &mut raise {
            assert_eq!(
                r[6], "7",
                "the write-back carries the quorum's largest counter last"
            );
            r[6] = RAISE_TO.to_string();
        }
        let raise_token = raise[0][5].clone();
        assert!(matches!(
            three.poll_event(),
            None | Some(Event::Acquired(_))
        ));
        Self {
            acquire,
            acquire_token,
            raise,
            raise_token,
        }
    }

    /// The arguments of `form`, name first, with `scripts` in place of the core's (checked
    /// to be where the core puts them), and the token "ours" is for it.
    pub fn args(&self, form: FenceForm, scripts: Scripts) -> (Vec<String>, &str) {
        let (sent, token, core, script, send) = match form {
            FenceForm::Acquire(send) => (
                &self.acquire,
                &self.acquire_token,
                &FENCED_ACQUIRE_SCRIPT,
                scripts.fenced_acquire,
                send,
            ),
            FenceForm::Raise(send) => (
                &self.raise,
                &self.raise_token,
                &RAISE_FENCE_SCRIPT,
                scripts.raise_fence,
                send,
            ),
        };
        let (mut args, from, to) = match send {
            Send::Eval => (sent[1].clone(), core.body, script.body),
            Send::Sha | Send::ShaFlushed => (sent[0].clone(), core.sha1, script.sha1),
        };
        assert_eq!(args[1], from, "the core sends its script second");
        args[1] = to.to_owned();
        (args, token)
    }
}

fn args(request: &Request) -> Vec<String> {
    let args = request.command.args();
    let text = args.iter().map(|a| String::from_utf8(a.to_vec()));
    text.collect::<Result<_, _>>().expect("text arguments")
}

fn noscript() -> Reply {
    Reply::Error("NOSCRIPT No matching script. Please use EVAL.".into())
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
    let fence = args[4].clone();
    assert_eq!((args[3].as_str(), args[2].as_str()), (key.as_str(), "2"));
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
    if !fence_matches(case, &reply, &seen[2], &seen[3]) {
        why.push(format!("F {} (PTTL {})", seen[2], seen[3]));
    }
    Ok((!why.is_empty()).then(|| why.join("; ")))
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
        FenceState::Behind => call(target, &["SET", fence, &BEHIND.to_string()])?,
        FenceState::Ahead => call(target, &["SET", fence, &AHEAD.to_string()])?,
        FenceState::WrongType => call(target, &["RPUSH", fence, "not-a-counter"])?,
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
    let floor = (before * PER_SECOND) as i64..=(after * PER_SECOND) as i64;
    match (expected, got) {
        (FenceReply::Floor, Seen::Int(n)) => floor.contains(n),
        (FenceReply::AheadPlusOne, Seen::Int(n)) => *n == AHEAD as i64 + 1,
        (FenceReply::Nil, Seen::Nil) => true,
        (FenceReply::Int(n), Seen::Int(m)) => n == *m,
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

fn fence_matches(case: FenceCase, reply: &Seen, value: &Seen, pttl: &Seen) -> bool {
    let number = |n: u64| Seen::Bulk(n.to_string().into_bytes());
    let want = match (case.fence_after, case.fence) {
        (FenceAfter::Reply, _) => match reply {
            Seen::Int(n) => Seen::Bulk(n.to_string().into_bytes()),
            _ => return false,
        },
        (FenceAfter::Raised, _) => number(RAISE_TO),
        (FenceAfter::Unchanged, FenceState::Absent) => return *value == Seen::Nil,
        (FenceAfter::Unchanged, FenceState::Behind) => number(BEHIND),
        (FenceAfter::Unchanged, FenceState::Ahead) => number(AHEAD),
        (FenceAfter::Unchanged, FenceState::WrongType) => return is_wrongtype(value),
    };
    *value == want && *pttl == Seen::Int(-1)
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
            Self::WrongType => "wrong type",
        })
    }
}

impl fmt::Display for FenceReply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Floor => f.write_str(":<TIME seconds * 2^20>"),
            Self::AheadPlusOne => write!(f, ":{}", AHEAD + 1),
            Self::Nil => f.write_str("nil"),
            Self::Int(n) => write!(f, ":{n}"),
            Self::Error(code) => write!(f, "-{code} ..."),
        }
    }
}
