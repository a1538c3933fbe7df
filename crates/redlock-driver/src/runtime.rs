//! What an async runtime gives the shared loop ([`Runtime`]): non-blocking sockets with
//! readiness, a timer, a connect, a yield. `redlock-tokio` and `redlock-async-std` each
//! implement it; [`IoLoop`](crate::IoLoop) and the TLS handshake run over it.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use redlock_core::ConnectionError;

use crate::endpoint::Dial;

/// A connection attempt in progress; a failure says why (refused, timed out, not resolved).
pub type Connecting<S> = Pin<Box<dyn Future<Output = Result<S, ConnectionError>> + Send>>;

/// What an async runtime gives [`IoLoop`](crate::IoLoop). Every method is a thin call into the runtime.
///
/// Its timer MUST count in the clock the loop is built with
/// ([`DriverParts::clock`](crate::DriverParts::clock), the driver's
/// [`Start::now`](crate::Start::now)): the loop sets it to the core's deadlines.
pub trait Runtime: 'static {
    /// A connected non-blocking stream: TCP, or a unix socket.
    type Stream: Send;
    /// A timer that can be set to an instant again and again.
    type Timer: Send;

    /// Opens what `dial` names: a TCP connection to `host:port` (resolving the name without
    /// blocking the loop; Nagle's algorithm off, on a best-effort basis) or a unix socket.
    /// Fails with [`ConnectionError::ConnectTimeout`] after `timeout`,
    /// [`ConnectionError::Resolve`] if the name does not resolve, and
    /// [`ConnectionError::from_io`] of the last address's error otherwise. TLS is not the
    /// runtime's concern: the loop runs it over the stream ([`Wire`](crate::Wire)).
    fn connect(dial: Dial, timeout: Duration) -> Connecting<Self::Stream>;
    /// Ready when the stream may have bytes, an end of stream or an error to read.
    fn poll_readable(stream: &Self::Stream, cx: &mut Context<'_>) -> Poll<()>;
    /// Ready when the stream may take bytes.
    fn poll_writable(stream: &Self::Stream, cx: &mut Context<'_>) -> Poll<()>;
    /// One non-blocking read; `WouldBlock` when there is nothing.
    fn try_read(stream: &Self::Stream, buf: &mut [u8]) -> io::Result<usize>;
    /// The loop's read after a readiness wake: [`Runtime::try_read`] unless the runtime can
    /// do better, e.g. take a read that did not fill `buf` as proof that the socket is
    /// drained, so the next wait needs no `WouldBlock` read to learn it. Any waker it
    /// registers is replaced, as the loop polls every stream's readiness before it sleeps.
    fn read_now(stream: &mut Self::Stream, buf: &mut [u8]) -> io::Result<usize> {
        Self::try_read(stream, buf)
    }
    /// One non-blocking write; `WouldBlock` when the socket takes nothing now.
    fn try_write(stream: &Self::Stream, buf: &[u8]) -> io::Result<usize>;
    /// A timer that is not set.
    fn timer() -> Self::Timer;
    /// Sets the timer to fire at `at`.
    fn set_timer(timer: &mut Self::Timer, at: Instant);
    /// Ready once the instant the timer was set to has passed.
    fn poll_timer(timer: &mut Self::Timer, cx: &mut Context<'_>) -> Poll<()>;
    /// Lets the runtime's other tasks run once.
    fn yield_now() -> impl Future<Output = ()> + Send;
}
