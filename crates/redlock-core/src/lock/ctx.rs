//! [`Ctx`]: what every phase of a [`Lock`](super::Lock) shares: the lock's identity and
//! parameters, its events waiting to be polled, the silent cleanup releases of failed
//! attempts, and the numbering (and recycling) of its rounds. Each phase's handlers take it
//! by `&mut` beside their own state (mod.rs, `Phase`).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};

use crate::command::Command;
use crate::config::Config;
use crate::error::UsageError;
use crate::id::{NodeName, OpId};
use crate::io::Event;
use crate::kinds::{self, Kinded, LockKind};
use crate::options::{LockOptions, LockParams, ValidityFrom};
use crate::quorum::{self, Decision};
use crate::round::{Round, Slot};
use crate::token::{Resource, Token};
use crate::waiters::Succession;

/// What every phase shares: the lock's identity and parameters, its events, the silent
/// cleanup releases of failed attempts, and round numbering.
#[derive(Debug)]
pub(super) struct Ctx {
    /// The operation id the lock's events carry.
    pub(super) op: OpId,
    /// The resource locked (the key on every node).
    pub(super) resource: Resource,
    /// The lock's options resolved against the configuration (options.rs): shared by every
    /// lock of a client with the default options, which it resolves once. Out of line, as the
    /// supplied token, so that a lock's table entry stays small enough for the allocator's
    /// fast path (client/locks.rs); a lock that changes its own copies it first.
    pub(super) params: Arc<LockParams>,
    /// The nodes' names, for failure reasons and statistics.
    pub(super) names: Arc<[NodeName]>,
    /// The token the application chose, if it did (else each attempt draws one).
    pub(super) supplied_token: Option<Box<Token>>,
    /// The fencing counter key F of a fenced lock: the resource's key and the configured
    /// suffix.
    pub(super) fence_key: Option<Bytes>,
    /// A lock of a kind beyond the mutex (kinds/mod.rs): its commands and keys; `None` for
    /// a mutex of one resource.
    pub(super) kind: Option<Kinded>,
    /// Releases of failed or cancelled attempts; they report nothing.
    pub(super) cleanup: Vec<Round>,
    /// The last round's number.
    next_seq: u32,
    /// Events waiting for [`Lock::poll_event`](super::Lock::poll_event).
    pub(super) events: Events,
    /// The slots of the last finished round, kept for the next round's use.
    pub(super) spare_slots: Vec<Slot>,
    /// Another client was met since the client last asked: an attempt found the lock held
    /// by it, or the release found it waiting (queue.rs: a contested line hands over
    /// fairly).
    pub(super) contested: bool,
    /// A node's release found someone subscribed to it (the release script answered 2).
    pub(super) awaited: bool,
    /// The call started waiting for another client's release since the client last asked:
    /// the client announces it on the waiting channel (notify.rs), once per call.
    pub(super) waits: bool,
    /// A node refused the waiters' queue's script since the client last asked.
    pub(super) queue_refused: bool,
    /// The nodes' wall clock in ms at an instant, as the client estimated it when the lock
    /// started: a waiter's ticket (waiters/mod.rs).
    pub(super) wall: Option<(Instant, u64)>,
    /// What the lock's release does in the waiters' queue (waiters/mod.rs): the place it kept
    /// from its grant, and the next call of its line it places (boxed: most locks have none).
    pub(super) succession: Option<Box<Succession>>,
}

/// Events waiting for [`Lock::poll_event`](super::Lock::poll_event). The first is kept
/// inline, so a lock that reports one event at a time (the usual case) never allocates for
/// them.
#[derive(Debug, Default)]
pub(super) struct Events {
    /// The oldest event; set only while `rest` is empty, so it is always the oldest.
    first: Option<Event>,
    /// The others, oldest first.
    rest: VecDeque<Event>,
}

impl Events {
    /// Queues `event` behind the others.
    #[inline]
    pub(super) fn push_back(&mut self, event: Event) {
        if self.first.is_none() && self.rest.is_empty() {
            self.first = Some(event);
        } else {
            self.rest.push_back(event);
        }
    }

    /// The oldest event, if any.
    #[inline]
    pub(super) fn pop_front(&mut self) -> Option<Event> {
        // Checked before taking: `take` of an empty slot still moves a whole `Event`.
        if self.first.is_some() {
            self.first.take()
        } else {
            self.rest.pop_front()
        }
    }
}

