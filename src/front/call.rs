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
use tokio::sync::watch;

use crate::grpc::{self, frame, status, Code, Status, CONTENT_TYPE};
use crate::metrics::{InFlight, Origin};
use crate::observe::{self, Report};
use crate::target;
use crate::tls::Authorization;
use crate::translate::{self, CallError, FrontCall};
use crate::upstream::{Connection, Live};

use super::held::{ConnectionHeld, Held};
use super::relay::{relay, reply_status};
use super::reply::{error_reply, header_list_too_large};
use super::router::Route;
use super::{checked, protect, services, Shared};

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
    // h2 hands over a request whose header list was over the limit marked, as the splice
    // reads one, so that both answer it alike (see `reply::header_list_too_large`).
    if request
        .extensions()
        .get::<h2::ext::HeaderListTooLarge>()
        .is_some()
    {
        report.route = shared.router.route(&report.path);
        let s = header_list_too_large(shared.limits.max_header_list_size);
        return reply(
            respond,
            error_reply(report.route, Origin::Client, s, report),
            report,
        );
    }
    let Some(route) = shared.router.route(&report.path) else {
        if let Some(service) = shared.services.find(&report.path) {
            report.service = true;
            // Labelled with the driver it serves, as on the splice.
            report.driver = shared.upstream.live().ok().map(|l| l.driver_name.clone());
            // The appliance's peers call the gateway's services only where their rule says.
            if let Err(s) = services::authorize(request.extensions().get(), &report.path) {
                tracing::warn!(method = %report.path, "call refused: service not allowed for this peer");
                report.fail(Origin::Client, &s);
                return reply_status(respond, &s);
            }
            report.code = services::serve(service, request, respond, stopping).await;
            report.origin = Some(services::origin(report.code));
            return;
        }
        let s = unknown_method(&report.path);
        return reply(
            respond,
            error_reply(None, Origin::Client, s, report),
            report,
        );
    };
    report.route = Some(route);
    // A peer of the appliance listener may call only the CSI services it is allowed.
    if let Some(a) = request.extensions().get::<Arc<Authorization>>() {
        report.bridge_peer = true;
        if !a.allows(route.method.service) {
            let s = a.denied(&report.path, route.method.service);
            tracing::warn!(peer = %a.peer, method = %report.path, "call refused: service not allowed for this peer");
            let encoded = error_reply(Some(route), Origin::Client, s, report);
            return reply(respond, encoded, report);
        }
    }
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
    // Same dialect: relayed as it is. Wire-identical messages of another dialect
    // (`super::identical`): relayed the same way, on the upstream's path, and counted and
    // logged as the translated call they stand for.
    let upstream_dialect = live.detected.dialect;
    let rewrite = match route.relays_to(upstream_dialect) {
        true => None,
        false => route.identical_path(upstream_dialect),
    };
    if rewrite.is_some() || route.relays_to(upstream_dialect) {
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
                let encoded = error_reply(Some(route), origin, s, report);
                reply(respond, encoded, report);
            }
        }
        return;
    }
    if route.method.server_streaming {
        let s = streaming_refused(route, &live);
        return reply(
            respond,
            error_reply(Some(route), Origin::Gateway, s, report),
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

/// Answers a call from its request message, for the splice, which reads requests itself: an
/// unknown method, a call translated for the current upstream, or — when the splice's own
/// upstream connection is gone, or cannot take the call's header block — a same-dialect call
/// relayed on the gateway's shared one.
/// Returns the reply message, or the status to send as the whole reply.
pub async fn answer(
    shared: &Shared,
    message: Result<Bytes, Status>,
    deadline: Option<Duration>,
    report: &mut Report,
) -> Result<Vec<u8>, Status> {
    let Some(route) = report.route else {
        // The gateway's own services are streams the splice serves itself (`local_stream`).
        let s = unknown_method(&report.path);
        return error_reply(None, Origin::Client, s, report);
    };
    let live = match live_upstream(shared, route, deadline, report).await {
        Ok(live) => live,
        Err(encoded) => return encoded,
    };
    if route.method.server_streaming {
        let s = if route.dialect == live.detected.dialect {
            Status::unavailable(format!(
                "{} streams, and this connection lost its upstream connection: call again on a new connection",
                route.method.path
            ))
        } else {
            streaming_refused(route, &live)
        };
        return error_reply(Some(route), Origin::Gateway, s, report);
    }
    decoded(shared, &live, &live.conn, route, message, deadline, report).await
}

/// The live upstream, noted in the report — waited for within `deadline` while the gateway is
/// still detecting it at start ([`crate::upstream::Upstream::known`]); without one, the call's
/// answer in its front dialect (UNAVAILABLE naming the upstream).
async fn live_upstream(
    shared: &Shared,
    route: Route,
    deadline: Option<Duration>,
    report: &mut Report,
) -> Result<Arc<Live>, Result<Vec<u8>, Status>> {
    match shared.upstream.known(deadline).await {
        Ok(live) => {
            report.upstream_dialect = Some(live.detected.dialect);
            report.driver = Some(live.driver_name.clone());
            Ok(live)
        }
        Err(s) => Err(error_reply(Some(route), Origin::Gateway, s, report)),
    }
}

fn unknown_method(path: &str) -> Status {
    Status::unimplemented(format!(
        "unknown method {path}: not a CSI RPC this gateway serves"
    ))
}

fn streaming_refused(route: Route, live: &Live) -> Status {
    Status::unimplemented(format!(
        "{} streams; streaming RPCs pass through only between v1 peers, and the upstream speaks {}",
        route.method.path, live.detected.dialect
    ))
}

/// A call the gateway reads: admitted by the method's protection, given its default deadline when the client set none, then passed on as it is (its messages
/// pass untouched) or translated. Returns the reply message, or the status to send as the reply.
async fn decoded(
    shared: &Shared,
    live: &Live,
    conn: &Connection,
    route: Route,
    message: Result<Bytes, Status>,
    deadline: Option<Duration>,
    report: &mut Report,
) -> Result<Vec<u8>, Status> {
    let message = match message {
        Ok(m) => m,
        Err(s) => return error_reply(Some(route), Origin::Client, s, report),
    };
    report.request = Some(message.clone());
    let protection = &shared.protection;
    let _permit = match protection.admit(route, &message) {
        Ok(permit) => permit,
        Err(s) => return error_reply(Some(route), Origin::Gateway, s, report),
    };
    let validate = protection.policy().validate(route.method);
    if let Err(refusal) = checked::request(validate, route, &message) {
        return refusal.answer(report);
    }
    let (deadline, by_default) = protection.deadline(route, deadline);
    let side = side(shared, conn, report);
    let upstream = live.detected.dialect;
    let acts = route
        .hub
        .is_some_and(|m| target::acts_on(side, route.dialect, upstream, m));
    let encoded = if route.passes_to(upstream) && !acts {
        passed_on(conn, route, message, deadline, report).await
    } else {
        translated(shared, side, live, conn, route, message, deadline, report).await
    };
    if by_default && report.code == Code::DeadlineExceeded {
        protect::count(route, protect::Reason::Deadline);
    }
    match &encoded {
        Ok(reply) => match checked::reply(validate, route, reply) {
            Ok(()) => encoded,
            Err(refusal) => refusal.answer(report),
        },
        Err(_) => encoded,
    }
}

/// Where the call's CO keeps its node paths, seen from here ([`target::Side`]).
fn side<'a>(shared: &'a Shared, conn: &Connection, report: &Report) -> target::Side<'a> {
    let bridged = matches!(conn.endpoint(), crate::endpoint::Endpoint::Tcp(_));
    target::Side::of(report.bridge_peer, bridged, shared.node_paths.as_deref())
}

