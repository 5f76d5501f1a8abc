//! `[metrics]`: the operations endpoint (`/metrics`, `/healthz`, `/readyz`).

use std::net::SocketAddr;
use std::time::Duration;

use serde::Deserialize;

use super::problems::Problems;

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsFile {
    /// `host:port`, `:port` (every interface, as the Kubernetes sidecars' `--http-endpoint`
    /// writes it), or "" to serve none.
    #[serde(default = "default_listen")]
    pub listen: String,
    /// Where Prometheus scrapes (the sidecars' `--metrics-path`).
    #[serde(default = "default_path")]
    pub path: String,
    /// How long `/healthz` waits for the upstream's Probe.
    #[serde(default = "default_probe_timeout", with = "humantime_serde")]
    pub probe_timeout: Duration,
}

impl Default for MetricsFile {
    fn default() -> Self {
        MetricsFile {
            listen: default_listen(),
            path: default_path(),
            probe_timeout: default_probe_timeout(),
        }
    }
}

fn default_listen() -> String {
    "127.0.0.1:9808".into()
}
fn default_path() -> String {
    "/metrics".into()
}
fn default_probe_timeout() -> Duration {
    Duration::from_secs(3)
}

/// `[metrics]`, validated.
#[derive(Clone, Debug)]
pub struct Metrics {
    /// Where `/metrics`, `/healthz` and `/readyz` are served, if anywhere.
    pub listen: Option<SocketAddr>,
    /// The metrics' path, `/metrics` by default; `/healthz` and `/readyz` stay where they are.
    pub path: String,
    pub probe_timeout: Duration,
}

impl MetricsFile {
    pub fn check(self, p: &mut Problems) -> Option<Metrics> {
        let listen = match self.listen.trim() {
            "" => Some(None),
            a => p.take("metrics.listen", listen_address(a)).map(Some),
        };
        let path_ok = p.check(
            self.path.starts_with('/') && !["/healthz", "/readyz"].contains(&self.path.as_str()),
            "metrics.path",
            || {
                format!(
                    "{:?}: must start with / and be neither /healthz nor /readyz",
                    self.path
                )
            },
        );
        Some(Metrics {
            listen: listen?,
            path: path_ok.then_some(self.path)?,
            probe_timeout: self.probe_timeout,
        })
    }
}

/// `ip:port`, `name:port` (resolved once, now) or Go's `:port` for every interface.
fn listen_address(a: &str) -> Result<SocketAddr, String> {
    use std::net::ToSocketAddrs as _;
    let bad =
        || format!("{a:?} is not host:port like 127.0.0.1:9808 (or :9808 for every interface)");
    let a_full = match a.strip_prefix(':') {
        Some(port) => format!("0.0.0.0:{port}"),
        None => a.to_string(),
    };
    if let Ok(addr) = a_full.parse() {
        return Ok(addr);
    }
    // A host name needs a port after its last colon, or it is no address at all.
    let (_, port) = a_full.rsplit_once(':').ok_or_else(bad)?;
    port.parse::<u16>().map_err(|_| bad())?;
    let mut resolved = a_full
        .to_socket_addrs()
        .map_err(|e| format!("{a:?}: {e}"))?;
    resolved.next().ok_or_else(bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_takes_the_sidecars_forms() {
        assert_eq!(listen_address(":9808"), Ok("0.0.0.0:9808".parse().unwrap()));
        assert_eq!(
            listen_address("127.0.0.1:9"),
            Ok("127.0.0.1:9".parse().unwrap())
        );
        assert_eq!(listen_address("[::1]:9"), Ok("[::1]:9".parse().unwrap()));
        assert!(listen_address("localhost:9").unwrap().ip().is_loopback());
        for bad in ["localhost", ":x", "9808", "h:99999"] {
            let e = listen_address(bad).unwrap_err();
            assert!(e.contains("is not host:port"), "{bad}: {e}");
        }
    }
}
