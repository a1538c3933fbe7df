//! Per-lock overrides ([`LockOptions`]) and the parameters one lock runs with once they are
//! resolved against the [`Config`].

use std::sync::Arc;
use std::time::Duration;

use crate::command::EXTEND_SCRIPT;
use crate::config::{Config, Timing, WaiterQueue, default_attempt_timeout};
use crate::error::ConfigError;
use crate::fencing::{FENCED_ACQUIRE_SCRIPT, FenceQuorum};
use crate::kinds::{self, KindScripts, LockKind};
use crate::policy::{AutoExtend, RetryDelay, RetryPolicy};
use crate::script::Script;
use crate::token::Token;
use crate::waiters::QUEUE_ACQUIRE_SCRIPT;

/// Per-lock overrides of the configuration. Unset fields take the [`Config`] values.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct LockOptions {
    /// Time to live for this lock.
    pub ttl: Option<Duration>,
    /// A caller-supplied value, such as an owner id, stored by every attempt
    /// [stamped](Token::stamped) with a fresh nonce (`<value>:<40 hex digits>`).
    ///
    /// It may be reused by every lock call: the nonce makes each stored value unique, so a
    /// late command of an earlier attempt or call can never touch a later one's key. The
    /// guard's token is the stamped value; [`Token::supplied`] gives yours back. It must
    /// not be a secret: anyone who can read the keys sees it.
    pub token: Option<Token>,
    /// Retry policy for this acquisition.
    pub retry: Option<RetryPolicy>,
    /// Delay function for this acquisition's retries (see [`RetryDelay`]).
    pub retry_delay: Option<RetryDelay>,
    /// Auto-extension for this lock: `Some(None)` turns it off, `Some(Some(..))` on.
    pub auto_extend: Option<Option<AutoExtend>>,
    /// Whether this lock is fenced (see [`ConfigBuilder::fencing`]); `None` takes the
    /// configuration's choice.
    ///
    /// [`ConfigBuilder::fencing`]: crate::ConfigBuilder::fencing
    pub fenced: Option<bool>,
    /// The kind of lock (docs/kinds.md): a mutex (the default), a reader, a writer or a
    /// permit of a counting semaphore.
    pub kind: LockKind,
}

impl LockOptions {
    /// Sets the ttl.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }

    /// Sets a caller-supplied value, stamped per attempt (see the [`token`](Self::token)
    /// field).
    pub fn token(mut self, token: Token) -> Self {
        self.token = Some(token);
        self
    }

