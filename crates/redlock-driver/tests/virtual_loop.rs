//! The shared async loop ([`IoLoop`]) on a virtual runtime: time moves only when the test
//! advances it, sockets are in-memory pipes whose far end is the test, and the loop is polled
//! by hand. So every connect, byte, timer and answer is seen at the exact virtual instant it
//! happens: a lock, a round that times out, a dropped connection and its reconnection, a
//! release. No real socket, no sleep, no thread.

use std::cell::RefCell;
use std::future::{Future, ready};
use std::io;
use std::pin::{Pin, pin};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use redlock_core::{
    AcquireFailure, ConfigBuilder, ConnectionError, EXTEND_SCRIPT, NodeFault, NodeId,
    QUEUE_ACQUIRE_SCRIPT, QUEUE_LEAVE_SCRIPT, QUEUE_RELEASE_SCRIPT, RELEASE_SCRIPT, ReleaseOutcome,
    RetryPolicy, Script,
};

/// The scripts a connection loads first: release, extend, and the waiters' queue's three (on
/// by default).
const PRELOADS: [&Script; 5] = [
    &RELEASE_SCRIPT,
    &EXTEND_SCRIPT,
    &QUEUE_ACQUIRE_SCRIPT,
    &QUEUE_LEAVE_SCRIPT,
    &QUEUE_RELEASE_SCRIPT,
];
use redlock_driver::{Connecting, Dial, Handle, IoLoop, LockError, LockGuard, Runtime, Setup};

/// The virtual runtime: its state is the test thread's [`World`].
enum Virtual {}

/// One connection: what the loop wrote, what the node sent back, whether the node hung up.
#[derive(Default)]
struct Pipe {
    written: Vec<u8>,
    replies: Vec<u8>,
    hung_up: bool,
}

/// The loop's end of a [`Pipe`].
struct Stream(Arc<Mutex<Pipe>>);

/// A timer on virtual time.
struct Timer(Option<Instant>);

/// How a node takes a connection attempt.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Accept {
    Yes,
    /// Never answers: the attempt times out after the loop's connect timeout.
    Never,
}

/// Virtual time, the nodes' connections, and a log of what the loop asked the runtime for.
struct World {
    now: Instant,
    accept: Vec<Accept>,
    /// Each node's current connection, the test's end.
    conns: Vec<Option<Arc<Mutex<Pipe>>>>,
    /// Every connection attempt: node index and virtual instant.
    connects: Vec<(usize, Instant)>,
    /// The instant the loop last set its timer to.
    armed: Option<Instant>,
}

thread_local! {
    /// Each test runs on its own thread, so each has its own world.
    static WORLD: RefCell<Option<World>> = const { RefCell::new(None) };
}

fn world<T>(f: impl FnOnce(&mut World) -> T) -> T {
    WORLD.with(|w| f(w.borrow_mut().as_mut().expect("the test made a world")))
}

/// The loop's clock, and the handle's: virtual time.
fn virtual_now() -> Instant {
    world(|w| w.now)
}

fn lock_pipe(pipe: &Mutex<Pipe>) -> MutexGuard<'_, Pipe> {
    // A test that panicked while holding it has failed already.
    pipe.lock().unwrap_or_else(|e| e.into_inner())
}

impl Runtime for Virtual {
    type Stream = Stream;
    type Timer = Timer;

    fn connect(dial: Dial, timeout: Duration) -> Connecting<Stream> {
        // Node i is host `n<i>`.
        let Dial::Tcp { host, .. } = dial else {
            panic!("only TCP nodes here: {dial:?}")
        };
        let node: usize = host[1..].parse().expect("host n<i>");
        let (accept, started) = world(|w| {
            w.connects.push((node, w.now));
            (w.accept[node], w.now)
        });
        match accept {
            Accept::Yes => {
                let pipe = Arc::new(Mutex::new(Pipe::default()));
                world(|w| w.conns[node] = Some(pipe.clone()));
                Box::pin(ready(Ok(Stream(pipe))))
            }
            Accept::Never => Box::pin(ConnectTimeout {
                at: started + timeout,
                timeout,
            }),
        }
    }

