//! One real server process on a fixed loopback port, with its own temp dir: start, kill,
//! pause, resume, restart, and one-shot commands. Fault injection on the network path is the
//! [`Proxy`](crate::Proxy)'s job, not this file's.

use std::fs::{self, File, OpenOptions};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use crate::config::{Auth, NodeConfig};
use crate::process::{self, TempDir, Watchdog};
use crate::{Conn, Error, Reply};

/// A running (or killed) `redis-server`/`valkey-server` bound to 127.0.0.1. Methods take
/// `&self`, so tests may share a node across threads. Dropping it kills the process and
/// removes its temp dir.
#[derive(Debug)]
pub struct Node {
    config: Arc<NodeConfig>,
    port: u16,
    state: Mutex<State>,
    dir: TempDir,
}

impl Node {
    /// Starts a node on a free port and waits until it answers `PING`.
    pub(crate) fn start(config: Arc<NodeConfig>) -> Result<Self, Error> {
        let dir = TempDir::new("redlock-testkit")?;
        let data = dir.path().join("data");
        fs::create_dir(&data).map_err(|e| Error::io(format!("creating {}", data.display()), e))?;
        let mut node = Self {
            config,
            port: 0,
            state: Mutex::new(State::default()),
            dir,
        };
        let mut last = None;
        for _ in 0..PORT_ATTEMPTS {
            node.port = process::free_port()?;
            match node.launch() {
                Ok(()) => return Ok(node),
                // Lost the race for the port to another socket: try another port.
                Err(Launch::PortTaken(err)) => last = Some(err),
                Err(Launch::Failed(err)) => return Err(err),
            }
        }
        Err(last.unwrap_or_else(|| Error::Config("no port attempts were made".to_owned())))
    }

    /// The node's address, always on 127.0.0.1.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    /// The node's port; it stays the same across restarts.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:PORT` (credentials are not included).
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The process id while running, else `None`.
    pub fn pid(&self) -> Option<u32> {
        self.lock().server.as_ref().map(|s| s.child.id())
    }

    /// True while the process exists (paused counts as running). Reaps it if it exited.
    pub fn is_running(&self) -> bool {
        let mut state = self.lock();
        let exited = match state.server.as_mut() {
            None => return false,
            Some(server) => !matches!(server.child.try_wait(), Ok(None)),
        };
        if exited {
            state.stop();
        }
        !exited
    }

    /// True between [`Node::pause`] and [`Node::resume`].
    pub fn is_paused(&self) -> bool {
        self.lock().paused
    }

    /// SIGKILLs the process and waits for it to exit; a no-op if it is not running. Data
    /// written with AOF (`appendfsync always`) survives for [`Node::restart`].
    pub fn kill(&self) -> Result<(), Error> {
        self.lock().stop();
        Ok(())
    }

    /// SIGSTOPs the process: its sockets stay open and connects still succeed, but nothing
    /// is answered until [`Node::resume`].
    pub fn pause(&self) -> Result<(), Error> {
        let mut state = self.lock();
        let pid = state.pid().ok_or(Error::NotRunning { port: self.port })?;
        process::signal(pid, "STOP")?;
        process::wait_stopped(pid, true, SIGNAL_SETTLE);
        state.paused = true;
        Ok(())
    }

    /// SIGCONTs a paused process; a no-op if it is not paused.
    pub fn resume(&self) -> Result<(), Error> {
        let mut state = self.lock();
        let pid = state.pid().ok_or(Error::NotRunning { port: self.port })?;
        if state.paused {
            process::signal(pid, "CONT")?;
            process::wait_stopped(pid, false, SIGNAL_SETTLE);
            state.paused = false;
        }
        Ok(())
    }

    /// Kills the process if running, then starts it again on the same port with its data
    /// dir as it is (so with AOF on, acknowledged writes come back).
    pub fn restart(&self) -> Result<(), Error> {
        self.kill()?;
        self.relaunch()
    }

    /// Kills the process if running, deletes its data, then starts it again on the same
    /// port: a node that lost everything, as after a crash without persistence.
    pub fn restart_empty(&self) -> Result<(), Error> {
        self.kill()?;
        process::empty_dir(&self.data_dir())?;
        self.relaunch()
    }

    /// Sends one command over a fresh connection (authenticated if the cluster has
    /// credentials) with the cluster's command timeout. An AUTH failure comes back as its
    /// `Reply::Error`.
    pub fn command(&self, args: &[&str]) -> Result<Reply, Error> {
        self.command_with_timeout(args, self.config.command_timeout)
    }

    /// [`Node::command`] with its own timeout for connect, write and reply.
    pub fn command_with_timeout(&self, args: &[&str], timeout: Duration) -> Result<Reply, Error> {
        let mut conn = Conn::open(self.addr(), timeout)?;
        if let Some(reply) = self.authenticate(&mut conn)? {
            return Ok(reply);
        }
        conn.command(args)
    }

    /// Opens a connection, authenticated if the cluster has credentials.
    pub fn connect(&self) -> Result<Conn, Error> {
        let mut conn = Conn::open(self.addr(), self.config.command_timeout)?;
        match self.authenticate(&mut conn)? {
            None => Ok(conn),
            Some(reply) => Err(Error::Protocol(format!("AUTH failed: {reply}"))),
        }
    }

    /// The directory the server keeps its data (RDB, AOF) in.
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// The last few KiB of the server's log (its stdout and stderr), for failure messages.
    pub fn log_tail(&self) -> String {
        process::log_tail(&self.dir.path().join(LOG_FILE), LOG_TAIL_BYTES)
    }

