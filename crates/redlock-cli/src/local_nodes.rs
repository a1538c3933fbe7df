//! The demo's own nodes: N `redis-server` (or `valkey-server`) processes on 127.0.0.1, with
//! no persistence or TLS. Only what the demo needs: start them, kill one, restart it (empty),
//! see which run, stop them all. It knows nothing of locks; the tests' fuller kit (pauses,
//! proxies, TLS) is `redlock-testkit`, which the shipped binary does not depend on.
//!
//! Every process it starts is stopped by it: [`LocalNodes::stop`] kills and reaps them, and
//! each is killed when dropped (tokio's `kill_on_drop`), so a demo interrupted (its future
//! dropped on INT, TERM, HUP or QUIT), failing or unwinding from a panic leaves none running.

use std::ffi::OsStr;
use std::fmt;
use std::io;
use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};

/// The nodes `redlock demo` started, one server process each (or none, while killed).
pub(crate) struct LocalNodes {
    server: Server,
    nodes: Vec<LocalNode>,
}

/// One node: its port, kept across restarts, and its process while it runs.
struct LocalNode {
    port: u16,
    process: Option<Child>,
}

impl LocalNodes {
    /// Finds the server binary ([`Server::find`]) and starts `n` nodes on free loopback
    /// ports, each answering before the next starts.
    pub(crate) async fn start(n: usize) -> io::Result<Self> {
        let mut started = Self {
            server: Server::find()?,
            nodes: Vec::with_capacity(n),
        };
        for _ in 0..n {
            let node = started.server.launch_on_a_free_port().await?;
            started.nodes.push(node);
        }
        Ok(started)
    }

    /// Node `i`'s URL, `redis://127.0.0.1:PORT`.
    pub(crate) fn url(&self, i: usize) -> String {
        format!("redis://127.0.0.1:{}", self.nodes[i].port)
    }

    /// The binary the nodes run, for the demo's first line.
    pub(crate) fn server(&self) -> &Server {
        &self.server
    }

    /// True while node `i`'s process runs.
    pub(crate) fn is_running(&mut self, i: usize) -> bool {
        let process = self.nodes[i].process.as_mut();
        process.is_some_and(|p| matches!(p.try_wait(), Ok(None)))
    }

    /// SIGKILLs node `i` and waits for it to exit; a no-op if it is not running.
    pub(crate) async fn kill(&mut self, i: usize) -> io::Result<()> {
        let Some(mut process) = self.nodes[i].process.take() else {
            return Ok(());
        };
        if matches!(process.try_wait(), Ok(Some(_))) {
            // Exited already (and now reaped): nothing to kill.
            return Ok(());
        }
        process.kill().await
    }

    /// Kills node `i` if it runs, then starts it again on its port, empty.
    pub(crate) async fn restart(&mut self, i: usize) -> io::Result<()> {
        self.kill(i).await?;
        let port = self.nodes[i].port;
        let process = self.server.launch(port).await?;
        self.nodes[i].process = Some(process);
        Ok(())
    }

    /// Kills every node and waits for each to exit.
    pub(crate) async fn stop(mut self) {
        for i in 0..self.nodes.len() {
            // A node that cannot be signalled has exited already.
            let _ = self.kill(i).await;
        }
    }
}

/// A server binary that answered `--version` as Redis or Valkey does.
pub(crate) struct Server {
    path: PathBuf,
    /// "Redis 7.0.15", from the first line of `--version`.
    name: String,
}

impl Server {
    /// The binary named by `REDLOCK_SERVER_BIN` if set, else the first `redis-server` or
    /// `valkey-server` on `PATH`. The error names what it looked for and how to provide it.
    fn find() -> io::Result<Self> {
        if let Some(path) = std::env::var_os(SERVER_ENV_VAR).filter(|p| !p.is_empty()) {
            let path = PathBuf::from(path);
            return Self::at(&path).map_err(|e| {
                io::Error::other(format!(
                    "{SERVER_ENV_VAR}={} cannot be used: {e}; set it to a redis-server or \
                     valkey-server binary, or unset it to use the one on PATH",
                    path.display()
                ))
            });
        }
        match SERVER_NAMES.iter().find_map(find_on_path) {
            Some(path) => Self::at(&path),
            None => Err(io::Error::other(format!(
                "no redis-server or valkey-server on PATH: install one (`apt-get install \
                 redis-server`, `brew install redis`), set {SERVER_ENV_VAR} to one, or run the \
                 demo on nodes of yours with --nodes"
            ))),
        }
    }

    /// Runs `path --version` and reads what server it is.
    fn at(path: &Path) -> io::Result<Self> {
        let out = std::process::Command::new(path)
            .arg("--version")
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()?;
        let text = String::from_utf8_lossy(&out.stdout);
        let first = text.lines().next().unwrap_or_default();
        let mut words = first.split_whitespace();
        let kind = words.next().filter(|k| matches!(*k, "Redis" | "Valkey"));
        let version = words.find_map(|w| w.strip_prefix("v="));
        match (kind, version) {
            (Some(kind), Some(version)) if out.status.success() => Ok(Self {
                path: path.to_owned(),
                name: format!("{kind} {version}"),
            }),
            _ => Err(io::Error::other(format!(
                "it is neither redis-server nor valkey-server: `--version` printed {first:?}"
            ))),
        }
    }

