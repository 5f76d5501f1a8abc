//! CSI v0.3 (package `csi.v0`; v0.2 peers speak a subset) ↔ hub (v1), field by field.
//!
//! What changed from v0.3 to v1 (each override below says which):
//! - secrets: one map per RPC (`controller_create_secrets`, `node_stage_secrets`, …) → `secrets`.
//! - `volume_attributes` / `Volume.attributes` → `volume_context`; `publish_info` →
//!   `publish_context`; `Volume.id` → `volume_id`; `Snapshot.id` → `snapshot_id`.
//! - `Snapshot.created_at` (int64 ns) + `status` → `creation_time` (Timestamp) + `ready_to_use`.
//! - `ValidateVolumeCapabilitiesResponse.supported` → `confirmed` (present = supported).
//! - `NodeGetId` (deprecated in v0.3, removed in v1) → `NodeGetInfo`.
//! - v1-only RPCs (expansion, stats, modify, get-volume/snapshot, group snapshots) → UNIMPLEMENTED;
//!   v1-only fields the plugin cannot honour → INVALID_ARGUMENT naming the field.

use prost::Message;
use tonic::Status;

use super::capabilities::{self, CONTROLLER, NODE, PLUGIN_SERVICE};
use super::{front_msg, hub_reply, missing_rpc, unsupported_field, upstream_msg, FrontCall};
use crate::dialect::proto::v0_3 as d;
use crate::dialect::Dialect;
use crate::hub::{v1, Method, Request as Req, Response as Resp};

const D: Dialect = Dialect::V0_3;

super::volume_capability_conversions!(v0_3, D);

fn caps_to_hub(c: Vec<d::VolumeCapability>) -> Vec<v1::VolumeCapability> {
    c.into_iter().map(cap_to_hub).collect()
}

fn topo_to_hub(t: d::Topology) -> v1::Topology {
    v1::Topology {
        segments: t.segments,
    }
}
fn topo_from_hub(t: v1::Topology) -> d::Topology {
    d::Topology {
        segments: t.segments,
    }
}

fn req_to_hub(t: d::TopologyRequirement) -> v1::TopologyRequirement {
    v1::TopologyRequirement {
        requisite: t.requisite.into_iter().map(topo_to_hub).collect(),
        preferred: t.preferred.into_iter().map(topo_to_hub).collect(),
    }
}
fn req_from_hub(t: v1::TopologyRequirement) -> d::TopologyRequirement {
    d::TopologyRequirement {
        requisite: t.requisite.into_iter().map(topo_from_hub).collect(),
        preferred: t.preferred.into_iter().map(topo_from_hub).collect(),
    }
}

fn source_to_hub(s: d::VolumeContentSource) -> v1::VolumeContentSource {
    use v1::volume_content_source as h;
    v1::VolumeContentSource {
        r#type: s.r#type.map(|t| match t {
            d::volume_content_source::Type::Snapshot(s) => {
                h::Type::Snapshot(h::SnapshotSource { snapshot_id: s.id })
            }
        }),
    }
}
/// v1.0 added cloning (`VolumeSource`): a v0.3 plugin cannot honour it.
fn source_from_hub(
    s: v1::VolumeContentSource,
    field: &str,
) -> Result<d::VolumeContentSource, Status> {
    use v1::volume_content_source as h;
    Ok(d::VolumeContentSource {
        r#type: match s.r#type {
            None => None,
            Some(h::Type::Snapshot(s)) => Some(d::volume_content_source::Type::Snapshot(
                d::volume_content_source::SnapshotSource { id: s.snapshot_id },
            )),
            Some(h::Type::Volume(_)) => {
                return Err(unsupported_field(&format!("{field}.volume (cloning)"), D))
            }
        },
    })
}

pub(crate) fn volume_to_hub(v: d::Volume) -> v1::Volume {
    v1::Volume {
        capacity_bytes: v.capacity_bytes,
        volume_id: v.id,
        volume_context: v.attributes,
        content_source: v.content_source.map(source_to_hub),
        accessible_topology: v.accessible_topology.into_iter().map(topo_to_hub).collect(),
    }
}
/// A reply to a v0.3 client: a clone source (v1.0) cannot be expressed and is left out — the
/// client could not have asked for it.
pub(crate) fn volume_from_hub(v: v1::Volume) -> d::Volume {
    d::Volume {
        capacity_bytes: v.capacity_bytes,
        id: v.volume_id,
        attributes: v.volume_context,
        content_source: v
            .content_source
            .and_then(|s| source_from_hub(s, "volume.content_source").ok()),
        accessible_topology: v
            .accessible_topology
            .into_iter()
            .map(topo_from_hub)
            .collect(),
    }
}

