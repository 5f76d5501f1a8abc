//! CSI v0.3 (package `csi.v0`; v0.2 peers speak a subset) ↔ hub (v1), field by field.
//!
//! - [`generated`]: the same-name field copies, generated from the descriptors
//!   (`translate::codegen`); [`overrides`]: the rest, each entry saying which revision changed
//!   it. [`front`] and [`upstream`] dispatch by RPC over those conversions.
//!
//! What changed from v0.3 to v1 (each override says which):
//! - secrets: one map per RPC (`controller_create_secrets`, `node_stage_secrets`, …) → `secrets`.
//! - `volume_attributes` / `Volume.attributes` → `volume_context`; `publish_info` →
//!   `publish_context`; `Volume.id` → `volume_id`; `Snapshot.id` → `snapshot_id`.
//! - `Snapshot.created_at` (int64 ns) + `status` → `creation_time` (Timestamp) + `ready_to_use`.
//! - `ValidateVolumeCapabilitiesResponse.supported` → `confirmed` (present = supported).
//! - `NodeGetId` (deprecated in v0.3, removed in v1) → `NodeGetInfo`.
//! - v1-only RPCs (expansion, stats, modify, get-volume/snapshot, group snapshots) → UNIMPLEMENTED;
//!   v1-only fields the plugin cannot honour → INVALID_ARGUMENT naming the field.

use crate::dialect::Dialect;

mod front;
#[rustfmt::skip]
mod generated;
mod overrides;
mod upstream;

pub(crate) use front::{front_reply, front_request};
pub(crate) use upstream::{
    node_get_id_reply, upstream_reply, upstream_request, validate_reply, NODE_GET_ID,
};

const D: Dialect = Dialect::V0_3;

#[cfg(test)]
pub(crate) mod tests;
