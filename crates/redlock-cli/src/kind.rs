//! Which kind of lock `exec` takes (docs/kinds.md): the mutex by default, a reader
//! (`--shared`, flock's `-s`), a writer (`--exclusive`, flock's `-x`), one of K permit
//! holders (`--permits K`), or, for several names, a multi-resource lock (the mutex of
//! each name, all taken at once or none). The kind is one more lock option
//! (`LockOptions::kind`; the multi-lock is the driver's `lock_all_with`), told to the
//! command in its environment ([`ExecKind::env`]); the semaphore's quorum, which a
//! majority does not make for K >= 2, is [`ExecKind::quorum`].
//!
//! A plain `exec` stays the mutex, as before kinds existed. A mutex does not look at
//! readers (docs/kinds.md, "Keys of a resource R"): where `--shared` holders may be, the
//! exclusive side must be `--exclusive`, which the help and the README say.

use std::num::NonZeroU32;

use redlock_core::LockKind;

/// The kind of lock `exec` holds, as the command line chose it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ExecKind {
    /// No kind flag: the mutex of the resource (excludes writers and other mutexes, not
    /// readers).
    Mutex,
    /// `--shared`: a reader, held together with other readers, excluded by a writer.
    Shared,
    /// `--exclusive`: a writer, excluding readers, writers and mutexes.
    Exclusive,
    /// `--permits K`: one of at most K holders of a counting semaphore.
    Permits(NonZeroU32),
    /// Several names: a multi-resource lock (docs/kinds.md, "Multi-resource lock"), the
    /// mutex key of every name set at once on a node or none, so it excludes every mutex,
    /// writer and multi-lock of any of them. No kind flag goes with it (the command line
    /// refuses one).
    Multi,
}

impl ExecKind {
    /// The kind the flags name for `names` distinct names; clap has already refused more
    /// than one flag, and the command line's checks any flag with several names.
    pub(crate) fn from_flags(
        names: usize,
        shared: bool,
        exclusive: bool,
        permits: Option<NonZeroU32>,
    ) -> Self {
        match (shared, exclusive, permits) {
            _ if names > 1 => Self::Multi,
            (_, _, Some(k)) => Self::Permits(k),
            (true, _, None) => Self::Shared,
            (false, true, None) => Self::Exclusive,
            (false, false, None) => Self::Mutex,
        }
    }

    /// The core's lock kind: a multi-lock's is the mutex's (each of its keys is a mutex
    /// key; its quorum is the configuration's).
    pub(crate) fn lock_kind(self) -> LockKind {
        match self {
            Self::Mutex | Self::Multi => LockKind::Mutex,
            Self::Shared => LockKind::Read,
            Self::Exclusive => LockKind::Write,
            Self::Permits(k) => LockKind::semaphore(k.get()),
        }
    }

    /// The command's `REDLOCK_KIND` and, for a semaphore, `REDLOCK_PERMITS`.
    pub(crate) fn env(self) -> (&'static str, Option<u32>) {
        match self {
            Self::Mutex => ("mutex", None),
            Self::Shared => ("shared", None),
            Self::Exclusive => ("exclusive", None),
            Self::Permits(k) => ("permits", Some(k.get())),
            Self::Multi => ("multi", None),
        }
    }

    /// Whether the holder this kind waits on lives in the mutex's key `R` alone, the key
    /// whose holder the waiting line names: a reader or a writer may also be kept out by
    /// readers or a waiting writer, a permit holder by other permits (`redlock status`
    /// shows those: docs/kinds.md, "Inspection"). A multi-lock waits on its names' mutex
    /// keys alone.
    pub(crate) fn waits_on_the_key_alone(self) -> bool {
        matches!(self, Self::Mutex | Self::Multi)
    }

    /// How many of `nodes` nodes must grant this kind, given the configuration's
    /// `quorum`: the core's rule ([`LockKind::quorum`]; docs/kinds.md, "The semaphore's
    /// quorum").
    pub(crate) fn quorum(self, nodes: usize, quorum: usize) -> usize {
        self.lock_kind().quorum(nodes, quorum)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn permits(k: u32) -> ExecKind {
        ExecKind::Permits(NonZeroU32::new(k).expect("above zero"))
    }

    #[test]
    fn each_flag_is_its_kind_and_no_flag_is_the_mutex() {
        assert_eq!(ExecKind::from_flags(1, false, false, None), ExecKind::Mutex);
        assert_eq!(ExecKind::from_flags(1, true, false, None), ExecKind::Shared);
        assert_eq!(
            ExecKind::from_flags(1, false, true, None),
            ExecKind::Exclusive
        );
        let three = NonZeroU32::new(3);
        assert_eq!(ExecKind::from_flags(1, false, false, three), permits(3));
        assert_eq!(permits(3).lock_kind(), LockKind::semaphore(3));
        assert_eq!(ExecKind::Shared.lock_kind(), LockKind::Read);
        assert_eq!(ExecKind::Exclusive.lock_kind(), LockKind::Write);
        assert_eq!(permits(3).env(), ("permits", Some(3)));
        assert_eq!(ExecKind::Mutex.env(), ("mutex", None));
    }

    #[test]
    fn several_names_are_a_multi_lock_of_mutex_keys_with_the_mutex_s_quorum() {
        assert_eq!(ExecKind::from_flags(2, false, false, None), ExecKind::Multi);
        assert_eq!(ExecKind::Multi.lock_kind(), LockKind::Mutex);
        assert_eq!(ExecKind::Multi.env(), ("multi", None));
        assert!(ExecKind::Multi.waits_on_the_key_alone());
        assert_eq!(ExecKind::Multi.quorum(5, 3), 3);
        assert_eq!(ExecKind::Multi.quorum(5, 4), 4);
    }

    #[test]
    fn a_semaphore_of_two_or_more_needs_more_than_a_majority() {
        // docs/kinds.md, "The semaphore's quorum": N = 5, k = 2 or 3 need 4, k >= 4 all 5.
        assert_eq!(permits(1).quorum(5, 3), 3);
        assert_eq!(permits(2).quorum(5, 3), 4);
        assert_eq!(permits(3).quorum(5, 3), 4);
        assert_eq!(permits(4).quorum(5, 3), 5);
        assert_eq!(permits(u32::MAX).quorum(5, 3), 5);
        assert_eq!(permits(2).quorum(3, 2), 3);
        assert_eq!(ExecKind::Shared.quorum(5, 3), 3);
        assert_eq!(ExecKind::Mutex.quorum(5, 4), 4);
    }
}
