//! The error table of `docs/errors.md`, one scenario per row, generic over the
//! [`Driver`] adapter: each provokes its case on loopback and asserts the exact
//! [`LockError`] text (`to_string()`, prose, never `Debug`) and, where there is one, its
//! `source()` chain. URL and configuration rows fail at [`Driver::build`]; node rows fail
//! at `lock()` (one attempt, so each is quick) on real nodes made to refuse by the test kit.
//!
//! Where a server's words differ between versions (`NOPERM`, and errors raised inside a
//! script, which carry the script's name), the scenario asks the node itself for its reply
//! to the same command and asserts that the driver passes it on verbatim.

use std::error::Error;
use std::io::{Read, Write};
use std::net::ToSocketAddrs;
use std::time::Duration;

use redlock_core::{EXTEND_SCRIPT, MAX_TTL_MS, RELEASE_SCRIPT, Script};
use redlock_testkit::{
    Cluster, Conn, HangingPort, Node, Reply, ServerKind, refused_port, refused_ports,
};

use crate::scenarios::{FakeNode, cluster};
use crate::servers;
use crate::{Driver, Guard, LockError, LockOptions, ReleaseOutcome, RetryPolicy};

// ---- node rows: the lock fails at `lock()` and names each node by its address ----

/// A port that is not Redis: a real TCP listener on loopback that reads the client's first
/// bytes and answers as a web server would (an HTTP status line; an XML document). The
/// node's vote fails saying it does not speak RESP, quoting what it answered and what that
/// looks like; the listener stops when the test ends (its accept loop is bounded too).
pub fn errors_not_a_redis_port<D: Driver>() {
    fn answer(mut s: std::net::TcpStream, bytes: &[u8]) {
        let mut buf = [0u8; 1024];
        if s.read(&mut buf).is_ok() {
            let _ = s.write_all(bytes);
        }
    }
    let http = FakeNode::start(|s| answer(s, b"HTTP/1.1 400 Bad Request\r\n\r\n"));
    let xml = FakeNode::start(|s| answer(s, b"<?xml version=\"1.0\"?><error/>"));
    for (node, quoted, looks) in [
        (
            &http,
            r#""HTTP/1.1 400 Bad Request\r\n\r\n""#,
            "an HTTP server's answer",
        ),
        (
            &xml,
            r#""<?xml version=\"1.0\"?><error/>""#,
            "HTML or XML (a web server?)",
        ),
    ] {
        let url = node.url();
        let err = once::<D>(std::slice::from_ref(&url))
            .lock("not-redis")
            .err()
            .expect("no RESP, no lock");
        let addr = url.trim_start_matches("redis://");
        assert_node_message(
            &err,
            &format!(
                "could not acquire the lock: too many nodes failed: {addr}: protocol violation: \
                 the node does not speak RESP (no Redis or Valkey server at this address?): it \
                 answered {quoted}, which looks like {looks}"
            ),
        );
    }
}

/// Refused connection: nothing listens on the port. One node: the whole message; three: each
/// failed node in the list, separated by `; ` (the second failure decides, so two or three).
pub fn errors_refused_connection<D: Driver>() {
    let addr = refused_port().expect("a free port").to_string();
    let d = once::<D>(&[format!("redis://{addr}")]);
    let err = d.lock("refused").err().expect("nothing listens");
    assert_node_message(
        &err,
        &format!("could not acquire the lock: too many nodes failed: {addr}: connection refused"),
    );
    let addrs: Vec<String> = refused_ports(3)
        .expect("three free ports")
        .iter()
        .map(ToString::to_string)
        .collect();
    let urls: Vec<String> = addrs.iter().map(|a| format!("redis://{a}")).collect();
    let err = once::<D>(&urls)
        .lock("refused")
        .err()
        .expect("nothing listens");
    let failed = failed_nodes(&err.to_string());
    assert!(failed.len() >= 2, "{err}");
    for (node, cause) in &failed {
        assert!(
            addrs.contains(node),
            "{node} is not one of {addrs:?}: {err}"
        );
        assert_eq!(cause, "connection refused", "{err}");
    }
}

