//! Fault injection: at random times, pause a node, cut a link, flush a node's script cache,
//! crash a node (losing its data and script cache) and restart it after a delay,
//! half-close a link (`orphan.rs`), evict a lock's key, or turn it into a list.
//!
//! Faults act on processes and links only; they never touch a client's core except through
//! the `Disconnected` inputs a real driver would see.

use crate::clock::SimTime;
use crate::event::Ev;
use crate::network::LinkState;
use crate::node::NodeState;
use crate::sim::Sim;

impl Sim {
    /// Injects one random fault, then schedules the next.
    pub(crate) fn inject_fault(&mut self) {
        let knobs = self.scenario.faults;
        let weights = [
            knobs.pause_weight,
            knobs.cut_weight,
            knobs.crash_weight,
            knobs.flush_weight,
            knobs.half_close_weight,
            knobs.evict_weight,
            knobs.retype_weight,
        ];
        let total: u32 = weights.iter().sum();
        if total > 0 {
            let mut pick = self.dice.range(0, u64::from(total) - 1) as u32;
            let kind = weights
                .iter()
                .position(|w| {
                    if pick < *w {
                        true
                    } else {
                        pick -= w;
                        false
                    }
                })
                .unwrap_or(0);
            match kind {
                0 => self.pause_random_node(),
                1 => self.cut_random_link(),
                2 => self.crash_random_node(),
                3 => {
                    let node = self.dice.index(self.nodes.len());
                    self.nodes[node].flush_scripts();
                    self.stats.flushes += 1;
                    self.note(|| format!("node {node} script cache flushed"));
                }
                4 => self.half_close_random_link(),
                5 => self.evict_random_key(),
                _ => self.retype_random_key(),
            }
        }
        if let Some((lo, hi)) = knobs.every {
            let next = self.now.saturating_add(self.dice.duration(lo, hi));
            if next <= SimTime::from_duration(knobs.until) {
                self.schedule(next, Ev::Fault);
            }
        }
    }

    /// Pauses a running node (SIGSTOP) for a random time.
    pub fn pause_node(&mut self, node: usize) {
        if self.nodes[node].state() != NodeState::Up {
            return;
        }
        let (lo, hi) = self.scenario.faults.pause;
        let until = self.now.saturating_add(self.dice.duration(lo, hi));
        self.nodes[node].pause();
        self.stats.pauses += 1;
        self.note(|| format!("node {node} paused until {until}"));
        let incarnation = self.nodes[node].incarnation();
        self.schedule(until, Ev::Resume { node, incarnation });
    }

    /// Crashes a node now: its connections drop, its data and script cache are lost, and it
    /// restarts after the scenario's restart delay.
    pub fn crash_node(&mut self, node: usize) {
        if self.nodes[node].state() == NodeState::Down {
            return;
        }
        let knobs = self.scenario.faults;
        let persist = knobs.persist_chance > 0.0 && self.dice.chance(knobs.persist_chance);
        self.nodes[node].crash_with(persist);
        self.last_crash[node] = Some(self.now);
        self.stats.crashes += 1;
        self.stats.persisted_crashes += u32::from(persist);
        self.note(|| format!("node {node} crashed (data kept: {persist})"));
        for c in 0..self.clients.len() {
            self.cut(c, node);
        }
        self.kill_orphans(node);
        let (lo, hi) = self.scenario.faults.restart_delay;
        let at = self.now.saturating_add(self.dice.duration(lo, hi));
        self.schedule(at, Ev::Restart { node });
    }

    /// The crashed node comes back: with its data if the crash kept it, else empty, its
    /// uptime or wall clock stepped ahead as the scenario says, and then with its wall clock
    /// stepped back by the scenario's `restart_clock_back`.
    pub(crate) fn on_restart(&mut self, node: usize) {
        let back = self.scenario.faults.restart_clock_back;
        let ahead = self.scenario.faults.restart_clock_ahead;
        let empty = !self.nodes[node].persisted();
        self.nodes[node].restart(self.now);
        if !ahead.is_zero() {
            // After the process started: its uptime (wall clock) jumps with it.
            let nanos = i64::try_from(ahead.as_nanos()).unwrap_or(i64::MAX);
            self.nodes[node].step_wall(nanos);
        }
        let uptime_ahead = self.scenario.faults.restart_uptime_ahead;
        if !uptime_ahead.is_zero() {
            let nanos = u64::try_from(uptime_ahead.as_nanos()).unwrap_or(u64::MAX);
            self.nodes[node].backdate_start(nanos);
        }
        if empty && !back.is_zero() {
            let nanos = i64::try_from(back.as_nanos()).unwrap_or(i64::MAX);
            self.nodes[node].step_wall(-nanos);
            self.stats.clocks_stepped_back += 1;
        }
        self.note(|| format!("node {node} restarted (empty: {empty})"));
    }

    /// Evicts one key with a ttl from a random running node.
    fn evict_random_key(&mut self) {
        let node = self.dice.index(self.nodes.len());
        if self.nodes[node].state() == NodeState::Down {
            return;
        }
        let now = self.now;
        let dice = &mut self.dice;
        if let Some(key) = self.nodes[node].evict_volatile(now, |n| dice.index(n)) {
            self.stats.evictions += 1;
            self.note(|| format!("node {node} evicted {key:?}"));
        }
    }

