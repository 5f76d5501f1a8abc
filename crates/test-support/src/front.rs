//! One client per front dialect behind one interface, so the gateway tests run the same
//! lifecycle in every dialect and compare normalized outcomes. Each method speaks the dialect's
//! own generated types: `version` on v0.1 and the draft, `VolumeHandle` and `NodeID` messages on
//! the draft, whose errors arrive inside an OK reply and are rendered here as proto3 JSON.

use std::collections::HashMap;
use std::path::Path;

use csi_gateway::dialect::proto::{v0_1, v0_1_oneof as draft, v0_3, v1};
use csi_gateway::dialect::Dialect;
use tonic::transport::Channel;
use tonic::Code;

/// A failed call: a gRPC status, or (draft) the `Error` branch of an OK reply.
#[derive(Debug)]
pub struct Failure {
    pub code: Code,
    /// The draft's `Error` as proto3 JSON, e.g. `{"delete_volume_error":{"error_code":"VOLUME_DOES_NOT_EXIST",…}}`.
    pub draft: Option<String>,
    pub message: String,
}

impl Failure {
    /// True when the failure is `code` (gRPC dialects) or names `draft_code` (draft).
    pub fn is(&self, code: Code, draft_code: &str) -> bool {
        match &self.draft {
            Some(json) => json.contains(draft_code),
            None => self.code == code,
        }
    }
}

impl From<tonic::Status> for Failure {
    fn from(s: tonic::Status) -> Failure {
        Failure {
            code: s.code(),
            draft: None,
            message: s.message().to_string(),
        }
    }
}

pub type Outcome<T> = Result<T, Failure>;

/// How a request's `volume_capability` is sent: whole, absent, or without `access_mode`.
#[derive(Clone, Copy)]
enum Cap {
    Full,
    Absent,
    NoAccessMode,
}

impl Cap {
    fn shape<C>(self, mut full: C, strip_access_mode: impl FnOnce(&mut C)) -> Option<C> {
        match self {
            Cap::Full => Some(full),
            Cap::Absent => None,
            Cap::NoAccessMode => {
                strip_access_mode(&mut full);
                Some(full)
            }
        }
    }
}

/// A volume as the front sees it.
#[derive(Clone, Debug)]
pub struct Volume {
    pub id: String,
    /// volume_context (v1), attributes (v0.x) or the draft handle's metadata.
    pub context: HashMap<String, String>,
    pub capacity: u64,
}

impl Volume {
    /// The same volume as a client that knows only its id sends it (no context).
    pub fn id_only(&self) -> Volume {
        Volume {
            context: HashMap::new(),
            ..self.clone()
        }
    }
}

/// A node id as the front sees it: a string, or the draft's `NodeID` values.
#[derive(Clone, Debug, PartialEq)]
pub enum Node {
    Id(String),
    Values(HashMap<String, String>),
}

impl Node {
    /// The plain node name inside, for assertions.
    pub fn name(&self) -> String {
        match self {
            Node::Id(s) => s.clone(),
            Node::Values(v) => v
                .get("node_id")
                .cloned()
                .unwrap_or_else(|| format!("{v:?}")),
        }
    }
}

pub struct Front {
    pub dialect: Dialect,
    ch: Channel,
}

fn draft_failure(e: draft::Error) -> Failure {
    use prost::Message;
    let pool = Dialect::V0_1Oneof.descriptor_pool();
    let desc = pool.get_message_by_name("csi.Error").unwrap();
    let msg = prost_reflect::DynamicMessage::decode(desc, e.encode_to_vec().as_slice()).unwrap();
    let options = prost_reflect::SerializeOptions::new().use_proto_field_name(true);
    let json = msg
        .serialize_with_options(serde_json::value::Serializer, &options)
        .unwrap()
        .to_string();
    Failure {
        code: Code::Ok,
        draft: Some(json.clone()),
        message: json,
    }
}

/// The `Result` branch of a draft reply, or its `Error` as a failure.
macro_rules! draft_result {
    ($reply:expr, $module:ident) => {
        match $reply.reply {
            Some(draft::$module::Reply::Result(r)) => Ok(r),
            Some(draft::$module::Reply::Error(e)) => Err(draft_failure(e)),
            None => Err(Failure {
                code: Code::Internal,
                draft: Some("{}".into()),
                message: "reply with neither branch".into(),
            }),
        }
    };
}

