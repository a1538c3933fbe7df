//! Hearing of waiters (notify.rs, "the other way round"; docs/design.md, "Hearing of
//! waiters"): a lock call of ours that first finds the lock held by another client
//! announces it on the resource's waiting channel, and a line of ours that may hand the
//! hold from call to call listens there, so that it turns contested when a waiter of
//! another client comes, not at its next release through the nodes. Glue between `Lines`
//! (queue.rs: who announces when, which lines listen) and `Watching` (notify.rs: the
//! subscriptions and the routing), over the nodes.

use std::collections::VecDeque;
use std::time::Instant;

use rand_core::CryptoRng;

use super::Client;
use crate::id::{NodeId, OpId};
use crate::node::Node;
use crate::notify::{Watching, waiting_channel};
use crate::queue::Lines;
use crate::token::Resource;

/// A lock call for `resource` first found the lock held by another client (`Lock::
/// take_waits`): it announces that it waits on every node that takes requests and speaks
/// RESP3, if it is in the resource's line (`Lines::announces`). Nodes written to join
/// `dirty`.
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

/// After `resource`'s line changed at `now` (a call joined it or left it, it heard a
/// waiter, or a call of it releases): its waiting channel is watched while the line listens
/// (`Lines::listens`: it may hand over and is not contested), and no longer once it does not
/// or ended; once a node subscribed, the line's next hand-off goes through the nodes
/// (`Lines::started_listening`). Cheap when no line listens and this one does not start to.
pub(super) fn follow_line(
    lines: &mut Lines,
    watching: &mut Watching,
    (nodes, dirty): (&mut [Node], &mut VecDeque<NodeId>),
    resource: &Resource,
    now: Instant,
) {
    let listens = lines.listens(resource, now);
    if (listens || watching.listens()) && watching.listen(resource, listens, nodes, dirty) {
        lines.started_listening(resource);
    }
}

impl<R: CryptoRng> Client<R> {
    /// [`follow_line`] for the line of the lock `op`, if it is in one.
    pub(super) fn follow_line_of(&mut self, now: Instant, op: OpId) {
        if !self.lines.any_waited() && !self.watching.listens() {
            return;
        }
        if let Some(lock) = self.locks.in_line(op) {
            let nodes = (&mut self.nodes[..], &mut self.dirty);
            follow_line(
                &mut self.lines,
                &mut self.watching,
                nodes,
                lock.resource(),
                now,
            );
        }
    }

    /// A waiter of `resource` announced itself: the line is contested (it hands off through
    /// the nodes, fairly), and stops listening.
    pub(super) fn hear_waiter(&mut self, now: Instant, resource: &Resource) {
        if !self.controls.hear_waiters {
            return;
        }
        self.lines.contest(resource, now);
        let nodes = (&mut self.nodes[..], &mut self.dirty);
        follow_line(&mut self.lines, &mut self.watching, nodes, resource, now);
    }
}
