//! v0.3 field checks (called by the round trips in `translate::tests`) and v0.3-only cases.

use prost::Message;
use tonic::Code;

use super::generated::{snapshot_from_hub, snapshot_to_hub};
use super::{front_reply, front_request, node_get_id_reply};
use crate::dialect::proto::v0_3 as d;
use crate::fixtures::{self, m};
use crate::hub::{v1, Method, Request as Req, Response as Resp};
use crate::FrontCall;

fn mount(c: &Option<d::VolumeCapability>) -> (String, Vec<String>, i32) {
    let c = c.clone().unwrap();
    let Some(d::volume_capability::AccessType::Mount(mnt)) = c.access_type else {
        panic!("mount expected")
    };
    (mnt.fs_type, mnt.mount_flags, c.access_mode.unwrap().mode)
}

/// Every mapped field of the v0.3 request the gateway sent for the fixture `req`.
pub(crate) fn check_request(req: &Req, path: &str, bytes: &[u8]) {
    let method = req.method();
    let expected_path = format!("/csi.v0.{}/{}", method.service(), method.name());
    assert_eq!(path, expected_path);
    let mnt = (
        "ext4".to_string(),
        vec!["noatime".to_string(), "ro".to_string()],
        1,
    );
    match method {
        Method::CreateVolume => {
            let x = d::CreateVolumeRequest::decode(bytes).unwrap();
            assert_eq!(x.name, "pvc-1");
            assert_eq!(
                x.capacity_range,
                Some(d::CapacityRange {
                    required_bytes: 1 << 30,
                    limit_bytes: 2 << 30
                })
            );
            assert_eq!(x.volume_capabilities.len(), 2);
            assert_eq!(x.parameters, m("param"));
            assert_eq!(x.controller_create_secrets, m("secret"));
            let Some(d::volume_content_source::Type::Snapshot(s)) =
                x.volume_content_source.unwrap().r#type
            else {
                panic!()
            };
            assert_eq!(s.id, "snap-src");
            let t = x.accessibility_requirements.unwrap();
            assert_eq!((t.requisite.len(), t.preferred.len()), (1, 2));
            assert_eq!(t.preferred[1].segments["zone"], "z3");
        }
        Method::DeleteVolume => {
            let x = d::DeleteVolumeRequest::decode(bytes).unwrap();
            assert_eq!(
                (x.volume_id.as_str(), x.controller_delete_secrets),
                ("vol-1", m("secret"))
            );
        }
        Method::ControllerPublishVolume => {
            let x = d::ControllerPublishVolumeRequest::decode(bytes).unwrap();
            assert_eq!(
                (x.volume_id.as_str(), x.node_id.as_str(), x.readonly),
                ("vol-1", "node-1", true)
            );
            assert_eq!(x.controller_publish_secrets, m("secret"));
            assert_eq!(x.volume_attributes, m("ctx"));
            assert_eq!(mount(&x.volume_capability), mnt);
        }
        Method::ControllerUnpublishVolume => {
            let x = d::ControllerUnpublishVolumeRequest::decode(bytes).unwrap();
            assert_eq!(
                (x.volume_id.as_str(), x.node_id.as_str()),
                ("vol-1", "node-1")
            );
            assert_eq!(x.controller_unpublish_secrets, m("secret"));
        }
        Method::ValidateVolumeCapabilities => {
            let x = d::ValidateVolumeCapabilitiesRequest::decode(bytes).unwrap();
            assert_eq!(x.volume_id, "vol-1");
            assert_eq!(x.volume_attributes, m("ctx"));
            assert_eq!(x.volume_capabilities.len(), 2);
            assert!(x.accessible_topology.is_empty());
        }
        Method::ListVolumes => {
            let x = d::ListVolumesRequest::decode(bytes).unwrap();
            assert_eq!((x.max_entries, x.starting_token.as_str()), (7, "tok-1"));
        }
        Method::GetCapacity => {
            let x = d::GetCapacityRequest::decode(bytes).unwrap();
            assert_eq!(x.parameters, m("param"));
            assert_eq!(x.volume_capabilities.len(), 2);
            assert_eq!(x.accessible_topology.unwrap().segments["zone"], "z1");
        }
        Method::CreateSnapshot => {
            let x = d::CreateSnapshotRequest::decode(bytes).unwrap();
            assert_eq!(
                (x.source_volume_id.as_str(), x.name.as_str()),
                ("vol-1", "snap-1")
            );
            assert_eq!(
                (x.create_snapshot_secrets, x.parameters),
                (m("secret"), m("param"))
            );
        }
        Method::DeleteSnapshot => {
            let x = d::DeleteSnapshotRequest::decode(bytes).unwrap();
            assert_eq!(
                (x.snapshot_id.as_str(), x.delete_snapshot_secrets),
                ("snap-1", m("secret"))
            );
        }
        Method::ListSnapshots => {
            let x = d::ListSnapshotsRequest::decode(bytes).unwrap();
            assert_eq!(
                (
                    x.max_entries,
                    x.starting_token.as_str(),
                    x.source_volume_id.as_str(),
                    x.snapshot_id.as_str()
                ),
                (3, "tok-2", "vol-1", "snap-1")
            );
        }
        Method::NodeStageVolume => {
            let x = d::NodeStageVolumeRequest::decode(bytes).unwrap();
            assert_eq!(
                (x.volume_id.as_str(), x.staging_target_path.as_str()),
                ("vol-1", "/staging")
            );
            assert_eq!(
                (x.publish_info, x.node_stage_secrets, x.volume_attributes),
                (m("pub"), m("secret"), m("ctx"))
            );
            assert!(matches!(
                x.volume_capability.unwrap().access_type,
                Some(d::volume_capability::AccessType::Block(_))
            ));
        }
        Method::NodeUnstageVolume => {
            let x = d::NodeUnstageVolumeRequest::decode(bytes).unwrap();
            assert_eq!(
                (x.volume_id.as_str(), x.staging_target_path.as_str()),
                ("vol-1", "/staging")
            );
        }
        Method::NodePublishVolume => {
            let x = d::NodePublishVolumeRequest::decode(bytes).unwrap();
            assert_eq!(
                (
                    x.volume_id.as_str(),
                    x.staging_target_path.as_str(),
                    x.target_path.as_str(),
                    x.readonly
                ),
                ("vol-1", "/staging", "/target", true)
            );
            assert_eq!(
                (x.publish_info, x.node_publish_secrets, x.volume_attributes),
                (m("pub"), m("secret"), m("ctx"))
            );
            assert_eq!(mount(&x.volume_capability), mnt);
        }
        Method::NodeUnpublishVolume => {
            let x = d::NodeUnpublishVolumeRequest::decode(bytes).unwrap();
            assert_eq!(
                (x.volume_id.as_str(), x.target_path.as_str()),
                ("vol-1", "/target")
            );
        }
        // Empty requests.
        _ => assert!(bytes.is_empty(), "{method}"),
    }
}

