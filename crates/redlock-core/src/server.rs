//! What a node's server offers a lock, and which commands each node is therefore sent.
//!
//! A release is a compare-and-delete and an extension a compare-and-set of the ttl. Lua
//! scripts do both on every server; newer servers have commands of their own for them,
//! which cost the server far less than a script and need no scripting permission:
//!
//! | server | release | extension | fenced acquisition |
//! |---|---|---|---|
//! | Valkey 9.0 and later | `DELIFEQ key token` | `SET key token IFEQ token PX ttl` | pipeline |
//! | Valkey 8.1 | script | `SET key token IFEQ token PX ttl` | pipeline |
//! | Redis 8.4 and later | `DELEX key IFEQ token` | `SET key token IFEQ token PX ttl` | pipeline |
//! | Redis 6.2 to 8.2, other Valkey | script | script | pipeline |
//! | anything else | script | script | script |
//!
//! The fenced pipeline is `SET key token NX PX ttl`, `ZADD fence GT floor n`, `ZINCRBY
//! fence 1 n`, three commands written together (fencing.rs; docs/safety.md, "Fencing
//! tokens"); a node gets it once its `TIME`, asked after `HELLO`, has been read on the
//! current connection, and the script until then.
//!
//! Each node is asked `HELLO` (no arguments: the protocol stays RESP2) on every new
//! connection, after `AUTH` and `SELECT`, and its reply's `server` and `version` choose the
//! row. The choice is per node, so a cluster of mixed servers works. Three ways out keep
//! this safe against servers that do not match the table:
//! - A server that refuses `HELLO` (an old server, or an ACL that denies it) is *probed*:
//!   it gets the Valkey commands, and each one it answers with "unknown command" or a
//!   syntax error falls back to the script on that node, once.
//! - Any node that answers a native command that way falls back the same, whatever its
//!   `HELLO` said, and its [`NodeCommands::fell_back`] says so.
//! - [`ConfigBuilder::native_commands(false)`](crate::ConfigBuilder::native_commands) sends
//!   scripts only, and no `HELLO`.
//!
//! Until a node's first `HELLO` reply is read it is probed (a request can go out before the
//! reply is read: the cleanup release of an attempt that a faster quorum decided); after a
//! reconnection it keeps what its last connection learned until the new reply is read.
//!
//! The native commands never create a missing key (`SET … IFEQ` on a missing key answers
//! nil and sets nothing), so an extension cannot resurrect an expired lock. The command
//! contract (`crates/redlock-contract`) checks this, and every other row, against Valkey 9
//! and against the simulation's model of each server. Redis 8.4's forms are written from
//! its documentation (`SET … IFEQ`: "if the key doesn't exist, it won't be created";
//! `DELEX`: 1 deleted, 0 not, `WRONGTYPE` on another type) and checked against the model
//! only: no Redis 8.4 build is installable where CI runs. A Redis 8.4 that disagreed would
//! still compare the stored value; only a `SET … IFEQ` that created a missing key could
//! hurt, and `native_commands(false)` is the way out.

use std::fmt;
use std::time::Instant;

use crate::fencing::NodeClock;
use crate::resp::Reply;

/// How a node is asked to release a lock (compare-and-delete).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReleaseCommand {
    /// `EVALSHA` of [`RELEASE_SCRIPT`](crate::RELEASE_SCRIPT), `EVAL` after `-NOSCRIPT`.
    Script,
    /// `DELIFEQ key token` (Valkey 9.0 and later).
    DelIfEq,
    /// `DELEX key IFEQ token` (Redis 8.4 and later).
    DelExIfEq,
}

/// How a node is asked to extend a lock (compare-and-set of the ttl).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ExtendCommand {
    /// `EVALSHA` of [`EXTEND_SCRIPT`](crate::EXTEND_SCRIPT), `EVAL` after `-NOSCRIPT`.
    Script,
    /// `SET key token IFEQ token PX ttl` (Valkey 8.1, Redis 8.4 and later).
    SetIfEq,
}

/// How a node is asked for a fenced acquisition (`SET NX` and the fencing counter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FenceCommand {
    /// `EVALSHA` of [`FENCED_ACQUIRE_SCRIPT`](crate::FENCED_ACQUIRE_SCRIPT), `EVAL` after
    /// `-NOSCRIPT`: the floor comes from the node's own `TIME`.
    Script,
    /// No script: `SET key token NX PX ttl`, `ZADD fence GT floor n`, `ZINCRBY fence 1 n`
    /// written back to back, with the floor from the node's clock as the client estimates
    /// it (Redis 6.2 and later, Valkey; docs/safety.md, "Fencing"). Used for a node only
    /// once its `TIME` has been read on the current connection.
    Pipeline,
}