impl Ctx {
    /// The context of a new operation on `resource`; refuses an empty resource and bad
    /// options. `defaults`: the default options' parameters, if already resolved.
    pub(super) fn new(
        op: OpId,
        config: &Config,
        resource: Resource,
        (options, defaults): (&LockOptions, Option<&Arc<LockParams>>),
    ) -> Result<Self, UsageError> {
        if resource.as_bytes().is_empty() {
            return Err(UsageError::EmptyResource);
        }
        let params = options.resolve_shared(config, defaults);
        let params = params.map_err(UsageError::InvalidOption)?;
        let fence_key = params.fenced.then(|| {
            let mut key = BytesMut::from(resource.as_bytes());
            key.extend_from_slice(config.fencing.suffix.as_bytes());
            key.freeze()
        });
        // The writer's patience: its waiting mark lives for the ttl while it may retry.
        let single = params.retry.max_attempts == Some(1);
        let patience = if single { 0 } else { params.timing.ttl_ms };
        let kind = Kinded::new(params.kind, std::slice::from_ref(&resource), patience);
        Ok(Self {
            op,
            resource,
            params,
            names: Arc::clone(&config.names),
            supplied_token: options.token.clone().map(Box::new),
            fence_key,
            kind,
            cleanup: Vec::new(),
            next_seq: 0,
            events: Events::default(),
            spare_slots: Vec::new(),
            contested: false,
            waits: false,
            awaited: false,
            queue_refused: false,
            wall: None,
            succession: None,
        })
    }

    /// The context of a lock of several resources at once (a multi-lock, docs/kinds.md):
    /// sorted and deduplicated, the first one names the lock in its events. Refuses an
    /// empty list, a list of one resource repeated, a kind other than the mutex, and
    /// fencing.
    pub(super) fn with_set(
        op: OpId,
        config: &Config,
        resources: impl IntoIterator<Item = Resource>,
        options: &LockOptions,
    ) -> Result<Self, UsageError> {
        let set = kinds::resource_set(resources)?;
        if options.kind != LockKind::Mutex {
            let rule = "a lock of several resources is a mutex of each; readers, writers and \
                        semaphores lock one resource";
            let e = crate::error::ConfigError::new("kind", rule);
            return Err(UsageError::InvalidOption(e));
        }
        if options.fenced == Some(true) {
            return Err(UsageError::InvalidOption(kinds::fencing_refused()));
        }
        let unfenced = LockOptions {
            fenced: Some(false),
            ..options.clone()
        };
        let mut ctx = Self::new(op, config, set[0].clone(), (&unfenced, None))?;
        ctx.kind = Kinded::new(LockKind::Mutex, &set, 0);
        Ok(ctx)
    }

    /// A round of `command` to every node, needing the lock's quorum of yes votes.
    pub(super) fn new_round(&mut self, command: Command, now: Instant, deadline: Instant) -> Round {
        let n = self.params.nodes;
        let q = self.params.quorum;
        let slots = std::mem::take(&mut self.spare_slots);
        Round::new(self.seq(), command, now, deadline, (n, q), slots)
    }

    /// A round of `command` to the nodes `targets` marks, needing `quorum` yes votes among
    /// them (a fence write-back).
    pub(super) fn new_round_to(
        &mut self,
        command: Command,
        times: (Instant, Instant),
        targets: &[bool],
        quorum: usize,
    ) -> Round {
        let slots = std::mem::take(&mut self.spare_slots);
        Round::to_nodes(self.seq(), command, times, targets, quorum, slots)
    }

    /// Keeps a finished round's slots for the next round (saves an allocation per round).
    pub(super) fn recycle(&mut self, round: Round) {
        self.spare_slots = round.slots;
    }

    /// The next round's number (rounds are told apart by it: `RequestId::round`).
    pub(super) fn seq(&mut self) -> u32 {
        self.next_seq = self.next_seq.wrapping_add(1);
        self.next_seq
    }

    /// `t0 + ttl - drift` for a round started at `t0` and decided at `t1` (algorithm.md §4).
    pub(super) fn deadline_from(&self, t0: Instant, t1: Instant) -> Instant {
        self.deadline_over(t0, self.params.timing.ttl(), t1)
    }

    /// `t0 + span - drift` for a hold the nodes set for at least `span` from `t0`, decided
    /// at `t1` (a hold by grants: grant.rs); [`deadline_from`](Self::deadline_from) is the
    /// ttl's.
    pub(super) fn deadline_over(&self, t0: Instant, span: Duration, t1: Instant) -> Instant {
        let start = match self.params.validity_from {
            ValidityFrom::AttemptStart => t0,
            ValidityFrom::Decision => t1,
        };
        quorum::deadline(start, span, self.params.timing.drift())
    }

    /// Whether a round's votes decide it.
    #[inline]
    pub(super) fn decided(round: &Round) -> bool {
        round.decision() != Decision::Open
    }
}
