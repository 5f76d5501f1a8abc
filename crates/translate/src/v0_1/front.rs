//! v0.1 front side: a client's request → hub request, hub reply → the client's reply.

use prost::Message;
use tonic::Status;

use super::{check_version, generated as g, D};
use crate::dialect::proto::v0_1 as d;
use crate::hub::{v1, Request as Req, Response as Resp};
use crate::{capabilities, front_msg, hub_reply, version, FrontCall};

/// A v0.1 client's request on RPC `method` → the hub request (or the gateway's own answer).
pub(crate) fn front_request(method: &str, body: &[u8]) -> Result<FrontCall, Status> {
    /// Decodes the body as the dialect's request, checks its version and converts it
    /// (`generated.rs`).
    macro_rules! hub {
        ($v:ident, $conv:ident) => {{
            let r = input_of(g::$conv, front_msg(body, method)?);
            check_version(&r.version)?;
            Req::$v(g::$conv(r)?)
        }};
    }
    /// Decodes a version-only request and checks its version.
    macro_rules! version_only {
        ($t:ty, $hub:expr) => {{
            let r: $t = front_msg(body, method)?;
            check_version(&r.version)?;
            $hub
        }};
    }
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
        "CreateVolume" => hub!(CreateVolume, create_volume_request_to_hub),
        "DeleteVolume" => hub!(DeleteVolume, delete_volume_request_to_hub),
        "ControllerPublishVolume" => hub!(
            ControllerPublishVolume,
            controller_publish_volume_request_to_hub
        ),
        "ControllerUnpublishVolume" => hub!(
            ControllerUnpublishVolume,
            controller_unpublish_volume_request_to_hub
        ),
        "ValidateVolumeCapabilities" => hub!(
            ValidateVolumeCapabilities,
            validate_volume_capabilities_request_to_hub
        ),
        "ListVolumes" => hub!(ListVolumes, list_volumes_request_to_hub),
        "GetCapacity" => hub!(GetCapacity, get_capacity_request_to_hub),
        "ControllerGetCapabilities" => version_only!(
            d::ControllerGetCapabilitiesRequest,
            Req::ControllerGetCapabilities(v1::ControllerGetCapabilitiesRequest {})
        ),
        // v0.2 merged ControllerProbe and NodeProbe into Identity.Probe.
        "ControllerProbe" => {
            version_only!(d::ControllerProbeRequest, Req::Probe(v1::ProbeRequest {}))
        }
        "NodeProbe" => version_only!(d::NodeProbeRequest, Req::Probe(v1::ProbeRequest {})),
        "GetPluginInfo" => version_only!(
            d::GetPluginInfoRequest,
            Req::GetPluginInfo(v1::GetPluginInfoRequest {})
        ),
        "GetNodeID" => version_only!(
            d::GetNodeIdRequest,
            Req::NodeGetInfo(v1::NodeGetInfoRequest {})
        ),
        "NodeGetCapabilities" => version_only!(
            d::NodeGetCapabilitiesRequest,
            Req::NodeGetCapabilities(v1::NodeGetCapabilitiesRequest {})
        ),
        "NodePublishVolume" => hub!(NodePublishVolume, node_publish_volume_request_to_hub),
        "NodeUnpublishVolume" => hub!(NodeUnpublishVolume, node_unpublish_volume_request_to_hub),
        other => {
            return Err(Status::unimplemented(format!(
                "unknown CSI v0.1 method {other}"
            )))
        }
    };
    Ok(FrontCall::Hub(Box::new(req)))
}

/// `msg`, typed as the input of `conv` (so its `version` can be read before converting).
fn input_of<M, H>(_: impl Fn(M) -> Result<H, Status>, msg: M) -> M {
    msg
}

/// The hub reply → the v0.1 reply to RPC `method`.
pub(crate) fn front_reply(method: &str, resp: Resp) -> Result<Vec<u8>, Status> {
    /// The hub reply `$v` converted (`generated.rs`) and encoded.
    macro_rules! reply {
        ($v:ident, $conv:ident) => {
            g::$conv(hub_reply!(resp, $v, method))?.encode_to_vec()
        };
    }
    /// A reply with no fields.
    macro_rules! empty {
        ($v:ident, $t:ident) => {{
            hub_reply!(resp, $v, method);
            d::$t {}.encode_to_vec()
        }};
    }
    Ok(match method {
        "CreateVolume" => reply!(CreateVolume, create_volume_response_from_hub),
        "DeleteVolume" => empty!(DeleteVolume, DeleteVolumeResponse),
        "ControllerPublishVolume" => reply!(
            ControllerPublishVolume,
            controller_publish_volume_response_from_hub
        ),
        "ControllerUnpublishVolume" => {
            empty!(ControllerUnpublishVolume, ControllerUnpublishVolumeResponse)
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
        "ListVolumes" => reply!(ListVolumes, list_volumes_response_from_hub),
        "GetCapacity" => reply!(GetCapacity, get_capacity_response_from_hub),
        "ControllerGetCapabilities" => reply!(
            ControllerGetCapabilities,
            controller_get_capabilities_response_from_hub
        ),
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
        "GetPluginInfo" => reply!(GetPluginInfo, get_plugin_info_response_from_hub),
        "GetNodeID" => reply!(NodeGetInfo, get_node_id_response_from_hub),
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
        "NodePublishVolume" => empty!(NodePublishVolume, NodePublishVolumeResponse),
        "NodeUnpublishVolume" => empty!(NodeUnpublishVolume, NodeUnpublishVolumeResponse),
        other => {
            return Err(Status::unimplemented(format!(
                "unknown CSI v0.1 method {other}"
            )))
        }
    })
}
