//! The September 2017 draft (`v0.1-oneof`, package `csi`) ↔ hub (v1), field by field.
//!
//! What changed from the draft to v0.1.0 and on to v1 (each override below says which):
//! - replies: gRPC OK + `oneof reply { result, error }` → gRPC status codes (v0.1.0). Errors go
//!   through the tables in [`super::errors`]; the idempotency rows turn some draft errors into
//!   success.
//! - `VolumeHandle { id, metadata }` → `volume_id` + `attributes` (v0.1.0) → `volume_context`.
//!   Calls that carry only the id need the metadata for a draft plugin: `upstream.rs` reads it
//!   from the durable handle store.
//! - `NodeID { values }` → `string node_id` (v0.1.0): see [`super::ids`].
//! - `Credentials { data }` → `user_credentials` (v0.1.0) → per-RPC secrets (v0.2) → `secrets`.
//! - `PublishVolumeInfo { values }` → `publish_volume_info` (v0.1.0) → `publish_context`.
//! - capacities `uint64` → `int64` (v0.2): out-of-range values are OUT_OF_RANGE.
//! - `ProbeNode` → `NodeProbe` (v0.1.0) → `Probe` (v0.2); `GetNodeID` → `NodeGetInfo`.

use std::collections::HashMap;

use prost::Message;
use tonic::Status;

use super::capabilities::{self, CONTROLLER};
use super::errors::{self, DraftRpc};
use super::version::{self, FrontVersionError, Version};
use super::{
    front_msg, hub_reply, i64_to_u64, ids, missing_rpc, u64_to_i64, unsupported_field,
    upstream_msg, FrontCall,
};
use crate::dialect::proto::v0_1_oneof as d;
use crate::dialect::Dialect;
use crate::hub::{v1, Method, Request as Req, Response as Resp};

const D: Dialect = Dialect::V0_1Oneof;

super::volume_capability_conversions!(v0_1_oneof, D);

fn caps_to_hub(c: Vec<d::VolumeCapability>) -> Vec<v1::VolumeCapability> {
    c.into_iter().map(cap_to_hub).collect()
}

fn creds(c: Option<d::Credentials>) -> HashMap<String, String> {
    c.map(|c| c.data).unwrap_or_default()
}
/// Empty secrets are sent as an absent `Credentials` (the draft makes it optional).
fn to_creds(m: HashMap<String, String>) -> Option<d::Credentials> {
    (!m.is_empty()).then_some(d::Credentials { data: m })
}

fn handle(id: String, metadata: HashMap<String, String>) -> Option<d::VolumeHandle> {
    Some(d::VolumeHandle { id, metadata })
}
fn handle_parts(h: Option<d::VolumeHandle>) -> (String, HashMap<String, String>) {
    h.map(|h| (h.id, h.metadata)).unwrap_or_default()
}

fn range_to_hub(r: d::CapacityRange) -> Result<v1::CapacityRange, Status> {
    Ok(v1::CapacityRange {
        required_bytes: u64_to_i64(r.required_bytes, "capacity_range.required_bytes")?,
        limit_bytes: u64_to_i64(r.limit_bytes, "capacity_range.limit_bytes")?,
    })
}
fn range_from_hub(r: v1::CapacityRange) -> Result<d::CapacityRange, Status> {
    Ok(d::CapacityRange {
        required_bytes: i64_to_u64(r.required_bytes, "capacity_range.required_bytes")?,
        limit_bytes: i64_to_u64(r.limit_bytes, "capacity_range.limit_bytes")?,
    })
}

/// `VolumeInfo { capacity_bytes, handle { id, metadata } }` → `Volume { volume_id,
/// volume_context }`.
fn volume_to_hub(v: d::VolumeInfo) -> Result<v1::Volume, Status> {
    let (id, metadata) = handle_parts(v.handle);
    Ok(v1::Volume {
        capacity_bytes: u64_to_i64(v.capacity_bytes, "capacity_bytes")?,
        volume_id: id,
        volume_context: metadata,
        ..Default::default()
    })
}
fn volume_from_hub(v: v1::Volume) -> Result<d::VolumeInfo, Status> {
    Ok(d::VolumeInfo {
        capacity_bytes: i64_to_u64(v.capacity_bytes, "capacity_bytes")?,
        handle: handle(v.volume_id, v.volume_context),
    })
}

fn ctrl_caps_to_hub(
    c: Vec<d::ControllerServiceCapability>,
) -> Vec<v1::ControllerServiceCapability> {
    use d::controller_service_capability::Type as T;
    c.into_iter()
        .filter_map(|c| match c.r#type? {
            T::Rpc(r) => capabilities::to_hub(CONTROLLER, D, r.r#type),
        })
        .map(capabilities::v1_ctrl_cap)
        .collect()
}
fn ctrl_caps_from_hub(
    c: Vec<v1::ControllerServiceCapability>,
) -> Vec<d::ControllerServiceCapability> {
    use d::controller_service_capability as t;
    capabilities::v1_ctrl_values(c)
        .filter_map(|v| capabilities::from_hub(CONTROLLER, D, v))
        .map(|v| d::ControllerServiceCapability {
            r#type: Some(t::Type::Rpc(t::Rpc { r#type: v })),
        })
        .collect()
}

/// Every draft reply is `oneof reply { Result result = 1; Error error = 2; }`, so the error
/// branch of any RPC's reply has the same encoding: field 2 holding the `Error`.
pub(crate) fn error_reply(e: &d::Error) -> Vec<u8> {
    let mut out = Vec::new();
    prost::encoding::message::encode(2, e, &mut out);
    out
}

/// A draft client's version check. A missing or unserved version is answered by the gateway
/// with OK + `GeneralError` (must not retry): UNSUPPORTED_REQUEST_VERSION or
/// MISSING_REQUIRED_FIELD, as the draft prescribes.
fn check_version(v: Option<d::Version>) -> Result<(), Vec<u8>> {
    use d::error::general_error::GeneralErrorCode as G;
    version::check_front_version(D, v.map(Version::from)).map_err(|e| {
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

#[path = "v0_1_oneof_front.rs"]
mod front;
#[path = "v0_1_oneof_upstream.rs"]
mod upstream;
pub(crate) use front::{front_reply, front_request};
pub(crate) use upstream::{upstream_reply, upstream_request};

#[cfg(test)]
#[path = "v0_1_oneof_tests.rs"]
pub(crate) mod tests;
