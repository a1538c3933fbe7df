//! `redlock`: a distributed flock for shells, cron and operators, over N independent Redis
//! or Valkey nodes, on the `redlock-tokio` driver.
//!
//! ```text
//! export REDLOCK_NODES=redis://127.0.0.1:7001,127.0.0.1:7002,127.0.0.1:7003
//! redlock exec nightly-report --no-wait -- ./report.sh   # one machine of the fleet at a time
//! redlock exec account:3 account:7 -- ./transfer.sh      # several names, all at once
//! redlock status nightly-report                          # who holds it, for how long
//! redlock release nightly-report --token 3f9c...         # let go of a stuck holder
//! redlock demo                                           # 5 local nodes, with and without
//! ```
//!
//! - `exec` acquires (waiting until free, `--wait DUR` the full time, or `--no-wait`), runs
//!   the command with the lock auto-extended, and releases once the command and every
//!   process left in its process group have exited (crate::job), exiting with the
//!   command's status. If the lock is lost meanwhile, the whole group gets SIGTERM (then
//!   SIGKILL after `--grace`), SIGKILL, or nothing (`--on-lost`), and `redlock` exits 76;
//!   so it does when it sees the job's end after the lock's deadline. The promise, what
//!   escapes it and the command's environment are written once, in the crate's README
//!   ("What `exec` promises"). SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to `redlock` are
//!   passed to the group once; Ctrl-Z stops both and `fg` resumes both. The lock is the
//!   resource's mutex, or with `--shared`, `--exclusive` or `--permits K` a reader, a
//!   writer or one of K permit holders (crate::kind; the README's "Kinds"). Several names
//!   before `--` are locked all at once, a multi-resource lock, held the same way (the
//!   README's "Several resources").
//! - `status` reads each node's key (`GET`, `PTTL`; no script) and shows the holder a quorum
//!   agrees on and its remaining validity (the q-th largest ttl among the nodes that agree,
//!   less the drift allowance); `--json` for scripts.
//! - `release --token T` deletes the key where it holds exactly `T` and reports each node.
//! - `demo` needs no nodes: it starts 5 local ones (`redis-server` or `valkey-server` on
//!   `PATH`, or `REDLOCK_SERVER_BIN`: crate::local_nodes), kills one midway and restarts it
//!   after the ttl.
//!
//! - Nodes come from `--nodes`, `--nodes-file`, `REDLOCK_NODES` or `REDLOCK_NODES_FILE`
//!   (crate::cli); the command does not inherit `REDLOCK_NODES`.
//! - `demo` with `--nodes` (or `REDLOCK_NODES`) runs on those instead, the counter on the
//!   first; it kills and restarts none of them (it says so) and deletes its keys after.
//!
//! # Exit codes
//!
//! | code | meaning |
//! |---|---|
//! | the command's | `exec`: its own status; 128+N if it died of signal N |
//! | 64 | usage or configuration error: bad option, URL or duration, missing `--`, empty resource, no nodes, a TLS file that cannot be read or used, a key that holds something other than a lock (another program uses the name) |
//! | 69 | node error: too few nodes answered to decide |
//! | 75 | not acquired: held by another client, or by another lock call of this process (`HeldLocally`), with `--no-wait`, or `--wait` ran out (`-E CODE` changes it); `release`: the token held nothing where a quorum answered |
//! | 76 | lost while the command's group ran: extensions failed past the validity, were refused for good (`Refused`: ACL, replica, another writer; the message says which), or stopped at `--max-hold`; or the job's end was seen after the lock's deadline |
//! | 78 | `exec --permits K`: the holders in place use another K (crate::kind) |
//! | 126 / 127 | `exec`: the command could not be run / was not found |
//! | 128+N | `exec`: `redlock` got signal N while waiting for the lock; nothing ran |
//!
//! On every path out, what `redlock` set is released before it exits (or, where a node
//! cannot be reached, expires within the ttl). Node URLs are shown with their passwords
//! redacted; no write to a closed stdout or stderr panics (crate::out).
//!
//! # For operators
//!
//! ```text
//! # crontab on every machine: the report runs on one of them; the others exit 75 at once.
//! */5 * * * * REDLOCK_NODES=redis://a:6379,redis://b:6379,redis://c:6379 redlock exec --no-wait nightly-report -- ./report.sh
//! ```

// Every write goes through crate::out, which never panics on a broken pipe.
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod cli;
mod counter;
mod demo;
mod exec;
mod exit;
mod job;
mod json;
mod kind;
mod local_nodes;
mod out;
mod progress;
mod signals;
mod status;

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use redlock_tokio::Redlock;

use crate::cli::{Command, NodeArgs};
use crate::exit::Exit;

fn main() -> ExitCode {
    let exit = match cli::parse() {
        Ok(cli) => run(cli.command),
        Err(exit) => exit,
    };
    if !exit.message.is_empty() {
        let mut stderr = std::io::stderr().lock();
        let _ = writeln!(stderr, "redlock: {}", exit.message);
    }
    ExitCode::from(exit.code)
}

/// Runs one subcommand on a current-thread runtime: everything `redlock` waits on (the
/// driver, the child, signals, timers) is IO, never CPU.
fn run(command: Command) -> Exit {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return Exit::with(exit::NODE_ERROR, format_args!("no runtime: {e}")),
    };
    let exit = runtime.block_on(async move {
        match command {
            Command::Exec(args) => exec::run(args).await,
            Command::Status(args) => status::status(args).await,
            Command::Release(args) => status::release(args).await,
            Command::Demo(args) => demo::run(args).await,
        }
    });
    // The driver task has answered everything `redlock` waited on (a release's report);
    // nothing it still runs holds a lock.
    runtime.shutdown_timeout(Duration::from_millis(100));
    exit
}

/// A driver for `nodes` with locks of `ttl`; a bad URL or ttl is a usage error, whose
/// message names the node with any password redacted.
pub(crate) fn connect(nodes: &NodeArgs, ttl: Duration) -> Result<Redlock, Exit> {
    let urls = (nodes.source.nodes.iter())
        .map(|n| n.trim())
        .filter(|n| !n.is_empty());
    Redlock::builder(urls)
        .and_then(|b| b.config(|c| c.ttl(ttl)).build())
        .map_err(|e| Exit::bare_lock_error(&e))
}
