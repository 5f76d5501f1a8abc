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

/// The log filter a klog verbosity (`--v=N`, the Kubernetes sidecars' flag) stands for:
///
/// | `--v` | filter | what it adds |
/// | --- | --- | --- |
/// | 0–3 | `info` | the gateway's default: one line per call, start-up, reconnects |
/// | 4 | `info,csi_gateway=debug` | Probe calls, request and reply bodies (secrets stripped) |
/// | 5 | `info,csi_gateway=trace` | everything the gateway itself logs |
/// | 6+ | `trace` | its libraries too (HTTP/2, gRPC) |
pub fn klog_filter(v: u8) -> &'static str {
    match v {
        0..=3 => "info",
        4 => "info,csi_gateway=debug",
        5 => "info,csi_gateway=trace",
        _ => "trace",
    }
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

#[cfg(test)]
mod tests {
    #[test]
    fn klog_verbosity_maps_onto_filters() {
        let filters: Vec<&str> = [0, 2, 3, 4, 5, 6, 9].map(super::klog_filter).into();
        assert_eq!(
            filters,
            [
                "info",
                "info",
                "info",
                "info,csi_gateway=debug",
                "info,csi_gateway=trace",
                "trace",
                "trace"
            ]
        );
    }
}
