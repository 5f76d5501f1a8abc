//! csi-gateway: serves every Container Storage Interface dialect on one socket and translates
//! each call to a plugin of any dialect through one hub model (CSI v1).
//!
//! The workspace (README "Layout"): this package is the gateway, its library and its binary;
//! beside it, in `crates/`:
//! - `csi-gateway-proto` (crates/proto): the code generated from the `.proto` files — the four
//!   dialects, the hub model, the wire-identical verdicts, etcd's client — re-exported here as
//!   [`dialect`] and [`hub`];
//! - `csi-gateway-tls` (crates/tls): mutual TLS on TCP, re-exported here as [`tls`];
//! - `csi-gateway-mountinfo` (crates/mountinfo): whether a path is a mount point;
//! - `csi-gateway-backend` (crates/backend): the reference CSI plugin (binary
//!   `csi-reference-backend`), which the built-in default configuration runs in-process
//!   ([`embedded`]; an optional dependency, the `embedded-backend` feature);
//! - `csi-gateway-load` (crates/load): the load tool, on top of this library;
//! - `csi-gateway-test-support` (crates/test-support): what the tests in `tests/` share.
//!
//! The modules, in the order a call meets them:
//! - [`config`]: the TOML file, `CSI_ENDPOINT` and flags, validated before anything binds.
//! - [`gateway`]: the pieces assembled and started, top to bottom.
//! - [`front`]: the UNIX socket clients call; route table by gRPC path; one call's path.
//! - [`splice`]: the fast path — a client connection's HTTP/2 frames copied onto an upstream
//!   connection of its own, with only header blocks decoded; calls that need translation are
//!   answered on the same connection through [`front`]'s call path.
//! - [`grpc`]: gRPC framing and status over HTTP/2.
//! - [`dialect`]: the four wire dialects — generated types, descriptors and method tables.
//! - [`translate`]: conversions between each dialect and the hub; error and capability tables.
//! - [`hub`]: the hub model (CSI v1) every translated call passes through.
//! - [`upstream`]: the plugin: connection, dialect detection, version negotiation, reconnects.
//! - [`tls`]: the remote appliance bridge — mutual TLS to a TCP upstream, and the appliance
//!   listener with per-service authorization (docs/bridge.md).
//! - [`store`]: durable gateway state (VolumeHandle metadata for draft plugins), embedded or
//!   on etcd; [`staging`]: staging emulation for pre-staging clients, on that store;
//!   [`target`]: the node paths a v1 client leaves to the plugin side, owned by the hop that
//!   shares the CO's filesystem (across the bridge, the appliance mirrors them).
//! - [`observe`] and [`metrics`]: the log line and metrics every call leaves; secret stripping.
//!
//! Around them: [`endpoint`] (endpoint syntax), [`check`] (identify any CSI endpoint),
//! [`conformance`] (`check --conformance`: a lifecycle scenario against any endpoint),
//! [`validate`] (spec validation rules), and [`embedded`] (the reference backend run
//! in-process).
//!
//! Cargo features: `test-hooks` (off unless the test suite builds it), the hidden
//! `--test-crash-at` flag ([`staging`]'s crash hook); `embedded-backend` (on by default), the
//! reference backend [`embedded`] runs.
#![forbid(unsafe_code)]

pub mod backoff;
pub mod config;
pub mod disk;
pub mod gateway;

pub mod call;
pub mod front;
/// The call layer's steps, by their old names.
pub use call::{staging, target};
pub mod grpc;
pub mod splice;

pub use csi_gateway_proto::{dialect, hub};
/// Everything that knows two dialects: a crate of its own (`crates/translate`).
pub use csi_gateway_translate as translate;
pub mod validate;

pub mod store;
pub mod tls;
pub mod upstream;

pub mod metrics;
pub mod observe;

pub mod check;
pub mod conformance;
pub mod embedded;
pub mod endpoint;
