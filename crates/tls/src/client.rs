//! The dialing side: TCP, then TLS with a client certificate, HTTP/2 agreed by ALPN, and the
//! server's certificate verified against the configured CA for the server name (the endpoint's
//! host unless `server_name` says otherwise; it is also the SNI sent).

use std::sync::Arc;
use std::time::Duration;

use rustls::ClientConfig;
use rustls_pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use super::reload::Reloading;
use super::{Keepalive, Material, MinVersion, TlsError};

/// `[upstream.tls]`, validated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientSettings {
    pub material: Material,
    /// Name verified in the server certificate and sent as SNI; `None`: the endpoint's host.
    pub server_name: Option<String>,
    pub min_version: MinVersion,
    pub reload_interval: Duration,
    pub keepalive: Keepalive,
}

/// Dials TLS connections with the current client material.
pub struct Dialer {
    config: Reloading<ClientConfig>,
    server_name: Option<String>,
    keepalive: Keepalive,
}

impl std::fmt::Debug for Dialer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dialer")
            .field("server_name", &self.server_name)
            .finish_non_exhaustive()
    }
}

impl Dialer {
    /// Loads the material (failing now if it is unusable) and starts watching it.
    pub fn new(settings: &ClientSettings) -> Result<Arc<Dialer>, TlsError> {
        Dialer::named("upstream client certificate", settings)
    }

    /// [`Dialer::new`], for the peer `what` names in reload messages (e.g. etcd's client).
    pub fn named(what: &'static str, settings: &ClientSettings) -> Result<Arc<Dialer>, TlsError> {
        let s = settings.clone();
        let config = Reloading::start(
            what,
            settings.material.files(),
            settings.reload_interval,
            move || build(&s),
        )?;
        Ok(Arc::new(Dialer {
            config,
            server_name: settings.server_name.clone(),
            keepalive: settings.keepalive,
        }))
    }

    pub fn keepalive(&self) -> Keepalive {
        self.keepalive
    }

    /// Connects to `addr` (`host:port`) and completes the TLS handshake, within `timeout`.
    pub async fn dial(
        &self,
        addr: &str,
        timeout: Duration,
    ) -> Result<TlsStream<super::tcp::Tcp>, String> {
        let name = self.server_name.clone().unwrap_or_else(|| host_of(addr));
        let name = ServerName::try_from(name.clone())
            .map_err(|_| format!("{name:?} is not a valid TLS server name"))?;
        let connector = TlsConnector::from(self.config.current());
        let dial = async {
            let tcp = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
            super::tcp_keepalive(&tcp, self.keepalive.interval);
            let tls = connector
                .connect(name, super::tcp::Tcp(tcp))
                .await
                .map_err(|e| handshake_failure(&e))?;
            match tls.get_ref().1.alpn_protocol() {
                None | Some(b"h2") => Ok(tls),
                Some(p) => Err(format!(
                    "the server agreed to {:?} instead of HTTP/2 (ALPN h2)",
                    String::from_utf8_lossy(p)
                )),
            }
        };
        tokio::time::timeout(timeout, dial)
            .await
            .map_err(|_| format!("TCP connect and TLS handshake took over {timeout:?}"))?
    }
}

/// A failed handshake in the words an operator acts on: whose CA is wrong, or that the peer
/// is no TLS server at all; anything else as rustls says it.
fn handshake_failure(e: &std::io::Error) -> String {
    use rustls::{AlertDescription as Alert, CertificateError as Cert, Error};
    let tls = e.get_ref().and_then(|inner| inner.downcast_ref::<Error>());
    match tls {
        Some(Error::InvalidCertificate(c @ (Cert::UnknownIssuer | Cert::BadSignature))) => {
            format!("peer certificate is not signed by the configured CA ({c:?})")
        }
        // The server checked this gateway's certificate and refused it.
        Some(Error::AlertReceived(
            a @ (Alert::UnknownCA | Alert::BadCertificate | Alert::DecryptError),
        )) => format!(
            "the peer refused this gateway's certificate: not signed by a CA it trusts \
             (alert {a:?})"
        ),
        Some(Error::InvalidMessage(m)) => {
            format!("the peer does not speak TLS (a plaintext port?): {m:?}")
        }
        Some(other) => format!("TLS handshake failed: {other}"),
        None => format!("TLS handshake failed: {e}"),
    }
}

fn build(s: &ClientSettings) -> Result<ClientConfig, TlsError> {
    let loaded = s.material.load()?;
    super::record_expiry(&s.material.cert, &loaded.chain);
    let mut config = ClientConfig::builder_with_provider(super::provider())
        .with_protocol_versions(s.min_version.versions())?
        .with_root_certificates(loaded.roots)
        .with_client_auth_cert(loaded.chain, loaded.key)
        .map_err(|e| super::pair_error(&s.material, e))?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(config)
}

/// The host of `host:port` or `[v6]:port`.
fn host_of(addr: &str) -> String {
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .to_string()
}

#[cfg(test)]
mod tests {
    #[test]
    fn host_of_strips_the_port_and_brackets() {
        assert_eq!(
            super::host_of("appliance.example:9443"),
            "appliance.example"
        );
        assert_eq!(super::host_of("127.0.0.1:1"), "127.0.0.1");
        assert_eq!(super::host_of("[::1]:9443"), "::1");
    }
}
