//! Host-name lookups off the driver thread. std's resolver blocks (for as long as the system's DNS timeouts allow), so each lookup runs on a
//! short-lived thread of its own and its answer comes back through a channel and the poller's
//! waker. Deciding whether an answer is still wanted is the driver's job, not this module's.

use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, Sender};
use std::task::Waker;
use std::thread;

use redlock_core::{NodeAddress, NodeId};

/// How a host name becomes addresses: [`system`] outside tests, a stand-in in them.
pub(crate) type Resolve = Arc<dyn Fn(&str, u16) -> io::Result<Vec<SocketAddr>> + Send + Sync>;

/// std's resolver (`/etc/hosts`, then DNS, as the system is set up). Blocks.
pub(crate) fn system(host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
    (host, port).to_socket_addrs().map(Iterator::collect)
}

/// A finished lookup, for attempt number `serial` of `node`.
pub(crate) struct Lookup {
    /// The node whose host was looked up.
    pub(crate) node: NodeId,
    /// The driver's number for the connection attempt that asked (`Conn::serial`).
    pub(crate) serial: usize,
    /// The addresses, in the resolver's order, or why there are none.
    pub(crate) addrs: io::Result<Vec<SocketAddr>>,
}

/// Runs lookups on helper threads, at most one per node at a time.
///
/// A thread per lookup rather than one resolver thread with a queue: a lookup that hangs
/// (an unanswered DNS server) would hold up every other node's lookup behind it, which is the
/// stall this module exists to avoid. One per node at a time bounds the threads by the node
/// count however often a node whose lookups hang is reconnected: a newer attempt waits for
/// the running lookup to end, then gets one of its own ([`Resolver::try_recv`]).
///
/// Nothing joins the threads. A lookup cannot be cancelled and may hang for as long as the
/// system's resolver allows, so joining on drop could hang the driver thread's exit; each
/// helper ends when its lookup does, and its answer to a resolver that is gone is dropped.
pub(crate) struct Resolver {
    resolve: Resolve,
    /// Each node's host and port, indexed by `NodeId`.
    hosts: Vec<(Arc<str>, u16)>,
    slots: Vec<Slot>,
    tx: Sender<Lookup>,
    rx: Receiver<Lookup>,
    /// Wakes the driver's poller once an answer is in the channel.
    waker: Waker,
}

/// A node's lookups: whether one is running, and the attempt waiting for it to end.
#[derive(Clone, Copy, Default)]
struct Slot {
    running: bool,
    next: Option<usize>,
}

impl Resolver {
    /// A resolver for these nodes, answering through `waker`.
    pub(crate) fn new(resolve: Resolve, addrs: &[NodeAddress], waker: Waker) -> Self {
        let (tx, rx) = mpsc::channel();
        Self {
            resolve,
            hosts: addrs
                .iter()
                .map(|a| (a.host.as_str().into(), a.port))
                .collect(),
            slots: vec![Slot::default(); addrs.len()],
            tx,
            rx,
            waker,
        }
    }

    /// Looks up `node`'s host for its attempt `serial`; the answer comes from
    /// [`try_recv`](Self::try_recv). Fails only if no thread could be started.
    pub(crate) fn start(&mut self, node: NodeId, serial: usize) -> io::Result<()> {
        let slot = &mut self.slots[node.index()];
        if slot.running {
            // A lookup for an attempt the node has moved on from is running: this one waits
            // for it (the attempt's deadline still counts), replacing any attempt waiting.
            slot.next = Some(serial);
            return Ok(());
        }
        self.spawn(node, serial)?;
        self.slots[node.index()].running = true;
        Ok(())
    }

    /// The next finished lookup, if any. An answer to an attempt that a newer one is waiting
    /// behind is dropped here, and the newer attempt's lookup starts.
    pub(crate) fn try_recv(&mut self) -> Option<Lookup> {
        // Bounded: each turn takes one answer, and at most one lookup runs per node.
        while let Ok(done) = self.rx.try_recv() {
            let node = done.node;
            let slot = &mut self.slots[node.index()];
            slot.running = false;
            let Some(serial) = slot.next.take() else {
                return Some(done);
            };
            match self.spawn(node, serial) {
                Ok(()) => self.slots[node.index()].running = true,
                Err(e) => {
                    return Some(Lookup {
                        node,
                        serial,
                        addrs: Err(e),
                    });
                }
            }
        }
        None
    }

    fn spawn(&self, node: NodeId, serial: usize) -> io::Result<()> {
        let (host, port) = self.hosts[node.index()].clone();
        let (resolve, tx, waker) = (self.resolve.clone(), self.tx.clone(), self.waker.clone());
        thread::Builder::new()
            .name("redlock-resolve".to_owned())
            .spawn(move || {
                let addrs = resolve(&host, port);
                // The driver is gone if this fails: nobody wants the answer.
                if tx
                    .send(Lookup {
                        node,
                        serial,
                        addrs,
                    })
                    .is_ok()
                {
                    waker.wake();
                }
            })
            .map(drop)
            .map_err(|e| io::Error::new(e.kind(), format!("no thread for the lookup: {e}")))
    }
}