    fn poll_readable(stream: &Stream, _cx: &mut Context<'_>) -> Poll<()> {
        let pipe = lock_pipe(&stream.0);
        match !pipe.replies.is_empty() || pipe.hung_up {
            true => Poll::Ready(()),
            false => Poll::Pending,
        }
    }

    fn poll_writable(_stream: &Stream, _cx: &mut Context<'_>) -> Poll<()> {
        Poll::Ready(())
    }

    fn try_read(stream: &Stream, buf: &mut [u8]) -> io::Result<usize> {
        let mut pipe = lock_pipe(&stream.0);
        if pipe.replies.is_empty() {
            return match pipe.hung_up {
                true => Ok(0),
                false => Err(io::ErrorKind::WouldBlock.into()),
            };
        }
        let len = pipe.replies.len().min(buf.len());
        buf[..len].copy_from_slice(&pipe.replies[..len]);
        pipe.replies.drain(..len);
        Ok(len)
    }

    fn try_write(stream: &Stream, buf: &[u8]) -> io::Result<usize> {
        let mut pipe = lock_pipe(&stream.0);
        if pipe.hung_up {
            return Err(io::ErrorKind::BrokenPipe.into());
        }
        pipe.written.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn timer() -> Timer {
        Timer(None)
    }

    fn set_timer(timer: &mut Timer, at: Instant) {
        timer.0 = Some(at);
        world(|w| w.armed = Some(at));
    }

    fn poll_timer(timer: &mut Timer, _cx: &mut Context<'_>) -> Poll<()> {
        match timer.0 {
            Some(at) if at <= virtual_now() => Poll::Ready(()),
            _ => Poll::Pending,
        }
    }

    async fn yield_now() {}
}

/// A connection attempt to a node that never answers: fails once virtual time reaches `at`.
struct ConnectTimeout {
    at: Instant,
    timeout: Duration,
}

impl Future for ConnectTimeout {
    type Output = Result<Stream, ConnectionError>;

    fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Self::Output> {
        match virtual_now() >= self.at {
            true => Poll::Ready(Err(ConnectionError::ConnectTimeout(self.timeout))),
            false => Poll::Pending,
        }
    }
}

/// The loop under test, the user's handle, and the test's side of the nodes.
struct Harness {
    run: Pin<Box<dyn Future<Output = ()>>>,
    handle: Handle,
    origin: Instant,
}

impl Harness {
    /// The next timer is node `node`'s reconnection, jittered within `[backoff / 2, 3 *
    /// backoff / 2]` after `since`; nothing reconnects a nanosecond before it, and exactly
    /// that node does at it.
    fn assert_reconnects_after_backoff(&mut self, node: usize, since: Instant, backoff: Duration) {
        let armed = world(|w| w.armed).expect("a reconnection is scheduled");
        assert!(
            armed >= since + backoff / 2 && armed <= since + backoff * 3 / 2,
            "reconnect at {:?} after the failure",
            armed - since
        );
        let connects_before = world(|w| w.connects.len());
        self.advance_to(armed - Duration::from_nanos(1));
        assert_eq!(
            world(|w| w.connects.len()),
            connects_before,
            "reconnected early"
        );
        self.advance_to(armed);
        let connects: Vec<(usize, Instant)> = world(|w| w.connects[connects_before..].to_vec());
        assert_eq!(
            connects,
            vec![(node, armed)],
            "reconnected exactly at the backoff's end"
        );
    }

