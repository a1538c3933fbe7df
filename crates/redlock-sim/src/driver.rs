//! The driver of each simulated client, following the `Client` contract: drain
//! `poll_output` to `Timeout`/`Idle` after every input and mutation, feed `Timeout` when the
//! timer is due, report every connect outcome; plus the node side of each delivery.
//!
//! Lock events go to the checker (in true time) and to the workload, whose actions become
//! core mutations here. Nothing in this file decides anything about locks.

use std::collections::VecDeque;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use redlock_core::{ConnectionError, Event, Input, OpId, Output, UsageError};

use crate::conditional::is_native;
use crate::event::Ev;
use crate::network::{Direction, LinkState};
use crate::node::NodeState;
use crate::pubsub::Session;
use crate::report::ClockEvent;
use crate::resp::{Frame, next_command};
use crate::script::release_channel;
use crate::sim::Sim;
use crate::workload::Action;

impl Sim {
    /// The client's local time now.
    fn local_now(&self, c: usize) -> Instant {
        self.clients[c].clock.instant(self.now)
    }

    /// Feeds one input to client `c`, then settles it.
    pub(crate) fn feed(&mut self, c: usize, input: Input<'_>) {
        if self.clients[c].dead {
            return;
        }
        let result = self.clients[c].core.handle_input(input);
        // The driver drains before every input, so the core cannot refuse one.
        result.expect("the simulated driver always drains before an input");
        self.settle(c);
    }

    /// Drains the core, handles its events and the workload's due actions until nothing is
    /// left, then re-arms the client's wake-up.
    pub(crate) fn settle(&mut self, c: usize) {
        if self.clients[c].dead {
            return;
        }
        let mut events = VecDeque::new();
        loop {
            self.drain(c, &mut events);
            if let Some(event) = events.pop_front() {
                self.on_event(c, &event);
                continue;
            }
            let now = self.local_now(c);
            match self.clients[c].workload.poll_action(now) {
                Some(action) => self.perform(c, now, action),
                None => break,
            }
        }
        self.rearm(c);
    }

    /// Step 2 of the contract: act on every output until `Timeout` or `Idle`.
    fn drain(&mut self, c: usize, events: &mut VecDeque<Event>) {
        loop {
            match self.clients[c].core.poll_output() {
                Output::Transmit(t) => self.send_to_node(c, t.node.index(), t.bytes),
                Output::Connect(conn) => {
                    let n = conn.node().index();
                    self.reset_link(c, n, LinkState::Connecting);
                    let (epoch, at) = self.net.start_connect(&mut self.dice, self.now, c, conn);
                    self.schedule(
                        at,
                        Ev::ConnectDone {
                            client: c,
                            node: n,
                            epoch,
                        },
                    );
                }
                Output::Disconnect(conn) => {
                    self.stats.client_disconnects += 1;
                    self.reset_link(c, conn.node().index(), LinkState::Closed);
                }
                Output::Event(event) => events.push_back(event),
                Output::Timeout(at) => {
                    self.clients[c].core_timer = Some(at);
                    return;
                }
                Output::Idle => {
                    self.clients[c].core_timer = None;
                    return;
                }
            }
        }
    }

    fn on_event(&mut self, c: usize, event: &Event) {
        let now = self.now;
        let clock = self.clients[c].clock;
        let Some(op) = event.op() else {
            // News of a node (the restart quarantine, the clock check): in the notes; the
            // clock check's events kept for its properties.
            self.note(|| format!("client {c}: {event:?}"));
            if matches!(event, Event::ClockRate { .. } | Event::ClockStep { .. }) {
                self.clock_events.push(ClockEvent {
                    client: c,
                    at: now,
                    event: event.clone(),
                });
            }
            return;
        };
        let tag = match event {
            Event::Acquired(a) => {
                let deadline = clock.true_time_of(a.deadline);
                let token = a.fencing_token;
                self.checker.acquired(c, op, (now, deadline), token);
                let (attempts, raised) = (a.stats.attempts, a.stats.written_back.len());
                let (stored, validity) = (a.token.clone(), a.validity);
                self.checker.record(c, op, |r| {
                    r.validity = Some(validity);
                    r.acquired_after = Some(attempts);
                    r.written_back = raised;
                    r.stored = Some(stored);
                });
                1
            }
            Event::AcquireFailed { reason, .. } => {
                let reason = reason.clone();
                self.checker.record(c, op, |r| {
                    r.failed = Some(reason);
                    r.failed_at = Some(now);
                });
                2
            }
            Event::Extended { deadline, .. } => {
                self.checker.extended(c, op, clock.true_time_of(*deadline));
                self.checker.record(c, op, |r| r.extended += 1);
                3
            }
            Event::Lost { reason, .. } => {
                self.checker.ended(c, op, now);
                let reason = reason.clone();
                self.checker.record(c, op, |r| {
                    r.lost = true;
                    r.lost_at = Some((now, reason));
                });
                4
            }
            Event::Released { .. } => {
                self.checker.record(c, op, |r| r.released = true);
                5
            }
            _ => 6,
        };
        self.trace.client(c, tag, op, now);
        self.note(|| format!("client {c}: {event:?}"));
        let local = self.local_now(c);
        self.clients[c].workload.on_event(local, event);
    }

