//! Header blocks (HPACK, RFC 7541). The splice decodes every block that passes — each direction
//! has its own decoding context, which must see every block in order. Blocks travel as they
//! came, with one exception: once the splice has answered a stream itself, the client's
//! request blocks no longer all reach the upstream, so the upstream's decoding context stops
//! following the client's, and forwarded request blocks are re-encoded as literals that refer
//! to no dynamic table and add nothing to one. The blocks the splice writes to the client are
//! such literals too, so the client's context keeps following the upstream's.

use std::time::Duration;

use httlib_hpack::encoder::EncoderInput;
use httlib_hpack::{Decoder, Encoder};

use crate::grpc::{self, status, Code, Status};

#[derive(Debug, thiserror::Error)]
#[error("cannot decode a header block: {0:?}")]
pub struct CompressionError(httlib_hpack::DecoderError);

/// A decoded field: name, value, and the decoder's flags.
pub type Field = (Vec<u8>, Vec<u8>, u8);

/// A request's headers: the fields, and what the splice reads of them.
#[derive(Debug, Default)]
pub struct Request {
    pub fields: Vec<Field>,
    pub path: Option<String>,
    pub timeout: Option<Duration>,
}

/// Decodes a request block.
pub fn request(
    decoder: &mut Decoder<'static>,
    mut block: Vec<u8>,
) -> Result<Request, CompressionError> {
    let mut seen = Request {
        fields: Vec::with_capacity(8),
        ..Request::default()
    };
    decoder
        .decode(&mut block, &mut seen.fields)
        .map_err(CompressionError)?;
    for (name, value, _) in &seen.fields {
        match &name[..] {
            b":path" => seen.path = Some(String::from_utf8_lossy(value).into_owned()),
            b"grpc-timeout" => seen.timeout = grpc::parse_timeout(value),
            _ => {}
        }
    }
    Ok(seen)
}

/// Re-encodes decoded fields as a block that needs no dynamic table.
pub fn encode(fields: Vec<Field>) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    for (name, value, flags) in fields {
        // A field the client marked never-indexed stays so (RFC 7541 §7.1.3).
        put_field(&mut out, name, value, flags & Decoder::NEVER_INDEXED);
    }
    out
}

/// What the splice needs from a reply's headers or trailers.
#[derive(Debug, Default)]
pub struct Reply {
    /// The gRPC status, when the block carries one (trailers, or a trailers-only reply).
    pub code: Option<Code>,
    pub message: Option<String>,
}

/// Decodes a reply block (which travels on unchanged) for its status.
pub fn reply(
    decoder: &mut Decoder<'static>,
    mut block: Vec<u8>,
) -> Result<Reply, CompressionError> {
    let mut fields = Vec::with_capacity(4);
    decoder
        .decode(&mut block, &mut fields)
        .map_err(CompressionError)?;
    let mut status = http::HeaderMap::new();
    for (name, value, _) in fields {
        if name == b"grpc-status" || name == b"grpc-message" {
            if let (Ok(n), Ok(v)) = (
                http::HeaderName::from_bytes(&name),
                http::HeaderValue::from_bytes(&value),
            ) {
                status.insert(n, v);
            }
        }
    }
    // tonic reads the code and percent-decodes the message.
    Ok(match status::from_headers(&status) {
        Some(s) => Reply {
            code: Some(s.code()),
            message: Some(s.message().to_string()).filter(|m| !m.is_empty()),
        },
        None if status.contains_key("grpc-status") => Reply {
            code: Some(Code::Unknown),
            message: None,
        },
        None => Reply::default(),
    })
}

/// A reply's leading headers: `:status 200` and the gRPC content type.
pub fn reply_head() -> Vec<u8> {
    let mut out = Vec::with_capacity(32);
    // Static table index 8 is ":status: 200".
    let _ = Encoder::default().encode(EncoderInput::Indexed(8), &mut out);
    put_field(
        &mut out,
        b"content-type".to_vec(),
        grpc::CONTENT_TYPE.as_bytes().to_vec(),
        0,
    );
    out
}

