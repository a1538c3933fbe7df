//! What tokio gives the shared driver loop (`redlock_driver::IoLoop`): its sockets (TCP or
//! unix; TLS runs over either in the shared loop) and its timer, which counts in tokio's clock (`Start::now`). The loop runs as one task on the runtime that built the `Redlock`.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use redlock_core::ConnectionError;
use redlock_driver::{Connecting, Dial, Runtime};
use tokio::io::{AsyncRead, ReadBuf};
use tokio::net::{TcpStream, UnixStream};
use tokio::time::Sleep;

use crate::Tokio;

/// A node's socket: TCP or a unix socket.
#[derive(Debug)]
pub enum Stream {
    /// `redis://` and `rediss://` nodes.
    Tcp(TcpStream),
    /// `unix://` nodes.
    Unix(UnixStream),
}

impl Runtime for Tokio {
    type Stream = Stream;
    type Timer = Pin<Box<Sleep>>;

    fn connect(dial: Dial, timeout: Duration) -> Connecting<Stream> {
        Box::pin(async move {
            let open = async {
                match dial {
                    Dial::Tcp { host, port } => open(host, port).await.map(Stream::Tcp),
                    Dial::Unix(path) => UnixStream::connect(path)
                        .await
                        .map(Stream::Unix)
                        .map_err(|e| ConnectionError::from_io(&e)),
                }
            };
            tokio::time::timeout(timeout, open)
                .await
                .map_err(|_| ConnectionError::ConnectTimeout(timeout))?
        })
    }

    fn poll_readable(stream: &Stream, cx: &mut Context<'_>) -> Poll<()> {
        match stream {
            Stream::Tcp(s) => s.poll_read_ready(cx).map(drop),
            Stream::Unix(s) => s.poll_read_ready(cx).map(drop),
        }
    }

    fn poll_writable(stream: &Stream, cx: &mut Context<'_>) -> Poll<()> {
        match stream {
            Stream::Tcp(s) => s.poll_write_ready(cx).map(drop),
            Stream::Unix(s) => s.poll_write_ready(cx).map(drop),
        }
    }

    fn try_read(stream: &Stream, buf: &mut [u8]) -> io::Result<usize> {
        match stream {
            Stream::Tcp(s) => s.try_read(buf),
            Stream::Unix(s) => s.try_read(buf),
        }
    }

    /// tokio's own `poll_read`, which (on epoll and kqueue) clears the stream's readiness
    /// after a read that did not fill `buf`: the socket is drained, so the loop's next
    /// `poll_readable` waits at once instead of costing a `recvfrom` that answers
    /// `WouldBlock` (about one per reply in a serial lock cycle). Polled with a no-op waker:
    /// the loop's `poll_readable` registers its own before the task sleeps.
    fn read_now(stream: &mut Stream, buf: &mut [u8]) -> io::Result<usize> {
        let mut cx = Context::from_waker(Waker::noop());
        let mut read = ReadBuf::new(buf);
        let polled = match stream {
            Stream::Tcp(s) => Pin::new(s).poll_read(&mut cx, &mut read),
            Stream::Unix(s) => Pin::new(s).poll_read(&mut cx, &mut read),
        };
        match polled {
            Poll::Ready(Ok(())) => Ok(read.filled().len()),
            Poll::Ready(Err(e)) => Err(e),
            Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
        }
    }

    fn try_write(stream: &Stream, buf: &[u8]) -> io::Result<usize> {
        match stream {
            Stream::Tcp(s) => s.try_write(buf),
            Stream::Unix(s) => s.try_write(buf),
        }
    }

    fn timer() -> Self::Timer {
        Box::pin(tokio::time::sleep(Duration::ZERO))
    }

    fn set_timer(timer: &mut Self::Timer, at: Instant) {
        timer.as_mut().reset(tokio::time::Instant::from_std(at));
    }

    fn poll_timer(timer: &mut Self::Timer, cx: &mut Context<'_>) -> Poll<()> {
        timer.as_mut().poll(cx)
    }

    async fn yield_now() {
        tokio::task::yield_now().await;
    }
}

/// Resolves `host` (tokio's resolver, off the runtime's threads) and connects to the first of
/// its addresses that accepts; a failure says which step failed.
async fn open(host: String, port: u16) -> Result<TcpStream, ConnectionError> {
    let addrs = tokio::net::lookup_host((host.as_str(), port))
        .await
        .map_err(|e| ConnectionError::Resolve(e.to_string()))?;
    let mut last = ConnectionError::Resolve("the host has no address".into());
    for addr in addrs {
        match TcpStream::connect(addr).await {
            Ok(stream) => {
                // Best effort: a lock round trip is a few bytes each way.
                let _ = stream.set_nodelay(true);
                return Ok(stream);
            }
            Err(e) => last = ConnectionError::from_io(&e),
        }
    }
    Err(last)
}
