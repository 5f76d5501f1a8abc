//! draft front side: a client's request → hub request, hub reply → the client's reply.

use super::*;

/// Checks the version of a decoded request; an unserved one is answered locally.
macro_rules! version {
    ($r:expr) => {
        if let Err(reply) = check_version($r.version) {
            return Ok(FrontCall::Local(reply));
        }
    };
}

/// A draft client's request on RPC `method` → the hub request (or the gateway's own answer).
/// A draft client expects every refusal as gRPC OK + `error`: a request the gateway cannot
/// translate (undecodable body, capacity over int64, node id over 256 bytes) is answered locally
/// with the RPC's error from the table. Only an unknown method stays a gRPC UNIMPLEMENTED.
pub(crate) fn front_request(method: &str, body: &[u8]) -> Result<FrontCall, Status> {
    let Some(rpc) = DraftRpc::from_name(method) else {
        return Err(Status::unimplemented(format!(
            "unknown CSI v0.1-oneof method {method}"
        )));
    };
    match translate_request(method, body) {
        Err(status) => Ok(FrontCall::Local(error_reply(&errors::status_to_draft(
            rpc, &status,
        )))),
        ok => ok,
    }
}

fn translate_request(method: &str, body: &[u8]) -> Result<FrontCall, Status> {
    let req = match method {
        "GetSupportedVersions" => {
            let _: d::GetSupportedVersionsRequest = front_msg(body, method)?;
            use d::get_supported_versions_response as g;
            let reply = d::GetSupportedVersionsResponse {
                reply: Some(g::Reply::Result(g::Result {
                    supported_versions: version::known_versions(D)
                        .iter()
                        .map(|v| (*v).into())
                        .collect(),
                })),
            };
            return Ok(FrontCall::Local(reply.encode_to_vec()));
        }
        "CreateVolume" => {
            let r: d::CreateVolumeRequest = front_msg(body, method)?;
            version!(r);
            Req::CreateVolume(v1::CreateVolumeRequest {
                name: r.name,
                capacity_range: r.capacity_range.map(range_to_hub).transpose()?,
                volume_capabilities: caps_to_hub(r.volume_capabilities),
                parameters: r.parameters,
                secrets: creds(r.user_credentials),
                ..Default::default()
            })
        }
        "DeleteVolume" => {
            // v1 DeleteVolume carries no context: a newer plugin never needs the metadata.
            let r: d::DeleteVolumeRequest = front_msg(body, method)?;
            version!(r);
            let (id, _) = handle_parts(r.volume_handle);
            Req::DeleteVolume(v1::DeleteVolumeRequest {
                volume_id: id,
                secrets: creds(r.user_credentials),
            })
        }
        "ControllerPublishVolume" => {
            let r: d::ControllerPublishVolumeRequest = front_msg(body, method)?;
            version!(r);
            let (id, metadata) = handle_parts(r.volume_handle);
            Req::ControllerPublishVolume(v1::ControllerPublishVolumeRequest {
                volume_id: id,
                node_id: ids::node_id_to_string(r.node_id.as_ref())?,
                volume_capability: r.volume_capability.map(cap_to_hub),
                readonly: r.readonly,
                secrets: creds(r.user_credentials),
                volume_context: metadata,
            })
        }
        "ControllerUnpublishVolume" => {
            let r: d::ControllerUnpublishVolumeRequest = front_msg(body, method)?;
            version!(r);
            let (id, _) = handle_parts(r.volume_handle);
            Req::ControllerUnpublishVolume(v1::ControllerUnpublishVolumeRequest {
                volume_id: id,
                node_id: ids::node_id_to_string(r.node_id.as_ref())?,
                secrets: creds(r.user_credentials),
            })
        }
        "ValidateVolumeCapabilities" => {
            // The draft validated a whole `VolumeInfo`; its capacity has no v1 field (v1 asks
            // about an existing volume by id).
            let r: d::ValidateVolumeCapabilitiesRequest = front_msg(body, method)?;
            version!(r);
            let (id, metadata) = handle_parts(r.volume_info.and_then(|v| v.handle));
            Req::ValidateVolumeCapabilities(v1::ValidateVolumeCapabilitiesRequest {
                volume_id: id,
                volume_context: metadata,
                volume_capabilities: caps_to_hub(r.volume_capabilities),
                ..Default::default()
            })
        }
        "ListVolumes" => {
            let r: d::ListVolumesRequest = front_msg(body, method)?;
            version!(r);
            let max_entries = i32::try_from(r.max_entries).map_err(|_| {
                Status::out_of_range(format!(
                    "max_entries = {} does not fit int32",
                    r.max_entries
                ))
            })?;
            Req::ListVolumes(v1::ListVolumesRequest {
                max_entries,
                starting_token: r.starting_token,
            })
        }
        "GetCapacity" => {
            let r: d::GetCapacityRequest = front_msg(body, method)?;
            version!(r);
            Req::GetCapacity(v1::GetCapacityRequest {
                volume_capabilities: caps_to_hub(r.volume_capabilities),
                parameters: r.parameters,
                accessible_topology: None,
            })
        }
        "ControllerGetCapabilities" => {
            let r: d::ControllerGetCapabilitiesRequest = front_msg(body, method)?;
            version!(r);
            Req::ControllerGetCapabilities(v1::ControllerGetCapabilitiesRequest {})
        }
        "GetPluginInfo" => {
            let r: d::GetPluginInfoRequest = front_msg(body, method)?;
            version!(r);
            Req::GetPluginInfo(v1::GetPluginInfoRequest {})
        }
        "GetNodeID" => {
            let r: d::GetNodeIdRequest = front_msg(body, method)?;
            version!(r);
            Req::NodeGetInfo(v1::NodeGetInfoRequest {})
        }
        "NodeGetCapabilities" => {
            let r: d::NodeGetCapabilitiesRequest = front_msg(body, method)?;
            version!(r);
            Req::NodeGetCapabilities(v1::NodeGetCapabilitiesRequest {})
        }
        "ProbeNode" => {
            let r: d::ProbeNodeRequest = front_msg(body, method)?;
            version!(r);
            Req::Probe(v1::ProbeRequest {})
        }
        "NodePublishVolume" => {
            let r: d::NodePublishVolumeRequest = front_msg(body, method)?;
            version!(r);
            let (id, metadata) = handle_parts(r.volume_handle);
            Req::NodePublishVolume(v1::NodePublishVolumeRequest {
                volume_id: id,
                publish_context: r.publish_volume_info.map(|p| p.values).unwrap_or_default(),
                staging_target_path: String::new(),
                target_path: r.target_path,
                volume_capability: r.volume_capability.map(cap_to_hub),
                readonly: r.readonly,
                secrets: creds(r.user_credentials),
                volume_context: metadata,
            })
        }
        "NodeUnpublishVolume" => {
            // v0.2 dropped credentials from NodeUnpublishVolume; v1 has none.
            let r: d::NodeUnpublishVolumeRequest = front_msg(body, method)?;
            version!(r);
            let (id, _) = handle_parts(r.volume_handle);
            Req::NodeUnpublishVolume(v1::NodeUnpublishVolumeRequest {
                volume_id: id,
                target_path: r.target_path,
            })
        }
        other => {
            return Err(Status::unimplemented(format!(
                "unknown CSI v0.1-oneof method {other}"
            )))
        }
    };
    Ok(FrontCall::Hub(req))
}

