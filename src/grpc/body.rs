//! Reading an HTTP/2 body whole, returning flow-control credit as it arrives.

use bytes::{Bytes, BytesMut};
use h2::RecvStream;

use super::{Status, MAX_MESSAGE_BYTES};

/// Reads `body` to its end. A unary gRPC body is one small message, so buffering it is cheaper
/// than streaming it through a decoder.
pub async fn read_to_end(body: &mut RecvStream) -> Result<Bytes, Status> {
    let mut first: Option<Bytes> = None;
    let mut rest = BytesMut::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.map_err(|e| h2_status(&e, "reading the message"))?;
        let _ = body.flow_control().release_capacity(chunk.len());
        match first.take() {
            None if rest.is_empty() => first = Some(chunk),
            Some(f) => {
                rest.extend_from_slice(&f);
                rest.extend_from_slice(&chunk);
            }
            None => rest.extend_from_slice(&chunk),
        }
        if first.as_ref().map_or(rest.len(), Bytes::len) > MAX_MESSAGE_BYTES + 5 {
            return Err(Status::resource_exhausted(format!(
                "message larger than the limit of {MAX_MESSAGE_BYTES} bytes"
            )));
        }
    }
    Ok(first.unwrap_or_else(|| rest.freeze()))
}

/// A transport error as a gRPC status: the stream or connection broke.
pub fn h2_status(e: &h2::Error, doing: &str) -> Status {
    if e.is_io() || e.is_go_away() {
        Status::unavailable(format!("connection lost while {doing}: {e}"))
    } else if e.reason() == Some(h2::Reason::CANCEL) {
        Status::cancelled(format!("stream cancelled while {doing}"))
    } else {
        Status::internal(format!("HTTP/2 error while {doing}: {e}"))
    }
}
