//! The contract itself, as data: every command form a lock may send, on every key state, with
//! the reply and the effect on the key each server must show. Nothing here runs anything.
//!
//! | command | absent | ours | another token | wrong type | expiring |
//! |---|---|---|---|---|---|
//! | `SET NX PX` | OK, set | nil, = | nil, = | nil, = | nil, = |
//! | release script | -1, = | 1, gone | 0, = | WRONGTYPE, = | 1, gone |
//! | extend script | 0, = | 1, set | 0, = | WRONGTYPE, = | 1, set |
//! | either, flushed cache | NOSCRIPT, = | NOSCRIPT, = | NOSCRIPT, = | NOSCRIPT, = | NOSCRIPT, = |
//! | `DELIFEQ`, `DELEX IFEQ` | 0, = | 1, gone | 0, = | WRONGTYPE, = | 1, gone |
//! | `SET IFEQ PX` | nil, = | OK, set | nil, = | WRONGTYPE, = | OK, set |
//!
//! A script runs by `EVALSHA` (cached) and by `EVAL`; "flushed cache" is `EVALSHA` after
//! `SCRIPT FLUSH`. "=": the key is unchanged; "gone": deleted; "set": our token with the
//! command's ttl. A wrong-type key is a list; an expiring key is ours with a short ttl.
//!
//! The ttls are chosen so that every expected PTTL range is disjoint from the others
//! ([`LONG_TTL_MS`], [`TTL_MS`], [`SHORT_TTL_MS`]): a check never depends on how fast a step
//! ran, only on no step taking seconds.
//!
//! This is the lock key's part; the fencing scripts' rows are in fence.rs and the lock
//! kinds' scripts' rows (multi-lock, reader-writer lock, semaphore) in kinds.rs, each with
//! its own table in the same form.

use std::fmt;

/// The ttl of every command that sets one (`PX`), and of the lock the core's commands are
/// taken from: 100 s.
pub const TTL_MS: u64 = 100_000;
/// The ttl a key of our token or another token is set with before the command: 1,000 s, so
/// "unchanged" (PTTL above [`TTL_MS`]) and "set to the command's ttl" (at most [`TTL_MS`])
/// cannot be confused.
pub const LONG_TTL_MS: u64 = 1_000_000;
/// The ttl of an expiring key: 10 s, short next to the command's, so an extension visibly
/// lengthens it (PTTL above [`SHORT_TTL_MS`]) and leaving it alone visibly does not.
pub const SHORT_TTL_MS: u64 = 10_000;
/// The value another client holds the key with.
pub const ANOTHER_TOKEN: &str = "another-client-token";

/// One row of the contract: a command on a key in a state, and what must come of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Case {
    /// What is sent.
    pub form: Form,
    /// The key before the command.
    pub state: State,
    /// The reply.
    pub reply: Expected,
    /// The key afterwards.
    pub after: After,
}

/// A command as a lock sends it to one node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// `SET key token NX PX ttl`: the core's acquire.
    SetNxPx,
    /// The core's release script (compare-and-delete).
    Release(Send),
    /// The core's extend script (compare-and-expire).
    Extend(Send),
    /// `DELIFEQ key token`: native compare-and-delete (Valkey 9.0 and later).
    DelIfEq,
    /// `DELEX key IFEQ token`: native compare-and-delete (Redis 8.4 and later).
    DelExIfEq,
    /// `SET key token IFEQ token PX ttl`: native compare-and-expire (Valkey 8.1, Redis 8.4).
    SetIfEqPx,
}

/// How a script goes out, and what the node's script cache holds at that moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Send {
    /// `EVALSHA`, with the script loaded (the usual case: connections preload it).
    Sha,
    /// `EVALSHA` with an empty cache (a restart, `SCRIPT FLUSH`): `-NOSCRIPT`, no effect.
    ShaFlushed,
    /// `EVAL` with the body, on an empty cache: what the core resends after `-NOSCRIPT`.
    Eval,
}

