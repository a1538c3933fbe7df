//! Fuzzes `redlock_core::Client` (N = 1..=7, small ttl and buffer caps) with byte-driven
//! sequences of inputs (connect, disconnect, node bytes, time) and mutations (acquire,
//! try_acquire, acquire_with, extend, release, cancel on known or bogus ids), driven the way
//! the driver contract says: drain before every input, `now` never goes backwards, `Timeout`
//! fed at or after the deadline.
//!
//! Locks are fenced by the config (caps bit 6) or per lock (`acquire_with`'s last operand),
//! and the fencing scripts get replies of their own (counters that agree or not, nil,
//! errors, junk), so the write-back round runs. So do the script-free fence's commands
//! (`TIME` in the handshake, then `SET NX PX`, `ZADD F GT floor n`, `ZINCRBY F 1 n` back to
//! back): valid answers, refusals, errors and junk scores (`1e400`, `nan`, `-1`, `1.5`,
//! past 2^53), once the core sends them.
//!
//! Besides "no panic" it checks: a fencing token on exactly the fenced locks' `Acquired`;
//! every write-back raising the lock key's counter to a positive number; every `ZADD F GT`
//! raising it to a whole second's floor (a multiple of 2^20 below 2^53) and every
//! `ZINCRBY` adding 1, on the lock key's counter; no
//! `Acquired`/`Extended` validity above `ttl - drift`; no extension command transmitted
//! for a lock after its release was requested or after its `Lost`/`Released` event; every
//! acquisition answered at most once, and exactly once after every node is disconnected and
//! time runs on (100 x 1 s), with no operation left; no event after an operation finished;
//! transmits only to connected nodes, as whole commands; a `Timeout` input leaves no
//! deadline due; a node that sends more than `max_read_buffer` bytes without a complete
//! reply is disconnected; each `Connect` hands out the node's next generation, to a node
//! that is down; and input naming a connection that is not the node's current one
//! (replaced, or never handed out) changes nothing.
//!
//! Input layout: six header bytes (N, ttl, flags, caps, retry, timing) and an RNG seed, then
//! one opcode byte per step with its operands; see `Driver::step`. Missing bytes read as 0.
//! A step's node byte also picks the connection its input names (bits 6-7, see
//! `Driver::pick`) and a disconnection's reason (bits 3-5, see `reason`); a byte below 8
//! names the node's current connection and closes it with `Closed`.

#![no_main]

use std::collections::{HashMap, VecDeque};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use chacha20::ChaCha20Rng;
use chacha20::rand_core::SeedableRng;
use libfuzzer_sys::fuzz_target;
use redlock_core::{
    AutoExtend, Client, Config, ConnId, ConnectionError, EXTEND_SCRIPT, Event,
    FENCED_ACQUIRE_SCRIPT, Fencing, Input, LockOptions, NodeId, NodeSettings, OpId, Output,
    QUEUE_RELEASE_SCRIPT, RAISE_FENCE_SCRIPT, RELEASE_SCRIPT, Resource, RestartQuarantine,
    RetryPolicy, Token, UsageError,
};
use redlock_testkit::resp::{self, Reply};

fuzz_target!(|data: &[u8]| {
    let mut script = Script { data, pos: 0 };
    let mut driver = Driver::new(&mut script);
    let mut steps = 0;
    while !script.done() && steps < MAX_STEPS {
        driver.step(&mut script);
        steps += 1;
    }
    driver.finish();
});

/// The fuzz input, read one byte at a time; past the end every byte is 0.
struct Script<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Script<'a> {
    fn byte(&mut self) -> u8 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }

    fn take(&mut self, n: usize) -> &'a [u8] {
        let start = self.pos.min(self.data.len());
        let end = (start + n).min(self.data.len());
        self.pos += n;
        &self.data[start..end]
    }

    fn done(&self) -> bool {
        self.pos >= self.data.len()
    }
}

/// The driver's view of one node's connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Link {
    Down,
    Connecting,
    Up,
}

/// Which command a node was sent, to build a plausible reply for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sent {
    Set,
    EvalSha,
    Eval,
    ScriptLoad,
    Handshake,
    /// `HELLO`: its reply is an array naming the server.
    Hello,
    /// `DELIFEQ` or `DELEX ... IFEQ`: a native release.
    DelIfEq,
    /// `SET ... IFEQ ... PX`: a native extension.
    SetIfEq,
    /// The fenced acquire script: its reply is the node's counter, nil, or an error.
    FencedAcquire,
    /// The fence write-back script: 1 (raised, K still ours) or 0.
    RaiseFence,
    /// `TIME` (in the handshake): its reply is an array of seconds and microseconds.
    Time,
    /// `ZADD F GT floor n`: the script-free acquire's raise to the floor.
    ZaddGt,
    /// `ZINCRBY F 1 n`: the script-free acquire's count, a score as a bulk string.
    Zincrby,
    Other,
}

/// What the harness knows about one operation.
#[derive(Debug)]
struct OpInfo {
    max_validity: Duration,
    min_validity: Duration,
    answered: u32,
    held: bool,
    lost: bool,
    finished: bool,
    /// Release requested, or `Lost`/`Released` reported in an earlier drain: no extension
    /// may be transmitted from now on.
    stopped: bool,
    /// A fenced lock (by the config or its options): its `Acquired` carries a token, and only
    /// then.
    fenced: bool,
}

/// A model driver around the client, with the checks.
struct Driver {
    client: Client<ChaCha20Rng>,
    config: Config,
    now: Instant,
    deadline: Option<Instant>,
    strict: bool,
    links: Vec<Link>,
    /// The last connection the client handed out for each node (its current one unless the
    /// node is down).
    conns: Vec<Option<ConnId>>,
    /// No `Connected` or `Disconnected` was fed yet: the core queues requests for the node.
    never_connected: Vec<bool>,
    /// The node whose first connection was just fed: its next transmit flushes the queue.
    first_flush: Option<usize>,
    /// Bytes received and not yet a complete reply (model decoder); `None` once the model
    /// cannot follow the stream (it is malformed and the client will drop it).
    unread: Vec<Option<Vec<u8>>>,
    /// Commands sent to each node and not yet answered, oldest first.
    sent: Vec<VecDeque<Sent>>,
    ops: Vec<OpId>,
    info: HashMap<OpId, OpInfo>,
    /// (resource, token) of every acquired lock, to attribute extension commands.
    holders: HashMap<(Vec<u8>, Vec<u8>), OpId>,
    acquires: u64,
    /// The config's `fencing` switch: whether a lock without a `fenced` option is fenced.
    fencing: bool,
}

