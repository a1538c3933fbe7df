//! The user code of one simulated client: acquire, hold for a random time (sometimes past
//! the validity), extend or auto-extend, release, sometimes cancel midway, repeat; in one
//! task or in several concurrent ones ([`Tasks`]) that share the client. Each lock is a
//! mutex, or of the kind the workload's `KindMix` draws (`kind_mix.rs`).
//!
//! A workload reads only its client's clock (`Instant`s) and the lock events; it returns
//! actions for the driver to perform and never touches the core itself.

use std::time::{Duration, Instant};

use redlock_core::{Event, LockKind, LockOptions, OpId, Resource, Token};

use crate::holds::Hold;
use crate::random::Dice;
use crate::scenario::{Resources, SuppliedToken, WorkloadKnobs};

/// Something the workload wants done to its client's core now.
#[derive(Debug, Clone)]
pub(crate) enum Action {
    Acquire {
        /// What the call holds once acquired (a mutex: the one resource; a multi-lock:
        /// its set, sorted), as the checker records it.
        hold: Hold,
        /// The resources as the call passes them: a multi-lock's set (in the order drawn)
        /// goes to `acquire_all_with`, one resource to `acquire_with`.
        resources: Vec<Resource>,
        /// Boxed: the options are most of an action's size.
        options: Box<LockOptions>,
    },
    Extend(OpId),
    Release(OpId),
    Cancel(OpId),
}

#[derive(Debug, Clone)]
enum Phase {
    /// Between operations; the next starts at `next`.
    Idle {
        next: Instant,
    },
    /// `acquire` was called and `Acquire` is not yet answered by the driver.
    Starting,
    Acquiring {
        op: OpId,
        cancel_at: Option<Instant>,
    },
    Held {
        op: OpId,
        release_at: Instant,
        extend_at: Option<Instant>,
        extends: u32,
    },
    /// Release, cancel or loss under way; waiting for the final event.
    Ending {
        op: OpId,
    },
    Done,
}

/// The concurrent tasks of one client ([`WorkloadKnobs::tasks`]): each a [`Workload`] of
/// its own, all acting through the one core. Lock events go to every task (each keeps only
/// its own operation's); the driver's follow-up calls (`started`, `extended`) go to the task
/// whose action it just performed.
#[derive(Debug)]
pub(crate) struct Tasks {
    tasks: Vec<Workload>,
    /// The task whose action was polled last.
    last: usize,
}

impl Tasks {
    /// The tasks of client `client`: the first draws from `dice`, task `t` after it from
    /// `more(t)`; the first operations start uniformly within the start spread after `origin`.
    pub(crate) fn new(
        client: usize,
        knobs: WorkloadKnobs,
        resources: Resources,
        dice: Dice,
        origin: Instant,
        mut more: impl FnMut(usize) -> Dice,
    ) -> Self {
        let count = knobs.tasks.max(1) as usize;
        let mut tasks = vec![Workload::new(client, knobs, resources, dice, origin)];
        for t in 1..count {
            let mut task = Workload::new(client, knobs, resources, more(t), origin);
            task.task = t;
            tasks.push(task);
        }
        Self { tasks, last: 0 }
    }

    /// Every task started and finished all its operations.
    pub(crate) fn is_done(&self) -> bool {
        self.tasks.iter().all(Workload::is_done)
    }

    /// The earliest moment a task wants to act on its own.
    pub(crate) fn next_wake(&self) -> Option<Instant> {
        self.tasks.iter().filter_map(Workload::next_wake).min()
    }

    /// The next action due at `now` of any task, in task order. Call until `None`.
    pub(crate) fn poll_action(&mut self, now: Instant) -> Option<Action> {
        // Bounded: one pass over the tasks.
        for (t, task) in self.tasks.iter_mut().enumerate() {
            if let Some(action) = task.poll_action(now) {
                self.last = t;
                return Some(action);
            }
        }
        None
    }

    /// The driver started the acquisition the last polled task asked for.
    pub(crate) fn started(&mut self, now: Instant, op: OpId) {
        self.tasks[self.last].started(now, op);
    }

