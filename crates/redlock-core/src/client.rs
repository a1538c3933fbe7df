//! [`Client`]: the connection layer. N ordered byte streams, many concurrent
//! [`Lock`](crate::Lock)s, RESP in and out, reply matching, reconnection, and one timer
//! queue.
//!
//! All lock logic is in [`Lock`](crate::Lock); the client moves requests and replies
//! between locks and node streams, and wakes locks when their timers are due. Each feature
//! around that has a room the client calls into: the local line of lock calls (queue.rs,
//! `Lines`), release notifications (notify.rs, `Watching`), a node's connection and session
//! (node.rs), the restart quarantine and the clock check (quarantine.rs, clock_rate.rs).
//!
//! This file holds [`Client`] with the driver's contract and its getters, reading each
//! node's bytes and matching its replies to requests, closing and reconnecting nodes, the
//! timers, and the node-health steps that look at every node at once (the same server
//! behind two addresses, first sights, quarantine verdicts and clock findings told as
//! events). Beside it: client/operations.rs starts and changes operations,
//! client/locks.rs keeps the table of locks with the client's marks of each,
//! client/pump.rs moves one lock's requests, events and timer out after it changed, and
//! client/controls.rs reads the client's negative controls.

use std::collections::VecDeque;
use std::hash::BuildHasherDefault;
use std::sync::Arc;
use std::time::Instant;

use rand_core::CryptoRng;

use crate::command::Encoder;
use crate::config::Config;
use crate::error::UsageError;
use crate::health::Health;
use crate::id::{ConnId, NodeId, OpId, OpIdHasher, RequestId};
use crate::io::{Event, Input, NodeFault, Output, Transmit};
use crate::node::{Link, Node, Pending, SessionReply};
use crate::notify::{Heard, Notice, Push, Watching, decode_push};
use crate::options::{LockOptions, LockParams};
use crate::queue::Lines;
use crate::resp::{ProtocolError, Reply};
use crate::server::{NodeCommands, is_unsupported};
use crate::session::Learned;
use crate::time::{Timer, TimerQueue};
use crate::token::Token;
use controls::ClientControls;
use locks::Locks;

mod controls;
mod hearing;
mod locks;
mod operations;
mod pump;

