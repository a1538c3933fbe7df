//! Shared test harness: a `Client` on virtual time with helpers to drain outputs and feed
//! node replies. Only tests read the clock (once, for an origin).

#![allow(dead_code)]

use std::time::{Duration, Instant};

use bytes::Bytes;
use chacha20::ChaCha20Rng;
use rand_core::SeedableRng;
use redlock_core::{
    AcquireOutcome, AcquireStats, Client, Config, ConnId, ConnectionError, Event, Input, NodeId,
    NodeName, NodeOutcome, OpId, Output, Resource,
};

mod epoch;
pub(crate) mod inspect;

/// What the nodes' `TIME` says when the harness answers it: 2026-11-25, 16:00 UTC.
pub(crate) const NODE_SECS: u64 = 1_795_190_400;

/// A client with a virtual clock.
pub(crate) struct Harness {
    pub(crate) client: Client<ChaCha20Rng>,
    pub(crate) now: Instant,
}

/// Everything one drain produced, split by kind.
#[derive(Debug, Default)]
pub(crate) struct Drained {
    pub(crate) transmits: Vec<(NodeId, Bytes)>,
    pub(crate) connects: Vec<ConnId>,
    pub(crate) disconnects: Vec<ConnId>,
    pub(crate) events: Vec<Event>,
    pub(crate) timeout: Option<Instant>,
}

impl Drained {
    /// Concatenated bytes sent to `node`.
    pub(crate) fn sent_to(&self, node: usize) -> Vec<u8> {
        self.transmits
            .iter()
            .filter(|(n, _)| n.index() == node)
            .flat_map(|(_, b)| b.to_vec())
            .collect()
    }

    /// Nodes that got any bytes, in order of first transmit.
    pub(crate) fn nodes_sent(&self) -> Vec<usize> {
        let mut v: Vec<usize> = self.transmits.iter().map(|(n, _)| n.index()).collect();
        v.sort();
        v.dedup();
        v
    }
}

impl Harness {
    /// A client for `config`, connected to every node, drained.
    pub(crate) fn connected(config: Config) -> Self {
        let n = config.nodes();
        let mut h = Self::new(config);
        let first = h.drain();
        assert_eq!(first.connects.len(), n);
        for i in 0..n {
            h.connect(i);
            h.answer_preloads(i);
        }
        h
    }

    /// The node's current connection: the one being opened or up.
    ///
    /// # Panics
    /// If the node is down (waiting to reconnect): a test that feeds input for a down node
    /// names the stale connection itself, to show that the input is ignored.
    pub(crate) fn conn(&self, node: usize) -> ConnId {
        self.client
            .connection(NodeId::new(node))
            .unwrap_or_else(|| panic!("node {node} is down: no current connection"))
    }

    /// Reports the node's current connection up, then drains.
    pub(crate) fn connect(&mut self, node: usize) -> Drained {
        let conn = self.conn(node);
        self.input(|now| Input::Connected { now, conn })
    }

    /// Reports the node's current connection gone for `reason`, then drains.
    pub(crate) fn disconnect(&mut self, node: usize, reason: ConnectionError) -> Drained {
        let conn = self.conn(node);
        self.input(|now| Input::Disconnected { now, conn, reason })
    }

    /// Answers the `HELLO` (as a Redis 7, so that the node gets scripts) and the
    /// `SCRIPT LOAD`s a new connection starts with (release and extend, and with the waiters'
    /// queue on its three).
    pub(crate) fn answer_preloads(&mut self, node: usize) {
        self.answer_hello(node, "redis", "7.0.15");
        let mut answers = Vec::new();
        let mut scripts = vec![&redlock_core::RELEASE_SCRIPT, &redlock_core::EXTEND_SCRIPT];
        if self.client.config().waiter_queue().is_some() {
            scripts.extend([
                &redlock_core::QUEUE_ACQUIRE_SCRIPT,
                &redlock_core::QUEUE_LEAVE_SCRIPT,
                &redlock_core::QUEUE_RELEASE_SCRIPT,
            ]);
        }
        for script in scripts {
            answers.extend_from_slice(format!("$40\r\n{}\r\n", script.sha1).as_bytes());
        }
        let out = self.reply(node, &answers);
        assert!(out.events.is_empty() && out.disconnects.is_empty());
    }

