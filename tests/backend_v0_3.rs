//! The reference backend served as CSI v0.3 (`--dialect v0.3`, package `csi.v0`): lifecycle,
//! idempotency, v0.3's error rows and semantics, and state across restart and SIGKILL.

use csi_gateway_test_support as support;

use std::fs;
use std::time::Duration;

use csi::controller_client::ControllerClient;
use csi::identity_client::IdentityClient;
use csi::node_client::NodeClient;
use csi::volume_capability::{access_mode::Mode, AccessMode, AccessType, BlockVolume, MountVolume};
use csi_gateway::dialect::proto::v0_3 as csi;
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

async fn start(opts: Options) -> (Backend, ControllerClient<Channel>, NodeClient<Channel>) {
    let b = Backend::start(opts).await;
    let ch = b.channel().await;
    (b, ControllerClient::new(ch.clone()), NodeClient::new(ch))
}

fn attach(id: &str, node: &str, cap: csi::VolumeCapability) -> csi::ControllerPublishVolumeRequest {
    csi::ControllerPublishVolumeRequest {
        volume_id: id.into(),
        node_id: node.into(),
        volume_capability: Some(cap),
        ..Default::default()
    }
}

fn stage(
    id: &str,
    path: &std::path::Path,
    cap: csi::VolumeCapability,
) -> csi::NodeStageVolumeRequest {
    csi::NodeStageVolumeRequest {
        volume_id: id.into(),
        staging_target_path: path.display().to_string(),
        volume_capability: Some(cap),
        ..Default::default()
    }
}

fn publish(
    id: &str,
    staging: &std::path::Path,
    target: &std::path::Path,
    cap: csi::VolumeCapability,
) -> csi::NodePublishVolumeRequest {
    csi::NodePublishVolumeRequest {
        volume_id: id.into(),
        staging_target_path: staging.display().to_string(),
        target_path: target.display().to_string(),
        volume_capability: Some(cap),
        ..Default::default()
    }
}

