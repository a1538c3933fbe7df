//! The simulated network: one TCP-like link per (client, node) pair, with FIFO delivery in
//! each direction, random delay, random chunk splitting, replies of some nodes squeezed
//! through a slow link ([`SlowLink`]), and generations that make a cut or a reconnect drop
//! everything still in flight (unless the cut was a half-close, whose client-to-node bytes
//! live on in an orphan: see `orphan.rs`).
//!
//! This module plans deliveries; the scheduler owns the event queue and the processes.

use std::collections::VecDeque;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use redlock_core::ConnId;

use crate::clock::SimTime;
use crate::pubsub::Session;
use crate::random::Dice;

/// Delay and splitting knobs of the network.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NetworkKnobs {
    /// Shortest one-way delay of a chunk.
    pub latency_min: Duration,
    /// Longest one-way delay of a chunk (uniform in between, per chunk).
    pub latency_max: Duration,
    /// Chance that a write is split into 2 to 4 chunks delivered separately.
    pub split_chance: f64,
    /// Shortest time for a TCP connect (or its refusal).
    pub connect_min: Duration,
    /// Longest time for a TCP connect (or its refusal).
    pub connect_max: Duration,
    /// Chance that bytes reaching the client's side of a connection the client already gave
    /// up on are still read and fed to the client, under that old connection's name: a
    /// driver whose reader is late to notice its socket was replaced. The client must ignore
    /// them (its `ConnId` rule).
    pub stale_reads: f64,
    /// The negative control of `stale_reads`: stale bytes are fed under the node's current
    /// connection's name, as by a driver that cannot tell its connections apart (what the
    /// `ConnId` rule exists to prevent).
    pub stale_reads_as_current: bool,
}

impl Default for NetworkKnobs {
    /// A LAN: 0.1 to 2 ms one way, a fifth of writes split, connects within 1 ms.
    fn default() -> Self {
        Self {
            latency_min: Duration::from_micros(100),
            latency_max: Duration::from_millis(2),
            split_chance: 0.2,
            connect_min: Duration::from_micros(200),
            connect_max: Duration::from_millis(1),
            stale_reads: 0.0,
            stale_reads_as_current: false,
        }
    }
}

/// A node whose replies pass a narrow link: on each of its connections, what it writes
/// leaves at `bytes_per_milli` bytes per millisecond, one chunk after the other, and then
/// takes the network's usual delay (requests to it are not slowed). A reply behind a long
/// one waits for it, as on a congested TCP connection; a new connection starts empty.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlowLink {
    /// The node.
    pub node: usize,
    /// Bytes per millisecond its replies pass at (at least 1).
    pub bytes_per_milli: u32,
}

impl SlowLink {
    /// How long `len` bytes take to pass the link.
    pub fn time_for(&self, len: usize) -> Duration {
        let rate = u64::from(self.bytes_per_milli.max(1));
        Duration::from_nanos((len as u64).saturating_mul(1_000_000) / rate)
    }
}

/// How many past connections a link remembers for stale reads.
const OPENED_KEPT: usize = 4;

/// Which way bytes travel on a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Direction {
    ToNode,
    ToClient,
}

/// The state of one link as both ends see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LinkState {
    Closed,
    Connecting,
    Open,
}

/// One client-node connection. Every (re)connect or cut bumps `epoch`; a delivery carrying an
/// older generation is dropped, which is how a cut loses the bytes in flight both ways.
#[derive(Debug, Clone)]
pub(crate) struct Link {
    pub(crate) epoch: u64,
    /// The client's name for the connection this link carries (from `Output::Connect`),
    /// which every input about it names.
    pub(crate) conn: Option<ConnId>,
    /// The last few connections this link carried once open, by generation: a stale read
    /// names the connection its bytes belong to.
    pub(crate) opened: VecDeque<(u64, ConnId)>,
    pub(crate) state: LinkState,
    /// Bytes received by the node and not yet executed (the node may be paused).
    pub(crate) inbox: BytesMut,
    /// The node's side of the connection: database, protocol, channels.
    pub(crate) session: Session,
    /// A middlebox in front of the node holds what the client writes (the first stage of a
    /// half-close): bytes arriving for the node go to `held`, not to `inbox`.
    pub(crate) holding: bool,
    /// Bytes held by the middlebox, in stream order.
    pub(crate) held: BytesMut,
    /// When the link last opened (its current connection, if open).
    pub(crate) opened_at: SimTime,
    /// Until when the node's slow link (if any) is busy passing this connection's replies.
    pipe_free: SimTime,
    last_to_node: SimTime,
    last_to_client: SimTime,
}

/// Every link of the simulation, indexed by client then node.
#[derive(Debug, Clone)]
pub(crate) struct Network {
    knobs: NetworkKnobs,
    nodes: usize,
    links: Vec<Link>,
    /// Each node's slow link, if it has one (by node).
    slow: Vec<Option<SlowLink>>,
}

impl Network {
    /// The knobs the network was built with.
    pub(crate) fn knobs(&self) -> &NetworkKnobs {
        &self.knobs
    }

