//! The opt-in subjects over other transports (docs/errors.md, "TLS and unix sockets"): `tokio-tls`, `tokio-unix`,
//! `blocking-tls` and `blocking-unix` reach the same 5 nodes as `tokio` and `blocking`,
//! over each node's TLS port (`rediss://`, the kit's CA) or its unix socket, so their rows
//! compare with plain TCP in the same run.

use redlock_testkit::{Cluster, ClusterBuilder};

use crate::scenario::Subject;
use crate::{Args, Flavour, OWN_THREAD, TTL};

/// The transport subjects' names.
pub(crate) const TRANSPORT_SUBJECTS: [&str; 4] =
    ["tokio-tls", "tokio-unix", "blocking-tls", "blocking-unix"];

/// The node URLs of each transport: TLS, unix socket (empty without those listeners).
#[derive(Debug, Clone, Default)]
pub(crate) struct TransportUrls {
    tls: Vec<String>,
    unix: Vec<String>,
}

impl TransportUrls {
    /// The cluster's TLS and unix-socket URLs.
    pub(crate) fn of(cluster: &Cluster) -> Self {
        Self {
            tls: cluster.tls_urls(),
            unix: cluster
                .nodes()
                .iter()
                .filter_map(|n| n.unix_url())
                .collect(),
        }
    }
}

/// `builder` with a TLS port and a unix socket on each node if `args` names a transport
/// subject (the other runs keep the plain nodes they always had).
pub(crate) fn listeners(builder: ClusterBuilder, args: &Args) -> ClusterBuilder {
    let wanted = args
        .subjects
        .as_ref()
        .is_some_and(|s| s.iter().any(|s| TRANSPORT_SUBJECTS.contains(&s.as_str())));
    match wanted {
        true => builder.tls(false).unix_socket_too(),
        false => builder,
    }
}

/// The transport subjects `args` selects for one runtime flavour, built on it.
pub(crate) fn subjects(
    flavour: Flavour,
    urls: &TransportUrls,
    args: &Args,
) -> Result<Vec<Subject>, String> {
    let name = flavour.name();
    let mut subjects = Vec::new();
    for (subject, urls) in [("tokio-tls", &urls.tls), ("tokio-unix", &urls.unix)] {
        if args.wants_subject(subject, name) {
            let redlock = redlock_tokio::Redlock::builder(urls)
                .and_then(|b| b.config(|c| c.ttl(TTL)).build())
                .map_err(|e| format!("{subject}: build: {e}"))?;
            subjects.push(Subject::tokio_over(redlock, subject, name));
        }
    }
    if !flavour.hosts_own_thread() {
        return Ok(subjects);
    }
    for (subject, urls) in [("blocking-tls", &urls.tls), ("blocking-unix", &urls.unix)] {
        if args.wants_subject(subject, OWN_THREAD) {
            let redlock = redlock_blocking::Redlock::builder(urls)
                .and_then(|b| b.config(|c| c.ttl(TTL)).build())
                .map_err(|e| format!("{subject}: build: {e}"))?;
            subjects.push(Subject::blocking_over(redlock, subject, name));
        }
    }
    Ok(subjects)
}
