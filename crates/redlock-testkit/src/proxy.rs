//! A loopback TCP proxy in front of one node that can delay, blackhole or cut the link, close
//! it right behind a reply (a server that answers and hangs up), or hold a connection's bytes
//! and deliver them after its client side is gone (a middlebox or half-closed connection),
//! with plain threads and blocking sockets. It forwards bytes and never looks inside them.
//!
//! Each client connection gets four threads: a reader and a writer per direction, joined by a
//! channel of `(due, bytes)` chunks, so latency delays every chunk without reordering or
//! serialising them.

use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::Error;

/// A TCP proxy listening on its own 127.0.0.1 port and forwarding to a target address.
/// Controls take `&self` and apply at once; dropping the proxy closes every connection and
/// joins its threads (bounded).
#[derive(Debug)]
pub struct Proxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl Proxy {
    /// Listens on a free loopback port and forwards each connection to `target`.
    pub fn start(target: SocketAddr) -> Result<Self, Error> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .map_err(|e| Error::io("binding the proxy to 127.0.0.1:0", e))?;
        let addr = listener
            .local_addr()
            .map_err(|e| Error::io("reading the proxy address", e))?;
        // Non-blocking accept lets the thread notice the stop flag without a wake-up connect.
        listener
            .set_nonblocking(true)
            .map_err(|e| Error::io("making the proxy listener non-blocking", e))?;
        let shared = Arc::new(Shared {
            target,
            stop: AtomicBool::new(false),
            latency_nanos: AtomicU64::new(0),
            blackhole: AtomicBool::new(false),
            dropped_to_node: AtomicU64::new(0),
            accepted: AtomicU64::new(0),
            late_replies: Mutex::new(Vec::new()),
            links: Mutex::new(Vec::new()),
            handlers: Mutex::new(Vec::new()),
        });
        let accept = {
            let shared = Arc::clone(&shared);
            thread::Builder::new()
                .name(format!("proxy-accept-{}", addr.port()))
                .spawn(move || accept_loop(&listener, &shared))
                .map_err(|e| Error::io("spawning the proxy accept thread", e))?
        };
        Ok(Self {
            addr,
            shared,
            accept: Some(accept),
        })
    }

    /// The address clients should connect to instead of the node's.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `redis://127.0.0.1:PORT` of the proxy.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.addr.port())
    }

    /// The address the proxy forwards to.
    pub fn target(&self) -> SocketAddr {
        self.shared.target
    }

    /// Delays every chunk read from now on by `latency` before it is written on, in each
    /// direction, so a request/reply round trip takes at least twice `latency`.
    pub fn set_latency(&self, latency: Duration) {
        let nanos = u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX);
        self.shared.latency_nanos.store(nanos, Ordering::Relaxed);
    }

    /// The one-way delay set by [`Proxy::set_latency`].
    pub fn latency(&self) -> Duration {
        Duration::from_nanos(self.shared.latency_nanos.load(Ordering::Relaxed))
    }

    /// While on, bytes read in either direction are dropped, not forwarded, and new
    /// connections are accepted but not connected to the node until it is turned off. A
    /// connection that lived through a blackhole has lost bytes: clients should time out and
    /// reconnect (or the test can [`Proxy::cut`] it).
    pub fn blackhole(&self, on: bool) {
        self.shared.blackhole.store(on, Ordering::Relaxed);
    }

    /// How many bytes from clients the blackhole has dropped since the proxy started.
    ///
    /// Whether a read is dropped is decided when the proxy's thread reads it, which may be
    /// a moment after the client wrote it: a test that turns the blackhole off must first
    /// wait until this count has grown by the request it means to lose, or a late read
    /// would forward that request after all.
    pub fn dropped_to_node(&self) -> u64 {
        self.shared.dropped_to_node.load(Ordering::Relaxed)
    }

    /// True while [`Proxy::blackhole`] is on.
    pub fn is_blackholed(&self) -> bool {
        self.shared.blackhole.load(Ordering::Relaxed)
    }

    /// Closes every current connection on both sides (client and node); new ones are
    /// accepted as usual.
    pub fn cut(&self) {
        for link in self.shared.links().drain(..) {
            link.close();
        }
    }

    /// Number of connections currently open through the proxy, counting those whose
    /// client side was cut by [`Proxy::cut_client_side`] while their node side lives.
    pub fn connections(&self) -> usize {
        self.shared.links().len()
    }

    /// How many connections the proxy has accepted since it started, whether still open or
    /// not: a count that grows tells a test that its client connected again, at once, where
    /// [`Proxy::connections`] counts a closed connection until its threads have ended.
    pub fn accepted(&self) -> u64 {
        self.shared.accepted.load(Ordering::Relaxed)
    }

    /// On the connections open now, the next chunk of bytes the node sends towards the
    /// client is written to it and the client side is shut down at once behind it, as a
    /// server does that answers and closes (Redis's `-ERR max number of clients reached`, a
    /// server or proxy closing right after a reply or a push): the client gets the bytes and
    /// the end of stream back to back, often before it has read the bytes. Then the link
    /// ends, the node side too. A chunk is what one read from the node returned, so a reply
    /// the node wrote in one go is forwarded whole before the close. Connections opened
    /// later are not affected.
    pub fn close_after_next_reply(&self) {
        for link in self.shared.links().iter() {
            link.close_after_reply.store(true, Ordering::Relaxed);
        }
    }

    /// From now on, bytes that clients write on the connections open now are kept by the
    /// proxy, in order, instead of reaching the node, until [`Proxy::deliver_held`].
    /// Connections opened later are not held.
    pub fn hold_current(&self) {
        for link in self.shared.links().iter() {
            link.holding.store(true, Ordering::Relaxed);
        }
    }

    /// The bytes held so far by [`Proxy::hold_current`] and not yet delivered, connection by
    /// connection in the order they were opened.
    pub fn held_bytes(&self) -> Vec<u8> {
        let links = self.shared.links();
        let mut all = Vec::new();
        for link in links.iter() {
            all.extend_from_slice(&lock(&link.held));
        }
        all
    }

    /// Closes the client side of every current connection, as a middlebox that drops a
    /// connection towards the client but not towards the server would: the client sees it
    /// closed and reconnects, while the node side stays open, so bytes held for it can still
    /// reach the node later, after the client's newer connections. What the node answers on
    /// such a connection is kept for [`Proxy::late_replies`].
    pub fn cut_client_side(&self) {
        for link in self.shared.links().iter() {
            link.client_cut.store(true, Ordering::Relaxed);
            let _ = link.client.shutdown(Shutdown::Both);
        }
    }

    /// Lets every held connection's bytes go on to the node, in order (after the proxy's
    /// latency, if any). The bytes are handed to the connection's writer at once; use
    /// [`Proxy::late_replies`] to learn when the node has answered a cut connection.
    pub fn deliver_held(&self) {
        for link in self.shared.links().iter() {
            link.holding.store(false, Ordering::Relaxed);
        }
    }

    /// Closes the node side of every connection whose client side was cut (see
    /// [`Proxy::cut_client_side`]), with whatever it still holds.
    pub fn close_cut(&self) {
        self.shared.links().retain(|link| {
            if link.is_client_cut() {
                link.close();
            }
            !link.is_client_cut()
        });
    }

    /// Everything the node has answered, so far, on connections whose client side was cut
    /// (see [`Proxy::cut_client_side`]), in arrival order.
    pub fn late_replies(&self) -> Vec<u8> {
        lock(&self.shared.late_replies).clone()
    }
}

