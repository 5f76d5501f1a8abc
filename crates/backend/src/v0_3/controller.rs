//! v0.3 Controller service.

use tonic::{Request, Response};

use super::convert::{self, int64, required};
use super::{status, Reply, V03};
use crate::blocking;
use crate::engine::{rules, CreateVolume, EngineError, ObjectKind};
use csi::controller_server::Controller;
use csi::controller_service_capability::{rpc::Type as Rpc, Type};
use csi_gateway_proto::dialect::proto::v0_3 as csi;

#[derive(Clone)]
pub struct ControllerService(pub V03);

#[tonic::async_trait]
impl Controller for ControllerService {
    async fn create_volume(
        &self,
        req: Request<csi::CreateVolumeRequest>,
    ) -> Reply<csi::CreateVolumeResponse> {
        let r = req.into_inner();
        let (required_bytes, limit_bytes) =
            convert::range(r.capacity_range.as_ref()).map_err(status)?;
        let topo = r.accessibility_requirements.unwrap_or_default();
        let args = CreateVolume {
            name: r.name,
            required_bytes,
            limit_bytes,
            capabilities: convert::capabilities("volume_capabilities", &r.volume_capabilities)
                .map_err(status)?,
            parameters: convert::map(&r.parameters),
            mutable_parameters: Default::default(),
            source: convert::source(r.volume_content_source.as_ref()).map_err(status)?,
            requisite: topo.requisite.iter().map(convert::segment).collect(),
            preferred: topo.preferred.iter().map(convert::segment).collect(),
        };
        let v = blocking(&self.0.engine, move |e| e.create_volume(args))
            .await
            .map_err(status)?;
        Ok(Response::new(csi::CreateVolumeResponse {
            volume: Some(convert::volume(&v)),
        }))
    }

    async fn delete_volume(
        &self,
        req: Request<csi::DeleteVolumeRequest>,
    ) -> Reply<csi::DeleteVolumeResponse> {
        let id = req.into_inner().volume_id;
        blocking(&self.0.engine, move |e| e.delete_volume(&id))
            .await
            .map_err(status)?;
        Ok(Response::new(csi::DeleteVolumeResponse {}))
    }

    async fn controller_publish_volume(
        &self,
        req: Request<csi::ControllerPublishVolumeRequest>,
    ) -> Reply<csi::ControllerPublishVolumeResponse> {
        let r = req.into_inner();
        required("volume_id", &r.volume_id).map_err(status)?;
        required("node_id", &r.node_id).map_err(status)?;
        let cap = convert::capability("volume_capability", r.volume_capability.as_ref())
            .map_err(status)?;
        let ctx = blocking(&self.0.engine, move |e| {
            e.attach(&r.volume_id, &r.node_id, &cap, r.readonly)
        })
        .await
        .map_err(status)?;
        Ok(Response::new(csi::ControllerPublishVolumeResponse {
            publish_info: convert::hash(&ctx),
        }))
    }

    /// v0.3 answers NOT_FOUND for an unknown volume or node (v1 later made both OK).
    async fn controller_unpublish_volume(
        &self,
        req: Request<csi::ControllerUnpublishVolumeRequest>,
    ) -> Reply<csi::ControllerUnpublishVolumeResponse> {
        let r = req.into_inner();
        blocking(&self.0.engine, move |e| {
            e.get_volume(&r.volume_id)?;
            if !r.node_id.is_empty() && !e.knows_node(&r.node_id) {
                return Err(EngineError::not_found(ObjectKind::Node, r.node_id));
            }
            e.detach(&r.volume_id, &r.node_id)
        })
        .await
        .map_err(status)?;
        Ok(Response::new(csi::ControllerUnpublishVolumeResponse {}))
    }

    async fn validate_volume_capabilities(
        &self,
        req: Request<csi::ValidateVolumeCapabilitiesRequest>,
    ) -> Reply<csi::ValidateVolumeCapabilitiesResponse> {
        let r = req.into_inner();
        required("volume_id", &r.volume_id).map_err(status)?;
        let caps =
            convert::capabilities("volume_capabilities", &r.volume_capabilities).map_err(status)?;
        let ok = blocking(&self.0.engine, move |e| e.validate(&r.volume_id, &caps))
            .await
            .map_err(status)?;
        Ok(Response::new(csi::ValidateVolumeCapabilitiesResponse {
            supported: ok,
            message: if ok {
                String::new()
            } else {
                "the volume's access type does not match".into()
            },
        }))
    }

