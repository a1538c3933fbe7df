//! Deliberate bugs for the simulation's negative controls. Option resolution
//! ([`LockOptions::resolve`](crate::LockOptions)) reads them: each one changes a resolved
//! parameter of the lock, never the lock's code; [`Mutant::ForgetRunId`] and
//! [`Mutant::SightingAtConnection`] alone are read where a node's connection is set up
//! (health.rs, `NodeHealth::new`), as settings of the node, and
//! [`Mutant::LineDeafToWaiters`], [`Mutant::LateRefusalDropped`],
//! [`Mutant::DeafToAnnouncements`], [`Mutant::SilentWaitersUnheard`],
//! [`Mutant::UnheardWaitersDoNotPoll`] and [`Mutant::ChannelKeptThroughRelease`] where the
//! client is built, as its controls (client/controls.rs).

/// Deliberate bugs for the simulation's negative controls (test-only feature `_mutants`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(unreachable_pub, dead_code)]
pub enum Mutant {
    /// Quorum lowered to N/2.
    QuorumHalf,
    /// Validity counted from the quorum reply instead of the attempt start.
    ValidityFromQuorum,
    /// Extensions sent after the deadline that re-create missing keys (RedLock.net).
    ResurrectingExtend,
    /// A supplied token stored as is, the same in every attempt and lock call, instead
    /// of stamped with a nonce per attempt (the bug the late-delivery fault finds).
    SharedStoredValue,
    /// A fenced lock hands out the smallest counter of its quorum instead of the largest
    /// (the write-back still raises the nodes behind to the largest).
    FenceMin,
    /// A fenced lock takes the largest counter as final even when fewer than a quorum
    /// answered it: no write-back.
    FenceNoWriteBack,
    /// A fence write-back counts a node that answers 0 (our key is gone there) as raised.
    FenceCountRefused,
    /// The fenced acquire script without its floor
    /// ([`NO_FLOOR_FENCED_ACQUIRE_SCRIPT`](crate::NO_FLOOR_FENCED_ACQUIRE_SCRIPT)).
    FenceNoFloor,
    /// Extensions refused for good (`WRONGTYPE`, `NOPERM`, ...) are retried like any failure
    /// until the lock's deadline, instead of lost at once.
    PermanentRetried,
    /// A release decided at a quorum drops its round: the nodes still pending, and those
    /// whose connection broke, get nothing more (their keys live until their ttl).
    ReleaseNotFinished,
    /// The fenced pipeline with a floor of 0 (`ZADD fence GT 0 n`): the pipeline's own
    /// no-floor bug, where the script is correct.
    FencePipelineNoFloor,
    /// The restart quarantine forgets each node's run id at every reconnection, so a
    /// restart shows only through the node's uptime (which its wall clock can fool).
    ForgetRunId,
    /// The restart quarantine's stepped-uptime defence compares a new process's start with
    /// the moment the old one's connection read its `INFO`, not with its last reply: a
    /// long-lived connection hides a stepped uptime.
    SightingAtConnection,
    /// The restart quarantine's window is the ttl and its drift even for fenced locks, which
    /// a fencing floor moving once a second does not cover.
    FenceWindowTtlOnly,
    /// A local line of lock calls never hears of other clients' waiters from a native
    /// release (the `PUBLISH` count is not read) and never yields on its own: a waiter
    /// of another client starves while the line hands the lock from call to call.
    LineDeafToWaiters,
    /// A local line ignores waiters' announcements on the waiting channel (notify.rs): it
    /// hears of a waiter of another client only at its next release through the nodes, and
    /// hands the hold from call to call until then.
    DeafToAnnouncements,
    /// A line that listens for waiters on every node never goes through the nodes to hear a
    /// waiter that cannot announce itself (queue.rs, `HEAR_SILENT_WAITERS_EVERY`): such a
    /// waiter waits for the line's courtesy hand-off, past its own retry timer.
    SilentWaitersUnheard,
    /// A waiting call that cannot hear a release or its turn on a quorum of nodes (no RESP3
    /// connection, channels denied) waits for its retry timer or its place's renewal instead
    /// of polling (waiters/mod.rs, `UNHEARD_POLL_EVERY`): as the queue's head it leaves the key
    /// free for up to that long, every other waiter behind it.
    UnheardWaitersDoNotPoll,
    /// A release refused as unsupported (a probed native command) after its round ended
    /// is dropped instead of sent again as the script: the key lives until its ttl.
    LateRefusalDropped,
    /// A lock that kept its release channel while it held keeps it through its own
    /// release, instead of giving it up ahead of a release nothing of its line waits
    /// behind: the release's count of listeners (the script's 2) then counts its own
    /// client, so a line whose call waited once hears itself at every trip through the
    /// nodes, stays contested, and stops handing over.
    ChannelKeptThroughRelease,
    /// A release that placed the next call of its line reads the nodes' count of its
    /// listeners, which counts that call (it listens from when the release goes out): the
    /// line hears its own call as another client's waiter, and stays contested for as long
    /// as it has a call waiting.
    PlacedCallCounted,
    /// A semaphore whose acquire admits k + 1 holders per node (`n > k` for `n >= k`:
    /// [`SEM_ACQUIRE_OFF_BY_ONE_SCRIPT`](crate::SEM_ACQUIRE_OFF_BY_ONE_SCRIPT)).
    SemAcquireOffByOne,
    /// A writer let in with live readers: its acquire checks only R
    /// ([`WRITE_ACQUIRE_IGNORES_READERS_SCRIPT`](crate::WRITE_ACQUIRE_IGNORES_READERS_SCRIPT)).
    WriteAcquireIgnoresReaders,
    /// A reader's extension that re-creates a pruned (expired) slot, sent past the deadline
    /// ([`READ_EXTEND_RESURRECTS_SCRIPT`](crate::READ_EXTEND_RESURRECTS_SCRIPT)).
    ReadExtendResurrects,
    /// A multi-lock sent as one `SET NX PX` per key, pipelined, each node's vote read from
    /// the first key's reply only: the set taken key by key, not atomically.
    MultiFirstKeyVote,
    /// A semaphore acquired with the configuration's majority quorum instead of
    /// floor(kN/(k+1)) + 1.
    SemaphoreMajority,
    /// A hand-over to the next call of a client's line (lock/hand_over.rs) that keeps the
    /// old hold's validity, counted again from the hand-over (`deadline = now + validity`),
    /// instead of its deadline: the new holder believes in the lock after its keys expire.
    HandOverKeepsValidity,
    /// A hand-over to a call that asked for a shorter ttl than the holder's keeps the old
    /// deadline, with more validity left than that ttl could give it: the validity the new
    /// holder is told is above the ttl it asked for.
    HandOverPastTtl,
    /// A waiter that learns from `next:` announcements that it heads the waiters' queue on
    /// a quorum waits for a release after them before it tries: a head announced with no
    /// release behind it (its predecessor left, or the order changed) waits for its place's
    /// renewal while the key is free.
    HeadWaitsForRelease,
    /// A waiters' queue whose acquire never prunes a lapsed place
    /// ([`QUEUE_ACQUIRE_NEVER_PRUNES_SCRIPT`](crate::QUEUE_ACQUIRE_NEVER_PRUNES_SCRIPT)): a
    /// waiter that gave up unheard or died heads the queue for good, and the key is granted
    /// to no one else.
    QueueNeverPrunes,
    /// A waiter that holds by a quorum of grants (grant.rs) counts its validity over the
    /// whole ttl, as if every node had set the key for that long, and does not extend at
    /// once: a node sets it for what is left of the waiter's place when that is shorter, and
    /// the holder believes in the lock after its keys expire.
    GrantSpansTtl,
}
