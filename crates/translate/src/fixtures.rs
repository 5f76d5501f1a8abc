//! Test fixtures: a full hub request and reply for every RPC, every field set to a distinct
//! value, and what each older revision can carry of them.
#![cfg(test)]

use std::collections::HashMap;

use crate::dialect::Dialect;
use crate::hub::{v1, Method, Request as Req, Response as Resp};

pub fn m(tag: &str) -> HashMap<String, String> {
    HashMap::from([
        (format!("{tag}-k1"), format!("{tag}-v1")),
        (format!("{tag}-k2"), format!("{tag}-v2")),
    ])
}

pub fn mount_cap() -> v1::VolumeCapability {
    use v1::volume_capability as c;
    v1::VolumeCapability {
        access_type: Some(c::AccessType::Mount(c::MountVolume {
            fs_type: "ext4".into(),
            mount_flags: vec!["noatime".into(), "ro".into()],
            volume_mount_group: "gid-1000".into(),
        })),
        access_mode: Some(c::AccessMode {
            mode: c::access_mode::Mode::SingleNodeMultiWriter as i32,
        }),
    }
}
pub fn block_cap() -> v1::VolumeCapability {
    use v1::volume_capability as c;
    v1::VolumeCapability {
        access_type: Some(c::AccessType::Block(c::BlockVolume {})),
        access_mode: Some(c::AccessMode {
            mode: c::access_mode::Mode::MultiNodeSingleWriter as i32,
        }),
    }
}
fn topo(z: &str) -> v1::Topology {
    v1::Topology {
        segments: HashMap::from([("zone".to_string(), z.to_string())]),
    }
}
fn volume(id: &str) -> v1::Volume {
    v1::Volume {
        capacity_bytes: 10 << 30,
        volume_id: id.into(),
        volume_context: m("ctx"),
        content_source: Some(v1::VolumeContentSource {
            r#type: Some(v1::volume_content_source::Type::Snapshot(
                v1::volume_content_source::SnapshotSource {
                    snapshot_id: "snap-src".into(),
                },
            )),
        }),
        accessible_topology: vec![topo("z1"), topo("z2")],
    }
}
fn snapshot(id: &str) -> v1::Snapshot {
    v1::Snapshot {
        size_bytes: 5 << 30,
        snapshot_id: id.into(),
        source_volume_id: "vol-src".into(),
        creation_time: Some(prost_types::Timestamp {
            seconds: 1_700_000_000,
            nanos: 123_456_789,
        }),
        ready_to_use: true,
        group_snapshot_id: "group-1".into(),
    }
}

/// A full request of every hub method.
pub fn request(method: Method) -> Req {
    let caps = vec![mount_cap(), block_cap()];
    match method {
        Method::CreateVolume => Req::CreateVolume(v1::CreateVolumeRequest {
            name: "pvc-1".into(),
            capacity_range: Some(v1::CapacityRange {
                required_bytes: 1 << 30,
                limit_bytes: 2 << 30,
            }),
            volume_capabilities: caps,
            parameters: m("param"),
            secrets: m("secret"),
            volume_content_source: volume("x").content_source,
            accessibility_requirements: Some(v1::TopologyRequirement {
                requisite: vec![topo("z1")],
                preferred: vec![topo("z2"), topo("z3")],
            }),
            mutable_parameters: m("mutable"),
        }),
        Method::DeleteVolume => Req::DeleteVolume(v1::DeleteVolumeRequest {
            volume_id: "vol-1".into(),
            secrets: m("secret"),
        }),
        Method::ControllerPublishVolume => {
            Req::ControllerPublishVolume(v1::ControllerPublishVolumeRequest {
                volume_id: "vol-1".into(),
                node_id: "node-1".into(),
                volume_capability: Some(mount_cap()),
                readonly: true,
                secrets: m("secret"),
                volume_context: m("ctx"),
            })
        }
        Method::ControllerUnpublishVolume => {
            Req::ControllerUnpublishVolume(v1::ControllerUnpublishVolumeRequest {
                volume_id: "vol-1".into(),
                node_id: "node-1".into(),
                secrets: m("secret"),
            })
        }
        Method::ValidateVolumeCapabilities => {
            Req::ValidateVolumeCapabilities(v1::ValidateVolumeCapabilitiesRequest {
                volume_id: "vol-1".into(),
                volume_context: m("ctx"),
                volume_capabilities: caps,
                parameters: m("param"),
                secrets: m("secret"),
                mutable_parameters: m("mutable"),
            })
        }
        Method::ListVolumes => Req::ListVolumes(v1::ListVolumesRequest {
            max_entries: 7,
            starting_token: "tok-1".into(),
        }),
        Method::GetCapacity => Req::GetCapacity(v1::GetCapacityRequest {
            volume_capabilities: caps,
            parameters: m("param"),
            accessible_topology: Some(topo("z1")),
        }),
        Method::ControllerGetCapabilities => Req::ControllerGetCapabilities(Default::default()),
        Method::CreateSnapshot => Req::CreateSnapshot(v1::CreateSnapshotRequest {
            source_volume_id: "vol-1".into(),
            name: "snap-1".into(),
            secrets: m("secret"),
            parameters: m("param"),
        }),
        Method::DeleteSnapshot => Req::DeleteSnapshot(v1::DeleteSnapshotRequest {
            snapshot_id: "snap-1".into(),
            secrets: m("secret"),
        }),
        Method::ListSnapshots => Req::ListSnapshots(v1::ListSnapshotsRequest {
            max_entries: 3,
            starting_token: "tok-2".into(),
            source_volume_id: "vol-1".into(),
            snapshot_id: "snap-1".into(),
            secrets: m("secret"),
        }),
        Method::GetPluginCapabilities => Req::GetPluginCapabilities(Default::default()),
        Method::GetPluginInfo => Req::GetPluginInfo(Default::default()),
        Method::Probe => Req::Probe(Default::default()),
        Method::NodeGetCapabilities => Req::NodeGetCapabilities(Default::default()),
        Method::NodeGetInfo => Req::NodeGetInfo(Default::default()),
        Method::NodeStageVolume => Req::NodeStageVolume(v1::NodeStageVolumeRequest {
            volume_id: "vol-1".into(),
            publish_context: m("pub"),
            staging_target_path: "/staging".into(),
            volume_capability: Some(block_cap()),
            secrets: m("secret"),
            volume_context: m("ctx"),
        }),
        Method::NodeUnstageVolume => Req::NodeUnstageVolume(v1::NodeUnstageVolumeRequest {
            volume_id: "vol-1".into(),
            staging_target_path: "/staging".into(),
        }),
        Method::NodePublishVolume => Req::NodePublishVolume(v1::NodePublishVolumeRequest {
            volume_id: "vol-1".into(),
            publish_context: m("pub"),
            staging_target_path: "/staging".into(),
            target_path: "/target".into(),
            volume_capability: Some(mount_cap()),
            readonly: true,
            secrets: m("secret"),
            volume_context: m("ctx"),
        }),
        Method::NodeUnpublishVolume => Req::NodeUnpublishVolume(v1::NodeUnpublishVolumeRequest {
            volume_id: "vol-1".into(),
            target_path: "/target".into(),
        }),
        // v1-only RPCs: an empty request is enough (they are refused before any field is read).
        other => Req::decode(other, &[]).unwrap(),
    }
}

