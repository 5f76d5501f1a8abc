//! The `h2` server front's streams: one call on a connection the gateway terminates (with
//! `--splice=false`, or when no plugin could be dialled at accept), read from `h2` and answered
//! through the call layer ([`crate::call::plan`], [`crate::call::answer`]). The splice is the
//! other connection path; issue 42 retires this one.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use h2::server::SendResponse;
use h2::RecvStream;
use http::{HeaderValue, Request, Response};
use tokio::sync::watch;

use crate::call::answer::{decoded, live_upstream, streaming_refused, unknown_method};
use crate::call::plan::{self, Admission, Plan};
use crate::call::rescue::error_reply;
use crate::grpc::{self, frame, status, Code, Status, CONTENT_TYPE};
use crate::metrics::{InFlight, Origin};
use crate::observe::{self, Report};
use crate::tls::Authorization;
use crate::upstream::Connection;

use super::held::{ConnectionHeld, Held};
use super::relay::{relay, reply_status};
use super::{services, Shared};

/// Serves one HTTP/2 stream to its end, on the front connection's `private` upstream
/// connection when it has a working one, else on the shared one. `stopping` turns true when
/// the gateway shuts down (streams of its own services end then).
pub async fn handle(
    shared: &Shared,
    private: Option<Connection>,
    request: Request<RecvStream>,
    mut respond: SendResponse<Bytes>,
    stopping: watch::Receiver<bool>,
) {
    let started = Instant::now();
    let _in_flight = InFlight::start();
    let mut report = Report::new(request.uri().path().to_owned());
    serve(
        shared,
        private,
        request,
        &mut respond,
        &mut report,
        stopping,
    )
    .await;
    observe::finish(&report, started.elapsed(), &shared.redactor);
}

async fn serve(
    shared: &Shared,
    private: Option<Connection>,
    request: Request<RecvStream>,
    respond: &mut SendResponse<Bytes>,
    report: &mut Report,
    stopping: watch::Receiver<bool>,
) {
    // h2 hands over a request whose header list was over the limit marked (it stops counting
    // there), as the splice reads one, so that both answer it alike (`plan::admit`).
    let too_large = request
        .extensions()
        .get::<h2::ext::HeaderListTooLarge>()
        .is_some();
    let authorization = request.extensions().get::<Arc<Authorization>>().cloned();
    report.bridge_peer = authorization.is_some();
    let head = plan::Head {
        path: &report.path,
        header_list: if too_large { usize::MAX } else { 0 },
        authorization: authorization.as_ref(),
    };
    let route = match plan::admit(shared, &head) {
        Admission::Call(route) => route,
        Admission::Refused(route, s) => {
            report.called = route.map(|r| r.called());
            let encoded = error_reply(report.called, Origin::Client, s, report);
            return reply(respond, encoded, report);
        }
        Admission::Unknown => {
            let s = unknown_method(&report.path);
            return reply(
                respond,
                error_reply(None, Origin::Client, s, report),
                report,
            );
        }
        Admission::Service(service) => {
            report.service = Some(services::method_name(&report.path));
            // Labelled with the driver it serves, as on the splice.
            report.driver = shared.upstream.live().ok().map(|l| l.driver_name.clone());
            report.code = services::serve(&service, request, respond, stopping).await;
            report.origin = Some(services::origin(report.code));
            return;
        }
    };
    report.called = Some(route.called());
    let deadline = request
        .headers()
        .get("grpc-timeout")
        .and_then(|v| crate::grpc::parse_timeout(v.as_bytes()));
    let live = match live_upstream(shared, route, deadline, report).await {
        Ok(live) => live,
        Err(encoded) => return reply(respond, encoded, report),
    };
    let conn = private
        .filter(|c| !c.is_closed())
        .unwrap_or_else(|| live.conn.clone());
    let requires_staging = live.session.requires_staging;
    if let Plan::Relay { rewrite } =
        plan::plan(&route, live.detected.dialect, requires_staging, true)
    {
        let began = Instant::now();
        report.translated = rewrite.is_some();
        match relay(&conn, request, respond, observe::bodies_enabled(), rewrite).await {
            Ok(relayed) => {
                report.upstream = Some(began.elapsed());
                report.code = relayed.code;
                report.request = relayed.request;
                report.response = relayed.reply;
                if let Some(s) = relayed.broken {
                    report.fail(Origin::Gateway, &s);
                } else if relayed.code != Code::Ok {
                    // The plugin's status, relayed as it came; a translated call's message
                    // is noted too, as its translation reports it.
                    report.origin = Some(Origin::Upstream);
                    if rewrite.is_some() {
                        report.message = Some(relayed.message.unwrap_or_default());
                    }
                }
            }
            Err(s) => {
                // CANCELLED: the client reset the stream (see `relay`).
                let origin = match s.code() {
                    Code::Cancelled => Origin::Client,
                    _ => Origin::Gateway,
                };
                let encoded = error_reply(Some(route.called()), origin, s, report);
                reply(respond, encoded, report);
            }
        }
        return;
    }
    if route.method.server_streaming {
        let s = streaming_refused(route, &live);
        return reply(
            respond,
            error_reply(Some(route.called()), Origin::Gateway, s, report),
            report,
        );
    }
    let deadline = request
        .headers()
        .get("grpc-timeout")
        .and_then(|v| grpc::parse_timeout(v.as_bytes()));
    // Held until the call ends: its bytes stay on the budget, as on the splice.
    let connection = request.extensions().get::<ConnectionHeld>().cloned();
    let mut body = Held::new(&shared.buffered, connection, request.into_body());
    let message = read_message(&mut body).await;
    let call = decoded(shared, &live, &conn, route, message, deadline, report);
    let Some(encoded) = unless_reset(respond, call).await else {
        return report.fail(
            Origin::Client,
            &Status::cancelled("the client reset the stream"),
        );
    };
    reply(respond, encoded, report);
}

/// Runs `work` unless the client resets the stream first: then `work` is dropped, and with it
/// the upstream call it made (h2 resets a stream whose handles are all dropped).
pub(crate) async fn unless_reset<F: std::future::Future>(
    respond: &mut SendResponse<Bytes>,
    work: F,
) -> Option<F::Output> {
    tokio::select! {
        out = work => Some(out),
        _ = std::future::poll_fn(|cx| respond.poll_reset(cx)) => None,
    }
}

async fn read_message(body: &mut Held<'_>) -> Result<Bytes, Status> {
    let bytes = body.read_to_end().await?;
    frame::decode_unary(&bytes).map(Bytes::copy_from_slice)
}

/// Sends an encoded reply, or the status as a trailers-only reply (already noted in the report
/// by whoever produced it).
fn reply(respond: &mut SendResponse<Bytes>, encoded: Result<Vec<u8>, Status>, report: &mut Report) {
    match encoded {
        Ok(message) => {
            send_message(respond, &message);
            if observe::bodies_enabled() {
                report.response = Some(message.into());
            }
        }
        Err(s) => reply_status(respond, &s),
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
