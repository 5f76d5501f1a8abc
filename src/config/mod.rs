//! Configuration: a TOML file (`config/gateway.toml` is both the commented example and the
//! built-in default), `CSI_ENDPOINT` for the listen address, and command-line overrides, in
//! that order of precedence from low to high. Everything is validated before anything binds, so
//! a bad configuration fails fast and never half-starts; validation goes on past the first
//! problem and reports every one, each naming its field.
//!
//! Each section has a file of its own: its type as written (`…File`, deserialized straight from
//! the TOML, settings with a fixed set of spellings as serde enums through [`Choice`]) and its
//! `check`, which records each problem in [`Problems`] and returns the section validated.

pub mod calls;
mod choice;
pub mod limits;
mod listen;
mod log;
mod metrics;
mod problems;
mod runtime;
mod state;
pub mod tls;
mod upstream;

use std::path::PathBuf;

use serde::Deserialize;

pub use choice::Choice;
pub use listen::{LegacyDialect, Listen, ListenFile, V0Dialect};
pub use log::{klog_filter, Log, LogFile, LogFormat};
pub use metrics::{Metrics, MetricsFile};
pub use problems::{Problem, Problems};
pub use runtime::{Runtime, RuntimeFile, Scheduling};
pub use state::{Backend, HandleEncoding, State, StateFile, StateOverrides, StoreBackend};
pub use upstream::{
    DialectName, EmbeddedFile, Upstream, UpstreamDialect, UpstreamFile, UpstreamTarget,
};

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
    /// Not TOML, a key no section has, or a value that cannot be read as its setting's type
    /// (a number for a string, a duration humantime cannot parse). serde stops at the first of
    /// these (with `deny_unknown_fields` the document cannot be read on past an unknown key), so
    /// this one is reported alone. Collecting them too would mean holding every field as a raw
    /// TOML value; the values with a fixed set of spellings, the likeliest slips, are held as
    /// [`Choice`] and so collected with every other bad value in [`ConfigError::Invalid`].
    #[error("{origin}: {message}")]
    Parse { origin: String, message: String },
    /// Every bad setting, in the order of the sections in `config/gateway.toml`; never empty.
    #[error("{}", render(.0))]
    Invalid(Vec<Problem>),
}

/// One problem on one line, as before there could be several; several, one per line under a
/// count, so each is read on its own.
fn render(problems: &[Problem]) -> String {
    match problems {
        [one] => one.to_string(),
        many => {
            let lines: Vec<String> = many.iter().map(|p| format!("\n  {p}")).collect();
            format!("{} problems:{}", many.len(), lines.concat())
        }
    }
}

impl ConfigError {
    /// The fields named, in order (nothing for an unreadable or unparsable file).
    pub fn fields(&self) -> Vec<&str> {
        match self {
            ConfigError::Invalid(problems) => problems.iter().map(|p| p.field.as_str()).collect(),
            _ => Vec::new(),
        }
    }
}

/// The configuration file as written.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct File {
    /// `[listen]`, `[upstream]` and `[state]` may be left out when the command line (or
    /// `CSI_ENDPOINT`) gives what they must hold; what is still missing is then reported under
    /// its field, not as serde's "missing field" at line 1.
    #[serde(default)]
    pub listen: ListenFile,
    #[serde(default)]
    pub upstream: UpstreamFile,
    #[serde(default)]
    pub embedded: EmbeddedFile,
    #[serde(default)]
    pub log: LogFile,
    /// The mTLS listener of a gateway on a remote appliance (see docs/bridge.md).
    pub appliance: Option<ApplianceFile>,
    #[serde(default)]
    pub metrics: MetricsFile,
    #[serde(default)]
    pub state: StateFile,
    #[serde(default)]
    pub runtime: RuntimeFile,
    /// Validation and protection per method.
    #[serde(default)]
    pub calls: calls::PolicyFile,
}

/// Command-line and environment overrides; `None` keeps the file's value. Values are as
/// written on the command line and checked like the file's, under the file's field names.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    pub listen: Option<String>,
    pub upstream: Option<String>,
    pub upstream_dialect: Option<String>,
    pub legacy_dialect: Option<String>,
    /// `listen.v0_dialect`.
    pub v0_dialect: Option<String>,
    pub log_format: Option<String>,
    pub log_level: Option<String>,
    pub metrics_listen: Option<String>,
    /// `metrics.path`.
    pub metrics_path: Option<String>,
    pub state_dir: Option<PathBuf>,
    pub state: StateOverrides,
    /// TEST HOOK (hidden flag): the gateway kills itself with SIGKILL at this named step of
    /// staging emulation, so tests can crash it between two steps. Only a build with the
    /// `test-hooks` cargo feature (the test suite's) accepts it; any other refuses it here.
    pub test_crash_at: Option<String>,
}

