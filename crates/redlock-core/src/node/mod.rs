//! One node as the client sees it: its connection (link state, write buffer, reply
//! decoder, the FIFO of requests in flight, reconnect backoff), the connection's session
//! (session/mod.rs: the handshake and what it learns, such as the node's commands and
//! clock), the node's health (health.rs: the restart quarantine and the clock check, which
//! veto its votes), its release subscriptions (notify.rs), and the replies of a request
//! written as several commands (gather.rs). docs/design.md, "Connections: generations and
//! reasons".
//!
//! Replies on a connection come back in request order, so the FIFO is all the matching
//! there is. This module holds no lock logic; it says which request a reply answers.
//!
//! The FIFO is capped ([`Config::max_in_flight`]): a node that keeps its connection open but
//! stops answering would otherwise grow it forever, one entry per round, as no error ever
//! comes. Past the cap a request is refused before it is queued or written (see
//! [`Node::has_room`]), rather than the connection being reset, for three reasons:
//! - Reply matching stays trivially right. Every entry is a request that was written, in
//!   order, on this connection, so when a slow node answers, even long after its rounds
//!   timed out, each reply meets its own request; a refused request was never written, so
//!   no reply for it can come. Dropping entries from the middle would shift every later reply
//!   onto the wrong request.
//! - A reset would hand the stale commands to the server on a dead connection while new
//!   ones go out on a fresh one: the server does not order two connections, so a late
//!   cleanup release could then run after a later attempt's `SET` (algorithm.md §13). Keeping
//!   one connection keeps one order.
//! - A paused server still accepts TCP connections (the kernel completes the handshake), so
//!   a reset would only start the same backlog again on a new socket, once per backoff.
//!
//! A refused request is a failed vote at once (`NodeFault::Backlogged`), so the healthy nodes
//! decide the round without waiting for the slow one; when the node answers again, its FIFO
//! drains and it takes requests again, with no reconnection.

mod backoff;
mod gather;
mod outbox;

use std::collections::VecDeque;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use rand_core::Rng;

use crate::config::Config;
use crate::fencing::CLOCK_READING_MAX_AGE;
use crate::health::NodeHealth;
use crate::id::{ConnId, NodeId, OpId, RequestId};
use crate::io::NodeFault;
use crate::notify;
use crate::policy::NodeSettings;
use crate::resp::{self, Decoder, ProtocolError, Reply};
use crate::server::{NativeUse, NodeCommands, Offer};
use crate::session::{self, Ask, Hello, Learned, Session, Step};

use backoff::Backoff;
use gather::Gathered;
use outbox::Outbox;

/// Whether the node can take requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Link {
    /// The driver was asked to connect. On the first connection ever, requests wait for it
    /// (bounded by their rounds' deadlines); on a reconnection they fail at once.
    Connecting { first: bool },
    /// Connected; requests are written.
    Up,
    /// Disconnected; a reconnection is due at `retry_at`.
    Down { retry_at: Instant },
}

/// What the next reply on the connection answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Pending {
    /// `AUTH` or `SELECT` (named): an error reply means the session is unusable.
    Handshake(&'static str),
    /// A question of the session (`HELLO`, `TIME`, `INFO`, `CONFIG GET`), whose answer the
    /// session reads (session/mod.rs).
    Session(Ask),
    /// `SCRIPT LOAD`: saves a `-NOSCRIPT` round trip later; its reply is not needed.
    Preload,
    /// `SUBSCRIBE channel` (or `UNSUBSCRIBE`), answered by a push frame confirming it, or
    /// by an error (an ACL that denies the channel answers `-NOPERM`), which stops
    /// subscriptions on this connection.
    Subscription { channel: Bytes, subscribe: bool },
    /// A lock request, and what it uses a native command for (if it does): a refusal of
    /// that command turns the node over to the script for it. `fallback`: for a native
    /// release sent while the node's commands are probed, the script form to send in its
    /// place if the refusal comes after the lock stopped waiting for it.
    /// `announced`: a native release followed by its `PUBLISH`, whose reply is read with
    /// it (client.rs).
    Request {
        op: OpId,
        id: RequestId,
        native: Option<NativeUse>,
        announced: bool,
        fallback: Option<Bytes>,
    },
    /// A release sent again as the script after its native form was refused late (see
    /// `Request`): nothing waits for its reply.
    Resent,
    /// A waiter's `PUBLISH` on a waiting channel (notify.rs): nothing waits for its reply
    /// (an ACL that denies the channel answers `-NOPERM`, and the announcement is lost, as a
    /// hint may be).
    Announcement,
}

