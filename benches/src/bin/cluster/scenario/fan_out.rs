//! The fan-out round trip under load: while a contended round runs, a probe in this process
//! sends `PING` to every node at once every [`EVERY`] and times the answer of a quorum, on
//! a thread and runtime of its own. Idle, that is the `rtt5` of the ceiling
//! `1 / (section + rtt5)`; under the round's load (the nodes busy with the lock's scripts,
//! every process sharing the machine's CPUs) it is what one fan-out of a hand-off costs
//! there, and so the ceiling a one-fan-out hand-off can reach on that machine.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};

use crate::stats::Samples;

/// How often the probe fans out: a small load beside the round's (5 nodes: 500 `PING`s a
/// second, against about 8,000 commands of a contended round).
const EVERY: Duration = Duration::from_millis(10);

/// `PING` as RESP, and what a node answers.
const PING: &[u8] = b"*1\r\n$4\r\nPING\r\n";
const PONG: &[u8] = b"+PONG\r\n";

/// A running probe; [`finish`](Self::finish) stops it and returns its samples, and a probe
/// dropped unfinished (its round failed) stops within [`EVERY`].
pub(crate) struct FanOutProbe {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<Samples, String>>>,
}

impl FanOutProbe {
    /// Starts probing `nodes`.
    pub(crate) fn start(nodes: &[SocketAddr]) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let (nodes, flag) = (nodes.to_vec(), Arc::clone(&stop));
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| format!("fan-out probe: runtime: {e}"))?;
            runtime.block_on(probe(nodes, flag))
        });
        Self {
            stop,
            thread: Some(thread),
        }
    }

    /// Stops the probe; the quorum round trips it timed.
    pub(crate) fn finish(mut self) -> Result<Samples, String> {
        self.stop.store(true, Ordering::Relaxed);
        let thread = self.thread.take().ok_or("fan-out probe finished twice")?;
        (thread.join()).map_err(|_| "fan-out probe panicked".to_owned())?
    }
}

impl Drop for FanOutProbe {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Fans out until `stop`: one task per node answers each `go` with the moment its `PONG`
/// came; a sample is the quorum-th of them, from the moment the `PING`s went out.
async fn probe(nodes: Vec<SocketAddr>, stop: Arc<AtomicBool>) -> Result<Samples, String> {
    let (go, _) = watch::channel(0u64);
    let (done, mut answers) = mpsc::unbounded_channel();
    for addr in &nodes {
        let mut stream = TcpStream::connect(addr)
            .await
            .map_err(|e| format!("fan-out probe: {addr}: {e}"))?;
        stream.set_nodelay(true).map_err(|e| e.to_string())?;
        let (mut rx, done) = (go.subscribe(), done.clone());
        tokio::spawn(async move {
            let mut pong = [0u8; PONG.len()];
            while rx.changed().await.is_ok() {
                let sent = stream.write_all(PING).await.is_ok();
                if !sent || stream.read_exact(&mut pong).await.is_err() || pong != PONG {
                    return;
                }
                if done.send(Instant::now()).is_err() {
                    return;
                }
            }
        });
    }
    let quorum = nodes.len() / 2 + 1;
    let mut samples = Samples::with_capacity(1024);
    let mut round = 0u64;
    while !stop.load(Ordering::Relaxed) {
        tokio::time::sleep(EVERY).await;
        round += 1;
        let sent = Instant::now();
        go.send_replace(round);
        let mut times = Vec::with_capacity(nodes.len());
        while times.len() < nodes.len() {
            match tokio::time::timeout(Duration::from_secs(1), answers.recv()).await {
                Ok(Some(at)) => times.push(at),
                _ => return Err("fan-out probe: a node stopped answering".to_owned()),
            }
        }
        times.sort_unstable();
        samples.push(times[quorum - 1].saturating_duration_since(sent));
    }
    Ok(samples)
}
