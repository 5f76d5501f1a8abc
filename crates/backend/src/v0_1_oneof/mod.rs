//! The September 2017 draft (`v0.1-oneof`, package `csi`): every reply is
//! `oneof reply { Result result = 1; Error error = 2; }` and gRPC is always OK — failures are
//! the draft's typed `Error` (see [`errors`]).
//!
//! What makes this a realistic legacy driver for the gateway to translate:
//! - volumes are `VolumeHandle { id, metadata }`; CreateVolume returns non-empty metadata
//!   (`kind` = mount|block, `backing` = the volume's path relative to the data directory) and
//!   every call that carries a handle *requires* exactly that metadata back, else the RPC's
//!   INVALID_VOLUME_HANDLE (INVALID_VOLUME_INFO for ValidateVolumeCapabilities);
//! - nodes are `NodeId { values }` with the single key `node_id`;
//! - the draft's idempotency: DeleteVolume of an unknown volume is VOLUME_DOES_NOT_EXIST, and
//!   ControllerUnpublishVolume from a node the volume is not attached to is
//!   VOLUME_NOT_ATTACHED_TO_SPECIFIED_NODE (v0.1.0 later made both OK);
//! - `version` is required (MISSING_REQUIRED_FIELD) and must be 0.1.0
//!   (UNSUPPORTED_REQUEST_VERSION, caller_must_not_retry).

mod controller;
pub mod errors;
mod node;

use std::collections::HashMap;
use std::sync::Arc;

use tonic::{Request, Response, Status};

use crate::engine::{AccessMode, Capability, Engine, EngineError, Kind, Volume};
use csi::error::general_error::GeneralErrorCode;
use csi::identity_server::Identity;
use csi::volume_capability::AccessType;
use csi_gateway_proto::dialect::proto::v0_1_oneof as csi;
use errors::Rpc;

pub const SUPPORTED: csi::Version = csi::Version {
    major: 0,
    minor: 1,
    patch: 0,
};

/// The `NodeId.values` key holding this plugin's node id.
pub const NODE_KEY: &str = "node_id";

#[derive(Clone)]
pub struct Draft {
    pub engine: Arc<Engine>,
    pub driver_name: String,
}

type Reply<T> = Result<Response<T>, Status>;
/// What each handler computes: the `Result` message or the draft `Error`.
pub type Outcome<T> = Result<T, csi::Error>;

/// Runs a handler body off the async workers; an engine task failure becomes a retryable
/// GeneralError.
pub async fn run<T: Send + 'static>(
    engine: &Arc<Engine>,
    f: impl FnOnce(&Engine) -> Outcome<T> + Send + 'static,
) -> Outcome<T> {
    let out = crate::blocking(engine, move |e| Ok(f(e))).await;
    out.unwrap_or_else(|e| Err(errors::general_from(&e)))
}

/// Wraps an [`Outcome`] in a response's `reply` oneof: `reply!(CreateVolumeResponse,
/// create_volume_response, outcome)`. gRPC itself always answers OK in this dialect.
macro_rules! reply {
    ($resp:ident, $module:ident, $outcome:expr) => {{
        use csi_gateway_proto::dialect::proto::v0_1_oneof::$module::Reply as R;
        let reply = match $outcome {
            Ok(r) => R::Result(r),
            Err(e) => R::Error(e),
        };
        Ok(tonic::Response::new(
            csi_gateway_proto::dialect::proto::v0_1_oneof::$resp { reply: Some(reply) },
        ))
    }};
}
pub(crate) use reply;

pub fn check_version(v: Option<&csi::Version>) -> Outcome<()> {
    match v {
        None => Err(errors::missing("version")),
        Some(v) if *v == SUPPORTED => Ok(()),
        Some(v) => Err(errors::general(
            GeneralErrorCode::UnsupportedRequestVersion,
            true,
            format!(
                "version {}.{}.{} is not supported; this plugin supports 0.1.0",
                v.major, v.minor, v.patch
            ),
        )),
    }
}

/// The handle metadata this plugin hands out for a volume and requires back.
pub fn metadata(v: &Volume) -> HashMap<String, String> {
    let kind = match v.kind {
        Kind::Mount => "mount",
        Kind::Block => "block",
    };
    HashMap::from([
        ("kind".to_string(), kind.to_string()),
        ("backing".to_string(), format!("volumes/{}", v.id)),
    ])
}

pub fn handle(v: &Volume) -> csi::VolumeHandle {
    csi::VolumeHandle {
        id: v.id.clone(),
        metadata: metadata(v),
    }
}

pub fn info(v: &Volume) -> csi::VolumeInfo {
    csi::VolumeInfo {
        capacity_bytes: v.capacity,
        handle: Some(handle(v)),
    }
}

