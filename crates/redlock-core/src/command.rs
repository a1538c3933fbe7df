//! The commands a lock sends to one node, and what each node's reply means as a vote.
//!
//! `SET key token NX PX ttl` acquires; the release (compare-and-delete) and extend
//! (compare-and-expire) scripts go out as `EVALSHA`, and as `EVAL` once on `-NOSCRIPT`.
//! Where a node has its own compare-and-delete or compare-and-set (server.rs), the release
//! or extension goes out as that command instead, chosen per node when it is sent.
//! A different acquire command (a fencing-counter script, a multi-key script) is one more
//! [`CommandKind`] with its own reply reading; the quorum logic never looks at commands.
//! The scripts of the lock kinds beyond the mutex, their keys and their reply reading are
//! kinds/mod.rs's ([`ScriptUse::Kind`]).
//! The fenced acquire's scripts, its pipeline's counter commands and the reading of its
//! counter are fencing.rs's.
//! An inspection reads with plain `GET` and `PTTL`, whose replies are values, not votes, and
//! the shared kinds' keys with inspection/reply.rs's reads (`ZREVRANGE`, `ZCARD`, `TIME`).

use bytes::{Bytes, BytesMut};

use crate::fencing::{self, FENCED_ACQUIRE_SCRIPT, RAISE_FENCE_SCRIPT};
use crate::inspection::reply::SharedRead;
use crate::kinds::args::{KindArgs, KindUse, encode_set_each, script_args as kind_script_args};
use crate::resp;
use crate::script::Script;
use crate::server::{ExtendCommand, FenceCommand, NativeUse, Offer, ReleaseCommand};
use crate::token::{Resource, Token};
pub(crate) use crate::vote::Vote;
use crate::waiters::{self, QUEUE_LEAVE_SCRIPT, QUEUE_RELEASE_SCRIPT, QueueUse};

/// Compare-and-delete: returns 1 if our key was deleted, -1 if the key was missing, 0 if it
/// holds another token (algorithm.md §6). A delete is announced on the resource's release
/// channel ([`release_channel`](crate::release_channel)), for waiters to try at once
/// (`pcall`, so that an ACL that denies the channel cannot fail the release), and then
/// returns 2 instead of 1 if any connection was subscribed to it: another client waits, so
/// the releasing client's next lock call for the resource lets it have its turn (queue.rs).
pub const RELEASE_SCRIPT: Script = Script {
    body: "local v = redis.call('GET', KEYS[1]) if v == ARGV[1] then redis.call('DEL', KEYS[1]) local n = redis.pcall('PUBLISH', 'redlock:released:' .. KEYS[1], '') if type(n) == 'number' and n > 0 then return 2 end return 1 elseif v == false then return -1 else return 0 end",
    sha1: "dfe1fb172d697ae19a57004d19e7e6b9bfd7caf5",
};

/// Compare-and-expire: returns 1 if our key's ttl was reset, 0 otherwise. It never creates
/// a missing key, so an extension cannot resurrect an expired lock.
pub const EXTEND_SCRIPT: Script = Script {
    body: "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end",
    sha1: "3c47f94dc28d90f47ce03eabe2ebe59e85e54bf1",
};

/// The RedLock.net bug, for the simulation's negative control only: an extension that
/// re-creates a missing key.
#[cfg(feature = "_mutants")]
#[doc(hidden)]
pub const RESURRECTING_EXTEND_SCRIPT: Script = Script {
    body: "local v = redis.call('GET', KEYS[1]) if v == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) elseif v == false then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1 else return 0 end",
    sha1: "b6fa0c0c2cd7bbd10159d8ed8e48b5ed1f5b01ba",
};

