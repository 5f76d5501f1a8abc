//! csi-gateway: serves every Container Storage Interface dialect on one socket and translates
//! each call to a plugin of any dialect through one hub model (CSI v1).
//!
//! The modules follow the data path:
//! - [`dialect`]: the four wire dialects — generated types, descriptors and method tables.
//! - [`hub`]: the hub model (CSI v1) every call is translated through.
#![forbid(unsafe_code)]

pub mod check;
pub mod config;
pub mod dialect;
pub mod embedded;
pub mod endpoint;
pub mod front;
pub mod gateway;
pub mod grpc;
pub mod hub;
pub mod load;
pub mod tls;
pub mod translate;
pub mod upstream;
