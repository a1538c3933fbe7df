//! [`Sim`]: the scheduler. One seeded RNG, one event heap keyed by (true time, sequence),
//! the nodes, the network, the clients with their cores and workloads, and the checker.
//!
//! Processing an event may schedule others but never waits; `step` jumps to the next event.
//! Client driving lives in `driver.rs`, fault injection in `fault.rs` and `orphan.rs`.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use chacha20::ChaCha20Rng;
use redlock_core::Client;

use crate::checker::Checker;
use crate::clock::{Clock, SimTime};
use crate::event::Ev;
use crate::network::{Network, Orphan};
use crate::node::Node;
use crate::random::Dice;
use crate::report::{ClockEvent, Report, Stats, Trace};
use crate::scenario::{ClockRates, Scenario};
use crate::workload::Tasks;

/// A deterministic simulation of one [`Scenario`].
#[derive(Debug)]
pub struct Sim {
    pub(crate) scenario: Scenario,
    pub(crate) now: SimTime,
    heap: BinaryHeap<Reverse<Scheduled>>,
    seq: u64,
    /// Network delays and fault choices.
    pub(crate) dice: Dice,
    pub(crate) nodes: Vec<Node>,
    pub(crate) clients: Vec<SimClient>,
    pub(crate) net: Network,
    /// Node sides of half-closed connections, by id (never removed, so ids stay valid).
    pub(crate) orphans: Vec<Orphan>,
    pub(crate) checker: Checker,
    pub(crate) trace: Trace,
    pub(crate) stats: Stats,
    /// The clients' clock events ([`Event::ClockRate`](redlock_core::Event::ClockRate),
    /// [`Event::ClockStep`](redlock_core::Event::ClockStep)), in order.
    pub(crate) clock_events: Vec<ClockEvent>,
    /// When each node last crashed, if it did.
    pub(crate) last_crash: Vec<Option<SimTime>>,
    /// Network deliveries and connects scheduled and not yet processed.
    in_flight: usize,
    /// A readable log of commands, replies and lock events, when enabled.
    log: Option<Vec<String>>,
    /// Every chunk a client's open link delivered, as `(client, node, bytes)` (tests read
    /// what nodes wrote).
    #[cfg(test)]
    pub(crate) tap: Vec<(usize, usize, Bytes)>,
}

/// One simulated client: its core, clock and workload, and the timer the driver keeps.
#[derive(Debug)]
pub(crate) struct SimClient {
    pub(crate) core: Client<ChaCha20Rng>,
    pub(crate) clock: Clock,
    pub(crate) workload: Tasks,
    /// The core's last `Output::Timeout`, if any.
    pub(crate) core_timer: Option<Instant>,
    /// The wake event armed on the heap: (true time, generation).
    pub(crate) wake: Option<SimTime>,
    pub(crate) wake_epoch: u64,
    /// The process died (`death.rs`): never fed again, its workload over.
    pub(crate) dead: bool,
}

#[derive(Debug)]
struct Scheduled {
    at: SimTime,
    seq: u64,
    ev: Ev,
}