/// The RPC type of a capability, in every dialect's nesting (`Type::Rpc(RPC { type })`).
macro_rules! rpc_type {
    ($cap:expr, $ty:path) => {
        match &$cap.r#type {
            Some($ty(r)) => Some(r.r#type),
            None => None,
        }
    };
}

fn version_v01() -> Option<v0_1::Version> {
    Some(v0_1::Version {
        major: 0,
        minor: 1,
        patch: 0,
    })
}
fn version_draft() -> Option<draft::Version> {
    Some(draft::Version {
        major: 0,
        minor: 1,
        patch: 0,
    })
}

/// A single-node-writer mount capability, as every v1 create in the tests asks.
pub fn cap_v1() -> v1::VolumeCapability {
    use v1::volume_capability::{access_mode::Mode, AccessMode, AccessType, MountVolume};
    v1::VolumeCapability {
        access_type: Some(AccessType::Mount(MountVolume::default())),
        access_mode: Some(AccessMode {
            mode: Mode::SingleNodeWriter as i32,
        }),
    }
}
pub fn cap_v03() -> v0_3::VolumeCapability {
    use v0_3::volume_capability::{access_mode::Mode, AccessMode, AccessType, MountVolume};
    v0_3::VolumeCapability {
        access_type: Some(AccessType::Mount(MountVolume::default())),
        access_mode: Some(AccessMode {
            mode: Mode::SingleNodeWriter as i32,
        }),
    }
}
fn cap_v01() -> v0_1::VolumeCapability {
    use v0_1::volume_capability::{access_mode::Mode, AccessMode, AccessType, MountVolume};
    v0_1::VolumeCapability {
        access_type: Some(AccessType::Mount(MountVolume::default())),
        access_mode: Some(AccessMode {
            mode: Mode::SingleNodeWriter as i32,
        }),
    }
}
fn cap_draft() -> draft::VolumeCapability {
    use draft::volume_capability::{access_mode::Mode, AccessMode, AccessType, MountVolume};
    draft::VolumeCapability {
        access_type: Some(AccessType::Mount(MountVolume::default())),
        access_mode: Some(AccessMode {
            mode: Mode::SingleNodeWriter as i32,
        }),
    }
}

fn handle(v: &Volume) -> Option<draft::VolumeHandle> {
    Some(draft::VolumeHandle {
        id: v.id.clone(),
        metadata: v.context.clone(),
    })
}

fn draft_node(n: &Node) -> Option<draft::NodeId> {
    match n {
        Node::Values(v) => Some(draft::NodeId { values: v.clone() }),
        Node::Id(s) => Some(draft::NodeId {
            values: [("node_id".to_string(), s.clone())].into(),
        }),
    }
}

fn path(p: &Path) -> String {
    p.display().to_string()
}

impl Front {
    pub fn new(dialect: Dialect, ch: Channel) -> Front {
        Front { dialect, ch }
    }

    /// Whether the front's dialect has staging (NodeStageVolume).
    pub fn channel(&self) -> Channel {
        self.ch.clone()
    }

    pub fn stages(&self) -> bool {
        matches!(self.dialect, Dialect::V1 | Dialect::V0_3)
    }

    pub async fn plugin_name(&self) -> Outcome<String> {
        let ch = self.ch.clone();
        Ok(match self.dialect {
            Dialect::V1 => {
                v1::identity_client::IdentityClient::new(ch)
                    .get_plugin_info(v1::GetPluginInfoRequest {})
                    .await?
                    .into_inner()
                    .name
            }
            Dialect::V0_3 => {
                v0_3::identity_client::IdentityClient::new(ch)
                    .get_plugin_info(v0_3::GetPluginInfoRequest {})
                    .await?
                    .into_inner()
                    .name
            }
            Dialect::V0_1 => {
                v0_1::identity_client::IdentityClient::new(ch)
                    .get_plugin_info(v0_1::GetPluginInfoRequest {
                        version: version_v01(),
                    })
                    .await?
                    .into_inner()
                    .name
            }
            Dialect::V0_1Oneof => {
                let r = draft::identity_client::IdentityClient::new(ch)
                    .get_plugin_info(draft::GetPluginInfoRequest {
                        version: version_draft(),
                    })
                    .await?
                    .into_inner();
                draft_result!(r, get_plugin_info_response)?.name
            }
        })
    }

