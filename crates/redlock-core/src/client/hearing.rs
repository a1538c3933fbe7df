//! Hearing of waiters (notify.rs, "the other way round"; docs/design.md, "Hearing of
//! waiters"): a lock call of ours that starts waiting for another client's release
//! announces it on the resource's waiting channel, and a line of ours that may hand the
//! hold from call to call listens there, so that it turns contested when a waiter of
//! another client comes, not at its next release through the nodes. Glue between `Lines`
//! (queue.rs: who announces when, which lines listen) and `Watching` (notify.rs: the
//! subscriptions and the routing), over the nodes.

use std::collections::VecDeque;

use crate::id::NodeId;
use crate::node::Node;
use crate::notify::{Watching, waiting_channel};
use crate::queue::Lines;
use crate::token::Resource;

/// A lock call for `resource` started waiting for another client's release (each time it
/// does: the holder may have changed since it last did): it announces so on every node that
/// takes requests, if it is in the resource's line (`Lines::announces`). Nodes written to
/// join `dirty`.
pub(super) fn announce_waiting(
    lines: &Lines,
    nodes: &mut [Node],
    dirty: &mut VecDeque<NodeId>,
    resource: &Resource,
) {
    if !lines.announces(resource) {
        return;
    }
    let channel = waiting_channel(resource);
    for (i, node) in nodes.iter_mut().enumerate() {
        if node.announce(&channel) && node.mark_dirty() {
            dirty.push_back(NodeId::new(i));
        }
    }
}

/// After `resource`'s line changed (a call joined it, or left it): its waiting channel is
/// watched while the line listens (`Lines::listens`), and no longer once the line ended;
/// once a node subscribed, the line's next hand-off goes through the nodes
/// (`Lines::started_listening`). Cheap when no line listens and this one does not start to.
pub(super) fn follow_line(
    lines: &mut Lines,
    watching: &mut Watching,
    nodes: &mut [Node],
    dirty: &mut VecDeque<NodeId>,
    resource: &Resource,
) {
    let listens = lines.listens(resource);
    if (listens || watching.listens()) && watching.listen(resource, listens, nodes, dirty) {
        lines.started_listening(resource);
    }
}