    fn perform(&mut self, c: usize, now: Instant, action: Action) {
        self.note(|| format!("client {c} calls {action:?}"));
        let client = &mut self.clients[c];
        match action {
            Action::Acquire {
                hold,
                mut resources,
                options,
            } => {
                let (token, ttl) = ((options.token.clone(), options.fenced), options.ttl);
                let op = match resources.len() {
                    1 => client.core.acquire_with(now, resources.remove(0), &options),
                    _ => client.core.acquire_all_with(now, resources, &options),
                };
                let op =
                    op.unwrap_or_else(|e| panic!("the scenario's lock options are invalid: {e}"));
                client.workload.started(now, op);
                self.checker.started((c, op, self.now), hold, token);
                self.checker.record(c, op, |r| r.ttl = ttl);
                self.trace.client(c, 10, op, self.now);
            }
            Action::Extend(op) => {
                let result = client.core.extend(now, op);
                if result.is_ok() {
                    client.workload.extended();
                    self.watch_extend(c, op);
                }
                self.usage(c, op, 11, result);
            }
            Action::Release(op) => {
                self.checker.ended(c, op, self.now);
                let result = self.clients[c].core.release(now, op);
                if result.is_ok() {
                    self.watch_release(c, op, now);
                }
                self.usage(c, op, 12, result);
            }
            Action::Cancel(op) => {
                self.checker.ended(c, op, self.now);
                self.checker.record(c, op, |r| r.cancelled = true);
                let result = self.clients[c].core.cancel(now, op);
                self.usage(c, op, 13, result);
            }
        }
    }

    /// A refused call is fine if it raced an event (e.g. release of a lock just lost); a
    /// refusal for not draining is a bug of this driver.
    fn usage(&mut self, c: usize, op: OpId, tag: u64, result: Result<(), UsageError>) {
        self.trace.client(c, tag, op, self.now);
        match result {
            Ok(()) => {}
            Err(UsageError::NotDrained) => panic!("the simulated driver did not drain"),
            Err(_) => self.stats.usage_errors += 1,
        }
    }

    /// Arms one heap event at the earlier of the core's timer and the workload's next action.
    fn rearm(&mut self, c: usize) {
        let client = &self.clients[c];
        let local = [client.core_timer, client.workload.next_wake()]
            .into_iter()
            .flatten()
            .min();
        let at = local.map(|t| client.clock.true_time_of(t).max(self.now));
        if at == client.wake {
            return;
        }
        let client = &mut self.clients[c];
        client.wake = at;
        client.wake_epoch += 1;
        let epoch = client.wake_epoch;
        if let Some(at) = at {
            self.schedule(at, Ev::Wake { client: c, epoch });
        }
    }

    pub(crate) fn on_wake(&mut self, c: usize, epoch: u64) {
        if self.clients[c].wake_epoch != epoch {
            return;
        }
        self.clients[c].wake = None;
        let now = self.local_now(c);
        if self.clients[c].core_timer.is_some_and(|t| t <= now) {
            self.feed(c, Input::Timeout(now));
        } else {
            self.settle(c);
        }
    }

