//! The `[state]` section: where durable gateway state lives (the embedded database or etcd)
//! and where emulated staging is mounted.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::choice::Choice;
use super::problems::Problems;
use crate::store::etcd;
use crate::tls::{ClientSettings, Keepalive, Material, MinVersion};

/// Durable gateway state, as written in the file.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateFile {
    /// Directory of the embedded database; never the front socket's directory. Optional in the
    /// file when `--state-dir` gives it.
    #[serde(default)]
    pub dir: Option<PathBuf>,
    #[serde(default)]
    pub backend: Choice<Backend>,
    /// `http://host:port` (plaintext gRPC) or `https://host:port` (TLS, needs `etcd_tls`) of
    /// etcd members.
    #[serde(default)]
    pub etcd_endpoints: Vec<String>,
    /// Client certificate, key and CA for `https://` etcd endpoints.
    pub etcd_tls: Option<EtcdTlsFile>,
    /// etcd user (etcd's `auth enable`); its password is read from `etcd_password_file`.
    pub etcd_username: Option<String>,
    pub etcd_password_file: Option<PathBuf>,
    /// Bounds every store operation: past it the call gets UNAVAILABLE naming the store (each
    /// etcd member is tried for at most its share of it: `store::etcd`).
    #[serde(default = "default_timeout", with = "humantime_serde")]
    pub timeout: Duration,
    /// This node's name, keying its staging records (node gateways may share one etcd);
    /// default: the host name.
    pub node_id: Option<String>,
    /// Every key the gateway writes to etcd starts with this.
    #[serde(default = "default_etcd_prefix")]
    pub etcd_prefix: String,
    /// Gateway-owned staging paths for staging emulation; default `<dir>/staging`.
    pub staging_dir: Option<PathBuf>,
    #[serde(default)]
    pub handle_encoding: Choice<HandleEncoding>,
}

/// A file without `[state]` reads as an empty one: the directory left to `--state-dir`.
impl Default for StateFile {
    fn default() -> Self {
        StateFile {
            dir: None,
            backend: Choice::default(),
            etcd_endpoints: Vec::new(),
            etcd_tls: None,
            etcd_username: None,
            etcd_password_file: None,
            timeout: default_timeout(),
            node_id: None,
            etcd_prefix: default_etcd_prefix(),
            staging_dir: None,
            handle_encoding: Choice::default(),
        }
    }
}

/// `state.backend`.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// A redb file in `dir`.
    #[default]
    Embedded,
    Etcd,
}

/// `state.handle_encoding`: where a draft plugin's VolumeHandle metadata lives between calls.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum HandleEncoding {
    /// The durable store.
    #[default]
    Store,
    /// Inside the volume id: stateless, ≤ 128 bytes.
    Inline,
}

/// `[state.etcd_tls]`: mutual TLS towards etcd.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EtcdTlsFile {
    /// The gateway's client certificate chain and key (PEM).
    pub cert: PathBuf,
    pub key: PathBuf,
    /// CA bundle etcd's server certificate must chain to (PEM).
    pub ca: PathBuf,
    /// Name to verify in etcd's certificate; default: the endpoint's host.
    pub server_name: Option<String>,
    #[serde(default = "default_min_version")]
    pub min_version: Choice<MinVersion>,
    #[serde(default = "default_reload", with = "humantime_serde")]
    pub reload_interval: Duration,
}

fn default_min_version() -> Choice<MinVersion> {
    Choice::Known(MinVersion::Tls12)
}

fn default_reload() -> Duration {
    Duration::from_secs(2)
}

fn default_timeout() -> Duration {
    Duration::from_secs(5)
}

impl EtcdTlsFile {
    fn check(&self, p: &mut Problems) -> Option<ClientSettings> {
        let reload_interval = p.positive("state.etcd_tls.reload_interval", self.reload_interval);
        let min_version = p.choice("state.etcd_tls.min_version", self.min_version.clone());
        Some(ClientSettings {
            material: Material {
                cert: self.cert.clone(),
                key: self.key.clone(),
                ca: self.ca.clone(),
            },
            server_name: self.server_name.clone().filter(|n| !n.is_empty()),
            min_version: min_version?,
            reload_interval: reload_interval?,
            keepalive: Keepalive {
                interval: Duration::from_secs(10),
                timeout: Duration::from_secs(5),
            },
        })
    }
}

fn default_etcd_prefix() -> String {
    "/csi-gateway/".into()
}

/// Which [`crate::store::KeyValue`] the gateway opens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreBackend {
    /// `<state.dir>/state.redb`.
    Embedded,
    Etcd(etcd::Settings),
}

/// `[state]`, validated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct State {
    /// Directory of the embedded database.
    pub dir: PathBuf,
    pub backend: StoreBackend,
    pub staging_dir: PathBuf,
    /// `handle_encoding = "inline"`.
    pub inline_handles: bool,
    /// Bound of every store operation.
    pub timeout: Duration,
    /// Keys this node's staging records.
    pub node_id: String,
}

