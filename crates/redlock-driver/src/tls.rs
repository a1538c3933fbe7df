//! From a `rediss://` URL's options ([`TlsOptions`]) to a rustls client configuration: the
//! roots to trust, the CA file, the client certificate and key. The files are read here, once,
//! when the driver is built; the connections themselves are `wire.rs`'s.

use std::path::Path;
use std::sync::Arc;

use redlock_core::{TlsOptions, TlsRoots};
use rustls::{ClientConfig, RootCertStore};
use rustls_pki_types::pem::{self, PemObject};
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// The client configuration `options` ask for, with rustls's ring provider. The error says
/// which file or which step failed, in words; it never quotes a file's contents.
pub(crate) fn client_config(options: &TlsOptions) -> Result<Arc<ClientConfig>, String> {
    let roots = root_store(options)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("no TLS protocol version: {e}"))?
        .with_root_certificates(roots);
    let config = match (&options.cert_file, &options.key_file) {
        (Some(cert), Some(key)) => {
            let chain = read_certs(cert, "client certificate")?;
            let private = PrivateKeyDer::from_pem_file(key).map_err(|e| {
                format!(
                    "cannot read a private key from `{}`: {}",
                    key.display(),
                    pem_reason(e)
                )
            })?;
            builder.with_client_auth_cert(chain, private).map_err(|e| {
                format!(
                    "the client certificate `{}` and key `{}` are unusable: {e}",
                    cert.display(),
                    key.display()
                )
            })?
        }
        _ => builder.with_no_client_auth(),
    };
    Ok(Arc::new(config))
}

/// The bundled roots `options.roots` names, plus the CA file's certificates.
fn root_store(options: &TlsOptions) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    match options.roots {
        TlsRoots::System => {
            let found = rustls_native_certs::load_native_certs();
            let (added, _) = roots.add_parsable_certificates(found.certs);
            if added == 0 && options.ca_file.is_none() {
                return Err(
                    "no usable root certificate in the system's store: give ca=PATH or roots=mozilla"
                        .into(),
                );
            }
        }
        TlsRoots::Mozilla => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
        _ => {}
    }
    if let Some(path) = &options.ca_file {
        for cert in read_certs(path, "CA")? {
            roots.add(cert).map_err(|e| {
                format!(
                    "the CA file `{}` holds a bad certificate: {e}",
                    path.display()
                )
            })?;
        }
    }
    Ok(roots)
}

/// Every certificate in the PEM file at `path`; at least one.
fn read_certs(path: &Path, what: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let cannot = |e| {
        format!(
            "cannot read the {what} file `{}`: {}",
            path.display(),
            pem_reason(e)
        )
    };
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(cannot)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(cannot)?;
    if certs.is_empty() {
        return Err(format!(
            "no PEM certificate in the {what} file `{}`",
            path.display()
        ));
    }
    Ok(certs)
}

/// A PEM error in words: the system's for a file that cannot be read.
fn pem_reason(e: pem::Error) -> String {
    match e {
        pem::Error::Io(e) => e.to_string(),
        other => other.to_string(),
    }
}
