//! Operating-system plumbing for [`Node`](crate::Node): temp dirs, free loopback ports,
//! signals through the `kill` binary, and a watchdog that kills a server if the test process
//! dies without running destructors. It knows nothing about Redis.

use std::fs;
use std::io::{self, Read, Seek, SeekFrom};
use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::Error;

/// A directory under [`std::env::temp_dir`] that is removed, with its contents, on drop.
#[derive(Debug)]
pub(crate) struct TempDir {
    path: PathBuf,
}

impl TempDir {
    /// Creates a fresh, uniquely named directory (process id, counter and clock in the name).
    pub(crate) fn new(prefix: &str) -> Result<Self, Error> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        for _ in 0..100 {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let name = format!("{prefix}-{}-{n}-{nanos:09}", std::process::id());
            let path = std::env::temp_dir().join(name);
            match fs::create_dir(&path) {
                Ok(()) => return Ok(Self { path }),
                // Left over from an earlier process with a recycled pid: pick another name.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(Error::io(format!("creating {}", path.display()), e)),
            }
        }
        Err(Error::Config(format!("no free temp dir name for {prefix}")))
    }

    /// The directory's absolute path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        // Best effort: a leftover dir under /tmp is harmless, a panic in drop is not.
        let _ = fs::remove_dir_all(&self.path);
    }
}

/// Removes everything inside `dir` but keeps `dir` itself.
pub(crate) fn empty_dir(dir: &Path) -> Result<(), Error> {
    let context = || format!("emptying {}", dir.display());
    for entry in fs::read_dir(dir).map_err(|e| Error::io(context(), e))? {
        let path = entry.map_err(|e| Error::io(context(), e))?.path();
        let removed = if path.is_dir() {
            fs::remove_dir_all(&path)
        } else {
            fs::remove_file(&path)
        };
        removed.map_err(|e| Error::io(context(), e))?;
    }
    Ok(())
}

/// A loopback port that was free a moment ago. The caller must cope with losing a race for
/// it (the kernel may hand it out again before the server binds it).
pub(crate) fn free_port() -> Result<u16, Error> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .map_err(|e| Error::io("binding 127.0.0.1:0 to pick a port", e))?;
    let port = listener
        .local_addr()
        .map_err(|e| Error::io("reading the picked port", e))?
        .port();
    Ok(port)
}

/// The last `max` bytes of a log file, trimmed to whole lines; a note if it cannot be read.
pub(crate) fn log_tail(path: &Path, max: u64) -> String {
    let read = || -> io::Result<String> {
        let mut file = fs::File::open(path)?;
        let len = file.metadata()?.len();
        file.seek(SeekFrom::Start(len.saturating_sub(max)))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        let text = String::from_utf8_lossy(&bytes).into_owned();
        Ok(match (len > max, text.find('\n')) {
            (true, Some(i)) => text[i + 1..].to_owned(),
            _ => text,
        })
    };
    read().unwrap_or_else(|e| format!("(no log at {}: {e})", path.display()))
}

/// Sends `signal` ("STOP", "CONT") to `pid` through the `kill` binary, which keeps the crate
/// free of libc and unsafe code.
pub(crate) fn signal(pid: u32, signal: &str) -> Result<(), Error> {
    let context = || format!("sending SIG{signal} to pid {pid}");
    let status = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(|e| Error::io(context(), e))?;
    if status.success() {
        Ok(())
    } else {
        Err(Error::io(
            context(),
            io::Error::other(format!("kill exited with {status}")),
        ))
    }
}

/// Waits (bounded by `timeout`) until `/proc` shows `pid` stopped or not stopped, so that a
/// test's next step sees the signal's effect. Returns quietly where `/proc` is missing.
pub(crate) fn wait_stopped(pid: u32, stopped: bool, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
            return;
        };
        // Format: "pid (comm) S ...": the state follows the last ')', as comm may hold one.
        let state = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next());
        if matches!(state, Some('T' | 't')) == stopped {
            return;
        }
        thread::sleep(Duration::from_millis(2));
    }
}

/// A `sh` process that SIGKILLs one server when our end of its stdin pipe closes, which the
/// kernel does when the test process dies in any way, destructors or not.
#[derive(Debug)]
pub(crate) struct Watchdog {
    child: Child,
}

impl Watchdog {
    /// Starts a watchdog for `pid`.
    pub(crate) fn start(pid: u32) -> Result<Self, Error> {
        let child = Command::new("sh")
            .args(["-c", "read -r _; kill -KILL \"$1\" 2>/dev/null", "watchdog"])
            .arg(pid.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| Error::io("starting the watchdog shell", e))?;
        Ok(Self { child })
    }

    /// Ends the watchdog without letting it signal. Call this before reaping the server: the
    /// server's pid cannot be reused while it is an unreaped zombie, so a late watchdog
    /// can never hit an unrelated process.
    pub(crate) fn disarm(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        // Normally `disarm` already reaped it; this covers early-return paths.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
