//! The reference backend in its default dialect (CSI v1), driven over its socket: lifecycle,
//! idempotency, the spec's error rows, and state across restarts and crashes.

use csi_gateway_test_support as support;

use std::collections::HashMap;
use std::fs;

use csi::controller_client::ControllerClient;
use csi::identity_client::IdentityClient;
use csi::node_client::NodeClient;
use csi::volume_capability::{access_mode::Mode, AccessMode, AccessType, BlockVolume, MountVolume};
use csi_gateway::dialect::proto::v1 as csi;
use support::{Backend, Options};
use tonic::transport::Channel;

const GI: i64 = 1 << 30;

struct Clients {
    identity: IdentityClient<Channel>,
    controller: ControllerClient<Channel>,
    node: NodeClient<Channel>,
}

async fn clients(b: &Backend) -> Clients {
    let ch = b.channel().await;
    Clients {
        identity: IdentityClient::new(ch.clone()),
        controller: ControllerClient::new(ch.clone()),
        node: NodeClient::new(ch),
    }
}

fn mount(mode: Mode) -> csi::VolumeCapability {
    csi::VolumeCapability {
        access_mode: Some(AccessMode { mode: mode as i32 }),
        access_type: Some(AccessType::Mount(MountVolume::default())),
    }
}

fn block(mode: Mode) -> csi::VolumeCapability {
    csi::VolumeCapability {
        access_mode: Some(AccessMode { mode: mode as i32 }),
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

async fn create(
    c: &mut Clients,
    name: &str,
    cap: csi::VolumeCapability,
    required: i64,
) -> csi::Volume {
    c.controller
        .create_volume(create_req(name, cap, required))
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap()
}

fn stage_req(
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

fn publish_req(
    id: &str,
    staging: &std::path::Path,
    target: &std::path::Path,
    cap: csi::VolumeCapability,
    readonly: bool,
) -> csi::NodePublishVolumeRequest {
    csi::NodePublishVolumeRequest {
        volume_id: id.into(),
        staging_target_path: staging.display().to_string(),
        target_path: target.display().to_string(),
        volume_capability: Some(cap),
        readonly,
        ..Default::default()
    }
}

fn controller_publish(
    id: &str,
    node: &str,
    cap: csi::VolumeCapability,
) -> csi::ControllerPublishVolumeRequest {
    csi::ControllerPublishVolumeRequest {
        volume_id: id.into(),
        node_id: node.into(),
        volume_capability: Some(cap),
        ..Default::default()
    }
}

async fn list_volume_ids(c: &mut Clients) -> Vec<String> {
    let r = c
        .controller
        .list_volumes(csi::ListVolumesRequest::default())
        .await
        .unwrap()
        .into_inner();
    r.entries
        .into_iter()
        .map(|e| e.volume.unwrap().volume_id)
        .collect()
}

#[tokio::test]
async fn identity_and_capabilities() {
    let b = Backend::start(Options::new("v1").arg("--topology=zone=a")).await;
    let mut c = clients(&b).await;
    let info = c
        .identity
        .get_plugin_info(csi::GetPluginInfoRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(info.name, "reference.csi-gateway.dev");
    assert!(!info.vendor_version.is_empty());
    let probe = c
        .identity
        .probe(csi::ProbeRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(probe.ready, Some(true));
    let caps = c
        .identity
        .get_plugin_capabilities(csi::GetPluginCapabilitiesRequest {})
        .await
        .unwrap()
        .into_inner();
    let text = format!("{:?}", caps.capabilities);
    // Service types 1 (CONTROLLER_SERVICE) and 2 (VOLUME_ACCESSIBILITY_CONSTRAINTS); expansion 1 and 2.
    assert_eq!(caps.capabilities.len(), 4, "{text}");
    let ctrl = c
        .controller
        .controller_get_capabilities(csi::ControllerGetCapabilitiesRequest {})
        .await
        .unwrap();
    let ctrl: Vec<i32> = ctrl
        .into_inner()
        .capabilities
        .into_iter()
        .map(|c| match c.r#type.unwrap() {
            csi::controller_service_capability::Type::Rpc(r) => r.r#type,
        })
        .collect();
    for want in 1..=14 {
        assert!(
            ctrl.contains(&want),
            "controller capability {want} missing from {ctrl:?}"
        );
    }
    // GET_SNAPSHOT (15) is alpha: off unless --alpha-get-snapshot, RPC included.
    assert!(!ctrl.contains(&15), "{ctrl:?}");
    let e = c
        .controller
        .get_snapshot(csi::GetSnapshotRequest {
            snapshot_id: "any".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::Unimplemented, "{e:?}");
    let node = c
        .node
        .node_get_capabilities(csi::NodeGetCapabilitiesRequest {})
        .await
        .unwrap()
        .into_inner();
    let node: Vec<i32> = node
        .capabilities
        .into_iter()
        .map(|c| match c.r#type.unwrap() {
            csi::node_service_capability::Type::Rpc(r) => r.r#type,
        })
        .collect();
    assert_eq!(
        node,
        vec![1, 2, 3, 4, 5],
        "STAGE_UNSTAGE first, then stats, expand, condition, SNMW"
    );
    let info = c
        .node
        .node_get_info(csi::NodeGetInfoRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(info.node_id, "node-1");
    assert_eq!(
        info.accessible_topology.unwrap().segments,
        HashMap::from([("zone".into(), "a".into())])
    );
}

#[tokio::test]
async fn staging_is_optional_when_not_required() {
    let b = Backend::start(Options::new("v1").arg("--require-staging=false")).await;
    let mut c = clients(&b).await;
    let node = c
        .node
        .node_get_capabilities(csi::NodeGetCapabilitiesRequest {})
        .await
        .unwrap()
        .into_inner();
    assert!(!format!("{node:?}").contains("r#type: 1 "), "{node:?}");
    assert_eq!(node.capabilities.len(), 4);
    let v = create(&mut c, "plain", mount(Mode::SingleNodeWriter), GI).await;
    let target = b.path("target");
    let req = publish_req(
        &v.volume_id,
        std::path::Path::new(""),
        &target,
        mount(Mode::SingleNodeWriter),
        false,
    );
    c.node.node_publish_volume(req).await.unwrap();
    fs::write(target.join("f"), b"direct").unwrap();
    assert_eq!(
        fs::read(b.data_dir.join("volumes").join(&v.volume_id).join("f")).unwrap(),
        b"direct"
    );
    let req = csi::NodeUnpublishVolumeRequest {
        volume_id: v.volume_id.clone(),
        target_path: target.display().to_string(),
    };
    c.node.node_unpublish_volume(req).await.unwrap();
    assert!(!target.exists());
}

#[tokio::test]
async fn mount_lifecycle_with_snapshots_clones_expansion_and_stats() {
    let mut opts = Options::new("v1").arg("--alpha-get-snapshot");
    opts.pool_size = "20Gi".into();
    let b = Backend::start(opts).await;
    let mut c = clients(&b).await;
    let cap = mount(Mode::SingleNodeWriter);
    let before = c
        .controller
        .get_capacity(csi::GetCapacityRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(before.available_capacity, 20 * GI);

    let mut req = create_req("data", cap.clone(), 2 * GI);
    req.parameters = HashMap::from([("tier".into(), "fast".into())]);
    let v = c
        .controller
        .create_volume(req)
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap();
    assert_eq!(v.capacity_bytes, 2 * GI);
    let backing = b.data_dir.join("volumes").join(&v.volume_id);
    assert!(backing.is_dir(), "a mount volume is a directory");
    let after = c
        .controller
        .get_capacity(csi::GetCapacityRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(after.available_capacity, 18 * GI);

    // Attach, stage, publish, write through the published path.
    let ctx = c
        .controller
        .controller_publish_volume(controller_publish(&v.volume_id, "node-1", cap.clone()))
        .await;
    assert_eq!(
        ctx.unwrap()
            .into_inner()
            .publish_context
            .get("attachedNode")
            .map(String::as_str),
        Some("node-1")
    );
    let (staging, target) = (b.path("staging"), b.path("target"));
    c.node
        .node_stage_volume(stage_req(&v.volume_id, &staging, cap.clone()))
        .await
        .unwrap();
    c.node
        .node_publish_volume(publish_req(
            &v.volume_id,
            &staging,
            &target,
            cap.clone(),
            false,
        ))
        .await
        .unwrap();
    if support::bind_mounts_work() {
        assert!(support::is_mount_point(&target), "bind mode really mounts");
        assert!(support::is_mount_point(&staging));
    } else {
        assert!(fs::symlink_metadata(&target)
            .unwrap()
            .file_type()
            .is_symlink());
    }
    fs::write(target.join("hello.txt"), b"hello").unwrap();
    assert_eq!(
        fs::read(backing.join("hello.txt")).unwrap(),
        b"hello",
        "the data lands in the volume"
    );

    // Listing shows the attachment.
    let list = c
        .controller
        .list_volumes(csi::ListVolumesRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(list.entries.len(), 1);
    assert_eq!(
        list.entries[0].status.as_ref().unwrap().published_node_ids,
        vec!["node-1".to_string()]
    );
    let got = c
        .controller
        .controller_get_volume(csi::ControllerGetVolumeRequest {
            volume_id: v.volume_id.clone(),
        })
        .await;
    let got = got.unwrap().into_inner();
    assert_eq!(got.volume.unwrap().capacity_bytes, 2 * GI);
    assert!(!got.status.unwrap().volume_condition.unwrap().abnormal);

    // Stats: bytes and inodes, capped by the capacity; "used" is what the volume holds.
    fs::write(target.join("mib"), vec![7u8; 1 << 20]).unwrap();
    let stats = c
        .node
        .node_get_volume_stats(csi::NodeGetVolumeStatsRequest {
            volume_id: v.volume_id.clone(),
            volume_path: target.display().to_string(),
            staging_target_path: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(stats.usage.len(), 2);
    assert!(
        stats.usage[0].used >= 1 << 20,
        "the written MiB counts as used: {:?}",
        stats.usage[0]
    );
    assert_eq!(stats.usage[0].total, 2 * GI);
    assert!(stats.usage[0].available + stats.usage[0].used <= 2 * GI);
    assert!(stats.usage[1].total > 0, "inode figures come from statvfs");

    // Expand online, then on the node; modify a mutable parameter.
    let exp = c
        .controller
        .controller_expand_volume(csi::ControllerExpandVolumeRequest {
            volume_id: v.volume_id.clone(),
            capacity_range: Some(csi::CapacityRange {
                required_bytes: 3 * GI,
                limit_bytes: 0,
            }),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        (exp.capacity_bytes, exp.node_expansion_required),
        (3 * GI, true)
    );
    let nexp = c
        .node
        .node_expand_volume(csi::NodeExpandVolumeRequest {
            volume_id: v.volume_id.clone(),
            volume_path: target.display().to_string(),
            capacity_range: Some(csi::CapacityRange {
                required_bytes: 3 * GI,
                limit_bytes: 0,
            }),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(nexp.capacity_bytes, 3 * GI);
    c.controller
        .controller_modify_volume(csi::ControllerModifyVolumeRequest {
            volume_id: v.volume_id.clone(),
            mutable_parameters: HashMap::from([("iops".into(), "500".into())]),
            ..Default::default()
        })
        .await
        .unwrap();

    // Snapshot, restore and clone: real copies.
    let snap = c
        .controller
        .create_snapshot(csi::CreateSnapshotRequest {
            source_volume_id: v.volume_id.clone(),
            name: "snap".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .snapshot
        .unwrap();
    assert!(snap.ready_to_use);
    assert_eq!(snap.size_bytes, 3 * GI);
    assert!(snap.creation_time.is_some());
    fs::write(target.join("hello.txt"), b"changed after the snapshot").unwrap();
    let mut restore = create_req("restored", cap.clone(), 0);
    restore.volume_content_source = Some(csi::VolumeContentSource {
        r#type: Some(csi::volume_content_source::Type::Snapshot(
            csi::volume_content_source::SnapshotSource {
                snapshot_id: snap.snapshot_id.clone(),
            },
        )),
    });
    let restored = c
        .controller
        .create_volume(restore)
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap();
    assert_eq!(
        restored.capacity_bytes,
        3 * GI,
        "at least the snapshot's size"
    );
    assert!(restored.content_source.is_some());
    let restored_dir = b.data_dir.join("volumes").join(&restored.volume_id);
    assert_eq!(fs::read(restored_dir.join("hello.txt")).unwrap(), b"hello");
    let mut clone = create_req("clone", cap.clone(), 3 * GI);
    clone.volume_content_source = Some(csi::VolumeContentSource {
        r#type: Some(csi::volume_content_source::Type::Volume(
            csi::volume_content_source::VolumeSource {
                volume_id: v.volume_id.clone(),
            },
        )),
    });
    let cloned = c
        .controller
        .create_volume(clone)
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap();
    let cloned_dir = b.data_dir.join("volumes").join(&cloned.volume_id);
    assert_eq!(
        fs::read(cloned_dir.join("hello.txt")).unwrap(),
        b"changed after the snapshot"
    );
    let snaps = c
        .controller
        .list_snapshots(csi::ListSnapshotsRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(snaps.entries.len(), 1);
    let got = c.controller.get_snapshot(csi::GetSnapshotRequest {
        snapshot_id: snap.snapshot_id.clone(),
        ..Default::default()
    });
    assert_eq!(
        got.await
            .unwrap()
            .into_inner()
            .snapshot
            .unwrap()
            .snapshot_id,
        snap.snapshot_id
    );

    // Tear down in the CO's order.
    let unpub = csi::NodeUnpublishVolumeRequest {
        volume_id: v.volume_id.clone(),
        target_path: target.display().to_string(),
    };
    c.node.node_unpublish_volume(unpub).await.unwrap();
    assert!(!target.exists(), "unpublish removes the target");
    let unstage = csi::NodeUnstageVolumeRequest {
        volume_id: v.volume_id.clone(),
        staging_target_path: staging.display().to_string(),
    };
    c.node.node_unstage_volume(unstage).await.unwrap();
    assert!(!support::is_mount_point(&staging));
    let unattach = csi::ControllerUnpublishVolumeRequest {
        volume_id: v.volume_id.clone(),
        node_id: "node-1".into(),
        ..Default::default()
    };
    c.controller
        .controller_unpublish_volume(unattach)
        .await
        .unwrap();
    for id in [&v.volume_id, &restored.volume_id, &cloned.volume_id] {
        c.controller
            .delete_volume(csi::DeleteVolumeRequest {
                volume_id: id.clone(),
                ..Default::default()
            })
            .await
            .unwrap();
    }
    assert!(!backing.exists(), "delete removes the backing directory");
    c.controller
        .delete_snapshot(csi::DeleteSnapshotRequest {
            snapshot_id: snap.snapshot_id.clone(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(list_volume_ids(&mut c).await.is_empty());
    let end = c
        .controller
        .get_capacity(csi::GetCapacityRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        end.available_capacity,
        20 * GI,
        "all capacity returned to the pool"
    );
}

#[tokio::test]
async fn block_lifecycle_is_a_sparse_file() {
    let b = Backend::start(Options::new("v1")).await;
    let mut c = clients(&b).await;
    let cap = block(Mode::SingleNodeWriter);
    let v = create(&mut c, "raw", cap.clone(), GI).await;
    let backing = b.data_dir.join("volumes").join(&v.volume_id);
    let meta = fs::metadata(&backing).unwrap();
    assert!(meta.is_file());
    assert_eq!(meta.len(), GI as u64);
    use std::os::unix::fs::MetadataExt;
    assert!(
        meta.blocks() * 512 < GI as u64 / 2,
        "sparse: {} blocks",
        meta.blocks()
    );

    let (staging, target) = (b.path("staging"), b.path("dev"));
    c.controller
        .controller_publish_volume(controller_publish(&v.volume_id, "node-1", cap.clone()))
        .await
        .unwrap();
    c.node
        .node_stage_volume(stage_req(&v.volume_id, &staging, cap.clone()))
        .await
        .unwrap();
    c.node
        .node_publish_volume(publish_req(
            &v.volume_id,
            &staging,
            &target,
            cap.clone(),
            false,
        ))
        .await
        .unwrap();
    assert_eq!(
        fs::metadata(&target).unwrap().len(),
        GI as u64,
        "the target shows the backing file"
    );
    let stats = c
        .node
        .node_get_volume_stats(csi::NodeGetVolumeStatsRequest {
            volume_id: v.volume_id.clone(),
            volume_path: target.display().to_string(),
            staging_target_path: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(stats.usage.len(), 1, "block volumes report bytes only");
    assert_eq!(stats.usage[0].total, GI);

    let exp = csi::ControllerExpandVolumeRequest {
        volume_id: v.volume_id.clone(),
        capacity_range: Some(csi::CapacityRange {
            required_bytes: 2 * GI,
            limit_bytes: 0,
        }),
        ..Default::default()
    };
    c.controller.controller_expand_volume(exp).await.unwrap();
    assert_eq!(
        fs::metadata(&backing).unwrap().len(),
        2 * GI as u64,
        "the sparse file grew"
    );

    let unpub = csi::NodeUnpublishVolumeRequest {
        volume_id: v.volume_id.clone(),
        target_path: target.display().to_string(),
    };
    c.node.node_unpublish_volume(unpub).await.unwrap();
    assert!(!target.exists());
    let unstage = csi::NodeUnstageVolumeRequest {
        volume_id: v.volume_id.clone(),
        staging_target_path: staging.display().to_string(),
    };
    c.node.node_unstage_volume(unstage).await.unwrap();
    let unattach = csi::ControllerUnpublishVolumeRequest {
        volume_id: v.volume_id.clone(),
        node_id: "node-1".into(),
        ..Default::default()
    };
    c.controller
        .controller_unpublish_volume(unattach)
        .await
        .unwrap();
    c.controller
        .delete_volume(csi::DeleteVolumeRequest {
            volume_id: v.volume_id.clone(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(!backing.exists());
}

#[tokio::test]
async fn repeated_calls_are_idempotent() {
    let b = Backend::start(Options::new("v1")).await;
    let mut c = clients(&b).await;
    let cap = mount(Mode::SingleNodeWriter);
    let v1 = create(&mut c, "same", cap.clone(), GI).await;
    let v2 = create(&mut c, "same", cap.clone(), GI).await;
    assert_eq!(v1, v2, "same name, same arguments: the same volume");
    assert_eq!(list_volume_ids(&mut c).await.len(), 1);

    let id = v1.volume_id.clone();
    let (staging, target) = (b.path("s"), b.path("t"));
    for _ in 0..2 {
        c.controller
            .controller_publish_volume(controller_publish(&id, "node-1", cap.clone()))
            .await
            .unwrap();
        c.node
            .node_stage_volume(stage_req(&id, &staging, cap.clone()))
            .await
            .unwrap();
        c.node
            .node_publish_volume(publish_req(&id, &staging, &target, cap.clone(), false))
            .await
            .unwrap();
    }
    let snap_req = csi::CreateSnapshotRequest {
        source_volume_id: id.clone(),
        name: "s1".into(),
        ..Default::default()
    };
    let s1 = c
        .controller
        .create_snapshot(snap_req.clone())
        .await
        .unwrap()
        .into_inner()
        .snapshot
        .unwrap();
    let s2 = c
        .controller
        .create_snapshot(snap_req)
        .await
        .unwrap()
        .into_inner()
        .snapshot
        .unwrap();
    assert_eq!(s1.snapshot_id, s2.snapshot_id);
    for _ in 0..2 {
        let r = csi::NodeUnpublishVolumeRequest {
            volume_id: id.clone(),
            target_path: target.display().to_string(),
        };
        c.node.node_unpublish_volume(r).await.unwrap();
        let r = csi::NodeUnstageVolumeRequest {
            volume_id: id.clone(),
            staging_target_path: staging.display().to_string(),
        };
        c.node.node_unstage_volume(r).await.unwrap();
        let r = csi::ControllerUnpublishVolumeRequest {
            volume_id: id.clone(),
            node_id: "node-1".into(),
            ..Default::default()
        };
        c.controller.controller_unpublish_volume(r).await.unwrap();
    }
    for _ in 0..2 {
        c.controller
            .delete_snapshot(csi::DeleteSnapshotRequest {
                snapshot_id: s1.snapshot_id.clone(),
                ..Default::default()
            })
            .await
            .unwrap();
        c.controller
            .delete_volume(csi::DeleteVolumeRequest {
                volume_id: id.clone(),
                ..Default::default()
            })
            .await
            .unwrap();
    }
    // Unknown ids: delete and detach are OK (already gone).
    c.controller
        .delete_volume(csi::DeleteVolumeRequest {
            volume_id: "vol-nope".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    let r = csi::ControllerUnpublishVolumeRequest {
        volume_id: "vol-nope".into(),
        node_id: "node-1".into(),
        ..Default::default()
    };
    c.controller.controller_unpublish_volume(r).await.unwrap();
}

#[tokio::test]
async fn explicit_symlink_mode_publishes_links() {
    let mut opts = Options::new("v1");
    opts.publish_mode = "symlink".into();
    let b = Backend::start(opts).await;
    let mut c = clients(&b).await;
    let cap = mount(Mode::SingleNodeWriter);
    let v = create(&mut c, "linked", cap.clone(), GI).await;
    let (staging, target) = (b.path("staging"), b.path("target"));
    fs::create_dir(&target).unwrap(); // kubelet may pre-create the target; it is replaced
    c.node
        .node_stage_volume(stage_req(&v.volume_id, &staging, cap.clone()))
        .await
        .unwrap();
    c.node
        .node_publish_volume(publish_req(
            &v.volume_id,
            &staging,
            &target,
            cap.clone(),
            false,
        ))
        .await
        .unwrap();
    assert!(fs::symlink_metadata(&target)
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(
        !support::is_mount_point(&target),
        "symlink mode mounts nothing"
    );
    fs::write(target.join("x"), b"via link").unwrap();
    assert_eq!(
        fs::read(b.data_dir.join("volumes").join(&v.volume_id).join("x")).unwrap(),
        b"via link"
    );
    let unpub = csi::NodeUnpublishVolumeRequest {
        volume_id: v.volume_id.clone(),
        target_path: target.display().to_string(),
    };
    c.node.node_unpublish_volume(unpub).await.unwrap();
    assert!(fs::symlink_metadata(&target).is_err());
    assert!(
        b.data_dir
            .join("volumes")
            .join(&v.volume_id)
            .join("x")
            .exists(),
        "unpublish keeps the data"
    );
}

#[tokio::test]
async fn readonly_publish_is_a_read_only_bind_mount() {
    if !support::bind_mounts_work() {
        eprintln!(
            "skipped: bind mounts are not permitted here (symlink mode cannot enforce readonly)"
        );
        return;
    }
    let b = Backend::start(Options::new("v1").arg("--require-staging=false")).await;
    let mut c = clients(&b).await;
    let cap = mount(Mode::MultiNodeReaderOnly);
    let v = create(&mut c, "ro", cap.clone(), GI).await;
    fs::write(
        b.data_dir.join("volumes").join(&v.volume_id).join("seed"),
        b"x",
    )
    .unwrap();
    let target = b.path("ro");
    let req = publish_req(
        &v.volume_id,
        std::path::Path::new(""),
        &target,
        cap.clone(),
        true,
    );
    c.node.node_publish_volume(req).await.unwrap();
    assert_eq!(fs::read(target.join("seed")).unwrap(), b"x", "readable");
    let err = fs::write(target.join("new"), b"y").unwrap_err();
    assert_eq!(err.raw_os_error(), Some(30), "EROFS, got {err}");
    let unpub = csi::NodeUnpublishVolumeRequest {
        volume_id: v.volume_id.clone(),
        target_path: target.display().to_string(),
    };
    c.node.node_unpublish_volume(unpub).await.unwrap();
    assert!(!support::is_mount_point(&target));
}
