//! The lock kinds beyond the mutex (docs/kinds.md): a multi-resource lock, a reader-writer
//! lock and a counting semaphore, as options of one lock.
//!
//! Every kind keeps the mutex's rules (algorithm.md): the fan-out to all N nodes, one vote
//! per node, validity from `t0`, the failed attempt released on all N, a fresh stored value
//! per attempt, extension bounded by validity. What changes per kind is the commands (and so
//! the reply reading: args.rs) and, for the semaphore, the quorum
//! ([`semaphore_quorum`]). The scripts are in scripts.rs; which command a lock of a kind
//! sends for each step is [`Kinded`]'s, and the lock's phases ask it (lock/acquire.rs,
//! lock/extend.rs, lock/release.rs) only when the lock is not a plain mutex.

use bytes::{Bytes, BytesMut};

use crate::command::{Command, Vote};
use crate::error::{ConfigError, UsageError};
use crate::id::NodeName;
use crate::io::AcquireFailure;
use crate::round::{self, Slot};
use crate::script::Script;
use crate::token::{Resource, Token};
use args::{KindArgs, KindUse};

pub(crate) mod args;
mod scripts;

pub(crate) use scripts::KIND_SCRIPTS;

pub use scripts::{
    MULTI_ACQUIRE_SCRIPT, MULTI_EXTEND_SCRIPT, MULTI_RELEASE_SCRIPT, READ_ACQUIRE_SCRIPT,
    READ_EXTEND_SCRIPT, READ_RELEASE_SCRIPT, SEM_ACQUIRE_SCRIPT, SEM_EXTEND_SCRIPT,
    SEM_RELEASE_SCRIPT, WRITE_ABANDON_SCRIPT, WRITE_ACQUIRE_SCRIPT, WRITE_RELEASE_SCRIPT,
};
#[cfg(feature = "_mutants")]
pub use scripts::{
    READ_EXTEND_RESURRECTS_SCRIPT, SEM_ACQUIRE_OFF_BY_ONE_SCRIPT,
    WRITE_ACQUIRE_IGNORES_READERS_SCRIPT,
};

/// Which kind of lock an acquisition takes ([`LockOptions::kind`](crate::LockOptions::kind));
/// docs/kinds.md. A lock of several resources at once is a mutex taken by
/// [`Client::acquire_all_with`](crate::Client::acquire_all_with).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LockKind {
    /// The exclusive lock of one resource: `SET key token NX PX ttl`.
    #[default]
    Mutex,
    /// A reader: shares the resource with other readers, excluded by a writer and by a
    /// writer waiting for it (writer preference, docs/kinds.md "Reader-writer lock").
    Read,
    /// A writer: excludes readers and other writers (and mutexes: it holds the same key).
    Write,
    /// One of `permits` holders of a counting semaphore. Every holder of one resource must
    /// ask for the same `permits`; zero is refused.
    Semaphore {
        /// How many holders may hold the resource at once (k).
        permits: u32,
    },
}

impl LockKind {
    /// A semaphore of `permits` holders.
    pub fn semaphore(permits: u32) -> Self {
        Self::Semaphore { permits }
    }

    /// Whether several holders of this kind may hold one resource together (readers,
    /// permit holders): such calls of one client do not wait in its local line (queue.rs).
    pub fn is_shared(self) -> bool {
        matches!(self, Self::Read | Self::Semaphore { .. })
    }

    /// How many of `nodes` nodes must grant a lock of this kind, given the configuration's
    /// `quorum`: the configuration's, and for a semaphore of k permits
    /// `max(quorum, floor(kN/(k+1)) + 1)` (docs/safety.md, "The quorum intersection, per
    /// holder slot"), so a tool can tell before asking whether enough nodes are up.
    ///
    /// ```
    /// use redlock_core::LockKind;
    /// assert_eq!(LockKind::Mutex.quorum(5, 3), 3);
    /// assert_eq!(LockKind::semaphore(2).quorum(5, 3), 4);
    /// assert_eq!(LockKind::semaphore(8).quorum(5, 3), 5);
    /// ```
    pub fn quorum(self, nodes: usize, quorum: usize) -> usize {
        match self {
            Self::Semaphore { permits } => semaphore_quorum(nodes, quorum, permits),
            _ => quorum,
        }
    }

