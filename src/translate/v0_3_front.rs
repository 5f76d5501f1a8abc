//! v0.3 front side: a client's request → hub request, hub reply → the client's reply.

use super::*;

/// A v0.3 client's request on RPC `method` → the hub request.
pub(crate) fn front_request(method: &str, body: &[u8]) -> Result<FrontCall, Status> {
    let req = match method {
        "CreateVolume" => {
            let r: d::CreateVolumeRequest = front_msg(body, method)?;
            Req::CreateVolume(v1::CreateVolumeRequest {
                name: r.name,
                capacity_range: r.capacity_range.map(range_to_hub),
                volume_capabilities: caps_to_hub(r.volume_capabilities),
                parameters: r.parameters,
                secrets: r.controller_create_secrets,
                volume_content_source: r.volume_content_source.map(source_to_hub),
                accessibility_requirements: r.accessibility_requirements.map(req_to_hub),
                mutable_parameters: Default::default(),
            })
        }
        "DeleteVolume" => {
            let r: d::DeleteVolumeRequest = front_msg(body, method)?;
            Req::DeleteVolume(v1::DeleteVolumeRequest {
                volume_id: r.volume_id,
                secrets: r.controller_delete_secrets,
            })
        }
        "ControllerPublishVolume" => {
            let r: d::ControllerPublishVolumeRequest = front_msg(body, method)?;
            Req::ControllerPublishVolume(v1::ControllerPublishVolumeRequest {
                volume_id: r.volume_id,
                node_id: r.node_id,
                volume_capability: r.volume_capability.map(cap_to_hub),
                readonly: r.readonly,
                secrets: r.controller_publish_secrets,
                volume_context: r.volume_attributes,
            })
        }
        "ControllerUnpublishVolume" => {
            let r: d::ControllerUnpublishVolumeRequest = front_msg(body, method)?;
            Req::ControllerUnpublishVolume(v1::ControllerUnpublishVolumeRequest {
                volume_id: r.volume_id,
                node_id: r.node_id,
                secrets: r.controller_unpublish_secrets,
            })
        }
        "ValidateVolumeCapabilities" => {
            let r: d::ValidateVolumeCapabilitiesRequest = front_msg(body, method)?;
            // v0.3 `accessible_topology` was removed in v1.0: no newer plugin can check it.
            if !r.accessible_topology.is_empty() {
                return Err(Status::invalid_argument(
                    "accessible_topology of ValidateVolumeCapabilities was removed in CSI v1; \
                     the plugin behind the gateway cannot honour it",
                ));
            }
            Req::ValidateVolumeCapabilities(v1::ValidateVolumeCapabilitiesRequest {
                volume_id: r.volume_id,
                volume_context: r.volume_attributes,
                volume_capabilities: caps_to_hub(r.volume_capabilities),
                ..Default::default()
            })
        }
        "ListVolumes" => {
            let r: d::ListVolumesRequest = front_msg(body, method)?;
            Req::ListVolumes(v1::ListVolumesRequest {
                max_entries: r.max_entries,
                starting_token: r.starting_token,
            })
        }
        "GetCapacity" => {
            let r: d::GetCapacityRequest = front_msg(body, method)?;
            Req::GetCapacity(v1::GetCapacityRequest {
                volume_capabilities: caps_to_hub(r.volume_capabilities),
                parameters: r.parameters,
                accessible_topology: r.accessible_topology.map(topo_to_hub),
            })
        }
        "ControllerGetCapabilities" => {
            Req::ControllerGetCapabilities(v1::ControllerGetCapabilitiesRequest {})
        }
        "CreateSnapshot" => {
            let r: d::CreateSnapshotRequest = front_msg(body, method)?;
            Req::CreateSnapshot(v1::CreateSnapshotRequest {
                source_volume_id: r.source_volume_id,
                name: r.name,
                secrets: r.create_snapshot_secrets,
                parameters: r.parameters,
            })
        }
        "DeleteSnapshot" => {
            let r: d::DeleteSnapshotRequest = front_msg(body, method)?;
            Req::DeleteSnapshot(v1::DeleteSnapshotRequest {
                snapshot_id: r.snapshot_id,
                secrets: r.delete_snapshot_secrets,
            })
        }
        "ListSnapshots" => {
            let r: d::ListSnapshotsRequest = front_msg(body, method)?;
            Req::ListSnapshots(v1::ListSnapshotsRequest {
                max_entries: r.max_entries,
                starting_token: r.starting_token,
                source_volume_id: r.source_volume_id,
                snapshot_id: r.snapshot_id,
                secrets: Default::default(),
            })
        }
        "GetPluginCapabilities" => Req::GetPluginCapabilities(v1::GetPluginCapabilitiesRequest {}),
        "GetPluginInfo" => Req::GetPluginInfo(v1::GetPluginInfoRequest {}),
        "Probe" => Req::Probe(v1::ProbeRequest {}),
        "NodeGetCapabilities" => Req::NodeGetCapabilities(v1::NodeGetCapabilitiesRequest {}),
        // v0.3 deprecated NodeGetId in favour of NodeGetInfo (v1 removed it).
        "NodeGetId" | "NodeGetInfo" => Req::NodeGetInfo(v1::NodeGetInfoRequest {}),
        "NodeStageVolume" => {
            let r: d::NodeStageVolumeRequest = front_msg(body, method)?;
            Req::NodeStageVolume(v1::NodeStageVolumeRequest {
                volume_id: r.volume_id,
                publish_context: r.publish_info,
                staging_target_path: r.staging_target_path,
                volume_capability: r.volume_capability.map(cap_to_hub),
                secrets: r.node_stage_secrets,
                volume_context: r.volume_attributes,
            })
        }
        "NodeUnstageVolume" => {
            let r: d::NodeUnstageVolumeRequest = front_msg(body, method)?;
            Req::NodeUnstageVolume(v1::NodeUnstageVolumeRequest {
                volume_id: r.volume_id,
                staging_target_path: r.staging_target_path,
            })
        }
        "NodePublishVolume" => {
            let r: d::NodePublishVolumeRequest = front_msg(body, method)?;
            Req::NodePublishVolume(v1::NodePublishVolumeRequest {
                volume_id: r.volume_id,
                publish_context: r.publish_info,
                staging_target_path: r.staging_target_path,
                target_path: r.target_path,
                volume_capability: r.volume_capability.map(cap_to_hub),
                readonly: r.readonly,
                secrets: r.node_publish_secrets,
                volume_context: r.volume_attributes,
            })
        }
        "NodeUnpublishVolume" => {
            let r: d::NodeUnpublishVolumeRequest = front_msg(body, method)?;
            Req::NodeUnpublishVolume(v1::NodeUnpublishVolumeRequest {
                volume_id: r.volume_id,
                target_path: r.target_path,
            })
        }
        other => {
            return Err(Status::unimplemented(format!(
                "unknown CSI v0.3 method {other}"
            )))
        }
    };
    Ok(FrontCall::Hub(req))
}

