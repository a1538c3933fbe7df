//! One node's connection as the client sees it: link state, write buffer, reply decoder,
//! the FIFO of requests in flight, the handshake, and reconnect backoff.
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

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use rand_core::Rng;

use crate::clock_rate::{Finding, RateCheck};
use crate::command::{EXTEND_SCRIPT, RELEASE_SCRIPT};
use crate::config::Config;
use crate::id::{ConnId, NodeId, OpId, RequestId};
use crate::identity::{self, CONFIG_GET_APPEND, INFO_SERVER, Identity};
use crate::io::NodeFault;
use crate::notify;
use crate::policy::NodeSettings;
use crate::quarantine::{self, Quarantine, QuarantineCause, Seen, Verdict};
use crate::resp::{self, Decoder, ProtocolError, Reply};
use crate::server::{
    CLOCK_READING_MAX_AGE, Hello, NativeUse, NodeClock, NodeCommands, Offer, decode_hello,
    decode_time,
};
use crate::time;

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
    /// `HELLO`, asking for RESP3 or not: its reply says which commands the node has
    /// (server.rs).
    Hello { resp3: bool },
    /// `TIME`: the node's clock, for the floor of a fenced pipeline (server.rs).
    Time,
    /// `SCRIPT LOAD`: saves a `-NOSCRIPT` round trip later; its reply is not needed.
    Preload,
    /// `SUBSCRIBE channel` (or `UNSUBSCRIBE`), answered by a push frame confirming it, or
    /// by an error (an ACL that denies the channel answers `-NOPERM`), which stops
    /// subscriptions on this connection.
    Subscription { channel: Bytes, subscribe: bool },
    /// `INFO server`: the node's run id and uptime, for the restart quarantine
    /// (identity.rs).
    Info,
    /// `CONFIG GET append*`: whether the node syncs every write; with the `INFO` reply
    /// before it, the quarantine is decided (quarantine.rs).
    Config,
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
}

