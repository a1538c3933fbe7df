//! What crosses the boundary between the core and a driver: [`Input`], [`Output`],
//! [`Transmit`], the lock [`Event`]s with their reasons, and [`NodeFault`], why one node's
//! vote failed.
//!
//! The contract for using them is documented on [`Client`](crate::Client).

use std::fmt;
use std::time::{Duration, Instant};

use bytes::Bytes;

pub use crate::fault::{ConnectionError, NodeFault};
use crate::id::{ConnId, NodeId, NodeName, OpId};
use crate::inspection::Inspection;
use crate::quarantine::{QuarantineCause, QuarantineSkip};
use crate::token::{Resource, Token};

/// One thing that happened outside the core, stamped with the driver's monotonic `now`.
///
/// Inputs about a connection name it by the [`ConnId`] the client handed out with
/// [`Output::Connect`]; input from a connection that is no longer the node's current one is
/// ignored (see [`ConnId`]).
#[derive(Debug, Clone)]
pub enum Input<'a> {
    /// The connection is established (after an [`Output::Connect`]).
    Connected {
        /// The driver's monotonic time.
        now: Instant,
        /// The connection that is up.
        conn: ConnId,
    },
    /// Bytes arrived on a connection, in stream order. Any split is allowed.
    Received {
        /// The driver's monotonic time.
        now: Instant,
        /// The connection the bytes came from.
        conn: ConnId,
        /// The bytes, exactly as read from the socket.
        bytes: &'a [u8],
    },
    /// The connection closed, or the attempt to open it failed.
    Disconnected {
        /// The driver's monotonic time.
        now: Instant,
        /// The connection that is gone.
        conn: ConnId,
        /// Why: requests that fail for it, and the node's later requests until it is back,
        /// report this reason.
        reason: ConnectionError,
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
    /// Open this connection to its node, then report [`Input::Connected`] or
    /// [`Input::Disconnected`] naming it. Any earlier connection to the node is over: close
    /// it if it is still open.
    Connect(ConnId),
    /// Close this connection now and read nothing more from it. The core already treats it
    /// as gone; do not report [`Input::Disconnected`] for it.
    Disconnect(ConnId),
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

/// An outcome the user is waiting for, carrying the [`OpId`] it belongs to ([`Event::op`]);
/// or news of a node that concerns every lock, which belongs to no operation: the restart
/// quarantine ([`NodeQuarantined`](Self::NodeQuarantined),
/// [`QuarantineSkipped`](Self::QuarantineSkipped)) and the clock check
/// ([`ClockRate`](Self::ClockRate), [`ClockStep`](Self::ClockStep)).
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
        /// Attempts made, time spent, and what each node answered in the last attempt.
        stats: AcquireStats,
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
    /// A release is decided: a quorum of nodes answered (released, or nothing of ours to
    /// release), or every node answered, failed or timed out. The operation is over for
    /// the caller; nodes reported [`ReleaseOutcome::Pending`] are still released in the
    /// background, until the release timeout. A release of a caller-supplied token
    /// ([`Client::release_token`](crate::Client::release_token)) waits for every node.
    Released {
        /// The operation.
        op: OpId,
        /// What each node did, indexed by node.
        nodes: Vec<ReleaseOutcome>,
    },
    /// An inspection finished: every node answered or timed out. The operation is over.
    Inspected {
        /// The operation.
        op: OpId,
        /// What each node holds, and what a quorum agrees on.
        inspection: Inspection,
    },
    /// A node's votes for acquisitions count as "no" until `until`: it restarted, or
    /// started less than the quarantine window ago, and may have lost keys of locks that
    /// are still held ([`ConfigBuilder::restart_quarantine`](crate::ConfigBuilder::restart_quarantine);
    /// docs/safety.md, "Node restarts"). Extensions and releases still go to it. Sent at
    /// each connection that finds the node so.
    NodeQuarantined {
        /// The node.
        node: NodeName,
        /// When its votes count again, on the driver's clock.
        until: Instant,
        /// Why.
        cause: QuarantineCause,
    },
    /// A node was not quarantined although a connection's check ran: it persists every
    /// write, or it did not say who it is (docs/safety.md, "Node restarts").
    QuarantineSkipped {
        /// The node.
        node: NodeName,
        /// Why no quarantine.
        reason: QuarantineSkip,
    },
    /// A node's clock ran at a rate outside `1 ± drift_factor` of the client's monotonic
    /// clock, over a window of `over`: a key on that node may expire earlier (a fast clock)
    /// or later (a slow one) than the lock's validity allows for (docs/safety.md, "Checking
    /// the clock rates"). Reported once per window (every five seconds or so) while it
    /// lasts. Only with [`ConfigBuilder::clock_check`](crate::ConfigBuilder::clock_check).
    ClockRate {
        /// The node.
        node: NodeName,
        /// The least rate the readings allow, in node seconds per client second.
        low: f64,
        /// The most rate the readings allow; the whole of `[low, high]` lies outside the
        /// allowance.
        high: f64,
        /// The time between the window's first and last readings, on the client's clock.
        over: Duration,
    },
    /// A node's clock jumped, between two readings about a second apart, by more than its
    /// allowed rate and the readings' round trips explain: a key on it may have expired
    /// early (forward) or live on (back). Only with
    /// [`ConfigBuilder::clock_check`](crate::ConfigBuilder::clock_check).
    ClockStep {
        /// The node.
        node: NodeName,
        /// Whether the clock jumped forward (ahead of where it should be) or back.
        forward: bool,
        /// The least the clock jumped by: the jump beyond the error bars.
        by: Duration,
    },
}

