//! Redlock over the connections your application already has: the `redlock-core` operation
//! layer ([`Lock`]) driven over `redis` (redis-rs) async connections on tokio.
//!
//! This crate is an example meant to be copied, not a dependency: under three hundred lines
//! that turn each of the lock's per-node [`Request`]s into a `redis::Cmd`, send it on that
//! node's connection, turn the `redis::Value` (or error) back into a [`Reply`] (or a
//! [`NodeFault`]), and feed the lock's timers from `tokio::time`. Every rule of the
//! algorithm (quorum, drift, validity, retries, `-NOSCRIPT` fallback, release of failed
//! attempts) stays in [`Lock`]; read [`redlock_core::docs::safety`] before relying on a lock
//! for correctness.
//!
//! ```no_run
//! use redlock_core::{Config, LockOptions};
//! use redlock_redis_rs::{RedisLock, load_scripts};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! // The application's own connections, one per independent node.
//! let mut nodes = Vec::new();
//! for url in ["redis://127.0.0.1:7001", "redis://127.0.0.1:7002", "redis://127.0.0.1:7003"] {
//!     let mut conn = redis::Client::open(url)?.get_multiplexed_async_connection().await?;
//!     load_scripts(&mut conn).await?; // once per connection: no EVALSHA miss later
//!     nodes.push(conn);
//! }
//! let config = Config::builder(nodes.len()).build()?;
//! let (lock, acquired) =
//!     RedisLock::acquire(nodes, &config, "invoices:42", &LockOptions::default()).await?;
//! // ... work while `tokio::time::Instant::now()` is before `acquired.deadline` ...
//! # let _ = acquired;
//! lock.release().await?;
//! # Ok(())
//! # }
//! ```
//!
//! # Randomness
//! Tokens must be unpredictable, so the lock draws them (and its retry jitter) from a
//! CSPRNG the caller passes. Here it is the operating system's, as in every redlock driver:
//!
//! ```
//! use rand_core::UnwrapErr;
//!
//! let mut rng = UnwrapErr(getrandom::SysRng); // = redlock_redis_rs::OsRng
//! let token = redlock_core::Token::generate(&mut rng);
//! assert_eq!(token.as_bytes().len(), 2 * redlock_core::TOKEN_RANDOM_BYTES);
//! ```
//!
//! Deterministic tests pass a seeded `chacha20::ChaCha20Rng` instead
//! (`rand_core::SeedableRng::seed_from_u64(7)`); never do that in production.
//!
//! # Timeouts
//! The lock ends each node's wait at its own deadline (the attempt timeout), so a paused
//! node never delays a decision. A redis-rs response timeout (500 ms by default) that fires
//! first only turns that node's vote into [`NodeFault::Timeout`] earlier, which is safe.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use bytes::Bytes;
use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};
use redlock_core::{
    AcquireFailure, AcquireStats, Acquired, Config, ConnectionError, EXTEND_SCRIPT, Event, Lock,
    LockOptions, LostReason, NodeFault, OpId, RELEASE_SCRIPT, ReleaseOutcome, Reply, Request,
    RequestId, Resource, UsageError,
};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// The CSPRNG tokens and retry jitter come from: the operating system's.
pub type OsRng = rand_core::UnwrapErr<getrandom::SysRng>;

/// One lock, driven over one connection per node.
///
/// `C` is anything redis-rs can send a command on and that is cheap to clone:
/// `redis::aio::MultiplexedConnection`, or `redis::aio::ConnectionManager` (redis's
/// `connection-manager` feature) to have dropped connections re-established. Each command
/// runs as its own tokio task, so requests go out (and late ones finish) even between calls.
/// The lock is only driven inside this type's async methods: nothing renews it in the
/// background, so call [`extend`](Self::extend) yourself, before the deadline.
pub struct RedisLock<C> {
    lock: Lock,
    nodes: Vec<C>,
    rng: OsRng,
    /// Each command's task sends its node's answer here, tagged with the request id.
    replies_tx: mpsc::UnboundedSender<(RequestId, Result<Reply, NodeFault>)>,
    replies: mpsc::UnboundedReceiver<(RequestId, Result<Reply, NodeFault>)>,
    /// Per node, the task of the last request sent there; the next one waits for it.
    last: Vec<Option<JoinHandle<()>>>,
}

