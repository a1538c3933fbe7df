//! The raw baseline: one pipelined tokio connection per node, shared by every worker, and a
//! lock cycle that makes the same two round trips as Redlock (`SET NX PX` fanned out, decided
//! at a majority of `+OK`; then `EVALSHA` compare-and-delete fanned out, waited for on all
//! nodes). No drift, validity, timers, retries or CSPRNG tokens: the "physical limit".
//!
//! Two other releases, as references on the same connections ([`Release`]): a plain `DEL`
//! (not a correct release: it deletes whoever holds the key; the ceiling of a release round
//! trip) and Valkey 9's `DELIFEQ key token` (the compare-and-delete without a script).
//!
//! A worker queues its command bytes and a oneshot on the connection's FIFO in one critical
//! section, so replies (which a node sends in order) match the FIFO. When nothing is in flight
//! the worker writes at once; otherwise one I/O task per connection writes everything queued
//! in one go, and that task also parses replies and completes the oneshots.

use std::collections::VecDeque;
use std::future::{Future, poll_fn};
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use redlock_testkit::resp::{self, Reply};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// How the raw client releases a key it acquired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Release {
    /// `EVALSHA` of the core's release script (compare-and-delete): the baseline, `raw`.
    EvalSha,
    /// Plain `DEL key`: no compare, so not a correct release; a reference, `raw-del`.
    Del,
    /// `DELIFEQ key token` (Valkey 9.0 and later): `raw-delifeq`.
    DelIfEq,
}

impl Release {
    /// The subject name of a raw client releasing this way.
    pub(crate) fn subject(self) -> &'static str {
        match self {
            Self::EvalSha => "raw",
            Self::Del => "raw-del",
            Self::DelIfEq => "raw-delifeq",
        }
    }
}

/// A client of N nodes, one pipelined connection each. Cheap to share behind an `Arc`.
pub(crate) struct RawClient {
    conns: Vec<Arc<Conn>>,
    readers: Vec<JoinHandle<()>>,
    release: Release,
    release_sha: Vec<u8>,
    ttl_ms: Vec<u8>,
    quorum: usize,
    next_token: AtomicU64,
    token_salt: u64,
}

impl RawClient {
    /// Connects to every node, loads the release script on each and, for
    /// [`Release::DelIfEq`], checks that every node knows `DELIFEQ`.
    pub(crate) async fn connect(
        addrs: &[SocketAddr],
        ttl: Duration,
        release: Release,
    ) -> Result<Self, String> {
        if addrs.len() > MAX_NODES {
            return Err(format!("raw: at most {MAX_NODES} nodes"));
        }
        let mut conns = Vec::new();
        let mut readers = Vec::new();
        for addr in addrs {
            let stream = connect(*addr, "raw").await?;
            let conn = Arc::new(Conn {
                stream,
                state: Mutex::new(State::default()),
            });
            readers.push(tokio::spawn(Arc::clone(&conn).read_loop()));
            conns.push(conn);
        }
        let body = redlock_core::RELEASE_SCRIPT.body.as_bytes();
        let mut release_sha = None;
        for conn in &conns {
            let reply = conn.send(&[b"SCRIPT", b"LOAD", body]).await;
            match reply {
                Ok(Reply::Bulk(sha)) if release_sha.as_ref().is_none_or(|s| *s == sha) => {
                    release_sha = Some(sha);
                }
                other => return Err(format!("raw: SCRIPT LOAD answered {other:?}")),
            }
            if release == Release::DelIfEq {
                // A key nobody holds: a server with the command answers 0.
                let probe: [&[u8]; 3] = [b"DELIFEQ", b"bench:raw:delifeq-probe", b"-"];
                match conn.send(&probe).await {
                    Ok(Reply::Int(0)) => {}
                    other => return Err(format!("raw-delifeq: DELIFEQ answered {other:?}")),
                }
            }
        }
        let ttl_ms = ttl.as_millis().to_string().into_bytes();
        Ok(Self {
            quorum: conns.len() / 2 + 1,
            conns,
            readers,
            release,
            release_sha: release_sha.unwrap_or_default(),
            ttl_ms,
            next_token: AtomicU64::new(0),
            // Distinct tokens across runs, in case a key outlived a crashed run.
            token_salt: u64::from(std::process::id()) << 32,
        })
    }

    /// How this client releases.
    pub(crate) fn release(&self) -> Release {
        self.release
    }

