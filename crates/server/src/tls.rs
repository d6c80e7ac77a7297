//! TLS for client connections (tls-port) and for a replica's link to its
//! primary (tls-replication), on rustls.
//!
//! Two halves, neither knowing about the server: `build` turns the tls-*
//! settings into a rustls server configuration (certificate chain, key,
//! client verification, protocols, cipher suites, session cache), failing
//! with the line Redis logs, and `build_client` into the configuration of
//! the connections this server opens (the primary's certificate checked
//! against tls-ca-cert-file/dir but not its name, as Redis checks it; the
//! certificate shown is tls-client-cert-file, else tls-cert-file); a
//! `Session` is one connection's rustls state (either side)
//! driven over a non-blocking socket: ciphertext in through `read_tls` and
//! `process_new_packets`, plaintext out of `reader()` into the caller's
//! query buffer; replies in through `writer()` and out through
//! `write_tls`, each side stopping at WouldBlock. The event loop keeps a
//! `Session` only for clients that came through the TLS listener, so plain
//! clients pay one `Option` test.

use std::io::{self, ErrorKind, Read, Write};
use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::{ServerName, UnixTime};
use rustls::server::{NoServerSessionStorage, ServerSessionMemoryCache, WebPkiClientVerifier};
use rustls::{CertificateError, ClientConfig, ClientConnection, Connection, DigitallySignedStruct, RootCertStore, ServerConfig, ServerConnection, SignatureScheme, SupportedCipherSuite};

/// Plaintext or ciphertext rustls may hold for one client before `write`
/// stops taking replies (the rest waits in the client's reply buffer).
const BUFFER_LIMIT: usize = 256 * 1024;

/// A server configuration, shared by every connection accepted with it.
pub type Config = Arc<ServerConfig>;

/// Builds the server configuration from the tls-* settings; `get` reads one
/// (the empty string when unset).
///
/// Errors: the warning Redis logs for the first setting that is wrong.
pub fn build(get: &dyn Fn(&str) -> String) -> Result<Config, String> {
    let cert_file = get("tls-cert-file");
    let key_file = get("tls-key-file");
    let ca_file = get("tls-ca-cert-file");
    let ca_dir = get("tls-ca-cert-dir");
    let auth = get("tls-auth-clients");
    if cert_file.is_empty() {
        return Err("No tls-cert-file configured!".into());
    }
    if key_file.is_empty() {
        return Err("No tls-key-file configured!".into());
    }
    let needs_ca = auth != "no" || get("tls-replication") == "yes" || get("tls-cluster") == "yes";
    if needs_ca && ca_file.is_empty() && ca_dir.is_empty() {
        return Err("Either tls-ca-cert-file or tls-ca-cert-dir must be specified when tls-cluster, tls-replication or tls-auth-clients are enabled!".into());
    }
    let (versions, provider) = provider(get)?;
    let dh_file = get("tls-dh-params-file");
    if !dh_file.is_empty() {
        check_dh_params(&dh_file)?;
    }

    let certs = load_certs(Path::new(&cert_file)).map_err(|e| format!("Failed to load certificate: {cert_file}: {e}"))?;
    if certs.is_empty() {
        return Err(format!("Failed to load certificate: {cert_file}: no certificate found"));
    }
    let key = load_key(&key_file, &get("tls-key-file-pass")).map_err(|e| format!("Failed to load private key: {key_file}: {e}"))?;

    let roots = roots(&ca_file, &ca_dir)?;
    let ca_err = |e: String| format!("Failed to configure CA certificate(s) file/directory: {e}");

    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| format!("Failed to configure ciphers: {e}"))?;
    let builder = if auth == "no" {
        builder.with_no_client_auth()
    } else {
        let mut v = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
        if auth == "optional" {
            v = v.allow_unauthenticated();
        }
        builder.with_client_cert_verifier(v.build().map_err(|e| ca_err(e.to_string()))?)
    };
    let mut cfg = builder.with_single_cert(certs, key).map_err(|e| format!("Failed to load private key: {key_file}: {e}"))?;
    cfg.ignore_client_order = get("tls-prefer-server-ciphers") == "yes";
    if get("tls-session-caching") == "no" {
        cfg.session_storage = Arc::new(NoServerSessionStorage {});
        cfg.send_tls13_tickets = 0;
    } else {
        let size = get("tls-session-cache-size").parse::<usize>().unwrap_or(20480);
        let timeout = get("tls-session-cache-timeout").parse::<u64>().unwrap_or(300);
        // OpenSSL's 0 means no limit; rustls needs a bound.
        let cache = ServerSessionMemoryCache::new(if size == 0 { 1 << 20 } else { size });
        cfg.session_storage = Arc::new(Expiring { cache, timeout });
    }
    Ok(Arc::new(cfg))
}

