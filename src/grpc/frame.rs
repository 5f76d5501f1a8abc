//! gRPC length-prefixed messages: one flag byte (compressed or not), a 4-byte big-endian length,
//! then the protobuf bytes.

use bytes::{BufMut, Bytes, BytesMut};

use super::{Status, MAX_MESSAGE_BYTES};

pub use csi_gateway_wire::grpc::{prefix, HEADER};

/// Frames one uncompressed message.
pub fn encode(message: &[u8]) -> Bytes {
    let mut buf = BytesMut::with_capacity(HEADER + message.len());
    buf.put_u8(0);
    buf.put_u32(message.len() as u32);
    buf.put_slice(message);
    buf.freeze()
}

/// The first message of a chunk that begins with a whole gRPC frame (what the log and the
/// debug bodies show of a relayed call); `None` if the chunk holds less.
pub fn first_message(chunk: &[u8]) -> Option<&[u8]> {
    let len = u32::from_be_bytes(chunk.get(1..HEADER)?.try_into().ok()?) as usize;
    chunk.get(HEADER..HEADER.checked_add(len)?)
}

/// The single message of a unary body. The gateway negotiates no compression, so a compressed
/// message is refused rather than misread.
pub fn decode_unary(body: &[u8]) -> Result<&[u8], Status> {
    if body.len() < HEADER {
        return Err(Status::internal(format!(
            "malformed gRPC message: {} bytes where a 5-byte header was expected",
            body.len()
        )));
    }
    if body[0] != 0 {
        return Err(Status::unimplemented(
            "compressed gRPC messages are not supported",
        ));
    }
    let len = u32::from_be_bytes([body[1], body[2], body[3], body[4]]) as usize;
    if len > MAX_MESSAGE_BYTES {
        return Err(Status::resource_exhausted(format!(
            "message of {len} bytes is larger than the limit of {MAX_MESSAGE_BYTES}"
        )));
    }
    let rest = &body[HEADER..];
    if rest.len() != len {
        return Err(Status::internal(format!(
            "malformed gRPC body: header says {len} bytes, body holds {} (a unary call carries exactly one message)",
            rest.len()
        )));
    }
    Ok(rest)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::Code;

    #[test]
    fn first_message_needs_the_whole_frame() {
        let mut two = encode(b"abc").to_vec();
        two.extend_from_slice(&encode(b"de"));
        assert_eq!(first_message(&two), Some(&b"abc"[..]));
        assert_eq!(first_message(&two[..7]), None);
        assert_eq!(first_message(&[0, 0xff, 0xff, 0xff, 0xff]), None);
    }

    #[test]
    fn round_trip() {
        let framed = encode(b"hello");
        assert_eq!(&framed[..5], &[0, 0, 0, 0, 5]);
        assert_eq!(decode_unary(&framed).unwrap(), b"hello");
        assert_eq!(decode_unary(&encode(b"")).unwrap(), b"");
    }

    #[test]
    fn bad_bodies_are_refused_with_the_right_code() {
        assert_eq!(decode_unary(b"\0\0").unwrap_err().code(), Code::Internal);
        assert_eq!(
            decode_unary(b"\x01\0\0\0\0").unwrap_err().code(),
            Code::Unimplemented
        );
        assert_eq!(
            decode_unary(b"\0\0\0\0\x09abc").unwrap_err().code(),
            Code::Internal
        );
        let mut two = encode(b"a").to_vec();
        two.extend_from_slice(&encode(b"b"));
        assert_eq!(decode_unary(&two).unwrap_err().code(), Code::Internal);
        assert_eq!(
            decode_unary(b"\0\x7f\0\0\0").unwrap_err().code(),
            Code::ResourceExhausted
        );
    }
}
