//! What lies between a node's socket and the core ([`Wire`]): nothing for a plain
//! connection, a rustls client for a TLS one. rustls's `ClientConnection` is itself sans-IO
//! (bytes in, bytes out), so every driver runs TLS through this one type over whatever
//! socket its runtime gives: the driver reads the socket into [`Wire::receive`] and feeds
//! the plaintext it returns to the core, passes the core's transmits through
//! [`Wire::send`], and writes the wire bytes both queue.
//!
//! The driver tells the core `Connected` only once the handshake is done (its last flight
//! written), within the connect timeout: a plain node given as `rediss://` never answers a
//! `ClientHello` (it waits for a line of text), and only a deadline of the driver's own can
//! say that this, not a slow node, is the trouble. A failed handshake is a
//! [`ConnectionError::Tls`] that says why.

use std::io::{self, Read, Write};
use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, BytesMut};
use redlock_core::ConnectionError;
use rustls::{AlertDescription, CertificateError, ClientConfig, ClientConnection};
use rustls_pki_types::ServerName;

/// One connection's bytes between the socket and the core: plain, or through TLS.
#[derive(Debug, Default)]
pub struct Wire {
    tls: Option<Box<Tls>>,
    /// Whether the node has sent anything yet: its first byte tells TLS from plain text.
    heard: bool,
}

#[derive(Debug)]
struct Tls {
    conn: ClientConnection,
    /// Plaintext decrypted by the last [`Wire::receive`].
    plain: Vec<u8>,
    /// The core's bytes since the last [`Wire::seal`], encrypted together.
    unsealed: Vec<u8>,
    client_cert: bool,
}

impl Wire {
    /// A plain connection: bytes pass through unchanged.
    pub fn plain() -> Self {
        Self::default()
    }

    /// A TLS client for `name`; its first handshake bytes are queued into `out`.
    pub(crate) fn tls(
        config: Arc<ClientConfig>,
        name: ServerName<'static>,
        client_cert: bool,
        out: &mut BytesMut,
    ) -> Result<Self, ConnectionError> {
        let mut conn = ClientConnection::new(config, name)
            .map_err(|e| ConnectionError::Tls(format!("cannot start a TLS client: {e}")))?;
        // `write_all` in `seal` must take every byte: what the socket has not taken waits in
        // the driver's buffer, and the core caps how many requests it sends.
        conn.set_buffer_limit(None);
        let mut wire = Self {
            tls: Some(Box::new(Tls {
                conn,
                plain: Vec::new(),
                unsealed: Vec::new(),
                client_cert,
            })),
            heard: false,
        };
        wire.queue_tls(out);
        Ok(wire)
    }

    /// Whether this is a TLS connection.
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// Whether a TLS handshake is still under way (never for a plain connection).
    pub fn is_handshaking(&self) -> bool {
        self.tls.as_ref().is_some_and(|t| t.conn.is_handshaking())
    }

    /// The reason for a handshake not done within the connect timeout `after`.
    pub fn handshake_timed_out(after: Duration) -> ConnectionError {
        ConnectionError::Tls(format!(
            "no TLS handshake within {after:?}: is it a plain node (redis://)?"
        ))
    }

    /// The reason for a connection the node closed during the handshake.
    pub fn closed_in_handshake() -> ConnectionError {
        ConnectionError::Tls("the node closed the connection during the TLS handshake".into())
    }

    /// The core's bytes for the node: appended to `out` as they are, or for TLS kept until
    /// [`seal`](Self::seal), which the driver MUST call before it writes `out`.
    pub fn send(&mut self, plain: &[u8], out: &mut BytesMut) {
        match &mut self.tls {
            None => out.extend_from_slice(plain),
            Some(tls) => tls.unsealed.extend_from_slice(plain),
        }
    }

