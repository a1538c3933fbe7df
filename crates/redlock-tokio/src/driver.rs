//! The driver task: owns the core `Client` and the N connections, and runs the loop of
//! STYLE.md section 4. It moves bytes; requests and events go through `redlock-async`'s
//! `Waiters`, and every decision is the core's.

use std::collections::VecDeque;
use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::{Buf, BytesMut};
use redlock_async::{Cmd, DriverParts, OsRng, Waiters};
use redlock_core::{Client, Input, NodeAddress, NodeId, Output};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::Sleep;

/// Most user commands handled in one loop turn.
const COMMAND_BURST: usize = 64;

/// One node's socket and unsent bytes.
#[derive(Default)]
struct Conn {
    stream: Option<TcpStream>,
    out: BytesMut,
}

enum Wake {
    Cmd(Option<Cmd>),
    Connected(NodeId, io::Result<TcpStream>),
    Readable(NodeId),
    Writable,
    Timer,
}

pub(crate) struct Driver {
    client: Client<OsRng>,
    rx: mpsc::UnboundedReceiver<Cmd>,
    addrs: Vec<NodeAddress>,
    conns: Vec<Conn>,
    connects: JoinSet<(NodeId, io::Result<TcpStream>)>,
    connect_timeout: Duration,
    waiters: Waiters,
    /// Inputs found while draining (write errors), fed before waiting.
    pending: VecDeque<NodeId>,
    sleep: Pin<Box<Sleep>>,
    read_buf: Vec<u8>,
    next_read: usize,
    closed: bool,
}

/// The loop's one clock: tokio's, which is std's unless time is paused. Guards read std's
/// (`redlock-async` knows no runtime), so a paused clock would skew their validity.
fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}

impl Driver {
    pub(crate) fn new(parts: DriverParts) -> Self {
        let n = parts.addrs.len();
        Self {
            client: parts.client,
            rx: parts.commands,
            addrs: parts.addrs,
            conns: (0..n).map(|_| Conn::default()).collect(),
            connects: JoinSet::new(),
            connect_timeout: parts.connect_timeout,
            waiters: Waiters::new(),
            pending: VecDeque::new(),
            sleep: Box::pin(tokio::time::sleep(Duration::ZERO)),
            read_buf: vec![0; 64 * 1024],
            next_read: 0,
            closed: false,
        }
    }

    /// The loop. Ends once every handle is gone and every operation has finished.
    pub(crate) async fn run(mut self) {
        loop {
            // 4. Drain the core, then write what it asked for.
            let deadline = self.drain();
            self.flush();
            if self.closed && self.client.active_ops() == 0 {
                return;
            }
            // Work discovered while draining goes first, one input per turn.
            if self.waiters.release_orphan(now(), &mut self.client) {
                continue;
            }
            if let Some(node) = self.pending.pop_front() {
                self.feed(Input::Disconnected { now: now(), node });
                continue;
            }
            // 2. Wait for exactly one thing.
            if let Some(at) = deadline {
                self.sleep
                    .as_mut()
                    .reset(tokio::time::Instant::from_std(at));
            }
            let wake = poll_fn(|cx| self.poll_wake(cx, deadline.is_some())).await;
            // 3. Feed it, stamped with a fresh `now`.
            let now = now();
            match wake {
                Wake::Cmd(Some(cmd)) => {
                    self.waiters.command(now, &mut self.client, cmd);
                    // Take a burst of commands in one turn (draining between them), so
                    // their bytes leave in one write per node.
                    for _ in 1..COMMAND_BURST {
                        let Ok(cmd) = self.rx.try_recv() else { break };
                        // Transmits queue per node; the deadline is read again at the top.
                        let _ = self.drain();
                        self.waiters.command(now, &mut self.client, cmd);
                    }
                }
                Wake::Cmd(None) => self.closed = true,
                Wake::Connected(node, Ok(stream)) => {
                    // Best effort: a lock round trip is a few bytes each way.
                    let _ = stream.set_nodelay(true);
                    self.conns[node.index()].stream = Some(stream);
                    self.feed(Input::Connected { now, node });
                }
                Wake::Connected(node, Err(_)) => self.feed(Input::Disconnected { now, node }),
                Wake::Readable(node) => self.read(now, node),
                Wake::Writable => {}
                Wake::Timer => self.feed(Input::Timeout(now)),
            }
            // With several locks in flight on a multi-threaded runtime, each command would
            // otherwise wake the loop and cost its own write per node. Let other tasks run
            // once, then take everything already waiting, so one drain and one write per
            // node serve the whole batch. A single lock skips this: it would only add delay.
            if self.client.active_ops() > 1 {
                tokio::task::yield_now().await;
                self.take_ready();
            }
        }
    }

