//! v0.1 upstream side: hub request → the plugin's request, the plugin's reply → hub reply.

use super::*;

macro_rules! path {
    ($svc:literal, $m:literal) => {
        concat!("/csi.", $svc, "/", $m)
    };
}

pub(crate) const CONTROLLER_PROBE: &str = path!("Controller", "ControllerProbe");
pub(crate) const NODE_PROBE: &str = path!("Node", "NodeProbe");

/// A hub request → the v0.1 upstream path and body. `Probe` and `GetPluginCapabilities` are
/// orchestrated by `upstream.rs`; here they are UNIMPLEMENTED like every RPC v0.1 lacks.
pub(crate) fn upstream_request(
    req: Req,
    v: Option<Version>,
) -> Result<(&'static str, Vec<u8>), Status> {
    let version = upstream_version(v)?;
    Ok(match req {
        Req::CreateVolume(r) => {
            if r.volume_content_source.is_some() {
                return Err(unsupported_field("volume_content_source", D));
            }
            if r.accessibility_requirements.is_some() {
                return Err(unsupported_field("accessibility_requirements", D));
            }
            if !r.mutable_parameters.is_empty() {
                return Err(unsupported_field("mutable_parameters", D));
            }
            let m = d::CreateVolumeRequest {
                version,
                name: r.name,
                capacity_range: r.capacity_range.map(range_from_hub).transpose()?,
                volume_capabilities: caps_from_hub(r.volume_capabilities)?,
                parameters: r.parameters,
                user_credentials: r.secrets,
            };
            (path!("Controller", "CreateVolume"), m.encode_to_vec())
        }
        Req::DeleteVolume(r) => (
            path!("Controller", "DeleteVolume"),
            d::DeleteVolumeRequest {
                version,
                volume_id: r.volume_id,
                user_credentials: r.secrets,
            }
            .encode_to_vec(),
        ),
        Req::ControllerPublishVolume(r) => (
            path!("Controller", "ControllerPublishVolume"),
            d::ControllerPublishVolumeRequest {
                version,
                volume_id: r.volume_id,
                node_id: r.node_id,
                volume_capability: r.volume_capability.map(cap_from_hub).transpose()?,
                readonly: r.readonly,
                user_credentials: r.secrets,
                volume_attributes: r.volume_context,
            }
            .encode_to_vec(),
        ),
        Req::ControllerUnpublishVolume(r) => (
            path!("Controller", "ControllerUnpublishVolume"),
            d::ControllerUnpublishVolumeRequest {
                version,
                volume_id: r.volume_id,
                node_id: r.node_id,
                user_credentials: r.secrets,
            }
            .encode_to_vec(),
        ),
        Req::ValidateVolumeCapabilities(r) => {
            // `parameters`/`mutable_parameters` (v1.0/v1.9) cannot be validated by a v0.1
            // plugin; `secrets` (v1.0) have no v0.1 field and are left out.
            if !r.parameters.is_empty() {
                return Err(unsupported_field("parameters", D));
            }
            if !r.mutable_parameters.is_empty() {
                return Err(unsupported_field("mutable_parameters", D));
            }
            (
                path!("Controller", "ValidateVolumeCapabilities"),
                d::ValidateVolumeCapabilitiesRequest {
                    version,
                    volume_id: r.volume_id,
                    volume_capabilities: caps_from_hub(r.volume_capabilities)?,
                    volume_attributes: r.volume_context,
                }
                .encode_to_vec(),
            )
        }
        Req::ListVolumes(r) => (
            path!("Controller", "ListVolumes"),
            d::ListVolumesRequest {
                version,
                max_entries: max_entries_from_hub(r.max_entries)?,
                starting_token: r.starting_token,
            }
            .encode_to_vec(),
        ),
        Req::GetCapacity(r) => {
            if r.accessible_topology.is_some() {
                return Err(unsupported_field("accessible_topology", D));
            }
            (
                path!("Controller", "GetCapacity"),
                d::GetCapacityRequest {
                    version,
                    volume_capabilities: caps_from_hub(r.volume_capabilities)?,
                    parameters: r.parameters,
                }
                .encode_to_vec(),
            )
        }
        Req::ControllerGetCapabilities(_) => (
            path!("Controller", "ControllerGetCapabilities"),
            d::ControllerGetCapabilitiesRequest { version }.encode_to_vec(),
        ),
        Req::GetPluginInfo(_) => (
            path!("Identity", "GetPluginInfo"),
            d::GetPluginInfoRequest { version }.encode_to_vec(),
        ),
        Req::NodeGetInfo(_) => (
            path!("Node", "GetNodeID"),
            d::GetNodeIdRequest { version }.encode_to_vec(),
        ),
        Req::NodeGetCapabilities(_) => (
            path!("Node", "NodeGetCapabilities"),
            d::NodeGetCapabilitiesRequest { version }.encode_to_vec(),
        ),
        Req::NodePublishVolume(r) => {
            // Staging arrived in v0.2: a v0.1 plugin never advertises it, so no staging path.
            if !r.staging_target_path.is_empty() {
                return Err(unsupported_field("staging_target_path", D));
            }
            (
                path!("Node", "NodePublishVolume"),
                d::NodePublishVolumeRequest {
                    version,
                    volume_id: r.volume_id,
                    publish_volume_info: r.publish_context,
                    target_path: r.target_path,
                    volume_capability: r.volume_capability.map(cap_from_hub).transpose()?,
                    readonly: r.readonly,
                    user_credentials: r.secrets,
                    volume_attributes: r.volume_context,
                }
                .encode_to_vec(),
            )
        }
        Req::NodeUnpublishVolume(r) => (
            path!("Node", "NodeUnpublishVolume"),
            d::NodeUnpublishVolumeRequest {
                version,
                volume_id: r.volume_id,
                target_path: r.target_path,
                user_credentials: HashMap::new(),
            }
            .encode_to_vec(),
        ),
        other => return Err(missing_rpc(other.method().name(), D)),
    })
}

