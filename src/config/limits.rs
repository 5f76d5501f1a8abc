//! `[listen.limits]`: what one client connection may make the gateway do, the same on every
//! path (spliced, translated, answered by the gateway). The front enforces them
//! (`splice::limits`).

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
    /// client reconnects on its next call). A client that sends no part of a request this long
    /// while one is unfinished has stalled (PINGs and WINDOW_UPDATEs are not part of one):
    /// that stream is reset (CANCEL) and the connection asked to go away too (on the splice).
    /// 0: never.
    #[serde(with = "humantime_serde")]
    pub idle_timeout: Duration,
    /// A header block begun (HEADERS without END_HEADERS) and not finished by its last
    /// CONTINUATION within this long ends the connection: GOAWAY PROTOCOL_ERROR (a slowloris
    /// peer holding a partial block). A frame of any kind part read this long does too.
    #[serde(with = "humantime_serde")]
    pub header_block_timeout: Duration,
    /// Bytes the gateway holds, all connections together: requests of the calls it reads
    /// itself (translated or refused calls, whose message it needs whole, and its own services'
    /// streams), and replies waiting for a client that does not read them. Once they hold this
    /// much, no connection is granted window for more (WINDOW_UPDATE withheld) and a connection
    /// holding replies takes no more of the plugin's until some is let go, so that clients that
    /// never finish their messages, or never read, hold about this (a client sending past its
    /// window gets FLOW_CONTROL_ERROR).
    pub max_buffered_bytes: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_connections: 1024,
            max_concurrent_streams: 1024,
            max_header_list_size: 16 * 1024,
            max_resets_per_second: 200,
            idle_timeout: Duration::from_secs(600),
            header_block_timeout: Duration::from_secs(10),
            max_buffered_bytes: 256 * 1024 * 1024,
        }
    }
}

/// Request bytes buffered on one connection past which it is granted no more window, whatever
/// the gateway's total: two of the largest messages, so that one connection cannot take the
/// whole budget (`max_buffered_bytes`), and one message can always be finished.
pub const CONNECTION_BUFFERED: usize = 2 * (crate::grpc::MAX_MESSAGE_BYTES + 5);
