//! The `[state]` section: where durable gateway state lives (the embedded database or etcd)
//! and where emulated staging is mounted.

use std::path::PathBuf;

use serde::Deserialize;

use super::ConfigError;

/// Durable gateway state, as written in the file.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StateFile {
    /// Directory of the embedded database; never the front socket's directory.
    pub dir: PathBuf,
    /// "embedded" (redb file in `dir`) or "etcd".
    #[serde(default = "default_backend")]
    pub backend: String,
    /// `http://host:port` of etcd members (plaintext gRPC).
    #[serde(default)]
    pub etcd_endpoints: Vec<String>,
    /// Every key the gateway writes to etcd starts with this.
    #[serde(default = "default_etcd_prefix")]
    pub etcd_prefix: String,
    /// Gateway-owned staging paths for staging emulation; default `<dir>/staging`.
    pub staging_dir: Option<PathBuf>,
    /// Where a draft plugin's VolumeHandle metadata lives between calls: "store" (the durable
    /// store, the default) or "inline" (inside the volume id; stateless, ≤ 128 bytes).
    #[serde(default = "default_handle_encoding")]
    pub handle_encoding: String,
}

fn default_handle_encoding() -> String {
    "store".into()
}

fn default_backend() -> String {
    "embedded".into()
}

fn default_etcd_prefix() -> String {
    "/csi-gateway/".into()
}

/// Which [`crate::store::KeyValue`] the gateway opens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreBackend {
    /// `<state.dir>/state.redb`.
    Embedded,
    Etcd {
        endpoints: Vec<String>,
        prefix: String,
    },
}

/// `[state]`, validated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct State {
    pub backend: StoreBackend,
    pub staging_dir: PathBuf,
    /// `handle_encoding = "inline"`.
    pub inline_handles: bool,
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
}

impl StateFile {
    pub fn apply(&mut self, o: StateOverrides) {
        if let Some(b) = o.backend {
            self.backend = b;
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
            self.handle_encoding = h;
        }
    }

    pub fn validate(&self) -> Result<State, ConfigError> {
        let invalid = |field, message: String| ConfigError::Invalid { field, message };
        let backend = match self.backend.as_str() {
            "embedded" => StoreBackend::Embedded,
            "etcd" => {
                if self.etcd_endpoints.is_empty() {
                    return Err(invalid(
                        "state.etcd_endpoints",
                        "state.backend = \"etcd\" needs at least one endpoint, e.g. [\"http://127.0.0.1:2379\"]".into(),
                    ));
                }
                for e in &self.etcd_endpoints {
                    check_etcd_endpoint(e).map_err(|m| invalid("state.etcd_endpoints", m))?;
                }
                let p = &self.etcd_prefix;
                if p.is_empty() || p.chars().any(char::is_whitespace) {
                    return Err(invalid(
                        "state.etcd_prefix",
                        format!(
                            "{p:?}: must be non-empty, without whitespace, e.g. \"/csi-gateway/\""
                        ),
                    ));
                }
                StoreBackend::Etcd {
                    endpoints: self.etcd_endpoints.clone(),
                    prefix: p.clone(),
                }
            }
            b => {
                return Err(invalid(
                    "state.backend",
                    format!("{b:?}: must be \"embedded\" or \"etcd\""),
                ))
            }
        };
        let staging_dir = self
            .staging_dir
            .clone()
            .unwrap_or_else(|| self.dir.join("staging"));
        if !staging_dir.is_absolute() {
            return Err(invalid(
                "state.staging_dir",
                format!(
                    "{}: must be an absolute path (plugins receive it as staging_target_path)",
                    staging_dir.display()
                ),
            ));
        }
        let inline_handles = match self.handle_encoding.as_str() {
            "store" => false,
            "inline" => true,
            e => {
                return Err(invalid(
                    "state.handle_encoding",
                    format!("{e:?}: must be \"store\" or \"inline\""),
                ))
            }
        };
        Ok(State {
            backend,
            staging_dir,
            inline_handles,
        })
    }
}

/// `http://host:port`: plaintext only, since this build configures no TLS towards etcd.
fn check_etcd_endpoint(e: &str) -> Result<(), String> {
    let rest = e.strip_prefix("http://").ok_or_else(|| {
        format!("{e:?}: must be http://host:port (TLS to etcd is not supported by this build)")
    })?;
    let port = rest
        .rsplit_once(':')
        .map(|(host, port)| (host, port.trim_end_matches('/')));
    match port {
        Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => Ok(()),
        _ => Err(format!("{e:?}: must be http://host:port")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(backend: &str, endpoints: &[&str]) -> StateFile {
        StateFile {
            dir: "/var/lib/gw".into(),
            backend: backend.into(),
            etcd_endpoints: endpoints.iter().map(|s| s.to_string()).collect(),
            etcd_prefix: default_etcd_prefix(),
            staging_dir: None,
            handle_encoding: default_handle_encoding(),
        }
    }

    #[test]
    fn handle_encoding_is_store_or_inline() {
        assert!(!file("embedded", &[]).validate().unwrap().inline_handles);
        let mut f = file("embedded", &[]);
        f.handle_encoding = "inline".into();
        assert!(f.validate().unwrap().inline_handles);
        f.handle_encoding = "url".into();
        assert!(matches!(
            f.validate(),
            Err(ConfigError::Invalid {
                field: "state.handle_encoding",
                ..
            })
        ));
    }

    #[test]
    fn backends_validate() {
        let s = file("embedded", &[]).validate().unwrap();
        assert_eq!(s.backend, StoreBackend::Embedded);
        assert_eq!(s.staging_dir, PathBuf::from("/var/lib/gw/staging"));
        let s = file("etcd", &["http://127.0.0.1:2379"]).validate().unwrap();
        assert!(
            matches!(s.backend, StoreBackend::Etcd { ref prefix, .. } if prefix == "/csi-gateway/")
        );
        for (f, field) in [
            (file("etcd", &[]), "state.etcd_endpoints"),
            (file("etcd", &["https://a:2379"]), "state.etcd_endpoints"),
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
            match f.validate() {
                Err(ConfigError::Invalid { field: got, .. }) => assert_eq!(got, field),
                other => panic!("{field}: {other:?}"),
            }
        }
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
