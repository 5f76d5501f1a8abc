//! The appliance side: accepts TCP, completes mutual TLS (the client certificate must chain to
//! the configured CA) and admits the peer by the allow-list, yielding the peer's
//! [`Authorization`] so each call can be checked against the CSI service it belongs to. Every
//! refusal is logged with its reason. The gateway serves the admitted connections with its
//! front (its `splice::appliance`); the reference backend with tonic.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rustls::server::WebPkiClientVerifier;
use rustls::{CertificateError, ServerConfig};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

use super::authz::{self, Authorization, Peer, PeerRule};
use super::reload::Reloading;
use super::{Material, MinVersion, TlsError};
use crate::metrics;

/// `[appliance]`, validated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerSettings {
    /// `host:port` to listen on.
    pub listen: String,
    /// `ca` here is the bundle that client certificates must chain to.
    pub material: Material,
    pub min_version: MinVersion,
    pub peers: Vec<PeerRule>,
    pub handshake_timeout: Duration,
    pub reload_interval: Duration,
    /// TCP keepalive period on accepted connections.
    pub tcp_keepalive: Duration,
}

/// Accepts TLS connections with the current server material.
pub struct Acceptor {
    config: Reloading<ServerConfig>,
    settings: ServerSettings,
}

impl Acceptor {
    /// Loads the material (failing now if it is unusable) and starts watching it.
    pub fn new(settings: &ServerSettings) -> Result<Arc<Acceptor>, TlsError> {
        let s = settings.clone();
        let config = Reloading::start(
            "appliance server certificate",
            settings.material.files(),
            settings.reload_interval,
            move || build(&s),
        )?;
        Ok(Arc::new(Acceptor {
            config,
            settings: settings.clone(),
        }))
    }

    /// The settings it was made from.
    pub fn settings(&self) -> &ServerSettings {
        &self.settings
    }
}

fn build(s: &ServerSettings) -> Result<ServerConfig, TlsError> {
    let loaded = s.material.load()?;
    super::record_expiry(&s.material.cert, &loaded.chain);
    let verifier = WebPkiClientVerifier::builder_with_provider(loaded.roots, super::provider())
        .build()
        .map_err(|e| TlsError::Verifier {
            path: s.material.ca.clone(),
            message: e.to_string(),
        })?;
    let mut config = ServerConfig::builder_with_provider(super::provider())
        .with_protocol_versions(s.min_version.versions())?
        .with_client_cert_verifier(verifier)
        .with_single_cert(loaded.chain, loaded.key)
        .map_err(|e| super::pair_error(&s.material, e))?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(config)
}

impl Acceptor {
    /// Completes mutual TLS on `tcp` and admits the peer by the allow-list. A refusal is logged
    /// with its reason and counted by reason; `None` then.
    pub async fn handshake(
        &self,
        tcp: TcpStream,
        addr: SocketAddr,
    ) -> Option<(TlsStream<crate::tcp::Tcp>, Authorization)> {
        let tls = TlsAcceptor::from(self.config.current());
        let timeout = self.settings.handshake_timeout;
        let stream = match tokio::time::timeout(timeout, tls.accept(crate::tcp::Tcp(tcp))).await {
            Ok(Ok(stream)) => stream,
            Ok(Err(e)) => {
                refused(addr, &e);
                return None;
            }
            Err(_) => {
                metrics::tls_handshake_failure("timeout");
                tracing::warn!(peer = %addr, reason = %format!("no TLS handshake within {timeout:?}"), "refused bridge connection");
                return None;
            }
        };
        let Some(cert) = stream
            .get_ref()
            .1
            .peer_certificates()
            .and_then(|c| c.first())
        else {
            // The verifier requires a certificate; this is defence in depth.
            metrics::tls_handshake_failure("no_certificate");
            tracing::warn!(peer = %addr, reason = "no client certificate", "refused bridge connection");
            return None;
        };
        let authorization =
            match Peer::from_cert(cert).and_then(|p| authz::authorize(&self.settings.peers, &p)) {
                Ok(a) => a,
                Err(reason) => {
                    metrics::tls_handshake_failure("peer_not_allowed");
                    tracing::warn!(peer = %addr, %reason, "refused bridge connection");
                    return None;
                }
            };
        tracing::info!(peer = %addr, identity = %authorization.peer, services = ?authorization.services, "bridge peer connected");
        Some((stream, authorization))
    }
}

/// Logs a failed handshake with the reason in words an operator acts on, and counts it under
/// a bounded reason label.
fn refused(addr: SocketAddr, e: &std::io::Error) {
    let tls = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>());
    let (label, reason) = match tls {
        Some(rustls::Error::NoCertificatesPresented) => (
            "no_certificate",
            "the client presented no certificate (mutual TLS is required)".to_string(),
        ),
        Some(rustls::Error::InvalidCertificate(c)) => match c {
            CertificateError::UnknownIssuer => (
                "unknown_issuer",
                "the client certificate is not signed by a trusted CA (unknown issuer)".to_string(),
            ),
            // A CA of the same name as a trusted one, but another key.
            CertificateError::BadSignature => (
                "unknown_issuer",
                "the client certificate is not signed by a trusted CA (bad signature)".to_string(),
            ),
            CertificateError::ExpiredContext { not_after, .. } => (
                "expired",
                format!(
                    "the client certificate has expired (not after {})",
                    humantime::format_rfc3339_seconds(
                        std::time::UNIX_EPOCH + Duration::from_secs(not_after.as_secs())
                    )
                ),
            ),
            CertificateError::Expired => {
                ("expired", "the client certificate has expired".to_string())
            }
            CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => (
                "not_yet_valid",
                format!("the client certificate is not valid yet ({c:?})"),
            ),
            other => (
                "invalid_certificate",
                format!("invalid client certificate: {other:?}"),
            ),
        },
        Some(rustls::Error::InvalidMessage(m)) => (
            "not_tls",
            format!("not a TLS client (plaintext on the TLS port?): {m:?}"),
        ),
        Some(other) => ("other", other.to_string()),
        None if e.kind() == std::io::ErrorKind::UnexpectedEof => {
            // A bare TCP connect and close (a port check) is not worth a warning.
            return tracing::debug!(peer = %addr, "connection closed before the TLS handshake");
        }
        None => ("other", e.to_string()),
    };
    metrics::tls_handshake_failure(label);
    tracing::warn!(peer = %addr, %reason, "refused bridge connection");
}