/// Locks a mutex that only ever guards plain buffers, so a poisoned one is intact.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        self.cut();
        if let Some(accept) = self.accept.take() {
            // The accept loop polls the stop flag every few milliseconds.
            let _ = accept.join();
        }
        let handlers = std::mem::take(&mut *self.shared.handlers());
        let deadline = Instant::now() + JOIN_LIMIT;
        for handler in handlers {
            while !handler.is_finished() && Instant::now() < deadline {
                thread::sleep(Duration::from_millis(1));
            }
            // A thread still running past the limit is left detached rather than hanging
            // the test; it exits on its own once its sockets fail.
            if handler.is_finished() {
                let _ = handler.join();
            }
        }
    }
}

/// State shared by the proxy handle and its threads.
#[derive(Debug)]
struct Shared {
    target: SocketAddr,
    stop: AtomicBool,
    latency_nanos: AtomicU64,
    blackhole: AtomicBool,
    /// Bytes from clients that the blackhole dropped, ever.
    dropped_to_node: AtomicU64,
    /// Connections accepted, ever.
    accepted: AtomicU64,
    /// Replies of the node on connections whose client side was cut.
    late_replies: Mutex<Vec<u8>>,
    links: Mutex<Vec<Arc<Link>>>,
    handlers: Mutex<Vec<JoinHandle<()>>>,
}