/// Every mapped field of the v0.3 reply the gateway sent for the fixture `resp`.
pub(crate) fn check_reply(resp: &Resp, bytes: &[u8]) {
    match resp.method() {
        Method::CreateVolume => {
            let v = d::CreateVolumeResponse::decode(bytes)
                .unwrap()
                .volume
                .unwrap();
            assert_eq!(
                (v.capacity_bytes, v.id.as_str(), v.attributes.clone()),
                (10 << 30, "vol-1", m("ctx"))
            );
            assert_eq!(v.accessible_topology.len(), 2);
            let Some(d::volume_content_source::Type::Snapshot(s)) =
                v.content_source.unwrap().r#type
            else {
                panic!()
            };
            assert_eq!(s.id, "snap-src");
        }
        Method::ControllerPublishVolume => {
            assert_eq!(
                d::ControllerPublishVolumeResponse::decode(bytes)
                    .unwrap()
                    .publish_info,
                m("pub")
            );
        }
        Method::ValidateVolumeCapabilities => {
            let x = d::ValidateVolumeCapabilitiesResponse::decode(bytes).unwrap();
            assert_eq!((x.supported, x.message.as_str()), (true, "all good"));
        }
        Method::ListVolumes => {
            let x = d::ListVolumesResponse::decode(bytes).unwrap();
            assert_eq!(x.entries.len(), 2);
            assert_eq!(x.entries[1].volume.as_ref().unwrap().id, "vol-2");
            assert_eq!(x.next_token, "tok-next");
        }
        Method::GetCapacity => assert_eq!(
            d::GetCapacityResponse::decode(bytes)
                .unwrap()
                .available_capacity,
            100 << 30
        ),
        Method::ControllerGetCapabilities => {
            let x = d::ControllerGetCapabilitiesResponse::decode(bytes).unwrap();
            let types: Vec<i32> = x
                .capabilities
                .iter()
                .map(|c| match c.r#type.unwrap() {
                    d::controller_service_capability::Type::Rpc(r) => r.r#type,
                })
                .collect();
            // CLONE_VOLUME, EXPAND_VOLUME, MODIFY_VOLUME (v1) are filtered out.
            assert_eq!(types, vec![1, 2, 3, 4, 5, 6]);
        }
        Method::NodeGetCapabilities => {
            let x = d::NodeGetCapabilitiesResponse::decode(bytes).unwrap();
            assert_eq!(x.capabilities.len(), 1, "only STAGE_UNSTAGE_VOLUME");
        }
        Method::GetPluginCapabilities => {
            let x = d::GetPluginCapabilitiesResponse::decode(bytes).unwrap();
            let types: Vec<i32> = x
                .capabilities
                .iter()
                .map(|c| match c.r#type.unwrap() {
                    d::plugin_capability::Type::Service(s) => s.r#type,
                })
                .collect();
            assert_eq!(
                types,
                vec![1, 2],
                "no group controller, no volume expansion"
            );
        }
        Method::CreateSnapshot => {
            let s = d::CreateSnapshotResponse::decode(bytes)
                .unwrap()
                .snapshot
                .unwrap();
            assert_eq!(
                (s.id.as_str(), s.source_volume_id.as_str(), s.size_bytes),
                ("snap-1", "vol-src", 5 << 30)
            );
            assert_eq!(s.created_at, 1_700_000_000_123_456_789);
            assert_eq!(
                s.status.unwrap().r#type,
                d::snapshot_status::Type::Ready as i32
            );
        }
        Method::ListSnapshots => {
            let x = d::ListSnapshotsResponse::decode(bytes).unwrap();
            let st: Vec<i32> = x
                .entries
                .iter()
                .map(|e| e.snapshot.clone().unwrap().status.unwrap().r#type)
                .collect();
            assert_eq!(st, vec![1, 2], "READY, UPLOADING");
            assert_eq!(x.next_token, "tok-snap");
        }
        Method::GetPluginInfo => {
            let x = d::GetPluginInfoResponse::decode(bytes).unwrap();
            assert_eq!(
                (x.name.as_str(), x.vendor_version.as_str(), x.manifest),
                ("example.csi.io", "1.2.3", m("manifest"))
            );
        }
        Method::Probe => assert_eq!(d::ProbeResponse::decode(bytes).unwrap().ready, Some(true)),
        Method::NodeGetInfo => {
            let x = d::NodeGetInfoResponse::decode(bytes).unwrap();
            assert_eq!((x.node_id.as_str(), x.max_volumes_per_node), ("node-1", 16));
            assert_eq!(x.accessible_topology.unwrap().segments["zone"], "z1");
        }
        _ => assert!(bytes.is_empty(), "{}", resp.method()),
    }
}

