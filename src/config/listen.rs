//! `[listen]`: the front socket orchestrators call, and which dialects it serves.

use std::time::Duration;

use serde::Deserialize;

use super::choice::Choice;
use super::problems::Problems;
use crate::dialect::Dialect;
use crate::endpoint::Endpoint;

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListenFile {
    /// Optional in the file when `--listen`, `--csi-address` or `CSI_ENDPOINT` gives it.
    #[serde(default)]
    pub endpoint: Option<String>,
    /// Octal, e.g. "0660".
    pub mode: Option<String>,
    pub owner_uid: Option<u32>,
    pub owner_gid: Option<u32>,
    /// Which of `v0.1` and `v0.1-oneof` answers under the package `csi`.
    #[serde(default)]
    pub legacy_dialect: Choice<LegacyDialect>,
    /// Which revision answers under the package `csi.v0`.
    #[serde(default)]
    pub v0_dialect: Choice<V0Dialect>,
    #[serde(default = "default_grace", with = "humantime_serde")]
    pub grace_period: Duration,
    /// What one client connection may make the gateway do (`[listen.limits]`).
    #[serde(default)]
    pub limits: super::limits::Limits,
}

/// A file without `[listen]` reads as an empty one: every field at its default, the endpoint
/// left to the command line or `CSI_ENDPOINT`.
impl Default for ListenFile {
    fn default() -> Self {
        ListenFile {
            endpoint: None,
            mode: None,
            owner_uid: None,
            owner_gid: None,
            legacy_dialect: Choice::default(),
            v0_dialect: Choice::default(),
            grace_period: default_grace(),
            limits: super::limits::Limits::default(),
        }
    }
}

/// The draft and v0.1.0 share the gRPC package `csi`: one listener serves one of them.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
pub enum LegacyDialect {
    #[default]
    #[serde(rename = "v0.1")]
    V0_1,
    #[serde(rename = "v0.1-oneof")]
    V0_1Oneof,
}

impl From<LegacyDialect> for Dialect {
    fn from(d: LegacyDialect) -> Dialect {
        match d {
            LegacyDialect::V0_1 => Dialect::V0_1,
            LegacyDialect::V0_1Oneof => Dialect::V0_1Oneof,
        }
    }
}

/// v0.2 and v0.3 share the package `csi.v0`, and nothing a client sends first tells them
/// apart.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
pub enum V0Dialect {
    #[default]
    #[serde(rename = "v0.3")]
    V0_3,
    /// Same package, no snapshots, topology or NodeGetInfo.
    #[serde(rename = "v0.2")]
    V0_2,
}

fn default_grace() -> Duration {
    Duration::from_secs(10)
}

/// `[listen]`, validated.
#[derive(Clone, Debug)]
pub struct Listen {
    /// Always [`Endpoint::Unix`].
    pub endpoint: Endpoint,
    pub socket_mode: Option<u32>,
    pub socket_owner: Option<(u32, u32)>,
    pub legacy: LegacyDialect,
    pub v0: V0Dialect,
    /// On SIGTERM, in-flight calls get this long to finish.
    pub grace_period: Duration,
    /// See [`ListenFile::limits`].
    pub limits: super::limits::Limits,
}

impl Listen {
    /// v1 and v0.3 always; the legacy package `csi` as configured.
    pub fn front_dialects(&self) -> Vec<Dialect> {
        vec![Dialect::V1, Dialect::V0_3, self.legacy.into()]
    }

    /// `v0_dialect = "v0.2"`: `csi.v0` clients are v0.2 clients.
    pub fn serves_v0_2(&self) -> bool {
        self.v0 == V0Dialect::V0_2
    }
}

impl ListenFile {
    /// Checks every field, recording each problem; `None` if there was any.
    pub fn check(self, p: &mut Problems) -> Option<Listen> {
        let endpoint = p
            .take("listen.endpoint", required(self.endpoint, LISTEN_UNSET))
            .and_then(|e| p.take("listen.endpoint", e.parse::<Endpoint>()))
            .filter(|e| {
                p.check(matches!(e, Endpoint::Unix(_)), "listen.endpoint", || {
                    "the front listens on a UNIX socket (unix:///path)".into()
                })
            });
        let legacy = p.choice("listen.legacy_dialect", self.legacy_dialect);
        let v0 = p.choice("listen.v0_dialect", self.v0_dialect);
        let socket_mode = match &self.mode {
            None => Some(None),
            Some(m) => p.take("listen.mode", socket_mode(m)).map(Some),
        };
        let socket_owner = match (self.owner_uid, self.owner_gid) {
            (None, None) => Some(None),
            (Some(u), Some(g)) => Some(Some((u, g))),
            _ => {
                p.push(
                    "listen.owner_uid",
                    "set both owner_uid and owner_gid, or neither",
                );
                None
            }
        };
        let least = super::limits::CONNECTION_BUFFERED;
        p.check(
            self.limits.max_buffered_bytes >= least,
            "listen.limits.max_buffered_bytes",
            || format!("at least {least}: two of the largest messages (4 MiB each) must fit"),
        );
        Some(Listen {
            endpoint: endpoint?,
            socket_mode: socket_mode?,
            socket_owner: socket_owner?,
            legacy: legacy?,
            v0: v0?,
            grace_period: self.grace_period,
            limits: self.limits,
        })
    }
}

/// What `listen.endpoint` says when neither the file nor the command line set it.
const LISTEN_UNSET: &str = "not set: give it in [listen] endpoint, with --listen (or \
     --csi-address), or in CSI_ENDPOINT";

/// A setting that may be left out of the file but must come from somewhere.
pub(super) fn required<T>(value: Option<T>, unset: &str) -> Result<T, String> {
    value.ok_or_else(|| unset.to_string())
}

fn socket_mode(m: &str) -> Result<u32, String> {
    u32::from_str_radix(m.trim_start_matches("0o"), 8)
        .ok()
        .filter(|m| *m <= 0o7777)
        .ok_or_else(|| format!("{m:?} is not an octal file mode like \"0660\""))
}
