//! The wire layer: HTTP/2 frames (RFC 9113), HPACK (RFC 7541) and the few gRPC header fields
//! the gateway reads and writes, as pure functions over bytes. Nothing here does I/O, knows a
//! runtime, or knows the gateway: the connection layer (`csi_gateway::splice`) drives it.
//!
//! - [`frame`]: frame heads and stream ids, the checks RFC 9113 puts on each kind, and writing
//!   frames;
//! - [`flow`]: flow-control windows, with checked arithmetic;
//! - [`hpack`]: the header table, integers, string literals and the Huffman code;
//! - [`headers`]: header blocks as the splice needs them — decoding with the peer's context,
//!   reading a request's route and shape, re-encoding, and a reply's gRPC status;
//! - [`grpc`]: the message prefix and the gRPC header fields' values.

pub mod flow;
pub mod frame;
pub mod grpc;
pub mod headers;
pub mod hpack;