/// The server family a `HELLO` reply names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServerFamily {
    /// `server: redis`.
    Redis,
    /// `server: valkey`.
    Valkey,
    /// Any other name.
    Other,
}

/// A server's name and version, as its `HELLO` reply gives them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerVersion {
    /// Which server.
    pub family: ServerFamily,
    /// `major.minor.patch`; a part the server did not give (or not as a number) is 0.
    pub version: (u16, u16, u16),
}

impl fmt::Display for ServerVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self.family {
            ServerFamily::Redis => "redis",
            ServerFamily::Valkey => "valkey",
            ServerFamily::Other => "another server",
        };
        let (major, minor, patch) = self.version;
        write!(f, "{name} {major}.{minor}.{patch}")
    }
}

/// How the commands of a node were chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CommandSource {
    /// Scripts: native commands are turned off, or the node's `HELLO` reply named no
    /// server we know.
    Default,
    /// From the node's `HELLO` reply.
    Hello(ServerVersion),
    /// No `HELLO` reply read yet, or the node refused `HELLO`: native commands are tried,
    /// each falling back to its script on "unknown command" or a syntax error.
    Probing,
}

/// The commands one node is sent for release and extension, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeCommands {
    /// How the node releases.
    pub release: ReleaseCommand,
    /// How the node extends.
    pub extend: ExtendCommand,
    /// How the node takes a fenced lock.
    pub fence: FenceCommand,
    /// How these were chosen.
    pub source: CommandSource,
    /// The native command this node last refused as unknown or a syntax error (`DELIFEQ`,
    /// `DELEX` or `SET`): the node has used the script for it since.
    pub fell_back: Option<&'static str>,
}

impl NodeCommands {
    /// Scripts for both, chosen by default.
    pub const SCRIPTS: Self = Self {
        release: ReleaseCommand::Script,
        extend: ExtendCommand::Script,
        fence: FenceCommand::Script,
        source: CommandSource::Default,
        fell_back: None,
    };

    /// The commands for a server, by the table in the module docs.
    pub fn for_server(server: ServerVersion) -> Self {
        let at_least = |v: (u16, u16)| (server.version.0, server.version.1) >= v;
        let (release, extend) = match server.family {
            ServerFamily::Valkey if at_least((9, 0)) => {
                (ReleaseCommand::DelIfEq, ExtendCommand::SetIfEq)
            }
            ServerFamily::Valkey if at_least((8, 1)) => {
                (ReleaseCommand::Script, ExtendCommand::SetIfEq)
            }
            ServerFamily::Redis if at_least((8, 4)) => {
                (ReleaseCommand::DelExIfEq, ExtendCommand::SetIfEq)
            }
            _ => (ReleaseCommand::Script, ExtendCommand::Script),
        };
        // `ZADD … GT` came with Redis 6.2; every Valkey has it.
        let fence = match server.family {
            ServerFamily::Valkey => FenceCommand::Pipeline,
            ServerFamily::Redis if at_least((6, 2)) => FenceCommand::Pipeline,
            _ => FenceCommand::Script,
        };
        Self {
            release,
            extend,
            fence,
            source: CommandSource::Hello(server),
            fell_back: None,
        }
    }

    /// For a node that refused `HELLO`: try the Valkey commands, falling back on refusal.
    pub fn probing() -> Self {
        Self {
            release: ReleaseCommand::DelIfEq,
            extend: ExtendCommand::SetIfEq,
            // A wrong guess would cost a key set by the pipeline's `SET`: fenced locks take
            // the script until the server is known.
            fence: FenceCommand::Script,
            source: CommandSource::Probing,
            fell_back: None,
        }
    }

    /// The node refused the native command `used` for as unknown or a syntax error: it
    /// gets the script from now on.
    pub(crate) fn fall_back(&mut self, used: NativeUse) {
        let name = match used {
            NativeUse::Release => std::mem::replace(&mut self.release, ReleaseCommand::Script),
            NativeUse::Extend => {
                self.extend = ExtendCommand::Script;
                return self.fell_back = Some("SET");
            }
            NativeUse::Fence => {
                self.fence = FenceCommand::Script;
                return self.fell_back = Some("ZADD");
            }
            // Plain `SET`s: every server has them, nothing to fall back to.
            NativeUse::Each(_) => return,
        };
        self.fell_back = Some(match name {
            ReleaseCommand::DelExIfEq => "DELEX",
            _ => "DELIFEQ",
        });
    }
}

