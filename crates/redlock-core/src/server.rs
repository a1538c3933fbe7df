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
//! fence 1 n`, three commands written together (docs/safety.md, "Fencing"); a node gets it
//! once its `TIME`, asked after `HELLO`, has been read on the current connection, and the
//! script until then.
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
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::resp::{self, ProtocolError, Reply};

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

/// The largest counter a node may report: every integer up to 2^53 is exact in a sorted
/// set's scores (doubles) and in Lua's numbers; past it, `ZINCRBY` could not count up.
pub(crate) const MAX_FENCE: u64 = 1 << 53;

/// How old a node's clock reading may get before a fenced pipeline asks `TIME` again. Two
/// nodes' readings then differ in age by less than this, so their floors, each lowered by
/// `drift_factor` of its reading's age, differ by less than `drift_factor` of it (10 ms at
/// 0.01): a floor in whole seconds rarely straddles that.
pub(crate) const CLOCK_READING_MAX_AGE: Duration = Duration::from_secs(1);

/// A node's clock as one `TIME` reply gave it, and when the reply was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NodeClock {
    /// The node's clock since the epoch, as its `TIME` gave it (seconds and microseconds).
    pub(crate) since_epoch: Duration,
    /// When the reply was read, on the client's clock.
    pub(crate) read_at: Instant,
}

