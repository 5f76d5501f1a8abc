//! One call from a client, from route to reply. Same dialect on both sides: relay the frames.
//! Otherwise: decode the front dialect into the hub, call the upstream in its dialect, and encode
//! the outcome back — errors included, since the draft answers errors inside an OK reply.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use h2::server::SendResponse;
use h2::RecvStream;
use http::{HeaderValue, Request, Response};

use crate::dialect::Dialect;
use crate::grpc::{body, frame, status, Status, CONTENT_TYPE};
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
    let path = request.uri().path().to_owned();
    let Some(route) = shared.router.route(&path) else {
        let s = Status::unimplemented(format!(
            "unknown method {path}: not a CSI RPC this gateway serves"
        ));
        return reply_status(&mut respond, &s);
    };
    if let Some(a) = request.extensions().get::<Arc<Authorization>>() {
        if !a.allows(route.method.service) {
            let s = a.denied(&path, route.method.service);
            tracing::warn!(peer = %a.peer, method = %path, "call refused: service not allowed for this peer");
            // The draft dialect answers errors inside an OK reply; the others in the status.
            return match route.dialect {
                Dialect::V0_1Oneof => reply(
                    &mut respond,
                    translate::encode_front(route.dialect, &path, Err(s)),
                ),
                _ => reply_status(&mut respond, &s),
            };
        }
    }
    let live = match shared.upstream.live() {
        Ok(live) => live,
        Err(s) => {
            return reply(
                &mut respond,
                translate::encode_front(route.dialect, &path, Err(s)),
            )
        }
    };
    let conn = private
        .filter(|c| !c.is_closed())
        .unwrap_or_else(|| live.conn.clone());
    if route.dialect == live.detected.dialect {
        if let Err(s) = relay(&conn, request, &mut respond).await {
            reply(
                &mut respond,
                translate::encode_front(route.dialect, &path, Err(s)),
            );
        }
        return;
    }
    if route.method.server_streaming {
        let s = Status::unimplemented(format!(
            "{path} streams; streaming RPCs pass through only between v1 peers, and the upstream speaks {}",
            live.detected.dialect
        ));
        return reply_status(&mut respond, &s);
    }
    let deadline = grpc_timeout(request.headers());
    let encoded = translated(shared, &live, &conn, route, request.into_body(), deadline).await;
    reply(&mut respond, encoded);
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
) -> Result<Vec<u8>, Status> {
    let (dialect, path) = (route.dialect, route.method.path);
    let call = match read_message(&mut body)
        .await
        .and_then(|m| translate::decode_front(dialect, path, &m))
    {
        Ok(call) => call,
        Err(s) => return translate::encode_front(dialect, path, Err(s)),
    };
    let request = match call {
        FrontCall::Local(reply) => return Ok(reply),
        FrontCall::Hub(request) => request,
    };
    let upstream_call =
        translate::call_upstream(&live.session, conn, shared.store.as_deref(), request);
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
    translate::encode_front(dialect, path, outcome)
}

async fn read_message(body: &mut RecvStream) -> Result<Bytes, Status> {
    let bytes = body::read_to_end(body).await?;
    frame::decode_unary(&bytes).map(Bytes::copy_from_slice)
}

/// Sends an encoded reply, or the status as a trailers-only reply.
fn reply(respond: &mut SendResponse<Bytes>, encoded: Result<Vec<u8>, Status>) {
    match encoded {
        Ok(message) => send_message(respond, &message),
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
