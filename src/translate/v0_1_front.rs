//! v0.1 front side: a client's request → hub request, hub reply → the client's reply.

use super::*;

/// Decodes a version-only request and checks its version.
macro_rules! version_only {
    ($t:ty, $body:expr, $method:expr) => {{
        let r: $t = front_msg($body, $method)?;
        check_version(r.version)?;
    }};
}

/// A v0.1 client's request on RPC `method` → the hub request (or the gateway's own answer).
pub(crate) fn front_request(method: &str, body: &[u8]) -> Result<FrontCall, Status> {
    let req = match method {
        // Removed in v0.2: the gateway itself serves the versions it speaks.
        "GetSupportedVersions" => {
            let _: d::GetSupportedVersionsRequest = front_msg(body, method)?;
            let reply = d::GetSupportedVersionsResponse {
                supported_versions: version::known_versions(D)
                    .iter()
                    .map(|v| (*v).into())
                    .collect(),
            };
            return Ok(FrontCall::Local(reply.encode_to_vec()));
        }
        "CreateVolume" => {
            let r: d::CreateVolumeRequest = front_msg(body, method)?;
            check_version(r.version)?;
            Req::CreateVolume(v1::CreateVolumeRequest {
                name: r.name,
                capacity_range: r.capacity_range.map(range_to_hub).transpose()?,
                volume_capabilities: caps_to_hub(r.volume_capabilities),
                parameters: r.parameters,
                secrets: r.user_credentials,
                ..Default::default()
            })
        }
        "DeleteVolume" => {
            let r: d::DeleteVolumeRequest = front_msg(body, method)?;
            check_version(r.version)?;
            Req::DeleteVolume(v1::DeleteVolumeRequest {
                volume_id: r.volume_id,
                secrets: r.user_credentials,
            })
        }
        "ControllerPublishVolume" => {
            let r: d::ControllerPublishVolumeRequest = front_msg(body, method)?;
            check_version(r.version)?;
            Req::ControllerPublishVolume(v1::ControllerPublishVolumeRequest {
                volume_id: r.volume_id,
                node_id: r.node_id,
                volume_capability: r.volume_capability.map(cap_to_hub),
                readonly: r.readonly,
                secrets: r.user_credentials,
                volume_context: r.volume_attributes,
            })
        }
        "ControllerUnpublishVolume" => {
            let r: d::ControllerUnpublishVolumeRequest = front_msg(body, method)?;
            check_version(r.version)?;
            Req::ControllerUnpublishVolume(v1::ControllerUnpublishVolumeRequest {
                volume_id: r.volume_id,
                node_id: r.node_id,
                secrets: r.user_credentials,
            })
        }
        "ValidateVolumeCapabilities" => {
            let r: d::ValidateVolumeCapabilitiesRequest = front_msg(body, method)?;
            check_version(r.version)?;
            Req::ValidateVolumeCapabilities(v1::ValidateVolumeCapabilitiesRequest {
                volume_id: r.volume_id,
                volume_context: r.volume_attributes,
                volume_capabilities: caps_to_hub(r.volume_capabilities),
                ..Default::default()
            })
        }
        "ListVolumes" => {
            let r: d::ListVolumesRequest = front_msg(body, method)?;
            check_version(r.version)?;
            Req::ListVolumes(v1::ListVolumesRequest {
                max_entries: max_entries_to_hub(r.max_entries)?,
                starting_token: r.starting_token,
            })
        }
        "GetCapacity" => {
            let r: d::GetCapacityRequest = front_msg(body, method)?;
            check_version(r.version)?;
            Req::GetCapacity(v1::GetCapacityRequest {
                volume_capabilities: caps_to_hub(r.volume_capabilities),
                parameters: r.parameters,
                accessible_topology: None,
            })
        }
        "ControllerGetCapabilities" => {
            version_only!(d::ControllerGetCapabilitiesRequest, body, method);
            Req::ControllerGetCapabilities(v1::ControllerGetCapabilitiesRequest {})
        }
        // v0.2 merged ControllerProbe and NodeProbe into Identity.Probe.
        "ControllerProbe" => {
            version_only!(d::ControllerProbeRequest, body, method);
            Req::Probe(v1::ProbeRequest {})
        }
        "NodeProbe" => {
            version_only!(d::NodeProbeRequest, body, method);
            Req::Probe(v1::ProbeRequest {})
        }
        "GetPluginInfo" => {
            version_only!(d::GetPluginInfoRequest, body, method);
            Req::GetPluginInfo(v1::GetPluginInfoRequest {})
        }
        "GetNodeID" => {
            version_only!(d::GetNodeIdRequest, body, method);
            Req::NodeGetInfo(v1::NodeGetInfoRequest {})
        }
        "NodeGetCapabilities" => {
            version_only!(d::NodeGetCapabilitiesRequest, body, method);
            Req::NodeGetCapabilities(v1::NodeGetCapabilitiesRequest {})
        }
        "NodePublishVolume" => {
            let r: d::NodePublishVolumeRequest = front_msg(body, method)?;
            check_version(r.version)?;
            Req::NodePublishVolume(v1::NodePublishVolumeRequest {
                volume_id: r.volume_id,
                publish_context: r.publish_volume_info,
                staging_target_path: String::new(),
                target_path: r.target_path,
                volume_capability: r.volume_capability.map(cap_to_hub),
                readonly: r.readonly,
                secrets: r.user_credentials,
                volume_context: r.volume_attributes,
            })
        }
        "NodeUnpublishVolume" => {
            // v0.1 sent `user_credentials` on NodeUnpublishVolume; v0.2 dropped them.
            let r: d::NodeUnpublishVolumeRequest = front_msg(body, method)?;
            check_version(r.version)?;
            Req::NodeUnpublishVolume(v1::NodeUnpublishVolumeRequest {
                volume_id: r.volume_id,
                target_path: r.target_path,
            })
        }
        other => {
            return Err(Status::unimplemented(format!(
                "unknown CSI v0.1 method {other}"
            )))
        }
    };
    Ok(FrontCall::Hub(req))
}

