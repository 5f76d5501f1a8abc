//! csi-gateway-proto: the code generated from the protocol files, and the few types every
//! other crate of the workspace names a dialect or an RPC with. `build.rs` compiles the
//! repository's top-level `proto-v0/` and `proto-v1/`, and this crate's `proto-etcd/`, in pure
//! Rust (protox, no system `protoc`).
//!
//! - [`dialect`]: the four CSI wire dialects — [`dialect::Dialect`], each one's generated
//!   prost/tonic types ([`dialect::proto`]), descriptors and gRPC method table.
//! - [`hub`]: the hub model (CSI v1) every translated call passes through: one enum variant per
//!   unary RPC, generated from the v1 descriptor.
//! - [`identical`]: which v0.3/v1 RPCs are wire-compatible, decided from the descriptors (the
//!   gateway's wire-identical fast path).
//! - [`etcd`]: etcd's KV API client, for the gateway's etcd state store.
//!
//! Its own crate so that the generated code (the largest part of any build) is compiled once
//! and is not rebuilt when the gateway, the reference backend or the load tool changes.
#![forbid(unsafe_code)]

pub mod dialect;
pub mod etcd;
pub mod hub;
pub mod identical;
