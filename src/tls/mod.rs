//! The remote appliance bridge: CSI over mutually authenticated TLS on TCP. The TLS itself —
//! the dialer of a TCP upstream, the acceptor with its peer allow-list, certificate reloads,
//! the development PKI — is the `csi-gateway-tls` crate (crates/tls), shared with the
//! reference backend's TCP listener, and re-exported here whole; this module adds the
//! gateway's [`appliance`] listener, which serves admitted peers with the front.
//!
//! Plaintext TCP is refused by design: a CSI plugin holds the keys to the storage, and the
//! bridge crosses a network.

pub mod appliance;

pub use csi_gateway_tls::*;