/// One command for one node, as the operation layer hands it out.
///
/// Send it with any client: [`args`](Self::args) gives the argument list, or
/// [`encode`](Self::encode) appends the RESP bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    kind: CommandKind,
    key: Bytes,
    /// The stored value compared or set; `None` for the reads (`GET`, `PTTL`).
    token: Option<Token>,
    /// The ttl in ms (`SET`, extension), or the counter value a fence write-back sets.
    number: u64,
    /// The fencing counter key F, for the fenced acquire and its write-back; or a lock
    /// kind's keys and number, packed (kinds/args.rs, `KindArgs`), for its scripts. One
    /// slot for both, so that no command is larger for the kinds.
    extra: Option<Bytes>,
    /// The release of a held lock: where it goes out as a native command, the client
    /// writes the release's announcement right behind it (client.rs), as the script
    /// publishes its own. Neither [`encode`](Self::encode) nor [`args`](Self::args) adds it.
    announce: bool,
}

/// Which command, and how its reply is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CommandKind {
    /// `SET key token NX PX ttl`.
    SetNxPx,
    /// `EVALSHA sha 1 key token [ttl]`.
    EvalSha(&'static Script, ScriptUse),
    /// `EVAL body 1 key token [ttl]`, after `-NOSCRIPT`.
    Eval(&'static Script, ScriptUse),
    /// A server's own command for what a script does (see server.rs).
    Native(Native),
    /// `GET key`: the inspection's read of the stored value (no script, so it works where
    /// an ACL denies scripting).
    Get,
    /// `PTTL key`: the inspection's read of the remaining time to live.
    Pttl,
    /// An inspection's read of a shared kind's key or of the node's clock (reply.rs).
    Read(SharedRead),
}

/// A server's own command in place of the release or extend script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Native {
    /// `DELIFEQ key token`: the release.
    Delifeq,
    /// `DELEX key IFEQ token`: the release.
    Delex,
    /// `SET key token IFEQ token PX ttl`: the extension.
    SetIfeq,
    /// `SET key token NX PX ttl`, `ZADD fence GT floor n`, `ZINCRBY fence 1 n`, written
    /// together: the fenced acquisition without a script (three replies, read as one).
    FencedPipeline {
        /// The counter's floor: the node's clock in whole seconds, estimated low, × 2^20.
        floor: u64,
    },
    /// `SET key token NX PX ttl` for each key of a multi-lock, written together, the vote
    /// read from the first key's reply only: a negative control's (`_mutants`,
    /// `MultiFirstKeyVote`), the set taken key by key instead of by MULTI_ACQUIRE.
    SetEach {
        /// How many keys, and so replies.
        keys: u32,
    },
}

impl Native {
    /// What the command does in place of a script.
    #[inline]
    pub(crate) fn used_for(self) -> NativeUse {
        match self {
            Self::Delifeq | Self::Delex => NativeUse::Release,
            Self::SetIfeq => NativeUse::Extend,
            Self::FencedPipeline { .. } => NativeUse::Fence,
            Self::SetEach { keys } => NativeUse::Each(keys),
        }
    }
}

/// What a script's integer reply means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ScriptUse {
    Release,
    Extend,
    /// `SET NX PX` and the counter (two keys): a number, or nil.
    FencedAcquire,
    /// Raise the counter while the key is ours (two keys): 1 or 0.
    RaiseFence,
    /// A script of a lock kind beyond the mutex (kinds/mod.rs): its own keys and reading.
    Kind(KindUse),
    /// A script of the waiters' queue (waiters/mod.rs): its own keys and reading.
    Queue(QueueUse),
}

impl Command {
    pub(crate) fn set_nx_px(resource: &Resource, token: &Token, ttl_ms: u64) -> Self {
        Self::new(CommandKind::SetNxPx, resource, token, ttl_ms)
    }

    pub(crate) fn release(resource: &Resource, token: &Token) -> Self {
        let kind = CommandKind::EvalSha(&RELEASE_SCRIPT, ScriptUse::Release);
        Self::new(kind, resource, token, 0)
    }

    /// Runs `script` (the extend script, compare-and-expire) on the key.
    pub(crate) fn extend(
        resource: &Resource,
        token: &Token,
        ttl_ms: u64,
        script: &'static Script,
    ) -> Self {
        Self::new(
            CommandKind::EvalSha(script, ScriptUse::Extend),
            resource,
            token,
            ttl_ms,
        )
    }