/// Why a lock call did not succeed.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum LockError {
    /// The configuration is for a different number of nodes than there are connections.
    NodeCount {
        /// `Config::nodes()`.
        config: usize,
        /// Connections passed.
        connections: usize,
    },
    /// The lock refused the call (empty resource, invalid option, lock not held).
    Usage(UsageError),
    /// No quorum was reached; whatever the attempts set has been released.
    Acquire {
        /// Why the last attempt failed.
        reason: AcquireFailure,
        /// Attempts made, time spent, and each node's answer in the last attempt.
        stats: AcquireStats,
    },
    /// The lock is no longer held; it has been (or is being) released.
    Lost(LostReason),
    /// The lock finished without reporting what this call waited for (a core bug).
    Finished,
}

impl<C: ConnectionLike + Clone + Send + 'static> RedisLock<C> {
    /// Acquires `resource` on a quorum of `nodes` (indexed like the `config`'s nodes), with
    /// the retries the options or config allow.
    ///
    /// On success returns the lock and what the acquisition reported: the token, the
    /// deadline on tokio's clock (as a std `Instant`) and each node's answer. On failure
    /// returns at the decision; the releases of whatever the attempts set are already sent,
    /// and a spawned task sees them through (at most the release timeout).
    pub async fn acquire(
        nodes: Vec<C>,
        config: &Config,
        resource: impl Into<Resource>,
        options: &LockOptions,
    ) -> Result<(Self, Acquired), LockError> {
        if nodes.len() != config.nodes() {
            return Err(LockError::NodeCount {
                config: config.nodes(),
                connections: nodes.len(),
            });
        }
        let mut rng = rand_core::UnwrapErr(getrandom::SysRng);
        let op = OpId::from_raw(NEXT_OP.fetch_add(1, Ordering::Relaxed));
        let lock = Lock::acquire(now(), op, config, resource.into(), options, &mut rng)
            .map_err(LockError::Usage)?;
        let (replies_tx, replies) = mpsc::unbounded_channel();
        let mut this = Self {
            lock,
            last: nodes.iter().map(|_| None).collect(),
            nodes,
            rng,
            replies_tx,
            replies,
        };
        loop {
            match this.next_event().await {
                Some(Event::Acquired(acquired)) => return Ok((this, acquired)),
                Some(Event::AcquireFailed { reason, stats, .. }) => {
                    tokio::spawn(this.finish());
                    return Err(LockError::Acquire { reason, stats });
                }
                Some(_) => {}
                None => return Err(LockError::Finished),
            }
        }
    }

    /// Extends the lock by its ttl from now; returns the new deadline.
    ///
    /// [`LockError::Lost`] means the lock is gone (its deadline passed, or too many nodes
    /// hold another value); it is being released, and [`release`](Self::release) reports
    /// each node.
    pub async fn extend(&mut self) -> Result<Instant, LockError> {
        self.lock.extend(now()).map_err(LockError::Usage)?;
        loop {
            match self.next_event().await {
                Some(Event::Extended { deadline, .. }) => return Ok(deadline),
                Some(Event::Lost { reason, .. }) => return Err(LockError::Lost(reason)),
                Some(_) => {}
                None => return Err(LockError::Finished),
            }
        }
    }

    /// Releases the lock on every node and returns what each node did.
    ///
    /// If the deadline had passed, the release still runs to the end and the result is
    /// [`LockError::Lost`]: the lock was no longer held when you let go. A lock already
    /// reported lost by [`extend`](Self::extend) is being released; this waits for it.
    pub async fn release(mut self) -> Result<Vec<ReleaseOutcome>, LockError> {
        match self.lock.release(now()) {
            Ok(()) | Err(UsageError::NotHeld(_)) => {}
            Err(e) => return Err(LockError::Usage(e)),
        }
        let mut lost = None;
        loop {
            match self.next_event().await {
                Some(Event::Lost { reason, .. }) => lost = Some(reason),
                Some(Event::Released { nodes, .. }) => {
                    tokio::spawn(self.finish());
                    return lost.map_or(Ok(nodes), |r| Err(LockError::Lost(r)));
                }
                Some(_) => {}
                None => return Err(LockError::Finished),
            }
        }
    }

    /// The operation layer's lock, for its getters ([`Lock::held`], [`Lock::op`], ...).
    pub fn lock(&self) -> &Lock {
        &self.lock
    }

    /// Drives the lock until it reports its next event; `None` once it has nothing left to
    /// do. This is the whole run loop: the methods above wait on it for their event.
    pub async fn next_event(&mut self) -> Option<Event> {
        loop {
            // 1. Send every request the lock has ready, each on its own task.
            while let Some(request) = self.lock.poll_request() {
                self.send(request);
            }
            // 2. Report what the lock decided.
            if let Some(event) = self.lock.poll_event() {
                return Some(event);
            }
            // This driver never listens for release notices: a waiting lock polls instead
            // (its place in the waiters' queue must not leave the lock free for long).
            if self.lock.is_waiting_for_release() {
                self.lock.poll_unheard(now(), 0);
            }
            // 3. Wait for one reply or the lock's next deadline and feed it with a fresh
            //    `now`. No deadline: no round is in flight, so no reply can matter.
            let deadline = self.lock.poll_timeout()?;
            let wait = tokio::time::timeout_at(deadline.into(), self.replies.recv());
            match wait.await {
                Ok(Some((id, Ok(reply)))) => {
                    self.lock.handle_reply(now(), id, Ok(&reply), &mut self.rng)
                }
                Ok(Some((id, Err(fault)))) => {
                    self.lock.handle_reply(now(), id, Err(fault), &mut self.rng)
                }
                // `None` cannot happen (we hold a sender); either way, the deadline is next.
                Ok(None) | Err(_) => self.lock.handle_timeout(now(), &mut self.rng),
            }
        }
    }

    /// Drives the lock until nothing is in flight: the releases of failed attempts, which
    /// report nothing but may need their `-NOSCRIPT` answer fed back to be resent as `EVAL`.
    /// Bounded by the release timeout; the caller spawns it rather than wait.
    async fn finish(mut self) {
        while !self.lock.is_finished() && self.next_event().await.is_some() {}
    }

    /// Sends `request`'s command to its node on a task of its own; the answer comes back
    /// through `replies`.
    ///
    /// Per node, commands go out in the order the lock handed them out: each task waits for
    /// the node's previous one. Otherwise a release could overtake its own `SET` on a slow
    /// node, and the key it was meant to delete would live until its ttl.
    fn send(&mut self, request: Request) {
        let Request { id, node, command } = request;
        let tx = self.replies_tx.clone();
        // Every node index is below `config.nodes()`, which `acquire` checked equals the
        // number of connections; a miss is answered as the lock requires of a dead node.
        let (Some(conn), Some(last)) = (
            self.nodes.get(node.index()),
            self.last.get_mut(node.index()),
        ) else {
            let reason = ConnectionError::Io("no connection given for this node".into());
            let _ = tx.send((id, Err(NodeFault::Connection(reason))));
            return;
        };
        let mut conn = conn.clone();
        let mut cmd = redis::Cmd::new();
        for arg in command.args() {
            cmd.arg(&arg[..]);
        }
        let previous = last.take();
        *last = Some(tokio::spawn(async move {
            if let Some(previous) = previous {
                // Its outcome went to the lock already; only its end matters here.
                let _ = previous.await;
            }
            let reply = to_reply(cmd.query_async::<Value>(&mut conn).await);
            // The lock may be gone by now; then nobody needs the answer.
            let _ = tx.send((id, reply));
        }));
    }
}

