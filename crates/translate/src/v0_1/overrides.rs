//! The hand-written half of the v0.1 ↔ hub conversions: every field `generated.rs` does not copy
//! (renamed, retyped, or on one side only), each entry saying what changed in which revision.
//! The functions named like a generated one are called by it before its copies, with the
//! source (they take the fields they convert) and the target.
//!
//! Every v0.1 request's `version` (removed in v0.2) is left alone here: `front.rs` checks it
//! before converting, `upstream.rs` fills in the negotiated one after.

use std::mem::take;

use tonic::Status;

use super::{generated as g, D};
use crate::capabilities::{self, CONTROLLER};
use crate::dialect::proto::v0_1 as d;
use crate::hub::v1;
use crate::{
    i64_to_u64, max_entries_to_i32, max_entries_to_u32, range_to_i64, range_to_u64,
    refuse_create_after_v0_1, refuse_validate_parameters, u64_to_i64, unsupported_field,
};

// `VolumeCapability` (converted whole): v1.5 added `MountVolume.volume_mount_group` and the
// SINGLE_NODE_* access modes, refused towards a v0.1 plugin.
crate::volume_capability_conversions!(v0_1, D);

// Capabilities changed values in every revision: the tables in `capabilities`.
crate::capabilities::capability_list_conversions!(
    ctrl_caps_to_hub,
    ctrl_caps_from_hub,
    v0_1::ControllerServiceCapability,
    controller_service_capability::Rpc(Rpc),
    CONTROLLER,
    D,
    capabilities::v1_ctrl_cap,
    capabilities::v1_ctrl_values
);

/// v0.2 made capacities `int64`: a `uint64` over `i64::MAX` is OUT_OF_RANGE, never wrapped.
pub(super) fn capacity_range_to_hub(
    r: &mut d::CapacityRange,
    to: &mut v1::CapacityRange,
) -> Result<(), Status> {
    (to.required_bytes, to.limit_bytes) = range_to_i64(r.required_bytes, r.limit_bytes)?;
    Ok(())
}
/// v0.2 `int64` → v0.1 `uint64`: a negative value is OUT_OF_RANGE.
pub(super) fn capacity_range_from_hub(
    r: &mut v1::CapacityRange,
    to: &mut d::CapacityRange,
) -> Result<(), Status> {
    (to.required_bytes, to.limit_bytes) = range_to_u64(r.required_bytes, r.limit_bytes)?;
    Ok(())
}

/// v0.2 renamed `VolumeInfo` → `Volume` and made `capacity_bytes` int64; v1.0 renamed `id` →
/// `volume_id`, `attributes` → `volume_context`. `content_source` and `accessible_topology`
/// (v0.3) a v0.1 plugin reports none of.
pub(super) fn volume_info_to_hub(v: &mut d::VolumeInfo, to: &mut v1::Volume) -> Result<(), Status> {
    to.capacity_bytes = u64_to_i64(v.capacity_bytes, "capacity_bytes")?;
    to.volume_id = take(&mut v.id);
    to.volume_context = take(&mut v.attributes);
    Ok(())
}
/// A reply to a v0.1 client: content source and topology (v0.3+) cannot be expressed; the client
/// could not have asked for them.
pub(super) fn volume_info_from_hub(
    v: &mut v1::Volume,
    to: &mut d::VolumeInfo,
) -> Result<(), Status> {
    to.capacity_bytes = i64_to_u64(v.capacity_bytes, "capacity_bytes")?;
    to.id = take(&mut v.volume_id);
    to.attributes = take(&mut v.volume_context);
    Ok(())
}

// --- Controller

