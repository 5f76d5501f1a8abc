//! One call's answer, from its request message to its reply, with no transport: same dialect
//! on both sides, the message passed on; otherwise the front dialect decoded into the hub, the
//! plugin called through the one pipeline ([`super::Pipeline`]), and the outcome encoded back —
//! errors included, since the draft answers errors inside an OK reply. The splice calls it for
//! the calls it answers itself (every call of a connection without an upstream connection of
//! its own), and for those it translates on its own upstream connection ([`inline_request`],
//! [`inline_reply`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::call::router::Route;
use crate::call::Shared;
use crate::grpc::{frame, Code, Status};
use crate::metrics::Origin;
use crate::observe::volume_id::volume_id;
use crate::observe::{self, Report};
use crate::translate::{self, CallError, FrontCall};
use crate::upstream::{Connection, Live};

use super::guard::{self, Answer, Entry};
use super::rescue::error_reply;
use super::{checked, paths, protect, Pipeline};

/// Answers a call from its request message, for the splice, which reads requests itself: an
/// unknown method, a call translated for the current upstream, or — when the splice's own
/// upstream connection is gone, or cannot take the call's header block — a same-dialect call
/// relayed on the gateway's shared one.
/// Returns the reply message, or the status to send as the whole reply.
pub async fn answer(
    shared: &Arc<Shared>,
    identical: Identical,
    message: Result<Bytes, Status>,
    deadline: Option<Duration>,
    report: &mut Report,
) -> Result<Vec<u8>, Status> {
    let Some(route) = shared.router.route(&report.path) else {
        // The gateway's own services are streams the splice serves itself (`splice::conn::service`).
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
        return error_reply(Some(route.called()), Origin::Gateway, s, report);
    }
    decoded(shared, identical, &live, route, message, deadline, report).await
}

/// What the gateway does with a call of another dialect whose messages are wire-identical to
/// the plugin's (`Route::identical_path`) when it answers the call itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Identical {
    /// Passed on as it came, on the plugin's path, as a spliced connection relays it: the
    /// calls of a connection that has no upstream connection of its own.
    PassedOn,
    /// Translated in full: a call a spliced connection could not relay (its header block could
    /// not be rewritten, or its upstream connection is gone), which it answers as any call
    /// it translates itself, sending the plugin no field the translation does not know.
    Translated,
}

/// The live upstream, noted in the report — waited for within `deadline` while the gateway is
/// still detecting it at start ([`crate::upstream::Upstream::known`]); without one, the call's
/// answer in its front dialect (UNAVAILABLE naming the upstream).
pub(crate) async fn live_upstream(
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
        Err(s) => Err(error_reply(
            Some(route.called()),
            Origin::Gateway,
            s,
            report,
        )),
    }
}

pub(crate) fn unknown_method(path: &str) -> Status {
    Status::unimplemented(format!(
        "unknown method {path}: not a CSI RPC this gateway serves"
    ))
}

pub(crate) fn streaming_refused(route: Route, live: &Live) -> Status {
    Status::unimplemented(format!(
        "{} streams; streaming RPCs pass through only between v1 peers, and the upstream speaks {}",
        route.method.path, live.detected.dialect
    ))
}

/// A call the gateway reads: a single-flight one joins the identical call running at the
/// plugin or runs as its own task ([`single_flight`]); any other is [`protected`].
/// Returns the reply message, or the status to send as the reply.
pub(crate) async fn decoded(
    shared: &Arc<Shared>,
    identical: Identical,
    live: &Arc<Live>,
    route: Route,
    message: Result<Bytes, Status>,
    deadline: Option<Duration>,
    report: &mut Report,
) -> Result<Vec<u8>, Status> {
    let message = match message {
        Ok(m) => m,
        Err(s) => return error_reply(Some(route.called()), Origin::Client, s, report),
    };
    report.request = Some(message.clone());
    if shared.protection.policy().single_flight(route.method) {
        match guard::Keyed::of(route, &message) {
            Ok(Some(keyed)) => {
                let call = Flight {
                    shared,
                    identical,
                    live,
                    route,
                    message,
                    keyed,
                };
                return single_flight(call, deadline, report).await;
            }
            Ok(None) => {}
            Err(e) => return error_reply(Some(route.called()), Origin::Client, e.into(), report),
        }
    }
    // Listed for `GET /calls` when its method is guarded (a call of another method is here only
    // because its connection has no upstream connection of its own).
    let _listed = shared.protection.policy().method(route.method).map(|_| {
        let volume = volume_id(route.dialect, route.method.path, &message);
        shared
            .protection
            .listed
            .enter(route, volume.unwrap_or_default())
    });
    protected(shared, identical, live, route, message, deadline, report).await
}