    /// A lock event for this client: each task looks at it.
    pub(crate) fn on_event(&mut self, now: Instant, event: &Event) {
        for task in &mut self.tasks {
            task.on_event(now, event);
        }
    }

    /// Counts an explicit extension called by the last polled task.
    pub(crate) fn extended(&mut self) {
        self.tasks[self.last].extended();
    }
}

/// One task's workload.
#[derive(Debug)]
pub(crate) struct Workload {
    client: usize,
    /// Which task of its client (0 for a client's only one).
    task: usize,
    knobs: WorkloadKnobs,
    resources: Resources,
    dice: Dice,
    started: u32,
    phase: Phase,
    /// Whether the current lock was taken with auto-extension.
    auto: bool,
}

impl Workload {
    pub(crate) fn new(
        client: usize,
        knobs: WorkloadKnobs,
        resources: Resources,
        mut dice: Dice,
        origin: Instant,
    ) -> Self {
        let first = origin + knobs.start_after + dice.duration(Duration::ZERO, knobs.start_spread);
        let phase = if knobs.ops_per_client == 0 {
            Phase::Done
        } else {
            Phase::Idle { next: first }
        };
        Self {
            client,
            task: 0,
            knobs,
            resources,
            dice,
            started: 0,
            phase,
            auto: false,
        }
    }

    /// All operations started and finished.
    pub(crate) fn is_done(&self) -> bool {
        matches!(self.phase, Phase::Done)
    }

    /// When the workload next wants to act on its own (not counting lock events).
    pub(crate) fn next_wake(&self) -> Option<Instant> {
        match &self.phase {
            Phase::Idle { next } => Some(*next),
            Phase::Acquiring { cancel_at, .. } => *cancel_at,
            Phase::Held {
                release_at,
                extend_at,
                ..
            } => Some(extend_at.map_or(*release_at, |e| e.min(*release_at))),
            Phase::Starting | Phase::Ending { .. } | Phase::Done => None,
        }
    }

    /// The next action due at `now`, if any. Call until `None`.
    pub(crate) fn poll_action(&mut self, now: Instant) -> Option<Action> {
        match &mut self.phase {
            Phase::Idle { next } if *next <= now => {
                self.started += 1;
                self.phase = Phase::Starting;
                Some(self.acquire_action())
            }
            Phase::Acquiring { op, cancel_at } if cancel_at.is_some_and(|t| t <= now) => {
                let op = *op;
                self.phase = Phase::Ending { op };
                Some(Action::Cancel(op))
            }
            Phase::Held { op, extend_at, .. } if extend_at.is_some_and(|t| t <= now) => {
                *extend_at = None;
                Some(Action::Extend(*op))
            }
            Phase::Held { op, release_at, .. } if *release_at <= now => {
                let op = *op;
                self.phase = Phase::Ending { op };
                Some(Action::Release(op))
            }
            _ => None,
        }
    }

    /// The driver started the acquisition asked for last.
    pub(crate) fn started(&mut self, now: Instant, op: OpId) {
        let cancel_at = self
            .dice
            .chance(self.knobs.cancel_chance)
            .then(|| now + self.dice.duration(Duration::ZERO, self.knobs.cancel_within));
        self.phase = Phase::Acquiring { op, cancel_at };
    }

