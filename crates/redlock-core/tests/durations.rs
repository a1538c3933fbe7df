//! Every `Duration` the public configuration API takes, at 0, 1 ns and `Duration::MAX`
//! (a review's finding): each value is either refused by `build()` (or, per lock, by `acquire_with`)
//! with an error naming its field, or accepted and then driven without a panic through a
//! connection, a lock (with a contended first attempt, so that a retry follows), a
//! disconnection with 70 failed reconnects, a release and a second lock.
//!
//! The setters: `ConfigBuilder` (`ttl`, `drift_floor`, `attempt_timeout`, `release_timeout`,
//! `min_validity`, `reconnect_backoff`, `notification_jitter` (with release notifications
//! on), `restart_quarantine_ttl` (with the quarantine on), and the durations inside `retry`
//! and `auto_extend`) and `LockOptions` (`ttl`, `max_wait`, `retry`, `auto_extend`).
//! `NodeSettings` has none. `every_duration_setter_has_a_row` reads the sources for them,
//! so a new one without a row fails.

mod support;

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant};

use chacha20::ChaCha20Rng;
use redlock_core::{
    AutoExtend, Client, Config, ConfigBuilder, ConnId, ConnectionError, Event, Input, LockOptions,
    MAX_RECONNECT_BACKOFF, NodeId, OpId, Output, ReleaseNotifications, Resource, RestartQuarantine,
    RetryPolicy, UsageError,
};

const NS: Duration = Duration::from_nanos(1);
const VALUES: [Duration; 3] = [Duration::ZERO, NS, Duration::MAX];
const NODES: usize = 3;
/// Failed reconnects in a row after the forced disconnection: past the ~64 doublings that
/// overflowed a backoff of (1 s, `Duration::MAX`).
const FAILED_RECONNECTS: u32 = 70;

/// What a value must lead to.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Expect {
    /// Accepted, and the scenario runs to its end.
    Works,
    /// Refused, by an error naming this field.
    Refused(&'static str),
}
use Expect::{Refused, Works};

/// One setter: how the value is applied, and what each of 0, 1 ns and MAX must do.
struct Row {
    setter: &'static str,
    config: fn(ConfigBuilder, Duration) -> ConfigBuilder,
    options: fn(&Config, Duration) -> LockOptions,
    expect: [Expect; 3],
}

fn same(b: ConfigBuilder, _: Duration) -> ConfigBuilder {
    b
}

fn none(_: &Config, _: Duration) -> LockOptions {
    LockOptions::default()
}

fn retry_with(f: impl FnOnce(&mut RetryPolicy)) -> RetryPolicy {
    let mut retry = RetryPolicy::default();
    f(&mut retry);
    retry
}

fn auto_extend(max_hold: Duration) -> Option<AutoExtend> {
    Some(AutoExtend {
        max_hold: Some(max_hold),
        ..AutoExtend::default()
    })
}