    /// One lock cycle on `key`: acquire on a majority, then release everywhere. An error
    /// unless a majority answered `+OK` and every node deleted the key.
    pub(crate) async fn cycle(&self, key: &[u8]) -> Result<(), String> {
        let token = self.token();
        let set: [&[u8]; 6] = [b"SET", key, &token, b"NX", b"PX", &self.ttl_ms];
        let mut replies = self.fan_out(&set);
        let acquired = votes(
            &mut replies,
            self.quorum,
            |r| matches!(r, Reply::Simple(s) if s == "OK"),
        )
        .await;
        // The minority's `SET` replies are still on their way; each reader drops them.
        drop(replies);
        let evalsha: [&[u8]; 5] = [b"EVALSHA", &self.release_sha, b"1", key, &token];
        let del: [&[u8]; 2] = [b"DEL", key];
        let delifeq: [&[u8]; 3] = [b"DELIFEQ", key, &token];
        let mut replies = self.fan_out(match self.release {
            Release::EvalSha => &evalsha,
            Release::Del => &del,
            Release::DelIfEq => &delifeq,
        });
        let n = self.conns.len();
        let released = votes(&mut replies, n, |r| *r == Reply::Int(1)).await;
        match (acquired, released) {
            (true, true) => Ok(()),
            _ => Err(format!(
                "raw: cycle on {} failed (acquired {acquired}, released {released})",
                String::from_utf8_lossy(key)
            )),
        }
    }

    /// Loads `body` on every node; its SHA1, which every node must agree on.
    pub(crate) async fn load(&self, body: &[u8]) -> Result<Vec<u8>, String> {
        let mut sha = None;
        for conn in &self.conns {
            match conn.send(&[b"SCRIPT", b"LOAD", body]).await {
                Ok(Reply::Bulk(s)) if sha.as_ref().is_none_or(|known| *known == s) => {
                    sha = Some(s);
                }
                other => return Err(format!("raw: SCRIPT LOAD answered {other:?}")),
            }
        }
        sha.ok_or_else(|| "raw: no node".to_owned())
    }

    /// Sends `args` to every node; true once a majority's replies satisfy `yes`, false once
    /// too many did not. The other replies are dropped as they come.
    pub(crate) async fn at_quorum(&self, args: &[&[u8]], yes: impl Fn(&Reply) -> bool) -> bool {
        let mut replies = self.fan_out(args);
        votes(&mut replies, self.quorum, yes).await
    }

    /// The majority of the nodes.
    pub(crate) fn quorum(&self) -> usize {
        self.quorum
    }

    fn fan_out(&self, args: &[&[u8]]) -> Replies {
        let mut replies = Replies::default();
        for (slot, conn) in replies.0.iter_mut().zip(&self.conns) {
            *slot = Some(conn.submit(args));
        }
        replies
    }

    /// 40 hex digits, like the core's tokens, from a counter.
    fn token(&self) -> [u8; 40] {
        let n = self.next_token.fetch_add(1, Ordering::Relaxed) ^ self.token_salt;
        let mut token = [b'0'; 40];
        for (i, digit) in token.iter_mut().rev().take(16).enumerate() {
            *digit = b"0123456789abcdef"[((n >> (4 * i)) & 0xf) as usize];
        }
        token
    }
}

impl Drop for RawClient {
    fn drop(&mut self) {
        for reader in &self.readers {
            reader.abort();
        }
    }
}

/// A TCP connection to a node with Nagle's algorithm off; `who` names the subject in an
/// error.
pub(crate) async fn connect(addr: SocketAddr, who: &str) -> Result<TcpStream, String> {
    let stream = TcpStream::connect(addr)
        .await
        .map_err(|e| format!("{who}: connect {addr}: {e}"))?;
    stream
        .set_nodelay(true)
        .map_err(|e| format!("{who}: nodelay: {e}"))?;
    Ok(stream)
}

/// The reply receivers of one fan-out, indexed by node.
#[derive(Default)]
struct Replies([Option<oneshot::Receiver<Reply>>; MAX_NODES]);

/// Waits until `need` replies satisfy `yes` (true) or too many did not for that (false).
async fn votes(replies: &mut Replies, need: usize, yes: impl Fn(&Reply) -> bool) -> bool {
    let total = replies.0.iter().filter(|r| r.is_some()).count();
    let (mut ayes, mut noes) = (0, 0);
    poll_fn(|cx| {
        for slot in &mut replies.0 {
            let Some(rx) = slot else { continue };
            if let Poll::Ready(reply) = Pin::new(rx).poll(cx) {
                *slot = None;
                match reply {
                    Ok(reply) if yes(&reply) => ayes += 1,
                    // A wrong reply, or the connection died (sender dropped).
                    _ => noes += 1,
                }
            }
        }
        if ayes >= need {
            Poll::Ready(true)
        } else if noes > total - need {
            Poll::Ready(false)
        } else {
            Poll::Pending
        }
    })
    .await
}

/// One node's pipelined connection.
struct Conn {
    stream: TcpStream,
    state: Mutex<State>,
}

