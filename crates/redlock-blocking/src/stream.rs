//! A node's non-blocking socket for the mio loop: TCP (`redis://`, `rediss://`) or a unix
//! socket (`unix://`). TLS is not this module's concern: the loop runs it over either
//! through `redlock_driver::Wire`.

use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::path::Path;

use mio::event::Source;
use mio::net::{TcpStream, UnixStream};
use mio::{Interest, Registry, Token};

/// One node's socket.
pub(crate) enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Stream {
    /// Starts a non-blocking TCP connect.
    pub(crate) fn tcp(addr: SocketAddr) -> io::Result<Self> {
        TcpStream::connect(addr).map(Self::Tcp)
    }

    /// Starts a non-blocking connect to the unix socket at `path`.
    pub(crate) fn unix(path: &Path) -> io::Result<Self> {
        UnixStream::connect(path).map(Self::Unix)
    }

    /// mio's recipe for a connect in progress: `Ok(true)` once connected, `Ok(false)` while
    /// pending, the connect's error if it failed.
    pub(crate) fn connected(&self) -> io::Result<bool> {
        let (error, peer) = match self {
            Self::Tcp(s) => (s.take_error(), s.peer_addr().map(drop)),
            Self::Unix(s) => (s.take_error(), s.peer_addr().map(drop)),
        };
        match error? {
            Some(e) => Err(e),
            None => match peer {
                Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(false),
                result => result.map(|()| true),
            },
        }
    }

    /// One non-blocking read through a shared reference.
    pub(crate) fn read_ref(&self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Self::Tcp(s) => (&*s).read(buf),
            Self::Unix(s) => (&*s).read(buf),
        }
    }

    /// One non-blocking write through a shared reference.
    pub(crate) fn write_ref(&self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Self::Tcp(s) => (&*s).write(buf),
            Self::Unix(s) => (&*s).write(buf),
        }
    }

    /// Nagle's algorithm off (TCP only), on a best-effort basis.
    pub(crate) fn set_nodelay(&self) {
        if let Self::Tcp(s) = self {
            let _ = s.set_nodelay(true);
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Self::Tcp(s) => s.read(buf),
            Self::Unix(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Self::Tcp(s) => s.write(buf),
            Self::Unix(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Source for Stream {
    fn register(
        &mut self,
        registry: &Registry,
        token: Token,
        interest: Interest,
    ) -> io::Result<()> {
        match self {
            Self::Tcp(s) => s.register(registry, token, interest),
            Self::Unix(s) => s.register(registry, token, interest),
        }
    }

    fn reregister(
        &mut self,
        registry: &Registry,
        token: Token,
        interest: Interest,
    ) -> io::Result<()> {
        match self {
            Self::Tcp(s) => s.reregister(registry, token, interest),
            Self::Unix(s) => s.reregister(registry, token, interest),
        }
    }

    fn deregister(&mut self, registry: &Registry) -> io::Result<()> {
        match self {
            Self::Tcp(s) => s.deregister(registry),
            Self::Unix(s) => s.deregister(registry),
        }
    }
}
