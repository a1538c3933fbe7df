//! Loopback ports that fail a client's connect in a given way: [`refused_port`] and
//! [`refused_ports`] (nothing
//! listens, so the kernel answers RST at once) and [`HangingPort`] (the handshake never
//! completes, so the client's connect times out). No server and no thread behind either.

use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use crate::{Error, process};

/// A loopback address nothing listens on: a port the kernel just handed out, whose listener
/// is closed again, so a connect to it is refused at once (`ECONNREFUSED`). Use it at once:
/// another socket may bind the port later.
pub fn refused_port() -> Result<SocketAddr, Error> {
    Ok(SocketAddr::from((
        Ipv4Addr::LOCALHOST,
        process::free_port()?,
    )))
}

/// `n` different loopback addresses nothing listens on, for a configuration of `n` nodes
/// that must be `n` servers. Each port's listener stays open until all are picked, so the
/// kernel cannot hand out one port twice (calling [`refused_port`] `n` times can, and a
/// configuration naming one server twice is refused before any connect). Use them at once,
/// as [`refused_port`]'s.
pub fn refused_ports(n: usize) -> Result<Vec<SocketAddr>, Error> {
    let listeners = (0..n)
        .map(|_| {
            TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
                .map_err(|e| Error::io("binding 127.0.0.1:0 to pick a port", e))
        })
        .collect::<Result<Vec<_>, _>>()?;
    listeners
        .iter()
        .map(|l| {
            l.local_addr()
                .map_err(|e| Error::io("reading the picked port", e))
        })
        .collect()
}

/// A 127.0.0.1 port whose TCP handshakes never complete, so a client's connect times out
/// instead of being refused or answered. Dropping it closes the port (connects are then
/// refused).
///
/// How: a listener that never accepts, whose accept queue the kit fills with connections of
/// its own. Linux then drops every new SYN to the port (`ListenOverflows` in
/// `/proc/net/netstat`) instead of answering it, and the client retransmits (after 1 s, 3 s,
/// ...) until its own timeout. [`start`](Self::start) connects until a connect times out,
/// which proves the queue full, so it works whatever the listener's backlog; a system that
/// refuses instead fails it with an error.
#[derive(Debug)]
pub struct HangingPort {
    addr: SocketAddr,
    // Kept open: dropping them would free the accept queue. The listener goes first, which
    // resets the queued connections.
    _listener: TcpListener,
    _queued: Vec<TcpStream>,
}

impl HangingPort {
    /// Listens on a free 127.0.0.1 port and fills its accept queue (129 connections with
    /// std's backlog of 128; it gives up after 4,200). Takes 200 ms more: the connect that
    /// proves the queue full times out.
    pub fn start() -> Result<Self, Error> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .map_err(|e| Error::io("binding 127.0.0.1:0 for a hanging port", e))?;
        let addr = listener
            .local_addr()
            .map_err(|e| Error::io("reading the hanging port's address", e))?;
        let mut queued = Vec::new();
        // Bounded by MAX_QUEUED connects; each completes at once on loopback (the kernel
        // answers the handshake in the connect call), except the last, which waits for
        // PROBE_TIMEOUT.
        while queued.len() < MAX_QUEUED {
            match TcpStream::connect_timeout(&addr, PROBE_TIMEOUT) {
                Ok(stream) => queued.push(stream),
                Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {
                    return Ok(Self {
                        addr,
                        _listener: listener,
                        _queued: queued,
                    });
                }
                Err(e) => {
                    let context = format!("filling the accept queue of {addr}");
                    return Err(Error::io(context, e));
                }
            }
        }
        Err(Error::Config(format!(
            "{addr} still took connections after {MAX_QUEUED}: this system does not drop \
             SYNs to a full listener"
        )))
    }

    /// The port's address, on 127.0.0.1.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://{}", self.addr)
    }
}

/// Most connections [`HangingPort::start`] queues before it gives up: above Linux's default
/// `somaxconn` (4096), the largest backlog a listener can have there.
const MAX_QUEUED: usize = 4200;
/// How long [`HangingPort::start`] waits for the connect that proves the queue full. A
/// loopback connect to a listener with room completes within the connect call.
const PROBE_TIMEOUT: Duration = Duration::from_millis(200);

#[cfg(test)]
mod tests {
    use std::io::ErrorKind;

    use super::*;

    #[test]
    fn a_refused_port_refuses() {
        let addr = refused_port().unwrap();
        assert!(addr.ip().is_loopback());
        let err = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::ConnectionRefused, "{err}");
    }

    /// Connects time out (twice: the port stays full), and once dropped the port refuses.
    #[test]
    fn a_hanging_port_times_connects_out_until_dropped() {
        let port = HangingPort::start().unwrap();
        let addr = port.addr();
        assert!(addr.ip().is_loopback());
        assert_eq!(port.url(), format!("redis://127.0.0.1:{}", addr.port()));
        for _ in 0..2 {
            let err = TcpStream::connect_timeout(&addr, Duration::from_millis(100)).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::TimedOut, "{err}");
        }
        drop(port);
        let err = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::ConnectionRefused, "{err}");
    }
}
