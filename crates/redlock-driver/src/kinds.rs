//! The lock kinds beyond the mutex as [`Handle`] calls (docs/kinds.md): a multi-resource
//! lock ([`lock_all`](Handle::lock_all)), a reader-writer lock
//! ([`read_lock`](Handle::read_lock), [`write_lock`](Handle::write_lock)) and a counting
//! semaphore ([`semaphore`](Handle::semaphore)), each with its `try_` form. Each is
//! [`lock_with`](Handle::lock_with) with the kind set in [`LockOptions`], or the core's
//! multi-lock; the guard is the mutex's [`LockGuard`], which says what it holds
//! ([`LockRef::kind`](crate::LockRef::kind), [`LockRef::resources`](crate::LockRef::resources)).
//! Every rule (keys, scripts, quorum, line, notifications) is the core's.

use redlock_core::{LockKind, LockOptions, Resource};

use crate::error::LockError;
use crate::guard::LockGuard;
use crate::handle::Handle;
use crate::request::Target;

impl Handle {
    /// Acquires every resource of `resources` at once, all or none (a multi-lock), retrying
    /// per the configured policy. The set is sorted by bytes and deduplicated, so two calls
    /// naming overlapping sets in any order never hold together and never wait on each
    /// other in a cycle. The guard releases and extends them all together; each resource's
    /// key is a mutex's, so a multi-lock excludes every mutex, writer and multi-lock of any
    /// of its resources.
    ///
    /// An empty list fails with [`LockError::Usage`] (`UsageError::NoResources`).
    ///
    /// ```no_run
    /// # async fn demo(redlock: &redlock_driver::Handle) -> Result<(), redlock_driver::LockError> {
    /// let guard = redlock.lock_all(["account:7", "account:3"]).await?;
    /// assert_eq!(guard.resources().len(), 2); // "account:3", "account:7"
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn lock_all<I>(&self, resources: I) -> Result<LockGuard, LockError>
    where
        I: IntoIterator,
        I::Item: Into<Resource>,
    {
        self.lock_all_with(resources, LockOptions::default()).await
    }

    /// Makes a single attempt to acquire every resource of `resources` at once.
    ///
    /// ```no_run
    /// # async fn demo(redlock: &redlock_driver::Handle) -> Result<(), redlock_driver::LockError> {
    /// match redlock.try_lock_all(["a", "b"]).await {
    ///     Ok(guard) => drop(guard), // released in the background
    ///     Err(e) => eprintln!("busy: {e}"),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_lock_all<I>(&self, resources: I) -> Result<LockGuard, LockError>
    where
        I: IntoIterator,
        I::Item: Into<Resource>,
    {
        let once = LockOptions::default().retry(self.once());
        self.lock_all_with(resources, once).await
    }

    /// [`lock_all`](Self::lock_all) with per-call options (ttl, wait, retry, token,
    /// auto-extension). The kind must be the mutex's: a multi-lock of readers, writers or
    /// permits fails with [`LockError::Config`] naming the field `kind`.
    ///
    /// ```no_run
    /// # async fn demo(redlock: &redlock_driver::Handle) -> Result<(), redlock_driver::LockError> {
    /// use std::time::Duration;
    /// use redlock_core::LockOptions;
    ///
    /// let options = LockOptions::default().ttl(Duration::from_secs(5));
    /// let guard = redlock.lock_all_with(["invoice:9", "stock:2"], options).await?;
    /// guard.extend().await?;
    /// # Ok(()) }
    /// ```
    pub async fn lock_all_with<I>(
        &self,
        resources: I,
        options: LockOptions,
    ) -> Result<LockGuard, LockError>
    where
        I: IntoIterator,
        I::Item: Into<Resource>,
    {
        // The core checks the list as given (empty, one name repeated) and sorts and
        // deduplicates it (`redlock_core::resource_set`), for the nodes and for the guard.
        let list: Vec<Resource> = resources.into_iter().map(Into::into).collect();
        self.acquire(Target::All(list), options).await
    }

