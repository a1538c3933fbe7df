//! The lock kinds' contract (docs/kinds.md): every script of the multi-resource lock, the
//! reader-writer lock and the semaphore, on the states of its keys that matter to it, with
//! the reply, every key afterwards (members and expiries) and the release channels it
//! published on, run against any [`Target`](crate::Target) by `kinds_run`.
//!
//! | script | keys | states | reply |
//! |---|---|---|---|
//! | MULTI_ACQUIRE | a, b | all free | 1, both set |
//! | MULTI_ACQUIRE | a, b | one another's, ours, a sorted set, a list | 0, = |
//! | MULTI_ACQUIRE | a, b | ttl 0 | ERR invalid expire time, = |
//! | MULTI_RELEASE | a, b | both ours (a subscriber on b) | 1 (2), both gone, a and b announced |
//! | MULTI_RELEASE | a, b | ours and another's (subscribers on both) | 1 (2), a gone, a announced |
//! | MULTI_RELEASE | a, b | another's and missing; all missing | 0; -1, = |
//! | MULTI_RELEASE | a, b | ours and a sorted set | WRONGTYPE, a gone and announced |
//! | MULTI_EXTEND | a, b | both ours | 1, both set |
//! | MULTI_EXTEND | a, b | ours and another's, ours and missing | 0, = |
//! | MULTI_EXTEND | a, b | ours and a sorted set | WRONGTYPE, = |
//! | READ_ACQUIRE | R, readers, waiting | free, beside readers (shorter, longer), expired only | 1, slot added, set's ttl at least ttl |
//! | READ_ACQUIRE | R, readers, waiting | writer present, writer waiting, R of another type | 0, expired pruned |
//! | READ_ACQUIRE | R, readers, waiting | readers a string | WRONGTYPE, = |
//! | WRITE_ACQUIRE | R, readers, waiting | free, another's marker, expired readers only | 1, R set, marker gone |
//! | WRITE_ACQUIRE | R, readers, waiting | live reader, writer present | 0, our marker for the patience (none with patience 0) |
//! | WRITE_ACQUIRE | R, readers, waiting | readers a string | WRONGTYPE, = |
//! | WRITE_ABANDON | waiting | ours; another's, none; a sorted set | 1, gone; 0, =; WRONGTYPE |
//! | WRITE_RELEASE | R, readers, waiting | ours (a subscriber), with our marker, with another's marker, with a marker of another type | 1 (2), R gone and announced, only our marker gone |
//! | WRITE_RELEASE | R, readers, waiting | R gone, another's R (our marker) | -1, 0, our marker gone |
//! | WRITE_RELEASE | R, readers, waiting | R a sorted set | WRONGTYPE, = |
//! | READ_RELEASE | R, readers | the last live reader (a subscriber) | 1 (2), set gone, announced |
//! | READ_RELEASE | R, readers | another reader stays (a subscriber) | 1 (1), not announced |
//! | READ_RELEASE | R, readers | not a reader, our slot expired, none | -1, expired pruned |
//! | READ_EXTEND | readers | ours (the set shorter, longer) | 1, deadline moved |
//! | READ_EXTEND | readers | ours expired, not a reader, none | 0, never re-created |
//! | SEM_ACQUIRE | permits, limit, R | free, 1 of 2, expired holder, another k expired, no limit key, a longer set | 1, slot added, limit = k with the set's ttl |
//! | SEM_ACQUIRE | permits, limit, R | full (2 of 2) | 0, = |
//! | SEM_ACQUIRE | permits, limit, R | live holders under another k (`3`, and `2` asked as `02`) | exactly `-PERMITS 3` (`-PERMITS 2`), = |
//! | SEM_ACQUIRE | permits, limit, R | permits or limit of the wrong type | WRONGTYPE, = |
//! | SEM_RELEASE | permits, limit, R | ours, alone or beside another (a subscriber) | 1 (2), slot gone, limit kept, announced |
//! | SEM_RELEASE | permits, limit, R | not a holder, ours expired | -1, expired pruned |
//! | SEM_EXTEND | permits, limit | ours (the set shorter, longer; no limit key) | 1, deadline moved, limit follows the set |
//! | SEM_EXTEND | permits, limit | ours expired, none | 0, never re-created |
//!
//! Every row runs three ways: `EVALSHA` after `SCRIPT LOAD`, `EVAL` on an empty cache, and
//! `EVALSHA` on an empty cache, which must answer `-NOSCRIPT` and change nothing. "=": every
//! key as it was (expired members still stored where nothing pruned them).
//!
//! Times are [`Life`]s: a member's deadline (its score, in ms of the node's `TIME`) or a
//! key's time to live, each in a range disjoint from the others (table.rs explains why the
//! tables use such ranges): a check never depends on how fast a step ran, only on no step
//! taking [`SLACK_MS`]. Every row names the keys of one resource: on a server, `a`, `b` and
//! `r` become `kinds-contract:<row>:a` and so on, and `r:readers` is R's readers key.
//!
//! MULTI_ACQUIRE's rows name no readers key: a multi-lock, like a plain mutex, does not
//! look at `R:readers`, so readers and plain mutexes must not share a name (docs/kinds.md,
//! "Keys of a resource R"); a writer, which does, is the readers' exclusive holder.
//!
//! Where a row mirrors one of the simulation's (`redlock_sim::kinds::*_CASES`) it has the
//! same name, and tests/kinds_sim.rs checks both say the same (reply, keys, members,
//! announcements); times differ only in scale (the simulation's 50-500 ms are seconds here).
//! Publication is seen by a subscriber on a second connection to each channel a row lists
//! in `heard`: a channel nobody listens to is seen only through the reply (1, not 2).

