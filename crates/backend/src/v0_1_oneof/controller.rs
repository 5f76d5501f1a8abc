//! The draft's Controller service. Each handler computes an [`Outcome`] and wraps it in the
//! response's `reply` oneof; gRPC itself always answers OK.

use tonic::{Request, Response, Status};

use super::errors::{self, Rpc};
use super::{
    capabilities, capability, check_version, info, node_id, reply, require, resolve, run, Draft,
    NODE_KEY,
};
use crate::engine::{rules, CreateVolume, EngineError, ObjectKind, Precondition};
use csi::controller_server::Controller;
use csi_gateway_proto::dialect::proto::v0_1_oneof as csi;

#[derive(Clone)]
pub struct ControllerService(pub Draft);

type Reply<T> = Result<Response<T>, Status>;

fn node_of(n: Option<&csi::NodeId>) -> Option<String> {
    n.and_then(|n| n.values.get(NODE_KEY)).cloned()
}

#[tonic::async_trait]
impl Controller for ControllerService {
    async fn create_volume(
        &self,
        req: Request<csi::CreateVolumeRequest>,
    ) -> Reply<csi::CreateVolumeResponse> {
        let r = req.into_inner();
        let out = run(&self.0.engine, move |e| {
            check_version(r.version.as_ref())?;
            let range = r.capacity_range.unwrap_or_default();
            let args = CreateVolume {
                name: r.name,
                required_bytes: range.required_bytes,
                limit_bytes: range.limit_bytes,
                capabilities: capabilities("volume_capabilities", &r.volume_capabilities)
                    .map_err(errors::create_volume)?,
                parameters: r.parameters.into_iter().collect(),
                ..Default::default()
            };
            let v = e.create_volume(args).map_err(errors::create_volume)?;
            Ok(csi::create_volume_response::Result {
                volume_info: Some(info(&v)),
            })
        });
        reply!(CreateVolumeResponse, create_volume_response, out.await)
    }

    async fn delete_volume(
        &self,
        req: Request<csi::DeleteVolumeRequest>,
    ) -> Reply<csi::DeleteVolumeResponse> {
        let r = req.into_inner();
        let out = run(&self.0.engine, move |e| {
            check_version(r.version.as_ref())?;
            // The draft answers VOLUME_DOES_NOT_EXIST for an unknown volume (v0.1.0 made it OK).
            let v = resolve(e, r.volume_handle.as_ref(), Rpc::DeleteVolume)?;
            e.delete_volume(&v.id).map_err(errors::delete_volume)?;
            Ok(csi::delete_volume_response::Result {})
        });
        reply!(DeleteVolumeResponse, delete_volume_response, out.await)
    }

    async fn controller_publish_volume(
        &self,
        req: Request<csi::ControllerPublishVolumeRequest>,
    ) -> Reply<csi::ControllerPublishVolumeResponse> {
        let r = req.into_inner();
        let out = run(&self.0.engine, move |e| {
            check_version(r.version.as_ref())?;
            require(r.volume_handle.is_some(), "volume_handle")?;
            require(r.node_id.is_some(), "node_id")?;
            require(r.volume_capability.is_some(), "volume_capability")?;
            let v = resolve(e, r.volume_handle.as_ref(), Rpc::ControllerPublish)?;
            let node = match (&r.node_id, node_of(r.node_id.as_ref())) {
                (None, _) => return Err(errors::missing("node_id")),
                (Some(_), None) => {
                    let err = EngineError::invalid(
                        "node_id",
                        format!("NodeId.values must carry {NODE_KEY:?}"),
                    );
                    return Err(errors::controller_publish(err, vec![]));
                }
                (Some(_), Some(n)) => n,
            };
            let cap = capability("volume_capability", r.volume_capability.as_ref())
                .map_err(|err| errors::controller_publish(err, vec![]))?;
            match e.attach(&v.id, &node, &cap, r.readonly) {
                Ok(ctx) => Ok(csi::controller_publish_volume_response::Result {
                    publish_volume_info: Some(csi::PublishVolumeInfo {
                        values: ctx.into_iter().collect(),
                    }),
                }),
                Err(err) => {
                    let attached = e
                        .get_volume(&v.id)
                        .map(|v| v.attachments.keys().map(|n| node_id(n)).collect());
                    Err(errors::controller_publish(
                        err,
                        attached.unwrap_or_default(),
                    ))
                }
            }
        });
        reply!(
            ControllerPublishVolumeResponse,
            controller_publish_volume_response,
            out.await
        )
    }

