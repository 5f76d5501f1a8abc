//! The draft's Node service: NodePublish/NodeUnpublish (no staging), GetNodeID, ProbeNode.

use tonic::{Request, Response, Status};

use super::errors::{self, Rpc};
use super::{capability, check_version, node_id, reply, require, resolve, run, Draft};
use crate::engine::Publish;
use csi::node_server::Node;
use csi_gateway_proto::dialect::proto::v0_1_oneof as csi;

#[derive(Clone)]
pub struct NodeService(pub Draft);

type Reply<T> = Result<Response<T>, Status>;

#[tonic::async_trait]
impl Node for NodeService {
    async fn node_publish_volume(
        &self,
        req: Request<csi::NodePublishVolumeRequest>,
    ) -> Reply<csi::NodePublishVolumeResponse> {
        let r = req.into_inner();
        let out = run(&self.0.engine, move |e| {
            check_version(r.version.as_ref())?;
            require(r.volume_handle.is_some(), "volume_handle")?;
            require(!r.target_path.is_empty(), "target_path")?;
            require(r.volume_capability.is_some(), "volume_capability")?;
            let v = resolve(e, r.volume_handle.as_ref(), Rpc::NodePublish)?;
            let capability = capability("volume_capability", r.volume_capability.as_ref())
                .map_err(errors::node_publish)?;
            let args = Publish {
                volume_id: v.id,
                target_path: r.target_path,
                staging_path: String::new(),
                capability,
                readonly: r.readonly,
                strict_single_target: true,
            };
            e.publish(&args).map_err(errors::node_publish)?;
            Ok(csi::node_publish_volume_response::Result {})
        });
        reply!(
            NodePublishVolumeResponse,
            node_publish_volume_response,
            out.await
        )
    }

    async fn node_unpublish_volume(
        &self,
        req: Request<csi::NodeUnpublishVolumeRequest>,
    ) -> Reply<csi::NodeUnpublishVolumeResponse> {
        let r = req.into_inner();
        let out = run(&self.0.engine, move |e| {
            check_version(r.version.as_ref())?;
            require(r.volume_handle.is_some(), "volume_handle")?;
            require(!r.target_path.is_empty(), "target_path")?;
            let v = resolve(e, r.volume_handle.as_ref(), Rpc::NodeUnpublish)?;
            e.unpublish(&v.id, &r.target_path)
                .map_err(errors::node_unpublish)?;
            Ok(csi::node_unpublish_volume_response::Result {})
        });
        reply!(
            NodeUnpublishVolumeResponse,
            node_unpublish_volume_response,
            out.await
        )
    }

    async fn get_node_id(
        &self,
        req: Request<csi::GetNodeIdRequest>,
    ) -> Reply<csi::GetNodeIdResponse> {
        let out = check_version(req.get_ref().version.as_ref()).map(|()| {
            csi::get_node_id_response::Result {
                node_id: Some(node_id(&self.0.engine.config().node_id)),
            }
        });
        reply!(GetNodeIdResponse, get_node_id_response, out)
    }

    async fn probe_node(
        &self,
        req: Request<csi::ProbeNodeRequest>,
    ) -> Reply<csi::ProbeNodeResponse> {
        let out = check_version(req.get_ref().version.as_ref())
            .map(|()| csi::probe_node_response::Result {});
        reply!(ProbeNodeResponse, probe_node_response, out)
    }

    async fn node_get_capabilities(
        &self,
        req: Request<csi::NodeGetCapabilitiesRequest>,
    ) -> Reply<csi::NodeGetCapabilitiesResponse> {
        // The draft defines no node capability besides UNKNOWN.
        let out = check_version(req.get_ref().version.as_ref()).map(|()| {
            csi::node_get_capabilities_response::Result {
                capabilities: vec![],
            }
        });
        reply!(
            NodeGetCapabilitiesResponse,
            node_get_capabilities_response,
            out
        )
    }
}
