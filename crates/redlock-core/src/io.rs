//! What crosses the boundary between the core and a driver: [`Input`], [`Output`],
//! [`Transmit`], the lock [`Event`]s with their reasons, and [`NodeFault`], why one node's
//! vote failed.
//!
//! The contract for using them is documented on [`Client`](crate::Client).

use std::fmt;
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::id::{NodeId, OpId};
use crate::token::{Resource, Token};

/// One thing that happened outside the core, stamped with the driver's monotonic `now`.
#[derive(Debug, Clone, Copy)]
pub enum Input<'a> {
    /// The driver's connection to `node` is established (after an [`Output::Connect`]).
    Connected {
        /// The driver's monotonic time.
        now: Instant,
        /// The node whose connection is up.
        node: NodeId,
    },
    /// Bytes arrived from `node`, in stream order. Any split is allowed.
    Received {
        /// The driver's monotonic time.
        now: Instant,
        /// The node the bytes came from.
        node: NodeId,
        /// The bytes, exactly as read from the socket.
        bytes: &'a [u8],
    },
    /// The connection to `node` closed, or a connection attempt failed.
    Disconnected {
        /// The driver's monotonic time.
        now: Instant,
        /// The node whose connection is gone.
        node: NodeId,
    },
    /// The deadline last returned as [`Output::Timeout`] has been reached (or passed).
    Timeout(Instant),
}

impl Input<'_> {
    /// The time stamp of this input.
    pub fn now(&self) -> Instant {
        match *self {
            Self::Connected { now, .. }
            | Self::Received { now, .. }
            | Self::Disconnected { now, .. }
            | Self::Timeout(now) => now,
        }
    }
}

/// What the driver must do next. Returned by [`Client::poll_output`](crate::Client::poll_output).
#[derive(Debug)]
#[must_use]
pub enum Output {
    /// Write these bytes to the node's connection, after everything written before.
    Transmit(Transmit),
    /// Open a connection to this node, then report [`Input::Connected`] or
    /// [`Input::Disconnected`].
    Connect(NodeId),
    /// Close this node's connection now and read nothing more from it. The core already
    /// treats the node as disconnected; do not report [`Input::Disconnected`] for it.
    Disconnect(NodeId),
    /// A lock event for the user.
    Event(Event),
    /// Nothing more to do now; call [`Input::Timeout`] at this time unless another input
    /// comes first.
    Timeout(Instant),
    /// Nothing to do until the next input or user call.
    Idle,
}

/// Bytes for one node's connection.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub struct Transmit {
    /// The destination node.
    pub node: NodeId,
    /// RESP-encoded commands, possibly several pipelined.
    pub bytes: Bytes,
}

/// An outcome the user is waiting for. Every variant carries the [`OpId`] it belongs to.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Event {
    /// The lock is held.
    Acquired(Acquired),
    /// The lock could not be acquired; every node's key has been released (or is being).
    AcquireFailed {
        /// The operation.
        op: OpId,
        /// The resource that was asked for.
        resource: Resource,
        /// Why the acquisition failed.
        reason: AcquireFailure,
        /// Attempts made, including the last.
        attempts: u32,
    },
    /// An extension succeeded; the lock is now valid until `deadline`.
    Extended {
        /// The operation.
        op: OpId,
        /// The new deadline on the driver's clock.
        deadline: Instant,
        /// Remaining validity when the extension was decided.
        validity: Duration,
    },
    /// The lock is no longer held. A release on all nodes and its [`Event::Released`]
    /// follow: at once if nodes said the key is not ours; after a deadline, once the keys
    /// should have expired (`t0 + ttl + drift`), or earlier if you release.
    Lost {
        /// The operation.
        op: OpId,
        /// Why the lock was lost.
        reason: LostReason,
    },
    /// A release finished on every node (or timed out there). The operation is over.
    Released {
        /// The operation.
        op: OpId,
        /// What each node did, indexed by node.
        nodes: Vec<ReleaseOutcome>,
    },
}

impl Event {
    /// The operation this event belongs to.
    pub fn op(&self) -> OpId {
        match self {
            Self::Acquired(a) => a.op,
            Self::AcquireFailed { op, .. }
            | Self::Extended { op, .. }
            | Self::Lost { op, .. }
            | Self::Released { op, .. } => *op,
        }
    }
}