/// v0.3 `created_at` is int64 nanoseconds since the epoch; v1 uses a Timestamp. v0.3 `status`
/// READY ↔ `ready_to_use`; UPLOADING and ERROR_UPLOADING are not ready (v1 has no upload state).
pub(crate) fn snapshot_to_hub(s: d::Snapshot) -> v1::Snapshot {
    let ready =
        s.status.as_ref().map(|st| st.r#type) == Some(d::snapshot_status::Type::Ready as i32);
    v1::Snapshot {
        size_bytes: s.size_bytes,
        snapshot_id: s.id,
        source_volume_id: s.source_volume_id,
        creation_time: (s.created_at != 0).then(|| prost_types::Timestamp {
            seconds: s.created_at.div_euclid(1_000_000_000),
            nanos: s.created_at.rem_euclid(1_000_000_000) as i32,
        }),
        ready_to_use: ready,
        group_snapshot_id: String::new(),
    }
}
/// A Timestamp beyond int64 nanoseconds (after year 2262) is OUT_OF_RANGE, never wrapped.
pub(crate) fn snapshot_from_hub(s: v1::Snapshot) -> Result<d::Snapshot, Status> {
    let created_at = match s.creation_time {
        None => 0,
        Some(t) => t
            .seconds
            .checked_mul(1_000_000_000)
            .and_then(|ns| ns.checked_add(i64::from(t.nanos)))
            .ok_or_else(|| {
                Status::out_of_range(format!(
                    "snapshot creation_time {}s does not fit v0.3 created_at (int64 ns)",
                    t.seconds
                ))
            })?,
    };
    use d::snapshot_status::Type as St;
    Ok(d::Snapshot {
        size_bytes: s.size_bytes,
        id: s.snapshot_id,
        source_volume_id: s.source_volume_id,
        created_at,
        status: Some(d::SnapshotStatus {
            r#type: if s.ready_to_use {
                St::Ready
            } else {
                St::Uploading
            } as i32,
            details: String::new(),
        }),
    })
}

fn range_to_hub(r: d::CapacityRange) -> v1::CapacityRange {
    v1::CapacityRange {
        required_bytes: r.required_bytes,
        limit_bytes: r.limit_bytes,
    }
}
fn range_from_hub(r: v1::CapacityRange) -> d::CapacityRange {
    d::CapacityRange {
        required_bytes: r.required_bytes,
        limit_bytes: r.limit_bytes,
    }
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
fn node_caps_to_hub(c: Vec<d::NodeServiceCapability>) -> Vec<v1::NodeServiceCapability> {
    use d::node_service_capability::Type as T;
    c.into_iter()
        .filter_map(|c| match c.r#type? {
            T::Rpc(r) => capabilities::to_hub(NODE, D, r.r#type),
        })
        .map(capabilities::v1_node_cap)
        .collect()
}
fn node_caps_from_hub(c: Vec<v1::NodeServiceCapability>) -> Vec<d::NodeServiceCapability> {
    use d::node_service_capability as t;
    capabilities::v1_node_values(c)
        .filter_map(|v| capabilities::from_hub(NODE, D, v))
        .map(|v| d::NodeServiceCapability {
            r#type: Some(t::Type::Rpc(t::Rpc { r#type: v })),
        })
        .collect()
}
fn plugin_caps_to_hub(c: Vec<d::PluginCapability>) -> Vec<v1::PluginCapability> {
    use d::plugin_capability::Type as T;
    c.into_iter()
        .filter_map(|c| match c.r#type? {
            T::Service(s) => capabilities::to_hub(PLUGIN_SERVICE, D, s.r#type),
        })
        .map(capabilities::v1_plugin_cap)
        .collect()
}
/// v1.1 `VolumeExpansion` has no v0.3 counterpart and is dropped.
fn plugin_caps_from_hub(c: Vec<v1::PluginCapability>) -> Vec<d::PluginCapability> {
    use d::plugin_capability as t;
    capabilities::v1_plugin_values(c)
        .filter_map(|v| capabilities::from_hub(PLUGIN_SERVICE, D, v))
        .map(|v| d::PluginCapability {
            r#type: Some(t::Type::Service(t::Service { r#type: v })),
        })
        .collect()
}

#[path = "v0_3_front.rs"]
mod front;
#[path = "v0_3_upstream.rs"]
mod upstream;
pub(crate) use front::{front_reply, front_request};
pub(crate) use upstream::{
    node_get_id_reply, upstream_reply, upstream_request, validate_reply, NODE_GET_ID,
};

#[cfg(test)]
#[path = "v0_3_tests.rs"]
pub(crate) mod tests;
