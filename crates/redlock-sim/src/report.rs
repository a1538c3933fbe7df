//! What a run produced: the [`Report`] with its [`Stats`], and the running trace hash that
//! makes two runs of one seed comparable. Only true times and ids are hashed, never
//! `Instant`s (whose origin differs between runs).

use redlock_core::OpId;

use crate::checker::{Checker, FencingViolation, Violation};
use crate::clock::SimTime;
use crate::event::Ev;
use crate::linger::Linger;

/// Counters of what happened in a run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    /// Events processed.
    pub events: u64,
    /// Node pauses injected.
    pub pauses: u32,
    /// Link cuts injected.
    pub cuts: u32,
    /// Node crashes injected.
    pub crashes: u32,
    /// Script cache flushes injected.
    pub flushes: u32,
    /// Connection attempts refused (node down).
    pub refused: u32,
    /// Malformed requests seen by nodes (the core never sends any).
    pub bad_requests: u32,
    /// `-NOSCRIPT` replies sent by nodes (each followed by an `EVAL` from the core).
    pub noscript: u32,
    /// Native compare commands (`DELIFEQ`, `DELEX IFEQ`, `SET IFEQ`) nodes ran.
    pub native: u32,
    /// Native compare commands nodes refused as unknown or a syntax error (each followed
    /// by the script from the core, which then sticks to scripts on that node).
    pub native_refused: u32,
    /// `HELLO`s nodes answered with a server description.
    pub hellos: u32,
    /// `HELLO`s nodes refused (`NOPERM`, unknown command): the core then probes the node.
    pub hellos_refused: u32,
    /// Usage errors returned by the core for workload calls that raced an event.
    pub usage_errors: u32,
    /// Connections half-closed: the client side died, the held bytes went on to the node.
    pub half_closes: u32,
    /// Commands nodes ran on half-closed connections (written before the client side died).
    pub orphan_commands: u64,
    /// Chunks of a given-up connection's bytes fed to the client anyway (`stale_reads`).
    pub stale_reads: u32,
    /// Random crashes skipped because a late client started near them
    /// ([`FaultKnobs::spare_new_clients`](crate::FaultKnobs::spare_new_clients)).
    pub crashes_spared: u32,
    /// Crashes whose data survived (persistence): the restart loaded it back.
    pub persisted_crashes: u32,
    /// Restarts without data whose node wall clock was stepped back.
    pub clocks_stepped_back: u32,
    /// Lock keys evicted (a `volatile-*` eviction policy).
    pub evictions: u32,
    /// Lock keys turned into lists (another program using the name).
    pub retypes: u32,
    /// `SUBSCRIBE`s nodes confirmed.
    pub subscribes: u32,
    /// Pub/sub messages nodes left for subscribed connections (one per receiver).
    pub messages: u32,
    /// Messages lost on the way ([`PushFaults::drop`](crate::PushFaults)).
    pub messages_dropped: u32,
    /// Messages written twice ([`PushFaults::duplicate`](crate::PushFaults)).
    pub messages_duplicated: u32,
    /// Messages held back ([`PushFaults::delay`](crate::PushFaults)).
    pub messages_delayed: u32,
    /// Messages that stalled their connection ([`PushFaults::stall`](crate::PushFaults)).
    pub messages_stalled: u32,
    /// Held-back messages written to a connection no longer subscribed to their channel
    /// (the waiter acquired, gave up or reconnected meanwhile).
    pub messages_unwatched: u32,
    /// `PTTL`s that found the key gone on a connection subscribed to its release channel:
    /// the release came before the subscription was active.
    pub released_before_subscribed: u32,
    /// Connections the client closed itself (`Output::Disconnect`): a reply it could not
    /// read, or a refused handshake. A fault the simulation injects never causes one, so a
    /// family with none of those has none.
    pub client_disconnects: u32,
}