impl From<Step> for Pending {
    fn from(step: Step) -> Self {
        match step {
            Step::Handshake(command) => Self::Handshake(command),
            Step::Ask(ask) => Self::Session(ask),
            Step::Preload => Self::Preload,
        }
    }
}

/// One node: its connection, the connection's session, and the node's health.
#[derive(Debug)]
pub(crate) struct Node {
    id: NodeId,
    /// The generation of the node's current connection (see [`ConnId`]): the one being
    /// opened or up. While the node is down no connection is current.
    generation: u32,
    /// Why the node went down last; requests to it fail with this until it is back up.
    pub(crate) down_cause: NodeFault,
    pub(crate) link: Link,
    pub(crate) decoder: Decoder,
    /// The bytes queued for the connection.
    outbox: Outbox,
    pub(crate) in_flight: VecDeque<Pending>,
    /// Most entries in `in_flight` before new requests are refused.
    pub(crate) max_in_flight: usize,
    backoff: Backoff,
    /// What each new connection asks, and what the current one learned.
    session: Session,
    /// What the restart quarantine and the clock check know of the node (health.rs).
    pub(crate) health: NodeHealth,
    /// `-NOSCRIPT` replies to requests, over every connection (`Client::noscript_replies`).
    pub(crate) noscript_replies: u64,
    /// The release channels subscribed on the current connection (notify.rs).
    pub(crate) subscribed: Vec<Bytes>,
    /// The commands the node is sent for release and extension.
    pub(crate) commands: NodeCommands,
    /// The replies read so far of a request written as several commands, at the front of
    /// `in_flight`.
    gathered: Gathered,
}

impl AsRef<NodeHealth> for Node {
    fn as_ref(&self) -> &NodeHealth {
        &self.health
    }
}

impl AsMut<NodeHealth> for Node {
    fn as_mut(&mut self) -> &mut NodeHealth {
        &mut self.health
    }
}

impl Node {
    pub(crate) fn new(id: NodeId, config: &Config, settings: NodeSettings) -> Self {
        Self {
            id,
            generation: 0,
            down_cause: NodeFault::closed(),
            link: Link::Connecting { first: true },
            decoder: Decoder::new(config.max_reply_size, config.max_read_buffer),
            outbox: Outbox::default(),
            in_flight: VecDeque::new(),
            max_in_flight: config.max_in_flight,
            backoff: Backoff::new(config.reconnect_min, config.reconnect_max),
            session: Session::new(config, settings),
            health: NodeHealth::new(config),
            noscript_replies: 0,
            subscribed: Vec::new(),
            // Before any `HELLO` reply: probed, so that a request sent before the reply is
            // read (a cleanup release to a slow node) works where scripting is denied.
            commands: if config.native_commands {
                NodeCommands::probing()
            } else {
                NodeCommands::SCRIPTS
            },
            gathered: Gathered::default(),
        }
    }

    /// Whether a request written now will be sent (now or once the first connection is up).
    #[inline]
    pub(crate) fn accepts_requests(&self) -> bool {
        matches!(self.link, Link::Up | Link::Connecting { first: true })
    }

    /// Whether a request may be queued: fewer than `max_in_flight` are unanswered. The
    /// handshake and preloads of a new connection count but are never refused.
    #[inline]
    pub(crate) fn has_room(&self) -> bool {
        self.in_flight.len() < self.max_in_flight
    }

    /// Queues a request (its RESP bytes) behind everything already written.
    /// `announced`: a native release whose `PUBLISH` follows it in `encoded`, read as one
    /// request (command.rs, `Encoder::encode`).
    #[inline]
    pub(crate) fn send(
        &mut self,
        (op, id): (OpId, RequestId),
        native: Option<NativeUse>,
        (announced, fallback): (bool, Option<Bytes>),
        encoded: &Bytes,
    ) {
        let pending = Pending::Request {
            op,
            id,
            native,
            announced,
            fallback,
        };
        self.send_pending(encoded, pending);
    }

    /// Why a request to this node fails at once: it is down (for the reason it went down
    /// with), or backlogged (it keeps its connection: see the module docs for why the request
    /// is refused, not queued).
    pub(crate) fn refusal(&self) -> NodeFault {
        if self.accepts_requests() {
            NodeFault::Backlogged {
                max_in_flight: self.max_in_flight,
            }
        } else {
            self.down_cause.clone()
        }
    }

    /// Whether the node's commands are still probed (no `HELLO` reply read): a native
    /// command sent now may be refused.
    #[inline]
    pub(crate) fn is_probed(&self) -> bool {
        self.commands.source == crate::server::CommandSource::Probing
    }

