//! draft upstream side: hub request → the plugin's request, the plugin's reply → hub reply.

use super::*;

macro_rules! path {
    ($svc:literal, $m:literal) => {
        concat!("/csi.", $svc, "/", $m)
    };
}

pub(crate) const PROBE_NODE: &str = path!("Node", "ProbeNode");

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
                user_credentials: to_creds(r.secrets),
            };
            (path!("Controller", "CreateVolume"), m.encode_to_vec())
        }
        Req::DeleteVolume(r) => (
            path!("Controller", "DeleteVolume"),
            d::DeleteVolumeRequest {
                version,
                volume_handle: handle(r.volume_id, metadata),
                user_credentials: to_creds(r.secrets),
            }
            .encode_to_vec(),
        ),
        Req::ControllerPublishVolume(r) => (
            path!("Controller", "ControllerPublishVolume"),
            d::ControllerPublishVolumeRequest {
                version,
                volume_handle: handle(r.volume_id, metadata),
                node_id: ids::node_id_from_string(&r.node_id)?,
                volume_capability: r.volume_capability.map(cap_from_hub).transpose()?,
                readonly: r.readonly,
                user_credentials: to_creds(r.secrets),
            }
            .encode_to_vec(),
        ),
        Req::ControllerUnpublishVolume(r) => (
            path!("Controller", "ControllerUnpublishVolume"),
            d::ControllerUnpublishVolumeRequest {
                version,
                volume_handle: handle(r.volume_id, metadata),
                node_id: ids::node_id_from_string(&r.node_id)?,
                user_credentials: to_creds(r.secrets),
            }
            .encode_to_vec(),
        ),
        Req::ValidateVolumeCapabilities(r) => {
            if !r.parameters.is_empty() {
                return Err(unsupported_field("parameters", D));
            }
            if !r.mutable_parameters.is_empty() {
                return Err(unsupported_field("mutable_parameters", D));
            }
            // The draft asks for a `VolumeInfo`; v1 names no capacity here, so it is 0 (unknown).
            (
                path!("Controller", "ValidateVolumeCapabilities"),
                d::ValidateVolumeCapabilitiesRequest {
                    version,
                    volume_info: Some(d::VolumeInfo {
                        capacity_bytes: 0,
                        handle: handle(r.volume_id, metadata),
                    }),
                    volume_capabilities: caps_from_hub(r.volume_capabilities)?,
                }
                .encode_to_vec(),
            )
        }
        Req::ListVolumes(r) => {
            let max_entries = u32::try_from(r.max_entries).map_err(|_| {
                Status::invalid_argument(format!("max_entries = {} is negative", r.max_entries))
            })?;
            (
                path!("Controller", "ListVolumes"),
                d::ListVolumesRequest {
                    version,
                    max_entries,
                    starting_token: r.starting_token,
                }
                .encode_to_vec(),
            )
        }
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
        Req::Probe(_) => (PROBE_NODE, d::ProbeNodeRequest { version }.encode_to_vec()),
        Req::NodePublishVolume(r) => {
            if !r.staging_target_path.is_empty() {
                return Err(unsupported_field("staging_target_path", D));
            }
            (
                path!("Node", "NodePublishVolume"),
                d::NodePublishVolumeRequest {
                    version,
                    volume_handle: handle(r.volume_id, metadata),
                    publish_volume_info: (!r.publish_context.is_empty()).then_some(
                        d::PublishVolumeInfo {
                            values: r.publish_context,
                        },
                    ),
                    target_path: r.target_path,
                    volume_capability: r.volume_capability.map(cap_from_hub).transpose()?,
                    readonly: r.readonly,
                    user_credentials: to_creds(r.secrets),
                }
                .encode_to_vec(),
            )
        }
        Req::NodeUnpublishVolume(r) => (
            path!("Node", "NodeUnpublishVolume"),
            d::NodeUnpublishVolumeRequest {
                version,
                volume_handle: handle(r.volume_id, metadata),
                target_path: r.target_path,
                user_credentials: None,
            }
            .encode_to_vec(),
        ),
        other => return Err(missing_rpc(other.method().name(), D)),
    })
}

