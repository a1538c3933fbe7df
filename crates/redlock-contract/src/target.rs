//! The two kinds of [`Target`]: a real server started by the test kit, and the simulation's
//! node model. Neither knows the table; both only answer commands.

use std::time::{Duration, Instant};

use bytes::Bytes;
use redlock_sim::{Clock, HelloAnswer, Scripts as SimScripts, ServerProfile, ServerReply, SimTime};
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
}

/// A real `redis-server` or `valkey-server` node, over one connection.
#[derive(Debug)]
pub struct RealNode {
    conn: Conn,
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
        Ok(Self {
            conn,
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
