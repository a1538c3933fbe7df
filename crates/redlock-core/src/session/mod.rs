//! A connection's session: the questions each new connection asks before anything queued
//! (docs/design.md, "Connections: generations and reasons"), and the reading of their
//! answers.
//!
//! The plan, in order: `AUTH` and `SELECT` (their refusal makes the session unusable),
//! `HELLO` and `TIME` (which commands the node has, whether the connection speaks RESP3,
//! and its clock: docs/design.md, "Native commands: chosen per node, scripts as the floor";
//! docs/safety.md, "Fencing tokens"), `INFO server` and `CONFIG GET append*` (who the node
//! is, for the restart quarantine: docs/safety.md, "Restart quarantine: the client checks
//! this assumption"), and the script preloads.
//!
//! Reading an answer changes nothing here: [`read`] returns what the node said as a
//! [`Learned`] value, and the node (node/mod.rs: its commands, its clock for the fencing
//! floor) and its health (health.rs: the quarantine and the clock check) take what is
//! theirs from it.

pub(crate) mod decode;

use std::time::{Duration, Instant};

use bytes::BytesMut;

use crate::command::{EXTEND_SCRIPT, RELEASE_SCRIPT};
use crate::config::Config;
use crate::fencing::{FENCED_ACQUIRE_SCRIPT, NodeClock, RAISE_FENCE_SCRIPT};
use crate::identity::{self, CONFIG_GET_APPEND, INFO_SERVER, Identity, Persistence};
use crate::kinds::KIND_SCRIPTS;
use crate::policy::NodeSettings;
use crate::resp::{self, Decoder, ProtocolError};
use crate::server::NodeCommands;
use crate::waiters::{QUEUE_ACQUIRE_SCRIPT, QUEUE_LEAVE_SCRIPT, QUEUE_RELEASE_SCRIPT};

pub(crate) use decode::Hello;

/// A question of the session whose answer [`read`] reads (none is matched to a lock's
/// request).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ask {
    /// `HELLO`, asking for RESP3 or not: its reply says which commands the node has
    /// (server.rs).
    Hello { resp3: bool },
    /// `TIME`: the node's clock, for the floor of a fenced pipeline (fencing.rs) and the
    /// clock-rate check (clock_rate.rs).
    Time,
    /// `INFO server`: the node's run id and uptime, for the restart quarantine
    /// (identity.rs).
    Info,
    /// `CONFIG GET append*`: whether the node syncs every write; with the `INFO` reply
    /// before it, the quarantine is decided (quarantine.rs).
    Config,
}

/// One step of a new connection's handshake, in the order it is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// `AUTH` or `SELECT` (named): an error reply means the session is unusable.
    Handshake(&'static str),
    /// A question whose answer the session reads.
    Ask(Ask),
    /// `SCRIPT LOAD`: saves a `-NOSCRIPT` round trip later; its reply is not needed.
    Preload,
}

/// What an answer to one of the session's questions said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Learned {
    /// The `HELLO` reply: the server, and whether the connection switched to RESP3.
    Hello(Hello),
    /// The `TIME` reply: the node's clock since the epoch, if it gave one.
    Clock(Option<Duration>),
    /// The `INFO server` reply: who the node is.
    Identity(Identity),
    /// The `CONFIG GET append*` reply: whether the node syncs every write.
    Persistence(Persistence),
}

