//! The hand-written half of the draft (v0.1-oneof) ↔ hub conversions: every field
//! `generated.rs` does not copy (renamed, retyped, or on one side only), each entry saying what
//! changed in which revision. The functions named like a generated one are called by it after
//! its copies, with the source's remaining fields and the half-built target.
//!
//! Left alone here: every request's `version` (removed in v0.2; `front.rs` checks it,
//! `upstream.rs` fills in the negotiated one) and the `VolumeHandle.metadata` sent to the plugin
//! (`upstream.rs` sets the plugin's own, from the handle store — never a client's
//! `volume_context`).

use std::collections::HashMap;

use std::mem::take;

use tonic::Status;

use super::{generated as g, D};
use crate::capabilities::{self, CONTROLLER};
use crate::dialect::proto::v0_1_oneof as d;
use crate::hub::v1;
use crate::{
    i64_to_u64, ids, max_entries_to_i32, max_entries_to_u32, range_to_i64, range_to_u64,
    refuse_create_after_v0_1, refuse_validate_parameters, u64_to_i64, unsupported_field,
};

// `VolumeCapability` (converted whole): v1.5 added `MountVolume.volume_mount_group` and the
// SINGLE_NODE_* access modes, refused towards a draft plugin.
crate::volume_capability_conversions!(v0_1_oneof, D);

// Capabilities changed values in every revision: the tables in `capabilities`.
crate::capabilities::capability_list_conversions!(
    ctrl_caps_to_hub,
    ctrl_caps_from_hub,
    v0_1_oneof::ControllerServiceCapability,
    controller_service_capability::Rpc(Rpc),
    CONTROLLER,
    D,
    capabilities::v1_ctrl_cap,
    capabilities::v1_ctrl_values
);

/// Draft `Credentials { data }` → `user_credentials` (v0.1.0) → per-RPC secrets (v0.2) →
/// `secrets` (v1.0).
fn creds(c: Option<d::Credentials>) -> HashMap<String, String> {
    c.map(|c| c.data).unwrap_or_default()
}
/// Empty secrets are sent as an absent `Credentials` (the draft makes it optional).
fn to_creds(m: HashMap<String, String>) -> Option<d::Credentials> {
    (!m.is_empty()).then_some(d::Credentials { data: m })
}

/// Draft `VolumeHandle { id, metadata }` → `volume_id` + `attributes` (v0.1.0) →
/// `volume_context` (v1.0). The metadata of a handle sent to the plugin is set by `upstream.rs`.
pub(super) fn handle(id: String, metadata: HashMap<String, String>) -> Option<d::VolumeHandle> {
    Some(d::VolumeHandle { id, metadata })
}
fn handle_parts(h: Option<d::VolumeHandle>) -> (String, HashMap<String, String>) {
    h.map(|h| (h.id, h.metadata)).unwrap_or_default()
}

/// Draft `PublishVolumeInfo { values }` → `publish_volume_info` (v0.1.0) → `publish_info`
/// (v0.2) → `publish_context` (v1.0); an empty map is an absent message.
fn publish_info(values: HashMap<String, String>) -> Option<d::PublishVolumeInfo> {
    (!values.is_empty()).then_some(d::PublishVolumeInfo { values })
}

/// v0.2 made capacities `int64`: a `uint64` over `i64::MAX` is OUT_OF_RANGE, never wrapped.
pub(super) fn capacity_range_to_hub(
    r: &mut d::CapacityRange,
    to: &mut v1::CapacityRange,
) -> Result<(), Status> {
    (to.required_bytes, to.limit_bytes) = range_to_i64(r.required_bytes, r.limit_bytes)?;
    Ok(())
}
/// v0.2 `int64` → draft `uint64`: a negative value is OUT_OF_RANGE.
pub(super) fn capacity_range_from_hub(
    r: &mut v1::CapacityRange,
    to: &mut d::CapacityRange,
) -> Result<(), Status> {
    (to.required_bytes, to.limit_bytes) = range_to_u64(r.required_bytes, r.limit_bytes)?;
    Ok(())
}

/// `VolumeInfo { capacity_bytes, handle { id, metadata } }` → `Volume { volume_id,
/// volume_context }`: the handle split in v0.1.0, `VolumeInfo` renamed in v0.2 (capacity int64),
/// the fields renamed in v1.0. `content_source`, `accessible_topology` (v0.3): none.
pub(super) fn volume_info_to_hub(v: &mut d::VolumeInfo, to: &mut v1::Volume) -> Result<(), Status> {
    let (id, metadata) = handle_parts(take(&mut v.handle));
    to.capacity_bytes = u64_to_i64(v.capacity_bytes, "capacity_bytes")?;
    to.volume_id = id;
    to.volume_context = metadata;
    Ok(())
}
/// The reverse: a reply to a draft client carries no content source or topology (v0.3+).
pub(super) fn volume_info_from_hub(
    v: &mut v1::Volume,
    to: &mut d::VolumeInfo,
) -> Result<(), Status> {
    to.capacity_bytes = i64_to_u64(v.capacity_bytes, "capacity_bytes")?;
    to.handle = handle(take(&mut v.volume_id), take(&mut v.volume_context));
    Ok(())
}