    /// Answers a new connection's `HELLO` as `server` at `version` would, and the `TIME`
    /// that follows it with [`NODE_SECS`].
    pub(crate) fn answer_hello(&mut self, node: usize, server: &str, version: &str) {
        let mut replies = hello_reply(server, version);
        replies.extend_from_slice(&time_reply(NODE_SECS));
        let out = self.reply(node, &replies);
        assert!(out.events.is_empty() && out.disconnects.is_empty());
    }

    /// A fresh client, not drained.
    pub(crate) fn new(config: Config) -> Self {
        Self {
            client: Client::new(config, ChaCha20Rng::seed_from_u64(1)),
            now: epoch::epoch(),
        }
    }

    pub(crate) fn advance(&mut self, d: Duration) {
        self.now += d;
    }

    pub(crate) fn ms(&mut self, ms: u64) {
        self.advance(Duration::from_millis(ms));
    }

    /// Drains every output.
    pub(crate) fn drain(&mut self) -> Drained {
        let mut d = Drained::default();
        loop {
            match self.client.poll_output() {
                Output::Transmit(t) => d.transmits.push((t.node, t.bytes)),
                Output::Connect(n) => d.connects.push(n),
                Output::Disconnect(n) => d.disconnects.push(n),
                Output::Event(e) => d.events.push(e),
                Output::Timeout(t) => {
                    d.timeout = Some(t);
                    return d;
                }
                Output::Idle => return d,
            }
        }
    }

    /// Feeds one input built from the current time, then drains.
    pub(crate) fn input(&mut self, f: impl FnOnce(Instant) -> Input<'static>) -> Drained {
        self.client
            .handle_input(f(self.now))
            .expect("input accepted");
        self.drain()
    }

    /// Feeds bytes from the node's current connection, then drains.
    pub(crate) fn reply(&mut self, node: usize, bytes: &[u8]) -> Drained {
        let conn = self.conn(node);
        self.reply_on(conn, bytes)
    }

    /// Feeds bytes from `conn`, current or not, then drains.
    pub(crate) fn reply_on(&mut self, conn: ConnId, bytes: &[u8]) -> Drained {
        let now = self.now;
        let input = Input::Received { now, conn, bytes };
        self.client.handle_input(input).expect("input accepted");
        self.drain()
    }

    /// Feeds a timeout at the current time, then drains.
    pub(crate) fn timeout(&mut self) -> Drained {
        self.input(Input::Timeout)
    }

    /// Moves time to `at` and fires the timer.
    pub(crate) fn timeout_at(&mut self, at: Instant) -> Drained {
        self.now = self.now.max(at);
        self.timeout()
    }

    pub(crate) fn acquire(&mut self, key: &'static str) -> (OpId, Drained) {
        let op = self
            .client
            .acquire(self.now, Resource::from(key))
            .expect("acquire");
        (op, self.drain())
    }
}

/// Node `i`'s default name, `node#i` (what a configuration without names gives).
pub(crate) fn name(i: usize) -> NodeName {
    NodeName::unnamed(NodeId::new(i))
}

/// Per-node outcomes in node order, under `names`.
pub(crate) fn outcomes_named(names: &[NodeName], list: &[AcquireOutcome]) -> Vec<NodeOutcome> {
    (names.iter().zip(list))
        .map(|(node, outcome)| NodeOutcome {
            node: node.clone(),
            outcome: outcome.clone(),
        })
        .collect()
}

/// Per-node outcomes in node order, under the default names.
pub(crate) fn outcomes(list: &[AcquireOutcome]) -> Vec<NodeOutcome> {
    let names: Vec<NodeName> = (0..list.len()).map(name).collect();
    outcomes_named(&names, list)
}

/// An acquisition's statistics under `names`.
pub(crate) fn stats_named(
    names: &[NodeName],
    attempts: u32,
    elapsed: Duration,
    nodes: &[AcquireOutcome],
) -> AcquireStats {
    AcquireStats {
        attempts,
        elapsed,
        nodes: outcomes_named(names, nodes),
        written_back: Vec::new(),
        handed_over: false,
    }
}

