//! The argument lists of the table's command forms: those the core sends taken from the core
//! itself (the lock's, and the fencing scripts' in [`FenceCommands`]), the native ones and
//! the script-free fence's commands, which the core does not send yet, written out by hand.
//!
//! The core's commands are not rebuilt here from its constants: a [`Lock`] of one node is
//! driven through acquire, an extension and a release, with `-NOSCRIPT` fed back to each
//! script, and the requests it hands out are what the contract sends. A change to an
//! argument's order, the ttl's unit or the `EVAL` fallback reaches the servers as the core
//! would send it.

use std::time::{Duration, Instant};

use chacha20::ChaCha20Rng;
use rand_core::SeedableRng;
use redlock_core::{
    Config, EXTEND_SCRIPT, Event, FENCED_ACQUIRE_SCRIPT, Lock, LockOptions, OpId,
    RAISE_FENCE_SCRIPT, RELEASE_SCRIPT, Reply, Request, Resource, Script,
};

use crate::table::{Form, Send, TTL_MS};

/// The number the write-back rows raise F to.
pub const RAISE_TO: u64 = 1_000_000;

/// A fencing command, as the core sends it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FenceForm {
    /// `FENCED_ACQUIRE_SCRIPT`.
    Acquire(Send),
    /// `RAISE_FENCE_SCRIPT` with [`RAISE_TO`].
    Raise(Send),
    /// `ZADD F GT <RAISE_TO> n`: the script-free acquire's raise to the floor.
    ZaddGt,
    /// `ZINCRBY F 1 n`: the script-free acquire's count.
    Zincrby,
}

/// The scripts a run sends: the core's, or a deliberately wrong one in their place.
#[derive(Debug, Clone, Copy)]
pub struct Scripts {
    /// Sent where the core sends [`RELEASE_SCRIPT`].
    pub release: &'static Script,
    /// Sent where the core sends [`EXTEND_SCRIPT`].
    pub extend: &'static Script,
    /// Sent where the core sends [`FENCED_ACQUIRE_SCRIPT`].
    pub fenced_acquire: &'static Script,
    /// Sent where the core sends [`RAISE_FENCE_SCRIPT`] (the fence write-back).
    pub raise_fence: &'static Script,
}

impl Scripts {
    /// The core's own scripts.
    pub const CORE: Self = Self {
        release: &RELEASE_SCRIPT,
        extend: &EXTEND_SCRIPT,
        fenced_acquire: &FENCED_ACQUIRE_SCRIPT,
        raise_fence: &RAISE_FENCE_SCRIPT,
    };

    /// The script of a script form, `None` for a plain command.
    pub fn of(&self, form: Form) -> Option<&'static Script> {
        match form {
            Form::Release(_) => Some(self.release),
            Form::Extend(_) => Some(self.extend),
            _ => None,
        }
    }
}

/// The negative control: the core's extend script without its token check (`PEXPIRE`
/// whatever the key holds). The contract must fail with it, or it could not tell.
pub static UNCHECKED_EXTEND_SCRIPT: Script = Script {
    body: "return redis.call('PEXPIRE', KEYS[1], ARGV[2])",
    sha1: "48c454ce8c56596d303aa9f61b5cb7e49afcac4c",
};

/// The negative control of the fencing rows: the core's fence write-back without its token
/// check (F is raised whoever holds K). The contract must fail with it, or it could not tell
/// a write-back that may raise a counter for a lock that is no longer ours.
pub static UNCHECKED_RAISE_FENCE_SCRIPT: Script = Script {
    body: "local n = tonumber(redis.call('ZSCORE', KEYS[2], 'n')) if n == nil or n < tonumber(ARGV[2]) then redis.call('ZADD', KEYS[2], ARGV[2], 'n') end return 1",
    sha1: "c7fc630c37309053a31e2afdad1707dab08e7e2b",
};