// --- Controller

/// Draft `Credentials` → `secrets`; a draft client asks for no content source, topology (v0.3)
/// or `mutable_parameters` (v1.9).
pub(super) fn create_volume_request_to_hub(
    r: &mut d::CreateVolumeRequest,
    to: &mut v1::CreateVolumeRequest,
) -> Result<(), Status> {
    to.secrets = creds(take(&mut r.user_credentials));
    Ok(())
}
/// `secrets` → `Credentials`; `volume_content_source`, `accessibility_requirements` (v0.3) and
/// `mutable_parameters` (v1.9) cannot be honoured by a draft plugin.
pub(super) fn create_volume_request_from_hub(
    r: &mut v1::CreateVolumeRequest,
    to: &mut d::CreateVolumeRequest,
) -> Result<(), Status> {
    refuse_create_after_v0_1(r, D)?;
    to.user_credentials = to_creds(take(&mut r.secrets));
    Ok(())
}

/// v0.2 renamed `volume_info` → `volume` (and `VolumeInfo` → `Volume`).
pub(super) fn create_volume_response_result_to_hub(
    r: &mut d::create_volume_response::Result,
    to: &mut v1::CreateVolumeResponse,
) -> Result<(), Status> {
    to.volume = r
        .volume_info
        .take()
        .map(g::volume_info_to_hub)
        .transpose()?;
    Ok(())
}
/// `volume` → `volume_info`.
pub(super) fn create_volume_response_result_from_hub(
    r: &mut v1::CreateVolumeResponse,
    to: &mut d::create_volume_response::Result,
) -> Result<(), Status> {
    to.volume_info = r.volume.take().map(g::volume_info_from_hub).transpose()?;
    Ok(())
}

/// `VolumeHandle` → `volume_id`: v1 DeleteVolume carries no context, so a newer plugin never
/// needs the metadata. `Credentials` → `secrets`.
pub(super) fn delete_volume_request_to_hub(
    r: &mut d::DeleteVolumeRequest,
    to: &mut v1::DeleteVolumeRequest,
) -> Result<(), Status> {
    (to.volume_id, _) = handle_parts(take(&mut r.volume_handle));
    to.secrets = creds(take(&mut r.user_credentials));
    Ok(())
}
/// `volume_id` → `VolumeHandle` (metadata: `upstream.rs`); `secrets` → `Credentials`.
pub(super) fn delete_volume_request_from_hub(
    r: &mut v1::DeleteVolumeRequest,
    to: &mut d::DeleteVolumeRequest,
) -> Result<(), Status> {
    to.volume_handle = handle(take(&mut r.volume_id), HashMap::new());
    to.user_credentials = to_creds(take(&mut r.secrets));
    Ok(())
}

/// `VolumeHandle` → `volume_id` + `volume_context`; `NodeID { values }` → `string node_id`
/// (v0.1.0, see `ids`); `Credentials` → `secrets`.
pub(super) fn controller_publish_volume_request_to_hub(
    r: &mut d::ControllerPublishVolumeRequest,
    to: &mut v1::ControllerPublishVolumeRequest,
) -> Result<(), Status> {
    (to.volume_id, to.volume_context) = handle_parts(take(&mut r.volume_handle));
    to.node_id = ids::node_id_to_string(r.node_id.as_ref())?;
    to.secrets = creds(take(&mut r.user_credentials));
    Ok(())
}
/// The reverse; the handle's metadata is the plugin's own (`upstream.rs`), not the client's
/// `volume_context`.
pub(super) fn controller_publish_volume_request_from_hub(
    r: &mut v1::ControllerPublishVolumeRequest,
    to: &mut d::ControllerPublishVolumeRequest,
) -> Result<(), Status> {
    to.volume_handle = handle(take(&mut r.volume_id), HashMap::new());
    to.node_id = ids::node_id_from_string(&r.node_id)?;
    to.user_credentials = to_creds(take(&mut r.secrets));
    Ok(())
}