    /// Ready, in the dialect's own probe(s).
    pub async fn probe(&self) -> Outcome<bool> {
        let ch = self.ch.clone();
        Ok(match self.dialect {
            Dialect::V1 => {
                let r = v1::identity_client::IdentityClient::new(ch)
                    .probe(v1::ProbeRequest {})
                    .await?
                    .into_inner();
                r.ready.unwrap_or(true)
            }
            Dialect::V0_3 => {
                let r = v0_3::identity_client::IdentityClient::new(ch)
                    .probe(v0_3::ProbeRequest {})
                    .await?
                    .into_inner();
                r.ready.unwrap_or(true)
            }
            Dialect::V0_1 => {
                v0_1::controller_client::ControllerClient::new(ch.clone())
                    .controller_probe(v0_1::ControllerProbeRequest {
                        version: version_v01(),
                    })
                    .await?;
                v0_1::node_client::NodeClient::new(ch)
                    .node_probe(v0_1::NodeProbeRequest {
                        version: version_v01(),
                    })
                    .await?;
                true
            }
            Dialect::V0_1Oneof => {
                let r = draft::node_client::NodeClient::new(ch)
                    .probe_node(draft::ProbeNodeRequest {
                        version: version_draft(),
                    })
                    .await?
                    .into_inner();
                draft_result!(r, probe_node_response)?;
                true
            }
        })
    }

    /// Controller capability names (the dialect's enum names, e.g. `CREATE_DELETE_VOLUME`).
    pub async fn controller_caps(&self) -> Outcome<Vec<String>> {
        let ch = self.ch.clone();
        let numbers: Vec<i32> = match self.dialect {
            Dialect::V1 => v1::controller_client::ControllerClient::new(ch)
                .controller_get_capabilities(v1::ControllerGetCapabilitiesRequest {})
                .await?
                .into_inner()
                .capabilities
                .iter()
                .filter_map(|c| rpc_type!(c, v1::controller_service_capability::Type::Rpc))
                .collect(),
            Dialect::V0_3 => v0_3::controller_client::ControllerClient::new(ch)
                .controller_get_capabilities(v0_3::ControllerGetCapabilitiesRequest {})
                .await?
                .into_inner()
                .capabilities
                .iter()
                .filter_map(|c| rpc_type!(c, v0_3::controller_service_capability::Type::Rpc))
                .collect(),
            Dialect::V0_1 => v0_1::controller_client::ControllerClient::new(ch)
                .controller_get_capabilities(v0_1::ControllerGetCapabilitiesRequest {
                    version: version_v01(),
                })
                .await?
                .into_inner()
                .capabilities
                .iter()
                .filter_map(|c| rpc_type!(c, v0_1::controller_service_capability::Type::Rpc))
                .collect(),
            Dialect::V0_1Oneof => {
                let r = draft::controller_client::ControllerClient::new(ch)
                    .controller_get_capabilities(draft::ControllerGetCapabilitiesRequest {
                        version: version_draft(),
                    })
                    .await?
                    .into_inner();
                draft_result!(r, controller_get_capabilities_response)?
                    .capabilities
                    .iter()
                    .filter_map(|c| rpc_type!(c, draft::controller_service_capability::Type::Rpc))
                    .collect()
            }
        };
        Ok(numbers
            .into_iter()
            .map(|n| self.enum_name("ControllerServiceCapability.RPC.Type", n))
            .collect())
    }

