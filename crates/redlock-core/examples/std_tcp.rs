//! A complete, minimal driver over plain `std::net::TcpStream`s: non-blocking sockets polled
//! in one thread, enough to show the `Client` contract (it is included in the crate docs).
//! Production drivers are `redlock-tokio`, `redlock-async-std` and `redlock-blocking`.
//!
//! Run against three local nodes on ports 7001-7003: `cargo run -p redlock-core --example std_tcp`.

// This file is a driver, and drivers own the clock and the sleeping that `clippy.toml`
// forbids the core.
#![allow(clippy::disallowed_methods)]

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use redlock_core::{Client, Config, ConnId, ConnectionError, Event, Input, Output, Resource};

/// One node's open socket, with the connection the client named it by.
type Socket = Option<(ConnId, TcpStream)>;

/// How a connection attempt or a socket ended, reported to the client as its own input.
type Report = (Instant, ConnId, Result<(), ConnectionError>);

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let addrs = ["127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"];
    let mut builder = Config::builder(addrs.len()).ttl(Duration::from_secs(10));
    for (i, addr) in addrs.iter().enumerate() {
        // Errors and statistics name the node by its address.
        builder = builder.node_name(i, *addr);
    }
    let config = builder.build()?;
    // Use an OS-seeded CSPRNG in real code (e.g. getrandom's SysRng).
    let rng: chacha20::ChaCha20Rng = rand_core::SeedableRng::seed_from_u64(42);
    let mut client = Client::new(config, rng);
    let mut socks: Vec<Socket> = addrs.iter().map(|_| None).collect();
    // Connection outcomes not yet fed; they outlive a drain, as one is fed per turn.
    let mut reports: Vec<Report> = Vec::new();
    let mut op = None;
    let mut buf = [0u8; 16 * 1024];
    loop {
        // Drain.
        let mut deadline = None;
        loop {
            match client.poll_output() {
                Output::Event(event) => {
                    if on_event(event, &mut op) {
                        return Ok(());
                    }
                }
                Output::Timeout(at) => break deadline = Some(at),
                Output::Idle => break,
                other => act(other, &addrs, &mut socks, &mut reports),
            }
        }
        // Feed connection outcomes one at a time, draining in between.
        if let Some((now, conn, outcome)) = reports.pop() {
            let input = match outcome {
                Ok(()) => Input::Connected { now, conn },
                Err(reason) => Input::Disconnected { now, conn, reason },
            };
            client.handle_input(input)?;
            continue;
        }
        // A user command: lock once every node had its chance to connect.
        if op.is_none() {
            op = Some(client.acquire(Instant::now(), Resource::from("my-resource"))?);
            continue;
        }
        if let Some(Some(held)) = op.map(|o| client.held(o).map(|_| o)) {
            client.release(Instant::now(), held)?;
            continue;
        }
        // Wait for bytes from any node, or the deadline.
        let fed = read_one(&mut client, &mut socks, &mut buf)?;
        if !fed {
            let now = Instant::now();
            match deadline {
                Some(at) if at <= now => client.handle_input(Input::Timeout(now))?,
                _ => std::thread::sleep(Duration::from_micros(200)),
            }
        }
    }
}

/// Acts on a transmit or a connection request: writes, connects, closes. Failures are
/// queued in `reports`, to be fed as inputs of their own.
fn act(output: Output, addrs: &[&str], socks: &mut [Socket], reports: &mut Vec<Report>) {
    match output {
        Output::Transmit(t) => {
            let i = t.node.index();
            if let Some((conn, s)) = &mut socks[i]
                && let Err(e) = write_all(s, &t.bytes)
            {
                reports.push((Instant::now(), *conn, Err(ConnectionError::from_io(&e))));
                socks[i] = None;
            }
        }
        Output::Connect(conn) => {
            // A new connection replaces any earlier one to the node.
            let i = conn.node().index();
            let (now, result) = (Instant::now(), connect(addrs[i]));
            socks[i] = None;
            let outcome = result.map(|s| socks[i] = Some((conn, s)));
            reports.push((now, conn, outcome));
        }
        Output::Disconnect(conn) => {
            let i = conn.node().index();
            if socks[i].as_ref().is_some_and(|(c, _)| *c == conn) {
                socks[i] = None;
            }
        }
        _ => {}
    }
}

/// Prints a lock event; true when the example is done.
fn on_event(event: Event, op: &mut Option<redlock_core::OpId>) -> bool {
    match event {
        Event::Acquired(a) => {
            println!("locked {:?} for {:?} ({})", a.resource, a.validity, a.stats);
            client_release_later(op, a.op);
            false
        }
        Event::AcquireFailed { reason, stats, .. } => {
            println!("not locked: {reason} ({stats})");
            true
        }
        Event::Released { nodes, .. } => {
            let nodes: Vec<String> = nodes.iter().map(ToString::to_string).collect();
            println!("released: {}", nodes.join(", "));
            true
        }
        other => {
            println!("{other:?}");
            false
        }
    }
}

/// Connects with a timeout; the reason if the node cannot be reached.
fn connect(addr: &str) -> Result<TcpStream, ConnectionError> {
    let timeout = Duration::from_millis(200);
    let addr = addr
        .parse()
        .map_err(|e| ConnectionError::Resolve(format!("{addr}: {e}")))?;
    let s = TcpStream::connect_timeout(&addr, timeout).map_err(|e| match e.kind() {
        ErrorKind::TimedOut => ConnectionError::ConnectTimeout(timeout),
        _ => ConnectionError::from_io(&e),
    })?;
    s.set_nodelay(true)
        .and_then(|()| s.set_nonblocking(true))
        .map_err(|e| ConnectionError::from_io(&e))?;
    Ok(s)
}

/// Feeds the bytes (or the disconnection) of the first node that has any; false if none.
fn read_one<R: rand_core::CryptoRng>(
    client: &mut Client<R>,
    socks: &mut [Socket],
    buf: &mut [u8],
) -> Result<bool, Box<dyn std::error::Error>> {
    for sock in socks.iter_mut() {
        let Some((conn, s)) = sock else { continue };
        let (conn, now) = (*conn, Instant::now());
        let reason = match s.read(buf) {
            Ok(0) => ConnectionError::Closed,
            Ok(n) => {
                let bytes = &buf[..n];
                client.handle_input(Input::Received { now, conn, bytes })?;
                return Ok(true);
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => continue,
            Err(e) => ConnectionError::from_io(&e),
        };
        *sock = None;
        client.handle_input(Input::Disconnected { now, conn, reason })?;
        return Ok(true);
    }
    Ok(false)
}

fn write_all(s: &mut TcpStream, mut bytes: &[u8]) -> std::io::Result<()> {
    while !bytes.is_empty() {
        match s.write(bytes) {
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == ErrorKind::WouldBlock => std::thread::yield_now(),
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn client_release_later(slot: &mut Option<redlock_core::OpId>, op: redlock_core::OpId) {
    *slot = Some(op);
}
