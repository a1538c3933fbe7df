//! The async drivers' one loop ([`IoLoop`]), over what each runtime provides ([`Runtime`]):
//! non-blocking sockets with readiness, a timer, a connect, a yield. It owns the core
//! `Client` and the N connections and runs the run loop of `Client`'s MUST list (its
//! comments cite that list's duties by number). It moves bytes;
//! requests and events go through [`Waiters`], and every decision is the core's.

use std::collections::VecDeque;
use std::future::poll_fn;
use std::io;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::{Buf, BytesMut};
use redlock_core::{Client, ConnId, ConnectionError, Input, NodeId, Output};
use tokio::sync::mpsc;

use crate::endpoint::Endpoint;
use crate::handshake::open_wire;
use crate::request::Cmd;
use crate::runtime::{Connecting, Runtime};
use crate::setup::{DriverParts, DriverRng};
use crate::waiters::Waiters;
use crate::wire::Wire;

/// One node's socket, unsent bytes, and connection attempt in progress.
struct Conn<S> {
    /// The core's name for this connection, which every input about it carries.
    id: Option<ConnId>,
    stream: Option<S>,
    /// Plain or TLS between the stream and the core.
    wire: Wire,
    /// Bytes for the stream, as they go on the wire.
    out: BytesMut,
    /// The socket's connect and, for TLS, its handshake.
    connecting: Option<Connecting<(S, Wire)>>,
}

impl<S> Default for Conn<S> {
    fn default() -> Self {
        Self {
            id: None,
            stream: None,
            wire: Wire::plain(),
            out: BytesMut::new(),
            connecting: None,
        }
    }
}

/// The one thing a loop turn handles.
enum Wake<S> {
    Cmd(Option<Cmd>),
    Connected(NodeId, Result<(S, Wire), ConnectionError>),
    Readable(NodeId),
    Writable,
    Timer,
}

/// The loop of an async driver; `run` it as a task or under `block_on` on a thread.
pub struct IoLoop<R: Runtime> {
    client: Client<DriverRng>,
    rx: mpsc::UnboundedReceiver<Cmd>,
    endpoints: Vec<Endpoint>,
    conns: Vec<Conn<R::Stream>>,
    connect_timeout: Duration,
    waiters: Waiters,
    /// Inputs found while draining (write errors), fed before waiting.
    pending: VecDeque<(ConnId, ConnectionError)>,
    timer: R::Timer,
    /// The loop's one clock, which the handle and guards read too.
    clock: fn() -> Instant,
    /// The deadline `timer` is set to; `None` once it fired.
    armed: Option<Instant>,
    read_buf: Vec<u8>,
    next_read: usize,
    closed: bool,
}

impl<R: Runtime> IoLoop<R> {
    /// A loop over what [`Builder::build`](crate::Builder::build) hands the driver's
    /// [`Start::start`](crate::Start::start).
    pub fn new(parts: DriverParts) -> Self {
        Self {
            client: parts.client,
            rx: parts.commands,
            conns: parts.endpoints.iter().map(|_| Conn::default()).collect(),
            endpoints: parts.endpoints,
            connect_timeout: parts.connect_timeout,
            waiters: Waiters::new(),
            pending: VecDeque::new(),
            timer: R::timer(),
            clock: parts.clock,
            armed: None,
            read_buf: vec![0; 64 * 1024],
            next_read: 0,
            closed: false,
        }
    }