/// Decodes a draft reply `$t` (module `$m`) into an [`Outcome`]; a draft error that is not
/// success since v0.1.0 returns its status.
macro_rules! outcome {
    (@with $body:expr, $m:ident, $t:ident, $to_status:expr) => {{
        let r: d::$t = upstream_msg($body, stringify!($t))?;
        match r.reply {
            Some(d::$m::Reply::Result(x)) => Outcome::Result(x),
            Some(d::$m::Reply::Error(e)) => Outcome::Success(($to_status)(e)?),
            None => {
                return Err(Status::unknown(format!(
                    "the plugin's {} has neither result nor error",
                    stringify!($t)
                )))
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

/// A draft upstream's reply to `req` → the hub outcome.
pub(crate) fn upstream_reply(req: &Req, body: &[u8]) -> Result<Resp, Status> {
    use DraftRpc as R;
    Ok(match req.method() {
        Method::CreateVolume => match outcome!(
            body,
            create_volume_response,
            CreateVolumeResponse,
            R::CreateVolume
        ) {
            Outcome::Result(r) => Resp::CreateVolume(v1::CreateVolumeResponse {
                volume: r.volume_info.map(volume_to_hub).transpose()?,
            }),
            Outcome::Success(_) => return Err(no_success()),
        },
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
        Method::ControllerPublishVolume => {
            match outcome!(
                body,
                controller_publish_volume_response,
                ControllerPublishVolumeResponse,
                R::ControllerPublishVolume
            ) {
                Outcome::Result(r) => {
                    Resp::ControllerPublishVolume(v1::ControllerPublishVolumeResponse {
                        publish_context: r
                            .publish_volume_info
                            .map(|p| p.values)
                            .unwrap_or_default(),
                    })
                }
                Outcome::Success(_) => return Err(no_success()),
            }
        }
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
                Outcome::Result(r) => Resp::ValidateVolumeCapabilities(
                    super::super::v0_3::validate_reply(req, r.supported, r.message),
                ),
                Outcome::Success(msg) => Resp::ValidateVolumeCapabilities(
                    super::super::v0_3::validate_reply(req, false, msg),
                ),
            }
        }
        Method::ListVolumes => match outcome!(
            body,
            list_volumes_response,
            ListVolumesResponse,
            R::ListVolumes,
            req
        ) {
            Outcome::Result(r) => {
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
            Outcome::Success(_) => return Err(no_success()),
        },
        Method::GetCapacity => match outcome!(
            body,
            get_capacity_response,
            GetCapacityResponse,
            R::GetCapacity
        ) {
            Outcome::Result(r) => Resp::GetCapacity(v1::GetCapacityResponse {
                available_capacity: u64_to_i64(r.available_capacity, "available_capacity")?,
                ..Default::default()
            }),
            Outcome::Success(_) => return Err(no_success()),
        },
        Method::ControllerGetCapabilities => {
            match outcome!(
                body,
                controller_get_capabilities_response,
                ControllerGetCapabilitiesResponse,
                R::ControllerGetCapabilities
            ) {
                Outcome::Result(r) => {
                    Resp::ControllerGetCapabilities(v1::ControllerGetCapabilitiesResponse {
                        capabilities: ctrl_caps_to_hub(r.capabilities),
                    })
                }
                Outcome::Success(_) => return Err(no_success()),
            }
        }
        Method::GetPluginInfo => match outcome!(
            body,
            get_plugin_info_response,
            GetPluginInfoResponse,
            R::GetPluginInfo
        ) {
            Outcome::Result(r) => Resp::GetPluginInfo(v1::GetPluginInfoResponse {
                name: r.name,
                vendor_version: r.vendor_version,
                manifest: r.manifest,
            }),
            Outcome::Success(_) => return Err(no_success()),
        },
        Method::NodeGetInfo => {
            match outcome!(body, get_node_id_response, GetNodeIdResponse, R::GetNodeId) {
                Outcome::Result(r) => Resp::NodeGetInfo(v1::NodeGetInfoResponse {
                    node_id: ids::node_id_to_string(r.node_id.as_ref())?,
                    ..Default::default()
                }),
                Outcome::Success(_) => return Err(no_success()),
            }
        }
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
        other => return Err(missing_rpc(other.name(), D)),
    })
}

/// Only the `code: None` rows of `errors::SPECIFIC` are success, and none belongs to this RPC.
fn no_success() -> Status {
    Status::internal("gateway bug: a draft error of this RPC was mapped to success")
}