/// Command-line overrides of `[state]`.
#[derive(Clone, Debug, Default)]
pub struct StateOverrides {
    pub backend: Option<String>,
    /// Comma-separated.
    pub etcd_endpoints: Option<String>,
    pub etcd_prefix: Option<String>,
    pub staging_dir: Option<PathBuf>,
    pub handle_encoding: Option<String>,
    pub node_id: Option<String>,
    pub timeout: Option<Duration>,
}

impl StateFile {
    pub fn apply(&mut self, o: StateOverrides) {
        if let Some(b) = o.backend {
            self.backend = Choice::parse(b);
        }
        if let Some(e) = o.etcd_endpoints {
            self.etcd_endpoints = e
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect();
        }
        if let Some(p) = o.etcd_prefix {
            self.etcd_prefix = p;
        }
        if let Some(d) = o.staging_dir {
            self.staging_dir = Some(d);
        }
        if let Some(h) = o.handle_encoding {
            self.handle_encoding = Choice::parse(h);
        }
        if let Some(n) = o.node_id {
            self.node_id = Some(n);
        }
        if let Some(t) = o.timeout {
            self.timeout = t;
        }
    }

    /// Checks every field, recording each problem; `None` if there was any.
    pub fn check(&self, p: &mut Problems) -> Option<State> {
        let backend = match p.choice("state.backend", self.backend.clone()) {
            Some(Backend::Embedded) => Some(StoreBackend::Embedded),
            Some(Backend::Etcd) => self.check_etcd(p).map(StoreBackend::Etcd),
            None => None,
        };
        let dir = p.take(
            "state.dir",
            super::listen::required(
                self.dir.clone(),
                "not set: give it in [state] dir or with --state-dir",
            ),
        );
        // Without a directory the default staging path is unknown; its own problem is above.
        let staging_dir = match (&self.staging_dir, &dir) {
            (Some(s), _) => Some(s.clone()),
            (None, Some(d)) => Some(d.join("staging")),
            (None, None) => None,
        };
        let staging_ok = staging_dir.as_ref().is_some_and(|staging_dir| {
            p.check(staging_dir.is_absolute(), "state.staging_dir", || {
                format!(
                    "{}: must be an absolute path (plugins receive it as staging_target_path)",
                    staging_dir.display()
                )
            })
        });
        let inline_handles = p
            .choice("state.handle_encoding", self.handle_encoding.clone())
            .map(|e| e == HandleEncoding::Inline);
        let timeout = p.positive("state.timeout", self.timeout);
        let node_id = check_node_id(self.node_id.clone(), p);
        Some(State {
            dir: dir?,
            backend: backend?,
            staging_dir: staging_dir.filter(|_| staging_ok)?,
            inline_handles: inline_handles?,
            timeout: timeout?,
            node_id: node_id?,
        })
    }

    /// `backend = "etcd"`: its endpoints, TLS, credentials and prefix.
    fn check_etcd(&self, p: &mut Problems) -> Option<etcd::Settings> {
        let mut ok = p.check(
            !self.etcd_endpoints.is_empty(),
            "state.etcd_endpoints",
            || "state.backend = \"etcd\" needs at least one endpoint, e.g. [\"http://127.0.0.1:2379\"]".into(),
        );
        for e in &self.etcd_endpoints {
            ok &= p
                .take("state.etcd_endpoints", check_etcd_endpoint(e))
                .is_some();
        }
        let tls = match &self.etcd_tls {
            None => Some(None),
            Some(t) => t.check(p).map(Some),
        };
        let https = self
            .etcd_endpoints
            .iter()
            .filter(|e| e.starts_with("https://"))
            .count();
        let mismatch = match (https, &self.etcd_tls) {
            (0, Some(_)) => Some(("state.etcd_tls", "set, but no endpoint is https://")),
            (n, None) if n > 0 => Some((
                "state.etcd_tls",
                "https:// endpoints need [state.etcd_tls] (cert, key, ca)",
            )),
            (n, Some(_)) if n != self.etcd_endpoints.len() => {
                Some(("state.etcd_endpoints", "mixes http:// and https://"))
            }
            _ => None,
        };
        if let Some((field, message)) = mismatch {
            p.push(field, message);
            ok = false;
        }
        ok &= p.check(
            self.etcd_username.is_some() == self.etcd_password_file.is_some(),
            "state.etcd_username",
            || "etcd_username and etcd_password_file go together".into(),
        );
        let prefix = &self.etcd_prefix;
        ok &= p.check(
            !prefix.is_empty() && !prefix.chars().any(char::is_whitespace),
            "state.etcd_prefix",
            || format!("{prefix:?}: must be non-empty, without whitespace, e.g. \"/csi-gateway/\""),
        );
        let tls = tls?;
        ok.then(|| etcd::Settings {
            endpoints: self.etcd_endpoints.clone(),
            prefix: prefix.clone(),
            tls,
            username: self.etcd_username.clone(),
            password_file: self.etcd_password_file.clone(),
            connect_timeout: self.timeout,
        })
    }
}

