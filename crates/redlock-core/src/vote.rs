//! [`Vote`]: a node's reply to one command, read as what it says about the lock (command.rs,
//! `CommandKind::vote`, reads it; round.rs counts it; the phases under lock/ read a round's
//! votes).

use bytes::Bytes;

use crate::io::NodeFault;
use crate::kinds::args::Answer;

/// A node's reply read as a vote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Vote {
    /// Locked / extended / released.
    Yes,
    /// Held by another token / not ours.
    No,
    /// Release only: the key was already gone.
    Missing,
    /// Release by a native command only: nothing was deleted, because the key held another
    /// value or was gone (`DELIFEQ` and `DELEX` answer 0 to both).
    NotHeldOrMissing,
    /// A native command the server does not have (unknown command, syntax error): resend
    /// as the script. The fault is the refusal, reported if no resend is possible.
    Unsupported(NodeFault),
    /// The script is not cached on this node: resend as `EVAL`.
    NoScript,
    /// Fenced acquire only: locked, and the node's fencing counter is now this number.
    Counter(u64),
    /// A waiter's attempt only (waiters/mod.rs): not granted; the waiter's place is `rank`
    /// (0: the head) and its ticket there `ticket`.
    Queued {
        /// The waiter's position in the node's queue, from 0.
        rank: u64,
        /// The ticket the node ordered it by.
        ticket: u64,
    },
    /// Semaphore acquire only: holders are in place with this other number of permits
    /// (`-PERMITS k`, kinds/mod.rs): a "no" that may decide the attempt as a usage error.
    Permits(u32),
    /// `GET` only: the stored value, or `None` when there is no key.
    Value(Option<Bytes>),
    /// `PTTL` only: the remaining time to live in ms, `-1` without one, `-2` without a key.
    Ttl(i64),
    /// An inspection's `ZREVRANGE`, `ZCARD` or `TIME` only: the reply, an array or a count,
    /// read by inspection/reply.rs (its contents are still the node's, untrusted).
    Read(crate::resp::Reply),
    /// The node failed.
    Fault(NodeFault),
}

/// A kind's script answer (kinds/args.rs) as the vote it is.
impl From<Answer> for Vote {
    fn from(answer: Answer) -> Self {
        match answer {
            Answer::Yes => Self::Yes,
            Answer::No => Self::No,
            Answer::Missing => Self::Missing,
        }
    }
}
