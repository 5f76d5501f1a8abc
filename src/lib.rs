//! csi-gateway: serves every Container Storage Interface dialect on one socket and translates
//! each call to a plugin of any dialect through one hub model (CSI v1).
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
//!   [`target`]: the target paths a v1 client leaves to a v0.x plugin.
//! - [`observe`] and [`metrics`]: the log line and metrics every call leaves; secret stripping.
//!
//! Around them: [`endpoint`] (endpoint syntax), [`check`] (identify any CSI endpoint),
//! [`conformance`] (`check --conformance`: a lifecycle scenario against any endpoint),
//! [`validate`] (spec validation rules),
//! [`embedded`] (the reference backend run in-process), [`load`] (the load tool), and
//! [`backend`]: the reference CSI plugin (all four dialects) the gateway is tested against.
#![forbid(unsafe_code)]

pub mod config;
pub mod gateway;

pub mod front;
pub mod grpc;
pub mod splice;

pub mod dialect;
pub mod hub;
pub mod translate;
pub mod validate;

pub mod staging;
pub mod store;
pub mod target;
pub mod tls;
pub mod upstream;

pub mod metrics;
pub mod observe;

pub mod check;
pub mod conformance;
pub mod embedded;
pub mod endpoint;
pub mod load;

pub mod backend;