    /// Acquires `resource` as a reader, retrying per the configured policy: other readers
    /// may hold it together; a writer, or a writer waiting for it, keeps new readers out
    /// (docs/kinds.md, "Reader-writer lock"). Do not mix readers with plain
    /// [`lock`](Self::lock)s of the same name: use [`write_lock`](Self::write_lock).
    ///
    /// ```no_run
    /// # async fn demo(redlock: &redlock_driver::Handle) -> Result<(), redlock_driver::LockError> {
    /// let reader = redlock.read_lock("doc:1").await?;
    /// let another = redlock.read_lock("doc:1").await?; // readers share
    /// reader.release().await?;
    /// another.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn read_lock(&self, resource: impl Into<Resource>) -> Result<LockGuard, LockError> {
        self.lock_with(resource, LockOptions::default().kind(LockKind::Read))
            .await
    }

    /// Makes a single attempt to acquire `resource` as a reader.
    ///
    /// ```no_run
    /// # async fn demo(redlock: &redlock_driver::Handle) -> Result<(), redlock_driver::LockError> {
    /// if let Ok(reader) = redlock.try_read_lock("doc:1").await {
    ///     reader.release().await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_read_lock(
        &self,
        resource: impl Into<Resource>,
    ) -> Result<LockGuard, LockError> {
        let options = LockOptions::default().kind(LockKind::Read);
        self.lock_with(resource, options.retry(self.once())).await
    }

    /// Acquires `resource` as a writer, retrying per the configured policy: it holds alone
    /// (no reader, writer or mutex of the name). While it waits it keeps new readers out, so
    /// a stream of readers cannot starve it (writer preference, docs/kinds.md).
    ///
    /// ```no_run
    /// # async fn demo(redlock: &redlock_driver::Handle) -> Result<(), redlock_driver::LockError> {
    /// let writer = redlock.write_lock("doc:1").await?;
    /// assert_eq!(writer.kind(), redlock_core::LockKind::Write);
    /// writer.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn write_lock(&self, resource: impl Into<Resource>) -> Result<LockGuard, LockError> {
        self.lock_with(resource, LockOptions::default().kind(LockKind::Write))
            .await
    }

    /// Makes a single attempt to acquire `resource` as a writer; a single attempt never
    /// keeps readers out.
    ///
    /// ```no_run
    /// # async fn demo(redlock: &redlock_driver::Handle) -> Result<(), redlock_driver::LockError> {
    /// if let Ok(writer) = redlock.try_write_lock("doc:1").await {
    ///     writer.release().await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_write_lock(
        &self,
        resource: impl Into<Resource>,
    ) -> Result<LockGuard, LockError> {
        let options = LockOptions::default().kind(LockKind::Write);
        self.lock_with(resource, options.retry(self.once())).await
    }

    /// Acquires one of `permits` permits of `resource` (a counting semaphore), retrying per
    /// the configured policy. Every holder of one resource must ask for the same `permits`.
    /// For `permits` >= 2 it needs more than a majority of the nodes (docs/kinds.md, "The
    /// semaphore's quorum"): on 5 nodes, 4 for 2 or 3 permits, all 5 for 4 or more.
    ///
    /// Fails with [`LockError::Config`] (field `kind`) for 0 permits, and with
    /// [`LockError::Acquire`] and `AcquireFailure::PermitsMismatch { asked, in_place, .. }`
    /// when the holders in place asked for another number.
    ///
    /// ```no_run
    /// # async fn demo(redlock: &redlock_driver::Handle) -> Result<(), redlock_driver::LockError> {
    /// let permit = redlock.semaphore("pool", 2).await?;
    /// assert_eq!(permit.kind(), redlock_core::LockKind::semaphore(2));
    /// permit.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn semaphore(
        &self,
        resource: impl Into<Resource>,
        permits: u32,
    ) -> Result<LockGuard, LockError> {
        let options = LockOptions::default().kind(LockKind::semaphore(permits));
        self.lock_with(resource, options).await
    }

    /// Makes a single attempt to acquire one of `permits` permits of `resource`.
    ///
    /// ```no_run
    /// # async fn demo(redlock: &redlock_driver::Handle) -> Result<(), redlock_driver::LockError> {
    /// if let Ok(permit) = redlock.try_semaphore("pool", 2).await {
    ///     permit.release().await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn try_semaphore(
        &self,
        resource: impl Into<Resource>,
        permits: u32,
    ) -> Result<LockGuard, LockError> {
        let options = LockOptions::default().kind(LockKind::semaphore(permits));
        self.lock_with(resource, options.retry(self.once())).await
    }
}
