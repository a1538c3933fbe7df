//! The handle, guards and [`Waiters`] against a scripted driver loop over one node: the test
//! plays the node's replies and polls the user's futures by hand, so every request, event and
//! cancellation is seen in order. No server, no runtime; real clock (validity is measured).

use std::future::Future;
use std::pin::{Pin, pin};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use redlock_core::{
    AutoExtend, Client, ConfigBuilder, Input, LostReason, NodeId, Output, ReleaseOutcome,
};
use redlock_driver::WithLockError;
use redlock_driver::{Cmd, DriverParts, DriverRng, Handle, LockError, LockGuard, Setup, Waiters};
use tokio::sync::mpsc;

/// The driver side: a one-node loop whose socket is this test.
struct Scripted {
    client: Client<DriverRng>,
    commands: mpsc::UnboundedReceiver<Cmd>,
    waiters: Waiters,
    /// Bytes written to the node since the last `take_sent`.
    sent: Vec<u8>,
}

impl Scripted {
    /// A handle and its loop, connected to the node, scripts loaded.
    fn start() -> (Handle, Self) {
        Self::start_with(|c| c)
    }

    /// [`start`](Self::start) with `configure` applied to the core configuration.
    fn start_with(configure: impl FnOnce(ConfigBuilder) -> ConfigBuilder) -> (Handle, Self) {
        let (handle, parts) = Setup::from_urls(["127.0.0.1:1"])
            .unwrap()
            // The replies are scripted: no clock-rate samples.
            .config(|c| configure(c.clock_check(None)))
            .build(Instant::now)
            .unwrap();
        let DriverParts {
            client, commands, ..
        } = parts;
        let mut l = Self {
            client,
            commands,
            waiters: Waiters::new(),
            sent: Vec::new(),
        };
        l.drain();
        let conn = l.client.connection(NodeId::new(0)).expect("connecting");
        l.feed(Input::Connected {
            now: Instant::now(),
            conn,
        });
        // HELLO as a Redis 7 (scripts), the TIME after it, INFO and CONFIG GET (a node up
        // for a day: no quarantine), then the preloads (release, extend, and the waiters'
        // queue's three, on by default).
        let mut loaded = REDIS_7_HELLO.to_vec();
        loaded.extend_from_slice(b"*2\r\n$10\r\n1795190400\r\n$1\r\n0\r\n");
        loaded.extend_from_slice(b"$37\r\nrun_id:abc\r\nuptime_in_seconds:86400\r\n\r\n*0\r\n");
        let scripts = [
            &redlock_core::RELEASE_SCRIPT,
            &redlock_core::EXTEND_SCRIPT,
            &redlock_core::QUEUE_ACQUIRE_SCRIPT,
            &redlock_core::QUEUE_LEAVE_SCRIPT,
            &redlock_core::QUEUE_RELEASE_SCRIPT,
        ];
        for script in scripts {
            loaded.extend_from_slice(format!("$40\r\n{}\r\n", script.sha1).as_bytes());
        }
        l.reply(&loaded);
        l.take_sent();
        (handle, l)
    }

    /// Drains the core: bytes are kept, events go to the waiters.
    fn drain(&mut self) {
        loop {
            match self.client.poll_output() {
                Output::Transmit(t) => self.sent.extend_from_slice(&t.bytes),
                Output::Event(event) => self.waiters.dispatch(event),
                Output::Timeout(_) | Output::Idle => return,
                Output::Connect(_) | Output::Disconnect(_) => {}
            }
        }
    }

    fn feed(&mut self, input: Input<'_>) {
        self.drain();
        self.client.handle_input(input).expect("drained before");
        self.drain();
    }

    /// Feeds every queued request; returns how many there were.
    fn commands(&mut self) -> usize {
        let mut n = 0;
        while let Ok(cmd) = self.commands.try_recv() {
            self.drain();
            self.waiters.command(Instant::now(), &mut self.client, cmd);
            n += 1;
        }
        self.drain();
        n
    }