/// The key before the command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// No key.
    Absent,
    /// Our token, ttl [`LONG_TTL_MS`].
    Ours,
    /// [`ANOTHER_TOKEN`], ttl [`LONG_TTL_MS`].
    Another,
    /// A list (one element, no ttl): a key of another type in the lock's way.
    WrongType,
    /// Our token, ttl [`SHORT_TTL_MS`]: a lock close to its expiry.
    Expiring,
}

/// The reply a case expects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expected {
    /// `+OK`.
    Ok,
    /// The null bulk string.
    Nil,
    /// An integer.
    Int(i64),
    /// An error reply whose first word (its code) is this. The texts differ per server
    /// (Redis appends `script: <sha>, on @user_script:1.` to a script's error, Valkey
    /// `script: on @user_script:1.`), so only the code is part of the contract.
    Error(&'static str),
}

/// The key after the command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum After {
    /// No key.
    Absent,
    /// As the state left it: same type, same value, its ttl in the state's range.
    Unchanged,
    /// Our token with the command's ttl (PTTL in (`SHORT_TTL_MS`, `TTL_MS`]).
    OursWithTtl,
}

/// A server family, for the availability marks of the native commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// Redis.
    Redis,
    /// Valkey.
    Valkey,
}

/// The first version of a family that has a command: `(family, major, minor)`.
pub type Since = (Family, u32, u32);

/// The whole contract: 10 command forms × 5 key states.
#[rustfmt::skip]
pub const CONTRACT: &[Case] = &[
    // The core's acquire: sets only a missing key; a key of any type is "held".
    case(Form::SetNxPx,   State::Absent,    Expected::Ok,      After::OursWithTtl),
    case(Form::SetNxPx,   State::Ours,      Expected::Nil,     After::Unchanged),
    case(Form::SetNxPx,   State::Another,   Expected::Nil,     After::Unchanged),
    case(Form::SetNxPx,   State::WrongType, Expected::Nil,     After::Unchanged),
    case(Form::SetNxPx,   State::Expiring,  Expected::Nil,     After::Unchanged),
    // The release script: deletes only our key; -1 says it was already gone.
    case(REL_SHA,         State::Absent,    Expected::Int(-1), After::Absent),
    case(REL_SHA,         State::Ours,      Expected::Int(1),  After::Absent),
    case(REL_SHA,         State::Another,   Expected::Int(0),  After::Unchanged),
    case(REL_SHA,         State::WrongType, WRONGTYPE,         After::Unchanged),
    case(REL_SHA,         State::Expiring,  Expected::Int(1),  After::Absent),
    case(REL_EVAL,        State::Absent,    Expected::Int(-1), After::Absent),
    case(REL_EVAL,        State::Ours,      Expected::Int(1),  After::Absent),
    case(REL_EVAL,        State::Another,   Expected::Int(0),  After::Unchanged),
    case(REL_EVAL,        State::WrongType, WRONGTYPE,         After::Unchanged),
    case(REL_EVAL,        State::Expiring,  Expected::Int(1),  After::Absent),
    // A script on a flushed cache: -NOSCRIPT, and nothing happens.
    case(REL_FLUSHED,     State::Absent,    NOSCRIPT,          After::Unchanged),
    case(REL_FLUSHED,     State::Ours,      NOSCRIPT,          After::Unchanged),
    case(REL_FLUSHED,     State::Another,   NOSCRIPT,          After::Unchanged),
    case(REL_FLUSHED,     State::WrongType, NOSCRIPT,          After::Unchanged),
    case(REL_FLUSHED,     State::Expiring,  NOSCRIPT,          After::Unchanged),
    // The extend script: resets only our key's ttl, never creates one (algorithm.md §8).
    case(EXT_SHA,         State::Absent,    Expected::Int(0),  After::Absent),
    case(EXT_SHA,         State::Ours,      Expected::Int(1),  After::OursWithTtl),
    case(EXT_SHA,         State::Another,   Expected::Int(0),  After::Unchanged),
    case(EXT_SHA,         State::WrongType, WRONGTYPE,         After::Unchanged),
    case(EXT_SHA,         State::Expiring,  Expected::Int(1),  After::OursWithTtl),
    case(EXT_EVAL,        State::Absent,    Expected::Int(0),  After::Absent),
    case(EXT_EVAL,        State::Ours,      Expected::Int(1),  After::OursWithTtl),
    case(EXT_EVAL,        State::Another,   Expected::Int(0),  After::Unchanged),
    case(EXT_EVAL,        State::WrongType, WRONGTYPE,         After::Unchanged),
    case(EXT_EVAL,        State::Expiring,  Expected::Int(1),  After::OursWithTtl),
    case(EXT_FLUSHED,     State::Absent,    NOSCRIPT,          After::Unchanged),
    case(EXT_FLUSHED,     State::Ours,      NOSCRIPT,          After::Unchanged),
    case(EXT_FLUSHED,     State::Another,   NOSCRIPT,          After::Unchanged),
    case(EXT_FLUSHED,     State::WrongType, NOSCRIPT,          After::Unchanged),
    case(EXT_FLUSHED,     State::Expiring,  NOSCRIPT,          After::Unchanged),
    // Native compare-and-delete: 0 for a missing key and for another token alike.
    case(Form::DelIfEq,   State::Absent,    Expected::Int(0),  After::Absent),
    case(Form::DelIfEq,   State::Ours,      Expected::Int(1),  After::Absent),
    case(Form::DelIfEq,   State::Another,   Expected::Int(0),  After::Unchanged),
    case(Form::DelIfEq,   State::WrongType, WRONGTYPE,         After::Unchanged),
    case(Form::DelIfEq,   State::Expiring,  Expected::Int(1),  After::Absent),
    // DELEX rows follow Redis's `delex.json` reply schema: no Redis 8.4 runs in CI, so they
    // run only where a server has the command (the report says when they are skipped).
    case(Form::DelExIfEq, State::Absent,    Expected::Int(0),  After::Absent),
    case(Form::DelExIfEq, State::Ours,      Expected::Int(1),  After::Absent),
    case(Form::DelExIfEq, State::Another,   Expected::Int(0),  After::Unchanged),
    case(Form::DelExIfEq, State::WrongType, WRONGTYPE,         After::Unchanged),
    case(Form::DelExIfEq, State::Expiring,  Expected::Int(1),  After::Absent),
    // Native compare-and-expire: never creates a missing key.
    case(Form::SetIfEqPx, State::Absent,    Expected::Nil,     After::Absent),
    case(Form::SetIfEqPx, State::Ours,      Expected::Ok,      After::OursWithTtl),
    case(Form::SetIfEqPx, State::Another,   Expected::Nil,     After::Unchanged),
    case(Form::SetIfEqPx, State::WrongType, WRONGTYPE,         After::Unchanged),
    case(Form::SetIfEqPx, State::Expiring,  Expected::Ok,      After::OursWithTtl),
];