/// A single-flight call's parts, for its task.
struct Flight<'a> {
    shared: &'a Arc<Shared>,
    identical: Identical,
    live: &'a Arc<Live>,
    route: Route,
    message: Bytes,
    keyed: guard::Keyed,
}

/// A call of a single-flight method (`call::guard`): the answer of the identical call running
/// at the plugin, or of one that finished after its callers left; ABORTED while a different
/// request runs on its key; else made as a task of its own ([`spawn_flight`]). The caller waits
/// for the answer within its deadline; the call goes on without it.
async fn single_flight(
    call: Flight<'_>,
    deadline: Option<Duration>,
    report: &mut Report,
) -> Result<Vec<u8>, Status> {
    let route = call.route;
    let (deadline, _) = call.shared.protection.deadline(route, deadline);
    let waiter = match call.shared.protection.flights.enter(route, &call.keyed) {
        Entry::Lead { slot, waiter } => {
            spawn_flight(call, slot, report);
            waiter
        }
        Entry::Join(waiter) => waiter,
        Entry::Kept(answer) => return answer.give(report),
        Entry::Busy(s) => {
            protect::count(route, protect::Reason::VolumeBusy);
            return error_reply(Some(route.called()), Origin::Gateway, s, report);
        }
    };
    match wait(waiter, deadline).await {
        Ok(answer) => answer.give(report),
        Err(s) => error_reply(Some(route.called()), Origin::Gateway, s, report),
    }
}

/// The flight's answer, within the caller's deadline.
async fn wait(
    mut waiter: guard::Waiter,
    deadline: Option<Duration>,
) -> Result<Arc<Answer>, Status> {
    let answered = async {
        match waiter.wait_for(Option::is_some).await {
            Ok(a) => a
                .clone()
                .ok_or_else(|| Status::internal("a flight answered nothing")),
            Err(_) => Err(Status::internal("the call's task ended without an answer")),
        }
    };
    let Some(d) = deadline else {
        return answered.await;
    };
    tokio::time::timeout(d, answered).await.unwrap_or_else(|_| {
        Err(Status::deadline_exceeded(format!(
            "deadline of {d:?} exceeded; the call goes on at the plugin, and the same request again gets its answer"
        )))
    })
}

/// Runs a flight's call as a task of its own, so that its callers leaving does not stop it at
/// the plugin: it runs on while a caller waits, then `keep_after_cancel` more; it is logged as
/// it passes `slow_call_log_after`, then every `slow_call_log_every`.
fn spawn_flight(call: Flight<'_>, slot: Arc<guard::Slot>, report: &Report) {
    let Flight {
        shared,
        identical,
        live,
        route,
        message,
        keyed,
    } = call;
    let (shared, live) = (shared.clone(), live.clone());
    let mut own = flight_report(report);
    tokio::spawn(async move {
        let began = Instant::now();
        let policy = shared.protection.policy();
        let keep = policy.keep_after_cancel(route.method);
        let slow = |age: Duration| {
            tracing::warn!(
                target: "csi_gateway::calls",
                method = route.method.method,
                volume = keyed.volume,
                age_seconds = age.as_secs(),
                "call still running at the plugin"
            );
        };
        let call = protected(&shared, identical, &live, route, message, None, &mut own);
        let outcome = guard::outlive(&slot, keep, policy.slow_call_log(), slow, call).await;
        let abandoned = outcome.is_none();
        let reply = outcome.unwrap_or_else(|| {
            let s = Status::deadline_exceeded(format!(
                "{}: no caller waited for {keep:?} (calls.keep_after_cancel): cancelled at the plugin",
                route.method.path
            ));
            error_reply(Some(route.called()), Origin::Gateway, s, &mut own)
        });
        let answer = Arc::new(Answer::new(reply, &own));
        let keep_answer = if abandoned {
            Duration::ZERO
        } else {
            policy.keep_answer()
        };
        if shared
            .protection
            .flights
            .finish(&keyed.key, answer, keep_answer)
        {
            tracing::info!(
                target: "csi_gateway::calls",
                method = route.method.method,
                volume = keyed.volume,
                code = ?own.code,
                seconds = began.elapsed().as_secs_f64(),
                kept_seconds = keep_answer.as_secs(),
                "call finished after its callers left"
            );
        }
    });
}

/// The report a flight's task fills, for its answer: the caller's own is logged by the
/// connection when the caller is answered, or gone with it.
fn flight_report(caller: &Report) -> Report {
    let mut own = Report::new(caller.path.clone());
    own.called = caller.called;
    own.bridge_peer = caller.bridge_peer;
    own.upstream_dialect = caller.upstream_dialect;
    // For `observe::scrub`: the plugin's error messages lose the request's secrets.
    own.request = caller.request.clone();
    own
}

