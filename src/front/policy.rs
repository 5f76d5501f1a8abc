//! What the gateway does with each call besides passing it on, set by `[calls]` in the
//! configuration: spec validation (`validate`), and protection for fragile plugins per method
//! (per-volume serialization, a concurrency limit, a default deadline). A method with any of it
//! switched on is decoded by the gateway (it leaves the spliced fast path, see
//! [`super::router::Route::relays_to`]); with everything off, nothing changes.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

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

/// `[calls]`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    /// For every method without a `validate` of its own.
    #[serde(default)]
    pub validate: Validate,
    /// By RPC name as the front dialects call it (`CreateVolume`, `NodePublishVolume`, …).
    #[serde(default)]
    pub methods: BTreeMap<String, MethodPolicy>,
}

/// `[calls.methods.NAME]`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MethodPolicy {
    /// A second call naming a volume that already has a call in flight (of any serialized
    /// method) gets ABORTED (the draft: its OPERATION_PENDING_FOR_VOLUME error).
    #[serde(default)]
    pub serialize_per_volume: bool,
    /// Calls of this method in flight at once; more get RESOURCE_EXHAUSTED.
    pub max_in_flight: Option<usize>,
    /// The deadline of a call whose client sent none (`grpc-timeout`).
    #[serde(default, with = "humantime_serde")]
    pub default_deadline: Option<Duration>,
    pub validate: Option<Validate>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PolicyError {
    #[error("calls.methods.{0}: no CSI dialect has an RPC of that name")]
    UnknownMethod(String),
    #[error("calls.methods.{0}: a streaming RPC cannot be protected or validated")]
    Streaming(String),
    #[error("calls.methods.{0}.max_in_flight: must be at least 1")]
    ZeroLimit(String),
    #[error("calls.methods.{0}.default_deadline: must be longer than zero")]
    ZeroDeadline(String),
}

impl Policy {
    /// Every method name must be an RPC of some dialect, unary, with sensible limits.
    pub fn check(&self) -> Result<(), PolicyError> {
        self.problems().into_iter().next().map_or(Ok(()), Err)
    }

    /// Every way [`Policy::check`] can fail, all of them.
    pub fn problems(&self) -> Vec<PolicyError> {
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

    fn parse(text: &str) -> Policy {
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
        );
        p.check().unwrap();
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
        let bad = |t: &str| parse(t).check().unwrap_err();
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
        assert!(toml::from_str::<Policy>("[methods.Probe]\nserialise = true").is_err());
    }
}
