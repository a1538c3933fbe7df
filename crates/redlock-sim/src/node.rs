//! A simulated Redis/Valkey node: process state (up, paused, crashed), its keyspace, script
//! cache and pub/sub registry, and the commands the core sends, executed on the node's own
//! clock.
//!
//! The node does not own connections or deliver bytes; the network hands it whole commands
//! with the connection's [`Session`] (database, protocol, channels) and takes back replies,
//! and the messages publications left ([`Node::take_deliveries`]).

use std::collections::BTreeSet;

use bytes::Bytes;

use crate::clock::{Clock, SimTime};
use crate::conditional;
use crate::keyspace::{Keys, Keyspace, WALL_EPOCH_NANOS};
use crate::profile::{HelloAnswer, ServerProfile, unknown_command};
use crate::pubsub::{self, Delivery, Registry, Session};
use crate::resp::{Frame, ServerReply};
use crate::script::{NativeScript, Scripts, millis_arg};
use crate::sorted;

/// One node process and its data.
#[derive(Debug, Clone)]
pub struct Node {
    clock: Clock,
    state: NodeState,
    keyspace: Keyspace,
    /// SHA1s loaded in this incarnation's script cache.
    loaded: BTreeSet<String>,
    incarnation: u32,
    commands: u64,
    profile: ServerProfile,
    /// Connections accepted: the last one's id.
    accepted: u64,
    /// Who is subscribed to what, and the messages not yet taken for delivery.
    pubsub: Registry,
    /// A fault: `SUBSCRIBE` is confirmed and registers nothing.
    ignores_subscribe: bool,
    /// How far the node's wall clock (`TIME`) is from [`WALL_EPOCH_NANOS`] plus its local
    /// clock, in nanoseconds: a constant offset, moved by steps.
    wall_offset: i64,
    /// A step of the wall clock scheduled at a true time, not yet taken (see
    /// [`step_wall_at`](Self::step_wall_at)).
    wall_step: Option<(SimTime, i64)>,
    /// The last crash kept the data (persistence): the restart loads it back.
    persisted: bool,
    /// The wall clock (Unix nanoseconds) when the process started: `INFO`'s
    /// `uptime_in_seconds` counts from it on the wall clock, as Redis does, so a step of
    /// the wall clock moves the uptime.
    started_wall: u64,
    /// Which node of its cluster this is: servers' run ids differ (real ones are random),
    /// so each node's is drawn from it and its incarnation.
    id: u64,
}

/// Whether the node process runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeState {
    /// Running and answering.
    Up,
    /// Stopped (SIGSTOP): accepts connections, queues bytes, answers nothing until resumed.
    Paused,
    /// Crashed: refuses connections; its data and script cache are gone.
    Down,
}

impl Node {
    /// A running Redis 7.0 node ([`ServerProfile::REDIS_7_0`]) with an empty keyspace;
    /// `preload` fills the script cache with every registered script.
    pub fn new(clock: Clock, scripts: &Scripts, preload: bool) -> Self {
        Self::with_profile(clock, scripts, preload, ServerProfile::REDIS_7_0)
    }

    /// The same node as number `id` of its cluster: its run id (`INFO`) differs from the
    /// other nodes', as real servers' do.
    pub fn numbered(mut self, id: u64) -> Self {
        self.id = id;
        self
    }

    /// A running node that behaves as `profile` says (its `HELLO` reply and native
    /// commands), with an empty keyspace; `preload` as in [`Node::new`].
    pub fn with_profile(
        clock: Clock,
        scripts: &Scripts,
        preload: bool,
        profile: ServerProfile,
    ) -> Self {
        let loaded = if preload {
            scripts.shas().map(str::to_owned).collect()
        } else {
            BTreeSet::new()
        };
        Self {
            clock,
            state: NodeState::Up,
            keyspace: Keyspace::new(),
            loaded,
            incarnation: 0,
            commands: 0,
            profile,
            accepted: 0,
            pubsub: Registry::default(),
            ignores_subscribe: false,
            wall_offset: 0,
            wall_step: None,
            persisted: false,
            // Up for a day when the simulation starts: no quarantine at first sight.
            started_wall: WALL_EPOCH_NANOS.saturating_sub(DAY_NANOS),
            id: 0,
        }
    }

    /// The node's wall clock at true time `t`, in Unix nanoseconds: what `TIME` reads and
    /// what a fencing floor is taken from. Expiry runs on the local clock
    /// ([`Clock::local_nanos`]), which steps do not move.
    pub fn wall_nanos(&self, t: SimTime) -> u64 {
        let base = WALL_EPOCH_NANOS.saturating_add(self.clock.local_nanos(t));
        let step = match self.wall_step {
            Some((at, nanos)) if t >= at => nanos,
            _ => 0,
        };
        base.saturating_add_signed(self.wall_offset.saturating_add(step))
    }

    /// Steps the wall clock by `nanos` (negative: back) at true time `at`: `TIME` at `at`
    /// or later reads the step, earlier readings do not (one step per node; a later call
    /// replaces it).
    pub fn step_wall_at(&mut self, at: SimTime, nanos: i64) {
        self.wall_step = Some((at, nanos));
    }

    /// Steps the wall clock by `nanos` (negative: back), as a clock set by hand or NTP.
    pub fn step_wall(&mut self, nanos: i64) {
        self.wall_offset = self.wall_offset.saturating_add(nanos);
    }

    /// Whether the last crash kept the data.
    pub fn persisted(&self) -> bool {
        self.persisted
    }

    /// Evicts one key with a time to live, chosen by `pick` among the `n` there are (a
    /// `volatile-*` eviction policy under memory pressure): never a fencing counter, which
    /// has none. Returns the key, if there was one.
    pub fn evict_volatile(
        &mut self,
        t: SimTime,
        pick: impl FnOnce(usize) -> usize,
    ) -> Option<Bytes> {
        let keys = self.keyspace.volatile(self.clock.local_nanos(t));
        if keys.is_empty() {
            return None;
        }
        let (db, key) = keys[pick(keys.len()).min(keys.len() - 1)].clone();
        self.keyspace.evict(db, &key);
        Some(key)
    }

