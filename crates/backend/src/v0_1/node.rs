//! v0.1 Node service: publish/unpublish without staging, GetNodeID, NodeProbe.

use tonic::{Request, Response};

use super::{capability, check_version, required, status, Reply, V01};
use crate::blocking;
use crate::engine::Publish;
use csi::node_server::Node;
use csi_gateway_proto::dialect::proto::v0_1 as csi;

#[derive(Clone)]
pub struct NodeService(pub V01);

#[tonic::async_trait]
impl Node for NodeService {
    async fn node_publish_volume(
        &self,
        req: Request<csi::NodePublishVolumeRequest>,
    ) -> Reply<csi::NodePublishVolumeResponse> {
        let r = req.into_inner();
        check_version(r.version.as_ref())?;
        required("volume_id", &r.volume_id)?;
        required("target_path", &r.target_path)?;
        let capability = capability("volume_capability", r.volume_capability.as_ref())?;
        let args = Publish {
            volume_id: r.volume_id,
            target_path: r.target_path,
            staging_path: String::new(),
            capability,
            readonly: r.readonly,
            strict_single_target: true,
        };
        blocking(&self.0.engine, move |e| e.publish(&args))
            .await
            .map_err(status)?;
        Ok(Response::new(csi::NodePublishVolumeResponse {}))
    }

    async fn node_unpublish_volume(
        &self,
        req: Request<csi::NodeUnpublishVolumeRequest>,
    ) -> Reply<csi::NodeUnpublishVolumeResponse> {
        let r = req.into_inner();
        check_version(r.version.as_ref())?;
        blocking(&self.0.engine, move |e| {
            e.unpublish(&r.volume_id, &r.target_path)
        })
        .await
        .map_err(status)?;
        Ok(Response::new(csi::NodeUnpublishVolumeResponse {}))
    }

    async fn get_node_id(
        &self,
        req: Request<csi::GetNodeIdRequest>,
    ) -> Reply<csi::GetNodeIdResponse> {
        check_version(req.get_ref().version.as_ref())?;
        Ok(Response::new(csi::GetNodeIdResponse {
            node_id: self.0.engine.config().node_id.clone(),
        }))
    }

    async fn node_probe(
        &self,
        req: Request<csi::NodeProbeRequest>,
    ) -> Reply<csi::NodeProbeResponse> {
        check_version(req.get_ref().version.as_ref())?;
        Ok(Response::new(csi::NodeProbeResponse {}))
    }

    async fn node_get_capabilities(
        &self,
        req: Request<csi::NodeGetCapabilitiesRequest>,
    ) -> Reply<csi::NodeGetCapabilitiesResponse> {
        check_version(req.get_ref().version.as_ref())?;
        // v0.1.0 defines no node capability besides UNKNOWN, and v0.1 plugins answered with
        // it: their clients (csi-sanity v0.1 among them) reject an empty list.
        use csi::node_service_capability::{rpc::Type, Rpc, Type as Kind};
        let unknown = csi::NodeServiceCapability {
            r#type: Some(Kind::Rpc(Rpc {
                r#type: Type::Unknown as i32,
            })),
        };
        Ok(Response::new(csi::NodeGetCapabilitiesResponse {
            capabilities: vec![unknown],
        }))
    }
}
