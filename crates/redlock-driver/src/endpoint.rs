//! Where and how a driver reaches each node ([`Endpoint`]): the socket to open ([`Dial`])
//! and, for `rediss://`, the TLS client to run over it. Built once per driver, so certificate
//! files are read when the driver is built, not at each connect.

use std::path::PathBuf;
use std::sync::Arc;

use bytes::BytesMut;
use redlock_core::{ConnectionError, NodeAddress, TlsOptions, Transport};
use rustls::ClientConfig;
use rustls_pki_types::ServerName;

use crate::error::LockError;
use crate::tls::client_config;
use crate::wire::Wire;

/// The socket a runtime opens for a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dial {
    /// A TCP connection to `host:port` (the name resolved by the runtime).
    Tcp {
        /// Host name or IP address.
        host: String,
        /// TCP port.
        port: u16,
    },
    /// A unix-domain socket at this path.
    Unix(PathBuf),
}

/// How one node is reached: the socket, and the TLS client over it, if any.
#[derive(Debug, Clone)]
pub struct Endpoint {
    dial: Dial,
    tls: Option<TlsClient>,
}

/// What each TLS connection to a node starts from.
#[derive(Debug, Clone)]
struct TlsClient {
    config: Arc<ClientConfig>,
    /// The name sent for SNI and checked against the certificate: the URL's host.
    name: ServerName<'static>,
    /// Whether a client certificate is configured (for a clearer refusal message).
    client_cert: bool,
}

impl Endpoint {
    /// The endpoints of `addrs`, in order. Nodes with the same TLS options share one
    /// configuration (their files are read once). Fails with [`LockError::Tls`] naming the
    /// node if a file cannot be read or used, or a host is no valid TLS server name.
    pub fn for_nodes(addrs: &[NodeAddress]) -> Result<Vec<Self>, LockError> {
        let mut configs: Vec<(&TlsOptions, Arc<ClientConfig>)> = Vec::new();
        let mut out = Vec::with_capacity(addrs.len());
        for addr in addrs {
            let fail = |reason: String| LockError::Tls {
                node: addr.to_string(),
                reason,
            };
            let (dial, tls) = match &addr.transport {
                Transport::Unix(path) => (Dial::Unix(path.clone()), None),
                Transport::Tls(options) => {
                    let config = match configs.iter().find(|(o, _)| *o == options) {
                        Some((_, config)) => config.clone(),
                        None => {
                            let config = client_config(options).map_err(fail)?;
                            configs.push((options, config.clone()));
                            config
                        }
                    };
                    let name = ServerName::try_from(addr.host.clone())
                        .map_err(|e| fail(format!("`{}` is no TLS server name: {e}", addr.host)))?;
                    let client_cert = options.cert_file.is_some();
                    (
                        tcp(addr),
                        Some(TlsClient {
                            config,
                            name,
                            client_cert,
                        }),
                    )
                }
                _ => (tcp(addr), None),
            };
            out.push(Self { dial, tls });
        }
        Ok(out)
    }

    /// The socket to open.
    pub fn dial(&self) -> &Dial {
        &self.dial
    }

    /// Whether the node is reached over TLS.
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// A fresh [`Wire`] for a connection just opened; a TLS wire queues its first handshake
    /// bytes into `out`, which the driver sends before anything else.
    pub fn wire(&self, out: &mut BytesMut) -> Result<Wire, ConnectionError> {
        match &self.tls {
            None => Ok(Wire::plain()),
            Some(t) => Wire::tls(t.config.clone(), t.name.clone(), t.client_cert, out),
        }
    }
}

fn tcp(addr: &NodeAddress) -> Dial {
    Dial::Tcp {
        host: addr.host.clone(),
        port: addr.port,
    }
}
