//! The lock kinds beyond the mutex as blocking [`Handle`] calls (docs/kinds.md): a
//! multi-resource lock, a reader-writer lock and a counting semaphore, each waiting on
//! `redlock-driver`'s call of the same name by parking the calling thread. The guard is the
//! mutex's [`LockGuard`], which says what it holds ([`LockRef::kind`](crate::LockRef::kind),
//! [`LockRef::resources`](crate::LockRef::resources)).

use redlock_core::{LockOptions, Resource};
use redlock_driver::LockError;

use crate::park::block_on;
use crate::{Handle, LockGuard};

impl Handle {
    /// Acquires every resource of `resources` at once, all or none (a multi-lock), retrying
    /// per the configured policy; blocks until held or the policy gives up. See
    /// [`redlock_driver::Handle::lock_all`].
    ///
    /// ```no_run
    /// # fn demo(redlock: &redlock_blocking::Redlock) -> Result<(), redlock_blocking::LockError> {
    /// let guard = redlock.lock_all(["account:7", "account:3"])?;
    /// assert_eq!(guard.resources().len(), 2);
    /// guard.release()?;
    /// # Ok(()) }
    /// ```
    pub fn lock_all<I>(&self, resources: I) -> Result<LockGuard, LockError>
    where
        I: IntoIterator,
        I::Item: Into<Resource>,
    {
        block_on(self.0.lock_all(resources)).map(LockGuard::new)
    }

    /// Makes a single attempt to acquire every resource of `resources` at once.
    ///
    /// ```no_run
    /// # fn demo(redlock: &redlock_blocking::Redlock) -> Result<(), redlock_blocking::LockError> {
    /// if let Ok(guard) = redlock.try_lock_all(["a", "b"]) {
    ///     guard.release()?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_lock_all<I>(&self, resources: I) -> Result<LockGuard, LockError>
    where
        I: IntoIterator,
        I::Item: Into<Resource>,
    {
        block_on(self.0.try_lock_all(resources)).map(LockGuard::new)
    }

    /// [`lock_all`](Self::lock_all) with per-call options; the kind must be the mutex's.
    ///
    /// ```no_run
    /// # fn demo(redlock: &redlock_blocking::Redlock) -> Result<(), redlock_blocking::LockError> {
    /// use std::time::Duration;
    /// use redlock_blocking::LockOptions;
    ///
    /// let options = LockOptions::default().ttl(Duration::from_secs(5));
    /// let guard = redlock.lock_all_with(["invoice:9", "stock:2"], options)?;
    /// guard.extend()?;
    /// # Ok(()) }
    /// ```
    pub fn lock_all_with<I>(
        &self,
        resources: I,
        options: LockOptions,
    ) -> Result<LockGuard, LockError>
    where
        I: IntoIterator,
        I::Item: Into<Resource>,
    {
        block_on(self.0.lock_all_with(resources, options)).map(LockGuard::new)
    }

    /// Acquires `resource` as a reader (shared with other readers), retrying per the
    /// configured policy. See [`redlock_driver::Handle::read_lock`].
    ///
    /// ```no_run
    /// # fn demo(redlock: &redlock_blocking::Redlock) -> Result<(), redlock_blocking::LockError> {
    /// let reader = redlock.read_lock("doc:1")?;
    /// let another = redlock.read_lock("doc:1")?; // readers share
    /// reader.release()?;
    /// another.release()?;
    /// # Ok(()) }
    /// ```
    pub fn read_lock(&self, resource: impl Into<Resource>) -> Result<LockGuard, LockError> {
        block_on(self.0.read_lock(resource)).map(LockGuard::new)
    }

    /// Makes a single attempt to acquire `resource` as a reader.
    ///
    /// ```no_run
    /// # fn demo(redlock: &redlock_blocking::Redlock) -> Result<(), redlock_blocking::LockError> {
    /// if let Ok(reader) = redlock.try_read_lock("doc:1") {
    ///     reader.release()?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_read_lock(&self, resource: impl Into<Resource>) -> Result<LockGuard, LockError> {
        block_on(self.0.try_read_lock(resource)).map(LockGuard::new)
    }

    /// Acquires `resource` as a writer (alone), retrying per the configured policy; while
    /// it waits it keeps new readers out. See [`redlock_driver::Handle::write_lock`].
    ///
    /// ```no_run
    /// # fn demo(redlock: &redlock_blocking::Redlock) -> Result<(), redlock_blocking::LockError> {
    /// let writer = redlock.write_lock("doc:1")?;
    /// assert_eq!(writer.kind(), redlock_blocking::LockKind::Write);
    /// writer.release()?;
    /// # Ok(()) }
    /// ```
    pub fn write_lock(&self, resource: impl Into<Resource>) -> Result<LockGuard, LockError> {
        block_on(self.0.write_lock(resource)).map(LockGuard::new)
    }

    /// Makes a single attempt to acquire `resource` as a writer.
    ///
    /// ```no_run
    /// # fn demo(redlock: &redlock_blocking::Redlock) -> Result<(), redlock_blocking::LockError> {
    /// if let Ok(writer) = redlock.try_write_lock("doc:1") {
    ///     writer.release()?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_write_lock(&self, resource: impl Into<Resource>) -> Result<LockGuard, LockError> {
        block_on(self.0.try_write_lock(resource)).map(LockGuard::new)
    }

    /// Acquires one of `permits` permits of `resource` (a counting semaphore), retrying per
    /// the configured policy. See [`redlock_driver::Handle::semaphore`] for its quorum and
    /// errors.
    ///
    /// ```no_run
    /// # fn demo(redlock: &redlock_blocking::Redlock) -> Result<(), redlock_blocking::LockError> {
    /// let permit = redlock.semaphore("pool", 2)?;
    /// permit.release()?;
    /// # Ok(()) }
    /// ```
    pub fn semaphore(
        &self,
        resource: impl Into<Resource>,
        permits: u32,
    ) -> Result<LockGuard, LockError> {
        block_on(self.0.semaphore(resource, permits)).map(LockGuard::new)
    }

    /// Makes a single attempt to acquire one of `permits` permits of `resource`.
    ///
    /// ```no_run
    /// # fn demo(redlock: &redlock_blocking::Redlock) -> Result<(), redlock_blocking::LockError> {
    /// if let Ok(permit) = redlock.try_semaphore("pool", 2) {
    ///     permit.release()?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_semaphore(
        &self,
        resource: impl Into<Resource>,
        permits: u32,
    ) -> Result<LockGuard, LockError> {
        block_on(self.0.try_semaphore(resource, permits)).map(LockGuard::new)
    }
}
