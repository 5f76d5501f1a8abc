//! Spec validation applied to one call (`[calls] validate`): the request as the client sent it,
//! the reply as the client would receive it, both in the client's dialect. `warn` logs the
//! violated rules and counts them; `enforce` also answers the call itself — INVALID_ARGUMENT
//! for a bad request (a draft client: its MISSING_REQUIRED_FIELD error when a field is
//! missing), INTERNAL naming the rule for a bad reply, so a legacy plugin's malformed answer
//! never reaches the orchestrator unnoticed. Messages name fields and sizes, never values.

use metrics::counter;

use crate::dialect::Dialect;
use crate::grpc::Status;
use crate::metrics::Origin;
use crate::observe::Report;
use crate::translate;
use crate::translate::errors::general_error;
use crate::validate::{self, Violation};

use super::rescue::error_reply;
use crate::call::router::Route;
use crate::config::calls::Validate;

pub const FAILURES: &str = "csi_gateway_validation_failures_total";

/// The gateway's answer to a call that failed validation under `enforce`.
pub struct Refusal {
    route: Route,
    origin: Origin,
    status: Status,
    /// The draft's own answer, where it has one (MISSING_REQUIRED_FIELD).
    draft: Option<Vec<u8>>,
}

impl Refusal {
    /// The answer to send, noted in the report.
    pub fn answer(self, report: &mut Report) -> Result<Vec<u8>, Status> {
        match self.draft {
            Some(reply) => {
                report.fail(self.origin, &self.status);
                Ok(reply)
            }
            None => error_reply(Some(self.route.called()), self.origin, self.status, report),
        }
    }
}

/// Checks a request; `Err` is the answer under `enforce`.
pub fn request(mode: Validate, route: Route, message: &[u8]) -> Result<(), Refusal> {
    let violations = violations(mode, route, route.method.request, message, "request");
    if violations.is_empty() || mode != Validate::Enforce {
        return Ok(());
    }
    let path = route.method.path;
    let status = Status::invalid_argument(format!(
        "{path}: the request violates the CSI spec: {}",
        validate::describe(&violations)
    ));
    let missing = violations.iter().any(Violation::is_missing);
    let draft = (route.dialect == Dialect::V0_1Oneof && missing).then(|| {
        use crate::dialect::proto::v0_1_oneof::error::general_error::GeneralErrorCode;
        let e = general_error(
            GeneralErrorCode::MissingRequiredField,
            true,
            status.message().to_string(),
        );
        translate::v0_1_oneof::error_reply(&e)
    });
    Err(Refusal {
        route,
        origin: Origin::Client,
        status,
        draft,
    })
}

/// Checks a reply; `Err` is the answer under `enforce`.
pub fn reply(mode: Validate, route: Route, message: &[u8]) -> Result<(), Refusal> {
    let violations = violations(mode, route, route.method.response, message, "reply");
    if violations.is_empty() || mode != Validate::Enforce {
        return Ok(());
    }
    let path = route.method.path;
    let status = Status::internal(format!(
        "{path}: the plugin's reply violates the CSI spec: {}",
        validate::describe(&violations)
    ));
    Err(Refusal {
        route,
        origin: Origin::Upstream,
        status,
        draft: None,
    })
}

/// The violations of `message` (none when validation is off), logged and counted.
fn violations(
    mode: Validate,
    route: Route,
    message_name: &str,
    message: &[u8],
    direction: &'static str,
) -> Vec<Violation> {
    if mode == Validate::Off {
        return Vec::new();
    }
    let violations = validate::check(route.dialect, message_name, message);
    if !violations.is_empty() {
        let method = route.method.path;
        counter!(FAILURES, "method_name" => method, "direction" => direction).increment(1);
        tracing::warn!(
            method,
            direction,
            front = route.dialect.name(),
            violations = %validate::describe(&violations),
            "message violates the CSI spec"
        );
    }
    violations
}