/// The tls-ca-cert-file and tls-ca-cert-dir certificates.
fn roots(ca_file: &str, ca_dir: &str) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    let ca_err = |e: String| format!("Failed to configure CA certificate(s) file/directory: {e}");
    if !ca_file.is_empty() {
        for c in load_certs(Path::new(ca_file)).map_err(|e| ca_err(format!("{ca_file}: {e}")))? {
            roots.add(c).map_err(|e| ca_err(format!("{ca_file}: {e}")))?;
        }
    }
    if !ca_dir.is_empty() {
        let entries = std::fs::read_dir(ca_dir).map_err(|e| ca_err(format!("{ca_dir}: {e}")))?;
        for entry in entries.flatten() {
            // Like a hashed CA directory: files that hold no certificate are skipped.
            if let Ok(certs) = load_certs(&entry.path()) {
                roots.add_parsable_certificates(certs);
            }
        }
    }
    Ok(roots)
}

/// The protocol versions the tls-* settings allow, and the crypto
/// provider with the cipher suites they narrow it to.
type Versions = Vec<&'static rustls::SupportedProtocolVersion>;
fn provider(get: &dyn Fn(&str) -> String) -> Result<(Versions, Arc<rustls::crypto::CryptoProvider>), String> {
    let versions = protocols(&get("tls-protocols"))?;
    let mut provider = rustls::crypto::ring::default_provider();
    provider.cipher_suites = suites(&provider.cipher_suites, &get("tls-ciphers"), &get("tls-ciphersuites"))?;
    Ok((versions, Arc::new(provider)))
}

/// A client configuration, for the connections this server opens.
pub type ClientCfg = Arc<ClientConfig>;

/// Builds the configuration of the connections this server opens (a
/// replica's link to its primary) from the tls-* settings.
///
/// Errors: the line Redis logs for the first setting that is wrong.
pub fn build_client(get: &dyn Fn(&str) -> String) -> Result<ClientCfg, String> {
    let (ca_file, ca_dir) = (get("tls-ca-cert-file"), get("tls-ca-cert-dir"));
    if ca_file.is_empty() && ca_dir.is_empty() {
        return Err("Either tls-ca-cert-file or tls-ca-cert-dir must be specified when tls-cluster, tls-replication or tls-auth-clients are enabled!".into());
    }
    let roots = roots(&ca_file, &ca_dir)?;
    let (versions, provider) = provider(get)?;
    let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| format!("Failed to configure CA certificate(s) file/directory: {e}"))?;
    let builder = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&versions)
        .map_err(|e| format!("Failed to configure ciphers: {e}"))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyName(webpki)));
    let (cert_file, key_file, pass) = if get("tls-client-cert-file").is_empty() {
        (get("tls-cert-file"), get("tls-key-file"), get("tls-key-file-pass"))
    } else {
        (get("tls-client-cert-file"), get("tls-client-key-file"), get("tls-client-key-file-pass"))
    };
    if cert_file.is_empty() {
        return Ok(Arc::new(builder.with_no_client_auth()));
    }
    let certs = load_certs(Path::new(&cert_file)).map_err(|e| format!("Failed to load certificate: {cert_file}: {e}"))?;
    let key = load_key(&key_file, &pass).map_err(|e| format!("Failed to load private key: {key_file}: {e}"))?;
    builder.with_client_auth_cert(certs, key).map(Arc::new).map_err(|e| format!("Failed to load private key: {key_file}: {e}"))
}