    pub(crate) fn new(knobs: NetworkKnobs, clients: usize, nodes: usize) -> Self {
        let link = Link {
            epoch: 0,
            conn: None,
            opened: VecDeque::new(),
            state: LinkState::Closed,
            inbox: BytesMut::new(),
            session: Session::default(),
            holding: false,
            held: BytesMut::new(),
            opened_at: SimTime::ZERO,
            pipe_free: SimTime::ZERO,
            last_to_node: SimTime::ZERO,
            last_to_client: SimTime::ZERO,
        };
        Self {
            knobs,
            nodes,
            links: vec![link; clients * nodes],
            slow: vec![None; nodes],
        }
    }

    /// Squeezes the replies of `slow.node` (if there is such a node) through `slow`.
    pub(crate) fn slow_down(&mut self, slow: SlowLink) {
        if let Some(at) = self.slow.get_mut(slow.node) {
            *at = Some(slow);
        }
    }

    pub(crate) fn link(&mut self, client: usize, node: usize) -> &mut Link {
        &mut self.links[client * self.nodes + node]
    }

    pub(crate) fn link_ref(&self, client: usize, node: usize) -> &Link {
        &self.links[client * self.nodes + node]
    }

    /// Open links, as `(client, node)`, in index order.
    pub(crate) fn open_links(&self) -> Vec<(usize, usize)> {
        (0..self.links.len())
            .filter(|i| self.links[*i].state == LinkState::Open)
            .map(|i| (i / self.nodes, i % self.nodes))
            .collect()
    }

    /// Starts a connect on a link the caller reset to `Connecting`: returns its generation
    /// and when the outcome is known.
    pub(crate) fn start_connect(
        &mut self,
        dice: &mut Dice,
        now: SimTime,
        client: usize,
        conn: ConnId,
    ) -> (u64, SimTime) {
        let delay = dice.duration(self.knobs.connect_min, self.knobs.connect_max);
        let link = self.link(client, conn.node().index());
        link.conn = Some(conn);
        (link.epoch, now.saturating_add(delay))
    }

    /// Nothing more reaches client `client` from node `node` before `until`: what the node
    /// writes from now on waits behind a stalled segment (FIFO, as TCP).
    pub(crate) fn stall(&mut self, client: usize, node: usize, until: SimTime) {
        let link = self.link(client, node);
        link.last_to_client = link.last_to_client.max(until);
    }

    /// Plans the delivery of `bytes` written at `now`: possibly split, each chunk delayed at
    /// random but never before an earlier chunk of the same direction (FIFO). A slow node's
    /// replies first wait for its link to pass them (no dice: a scenario without slow links
    /// draws exactly what it drew before they existed).
    pub(crate) fn plan(
        &mut self,
        dice: &mut Dice,
        now: SimTime,
        client: usize,
        node: usize,
        dir: Direction,
        bytes: Bytes,
    ) -> Vec<(SimTime, Bytes)> {
        let knobs = self.knobs;
        let chunks = if bytes.len() > 1 && dice.chance(knobs.split_chance) {
            split(dice, bytes)
        } else {
            vec![bytes]
        };
        let slow = match dir {
            Direction::ToClient => self.slow[node],
            Direction::ToNode => None,
        };
        let link = self.link(client, node);
        let last = match dir {
            Direction::ToNode => &mut link.last_to_node,
            Direction::ToClient => &mut link.last_to_client,
        };
        let pipe = &mut link.pipe_free;
        chunks
            .into_iter()
            .map(|chunk| {
                let mut sent = now;
                if let Some(slow) = slow {
                    sent = (*pipe).max(now).saturating_add(slow.time_for(chunk.len()));
                    *pipe = sent;
                }
                let at = sent
                    .saturating_add(dice.duration(knobs.latency_min, knobs.latency_max))
                    .max(*last);
                // Equal times keep their order: the scheduler breaks ties by sequence.
                *last = at;
                (at, chunk)
            })
            .collect()
    }
}

impl Link {
    /// A new generation in `state`: anything in flight on the old one is now stale. Returns
    /// the node side of the old connection, which the node must close (its subscriptions).
    #[must_use = "the node must close the old session"]
    pub(crate) fn reset(&mut self, state: LinkState) -> Session {
        self.epoch += 1;
        self.state = state;
        self.inbox.clear();
        self.pipe_free = SimTime::ZERO;
        self.holding = false;
        self.held.clear();
        std::mem::take(&mut self.session)
    }

    /// The link is open since `now`, its node side `session`: remembers which connection
    /// this generation is.
    pub(crate) fn open(&mut self, now: SimTime, session: Session) {
        self.state = LinkState::Open;
        self.opened_at = now;
        self.session = session;
        if let Some(conn) = self.conn {
            if self.opened.len() == OPENED_KEPT {
                self.opened.pop_front();
            }
            self.opened.push_back((self.epoch, conn));
        }
    }

    /// The connection a delivery of generation `epoch` belonged to, if it was open once and
    /// is among the last few.
    pub(crate) fn conn_of(&self, epoch: u64) -> Option<ConnId> {
        (self.opened.iter()).find_map(|&(e, conn)| (e == epoch).then_some(conn))
    }

