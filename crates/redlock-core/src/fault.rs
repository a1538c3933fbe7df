//! Why a node failed a request: [`NodeFault`], and for a connection, [`ConnectionError`].
//! Near a leaf of the module map (it names a quarantine's cause): events (io.rs) and
//! inspections (inspection.rs) carry them.

use std::fmt;
use std::time::{Duration, Instant};

use crate::quarantine::QuarantineCause;

/// Why one node's vote failed. Reported inside events; never a panic.
///
/// `Display` is prose for people, e.g. `connection refused` or
/// `SET was refused: NOPERM User locker has no permissions to run the 'set' command`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum NodeFault {
    /// The node's connection failed or closed before it answered, or the node was down (then
    /// the reason is the one it went down with).
    Connection(ConnectionError),
    /// The node did not answer before the round's deadline.
    Timeout,
    /// The node refused a lock command with an error reply (e.g. `-NOPERM`, `-READONLY`,
    /// `-OOM`); the command's name and the server's message are kept.
    Server {
        /// The command refused: `SET`, `EVALSHA` or `EVAL`.
        command: &'static str,
        /// The server's error text, verbatim.
        message: String,
    },
    /// The node sent bytes that are not valid RESP, a reply too large, or a reply of a type
    /// the command cannot produce.
    Protocol(String),
    /// The connection handshake was refused, so the session is unusable; the command and the
    /// server's message are kept (e.g. `AUTH` with `WRONGPASS ...`).
    Handshake {
        /// The handshake command refused: `AUTH` or `SELECT`.
        command: &'static str,
        /// The server's error text, verbatim.
        message: String,
    },
    /// Not sent: the node already has this many requests unanswered (the configured
    /// [`max_in_flight`](crate::ConfigBuilder::max_in_flight)).
    Backlogged {
        /// The cap that was reached.
        max_in_flight: usize,
    },
    /// The node granted an acquisition while quarantined after a restart: its vote counts
    /// as "no" until `until` ([`Event::NodeQuarantined`](crate::Event::NodeQuarantined)).
    /// The key it set is released with the attempt's others.
    Quarantined {
        /// When the node's votes count again, on the driver's clock.
        until: Instant,
        /// Why it is quarantined.
        cause: QuarantineCause,
    },
}

impl NodeFault {
    /// The connection closed before the node answered (the plain reason when a driver or an
    /// embedder has no better one).
    pub fn closed() -> Self {
        Self::Connection(ConnectionError::Closed)
    }

    /// Whether asking the node again cannot help until someone changes it: a refusal that
    /// names the key or the session, not the moment.
    ///
    /// | fault | permanent | why |
    /// |---|---|---|
    /// | `WRONGTYPE` | yes | the key is of another type: another program overwrote it |
    /// | `NOPERM` | yes | the ACL user may not run the command |
    /// | `NOSCRIPT` (after the `EVAL` resend) | yes | the node will not run scripts |
    /// | `READONLY` | yes | the node is a replica |
    /// | a refused handshake (`AUTH`, `SELECT`) | yes | the session is unusable |
    /// | any other server error (`BUSY`, `LOADING`, `OOM`, `MASTERDOWN`, …) | no | the node may recover |
    /// | connection, timeout, backlog, protocol | no | a new connection or a later try may succeed |
    /// | quarantined | no | the quarantine ends |
    ///
    /// An extension stops retrying once these and "not ours" answers leave no quorum able
    /// to say yes ([`LostReason::Refused`](crate::LostReason::Refused)).
    pub fn is_permanent(&self) -> bool {
        match self {
            Self::Server { message, .. } => {
                const FOR_GOOD: [&str; 4] = ["WRONGTYPE", "NOPERM", "NOSCRIPT", "READONLY"];
                let code = message.split(' ').next().unwrap_or_default();
                FOR_GOOD.contains(&code)
            }
            Self::Handshake { .. } => true,
            Self::Connection(_)
            | Self::Timeout
            | Self::Protocol(_)
            | Self::Backlogged { .. }
            | Self::Quarantined { .. } => false,
        }
    }
}

impl fmt::Display for NodeFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Connection(e) => e.fmt(f),
            Self::Timeout => f.write_str("no answer before the attempt's deadline"),
            Self::Server { command, message } | Self::Handshake { command, message } => {
                write!(f, "{command} was refused: {message}")
            }
            Self::Protocol(msg) => write!(f, "protocol violation: {msg}"),
            Self::Backlogged { max_in_flight } => write!(
                f,
                "not sent: the node has {max_in_flight} requests unanswered (max_in_flight)"
            ),
            Self::Quarantined { cause, .. } => {
                write!(f, "granted, but not counted: quarantined ({cause})")
            }
        }
    }
}

/// No source: a [`NodeFault::Connection`] displays as its [`ConnectionError`], and a cause is
/// shown in `Display` or returned by `source()`, never both (Rust API guidelines,
/// C-GOOD-ERR), so that chain printers such as anyhow's `{:#}` say it once.
impl std::error::Error for NodeFault {}

/// Why a connection closed or could not be opened, as the driver saw it; carried by
/// [`Input::Disconnected`](crate::Input::Disconnected) and reported inside [`NodeFault::Connection`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConnectionError {
    /// Nothing listens at the address (the system refused the connection).
    Refused,
    /// No connection within the driver's connect timeout.
    ConnectTimeout(Duration),
    /// The host name did not resolve; the system's message.
    Resolve(String),
    /// The server closed the connection.
    Closed,
    /// Any other failure of the connection; the system's message.
    Io(String),
    /// TLS failed: the handshake (a certificate not trusted or not for this host, a client
    /// certificate refused), or the node speaks TLS to a plain `redis://` client or plain
    /// text to a `rediss://` one; what went wrong, in words.
    Tls(String),
}

impl ConnectionError {
    /// The reason an IO error gives: [`Refused`](Self::Refused) for a refused connection,
    /// [`Closed`](Self::Closed) for an end of stream, [`Io`](Self::Io) with the system's
    /// message otherwise.
    pub fn from_io(e: &std::io::Error) -> Self {
        match e.kind() {
            std::io::ErrorKind::ConnectionRefused => Self::Refused,
            std::io::ErrorKind::UnexpectedEof => Self::Closed,
            _ => Self::Io(e.to_string()),
        }
    }
}

impl fmt::Display for ConnectionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Refused => f.write_str("connection refused"),
            Self::ConnectTimeout(after) => write!(f, "no connection within {after:?}"),
            Self::Resolve(msg) => write!(f, "could not resolve the host name: {msg}"),
            Self::Closed => f.write_str("the server closed the connection"),
            Self::Io(msg) => write!(f, "connection failed: {msg}"),
            Self::Tls(msg) => write!(f, "TLS failed: {msg}"),
        }
    }
}

impl std::error::Error for ConnectionError {}