    /// The fenced acquire: `SET NX PX` and the fencing counter `fence_key`, in one script
    /// (`script`: [`FENCED_ACQUIRE_SCRIPT`], or a test's mutant).
    pub(crate) fn fenced_acquire(
        resource: &Resource,
        fence_key: &Bytes,
        (token, ttl_ms): (&Token, u64),
        script: &'static Script,
    ) -> Self {
        let kind = CommandKind::EvalSha(script, ScriptUse::FencedAcquire);
        Self {
            extra: Some(fence_key.clone()),
            ..Self::new(kind, resource, token, ttl_ms)
        }
    }

    /// The fence write-back: raise `fence_key` to `value` while the key holds `token`.
    pub(crate) fn raise_fence(
        resource: &Resource,
        fence_key: &Bytes,
        token: &Token,
        value: u64,
    ) -> Self {
        let kind = CommandKind::EvalSha(&RAISE_FENCE_SCRIPT, ScriptUse::RaiseFence);
        Self {
            extra: Some(fence_key.clone()),
            ..Self::new(kind, resource, token, value)
        }
    }

    /// `GET key`: the stored value (inspection).
    pub(crate) fn get(resource: &Resource) -> Self {
        Self::read(CommandKind::Get, resource)
    }

    /// `PTTL key`: the remaining time to live (inspection).
    pub(crate) fn pttl(resource: &Resource) -> Self {
        Self::read(CommandKind::Pttl, resource)
    }

    /// The inspection's `read` of `key` (`TIME` sends none).
    pub(crate) fn shared_read(read: SharedRead, key: &Resource) -> Self {
        Self::read(CommandKind::Read(read), key)
    }

    fn read(kind: CommandKind, resource: &Resource) -> Self {
        Self {
            kind,
            key: resource.bytes().clone(),
            token: None,
            number: 0,
            extra: None,
            announce: false,
        }
    }

    fn new(kind: CommandKind, resource: &Resource, token: &Token, number: u64) -> Self {
        Self {
            kind,
            key: resource.bytes().clone(),
            token: Some(token.clone()),
            number,
            extra: None,
            announce: false,
        }
    }

    /// A lock kind's script `script`, run as `usage` with the lock's keys `args`, for
    /// `resource` (whose release channel it announces), `token` and the ttl `ttl_ms`.
    pub(crate) fn kind_script(
        script: &'static Script,
        usage: KindUse,
        (resource, token, ttl_ms): (&Resource, &Token, u64),
        args: &KindArgs,
    ) -> Self {
        let kind = CommandKind::EvalSha(script, ScriptUse::Kind(usage));
        Self {
            extra: Some(args.packed().clone()),
            ..Self::new(kind, resource, token, ttl_ms)
        }
    }

    /// A waiter's attempt (waiters/mod.rs): `script` (QUEUE_ACQUIRE or a negative control's)
    /// for `resource`, `token` and the ttl `ttl_ms`, with the waiter's `place` args packed.
    pub(crate) fn queued_acquire(
        script: &'static Script,
        (resource, token, ttl_ms): (&Resource, &Token, u64),
        place: Bytes,
    ) -> Self {
        let kind = CommandKind::EvalSha(script, ScriptUse::Queue(QueueUse::Acquire));
        Self {
            extra: Some(place),
            ..Self::new(kind, resource, token, ttl_ms)
        }
    }

    /// A waiter's leave (waiters/mod.rs, QUEUE_LEAVE): its place on `resource`'s queue, by `id`.
    pub(crate) fn leave_queue(resource: &Resource, id: &Token) -> Self {
        let kind = CommandKind::EvalSha(&QUEUE_LEAVE_SCRIPT, ScriptUse::Queue(QueueUse::Leave));
        Self::new(kind, resource, id, 0)
    }

