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

/// A client's deadline from its `grpc-timeout` header (e.g. `100m`, `5S`): as the gRPC spec
/// writes it, at most 8 ASCII digits and a unit (H, M, S, m, u, n); anything else is no
/// deadline.
pub fn parse_timeout(v: &[u8]) -> Option<std::time::Duration> {
    use std::time::Duration;
    let (unit, digits) = v.split_last()?;
    if digits.is_empty() || digits.len() > 8 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n: u64 = std::str::from_utf8(digits).ok()?.parse().ok()?;
    Some(match unit {
        b'H' => Duration::from_secs(n * 3600),
        b'M' => Duration::from_secs(n * 60),
        b'S' => Duration::from_secs(n),
        b'm' => Duration::from_millis(n),
        b'u' => Duration::from_micros(n),
        b'n' => Duration::from_nanos(n),
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
        assert_eq!(parse_timeout(b"1H"), Some(Duration::from_secs(3600)));
        assert_eq!(parse_timeout(b"7u"), Some(Duration::from_micros(7)));
        assert_eq!(parse_timeout(b"9n"), Some(Duration::from_nanos(9)));
        assert_eq!(parse_timeout(b"0S"), Some(Duration::ZERO));
        assert_eq!(
            parse_timeout(b"99999999H"),
            Some(Duration::from_secs(99_999_999 * 3600))
        );
        assert_eq!(parse_timeout(b"5x"), None);
        assert_eq!(parse_timeout(b""), None);
        assert_eq!(parse_timeout(b"S"), None);
        // More than 8 digits, a sign, a space, a fraction: not the spec's TimeoutValue.
        assert_eq!(parse_timeout(b"100000000m"), None);
        assert_eq!(parse_timeout(b"+5S"), None);
        assert_eq!(parse_timeout(b" 5S"), None);
        assert_eq!(parse_timeout(b"1.5S"), None);
    }
}
