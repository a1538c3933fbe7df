//! [`Client`]: the connection layer. N ordered byte streams, many concurrent
//! [`Lock`]s, RESP in and out, reply matching, reconnection, and one timer queue.
//!
//! All lock logic is in [`Lock`]; this file only moves requests and replies between locks
//! and node streams, and wakes locks when their timers are due.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::time::Instant;

use bytes::Bytes;
use rand_core::CryptoRng;

use crate::command::Encoder;
use crate::config::Config;
use crate::error::UsageError;
use crate::health::Health;
use crate::id::{ConnId, NodeId, OpId, RequestId};
use crate::io::{Event, Input, NodeFault, Output, Transmit};
use crate::lock::Lock;
use crate::node::{Link, Node, Pending, SessionReply};
use crate::notify::{Push, decode_push, release_channel};
use crate::options::LockOptions;
use crate::policy::RetryPolicy;
use crate::queue::{HandOff, Lines};
use crate::resp::{ProtocolError, Reply};
use crate::server::{NativeUse, NodeCommands, is_unsupported};
use crate::session::Learned;
use crate::time::TimerQueue;
use crate::token::{Resource, Token};

/// The sans-IO Redlock client for N nodes: feed it inputs, drain its outputs.
///
/// # Methods
/// - Getters: [`config`](Self::config), [`held`](Self::held), [`is_up`](Self::is_up).
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
    locks: HashMap<OpId, Lock, BuildHasherDefault<OpIdHasher>>,
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
    /// The release channels subscribed to, and the lock waiting on each (notify.rs). A
    /// `BTreeMap` for the reason `Lines` is one: the keys come from the application.
    watching: BTreeMap<Bytes, OpId>,
    /// The nodes' health across them: the restart quarantine's window, the decisions that
    /// compare nodes (health.rs).
    health: Health,
    /// Whether a native release's `PUBLISH` count is read; off only in a negative control
    /// (which also keeps lines from yielding unasked: queue.rs).
    count_waiters: bool,
    /// Whether a probed native release refused after its lock stopped waiting is sent
    /// again as the script; off only in a negative control.
    resend_late: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Timer {
    Node(NodeId),
    Op(OpId),
}

