//! Configuration: a TOML file (`config/gateway.toml` is both the commented example and the
//! built-in default), `CSI_ENDPOINT` for the listen address, and command-line overrides, in
//! that order of precedence from low to high. Everything is validated before anything binds, so
//! a bad configuration fails fast with a message and never half-starts.

mod state;
mod tls;

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

pub use state::{State, StateFile, StateOverrides, StoreBackend};

use crate::dialect::Dialect;
use crate::endpoint::Endpoint;

pub use self::tls::{ApplianceFile, PeerFile, UpstreamTlsFile};

/// The built-in default: `config/gateway.toml`.
pub const DEFAULT_TOML: &str = include_str!("../../config/gateway.toml");

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{origin}: {message}")]
    Parse { origin: String, message: String },
    #[error("{field}: {message}")]
    Invalid {
        field: &'static str,
        message: String,
    },
}

/// The configuration file as written.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct File {
    pub listen: ListenFile,
    pub upstream: UpstreamFile,
    #[serde(default)]
    pub embedded: EmbeddedFile,
    #[serde(default)]
    pub log: LogFile,
    /// The mTLS listener of a gateway on a remote appliance (see docs/bridge.md).
    pub appliance: Option<ApplianceFile>,
    #[serde(default)]
    pub metrics: MetricsFile,
    pub state: StateFile,
    #[serde(default)]
    pub runtime: RuntimeFile,
    /// Validation and protection per method.
    #[serde(default)]
    pub calls: crate::front::policy::Policy,
}

/// The async runtime the gateway runs on.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimeFile {
    /// 1 (the default) runs everything on one thread: a client connection's calls and its
    /// upstream connection share one task anyway, and it measured fastest that way
    /// (`cargo bench --bench e2e`). 0 means one thread per core.
    #[serde(default = "default_worker_threads")]
    pub worker_threads: usize,
    #[serde(default)]
    pub scheduling: Scheduling,
}

impl Default for RuntimeFile {
    fn default() -> Self {
        RuntimeFile {
            worker_threads: default_worker_threads(),
            scheduling: Scheduling::default(),
        }
    }
}

/// The Linux scheduling policy of the gateway's threads.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Scheduling {
    /// `SCHED_BATCH`: the same share of CPU as any other process, but a gateway thread that
    /// wakes up does not preempt the one running. The orchestrator and the plugin then finish
    /// writing their batch of calls before the gateway relays it, instead of being cut off
    /// after the first one. In A/B runs of `csi-gateway-load` it was level with `Normal` or a
    /// few percent ahead at 16 and 64 calls in flight.
    #[default]
    Batch,
    /// The policy the gateway was started with (`SCHED_OTHER` unless its parent chose another).
    Normal,
}

fn default_splice() -> bool {
    true
}

