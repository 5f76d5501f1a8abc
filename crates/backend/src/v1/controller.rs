//! v1 Controller service.

use tonic::{Request, Response};

use super::convert::{self, bytes, int64};
use super::{status, Reply, V1};
use crate::blocking;
use crate::engine::{CreateVolume, EngineError, Volume};
use csi::controller_server::Controller;
use csi::controller_service_capability::{rpc::Type as Rpc, Type};
use csi_gateway_proto::dialect::proto::v1 as csi;

/// The v1 Controller service (a newtype so Identity and Controller can share [`V1`]).
#[derive(Clone)]
pub struct ControllerService(pub V1);

fn published_nodes(v: &Volume) -> Vec<String> {
    v.attachments.keys().cloned().collect()
}

fn condition(engine: &crate::engine::Engine, v: &Volume) -> csi::VolumeCondition {
    let healthy = engine.healthy(&v.id);
    csi::VolumeCondition {
        abnormal: !healthy,
        message: if healthy {
            "ok".into()
        } else {
            "backing data is missing".into()
        },
    }
}

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
            mutable_parameters: convert::map(&r.mutable_parameters),
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
        if r.volume_id.is_empty() {
            return Err(status(EngineError::missing("volume_id")));
        }
        if r.node_id.is_empty() {
            return Err(status(EngineError::missing("node_id")));
        }
        let cap = convert::capability("volume_capability", r.volume_capability.as_ref())
            .map_err(status)?;
        let ctx = blocking(&self.0.engine, move |e| {
            e.attach(&r.volume_id, &r.node_id, &cap, r.readonly)
        })
        .await
        .map_err(status)?;
        Ok(Response::new(csi::ControllerPublishVolumeResponse {
            publish_context: convert::hash(&ctx),
        }))
    }

    async fn controller_unpublish_volume(
        &self,
        req: Request<csi::ControllerUnpublishVolumeRequest>,
    ) -> Reply<csi::ControllerUnpublishVolumeResponse> {
        let r = req.into_inner();
        blocking(&self.0.engine, move |e| e.detach(&r.volume_id, &r.node_id))
            .await
            .map_err(status)?;
        Ok(Response::new(csi::ControllerUnpublishVolumeResponse {}))
    }

    async fn validate_volume_capabilities(
        &self,
        req: Request<csi::ValidateVolumeCapabilitiesRequest>,
    ) -> Reply<csi::ValidateVolumeCapabilitiesResponse> {
        use csi::validate_volume_capabilities_response::Confirmed;
        let r = req.into_inner();
        if r.volume_id.is_empty() {
            return Err(status(EngineError::missing("volume_id")));
        }
        let caps =
            convert::capabilities("volume_capabilities", &r.volume_capabilities).map_err(status)?;
        let id = r.volume_id.clone();
        let (params, context) = (convert::map(&r.parameters), r.volume_context.clone());
        // Confirmed only if the capabilities fit and the parameters and context the CO passes
        // (when it passes any) are the volume's own.
        let mismatch = blocking(&self.0.engine, move |e| {
            let v = e.get_volume(&id)?;
            Ok(if !e.validate(&id, &caps)? {
                Some("the volume's access type does not match a requested capability")
            } else if !params.is_empty() && params != v.parameters {
                Some("parameters differ from the volume's")
            } else if !context.is_empty() && context != convert::volume_context(&v) {
                Some("volume_context differs from the volume's")
            } else {
                None
            })
        })
        .await
        .map_err(status)?;
        let reply = if mismatch.is_none() {
            csi::ValidateVolumeCapabilitiesResponse {
                confirmed: Some(Confirmed {
                    volume_context: r.volume_context,
                    volume_capabilities: r.volume_capabilities,
                    parameters: r.parameters,
                    mutable_parameters: r.mutable_parameters,
                }),
                message: String::new(),
            }
        } else {
            csi::ValidateVolumeCapabilitiesResponse {
                confirmed: None,
                message: mismatch.unwrap_or_default().to_string(),
            }
        };
        Ok(Response::new(reply))
    }

    async fn list_volumes(
        &self,
        req: Request<csi::ListVolumesRequest>,
    ) -> Reply<csi::ListVolumesResponse> {
        use csi::list_volumes_response::{Entry, VolumeStatus};
        let r = req.into_inner();
        let max = convert::max_entries(r.max_entries).map_err(status)?;
        let engine = self.0.engine.clone();
        let page = blocking(&engine, move |e| e.list_volumes(max, &r.starting_token))
            .await
            .map_err(status)?;
        let entries = page
            .entries
            .iter()
            .map(|v| Entry {
                volume: Some(convert::volume(v)),
                status: Some(VolumeStatus {
                    published_node_ids: published_nodes(v),
                    volume_condition: Some(condition(&engine, v)),
                }),
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
        let engine = &self.0.engine;
        if !r.volume_capabilities.is_empty() {
            convert::capabilities("volume_capabilities", &r.volume_capabilities).map_err(status)?;
        }
        crate::engine::rules::check_parameters(
            "parameters",
            &convert::map(&r.parameters),
            crate::engine::rules::MUTABLE,
        )
        .map_err(status)?;
        let reachable = r
            .accessible_topology
            .as_ref()
            .is_none_or(|t| engine.topology_matches(&convert::segment(t)));
        let available = if reachable { engine.available() } else { 0 };
        Ok(Response::new(csi::GetCapacityResponse {
            available_capacity: int64(available),
            maximum_volume_size: Some(int64(available)),
            minimum_volume_size: Some(0),
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
            Rpc::CloneVolume,
            Rpc::PublishReadonly,
            Rpc::ExpandVolume,
            Rpc::ListVolumesPublishedNodes,
            Rpc::VolumeCondition,
            Rpc::GetVolume,
            Rpc::SingleNodeMultiWriter,
            Rpc::ModifyVolume,
            Rpc::GetSnapshot,
        ];
        let alpha_get_snapshot = self.0.engine.config().alpha_get_snapshot;
        let capabilities = rpcs
            .iter()
            .filter(|t| alpha_get_snapshot || **t != Rpc::GetSnapshot)
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

    async fn get_snapshot(
        &self,
        req: Request<csi::GetSnapshotRequest>,
    ) -> Reply<csi::GetSnapshotResponse> {
        if !self.0.engine.config().alpha_get_snapshot {
            return Err(tonic::Status::unimplemented(
                "GetSnapshot is an alpha RPC of CSI v1.11, served only with --alpha-get-snapshot",
            ));
        }
        let id = req.into_inner().snapshot_id;
        let s = blocking(&self.0.engine, move |e| e.get_snapshot(&id))
            .await
            .map_err(status)?;
        Ok(Response::new(csi::GetSnapshotResponse {
            snapshot: Some(convert::snapshot(&s)),
        }))
    }

    async fn controller_expand_volume(
        &self,
        req: Request<csi::ControllerExpandVolumeRequest>,
    ) -> Reply<csi::ControllerExpandVolumeResponse> {
        let r = req.into_inner();
        if r.volume_id.is_empty() {
            return Err(status(EngineError::missing("volume_id")));
        }
        let range = r
            .capacity_range
            .as_ref()
            .ok_or_else(|| status(EngineError::missing("capacity_range")))?;
        let required =
            bytes("capacity_range.required_bytes", range.required_bytes).map_err(status)?;
        let limit = bytes("capacity_range.limit_bytes", range.limit_bytes).map_err(status)?;
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
            e.expand(&r.volume_id, required, limit)
        })
        .await
        .map_err(status)?;
        Ok(Response::new(csi::ControllerExpandVolumeResponse {
            capacity_bytes: int64(capacity),
            // Let the CO call NodeExpandVolume so the node side sees the new size.
            node_expansion_required: true,
        }))
    }

    async fn controller_get_volume(
        &self,
        req: Request<csi::ControllerGetVolumeRequest>,
    ) -> Reply<csi::ControllerGetVolumeResponse> {
        use csi::controller_get_volume_response::VolumeStatus;
        let id = req.into_inner().volume_id;
        let engine = self.0.engine.clone();
        let v = blocking(&engine, move |e| e.get_volume(&id))
            .await
            .map_err(status)?;
        Ok(Response::new(csi::ControllerGetVolumeResponse {
            volume: Some(convert::volume(&v)),
            status: Some(VolumeStatus {
                published_node_ids: published_nodes(&v),
                volume_condition: Some(condition(&engine, &v)),
            }),
        }))
    }

    async fn controller_modify_volume(
        &self,
        req: Request<csi::ControllerModifyVolumeRequest>,
    ) -> Reply<csi::ControllerModifyVolumeResponse> {
        let r = req.into_inner();
        if r.mutable_parameters.is_empty() {
            return Err(status(EngineError::missing("mutable_parameters")));
        }
        let params = convert::map(&r.mutable_parameters);
        blocking(&self.0.engine, move |e| e.modify(&r.volume_id, &params))
            .await
            .map_err(status)?;
        Ok(Response::new(csi::ControllerModifyVolumeResponse {}))
    }
}
