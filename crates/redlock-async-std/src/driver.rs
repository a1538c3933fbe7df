//! The driver loop: owns the core `Client` and the N `Async<TcpStream>` connections on its
//! own thread, and runs the loop of STYLE.md section 4 over async-io. It moves bytes;
//! requests and events go through `redlock-async`'s `Waiters`, and every decision is the
//! core's.

use std::collections::VecDeque;
use std::future::{Future, poll_fn};
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use async_io::{Async, Timer};
use bytes::{Buf, BytesMut};
use futures_lite::future::{self, Boxed};
use redlock_async::{Cmd, DriverParts, OsRng, Waiters};
use redlock_core::{Client, Input, NodeAddress, NodeId, Output};
use tokio::sync::{mpsc, oneshot};

/// One node's socket, unsent bytes, and connection attempt in progress.
#[derive(Default)]
struct Conn {
    stream: Option<Async<TcpStream>>,
    out: BytesMut,
    connecting: Option<Boxed<io::Result<Async<TcpStream>>>>,
}

enum Wake {
    Cmd(Option<Cmd>),
    Connected(NodeId, io::Result<Async<TcpStream>>),
    Readable(NodeId),
    Writable,
    Timer,
}

pub(crate) struct Driver {
    client: Client<OsRng>,
    rx: mpsc::UnboundedReceiver<Cmd>,
    addrs: Vec<NodeAddress>,
    conns: Vec<Conn>,
    connect_timeout: Duration,
    waiters: Waiters,
    /// Inputs found while draining (write errors), fed before waiting.
    pending: VecDeque<NodeId>,
    timer: Timer,
    /// The deadline `timer` is set to; `None` once it fired.
    armed: Option<Instant>,
    read_buf: Vec<u8>,
    next_read: usize,
    closed: bool,
}

/// The driver's one clock. async-io's timers and the guards read the same one.
fn now() -> Instant {
    Instant::now()
}

impl Driver {
    pub(crate) fn new(parts: DriverParts) -> Self {
        Self {
            client: parts.client,
            rx: parts.commands,
            conns: parts.addrs.iter().map(|_| Conn::default()).collect(),
            addrs: parts.addrs,
            connect_timeout: parts.connect_timeout,
            waiters: Waiters::new(),
            pending: VecDeque::new(),
            timer: Timer::never(),
            armed: None,
            read_buf: vec![0; 64 * 1024],
            next_read: 0,
            closed: false,
        }
    }

