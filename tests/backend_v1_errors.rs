//! The error rows of the CSI v1 per-RPC tables for the Controller service, each provoked for
//! real against the backend (Node rows and concurrency: `backend_v1_node_errors.rs`).

use csi_gateway_test_support as support;

use std::collections::HashMap;

use csi::controller_client::ControllerClient;
use csi::node_client::NodeClient;
use csi::volume_capability::{access_mode::Mode, AccessMode, AccessType, BlockVolume, MountVolume};
use csi_gateway::dialect::proto::v1 as csi;
use support::{assert_code, Backend, Options};
use tonic::transport::Channel;
use tonic::Code;

const GI: i64 = 1 << 30;

fn mount(mode: Mode) -> csi::VolumeCapability {
    csi::VolumeCapability {
        access_mode: Some(AccessMode { mode: mode as i32 }),
        access_type: Some(AccessType::Mount(MountVolume::default())),
    }
}

fn block() -> csi::VolumeCapability {
    csi::VolumeCapability {
        access_mode: Some(AccessMode {
            mode: Mode::SingleNodeWriter as i32,
        }),
        access_type: Some(AccessType::Block(BlockVolume {})),
    }
}

fn create_req(name: &str, cap: csi::VolumeCapability, required: i64) -> csi::CreateVolumeRequest {
    csi::CreateVolumeRequest {
        name: name.into(),
        capacity_range: Some(csi::CapacityRange {
            required_bytes: required,
            limit_bytes: 0,
        }),
        volume_capabilities: vec![cap],
        ..Default::default()
    }
}

async fn setup(opts: Options) -> (Backend, ControllerClient<Channel>, NodeClient<Channel>) {
    let b = Backend::start(opts).await;
    let ch = b.channel().await;
    (b, ControllerClient::new(ch.clone()), NodeClient::new(ch))
}

async fn create(
    c: &mut ControllerClient<Channel>,
    name: &str,
    cap: csi::VolumeCapability,
) -> String {
    c.create_volume(create_req(name, cap, GI))
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap()
        .volume_id
}

fn attach(
    id: &str,
    node: &str,
    cap: csi::VolumeCapability,
    readonly: bool,
) -> csi::ControllerPublishVolumeRequest {
    csi::ControllerPublishVolumeRequest {
        volume_id: id.into(),
        node_id: node.into(),
        volume_capability: Some(cap),
        readonly,
        ..Default::default()
    }
}

