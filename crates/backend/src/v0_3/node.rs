//! v0.3 Node service: staging, publishing, NodeGetId (deprecated in v0.3, still served for
//! v0.2 peers) and NodeGetInfo.

use tonic::{Request, Response};

use super::convert::{self, int64, required};
use super::{status, Reply, V03};
use crate::blocking;
use crate::engine::Publish;
use csi::node_server::Node;
use csi::node_service_capability::{rpc::Type as Rpc, Type};
use csi_gateway_proto::dialect::proto::v0_3 as csi;

#[derive(Clone)]
pub struct NodeService(pub V03);

#[tonic::async_trait]
impl Node for NodeService {
    async fn node_stage_volume(
        &self,
        req: Request<csi::NodeStageVolumeRequest>,
    ) -> Reply<csi::NodeStageVolumeResponse> {
        let r = req.into_inner();
        required("volume_id", &r.volume_id).map_err(status)?;
        required("staging_target_path", &r.staging_target_path).map_err(status)?;
        let cap = convert::capability("volume_capability", r.volume_capability.as_ref())
            .map_err(status)?;
        blocking(&self.0.engine, move |e| {
            e.stage(&r.volume_id, &r.staging_target_path, &cap)
        })
        .await
        .map_err(status)?;
        Ok(Response::new(csi::NodeStageVolumeResponse {}))
    }

    async fn node_unstage_volume(
        &self,
        req: Request<csi::NodeUnstageVolumeRequest>,
    ) -> Reply<csi::NodeUnstageVolumeResponse> {
        let r = req.into_inner();
        blocking(&self.0.engine, move |e| {
            e.unstage(&r.volume_id, &r.staging_target_path)
        })
        .await
        .map_err(status)?;
        Ok(Response::new(csi::NodeUnstageVolumeResponse {}))
    }

    async fn node_publish_volume(
        &self,
        req: Request<csi::NodePublishVolumeRequest>,
    ) -> Reply<csi::NodePublishVolumeResponse> {
        let r = req.into_inner();
        required("volume_id", &r.volume_id).map_err(status)?;
        required("target_path", &r.target_path).map_err(status)?;
        let capability = convert::capability("volume_capability", r.volume_capability.as_ref())
            .map_err(status)?;
        let args = Publish {
            volume_id: r.volume_id,
            target_path: r.target_path,
            staging_path: r.staging_target_path,
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
        blocking(&self.0.engine, move |e| {
            e.unpublish(&r.volume_id, &r.target_path)
        })
        .await
        .map_err(status)?;
        Ok(Response::new(csi::NodeUnpublishVolumeResponse {}))
    }

    async fn node_get_id(
        &self,
        _: Request<csi::NodeGetIdRequest>,
    ) -> Reply<csi::NodeGetIdResponse> {
        Ok(Response::new(csi::NodeGetIdResponse {
            node_id: self.0.engine.config().node_id.clone(),
        }))
    }

    async fn node_get_info(
        &self,
        _: Request<csi::NodeGetInfoRequest>,
    ) -> Reply<csi::NodeGetInfoResponse> {
        let cfg = self.0.engine.config();
        Ok(Response::new(csi::NodeGetInfoResponse {
            node_id: cfg.node_id.clone(),
            max_volumes_per_node: int64(cfg.max_volumes_per_node),
            accessible_topology: (!cfg.topology.is_empty())
                .then(|| convert::topology(&cfg.topology)),
        }))
    }

    async fn node_get_capabilities(
        &self,
        _: Request<csi::NodeGetCapabilitiesRequest>,
    ) -> Reply<csi::NodeGetCapabilitiesResponse> {
        let rpcs: Vec<Rpc> = if self.0.engine.config().require_staging {
            vec![Rpc::StageUnstageVolume]
        } else {
            vec![]
        };
        let capabilities = rpcs
            .iter()
            .map(|t| csi::NodeServiceCapability {
                r#type: Some(Type::Rpc(csi::node_service_capability::Rpc {
                    r#type: *t as i32,
                })),
            })
            .collect();
        Ok(Response::new(csi::NodeGetCapabilitiesResponse {
            capabilities,
        }))
    }
}
