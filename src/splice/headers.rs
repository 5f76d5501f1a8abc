//! Header blocks (HPACK, RFC 7541). The splice decodes every block that passes — each direction
//! has its own decoding context, which must see every block in order. Blocks travel as they
//! came, with one exception: once the splice has answered a stream itself, the client's
//! request blocks no longer all reach the upstream, so the upstream's decoding context stops
//! following the client's, and forwarded request blocks are re-encoded as literals that refer
//! to no dynamic table and add nothing to one. The blocks the splice writes to the client are
//! such literals too, so the client's context keeps following the upstream's.

use std::time::Duration;

use httlib_hpack::encoder::EncoderInput;
use httlib_hpack::table::Table;
use httlib_hpack::Encoder;
use httlib_huffman::DecoderSpeed;

use crate::grpc::{self, status, Code, Status};

#[derive(Clone, Copy, Debug, thiserror::Error, PartialEq, Eq)]
#[error("cannot decode a header block: {0}")]
pub struct CompressionError(&'static str);

/// One direction's HPACK decoding context (RFC 7541 §2.2): httlib-hpack's table and
/// httlib-huffman's decoder under a walk over the block that lends each field to a callback,
/// so a field found in a table costs no allocation — most fields, once a connection is warm.
pub struct Decoder {
    table: Table<'static>,
    /// The largest table the peer's settings allow the encoder (the ceiling for size updates).
    allowed: u32,
    /// The last Huffman-coded `:path` and its text: clients send the same path again and again
    /// as a literal.
    last_path: (Vec<u8>, Vec<u8>),
}

impl Default for Decoder {
    fn default() -> Decoder {
        Decoder {
            table: Table::with_dynamic_size(4096),
            allowed: 4096,
            last_path: (Vec::new(), Vec::new()),
        }
    }
}

/// A field as it was represented: the flag re-encoding keeps (RFC 7541 §7.1.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Indexing {
    Allowed,
    Never,
}

impl Decoder {
    /// Lets the encoder's table grow as large as the peer's settings allow.
    pub fn allow_table_size(&mut self, size: u32) {
        self.allowed = self.allowed.max(size);
    }

    /// Walks `block`, updating the table, and lends each field to `field`.
    pub fn decode(
        &mut self,
        mut block: &[u8],
        mut field: impl FnMut(&[u8], &[u8], Indexing),
    ) -> Result<(), CompressionError> {
        let mut first = true;
        while let Some(&octet) = block.first() {
            if octet & 0x80 != 0 {
                let index = integer(&mut block, 7)?;
                let (name, value) = self.entry(index)?;
                field(name, value, Indexing::Allowed);
            } else if octet & 0x40 != 0 {
                let index = integer(&mut block, 6)?;
                let name = self.name(index, &mut block)?;
                let value = string(&mut block)?;
                field(&name, &value, Indexing::Allowed);
                self.table.insert(name.into_owned(), value.into_owned());
            } else if octet & 0x20 != 0 {
                // Size updates come first in a block (RFC 7541 §4.2).
                let size = integer(&mut block, 5)?;
                if !first || size > self.allowed as usize {
                    return Err(CompressionError("dynamic table size update not allowed"));
                }
                self.table.update_max_dynamic_size(size as u32);
            } else {
                let never = octet & 0x10 != 0;
                let index = integer(&mut block, 4)?;
                let name = self.name(index, &mut block)?;
                let path = name.as_ref() == b":path";
                let value = if path {
                    self.path(&mut block)?
                } else {
                    string(&mut block)?
                };
                let indexing = if never {
                    Indexing::Never
                } else {
                    Indexing::Allowed
                };
                field(&name, &value, indexing);
            }
            first = false;
        }
        Ok(())
    }

    fn entry(&self, index: usize) -> Result<(&[u8], &[u8]), CompressionError> {
        u32::try_from(index)
            .ok()
            .and_then(|i| self.table.get(i))
            .ok_or(CompressionError("index not in the table"))
    }

