//! csi-gateway: serves every Container Storage Interface dialect on one socket and translates
//! each call to a plugin of any dialect through one hub model (CSI v1).
//!
//! The workspace (docs/architecture.md, "Layout"): this package is the gateway, its library and its binary;
//! beside it, in `crates/`:
//! - `csi-gateway-wire` (crates/wire): HTTP/2 frames, HPACK and gRPC header values, as pure
//!   functions over bytes (the wire layer below);
//! - `csi-gateway-translate` (crates/translate): everything that knows two dialects, on the
//!   protos alone, re-exported here as [`translate`];
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
//! A call crosses three layers, top down; arrows point down only, and the folders of `src/`
//! name each other without a cycle (`tests/layers.rs` checks both, and that every file is in
//! a layer):
//! - **connection** — [`splice`]: the listeners that accept client connections, on the UNIX
//!   socket (`splice::listener`, `splice::socket`) and on the appliance listener over mutual
//!   TLS (`splice::appliance`); and the one HTTP/2 front (`splice::conn`): a client
//!   connection's frames copied onto an upstream connection of its own, only header blocks
//!   decoded; a stream's work, whatever its kind (relayed, translated, answered by the gateway
//!   itself in `conn::local`, a stream of its own services in `conn::service`), on one borrow
//!   bundle of what a stream may touch (`conn::calls`); a connection for which none could be had at accept
//!   starts as one whose upstream went (`Splice::unattached`), its calls answered on the
//!   gateway's shared upstream connection. What one connection may make the gateway do is
//!   `splice::limits`.
//! - **call** — [`call`]: what becomes of one call, without a transport — its route by gRPC
//!   path ([`call::router`]), its plan ([`call::plan`], one decision for every path), its
//!   answer and rescue, protection, the driver's guardian ([`call::guard`]: single flight,
//!   calls that outlive their caller) and request checks, the gateway's own services
//!   ([`call::services`]: reflection, health), and its one pipeline to the plugin
//!   ([`call::Pipeline`]: [`call::paths`] (target paths) → [`call::staging`] emulation →
//!   translation); what every call needs, shared by all connections ([`call::Shared`]), with
//!   the budgets they all count against ([`call::budget`]: every byte held against
//!   `max_buffered_bytes` is a `Hold`, which gives itself back when dropped).
//! - **wire** — `csi-gateway-wire`: frames and HPACK; and beside it [`translate`]: each dialect
//!   to and from the hub model (CSI v1), error and capability tables, wire-identical calls,
//!   each dialect's secrets.
//!
//! Below the call, used by all: [`config`] (the TOML file, `CSI_ENDPOINT` and flags, validated
//! before anything binds, and the types of `[listen.limits]` and `[calls]`), [`upstream`] (the
//! plugin: connection, dialect detection, version negotiation, reconnects), [`grpc`] (gRPC
//! framing and status over HTTP/2), [`store`] (durable gateway state, embedded or on etcd),
//! [`observe`] and [`metrics`] (the log line and metrics every call leaves; secret stripping),
//! [`validate`] (spec validation rules), [`tls`] (the remote appliance bridge's mutual TLS on
//! TCP, docs/bridge.md), [`backoff`] (retry pauses), [`disk`] (file work off the runtime) and
//! [`endpoint`] (endpoint syntax).
//! [`gateway`] assembles the pieces and starts them, top to bottom.
//!
//! Around them: [`ops`] (the operations endpoint: `/metrics`, `/healthz`, `/readyz`, `/livez`,
//! and its client, `csi-gateway health`), [`check`] (identify any CSI endpoint),
//! [`conformance`] (`check --conformance`: a lifecycle scenario against any endpoint), and
//! [`embedded`] (the reference backend run in-process).
//!
//! Cargo features: `test-hooks` (off unless the test suite builds it), the hidden
//! `--test-crash-at` flag ([`call::staging`]'s crash hook); `embedded-backend` (on by
//! default), the reference backend [`embedded`] runs.
#![forbid(unsafe_code)]

pub mod backoff;
pub mod config;
pub mod disk;
pub mod gateway;

pub mod call;
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
pub mod ops;

pub mod check;
pub mod conformance;
pub mod embedded;
pub mod endpoint;
