//! The demo's shared state: one integer key on a node of its own, read with `GET` and
//! written with `SET` in two separate round trips (the non-atomic read-modify-write the lock
//! has to protect). A minimal async RESP client for exactly those two commands.

use std::io;
use std::net::SocketAddr;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// One connection to the counter's node.
pub(crate) struct Counter {
    stream: BufReader<TcpStream>,
    key: String,
}

impl Counter {
    /// Connects to `addr`; the counter is the key `key`.
    pub(crate) async fn connect(addr: SocketAddr, key: &str) -> io::Result<Self> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(Self {
            stream: BufReader::new(stream),
            key: key.to_owned(),
        })
    }

    /// `GET key` as a number (0 when the key is missing).
    pub(crate) async fn get(&mut self) -> io::Result<u64> {
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
        self.send(&["SET", &self.key.clone(), &value.to_string()])
            .await?;
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

fn bad(reply: &str) -> io::Error {
    io::Error::other(format!("unexpected reply from the counter's node: {reply}"))
}
