//! Host-name lookups off the driver thread, and why a connection attempt failed. std's resolver
//! blocks (for as long as the system's DNS timeouts allow), so each lookup runs on a
//! short-lived thread of its own and its answer comes back through a channel and the poller's
//! waker. Deciding whether an answer is still wanted is the driver's job, not this module's.

use std::fmt;
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

/// Why a node's connection attempt failed: what `Input::Disconnected` is to report once the
/// core takes a reason.
#[derive(Debug)]
pub(crate) enum ConnectFailure {
    /// The host name did not resolve, or resolved to no address.
    Resolve(io::Error),
    /// No address took the connection; the error of the last one tried.
    Connect(io::Error),
    /// The connect timeout passed first, name lookup included.
    Timeout,
}

impl fmt::Display for ConnectFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Resolve(e) => write!(f, "name resolution failed: {e}"),
            Self::Connect(e) => write!(f, "connect failed: {e}"),
            Self::Timeout => f.write_str("connect timed out"),
        }
    }
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