/// A successful acquisition.
#[derive(Debug, Clone, PartialEq)]
pub struct Acquired {
    /// The operation; use it to extend or release the lock.
    pub op: OpId,
    /// The locked resource.
    pub resource: Resource,
    /// The token stored on the nodes.
    pub token: Token,
    /// When the lock stops being safe to use, on the driver's clock: `t0 + ttl - drift`.
    pub deadline: Instant,
    /// Validity left when the quorum was reached: `ttl - (t_quorum - t0) - drift`.
    pub validity: Duration,
    /// Attempts made, including the successful one.
    pub attempts: u32,
    /// What each node answered in the successful attempt, indexed by node.
    pub nodes: Vec<AcquireOutcome>,
}

/// One node's answer to an acquire command.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AcquireOutcome {
    /// The key was set with our token.
    Locked,
    /// The key exists with another token.
    Held,
    /// The node failed.
    Failed(NodeFault),
    /// No answer yet when the decision was made (the answer no longer matters).
    Pending,
}

/// Why an acquisition failed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AcquireFailure {
    /// Other holders kept us from a quorum (in the last attempt).
    Contended {
        /// Nodes on which the key was held by someone else.
        nodes: Vec<NodeId>,
    },
    /// Too many nodes failed to answer or answered with errors (in the last attempt).
    QuorumUnreachable {
        /// Each failed node with its fault.
        errors: Vec<(NodeId, NodeFault)>,
    },
    /// A quorum said yes, but too late: the validity left was not above the minimum.
    ValidityExhausted,
    /// The overall wait deadline left no time for another attempt.
    WaitDeadline,
    /// The caller cancelled the acquisition.
    Cancelled,
}

/// Why a held lock was lost.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LostReason {
    /// The deadline passed without a successful extension.
    DeadlinePassed,
    /// More than `N - q` nodes no longer hold our token.
    NotOwned {
        /// Nodes that answered that the key is not ours.
        nodes: Vec<NodeId>,
    },
    /// Extensions kept failing for lack of a quorum until the deadline passed.
    QuorumUnreachable {
        /// Each failed node with its fault, from the last extension attempt.
        errors: Vec<(NodeId, NodeFault)>,
    },
}

/// One node's answer to the release script.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReleaseOutcome {
    /// Our key was deleted.
    Released,
    /// The key holds another token; it was left alone.
    NotHeld,
    /// The key no longer existed (it had expired, or was never set there).
    AlreadyExpired,
    /// The node failed; the key, if any, expires on its own.
    Failed(NodeFault),
}

/// Why one node's vote failed. Reported inside events; never a panic.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum NodeFault {
    /// The node was down or its connection dropped before it answered.
    Disconnected,
    /// The node did not answer before the round's deadline.
    Timeout,
    /// The node answered with an error reply (e.g. `-NOPERM`, `-READONLY`); the server's
    /// message is kept.
    Server(String),
    /// The node sent bytes that are not valid RESP, a reply too large, or a reply of a type
    /// the command cannot produce.
    Protocol(String),
    /// The connection handshake (`AUTH`, `SELECT`) was refused; the server's message is kept.
    Handshake(String),
    /// Not sent: the node already has this many requests unanswered (the configured
    /// [`max_in_flight`](crate::ConfigBuilder::max_in_flight)).
    Backlogged {
        /// The cap that was reached.
        max_in_flight: usize,
    },
}

impl fmt::Display for NodeFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Disconnected => f.write_str("node disconnected"),
            Self::Timeout => f.write_str("node did not answer in time"),
            Self::Server(msg) => write!(f, "node replied with an error: {msg}"),
            Self::Protocol(msg) => write!(f, "protocol violation: {msg}"),
            Self::Handshake(msg) => write!(f, "connection handshake refused: {msg}"),
            Self::Backlogged { max_in_flight } => write!(
                f,
                "not sent: the node has {max_in_flight} requests unanswered (max_in_flight)"
            ),
        }
    }
}

impl std::error::Error for NodeFault {}
