//! A set of independent nodes (not a Redis Cluster: Redlock nodes never talk to each other),
//! each with a [`Proxy`] in front, plus the builder that chooses binary, persistence,
//! credentials and denied commands. Starting and stopping one node is [`Node`]'s business.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::config::{ADMIN_USER, Auth, NodeConfig, NodeTls};
use crate::{Error, Node, Proxy, ServerBin, ServerCert, ServerKind, TlsCerts};

/// N running nodes on loopback, each with its own proxy. Dropping the cluster stops the
/// proxies first, then kills every node and removes its temp dir, also when a test panics.
#[derive(Debug)]
pub struct Cluster {
    // Field order is drop order: proxies go before the nodes they forward to.
    proxies: Vec<Proxy>,
    nodes: Vec<Node>,
    server: ServerBin,
    /// A TLS cluster's certificates; after the nodes, which read them.
    certs: Option<Arc<TlsCerts>>,
}

impl Cluster {
    /// Starts `n` nodes with default options (no persistence, no AUTH) and a proxy for each.
    pub fn start(n: usize) -> Result<Self, Error> {
        Self::builder().nodes(n).start()
    }

    /// Options for [`ClusterBuilder::start`]; the defaults are those of [`Cluster::start`]
    /// with three nodes.
    pub fn builder() -> ClusterBuilder {
        ClusterBuilder::default()
    }

    /// Node `i`. Panics if `i >= self.len()`, like slice indexing.
    pub fn node(&self, i: usize) -> &Node {
        &self.nodes[i]
    }

    /// The proxy in front of node `i`. Panics if `i >= self.len()`, like slice indexing.
    pub fn proxy(&self, i: usize) -> &Proxy {
        &self.proxies[i]
    }

    /// All nodes, in index order.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// All proxies, in node order.
    pub fn proxies(&self) -> &[Proxy] {
        &self.proxies
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// True for a cluster of zero nodes.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// `redis://` URLs of the nodes themselves (no proxy in the path).
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(Node::url).collect()
    }

    /// `redis://` URLs of the proxies, for clients whose links the test wants to disturb.
    pub fn proxy_urls(&self) -> Vec<String> {
        self.proxies.iter().map(Proxy::url).collect()
    }

    /// The binary the nodes run, with its kind and version. In a cluster of mixed servers
    /// ([`ClusterBuilder::kinds`]) it is node 0's; each node's own is [`Node::server`].
    pub fn server(&self) -> &ServerBin {
        &self.server
    }

    /// The certificates of a [`tls`](ClusterBuilder::tls) cluster, else `None`.
    pub fn tls_certs(&self) -> Option<&TlsCerts> {
        self.certs.as_deref()
    }

    /// Each node's [`Node::tls_url`] (empty without TLS).
    pub fn tls_urls(&self) -> Vec<String> {
        self.nodes.iter().filter_map(Node::tls_url).collect()
    }
}

/// Options for starting a [`Cluster`]: node count, server binary, AOF, credentials, denied
/// commands and timeouts.
#[derive(Debug, Clone)]
pub struct ClusterBuilder {
    nodes: usize,
    kinds: Option<Vec<ServerKind>>,
    server_bin: Option<PathBuf>,
    aof: bool,
    auth: Auth,
    deny: Vec<String>,
    start_timeout: Duration,
    command_timeout: Duration,
    /// `Some(client_cert)`: a TLS port on each node, requiring a client certificate or not.
    tls: Option<bool>,
    /// The certificate the TLS ports present.
    server_cert: ServerCert,
    /// The oldest major version each kind may run (`min_version`).
    min_versions: Vec<(ServerKind, u32)>,
    unix: bool,
    unix_too: bool,
}

impl Default for ClusterBuilder {
    fn default() -> Self {
        Self {
            nodes: 3,
            kinds: None,
            server_bin: None,
            aof: false,
            auth: Auth::None,
            deny: Vec::new(),
            start_timeout: Duration::from_secs(5),
            command_timeout: Duration::from_secs(2),
            tls: None,
            server_cert: ServerCert::Valid,
            min_versions: Vec::new(),
            unix: false,
            unix_too: false,
        }
    }
}

impl ClusterBuilder {
    /// Number of nodes (default 3); replaces any [`kinds`](Self::kinds).
    pub fn nodes(mut self, n: usize) -> Self {
        self.nodes = n;
        self.kinds = None;
        self
    }

    /// One node per entry, each running a server of that kind, in this order: a cluster of
    /// mixed servers, e.g. `[Redis, Redis, Redis, Valkey, Valkey]`. Each binary comes from
    /// [`ServerBin::of_kind`] (the default binary where it is of that kind), so a test that
    /// needs a server other than the default fails at [`start`](Self::start) with a
    /// sentence saying how to provide it ([`Error::NoServerOfKind`]). Replaces
    /// [`nodes`](Self::nodes); [`server_bin`](Self::server_bin) counts as the default.
    pub fn kinds(mut self, kinds: impl IntoIterator<Item = ServerKind>) -> Self {
        let kinds: Vec<ServerKind> = kinds.into_iter().collect();
        self.nodes = kinds.len();
        self.kinds = Some(kinds);
        self
    }