    /// A lock event for this client.
    pub(crate) fn on_event(&mut self, now: Instant, event: &Event) {
        let current = match &self.phase {
            Phase::Acquiring { op, .. } | Phase::Held { op, .. } | Phase::Ending { op } => *op,
            _ => return,
        };
        if event.op() != Some(current) {
            return;
        }
        match (event, &mut self.phase) {
            (Event::Acquired(a), Phase::Acquiring { .. }) => {
                let (lo, hi) = self.knobs.hold;
                let mut hold = a.validity.mul_f64(self.dice.float(lo, hi));
                if self.auto {
                    // Long enough for the renewals to matter.
                    let renewals = self.knobs.auto_extend.max_renewals.unwrap_or(1);
                    hold = hold.mul_f64(f64::from(renewals + 1));
                }
                let extend_at = self.plan_extend(now, a.validity);
                self.phase = Phase::Held {
                    op: current,
                    release_at: now + hold,
                    extend_at,
                    extends: 0,
                };
            }
            (Event::Extended { validity, .. }, Phase::Held { .. }) => {
                let validity = *validity;
                let (lo, hi) = self.knobs.hold;
                let hold = validity.mul_f64(self.dice.float(lo, hi));
                let next_extend = self.plan_extend(now, validity);
                if let Phase::Held {
                    release_at,
                    extend_at,
                    extends,
                    ..
                } = &mut self.phase
                {
                    *release_at = now + hold;
                    if *extends < self.knobs.max_extends {
                        *extend_at = next_extend;
                    }
                }
            }
            (Event::Lost { .. }, Phase::Held { .. }) => {
                self.phase = Phase::Ending { op: current };
            }
            (Event::AcquireFailed { .. } | Event::Released { .. }, _) => self.next_op(now),
            _ => {}
        }
    }

    /// Counts an explicit extension call (after `Action::Extend` was performed).
    pub(crate) fn extended(&mut self) {
        if let Phase::Held { extends, .. } = &mut self.phase {
            *extends += 1;
        }
    }

    fn acquire_action(&mut self) -> Action {
        let (hold, kind, resources) = if self.knobs.kinds.mutex_only() {
            let resource = match self.resources {
                Resources::Shared(n) => Resource::from(format!("r{}", self.dice.index(n.max(1)))),
                Resources::PerClient => Resource::from(format!("c{}", self.client)),
            };
            let hold = Hold::Exclusive(vec![resource.clone()]);
            (hold, LockKind::Mutex, vec![resource])
        } else {
            let shared = match self.resources {
                Resources::Shared(n) => Some(n),
                Resources::PerClient => None,
            };
            let kinds = self.knobs.kinds;
            kinds.draw(&mut self.dice, self.client, shared)
        };
        let k = &self.knobs;
        let ttl = self
            .dice
            .millis(k.ttl.0, k.ttl.1)
            .max(Duration::from_millis(1));
        let mut options = LockOptions::default().ttl(ttl);
        self.auto = self.dice.chance(k.auto_extend_chance);
        if self.auto {
            options = options.auto_extend(Some(k.auto_extend));
        }
        if self.dice.chance(k.token_chance) {
            let token = match k.supplied_token {
                SuppliedToken::PerCall if self.task > 0 => {
                    format!("c{}t{}-o{}", self.client, self.task, self.started)
                }
                SuppliedToken::PerCall => format!("c{}-o{}", self.client, self.started),
                SuppliedToken::PerClient => format!("c{}", self.client),
            };
            // A short ASCII string is always a valid token.
            options = options.token(Token::new(token).expect("short non-empty token"));
        }
        if k.fenced_chance > 0.0 {
            // Only a mutex can be fenced (docs/kinds.md); the die is cast for every kind.
            let fenced = self.dice.chance(k.fenced_chance);
            options = options.fenced(fenced && kind == LockKind::Mutex && resources.len() == 1);
        }
        if kind != LockKind::Mutex {
            options = options.kind(kind);
        }
        Action::Acquire {
            hold,
            resources,
            options: Box::new(options),
        }
    }

    fn plan_extend(&mut self, now: Instant, validity: Duration) -> Option<Instant> {
        let (lo, hi) = self.knobs.extend_at;
        let at = validity.mul_f64(self.dice.float(lo, hi));
        self.dice.chance(self.knobs.extend_chance).then(|| now + at)
    }

    fn next_op(&mut self, now: Instant) {
        self.phase = if self.started >= self.knobs.ops_per_client {
            Phase::Done
        } else {
            let (lo, hi) = self.knobs.think;
            Phase::Idle {
                next: now + self.dice.duration(lo, hi),
            }
        };
    }
}
