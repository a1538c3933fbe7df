//! A tiny blocking RESP2 client ([`Conn`]) behind [`Node::command`](crate::Node::command):
//! encode one command, read one reply, both with the shared codec of `resp.rs`. Test code
//! only; the drivers speak RESP through `redlock-core`, never through this.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use crate::Error;
use crate::resp::{Reply, encode_command, parse_reply};

/// A blocking connection to a node (or a proxy) with one timeout for connect, each write
/// and each reply.
#[derive(Debug)]
pub struct Conn {
    stream: Stream,
    /// Bytes read and not yet taken by a reply.
    unread: Vec<u8>,
}

impl Conn {
    /// Connects to `addr`; `timeout` bounds the connect and every later read and write.
    pub fn open(addr: SocketAddr, timeout: Duration) -> Result<Self, Error> {
        let context = || format!("connecting to {addr}");
        let stream =
            TcpStream::connect_timeout(&addr, timeout).map_err(|e| Error::io(context(), e))?;
        // Commands are single small writes; don't let Nagle hold them back.
        stream
            .set_nodelay(true)
            .map_err(|e| Error::io(context(), e))?;
        let conn = Self {
            stream: Stream::Tcp(stream),
            unread: Vec::new(),
        };
        conn.set_timeout(timeout)?;
        Ok(conn)
    }

    /// Connects to the unix socket at `path`; `timeout` bounds every read and write.
    pub fn open_unix(path: &Path, timeout: Duration) -> Result<Self, Error> {
        let stream = UnixStream::connect(path)
            .map_err(|e| Error::io(format!("connecting to {}", path.display()), e))?;
        let conn = Self {
            stream: Stream::Unix(stream),
            unread: Vec::new(),
        };
        conn.set_timeout(timeout)?;
        Ok(conn)
    }

    /// Sends one command and reads its reply. An `-ERR` reply is `Ok(Reply::Error(..))`;
    /// `Err` means the socket failed, timed out ([`Error::is_timeout`]) or was closed
    /// ([`Error::is_disconnect`]).
    pub fn command(&mut self, args: &[&str]) -> Result<Reply, Error> {
        self.send(args)?;
        self.recv()
    }

    /// Sends one command without waiting for its reply (pair it with [`Conn::recv`]).
    pub fn send(&mut self, args: &[&str]) -> Result<(), Error> {
        let mut buf = Vec::new();
        encode_command(&mut buf, args);
        self.stream
            .write_all(&buf)
            .map_err(|e| Error::io(format!("sending {}", args.first().unwrap_or(&"")), e))
    }

    /// Reads the next reply; IO errors (timeouts included) pass through as [`Error::Io`].
    pub fn recv(&mut self) -> Result<Reply, Error> {
        let mut chunk = [0u8; 4096];
        loop {
            match parse_reply(&self.unread) {
                Ok(Some((reply, used))) => {
                    self.unread.drain(..used);
                    return Ok(reply);
                }
                Ok(None) => {}
                Err(e) => return Err(Error::Protocol(e.0)),
            }
            // Bounded: each read waits at most the timeout, and the codec caps a reply.
            let n = self
                .stream
                .read(&mut chunk)
                .map_err(|e| Error::io("reading a reply", e))?;
            if n == 0 {
                let eof = io::Error::from(io::ErrorKind::UnexpectedEof);
                return Err(Error::io(
                    "reading a reply: node closed the connection",
                    eof,
                ));
            }
            self.unread.extend_from_slice(&chunk[..n]);
        }
    }

    /// Changes the read and write timeout (a zero duration is raised to 1 ms).
    pub fn set_timeout(&self, timeout: Duration) -> Result<(), Error> {
        // A zero timeout means "block forever" to std; tests always want a bound.
        let timeout = Some(timeout.max(Duration::from_millis(1)));
        match &self.stream {
            Stream::Tcp(s) => s
                .set_read_timeout(timeout)
                .and_then(|()| s.set_write_timeout(timeout)),
            Stream::Unix(s) => s
                .set_read_timeout(timeout)
                .and_then(|()| s.set_write_timeout(timeout)),
        }
        .map_err(|e| Error::io("setting socket timeouts", e))
    }

    /// The underlying TCP socket, e.g. to compare addresses or shut it down; `None` for a
    /// unix socket.
    pub fn stream(&self) -> Option<&TcpStream> {
        match &self.stream {
            Stream::Tcp(s) => Some(s),
            Stream::Unix(_) => None,
        }
    }
}

/// The kit's socket to a node: TCP or unix.
#[derive(Debug)]
enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
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
        match self {
            Self::Tcp(s) => s.flush(),
            Self::Unix(s) => s.flush(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;

    use super::*;

    /// Replies split across writes, and a closed connection, as a node would send them.
    #[test]
    fn reads_split_replies_and_reports_a_close() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut buf = [0u8; 64];
            let n = s.read(&mut buf).unwrap();
            assert_eq!(&buf[..n], b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n");
            s.write_all(b"$3\r\nab").unwrap();
            s.flush().unwrap();
            std::thread::sleep(Duration::from_millis(20));
            s.write_all(b"c\r\n:1\r\n").unwrap();
        });
        let mut conn = Conn::open(addr, Duration::from_secs(5)).unwrap();
        assert_eq!(conn.command(&["GET", "k"]).unwrap(), Reply::bulk("abc"));
        assert_eq!(conn.recv().unwrap(), Reply::Int(1));
        server.join().unwrap();
        assert!(conn.recv().unwrap_err().is_disconnect());
    }
}