    fn reply(&mut self, bytes: &[u8]) {
        let now = Instant::now();
        let conn = self.client.connection(NodeId::new(0)).expect("up");
        self.feed(Input::Received { now, conn, bytes });
    }

    /// Locks `resource` through `handle`, the node saying `+OK`.
    fn acquire(&mut self, handle: &Handle, resource: &str) -> LockGuard {
        let mut lock = pin!(handle.lock(resource.to_owned()));
        assert!(poll(lock.as_mut()).is_pending());
        assert_eq!(self.commands(), 1);
        assert!(self.take_sent().contains("SET"));
        self.reply(b"+OK\r\n");
        match poll(lock.as_mut()) {
            Poll::Ready(Ok(guard)) => guard,
            other => panic!("not acquired: {other:?}"),
        }
    }

    fn take_sent(&mut self) -> String {
        String::from_utf8(std::mem::take(&mut self.sent)).expect("RESP is text here")
    }
}

fn poll<F: Future + ?Sized>(f: Pin<&mut F>) -> Poll<F::Output> {
    f.poll(&mut Context::from_waker(Waker::noop()))
}

#[test]
fn lock_extend_release() {
    let (handle, mut l) = Scripted::start();
    let guard = l.acquire(&handle, "r");
    assert!(guard.validity() > Duration::ZERO);
    assert_eq!(guard.lost_reason(), None);

    let before = guard.deadline();
    assert_eq!(l.waiters.callers_waiting(), 0, "the lock call was answered");
    let mut extend = Box::pin(guard.extend());
    assert!(poll(extend.as_mut()).is_pending());
    assert_eq!(l.commands(), 1);
    assert_eq!(l.waiters.callers_waiting(), 1);
    assert!(l.take_sent().contains("EVALSHA"));
    l.reply(b":1\r\n");
    assert_eq!(l.waiters.callers_waiting(), 0);
    let Poll::Ready(Ok(deadline)) = poll(extend.as_mut()) else {
        panic!("not extended")
    };
    drop(extend);
    assert!(deadline >= before);
    assert_eq!(
        guard.deadline(),
        deadline,
        "the guard sees the new deadline"
    );

    let mut release = pin!(guard.release());
    assert!(poll(release.as_mut()).is_pending());
    assert_eq!(l.commands(), 1);
    assert_eq!(l.waiters.callers_waiting(), 1);
    l.reply(b":1\r\n");
    let report = poll(release.as_mut());
    assert!(matches!(report, Poll::Ready(Ok(r)) if r == [ReleaseOutcome::Released]));
    assert_eq!(l.client.active_ops(), 0);
    assert_eq!(l.waiters.callers_waiting(), 0);
}

/// The loop batches only while several callers wait (`IoLoop`): each call waiting for its
/// answer counts once, until the answer is sent or can no longer be.
#[test]
fn callers_waiting_counts_the_answers_owed() {
    let (handle, mut l) = Scripted::start();
    let mut a = Box::pin(handle.lock("a"));
    let mut b = Box::pin(handle.lock("b"));
    assert!(poll(a.as_mut()).is_pending() && poll(b.as_mut()).is_pending());
    assert_eq!(l.commands(), 2);
    assert_eq!(l.waiters.callers_waiting(), 2);
    l.reply(b"+OK\r\n");
    assert_eq!(l.waiters.callers_waiting(), 1, "a's guard is ready");
    drop(b);
    assert_eq!(l.commands(), 1, "b's cancellation");
    l.reply(b"+OK\r\n");
    assert_eq!(
        l.waiters.callers_waiting(),
        0,
        "nobody waits for b any more"
    );
    let Poll::Ready(Ok(guard)) = poll(a.as_mut()) else {
        panic!("a not acquired")
    };
    drop(guard);
    l.commands();
    assert_eq!(
        l.waiters.callers_waiting(),
        0,
        "a dropped guard waits for nothing"
    );
}