impl Driver {
    fn new(s: &mut Script<'_>) -> Self {
        let (config, n, flags, seed, fencing) = read_config(s);
        trace(|| format!("{config:?} strict={} seed={seed}", flags & 4 != 0));
        let client = Client::new(config.clone(), ChaCha20Rng::seed_from_u64(seed));
        let mut driver = Self {
            client,
            config,
            now: origin(),
            deadline: None,
            strict: flags & 4 != 0,
            links: vec![Link::Down; n],
            conns: vec![None; n],
            never_connected: vec![true; n],
            first_flush: None,
            unread: vec![None; n],
            sent: vec![VecDeque::new(); n],
            ops: Vec::new(),
            info: HashMap::new(),
            holders: HashMap::new(),
            acquires: 0,
            fencing,
        };
        driver.drain();
        assert!(
            driver.links.iter().all(|l| *l == Link::Connecting),
            "a new client asks to connect to every node"
        );
        driver
    }

    /// Virtual time since the origin, for traces.
    fn at(&self) -> Duration {
        self.now - origin()
    }

    fn n(&self) -> usize {
        self.links.len()
    }

    /// Reads one opcode and its operands, feeds the input or mutation, drains and checks.
    fn step(&mut self, s: &mut Script<'_>) {
        let op = s.byte();
        let b = s.byte();
        let node = usize::from(b) % self.n();
        let conn = self.pick(node, b);
        match op % 18 {
            0..=2 => self.auto_replies(s, conn),
            3 => {
                let replies = reply_shaped(s);
                let cut = usize::from(s.byte()) % (replies.len() + 1);
                self.receive(conn, &replies[..cut]);
                self.receive(conn, &replies[cut..]);
            }
            4 => {
                let len = usize::from(s.byte() % 48);
                let bytes = s.take(len).to_vec();
                self.receive(conn, &bytes);
            }
            5 => self.flood(s, conn),
            6 => {
                if !self.strict || self.links[node] == Link::Connecting {
                    self.input(Input::Connected {
                        now: self.now,
                        conn,
                    });
                }
            }
            7 => {
                if !self.strict || self.links[node] != Link::Down {
                    self.input(Input::Disconnected {
                        now: self.now,
                        conn,
                        reason: reason(b),
                    });
                }
            }
            8..=11 => self.pass_time(s, op % 18),
            12 => {
                let resource = resource(s.byte());
                let result = self.client.acquire(self.now, resource);
                self.acquired(result, None, self.fencing);
            }
            13 => {
                let resource = resource(s.byte());
                let result = self.client.try_acquire(self.now, resource);
                self.acquired(result, None, self.fencing);
            }
            14 => self.acquire_with(s),
            15..=17 => self.on_known_op(s, op % 18),
            _ => unreachable!("opcode taken modulo 18"),
        }
    }

    /// The connection a step's input names, from bits 6-7 of its node byte: 0 or 1, the last
    /// one the client handed out for the node (current unless the node is down); 2, the one
    /// before it (replaced); 3, one not handed out yet. A strict driver names the last one.
    fn pick(&self, node: usize, b: u8) -> ConnId {
        let last = self.conns[node]
            .expect("a new client asks to connect to every node")
            .generation();
        let generation = match b >> 6 {
            _ if self.strict => last,
            2 => last.wrapping_sub(1),
            3 => last.wrapping_add(1),
            _ => last,
        };
        ConnId::new(NodeId::new(node), generation)
    }

    /// Whether `conn` is its node's current connection in the model: the last one handed out,
    /// while the node is not down. The client ignores input from any other.
    fn is_current(&self, conn: ConnId) -> bool {
        let i = conn.node().index();
        self.links[i] != Link::Down && self.conns[i] == Some(conn)
    }

    /// Opcodes 8 to 11: time passes, with a `Timeout` fed at, after or before the deadline,
    /// or with nothing to report.
    fn pass_time(&mut self, s: &mut Script<'_>, op: u8) {
        match op {
            8 | 9 => {
                let b = s.byte();
                let ms = u64::from(b & 0x7f) * if b & 0x80 != 0 { 8 } else { 1 };
                self.now += Duration::from_millis(ms);
                // A strict driver wakes only for the deadline; a loose one also spuriously.
                if !self.strict || self.deadline.is_some_and(|at| at <= self.now) {
                    self.timeout();
                }
            }
            10 => {
                let jitter = Duration::from_micros(u64::from(s.byte()) * 20);
                if let Some(at) = self.deadline {
                    self.now = self.now.max(at);
                }
                self.now += jitter;
                self.timeout();
            }
            // Time passes with nothing to report: the next input comes late.
            _ => self.now += Duration::from_millis(u64::from(s.byte())),
        }
    }

    /// Opcodes 15 to 17: extend, release or cancel a known operation (or a bogus id).
    fn on_known_op(&mut self, s: &mut Script<'_>, op: u8) {
        let which = s.byte();
        let id = match self.ops.len() {
            _ if which >= 0xf0 => OpId::from_raw(1_000 + u64::from(which)),
            0 => OpId::from_raw(u64::from(which)),
            len => self.ops[usize::from(which) % len],
        };
        let result = match op {
            15 => self.client.extend(self.now, id),
            16 => self.client.release(self.now, id),
            _ => self.client.cancel(self.now, id),
        };
        let name = ["extend", "release", "cancel"][usize::from(op - 15)];
        trace(|| format!("{:?} {name}({id}) = {result:?}", self.at()));
        assert_ne!(
            result,
            Err(UsageError::NotDrained),
            "drained before the call"
        );
        if result.is_ok()
            && op != 15
            && let Some(info) = self.info.get_mut(&id)
            && info.held
            && !info.finished
        {
            info.stopped = true;
        }
        self.drain();
    }

    /// Answers the oldest unanswered commands on `conn`'s node with a reply that fits each
    /// command (usually the success reply, sometimes a refusal or an error).
    fn auto_replies(&mut self, s: &mut Script<'_>, conn: ConnId) {
        let node = conn.node().index();
        let count = 1 + usize::from(s.byte() % 4);
        let mut bytes = Vec::new();
        for k in 0..count {
            let mode = s.byte();
            let kind = self.sent[node].get(k).copied().unwrap_or(Sent::Other);
            bytes.extend_from_slice(reply_for(kind, mode));
        }
        self.receive(conn, &bytes);
    }