impl Form {
    /// Every form, in the table's order.
    pub const ALL: [Self; 10] = [
        Self::SetNxPx,
        REL_SHA,
        REL_EVAL,
        REL_FLUSHED,
        EXT_SHA,
        EXT_EVAL,
        EXT_FLUSHED,
        Self::DelIfEq,
        Self::DelExIfEq,
        Self::SetIfEqPx,
    ];

    /// The servers that have the command: `None` for every server the core supports (`SET
    /// NX PX` and scripting), else the first version of each family that has it. A runner
    /// still asks the server, and fails when its answer and these marks disagree.
    pub fn since(self) -> Option<&'static [Since]> {
        match self {
            Self::SetNxPx | Self::Release(_) | Self::Extend(_) => None,
            Self::DelIfEq => Some(&[(Family::Valkey, 9, 0)]),
            Self::DelExIfEq => Some(&[(Family::Redis, 8, 4)]),
            Self::SetIfEqPx => Some(&[(Family::Valkey, 8, 1), (Family::Redis, 8, 4)]),
        }
    }

    /// How a script form goes out; `None` for a plain command.
    pub fn send(self) -> Option<Send> {
        match self {
            Self::Release(send) | Self::Extend(send) => Some(send),
            _ => None,
        }
    }

    /// Whether the marks say `family` at version `major.minor` has the command.
    pub fn available_on(self, family: Family, major: u32, minor: u32) -> bool {
        self.since().is_none_or(|since| {
            since
                .iter()
                .any(|&(f, ma, mi)| f == family && (major, minor) >= (ma, mi))
        })
    }
}