/// A call whose messages pass untouched, read by the gateway: passed on within `deadline`.
async fn passed_on(
    conn: &Connection,
    route: Route,
    message: Bytes,
    deadline: Option<Duration>,
    report: &mut Report,
) -> Result<Vec<u8>, Status> {
    let began = Instant::now();
    let reply = with_deadline(deadline, conn, conn.unary(route.method.path, &message)).await;
    report.upstream = Some(began.elapsed());
    match reply {
        Ok(b) => Ok(b.to_vec()),
        // The upstream's own error status reaches the client as it sent it, as on a relayed
        // call; the gateway's failure to carry the call is answered as everywhere.
        Err(CallError {
            origin: Origin::Upstream,
            status,
        }) => {
            report.fail(Origin::Upstream, &status);
            Err(status)
        }
        Err(e) => error_reply(Some(route), e.origin, e.status, report),
    }
}

/// `call` within `deadline`, if there is one: past it, DEADLINE_EXCEEDED naming the upstream,
/// the gateway's.
async fn with_deadline<T>(
    deadline: Option<Duration>,
    conn: &Connection,
    call: impl std::future::Future<Output = Result<T, CallError>>,
) -> Result<T, CallError> {
    let Some(d) = deadline else {
        return call.await;
    };
    tokio::time::timeout(d, call).await.unwrap_or_else(|_| {
        Err(Status::deadline_exceeded(format!(
            "deadline of {d:?} exceeded waiting for upstream {}",
            conn.endpoint()
        ))
        .into())
    })
}

