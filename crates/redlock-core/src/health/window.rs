//! The restart quarantine's window (docs/safety.md, "Restarts and lost writes"): how wide
//! it is (the largest ttl and its drift, and for a client that fences, the fencing floor's
//! time given the spread of the nodes' clocks), and how a wider one reaches back to the
//! restarts found under a narrower one.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::{Health, NodeHealth, spread};
use crate::config::Config;
use crate::io::Event;
use crate::quarantine::{Quarantine, QuarantineCause};
use crate::time;

impl NodeHealth {
    /// The quarantine window grew `by`: a restart quarantine (the node's start plus the
    /// window as it was) is lengthened by as much, ended or not; returns it if that puts it
    /// back in force at `now`.
    pub(super) fn lengthen(&mut self, by: Duration, now: Instant) -> Option<Quarantine> {
        let restart = |q: &&mut Quarantine| {
            matches!(q.cause, QuarantineCause::Restarted | QuarantineCause::Young)
        };
        let q = self.quarantine.as_mut().filter(restart)?;
        let was = q.until > now;
        q.until = time::add(q.until, by);
        (!was && q.until > now).then_some(*q)
    }
}

impl Health {
    /// A lock of `ttl` started at `now`, fenced or not: the window grows to cover it (the
    /// first fenced lock also makes it cover the fencing floor, from the spread of the
    /// `nodes`' wall clocks).
    #[inline]
    pub(crate) fn lock_started<N: AsRef<NodeHealth> + AsMut<NodeHealth>>(
        &mut self,
        (config, nodes): (&Config, &mut [N]),
        now: Instant,
        (ttl, fenced): (Duration, bool),
        events: &mut VecDeque<Event>,
    ) {
        let first_fenced = fenced && !self.fenced;
        if ttl > self.largest_ttl || first_fenced {
            self.largest_ttl = self.largest_ttl.max(ttl);
            if first_fenced {
                self.fenced = true;
                self.spread = spread(nodes, now);
            }
            self.set_window(config, nodes, now, events);
        }
    }

    /// The window from the largest ttl and the clocks' spread, at `now`. A longer one than
    /// before reaches back: a node that restarted less than the new window ago is
    /// quarantined again, for the rest of it, as if the window had been this long when its
    /// restart was found (docs/safety.md, "Restarts and lost writes": a client's first
    /// fenced lock, whose floor needs a longer window, may come after a restart that the
    /// shorter one let back in).
    pub(super) fn set_window<N: AsMut<NodeHealth>>(
        &mut self,
        config: &Config,
        nodes: &mut [N],
        now: Instant,
        events: &mut VecDeque<Event>,
    ) {
        let window = self.window(config);
        // Past the widest window so far only: a spread that shrinks and grows back must not
        // lengthen them again.
        let by = window.saturating_sub(self.widest);
        self.window = window;
        self.widest = self.widest.max(window);
        if by.is_zero() {
            return;
        }
        for (i, node) in nodes.iter_mut().enumerate() {
            if let Some(q) = node.as_mut().lengthen(by, now) {
                events.push_back(Event::NodeQuarantined {
                    node: crate::round::name(&config.names, i),
                    until: q.until,
                    cause: q.cause,
                });
            }
        }
    }

    /// The restart quarantine's window: the largest ttl and its drift, and for a client that
    /// fences, at least the time the fencing floor needs to pass every number a restarted
    /// node may have lost, given how far apart the nodes' wall clocks are (docs/safety.md,
    /// "Restarts and lost writes").
    pub(super) fn window(&self, config: &Config) -> Duration {
        let window = config.quarantine_window(self.largest_ttl);
        if !(self.fenced || config.fencing.by_default) {
            return window;
        }
        config
            .fence_window(self.spread)
            .map_or(window, |f| window.max(f))
    }
}