/// Connect timeout: the node's port never completes a TCP handshake (its accept queue is
/// full, so the kernel drops the SYNs), and the driver's connect timeout (200 ms) ends the
/// attempt before the attempt timeout (500 ms) would.
pub fn errors_connect_timeout<D: Driver>() {
    let port = HangingPort::start().expect("a hanging port");
    let d =
        D::build_with_connect_timeout(&[port.url()], 200 * MS, |b| b.retry(RetryPolicy::once()))
            .expect("valid configuration");
    assert_eq!(d.config().attempt_timeout(), 500 * MS);
    let err = d.lock("slow").err().expect("no connection");
    assert_node_message(
        &err,
        &format!(
            "could not acquire the lock: too many nodes failed: {}: no connection within 200ms",
            port.addr()
        ),
    );
    // With the defaults the connect timeout (1 s) is above the attempt's (500 ms for the
    // default ttl): the attempt's deadline usually comes first, and says so; a driver that
    // waits for a first connection to fail before it reads the deadline says that instead.
    let d = D::build(&[port.url()], |b| b.retry(RetryPolicy::once())).expect("valid");
    let err = d.lock("slow").err().expect("no connection");
    let failed = format!(
        "could not acquire the lock: too many nodes failed: {}",
        port.addr()
    );
    let either = [
        format!("{failed}: no answer before the attempt's deadline"),
        format!("{failed}: no connection within 1s"),
    ];
    assert!(either.contains(&err.to_string()), "{err}");
}

/// DNS failure, without a query leaving the machine: the host name has a 64-byte label, one
/// more than a DNS label can hold (RFC 1035 §2.3.4), so the resolver cannot encode a query
/// for it and fails before sending anything. Verified with glibc 2.36 (`hosts: files dns`):
/// under `strace`, `getent ahosts` and std's lookup of the name open no socket but netlink
/// (the local addresses) and nscd's Unix socket, and fail in about a millisecond. The
/// `.invalid` top-level domain (RFC 6761) has no answer, should a resolver send it anyway.
/// The system's message is the one std's resolver gives for the same name, as the drivers
/// use it.
pub fn errors_dns_failure<D: Driver>() {
    let host = unresolvable_host();
    let system = (host.as_str(), 6379)
        .to_socket_addrs()
        .expect_err("the name does not resolve")
        .to_string();
    let d = once::<D>(&[format!("redis://{host}:6379")]);
    let err = d.lock("dns").err().expect("no such host");
    assert_node_message(
        &err,
        &format!(
            "could not acquire the lock: too many nodes failed: {host}:6379: could not resolve \
             the host name: {system}"
        ),
    );
}

/// Wrong password: `AUTH` is refused with `WRONGPASS`, verbatim; the password is not shown.
/// The same for a password alone (`requirepass`) and for an ACL user.
pub fn errors_wrong_password<D: Driver>() {
    for c in [
        Cluster::builder().nodes(1).password("s3cret"),
        Cluster::builder().nodes(1).user("locker", "s3cret"),
    ] {
        let c = c.start().expect("start test nodes");
        let node = c.node(0);
        let url = node.client_url().replace("s3cret", "wrong-pw");
        let err = once::<D>(&[url])
            .lock("auth")
            .err()
            .expect("wrong password");
        assert_node_message(
            &err,
            &format!(
                "could not acquire the lock: too many nodes failed: {}: AUTH was refused: \
                 WRONGPASS invalid username-password pair or user is disabled.",
                node.addr()
            ),
        );
        assert!(!err.to_string().contains("wrong-pw"), "{err}");
    }
}

/// No password where the node requires one: `SET` is refused with `NOAUTH`, verbatim.
pub fn errors_no_password<D: Driver>() {
    let c = Cluster::builder()
        .nodes(1)
        .password("s3cret")
        .start()
        .expect("start test nodes");
    let err = once::<D>(&c.urls())
        .lock("noauth")
        .err()
        .expect("no password");
    assert_node_message(
        &err,
        &format!(
            "could not acquire the lock: too many nodes failed: {}: SET was refused: NOAUTH \
             Authentication required.",
            c.node(0).addr()
        ),
    );
}