#[tokio::test]
async fn lifecycle() {
    let (b, mut c, mut n) = start(Options::new("v0.3").arg("--topology=zone=a")).await;
    let mut id = IdentityClient::new(b.channel().await);
    assert_eq!(
        id.get_plugin_info(csi::GetPluginInfoRequest {})
            .await
            .unwrap()
            .into_inner()
            .name,
        "reference.csi-gateway.dev"
    );
    assert_eq!(
        id.probe(csi::ProbeRequest {})
            .await
            .unwrap()
            .into_inner()
            .ready,
        Some(true)
    );
    let caps = id
        .get_plugin_capabilities(csi::GetPluginCapabilitiesRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        caps.capabilities.len(),
        2,
        "CONTROLLER_SERVICE and ACCESSIBILITY_CONSTRAINTS: {caps:?}"
    );
    let ctrl = c
        .controller_get_capabilities(csi::ControllerGetCapabilitiesRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        ctrl.capabilities.len(),
        6,
        "v0.3 has six controller capabilities, all served"
    );
    let node = n
        .node_get_capabilities(csi::NodeGetCapabilitiesRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(node.capabilities.len(), 1, "STAGE_UNSTAGE_VOLUME");
    // NodeGetId is deprecated in v0.3 and still served for v0.2 peers.
    #[allow(deprecated)]
    let node_id = n
        .node_get_id(csi::NodeGetIdRequest {})
        .await
        .unwrap()
        .into_inner()
        .node_id;
    assert_eq!(node_id, "node-1");
    let info = n
        .node_get_info(csi::NodeGetInfoRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(info.node_id, "node-1");
    assert_eq!(
        info.accessible_topology
            .unwrap()
            .segments
            .get("zone")
            .map(String::as_str),
        Some("a")
    );

    let cap = mount(Mode::SingleNodeWriter);
    let v = c
        .create_volume(create_req("vol", cap.clone(), GI))
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap();
    assert_eq!(v.attributes.get("kind").map(String::as_str), Some("mount"));
    assert_eq!(v.accessible_topology.len(), 1);
    let again = c
        .create_volume(create_req("vol", cap.clone(), GI))
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap();
    assert_eq!(again.id, v.id, "idempotent create");
    let ctx = c
        .controller_publish_volume(attach(&v.id, "node-1", cap.clone()))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        ctx.publish_info.get("attachedNode").map(String::as_str),
        Some("node-1")
    );
    let (staging, target) = (b.path("s"), b.path("t"));
    for _ in 0..2 {
        n.node_stage_volume(stage(&v.id, &staging, cap.clone()))
            .await
            .unwrap();
        n.node_publish_volume(publish(&v.id, &staging, &target, cap.clone()))
            .await
            .unwrap();
    }
    fs::write(target.join("f"), b"v0.3").unwrap();
    assert_eq!(
        fs::read(b.data_dir.join("volumes").join(&v.id).join("f")).unwrap(),
        b"v0.3"
    );

    // Snapshot: created_at in ns and the READY status; restore copies the data.
    let s = c
        .create_snapshot(csi::CreateSnapshotRequest {
            source_volume_id: v.id.clone(),
            name: "snap".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .snapshot
        .unwrap();
    assert_eq!(
        s.status.unwrap().r#type,
        csi::snapshot_status::Type::Ready as i32
    );
    assert!(
        s.created_at > 1_500_000_000_000_000_000,
        "nanoseconds since the epoch: {}",
        s.created_at
    );
    let mut restore = create_req("restored", cap.clone(), 0);
    restore.volume_content_source = Some(csi::VolumeContentSource {
        r#type: Some(csi::volume_content_source::Type::Snapshot(
            csi::volume_content_source::SnapshotSource { id: s.id.clone() },
        )),
    });
    let r = c
        .create_volume(restore)
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap();
    assert!(r.content_source.is_some());
    assert_eq!(
        fs::read(b.data_dir.join("volumes").join(&r.id).join("f")).unwrap(),
        b"v0.3"
    );
    let list = c
        .list_volumes(csi::ListVolumesRequest {
            max_entries: 1,
            starting_token: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!((list.entries.len(), list.next_token.as_str()), (1, "1"));
    let snaps = c
        .list_snapshots(csi::ListSnapshotsRequest {
            source_volume_id: v.id.clone(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(snaps.into_inner().entries.len(), 1);
    let cap_left = c
        .get_capacity(csi::GetCapacityRequest::default())
        .await
        .unwrap()
        .into_inner()
        .available_capacity;
    assert_eq!(cap_left, 10 * GI - 3 * GI);

    // Block volumes work too.
    let blk = c
        .create_volume(create_req("blk", block(), GI))
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap();
    assert_eq!(
        fs::metadata(b.data_dir.join("volumes").join(&blk.id))
            .unwrap()
            .len(),
        GI as u64
    );

    // Tear down, twice each (idempotent).
    for _ in 0..2 {
        n.node_unpublish_volume(csi::NodeUnpublishVolumeRequest {
            volume_id: v.id.clone(),
            target_path: target.display().to_string(),
        })
        .await
        .unwrap();
        let unstage = csi::NodeUnstageVolumeRequest {
            volume_id: v.id.clone(),
            staging_target_path: staging.display().to_string(),
        };
        n.node_unstage_volume(unstage).await.unwrap();
        let detach = csi::ControllerUnpublishVolumeRequest {
            volume_id: v.id.clone(),
            node_id: "node-1".into(),
            ..Default::default()
        };
        c.controller_unpublish_volume(detach).await.unwrap();
    }
    assert!(!target.exists());
    for _ in 0..2 {
        for vid in [&v.id, &r.id, &blk.id] {
            c.delete_volume(csi::DeleteVolumeRequest {
                volume_id: vid.clone(),
                ..Default::default()
            })
            .await
            .unwrap();
        }
        c.delete_snapshot(csi::DeleteSnapshotRequest {
            snapshot_id: s.id.clone(),
            ..Default::default()
        })
        .await
        .unwrap();
    }
    assert_eq!(
        c.get_capacity(csi::GetCapacityRequest::default())
            .await
            .unwrap()
            .into_inner()
            .available_capacity,
        10 * GI
    );
}

#[tokio::test]
async fn error_rows() {
    let (b, mut c, mut n) = start(
        Options::new("v0.3")
            .arg("--peer-node=node-2")
            .arg("--max-volumes-per-node=1"),
    )
    .await;
    let cap = mount(Mode::SingleNodeWriter);
    assert_code(
        c.create_volume(create_req("", cap.clone(), GI)).await,
        Code::InvalidArgument,
        "name",
    );
    // Access modes newer than v0.3 do not exist here.
    let mut newer = cap.clone();
    newer.access_mode = Some(AccessMode { mode: 6 });
    assert_code(
        c.create_volume(create_req("x", newer, GI)).await,
        Code::InvalidArgument,
        "access_mode",
    );
    assert_code(
        c.create_volume(create_req("x", cap.clone(), 20 * GI)).await,
        Code::OutOfRange,
        "pool",
    );
    let a = c
        .create_volume(create_req("a", cap.clone(), GI))
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap()
        .id;
    assert_code(
        c.create_volume(create_req("a", block(), GI)).await,
        Code::AlreadyExists,
        "a",
    );
    let mut r = create_req("from", cap.clone(), GI);
    r.volume_content_source = Some(csi::VolumeContentSource {
        r#type: Some(csi::volume_content_source::Type::Snapshot(
            csi::volume_content_source::SnapshotSource {
                id: "snap-nope".into(),
            },
        )),
    });
    assert_code(c.create_volume(r).await, Code::NotFound, "snap-nope");
    // ControllerPublish rows.
    assert_code(
        c.controller_publish_volume(attach("vol-nope", "node-1", cap.clone()))
            .await,
        Code::NotFound,
        "vol-nope",
    );
    assert_code(
        c.controller_publish_volume(attach(&a, "node-9", cap.clone()))
            .await,
        Code::NotFound,
        "node-9",
    );
    c.controller_publish_volume(attach(&a, "node-1", cap.clone()))
        .await
        .unwrap();
    let mut ro = attach(&a, "node-1", cap.clone());
    ro.readonly = true;
    assert_code(
        c.controller_publish_volume(ro).await,
        Code::AlreadyExists,
        "readonly",
    );
    assert_code(
        c.controller_publish_volume(attach(&a, "node-2", cap.clone()))
            .await,
        Code::FailedPrecondition,
        "node-1",
    );
    let bvol = c
        .create_volume(create_req("b", cap.clone(), GI))
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap()
        .id;
    assert_code(
        c.controller_publish_volume(attach(&bvol, "node-1", cap.clone()))
            .await,
        Code::ResourceExhausted,
        "maximum",
    );
    // v0.3 semantics: ControllerUnpublish of an unknown volume or node is NOT_FOUND.
    let detach = |v: &str, node: &str| csi::ControllerUnpublishVolumeRequest {
        volume_id: v.into(),
        node_id: node.into(),
        ..Default::default()
    };
    assert_code(
        c.controller_unpublish_volume(detach("vol-nope", "node-1"))
            .await,
        Code::NotFound,
        "vol-nope",
    );
    assert_code(
        c.controller_unpublish_volume(detach(&a, "node-9")).await,
        Code::NotFound,
        "node-9",
    );
    // Not attached to a known node: OK.
    c.controller_unpublish_volume(detach(&a, "node-2"))
        .await
        .unwrap();
    assert_code(
        c.delete_volume(csi::DeleteVolumeRequest {
            volume_id: a.clone(),
            ..Default::default()
        })
        .await,
        Code::FailedPrecondition,
        "attached",
    );
    // Validate.
    let val = |id: &str, caps| csi::ValidateVolumeCapabilitiesRequest {
        volume_id: id.into(),
        volume_capabilities: caps,
        ..Default::default()
    };
    assert_code(
        c.validate_volume_capabilities(val("vol-nope", vec![cap.clone()]))
            .await,
        Code::NotFound,
        "vol-nope",
    );
    assert!(
        c.validate_volume_capabilities(val(&a, vec![cap.clone()]))
            .await
            .unwrap()
            .into_inner()
            .supported
    );
    assert!(
        !c.validate_volume_capabilities(val(&a, vec![block()]))
            .await
            .unwrap()
            .into_inner()
            .supported
    );
    assert_code(
        c.list_volumes(csi::ListVolumesRequest {
            max_entries: 0,
            starting_token: "zz".into(),
        })
        .await,
        Code::Aborted,
        "zz",
    );
    // Snapshots.
    let snap = |name: &str, src: &str| csi::CreateSnapshotRequest {
        name: name.into(),
        source_volume_id: src.into(),
        ..Default::default()
    };
    assert_code(
        c.create_snapshot(snap("s", "vol-nope")).await,
        Code::NotFound,
        "vol-nope",
    );
    c.create_snapshot(snap("s", &a)).await.unwrap();
    assert_code(
        c.create_snapshot(snap("s", &bvol)).await,
        Code::AlreadyExists,
        "s",
    );
    // Node rows.
    let (staging, target) = (b.path("s"), b.path("t"));
    assert_code(
        n.node_stage_volume(stage("vol-nope", &staging, cap.clone()))
            .await,
        Code::NotFound,
        "vol-nope",
    );
    assert_code(
        n.node_publish_volume(publish(&a, &staging, &target, cap.clone()))
            .await,
        Code::FailedPrecondition,
        "not staged",
    );
    let unpub = csi::NodeUnpublishVolumeRequest {
        volume_id: "vol-nope".into(),
        target_path: target.display().to_string(),
    };
    assert_code(
        n.node_unpublish_volume(unpub).await,
        Code::NotFound,
        "vol-nope",
    );
    // v1-only RPCs do not exist in this dialect.
    let mut v1 = csi_gateway::dialect::proto::v1::controller_client::ControllerClient::new(
        b.channel().await,
    );
    let got = v1
        .controller_get_volume(
            csi_gateway::dialect::proto::v1::ControllerGetVolumeRequest { volume_id: a },
        )
        .await;
    assert_eq!(got.unwrap_err().code(), Code::Unimplemented);
}

#[tokio::test]
async fn state_survives_restart_and_sigkill() {
    let (mut b, mut c, mut n) = start(Options::new("v0.3")).await;
    let cap = mount(Mode::SingleNodeWriter);
    let v = c
        .create_volume(create_req("keep", cap.clone(), GI))
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap();
    c.controller_publish_volume(attach(&v.id, "node-1", cap.clone()))
        .await
        .unwrap();
    let staging = b.path("s");
    n.node_stage_volume(stage(&v.id, &staging, cap.clone()))
        .await
        .unwrap();
    let s = c
        .create_snapshot(csi::CreateSnapshotRequest {
            source_volume_id: v.id.clone(),
            name: "snap".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .snapshot
        .unwrap();
    drop((c, n));
    assert!(b.terminate().success());
    b.restart(None).await;
    let mut c = ControllerClient::new(b.channel().await);
    let vols = c
        .list_volumes(csi::ListVolumesRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(vols.entries[0].volume.as_ref().unwrap(), &v);
    let snaps = c
        .list_snapshots(csi::ListSnapshotsRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(snaps.entries[0].snapshot.as_ref().unwrap().id, s.id);
    // The attachment is remembered: another node is refused for this single-node volume.
    assert_code(
        c.delete_volume(csi::DeleteVolumeRequest {
            volume_id: v.id.clone(),
            ..Default::default()
        })
        .await,
        Code::FailedPrecondition,
        "attached",
    );

    // SIGKILL in the middle of a snapshot copy: the orphan copy is removed at restart.
    b.restart(Some(Options::new("v0.3").arg("--fault-delay=30s")))
        .await;
    let mut c = ControllerClient::new(b.channel().await);
    let mut c2 = c.clone();
    let vid = v.id.clone();
    let t = tokio::spawn(async move {
        c2.create_snapshot(csi::CreateSnapshotRequest {
            source_volume_id: vid,
            name: "doomed".into(),
            ..Default::default()
        })
        .await
    });
    let snaps_dir = b.data_dir.join("snapshots");
    support::eventually(Duration::from_secs(20), "the snapshot copy", || {
        fs::read_dir(&snaps_dir)
            .map(|d| d.count() == 2)
            .unwrap_or(false)
    })
    .await;
    b.kill();
    assert!(t.await.unwrap().is_err());
    b.restart(Some(Options::new("v0.3"))).await;
    assert_eq!(
        fs::read_dir(&snaps_dir).unwrap().count(),
        1,
        "only the committed snapshot remains"
    );
    c = ControllerClient::new(b.channel().await);
    let snaps = c
        .list_snapshots(csi::ListSnapshotsRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(snaps.entries.len(), 1);
    let unstage = csi::NodeUnstageVolumeRequest {
        volume_id: v.id.clone(),
        staging_target_path: staging.display().to_string(),
    };
    NodeClient::new(b.channel().await)
        .node_unstage_volume(unstage)
        .await
        .unwrap();
}

#[tokio::test]
async fn concurrent_operation_is_aborted() {
    let (b, c, _) = start(Options::new("v0.3").arg("--fault-delay=3s")).await;
    let mut first = c.clone();
    let pending = tokio::spawn(async move {
        first
            .create_volume(create_req("slow", mount(Mode::SingleNodeWriter), GI))
            .await
    });
    let vols = b.data_dir.join("volumes");
    support::eventually(Duration::from_secs(20), "the first create's data", || {
        fs::read_dir(&vols).map(|d| d.count() == 1).unwrap_or(false)
    })
    .await;
    let second = c
        .clone()
        .create_volume(create_req("slow", mount(Mode::SingleNodeWriter), GI))
        .await;
    assert_code(second, Code::Aborted, "slow");
    pending.await.unwrap().unwrap();
}