/// Decodes the front's request, calls the upstream through the hub, and encodes the outcome in
/// the front's dialect. Returns the reply message, or the status to send as the reply.
#[allow(clippy::too_many_arguments)] // one call's parts, passed down as they are
async fn translated(
    shared: &Shared,
    side: target::Side<'_>,
    live: &Live,
    conn: &Connection,
    route: Route,
    message: Bytes,
    deadline: Option<Duration>,
    report: &mut Report,
) -> Result<Vec<u8>, Status> {
    let dialect = route.dialect;
    report.translated = true;
    if let Some(s) = route
        .v0_2
        .then(|| translate::front::v0_2_refusal(route.method.method))
        .flatten()
    {
        return error_reply(Some(route), Origin::Client, s, report);
    }
    let request = match translate::front::decode_front_method(dialect, route.method, &message) {
        Ok(FrontCall::Hub(request)) => *request,
        Ok(FrontCall::Local(reply)) => return Ok(reply),
        // A request the gateway could not translate: the client's to fix.
        Err(s) => return error_reply(Some(route), Origin::Client, s, report),
    };
    let began = Instant::now();
    let upstream_call = target::call_upstream(
        side,
        shared.staging.as_deref(),
        dialect,
        &live.session,
        conn,
        shared.store.as_deref(),
        request,
    );
    let outcome = with_deadline(deadline, conn, upstream_call).await;
    report.upstream = Some(began.elapsed());
    front_reply(shared, route, outcome, report)
}

/// A translated call's hub outcome as its front's reply; a failure is noted as whoever's it is.
fn front_reply(
    shared: &Shared,
    route: Route,
    outcome: Result<crate::hub::Response, CallError>,
    report: &mut Report,
) -> Result<Vec<u8>, Status> {
    match outcome {
        Ok(response) => encode_reply(route, Ok(response))
            .or_else(|s| error_reply(Some(route), Origin::Gateway, s, report)),
        Err(e) => {
            // Plugins echo their input in error messages: the client and the log get them
            // without the request's secrets.
            let message = observe::scrub(report, &shared.redactor, e.status.message());
            let s = Status::new(e.code(), message);
            error_reply(Some(route), e.origin, s, report)
        }
    }
}

/// What becomes of a call the splice translates on a stream of its own ([`Route::inline_call`]),
/// once its request message is in.
#[derive(Debug)]
pub enum Inline {
    /// The hub request, and the message to send the plugin on `sent`, the path
    /// its head named; the reply is [`inline_reply`]'s to translate.
    Call(Box<crate::hub::Request>, Vec<u8>),
    /// Answered without the plugin: refused, or the gateway's own answer.
    Answer(Result<Vec<u8>, Status>),
    /// Not the one call `sent` named, after all: the call takes [`answer`]'s path.
    Fallback,
}

/// A translated call's request (the client's DATA, gRPC-framed), for the plugin path `sent`.
pub fn inline_request(
    live: &Live,
    route: Route,
    sent: &'static str,
    body: &[u8],
    report: &mut Report,
) -> Inline {
    report.translated = true;
    let message = match frame::decode_unary(body) {
        Ok(m) => m,
        Err(s) => return Inline::Answer(error_reply(Some(route), Origin::Client, s, report)),
    };
    // Read by `observe::scrub` for the client's error, whatever the log level.
    report.request = Some(Bytes::copy_from_slice(message));
    if let Some(s) = route
        .v0_2
        .then(|| translate::front::v0_2_refusal(route.method.method))
        .flatten()
    {
        return Inline::Answer(error_reply(Some(route), Origin::Client, s, report));
    }
    let request = match translate::front::decode_front_method(route.dialect, route.method, message)
    {
        Ok(FrontCall::Hub(request)) => request,
        Ok(FrontCall::Local(reply)) => return Inline::Answer(Ok(reply)),
        Err(s) => return Inline::Answer(error_reply(Some(route), Origin::Client, s, report)),
    };
    match translate::upstream::single_call(route.dialect, &live.session, &request) {
        Some((path, message)) if path == sent => Inline::Call(request, message),
        _ => Inline::Fallback,
    }
}

/// The reply to an [`Inline::Call`], from the plugin's reply message or the call's failure
/// (its error status, marked as the plugin's, or the splice's own).
pub fn inline_reply(
    shared: &Shared,
    live: &Live,
    route: Route,
    request: &crate::hub::Request,
    reply: Result<&[u8], CallError>,
    report: &mut Report,
) -> Result<Vec<u8>, Status> {
    let outcome = translate::upstream::single_reply(&live.session, route.dialect, request, reply);
    front_reply(shared, route, outcome, report)
}

/// A hub reply in the front's dialect; a v0.2 client's is filtered to what v0.2 has.
fn encode_reply(
    route: Route,
    outcome: Result<crate::hub::Response, Status>,
) -> Result<Vec<u8>, Status> {
    if route.v0_2 {
        return translate::front::encode_front_v0_2(route.method.path, outcome);
    }
    translate::front::encode_front_method(route.dialect, route.method, outcome)
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