/// The core's commands on one key, and the token they carry.
#[derive(Debug, Clone)]
pub struct CoreCommands {
    /// The value the lock stores: "ours".
    pub token: String,
    set_nx_px: Vec<String>,
    release_sha: Vec<String>,
    release_eval: Vec<String>,
    extend_sha: Vec<String>,
    extend_eval: Vec<String>,
}

impl CoreCommands {
    /// Drives a one-node [`Lock`] on `key` with a ttl of [`TTL_MS`] (acquire, extend,
    /// release, each script answered `-NOSCRIPT` once) and keeps every command it sends.
    ///
    /// Panics if the core stops sending what the table lists (a fifth command, a missing
    /// `EVAL` fallback): the table would then need a new row, not a silent pass.
    pub fn new(key: &str, seed: u64) -> Self {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let config = Config::builder(1)
            .build()
            .expect("one node is a valid config");
        let options = LockOptions::default().ttl(Duration::from_millis(TTL_MS));
        let now = Instant::now();
        let op = OpId::from_raw(1);
        let mut lock = Lock::acquire(
            now,
            op,
            &config,
            Resource::new(key.to_owned()),
            &options,
            &mut rng,
        )
        .expect("a non-empty key and the default options are valid");
        let mut next = |lock: &mut Lock, reply: Reply| {
            let request = only_request(lock);
            lock.handle_reply(now, request.id, Ok(&reply), &mut rng);
            args(&request)
        };
        let set_nx_px = next(&mut lock, Reply::Ok);
        let token = match lock.poll_event() {
            Some(Event::Acquired(_)) => lock.held().expect("acquired").0,
            other => panic!("one +OK of one node acquires, got {other:?}"),
        };
        let token = String::from_utf8(token.as_bytes().to_vec()).expect("a generated token is hex");
        lock.extend(now).expect("held");
        let extend_sha = next(&mut lock, noscript());
        let extend_eval = next(&mut lock, Reply::Integer(1));
        lock.release(now).expect("held");
        let release_sha = next(&mut lock, noscript());
        let release_eval = next(&mut lock, Reply::Integer(1));
        Self {
            token,
            set_nx_px,
            release_sha,
            release_eval,
            extend_sha,
            extend_eval,
        }
    }

    /// The arguments of `form` on this key, name first, with `scripts` in place of the
    /// core's (checked to be where the core puts them).
    pub fn args(&self, form: Form, scripts: Scripts) -> Vec<String> {
        let (core, script, sent) = match form {
            Form::SetNxPx => return self.set_nx_px.clone(),
            Form::Release(send) => (&RELEASE_SCRIPT, scripts.release, send),
            Form::Extend(send) => (&EXTEND_SCRIPT, scripts.extend, send),
            Form::DelIfEq | Form::DelExIfEq | Form::SetIfEqPx => return self.native(form),
        };
        let (mut args, from, to) = match (form, sent) {
            (Form::Release(_), Send::Sha | Send::ShaFlushed) => {
                (self.release_sha.clone(), core.sha1, script.sha1)
            }
            (Form::Release(_), Send::Eval) => (self.release_eval.clone(), core.body, script.body),
            (_, Send::Sha | Send::ShaFlushed) => (self.extend_sha.clone(), core.sha1, script.sha1),
            (_, Send::Eval) => (self.extend_eval.clone(), core.body, script.body),
        };
        assert_eq!(args[1], from, "the core sends its script second");
        args[1] = to.to_owned();
        args
    }

    /// The native forms, as the server documents them, with the core's key, token and ttl.
    fn native(&self, form: Form) -> Vec<String> {
        let key = self.set_nx_px[1].clone();
        let token = self.token.clone();
        let ttl = TTL_MS.to_string();
        match form {
            Form::DelIfEq => vec!["DELIFEQ".into(), key, token],
            Form::DelExIfEq => vec!["DELEX".into(), key, "IFEQ".into(), token],
            _ => {
                let (ifeq, px) = ("IFEQ".into(), "PX".into());
                vec!["SET".into(), key, token.clone(), ifeq, token, px, ttl]
            }
        }
    }
}

