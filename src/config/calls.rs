//! What the gateway does with each call besides passing it on, set by `[calls]` in the
//! configuration: spec validation (`validate`), and protection for fragile plugins per method
//! (per-volume serialization, a concurrency limit, a default deadline). A method with any of it
//! switched on is decoded by the gateway (it leaves the spliced fast path, see
//! `call::router::Route::relays_to`); with everything off, nothing changes.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use crate::config::Choice;
use crate::dialect::{Dialect, MethodInfo};

/// Spec validation of requests and replies.
#[derive(Clone, Copy, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Validate {
    #[default]
    Off,
    /// Log each violation and count it; the call goes on.
    Warn,
    /// A bad request gets INVALID_ARGUMENT; a bad reply is replaced by INTERNAL naming the rule.
    Enforce,
}

/// `[calls]`. `V` is how a `validate` is held: [`Validate`] in the checked policy the gateway
/// runs with; [`Choice`] in [`PolicyFile`], as written, so a misspelt value is reported with the
/// configuration's other problems instead of stopping the parse. One shape for both.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Policy<V = Validate> {
    /// For every method without a `validate` of its own.
    #[serde(default)]
    pub validate: V,
    /// By RPC name as the front dialects call it (`CreateVolume`, `NodePublishVolume`, …).
    #[serde(default = "BTreeMap::new")]
    pub methods: BTreeMap<String, MethodPolicy<V>>,
}

/// `[calls.methods.NAME]`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MethodPolicy<V = Validate> {
    /// A second call naming a volume that already has a call in flight (of any serialized
    /// method) gets ABORTED (the draft: its OPERATION_PENDING_FOR_VOLUME error).
    #[serde(default)]
    pub serialize_per_volume: bool,
    /// Calls of this method in flight at once; more get RESOURCE_EXHAUSTED.
    pub max_in_flight: Option<usize>,
    /// The deadline of a call whose client sent none (`grpc-timeout`).
    #[serde(default, with = "humantime_serde")]
    pub default_deadline: Option<Duration>,
    pub validate: Option<V>,
}

/// `[calls]` as written.
pub type PolicyFile = Policy<Choice<Validate>>;

/// What is wrong with one setting of `[calls]`.
#[derive(Debug, PartialEq, Eq)]
pub enum PolicyError {
    /// No CSI dialect has an RPC of that name.
    UnknownMethod(String),
    Streaming(String),
    ZeroLimit(String),
    ZeroDeadline(String),
    /// `field` (`calls.validate` or `calls.methods.NAME.validate`) is none of the spellings.
    Validate {
        field: String,
        message: String,
    },
}

impl PolicyError {
    /// The setting at fault, as written in the file.
    pub fn field(&self) -> String {
        match self {
            PolicyError::UnknownMethod(m) | PolicyError::Streaming(m) => {
                format!("calls.methods.{m}")
            }
            PolicyError::ZeroLimit(m) => format!("calls.methods.{m}.max_in_flight"),
            PolicyError::ZeroDeadline(m) => format!("calls.methods.{m}.default_deadline"),
            PolicyError::Validate { field, .. } => field.clone(),
        }
    }

    /// What is wrong with it.
    pub fn reason(&self) -> String {
        match self {
            PolicyError::UnknownMethod(_) => "no CSI dialect has an RPC of that name".into(),
            PolicyError::Streaming(_) => "a streaming RPC cannot be protected or validated".into(),
            PolicyError::ZeroLimit(_) => "must be at least 1".into(),
            PolicyError::ZeroDeadline(_) => "must be longer than zero".into(),
            PolicyError::Validate { message, .. } => message.clone(),
        }
    }
}

impl std::fmt::Display for PolicyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field(), self.reason())
    }
}

impl std::error::Error for PolicyError {}

impl PolicyFile {
    /// The policy to run with, or every problem in it: each method name must be an RPC of
    /// some dialect, unary, with sensible limits, and each `validate` one of its spellings.
    pub fn check(self) -> Result<Policy, Vec<PolicyError>> {
        let mut problems = Vec::new();
        let mut known = |field: String, v: Choice<Validate>| {
            v.get()
                .map_err(|message| problems.push(PolicyError::Validate { field, message }))
                .unwrap_or_default()
        };
        let validate = known("calls.validate".into(), self.validate);
        let methods = self
            .methods
            .into_iter()
            .map(|(name, m)| {
                let validate = m
                    .validate
                    .map(|v| known(format!("calls.methods.{name}.validate"), v));
                let m = MethodPolicy {
                    serialize_per_volume: m.serialize_per_volume,
                    max_in_flight: m.max_in_flight,
                    default_deadline: m.default_deadline,
                    validate,
                };
                (name, m)
            })
            .collect();
        let policy = Policy { validate, methods };
        problems.extend(policy.method_problems());
        if problems.is_empty() {
            Ok(policy)
        } else {
            Err(problems)
        }
    }
}