/// A node's session: what each new connection asks, and what the current one learned that
/// lasts as long as it (its protocol, its clock, a refused subscription).
#[derive(Debug)]
pub(crate) struct Session {
    /// The node's `AUTH` and `SELECT` settings.
    settings: NodeSettings,
    /// Whether the release and extend scripts are loaded on each connection.
    preload_scripts: bool,
    /// Whether the waiters' queue's scripts are too (the queue is on: waiters/mod.rs).
    preload_queue: bool,
    /// Whether each new connection asks `HELLO`, to use the server's native commands or to
    /// switch to RESP3.
    ask_hello: bool,
    /// Whether the node's `HELLO` reply chooses its commands (native commands are on).
    native_commands: bool,
    /// Whether `HELLO` asks for RESP3 (release notifications are on).
    ask_resp3: bool,
    /// Whether each new connection asks `INFO server` and `CONFIG GET` (the restart
    /// quarantine is on).
    ask_identity: bool,
    /// Whether the current connection speaks RESP3 (its `HELLO 3` was accepted), so that a
    /// subscription shares it with requests.
    pub(crate) resp3: bool,
    /// Whether the current connection refused a `SUBSCRIBE`: no more are sent on it.
    pub(crate) subscriptions_refused: bool,
    /// Whether the current connection was sent every script again after a late
    /// `-NOSCRIPT` ([`reload_scripts`](Self::reload_scripts)): once is enough.
    scripts_reloaded: bool,
    /// The node's clock as its `TIME` read on the current connection said, if it did: the
    /// floor of a fenced pipeline comes from it (fencing.rs).
    pub(crate) clock: Option<NodeClock>,
}

impl Session {
    /// The session of a node with `settings`, asking what `config` needs.
    pub(crate) fn new(config: &Config, settings: NodeSettings) -> Self {
        Self {
            settings,
            preload_scripts: config.preload_scripts,
            preload_queue: config.waiter_queue.is_some(),
            ask_hello: config.native_commands || config.release_notifications.is_some(),
            native_commands: config.native_commands,
            ask_resp3: config.release_notifications.is_some(),
            ask_identity: config.restart_quarantine.is_some(),
            resp3: false,
            subscriptions_refused: false,
            scripts_reloaded: false,
            clock: None,
        }
    }

    /// The current connection answered `-NOSCRIPT` to a script after its lock stopped
    /// waiting for the answer (an acquisition decided by the other nodes, most often the
    /// first use of a kind's script): no round sends that script again, so the node would
    /// answer each later use the same way and, while it answers last, never take part in
    /// that kind's locks. Encodes into `buf` a `SCRIPT LOAD` of every script the client
    /// sends (the preloads and the kinds', docs/kinds.md), once per connection; returns how
    /// many (their replies are not needed: `Step::Preload`).
    pub(crate) fn reload_scripts(&mut self, buf: &mut BytesMut) -> usize {
        if std::mem::replace(&mut self.scripts_reloaded, true) {
            return 0;
        }
        let mutex = [
            &RELEASE_SCRIPT,
            &EXTEND_SCRIPT,
            &QUEUE_ACQUIRE_SCRIPT,
            &QUEUE_LEAVE_SCRIPT,
            &QUEUE_RELEASE_SCRIPT,
        ];
        let fenced = [&FENCED_ACQUIRE_SCRIPT, &RAISE_FENCE_SCRIPT];
        let scripts = (mutex.iter().chain(&fenced)).chain(&KIND_SCRIPTS);
        let mut count = 0;
        for script in scripts {
            resp::encode(buf, &[b"SCRIPT", b"LOAD", script.body.as_bytes()]);
            count += 1;
        }
        count
    }