/// A full reply of every hub method.
pub fn response(method: Method) -> Resp {
    use v1::controller_service_capability::rpc::Type as C;
    use v1::node_service_capability::rpc::Type as N;
    use v1::plugin_capability::service::Type as P;
    match method {
        Method::CreateVolume => Resp::CreateVolume(v1::CreateVolumeResponse {
            volume: Some(volume("vol-1")),
        }),
        Method::ControllerPublishVolume => {
            Resp::ControllerPublishVolume(v1::ControllerPublishVolumeResponse {
                publish_context: m("pub"),
            })
        }
        Method::ValidateVolumeCapabilities => {
            Resp::ValidateVolumeCapabilities(v1::ValidateVolumeCapabilitiesResponse {
                confirmed: Some(Default::default()),
                message: "all good".into(),
            })
        }
        Method::ListVolumes => Resp::ListVolumes(v1::ListVolumesResponse {
            entries: vec![
                v1::list_volumes_response::Entry {
                    volume: Some(volume("vol-1")),
                    status: None,
                },
                v1::list_volumes_response::Entry {
                    volume: Some(volume("vol-2")),
                    status: Some(v1::list_volumes_response::VolumeStatus {
                        published_node_ids: vec!["node-1".into()],
                        volume_condition: None,
                    }),
                },
            ],
            next_token: "tok-next".into(),
        }),
        Method::GetCapacity => Resp::GetCapacity(v1::GetCapacityResponse {
            available_capacity: 100 << 30,
            maximum_volume_size: Some(50 << 30),
            minimum_volume_size: Some(1 << 20),
        }),
        Method::ControllerGetCapabilities => {
            Resp::ControllerGetCapabilities(v1::ControllerGetCapabilitiesResponse {
                capabilities: [
                    C::CreateDeleteVolume,
                    C::PublishUnpublishVolume,
                    C::ListVolumes,
                    C::GetCapacity,
                    C::CreateDeleteSnapshot,
                    C::ListSnapshots,
                    C::CloneVolume,
                    C::ExpandVolume,
                    C::ModifyVolume,
                ]
                .into_iter()
                .map(|t| super::capabilities::v1_ctrl_cap(t as i32))
                .collect(),
            })
        }
        Method::CreateSnapshot => Resp::CreateSnapshot(v1::CreateSnapshotResponse {
            snapshot: Some(snapshot("snap-1")),
        }),
        Method::ListSnapshots => Resp::ListSnapshots(v1::ListSnapshotsResponse {
            entries: vec![
                v1::list_snapshots_response::Entry {
                    snapshot: Some(snapshot("snap-1")),
                },
                v1::list_snapshots_response::Entry {
                    snapshot: Some(v1::Snapshot {
                        ready_to_use: false,
                        ..snapshot("snap-2")
                    }),
                },
            ],
            next_token: "tok-snap".into(),
        }),
        Method::GetPluginCapabilities => {
            let mut capabilities: Vec<_> = [
                P::ControllerService,
                P::VolumeAccessibilityConstraints,
                P::GroupControllerService,
            ]
            .into_iter()
            .map(|t| super::capabilities::v1_plugin_cap(t as i32))
            .collect();
            capabilities.push(v1::PluginCapability {
                r#type: Some(v1::plugin_capability::Type::VolumeExpansion(
                    v1::plugin_capability::VolumeExpansion { r#type: 1 },
                )),
            });
            Resp::GetPluginCapabilities(v1::GetPluginCapabilitiesResponse { capabilities })
        }
        Method::GetPluginInfo => Resp::GetPluginInfo(v1::GetPluginInfoResponse {
            name: "example.csi.io".into(),
            vendor_version: "1.2.3".into(),
            manifest: m("manifest"),
        }),
        Method::Probe => Resp::Probe(v1::ProbeResponse { ready: Some(true) }),
        Method::NodeGetCapabilities => Resp::NodeGetCapabilities(v1::NodeGetCapabilitiesResponse {
            capabilities: [N::StageUnstageVolume, N::GetVolumeStats, N::ExpandVolume]
                .into_iter()
                .map(|t| super::capabilities::v1_node_cap(t as i32))
                .collect(),
        }),
        Method::NodeGetInfo => Resp::NodeGetInfo(v1::NodeGetInfoResponse {
            node_id: "node-1".into(),
            max_volumes_per_node: 16,
            accessible_topology: Some(topo("z1")),
        }),
        other => Resp::decode(other, &[]).unwrap(),
    }
}