use crate::table::{SHORT_TTL_MS, TTL_MS};

/// The patience a retrying writer passes (WRITE_ACQUIRE's `ARGV[3]`): 50 s, between
/// [`SHORT_TTL_MS`] and [`TTL_MS`] with room for [`SLACK_MS`] on both sides.
pub const PATIENCE_MS: u64 = 50_000;

/// How long a row may take, at most, between setting its keys up and reading them back: 5
/// s. A time read back is in `(life - SLACK_MS, life]`, so the ranges of distinct
/// [`Life`]s never meet.
pub const SLACK_MS: i64 = 5_000;

/// A script of the lock kinds, as the core sends it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KindsScript {
    /// MULTI_ACQUIRE (`KEYS` the sorted resources; token, ttl).
    MultiAcquire,
    /// MULTI_RELEASE (`KEYS` the sorted resources; token).
    MultiRelease,
    /// MULTI_EXTEND (`KEYS` the sorted resources; token, ttl).
    MultiExtend,
    /// READ_ACQUIRE (R, R:readers, R:writer-waiting; token, ttl).
    ReadAcquire,
    /// WRITE_ACQUIRE (R, R:readers, R:writer-waiting; token, ttl, patience).
    WriteAcquire,
    /// WRITE_ABANDON (R:writer-waiting; token).
    WriteAbandon,
    /// WRITE_RELEASE (R, R:readers, R:writer-waiting; token).
    WriteRelease,
    /// READ_RELEASE (R, R:readers; token).
    ReadRelease,
    /// READ_EXTEND (R:readers; token, ttl).
    ReadExtend,
    /// SEM_ACQUIRE (R:permits, R:permits:limit, R; token, ttl, k).
    SemAcquire,
    /// SEM_RELEASE (R:permits, R:permits:limit, R; token).
    SemRelease,
    /// SEM_EXTEND (R:permits, R:permits:limit; token, ttl).
    SemExtend,
}

/// A time in a row: a member's deadline from the node's `now`, or a key's time to live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Life {
    /// A deadline 10 s past: an expired member, still stored until a script prunes it.
    Expired,
    /// A deadline of `now` when the keys were set up: expired by the time any script runs
    /// (pruning is `score <= now`).
    Now,
    /// [`SHORT_TTL_MS`]: a holder close to its expiry.
    Short,
    /// [`PATIENCE_MS`]: a waiting writer's marker.
    Patience,
    /// [`TTL_MS`]: what every acquisition and extension of the table asks for.
    Command,
    /// 1,000 s: a holder far from its expiry, unchanged by a command's ttl.
    Long,
    /// No expiry (a key only).
    Forever,
}

/// One key of a row, before or after the script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KindsKey {
    /// No key.
    Absent,
    /// A string: its value, its time to live.
    Str(&'static str, Life),
    /// A sorted set of holders: each member with its deadline, and the set's own time to
    /// live. Never empty.
    Holders(&'static [(&'static str, Life)], Life),
    /// A list (one element, no expiry): a type no kinds script writes.
    List,
}