    /// Sends AUTH if configured; returns the reply only if it is an error.
    fn authenticate(&self, conn: &mut Conn) -> Result<Option<Reply>, Error> {
        let reply = match &self.config.auth {
            Auth::None => return Ok(None),
            Auth::Password(pass) => conn.command(&["AUTH", pass])?,
            Auth::User { name, password } => conn.command(&["AUTH", name, password])?,
        };
        Ok(matches!(reply, Reply::Error(_)).then_some(reply))
    }

    fn relaunch(&self) -> Result<(), Error> {
        self.launch().map_err(|e| match e {
            Launch::PortTaken(err) | Launch::Failed(err) => err,
        })
    }

    /// Writes the config, spawns the server and its watchdog, and waits for `PING`.
    fn launch(&self) -> Result<(), Launch> {
        let conf = self.dir.path().join("node.conf");
        fs::write(&conf, self.config.render(self.port, &self.data_dir()))
            .map_err(|e| Launch::Failed(Error::io(format!("writing {}", conf.display()), e)))?;
        let log = self.open_log().map_err(Launch::Failed)?;
        // Only this run's part of the log tells whether this run lost the port.
        let log_start = log.metadata().map_or(0, |m| m.len());
        let log_err = log
            .try_clone()
            .map_err(|e| Launch::Failed(Error::io("duplicating the log handle", e)))?;
        let bin = self.config.bin.path();
        let mut child = Command::new(bin)
            .arg(&conf)
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .spawn()
            .map_err(|e| Launch::Failed(Error::io(format!("starting {}", bin.display()), e)))?;
        let watchdog = match Watchdog::start(child.id()) {
            Ok(w) => w,
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(Launch::Failed(e));
            }
        };
        self.lock().server = Some(Server { child, watchdog });
        let ready = self.wait_ready(log_start);
        if ready.is_err() {
            self.lock().stop();
        }
        ready
    }

    /// Polls until our own process answers `PING` and `INFO` shows its pid (so a server that
    /// already owned the port cannot pass for ours), the process exits, or the deadline.
    fn wait_ready(&self, log_start: u64) -> Result<(), Launch> {
        let deadline = Instant::now() + self.config.start_timeout;
        let failed = |reason: String| Error::Start {
            port: self.port,
            reason,
            log_tail: self.log_tail(),
        };
        loop {
            let pid = {
                let mut state = self.lock();
                let Some(server) = state.server.as_mut() else {
                    return Err(Launch::Failed(failed("process vanished".to_owned())));
                };
                if let Ok(Some(status)) = server.child.try_wait() {
                    let err = failed(format!("server exited with {status}"));
                    return Err(
                        if self.log_since(log_start).contains("Address already in use") {
                            Launch::PortTaken(err)
                        } else {
                            Launch::Failed(err)
                        },
                    );
                }
                server.child.id()
            };
            if let Ok(Reply::Simple(pong)) = self.command_with_timeout(&["PING"], PROBE_TIMEOUT)
                && pong == "PONG"
            {
                let info = self.command_with_timeout(&["INFO", "server"], PROBE_TIMEOUT);
                let owner = info
                    .ok()
                    .as_ref()
                    .and_then(Reply::as_str)
                    .and_then(info_pid);
                if owner == Some(pid) {
                    return Ok(());
                }
                if owner.is_some() {
                    let reason = format!("port already served by pid {owner:?}");
                    return Err(Launch::PortTaken(failed(reason)));
                }
            }
            if Instant::now() >= deadline {
                let reason = format!("no PONG within {:?}", self.config.start_timeout);
                return Err(Launch::Failed(failed(reason)));
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    fn open_log(&self) -> Result<File, Error> {
        let path = self.dir.path().join(LOG_FILE);
        OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| Error::io(format!("opening {}", path.display()), e))
    }

    /// The log written since byte `start` (empty if unreadable).
    fn log_since(&self, start: u64) -> String {
        let bytes = fs::read(self.dir.path().join(LOG_FILE)).unwrap_or_default();
        let start = usize::try_from(start)
            .unwrap_or(usize::MAX)
            .min(bytes.len());
        String::from_utf8_lossy(&bytes[start..]).into_owned()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panicking test thread may poison the lock; the state itself stays consistent
        // because every mutation is a single assignment.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.lock().stop();
        // `dir` is dropped after this, removing the data once the process is gone.
    }
}

#[derive(Debug, Default)]
struct State {
    server: Option<Server>,
    paused: bool,
}

impl State {
    fn pid(&self) -> Option<u32> {
        self.server.as_ref().map(|s| s.child.id())
    }

    /// SIGCONT (if paused), SIGKILL, disarm the watchdog, then reap: in that order, so the
    /// pid stays a zombie (not reusable) while the watchdog might still fire.
    fn stop(&mut self) {
        let Some(Server {
            mut child,
            watchdog,
        }) = self.server.take()
        else {
            return;
        };
        if std::mem::take(&mut self.paused) {
            let _ = process::signal(child.id(), "CONT");
        }
        let _ = child.kill();
        watchdog.disarm();
        let _ = child.wait();
    }
}

#[derive(Debug)]
struct Server {
    child: Child,
    watchdog: Watchdog,
}

enum Launch {
    PortTaken(Error),
    Failed(Error),
}

/// `process_id:1234` from an `INFO server` reply.
fn info_pid(info: &str) -> Option<u32> {
    info.lines()
        .find_map(|l| l.strip_prefix("process_id:"))
        .and_then(|p| p.trim().parse().ok())
}

const LOG_FILE: &str = "server.log";
const LOG_TAIL_BYTES: u64 = 4096;
const PORT_ATTEMPTS: usize = 5;
const PROBE_TIMEOUT: Duration = Duration::from_millis(250);
const SIGNAL_SETTLE: Duration = Duration::from_secs(1);
