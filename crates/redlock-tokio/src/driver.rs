//! The driver task: owns the core `Client` and the N connections, and runs the loop of
//! STYLE.md section 4. It moves bytes and events; every decision is the core's.

use std::collections::{HashMap, VecDeque};
use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::{Buf, BytesMut};
use redlock_core::{
    Client, Event, Input, LockError, LockOptions, NodeAddress, NodeId, OpId, Output,
    ReleaseOutcome, Resource,
};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinSet;
use tokio::time::Sleep;

use crate::guard::LockState;

/// Most user commands handled in one loop turn.
const COMMAND_BURST: usize = 64;

/// The RNG the core draws tokens and jitter from: the operating system's.
pub(crate) type OsRng = rand_core::UnwrapErr<getrandom::SysRng>;

/// A request from a handle to the driver task.
pub(crate) enum Cmd {
    Acquire {
        ticket: u64,
        resource: Resource,
        options: LockOptions,
        reply: oneshot::Sender<Result<(OpId, redlock_core::Acquired), LockError>>,
        state: watch::Sender<LockState>,
    },
    /// The `lock()` future was dropped before it returned a guard.
    Cancel { ticket: u64 },
    Extend {
        op: OpId,
        reply: oneshot::Sender<Result<Instant, LockError>>,
    },
    /// Release; `reply` is `None` when a guard is dropped.
    Release {
        op: OpId,
        reply: Option<oneshot::Sender<Result<Vec<ReleaseOutcome>, LockError>>>,
    },
}

/// Who waits for what on one operation.
struct Waiters {
    ticket: u64,
    acquire: Option<oneshot::Sender<Result<(OpId, redlock_core::Acquired), LockError>>>,
    state: watch::Sender<LockState>,
    extend: Vec<oneshot::Sender<Result<Instant, LockError>>>,
    release: Vec<oneshot::Sender<Result<Vec<ReleaseOutcome>, LockError>>>,
}

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
    ops: HashMap<OpId, Waiters>,
    tickets: HashMap<u64, OpId>,
    /// Inputs found while draining (write errors), fed before waiting.
    pending: VecDeque<NodeId>,
    /// Locks acquired for a `lock()` future that was dropped: released before waiting.
    orphans: Vec<OpId>,
    sleep: Pin<Box<Sleep>>,
    read_buf: Vec<u8>,
    next_read: usize,
    closed: bool,
}

/// The driver's one clock: tokio's, so that paused test time works.
pub(crate) fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}

impl Driver {
    pub(crate) fn new(
        client: Client<OsRng>,
        rx: mpsc::UnboundedReceiver<Cmd>,
        addrs: Vec<NodeAddress>,
        connect_timeout: Duration,
    ) -> Self {
        let n = addrs.len();
        Self {
            client,
            rx,
            addrs,
            conns: (0..n).map(|_| Conn::default()).collect(),
            connects: JoinSet::new(),
            connect_timeout,
            ops: HashMap::new(),
            tickets: HashMap::new(),
            pending: VecDeque::new(),
            orphans: Vec::new(),
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
            if let Some(op) = self.orphans.pop() {
                let _ = self.client.release(now(), op);
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
                    self.command(now, cmd);
                    // Take a burst of commands in one turn (draining between them), so
                    // their bytes leave in one write per node.
                    for _ in 1..COMMAND_BURST {
                        let Ok(cmd) = self.rx.try_recv() else { break };
                        // Transmits queue per node; the deadline is read again at the top.
                        let _ = self.drain();
                        self.command(now, cmd);
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