#[tokio::test]
async fn create_volume_rows() {
    let (_b, mut c, _) = setup(Options::new("v1").arg("--topology=zone=a")).await;
    let cap = mount(Mode::SingleNodeWriter);
    // INVALID_ARGUMENT, naming the field.
    assert_code(
        c.create_volume(create_req("", cap.clone(), GI)).await,
        Code::InvalidArgument,
        "name",
    );
    let mut r = create_req("x", cap.clone(), GI);
    r.volume_capabilities.clear();
    assert_code(
        c.create_volume(r).await,
        Code::InvalidArgument,
        "volume_capabilities",
    );
    let mut r = create_req("x", cap.clone(), GI);
    r.volume_capabilities[0].access_type = None;
    assert_code(
        c.create_volume(r).await,
        Code::InvalidArgument,
        "access_type",
    );
    let mut r = create_req("x", cap.clone(), GI);
    r.volume_capabilities[0].access_mode = Some(AccessMode { mode: 0 });
    assert_code(
        c.create_volume(r).await,
        Code::InvalidArgument,
        "access_mode",
    );
    let mut r = create_req("x", cap.clone(), GI);
    r.volume_capabilities.push(block());
    assert_code(
        c.create_volume(r).await,
        Code::InvalidArgument,
        "volume_capabilities",
    );
    let mut r = create_req("x", cap.clone(), GI);
    r.parameters = HashMap::from([("colour".into(), "red".into())]);
    assert_code(c.create_volume(r).await, Code::InvalidArgument, "colour");
    let mut r = create_req("x", cap.clone(), -1);
    assert_code(
        c.create_volume(r.clone()).await,
        Code::InvalidArgument,
        "required_bytes",
    );
    r.capacity_range = Some(csi::CapacityRange {
        required_bytes: 2 * GI,
        limit_bytes: GI,
    });
    assert_code(
        c.create_volume(r).await,
        Code::InvalidArgument,
        "capacity_range",
    );
    // OUT_OF_RANGE: more than the whole pool could ever hold.
    assert_code(
        c.create_volume(create_req("huge", cap.clone(), 11 * GI))
            .await,
        Code::OutOfRange,
        "pool",
    );
    // RESOURCE_EXHAUSTED: the pool is used up.
    c.create_volume(create_req("big", cap.clone(), 9 * GI))
        .await
        .unwrap();
    assert_code(
        c.create_volume(create_req("more", cap.clone(), 2 * GI))
            .await,
        Code::ResourceExhausted,
        "pool",
    );
    // RESOURCE_EXHAUSTED: cannot be provisioned in the requisite topology.
    let mut r = create_req("elsewhere", cap.clone(), 1);
    r.accessibility_requirements = Some(csi::TopologyRequirement {
        requisite: vec![csi::Topology {
            segments: HashMap::from([("zone".into(), "b".into())]),
        }],
        preferred: vec![],
    });
    assert_code(
        c.create_volume(r).await,
        Code::ResourceExhausted,
        "accessibility_requirements",
    );
    // ALREADY_EXISTS: same name, incompatible capacity / access type.
    let mut r = create_req("big", cap.clone(), 8 * GI);
    r.capacity_range = Some(csi::CapacityRange {
        required_bytes: 8 * GI,
        limit_bytes: 8 * GI,
    });
    assert_code(
        c.create_volume(r).await,
        Code::AlreadyExists,
        "capacity_range",
    );
    // A larger existing volume satisfies a smaller request without a limit: the same volume.
    c.create_volume(create_req("big", cap.clone(), 8 * GI))
        .await
        .unwrap();
    let mut r = create_req("big", block(), 9 * GI);
    r.capacity_range = None;
    assert_code(c.create_volume(r).await, Code::AlreadyExists, "big");
    // NOT_FOUND: content sources that do not exist.
    let mut r = create_req("from-snap", cap.clone(), 1);
    r.volume_content_source = Some(csi::VolumeContentSource {
        r#type: Some(csi::volume_content_source::Type::Snapshot(
            csi::volume_content_source::SnapshotSource {
                snapshot_id: "snap-nope".into(),
            },
        )),
    });
    assert_code(c.create_volume(r).await, Code::NotFound, "snap-nope");
    let mut r = create_req("from-vol", cap.clone(), 1);
    r.volume_content_source = Some(csi::VolumeContentSource {
        r#type: Some(csi::volume_content_source::Type::Volume(
            csi::volume_content_source::VolumeSource {
                volume_id: "vol-nope".into(),
            },
        )),
    });
    assert_code(c.create_volume(r).await, Code::NotFound, "vol-nope");
    // GetCapacity for a topology this plugin cannot reach is 0.
    let cap_req = csi::GetCapacityRequest {
        accessible_topology: Some(csi::Topology {
            segments: HashMap::from([("zone".into(), "b".into())]),
        }),
        ..Default::default()
    };
    assert_eq!(
        c.get_capacity(cap_req)
            .await
            .unwrap()
            .into_inner()
            .available_capacity,
        0
    );
}

#[tokio::test]
async fn content_source_rows() {
    let (_b, mut c, _) = setup(Options::new("v1")).await;
    let src = create(&mut c, "src", mount(Mode::SingleNodeWriter)).await;
    // A block volume cannot be cloned from a mount volume: INVALID_ARGUMENT.
    let mut r = create_req("blk", block(), GI);
    r.volume_content_source = Some(csi::VolumeContentSource {
        r#type: Some(csi::volume_content_source::Type::Volume(
            csi::volume_content_source::VolumeSource {
                volume_id: src.clone(),
            },
        )),
    });
    assert_code(
        c.create_volume(r).await,
        Code::InvalidArgument,
        "volume_content_source",
    );
    // Smaller than the source with a limit: OUT_OF_RANGE.
    let mut r = create_req("small", mount(Mode::SingleNodeWriter), 0);
    r.capacity_range = Some(csi::CapacityRange {
        required_bytes: 0,
        limit_bytes: GI / 2,
    });
    r.volume_content_source = Some(csi::VolumeContentSource {
        r#type: Some(csi::volume_content_source::Type::Volume(
            csi::volume_content_source::VolumeSource { volume_id: src },
        )),
    });
    assert_code(c.create_volume(r).await, Code::OutOfRange, "limit_bytes");
}