impl Shared {
    fn links(&self) -> MutexGuard<'_, Vec<Arc<Link>>> {
        // Only plain pushes and removals happen under this lock, so a poisoned list is intact.
        self.links.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn handlers(&self) -> MutexGuard<'_, Vec<JoinHandle<()>>> {
        self.handlers.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    fn blackholed(&self) -> bool {
        self.blackhole.load(Ordering::Relaxed)
    }

    /// Counts `n` bytes going `dir` that the blackhole dropped.
    fn dropped(&self, dir: Dir, n: usize) {
        if dir == Dir::ToNode {
            let n = u64::try_from(n).unwrap_or(u64::MAX);
            self.dropped_to_node.fetch_add(n, Ordering::Relaxed);
        }
    }

    fn latency(&self) -> Duration {
        Duration::from_nanos(self.latency_nanos.load(Ordering::Relaxed))
    }
}

/// One client connection and, once connected, its upstream socket.
#[derive(Debug)]
struct Link {
    client: TcpStream,
    upstream: Mutex<Option<TcpStream>>,
    closed: AtomicBool,
    /// Bytes towards the node are kept in `held` instead of forwarded.
    holding: AtomicBool,
    held: Mutex<Vec<u8>>,
    /// The client side was closed on purpose; the node side lives on.
    client_cut: AtomicBool,
    /// The next chunk towards the client is the last: the link closes right behind it.
    close_after_reply: AtomicBool,
}

/// Which way a pump copies bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dir {
    ToNode,
    ToClient,
}

