//! The driver thread: owns the core `Client`, one `mio::Poll` and the N node sockets, and runs
//! the run loop of `Client`'s MUST list (its comments cite that list's duties by number). It
//! moves bytes; requests and events go through
//! `redlock-driver`'s `Waiters`, and every decision is the core's.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::task::{Context, Poll as Ready, Wake, Waker as TaskWaker};
use std::time::{Duration, Instant};
use std::{mem, vec};

use bytes::{Buf, BytesMut};
use mio::{Events, Interest, Poll, Token, Waker};
use redlock_core::{Client, ConnId, ConnectionError, Input, NodeId, Output};
use redlock_driver::{
    Cmd, Dial, DriverParts, DriverRng, Endpoint, HandshakeStep, Waiters, Wire, handshake_step,
};
use tokio::sync::mpsc;

use crate::resolve::{Lookup, Resolve, Resolver};
use crate::stream::Stream;

/// One node's socket. `serial` numbers the sockets opened and the name lookups started for the
/// node, so that readiness reported for a socket already closed is never taken for its
/// successor's, nor a lookup's answer for a later attempt's.
#[derive(Default)]
struct Conn {
    /// The core's name for the node's current connection, which inputs about it carry.
    id: Option<ConnId>,
    stream: Option<Stream>,
    /// Plain or TLS between the socket and the core; `out` holds its wire bytes.
    wire: Wire,
    /// Connected, and in the TLS handshake (`connecting` still bounds it).
    handshaking: bool,
    /// While a connection attempt is in flight (a name lookup while `stream` is `None`, then a
    /// non-blocking connect): its deadline, and the addresses left.
    connecting: Option<Connecting>,
    rest: vec::IntoIter<SocketAddr>,
    /// Bytes the socket has not taken yet; WRITABLE interest is registered (`writing`)
    /// exactly while there are some.
    out: BytesMut,
    writing: bool,
    serial: usize,
}

/// A non-blocking connect in flight.
#[derive(Clone, Copy)]
struct Connecting {
    /// When it fails; `None` when the connect timeout reaches beyond what an `Instant` can
    /// hold (`Duration::MAX`, say), which means never, as for the async drivers' timers.
    deadline: Option<Instant>,
}

pub(crate) struct Driver {
    client: Client<DriverRng>,
    rx: mpsc::UnboundedReceiver<Cmd>,
    poll: Poll,
    /// Wakes `poll` when a handle sends a command (registered with the receiver).
    waker: TaskWaker,
    endpoints: Vec<Endpoint>,
    conns: Vec<Conn>,
    connect_timeout: Duration,
    waiters: Waiters,
    /// Connections whose socket failed outside an input (writing), with why, reported at the
    /// top of the next turn.
    down: VecDeque<(ConnId, ConnectionError)>,
    /// Connection attempts that failed while draining (a connect refused at once), reported
    /// with their cause at the top of the next turn.
    failed: VecDeque<(NodeId, ConnectionError)>,
    /// Host-name lookups, on threads of their own.
    resolver: Resolver,
    /// Tests see each failed connection attempt's cause here.
    #[cfg(test)]
    pub(crate) failures: Option<std::sync::mpsc::Sender<(NodeId, ConnectionError)>>,
    /// The core's next deadline, from the last drain.
    deadline: Option<Instant>,
    read_buf: Vec<u8>,
    closed: bool,
    /// The driver's one clock (`MioThread::now`), which the handle and guards read too.
    clock: fn() -> Instant,
}

impl Driver {
    /// A driver for `parts` that resolves host names with `resolve` ([`crate::resolve::system`]
    /// outside tests).
    pub(crate) fn new(parts: DriverParts, resolve: Resolve) -> io::Result<Self> {
        let poll = Poll::new()?;
        let waker = TaskWaker::from(Arc::new(WakePoll(Waker::new(poll.registry(), WAKER)?)));
        Ok(Self {
            client: parts.client,
            rx: parts.commands,
            poll,
            resolver: Resolver::new(resolve, &parts.addrs, waker.clone()),
            waker,
            conns: parts.addrs.iter().map(|_| Conn::default()).collect(),
            endpoints: parts.endpoints,
            connect_timeout: parts.connect_timeout,
            waiters: Waiters::new(),
            down: VecDeque::new(),
            failed: VecDeque::new(),
            #[cfg(test)]
            failures: None,
            deadline: None,
            read_buf: vec![0; 64 * 1024],
            closed: false,
            clock: parts.clock,
        })
    }