#[tokio::test]
async fn delete_and_attach_rows() {
    let (_b, mut c, _) = setup(
        Options::new("v1")
            .arg("--peer-node=node-2")
            .arg("--max-volumes-per-node=2"),
    )
    .await;
    let cap = mount(Mode::SingleNodeWriter);
    let a = create(&mut c, "a", cap.clone()).await;
    assert_code(
        c.delete_volume(csi::DeleteVolumeRequest::default()).await,
        Code::InvalidArgument,
        "volume_id",
    );
    // ControllerPublish argument rows.
    assert_code(
        c.controller_publish_volume(attach("", "node-1", cap.clone(), false))
            .await,
        Code::InvalidArgument,
        "volume_id",
    );
    assert_code(
        c.controller_publish_volume(attach(&a, "", cap.clone(), false))
            .await,
        Code::InvalidArgument,
        "node_id",
    );
    let mut r = attach(&a, "node-1", cap.clone(), false);
    r.volume_capability = None;
    assert_code(
        c.controller_publish_volume(r).await,
        Code::InvalidArgument,
        "volume_capability",
    );
    assert_code(
        c.controller_publish_volume(attach(&a, "node-1", block(), false))
            .await,
        Code::InvalidArgument,
        "volume_capability",
    );
    // NOT_FOUND: volume, node.
    assert_code(
        c.controller_publish_volume(attach("vol-nope", "node-1", cap.clone(), false))
            .await,
        Code::NotFound,
        "vol-nope",
    );
    assert_code(
        c.controller_publish_volume(attach(&a, "node-9", cap.clone(), false))
            .await,
        Code::NotFound,
        "node-9",
    );
    // Attached: a different readonly flag is ALREADY_EXISTS, another node FAILED_PRECONDITION.
    c.controller_publish_volume(attach(&a, "node-1", cap.clone(), false))
        .await
        .unwrap();
    assert_code(
        c.controller_publish_volume(attach(&a, "node-1", cap.clone(), true))
            .await,
        Code::AlreadyExists,
        "readonly",
    );
    assert_code(
        c.controller_publish_volume(attach(&a, "node-2", cap.clone(), false))
            .await,
        Code::FailedPrecondition,
        "node-1",
    );
    // A multi-node volume may be attached to both.
    let m = create(&mut c, "m", mount(Mode::MultiNodeMultiWriter)).await;
    c.controller_publish_volume(attach(
        &m,
        "node-1",
        mount(Mode::MultiNodeMultiWriter),
        false,
    ))
    .await
    .unwrap();
    c.controller_publish_volume(attach(
        &m,
        "node-2",
        mount(Mode::MultiNodeMultiWriter),
        false,
    ))
    .await
    .unwrap();
    // Max volumes per node: node-1 has two.
    let third = create(&mut c, "third", cap.clone()).await;
    assert_code(
        c.controller_publish_volume(attach(&third, "node-1", cap.clone(), false))
            .await,
        Code::ResourceExhausted,
        "maximum",
    );
    // Deleting an attached volume: FAILED_PRECONDITION (in use).
    assert_code(
        c.delete_volume(csi::DeleteVolumeRequest {
            volume_id: a.clone(),
            ..Default::default()
        })
        .await,
        Code::FailedPrecondition,
        "attached",
    );
    // Detach from all nodes (empty node id), then delete works.
    c.controller_unpublish_volume(csi::ControllerUnpublishVolumeRequest {
        volume_id: m.clone(),
        ..Default::default()
    })
    .await
    .unwrap();
    c.delete_volume(csi::DeleteVolumeRequest {
        volume_id: m,
        ..Default::default()
    })
    .await
    .unwrap();
    assert_code(
        c.controller_unpublish_volume(csi::ControllerUnpublishVolumeRequest::default())
            .await,
        Code::InvalidArgument,
        "volume_id",
    );
}

