//! v0.3 upstream side: hub request → the plugin's request, the plugin's reply → hub reply.

use super::*;

macro_rules! path {
    ($svc:literal, $m:literal) => {
        concat!("/csi.v0.", $svc, "/", $m)
    };
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