    /// Refuses a kind the core cannot take as asked: zero permits, or a fenced kind other
    /// than the mutex (only the mutex hands out fencing tokens for now).
    pub(crate) fn check(self, fenced: bool) -> Result<(), ConfigError> {
        if self == (Self::Semaphore { permits: 0 }) {
            return Err(ConfigError::new(
                "kind",
                "a semaphore of 0 permits can never be held; ask for at least 1",
            ));
        }
        if fenced && self != Self::Mutex {
            return Err(fencing_refused());
        }
        Ok(())
    }
}

/// The option error of a fenced lock of a kind beyond the mutex: only a mutex hands out
/// fencing tokens for now (docs/kinds.md).
pub(crate) fn fencing_refused() -> ConfigError {
    ConfigError::new(
        "fenced",
        "only a mutex can be fenced for now; turn fencing off for readers, writers, \
         semaphores and multi-resource locks",
    )
}

/// The quorum of a `permits`-holder semaphore over `nodes` nodes: `max(config quorum,
/// floor(kN/(k+1)) + 1)`. k + 1 holders each on q nodes place (k+1)q slots and N nodes hold
/// at most kN, so no k + 1 holders coexist iff (k+1)q > kN (docs/safety.md, "The quorum
/// intersection, per holder slot"). For k = 1 it is the majority; for N = 5, k = 2 or 3
/// need 4, k >= 4 all 5.
pub(crate) fn semaphore_quorum(nodes: usize, config_quorum: usize, permits: u32) -> usize {
    let (k, n) = (u128::from(permits), nodes as u128);
    let q = usize::try_from(k * n / (k + 1) + 1).unwrap_or(nodes);
    q.max(config_quorum).min(nodes)
}

/// The scripts a lock of a kind runs, as resolved (options.rs): the spec's, or a negative
/// control's (`_mutants`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct KindScripts {
    /// The semaphore's acquire.
    pub(crate) sem_acquire: &'static Script,
    /// The writer's acquire.
    pub(crate) write_acquire: &'static Script,
    /// The reader's extension.
    pub(crate) read_extend: &'static Script,
    /// Whether the multi-lock goes out as one `SET NX PX` per key, each node's vote read
    /// from the first key's reply (a negative control; the correct one runs MULTI_ACQUIRE).
    pub(crate) multi_one_by_one: bool,
}

impl KindScripts {
    /// The spec's scripts (docs/kinds.md): what every lock runs but a negative control's.
    pub(crate) const SPEC: Self = Self {
        sem_acquire: &SEM_ACQUIRE_SCRIPT,
        write_acquire: &WRITE_ACQUIRE_SCRIPT,
        read_extend: &READ_EXTEND_SCRIPT,
        multi_one_by_one: false,
    };
}

/// What a lock of a kind beyond the mutex is: its shape, and its keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    /// Several resources at once (MULTI_*).
    Multi,
    /// A reader (READ_*).
    Read,
    /// A writer (WRITE_ACQUIRE; the mutex's release and extension).
    Write,
    /// A permit holder (SEM_*).
    Semaphore,
}

/// A lock of a kind beyond the mutex: the commands of each step, on its keys.
#[derive(Debug, Clone)]
pub(crate) struct Kinded {
    shape: Shape,
    /// The keys and number, packed once (args.rs).
    args: KindArgs,
    /// How many keys (a multi-lock's resources).
    keys: u32,
}

/// Appends `suffix` to the resource's key: one of the kind's own keys (docs/kinds.md,
/// "Keys").
fn suffixed(resource: &Resource, suffix: &[u8]) -> Bytes {
    let mut key = BytesMut::from(resource.as_bytes());
    key.extend_from_slice(suffix);
    key.freeze()
}