    /// A literal field's name: indexed (`index` > 0) or a string literal.
    fn name<'b>(
        &self,
        index: usize,
        block: &mut &'b [u8],
    ) -> Result<std::borrow::Cow<'b, [u8]>, CompressionError> {
        if index == 0 {
            string(block)
        } else {
            Ok(std::borrow::Cow::Owned(self.entry(index)?.0.to_vec()))
        }
    }

    /// A `:path` value, decoded once per distinct representation.
    fn path<'b>(
        &mut self,
        block: &mut &'b [u8],
    ) -> Result<std::borrow::Cow<'b, [u8]>, CompressionError> {
        let before = *block;
        let raw_len = {
            let mut probe = before;
            let len = integer(&mut probe, 7)?;
            (before.len() - probe.len()) + len
        };
        let raw = before
            .get(..raw_len)
            .ok_or(CompressionError("string longer than the block"))?;
        if raw == self.last_path.0.as_slice() {
            *block = &before[raw_len..];
            return Ok(std::borrow::Cow::Owned(self.last_path.1.clone()));
        }
        let value = string(block)?;
        self.last_path = (raw.to_vec(), value.to_vec());
        Ok(value)
    }
}

/// An integer with an `n`-bit prefix (RFC 7541 §5.1).
fn integer(block: &mut &[u8], n: u8) -> Result<usize, CompressionError> {
    let bad = CompressionError("truncated or oversized integer");
    let (&first, mut rest) = block.split_first().ok_or(bad)?;
    let max = (1usize << n) - 1;
    let mut value = first as usize & max;
    if value == max {
        let mut shift = 0;
        loop {
            let (&b, tail) = rest.split_first().ok_or(bad)?;
            rest = tail;
            value = value
                .checked_add(((b & 0x7f) as usize) << shift)
                .filter(|_| shift <= 28)
                .ok_or(bad)?;
            shift += 7;
            if b & 0x80 == 0 {
                break;
            }
        }
    }
    *block = rest;
    Ok(value)
}

/// A string literal (RFC 7541 §5.2), Huffman-coded or not.
fn string<'b>(block: &mut &'b [u8]) -> Result<std::borrow::Cow<'b, [u8]>, CompressionError> {
    let huffman = block.first().is_some_and(|b| b & 0x80 != 0);
    let len = integer(block, 7)?;
    if block.len() < len {
        return Err(CompressionError("string longer than the block"));
    }
    let (bytes, rest) = block.split_at(len);
    *block = rest;
    if !huffman {
        return Ok(std::borrow::Cow::Borrowed(bytes));
    }
    let mut out = Vec::with_capacity(len * 8 / 5 + 1);
    httlib_huffman::decode(bytes, &mut out, DecoderSpeed::FiveBits)
        .map_err(|_| CompressionError("bad Huffman code"))?;
    Ok(std::borrow::Cow::Owned(out))
}

/// A decoded field, owned: name, value, and how it may be indexed.
pub type Field = (Vec<u8>, Vec<u8>, Indexing);

/// A request's headers: what the splice reads of them, and every field when asked for.
#[derive(Debug, Default)]
pub struct Request {
    pub fields: Vec<Field>,
    pub path: Option<String>,
    pub timeout: Option<Duration>,
    /// The `:authority` is [`LOCAL_AUTHORITY`]; anything else (the socket path a gRPC client
    /// sends on a UNIX socket, or none) is replaced before the block goes upstream.
    pub local_authority: bool,
}

/// The `:authority` of every request the gateway sends on a UNIX socket: the authority names
/// nothing there, and servers that check it (h2, so tonic) accept this one.
pub const LOCAL_AUTHORITY: &str = "localhost";

/// Decodes a request block; `keep` also collects its fields (to re-encode them).
pub fn request(
    decoder: &mut Decoder,
    block: &[u8],
    keep: bool,
) -> Result<Request, CompressionError> {
    let mut seen = Request::default();
    decoder.decode(block, |name, value, indexing| {
        match name {
            b":path" => seen.path = Some(String::from_utf8_lossy(value).into_owned()),
            b":authority" => seen.local_authority = value == LOCAL_AUTHORITY.as_bytes(),
            b"grpc-timeout" => seen.timeout = grpc::parse_timeout(value),
            _ => {}
        }
        if keep {
            seen.fields.push((name.to_vec(), value.to_vec(), indexing));
        }
    })?;
    Ok(seen)
}

/// Gives a request's fields the `:authority` [`LOCAL_AUTHORITY`], whatever the client sent.
pub fn localize_authority(fields: &mut Vec<Field>) {
    fields.retain(|(name, _, _)| name.as_slice() != b":authority");
    let field = (b":authority".to_vec(), LOCAL_AUTHORITY.as_bytes().to_vec());
    // Pseudo-header fields come first (RFC 9113 §8.3), in any order among themselves.
    fields.insert(0, (field.0, field.1, Indexing::Allowed));
}

