//! Test certificates for TLS nodes ([`TlsCerts`]), made with rcgen at cluster start: a CA,
//! a server certificate it signs for the IP address 127.0.0.1 only (so `localhost` is a name
//! mismatch), a client certificate it signs (mTLS), and an unrelated CA that trusts none of
//! them; and two server certificates a client must refuse ([`ServerCert`]). PEM files in a
//! temp dir that lives as long as the cluster.

use std::fs;
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose, SanType,
};

use crate::Error;
use crate::process::TempDir;

/// Which certificate a TLS node presents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ServerCert {
    /// Signed by [`TlsCerts::ca`] for 127.0.0.1, valid now: what a client should accept.
    #[default]
    Valid,
    /// Signed by [`TlsCerts::ca`] for 127.0.0.1, but its `notAfter` has passed (2001).
    Expired,
    /// Self-signed with `basicConstraints CA:TRUE` for 127.0.0.1, as `openssl req -x509`
    /// makes by default: trusted as its own CA ([`TlsCerts::self_signed_ca_cert`]), it is a
    /// CA, not a server's certificate.
    SelfSignedCa,
}

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
        let mut expired = leaf(
            "redlock expired node",
            vec![SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST))],
            ExtendedKeyUsagePurpose::ServerAuth,
        )?;
        expired.not_before = rcgen::date_time_ymd(2000, 1, 1);
        expired.not_after = rcgen::date_time_ymd(2001, 1, 1);
        certs.write_leaf(expired, &ca, EXPIRED_CERT, EXPIRED_KEY)?;
        certs.write_self_signed_ca()?;
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

    /// The certificate file a node presents as `kind`, and its key.
    pub fn server_files(&self, kind: ServerCert) -> (PathBuf, PathBuf) {
        let (cert, key) = match kind {
            ServerCert::Valid => (SERVER_CERT, SERVER_KEY),
            ServerCert::Expired => (EXPIRED_CERT, EXPIRED_KEY),
            ServerCert::SelfSignedCa => (SELF_SIGNED_CA_CERT, SELF_SIGNED_CA_KEY),
        };
        (self.path(cert), self.path(key))
    }

    /// The [`ServerCert::SelfSignedCa`] certificate: give it as the client's `ca=` file to
    /// trust it as its own CA.
    pub fn self_signed_ca_cert(&self) -> PathBuf {
        self.path(SELF_SIGNED_CA_CERT)
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

    /// `openssl req -x509 -newkey ... -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1`:
    /// self-signed, `CA:TRUE` (openssl's default `v3_ca` extensions), for 127.0.0.1.
    fn write_self_signed_ca(&self) -> Result<(), Error> {
        let mut params = CertificateParams::new(Vec::<String>::new()).map_err(rcgen_error)?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "127.0.0.1");
        params.subject_alt_names = vec![SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST))];
        let key = KeyPair::generate().map_err(rcgen_error)?;
        let cert = params.self_signed(&key).map_err(rcgen_error)?;
        self.write(SELF_SIGNED_CA_CERT, &cert.pem())?;
        self.write(SELF_SIGNED_CA_KEY, &key.serialize_pem())
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
const EXPIRED_CERT: &str = "expired-node.pem";
const EXPIRED_KEY: &str = "expired-node-key.pem";
const SELF_SIGNED_CA_CERT: &str = "self-signed-ca-node.pem";
const SELF_SIGNED_CA_KEY: &str = "self-signed-ca-node-key.pem";
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
            certs.server_files(ServerCert::Expired).0,
            certs.server_files(ServerCert::Expired).1,
            certs.server_files(ServerCert::SelfSignedCa).0,
            certs.server_files(ServerCert::SelfSignedCa).1,
        ] {
            assert!(path.starts_with(certs.dir.path()), "{}", path.display());
            let text = fs::read_to_string(&path).unwrap();
            assert!(text.starts_with("-----BEGIN "), "{}", path.display());
        }
    }
}
