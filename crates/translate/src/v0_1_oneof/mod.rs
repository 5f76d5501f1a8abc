//! The September 2017 draft (`v0.1-oneof`, package `csi`) ↔ hub (v1), field by field.
//!
//! - [`generated`]: the same-name field copies, generated from the descriptors
//!   (`translate::codegen`); [`overrides`]: the rest, each entry saying which revision changed
//!   it. [`front`] and [`upstream`] dispatch by RPC over those conversions and wrap the draft's
//!   `oneof reply`.
//!
//! What changed from the draft to v0.1.0 and on to v1 (each override says which):
//! - replies: gRPC OK + `oneof reply { result, error }` → gRPC status codes (v0.1.0). Errors go
//!   through the tables in [`crate::errors`]; the idempotency rows turn some draft
//!   errors into success.
//! - `VolumeHandle { id, metadata }` → `volume_id` + `attributes` (v0.1.0) → `volume_context`.
//!   Calls that carry only the id need the metadata for a draft plugin: `upstream.rs` reads it
//!   from the durable handle store.
//! - `NodeID { values }` → `string node_id` (v0.1.0): see [`crate::ids`].
//! - `Credentials { data }` → `user_credentials` (v0.1.0) → per-RPC secrets (v0.2) → `secrets`.
//! - `PublishVolumeInfo { values }` → `publish_volume_info` (v0.1.0) → `publish_context`.
//! - capacities `uint64` → `int64` (v0.2): out-of-range values are OUT_OF_RANGE.
//! - `ProbeNode` → `NodeProbe` (v0.1.0) → `Probe` (v0.2); `GetNodeID` → `NodeGetInfo`.

use crate::dialect::proto::v0_1_oneof as d;
use crate::dialect::Dialect;
use crate::errors;
use crate::version::{self, FrontVersionError, Version};

mod front;
#[rustfmt::skip]
mod generated;
mod overrides;
mod upstream;

pub(crate) use front::{front_reply, front_request};
pub(crate) use upstream::{upstream_reply, upstream_request};

const D: Dialect = Dialect::V0_1Oneof;

/// Every draft reply is `oneof reply { Result result = 1; Error error = 2; }`, so the error
/// branch of any RPC's reply has the same encoding: field 2 holding the `Error`.
pub fn error_reply(e: &d::Error) -> Vec<u8> {
    let mut out = Vec::new();
    prost::encoding::message::encode(2, e, &mut out);
    out
}

/// A draft client's version check. A missing or unserved version is answered by the gateway
/// with OK + `GeneralError` (must not retry): UNSUPPORTED_REQUEST_VERSION or
/// MISSING_REQUIRED_FIELD, as the draft prescribes.
fn check_version(v: &Option<d::Version>) -> Result<(), Vec<u8>> {
    use d::error::general_error::GeneralErrorCode as G;
    version::check_front_version(D, (*v).map(Version::from)).map_err(|e| {
        let code = match e {
            FrontVersionError::Missing => G::MissingRequiredField,
            FrontVersionError::Unsupported(_) => G::UnsupportedRequestVersion,
        };
        error_reply(&errors::general_error(code, true, e.message(D)))
    })
}

/// The outcome of a draft plugin's reply: its result, or a draft error that is success since
/// v0.1.0 (the idempotency rows), with the plugin's description.
pub(crate) enum Outcome<T> {
    Result(T),
    Success(String),
}

#[cfg(test)]
pub(crate) mod tests;