/// What a request sent as a native command was for, so that a refusal can be turned into
/// a fallback on its node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NativeUse {
    Release,
    Extend,
    Fence,
    /// A multi-lock's keys set one by one (a negative control's: command.rs,
    /// `Native::SetEach`), with this many replies.
    Each(u32),
}

/// What a request to one node may use, when a [`Client`](crate::Client) hands it out: the
/// node's commands, and for a fenced acquisition by pipeline the floor of the node's
/// counter (the node's clock in whole seconds, estimated low, times 2^20), when its clock
/// is known.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Offer {
    pub(crate) commands: NodeCommands,
    /// The node's clock reading, the time now and the drift factor: the floor is computed
    /// from them only for a fenced acquisition ([`Offer::fence_floor`]).
    pub(crate) clock: Option<(NodeClock, Instant, f64)>,
    /// A negative control's (`_mutants`): the pipeline with a floor of 0.
    pub(crate) floorless: bool,
}

impl Offer {
    /// The floor of a fenced pipeline to this node, if its clock is known.
    #[inline]
    pub(crate) fn fence_floor(&self) -> Option<u64> {
        let (clock, now, drift_factor) = self.clock?;
        Some(if self.floorless {
            0
        } else {
            clock.floor(now, drift_factor)
        })
    }
}

impl From<NodeCommands> for Offer {
    fn from(commands: NodeCommands) -> Self {
        Self {
            commands,
            clock: None,
            floorless: false,
        }
    }
}

/// A native release's replies, `DELIFEQ`'s (or `DELEX`'s) and its `PUBLISH`'s, read as
/// the release script's one reply: 2 if it deleted and someone was subscribed to the
/// release (another client waits: queue.rs), else the delete's own. `count_waiters` false
/// is a negative control's (`_mutants`): the count is not read.
pub(crate) fn fold_release(deleted: Reply, published: Reply, count_waiters: bool) -> Reply {
    match (deleted, published) {
        (Reply::Integer(1), Reply::Integer(n)) if n > 0 && count_waiters => Reply::Integer(2),
        (deleted, _) => deleted,
    }
}

/// Whether an error reply to a native command means the server does not have it: an
/// unknown command (`DELIFEQ`, `DELEX`) or a syntax error (`SET` without `IFEQ`, `ZADD`
/// without `GT`). For a pipeline's replies (an array), whether any part says so.
pub(crate) fn is_unsupported(reply: &Reply) -> bool {
    match reply {
        Reply::Replies(parts) => parts.iter().any(is_unsupported),
        _ => {
            reply.is_error_with(b"ERR unknown command") || reply.is_error_with(b"ERR syntax error")
        }
    }
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;

    use super::*;

    #[test]
    fn the_table_of_commands() {
        use ExtendCommand::{Script as ExtendScript, SetIfEq};
        use ReleaseCommand::{DelExIfEq, DelIfEq, Script};
        use ServerFamily::{Other, Redis, Valkey};
        for (family, version, release, extend) in [
            (Valkey, (9, 0, 0), DelIfEq, SetIfEq),
            (Valkey, (8, 1, 4), Script, SetIfEq),
            (Valkey, (8, 0, 9), Script, ExtendScript),
            (Redis, (8, 4, 0), DelExIfEq, SetIfEq),
            (Redis, (8, 2, 0), Script, ExtendScript),
            (Redis, (7, 0, 15), Script, ExtendScript),
            (Other, (99, 0, 0), Script, ExtendScript),
        ] {
            let c = NodeCommands::for_server(ServerVersion { family, version });
            assert_eq!(
                (c.release, c.extend),
                (release, extend),
                "{family:?} {version:?}"
            );
        }
    }

    #[test]
    fn falling_back_names_the_refused_command() {
        let mut c = NodeCommands::for_server(ServerVersion {
            family: ServerFamily::Redis,
            version: (8, 4, 0),
        });
        c.fall_back(NativeUse::Release);
        assert_eq!(c.release, ReleaseCommand::Script);
        assert_eq!(c.fell_back, Some("DELEX"));
        c.fall_back(NativeUse::Extend);
        assert_eq!(c.extend, ExtendCommand::Script);
        assert_eq!(c.fell_back, Some("SET"));
        assert!(is_unsupported(&Reply::Error(Bytes::from_static(
            b"ERR unknown command 'DELIFEQ', with args beginning with: "
        ))));
        assert!(is_unsupported(&Reply::Error(Bytes::from_static(
            b"ERR syntax error"
        ))));
        assert!(!is_unsupported(&Reply::Error(Bytes::from_static(
            b"NOPERM no permissions"
        ))));
    }
}