#[derive(Debug)]
pub(crate) struct Node {
    id: NodeId,
    /// The generation of the node's current connection (see [`ConnId`]): the one being
    /// opened or up. While the node is down no connection is current.
    generation: u32,
    /// Why the node went down last; requests to it fail with this until it is back up.
    pub(crate) down_cause: NodeFault,
    settings: NodeSettings,
    preload_scripts: bool,
    /// Whether each new connection asks `HELLO`, to use the server's native commands or to
    /// switch to RESP3.
    ask_hello: bool,
    /// Whether the node's `HELLO` reply chooses its commands (native commands are on).
    native_commands: bool,
    /// Whether `HELLO` asks for RESP3 (release notifications are on).
    ask_resp3: bool,
    /// Whether the current connection speaks RESP3 (its `HELLO 3` was accepted), so that a
    /// subscription shares it with requests.
    pub(crate) resp3: bool,
    /// The release channels subscribed on the current connection (notify.rs).
    pub(crate) subscribed: Vec<Bytes>,
    /// Whether the current connection refused a `SUBSCRIBE`: no more are sent on it.
    subscriptions_refused: bool,
    /// `-NOSCRIPT` replies to requests, over every connection (`Client::noscript_replies`).
    pub(crate) noscript_replies: u64,
    /// The commands the node is sent for release and extension.
    pub(crate) commands: NodeCommands,
    pub(crate) link: Link,
    pub(crate) decoder: Decoder,
    out: BytesMut,
    /// A round's encoded command queued on its own, shared with the other nodes instead of
    /// copied into `out`; `out` is empty while this is set.
    shared: Option<Bytes>,
    pub(crate) in_flight: VecDeque<Pending>,
    /// Whether the client's dirty list holds this node.
    dirty: bool,
    /// Most entries in `in_flight` before new requests are refused.
    pub(crate) max_in_flight: usize,
    backoff: Duration,
    backoff_min: Duration,
    backoff_max: Duration,
    /// The node's clock as its `TIME` read on the current connection said, if it did.
    pub(crate) clock: Option<NodeClock>,
    /// The last `TIME` reading on any connection (kept across them): how far the nodes'
    /// wall clocks are apart (server.rs, `wall_spread`).
    pub(crate) last_clock: Option<NodeClock>,
    /// The replies read so far of the pipelined request at the front of `in_flight` (a
    /// fenced pipeline's `SET` and `ZADD`, until its `ZINCRBY` comes).
    pub(crate) gathered: Vec<Reply>,
    /// The delete's reply of an announced native release at the front of `in_flight`, until
    /// its `PUBLISH`'s comes (a field, not `gathered`: no allocation per release).
    pub(crate) deleted: Option<Reply>,
    /// Whether each new connection asks `INFO server` and `CONFIG GET` (the restart
    /// quarantine is on).
    ask_identity: bool,
    /// Whether a young node not known to have restarted is quarantined too
    /// (`ConfigBuilder::quarantine_young_nodes`).
    quarantine_young: bool,
    /// Negative control: the run id is forgotten at each reconnection.
    forget_run_id: bool,
    /// What the current connection's `INFO` said, until its `CONFIG GET` reply is read.
    said: Option<Identity>,
    /// The node process last seen (its run id) and when it last answered, across
    /// connections.
    seen: Option<Seen>,
    /// Whether `seen` is the process behind the current connection (its `INFO` was read on
    /// it): each reply read then is a sighting of that process.
    identified: bool,
    /// Negative control: a node is sighted only when a connection's `INFO` is read.
    sighting_at_connection: bool,
    /// The node's acquisition votes count as "no" until this ends (kept across
    /// connections).
    pub(crate) quarantine: Option<Quarantine>,
    /// A young node's first sight, until the other nodes' starts tell a restart from a new
    /// cluster (quarantine.rs, `first_sight`): its votes count as "no" meanwhile.
    first_sight: Option<Quarantine>,
    /// When the node's process started, as its last `INFO` said (`now - uptime`).
    pub(crate) started: Option<Instant>,
    /// Another node (by index) whose connection reported the same run id as this one's:
    /// one server named twice; its votes for acquisitions do not count meanwhile.
    pub(crate) same_as: Option<usize>,
    /// Its replies to acquisition attempts while its first sight is undecided: counted,
    /// or vetoed, once its peers have told (client.rs).
    held_votes: Vec<(OpId, RequestId, Reply)>,
    /// The check of the node's clock rate, if it is on (clock_rate.rs).
    rate_check: Option<RateCheck>,
    /// What the last `TIME` reply showed about the node's clock, until the client reports
    /// it.
    pub(crate) clock_finding: Option<Finding>,
}

impl Node {
    pub(crate) fn new(id: NodeId, config: &Config, settings: NodeSettings) -> Self {
        Self {
            id,
            generation: 0,
            down_cause: NodeFault::closed(),
            settings,
            preload_scripts: config.preload_scripts,
            ask_hello: config.native_commands || config.release_notifications.is_some(),
            native_commands: config.native_commands,
            ask_resp3: config.release_notifications.is_some(),
            resp3: false,
            subscribed: Vec::new(),
            subscriptions_refused: false,
            noscript_replies: 0,
            // Before any `HELLO` reply: probed, so that a request sent before the reply is
            // read (a cleanup release to a slow node) works where scripting is denied.
            commands: if config.native_commands {
                NodeCommands::probing()
            } else {
                NodeCommands::SCRIPTS
            },
            link: Link::Connecting { first: true },
            decoder: Decoder::new(config.max_reply_size, config.max_read_buffer),
            out: BytesMut::new(),
            shared: None,
            in_flight: VecDeque::new(),
            dirty: false,
            max_in_flight: config.max_in_flight,
            backoff: config.reconnect_min,
            backoff_min: config.reconnect_min,
            backoff_max: config.reconnect_max,
            clock: None,
            last_clock: None,
            gathered: Vec::new(),
            deleted: None,
            ask_identity: config.restart_quarantine.is_some(),
            quarantine_young: (config.restart_quarantine).is_some_and(|q| q.young_nodes),
            #[cfg(feature = "_mutants")]
            forget_run_id: config.mutant == Some(crate::mutant::Mutant::ForgetRunId),
            #[cfg(not(feature = "_mutants"))]
            forget_run_id: false,
            said: None,
            seen: None,
            identified: false,
            #[cfg(feature = "_mutants")]
            sighting_at_connection: config.mutant
                == Some(crate::mutant::Mutant::SightingAtConnection),
            #[cfg(not(feature = "_mutants"))]
            sighting_at_connection: false,
            quarantine: None,
            first_sight: None,
            started: None,
            held_votes: Vec::new(),
            same_as: None,
            rate_check: (config.clock_check).map(|_| RateCheck::new(config.timing.drift_factor)),
            clock_finding: None,
        }
    }