    /// Queues `encoded`, a command whose reply `pending` says what to do with.
    #[inline]
    pub(crate) fn send_pending(&mut self, encoded: &Bytes, pending: Pending) {
        self.outbox.push(encoded);
        self.in_flight.push_back(pending);
    }

    /// Queues a waiter's announcement on `channel` (notify.rs, `waiting_channel`) if the node
    /// takes requests, has room, and may be subscribed to (it speaks RESP3 with us and
    /// denied no channel: where it does not, no holder's client is likely to listen on it
    /// either); whether it did.
    pub(crate) fn announce(&mut self, channel: &[u8]) -> bool {
        let writes = self.accepts_requests() && self.has_room() && self.may_subscribe();
        if writes {
            notify::encode_announcement(self.outbox.buf(), channel);
            self.in_flight.push_back(Pending::Announcement);
        }
        writes
    }

    /// Loads every script the client sends on the current connection, once, after a
    /// `-NOSCRIPT` no round answers by resending (session/mod.rs, `Session::reload_scripts`).
    pub(crate) fn reload_scripts(&mut self) {
        let loads = self.session.reload_scripts(self.outbox.buf());
        self.in_flight.extend((0..loads).map(|_| Pending::Preload));
    }

    /// After a fenced pipeline: reads the node's clock again if its reading is older than
    /// [`CLOCK_READING_MAX_AGE`] and none is in flight, so that the nodes' readings stay of
    /// about the same age and their floors agree (fencing.rs, `NodeClock::floor`).
    pub(crate) fn refresh_clock(&mut self, now: Instant) {
        let stale = (self.session.clock)
            .is_some_and(|c| now.saturating_duration_since(c.read_at) > CLOCK_READING_MAX_AGE);
        if stale && !self.in_flight.contains(&Pending::Session(Ask::Time)) {
            self.ask_time(now);
        }
    }

    /// After a request: if the clock-rate check wants a sample, a `TIME` goes out in the
    /// same write (piggy-backed: no round trip of its own, and none when idle). Its reply
    /// also serves as the clock reading of a fenced pipeline. A backlogged node is not
    /// sampled: the `TIME` would count against its cap.
    #[inline]
    pub(crate) fn sample_clock(&mut self, now: Instant) {
        if self.health.wants_sample(now)
            && self.link == Link::Up
            && self.has_room()
            && !self.in_flight.contains(&Pending::Session(Ask::Time))
        {
            self.ask_time(now);
        }
    }

    /// Queues `TIME` behind everything written; the rate check, if on, samples its reply.
    fn ask_time(&mut self, now: Instant) {
        resp::encode(self.outbox.buf(), &[b"TIME"]);
        self.in_flight.push_back(Pending::Session(Ask::Time));
        self.health.asked(now);
    }

    /// The connection is up: the session's handshake (`AUTH`, `SELECT`, `HELLO`, ...) and
    /// the script preloads go first, before anything queued.
    pub(crate) fn connected(&mut self) {
        self.outbox.unshare();
        let mut hello = BytesMut::new();
        let mut steps = Vec::new();
        self.session.plan(&mut hello, &mut steps);
        if !steps.is_empty() {
            self.outbox.prepend(hello);
            for step in steps.into_iter().rev() {
                self.in_flight.push_front(step.into());
            }
        }
        self.decoder.clear();
        self.session.connected();
        self.subscribed.clear();
        self.health.connected();
        self.link = Link::Up;
    }

    /// Notes that bytes were queued; true if the node was not already listed as dirty.
    #[inline]
    pub(crate) fn mark_dirty(&mut self) -> bool {
        self.outbox.mark_dirty()
    }

    /// Bytes to write, if the connection is up and anything is queued. Clears the dirty
    /// mark: bytes queued before the connection is up are marked again when it is.
    #[inline]
    pub(crate) fn take_transmit(&mut self) -> Option<Bytes> {
        self.outbox.take(self.link == Link::Up)
    }

    /// A reply was read in full at `now`: the node works, so the next reconnect starts
    /// fresh; and the process behind the connection was alive until then (health.rs,
    /// `NodeHealth::sighted`).
    #[inline]
    pub(crate) fn healthy(&mut self, now: Instant) {
        self.backoff.reset();
        self.health.sighted(now);
    }

    /// The current connection, if one is being opened or is up.
    #[inline]
    pub(crate) fn current(&self) -> Option<ConnId> {
        match self.link {
            Link::Down { .. } => None,
            Link::Connecting { .. } | Link::Up => Some(ConnId::new(self.id, self.generation)),
        }
    }

