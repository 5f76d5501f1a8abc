//! `[log]`: how the gateway logs.

use serde::Deserialize;

use super::choice::Choice;

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogFile {
    #[serde(default)]
    pub format: Choice<LogFormat>,
    /// As in `RUST_LOG` ("info", "csi_gateway=debug", ...); `RUST_LOG` wins when set.
    #[serde(default = "default_level")]
    pub level: String,
    /// Map keys (e.g. in `volume_context`) whose values are stripped from logged bodies, on top
    /// of every field the dialects mark as secret.
    #[serde(default)]
    pub redact_keys: Vec<String>,
}

#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

fn default_level() -> String {
    "info".into()
}