    /// Node capability names.
    pub async fn node_caps(&self) -> Outcome<Vec<String>> {
        let ch = self.ch.clone();
        let numbers: Vec<i32> = match self.dialect {
            Dialect::V1 => v1::node_client::NodeClient::new(ch)
                .node_get_capabilities(v1::NodeGetCapabilitiesRequest {})
                .await?
                .into_inner()
                .capabilities
                .iter()
                .filter_map(|c| rpc_type!(c, v1::node_service_capability::Type::Rpc))
                .collect(),
            Dialect::V0_3 => v0_3::node_client::NodeClient::new(ch)
                .node_get_capabilities(v0_3::NodeGetCapabilitiesRequest {})
                .await?
                .into_inner()
                .capabilities
                .iter()
                .filter_map(|c| rpc_type!(c, v0_3::node_service_capability::Type::Rpc))
                .collect(),
            Dialect::V0_1 => v0_1::node_client::NodeClient::new(ch)
                .node_get_capabilities(v0_1::NodeGetCapabilitiesRequest {
                    version: version_v01(),
                })
                .await?
                .into_inner()
                .capabilities
                .iter()
                .filter_map(|c| rpc_type!(c, v0_1::node_service_capability::Type::Rpc))
                .collect(),
            Dialect::V0_1Oneof => {
                let r = draft::node_client::NodeClient::new(ch)
                    .node_get_capabilities(draft::NodeGetCapabilitiesRequest {
                        version: version_draft(),
                    })
                    .await?
                    .into_inner();
                draft_result!(r, node_get_capabilities_response)?
                    .capabilities
                    .iter()
                    .filter_map(|c| rpc_type!(c, draft::node_service_capability::Type::Rpc))
                    .collect()
            }
        };
        Ok(numbers
            .into_iter()
            .map(|n| self.enum_name("NodeServiceCapability.RPC.Type", n))
            .collect())
    }

    fn enum_name(&self, name: &str, n: i32) -> String {
        let full = format!("{}.{name}", self.dialect.package());
        let e = self
            .dialect
            .descriptor_pool()
            .get_enum_by_name(&full)
            .unwrap();
        e.get_value(n)
            .map(|v| v.name().to_string())
            .unwrap_or_else(|| n.to_string())
    }

    /// The node's id: NodeGetInfo (v1, v0.3), GetNodeID (v0.1, draft).
    pub async fn node_id(&self) -> Outcome<Node> {
        let ch = self.ch.clone();
        Ok(match self.dialect {
            Dialect::V1 => Node::Id(
                v1::node_client::NodeClient::new(ch)
                    .node_get_info(v1::NodeGetInfoRequest {})
                    .await?
                    .into_inner()
                    .node_id,
            ),
            Dialect::V0_3 => Node::Id(
                v0_3::node_client::NodeClient::new(ch)
                    .node_get_info(v0_3::NodeGetInfoRequest {})
                    .await?
                    .into_inner()
                    .node_id,
            ),
            Dialect::V0_1 => Node::Id(
                v0_1::node_client::NodeClient::new(ch)
                    .get_node_id(v0_1::GetNodeIdRequest {
                        version: version_v01(),
                    })
                    .await?
                    .into_inner()
                    .node_id,
            ),
            Dialect::V0_1Oneof => {
                let r = draft::node_client::NodeClient::new(ch)
                    .get_node_id(draft::GetNodeIdRequest {
                        version: version_draft(),
                    })
                    .await?
                    .into_inner();
                Node::Values(
                    draft_result!(r, get_node_id_response)?
                        .node_id
                        .unwrap_or_default()
                        .values,
                )
            }
        })
    }