    /// Encrypts every byte [`send`](Self::send) kept into `out`: one TLS record for a whole
    /// turn's requests to the node (up to 16 KiB each), not one per request, which would
    /// cost both sides a record's work per lock command. A no-op for a plain connection.
    pub fn seal(&mut self, out: &mut BytesMut) {
        let Some(tls) = &mut self.tls else { return };
        if tls.unsealed.is_empty() {
            return;
        }
        // Without a buffer limit rustls takes every byte.
        let _ = tls.conn.writer().write_all(&tls.unsealed);
        tls.unsealed.clear();
        self.queue_tls(out);
    }

    /// Bytes read from the socket; returns the plaintext for the core (the same bytes for a
    /// plain connection). A TLS connection may queue bytes to send (handshake, alerts) into
    /// `out`. A failure is the reason to close the connection with.
    pub fn receive<'a>(
        &'a mut self,
        bytes: &'a [u8],
        out: &mut BytesMut,
    ) -> Result<&'a [u8], ConnectionError> {
        let first = match self.heard {
            false => bytes.first().copied(),
            true => None,
        };
        self.heard |= !bytes.is_empty();
        let Some(tls) = &mut self.tls else {
            // 22 (handshake) and 21 (alert) open a TLS record; no RESP reply starts so.
            if matches!(first, Some(21 | 22)) {
                return Err(ConnectionError::Tls(
                    "the node answered in TLS: use rediss:// for it".into(),
                ));
            }
            return Ok(bytes);
        };
        // A TLS record starts with its content type, 20 to 23.
        if first.is_some_and(|b| !(20..=23).contains(&b)) {
            return Err(ConnectionError::Tls(
                "the node answered in plain text, not TLS: use redis:// for it".into(),
            ));
        }
        tls.plain.clear();
        let mut rest = bytes;
        while !rest.is_empty() {
            // Takes what fits in rustls's buffer; the loop offers the rest after processing.
            tls.conn.read_tls(&mut rest).map_err(|e| io_reason(&e))?;
            tls.conn
                .process_new_packets()
                .map_err(|e| ConnectionError::Tls(describe(&e, tls.client_cert)))?;
            match tls.conn.reader().read_to_end(&mut tls.plain) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(io_reason(&e)),
            }
        }
        self.queue_tls(out);
        let plain = self.tls.as_ref().map_or(&[][..], |t| &t.plain);
        Ok(plain)
    }

    /// The reason to give for a failed write, `failed`, unless the node said why first: a
    /// TLS node that refuses the handshake (a client certificate it wants, say) sends an
    /// alert and closes, and the next write may fail before the alert is read. Reads what
    /// the socket still holds with `read` (non-blocking) and returns the TLS reason found.
    pub fn explain(
        &mut self,
        mut read: impl FnMut(&mut [u8]) -> io::Result<usize>,
        failed: ConnectionError,
    ) -> ConnectionError {
        if self.tls.is_none() {
            return self.ended(failed);
        }
        let (mut buf, mut out) = ([0; 4096], BytesMut::new());
        // Bounded: an alert is a few bytes; anything longer is not one.
        for _ in 0..4 {
            let Ok(n @ 1..) = read(&mut buf) else { break };
            if let Err(reason) = self.receive(&buf[..n], &mut out) {
                return reason;
            }
        }
        failed
    }

    /// The reason to give for a connection that ended (closed, reset) with `reason`: as it
    /// is, unless a plain connection ended before the node sent a byte, which is what a TLS
    /// port does with plain text; then the reason asks whether it is one.
    pub fn ended(&self, reason: ConnectionError) -> ConnectionError {
        if self.tls.is_some() || self.heard {
            return reason;
        }
        let what = match reason {
            ConnectionError::Closed => "the server closed the connection".to_owned(),
            ConnectionError::Io(e) => e,
            other => return other,
        };
        ConnectionError::Io(format!(
            "{what} before the node answered anything: is it a TLS port (rediss://)?"
        ))
    }

    /// Moves every TLS record rustls has ready into `out`.
    fn queue_tls(&mut self, out: &mut BytesMut) {
        let Some(tls) = &mut self.tls else { return };
        let mut writer = out.writer();
        while tls.conn.wants_write() {
            // Writing into memory cannot fail.
            if tls.conn.write_tls(&mut writer).is_err() {
                break;
            }
        }
    }
}