/// Loads the release and extend scripts on one node (`SCRIPT LOAD`), so their `EVALSHA`
/// never needs the `EVAL` resend. Call it once per connection, and again after a node
/// restarts: a `-NOSCRIPT` that arrives after its round's deadline (from a slow or paused
/// node) is no longer resent, and that node's key then lasts until its ttl.
pub async fn load_scripts<C: ConnectionLike>(conn: &mut C) -> RedisResult<()> {
    for script in [&RELEASE_SCRIPT, &EXTEND_SCRIPT] {
        // The reply is the script's SHA1, which is `script.sha1`; it is not checked, so that
        // nothing a node sends can panic here.
        redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(script.body)
            .query_async::<()>(conn)
            .await?;
    }
    Ok(())
}

impl<C> fmt::Debug for RedisLock<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisLock")
            .field("lock", &self.lock)
            .field("nodes", &self.nodes.len())
            .finish_non_exhaustive()
    }
}

impl fmt::Display for LockError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NodeCount {
                config,
                connections,
            } => write!(
                f,
                "the config is for {config} nodes but {connections} connections were given"
            ),
            Self::Usage(e) => write!(f, "{e}"),
            // The core's reasons are prose already, nodes named by address.
            Self::Acquire { reason, stats } => {
                let s = if stats.attempts == 1 { "" } else { "s" };
                write!(
                    f,
                    "lock not acquired after {} attempt{s}: {reason}",
                    stats.attempts
                )
            }
            Self::Lost(reason) => write!(f, "lock lost: {reason}"),
            Self::Finished => f.write_str("the lock finished without an outcome"),
        }
    }
}

impl std::error::Error for LockError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Usage(e) => Some(e),
            _ => None,
        }
    }
}

