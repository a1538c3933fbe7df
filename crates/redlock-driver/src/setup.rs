//! What every driver's builder collects ([`Setup`]), what its loop starts from
//! ([`DriverParts`]), and the builder users see ([`Builder`]). Starting the loop (a task, a
//! thread) is the driver's business: its [`Start`].

use std::fmt;
use std::marker::PhantomData;
use std::time::{Duration, Instant};

use redlock_core::{Client, Config, ConfigBuilder, LockError, NodeAddress};
use tokio::sync::mpsc;

use crate::handle::Handle;
use crate::waiters::Cmd;

/// The RNG the core draws tokens and jitter from: the operating system's.
pub type OsRng = rand_core::UnwrapErr<getrandom::SysRng>;

/// Node addresses, core configuration and connect timeout, as a driver's builder collects
/// them, and the clock of the driver's loop.
#[derive(Debug)]
pub struct Setup {
    addrs: Vec<NodeAddress>,
    config: ConfigBuilder,
    connect_timeout: Duration,
    clock: fn() -> Instant,
}

/// What a driver loop owns once [`Setup::build`] has validated the configuration.
#[derive(Debug)]
#[non_exhaustive]
pub struct DriverParts {
    /// The core, with the operating system's RNG.
    pub client: Client<OsRng>,
    /// Requests from the [`Handle`] and its guards; `None` once all of them are gone.
    pub commands: mpsc::UnboundedReceiver<Cmd>,
    /// Where each node is, indexed by `NodeId`.
    pub addrs: Vec<NodeAddress>,
    /// How long a connection attempt (name resolution included) may take.
    pub connect_timeout: Duration,
}

impl Setup {
    /// Parses node URLs: `redis://[user:password@]host:port[/db]` or `host:port`. A bad URL
    /// is an error naming it; `rediss://` is refused (no TLS yet). Each node's credentials
    /// and database go into the core configuration.
    pub fn from_urls<I, S>(urls: I) -> Result<Self, LockError>
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
        Ok(Self {
            addrs,
            config,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            clock: Instant::now,
        })
    }

    /// Adjusts the core configuration (ttl, quorum, drift, retry, auto-extension, ...).
    pub fn config(mut self, f: impl FnOnce(ConfigBuilder) -> ConfigBuilder) -> Self {
        self.config = f(self.config);
        self
    }

    /// How long a connection attempt (name resolution included) may take. Default 1 s.
    /// A timeout too long to add to an `Instant` (`Duration::MAX`) means no timeout.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// The clock the driver's loop stamps its inputs with, so that the handle and guards
    /// judge deadlines by the time the core's deadlines are counted in. Default: std's
    /// `Instant::now`. [`Builder::build`] sets it to [`Start::now`].
    pub fn clock(mut self, now: fn() -> Instant) -> Self {
        self.clock = now;
        self
    }

    /// Validates the configuration; returns the user's handle and what the driver loop owns.
    /// Dropping the parts instead of running them makes every request fail with
    /// [`LockError::Shutdown`].
    pub fn build(self) -> Result<(Handle, DriverParts), LockError> {
        let config = self.config.build()?;
        let client = Client::new(config.clone(), rand_core::UnwrapErr(getrandom::SysRng));
        let (tx, commands) = mpsc::unbounded_channel();
        let parts = DriverParts {
            client,
            commands,
            addrs: self.addrs,
            connect_timeout: self.connect_timeout,
        };
        Ok((Handle::new(tx, config, self.clock), parts))
    }
}

const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// How a driver starts its loop once [`Builder::build`] has validated the configuration.
pub trait Start {
    /// What the user gets: the driver's `Redlock`.
    type Redlock;

    /// Starts the loop on `parts`, serving `handle`. Fails with [`LockError::Start`] if
    /// the loop cannot start (no runtime to spawn on, no thread or poller).
    fn start(handle: Handle, parts: DriverParts) -> Result<Self::Redlock, LockError>;

    /// The clock the loop stamps its inputs with (STYLE.md section 7: one clock per
    /// driver). The handle and guards read it to judge the core's deadlines. Default: std's.
    fn now() -> Instant {
        Instant::now()
    }
}

/// Builds a driver's `Redlock` from node URLs and core configuration; each driver names it
/// `Builder` and starts from `Redlock::builder(urls)`.
pub struct Builder<S> {
    setup: Setup,
    start: PhantomData<fn() -> S>,
}

impl<S: Start> Builder<S> {
    /// Parses node URLs: `redis://[user:password@]host:port[/db]` or `host:port`. A bad URL
    /// is an error naming it; `rediss://` is refused (no TLS yet).
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
    /// Fails with [`LockError::Config`] on a bad configuration, and with
    /// [`LockError::Start`] if the loop cannot start: no tokio runtime for
    /// `redlock-tokio`, or the system refuses a thread or a poller.
    pub fn build(self) -> Result<S::Redlock, LockError> {
        let (handle, parts) = self.setup.clock(S::now).build()?;
        S::start(handle, parts)
    }
}

impl<S> fmt::Debug for Builder<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Builder")
            .field("setup", &self.setup)
            .finish()
    }
}