/// Checks a server's certificate chain against the CA certificates but not
/// the name it was reached by: Redis's replicas check no name either, and
/// a primary is often named by an address its certificate does not list.
#[derive(Debug)]
struct AnyName(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self.0.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(rustls::Error::InvalidCertificate(CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. })) => {
                Ok(ServerCertVerified::assertion())
            }
            other => other,
        }
    }

    fn verify_tls12_signature(&self, message: &[u8], cert: &CertificateDer<'_>, dss: &DigitallySignedStruct) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(&self, message: &[u8], cert: &CertificateDer<'_>, dss: &DigitallySignedStruct) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// The session cache with tls-session-cache-timeout: each entry carries
/// the second it was stored, and one older than the timeout is not
/// resumed (the client gets a full handshake), as OpenSSL's session
/// timeout works.
#[derive(Debug)]
struct Expiring {
    cache: Arc<ServerSessionMemoryCache>,
    /// Seconds a session may be resumed for.
    timeout: u64,
}

impl Expiring {
    fn now() -> u64 {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
    }

    /// The stored value without its time, if it has not expired.
    fn fresh(&self, stored: Vec<u8>) -> Option<Vec<u8>> {
        let (born, value) = stored.split_first_chunk::<8>()?;
        (Self::now().saturating_sub(u64::from_le_bytes(*born)) < self.timeout).then(|| value.to_vec())
    }
}

impl rustls::server::StoresServerSessions for Expiring {
    fn put(&self, key: Vec<u8>, value: Vec<u8>) -> bool {
        let mut stored = Self::now().to_le_bytes().to_vec();
        stored.extend_from_slice(&value);
        self.cache.put(key, stored)
    }

    fn get(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.fresh(self.cache.get(key)?)
    }

    fn take(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.fresh(self.cache.take(key)?)
    }

    fn can_cache(&self) -> bool {
        self.timeout > 0
    }
}

/// Reads the private key in `path` (PEM): a PKCS#8 key encrypted with a
/// passphrase (`ENCRYPTED PRIVATE KEY`, PBES2) is decrypted with `pass`
/// (tls-key-file-pass); any other key is read as it is, `pass` unused, as
/// OpenSSL does.
fn load_key(path: &str, pass: &str) -> Result<PrivateKeyDer<'static>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    if text.contains("-----BEGIN ENCRYPTED PRIVATE KEY-----") {
        if pass.is_empty() {
            return Err("the key is encrypted and tls-key-file-pass is not set".into());
        }
        let (_, doc) = pkcs8::SecretDocument::from_pem(&text).map_err(|e| e.to_string())?;
        let info = pkcs8::EncryptedPrivateKeyInfo::try_from(doc.as_bytes()).map_err(|e| e.to_string())?;
        let plain = info.decrypt(pass).map_err(|_| "bad decrypt (wrong tls-key-file-pass?)".to_string())?;
        return Ok(PrivateKeyDer::Pkcs8(plain.as_bytes().to_vec().into()));
    }
    PrivateKeyDer::from_pem_slice(text.as_bytes()).map_err(|e| e.to_string())
}

/// tls-dh-params-file: read and checked as Redis loads it (a PEM `DH
/// PARAMETERS` block holding a DER sequence), with Redis's warnings. The
/// parameters choose the group of a DHE key exchange, and rustls offers
/// no DHE suite (ECDHE only), so none uses them: a client that can only
/// do DHE fails its handshake with or without them.
fn check_dh_params(path: &str) -> Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("Failed to load {path}: {}", crate::log::strerror(&e)))?;
    match pkcs8::der::Document::from_pem(&text) {
        Ok(("DH PARAMETERS", _)) => Ok(()),
        _ => Err(format!("{path}: failed to read DH params.")),
    }
}

fn load_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let iter = CertificateDer::pem_file_iter(path).map_err(|e| e.to_string())?;
    iter.collect::<Result<Vec<_>, _>>().map_err(|e| e.to_string())
}

