//! CSI v0.1.0 (package `csi`, gRPC status codes) ↔ hub (v1), field by field.
//!
//! - [`generated`]: the same-name field copies, generated from the descriptors
//!   (`translate::codegen`); [`overrides`]: the rest, each entry saying which revision changed
//!   it. [`front`] and [`upstream`] dispatch by RPC over those conversions.
//!
//! What changed from v0.1 to v1 (each override says which):
//! - every v0.1 request names its `version` (removed in v0.2): checked on the front side,
//!   filled in from the negotiated version on the upstream side.
//! - `user_credentials` (v0.1) → per-RPC secrets (v0.2) → `secrets` (v1).
//! - `volume_attributes` / `VolumeInfo.attributes` → `volume_context`; `publish_volume_info` →
//!   `publish_context`; `VolumeInfo` → `Volume`.
//! - capacities `uint64` → `int64` (v0.2): out-of-range values are OUT_OF_RANGE, never wrapped.
//! - `ControllerProbe` + `NodeProbe` → `Probe` (v0.2); `GetNodeID` → `NodeGetId` (v0.2) →
//!   `NodeGetInfo`; `GetSupportedVersions` removed in v0.2 (the gateway answers it).
//! - v0.1 has no snapshots, staging, topology, cloning, expansion: UNIMPLEMENTED / INVALID_ARGUMENT.

use tonic::Status;

use crate::dialect::proto::v0_1 as d;
use crate::dialect::Dialect;
use crate::version::{self, Version};

mod front;
#[rustfmt::skip]
mod generated;
mod overrides;
mod upstream;

pub(crate) use front::{front_reply, front_request};
pub(crate) use upstream::{
    probe_requests, upstream_reply, upstream_request, CONTROLLER_PROBE, NODE_PROBE,
};

const D: Dialect = Dialect::V0_1;

/// Checks a front request's `version`: v0.1.0 "Unsupported request version | 3 INVALID_ARGUMENT".
fn check_version(v: &Option<d::Version>) -> Result<(), Status> {
    version::check_front_version(D, (*v).map(Version::from))
        .map_err(|e| Status::invalid_argument(e.message(D)))
}

/// The negotiated version to put into every upstream request.
fn upstream_version(v: Option<Version>) -> Result<Option<d::Version>, Status> {
    v.map(|v| Some(v.into())).ok_or_else(|| {
        Status::failed_precondition("no CSI version was negotiated with the v0.1 plugin")
    })
}

#[cfg(test)]
pub(crate) mod tests;