impl Event {
    /// The operation this event belongs to; `None` for news of a node.
    pub fn op(&self) -> Option<OpId> {
        match self {
            Self::Acquired(a) => Some(a.op),
            Self::AcquireFailed { op, .. }
            | Self::Extended { op, .. }
            | Self::Lost { op, .. }
            | Self::Released { op, .. }
            | Self::Inspected { op, .. } => Some(*op),
            Self::NodeQuarantined { .. }
            | Self::QuarantineSkipped { .. }
            | Self::ClockRate { .. }
            | Self::ClockStep { .. } => None,
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
    /// Attempts made, time spent, and what each node answered in the successful attempt.
    pub stats: AcquireStats,
    /// The fencing token of a fenced lock ([`LockOptions::fenced`]): larger than that of
    /// every hold of this resource that ended before this one began. Pass it with every
    /// write to the storage the lock protects, which refuses a write whose token is below
    /// the largest it has seen (docs/safety.md, "Fencing"). `None` for an unfenced lock.
    ///
    /// [`LockOptions::fenced`]: crate::LockOptions::fenced
    pub fencing_token: Option<u64>,
}

/// How an acquisition went: on success ([`Acquired::stats`]) and on every failure
/// ([`Event::AcquireFailed`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AcquireStats {
    /// Attempts made, including the last.
    pub attempts: u32,
    /// From the first attempt's start to the decision (success or failure).
    pub elapsed: Duration,
    /// What each node answered in the last attempt that was decided (the successful one on
    /// success), in node order. Empty if no attempt was decided (one cancelled in flight
    /// reports its nodes as [`AcquireOutcome::Pending`]).
    pub nodes: Vec<NodeOutcome>,
    /// Fenced locks: the nodes whose counter was behind the token and was raised to it
    /// before the lock was granted (the write-back). Empty when the counters agreed, which
    /// costs one round trip instead of two.
    pub written_back: Vec<NodeName>,
    /// Whether the call took the hold of the call ahead of it in its client's line for the
    /// resource, without going to the nodes (a hand-over: docs/design.md, "Local
    /// queueing"): the same stored value and deadline, the validity that was left. Then
    /// `attempts` is 0, `elapsed` is zero (no attempt; the time in line came before) and
    /// `nodes` is empty.
    pub handed_over: bool,
}

impl AcquireStats {
    /// How many nodes' outcomes match `f`, e.g. `|o| *o == AcquireOutcome::Locked`.
    pub fn count(&self, f: impl Fn(&AcquireOutcome) -> bool) -> usize {
        self.nodes.iter().filter(|n| f(&n.outcome)).count()
    }
}

impl fmt::Display for AcquireStats {
    /// `2 attempts in 61.2ms (127.0.0.1:7001: locked, 127.0.0.1:7002: held by another
    /// client, 127.0.0.1:7003: connection refused)`; the nodes are the last attempt's.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = if self.attempts == 1 { "" } else { "s" };
        write!(f, "{} attempt{s} in {:?}", self.attempts, self.elapsed)?;
        for (i, n) in self.nodes.iter().enumerate() {
            let sep = if i == 0 { " (" } else { ", " };
            write!(f, "{sep}{}: {}", n.node, n.outcome)?;
        }
        if !self.nodes.is_empty() {
            f.write_str(")")?;
        }
        if self.handed_over {
            f.write_str(", handed over by the call ahead")?;
        }
        for (i, node) in self.written_back.iter().enumerate() {
            let sep = if i == 0 {
                "; fencing counter written back on "
            } else {
                ", "
            };
            write!(f, "{sep}{node}")?;
        }
        Ok(())
    }
}