    /// The loop. Ends once every handle is gone and every operation has finished.
    pub(crate) fn run(mut self) {
        let mut events = Events::with_capacity(256);
        let mut busy = false;
        // `Client`'s MUST list, duty 1: the client was built from the config and an
        // OS-seeded CSPRNG (`Builder::build`); its first outputs ask to connect to every node.
        self.drain();
        loop {
            // Failures found while draining go first, one input per turn.
            if let Some((conn, reason)) = self.down.pop_front() {
                let now = self.now();
                self.feed(Input::Disconnected { now, conn, reason });
                continue;
            }
            if let Some((node, cause)) = self.failed.pop_front() {
                self.connect_failed(node, cause);
                continue;
            }
            // Everything this turn queued for a node leaves in one write.
            self.flush();
            if !self.down.is_empty() {
                continue;
            }
            if self.closed && self.client.active_ops() == 0 {
                return;
            }
            // A lock acquired for a caller who is gone: nobody else will release it.
            if self.waiters.release_orphan(self.now(), &mut self.client) {
                self.drain();
                continue;
            }
            // Duty 3: wait for readiness on any node socket, the core's deadline, a connect
            // timeout, or a user command or name lookup's answer (the waker).
            let wake = self.conns.iter().filter_map(|c| c.connecting?.deadline);
            let timeout = match busy {
                true => Some(Duration::ZERO),
                false => (wake.chain(self.deadline).min())
                    .map(|at| at.saturating_duration_since(self.now())),
            };
            match self.poll.poll(&mut events, timeout) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // The poller is broken: give up; handles then see `LockError::Shutdown`.
                Err(_) => return,
            }
            // Duty 3, then: feed what happened one input at a time, each with a fresh `now`
            // from the one clock (duty 4) and each followed by a drain (duty 2): replies
            // first, then lookups, timers, commands.
            for ready in events.iter() {
                let i = ready.token().0 & NODE_MASK;
                // Not a node (the waker: commands are read every turn), or a closed socket.
                match self.conns.get(i) {
                    Some(c) if ready.token() == token(c.serial, i) && c.stream.is_some() => {}
                    _ => continue,
                }
                // Any readiness of a connected socket may be bytes, an end or an error, so
                // read; writability needs nothing here, as every turn starts with a flush.
                let ending = ready.is_read_closed() || ready.is_error();
                match self.conns[i].connecting {
                    Some(_) if self.conns[i].handshaking => self.handshake(NodeId::new(i)),
                    Some(connecting) => self.finish_connect(NodeId::new(i), connecting),
                    None => self.read(NodeId::new(i), ending),
                }
            }
            self.resolved();
            self.expire();
            busy = self.commands();
        }
    }

    /// The clock every input is stamped with.
    fn now(&self) -> Instant {
        (self.clock)()
    }

    /// Feeds one input, then drains. The loop drains after every input and mutation, so the
    /// core never refuses one as undrained.
    fn feed(&mut self, input: Input<'_>) {
        self.waiters.observer().input(&self.client, &input);
        let _ = self.client.handle_input(input);
        self.drain();
    }

    /// Acts on every output until the core returns `Timeout` or `Idle` (`Client`'s MUST
    /// list, duty 2).
    fn drain(&mut self) {
        loop {
            let output = self.client.poll_output();
            self.waiters.observer().output(&self.client, &output);
            match output {
                // The core writes only to nodes it saw connect. Bytes for a socket that just
                // failed are dropped with it: its `Disconnected` is queued.
                Output::Transmit(t) => {
                    let conn = &mut self.conns[t.node.index()];
                    conn.wire.send(&t.bytes, &mut conn.out);
                }
                Output::Connect(conn) => self.connect(conn),
                Output::Disconnect(conn) => self.close(conn.node()),
                Output::Event(event) => self.waiters.dispatch(event),
                Output::Timeout(at) => return self.deadline = Some(at),
                Output::Idle => return self.deadline = None,
            }
        }
    }

    /// Reads until the socket is drained (readiness is edge-triggered), feeding each chunk.
    /// A read that does not fill the buffer drained it: on epoll and kqueue every later
    /// arrival is a new edge, so the read that would only answer `WouldBlock` (one per reply
    /// in a serial lock cycle) is skipped, as tokio skips it (benches/README.md, "Client CPU
    /// per lock").
    ///
    /// Not when the event says that the peer's end of stream or an error is there
    /// (`ending`): an end that came in with the last bytes, before this read, is no later
    /// arrival and brings no new edge, so a short read would leave it unread, and the core
    /// would take the connection for up until a write to it fails, which an idle client
    /// never makes (a node that answers and closes at once, or is killed right after a
    /// reply). Then it reads on until the end (`Ok(0)`), an error or `WouldBlock`, so that
    /// the core hears `Disconnected` with the wire's reason (`Client`'s MUST list, duty 6);
    /// tokio's shortcut keeps a read-closed readiness for the same reason.
    fn read(&mut self, node: NodeId, ending: bool) {
        let (conn, reason) = loop {
            let c = &mut self.conns[node.index()];
            let (Some(stream), None, Some(conn)) = (&mut c.stream, c.connecting, c.id) else {
                return; // closed by the core while draining (a protocol fault)
            };
            match stream.read(&mut self.read_buf) {
                Ok(0) => break (conn, c.wire.ended(ConnectionError::Closed)),
                Ok(len) => {
                    match c.wire.receive(&self.read_buf[..len], &mut c.out) {
                        Ok([]) => {}
                        Ok(bytes) => {
                            let now = (self.clock)();
                            let input = Input::Received { now, conn, bytes };
                            self.waiters.observer().input(&self.client, &input);
                            let _ = self.client.handle_input(input);
                            self.drain();
                        }
                        Err(reason) => break (conn, reason),
                    }
                    if len < self.read_buf.len() && DRAINED_BY_SHORT_READ && !ending {
                        return;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) => break (conn, c.wire.ended(ConnectionError::from_io(&e))),
            }
        };
        // End of stream or a socket error, reported with its reason (`Client`'s MUST list,
        // duty 6).
        self.close(node);
        let now = self.now();
        self.feed(Input::Disconnected { now, conn, reason });
    }

    /// Writes what each socket takes now; the rest waits for a WRITABLE event.
    fn flush(&mut self) {
        for i in 0..self.conns.len() {
            let conn = &mut self.conns[i];
            let (Some(stream), None) = (&mut conn.stream, conn.connecting) else {
                continue;
            };
            conn.wire.seal(&mut conn.out);
            let mut failed = None;
            while !conn.out.is_empty() && failed.is_none() {
                match stream.write(&conn.out) {
                    Ok(len) if len > 0 => conn.out.advance(len),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) => {
                        let read = |b: &mut [u8]| stream.read_ref(b);
                        failed = Some(conn.wire.explain(read, ConnectionError::from_io(&e)));
                    }
                    Ok(_) => failed = Some(ConnectionError::Closed),
                }
            }
            // Edge-triggered: WRITABLE interest only while bytes wait, else every ACK wakes us.
            let want = !conn.out.is_empty();
            if failed.is_none() && want != conn.writing {
                let interest = match want {
                    true => Interest::READABLE | Interest::WRITABLE,
                    false => Interest::READABLE,
                };
                let token = token(conn.serial, i);
                if let Err(e) = self.poll.registry().reregister(stream, token, interest) {
                    failed = Some(ConnectionError::from_io(&e));
                }
                conn.writing = want;
            }
            if let (Some(reason), Some(id)) = (failed, conn.id) {
                self.close(NodeId::new(i));
                self.down.push_back((id, reason));
            }
        }
    }

    /// Starts a connection attempt (called while draining): an IP address is connected to at
    /// once; a name is looked up off this thread first, and [`resolved`](Self::resolved)
    /// takes the answer. The connect timeout covers both.
    fn connect(&mut self, id: ConnId) {
        let node = id.node();
        self.close(node);
        self.conns[node.index()].id = Some(id);
        // Checked: a timeout too long for an `Instant` (`Duration::MAX`) is no deadline, not
        // a panic of the driver thread.
        let deadline = self.now().checked_add(self.connect_timeout);
        let attempt = Connecting { deadline };
        let failed = match self.endpoints[node.index()].dial() {
            Dial::Unix(path) => Stream::unix(path)
                .and_then(|stream| self.register(node, stream, vec![].into_iter(), attempt))
                .map_err(|e| ConnectionError::from_io(&e)),
            Dial::Tcp { host, port } => match host.parse::<IpAddr>() {
                Ok(ip) => {
                    let addrs = vec![SocketAddr::new(ip, *port)];
                    self.open(node, addrs.into_iter(), attempt)
                        .map_err(|e| ConnectionError::from_io(&e))
                }
                Err(_) => self.lookup(node, attempt),
            },
        };
        if let Err(cause) = failed {
            self.failed.push_back((node, cause));
        }
    }

    /// Starts a name lookup for the node's attempt, off this thread.
    fn lookup(&mut self, node: NodeId, attempt: Connecting) -> Result<(), ConnectionError> {
        let conn = &mut self.conns[node.index()];
        conn.serial = conn.serial.wrapping_add(1);
        self.resolver
            .start(node, conn.serial)
            .map(|()| conn.connecting = Some(attempt))
            .map_err(|e| ConnectionError::Resolve(format!("no lookup thread: {e}")))
    }

    /// Takes the lookups that ended. An answer whose attempt is still current (no socket yet,
    /// neither timed out nor replaced) starts its connects; any other is dropped.
    fn resolved(&mut self) {
        while let Some(Lookup {
            node,
            serial,
            addrs,
        }) = self.resolver.try_recv()
        {
            let conn = &self.conns[node.index()];
            let attempt = match conn.connecting {
                Some(attempt) if conn.serial == serial && conn.stream.is_none() => attempt,
                _ => continue,
            };
            let failed = match addrs {
                Ok(addrs) if addrs.is_empty() => {
                    ConnectionError::Resolve("the host has no address".into())
                }
                Ok(addrs) => match self.open(node, addrs.into_iter(), attempt) {
                    Ok(()) => continue,
                    Err(e) => ConnectionError::from_io(&e),
                },
                Err(e) => ConnectionError::Resolve(e.to_string()),
            };
            self.connect_failed(node, failed);
        }
    }

    /// Starts a non-blocking connect to the next address that takes one; when none is
    /// left, the attempt has failed, with the last address's error.
    fn open(
        &mut self,
        node: NodeId,
        mut rest: vec::IntoIter<SocketAddr>,
        attempt: Connecting,
    ) -> io::Result<()> {
        let mut last = io::Error::new(io::ErrorKind::NotFound, "no address left to try");
        while let Some(addr) = rest.next() {
            let Err(e) =
                Stream::tcp(addr).and_then(|s| self.register(node, s, rest.clone(), attempt))
            else {
                return Ok(());
            };
            last = e;
        }
        Err(last)
    }

    /// Registers a socket whose connect is in flight as the node's, with the addresses left
    /// to try if it fails.
    fn register(
        &mut self,
        node: NodeId,
        mut stream: Stream,
        rest: vec::IntoIter<SocketAddr>,
        attempt: Connecting,
    ) -> io::Result<()> {
        let conn = &mut self.conns[node.index()];
        conn.serial = conn.serial.wrapping_add(1);
        let (token, interest) = (token(conn.serial, node.index()), Interest::WRITABLE);
        self.poll
            .registry()
            .register(&mut stream, token, interest)?;
        (conn.stream, conn.connecting, conn.rest) = (Some(stream), Some(attempt), rest);
        Ok(())
    }

    /// The one way a connection attempt ends in failure: closes what is left of it and tells
    /// the core (`Client`'s MUST list, duty 5). Not while draining (an input): `connect`
    /// queues its failures in `failed`.
    fn connect_failed(&mut self, node: NodeId, reason: ConnectionError) {
        self.close(node);
        #[cfg(test)]
        if let Some(failures) = &self.failures {
            let _ = failures.send((node, reason.clone()));
        }
        if let Some(conn) = self.conns[node.index()].id {
            let now = self.now();
            self.feed(Input::Disconnected { now, conn, reason });
        }
    }

    /// A connecting socket reported readiness: connected, failed, or not decided yet.
    fn finish_connect(&mut self, node: NodeId, attempt: Connecting) {
        let conn = &mut self.conns[node.index()];
        let token = token(conn.serial, node.index());
        let Some(stream) = &mut conn.stream else {
            return;
        };
        let up = match stream.connected() {
            Ok(false) => return,
            Ok(true) => Ok(()),
            Err(e) => Err(e),
        };
        // A TLS handshake reads and writes; a plain connection only waits to read.
        let tls = self.endpoints[node.index()].is_tls();
        let interest = match tls {
            true => Interest::READABLE | Interest::WRITABLE,
            false => Interest::READABLE,
        };
        let registry = self.poll.registry();
        let up = up.and_then(|()| registry.reregister(stream, token, interest));
        let Err(e) = up else {
            // Best effort: a lock round trip is a few small writes each way.
            stream.set_nodelay();
            // A TLS wire queues its first handshake bytes.
            match self.endpoints[node.index()].wire(&mut conn.out) {
                Ok(wire) => conn.wire = wire,
                Err(reason) => return self.connect_failed(node, reason),
            }
            conn.handshaking = tls;
            return self.handshake(node);
        };
        let rest = mem::take(&mut conn.rest);
        self.close(node);
        let failed = match rest.as_slice() {
            [] => Err(e),
            _ => self.open(node, rest, attempt),
        };
        if let Err(e) = failed {
            self.connect_failed(node, ConnectionError::from_io(&e));
        }
    }

    /// Moves a TLS handshake on as far as the socket allows; once it is done (at once for a
    /// plain connection), the core hears `Connected`.
    fn handshake(&mut self, node: NodeId) {
        let c = &mut self.conns[node.index()];
        let Some(stream) = &c.stream else { return };
        let done = loop {
            let (read, write) = (
                |b: &mut [u8]| stream.read_ref(b),
                |b: &[u8]| stream.write_ref(b),
            );
            // Bounded: each `Progress` consumed bytes the socket had, until `WouldBlock`.
            match handshake_step(read, write, &mut c.wire, &mut c.out, &mut self.read_buf) {
                Ok(HandshakeStep::Progress) => {}
                Ok(HandshakeStep::Wait) => return,
                Ok(HandshakeStep::Done) => break Ok(()),
                Err(reason) => break Err(reason),
            }
        };
        if let Err(reason) = done {
            return self.connect_failed(node, reason);
        }
        let token = token(c.serial, node.index());
        let Some(stream) = &mut c.stream else { return };
        if let Err(e) = self
            .poll
            .registry()
            .reregister(stream, token, Interest::READABLE)
        {
            return self.connect_failed(node, ConnectionError::from_io(&e));
        }
        (c.connecting, c.handshaking, c.writing) = (None, false, false);
        if let Some(conn) = c.id {
            let now = self.now();
            self.feed(Input::Connected { now, conn });
        }
    }

    /// Closes the node's socket, if any. Every connect starts with a close, so bytes queued
    /// for an old socket never reach a new one.
    fn close(&mut self, node: NodeId) {
        let conn = &mut self.conns[node.index()];
        if let Some(mut stream) = conn.stream.take() {
            let _ = self.poll.registry().deregister(&mut stream);
        }
        (conn.connecting, conn.writing, conn.handshaking) = (None, false, false);
        conn.out.clear();
        conn.wire = Wire::plain();
    }

    /// Fails connects past their deadline, then feeds the core's timeout if it is due. The
    /// clock is read, not trusted to match the poll timeout.
    fn expire(&mut self) {
        for i in 0..self.conns.len() {
            let deadline = self.conns[i].connecting.and_then(|c| c.deadline);
            if deadline.is_some_and(|at| at <= self.now()) {
                let reason = match self.conns[i].handshaking {
                    true => Wire::handshake_timed_out(self.connect_timeout),
                    false => ConnectionError::ConnectTimeout(self.connect_timeout),
                };
                self.connect_failed(NodeId::new(i), reason);
            }
        }
        if self.deadline.is_some_and(|at| at <= self.now()) {
            self.feed(Input::Timeout(self.now()));
        }
    }

    /// Takes a burst of commands, draining after each; returns whether more may be waiting.
    /// An empty channel keeps the waker that makes `poll` return on the next command.
    fn commands(&mut self) -> bool {
        let waker = self.waker.clone();
        let mut cx = Context::from_waker(&waker);
        for _ in 0..COMMAND_BURST {
            match self.rx.poll_recv(&mut cx) {
                Ready::Ready(Some(cmd)) => {
                    self.waiters.command(self.now(), &mut self.client, cmd);
                    self.drain();
                }
                Ready::Ready(None) => {
                    self.closed = true;
                    return false;
                }
                Ready::Pending => return false,
            }
        }
        true
    }
}

