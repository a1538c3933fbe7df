//! Waiting for a future on the calling thread: poll it, park until its waker unparks the
//! thread, repeat. The futures here are only channel receives answered by the driver
//! thread, so there is nothing else to run meanwhile.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};
use std::time::Instant;

use redlock_driver::Start;

use crate::MioThread;

/// Polls `fut` until it is ready, parking the thread in between.
pub(crate) fn block_on<F: Future>(fut: F) -> F::Output {
    match block_until(fut, None) {
        Some(output) => output,
        None => unreachable!("a wait without a deadline ends only when the future is ready"),
    }
}

/// Polls `fut` until it is ready or `deadline` (by the driver's clock, `MioThread::now`)
/// passes (`None`: no deadline).
pub(crate) fn block_until<F: Future>(fut: F, deadline: Option<Instant>) -> Option<F::Output> {
    let mut fut = pin!(fut);
    let waker = Waker::from(Arc::new(Unpark(thread::current())));
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(output) = fut.as_mut().poll(&mut cx) {
            return Some(output);
        }
        // A wake between the poll and the park is kept as the thread's token, and any
        // early return from `park` is followed by another poll: no wake-up is lost.
        match deadline {
            None => thread::park(),
            Some(at) => match at.checked_duration_since(MioThread::now()) {
                Some(left) if !left.is_zero() => thread::park_timeout(left),
                _ => return None,
            },
        }
    }
}

/// A waker that unparks the thread waiting in [`block_until`].
struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}