/// One node's answer in an attempt, with the node's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeOutcome {
    /// The node.
    pub node: NodeName,
    /// What it answered.
    pub outcome: AcquireOutcome,
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

impl fmt::Display for AcquireOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Locked => f.write_str("locked"),
            Self::Held => f.write_str("held by another client"),
            Self::Failed(fault) => fault.fmt(f),
            Self::Pending => f.write_str("no answer yet"),
        }
    }
}

/// Why an acquisition failed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum AcquireFailure {
    /// Other holders kept us from a quorum (in the last attempt).
    Contended {
        /// Nodes on which the key was held by someone else.
        nodes: Vec<NodeName>,
    },
    /// Too many nodes failed to answer or answered with errors (in the last attempt).
    QuorumUnreachable {
        /// Each failed node with its fault.
        errors: Vec<(NodeName, NodeFault)>,
    },
    /// A quorum said yes, but too late: the validity left was not above the minimum.
    ValidityExhausted,
    /// The overall wait deadline left no time for another attempt.
    WaitDeadline {
        /// Why the last attempt failed (`None` if none was decided).
        last: Option<Box<Self>>,
    },
    /// The caller cancelled the acquisition.
    Cancelled,
    /// Another lock call of this client held the resource, or was acquiring it, for as
    /// long as this one could wait. Lock calls of one client for one resource queue in
    /// arrival order and only the first contends on the nodes, so this call sent nothing.
    /// A single attempt (a "try") fails this way at once.
    HeldLocally,
    /// A semaphore's holders in place agreed on another number of permits than this call
    /// asked for (docs/kinds.md, "Counting semaphore"): every holder of a resource must ask
    /// for the same k. Not retried: the call is wrong, not unlucky.
    PermitsMismatch {
        /// The permits this call asked for.
        asked: u32,
        /// The permits the holders in place asked for.
        in_place: u32,
        /// The nodes that answered so.
        nodes: Vec<NodeName>,
    },
}

impl fmt::Display for AcquireFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Contended { nodes } => {
                f.write_str("another client holds it on ")?;
                names(f, nodes)
            }
            Self::QuorumUnreachable { errors } => {
                f.write_str("too many nodes failed: ")?;
                faults(f, errors)
            }
            Self::ValidityExhausted => {
                f.write_str("a quorum agreed too late to leave any validity")
            }
            Self::WaitDeadline { last: Some(last) } => {
                write!(f, "the wait deadline passed; the last attempt: {last}")
            }
            Self::WaitDeadline { last: None } => {
                f.write_str("the wait deadline passed before an attempt was decided")
            }
            Self::Cancelled => f.write_str("the acquisition was cancelled"),
            Self::HeldLocally => {
                f.write_str("another lock call of this client holds it (or is acquiring it)")
            }
            Self::PermitsMismatch {
                asked,
                in_place,
                nodes,
            } => {
                write!(
                    f,
                    "this call asked for a semaphore of {asked} permits, but its holders hold \
                     it as one of {in_place} permits on "
                )?;
                names(f, nodes)
            }
        }
    }
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
        nodes: Vec<NodeName>,
    },
    /// Extensions kept failing for lack of a quorum until the deadline passed.
    QuorumUnreachable {
        /// Each failed node with its fault, from the last extension attempt.
        errors: Vec<(NodeName, NodeFault)>,
    },
    /// An extension was refused for good ([`NodeFault::is_permanent`]) or answered "not
    /// ours" on so many nodes that no quorum can say yes again: reported at once instead of
    /// retrying until the deadline.
    Refused {
        /// Each node that refused, with its fault.
        errors: Vec<(NodeName, NodeFault)>,
        /// Nodes that answered that the key is not ours.
        not_ours: Vec<NodeName>,
    },
}

