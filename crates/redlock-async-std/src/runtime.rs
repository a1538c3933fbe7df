//! What async-io gives the shared driver loop (`redlock_driver::IoLoop`): `Async<TcpStream>`
//! or `Async<UnixStream>` (TLS runs over either in the shared loop)
//! and its timer, which counts in std's clock (`Start::now`). The loop runs under `async_io::block_on` on its own thread.

use std::future::Future;
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use async_io::{Async, Timer};
use futures_lite::future;
use redlock_core::ConnectionError;
use redlock_driver::{Connecting, Dial, Runtime};
use tokio::sync::oneshot;

use crate::AsyncIo;

/// A node's socket: TCP or a unix socket.
#[derive(Debug)]
pub enum Stream {
    /// `redis://` and `rediss://` nodes.
    Tcp(Async<TcpStream>),
    /// `unix://` nodes.
    Unix(Async<UnixStream>),
}

impl Runtime for AsyncIo {
    type Stream = Stream;
    type Timer = Timer;

    fn connect(dial: Dial, timeout: Duration) -> Connecting<Stream> {
        let timed_out = async move {
            Timer::after(timeout).await;
            Err(ConnectionError::ConnectTimeout(timeout))
        };
        let open = async move {
            match dial {
                Dial::Tcp { host, port } => open(host, port).await.map(Stream::Tcp),
                Dial::Unix(path) => Async::<UnixStream>::connect(path)
                    .await
                    .map(Stream::Unix)
                    .map_err(|e| ConnectionError::from_io(&e)),
            }
        };
        Box::pin(future::or(open, timed_out))
    }

    fn poll_readable(stream: &Stream, cx: &mut Context<'_>) -> Poll<()> {
        match stream {
            Stream::Tcp(s) => s.poll_readable(cx).map(drop),
            Stream::Unix(s) => s.poll_readable(cx).map(drop),
        }
    }

    fn poll_writable(stream: &Stream, cx: &mut Context<'_>) -> Poll<()> {
        match stream {
            Stream::Tcp(s) => s.poll_writable(cx).map(drop),
            Stream::Unix(s) => s.poll_writable(cx).map(drop),
        }
    }

    fn try_read(stream: &Stream, buf: &mut [u8]) -> io::Result<usize> {
        match stream {
            Stream::Tcp(s) => s.get_ref().read(buf),
            Stream::Unix(s) => s.get_ref().read(buf),
        }
    }

    fn try_write(stream: &Stream, buf: &[u8]) -> io::Result<usize> {
        match stream {
            Stream::Tcp(s) => s.get_ref().write(buf),
            Stream::Unix(s) => s.get_ref().write(buf),
        }
    }

    fn timer() -> Timer {
        Timer::never()
    }

    fn set_timer(timer: &mut Timer, at: Instant) {
        timer.set_at(at);
    }

    fn poll_timer(timer: &mut Timer, cx: &mut Context<'_>) -> Poll<()> {
        Pin::new(timer).poll(cx).map(drop)
    }

    async fn yield_now() {
        future::yield_now().await;
    }
}

/// Resolves `host` and connects to the first of its addresses that accepts. An IP address
/// needs no lookup; a name is resolved on a helper thread, since std's resolver blocks. A
/// failure says which step failed.
async fn open(host: String, port: u16) -> Result<Async<TcpStream>, ConnectionError> {
    let addrs: Vec<SocketAddr> = match host.parse::<IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) => {
            let (tx, rx) = oneshot::channel();
            std::thread::Builder::new()
                .name("redlock-resolve".into())
                .spawn(move || {
                    let _ = tx.send((host.as_str(), port).to_socket_addrs().map(Vec::from_iter));
                })
                .map_err(|e| ConnectionError::Resolve(format!("no resolver thread: {e}")))?;
            rx.await
                .map_err(|_| ConnectionError::Resolve("the resolver thread ended".into()))?
                .map_err(|e| ConnectionError::Resolve(e.to_string()))?
        }
    };
    let mut last = ConnectionError::Resolve("the host has no address".into());
    for addr in addrs {
        match Async::<TcpStream>::connect(addr).await {
            Ok(stream) => {
                // Best effort: a lock round trip is a few bytes each way.
                let _ = stream.get_ref().set_nodelay(true);
                return Ok(stream);
            }
            Err(e) => last = ConnectionError::from_io(&e),
        }
    }
    Err(last)
}
