//! The bridge's configuration sections: `[upstream.tls]` (dialing a TCP upstream) and
//! `[appliance]` (the mTLS listener on the appliance), as written and as validated.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::choice::Choice;
use super::problems::Problems;
use crate::dialect::Dialect;
use crate::endpoint::Endpoint;
use crate::tls::{ClientSettings, Keepalive, Material, MinVersion, PeerRule, ServerSettings};

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
    #[serde(default)]
    pub min_version: Choice<MinVersion>,
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
    #[serde(default)]
    pub min_version: Choice<MinVersion>,
    #[serde(default = "default_handshake_timeout", with = "humantime_serde")]
    pub handshake_timeout: Duration,
    #[serde(default = "default_reload", with = "humantime_serde")]
    pub reload_interval: Duration,
    #[serde(default = "default_keepalive_interval", with = "humantime_serde")]
    pub tcp_keepalive: Duration,
    /// Peer connections served at once, by the UNIX listener's rule (`splice::listener`):
    /// a newcomer replaces the oldest connection that never finished a request, and is
    /// refused only when every one has.
    #[serde(default = "default_appliance_connections")]
    pub max_connections: usize,
    /// Allow-list; empty admits every certificate the CA signed, for every service.
    #[serde(default)]
    pub peers: Vec<PeerFile>,
    /// Where the plugin gets its peers' node paths (staging and target paths, which are on
    /// the peer's host): each under this directory (`crate::call::paths::mirror`). Default:
    /// `node-paths` in `state.dir`.
    pub node_paths: Option<PathBuf>,
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
fn default_appliance_connections() -> usize {
    1024
}

impl UpstreamTlsFile {
    /// Checks every field, recording each problem; `None` if there was any.
    pub fn check(self, p: &mut Problems) -> Option<ClientSettings> {
        let min_version = p.choice("upstream.tls.min_version", self.min_version);
        let reload_interval = p.positive("upstream.tls.reload_interval", self.reload_interval);
        let interval = p.positive("upstream.tls.keepalive_interval", self.keepalive_interval);
        let timeout = p.positive("upstream.tls.keepalive_timeout", self.keepalive_timeout);
        Some(ClientSettings {
            material: Material {
                cert: self.cert,
                key: self.key,
                ca: self.ca,
            },
            server_name: self.server_name.filter(|n| !n.is_empty()),
            min_version: min_version?,
            reload_interval: reload_interval?,
            keepalive: Keepalive {
                interval: interval?,
                timeout: timeout?,
            },
        })
    }
}

impl ApplianceFile {
    /// Checks every field, recording each problem; `None` if there was any.
    pub fn check(self, p: &mut Problems) -> Option<ServerSettings> {
        let listen = match self.listen.parse::<Endpoint>() {
            Ok(Endpoint::Tcp(addr)) => Some(addr),
            _ => {
                p.push(
                    "appliance.listen",
                    format!(
                        "{:?}: the appliance listens on tcp://host:port",
                        self.listen
                    ),
                );
                None
            }
        };
        let peers = check_peers(self.peers, p);
        let min_version = p.choice("appliance.min_version", self.min_version);
        let handshake_timeout = p.positive("appliance.handshake_timeout", self.handshake_timeout);
        let reload_interval = p.positive("appliance.reload_interval", self.reload_interval);
        let tcp_keepalive = p.positive("appliance.tcp_keepalive", self.tcp_keepalive);
        Some(ServerSettings {
            listen: listen?,
            material: Material {
                cert: self.cert,
                key: self.key,
                ca: self.client_ca,
            },
            min_version: min_version?,
            peers: peers?,
            handshake_timeout: handshake_timeout?,
            reload_interval: reload_interval?,
            tcp_keepalive: tcp_keepalive?,
        })
    }
}

/// The gateway's own services as `[[appliance.peers]]` rules name them: the gRPC service name
/// without its package, as the CSI services are named there (one name for both reflection
/// versions).
pub const GATEWAY_SERVICES: [&str; 2] = ["Health", "ServerReflection"];

/// Each rule names a peer, and only services the gateway knows.
fn check_peers(peers: Vec<PeerFile>, p: &mut Problems) -> Option<Vec<PeerRule>> {
    let known: BTreeSet<&str> = Dialect::ALL
        .iter()
        .flat_map(|d| d.methods().iter().map(|m| m.service))
        .chain(GATEWAY_SERVICES)
        .collect();
    let mut ok = true;
    let mut rules = Vec::new();
    for peer in peers {
        ok &= p.check(
            !peer.dns.is_empty() || !peer.uris.is_empty(),
            "appliance.peers",
            || "each peer rule names at least one of dns or uris".into(),
        );
        for bad in peer
            .services
            .iter()
            .flatten()
            .filter(|s| !known.contains(s.as_str()))
        {
            p.push(
                "appliance.peers.services",
                format!(
                    "{bad:?} is neither a CSI service nor one of the gateway's; known: {known:?}"
                ),
            );
            ok = false;
        }
        rules.push(PeerRule {
            dns: peer.dns,
            uris: peer.uris,
            services: peer.services.map(|s| s.into_iter().collect()),
        });
    }
    ok.then_some(rules)
}