/// `PublishVolumeInfo { values }` → `publish_context`.
pub(super) fn controller_publish_volume_response_result_to_hub(
    r: &mut d::controller_publish_volume_response::Result,
    to: &mut v1::ControllerPublishVolumeResponse,
) -> Result<(), Status> {
    to.publish_context = r
        .publish_volume_info
        .take()
        .map(|p| p.values)
        .unwrap_or_default();
    Ok(())
}
/// `publish_context` → `PublishVolumeInfo` (absent when empty).
pub(super) fn controller_publish_volume_response_result_from_hub(
    r: &mut v1::ControllerPublishVolumeResponse,
    to: &mut d::controller_publish_volume_response::Result,
) -> Result<(), Status> {
    to.publish_volume_info = publish_info(take(&mut r.publish_context));
    Ok(())
}

/// `VolumeHandle` → `volume_id` (v1 ControllerUnpublishVolume carries no context); `NodeID` →
/// `node_id`; `Credentials` → `secrets`.
pub(super) fn controller_unpublish_volume_request_to_hub(
    r: &mut d::ControllerUnpublishVolumeRequest,
    to: &mut v1::ControllerUnpublishVolumeRequest,
) -> Result<(), Status> {
    (to.volume_id, _) = handle_parts(take(&mut r.volume_handle));
    to.node_id = ids::node_id_to_string(r.node_id.as_ref())?;
    to.secrets = creds(take(&mut r.user_credentials));
    Ok(())
}
/// The reverse (handle metadata: `upstream.rs`).
pub(super) fn controller_unpublish_volume_request_from_hub(
    r: &mut v1::ControllerUnpublishVolumeRequest,
    to: &mut d::ControllerUnpublishVolumeRequest,
) -> Result<(), Status> {
    to.volume_handle = handle(take(&mut r.volume_id), HashMap::new());
    to.node_id = ids::node_id_from_string(&r.node_id)?;
    to.user_credentials = to_creds(take(&mut r.secrets));
    Ok(())
}