/// An acquisition's statistics under the default node names.
pub(crate) fn stats(attempts: u32, elapsed: Duration, nodes: &[AcquireOutcome]) -> AcquireStats {
    AcquireStats {
        attempts,
        elapsed,
        nodes: outcomes(nodes),
        written_back: Vec::new(),
        handed_over: false,
    }
}

/// `SET key token NX PX ttl` as sent, with the token replaced by `*`.
pub(crate) fn set_nx_px(key: &str, ttl_ms: u64) -> String {
    let ttl = ttl_ms.to_string();
    format!(
        "*6\r\n$3\r\nSET\r\n${}\r\n{key}\r\n$40\r\n*\r\n$2\r\nNX\r\n$2\r\nPX\r\n${}\r\n{ttl}\r\n",
        key.len(),
        ttl.len()
    )
}

/// Replaces every 40-hex-char token in `bytes` by `*`, for golden comparisons.
pub(crate) fn mask_tokens(bytes: &[u8]) -> String {
    let s = String::from_utf8_lossy(bytes).into_owned();
    let mut out = String::new();
    for (i, line) in s.split("\r\n").enumerate() {
        if i > 0 {
            out.push_str("\r\n");
        }
        if line.len() == 40 && line.bytes().all(|c| c.is_ascii_hexdigit()) {
            out.push('*');
        } else {
            out.push_str(line);
        }
    }
    out
}

/// A `HELLO` reply (RESP2) naming `server` at `version`, with the other fields a server
/// sends (`modules` an empty array).
pub(crate) fn hello_reply(server: &str, version: &str) -> Vec<u8> {
    let bulk = |s: &str| format!("${}\r\n{s}\r\n", s.len());
    let mut out = String::from("*14\r\n");
    for (k, v) in [("server", bulk(server)), ("version", bulk(version))] {
        out += &(bulk(k) + &v);
    }
    out += &(bulk("proto") + ":2\r\n" + &bulk("id") + ":3\r\n");
    out += &(bulk("mode") + &bulk("standalone") + &bulk("role") + &bulk("master"));
    out += &(bulk("modules") + "*0\r\n");
    out.into_bytes()
}

/// A `TIME` reply: `secs` since the epoch, 0 microseconds.
pub(crate) fn time_reply(secs: u64) -> Vec<u8> {
    let digits = secs.to_string();
    format!("*2\r\n${}\r\n{digits}\r\n$1\r\n0\r\n", digits.len()).into_bytes()
}

/// Fires timers until one asks to open a connection; that drain.
#[allow(dead_code)]
pub(crate) fn fire_until_connect(h: &mut Harness) -> Drained {
    for _ in 0..10 {
        let at = h.drain().timeout.expect("a timer is armed");
        let out = h.timeout_at(at);
        if !out.connects.is_empty() {
            return out;
        }
    }
    panic!("no connect after 10 timers");
}

/// Fires timers until one makes the client send something; that drain.
pub(crate) fn fire_until_transmit(h: &mut Harness) -> Drained {
    for _ in 0..10 {
        let at = h.drain().timeout.expect("a timer is armed");
        let out = h.timeout_at(at);
        if !out.transmits.is_empty() {
            return out;
        }
    }
    panic!("no transmit after 10 timers");
}

/// The one event of a drain, which must be `Acquired`.
pub(crate) fn acquired(events: &[Event]) -> &redlock_core::Acquired {
    match events {
        [Event::Acquired(a)] => a,
        other => panic!("expected one Acquired, got {other:?}"),
    }
}

/// A configuration builder with release notifications, the restart quarantine, the
/// clock-rate check and the waiters' queue off. These transcripts script every byte a client sends and reads;
/// notifications add their own (`HELLO 3`, the `PTTL` probe after a contended attempt,
/// `SUBSCRIBE`), which tests/notifications.rs scripts, the quarantine its `INFO` and
/// `CONFIG GET`, which tests/quarantine.rs scripts, and the check its `TIME` samples, which
/// tests/clock_check.rs scripts, and the queue its attempts after a contended one, which
/// tests/waiters.rs scripts.
#[allow(dead_code)]
pub(crate) fn builder(nodes: usize) -> redlock_core::ConfigBuilder {
    Config::builder(nodes)
        .release_notifications(None)
        .restart_quarantine(None)
        .clock_check(None)
        .waiter_queue(None)
}