fn rows() -> Vec<Row> {
    let row = |setter, config, options, expect| Row {
        setter,
        config,
        options,
        expect,
    };
    vec![
        row("ttl", |b, d| b.ttl(d), none, [Refused("ttl"); 3]),
        row(
            "drift_floor",
            |b, d| b.drift_floor(d),
            none,
            [Works, Works, Refused("drift_floor")],
        ),
        row(
            "attempt_timeout",
            |b, d| b.attempt_timeout(d),
            none,
            [
                Refused("attempt_timeout"),
                Works,
                Refused("attempt_timeout"),
            ],
        ),
        row(
            "release_timeout",
            |b, d| b.release_timeout(d),
            none,
            [Refused("release_timeout"), Works, Works],
        ),
        row(
            "min_validity",
            |b, d| b.min_validity(d),
            none,
            [Works, Works, Refused("min_validity")],
        ),
        row(
            "reconnect_backoff(d, d)",
            |b, d| b.reconnect_backoff(d, d),
            none,
            [
                Refused("reconnect_backoff"),
                Works,
                Refused("reconnect_backoff"),
            ],
        ),
        row(
            "reconnect_backoff(1 ns, d)",
            |b, d| b.reconnect_backoff(NS, d),
            none,
            [
                Refused("reconnect_backoff"),
                Works,
                Refused("reconnect_backoff"),
            ],
        ),
        row(
            "reconnect_backoff(d, MAX_RECONNECT_BACKOFF)",
            |b, d| b.reconnect_backoff(d, MAX_RECONNECT_BACKOFF),
            none,
            [
                Refused("reconnect_backoff"),
                Works,
                Refused("reconnect_backoff"),
            ],
        ),
        row(
            "reconnect_backoff(1 s, d)",
            |b, d| b.reconnect_backoff(Duration::from_secs(1), d),
            none,
            [Refused("reconnect_backoff"); 3],
        ),
        row(
            "retry.max_wait",
            |b, d| b.retry(retry_with(|r| r.max_wait = Some(d))),
            none,
            [Works; 3],
        ),
        row(
            "retry.max_wait (no attempt bound)",
            |b, d| {
                b.retry(retry_with(|r| {
                    r.max_attempts = None;
                    r.max_wait = Some(d);
                }))
            },
            none,
            [Works; 3],
        ),
        row(
            "retry.delay_min and delay_max",
            |b, d| {
                b.retry(retry_with(|r| {
                    r.delay_min = d;
                    r.delay_max = d;
                }))
            },
            none,
            [Works; 3],
        ),
        row(
            "retry.delay_max",
            |b, d| {
                b.retry(retry_with(|r| {
                    (r.delay_min, r.delay_max) = (Duration::ZERO, d)
                }))
            },
            none,
            [Works; 3],
        ),
        row(
            "auto_extend.max_hold",
            |b, d| b.auto_extend(auto_extend(d)),
            none,
            [Works; 3],
        ),
        row(
            "release_notifications.jitter",
            |b, d| b.release_notifications(Some(ReleaseNotifications { jitter: d })),
            none,
            [Works; 3],
        ),
        row(
            "restart_quarantine.ttl",
            |b, d| {
                b.restart_quarantine(Some(RestartQuarantine {
                    ttl: Some(d),
                    ..RestartQuarantine::default()
                }))
            },
            none,
            [
                Refused("restart_quarantine.ttl"),
                Works,
                Refused("restart_quarantine.ttl"),
            ],
        ),
        row(
            "LockOptions::ttl",
            same,
            |_, d| LockOptions::default().ttl(d),
            [Refused("ttl"); 3],
        ),
        row(
            "LockOptions::max_wait",
            same,
            |c, d| LockOptions::default().max_wait(c, d),
            [Works; 3],
        ),
        row(
            "LockOptions::retry delays",
            same,
            |_, d| {
                LockOptions::default().retry(retry_with(|r| {
                    r.delay_min = d;
                    r.delay_max = d;
                    r.max_wait = Some(d);
                }))
            },
            [Works; 3],
        ),
        row(
            "LockOptions::auto_extend max_hold",
            same,
            |_, d| LockOptions::default().auto_extend(auto_extend(d)),
            [Works; 3],
        ),
    ]
}

