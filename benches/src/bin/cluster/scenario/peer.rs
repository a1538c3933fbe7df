//! Another process of `contended2x4` or `contended4x2`: this binary re-run with
//! `--contended-child SUBJECT` (and `--contended-workers FIRST,COUNT,TOTAL`).
//! The parent ([`Peer`]) starts it, waits for `ready` (client built, warmed up), then per
//! round writes `go MICROS` on its stdin and reads back one `part JSON` line
//! ([`RoundPart`]) on its stdout. The child (`contended::child`) ends at the end of its stdin; the
//! parent closes it when the [`Peer`] is dropped and kills the child if it has not exited
//! within [`EXIT_GRACE`]. Every wait for the child is bounded.

use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use super::record::RoundPart;

/// The parent's handle on one other process (its share of one subject's 8 workers).
pub(crate) struct Peer {
    child: Child,
    stdin: Option<ChildStdin>,
    /// The child's stdout lines, read by a thread of their own (so a full pipe never
    /// blocks the child), until it closes.
    lines: mpsc::UnboundedReceiver<String>,
    workers: u32,
    subject: String,
}

/// What the parent tells a second process: which subject, where, on which key, which
/// workers.
#[derive(Debug, Clone)]
pub(crate) struct PeerSpec {
    pub(crate) subject: String,
    pub(crate) nodes: Vec<SocketAddr>,
    pub(crate) key: String,
    /// The first worker's number (workers are numbered across the processes).
    pub(crate) first: u32,
    pub(crate) workers: u32,
    /// Every process's workers together.
    pub(crate) total: u32,
}

impl Peer {
    /// Starts the second process and waits (at most [`READY_BOUND`]) until it is ready.
    pub(crate) async fn spawn(spec: &PeerSpec, quick: bool) -> Result<Self, String> {
        let exe = std::env::current_exe().map_err(|e| format!("peer: this binary: {e}"))?;
        let nodes: Vec<String> = spec.nodes.iter().map(ToString::to_string).collect();
        let mut command = Command::new(&exe);
        command
            .args([
                "--contended-child",
                &spec.subject,
                "--contended-key",
                &spec.key,
            ])
            .args([
                "--contended-workers",
                &format!("{},{},{}", spec.first, spec.workers, spec.total),
            ])
            .args(["--child-nodes", &nodes.join(",")])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        if quick {
            command.arg("--quick");
        }
        let mut child = command
            .spawn()
            .map_err(|e| format!("peer: starting {}: {e}", exe.display()))?;
        let (tx, lines) = mpsc::unbounded_channel();
        if let Some(stdout) = child.stdout.take() {
            // Ends when the child's stdout closes (it exited or was killed).
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                    if tx.send(line).is_err() {
                        return;
                    }
                }
            });
        }
        let mut peer = Self {
            stdin: child.stdin.take(),
            child,
            lines,
            workers: spec.workers,
            subject: spec.subject.clone(),
        };
        // On an error the peer is dropped here, which stops the child.
        let ready = peer.line(READY_BOUND).await?;
        if ready != "ready" {
            return Err(format!(
                "peer {}: expected ready, got {ready:?}",
                peer.subject
            ));
        }
        Ok(peer)
    }

    /// The second process's worker count.
    pub(crate) fn workers(&self) -> u32 {
        self.workers
    }

    /// Starts a round of `slice` in the second process.
    pub(crate) fn go(&mut self, slice: Duration) -> Result<(), String> {
        let stdin = self.stdin.as_mut().ok_or("peer: stdin closed")?;
        writeln!(stdin, "go {}", slice.as_micros())
            .and_then(|()| stdin.flush())
            .map_err(|e| format!("peer {}: go: {e}", self.subject))
    }

    /// The second process's part of the round, waiting at most `bound`.
    pub(crate) async fn part(&mut self, bound: Duration) -> Result<RoundPart, String> {
        let line = self.line(bound).await?;
        let json = line
            .strip_prefix("part ")
            .ok_or_else(|| format!("peer {}: expected a part, got {line:?}", self.subject))?;
        serde_json::from_str(json).map_err(|e| format!("peer {}: part: {e}", self.subject))
    }

    async fn line(&mut self, bound: Duration) -> Result<String, String> {
        match tokio::time::timeout(bound, self.lines.recv()).await {
            Ok(Some(line)) => Ok(line),
            Ok(None) => Err(format!("peer {}: the child exited", self.subject)),
            Err(_) => Err(format!("peer {}: no answer within {bound:?}", self.subject)),
        }
    }
}

impl Drop for Peer {
    /// Closes the child's stdin (it then exits), and kills it after [`EXIT_GRACE`].
    fn drop(&mut self) {
        drop(self.stdin.take());
        let bound = Instant::now() + EXIT_GRACE;
        while Instant::now() < bound {
            match self.child.try_wait() {
                Ok(Some(_)) => return,
                Ok(None) => std::thread::sleep(Duration::from_millis(10)),
                Err(_) => break,
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How long the child may take to build its client and warm up.
const READY_BOUND: Duration = Duration::from_secs(20);

/// How long a child may take to exit after its stdin closes, before it is killed.
const EXIT_GRACE: Duration = Duration::from_secs(2);

/// The most rounds a child runs.
pub(super) const MAX_ROUNDS: usize = 1_000;