/// MISSING_REQUIRED_FIELD unless `present`. Handlers check every required field this way
/// before resolving the handle: a request that lacks one is malformed whether or not its volume
/// exists, and every later revision's tables check arguments before existence.
pub fn require(present: bool, field: &str) -> Outcome<()> {
    if present {
        Ok(())
    } else {
        Err(errors::missing(field))
    }
}

/// Resolves a handle to its volume: missing → MISSING_REQUIRED_FIELD, unknown → the RPC's
/// VOLUME_DOES_NOT_EXIST, metadata other than what CreateVolume returned → the RPC's
/// INVALID_VOLUME_HANDLE.
pub fn resolve(engine: &Engine, h: Option<&csi::VolumeHandle>, rpc: Rpc) -> Outcome<Volume> {
    let h = h.ok_or_else(|| errors::missing("volume_handle"))?;
    if h.id.is_empty() {
        return Err(errors::missing("volume_handle.id"));
    }
    let v = engine.get_volume(&h.id).map_err(|e| rpc.error(e))?;
    let want = metadata(&v);
    if h.metadata != want {
        return Err(errors::bad_handle(
            rpc,
            format!(
                "volume_handle.metadata for {:?} must be the metadata CreateVolume returned ({want:?}), got {:?}",
                h.id, h.metadata
            ),
        ));
    }
    Ok(v)
}

pub fn node_id(n: &str) -> csi::NodeId {
    csi::NodeId {
        values: HashMap::from([(NODE_KEY.to_string(), n.to_string())]),
    }
}

pub fn capability(
    field: &str,
    cap: Option<&csi::VolumeCapability>,
) -> Result<Capability, EngineError> {
    let cap = cap.ok_or_else(|| EngineError::missing(field))?;
    let mode = cap
        .access_mode
        .as_ref()
        .ok_or_else(|| EngineError::missing(format!("{field}.access_mode")))?;
    let mode = AccessMode::from_wire(mode.mode, 5).ok_or_else(|| {
        EngineError::invalid(
            format!("{field}.access_mode.mode"),
            format!("{} is not a supported access mode", mode.mode),
        )
    })?;
    let (kind, fs_type, mount_flags) = match &cap.access_type {
        Some(AccessType::Block(_)) => (Kind::Block, String::new(), Vec::new()),
        Some(AccessType::Mount(m)) => (Kind::Mount, m.fs_type.clone(), m.mount_flags.clone()),
        None => return Err(EngineError::missing(format!("{field}.access_type"))),
    };
    Ok(Capability {
        kind,
        fs_type,
        mount_flags,
        mode,
    })
}

pub fn capabilities(
    field: &str,
    caps: &[csi::VolumeCapability],
) -> Result<Vec<Capability>, EngineError> {
    if caps.is_empty() {
        return Err(EngineError::missing(field));
    }
    caps.iter()
        .enumerate()
        .map(|(i, c)| capability(&format!("{field}[{i}]"), Some(c)))
        .collect()
}

#[tonic::async_trait]
impl Identity for Draft {
    async fn get_supported_versions(
        &self,
        _: Request<csi::GetSupportedVersionsRequest>,
    ) -> Reply<csi::GetSupportedVersionsResponse> {
        use csi::get_supported_versions_response::{Reply as R, Result};
        let reply = R::Result(Result {
            supported_versions: vec![SUPPORTED],
        });
        Ok(Response::new(csi::GetSupportedVersionsResponse {
            reply: Some(reply),
        }))
    }

    async fn get_plugin_info(
        &self,
        req: Request<csi::GetPluginInfoRequest>,
    ) -> Reply<csi::GetPluginInfoResponse> {
        use csi::get_plugin_info_response::{Reply as R, Result};
        let reply = match check_version(req.get_ref().version.as_ref()) {
            Ok(()) => R::Result(Result {
                name: self.driver_name.clone(),
                vendor_version: crate::VENDOR_VERSION.to_string(),
                manifest: Default::default(),
            }),
            Err(e) => R::Error(e),
        };
        Ok(Response::new(csi::GetPluginInfoResponse {
            reply: Some(reply),
        }))
    }
}

/// The draft's Identity, Controller and Node services over one engine.
pub fn routes(engine: Arc<Engine>, driver_name: String) -> tonic::service::Routes {
    let s = Draft {
        engine,
        driver_name,
    };
    tonic::service::Routes::new(csi::identity_server::IdentityServer::new(s.clone()))
        .add_service(csi::controller_server::ControllerServer::new(
            controller::ControllerService(s.clone()),
        ))
        .add_service(csi::node_server::NodeServer::new(node::NodeService(s)))
}