    /// Starts a node on a port that was free a moment ago, on another one if a process
    /// took that port meanwhile.
    async fn launch_on_a_free_port(&self) -> io::Result<LocalNode> {
        let mut attempts = 0;
        loop {
            let port = free_port()?;
            match self.launch(port).await {
                Ok(process) => {
                    return Ok(LocalNode {
                        port,
                        process: Some(process),
                    });
                }
                Err(e) if e.kind() == io::ErrorKind::AddrInUse && attempts < PORT_ATTEMPTS => {
                    attempts += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Starts the server on 127.0.0.1:`port` (no snapshots, no AOF) and waits until it is
    /// the process answering there. A port another process took fails with `AddrInUse`.
    async fn launch(&self, port: u16) -> io::Result<Child> {
        let port_arg = port.to_string();
        let mut process = Command::new(&self.path)
            .args(["--bind", "127.0.0.1", "--port", &port_arg])
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            // Nothing is written there (no persistence); a server's dir must exist.
            .current_dir(std::env::temp_dir())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| io::Error::other(format!("cannot run {}: {e}", self.path.display())))?;
        if let Err(e) = wait_until_ours(&mut process, port).await {
            // Killed and reaped here, not left to `kill_on_drop`'s unreaped kill.
            let _ = process.kill().await;
            return Err(e);
        }
        // From now on its log is read and dropped, so that a full pipe never blocks it.
        for mut log in pipes(&mut process) {
            tokio::spawn(async move { tokio::io::copy(&mut log, &mut tokio::io::sink()).await });
        }
        Ok(process)
    }
}

impl fmt::Display for Server {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name, self.path.display())
    }
}

/// Waits until `process` is the server answering on 127.0.0.1:`port`; fails if it exits
/// first (its last words say why), another process answers there, or [`START_TIMEOUT`]
/// passes.
async fn wait_until_ours(process: &mut Child, port: u16) -> io::Result<()> {
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        if let Ok(Some(status)) = process.try_wait() {
            let mut log = Vec::new();
            for mut pipe in pipes(process) {
                let _ = pipe.read_to_end(&mut log).await;
            }
            let log = String::from_utf8_lossy(&log);
            let reason = format!(
                "the server on port {port} exited with {status}: {}",
                last_line(&log)
            );
            return Err(match log.contains("Address already in use") {
                true => io::Error::new(io::ErrorKind::AddrInUse, reason),
                false => io::Error::other(reason),
            });
        }
        match (answering_pid(port).await, process.id()) {
            (Some(pid), Some(ours)) if pid == ours => return Ok(()),
            (Some(pid), _) => {
                let reason = format!("port {port} is served by another process ({pid})");
                return Err(io::Error::new(io::ErrorKind::AddrInUse, reason));
            }
            _ => {}
        }
        if Instant::now() >= deadline {
            let reason =
                format!("the server on port {port} did not answer within {START_TIMEOUT:?}");
            return Err(io::Error::other(reason));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The process id of the server answering on 127.0.0.1:`port` (`INFO server`'s
/// `process_id`), or `None` if none answers yet.
async fn answering_pid(port: u16) -> Option<u32> {
    let ask = async {
        let mut stream = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).await.ok()?;
        stream.write_all(b"INFO server\r\n").await.ok()?;
        let mut reader = BufReader::new(stream);
        let mut header = String::new();
        reader.read_line(&mut header).await.ok()?;
        let len: usize = header.trim_end().strip_prefix('$')?.parse().ok()?;
        let mut info = vec![0; len];
        reader.read_exact(&mut info).await.ok()?;
        let info = String::from_utf8_lossy(&info).into_owned();
        info.lines()
            .find_map(|l| l.strip_prefix("process_id:"))
            .and_then(|pid| pid.trim().parse().ok())
    };
    tokio::time::timeout(PROBE_TIMEOUT, ask)
        .await
        .ok()
        .flatten()
}

/// The last line of `log` that is not blank, for an error message.
fn last_line(log: &str) -> &str {
    let last = log.lines().rev().find(|l| !l.trim().is_empty());
    last.map_or("it printed nothing", str::trim)
}

/// A server's stdout and stderr, as far as they are still to be read (each is taken).
fn pipes(process: &mut Child) -> impl Iterator<Item = Box<dyn Pipe>> {
    let stdout = process.stdout.take().map(|p| Box::new(p) as Box<dyn Pipe>);
    let stderr = process.stderr.take().map(|p| Box::new(p) as Box<dyn Pipe>);
    stdout.into_iter().chain(stderr)
}

/// A pipe from a server process.
trait Pipe: tokio::io::AsyncRead + Unpin + Send {}
impl<T: tokio::io::AsyncRead + Unpin + Send> Pipe for T {}

/// A loopback port that was free a moment ago (the server may lose it to another process).
fn free_port() -> io::Result<u16> {
    Ok(TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?
        .local_addr()?
        .port())
}

/// The first executable file called `name` in a `PATH` directory.
fn find_on_path(name: impl AsRef<OsStr>) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let dirs = std::env::var_os("PATH")?;
    std::env::split_paths(&dirs)
        .map(|dir| dir.join(name.as_ref()))
        .find(|path| {
            (path.metadata()).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// Names the server binary to run instead of the one on `PATH`.
const SERVER_ENV_VAR: &str = "REDLOCK_SERVER_BIN";
/// The binaries looked up on `PATH`, in order.
const SERVER_NAMES: [&str; 2] = ["redis-server", "valkey-server"];
/// How many other ports a node tries when a process took its port before it bound it.
const PORT_ATTEMPTS: usize = 5;
/// How long a server may take to answer after it is started.
const START_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one `INFO server` may take while a server starts.
const PROBE_TIMEOUT: Duration = Duration::from_millis(250);