/// The sans-IO Redlock client for N nodes: feed it inputs, drain its outputs.
///
/// # Methods
/// - Getters: [`config`](Self::config), [`held`](Self::held),
///   [`active_ops`](Self::active_ops); and per node: [`is_up`](Self::is_up),
///   [`connection`](Self::connection), [`down_cause`](Self::down_cause),
///   [`node_commands`](Self::node_commands), [`noscript_replies`](Self::noscript_replies).
/// - Input: [`handle_input`](Self::handle_input).
/// - Mutations: [`acquire`](Self::acquire), [`acquire_with`](Self::acquire_with),
///   [`try_acquire`](Self::try_acquire), [`extend`](Self::extend),
///   [`release`](Self::release), [`cancel`](Self::cancel); and two operations on a lock
///   held by anyone: [`inspect`](Self::inspect) (read-only) and
///   [`release_token`](Self::release_token).
/// - Output: [`poll_output`](Self::poll_output).
///
/// # What a driver MUST do
/// 1. Build the client from a [`Config`] and a cryptographically secure RNG.
/// 2. Call [`poll_output`](Self::poll_output) until it returns [`Output::Timeout`] or
///    [`Output::Idle`], before every input and mutation (the client returns
///    [`UsageError::NotDrained`] otherwise). Write each [`Transmit`] to its node in order,
///    open a connection on [`Output::Connect`], close it on [`Output::Disconnect`], and hand
///    each [`Event`] to whoever waits on its [`OpId`].
/// 3. Wait for exactly one thing: the last `Timeout` deadline, bytes or a connect/disconnect
///    on some node socket, or a user command; feed it stamped with a fresh `now`.
/// 4. Pass `now` from one monotonic clock; it MUST NOT go backwards (the client clamps it
///    to the last value seen, and debug builds assert).
/// 5. Report every outcome of an [`Output::Connect`]: [`Input::Connected`] or
///    [`Input::Disconnected`] with the reason (also for a connect timeout, which the driver
///    owns), naming the [`ConnId`] the output handed out.
/// 6. Report [`Input::Disconnected`] when a connection drops, with the reason, and name the
///    connection every input comes from. Input from a connection that is no longer current
///    (one the client told the driver to close, or one replaced by a newer `Connect`) is
///    ignored, so a reader that is late in noticing its connection is gone does no harm.
///
/// Order matters per node, not across nodes: each node's bytes MUST be written in the
/// order the client hands them out, and each node's input fed in the order it arrived
/// (replies are matched to requests by position). The order between nodes is free.
///
/// The client never blocks, reads no clock and owns no socket.
#[derive(Debug)]
pub struct Client<R> {
    config: Config,
    rng: R,
    nodes: Vec<Node>,
    /// The operations not yet finished, with the client's marks of each (client/locks.rs).
    locks: Locks,
    /// Each lock's next deadline and each down node's reconnection.
    timers: TimerQueue<Timer, BuildHasherDefault<OpIdHasher>>,
    actions: VecDeque<Output>,
    events: VecDeque<Event>,
    next_op: u64,
    now: Option<Instant>,
    drained: bool,
    /// Nodes that may have bytes to write, in the order they got them (a node appears at
    /// most once: see `Node::mark_dirty`).
    dirty: VecDeque<NodeId>,
    /// Where rounds encode their commands (each round keeps its own bytes).
    encoder: Encoder,
    /// The lock calls in flight per resource, in arrival order: only the first contends
    /// (queue.rs).
    lines: Lines,
    /// The channels watched: the release channels, each for the lock waiting on it, and
    /// the waiting channels, each for the line listening on it (notify.rs).
    watching: Watching,
    /// The nodes' health across them: the restart quarantine's window, the decisions that
    /// compare nodes (health.rs).
    health: Health,
    /// The negative controls (test scaffolding: client/controls.rs), all on but under a
    /// mutant.
    controls: ClientControls,
    /// The parameters of a lock with the default options, resolved once (options.rs): every
    /// such lock shares them. `None` if the default options do not resolve.
    defaults: Option<Arc<LockParams>>,
}

