//! The two metrics TLS records, wherever it runs: the gateway describes and exports them with
//! its own (`csi-gateway`'s `metrics` module); elsewhere (the reference backend) no recorder is
//! installed and recording them does nothing.

use metrics::{counter, gauge};

pub const TLS_HANDSHAKE_FAILURES: &str = "csi_gateway_tls_handshake_failures_total";
pub const CERT_EXPIRY: &str = "csi_gateway_certificate_expiry_timestamp_seconds";

/// A refused or failed TLS handshake, by a bounded reason label.
pub fn tls_handshake_failure(reason: &'static str) {
    counter!(TLS_HANDSHAKE_FAILURES, "reason" => reason).increment(1);
}

/// The expiry time (Unix seconds) of the certificate loaded from `path`.
pub fn certificate_expiry(path: &str, not_after: f64) {
    gauge!(CERT_EXPIRY, "certificate" => path.to_string()).set(not_after);
}