impl fmt::Display for Form {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::SetNxPx => "SET NX PX",
            Self::Release(Send::Sha) => "release EVALSHA",
            Self::Release(Send::ShaFlushed) => "release EVALSHA (cache flushed)",
            Self::Release(Send::Eval) => "release EVAL",
            Self::Extend(Send::Sha) => "extend EVALSHA",
            Self::Extend(Send::ShaFlushed) => "extend EVALSHA (cache flushed)",
            Self::Extend(Send::Eval) => "extend EVAL",
            Self::DelIfEq => "DELIFEQ",
            Self::DelExIfEq => "DELEX IFEQ",
            Self::SetIfEqPx => "SET IFEQ PX",
        })
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Absent => "absent",
            Self::Ours => "ours",
            Self::Another => "another token",
            Self::WrongType => "wrong type",
            Self::Expiring => "expiring",
        })
    }
}

impl fmt::Display for Expected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Ok => f.write_str("+OK"),
            Self::Nil => f.write_str("nil"),
            Self::Int(n) => write!(f, ":{n}"),
            Self::Error(code) => write!(f, "-{code} ..."),
        }
    }
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Redis => "Redis",
            Self::Valkey => "Valkey",
        })
    }
}

const fn case(form: Form, state: State, reply: Expected, after: After) -> Case {
    Case {
        form,
        state,
        reply,
        after,
    }
}

const REL_SHA: Form = Form::Release(Send::Sha);
const REL_EVAL: Form = Form::Release(Send::Eval);
const REL_FLUSHED: Form = Form::Release(Send::ShaFlushed);
const EXT_SHA: Form = Form::Extend(Send::Sha);
const EXT_EVAL: Form = Form::Extend(Send::Eval);
const EXT_FLUSHED: Form = Form::Extend(Send::ShaFlushed);
const WRONGTYPE: Expected = Expected::Error("WRONGTYPE");
const NOSCRIPT: Expected = Expected::Error("NOSCRIPT");

#[cfg(test)]
mod tests {
    use super::*;

    const STATES: [State; 5] = [
        State::Absent,
        State::Ours,
        State::Another,
        State::WrongType,
        State::Expiring,
    ];

    #[test]
    fn every_form_meets_every_state_once() {
        assert_eq!(CONTRACT.len(), Form::ALL.len() * STATES.len());
        for form in Form::ALL {
            for state in STATES {
                let rows = CONTRACT
                    .iter()
                    .filter(|c| c.form == form && c.state == state);
                assert_eq!(rows.count(), 1, "{form} × {state}");
            }
        }
    }

    #[test]
    fn nothing_creates_a_key_but_set_nx() {
        for c in CONTRACT.iter().filter(|c| c.state == State::Absent) {
            let creates = c.after == After::OursWithTtl;
            assert_eq!(creates, c.form == Form::SetNxPx, "{} × absent", c.form);
        }
    }

    #[test]
    fn nothing_touches_another_token() {
        for c in CONTRACT.iter().filter(|c| c.state == State::Another) {
            assert_eq!(c.after, After::Unchanged, "{} × another token", c.form);
        }
    }

    #[test]
    fn the_marks_follow_the_release_notes() {
        assert!(Form::DelIfEq.available_on(Family::Valkey, 9, 1));
        assert!(!Form::DelIfEq.available_on(Family::Valkey, 8, 1));
        assert!(!Form::DelIfEq.available_on(Family::Redis, 8, 4));
        assert!(Form::SetIfEqPx.available_on(Family::Valkey, 8, 1));
        assert!(!Form::SetIfEqPx.available_on(Family::Redis, 7, 0));
        assert!(Form::DelExIfEq.available_on(Family::Redis, 8, 4));
        assert!(!Form::DelExIfEq.available_on(Family::Valkey, 9, 1));
        assert!(Form::Extend(Send::Eval).available_on(Family::Redis, 7, 0));
    }
}
