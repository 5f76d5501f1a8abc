//! The hand-written half of the v0.3 ↔ hub conversions: every field `generated.rs` does not copy
//! (renamed, retyped, or on one side only), each entry saying what changed in which revision.
//! The functions named like a generated one are called by it before its copies, with the
//! source (they take the fields they convert) and the target.

use std::mem::take;

use tonic::Status;

use super::D;
use crate::capabilities::{self, CONTROLLER, NODE, PLUGIN_SERVICE};
use crate::dialect::proto::v0_3 as d;
use crate::hub::v1;
use crate::{refuse_validate_parameters, unsupported_field};

// `VolumeCapability` (converted whole): v1.5 added `MountVolume.volume_mount_group` and the
// SINGLE_NODE_* access modes, refused towards a v0.3 plugin.
crate::volume_capability_conversions!(v0_3, D);

// Capabilities changed values in every revision: the tables in `capabilities`.
crate::capabilities::capability_list_conversions!(
    ctrl_caps_to_hub,
    ctrl_caps_from_hub,
    v0_3::ControllerServiceCapability,
    controller_service_capability::Rpc(Rpc),
    CONTROLLER,
    D,
    capabilities::v1_ctrl_cap,
    capabilities::v1_ctrl_values
);
crate::capabilities::capability_list_conversions!(
    node_caps_to_hub,
    node_caps_from_hub,
    v0_3::NodeServiceCapability,
    node_service_capability::Rpc(Rpc),
    NODE,
    D,
    capabilities::v1_node_cap,
    capabilities::v1_node_values
);
// v1.1 `VolumeExpansion` has no v0.3 counterpart and is dropped (`v1_plugin_values`).
crate::capabilities::capability_list_conversions!(
    plugin_caps_to_hub,
    plugin_caps_from_hub,
    v0_3::PluginCapability,
    plugin_capability::Service(Service),
    PLUGIN_SERVICE,
    D,
    capabilities::v1_plugin_cap,
    capabilities::v1_plugin_values
);

