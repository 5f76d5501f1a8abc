//! csi-gateway-tls: CSI over mutually authenticated TLS on TCP, the remote appliance bridge's
//! transport. A gateway dials a TCP upstream only over TLS with a client certificate
//! ([`client`]); a gateway on the appliance — or the reference backend on a `tcp://` endpoint —
//! accepts TLS from authorised peers only ([`server`], [`authz`]). Certificates, keys and CA
//! bundles reload without a restart ([`reload`]), and [`gencerts`] makes a development PKI so
//! the bridge can be tried in one command. [`metrics`]: what a handshake and a loaded
//! certificate record.
//!
//! Its own crate because both the gateway and the reference backend serve it, and neither
//! depends on the other's code for it. The gateway re-exports it whole as `csi_gateway::tls`
//! and adds the appliance listener, which serves admitted peers with its front.
//!
//! Plaintext TCP is refused by design: a CSI plugin holds the keys to the storage, and the
//! bridge crosses a network.
#![forbid(unsafe_code)]

pub mod authz;
pub mod client;
pub mod gencerts;
pub mod metrics;
pub mod reload;
pub mod server;
pub mod tcp;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls::crypto::CryptoProvider;
use rustls::{RootCertStore, SupportedProtocolVersion};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

pub use authz::{Authorization, PeerRule};
pub use client::{ClientSettings, Dialer};
pub use server::{Acceptor, ServerSettings};

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read {path}: {message}")]
    Read { path: PathBuf, message: String },
    #[error("{path}: {message}")]
    Content { path: PathBuf, message: String },
    #[error("TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
    #[error("client CA {path}: {message}")]
    Verifier { path: PathBuf, message: String },
}

/// The oldest TLS version a side accepts. TLS 1.3 unless configured otherwise.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
pub enum MinVersion {
    #[serde(rename = "1.2")]
    Tls12,
    #[default]
    #[serde(rename = "1.3")]
    Tls13,
}

impl std::str::FromStr for MinVersion {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "1.2" => Ok(MinVersion::Tls12),
            "1.3" => Ok(MinVersion::Tls13),
            _ => Err(format!("{s:?}: must be \"1.2\" or \"1.3\"")),
        }
    }
}

impl MinVersion {
    fn versions(self) -> &'static [&'static SupportedProtocolVersion] {
        static BOTH: &[&SupportedProtocolVersion] =
            &[&rustls::version::TLS13, &rustls::version::TLS12];
        static ONLY_13: &[&SupportedProtocolVersion] = &[&rustls::version::TLS13];
        match self {
            MinVersion::Tls12 => BOTH,
            MinVersion::Tls13 => ONLY_13,
        }
    }
}

/// One side's identity (certificate chain and key) and the CA bundle it trusts for the peer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Material {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub ca: PathBuf,
}

/// [`Material`] read and parsed.
pub struct Loaded {
    pub chain: Vec<CertificateDer<'static>>,
    pub key: PrivateKeyDer<'static>,
    pub roots: Arc<RootCertStore>,
}

impl Material {
    pub fn files(&self) -> Vec<PathBuf> {
        vec![self.cert.clone(), self.key.clone(), self.ca.clone()]
    }

    /// Reads and parses all three files; any problem names the file.
    pub fn load(&self) -> Result<Loaded, TlsError> {
        let chain = certs(&self.cert)?;
        let key =
            PrivateKeyDer::from_pem_slice(&read(&self.key)?).map_err(|e| content(&self.key, e))?;
        let mut roots = RootCertStore::empty();
        for cert in certs(&self.ca)? {
            roots.add(cert).map_err(|e| content(&self.ca, e))?;
        }
        Ok(Loaded {
            chain,
            key,
            roots: Arc::new(roots),
        })
    }
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|e| TlsError::Read {
        path: path.into(),
        message: e.to_string(),
    })
}

fn content(path: &Path, e: impl std::fmt::Display) -> TlsError {
    TlsError::Content {
        path: path.into(),
        message: e.to_string(),
    }
}

fn certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_slice_iter(&read(path)?)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| content(path, e))?;
    if certs.is_empty() {
        return Err(content(path, "no PEM certificate in the file"));
    }
    Ok(certs)
}

/// A certificate chain and key rustls would not pair, with both files named.
fn pair_error(m: &Material, e: rustls::Error) -> TlsError {
    let message = match e {
        rustls::Error::InconsistentKeys(_) => {
            format!(
                "the private key in {} does not match this certificate",
                m.key.display()
            )
        }
        other => format!("with key {}: {other}", m.key.display()),
    };
    TlsError::Content {
        path: m.cert.clone(),
        message,
    }
}

/// The one crypto provider of the bridge: ring (no cmake or aws-lc build).
fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// HTTP/2 keepalive: a PING every `interval`, and the connection is dropped when one goes
/// unanswered for `timeout` (a peer that vanished without a FIN is otherwise noticed only by
/// the next call, after TCP's retransmission timeout of minutes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Keepalive {
    pub interval: Duration,
    pub timeout: Duration,
}

/// TCP keepalive on a socket, so dead peers are found even on an idle connection the other
/// side no longer pings.
pub fn tcp_keepalive(stream: &tokio::net::TcpStream, every: Duration) {
    let ka = socket2::TcpKeepalive::new()
        .with_time(every)
        .with_interval(every);
    if let Err(e) = socket2::SockRef::from(stream).set_tcp_keepalive(&ka) {
        tracing::debug!(error = %e, "cannot set TCP keepalive");
    }
    let _ = stream.set_nodelay(true);
}

/// Publishes when the leaf certificate loaded from `path` expires, so operators can alert
/// before it does (`csi_gateway_certificate_expiry_timestamp_seconds{certificate=path}`).
pub fn record_expiry(path: &std::path::Path, chain: &[CertificateDer<'static>]) {
    let Some(leaf) = chain.first() else { return };
    if let Ok((_, cert)) = x509_parser::parse_x509_certificate(leaf.as_ref()) {
        let not_after = cert.validity().not_after.timestamp();
        metrics::certificate_expiry(&path.display().to_string(), not_after as f64);
    }
}
