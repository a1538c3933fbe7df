//! What users hold: [`Redlock<S>`](Redlock), built by [`Builder<S>`](Builder), where `S` is a
//! driver's [`Start`]: how its loop starts, which clock it reads, and which handle users call.
//! Each driver crate names `Redlock<ItsStart>` its own `Redlock`.

use std::fmt;
use std::marker::PhantomData;
use std::ops::Deref;
use std::time::{Duration, Instant};

use redlock_core::ConfigBuilder;

use crate::error::LockError;
use crate::handle::Handle;
use crate::setup::{DriverParts, Setup};

/// How a driver starts its loop, which clock the loop reads, and what users call.
pub trait Start {
    /// What [`Redlock`] derefs to: [`Handle`] for an async driver, a blocking face over it
    /// for `redlock-blocking`.
    type Handle: From<Handle> + Clone + fmt::Debug;

    /// Starts the loop on `parts` (a task, a thread). Fails with [`LockError::Start`] if the
    /// loop cannot start: no runtime to spawn on, no thread or poller.
    fn start(parts: DriverParts) -> Result<(), LockError>;

    /// The loop's clock (algorithm.md §11: one clock per driver). The loop stamps its
    /// inputs with it, and the handle and guards judge the core's deadlines by it.
    fn now() -> Instant;
}

/// A handle to a set of N nodes, served by the driver loop `S` starts. Cheap to clone;
/// `Send + Sync` for every driver.
///
/// The lock calls (`lock`, `try_lock`, `lock_with`, `with_lock`, `config`) are those of
/// `S::Handle`, reached through `Deref`: [`Handle`]'s for the async drivers. The driver loop
/// runs as long as a handle or a guard exists, or an operation (a background release, say)
/// is unfinished.
pub struct Redlock<S: Start> {
    handle: S::Handle,
}

impl<S: Start> Redlock<S> {
    /// Starts building from node URLs: `redis://[user:password@]host:port[/db]`,
    /// `rediss://...` (TLS, options after `?`), `unix:///path[?db=N]` or `host:port`, as
    /// [`NodeAddress::parse`](redlock_core::NodeAddress::parse) reads them. A bad URL is an
    /// error naming it.
    pub fn builder<I, U>(urls: I) -> Result<Builder<S>, LockError>
    where
        I: IntoIterator<Item = U>,
        U: AsRef<str>,
    {
        Builder::new(urls)
    }

    /// Shorthand for `Redlock::builder(urls)?.build()` with every default.
    pub fn new<I, U>(urls: I) -> Result<Self, LockError>
    where
        I: IntoIterator<Item = U>,
        U: AsRef<str>,
    {
        Self::builder(urls)?.build()
    }
}

impl<S: Start> Deref for Redlock<S> {
    type Target = S::Handle;

    fn deref(&self) -> &S::Handle {
        &self.handle
    }
}

impl<S: Start> Clone for Redlock<S> {
    fn clone(&self) -> Self {
        Self {
            handle: self.handle.clone(),
        }
    }
}

impl<S: Start> fmt::Debug for Redlock<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Redlock").field(&self.handle).finish()
    }
}

/// Builds a [`Redlock`] from node URLs and core configuration; each driver names it
/// `Builder` and starts from `Redlock::builder(urls)`.
pub struct Builder<S> {
    setup: Setup,
    start: PhantomData<fn() -> S>,
}

impl<S: Start> Builder<S> {
    /// Parses node URLs (see [`Redlock::builder`]). A bad URL is an error naming it.
    pub fn new<I, U>(urls: I) -> Result<Self, LockError>
    where
        I: IntoIterator<Item = U>,
        U: AsRef<str>,
    {
        Ok(Self {
            setup: Setup::from_urls(urls)?,
            start: PhantomData,
        })
    }

    /// Adjusts the core configuration (ttl, quorum, drift, retry, auto-extension, ...).
    pub fn config(mut self, f: impl FnOnce(ConfigBuilder) -> ConfigBuilder) -> Self {
        self.setup = self.setup.config(f);
        self
    }

    /// How long a connection attempt (name resolution included) may take. Default 1 s.
    /// A timeout too long to add to an `Instant` (`Duration::MAX`) means no timeout.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.setup = self.setup.connect_timeout(timeout);
        self
    }

    /// Validates the configuration and starts the driver's loop. Succeeds while nodes are
    /// down: they are connected in the background.
    ///
    /// Fails with [`LockError::Config`] on a bad configuration, [`LockError::Tls`] on an
    /// unusable TLS file, and with
    /// [`LockError::Start`] if the loop cannot start: no tokio runtime for
    /// `redlock-tokio`, or the system refuses a thread or a poller.
    pub fn build(self) -> Result<Redlock<S>, LockError> {
        let (handle, parts) = self.setup.build(S::now)?;
        S::start(parts)?;
        Ok(Redlock {
            handle: S::Handle::from(handle),
        })
    }
}

impl<S> fmt::Debug for Builder<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Builder")
            .field("setup", &self.setup)
            .finish()
    }
}