    /// Sends about `max_read_buffer` bytes (a little less, exactly, a little more, or twice
    /// as much) in up to three pushes, mostly without a complete reply.
    fn flood(&mut self, s: &mut Script<'_>, conn: ConnId) {
        let cap = self.config.max_read_buffer();
        let size = match s.byte() % 6 {
            0 => cap / 2,
            1 => cap - 1,
            2 => cap,
            3 => cap + 1,
            4 => cap * 2,
            _ => cap + self.config.max_reply_size(),
        };
        let mut bytes = Vec::with_capacity(size + 16);
        match s.byte() % 5 {
            0 => bytes.push(b'+'),
            1 => bytes.extend_from_slice(b"$100000\r\n"),
            2 => {
                while bytes.len() + 4 <= size {
                    bytes.extend_from_slice(b":1\r\n");
                }
            }
            3 => {
                bytes.extend_from_slice(b"+OK\r\n+OK\r\n");
                bytes.push(b'+');
            }
            _ => bytes.extend_from_slice(b"-ERR "),
        }
        bytes.resize(size.max(bytes.len()), b'a');
        let pushes = 1 + usize::from(s.byte() % 3);
        let chunk = bytes.len().div_ceil(pushes).max(1);
        for part in bytes.chunks(chunk) {
            self.receive(conn, part);
        }
    }

    fn acquire_with(&mut self, s: &mut Script<'_>) {
        let resource = resource(s.byte());
        let b = s.byte();
        let mut options = LockOptions::default();
        let ttl = match b & 7 {
            0 => Some(Duration::from_millis(20)),
            1 => Some(Duration::from_millis(100)),
            2 => Some(Duration::from_millis(2_000)),
            // Invalid: below the 2 ms drift floor, and not whole milliseconds.
            3 => Some(Duration::from_millis(1)),
            4 => Some(Duration::from_micros(1_500)),
            _ => None,
        };
        if let Some(ttl) = ttl {
            options = options.ttl(ttl);
        }
        if b & 8 != 0 {
            // One value for every lock, as an owner id would be: each attempt stores it
            // stamped with its own nonce, so extensions are still attributed to one lock.
            let token = Token::new("supplied").expect("valid token");
            options = options.token(token);
        }
        if b & 0x10 != 0 {
            options = options.retry(RetryPolicy {
                max_attempts: Some(1 + u32::from(b >> 6)),
                max_wait: Some(Duration::from_millis(300)),
                delay_min: MIN_RETRY_DELAY,
                delay_max: Duration::from_millis(5),
            });
        }
        if b & 0x20 != 0 {
            let auto = (b & 0x40 != 0).then_some(AutoExtend {
                renew_below: 0.5,
                max_renewals: Some(2),
                max_hold: None,
            });
            options = options.auto_extend(auto);
        }
        // Fenced or not by the options, else by the config (an operand of its own, last).
        let fenced = match s.byte() % 3 {
            0 => self.fencing,
            fenced => {
                options = options.fenced(fenced == 1);
                fenced == 1
            }
        };
        let result = self.client.acquire_with(self.now, resource, &options);
        self.acquired(result, ttl, fenced);
    }

    /// Records a new operation (its validity bounds) and drains.
    fn acquired(&mut self, result: Result<OpId, UsageError>, ttl: Option<Duration>, fenced: bool) {
        trace(|| format!("{:?} acquire (ttl {ttl:?}) = {result:?}", self.at()));
        self.acquires += 1;
        assert_ne!(
            result,
            Err(UsageError::NotDrained),
            "drained before the call"
        );
        if let Ok(op) = result {
            let max_validity = match ttl {
                None => self.config.ttl() - self.config.drift(),
                Some(ttl) => {
                    // The drift of a lock with this ttl, from a config with the same rules.
                    let c = Config::builder(1).ttl(ttl).build().expect("ttl accepted");
                    ttl - c.drift()
                }
            };
            assert!(!self.info.contains_key(&op), "{op} handed out twice");
            self.ops.push(op);
            self.info.insert(
                op,
                OpInfo {
                    max_validity,
                    min_validity: self.config.min_validity(),
                    answered: 0,
                    held: false,
                    lost: false,
                    finished: false,
                    stopped: false,
                    fenced,
                },
            );
        }
        self.drain();
    }

    /// Feeds bytes from `conn`, keeping the model decoder in step (for the node's current
    /// connection only: the client ignores bytes from any other), then checks the cap.
    fn receive(&mut self, conn: ConnId, bytes: &[u8]) {
        let node = conn.node().index();
        if self.strict && self.links[node] != Link::Up {
            return;
        }
        if self.links[node] == Link::Up
            && self.is_current(conn)
            && let Some(unread) = &mut self.unread[node]
        {
            unread.extend_from_slice(bytes);
            loop {
                let array = matches!(self.sent[node].front(), Some(Sent::Hello | Sent::Time));
                match scan_reply(unread, array) {
                    Scan::Complete(len) => {
                        unread.drain(..len);
                        self.sent[node].pop_front();
                    }
                    Scan::Incomplete => break,
                    Scan::Invalid => {
                        self.unread[node] = None;
                        break;
                    }
                }
            }
        }
        self.input(Input::Received {
            now: self.now,
            conn,
            bytes,
        });
        if let Some(unread) = &self.unread[node] {
            assert!(
                unread.len() <= self.config.max_read_buffer(),
                "node {node} holds {} bytes without a complete reply (cap {}) and was not \
                 disconnected",
                unread.len(),
                self.config.max_read_buffer()
            );
        }
    }

    fn timeout(&mut self) {
        self.input(Input::Timeout(self.now));
        if let Some(at) = self.deadline {
            assert!(
                at > self.now,
                "a deadline at or before the Timeout just fed"
            );
        }
        for op in &self.ops {
            if let Some((_, deadline)) = self.client.held(*op) {
                assert!(deadline > self.now, "{op} still held past its deadline");
            }
        }
    }

