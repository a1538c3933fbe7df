//! The two kinds of [`Target`]: a real server started by the test kit, and the simulation's
//! node model. Neither knows the table; both only answer commands.

use std::time::{Duration, Instant};

use bytes::Bytes;
use redlock_sim::{
    Clock, HelloAnswer, Scripts as SimScripts, ServerProfile, ServerReply, Session, SimTime,
};
use redlock_testkit::{Conn, Node, Reply, ServerBin, ServerKind};

use crate::table::Family;

/// Something that answers commands as a Redis or Valkey node does.
pub trait Target {
    /// What it is, for the report: "Redis 7.0.15", "the simulation's node model".
    fn describe(&self) -> String;

    /// Its family and `(major, minor)` version, if it is a real server. The runner then
    /// checks its answer about each native command against the table's marks.
    fn version(&self) -> Option<(Family, u32, u32)>;

    /// Sends one command and returns the reply (an error reply is a reply); `Err` means
    /// the target itself failed (a socket error or timeout).
    fn call(&mut self, args: &[&str]) -> Result<Reply, String>;

    /// Subscribes a second connection (the listener) to `channels`, until
    /// [`heard`](Self::heard): a subscriber the next command's `PUBLISH` counts. The kinds
    /// rows' releases (kinds.rs) are seen through it. A target without one says so.
    fn listen(&mut self, channels: &[String]) -> Result<(), String> {
        let _ = channels;
        Err(format!("{} has no second connection", self.describe()))
    }

    /// The messages the listener received since [`listen`](Self::listen), in order, each
    /// as its channel and its payload; the listener then unsubscribes from all of them.
    fn heard(&mut self) -> Result<Vec<(String, Vec<u8>)>, String> {
        Err(format!("{} has no second connection", self.describe()))
    }
}

/// The channel a real listener also subscribes to: a message published there after the
/// command marks the end of what the command published (a server delivers in order).
const END_OF_HEARING: &str = "kinds-contract:end-of-hearing";

/// A real `redis-server` or `valkey-server` node, over one connection.
#[derive(Debug)]
pub struct RealNode {
    conn: Conn,
    /// The second connection, for [`Target::listen`].
    listener: Conn,
    family: Family,
    major: u32,
    minor: u32,
    describe: String,
}

impl RealNode {
    /// Connects to `node`, started from `server` (whose `--version` gives the family and
    /// version the table's marks are checked against).
    pub fn connect(node: &Node, server: &ServerBin) -> Result<Self, String> {
        let family = match server.kind() {
            ServerKind::Redis => Family::Redis,
            ServerKind::Valkey => Family::Valkey,
            other => return Err(format!("no contract marks for {other}")),
        };
        let mut parts = server.version().split('.').map(str::parse::<u32>);
        let (Some(Ok(major)), Some(Ok(minor))) = (parts.next(), parts.next()) else {
            return Err(format!("unreadable version {:?}", server.version()));
        };
        let conn = node.connect().map_err(|e| e.to_string())?;
        let listener = node.connect().map_err(|e| e.to_string())?;
        Ok(Self {
            conn,
            listener,
            family,
            major,
            minor,
            describe: format!("{} {}", server.kind(), server.version()),
        })
    }
}

impl Target for RealNode {
    fn describe(&self) -> String {
        self.describe.clone()
    }

    fn version(&self) -> Option<(Family, u32, u32)> {
        Some((self.family, self.major, self.minor))
    }

    fn call(&mut self, args: &[&str]) -> Result<Reply, String> {
        self.conn.command(args).map_err(|e| e.to_string())
    }

    fn listen(&mut self, channels: &[String]) -> Result<(), String> {
        let mut args = vec!["SUBSCRIBE", END_OF_HEARING];
        args.extend(channels.iter().map(String::as_str));
        self.listener.send(&args).map_err(|e| e.to_string())?;
        // One confirmation per channel, the last counting them all.
        for n in 1..args.len() {
            let reply = self.listener.recv().map_err(|e| e.to_string())?;
            if !matches!(&reply, Reply::Array(f) if f.last() == Some(&Reply::Int(n as i64))) {
                return Err(format!("`SUBSCRIBE` confirmed with {reply}"));
            }
        }
        Ok(())
    }

    fn heard(&mut self) -> Result<Vec<(String, Vec<u8>)>, String> {
        let end = self.call(&["PUBLISH", END_OF_HEARING, ""])?;
        if end != Reply::Int(1) {
            return Err(format!("`PUBLISH {END_OF_HEARING}` answered {end}"));
        }
        let mut heard = Vec::new();
        loop {
            let reply = self.listener.recv().map_err(|e| e.to_string())?;
            let Reply::Array(fields) = &reply else {
                return Err(format!("the listener received {reply}"));
            };
            match fields.as_slice() {
                [
                    Reply::Bulk(kind),
                    Reply::Bulk(channel),
                    Reply::Bulk(payload),
                ] if kind == b"message" => {
                    if channel == END_OF_HEARING.as_bytes() {
                        break;
                    }
                    let channel = String::from_utf8_lossy(channel).into_owned();
                    heard.push((channel, payload.clone()));
                }
                _ => return Err(format!("the listener received {reply}")),
            }
        }
        self.listener
            .send(&["UNSUBSCRIBE"])
            .map_err(|e| e.to_string())?;
        // One confirmation per channel, counting down to 0.
        loop {
            let reply = self.listener.recv().map_err(|e| e.to_string())?;
            match &reply {
                Reply::Array(f) if f.last() == Some(&Reply::Int(0)) => return Ok(heard),
                Reply::Array(_) => {}
                other => return Err(format!("`UNSUBSCRIBE` confirmed with {other}")),
            }
        }
    }
}