impl Hash for Timer {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // One word per key: the derived hash would also write the discriminant.
        state.write_u64(match *self {
            Self::Op(op) => op.as_raw() << 1,
            Self::Node(node) => ((node.index() as u64) << 1) | 1,
        });
    }
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
        #[cfg(feature = "_mutants")]
        let count_waiters = config.mutant != Some(crate::mutant::Mutant::LineDeafToWaiters);
        #[cfg(not(feature = "_mutants"))]
        let count_waiters = true;
        #[cfg(feature = "_mutants")]
        let resend_late = config.mutant != Some(crate::mutant::Mutant::LateRefusalDropped);
        #[cfg(not(feature = "_mutants"))]
        let resend_late = true;
        Self {
            health: Health::new(&config),
            config,
            rng,
            nodes,
            locks: HashMap::default(),
            timers: TimerQueue::default(),
            actions,
            events: VecDeque::new(),
            next_op: 0,
            now: None,
            drained: false,
            dirty: VecDeque::new(),
            encoder: Encoder::default(),
            lines: if count_waiters {
                Lines::default()
            } else {
                Lines::without_courtesy()
            },
            watching: BTreeMap::new(),
            count_waiters,
            resend_late,
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

    /// The node's current connection: the one being opened or up (`None` while the node is
    /// down, waiting to reconnect).
    pub fn connection(&self, node: NodeId) -> Option<ConnId> {
        self.nodes.get(node.index())?.current()
    }

    /// Starts acquiring `resource` with the configured retry policy.
    ///
    /// `now` is `t0` of the first attempt. The outcome comes as [`Event::Acquired`] or
    /// [`Event::AcquireFailed`] carrying the returned id.
    pub fn acquire(&mut self, now: Instant, resource: Resource) -> Result<OpId, UsageError> {
        self.acquire_with(now, resource, &LockOptions::default())
    }

    /// Makes one attempt to acquire `resource`, without retry.
    pub fn try_acquire(&mut self, now: Instant, resource: Resource) -> Result<OpId, UsageError> {
        let once = RetryPolicy {
            max_attempts: Some(1),
            max_wait: None,
            ..self.config.retry
        };
        self.acquire_with(now, resource, &LockOptions::default().retry(once))
    }

    /// Starts acquiring `resource` with per-lock options (ttl, token, retry, auto-extension).
    ///
    /// Lock calls of this client for one resource queue in arrival order: while an earlier
    /// one contends on the nodes or holds the lock, this one waits without sending anything
    /// and makes its first attempt as soon as that one releases, is lost or gives up. It
    /// waits at most as long as its retry policy would have let it retry (the overall wait,
    /// or every delay at its longest), then fails with
    /// [`AcquireFailure::HeldLocally`](crate::AcquireFailure::HeldLocally); a single attempt
    /// fails so at once.
    pub fn acquire_with(
        &mut self,
        now: Instant,
        resource: Resource,
        options: &LockOptions,
    ) -> Result<OpId, UsageError> {
        let first = self.lines.is_free(&resource);
        self.start(now, true, |now, op, config, rng| {
            if first {
                Lock::acquire(now, op, config, resource, options, rng)
            } else {
                Lock::queued(now, op, config, resource, options)
            }
        })
    }

    /// Starts the operation `make` creates under a fresh id (a usage error changes nothing),
    /// at the end of its resource's line if `in_line` (lock calls; queue.rs).
    fn start(
        &mut self,
        now: Instant,
        in_line: bool,
        make: impl FnOnce(Instant, OpId, &Config, &mut R) -> Result<Lock, UsageError>,
    ) -> Result<OpId, UsageError> {
        self.check_drained()?;
        let now = self.clock(now);
        let op = OpId::from_raw(self.next_op);
        let mut lock =
            make(now, op, &self.config, &mut self.rng).inspect_err(|_| self.drained = true)?;
        self.next_op += 1;
        let (ttl, fenced) = (lock.ttl(), lock.is_fenced());
        (self.health).lock_started((&self.config, &self.nodes), now, ttl, fenced);
        if in_line {
            lock.in_line = true;
            self.lines.join(lock.resource(), op, now);
        }
        self.locks.insert(op, lock);
        self.pump(now, op);
        Ok(op)
    }

    /// Starts a read-only inspection of `resource` on every node; see [`Lock::inspect`].
    /// The outcome comes as [`Event::Inspected`] carrying the returned id.
    pub fn inspect(&mut self, now: Instant, resource: Resource) -> Result<OpId, UsageError> {
        self.start(now, false, |now, op, config, _| {
            Lock::inspect(now, op, config, resource)
        })
    }

    /// Starts releasing `resource` where it holds exactly `token`, on every node, for a
    /// lock this client does not hold; see [`Lock::release_token`]. The outcome comes as
    /// [`Event::Released`] carrying the returned id.
    pub fn release_token(
        &mut self,
        now: Instant,
        resource: Resource,
        token: &Token,
    ) -> Result<OpId, UsageError> {
        self.start(now, false, |now, op, config, _| {
            Lock::release_token(now, op, config, resource, token)
        })
    }

    /// Extends a held lock by its ttl from `now`; see [`Lock::extend`].
    pub fn extend(&mut self, now: Instant, op: OpId) -> Result<(), UsageError> {
        self.mutate(now, op, |lock, now| lock.extend(now))
    }

    /// Releases a held lock on all nodes; see [`Lock::release`].
    pub fn release(&mut self, now: Instant, op: OpId) -> Result<(), UsageError> {
        self.mutate(now, op, |lock, now| lock.release(now))
    }

    /// Cancels an acquisition or releases a held lock; see [`Lock::cancel`].
    pub fn cancel(&mut self, now: Instant, op: OpId) -> Result<(), UsageError> {
        self.mutate(now, op, |lock, now| {
            lock.cancel(now);
            Ok(())
        })
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

    fn mutate(
        &mut self,
        now: Instant,
        op: OpId,
        f: impl FnOnce(&mut Lock, Instant) -> Result<(), UsageError>,
    ) -> Result<(), UsageError> {
        self.check_drained()?;
        let now = self.clock(now);
        let result = match self.locks.get_mut(&op) {
            Some(lock) => f(lock, now),
            None => Err(UsageError::UnknownOp(op)),
        };
        match result {
            Ok(()) => self.pump(now, op),
            // Nothing changed: still drained.
            Err(_) => self.drained = true,
        }
        result
    }

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
            let Some(reply) = self.nodes[i].gather(reply, self.count_waiters) else {
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
    /// release notification, or a subscription's confirmation), or the answer to one of the
    /// session's questions, `HELLO`, `TIME`, `INFO` or `CONFIG GET` (session/mod.rs).
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
            Some(Pending::Request {
                op,
                id,
                native,
                fallback,
                ..
            }) => {
                if reply.is_error_with(b"NOSCRIPT") {
                    n.noscript_replies += 1;
                }
                if let Some(used) = native
                    && is_unsupported(&reply)
                {
                    // Before the lock sees it: its resend then goes out as the script.
                    n.commands.fall_back(used);
                    let waits = (self.locks.get_mut(&op)).is_some_and(|l| l.awaits(id));
                    if let Some(script) = fallback.filter(|_| !waits && self.resend_late) {
                        // The release returned (or gave up) before this refusal came: no
                        // round resends it, and the key would live until its ttl.
                        self.nodes[node.index()].send_pending(&script, Pending::Resent);
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

    /// Moves a lock's requests to node streams (failing those to down nodes at once), its
    /// events to the output queue, and re-arms its timer. When the lock leaves the front of
    /// its resource's line, the next call in line starts, and is pumped in turn.
    fn pump(&mut self, now: Instant, op: OpId) {
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
    /// left the front, and how it starts (queue.rs).
    fn pump_one(&mut self, now: Instant, op: OpId) -> Option<(OpId, HandOff)> {
        let lock = self.locks.get_mut(&op)?;
        if lock.is_waiting_for_release() != lock.subscribed {
            // Before its requests: the subscription goes out ahead of the probe.
            self.watch(op);
        }
        let lock = self.locks.get_mut(&op)?;
        loop {
            let nodes = &self.nodes;
            let drift = self.config.timing.drift_factor;
            let commands = |n: NodeId| nodes[n.index()].offer(now, drift);
            let Some((id, to, native, bytes)) = lock.next_transmit(&mut self.encoder, commands)
            else {
                break;
            };
            let bytes = bytes.clone();
            let node = &mut self.nodes[to.index()];
            if node.accepts_requests() && node.has_room() {
                // A probed node may refuse a native release after the lock stopped waiting:
                // its script form then goes out in its place (see `answer`).
                let release = native == Some(NativeUse::Release);
                let fallback = (release && node.is_probed())
                    .then(|| lock.script_form(id))
                    .flatten();
                // The release of a held lock is announced, as the script announces itself.
                let announced = release && lock.announces(id);
                let node = &mut self.nodes[to.index()];
                node.send((op, id), native, (announced, fallback), &bytes);
                if native == Some(NativeUse::Fence) {
                    node.refresh_clock(now);
                }
                node.sample_clock(now);
                if node.mark_dirty() {
                    self.dirty.push_back(to);
                }
            } else {
                // A dead or backlogged node never delays a decision.
                lock.handle_reply(now, id, Err(node.refusal()), &mut self.rng);
            }
        }
        while let Some(event) = lock.poll_event() {
            self.events.push_back(event);
        }
        let timer = lock.poll_timeout();
        let next = leave_line(&mut self.lines, lock, now);
        let finished = lock.is_finished();
        if lock.subscribed && (finished || !lock.is_waiting_for_release()) {
            self.watch(op);
        }
        if finished {
            self.locks.remove(&op);
        }
        self.timers.arm(Timer::Op(op), timer);
        next
    }

    /// Subscribes to the lock's release channel on every node that speaks RESP3, or
    /// unsubscribes, as the lock now wants (notify.rs).
    fn watch(&mut self, op: OpId) {
        let Some(lock) = self.locks.get_mut(&op) else {
            return;
        };
        let wants = lock.is_waiting_for_release() && !lock.is_finished();
        lock.subscribed = wants;
        let channel = release_channel(lock.resource());
        if wants {
            self.watching.insert(channel.clone(), op);
        } else if self.watching.get(&channel) == Some(&op) {
            self.watching.remove(&channel);
        } else {
            return;
        }
        for i in 0..self.nodes.len() {
            let node = &mut self.nodes[i];
            if node.link != Link::Up {
                continue;
            }
            let had = node.subscribed.iter().position(|c| *c == channel);
            match (wants, had) {
                (true, None) if node.may_subscribe() => node.subscribe(&channel),
                (false, Some(at)) => node.unsubscribe(at),
                _ => continue,
            }
            self.mark_dirty(NodeId::new(i));
        }
    }

    /// The node's connection now speaks RESP3: it subscribes to every channel a lock waits
    /// on (a reconnection subscribes again).
    fn subscribe_all(&mut self, node: NodeId) {
        let n = &mut self.nodes[node.index()];
        for channel in self.watching.keys() {
            if !n.subscribed.contains(channel) {
                n.subscribe(channel);
            }
        }
        if !self.watching.is_empty() {
            self.mark_dirty(node);
        }
    }

    /// A push frame from `node`: a release announced on a channel a lock waits on is
    /// handed to it; anything else is dropped.
    fn on_push(&mut self, now: Instant, node: NodeId, push: Push) {
        let channel = match push {
            Push::Message(channel) => channel,
            Push::Confirmation => {
                // The answer to the subscription at the front, if it is one (a confirmation
                // nobody asked for is dropped).
                let n = &mut self.nodes[node.index()];
                if let Some(Pending::Subscription { .. }) = n.in_flight.front() {
                    n.in_flight.pop_front();
                }
                return;
            }
            Push::Other => return,
        };
        let Some(&op) = self.watching.get(&channel) else {
            return;
        };
        if let Some(lock) = self.locks.get_mut(&op) {
            lock.handle_release_notice(now, node, &mut self.rng);
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

/// Takes `lock` out of its resource's line once it no longer needs its place there, and
/// returns the next call in line with how it starts (queue.rs). A contested line, or one that
/// owes a courtesy hand-off, keeps the releasing lock's place until its release is done: its
/// next call then starts when a waiter of another client hears of the release, or has tried
/// on its timer.
fn leave_line(lines: &mut Lines, lock: &mut Lock, now: Instant) -> Option<(OpId, HandOff)> {
    if lock.take_contested() {
        // Also after the lock left its line: the next hand-off of the line is fair.
        lines.contest(lock.resource(), now);
    }
    if !lock.in_line || lock.needs_place() {
        return None;
    }
    let contested = lines.is_contested(lock.resource(), now);
    let courtesy = lines.owes_courtesy(lock.resource(), now);
    if (contested || courtesy) && lock.is_releasing() {
        return None;
    }
    lock.in_line = false;
    // The next call yields only if another client waited for this very release.
    let yields = contested && lock.release_awaited();
    lines.leave(lock.resource(), lock.op(), now, yields)
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

/// Hashes the client's own operation ids (never attacker-chosen, so no flooding concern)
/// with one multiply instead of SipHash.
#[derive(Debug, Default, Clone, Copy)]
struct OpIdHasher(u64);

impl Hasher for OpIdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        // Fibonacci hashing: the high bits, which the table uses, depend on every input bit.
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests;