fn default_worker_threads() -> usize {
    1
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListenFile {
    pub endpoint: String,
    /// Octal, e.g. "0660".
    pub mode: Option<String>,
    pub owner_uid: Option<u32>,
    pub owner_gid: Option<u32>,
    /// Which of `v0.1` and `v0.1-oneof` answers under the package `csi`.
    #[serde(default = "default_legacy")]
    pub legacy_dialect: String,
    /// Which revision answers under the package `csi.v0`: "v0.3", or "v0.2" (same package, no
    /// snapshots, topology or NodeGetInfo).
    #[serde(default = "default_v0")]
    pub v0_dialect: String,
    #[serde(default = "default_grace", with = "humantime_serde")]
    pub grace_period: Duration,
    /// Splice client connections onto upstream connections of their own (UNIX upstreams).
    #[serde(default = "default_splice")]
    pub splice: bool,
    /// What one client connection may make the gateway do (`[listen.limits]`).
    #[serde(default)]
    pub limits: crate::front::Limits,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamFile {
    /// `unix:///path`, or `embedded` for the built-in reference backend.
    pub endpoint: String,
    #[serde(default = "default_auto")]
    pub dialect: String,
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

/// The in-process reference backend used when `upstream.endpoint = "embedded"`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmbeddedFile {
    #[serde(default = "default_embedded_dialect")]
    pub dialect: String,
    #[serde(default = "default_embedded_socket")]
    pub socket: PathBuf,
    #[serde(default = "default_embedded_data")]
    pub data_dir: PathBuf,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogFile {
    #[serde(default = "default_log_format")]
    pub format: String,
    #[serde(default = "default_log_level")]
    pub level: String,
    /// Map keys (e.g. in `volume_context`) whose values are stripped from logged bodies, on top
    /// of every field the dialects mark as secret.
    #[serde(default)]
    pub redact_keys: Vec<String>,
}

/// The operations endpoint: `/metrics`, `/healthz`, `/readyz`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsFile {
    /// `host:port`, or "" to serve none.
    #[serde(default = "default_metrics_listen")]
    pub listen: String,
    /// How long `/healthz` waits for the upstream's Probe.
    #[serde(default = "default_probe_timeout", with = "humantime_serde")]
    pub probe_timeout: Duration,
}

impl Default for MetricsFile {
    fn default() -> Self {
        MetricsFile {
            listen: default_metrics_listen(),
            probe_timeout: default_probe_timeout(),
        }
    }
}

fn default_metrics_listen() -> String {
    "127.0.0.1:9808".into()
}
fn default_probe_timeout() -> Duration {
    Duration::from_secs(3)
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

impl Default for LogFile {
    fn default() -> Self {
        LogFile {
            format: default_log_format(),
            level: default_log_level(),
            redact_keys: Vec::new(),
        }
    }
}

fn default_legacy() -> String {
    "v0.1".into()
}
fn default_v0() -> String {
    "v0.3".into()
}
fn default_grace() -> Duration {
    Duration::from_secs(10)
}
fn default_auto() -> String {
    "auto".into()
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
fn default_embedded_dialect() -> String {
    "v0.1-oneof".into()
}
fn default_embedded_socket() -> PathBuf {
    "/tmp/csi-gateway/backend/csi.sock".into()
}
fn default_embedded_data() -> PathBuf {
    "/tmp/csi-gateway/backend-data".into()
}
fn default_log_format() -> String {
    "text".into()
}
fn default_log_level() -> String {
    "info".into()
}

/// Command-line and environment overrides; `None` keeps the file's value.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    pub listen: Option<String>,
    pub upstream: Option<String>,
    pub upstream_dialect: Option<String>,
    pub legacy_dialect: Option<String>,
    /// `listen.v0_dialect`.
    pub v0_dialect: Option<String>,
    /// `listen.splice`.
    pub splice: Option<bool>,
    pub log_format: Option<String>,
    pub log_level: Option<String>,
    pub metrics_listen: Option<String>,
    pub state_dir: Option<PathBuf>,
    pub state: StateOverrides,
    /// TEST HOOK (hidden flag): the gateway kills itself with SIGKILL at this named step of
    /// staging emulation, so tests can crash it between two steps. Only a build with the
    /// `test-hooks` cargo feature (the test suite's) accepts it; any other refuses it here.
    pub test_crash_at: Option<String>,
}

/// The validated configuration the gateway runs with.
#[derive(Clone, Debug)]
pub struct Config {
    pub listen: Endpoint,
    pub socket_mode: Option<u32>,
    pub socket_owner: Option<(u32, u32)>,
    pub front_dialects: Vec<Dialect>,
    /// `listen.v0_dialect = "v0.2"`: `csi.v0` clients are v0.2 clients.
    pub v0_2_front: bool,
    pub grace_period: Duration,
    /// See [`ListenFile::splice`].
    pub splice: bool,
    /// See [`ListenFile::limits`].
    pub limits: crate::front::Limits,
    pub upstream: UpstreamTarget,
    pub upstream_dialect: Option<Dialect>,
    pub connect_timeout: Duration,
    pub backoff_initial: Duration,
    pub backoff_max: Duration,
    pub log_json: bool,
    pub log_level: String,
    pub failover: Vec<Endpoint>,
    pub upstream_tls: Option<crate::tls::ClientSettings>,
    pub appliance: Option<crate::tls::ServerSettings>,
    pub redact_keys: Vec<String>,
    /// Where `/metrics`, `/healthz` and `/readyz` are served, if anywhere.
    pub metrics_listen: Option<std::net::SocketAddr>,
    pub probe_timeout: Duration,
    pub state_dir: PathBuf,
    /// The store backend and the staging directory.
    pub state: State,
    /// See [`Overrides::test_crash_at`].
    #[cfg(feature = "test-hooks")]
    pub test_crash_at: Option<String>,
    /// 1: a single-threaded runtime; 0: one worker per core; n: n workers.
    pub worker_threads: usize,
    pub scheduling: Scheduling,
    /// `[calls]`: validation and protection per method.
    pub calls: crate::front::policy::Policy,
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

impl File {
    pub fn parse(text: &str, origin: &str) -> Result<File, ConfigError> {
        toml::from_str(text).map_err(|e| ConfigError::Parse {
            origin: origin.to_string(),
            message: e.to_string(),
        })
    }

    pub fn load(path: Option<&std::path::Path>) -> Result<File, ConfigError> {
        match path {
            None => File::parse(DEFAULT_TOML, "built-in default configuration"),
            Some(p) => {
                let text = std::fs::read_to_string(p).map_err(|source| ConfigError::Read {
                    path: p.into(),
                    source,
                })?;
                File::parse(&text, &p.display().to_string())
            }
        }
    }

    /// Applies `CSI_ENDPOINT` (`csi_endpoint`) and `overrides`, then validates.
    pub fn resolve(
        mut self,
        csi_endpoint: Option<String>,
        o: Overrides,
    ) -> Result<Config, ConfigError> {
        if let Some(e) = csi_endpoint.filter(|e| !e.is_empty()) {
            self.listen.endpoint = e;
        }
        let set = |slot: &mut String, v: Option<String>| {
            if let Some(v) = v {
                *slot = v;
            }
        };
        set(&mut self.listen.endpoint, o.listen);
        set(&mut self.upstream.endpoint, o.upstream);
        set(&mut self.upstream.dialect, o.upstream_dialect);
        set(&mut self.listen.legacy_dialect, o.legacy_dialect);
        set(&mut self.listen.v0_dialect, o.v0_dialect);
        if let Some(splice) = o.splice {
            self.listen.splice = splice;
        }
        set(&mut self.log.format, o.log_format);
        set(&mut self.log.level, o.log_level);
        set(&mut self.metrics.listen, o.metrics_listen);
        if let Some(dir) = o.state_dir {
            self.state.dir = dir;
        }
        self.state.apply(o.state);
        self.validate(o.test_crash_at)
    }

    fn validate(self, test_crash_at: Option<String>) -> Result<Config, ConfigError> {
        let invalid = |field, message: String| ConfigError::Invalid { field, message };
        #[cfg(not(feature = "test-hooks"))]
        if test_crash_at.is_some() {
            return Err(invalid(
                "--test-crash-at",
                "a test hook, and this csi-gateway was built without it (cargo feature \
                 `test-hooks`, which only the test suite enables)"
                    .into(),
            ));
        }
        let listen: Endpoint = self
            .listen
            .endpoint
            .parse()
            .map_err(|e| invalid("listen.endpoint", format!("{e}")))?;
        if !matches!(listen, Endpoint::Unix(_)) {
            return Err(invalid(
                "listen.endpoint",
                "the front listens on a UNIX socket (unix:///path)".into(),
            ));
        }
        let legacy = match self.listen.legacy_dialect.parse::<Dialect>() {
            Ok(d @ (Dialect::V0_1 | Dialect::V0_1Oneof)) => d,
            _ => {
                return Err(invalid(
                    "listen.legacy_dialect",
                    format!(
                        "{:?}: must be \"v0.1\" or \"v0.1-oneof\"",
                        self.listen.legacy_dialect
                    ),
                ))
            }
        };
        let v0_2_front = match self.listen.v0_dialect.as_str() {
            "v0.3" => false,
            "v0.2" => true,
            other => {
                return Err(invalid(
                    "listen.v0_dialect",
                    format!("{other:?}: must be \"v0.3\" or \"v0.2\""),
                ))
            }
        };
        let socket_mode = match &self.listen.mode {
            None => None,
            Some(m) => Some(
                u32::from_str_radix(m.trim_start_matches("0o"), 8)
                    .ok()
                    .filter(|m| *m <= 0o7777)
                    .ok_or_else(|| {
                        invalid(
                            "listen.mode",
                            format!("{m:?} is not an octal file mode like \"0660\""),
                        )
                    })?,
            ),
        };
        let socket_owner = match (self.listen.owner_uid, self.listen.owner_gid) {
            (None, None) => None,
            (Some(u), Some(g)) => Some((u, g)),
            _ => {
                return Err(invalid(
                    "listen.owner_uid",
                    "set both owner_uid and owner_gid, or neither".into(),
                ))
            }
        };
        let upstream_dialect = match self.upstream.dialect.as_str() {
            "auto" => None,
            d => Some(
                d.parse::<Dialect>()
                    .map_err(|e| invalid("upstream.dialect", format!("{e}, or \"auto\"")))?,
            ),
        };
        let upstream = if self.upstream.endpoint == "embedded" {
            let dialect = self
                .embedded
                .dialect
                .parse()
                .map_err(|e| invalid("embedded.dialect", format!("{e}")))?;
            UpstreamTarget::Embedded {
                dialect,
                socket: self.embedded.socket,
                data_dir: self.embedded.data_dir,
            }
        } else {
            let e: Endpoint = self
                .upstream
                .endpoint
                .parse()
                .map_err(|e| invalid("upstream.endpoint", format!("{e}")))?;
            UpstreamTarget::Endpoint(e)
        };
        let failover = self
            .upstream
            .failover
            .iter()
            .map(|f| f.parse::<Endpoint>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| invalid("upstream.failover", format!("{e}")))?;
        if !failover.is_empty() && !matches!(upstream, UpstreamTarget::Endpoint(_)) {
            return Err(invalid(
                "upstream.failover",
                "failover applies to endpoint upstreams, not \"embedded\"".into(),
            ));
        }
        let any_tcp = std::iter::once(&upstream)
            .filter_map(|u| match u {
                UpstreamTarget::Endpoint(e) => Some(e),
                UpstreamTarget::Embedded { .. } => None,
            })
            .chain(&failover)
            .find(|e| matches!(e, Endpoint::Tcp(_)));
        let upstream_tls = match (any_tcp, self.upstream.tls) {
            (Some(e), None) => {
                return Err(invalid(
                    "upstream.endpoint",
                    format!("{e}: a TCP upstream requires [upstream.tls] (mutual TLS); plaintext TCP is refused"),
                ))
            }
            (None, Some(_)) => {
                return Err(invalid(
                    "upstream.tls",
                    "[upstream.tls] applies only to tcp:// upstreams".into(),
                ))
            }
            (_, tls) => tls.map(UpstreamTlsFile::validate).transpose()?,
        };
        let appliance = self.appliance.map(ApplianceFile::validate).transpose()?;
        if let (Endpoint::Unix(l), UpstreamTarget::Endpoint(Endpoint::Unix(u))) =
            (&listen, &upstream)
        {
            if l == u {
                return Err(invalid(
                    "upstream.endpoint",
                    "the upstream cannot be the gateway's own socket".into(),
                ));
            }
        }
        let log_json = match self.log.format.as_str() {
            "text" => false,
            "json" => true,
            f => {
                return Err(invalid(
                    "log.format",
                    format!("{f:?}: must be \"text\" or \"json\""),
                ))
            }
        };
        if self.upstream.backoff_initial.is_zero()
            || self.upstream.backoff_initial > self.upstream.backoff_max
        {
            return Err(invalid(
                "upstream.backoff_initial",
                "must be above zero and at most upstream.backoff_max".into(),
            ));
        }
        let state = self.state.validate()?;
        if let Endpoint::Unix(socket) = &listen {
            if socket.parent() == Some(state.staging_dir.as_path()) {
                return Err(invalid(
                    "state.staging_dir",
                    format!(
                        "{}: the front socket's directory must hold only the socket (CSI spec)",
                        state.staging_dir.display()
                    ),
                ));
            }
            if socket.parent() == Some(self.state.dir.as_path()) {
                return Err(invalid(
                    "state.dir",
                    format!(
                        "{}: the front socket's directory must hold only the socket (CSI spec)",
                        self.state.dir.display()
                    ),
                ));
            }
        }
        let metrics_listen = match self.metrics.listen.trim() {
            "" => None,
            a => Some(a.parse().map_err(|_| {
                invalid(
                    "metrics.listen",
                    format!("{a:?} is not host:port like 127.0.0.1:9808"),
                )
            })?),
        };
        self.calls
            .check()
            .map_err(|e| invalid("calls", e.to_string()))?;
        Ok(Config {
            listen,
            socket_mode,
            socket_owner,
            front_dialects: vec![Dialect::V1, Dialect::V0_3, legacy],
            v0_2_front,
            grace_period: self.listen.grace_period,
            splice: self.listen.splice,
            limits: self.listen.limits.clone(),
            upstream,
            upstream_dialect,
            connect_timeout: self.upstream.connect_timeout,
            backoff_initial: self.upstream.backoff_initial,
            backoff_max: self.upstream.backoff_max,
            log_json,
            log_level: self.log.level,
            failover,
            upstream_tls,
            appliance,
            redact_keys: self.log.redact_keys,
            metrics_listen,
            probe_timeout: self.metrics.probe_timeout,
            state_dir: self.state.dir,
            worker_threads: self.runtime.worker_threads,
            scheduling: self.runtime.scheduling,
            state,
            #[cfg(feature = "test-hooks")]
            test_crash_at,
            calls: self.calls,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(toml_text: &str) -> Result<Config, ConfigError> {
        File::parse(toml_text, "test")?.resolve(None, Overrides::default())
    }

    #[test]
    fn the_built_in_default_is_valid() {
        let c = File::load(None)
            .unwrap()
            .resolve(None, Overrides::default())
            .unwrap();
        assert!(matches!(
            c.upstream,
            UpstreamTarget::Embedded {
                dialect: Dialect::V0_1Oneof,
                ..
            }
        ));
        assert_eq!(
            c.front_dialects,
            vec![Dialect::V1, Dialect::V0_3, Dialect::V0_1]
        );
        assert!(!c.v0_2_front, "csi.v0 is served as v0.3 by default");
    }

    #[test]
    fn csi_endpoint_then_flags_override_the_file() {
        let f = File::load(None).unwrap();
        let c = f
            .clone()
            .resolve(Some("unix:///run/a.sock".into()), Overrides::default())
            .unwrap();
        assert_eq!(c.listen, Endpoint::Unix("/run/a.sock".into()));
        let o = Overrides {
            listen: Some("/run/b.sock".into()),
            ..Default::default()
        };
        let c = f.resolve(Some("unix:///run/a.sock".into()), o).unwrap();
        assert_eq!(c.listen, Endpoint::Unix("/run/b.sock".into()));
    }

    #[test]
    fn bad_values_name_their_field() {
        let base = "[state]\ndir = \"/var/lib/gw\"\n[listen]\nendpoint = \"unix:///run/a.sock\"\n[upstream]\nendpoint = \"unix:///b.sock\"\n";
        assert!(with(base).is_ok());
        let cases = [
            (
                base.replace("unix:///run/a.sock", "a.sock"),
                "listen.endpoint",
            ),
            (base.replace("/var/lib/gw", "/run"), "state.dir"),
            (
                base.replace("unix:///b.sock", "tcp://h:1"),
                "upstream.endpoint",
            ),
            (
                base.replace("unix:///b.sock", "unix:///run/a.sock"),
                "upstream.endpoint",
            ),
            (format!("{base}dialect = \"v9\"\n"), "upstream.dialect"),
            (
                base.replace("[upstream]", "legacy_dialect = \"v0.3\"\n[upstream]"),
                "listen.legacy_dialect",
            ),
            (
                base.replace("[upstream]", "v0_dialect = \"v0.1\"\n[upstream]"),
                "listen.v0_dialect",
            ),
            (
                base.replace("[upstream]", "mode = \"rw\"\n[upstream]"),
                "listen.mode",
            ),
            (
                base.replace("[upstream]", "owner_uid = 1\n[upstream]"),
                "listen.owner_uid",
            ),
            (format!("{base}[log]\nformat = \"xml\"\n"), "log.format"),
            (
                format!("{base}[metrics]\nlisten = \"localhost\"\n"),
                "metrics.listen",
            ),
        ];
        for (text, field) in cases {
            match with(&text) {
                Err(ConfigError::Invalid { field: f, .. }) => assert_eq!(f, field, "{text}"),
                other => panic!("{text}: expected an error on {field}, got {other:?}"),
            }
        }
        assert!(matches!(
            with(&format!("{base}bogus = 1\n")),
            Err(ConfigError::Parse { .. })
        ));
    }

    #[test]
    fn scheduling_is_batch_unless_set_to_normal() {
        let base = "[state]\ndir = \"/var/lib/gw\"\n[listen]\nendpoint = \"unix:///run/a.sock\"\n[upstream]\nendpoint = \"unix:///b.sock\"\n";
        assert_eq!(with(base).unwrap().scheduling, Scheduling::Batch);
        let normal = with(&format!("{base}[runtime]\nscheduling = \"normal\"\n")).unwrap();
        assert_eq!(normal.scheduling, Scheduling::Normal);
        match with(&format!("{base}[runtime]\nscheduling = \"fifo\"\n")) {
            Err(e @ ConfigError::Parse { .. }) => {
                let text = e.to_string();
                assert!(text.contains("`batch` or `normal`"), "{text}");
            }
            other => panic!("expected a parse error, got {other:?}"),
        }
    }

    #[test]
    fn bridge_sections_validate() {
        let tls = "[upstream.tls]\ncert = \"/c.pem\"\nkey = \"/c.key\"\nca = \"/ca.pem\"\n";
        let tcp = "[state]\ndir = \"/var/lib/gw\"\n[listen]\nendpoint = \"unix:///a.sock\"\n[upstream]\nendpoint = \"tcp://h:1\"\nfailover = [\"tcp://g:2\"]\n";
        let c = with(&format!("{tcp}{tls}")).unwrap();
        let t = c.upstream_tls.unwrap();
        assert_eq!(t.min_version, crate::tls::MinVersion::Tls13);
        assert_eq!(c.failover, vec![Endpoint::Tcp("g:2".into())]);
        let unix = "[state]\ndir = \"/var/lib/gw\"\n[listen]\nendpoint = \"unix:///a.sock\"\n[upstream]\nendpoint = \"unix:///b.sock\"\n";
        let appliance = "[appliance]\nlisten = \"tcp://0.0.0.0:9443\"\ncert = \"/s.pem\"\nkey = \"/s.key\"\nclient_ca = \"/ca.pem\"\n[[appliance.peers]]\ndns = [\"node\"]\nservices = [\"Identity\", \"Node\"]\n";
        let a = with(&format!("{unix}{appliance}"))
            .unwrap()
            .appliance
            .unwrap();
        assert_eq!(a.listen, "0.0.0.0:9443");
        assert!(!a.peers[0].services.as_ref().unwrap().contains("Controller"));
        let cases = [
            (format!("{unix}{tls}"), "upstream.tls"),
            (
                format!(
                    "{tcp}{}",
                    tls.replace("ca.pem\"", "ca.pem\"\nmin_version = \"1.1\"")
                ),
                "upstream.tls.min_version",
            ),
            (
                format!(
                    "{unix}{}",
                    appliance.replace("tcp://0.0.0.0:9443", "unix:///x")
                ),
                "appliance.listen",
            ),
            (
                format!("{unix}{}", appliance.replace("\"Node\"", "\"Nodes\"")),
                "appliance.peers.services",
            ),
        ];
        for (text, field) in cases {
            match with(&text) {
                Err(ConfigError::Invalid { field: f, .. }) => assert_eq!(f, field, "{text}"),
                other => panic!("{text}: expected an error on {field}, got {other:?}"),
            }
        }
    }
}