/// A released lock is never reported lost: `lost()` stays pending after the release, and
/// `lost_or_released()` says `None`. A lock whose loop is gone is reported lost.
#[test]
fn release_is_not_a_loss_but_a_vanished_loop_is() {
    let (handle, mut l) = Scripted::start();
    let guard = l.acquire(&handle, "r");
    let view = guard.lock_ref();
    let mut release = pin!(guard.release());
    assert!(poll(release.as_mut()).is_pending());
    l.commands();
    l.reply(b":1\r\n");
    assert!(poll(release.as_mut()).is_ready());
    assert!(
        poll(pin!(view.lost())).is_pending(),
        "a release reported as a loss"
    );
    assert_eq!(poll(pin!(view.lost_or_released())), Poll::Ready(None));

    let guard = l.acquire(&handle, "s");
    assert!(poll(pin!(guard.lost())).is_pending());
    drop(l);
    assert!(
        poll(pin!(guard.lost())).is_ready(),
        "nothing protects the lock any more"
    );
    assert!(matches!(
        poll(pin!(guard.lost_or_released())),
        Poll::Ready(Some(_))
    ));
}

/// A `lock()` future dropped while its SET is in flight cancels the attempt, which then
/// releases what it set.
#[test]
fn dropped_lock_future_cancels() {
    let (handle, mut l) = Scripted::start();
    let mut lock = Box::pin(handle.lock("r"));
    assert!(poll(lock.as_mut()).is_pending());
    assert_eq!(l.commands(), 1);
    l.take_sent();
    drop(lock);
    assert_eq!(l.commands(), 1, "the cancellation");
    l.reply(b"+OK\r\n");
    assert!(l.take_sent().contains("EVALSHA"), "the SET is undone");
    l.reply(b":1\r\n");
    assert_eq!(l.client.active_ops(), 0);
}

/// A `lock()` future dropped after the loop read its request but before the lock was handed
/// over leaves an orphan, which the loop releases before it waits again.
#[test]
fn orphaned_lock_is_released() {
    let (handle, mut l) = Scripted::start();
    let mut lock = Box::pin(handle.lock("r"));
    assert!(poll(lock.as_mut()).is_pending());
    assert_eq!(l.commands(), 1);
    l.take_sent();
    drop(lock);
    // Acquired before the loop reads the cancellation: nobody receives the guard.
    l.reply(b"+OK\r\n");
    assert!(l.waiters.release_orphan(Instant::now(), &mut l.client));
    assert!(!l.waiters.release_orphan(Instant::now(), &mut l.client));
    l.drain();
    assert!(l.take_sent().contains("EVALSHA"));
    assert_eq!(l.commands(), 1, "the late cancellation changes nothing");
    assert!(l.take_sent().is_empty());
    l.reply(b":1\r\n");
    assert_eq!(l.client.active_ops(), 0);
}

/// A dropped guard releases in the background; once every handle and guard is gone the
/// command channel closes, and the loop may end.
#[test]
fn dropped_guard_releases_then_the_channel_closes() {
    let (handle, mut l) = Scripted::start();
    let guard = l.acquire(&handle, "r");
    let view = guard.lock_ref();
    drop(handle);
    l.take_sent();
    drop(guard);
    assert_eq!(l.commands(), 1);
    assert!(l.take_sent().contains("EVALSHA"));
    assert!(l.commands.try_recv().is_err());
    assert!(!l.commands.is_closed(), "a LockRef still holds a sender");
    drop(view);
    assert!(l.commands.is_closed());
    l.reply(b":1\r\n");
    assert_eq!(l.client.active_ops(), 0);
}

#[test]
fn with_lock_runs_the_closure_then_releases() {
    let (handle, mut l) = Scripted::start();
    let mut run = pin!(handle.with_lock("r", |lock| async move {
        assert!(lock.validity() > Duration::ZERO);
        Ok::<_, std::io::Error>(7)
    }));
    assert!(poll(run.as_mut()).is_pending());
    assert_eq!(l.commands(), 1);
    l.reply(b"+OK\r\n");
    assert!(poll(run.as_mut()).is_pending(), "releasing");
    assert_eq!(l.commands(), 1);
    l.reply(b":1\r\n");
    assert!(matches!(poll(run.as_mut()), Poll::Ready(Ok(7))));
}

