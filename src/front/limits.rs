//! What one client connection may make the gateway do, the same on every path (spliced,
//! translated, terminated): set by `[listen.limits]` in the configuration.

use std::time::Duration;

use serde::Deserialize;

#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Client connections served at once; more are closed as soon as they are accepted.
    pub max_connections: usize,
    /// SETTINGS_MAX_CONCURRENT_STREAMS: streams open at once on one connection; more are
    /// refused (RST_STREAM REFUSED_STREAM, which a gRPC client retries).
    pub max_concurrent_streams: u32,
    /// SETTINGS_MAX_HEADER_LIST_SIZE (RFC 9113 §6.5.2): a request whose headers are larger
    /// gets RESOURCE_EXHAUSTED.
    pub max_header_list_size: u32,
    /// Streams a client may reset per second on one connection (the rapid-reset attack,
    /// CVE-2023-44487); past that it gets GOAWAY ENHANCE_YOUR_CALM.
    pub max_resets_per_second: u32,
    /// A connection without a stream for this long is asked to go away (GOAWAY NO_ERROR: a
    /// client reconnects on its next call). 0: never.
    #[serde(with = "humantime_serde")]
    pub idle_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_connections: 1024,
            max_concurrent_streams: 1024,
            max_header_list_size: 16 * 1024,
            max_resets_per_second: 200,
            idle_timeout: Duration::from_secs(600),
        }
    }
}

/// How long a client may take to send its preface, and to finish a header block once begun
/// (a slowloris peer): fixed, since no legitimate client comes near them.
pub const PREFACE_TIMEOUT: Duration = Duration::from_secs(10);
pub const HEADER_BLOCK_TIMEOUT: Duration = Duration::from_secs(10);

/// Counts events in one-second windows: `true` once more than `per_second` came in one.
#[derive(Debug)]
pub struct Rate {
    window: std::time::Instant,
    count: u32,
}

impl Default for Rate {
    fn default() -> Rate {
        Rate {
            window: std::time::Instant::now(),
            count: 0,
        }
    }
}

impl Rate {
    pub fn exceeded(&mut self, now: std::time::Instant, per_second: u32) -> bool {
        if now.duration_since(self.window) >= Duration::from_secs(1) {
            self.window = now;
            self.count = 0;
        }
        self.count += 1;
        self.count > per_second
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn rate_counts_per_second() {
        let start = Instant::now();
        let mut r = Rate::default();
        for _ in 0..3 {
            assert!(!r.exceeded(start, 3));
        }
        assert!(r.exceeded(start, 3));
        assert!(
            !r.exceeded(start + Duration::from_secs(2), 3),
            "a new second"
        );
    }
}
