//! What a gateway service takes from a client and gives back, bounded (the splice's local
//! streams call the services through [`Handler`]s, which [`bounded`] wraps):
//!
//! - Request messages over [`MAX_REQUEST_BYTES`] end the call RESOURCE_EXHAUSTED as soon as
//!   their length prefix arrives (the services' requests are a symbol or a service name; a
//!   bigger one is not a mistake). tonic would read up to its own 4 MiB limit and
//!   `tonic-reflection` would end such a stream OK.
//! - One request at a time: the next request message reaches the service only once the reply
//!   to the previous one has gone to the client (the transport asks the reply for more only
//!   then, within the client's flow-control window). A reflection client that asks and does not
//!   read holds one reply per stream in the gateway, not every reply it asked for.
//! - A status message over [`MAX_STATUS_MESSAGE`] bytes is cut there (`…`): errors that echo
//!   what the client sent (an unknown reflection symbol) do not send it all back.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::{Buf, Bytes, BytesMut};
use futures_util::task::AtomicWaker;
use http::HeaderMap;
use hyper::body::Frame;
use tonic::body::Body;

use super::Handler;
use crate::grpc::{frame, status, Status};

/// The largest request message a gateway service takes.
pub const MAX_REQUEST_BYTES: usize = 64 * 1024;

/// The longest status message a gateway service sends, in bytes (before its `…`): room for
/// what the gateway says, not for everything a client sent.
pub const MAX_STATUS_MESSAGE: usize = 512;

/// `handler`, its requests and replies bounded as the module says.
pub fn bounded(handler: Handler) -> Handler {
    Arc::new(move |request: http::Request<Body>| {
        let gate = Arc::new(Gate::default());
        let (parts, body) = request.into_parts();
        let requests = Requests {
            inner: Some(body),
            buffered: BytesMut::new(),
            gate: gate.clone(),
        };
        let reply = handler(http::Request::from_parts(parts, Body::new(requests)));
        Box::pin(async move {
            let (mut parts, body) = reply.await.into_parts();
            if parts.headers.contains_key("grpc-status") {
                settle(&mut parts.headers, &gate); // trailers-only
            }
            let replies = Replies {
                inner: body,
                gate,
                gave_data: false,
            };
            http::Response::from_parts(parts, Body::new(replies))
        })
    })
}

/// Between a call's request and its reply: whether a request went to the service whose reply
/// has not gone out yet, and why the request was refused, if it was.
#[derive(Default)]
struct Gate {
    owed: AtomicBool,
    /// The request side, waiting for the reply to go out.
    waker: AtomicWaker,
    refused: Mutex<Option<Status>>,
}

impl Gate {
    /// Takes the turn to hand the service a request; false (woken later) while a reply is owed.
    fn take(&self, cx: &mut Context<'_>) -> bool {
        if !self.owed.swap(true, Ordering::AcqRel) {
            return true;
        }
        self.waker.register(cx.waker());
        !self.owed.swap(true, Ordering::AcqRel)
    }

    /// The reply to the last request went out: the next may go in.
    fn release(&self) {
        self.owed.store(false, Ordering::Release);
        self.waker.wake();
    }

    fn refuse(&self, status: Status) {
        *self.refused.lock().expect("never poisoned") = Some(status);
    }

    fn refused(&self) -> Option<Status> {
        self.refused.lock().expect("never poisoned").clone()
    }
}

/// The request body as the service reads it: one whole message at a time, each only when the
/// gate lets it (the end of the request at once: a unary service waits for it before its reply).
struct Requests {
    /// `None` once the request ended or was refused (dropping it tells the transport that
    /// nothing reads the rest).
    inner: Option<Body>,
    /// Read and not yet handed on: at most one message and the frame it came in.
    buffered: BytesMut,
    gate: Arc<Gate>,
}

/// What the buffered bytes start with.
enum Next {
    /// A whole message of this many bytes, prefix included.
    Message(usize),
    /// Not yet a whole message.
    Partial,
    /// A message longer than the limit: its length.
    TooLong(usize),
}

fn next_message(buffered: &[u8]) -> Next {
    if buffered.len() < frame::HEADER {
        return Next::Partial;
    }
    let len = u32::from_be_bytes(buffered[1..frame::HEADER].try_into().expect("4 bytes")) as usize;
    if len > MAX_REQUEST_BYTES {
        Next::TooLong(len)
    } else if buffered.len() >= frame::HEADER + len {
        Next::Message(frame::HEADER + len)
    } else {
        Next::Partial
    }
}