    /// CreateVolume of a mount volume of at least `bytes`, with `secrets` as the dialect's
    /// credentials.
    pub async fn create(
        &self,
        name: &str,
        bytes: u64,
        secrets: &HashMap<String, String>,
    ) -> Outcome<Volume> {
        let ch = self.ch.clone();
        Ok(match self.dialect {
            Dialect::V1 => {
                let v = v1::controller_client::ControllerClient::new(ch)
                    .create_volume(v1::CreateVolumeRequest {
                        name: name.into(),
                        capacity_range: Some(v1::CapacityRange {
                            required_bytes: bytes as i64,
                            limit_bytes: 0,
                        }),
                        volume_capabilities: vec![cap_v1()],
                        secrets: secrets.clone(),
                        ..Default::default()
                    })
                    .await?
                    .into_inner()
                    .volume
                    .unwrap_or_default();
                Volume {
                    id: v.volume_id,
                    context: v.volume_context,
                    capacity: v.capacity_bytes as u64,
                }
            }
            Dialect::V0_3 => {
                let v = v0_3::controller_client::ControllerClient::new(ch)
                    .create_volume(v0_3::CreateVolumeRequest {
                        name: name.into(),
                        capacity_range: Some(v0_3::CapacityRange {
                            required_bytes: bytes as i64,
                            limit_bytes: 0,
                        }),
                        volume_capabilities: vec![cap_v03()],
                        controller_create_secrets: secrets.clone(),
                        ..Default::default()
                    })
                    .await?
                    .into_inner()
                    .volume
                    .unwrap_or_default();
                Volume {
                    id: v.id,
                    context: v.attributes,
                    capacity: v.capacity_bytes as u64,
                }
            }
            Dialect::V0_1 => {
                let v = v0_1::controller_client::ControllerClient::new(ch)
                    .create_volume(v0_1::CreateVolumeRequest {
                        version: version_v01(),
                        name: name.into(),
                        capacity_range: Some(v0_1::CapacityRange {
                            required_bytes: bytes,
                            limit_bytes: 0,
                        }),
                        volume_capabilities: vec![cap_v01()],
                        user_credentials: secrets.clone(),
                        ..Default::default()
                    })
                    .await?
                    .into_inner()
                    .volume_info
                    .unwrap_or_default();
                Volume {
                    id: v.id,
                    context: v.attributes,
                    capacity: v.capacity_bytes,
                }
            }
            Dialect::V0_1Oneof => {
                let r = draft::controller_client::ControllerClient::new(ch)
                    .create_volume(draft::CreateVolumeRequest {
                        version: version_draft(),
                        name: name.into(),
                        capacity_range: Some(draft::CapacityRange {
                            required_bytes: bytes,
                            limit_bytes: 0,
                        }),
                        volume_capabilities: vec![cap_draft()],
                        user_credentials: Some(draft::Credentials {
                            data: secrets.clone(),
                        }),
                        ..Default::default()
                    })
                    .await?
                    .into_inner();
                let info = draft_result!(r, create_volume_response)?
                    .volume_info
                    .unwrap_or_default();
                let h = info.handle.unwrap_or_default();
                Volume {
                    id: h.id,
                    context: h.metadata,
                    capacity: info.capacity_bytes,
                }
            }
        })
    }

    pub async fn delete(&self, v: &Volume, secrets: &HashMap<String, String>) -> Outcome<()> {
        let ch = self.ch.clone();
        match self.dialect {
            Dialect::V1 => {
                v1::controller_client::ControllerClient::new(ch)
                    .delete_volume(v1::DeleteVolumeRequest {
                        volume_id: v.id.clone(),
                        secrets: secrets.clone(),
                    })
                    .await?;
            }
            Dialect::V0_3 => {
                v0_3::controller_client::ControllerClient::new(ch)
                    .delete_volume(v0_3::DeleteVolumeRequest {
                        volume_id: v.id.clone(),
                        controller_delete_secrets: secrets.clone(),
                    })
                    .await?;
            }
            Dialect::V0_1 => {
                v0_1::controller_client::ControllerClient::new(ch)
                    .delete_volume(v0_1::DeleteVolumeRequest {
                        version: version_v01(),
                        volume_id: v.id.clone(),
                        user_credentials: secrets.clone(),
                    })
                    .await?;
            }
            Dialect::V0_1Oneof => {
                let r = draft::controller_client::ControllerClient::new(ch)
                    .delete_volume(draft::DeleteVolumeRequest {
                        version: version_draft(),
                        volume_handle: handle(v),
                        user_credentials: Some(draft::Credentials {
                            data: secrets.clone(),
                        }),
                    })
                    .await?
                    .into_inner();
                draft_result!(r, delete_volume_response)?;
            }
        }
        Ok(())
    }

    /// ControllerPublishVolume to `node`; returns the publish context.
    pub async fn controller_publish(
        &self,
        v: &Volume,
        node: &Node,
    ) -> Outcome<HashMap<String, String>> {
        self.controller_publish_to(v, Some(node)).await
    }

    /// ControllerPublishVolume without a node id (OPTIONAL only in the draft).
    pub async fn controller_publish_without_node(&self, v: &Volume) -> Outcome<()> {
        self.controller_publish_to(v, None).await.map(drop)
    }