    async fn list_volumes(
        &self,
        req: Request<csi::ListVolumesRequest>,
    ) -> Reply<csi::ListVolumesResponse> {
        let r = req.into_inner();
        let max = convert::max_entries(r.max_entries).map_err(status)?;
        let page = blocking(&self.0.engine, move |e| {
            e.list_volumes(max, &r.starting_token)
        })
        .await
        .map_err(status)?;
        let entries = page
            .entries
            .iter()
            .map(|v| csi::list_volumes_response::Entry {
                volume: Some(convert::volume(v)),
            })
            .collect();
        Ok(Response::new(csi::ListVolumesResponse {
            entries,
            next_token: page.next_token,
        }))
    }

    async fn get_capacity(
        &self,
        req: Request<csi::GetCapacityRequest>,
    ) -> Reply<csi::GetCapacityResponse> {
        let r = req.into_inner();
        if !r.volume_capabilities.is_empty() {
            convert::capabilities("volume_capabilities", &r.volume_capabilities).map_err(status)?;
        }
        rules::check_parameters("parameters", &convert::map(&r.parameters), rules::MUTABLE)
            .map_err(status)?;
        let engine = &self.0.engine;
        let reachable = r
            .accessible_topology
            .as_ref()
            .is_none_or(|t| engine.topology_matches(&convert::segment(t)));
        let available = if reachable { engine.available() } else { 0 };
        Ok(Response::new(csi::GetCapacityResponse {
            available_capacity: int64(available),
        }))
    }

    async fn controller_get_capabilities(
        &self,
        _: Request<csi::ControllerGetCapabilitiesRequest>,
    ) -> Reply<csi::ControllerGetCapabilitiesResponse> {
        let rpcs = [
            Rpc::CreateDeleteVolume,
            Rpc::PublishUnpublishVolume,
            Rpc::ListVolumes,
            Rpc::GetCapacity,
            Rpc::CreateDeleteSnapshot,
            Rpc::ListSnapshots,
        ];
        let capabilities = rpcs
            .iter()
            .map(|t| csi::ControllerServiceCapability {
                r#type: Some(Type::Rpc(csi::controller_service_capability::Rpc {
                    r#type: *t as i32,
                })),
            })
            .collect();
        Ok(Response::new(csi::ControllerGetCapabilitiesResponse {
            capabilities,
        }))
    }

    async fn create_snapshot(
        &self,
        req: Request<csi::CreateSnapshotRequest>,
    ) -> Reply<csi::CreateSnapshotResponse> {
        let r = req.into_inner();
        let params = convert::map(&r.parameters);
        let s = blocking(&self.0.engine, move |e| {
            e.create_snapshot(&r.name, &r.source_volume_id, &params)
        })
        .await
        .map_err(status)?;
        Ok(Response::new(csi::CreateSnapshotResponse {
            snapshot: Some(convert::snapshot(&s)),
        }))
    }

    async fn delete_snapshot(
        &self,
        req: Request<csi::DeleteSnapshotRequest>,
    ) -> Reply<csi::DeleteSnapshotResponse> {
        let id = req.into_inner().snapshot_id;
        blocking(&self.0.engine, move |e| e.delete_snapshot(&id))
            .await
            .map_err(status)?;
        Ok(Response::new(csi::DeleteSnapshotResponse {}))
    }

    async fn list_snapshots(
        &self,
        req: Request<csi::ListSnapshotsRequest>,
    ) -> Reply<csi::ListSnapshotsResponse> {
        let r = req.into_inner();
        let max = convert::max_entries(r.max_entries).map_err(status)?;
        let page = blocking(&self.0.engine, move |e| {
            e.list_snapshots(&r.snapshot_id, &r.source_volume_id, max, &r.starting_token)
        })
        .await
        .map_err(status)?;
        let entries = page
            .entries
            .iter()
            .map(|s| csi::list_snapshots_response::Entry {
                snapshot: Some(convert::snapshot(s)),
            })
            .collect();
        Ok(Response::new(csi::ListSnapshotsResponse {
            entries,
            next_token: page.next_token,
        }))
    }
}
