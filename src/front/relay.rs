//! Same dialect on a terminated connection (TCP upstream, the appliance listener, or
//! `--splice=false`; a spliced connection never gets here, see `crate::splice`): front and
//! upstream speak the same dialect, so the call is relayed frame by frame — headers, data,
//! trailers — without decoding. Streaming RPCs relay the same way. The
//! relay only peeks: it keeps the request's first frame (for the log line's volume id) and reads
//! the final `grpc-status` (for the metrics). An upstream that breaks off a reply it has begun
//! leaves the client trailers with UNAVAILABLE naming it, as on a spliced connection.

use bytes::Bytes;
use h2::server::SendResponse;
use h2::{RecvStream, SendStream};
use http::{HeaderMap, Request, Response};

use crate::grpc::{body::h2_status, frame, status, Code, Status};
use crate::upstream::Connection;

use super::terminated::unless_reset;

/// What the relay saw of a call that went through.
pub struct Relayed {
    /// The upstream's final status code.
    pub code: Code,
    /// The upstream's error message, when it failed and sent one.
    pub message: Option<String>,
    /// The request's first message (gRPC frame header removed), if it arrived whole.
    pub request: Option<Bytes>,
    /// The reply's first message, when `keep_reply` asked for it.
    pub reply: Option<Bytes>,
    /// The upstream broke off its reply; the client got this status in the trailers.
    pub broken: Option<Status>,
}

/// Relays one call to `upstream`, on `path` when given (a wire-identical call of another
/// dialect, `super::identical`), else on the client's own. Errors before the reply headers
/// went out come back as a status for the caller to send; later ones reset the stream.
pub async fn relay(
    upstream: &Connection,
    request: Request<RecvStream>,
    respond: &mut SendResponse<Bytes>,
    keep_reply: bool,
    path: Option<&'static str>,
) -> Result<Relayed, Status> {
    let (parts, client_body) = request.into_parts();
    let mut forwarded = Request::new(());
    *forwarded.method_mut() = parts.method;
    *forwarded.uri_mut() = match path {
        Some(path) => http::Uri::from_static(path),
        None => parts.uri,
    };
    *forwarded.headers_mut() = end_to_end(parts.headers);
    let end = client_body.is_end_stream();
    let (response, upstream_send) = upstream.open(forwarded, end).await?;

    let upload = async {
        if end {
            return Pumped::default();
        }
        let mut upstream_send = upstream_send;
        let pumped = pump(client_body, &mut upstream_send, true, true).await;
        if pumped.broken.is_some() {
            upstream_send.send_reset(h2::Reason::CANCEL);
        }
        pumped
    };
    let download = async {
        // A client that resets the stream cancels the upstream's: dropping the response
        // future and the upload resets it there.
        let response = unless_reset(respond, response)
            .await
            .ok_or_else(|| Status::cancelled("the client reset the stream"))?
            .map_err(|e| unreachable_upstream(upstream, &e))?;
        let (parts, upstream_body) = response.into_parts();
        let headers_status = status::from_headers(&parts.headers);
        let mut reply = Response::new(());
        *reply.status_mut() = parts.status;
        *reply.headers_mut() = end_to_end(parts.headers);
        let end = upstream_body.is_end_stream();
        let client_send = respond
            .send_response(reply, end)
            .map_err(|e| h2_status(&e, "replying"))?;
        if end {
            return Ok::<_, Status>(Pumped {
                code: headers_status.as_ref().map(|s| s.code()),
                status: headers_status,
                ..Pumped::default()
            });
        }
        let mut client_send = client_send;
        let mut pumped = pump(upstream_body, &mut client_send, keep_reply, false).await;
        if let Some(e) = &pumped.broken {
            let s = unreachable_upstream(upstream, e);
            let _ = client_send.send_trailers(status::to_headers(&s));
            pumped.code = Some(s.code());
            pumped.failure = Some(s);
        }
        Ok(pumped)
    };
    let (sent, received) = tokio::join!(upload, download);
    let received = received?;
    let message = received
        .status
        .as_ref()
        .filter(|s| s.code() != Code::Ok && !s.message().is_empty())
        .map(|s| s.message().to_string());
    Ok(Relayed {
        code: received.code.unwrap_or(Code::Unknown),
        message,
        request: sent.first.and_then(message_of),
        reply: received.first.and_then(message_of),
        broken: received.failure,
    })
}