/// v0.2: `user_credentials` → per-RPC secrets → v1.0 `secrets`. A v0.1 client asks for no
/// content source, topology (v0.3) or `mutable_parameters` (v1.9).
pub(super) fn create_volume_request_to_hub(
    r: &mut d::CreateVolumeRequest,
    to: &mut v1::CreateVolumeRequest,
) -> Result<(), Status> {
    to.secrets = take(&mut r.user_credentials);
    Ok(())
}
/// `secrets` → `user_credentials`; `volume_content_source`, `accessibility_requirements` (v0.3)
/// and `mutable_parameters` (v1.9) cannot be honoured by a v0.1 plugin.
pub(super) fn create_volume_request_from_hub(
    r: &mut v1::CreateVolumeRequest,
    to: &mut d::CreateVolumeRequest,
) -> Result<(), Status> {
    refuse_create_after_v0_1(r, D)?;
    to.user_credentials = take(&mut r.secrets);
    Ok(())
}

/// v0.2 renamed `volume_info` → `volume` (and `VolumeInfo` → `Volume`).
pub(super) fn create_volume_response_to_hub(
    r: &mut d::CreateVolumeResponse,
    to: &mut v1::CreateVolumeResponse,
) -> Result<(), Status> {
    to.volume = r
        .volume_info
        .take()
        .map(g::volume_info_to_hub)
        .transpose()?;
    Ok(())
}
/// v0.2 renamed `volume_info` → `volume`, reversed.
pub(super) fn create_volume_response_from_hub(
    r: &mut v1::CreateVolumeResponse,
    to: &mut d::CreateVolumeResponse,
) -> Result<(), Status> {
    to.volume_info = r.volume.take().map(g::volume_info_from_hub).transpose()?;
    Ok(())
}

/// v0.2: `user_credentials` → per-RPC secrets → v1.0 `secrets`.
pub(super) fn delete_volume_request_to_hub(
    r: &mut d::DeleteVolumeRequest,
    to: &mut v1::DeleteVolumeRequest,
) -> Result<(), Status> {
    to.secrets = take(&mut r.user_credentials);
    Ok(())
}
/// v1.0 `secrets` → `user_credentials`.
pub(super) fn delete_volume_request_from_hub(
    r: &mut v1::DeleteVolumeRequest,
    to: &mut d::DeleteVolumeRequest,
) -> Result<(), Status> {
    to.user_credentials = take(&mut r.secrets);
    Ok(())
}

/// `user_credentials` → `secrets` (v0.2, v1.0); `volume_attributes` → `volume_context` (v1.0).
pub(super) fn controller_publish_volume_request_to_hub(
    r: &mut d::ControllerPublishVolumeRequest,
    to: &mut v1::ControllerPublishVolumeRequest,
) -> Result<(), Status> {
    to.secrets = take(&mut r.user_credentials);
    to.volume_context = take(&mut r.volume_attributes);
    Ok(())
}
/// `secrets` → `user_credentials`, `volume_context` → `volume_attributes`.
pub(super) fn controller_publish_volume_request_from_hub(
    r: &mut v1::ControllerPublishVolumeRequest,
    to: &mut d::ControllerPublishVolumeRequest,
) -> Result<(), Status> {
    to.user_credentials = take(&mut r.secrets);
    to.volume_attributes = take(&mut r.volume_context);
    Ok(())
}

/// `publish_volume_info` → `publish_info` (v0.2) → `publish_context` (v1.0).
pub(super) fn controller_publish_volume_response_to_hub(
    r: &mut d::ControllerPublishVolumeResponse,
    to: &mut v1::ControllerPublishVolumeResponse,
) -> Result<(), Status> {
    to.publish_context = take(&mut r.publish_volume_info);
    Ok(())
}
/// `publish_context` → `publish_volume_info`.
pub(super) fn controller_publish_volume_response_from_hub(
    r: &mut v1::ControllerPublishVolumeResponse,
    to: &mut d::ControllerPublishVolumeResponse,
) -> Result<(), Status> {
    to.publish_volume_info = take(&mut r.publish_context);
    Ok(())
}

