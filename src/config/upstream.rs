//! `[upstream]` (the plugin the gateway translates to) and `[embedded]` (the in-process
//! reference backend, when `upstream.endpoint = "embedded"`).

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::choice::Choice;
use super::problems::Problems;
use super::tls::UpstreamTlsFile;
use crate::dialect::Dialect;
use crate::endpoint::Endpoint;

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamFile {
    /// `unix:///path`, `tcp://host:port`, or `embedded` for the built-in reference backend.
    /// Optional in the file when `--upstream` gives it.
    #[serde(default)]
    pub endpoint: Option<String>,
    #[serde(default)]
    pub dialect: Choice<UpstreamDialect>,
    #[serde(default = "default_connect_timeout", with = "humantime_serde")]
    pub connect_timeout: Duration,
    #[serde(default = "default_backoff_initial", with = "humantime_serde")]
    pub backoff_initial: Duration,
    #[serde(default = "default_backoff_max", with = "humantime_serde")]
    pub backoff_max: Duration,
    /// More endpoints, tried in turn when the current one cannot be reached.
    #[serde(default)]
    pub failover: Vec<String>,
    /// Client TLS; required for tcp:// upstreams.
    pub tls: Option<UpstreamTlsFile>,
}

/// A CSI revision by the name it goes by in configuration and on the command line.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
pub enum DialectName {
    #[serde(rename = "v1")]
    V1,
    #[serde(rename = "v0.3")]
    V0_3,
    /// v0.2 peers speak a subset of v0.3 under the same package.
    #[serde(rename = "v0.2")]
    V0_2,
    #[serde(rename = "v0.1")]
    V0_1,
    #[serde(rename = "v0.1-oneof")]
    V0_1Oneof,
}

impl From<DialectName> for Dialect {
    fn from(d: DialectName) -> Dialect {
        match d {
            DialectName::V1 => Dialect::V1,
            DialectName::V0_3 | DialectName::V0_2 => Dialect::V0_3,
            DialectName::V0_1 => Dialect::V0_1,
            DialectName::V0_1Oneof => Dialect::V0_1Oneof,
        }
    }
}

/// `upstream.dialect`: detected at every (re)connect, or one named.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
pub enum UpstreamDialect {
    #[default]
    #[serde(rename = "auto")]
    Auto,
    #[serde(rename = "v1")]
    V1,
    #[serde(rename = "v0.3")]
    V0_3,
    #[serde(rename = "v0.2")]
    V0_2,
    #[serde(rename = "v0.1")]
    V0_1,
    #[serde(rename = "v0.1-oneof")]
    V0_1Oneof,
}

impl UpstreamDialect {
    /// The dialect named, `None` for detection.
    fn named(self) -> Option<Dialect> {
        let name = match self {
            UpstreamDialect::Auto => return None,
            UpstreamDialect::V1 => DialectName::V1,
            UpstreamDialect::V0_3 => DialectName::V0_3,
            UpstreamDialect::V0_2 => DialectName::V0_2,
            UpstreamDialect::V0_1 => DialectName::V0_1,
            UpstreamDialect::V0_1Oneof => DialectName::V0_1Oneof,
        };
        Some(name.into())
    }
}

/// The in-process reference backend used when `upstream.endpoint = "embedded"`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmbeddedFile {
    #[serde(default = "default_embedded_dialect")]
    pub dialect: Choice<DialectName>,
    #[serde(default = "default_embedded_socket")]
    pub socket: PathBuf,
    #[serde(default = "default_embedded_data")]
    pub data_dir: PathBuf,
}

impl Default for EmbeddedFile {
    fn default() -> Self {
        EmbeddedFile {
            dialect: default_embedded_dialect(),
            socket: default_embedded_socket(),
            data_dir: default_embedded_data(),
        }
    }
}

/// A file without `[upstream]` reads as an empty one: the endpoint left to `--upstream`.
impl Default for UpstreamFile {
    fn default() -> Self {
        UpstreamFile {
            endpoint: None,
            dialect: Choice::default(),
            connect_timeout: default_connect_timeout(),
            backoff_initial: default_backoff_initial(),
            backoff_max: default_backoff_max(),
            failover: Vec::new(),
            tls: None,
        }
    }
}

fn default_connect_timeout() -> Duration {
    Duration::from_secs(5)
}
fn default_backoff_initial() -> Duration {
    Duration::from_millis(100)
}
fn default_backoff_max() -> Duration {
    Duration::from_secs(5)
}
fn default_embedded_dialect() -> Choice<DialectName> {
    Choice::Known(DialectName::V0_1Oneof)
}
fn default_embedded_socket() -> PathBuf {
    "/tmp/csi-gateway/backend/csi.sock".into()
}
fn default_embedded_data() -> PathBuf {
    "/tmp/csi-gateway/backend-data".into()
}

