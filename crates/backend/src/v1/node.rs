//! v1 Node service.

use tonic::{Request, Response};

use super::convert::{self, int64};
use super::{status, Reply, V1};
use crate::blocking;
use crate::engine::{EngineError, Publish};
use csi::node_server::Node;
use csi::node_service_capability::{rpc::Type as Rpc, Type};
use csi_gateway_proto::dialect::proto::v1 as csi;

#[derive(Clone)]
pub struct NodeService(pub V1);

#[tonic::async_trait]
impl Node for NodeService {
    async fn node_stage_volume(
        &self,
        req: Request<csi::NodeStageVolumeRequest>,
    ) -> Reply<csi::NodeStageVolumeResponse> {
        let r = req.into_inner();
        if r.volume_id.is_empty() {
            return Err(status(EngineError::missing("volume_id")));
        }
        if r.staging_target_path.is_empty() {
            return Err(status(EngineError::missing("staging_target_path")));
        }
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
        if r.volume_id.is_empty() {
            return Err(status(EngineError::missing("volume_id")));
        }
        if r.target_path.is_empty() {
            return Err(status(EngineError::missing("target_path")));
        }
        let capability = convert::capability("volume_capability", r.volume_capability.as_ref())
            .map_err(status)?;
        let args = Publish {
            volume_id: r.volume_id,
            target_path: r.target_path,
            staging_path: r.staging_target_path,
            capability,
            readonly: r.readonly,
            strict_single_target: false,
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

    async fn node_get_volume_stats(
        &self,
        req: Request<csi::NodeGetVolumeStatsRequest>,
    ) -> Reply<csi::NodeGetVolumeStatsResponse> {
        use csi::volume_usage::Unit;
        let r = req.into_inner();
        let st = blocking(&self.0.engine, move |e| {
            e.stats(&r.volume_id, &r.volume_path)
        })
        .await
        .map_err(status)?;
        let mut usage = vec![csi::VolumeUsage {
            available: int64(st.available_bytes),
            total: int64(st.total_bytes),
            used: int64(st.used_bytes),
            unit: Unit::Bytes as i32,
        }];
        if let Some((total, free, used)) = st.inodes {
            usage.push(csi::VolumeUsage {
                available: int64(free),
                total: int64(total),
                used: int64(used),
                unit: Unit::Inodes as i32,
            });
        }
        Ok(Response::new(csi::NodeGetVolumeStatsResponse {
            usage,
            volume_condition: Some(csi::VolumeCondition {
                abnormal: st.abnormal.is_some(),
                message: st.abnormal.unwrap_or_else(|| "ok".into()),
            }),
        }))
    }

    async fn node_expand_volume(
        &self,
        req: Request<csi::NodeExpandVolumeRequest>,
    ) -> Reply<csi::NodeExpandVolumeResponse> {
        let r = req.into_inner();
        let (required, _) = convert::range(r.capacity_range.as_ref()).map_err(status)?;
        let cap = r
            .volume_capability
            .as_ref()
            .map(|c| convert::capability("volume_capability", Some(c)))
            .transpose()
            .map_err(status)?;
        let capacity = blocking(&self.0.engine, move |e| {
            // "Exceeds capabilities": a capability the volume cannot serve is INVALID_ARGUMENT.
            if let Some(cap) = cap {
                if !e.validate(&r.volume_id, std::slice::from_ref(&cap))? {
                    return Err(EngineError::invalid(
                        "volume_capability",
                        "does not match the volume's access type",
                    ));
                }
            }
            e.node_expand(&r.volume_id, &r.volume_path, required)
        })
        .await
        .map_err(status)?;
        Ok(Response::new(csi::NodeExpandVolumeResponse {
            capacity_bytes: int64(capacity),
        }))
    }

    async fn node_get_capabilities(
        &self,
        _: Request<csi::NodeGetCapabilitiesRequest>,
    ) -> Reply<csi::NodeGetCapabilitiesResponse> {
        let mut rpcs = vec![
            Rpc::GetVolumeStats,
            Rpc::ExpandVolume,
            Rpc::VolumeCondition,
            Rpc::SingleNodeMultiWriter,
        ];
        if self.0.engine.config().require_staging {
            rpcs.insert(0, Rpc::StageUnstageVolume);
        }
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
}
