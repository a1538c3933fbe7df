//! Redlock distributed locks over N independent Redis or Valkey nodes, with blocking calls and
//! no async runtime.
//!
//! A thin driver: one background thread per [`Redlock`] owns the sans-IO
//! [`redlock_core::Client`] and N non-blocking `mio` sockets polled together, and every
//! quorum, drift, validity, retry and extension decision is the core's. This crate only moves
//! bytes, sleeps until the core's deadline, and hands events back to the blocked caller. Read
//! `docs/safety.md` for what a lock promises.
//!
//! ```no_run
//! # fn demo() -> Result<(), redlock_blocking::LockError> {
//! use std::time::Duration;
//! use redlock_blocking::Redlock;
//!
//! let redlock = Redlock::builder(["redis://127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"])?
//!     .config(|c| c.ttl(Duration::from_secs(10)))
//!     .build()?;
//! let guard = redlock.lock("invoices:42")?;
//! println!("holding {} for {:?}", guard.token(), guard.validity());
//! let report = guard.release()?;
//! println!("released: {report:?}");
//!
//! // Or run a closure under an auto-extended lock:
//! let total = redlock.with_lock("invoices:43", |lock| {
//!     assert!(lock.validity() > Duration::ZERO);
//!     Ok::<_, std::io::Error>(42)
//! });
//! # Ok(()) }
//! ```

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod driver;
mod guard;

use std::fmt;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use redlock_core::{Client, Config, ConfigBuilder, NodeAddress};

pub use guard::{LockGuard, LockRef};
pub use redlock_core::{
    AutoExtend, LockError, LockOptions, LostReason, NodeFault, NodeId, ReleaseOutcome, Resource,
    RetryPolicy, Token,
};

use driver::{Cmd, Driver};
use guard::Watch;

/// A handle to a set of N nodes. Cheap to clone; `Send + Sync`.
///
/// The driver thread runs as long as a handle or a guard exists, or an operation (a
/// background release, say) is unfinished.
#[derive(Debug, Clone)]
pub struct Redlock {
    link: Arc<Link>,
    config: Arc<Config>,
}

/// Builds a [`Redlock`] from node URLs and core configuration.
#[derive(Debug)]
pub struct Builder {
    addrs: Vec<NodeAddress>,
    config: ConfigBuilder,
    connect_timeout: Duration,
}

impl Redlock {
    /// Starts building from node URLs: `redis://[user:password@]host:port[/db]` or
    /// `host:port`. A bad URL is an error naming it; `rediss://` is refused (no TLS yet).
    pub fn builder<I, S>(urls: I) -> Result<Builder, LockError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let addrs = urls
            .into_iter()
            .map(|u| NodeAddress::parse(u.as_ref()))
            .collect::<Result<Vec<_>, _>>()?;
        let mut config = Config::builder(addrs.len());
        for (i, addr) in addrs.iter().enumerate() {
            config = config.node(i, addr.settings.clone());
        }
        Ok(Builder {
            addrs,
            config,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
        })
    }

    /// Shorthand for `Redlock::builder(urls)?.build()` with every default.
    pub fn new<I, S>(urls: I) -> Result<Self, LockError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        Self::builder(urls)?.build()
    }

    /// The configuration in use.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Acquires `resource`, retrying per the configured policy; blocks until it is held or
    /// the policy gives up.
    pub fn lock(&self, resource: impl Into<Resource>) -> Result<LockGuard, LockError> {
        self.lock_with(resource, LockOptions::default())
    }

    /// Makes a single attempt to acquire `resource`.
    pub fn try_lock(&self, resource: impl Into<Resource>) -> Result<LockGuard, LockError> {
        let once = RetryPolicy {
            max_attempts: Some(1),
            max_wait: None,
            ..*self.config().retry()
        };
        self.lock_with(resource, LockOptions::default().retry(once))
    }

    /// Acquires with per-call options: ttl, wait, retry, token, auto-extension.
    pub fn lock_with(
        &self,
        resource: impl Into<Resource>,
        options: LockOptions,
    ) -> Result<LockGuard, LockError> {
        let watch = Arc::new(Watch::new(Instant::now()));
        let (reply, rx) = mpsc::sync_channel(1);
        let watch2 = Arc::clone(&watch);
        self.link
            .send(Cmd::Acquire(resource.into(), options, reply, watch2))?;
        let (op, acquired) = rx.recv().map_err(|_| LockError::Shutdown)??;
        Ok(LockGuard::new(LockRef {
            op,
            resource: acquired.resource,
            token: acquired.token,
            watch,
            link: Arc::clone(&self.link),
        }))
    }

    /// Runs `f` under the lock with auto-extension, then releases.
    ///
    /// If the lock is lost while `f` runs, `f` can see it through [`LockRef::is_lost`] or
    /// [`LockRef::wait_lost`], and the result is [`WithLockError::Lock`] with
    /// [`LockError::Lost`]. An error from `f` wins over any lock error.
    pub fn with_lock<T, E, F>(
        &self,
        resource: impl Into<Resource>,
        f: F,
    ) -> Result<T, WithLockError<E>>
    where
        F: FnOnce(LockRef) -> Result<T, E>,
    {
        let auto = self.config().auto_extend().copied().unwrap_or_default();
        let options = LockOptions::default().auto_extend(Some(auto));
        let guard = self
            .lock_with(resource, options)
            .map_err(WithLockError::Lock)?;
        let result = f(guard.lock_ref());
        let lost = guard.lost_reason();
        let released = guard.release();
        match (result, lost, released) {
            (Err(e), _, _) => Err(WithLockError::Closure(e)),
            (Ok(_), Some(reason), _) => Err(WithLockError::Lock(LockError::Lost(reason))),
            (Ok(_), None, Err(e)) => Err(WithLockError::Lock(e)),
            (Ok(value), None, Ok(_)) => Ok(value),
        }
    }
}

