//! CSI v0.1.0 (package `csi`, gRPC status codes) ↔ hub (v1), field by field.
//!
//! What changed from v0.1 to v1 (each override below says which):
//! - every v0.1 request names its `version` (removed in v0.2): checked on the front side,
//!   filled in from the negotiated version on the upstream side.
//! - `user_credentials` (v0.1) → per-RPC secrets (v0.2) → `secrets` (v1).
//! - `volume_attributes` / `VolumeInfo.attributes` → `volume_context`; `publish_volume_info` →
//!   `publish_context`; `VolumeInfo` → `Volume`.
//! - capacities `uint64` → `int64` (v0.2): out-of-range values are OUT_OF_RANGE, never wrapped.
//! - `ControllerProbe` + `NodeProbe` → `Probe` (v0.2); `GetNodeID` → `NodeGetId` (v0.2) →
//!   `NodeGetInfo`; `GetSupportedVersions` removed in v0.2 (the gateway answers it).
//! - v0.1 has no snapshots, staging, topology, cloning, expansion: UNIMPLEMENTED / INVALID_ARGUMENT.

use std::collections::HashMap;

use prost::Message;
use tonic::Status;

use super::capabilities::{self, CONTROLLER};
use super::version::{self, Version};
use super::{
    front_msg, hub_reply, i64_to_u64, missing_rpc, u64_to_i64, unsupported_field, upstream_msg,
    FrontCall,
};
use crate::dialect::proto::v0_1 as d;
use crate::dialect::Dialect;
use crate::hub::{v1, Method, Request as Req, Response as Resp};

const D: Dialect = Dialect::V0_1;

super::volume_capability_conversions!(v0_1, D);

fn caps_to_hub(c: Vec<d::VolumeCapability>) -> Vec<v1::VolumeCapability> {
    c.into_iter().map(cap_to_hub).collect()
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

fn volume_to_hub(v: d::VolumeInfo) -> Result<v1::Volume, Status> {
    Ok(v1::Volume {
        capacity_bytes: u64_to_i64(v.capacity_bytes, "capacity_bytes")?,
        volume_id: v.id,
        volume_context: v.attributes,
        ..Default::default()
    })
}
/// A reply to a v0.1 client: content source and topology (v0.3+) cannot be expressed; the client
/// could not have asked for them.
fn volume_from_hub(v: v1::Volume) -> Result<d::VolumeInfo, Status> {
    Ok(d::VolumeInfo {
        capacity_bytes: i64_to_u64(v.capacity_bytes, "capacity_bytes")?,
        id: v.volume_id,
        attributes: v.volume_context,
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

/// `max_entries` became int32 in v0.2; a negative value is invalid in v1.
fn max_entries_from_hub(v: i32) -> Result<u32, Status> {
    u32::try_from(v).map_err(|_| Status::invalid_argument(format!("max_entries = {v} is negative")))
}
fn max_entries_to_hub(v: u32) -> Result<i32, Status> {
    i32::try_from(v)
        .map_err(|_| Status::out_of_range(format!("max_entries = {v} does not fit int32")))
}

#[path = "v0_1_front.rs"]
mod front;
#[path = "v0_1_upstream.rs"]
mod upstream;
pub(crate) use front::{front_reply, front_request};
pub(crate) use upstream::{
    probe_requests, upstream_reply, upstream_request, CONTROLLER_PROBE, NODE_PROBE,
};

/// Checks a front request's `version`: v0.1.0 "Unsupported request version | 3 INVALID_ARGUMENT".
fn check_version(v: Option<d::Version>) -> Result<(), Status> {
    version::check_front_version(D, v.map(Version::from))
        .map_err(|e| Status::invalid_argument(e.message(D)))
}

/// The negotiated version to put into every upstream request.
fn upstream_version(v: Option<Version>) -> Result<Option<d::Version>, Status> {
    v.map(|v| Some(v.into())).ok_or_else(|| {
        Status::failed_precondition("no CSI version was negotiated with the v0.1 plugin")
    })
}

#[cfg(test)]
#[path = "v0_1_tests.rs"]
pub(crate) mod tests;