impl Sim {
    /// Builds the run: nodes, clocks, clients (whose first outputs are drained at time zero).
    ///
    /// # Panics
    /// If the scenario has no clients.
    pub fn new(scenario: Scenario) -> Self {
        assert!(scenario.clients > 0, "a scenario needs clients");
        // The one clock read of the simulation: every local Instant is origin + a duration,
        // and the core only ever subtracts them.
        let origin = Instant::now();
        let mut dice = Dice::new(scenario.seed);
        let n = scenario.nodes();
        let skew = scenario.clock_skew;
        let rates = scenario.clock_rates;
        let clock = |dice: &mut Dice| {
            let s = match rates {
                ClockRates::Uniform => dice.float(-skew, skew),
                ClockRates::Edges if dice.chance(0.5) => skew,
                ClockRates::Edges => -skew,
            };
            Clock::with_skew(origin, s)
        };
        let nodes: Vec<Node> = (0..n)
            .map(|i| {
                let drawn = clock(&mut dice);
                let set = scenario.node_skews.iter().find(|(node, _)| *node == i);
                Node::with_profile(
                    set.map_or(drawn, |&(_, skew)| Clock::with_skew(origin, skew)),
                    &scenario.scripts,
                    scenario.preload_scripts,
                    scenario.server(i),
                )
                .numbered(i as u64)
            })
            .collect();
        let seed = scenario.seed;
        let mut clients: Vec<SimClient> = Vec::with_capacity(scenario.all_clients());
        let starts = std::iter::repeat_n(Duration::ZERO, scenario.clients);
        for (i, start) in starts
            .chain(scenario.late_clients.iter().copied())
            .enumerate()
        {
            // A late client draws from dice of its own, so the others keep their runs.
            let late = i >= scenario.clients;
            let mut own = Dice::new(seed ^ LATE_CLIENT_DICE ^ (i as u64).wrapping_mul(SPREAD));
            let d = if late { &mut own } else { &mut dice };
            let clock = clock(d);
            let core = Client::new(scenario.config.clone(), d.fork_rng());
            let knobs = (scenario.workload_of.iter()).find(|(c, _)| *c == i);
            let workload = Tasks::new(
                i,
                knobs.map_or(scenario.workload, |(_, knobs)| *knobs),
                scenario.resources,
                d.fork(),
                clock.instant(SimTime::from_duration(start)),
                |t| {
                    Dice::new(seed ^ TASK_DICE ^ ((i as u64) << 16 | t as u64).wrapping_mul(SPREAD))
                },
            );
            clients.push(SimClient {
                core,
                clock,
                workload,
                core_timer: None,
                wake: None,
                wake_epoch: 0,
                dead: false,
            });
        }
        let mut net = Network::new(scenario.network, clients.len(), n);
        for slow in &scenario.slow_links {
            net.slow_down(*slow);
        }
        let mut sim = Self {
            net,
            orphans: Vec::new(),
            checker: Checker::new(scenario.seed),
            scenario,
            now: SimTime::ZERO,
            heap: BinaryHeap::new(),
            seq: 0,
            dice,
            nodes,
            clients,
            trace: Trace::new(),
            stats: Stats::default(),
            clock_events: Vec::new(),
            last_crash: vec![None; n],
            in_flight: 0,
            log: None,
            #[cfg(test)]
            tap: Vec::new(),
        };
        sim.spread_wall_clocks();
        for step in &sim.scenario.wall_steps {
            if let Some(node) = sim.nodes.get_mut(step.node) {
                node.step_wall_at(SimTime::from_duration(step.at), step.by);
            }
        }
        for (i, node) in sim.nodes.iter_mut().enumerate() {
            node.ignore_subscribe(sim.scenario.push_faults(i).ignore_subscribe);
        }
        for i in 0..sim.scenario.faults.down_at_start.min(n) {
            sim.nodes[i].crash();
        }
        if let Some((lo, hi)) = sim.scenario.faults.every {
            let gap = sim.dice.duration(lo, hi);
            let from = SimTime::from_duration(sim.scenario.faults.from);
            sim.schedule(from.saturating_add(gap), Ev::Fault);
        }
        for c in 0..sim.scenario.clients {
            sim.settle(c);
        }
        for (i, start) in sim.scenario.late_clients.clone().into_iter().enumerate() {
            let client = sim.scenario.clients + i;
            sim.schedule(SimTime::from_duration(start), Ev::Start { client });
        }
        sim.schedule_deaths();
        sim
    }

    /// Sets each node's wall clock off by up to the scenario's `wall_spread` either way, from
    /// dice of its own (so a scenario without a spread keeps its run).
    fn spread_wall_clocks(&mut self) {
        let spread = self.scenario.wall_spread;
        if spread.is_zero() {
            return;
        }
        let mut walls = Dice::new(self.scenario.seed ^ 0x3a11_c10c);
        let nanos = i64::try_from(spread.as_nanos()).unwrap_or(i64::MAX);
        for node in &mut self.nodes {
            let off = walls.range(0, 2 * nanos.unsigned_abs());
            node.step_wall(i64::try_from(off).unwrap_or(0) - nanos);
        }
    }

    /// Processes the next event, jumping virtual time to it. False if nothing is scheduled.
    pub fn step(&mut self) -> bool {
        let Some(Reverse(Scheduled { at, ev, .. })) = self.heap.pop() else {
            return false;
        };
        debug_assert!(at >= self.now, "the heap gave an event in the past");
        self.now = at;
        self.stats.events += 1;
        if ev.in_transit() {
            self.in_flight -= 1;
        }
        self.trace.event(at, &ev);
        self.dispatch(ev);
        true
    }

    /// Steps until the next event is after `limit`, nothing is left, or `max_events` were
    /// processed (a livelock guard). Returns false only if the event budget ran out.
    pub fn run_until(&mut self, limit: Duration, max_events: u64) -> bool {
        let limit = SimTime::from_duration(limit);
        let done = self.run_while(limit, max_events, |_| false);
        if self.now < limit && self.heap.is_empty() {
            self.now = limit;
        }
        done
    }