    /// Replaces one key with a time to live by a list with the same time to live, as another
    /// program writing a list under a lock's key name would: commands on it then fail with
    /// `WRONGTYPE`. Returns the key, if there was one.
    pub fn retype_volatile(
        &mut self,
        t: SimTime,
        pick: impl FnOnce(usize) -> usize,
    ) -> Option<Bytes> {
        let now = self.clock.local_nanos(t);
        let keys = self.keyspace.volatile(now);
        if keys.is_empty() {
            return None;
        }
        let (db, key) = keys[pick(keys.len()).min(keys.len() - 1)].clone();
        let mut view = self.keyspace.view(db, now);
        let ttl = view.pttl(&key).flatten();
        view.del(&key);
        // A new key takes a list: `rpush` cannot fail.
        let _ = view.rpush(&key, &[Bytes::from_static(b"another program's")]);
        if let Some(ttl) = ttl {
            view.pexpire(&key, ttl);
        }
        Some(key)
    }

    /// Whether `key` in database 0 holds another type than a string at true time `t` (a
    /// list or a sorted set): a lock command on it fails with `WRONGTYPE`.
    pub fn holds_other_type(&mut self, t: SimTime, key: &[u8]) -> bool {
        let now = self.clock.local_nanos(t);
        let key = Bytes::copy_from_slice(key);
        self.keyspace.view(0, now).get(&key).is_err()
    }

    /// Whether the sorted set `key` in database 0 holds `member` with a deadline (its score,
    /// in milliseconds of the node's wall clock) still ahead at true time `t`: a reader's or
    /// a permit holder's live slot (docs/kinds.md, "Node time inside scripts").
    pub fn holds_slot(&mut self, t: SimTime, key: &[u8], member: &[u8]) -> bool {
        let now = self.clock.local_nanos(t);
        let wall_millis = self.wall_nanos(t) / 1_000_000;
        let (key, member) = (Bytes::copy_from_slice(key), Bytes::copy_from_slice(member));
        let score = self.keyspace.view(0, now).zscore(&key, &member);
        // Pruned at `score <= now`, as the scripts' ZREMRANGEBYSCORE -inf now.
        score.is_ok_and(|s| s.is_some_and(|s| s > wall_millis as f64))
    }

    /// A new connection: a fresh id, database 0, RESP2, no channels.
    pub fn accept(&mut self) -> Session {
        self.accepted += 1;
        Session::accepted(self.accepted)
    }

    /// The connection closed: its subscriptions end.
    pub fn close(&mut self, session: &Session) {
        self.pubsub.close(session);
    }

    /// The messages publications left since the last call, one per receiving connection.
    pub fn take_deliveries(&mut self) -> Vec<Delivery> {
        self.pubsub.take_deliveries()
    }

    /// From now on `SUBSCRIBE` is confirmed and registers nothing (a fault: the client is
    /// never told of a release on this node).
    pub fn ignore_subscribe(&mut self, ignore: bool) {
        self.ignores_subscribe = ignore;
    }

    /// The server this node behaves as.
    pub fn profile(&self) -> &ServerProfile {
        &self.profile
    }

    /// The node's clock.
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// Current process state.
    pub fn state(&self) -> NodeState {
        self.state
    }

    /// Whether the process exists (up or paused): TCP connects succeed.
    pub fn accepts_connections(&self) -> bool {
        self.state != NodeState::Down
    }

    /// How many times the node restarted.
    pub fn incarnation(&self) -> u32 {
        self.incarnation
    }

    /// Commands executed over the node's life.
    pub fn commands(&self) -> u64 {
        self.commands
    }

    /// Stops processing (keeps data).
    pub fn pause(&mut self) {
        if self.state == NodeState::Up {
            self.state = NodeState::Paused;
        }
    }

    /// Resumes processing after a pause.
    pub fn resume(&mut self) {
        if self.state == NodeState::Paused {
            self.state = NodeState::Up;
        }
    }

    /// Empties the script cache (`SCRIPT FLUSH`): the next `EVALSHA` meets `-NOSCRIPT`.
    pub fn flush_scripts(&mut self) {
        self.loaded.clear();
    }

    /// Kills the process: data and script cache are lost (no persistence).
    pub fn crash(&mut self) {
        self.crash_with(false);
    }

    /// Kills the process; with `persist` the data survives on disk (an append-only file
    /// synced on every write) and the restart loads it, without it the data is lost. The
    /// script cache is lost either way.
    pub fn crash_with(&mut self, persist: bool) {
        self.state = NodeState::Down;
        self.persisted = persist;
        // Every connection dies with the process, and its subscriptions with it.
        self.pubsub.clear();
        if !persist {
            self.keyspace = Keyspace::new();
        }
        self.loaded.clear();
    }

    /// Starts a fresh incarnation at true time `t`: the data the last crash kept (none
    /// without persistence), an empty script cache, a new run id, an uptime from `t`. Keys
    /// expire on the node's clock, which ran on while it was down.
    pub fn restart(&mut self, t: SimTime) {
        self.started_wall = self.wall_nanos(t);
        self.state = NodeState::Up;
        if !self.persisted {
            self.keyspace = Keyspace::new();
        }
        self.persisted = false;
        self.loaded.clear();
        self.incarnation += 1;
    }

    /// Moves the start of the running process `nanos` earlier on its wall clock, which
    /// itself does not move: its `INFO` uptime claims that much more, as when a node's clock
    /// booted behind and was stepped right once the process had started.
    pub fn backdate_start(&mut self, nanos: u64) {
        self.started_wall = self.started_wall.saturating_sub(nanos);
    }

    /// Keys alive at true time `t` on this node's clock: `(db, key, value)`.
    pub fn live_keys(&self, t: SimTime) -> Vec<(u32, Bytes, Bytes)> {
        self.keyspace.live(self.clock.local_nanos(t))
    }

    /// Executes one command at true time `t` for a RESP2 connection without subscriptions
    /// whose database is `db`, and returns the reply as that connection reads it (several
    /// frames as an array of them, none as nil): what the command contract compares with a
    /// real server. The simulation's connections use [`Node::run`].
    pub fn execute(
        &mut self,
        t: SimTime,
        db: &mut u32,
        args: &[Bytes],
        scripts: &Scripts,
    ) -> ServerReply {
        let mut session = self.accept();
        session.db = *db;
        let frame = self.run(t, &mut session, args, scripts);
        *db = session.db;
        self.close(&session);
        frame.into_resp2()
    }