    async fn controller_publish_to(
        &self,
        v: &Volume,
        node: Option<&Node>,
    ) -> Outcome<HashMap<String, String>> {
        let ch = self.ch.clone();
        Ok(match self.dialect {
            Dialect::V1 => {
                v1::controller_client::ControllerClient::new(ch)
                    .controller_publish_volume(v1::ControllerPublishVolumeRequest {
                        volume_id: v.id.clone(),
                        node_id: node.map(Node::name).unwrap_or_default(),
                        volume_capability: Some(cap_v1()),
                        volume_context: v.context.clone(),
                        ..Default::default()
                    })
                    .await?
                    .into_inner()
                    .publish_context
            }
            Dialect::V0_3 => {
                v0_3::controller_client::ControllerClient::new(ch)
                    .controller_publish_volume(v0_3::ControllerPublishVolumeRequest {
                        volume_id: v.id.clone(),
                        node_id: node.map(Node::name).unwrap_or_default(),
                        volume_capability: Some(cap_v03()),
                        volume_attributes: v.context.clone(),
                        ..Default::default()
                    })
                    .await?
                    .into_inner()
                    .publish_info
            }
            Dialect::V0_1 => {
                v0_1::controller_client::ControllerClient::new(ch)
                    .controller_publish_volume(v0_1::ControllerPublishVolumeRequest {
                        version: version_v01(),
                        volume_id: v.id.clone(),
                        node_id: node.map(Node::name).unwrap_or_default(),
                        volume_capability: Some(cap_v01()),
                        volume_attributes: v.context.clone(),
                        ..Default::default()
                    })
                    .await?
                    .into_inner()
                    .publish_volume_info
            }
            Dialect::V0_1Oneof => {
                let r = draft::controller_client::ControllerClient::new(ch)
                    .controller_publish_volume(draft::ControllerPublishVolumeRequest {
                        version: version_draft(),
                        volume_handle: handle(v),
                        node_id: node.and_then(draft_node),
                        volume_capability: Some(cap_draft()),
                        ..Default::default()
                    })
                    .await?
                    .into_inner();
                draft_result!(r, controller_publish_volume_response)?
                    .publish_volume_info
                    .unwrap_or_default()
                    .values
            }
        })
    }

    pub async fn controller_unpublish(&self, v: &Volume, node: &Node) -> Outcome<()> {
        let ch = self.ch.clone();
        match self.dialect {
            Dialect::V1 => {
                v1::controller_client::ControllerClient::new(ch)
                    .controller_unpublish_volume(v1::ControllerUnpublishVolumeRequest {
                        volume_id: v.id.clone(),
                        node_id: node.name(),
                        ..Default::default()
                    })
                    .await?;
            }
            Dialect::V0_3 => {
                v0_3::controller_client::ControllerClient::new(ch)
                    .controller_unpublish_volume(v0_3::ControllerUnpublishVolumeRequest {
                        volume_id: v.id.clone(),
                        node_id: node.name(),
                        ..Default::default()
                    })
                    .await?;
            }
            Dialect::V0_1 => {
                v0_1::controller_client::ControllerClient::new(ch)
                    .controller_unpublish_volume(v0_1::ControllerUnpublishVolumeRequest {
                        version: version_v01(),
                        volume_id: v.id.clone(),
                        node_id: node.name(),
                        ..Default::default()
                    })
                    .await?;
            }
            Dialect::V0_1Oneof => {
                let r = draft::controller_client::ControllerClient::new(ch)
                    .controller_unpublish_volume(draft::ControllerUnpublishVolumeRequest {
                        version: version_draft(),
                        volume_handle: handle(v),
                        node_id: draft_node(node),
                        ..Default::default()
                    })
                    .await?
                    .into_inner();
                draft_result!(r, controller_unpublish_volume_response)?;
            }
        }
        Ok(())
    }