    /// Steps until [`is_quiet`](Self::is_quiet), the next event is after `limit`, or
    /// `max_events` were processed. Returns whether the simulation is quiet.
    pub fn run_until_quiet(&mut self, limit: Duration, max_events: u64) -> bool {
        self.run_while(SimTime::from_duration(limit), max_events, Self::is_quiet);
        self.is_quiet()
    }

    /// Runs until every workload is done and no lock operation is left (nothing more can
    /// happen that the checker looks at), or to the scenario's time limit; returns the report.
    ///
    /// # Panics
    /// If the run exceeds `MAX_EVENTS` events (a livelock in the core or the simulation).
    pub fn run(mut self) -> Report {
        let limit = SimTime::from_duration(self.scenario.time_limit);
        let done = self.run_while(limit, MAX_EVENTS, Self::is_finished);
        assert!(
            done,
            "seed {}: over {MAX_EVENTS} events before {:?}",
            self.scenario.seed, self.scenario.time_limit
        );
        self.report()
    }

    /// What the run produced so far.
    pub fn report(&self) -> Report {
        Report {
            seed: self.scenario.seed,
            violation: self.checker.violation(),
            fencing_violation: self.checker.fencing_violation(),
            linger: self.checker.linger().cloned(),
            checker: self.checker.clone(),
            stats: self.stats.clone(),
            clock_events: self.clock_events.clone(),
            trace_hash: self.trace.hash(),
            workloads_done: (self.clients.iter()).all(|c| c.dead || c.workload.is_done()),
            end: self.now,
        }
    }

    /// Starts keeping a readable log of every command, reply, lock event and fault (for
    /// replaying a failing seed); slow, off by default.
    pub fn enable_log(&mut self) {
        self.log.get_or_insert_with(Vec::new);
    }

    /// The log kept since [`enable_log`](Self::enable_log).
    pub fn log(&self) -> &[String] {
        self.log.as_deref().unwrap_or_default()
    }

    /// Adds a line to the log, if enabled (the line is only built then).
    pub(crate) fn note(&mut self, line: impl FnOnce() -> String) {
        if let Some(log) = &mut self.log {
            log.push(format!("{} {}", self.now, line()));
        }
    }

    /// Current true time.
    pub fn now(&self) -> SimTime {
        self.now
    }

    /// The checker's records so far.
    pub fn checker(&self) -> &Checker {
        &self.checker
    }

    /// The nodes (state, clock, data).
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// Keys alive on each node now: `(node, db, key, value)`.
    pub fn live_keys(&self) -> Vec<(usize, u32, Bytes, Bytes)> {
        let mut out = Vec::new();
        for (i, node) in self.nodes.iter().enumerate() {
            for (db, key, value) in node.live_keys(self.now) {
                out.push((i, db, key, value));
            }
        }
        out
    }

    /// No bytes or connects in flight, every workload done and every core without an
    /// operation: nothing more can change any node's data.
    pub fn is_quiet(&self) -> bool {
        self.in_flight == 0 && self.is_finished()
    }

    /// Every workload is done and no core has an operation left: no hold can start or end.
    /// A dead client's calls never finish: it counts as done.
    pub fn is_finished(&self) -> bool {
        self.clients
            .iter()
            .all(|c| c.dead || (c.workload.is_done() && c.core.active_ops() == 0))
    }

    /// Hash of everything processed so far; equal for equal seeds.
    pub fn trace_hash(&self) -> u64 {
        self.trace.hash()
    }

    /// Steps until `stop` holds or the next event is after `limit` (true), or `max_events`
    /// were processed first (false).
    fn run_while(&mut self, limit: SimTime, max_events: u64, stop: fn(&Self) -> bool) -> bool {
        for _ in 0..max_events {
            if stop(self) {
                return true;
            }
            match self.heap.peek() {
                Some(Reverse(next)) if next.at <= limit => self.step(),
                _ => return true,
            };
        }
        false
    }

    pub(crate) fn schedule(&mut self, at: SimTime, ev: Ev) {
        if ev.in_transit() {
            self.in_flight += 1;
        }
        self.seq += 1;
        let seq = self.seq;
        self.heap.push(Reverse(Scheduled { at, seq, ev }));
    }