/// What a row's script answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KindsReply {
    /// An integer.
    Int(i64),
    /// An error raised by a command the script called: its text starts with this (the
    /// servers append where the script was).
    Error(&'static str),
    /// An error the script returned (`redis.error_reply`): exactly this text.
    Returned(&'static str),
}

/// One row: a script, its keys before, its `ARGV`, and what must come of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KindsCase {
    /// The script.
    pub script: KindsScript,
    /// What the row shows (the simulation's name where it mirrors a row of its own).
    pub name: &'static str,
    /// Each key (of [`KindsScript::keys`]) before.
    pub before: &'static [KindsKey],
    /// The script's `ARGV`.
    pub argv: &'static [&'static str],
    /// The reply.
    pub reply: KindsReply,
    /// Each key afterwards.
    pub after: &'static [KindsKey],
    /// The resources whose release channel has a subscriber during the call.
    pub heard: &'static [&'static str],
    /// The resources whose release channel the script publishes on, in order.
    pub published: &'static [&'static str],
}

impl KindsScript {
    /// Every script, in the table's order.
    pub const ALL: [Self; 12] = [
        Self::MultiAcquire,
        Self::MultiRelease,
        Self::MultiExtend,
        Self::ReadAcquire,
        Self::WriteAcquire,
        Self::WriteAbandon,
        Self::WriteRelease,
        Self::ReadRelease,
        Self::ReadExtend,
        Self::SemAcquire,
        Self::SemRelease,
        Self::SemExtend,
    ];

    /// The script's `KEYS` in a row, named from the resources `a`, `b` (a multi-lock's set)
    /// and `r`, with the design's fixed suffixes.
    pub fn keys(self) -> &'static [&'static str] {
        match self {
            Self::MultiAcquire | Self::MultiRelease | Self::MultiExtend => &["a", "b"],
            Self::ReadAcquire | Self::WriteAcquire | Self::WriteRelease => {
                &["r", "r:readers", "r:writer-waiting"]
            }
            Self::WriteAbandon => &["r:writer-waiting"],
            Self::ReadRelease => &["r", "r:readers"],
            Self::ReadExtend => &["r:readers"],
            Self::SemAcquire | Self::SemRelease => &["r:permits", "r:permits:limit", "r"],
            Self::SemExtend => &["r:permits", "r:permits:limit"],
        }
    }
}

impl Life {
    /// The time in ms from the node's `now`; `None` for [`Life::Forever`].
    pub fn ms(self) -> Option<i64> {
        let ms = |n: u64| i64::try_from(n).expect("the table's times fit an i64");
        match self {
            Self::Expired => Some(-ms(SHORT_TTL_MS)),
            Self::Now => Some(0),
            Self::Short => Some(ms(SHORT_TTL_MS)),
            Self::Patience => Some(ms(PATIENCE_MS)),
            Self::Command => Some(ms(TTL_MS)),
            Self::Long => Some(1_000_000),
            Self::Forever => None,
        }
    }
}

impl std::fmt::Display for KindsScript {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::MultiAcquire => "MULTI_ACQUIRE",
            Self::MultiRelease => "MULTI_RELEASE",
            Self::MultiExtend => "MULTI_EXTEND",
            Self::ReadAcquire => "READ_ACQUIRE",
            Self::WriteAcquire => "WRITE_ACQUIRE",
            Self::WriteAbandon => "WRITE_ABANDON",
            Self::WriteRelease => "WRITE_RELEASE",
            Self::ReadRelease => "READ_RELEASE",
            Self::ReadExtend => "READ_EXTEND",
            Self::SemAcquire => "SEM_ACQUIRE",
            Self::SemRelease => "SEM_RELEASE",
            Self::SemExtend => "SEM_EXTEND",
        })
    }
}

impl KindsCase {
    /// The same row, with a subscriber on the release channel of each of `resources`.
    pub const fn heard(self, resources: &'static [&'static str]) -> Self {
        Self {
            heard: resources,
            ..self
        }
    }

    /// The same row, publishing on the release channel of each of `resources`, in order.
    pub const fn publishing(self, resources: &'static [&'static str]) -> Self {
        Self {
            published: resources,
            ..self
        }
    }

    /// Wrong copies of this row, each with one expectation changed (the reply; the keys
    /// afterwards, where another state is at hand; what a subscriber hears, where the row
    /// has one), every one of which a target that keeps the contract fails when the script
    /// runs: the negative control that shows no kinds row passes whatever happens.
    pub fn wrong_copies(self) -> Vec<Self> {
        let reply = match self.reply {
            KindsReply::Int(n) => KindsReply::Int(if n == 0 { 1 } else { 0 }),
            KindsReply::Error(_) | KindsReply::Returned(_) => KindsReply::Int(0),
        };
        let mut copies = vec![Self { reply, ..self }];
        let nothing = &NOTHING[..self.after.len()];
        let after = if self.after != self.before {
            Some(self.before)
        } else {
            (self.after != nothing).then_some(nothing)
        };
        copies.extend(after.map(|after| Self { after, ..self }));
        if !self.heard.is_empty() {
            let published = if self.published.is_empty() {
                self.heard
            } else {
                &[]
            };
            copies.push(Self { published, ..self });
        }
        copies
    }
}

