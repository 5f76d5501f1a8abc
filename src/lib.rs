//! csi-gateway: serves every Container Storage Interface dialect on one socket and translates
//! each call to a plugin of any dialect through one hub model (CSI v1).
//!
//! The modules follow the data path:
//! - [`dialect`]: the four wire dialects — generated types, descriptors and method tables.
//! - [`hub`]: the hub model (CSI v1) every call is translated through.
#![forbid(unsafe_code)]

pub mod dialect;
pub mod hub;

/// The reference CSI plugin (all four dialects) the gateway is tested against.
pub mod backend;