#[test]
fn node_get_id_is_node_get_info() {
    let FrontCall::Hub(req) = front_request("NodeGetId", &[]).unwrap() else {
        panic!()
    };
    assert_eq!(*req, Req::NodeGetInfo(Default::default()));
    let bytes = front_reply("NodeGetId", fixtures::response(Method::NodeGetInfo)).unwrap();
    assert_eq!(
        d::NodeGetIdResponse::decode(bytes.as_slice())
            .unwrap()
            .node_id,
        "node-1"
    );
    let back = node_get_id_reply(&bytes).unwrap();
    assert_eq!(
        back,
        Resp::NodeGetInfo(v1::NodeGetInfoResponse {
            node_id: "node-1".into(),
            ..Default::default()
        })
    );
}

#[test]
fn snapshot_time_and_status() {
    let s = d::Snapshot {
        size_bytes: 1,
        id: "s".into(),
        source_volume_id: "v".into(),
        created_at: -1_500_000_000,
        status: Some(d::SnapshotStatus {
            r#type: d::snapshot_status::Type::ErrorUploading as i32,
            details: "x".into(),
        }),
    };
    let h = snapshot_to_hub(s).unwrap();
    assert_eq!(
        h.creation_time,
        Some(prost_types::Timestamp {
            seconds: -2,
            nanos: 500_000_000
        })
    );
    assert!(!h.ready_to_use);
    assert_eq!(snapshot_from_hub(h).unwrap().created_at, -1_500_000_000);
    let far = v1::Snapshot {
        creation_time: Some(prost_types::Timestamp {
            seconds: i64::MAX / 2,
            nanos: 0,
        }),
        ..Default::default()
    };
    assert_eq!(snapshot_from_hub(far).unwrap_err().code(), Code::OutOfRange);
    let none = snapshot_to_hub(d::Snapshot::default()).unwrap();
    assert_eq!((none.creation_time, none.ready_to_use), (None, false));
}

#[test]
fn v0_3_front_only_fields() {
    let body = d::ValidateVolumeCapabilitiesRequest {
        volume_id: "v".into(),
        accessible_topology: vec![d::Topology::default()],
        ..Default::default()
    }
    .encode_to_vec();
    let err = front_request("ValidateVolumeCapabilities", &body).unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(err.message().contains("accessible_topology"));
    assert_eq!(
        front_request("NodeGetVolumeStats", &[]).unwrap_err().code(),
        Code::Unimplemented
    );
    let err = front_reply("CreateVolume", fixtures::response(Method::Probe)).unwrap_err();
    assert_eq!(err.code(), Code::Internal);
}
