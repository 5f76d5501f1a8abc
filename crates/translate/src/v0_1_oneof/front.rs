//! draft front side: a client's request → hub request, hub reply → the client's reply.

use prost::Message;
use tonic::Status;

use super::{check_version, error_reply, generated as g, D};
use crate::dialect::proto::v0_1_oneof as d;
use crate::errors::{self, DraftRpc};
use crate::hub::{v1, Request as Req, Response as Resp};
use crate::{front_msg, hub_reply, version, FrontCall};

/// Checks the version of a decoded request; an unserved one is answered locally.
macro_rules! version {
    ($r:expr) => {
        if let Err(reply) = check_version(&$r.version) {
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

/// `msg`, typed as the input of `conv` (so its `version` can be read before converting).
fn input_of<M, H>(_: impl Fn(M) -> Result<H, Status>, msg: M) -> M {
    msg
}

fn translate_request(method: &str, body: &[u8]) -> Result<FrontCall, Status> {
    /// Decodes the body as the dialect's request, checks its version and converts it
    /// (`generated.rs`).
    macro_rules! hub {
        ($v:ident, $conv:ident) => {{
            let r = input_of(g::$conv, front_msg(body, method)?);
            version!(r);
            Req::$v(g::$conv(r)?)
        }};
    }
    /// Decodes a version-only request and checks its version.
    macro_rules! version_only {
        ($t:ty, $hub:expr) => {{
            let r: $t = front_msg(body, method)?;
            version!(r);
            $hub
        }};
    }
    let req = match method {
        "GetSupportedVersions" => {
            let _: d::GetSupportedVersionsRequest = front_msg(body, method)?;
            use d::get_supported_versions_response as r;
            let reply = d::GetSupportedVersionsResponse {
                reply: Some(r::Reply::Result(r::Result {
                    supported_versions: version::known_versions(D)
                        .iter()
                        .map(|v| (*v).into())
                        .collect(),
                })),
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
        "ProbeNode" => version_only!(d::ProbeNodeRequest, Req::Probe(v1::ProbeRequest {})),
        "NodePublishVolume" => hub!(NodePublishVolume, node_publish_volume_request_to_hub),
        "NodeUnpublishVolume" => hub!(NodeUnpublishVolume, node_unpublish_volume_request_to_hub),
        other => {
            return Err(Status::unimplemented(format!(
                "unknown CSI v0.1-oneof method {other}"
            )))
        }
    };
    Ok(FrontCall::Hub(Box::new(req)))
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
    /// The hub reply `$v` converted (`generated.rs`) into the draft `$t`'s result.
    macro_rules! reply {
        ($v:ident, $m:ident, $t:ident, $conv:ident) => {
            ok!($m, $t, g::$conv(hub_reply!(resp, $v, method))?)
        };
    }
    /// A draft reply whose result has no fields.
    macro_rules! empty {
        ($v:ident, $m:ident, $t:ident) => {{
            hub_reply!(resp, $v, method);
            ok!($m, $t, Default::default())
        }};
    }
    Ok(match method {
        "CreateVolume" => reply!(
            CreateVolume,
            create_volume_response,
            CreateVolumeResponse,
            create_volume_response_result_from_hub
        ),
        "DeleteVolume" => empty!(DeleteVolume, delete_volume_response, DeleteVolumeResponse),
        "ControllerPublishVolume" => reply!(
            ControllerPublishVolume,
            controller_publish_volume_response,
            ControllerPublishVolumeResponse,
            controller_publish_volume_response_result_from_hub
        ),
        "ControllerUnpublishVolume" => empty!(
            ControllerUnpublishVolume,
            controller_unpublish_volume_response,
            ControllerUnpublishVolumeResponse
        ),
        "ValidateVolumeCapabilities" => {
            // v0.1.0's `supported` → v1.0 `confirmed` (present = supported).
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
        "ListVolumes" => reply!(
            ListVolumes,
            list_volumes_response,
            ListVolumesResponse,
            list_volumes_response_result_from_hub
        ),
        "GetCapacity" => reply!(
            GetCapacity,
            get_capacity_response,
            GetCapacityResponse,
            get_capacity_response_result_from_hub
        ),
        "ControllerGetCapabilities" => reply!(
            ControllerGetCapabilities,
            controller_get_capabilities_response,
            ControllerGetCapabilitiesResponse,
            controller_get_capabilities_response_result_from_hub
        ),
        "GetPluginInfo" => reply!(
            GetPluginInfo,
            get_plugin_info_response,
            GetPluginInfoResponse,
            get_plugin_info_response_result_from_hub
        ),
        "GetNodeID" => reply!(
            NodeGetInfo,
            get_node_id_response,
            GetNodeIdResponse,
            get_node_id_response_result_from_hub
        ),
        // The draft has no node capability but UNKNOWN (no STAGE_UNSTAGE_VOLUME).
        "NodeGetCapabilities" => empty!(
            NodeGetCapabilities,
            node_get_capabilities_response,
            NodeGetCapabilitiesResponse
        ),
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
        "NodePublishVolume" => empty!(
            NodePublishVolume,
            node_publish_volume_response,
            NodePublishVolumeResponse
        ),
        "NodeUnpublishVolume" => empty!(
            NodeUnpublishVolume,
            node_unpublish_volume_response,
            NodeUnpublishVolumeResponse
        ),
        other => {
            return Err(Status::unimplemented(format!(
                "unknown CSI v0.1-oneof method {other}"
            )))
        }
    })
}