/// tls-protocols: the versions named, both when empty. TLSv1 and TLSv1.1
/// are accepted names that rustls does not speak.
fn protocols(s: &str) -> Result<Vec<&'static rustls::SupportedProtocolVersion>, String> {
    if s.trim().is_empty() {
        return Ok(vec![&rustls::version::TLS13, &rustls::version::TLS12]);
    }
    let mut out = Vec::new();
    for w in s.split_whitespace() {
        match w.to_ascii_lowercase().as_str() {
            "tlsv1" | "tlsv1.1" => {}
            "tlsv1.2" => out.push(&rustls::version::TLS12),
            "tlsv1.3" => out.push(&rustls::version::TLS13),
            _ => return Err("Invalid tls-protocols specified. Use a combination of 'TLSv1', 'TLSv1.1', 'TLSv1.2' and 'TLSv1.3'.".into()),
        }
    }
    if out.is_empty() {
        return Err("Invalid tls-protocols specified: only TLSv1.2 and TLSv1.3 are supported.".into());
    }
    Ok(out)
}

/// The rustls name of an OpenSSL TLS 1.2 cipher name
/// (ECDHE-RSA-AES128-GCM-SHA256 is TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256).
fn openssl_to_iana(name: &str) -> Option<&'static str> {
    Some(match name {
        "ECDHE-ECDSA-AES128-GCM-SHA256" => "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
        "ECDHE-ECDSA-AES256-GCM-SHA384" => "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
        "ECDHE-ECDSA-CHACHA20-POLY1305" => "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
        "ECDHE-RSA-AES128-GCM-SHA256" => "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        "ECDHE-RSA-AES256-GCM-SHA384" => "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
        "ECDHE-RSA-CHACHA20-POLY1305" => "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
        _ => return None,
    })
}

/// The provider's suites narrowed by tls-ciphers (TLS 1.2, OpenSSL names,
/// `:`-separated) and tls-ciphersuites (TLS 1.3, IANA names). A list that
/// names no suite rustls has (OpenSSL keywords such as DEFAULT or HIGH)
/// leaves that version's suites as they are.
fn suites(all: &[SupportedCipherSuite], ciphers: &str, ciphersuites: &str) -> Result<Vec<SupportedCipherSuite>, String> {
    let name = |s: &SupportedCipherSuite| format!("{:?}", s.suite());
    let pick = |list: &str, tls13: bool| -> Option<Vec<String>> {
        let names: Vec<String> = list
            .split([':', ',', ' '])
            .filter(|w| !w.is_empty() && !w.starts_with('!') && !w.starts_with('-'))
            .map(|w| if tls13 { w.replacen("TLS_", "TLS13_", 1) } else { openssl_to_iana(w).map_or_else(|| w.to_string(), str::to_string) })
            .filter(|w| all.iter().any(|s| name(s) == *w))
            .collect();
        (!names.is_empty()).then_some(names)
    };
    let want12 = pick(ciphers, false);
    let want13 = pick(ciphersuites, true);
    let out: Vec<SupportedCipherSuite> = all
        .iter()
        .filter(|s| {
            let want = if matches!(s, SupportedCipherSuite::Tls13(_)) { &want13 } else { &want12 };
            want.as_ref().is_none_or(|w| w.contains(&name(s)))
        })
        .copied()
        .collect();
    if out.is_empty() {
        return Err(format!("Failed to configure ciphers: {ciphers}"));
    }
    Ok(out)
}

/// What one `Session::read` did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ReadOutcome {
    /// Ciphertext bytes taken from the socket.
    pub net_bytes: usize,
    /// The peer closed (close_notify or end of stream).
    pub eof: bool,
    /// The read stopped at `max` plaintext bytes with the socket not
    /// drained: call again (no edge will announce it).
    pub unread: bool,
}

/// A socket that notes whether its last read filled less than was asked.
struct ShortReads<'a, S> {
    sock: &'a mut S,
    short: bool,
}

impl<S: Read> Read for ShortReads<'_, S> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.sock.read(buf)?;
        self.short = n < buf.len();
        Ok(n)
    }
}

/// A blocking TLS client connection (MIGRATE's to its target with
/// tls-cluster): the handshake runs within the first read or write, under
/// the socket's timeouts.
pub struct BlockingClient(rustls::StreamOwned<ClientConnection, std::net::TcpStream>);

impl BlockingClient {
    /// Starts a session to `host` over `sock`.
    ///
    /// Errors: rustls refused the configuration or the name.
    pub fn new(cfg: &ClientCfg, host: &str, sock: std::net::TcpStream) -> io::Result<BlockingClient> {
        let name = ServerName::try_from(host.to_string()).map_err(io::Error::other)?;
        let conn = ClientConnection::new(cfg.clone(), name).map_err(io::Error::other)?;
        Ok(BlockingClient(rustls::StreamOwned::new(conn, sock)))
    }

