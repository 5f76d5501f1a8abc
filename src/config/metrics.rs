//! `[metrics]`: the operations endpoint (`/metrics`, `/healthz`, `/readyz`).

use std::net::SocketAddr;
use std::time::Duration;

use serde::Deserialize;

use super::problems::Problems;

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsFile {
    /// `host:port`, or "" to serve none.
    #[serde(default = "default_listen")]
    pub listen: String,
    /// How long `/healthz` waits for the upstream's Probe.
    #[serde(default = "default_probe_timeout", with = "humantime_serde")]
    pub probe_timeout: Duration,
}

impl Default for MetricsFile {
    fn default() -> Self {
        MetricsFile {
            listen: default_listen(),
            probe_timeout: default_probe_timeout(),
        }
    }
}

fn default_listen() -> String {
    "127.0.0.1:9808".into()
}
fn default_probe_timeout() -> Duration {
    Duration::from_secs(3)
}

/// `[metrics]`, validated.
#[derive(Clone, Debug)]
pub struct Metrics {
    /// Where `/metrics`, `/healthz` and `/readyz` are served, if anywhere.
    pub listen: Option<SocketAddr>,
    pub probe_timeout: Duration,
}

impl MetricsFile {
    pub fn check(self, p: &mut Problems) -> Option<Metrics> {
        let listen = match self.listen.trim() {
            "" => None,
            a => Some(
                p.take(
                    "metrics.listen",
                    a.parse()
                        .map_err(|_| format!("{a:?} is not host:port like 127.0.0.1:9808")),
                )?,
            ),
        };
        Some(Metrics {
            listen,
            probe_timeout: self.probe_timeout,
        })
    }
}
