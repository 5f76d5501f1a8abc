//! v0.1 upstream side: hub request → the plugin's request, the plugin's reply → hub reply.

use prost::Message;
use tonic::Status;

use super::{generated as g, upstream_version, D};
use crate::dialect::proto::v0_1 as d;
use crate::hub::{v1, Method, Request as Req, Response as Resp};
use crate::v0_3::validate_reply;
use crate::version::Version;
use crate::{missing_rpc, upstream_msg, CallError};

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
    /// The path of `$svc`'s `$m` and the request converted (`generated.rs`), with the
    /// negotiated version, encoded.
    macro_rules! call {
        ($svc:literal, $m:literal, $r:expr, $conv:ident) => {{
            let mut m = g::$conv($r)?;
            m.version = version;
            (path!($svc, $m), m.encode_to_vec())
        }};
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
        R::ControllerGetCapabilities(_) => (
            path!("Controller", "ControllerGetCapabilities"),
            d::ControllerGetCapabilitiesRequest { version }.encode_to_vec(),
        ),
        R::GetPluginInfo(_) => (
            path!("Identity", "GetPluginInfo"),
            d::GetPluginInfoRequest { version }.encode_to_vec(),
        ),
        R::NodeGetInfo(_) => (
            path!("Node", "GetNodeID"),
            d::GetNodeIdRequest { version }.encode_to_vec(),
        ),
        R::NodeGetCapabilities(_) => (
            path!("Node", "NodeGetCapabilities"),
            d::NodeGetCapabilitiesRequest { version }.encode_to_vec(),
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
        other => return Err(missing_rpc(other.method().name(), D)),
    })
}

/// A v0.1 upstream's reply to `req` → the hub reply.
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
        M::GetPluginInfo => hub!(GetPluginInfo, get_plugin_info_response_to_hub),
        M::NodeGetInfo => hub!(NodeGetInfo, get_node_id_response_to_hub),
        M::NodeGetCapabilities => {
            // v0.1 node capabilities are all UNKNOWN: nothing to carry.
            let _: d::NodeGetCapabilitiesResponse = upstream_msg(body, what)?;
            Resp::NodeGetCapabilities(v1::NodeGetCapabilitiesResponse {
                capabilities: Vec::new(),
            })
        }
        M::NodePublishVolume => Resp::NodePublishVolume(v1::NodePublishVolumeResponse {}),
        M::NodeUnpublishVolume => Resp::NodeUnpublishVolume(v1::NodeUnpublishVolumeResponse {}),
        other => return Err(missing_rpc(other.name(), D).into()),
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
