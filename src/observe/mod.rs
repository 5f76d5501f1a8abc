//! What each call leaves behind: one log line (method, dialects, volume id, duration, code and,
//! for a failure, its origin; Probe quieter), the bodies at debug level with every secret
//! stripped (a reply's too, where it quotes the request's secret values), and the metrics. All
//! of it is produced here, from one report per call, so no other code logs request contents.

pub mod klog_json;
/// What each dialect holds secret, and where a call names its volume: dialect knowledge, the
/// translate crate's.
pub use csi_gateway_translate::{redact, volume_id};

use std::time::Duration;

use bytes::Bytes;
use tracing::Level;

use crate::dialect::Dialect;
use crate::dialect::MethodInfo;
use crate::grpc::Code;
use crate::metrics::{self, CallMetrics, Origin};

pub use redact::Redactor;

/// What a call is, as its log line and metrics name it: the dialect the client spoke and the
/// method it called (what the route table found for its path).
#[derive(Clone, Copy, Debug)]
pub struct Called {
    pub dialect: Dialect,
    pub method: &'static MethodInfo,
}

/// How one call went, filled in along its path.
pub struct Report {
    pub path: String,
    /// `None`: a path no dialect has (or one of the gateway's own services).
    pub called: Option<Called>,
    pub upstream_dialect: Option<Dialect>,
    pub driver: Option<std::sync::Arc<str>>,
    pub code: Code,
    /// The error message, when the call failed.
    pub message: Option<String>,
    pub upstream: Option<Duration>,
    /// The call was translated (not relayed between peers of one dialect).
    pub translated: bool,
    /// Whose failure the call is, once it failed (see [`Report::origin`]).
    pub origin: Option<Origin>,
    /// A call to one of the gateway's own services (reflection, health), not to the plugin:
    /// its method's path as the metrics label it (`unknown` for a method it does not have).
    pub service: Option<&'static str>,
    /// A call of a peer on the appliance listener (a node gateway on another host).
    pub bridge_peer: bool,
    /// The request and reply messages in the front's dialect, when captured.
    pub request: Option<Bytes>,
    pub response: Option<Bytes>,
}

impl Report {
    pub fn new(path: String) -> Report {
        Report {
            path,
            called: None,
            upstream_dialect: None,
            driver: None,
            code: Code::Ok,
            message: None,
            upstream: None,
            translated: false,
            origin: None,
            service: None,
            bridge_peer: false,
            request: None,
            response: None,
        }
    }

    /// Notes the call's failure and whose it is.
    pub fn fail(&mut self, origin: Origin, status: &tonic::Status) {
        self.code = status.code();
        self.message = Some(status.message().to_string());
        self.origin = Some(origin);
    }

    /// Whose failure the call is, as noted where the failure was made (a relayed call's
    /// status, where it is read, as the plugin's); `None` for a success. A failure noted
    /// without one — none should be — is the gateway's: no party's status it passed on.
    pub fn origin(&self) -> Option<Origin> {
        match self.code {
            Code::Ok => None,
            _ => Some(self.origin.unwrap_or(Origin::Gateway)),
        }
    }
}

/// True when bodies are logged, so callers capture them only then.
pub fn bodies_enabled() -> bool {
    tracing::enabled!(target: "csi_gateway::rpc", Level::DEBUG)
}

/// Whether a call's request message is read at all: for the volume id of its info line, or
/// for the bodies at debug. Where neither is logged, a relayed request need not be copied.
pub fn request_wanted() -> bool {
    tracing::enabled!(target: "csi_gateway::rpc", Level::INFO)
}

/// Logs and counts a finished call.
pub fn finish(report: &Report, total: Duration, redactor: &Redactor) {
    let method = match report.called {
        Some(r) => r.method.path,
        None => report.service.unwrap_or("unknown"),
    };
    let driver = report.driver.as_deref().unwrap_or(metrics::UNKNOWN_DRIVER);
    let translation = match (report.called, report.upstream_dialect, report.translated) {
        (Some(r), Some(u), true) => Some((r.dialect.name(), u.name())),
        _ => None,
    };
    metrics::record_call(&CallMetrics {
        driver,
        method,
        code: report.code,
        total,
        upstream: report.upstream,
        translation,
        origin: report.origin(),
        service: report.service.is_some(),
    });
    let error = report
        .message
        .as_deref()
        .map(|m| scrub(report, redactor, m));
    log_line(report, method, total, error.as_deref());
    if let (Some(route), true) = (report.called, bodies_enabled()) {
        let draft = draft_upstream(report);
        let request = report
            .request
            .as_ref()
            .map(|b| redactor.json(route.dialect, route.method.request, b, draft));
        // A reply can quote the request (a draft plugin's in-band error echoes the handle
        // metadata it was sent): its text loses the request's secret values too.
        let response = report.response.as_ref().map(|b| {
            let json = redactor.json(route.dialect, route.method.response, b, draft);
            scrub_json(report, redactor, &json)
        });
        tracing::debug!(target: "csi_gateway::rpc", method, request = request.as_deref(), response = response.as_deref(), "bodies");
    }
}

/// In front of a draft plugin, volume contexts are its VolumeHandle metadata.
fn draft_upstream(report: &Report) -> bool {
    report.upstream_dialect == Some(Dialect::V0_1Oneof)
}

/// `message` (an error, often the plugin's own words) without the secret values of the call's
/// request: plugins echo their input.
pub fn scrub(report: &Report, redactor: &Redactor, message: &str) -> String {
    Redactor::scrub(message, &request_secrets(report, redactor))
}

/// [`scrub`] for a body rendered as JSON, where the values appear escaped.
fn scrub_json(report: &Report, redactor: &Redactor, json: &str) -> String {
    let secrets = request_secrets(report, redactor);
    let escaped: Vec<String> = secrets
        .iter()
        .map(|s| serde_json::Value::from(s.as_str()).to_string())
        .map(|quoted| quoted[1..quoted.len() - 1].to_string())
        .chain(secrets.iter().cloned())
        .collect();
    Redactor::scrub(json, &escaped)
}

/// The values of the call's request that must not be repeated in the log (none when the
/// request was not captured).
fn request_secrets(report: &Report, redactor: &Redactor) -> Vec<String> {
    let (Some(route), Some(request)) = (report.called, report.request.as_ref()) else {
        return Vec::new();
    };
    redactor.secret_values(
        route.dialect,
        route.method.request,
        request,
        draft_upstream(report),
    )
}

fn volume_id_of(report: &Report) -> Option<String> {
    let (route, body) = (report.called?, report.request.as_ref()?);
    volume_id::volume_id(route.dialect, route.method.path, body)
}

fn log_line(report: &Report, method: &str, total: Duration, error: Option<&str>) {
    let front = report.called.map(|r| r.dialect.name());
    let upstream = report.upstream_dialect.map(Dialect::name);
    let code = metrics::code_name(report.code);
    let micros = total.as_micros() as u64;
    let origin = report.origin().map(Origin::name);
    // Probes arrive every few seconds from every node: keep them out of the info log. (An
    // equality test: `contains` slid a five-byte compare along every other method's name,
    // ~600 instructions a call; callgrind.)
    let probe = report.called.is_some_and(|r| r.method.method == "Probe");
    if probe {
        tracing::debug!(target: "csi_gateway::rpc", method, front, upstream, code, origin, micros, error, "rpc");
    } else {
        // The volume id is read from the request only when this line is actually emitted.
        tracing::info!(target: "csi_gateway::rpc", method, front, upstream, volume_id = volume_id_of(report), code, origin, micros, error, "rpc");
    }
}
