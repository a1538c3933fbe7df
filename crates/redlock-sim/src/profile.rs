//! Which server a simulated node pretends to be: what it answers to `HELLO`, and which of
//! the native compare-and-delete / compare-and-set commands it has. Each profile follows a
//! real server's replies (checked against Redis 7.0.15 and Valkey 9.1.2 by the command
//! contract); what a profile lacks is refused exactly as that server refuses it.
//!
//! Scenarios give each node a profile ([`Scenario::servers`](crate::Scenario::servers)), so
//! that a run mixes nodes the core sends scripts to, nodes it sends native commands to, and
//! nodes it probes (their `HELLO` is refused) and that fall back.

use bytes::Bytes;

use crate::random::Dice;
use crate::resp::{Frame, Protocol, ServerReply};

/// A server a simulated node behaves as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerProfile {
    /// The `server` field of its `HELLO` reply: `redis` or `valkey`.
    pub server: &'static str,
    /// The `version` field of its `HELLO` reply.
    pub version: &'static str,
    /// How it answers `HELLO`.
    pub hello: HelloAnswer,
    /// Whether it has `DELIFEQ key value` (Valkey 9.0 and later).
    pub delifeq: bool,
    /// Whether it has `DELEX key [IFEQ value | IFNE value]` (Redis 8.4 and later).
    pub delex: bool,
    /// Whether `SET` takes `IFEQ value` (Valkey 8.1, Redis 8.4 and later).
    pub set_ifeq: bool,
    /// Whether an ACL lets the client run `TIME`. Where it does not, `TIME` is refused with
    /// `-NOPERM`, and so is a script's `redis.call('TIME')` (the fenced acquire script then
    /// fails after setting K), as Redis 7.0.15 does with `ACL SETUSER default -time`.
    pub time: bool,
    /// Whether an ACL lets the client use pub/sub channels. Where it does not, `SUBSCRIBE`
    /// and `PUBLISH` are refused with `-NOPERM` (a normal reply, also in RESP3), and a
    /// script's `redis.pcall('PUBLISH', ..)` returns an error the script goes past, as Redis
    /// 7.0.15 and Valkey 9.1.2 do with `ACL SETUSER default resetchannels`.
    pub channels: bool,
    /// A deliberate bug in the node's native commands, for the negative controls only.
    #[doc(hidden)]
    pub mutant: Option<NodeMutant>,
}

/// How a node answers `HELLO`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HelloAnswer {
    /// The server description (server, version, proto, id, mode, role, modules), a map,
    /// and `HELLO 3` switches the connection to RESP3.
    Reply,
    /// `-NOPERM`: an ACL denies the command (the server has it).
    NoPerm,
    /// `-ERR unknown command 'HELLO'`: a server older than Redis 6.
    Unknown,
}

/// A deliberately wrong native command in the node model: the simulation must catch it.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeMutant {
    /// `SET key v IFEQ cmp` creates a missing key (the RedLock.net bug, natively).
    SetIfEqCreates,
    /// `DELIFEQ key v` deletes the key whatever it holds.
    DelIfEqUnchecked,
}

impl ServerProfile {
    /// Redis 7.0.15: answers `HELLO`, has none of the native commands.
    pub const REDIS_7_0: Self = Self::new("redis", "7.0.15", false, false, false);
    /// Redis 8.4.0: `DELEX key IFEQ v` and `SET ... IFEQ`.
    pub const REDIS_8_4: Self = Self::new("redis", "8.4.0", false, true, true);
    /// Valkey 8.1.4: `SET ... IFEQ` only.
    pub const VALKEY_8_1: Self = Self::new("valkey", "8.1.4", false, false, true);
    /// Valkey 9.1.2: `DELIFEQ` and `SET ... IFEQ`.
    pub const VALKEY_9_1: Self = Self::new("valkey", "9.1.2", true, false, true);
    /// Valkey 9.1.2 whose ACL denies `HELLO`: probed, and its natives work.
    pub const VALKEY_9_1_NO_HELLO: Self = Self::VALKEY_9_1.refusing(HelloAnswer::NoPerm);
    /// Redis 8.4.0 whose ACL denies `HELLO`: probed with `DELIFEQ` (unknown here, so its
    /// release falls back to the script) and `SET ... IFEQ` (which it has).
    pub const REDIS_8_4_NO_HELLO: Self = Self::REDIS_8_4.refusing(HelloAnswer::NoPerm);
    /// Redis 7.0.15 whose ACL denies `HELLO`: probed, and both commands fall back.
    pub const REDIS_7_0_NO_HELLO: Self = Self::REDIS_7_0.refusing(HelloAnswer::NoPerm);
    /// A server without `HELLO` (before Redis 6): probed, and both commands fall back.
    pub const REDIS_5_0: Self =
        Self::new("redis", "5.0.14", false, false, false).refusing(HelloAnswer::Unknown);

    /// Every profile above.
    pub const ALL: [Self; 8] = [
        Self::REDIS_7_0,
        Self::REDIS_8_4,
        Self::VALKEY_8_1,
        Self::VALKEY_9_1,
        Self::VALKEY_9_1_NO_HELLO,
        Self::REDIS_8_4_NO_HELLO,
        Self::REDIS_7_0_NO_HELLO,
        Self::REDIS_5_0,
    ];

