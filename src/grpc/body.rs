//! Reading an HTTP/2 body whole, returning flow-control credit as it arrives.

use bytes::{Bytes, BytesMut};
use h2::RecvStream;

use super::{Status, MAX_MESSAGE_BYTES};

/// Reads `body` to its end. A unary gRPC body is one small message, so buffering it is cheaper
/// than streaming it through a decoder.
pub async fn read_to_end(body: &mut RecvStream) -> Result<Bytes, Status> {
    let mut message = Gathered::default();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.map_err(|e| h2_status(&e, "reading the message"))?;
        let _ = body.flow_control().release_capacity(chunk.len());
        message.push(chunk)?;
    }
    Ok(message.whole())
}

/// A body's chunks gathered into one message, refused once past the message limit. A body that
/// arrives as one chunk is kept as it came (a reference count, not a copy).
#[derive(Default)]
pub struct Gathered {
    first: Option<Bytes>,
    rest: BytesMut,
}

impl Gathered {
    pub fn push(&mut self, chunk: Bytes) -> Result<(), Status> {
        match self.first.take() {
            None if self.rest.is_empty() => self.first = Some(chunk),
            Some(f) => {
                self.rest.extend_from_slice(&f);
                self.rest.extend_from_slice(&chunk);
            }
            None => self.rest.extend_from_slice(&chunk),
        }
        if self.first.as_ref().map_or(self.rest.len(), Bytes::len) > MAX_MESSAGE_BYTES + 5 {
            return Err(Status::resource_exhausted(format!(
                "message larger than the limit of {MAX_MESSAGE_BYTES} bytes"
            )));
        }
        Ok(())
    }

    pub fn whole(self) -> Bytes {
        self.first.unwrap_or_else(|| self.rest.freeze())
    }
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
