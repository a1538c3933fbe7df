//! What one cycle of a bench subject locks: the mutex, or one of the lock kinds of
//! docs/kinds.md. Its own module, below both `scenario` (whose subjects lock it) and `kinds`
//! (whose scenario chooses it), so neither imports the other's upper layer.

use redlock_tokio::{Handle, LockError, LockGuard};

/// What one cycle of a `kinds` subject locks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `lock`: a mutex of one resource.
    Mutex,
    /// `lock_all`: a multi-lock of this many resources.
    All(usize),
    /// `read_lock`: a reader.
    Read,
    /// `write_lock`: a writer.
    Write,
    /// `semaphore`: one of this many permits.
    Semaphore(u32),
}

impl Kind {
    /// Acquires `key` (for a multi-lock, `key:0`, `key:1`, ...) as this kind, with the
    /// handle's retry policy.
    pub(crate) async fn lock(self, redlock: &Handle, key: String) -> Result<LockGuard, LockError> {
        match self {
            Self::Mutex => redlock.lock(key).await,
            Self::All(n) => redlock.lock_all((0..n).map(|i| format!("{key}:{i}"))).await,
            Self::Read => redlock.read_lock(key).await,
            Self::Write => redlock.write_lock(key).await,
            Self::Semaphore(k) => redlock.semaphore(key, k).await,
        }
    }
}