    /// The socket under the session (for its timeouts).
    pub fn sock(&self) -> &std::net::TcpStream {
        self.0.get_ref()
    }
}

impl Read for BlockingClient {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read(buf)
    }
}

impl Write for BlockingClient {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

/// One connection's TLS state: a client's of this server, or this
/// server's own to its primary.
pub struct Session {
    conn: Connection,
}

impl Session {
    /// A server-side connection waiting for the client's hello.
    ///
    /// Errors: rustls refused the configuration.
    pub fn new(cfg: &Config) -> io::Result<Session> {
        let mut conn = ServerConnection::new(cfg.clone()).map_err(io::Error::other)?;
        conn.set_buffer_limit(Some(BUFFER_LIMIT));
        Ok(Session { conn: Connection::Server(conn) })
    }

    /// A client-side connection to `host`, its hello queued for `write`.
    ///
    /// Errors: rustls refused the configuration or the name.
    pub fn client(cfg: &ClientCfg, host: &str) -> io::Result<Session> {
        let name = ServerName::try_from(host.to_string()).map_err(io::Error::other)?;
        let mut conn = ClientConnection::new(cfg.clone(), name).map_err(io::Error::other)?;
        conn.set_buffer_limit(Some(BUFFER_LIMIT));
        Ok(Session { conn: Connection::Client(conn) })
    }

    /// True while rustls holds bytes the socket has not taken.
    pub fn wants_write(&self) -> bool {
        self.conn.wants_write()
    }

