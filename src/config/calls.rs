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
    /// How long a single-flight call keeps running at the plugin once no caller waits for it
    /// ([`Policy::keep_after_cancel`]); a method's own wins.
    #[serde(default, with = "humantime_serde")]
    pub keep_after_cancel: Option<Duration>,
    /// How long the answer of a call that finished after its callers left is kept for the
    /// identical retry ([`Policy::keep_answer`]).
    #[serde(default, with = "humantime_serde")]
    pub keep_answer: Option<Duration>,
    /// A call in flight this long is logged, then again every `slow_call_log_every`.
    #[serde(default, with = "humantime_serde")]
    pub slow_call_log_after: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    pub slow_call_log_every: Option<Duration>,
}

/// `calls.keep_after_cancel` unset.
pub const KEEP_AFTER_CANCEL: Duration = Duration::from_secs(180);
/// `calls.keep_answer` unset.
pub const KEEP_ANSWER: Duration = Duration::from_secs(10);
/// `calls.slow_call_log_after` unset.
pub const SLOW_CALL_LOG_AFTER: Duration = Duration::from_secs(30);
/// `calls.slow_call_log_every` unset.
pub const SLOW_CALL_LOG_EVERY: Duration = Duration::from_secs(60);

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
    /// A retry of a call still running at the plugin joins it (same answer); a different
    /// request on the same idempotency key gets ABORTED. The call runs as its own task and
    /// outlives its caller for `keep_after_cancel`. Only for methods with a key (`call::guard`).
    #[serde(default)]
    pub single_flight: bool,
    /// This method's `calls.keep_after_cancel`.
    #[serde(default, with = "humantime_serde")]
    pub keep_after_cancel: Option<Duration>,
    /// Over `max_in_flight` or `qps`, a call waits (until its deadline) instead of being refused.
    #[serde(default)]
    pub queue: bool,
    /// Calls of this method started per second (a token bucket of `burst` tokens).
    pub qps: Option<f64>,
    /// The token bucket's size; unset: `qps` rounded up (at least 1).
    pub burst: Option<u32>,
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
    /// `single_flight` on a method the spec gives no idempotency key.
    NoIdempotencyKey(String),
    /// `queue` without `max_in_flight` or `qps` to wait for.
    QueueWithoutLimit(String),
    /// `qps` not a positive number, or `burst` zero.
    BadRate(String),
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
            PolicyError::NoIdempotencyKey(m) => format!("calls.methods.{m}.single_flight"),
            PolicyError::QueueWithoutLimit(m) => format!("calls.methods.{m}.queue"),
            PolicyError::BadRate(m) => format!("calls.methods.{m}.qps"),
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
            PolicyError::NoIdempotencyKey(_) => {
                "only a mutating RPC (create, delete, publish, unpublish, stage, unstage, expand, snapshot) can be single-flight".into()
            }
            PolicyError::QueueWithoutLimit(_) => {
                "queues only for max_in_flight or qps; set one of them".into()
            }
            PolicyError::BadRate(_) => {
                "qps must be a number above zero and burst at least 1".into()
            }
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
                    single_flight: m.single_flight,
                    keep_after_cancel: m.keep_after_cancel,
                    queue: m.queue,
                    qps: m.qps,
                    burst: m.burst,
                };
                (name, m)
            })
            .collect();
        let policy = Policy {
            validate,
            methods,
            keep_after_cancel: self.keep_after_cancel,
            keep_answer: self.keep_answer,
            slow_call_log_after: self.slow_call_log_after,
            slow_call_log_every: self.slow_call_log_every,
        };
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
            if m.single_flight && !crate::validate::idempotency::has_key(name) {
                problems.push(PolicyError::NoIdempotencyKey(name.clone()));
            }
            if m.queue && m.max_in_flight.is_none() && m.qps.is_none() {
                problems.push(PolicyError::QueueWithoutLimit(name.clone()));
            }
            if m.qps.is_some_and(|q| !(q.is_finite() && q > 0.0)) || m.burst == Some(0) {
                problems.push(PolicyError::BadRate(name.clone()));
            }
        }
        problems
    }

    pub fn method(&self, method: &MethodInfo) -> Option<&MethodPolicy> {
        self.methods.get(method.method)
    }

    /// How long a single-flight call of `method` runs on once no caller waits for it.
    pub fn keep_after_cancel(&self, method: &MethodInfo) -> Duration {
        self.method(method)
            .and_then(|m| m.keep_after_cancel)
            .or(self.keep_after_cancel)
            .unwrap_or(KEEP_AFTER_CANCEL)
    }

    pub fn keep_answer(&self) -> Duration {
        self.keep_answer.unwrap_or(KEEP_ANSWER)
    }

    /// When a call in flight is first logged, and how often after.
    pub fn slow_call_log(&self) -> (Duration, Duration) {
        (
            self.slow_call_log_after.unwrap_or(SLOW_CALL_LOG_AFTER),
            self.slow_call_log_every.unwrap_or(SLOW_CALL_LOG_EVERY),
        )
    }

    /// Whether retries of `method` join a running call.
    pub fn single_flight(&self, method: &MethodInfo) -> bool {
        self.method(method).is_some_and(|m| m.single_flight)
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
                m.serialize_per_volume
                    || m.max_in_flight.is_some()
                    || m.default_deadline.is_some()
                    || m.single_flight
                    || m.qps.is_some()
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
        assert_eq!(
            bad("[methods.ListVolumes]\nsingle_flight = true"),
            PolicyError::NoIdempotencyKey("ListVolumes".into())
        );
        assert_eq!(
            bad("[methods.CreateVolume]\nqueue = true"),
            PolicyError::QueueWithoutLimit("CreateVolume".into())
        );
        for rate in ["qps = 0.0", "qps = -1.0", "qps = 1.0\nburst = 0"] {
            assert_eq!(
                bad(&format!("[methods.CreateVolume]\n{rate}")),
                PolicyError::BadRate("CreateVolume".into())
            );
        }
        let fine = parse(
            "keep_after_cancel = \"1m\"\n[methods.NodeStageVolume]\nsingle_flight = true\nqps = 2.5\nqueue = true\nkeep_after_cancel = \"5m\"\n",
        )
        .check()
        .unwrap();
        let stage = Dialect::V1.method("/csi.v1.Node/NodeStageVolume").unwrap();
        assert!(fine.decodes(stage) && fine.single_flight(stage));
        assert_eq!(fine.keep_after_cancel(stage), Duration::from_secs(300));
        let create = Dialect::V1
            .method("/csi.v1.Controller/CreateVolume")
            .unwrap();
        assert_eq!(fine.keep_after_cancel(create), Duration::from_secs(60));
        assert_eq!(fine.keep_answer(), KEEP_ANSWER);
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
