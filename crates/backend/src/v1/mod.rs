//! CSI v1 (package `csi.v1`): the Identity, Controller and Node services on the v1 generated
//! types, each call converted to the engine and engine errors mapped to v1 status codes.

mod controller;
pub mod convert;
mod node;

use std::sync::Arc;

use tonic::{Request, Response, Status};

use crate::engine::{Engine, EngineError};
use csi::identity_server::Identity;
use csi_gateway_proto::dialect::proto::v1 as csi;

pub use controller::ControllerService;
pub use node::NodeService;

/// The v1 services, sharing one engine.
#[derive(Clone)]
pub struct V1 {
    pub engine: Arc<Engine>,
    pub driver_name: String,
}

/// v1 uses the v0.1.0+ status-code tables unchanged.
pub fn status(e: EngineError) -> Status {
    e.into_status()
}

type Reply<T> = Result<Response<T>, Status>;

#[tonic::async_trait]
impl Identity for V1 {
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
        use csi::plugin_capability::{service, volume_expansion, Service, Type, VolumeExpansion};
        let service = |t: service::Type| csi::PluginCapability {
            r#type: Some(Type::Service(Service { r#type: t as i32 })),
        };
        let expansion = |t: volume_expansion::Type| csi::PluginCapability {
            r#type: Some(Type::VolumeExpansion(VolumeExpansion { r#type: t as i32 })),
        };
        let mut capabilities = vec![
            service(service::Type::ControllerService),
            expansion(volume_expansion::Type::Online),
            expansion(volume_expansion::Type::Offline),
        ];
        if !self.engine.config().topology.is_empty() {
            capabilities.push(service(service::Type::VolumeAccessibilityConstraints));
        }
        Ok(Response::new(csi::GetPluginCapabilitiesResponse {
            capabilities,
        }))
    }

    async fn probe(&self, _: Request<csi::ProbeRequest>) -> Reply<csi::ProbeResponse> {
        Ok(Response::new(csi::ProbeResponse { ready: Some(true) }))
    }
}

/// The v1 Identity, Controller and Node services over one engine.
pub fn routes(engine: Arc<Engine>, driver_name: String) -> tonic::service::Routes {
    let v1 = V1 {
        engine,
        driver_name,
    };
    tonic::service::Routes::new(csi::identity_server::IdentityServer::new(v1.clone()))
        .add_service(csi::controller_server::ControllerServer::new(
            ControllerService(v1.clone()),
        ))
        .add_service(csi::node_server::NodeServer::new(NodeService(v1)))
}