/// Every key of a row absent.
const NOTHING: [KindsKey; 3] = [Absent; 3];

/// A row that publishes nothing and has no subscriber.
const fn row(
    script: KindsScript,
    name: &'static str,
    (before, argv): (&'static [KindsKey], &'static [&'static str]),
    reply: KindsReply,
    after: &'static [KindsKey],
) -> KindsCase {
    KindsCase {
        script,
        name,
        before,
        argv,
        reply,
        after,
        heard: &[],
        published: &[],
    }
}

use KindsKey::{Absent, Holders, List, Str};
use KindsScript::{
    MultiAcquire, MultiExtend, MultiRelease, ReadAcquire, ReadExtend, ReadRelease, SemAcquire,
    SemExtend, SemRelease, WriteAbandon, WriteAcquire, WriteRelease,
};
use Life::{Command, Expired, Forever, Long, Now, Patience, Short};

/// `ARGV[2]` of every acquisition and extension: [`TTL_MS`].
const TTL: &str = "100000";
/// Token `t`, ttl [`TTL_MS`].
const T: &[&str] = &["t", TTL];
/// Token `t`, ttl [`TTL_MS`], patience [`PATIENCE_MS`].
const T_WAIT: &[&str] = &["t", TTL, "50000"];
/// Token `t`, ttl [`TTL_MS`], k = 2.
const T_K2: &[&str] = &["t", TTL, "2"];
/// Token `t` alone (a release).
const TOKEN: &[&str] = &["t"];
/// A key of ours, far from expiry.
const OURS: KindsKey = Str("t", Long);
/// A key of ours set by the command.
const SET: KindsKey = Str("t", Command);
/// Another's key (`u`).
const THEIRS: KindsKey = Str("u", Long);
/// A sorted set under a lock's name: a key of another type.
const ZSET: KindsKey = Holders(&[("x", Long)], Forever);
/// A string where a sorted set belongs.
const STRING: KindsKey = Str("x", Forever);
/// A writer holds R (another's token `u`).
const WRITER: KindsKey = Str("u", Long);
/// Another writer waits (its token `w`).
const WAITING: KindsKey = Str("w", Long);
/// One live reader `u`, the set expiring with it.
const READER: KindsKey = Holders(&[("u", Short)], Short);
/// Our slot alone, the set expiring with it.
const OUR_SLOT: KindsKey = Holders(&[("t", Short)], Short);
/// Our slot set or moved by the command, alone.
const SLOT_SET: KindsKey = Holders(&[("t", Command)], Command);
/// Another live holder `u`, far from expiry.
const LONG_HOLDER: KindsKey = Holders(&[("u", Long)], Long);
/// k = 2 in place for `life`.
const fn k2(life: Life) -> KindsKey {
    Str("2", life)
}

/// The kinds part of the contract: every kinds script on the states of its keys that
/// matter, run by `run_kinds`.
#[rustfmt::skip]
pub const KINDS_CONTRACT: &[KindsCase] = &[
    // MULTI_ACQUIRE: all or none; any key of any type is taken.
    row(MultiAcquire, "all free", (&[Absent, Absent], T), KindsReply::Int(1), &[SET, SET]),
    row(MultiAcquire, "one taken: none set", (&[Absent, THEIRS], T), KindsReply::Int(0), &[Absent, THEIRS]),
    row(MultiAcquire, "already ours: still taken", (&[OURS, Absent], T), KindsReply::Int(0), &[OURS, Absent]),
    row(MultiAcquire, "a sorted set exists", (&[Absent, ZSET], T), KindsReply::Int(0), &[Absent, ZSET]),
    row(MultiAcquire, "a list exists", (&[List, Absent], T), KindsReply::Int(0), &[List, Absent]),
    row(MultiAcquire, "a bad ttl sets nothing", (&[Absent, Absent], &["t", "0"]), KindsReply::Error("ERR invalid expire time"), &[Absent, Absent]),
    // MULTI_RELEASE: each key of ours deleted and announced on its own channel.
    row(MultiRelease, "both ours", (&[OURS, OURS], TOKEN), KindsReply::Int(1), &[Absent, Absent]).publishing(&["a", "b"]),
    row(MultiRelease, "both ours, b awaited", (&[OURS, OURS], TOKEN), KindsReply::Int(2), &[Absent, Absent]).publishing(&["a", "b"]).heard(&["b"]),
    row(MultiRelease, "ours and another's", (&[OURS, THEIRS], TOKEN), KindsReply::Int(1), &[Absent, THEIRS]).publishing(&["a"]),
    row(MultiRelease, "ours and another's, both awaited", (&[OURS, THEIRS], TOKEN), KindsReply::Int(2), &[Absent, THEIRS]).publishing(&["a"]).heard(&["a", "b"]),
    row(MultiRelease, "another's and missing", (&[THEIRS, Absent], TOKEN), KindsReply::Int(0), &[THEIRS, Absent]),
    row(MultiRelease, "another's and missing, both awaited", (&[THEIRS, Absent], TOKEN), KindsReply::Int(0), &[THEIRS, Absent]).heard(&["a", "b"]),
    row(MultiRelease, "all missing", (&[Absent, Absent], TOKEN), KindsReply::Int(-1), &[Absent, Absent]),
    row(MultiRelease, "a wrong type stops it, a stays released", (&[OURS, ZSET], TOKEN), KindsReply::Error("WRONGTYPE"), &[Absent, ZSET]).publishing(&["a"]),
    row(MultiRelease, "a wrong type stops it, a awaited", (&[OURS, ZSET], TOKEN), KindsReply::Error("WRONGTYPE"), &[Absent, ZSET]).publishing(&["a"]).heard(&["a"]),
    // MULTI_EXTEND: every key ours, or nothing moves.
    row(MultiExtend, "both ours", (&[OURS, OURS], T), KindsReply::Int(1), &[SET, SET]),
    row(MultiExtend, "one another's: nothing moves", (&[OURS, THEIRS], T), KindsReply::Int(0), &[OURS, THEIRS]),
    row(MultiExtend, "one expired: nothing moves", (&[OURS, Absent], T), KindsReply::Int(0), &[OURS, Absent]),
    row(MultiExtend, "a wrong type", (&[OURS, ZSET], T), KindsReply::Error("WRONGTYPE"), &[OURS, ZSET]),
    // READ_ACQUIRE: prune, then in unless a writer holds or waits; the set lives at least ttl.
    row(ReadAcquire, "free", (&[Absent, Absent, Absent], T), KindsReply::Int(1), &[Absent, SLOT_SET, Absent]),
    row(ReadAcquire, "beside a reader: the set's expiry grows", (&[Absent, READER, Absent], T), KindsReply::Int(1), &[Absent, Holders(&[("u", Short), ("t", Command)], Command), Absent]),
    row(ReadAcquire, "beside a longer reader: the expiry stays", (&[Absent, LONG_HOLDER, Absent], T), KindsReply::Int(1), &[Absent, Holders(&[("u", Long), ("t", Command)], Long), Absent]),
    row(ReadAcquire, "the expired pruned: the emptied set goes, its expiry too", (&[Absent, Holders(&[("u", Now), ("v", Expired)], Long), Absent], T), KindsReply::Int(1), &[Absent, SLOT_SET, Absent]),
    row(ReadAcquire, "a writer holds", (&[WRITER, READER, Absent], T), KindsReply::Int(0), &[WRITER, READER, Absent]),
    row(ReadAcquire, "a writer waits", (&[Absent, READER, WAITING], T), KindsReply::Int(0), &[Absent, READER, WAITING]),
    row(ReadAcquire, "refused, the expired still pruned", (&[WRITER, Holders(&[("v", Expired)], Command), Absent], T), KindsReply::Int(0), &[WRITER, Absent, Absent]),
    row(ReadAcquire, "R of another type excludes", (&[Holders(&[("n", Long)], Forever), Absent, Absent], T), KindsReply::Int(0), &[Holders(&[("n", Long)], Forever), Absent, Absent]),
    row(ReadAcquire, "readers of the wrong type", (&[Absent, STRING, Absent], T), KindsReply::Error("WRONGTYPE"), &[Absent, STRING, Absent]),
    row(ReadAcquire, "ours again: the deadline moves", (&[Absent, OUR_SLOT, Absent], T), KindsReply::Int(1), &[Absent, SLOT_SET, Absent]),
    // WRITE_ACQUIRE: in when R is free and no live reader is left; else the marker.
    row(WriteAcquire, "free", (&[Absent, Absent, Absent], T_WAIT), KindsReply::Int(1), &[SET, Absent, Absent]),
    row(WriteAcquire, "free: another's marker goes", (&[Absent, Absent, WAITING], T_WAIT), KindsReply::Int(1), &[SET, Absent, Absent]),
    row(WriteAcquire, "a live reader: wait", (&[Absent, READER, Absent], T_WAIT), KindsReply::Int(0), &[Absent, READER, Str("t", Patience)]),
    row(WriteAcquire, "a live reader, no patience", (&[Absent, READER, Absent], &["t", TTL, "0"]), KindsReply::Int(0), &[Absent, READER, Absent]),
    row(WriteAcquire, "only expired readers", (&[Absent, Holders(&[("u", Now)], Command), Absent], T_WAIT), KindsReply::Int(1), &[SET, Absent, Absent]),
    row(WriteAcquire, "a writer holds: our marker replaces another's", (&[WRITER, Absent, WAITING], T_WAIT), KindsReply::Int(0), &[WRITER, Absent, Str("t", Patience)]),
    row(WriteAcquire, "readers of the wrong type", (&[Absent, STRING, Absent], T_WAIT), KindsReply::Error("WRONGTYPE"), &[Absent, STRING, Absent]),
    // WRITE_ABANDON: only our own marker goes.
    row(WriteAbandon, "ours", (&[Str("t", Patience)], TOKEN), KindsReply::Int(1), &[Absent]),
    row(WriteAbandon, "another's", (&[WAITING], TOKEN), KindsReply::Int(0), &[WAITING]),
    row(WriteAbandon, "none", (&[Absent], TOKEN), KindsReply::Int(0), &[Absent]),
    row(WriteAbandon, "wrong type", (&[READER], TOKEN), KindsReply::Error("WRONGTYPE"), &[READER]),
    // WRITE_RELEASE: the mutex's release of R, and only our own marker deleted.
    row(WriteRelease, "ours", (&[OURS, Absent, Absent], TOKEN), KindsReply::Int(1), &[Absent, Absent, Absent]).publishing(&["r"]),
    row(WriteRelease, "ours, a waiter heard", (&[OURS, Absent, Absent], TOKEN), KindsReply::Int(2), &[Absent, Absent, Absent]).publishing(&["r"]).heard(&["r"]),
    row(WriteRelease, "ours and our marker", (&[OURS, Absent, Str("t", Patience)], TOKEN), KindsReply::Int(1), &[Absent, Absent, Absent]).publishing(&["r"]),
    row(WriteRelease, "another's marker stays", (&[OURS, Absent, WAITING], TOKEN), KindsReply::Int(1), &[Absent, Absent, WAITING]).publishing(&["r"]),
    row(WriteRelease, "R gone, our marker goes", (&[Absent, Absent, Str("t", Patience)], TOKEN), KindsReply::Int(-1), &[Absent, Absent, Absent]),
    row(WriteRelease, "another holds R, our marker goes", (&[WRITER, Absent, Str("t", Patience)], TOKEN), KindsReply::Int(0), &[WRITER, Absent, Absent]),
    row(WriteRelease, "a marker of another type stays", (&[OURS, Absent, READER], TOKEN), KindsReply::Int(1), &[Absent, Absent, READER]).publishing(&["r"]),
    row(WriteRelease, "R of another type", (&[READER, Absent, Str("t", Patience)], TOKEN), KindsReply::Error("WRONGTYPE"), &[READER, Absent, Str("t", Patience)]),
    // READ_RELEASE: announced only when the last live reader leaves.
    row(ReadRelease, "the last reader", (&[Absent, OUR_SLOT], TOKEN), KindsReply::Int(1), &[Absent, Absent]).publishing(&["r"]),
    row(ReadRelease, "the last reader, a writer waits", (&[Absent, OUR_SLOT], TOKEN), KindsReply::Int(2), &[Absent, Absent]).publishing(&["r"]).heard(&["r"]),
    row(ReadRelease, "another reader stays: no announcement", (&[Absent, Holders(&[("t", Short), ("u", Long)], Long)], TOKEN), KindsReply::Int(1), &[Absent, LONG_HOLDER]),
    row(ReadRelease, "another reader stays, a writer waits: no announcement", (&[Absent, Holders(&[("t", Short), ("u", Long)], Long)], TOKEN), KindsReply::Int(1), &[Absent, LONG_HOLDER]).heard(&["r"]),
    row(ReadRelease, "not a reader", (&[Absent, LONG_HOLDER], TOKEN), KindsReply::Int(-1), &[Absent, LONG_HOLDER]),
    row(ReadRelease, "our slot expired", (&[Absent, Holders(&[("t", Now), ("u", Long)], Long)], TOKEN), KindsReply::Int(-1), &[Absent, LONG_HOLDER]),
    row(ReadRelease, "no readers", (&[Absent, Absent], TOKEN), KindsReply::Int(-1), &[Absent, Absent]),
    row(ReadRelease, "the last live reader", (&[Absent, Holders(&[("t", Short), ("u", Expired)], Short)], TOKEN), KindsReply::Int(1), &[Absent, Absent]).publishing(&["r"]),
    row(ReadRelease, "wrong type", (&[Absent, STRING], TOKEN), KindsReply::Error("WRONGTYPE"), &[Absent, STRING]),
    // READ_EXTEND: moves a live slot, never re-creates a pruned one.
    row(ReadExtend, "ours", (&[OUR_SLOT], T), KindsReply::Int(1), &[SLOT_SET]),
    row(ReadExtend, "ours, the set lives longer", (&[Holders(&[("t", Short), ("u", Long)], Long)], T), KindsReply::Int(1), &[Holders(&[("t", Command), ("u", Long)], Long)]),
    row(ReadExtend, "ours expired: not re-created", (&[Holders(&[("t", Now), ("u", Short)], Short)], T), KindsReply::Int(0), &[READER]),
    row(ReadExtend, "not a reader", (&[READER], T), KindsReply::Int(0), &[READER]),
    row(ReadExtend, "no readers", (&[Absent], T), KindsReply::Int(0), &[Absent]),
    row(ReadExtend, "wrong type", (&[STRING], T), KindsReply::Error("WRONGTYPE"), &[STRING]),
    // SEM_ACQUIRE: prune, refuse another k in place, refuse when k live, else a slot.
    row(SemAcquire, "free", (&[Absent, Absent, Absent], T_K2), KindsReply::Int(1), &[SLOT_SET, k2(Command), Absent]),
    row(SemAcquire, "one of two taken", (&[READER, k2(Short), Absent], T_K2), KindsReply::Int(1), &[Holders(&[("u", Short), ("t", Command)], Command), k2(Command), Absent]),
    row(SemAcquire, "two of two taken", (&[Holders(&[("u", Short), ("v", Short)], Short), k2(Short), Absent], T_K2), KindsReply::Int(0), &[Holders(&[("u", Short), ("v", Short)], Short), k2(Short), Absent]),
    row(SemAcquire, "an expired holder is not counted", (&[Holders(&[("u", Now), ("v", Short)], Short), k2(Short), Absent], T_K2), KindsReply::Int(1), &[Holders(&[("v", Short), ("t", Command)], Command), k2(Command), Absent]),
    row(SemAcquire, "holders under another k", (&[READER, Str("3", Short), Absent], T_K2), KindsReply::Returned("PERMITS 3"), &[READER, Str("3", Short), Absent]),
    row(SemAcquire, "k is compared as a string", (&[READER, k2(Short), Absent], &["t", TTL, "02"]), KindsReply::Returned("PERMITS 2"), &[READER, k2(Short), Absent]),
    row(SemAcquire, "another k, no live holder: ours replaces it", (&[Holders(&[("u", Expired)], Short), Str("3", Short), Absent], T_K2), KindsReply::Int(1), &[SLOT_SET, k2(Command), Absent]),
    row(SemAcquire, "a live holder without a limit key", (&[READER, Absent, Absent], T_K2), KindsReply::Int(1), &[Holders(&[("u", Short), ("t", Command)], Command), k2(Command), Absent]),
    row(SemAcquire, "a longer set: the limit follows it", (&[LONG_HOLDER, k2(Long), Absent], T_K2), KindsReply::Int(1), &[Holders(&[("u", Long), ("t", Command)], Long), k2(Long), Absent]),
    row(SemAcquire, "permits of the wrong type", (&[STRING, Absent, Absent], T_K2), KindsReply::Error("WRONGTYPE"), &[STRING, Absent, Absent]),
    row(SemAcquire, "a limit of the wrong type", (&[Absent, List, Absent], T_K2), KindsReply::Error("WRONGTYPE"), &[Absent, List, Absent]),
    // SEM_RELEASE: every freed permit announced; the limit key left to expire.
    row(SemRelease, "the only holder: the limit stays", (&[OUR_SLOT, k2(Short), Absent], TOKEN), KindsReply::Int(1), &[Absent, k2(Short), Absent]).publishing(&["r"]),
    row(SemRelease, "a waiter heard", (&[OUR_SLOT, k2(Short), Absent], TOKEN), KindsReply::Int(2), &[Absent, k2(Short), Absent]).publishing(&["r"]).heard(&["r"]),
    row(SemRelease, "another holder stays: still announced", (&[Holders(&[("t", Short), ("u", Long)], Long), k2(Long), Absent], TOKEN), KindsReply::Int(1), &[LONG_HOLDER, k2(Long), Absent]).publishing(&["r"]),
    row(SemRelease, "another holder stays, a waiter heard", (&[Holders(&[("t", Short), ("u", Long)], Long), k2(Long), Absent], TOKEN), KindsReply::Int(2), &[LONG_HOLDER, k2(Long), Absent]).publishing(&["r"]).heard(&["r"]),
    row(SemRelease, "not a holder", (&[LONG_HOLDER, k2(Long), Absent], TOKEN), KindsReply::Int(-1), &[LONG_HOLDER, k2(Long), Absent]),
    row(SemRelease, "not a holder, a waiter listening", (&[LONG_HOLDER, k2(Long), Absent], TOKEN), KindsReply::Int(-1), &[LONG_HOLDER, k2(Long), Absent]).heard(&["r"]),
    row(SemRelease, "our permit expired", (&[Holders(&[("t", Now), ("u", Long)], Long), k2(Long), Absent], TOKEN), KindsReply::Int(-1), &[LONG_HOLDER, k2(Long), Absent]),
    row(SemRelease, "wrong type", (&[STRING, Absent, Absent], TOKEN), KindsReply::Error("WRONGTYPE"), &[STRING, Absent, Absent]),
    // SEM_EXTEND: READ_EXTEND's rule, the limit key following the set.
    row(SemExtend, "ours", (&[OUR_SLOT, k2(Short)], T), KindsReply::Int(1), &[SLOT_SET, k2(Command)]),
    row(SemExtend, "ours, the set lives longer", (&[Holders(&[("t", Short), ("u", Long)], Long), k2(Long)], T), KindsReply::Int(1), &[Holders(&[("t", Command), ("u", Long)], Long), k2(Long)]),
    row(SemExtend, "ours expired: not re-created", (&[Holders(&[("t", Now), ("u", Short)], Short), k2(Short)], T), KindsReply::Int(0), &[READER, k2(Short)]),
    row(SemExtend, "no holders", (&[Absent, Absent], T), KindsReply::Int(0), &[Absent, Absent]),
    row(SemExtend, "ours, the limit key gone: not re-created", (&[OUR_SLOT, Absent], T), KindsReply::Int(1), &[SLOT_SET, Absent]),
    row(SemExtend, "wrong type", (&[STRING, Absent], T), KindsReply::Error("WRONGTYPE"), &[STRING, Absent]),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_has_a_state_per_key_and_a_name_of_its_own() {
        for (i, case) in KINDS_CONTRACT.iter().enumerate() {
            let n = case.script.keys().len();
            assert_eq!(case.before.len(), n, "{}: {}", case.script, case.name);
            assert_eq!(case.after.len(), n, "{}: {}", case.script, case.name);
            let same = KINDS_CONTRACT[..i]
                .iter()
                .any(|c| c.script == case.script && c.name == case.name);
            assert!(!same, "{}: {} twice", case.script, case.name);
        }
        for script in KindsScript::ALL {
            assert!(
                KINDS_CONTRACT.iter().any(|c| c.script == script),
                "{script}"
            );
        }
    }

    #[test]
    fn the_lives_are_disjoint_once_read_back() {
        let lives = [Short, Patience, Command, Long];
        for pair in lives.windows(2) {
            let (lo, hi) = (pair[0].ms().unwrap(), pair[1].ms().unwrap());
            assert!(lo < hi - SLACK_MS, "{pair:?}");
        }
        assert!(Now.ms().unwrap() < Short.ms().unwrap() - SLACK_MS);
        assert!(Expired.ms().unwrap() < Now.ms().unwrap() - SLACK_MS);
    }

    #[test]
    fn the_ttl_argument_is_the_tables_ttl() {
        assert_eq!(TTL.parse::<u64>().unwrap(), TTL_MS);
        assert_eq!(T_WAIT[2].parse::<u64>().unwrap(), PATIENCE_MS);
    }
}
