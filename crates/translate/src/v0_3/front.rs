//! v0.3 front side: a client's request → hub request, hub reply → the client's reply.

use prost::Message;
use tonic::Status;

use super::generated as g;
use crate::dialect::proto::v0_3 as d;
use crate::hub::{v1, Request as Req, Response as Resp};
use crate::{front_msg, hub_reply, FrontCall};

/// A v0.3 client's request on RPC `method` → the hub request.
pub(crate) fn front_request(method: &str, body: &[u8]) -> Result<FrontCall, Status> {
    /// Decodes the body as the dialect's request and converts it (`generated.rs`).
    macro_rules! hub {
        ($v:ident, $conv:ident) => {
            Req::$v(g::$conv(front_msg(body, method)?)?)
        };
    }
    let req = match method {
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
        "ControllerGetCapabilities" => {
            Req::ControllerGetCapabilities(v1::ControllerGetCapabilitiesRequest {})
        }
        "CreateSnapshot" => hub!(CreateSnapshot, create_snapshot_request_to_hub),
        "DeleteSnapshot" => hub!(DeleteSnapshot, delete_snapshot_request_to_hub),
        "ListSnapshots" => hub!(ListSnapshots, list_snapshots_request_to_hub),
        "GetPluginCapabilities" => Req::GetPluginCapabilities(v1::GetPluginCapabilitiesRequest {}),
        "GetPluginInfo" => Req::GetPluginInfo(v1::GetPluginInfoRequest {}),
        "Probe" => Req::Probe(v1::ProbeRequest {}),
        "NodeGetCapabilities" => Req::NodeGetCapabilities(v1::NodeGetCapabilitiesRequest {}),
        // v0.3 deprecated NodeGetId in favour of NodeGetInfo (v1 removed it).
        "NodeGetId" | "NodeGetInfo" => Req::NodeGetInfo(v1::NodeGetInfoRequest {}),
        "NodeStageVolume" => hub!(NodeStageVolume, node_stage_volume_request_to_hub),
        "NodeUnstageVolume" => hub!(NodeUnstageVolume, node_unstage_volume_request_to_hub),
        "NodePublishVolume" => hub!(NodePublishVolume, node_publish_volume_request_to_hub),
        "NodeUnpublishVolume" => hub!(NodeUnpublishVolume, node_unpublish_volume_request_to_hub),
        other => {
            return Err(Status::unimplemented(format!(
                "unknown CSI v0.3 method {other}"
            )))
        }
    };
    Ok(FrontCall::Hub(Box::new(req)))
}

/// The hub reply → the v0.3 reply to RPC `method`.
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
        "CreateSnapshot" => reply!(CreateSnapshot, create_snapshot_response_from_hub),
        "DeleteSnapshot" => empty!(DeleteSnapshot, DeleteSnapshotResponse),
        "ListSnapshots" => reply!(ListSnapshots, list_snapshots_response_from_hub),
        "GetPluginCapabilities" => reply!(
            GetPluginCapabilities,
            get_plugin_capabilities_response_from_hub
        ),
        "GetPluginInfo" => reply!(GetPluginInfo, get_plugin_info_response_from_hub),
        "Probe" => reply!(Probe, probe_response_from_hub),
        "NodeGetCapabilities" => {
            reply!(NodeGetCapabilities, node_get_capabilities_response_from_hub)
        }
        "NodeGetId" => reply!(NodeGetInfo, node_get_id_response_from_hub),
        "NodeGetInfo" => reply!(NodeGetInfo, node_get_info_response_from_hub),
        "NodeStageVolume" => empty!(NodeStageVolume, NodeStageVolumeResponse),
        "NodeUnstageVolume" => empty!(NodeUnstageVolume, NodeUnstageVolumeResponse),
        "NodePublishVolume" => empty!(NodePublishVolume, NodePublishVolumeResponse),
        "NodeUnpublishVolume" => empty!(NodeUnpublishVolume, NodeUnpublishVolumeResponse),
        other => {
            return Err(Status::unimplemented(format!(
                "unknown CSI v0.3 method {other}"
            )))
        }
    })
}