/// A review's finding: a closure that returns at or after the deadline makes `with_lock` report the
/// lock lost, although the loop has not handled its deadline timer (this loop never feeds a
/// `Timeout`, so only the handle's own check can tell).
#[test]
fn with_lock_returning_past_the_deadline_is_lost() {
    let no_renewal = AutoExtend {
        max_renewals: Some(0),
        max_hold: None,
        ..AutoExtend::default()
    };
    // A short ttl keeps the wait short; the attempt timeout is generous so that a slow
    // machine does not fail the acquisition itself.
    let (handle, mut l) = Scripted::start_with(|c| {
        c.ttl(Duration::from_millis(200))
            .attempt_timeout(Duration::from_millis(100))
            .auto_extend(Some(no_renewal))
    });
    let mut run = pin!(handle.with_lock("r", |lock| async move {
        let deadline = lock.deadline();
        while Instant::now() < deadline {
            std::thread::sleep(deadline.saturating_duration_since(Instant::now()));
        }
        Ok::<_, std::io::Error>(7)
    }));
    assert!(poll(run.as_mut()).is_pending());
    assert_eq!(l.commands(), 1);
    l.reply(b"+OK\r\n");
    // The closure ran and returned past the deadline; the release is on its way.
    assert!(poll(run.as_mut()).is_pending(), "releasing");
    assert_eq!(l.commands(), 1);
    l.reply(b":1\r\n");
    let result = poll(run.as_mut());
    assert!(
        matches!(
            result,
            Poll::Ready(Err(WithLockError::Lock(LockError::Lost(
                LostReason::DeadlinePassed
            ))))
        ),
        "{result:?}"
    );
    assert_eq!(l.client.active_ops(), 0);
}

/// A review's finding: an extension overtaken by a release is answered "not held", not `Shutdown`
/// (the release round replaces the extension in the core, whose answer never comes), and the
/// release succeeds.
#[test]
fn extension_overtaken_by_a_release_is_not_held() {
    let (handle, mut l) = Scripted::start();
    let guard = l.acquire(&handle, "r");
    let view = guard.lock_ref();
    let mut extend = pin!(view.extend());
    let mut release = pin!(guard.release());
    assert!(poll(extend.as_mut()).is_pending());
    assert!(poll(release.as_mut()).is_pending());
    assert_eq!(l.commands(), 2, "the extension, then the release");
    let extended = poll(extend.as_mut());
    assert!(
        matches!(extended, Poll::Ready(Err(LockError::NotHeld))),
        "{extended:?}"
    );
    // The node answers the extension (ignored: its round is over), then the release.
    let sent = l.take_sent();
    assert_eq!(sent.matches("EVALSHA").count(), 2, "{sent}");
    l.reply(b":1\r\n:1\r\n");
    let released = poll(release.as_mut());
    assert!(
        matches!(&released, Poll::Ready(Ok(r)) if r == &[ReleaseOutcome::Released]),
        "{released:?}"
    );
    assert_eq!(l.client.active_ops(), 0);
    let mut late = pin!(view.extend());
    assert!(poll(late.as_mut()).is_pending());
    assert_eq!(l.commands(), 1);
    assert!(matches!(
        poll(late.as_mut()),
        Poll::Ready(Err(LockError::NotHeld))
    ));
}

#[test]
fn without_a_loop_requests_fail_with_shutdown() {
    let (handle, parts) = Setup::from_urls(["127.0.0.1:1"])
        .unwrap()
        .build(Instant::now)
        .unwrap();
    drop(parts);
    let result = poll(pin!(handle.lock("r")));
    assert!(matches!(result, Poll::Ready(Err(LockError::Shutdown))));
}