#[tokio::test]
async fn validate_list_expand_modify_snapshot_rows() {
    let (_b, mut c, _) = setup(Options::new("v1").arg("--alpha-get-snapshot")).await;
    let cap = mount(Mode::SingleNodeWriter);
    let a = create(&mut c, "a", cap.clone()).await;
    // ValidateVolumeCapabilities.
    let v = |id: &str, caps: Vec<csi::VolumeCapability>| csi::ValidateVolumeCapabilitiesRequest {
        volume_id: id.into(),
        volume_capabilities: caps,
        ..Default::default()
    };
    assert_code(
        c.validate_volume_capabilities(v("", vec![cap.clone()]))
            .await,
        Code::InvalidArgument,
        "volume_id",
    );
    assert_code(
        c.validate_volume_capabilities(v(&a, vec![])).await,
        Code::InvalidArgument,
        "volume_capabilities",
    );
    assert_code(
        c.validate_volume_capabilities(v("vol-nope", vec![cap.clone()]))
            .await,
        Code::NotFound,
        "vol-nope",
    );
    let ok = c
        .validate_volume_capabilities(v(&a, vec![cap.clone()]))
        .await
        .unwrap()
        .into_inner();
    assert!(ok.confirmed.is_some());
    let no = c
        .validate_volume_capabilities(v(&a, vec![block()]))
        .await
        .unwrap()
        .into_inner();
    assert!(no.confirmed.is_none() && !no.message.is_empty());
    let mut other_params = v(&a, vec![cap.clone()]);
    other_params.parameters = HashMap::from([("tier".into(), "fast".into())]);
    let no = c
        .validate_volume_capabilities(other_params)
        .await
        .unwrap()
        .into_inner();
    assert!(
        no.confirmed.is_none() && no.message.contains("parameters"),
        "{no:?}"
    );
    let mut own_context = v(&a, vec![cap.clone()]);
    own_context.volume_context = HashMap::from([("kind".into(), "mount".into())]);
    let ok = c
        .validate_volume_capabilities(own_context)
        .await
        .unwrap()
        .into_inner();
    assert!(ok.confirmed.is_some(), "{ok:?}");
    // ListVolumes: bad token ABORTED, negative max INVALID_ARGUMENT, paging.
    for n in 0..4 {
        create(&mut c, &format!("p{n}"), cap.clone()).await;
    }
    let list = |max: i32, token: &str| csi::ListVolumesRequest {
        max_entries: max,
        starting_token: token.into(),
    };
    assert_code(
        c.list_volumes(list(0, "garbage")).await,
        Code::Aborted,
        "garbage",
    );
    assert_code(
        c.list_volumes(list(-1, "")).await,
        Code::InvalidArgument,
        "max_entries",
    );
    let mut seen = Vec::new();
    let mut token = String::new();
    loop {
        let page = c.list_volumes(list(2, &token)).await.unwrap().into_inner();
        assert!(page.entries.len() <= 2);
        seen.extend(
            page.entries
                .into_iter()
                .map(|e| e.volume.unwrap().volume_id),
        );
        if page.next_token.is_empty() {
            break;
        }
        token = page.next_token;
    }
    seen.dedup();
    assert_eq!(seen.len(), 5, "paging visits every volume once");
    // Expand rows.
    let exp = |id: &str, req: i64, lim: i64| csi::ControllerExpandVolumeRequest {
        volume_id: id.into(),
        capacity_range: Some(csi::CapacityRange {
            required_bytes: req,
            limit_bytes: lim,
        }),
        ..Default::default()
    };
    assert_code(
        c.controller_expand_volume(exp("", GI, 0)).await,
        Code::InvalidArgument,
        "volume_id",
    );
    let mut no_range = exp(&a, GI, 0);
    no_range.capacity_range = None;
    assert_code(
        c.controller_expand_volume(no_range).await,
        Code::InvalidArgument,
        "capacity_range",
    );
    assert_code(
        c.controller_expand_volume(exp("vol-nope", 2 * GI, 0)).await,
        Code::NotFound,
        "vol-nope",
    );
    assert_code(
        c.controller_expand_volume(exp(&a, 20 * GI, 0)).await,
        Code::OutOfRange,
        "capacity_range",
    );
    let mut wrong_type = exp(&a, 2 * GI, 0);
    wrong_type.volume_capability = Some(block());
    assert_code(
        c.controller_expand_volume(wrong_type).await,
        Code::InvalidArgument,
        "volume_capability",
    );
    // Modify rows.
    let modify = |id: &str, k: &str, val: &str| csi::ControllerModifyVolumeRequest {
        volume_id: id.into(),
        mutable_parameters: HashMap::from([(k.into(), val.into())]),
        ..Default::default()
    };
    assert_code(
        c.controller_modify_volume(modify(&a, "colour", "red"))
            .await,
        Code::InvalidArgument,
        "colour",
    );
    assert_code(
        c.controller_modify_volume(modify(&a, "iops", "lots")).await,
        Code::InvalidArgument,
        "iops",
    );
    assert_code(
        c.controller_modify_volume(modify("vol-nope", "iops", "5"))
            .await,
        Code::NotFound,
        "vol-nope",
    );
    // ControllerGetVolume.
    assert_code(
        c.controller_get_volume(csi::ControllerGetVolumeRequest {
            volume_id: "vol-nope".into(),
        })
        .await,
        Code::NotFound,
        "vol-nope",
    );
    // Snapshot rows.
    let snap = |name: &str, src: &str| csi::CreateSnapshotRequest {
        name: name.into(),
        source_volume_id: src.into(),
        ..Default::default()
    };
    assert_code(
        c.create_snapshot(snap("", &a)).await,
        Code::InvalidArgument,
        "name",
    );
    assert_code(
        c.create_snapshot(snap("s", "")).await,
        Code::InvalidArgument,
        "source_volume_id",
    );
    assert_code(
        c.create_snapshot(snap("s", "vol-nope")).await,
        Code::NotFound,
        "vol-nope",
    );
    c.create_snapshot(snap("s", &a)).await.unwrap();
    let other = create(&mut c, "other", cap.clone()).await;
    assert_code(
        c.create_snapshot(snap("s", &other)).await,
        Code::AlreadyExists,
        "s",
    );
    assert_code(
        c.delete_snapshot(csi::DeleteSnapshotRequest::default())
            .await,
        Code::InvalidArgument,
        "snapshot_id",
    );
    let ls = |sid: &str, vid: &str, tok: &str| csi::ListSnapshotsRequest {
        snapshot_id: sid.into(),
        source_volume_id: vid.into(),
        starting_token: tok.into(),
        ..Default::default()
    };
    assert_code(c.list_snapshots(ls("", "", "9")).await, Code::Aborted, "9");
    assert!(c
        .list_snapshots(ls("snap-nope", "", ""))
        .await
        .unwrap()
        .into_inner()
        .entries
        .is_empty());
    assert_eq!(
        c.list_snapshots(ls("", &a, ""))
            .await
            .unwrap()
            .into_inner()
            .entries
            .len(),
        1
    );
    assert!(c
        .list_snapshots(ls("", &other, ""))
        .await
        .unwrap()
        .into_inner()
        .entries
        .is_empty());
    // Paging and the snapshot_id filter.
    let s2 = c
        .create_snapshot(snap("s2", &other))
        .await
        .unwrap()
        .into_inner()
        .snapshot
        .unwrap();
    let mut page1 = ls("", "", "");
    page1.max_entries = 1;
    let p1 = c.list_snapshots(page1.clone()).await.unwrap().into_inner();
    assert_eq!((p1.entries.len(), p1.next_token.as_str()), (1, "1"));
    page1.starting_token = p1.next_token;
    let p2 = c.list_snapshots(page1).await.unwrap().into_inner();
    assert_eq!((p2.entries.len(), p2.next_token.as_str()), (1, ""));
    assert_ne!(p1.entries[0], p2.entries[0]);
    let only = c
        .list_snapshots(ls(&s2.snapshot_id, "", ""))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(only.entries.len(), 1);
    assert_eq!(
        only.entries[0].snapshot.as_ref().unwrap().snapshot_id,
        s2.snapshot_id
    );
    let mut neg = ls("", "", "");
    neg.max_entries = -1;
    assert_code(
        c.list_snapshots(neg).await,
        Code::InvalidArgument,
        "max_entries",
    );
    assert_code(
        c.get_snapshot(csi::GetSnapshotRequest {
            snapshot_id: "snap-nope".into(),
            ..Default::default()
        })
        .await,
        Code::NotFound,
        "snap-nope",
    );
}