impl Policy {
    /// Every method name must be an RPC of some dialect, unary, with sensible limits.
    fn method_problems(&self) -> Vec<PolicyError> {
        let mut problems = Vec::new();
        for (name, m) in &self.methods {
            let all: Vec<&MethodInfo> = Dialect::ALL
                .iter()
                .flat_map(|d| d.methods())
                .filter(|i| i.method == name)
                .collect();
            if all.is_empty() {
                problems.push(PolicyError::UnknownMethod(name.clone()));
                continue;
            }
            if all.iter().any(|i| i.server_streaming) {
                problems.push(PolicyError::Streaming(name.clone()));
            }
            if m.max_in_flight == Some(0) {
                problems.push(PolicyError::ZeroLimit(name.clone()));
            }
            if m.default_deadline == Some(Duration::ZERO) {
                problems.push(PolicyError::ZeroDeadline(name.clone()));
            }
        }
        problems
    }

    pub fn method(&self, method: &MethodInfo) -> Option<&MethodPolicy> {
        self.methods.get(method.method)
    }

    pub fn validate(&self, method: &MethodInfo) -> Validate {
        self.method(method)
            .and_then(|m| m.validate)
            .unwrap_or(self.validate)
    }

    /// Whether the gateway must read this method's messages.
    pub fn decodes(&self, method: &MethodInfo) -> bool {
        if method.server_streaming {
            return false;
        }
        self.validate(method) != Validate::Off
            || self.method(method).is_some_and(|m| {
                m.serialize_per_volume || m.max_in_flight.is_some() || m.default_deadline.is_some()
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> PolicyFile {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn off_by_default_and_per_method_when_set() {
        let p = Policy::default();
        let create = Dialect::V1
            .method("/csi.v1.Controller/CreateVolume")
            .unwrap();
        assert!(!p.decodes(create));
        let p = parse(
            "validate = \"warn\"\n[methods.CreateVolume]\nmax_in_flight = 2\nvalidate = \"enforce\"\n",
        )
        .check()
        .unwrap();
        assert_eq!(p.validate(create), Validate::Enforce);
        let probe = Dialect::V1.method("/csi.v1.Identity/Probe").unwrap();
        assert_eq!(p.validate(probe), Validate::Warn);
        assert!(p.decodes(probe));
        // The draft's CreateVolume is the same name.
        let draft = Dialect::V0_1Oneof
            .method("/csi.Controller/CreateVolume")
            .unwrap();
        assert_eq!(p.method(draft).unwrap().max_in_flight, Some(2));
    }

    #[test]
    fn refuses_what_cannot_apply() {
        let bad = |t: &str| parse(t).check().unwrap_err().remove(0);
        assert_eq!(
            bad("[methods.CreateVolumes]\nmax_in_flight = 1"),
            PolicyError::UnknownMethod("CreateVolumes".into())
        );
        assert!(matches!(
            bad("[methods.GetMetadataAllocated]\nmax_in_flight = 1"),
            PolicyError::Streaming(_)
        ));
        assert!(matches!(
            bad("[methods.NodeStageVolume]\nmax_in_flight = 0"),
            PolicyError::ZeroLimit(_)
        ));
        assert!(toml::from_str::<PolicyFile>("[methods.Probe]\nserialise = true").is_err());
    }

    #[test]
    fn every_problem_is_reported_each_under_its_field() {
        let problems = parse(
            "validate = \"strict\"\n[methods.CreateVolume]\nmax_in_flight = 0\nvalidate = \"on\"\n[methods.Nope]\n",
        )
        .check()
        .unwrap_err();
        let shown: Vec<String> = problems.iter().map(ToString::to_string).collect();
        assert_eq!(
            shown,
            [
                r#"calls.validate: "strict" is not one of "off", "warn", "enforce""#,
                r#"calls.methods.CreateVolume.validate: "on" is not one of "off", "warn", "enforce""#,
                "calls.methods.CreateVolume.max_in_flight: must be at least 1",
                "calls.methods.Nope: no CSI dialect has an RPC of that name",
            ]
        );
    }
}