    /// Nodes of `kind` need its major version `major` or later (e.g. Valkey 9 for
    /// `DELIFEQ`): each such node's binary is the first recent enough of the places
    /// [`ServerBin::of_kind_at_least`] looks, so a Valkey 9 named by `REDLOCK_VALKEY_BIN`
    /// is taken over an older `valkey-server` on `PATH`; with none, [`start`](Self::start)
    /// fails with [`Error::ServerTooOld`], a sentence naming what was found and how to name
    /// a newer one, before any node starts. Applies to [`kinds`](Self::kinds) clusters and to
    /// a default binary of that kind.
    pub fn min_version(mut self, kind: ServerKind, major: u32) -> Self {
        self.min_versions.retain(|(k, _)| *k != kind);
        self.min_versions.push((kind, major));
        self
    }

    /// Runs this binary instead of `REDLOCK_SERVER_BIN` or the one on `PATH`.
    pub fn server_bin(mut self, path: impl Into<PathBuf>) -> Self {
        self.server_bin = Some(path.into());
        self
    }

    /// Turns on AOF with `appendfsync always`, so writes survive [`Node::kill`] +
    /// [`Node::restart`] (default off: `save ""` and `appendonly no`).
    pub fn aof(mut self, on: bool) -> Self {
        self.aof = on;
        self
    }

    /// Requires `AUTH password` (`requirepass`); replaces any [`ClusterBuilder::user`].
    pub fn password(mut self, password: impl Into<String>) -> Self {
        self.auth = Auth::Password(password.into());
        self
    }

    /// Requires `AUTH name password` for an ACL user with all permissions, with the default
    /// user switched off; replaces any [`ClusterBuilder::password`].
    pub fn user(mut self, name: impl Into<String>, password: impl Into<String>) -> Self {
        self.auth = Auth::User {
            name: name.into(),
            password: password.into(),
        };
        self
    }

    /// Takes these commands (e.g. `["set"]` or `["evalsha"]`) away from the user clients
    /// log in as: the [`user`](Self::user) if one is set, else the default user (with or
    /// without a [`password`](Self::password)). The node answers them with
    /// `-NOPERM ... 'set' command` (ACL rules `-set`); everything else stays allowed.
    ///
    /// The kit's own connections ([`Node::command`], [`Node::connect`] and its start-up
    /// probes) then log in as a user of its own, `redlock-testkit-admin`, with every
    /// permission, so a test can still run the denied commands. Names are single commands,
    /// case-insensitive, or `command|subcommand`; anything else fails [`start`](Self::start).
    pub fn deny<I, S>(mut self, commands: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.deny = commands.into_iter().map(Into::into).collect();
        self
    }

    /// How long each node may take to answer `PING` after a start or restart (default 5 s).
    pub fn start_timeout(mut self, timeout: Duration) -> Self {
        self.start_timeout = timeout;
        self
    }

    /// Default timeout of [`Node::command`] for connect, write and reply (default 2 s).
    pub fn command_timeout(mut self, timeout: Duration) -> Self {
        self.command_timeout = timeout;
        self
    }

    /// Gives each node a TLS port besides its plain one, with certificates the kit makes for
    /// the cluster ([`Cluster::tls_certs`]); with `client_cert`, the TLS port requires a
    /// client certificate signed by the cluster's CA (mTLS). Clients reach it at
    /// [`Node::tls_url`]; the kit itself keeps to the plain port.
    pub fn tls(mut self, client_cert: bool) -> Self {
        self.tls = Some(client_cert);
        self
    }

    /// The certificate each node's TLS port presents (default [`ServerCert::Valid`]); needs
    /// [`tls`](Self::tls).
    pub fn server_cert(mut self, cert: ServerCert) -> Self {
        self.server_cert = cert;
        self
    }

    /// Makes each node listen on a unix socket only ([`Node::socket_path`], no TCP port):
    /// [`Node::url`] is then `unix:///path`, and the kit talks to it over the socket too.
    /// The proxies of such a cluster reach nothing.
    pub fn unix_socket(mut self) -> Self {
        self.unix = true;
        self
    }

    /// Makes each node listen on a unix socket ([`Node::unix_url`]) besides its TCP port,
    /// so one run can reach the same servers both ways (the cluster bench does).
    pub fn unix_socket_too(mut self) -> Self {
        self.unix_too = true;
        self
    }