    /// `n` nodes (`n0`, `n1`, ...) on virtual time, with `configure` applied; the loop has
    /// connected to every node that accepts, and their script loads are answered.
    fn start(accept: &[Accept], configure: impl FnOnce(ConfigBuilder) -> ConfigBuilder) -> Self {
        // Any instant will do as the origin; virtual time starts there and never reads std's.
        let origin = Instant::now();
        WORLD.with(|w| {
            *w.borrow_mut() = Some(World {
                now: origin,
                accept: accept.to_vec(),
                conns: accept.iter().map(|_| None).collect(),
                connects: Vec::new(),
                armed: None,
            })
        });
        let urls = (0..accept.len()).map(|i| format!("n{i}:6379"));
        let (handle, parts) = Setup::from_urls(urls)
            .expect("urls")
            // The replies are scripted: no clock-rate samples.
            .config(|c| configure(c.clock_check(None)))
            .connect_timeout(CONNECT_TIMEOUT)
            .build(virtual_now)
            .expect("config");
        let mut h = Self {
            run: Box::pin(IoLoop::<Virtual>::new(parts).run()),
            handle,
            origin,
        };
        h.turn();
        let every: Vec<(usize, Instant)> = (0..accept.len()).map(|i| (i, origin)).collect();
        assert_eq!(
            world(|w| w.connects.clone()),
            every,
            "one connect per node, at once"
        );
        for (i, a) in accept.iter().enumerate() {
            if *a == Accept::Yes {
                h.answer_script_loads(i);
            }
        }
        h
    }

    /// Polls the loop once: it runs until it waits for something (nothing here wakes it, so
    /// the test polls again after each change). True once the loop has ended.
    fn turn(&mut self) -> bool {
        poll(self.run.as_mut()).is_ready()
    }

    /// Drops the harness's handle and polls the loop once more; true if it ended.
    fn end(self) -> bool {
        let Self {
            mut run, handle, ..
        } = self;
        drop(handle);
        poll(run.as_mut()).is_ready()
    }

    /// Moves virtual time to `at` and lets the loop react.
    fn advance_to(&mut self, at: Instant) {
        world(|w| {
            assert!(at >= w.now, "time goes forward");
            w.now = at;
        });
        self.turn();
    }

    /// What the loop wrote to `node` since the last call.
    fn written(&self, node: usize) -> Vec<u8> {
        let pipe = world(|w| w.conns[node].clone()).expect("connected");
        std::mem::take(&mut lock_pipe(&pipe).written)
    }

    /// `node` sends `bytes`; the loop reads them in its next turn.
    fn reply(&mut self, node: usize, bytes: &[u8]) {
        let pipe = world(|w| w.conns[node].clone()).expect("connected");
        lock_pipe(&pipe).replies.extend_from_slice(bytes);
        self.turn();
    }

    /// `node` closes its end of the connection.
    fn hang_up(&mut self, node: usize) {
        let pipe = world(|w| w.conns[node].take()).expect("connected");
        lock_pipe(&pipe).hung_up = true;
        self.turn();
    }

    /// Checks that the loop sent `HELLO`, `TIME`, `INFO server`, `CONFIG GET append*` and
    /// the script loads (release, extend, and the waiters' queue's two) to `node` on
    /// connecting, and answers them.
    fn answer_script_loads(&mut self, node: usize) {
        let mut hello = command(&[b"HELLO", b"3"]);
        hello.extend(command(&[b"TIME"]));
        hello.extend(command(&[b"INFO", b"server"]));
        hello.extend(command(&[b"CONFIG", b"GET", b"append*"]));
        for script in PRELOADS {
            hello.extend(command(&[b"SCRIPT", b"LOAD", script.body.as_bytes()]));
        }
        assert_eq!(text(&self.written(node)), text(&hello), "node {node}");
        // A Redis 7: releases and extensions go out as scripts.
        self.reply(node, REDIS_7_HELLO);
        self.reply(node, b"*2\r\n$10\r\n1795190400\r\n$1\r\n0\r\n");
        // Up for a day: no restart quarantine.
        // Each node its own run id (one run id twice is one server named twice).
        let info = format!(
            "$37\r\nrun_id:ab{}\r\nuptime_in_seconds:86400\r\n\r\n*0\r\n",
            node % 10
        );
        self.reply(node, info.as_bytes());
        for script in PRELOADS {
            self.reply(node, format!("$40\r\n{}\r\n", script.sha1).as_bytes());
        }
    }