impl Requests {
    /// Ends the request with `status` as the call's answer.
    fn refuse(&mut self, status: Status) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        self.gate.refuse(status);
        self.inner = None;
        self.buffered.clear();
        Poll::Ready(None)
    }
}

impl hyper::body::Body for Requests {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        loop {
            match next_message(&self.buffered) {
                Next::Message(len) => {
                    if !self.gate.take(cx) {
                        return Poll::Pending;
                    }
                    let message = self.buffered.split_to(len).freeze();
                    return Poll::Ready(Some(Ok(Frame::data(message))));
                }
                Next::TooLong(len) => {
                    return self.refuse(Status::resource_exhausted(format!(
                        "a request message of {len} bytes is over the gateway services' limit of \
                         {MAX_REQUEST_BYTES} bytes"
                    )))
                }
                Next::Partial => {}
            }
            let Some(inner) = self.inner.as_mut() else {
                return Poll::Ready(None);
            };
            let frame = match std::task::ready!(Pin::new(inner).poll_frame(cx)) {
                Some(Ok(frame)) => frame,
                Some(Err(e)) => {
                    self.inner = None;
                    return Poll::Ready(Some(Err(e)));
                }
                None if self.buffered.has_remaining() => {
                    return self.refuse(ended_inside_a_message())
                }
                None => {
                    self.inner = None;
                    return Poll::Ready(None);
                }
            };
            match frame.into_data() {
                Ok(data) => self.buffered.extend_from_slice(&data),
                Err(_) if self.buffered.has_remaining() => {
                    return self.refuse(ended_inside_a_message())
                }
                Err(trailers) => return Poll::Ready(Some(Ok(trailers))),
            }
        }
    }
}

/// The service's reply: each time the transport asks for more, what it gave before has gone
/// out, and the gate opens for the next request.
struct Replies {
    inner: Body,
    gate: Arc<Gate>,
    gave_data: bool,
}

impl hyper::body::Body for Replies {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        if std::mem::take(&mut self.gave_data) {
            self.gate.release();
        }
        let frame = std::task::ready!(Pin::new(&mut self.inner).poll_frame(cx));
        Poll::Ready(frame.map(|frame| {
            frame.map(|frame| match frame.into_trailers() {
                Ok(mut trailers) => {
                    settle(&mut trailers, &self.gate);
                    Frame::trailers(trailers)
                }
                Err(frame) => {
                    self.gave_data = frame.is_data();
                    frame
                }
            })
        }))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }
}

/// The call's final status in `headers`: the refusal of its request if there was one, its
/// message cut to [`MAX_STATUS_MESSAGE`].
fn settle(headers: &mut HeaderMap, gate: &Gate) {
    let status = match gate.refused() {
        Some(refused) => refused,
        None => match status::from_headers(headers) {
            Some(s) if s.message().len() > MAX_STATUS_MESSAGE => s,
            _ => return,
        },
    };
    headers.remove("grpc-message");
    headers.remove("grpc-status-details-bin");
    let status = Status::new(status.code(), cut(status.message(), MAX_STATUS_MESSAGE));
    for (name, value) in &status::to_headers(&status) {
        headers.insert(name, value.clone());
    }
}

/// `text` cut to at most `max` bytes (on a character boundary), `…` after.
pub fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// A request whose stream ended with part of a message still unread.
fn ended_inside_a_message() -> Status {
    Status::invalid_argument("the request ended inside a message")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_messages_are_cut_on_a_character_boundary() {
        assert_eq!(cut("short", 5), "short");
        let long = format!("a{}", "é".repeat(300));
        let short = cut(&long, MAX_STATUS_MESSAGE);
        assert!(short.ends_with('…'), "{short}");
        assert!(
            short.len() <= MAX_STATUS_MESSAGE + '…'.len_utf8(),
            "{}",
            short.len()
        );
        assert!(long.starts_with(short.trim_end_matches('…')));
    }

    #[test]
    fn message_lengths_are_read_from_the_prefix() {
        assert!(matches!(next_message(&[0, 0, 0]), Next::Partial));
        assert!(matches!(next_message(&[0, 0, 0, 0, 2, 7]), Next::Partial));
        assert!(matches!(
            next_message(&[0, 0, 0, 0, 1, 7, 9]),
            Next::Message(6)
        ));
        assert!(matches!(
            next_message(&[0, 0, 1, 0, 1]),
            Next::TooLong(65537)
        ));
    }
}