    /// Writes the handshake of a new connection into `buf` and its steps into `steps`, in
    /// order: `AUTH`, `SELECT`, `HELLO` and `TIME`, `INFO` and `CONFIG GET`, the preloads,
    /// each only if asked for.
    pub(crate) fn plan(&self, buf: &mut BytesMut, steps: &mut Vec<Step>) {
        if let Some(password) = &self.settings.password {
            match &self.settings.username {
                Some(user) => resp::encode(buf, &[b"AUTH", user.as_bytes(), password.as_bytes()]),
                None => resp::encode(buf, &[b"AUTH", password.as_bytes()]),
            }
            steps.push(Step::Handshake("AUTH"));
        }
        if self.settings.db != 0 {
            let db = self.settings.db.to_string();
            resp::encode(buf, &[b"SELECT", db.as_bytes()]);
            steps.push(Step::Handshake("SELECT"));
        }
        if self.ask_hello {
            // After AUTH: a server that wants a password refuses HELLO without one.
            let resp3 = self.ask_resp3;
            encode_hello(buf, resp3);
            steps.push(Step::Ask(Ask::Hello { resp3 }));
            // The clock a fenced pipeline's floor is estimated from (fencing.rs).
            resp::encode(buf, &[b"TIME"]);
            steps.push(Step::Ask(Ask::Time));
        }
        if self.ask_identity {
            // Who the node is, for the restart quarantine (quarantine.rs): read before any
            // reply to a request queued behind.
            resp::encode(buf, &INFO_SERVER);
            steps.push(Step::Ask(Ask::Info));
            resp::encode(buf, &CONFIG_GET_APPEND);
            steps.push(Step::Ask(Ask::Config));
        }
        if self.preload_scripts {
            // The waiters' queue's too, with the queue on: a first contention that met
            // `-NOSCRIPT` would take two more round trips, and may time out.
            let queue = self.preload_queue.then_some([
                &QUEUE_ACQUIRE_SCRIPT,
                &QUEUE_LEAVE_SCRIPT,
                &QUEUE_RELEASE_SCRIPT,
            ]);
            let scripts = [&RELEASE_SCRIPT, &EXTEND_SCRIPT]
                .into_iter()
                .chain(queue.into_iter().flatten());
            for script in scripts {
                resp::encode(buf, &[b"SCRIPT", b"LOAD", script.body.as_bytes()]);
                steps.push(Step::Preload);
            }
        }
    }

    /// A new connection is up: it speaks RESP2 until its `HELLO 3` is accepted.
    pub(crate) fn connected(&mut self) {
        self.resp3 = false;
    }

    /// The connection ended: what it learned ends with it. A restarted server may have
    /// lost its counters: the next floor comes from a clock read on the next connection.
    pub(crate) fn disconnected(&mut self) {
        self.clock = None;
        self.resp3 = false;
        self.subscriptions_refused = false;
        self.scripts_reloaded = false;
    }

    /// The node's `TIME` said `clock` at `now` (`None`: no clock): the floor's reading.
    pub(crate) fn clock_read(&mut self, now: Instant, clock: Option<Duration>) {
        self.clock = clock.map(|since_epoch| NodeClock {
            since_epoch,
            read_at: now,
        });
    }

    /// The node answered `HELLO`: its `commands` from now on (if native commands are on),
    /// and whether the connection now speaks RESP3 (returned).
    pub(crate) fn hello(&mut self, hello: &Hello, commands: &mut NodeCommands) -> bool {
        if self.native_commands {
            *commands = hello.commands();
        }
        self.resp3 = self.ask_resp3 && matches!(hello, Hello::Map(_));
        self.resp3
    }
}

/// Reads the answer to `ask` from `bytes`, if it has all arrived.
pub(crate) fn read(
    decoder: &mut Decoder,
    ask: Ask,
    bytes: &mut &[u8],
) -> Result<Option<Learned>, ProtocolError> {
    Ok(match ask {
        Ask::Hello { .. } => decoder
            .next_in_with(bytes, decode::decode_hello)?
            .map(Learned::Hello),
        Ask::Time => decoder
            .next_in_with(bytes, decode::decode_time)?
            .map(Learned::Clock),
        Ask::Info => decoder
            .next_in_with(bytes, identity::decode_info)?
            .map(Learned::Identity),
        Ask::Config => decoder
            .next_in_with(bytes, identity::decode_config)?
            .map(Learned::Persistence),
    })
}

/// Whether a `HELLO 3` was refused for its protocol version (`NOPROTO`): a server (or
/// proxy) that speaks RESP2 only, asked again without the protocol, for its commands.
pub(crate) fn refused_resp3(ask: Ask, hello: &Hello) -> bool {
    ask == Ask::Hello { resp3: true }
        && matches!(hello, Hello::Refused(m) if m.starts_with("NOPROTO"))
}

/// Appends `HELLO 3` (RESP3, for release notifications) or `HELLO` (the protocol stays
/// RESP2).
pub(crate) fn encode_hello(buf: &mut BytesMut, resp3: bool) {
    if resp3 {
        resp::encode(buf, &[b"HELLO", b"3"]);
    } else {
        resp::encode(buf, &[b"HELLO"]);
    }
}