    /// Sets the retry policy.
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = Some(retry);
        self
    }

    /// Computes this acquisition's retry delays with `delay`; see [`RetryDelay`].
    pub fn retry_delay(mut self, delay: RetryDelay) -> Self {
        self.retry_delay = Some(delay);
        self
    }

    /// Waits up to `wait` for the lock: attempts go on until `wait` has passed, with the
    /// configured retry delays.
    ///
    /// The configuration's attempt count does not cut the wait short; a cap set on these
    /// options with [`retry`](Self::retry) before this call still applies.
    pub fn max_wait(mut self, config: &Config, wait: Duration) -> Self {
        let mut retry = self.retry.unwrap_or(RetryPolicy {
            max_attempts: None,
            ..config.retry
        });
        retry.max_wait = Some(wait);
        self.retry = Some(retry);
        self
    }

    /// Fences this lock (or not): its acquisition hands out a fencing token,
    /// [`Acquired::fencing_token`](crate::Acquired::fencing_token).
    pub fn fenced(mut self, on: bool) -> Self {
        self.fenced = Some(on);
        self
    }

    /// Takes the lock as `kind` (docs/kinds.md): e.g. `LockKind::Read`, `LockKind::Write`
    /// or `LockKind::semaphore(3)`. Only a mutex can be fenced for now.
    pub fn kind(mut self, kind: LockKind) -> Self {
        self.kind = kind;
        self
    }

    /// Turns auto-extension on (`Some`) or off (`None`) for this lock.
    pub fn auto_extend(mut self, auto_extend: Option<AutoExtend>) -> Self {
        self.auto_extend = Some(auto_extend);
        self
    }

    /// [`resolve`](Self::resolve), shared: `defaults`, the default options' parameters
    /// resolved once against `config` (by the client), if these are the default options.
    pub(crate) fn resolve_shared(
        &self,
        config: &Config,
        defaults: Option<&Arc<LockParams>>,
    ) -> Result<Arc<LockParams>, ConfigError> {
        match defaults {
            Some(params) if *self == Self::default() => Ok(Arc::clone(params)),
            _ => self.resolve(config).map(Arc::new),
        }
    }

    /// Resolves the options against `config` into the parameters of one lock.
    pub(crate) fn resolve(&self, config: &Config) -> Result<LockParams, ConfigError> {
        let mut timing = config.timing;
        if let Some(ttl) = self.ttl {
            timing.ttl_ms = Timing::whole_ms(ttl)?;
            // A shorter ttl gets a proportionally shorter default attempt timeout.
            if timing.attempt_timeout >= ttl.saturating_sub(timing.drift()) {
                timing.attempt_timeout = default_attempt_timeout(ttl);
            }
            timing.check()?;
        }
        let retry = self.retry.unwrap_or(config.retry);
        retry.check()?;
        let auto_extend = self.auto_extend.unwrap_or(config.auto_extend);
        if let Some(auto) = &auto_extend {
            auto.check()?;
        }
        let fenced = self.fenced.unwrap_or(config.fencing.by_default);
        // A configuration that fences by default leaves the other kinds unfenced; only an
        // explicit `fenced(true)` on one of them is refused.
        let fenced = fenced && (self.kind == LockKind::Mutex || self.fenced == Some(true));
        self.kind.check(fenced)?;
        let params = LockParams {
            nodes: config.nodes.len(),
            quorum: config.quorum,
            timing,
            retry,
            retry_delay: self
                .retry_delay
                .clone()
                .or_else(|| config.retry_delay.clone()),
            auto_extend,
            release_timeout: config.release_timeout,
            validity_from: ValidityFrom::AttemptStart,
            extend_script: &EXTEND_SCRIPT,
            deadline_ends_lock: true,
            stamp_supplied: true,
            fenced,
            fenced_acquire_script: &FENCED_ACQUIRE_SCRIPT,
            fence_quorum: FenceQuorum::Max,
            pipeline_floor: true,
            queue: (config.waiter_queue)
                .and_then(|q| waiter_queue(q, &timing, &retry, fenced, self.kind)),
            queue_script: &QUEUE_ACQUIRE_SCRIPT,
            notify: config.release_notifications.is_some(),
            notification_jitter: (config.release_notifications)
                .map_or(Duration::ZERO, |n| n.jitter),
            release_in_background: true,
            refuse_for_good: true,
            carry_deadline: true,
            hand_over_within_ttl: true,
            head_tries_at_once: true,
            grant_within_place: true,
            placed_not_counted: true,
            kind: self.kind,
            kind_scripts: &KindScripts::SPEC,
            kind_quorum: true,
        };
        #[cfg(feature = "_mutants")]
        let params = match config.mutant {
            Some(mutant) => with_mutant(params, mutant),
            None => params,
        };
        Ok(with_kind_quorum(params))
    }
}

/// The patience of a lock's place in the waiters' queue in ms, if it queues: an unfenced
/// mutex does, when the queue is on (waiters/mod.rs). By default three longest retry delays and
/// two attempt timeouts, at least 100 ms: a live waiter renews its place with every attempt.
fn waiter_queue(
    queue: WaiterQueue,
    timing: &Timing,
    retry: &RetryPolicy,
    fenced: bool,
    kind: LockKind,
) -> Option<u64> {
    if fenced || kind != LockKind::Mutex {
        return None;
    }
    let derived = (retry.delay_max.saturating_mul(3))
        .saturating_add(timing.attempt_timeout.saturating_mul(2))
        .max(Duration::from_millis(100));
    let patience = queue.patience.unwrap_or(derived);
    Some(u64::try_from(patience.as_millis()).unwrap_or(u64::MAX))
}

/// The quorum of the lock's kind: a semaphore's is raised to rule out k + 1 holders
/// (kinds/mod.rs, `semaphore_quorum`); the other kinds keep the configuration's.
fn with_kind_quorum(mut params: LockParams) -> LockParams {
    if let (LockKind::Semaphore { permits }, true) = (params.kind, params.kind_quorum) {
        params.quorum = kinds::semaphore_quorum(params.nodes, params.quorum, permits);
    }
    params
}

