//! Tests that need the client's internals: the timer queue's size and each node's FIFO of
//! requests in flight. Everything else is tested through the public API in `tests/`.

use std::time::{Duration, Instant};

use chacha20::ChaCha20Rng;
use rand_core::SeedableRng;

use super::*;
use crate::id::NodeName;
use crate::io::{AcquireOutcome, Acquired, NodeOutcome, ReleaseOutcome};
use crate::options::LockOptions;
use crate::policy::AutoExtend;
use crate::token::Resource;

const HOUR: Duration = Duration::from_secs(3600);
const MS: Duration = Duration::from_millis(1);

/// A Redis 7 server's `HELLO` reply (RESP2), trimmed to the fields the client reads.
const REDIS_7_HELLO: &[u8] =
    b"*4\r\n$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n$6\r\n7.0.15\r\n";

/// A `TIME` reply: 2026-11-25, 16:00 UTC.
const NODE_TIME: &[u8] = b"*2\r\n$10\r\n1795190400\r\n$6\r\n000017\r\n";

/// An `INFO server` reply of a node up for a day, and a `CONFIG GET append*` reply without
/// persistence: no quarantine.
/// `INFO server` and `CONFIG GET` of node `i`, up for a day (no quarantine); each node its
/// own run id (the same one twice would be one server named twice).
fn old_node_info(i: usize) -> Vec<u8> {
    format!(
        "$37\r\nrun_id:ab{}\r\nuptime_in_seconds:86400\r\n\r\n*0\r\n",
        i % 10
    )
    .into_bytes()
}

/// A client on virtual time, connected to every node, with its preloads answered.
struct Rig {
    client: Client<ChaCha20Rng>,
    now: Instant,
}

impl Rig {
    fn connected(config: Config) -> Self {
        let n = config.nodes();
        let mut rig = Self {
            client: Client::new(config, ChaCha20Rng::seed_from_u64(3)),
            now: crate::test_epoch::epoch(),
        };
        rig.drain();
        for i in 0..n {
            let conn = rig.conn(i);
            rig.input(Input::Connected { now: rig.now, conn });
            // HELLO (a Redis 7: scripts), TIME, INFO and CONFIG GET (an old node, with the
            // restart quarantine on), then the SCRIPT LOAD replies (release and extend, and
            // the waiters' queue's three with the queue on), which are not read.
            rig.reply(i, REDIS_7_HELLO);
            rig.reply(i, NODE_TIME);
            if rig.client.config().restart_quarantine().is_some() {
                rig.reply(i, &old_node_info(i));
            }
            rig.reply(i, b"+OK\r\n+OK\r\n");
            if rig.client.config().waiter_queue().is_some() {
                rig.reply(i, b"+OK\r\n+OK\r\n+OK\r\n");
            }
        }
        rig
    }

    /// Every output until `Timeout` or `Idle`, the final one left out.
    fn drain(&mut self) -> Vec<Output> {
        let mut out = Vec::new();
        // Bounded: a drain yields what the last input queued, far below this.
        for _ in 0..100_000 {
            match self.client.poll_output() {
                Output::Timeout(_) | Output::Idle => return out,
                other => out.push(other),
            }
        }
        panic!("drain did not end");
    }

    fn input(&mut self, input: Input<'_>) -> Vec<Output> {
        self.client.handle_input(input).expect("input accepted");
        self.drain()
    }

    /// The node's current connection (the node must not be down).
    fn conn(&self, node: usize) -> ConnId {
        (self.client.connection(NodeId::new(node))).expect("the node has a current connection")
    }

    /// Feeds bytes from the node's current connection.
    fn reply(&mut self, node: usize, bytes: &[u8]) -> Vec<Output> {
        let conn = self.conn(node);
        self.input(Input::Received {
            now: self.now,
            conn,
            bytes,
        })
    }

    fn acquire(&mut self, key: &'static str, options: &LockOptions) -> (OpId, Vec<Output>) {
        let op = self
            .client
            .acquire_with(self.now, Resource::from(key), options)
            .expect("acquire");
        (op, self.drain())
    }

    fn release(&mut self, op: OpId) -> Vec<Output> {
        self.client.release(self.now, op).expect("release");
        self.drain()
    }

    /// Requests written to `node` and not yet answered.
    fn in_flight(&self, node: usize) -> usize {
        self.client.nodes[node].in_flight.len()
    }

