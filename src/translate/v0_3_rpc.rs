//! v0.3 RPCs ↔ hub, request and reply, front and upstream side.

use super::*;

macro_rules! path {
    ($svc:literal, $m:literal) => {
        concat!("/csi.v0.", $svc, "/", $m)
    };
}

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

/// A hub request → the v0.3 upstream path and body.
pub(crate) fn upstream_request(req: Req) -> Result<(&'static str, Vec<u8>), Status> {
    Ok(match req {
        Req::CreateVolume(r) => {
            // v1.9 `mutable_parameters` have no v0.3 counterpart.
            if !r.mutable_parameters.is_empty() {
                return Err(unsupported_field("mutable_parameters", D));
            }
            let m = d::CreateVolumeRequest {
                name: r.name,
                capacity_range: r.capacity_range.map(range_from_hub),
                volume_capabilities: caps_from_hub(r.volume_capabilities)?,
                parameters: r.parameters,
                controller_create_secrets: r.secrets,
                volume_content_source: r
                    .volume_content_source
                    .map(|s| source_from_hub(s, "volume_content_source"))
                    .transpose()?,
                accessibility_requirements: r.accessibility_requirements.map(req_from_hub),
            };
            (path!("Controller", "CreateVolume"), m.encode_to_vec())
        }
        Req::DeleteVolume(r) => (
            path!("Controller", "DeleteVolume"),
            d::DeleteVolumeRequest {
                volume_id: r.volume_id,
                controller_delete_secrets: r.secrets,
            }
            .encode_to_vec(),
        ),
        Req::ControllerPublishVolume(r) => (
            path!("Controller", "ControllerPublishVolume"),
            d::ControllerPublishVolumeRequest {
                volume_id: r.volume_id,
                node_id: r.node_id,
                volume_capability: r.volume_capability.map(cap_from_hub).transpose()?,
                readonly: r.readonly,
                controller_publish_secrets: r.secrets,
                volume_attributes: r.volume_context,
            }
            .encode_to_vec(),
        ),
        Req::ControllerUnpublishVolume(r) => (
            path!("Controller", "ControllerUnpublishVolume"),
            d::ControllerUnpublishVolumeRequest {
                volume_id: r.volume_id,
                node_id: r.node_id,
                controller_unpublish_secrets: r.secrets,
            }
            .encode_to_vec(),
        ),
        Req::ValidateVolumeCapabilities(r) => {
            // v1.0 added `parameters` and v1.9 `mutable_parameters` to validate against: a v0.3
            // plugin cannot confirm them. `secrets` (v1.0) are left out: v0.3 has no field and
            // the plugin never asked for credentials on this call.
            if !r.parameters.is_empty() {
                return Err(unsupported_field("parameters", D));
            }
            if !r.mutable_parameters.is_empty() {
                return Err(unsupported_field("mutable_parameters", D));
            }
            (
                path!("Controller", "ValidateVolumeCapabilities"),
                d::ValidateVolumeCapabilitiesRequest {
                    volume_id: r.volume_id,
                    volume_capabilities: caps_from_hub(r.volume_capabilities)?,
                    volume_attributes: r.volume_context,
                    accessible_topology: Vec::new(),
                }
                .encode_to_vec(),
            )
        }
        Req::ListVolumes(r) => (
            path!("Controller", "ListVolumes"),
            d::ListVolumesRequest {
                max_entries: r.max_entries,
                starting_token: r.starting_token,
            }
            .encode_to_vec(),
        ),
        Req::GetCapacity(r) => (
            path!("Controller", "GetCapacity"),
            d::GetCapacityRequest {
                volume_capabilities: caps_from_hub(r.volume_capabilities)?,
                parameters: r.parameters,
                accessible_topology: r.accessible_topology.map(topo_from_hub),
            }
            .encode_to_vec(),
        ),
        Req::ControllerGetCapabilities(_) => {
            (path!("Controller", "ControllerGetCapabilities"), Vec::new())
        }
        Req::CreateSnapshot(r) => (
            path!("Controller", "CreateSnapshot"),
            d::CreateSnapshotRequest {
                source_volume_id: r.source_volume_id,
                name: r.name,
                create_snapshot_secrets: r.secrets,
                parameters: r.parameters,
            }
            .encode_to_vec(),
        ),
        Req::DeleteSnapshot(r) => (
            path!("Controller", "DeleteSnapshot"),
            d::DeleteSnapshotRequest {
                snapshot_id: r.snapshot_id,
                delete_snapshot_secrets: r.secrets,
            }
            .encode_to_vec(),
        ),
        // v1.x `secrets` on ListSnapshots have no v0.3 field; the plugin never asked for them.
        Req::ListSnapshots(r) => (
            path!("Controller", "ListSnapshots"),
            d::ListSnapshotsRequest {
                max_entries: r.max_entries,
                starting_token: r.starting_token,
                source_volume_id: r.source_volume_id,
                snapshot_id: r.snapshot_id,
            }
            .encode_to_vec(),
        ),
        Req::GetPluginCapabilities(_) => (path!("Identity", "GetPluginCapabilities"), Vec::new()),
        Req::GetPluginInfo(_) => (path!("Identity", "GetPluginInfo"), Vec::new()),
        Req::Probe(_) => (path!("Identity", "Probe"), Vec::new()),
        Req::NodeGetCapabilities(_) => (path!("Node", "NodeGetCapabilities"), Vec::new()),
        Req::NodeGetInfo(_) => (path!("Node", "NodeGetInfo"), Vec::new()),
        Req::NodeStageVolume(r) => (
            path!("Node", "NodeStageVolume"),
            d::NodeStageVolumeRequest {
                volume_id: r.volume_id,
                publish_info: r.publish_context,
                staging_target_path: r.staging_target_path,
                volume_capability: r.volume_capability.map(cap_from_hub).transpose()?,
                node_stage_secrets: r.secrets,
                volume_attributes: r.volume_context,
            }
            .encode_to_vec(),
        ),
        Req::NodeUnstageVolume(r) => (
            path!("Node", "NodeUnstageVolume"),
            d::NodeUnstageVolumeRequest {
                volume_id: r.volume_id,
                staging_target_path: r.staging_target_path,
            }
            .encode_to_vec(),
        ),
        Req::NodePublishVolume(r) => (
            path!("Node", "NodePublishVolume"),
            d::NodePublishVolumeRequest {
                volume_id: r.volume_id,
                publish_info: r.publish_context,
                staging_target_path: r.staging_target_path,
                target_path: r.target_path,
                volume_capability: r.volume_capability.map(cap_from_hub).transpose()?,
                readonly: r.readonly,
                node_publish_secrets: r.secrets,
                volume_attributes: r.volume_context,
            }
            .encode_to_vec(),
        ),
        Req::NodeUnpublishVolume(r) => (
            path!("Node", "NodeUnpublishVolume"),
            d::NodeUnpublishVolumeRequest {
                volume_id: r.volume_id,
                target_path: r.target_path,
            }
            .encode_to_vec(),
        ),
        // RPCs added after v0.3.
        other => return Err(missing_rpc(other.method().name(), D)),
    })
}

