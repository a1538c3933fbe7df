//! A TLS connection's handshake, run by the async loop as part of connecting: the loop tells
//! the core `Connected` only once it is done, so the core's session handshake never waits
//! inside rustls, and a node that never completes it (a plain node given as `rediss://`,
//! which waits for a line of text) fails within the connect timeout with a reason that says
//! so. The blocking driver runs the same steps ([`handshake_step`]) in its own loop.

use std::future::poll_fn;
use std::io;
use std::task::Poll;
use std::time::{Duration, Instant};

use bytes::{Buf, BytesMut};
use redlock_core::ConnectionError;

use crate::endpoint::Endpoint;
use crate::runtime::Runtime;
use crate::wire::Wire;

/// Opens `endpoint`'s wire over `stream` and, for TLS, runs the handshake until it is done
/// (its last flight written), failing at `deadline` (`None`: never) with
/// [`Wire::handshake_timed_out`] of `timeout`.
pub(crate) async fn open_wire<R: Runtime>(
    stream: R::Stream,
    endpoint: &Endpoint,
    deadline: Option<Instant>,
    timeout: Duration,
) -> Result<(R::Stream, Wire), ConnectionError> {
    let mut out = BytesMut::new();
    let wire = endpoint.wire(&mut out)?;
    if !wire.is_tls() {
        return Ok((stream, wire));
    }
    let mut timer = R::timer();
    if let Some(at) = deadline {
        R::set_timer(&mut timer, at);
    }
    let mut buf = vec![0; HANDSHAKE_READ];
    // The closure owns the stream (the future must be `Send`, the stream need not be
    // `Sync`) and hands it back once done.
    let mut state = Some((stream, wire));
    poll_fn(move |cx| {
        let Some((stream, wire)) = &mut state else {
            return Poll::Pending; // polled after it finished: never by `await`
        };
        for _ in 0..STEPS_PER_POLL {
            let read = |b: &mut [u8]| R::try_read(stream, b);
            let write = |b: &[u8]| R::try_write(stream, b);
            match handshake_step(read, write, wire, &mut out, &mut buf) {
                Err(e) => return Poll::Ready(Err(e)),
                Ok(HandshakeStep::Done) => {
                    return state.take().map_or(Poll::Pending, |s| Poll::Ready(Ok(s)));
                }
                Ok(HandshakeStep::Progress) => continue,
                Ok(HandshakeStep::Wait) => {}
            }
            let writable = !out.is_empty() && R::poll_writable(stream, cx).is_ready();
            if writable || R::poll_readable(stream, cx).is_ready() {
                continue;
            }
            if deadline.is_some() && R::poll_timer(&mut timer, cx).is_ready() {
                return Poll::Ready(Err(Wire::handshake_timed_out(timeout)));
            }
            return Poll::Pending;
        }
        // Readiness that keeps coming without progress: let the runtime run others first.
        cx.waker().wake_by_ref();
        Poll::Pending
    })
    .await
}

/// What one [`handshake_step`] achieved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandshakeStep {
    /// Bytes moved; step again at once.
    Progress,
    /// Nothing to do until the socket is ready (to read, or to write if bytes are queued).
    Wait,
    /// The handshake is done and its bytes are written: tell the core `Connected`.
    Done,
}

/// One step of a TLS handshake over a non-blocking socket, for any driver: writes what is
/// queued in `out` with `write`, then reads once with `read` into `buf` and gives the bytes
/// to `wire`. A failure is the reason the connection attempt failed.
pub fn handshake_step(
    mut read: impl FnMut(&mut [u8]) -> io::Result<usize>,
    mut write: impl FnMut(&[u8]) -> io::Result<usize>,
    wire: &mut Wire,
    out: &mut BytesMut,
    buf: &mut [u8],
) -> Result<HandshakeStep, ConnectionError> {
    while !out.is_empty() {
        match write(out) {
            Ok(0) => return Err(ConnectionError::Closed),
            Ok(n) => out.advance(n),
            Err(e) if is_retry(&e) => break,
            Err(e) => return Err(ConnectionError::from_io(&e)),
        }
    }
    if !wire.is_handshaking() && out.is_empty() {
        return Ok(HandshakeStep::Done);
    }
    match read(buf) {
        Ok(0) => Err(Wire::closed_in_handshake()),
        // A node sends nothing unasked, so no plaintext comes before the handshake ends.
        Ok(n) => wire
            .receive(&buf[..n], out)
            .map(|_| HandshakeStep::Progress),
        Err(e) if is_retry(&e) => Ok(HandshakeStep::Wait),
        Err(e) => Err(ConnectionError::from_io(&e)),
    }
}

fn is_retry(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
    )
}

/// A handshake's flights are a few KiB.
const HANDSHAKE_READ: usize = 16 * 1024;
/// Steps tried in one poll before yielding to the runtime.
const STEPS_PER_POLL: usize = 64;