/// v0.3 → v1.0: `VolumeContentSource.SnapshotSource.id` → `snapshot_id`.
pub(super) fn source_to_hub(s: d::VolumeContentSource) -> v1::VolumeContentSource {
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
pub(super) fn source_from_hub(
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

// --- Volume, Snapshot

/// v1.0 renamed `Volume.id` → `volume_id` and `attributes` → `volume_context`.
pub(super) fn volume_to_hub(v: &mut d::Volume, to: &mut v1::Volume) -> Result<(), Status> {
    to.volume_id = take(&mut v.id);
    to.volume_context = take(&mut v.attributes);
    to.content_source = v.content_source.take().map(source_to_hub);
    Ok(())
}
/// A reply to a v0.3 client: a clone source (v1.0) cannot be expressed and is left out — the
/// client could not have asked for it.
pub(super) fn volume_from_hub(v: &mut v1::Volume, to: &mut d::Volume) -> Result<(), Status> {
    to.id = take(&mut v.volume_id);
    to.attributes = take(&mut v.volume_context);
    to.content_source = v
        .content_source
        .take()
        .and_then(|s| source_from_hub(s, "volume.content_source").ok());
    Ok(())
}

/// v1.0: `Snapshot.id` → `snapshot_id`; `created_at` (int64 ns since the epoch) → `creation_time`
/// (Timestamp); `status` READY → `ready_to_use` (UPLOADING and ERROR_UPLOADING are not ready:
/// v1 has no upload state). v1.11 `group_snapshot_id`: a v0.3 snapshot is in no group.
pub(super) fn snapshot_to_hub(s: &mut d::Snapshot, to: &mut v1::Snapshot) -> Result<(), Status> {
    to.snapshot_id = take(&mut s.id);
    to.creation_time = (s.created_at != 0).then(|| prost_types::Timestamp {
        seconds: s.created_at.div_euclid(1_000_000_000),
        nanos: s.created_at.rem_euclid(1_000_000_000) as i32,
    });
    to.ready_to_use =
        s.status.as_ref().map(|st| st.r#type) == Some(d::snapshot_status::Type::Ready as i32);
    Ok(())
}
/// The reverse of [`snapshot_to_hub`]: a Timestamp beyond int64 nanoseconds (after year 2262) is
/// OUT_OF_RANGE, never wrapped; not ready is UPLOADING. `group_snapshot_id` (v1.11) is dropped.
pub(super) fn snapshot_from_hub(s: &mut v1::Snapshot, to: &mut d::Snapshot) -> Result<(), Status> {
    to.created_at = match s.creation_time.take() {
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
    to.id = take(&mut s.snapshot_id);
    to.status = Some(d::SnapshotStatus {
        r#type: if s.ready_to_use {
            St::Ready
        } else {
            St::Uploading
        } as i32,
        details: String::new(),
    });
    Ok(())
}

// --- Controller

/// v1.0 merged the per-RPC secrets into `secrets` (here `controller_create_secrets`); v1.9
/// added `mutable_parameters`, none from a v0.3 client.
pub(super) fn create_volume_request_to_hub(
    r: &mut d::CreateVolumeRequest,
    to: &mut v1::CreateVolumeRequest,
) -> Result<(), Status> {
    to.secrets = take(&mut r.controller_create_secrets);
    to.volume_content_source = r.volume_content_source.take().map(source_to_hub);
    Ok(())
}
/// `secrets` → `controller_create_secrets`; a clone source (v1.0) and `mutable_parameters`
/// (v1.9) cannot be honoured by a v0.3 plugin.
pub(super) fn create_volume_request_from_hub(
    r: &mut v1::CreateVolumeRequest,
    to: &mut d::CreateVolumeRequest,
) -> Result<(), Status> {
    if !r.mutable_parameters.is_empty() {
        return Err(unsupported_field("mutable_parameters", D));
    }
    to.controller_create_secrets = take(&mut r.secrets);
    to.volume_content_source = r
        .volume_content_source
        .take()
        .map(|s| source_from_hub(s, "volume_content_source"))
        .transpose()?;
    Ok(())
}

/// v1.0: `controller_delete_secrets` → `secrets`.
pub(super) fn delete_volume_request_to_hub(
    r: &mut d::DeleteVolumeRequest,
    to: &mut v1::DeleteVolumeRequest,
) -> Result<(), Status> {
    to.secrets = take(&mut r.controller_delete_secrets);
    Ok(())
}
/// v1.0: `secrets` → `controller_delete_secrets`.
pub(super) fn delete_volume_request_from_hub(
    r: &mut v1::DeleteVolumeRequest,
    to: &mut d::DeleteVolumeRequest,
) -> Result<(), Status> {
    to.controller_delete_secrets = take(&mut r.secrets);
    Ok(())
}

/// v1.0: `controller_publish_secrets` → `secrets`, `volume_attributes` → `volume_context`.
pub(super) fn controller_publish_volume_request_to_hub(
    r: &mut d::ControllerPublishVolumeRequest,
    to: &mut v1::ControllerPublishVolumeRequest,
) -> Result<(), Status> {
    to.secrets = take(&mut r.controller_publish_secrets);
    to.volume_context = take(&mut r.volume_attributes);
    Ok(())
}
/// v1.0: `secrets` → `controller_publish_secrets`, `volume_context` → `volume_attributes`.
pub(super) fn controller_publish_volume_request_from_hub(
    r: &mut v1::ControllerPublishVolumeRequest,
    to: &mut d::ControllerPublishVolumeRequest,
) -> Result<(), Status> {
    to.controller_publish_secrets = take(&mut r.secrets);
    to.volume_attributes = take(&mut r.volume_context);
    Ok(())
}

/// v1.0: `publish_info` → `publish_context`.
pub(super) fn controller_publish_volume_response_to_hub(
    r: &mut d::ControllerPublishVolumeResponse,
    to: &mut v1::ControllerPublishVolumeResponse,
) -> Result<(), Status> {
    to.publish_context = take(&mut r.publish_info);
    Ok(())
}
/// v1.0: `publish_context` → `publish_info`.
pub(super) fn controller_publish_volume_response_from_hub(
    r: &mut v1::ControllerPublishVolumeResponse,
    to: &mut d::ControllerPublishVolumeResponse,
) -> Result<(), Status> {
    to.publish_info = take(&mut r.publish_context);
    Ok(())
}

/// v1.0: `controller_unpublish_secrets` → `secrets`.
pub(super) fn controller_unpublish_volume_request_to_hub(
    r: &mut d::ControllerUnpublishVolumeRequest,
    to: &mut v1::ControllerUnpublishVolumeRequest,
) -> Result<(), Status> {
    to.secrets = take(&mut r.controller_unpublish_secrets);
    Ok(())
}
/// v1.0: `secrets` → `controller_unpublish_secrets`.
pub(super) fn controller_unpublish_volume_request_from_hub(
    r: &mut v1::ControllerUnpublishVolumeRequest,
    to: &mut d::ControllerUnpublishVolumeRequest,
) -> Result<(), Status> {
    to.controller_unpublish_secrets = take(&mut r.secrets);
    Ok(())
}

/// v1.0: `volume_attributes` → `volume_context`; v0.3 `accessible_topology` was removed in v1.0
/// (no newer plugin can check it: refused); v1.0 `parameters`, `secrets` and v1.9
/// `mutable_parameters` are none from a v0.3 client.
pub(super) fn validate_volume_capabilities_request_to_hub(
    r: &mut d::ValidateVolumeCapabilitiesRequest,
    to: &mut v1::ValidateVolumeCapabilitiesRequest,
) -> Result<(), Status> {
    if !r.accessible_topology.is_empty() {
        return Err(Status::invalid_argument(
            "accessible_topology of ValidateVolumeCapabilities was removed in CSI v1; \
             the plugin behind the gateway cannot honour it",
        ));
    }
    to.volume_context = take(&mut r.volume_attributes);
    Ok(())
}
/// v1.0 added `parameters` and v1.9 `mutable_parameters` to validate against: a v0.3 plugin
/// cannot confirm them. `secrets` (v1.0) are left out: v0.3 has no field and the plugin never
/// asked for credentials on this call. `volume_context` → `volume_attributes`.
pub(super) fn validate_volume_capabilities_request_from_hub(
    r: &mut v1::ValidateVolumeCapabilitiesRequest,
    to: &mut d::ValidateVolumeCapabilitiesRequest,
) -> Result<(), Status> {
    refuse_validate_parameters(r, D)?;
    to.volume_attributes = take(&mut r.volume_context);
    Ok(())
}

/// v1.2 added per-entry `status` (published nodes): a v0.3 plugin reports none.
pub(super) fn list_volumes_response_entry_to_hub(
    _: &mut d::list_volumes_response::Entry,
    _: &mut v1::list_volumes_response::Entry,
) -> Result<(), Status> {
    Ok(())
}
/// v1.2 `status` is dropped for a v0.3 client.
pub(super) fn list_volumes_response_entry_from_hub(
    _: &mut v1::list_volumes_response::Entry,
    _: &mut d::list_volumes_response::Entry,
) -> Result<(), Status> {
    Ok(())
}

/// v1.4 `maximum_volume_size` and v1.11 `minimum_volume_size`: a v0.3 plugin reports neither.
pub(super) fn get_capacity_response_to_hub(
    _: &mut d::GetCapacityResponse,
    _: &mut v1::GetCapacityResponse,
) -> Result<(), Status> {
    Ok(())
}
/// v1.4 `maximum_volume_size` and v1.11 `minimum_volume_size` have no v0.3 field.
pub(super) fn get_capacity_response_from_hub(
    _: &mut v1::GetCapacityResponse,
    _: &mut d::GetCapacityResponse,
) -> Result<(), Status> {
    Ok(())
}

/// Controller capabilities changed values in every revision: the table in `capabilities`.
pub(super) fn controller_get_capabilities_response_to_hub(
    r: &mut d::ControllerGetCapabilitiesResponse,
    to: &mut v1::ControllerGetCapabilitiesResponse,
) -> Result<(), Status> {
    to.capabilities = ctrl_caps_to_hub(take(&mut r.capabilities));
    Ok(())
}
/// Only the capabilities a v0.3 client knows cross (the table in `capabilities`).
pub(super) fn controller_get_capabilities_response_from_hub(
    r: &mut v1::ControllerGetCapabilitiesResponse,
    to: &mut d::ControllerGetCapabilitiesResponse,
) -> Result<(), Status> {
    to.capabilities = ctrl_caps_from_hub(take(&mut r.capabilities));
    Ok(())
}

/// v1.0: `create_snapshot_secrets` → `secrets`.
pub(super) fn create_snapshot_request_to_hub(
    r: &mut d::CreateSnapshotRequest,
    to: &mut v1::CreateSnapshotRequest,
) -> Result<(), Status> {
    to.secrets = take(&mut r.create_snapshot_secrets);
    Ok(())
}
/// v1.0: `secrets` → `create_snapshot_secrets`.
pub(super) fn create_snapshot_request_from_hub(
    r: &mut v1::CreateSnapshotRequest,
    to: &mut d::CreateSnapshotRequest,
) -> Result<(), Status> {
    to.create_snapshot_secrets = take(&mut r.secrets);
    Ok(())
}

/// v1.0: `delete_snapshot_secrets` → `secrets`.
pub(super) fn delete_snapshot_request_to_hub(
    r: &mut d::DeleteSnapshotRequest,
    to: &mut v1::DeleteSnapshotRequest,
) -> Result<(), Status> {
    to.secrets = take(&mut r.delete_snapshot_secrets);
    Ok(())
}
/// v1.0: `secrets` → `delete_snapshot_secrets`.
pub(super) fn delete_snapshot_request_from_hub(
    r: &mut v1::DeleteSnapshotRequest,
    to: &mut d::DeleteSnapshotRequest,
) -> Result<(), Status> {
    to.delete_snapshot_secrets = take(&mut r.secrets);
    Ok(())
}

/// v1.x added `secrets` to ListSnapshots: none from a v0.3 client.
pub(super) fn list_snapshots_request_to_hub(
    _: &mut d::ListSnapshotsRequest,
    _: &mut v1::ListSnapshotsRequest,
) -> Result<(), Status> {
    Ok(())
}
/// v1.x `secrets` on ListSnapshots have no v0.3 field; the plugin never asked for them.
pub(super) fn list_snapshots_request_from_hub(
    _: &mut v1::ListSnapshotsRequest,
    _: &mut d::ListSnapshotsRequest,
) -> Result<(), Status> {
    Ok(())
}

// --- Identity

/// Plugin capabilities changed values in every revision: the table in `capabilities`.
pub(super) fn get_plugin_capabilities_response_to_hub(
    r: &mut d::GetPluginCapabilitiesResponse,
    to: &mut v1::GetPluginCapabilitiesResponse,
) -> Result<(), Status> {
    to.capabilities = plugin_caps_to_hub(take(&mut r.capabilities));
    Ok(())
}
/// v1.1 `VolumeExpansion` has no v0.3 counterpart and is dropped.
pub(super) fn get_plugin_capabilities_response_from_hub(
    r: &mut v1::GetPluginCapabilitiesResponse,
    to: &mut d::GetPluginCapabilitiesResponse,
) -> Result<(), Status> {
    to.capabilities = plugin_caps_from_hub(take(&mut r.capabilities));
    Ok(())
}

// --- Node

/// Node capabilities changed values in every revision: the table in `capabilities`.
pub(super) fn node_get_capabilities_response_to_hub(
    r: &mut d::NodeGetCapabilitiesResponse,
    to: &mut v1::NodeGetCapabilitiesResponse,
) -> Result<(), Status> {
    to.capabilities = node_caps_to_hub(take(&mut r.capabilities));
    Ok(())
}
/// Only the node capabilities a v0.3 client knows cross; none is `[UNKNOWN]`, the answer
/// v0.2 and v0.3 clients both accept (`capabilities::NODE_UNKNOWN_WHEN_EMPTY`).
pub(super) fn node_get_capabilities_response_from_hub(
    r: &mut v1::NodeGetCapabilitiesResponse,
    to: &mut d::NodeGetCapabilitiesResponse,
) -> Result<(), Status> {
    to.capabilities = node_caps_from_hub(take(&mut r.capabilities));
    if to.capabilities.is_empty() && capabilities::node_unknown_when_empty("v0.3") {
        use d::node_service_capability as n;
        to.capabilities.push(d::NodeServiceCapability {
            r#type: Some(n::Type::Rpc(n::Rpc {
                r#type: n::rpc::Type::Unknown as i32,
            })),
        });
    }
    Ok(())
}