/// What writers and the reader share; every critical section is short and never awaits.
#[derive(Default)]
struct State {
    /// Bytes not yet written; the I/O task flushes them.
    out: Vec<u8>,
    /// One sender per request in flight, in the order the requests were written.
    waiting: VecDeque<oneshot::Sender<Reply>>,
    /// The I/O task, woken when `out` has bytes for it to flush.
    reader: Option<Waker>,
    /// The reader task ended: requests fail at once.
    closed: bool,
}

impl Conn {
    /// Sends one command and waits for its reply.
    async fn send(&self, args: &[&[u8]]) -> Result<Reply, String> {
        self.submit(args)
            .await
            .map_err(|_| "raw: connection closed".to_owned())
    }

    /// Queues one command; the receiver completes with its reply (or fails when the
    /// connection dies).
    fn submit(&self, args: &[&[u8]]) -> oneshot::Receiver<Reply> {
        let (tx, rx) = oneshot::channel();
        let mut state = self.lock();
        if state.closed {
            return rx;
        }
        let idle = state.out.is_empty() && state.waiting.is_empty();
        resp::encode_command(&mut state.out, args);
        state.waiting.push_back(tx);
        if !idle {
            // Requests are in flight: leave the bytes for the reader task, which flushes
            // everything queued meanwhile in one write (what a pipelining client does).
            if let Some(reader) = &state.reader {
                reader.wake_by_ref();
            }
            return rx;
        }
        // Nothing in flight: write now from the worker, no hop through another task.
        match self.stream.try_write(&state.out) {
            Ok(n) => drop(state.out.drain(..n)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            // The reader sees the broken socket too and fails every waiter.
            Err(_) => state.out.clear(),
        }
        if !state.out.is_empty()
            && let Some(reader) = &state.reader
        {
            reader.wake_by_ref();
        }
        rx
    }

    /// Reads replies and completes the FIFO until the socket fails or closes.
    async fn read_loop(self: Arc<Self>) {
        let mut buf = ReadBuf {
            bytes: vec![0; 64 * 1024],
            start: 0,
            end: 0,
        };
        let _ = poll_fn(|cx| self.poll_io(cx, &mut buf)).await;
        let mut state = self.lock();
        state.closed = true;
        state.out.clear();
        // Dropping the senders fails every waiting request.
        state.waiting.clear();
    }

    fn poll_io(&self, cx: &mut Context<'_>, buf: &mut ReadBuf) -> Poll<Result<(), String>> {
        loop {
            match self.stream.poll_read_ready(cx) {
                Poll::Pending => break,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e.to_string())),
                Poll::Ready(Ok(())) => {}
            }
            match self.stream.try_read(buf.spare()) {
                Ok(0) => return Poll::Ready(Err("closed by the node".into())),
                Ok(n) => {
                    buf.end += n;
                    if let Err(e) = self.dispatch(buf) {
                        return Poll::Ready(Err(e));
                    }
                }
                // Readiness was stale; `try_read` cleared it, so the next poll registers.
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Poll::Ready(Err(e.to_string())),
            }
        }
        let mut state = self.lock();
        if !state
            .reader
            .as_ref()
            .is_some_and(|w| w.will_wake(cx.waker()))
        {
            state.reader = Some(cx.waker().clone());
        }
        while !state.out.is_empty() {
            match self.stream.poll_write_ready(cx) {
                Poll::Pending => break,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e.to_string())),
                Poll::Ready(Ok(())) => {}
            }
            match self.stream.try_write(&state.out) {
                Ok(n) => drop(state.out.drain(..n)),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Poll::Ready(Err(e.to_string())),
            }
        }
        Poll::Pending
    }

    /// Parses every complete reply in `buf` and hands each to the oldest waiter.
    fn dispatch(&self, buf: &mut ReadBuf) -> Result<(), String> {
        let mut state = self.lock();
        loop {
            match resp::parse_reply(&buf.bytes[buf.start..buf.end]) {
                Ok(Some((reply, used))) => {
                    buf.start += used;
                    match state.waiting.pop_front() {
                        // The waiter may be gone (a minority reply nobody waits for).
                        Some(tx) => drop(tx.send(reply)),
                        None => return Err("reply with no request".into()),
                    }
                }
                Ok(None) => break,
                Err(e) => return Err(e.to_string()),
            }
        }
        buf.compact();
        if buf.end == buf.bytes.len() {
            return Err("reply larger than the read buffer".into());
        }
        Ok(())
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock is a bug in this file; keep going with the data.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The reader's buffer: parsed up to `start`, filled up to `end`.
struct ReadBuf {
    bytes: Vec<u8>,
    start: usize,
    end: usize,
}

impl ReadBuf {
    fn spare(&mut self) -> &mut [u8] {
        &mut self.bytes[self.end..]
    }

    /// Moves an incomplete reply to the front so the next read has room.
    fn compact(&mut self) {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        } else if self.start > 0 {
            self.bytes.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
    }
}

/// Most nodes a cycle fans out to (the receivers live in a fixed array).
const MAX_NODES: usize = 9;