impl Link {
    /// Marks the link closed and shuts both sockets down, which wakes any blocked read.
    fn close(&self) {
        self.closed.store(true, Ordering::Relaxed);
        let _ = self.client.shutdown(Shutdown::Both);
        let upstream = self.upstream.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(up) = upstream.as_ref() {
            let _ = up.shutdown(Shutdown::Both);
        }
    }

    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Relaxed)
    }

    fn is_holding(&self) -> bool {
        self.holding.load(Ordering::Relaxed)
    }

    fn is_client_cut(&self) -> bool {
        self.client_cut.load(Ordering::Relaxed)
    }

    /// Bytes held while holding was on and not yet passed on.
    fn take_held(&self) -> Vec<u8> {
        std::mem::take(&mut *lock(&self.held))
    }
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>) {
    while !shared.stopping() {
        match listener.accept() {
            Ok((stream, _)) => {
                shared.accepted.fetch_add(1, Ordering::Relaxed);
                let worker = Arc::clone(shared);
                let spawned = thread::Builder::new()
                    .name("proxy-conn".to_owned())
                    .spawn(move || handle(stream, &worker));
                // If no thread can be had, the stream was dropped with the closure: the
                // client sees its connection closed, which is a fault tests can live with.
                if let Ok(handler) = spawned {
                    let mut handlers = shared.handlers();
                    handlers.retain(|h| !h.is_finished());
                    handlers.push(handler);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => thread::sleep(POLL),
            Err(_) => thread::sleep(POLL),
        }
    }
}

/// Runs one connection until it ends, then unregisters it.
fn handle(client: TcpStream, shared: &Arc<Shared>) {
    let Some(link) = register(&client, shared) else {
        return;
    };
    // `None` means the link ended early (stop, blackhole hold, node down, no threads).
    let _ = forward(&client, &link, shared);
    link.close();
    shared.links().retain(|l| !Arc::ptr_eq(l, &link));
}

/// Holds the connection while blackholed, connects upstream, then pumps both ways.
fn forward(client: &TcpStream, link: &Arc<Link>, shared: &Arc<Shared>) -> Option<()> {
    let early = hold_while_blackholed(client, link, shared)?;
    let upstream = connect_upstream(link, shared)?;
    let (up_from, client_to) = (upstream.try_clone().ok()?, client.try_clone().ok()?);
    let client_from = client.try_clone().ok()?;
    let down = {
        let (link, shared) = (Arc::clone(link), Arc::clone(shared));
        thread::Builder::new()
            .name("proxy-down".to_owned())
            .spawn(move || {
                pump(
                    Dir::ToClient,
                    up_from,
                    client_to,
                    Vec::new(),
                    &link,
                    &shared,
                )
            })
            .ok()?
    };
    pump(Dir::ToNode, client_from, upstream, early, link, shared);
    let _ = down.join();
    Some(())
}

fn register(client: &TcpStream, shared: &Shared) -> Option<Arc<Link>> {
    // Accepted sockets may inherit the listener's non-blocking mode on some platforms.
    client.set_nonblocking(false).ok()?;
    client.set_read_timeout(Some(READ_POLL)).ok()?;
    let _ = client.set_nodelay(true);
    let link = Arc::new(Link {
        client: client.try_clone().ok()?,
        upstream: Mutex::new(None),
        closed: AtomicBool::new(false),
        holding: AtomicBool::new(false),
        held: Mutex::new(Vec::new()),
        client_cut: AtomicBool::new(false),
        close_after_reply: AtomicBool::new(false),
    });
    // Registered before any stop check (in `forward`), so a concurrent drop either closes
    // this link or is seen by it.
    shared.links().push(Arc::clone(&link));
    Some(link)
}

/// Reads and drops client bytes while the blackhole is on. Returns the bytes of a read that
/// completed after the blackhole lifted (to forward first), or `None` if the link ended.
fn hold_while_blackholed(mut client: &TcpStream, link: &Link, shared: &Shared) -> Option<Vec<u8>> {
    let mut buf = [0; 4096];
    while shared.blackholed() {
        if link.is_closed() || shared.stopping() {
            return None;
        }
        match client.read(&mut buf) {
            Ok(0) => return None,
            // Whether bytes are dropped is decided when the read completes, as in `pump`.
            Ok(n) if !shared.blackholed() => return Some(buf[..n].to_vec()),
            Ok(n) => shared.dropped(Dir::ToNode, n),
            Err(e) if is_retry(&e) => {}
            Err(_) => return None,
        }
    }
    (!link.is_closed() && !shared.stopping()).then(Vec::new)
}

fn connect_upstream(link: &Link, shared: &Shared) -> Option<TcpStream> {
    // A dead node shows up to the client as a closed connection, as it would without us.
    let upstream = TcpStream::connect_timeout(&shared.target, CONNECT_TIMEOUT).ok()?;
    upstream.set_read_timeout(Some(READ_POLL)).ok()?;
    let _ = upstream.set_nodelay(true);
    *link.upstream.lock().unwrap_or_else(PoisonError::into_inner) = upstream.try_clone().ok();
    // A cut() that ran before the line above could not shut this socket: do it here.
    if link.is_closed() || shared.stopping() {
        let _ = upstream.shutdown(Shutdown::Both);
        return None;
    }
    Some(upstream)
}

/// Copies `from` to `to` through a delay line, `early` bytes first, until EOF, an error, or
/// the link is closed. Towards the node, bytes read while the link is holding are kept
/// and passed on, first, once it stops holding, even after the client side is cut.
fn pump(
    dir: Dir,
    mut from: TcpStream,
    to: TcpStream,
    early: Vec<u8>,
    link: &Arc<Link>,
    shared: &Arc<Shared>,
) {
    let (tx, rx) = mpsc::channel::<(Instant, Vec<u8>)>();
    if !early.is_empty() {
        // The receiver is still in this scope, so this send cannot fail.
        let _ = tx.send((Instant::now() + shared.latency(), early));
    }
    let writer = {
        let (link, shared) = (Arc::clone(link), Arc::clone(shared));
        thread::Builder::new()
            .name("proxy-write".to_owned())
            .spawn(move || write_due(dir, rx, to, &link, &shared))
    };
    let Ok(writer) = writer else {
        link.close();
        return;
    };
    let send = |bytes: Vec<u8>| tx.send((Instant::now() + shared.latency(), bytes)).is_ok();
    // Held bytes go first, once the link stops holding.
    let flush_held = || {
        let held = if link.is_holding() {
            Vec::new()
        } else {
            link.take_held()
        };
        held.is_empty() || send(held)
    };
    let mut buf = vec![0; 16 * 1024];
    while !link.is_closed() && !shared.stopping() {
        match from.read(&mut buf) {
            Ok(0) => break,
            // Blackholed: read so the sender is not stalled by a full window, then drop.
            Ok(n) if shared.blackholed() => shared.dropped(dir, n),
            Ok(n) if dir == Dir::ToNode && link.is_holding() => {
                lock(&link.held).extend_from_slice(&buf[..n]);
            }
            Ok(n) => {
                if !flush_held() || !send(buf[..n].to_vec()) {
                    break;
                }
            }
            Err(e) if is_retry(&e) => {
                if !flush_held() {
                    break;
                }
            }
            Err(_) if link.is_client_cut() => break,
            Err(_) => {
                link.close();
                break;
            }
        }
    }
    if dir == Dir::ToNode && link.is_client_cut() {
        // The client is gone but the node side lives: held bytes still go on, late.
        while link.is_holding() && !link.is_closed() && !shared.stopping() {
            thread::sleep(POLL);
        }
        flush_held();
    }
    // Dropping the sender lets the writer flush what is due, then pass the EOF on.
    drop(tx);
    let _ = writer.join();
}

/// Writes each chunk once its due time has come; on the reader's EOF, half-closes `to`.
/// Towards a client whose side was cut, chunks are kept as late replies instead, and the
/// node side is not half-closed (the node would drop the connection). Towards a client
/// whose link is to close after a reply, the chunk written is followed at once by the end
/// of stream, and the link is closed.
fn write_due(
    dir: Dir,
    rx: mpsc::Receiver<(Instant, Vec<u8>)>,
    mut to: TcpStream,
    link: &Link,
    shared: &Shared,
) {
    for (due, bytes) in rx {
        // Sleep in slices so cut() and drop are noticed even under a long latency.
        loop {
            if link.is_closed() || shared.stopping() {
                return;
            }
            let now = Instant::now();
            if now >= due {
                break;
            }
            thread::sleep((due - now).min(POLL));
        }
        if dir == Dir::ToClient && link.is_client_cut() {
            lock(&shared.late_replies).extend_from_slice(&bytes);
            continue;
        }
        // Read before the write: a control set while an earlier chunk was being written
        // (its client may have read it already) is for the next chunk, not that one.
        let last = dir == Dir::ToClient && link.close_after_reply.load(Ordering::Relaxed);
        if to.write_all(&bytes).is_err() {
            link.close();
            return;
        }
        if last {
            // The FIN right behind the bytes, before anything else can run here.
            let _ = to.shutdown(Shutdown::Write);
            link.close();
            return;
        }
    }
    if !link.is_client_cut() {
        let _ = to.shutdown(Shutdown::Write);
    }
}

fn is_retry(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

/// How often the accept loop and sleeping writers look at the stop and close flags.
const POLL: Duration = Duration::from_millis(5);
/// Read timeout of proxied sockets: a backstop only, as closing a link shuts its sockets
/// down, which wakes blocked reads at once.
const READ_POLL: Duration = Duration::from_millis(50);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// How long dropping a proxy waits for its connection threads.
const JOIN_LIMIT: Duration = Duration::from_secs(2);
