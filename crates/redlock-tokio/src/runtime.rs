//! What tokio gives the shared driver loop (`redlock_driver::IoLoop`): its sockets and its
//! timer, which counts in tokio's clock (`Start::now`). The loop runs as one task on the runtime that built the `Redlock`.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use redlock_core::ConnectionError;
use redlock_driver::{Connecting, Runtime};
use tokio::io::{AsyncRead, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Sleep;

use crate::Tokio;

impl Runtime for Tokio {
    type Stream = TcpStream;
    type Timer = Pin<Box<Sleep>>;

    fn connect(host: String, port: u16, timeout: Duration) -> Connecting<TcpStream> {
        Box::pin(async move {
            let stream = tokio::time::timeout(timeout, open(host, port))
                .await
                .map_err(|_| ConnectionError::ConnectTimeout(timeout))??;
            // Best effort: a lock round trip is a few bytes each way.
            let _ = stream.set_nodelay(true);
            Ok(stream)
        })
    }

    fn poll_readable(stream: &TcpStream, cx: &mut Context<'_>) -> Poll<()> {
        stream.poll_read_ready(cx).map(drop)
    }

    fn poll_writable(stream: &TcpStream, cx: &mut Context<'_>) -> Poll<()> {
        stream.poll_write_ready(cx).map(drop)
    }

    fn try_read(stream: &TcpStream, buf: &mut [u8]) -> io::Result<usize> {
        stream.try_read(buf)
    }

    /// tokio's own `poll_read`, which (on epoll and kqueue) clears the stream's readiness
    /// after a read that did not fill `buf`: the socket is drained, so the loop's next
    /// `poll_readable` waits at once instead of costing a `recvfrom` that answers
    /// `WouldBlock` (about one per reply in a serial lock cycle). Polled with a no-op waker:
    /// the loop's `poll_readable` registers its own before the task sleeps.
    fn read_now(stream: &mut TcpStream, buf: &mut [u8]) -> io::Result<usize> {
        let mut cx = Context::from_waker(Waker::noop());
        let mut read = ReadBuf::new(buf);
        match Pin::new(stream).poll_read(&mut cx, &mut read) {
            Poll::Ready(Ok(())) => Ok(read.filled().len()),
            Poll::Ready(Err(e)) => Err(e),
            Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
        }
    }

    fn try_write(stream: &TcpStream, buf: &[u8]) -> io::Result<usize> {
        stream.try_write(buf)
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
            Ok(stream) => return Ok(stream),
            Err(e) => last = ConnectionError::from_io(&e),
        }
    }
    Err(last)
}