/// A call admitted by the method's protection (queued, with `queue`), given its default
/// deadline when the client set none, then passed on as it is (its messages pass untouched)
/// or translated. Returns the reply message, or the status to send as the reply.
async fn protected(
    shared: &Shared,
    identical: Identical,
    live: &Live,
    route: Route,
    message: Bytes,
    deadline: Option<Duration>,
    report: &mut Report,
) -> Result<Vec<u8>, Status> {
    let conn = &live.conn;
    let protection = &shared.protection;
    let (deadline, by_default) = protection.deadline(route, deadline);
    let _permit = match protection.admit(route, &message, deadline).await {
        Ok(permit) => permit,
        Err(s) => return error_reply(Some(route.called()), Origin::Gateway, s, report),
    };
    let validate = protection.policy().validate(route.method);
    if let Err(refusal) = checked::request(validate, route, &message) {
        return refusal.answer(report);
    }
    let side = side(shared, conn, report);
    let upstream = live.detected.dialect;
    let acts = route
        .hub
        .is_some_and(|m| paths::acts_on(side, route.dialect, upstream, m));
    // Same dialect, or messages wire-identical to the plugin's: passed on as they came (a
    // field neither revision has included), on the plugin's path.
    let untouched = match route.identical_path(upstream) {
        _ if acts => None,
        _ if route.passes_to(upstream) => Some(route.method.path),
        Some(path) if identical == Identical::PassedOn => {
            report.translated = true;
            Some(path)
        }
        _ => None,
    };
    let encoded = if let Some(path) = untouched {
        passed_on(conn, route, path, message, deadline, report).await
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

/// Where the call's CO keeps its node paths, seen from here ([`paths::Side`]).
fn side<'a>(shared: &'a Shared, conn: &Connection, report: &Report) -> paths::Side<'a> {
    let bridged = matches!(conn.endpoint(), crate::endpoint::Endpoint::Tcp(_));
    paths::Side::of(report.bridge_peer, bridged, shared.node_paths.as_deref())
}

/// A call whose messages pass untouched, read by the gateway: passed on to `path` within
/// `deadline`.
async fn passed_on(
    conn: &Connection,
    route: Route,
    path: &str,
    message: Bytes,
    deadline: Option<Duration>,
    report: &mut Report,
) -> Result<Vec<u8>, Status> {
    let began = Instant::now();
    let reply = with_deadline(deadline, conn, conn.unary(path, &message)).await;
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
        Err(e) => error_reply(Some(route.called()), e.origin, e.status, report),
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
    side: paths::Side<'_>,
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
        return error_reply(Some(route.called()), Origin::Client, s, report);
    }
    let request = match translate::front::decode_front_method(dialect, route.method, &message) {
        Ok(FrontCall::Hub(request)) => *request,
        Ok(FrontCall::Local(reply)) => return Ok(reply),
        // A request the gateway could not translate: the client's to fix.
        Err(s) => return error_reply(Some(route.called()), Origin::Client, s, report),
    };
    let began = Instant::now();
    let pipeline = Pipeline {
        side,
        emulation: shared.staging.as_deref(),
        front: dialect,
        session: &live.session,
        upstream: conn,
        store: shared.store.as_deref(),
    };
    let upstream_call = pipeline.call(request);
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
            .or_else(|s| error_reply(Some(route.called()), Origin::Gateway, s, report)),
        Err(e) => {
            // Plugins echo their input in error messages: the client and the log get them
            // without the request's secrets.
            let message = observe::scrub(report, &shared.redactor, e.status.message());
            let s = Status::new(e.code(), message);
            error_reply(Some(route.called()), e.origin, s, report)
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
        Err(s) => {
            return Inline::Answer(error_reply(Some(route.called()), Origin::Client, s, report))
        }
    };
    // Read by `observe::scrub` for the client's error, whatever the log level.
    report.request = Some(Bytes::copy_from_slice(message));
    if let Some(s) = route
        .v0_2
        .then(|| translate::front::v0_2_refusal(route.method.method))
        .flatten()
    {
        return Inline::Answer(error_reply(Some(route.called()), Origin::Client, s, report));
    }
    let request = match translate::front::decode_front_method(route.dialect, route.method, message)
    {
        Ok(FrontCall::Hub(request)) => request,
        Ok(FrontCall::Local(reply)) => return Inline::Answer(Ok(reply)),
        Err(s) => {
            return Inline::Answer(error_reply(Some(route.called()), Origin::Client, s, report))
        }
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
