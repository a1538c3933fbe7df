//! The demo's shared state: one integer key on a node of its own, read with `GET` and
//! written with `SET` in two separate round trips (the non-atomic read-modify-write the lock
//! has to protect). A minimal async RESP client for exactly those two commands, over TCP or
//! a unix socket (not TLS: the demo refuses a `rediss://` counter node before it starts).
//! Every error names the node.

use std::io;

use redlock_core::{NodeAddress, Transport};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::{TcpStream, UnixStream};

/// One connection to the counter's node.
pub(crate) struct Counter {
    stream: BufReader<Box<dyn Io>>,
    key: String,
    /// The node, as messages name it.
    name: String,
}

/// A byte stream to the node: TCP or a unix socket.
trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

impl Counter {
    /// Connects to `node` (with its URL's `AUTH` and `SELECT`); the counter is the key
    /// `key`.
    pub(crate) async fn connect(node: &NodeAddress, key: &str) -> io::Result<Self> {
        let name = name(node);
        let named =
            |e: io::Error| io::Error::new(e.kind(), format!("the counter's node {name}: {e}"));
        let stream: Box<dyn Io> = match &node.transport {
            Transport::Unix(path) => Box::new(UnixStream::connect(path).await.map_err(named)?),
            Transport::Tcp => {
                let stream =
                    (TcpStream::connect((node.host.as_str(), node.port)).await).map_err(named)?;
                stream.set_nodelay(true).map_err(named)?;
                Box::new(stream)
            }
            _ => return Err(named(io::Error::other(PLAIN_ONLY))),
        };
        let mut counter = Self {
            stream: BufReader::new(stream),
            key: key.to_owned(),
            name: name.clone(),
        };
        let settings = &node.settings;
        match (&settings.username, &settings.password) {
            (Some(user), Some(password)) => counter.ok(&["AUTH", user, password]).await?,
            (None, Some(password)) => counter.ok(&["AUTH", password]).await?,
            _ => {}
        }
        if settings.db != 0 {
            counter.ok(&["SELECT", &settings.db.to_string()]).await?;
        }
        Ok(counter)
    }

    /// `GET key` as a number (0 when the key is missing).
    pub(crate) async fn get(&mut self) -> io::Result<u64> {
        let got = self.get_unnamed().await;
        got.map_err(|e| self.named(e))
    }

    async fn get_unnamed(&mut self) -> io::Result<u64> {
        self.send(&["GET", &self.key.clone()]).await?;
        let line = self.line().await?;
        match line.strip_prefix('$') {
            Some("-1") => Ok(0),
            Some(len) => {
                let len: usize = len.parse().map_err(|_| bad(&line))?;
                let mut value = vec![0; len + 2];
                self.stream.read_exact(&mut value).await?;
                let text = String::from_utf8_lossy(&value[..len]).into_owned();
                text.parse().map_err(|_| bad(&text))
            }
            None => Err(bad(&line)),
        }
    }

    /// `SET key value`.
    pub(crate) async fn set(&mut self, value: u64) -> io::Result<()> {
        self.ok(&["SET", &self.key.clone(), &value.to_string()])
            .await
    }

    /// The node's name before an error from it.
    fn named(&self, e: io::Error) -> io::Error {
        io::Error::new(e.kind(), format!("the counter's node {}: {e}", self.name))
    }

    /// `DEL key`: the demo leaves nothing behind on nodes it did not start.
    pub(crate) async fn delete(&mut self) -> io::Result<()> {
        let deleted = self.delete_unnamed().await;
        deleted.map_err(|e| self.named(e))
    }

    async fn delete_unnamed(&mut self) -> io::Result<()> {
        self.send(&["DEL", &self.key.clone()]).await?;
        let line = self.line().await?;
        match line.strip_prefix(':') {
            Some(_) => Ok(()),
            None => Err(bad(&line)),
        }
    }

    /// Sends a command whose answer must be `+OK`.
    async fn ok(&mut self, args: &[&str]) -> io::Result<()> {
        let answered = self.ok_unnamed(args).await;
        answered.map_err(|e| self.named(e))
    }

    async fn ok_unnamed(&mut self, args: &[&str]) -> io::Result<()> {
        self.send(args).await?;
        let line = self.line().await?;
        if line == "+OK" {
            Ok(())
        } else {
            Err(bad(&line))
        }
    }

    async fn send(&mut self, args: &[&str]) -> io::Result<()> {
        let mut out = format!("*{}\r\n", args.len());
        for arg in args {
            out.push_str(&format!("${}\r\n{arg}\r\n", arg.len()));
        }
        self.stream.get_mut().write_all(out.as_bytes()).await
    }

    async fn line(&mut self) -> io::Result<String> {
        let mut line = String::new();
        if self.stream.read_line(&mut line).await? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        Ok(line.trim_end().to_owned())
    }
}

/// The node as the driver names it: `host:port` (`[::1]:port`), or `unix:/path`.
pub(crate) fn name(node: &NodeAddress) -> String {
    match &node.transport {
        Transport::Unix(path) => format!("unix:{}", path.display()),
        _ if node.host.contains(':') => format!("[{}]:{}", node.host, node.port),
        _ => format!("{}:{}", node.host, node.port),
    }
}

fn bad(reply: &str) -> io::Error {
    io::Error::other(format!("unexpected reply: {reply}"))
}

/// Why a `rediss://` node cannot hold the counter.
pub(crate) const PLAIN_ONLY: &str = "is rediss://, and the demo's counter speaks plain RESP \
    only: put a redis:// or unix:// node first in --nodes";
