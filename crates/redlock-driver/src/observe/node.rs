//! What the observer knows of each node ([`NodeState`]): a leaf that the state keeper
//! (`active`) writes and the span writer (`trace`) reads.

use std::time::{Duration, Instant};

use redlock_core::NodeId;

/// What the observer knows of one node.
#[derive(Default)]
pub(super) struct NodeState {
    /// Connected (the core's `Connected` input) until it disconnects or is replaced.
    pub(super) up: bool,
    /// The last connection attempt failed: the next failure is reported quieter.
    pub(super) failing: bool,
    /// When the first write since the node's last reply was queued.
    pub(super) sent: Option<Instant>,
    /// The node's last round trip: from that write to the next bytes it sent.
    pub(super) rtt: Option<Duration>,
    /// The node's commands, as last seen.
    #[cfg(feature = "tracing")]
    pub(super) commands: Option<redlock_core::NodeCommands>,
    /// The node's last refused handshake reported (the command and the server's reply).
    #[cfg(feature = "tracing")]
    pub(super) refusal: Option<(&'static str, String)>,
    /// The node's `-NOSCRIPT` replies, as last reported.
    #[cfg(feature = "tracing")]
    pub(super) noscript_replies: u64,
}

/// The node's state, made on first sight.
pub(super) fn node(nodes: &mut Vec<NodeState>, id: NodeId) -> &mut NodeState {
    let i = id.index();
    if nodes.len() <= i {
        nodes.resize_with(i + 1, NodeState::default);
    }
    &mut nodes[i]
}
