//! gRPC over HTTP/2 at the byte level: the 5-octet message prefix and the values of the
//! header fields the splice reads (`grpc-timeout`, `grpc-status`).

/// The gRPC content type; requests without it are not gRPC.
pub const CONTENT_TYPE: &str = "application/grpc";

/// The length of a message's prefix: one flag byte (compressed or not), a 4-byte length.
pub const HEADER: usize = 5;

/// gRPC's UNKNOWN status code: what a `grpc-status` that is not a number reads as.
pub const UNKNOWN: i32 = 2;

/// The 5-octet prefix of an uncompressed message of `len` octets.
pub fn prefix(len: usize) -> [u8; HEADER] {
    let [a, b, c, d] = (len as u32).to_be_bytes();
    [0, a, b, c, d]
}

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

/// The code a `grpc-status` value carries: UNKNOWN when it is not a number.
pub fn status_code(value: &[u8]) -> i32 {
    std::str::from_utf8(value)
        .ok()
        .and_then(|v| v.parse::<i32>().ok())
        .unwrap_or(UNKNOWN)
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

    #[test]
    fn a_status_that_is_not_a_number_is_unknown() {
        assert_eq!(status_code(b"5"), 5);
        assert_eq!(status_code(b"x"), UNKNOWN);
        assert_eq!(status_code(b""), UNKNOWN);
    }

    #[test]
    fn the_prefix_is_a_flag_and_a_big_endian_length() {
        assert_eq!(prefix(0x0102_0304), [0, 1, 2, 3, 4]);
    }
}
