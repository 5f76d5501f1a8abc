//! The fast path: front and upstream speak the same dialect, so the call is relayed frame by
//! frame — headers, data, trailers — without decoding. Streaming RPCs relay the same way.

use bytes::Bytes;
use h2::server::SendResponse;
use h2::{RecvStream, SendStream};
use http::{HeaderMap, Request, Response};

use crate::grpc::{body::h2_status, status, Status};
use crate::upstream::Connection;

/// Relays one call to `upstream`. Errors before the reply headers went out come back as a
/// status for the caller to send; later ones reset the stream.
pub async fn relay(
    upstream: &Connection,
    request: Request<RecvStream>,
    respond: &mut SendResponse<Bytes>,
) -> Result<(), Status> {
    let (parts, client_body) = request.into_parts();
    let mut forwarded = Request::new(());
    *forwarded.method_mut() = parts.method;
    *forwarded.uri_mut() = parts.uri;
    *forwarded.headers_mut() = end_to_end(parts.headers);
    let end = client_body.is_end_stream();
    let (response, upstream_send) = upstream.open(forwarded, end).await?;

    let upload = async {
        if !end {
            pump(client_body, upstream_send).await;
        }
    };
    let download = async {
        let response = response
            .await
            .map_err(|e| unreachable_upstream(upstream, &e))?;
        let (parts, upstream_body) = response.into_parts();
        let mut reply = Response::new(());
        *reply.status_mut() = parts.status;
        *reply.headers_mut() = end_to_end(parts.headers);
        let end = upstream_body.is_end_stream();
        let client_send = respond
            .send_response(reply, end)
            .map_err(|e| h2_status(&e, "replying"))?;
        if !end {
            pump(upstream_body, client_send).await;
        }
        Ok(())
    };
    let ((), result) = tokio::join!(upload, download);
    result
}

/// Copies data then trailers from `from` to `to`, moving only as much as the receiver's window
/// allows and returning flow-control credit only once the data is passed on.
async fn pump(mut from: RecvStream, mut to: SendStream<Bytes>) {
    while let Some(chunk) = from.data().await {
        let Ok(mut chunk) = chunk else {
            to.send_reset(h2::Reason::CANCEL);
            return;
        };
        let len = chunk.len();
        // A unary body is one DATA frame ending the stream: forward it as one frame too.
        let last = from.is_end_stream();
        while !chunk.is_empty() {
            to.reserve_capacity(chunk.len());
            let granted = match std::future::poll_fn(|cx| to.poll_capacity(cx)).await {
                Some(Ok(n)) if n > 0 => n,
                Some(Ok(_)) => continue,
                _ => return,
            };
            let piece = chunk.split_to(granted.min(chunk.len()));
            if to.send_data(piece, last && chunk.is_empty()).is_err() {
                return;
            }
        }
        let _ = from.flow_control().release_capacity(len);
        if last {
            return;
        }
    }
    match from.trailers().await {
        Ok(Some(trailers)) => {
            let _ = to.send_trailers(trailers);
        }
        Ok(None) => {
            let _ = to.send_data(Bytes::new(), true);
        }
        Err(_) => to.send_reset(h2::Reason::CANCEL),
    }
}

/// Drops the headers that describe one hop rather than the call.
fn end_to_end(mut headers: HeaderMap) -> HeaderMap {
    for name in [
        "connection",
        "keep-alive",
        "proxy-connection",
        "transfer-encoding",
        "upgrade",
        "host",
    ] {
        headers.remove(name);
    }
    headers
}

fn unreachable_upstream(upstream: &Connection, e: &h2::Error) -> Status {
    let s = h2_status(e, "waiting for the upstream reply");
    Status::new(
        s.code(),
        format!("upstream {}: {}", upstream.endpoint(), s.message()),
    )
}

/// A status as the complete reply, for failures before any reply went out.
pub fn reply_status(respond: &mut SendResponse<Bytes>, s: &Status) {
    let _ = respond.send_response(status::trailers_only(s), true);
}