/// Which hub methods an upstream of `dialect` can serve (possibly through several raw calls).
pub fn served(dialect: Dialect, method: Method) -> bool {
    use Method::*;
    let v0_1 = [
        CreateVolume,
        DeleteVolume,
        ControllerPublishVolume,
        ControllerUnpublishVolume,
        ValidateVolumeCapabilities,
        ListVolumes,
        GetCapacity,
        ControllerGetCapabilities,
        GetPluginCapabilities,
        GetPluginInfo,
        Probe,
        NodeGetCapabilities,
        NodeGetInfo,
        NodePublishVolume,
        NodeUnpublishVolume,
    ];
    let v0_3 = [
        CreateSnapshot,
        DeleteSnapshot,
        ListSnapshots,
        NodeStageVolume,
        NodeUnstageVolume,
    ];
    match dialect {
        Dialect::V1 => true,
        Dialect::V0_3 => v0_1.contains(&method) || v0_3.contains(&method),
        Dialect::V0_1 | Dialect::V0_1Oneof => v0_1.contains(&method),
    }
}

/// Removes from a volume capability what no pre-v1 revision has.
pub fn old_cap(c: &mut v1::VolumeCapability) {
    use v1::volume_capability as vc;
    if let Some(vc::AccessType::Mount(mnt)) = &mut c.access_type {
        mnt.volume_mount_group.clear();
    }
    if let Some(mode) = &mut c.access_mode {
        if mode.mode > 5 {
            mode.mode = vc::access_mode::Mode::SingleNodeWriter as i32;
        }
    }
}

/// The fixture request reduced to what an upstream of `dialect` can carry: what the gateway
/// sends must come back unchanged when the dialect's request is read as a front request.
pub fn carried(dialect: Dialect, req: Req) -> Req {
    let pre_v0_3 = matches!(dialect, Dialect::V0_1 | Dialect::V0_1Oneof);
    match req {
        Req::CreateVolume(mut r) => {
            r.volume_capabilities.iter_mut().for_each(old_cap);
            r.mutable_parameters.clear();
            if pre_v0_3 {
                r.volume_content_source = None;
                r.accessibility_requirements = None;
            }
            Req::CreateVolume(r)
        }
        Req::ControllerPublishVolume(mut r) => {
            r.volume_capability.iter_mut().for_each(old_cap);
            Req::ControllerPublishVolume(r)
        }
        Req::ValidateVolumeCapabilities(mut r) => {
            r.volume_capabilities.iter_mut().for_each(old_cap);
            r.parameters.clear();
            r.mutable_parameters.clear();
            r.secrets.clear();
            Req::ValidateVolumeCapabilities(r)
        }
        Req::GetCapacity(mut r) => {
            r.volume_capabilities.iter_mut().for_each(old_cap);
            if pre_v0_3 {
                r.accessible_topology = None;
            }
            Req::GetCapacity(r)
        }
        Req::ListSnapshots(mut r) => {
            r.secrets.clear();
            Req::ListSnapshots(r)
        }
        Req::NodeStageVolume(mut r) => {
            r.volume_capability.iter_mut().for_each(old_cap);
            Req::NodeStageVolume(r)
        }
        Req::NodePublishVolume(mut r) => {
            r.volume_capability.iter_mut().for_each(old_cap);
            if pre_v0_3 {
                r.staging_target_path.clear();
            }
            Req::NodePublishVolume(r)
        }
        other => other,
    }
}
