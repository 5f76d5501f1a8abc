//! v0.1 Controller service.

use tonic::{Request, Response};

use super::{capabilities, capability, check_version, hash, map, required, status, Reply, V01};
use crate::blocking;
use crate::engine::{rules, CreateVolume, EngineError, Kind, ObjectKind, Volume};
use csi::controller_server::Controller;
use csi::controller_service_capability::{rpc::Type as Rpc, Type};
use csi_gateway_proto::dialect::proto::v0_1 as csi;

#[derive(Clone)]
pub struct ControllerService(pub V01);

fn info(v: &Volume) -> csi::VolumeInfo {
    let kind = match v.kind {
        Kind::Mount => "mount",
        Kind::Block => "block",
    };
    csi::VolumeInfo {
        capacity_bytes: v.capacity,
        id: v.id.clone(),
        attributes: [("kind".to_string(), kind.to_string())].into(),
    }
}

#[tonic::async_trait]
impl Controller for ControllerService {
    async fn create_volume(
        &self,
        req: Request<csi::CreateVolumeRequest>,
    ) -> Reply<csi::CreateVolumeResponse> {
        let r = req.into_inner();
        check_version(r.version.as_ref())?;
        let range = r.capacity_range.unwrap_or_default();
        let args = CreateVolume {
            name: r.name,
            required_bytes: range.required_bytes,
            limit_bytes: range.limit_bytes,
            capabilities: capabilities("volume_capabilities", &r.volume_capabilities)?,
            parameters: map(&r.parameters),
            ..Default::default()
        };
        let v = blocking(&self.0.engine, move |e| e.create_volume(args))
            .await
            .map_err(status)?;
        Ok(Response::new(csi::CreateVolumeResponse {
            volume_info: Some(info(&v)),
        }))
    }

    async fn delete_volume(
        &self,
        req: Request<csi::DeleteVolumeRequest>,
    ) -> Reply<csi::DeleteVolumeResponse> {
        let r = req.into_inner();
        check_version(r.version.as_ref())?;
        blocking(&self.0.engine, move |e| e.delete_volume(&r.volume_id))
            .await
            .map_err(status)?;
        Ok(Response::new(csi::DeleteVolumeResponse {}))
    }

    async fn controller_publish_volume(
        &self,
        req: Request<csi::ControllerPublishVolumeRequest>,
    ) -> Reply<csi::ControllerPublishVolumeResponse> {
        let r = req.into_inner();
        check_version(r.version.as_ref())?;
        required("volume_id", &r.volume_id)?;
        required("node_id", &r.node_id)?;
        let cap = capability("volume_capability", r.volume_capability.as_ref())?;
        let ctx = blocking(&self.0.engine, move |e| {
            e.attach(&r.volume_id, &r.node_id, &cap, r.readonly)
        })
        .await
        .map_err(status)?;
        Ok(Response::new(csi::ControllerPublishVolumeResponse {
            publish_volume_info: hash(&ctx),
        }))
    }

    async fn controller_unpublish_volume(
        &self,
        req: Request<csi::ControllerUnpublishVolumeRequest>,
    ) -> Reply<csi::ControllerUnpublishVolumeResponse> {
        let r = req.into_inner();
        check_version(r.version.as_ref())?;
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
        check_version(r.version.as_ref())?;
        required("volume_id", &r.volume_id)?;
        let caps = capabilities("volume_capabilities", &r.volume_capabilities)?;
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
        check_version(r.version.as_ref())?;
        let max = r.max_entries as usize;
        let page = blocking(&self.0.engine, move |e| {
            e.list_volumes(max, &r.starting_token)
        })
        .await
        .map_err(status)?;
        let entries = page
            .entries
            .iter()
            .map(|v| csi::list_volumes_response::Entry {
                volume_info: Some(info(v)),
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
        check_version(r.version.as_ref())?;
        if !r.volume_capabilities.is_empty() {
            capabilities("volume_capabilities", &r.volume_capabilities)?;
        }
        rules::check_parameters("parameters", &map(&r.parameters), rules::MUTABLE)
            .map_err(status)?;
        Ok(Response::new(csi::GetCapacityResponse {
            available_capacity: self.0.engine.available(),
        }))
    }

    async fn controller_probe(
        &self,
        req: Request<csi::ControllerProbeRequest>,
    ) -> Reply<csi::ControllerProbeResponse> {
        check_version(req.get_ref().version.as_ref())?;
        Ok(Response::new(csi::ControllerProbeResponse {}))
    }

    async fn controller_get_capabilities(
        &self,
        req: Request<csi::ControllerGetCapabilitiesRequest>,
    ) -> Reply<csi::ControllerGetCapabilitiesResponse> {
        check_version(req.get_ref().version.as_ref())?;
        let rpcs = [
            Rpc::CreateDeleteVolume,
            Rpc::PublishUnpublishVolume,
            Rpc::ListVolumes,
            Rpc::GetCapacity,
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
}
