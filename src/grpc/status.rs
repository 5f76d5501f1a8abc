//! A gRPC status travels in trailers (or, for an immediate error, in the only header block:
//! "trailers-only"). tonic encodes and decodes the headers.

use http::{HeaderMap, HeaderValue};

use csi_gateway_wire::headers;

use super::{Code, Status};

/// Trailers (or trailers-only headers) that carry `status`.
pub fn to_headers(status: &Status) -> HeaderMap {
    let mut headers = HeaderMap::new();
    if status.add_header(&mut headers).is_err() {
        // Only a message that cannot be percent-encoded gets here; keep the code.
        headers.clear();
        Status::new(status.code(), "").add_header(&mut headers).ok();
    }
    headers
}

/// Trailers for a successful call.
pub fn ok_trailers() -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert("grpc-status", HeaderValue::from_static("0"));
    headers
}

/// The status a header block carries, if any.
pub fn from_headers(headers: &HeaderMap) -> Option<Status> {
    headers.get("grpc-status")?;
    Status::from_header_map(headers)
}

/// The status of a reply whose trailers went missing.
pub fn missing_status() -> Status {
    Status::new(Code::Internal, "upstream reply ended without a gRPC status")
}

/// The fields of `status` (for trailers, or a trailers-only reply after
/// [`headers::reply_head`]) appended to a header block as literals that leave the peer's table
/// alone.
pub fn status_fields(out: &mut Vec<u8>, status: &Status) {
    for (name, value) in to_headers(status).iter() {
        headers::put_field(
            out,
            name.as_str().as_bytes(),
            value.as_bytes(),
            headers::Indexing::Allowed,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_survives_headers() {
        let s = Status::not_found("volume \"v1\" does not exist: é");
        let back = from_headers(&to_headers(&s)).unwrap();
        assert_eq!(back.code(), Code::NotFound);
        assert_eq!(back.message(), s.message());
        assert_eq!(from_headers(&ok_trailers()).unwrap().code(), Code::Ok);
        assert!(from_headers(&HeaderMap::new()).is_none());
    }

    #[test]
    fn status_fields_read_back_as_the_status() {
        let mut block = Vec::new();
        headers::reply_head(&mut block);
        status_fields(&mut block, &Status::not_found("no volume \"a b\""));
        let decoded = headers::reply(&mut headers::Decoder::default(), &block).unwrap();
        assert_eq!(decoded.code.map(Code::from_i32), Some(Code::NotFound));
        assert_eq!(decoded.message.as_deref(), Some("no volume \"a b\""));
    }
}
