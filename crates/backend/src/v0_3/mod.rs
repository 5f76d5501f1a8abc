//! CSI v0.3 (package `csi.v0`; v0.2 peers speak a subset): Identity, Controller and Node on
//! the v0.3 generated types. What v0.3 lacks (volume cloning, expansion, stats, volume
//! conditions, ControllerGetVolume, modification) is neither advertised nor reachable; v0.3's
//! own RPCs (NodeGetId) and semantics (NOT_FOUND from ControllerUnpublish for an unknown
//! volume or node, snapshot status enum) are honoured.

mod controller;
pub mod convert;
mod node;

use std::sync::Arc;

use tonic::{Request, Response, Status};

use crate::engine::{Engine, EngineError};
use csi::identity_server::Identity;
use csi_gateway_proto::dialect::proto::v0_3 as csi;

#[derive(Clone)]
pub struct V03 {
    pub engine: Arc<Engine>,
    pub driver_name: String,
}

/// v0.3 uses the same status-code tables as v1 for every condition it has.
pub fn status(e: EngineError) -> Status {
    e.into_status()
}

type Reply<T> = Result<Response<T>, Status>;

#[tonic::async_trait]
impl Identity for V03 {
    async fn get_plugin_info(
        &self,
        _: Request<csi::GetPluginInfoRequest>,
    ) -> Reply<csi::GetPluginInfoResponse> {
        Ok(Response::new(csi::GetPluginInfoResponse {
            name: self.driver_name.clone(),
            vendor_version: crate::VENDOR_VERSION.to_string(),
            manifest: Default::default(),
        }))
    }

    async fn get_plugin_capabilities(
        &self,
        _: Request<csi::GetPluginCapabilitiesRequest>,
    ) -> Reply<csi::GetPluginCapabilitiesResponse> {
        use csi::plugin_capability::{service, Service, Type};
        let service = |t: service::Type| csi::PluginCapability {
            r#type: Some(Type::Service(Service { r#type: t as i32 })),
        };
        let mut capabilities = vec![service(service::Type::ControllerService)];
        if !self.engine.config().topology.is_empty() {
            capabilities.push(service(service::Type::AccessibilityConstraints));
        }
        Ok(Response::new(csi::GetPluginCapabilitiesResponse {
            capabilities,
        }))
    }

    async fn probe(&self, _: Request<csi::ProbeRequest>) -> Reply<csi::ProbeResponse> {
        Ok(Response::new(csi::ProbeResponse { ready: Some(true) }))
    }
}

/// The v0.3 Identity, Controller and Node services over one engine.
pub fn routes(engine: Arc<Engine>, driver_name: String) -> tonic::service::Routes {
    let s = V03 {
        engine,
        driver_name,
    };
    tonic::service::Routes::new(csi::identity_server::IdentityServer::new(s.clone()))
        .add_service(csi::controller_server::ControllerServer::new(
            controller::ControllerService(s.clone()),
        ))
        .add_service(csi::node_server::NodeServer::new(node::NodeService(s)))
}