    /// The loop. Ends once every handle is gone and every operation has finished.
    pub async fn run(mut self) {
        loop {
            // `Client`'s MUST list, duty 2: drain the core, then write what it asked for:
            // one write per node.
            let deadline = self.drain();
            self.flush();
            if self.closed && self.client.active_ops() == 0 {
                return;
            }
            // Work discovered while draining goes first, one input per turn.
            if self
                .waiters
                .release_orphan((self.clock)(), &mut self.client)
            {
                continue;
            }
            if let Some((conn, reason)) = self.pending.pop_front() {
                let now = (self.clock)();
                self.feed(Input::Disconnected { now, conn, reason });
                continue;
            }
            // Duty 3: wait for exactly one thing.
            if let Some(at) = deadline
                && self.armed != deadline
            {
                R::set_timer(&mut self.timer, at);
                self.armed = deadline;
            }
            let wake = poll_fn(|cx| self.poll_wake(cx, deadline.is_some())).await;
            // Duty 3, then: feed it, stamped with a fresh `now` from the one clock (duty 4).
            let now = (self.clock)();
            match wake {
                Wake::Cmd(Some(cmd)) => {
                    self.waiters.command(now, &mut self.client, cmd);
                    // Take a burst of commands in one turn (draining between them), so
                    // their bytes leave in one write per node.
                    self.take_commands();
                }
                Wake::Cmd(None) => self.closed = true,
                Wake::Connected(node, result) => self.connected(now, node, result),
                Wake::Readable(node) => self.read(now, node),
                Wake::Writable => {}
                Wake::Timer => {
                    // The timer checked the clock before firing; the core checks it again.
                    self.armed = None;
                    self.feed(Input::Timeout(now));
                }
            }
            // With several callers waiting, each command or reply would otherwise cost its
            // own turn and its own write per node. Yield once so handles can queue more, then
            // take everything already waiting: one drain and one write per node serve the
            // whole batch. A single caller skips this (even while an earlier release's last
            // replies are in flight): only it can send the next request, and the yield would
            // cost a poll of the runtime's driver (an `epoll_wait`) and a delay per turn
            // (benches/README.md, "Client CPU per lock").
            if self.waiters.callers_waiting() > 1 {
                R::yield_now().await;
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
                self.read((self.clock)(), NodeId::new(i));
            }
        }
        self.take_commands();
    }

    /// Feeds the commands already queued (at most a burst), draining before each.
    fn take_commands(&mut self) {
        for _ in 0..COMMAND_BURST {
            let Ok(cmd) = self.rx.try_recv() else { break };
            let _ = self.drain();
            self.waiters.command((self.clock)(), &mut self.client, cmd);
        }
    }