/// The user may not run `SET` (ACL `-set`): `NOPERM`, verbatim, naming the command.
pub fn errors_noperm_on_set<D: Driver>() {
    let c = Cluster::builder()
        .nodes(1)
        .deny(["set"])
        .start()
        .expect("start test nodes");
    let node = c.node(0);
    let noperm = as_client(node, &["SET", "k", "v"]);
    assert!(
        noperm.starts_with("NOPERM") && noperm.ends_with("'set' command"),
        "{noperm}"
    );
    let err = once::<D>(&c.urls())
        .lock("noperm")
        .err()
        .expect("SET denied");
    assert_node_message(
        &err,
        &format!(
            "could not acquire the lock: too many nodes failed: {}: SET was refused: {noperm}",
            node.addr()
        ),
    );
}

/// The user may not run `EVALSHA` (ACL `-evalsha`): the lock is taken (`SET` is allowed).
/// Where releases and extensions are scripts (Redis 7), the release reports `NOPERM` from
/// the node, verbatim, naming `evalsha`, and an extension fails on it until the lock is
/// lost. Where the server has commands of its own for them (Valkey 9: `DELIFEQ`, `SET
/// IFEQ`), the lock is released and extended as if nothing were denied; with
/// `native_commands(false)` it fails as on Redis.
pub fn errors_noperm_on_evalsha<D: Driver>() {
    let c = Cluster::builder()
        .nodes(1)
        .deny(["evalsha"])
        .start()
        .expect("start test nodes");
    let node = c.node(0);
    let noperm = as_client(node, &["EVALSHA", RELEASE_SCRIPT.sha1, "1", "k", "v"]);
    assert!(
        noperm.starts_with("NOPERM") && noperm.ends_with("'evalsha' command"),
        "{noperm}"
    );
    let scripts = servers::release_command(c.server()) == "EVALSHA";
    if !scripts {
        let d = D::build(&c.urls(), |b| b.ttl(SECOND).retry(RetryPolicy::once())).unwrap();
        let g = d.lock("noperm:native").expect("SET is allowed");
        g.extend().expect("the extension is not a script here");
        assert_eq!(g.release(), Ok(vec![ReleaseOutcome::Released]));
    }
    let d = D::build(&c.urls(), |b| {
        b.ttl(SECOND)
            .retry(RetryPolicy::once())
            // On Redis 7 as configured (scripts anyway); on Valkey 9 with scripts forced.
            .native_commands(scripts)
    })
    .unwrap();
    assert_evalsha_refused(&d, node, &noperm);
}

/// With releases and extensions sent as scripts to `node`, whose user may not run
/// `EVALSHA`: the release reports the node's `noperm` and the extension fails on it.
fn assert_evalsha_refused<D: Driver>(d: &D, node: &Node, noperm: &str) {
    let g = d.lock("noperm:release").expect("SET is allowed");
    assert_eq!(
        failures(g.release().expect("a report")),
        [format!("EVALSHA was refused: {noperm}")]
    );
    let g = d.lock("noperm:extend").expect("SET is allowed");
    let err = g.extend().expect_err("EVALSHA denied");
    assert_node_message(
        &err,
        &format!(
            "lock lost: extensions were refused for good on too many nodes: {}: EVALSHA \
             was refused: {noperm}",
            node.addr()
        ),
    );
}

/// The user may not run `DELIFEQ` (ACL `-delifeq`), on a Valkey 9 node (started from
/// Valkey whatever the default server: Redis 7 has no such command to deny): the lock is
/// taken and extended (`SET` is allowed), and its release reports `NOPERM` from the node,
/// verbatim, naming `delifeq` (a refusal, not an unknown command, so no fallback to the
/// script).
pub fn errors_noperm_on_delifeq<D: Driver>() {
    let c = Cluster::builder()
        .kinds([ServerKind::Valkey])
        .min_version(ServerKind::Valkey, 9)
        .deny(["delifeq"])
        .start()
        .unwrap_or_else(|e| panic!("{e}"));
    let node = c.node(0);
    assert_eq!(servers::release_command(node.server()), "DELIFEQ");
    let noperm = as_client(node, &["DELIFEQ", "k", "v"]);
    assert!(
        noperm.starts_with("NOPERM") && noperm.ends_with("'delifeq' command"),
        "{noperm}"
    );
    let d = D::build(&c.urls(), |b| b.ttl(SECOND).retry(RetryPolicy::once())).unwrap();
    let g = d.lock("noperm:delifeq").expect("SET is allowed");
    g.extend().expect("SET IFEQ is allowed");
    assert_eq!(
        failures(g.release().expect("a report")),
        [format!("DELIFEQ was refused: {noperm}")]
    );
    assert_eq!(
        servers::calls(node, "evalsha") + servers::calls(node, "eval"),
        0
    );
}

