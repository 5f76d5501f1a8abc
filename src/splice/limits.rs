//! What one client connection may make the gateway do, the same on every path (spliced,
//! translated, unattached): set by `[listen.limits]` in the configuration (`Limits`), fitted
//! to the open-files limit at start, and the connection's own bounds — the preface's timeout,
//! header-list abuse, the wait for room in the gateway's budget and its answers, the refusal
//! of a connection past `max_connections`. The budgets every connection shares (`Budget`,
//! `Rate`) are the call layer's (`call::budget`), held in `call::Shared`.

use std::time::Duration;

pub use crate::config::limits::{Limits, CONNECTION_BUFFERED};

/// File descriptors a client connection holds: its own, and its connection to the plugin.
const FDS_PER_CONNECTION: u64 = 2;

/// File descriptors kept for everything else: listeners, the metrics endpoint, the store, the
/// supervisor's upstream connection, the embedded plugin, refused connections lingering.
const FDS_RESERVED: u64 = 64;

/// Raises the open-files limit (RLIMIT_NOFILE) to its hard limit, as far as the kernel lets
/// an unprivileged process, and lowers `max_connections` to what that limit can hold: past it,
/// accept would fail with EMFILE for every client instead of the gateway refusing one politely
/// (a common soft limit of 1024 held 520 idle connections at 2 descriptors each).
pub fn fit_open_files(mut limits: Limits) -> Limits {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let before = getrlimit(Resource::Nofile);
    let soft = match (before.current, before.maximum) {
        (Some(soft), Some(hard)) if soft < hard => {
            let raised = Rlimit {
                current: Some(hard),
                maximum: Some(hard),
            };
            match setrlimit(Resource::Nofile, raised) {
                Ok(()) => {
                    tracing::info!(
                        from = soft,
                        to = hard,
                        "open-files limit raised to its hard limit"
                    );
                    hard
                }
                Err(e) => {
                    tracing::warn!(soft, hard, error = %e, "cannot raise the open-files limit");
                    soft
                }
            }
        }
        (Some(soft), _) => soft,
        (None, _) => return limits, // unlimited
    };
    let fits = connections_within(soft);
    if limits.max_connections > fits {
        tracing::warn!(
            configured = limits.max_connections,
            effective = fits,
            open_files = soft,
            "listen.limits.max_connections lowered to what the open-files limit holds (2 descriptors a connection, {FDS_RESERVED} kept); raise the limit (LimitNOFILE, ulimit -n) to serve more"
        );
        limits.max_connections = fits;
    }
    limits
}

/// Client connections an open-files limit of `soft` holds.
fn connections_within(soft: u64) -> usize {
    (soft.saturating_sub(FDS_RESERVED) / FDS_PER_CONNECTION).max(1) as usize
}

/// `appliance.max_connections` lowered to what the open-files limit holds (once
/// [`fit_open_files`] raised it), as `max_connections` is: each listener's limit fits on its
/// own.
pub fn fit_appliance_connections(max: usize) -> usize {
    let Some(soft) = rustix::process::getrlimit(rustix::process::Resource::Nofile).current else {
        return max; // unlimited
    };
    let fits = connections_within(soft);
    if max > fits {
        tracing::warn!(
            configured = max,
            effective = fits,
            open_files = soft,
            "appliance.max_connections lowered to what the open-files limit holds (2 descriptors a connection, {FDS_RESERVED} kept); raise the limit (LimitNOFILE, ulimit -n) to serve more"
        );
        return fits;
    }
    max
}

/// A header list more than this many times `max_header_list_size` is not answered but ends
/// the connection (GOAWAY ENHANCE_YOUR_CALM), as h2's servers stop decoding there (its
/// `MAX_HEADER_LIST_ABUSE_MULTIPLIER`).
pub const HEADER_LIST_ABUSE: usize = 4;

/// How long a client may take to send its preface: fixed, since no legitimate client comes
/// near it.
pub const PREFACE_TIMEOUT: Duration = Duration::from_secs(10);

/// What a connection past `max_connections` gets before it is closed, on every path: the
/// server preface (an empty SETTINGS) and GOAWAY ENHANCE_YOUR_CALM naming stream 0, so that
/// the client reads why (no stream was processed: a gRPC client fails the attempt as
/// UNAVAILABLE and retries with its backoff) instead of a bare close.
pub fn refusal() -> bytes::BytesMut {
    use csi_gateway_wire::frame::{put_goaway, put_settings, reason, StreamId};
    let mut out = bytes::BytesMut::new();
    put_settings(&mut out, &[]);
    put_goaway(&mut out, StreamId::CONNECTION, reason::ENHANCE_YOUR_CALM);
    out
}

/// How long window may stay withheld before a request is refused (RESOURCE_EXHAUSTED) to make
/// room, on every path: requests that each wait for another to finish (three 4 MiB messages
/// at once on one connection, or every connection's under a full budget) would otherwise wait
/// until the idle timeout.
pub const BUDGET_WAIT: Duration = Duration::from_secs(10);

/// The answer to a request refused for room after [`BUDGET_WAIT`].
pub fn no_room() -> crate::grpc::Status {
    crate::grpc::Status::resource_exhausted(format!(
        "the gateway holds all the requests it may (max_buffered_bytes, or {CONNECTION_BUFFERED} bytes on this connection); this one waited {BUDGET_WAIT:?} for room"
    ))
}

/// The answer to a call the gateway would answer itself that found no room for its reply
/// within [`BUDGET_WAIT`]: the replies held for clients that do not read them fill the budget.
pub fn no_reply_room() -> crate::grpc::Status {
    crate::grpc::Status::resource_exhausted(format!(
        "the gateway holds all the replies it may (max_buffered_bytes) for clients that have not read them; this call waited {BUDGET_WAIT:?} for room for its reply"
    ))
}
