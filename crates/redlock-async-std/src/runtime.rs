//! What async-io gives the shared driver loop (`redlock_driver::IoLoop`): `Async<TcpStream>`
//! and its timer, which counts in std's clock (`Start::now`). The loop runs under `async_io::block_on` on its own thread.

use std::future::Future;
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use async_io::{Async, Timer};
use futures_lite::future;
use redlock_core::ConnectionError;
use redlock_driver::{Connecting, Runtime};
use tokio::sync::oneshot;

use crate::AsyncIo;

impl Runtime for AsyncIo {
    type Stream = Async<TcpStream>;
    type Timer = Timer;

    fn connect(host: String, port: u16, timeout: Duration) -> Connecting<Async<TcpStream>> {
        let timed_out = async move {
            Timer::after(timeout).await;
            Err(ConnectionError::ConnectTimeout(timeout))
        };
        Box::pin(future::or(open(host, port), timed_out))
    }

    fn poll_readable(stream: &Async<TcpStream>, cx: &mut Context<'_>) -> Poll<()> {
        stream.poll_readable(cx).map(drop)
    }

    fn poll_writable(stream: &Async<TcpStream>, cx: &mut Context<'_>) -> Poll<()> {
        stream.poll_writable(cx).map(drop)
    }

    fn try_read(stream: &Async<TcpStream>, buf: &mut [u8]) -> io::Result<usize> {
        stream.get_ref().read(buf)
    }

    fn try_write(stream: &Async<TcpStream>, buf: &[u8]) -> io::Result<usize> {
        stream.get_ref().write(buf)
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
