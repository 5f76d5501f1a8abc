//! draft upstream side: hub request → the plugin's request, the plugin's reply → hub reply.

use std::collections::HashMap;

use prost::Message;
use tonic::Status;

use super::{generated as g, Outcome, D};
use crate::dialect::proto::v0_1_oneof as d;
use crate::errors::{self, DraftRpc};
use crate::hub::{v1, Method, Request as Req, Response as Resp};
use crate::v0_3::validate_reply;
use crate::version::Version;
use crate::{missing_rpc, upstream_msg, CallError};

macro_rules! path {
    ($svc:literal, $m:literal) => {
        concat!("/csi.", $svc, "/", $m)
    };
}

pub(crate) const PROBE_NODE: &str = path!("Node", "ProbeNode");

/// The plugin's own `VolumeHandle.metadata` into the handle the conversion left without.
fn with_metadata(h: Option<&mut d::VolumeHandle>, metadata: HashMap<String, String>) {
    if let Some(h) = h {
        h.metadata = metadata;
    }
}

/// A hub request → the draft upstream path and body. `metadata` is the `VolumeHandle.metadata`
/// of every call that names a volume (chosen by `upstream.rs`: the plugin's own, from the
/// handle store, before anything a client sent). `Probe` and `GetPluginCapabilities` are
/// orchestrated by `upstream.rs`.
pub(crate) fn upstream_request(
    req: Req,
    v: Option<Version>,
    metadata: HashMap<String, String>,
) -> Result<(&'static str, Vec<u8>), Status> {
    let version: Option<d::Version> = Some(
        v.ok_or_else(|| {
            Status::failed_precondition("no CSI version was negotiated with the v0.1-oneof plugin")
        })?
        .into(),
    );
    /// The path of `$svc`'s `$m` and the request converted (`generated.rs`), with the
    /// negotiated version and, in the handle at `$handle`, the plugin's metadata, encoded.
    macro_rules! call {
        ($svc:literal, $m:literal, $r:expr, $conv:ident) => {
            call!($svc, $m, $r, $conv, |m| None)
        };
        ($svc:literal, $m:literal, $r:expr, $conv:ident, |$x:ident| $handle:expr) => {{
            let mut $x = g::$conv($r)?;
            $x.version = version;
            with_metadata($handle, metadata);
            (path!($svc, $m), $x.encode_to_vec())
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
            delete_volume_request_from_hub,
            |m| m.volume_handle.as_mut()
        ),
        R::ControllerPublishVolume(r) => call!(
            "Controller",
            "ControllerPublishVolume",
            r,
            controller_publish_volume_request_from_hub,
            |m| m.volume_handle.as_mut()
        ),
        R::ControllerUnpublishVolume(r) => call!(
            "Controller",
            "ControllerUnpublishVolume",
            r,
            controller_unpublish_volume_request_from_hub,
            |m| m.volume_handle.as_mut()
        ),
        R::ValidateVolumeCapabilities(r) => call!(
            "Controller",
            "ValidateVolumeCapabilities",
            r,
            validate_volume_capabilities_request_from_hub,
            |m| m.volume_info.as_mut().and_then(|v| v.handle.as_mut())
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
        R::Probe(_) => (PROBE_NODE, d::ProbeNodeRequest { version }.encode_to_vec()),
        R::NodePublishVolume(r) => call!(
            "Node",
            "NodePublishVolume",
            r,
            node_publish_volume_request_from_hub,
            |m| m.volume_handle.as_mut()
        ),
        R::NodeUnpublishVolume(r) => call!(
            "Node",
            "NodeUnpublishVolume",
            r,
            node_unpublish_volume_request_from_hub,
            |m| m.volume_handle.as_mut()
        ),
        other => return Err(missing_rpc(other.method().name(), D)),
    })
}

/// Decodes a draft reply `$t` (module `$m`) into an [`Outcome`]; a draft error that is not
/// success since v0.1.0 returns its status, the plugin's own answer.
macro_rules! outcome {
    (@with $body:expr, $m:ident, $t:ident, $to_status:expr) => {{
        let r: d::$t = upstream_msg($body, stringify!($t))?;
        match r.reply {
            Some(d::$m::Reply::Result(x)) => Outcome::Result(x),
            Some(d::$m::Reply::Error(e)) => {
                Outcome::Success(($to_status)(e).map_err(CallError::upstream)?)
            }
            None => {
                return Err(Status::unknown(format!(
                    "the plugin's {} has neither result nor error",
                    stringify!($t)
                ))
                .into())
            }
        }
    }};
    ($body:expr, $m:ident, $t:ident, $rpc:expr) => {
        outcome!(@with $body, $m, $t, |e| errors::draft_to_status($rpc, e))
    };
    // With the request, for the RPCs that have `errors::GENERAL_OVERRIDES`.
    ($body:expr, $m:ident, $t:ident, $rpc:expr, $req:expr) => {
        outcome!(@with $body, $m, $t, |e| errors::draft_to_status_for($rpc, e, $req))
    };
}

/// A draft upstream's reply to `req` → the hub outcome: an error in the reply is the plugin's
/// ([`CallError::upstream`]); a reply that does not decode or convert, the gateway's.
pub(crate) fn upstream_reply(req: &Req, body: &[u8]) -> Result<Resp, CallError> {
    use DraftRpc as R;
    /// The draft reply `$t` (module `$m`) decoded; its result converted (`generated.rs`) into
    /// the hub reply `$v`. No draft error of these RPCs is success.
    macro_rules! hub {
        ($v:ident, $m:ident, $t:ident, $rpc:expr, $conv:ident $(, $req:expr)?) => {
            match outcome!(body, $m, $t, $rpc $(, $req)?) {
                Outcome::Result(r) => Resp::$v(g::$conv(r)?),
                Outcome::Success(_) => return Err(no_success().into()),
            }
        };
    }
    Ok(match req.method() {
        Method::CreateVolume => hub!(
            CreateVolume,
            create_volume_response,
            CreateVolumeResponse,
            R::CreateVolume,
            create_volume_response_result_to_hub
        ),
        // VOLUME_DOES_NOT_EXIST is success since v0.1.0 (errors::SPECIFIC).
        Method::DeleteVolume => {
            outcome!(
                body,
                delete_volume_response,
                DeleteVolumeResponse,
                R::DeleteVolume
            );
            Resp::DeleteVolume(v1::DeleteVolumeResponse {})
        }
        Method::ControllerPublishVolume => hub!(
            ControllerPublishVolume,
            controller_publish_volume_response,
            ControllerPublishVolumeResponse,
            R::ControllerPublishVolume,
            controller_publish_volume_response_result_to_hub
        ),
        // VOLUME_NOT_ATTACHED_TO_SPECIFIED_NODE is success since v0.1.0.
        Method::ControllerUnpublishVolume => {
            outcome!(
                body,
                controller_unpublish_volume_response,
                ControllerUnpublishVolumeResponse,
                R::ControllerUnpublishVolume
            );
            Resp::ControllerUnpublishVolume(v1::ControllerUnpublishVolumeResponse {})
        }
        // UNSUPPORTED_* errors are "not supported" answers since v0.1.0.
        Method::ValidateVolumeCapabilities => {
            match outcome!(
                body,
                validate_volume_capabilities_response,
                ValidateVolumeCapabilitiesResponse,
                R::ValidateVolumeCapabilities
            ) {
                Outcome::Result(r) => {
                    Resp::ValidateVolumeCapabilities(validate_reply(req, r.supported, r.message))
                }
                Outcome::Success(msg) => {
                    Resp::ValidateVolumeCapabilities(validate_reply(req, false, msg))
                }
            }
        }
        Method::ListVolumes => hub!(
            ListVolumes,
            list_volumes_response,
            ListVolumesResponse,
            R::ListVolumes,
            list_volumes_response_result_to_hub,
            req
        ),
        Method::GetCapacity => hub!(
            GetCapacity,
            get_capacity_response,
            GetCapacityResponse,
            R::GetCapacity,
            get_capacity_response_result_to_hub
        ),
        Method::ControllerGetCapabilities => hub!(
            ControllerGetCapabilities,
            controller_get_capabilities_response,
            ControllerGetCapabilitiesResponse,
            R::ControllerGetCapabilities,
            controller_get_capabilities_response_result_to_hub
        ),
        Method::GetPluginInfo => hub!(
            GetPluginInfo,
            get_plugin_info_response,
            GetPluginInfoResponse,
            R::GetPluginInfo,
            get_plugin_info_response_result_to_hub
        ),
        Method::NodeGetInfo => hub!(
            NodeGetInfo,
            get_node_id_response,
            GetNodeIdResponse,
            R::GetNodeId,
            get_node_id_response_result_to_hub
        ),
        Method::NodeGetCapabilities => {
            outcome!(
                body,
                node_get_capabilities_response,
                NodeGetCapabilitiesResponse,
                R::NodeGetCapabilities
            );
            Resp::NodeGetCapabilities(v1::NodeGetCapabilitiesResponse {
                capabilities: Vec::new(),
            })
        }
        // ProbeNode succeeded: ready (v1 `ready` absent means ready).
        Method::Probe => {
            outcome!(body, probe_node_response, ProbeNodeResponse, R::ProbeNode);
            Resp::Probe(v1::ProbeResponse { ready: None })
        }
        Method::NodePublishVolume => {
            outcome!(
                body,
                node_publish_volume_response,
                NodePublishVolumeResponse,
                R::NodePublishVolume
            );
            Resp::NodePublishVolume(v1::NodePublishVolumeResponse {})
        }
        Method::NodeUnpublishVolume => {
            outcome!(
                body,
                node_unpublish_volume_response,
                NodeUnpublishVolumeResponse,
                R::NodeUnpublishVolume
            );
            Resp::NodeUnpublishVolume(v1::NodeUnpublishVolumeResponse {})
        }
        other => return Err(missing_rpc(other.name(), D).into()),
    })
}

/// Only the `code: None` rows of `errors::SPECIFIC` are success, and none belongs to this RPC.
fn no_success() -> Status {
    Status::internal("gateway bug: a draft error of this RPC was mapped to success")
}