/// The validated configuration the gateway runs with: each section checked by its own file.
#[derive(Clone, Debug)]
pub struct Config {
    pub listen: Listen,
    pub state: State,
    pub upstream: Upstream,
    pub appliance: Option<crate::tls::ServerSettings>,
    /// `appliance.node_paths`, where there is an appliance listener (validated: absolute).
    pub node_paths: Option<PathBuf>,
    /// `appliance.max_connections` (validated: above zero); 0 without an appliance listener.
    pub appliance_max_connections: usize,
    pub log: Log,
    pub metrics: Metrics,
    pub runtime: Runtime,
    /// `[calls]`: validation and protection per method.
    pub calls: calls::Policy,
    /// See [`Overrides::test_crash_at`].
    #[cfg(feature = "test-hooks")]
    pub test_crash_at: Option<String>,
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
            self.listen.endpoint = Some(e);
        }
        fn set<T>(slot: &mut T, v: Option<String>, into: impl FnOnce(String) -> T) {
            if let Some(v) = v {
                *slot = into(v);
            }
        }
        set(&mut self.listen.endpoint, o.listen, Some);
        set(&mut self.upstream.endpoint, o.upstream, Some);
        set(
            &mut self.upstream.dialect,
            o.upstream_dialect,
            Choice::parse,
        );
        set(
            &mut self.listen.legacy_dialect,
            o.legacy_dialect,
            Choice::parse,
        );
        set(&mut self.listen.v0_dialect, o.v0_dialect, Choice::parse);
        set(&mut self.log.format, o.log_format, Choice::parse);
        set(&mut self.log.level, o.log_level, |v| v);
        set(&mut self.metrics.listen, o.metrics_listen, |v| v);
        set(&mut self.metrics.path, o.metrics_path, |v| v);
        if let Some(dir) = o.state_dir {
            self.state.dir = Some(dir);
        }
        self.state.apply(o.state);
        self.validate(o.test_crash_at)
    }

    /// Checks every section, then what spans sections; every problem is reported.
    fn validate(self, test_crash_at: Option<String>) -> Result<Config, ConfigError> {
        let mut p = Problems::default();
        #[cfg(not(feature = "test-hooks"))]
        if test_crash_at.is_some() {
            p.push(
                "--test-crash-at",
                "a test hook, and this csi-gateway was built without it (cargo feature \
                 `test-hooks`, which only the test suite enables)",
            );
        }
        let listen = self.listen.check(&mut p);
        let state = self.state.check(&mut p);
        let upstream = self.upstream.check(self.embedded, &mut p);
        let node_paths = self.appliance.as_ref().and_then(|a| {
            let default = || Some(state.as_ref()?.dir.join("node-paths"));
            let path = a.node_paths.clone().or_else(default)?;
            p.check(path.is_absolute(), "appliance.node_paths", || {
                format!(
                    "{}: must be an absolute path (the plugin receives paths under it)",
                    path.display()
                )
            })
            .then_some(path)
        });
        let appliance_max_connections = self.appliance.as_ref().map_or(0, |a| {
            let max = a.max_connections;
            p.check(max > 0, "appliance.max_connections", || {
                "must be above zero".into()
            });
            max
        });
        let appliance = self.appliance.map(|a| a.check(&mut p));
        let log = self.log.check(&mut p);
        let metrics = self.metrics.check(&mut p);
        let runtime = self.runtime.check(&mut p);
        let calls = self
            .calls
            .check()
            .map_err(|errors| {
                for e in errors {
                    p.push(e.field(), e.reason());
                }
            })
            .ok();
        if let (Some(listen), Some(upstream), Some(state)) = (&listen, &upstream, &state) {
            check_socket_neighbours(&listen.endpoint, upstream, state, &mut p);
        }
        // A section with a problem returned `None`, and left `p` non-empty.
        let (
            Some(listen),
            Some(state),
            Some(upstream),
            Some(log),
            Some(metrics),
            Some(runtime),
            Some(calls),
            true,
        ) = (
            listen,
            state,
            upstream,
            log,
            metrics,
            runtime,
            calls,
            p.is_empty(),
        )
        else {
            return Err(ConfigError::Invalid(p.into_vec()));
        };
        Ok(Config {
            listen,
            state,
            upstream,
            appliance: appliance.flatten(),
            node_paths,
            appliance_max_connections,
            log,
            metrics,
            runtime,
            calls,
            #[cfg(feature = "test-hooks")]
            test_crash_at,
        })
    }
}

