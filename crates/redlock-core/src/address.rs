//! Node addresses as users write them: `redis://[user:password@]host:port[/db]`, a bare
//! `host:port`, `rediss://` for TLS (with its options after `?`), or `unix:///path` for a
//! unix-domain socket, parsed once here so that every driver accepts the same strings.
//!
//! Parsing is pure: the address says where the node is and which transport reaches it
//! ([`Transport`]). Reading certificate files, resolving the host and connecting are the
//! driver's job.

use std::fmt;
use std::path::PathBuf;

use crate::policy::NodeSettings;

/// Where a node is and how to open a session on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeAddress {
    /// Host name or IP address (IPv6 without brackets); for a unix socket, its path.
    pub host: String,
    /// TCP port; 0 for a unix socket.
    pub port: u16,
    /// `AUTH` and `SELECT` settings taken from the URL.
    pub settings: NodeSettings,
    /// Plain TCP, TLS or a unix socket.
    pub transport: Transport,
}

/// How the driver reaches a node, as the URL's scheme says.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Transport {
    /// Plain TCP to `host:port` (`redis://` or a bare `host:port`).
    #[default]
    Tcp,
    /// TLS over TCP to `host:port` (`rediss://`); the server's name for SNI and certificate
    /// checks is `host`.
    Tls(TlsOptions),
    /// A unix-domain socket (`unix://` or `redis+unix://`) at this absolute path.
    Unix(PathBuf),
}

/// What a `rediss://` URL's query asks of TLS: whom to trust, and the client's certificate.
/// Only paths: the driver reads the files.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct TlsOptions {
    /// `roots=system|mozilla|none`: the bundled roots trusted besides [`ca_file`](Self::ca_file).
    /// The default is [`TlsRoots::System`] without a CA file, [`TlsRoots::None`] with one.
    pub roots: TlsRoots,
    /// `ca=PATH`: PEM file of CA certificates to trust.
    pub ca_file: Option<PathBuf>,
    /// `cert=PATH`: PEM file of the client's certificate chain (mTLS); needs `key`.
    pub cert_file: Option<PathBuf>,
    /// `key=PATH`: PEM file of the client certificate's private key; needs `cert`.
    pub key_file: Option<PathBuf>,
}

/// Which bundled root certificates a TLS connection trusts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum TlsRoots {
    /// The operating system's store (`roots=system`).
    #[default]
    System,
    /// Mozilla's roots as compiled into the driver (`roots=mozilla`).
    Mozilla,
    /// None: only the `ca` file (`roots=none`).
    None,
}