/// `user_credentials` → `secrets` (v0.2, v1.0).
pub(super) fn controller_unpublish_volume_request_to_hub(
    r: &mut d::ControllerUnpublishVolumeRequest,
    to: &mut v1::ControllerUnpublishVolumeRequest,
) -> Result<(), Status> {
    to.secrets = take(&mut r.user_credentials);
    Ok(())
}
/// `secrets` → `user_credentials`.
pub(super) fn controller_unpublish_volume_request_from_hub(
    r: &mut v1::ControllerUnpublishVolumeRequest,
    to: &mut d::ControllerUnpublishVolumeRequest,
) -> Result<(), Status> {
    to.user_credentials = take(&mut r.secrets);
    Ok(())
}

/// `volume_attributes` → `volume_context` (v1.0); v1.0 `parameters`, `secrets` and v1.9
/// `mutable_parameters` are none from a v0.1 client.
pub(super) fn validate_volume_capabilities_request_to_hub(
    r: &mut d::ValidateVolumeCapabilitiesRequest,
    to: &mut v1::ValidateVolumeCapabilitiesRequest,
) -> Result<(), Status> {
    to.volume_context = take(&mut r.volume_attributes);
    Ok(())
}
/// `parameters`/`mutable_parameters` (v1.0/v1.9) cannot be validated by a v0.1 plugin;
/// `secrets` (v1.0) have no v0.1 field and are left out.
pub(super) fn validate_volume_capabilities_request_from_hub(
    r: &mut v1::ValidateVolumeCapabilitiesRequest,
    to: &mut d::ValidateVolumeCapabilitiesRequest,
) -> Result<(), Status> {
    refuse_validate_parameters(r, D)?;
    to.volume_attributes = take(&mut r.volume_context);
    Ok(())
}

/// `max_entries` became int32 in v0.2: a uint32 over `i32::MAX` is OUT_OF_RANGE.
pub(super) fn list_volumes_request_to_hub(
    r: &mut d::ListVolumesRequest,
    to: &mut v1::ListVolumesRequest,
) -> Result<(), Status> {
    to.max_entries = max_entries_to_i32(r.max_entries)?;
    Ok(())
}
/// `max_entries` became int32 in v0.2; a negative value is invalid in v1.
pub(super) fn list_volumes_request_from_hub(
    r: &mut v1::ListVolumesRequest,
    to: &mut d::ListVolumesRequest,
) -> Result<(), Status> {
    to.max_entries = max_entries_to_u32(r.max_entries)?;
    Ok(())
}

/// v0.2 renamed `volume_info` → `volume`; v1.2 added `status`, none from a v0.1 plugin.
pub(super) fn list_volumes_response_entry_to_hub(
    e: &mut d::list_volumes_response::Entry,
    to: &mut v1::list_volumes_response::Entry,
) -> Result<(), Status> {
    to.volume = e
        .volume_info
        .take()
        .map(g::volume_info_to_hub)
        .transpose()?;
    Ok(())
}
/// `volume` → `volume_info`; v1.2 `status` is dropped for a v0.1 client.
pub(super) fn list_volumes_response_entry_from_hub(
    e: &mut v1::list_volumes_response::Entry,
    to: &mut d::list_volumes_response::Entry,
) -> Result<(), Status> {
    to.volume_info = e.volume.take().map(g::volume_info_from_hub).transpose()?;
    Ok(())
}

/// v0.3 added `accessible_topology`: none from a v0.1 client.
pub(super) fn get_capacity_request_to_hub(
    _: &mut d::GetCapacityRequest,
    _: &mut v1::GetCapacityRequest,
) -> Result<(), Status> {
    Ok(())
}
/// v0.3 `accessible_topology` cannot be honoured by a v0.1 plugin.
pub(super) fn get_capacity_request_from_hub(
    r: &mut v1::GetCapacityRequest,
    _: &mut d::GetCapacityRequest,
) -> Result<(), Status> {
    if r.accessible_topology.is_some() {
        return Err(unsupported_field("accessible_topology", D));
    }
    Ok(())
}