    /// Executes one command at true time `t` for the connection `session` and returns what
    /// the node writes back (in the session's protocol after the command). Messages it
    /// publishes wait in [`Node::take_deliveries`].
    pub fn run(
        &mut self,
        t: SimTime,
        session: &mut Session,
        args: &[Bytes],
        scripts: &Scripts,
    ) -> Frame {
        self.commands += 1;
        let now = self.clock.local_nanos(t);
        let wall = self.wall_nanos(t);
        let Some(name) = args.first() else {
            return ServerReply::error("ERR empty command").into();
        };
        let upper = name.to_ascii_uppercase();
        let rest = &args[1..];
        if session.in_subscribed_context()
            && KNOWN.contains(&&upper[..])
            && !pubsub::allowed_in_subscribed_context(&upper)
        {
            return pubsub::not_in_subscribed_context(&upper).into();
        }
        let mut keys = self.keyspace.view_at(session.db, now, wall);
        if !self.profile.time {
            keys.deny_time();
        }
        if !self.profile.channels {
            keys.deny_channels();
        }
        let profile = &self.profile;
        let reply: Option<Frame> = match &upper[..] {
            b"SET" => conditional::set(&mut keys, profile, rest).map(Frame::from),
            b"DELIFEQ" => conditional::delifeq(&mut keys, profile, name, rest).map(Frame::from),
            b"DELEX" => conditional::delex(&mut keys, profile, name, rest).map(Frame::from),
            b"GET" | b"DEL" | b"PEXPIRE" | b"PTTL" | b"RPUSH" => {
                key_command(&mut keys, &upper, rest).map(Frame::from)
            }
            // Every bulk string these answer is a score: a double in RESP3.
            b"ZADD" => sorted::zadd(&mut keys, profile, rest).map(Frame::score),
            b"ZINCRBY" => sorted::zincrby(&mut keys, rest).map(Frame::score),
            b"ZSCORE" => sorted::zscore(&mut keys, rest).map(Frame::score),
            b"HELLO" => Some(hello(profile, session, rest)),
            b"AUTH" | b"SELECT" => {
                connection_command(&mut session.db, &upper, rest).map(Frame::from)
            }
            b"TIME" if rest.is_empty() => Some(match keys.time() {
                Ok((secs, micros)) => {
                    let bulk = |n: u64| Frame::Bulk(Bytes::from(n.to_string()));
                    Frame::Array(vec![bulk(secs), bulk(micros)])
                }
                Err(_) => ServerReply::error(TIME_DENIED).into(),
            }),
            b"INFO" => Some(info((self.id, self.incarnation), self.started_wall, wall)),
            b"CONFIG" => config_get(rest).map(Frame::from),
            b"EVALSHA" | b"EVAL" | b"SCRIPT" => {
                // A script's `PUBLISH` answers how many connections receive it.
                keys.set_receivers(self.pubsub.counts());
                script_command(&mut self.loaded, &mut keys, scripts, &upper, rest).map(Frame::from)
            }
            b"SUBSCRIBE" | b"UNSUBSCRIBE" | b"PUBLISH" => {
                let ignore = self.ignores_subscribe;
                self.pubsub.command(session, &upper, rest, profile, ignore)
            }
            _ => return unknown_command(name, rest).into(),
        };
        for (channel, message) in keys.take_published() {
            self.pubsub.publish(&channel, &message);
        }
        reply.unwrap_or_else(|| {
            let name = String::from_utf8_lossy(&upper).to_lowercase();
            ServerReply::error(format!(
                "ERR wrong number of arguments for '{name}' command"
            ))
            .into()
        })
    }
}

/// `HELLO` with `args` on `session`: as the server's `profile` answers it, or `-NOPERM` if
/// the session's user may not run it; the session speaks the protocol the reply leaves it in.
fn hello(profile: &ServerProfile, session: &mut Session, args: &[Bytes]) -> Frame {
    let profile = match session.hello_denied() {
        true => profile.refusing(HelloAnswer::NoPerm),
        false => *profile,
    };
    let (reply, protocol) = profile.hello(args, session.id, session.protocol);
    session.protocol = protocol;
    reply
}

/// `INFO` (any section) of the process `incarnation`, started at wall time `started`: its
/// run id (new at each restart) and its uptime in whole seconds on the wall clock `wall`
/// (0 if the clock was stepped back past its start), as Redis's `INFO server` says them.
fn info((id, incarnation): (u64, u32), started: u64, wall: u64) -> Frame {
    let uptime = wall.saturating_sub(started) / 1_000_000_000;
    let run_id = (u64::from(incarnation).wrapping_mul(0x9e37_79b9_7f4a_7c15)
        ^ id.wrapping_mul(0xc2b2_ae3d_27d4_eb4f))
        | 1;
    let text = format!(
        "# Server\r\nredis_version:7.0.15\r\nrun_id:{run_id:040x}\r\nuptime_in_seconds:{uptime}\r\n"
    );
    Frame::Bulk(Bytes::from(text))
}

/// `CONFIG GET` of a pattern: the simulated node has no append-only file (`appendonly no`,
/// `appendfsync everysec`; a crash that keeps the data is a fault of its own, which the
/// node does not announce). `None` for anything but `GET pattern`.
fn config_get(rest: &[Bytes]) -> Option<ServerReply> {
    let [sub, pattern] = rest else {
        return None;
    };
    if !sub.eq_ignore_ascii_case(b"GET") {
        return None;
    }
    let all = [("appendonly", "no"), ("appendfsync", "everysec")];
    let mut out = Vec::new();
    for (name, value) in all {
        let prefix = pattern.strip_suffix(b"*").unwrap_or(pattern);
        let matches = if pattern.ends_with(b"*") {
            name.as_bytes().starts_with(prefix)
        } else {
            name.as_bytes() == &pattern[..]
        };
        if matches {
            out.push(ServerReply::Bulk(Bytes::from_static(name.as_bytes())));
            out.push(ServerReply::Bulk(Bytes::from_static(value.as_bytes())));
        }
    }
    Some(ServerReply::Array(out))
}

/// A day, in nanoseconds.
const DAY_NANOS: u64 = 86_400 * 1_000_000_000;