    /// Feeds every reply and command that is ready now, draining before each.
    fn take_ready(&mut self) {
        for i in 0..self.conns.len() {
            if self.conns[i].stream.is_some() {
                // Transmits queue per node; the deadline is read again at the top.
                let _ = self.drain();
                self.read(now(), NodeId::new(i));
            }
        }
        for _ in 0..COMMAND_BURST {
            let Ok(cmd) = self.rx.try_recv() else { break };
            let _ = self.drain();
            self.waiters.command(now(), &mut self.client, cmd);
        }
    }

    /// Replies first (they decide validity), then the timer and connections, then user
    /// commands, so a burst of commands cannot starve the replies it causes.
    fn poll_wake(&mut self, cx: &mut Context<'_>, timed: bool) -> Poll<Wake> {
        let n = self.conns.len();
        let mut writable = false;
        for k in 0..n {
            let i = (self.next_read + k) % n;
            let Some(stream) = &self.conns[i].stream else {
                continue;
            };
            if stream.poll_read_ready(cx).is_ready() {
                self.next_read = (i + 1) % n;
                return Poll::Ready(Wake::Readable(NodeId::new(i)));
            }
            if !self.conns[i].out.is_empty() && stream.poll_write_ready(cx).is_ready() {
                writable = true;
            }
        }
        if timed && self.sleep.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Wake::Timer);
        }
        if let Poll::Ready(Some(Ok((node, result)))) = self.connects.poll_join_next(cx) {
            return Poll::Ready(Wake::Connected(node, result));
        }
        if writable {
            return Poll::Ready(Wake::Writable);
        }
        if !self.closed
            && let Poll::Ready(cmd) = self.rx.poll_recv(cx)
        {
            return Poll::Ready(Wake::Cmd(cmd));
        }
        Poll::Pending
    }

    fn feed(&mut self, input: Input<'_>) {
        // The loop drains before every input, so the core cannot refuse it.
        let _ = self.client.handle_input(input);
    }

    fn read(&mut self, now: Instant, node: NodeId) {
        let Some(stream) = &self.conns[node.index()].stream else {
            return;
        };
        match stream.try_read(&mut self.read_buf) {
            Ok(len) if len > 0 => {
                let bytes = &self.read_buf[..len];
                // Drained before this input (see `run`).
                let _ = self
                    .client
                    .handle_input(Input::Received { now, node, bytes });
            }
            // Readiness can be spurious.
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            // End of stream or a socket error.
            _ => {
                self.conns[node.index()] = Conn::default();
                self.feed(Input::Disconnected { now, node });
            }
        }
    }

    /// Acts on every output until the core is drained; returns its next deadline.
    fn drain(&mut self) -> Option<Instant> {
        loop {
            match self.client.poll_output() {
                Output::Transmit(t) => self.conns[t.node.index()].out.extend_from_slice(&t.bytes),
                Output::Connect(node) => self.connect(node),
                Output::Disconnect(node) => self.conns[node.index()] = Conn::default(),
                Output::Event(event) => self.waiters.dispatch(event),
                Output::Timeout(at) => return Some(at),
                Output::Idle => return None,
            }
        }
    }

    /// Writes as much as each socket takes now; the rest waits for writability.
    fn flush(&mut self) {
        for (i, conn) in self.conns.iter_mut().enumerate() {
            let Some(stream) = &conn.stream else {
                conn.out.clear();
                continue;
            };
            while !conn.out.is_empty() {
                match stream.try_write(&conn.out) {
                    Ok(n) => conn.out.advance(n),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(_) => {
                        *conn = Conn::default();
                        self.pending.push_back(NodeId::new(i));
                        break;
                    }
                }
            }
        }
    }

    fn connect(&mut self, node: NodeId) {
        let addr = &self.addrs[node.index()];
        let target = (addr.host.clone(), addr.port);
        let timeout = self.connect_timeout;
        self.connects.spawn(async move {
            let result = match tokio::time::timeout(timeout, TcpStream::connect(target)).await {
                Ok(result) => result,
                Err(_) => Err(io::Error::new(io::ErrorKind::TimedOut, "connect timed out")),
            };
            (node, result)
        });
    }
}