#[test]
fn every_duration_is_refused_by_name_or_works() {
    let mut failures = Vec::new();
    for row in rows() {
        for (value, expect) in VALUES.into_iter().zip(row.expect) {
            let case = format!("{} = {value:?}", row.setter);
            let outcome = catch_unwind(AssertUnwindSafe(|| run(&row, value)));
            match outcome {
                Ok(got) if got == expect => {}
                Ok(got) => failures.push(format!("{case}: expected {expect:?}, got {got:?}")),
                Err(panic) => {
                    let msg = panic
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default();
                    failures.push(format!("{case}: panicked: {msg}"));
                }
            }
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

/// Every public `Duration` the configuration API takes has a row above, so the next setter
/// is not missed: the setters are read from the source (`ConfigBuilder` in config/builder.rs
/// and `LockOptions` in options.rs: each `pub fn` taking `mut self` whose signature names
/// `Duration`), and so are the `Duration` fields of `RetryPolicy` and `AutoExtend`
/// (policy.rs), which `retry` and `auto_extend` carry, and of the features' settings
/// (config/subsystems.rs), which their setters of the same names carry.
#[test]
fn every_duration_setter_has_a_row() {
    let src = |file: &str| {
        let path = format!("{}/src/{file}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    };
    let (config, options, policy) = (
        src("config/builder.rs"),
        src("options.rs"),
        src("policy.rs"),
    );
    let subsystems = src("config/subsystems.rs");
    let setters = duration_setters(&config);
    for known in [
        "ttl",
        "attempt_timeout",
        "release_timeout",
        "reconnect_backoff",
    ] {
        assert!(setters.contains(&known.to_owned()), "parsed {setters:?}");
    }
    let mut wanted: Vec<String> = setters;
    wanted.extend((duration_setters(&options).iter()).map(|s| format!("LockOptions::{s}")));
    for (src, strukt, prefix) in [
        (&policy, "RetryPolicy", "retry."),
        (&policy, "AutoExtend", "auto_extend."),
        (&subsystems, "RestartQuarantine", "restart_quarantine."),
        (
            &subsystems,
            "ReleaseNotifications",
            "release_notifications.",
        ),
    ] {
        let fields = duration_fields(src, strukt);
        assert!(!fields.is_empty(), "no Duration field parsed in {strukt}");
        wanted.extend(fields.iter().map(|f| format!("{prefix}{f}")));
    }
    let rows: Vec<&str> = rows().iter().map(|r| r.setter).collect();
    let covered = |want: &str| {
        rows.iter().any(|row| {
            // `reconnect_backoff(d, d)` covers `reconnect_backoff`; `retry.delay_min and
            // delay_max` covers `retry.delay_min` and `retry.delay_max`.
            let (head, field) = want.rsplit_once('.').unwrap_or(("", want));
            match head.is_empty() {
                true => row.split(['(', ' ']).next() == Some(want),
                false => {
                    row.starts_with(&format!("{head}."))
                        && row.split([' ', '.']).any(|word| word == field)
                }
            }
        })
    };
    let missing: Vec<&String> = wanted.iter().filter(|w| !covered(w)).collect();
    assert!(
        missing.is_empty(),
        "Duration setters without a row in rows(): {missing:?} (rows: {rows:?})"
    );
}

/// The names of `src`'s `pub fn name(mut self, ...)` whose signature (up to its `{`) names
/// `Duration`.
fn duration_setters(src: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = src;
    while let Some(at) = rest.find("pub fn ") {
        rest = &rest[at + "pub fn ".len()..];
        let signature = &rest[..rest.find('{').unwrap_or(rest.len())];
        let name: String = (signature.chars())
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        let params = signature.split_once("-> ").map_or(signature, |(p, _)| p);
        if params.contains("mut self") && params.contains("Duration") {
            names.push(name);
        }
    }
    names
}

/// The `pub` fields of `pub struct strukt` in `src` whose type names `Duration`.
fn duration_fields(src: &str, strukt: &str) -> Vec<String> {
    let start = src
        .find(&format!("pub struct {strukt} {{"))
        .unwrap_or_else(|| panic!("no struct {strukt}"));
    let body = &src[start..];
    let body = &body[..body.find("\n}").unwrap_or(body.len())];
    (body.lines())
        .filter_map(|line| line.trim().strip_prefix("pub ")?.split_once(':'))
        .filter(|(_, ty)| ty.contains("Duration"))
        .map(|(name, _)| name.trim().to_owned())
        .collect()
}

/// Builds the config and the lock options with `value`, then runs the scenario.
fn run(row: &Row, value: Duration) -> Expect {
    let builder = (row.config)(support::builder(NODES), value);
    let config = match builder.build() {
        Ok(config) => config,
        Err(e) => return Refused(e.field()),
    };
    let options = (row.options)(&config, value);
    let mut world = World::new(config);
    world.run_until("every node up", |w| w.all_up());

    // A lock whose first attempt meets another holder on every node, so that it retries.
    world.nil_sets = NODES;
    let op = match world.acquire(&options) {
        Ok(op) => op,
        Err(UsageError::InvalidOption(e)) => return Refused(e.field()),
        Err(e) => panic!("acquire refused: {e}"),
    };
    world.run_until("the first lock's outcome", |w| w.decided(op));

    // Node 0 drops; its next reconnects fail, then one succeeds.
    world.refuse_connects = FAILED_RECONNECTS;
    let conn = world
        .client
        .connection(NodeId::new(0))
        .expect("node 0 is up");
    world.feed(Input::Disconnected {
        now: world.now,
        conn,
        reason: ConnectionError::Closed,
    });
    world.run_until("node 0 reconnected", |w| {
        w.refuse_connects == 0 && w.client.is_up(NodeId::new(0))
    });
    world.release_if_held(op);

    // The client still works: a second lock, released at once if it is held.
    let second = world.acquire(&options).expect("options accepted before");
    world.run_until("the second lock's outcome", |w| w.decided(second));
    world.release_if_held(second);
    world.run_until("no operation left", |w| w.client.active_ops() == 0);
    Works
}

/// A client on virtual time with 3 nodes that agree to everything, 1 ms away.
struct World {
    client: Client<ChaCha20Rng>,
    now: Instant,
    deadline: Option<Instant>,
    /// Inputs to feed, in order, each 1 ms after the one before.
    pending: VecDeque<Pending>,
    events: Vec<Event>,
    /// `SET`s to answer with nil (key held by another client), first come first served.
    nil_sets: usize,
    /// Connection attempts to node 0 to fail before one succeeds.
    refuse_connects: u32,
}

#[derive(Debug)]
enum Pending {
    Connect(ConnId),
    Refuse(ConnId),
    Reply(ConnId, Vec<u8>),
}

impl World {
    fn new(config: Config) -> Self {
        let support::Harness { client, now } = support::Harness::new(config);
        let mut world = Self {
            client,
            now,
            deadline: None,
            pending: VecDeque::new(),
            events: Vec::new(),
            nil_sets: 0,
            refuse_connects: 0,
        };
        world.drain();
        world
    }

    fn acquire(&mut self, options: &LockOptions) -> Result<OpId, UsageError> {
        self.drain();
        let op = self
            .client
            .acquire_with(self.now, Resource::from("res"), options);
        self.drain();
        op
    }

    fn release_if_held(&mut self, op: OpId) {
        if self.client.held(op).is_some() {
            self.client
                .release(self.now, op)
                .expect("held lock released");
            self.drain();
            self.run_until("the release", |w| {
                w.events
                    .iter()
                    .any(|e| matches!(e, Event::Released { op: o, .. } if *o == op))
            });
        }
    }

    fn all_up(&self) -> bool {
        (0..NODES).all(|i| self.client.is_up(NodeId::new(i)))
    }

    fn decided(&self, op: OpId) -> bool {
        self.events.iter().any(|e| match e {
            Event::Acquired(a) => a.op == op,
            Event::AcquireFailed { op: o, .. } => *o == op,
            _ => false,
        })
    }

    /// Feeds inputs (or fires the earliest deadline) until `done`, within a step budget.
    fn run_until(&mut self, what: &str, done: impl Fn(&Self) -> bool) {
        for _ in 0..20_000 {
            if done(self) {
                return;
            }
            let next = self.now + Duration::from_millis(1);
            match self.deadline {
                Some(at) if at <= next || self.pending.is_empty() => {
                    self.now = self.now.max(at);
                    self.feed(Input::Timeout(self.now));
                }
                _ => {
                    let Some(input) = self.pending.pop_front() else {
                        panic!("idle before {what}");
                    };
                    self.now = next;
                    match input {
                        Pending::Connect(conn) => self.feed(Input::Connected {
                            now: self.now,
                            conn,
                        }),
                        Pending::Refuse(conn) => self.feed(Input::Disconnected {
                            now: self.now,
                            conn,
                            reason: ConnectionError::Refused,
                        }),
                        Pending::Reply(conn, bytes) => {
                            self.client
                                .handle_input(Input::Received {
                                    now: self.now,
                                    conn,
                                    bytes: &bytes,
                                })
                                .expect("input accepted");
                            self.drain();
                        }
                    }
                }
            }
        }
        panic!("no {what} within the step budget");
    }

    fn feed(&mut self, input: Input<'_>) {
        if let Input::Disconnected { conn, .. } = input {
            // Bytes from the closed connection are never fed.
            self.forget_replies(conn);
        }
        self.client.handle_input(input).expect("input accepted");
        self.drain();
    }

    fn forget_replies(&mut self, conn: ConnId) {
        self.pending
            .retain(|p| !matches!(p, Pending::Reply(c, _) if *c == conn));
    }

    fn drain(&mut self) {
        self.deadline = None;
        for _ in 0..100_000 {
            match self.client.poll_output() {
                Output::Transmit(t) => {
                    let reply = self.answer(&t.bytes);
                    // The client writes only to an up node: its current connection.
                    let conn = self
                        .client
                        .connection(t.node)
                        .expect("a transmit's node is up");
                    self.pending.push_back(Pending::Reply(conn, reply));
                }
                Output::Connect(conn) => {
                    if conn.node().index() == 0 && self.refuse_connects > 0 {
                        self.refuse_connects -= 1;
                        self.pending.push_back(Pending::Refuse(conn));
                    } else {
                        self.pending.push_back(Pending::Connect(conn));
                    }
                }
                Output::Disconnect(conn) => self.forget_replies(conn),
                Output::Event(e) => self.events.push(e),
                Output::Timeout(at) => {
                    self.deadline = Some(at);
                    return;
                }
                Output::Idle => return,
            }
        }
        panic!("drain did not end");
    }

    /// The replies of an agreeing node to every command in `bytes`.
    fn answer(&mut self, mut bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        while !bytes.is_empty() {
            let name = next_command(&mut bytes);
            let reply: &[u8] = match name.as_slice() {
                b"SET" if self.nil_sets > 0 => {
                    self.nil_sets -= 1;
                    b"$-1\r\n"
                }
                b"SET" | b"AUTH" | b"SELECT" => b"+OK\r\n",
                b"EVALSHA" | b"EVAL" => b":1\r\n",
                b"SCRIPT" => b"$40\r\n0000000000000000000000000000000000000000\r\n",
                // A Redis 7: a release sent before its HELLO reply is read probes DELIFEQ,
                // which it does not know, and is resent as the script.
                b"DELIFEQ" => b"-ERR unknown command 'DELIFEQ'\r\n",
                // The announcement that rides with a native release: nobody listens.
                b"PUBLISH" => b":0\r\n",
                // A Redis 7: releases and extensions go out as scripts.
                b"HELLO" => {
                    b"*4\r\n$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n$6\r\n7.0.15\r\n"
                }
                b"TIME" => b"*2\r\n$10\r\n1795190400\r\n$1\r\n0\r\n",
                // How long another holder's key lives (a waiter with notifications on
                // times its next attempt by it).
                b"PTTL" => b":100\r\n",
                // The restart quarantine's questions: an old node (a day up) that does not
                // sync every write.
                b"INFO" => b"$47\r\n# Server\r\nrun_id:abc\r\nuptime_in_seconds:86400\r\n\r\n",
                b"CONFIG" => {
                    b"*4\r\n$10\r\nappendonly\r\n$2\r\nno\r\n$11\r\nappendfsync\r\n$8\r\neverysec\r\n"
                }
                other => panic!("unexpected command {}", String::from_utf8_lossy(other)),
            };
            out.extend_from_slice(reply);
        }
        out
    }
}

/// Reads one RESP command (an array of bulk strings) off the front of `bytes` and returns
/// its name. The client writes whole commands, so a transmit never ends in the middle of one.
fn next_command(bytes: &mut &[u8]) -> Vec<u8> {
    let count = header(bytes, b'*');
    let mut name = Vec::new();
    for i in 0..count {
        let len = header(bytes, b'$');
        if i == 0 {
            name = bytes[..len].to_vec();
        }
        *bytes = &bytes[len + 2..];
    }
    name
}

/// Reads `<kind><decimal>\r\n`.
fn header(bytes: &mut &[u8], kind: u8) -> usize {
    assert_eq!(bytes[0], kind, "malformed command");
    let end = bytes
        .windows(2)
        .position(|w| w == b"\r\n")
        .expect("header line");
    let n = std::str::from_utf8(&bytes[1..end])
        .expect("digits")
        .parse()
        .expect("a length");
    *bytes = &bytes[end + 2..];
    n
}