    /// Feeds one input (the client is always drained here), updates the link model, drains.
    ///
    /// Only input about the node's current connection changes the link: `Connected` brings up
    /// the connection being opened (a repeat for an up one is moot), `Disconnected` takes the
    /// current one down; for any other connection both are ignored. Input that is ignored
    /// must change nothing: no output, the same deadline.
    fn input(&mut self, input: Input<'_>) {
        trace(|| format!("{:?} {input:?}", self.at()));
        let moot = match &input {
            Input::Connected { conn, .. } => {
                !self.is_current(*conn) || self.links[conn.node().index()] == Link::Up
            }
            Input::Received { conn, .. } | Input::Disconnected { conn, .. } => {
                !self.is_current(*conn)
            }
            Input::Timeout(_) => false,
        };
        let deadline = self.deadline;
        let change = match &input {
            Input::Connected { conn, .. }
                if self.is_current(*conn)
                    && self.links[conn.node().index()] == Link::Connecting =>
            {
                Some((conn.node().index(), Link::Up))
            }
            Input::Disconnected { conn, .. } if self.is_current(*conn) => {
                Some((conn.node().index(), Link::Down))
            }
            _ => None,
        };
        self.client
            .handle_input(input)
            .expect("a drained client accepts any input for a known node");
        match change {
            Some((i, Link::Up)) => {
                if self.never_connected[i] {
                    self.first_flush = Some(i);
                }
                self.never_connected[i] = false;
                self.links[i] = Link::Up;
                self.unread[i] = Some(Vec::new());
                self.sent[i].clear();
            }
            Some((i, _)) => {
                self.never_connected[i] = false;
                self.links[i] = Link::Down;
                self.unread[i] = None;
                self.sent[i].clear();
            }
            None => {}
        }
        let outputs = self.drain();
        if moot {
            assert_eq!(
                outputs, 0,
                "an input to ignore (not the current connection's, or a repeat) had effects"
            );
            assert_eq!(
                self.deadline, deadline,
                "an input to ignore (not the current connection's, or a repeat) moved the deadline"
            );
        }
    }

    /// Polls until `Timeout` or `Idle` and checks everything that came out; returns how many
    /// outputs came before the final one.
    fn drain(&mut self) -> usize {
        let mut outputs = Vec::new();
        self.deadline = loop {
            assert!(
                outputs.len() < 100_000,
                "poll_output never reaches Timeout or Idle"
            );
            match self.client.poll_output() {
                Output::Timeout(at) => break Some(at),
                Output::Idle => break None,
                other => outputs.push(other),
            }
        };
        let count = outputs.len();
        let first_flush = self.first_flush.take();
        self.trace_drain(&outputs);
        // Acquired events first: a transmit in the same drain may already extend the lock.
        for output in &outputs {
            if let Output::Event(Event::Acquired(a)) = output {
                let key = (a.resource.as_bytes().to_vec(), a.token.as_bytes().to_vec());
                self.holders.insert(key, a.op);
            }
        }
        for output in &outputs {
            match output {
                Output::Connect(conn) => {
                    let i = conn.node().index();
                    assert_eq!(self.links[i], Link::Down, "Connect for node {i} not down");
                    let next = self.conns[i].map_or(0, |c| c.generation().wrapping_add(1));
                    assert_eq!(
                        conn.generation(),
                        next,
                        "Connect for node {i} is not its next generation"
                    );
                    self.conns[i] = Some(*conn);
                    self.links[i] = Link::Connecting;
                }
                Output::Disconnect(conn) => {
                    let i = conn.node().index();
                    assert_eq!(self.links[i], Link::Up, "Disconnect for node {i} not up");
                    assert_eq!(
                        Some(*conn),
                        self.conns[i],
                        "Disconnect for a connection of node {i} that is not its current one"
                    );
                    self.links[i] = Link::Down;
                    self.unread[i] = None;
                    self.sent[i].clear();
                }
                Output::Transmit(t) => {
                    let i = t.node.index();
                    assert_eq!(self.links[i], Link::Up, "Transmit to node {i} not up");
                    self.check_transmit(i, &t.bytes, first_flush == Some(i));
                }
                Output::Event(_) | Output::Timeout(_) | Output::Idle => {}
            }
        }
        for output in outputs {
            if let Output::Event(event) = output {
                self.check_event(&event);
            }
        }
        // Lost and Released in this drain stop extensions from the next drain on.
        for info in self.info.values_mut() {
            if info.lost || (info.held && info.finished) {
                info.stopped = true;
            }
        }
        self.check_states();
        count
    }

    /// The outputs of one drain and the deadline it ended with, when tracing.
    fn trace_drain(&self, outputs: &[Output]) {
        trace(|| {
            let mut lines = String::new();
            for output in outputs {
                let line = match output {
                    Output::Transmit(t) => {
                        let names: Vec<String> = parse_commands(&t.bytes)
                            .iter()
                            .map(|c| String::from_utf8_lossy(c[0]).into_owned())
                            .collect();
                        format!("    -> Transmit {} {names:?}", t.node)
                    }
                    other => format!("    -> {other:?}"),
                };
                lines.push_str(&line);
                lines.push('\n');
            }
            lines.push_str(&format!(
                "    -> deadline {:?}",
                self.deadline.map(|d| d - origin())
            ));
            lines
        });
    }

    /// The client's getters agree with the model: which locks are held, which nodes up.
    fn check_states(&self) {
        for (op, info) in &self.info {
            let held = info.held && !info.stopped;
            assert_eq!(self.client.held(*op).is_some(), held, "held({op})");
        }
        for (i, link) in self.links.iter().enumerate() {
            let up = *link == Link::Up;
            assert_eq!(self.client.is_up(NodeId::new(i)), up, "link of node {i}");
            let current = self.conns[i].filter(|_| *link != Link::Down);
            assert_eq!(
                self.client.connection(NodeId::new(i)),
                current,
                "current connection of node {i}"
            );
        }
    }