    /// Turns one key with a ttl on a random running node into a list.
    fn retype_random_key(&mut self) {
        let node = self.dice.index(self.nodes.len());
        if self.nodes[node].state() == NodeState::Down {
            return;
        }
        let now = self.now;
        let dice = &mut self.dice;
        if let Some(key) = self.nodes[node].retype_volatile(now, |n| dice.index(n)) {
            self.stats.retypes += 1;
            self.note(|| format!("node {node} retyped {key:?} to a list"));
        }
    }

    pub(crate) fn on_resume(&mut self, node: usize, incarnation: u32) {
        let n = &mut self.nodes[node];
        if n.incarnation() != incarnation || n.state() != NodeState::Paused {
            return;
        }
        n.resume();
        // Redis serves the clients with pending input one after another.
        for c in 0..self.clients.len() {
            let link = self.net.link_ref(c, node);
            if link.state == LinkState::Open && !link.inbox.is_empty() {
                self.process_inbox(c, node);
            }
        }
        self.process_orphans(node);
    }

    fn pause_random_node(&mut self) {
        let up: Vec<usize> = (0..self.nodes.len())
            .filter(|i| self.nodes[*i].state() == NodeState::Up)
            .collect();
        if !up.is_empty() {
            let node = up[self.dice.index(up.len())];
            self.pause_node(node);
        }
    }

    fn cut_random_link(&mut self) {
        let open = self.net.open_links();
        if !open.is_empty() {
            let (c, n) = open[self.dice.index(open.len())];
            self.stats.cuts += 1;
            self.note(|| format!("link client {c} - node {n} cut"));
            self.cut(c, n);
        }
    }

    fn crash_random_node(&mut self) {
        let down = self
            .nodes
            .iter()
            .filter(|n| n.state() == NodeState::Down)
            .count();
        if down >= self.scenario.faults.max_down {
            return;
        }
        let alive: Vec<usize> = (0..self.nodes.len())
            .filter(|i| self.nodes[*i].state() != NodeState::Down)
            .collect();
        if !alive.is_empty() {
            let node = alive[self.dice.index(alive.len())];
            if self.near_new_client(node) {
                self.stats.crashes_spared += 1;
                self.note(|| format!("node {node} spared: a new client starts near now"));
                return;
            }
            self.crash_node(node);
        }
    }

    /// Whether crashing `node` now would make a quorum of nodes restart within the
    /// scenario's `spare_new_clients` window while a late client starts near now: what a
    /// client that has never seen the nodes cannot tell from a cluster started together.
    /// With restarted nodes reporting a stepped uptime, one such restart is already
    /// invisible to it: the node looks old (docs/safety.md, "What it cannot catch").
    fn near_new_client(&self, node: usize) -> bool {
        let Some((before, after)) = self.scenario.faults.spare_new_clients else {
            return false;
        };
        let now = self.now.since_start();
        let near = (self.scenario.late_clients.iter()).any(|&start| {
            now.saturating_add(before) >= start && now <= start.saturating_add(after)
        });
        let recent = (0..self.nodes.len())
            .filter(|&j| {
                j == node || self.last_crash[j].is_some_and(|t| self.now.saturating_sub(t) < before)
            })
            .count();
        let invisible = match self.scenario.faults.restart_uptime_ahead.is_zero() {
            true => self.scenario.config.quorum(),
            false => 1,
        };
        near && recent >= invisible
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use redlock_core::Config;

    use crate::{FaultKnobs, Scenario, Sim};

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn crashes_spare_the_span_around_a_late_clients_start() {
        let config = Config::builder(3).ttl(ms(300)).build().expect("valid");
        let mut s = Scenario::new(8, config);
        s.clients = 1;
        s.workload.ops_per_client = 0;
        s.late_clients = vec![ms(1_000)];
        s.time_limit = ms(2_000);
        s.faults = FaultKnobs {
            every: Some((ms(5), ms(10))),
            pause_weight: 0,
            cut_weight: 0,
            flush_weight: 0,
            restart_delay: (ms(0), ms(0)),
            spare_new_clients: Some((ms(400), ms(100))),
            ..FaultKnobs::default()
        };
        let mut sim = Sim::new(s);
        sim.enable_log();
        sim.run_until(ms(2_000), 1_000_000);
        let at = |l: &String| l.split("ms ").next().and_then(|t| t.parse::<f64>().ok());
        let node = |l: &String| {
            let n = l.split("node ").nth(1)?;
            n.split(' ').next().map(str::to_owned)
        };
        let crashes: Vec<(f64, String)> = (sim.log().iter())
            .filter(|l| l.contains(" crashed "))
            .filter_map(|l| Some((at(l)?, node(l)?)))
            .collect();
        assert!(
            crashes.iter().any(|(t, _)| *t < 600.0) && crashes.iter().any(|(t, _)| *t > 1_100.0)
        );
        // Near the new client's start, never two nodes (a quorum of 3) crashed within 400 ms.
        for (t, n) in crashes
            .iter()
            .filter(|(t, _)| (600.0..=1_100.0).contains(t))
        {
            let others = (crashes.iter())
                .filter(|(u, m)| m != n && u <= t && t - u < 400.0)
                .count();
            assert_eq!(others, 0, "{crashes:?}");
        }
        assert!(sim.stats.crashes_spared > 0);
    }
}