    fn dispatch(&mut self, ev: Ev) {
        match ev {
            Ev::Wake { client, epoch } => self.on_wake(client, epoch),
            Ev::ToNode {
                client,
                node,
                epoch,
                bytes,
            } => self.on_node_bytes(client, node, epoch, &bytes),
            Ev::ToClient {
                client,
                node,
                epoch,
                bytes,
            } => self.on_client_bytes(client, node, epoch, &bytes),
            Ev::ConnectDone {
                client,
                node,
                epoch,
            } => self.on_connect_done(client, node, epoch),
            Ev::Fault => self.inject_fault(),
            Ev::Resume { node, incarnation } => self.on_resume(node, incarnation),
            Ev::Restart { node } => self.on_restart(node),
            Ev::HalfClose {
                client,
                node,
                epoch,
            } => self.on_half_close(client, node, epoch),
            Ev::LateDelivery { orphan } => self.on_late_delivery(orphan),
            Ev::ReleaseCheck {
                client,
                op,
                deadline,
            } => self.on_release_check(client, op, deadline),
            Ev::Push {
                client,
                node,
                epoch,
                channel,
                bytes,
            } => self.on_held_push((client, node, epoch), &channel, bytes),
            // A late client's first drain: its core asks to connect now.
            Ev::Start { client } => self.settle(client),
            Ev::Death { death } => self.on_death(death),
        }
    }
}

impl Ord for Scheduled {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

impl PartialOrd for Scheduled {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Scheduled {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}

impl Eq for Scheduled {}

/// Livelock guard for [`Sim::run`]: far more events than any bounded workload produces.
const MAX_EVENTS: u64 = 5_000_000;
/// Salts of the dice of late clients and of tasks after a client's first: streams of their
/// own, so that a scenario without them draws what it drew before they existed.
const LATE_CLIENT_DICE: u64 = 0x1a7e_c11e;
const TASK_DICE: u64 = 0x7a5c_5eed;
/// An odd multiplier that spreads small indices over the 64 bits of a seed.
const SPREAD: u64 = 0x9e37_79b9_7f4a_7c15;

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use redlock_core::Config;

    use crate::network::LinkState;
    use crate::{Resources, Scenario, Sim, SimTime};

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn scenario(seed: u64) -> Scenario {
        let config = Config::builder(3).ttl(ms(300)).build().expect("valid");
        let mut s = Scenario::new(seed, config);
        s.clients = 1;
        s.resources = Resources::Shared(1);
        s.workload.ops_per_client = 2;
        s.time_limit = ms(5_000);
        s
    }

    #[test]
    fn a_late_client_connects_at_its_start_and_leaves_the_others_runs_alone() {
        let mut s = scenario(3);
        let plain = Sim::new(s.clone()).run();
        s.late_clients = vec![ms(700)];
        let mut sim = Sim::new(s.clone());
        sim.run_until(ms(699), 1_000_000);
        assert!(
            (0..3).all(|n| sim.net.link_ref(1, n).conn.is_none()),
            "the late client connected before its start"
        );
        assert!(sim.net.link_ref(0, 0).state == LinkState::Open);
        sim.run_until(ms(710), 1_000_000);
        assert!((0..3).all(|n| sim.net.link_ref(1, n).state == LinkState::Open));
        let report = Sim::new(s).run();
        assert!(report.workloads_done && report.violation.is_none());
        let late = (report.checker.ops().iter()).filter(|r| r.client == 1);
        assert!(
            late.clone().count() == 2
                && late
                    .clone()
                    .all(|r| r.started_at >= SimTime::from_duration(ms(700)))
        );
        // The first client's calls are the same as without the late one (it locked and
        // released before 700 ms: nothing of the late client's could change them).
        let first = |r: &crate::Report| {
            let ops = r.checker.ops().iter().filter(|o| o.client == 0);
            ops.map(|o| o.started_at).collect::<Vec<_>>()
        };
        assert_eq!(first(&report), first(&plain));
    }

    #[test]
    fn tasks_of_one_client_queue_their_calls_in_its_line() {
        let mut s = scenario(4);
        s.workload.tasks = 3;
        s.workload.hold = (0.05, 0.1);
        s.workload.start_spread = ms(0);
        s.workload.token_chance = 1.0;
        let report = Sim::new(s).run();
        assert!(report.workloads_done && report.violation.is_none());
        let ops = report.checker.ops();
        assert_eq!(ops.len(), 6, "two calls per task");
        assert!(ops.iter().all(|r| r.acquired_after.is_some()), "{ops:?}");
        // The three first calls overlap: two waited in the line behind the first.
        let starts: Vec<SimTime> = ops.iter().map(|r| r.started_at).take(3).collect();
        let first_end = report.checker.intervals()[0].end;
        assert!(starts.iter().all(|t| *t < first_end), "{starts:?}");
        let mut tokens: Vec<String> = (ops.iter())
            .filter_map(|r| {
                r.token
                    .as_ref()
                    .map(|t| String::from_utf8_lossy(t.as_bytes()).into())
            })
            .collect();
        tokens.sort();
        tokens.dedup();
        assert_eq!(
            tokens.len(),
            6,
            "a token per call, across tasks: {tokens:?}"
        );
    }
}