// `Client` is generic over its RNG, so its methods are compiled in the driver's crate. The
// small per-reply helpers they call here (node, decoder, lock, round) are `#[inline]`, so
// that they can be inlined there without LTO.
impl<R: CryptoRng> Client<R> {
    /// A client for the nodes of `config`. The first outputs ask to connect to every node.
    pub fn new(config: Config, rng: R) -> Self {
        let nodes: Vec<Node> = (config.nodes.iter().enumerate())
            .map(|(i, settings)| Node::new(NodeId::new(i), &config, settings.clone()))
            .collect();
        let actions = (nodes.iter())
            .filter_map(|n| n.current().map(Output::Connect))
            .collect();
        let controls = ClientControls::of(&config);
        let defaults = (LockOptions::default().resolve(&config).ok()).map(Arc::new);
        Self {
            health: Health::new(&config),
            config,
            rng,
            nodes,
            locks: Locks::default(),
            timers: TimerQueue::default(),
            actions,
            events: VecDeque::new(),
            next_op: 0,
            now: None,
            drained: false,
            dirty: VecDeque::new(),
            encoder: Encoder::default(),
            lines: controls.lines(),
            watching: Watching::default(),
            controls,
            defaults,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The token and deadline of a held lock.
    pub fn held(&self, op: OpId) -> Option<(&Token, Instant)> {
        self.locks.get(&op)?.held()
    }

    /// Whether the node's connection is up.
    pub fn is_up(&self, node: NodeId) -> bool {
        self.nodes
            .get(node.index())
            .is_some_and(|n| n.link == Link::Up)
    }

    /// The node's current connection: the one being opened or up (`None` while the node is
    /// down, waiting to reconnect).
    pub fn connection(&self, node: NodeId) -> Option<ConnId> {
        self.nodes.get(node.index())?.current()
    }

    /// Why the node's last connection ended, while no connection is up: a refused
    /// handshake (`NodeFault::Handshake`, with the command and the server's reply) or a
    /// broken protocol the client closed it for, a disconnection, a failed connection
    /// attempt. `None` while the node is up, and before its first connection ends. A
    /// driver's telemetry reads it right after an [`Output::Disconnect`], to say why at
    /// once rather than with the next lock event that names the node.
    pub fn down_cause(&self, node: NodeId) -> Option<&NodeFault> {
        let n = self.nodes.get(node.index())?;
        match n.link {
            Link::Up | Link::Connecting { first: true } => None,
            Link::Down { .. } | Link::Connecting { first: false } => Some(&n.down_cause),
        }
    }

    /// How many times the node answered a script's `EVALSHA` with `-NOSCRIPT` since the
    /// client began: its script cache was empty (a restart, `SCRIPT FLUSH`, a failover),
    /// and the request went again in full as `EVAL`, once. A count that keeps growing
    /// means the node loses its cache often (or `preload_scripts` is off).
    pub fn noscript_replies(&self, node: NodeId) -> u64 {
        self.nodes
            .get(node.index())
            .map_or(0, |n| n.noscript_replies)
    }

    /// The commands the node is sent for release and extension, and how they were chosen
    /// (its `HELLO` reply, a fallback after a refusal): see [`NodeCommands`].
    pub fn node_commands(&self, node: NodeId) -> Option<NodeCommands> {
        Some(self.nodes.get(node.index())?.commands)
    }

    /// Operations not yet finished (acquiring, held, releasing, or cleaning up).
    pub fn active_ops(&self) -> usize {
        self.locks.len()
    }

    /// Feeds one input. Call only when drained (see the type docs).
    pub fn handle_input(&mut self, input: Input<'_>) -> Result<(), UsageError> {
        if let Input::Connected { conn, .. }
        | Input::Received { conn, .. }
        | Input::Disconnected { conn, .. } = input
        {
            self.check_node(conn.node())?;
        }
        self.check_drained()?;
        let now = self.clock(input.now());
        match input {
            Input::Connected { conn, .. } => {
                let node = &mut self.nodes[conn.node().index()];
                // Only the connection being opened comes up; a repeated report is moot.
                if node.is_current(conn) && node.link != Link::Up {
                    node.connected();
                    self.mark_dirty(conn.node());
                }
            }
            Input::Received { conn, bytes, .. } => {
                if self.nodes[conn.node().index()].is_current(conn) {
                    self.receive(now, conn.node(), bytes);
                }
            }
            Input::Disconnected { conn, reason, .. } => {
                if self.nodes[conn.node().index()].is_current(conn) {
                    self.close(now, conn.node(), NodeFault::Connection(reason), false);
                }
            }
            Input::Timeout(_) => self.fire_timers(now),
        }
        Ok(())
    }

    /// The next thing the driver must do. Call until `Timeout` or `Idle`.
    ///
    /// Connection requests come first, then bytes to write, then events. The result
    /// changes after any input or mutation.
    pub fn poll_output(&mut self) -> Output {
        if let Some(action) = self.actions.pop_front() {
            return action;
        }
        while let Some(node) = self.dirty.pop_front() {
            if let Some(bytes) = self.nodes[node.index()].take_transmit() {
                return Output::Transmit(Transmit { node, bytes });
            }
        }
        if let Some(event) = self.events.pop_front() {
            return Output::Event(event);
        }
        self.drained = true;
        match self.timers.next() {
            Some(at) => Output::Timeout(at),
            None => Output::Idle,
        }
    }

    // ---- internals ----

    fn receive(&mut self, now: Instant, node: NodeId, bytes: &[u8]) {
        let i = node.index();
        if self.nodes[i].link != Link::Up {
            // Bytes from a connection we already gave up on.
            return;
        }
        let mut bytes = bytes;
        loop {
            match self.read_unmatched(now, node, &mut bytes) {
                Ok(Unmatched::Read) => {
                    self.nodes[i].healthy(now);
                    continue;
                }
                Ok(Unmatched::Incomplete) => break,
                Ok(Unmatched::NotNext) => {}
                Err(fault) => return self.close(now, node, fault, true),
            }
            let reply = match self.nodes[i].decoder.next_reply_in(&mut bytes) {
                Ok(Some(reply)) => reply,
                Ok(None) => break,
                Err(e) => {
                    let fault = NodeFault::Protocol(e.message().to_owned());
                    return self.close(now, node, fault, true);
                }
            };
            // A request written as several commands: its replies are gathered until its last.
            let Some(reply) = self.nodes[i].gather(reply, self.controls.count_waiters) else {
                continue;
            };
            if let Err(fault) = self.answer(now, node, reply) {
                return self.close(now, node, fault, true);
            }
            self.nodes[i].healthy(now);
        }
        if let Err(e) = self.nodes[i].decoder.check_buffer() {
            self.close(now, node, NodeFault::Protocol(e.message().to_owned()), true);
        }
    }

    /// Reads what comes next from `node` if no request waits for it: a RESP3 push frame (a
    /// release notification, or a subscription's confirmation), or the reply to the
    /// session's `HELLO` or `TIME`.
    #[inline]
    fn read_unmatched(
        &mut self,
        now: Instant,
        node: NodeId,
        bytes: &mut &[u8],
    ) -> Result<Unmatched, NodeFault> {
        let protocol = |e: ProtocolError| NodeFault::Protocol(e.message().to_owned());
        let n = &mut self.nodes[node.index()];
        if n.decoder.next_is(bytes, b'>') {
            return match n
                .decoder
                .next_in_with(bytes, decode_push)
                .map_err(protocol)?
            {
                Some(push) => {
                    self.on_push(now, node, push);
                    Ok(Unmatched::Read)
                }
                None => Ok(Unmatched::Incomplete),
            };
        }
        // Checked here first: almost every reply answers a lock's request.
        if !matches!(n.in_flight.front(), Some(Pending::Session(_))) {
            return Ok(Unmatched::NotNext);
        }
        Ok(match n.read_session_reply(now, bytes).map_err(protocol)? {
            SessionReply::Read => Unmatched::Read,
            SessionReply::Health(learned) => {
                self.on_health(now, node, learned);
                Unmatched::Read
            }
            SessionReply::Resp3 => {
                self.subscribe_all(node);
                Unmatched::Read
            }
            SessionReply::AskedAgain => {
                self.mark_dirty(node);
                Unmatched::Read
            }
            SessionReply::Incomplete => Unmatched::Incomplete,
            SessionReply::NotNext => Unmatched::NotNext,
        })
    }

    /// The node's session answered with what concerns its health (health.rs): the events
    /// it tells go out, and the votes it held for a first sight now count.
    fn on_health(&mut self, now: Instant, node: NodeId, learned: Learned) {
        let nodes = (&mut self.nodes[..], node.index());
        let held = (self.health).on_session(now, &self.config, nodes, learned, &mut self.events);
        for vote in held {
            if let Some(lock) = self.locks.get_mut(&vote.op) {
                let reply = Ok(&vote.reply);
                lock.handle_vote(now, vote.id, reply, vote.veto, &mut self.rng);
                self.pump(now, vote.op);
            }
        }
    }

    /// Hands a reply from `node` to what waits for it: the request at the front of its
    /// queue. A fault closes the node.
    #[inline]
    fn answer(&mut self, now: Instant, node: NodeId, reply: Reply) -> Result<(), NodeFault> {
        let n = &mut self.nodes[node.index()];
        match n.in_flight.pop_front() {
            None => return Err(NodeFault::Protocol("reply without a request".into())),
            Some(Pending::Preload | Pending::Session(_)) => {}
            Some(Pending::Handshake(command)) => {
                if let Some(message) = reply.error_message() {
                    return Err(NodeFault::Handshake { command, message });
                }
            }
            Some(Pending::Subscription { channel, subscribe }) => {
                // Not a push: a refusal (an ACL that denies the channel answers `-NOPERM`).
                if subscribe && reply.error_message().is_some() {
                    n.subscription_refused(&channel);
                }
            }
            Some(Pending::Resent) => {}
            Some(Pending::Announcement) => {
                // `PUBLISH` answers the number of receivers, or an error (an ACL that denies
                // the channel): anything else is another command's reply, out of step.
                if !matches!(reply, Reply::Integer(_) | Reply::Error(_)) {
                    let got = "a waiter's PUBLISH answered with something other than a number";
                    return Err(NodeFault::Protocol(got.into()));
                }
            }
            Some(Pending::Request {
                op,
                id,
                native,
                fallback,
                ..
            }) => {
                let noscript = reply.is_error_with(b"NOSCRIPT");
                if noscript {
                    n.noscript_replies += 1;
                }
                let refused = native.is_some_and(|used| {
                    let refused = is_unsupported(&reply);
                    if refused {
                        // Before the lock sees it: its resend then goes out as the script.
                        n.commands.fall_back(used);
                    }
                    refused
                });
                // A native release refused, or a kind's release script missing from the
                // node's cache (kinds/mod.rs), after the lock stopped waiting for it: no
                // round resends it, and what it held would live until its ttl. Any other
                // script missing then is loaded, with the others (`Node::reload_scripts`).
                if refused || noscript {
                    let waits = (self.locks.get_mut(&op)).is_some_and(|l| l.awaits(id));
                    let late = fallback.filter(|_| !waits && self.controls.resend_late);
                    let n = &mut self.nodes[node.index()];
                    if let Some(script) = &late {
                        n.send_pending(script, Pending::Resent);
                    }
                    let reload = noscript && !waits;
                    if reload {
                        n.reload_scripts();
                    }
                    if late.is_some() || reload {
                        self.mark_dirty(node);
                    }
                }
                // Held while the node's first sight is undecided (health.rs).
                let attempt = || (self.locks.get(&op)).is_some_and(|l| l.is_attempt(id));
                let n = &mut self.nodes[node.index()];
                let Some((reply, veto)) = n.health.vote(now, (op, id), reply, attempt) else {
                    return Ok(());
                };
                if let Some(lock) = self.locks.get_mut(&op) {
                    lock.handle_vote(now, id, Ok(&reply), veto, &mut self.rng);
                    self.pump(now, op);
                }
            }
        }
        Ok(())
    }

    fn deliver(&mut self, now: Instant, op: OpId, id: RequestId, reply: Result<&Reply, NodeFault>) {
        if let Some(lock) = self.locks.get_mut(&op) {
            lock.handle_reply(now, id, reply, &mut self.rng);
            self.pump(now, op);
        }
        // Otherwise the lock is finished: a late reply, swallowed.
    }

    /// Drops a node's connection and fails its requests in flight with `fault`, which is
    /// also why the node is down until it is back.
    fn close(&mut self, now: Instant, node: NodeId, fault: NodeFault, tell_driver: bool) {
        let conn = self.nodes[node.index()].current();
        let (retry_at, pending) = self.nodes[node.index()].close(now, fault.clone(), &mut self.rng);
        self.timers.arm(Timer::Node(node), Some(retry_at));
        if let (true, Some(conn)) = (tell_driver, conn) {
            self.actions.push_back(Output::Disconnect(conn));
        }
        for p in pending {
            if let Pending::Request { op, id, .. } = p {
                self.deliver(now, op, id, Err(fault.clone()));
            }
        }
    }

    fn fire_timers(&mut self, now: Instant) {
        // Each due timer is handled once per input: a handler leaves its owner's next timer
        // after `now` (asserted below), so the bound only matters if that invariant broke.
        let mut budget = self.timers.len() + 1;
        while let Some((at, timer)) = self.timers.pop_due(now) {
            budget = match budget.checked_sub(1) {
                Some(b) => b,
                None => {
                    // Keep it armed: the driver is told this deadline again and comes back.
                    self.timers.arm(timer, Some(at));
                    break;
                }
            };
            match timer {
                Timer::Node(node) => {
                    let conn = self.nodes[node.index()].reconnect();
                    self.actions.push_back(Output::Connect(conn));
                }
                Timer::Op(op) => {
                    if let Some(lock) = self.locks.get_mut(&op) {
                        lock.handle_timeout(now, &mut self.rng);
                        debug_assert!(
                            lock.poll_timeout().is_none_or(|t| t > now),
                            "a lock left a timer due after handling its timeout"
                        );
                        self.pump(now, op);
                    }
                }
            }
        }
    }

    /// The node's connection now speaks RESP3: it subscribes to every watched channel
    /// (notify.rs, `Watching::subscribe_all`). A line that listens for waiters missed what was
    /// announced on that node meanwhile: its next hand-off goes through the nodes, whose
    /// release hears such a waiter (queue.rs, `Lines::started_listening`).
    fn subscribe_all(&mut self, node: NodeId) {
        if (self.watching).subscribe_all(&mut self.nodes[node.index()]) {
            self.mark_dirty(node);
        }
        for resource in self.watching.listening() {
            self.lines.started_listening(resource);
        }
    }

    /// A push frame from `node`: a release announced on a watched channel is handed to
    /// the lock waiting on it, and a waiter's announcement turns the line listening for it
    /// contested (notify.rs, `Watching::route`).
    fn on_push(&mut self, now: Instant, node: NodeId, push: Push) {
        let heard = (self.watching).route(push, &mut self.nodes[node.index()]);
        let (op, notice) = match heard {
            Some(Heard::Lock(op, notice)) => (op, notice),
            Some(Heard::Waiter(resource)) => return self.hear_waiter(now, &resource),
            None => return,
        };
        if let Some(lock) = self.locks.get_mut(&op) {
            match notice {
                Notice::Released => lock.handle_release_notice(now, node, &mut self.rng),
                Notice::Next(id) => lock.handle_next_notice(now, node, &id, &mut self.rng),
                Notice::Grant(id) => lock.handle_grant_notice(now, node, &id, &mut self.rng),
            }
            self.pump(now, op);
        }
    }

    fn mark_dirty(&mut self, node: NodeId) {
        if self.nodes[node.index()].mark_dirty() {
            self.dirty.push_back(node);
        }
    }

    fn check_drained(&mut self) -> Result<(), UsageError> {
        if self.drained {
            self.drained = false;
            Ok(())
        } else {
            Err(UsageError::NotDrained)
        }
    }

    fn check_node(&self, node: NodeId) -> Result<(), UsageError> {
        if node.index() < self.nodes.len() {
            Ok(())
        } else {
            Err(UsageError::UnknownNode(node))
        }
    }

    /// Clamps `now` so that time never goes backwards inside the core.
    fn clock(&mut self, now: Instant) -> Instant {
        let last = self.now.unwrap_or(now);
        debug_assert!(now >= last, "now went backwards");
        let now = now.max(last);
        self.now = Some(now);
        now
    }
}

/// What [`Client::read_unmatched`] found.
enum Unmatched {
    /// Read a push frame or a session reply: go on reading.
    Read,
    /// Part of one: wait for more bytes.
    Incomplete,
    /// Neither is next: a request's reply is.
    NotNext,
}

#[cfg(test)]
mod tests;