/// The v0.2 `NodeGetId` path and the conversion of its reply (the fallback when a v0.3-package
/// plugin answers NodeGetInfo with UNIMPLEMENTED).
pub(crate) const NODE_GET_ID: &str = path!("Node", "NodeGetId");
pub(crate) fn node_get_id_reply(body: &[u8]) -> Result<Resp, Status> {
    let r: d::NodeGetIdResponse = upstream_msg(body, "NodeGetIdResponse")?;
    Ok(Resp::NodeGetInfo(v1::NodeGetInfoResponse {
        node_id: r.node_id,
        ..Default::default()
    }))
}

/// A v0.3 upstream's reply to `req` → the hub reply.
pub(crate) fn upstream_reply(req: &Req, body: &[u8]) -> Result<Resp, Status> {
    let what = req.method().name();
    Ok(match req.method() {
        Method::CreateVolume => {
            let r: d::CreateVolumeResponse = upstream_msg(body, what)?;
            Resp::CreateVolume(v1::CreateVolumeResponse {
                volume: r.volume.map(volume_to_hub),
            })
        }
        Method::DeleteVolume => Resp::DeleteVolume(v1::DeleteVolumeResponse {}),
        Method::ControllerPublishVolume => {
            let r: d::ControllerPublishVolumeResponse = upstream_msg(body, what)?;
            Resp::ControllerPublishVolume(v1::ControllerPublishVolumeResponse {
                publish_context: r.publish_info,
            })
        }
        Method::ControllerUnpublishVolume => {
            Resp::ControllerUnpublishVolume(v1::ControllerUnpublishVolumeResponse {})
        }
        Method::ValidateVolumeCapabilities => {
            let r: d::ValidateVolumeCapabilitiesResponse = upstream_msg(body, what)?;
            Resp::ValidateVolumeCapabilities(validate_reply(req, r.supported, r.message))
        }
        Method::ListVolumes => {
            let r: d::ListVolumesResponse = upstream_msg(body, what)?;
            Resp::ListVolumes(v1::ListVolumesResponse {
                entries: r
                    .entries
                    .into_iter()
                    .map(|e| v1::list_volumes_response::Entry {
                        volume: e.volume.map(volume_to_hub),
                        status: None,
                    })
                    .collect(),
                next_token: r.next_token,
            })
        }
        Method::GetCapacity => {
            let r: d::GetCapacityResponse = upstream_msg(body, what)?;
            Resp::GetCapacity(v1::GetCapacityResponse {
                available_capacity: r.available_capacity,
                ..Default::default()
            })
        }
        Method::ControllerGetCapabilities => {
            let r: d::ControllerGetCapabilitiesResponse = upstream_msg(body, what)?;
            Resp::ControllerGetCapabilities(v1::ControllerGetCapabilitiesResponse {
                capabilities: ctrl_caps_to_hub(r.capabilities),
            })
        }
        Method::CreateSnapshot => {
            let r: d::CreateSnapshotResponse = upstream_msg(body, what)?;
            Resp::CreateSnapshot(v1::CreateSnapshotResponse {
                snapshot: r.snapshot.map(snapshot_to_hub),
            })
        }
        Method::DeleteSnapshot => Resp::DeleteSnapshot(v1::DeleteSnapshotResponse {}),
        Method::ListSnapshots => {
            let r: d::ListSnapshotsResponse = upstream_msg(body, what)?;
            Resp::ListSnapshots(v1::ListSnapshotsResponse {
                entries: r
                    .entries
                    .into_iter()
                    .map(|e| v1::list_snapshots_response::Entry {
                        snapshot: e.snapshot.map(snapshot_to_hub),
                    })
                    .collect(),
                next_token: r.next_token,
            })
        }
        Method::GetPluginCapabilities => {
            let r: d::GetPluginCapabilitiesResponse = upstream_msg(body, what)?;
            Resp::GetPluginCapabilities(v1::GetPluginCapabilitiesResponse {
                capabilities: plugin_caps_to_hub(r.capabilities),
            })
        }
        Method::GetPluginInfo => {
            let r: d::GetPluginInfoResponse = upstream_msg(body, what)?;
            Resp::GetPluginInfo(v1::GetPluginInfoResponse {
                name: r.name,
                vendor_version: r.vendor_version,
                manifest: r.manifest,
            })
        }
        Method::Probe => {
            let r: d::ProbeResponse = upstream_msg(body, what)?;
            Resp::Probe(v1::ProbeResponse { ready: r.ready })
        }
        Method::NodeGetCapabilities => {
            let r: d::NodeGetCapabilitiesResponse = upstream_msg(body, what)?;
            Resp::NodeGetCapabilities(v1::NodeGetCapabilitiesResponse {
                capabilities: node_caps_to_hub(r.capabilities),
            })
        }
        Method::NodeGetInfo => {
            let r: d::NodeGetInfoResponse = upstream_msg(body, what)?;
            Resp::NodeGetInfo(v1::NodeGetInfoResponse {
                node_id: r.node_id,
                max_volumes_per_node: r.max_volumes_per_node,
                accessible_topology: r.accessible_topology.map(topo_to_hub),
            })
        }
        Method::NodeStageVolume => Resp::NodeStageVolume(v1::NodeStageVolumeResponse {}),
        Method::NodeUnstageVolume => Resp::NodeUnstageVolume(v1::NodeUnstageVolumeResponse {}),
        Method::NodePublishVolume => Resp::NodePublishVolume(v1::NodePublishVolumeResponse {}),
        Method::NodeUnpublishVolume => {
            Resp::NodeUnpublishVolume(v1::NodeUnpublishVolumeResponse {})
        }
        other => return Err(missing_rpc(other.name(), D)),
    })
}

/// v0.x `supported` → v1 `confirmed`: a supported answer confirms exactly what was asked (the
/// context and capabilities of the request; v0.x plugins validated nothing else).
pub(crate) fn validate_reply(
    req: &Req,
    supported: bool,
    message: String,
) -> v1::ValidateVolumeCapabilitiesResponse {
    let confirmed = match (supported, req) {
        (true, Req::ValidateVolumeCapabilities(r)) => {
            Some(v1::validate_volume_capabilities_response::Confirmed {
                volume_context: r.volume_context.clone(),
                volume_capabilities: r.volume_capabilities.clone(),
                parameters: r.parameters.clone(),
                mutable_parameters: r.mutable_parameters.clone(),
            })
        }
        _ => None,
    };
    v1::ValidateVolumeCapabilitiesResponse { confirmed, message }
}