/// Wakes the poller; the driver's task waker for the command channel.
struct WakePoll(Waker);

impl Wake for WakePoll {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // A failed wake means the poller is gone, and so is the driver: nothing to do.
        let _ = self.0.wake();
    }
}

/// The poll token of socket number `serial` of node `i`. Node indexes fit in the low bits
/// (`redlock_core::MAX_NODES` is 4096), so no socket token equals [`WAKER`].
fn token(serial: usize, i: usize) -> Token {
    Token(serial.wrapping_shl(NODE_BITS) | i)
}

/// Whether a read that does not fill the buffer proves the socket drained, as on epoll
/// (Linux, Android) and kqueue (the BSDs, macOS), where every arrival after it is a new edge.
const DRAINED_BY_SHORT_READ: bool = cfg!(any(
    target_os = "linux",
    target_os = "android",
    target_os = "macos",
    target_os = "ios",
    target_os = "freebsd",
    target_os = "netbsd",
    target_os = "openbsd",
    target_os = "dragonfly",
));

const NODE_BITS: u32 = 16;
const NODE_MASK: usize = (1 << NODE_BITS) - 1;
const WAKER: Token = Token(usize::MAX);
/// Most user commands handled in one loop turn, so replies are never starved.
const COMMAND_BURST: usize = 64;