/// Re-encodes decoded fields as a block that needs no dynamic table.
pub fn encode(fields: Vec<Field>) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    for (name, value, indexing) in fields {
        put_field(&mut out, name, value, indexing);
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
pub fn reply(decoder: &mut Decoder, block: &[u8]) -> Result<Reply, CompressionError> {
    let mut seen = Reply::default();
    decoder.decode(block, |name, value, _| match name {
        b"grpc-status" => {
            let code = std::str::from_utf8(value)
                .ok()
                .and_then(|v| v.parse::<i32>().ok());
            seen.code = Some(code.map_or(Code::Unknown, Code::from_i32));
        }
        // Percent-encoded on the wire (gRPC over HTTP/2, "Responses").
        b"grpc-message" if !value.is_empty() => {
            let text = percent_encoding::percent_decode(value).decode_utf8_lossy();
            seen.message = Some(text.into_owned());
        }
        _ => {}
    })?;
    Ok(seen)
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
        Indexing::Allowed,
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
            Indexing::Allowed,
        );
    }
}

/// One field as a literal that no decoder adds to its dynamic table (RFC 7541 §6.2.2, §6.2.3).
fn put_field(out: &mut Vec<u8>, name: Vec<u8>, value: Vec<u8>, indexing: Indexing) {
    let flags = match indexing {
        Indexing::Allowed => 0,
        Indexing::Never => Encoder::NEVER_INDEXED,
    };
    // Without WITH_INDEXING the encoder leaves every table alone, its own included; the only
    // error it has is for an index, and none is used here.
    let _ = Encoder::default().encode(EncoderInput::Literal(name, value, flags), out);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fields of `block` as httlib-hpack's own decoder reads them: the reference.
    fn reference(
        decoder: &mut httlib_hpack::Decoder<'static>,
        block: &[u8],
    ) -> Vec<(String, String)> {
        let mut out = Vec::new();
        decoder.decode(&mut block.to_vec(), &mut out).unwrap();
        out.into_iter()
            .map(|(n, v, _)| (String::from_utf8(n).unwrap(), String::from_utf8(v).unwrap()))
            .collect()
    }

    fn ours(decoder: &mut Decoder, block: &[u8]) -> Vec<(String, String)> {
        let mut out = Vec::new();
        decoder
            .decode(block, |n, v, _| {
                out.push((
                    String::from_utf8(n.to_vec()).unwrap(),
                    String::from_utf8(v.to_vec()).unwrap(),
                ))
            })
            .unwrap();
        out
    }

    const HEADERS: &[(&[u8], &[u8])] = &[
        (b":method", b"POST"),
        (b":scheme", b"http"),
        (b":path", b"/csi.v1.Identity/Probe"),
        (b":authority", b"localhost"),
        (b"content-type", b"application/grpc"),
        (b"te", b"trailers"),
        (b"grpc-timeout", b"250m"),
        (b"x-custom", b"value"),
    ];

    /// Every representation an encoder may choose, Huffman-coded or not, twice over (the second
    /// block refers to entries the first added): our decoder reads what httlib-hpack reads.
    #[test]
    fn decodes_every_representation_like_the_reference() {
        let flag_sets = [
            Encoder::HUFFMAN_NAME
                | Encoder::HUFFMAN_VALUE
                | Encoder::WITH_INDEXING
                | Encoder::BEST_FORMAT,
            Encoder::WITH_INDEXING,
            Encoder::NEVER_INDEXED | Encoder::HUFFMAN_VALUE,
            Encoder::BEST_FORMAT,
            0,
        ];
        let mut encoder = Encoder::default();
        let mut theirs = httlib_hpack::Decoder::default();
        let mut decoder = Decoder::default();
        for round in 0..2 {
            for flags in flag_sets {
                let mut block = Vec::new();
                if round == 1 && flags == 0 {
                    encoder.update_max_dynamic_size(2048, &mut block).unwrap();
                }
                for (n, v) in HEADERS {
                    let input = EncoderInput::Literal(n.to_vec(), v.to_vec(), flags);
                    encoder.encode(input, &mut block).unwrap();
                }
                assert_eq!(
                    ours(&mut decoder, &block),
                    reference(&mut theirs, &block),
                    "flags {flags:#x}"
                );
            }
        }
    }

    #[test]
    fn requests_are_re_encoded_field_for_field() {
        let mut client = Encoder::default();
        let mut decoder = Decoder::default();
        for _ in 0..2 {
            let mut block = Vec::new();
            for (n, v) in HEADERS {
                let flags = Encoder::HUFFMAN_VALUE | Encoder::WITH_INDEXING | Encoder::BEST_FORMAT;
                let input = EncoderInput::Literal(n.to_vec(), v.to_vec(), flags);
                client.encode(input, &mut block).unwrap();
            }
            let seen = request(&mut decoder, &block, true).unwrap();
            assert_eq!(seen.path.as_deref(), Some("/csi.v1.Identity/Probe"));
            assert_eq!(seen.timeout, Some(Duration::from_millis(250)));
            let expected: Vec<(String, String)> = HEADERS
                .iter()
                .map(|(n, v)| {
                    (
                        String::from_utf8(n.to_vec()).unwrap(),
                        String::from_utf8(v.to_vec()).unwrap(),
                    )
                })
                .collect();
            let encoded = encode(seen.fields);
            assert_eq!(
                reference(&mut httlib_hpack::Decoder::default(), &encoded),
                expected
            );
        }
    }

    #[test]
    fn any_authority_becomes_localhost() {
        let block = |authority: Option<&str>| {
            let mut fields = vec![(":method", "POST"), (":path", "/csi.v1.Identity/Probe")];
            fields.extend(authority.map(|a| (":authority", a)));
            fields.push(("te", "trailers"));
            let mut out = Vec::new();
            for (n, v) in fields {
                let input = EncoderInput::Literal(n.into(), v.into(), Encoder::HUFFMAN_VALUE);
                Encoder::default().encode(input, &mut out).unwrap();
            }
            out
        };
        for authority in [
            None,
            Some(""),
            Some("/run/csi/csi.sock"),
            Some("%2Frun%2Fcsi%2Fcsi.sock"),
            Some("unix:///run/csi/csi.sock"),
            Some("localhost"),
        ] {
            let mut seen = request(&mut Decoder::default(), &block(authority), true).unwrap();
            assert_eq!(seen.local_authority, authority == Some("localhost"));
            localize_authority(&mut seen.fields);
            let fields = reference(&mut httlib_hpack::Decoder::default(), &encode(seen.fields));
            let authorities: Vec<&(String, String)> =
                fields.iter().filter(|(n, _)| n == ":authority").collect();
            assert_eq!(authorities, [&(":authority".into(), "localhost".into())]);
            assert_eq!(fields[0].0, ":authority", "{authority:?}");
            assert_eq!(fields.len(), 4, "{authority:?}: {fields:?}");
        }
    }

    #[test]
    fn a_repeated_literal_path_is_read_again_correctly() {
        let mut encoder = Encoder::default();
        let mut decoder = Decoder::default();
        for path in ["/a.B/C", "/a.B/C", "/csi.v0.Node/NodeGetId", "/a.B/C"] {
            let mut block = Vec::new();
            let flags = Encoder::HUFFMAN_VALUE; // literal, not indexed: sent whole every time
            let input = EncoderInput::IndexedName(4, path.as_bytes().to_vec(), flags);
            encoder.encode(input, &mut block).unwrap();
            assert_eq!(
                request(&mut decoder, &block, false)
                    .unwrap()
                    .path
                    .as_deref(),
                Some(path)
            );
        }
    }

    #[test]
    fn our_blocks_leave_the_dynamic_table_alone() {
        let mut block = reply_head();
        status_fields(&mut block, &Status::not_found("no volume \"a b\""));
        let mut d = Decoder::default();
        let decoded = reply(&mut d, &block).unwrap();
        assert_eq!(decoded.code, Some(Code::NotFound));
        assert_eq!(decoded.message.as_deref(), Some("no volume \"a b\""));
        // a following block that indexes dynamic entry 62 must fail: nothing was added
        assert!(d.decode(&[0x80 | 62], |_, _, _| {}).is_err());
    }

    #[test]
    fn broken_blocks_are_compression_errors() {
        let mut d = Decoder::default();
        assert!(reply(&mut d, &[0x80 | 70]).is_err(), "no such index");
        assert!(
            d.decode(&[0x7f], |_, _, _| {}).is_err(),
            "truncated integer"
        );
        assert!(
            d.decode(&[0x00, 0x05, b'a'], |_, _, _| {}).is_err(),
            "string past the end"
        );
        assert!(
            d.decode(&[0x3f, 0xe1, 0x7f], |_, _, _| {}).is_err(),
            "table over the allowed size"
        );
        assert!(
            d.decode(&[0x82, 0x20], |_, _, _| {}).is_err(),
            "size update after a field"
        );
        assert!(
            d.decode(&[0x00, 0x81, 0xff, 0x00], |_, _, _| {}).is_err(),
            "bad Huffman code"
        );
    }
}