    /// NodeStageVolume (v1 and v0.3 fronts only).
    pub async fn node_stage(
        &self,
        v: &Volume,
        publish: &HashMap<String, String>,
        staging: &Path,
    ) -> Outcome<()> {
        let ch = self.ch.clone();
        match self.dialect {
            Dialect::V1 => {
                v1::node_client::NodeClient::new(ch)
                    .node_stage_volume(v1::NodeStageVolumeRequest {
                        volume_id: v.id.clone(),
                        publish_context: publish.clone(),
                        staging_target_path: path(staging),
                        volume_capability: Some(cap_v1()),
                        volume_context: v.context.clone(),
                        ..Default::default()
                    })
                    .await?;
            }
            Dialect::V0_3 => {
                v0_3::node_client::NodeClient::new(ch)
                    .node_stage_volume(v0_3::NodeStageVolumeRequest {
                        volume_id: v.id.clone(),
                        publish_info: publish.clone(),
                        staging_target_path: path(staging),
                        volume_capability: Some(cap_v03()),
                        volume_attributes: v.context.clone(),
                        ..Default::default()
                    })
                    .await?;
            }
            _ => panic!("{} has no NodeStageVolume", self.dialect),
        }
        Ok(())
    }

    pub async fn node_unstage(&self, v: &Volume, staging: &Path) -> Outcome<()> {
        let ch = self.ch.clone();
        match self.dialect {
            Dialect::V1 => {
                v1::node_client::NodeClient::new(ch)
                    .node_unstage_volume(v1::NodeUnstageVolumeRequest {
                        volume_id: v.id.clone(),
                        staging_target_path: path(staging),
                    })
                    .await?;
            }
            Dialect::V0_3 => {
                v0_3::node_client::NodeClient::new(ch)
                    .node_unstage_volume(v0_3::NodeUnstageVolumeRequest {
                        volume_id: v.id.clone(),
                        staging_target_path: path(staging),
                    })
                    .await?;
            }
            _ => panic!("{} has no NodeUnstageVolume", self.dialect),
        }
        Ok(())
    }

    pub async fn node_publish(
        &self,
        v: &Volume,
        publish: &HashMap<String, String>,
        staging: Option<&Path>,
        target: &Path,
    ) -> Outcome<()> {
        self.node_publish_with(v, publish, staging, target, Cap::Full)
            .await
    }

    /// NodePublishVolume without its REQUIRED `volume_capability`.
    pub async fn node_publish_without_capability(&self, v: &Volume, target: &Path) -> Outcome<()> {
        self.node_publish_with(v, &HashMap::new(), None, target, Cap::Absent)
            .await
    }

    /// NodePublishVolume whose capability lacks its REQUIRED `access_mode`.
    pub async fn node_publish_without_access_mode(&self, v: &Volume, target: &Path) -> Outcome<()> {
        self.node_publish_with(v, &HashMap::new(), None, target, Cap::NoAccessMode)
            .await
    }

    async fn node_publish_with(
        &self,
        v: &Volume,
        publish: &HashMap<String, String>,
        staging: Option<&Path>,
        target: &Path,
        capability: Cap,
    ) -> Outcome<()> {
        let ch = self.ch.clone();
        let staging = staging.map(path).unwrap_or_default();
        match self.dialect {
            Dialect::V1 => {
                v1::node_client::NodeClient::new(ch)
                    .node_publish_volume(v1::NodePublishVolumeRequest {
                        volume_id: v.id.clone(),
                        publish_context: publish.clone(),
                        staging_target_path: staging,
                        target_path: path(target),
                        volume_capability: capability.shape(cap_v1(), |c| c.access_mode = None),
                        volume_context: v.context.clone(),
                        ..Default::default()
                    })
                    .await?;
            }
            Dialect::V0_3 => {
                v0_3::node_client::NodeClient::new(ch)
                    .node_publish_volume(v0_3::NodePublishVolumeRequest {
                        volume_id: v.id.clone(),
                        publish_info: publish.clone(),
                        staging_target_path: staging,
                        target_path: path(target),
                        volume_capability: capability.shape(cap_v03(), |c| c.access_mode = None),
                        volume_attributes: v.context.clone(),
                        ..Default::default()
                    })
                    .await?;
            }
            Dialect::V0_1 => {
                v0_1::node_client::NodeClient::new(ch)
                    .node_publish_volume(v0_1::NodePublishVolumeRequest {
                        version: version_v01(),
                        volume_id: v.id.clone(),
                        publish_volume_info: publish.clone(),
                        target_path: path(target),
                        volume_capability: capability.shape(cap_v01(), |c| c.access_mode = None),
                        volume_attributes: v.context.clone(),
                        ..Default::default()
                    })
                    .await?;
            }
            Dialect::V0_1Oneof => {
                let r = draft::node_client::NodeClient::new(ch)
                    .node_publish_volume(draft::NodePublishVolumeRequest {
                        version: version_draft(),
                        volume_handle: handle(v),
                        publish_volume_info: Some(draft::PublishVolumeInfo {
                            values: publish.clone(),
                        }),
                        target_path: path(target),
                        volume_capability: capability.shape(cap_draft(), |c| c.access_mode = None),
                        ..Default::default()
                    })
                    .await?
                    .into_inner();
                draft_result!(r, node_publish_volume_response)?;
            }
        }
        Ok(())
    }