impl NodeAddress {
    /// Parses a node URL:
    ///
    /// - `redis://[user:password@]host[:port][/db]` (port default 6379) or `host:port`;
    /// - `rediss://[user:password@]host[:port][/db][?ca=PATH&cert=PATH&key=PATH&roots=R]`,
    ///   TLS with the options of [`TlsOptions`] (values percent-encoded);
    /// - `unix:///path/to/redis.sock[?db=N&user=U&password=P]`, or `redis+unix://` spelled
    ///   the same way;
    /// - `valkey://` and `valkeys://`, valkey-cli's spellings of `redis://` and `rediss://`.
    ///
    /// User and password may be percent-encoded; `redis://secret@host` is a password
    /// without a user. Each defect has its own [`AddressError::reason`], which says what was
    /// expected; it quotes the host, port, path, option or database it found, never a
    /// password.
    pub fn parse(url: &str) -> Result<Self, AddressError> {
        let err = |reason: String| AddressError {
            url: redact(url),
            reason,
        };
        let (rest, tls) = match split_scheme(url) {
            // valkey-cli 8 takes `valkey://` and `valkeys://` for the same URLs.
            Some(("redis" | "valkey", rest)) => (rest, false),
            Some(("rediss" | "valkeys", rest)) => (rest, true),
            Some(("unix" | "redis+unix", rest)) => return parse_unix(rest).map_err(err),
            Some((scheme, _)) => {
                return Err(err(format!(
                    "unknown scheme `{scheme}://`: expected redis://, rediss:// or unix://"
                )));
            }
            None => {
                check_bare(url).map_err(|reason| err(reason.to_owned()))?;
                (url, false)
            }
        };
        // The last `@` ends the user info: a host, port or database never holds one, so a
        // password with a stray `/`, `?` or `@` is never mistaken for (and quoted as) a host.
        let (userinfo, hostpath) = match rest.rsplit_once('@') {
            Some((u, h)) => (Some(u), h),
            None => (None, rest),
        };
        let (hostpath, query) = hostpath.split_once('?').unwrap_or((hostpath, ""));
        let (hostport, path) = hostpath.split_once('/').unwrap_or((hostpath, ""));
        let mut settings = NodeSettings::default();
        if let Some(userinfo) = userinfo {
            parse_userinfo(userinfo, &mut settings).map_err(|r| err(r.to_owned()))?;
        }
        let (host, port) = split_host_port(hostport).map_err(err)?;
        let db = path.trim_end_matches('/');
        if !db.is_empty() {
            settings.db = db.parse().map_err(|_| {
                err(format!(
                    "database `{db}` is not a number: expected redis://host:port/0"
                ))
            })?;
        }
        let transport = match tls {
            true => Transport::Tls(parse_tls_query(query).map_err(err)?),
            false if query.is_empty() => Transport::Tcp,
            false => {
                return Err(err(
                    "options after `?` need rediss:// (TLS) or unix://; redis:// takes none".into(),
                ));
            }
        };
        Ok(Self {
            host,
            port,
            settings,
            transport,
        })
    }
}

impl NodeAddress {
    /// Whether `self` and `other` name the same server, as far as the URLs alone can tell
    /// (no name is resolved): the same port on the same host, or the same socket path.
    ///
    /// - The database, credentials and transport do not count: `/0` and `/1` of one server
    ///   are one server, whose single failure would take both votes.
    /// - Host names compare without case and without a trailing dot; IP addresses compare
    ///   by value (`::1` is `0:0:0:0:0:0:0:1`, `::ffff:10.0.0.1` is `10.0.0.1`).
    /// - `localhost`, `127.0.0.1` and `::1` are one host, the loopback: `localhost` may
    ///   resolve to either address, and a server's default `bind 127.0.0.1 -::1` listens on
    ///   both. Other addresses of `127.0.0.0/8` are told apart.
    ///
    /// Two different names of one host (a DNS alias, a host's name and its IP address) are
    /// told apart here: only the servers' own identity, as the connection reads it, can
    /// tell those.
    pub fn same_server(&self, other: &Self) -> bool {
        self.server() == other.server()
    }

    /// This address as [`same_server`](Self::same_server) compares it.
    fn server(&self) -> Server {
        match &self.transport {
            Transport::Unix(path) => Server::Unix(path.clone()),
            _ => Server::Tcp(canonical_host(&self.host), self.port),
        }
    }
}

/// A server's place as the URL names it: host (canonical) and port, or a socket path.
#[derive(Debug, PartialEq, Eq)]
enum Server {
    Tcp(String, u16),
    Unix(PathBuf),
}

/// `host` in the form [`NodeAddress::same_server`] compares: the loopback under one name,
/// IP addresses in their canonical text, names in lower case without a trailing dot.
fn canonical_host(host: &str) -> String {
    let name = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
    let ip = match name.parse::<std::net::IpAddr>() {
        Ok(ip) => ip.to_canonical(),
        Err(_) if name == "localhost" => return "loopback".into(),
        Err(_) => return name,
    };
    let loopback = [
        std::net::IpAddr::from([127, 0, 0, 1]),
        std::net::IpAddr::V6(std::net::Ipv6Addr::LOCALHOST),
    ];
    match loopback.contains(&ip) {
        true => "loopback".into(),
        false => ip.to_string(),
    }
}