/// A node's answer as the lock reads it. A server error stays a reply: the lock needs
/// `-NOSCRIPT` to resend a script as `EVAL`, and keeps other messages for the user. Only a
/// failure to get an answer is a [`NodeFault`].
fn to_reply(result: RedisResult<Value>) -> Result<Reply, NodeFault> {
    match result {
        Ok(value) => from_value(value),
        // `query_async` turns error replies into `Err`; their code is the reply's first word.
        Err(err) => match err.code() {
            Some(code) => Ok(error_reply(code, err.detail())),
            None if err.is_timeout() => Err(NodeFault::Timeout),
            None if err.is_connection_dropped() => Err(NodeFault::closed()),
            None if err.is_io_error() => {
                Err(NodeFault::Connection(ConnectionError::Io(err.to_string())))
            }
            None => Err(NodeFault::Protocol(err.to_string())),
        },
    }
}

/// The reply types the lock's commands produce; anything else is a protocol fault.
fn from_value(value: Value) -> Result<Reply, NodeFault> {
    match value {
        Value::Okay => Ok(Reply::Ok),
        Value::SimpleString(s) if s == "OK" => Ok(Reply::Ok),
        Value::SimpleString(s) => Ok(Reply::Status(Bytes::from(s))),
        Value::Int(i) => Ok(Reply::Integer(i)),
        Value::BulkString(b) => Ok(Reply::Bulk(Bytes::from(b))),
        Value::Nil => Ok(Reply::Nil),
        Value::ServerError(e) => Ok(error_reply(e.code(), e.details())),
        // Not the value itself: a node may send an arbitrarily large aggregate.
        _ => Err(NodeFault::Protocol(
            "unexpected reply type (not a status, integer, bulk string, nil or error)".into(),
        )),
    }
}

/// The error line as the node sent it, e.g. `NOSCRIPT No matching script. Please use EVAL.`
fn error_reply(code: &str, detail: Option<&str>) -> Reply {
    let line = match detail {
        Some(detail) => format!("{code} {detail}"),
        None => code.to_owned(),
    };
    Reply::Error(Bytes::from(line))
}

/// tokio's clock as a std `Instant`, so `tokio::time::pause()` also pauses the lock.
fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}

/// Operation ids for the locks of this process; events carry them, for logs.
static NEXT_OP: AtomicU64 = AtomicU64::new(1);

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(bytes: &[u8]) -> Result<Reply, NodeFault> {
        to_reply(redis::parse_redis_value(bytes))
    }

    #[test]
    fn replies_map_as_the_lock_reads_them() {
        assert_eq!(parsed(b"+OK\r\n"), Ok(Reply::Ok));
        assert_eq!(parsed(b"$-1\r\n"), Ok(Reply::Nil));
        assert_eq!(parsed(b":-1\r\n"), Ok(Reply::Integer(-1)));
        assert_eq!(parsed(b"$2\r\nab\r\n"), Ok(Reply::Bulk(Bytes::from("ab"))));
        assert_eq!(
            parsed(b"+QUEUED\r\n"),
            Ok(Reply::Status(Bytes::from("QUEUED")))
        );
    }

    #[test]
    fn error_replies_keep_code_and_message() {
        let noscript = b"-NOSCRIPT No matching script. Please use EVAL.\r\n";
        let reply = parsed(noscript).expect("an error reply is a reply");
        assert!(reply.is_error_with(b"NOSCRIPT"), "{reply:?}");
        assert_eq!(
            reply.error_message().as_deref(),
            Some("NOSCRIPT No matching script. Please use EVAL.")
        );
        // The same error as `Err`, the way `query_async` returns it.
        let err = redis::parse_redis_value(noscript)
            .and_then(|v| v.extract_error())
            .expect_err("extract_error turns it into Err");
        assert_eq!(to_reply(Err(err)), Ok(reply));
        let noperm = parsed(b"-NOPERM no permissions to run 'set'\r\n").unwrap();
        assert!(noperm.is_error_with(b"NOPERM"), "{noperm:?}");
    }

    #[test]
    fn other_types_and_failures_are_faults() {
        assert!(matches!(
            parsed(b"*1\r\n:1\r\n"),
            Err(NodeFault::Protocol(_))
        ));
        let timed_out = std::io::Error::from(std::io::ErrorKind::TimedOut);
        assert_eq!(to_reply(Err(timed_out.into())), Err(NodeFault::Timeout));
        let reset = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
        assert!(matches!(
            to_reply(Err(reset.into())),
            Err(NodeFault::Connection(_))
        ));
    }
}