    /// Locks `resource` on every node that accepts, each answering `+OK`.
    fn lock_all(&mut self, resource: &str, nodes: &[usize]) -> LockGuard {
        let handle = self.handle.clone();
        let mut lock = pin!(handle.lock(resource.to_owned()));
        assert!(poll(lock.as_mut()).is_pending());
        self.turn();
        for &i in nodes {
            assert!(text(&self.written(i)).starts_with("*6\r\n$3\r\nSET\r\n"));
            self.reply(i, b"+OK\r\n");
        }
        match poll(lock.as_mut()) {
            Poll::Ready(Ok(guard)) => guard,
            other => panic!("not acquired: {other:?}"),
        }
    }
}

#[test]
fn lock_then_release_on_every_node() {
    let mut h = Harness::start(&[Accept::Yes; 3], |c| c.ttl(TTL));
    let t0 = h.origin + 5 * MS;
    h.advance_to(t0);

    let handle = h.handle.clone();
    let mut lock = Box::pin(handle.lock("res"));
    assert!(poll(lock.as_mut()).is_pending());
    h.turn();
    let sent: Vec<Vec<u8>> = (0..3).map(|i| h.written(i)).collect();
    // Two votes are a quorum of three, decided at once: the third is not awaited.
    h.advance_to(t0 + 3 * MS);
    h.reply(0, b"+OK\r\n");
    assert!(poll(lock.as_mut()).is_pending(), "one vote is no quorum");
    h.reply(1, b"+OK\r\n");
    let Poll::Ready(Ok(guard)) = poll(lock.as_mut()) else {
        panic!("not acquired on a quorum")
    };
    let token = guard.token().as_bytes().to_vec();
    let set = command(&[b"SET", b"res", &token, b"NX", b"PX", b"10000"]);
    for bytes in &sent {
        assert_eq!(text(bytes), text(&set));
    }
    // Counted from t0, before any byte left: ttl - drift (1% of the ttl + 2 ms).
    assert_eq!(guard.deadline(), t0 + TTL - 102 * MS);
    assert_eq!(
        guard.validity(),
        TTL - 102 * MS - 3 * MS,
        "on the loop's clock"
    );
    h.reply(2, b"+OK\r\n");

    h.advance_to(t0 + 1000 * MS);
    assert_eq!(guard.validity(), TTL - 102 * MS - 1000 * MS);
    let mut release = pin!(guard.release());
    assert!(poll(release.as_mut()).is_pending());
    h.turn();
    let del = command(&[
        b"EVALSHA",
        RELEASE_SCRIPT.sha1.as_bytes(),
        b"1",
        b"res",
        &token,
    ]);
    for i in 0..3 {
        assert_eq!(text(&h.written(i)), text(&del), "node {i}");
    }
    h.reply(0, b":1\r\n");
    assert!(
        poll(release.as_mut()).is_pending(),
        "one answer is no quorum"
    );
    // Two answers are a quorum of three: the release returns, node 2 still pending.
    h.reply(1, b":-1\r\n");
    let report = poll(release.as_mut());
    let expected = vec![
        ReleaseOutcome::Released,
        ReleaseOutcome::AlreadyExpired,
        ReleaseOutcome::Pending,
    ];
    assert!(
        matches!(&report, Poll::Ready(Ok(r)) if *r == expected),
        "{report:?}"
    );
    drop(lock);
    drop(handle);
    assert!(
        !h.turn(),
        "the loop ended before node 2's release was answered"
    );
    // The background release is answered: nothing is in flight, the loop ends.
    h.reply(2, b":0\r\n");
    assert!(h.end(), "the loop outlived its handles");
}

#[test]
fn a_round_without_quorum_fails_at_its_deadline_and_is_undone() {
    let mut h = Harness::start(&[Accept::Yes; 3], |c| {
        c.ttl(TTL)
            .attempt_timeout(ATTEMPT)
            .retry(RetryPolicy::once())
    });
    let t0 = h.origin;
    let handle = h.handle.clone();
    let mut lock = pin!(handle.lock("res"));
    assert!(poll(lock.as_mut()).is_pending());
    h.turn();
    assert_eq!(
        world(|w| w.armed),
        Some(t0 + ATTEMPT),
        "the round's deadline"
    );
    let set = h.written(0);
    h.reply(0, b"+OK\r\n");
    // Nodes 1 and 2 stay silent.
    h.advance_to(t0 + ATTEMPT - Duration::from_nanos(1));
    assert!(
        poll(lock.as_mut()).is_pending(),
        "gave up before the deadline"
    );
    h.advance_to(t0 + ATTEMPT);
    let failed = poll(lock.as_mut());
    let errors = [
        (NodeId::new(1), NodeFault::Timeout),
        (NodeId::new(2), NodeFault::Timeout),
    ];
    assert!(
        matches!(
            &failed,
            Poll::Ready(Err(LockError::Acquire {
                reason: AcquireFailure::QuorumUnreachable { errors: e },
                ..
            })) if e.iter().map(|(n, f)| (n.id(), f.clone())).eq(errors.iter().cloned())
        ),
        "{failed:?}"
    );
    // What the attempt set is released on every node, with the attempt's token.
    let token = token_of_set(&set);
    let del = command(&[
        b"EVALSHA",
        RELEASE_SCRIPT.sha1.as_bytes(),
        b"1",
        b"res",
        &token,
    ]);
    for i in 0..3 {
        let sent = h.written(i);
        assert!(
            text(&sent).ends_with(&text(&del)),
            "node {i}: {}",
            text(&sent)
        );
    }
}

#[test]
fn a_dropped_connection_is_reconnected_when_the_backoff_ends() {
    let backoff = 100 * MS;
    let mut h = Harness::start(&[Accept::Yes, Accept::Yes, Accept::Never], |c| {
        c.ttl(TTL).reconnect_backoff(backoff, 10 * backoff)
    });
    let _first = h.lock_all("a", &[0, 1]);

    let t1 = h.origin + 7 * MS;
    h.advance_to(t1);
    h.hang_up(1);
    // Node 2's connect is still pending: the timer is either its timeout or the reconnect.
    h.assert_reconnects_after_backoff(1, t1, backoff);
    h.answer_script_loads(1);

    // The new connection carries the next lock.
    let second = h.lock_all("b", &[0, 1]);
    assert!(second.validity() > Duration::ZERO);
}

#[test]
fn a_connect_that_never_answers_fails_at_the_connect_timeout() {
    let backoff = CONNECT_TIMEOUT;
    let mut h = Harness::start(&[Accept::Yes, Accept::Yes, Accept::Never], |c| {
        c.ttl(TTL).reconnect_backoff(backoff, 10 * backoff)
    });
    let failed_at = h.origin + CONNECT_TIMEOUT;
    h.advance_to(failed_at - Duration::from_nanos(1));
    assert_eq!(
        world(|w| w.armed),
        None,
        "nothing to wait for while node 2 connects"
    );
    h.advance_to(failed_at);
    h.assert_reconnects_after_backoff(2, failed_at, backoff);
}

/// Polls a future once, without a waker: the test polls again after each change.
fn poll<F: Future + ?Sized>(f: Pin<&mut F>) -> Poll<F::Output> {
    f.poll(&mut Context::from_waker(Waker::noop()))
}

/// The RESP encoding of one command.
fn command(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for arg in args {
        out.extend(format!("${}\r\n", arg.len()).into_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// The token of a `SET key token NX PX ttl` as [`command`] encodes it: its seventh line.
fn token_of_set(bytes: &[u8]) -> Vec<u8> {
    let text = text(bytes);
    let line = text.split("\r\n").nth(6).expect("a SET command");
    line.as_bytes().to_vec()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

const MS: Duration = Duration::from_millis(1);
const TTL: Duration = Duration::from_secs(10);
const ATTEMPT: Duration = Duration::from_millis(50);
const CONNECT_TIMEOUT: Duration = Duration::from_millis(200);

/// A Redis 7 server's `HELLO` reply (RESP2), trimmed to the fields the client reads.
const REDIS_7_HELLO: &[u8] =
    b"*4\r\n$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n$6\r\n7.0.15\r\n";
