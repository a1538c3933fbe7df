//! What every driver's builder collects ([`Setup`]) and what its loop starts from
//! ([`DriverParts`]): the core, the command channel, the node addresses and the loop's one
//! clock, which the handle and its guards read too.

use std::time::{Duration, Instant};

use rand_core::SeedableRng;
use redlock_core::{Client, Config, ConfigBuilder, NodeAddress};
use tokio::sync::mpsc;

use crate::endpoint::Endpoint;
use crate::error::LockError;
use crate::handle::Handle;
use crate::request::Cmd;

/// The RNG the core draws tokens and jitter from: ChaCha20, a CSPRNG, seeded once from the
/// operating system's when the driver is built (STYLE.md §5: "Drivers pass an OS-seeded
/// CSPRNG"). Drawing every token from the OS cost a `getrandom` system call per lock, half of
/// a concurrent lock cycle's system calls (benches/README.md, "Client CPU per lock"). Only the
/// driver's loop draws from it, and a forked child has no loop thread, so no two processes
/// share its stream.
pub type DriverRng = chacha20::ChaCha20Rng;

/// Node addresses, core configuration and connect timeout, as a driver's builder collects
/// them.
#[derive(Debug)]
pub struct Setup {
    addrs: Vec<NodeAddress>,
    config: ConfigBuilder,
    connect_timeout: Duration,
}

/// What a driver loop owns once [`Setup::build`] has validated the configuration.
#[derive(Debug)]
#[non_exhaustive]
pub struct DriverParts {
    /// The core, with an RNG seeded from the operating system's ([`DriverRng`]).
    pub client: Client<DriverRng>,
    /// Requests from the [`Handle`] and its guards; `None` once all of them are gone.
    pub commands: mpsc::UnboundedReceiver<Cmd>,
    /// Where each node is, indexed by `NodeId`.
    pub addrs: Vec<NodeAddress>,
    /// How each node is reached (TCP, TLS, unix socket), indexed by `NodeId`; TLS files
    /// already read.
    pub endpoints: Vec<Endpoint>,
    /// How long a connection attempt (name resolution included) may take.
    pub connect_timeout: Duration,
    /// The loop's clock, given to [`Setup::build`]: the loop MUST stamp every core input
    /// with it, since the handle and its guards judge the core's deadlines by it.
    pub clock: fn() -> Instant,
}

impl Setup {
    /// Parses node URLs (the forms of [`NodeAddress::parse`]: `redis://`, `rediss://` for
    /// TLS, `unix://` or a bare `host:port`). A bad URL is an error naming it. Each node's
    /// credentials and database go into the core configuration.
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
            config = config.address(i, addr);
        }
        Ok(Self {
            addrs,
            config,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
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

    /// Validates the configuration; returns the user's handle and what the driver loop owns.
    /// `clock` is the loop's clock (the driver's [`Start::now`](crate::Start::now)): the
    /// handle and its guards read it, and the loop stamps its inputs with it
    /// ([`DriverParts::clock`]), so the core's deadlines and `validity()` agree. Dropping the
    /// parts instead of running them makes every request fail with [`LockError::Shutdown`].
    /// TLS files are read here: an unusable one is [`LockError::Tls`]. The RNG is seeded
    /// here: an operating system that gives no random bytes is [`LockError::Start`].
    pub fn build(self, clock: fn() -> Instant) -> Result<(Handle, DriverParts), LockError> {
        let config = self.config.build()?;
        let endpoints = Endpoint::for_nodes(&self.addrs)?;
        let rng = DriverRng::try_from_rng(&mut getrandom::SysRng)
            .map_err(|e| LockError::Start(format!("no random bytes from the OS: {e}")))?;
        let client = Client::new(config.clone(), rng);
        let (tx, commands) = mpsc::unbounded_channel();
        let parts = DriverParts {
            client,
            commands,
            addrs: self.addrs,
            endpoints,
            connect_timeout: self.connect_timeout,
            clock,
        };
        Ok((Handle::new(tx, config, clock), parts))
    }
}

const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