    /// Parses a transmit into commands and checks every extension in it.
    fn check_transmit(&mut self, node: usize, bytes: &[u8], first_flush: bool) {
        let commands = parse_commands(bytes);
        // In the first connection's flush, requests queued before the lock stopped come out
        // late; those before the lock's last release in the flush were queued in time.
        let last_release = |key: &(Vec<u8>, Vec<u8>)| {
            commands.iter().rposition(|c| {
                (is_script(c, &RELEASE_SCRIPT) && c.get(3..5).is_some_and(|k| key_of(k) == *key))
                    || (is_script(c, &QUEUE_RELEASE_SCRIPT)
                        && c.len() > 6
                        && key_of(&[c[3], c[6]]) == *key)
                    || (c[0] == b"DELIFEQ" && c.get(1..3).is_some_and(|k| key_of(k) == *key))
                    || (c[0] == b"DELEX" && c.len() == 4 && key_of(&[c[1], c[3]]) == *key)
            })
        };
        for (pos, command) in commands.iter().enumerate() {
            let name = command[0];
            let kind = match name {
                _ if is_script(command, &FENCED_ACQUIRE_SCRIPT) => Sent::FencedAcquire,
                _ if is_script(command, &RAISE_FENCE_SCRIPT) => {
                    check_raise(command);
                    Sent::RaiseFence
                }
                b"SET" if is_native_extend(command) => Sent::SetIfEq,
                b"SET" => Sent::Set,
                b"HELLO" => Sent::Hello,
                b"TIME" => Sent::Time,
                b"ZADD" => {
                    check_fence_command(command, FenceCommand::ZaddGt);
                    Sent::ZaddGt
                }
                b"ZINCRBY" => {
                    check_fence_command(command, FenceCommand::Zincrby);
                    Sent::Zincrby
                }
                b"DELIFEQ" | b"DELEX" => Sent::DelIfEq,
                b"EVALSHA" => Sent::EvalSha,
                b"EVAL" => Sent::Eval,
                b"SCRIPT" => Sent::ScriptLoad,
                b"AUTH" | b"SELECT" => Sent::Handshake,
                _ => Sent::Other,
            };
            self.sent[node].push_back(kind);
            let key = if is_script(command, &EXTEND_SCRIPT) {
                key_of(command.get(3..5).expect("EVALSHA sha 1 key token ttl"))
            } else if kind == Sent::SetIfEq {
                key_of(command.get(1..3).expect("SET key token IFEQ token PX ttl"))
            } else {
                continue;
            };
            let op = *self
                .holders
                .get(&key)
                .unwrap_or_else(|| panic!("extension for a lock never acquired: {command:?}"));
            let info = &self.info[&op];
            if info.stopped {
                let queued_in_time = first_flush && last_release(&key).is_none_or(|r| pos < r);
                assert!(
                    queued_in_time,
                    "extension of {op} sent to node {node} after its release or loss"
                );
            }
        }
    }

    fn check_event(&mut self, event: &Event) {
        let now = self.now;
        // News of a node (the restart quarantine, the clock check: any `TIME` reply may
        // raise one), not of an operation.
        let Some(op) = event.op() else {
            return;
        };
        let info = self
            .info
            .get_mut(&op)
            .unwrap_or_else(|| panic!("event for an unknown operation: {event:?}"));
        assert!(
            !info.finished,
            "event after the operation finished: {event:?}"
        );
        match event {
            Event::Acquired(a) => {
                assert_eq!(info.answered, 0, "{op} answered twice");
                info.answered += 1;
                info.held = true;
                assert!(
                    a.validity <= info.max_validity,
                    "validity {:?} above ttl - drift {:?}",
                    a.validity,
                    info.max_validity
                );
                assert!(a.validity > info.min_validity, "validity below the minimum");
                assert!(a.deadline <= now + info.max_validity, "deadline too far");
                assert_eq!(
                    a.fencing_token.is_some(),
                    info.fenced,
                    "a fencing token on a lock not fenced, or none on a fenced one: {a:?}"
                );
            }
            Event::AcquireFailed { .. } => {
                assert_eq!(info.answered, 0, "{op} answered twice");
                info.answered += 1;
                info.finished = true;
            }
            Event::Extended {
                validity, deadline, ..
            } => {
                assert!(
                    info.held && !info.lost,
                    "extended a lock not held: {event:?}"
                );
                assert!(*validity <= info.max_validity, "extended validity too long");
                assert!(
                    *deadline <= now + info.max_validity,
                    "extended deadline too far"
                );
            }
            Event::Lost { .. } => {
                assert!(info.held && !info.lost, "lost a lock not held: {event:?}");
                info.lost = true;
            }
            Event::Released { .. } => {
                assert!(info.held, "released a lock never held: {event:?}");
                info.finished = true;
            }
            _ => {}
        }
    }

    /// Disconnects every node, lets time run in 1 s steps, and checks that every operation
    /// ended with exactly one answer.
    fn finish(&mut self) {
        for i in 0..self.n() {
            if self.links[i] != Link::Down {
                self.input(Input::Disconnected {
                    now: self.now,
                    conn: self.conns[i].expect("a node not down has a connection"),
                    reason: ConnectionError::Closed,
                });
            }
        }
        for _ in 0..100 {
            if self.client.active_ops() == 0 {
                break;
            }
            self.now += Duration::from_secs(1);
            self.timeout();
            for i in 0..self.n() {
                if self.links[i] == Link::Connecting {
                    self.input(Input::Disconnected {
                        now: self.now,
                        conn: self.conns[i].expect("a connecting node has a connection"),
                        reason: ConnectionError::Refused,
                    });
                }
            }
        }
        assert_eq!(
            self.client.active_ops(),
            0,
            "operations left after 100 s offline"
        );
        for op in &self.ops {
            assert_eq!(self.info[op].answered, 1, "{op} never answered");
        }
    }
}

