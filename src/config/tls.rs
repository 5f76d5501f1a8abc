//! The bridge's configuration sections: `[upstream.tls]` (dialing a TCP upstream) and
//! `[appliance]` (the mTLS listener on the appliance), as written and as validated.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::ConfigError;
use crate::dialect::Dialect;
use crate::endpoint::Endpoint;
use crate::tls::{ClientSettings, Keepalive, Material, PeerRule, ServerSettings};

/// `[upstream.tls]`: required for a `tcp://` upstream.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamTlsFile {
    /// This gateway's client certificate chain and key (PEM).
    pub cert: PathBuf,
    pub key: PathBuf,
    /// CA bundle the appliance's server certificate must chain to (PEM).
    pub ca: PathBuf,
    /// Name to verify in the server certificate and send as SNI; default: the endpoint's host.
    pub server_name: Option<String>,
    #[serde(default = "default_min_version")]
    pub min_version: String,
    #[serde(default = "default_reload", with = "humantime_serde")]
    pub reload_interval: Duration,
    #[serde(default = "default_keepalive_interval", with = "humantime_serde")]
    pub keepalive_interval: Duration,
    #[serde(default = "default_keepalive_timeout", with = "humantime_serde")]
    pub keepalive_timeout: Duration,
}

/// `[appliance]`: listen on TCP with mutual TLS and forward to the upstream.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApplianceFile {
    /// `tcp://host:port`.
    pub listen: String,
    pub cert: PathBuf,
    pub key: PathBuf,
    /// CA bundle that client certificates must chain to.
    pub client_ca: PathBuf,
    #[serde(default = "default_min_version")]
    pub min_version: String,
    #[serde(default = "default_handshake_timeout", with = "humantime_serde")]
    pub handshake_timeout: Duration,
    #[serde(default = "default_reload", with = "humantime_serde")]
    pub reload_interval: Duration,
    #[serde(default = "default_keepalive_interval", with = "humantime_serde")]
    pub tcp_keepalive: Duration,
    /// Allow-list; empty admits every certificate the CA signed, for every service.
    #[serde(default)]
    pub peers: Vec<PeerFile>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeerFile {
    #[serde(default)]
    pub dns: Vec<String>,
    #[serde(default)]
    pub uris: Vec<String>,
    /// CSI services, e.g. ["Identity", "Node"], and the gateway's own ("Health",
    /// "ServerReflection"); absent: all.
    pub services: Option<Vec<String>>,
}

fn default_min_version() -> String {
    "1.3".into()
}
fn default_reload() -> Duration {
    Duration::from_secs(2)
}
fn default_keepalive_interval() -> Duration {
    Duration::from_secs(10)
}
fn default_keepalive_timeout() -> Duration {
    Duration::from_secs(5)
}
fn default_handshake_timeout() -> Duration {
    Duration::from_secs(10)
}

fn invalid(field: &'static str, message: String) -> ConfigError {
    ConfigError::Invalid { field, message }
}

fn positive(field: &'static str, d: Duration) -> Result<Duration, ConfigError> {
    if d.is_zero() {
        return Err(invalid(field, "must be above zero".into()));
    }
    Ok(d)
}

impl UpstreamTlsFile {
    pub fn validate(self) -> Result<ClientSettings, ConfigError> {
        Ok(ClientSettings {
            material: Material {
                cert: self.cert,
                key: self.key,
                ca: self.ca,
            },
            server_name: self.server_name.filter(|n| !n.is_empty()),
            min_version: self
                .min_version
                .parse()
                .map_err(|e| invalid("upstream.tls.min_version", e))?,
            reload_interval: positive("upstream.tls.reload_interval", self.reload_interval)?,
            keepalive: Keepalive {
                interval: positive("upstream.tls.keepalive_interval", self.keepalive_interval)?,
                timeout: positive("upstream.tls.keepalive_timeout", self.keepalive_timeout)?,
            },
        })
    }
}

impl ApplianceFile {
    pub fn validate(self) -> Result<ServerSettings, ConfigError> {
        let listen = match self.listen.parse::<Endpoint>() {
            Ok(Endpoint::Tcp(addr)) => addr,
            _ => {
                return Err(invalid(
                    "appliance.listen",
                    format!(
                        "{:?}: the appliance listens on tcp://host:port",
                        self.listen
                    ),
                ))
            }
        };
        let known: BTreeSet<&str> = Dialect::ALL
            .iter()
            .flat_map(|d| d.methods().iter().map(|m| m.service))
            .chain(crate::front::services::RULE_NAMES)
            .collect();
        let mut peers = Vec::new();
        for p in self.peers {
            if p.dns.is_empty() && p.uris.is_empty() {
                return Err(invalid(
                    "appliance.peers",
                    "each peer rule names at least one of dns or uris".into(),
                ));
            }
            if let Some(bad) = p
                .services
                .iter()
                .flatten()
                .find(|s| !known.contains(s.as_str()))
            {
                return Err(invalid(
                    "appliance.peers.services",
                    format!("{bad:?} is neither a CSI service nor one of the gateway's; known: {known:?}"),
                ));
            }
            peers.push(PeerRule {
                dns: p.dns,
                uris: p.uris,
                services: p.services.map(|s| s.into_iter().collect()),
            });
        }
        Ok(ServerSettings {
            listen,
            material: Material {
                cert: self.cert,
                key: self.key,
                ca: self.client_ca,
            },
            min_version: self
                .min_version
                .parse()
                .map_err(|e| invalid("appliance.min_version", e))?,
            peers,
            handshake_timeout: positive("appliance.handshake_timeout", self.handshake_timeout)?,
            reload_interval: positive("appliance.reload_interval", self.reload_interval)?,
            tcp_keepalive: positive("appliance.tcp_keepalive", self.tcp_keepalive)?,
        })
    }
}