/// `GET`, `DEL`, `PEXPIRE`, `PTTL`, `RPUSH` on one database; `None` for a wrong arity.
fn key_command(keys: &mut Keys<'_>, name: &[u8], rest: &[Bytes]) -> Option<ServerReply> {
    let reply = match (name, rest) {
        (b"GET", [key]) => match keys.get(key) {
            Ok(value) => value.map_or(ServerReply::Nil, ServerReply::Bulk),
            Err(e) => e.into(),
        },
        (b"DEL", keys_to_delete) if !keys_to_delete.is_empty() => {
            let n = keys_to_delete.iter().filter(|k| keys.del(k)).count();
            ServerReply::Int(n as i64)
        }
        (b"PEXPIRE", [key, ms]) => match millis_arg(ms) {
            Ok(ttl) => ServerReply::Int(i64::from(keys.pexpire(key, ttl))),
            Err(e) => e,
        },
        (b"RPUSH", [key, values @ ..]) if !values.is_empty() => match keys.rpush(key, values) {
            Ok(len) => ServerReply::Int(len as i64),
            Err(e) => e.into(),
        },
        (b"PTTL", [key]) => match keys.pttl(key) {
            None => ServerReply::Int(-2),
            Some(None) => ServerReply::Int(-1),
            Some(Some(d)) => ServerReply::Int(d.as_millis() as i64),
        },
        _ => return None,
    };
    Some(reply)
}

/// `AUTH` (any password) and `SELECT`; `None` for a wrong arity.
fn connection_command(db: &mut u32, name: &[u8], rest: &[Bytes]) -> Option<ServerReply> {
    let reply = match (name, rest) {
        (b"AUTH", [_password] | [_, _password]) => ServerReply::Ok,
        (b"SELECT", [index]) => match std::str::from_utf8(index).map(str::parse::<u32>) {
            Ok(Ok(i)) if i < DATABASES => {
                *db = i;
                ServerReply::Ok
            }
            _ => ServerReply::error("ERR DB index is out of range"),
        },
        _ => return None,
    };
    Some(reply)
}

/// `EVALSHA`, `EVAL`, `SCRIPT LOAD|FLUSH` against the node's script cache `loaded`; `None`
/// for a wrong arity.
fn script_command(
    loaded: &mut BTreeSet<String>,
    keys: &mut Keys<'_>,
    scripts: &Scripts,
    name: &[u8],
    rest: &[Bytes],
) -> Option<ServerReply> {
    let reply = match (name, rest) {
        (b"EVALSHA", [sha, numkeys, tail @ ..]) => {
            match scripts.by_sha(sha).filter(|s| loaded.contains(&s.sha1)) {
                Some(script) => run_script(script, keys, numkeys, tail),
                None => ServerReply::error(NOSCRIPT),
            }
        }
        (b"EVAL", [body, numkeys, tail @ ..]) => match scripts.by_body(body) {
            Some(script) => {
                let reply = run_script(script, keys, numkeys, tail);
                loaded.insert(script.sha1.clone());
                reply
            }
            None => ServerReply::error("ERR simulated node: unknown script body"),
        },
        (b"SCRIPT", [sub, body]) if sub.eq_ignore_ascii_case(b"LOAD") => {
            match scripts.by_body(body) {
                Some(script) => {
                    loaded.insert(script.sha1.clone());
                    ServerReply::Bulk(Bytes::from(script.sha1.clone()))
                }
                None => ServerReply::error("ERR simulated node: unknown script body"),
            }
        }
        (b"SCRIPT", [sub]) if sub.eq_ignore_ascii_case(b"FLUSH") => {
            loaded.clear();
            ServerReply::Ok
        }
        _ => return None,
    };
    Some(reply)
}

/// Splits `numkeys key.. arg..` and runs the script. An error the script raises carries
/// the script's name, as Redis 7 words it (`WRONGTYPE ... script: <sha>, on
/// @user_script:1.`); one it returns (`redis.error_reply`: `kinds`, `is_returned_error`)
/// goes out as it is.
fn run_script(
    script: &NativeScript,
    keys: &mut Keys<'_>,
    numkeys: &[u8],
    tail: &[Bytes],
) -> ServerReply {
    let n = std::str::from_utf8(numkeys)
        .ok()
        .and_then(|s| s.parse::<usize>().ok());
    match n {
        Some(n) if n <= tail.len() => match (script.run)(keys, &tail[..n], &tail[n..]) {
            ServerReply::Error(e) if !crate::kinds::is_returned_error(&e) => {
                ServerReply::Error(format!("{e} script: {}, on @user_script:1.", script.sha1))
            }
            reply => reply,
        },
        Some(_) => ServerReply::error("ERR Number of keys can't be greater than number of args"),
        None => ServerReply::error("ERR value is not an integer or out of range"),
    }
}

/// Every command the node knows (the rest are unknown to it).
const KNOWN: [&[u8]; 21] = [
    b"PUBLISH", b"SET", b"DELIFEQ", b"DELEX", b"GET", b"DEL", b"PEXPIRE", b"PTTL", b"RPUSH",
    b"ZADD", b"ZINCRBY", b"ZSCORE", b"HELLO", b"AUTH", b"SELECT", b"TIME", b"EVALSHA", b"EVAL",
    b"SCRIPT", b"INFO", b"CONFIG",
];