#[derive(Default)]
struct Pumped {
    first: Option<Bytes>,
    code: Option<Code>,
    /// The final status, code and message, as the upstream sent it.
    status: Option<Status>,
    /// The sending side broke off; `to` got nothing after the last whole piece of data.
    broken: Option<h2::Error>,
    /// What the client was told about it (replies only).
    failure: Option<Status>,
}

/// Copies data then trailers from `from` to `to`, moving only as much as the receiver's window
/// allows and returning flow-control credit only once the data is passed on. If `from` breaks
/// off, the caller decides what `to` gets. With `hold_small`, a small piece that does not end
/// the stream waits for what follows, so that a request sent as a small DATA frame and then an
/// empty one ending the stream (hyper's clients, tonic's) goes on as one frame ending it: h2
/// counts each small DATA frame not ending its stream against a budget (`too_many_data_frames`,
/// 32 KiB of overhead at HTTP/2's default window), which a few hundred such requests at once
/// exhaust, and the plugin then ends the connection with every call on it.
async fn pump(
    mut from: RecvStream,
    to: &mut SendStream<Bytes>,
    keep_first: bool,
    hold_small: bool,
) -> Pumped {
    let mut seen = Pumped::default();
    // Its credit is returned at once: at most one small piece a stream waits here.
    let mut held: Option<Bytes> = None;
    while let Some(chunk) = from.data().await {
        let chunk = match chunk {
            Ok(chunk) => chunk,
            Err(e) => {
                seen.broken = Some(e);
                return seen;
            }
        };
        if keep_first && seen.first.is_none() {
            seen.first = Some(chunk.clone()); // a reference count, not a copy
        }
        let len = chunk.len();
        // A unary body is one DATA frame ending the stream: forward it as one frame too.
        let last = from.is_end_stream();
        if hold_small && !last && (1..SMALL_DATA).contains(&len) && held.is_none() {
            let _ = from.flow_control().release_capacity(len);
            held = Some(chunk);
            continue;
        }
        let chunk = match held.take() {
            // The end of the stream, empty: it goes with the piece held.
            Some(piece) if chunk.is_empty() && last => piece,
            Some(piece) => {
                if !forward(to, piece, false).await {
                    return seen;
                }
                chunk
            }
            None => chunk,
        };
        // Clients such as hyper end a body with an empty DATA frame: the end must travel on.
        if (!chunk.is_empty() || last) && !forward(to, chunk, last).await {
            return seen;
        }
        let _ = from.flow_control().release_capacity(len);
        if last {
            return seen;
        }
    }
    match from.trailers().await {
        Ok(Some(trailers)) => {
            if let Some(piece) = held.take() {
                if !forward(to, piece, false).await {
                    return seen;
                }
            }
            seen.status = status::from_headers(&trailers);
            seen.code = seen.status.as_ref().map(|s| s.code());
            let _ = to.send_trailers(trailers);
        }
        Ok(None) => {
            let _ = forward(to, held.take().unwrap_or_default(), true).await;
        }
        Err(e) => seen.broken = Some(e),
    }
    seen
}

/// DATA pieces under this many bytes count against h2's budget of small frames (its
/// `DEFAULT_DATA_FRAME_OVERHEAD_THRESHOLD`).
const SMALL_DATA: usize = 256;

/// Sends `chunk` as the receiver's window allows, the last piece ending the stream if `end`;
/// `false` if `to` is gone.
async fn forward(to: &mut SendStream<Bytes>, mut chunk: Bytes, end: bool) -> bool {
    if chunk.is_empty() {
        return to.send_data(chunk, end).is_ok();
    }
    while !chunk.is_empty() {
        to.reserve_capacity(chunk.len());
        let granted = match std::future::poll_fn(|cx| to.poll_capacity(cx)).await {
            Some(Ok(n)) if n > 0 => n,
            Some(Ok(_)) => continue,
            _ => return false,
        };
        let piece = chunk.split_to(granted.min(chunk.len()));
        if to.send_data(piece, end && chunk.is_empty()).is_err() {
            return false;
        }
    }
    true
}

/// The message inside a DATA chunk that holds one whole gRPC frame (a view, not a copy).
fn message_of(chunk: Bytes) -> Option<Bytes> {
    frame::first_message(&chunk).map(|m| chunk.slice_ref(m))
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