#[cfg(test)]
mod tests {
    //! The driver with a stand-in resolver (no DNS: the stand-ins answer from memory, and the
    //! real nodes are named by IP address), then the resolver's one-lookup-per-node rule.
    //! Every wait is bounded; assertions are on order and state, never on speed.

    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc::TryRecvError;
    use std::thread::JoinHandle;
    use std::time::{Duration, Instant};

    use redlock_core::{ConfigBuilder, ConnectionError, ReleaseOutcome};
    use redlock_driver::{Setup, Start};
    use redlock_testkit::{Cluster, Reply};

    use super::*;
    use crate::driver::Driver;
    use crate::{Handle, MioThread};

    /// A lookup of `slow.test` that blocks until the test lets it go does not hold up the
    /// other nodes: a lock is taken and released on them while it is still pending, and the
    /// driver shuts down without waiting for it.
    #[test]
    fn a_slow_lookup_does_not_stall_the_other_nodes() {
        let c = Cluster::start(3).expect("start test nodes");
        let (asked_tx, asked) = mpsc::channel();
        let (answered_tx, answered) = mpsc::channel();
        let (go, wait) = mpsc::channel::<()>();
        let wait = Mutex::new(wait);
        let resolve: Resolve = Arc::new(move |host, _| {
            let _ = asked_tx.send(host.to_owned());
            // Returns when the test drops `go` (or after `HANG`).
            let _ = wait
                .lock()
                .expect("one lookup at a time")
                .recv_timeout(HANG);
            let _ = answered_tx.send(());
            Err(io::Error::other("slow.test: no answer"))
        });
        let mut urls = c.urls();
        urls.push("slow.test:6379".to_owned());
        // Node 3's attempt lasts as long as its lookup: still pending throughout.
        let (r, _failures, driver) = start(&urls, Duration::from_secs(60), |c| c, resolve);
        assert_eq!(asked.recv_timeout(WAIT).as_deref(), Ok("slow.test"));

        // Quorum 3 of 4: the three nodes named by address.
        let g = r.lock("slow-dns").expect("locked on the other nodes");
        assert_eq!(
            answered.try_recv(),
            Err(TryRecvError::Empty),
            "lookup ended first"
        );
        let outcomes = g.release().expect("released");
        assert_eq!(outcomes[..3], vec![ReleaseOutcome::Released; 3]);
        for i in 0..3 {
            assert_eq!(c.node(i).command(&["GET", "slow-dns"]).unwrap(), Reply::Nil);
        }
        assert_eq!(
            answered.try_recv(),
            Err(TryRecvError::Empty),
            "lookup ended before the release"
        );
        // IP addresses were never looked up.
        assert_eq!(asked.try_recv(), Err(TryRecvError::Empty));

        // The driver ends while the lookup hangs; the lookup's thread ends when it returns.
        drop(r);
        join(driver);
        assert_eq!(answered.try_recv(), Err(TryRecvError::Empty));
        drop(go);
        assert_eq!(answered.recv_timeout(WAIT), Ok(()));
    }