/// The parameters with one deliberate bug, for the simulation's negative controls: the
/// only place a mutant changes anything.
#[cfg(feature = "_mutants")]
fn with_mutant(params: LockParams, mutant: crate::mutant::Mutant) -> LockParams {
    use crate::mutant::Mutant;
    match mutant {
        Mutant::QuorumHalf => LockParams {
            quorum: (params.nodes / 2).max(1),
            ..params
        },
        Mutant::ValidityFromQuorum => LockParams {
            validity_from: ValidityFrom::Decision,
            ..params
        },
        Mutant::ResurrectingExtend => LockParams {
            extend_script: &crate::command::RESURRECTING_EXTEND_SCRIPT,
            deadline_ends_lock: false,
            ..params
        },
        Mutant::SharedStoredValue => LockParams {
            stamp_supplied: false,
            ..params
        },
        Mutant::FenceMin
        | Mutant::FenceNoWriteBack
        | Mutant::FenceCountRefused
        | Mutant::FenceNoFloor
        | Mutant::FencePipelineNoFloor => with_fence_mutant(params, mutant),
        Mutant::PermanentRetried => LockParams {
            refuse_for_good: false,
            ..params
        },
        Mutant::ReleaseNotFinished => LockParams {
            release_in_background: false,
            ..params
        },
        Mutant::QueueNeverPrunes => LockParams {
            queue_script: &crate::waiters::QUEUE_ACQUIRE_NEVER_PRUNES_SCRIPT,
            ..params
        },
        Mutant::HandOverKeepsValidity => LockParams {
            carry_deadline: false,
            ..params
        },
        Mutant::HandOverPastTtl => LockParams {
            hand_over_within_ttl: false,
            ..params
        },
        Mutant::HeadWaitsForRelease => LockParams {
            head_tries_at_once: false,
            ..params
        },
        Mutant::GrantSpansTtl => LockParams {
            grant_within_place: false,
            ..params
        },
        Mutant::PlacedCallCounted => LockParams {
            placed_not_counted: false,
            ..params
        },
        Mutant::SemAcquireOffByOne
        | Mutant::WriteAcquireIgnoresReaders
        | Mutant::ReadExtendResurrects
        | Mutant::SemaphoreMajority
        | Mutant::MultiFirstKeyVote => with_kind_mutant(params, mutant),
        // Not lock parameters: read by the node's health (health.rs), the client (client.rs)
        // or the quarantine window (config.rs).
        Mutant::ForgetRunId
        | Mutant::SightingAtConnection
        | Mutant::FenceWindowTtlOnly
        | Mutant::LineDeafToWaiters
        | Mutant::DeafToAnnouncements
        | Mutant::SilentWaitersUnheard
        | Mutant::UnheardWaitersDoNotPoll
        | Mutant::ChannelKeptThroughRelease
        | Mutant::LateRefusalDropped => params,
    }
}

/// The parameters with one deliberate bug of fencing (docs/safety.md, "Fencing tokens"),
/// for the simulation's negative controls; `params` as they are for the other mutants.
#[cfg(feature = "_mutants")]
fn with_fence_mutant(params: LockParams, mutant: crate::mutant::Mutant) -> LockParams {
    use crate::mutant::Mutant;
    match mutant {
        Mutant::FenceMin => LockParams {
            fence_quorum: FenceQuorum::Min,
            ..params
        },
        Mutant::FenceNoWriteBack => LockParams {
            fence_quorum: FenceQuorum::NoWriteBack,
            ..params
        },
        Mutant::FenceCountRefused => LockParams {
            fence_quorum: FenceQuorum::CountRefused,
            ..params
        },
        Mutant::FenceNoFloor => LockParams {
            fenced_acquire_script: &crate::fencing::NO_FLOOR_FENCED_ACQUIRE_SCRIPT,
            ..params
        },
        Mutant::FencePipelineNoFloor => LockParams {
            pipeline_floor: false,
            ..params
        },
        _ => params,
    }
}

/// The parameters with one deliberate bug of the lock kinds (docs/kinds.md), for the
/// simulation's negative controls; `params` as they are for the other mutants.
#[cfg(feature = "_mutants")]
fn with_kind_mutant(params: LockParams, mutant: crate::mutant::Mutant) -> LockParams {
    use crate::mutant::Mutant;
    const OFF_BY_ONE: KindScripts = KindScripts {
        sem_acquire: &kinds::SEM_ACQUIRE_OFF_BY_ONE_SCRIPT,
        ..KindScripts::SPEC
    };
    const IGNORES_READERS: KindScripts = KindScripts {
        write_acquire: &kinds::WRITE_ACQUIRE_IGNORES_READERS_SCRIPT,
        ..KindScripts::SPEC
    };
    const RESURRECTS: KindScripts = KindScripts {
        read_extend: &kinds::READ_EXTEND_RESURRECTS_SCRIPT,
        ..KindScripts::SPEC
    };
    const ONE_BY_ONE: KindScripts = KindScripts {
        multi_one_by_one: true,
        ..KindScripts::SPEC
    };
    match mutant {
        Mutant::SemAcquireOffByOne => LockParams {
            kind_scripts: &OFF_BY_ONE,
            ..params
        },
        Mutant::WriteAcquireIgnoresReaders => LockParams {
            kind_scripts: &IGNORES_READERS,
            ..params
        },
        Mutant::ReadExtendResurrects => LockParams {
            kind_scripts: &RESURRECTS,
            deadline_ends_lock: false,
            ..params
        },
        Mutant::SemaphoreMajority => LockParams {
            kind_quorum: false,
            ..params
        },
        Mutant::MultiFirstKeyVote => LockParams {
            kind_scripts: &ONE_BY_ONE,
            ..params
        },
        _ => params,
    }
}