    /// Reads the answer to the session's question that is next, if one is (session.rs):
    /// the node's commands and protocol (`HELLO`) are taken here, as is its clock for the
    /// fencing floor (`TIME`, read at `now`); what concerns its health is handed on.
    pub(crate) fn read_session_reply(
        &mut self,
        now: Instant,
        bytes: &mut &[u8],
    ) -> Result<SessionReply, ProtocolError> {
        let Some(&Pending::Session(ask)) = self.in_flight.front() else {
            return Ok(SessionReply::NotNext);
        };
        let Some(learned) = session::read(&mut self.decoder, ask, bytes)? else {
            return Ok(SessionReply::Incomplete);
        };
        self.in_flight.pop_front();
        Ok(match learned {
            Learned::Hello(hello) => self.hello(ask, &hello),
            Learned::Clock(clock) => {
                self.session.clock_read(now, clock);
                SessionReply::Health(Learned::Clock(clock))
            }
            learned => SessionReply::Health(learned),
        })
    }

    /// The node answered `HELLO` (asked by `ask`): its commands from now on, and whether
    /// the connection now speaks RESP3.
    fn hello(&mut self, ask: Ask, hello: &Hello) -> SessionReply {
        if session::refused_resp3(ask, hello) {
            // A server (or proxy) that speaks RESP2 only: ask again without the protocol,
            // for its commands; it is polled, not notified.
            session::encode_hello(self.outbox.buf(), false);
            (self.in_flight).push_back(Pending::Session(Ask::Hello { resp3: false }));
            return SessionReply::AskedAgain;
        }
        match self.session.hello(hello, &mut self.commands) {
            true => SessionReply::Resp3,
            false => SessionReply::Read,
        }
    }

    /// What a request to this node may use at `now`: its commands, and the floor of a
    /// fenced pipeline if its clock is known (fencing.rs, `NodeClock::floor`).
    #[inline]
    pub(crate) fn offer(&self, now: Instant, drift_factor: f64) -> Offer {
        Offer {
            commands: self.commands,
            clock: self.session.clock.map(|c| (c, now, drift_factor)),
            floorless: false,
        }
    }

    /// `reply` read for the request at the front of `in_flight`: its one reply, once the
    /// last part of a request written as several commands is read (gather.rs).
    /// `count_waiters` false is a negative control's (server.rs, `fold_release`).
    #[inline]
    pub(crate) fn gather(&mut self, reply: Reply, count_waiters: bool) -> Option<Reply> {
        match self.in_flight.front() {
            Some(&Pending::Request {
                native, announced, ..
            }) => (self.gathered).gather((native, announced), reply, count_waiters),
            _ => Some(reply),
        }
    }

    /// Whether input from `conn` is about the current connection; anything else is from a
    /// connection the client gave up on, and is ignored.
    #[inline]
    pub(crate) fn is_current(&self, conn: ConnId) -> bool {
        self.current() == Some(conn)
    }

    /// Drops the connection because of `cause`: forgets buffers, schedules a reconnection
    /// with jittered exponential backoff, and returns the requests that will never be
    /// answered.
    pub(crate) fn close<R: Rng + ?Sized>(
        &mut self,
        now: Instant,
        cause: NodeFault,
        rng: &mut R,
    ) -> (Instant, VecDeque<Pending>) {
        self.down_cause = cause;
        self.outbox.clear();
        self.decoder.clear();
        self.session.disconnected();
        self.health.disconnected();
        self.gathered.clear();
        self.subscribed.clear();
        let retry_at = self.backoff.next(now, rng);
        self.link = Link::Down { retry_at };
        (retry_at, std::mem::take(&mut self.in_flight))
    }

    /// Whether a channel may be subscribed to on the current connection: it speaks RESP3,
    /// and refused no subscription yet.
    pub(crate) fn may_subscribe(&self) -> bool {
        self.session.resp3 && !self.session.subscriptions_refused
    }

    /// Queues `SUBSCRIBE channel` and counts the channel as subscribed.
    pub(crate) fn subscribe(&mut self, channel: &Bytes) {
        self.send_subscription(channel, true);
        self.subscribed.push(channel.clone());
    }

    /// Queues `UNSUBSCRIBE` for the subscribed channel at `at` in `subscribed`.
    pub(crate) fn unsubscribe(&mut self, at: usize) {
        let channel = self.subscribed.swap_remove(at);
        self.send_subscription(&channel, false);
    }

    fn send_subscription(&mut self, channel: &Bytes, subscribe: bool) {
        if subscribe {
            notify::encode_subscribe(self.outbox.buf(), channel);
        } else {
            notify::encode_unsubscribe(self.outbox.buf(), channel);
        }
        self.in_flight.push_back(Pending::Subscription {
            channel: channel.clone(),
            subscribe,
        });
    }