impl Builder {
    /// Adjusts the core configuration (ttl, quorum, drift, retry, auto-extension, ...).
    pub fn config(mut self, f: impl FnOnce(ConfigBuilder) -> ConfigBuilder) -> Self {
        self.config = f(self.config);
        self
    }

    /// How long a connection attempt may take. Default 1 s.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Validates the configuration and starts the driver thread. Succeeds while nodes are
    /// down; they are connected in the background.
    ///
    /// Fails with [`LockError::Config`] on a bad configuration, and with
    /// [`LockError::Shutdown`] if the system refuses a poller or a thread.
    pub fn build(self) -> Result<Redlock, LockError> {
        let config = self.config.build()?;
        let client = Client::new(config.clone(), rand_core::UnwrapErr(getrandom::SysRng));
        let (tx, rx) = mpsc::channel();
        let driver = Driver::new(client, rx, self.addrs, self.connect_timeout)
            .map_err(|_| LockError::Shutdown)?;
        let link = Arc::new(Link {
            tx: Some(tx),
            waker: driver.waker(),
        });
        std::thread::Builder::new()
            .name("redlock-driver".to_owned())
            .spawn(move || driver.run())
            .map_err(|_| LockError::Shutdown)?;
        Ok(Redlock {
            link,
            config: Arc::new(config),
        })
    }
}

/// The error of [`Redlock::with_lock`]: the closure's own, or the lock's.
#[derive(Debug)]
pub enum WithLockError<E> {
    /// Acquiring failed, or the lock was lost while the closure ran.
    Lock(LockError),
    /// The closure failed.
    Closure(E),
}

impl<E: fmt::Display> fmt::Display for WithLockError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Lock(e) => e.fmt(f),
            Self::Closure(e) => e.fmt(f),
        }
    }
}

impl<E: fmt::Debug + fmt::Display> std::error::Error for WithLockError<E> {}

/// The one channel to the driver thread, shared by every handle, view and guard. Dropping
/// the last of them closes the channel and wakes the thread so that it can wind down.
#[derive(Debug)]
pub(crate) struct Link {
    tx: Option<mpsc::Sender<Cmd>>,
    waker: Arc<mio::Waker>,
}

impl Link {
    /// Queues a command and wakes the driver. Never blocks beyond the channel send.
    pub(crate) fn send(&self, cmd: Cmd) -> Result<(), LockError> {
        let tx = self.tx.as_ref().ok_or(LockError::Shutdown)?;
        tx.send(cmd).map_err(|_| LockError::Shutdown)?;
        // A failed wake means the poller is gone, and so is the driver: nothing to do.
        let _ = self.waker.wake();
        Ok(())
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        // Close the channel before waking, so the woken driver sees it closed.
        drop(self.tx.take());
        let _ = self.waker.wake();
    }
}

const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
