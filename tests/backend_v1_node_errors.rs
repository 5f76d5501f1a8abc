//! The error rows of the CSI v1 per-RPC tables for the Node service, and per-volume
//! serialization (ABORTED), each provoked for real against the backend.

use csi_gateway_test_support as support;

use std::time::Duration;

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

#[tokio::test]
async fn node_rows() {
    let (b, mut c, mut n) = setup(Options::new("v1")).await;
    let cap = mount(Mode::SingleNodeWriter);
    let a = create(&mut c, "a", cap.clone()).await;
    let (staging, target) = (
        b.path("s").display().to_string(),
        b.path("t").display().to_string(),
    );
    let stage =
        |id: &str, path: &str, cap: Option<csi::VolumeCapability>| csi::NodeStageVolumeRequest {
            volume_id: id.into(),
            staging_target_path: path.into(),
            volume_capability: cap,
            ..Default::default()
        };
    assert_code(
        n.node_stage_volume(stage("", &staging, Some(cap.clone())))
            .await,
        Code::InvalidArgument,
        "volume_id",
    );
    assert_code(
        n.node_stage_volume(stage(&a, "", Some(cap.clone()))).await,
        Code::InvalidArgument,
        "staging_target_path",
    );
    assert_code(
        n.node_stage_volume(stage(&a, &staging, None)).await,
        Code::InvalidArgument,
        "volume_capability",
    );
    assert_code(
        n.node_stage_volume(stage("vol-nope", &staging, Some(cap.clone())))
            .await,
        Code::NotFound,
        "vol-nope",
    );
    assert_code(
        n.node_stage_volume(stage(&a, &staging, Some(block())))
            .await,
        Code::FailedPrecondition,
        "volume_capability",
    );
    let publish = |staging: &str, target: &str, readonly: bool| csi::NodePublishVolumeRequest {
        volume_id: a.clone(),
        staging_target_path: staging.into(),
        target_path: target.into(),
        volume_capability: Some(mount(Mode::SingleNodeWriter)),
        readonly,
        ..Default::default()
    };
    // Staging required: "staging target path not set" and "not staged" are FAILED_PRECONDITION.
    assert_code(
        n.node_publish_volume(publish("", &target, false)).await,
        Code::FailedPrecondition,
        "staging_target_path",
    );
    assert_code(
        n.node_publish_volume(publish(&staging, &target, false))
            .await,
        Code::FailedPrecondition,
        "not staged",
    );
    assert_code(
        n.node_publish_volume(publish(&staging, "", false)).await,
        Code::InvalidArgument,
        "target_path",
    );
    n.node_stage_volume(stage(&a, &staging, Some(cap.clone())))
        .await
        .unwrap();
    // Staged with another capability at the same path: ALREADY_EXISTS.
    assert_code(
        n.node_stage_volume(stage(&a, &staging, Some(mount(Mode::MultiNodeMultiWriter))))
            .await,
        Code::AlreadyExists,
        "staged",
    );
    n.node_publish_volume(publish(&staging, &target, false))
        .await
        .unwrap();
    // Same target, different readonly: ALREADY_EXISTS.
    assert_code(
        n.node_publish_volume(publish(&staging, &target, true))
            .await,
        Code::AlreadyExists,
        "published",
    );
    // Unstage while published from that staging path: FAILED_PRECONDITION.
    let unstage = csi::NodeUnstageVolumeRequest {
        volume_id: a.clone(),
        staging_target_path: staging.clone(),
    };
    assert_code(
        n.node_unstage_volume(unstage.clone()).await,
        Code::FailedPrecondition,
        "published",
    );
    // Unknown volumes: NOT_FOUND; missing fields INVALID_ARGUMENT.
    let unpub = |id: &str, t: &str| csi::NodeUnpublishVolumeRequest {
        volume_id: id.into(),
        target_path: t.into(),
    };
    assert_code(
        n.node_unpublish_volume(unpub("vol-nope", &target)).await,
        Code::NotFound,
        "vol-nope",
    );
    assert_code(
        n.node_unpublish_volume(unpub(&a, "")).await,
        Code::InvalidArgument,
        "target_path",
    );
    assert_code(
        n.node_unpublish_volume(unpub("", &target)).await,
        Code::InvalidArgument,
        "volume_id",
    );
    let unknown_unstage = csi::NodeUnstageVolumeRequest {
        volume_id: "vol-nope".into(),
        staging_target_path: staging.clone(),
    };
    assert_code(
        n.node_unstage_volume(unknown_unstage).await,
        Code::NotFound,
        "vol-nope",
    );
    let stats = |id: &str, p: &str| csi::NodeGetVolumeStatsRequest {
        volume_id: id.into(),
        volume_path: p.into(),
        ..Default::default()
    };
    assert_code(
        n.node_get_volume_stats(stats("vol-nope", &target)).await,
        Code::NotFound,
        "vol-nope",
    );
    assert_code(
        n.node_get_volume_stats(stats(&a, "/nowhere")).await,
        Code::NotFound,
        "/nowhere",
    );
    assert_code(
        n.node_get_volume_stats(stats(&a, "")).await,
        Code::InvalidArgument,
        "volume_path",
    );
    let nexp = |id: &str, req: i64| csi::NodeExpandVolumeRequest {
        volume_id: id.into(),
        volume_path: target.clone(),
        capacity_range: Some(csi::CapacityRange {
            required_bytes: req,
            limit_bytes: 0,
        }),
        ..Default::default()
    };
    assert_code(
        n.node_expand_volume(nexp("vol-nope", GI)).await,
        Code::NotFound,
        "vol-nope",
    );
    assert_code(
        n.node_expand_volume(nexp(&a, 5 * GI)).await,
        Code::OutOfRange,
        "capacity_range",
    );
    let mut wrong_type = nexp(&a, GI);
    wrong_type.volume_capability = Some(block());
    assert_code(
        n.node_expand_volume(wrong_type).await,
        Code::InvalidArgument,
        "volume_capability",
    );
    // Published: cannot be deleted.
    assert_code(
        c.delete_volume(csi::DeleteVolumeRequest {
            volume_id: a.clone(),
            ..Default::default()
        })
        .await,
        Code::FailedPrecondition,
        "published",
    );
    n.node_unpublish_volume(unpub(&a, &target)).await.unwrap();
    // Still staged: deleting would leave a mount of a removed directory.
    let del = csi::DeleteVolumeRequest {
        volume_id: a.clone(),
        ..Default::default()
    };
    assert_code(
        c.delete_volume(del.clone()).await,
        Code::FailedPrecondition,
        "staged",
    );
    n.node_unstage_volume(unstage).await.unwrap();
    c.delete_volume(del).await.unwrap();
}