    const fn new(
        server: &'static str,
        version: &'static str,
        delifeq: bool,
        delex: bool,
        set_ifeq: bool,
    ) -> Self {
        Self {
            server,
            version,
            hello: HelloAnswer::Reply,
            delifeq,
            delex,
            set_ifeq,
            time: true,
            channels: true,
            mutant: None,
        }
    }

    /// The same server answering `HELLO` as `hello` says.
    pub const fn refusing(self, hello: HelloAnswer) -> Self {
        Self { hello, ..self }
    }

    /// The same server with an ACL that denies `TIME` (its scripts' `TIME` too).
    pub const fn denying_time(self) -> Self {
        Self {
            time: false,
            ..self
        }
    }

    /// The same server with an ACL that denies every pub/sub channel.
    pub const fn denying_channels(self) -> Self {
        Self {
            channels: false,
            ..self
        }
    }

    /// The same server with a bug in its native commands (negative controls only).
    #[doc(hidden)]
    pub const fn with_mutant(self, mutant: NodeMutant) -> Self {
        Self {
            mutant: Some(mutant),
            ..self
        }
    }

    /// Whether `ZADD` takes `GT` and `LT` (Redis 6.2 and later, every Valkey): the
    /// script-free fenced acquire needs it.
    pub fn has_zadd_gt(&self) -> bool {
        self.server == "valkey" || self.major_minor() >= (6, 2)
    }