/// The node id set, or the host name; usable as one segment of a key.
fn check_node_id(node_id: Option<String>, p: &mut Problems) -> Option<String> {
    let node_id = match node_id {
        Some(n) => n,
        None => p.take(
            "state.node_id",
            host_name().map_err(|e| format!("not set, and the host name is unknown: {e}")),
        )?,
    };
    let ok =
        !node_id.is_empty() && !node_id.contains('/') && !node_id.chars().any(char::is_whitespace);
    p.check(ok, "state.node_id", || {
        format!("{node_id:?}: must be non-empty, without '/' or whitespace")
    })
    .then_some(node_id)
}

/// The machine's host name (`uname -n`).
fn host_name() -> Result<String, String> {
    let name = rustix::system::uname();
    let name = name.nodename().to_string_lossy().into_owned();
    if name.is_empty() {
        return Err("empty".into());
    }
    Ok(name)
}

/// `http://host:port` or `https://host:port`.
fn check_etcd_endpoint(e: &str) -> Result<(), String> {
    let rest = e
        .strip_prefix("http://")
        .or_else(|| e.strip_prefix("https://"))
        .ok_or_else(|| format!("{e:?}: must be http://host:port or https://host:port"))?;
    let port = rest
        .rsplit_once(':')
        .map(|(host, port)| (host, port.trim_end_matches('/')));
    match port {
        Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => Ok(()),
        _ => Err(format!("{e:?}: must be http(s)://host:port")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl StateFile {
        /// The validated section, or the fields of every problem.
        fn validate(&self) -> Result<State, Vec<String>> {
            let mut p = Problems::default();
            let state = self.check(&mut p);
            let fields = p.into_vec().into_iter().map(|p| p.field).collect();
            state.ok_or(fields)
        }
    }

    fn file(backend: &str, endpoints: &[&str]) -> StateFile {
        StateFile {
            dir: Some("/var/lib/gw".into()),
            backend: Choice::parse(backend),
            etcd_endpoints: endpoints.iter().map(|s| s.to_string()).collect(),
            etcd_prefix: default_etcd_prefix(),
            staging_dir: None,
            handle_encoding: Choice::default(),
            etcd_tls: None,
            etcd_username: None,
            etcd_password_file: None,
            timeout: default_timeout(),
            node_id: Some("node-1".into()),
        }
    }

    #[test]
    fn handle_encoding_is_store_or_inline() {
        assert!(!file("embedded", &[]).validate().unwrap().inline_handles);
        let mut f = file("embedded", &[]);
        f.handle_encoding = Choice::parse("inline");
        assert!(f.validate().unwrap().inline_handles);
        f.handle_encoding = Choice::parse("url");
        assert_eq!(f.validate(), Err(vec!["state.handle_encoding".to_string()]));
    }

    #[test]
    fn backends_validate() {
        let s = file("embedded", &[]).validate().unwrap();
        assert_eq!(s.backend, StoreBackend::Embedded);
        assert_eq!(s.staging_dir, PathBuf::from("/var/lib/gw/staging"));
        let s = file("etcd", &["http://127.0.0.1:2379"]).validate().unwrap();
        assert!(matches!(s.backend, StoreBackend::Etcd(ref e) if e.prefix == "/csi-gateway/"));
        for (f, field) in [
            (file("etcd", &[]), "state.etcd_endpoints"),
            (file("etcd", &["https://a:2379"]), "state.etcd_tls"),
            (file("etcd", &["ftp://a:2379"]), "state.etcd_endpoints"),
            (
                StateFile {
                    node_id: Some("a/b".into()),
                    ..file("embedded", &[])
                },
                "state.node_id",
            ),
            (file("etcd", &["http://a"]), "state.etcd_endpoints"),
            (file("zookeeper", &[]), "state.backend"),
            (
                StateFile {
                    staging_dir: Some("rel".into()),
                    ..file("embedded", &[])
                },
                "state.staging_dir",
            ),
        ] {
            assert_eq!(f.validate(), Err(vec![field.to_string()]), "{field}");
        }
    }

    #[test]
    fn every_etcd_problem_is_reported() {
        let f = StateFile {
            etcd_endpoints: vec!["https://a:2379".into(), "ftp://b".into()],
            etcd_username: Some("gw".into()),
            etcd_prefix: "a prefix".into(),
            timeout: Duration::ZERO,
            ..file("etcd", &[])
        };
        assert_eq!(
            f.validate(),
            Err(vec![
                "state.etcd_endpoints".to_string(),
                "state.etcd_tls".into(),
                "state.etcd_username".into(),
                "state.etcd_prefix".into(),
                "state.timeout".into(),
            ])
        );
    }

    #[test]
    fn overrides_split_endpoints() {
        let mut f = file("embedded", &[]);
        f.apply(StateOverrides {
            backend: Some("etcd".into()),
            etcd_endpoints: Some("http://a:1, http://b:2".into()),
            ..Default::default()
        });
        assert_eq!(f.etcd_endpoints, ["http://a:1", "http://b:2"]);
        assert!(f.validate().is_ok());
    }
}