    /// The node answered `SUBSCRIBE channel` with an error (an ACL that denies the
    /// channel): the channel is not subscribed, and no other is tried on this connection
    /// (the retry timer and the expiry probe stand in for its notices).
    pub(crate) fn subscription_refused(&mut self, channel: &Bytes) {
        self.subscribed.retain(|c| c != channel);
        self.session.subscriptions_refused = true;
    }

    /// The reconnection is due: a new connection, which the driver is asked to open.
    pub(crate) fn reconnect(&mut self) -> ConnId {
        self.generation = self.generation.wrapping_add(1);
        self.link = Link::Connecting { first: false };
        ConnId::new(self.id, self.generation)
    }
}

/// The node as notification routing sees it (notify.rs, `Watching`).
impl notify::Subscriber for Node {
    fn is_up(&self) -> bool {
        self.link == Link::Up
    }

    fn subscribed(&self) -> &[Bytes] {
        &self.subscribed
    }

    fn may_subscribe(&self) -> bool {
        Self::may_subscribe(self)
    }

    fn subscribe(&mut self, channel: &Bytes) {
        Self::subscribe(self, channel);
    }

    fn unsubscribe(&mut self, at: usize) {
        Self::unsubscribe(self, at);
    }

    fn confirm_subscription(&mut self) {
        if let Some(Pending::Subscription { .. }) = self.in_flight.front() {
            self.in_flight.pop_front();
        }
    }

    fn mark_dirty(&mut self) -> bool {
        Self::mark_dirty(self)
    }
}

/// What [`Node::read_session_reply`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SessionReply {
    /// Read a whole `HELLO` reply; the connection speaks RESP2.
    Read,
    /// Read an answer that concerns the node's health (health.rs, `Health::on_session`):
    /// its clock, its identity, its persistence.
    Health(Learned),
    /// Read a `HELLO` reply that switched the connection to RESP3: subscriptions can go out.
    Resp3,
    /// Read a `HELLO 3` refused for its protocol version: a plain `HELLO` was queued.
    AskedAgain,
    /// The next reply is one of these, but only part of it has arrived.
    Incomplete,
    /// The next reply answers something else.
    NotNext,
}

#[cfg(test)]
mod tests {
    use chacha20::ChaCha20Rng;
    use rand_core::SeedableRng;

    use std::time::Duration;

    use super::*;

    /// A node whose backoff bounds are set past what the builder accepts, as a config from an
    /// older or buggier builder could hold.
    fn node(min: Duration, max: Duration) -> Node {
        let mut config = Config::builder(1).build().expect("default config");
        config.reconnect_min = min;
        config.reconnect_max = max;
        Node::new(NodeId::new(0), &config, NodeSettings::default())
    }

    #[test]
    fn backoff_saturates_instead_of_overflowing() {
        let mut rng = ChaCha20Rng::seed_from_u64(7);
        let now = crate::test_epoch::epoch();
        // (MAX, MAX) overflowed at the first close, (1 s, MAX) after about 64.
        for (min, max) in [
            (Duration::MAX, Duration::MAX),
            (Duration::from_secs(1), Duration::MAX),
        ] {
            let mut n = node(min, max);
            let mut last = now;
            for _ in 0..100 {
                let (retry_at, _) = n.close(now, NodeFault::closed(), &mut rng);
                assert!(retry_at > now);
                n.reconnect();
                last = retry_at;
            }
            assert_eq!(n.backoff.current, Duration::MAX);
            assert!(last > now + Duration::from_secs(3600));
        }
    }

    #[test]
    fn backoff_doubles_up_to_its_cap() {
        let mut rng = ChaCha20Rng::seed_from_u64(7);
        let now = crate::test_epoch::epoch();
        let (min, max) = (Duration::from_millis(50), Duration::from_millis(300));
        let mut n = node(min, max);
        let mut seen = Vec::new();
        for _ in 0..5 {
            let (retry_at, _) = n.close(now, NodeFault::closed(), &mut rng);
            let delay = retry_at - now;
            // Jitter: uniform in [backoff/2, 3*backoff/2].
            assert!(delay >= n.backoff.min / 2 && delay <= max + max / 2);
            seen.push(n.backoff.current);
            n.reconnect();
        }
        let ms = Duration::from_millis;
        assert_eq!(seen, [ms(100), ms(200), ms(300), ms(300), ms(300)]);
        n.healthy(now);
        assert_eq!(n.backoff.current, min);
    }
}