    /// `(major, minor)` of [`version`](Self::version).
    pub fn major_minor(&self) -> (u32, u32) {
        let mut parts = self.version.split('.').map(|p| p.parse().unwrap_or(0));
        (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
    }

    /// The reply to `HELLO` with `args` (none, or a protocol version first) on connection
    /// `id` speaking `current`, and the protocol the connection speaks after it: the one
    /// asked for, `current` without a version or on an error.
    pub fn hello(&self, args: &[Bytes], id: u64, current: Protocol) -> (Frame, Protocol) {
        match self.hello {
            HelloAnswer::NoPerm => {
                let e = "NOPERM User default has no permissions to run the 'hello' command";
                return (ServerReply::error(e).into(), current);
            }
            HelloAnswer::Unknown => return (unknown_command(b"HELLO", args).into(), current),
            HelloAnswer::Reply => {}
        }
        let protocol = match args
            .first()
            .map(|v| std::str::from_utf8(v).map(str::parse::<i64>))
        {
            None => current,
            Some(Ok(Ok(2))) => Protocol::Resp2,
            Some(Ok(Ok(3))) => Protocol::Resp3,
            Some(Ok(Ok(_))) => {
                return (
                    ServerReply::error("NOPROTO unsupported protocol version").into(),
                    current,
                );
            }
            Some(_) => {
                let e = "ERR Protocol version is not an integer or out of range";
                return (ServerReply::error(e).into(), current);
            }
        };
        let text = Frame::text;
        // Valkey lists its built-in Lua engine as a module; Redis lists none.
        let modules = if self.server == "valkey" && self.major_minor() >= (9, 0) {
            vec![Frame::Map(vec![
                (text("name"), text("lua")),
                (text("ver"), Frame::Int(1)),
                (text("path"), text("lua")),
                (text("args"), Frame::Array(Vec::new())),
            ])]
        } else {
            Vec::new()
        };
        let proto = match protocol {
            Protocol::Resp2 => 2,
            Protocol::Resp3 => 3,
        };
        let map = Frame::Map(vec![
            (text("server"), text(self.server)),
            (text("version"), text(self.version)),
            (text("proto"), Frame::Int(proto)),
            (text("id"), Frame::Int(id as i64)),
            (text("mode"), text("standalone")),
            (text("role"), text("master")),
            (text("modules"), Frame::Array(modules)),
        ]);
        (map, protocol)
    }

    /// Per-node profiles for a cluster of `nodes`, drawn from `d`: all scripts (Redis 7),
    /// all native (Valkey 9.1 or Redis 8.4), every node probed, or each node at random.
    pub fn draw(d: &mut Dice, nodes: usize) -> Vec<Self> {
        let all = |p: Self| vec![p; nodes];
        match d.index(6) {
            0 => all(Self::REDIS_7_0),
            1 => all(Self::VALKEY_9_1),
            2 => all(Self::REDIS_8_4),
            3 => (0..nodes)
                .map(|_| [Self::VALKEY_9_1_NO_HELLO, Self::REDIS_7_0_NO_HELLO][d.index(2)])
                .collect(),
            _ => (0..nodes)
                .map(|_| Self::ALL[d.index(Self::ALL.len())])
                .collect(),
        }
    }
}

impl Default for ServerProfile {
    /// [`ServerProfile::REDIS_7_0`].
    fn default() -> Self {
        Self::REDIS_7_0
    }
}

/// The real servers' reply to a command they do not have: the name as sent, then the
/// arguments quoted, up to 128 bytes of them
/// (`ERR unknown command 'DELIFEQ', with args beginning with: 'k' 'v' `).
pub fn unknown_command(name: &[u8], args: &[Bytes]) -> ServerReply {
    let name = String::from_utf8_lossy(&name[..name.len().min(128)]).into_owned();
    let mut listed = String::new();
    for arg in args {
        if listed.len() >= 128 {
            break;
        }
        let room = 128 - listed.len();
        let arg = String::from_utf8_lossy(&arg[..arg.len().min(room)]).into_owned();
        listed.push_str(&format!("'{arg}' "));
    }
    ServerReply::error(format!(
        "ERR unknown command '{name}', with args beginning with: {listed}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    #[test]
    fn unknown_commands_are_refused_in_the_servers_words() {
        let e = unknown_command(b"DELIFEQ", &[b("k"), b("v")]);
        let want = "ERR unknown command 'DELIFEQ', with args beginning with: 'k' 'v' ";
        assert_eq!(e, ServerReply::error(want));
        assert_eq!(
            unknown_command(b"delex", &[]),
            ServerReply::error("ERR unknown command 'delex', with args beginning with: ")
        );
        // Arguments are quoted until 128 bytes are listed (Redis 7.0.15 cuts the same way).
        let long = unknown_command(b"X", &[b(&"a".repeat(200)), b("b")]);
        let want = format!(
            "ERR unknown command 'X', with args beginning with: '{}' ",
            "a".repeat(128)
        );
        assert_eq!(long, ServerReply::error(want));
    }

    fn wire(reply: &Frame, protocol: Protocol) -> Vec<u8> {
        let mut out = bytes::BytesMut::new();
        reply.encode(&mut out, protocol);
        out.to_vec()
    }

    /// The bytes are redis-server 7.0.15's and valkey-server 9.1.2's answers to `HELLO 3`
    /// and `HELLO` on a new connection (ids as theirs), captured with a raw socket.
    #[test]
    fn hello_answers_by_profile() {
        let (reply, proto) = ServerProfile::REDIS_7_0.hello(&[b("3")], 3, Protocol::Resp2);
        assert_eq!(proto, Protocol::Resp3);
        let want = "%7\r\n$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n$6\r\n7.0.15\r\n\
                    $5\r\nproto\r\n:3\r\n$2\r\nid\r\n:3\r\n$4\r\nmode\r\n$10\r\nstandalone\r\n\
                    $4\r\nrole\r\n$6\r\nmaster\r\n$7\r\nmodules\r\n*0\r\n";
        assert_eq!(String::from_utf8(wire(&reply, proto)).unwrap(), want);
        let (reply, proto) = ServerProfile::VALKEY_9_1.hello(&[], 3, Protocol::Resp2);
        assert_eq!(proto, Protocol::Resp2, "no version keeps the protocol");
        let wire2 = String::from_utf8(wire(&reply, proto)).unwrap();
        assert!(
            wire2.starts_with("*14\r\n$6\r\nserver\r\n$6\r\nvalkey\r\n"),
            "{wire2}"
        );
        assert!(wire2.contains("$5\r\nproto\r\n:2\r\n"));
        let (reply, proto) = ServerProfile::VALKEY_9_1.hello(&[], 3, Protocol::Resp3);
        assert_eq!(proto, Protocol::Resp3, "no version keeps RESP3 too");
        let wire3 = String::from_utf8(wire(&reply, proto)).unwrap();
        let modules = "$7\r\nmodules\r\n*1\r\n%4\r\n$4\r\nname\r\n$3\r\nlua\r\n$3\r\nver\r\n:1\r\n\
                       $4\r\npath\r\n$3\r\nlua\r\n$4\r\nargs\r\n*0\r\n";
        assert!(
            wire3.starts_with("%7\r\n") && wire3.ends_with(modules),
            "{wire3}"
        );
        let (_, proto) = ServerProfile::VALKEY_9_1.hello(&[b("2")], 3, Protocol::Resp3);
        assert_eq!(proto, Protocol::Resp2);
        let refused = |p: ServerProfile, arg: &str| p.hello(&[b(arg)], 1, Protocol::Resp2);
        for (profile, arg, start) in [
            (ServerProfile::REDIS_7_0_NO_HELLO, "3", "NOPERM"),
            (ServerProfile::REDIS_5_0, "3", "ERR unknown command 'HELLO'"),
            (ServerProfile::REDIS_7_0, "4", "NOPROTO"),
            (
                ServerProfile::REDIS_7_0,
                "x",
                "ERR Protocol version is not an integer",
            ),
        ] {
            let (reply, proto) = refused(profile, arg);
            assert!(
                matches!(&reply, Frame::Error(e) if e.starts_with(start)),
                "{reply:?}"
            );
            assert_eq!(proto, Protocol::Resp2, "a refusal keeps RESP2");
        }
        assert_eq!(ServerProfile::REDIS_8_4.major_minor(), (8, 4));
        let mut d = Dice::new(1);
        for _ in 0..50 {
            assert_eq!(ServerProfile::draw(&mut d, 5).len(), 5);
        }
    }
}
