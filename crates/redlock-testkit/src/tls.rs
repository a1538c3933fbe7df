//! Test certificates for TLS nodes ([`TlsCerts`]), made with rcgen at cluster start: a CA,
//! a server certificate it signs for the IP address 127.0.0.1 only (so `localhost` is a name
//! mismatch), a client certificate it signs (mTLS), and an unrelated CA that trusts none of
//! them. PEM files in a temp dir that lives as long as the cluster.

use std::fs;
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose, SanType,
};

use crate::Error;
use crate::process::TempDir;

/// The PEM files of a TLS cluster. Paths only; the files go when the cluster does.
#[derive(Debug)]
pub struct TlsCerts {
    dir: TempDir,
}

impl TlsCerts {
    /// Generates every certificate and writes the PEM files.
    pub(crate) fn generate() -> Result<Self, Error> {
        let certs = Self {
            dir: TempDir::new("redlock-tls")?,
        };
        let ca = certs.write_ca("redlock test CA", CA)?;
        // Signed by nobody the nodes trust: the "untrusted CA" of the tests.
        certs.write_ca("redlock unrelated CA", OTHER_CA)?;
        let server = leaf(
            "redlock test node",
            vec![SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST))],
            ExtendedKeyUsagePurpose::ServerAuth,
        )?;
        certs.write_leaf(server, &ca, SERVER_CERT, SERVER_KEY)?;
        let client = leaf(
            "redlock test client",
            vec![],
            ExtendedKeyUsagePurpose::ClientAuth,
        )?;
        certs.write_leaf(client, &ca, CLIENT_CERT, CLIENT_KEY)?;
        Ok(certs)
    }

    /// The CA that signed the nodes' and the client's certificates (PEM).
    pub fn ca(&self) -> PathBuf {
        self.path(CA)
    }

    /// A CA that signed nothing here: trusting only it fails every handshake.
    pub fn other_ca(&self) -> PathBuf {
        self.path(OTHER_CA)
    }

    /// The nodes' certificate: valid for the IP address 127.0.0.1 only.
    pub fn server_cert(&self) -> PathBuf {
        self.path(SERVER_CERT)
    }

    /// The nodes' private key.
    pub fn server_key(&self) -> PathBuf {
        self.path(SERVER_KEY)
    }

    /// A client certificate the nodes accept (signed by [`ca`](Self::ca)).
    pub fn client_cert(&self) -> PathBuf {
        self.path(CLIENT_CERT)
    }

    /// The client certificate's private key.
    pub fn client_key(&self) -> PathBuf {
        self.path(CLIENT_KEY)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn write(&self, name: &str, pem: &str) -> Result<(), Error> {
        let path = self.path(name);
        fs::write(&path, pem).map_err(|e| Error::io(format!("writing {}", path.display()), e))
    }

    fn write_ca(&self, name: &str, file: &str) -> Result<CertifiedIssuer<'static, KeyPair>, Error> {
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(rcgen_error)?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate().map_err(rcgen_error)?;
        let ca = CertifiedIssuer::self_signed(params, key).map_err(rcgen_error)?;
        self.write(file, &ca.pem())?;
        Ok(ca)
    }

    fn write_leaf(
        &self,
        params: CertificateParams,
        ca: &CertifiedIssuer<'static, KeyPair>,
        cert_file: &str,
        key_file: &str,
    ) -> Result<(), Error> {
        let key = KeyPair::generate().map_err(rcgen_error)?;
        let cert = params.signed_by(&key, ca).map_err(rcgen_error)?;
        self.write(cert_file, &cert.pem())?;
        self.write(key_file, &key.serialize_pem())
    }
}

/// An end-entity certificate's parameters: its name, addresses and use.
fn leaf(
    name: &str,
    sans: Vec<SanType>,
    usage: ExtendedKeyUsagePurpose,
) -> Result<CertificateParams, Error> {
    let mut params = CertificateParams::new(Vec::<String>::new()).map_err(rcgen_error)?;
    params.distinguished_name.push(DnType::CommonName, name);
    params.subject_alt_names = sans;
    params.extended_key_usages = vec![usage];
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    Ok(params)
}

fn rcgen_error(e: rcgen::Error) -> Error {
    Error::Config(format!("generating test certificates: {e}"))
}

const CA: &str = "ca.pem";
const OTHER_CA: &str = "other-ca.pem";
const SERVER_CERT: &str = "node.pem";
const SERVER_KEY: &str = "node-key.pem";
const CLIENT_CERT: &str = "client.pem";
const CLIENT_KEY: &str = "client-key.pem";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_is_written() {
        let certs = TlsCerts::generate().unwrap();
        for path in [
            certs.ca(),
            certs.other_ca(),
            certs.server_cert(),
            certs.server_key(),
            certs.client_cert(),
            certs.client_key(),
        ] {
            assert!(path.starts_with(certs.dir.path()), "{}", path.display());
            let text = fs::read_to_string(&path).unwrap();
            assert!(text.starts_with("-----BEGIN "), "{}", path.display());
        }
    }
}
