//! Redlock distributed locks over N independent Redis or Valkey nodes, for async-std and smol
//! users.
//!
//! async-std is discontinued upstream (its README says "use smol instead"; RUSTSEC-2025-0052),
//! and async-std and smol share one reactor, `async-io`. So this crate depends only on
//! `async-io` and `futures-lite`, never on either runtime: its futures run under
//! `async_std::task::block_on`, `smol::block_on`, a `smol::Executor`, or any other executor.
//!
//! A thin driver: one dedicated background thread (`redlock-asyncio`) runs the driver loop
//! under `async_io::block_on`. It owns the sans-IO [`redlock_core::Client`] and the N
//! connections, and every quorum, drift, validity, retry and extension decision is the core's;
//! the thread only moves bytes, sleeps until the core's deadline, and hands events to your
//! futures. A thread rather than a spawned task keeps the crate executor-agnostic: it needs
//! no spawner and behaves the same under async-std and smol. The thread ends once every
//! [`Redlock`] handle, [`LockGuard`] and [`LockRef`] is gone and every operation (a background
//! release, say) has finished. Read `docs/safety.md` for what a lock promises.
//!
//! ```no_run
//! use std::time::Duration;
//! use redlock_async_std::{LockError, Redlock};
//!
//! // Or `async_std::task::block_on`: both drive the same async-io reactor.
//! smol::block_on(async {
//!     let urls = ["redis://127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"];
//!     let redlock = Redlock::builder(urls)?
//!         .config(|c| c.ttl(Duration::from_secs(10)))
//!         .build()?;
//!     let guard = redlock.lock("invoices:42").await?;
//!     println!("holding {} for {:?}", guard.token(), guard.validity());
//!     let report = guard.release().await?;
//!     println!("released: {report:?}");
//!
//!     // Or run a closure under an auto-extended lock:
//!     let total = redlock
//!         .with_lock("invoices:43", |lock| async move {
//!             assert!(lock.validity() > Duration::ZERO);
//!             Ok::<_, std::io::Error>(42)
//!         })
//!         .await;
//!     println!("{total:?}");
//!     Ok::<(), LockError>(())
//! })?;
//! # Ok::<(), LockError>(())
//! ```

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod driver;
mod guard;

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use redlock_core::{Client, Config, ConfigBuilder, NodeAddress};
use tokio::sync::{mpsc, oneshot, watch};

pub use guard::{LockGuard, LockRef};
pub use redlock_core::{
    AutoExtend, LockError, LockOptions, LostReason, NodeFault, NodeId, ReleaseOutcome, Resource,
    RetryPolicy, Token,
};

use driver::{Cmd, Driver, now};
use guard::LockState;

/// A handle to a set of N nodes. Cheap to clone; `Send + Sync`.
///
/// The driver thread runs as long as a handle or a guard exists, or an operation (a
/// background release, say) is unfinished.
#[derive(Debug, Clone)]
pub struct Redlock {
    tx: mpsc::UnboundedSender<Cmd>,
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    config: Config,
    next_ticket: AtomicU64,
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
        &self.shared.config
    }

    /// Acquires `resource`, retrying per the configured policy.
    ///
    /// Dropping the returned future cancels the attempt and releases whatever it set.
    pub async fn lock(&self, resource: impl Into<Resource>) -> Result<LockGuard, LockError> {
        self.lock_with(resource, LockOptions::default()).await
    }

    /// Makes a single attempt to acquire `resource`.
    pub async fn try_lock(&self, resource: impl Into<Resource>) -> Result<LockGuard, LockError> {
        let once = RetryPolicy {
            max_attempts: Some(1),
            max_wait: None,
            ..*self.config().retry()
        };
        self.lock_with(resource, LockOptions::default().retry(once))
            .await
    }

    /// Acquires with per-call options: ttl, wait, retry, token, auto-extension.
    pub async fn lock_with(
        &self,
        resource: impl Into<Resource>,
        options: LockOptions,
    ) -> Result<LockGuard, LockError> {
        let ticket = self.shared.next_ticket.fetch_add(1, Ordering::Relaxed);
        let (reply, rx) = oneshot::channel();
        let initial = LockState {
            deadline: now(),
            lost: None,
            released: None,
        };
        let (state, state_rx) = watch::channel(initial);
        let cmd = Cmd::Acquire {
            ticket,
            resource: resource.into(),
            options,
            reply,
            state,
        };
        self.tx.send(cmd).map_err(|_| LockError::Shutdown)?;
        let mut cancel = CancelOnDrop {
            tx: &self.tx,
            ticket,
            armed: true,
        };
        let result = rx.await;
        cancel.armed = false;
        let (op, acquired) = result.map_err(|_| LockError::Shutdown)??;
        Ok(LockGuard::new(LockRef {
            op,
            resource: acquired.resource,
            token: acquired.token,
            state: state_rx,
            tx: self.tx.clone(),
        }))
    }

    /// Runs `f` under the lock with auto-extension, then releases.
    ///
    /// If the lock is lost while `f` runs, `f` can see it through [`LockRef::lost`], and the
    /// result is [`WithLockError::Lock`] with [`LockError::Lost`]. An error from `f` wins
    /// over any lock error.
    pub async fn with_lock<T, E, F, Fut>(
        &self,
        resource: impl Into<Resource>,
        f: F,
    ) -> Result<T, WithLockError<E>>
    where
        F: FnOnce(LockRef) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let auto = self.config().auto_extend().copied().unwrap_or_default();
        let options = LockOptions::default().auto_extend(Some(auto));
        let guard = self
            .lock_with(resource, options)
            .await
            .map_err(WithLockError::Lock)?;
        let result = f(guard.lock_ref()).await;
        let lost = guard.lost_reason();
        let released = guard.release().await;
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

    /// How long a connection attempt (name resolution included) may take. Default 1 s.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Validates the configuration and starts the driver thread. Needs no executor, and
    /// succeeds while nodes are down: they are connected in the background.
    ///
    /// Fails with [`LockError::Shutdown`] only if the operating system refuses a thread.
    pub fn build(self) -> Result<Redlock, LockError> {
        let config = self.config.build()?;
        let rng = rand_core::UnwrapErr(getrandom::SysRng);
        let client = Client::new(config.clone(), rng);
        let (tx, rx) = mpsc::unbounded_channel();
        let driver = Driver::new(client, rx, self.addrs, self.connect_timeout);
        std::thread::Builder::new()
            .name(DRIVER_THREAD.into())
            .spawn(move || async_io::block_on(driver.run()))
            .map_err(|_| LockError::Shutdown)?;
        Ok(Redlock {
            tx,
            shared: Arc::new(Shared {
                config,
                next_ticket: AtomicU64::new(0),
            }),
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

/// Cancels an acquisition whose future is dropped before it returned a guard.
struct CancelOnDrop<'a> {
    tx: &'a mpsc::UnboundedSender<Cmd>,
    ticket: u64,
    armed: bool,
}

impl Drop for CancelOnDrop<'_> {
    fn drop(&mut self) {
        if self.armed {
            let _ = self.tx.send(Cmd::Cancel {
                ticket: self.ticket,
            });
        }
    }
}

const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// The driver thread's name (15 bytes: Linux keeps no more).
const DRIVER_THREAD: &str = "redlock-asyncio";
