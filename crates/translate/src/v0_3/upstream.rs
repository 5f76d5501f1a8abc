//! v0.3 upstream side: hub request → the plugin's request, the plugin's reply → hub reply.

use prost::Message;
use tonic::Status;

use super::{generated as g, D};
use crate::dialect::proto::v0_3 as d;
use crate::hub::{v1, Method, Request as Req, Response as Resp};
use crate::{missing_rpc, upstream_msg, CallError};

macro_rules! path {
    ($svc:literal, $m:literal) => {
        concat!("/csi.v0.", $svc, "/", $m)
    };
}

/// A hub request → the v0.3 upstream path and body.
pub(crate) fn upstream_request(req: Req) -> Result<(&'static str, Vec<u8>), Status> {
    /// The path of `$svc`'s `$m` and the request converted (`generated.rs`) and encoded.
    macro_rules! call {
        ($svc:literal, $m:literal, $r:expr, $conv:ident) => {
            (path!($svc, $m), g::$conv($r)?.encode_to_vec())
        };
    }
    use Req as R;
    Ok(match req {
        R::CreateVolume(r) => call!(
            "Controller",
            "CreateVolume",
            r,
            create_volume_request_from_hub
        ),
        R::DeleteVolume(r) => call!(
            "Controller",
            "DeleteVolume",
            r,
            delete_volume_request_from_hub
        ),
        R::ControllerPublishVolume(r) => call!(
            "Controller",
            "ControllerPublishVolume",
            r,
            controller_publish_volume_request_from_hub
        ),
        R::ControllerUnpublishVolume(r) => call!(
            "Controller",
            "ControllerUnpublishVolume",
            r,
            controller_unpublish_volume_request_from_hub
        ),
        R::ValidateVolumeCapabilities(r) => call!(
            "Controller",
            "ValidateVolumeCapabilities",
            r,
            validate_volume_capabilities_request_from_hub
        ),
        R::ListVolumes(r) => call!(
            "Controller",
            "ListVolumes",
            r,
            list_volumes_request_from_hub
        ),
        R::GetCapacity(r) => call!(
            "Controller",
            "GetCapacity",
            r,
            get_capacity_request_from_hub
        ),
        R::ControllerGetCapabilities(_) => {
            (path!("Controller", "ControllerGetCapabilities"), Vec::new())
        }
        R::CreateSnapshot(r) => call!(
            "Controller",
            "CreateSnapshot",
            r,
            create_snapshot_request_from_hub
        ),
        R::DeleteSnapshot(r) => call!(
            "Controller",
            "DeleteSnapshot",
            r,
            delete_snapshot_request_from_hub
        ),
        R::ListSnapshots(r) => call!(
            "Controller",
            "ListSnapshots",
            r,
            list_snapshots_request_from_hub
        ),
        R::GetPluginCapabilities(_) => (path!("Identity", "GetPluginCapabilities"), Vec::new()),
        R::GetPluginInfo(_) => (path!("Identity", "GetPluginInfo"), Vec::new()),
        R::Probe(_) => (path!("Identity", "Probe"), Vec::new()),
        R::NodeGetCapabilities(_) => (path!("Node", "NodeGetCapabilities"), Vec::new()),
        R::NodeGetInfo(_) => (path!("Node", "NodeGetInfo"), Vec::new()),
        R::NodeStageVolume(r) => call!(
            "Node",
            "NodeStageVolume",
            r,
            node_stage_volume_request_from_hub
        ),
        R::NodeUnstageVolume(r) => call!(
            "Node",
            "NodeUnstageVolume",
            r,
            node_unstage_volume_request_from_hub
        ),
        R::NodePublishVolume(r) => call!(
            "Node",
            "NodePublishVolume",
            r,
            node_publish_volume_request_from_hub
        ),
        R::NodeUnpublishVolume(r) => call!(
            "Node",
            "NodeUnpublishVolume",
            r,
            node_unpublish_volume_request_from_hub
        ),
        // RPCs added after v0.3.
        other => return Err(missing_rpc(other.method().name(), D)),
    })
}

/// The v0.2 `NodeGetId` path and the conversion of its reply (the fallback when a v0.3-package
/// plugin answers NodeGetInfo with UNIMPLEMENTED).
pub(crate) const NODE_GET_ID: &str = path!("Node", "NodeGetId");
pub(crate) fn node_get_id_reply(body: &[u8]) -> Result<Resp, CallError> {
    let r: d::NodeGetIdResponse = upstream_msg(body, "NodeGetIdResponse")?;
    Ok(Resp::NodeGetInfo(g::node_get_id_response_to_hub(r)?))
}

/// A v0.3 upstream's reply to `req` → the hub reply.
pub(crate) fn upstream_reply(req: &Req, body: &[u8]) -> Result<Resp, CallError> {
    let what = req.method().name();
    /// The plugin's reply decoded and converted (`generated.rs`) into the hub reply `$v`.
    macro_rules! hub {
        ($v:ident, $conv:ident) => {
            Resp::$v(g::$conv(upstream_msg(body, what)?)?)
        };
    }
    use Method as M;
    Ok(match req.method() {
        M::CreateVolume => hub!(CreateVolume, create_volume_response_to_hub),
        M::DeleteVolume => Resp::DeleteVolume(v1::DeleteVolumeResponse {}),
        M::ControllerPublishVolume => hub!(
            ControllerPublishVolume,
            controller_publish_volume_response_to_hub
        ),
        M::ControllerUnpublishVolume => {
            Resp::ControllerUnpublishVolume(v1::ControllerUnpublishVolumeResponse {})
        }
        M::ValidateVolumeCapabilities => {
            let r: d::ValidateVolumeCapabilitiesResponse = upstream_msg(body, what)?;
            Resp::ValidateVolumeCapabilities(validate_reply(req, r.supported, r.message))
        }
        M::ListVolumes => hub!(ListVolumes, list_volumes_response_to_hub),
        M::GetCapacity => hub!(GetCapacity, get_capacity_response_to_hub),
        M::ControllerGetCapabilities => hub!(
            ControllerGetCapabilities,
            controller_get_capabilities_response_to_hub
        ),
        M::CreateSnapshot => hub!(CreateSnapshot, create_snapshot_response_to_hub),
        M::DeleteSnapshot => Resp::DeleteSnapshot(v1::DeleteSnapshotResponse {}),
        M::ListSnapshots => hub!(ListSnapshots, list_snapshots_response_to_hub),
        M::GetPluginCapabilities => hub!(
            GetPluginCapabilities,
            get_plugin_capabilities_response_to_hub
        ),
        M::GetPluginInfo => hub!(GetPluginInfo, get_plugin_info_response_to_hub),
        M::Probe => hub!(Probe, probe_response_to_hub),
        M::NodeGetCapabilities => hub!(NodeGetCapabilities, node_get_capabilities_response_to_hub),
        M::NodeGetInfo => hub!(NodeGetInfo, node_get_info_response_to_hub),
        M::NodeStageVolume => Resp::NodeStageVolume(v1::NodeStageVolumeResponse {}),
        M::NodeUnstageVolume => Resp::NodeUnstageVolume(v1::NodeUnstageVolumeResponse {}),
        M::NodePublishVolume => Resp::NodePublishVolume(v1::NodePublishVolumeResponse {}),
        M::NodeUnpublishVolume => Resp::NodeUnpublishVolume(v1::NodeUnpublishVolumeResponse {}),
        other => return Err(missing_rpc(other.name(), D).into()),
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
