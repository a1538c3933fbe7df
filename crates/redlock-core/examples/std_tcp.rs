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

use redlock_core::{Client, Config, Event, Input, NodeId, Output, Resource};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let addrs = ["127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"];
    let config = Config::builder(addrs.len())
        .ttl(Duration::from_secs(10))
        .build()?;
    // Use an OS-seeded CSPRNG in real code (e.g. getrandom's SysRng).
    let rng: chacha20::ChaCha20Rng = rand_core::SeedableRng::seed_from_u64(42);
    let mut client = Client::new(config, rng);
    let mut socks: Vec<Option<TcpStream>> = addrs.iter().map(|_| None).collect();
    let mut op = None;
    let mut buf = [0u8; 16 * 1024];
    loop {
        // Drain.
        let mut deadline = None;
        let mut events = Vec::new();
        loop {
            match client.poll_output() {
                Output::Transmit(t) => {
                    let ok = socks[t.node.index()]
                        .as_mut()
                        .is_some_and(|s| write_all(s, &t.bytes).is_ok());
                    if !ok {
                        socks[t.node.index()] = None; // reported below as Disconnected
                    }
                }
                Output::Connect(node) => {
                    let (now, sock) = (Instant::now(), connect(addrs[node.index()])?);
                    // Reported after the drain, as its own input.
                    events.push((now, node, sock.is_some()));
                    socks[node.index()] = sock;
                }
                Output::Disconnect(node) => socks[node.index()] = None,
                Output::Event(Event::Acquired(a)) => {
                    println!("locked {:?} for {:?}", a.resource, a.validity);
                    client_release_later(&mut op, a.op);
                }
                Output::Event(Event::Released { nodes, .. }) => {
                    println!("released: {nodes:?}");
                    return Ok(());
                }
                Output::Event(other) => println!("{other:?}"),
                Output::Timeout(at) => break deadline = Some(at),
                Output::Idle => break,
            }
        }
        // Feed connection outcomes one at a time, draining in between.
        if let Some((now, node, up)) = events.pop() {
            let input = if up {
                Input::Connected { now, node }
            } else {
                Input::Disconnected { now, node }
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

/// Connects with a timeout; `None` if the node cannot be reached.
fn connect(addr: &str) -> Result<Option<TcpStream>, Box<dyn std::error::Error>> {
    match TcpStream::connect_timeout(&addr.parse()?, Duration::from_millis(200)) {
        Ok(s) => {
            s.set_nodelay(true)?;
            s.set_nonblocking(true)?;
            Ok(Some(s))
        }
        Err(_) => Ok(None),
    }
}

/// Feeds the bytes (or the disconnection) of the first node that has any; false if none.
fn read_one<R: rand_core::CryptoRng>(
    client: &mut Client<R>,
    socks: &mut [Option<TcpStream>],
    buf: &mut [u8],
) -> Result<bool, Box<dyn std::error::Error>> {
    for (i, sock) in socks.iter_mut().enumerate() {
        let Some(s) = sock else { continue };
        let node = NodeId::new(i);
        let now = Instant::now();
        match s.read(buf) {
            Ok(0) => {
                *sock = None;
                client.handle_input(Input::Disconnected { now, node })?;
            }
            Ok(n) => client.handle_input(Input::Received {
                now,
                node,
                bytes: &buf[..n],
            })?,
            Err(e) if e.kind() == ErrorKind::WouldBlock => continue,
            Err(_) => {
                *sock = None;
                client.handle_input(Input::Disconnected { now, node })?;
            }
        }
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