/// Reads the six header bytes and the seed: the client's configuration, N, the flags byte
/// (bit 2: a strict driver), the RNG seed, and whether the config fences locks (bit 6 of
/// the caps byte).
fn read_config(s: &mut Script<'_>) -> (Config, usize, u8, u64, bool) {
    let n = 1 + usize::from(s.byte() % 7);
    let ttl = Duration::from_millis([100, 150, 300, 500, 1000][usize::from(s.byte() % 5)]);
    let flags = s.byte();
    let caps = s.byte();
    let retry_b = s.byte();
    let timing = s.byte();
    let seed = u64::from(s.byte());

    let max_reply = [64, 128, 256, 1024][usize::from(caps & 3)];
    // The restart quarantine (its `INFO` and `CONFIG GET` in every handshake) needs a read
    // buffer of 16 KiB; with it off, the small buffers reach the buffer-limit paths.
    let quarantine = timing & 0x40 != 0;
    let max_read_buffer = [256, 1024, 64, 4096][usize::from((caps >> 2) & 3)].max(max_reply);
    let max_read_buffer = if quarantine {
        max_read_buffer.max(16 * 1024)
    } else {
        max_read_buffer
    };
    let delay_min = Duration::from_millis(u64::from((retry_b >> 2) & 3) * 10) + MIN_RETRY_DELAY;
    let retry = RetryPolicy {
        max_attempts: Some(1 + u32::from(retry_b % 4)),
        max_wait: (retry_b & 0x40 != 0).then_some(ttl * 2),
        delay_min,
        delay_max: delay_min + Duration::from_millis(u64::from((retry_b >> 4) & 3) * 20),
    };
    let mut builder = Config::builder(n)
        .ttl(ttl)
        .retry(retry)
        .max_reply_size(max_reply)
        .max_read_buffer(max_read_buffer)
        .restart_quarantine(quarantine.then(RestartQuarantine::default))
        .preload_scripts(flags & 1 == 0)
        // Small caps reach the backlog path: requests past it fail unsent.
        .max_in_flight([1, 2, 4, 10_000][usize::from((caps >> 4) & 3)]);
    match timing & 3 {
        0 => {}
        1 => builder = builder.attempt_timeout(Duration::from_millis(1)),
        2 => builder = builder.attempt_timeout(ttl / 4),
        _ => builder = builder.attempt_timeout(ttl / 2),
    }
    if timing & 4 != 0 {
        builder = builder.min_validity(ttl / 2);
    }
    if timing & 8 != 0 {
        builder = builder.release_timeout(Duration::from_millis(5));
    }
    let backoff = Duration::from_millis(1 + u64::from((timing >> 4) & 3) * 10);
    builder = builder.reconnect_backoff(backoff, backoff * 8);
    if flags & 2 != 0 {
        builder = builder.auto_extend(Some(AutoExtend {
            renew_below: [0.2, 0.5, 0.9, 0.99][usize::from((flags >> 6) & 3)],
            max_renewals: (flags & 0x80 == 0).then_some(3),
            max_hold: Some(ttl * 5),
        }));
    }
    if flags & 8 != 0 {
        let settings = NodeSettings {
            password: Some("pw".into()),
            ..NodeSettings::default()
        };
        builder = builder.node(0, settings);
    }
    if flags & 0x10 != 0 {
        let settings = NodeSettings {
            username: Some("user".into()),
            password: Some("pw".into()),
            db: 3,
        };
        builder = builder.node(n - 1, settings);
    }
    if flags & 0x20 != 0 {
        builder = builder.quorum(n);
    }
    // Fenced locks by default; `acquire_with` may still say otherwise per lock.
    let fencing = caps & 0x40 != 0;
    builder = builder.fencing(Fencing {
        by_default: fencing,
        ..Fencing::default()
    });
    let config = builder.build().expect("the harness builds valid configs");
    (config, n, flags, seed, fencing)
}

/// Prints what the harness does when `FUZZ_TRACE` is set (to replay one input by hand).
fn trace(line: impl FnOnce() -> String) {
    static ON: OnceLock<bool> = OnceLock::new();
    if *ON.get_or_init(|| std::env::var_os("FUZZ_TRACE").is_some()) {
        eprintln!("{}", line());
    }
}

/// A fixed origin for virtual time (only differences matter).
fn origin() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

/// A disconnection's reason, from bits 3-5 of the step's node byte.
fn reason(b: u8) -> ConnectionError {
    match (b >> 3) & 7 {
        1 => ConnectionError::Refused,
        2 => ConnectionError::ConnectTimeout(Duration::from_millis(200)),
        3 => ConnectionError::Io("connection reset by peer".into()),
        4 => ConnectionError::Resolve("no such host".into()),
        _ => ConnectionError::Closed,
    }
}

fn resource(b: u8) -> Resource {
    match b % 5 {
        0 => Resource::from("a"),
        1 => Resource::from("b"),
        2 => Resource::from("c"),
        3 => Resource::new(&b"\r\n$-1\r\n\0"[..]),
        // Rejected with EmptyResource.
        _ => Resource::new(&b""[..]),
    }
}

/// One to four replies from a table of what nodes say (or might say).
fn reply_shaped(s: &mut Script<'_>) -> Vec<u8> {
    let count = 1 + usize::from(s.byte() % 4);
    let mut out = Vec::new();
    for _ in 0..count {
        let reply: &[u8] = match s.byte() % 27 {
            24 => TIME_REPLIES[usize::from(s.byte()) % TIME_REPLIES.len()],
            25 => ZINCRBY_REPLIES[usize::from(s.byte()) % ZINCRBY_REPLIES.len()],
            26 => ZADD_REPLIES[usize::from(s.byte()) % ZADD_REPLIES.len()],
            14..=19 => HELLO_REPLIES[usize::from(s.byte()) % HELLO_REPLIES.len()],
            20 => UNKNOWN_DELIFEQ,
            21 => b"-ERR syntax error\r\n",
            22 => WRONGTYPE,
            23 => b"-ERR unknown command 'DELEX', with args beginning with: 'a' 'IFEQ' 'x' \r\n",
            0 => b"+OK\r\n",
            1 => b"$-1\r\n",
            2 => b":1\r\n",
            3 => b":0\r\n",
            4 => b":-1\r\n",
            5 => b"-NOSCRIPT No matching script. Please use EVAL.\r\n",
            6 => b"-ERR x\r\n",
            7 => b"$40\r\n63a5d32a929e2ae5edfa6ed689e1ed3702d55f56\r\n",
            8 => b"$40\r\n3c47f94dc28d90f47ce03eabe2ebe59e85e54bf1\r\n",
            9 => b"-READONLY You can't write against a read only replica.\r\n",
            10 => b":2\r\n",
            11 => b"+QUEUED\r\n",
            12 => b"$3\r\nabc\r\n",
            _ => b"-WRONGPASS invalid username-password pair\r\n",
        };
        out.extend_from_slice(reply);
    }
    out
}