fn io_reason(e: &io::Error) -> ConnectionError {
    ConnectionError::Tls(e.to_string())
}

/// A TLS failure in words: what was wrong and what to change.
fn describe(e: &rustls::Error, client_cert: bool) -> String {
    use rustls::Error as E;
    match e {
        E::InvalidCertificate(CertificateError::UnknownIssuer) => {
            "the node's certificate is not signed by a trusted CA: give its CA with ca=PATH".into()
        }
        E::InvalidCertificate(
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
        ) => "the node's certificate is not valid for the host name in the URL".into(),
        E::InvalidCertificate(
            CertificateError::Expired | CertificateError::ExpiredContext { .. },
        ) => "the node's certificate has expired (its notAfter has passed): renew it".into(),
        E::InvalidCertificate(CertificateError::Other(other)) => {
            match other.0.downcast_ref::<webpki::Error>() {
                Some(webpki::Error::CaUsedAsEndEntity) => CA_AS_SERVER_CERT.into(),
                Some(webpki::Error::EndEntityUsedAsCa) => {
                    "a certificate that signs the node's is not a CA (its basicConstraints say \
                     CA:FALSE): give the CA that really signed it with ca=PATH, or reissue the \
                     chain from a CA"
                        .into()
                }
                _ => format!("the node's certificate is refused: {other}"),
            }
        }
        E::InvalidCertificate(
            CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. },
        ) => "the node's certificate is not valid yet (its notBefore is in the future): check \
              the clocks of the node's issuer and of this host"
            .into(),
        E::InvalidCertificate(
            CertificateError::InvalidPurpose | CertificateError::InvalidPurposeContext { .. },
        ) => "the node's certificate is not for a TLS server (its extendedKeyUsage lacks \
              serverAuth): reissue it with serverAuth"
            .into(),
        E::InvalidCertificate(other) => {
            let why = match other {
                CertificateError::BadSignature => "a signature in its chain does not verify",
                CertificateError::BadEncoding => "it is not a well-formed (DER) certificate",
                CertificateError::Revoked => "its issuer has revoked it",
                CertificateError::UnhandledCriticalExtension => {
                    "it has a critical extension this client does not know"
                }
                _ => return format!("the node's certificate is refused: {other}"),
            };
            format!("the node's certificate is refused: {why}")
        }
        E::AlertReceived(alert) if refuses_client(*alert) => match client_cert {
            false => format!(
                "the node refused the handshake ({alert:?}): it may require a client \
                 certificate (cert=PATH&key=PATH)"
            ),
            true => format!(
                "the node refused the handshake ({alert:?}): it does not accept the client \
                 certificate"
            ),
        },
        other => other.to_string(),
    }
}

/// A CA certificate presented as the node's own: what `openssl req -x509` makes by default.
const CA_AS_SERVER_CERT: &str = "the node's certificate is a CA certificate (basicConstraints CA:TRUE, as `openssl req \
     -x509` makes by default), which may not serve as a server's own: issue the node a \
     certificate with CA:FALSE signed by a CA, and give that CA with ca=PATH";

/// Alerts a server sends when it wants a client certificate it did not get or trust.
fn refuses_client(alert: AlertDescription) -> bool {
    matches!(
        alert,
        AlertDescription::CertificateRequired
            | AlertDescription::HandshakeFailure
            | AlertDescription::BadCertificate
            | AlertDescription::UnknownCA
            | AlertDescription::CertificateUnknown
            | AlertDescription::AccessDenied
    )
}

#[cfg(test)]
mod tests {
    //! The wire's own decisions, without a server: which first bytes betray the other
    //! protocol, and when an ended connection asks whether it was a TLS port.

    use redlock_core::{TlsOptions, TlsRoots};

    use super::*;
    use crate::tls::client_config;

    fn tls_wire(out: &mut BytesMut) -> Wire {
        let mut options = TlsOptions::default();
        options.roots = TlsRoots::Mozilla;
        let config = client_config(&options).expect("Mozilla's roots need no file");
        let name = ServerName::try_from("node.example").expect("a DNS name");
        Wire::tls(config, name, false, out).expect("a TLS client")
    }