    /// Finds the binary, then starts the nodes one by one and a proxy in front of each. On
    /// error, whatever was already started is stopped again.
    pub fn start(self) -> Result<Cluster, Error> {
        if self.start_timeout.is_zero() || self.command_timeout.is_zero() {
            return Err(Error::Config(
                "timeouts must be greater than zero".to_owned(),
            ));
        }
        if let Auth::User { name, .. } = &self.auth
            && (name.is_empty() || name.contains(char::is_whitespace))
        {
            return Err(Error::Config(format!(
                "ACL user name {name:?} is not one word"
            )));
        }
        if let Some(bad) = self.deny.iter().find(|c| !is_command_name(c)) {
            return Err(Error::Config(format!(
                "denied command {bad:?} is not a command name (e.g. \"set\" or \"client|kill\")"
            )));
        }
        if matches!(&self.auth, Auth::User { name, .. } if name == ADMIN_USER) {
            return Err(Error::Config(format!(
                "ACL user name {ADMIN_USER:?} is the kit's own"
            )));
        }
        let bins = self.binaries()?;
        let certs = match self.tls {
            Some(_) => Some(Arc::new(TlsCerts::generate()?)),
            None => None,
        };
        let tls = certs
            .as_ref()
            .zip(self.tls)
            .map(|(certs, client_cert)| NodeTls {
                certs: Arc::clone(certs),
                client_cert,
                server_cert: self.server_cert,
            });
        let configs: Vec<Arc<NodeConfig>> = bins
            .iter()
            .map(|bin| {
                Arc::new(NodeConfig {
                    bin: bin.clone(),
                    aof: self.aof,
                    auth: self.auth.clone(),
                    deny: self.deny.iter().map(|c| c.to_ascii_lowercase()).collect(),
                    start_timeout: self.start_timeout,
                    command_timeout: self.command_timeout,
                    tls: tls.clone(),
                    unix: self.unix,
                    unix_too: self.unix_too,
                })
            })
            .collect();
        let server = bins.into_iter().next().expect("at least one binary");
        // Each `?` below drops the nodes and proxies collected so far, which stops them.
        let nodes = (0..self.nodes)
            .map(|i| Node::start(Arc::clone(&configs[i.min(configs.len() - 1)])))
            .collect::<Result<Vec<_>, _>>()?;
        let proxies = nodes
            .iter()
            .map(|node| Proxy::start(node.addr()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Cluster {
            proxies,
            nodes,
            certs,
            server,
        })
    }
}

impl ClusterBuilder {
    /// The binary of each node ([`kinds`](Self::kinds)), or the default binary alone.
    fn binaries(&self) -> Result<Vec<ServerBin>, Error> {
        let default = || match &self.server_bin {
            Some(path) => ServerBin::at(path),
            None => ServerBin::discover(),
        };
        let min = |kind: ServerKind| {
            (self.min_versions.iter())
                .find(|(k, _)| *k == kind)
                .map_or(0, |(_, major)| *major)
        };
        let recent = |b: &ServerBin| b.major() >= min(b.kind());
        let kinds = match &self.kinds {
            Some(kinds) if !kinds.is_empty() => kinds,
            _ => {
                let default = default()?;
                return match recent(&default) {
                    true => Ok(vec![default]),
                    false => Ok(vec![ServerBin::of_kind_at_least(
                        default.kind(),
                        min(default.kind()),
                    )?]),
                };
            }
        };
        let default = default().ok();
        let mut found: Vec<ServerBin> = Vec::new();
        kinds
            .iter()
            .map(|&kind| {
                let known =
                    (default.iter().chain(found.iter())).find(|b| b.kind() == kind && recent(b));
                let bin = match known {
                    Some(bin) => bin.clone(),
                    None => ServerBin::of_kind_at_least(kind, min(kind))?,
                };
                found.push(bin.clone());
                Ok(bin)
            })
            .collect()
    }
}

/// A command name as ACL rules take it: letters, digits and `_`, with one optional
/// `|subcommand`.
fn is_command_name(name: &str) -> bool {
    let word = |w: &str| !w.is_empty() && w.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    match name.split_once('|') {
        Some((command, sub)) => word(command) && word(sub),
        None => word(name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_names_are_single_words() {
        for good in ["set", "EVALSHA", "client|kill", "script_x"] {
            assert!(is_command_name(good), "{good}");
        }
        for bad in [
            "", "set get", "-set", "+@all", "@write", "a|", "|b", "a|b|c", "set\n",
        ] {
            assert!(!is_command_name(bad), "{bad:?}");
        }
    }

    #[test]
    fn bad_denied_commands_and_the_admin_name_are_refused_before_starting() {
        let err = Cluster::builder()
            .deny(["set", "+@all"])
            .start()
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("denied command \"+@all\" is not a command name"),
            "{err}"
        );
        let err = Cluster::builder()
            .user(ADMIN_USER, "pw")
            .deny(["set"])
            .start()
            .unwrap_err();
        assert!(matches!(err, Error::Config(_)), "{err}");
    }
}