    /// The loop. Ends once every handle is gone and every operation has finished.
    pub(crate) async fn run(mut self) {
        loop {
            // 4. Drain the core, then write what it asked for: one write per node.
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
            if let Some(at) = deadline
                && self.armed != deadline
            {
                self.timer.set_at(at);
                self.armed = deadline;
            }
            let wake = poll_fn(|cx| self.poll_wake(cx, deadline.is_some())).await;
            // 3. Feed it, stamped with a fresh `now`.
            let now = now();
            match wake {
                Wake::Cmd(Some(cmd)) => {
                    self.waiters.command(now, &mut self.client, cmd);
                    // Take a burst of commands in one turn (draining between them), so
                    // their bytes leave in one write per node.
                    self.take_commands();
                }
                Wake::Cmd(None) => self.closed = true,
                Wake::Connected(node, Ok(stream)) => {
                    // Best effort: a lock round trip is a few bytes each way.
                    let _ = stream.get_ref().set_nodelay(true);
                    self.conns[node.index()].stream = Some(stream);
                    self.feed(Input::Connected { now, node });
                }
                Wake::Connected(node, Err(_)) => self.feed(Input::Disconnected { now, node }),
                Wake::Readable(node) => self.read(now, node),
                Wake::Writable => {}
                Wake::Timer => {
                    // The timer checked the clock before firing; the core checks it again.
                    self.armed = None;
                    self.feed(Input::Timeout(now));
                }
            }
            // With several locks in flight, each command or reply would otherwise cost its
            // own turn and its own write per node. Yield once so handles can queue more, then
            // take everything already waiting: one drain and one write per node serve the
            // whole batch. A single lock skips this: it would only add delay.
            if self.client.active_ops() > 1 {
                future::yield_now().await;
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
        self.take_commands();
    }

    /// Feeds the commands already queued (at most a burst), draining before each.
    fn take_commands(&mut self) {
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
            let conn = &self.conns[i];
            let Some(stream) = &conn.stream else { continue };
            // An error here surfaces as a read error, hence a disconnect.
            if stream.poll_readable(cx).is_ready() {
                self.next_read = (i + 1) % n;
                return Poll::Ready(Wake::Readable(NodeId::new(i)));
            }
            if !conn.out.is_empty() && stream.poll_writable(cx).is_ready() {
                writable = true;
            }
        }
        if timed && Pin::new(&mut self.timer).poll(cx).is_ready() {
            return Poll::Ready(Wake::Timer);
        }
        for (i, conn) in self.conns.iter_mut().enumerate() {
            if let Some(attempt) = &mut conn.connecting
                && let Poll::Ready(result) = attempt.as_mut().poll(cx)
            {
                conn.connecting = None;
                return Poll::Ready(Wake::Connected(NodeId::new(i), result));
            }
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

    /// One non-blocking read; readiness can be spurious, so `WouldBlock` is no news.
    fn read(&mut self, now: Instant, node: NodeId) {
        let Some(stream) = &self.conns[node.index()].stream else {
            return;
        };
        match stream.get_ref().read(&mut self.read_buf) {
            Ok(len) if len > 0 => {
                let bytes = &self.read_buf[..len];
                // Drained before this input (see `run`).
                let _ = self
                    .client
                    .handle_input(Input::Received { now, node, bytes });
            }
            Err(e) if is_retry(&e) => {}
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
                match stream.get_ref().write(&conn.out) {
                    Ok(n) if n > 0 => conn.out.advance(n),
                    Err(e) if is_retry(&e) => break,
                    // A socket error, or a stream that takes no bytes.
                    _ => {
                        *conn = Conn::default();
                        self.pending.push_back(NodeId::new(i));
                        break;
                    }
                }
            }
        }
    }

    /// Starts a connection attempt, bounded by the connect timeout; its outcome is one wake.
    fn connect(&mut self, node: NodeId) {
        let addr = &self.addrs[node.index()];
        let (host, port, timeout) = (addr.host.clone(), addr.port, self.connect_timeout);
        let timed_out = async move {
            Timer::after(timeout).await;
            Err(io::Error::new(io::ErrorKind::TimedOut, "connect timed out"))
        };
        self.conns[node.index()].connecting =
            Some(Box::pin(future::or(open(host, port), timed_out)));
    }
}

/// Resolves `host` and connects to the first of its addresses that accepts. An IP address
/// needs no lookup; a name is resolved on a helper thread, since std's resolver blocks.
async fn open(host: String, port: u16) -> io::Result<Async<TcpStream>> {
    let addrs: Vec<SocketAddr> = match host.parse::<IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) => {
            let (tx, rx) = oneshot::channel();
            std::thread::Builder::new()
                .name("redlock-resolve".into())
                .spawn(move || {
                    let _ = tx.send((host.as_str(), port).to_socket_addrs().map(Vec::from_iter));
                })?;
            rx.await
                .map_err(|_| io::Error::other("name resolution failed"))??
        }
    };
    let mut last = io::Error::new(io::ErrorKind::NotFound, "the host has no address");
    for addr in addrs {
        match Async::<TcpStream>::connect(addr).await {
            Ok(stream) => return Ok(stream),
            Err(e) => last = e,
        }
    }
    Err(last)
}

fn is_retry(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
    )
}

/// Most user commands handled in one loop turn.
const COMMAND_BURST: usize = 64;