    /// Replies first (they decide validity), then the timer and connections, then user
    /// commands, so a burst of commands cannot starve the replies it causes.
    fn poll_wake(&mut self, cx: &mut Context<'_>, timed: bool) -> Poll<Wake<R::Stream>> {
        let n = self.conns.len();
        let mut writable = false;
        for k in 0..n {
            let i = (self.next_read + k) % n;
            let conn = &self.conns[i];
            let Some(stream) = &conn.stream else { continue };
            // An error here surfaces as a read error, hence a disconnect.
            if R::poll_readable(stream, cx).is_ready() {
                self.next_read = (i + 1) % n;
                return Poll::Ready(Wake::Readable(NodeId::new(i)));
            }
            if !conn.out.is_empty() && R::poll_writable(stream, cx).is_ready() {
                writable = true;
            }
        }
        if timed && R::poll_timer(&mut self.timer, cx).is_ready() {
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

    /// A connection attempt ended: the stream is kept, or the reason reported (`Client`'s
    /// MUST list, duty 5: every outcome of a `Connect` is reported).
    fn connected(
        &mut self,
        now: Instant,
        node: NodeId,
        result: Result<(R::Stream, Wire), ConnectionError>,
    ) {
        let conn = &mut self.conns[node.index()];
        let Some(id) = conn.id else { return };
        match result {
            Ok((stream, wire)) => {
                (conn.stream, conn.wire) = (Some(stream), wire);
                self.feed(Input::Connected { now, conn: id });
            }
            Err(reason) => {
                *conn = Conn::default();
                self.feed(Input::Disconnected {
                    now,
                    conn: id,
                    reason,
                });
            }
        }
    }

    fn feed(&mut self, input: Input<'_>) {
        self.waiters.observer().input(&self.client, &input);
        // The loop drains before every input, so the core cannot refuse it.
        let _ = self.client.handle_input(input);
    }

    /// One non-blocking read; readiness can be spurious, so `WouldBlock` is no news.
    fn read(&mut self, now: Instant, node: NodeId) {
        let c = &mut self.conns[node.index()];
        let (Some(stream), Some(conn)) = (c.stream.as_mut(), c.id) else {
            return;
        };
        let reason = match R::read_now(stream, &mut self.read_buf) {
            Ok(0) => ConnectionError::Closed,
            Ok(len) => match c.wire.receive(&self.read_buf[..len], &mut c.out) {
                Ok([]) => return,
                Ok(bytes) => {
                    let input = Input::Received { now, conn, bytes };
                    self.waiters.observer().input(&self.client, &input);
                    // Drained before this input (see `run`).
                    let _ = self.client.handle_input(input);
                    return;
                }
                Err(reason) => reason,
            },
            Err(e) if is_retry(&e) => return,
            Err(e) => ConnectionError::from_io(&e),
        };
        // A dropped connection is reported with its reason (`Client`'s MUST list, duty 6).
        let reason = c.wire.ended(reason);
        self.conns[node.index()] = Conn::default();
        self.feed(Input::Disconnected { now, conn, reason });
    }

    /// Acts on every output until the core is drained; returns its next deadline.
    fn drain(&mut self) -> Option<Instant> {
        loop {
            let output = self.client.poll_output();
            self.waiters.observer().output(&self.client, &output);
            match output {
                Output::Transmit(t) => {
                    let conn = &mut self.conns[t.node.index()];
                    conn.wire.send(&t.bytes, &mut conn.out);
                }
                Output::Connect(conn) => self.connect(conn),
                Output::Disconnect(conn) => self.conns[conn.node().index()] = Conn::default(),
                Output::Event(event) => self.waiters.dispatch(event),
                Output::Timeout(at) => return Some(at),
                Output::Idle => return None,
            }
        }
    }

    /// Writes as much as each socket takes now; the rest waits for writability.
    fn flush(&mut self) {
        for conn in &mut self.conns {
            let (Some(stream), Some(id)) = (&conn.stream, conn.id) else {
                conn.out.clear();
                continue;
            };
            conn.wire.seal(&mut conn.out);
            while !conn.out.is_empty() {
                let reason = match R::try_write(stream, &conn.out) {
                    Ok(n) if n > 0 => {
                        conn.out.advance(n);
                        continue;
                    }
                    Err(e) if is_retry(&e) => break,
                    Err(e) => {
                        let read = |b: &mut [u8]| R::try_read(stream, b);
                        conn.wire.explain(read, ConnectionError::from_io(&e))
                    }
                    // A stream that takes no bytes.
                    Ok(_) => ConnectionError::Closed,
                };
                *conn = Conn::default();
                self.pending.push_back((id, reason));
                break;
            }
        }
    }

    /// Starts a connection attempt (connect, then any TLS handshake), bounded by the connect
    /// timeout; its outcome is one wake. A new attempt replaces the node's old socket, so
    /// queued bytes never reach it.
    fn connect(&mut self, conn: ConnId) {
        let node = conn.node().index();
        let endpoint = self.endpoints[node].clone();
        let timeout = self.connect_timeout;
        let deadline = (self.clock)().checked_add(timeout);
        let socket = R::connect(endpoint.dial().clone(), timeout);
        let attempt: Connecting<_> = Box::pin(async move {
            let stream = socket.await?;
            open_wire::<R>(stream, &endpoint, deadline, timeout).await
        });
        self.conns[node] = Conn {
            id: Some(conn),
            connecting: Some(attempt),
            ..Conn::default()
        };
    }
}

fn is_retry(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
    )
}

/// Most user commands handled in one loop turn.
const COMMAND_BURST: usize = 64;