    /// Why the node's vote for an acquisition does not count at `now`, if it is quarantined.
    #[inline]
    pub(crate) fn quarantined(&self, now: Instant) -> Option<NodeFault> {
        let fault = |q: Quarantine| NodeFault::Quarantined {
            until: q.until,
            cause: q.cause,
        };
        match (self.quarantine, self.first_sight) {
            _ if self.same_as.is_some() => Some(NodeFault::Quarantined {
                until: time::add(now, SAME_SERVER_FOR),
                cause: QuarantineCause::SameServer,
            }),
            (Some(q), _) if q.until > now => Some(fault(q)),
            (_, Some(q)) if q.until > now => Some(fault(q)),
            _ => None,
        }
    }

    /// The run id of the process behind the current connection, once its `INFO` was read.
    pub(crate) fn current_run_id(&self) -> Option<&Bytes> {
        self.seen
            .as_ref()
            .filter(|_| self.identified)
            .map(|s| &s.run_id)
    }

    /// The start of a young node seen for the first time whose peers have not told yet
    /// whether it restarted (quarantine.rs, `first_sight`).
    pub(crate) fn first_sight_pending(&self, now: Instant) -> Option<Instant> {
        let q = self.first_sight.filter(|q| q.until > now)?;
        self.started.filter(|_| q.cause == QuarantineCause::Young)
    }

    /// Keeps a vote until the node's first sight is decided.
    pub(crate) fn hold_vote(&mut self, op: OpId, id: RequestId, reply: Reply) {
        self.held_votes.push((op, id, reply));
    }

    /// The votes kept while the first sight was undecided, once it is (or has run out).
    pub(crate) fn take_held_votes(&mut self, now: Instant) -> Vec<(OpId, RequestId, Reply)> {
        if self.held_votes.is_empty() || self.first_sight_pending(now).is_some() {
            return Vec::new();
        }
        std::mem::take(&mut self.held_votes)
    }