/// v0.2 `NodeGetId` (deprecated in v0.3, removed in v1.0) answers only `node_id`; v0.3
/// `NodeGetInfo` added `max_volumes_per_node` and `accessible_topology`.
pub(super) fn node_get_id_response_to_hub(
    _: &mut d::NodeGetIdResponse,
    _: &mut v1::NodeGetInfoResponse,
) -> Result<(), Status> {
    Ok(())
}
/// A v0.2 client asking `NodeGetId` is told only the `node_id`.
pub(super) fn node_get_id_response_from_hub(
    _: &mut v1::NodeGetInfoResponse,
    _: &mut d::NodeGetIdResponse,
) -> Result<(), Status> {
    Ok(())
}

/// v1.0: `publish_info` → `publish_context`, `node_stage_secrets` → `secrets`,
/// `volume_attributes` → `volume_context`.
pub(super) fn node_stage_volume_request_to_hub(
    r: &mut d::NodeStageVolumeRequest,
    to: &mut v1::NodeStageVolumeRequest,
) -> Result<(), Status> {
    to.publish_context = take(&mut r.publish_info);
    to.secrets = take(&mut r.node_stage_secrets);
    to.volume_context = take(&mut r.volume_attributes);
    Ok(())
}
/// v1.0 renames, reversed.
pub(super) fn node_stage_volume_request_from_hub(
    r: &mut v1::NodeStageVolumeRequest,
    to: &mut d::NodeStageVolumeRequest,
) -> Result<(), Status> {
    to.publish_info = take(&mut r.publish_context);
    to.node_stage_secrets = take(&mut r.secrets);
    to.volume_attributes = take(&mut r.volume_context);
    Ok(())
}

/// v1.0: `publish_info` → `publish_context`, `node_publish_secrets` → `secrets`,
/// `volume_attributes` → `volume_context`.
pub(super) fn node_publish_volume_request_to_hub(
    r: &mut d::NodePublishVolumeRequest,
    to: &mut v1::NodePublishVolumeRequest,
) -> Result<(), Status> {
    to.publish_context = take(&mut r.publish_info);
    to.secrets = take(&mut r.node_publish_secrets);
    to.volume_context = take(&mut r.volume_attributes);
    Ok(())
}
/// v1.0 renames, reversed.
pub(super) fn node_publish_volume_request_from_hub(
    r: &mut v1::NodePublishVolumeRequest,
    to: &mut d::NodePublishVolumeRequest,
) -> Result<(), Status> {
    to.publish_info = take(&mut r.publish_context);
    to.node_publish_secrets = take(&mut r.secrets);
    to.volume_attributes = take(&mut r.volume_context);
    Ok(())
}
