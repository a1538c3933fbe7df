//! One real server process on a fixed loopback port, with its own temp dir: start, kill,
//! pause, resume, restart, one-shot commands, and the server-side states a test may want
//! (out of memory, a replica). Fault injection on the network path is the
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
    /// The TLS port of a TLS cluster's node, else 0.
    tls_port: u16,
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
            tls_port: 0,
            state: Mutex::new(State::default()),
            dir,
        };
        let mut last = None;
        for _ in 0..PORT_ATTEMPTS {
            node.port = process::free_port()?;
            if node.config.tls.is_some() {
                node.tls_port = process::free_port()?;
            }
            match node.launch() {
                Ok(()) => return Ok(node),
                // Lost the race for the port to another socket: try another port.
                Err(Launch::PortTaken(err)) => last = Some(err),
                Err(Launch::Failed(err)) => return Err(err),
            }
        }
        Err(last.unwrap_or_else(|| Error::Config("no port attempts were made".to_owned())))
    }

    /// The binary this node runs, with its kind and version.
    pub fn server(&self) -> &crate::ServerBin {
        &self.config.bin
    }

    /// The node's address, always on 127.0.0.1.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    /// The node's port; it stays the same across restarts.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:PORT`, or `unix:///PATH` for a node on a unix socket
    /// (credentials are not included).
    pub fn url(&self) -> String {
        match self.config.unix {
            true => format!("unix://{}", self.socket_path().display()),
            false => format!("redis://127.0.0.1:{}", self.port),
        }
    }

    /// The TLS port of a [`tls`](crate::ClusterBuilder::tls) cluster's node, else `None`.
    pub fn tls_port(&self) -> Option<u16> {
        self.config.tls.as_ref().map(|_| self.tls_port)
    }

    /// `rediss://127.0.0.1:TLS_PORT?ca=PATH` for a TLS node, trusting the cluster's CA, with
    /// the client certificate (`&cert=...&key=...`) if the node requires one; credentials
    /// as in [`client_url`](Self::client_url). `None` without TLS.
    pub fn tls_url(&self) -> Option<String> {
        let tls = self.config.tls.as_ref()?;
        let userinfo = self.userinfo().map(|u| format!("{u}@")).unwrap_or_default();
        let mut url = format!(
            "rediss://{userinfo}127.0.0.1:{}?ca={}",
            self.tls_port,
            tls.certs.ca().display()
        );
        if tls.client_cert {
            let (cert, key) = (tls.certs.client_cert(), tls.certs.client_key());
            url.push_str(&format!("&cert={}&key={}", cert.display(), key.display()));
        }
        Some(url)
    }

    /// `unix:///PATH` for a node with a unix socket
    /// ([`unix_socket`](crate::ClusterBuilder::unix_socket) or
    /// [`unix_socket_too`](crate::ClusterBuilder::unix_socket_too)), else `None`
    /// (credentials are not included).
    pub fn unix_url(&self) -> Option<String> {
        (self.config.unix || self.config.unix_too)
            .then(|| format!("unix://{}", self.socket_path().display()))
    }

    /// The unix socket a [`unix_socket`](crate::ClusterBuilder::unix_socket) cluster's node
    /// listens on (and only on); for other nodes, where it would be.
    pub fn socket_path(&self) -> PathBuf {
        self.dir.path().join(SOCKET_FILE)
    }

    /// The URL a client logs in with: `redis://user:password@127.0.0.1:PORT` for an
    /// [`user`](crate::ClusterBuilder::user), `redis://:password@127.0.0.1:PORT` for a
    /// [`password`](crate::ClusterBuilder::password) (both percent-encoded), else
    /// [`url`](Self::url). It logs in as the clients' user, never as the kit's admin.
    pub fn client_url(&self) -> String {
        if self.config.unix {
            let query = match &self.config.auth {
                Auth::None => return self.url(),
                Auth::Password(pass) => format!("password={}", percent_encode(pass)),
                Auth::User { name, password } => format!(
                    "user={}&password={}",
                    percent_encode(name),
                    percent_encode(password)
                ),
            };
            return format!("{}?{query}", self.url());
        }
        match self.userinfo() {
            None => self.url(),
            Some(userinfo) => format!("redis://{userinfo}@127.0.0.1:{}", self.port),
        }
    }

    /// `user:password` or `:password`, percent-encoded, if clients log in.
    fn userinfo(&self) -> Option<String> {
        match &self.config.auth {
            Auth::None => None,
            Auth::Password(pass) => Some(format!(":{}", percent_encode(pass))),
            Auth::User { name, password } => Some(format!(
                "{}:{}",
                percent_encode(name),
                percent_encode(password)
            )),
        }
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
    /// credentials, as the kit's admin user if it [denies](crate::ClusterBuilder::deny)
    /// commands) with the cluster's command timeout. An AUTH failure comes back as its
    /// `Reply::Error`.
    pub fn command(&self, args: &[&str]) -> Result<Reply, Error> {
        self.command_with_timeout(args, self.config.command_timeout)
    }

    /// [`Node::command`] with its own timeout for connect, write and reply.
    pub fn command_with_timeout(&self, args: &[&str], timeout: Duration) -> Result<Reply, Error> {
        let mut conn = self.open(timeout)?;
        if let Some(reply) = self.authenticate(&mut conn)? {
            return Ok(reply);
        }
        conn.command(args)
    }

    /// Opens a connection, authenticated as [`Node::command`] is.
    pub fn connect(&self) -> Result<Conn, Error> {
        let mut conn = self.open(self.config.command_timeout)?;
        match self.authenticate(&mut conn)? {
            None => Ok(conn),
            Some(reply) => Err(Error::Protocol(format!("AUTH failed: {reply}"))),
        }
    }

    /// A plain connection for the kit: the TCP port, or the socket of a unix-socket node.
    fn open(&self, timeout: Duration) -> Result<Conn, Error> {
        match self.config.unix {
            true => Conn::open_unix(&self.socket_path(), timeout),
            false => Conn::open(self.addr(), timeout),
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

    /// Makes the node refuse writes for memory: `maxmemory-policy noeviction` and
    /// `maxmemory` set to `bytes` at run time. `1` makes every command that may grow memory
    /// (`SET`, ...) fail with `-OOM command not allowed when used memory > 'maxmemory'.`
    /// while reads and `DEL` still work; `0` lifts the limit. A restart forgets it.
    pub fn set_maxmemory(&self, bytes: u64) -> Result<(), Error> {
        self.expect_ok(&["CONFIG", "SET", "maxmemory-policy", "noeviction"])?;
        self.expect_ok(&["CONFIG", "SET", "maxmemory", &bytes.to_string()])
    }

    /// Makes this node a replica of `primary` (`REPLICAOF 127.0.0.1 PORT`, logging in to it
    /// as the kit does) and waits, bounded by the start timeout, until the link is up and
    /// the first sync done: from then on writes get
    /// `-READONLY You can't write against a read only replica.` and its data is the
    /// primary's. [`promote`](Self::promote) or a restart makes it a primary again.
    pub fn replicate(&self, primary: &Self) -> Result<(), Error> {
        if let Some((user, password)) = primary.config.kit_login() {
            if let Some(user) = user {
                self.expect_ok(&["CONFIG", "SET", "masteruser", user])?;
            }
            self.expect_ok(&["CONFIG", "SET", "masterauth", password])?;
        }
        let port = primary.port.to_string();
        self.expect_ok(&["REPLICAOF", "127.0.0.1", &port])?;
        let deadline = Instant::now() + self.config.start_timeout;
        loop {
            let info = self.command(&["INFO", "replication"])?;
            if info
                .as_str()
                .is_some_and(|i| i.contains("master_link_status:up"))
            {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(Error::Start {
                    port: self.port,
                    reason: format!(
                        "no replication link to 127.0.0.1:{port} within {:?}",
                        self.config.start_timeout
                    ),
                    log_tail: self.log_tail(),
                });
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// Makes a replica a primary again (`REPLICAOF NO ONE`), keeping its data.
    pub fn promote(&self) -> Result<(), Error> {
        self.expect_ok(&["REPLICAOF", "NO", "ONE"])
    }

    /// Sends a command that must answer `+OK`; an error reply is [`Error::Refused`].
    fn expect_ok(&self, args: &[&str]) -> Result<(), Error> {
        match self.command(args)? {
            Reply::Simple(ok) if ok == "OK" => Ok(()),
            reply => {
                // The password after `masterauth` stays out of the error.
                let shown: Vec<&str> = args
                    .iter()
                    .enumerate()
                    .map(|(i, arg)| match i.checked_sub(1).map(|prev| args[prev]) {
                        Some(prev) if prev.eq_ignore_ascii_case("masterauth") => "***",
                        _ => arg,
                    })
                    .collect();
                Err(Error::Refused {
                    command: shown.join(" "),
                    reply: reply.to_string(),
                })
            }
        }
    }

    /// Sends AUTH if the kit has credentials to log in with; returns the reply only if it is
    /// an error.
    fn authenticate(&self, conn: &mut Conn) -> Result<Option<Reply>, Error> {
        let reply = match self.config.kit_login() {
            None => return Ok(None),
            Some((None, password)) => conn.command(&["AUTH", password])?,
            Some((Some(user), password)) => conn.command(&["AUTH", user, password])?,
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
        let socket = self.socket_path();
        let rendered = (self.config).render(self.port, self.tls_port, &socket, &self.data_dir());
        fs::write(&conf, rendered)
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

/// `s` with every byte but RFC 3986's unreserved characters as `%XX`, for URL user info.
fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

const LOG_FILE: &str = "server.log";
const SOCKET_FILE: &str = "redis.sock";
const LOG_TAIL_BYTES: u64 = 4096;
const PORT_ATTEMPTS: usize = 5;
const PROBE_TIMEOUT: Duration = Duration::from_millis(250);
const SIGNAL_SETTLE: Duration = Duration::from_secs(1);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_info_is_percent_encoded() {
        assert_eq!(percent_encode("locker"), "locker");
        assert_eq!(percent_encode("a b:c@d/\"é"), "a%20b%3Ac%40d%2F%22%C3%A9");
        assert_eq!(percent_encode("-._~"), "-._~");
    }
}