/// The core's fencing commands on one key, taken from fenced [`Lock`]s as they send them.
#[derive(Debug, Clone)]
pub struct FenceCommands {
    /// The acquire's `EVALSHA` and `EVAL`, and the token they store.
    acquire: [Vec<String>; 2],
    acquire_token: String,
    /// The write-back's `EVALSHA` and `EVAL` (its number replaced by [`RAISE_TO`]), and the
    /// token it compares.
    raise: [Vec<String>; 2],
    raise_token: String,
    /// The counter key F the core names beside K.
    fence: String,
}

impl FenceCommands {
    /// Drives a fenced one-node lock (acquire, `-NOSCRIPT`, `EVAL`) and a fenced three-node
    /// lock whose quorum answers 5 and 7, so that it writes 7 back to the first node
    /// (`-NOSCRIPT`, `EVAL`), and keeps the commands.
    pub fn new(key: &str, seed: u64) -> Self {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let now = Instant::now();
        let options = LockOptions::default()
            .ttl(Duration::from_millis(TTL_MS))
            .fenced(true);
        let lock = |nodes: usize, rng: &mut ChaCha20Rng| {
            let config = Config::builder(nodes).build().expect("a valid config");
            let resource = Resource::new(key.to_owned());
            Lock::acquire(now, OpId::from_raw(1), &config, resource, &options, rng)
                .expect("a fenced lock")
        };
        let mut one = lock(1, &mut rng);
        let sha = one.poll_request().expect("the acquire");
        one.handle_reply(now, sha.id, Ok(&noscript()), &mut rng);
        let eval = one.poll_request().expect("the EVAL resend");
        let acquire = [args(&sha), args(&eval)];
        let acquire_token = acquire[0][5].clone();
        let mut three = lock(3, &mut rng);
        let sent: Vec<Request> = std::iter::from_fn(|| three.poll_request()).collect();
        three.handle_reply(now, sent[0].id, Ok(&Reply::Integer(5)), &mut rng);
        three.handle_reply(now, sent[1].id, Ok(&Reply::Integer(7)), &mut rng);
        let sha = three.poll_request().expect("the write-back");
        three.handle_reply(now, sha.id, Ok(&noscript()), &mut rng);
        let eval = three.poll_request().expect("the write-back's EVAL resend");
        let mut raise = [args(&sha), args(&eval)];
        for r in &mut raise {
            assert_eq!(
                r[6], "7",
                "the write-back carries the quorum's largest counter last"
            );
            r[6] = RAISE_TO.to_string();
        }
        let raise_token = raise[0][5].clone();
        assert!(matches!(
            three.poll_event(),
            None | Some(Event::Acquired(_))
        ));
        let fence = acquire[0][4].clone();
        assert_eq!(acquire[0][2], "2", "the fencing scripts take K and F");
        Self {
            acquire,
            acquire_token,
            raise,
            raise_token,
            fence,
        }
    }

    /// The counter key F, as the core names it beside K.
    pub fn fence_key(&self) -> &str {
        &self.fence
    }