/// Trailers carrying `s` (for a trailers-only reply, after [`reply_head`] in the same block).
pub fn status_fields(out: &mut Vec<u8>, s: &Status) {
    for (name, value) in status::to_headers(s).iter() {
        put_field(
            out,
            name.as_str().as_bytes().to_vec(),
            value.as_bytes().to_vec(),
            0,
        );
    }
}

/// One field as a literal that no decoder adds to its dynamic table (RFC 7541 §6.2.2, §6.2.3).
fn put_field(out: &mut Vec<u8>, name: Vec<u8>, value: Vec<u8>, never_indexed: u8) {
    // Without WITH_INDEXING the encoder leaves every table alone, its own included; the only
    // error it has is for an index, and none is used here.
    let _ = Encoder::default().encode(EncoderInput::Literal(name, value, never_indexed), out);
}

/// Lets a decoder follow a dynamic table as large as the peer's settings allow.
pub fn allow_table_size(decoder: &mut Decoder<'static>, size: u32) {
    if size > decoder.max_dynamic_size() {
        decoder.set_max_dynamic_size(size);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(block: &[u8]) -> Vec<(String, String)> {
        let mut out = Vec::new();
        Decoder::default()
            .decode(&mut block.to_vec(), &mut out)
            .unwrap();
        out.into_iter()
            .map(|(n, v, _)| (String::from_utf8(n).unwrap(), String::from_utf8(v).unwrap()))
            .collect()
    }

    #[test]
    fn requests_are_re_encoded_field_for_field() {
        // A block as a client's encoder writes it: Huffman-coded, incrementally indexed fields.
        let mut client = Encoder::default();
        let headers: Vec<(&[u8], &[u8])> = vec![
            (b":method", b"POST"),
            (b":scheme", b"http"),
            (b":path", b"/csi.v1.Identity/Probe"),
            (b":authority", b"localhost"),
            (b"content-type", b"application/grpc"),
            (b"te", b"trailers"),
            (b"grpc-timeout", b"250m"),
        ];
        let mut decoder = Decoder::default();
        for _ in 0..2 {
            // twice: the second block refers to the client's dynamic table
            let mut block = Vec::new();
            for (n, v) in &headers {
                let flags = Encoder::HUFFMAN_NAME
                    | Encoder::HUFFMAN_VALUE
                    | Encoder::WITH_INDEXING
                    | Encoder::BEST_FORMAT;
                client
                    .encode(
                        EncoderInput::Literal(n.to_vec(), v.to_vec(), flags),
                        &mut block,
                    )
                    .unwrap();
            }
            let seen = request(&mut decoder, block).unwrap();
            assert_eq!(seen.path.as_deref(), Some("/csi.v1.Identity/Probe"));
            assert_eq!(seen.timeout, Some(Duration::from_millis(250)));
            let expected: Vec<(String, String)> = headers
                .iter()
                .map(|(n, v)| {
                    (
                        String::from_utf8(n.to_vec()).unwrap(),
                        String::from_utf8(v.to_vec()).unwrap(),
                    )
                })
                .collect();
            assert_eq!(fields(&encode(seen.fields)), expected);
        }
    }

    #[test]
    fn our_blocks_leave_the_dynamic_table_alone() {
        let mut block = reply_head();
        status_fields(&mut block, &Status::not_found("no volume \"a b\""));
        let mut d = Decoder::default();
        let decoded = reply(&mut d, block).unwrap();
        assert_eq!(decoded.code, Some(Code::NotFound));
        assert_eq!(decoded.message.as_deref(), Some("no volume \"a b\""));
        // a following block that indexes dynamic entry 62 must fail: nothing was added
        assert!(d.decode(&mut vec![0x80 | 62], &mut Vec::new()).is_err());
    }

    #[test]
    fn a_broken_block_is_a_compression_error() {
        assert!(reply(&mut Decoder::default(), vec![0x80 | 70]).is_err());
    }
}
