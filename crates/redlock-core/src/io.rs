//! What crosses the boundary between the core and a driver: identifiers, [`Input`],
//! [`Output`], [`Transmit`] and the lock [`Event`]s with their reasons.
//!
//! The contract for using them is documented on [`Client`](crate::Client).

use std::fmt;
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::error::NodeFault;
use crate::token::{Resource, Token};

/// Index of a node (a Redis or Valkey primary) in the configured node list, `0..N`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(u16);

impl NodeId {
    /// The node at position `index` of the configuration.
    ///
    /// # Panics
    /// If `index` exceeds [`MAX_NODES`](crate::MAX_NODES), a limit that configurations
    /// already enforce.
    #[inline]
    pub fn new(index: usize) -> Self {
        match u16::try_from(index) {
            Ok(i) => Self(i),
            Err(_) => panic!("node index {index} exceeds the node limit"),
        }
    }

    /// The node's position in the configuration.
    #[inline]
    pub fn index(self) -> usize {
        usize::from(self.0)
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "node#{}", self.0)
    }
}

/// Identifies one lock operation: an acquisition and, once acquired, the lock it holds.
///
/// Every event about the lock (extensions, loss, release) carries the same id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OpId(u64);

impl OpId {
    /// Makes an id from a raw number. The connection layer numbers its operations itself;
    /// users of the operation layer ([`Lock`](crate::Lock)) may pick any numbering.
    pub fn from_raw(raw: u64) -> Self {
        Self(raw)
    }

    /// The raw number.
    pub fn as_raw(self) -> u64 {
        self.0
    }
}

impl fmt::Display for OpId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "op#{}", self.0)
    }
}

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