    async fn controller_unpublish_volume(
        &self,
        req: Request<csi::ControllerUnpublishVolumeRequest>,
    ) -> Reply<csi::ControllerUnpublishVolumeResponse> {
        let r = req.into_inner();
        let out = run(&self.0.engine, move |e| {
            check_version(r.version.as_ref())?;
            let v = resolve(e, r.volume_handle.as_ref(), Rpc::ControllerUnpublish)?;
            // An absent NodeId means "from every node", which this plugin supports.
            let node = node_of(r.node_id.as_ref()).unwrap_or_default();
            if r.node_id.is_some() && node.is_empty() {
                return Err(errors::controller_unpublish(EngineError::not_found(
                    ObjectKind::Node,
                    "",
                )));
            }
            if !node.is_empty() && !e.knows_node(&node) {
                return Err(errors::controller_unpublish(EngineError::not_found(
                    ObjectKind::Node,
                    node,
                )));
            }
            if !node.is_empty() && !v.attachments.contains_key(&node) {
                // The draft reports this instead of treating it as already done.
                return Err(errors::controller_unpublish(EngineError::precondition(
                    Precondition::Other,
                    format!("volume {:?} is not attached to node {node:?}", v.id),
                )));
            }
            e.detach(&v.id, &node)
                .map_err(errors::controller_unpublish)?;
            Ok(csi::controller_unpublish_volume_response::Result {})
        });
        reply!(
            ControllerUnpublishVolumeResponse,
            controller_unpublish_volume_response,
            out.await
        )
    }

    async fn validate_volume_capabilities(
        &self,
        req: Request<csi::ValidateVolumeCapabilitiesRequest>,
    ) -> Reply<csi::ValidateVolumeCapabilitiesResponse> {
        let r = req.into_inner();
        let out = run(&self.0.engine, move |e| {
            check_version(r.version.as_ref())?;
            let vi = r
                .volume_info
                .as_ref()
                .ok_or_else(|| errors::missing("volume_info"))?;
            require(!r.volume_capabilities.is_empty(), "volume_capabilities")?;
            let v = resolve(e, vi.handle.as_ref(), Rpc::Validate)?;
            let caps = capabilities("volume_capabilities", &r.volume_capabilities)
                .map_err(errors::validate)?;
            let ok = e.validate(&v.id, &caps).map_err(errors::validate)?;
            Ok(csi::validate_volume_capabilities_response::Result {
                supported: ok,
                message: if ok {
                    String::new()
                } else {
                    "the volume's access type does not match".into()
                },
            })
        });
        reply!(
            ValidateVolumeCapabilitiesResponse,
            validate_volume_capabilities_response,
            out.await
        )
    }

    async fn list_volumes(
        &self,
        req: Request<csi::ListVolumesRequest>,
    ) -> Reply<csi::ListVolumesResponse> {
        use csi::list_volumes_response::{result::Entry, Result};
        let r = req.into_inner();
        let out = run(&self.0.engine, move |e| {
            check_version(r.version.as_ref())?;
            let page = e
                .list_volumes(r.max_entries as usize, &r.starting_token)
                .map_err(|err| errors::general_from(&err))?;
            let entries = page
                .entries
                .iter()
                .map(|v| Entry {
                    volume_info: Some(info(v)),
                })
                .collect();
            Ok(Result {
                entries,
                next_token: page.next_token,
            })
        });
        reply!(ListVolumesResponse, list_volumes_response, out.await)
    }

    async fn get_capacity(
        &self,
        req: Request<csi::GetCapacityRequest>,
    ) -> Reply<csi::GetCapacityResponse> {
        let r = req.into_inner();
        let out = run(&self.0.engine, move |e| {
            check_version(r.version.as_ref())?;
            if !r.volume_capabilities.is_empty() {
                capabilities("volume_capabilities", &r.volume_capabilities)
                    .map_err(|err| errors::general_from(&err))?;
            }
            let params = r.parameters.into_iter().collect();
            rules::check_parameters("parameters", &params, rules::MUTABLE)
                .map_err(|err| errors::general_from(&err))?;
            Ok(csi::get_capacity_response::Result {
                available_capacity: e.available(),
            })
        });
        reply!(GetCapacityResponse, get_capacity_response, out.await)
    }

    async fn controller_get_capabilities(
        &self,
        req: Request<csi::ControllerGetCapabilitiesRequest>,
    ) -> Reply<csi::ControllerGetCapabilitiesResponse> {
        use csi::controller_service_capability::{rpc::Type as T, Rpc, Type};
        let out = check_version(req.get_ref().version.as_ref()).map(|()| {
            let capabilities = [
                T::CreateDeleteVolume,
                T::PublishUnpublishVolume,
                T::ListVolumes,
                T::GetCapacity,
            ]
            .iter()
            .map(|t| csi::ControllerServiceCapability {
                r#type: Some(Type::Rpc(Rpc { r#type: *t as i32 })),
            })
            .collect();
            csi::controller_get_capabilities_response::Result { capabilities }
        });
        reply!(
            ControllerGetCapabilitiesResponse,
            controller_get_capabilities_response,
            out
        )
    }
}