/// `user:password` or a password alone, percent-decoded, into `settings`.
fn parse_userinfo(userinfo: &str, settings: &mut NodeSettings) -> Result<(), &'static str> {
    let (user, password) = userinfo.split_once(':').unwrap_or(("", userinfo));
    let user = percent_decode(user).ok_or("bad percent-encoding in the user name")?;
    let password = percent_decode(password).ok_or("bad percent-encoding in the password")?;
    if password.is_empty() {
        return Err("a user name needs a password: expected redis://user:password@host:port");
    }
    settings.username = (!user.is_empty()).then_some(user);
    settings.password = Some(password);
    Ok(())
}

/// `/absolute/path[?db=N&user=U&password=P]` after `unix://`.
fn parse_unix(rest: &str) -> Result<NodeAddress, String> {
    let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
    if !path.starts_with('/') {
        return Err(
            "a unix socket needs an absolute path: expected unix:///path/to/redis.sock".into(),
        );
    }
    let path = percent_decode(path).ok_or("bad percent-encoding in the socket path")?;
    let mut settings = NodeSettings::default();
    for (name, value) in query_pairs(query)? {
        match name {
            "db" => {
                settings.db = value.parse().map_err(|_| {
                    format!("database `{value}` is not a number: expected unix:///path?db=0")
                })?;
            }
            "user" => settings.username = Some(value),
            "password" if value.is_empty() => return Err("the password is empty".into()),
            "password" => settings.password = Some(value),
            _ => {
                return Err(format!(
                    "unknown option `{name}` for unix://: expected db, user or password"
                ));
            }
        }
    }
    if settings.username.is_some() && settings.password.is_none() {
        return Err("a user name needs a password: expected unix:///path?user=U&password=P".into());
    }
    Ok(NodeAddress {
        host: path.clone(),
        port: 0,
        settings,
        transport: Transport::Unix(path.into()),
    })
}

/// `ca=PATH&cert=PATH&key=PATH&roots=system|mozilla|none` after `rediss://...?`.
fn parse_tls_query(query: &str) -> Result<TlsOptions, String> {
    let mut options = TlsOptions::default();
    let mut roots = None;
    for (name, value) in query_pairs(query)? {
        let file = || -> Result<Option<PathBuf>, String> {
            match value.is_empty() {
                true => Err(format!(
                    "option `{name}` needs a file path: expected {name}=PATH"
                )),
                false => Ok(Some(PathBuf::from(&value))),
            }
        };
        match name {
            "ca" => options.ca_file = file()?,
            "cert" => options.cert_file = file()?,
            "key" => options.key_file = file()?,
            "roots" => {
                roots = Some(match value.as_str() {
                    "system" => TlsRoots::System,
                    "mozilla" => TlsRoots::Mozilla,
                    "none" => TlsRoots::None,
                    _ => {
                        return Err(format!(
                            "roots `{value}` is not known: expected roots=system, mozilla or none"
                        ));
                    }
                });
            }
            _ => {
                return Err(format!(
                    "unknown option `{name}` for rediss://: expected ca, cert, key or roots"
                ));
            }
        }
    }
    if options.cert_file.is_some() != options.key_file.is_some() {
        return Err("a client certificate needs both files: expected cert=PATH&key=PATH".into());
    }
    options.roots = match (roots, &options.ca_file) {
        (Some(roots), _) => roots,
        (None, Some(_)) => TlsRoots::None,
        (None, None) => TlsRoots::System,
    };
    if options.roots == TlsRoots::None && options.ca_file.is_none() {
        return Err("roots=none trusts nothing without a CA file: expected ca=PATH".into());
    }
    Ok(options)
}

/// `name=value` pairs split on `&`, values percent-decoded; each name at most once.
fn query_pairs(query: &str) -> Result<Vec<(&str, String)>, String> {
    let mut pairs: Vec<(&str, String)> = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let Some((name, value)) = pair.split_once('=') else {
            return Err(format!("option `{pair}` has no value: expected name=value"));
        };
        let value = percent_decode(value)
            .ok_or_else(|| format!("bad percent-encoding in option `{name}`"))?;
        if pairs.iter().any(|(n, _)| *n == name) {
            return Err(format!("option `{name}` is given twice"));
        }
        pairs.push((name, value));
    }
    Ok(pairs)
}