    /// Moves time past every round's deadline and fires the timers.
    fn time_out(&mut self) -> Vec<Output> {
        self.now += Duration::from_secs(2);
        self.input(Input::Timeout(self.now))
    }

    /// Feeds `bytes` from each of `nodes` in turn; returns everything drained.
    fn reply_from(&mut self, nodes: impl IntoIterator<Item = usize>, bytes: &[u8]) -> Vec<Output> {
        let mut out = Vec::new();
        for node in nodes {
            out.extend(self.reply(node, bytes));
        }
        out
    }
}

fn events(out: Vec<Output>) -> Vec<Event> {
    out.into_iter()
        .filter_map(|o| match o {
            Output::Event(e) => Some(e),
            _ => None,
        })
        .collect()
}

fn one_acquired(out: Vec<Output>) -> Acquired {
    match <[Event; 1]>::try_from(events(out)) {
        Ok([Event::Acquired(a)]) => a,
        other => panic!("expected one Acquired, got {other:?}"),
    }
}

fn released_nodes(out: Vec<Output>) -> Vec<ReleaseOutcome> {
    match <[Event; 1]>::try_from(events(out)) {
        Ok([Event::Released { nodes, .. }]) => nodes,
        other => panic!("expected one Released, got {other:?}"),
    }
}

/// A leak found by review: one long-held lock kept every later stale timer entry (10,001 entries for
/// 1 live operation after 10,000 cycles). The queue now stays within twice the live timers
/// (one per lock, one per node) plus a small slack.
#[test]
fn timer_queue_is_bounded_by_live_operations() {
    let nodes = 3;
    // The replies are scripted: no clock samples.
    let config = (Config::builder(nodes).clock_check(None))
        .build()
        .expect("valid config");
    let mut rig = Rig::connected(config);
    let held_options = LockOptions::default()
        .ttl(HOUR)
        .auto_extend(Some(AutoExtend::default()));
    let (held, out) = rig.acquire("held", &held_options);
    assert_eq!(out.len(), nodes);
    one_acquired(rig.reply_from(0..nodes, b"+OK\r\n"));

    let options = LockOptions::default().ttl(HOUR);
    let mut most = 0;
    for _ in 0..10_000 {
        rig.now += MS;
        let (op, _) = rig.acquire("cycle", &options);
        one_acquired(rig.reply_from(0..nodes, b"+OK\r\n"));
        rig.release(op);
        released_nodes(rig.reply_from(0..nodes, b":1\r\n"));
        most = most.max(rig.client.timers.len());
    }
    assert_eq!(rig.client.active_ops(), 1);
    assert!(rig.client.held(held).is_some());
    // Live timers: the held lock and, at most, one per node; the queue stays within twice
    // that plus the slack of 16, however many locks came and went.
    let bound = 2 * (1 + nodes) + 16;
    assert!(
        most <= bound,
        "{most} timer entries for 1 live operation (bound {bound})"
    );
}

/// One lock cycle on 3 nodes whose node 2 never answers: acquire (nodes 0 and 1 say yes),
/// release (nodes 0 and 1 release, which decides it), then time passes until the release's
/// background part gives up on node 2. Returns what node 2 was told in the acquisition and
/// the release.
fn cycle_without_node_2(rig: &mut Rig, key: &'static str) -> (AcquireOutcome, ReleaseOutcome) {
    let (op, _) = rig.acquire(key, &LockOptions::default());
    let acquired = one_acquired(rig.reply_from([0, 1], b"+OK\r\n"));
    assert_eq!(acquired.op, op);
    rig.release(op);
    let released = released_nodes(rig.reply_from([0, 1], b":1\r\n"));
    assert_eq!(
        released[..2],
        [ReleaseOutcome::Released, ReleaseOutcome::Released]
    );
    // The background part reports nothing when it gives up.
    assert!(events(rig.time_out()).is_empty());
    (acquired.stats.nodes[2].outcome.clone(), released[2].clone())
}

