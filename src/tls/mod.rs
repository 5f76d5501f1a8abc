//! The remote appliance bridge's TLS: CSI over mutually authenticated TLS on TCP — the dialer
//! of a TCP upstream, the acceptor with its peer allow-list, certificate reloads, the
//! development PKI. It is the `csi-gateway-tls` crate (crates/tls), shared with the reference
//! backend's TCP listener, and re-exported here whole, below the call: the gateway's
//! appliance listener, which serves admitted peers with the front, is the connection layer's
//! (`splice::appliance`).
//!
//! Plaintext TCP is refused by design: a CSI plugin holds the keys to the storage, and the
//! bridge crosses a network.

pub use csi_gateway_tls::*;