    pub async fn node_unpublish(&self, v: &Volume, target: &Path) -> Outcome<()> {
        let ch = self.ch.clone();
        match self.dialect {
            Dialect::V1 => {
                v1::node_client::NodeClient::new(ch)
                    .node_unpublish_volume(v1::NodeUnpublishVolumeRequest {
                        volume_id: v.id.clone(),
                        target_path: path(target),
                    })
                    .await?;
            }
            Dialect::V0_3 => {
                v0_3::node_client::NodeClient::new(ch)
                    .node_unpublish_volume(v0_3::NodeUnpublishVolumeRequest {
                        volume_id: v.id.clone(),
                        target_path: path(target),
                    })
                    .await?;
            }
            Dialect::V0_1 => {
                v0_1::node_client::NodeClient::new(ch)
                    .node_unpublish_volume(v0_1::NodeUnpublishVolumeRequest {
                        version: version_v01(),
                        volume_id: v.id.clone(),
                        target_path: path(target),
                        ..Default::default()
                    })
                    .await?;
            }
            Dialect::V0_1Oneof => {
                let r = draft::node_client::NodeClient::new(ch)
                    .node_unpublish_volume(draft::NodeUnpublishVolumeRequest {
                        version: version_draft(),
                        volume_handle: handle(v),
                        target_path: path(target),
                        ..Default::default()
                    })
                    .await?
                    .into_inner();
                draft_result!(r, node_unpublish_volume_response)?;
            }
        }
        Ok(())
    }

    /// ListVolumes from `token` (max 1 entry): the ids and the next token.
    pub async fn list_volumes(&self, token: &str) -> Outcome<(Vec<String>, String)> {
        let ch = self.ch.clone();
        let token = token.to_string();
        Ok(match self.dialect {
            Dialect::V1 => {
                let r = v1::controller_client::ControllerClient::new(ch)
                    .list_volumes(v1::ListVolumesRequest {
                        max_entries: 1,
                        starting_token: token,
                    })
                    .await?
                    .into_inner();
                let ids = r
                    .entries
                    .into_iter()
                    .filter_map(|e| e.volume)
                    .map(|v| v.volume_id);
                (ids.collect(), r.next_token)
            }
            Dialect::V0_3 => {
                let r = v0_3::controller_client::ControllerClient::new(ch)
                    .list_volumes(v0_3::ListVolumesRequest {
                        max_entries: 1,
                        starting_token: token,
                    })
                    .await?
                    .into_inner();
                let ids = r.entries.into_iter().filter_map(|e| e.volume).map(|v| v.id);
                (ids.collect(), r.next_token)
            }
            Dialect::V0_1 => {
                let r = v0_1::controller_client::ControllerClient::new(ch)
                    .list_volumes(v0_1::ListVolumesRequest {
                        version: version_v01(),
                        max_entries: 1,
                        starting_token: token,
                    })
                    .await?
                    .into_inner();
                let ids = r
                    .entries
                    .into_iter()
                    .filter_map(|e| e.volume_info)
                    .map(|v| v.id);
                (ids.collect(), r.next_token)
            }
            Dialect::V0_1Oneof => {
                let r = draft::controller_client::ControllerClient::new(ch)
                    .list_volumes(draft::ListVolumesRequest {
                        version: version_draft(),
                        max_entries: 1,
                        starting_token: token,
                    })
                    .await?
                    .into_inner();
                let r = draft_result!(r, list_volumes_response)?;
                let ids = r
                    .entries
                    .into_iter()
                    .filter_map(|e| e.volume_info?.handle)
                    .map(|h| h.id);
                (ids.collect(), r.next_token)
            }
        })
    }
}