/// NodePublishVolume checks in the order its v1 error table implies: required fields
/// (INVALID_ARGUMENT), then "Volume does not exist" (NOT_FOUND), then "Staging target path not
/// set" (FAILED_PRECONDITION), on a plugin that requires staging.
#[tokio::test]
async fn publish_checks_required_fields_then_existence_then_staging() {
    let (b, mut c, mut n) = setup(Options::new("v1")).await;
    let a = create(&mut c, "a", mount(Mode::SingleNodeWriter)).await;
    let target = b.path("t").display().to_string();
    let publish = |id: &str, cap: Option<csi::VolumeCapability>| csi::NodePublishVolumeRequest {
        volume_id: id.into(),
        target_path: target.clone(),
        volume_capability: cap,
        ..Default::default()
    };
    let cap = || Some(mount(Mode::SingleNodeWriter));
    assert_code(
        n.node_publish_volume(publish("vol-nope", None)).await,
        Code::InvalidArgument,
        "volume_capability",
    );
    assert_code(
        n.node_publish_volume(publish("vol-nope", cap())).await,
        Code::NotFound,
        "vol-nope",
    );
    assert_code(
        n.node_publish_volume(publish(&a, cap())).await,
        Code::FailedPrecondition,
        "staging_target_path",
    );
}

#[tokio::test]
async fn single_node_single_writer_publishes_once() {
    let (b, mut c, mut n) = setup(Options::new("v1").arg("--require-staging=false")).await;
    let cap = mount(Mode::SingleNodeSingleWriter);
    let a = create(&mut c, "a", cap.clone()).await;
    let publish = |target: &std::path::Path| csi::NodePublishVolumeRequest {
        volume_id: a.clone(),
        target_path: target.display().to_string(),
        volume_capability: Some(cap.clone()),
        ..Default::default()
    };
    n.node_publish_volume(publish(&b.path("t1"))).await.unwrap();
    assert_code(
        n.node_publish_volume(publish(&b.path("t2"))).await,
        Code::FailedPrecondition,
        "SingleNodeSingleWriter",
    );
}

#[tokio::test]
async fn concurrent_operation_on_a_volume_is_aborted() {
    // Each create holds the name lock for 3s after writing its data, before committing.
    let (b, c, _) = setup(Options::new("v1").arg("--fault-delay=3s")).await;
    let cap = mount(Mode::SingleNodeWriter);
    let mut first = c.clone();
    let req = create_req("slow", cap.clone(), GI);
    let pending = tokio::spawn(async move { first.create_volume(req).await });
    // Readiness, not a sleep: the backing directory appears while the lock is held.
    let volumes = b.data_dir.join("volumes");
    support::eventually(
        Duration::from_secs(20),
        "the first create to write its data",
        || {
            std::fs::read_dir(&volumes)
                .map(|d| d.count() == 1)
                .unwrap_or(false)
        },
    )
    .await;
    let second = c
        .clone()
        .create_volume(create_req("slow", cap.clone(), GI))
        .await;
    assert_code(second, Code::Aborted, "slow");
    let v = pending.await.unwrap().unwrap().into_inner().volume.unwrap();
    // Once released, the same request succeeds and is idempotent.
    let again = c
        .clone()
        .create_volume(create_req("slow", cap, GI))
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap();
    assert_eq!(v.volume_id, again.volume_id);
}