/// A reply to a command of `kind`: mostly the success reply, else a refusal or an error.
/// The fencing commands' replies are picked from their own tables (numbers, some equal so
/// that counters agree, some apart so that the write-back runs; nil; errors; junk).
fn reply_for(kind: Sent, mode: u8) -> &'static [u8] {
    let pick = |table: &[&'static [u8]]| table[usize::from(mode) % table.len()];
    match kind {
        Sent::FencedAcquire => return pick(&FENCED_REPLIES),
        Sent::RaiseFence => return pick(&RAISE_REPLIES),
        Sent::Time => return pick(&TIME_REPLIES),
        Sent::ZaddGt => return pick(&ZADD_REPLIES),
        Sent::Zincrby => return pick(&ZINCRBY_REPLIES),
        _ => {}
    }
    if !mode.is_multiple_of(4) {
        return match kind {
            Sent::Set | Sent::Handshake | Sent::Other => b"+OK\r\n",
            Sent::EvalSha | Sent::Eval => b":1\r\n",
            Sent::ScriptLoad => b"$40\r\n3c47f94dc28d90f47ce03eabe2ebe59e85e54bf1\r\n",
            Sent::Hello => HELLO_REPLIES[usize::from(mode >> 2) % 4],
            Sent::DelIfEq => b":1\r\n",
            Sent::SetIfEq
            | Sent::FencedAcquire
            | Sent::RaiseFence
            | Sent::Time
            | Sent::ZaddGt
            | Sent::Zincrby => b"+OK\r\n",
        };
    }
    match (kind, (mode >> 2) % 4) {
        (Sent::Set, 0) => b"$-1\r\n",
        (Sent::Set, 1) => b"-READONLY You can't write against a read only replica.\r\n",
        (Sent::Set, 2) => b"+QUEUED\r\n",
        (Sent::EvalSha | Sent::Eval, 0) => b"-NOSCRIPT No matching script. Please use EVAL.\r\n",
        (Sent::EvalSha | Sent::Eval, 1) => b":0\r\n",
        (Sent::EvalSha | Sent::Eval, 2) => b":-1\r\n",
        (Sent::Handshake, 0) => b"-WRONGPASS invalid username-password pair\r\n",
        (Sent::Hello, m) => HELLO_REPLIES[4 + usize::from(m)],
        (Sent::DelIfEq, 0) => b":0\r\n",
        (Sent::DelIfEq, 1) => UNKNOWN_DELIFEQ,
        (Sent::DelIfEq, 2) => WRONGTYPE,
        (Sent::SetIfEq, 0) => b"$-1\r\n",
        (Sent::SetIfEq, 1) => b"-ERR syntax error\r\n",
        (Sent::SetIfEq, 2) => WRONGTYPE,
        _ => b"-ERR x\r\n",
    }
}

/// What the model decoder makes of the start of a node's unread bytes.
enum Scan {
    Complete(usize),
    Incomplete,
    Invalid,
}

/// An independent reading (the test kit's RESP2 parser, not the core's) of one reply of the
/// kinds the client accepts: arrays only in answer to `HELLO` and `TIME` (`array`).
fn scan_reply(buf: &[u8], array: bool) -> Scan {
    match resp::parse_reply(buf) {
        Ok(Some((Reply::Array(_), len))) if array => Scan::Complete(len),
        Ok(Some((Reply::Array(_), _))) | Err(_) => Scan::Invalid,
        Ok(Some((_, len))) => Scan::Complete(len),
        Ok(None) => Scan::Incomplete,
    }
}

/// Splits our own RESP output into commands (arrays of bulk strings) with the test kit's
/// parser; anything else, or a command cut short, is a bug.
fn parse_commands(mut bytes: &[u8]) -> Vec<Vec<&[u8]>> {
    let mut commands = Vec::new();
    while !bytes.is_empty() {
        let command = resp::parse_command(bytes)
            .expect("the client sends well-formed commands")
            .expect("transmit ends inside a command");
        let args: Vec<&[u8]> = command.args(bytes).collect();
        assert!(!args.is_empty(), "empty command");
        commands.push(args);
        bytes = &bytes[command.frame_len()..];
    }
    commands
}

/// Whether a `SET` is the native extension `SET key token IFEQ token PX ttl`.
fn is_native_extend(command: &[&[u8]]) -> bool {
    command.get(3) == Some(&&b"IFEQ"[..])
}

/// `HELLO` replies: four servers' (Valkey 9.1 with its nested module list, Redis 7.0, Redis
/// 8.4, Valkey 8.1), then refusals and odd shapes (truncated, nested deep, garbage inside,
/// not an array, no version), each whole.
const HELLO_REPLIES: [&[u8]; 10] = [
    b"*14\r\n$6\r\nserver\r\n$6\r\nvalkey\r\n$7\r\nversion\r\n$5\r\n9.1.2\r\n$5\r\nproto\r\n:2\r\n$2\r\nid\r\n:3\r\n$4\r\nmode\r\n$10\r\nstandalone\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$7\r\nmodules\r\n*1\r\n*8\r\n$4\r\nname\r\n$3\r\nlua\r\n$3\r\nver\r\n:1\r\n$4\r\npath\r\n$3\r\nlua\r\n$4\r\nargs\r\n*0\r\n",
    b"*14\r\n$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n$6\r\n7.0.15\r\n$5\r\nproto\r\n:2\r\n$2\r\nid\r\n:3\r\n$4\r\nmode\r\n$10\r\nstandalone\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$7\r\nmodules\r\n*0\r\n",
    b"*4\r\n$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n+8.4.0\r\n",
    b"*4\r\n$7\r\nversion\r\n$5\r\n8.1.4\r\n$6\r\nserver\r\n$6\r\nvalkey\r\n",
    b"-NOPERM User default has no permissions to run the 'hello' command\r\n",
    b"-ERR unknown command 'HELLO', with args beginning with: \r\n",
    b"*4\r\n$6\r\nserver\r\n$6\r\nvalkey\r\n*1\r\n*1\r\n*1\r\n*1\r\n:9\r\n",
    b"*2\r\n$6\r\nserver\r\n%1\r\n",
    b"+OK\r\n",
    b"*3\r\n$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n",
];

/// Replies to a fenced acquire: counters (mostly small and close, so that nodes agree or
/// are one apart; the floor of one second; past 2^53 and at `i64::MAX`; zero and negative),
/// nil (the key is held), errors, and replies of the wrong type.
const FENCED_REPLIES: [&[u8]; 18] = [
    b":5\r\n",
    b":5\r\n",
    b":5\r\n",
    b":6\r\n",
    b":7\r\n",
    b":1048576\r\n",
    b":9007199254740993\r\n",
    b":9223372036854775807\r\n",
    b":0\r\n",
    b":-1\r\n",
    b"$-1\r\n",
    b"$-1\r\n",
    b"-NOSCRIPT No matching script. Please use EVAL.\r\n",
    b"-NOPERM this user has no permissions to run the 'evalsha' command\r\n",
    WRONGTYPE,
    b"+OK\r\n",
    b"$1\r\n5\r\n",
    b"$3\r\nabc\r\n",
];

/// Replies to a fence write-back: raised (1), no longer ours (0), and what a node should
/// not say.
const RAISE_REPLIES: [&[u8]; 10] = [
    b":1\r\n",
    b":1\r\n",
    b":1\r\n",
    b":0\r\n",
    b":-1\r\n",
    b":2\r\n",
    b"$-1\r\n",
    b"-NOSCRIPT No matching script. Please use EVAL.\r\n",
    b"-NOPERM this user has no permissions to run the 'eval' command\r\n",
    b"+OK\r\n",
];