/// Everything one lock's lifecycle needs, copied out of the configuration and resolved
/// once, when the lock is requested.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LockParams {
    pub(crate) nodes: usize,
    /// Yes votes an acquire or extend round needs (algorithm.md §1).
    pub(crate) quorum: usize,
    pub(crate) timing: Timing,
    pub(crate) retry: RetryPolicy,
    /// The caller's retry delay function, if any (algorithm.md §7).
    pub(crate) retry_delay: Option<RetryDelay>,
    pub(crate) auto_extend: Option<AutoExtend>,
    pub(crate) release_timeout: Duration,
    /// Where a round's validity is counted from (algorithm.md §4).
    pub(crate) validity_from: ValidityFrom,
    /// The compare-and-expire script extensions run (algorithm.md §8).
    pub(crate) extend_script: &'static Script,
    /// Whether the lock ends at its deadline: no extension is sent past it, and a reply
    /// that comes later cannot save it (algorithm.md §8, §9).
    pub(crate) deadline_ends_lock: bool,
    /// Whether a supplied value is stamped with a fresh nonce per attempt (algorithm.md §5).
    pub(crate) stamp_supplied: bool,
    /// Whether acquisitions are fenced (docs/safety.md, "Fencing").
    pub(crate) fenced: bool,
    /// The script a fenced acquisition runs on each node.
    pub(crate) fenced_acquire_script: &'static Script,
    /// How a fenced quorum's counters become the token.
    pub(crate) fence_quorum: FenceQuorum,
    /// Whether the fenced pipeline carries the node's floor (a negative control says no,
    /// and sends 0).
    pub(crate) pipeline_floor: bool,
    /// The patience in ms of the lock's place in the waiters' queue, if it queues
    /// (waiters/mod.rs).
    pub(crate) queue: Option<u64>,
    /// The script a queued attempt runs (a negative control's never prunes).
    pub(crate) queue_script: &'static Script,
    /// Whether a contended wait reads the holder's remaining ttl and listens for release
    /// notifications (notify.rs).
    pub(crate) notify: bool,
    /// The longest random delay before an attempt that a release notification or a
    /// contested hand-off starts.
    pub(crate) notification_jitter: Duration,
    /// Whether a release decided before every node answered goes on in the background for
    /// the others (a negative control drops it at the decision).
    pub(crate) release_in_background: bool,
    /// Whether an extension refused for good (`NodeFault::is_permanent`) on too many nodes
    /// is lost at once (a negative control retries it until the deadline instead).
    pub(crate) refuse_for_good: bool,
    /// Whether a call that takes the hold of the call ahead in its line keeps that hold's
    /// deadline (lock/hand_over.rs; a negative control counts the old validity again from
    /// the hand-over instead).
    pub(crate) carry_deadline: bool,
    /// Whether a call that takes the hold of the call ahead in its line has its deadline
    /// brought forward to what its own ttl could give it (lock/hand_over.rs; a negative
    /// control keeps the old deadline, a validity above the ttl it asked for).
    pub(crate) hand_over_within_ttl: bool,
    /// Whether a waiter that learns it heads the waiters' queue on a quorum of nodes tries
    /// at once (lock/acquire/place.rs, `on_next`; a negative control waits for a release
    /// after it, which a head announced with no release behind it never hears).
    pub(crate) head_tries_at_once: bool,
    /// Whether a hold by grants counts its validity over what the nodes set the key for at
    /// the least, the ttl or the place's patience (grant.rs; a negative control counts the
    /// ttl, as if the nodes always set it for that long).
    pub(crate) grant_within_place: bool,
    /// Whether the release that placed the next call of its line leaves the nodes' count of
    /// its listeners unread, that call among them (lock/release.rs, `read_release`; a
    /// negative control reads it, and the line hears its own call).
    pub(crate) placed_not_counted: bool,
    /// The kind of lock (docs/kinds.md).
    pub(crate) kind: LockKind,
    /// The scripts of the kinds (a negative control swaps one).
    pub(crate) kind_scripts: &'static KindScripts,
    /// Whether a semaphore's quorum is raised above the majority (kinds/mod.rs,
    /// `semaphore_quorum`; a negative control keeps the majority).
    pub(crate) kind_quorum: bool,
}

/// The instant a round's validity is counted from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ValidityFrom {
    /// `t0`, the round's start, before any byte was written: the conservative choice.
    AttemptStart,
    /// The moment the round was decided (a deliberate bug, for the negative controls).
    #[cfg_attr(not(feature = "_mutants"), allow(dead_code))]
    Decision,
}