/// The front socket is neither the upstream's, nor in a directory of the gateway's state: the
/// CSI spec wants the socket's directory to hold only the socket.
fn check_socket_neighbours(
    listen: &Endpoint,
    upstream: &Upstream,
    state: &State,
    p: &mut Problems,
) {
    let Endpoint::Unix(socket) = listen else {
        return;
    };
    if let UpstreamTarget::Endpoint(Endpoint::Unix(u)) = &upstream.target {
        p.check(u != socket, "upstream.endpoint", || {
            "the upstream cannot be the gateway's own socket".into()
        });
    }
    for (field, dir) in [
        ("state.staging_dir", state.staging_dir.as_path()),
        ("state.dir", state.dir.as_path()),
    ] {
        p.check(socket.parent() != Some(dir), field, || {
            format!(
                "{}: the front socket's directory must hold only the socket (CSI spec)",
                dir.display()
            )
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dialect::Dialect;

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
            c.upstream.target,
            UpstreamTarget::Embedded {
                dialect: Dialect::V0_1Oneof,
                ..
            }
        ));
        assert_eq!(
            c.listen.front_dialects(),
            vec![Dialect::V1, Dialect::V0_3, Dialect::V0_1]
        );
        assert!(
            !c.listen.serves_v0_2(),
            "csi.v0 is served as v0.3 by default"
        );
    }

    #[test]
    fn csi_endpoint_then_flags_override_the_file() {
        let f = File::load(None).unwrap();
        let c = f
            .clone()
            .resolve(Some("unix:///run/a.sock".into()), Overrides::default())
            .unwrap();
        assert_eq!(c.listen.endpoint, Endpoint::Unix("/run/a.sock".into()));
        let o = Overrides {
            listen: Some("/run/b.sock".into()),
            ..Default::default()
        };
        let c = f.resolve(Some("unix:///run/a.sock".into()), o).unwrap();
        assert_eq!(c.listen.endpoint, Endpoint::Unix("/run/b.sock".into()));
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
            (
                base.replace(
                    "[upstream]",
                    "[listen.limits]\nmax_buffered_bytes = 1048576\n[upstream]",
                ),
                "listen.limits.max_buffered_bytes",
            ),
            (format!("{base}[log]\nformat = \"xml\"\n"), "log.format"),
            (
                format!("{base}[metrics]\nlisten = \"localhost\"\n"),
                "metrics.listen",
            ),
        ];
        for (text, field) in cases {
            match with(&text) {
                Err(e) => assert_eq!(e.fields(), [field], "{text}"),
                Ok(_) => panic!("{text}: expected an error on {field}"),
            }
        }
        assert!(matches!(
            with(&format!("{base}bogus = 1\n")),
            Err(ConfigError::Parse { .. })
        ));
    }

    #[test]
    fn a_file_without_log_logs_at_info() {
        let base = "[state]\ndir = \"/var/lib/gw\"\n[listen]\nendpoint = \"unix:///run/a.sock\"\n[upstream]\nendpoint = \"unix:///b.sock\"\n";
        assert_eq!(with(base).unwrap().log.level, "info");
        assert_eq!(with(&format!("{base}[log]\n")).unwrap().log.level, "info");
    }

    #[test]
    fn scheduling_is_batch_unless_set_to_normal() {
        let base = "[state]\ndir = \"/var/lib/gw\"\n[listen]\nendpoint = \"unix:///run/a.sock\"\n[upstream]\nendpoint = \"unix:///b.sock\"\n";
        assert_eq!(with(base).unwrap().runtime.scheduling, Scheduling::Batch);
        let normal = with(&format!("{base}[runtime]\nscheduling = \"normal\"\n")).unwrap();
        assert_eq!(normal.runtime.scheduling, Scheduling::Normal);
        match with(&format!("{base}[runtime]\nscheduling = \"fifo\"\n")) {
            Err(e) => assert_eq!(
                e.to_string(),
                r#"runtime.scheduling: "fifo" is not one of "batch", "normal""#
            ),
            Ok(_) => panic!("fifo accepted"),
        }
    }

    #[test]
    fn bridge_sections_validate() {
        let tls = "[upstream.tls]\ncert = \"/c.pem\"\nkey = \"/c.key\"\nca = \"/ca.pem\"\n";
        let tcp = "[state]\ndir = \"/var/lib/gw\"\n[listen]\nendpoint = \"unix:///a.sock\"\n[upstream]\nendpoint = \"tcp://h:1\"\nfailover = [\"tcp://g:2\"]\n";
        let c = with(&format!("{tcp}{tls}")).unwrap();
        let t = c.upstream.tls.unwrap();
        assert_eq!(t.min_version, crate::tls::MinVersion::Tls13);
        assert_eq!(c.upstream.failover, vec![Endpoint::Tcp("g:2".into())]);
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
                Err(e) => assert_eq!(e.fields(), [field], "{text}"),
                Ok(_) => panic!("{text}: expected an error on {field}"),
            }
        }
    }

    /// Every bad value is reported, each under its field, not only the first.
    #[test]
    fn every_bad_value_is_reported() {
        let text = r#"
[listen]
endpoint = "unix:///run/a.sock"
legacy_dialect = "v0.9"
v0_dialect = "v0.4"
mode = "rw"
[upstream]
endpoint = "unix:///b.sock"
dialect = "v9"
backoff_initial = "0s"
[log]
format = "xml"
[metrics]
listen = "localhost"
[state]
dir = "/var/lib/gw"
backend = "zookeeper"
handle_encoding = "url"
[runtime]
scheduling = "fifo"
[calls]
validate = "strict"
"#;
        let e = with(text).unwrap_err();
        assert_eq!(
            e.fields(),
            [
                "listen.legacy_dialect",
                "listen.v0_dialect",
                "listen.mode",
                "state.backend",
                "state.handle_encoding",
                "upstream.dialect",
                "upstream.backoff_initial",
                "log.format",
                "metrics.listen",
                "runtime.scheduling",
                "calls.validate",
            ]
        );
        let shown = e.to_string();
        assert!(shown.starts_with("11 problems:\n  "), "{shown}");
        for line in [
            r#"listen.legacy_dialect: "v0.9" is not one of "v0.1", "v0.1-oneof""#,
            r#"listen.v0_dialect: "v0.4" is not one of "v0.3", "v0.2""#,
            r#"upstream.dialect: "v9" is not one of "auto", "v1", "v0.3", "v0.2", "v0.1", "v0.1-oneof""#,
            r#"log.format: "xml" is not one of "text", "json""#,
            r#"state.backend: "zookeeper" is not one of "embedded", "etcd""#,
        ] {
            assert!(shown.contains(&format!("\n  {line}")), "{line} in\n{shown}");
        }
    }

    /// Flags are checked like the file, under the file's field names, all of them.
    #[test]
    fn every_bad_override_is_reported() {
        let o = Overrides {
            upstream_dialect: Some("v7".into()),
            legacy_dialect: Some("v0.3".into()),
            log_format: Some("xml".into()),
            state: StateOverrides {
                backend: Some("zookeeper".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let e = File::load(None).unwrap().resolve(None, o).unwrap_err();
        assert_eq!(
            e.fields(),
            [
                "listen.legacy_dialect",
                "state.backend",
                "upstream.dialect",
                "log.format"
            ]
        );
    }

    /// Every spelling in use before the settings became enums is still accepted, with the
    /// meaning it had.
    #[test]
    fn the_accepted_spellings_are_unchanged() {
        let base = "[state]\ndir = \"/var/lib/gw\"\n[listen]\nendpoint = \"unix:///run/a.sock\"\n[upstream]\nendpoint = \"embedded\"\n";
        for (name, dialect) in [
            ("v1", Dialect::V1),
            ("v0.3", Dialect::V0_3),
            ("v0.2", Dialect::V0_3),
            ("v0.1", Dialect::V0_1),
            ("v0.1-oneof", Dialect::V0_1Oneof),
        ] {
            let c = with(&format!(
                "{base}dialect = \"{name}\"\n[embedded]\ndialect = \"{name}\"\n"
            ))
            .unwrap();
            assert_eq!(c.upstream.dialect, Some(dialect), "{name}");
            assert!(
                matches!(c.upstream.target, UpstreamTarget::Embedded { dialect: d, .. } if d == dialect),
                "{name}"
            );
        }
        assert_eq!(
            with(&format!("{base}dialect = \"auto\"\n"))
                .unwrap()
                .upstream
                .dialect,
            None
        );
        let listen = |extra: &str| {
            with(&base.replace("[upstream]", &format!("{extra}\n[upstream]"))).unwrap()
        };
        assert_eq!(
            listen("legacy_dialect = \"v0.1-oneof\"")
                .listen
                .front_dialects()[2],
            Dialect::V0_1Oneof
        );
        assert!(listen("v0_dialect = \"v0.2\"").listen.serves_v0_2());
        assert!(!listen("v0_dialect = \"v0.3\"").listen.serves_v0_2());
        assert_eq!(
            with(&format!("{base}[log]\nformat = \"json\"\n"))
                .unwrap()
                .log
                .format,
            LogFormat::Json
        );
        let inline =
            with(&base.replace("[listen]", "handle_encoding = \"inline\"\n[listen]")).unwrap();
        assert!(inline.state.inline_handles);
        let etcd = base.replace(
            "[listen]",
            "backend = \"etcd\"\netcd_endpoints = [\"http://e:2379\"]\n[listen]",
        );
        assert!(matches!(
            with(&etcd).unwrap().state.backend,
            StoreBackend::Etcd(_)
        ));
        let tls12 =
            "[upstream.tls]\ncert = \"/c\"\nkey = \"/k\"\nca = \"/a\"\nmin_version = \"1.2\"\n";
        let tcp = base.replace("\"embedded\"", "\"tcp://h:1\"");
        let c = with(&format!("{tcp}{tls12}")).unwrap();
        assert_eq!(
            c.upstream.tls.unwrap().min_version,
            crate::tls::MinVersion::Tls12
        );
    }

    /// The configurations shipped in deploy/ still validate as they are.
    #[test]
    fn the_shipped_deployments_validate() {
        // The default (node-local) set and shared-etcd/; .ci/check-deploy also runs each
        // through the built binary with its manifest's arguments.
        let node_local = include_str!("../../deploy/kubernetes/csi-gateway-config.yaml");
        let shared = include_str!("../../deploy/kubernetes/shared-etcd/csi-gateway-config.yaml");
        // A ConfigMap's TOML block: the indented lines under `node.toml: |` or
        // `controller.toml: |`.
        let block = |configmap: &str, key: &str| -> String {
            configmap
                .lines()
                .skip_while(|l| l.trim() != format!("{key}: |"))
                .skip(1)
                .take_while(|l| l.starts_with("    "))
                .map(|l| format!("{}\n", &l[4..]))
                .collect()
        };
        for (name, text) in [
            (
                "compose/node.toml",
                include_str!("../../deploy/compose/node.toml").to_string(),
            ),
            (
                "compose/bridged-node.toml",
                include_str!("../../deploy/compose/bridged-node.toml").to_string(),
            ),
            (
                "compose/controller.toml",
                include_str!("../../deploy/compose/controller.toml").to_string(),
            ),
            (
                "compose/appliance.toml",
                include_str!("../../deploy/compose/appliance.toml").to_string(),
            ),
            ("kubernetes node.toml", block(node_local, "node.toml")),
            (
                "kubernetes controller.toml",
                block(node_local, "controller.toml"),
            ),
            ("shared-etcd node.toml", block(shared, "node.toml")),
            (
                "shared-etcd controller.toml",
                block(shared, "controller.toml"),
            ),
        ] {
            assert!(text.contains("[listen]"), "{name}: {text}");
            match with(&text) {
                Err(e) => panic!("{name}: {e}"),
                // The default needs no service: its handles inline, its store on the node.
                Ok(c) if name.starts_with("kubernetes") => {
                    assert!(c.state.inline_handles, "{name}");
                    assert_eq!(c.state.backend, StoreBackend::Embedded, "{name}");
                }
                Ok(c) if name.starts_with("shared-etcd") => {
                    assert!(matches!(c.state.backend, StoreBackend::Etcd(_)), "{name}");
                }
                Ok(_) => {}
            }
        }
    }
}