/// Wraps a result message into the draft reply `$t` of module `$m`.
macro_rules! ok {
    ($m:ident, $t:ident, $res:expr) => {
        d::$t {
            reply: Some(d::$m::Reply::Result($res)),
        }
        .encode_to_vec()
    };
}

/// The hub outcome → the draft reply to RPC `method`. Errors become the reply's `error` branch.
pub(crate) fn front_reply(method: &str, outcome: Result<Resp, Status>) -> Result<Vec<u8>, Status> {
    let rpc = DraftRpc::from_name(method)
        .ok_or_else(|| Status::unimplemented(format!("unknown CSI v0.1-oneof method {method}")))?;
    let resp = match outcome {
        Ok(r) => r,
        Err(status) => return Ok(error_reply(&errors::status_to_draft(rpc, &status))),
    };
    let r = match front_result(method, resp) {
        Ok(bytes) => bytes,
        // A reply the draft cannot express (e.g. a capacity over uint64) is this RPC's error.
        Err(status) => error_reply(&errors::status_to_draft(rpc, &status)),
    };
    Ok(r)
}

fn front_result(method: &str, resp: Resp) -> Result<Vec<u8>, Status> {
    use d::error::general_error::GeneralErrorCode as G;
    Ok(match method {
        "CreateVolume" => {
            let r = hub_reply!(resp, CreateVolume, method);
            let volume_info = r.volume.map(volume_from_hub).transpose()?;
            ok!(
                create_volume_response,
                CreateVolumeResponse,
                d::create_volume_response::Result { volume_info }
            )
        }
        "DeleteVolume" => {
            hub_reply!(resp, DeleteVolume, method);
            ok!(
                delete_volume_response,
                DeleteVolumeResponse,
                Default::default()
            )
        }
        "ControllerPublishVolume" => {
            let r = hub_reply!(resp, ControllerPublishVolume, method);
            let info = (!r.publish_context.is_empty()).then_some(d::PublishVolumeInfo {
                values: r.publish_context,
            });
            ok!(
                controller_publish_volume_response,
                ControllerPublishVolumeResponse,
                d::controller_publish_volume_response::Result {
                    publish_volume_info: info
                }
            )
        }
        "ControllerUnpublishVolume" => {
            hub_reply!(resp, ControllerUnpublishVolume, method);
            ok!(
                controller_unpublish_volume_response,
                ControllerUnpublishVolumeResponse,
                Default::default()
            )
        }
        "ValidateVolumeCapabilities" => {
            let r = hub_reply!(resp, ValidateVolumeCapabilities, method);
            ok!(
                validate_volume_capabilities_response,
                ValidateVolumeCapabilitiesResponse,
                d::validate_volume_capabilities_response::Result {
                    supported: r.confirmed.is_some(),
                    message: r.message
                }
            )
        }
        "ListVolumes" => {
            let r = hub_reply!(resp, ListVolumes, method);
            let mut entries = Vec::new();
            for e in r.entries {
                entries.push(d::list_volumes_response::result::Entry {
                    volume_info: e.volume.map(volume_from_hub).transpose()?,
                });
            }
            ok!(
                list_volumes_response,
                ListVolumesResponse,
                d::list_volumes_response::Result {
                    entries,
                    next_token: r.next_token
                }
            )
        }
        "GetCapacity" => {
            let r = hub_reply!(resp, GetCapacity, method);
            let available_capacity = i64_to_u64(r.available_capacity, "available_capacity")?;
            ok!(
                get_capacity_response,
                GetCapacityResponse,
                d::get_capacity_response::Result { available_capacity }
            )
        }
        "ControllerGetCapabilities" => {
            let r = hub_reply!(resp, ControllerGetCapabilities, method);
            ok!(
                controller_get_capabilities_response,
                ControllerGetCapabilitiesResponse,
                d::controller_get_capabilities_response::Result {
                    capabilities: ctrl_caps_from_hub(r.capabilities)
                }
            )
        }
        "GetPluginInfo" => {
            let r = hub_reply!(resp, GetPluginInfo, method);
            ok!(
                get_plugin_info_response,
                GetPluginInfoResponse,
                d::get_plugin_info_response::Result {
                    name: r.name,
                    vendor_version: r.vendor_version,
                    manifest: r.manifest
                }
            )
        }
        "GetNodeID" => {
            let r = hub_reply!(resp, NodeGetInfo, method);
            let node_id = ids::node_id_from_string(&r.node_id)?;
            ok!(
                get_node_id_response,
                GetNodeIdResponse,
                d::get_node_id_response::Result { node_id }
            )
        }
        "NodeGetCapabilities" => {
            // The draft has no node capability but UNKNOWN (no STAGE_UNSTAGE_VOLUME).
            hub_reply!(resp, NodeGetCapabilities, method);
            ok!(
                node_get_capabilities_response,
                NodeGetCapabilitiesResponse,
                Default::default()
            )
        }
        "ProbeNode" => {
            // The draft has no "not ready" answer: a retryable GeneralError.
            let r = hub_reply!(resp, Probe, method);
            if r.ready == Some(false) {
                return Ok(error_reply(&errors::general_error(
                    G::Undefined,
                    false,
                    "the plugin reports it is not ready yet".into(),
                )));
            }
            ok!(probe_node_response, ProbeNodeResponse, Default::default())
        }
        "NodePublishVolume" => {
            hub_reply!(resp, NodePublishVolume, method);
            ok!(
                node_publish_volume_response,
                NodePublishVolumeResponse,
                Default::default()
            )
        }
        "NodeUnpublishVolume" => {
            hub_reply!(resp, NodeUnpublishVolume, method);
            ok!(
                node_unpublish_volume_response,
                NodeUnpublishVolumeResponse,
                Default::default()
            )
        }
        other => {
            return Err(Status::unimplemented(format!(
                "unknown CSI v0.1-oneof method {other}"
            )))
        }
    })
}