    /// A held mutex's release from the waiters' queue (waiters/mod.rs, QUEUE_RELEASE): the key
    /// of `resource` if it holds `token`, with the queue work `args` packed
    /// (`waiters::pack_release`).
    pub(crate) fn queue_release(resource: &Resource, token: &Token, args: Bytes) -> Self {
        let kind = CommandKind::EvalSha(&QUEUE_RELEASE_SCRIPT, ScriptUse::Queue(QueueUse::Release));
        Self {
            extra: Some(args),
            ..Self::new(kind, resource, token, 0)
        }
    }

    /// A multi-lock's keys `args` set one by one, `SET key token NX PX ttl` each, written
    /// together (`Native::SetEach`: a negative control's).
    pub(crate) fn set_each(
        (resource, token, ttl_ms): (&Resource, &Token, u64),
        (args, keys): (&KindArgs, u32),
    ) -> Self {
        let kind = CommandKind::Native(Native::SetEach { keys });
        Self {
            extra: Some(args.packed().clone()),
            ..Self::new(kind, resource, token, ttl_ms)
        }
    }

    /// The same command, marked as the release of a held lock (see `announce`).
    pub(crate) fn announced(self) -> Self {
        Self {
            announce: true,
            ..self
        }
    }

    /// Whether the command is a waiter's attempt (waiters/mod.rs).
    pub(crate) fn is_queued_acquire(&self) -> bool {
        let queued = ScriptUse::Queue(QueueUse::Acquire);
        matches!(self.kind, CommandKind::EvalSha(_, u) | CommandKind::Eval(_, u) if u == queued)
    }

    /// Whether the command is the release of a held lock, announced after a native form.
    pub(crate) fn announces(&self) -> bool {
        self.announce
    }

    /// The same call as the node's native command, if this is a release, extension or
    /// fenced acquisition script and `offer` says the node has one for it.
    #[inline]
    pub(crate) fn native(&self, offer: &Offer) -> Option<Native> {
        let commands = &offer.commands;
        match self.kind {
            // Only our own script has a pipeline twin (not a test's mutant), and only with
            // the node's clock known.
            CommandKind::EvalSha(script, ScriptUse::FencedAcquire)
                if commands.fence == FenceCommand::Pipeline
                    && script.sha1 == FENCED_ACQUIRE_SCRIPT.sha1 =>
            {
                (offer.fence_floor()).map(|floor| Native::FencedPipeline { floor })
            }
            CommandKind::EvalSha(_, ScriptUse::Release) => match commands.release {
                ReleaseCommand::DelIfEq => Some(Native::Delifeq),
                ReleaseCommand::DelExIfEq => Some(Native::Delex),
                _ => None,
            },
            // Only our own extend script has a native twin (not a test's mutant script).
            CommandKind::EvalSha(script, ScriptUse::Extend)
                if commands.extend == ExtendCommand::SetIfEq
                    && script.sha1 == EXTEND_SCRIPT.sha1 =>
            {
                Some(Native::SetIfeq)
            }
            _ => None,
        }
    }

    /// The same key, token and ttl sent as `kind`.
    pub(crate) fn with_kind(&self, kind: CommandKind) -> Self {
        Self {
            kind,
            ..self.clone()
        }
    }

    /// Which command this is.
    #[inline]
    pub(crate) fn kind(&self) -> CommandKind {
        self.kind
    }

    /// The same call as `EVAL`, if this is an `EVALSHA`.
    pub(crate) fn as_eval(&self) -> Option<Self> {
        self.kind.as_eval().map(|kind| self.with_kind(kind))
    }

    /// Whether this is a kind's release or a writer's abandon (kinds/mod.rs): a script that
    /// lets go of what a lock held or marked, whose `-NOSCRIPT` may come after its round
    /// stopped waiting, and which must then still run (client.rs, `answer`).
    pub(crate) fn lets_go(&self) -> bool {
        matches!(
            self.kind,
            CommandKind::EvalSha(
                _,
                ScriptUse::Kind(
                    KindUse::MultiRelease
                        | KindUse::ReadRelease
                        | KindUse::SemRelease
                        | KindUse::WriteRelease
                        | KindUse::WriteAbandon
                )
            )
        )
    }