/// The draft validated a whole `VolumeInfo`; its capacity has no v1 field (v1 asks about an
/// existing volume by id), its handle → `volume_id` + `volume_context`. v1.0 `parameters`,
/// `secrets` and v1.9 `mutable_parameters`: none from a draft client.
pub(super) fn validate_volume_capabilities_request_to_hub(
    r: &mut d::ValidateVolumeCapabilitiesRequest,
    to: &mut v1::ValidateVolumeCapabilitiesRequest,
) -> Result<(), Status> {
    (to.volume_id, to.volume_context) = handle_parts(r.volume_info.take().and_then(|v| v.handle));
    Ok(())
}
/// `parameters`/`mutable_parameters` (v1.0/v1.9) cannot be validated by a draft plugin;
/// `secrets` (v1.0) have no draft field. The draft asks for a `VolumeInfo`; v1 names no
/// capacity here, so it is 0 (unknown); handle metadata: `upstream.rs`.
pub(super) fn validate_volume_capabilities_request_from_hub(
    r: &mut v1::ValidateVolumeCapabilitiesRequest,
    to: &mut d::ValidateVolumeCapabilitiesRequest,
) -> Result<(), Status> {
    refuse_validate_parameters(r, D)?;
    to.volume_info = Some(d::VolumeInfo {
        capacity_bytes: 0,
        handle: handle(take(&mut r.volume_id), HashMap::new()),
    });
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

/// v0.2 renamed `volume_info` → `volume`; v1.2 added `status`, none from a draft plugin.
pub(super) fn list_volumes_response_result_entry_to_hub(
    e: &mut d::list_volumes_response::result::Entry,
    to: &mut v1::list_volumes_response::Entry,
) -> Result<(), Status> {
    to.volume = e
        .volume_info
        .take()
        .map(g::volume_info_to_hub)
        .transpose()?;
    Ok(())
}
/// `volume` → `volume_info`; v1.2 `status` is dropped for a draft client.
pub(super) fn list_volumes_response_result_entry_from_hub(
    e: &mut v1::list_volumes_response::Entry,
    to: &mut d::list_volumes_response::result::Entry,
) -> Result<(), Status> {
    to.volume_info = e.volume.take().map(g::volume_info_from_hub).transpose()?;
    Ok(())
}

/// v0.3 added `accessible_topology`: none from a draft client.
pub(super) fn get_capacity_request_to_hub(
    _: &mut d::GetCapacityRequest,
    _: &mut v1::GetCapacityRequest,
) -> Result<(), Status> {
    Ok(())
}
/// v0.3 `accessible_topology` cannot be honoured by a draft plugin.
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
/// `maximum_volume_size` and v1.11 `minimum_volume_size`: a draft plugin reports neither.
pub(super) fn get_capacity_response_result_to_hub(
    r: &mut d::get_capacity_response::Result,
    to: &mut v1::GetCapacityResponse,
) -> Result<(), Status> {
    to.available_capacity = u64_to_i64(r.available_capacity, "available_capacity")?;
    Ok(())
}
/// int64 → uint64 (OUT_OF_RANGE when negative); the v1.4/v1.11 sizes have no draft field.
pub(super) fn get_capacity_response_result_from_hub(
    r: &mut v1::GetCapacityResponse,
    to: &mut d::get_capacity_response::Result,
) -> Result<(), Status> {
    to.available_capacity = i64_to_u64(r.available_capacity, "available_capacity")?;
    Ok(())
}

/// Controller capabilities changed values in every revision: the table in `capabilities`.
pub(super) fn controller_get_capabilities_response_result_to_hub(
    r: &mut d::controller_get_capabilities_response::Result,
    to: &mut v1::ControllerGetCapabilitiesResponse,
) -> Result<(), Status> {
    to.capabilities = ctrl_caps_to_hub(take(&mut r.capabilities));
    Ok(())
}
/// Only the capabilities a draft client knows cross (the table in `capabilities`).
pub(super) fn controller_get_capabilities_response_result_from_hub(
    r: &mut v1::ControllerGetCapabilitiesResponse,
    to: &mut d::controller_get_capabilities_response::Result,
) -> Result<(), Status> {
    to.capabilities = ctrl_caps_from_hub(take(&mut r.capabilities));
    Ok(())
}

// --- Node

/// `NodeID { values }` → `string node_id` (v0.1.0, see `ids`); v0.3 `max_volumes_per_node` and
/// `accessible_topology`: a draft plugin reports neither.
pub(super) fn get_node_id_response_result_to_hub(
    r: &mut d::get_node_id_response::Result,
    to: &mut v1::NodeGetInfoResponse,
) -> Result<(), Status> {
    to.node_id = ids::node_id_to_string(r.node_id.as_ref())?;
    Ok(())
}
/// `node_id` → `NodeID`; a draft client asking `GetNodeID` is told nothing else.
pub(super) fn get_node_id_response_result_from_hub(
    r: &mut v1::NodeGetInfoResponse,
    to: &mut d::get_node_id_response::Result,
) -> Result<(), Status> {
    to.node_id = ids::node_id_from_string(&r.node_id)?;
    Ok(())
}

/// `VolumeHandle` → `volume_id` + `volume_context`, `PublishVolumeInfo` → `publish_context`,
/// `Credentials` → `secrets`; staging (v0.2) is unknown to a draft client.
pub(super) fn node_publish_volume_request_to_hub(
    r: &mut d::NodePublishVolumeRequest,
    to: &mut v1::NodePublishVolumeRequest,
) -> Result<(), Status> {
    (to.volume_id, to.volume_context) = handle_parts(take(&mut r.volume_handle));
    to.publish_context = r
        .publish_volume_info
        .take()
        .map(|p| p.values)
        .unwrap_or_default();
    to.secrets = creds(take(&mut r.user_credentials));
    Ok(())
}
/// The reverse (handle metadata: `upstream.rs`). Staging arrived in v0.2: a draft plugin never
/// advertises it, so no staging path.
pub(super) fn node_publish_volume_request_from_hub(
    r: &mut v1::NodePublishVolumeRequest,
    to: &mut d::NodePublishVolumeRequest,
) -> Result<(), Status> {
    if !r.staging_target_path.is_empty() {
        return Err(unsupported_field("staging_target_path", D));
    }
    to.volume_handle = handle(take(&mut r.volume_id), HashMap::new());
    to.publish_volume_info = publish_info(take(&mut r.publish_context));
    to.user_credentials = to_creds(take(&mut r.secrets));
    Ok(())
}

/// `VolumeHandle` → `volume_id`; v0.2 dropped credentials from NodeUnpublishVolume (v1 has
/// none).
pub(super) fn node_unpublish_volume_request_to_hub(
    r: &mut d::NodeUnpublishVolumeRequest,
    to: &mut v1::NodeUnpublishVolumeRequest,
) -> Result<(), Status> {
    (to.volume_id, _) = handle_parts(take(&mut r.volume_handle));
    Ok(())
}
/// The reverse (handle metadata: `upstream.rs`); no credentials to send.
pub(super) fn node_unpublish_volume_request_from_hub(
    r: &mut v1::NodeUnpublishVolumeRequest,
    to: &mut d::NodeUnpublishVolumeRequest,
) -> Result<(), Status> {
    to.volume_handle = handle(take(&mut r.volume_id), HashMap::new());
    Ok(())
}