impl Kinded {
    /// The lock of `kind` on `set` (sorted, deduplicated, not empty; more than one resource
    /// only for a multi-lock), or `None` for a plain mutex of one resource. `patience` is
    /// the writer's (the ttl if the acquisition may retry, else 0).
    ///
    /// Keys: a multi-lock's are its resources; a reader's and writer's R, R:readers,
    /// R:writer-waiting; a semaphore's R:permits, R:permits:limit, R.
    pub(crate) fn new(kind: LockKind, set: &[Resource], patience: u64) -> Option<Self> {
        let first = set.first()?;
        let (shape, keys, number) = match kind {
            LockKind::Mutex if set.len() == 1 => return None,
            LockKind::Mutex => (
                Shape::Multi,
                set.iter().map(|r| r.bytes().clone()).collect(),
                0,
            ),
            LockKind::Read | LockKind::Write => {
                let keys = [
                    first.bytes().clone(),
                    suffixed(first, b":readers"),
                    suffixed(first, b":writer-waiting"),
                ];
                let shape = if kind == LockKind::Read {
                    Shape::Read
                } else {
                    Shape::Write
                };
                (shape, Box::from(keys), patience)
            }
            LockKind::Semaphore { permits } => {
                let keys = [
                    suffixed(first, b":permits"),
                    suffixed(first, b":permits:limit"),
                    first.bytes().clone(),
                ];
                (Shape::Semaphore, Box::from(keys), u64::from(permits))
            }
        };
        let args = KindArgs::new(&keys, number);
        let keys = u32::try_from(keys.len()).unwrap_or(u32::MAX);
        Some(Self { shape, args, keys })
    }

    /// A command running `script` as `usage` with the lock's keys.
    fn command(
        &self,
        usage: KindUse,
        script: &'static Script,
        at: (&Resource, &Token, u64),
    ) -> Command {
        Command::kind_script(script, usage, at, &self.args)
    }

    /// One attempt's acquire command.
    pub(crate) fn acquire(&self, scripts: &KindScripts, at: (&Resource, &Token, u64)) -> Command {
        match self.shape {
            Shape::Multi if scripts.multi_one_by_one => {
                Command::set_each(at, (&self.args, self.keys))
            }
            Shape::Multi => self.command(KindUse::MultiAcquire, &MULTI_ACQUIRE_SCRIPT, at),
            Shape::Read => self.command(KindUse::ReadAcquire, &READ_ACQUIRE_SCRIPT, at),
            Shape::Write => self.command(KindUse::WriteAcquire, scripts.write_acquire, at),
            Shape::Semaphore => self.command(KindUse::SemAcquire, scripts.sem_acquire, at),
        }
    }

    /// The extension, or `None` where it is the mutex's (a writer holds R as a mutex does).
    pub(crate) fn extend(
        &self,
        scripts: &KindScripts,
        at: (&Resource, &Token, u64),
    ) -> Option<Command> {
        Some(match self.shape {
            Shape::Multi => self.command(KindUse::MultiExtend, &MULTI_EXTEND_SCRIPT, at),
            Shape::Read => self.command(KindUse::ReadExtend, scripts.read_extend, at),
            Shape::Write => return None,
            Shape::Semaphore => self.command(KindUse::SemExtend, &SEM_EXTEND_SCRIPT, at),
        })
    }

    /// The release of a `held` lock or of a failed attempt, or `None` where it is the
    /// mutex's: a failed writer's attempt, whose waiting mark must stay while it retries (a
    /// writer that gives up abandons it: [`abandon`](Self::abandon)). A held writer's
    /// release deletes the mark it may have left where a node refused it
    /// (docs/kinds.md, "Reader-writer lock").
    pub(crate) fn release(
        &self,
        resource: &Resource,
        token: &Token,
        held: bool,
    ) -> Option<Command> {
        let at = (resource, token, 0);
        Some(match self.shape {
            Shape::Multi => self.command(KindUse::MultiRelease, &MULTI_RELEASE_SCRIPT, at),
            Shape::Read => self.command(KindUse::ReadRelease, &READ_RELEASE_SCRIPT, at),
            Shape::Write if held => self.command(KindUse::WriteRelease, &WRITE_RELEASE_SCRIPT, at),
            Shape::Write => return None,
            Shape::Semaphore => self.command(KindUse::SemRelease, &SEM_RELEASE_SCRIPT, at),
        })
    }

    /// A writer that gives up: WRITE_ABANDON of its waiting mark, if it may have left one
    /// (only an acquisition that may retry leaves it).
    pub(crate) fn abandon(&self, resource: &Resource, token: &Token) -> Option<Command> {
        (self.shape == Shape::Write && self.args.number() > 0).then(|| {
            self.command(
                KindUse::WriteAbandon,
                &WRITE_ABANDON_SCRIPT,
                (resource, token, 0),
            )
        })
    }
}

