//! `[log]`: how the gateway logs.

use serde::Deserialize;

use super::choice::Choice;
use super::problems::Problems;

#[derive(Clone, Debug, Deserialize)]
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

/// A file without `[log]` logs as one with an empty `[log]`: at `info`. (A derived `Default`
/// would give an empty level, which logs nothing; `tests/compose.sh` caught it, its
/// configurations having no `[log]`.)
impl Default for LogFile {
    fn default() -> Self {
        LogFile {
            format: Choice::default(),
            level: default_level(),
            redact_keys: Vec::new(),
        }
    }
}

/// `[log]`, validated.
#[derive(Clone, Debug)]
pub struct Log {
    pub format: LogFormat,
    /// Checked when logging starts (`RUST_LOG` may replace it).
    pub level: String,
    pub redact_keys: Vec<String>,
}

impl LogFile {
    pub fn check(self, p: &mut Problems) -> Option<Log> {
        Some(Log {
            format: p.choice("log.format", self.format)?,
            level: self.level,
            redact_keys: self.redact_keys,
        })
    }
}