    /// The command's arguments, name first, e.g. `["SET", key, token, "NX", "PX", "30000"]`.
    pub fn args(&self) -> Vec<Bytes> {
        let mut digits = [0u8; 20];
        let mut out = Vec::with_capacity(6);
        self.with_args(&mut digits, |args| {
            out.extend(args.iter().map(|a| Bytes::copy_from_slice(a)));
        });
        out
    }

    /// Appends the RESP encoding of the command to `buf`.
    pub fn encode(&self, buf: &mut BytesMut) {
        let mut digits = [0u8; 20];
        self.with_args(&mut digits, |args| resp::encode(buf, args));
        match self.kind {
            CommandKind::Native(Native::FencedPipeline { floor }) => {
                // The two counter commands follow the `SET` that `with_args` wrote.
                let fence = self.extra.as_deref().unwrap_or_default();
                fencing::encode_counter_commands(buf, fence, format_u64(floor, &mut digits));
            }
            CommandKind::Native(Native::SetEach { .. }) => {
                let token = self.token.as_ref().map_or(&[][..], Token::as_bytes);
                let ttl = format_u64(self.number, &mut digits);
                encode_set_each(buf, self.extra.as_deref().unwrap_or_default(), token, ttl);
            }
            _ => {}
        }
    }

    fn with_args(&self, digits: &mut [u8; 20], f: impl FnOnce(&[&[u8]])) {
        let key = &self.key[..];
        let token = self.token.as_ref().map_or(&[][..], Token::as_bytes);
        let ttl = format_u64(self.number, digits);
        let fence = self.extra.as_deref().unwrap_or_default();
        match self.kind {
            CommandKind::SetNxPx => f(&[b"SET", key, token, b"NX", b"PX", ttl]),
            CommandKind::EvalSha(script, usage) => {
                let call = [b"EVALSHA".as_slice(), script.sha1.as_bytes()];
                script_args(call, usage, [key, fence, token, ttl], f);
            }
            CommandKind::Eval(script, usage) => {
                let call = [b"EVAL".as_slice(), script.body.as_bytes()];
                script_args(call, usage, [key, fence, token, ttl], f);
            }
            CommandKind::Native(Native::Delifeq) => f(&[b"DELIFEQ", key, token]),
            CommandKind::Native(Native::Delex) => f(&[b"DELEX", key, b"IFEQ", token]),
            CommandKind::Native(Native::SetIfeq) => {
                f(&[b"SET", key, token, b"IFEQ", token, b"PX", ttl])
            }
            // The pipeline's first command; `encode` appends the other two (or, for
            // `SetEach`, the other keys').
            CommandKind::Native(Native::FencedPipeline { .. } | Native::SetEach { .. }) => {
                f(&[b"SET", key, token, b"NX", b"PX", ttl])
            }
            CommandKind::Get => f(&[b"GET", key]),
            CommandKind::Pttl => f(&[b"PTTL", key]),
            CommandKind::Read(read) => read.with_args(key, f),
        }
    }

    /// The command's name as sent: `SET`, `EVALSHA`, `EVAL`, `DELIFEQ`, `DELEX`, `GET`, `PTTL`,
    /// `ZREVRANGE`, `ZCARD` or `TIME`.
    pub fn name(&self) -> &'static str {
        self.kind.name()
    }

    /// Reads `reply` as this command's vote.
    #[cfg(test)]
    pub(crate) fn vote(&self, reply: &resp::Reply) -> Vote {
        self.kind.vote(reply)
    }
}