#[derive(Clone, Debug, PartialEq)]
pub enum UpstreamTarget {
    Endpoint(Endpoint),
    /// The in-process reference backend, serving `dialect` on `socket`.
    Embedded {
        dialect: Dialect,
        socket: PathBuf,
        data_dir: PathBuf,
    },
}

/// `[upstream]` and `[embedded]`, validated.
#[derive(Clone, Debug)]
pub struct Upstream {
    pub target: UpstreamTarget,
    /// `None`: detect.
    pub dialect: Option<Dialect>,
    pub connect_timeout: Duration,
    pub backoff_initial: Duration,
    pub backoff_max: Duration,
    pub failover: Vec<Endpoint>,
    pub tls: Option<crate::tls::ClientSettings>,
}

impl UpstreamFile {
    /// Checks `[upstream]`, and `[embedded]` when it is the upstream, recording each problem;
    /// `None` if there was any.
    pub fn check(self, embedded: EmbeddedFile, p: &mut Problems) -> Option<Upstream> {
        let dialect = p
            .choice("upstream.dialect", self.dialect)
            .map(UpstreamDialect::named);
        let endpoint = p.take(
            "upstream.endpoint",
            super::listen::required(
                self.endpoint,
                "not set: give it in [upstream] endpoint or with --upstream",
            ),
        );
        let target = match endpoint.as_deref() {
            None => None,
            Some("embedded") => {
                p.choice("embedded.dialect", embedded.dialect)
                    .map(|d| UpstreamTarget::Embedded {
                        dialect: d.into(),
                        socket: embedded.socket,
                        data_dir: embedded.data_dir,
                    })
            }
            Some(e) => p
                .take("upstream.endpoint", parse_endpoint(e))
                .map(UpstreamTarget::Endpoint),
        };
        // Every endpoint is parsed and each bad one recorded: collecting straight into an
        // `Option` would stop at the first.
        let failover: Option<Vec<Endpoint>> = self
            .failover
            .iter()
            .map(|f| p.take("upstream.failover", f.parse::<Endpoint>()))
            .collect::<Vec<_>>()
            .into_iter()
            .collect();
        let embedded_failover =
            matches!(target, Some(UpstreamTarget::Embedded { .. })) && !self.failover.is_empty();
        p.check(!embedded_failover, "upstream.failover", || {
            "failover applies to endpoint upstreams, not \"embedded\"".into()
        });
        let tls = check_tls(self.tls, target.as_ref(), failover.as_deref(), p);
        let backoff_ok = p.check(
            !self.backoff_initial.is_zero() && self.backoff_initial <= self.backoff_max,
            "upstream.backoff_initial",
            || "must be above zero and at most upstream.backoff_max".into(),
        );
        if embedded_failover || !backoff_ok {
            return None;
        }
        Some(Upstream {
            target: target?,
            dialect: dialect?,
            connect_timeout: self.connect_timeout,
            backoff_initial: self.backoff_initial,
            backoff_max: self.backoff_max,
            failover: failover?,
            tls: tls?,
        })
    }
}

/// `[upstream.tls]` goes with tcp:// upstreams, and only with them. `Some(None)`: no TLS,
/// rightly.
/// An endpoint, or what is wrong with it; a slip on the keyword `embedded` (`embeded`,
/// `Embedded`) is named as one rather than read as a relative path.
fn parse_endpoint(e: &str) -> Result<Endpoint, String> {
    e.parse::<Endpoint>().map_err(|error| {
        let word = e.trim().to_ascii_lowercase();
        let slip =
            !word.contains(['/', ':']) && strsim::damerau_levenshtein(&word, "embedded") <= 2;
        if slip {
            format!(
                "{e:?} is not an endpoint: did you mean embedded (the built-in reference backend)?"
            )
        } else {
            error.to_string()
        }
    })
}

fn check_tls(
    tls: Option<UpstreamTlsFile>,
    target: Option<&UpstreamTarget>,
    failover: Option<&[Endpoint]>,
    p: &mut Problems,
) -> Option<Option<crate::tls::ClientSettings>> {
    let (Some(target), Some(failover)) = (target, failover) else {
        // Whether TLS belongs here is unknown while the endpoints are bad; its own fields
        // are still checked.
        tls.map(|t| t.check(p));
        return None;
    };
    let any_tcp = std::iter::once(target)
        .filter_map(|u| match u {
            UpstreamTarget::Endpoint(e) => Some(e),
            UpstreamTarget::Embedded { .. } => None,
        })
        .chain(failover)
        .find(|e| matches!(e, Endpoint::Tcp(_)));
    match (any_tcp, tls) {
        (Some(e), None) => {
            p.push(
                "upstream.endpoint",
                format!("{e}: a TCP upstream requires [upstream.tls] (mutual TLS); plaintext TCP is refused"),
            );
            None
        }
        (None, Some(_)) => {
            p.push(
                "upstream.tls",
                "[upstream.tls] applies only to tcp:// upstreams",
            );
            None
        }
        (_, None) => Some(None),
        (_, Some(tls)) => tls.check(p).map(Some),
    }
}
