//! The driver loop: owns the core `Client` and the N `Async<TcpStream>` connections on its
//! own thread, and runs the loop of STYLE.md section 4 over async-io. It moves bytes and
//! events; every decision is the core's.

use std::collections::{HashMap, VecDeque};
use std::future::{Future, poll_fn};
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use async_io::{Async, Timer};
use bytes::{Buf, BytesMut};
use futures_lite::future::{self, Boxed};
use redlock_core::{
    Acquired, Client, Event, Input, LockError, LockOptions, NodeAddress, NodeId, OpId, Output,
    ReleaseOutcome, Resource,
};
use tokio::sync::{mpsc, oneshot, watch};

use crate::guard::LockState;

/// The RNG the core draws tokens and jitter from: the operating system's.
pub(crate) type OsRng = rand_core::UnwrapErr<getrandom::SysRng>;

/// Where the driver answers one request.
type Reply<T> = oneshot::Sender<Result<T, LockError>>;

/// A request from a handle to the driver thread.
pub(crate) enum Cmd {
    Acquire {
        ticket: u64,
        resource: Resource,
        options: LockOptions,
        reply: Reply<(OpId, Acquired)>,
        state: watch::Sender<LockState>,
    },
    /// The `lock()` future was dropped before it returned a guard.
    Cancel {
        ticket: u64,
    },
    Extend {
        op: OpId,
        reply: Reply<Instant>,
    },
    /// Release; `reply` is `None` when a guard is dropped.
    Release {
        op: OpId,
        reply: Option<Reply<Vec<ReleaseOutcome>>>,
    },
}

/// Who waits for what on one operation.
struct Waiters {
    ticket: u64,
    acquire: Option<Reply<(OpId, Acquired)>>,
    state: watch::Sender<LockState>,
    extend: Vec<Reply<Instant>>,
    release: Vec<Reply<Vec<ReleaseOutcome>>>,
}

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
    ops: HashMap<OpId, Waiters>,
    tickets: HashMap<u64, OpId>,
    /// Inputs found while draining (write errors), fed before waiting.
    pending: VecDeque<NodeId>,
    /// Locks acquired for a `lock()` future that was dropped: released before waiting.
    orphans: Vec<OpId>,
    timer: Timer,
    /// The deadline `timer` is set to; `None` once it fired.
    armed: Option<Instant>,
    read_buf: Vec<u8>,
    next_read: usize,
    closed: bool,
}

/// The driver's one clock. async-io's timers read the same one.
pub(crate) fn now() -> Instant {
    Instant::now()
}

impl Driver {
    pub(crate) fn new(
        client: Client<OsRng>,
        rx: mpsc::UnboundedReceiver<Cmd>,
        addrs: Vec<NodeAddress>,
        connect_timeout: Duration,
    ) -> Self {
        Self {
            client,
            rx,
            conns: addrs.iter().map(|_| Conn::default()).collect(),
            addrs,
            connect_timeout,
            ops: HashMap::new(),
            tickets: HashMap::new(),
            pending: VecDeque::new(),
            orphans: Vec::new(),
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
            if let Some(op) = self.orphans.pop() {
                let _ = self.client.release(now(), op);
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
                    self.command(now, cmd);
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
            self.command(now(), cmd);
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
                Output::Event(event) => self.dispatch(event),
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

    fn command(&mut self, now: Instant, cmd: Cmd) {
        match cmd {
            Cmd::Acquire {
                ticket,
                resource,
                options,
                reply,
                state,
            } => match self.client.acquire_with(now, resource, &options) {
                Ok(op) => {
                    self.tickets.insert(ticket, op);
                    let waiters = Waiters {
                        ticket,
                        acquire: Some(reply),
                        state,
                        extend: Vec::new(),
                        release: Vec::new(),
                    };
                    self.ops.insert(op, waiters);
                }
                Err(e) => {
                    let _ = reply.send(Err(e.into()));
                }
            },
            Cmd::Cancel { ticket } => {
                // The `lock()` future was dropped before it made a guard: cancel the
                // acquisition, or release a lock nobody holds a guard for.
                if let Some(&op) = self.tickets.get(&ticket) {
                    let _ = self.client.cancel(now, op);
                }
            }
            Cmd::Extend { op, reply } => match self.client.extend(now, op) {
                Ok(()) => match self.ops.get_mut(&op) {
                    Some(w) => w.extend.push(reply),
                    None => drop(reply.send(Err(LockError::NotHeld))),
                },
                Err(_) => {
                    let lost = self
                        .ops
                        .get(&op)
                        .and_then(|w| w.state.borrow().lost.clone());
                    let err = lost.map_or(LockError::NotHeld, LockError::Lost);
                    let _ = reply.send(Err(err));
                }
            },
            Cmd::Release { op, reply } => {
                // Refused when already releasing (after a loss): wait for that release.
                let _ = self.client.release(now, op);
                match (self.ops.get_mut(&op), reply) {
                    (Some(w), Some(reply)) => w.release.push(reply),
                    (None, Some(reply)) => drop(reply.send(Err(LockError::NotHeld))),
                    (_, None) => {}
                }
            }
        }
    }

    /// Hands a core event to whoever waits on its operation.
    fn dispatch(&mut self, event: Event) {
        let op = event.op();
        let Some(w) = self.ops.get_mut(&op) else {
            return;
        };
        match event {
            Event::Acquired(acquired) => {
                w.state.send_modify(|s| s.deadline = acquired.deadline);
                let delivered = w
                    .acquire
                    .take()
                    .is_some_and(|reply| reply.send(Ok((op, acquired))).is_ok());
                if !delivered {
                    // The `lock()` future is gone: nobody will ever release this lock.
                    self.orphans.push(op);
                }
            }
            Event::AcquireFailed { reason, .. } => {
                if let Some(reply) = w.acquire.take() {
                    let _ = reply.send(Err(reason.into()));
                }
                self.forget(op);
            }
            Event::Extended { deadline, .. } => {
                w.state.send_modify(|s| s.deadline = deadline);
                for reply in w.extend.drain(..) {
                    let _ = reply.send(Ok(deadline));
                }
            }
            Event::Lost { reason, .. } => {
                w.state.send_modify(|s| s.lost = Some(reason.clone()));
                for reply in w.extend.drain(..) {
                    let _ = reply.send(Err(LockError::Lost(reason.clone())));
                }
            }
            Event::Released { nodes, .. } => {
                w.state.send_modify(|s| s.released = Some(nodes.clone()));
                for reply in w.release.drain(..) {
                    let _ = reply.send(Ok(nodes.clone()));
                }
                self.forget(op);
            }
            _ => {}
        }
    }

    fn forget(&mut self, op: OpId) {
        if let Some(w) = self.ops.remove(&op) {
            self.tickets.remove(&w.ticket);
        }
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
