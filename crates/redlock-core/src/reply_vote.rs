//! How a node's reply to a command reads as a vote ([`CommandKind::vote`]): one match over
//! the command and the reply, the one place a reply's meaning is decided (everything from
//! the network is untrusted: a reply that is not one the command answers is a fault).

use crate::command::{CommandKind, Native, ScriptUse};
use crate::fencing::{self, PipelineReply};
use crate::io::NodeFault;
use crate::kinds::args::first_key;
use crate::resp::Reply;
use crate::server;
use crate::vote::Vote;
use crate::waiters::{self, QueueUse};

impl CommandKind {
    /// Reads `reply` as this command's vote.
    #[inline]
    pub(crate) fn vote(self, reply: &Reply) -> Vote {
        match (self, reply) {
            (Self::Native(Native::FencedPipeline { .. }), _) => pipeline_vote(reply),
            (Self::Native(Native::SetEach { .. }), _) => match first_key(reply) {
                Some(answer) => answer.into(),
                None => Vote::Fault(unexpected(reply)),
            },
            (_, Reply::Error(_)) => self.vote_error(reply),
            (Self::SetNxPx | Self::Native(Native::SetIfeq), Reply::Ok) => Vote::Yes,
            (Self::SetNxPx | Self::Native(Native::SetIfeq), Reply::Nil) => Vote::No,
            (Self::EvalSha(_, usage) | Self::Eval(_, usage), Reply::Integer(i)) => {
                match (usage, i) {
                    (ScriptUse::Kind(k), &n) => match k.answer(n) {
                        Some(answer) => answer.into(),
                        None => Vote::Fault(unexpected(reply)),
                    },
                    (ScriptUse::FencedAcquire, &n) => match fencing::counter(n) {
                        Some(counter) => Vote::Counter(counter),
                        None => Vote::Fault(unexpected(reply)),
                    },
                    (_, 1) | (ScriptUse::Release, 2) => Vote::Yes,
                    (_, 0) => Vote::No,
                    (ScriptUse::Release, -1) => Vote::Missing,
                    _ => Vote::Fault(unexpected(reply)),
                }
            }
            (
                Self::EvalSha(_, ScriptUse::Queue(QueueUse::Acquire))
                | Self::Eval(_, ScriptUse::Queue(QueueUse::Acquire)),
                Reply::Array(items),
            ) => waiters::queued_vote(items).unwrap_or_else(|| Vote::Fault(unexpected(reply))),
            // QUEUE_RELEASE: the outcome as the release script's (the rank is the next
            // call's: lock/release.rs, `read_release`).
            (
                Self::EvalSha(_, ScriptUse::Queue(QueueUse::Release))
                | Self::Eval(_, ScriptUse::Queue(QueueUse::Release)),
                Reply::Array(items),
            ) => match waiters::released(items) {
                Some((1 | 2, _)) => Vote::Yes,
                Some((0, _)) => Vote::No,
                Some((-1, _)) => Vote::Missing,
                _ => Vote::Fault(unexpected(reply)),
            },
            (Self::EvalSha(_, ScriptUse::FencedAcquire), Reply::Nil)
            | (Self::Eval(_, ScriptUse::FencedAcquire), Reply::Nil) => Vote::No,
            // 2: deleted, and someone was subscribed (server.rs, `fold_release`).
            (Self::Native(Native::Delifeq | Native::Delex), Reply::Integer(1 | 2)) => Vote::Yes,
            (Self::Native(Native::Delifeq | Native::Delex), Reply::Integer(0)) => {
                Vote::NotHeldOrMissing
            }
            (Self::Get, Reply::Bulk(value)) => Vote::Value(Some(value.clone())),
            (Self::Get, Reply::Nil) => Vote::Value(None),
            (Self::Pttl, Reply::Integer(ms)) if *ms >= -2 => Vote::Ttl(*ms),
            (Self::Read(read), _) if read.answers(reply) => Vote::Read(reply.clone()),
            _ => Vote::Fault(unexpected(reply)),
        }
    }

    fn vote_error(self, reply: &Reply) -> Vote {
        // A lock kind's own error reply, such as the semaphore's `-PERMITS k`.
        if let (
            Self::EvalSha(_, ScriptUse::Kind(k)) | Self::Eval(_, ScriptUse::Kind(k)),
            Reply::Error(m),
        ) = (self, reply)
            && let Some(in_place) = k.permits(m)
        {
            return Vote::Permits(in_place);
        }
        let refused = NodeFault::Server {
            command: self.name(),
            message: reply.error_message().unwrap_or_default(),
        };
        match self {
            Self::EvalSha(..) if reply.is_error_with(b"NOSCRIPT") => Vote::NoScript,
            Self::Native(_) if server::is_unsupported(reply) => Vote::Unsupported(refused),
            _ => Vote::Fault(refused),
        }
    }
}

/// The fenced pipeline's three replies read as one vote (fencing.rs, `read_pipeline`): an
/// error in any part is that command's refusal; "unknown command" or a syntax error (a
/// server without `ZADD … GT`) asks for the script instead.
fn pipeline_vote(reply: &Reply) -> Vote {
    match fencing::read_pipeline(reply) {
        PipelineReply::Counter(n) => Vote::Counter(n),
        PipelineReply::NotLocked => Vote::No,
        PipelineReply::Refused(command, part) => {
            let refused = NodeFault::Server {
                command,
                message: part.error_message().unwrap_or_default(),
            };
            match server::is_unsupported(part) {
                true => Vote::Unsupported(refused),
                false => Vote::Fault(refused),
            }
        }
        PipelineReply::Unexpected(part) => Vote::Fault(unexpected(part)),
    }
}

fn unexpected(reply: &Reply) -> NodeFault {
    NodeFault::Protocol(format!("unexpected reply {reply:?}"))
}