    /// The arguments of `form`, name first, with `scripts` in place of the core's (checked
    /// to be where the core puts them), and the token "ours" is for it. The script-free
    /// commands are written out as the protocol gives them, on the core's F, until the core
    /// sends them itself.
    pub fn args(&self, form: FenceForm, scripts: Scripts) -> (Vec<String>, &str) {
        let owned = |args: &[&str]| args.iter().map(|a| (*a).to_owned()).collect();
        let (sent, token, core, script, send) = match form {
            FenceForm::ZaddGt => {
                let raise = RAISE_TO.to_string();
                let args = owned(&["ZADD", &self.fence, "GT", &raise, "n"]);
                return (args, &self.acquire_token);
            }
            FenceForm::Zincrby => {
                let args = owned(&["ZINCRBY", &self.fence, "1", "n"]);
                return (args, &self.acquire_token);
            }
            FenceForm::Acquire(send) => (
                &self.acquire,
                &self.acquire_token,
                &FENCED_ACQUIRE_SCRIPT,
                scripts.fenced_acquire,
                send,
            ),
            FenceForm::Raise(send) => (
                &self.raise,
                &self.raise_token,
                &RAISE_FENCE_SCRIPT,
                scripts.raise_fence,
                send,
            ),
        };
        let (mut args, from, to) = match send {
            Send::Eval => (sent[1].clone(), core.body, script.body),
            Send::Sha | Send::ShaFlushed => (sent[0].clone(), core.sha1, script.sha1),
        };
        assert_eq!(args[1], from, "the core sends its script second");
        args[1] = to.to_owned();
        (args, token)
    }
}

/// The one request a one-node lock has ready.
fn only_request(lock: &mut Lock) -> Request {
    let request = lock.poll_request().expect("a round sends to its one node");
    assert!(lock.poll_request().is_none(), "one node, one request");
    request
}

fn args(request: &Request) -> Vec<String> {
    let args = request.command.args();
    let text = args.iter().map(|a| String::from_utf8(a.to_vec()));
    text.collect::<Result<_, _>>()
        .expect("keys, tokens and scripts of the contract are text")
}

fn noscript() -> Reply {
    Reply::Error("NOSCRIPT No matching script. Please use EVAL.".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_core_commands_are_the_documented_forms() {
        let c = CoreCommands::new("k", 1);
        let t = c.token.as_str();
        let ttl = TTL_MS.to_string();
        let s = Scripts::CORE;
        assert_eq!(c.args(Form::SetNxPx, s), ["SET", "k", t, "NX", "PX", &ttl]);
        let release = ["EVALSHA", RELEASE_SCRIPT.sha1, "1", "k", t];
        assert_eq!(c.args(Form::Release(Send::Sha), s), release);
        assert_eq!(c.args(Form::Release(Send::ShaFlushed), s), release);
        let release = ["EVAL", RELEASE_SCRIPT.body, "1", "k", t];
        assert_eq!(c.args(Form::Release(Send::Eval), s), release);
        let extend = ["EVALSHA", EXTEND_SCRIPT.sha1, "1", "k", t, &ttl];
        assert_eq!(c.args(Form::Extend(Send::Sha), s), extend);
        let extend = ["EVAL", EXTEND_SCRIPT.body, "1", "k", t, &ttl];
        assert_eq!(c.args(Form::Extend(Send::Eval), s), extend);
        assert_eq!(c.args(Form::DelIfEq, s), ["DELIFEQ", "k", t]);
        assert_eq!(c.args(Form::DelExIfEq, s), ["DELEX", "k", "IFEQ", t]);
        let set_ifeq = ["SET", "k", t, "IFEQ", t, "PX", &ttl];
        assert_eq!(c.args(Form::SetIfEqPx, s), set_ifeq);
    }

    #[test]
    fn a_substitute_script_takes_the_core_scripts_place() {
        static OTHER: Script = Script {
            body: "return 1",
            sha1: "e0e1f9fabfc9d4800c877a703b823ac0578ff8db",
        };
        let c = CoreCommands::new("k", 1);
        let scripts = Scripts {
            extend: &OTHER,
            ..Scripts::CORE
        };
        assert_eq!(c.args(Form::Extend(Send::Sha), scripts)[1], OTHER.sha1);
        assert_eq!(c.args(Form::Extend(Send::Eval), scripts)[1], OTHER.body);
        let release = c.args(Form::Release(Send::Sha), scripts);
        assert_eq!(release[1], RELEASE_SCRIPT.sha1);
    }
}