/// The hub reply → the v0.3 reply to RPC `method`.
pub(crate) fn front_reply(method: &str, resp: Resp) -> Result<Vec<u8>, Status> {
    Ok(match method {
        "CreateVolume" => {
            let r = hub_reply!(resp, CreateVolume, method);
            d::CreateVolumeResponse {
                volume: r.volume.map(volume_from_hub),
            }
            .encode_to_vec()
        }
        "DeleteVolume" => {
            hub_reply!(resp, DeleteVolume, method);
            d::DeleteVolumeResponse {}.encode_to_vec()
        }
        "ControllerPublishVolume" => {
            let r = hub_reply!(resp, ControllerPublishVolume, method);
            d::ControllerPublishVolumeResponse {
                publish_info: r.publish_context,
            }
            .encode_to_vec()
        }
        "ControllerUnpublishVolume" => {
            hub_reply!(resp, ControllerUnpublishVolume, method);
            d::ControllerUnpublishVolumeResponse {}.encode_to_vec()
        }
        "ValidateVolumeCapabilities" => {
            // v1.0 replaced `supported` by `confirmed` (present = supported).
            let r = hub_reply!(resp, ValidateVolumeCapabilities, method);
            d::ValidateVolumeCapabilitiesResponse {
                supported: r.confirmed.is_some(),
                message: r.message,
            }
            .encode_to_vec()
        }
        "ListVolumes" => {
            // v1.2 added per-entry `status` (published nodes): dropped for a v0.3 client.
            let r = hub_reply!(resp, ListVolumes, method);
            d::ListVolumesResponse {
                entries: r
                    .entries
                    .into_iter()
                    .map(|e| d::list_volumes_response::Entry {
                        volume: e.volume.map(volume_from_hub),
                    })
                    .collect(),
                next_token: r.next_token,
            }
            .encode_to_vec()
        }
        "GetCapacity" => {
            // v1.4 `maximum_volume_size` and v1.11 `minimum_volume_size` have no v0.3 field.
            let r = hub_reply!(resp, GetCapacity, method);
            d::GetCapacityResponse {
                available_capacity: r.available_capacity,
            }
            .encode_to_vec()
        }
        "ControllerGetCapabilities" => {
            let r = hub_reply!(resp, ControllerGetCapabilities, method);
            d::ControllerGetCapabilitiesResponse {
                capabilities: ctrl_caps_from_hub(r.capabilities),
            }
            .encode_to_vec()
        }
        "CreateSnapshot" => {
            let r = hub_reply!(resp, CreateSnapshot, method);
            d::CreateSnapshotResponse {
                snapshot: r.snapshot.map(snapshot_from_hub).transpose()?,
            }
            .encode_to_vec()
        }
        "DeleteSnapshot" => {
            hub_reply!(resp, DeleteSnapshot, method);
            d::DeleteSnapshotResponse {}.encode_to_vec()
        }
        "ListSnapshots" => {
            let r = hub_reply!(resp, ListSnapshots, method);
            let mut entries = Vec::new();
            for e in r.entries {
                entries.push(d::list_snapshots_response::Entry {
                    snapshot: e.snapshot.map(snapshot_from_hub).transpose()?,
                });
            }
            d::ListSnapshotsResponse {
                entries,
                next_token: r.next_token,
            }
            .encode_to_vec()
        }
        "GetPluginCapabilities" => {
            let r = hub_reply!(resp, GetPluginCapabilities, method);
            d::GetPluginCapabilitiesResponse {
                capabilities: plugin_caps_from_hub(r.capabilities),
            }
            .encode_to_vec()
        }
        "GetPluginInfo" => {
            let r = hub_reply!(resp, GetPluginInfo, method);
            d::GetPluginInfoResponse {
                name: r.name,
                vendor_version: r.vendor_version,
                manifest: r.manifest,
            }
            .encode_to_vec()
        }
        "Probe" => {
            let r = hub_reply!(resp, Probe, method);
            d::ProbeResponse { ready: r.ready }.encode_to_vec()
        }
        "NodeGetCapabilities" => {
            let r = hub_reply!(resp, NodeGetCapabilities, method);
            d::NodeGetCapabilitiesResponse {
                capabilities: node_caps_from_hub(r.capabilities),
            }
            .encode_to_vec()
        }
        "NodeGetId" => {
            let r = hub_reply!(resp, NodeGetInfo, method);
            d::NodeGetIdResponse { node_id: r.node_id }.encode_to_vec()
        }
        "NodeGetInfo" => {
            let r = hub_reply!(resp, NodeGetInfo, method);
            d::NodeGetInfoResponse {
                node_id: r.node_id,
                max_volumes_per_node: r.max_volumes_per_node,
                accessible_topology: r.accessible_topology.map(topo_from_hub),
            }
            .encode_to_vec()
        }
        "NodeStageVolume" => {
            hub_reply!(resp, NodeStageVolume, method);
            d::NodeStageVolumeResponse {}.encode_to_vec()
        }
        "NodeUnstageVolume" => {
            hub_reply!(resp, NodeUnstageVolume, method);
            d::NodeUnstageVolumeResponse {}.encode_to_vec()
        }
        "NodePublishVolume" => {
            hub_reply!(resp, NodePublishVolume, method);
            d::NodePublishVolumeResponse {}.encode_to_vec()
        }
        "NodeUnpublishVolume" => {
            hub_reply!(resp, NodeUnpublishVolume, method);
            d::NodeUnpublishVolumeResponse {}.encode_to_vec()
        }
        other => {
            return Err(Status::unimplemented(format!(
                "unknown CSI v0.3 method {other}"
            )))
        }
    })
}