/// `available_capacity` became int64 in v0.2 (OUT_OF_RANGE over `i64::MAX`); v1.4
/// `maximum_volume_size` and v1.11 `minimum_volume_size` a v0.1 plugin reports neither.
pub(super) fn get_capacity_response_to_hub(
    r: &mut d::GetCapacityResponse,
    to: &mut v1::GetCapacityResponse,
) -> Result<(), Status> {
    to.available_capacity = u64_to_i64(r.available_capacity, "available_capacity")?;
    Ok(())
}
/// int64 → uint64 (OUT_OF_RANGE when negative); the v1.4/v1.11 sizes have no v0.1 field.
pub(super) fn get_capacity_response_from_hub(
    r: &mut v1::GetCapacityResponse,
    to: &mut d::GetCapacityResponse,
) -> Result<(), Status> {
    to.available_capacity = i64_to_u64(r.available_capacity, "available_capacity")?;
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
/// Only the capabilities a v0.1 client knows cross (the table in `capabilities`).
pub(super) fn controller_get_capabilities_response_from_hub(
    r: &mut v1::ControllerGetCapabilitiesResponse,
    to: &mut d::ControllerGetCapabilitiesResponse,
) -> Result<(), Status> {
    to.capabilities = ctrl_caps_from_hub(take(&mut r.capabilities));
    Ok(())
}

// --- Node

/// v0.1 `GetNodeID` → v0.2 `NodeGetId` → v0.3 `NodeGetInfo`, which added
/// `max_volumes_per_node` and `accessible_topology`: a v0.1 plugin reports neither.
pub(super) fn get_node_id_response_to_hub(
    _: &mut d::GetNodeIdResponse,
    _: &mut v1::NodeGetInfoResponse,
) -> Result<(), Status> {
    Ok(())
}
/// A v0.1 client asking `GetNodeID` is told only the `node_id`.
pub(super) fn get_node_id_response_from_hub(
    _: &mut v1::NodeGetInfoResponse,
    _: &mut d::GetNodeIdResponse,
) -> Result<(), Status> {
    Ok(())
}

/// `publish_volume_info` → `publish_info` (v0.2) → `publish_context` (v1.0); `user_credentials`
/// → `secrets`; `volume_attributes` → `volume_context`. Staging (v0.2) is unknown to a v0.1
/// client: no `staging_target_path`.
pub(super) fn node_publish_volume_request_to_hub(
    r: &mut d::NodePublishVolumeRequest,
    to: &mut v1::NodePublishVolumeRequest,
) -> Result<(), Status> {
    to.publish_context = take(&mut r.publish_volume_info);
    to.secrets = take(&mut r.user_credentials);
    to.volume_context = take(&mut r.volume_attributes);
    Ok(())
}
/// The renames, reversed. Staging arrived in v0.2: a v0.1 plugin never advertises it, so no
/// staging path.
pub(super) fn node_publish_volume_request_from_hub(
    r: &mut v1::NodePublishVolumeRequest,
    to: &mut d::NodePublishVolumeRequest,
) -> Result<(), Status> {
    if !r.staging_target_path.is_empty() {
        return Err(unsupported_field("staging_target_path", D));
    }
    to.publish_volume_info = take(&mut r.publish_context);
    to.user_credentials = take(&mut r.secrets);
    to.volume_attributes = take(&mut r.volume_context);
    Ok(())
}

/// v0.1 sent `user_credentials` on NodeUnpublishVolume; v0.2 dropped them (v1 has none).
pub(super) fn node_unpublish_volume_request_to_hub(
    _: &mut d::NodeUnpublishVolumeRequest,
    _: &mut v1::NodeUnpublishVolumeRequest,
) -> Result<(), Status> {
    Ok(())
}
/// No credentials to send: v1 has none on NodeUnpublishVolume.
pub(super) fn node_unpublish_volume_request_from_hub(
    _: &mut v1::NodeUnpublishVolumeRequest,
    _: &mut d::NodeUnpublishVolumeRequest,
) -> Result<(), Status> {
    Ok(())
}