/// Databases a node has (Redis default).
const DATABASES: u32 = 16;
/// Redis 7.0.15's reply to `TIME` where an ACL denies it.
const TIME_DENIED: &str = "NOPERM this user has no permissions to run the 'time' command";
/// Redis's exact `-NOSCRIPT` reply.
const NOSCRIPT: &str = "NOSCRIPT No matching script. Please use EVAL.";

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::profile::ServerProfile;
    use crate::script::{RELEASE_SOURCE, sha1_hex};

    fn cmd(node: &mut Node, t_ms: u64, db: &mut u32, args: &[&str]) -> ServerReply {
        let args: Vec<Bytes> = args
            .iter()
            .map(|s| Bytes::copy_from_slice(s.as_bytes()))
            .collect();
        let t = SimTime::from_duration(Duration::from_millis(t_ms));
        node.execute(t, db, &args, &Scripts::default())
    }

    #[test]
    fn a_slot_is_held_until_its_deadline_on_the_node_wall_clock() {
        use crate::kinds::rw::READ_ACQUIRE_SOURCE;
        let scripts = Scripts::default();
        let mut n = Node::new(Clock::with_skew(Instant::now(), 0.0), &scripts, false);
        let db = &mut 0;
        let keys = ["3", "r", "r:readers", "r:writer-waiting", "tok", "100"];
        let acquire = [&["EVAL", READ_ACQUIRE_SOURCE][..], &keys[..]].concat();
        assert_eq!(cmd(&mut n, 0, db, &acquire), ServerReply::Int(1));
        cmd(&mut n, 0, db, &["SET", "s", "tok"]);
        let at = |ms| SimTime::from_duration(Duration::from_millis(ms));
        assert!(n.holds_slot(at(99), b"r:readers", b"tok"));
        assert!(
            !n.holds_slot(at(100), b"r:readers", b"tok"),
            "pruned at its deadline"
        );
        assert!(!n.holds_slot(at(50), b"r:readers", b"other"));
        assert!(!n.holds_slot(at(50), b"s", b"tok"), "a string is no slot");
        assert!(!n.holds_slot(at(50), b"missing", b"tok"));
    }

    #[test]
    fn set_nx_px_and_scripts_follow_redis() {
        let scripts = Scripts::default();
        let mut n = Node::new(Clock::with_skew(Instant::now(), 0.0), &scripts, false);
        let db = &mut 0;
        assert_eq!(
            cmd(&mut n, 0, db, &["SET", "k", "a", "NX", "PX", "100"]),
            ServerReply::Ok
        );
        assert_eq!(
            cmd(&mut n, 1, db, &["SET", "k", "b", "NX", "PX", "100"]),
            ServerReply::Nil
        );
        assert_eq!(cmd(&mut n, 1, db, &["PTTL", "k"]), ServerReply::Int(99));
        // The model's own source: the tripwire in script.rs checks it is the core's.
        let release_sha = sha1_hex(RELEASE_SOURCE);
        let sha = release_sha.as_str();
        let noscript = cmd(&mut n, 2, db, &["EVALSHA", sha, "1", "k", "a"]);
        assert_eq!(noscript, ServerReply::error(NOSCRIPT));
        let eval = cmd(&mut n, 2, db, &["EVAL", RELEASE_SOURCE, "1", "k", "b"]);
        assert_eq!(eval, ServerReply::Int(0));
        assert_eq!(
            cmd(&mut n, 3, db, &["EVALSHA", sha, "1", "k", "a"]),
            ServerReply::Int(1)
        );
        assert_eq!(
            cmd(&mut n, 3, db, &["EVALSHA", sha, "1", "k", "a"]),
            ServerReply::Int(-1)
        );
        assert_eq!(cmd(&mut n, 3, db, &["SELECT", "2"]), ServerReply::Ok);
        assert_eq!(*db, 2);
        assert!(
            matches!(cmd(&mut n, 3, db, &["FLUSHALL"]), ServerReply::Error(e) if e.starts_with("ERR unknown command"))
        );
        assert!(matches!(
            cmd(&mut n, 3, db, &["SET", "k", "v", "PX", "0"]),
            ServerReply::Error(_)
        ));
        assert_eq!(
            cmd(&mut n, 3, db, &["RPUSH", "l", "x"]),
            ServerReply::Int(1)
        );
        let wrongtype = |reply: &ServerReply, suffix: &str| match reply {
            ServerReply::Error(e) => e.starts_with("WRONGTYPE") && e.ends_with(suffix),
            _ => false,
        };
        assert!(wrongtype(&cmd(&mut n, 3, db, &["GET", "l"]), "value"));
        assert_eq!(
            cmd(&mut n, 3, db, &["SET", "l", "a", "NX", "PX", "100"]),
            ServerReply::Nil,
            "NX sees a key of any type"
        );
        let wrong = cmd(&mut n, 3, db, &["EVAL", RELEASE_SOURCE, "1", "l", "a"]);
        let suffix = format!("script: {}, on @user_script:1.", sha);
        assert!(wrongtype(&wrong, &suffix), "{wrong:?}");
        n.crash();
        n.restart(SimTime::ZERO);
        let after = cmd(&mut n, 4, db, &["EVALSHA", sha, "1", "k", "a"]);
        assert_eq!(
            after,
            ServerReply::error(NOSCRIPT),
            "a restart flushes the cache"
        );
    }

    /// SEM_ACQUIRE's `-PERMITS k` is returned (`redis.error_reply`), so it goes out as it
    /// is; an error a kinds script raises carries the script's name, as the mutex's do.
    #[test]
    fn a_returned_error_goes_out_without_the_script_name() {
        use crate::kinds::semaphore::SEM_ACQUIRE_SOURCE;
        let scripts = Scripts::default();
        let mut n = Node::new(Clock::with_skew(Instant::now(), 0.0), &scripts, false);
        let db = &mut 0;
        let acquire = |n: &mut Node, db: &mut u32, token: &str, k: &str| {
            let keys = ["3", "r:permits", "r:permits:limit", "r"];
            let args = [&["EVAL", SEM_ACQUIRE_SOURCE][..], &keys, &[token, "100", k]].concat();
            cmd(n, 0, db, &args)
        };
        assert_eq!(acquire(&mut n, db, "t", "3"), ServerReply::Int(1));
        assert_eq!(
            acquire(&mut n, db, "u", "2"),
            ServerReply::error("PERMITS 3")
        );
        cmd(&mut n, 0, db, &["DEL", "r:permits"]);
        cmd(&mut n, 0, db, &["RPUSH", "r:permits", "x"]);
        let ServerReply::Error(raised) = acquire(&mut n, db, "u", "3") else {
            panic!("a list under the permits is of the wrong type")
        };
        let suffix = format!(
            "script: {}, on @user_script:1.",
            sha1_hex(SEM_ACQUIRE_SOURCE)
        );
        assert!(
            raised.starts_with("WRONGTYPE") && raised.ends_with(&suffix),
            "{raised}"
        );
    }

    /// The script-free fenced acquire: `SET NX PX`, `ZADD F GT floor n`, `ZINCRBY F 1 n`
    /// written back to back, answered one by one in order; a refused `SET` still moves F.
    #[test]
    fn the_pipelined_fenced_acquire_answers_in_order() {
        let scripts = Scripts::default();
        let mut n = Node::new(Clock::with_skew(Instant::now(), 0.0), &scripts, false);
        let db = &mut 0;
        let ServerReply::Array(time) = cmd(&mut n, 1_500, db, &["TIME"]) else {
            panic!("TIME answers an array")
        };
        let secs = 1_700_000_001u64;
        let want = [secs.to_string(), "500000".to_owned()];
        let bulk = |s: &str| ServerReply::Bulk(Bytes::copy_from_slice(s.as_bytes()));
        assert_eq!(time, want.iter().map(|s| bulk(s)).collect::<Vec<_>>());
        let floor = (secs << 20).to_string();
        let pipeline = |n: &mut Node, db: &mut u32, token: &str| {
            [
                cmd(n, 1_500, db, &["SET", "k", token, "NX", "PX", "100"]),
                cmd(n, 1_500, db, &["ZADD", "k:f", "GT", &floor, "n"]),
                cmd(n, 1_500, db, &["ZINCRBY", "k:f", "1", "n"]),
            ]
        };
        let first = ((secs << 20) + 1).to_string();
        let replies = [ServerReply::Ok, ServerReply::Int(1), bulk(&first)];
        assert_eq!(pipeline(&mut n, db, "a"), replies);
        let second = ((secs << 20) + 2).to_string();
        let refused = [ServerReply::Nil, ServerReply::Int(0), bulk(&second)];
        assert_eq!(pipeline(&mut n, db, "b"), refused, "F grows on a refusal");
        assert_eq!(
            cmd(&mut n, 1_500, db, &["ZSCORE", "k:f", "n"]),
            bulk(&second)
        );
        let mut old = Node::with_profile(
            Clock::with_skew(Instant::now(), 0.0),
            &scripts,
            false,
            ServerProfile::REDIS_5_0,
        );
        let replies = pipeline(&mut old, db, "a");
        assert_eq!(replies[1], ServerReply::error("ERR syntax error"));
        assert_eq!(replies[2], bulk("1"), "no floor on a server without GT");
    }

    /// An ACL that denies `TIME` denies it to the fenced acquire script as well: the script
    /// fails after setting K (checked on redis-server 7.0.15 with `ACL SETUSER default
    /// -time`), so such a node cannot fall back to the script form.
    #[test]
    fn a_node_denying_time_fails_the_fenced_acquire_script_after_setting_k() {
        let scripts = Scripts::default();
        let profile = ServerProfile::REDIS_7_0.denying_time();
        let clock = Clock::with_skew(Instant::now(), 0.0);
        let mut n = Node::with_profile(clock, &scripts, false, profile);
        let db = &mut 0;
        assert_eq!(
            cmd(&mut n, 1, db, &["TIME"]),
            ServerReply::error(TIME_DENIED)
        );
        let body = redlock_core::FENCED_ACQUIRE_SCRIPT.body;
        let reply = cmd(&mut n, 1, db, &["EVAL", body, "2", "k", "k:f", "t", "100"]);
        let want = format!(
            "ERR The user executing the script can't run this command or subcommand script: \
             {}, on @user_script:1.",
            redlock_core::FENCED_ACQUIRE_SCRIPT.sha1
        );
        assert_eq!(reply, ServerReply::error(want));
        let held = cmd(&mut n, 1, db, &["GET", "k"]);
        assert_eq!(held, ServerReply::Bulk(Bytes::from_static(b"t")));
        assert_eq!(
            cmd(&mut n, 1, db, &["ZSCORE", "k:f", "n"]),
            ServerReply::Nil
        );
        assert_eq!(
            cmd(&mut n, 1, db, &["ZINCRBY", "k:f", "1", "n"]),
            ServerReply::Bulk(Bytes::from_static(b"1")),
            "the pipeline's commands need no TIME"
        );
    }

    /// The script form and the pipeline form leave the same counter and answer the same
    /// token whenever `SET NX` succeeds, for F missing, below, at or above the floor; where
    /// it fails, only the pipeline moves F (by one, harmlessly).
    #[test]
    fn the_pipeline_and_the_script_agree_on_the_token() {
        let scripts = Scripts::default();
        let body = redlock_core::FENCED_ACQUIRE_SCRIPT.body;
        let (t_ms, secs) = (2_250, 1_700_000_002u64);
        let floor = secs << 20;
        let floor_arg = floor.to_string();
        let score = |r: &ServerReply| match r {
            ServerReply::Int(n) => Some(*n as u64),
            ServerReply::Bulk(b) => std::str::from_utf8(b).ok()?.parse().ok(),
            _ => None,
        };
        for start in [None, Some(5), Some(floor - 1), Some(floor), Some(floor + 7)] {
            for held in [false, true] {
                let mut runs = Vec::new();
                for pipelined in [false, true] {
                    let clock = Clock::with_skew(Instant::now(), 0.0);
                    let mut n = Node::new(clock, &scripts, false);
                    let db = &mut 0;
                    if let Some(f) = start {
                        cmd(&mut n, t_ms, db, &["ZADD", "k:f", &f.to_string(), "n"]);
                    }
                    if held {
                        cmd(&mut n, t_ms, db, &["SET", "k", "other", "PX", "100"]);
                    }
                    let token = if pipelined {
                        let set = cmd(&mut n, t_ms, db, &["SET", "k", "t", "NX", "PX", "100"]);
                        cmd(&mut n, t_ms, db, &["ZADD", "k:f", "GT", &floor_arg, "n"]);
                        let count = cmd(&mut n, t_ms, db, &["ZINCRBY", "k:f", "1", "n"]);
                        (set == ServerReply::Ok).then(|| score(&count)).flatten()
                    } else {
                        let args = ["EVAL", body, "2", "k", "k:f", "t", "100"];
                        score(&cmd(&mut n, t_ms, db, &args))
                    };
                    let counter = score(&cmd(&mut n, t_ms, db, &["ZSCORE", "k:f", "n"]));
                    runs.push((token, counter));
                }
                let (script, pipeline) = (runs[0], runs[1]);
                let want = start.unwrap_or(0).max(floor) + 1;
                if held {
                    assert_eq!(script, (None, start), "{start:?}");
                    assert_eq!(pipeline.0, None);
                    assert_eq!(pipeline.1, Some(want), "F grows on a refusal");
                } else {
                    assert_eq!(script, (Some(want), Some(want)), "{start:?}");
                    assert_eq!(pipeline, script, "{start:?}");
                }
            }
        }
    }

    /// `INFO`'s uptime counts on the wall clock from the process's start: a restart starts
    /// it again; a backdated start adds to it and leaves `TIME` alone; a wall-clock step
    /// moves both.
    #[test]
    fn uptime_follows_restarts_backdated_starts_and_wall_steps() {
        let scripts = Scripts::default();
        let mut n = Node::new(Clock::with_skew(Instant::now(), 0.0), &scripts, false);
        let uptime = |n: &mut Node, t_ms: u64| match cmd(n, t_ms, &mut 0, &["INFO", "server"]) {
            ServerReply::Bulk(b) => {
                let text = String::from_utf8_lossy(&b).into_owned();
                let line = text.lines().find(|l| l.starts_with("uptime_in_seconds:"));
                line.and_then(|l| l[18..].parse::<u64>().ok())
                    .expect("an uptime")
            }
            other => panic!("{other:?}"),
        };
        let time = |n: &mut Node, t_ms: u64| cmd(n, t_ms, &mut 0, &["TIME"]);
        assert_eq!(
            uptime(&mut n, 2_000),
            86_402,
            "up a day when the run starts"
        );
        n.crash();
        n.restart(SimTime::from_duration(Duration::from_millis(3_000)));
        assert_eq!(uptime(&mut n, 5_500), 2);
        let before = time(&mut n, 5_500);
        n.backdate_start(60_000_000_000);
        assert_eq!(uptime(&mut n, 5_500), 62);
        assert_eq!(time(&mut n, 5_500), before, "the wall clock did not move");
        n.step_wall(10_000_000_000);
        assert_eq!(uptime(&mut n, 5_500), 72);
        assert_ne!(time(&mut n, 5_500), before);
    }

    /// Runs `args` on `session` and returns the reply's bytes in the session's protocol
    /// after the command (`HELLO 3` is answered in RESP3).
    fn wire(node: &mut Node, session: &mut Session, args: &[&str]) -> String {
        let args: Vec<Bytes> = args
            .iter()
            .map(|s| Bytes::copy_from_slice(s.as_bytes()))
            .collect();
        let reply = node.run(SimTime::ZERO, session, &args, &Scripts::default());
        let mut out = bytes::BytesMut::new();
        reply.encode(&mut out, session.protocol);
        String::from_utf8(out.to_vec()).expect("text")
    }

    fn message(delivery: &Delivery, protocol: crate::resp::Protocol) -> String {
        let mut out = bytes::BytesMut::new();
        delivery.frame().encode(&mut out, protocol);
        String::from_utf8(out.to_vec()).expect("text")
    }

    /// Every byte string here is what redis-server 7.0.15 wrote to a raw socket for the same
    /// commands (valkey-server 9.1.2 writes the same, bar its shorter doubles).
    #[test]
    fn pub_sub_and_resp3_follow_redis() {
        let scripts = Scripts::default();
        let mut n = Node::new(Clock::with_skew(Instant::now(), 0.0), &scripts, true);
        let (mut a, mut b) = (n.accept(), n.accept());
        let hello = wire(&mut n, &mut a, &["HELLO", "3"]);
        assert!(hello.starts_with("%7\r\n") && hello.contains("$2\r\nid\r\n:1\r\n"));
        assert_eq!(wire(&mut n, &mut a, &["GET", "missing"]), "_\r\n");
        assert_eq!(wire(&mut n, &mut a, &["ZINCRBY", "f", "1", "n"]), ",1\r\n");
        assert_eq!(wire(&mut n, &mut a, &["ZSCORE", "f", "x"]), "_\r\n");
        assert!(wire(&mut n, &mut a, &["TIME"]).starts_with("*2\r\n$10\r\n"));
        let subscribed = ">3\r\n$9\r\nsubscribe\r\n$3\r\nch1\r\n:1\r\n";
        assert_eq!(wire(&mut n, &mut a, &["SUBSCRIBE", "ch1"]), subscribed);
        let two = format!("{subscribed}>3\r\n$9\r\nsubscribe\r\n$3\r\nch2\r\n:2\r\n");
        assert_eq!(wire(&mut n, &mut a, &["SUBSCRIBE", "ch1", "ch2"]), two);
        assert!(n.take_deliveries().is_empty());
        let held = ["SET", "k", "t", "NX", "PX", "10000"];
        assert_eq!(
            wire(&mut n, &mut a, &held),
            "+OK\r\n",
            "RESP3 runs any command"
        );
        assert_eq!(wire(&mut n, &mut a, &["PTTL", "k"]), ":10000\r\n");
        // Channels are global: a publisher in another database reaches the subscriber.
        assert_eq!(wire(&mut n, &mut b, &["SELECT", "5"]), "+OK\r\n");
        assert_eq!(wire(&mut n, &mut b, &["PUBLISH", "ch1", ""]), ":1\r\n");
        let [got] = &n.take_deliveries()[..] else {
            panic!("one receiver")
        };
        assert_eq!(got.session, a.id());
        let want = ">3\r\n$7\r\nmessage\r\n$3\r\nch1\r\n$0\r\n\r\n";
        assert_eq!(message(got, a.protocol), want);
        assert_eq!(wire(&mut n, &mut b, &["PUBLISH", "none", "x"]), ":0\r\n");
        // The release script announces a delete on the key's channel, and only a delete;
        // it answers 2 when someone was subscribed to it (here, a).
        let channel = "redlock:released:k";
        wire(&mut n, &mut a, &["SUBSCRIBE", channel]);
        let release = ["EVAL", RELEASE_SOURCE, "1", "k", "t"];
        assert_eq!(wire(&mut n, &mut b, &release), ":-1\r\n", "db 5 has no k");
        assert!(n.take_deliveries().is_empty());
        wire(&mut n, &mut b, &["SELECT", "0"]);
        assert_eq!(wire(&mut n, &mut b, &release), ":2\r\n");
        let [got] = &n.take_deliveries()[..] else {
            panic!("one receiver")
        };
        assert_eq!(
            (got.session, &got.channel[..]),
            (a.id(), channel.as_bytes())
        );
        // A subscriber publishing to itself is a receiver too.
        assert_eq!(wire(&mut n, &mut a, &["PUBLISH", "ch1", "self"]), ":1\r\n");
        assert_eq!(n.take_deliveries()[0].session, a.id());
        let gone = ">3\r\n$11\r\nunsubscribe\r\n$3\r\nch1\r\n:2\r\n";
        assert_eq!(wire(&mut n, &mut a, &["UNSUBSCRIBE", "ch1"]), gone);
        let never = ">3\r\n$11\r\nunsubscribe\r\n$6\r\nnosuch\r\n:2\r\n";
        assert_eq!(wire(&mut n, &mut a, &["UNSUBSCRIBE", "nosuch"]), never);
        let all = wire(&mut n, &mut a, &["UNSUBSCRIBE"]);
        assert!(
            all.ends_with("$18\r\nredlock:released:k\r\n:0\r\n"),
            "{all}"
        );
        let none = ">3\r\n$11\r\nunsubscribe\r\n_\r\n:0\r\n";
        assert_eq!(wire(&mut n, &mut a, &["UNSUBSCRIBE"]), none);
        assert_eq!(wire(&mut n, &mut b, &["PUBLISH", "ch1", ""]), ":0\r\n");
        assert_eq!(
            wire(&mut n, &mut a, &["SUBSCRIBE"]),
            "-ERR wrong number of arguments for 'subscribe' command\r\n"
        );
    }

    /// A connection whose user may not run `HELLO` is refused it on a server that answers
    /// everyone else, and stays on RESP2; the server's other connections are not.
    #[test]
    fn a_user_denied_hello_stays_on_resp2() {
        let scripts = Scripts::default();
        let mut n = Node::new(Clock::with_skew(Instant::now(), 0.0), &scripts, true);
        let (mut denied, mut other) = (n.accept(), n.accept());
        denied.deny_hello();
        let refused = wire(&mut n, &mut denied, &["HELLO", "3"]);
        assert!(refused.starts_with("-NOPERM "), "{refused}");
        assert_eq!(denied.protocol, crate::resp::Protocol::Resp2);
        assert_eq!(wire(&mut n, &mut denied, &["GET", "missing"]), "$-1\r\n");
        assert!(wire(&mut n, &mut other, &["HELLO", "3"]).starts_with("%7\r\n"));
        assert_eq!(other.protocol, crate::resp::Protocol::Resp3);
    }

    /// RESP2 pub/sub: confirmations are arrays and a subscribed connection may run the
    /// pub/sub commands only; closing a connection or restarting the node ends its
    /// subscriptions (redis-server 7.0.15's replies).
    #[test]
    fn a_resp2_subscriber_is_restricted_and_subscriptions_end_with_the_connection() {
        let scripts = Scripts::default();
        let mut n = Node::new(Clock::with_skew(Instant::now(), 0.0), &scripts, true);
        let (mut c, mut p) = (n.accept(), n.accept());
        let confirmed = "*3\r\n$9\r\nsubscribe\r\n$3\r\nch9\r\n:1\r\n";
        assert_eq!(wire(&mut n, &mut c, &["SUBSCRIBE", "ch9"]), confirmed);
        let refused = "-ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / \
                       PING / QUIT / RESET are allowed in this context\r\n";
        assert_eq!(wire(&mut n, &mut c, &["GET", "k"]), refused);
        assert!(wire(&mut n, &mut c, &["HELLO", "3"]).starts_with("-ERR Can't execute 'hello'"));
        assert_eq!(c.protocol, crate::resp::Protocol::Resp2);
        assert_eq!(wire(&mut n, &mut p, &["PUBLISH", "ch9", "z"]), ":1\r\n");
        let [got] = &n.take_deliveries()[..] else {
            panic!("one receiver")
        };
        let want = "*3\r\n$7\r\nmessage\r\n$3\r\nch9\r\n$1\r\nz\r\n";
        assert_eq!(message(got, c.protocol), want);
        let left = "*3\r\n$11\r\nunsubscribe\r\n$3\r\nch9\r\n:0\r\n";
        assert_eq!(wire(&mut n, &mut c, &["UNSUBSCRIBE", "ch9"]), left);
        assert_eq!(wire(&mut n, &mut c, &["GET", "k"]), "$-1\r\n");
        // A RESP3 subscriber that goes back to RESP2 is restricted from then on.
        let mut d = n.accept();
        wire(&mut n, &mut d, &["HELLO", "3"]);
        wire(&mut n, &mut d, &["SUBSCRIBE", "ch8"]);
        assert!(wire(&mut n, &mut d, &["HELLO", "2"]).starts_with("*14\r\n"));
        assert!(wire(&mut n, &mut d, &["GET", "k"]).starts_with("-ERR Can't execute 'get'"));
        assert_eq!(wire(&mut n, &mut p, &["PUBLISH", "ch8", ""]), ":1\r\n");
        n.close(&d);
        assert_eq!(
            wire(&mut n, &mut p, &["PUBLISH", "ch8", ""]),
            ":0\r\n",
            "closed"
        );
        wire(&mut n, &mut c, &["SUBSCRIBE", "ch9"]);
        n.crash();
        n.restart(SimTime::ZERO);
        assert_eq!(
            wire(&mut n, &mut p, &["PUBLISH", "ch9", ""]),
            ":0\r\n",
            "restarted"
        );
        n.take_deliveries();
        assert!(n.take_deliveries().is_empty());
    }

    /// An ACL that denies channels refuses `SUBSCRIBE` with a normal reply, even in RESP3
    /// (checked on both servers with `ACL SETUSER default resetchannels`), and the release
    /// script still releases; a node that ignores `SUBSCRIBE` confirms it and never tells.
    #[test]
    fn denied_channels_and_an_ignored_subscribe() {
        let scripts = Scripts::default();
        for (profile, denied) in [
            (
                ServerProfile::REDIS_7_0,
                "-NOPERM this user has no permissions to access one of the channels used as \
                 arguments\r\n",
            ),
            (
                ServerProfile::VALKEY_9_1,
                "-NOPERM No permissions to access a channel\r\n",
            ),
        ] {
            let clock = Clock::with_skew(Instant::now(), 0.0);
            let mut n = Node::with_profile(clock, &scripts, true, profile.denying_channels());
            let mut a = n.accept();
            wire(&mut n, &mut a, &["HELLO", "3"]);
            assert_eq!(wire(&mut n, &mut a, &["SUBSCRIBE", "ch"]), denied);
            assert_eq!(wire(&mut n, &mut a, &["PUBLISH", "ch", ""]), denied);
            wire(&mut n, &mut a, &["SET", "k", "t"]);
            let release = ["EVAL", RELEASE_SOURCE, "1", "k", "t"];
            assert_eq!(wire(&mut n, &mut a, &release), ":1\r\n");
            assert_eq!(wire(&mut n, &mut a, &["GET", "k"]), "_\r\n");
        }
        let mut n = Node::new(Clock::with_skew(Instant::now(), 0.0), &scripts, true);
        n.ignore_subscribe(true);
        let (mut a, mut b) = (n.accept(), n.accept());
        wire(&mut n, &mut a, &["HELLO", "3"]);
        let confirmed = ">3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n";
        assert_eq!(wire(&mut n, &mut a, &["SUBSCRIBE", "ch"]), confirmed);
        assert_eq!(wire(&mut n, &mut b, &["PUBLISH", "ch", ""]), ":0\r\n");
        assert!(n.take_deliveries().is_empty());
    }
}