impl fmt::Display for NodeAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.transport {
            Transport::Unix(path) => write!(f, "unix:{}", path.display()),
            _ if self.host.contains(':') => write!(f, "[{}]:{}", self.host, self.port),
            _ => write!(f, "{}:{}", self.host, self.port),
        }
    }
}

/// A node URL that could not be parsed. The password, if any, is not repeated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddressError {
    url: String,
    reason: String,
}

impl AddressError {
    /// The URL (with any password replaced by `***`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// What is wrong with it.
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

impl fmt::Display for AddressError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid node URL `{}`: {}", self.url, self.reason)
    }
}

impl std::error::Error for AddressError {}

/// `scheme` and the rest of `scheme://rest`, if the text before `://` is a scheme (a letter,
/// then letters, digits, `+`, `-` or `.`), so that no other text is ever quoted as one.
fn split_scheme(url: &str) -> Option<(&str, &str)> {
    let (scheme, rest) = url.split_once("://")?;
    let mut chars = scheme.chars();
    let first = chars.next()?;
    let valid = first.is_ascii_alphabetic()
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    valid.then_some((scheme, rest))
}

/// The bare form is `host:port` only: credentials and a database need `redis://`.
fn check_bare(url: &str) -> Result<(), &'static str> {
    if url.contains('@') {
        return Err("credentials need the URL form: expected redis://user:password@host:port");
    }
    if url.contains('/') {
        return Err("a database needs the URL form: expected redis://host:port/db");
    }
    if !url.contains(':') {
        return Err("no port: expected host:port, or redis://host for port 6379");
    }
    Ok(())
}

/// `host:port`, `[v6]:port`, `host` or `[v6]` (port 6379); each defect has its own reason.
fn split_host_port(s: &str) -> Result<(String, u16), String> {
    let (host, port) = if let Some(rest) = s.strip_prefix('[') {
        let Some((host, after)) = rest.split_once(']') else {
            return Err("no `]` after the IPv6 address: expected [address]:port".into());
        };
        match after.strip_prefix(':') {
            Some(p) => (host, Some(p)),
            None if after.is_empty() => (host, None),
            None => return Err(format!("`{after}` after `]`: expected [address]:port")),
        }
    } else {
        match s.rsplit_once(':') {
            Some((h, _)) if h.contains(':') => {
                return Err("an IPv6 address needs brackets: expected [address]:port".into());
            }
            Some((h, p)) => (h, Some(p)),
            None => (s, None),
        }
    };
    if host.is_empty() {
        return Err("no host: expected redis://host:port".into());
    }
    let port = match port {
        Some(p) => parse_port(p)?,
        None => DEFAULT_PORT,
    };
    Ok((host.to_owned(), port))
}

/// A TCP port, 1 to 65535, in decimal digits only (`u16::from_str` would also take `+1`).
fn parse_port(p: &str) -> Result<u16, String> {
    if p.is_empty() {
        return Err("no port after `:`: expected host:port".into());
    }
    if !p.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("port `{p}` is not a number"));
    }
    match p.parse::<u16>() {
        Ok(0) => Err("port 0 is not a valid port (1 to 65535)".into()),
        Ok(port) => Ok(port),
        Err(_) => Err(format!("port {p} is out of range (1 to 65535)")),
    }
}

fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3)?;
            let hex = std::str::from_utf8(hex).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The URL with the password part of its user info replaced, and any `password=` option's
/// value. The user info is everything before the last `@` (after the scheme, if any), as
/// [`NodeAddress::parse`] splits it, so a password with a stray `/`, `:` or `@` is hidden
/// whole; a URL without `@` has none.
fn redact(url: &str) -> String {
    let url = redact_query(url);
    let Some(at) = url.rfind('@') else {
        return url;
    };
    let start = split_scheme(&url).map_or(0, |(scheme, _)| scheme.len() + "://".len());
    let (head, userinfo, host) = (&url[..start], &url[start..at], &url[at..]);
    // `user:password`, or a password alone: only a user name before a `:` is kept.
    let user = userinfo.split_once(':').map_or("", |(u, _)| u);
    format!("{head}{user}:***{host}")
}

