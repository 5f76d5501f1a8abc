//! gRPC over HTTP/2: the few pieces the gateway's hot path needs on top of `h2` — message
//! framing, status in headers or trailers, and reading a body with flow control. `Status` and
//! `Code` are tonic's; the header encoding of a status is tonic's too.

pub mod body;
pub mod frame;
pub mod status;

pub use tonic::{Code, Status};

/// Largest message the gateway accepts or forwards (gRPC's customary default).
pub const MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;

/// The gRPC content type; requests without it are not gRPC.
pub const CONTENT_TYPE: &str = "application/grpc";

/// A client's deadline from its `grpc-timeout` header (e.g. `100m`, `5S`).
pub fn parse_timeout(v: &[u8]) -> Option<std::time::Duration> {
    use std::time::Duration;
    let v = std::str::from_utf8(v).ok()?;
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
    use std::time::Duration;

    #[test]
    fn parses_grpc_timeouts() {
        assert_eq!(parse_timeout(b"5S"), Some(Duration::from_secs(5)));
        assert_eq!(parse_timeout(b"100m"), Some(Duration::from_millis(100)));
        assert_eq!(parse_timeout(b"2M"), Some(Duration::from_secs(120)));
        assert_eq!(parse_timeout(b"5x"), None);
        assert_eq!(parse_timeout(b""), None);
    }
}