/// The set a multi-lock of `resources` holds (docs/kinds.md, "Multi-resource lock"): sorted
/// by bytes, each resource once, as its keys go out; refuses an empty list, an empty name,
/// and a list that names one resource several times and nothing else. A driver lists a
/// guard's resources with it, as [`Client::acquire_all`](crate::Client::acquire_all) locks
/// them.
///
/// ```
/// use redlock_core::{Resource, resource_set};
///
/// let set = resource_set(["b", "a", "b"].map(Resource::from)).unwrap();
/// assert_eq!(set, ["a", "b"].map(Resource::from));
/// assert!(resource_set([Resource::from("a"), Resource::from("a")]).is_err());
/// ```
pub fn resource_set(
    resources: impl IntoIterator<Item = Resource>,
) -> Result<Vec<Resource>, UsageError> {
    let mut set: Vec<Resource> = resources.into_iter().collect();
    let given = set.len();
    set.sort_unstable();
    set.dedup();
    match set.len() {
        0 => Err(UsageError::NoResources),
        _ if set.iter().any(|r| r.as_bytes().is_empty()) => Err(UsageError::EmptyResource),
        1 if given > 1 => Err(UsageError::OneResourceRepeated { times: given }),
        _ => Ok(set),
    }
}

/// A semaphore attempt decided against it by `-PERMITS` replies (SEM_ACQUIRE: holders in
/// place agreed on another k): a quorum of them, or enough that success is impossible and
/// most of the nodes that said "no" said this. `None` for any other failure.
pub(crate) fn permits_failure(
    slots: &[Slot],
    names: &[NodeName],
    asked: u32,
    quorum: usize,
) -> Option<AcquireFailure> {
    let mut nodes = Vec::new();
    let (mut in_place, mut no) = (None, 0);
    for (i, slot) in slots.iter().enumerate() {
        match slot {
            Slot::Done(Vote::Permits(k)) => {
                in_place.get_or_insert(*k);
                nodes.push(round::name(names, i));
            }
            Slot::Done(Vote::No) => no += 1,
            _ => {}
        }
    }
    let in_place = in_place?;
    let decides = nodes.len() >= quorum || nodes.len() > no;
    decides.then_some(AcquireFailure::PermitsMismatch {
        asked,
        in_place,
        nodes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_semaphore_quorum_rules_out_k_plus_one_holders() {
        assert_eq!(semaphore_quorum(5, 3, 1), 3);
        assert_eq!(semaphore_quorum(5, 3, 2), 4);
        assert_eq!(semaphore_quorum(5, 3, 3), 4);
        assert_eq!(semaphore_quorum(5, 3, 4), 5);
        assert_eq!(semaphore_quorum(5, 3, u32::MAX), 5);
        assert_eq!(semaphore_quorum(3, 2, 2), 3);
        // A raised configured quorum stays.
        assert_eq!(semaphore_quorum(5, 5, 1), 5);
        for n in 1..=9usize {
            for k in 1..=12u32 {
                let q = semaphore_quorum(n, n / 2 + 1, k);
                let k = k as usize;
                assert!((k + 1) * q > k * n, "n={n} k={k} q={q}");
                assert!(q <= n);
            }
        }
    }

    #[test]
    fn resource_sets_are_sorted_deduplicated_and_checked() {
        let r = Resource::from;
        assert_eq!(
            resource_set([r("b"), r("a"), r("b")]).unwrap(),
            vec![r("a"), r("b")]
        );
        assert_eq!(resource_set([r("a")]).unwrap(), vec![r("a")]);
        assert_eq!(resource_set([]), Err(UsageError::NoResources));
        assert_eq!(
            resource_set([r("a"), r("a")]),
            Err(UsageError::OneResourceRepeated { times: 2 })
        );
        assert_eq!(
            resource_set([r("a"), r("")]),
            Err(UsageError::EmptyResource)
        );
    }

    #[test]
    fn zero_permits_and_fenced_kinds_are_refused() {
        assert_eq!(
            LockKind::semaphore(0).check(false).unwrap_err().field(),
            "kind"
        );
        assert_eq!(LockKind::Read.check(true).unwrap_err().field(), "fenced");
        assert!(LockKind::Mutex.check(true).is_ok());
        assert!(LockKind::semaphore(2).check(false).is_ok());
    }
}
