//! CSI v0.1.0 (package `csi`, gRPC status codes): every request but GetSupportedVersions
//! carries a `Version`, which is required and must be one this plugin supports (0.1.0), else
//! INVALID_ARGUMENT. v0.1 has no snapshots, staging, topology or content sources; probing is
//! ControllerProbe and NodeProbe; the node id comes from GetNodeID. As the v0.1.0 tables say,
//! ControllerUnpublish and NodeUnpublish answer NOT_FOUND for an unknown volume (and node),
//! and a non-MULTI_NODE volume may be published at one target only.

mod controller;
mod node;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use tonic::{Request, Response, Status};

use crate::engine::{AccessMode, Capability, Engine, EngineError, Kind};
use csi::identity_server::Identity;
use csi::volume_capability::AccessType;
use csi_gateway_proto::dialect::proto::v0_1 as csi;

/// The only version this plugin speaks in this dialect.
pub const SUPPORTED: csi::Version = csi::Version {
    major: 0,
    minor: 1,
    patch: 0,
};

#[derive(Clone)]
pub struct V01 {
    pub engine: Arc<Engine>,
    pub driver_name: String,
}

pub fn status(e: EngineError) -> Status {
    e.into_status()
}

type Reply<T> = Result<Response<T>, Status>;

/// The `version` field is REQUIRED and must be supported ("Unsupported request version" row).
pub fn check_version(v: Option<&csi::Version>) -> Result<(), Status> {
    match v {
        None => Err(status(EngineError::missing("version"))),
        Some(v) if *v == SUPPORTED => Ok(()),
        Some(v) => Err(status(EngineError::invalid(
            "version",
            format!(
                "unsupported request version {}.{}.{}; this plugin supports 0.1.0 (see GetSupportedVersions)",
                v.major, v.minor, v.patch
            ),
        ))),
    }
}

pub fn required(field: &str, value: &str) -> Result<(), Status> {
    if value.is_empty() {
        return Err(status(EngineError::missing(field)));
    }
    Ok(())
}

pub fn capability(field: &str, cap: Option<&csi::VolumeCapability>) -> Result<Capability, Status> {
    let cap = cap.ok_or_else(|| status(EngineError::missing(field)))?;
    let mode = cap
        .access_mode
        .as_ref()
        .ok_or_else(|| status(EngineError::missing(format!("{field}.access_mode"))))?;
    let mode = AccessMode::from_wire(mode.mode, 5).ok_or_else(|| {
        status(EngineError::invalid(
            format!("{field}.access_mode.mode"),
            format!("{} is not a supported access mode", mode.mode),
        ))
    })?;
    let (kind, fs_type, mount_flags) = match &cap.access_type {
        Some(AccessType::Block(_)) => (Kind::Block, String::new(), Vec::new()),
        Some(AccessType::Mount(m)) => (Kind::Mount, m.fs_type.clone(), m.mount_flags.clone()),
        None => {
            return Err(status(EngineError::invalid(
                format!("{field}.access_type"),
                "is required (block or mount)",
            )))
        }
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
) -> Result<Vec<Capability>, Status> {
    if caps.is_empty() {
        return Err(status(EngineError::missing(field)));
    }
    caps.iter()
        .enumerate()
        .map(|(i, c)| capability(&format!("{field}[{i}]"), Some(c)))
        .collect()
}

pub fn map(m: &HashMap<String, String>) -> BTreeMap<String, String> {
    m.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

pub fn hash(m: &BTreeMap<String, String>) -> HashMap<String, String> {
    m.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

#[tonic::async_trait]
impl Identity for V01 {
    async fn get_supported_versions(
        &self,
        _: Request<csi::GetSupportedVersionsRequest>,
    ) -> Reply<csi::GetSupportedVersionsResponse> {
        Ok(Response::new(csi::GetSupportedVersionsResponse {
            supported_versions: vec![SUPPORTED],
        }))
    }

    async fn get_plugin_info(
        &self,
        req: Request<csi::GetPluginInfoRequest>,
    ) -> Reply<csi::GetPluginInfoResponse> {
        check_version(req.get_ref().version.as_ref())?;
        Ok(Response::new(csi::GetPluginInfoResponse {
            name: self.driver_name.clone(),
            vendor_version: crate::VENDOR_VERSION.to_string(),
            manifest: Default::default(),
        }))
    }
}

/// The v0.1 Identity, Controller and Node services over one engine.
pub fn routes(engine: Arc<Engine>, driver_name: String) -> tonic::service::Routes {
    let s = V01 {
        engine,
        driver_name,
    };
    tonic::service::Routes::new(csi::identity_server::IdentityServer::new(s.clone()))
        .add_service(csi::controller_server::ControllerServer::new(
            controller::ControllerService(s.clone()),
        ))
        .add_service(csi::node_server::NodeServer::new(node::NodeService(s)))
}
