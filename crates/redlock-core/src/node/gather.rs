//! The replies of a request written as several commands (node/mod.rs), read as its one
//! reply: a fenced pipeline's `SET`, `ZADD` and `ZINCRBY` (fencing.rs), a negative
//! control's multi-lock set key by key (command.rs, `SetEach`), and an announced
//! native release's delete and `PUBLISH` (server.rs, `fold_release`).

use crate::resp::Reply;
use crate::server::{self, NativeUse};

/// The replies of a fenced pipeline: `SET`, `ZADD`, `ZINCRBY`.
const FENCED_PIPELINE_REPLIES: usize = 3;

/// The replies read so far of the request at the front of a connection's FIFO.
#[derive(Debug, Default)]
pub(crate) struct Gathered {
    /// A fenced pipeline's replies, until its `ZINCRBY`'s comes.
    replies: Vec<Reply>,
    /// The delete's reply of an announced native release, until its `PUBLISH`'s comes (a
    /// field, not `replies`: no allocation per release).
    deleted: Option<Reply>,
}

impl Gathered {
    /// `reply` to a request that used `native` (`announced`: a release followed by its
    /// `PUBLISH`): the request's one reply once its last part is read, else `None`.
    /// `count_waiters` false is a negative control's (server.rs, `fold_release`).
    #[inline]
    pub(crate) fn gather(
        &mut self,
        (native, announced): (Option<NativeUse>, bool),
        reply: Reply,
        count_waiters: bool,
    ) -> Option<Reply> {
        match (native, announced) {
            (Some(NativeUse::Fence), _) => self.part(reply, FENCED_PIPELINE_REPLIES),
            // A negative control's multi-lock set key by key (command.rs, `SetEach`).
            (Some(NativeUse::Each(keys)), _) => self.part(reply, keys as usize),
            // A native release and its `PUBLISH`, read as the release script's one reply.
            (Some(NativeUse::Release), true) => match self.deleted.take() {
                None => {
                    self.deleted = Some(reply);
                    None
                }
                Some(deleted) => Some(server::fold_release(deleted, reply, count_waiters)),
            },
            _ => Some(reply),
        }
    }

    /// One reply of a request written as `parts` commands: all of them, once the last one
    /// is read.
    fn part(&mut self, reply: Reply, parts: usize) -> Option<Reply> {
        self.replies.push(reply);
        if self.replies.len() < parts {
            return None;
        }
        Some(Reply::Replies(std::mem::take(&mut self.replies)))
    }

    /// Forgets the parts read (the connection is gone).
    pub(crate) fn clear(&mut self) {
        self.replies.clear();
        self.deleted = None;
    }
}