/// A leak found by review (algorithm.md §13): a node that keeps its connection open and never answers queued every
/// request in flight (40,000 after 20,000 cycles, with 0 operations active). The queue now
/// stops at `max_in_flight`, and locks still succeed on the 2 healthy nodes.
#[test]
fn silent_node_queue_stops_at_the_cap() {
    let config = (Config::builder(3).clock_check(None))
        .build()
        .expect("valid config");
    let cap = config.max_in_flight();
    assert_eq!(cap, crate::config::DEFAULT_MAX_IN_FLIGHT);
    let mut rig = Rig::connected(config);
    let backlogged = NodeFault::Backlogged { max_in_flight: cap };
    for i in 0..20_000 {
        let (on_acquire, on_release) = cycle_without_node_2(&mut rig, "res");
        assert!(rig.in_flight(2) <= cap, "{} queued", rig.in_flight(2));
        if i >= cap / 2 {
            // Each cycle queued a SET and a release until the cap; after it, both are
            // refused at once instead of waiting for the release timeout.
            assert_eq!(on_acquire, AcquireOutcome::Failed(backlogged.clone()));
            assert_eq!(on_release, ReleaseOutcome::Failed(backlogged.clone()));
        }
    }
    assert_eq!(rig.client.active_ops(), 0);
    assert_eq!(rig.in_flight(2), cap);
    assert!(rig.client.is_up(NodeId::new(2)));
}

/// After the cap was hit, a node that answers late must have each reply matched to its own
/// request: the refused requests were never written, so no reply can land on them, and a
/// new request goes behind the stale ones.
#[test]
fn late_replies_after_the_cap_match_their_own_requests() {
    let cap = 4;
    let config = Config::builder(3)
        .clock_check(None)
        .max_in_flight(cap)
        .build()
        .expect("valid config");
    let mut rig = Rig::connected(config);
    let backlogged = NodeFault::Backlogged { max_in_flight: cap };
    // Cycles a and b fill node 2's queue: SET a, release a, SET b, release b.
    for key in ["a", "b"] {
        let (on_acquire, on_release) = cycle_without_node_2(&mut rig, key);
        assert_eq!(on_acquire, AcquireOutcome::Pending);
        assert_eq!(on_release, ReleaseOutcome::Pending);
    }
    assert_eq!(rig.in_flight(2), cap);
    // Cycle c: nothing is written to node 2, and it counts as a failed vote at once.
    let (op, out) = rig.acquire("c", &LockOptions::default());
    let to_node_2 = |out: &[Output]| {
        out.iter()
            .filter(|o| matches!(o, Output::Transmit(t) if t.node.index() == 2))
            .count()
    };
    assert_eq!(to_node_2(&out), 0);
    let a = one_acquired(rig.reply_from([0, 1], b"+OK\r\n"));
    assert_eq!(
        a.stats.nodes[2].outcome,
        AcquireOutcome::Failed(backlogged.clone())
    );
    let out = rig.release(op);
    assert_eq!(to_node_2(&out), 0);
    let released = released_nodes(rig.reply_from([0, 1], b":1\r\n"));
    assert_eq!(released[2], ReleaseOutcome::Failed(backlogged));
    assert_eq!(rig.in_flight(2), cap);

    // Node 2 wakes up and answers its oldest request (SET a): there is room for one more.
    let out = rig.reply(2, b"+OK\r\n");
    assert!(out.is_empty(), "{out:?}");
    assert_eq!(rig.in_flight(2), cap - 1);
    // Lock d's SET goes to node 2 again, behind release a, SET b and release b.
    let (_, out) = rig.acquire("d", &LockOptions::default());
    assert_eq!(to_node_2(&out), 1);
    assert!(rig.reply(0, b"+OK\r\n").is_empty());
    // The stale replies answer the stale requests: none of them reaches lock d, although
    // "+OK" from node 2 would give it its quorum.
    for stale in [&b":1\r\n"[..], b"+OK\r\n", b":1\r\n"] {
        let out = rig.reply(2, stale);
        assert!(out.is_empty(), "a stale reply reached a lock: {out:?}");
    }
    // Node 2's answer to lock d: the key is held there by someone else.
    assert!(rig.reply(2, b"$-1\r\n").is_empty());
    assert_eq!(rig.in_flight(2), 0);
    let d = one_acquired(rig.reply(1, b"+OK\r\n"));
    let expected = [
        AcquireOutcome::Locked,
        AcquireOutcome::Locked,
        AcquireOutcome::Held,
    ];
    let expected: Vec<NodeOutcome> = (expected.into_iter().enumerate())
        .map(|(i, outcome)| NodeOutcome {
            node: NodeName::unnamed(NodeId::new(i)),
            outcome,
        })
        .collect();
    assert_eq!(d.stats.nodes, expected);
    // Nothing else was written to node 2: one more reply has no request to answer.
    let conn = rig.conn(2);
    let out = rig.reply(2, b":1\r\n");
    let closed = out
        .iter()
        .any(|o| matches!(o, Output::Disconnect(c) if *c == conn));
    assert!(closed, "{out:?}");
}