impl CommandKind {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::SetNxPx
            | Self::Native(Native::SetIfeq)
            | Self::Native(Native::FencedPipeline { .. })
            | Self::Native(Native::SetEach { .. }) => "SET",
            Self::EvalSha(..) => "EVALSHA",
            Self::Eval(..) => "EVAL",
            Self::Native(Native::Delifeq) => "DELIFEQ",
            Self::Native(Native::Delex) => "DELEX",
            Self::Get => "GET",
            Self::Pttl => "PTTL",
            Self::Read(read) => read.name(),
        }
    }

    /// `EVAL` of the same script, if this is an `EVALSHA`.
    pub(crate) fn as_eval(self) -> Option<Self> {
        match self {
            Self::EvalSha(script, usage) => Some(Self::Eval(script, usage)),
            _ => None,
        }
    }
}

/// Where commands are encoded. Each encoding is split off as its own [`Bytes`]; the
/// storage is reused once every `Bytes` split from it has been dropped, so a round's
/// encoding usually allocates nothing. It remembers no command.
#[derive(Debug, Default)]
pub(crate) struct Encoder {
    buf: BytesMut,
}

impl Encoder {
    /// The RESP bytes of `command`; a held lock's native release is followed by its
    /// announcement, `PUBLISH` (see `announce`), in the same bytes, so that every node of
    /// the round shares one encoding of both.
    #[inline]
    pub(crate) fn encode(&mut self, command: &Command) -> Bytes {
        command.encode(&mut self.buf);
        if command.announce
            && matches!(
                command.kind,
                CommandKind::Native(Native::Delifeq | Native::Delex)
            )
        {
            crate::notify::encode_publish(&mut self.buf, &command.key);
        }
        self.buf.split().freeze()
    }
}

/// A script call's arguments: `[EVALSHA sha | EVAL body] numkeys keys... token [number]`;
/// a lock kind's script takes its keys and number from `kind_args` (kinds/mod.rs).
fn script_args(
    [name, script]: [&[u8]; 2],
    usage: ScriptUse,
    [key, extra, token, number]: [&[u8]; 4],
    f: impl FnOnce(&[&[u8]]),
) {
    match usage {
        // `extra`: the kind's packed keys and number.
        ScriptUse::Kind(k) => kind_script_args([name, script], k, extra, [token, number], f),
        ScriptUse::Queue(q) => {
            waiters::script_args([name, script], q, (key, extra), [token, number], f)
        }
        ScriptUse::Release => f(&[name, script, b"1", key, token]),
        ScriptUse::Extend => f(&[name, script, b"1", key, token, number]),
        // `extra`: the fencing counter key.
        ScriptUse::FencedAcquire | ScriptUse::RaiseFence => {
            f(&[name, script, b"2", key, extra, token, number])
        }
    }
}

/// Writes `n` in decimal into `buf` and returns the digits.
fn format_u64(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[i..];
        }
    }
}

#[cfg(test)]
mod tests {
    use sha1::{Digest, Sha1};

    use super::*;
    use crate::io::NodeFault;
    use crate::resp::Reply;