    /// Whether a delivery of generation `epoch` still belongs to this open link.
    pub(crate) fn accepts(&self, epoch: u64) -> bool {
        self.epoch == epoch && self.state == LinkState::Open
    }
}

/// Cuts `bytes` (at least 2 long) into 2 to 4 non-empty chunks at random points.
fn split(dice: &mut Dice, bytes: Bytes) -> Vec<Bytes> {
    let pieces = dice.range(2, 4).min(bytes.len() as u64) as usize;
    let mut cuts: Vec<usize> = (1..pieces)
        .map(|_| dice.range(1, bytes.len() as u64 - 1) as usize)
        .collect();
    cuts.sort_unstable();
    cuts.dedup();
    let mut out = Vec::with_capacity(cuts.len() + 1);
    let mut start = 0;
    for cut in cuts {
        out.push(bytes.slice(start..cut));
        start = cut;
    }
    out.push(bytes.slice(start..));
    out
}

/// The node side of a half-closed connection (an orphan); how one comes to be and runs its
/// late bytes is in `orphan.rs`.
#[derive(Debug)]
pub(crate) struct Orphan {
    pub(crate) client: usize,
    pub(crate) node: usize,
    /// The generation of the link it was: deliveries of that generation still in flight
    /// come here instead of being dropped.
    pub(crate) epoch: u64,
    /// The node's side of the connection (database, protocol, channels).
    pub(crate) session: Session,
    /// Bytes the node has and has not run yet (it may be paused).
    pub(crate) inbox: BytesMut,
    /// Bytes the middlebox still holds; they reach the node at the orphan's late delivery.
    pub(crate) held: BytesMut,
    /// The late delivery happened: later arrivals go straight to the inbox.
    pub(crate) delivered: bool,
    /// The node crashed, or closed the connection after a protocol error.
    pub(crate) dead: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deliveries_on_a_link_never_reorder_and_splits_rejoin() {
        let knobs = NetworkKnobs {
            split_chance: 0.5,
            ..NetworkKnobs::default()
        };
        let mut net = Network::new(knobs, 1, 1);
        let mut dice = Dice::new(3);
        let mut all = Vec::new();
        for i in 0..200u64 {
            let now = SimTime::from_duration(Duration::from_micros(i * 50));
            let msg = Bytes::from(format!("message {i};"));
            all.extend(net.plan(&mut dice, now, 0, 0, Direction::ToNode, msg));
        }
        assert!(all.windows(2).all(|w| w[0].0 <= w[1].0), "FIFO");
        assert!(all.len() > 200, "some writes were split");
        let joined: Vec<u8> = all.iter().flat_map(|(_, b)| b.iter().copied()).collect();
        let expected: String = (0..200).map(|i| format!("message {i};")).collect();
        assert_eq!(joined, expected.as_bytes());
    }

    #[test]
    fn a_slow_link_passes_replies_at_its_rate_one_after_the_other() {
        let knobs = NetworkKnobs {
            split_chance: 0.5,
            ..NetworkKnobs::default()
        };
        let slow = SlowLink {
            node: 1,
            bytes_per_milli: 3,
        };
        let mut net = Network::new(knobs, 1, 2);
        net.slow_down(slow);
        let mut dice = Dice::new(5);
        let ms = |n: u64| SimTime::from_duration(Duration::from_millis(n));
        let reply = Bytes::from(vec![b'x'; 300]);
        let chunks = |net: &mut Network, dice: &mut Dice, node, dir, at| {
            net.plan(dice, ms(at), 0, node, dir, reply.clone())
        };
        // 300 bytes at 3 bytes/ms: the last chunk leaves 100 ms after the write.
        let first = chunks(&mut net, &mut dice, 1, Direction::ToClient, 10);
        let done = first.last().expect("a chunk").0;
        assert!(done >= ms(110) && done <= ms(110).saturating_add(knobs.latency_max));
        // A reply written meanwhile waits for the first to pass: 100 ms more.
        let second = chunks(&mut net, &mut dice, 1, Direction::ToClient, 20);
        assert!(second.last().expect("a chunk").0 >= ms(210));
        // Requests to it, and the other node's replies, are not slowed.
        for (node, dir) in [(1, Direction::ToNode), (0, Direction::ToClient)] {
            let plain = chunks(&mut net, &mut dice, node, dir, 10);
            assert!(
                plain
                    .iter()
                    .all(|(at, _)| *at <= ms(10).saturating_add(knobs.latency_max))
            );
        }
        // A new connection starts with an empty link: what it writes at 150 ms passes by
        // 250 ms, not behind the old connection's second reply (which the link passed by
        // 210 ms).
        let _ = net.link(0, 1).reset(LinkState::Connecting);
        let fresh = chunks(&mut net, &mut dice, 1, Direction::ToClient, 150);
        assert!(fresh.last().expect("a chunk").0 <= ms(250).saturating_add(knobs.latency_max));
        assert_eq!(slow.time_for(3), Duration::from_millis(1));
    }
}