    pub(crate) fn send_to_node(&mut self, c: usize, n: usize, bytes: Bytes) {
        let link = self.net.link_ref(c, n);
        if link.state != LinkState::Open {
            // The core writes only to links it believes up; a write racing a cut is lost.
            return;
        }
        let epoch = link.epoch;
        let plan = self
            .net
            .plan(&mut self.dice, self.now, c, n, Direction::ToNode, bytes);
        for (at, bytes) in plan {
            let ev = Ev::ToNode {
                client: c,
                node: n,
                epoch,
                bytes,
            };
            self.schedule(at, ev);
        }
    }

    pub(crate) fn on_node_bytes(&mut self, c: usize, n: usize, epoch: u64, bytes: &[u8]) {
        let link = self.net.link(c, n);
        if !link.accepts(epoch) {
            // Dropped, unless the connection was half-closed and lives on as an orphan.
            self.orphan_bytes(c, n, epoch, bytes);
            return;
        }
        if link.holding {
            link.held.extend_from_slice(bytes);
            return;
        }
        link.inbox.extend_from_slice(bytes);
        if self.nodes[n].state() == NodeState::Up {
            self.process_inbox(c, n);
        }
    }

    /// Executes every complete command the node has from client `c` and sends the replies.
    pub(crate) fn process_inbox(&mut self, c: usize, n: usize) {
        let link = self.net.link(c, n);
        let mut inbox = std::mem::take(&mut link.inbox);
        let mut session = std::mem::take(&mut link.session);
        let (out, broken) = self.execute_stream(n, c, None, &mut inbox, &mut session);
        let link = self.net.link(c, n);
        link.inbox = inbox;
        link.session = session;
        let epoch = link.epoch;
        if !out.is_empty() {
            let plan = self.net.plan(
                &mut self.dice,
                self.now,
                c,
                n,
                Direction::ToClient,
                out.freeze(),
            );
            for (at, bytes) in plan {
                self.schedule(
                    at,
                    Ev::ToClient {
                        client: c,
                        node: n,
                        epoch,
                        bytes,
                    },
                );
            }
        }
        if broken {
            // Redis closes the connection after a protocol error.
            self.stats.bad_requests += 1;
            self.cut(c, n);
        }
    }

    /// Runs every complete command of `inbox` on node `n` for one connection of client `c`
    /// (orphan `orphan`'s, if any) whose node side is `session`. Returns the encoded replies
    /// (with the messages for this connection its own publications left, ahead of the reply
    /// as a server writes them) and whether a protocol error ends the connection. Messages
    /// for other connections go out on their links.
    pub(crate) fn execute_stream(
        &mut self,
        n: usize,
        c: usize,
        orphan: Option<usize>,
        inbox: &mut BytesMut,
        session: &mut Session,
    ) -> (BytesMut, bool) {
        let mut out = BytesMut::new();
        loop {
            match next_command(inbox) {
                Ok(Some(args)) => {
                    let scripts = &self.scenario.scripts;
                    let reply = self.nodes[n].run(self.now, session, &args, scripts);
                    self.count_reply(&args, &reply, session);
                    self.note(|| {
                        let from = orphan.map_or(String::new(), |o| format!("orphan {o} of "));
                        format!("node {n} <- {from}client {c}: {} -> {reply:?}", show(&args))
                    });
                    let current = (orphan.is_none()).then_some(c);
                    self.deliver(n, current, session, &mut out);
                    reply.encode(&mut out, session.protocol);
                }
                Ok(None) => return (out, false),
                Err(e) => {
                    let reply = Frame::Error(format!("ERR Protocol error: {}", e.0));
                    reply.encode(&mut out, session.protocol);
                    return (out, true);
                }
            }
        }
    }

    /// Resets the link between client `c` and node `n` to `state`; the node closes the old
    /// connection (its subscriptions end).
    pub(crate) fn reset_link(&mut self, c: usize, n: usize, state: LinkState) {
        let old = self.net.link(c, n).reset(state);
        self.nodes[n].close(&old);
    }