    /// A lookup's failure is the cause the driver gives for the failed attempt.
    #[test]
    fn a_failed_lookup_is_the_cause_of_the_failed_connect() {
        let resolve: Resolve = Arc::new(|host, _| {
            Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("{host}: no such host"),
            ))
        });
        let urls = ["nowhere.test:6379".to_owned()];
        let (r, failures, driver) = start(&urls, Duration::from_secs(60), |c| c, resolve);
        let (node, cause) = failures.recv_timeout(WAIT).expect("a failed attempt");
        assert_eq!(node, NodeId::new(0));
        assert_eq!(
            cause,
            ConnectionError::Resolve("nowhere.test: no such host".into())
        );
        assert_eq!(
            cause.to_string(),
            "could not resolve the host name: nowhere.test: no such host"
        );
        drop(r);
        join(driver);
    }

    /// A lookup still pending at the connect timeout fails its attempt as a timeout, and its
    /// late answer (a live node's address) is never connected to.
    #[test]
    fn a_lookup_past_the_connect_timeout_is_a_timeout_and_its_answer_is_dropped() {
        let c = Cluster::start(1).expect("start a test node");
        let target = c.proxy(0).addr();
        let calls = AtomicUsize::new(0);
        let (go, wait) = mpsc::channel::<()>();
        let wait = Mutex::new(wait);
        let resolve: Resolve = Arc::new(move |_, _| {
            if calls.fetch_add(1, Ordering::SeqCst) > 0 {
                return Err(io::Error::new(io::ErrorKind::NotFound, "late.test: gone"));
            }
            let _ = wait
                .lock()
                .expect("one lookup at a time")
                .recv_timeout(HANG);
            Ok(vec![target])
        });
        let urls = ["late.test:6379".to_owned()];
        let backoff = |c: ConfigBuilder| c.reconnect_backoff(10 * MS, 20 * MS);
        let (r, failures, driver) = start(&urls, 100 * MS, backoff, resolve);
        let (node, cause) = failures.recv_timeout(WAIT).expect("a failed attempt");
        assert_eq!(node, NodeId::new(0));
        assert_eq!(cause, ConnectionError::ConnectTimeout(100 * MS), "{cause}");

        // The late answer arrives; then a later attempt's lookup fails. Had the answer been
        // taken, the node would have connected and no later attempt would have been made.
        drop(go);
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match failures.recv_timeout(left) {
                Ok((_, ConnectionError::ConnectTimeout(_))) => continue,
                Ok((_, ConnectionError::Resolve(e))) => {
                    assert_eq!(e, "late.test: gone");
                    break;
                }
                Ok((_, other)) => panic!("unexpected cause: {other}"),
                Err(e) => panic!("no later attempt: {e}"),
            }
        }
        assert_eq!(c.proxy(0).connections(), 0, "connected to a stale answer");
        drop(r);
        join(driver);
    }

    /// While a node's lookup runs, a newer attempt's lookup waits for it, then runs: never
    /// two at once for one node. The older answer is dropped.
    #[test]
    fn one_lookup_per_node_at_a_time() {
        // Lookups running now, the most ever running at once, and lookups started.
        let (running, peak) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let calls = Arc::new(AtomicUsize::new(0));
        let (go, wait) = mpsc::channel::<()>();
        let wait = Mutex::new(wait);
        let resolve: Resolve = {
            let (running, peak, calls) = (running.clone(), peak.clone(), calls.clone());
            Arc::new(move |_, port| {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(now, Ordering::SeqCst);
                if calls.fetch_add(1, Ordering::SeqCst) == 0 {
                    let _ = wait
                        .lock()
                        .expect("one lookup at a time")
                        .recv_timeout(HANG);
                }
                running.fetch_sub(1, Ordering::SeqCst);
                Ok(vec![SocketAddr::from(([127, 0, 0, 1], port))])
            })
        };
        let addrs = [NodeAddress::parse("a.test:7001").unwrap()];
        let mut resolver = Resolver::new(resolve, &addrs, Waker::noop().clone());
        let node = NodeId::new(0);
        resolver.start(node, 1).unwrap();
        resolver.start(node, 2).unwrap();
        resolver.start(node, 3).unwrap();
        assert!(resolver.try_recv().is_none());
        drop(go);
        let deadline = Instant::now() + WAIT;
        let done = loop {
            if let Some(done) = resolver.try_recv() {
                break done;
            }
            assert!(Instant::now() < deadline, "no answer");
            thread::sleep(MS);
        };
        // The first attempt's answer was dropped; the last one waiting got the second lookup.
        assert_eq!((done.node, done.serial), (node, 3));
        assert_eq!(
            done.addrs.unwrap(),
            [SocketAddr::from(([127, 0, 0, 1], 7001))]
        );
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        assert_eq!(peak.load(Ordering::SeqCst), 1, "two lookups at once");
    }

    /// Starts a driver for `urls` resolving with `resolve`. Returns the handle, the causes of
    /// its failed connection attempts, and its thread.
    fn start(
        urls: &[String],
        connect_timeout: Duration,
        config: impl FnOnce(ConfigBuilder) -> ConfigBuilder,
        resolve: Resolve,
    ) -> (Handle, Receiver<(NodeId, ConnectionError)>, JoinHandle<()>) {
        let (handle, parts) = Setup::from_urls(urls)
            .unwrap()
            .config(config)
            .connect_timeout(connect_timeout)
            .build(MioThread::now)
            .unwrap();
        let mut driver = Driver::new(parts, resolve).expect("a poller");
        let (tx, failures) = mpsc::channel();
        driver.failures = Some(tx);
        (
            Handle::from(handle),
            failures,
            thread::spawn(move || driver.run()),
        )
    }

    /// Waits for the driver thread, which ends once its last handle is gone.
    fn join(driver: JoinHandle<()>) {
        let deadline = Instant::now() + WAIT;
        while !driver.is_finished() {
            assert!(Instant::now() < deadline, "driver thread still running");
            thread::sleep(MS);
        }
        driver.join().expect("driver thread panicked");
    }

    const WAIT: Duration = Duration::from_secs(5);
    /// How long a stand-in lookup blocks at most, so that its thread always ends.
    const HANG: Duration = Duration::from_secs(30);
    const MS: Duration = Duration::from_millis(1);
}
