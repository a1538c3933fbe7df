//! Pumping a lock: after anything changed it, the client moves its requests to the node
//! streams, its events to the output queue, re-arms its timer, follows its release channel
//! (notify.rs) and, when it lets go of its resource's line, starts the next call in line
//! (queue.rs).

use std::collections::VecDeque;
use std::time::Instant;

use bytes::Bytes;
use rand_core::CryptoRng;

use super::{Client, hearing};
use crate::command::Encoder;
use crate::id::{NodeId, OpId, RequestId};
use crate::io::Event;
use crate::lock::Lock;
use crate::node::Node;
use crate::notify;
use crate::queue::HandOff;
use crate::server::NativeUse;
use crate::time::Timer;
use crate::waiters::Ranks;

impl<R: CryptoRng> Client<R> {
    /// Moves a lock's requests to node streams (failing those to down nodes at once), its
    /// events to the output queue, and re-arms its timer. When the lock leaves the front of
    /// its resource's line, the next call in line starts, and is pumped in turn.
    pub(super) fn pump(&mut self, now: Instant, op: OpId) {
        let mut next = Some(op);
        // Each turn takes a lock out of its line for good, so this ends.
        while let Some(op) = next.take() {
            let handed = self.pump_one(now, op);
            if let Some((op, how)) = handed
                && let Some(lock) = self.locks.get_mut(&op)
            {
                lock.start_queued(now, how, &mut self.rng);
                next = Some(op);
            }
        }
    }

    /// [`pump`](Self::pump) for one lock; returns the next call in line if this lock just
    /// left the front, and how it starts (queue.rs; with its ranks in the waiters' queue if
    /// this lock's release placed it: waiters/mod.rs).
    fn pump_one(&mut self, now: Instant, op: OpId) -> Option<(OpId, (HandOff, Option<Ranks>))> {
        let entry = self.locks.entry_mut(op)?;
        if entry.subscribed != entry.wants_channel(&self.controls) {
            // Before its requests: the subscription goes out ahead of the probe, and giving it
            // up ahead of the release, which then counts only other clients' listeners.
            entry.watch(
                &self.controls,
                &mut self.watching,
                &mut self.nodes,
                &mut self.dirty,
            );
        }
        if entry.subscribed && self.controls.poll_unheard && entry.lock.is_waiting_for_release() {
            // A waiter that cannot hear its turn polls (waiters/mod.rs, `UNHEARD_POLL_EVERY`).
            entry.lock.poll_unheard(now, notify::hearing(&self.nodes));
        }
        if entry.lock.take_waits() {
            // Behind its subscription, ahead of its requests.
            let resource = entry.lock.resource();
            let (nodes, dirty) = (&mut self.nodes[..], &mut self.dirty);
            hearing::announce_waiting(&self.lines, nodes, dirty, resource);
        }
        send_requests(
            now,
            &mut entry.lock,
            &mut self.nodes,
            &mut self.dirty,
            self.config.timing.drift_factor,
            &mut self.encoder,
            &mut self.rng,
        );
        forward_events(&mut entry.lock, &mut self.events);
        let timer = entry.lock.poll_timeout();
        let next = entry.leave_line(&mut self.lines, now);
        if self.watching.listens() {
            let nodes = (&mut self.nodes[..], &mut self.dirty);
            let resource = entry.lock.resource();
            hearing::follow_line(&mut self.lines, &mut self.watching, nodes, resource, now);
        }
        let finished = entry.lock.is_finished();
        let kept = entry.subscribed;
        match next.as_ref().map(|(to, _)| *to) {
            // The line's next call takes the channel over, subscribed as it is.
            Some(to) if kept => self.locks.pass_channel(&mut self.watching, (op, to)),
            _ if kept && !entry.wants_channel(&self.controls) => entry.watch(
                &self.controls,
                &mut self.watching,
                &mut self.nodes,
                &mut self.dirty,
            ),
            _ => {}
        }
        if finished {
            self.locks.remove(&op);
        }
        self.timers.arm(Timer::Op(op), timer);
        next
    }
}

/// Sends each request the lock has ready to its node's stream (in the form the node is
/// offered: server.rs, `Offer`, drawn with the configured `drift`), or answers it at once
/// with the node's refusal if the node is down or backlogged: a dead or backlogged node
/// never delays a decision. Nodes given bytes join `dirty`.
#[inline]
fn send_requests<R: CryptoRng>(
    now: Instant,
    lock: &mut Lock,
    nodes: &mut [Node],
    dirty: &mut VecDeque<NodeId>,
    drift: f64,
    encoder: &mut Encoder,
    rng: &mut R,
) {
    loop {
        let offered = &*nodes;
        let commands = |n: NodeId| offered[n.index()].offer(now, drift);
        let Some((id, to, native, bytes)) = lock.next_transmit(encoder, commands) else {
            break;
        };
        let bytes = bytes.clone();
        let node = &mut nodes[to.index()];
        if node.accepts_requests() && node.has_room() {
            send_request(now, lock, node, id, native, &bytes);
            if node.mark_dirty() {
                dirty.push_back(to);
            }
        } else {
            lock.handle_reply(now, id, Err(node.refusal()), rng);
        }
    }
}

/// Writes one request of the lock to `node`'s stream: a native release goes with its
/// announcement if it releases a held lock (as the script announces itself), and with its
/// script form if the node is still probed (sent in its place should the node refuse the
/// native command after the lock stopped waiting: client.rs, `answer`). A fenced pipeline
/// refreshes the node's clock reading if it is old, and a `TIME` sample for the clock-rate
/// check may ride with any request (node.rs, `refresh_clock`, `sample_clock`).
#[inline]
fn send_request(
    now: Instant,
    lock: &mut Lock,
    node: &mut Node,
    id: RequestId,
    native: Option<NativeUse>,
    bytes: &Bytes,
) {
    let release = native == Some(NativeUse::Release);
    let fallback = if release && node.is_probed() {
        lock.script_form(id)
    } else if lock.runs_kind_scripts() {
        // A kind's release or abandon: its `EVAL`, should the node have lost the script
        // (kinds/mod.rs, `Command::lets_go`).
        lock.lets_go_form(id)
    } else {
        None
    };
    let announced = release && lock.announces(id);
    node.send((lock.op(), id), native, (announced, fallback), bytes);
    if native == Some(NativeUse::Fence) {
        node.refresh_clock(now);
    }
    node.sample_clock(now);
}

/// Moves the lock's events to the client's output queue, in order.
#[inline]
fn forward_events(lock: &mut Lock, events: &mut VecDeque<Event>) {
    while let Some(event) = lock.poll_event() {
        events.push_back(event);
    }
}