    fn hex_sha1(s: &str) -> String {
        Sha1::digest(s.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    #[test]
    fn script_sha1_constants_match_their_bodies() {
        assert_eq!(hex_sha1(RELEASE_SCRIPT.body), RELEASE_SCRIPT.sha1);
        assert_eq!(hex_sha1(EXTEND_SCRIPT.body), EXTEND_SCRIPT.sha1);
        #[cfg(feature = "_mutants")]
        assert_eq!(
            hex_sha1(RESURRECTING_EXTEND_SCRIPT.body),
            RESURRECTING_EXTEND_SCRIPT.sha1
        );
        use crate::waiters::*;
        for script in [
            &QUEUE_ACQUIRE_SCRIPT,
            &QUEUE_LEAVE_SCRIPT,
            &QUEUE_RELEASE_SCRIPT,
        ] {
            assert_eq!(hex_sha1(script.body), script.sha1, "{}", script.body);
        }
        #[cfg(feature = "_mutants")]
        assert_eq!(
            hex_sha1(QUEUE_ACQUIRE_NEVER_PRUNES_SCRIPT.body),
            QUEUE_ACQUIRE_NEVER_PRUNES_SCRIPT.sha1
        );
        use crate::kinds::*;
        for script in KIND_SCRIPTS {
            assert_eq!(hex_sha1(script.body), script.sha1, "{}", script.body);
        }
        #[cfg(feature = "_mutants")]
        for script in [
            &READ_EXTEND_RESURRECTS_SCRIPT,
            &SEM_ACQUIRE_OFF_BY_ONE_SCRIPT,
            &WRITE_ACQUIRE_IGNORES_READERS_SCRIPT,
        ] {
            assert_eq!(hex_sha1(script.body), script.sha1, "{}", script.body);
        }
    }

    #[test]
    fn command_bytes() {
        let r = Resource::from("res");
        let t = Token::new("tok").unwrap();
        let mut buf = BytesMut::new();
        Command::set_nx_px(&r, &t, 30_000).encode(&mut buf);
        assert_eq!(
            &buf[..],
            b"*6\r\n$3\r\nSET\r\n$3\r\nres\r\n$3\r\ntok\r\n$2\r\nNX\r\n$2\r\nPX\r\n$5\r\n30000\r\n"
        );
        let release = Command::release(&r, &t);
        assert_eq!(release.args()[0], "EVALSHA");
        assert_eq!(release.args()[1], RELEASE_SCRIPT.sha1);
        assert_eq!(release.args().len(), 5);
        let eval = release.as_eval().unwrap();
        assert_eq!(eval.args()[0], "EVAL");
        assert_eq!(eval.args()[1], RELEASE_SCRIPT.body);
        assert_eq!(eval.as_eval(), None);
        let extend = Command::extend(&r, &t, 0, &EXTEND_SCRIPT);
        assert_eq!(extend.args()[5], "0");
        let extend = Command::extend(&r, &t, u64::MAX, &EXTEND_SCRIPT);
        assert_eq!(extend.args()[5], "18446744073709551615");
    }

    #[test]
    fn replies_become_votes() {
        let r = Resource::from("k");
        let t = Token::new("t").unwrap();
        let set = Command::set_nx_px(&r, &t, 1);
        let release = Command::release(&r, &t);
        let extend = Command::extend(&r, &t, 1, &EXTEND_SCRIPT);
        assert_eq!(set.vote(&Reply::Ok), Vote::Yes);
        assert_eq!(set.vote(&Reply::Nil), Vote::No);
        assert!(matches!(
            set.vote(&Reply::Integer(1)),
            Vote::Fault(NodeFault::Protocol(_))
        ));
        let noperm = Reply::Error(Bytes::from_static(b"NOPERM no permissions"));
        assert_eq!(
            set.vote(&noperm),
            Vote::Fault(NodeFault::Server {
                command: "SET",
                message: "NOPERM no permissions".into()
            })
        );
        let Vote::Fault(fault) = release.vote(&noperm) else {
            panic!("an error reply is a fault");
        };
        assert_eq!(
            fault.to_string(),
            "EVALSHA was refused: NOPERM no permissions"
        );
        assert_eq!(release.vote(&Reply::Integer(1)), Vote::Yes);
        assert_eq!(release.vote(&Reply::Integer(0)), Vote::No);
        assert_eq!(release.vote(&Reply::Integer(-1)), Vote::Missing);
        assert!(matches!(extend.vote(&Reply::Integer(-1)), Vote::Fault(_)));
        assert!(matches!(release.vote(&Reply::Integer(7)), Vote::Fault(_)));
        let noscript = Reply::Error(Bytes::from_static(b"NOSCRIPT No matching script."));
        assert_eq!(release.vote(&noscript), Vote::NoScript);
        assert!(matches!(
            release.as_eval().unwrap().vote(&noscript),
            Vote::Fault(NodeFault::Server {
                command: "EVAL",
                ..
            })
        ));
        assert_eq!(extend.vote(&Reply::Integer(0)), Vote::No);
    }
}
