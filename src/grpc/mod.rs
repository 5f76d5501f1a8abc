//! gRPC over HTTP/2: the few pieces the gateway's hot path needs on top of `h2` — message
//! framing, status in headers or trailers, and reading a body with flow control. `Status` and
//! `Code` are tonic's; the header encoding of a status is tonic's too.

pub mod body;
pub mod frame;
pub mod status;

pub use tonic::{Code, Status};

/// Largest message the gateway accepts or forwards (gRPC's customary default).
pub const MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;

/// The gRPC content type, and a client's deadline from its `grpc-timeout` header: the wire
/// layer's.
pub use csi_gateway_wire::grpc::{parse_timeout, CONTENT_TYPE};
