//! What tokio gives the shared driver loop (`redlock_driver::IoLoop`): its sockets and its
//! timer, which counts in tokio's clock (`Start::now`). The loop runs as one task on the runtime that built the `Redlock`.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use redlock_driver::{Connecting, Runtime};
use tokio::net::TcpStream;
use tokio::time::Sleep;

use crate::Tokio;

impl Runtime for Tokio {
    type Stream = TcpStream;
    type Timer = Pin<Box<Sleep>>;

    fn connect(host: String, port: u16, timeout: Duration) -> Connecting<TcpStream> {
        Box::pin(async move {
            let connect = TcpStream::connect((host.as_str(), port));
            let stream = tokio::time::timeout(timeout, connect)
                .await
                .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "connect timed out"))??;
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
