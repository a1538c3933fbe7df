//! Tests that need the client's internals: the timer queue's size and each node's FIFO of
//! requests in flight. Everything else is tested through the public API in `tests/`.

use std::time::{Duration, Instant};

use chacha20::ChaCha20Rng;
use rand_core::SeedableRng;

use super::*;
use crate::io::{Acquired, ReleaseOutcome};
use crate::policy::AutoExtend;

const HOUR: Duration = Duration::from_secs(3600);
const MS: Duration = Duration::from_millis(1);

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
            let node = NodeId::new(i);
            rig.input(Input::Connected { now: rig.now, node });
            // The two SCRIPT LOAD replies: a preload's reply is not read.
            rig.reply(i, b"+OK\r\n+OK\r\n");
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

    fn reply(&mut self, node: usize, bytes: &[u8]) -> Vec<Output> {
        let node = NodeId::new(node);
        self.input(Input::Received {
            now: self.now,
            node,
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

/// Issue 17, L1: one long-held lock kept every later stale timer entry (10,001 entries for
/// 1 live operation after 10,000 cycles). The queue now stays within twice the live timers
/// (one per lock, one per node) plus a small slack.
#[test]
fn timer_queue_is_bounded_by_live_operations() {
    let nodes = 3;
    let config = Config::builder(nodes).build().expect("valid config");
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