    /// Counts the replies the statistics name: `-NOSCRIPT`, native commands run or
    /// refused, `HELLO`s answered or refused.
    fn count_reply(&mut self, args: &[Bytes], reply: &Frame, session: &Session) {
        let error = match reply {
            Frame::Error(e) => Some(e.as_str()),
            _ => None,
        };
        let refused = error.is_some_and(|e| {
            e.starts_with("ERR unknown command") || e.starts_with("ERR syntax error")
        });
        let s = &mut self.stats;
        let named = |name: &[u8]| args.first().is_some_and(|a| a.eq_ignore_ascii_case(name));
        if named(b"SUBSCRIBE") && error.is_none() {
            s.subscribes += 1;
        }
        if let ([_, key], Frame::Int(-2)) = (args, reply) {
            let channel = release_channel(key);
            let watched = session.channels().any(|ch| *ch == channel);
            s.released_before_subscribed += u32::from(named(b"PTTL") && watched);
        }
        if error.is_some_and(|e| e.starts_with("NOSCRIPT")) {
            s.noscript += 1;
        } else if is_native(args) {
            *(if refused {
                &mut s.native_refused
            } else {
                &mut s.native
            }) += 1;
        } else if args
            .first()
            .is_some_and(|a| a.eq_ignore_ascii_case(b"HELLO"))
        {
            *(if error.is_some() {
                &mut s.hellos_refused
            } else {
                &mut s.hellos
            }) += 1;
        }
    }

    pub(crate) fn on_client_bytes(&mut self, c: usize, n: usize, epoch: u64, bytes: &[u8]) {
        if !self.net.link_ref(c, n).accepts(epoch) {
            return self.stale_read(c, n, epoch, bytes);
        }
        #[cfg(test)]
        self.tap.push((c, n, Bytes::copy_from_slice(bytes)));
        let now = self.local_now(c);
        let Some(conn) = self.net.link_ref(c, n).conn else {
            return;
        };
        self.feed(c, Input::Received { now, conn, bytes });
    }

    /// Bytes for a connection the client gave up on: dropped, or (the `stale_reads` knob)
    /// fed under that connection's name by a reader late to notice, which the client must
    /// ignore.
    fn stale_read(&mut self, c: usize, n: usize, epoch: u64, bytes: &[u8]) {
        let knobs = *self.net.knobs();
        let link = self.net.link_ref(c, n);
        let named = match knobs.stale_reads_as_current {
            true => link.conn,
            false => link.conn_of(epoch),
        };
        let (Some(conn), chance) = (named, knobs.stale_reads) else {
            return;
        };
        if chance <= 0.0 || !self.dice.chance(chance) {
            return;
        }
        self.stats.stale_reads += 1;
        self.note(|| format!("client {c} reads {} stale bytes of {conn}", bytes.len()));
        let now = self.local_now(c);
        self.feed(c, Input::Received { now, conn, bytes });
    }

    pub(crate) fn on_connect_done(&mut self, c: usize, n: usize, epoch: u64) {
        let link = self.net.link(c, n);
        if link.epoch != epoch || link.state != LinkState::Connecting {
            return;
        }
        let Some(conn) = link.conn else {
            return;
        };
        let now = self.local_now(c);
        if self.nodes[n].accepts_connections() {
            let at = self.now;
            let mut session = self.nodes[n].accept();
            if self.scenario.silent_clients.contains(&c) {
                session.deny_hello();
            }
            self.net.link(c, n).open(at, session);
            self.feed(c, Input::Connected { now, conn });
        } else {
            self.stats.refused += 1;
            self.reset_link(c, n, LinkState::Closed);
            let reason = ConnectionError::Refused;
            self.feed(c, Input::Disconnected { now, conn, reason });
        }
    }

    /// Closes an open link: bytes in flight both ways are dropped and the client is told.
    pub(crate) fn cut(&mut self, c: usize, n: usize) {
        if self.net.link_ref(c, n).state != LinkState::Open {
            return;
        }
        let Some(conn) = self.net.link_ref(c, n).conn else {
            return;
        };
        self.reset_link(c, n, LinkState::Closed);
        let now = self.local_now(c);
        let reason = ConnectionError::Closed;
        self.feed(c, Input::Disconnected { now, conn, reason });
    }
}

/// A command as a readable line: arguments lossily as UTF-8, long ones (script bodies) cut.
fn show(args: &[Bytes]) -> String {
    let words: Vec<String> = args
        .iter()
        .map(|a| {
            let s = String::from_utf8_lossy(a);
            if s.len() > 24 {
                format!("{}..", &s[..20])
            } else {
                s.into_owned()
            }
        })
        .collect();
    words.join(" ")
}