/// One simulated node (`redlock_sim::Node`) with the simulation's script models, on virtual
/// time that moves 1 ms per command, behaving as one [`ServerProfile`] (its native commands,
/// and the refusals of those it lacks).
#[derive(Debug)]
pub struct SimNode {
    node: redlock_sim::Node,
    scripts: SimScripts,
    now: SimTime,
    db: u32,
    /// The listener's connection, while [`Target::listen`] holds one.
    listener: Option<Session>,
}

impl SimNode {
    /// A fresh Redis 7.0 node ([`ServerProfile::REDIS_7_0`]: scripts only) with the models
    /// every simulation uses ([`SimScripts::default`]).
    pub fn new() -> Self {
        Self::with_profile(ServerProfile::REDIS_7_0)
    }

    /// A fresh node behaving as `profile`.
    pub fn with_profile(profile: ServerProfile) -> Self {
        Self::with_scripts(profile, SimScripts::default())
    }

    /// A fresh node behaving as `profile` and running `scripts`' models: a negative control
    /// registers a wrong model under a script's source, and the contract must catch it.
    pub fn with_scripts(profile: ServerProfile, scripts: SimScripts) -> Self {
        let clock = Clock::with_skew(Instant::now(), 0.0);
        Self {
            node: redlock_sim::Node::with_profile(clock, &scripts, false, profile),
            scripts,
            now: SimTime::from_duration(Duration::ZERO),
            db: 0,
            listener: None,
        }
    }
}

impl Default for SimNode {
    fn default() -> Self {
        Self::new()
    }
}

impl Target for SimNode {
    fn describe(&self) -> String {
        let p = self.node.profile();
        let hello = match p.hello {
            HelloAnswer::Reply => "",
            HelloAnswer::NoPerm => ", HELLO denied",
            HelloAnswer::Unknown => ", no HELLO",
        };
        format!(
            "the simulation's node model (redlock-sim) as {} {}{hello}",
            p.server, p.version
        )
    }

    /// The profile's family and version: the runner checks the model's native commands
    /// against the table's marks as it does a real server's.
    fn version(&self) -> Option<(Family, u32, u32)> {
        let p = self.node.profile();
        let family = match p.server {
            "valkey" => Family::Valkey,
            _ => Family::Redis,
        };
        let (major, minor) = p.major_minor();
        Some((family, major, minor))
    }

    fn call(&mut self, args: &[&str]) -> Result<Reply, String> {
        self.now = self.now.saturating_add(Duration::from_millis(1));
        let args: Vec<Bytes> = args
            .iter()
            .map(|a| Bytes::copy_from_slice(a.as_bytes()))
            .collect();
        let reply = self
            .node
            .execute(self.now, &mut self.db, &args, &self.scripts);
        Ok(to_reply(reply))
    }

    fn listen(&mut self, channels: &[String]) -> Result<(), String> {
        self.now = self.now.saturating_add(Duration::from_millis(1));
        let mut session = self.node.accept();
        let mut args = vec![Bytes::from_static(b"SUBSCRIBE")];
        args.extend(
            channels
                .iter()
                .map(|c| Bytes::copy_from_slice(c.as_bytes())),
        );
        self.node.run(self.now, &mut session, &args, &self.scripts);
        // Only what is published from now on is heard.
        drop(self.node.take_deliveries());
        self.listener = Some(session);
        Ok(())
    }

    fn heard(&mut self) -> Result<Vec<(String, Vec<u8>)>, String> {
        let session = self.listener.take().ok_or("nothing listens")?;
        let heard = self
            .node
            .take_deliveries()
            .into_iter()
            .filter(|d| d.session == session.id())
            .map(|d| {
                let channel = String::from_utf8_lossy(&d.channel).into_owned();
                (channel, d.payload.to_vec())
            })
            .collect();
        self.node.close(&session);
        Ok(heard)
    }
}

/// The test kit's reading of a simulated node's reply.
fn to_reply(reply: ServerReply) -> Reply {
    match reply {
        ServerReply::Ok => Reply::Simple("OK".to_owned()),
        ServerReply::Nil => Reply::Nil,
        ServerReply::Int(n) => Reply::Int(n),
        ServerReply::Bulk(b) => Reply::Bulk(b.to_vec()),
        ServerReply::Error(e) => Reply::Error(e),
        ServerReply::Array(items) => Reply::Array(items.into_iter().map(to_reply).collect()),
    }
}