/// The outcome of a run.
#[derive(Debug, Clone)]
pub struct Report {
    /// The scenario seed.
    pub seed: u64,
    /// The first overlap found, if any.
    pub violation: Option<Violation>,
    /// The first break of the fencing property, if any (see [`Checker::fencing_violation`]).
    pub fencing_violation: Option<FencingViolation>,
    /// The first released key found on a reachable node past its release's deadline, if
    /// the scenario looks ([`Scenario::release_linger`](crate::Scenario::release_linger)).
    pub linger: Option<Linger>,
    /// Holds and operation records.
    pub checker: Checker,
    /// Counters.
    pub stats: Stats,
    /// The clients' clock events, in order.
    pub clock_events: Vec<ClockEvent>,
    /// Hash of the whole run, for determinism checks.
    pub trace_hash: u64,
    /// Whether every client finished its operations.
    pub workloads_done: bool,
    /// True time at the end of the run.
    pub end: SimTime,
}

/// A clock event of one client's core ([`Event::ClockRate`](redlock_core::Event::ClockRate)
/// or [`Event::ClockStep`](redlock_core::Event::ClockStep)), and when it came.
#[derive(Debug, Clone, PartialEq)]
pub struct ClockEvent {
    /// The client.
    pub client: usize,
    /// When, in true time.
    pub at: SimTime,
    /// The event.
    pub event: redlock_core::Event,
}

/// A 64-bit FNV-1a hash over the run's events.
#[derive(Debug, Clone)]
pub(crate) struct Trace {
    hash: u64,
}

impl Trace {
    pub(crate) fn new() -> Self {
        Self { hash: FNV_OFFSET }
    }

    pub(crate) fn hash(&self) -> u64 {
        self.hash
    }

    /// A scheduled event, when processed.
    pub(crate) fn event(&mut self, at: SimTime, ev: &Ev) {
        self.u64(at.as_nanos());
        match ev {
            Ev::Wake { client, epoch } => self.words(&[1, *client as u64, *epoch]),
            Ev::ToNode {
                client,
                node,
                epoch,
                bytes,
            } => {
                self.words(&[2, *client as u64, *node as u64, *epoch]);
                self.bytes(bytes);
            }
            Ev::ToClient {
                client,
                node,
                epoch,
                bytes,
            } => {
                self.words(&[3, *client as u64, *node as u64, *epoch]);
                self.bytes(bytes);
            }
            Ev::ConnectDone {
                client,
                node,
                epoch,
            } => {
                self.words(&[4, *client as u64, *node as u64, *epoch]);
            }
            Ev::Fault => self.u64(5),
            Ev::Resume { node, incarnation } => {
                self.words(&[6, *node as u64, u64::from(*incarnation)]);
            }
            Ev::Restart { node } => self.words(&[7, *node as u64]),
            Ev::HalfClose {
                client,
                node,
                epoch,
            } => self.words(&[8, *client as u64, *node as u64, *epoch]),
            Ev::LateDelivery { orphan } => self.words(&[9, *orphan as u64]),
            Ev::ReleaseCheck {
                client,
                op,
                deadline,
            } => self.words(&[10, *client as u64, op.as_raw(), deadline.as_nanos()]),
            Ev::Push {
                client,
                node,
                epoch,
                bytes,
                ..
            } => {
                self.words(&[11, *client as u64, *node as u64, *epoch]);
                self.bytes(bytes);
            }
            Ev::Start { client } => self.words(&[12, *client as u64]),
            Ev::Death { death } => self.words(&[13, *death as u64]),
        }
    }

    /// A lock event or workload action seen by a client: a tag, the op and a true time.
    pub(crate) fn client(&mut self, client: usize, tag: u64, op: OpId, t: SimTime) {
        self.words(&[100 + tag, client as u64, op.as_raw(), t.as_nanos()]);
    }

    fn words(&mut self, words: &[u64]) {
        for w in words {
            self.u64(*w);
        }
    }

    fn u64(&mut self, w: u64) {
        // FNV-1a over 64-bit words rather than bytes: as deterministic, eight times fewer
        // multiplications (this runs for every byte the network carries).
        self.hash ^= w;
        self.hash = self.hash.wrapping_mul(FNV_PRIME);
    }

    fn bytes(&mut self, bytes: &[u8]) {
        self.u64(bytes.len() as u64);
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.u64(u64::from_le_bytes(word));
        }
        let mut last = [0u8; 8];
        last[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
        self.u64(u64::from_le_bytes(last));
    }
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;