/// `WRONGTYPE` shows where a lock's key was replaced by a key of another type (a list here):
/// acquiring it reports the key held (`SET ... NX` leaves any existing key alone), while
/// the release and the extension fail on the key's type and report the node's `WRONGTYPE`,
/// verbatim, after the command that got it: `EVALSHA was refused: ...` with the script's
/// name (Redis 7), `DELIFEQ was refused: ...` and `SET was refused: ...` (Valkey 9).
pub fn errors_wrongtype<D: Driver>() {
    let c = cluster(1);
    let node = c.node(0);
    let addr = node.addr();
    let (release, extend) = (
        servers::release_command(c.server()),
        servers::extend_command(c.server()),
    );
    let d = D::build(&c.urls(), |b| b.ttl(SECOND).retry(RetryPolicy::once())).unwrap();
    let g = d.lock("wt:release").expect("lock");
    replace_with_list(node, "wt:release");
    // Another client: this one's own calls for the resource queue behind its lock.
    let other = D::build(&c.urls(), |b| b.retry(RetryPolicy::once())).unwrap();
    let err = other.try_lock("wt:release").err().expect("the key exists");
    assert_node_message(
        &err,
        &format!("could not acquire the lock: another client holds it on {addr}"),
    );
    let wrongtype = refusal(node, release, &RELEASE_SCRIPT, "wt:release");
    assert!(wrongtype.starts_with(WRONGTYPE), "{wrongtype}");
    assert_eq!(
        failures(g.release().expect("a report")),
        [format!("{release} was refused: {wrongtype}")]
    );
    let g = d.lock("wt:extend").expect("lock");
    replace_with_list(node, "wt:extend");
    let wrongtype = refusal(node, extend, &EXTEND_SCRIPT, "wt:extend");
    assert!(wrongtype.starts_with(WRONGTYPE), "{wrongtype}");
    let err = g.extend().expect_err("the key is a list");
    assert_node_message(
        &err,
        &format!(
            "lock lost: extensions were refused for good on too many nodes: {addr}: \
             {extend} was refused: {wrongtype}"
        ),
    );
}

/// The node is out of memory (`maxmemory` 1 byte, `noeviction`): `SET` is refused with
/// `OOM`, verbatim.
pub fn errors_oom<D: Driver>() {
    let c = cluster(1);
    c.node(0).set_maxmemory(1).expect("CONFIG SET maxmemory");
    let err = once::<D>(&c.urls())
        .lock("oom")
        .err()
        .expect("out of memory");
    assert_node_message(
        &err,
        &format!(
            "could not acquire the lock: too many nodes failed: {}: SET was refused: OOM \
             command not allowed when used memory > 'maxmemory'.",
            c.node(0).addr()
        ),
    );
}

/// A replica given as a node: `SET` is refused with `READONLY`, verbatim.
pub fn errors_readonly_replica<D: Driver>() {
    let c = cluster(2);
    let replica = c.node(1);
    replica.replicate(c.node(0)).expect("REPLICAOF");
    let err = once::<D>(&[replica.url()])
        .lock("ro")
        .err()
        .expect("a replica");
    assert_node_message(
        &err,
        &format!(
            "could not acquire the lock: too many nodes failed: {}: SET was refused: READONLY \
             You can't write against a read only replica.",
            replica.addr()
        ),
    );
}

// ---- URL rows: `build` fails, naming the URL (password hidden) and the defect ----

/// A URL without a host.
pub fn errors_url_without_host<D: Driver>() {
    assert_url_error::<D>(
        "redis://:6379",
        "invalid node URL `redis://:6379`: no host: expected redis://host:port",
    );
}

/// A port that is not a number.
pub fn errors_url_port_not_a_number<D: Driver>() {
    assert_url_error::<D>(
        "redis://127.0.0.1:abc",
        "invalid node URL `redis://127.0.0.1:abc`: port `abc` is not a number",
    );
}

