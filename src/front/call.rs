//! One call from a client, from route to reply. Same dialect on both sides: relay the frames.
//! Otherwise: decode the front dialect into the hub, call the upstream in its dialect, and encode
//! the outcome back — errors included, since the draft answers errors inside an OK reply. Every
//! call ends in exactly one report, from which `observe` logs and counts it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use h2::server::SendResponse;
use h2::RecvStream;
use http::{HeaderValue, Request, Response};

use crate::grpc::{body, frame, status, Code, Status, CONTENT_TYPE};
use crate::metrics::{InFlight, Outcome};
use crate::observe::{self, Report};
use crate::tls::Authorization;
use crate::translate::{self, FrontCall};
use crate::upstream::{Connection, Live};

use super::relay::{relay, reply_status};
use super::router::Route;
use super::Shared;

/// Serves one HTTP/2 stream to its end, on the front connection's `private` upstream
/// connection when it has a working one, else on the shared one.
pub async fn handle(
    shared: &Shared,
    private: Option<Connection>,
    request: Request<RecvStream>,
    mut respond: SendResponse<Bytes>,
) {
    let started = Instant::now();
    let _in_flight = InFlight::start();
    let mut report = Report::new(request.uri().path().to_owned());
    serve(shared, private, request, &mut respond, &mut report).await;
    observe::finish(&report, started.elapsed(), &shared.redactor);
}

async fn serve(
    shared: &Shared,
    private: Option<Connection>,
    request: Request<RecvStream>,
    respond: &mut SendResponse<Bytes>,
    report: &mut Report,
) {
    let Some(route) = shared.router.route(&report.path) else {
        let s = Status::unimplemented(format!(
            "unknown method {}: not a CSI RPC this gateway serves",
            report.path
        ));
        report.fail(&s);
        return reply_status(respond, &s);
    };
    report.route = Some(route);
    // A peer of the appliance listener may call only the CSI services it is allowed.
    if let Some(a) = request.extensions().get::<Arc<Authorization>>() {
        if !a.allows(route.method.service) {
            let s = a.denied(&report.path, route.method.service);
            tracing::warn!(peer = %a.peer, method = %report.path, "call refused: service not allowed for this peer");
            report.fail(&s);
            return reply(
                respond,
                translate::encode_front(route.dialect, route.method.path, Err(s)),
                report,
            );
        }
    }
    let live = match shared.upstream.live() {
        Ok(live) => live,
        Err(s) => {
            report.fail(&s);
            return reply(
                respond,
                translate::encode_front(route.dialect, route.method.path, Err(s)),
                report,
            );
        }
    };
    report.upstream_dialect = Some(live.detected.dialect);
    report.driver = Some(live.driver_name.clone());
    let conn = private
        .filter(|c| !c.is_closed())
        .unwrap_or_else(|| live.conn.clone());
    if route.dialect == live.detected.dialect {
        let began = Instant::now();
        match relay(&conn, request, respond, observe::bodies_enabled()).await {
            Ok(relayed) => {
                report.upstream = Some(began.elapsed());
                report.code = relayed.code;
                report.request = relayed.request;
                report.response = relayed.reply;
            }
            Err(s) => {
                report.fail(&s);
                reply(
                    respond,
                    translate::encode_front(route.dialect, route.method.path, Err(s)),
                    report,
                );
            }
        }
        return;
    }
    if route.method.server_streaming {
        let s = Status::unimplemented(format!(
            "{} streams; streaming RPCs pass through only between v1 peers, and the upstream speaks {}",
            route.method.path, live.detected.dialect
        ));
        report.fail(&s);
        return reply_status(respond, &s);
    }
    let deadline = grpc_timeout(request.headers());
    let encoded = translated(
        shared,
        &live,
        &conn,
        route,
        request.into_body(),
        deadline,
        report,
    )
    .await;
    reply(respond, encoded, report);
}