/// A v0.1 upstream's reply to `req` → the hub reply.
pub(crate) fn upstream_reply(req: &Req, body: &[u8]) -> Result<Resp, Status> {
    let what = req.method().name();
    Ok(match req.method() {
        Method::CreateVolume => {
            let r: d::CreateVolumeResponse = upstream_msg(body, what)?;
            Resp::CreateVolume(v1::CreateVolumeResponse {
                volume: r.volume_info.map(volume_to_hub).transpose()?,
            })
        }
        Method::DeleteVolume => Resp::DeleteVolume(v1::DeleteVolumeResponse {}),
        Method::ControllerPublishVolume => {
            let r: d::ControllerPublishVolumeResponse = upstream_msg(body, what)?;
            Resp::ControllerPublishVolume(v1::ControllerPublishVolumeResponse {
                publish_context: r.publish_volume_info,
            })
        }
        Method::ControllerUnpublishVolume => {
            Resp::ControllerUnpublishVolume(v1::ControllerUnpublishVolumeResponse {})
        }
        Method::ValidateVolumeCapabilities => {
            let r: d::ValidateVolumeCapabilitiesResponse = upstream_msg(body, what)?;
            Resp::ValidateVolumeCapabilities(super::super::v0_3::validate_reply(
                req,
                r.supported,
                r.message,
            ))
        }
        Method::ListVolumes => {
            let r: d::ListVolumesResponse = upstream_msg(body, what)?;
            let mut entries = Vec::new();
            for e in r.entries {
                entries.push(v1::list_volumes_response::Entry {
                    volume: e.volume_info.map(volume_to_hub).transpose()?,
                    status: None,
                });
            }
            Resp::ListVolumes(v1::ListVolumesResponse {
                entries,
                next_token: r.next_token,
            })
        }
        Method::GetCapacity => {
            let r: d::GetCapacityResponse = upstream_msg(body, what)?;
            Resp::GetCapacity(v1::GetCapacityResponse {
                available_capacity: u64_to_i64(r.available_capacity, "available_capacity")?,
                ..Default::default()
            })
        }
        Method::ControllerGetCapabilities => {
            let r: d::ControllerGetCapabilitiesResponse = upstream_msg(body, what)?;
            Resp::ControllerGetCapabilities(v1::ControllerGetCapabilitiesResponse {
                capabilities: ctrl_caps_to_hub(r.capabilities),
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
        Method::NodeGetInfo => {
            let r: d::GetNodeIdResponse = upstream_msg(body, what)?;
            Resp::NodeGetInfo(v1::NodeGetInfoResponse {
                node_id: r.node_id,
                ..Default::default()
            })
        }
        Method::NodeGetCapabilities => {
            // v0.1 node capabilities are all UNKNOWN: nothing to carry.
            let _: d::NodeGetCapabilitiesResponse = upstream_msg(body, what)?;
            Resp::NodeGetCapabilities(v1::NodeGetCapabilitiesResponse {
                capabilities: Vec::new(),
            })
        }
        Method::NodePublishVolume => Resp::NodePublishVolume(v1::NodePublishVolumeResponse {}),
        Method::NodeUnpublishVolume => {
            Resp::NodeUnpublishVolume(v1::NodeUnpublishVolumeResponse {})
        }
        other => return Err(missing_rpc(other.name(), D)),
    })
}

/// The bodies of `ControllerProbe` and `NodeProbe` (v0.1): the negotiated version only.
pub(crate) fn probe_requests(v: Option<Version>) -> Result<(Vec<u8>, Vec<u8>), Status> {
    let version = upstream_version(v)?;
    Ok((
        d::ControllerProbeRequest { version }.encode_to_vec(),
        d::NodeProbeRequest { version }.encode_to_vec(),
    ))
}