    /// Reads what `sock` holds, decrypts it and appends the plaintext to
    /// `out` (through `scratch`), stopping once `max` bytes were appended.
    /// Handshake replies are queued; `write` sends them. `to_end`: the
    /// peer's end is known closed, so a short read does not end the read
    /// (see the plain path in `net.rs`).
    ///
    /// Errors: a socket error, or a TLS failure (bad record, certificate
    /// refused), whose alert is sent before returning.
    pub fn read<S: Read + Write>(&mut self, sock: &mut S, scratch: &mut [u8], out: &mut Vec<u8>, max: usize, to_end: bool) -> io::Result<ReadOutcome> {
        let mut r = ReadOutcome::default();
        let start = out.len();
        let mut sock = ShortReads { sock, short: false };
        loop {
            match self.conn.read_tls(&mut sock) {
                Ok(0) => r.eof = true,
                Ok(n) => r.net_bytes += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(r),
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
            if let Err(e) = self.conn.process_new_packets() {
                // Tell the peer why (the alert), then give up.
                let _ = self.conn.write_tls(sock.sock);
                return Err(io::Error::new(ErrorKind::InvalidData, e));
            }
            loop {
                match self.conn.reader().read(scratch) {
                    Ok(0) => {
                        r.eof = true;
                        break;
                    }
                    Ok(n) => out.extend_from_slice(&scratch[..n]),
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == ErrorKind::UnexpectedEof => {
                        r.eof = true;
                        break;
                    }
                    Err(e) => return Err(e),
                }
            }
            if r.eof {
                return Ok(r);
            }
            if out.len() - start >= max {
                r.unread = true;
                return Ok(r);
            }
            if sock.short && !to_end {
                // As on the plain path: a short read took all the socket
                // held, and what comes later raises a new edge, so the read
                // that would only say WouldBlock is skipped.
                return Ok(r);
            }
        }
    }

    /// Sends what rustls holds, then encrypts and sends as much of `buf` as
    /// it and the socket take. Returns the plaintext bytes taken from
    /// `buf` and the ciphertext bytes written.
    ///
    /// Errors: the socket's (WouldBlock is not one: it stops the write).
    pub fn write<S: Write>(&mut self, sock: &mut S, buf: &[u8]) -> io::Result<(usize, usize)> {
        let mut taken = 0;
        let mut sent = 0;
        loop {
            while self.conn.wants_write() {
                match self.conn.write_tls(sock) {
                    Ok(0) => return Ok((taken, sent)),
                    Ok(n) => sent += n,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok((taken, sent)),
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
            if taken == buf.len() {
                return Ok((taken, sent));
            }
            let n = self.conn.writer().write(&buf[taken..])?;
            if n == 0 {
                return Ok((taken, sent));
            }
            taken += n;
        }
    }

    /// Sends close_notify, best effort, before the socket is closed.
    pub fn close<S: Write>(&mut self, sock: &mut S) {
        self.conn.send_close_notify();
        while self.conn.wants_write() {
            if self.conn.write_tls(sock).is_err() {
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocols_parse() {
        assert_eq!(protocols("").unwrap().len(), 2);
        assert_eq!(protocols("TLSv1.2").unwrap().len(), 1);
        assert_eq!(protocols("TLSv1.2 TLSv1.3").unwrap().len(), 2);
        assert!(protocols("TLSv1 TLSv1.1").is_err());
        assert!(protocols("SSLv3").unwrap_err().starts_with("Invalid tls-protocols specified."));
    }

    #[test]
    fn cipher_lists_narrow_what_rustls_has() {
        let all = rustls::crypto::ring::default_provider().cipher_suites;
        assert_eq!(suites(&all, "", "").unwrap().len(), all.len());
        assert_eq!(suites(&all, "DEFAULT:!MEDIUM", "").unwrap().len(), all.len());
        let one12 = suites(&all, "ECDHE-RSA-AES256-GCM-SHA384", "").unwrap();
        assert_eq!(one12.iter().filter(|s| !matches!(s, SupportedCipherSuite::Tls13(_))).count(), 1);
        let one13 = suites(&all, "", "TLS_AES_256_GCM_SHA384").unwrap();
        assert_eq!(one13.iter().filter(|s| matches!(s, SupportedCipherSuite::Tls13(_))).count(), 1);
    }

    #[test]
    fn dh_params_are_read_as_redis_reads_them() {
        let dir = std::env::temp_dir().join(format!("densekv-dh-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (good, other) = (dir.join("dh.pem"), dir.join("other.pem"));
        // 1024-bit parameters made with `openssl dhparam 1024`.
        std::fs::write(&good, "-----BEGIN DH PARAMETERS-----\nMIGHAoGBAONuVywbafKsZw1tI4PNi+7nmF4v02dFv9K+mCs5VuzjSFU+UgZjQtCO\nc3qHh5+pU0PwuebeMeD/kLPpUkRIPhNu0t03Pk6uAri6+xRRgjO4uB6ME66vfq8i\njjlSEG9tBAmxB8LqipdtenK/A+0ndni8F2pfbA5OZSuzw5Lyu6OPAgEC\n-----END DH PARAMETERS-----\n").unwrap();
        std::fs::write(&other, "-----BEGIN CERTIFICATE-----\nMAMCAQE=\n-----END CERTIFICATE-----\n").unwrap();
        assert_eq!(check_dh_params(good.to_str().unwrap()), Ok(()));
        let other = other.to_str().unwrap();
        assert_eq!(check_dh_params(other), Err(format!("{other}: failed to read DH params.")));
        assert_eq!(check_dh_params("/nonexistent/dh.pem"), Err("Failed to load /nonexistent/dh.pem: No such file or directory".into()));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn build_reports_missing_files_as_redis_does() {
        let get = |k: &str| match k {
            "tls-cert-file" => "/nonexistent/c.pem".to_string(),
            "tls-key-file" => "/nonexistent/k.pem".to_string(),
            "tls-auth-clients" => "no".to_string(),
            _ => String::new(),
        };
        assert!(build(&get).unwrap_err().starts_with("Failed to load certificate: /nonexistent/c.pem: "));
        let no_cert = |k: &str| if k == "tls-auth-clients" { "no".to_string() } else { String::new() };
        assert_eq!(build(&no_cert).unwrap_err(), "No tls-cert-file configured!");
        let no_ca = |k: &str| match k {
            "tls-cert-file" | "tls-key-file" => "x".to_string(),
            "tls-auth-clients" => "yes".to_string(),
            _ => String::new(),
        };
        assert!(build(&no_ca).unwrap_err().starts_with("Either tls-ca-cert-file or tls-ca-cert-dir"));
    }
}