    /// Each refusal of the node's certificate is a sentence: what is wrong, what to do; never
    /// a `Debug` dump of rustls's or webpki's error.
    #[test]
    fn certificate_refusals_say_what_is_wrong_in_words() {
        use rustls::OtherError;
        let other = |e: webpki::Error| {
            rustls::Error::InvalidCertificate(CertificateError::Other(OtherError(Arc::new(e))))
        };
        let ca = describe(&other(webpki::Error::CaUsedAsEndEntity), false);
        assert_eq!(ca, CA_AS_SERVER_CERT);
        for (e, start) in [
            (
                other(webpki::Error::CaUsedAsEndEntity),
                "the node's certificate is a CA certificate (basicConstraints CA:TRUE",
            ),
            (
                other(webpki::Error::EndEntityUsedAsCa),
                "a certificate that signs the node's is not a CA",
            ),
            (
                rustls::Error::InvalidCertificate(CertificateError::Expired),
                "the node's certificate has expired (its notAfter has passed): renew it",
            ),
            (
                rustls::Error::InvalidCertificate(CertificateError::NotValidYet),
                "the node's certificate is not valid yet",
            ),
            (
                rustls::Error::InvalidCertificate(CertificateError::InvalidPurpose),
                "the node's certificate is not for a TLS server",
            ),
            (
                rustls::Error::InvalidCertificate(CertificateError::BadSignature),
                "the node's certificate is refused: a signature in its chain does not verify",
            ),
        ] {
            let text = describe(&e, false);
            assert!(text.starts_with(start), "{text}");
            assert!(
                !text.contains("Other(") && !text.contains("Error("),
                "{text}"
            );
        }
    }

    #[test]
    fn a_plain_wire_passes_resp_and_names_a_tls_answer() {
        let mut out = BytesMut::new();
        let mut wire = Wire::plain();
        assert_eq!(wire.receive(b"+OK\r\n", &mut out), Ok(&b"+OK\r\n"[..]));
        // Only the first byte of a connection is judged.
        assert_eq!(wire.receive(&[22, 3, 1], &mut out), Ok(&[22, 3, 1][..]));
        let alert = [21, 3, 3, 0, 2, 2, 70];
        assert_eq!(
            Wire::plain().receive(&alert, &mut out),
            Err(ConnectionError::Tls(
                "the node answered in TLS: use rediss:// for it".into()
            ))
        );
        wire.send(b"*1\r\n$4\r\nPING\r\n", &mut out);
        assert_eq!(&out[..], b"*1\r\n$4\r\nPING\r\n");
    }

    #[test]
    fn an_ended_plain_wire_asks_about_tls_only_before_any_answer() {
        assert_eq!(
            Wire::plain().ended(ConnectionError::Closed),
            ConnectionError::Io(
                "the server closed the connection before the node answered anything: is it a \
                 TLS port (rediss://)?"
                    .into()
            )
        );
        let mut wire = Wire::plain();
        let _ = wire.receive(b"+OK\r\n", &mut BytesMut::new());
        assert_eq!(wire.ended(ConnectionError::Closed), ConnectionError::Closed);
        assert_eq!(
            Wire::plain().ended(ConnectionError::Refused),
            ConnectionError::Refused
        );
    }

    #[test]
    fn a_tls_wire_says_hello_and_names_a_plain_answer() {
        let mut out = BytesMut::new();
        let mut wire = tls_wire(&mut out);
        assert!(wire.is_tls() && wire.is_handshaking());
        assert_eq!(out.first(), Some(&22), "a handshake record first");
        // The core's bytes wait for `seal`.
        let hello = out.len();
        wire.send(b"*1\r\n$4\r\nPING\r\n", &mut out);
        assert_eq!(out.len(), hello);
        assert_eq!(
            wire.receive(b"-ERR unknown command\r\n", &mut out),
            Err(ConnectionError::Tls(
                "the node answered in plain text, not TLS: use redis:// for it".into()
            ))
        );
    }
}