/// Replies to `TIME`: a real clock's (Redis 7.0.15 and Valkey 9.1.2 answer seconds and
/// microseconds as bulk strings), the epoch, then refusals (an ACL), and junk (negative,
/// past `u64`, not digits, short, integers, nil, not an array).
const TIME_REPLIES: [&[u8]; 12] = [
    b"*2\r\n$10\r\n1795634123\r\n$6\r\n500000\r\n",
    b"*2\r\n$10\r\n1795634123\r\n$6\r\n999999\r\n",
    b"*2\r\n$10\r\n1795634124\r\n$1\r\n0\r\n",
    b"*2\r\n$1\r\n0\r\n$1\r\n0\r\n",
    b"-NOPERM User default has no permissions to run the 'time' command\r\n",
    b"*2\r\n$2\r\n-1\r\n$1\r\n0\r\n",
    b"*2\r\n$20\r\n99999999999999999999\r\n$1\r\n0\r\n",
    b"*2\r\n$3\r\nabc\r\n$3\r\n1.5\r\n",
    b"*1\r\n$10\r\n1795634123\r\n",
    b"*2\r\n:1795634123\r\n:0\r\n",
    b"*-1\r\n",
    b":1795634123\r\n",
];

/// Replies to `ZADD F GT floor n`: added (1) or not (0), then a server without `GT`
/// (`ERR syntax error`), a counter of the wrong type, an ACL, and what it should not say.
const ZADD_REPLIES: [&[u8]; 9] = [
    b":1\r\n",
    b":0\r\n",
    b":0\r\n",
    b"-ERR syntax error\r\n",
    WRONGTYPE,
    b"-NOPERM User default has no permissions to run the 'zadd' command\r\n",
    b"$-1\r\n",
    b"+OK\r\n",
    b":2\r\n",
];

/// Replies to `ZINCRBY F 1 n`: scores as the servers print them (plain digits below 2^53,
/// mostly near one second's floor and close, so that nodes agree or are one apart), then
/// junk scores (`1e400`, `nan`, `inf`, `-1`, `1.5`, past 2^53 and `u64`, empty, spaced),
/// nil, errors, and other types.
const ZINCRBY_REPLIES: [&[u8]; 22] = [
    b"$16\r\n1882849641776001\r\n",
    b"$16\r\n1882849641776001\r\n",
    b"$16\r\n1882849641776002\r\n",
    b"$16\r\n1882849642824577\r\n",
    b"$1\r\n1\r\n",
    b"$5\r\n1e400\r\n",
    b"$3\r\nnan\r\n",
    b"$3\r\ninf\r\n",
    b"$2\r\n-1\r\n",
    b"$1\r\n0\r\n",
    b"$3\r\n1.5\r\n",
    b"$16\r\n9007199254740993\r\n",
    b"$20\r\n18446744073709551616\r\n",
    b"$21\r\n1.8828496417760010e15\r\n",
    b"$0\r\n\r\n",
    b"$3\r\n 12\r\n",
    b"$-1\r\n",
    WRONGTYPE,
    b"-ERR resulting score is not a number (NaN)\r\n",
    b"-NOPERM User default has no permissions to run the 'zincrby' command\r\n",
    b":1882849641776001\r\n",
    b"+OK\r\n",
];

const UNKNOWN_DELIFEQ: &[u8] =
    b"-ERR unknown command 'DELIFEQ', with args beginning with: 'a' 'x' \r\n";
const WRONGTYPE: &[u8] = b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";

/// Whether a command runs `script` (`EVALSHA sha ...` or `EVAL body ...`).
fn is_script(command: &[&[u8]], script: &redlock_core::Script) -> bool {
    match (command.first(), command.get(1)) {
        (Some(&b"EVALSHA"), Some(sha)) => *sha == script.sha1.as_bytes(),
        (Some(&b"EVAL"), Some(body)) => *body == script.body.as_bytes(),
        _ => false,
    }
}

/// A fence write-back (`EVALSHA sha 2 K F token n`) raises F, the lock key's counter, to a
/// number some node answered: a positive integer.
fn check_raise(command: &[&[u8]]) {
    let [_, _, numkeys, key, fence, _, n] = command else {
        panic!("a write-back with {} arguments", command.len());
    };
    assert_eq!(*numkeys, b"2", "the write-back names K and F");
    assert!(fence.starts_with(key), "F is derived from K: {command:?}");
    let n = std::str::from_utf8(n)
        .ok()
        .and_then(|n| n.parse::<u64>().ok());
    assert!(
        n.is_some_and(|n| n > 0),
        "the write-back's number: {command:?}"
    );
}

/// One of the script-free fence's commands on F.
#[derive(Clone, Copy, PartialEq, Eq)]
enum FenceCommand {
    /// `ZADD F GT floor n`.
    ZaddGt,
    /// `ZINCRBY F 1 n`.
    Zincrby,
}

/// A script-free fence command has the protocol's shape: `ZADD F GT floor n` with a floor of
/// whole seconds (a multiple of 2^20 below 2^53), or `ZINCRBY F 1 n`.
fn check_fence_command(command: &[&[u8]], which: FenceCommand) {
    match (which, command) {
        (FenceCommand::ZaddGt, [_, _, b"GT", floor, b"n"]) => {
            let floor = std::str::from_utf8(floor)
                .ok()
                .and_then(|n| n.parse::<u64>().ok());
            assert!(
                floor.is_some_and(|f| f % (1 << 20) == 0 && f < 1 << 53),
                "the floor of a whole second: {command:?}"
            );
        }
        (FenceCommand::Zincrby, [_, _, b"1", b"n"]) => {}
        _ => panic!("not the protocol's fence command: {command:?}"),
    }
}

/// (resource, token) from a script call's key and token arguments.
fn key_of(args: &[&[u8]]) -> (Vec<u8>, Vec<u8>) {
    (args[0].to_vec(), args[1].to_vec())
}

/// Shortest retry delay the harness configures. Zero is valid and covered: it once made an
/// extension that failed at once (every node down) retry in the same instant forever, so
/// the lock was never reported lost; the core now waits at least 1 ms between attempts.
const MIN_RETRY_DELAY: Duration = Duration::ZERO;

/// Steps per input, so that one run stays fast whatever libFuzzer's `-max_len`.
const MAX_STEPS: usize = 2_000;