/// `url` with the value of every `password=` after the first `?` replaced by `***`.
fn redact_query(url: &str) -> String {
    let Some((head, query)) = url.split_once('?') else {
        return url.to_owned();
    };
    let pairs: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some(("password", _)) => "password=***".to_owned(),
            _ => pair.to_owned(),
        })
        .collect();
    format!("{head}?{}", pairs.join("&"))
}

/// The port of `redis://host` without one, Redis's default.
const DEFAULT_PORT: u16 = 6379;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_accepted_forms() {
        let a = NodeAddress::parse("redis://127.0.0.1:7001").unwrap();
        assert_eq!((a.host.as_str(), a.port), ("127.0.0.1", 7001));
        assert_eq!(a.settings, NodeSettings::default());
        let a = NodeAddress::parse("127.0.0.1:7002").unwrap();
        assert_eq!(a.port, 7002);
        let a = NodeAddress::parse("redis://app:p%40ss@localhost:6380/3").unwrap();
        assert_eq!(a.settings.username.as_deref(), Some("app"));
        assert_eq!(a.settings.password.as_deref(), Some("p@ss"));
        assert_eq!(a.settings.db, 3);
        let a = NodeAddress::parse("redis://:secret@[::1]:7003").unwrap();
        assert_eq!((a.host.as_str(), a.port), ("::1", 7003));
        assert_eq!(a.settings.username, None);
        assert_eq!(a.settings.password.as_deref(), Some("secret"));
        assert_eq!(a.to_string(), "[::1]:7003");
        assert_eq!(NodeAddress::parse("redis://h").unwrap().port, 6379);
        // valkey-cli's spellings of the same URLs.
        let a = NodeAddress::parse("valkey://app:pw@127.0.0.1:7004/1").unwrap();
        let b = NodeAddress::parse("redis://app:pw@127.0.0.1:7004/1").unwrap();
        assert_eq!(a, b);
        let a = NodeAddress::parse("valkeys://h:6380").unwrap();
        assert_eq!(a, NodeAddress::parse("rediss://h:6380").unwrap());
    }

    #[test]
    fn parses_tls_and_unix_forms() {
        let a = NodeAddress::parse("rediss://u:pw@db.example:6380/2").unwrap();
        assert_eq!(
            (a.host.as_str(), a.port, a.settings.db),
            ("db.example", 6380, 2)
        );
        assert_eq!(a.transport, Transport::Tls(TlsOptions::default()));
        let a = NodeAddress::parse(
            "rediss://127.0.0.1:7000?ca=/etc/ca.pem&cert=/c%20d/cert.pem&key=/k.pem",
        )
        .unwrap();
        let Transport::Tls(tls) = &a.transport else {
            panic!("{a:?}")
        };
        assert_eq!(tls.roots, TlsRoots::None);
        assert_eq!(tls.ca_file, Some(PathBuf::from("/etc/ca.pem")));
        assert_eq!(tls.cert_file, Some(PathBuf::from("/c d/cert.pem")));
        assert_eq!(tls.key_file, Some(PathBuf::from("/k.pem")));
        let a = NodeAddress::parse("rediss://h?roots=mozilla&ca=/ca.pem").unwrap();
        let Transport::Tls(tls) = &a.transport else {
            panic!("{a:?}")
        };
        assert_eq!((tls.roots, a.port), (TlsRoots::Mozilla, 6379));
        for url in ["unix:///tmp/r.sock", "redis+unix:///tmp/r.sock"] {
            let a = NodeAddress::parse(url).unwrap();
            assert_eq!(a.transport, Transport::Unix("/tmp/r.sock".into()));
            assert_eq!(a.to_string(), "unix:/tmp/r.sock");
            assert_eq!(a.settings, NodeSettings::default());
        }
        let a = NodeAddress::parse("unix:///s?db=3&user=app&password=p%26w").unwrap();
        assert_eq!(a.settings.db, 3);
        assert_eq!(a.settings.username.as_deref(), Some("app"));
        assert_eq!(a.settings.password.as_deref(), Some("p&w"));
        assert_eq!(
            NodeAddress::parse("redis://h").unwrap().transport,
            Transport::Tcp
        );
    }

    /// Each defect, with its exact message: what is wrong, and what was expected.
    #[test]
    fn each_defect_has_its_own_message() {
        for (url, message) in [
            ("redis://", "no host: expected redis://host:port"),
            ("redis://:6379", "no host: expected redis://host:port"),
            ("redis://[]:1", "no host: expected redis://host:port"),
            ("redis://h:0", "port 0 is not a valid port (1 to 65535)"),
            ("redis://h:99999", "port 99999 is out of range (1 to 65535)"),
            (
                "h:123456789012345678901",
                "port 123456789012345678901 is out of range (1 to 65535)",
            ),
            ("redis://h:abc", "port `abc` is not a number"),
            ("redis://h:+1", "port `+1` is not a number"),
            ("redis://h:", "no port after `:`: expected host:port"),
            (
                "http://h:1",
                "unknown scheme `http://`: expected redis://, rediss:// or unix://",
            ),
            (
                "h",
                "no port: expected host:port, or redis://host for port 6379",
            ),
            (
                "u:p@h:1",
                "credentials need the URL form: expected redis://user:password@host:port",
            ),
            (
                "h:1/2",
                "a database needs the URL form: expected redis://host:port/db",
            ),
            (
                "::1:5",
                "an IPv6 address needs brackets: expected [address]:port",
            ),
            (
                "redis://[::1:5",
                "no `]` after the IPv6 address: expected [address]:port",
            ),
            ("redis://[::1]5", "`5` after `]`: expected [address]:port"),
            (
                "redis://h:1/x",
                "database `x` is not a number: expected redis://host:port/0",
            ),
            ("redis://%zz:p@h:1", "bad percent-encoding in the user name"),
            ("redis://u:%zz@h:1", "bad percent-encoding in the password"),
            (
                "redis://u:@h:1",
                "a user name needs a password: expected redis://user:password@host:port",
            ),
            (
                "redis://h:1?ca=/x",
                "options after `?` need rediss:// (TLS) or unix://; redis:// takes none",
            ),
            (
                "rediss://h:1?tls=1",
                "unknown option `tls` for rediss://: expected ca, cert, key or roots",
            ),
            (
                "rediss://h:1?cert=/c.pem",
                "a client certificate needs both files: expected cert=PATH&key=PATH",
            ),
            (
                "rediss://h:1?roots=all",
                "roots `all` is not known: expected roots=system, mozilla or none",
            ),
            (
                "rediss://h:1?roots=none",
                "roots=none trusts nothing without a CA file: expected ca=PATH",
            ),
            (
                "rediss://h:1?ca=",
                "option `ca` needs a file path: expected ca=PATH",
            ),
            (
                "rediss://h:1?ca",
                "option `ca` has no value: expected name=value",
            ),
            ("rediss://h:1?ca=/a&ca=/b", "option `ca` is given twice"),
            (
                "unix://tmp/r.sock",
                "a unix socket needs an absolute path: expected unix:///path/to/redis.sock",
            ),
            (
                "unix:///r.sock?db=x",
                "database `x` is not a number: expected unix:///path?db=0",
            ),
            (
                "unix:///r.sock?host=h",
                "unknown option `host` for unix://: expected db, user or password",
            ),
            (
                "unix:///r.sock?user=u",
                "a user name needs a password: expected unix:///path?user=U&password=P",
            ),
        ] {
            let err = NodeAddress::parse(url).expect_err(url);
            assert_eq!(err.reason(), message, "{url}");
            assert_eq!(
                err.to_string(),
                format!("invalid node URL `{}`: {message}", err.url())
            );
        }
        let err = NodeAddress::parse("redis://h:0").unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid node URL `redis://h:0`: port 0 is not a valid port (1 to 65535)"
        );
    }

    /// One server under several spellings is one server; another port, host or socket is
    /// another.
    #[test]
    fn same_server_sees_through_spellings_but_not_names() {
        let same = |a: &str, b: &str| {
            NodeAddress::parse(a)
                .unwrap()
                .same_server(&NodeAddress::parse(b).unwrap())
        };
        for (a, b) in [
            ("redis://127.0.0.1:7450", "127.0.0.1:7450"),
            ("redis://127.0.0.1:7450", "redis://localhost:7450"),
            ("redis://LocalHost.:7450", "redis://[::1]:7450"),
            ("redis://[::1]:7450", "redis://[0:0:0:0:0:0:0:1]:7450"),
            ("redis://[::ffff:10.0.0.1]:1", "redis://10.0.0.1:1"),
            ("redis://127.0.0.1:7450/0", "redis://127.0.0.1:7450/1"),
            ("redis://u:a@h:1/2", "rediss://v:b@H:1?roots=mozilla"),
            ("redis://db.example:6379", "redis://DB.example."),
            ("unix:///tmp/r.sock?db=1", "redis+unix:///tmp/r.sock"),
        ] {
            assert!(same(a, b), "{a} and {b} are one server");
        }
        for (a, b) in [
            ("redis://127.0.0.1:7450", "redis://127.0.0.1:7451"),
            ("redis://127.0.0.1:7450", "redis://127.0.0.2:7450"),
            ("redis://db1:6379", "redis://db2:6379"),
            ("redis://db1:6379", "redis://10.0.0.1:6379"),
            ("unix:///tmp/a.sock", "unix:///tmp/b.sock"),
            ("unix:///tmp/a.sock", "redis://localhost:6379"),
        ] {
            assert!(!same(a, b), "{a} and {b} are two servers");
        }
    }

    /// The URL in an error never holds the password, whatever the defect; nor does the
    /// reason, which quotes only the host, port, database or scheme.
    #[test]
    fn errors_never_show_the_password() {
        for (url, shown) in [
            ("rediss://u:hunter2@h:0", "rediss://u:***@h:0"),
            ("redis://u:hunter2@h:0", "redis://u:***@h:0"),
            ("redis://u:hunter2@:1", "redis://u:***@:1"),
            ("redis://hunter2@h:x", "redis://:***@h:x"),
            ("redis://:hunter2@h:1/x", "redis://:***@h:1/x"),
            ("http://u:hunter2@h:1", "http://u:***@h:1"),
            // A stray `/`, `:` or `@` in the password hides the whole password.
            ("redis://u:hun/ter2@h:0", "redis://u:***@h:0"),
            ("redis://u:hun@ter2@h:0", "redis://u:***@h:0"),
            ("u:hunter2@h:1", "u:***@h:1"),
            (
                "unix:///s?password=hunter2&db=x",
                "unix:///s?password=***&db=x",
            ),
            (
                "unix:///s?db=x&password=hunter2",
                "unix:///s?db=x&password=***",
            ),
            ("rediss://u:hunter2@h:1?tls=1", "rediss://u:***@h:1?tls=1"),
        ] {
            let err = NodeAddress::parse(url).expect_err(url);
            assert_eq!(err.url(), shown);
            for text in [err.to_string(), format!("{err:?}")] {
                assert!(
                    !text.contains("hunter2") && !text.contains("ter2"),
                    "{text}"
                );
            }
        }
        // A password with a stray `/` is still the password, not a path.
        let a = NodeAddress::parse("redis://u:hun/ter2@h:1/3").unwrap();
        assert_eq!(a.settings.password.as_deref(), Some("hun/ter2"));
        assert_eq!((a.host.as_str(), a.port, a.settings.db), ("h", 1, 3));
    }
}