#[test]
fn setup_names_bad_urls_and_configs() {
    let err = Setup::from_urls(["nope"]).unwrap_err();
    assert!(matches!(err, LockError::Address(_)), "{err}");
    let err = Setup::from_urls(["127.0.0.1:1"])
        .unwrap()
        .config(|c| c.quorum(2))
        .build(Instant::now)
        .unwrap_err();
    assert!(err.to_string().contains("quorum"), "{err}");
}

#[test]
fn handles_are_clone_send_sync() {
    fn check<T: Clone + Send + Sync + 'static>() {}
    fn send<T: Send + 'static>() {}
    check::<Handle>();
    check::<redlock_driver::LockRef>();
    send::<LockGuard>();
    send::<DriverParts>();
}

/// A Redis 7 server's `HELLO` reply (RESP2), trimmed to the fields the client reads.
const REDIS_7_HELLO: &[u8] =
    b"*4\r\n$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n$6\r\n7.0.15\r\n";

/// Each kind's call goes out as its script (docs/kinds.md, "Commands per kind and server"),
/// and its guard says what it holds: a multi-lock's set sorted and deduplicated, named by its
/// first resource; a reader, a writer, a semaphore with its permits. A single writer's
/// attempt asks no node to keep readers out (patience 0). A wrong call is refused at once.
#[test]
fn each_kind_goes_out_as_its_script_and_its_guard_says_what_it_holds() {
    use redlock_core::{
        LockKind, MULTI_ACQUIRE_SCRIPT, READ_ACQUIRE_SCRIPT, Resource, SEM_ACQUIRE_SCRIPT,
        UsageError, WRITE_ACQUIRE_SCRIPT,
    };

    let (handle, mut l) = Scripted::start();
    let mut take = |lock: Pin<&mut dyn Future<Output = Result<LockGuard, LockError>>>,
                    script: &str| {
        let mut lock = lock;
        assert!(poll(lock.as_mut()).is_pending());
        assert_eq!(l.commands(), 1);
        let sent = l.take_sent();
        assert!(sent.contains(script), "{sent}");
        l.reply(b":1\r\n");
        match poll(lock.as_mut()) {
            Poll::Ready(Ok(guard)) => (guard, sent),
            other => panic!("not acquired: {other:?}"),
        }
    };
    let (multi, _) = take(
        pin!(handle.lock_all(["b", "a", "b"])),
        MULTI_ACQUIRE_SCRIPT.sha1,
    );
    assert_eq!(
        multi.resources(),
        [Resource::from("a"), Resource::from("b")]
    );
    assert_eq!(
        (multi.resource(), multi.kind()),
        (&Resource::from("a"), LockKind::Mutex)
    );
    let (reader, _) = take(pin!(handle.read_lock("doc")), READ_ACQUIRE_SCRIPT.sha1);
    assert_eq!(reader.kind(), LockKind::Read);
    assert_eq!(reader.resources(), [Resource::from("doc")]);
    let (writer, sent) = take(
        pin!(handle.try_write_lock("page")),
        WRITE_ACQUIRE_SCRIPT.sha1,
    );
    assert_eq!(writer.kind(), LockKind::Write);
    assert!(
        sent.ends_with("$1\r\n0\r\n"),
        "a single attempt's patience: {sent}"
    );
    let (permit, _) = take(pin!(handle.semaphore("pool", 2)), SEM_ACQUIRE_SCRIPT.sha1);
    assert_eq!(permit.kind(), LockKind::semaphore(2));

    // Refused by the core's rule (`resource_set`) before anything goes to the loop.
    let mut empty = pin!(handle.lock_all(Vec::<&str>::new()));
    let refused = poll(empty.as_mut());
    assert!(
        matches!(
            refused,
            Poll::Ready(Err(LockError::Usage(UsageError::NoResources)))
        ),
        "{refused:?}"
    );
    let mut zero = pin!(handle.try_semaphore("pool", 0));
    assert!(poll(zero.as_mut()).is_pending());
    l.commands();
    let refused = poll(zero.as_mut());
    assert!(
        matches!(&refused, Poll::Ready(Err(LockError::Config(e))) if e.field() == "kind"),
        "{refused:?}"
    );
}