/// Decodes the front's request, calls the upstream through the hub, and encodes the outcome in
/// the front's dialect. Returns the reply message, or the status to send as the reply.
async fn translated(
    shared: &Shared,
    live: &Live,
    conn: &Connection,
    route: Route,
    mut body: RecvStream,
    deadline: Option<Duration>,
    report: &mut Report,
) -> Result<Vec<u8>, Status> {
    let (dialect, path) = (route.dialect, route.method.path);
    let message = match read_message(&mut body).await {
        Ok(m) => m,
        Err(s) => return refused(report, dialect, path, s),
    };
    report.request = Some(message.clone());
    let request = match translate::decode_front(dialect, path, &message) {
        Ok(FrontCall::Hub(request)) => request,
        Ok(FrontCall::Local(reply)) => {
            report.outcome = Some(Outcome::Ok);
            return Ok(reply);
        }
        Err(s) => return refused(report, dialect, path, s),
    };
    let began = Instant::now();
    let upstream_call = crate::staging::call_upstream(
        shared.staging.as_deref(),
        dialect,
        &live.session,
        conn,
        shared.store.as_deref(),
        request,
    );
    let outcome = match deadline {
        None => upstream_call.await,
        Some(d) => tokio::time::timeout(d, upstream_call)
            .await
            .unwrap_or_else(|_| {
                Err(Status::deadline_exceeded(format!(
                    "deadline of {d:?} exceeded waiting for upstream {}",
                    conn.endpoint()
                )))
            }),
    };
    report.upstream = Some(began.elapsed());
    report.outcome = Some(match &outcome {
        Ok(_) => Outcome::Ok,
        Err(s) if matches!(s.code(), Code::Unavailable | Code::DeadlineExceeded) => {
            Outcome::Unavailable
        }
        Err(_) => Outcome::UpstreamError,
    });
    if let Err(s) = &outcome {
        report.fail(s);
    }
    translate::encode_front(dialect, path, outcome)
}

/// A request the gateway could not translate: answered in the front's dialect.
fn refused(
    report: &mut Report,
    dialect: crate::dialect::Dialect,
    path: &str,
    s: Status,
) -> Result<Vec<u8>, Status> {
    report.fail(&s);
    report.outcome = Some(Outcome::Refused);
    translate::encode_front(dialect, path, Err(s))
}

async fn read_message(body: &mut RecvStream) -> Result<Bytes, Status> {
    let bytes = body::read_to_end(body).await?;
    frame::decode_unary(&bytes).map(Bytes::copy_from_slice)
}

/// Sends an encoded reply, or the status as a trailers-only reply.
fn reply(respond: &mut SendResponse<Bytes>, encoded: Result<Vec<u8>, Status>, report: &mut Report) {
    match encoded {
        Ok(message) => {
            send_message(respond, &message);
            if observe::bodies_enabled() {
                report.response = Some(message.into());
            }
        }
        Err(s) => {
            report.fail(&s);
            reply_status(respond, &s);
        }
    }
}

fn send_message(respond: &mut SendResponse<Bytes>, message: &[u8]) {
    let mut head = Response::new(());
    head.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static(CONTENT_TYPE),
    );
    let Ok(mut stream) = respond.send_response(head, false) else {
        return;
    };
    if stream.send_data(frame::encode(message), false).is_ok() {
        let _ = stream.send_trailers(status::ok_trailers());
    }
}

/// The client's deadline from `grpc-timeout` (e.g. `100m`, `5S`).
fn grpc_timeout(headers: &http::HeaderMap) -> Option<Duration> {
    let v = headers.get("grpc-timeout")?.to_str().ok()?;
    let (digits, unit) = v.split_at(v.len().checked_sub(1)?);
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n.saturating_mul(3600)),
        "M" => Duration::from_secs(n.saturating_mul(60)),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_grpc_timeouts() {
        let mut h = http::HeaderMap::new();
        for (v, d) in [
            ("5S", Duration::from_secs(5)),
            ("100m", Duration::from_millis(100)),
            ("2M", Duration::from_secs(120)),
        ] {
            h.insert("grpc-timeout", HeaderValue::from_static(v));
            assert_eq!(grpc_timeout(&h), Some(d));
        }
        h.insert("grpc-timeout", HeaderValue::from_static("5x"));
        assert_eq!(grpc_timeout(&h), None);
        assert_eq!(grpc_timeout(&http::HeaderMap::new()), None);
    }
}