impl fmt::Display for LostReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::DeadlinePassed => {
                f.write_str("its deadline passed before an extension succeeded")
            }
            Self::NotOwned { nodes } => {
                f.write_str("our token is gone from ")?;
                names(f, nodes)
            }
            Self::QuorumUnreachable { errors } => {
                f.write_str("extensions failed on too many nodes until the deadline: ")?;
                faults(f, errors)
            }
            Self::Refused { errors, not_ours } => {
                f.write_str("extensions were refused for good on too many nodes: ")?;
                faults(f, errors)?;
                if !not_ours.is_empty() {
                    f.write_str("; our token is gone from ")?;
                    names(f, not_ours)?;
                }
                Ok(())
            }
        }
    }
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
    /// Nothing was deleted: the key held another token, or no longer existed. A node that
    /// releases by its own compare-and-delete (`DELIFEQ`, `DELEX`; see
    /// [`NodeCommands`](crate::NodeCommands)) answers the same 0 to both, so its report
    /// cannot tell them apart; the release script can, and reports
    /// [`NotHeld`](Self::NotHeld) or [`AlreadyExpired`](Self::AlreadyExpired). Either
    /// way, nothing of another holder's was touched.
    NotHeldOrExpired,
    /// The node failed; the key, if any, expires on its own. A node whose connection broke
    /// gets the release again on its next connection, in the background, until the
    /// release timeout.
    Failed(NodeFault),
    /// No answer yet when the release was decided (a quorum had answered): the release
    /// goes on in the background, bounded by the release timeout, and the client keeps the
    /// lock until it has an answer or the timeout passes.
    Pending,
    /// Nothing was sent: the hold went to the next call of this client in line for the
    /// resource (a hand-over: docs/design.md, "Local queueing"), whose key it now is.
    HandedOver,
}

impl fmt::Display for ReleaseOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Released => f.write_str("released"),
            Self::NotHeld => f.write_str("held by another client, left alone"),
            Self::AlreadyExpired => f.write_str("already expired"),
            Self::NotHeldOrExpired => f.write_str("not held: another client's, or expired"),
            Self::Failed(fault) => fault.fmt(f),
            Self::Pending => f.write_str("no answer yet, still releasing in the background"),
            Self::HandedOver => f.write_str("handed over to the next call in line"),
        }
    }
}

/// `a, b, c`, or `no node`.
fn names(f: &mut fmt::Formatter<'_>, nodes: &[NodeName]) -> fmt::Result {
    if nodes.is_empty() {
        return f.write_str("no node");
    }
    for (i, node) in nodes.iter().enumerate() {
        let sep = if i == 0 { "" } else { ", " };
        write!(f, "{sep}{node}")?;
    }
    Ok(())
}

/// `a: why; b: why`, or `no node answered`.
fn faults(f: &mut fmt::Formatter<'_>, errors: &[(NodeName, NodeFault)]) -> fmt::Result {
    if errors.is_empty() {
        return f.write_str("no node answered");
    }
    for (i, (node, fault)) in errors.iter().enumerate() {
        let sep = if i == 0 { "" } else { "; " };
        write!(f, "{sep}{node}: {fault}")?;
    }
    Ok(())
}