/// The hub reply → the v0.1 reply to RPC `method`.
pub(crate) fn front_reply(method: &str, resp: Resp) -> Result<Vec<u8>, Status> {
    Ok(match method {
        "CreateVolume" => {
            let r = hub_reply!(resp, CreateVolume, method);
            d::CreateVolumeResponse {
                volume_info: r.volume.map(volume_from_hub).transpose()?,
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
                publish_volume_info: r.publish_context,
            }
            .encode_to_vec()
        }
        "ControllerUnpublishVolume" => {
            hub_reply!(resp, ControllerUnpublishVolume, method);
            d::ControllerUnpublishVolumeResponse {}.encode_to_vec()
        }
        "ValidateVolumeCapabilities" => {
            let r = hub_reply!(resp, ValidateVolumeCapabilities, method);
            d::ValidateVolumeCapabilitiesResponse {
                supported: r.confirmed.is_some(),
                message: r.message,
            }
            .encode_to_vec()
        }
        "ListVolumes" => {
            let r = hub_reply!(resp, ListVolumes, method);
            let mut entries = Vec::new();
            for e in r.entries {
                entries.push(d::list_volumes_response::Entry {
                    volume_info: e.volume.map(volume_from_hub).transpose()?,
                });
            }
            d::ListVolumesResponse {
                entries,
                next_token: r.next_token,
            }
            .encode_to_vec()
        }
        "GetCapacity" => {
            let r = hub_reply!(resp, GetCapacity, method);
            d::GetCapacityResponse {
                available_capacity: i64_to_u64(r.available_capacity, "available_capacity")?,
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
        // v0.1 probes have no "not ready" answer: a v1 `ready = false` is UNAVAILABLE (retry).
        "ControllerProbe" | "NodeProbe" => {
            let r = hub_reply!(resp, Probe, method);
            if r.ready == Some(false) {
                return Err(Status::unavailable(
                    "the plugin reports it is not ready yet",
                ));
            }
            Vec::new()
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
        "GetNodeID" => {
            let r = hub_reply!(resp, NodeGetInfo, method);
            d::GetNodeIdResponse { node_id: r.node_id }.encode_to_vec()
        }
        "NodeGetCapabilities" => {
            // v0.1 has no node capability but UNKNOWN: nothing crosses (no STAGE_UNSTAGE_VOLUME),
            // and the list v0.1 clients expect is [UNKNOWN] (capabilities::NODE_UNKNOWN_WHEN_EMPTY).
            hub_reply!(resp, NodeGetCapabilities, method);
            use d::node_service_capability as n;
            let unknown = d::NodeServiceCapability {
                r#type: Some(n::Type::Rpc(n::Rpc {
                    r#type: n::rpc::Type::Unknown as i32,
                })),
            };
            let capabilities = if capabilities::node_unknown_when_empty("v0.1") {
                vec![unknown]
            } else {
                Vec::new()
            };
            d::NodeGetCapabilitiesResponse { capabilities }.encode_to_vec()
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
                "unknown CSI v0.1 method {other}"
            )))
        }
    })
}