    /// The peers told what a young node's first sight means: `restart`, a quarantine (it
    /// restarted), or none (a new cluster).
    pub(crate) fn settle_first_sight(&mut self, restart: Option<Quarantine>) {
        self.first_sight = None;
        if let Some(q) = restart {
            self.quarantine = Some(quarantine::merge(self.quarantine.take(), q));
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
    #[inline]
    /// `announced`: a native release whose `PUBLISH` follows it in `encoded`, read as one
    /// request (command.rs, `Encoder::encode`).
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
        if self.out.is_empty() && self.shared.is_none() {
            // Alone in the queue: the transmit can be these very bytes.
            self.shared = Some(encoded.clone());
        } else {
            self.unshare();
            self.out.extend_from_slice(encoded);
        }
        self.in_flight.push_back(pending);
    }

    /// After a fenced pipeline: reads the node's clock again if its reading is older than
    /// [`CLOCK_READING_MAX_AGE`] and none is in flight, so that the nodes' readings stay of
    /// about the same age and their floors agree (see [`NodeClock::floor`]).
    pub(crate) fn refresh_clock(&mut self, now: Instant) {
        let stale = (self.clock)
            .is_some_and(|c| now.saturating_duration_since(c.read_at) > CLOCK_READING_MAX_AGE);
        if stale && !self.in_flight.contains(&Pending::Time) {
            self.ask_time(now);
        }
    }

    /// After a request: if the clock-rate check wants a sample, a `TIME` goes out in the
    /// same write (piggy-backed: no round trip of its own, and none when idle). Its reply
    /// also serves as the clock reading of a fenced pipeline. A backlogged node is not
    /// sampled: the `TIME` would count against its cap.
    #[inline]
    pub(crate) fn sample_clock(&mut self, now: Instant) {
        if (self.rate_check.as_ref()).is_some_and(|c| c.wants_sample(now))
            && self.link == Link::Up
            && self.has_room()
            && !self.in_flight.contains(&Pending::Time)
        {
            self.ask_time(now);
        }
    }

    /// Queues `TIME` behind everything written; the rate check, if on, samples its reply.
    fn ask_time(&mut self, now: Instant) {
        self.unshare();
        resp::encode(&mut self.out, &[b"TIME"]);
        self.in_flight.push_back(Pending::Time);
        if let Some(check) = &mut self.rate_check {
            check.asked(now);
        }
    }

    /// The connection is up: the handshake (`AUTH`, `SELECT`, `HELLO`) and the script
    /// preloads go first, before anything queued.
    pub(crate) fn connected(&mut self) {
        self.unshare();
        let mut hello = BytesMut::new();
        let mut steps = Vec::new();
        if let Some(password) = &self.settings.password {
            match &self.settings.username {
                Some(user) => {
                    resp::encode(&mut hello, &[b"AUTH", user.as_bytes(), password.as_bytes()])
                }
                None => resp::encode(&mut hello, &[b"AUTH", password.as_bytes()]),
            }
            steps.push(Pending::Handshake("AUTH"));
        }
        if self.settings.db != 0 {
            let db = self.settings.db.to_string();
            resp::encode(&mut hello, &[b"SELECT", db.as_bytes()]);
            steps.push(Pending::Handshake("SELECT"));
        }
        if self.ask_hello {
            // After AUTH: a server that wants a password refuses HELLO without one.
            encode_hello(&mut hello, self.ask_resp3);
            steps.push(Pending::Hello {
                resp3: self.ask_resp3,
            });
            // The clock a fenced pipeline's floor is estimated from (server.rs).
            resp::encode(&mut hello, &[b"TIME"]);
            steps.push(Pending::Time);
        }
        if self.ask_identity {
            // Who the node is, for the restart quarantine (quarantine.rs): read before any
            // reply to a request queued behind.
            resp::encode(&mut hello, &INFO_SERVER);
            steps.push(Pending::Info);
            resp::encode(&mut hello, &CONFIG_GET_APPEND);
            steps.push(Pending::Config);
        }
        if self.preload_scripts {
            for script in [&RELEASE_SCRIPT, &EXTEND_SCRIPT] {
                resp::encode(&mut hello, &[b"SCRIPT", b"LOAD", script.body.as_bytes()]);
                steps.push(Pending::Preload);
            }
        }
        if !steps.is_empty() {
            hello.extend_from_slice(&self.out);
            self.out = hello;
            for step in steps.into_iter().rev() {
                self.in_flight.push_front(step);
            }
        }
        self.decoder.clear();
        self.resp3 = false;
        self.subscribed.clear();
        self.said = None;
        self.identified = false;
        self.link = Link::Up;
    }

    /// The node answered `HELLO`: its commands from now on (if native commands are on), and
    /// whether the connection now speaks RESP3.
    pub(crate) fn learned(&mut self, hello: &Hello) {
        if self.native_commands {
            self.commands = hello.commands();
        }
        self.resp3 = self.ask_resp3 && matches!(hello, Hello::Map(_));
    }

    /// Notes that bytes were queued; true if the node was not already listed as dirty.
    #[inline]
    pub(crate) fn mark_dirty(&mut self) -> bool {
        !std::mem::replace(&mut self.dirty, true)
    }

    /// Bytes to write, if the connection is up and anything is queued. Clears the dirty
    /// mark: bytes queued before the connection is up are marked again when it is.
    #[inline]
    pub(crate) fn take_transmit(&mut self) -> Option<Bytes> {
        self.dirty = false;
        if self.link != Link::Up {
            None
        } else if let Some(bytes) = self.shared.take() {
            Some(bytes)
        } else if !self.out.is_empty() {
            Some(self.out.split().freeze())
        } else {
            None
        }
    }

    /// A reply was read in full at `now`: the node works, so the next reconnect starts
    /// fresh; and the process behind the connection was alive until then, so a process
    /// that claims later to have started before `now` has a stepped uptime
    /// (quarantine.rs: the last reply is the sighting, not the connection's `INFO`).
    #[inline]
    pub(crate) fn healthy(&mut self, now: Instant) {
        self.backoff = self.backoff_min;
        if self.identified
            && !self.sighting_at_connection
            && let Some(seen) = &mut self.seen
        {
            seen.at = seen.at.max(now);
        }
    }

    /// The current connection, if one is being opened or is up.
    #[inline]
    pub(crate) fn current(&self) -> Option<ConnId> {
        match self.link {
            Link::Down { .. } => None,
            Link::Connecting { .. } | Link::Up => Some(ConnId::new(self.id, self.generation)),
        }
    }

    /// Reads the `HELLO`, `TIME`, `INFO` or `CONFIG GET` reply that is next, if one is: what
    /// the node offers, its clock (read at `now`), who it is. None is matched to a lock's
    /// request. `window` is the restart quarantine's (quarantine.rs).
    pub(crate) fn read_session_reply(
        &mut self,
        now: Instant,
        bytes: &mut &[u8],
        window: Duration,
    ) -> Result<SessionReply, ProtocolError> {
        match self.in_flight.front() {
            Some(Pending::Info) => {
                let Some(said) = self.decoder.next_in_with(bytes, identity::decode_info)? else {
                    return Ok(SessionReply::Incomplete);
                };
                self.said = Some(said);
            }
            Some(Pending::Config) => {
                let Some(persistence) =
                    self.decoder.next_in_with(bytes, identity::decode_config)?
                else {
                    return Ok(SessionReply::Incomplete);
                };
                self.in_flight.pop_front();
                return Ok(SessionReply::Decided(self.decide(now, window, persistence)));
            }
            Some(&Pending::Hello { resp3 }) => {
                let Some(hello) = self.decoder.next_in_with(bytes, decode_hello)? else {
                    return Ok(SessionReply::Incomplete);
                };
                self.in_flight.pop_front();
                if resp3 && matches!(&hello, Hello::Refused(m) if m.starts_with("NOPROTO")) {
                    // A server (or proxy) that speaks RESP2 only: ask again without the
                    // protocol, for its commands; it is polled, not notified.
                    self.unshare();
                    encode_hello(&mut self.out, false);
                    self.in_flight.push_back(Pending::Hello { resp3: false });
                    return Ok(SessionReply::AskedAgain);
                }
                self.learned(&hello);
                return Ok(if self.resp3 {
                    SessionReply::Resp3
                } else {
                    SessionReply::Read
                });
            }
            Some(Pending::Time) => {
                let Some(clock) = self.decoder.next_in_with(bytes, decode_time)? else {
                    return Ok(SessionReply::Incomplete);
                };
                self.clock = clock.map(|since_epoch| NodeClock {
                    since_epoch,
                    read_at: now,
                });
                self.last_clock = self.clock.or(self.last_clock);
                if let Some(check) = &mut self.rate_check {
                    self.clock_finding = check.answered(now, clock);
                }
            }
            _ => return Ok(SessionReply::NotNext),
        }
        self.in_flight.pop_front();
        Ok(SessionReply::Read)
    }

    /// The restart quarantine's decision at `now`, from the `INFO` reply read before
    /// (quarantine.rs); remembers the node's run id and starts a quarantine.
    fn decide(
        &mut self,
        now: Instant,
        window: Duration,
        persistence: identity::Persistence,
    ) -> Verdict {
        let Some(said) = self.said.take() else {
            return Verdict::Unknown(None);
        };
        let seen = if self.forget_run_id {
            None
        } else {
            self.seen.take()
        };
        let young = self.quarantine_young;
        let verdict = quarantine::decide(now, window, seen.as_ref(), &said, persistence, young);
        if let Identity::Said {
            uptime: Some(uptime),
            ..
        } = said
        {
            self.started = now.checked_sub(uptime);
        }
        self.identified = matches!(
            said,
            Identity::Said {
                run_id: Some(_),
                ..
            }
        );
        self.seen = quarantine::remember(now, seen, &said);
        match verdict {
            Verdict::Quarantine(q) => {
                let q = quarantine::merge(self.quarantine.take(), q);
                self.quarantine = Some(q);
                Verdict::Quarantine(q)
            }
            Verdict::FirstSight(q) => {
                self.first_sight = Some(q);
                Verdict::FirstSight(q)
            }
            other => other,
        }
    }

    /// What a request to this node may use at `now`: its commands, and the floor of a
    /// fenced pipeline if its clock is known (see [`NodeClock::floor`]).
    #[inline]
    pub(crate) fn offer(&self, now: Instant, drift_factor: f64) -> Offer {
        Offer {
            commands: self.commands,
            clock: self.clock.map(|c| (c, now, drift_factor)),
            floorless: false,
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
        self.out.clear();
        self.shared = None;
        self.decoder.clear();
        // A restarted server may have lost its counters: the next floor comes from a clock
        // read on the next connection.
        self.clock = None;
        if let Some(check) = &mut self.rate_check {
            check.disconnected();
        }
        self.gathered.clear();
        self.deleted = None;
        self.resp3 = false;
        self.subscribed.clear();
        self.subscriptions_refused = false;
        self.said = None;
        self.identified = false;
        // Saturating: the builder caps the backoff, but a `Duration` near its maximum must
        // still never overflow here (a panic at a disconnect would take every lock with it).
        let delay = time::uniform(
            rng,
            self.backoff / 2,
            self.backoff.saturating_add(self.backoff / 2),
        );
        self.backoff = self.backoff.saturating_mul(2).min(self.backoff_max);
        let retry_at = time::add(now, delay);
        self.link = Link::Down { retry_at };
        (retry_at, std::mem::take(&mut self.in_flight))
    }

    /// Whether a channel may be subscribed to on the current connection: it speaks RESP3,
    /// and refused no subscription yet.
    pub(crate) fn may_subscribe(&self) -> bool {
        self.resp3 && !self.subscriptions_refused
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
        self.unshare();
        if subscribe {
            notify::encode_subscribe(&mut self.out, channel);
        } else {
            notify::encode_unsubscribe(&mut self.out, channel);
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
        self.subscriptions_refused = true;
    }

    /// Moves a shared command into `out`, so that more bytes can follow it.
    fn unshare(&mut self) {
        if let Some(bytes) = self.shared.take() {
            self.out.extend_from_slice(&bytes);
        }
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

/// How long ahead a quarantine for being the same server as another node is said to last:
/// it lasts while the connection reports that run id, re-checked at each connection.
pub(crate) const SAME_SERVER_FOR: Duration = Duration::from_secs(86_400);

/// Appends `HELLO 3` (RESP3, for release notifications) or `HELLO` (the protocol stays
/// RESP2).
fn encode_hello(buf: &mut BytesMut, resp3: bool) {
    if resp3 {
        resp::encode(buf, &[b"HELLO", b"3"]);
    } else {
        resp::encode(buf, &[b"HELLO"]);
    }
}

/// What [`Node::read_session_reply`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SessionReply {
    /// Read a whole `HELLO`, `TIME` or `INFO` reply.
    Read,
    /// Read the `CONFIG GET` reply: the restart quarantine's decision.
    Decided(Verdict),
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
            assert_eq!(n.backoff, Duration::MAX);
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
            assert!(delay >= n.backoff_min / 2 && delay <= max + max / 2);
            seen.push(n.backoff);
            n.reconnect();
        }
        let ms = Duration::from_millis;
        assert_eq!(seen, [ms(100), ms(200), ms(300), ms(300), ms(300)]);
        n.healthy(now);
        assert_eq!(n.backoff, min);
    }
}