/// Port 0; the password in the URL is not repeated.
pub fn errors_url_port_zero<D: Driver>() {
    assert_url_error::<D>(
        "redis://app:hunter2@127.0.0.1:0",
        "invalid node URL `redis://app:***@127.0.0.1:0`: port 0 is not a valid port (1 to 65535)",
    );
}

/// A port above 65535.
pub fn errors_url_port_out_of_range<D: Driver>() {
    assert_url_error::<D>(
        "redis://127.0.0.1:65536",
        "invalid node URL `redis://127.0.0.1:65536`: port 65536 is out of range (1 to 65535)",
    );
}

/// A scheme other than `redis://`, named.
pub fn errors_url_unknown_scheme<D: Driver>() {
    assert_url_error::<D>(
        "http://127.0.0.1:6379",
        "invalid node URL `http://127.0.0.1:6379`: unknown scheme `http://`: expected redis://, \
         rediss:// or unix://",
    );
}

// ---- configuration and usage rows ----

/// ttl zero, in the configuration (at `build`) and per lock (at `lock_with`).
pub fn errors_ttl_zero<D: Driver>() {
    assert_ttl_error::<D>(
        Duration::ZERO,
        "invalid `ttl`: zero, but a lock must expire; use at least 3ms",
    );
}

/// A ttl that leaves no validity after the drift allowance (1 ms against 2.01 ms).
pub fn errors_ttl_too_small<D: Driver>() {
    assert_ttl_error::<D>(
        MS,
        "invalid `ttl`: 1ms leaves no validity after the drift allowance of 2.01ms (ttl * \
         0.01 + 2ms); use at least 3ms",
    );
}

/// A ttl above the limit (2^50 ms).
pub fn errors_ttl_too_large<D: Driver>() {
    assert_ttl_error::<D>(
        Duration::from_millis(MAX_TTL_MS + 1),
        "invalid `ttl`: 1125899906842625ms is above the limit of 1125899906842624ms (2^50 ms, \
         about 35,700 years)",
    );
}

/// An empty resource name is refused at `lock()`, before any node is asked.
pub fn errors_empty_resource<D: Driver>() {
    let d = once::<D>(&[format!("redis://{}", refused_port().expect("a free port"))]);
    let err = d.lock("").err().expect("empty resource");
    let usage = "the resource name is empty; a lock needs a name, e.g. `invoices:42`";
    assert_eq!(err.to_string(), format!("API misuse: {usage}"));
    assert_eq!(sources(&err), NO_SOURCE);
}

// ---- helpers ----

const MS: Duration = Duration::from_millis(1);
const SECOND: Duration = Duration::from_secs(1);
/// What Redis and Valkey start a `WRONGTYPE` reply with.
const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

/// A driver for `urls` that makes one attempt per lock.
fn once<D: Driver>(urls: &[String]) -> D {
    D::build(urls, |b| b.retry(RetryPolicy::once())).expect("valid configuration")
}

/// `err` reads `expected` exactly: prose that names nodes by address, never `Debug`.
fn assert_node_message(err: &LockError, expected: &str) {
    let text = err.to_string();
    assert_eq!(text, expected);
    for debug in ["node#", "Some(", "(\"", "{ "] {
        assert!(!text.contains(debug), "`{debug}` in {text}");
    }
}

/// The `(node, cause)` pairs of a "too many nodes failed: a: x; b: y" message.
fn failed_nodes(message: &str) -> Vec<(String, String)> {
    let list = message
        .strip_prefix("could not acquire the lock: too many nodes failed: ")
        .unwrap_or_else(|| panic!("not a failed acquisition: {message}"));
    list.split("; ")
        .map(|entry| {
            // `host:port: cause`: the first `: ` ends the address (a port has no space).
            let (node, cause) = entry
                .match_indices(": ")
                .next()
                .map(|(i, _)| (&entry[..i], &entry[i + 2..]))
                .unwrap_or_else(|| panic!("no cause in {entry:?} of {message}"));
            (node.to_owned(), cause.to_owned())
        })
        .collect()
}

/// The source chain of an error whose `Display` already says the cause: empty, so that
/// `{:#}` (anyhow) and chain walkers print each sentence once.
const NO_SOURCE: [String; 0] = [];