impl NodeClock {
    /// The counter floor of a fenced pipeline sent at `now`: the node's clock in whole
    /// seconds, estimated low, times 2^20 (docs/safety.md, "Fencing").
    ///
    /// Low, never high: the node ran `TIME` before its reply was read, and the time since
    /// counts only at `1 - drift_factor` of our clock's rate, the most by which the lock
    /// already assumes the two clocks' rates differ. So the floor never passes the node's
    /// own `TIME`-based floor of the same moment, and a counter a restart lost is still
    /// covered by the next connection's reading. Fenced pipelines read the clock again
    /// once a reading is a second old, so the nodes' readings are of about the same age,
    /// their floors are lowered alike, and nodes whose counters agree stay in agreement when
    /// the floor passes them (a floor that differed per node would cost a write-back each
    /// time).
    pub(crate) fn floor(self, now: Instant, drift_factor: f64) -> u64 {
        let since = now.saturating_duration_since(self.read_at);
        let since = since.mul_f64((1.0 - drift_factor).clamp(0.0, 1.0));
        let secs = self.since_epoch.saturating_add(since).as_secs();
        secs.saturating_mul(1 << 20).min(MAX_FENCE)
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

/// How often the fencing floor moves: it counts the node's clock in whole seconds.
pub(crate) const FENCE_FLOOR_STEP: Duration = Duration::from_secs(1);

/// How far apart the nodes' wall clocks are at `now`, from each node's last `TIME` reading
/// (`None`: no node read yet): the largest estimate minus the smallest, each reading
/// carried forward on our clock. Each estimate is low by at most its reading's round trip.
pub(crate) fn wall_spread(readings: impl Iterator<Item = NodeClock>, now: Instant) -> Duration {
    let (mut low, mut high) = (u128::MAX, 0u128);
    for c in readings {
        let at = (c
            .since_epoch
            .saturating_add(now.saturating_duration_since(c.read_at)))
        .as_nanos();
        low = low.min(at);
        high = high.max(at);
    }
    let nanos = high.saturating_sub(low);
    Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
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

/// A node's answer to `HELLO`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Hello {
    /// An array reply: the server it names, if it names one we can read.
    Server(Option<ServerVersion>),
    /// A RESP3 map (the answer to `HELLO 3`): as `Server`, and the connection now speaks
    /// RESP3. Only a map says so: a server that answered `HELLO 3` with an array did not
    /// switch.
    Map(Option<ServerVersion>),
    /// An error reply (unknown command, `NOPERM`, `NOAUTH`, ...), as the server sent it.
    Refused(String),
}

impl Hello {
    /// The commands the node gets after this answer.
    pub(crate) fn commands(&self) -> NodeCommands {
        match self {
            Self::Server(Some(server)) | Self::Map(Some(server)) => {
                NodeCommands::for_server(*server)
            }
            Self::Server(None) | Self::Map(None) => NodeCommands::SCRIPTS,
            Self::Refused(_) => NodeCommands::probing(),
        }
    }
}

/// Reads a `TIME` reply from the start of `buf`: the node's clock since the epoch (`None`
/// for an error reply, a refusal by an ACL say, or a reply that is not two decimal numbers,
/// seconds below 2^32 and microseconds below a million), and the reply's length; `None` if `buf` holds only part
/// of it. A node without a clock reading gets the fenced script, never a guessed floor.
pub(crate) fn decode_time(
    buf: &[u8],
    max_reply: usize,
) -> Result<Option<(Option<Duration>, usize)>, ProtocolError> {
    if buf.first() != Some(&b'*') {
        // An error reply, or anything else that is not a clock.
        return Ok(resp::decode(buf, max_reply)?.map(|(_, len)| (None, len)));
    }
    let Some((count, mut pos)) = resp::aggregate_header(buf, 0, max_reply)? else {
        return Ok(None);
    };
    let mut parts = [None, None];
    for i in 0..count {
        if pos > max_reply {
            return Err(ProtocolError(format!("reply exceeds {max_reply} bytes")));
        }
        let Some((value, next)) = element(buf, pos, max_reply)? else {
            return Ok(None);
        };
        pos = next;
        if let Some(part) = parts.get_mut(i) {
            *part = value.and_then(|v| std::str::from_utf8(&v).ok()?.parse::<u64>().ok());
        }
    }
    if pos > max_reply {
        return Err(ProtocolError(format!("reply exceeds {max_reply} bytes")));
    }
    let clock = match (count, parts) {
        (2, [Some(secs), Some(micros)]) if secs < 1 << 32 && micros < 1_000_000 => {
            Some(Duration::from_secs(secs) + Duration::from_micros(micros))
        }
        _ => None,
    };
    Ok(Some((clock, pos)))
}

/// Reads a `HELLO` reply from the start of `buf`: the reply and its length, or `None` if
/// `buf` holds only part of it.
///
/// The reply is an array of field names and values (RESP2); values may themselves be
/// arrays (`modules`). Only the top level is read; nested arrays are skipped with a
/// counter, not recursion, so no nesting can exhaust the stack, and the whole reply is
/// held to `max_reply` bytes like any other.
pub(crate) fn decode_hello(
    buf: &[u8],
    max_reply: usize,
) -> Result<Option<(Hello, usize)>, ProtocolError> {
    match buf.first() {
        None => Ok(None),
        Some(b'*' | b'%') => decode_array(buf, max_reply),
        Some(_) => Ok(resp::decode(buf, max_reply)?.map(|(reply, len)| {
            let hello = match reply.error_message() {
                Some(message) => Hello::Refused(message),
                None => Hello::Server(None),
            };
            (hello, len)
        })),
    }
}

/// The `HELLO` reply's fields: an array of names and values (RESP2), or a map of them
/// (RESP3, after `HELLO 3`).
fn decode_array(buf: &[u8], max_reply: usize) -> Result<Option<(Hello, usize)>, ProtocolError> {
    let too_long = || ProtocolError(format!("reply exceeds {max_reply} bytes"));
    let Some((count, mut pos)) = resp::aggregate_header(buf, 0, max_reply)? else {
        return Ok(None);
    };
    let count = match buf[0] {
        b'%' => count.checked_mul(2).ok_or_else(too_long)?,
        _ => count,
    };
    let mut family = None;
    let mut version = None;
    // The field name the next top-level value belongs to.
    let mut field: Option<Bytes> = None;
    for index in 0..count {
        if pos > max_reply {
            return Err(too_long());
        }
        let value = match element(buf, pos, max_reply)? {
            None => return Ok(None),
            Some((value, next)) => {
                pos = next;
                value
            }
        };
        if index % 2 == 0 {
            field = value;
            continue;
        }
        match (field.as_deref(), value.as_deref()) {
            (Some(b"server"), Some(name)) => {
                family = Some(match name {
                    b"redis" => ServerFamily::Redis,
                    b"valkey" => ServerFamily::Valkey,
                    _ => ServerFamily::Other,
                });
            }
            (Some(b"version"), Some(v)) => version = parse_version(v),
            _ => {}
        }
    }
    if pos > max_reply {
        return Err(too_long());
    }
    let server = family
        .zip(version)
        .map(|(family, version)| ServerVersion { family, version });
    let hello = match buf[0] {
        b'%' => Hello::Map(server),
        _ => Hello::Server(server),
    };
    Ok(Some((hello, pos)))
}

/// One top-level element at `pos`: its text if it is a string (simple or bulk), `None` for
/// anything else, and where the next element starts. A nested aggregate (an array, or in
/// RESP3 a map or a set: each module of a RESP3 `HELLO` is a map) is skipped whole.
#[allow(clippy::type_complexity)]
pub(crate) fn element(
    buf: &[u8],
    pos: usize,
    max_reply: usize,
) -> Result<Option<(Option<Bytes>, usize)>, ProtocolError> {
    if !buf.get(pos).is_some_and(|&kind| is_aggregate(kind)) {
        let Some((reply, len)) = resp::decode(&buf[pos..], max_reply)? else {
            return Ok(None);
        };
        let text = match reply {
            Reply::Bulk(b) | Reply::Status(b) => Some(b),
            _ => None,
        };
        return Ok(Some((text, pos + len)));
    }
    // Elements still to skip; each nested array header adds its own.
    let mut left: usize = 1;
    let mut pos = pos;
    while left > 0 {
        if pos > max_reply {
            return Err(ProtocolError(format!("reply exceeds {max_reply} bytes")));
        }
        left -= 1;
        if let Some(&kind) = buf.get(pos).filter(|&&kind| is_aggregate(kind)) {
            let Some((count, next)) = resp::aggregate_header(buf, pos, max_reply)? else {
                return Ok(None);
            };
            let count = if kind == b'%' {
                count.saturating_mul(2)
            } else {
                count
            };
            left = left.saturating_add(count);
            pos = next;
        } else {
            let Some((_, len)) = resp::decode(&buf[pos..], max_reply)? else {
                return Ok(None);
            };
            pos += len;
        }
    }
    Ok(Some((None, pos)))
}

/// An array, a RESP3 map or a RESP3 set.
fn is_aggregate(kind: u8) -> bool {
    matches!(kind, b'*' | b'%' | b'~')
}

/// `9.1.2` → (9, 1, 2); missing parts are 0; `None` if the first part is not a number.
fn parse_version(text: &[u8]) -> Option<(u16, u16, u16)> {
    let text = std::str::from_utf8(text).ok()?;
    let mut parts = text.split('.').map(|p| {
        let digits: &str = &p[..p.find(|c: char| !c.is_ascii_digit()).unwrap_or(p.len())];
        digits.parse::<u16>().ok()
    });
    let major = parts.next().flatten()?;
    let minor = parts.next().flatten().unwrap_or(0);
    let patch = parts.next().flatten().unwrap_or(0);
    Some((major, minor, patch))
}

#[cfg(test)]
mod tests {
    use super::*;

    const VALKEY: &[u8] = b"*14\r\n$6\r\nserver\r\n$6\r\nvalkey\r\n$7\r\nversion\r\n$5\r\n9.1.2\r\n$5\r\nproto\r\n:2\r\n$2\r\nid\r\n:7\r\n$4\r\nmode\r\n$10\r\nstandalone\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$7\r\nmodules\r\n*0\r\n";

    fn hello(family: ServerFamily, version: (u16, u16, u16)) -> Hello {
        Hello::Server(Some(ServerVersion { family, version }))
    }

    #[test]
    fn reads_the_server_and_version_of_a_hello_reply() {
        let (h, len) = decode_hello(VALKEY, 4096).unwrap().unwrap();
        assert_eq!(len, VALKEY.len());
        assert_eq!(h, hello(ServerFamily::Valkey, (9, 1, 2)));
        // Every split before the end is incomplete, never an error.
        for cut in 0..VALKEY.len() {
            assert_eq!(
                decode_hello(&VALKEY[..cut], 4096).unwrap(),
                None,
                "cut {cut}"
            );
        }
        // Followed by more replies: only the HELLO reply is taken.
        let mut more = VALKEY.to_vec();
        more.extend_from_slice(b"+OK\r\n");
        assert_eq!(decode_hello(&more, 4096).unwrap().unwrap().1, VALKEY.len());
    }

    #[test]
    fn nested_modules_are_skipped_without_recursion() {
        let redis = b"*6\r\n$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nmodules\r\n*1\r\n*4\r\n$4\r\nname\r\n$2\r\nft\r\n$3\r\nver\r\n:1\r\n$7\r\nversion\r\n+8.4.0\r\n";
        let (h, len) = decode_hello(redis, 4096).unwrap().unwrap();
        assert_eq!(len, redis.len());
        assert_eq!(h, hello(ServerFamily::Redis, (8, 4, 0)));
        // Deep nesting within the cap is read without recursion; beyond it, an error.
        let mut deep = b"*2\r\n$7\r\nmodules\r\n".to_vec();
        deep.extend(std::iter::repeat_n(b"*1\r\n".as_slice(), 10_000).flatten());
        deep.extend_from_slice(b":1\r\n");
        assert_eq!(
            decode_hello(&deep, 64 * 1024).unwrap().unwrap().0,
            Hello::Server(None)
        );
        assert!(decode_hello(&deep, 1024).is_err());
    }

    #[test]
    fn a_resp3_hello_is_a_map_whose_modules_are_maps() {
        let reply: &[u8] = b"%7\r\n$6\r\nserver\r\n$6\r\nvalkey\r\n$7\r\nversion\r\n$5\r\n9.1.2\r\n$5\r\nproto\r\n:3\r\n$2\r\nid\r\n:5\r\n$4\r\nmode\r\n$10\r\nstandalone\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$7\r\nmodules\r\n*1\r\n%2\r\n$4\r\nname\r\n$3\r\nbf1\r\n$3\r\nver\r\n:1\r\n";
        let (hello, len) = decode_hello(reply, 4096).unwrap().unwrap();
        assert_eq!(len, reply.len());
        assert_eq!(
            hello,
            Hello::Map(Some(ServerVersion {
                family: ServerFamily::Valkey,
                version: (9, 1, 2)
            }))
        );
        for cut in 0..reply.len() {
            assert_eq!(
                decode_hello(&reply[..cut], 4096).unwrap(),
                None,
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn refusals_and_odd_replies() {
        let noperm = b"-NOPERM User u has no permissions to run the 'hello' command\r\n";
        let (h, _) = decode_hello(noperm, 4096).unwrap().unwrap();
        assert!(matches!(&h, Hello::Refused(m) if m.starts_with("NOPERM")));
        assert_eq!(h.commands(), NodeCommands::probing());
        assert_eq!(
            decode_hello(b"+OK\r\n", 4096).unwrap().unwrap().0,
            Hello::Server(None)
        );
        assert_eq!(
            decode_hello(b"*-1\r\n", 4096).unwrap().unwrap().0,
            Hello::Server(None)
        );
        for bad in [&b"*x\r\n"[..], b"*99999999\r\n", b"%x\r\n", b"*1\r\n&\r\n"] {
            assert!(decode_hello(bad, 4096).is_err(), "{bad:?}");
        }
        // A long header without CRLF is an error, not a wait.
        assert!(decode_hello(b"*111111111111111111111111", 4096).is_err());
    }

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
        assert_eq!(parse_version(b"9.1.2"), Some((9, 1, 2)));
        assert_eq!(parse_version(b"8"), Some((8, 0, 0)));
        assert_eq!(parse_version(b"8.4.0-rc1"), Some((8, 4, 0)));
        assert_eq!(parse_version(b"x.1"), None);
        assert_eq!(parse_version(b"70000.1"), None);
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