/// The texts of `err`'s `source()` chain, nearest first (bounded: 8 links at most).
fn sources(err: &dyn Error) -> Vec<String> {
    let mut out = Vec::new();
    let mut next = err.source();
    while let Some(source) = next {
        out.push(source.to_string());
        assert!(out.len() <= 8, "a source chain longer than 8: {out:?}");
        next = source.source();
    }
    out
}

/// `build` with `url` fails with `expected`, as an address error with no source repeating it.
fn assert_url_error<D: Driver>(url: &str, expected: &str) {
    let err = D::build(&[url.to_owned()], |b| b).err().expect("a bad URL");
    assert!(matches!(err, LockError::Address(_)), "{err:?}");
    assert_eq!(err.to_string(), expected);
    assert_eq!(sources(&err), NO_SOURCE);
    assert!(!format!("{err:?}").contains("hunter2"), "{err:?}");
}

/// A ttl is refused with `rule` both in the configuration and per lock.
fn assert_ttl_error<D: Driver>(ttl: Duration, rule: &str) {
    let url = format!("redis://{}", refused_port().expect("a free port"));
    let err = D::build(std::slice::from_ref(&url), |b| b.ttl(ttl))
        .err()
        .expect("a bad ttl");
    assert!(matches!(err, LockError::Config(_)), "{err:?}");
    assert_eq!(err.to_string(), format!("bad configuration: {rule}"));
    assert_eq!(sources(&err), NO_SOURCE);
    let d = once::<D>(&[url]);
    let err = d
        .lock_with("ttl", LockOptions::default().ttl(ttl))
        .err()
        .expect("a bad per-lock ttl");
    assert_eq!(err.to_string(), format!("bad configuration: {rule}"));
    assert_eq!(sources(&err), NO_SOURCE);
}

/// The causes of the nodes a release report has as failed, in node order.
fn failures(report: Vec<ReleaseOutcome>) -> Vec<String> {
    report
        .into_iter()
        .filter_map(|outcome| match outcome {
            ReleaseOutcome::Failed(fault) => Some(fault.to_string()),
            _ => None,
        })
        .collect()
}

/// The error reply a client logged in as the clients' user (not the kit's admin) gets for
/// `args`.
pub(crate) fn as_client(node: &Node, args: &[&str]) -> String {
    let mut conn = Conn::open(node.addr(), SECOND).expect("connect");
    match conn.command(args).expect("a reply") {
        Reply::Error(text) => text,
        other => panic!("{args:?} was not refused: {other}"),
    }
}

/// The node's error reply to `command` (`EVALSHA` of `script`, `DELIFEQ` or `SET ... IFEQ`)
/// run on `key` as the lock runs it.
fn refusal(node: &Node, command: &str, script: &Script, key: &str) -> String {
    let reply = match command {
        "EVALSHA" => return script_reply(node, script, key),
        "DELIFEQ" => node.command(&["DELIFEQ", key, "token"]),
        "DELEX" => node.command(&["DELEX", key, "IFEQ", "token"]),
        _ => node.command(&["SET", key, "token", "IFEQ", "token", "PX", "1000"]),
    };
    match reply {
        Ok(Reply::Error(text)) => text,
        other => panic!("{command} did not fail on {key}: {other:?}"),
    }
}

/// The node's reply to `script` run on `key` as the lock runs it (`EVALSHA`, loaded first).
fn script_reply(node: &Node, script: &Script, key: &str) -> String {
    let loaded = node
        .command(&["SCRIPT", "LOAD", script.body])
        .expect("load");
    assert_eq!(loaded, Reply::bulk(script.sha1));
    match node.command(&["EVALSHA", script.sha1, "1", key, "token", "1000"]) {
        Ok(Reply::Error(text)) => text,
        other => panic!("the script did not fail on {key}: {other:?}"),
    }
}

/// Replaces `key` by a list.
fn replace_with_list(node: &Node, key: &str) {
    node.command(&["DEL", key]).expect("DEL");
    assert_eq!(
        node.command(&["RPUSH", key, "x"]).expect("RPUSH"),
        Reply::Int(1)
    );
}

/// A host name no resolver looks up: its first label is 64 bytes, one more than DNS allows.
fn unresolvable_host() -> String {
    format!("{}.invalid", "x".repeat(64))
}
