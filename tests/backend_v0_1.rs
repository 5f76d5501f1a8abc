//! The reference backend served as CSI v0.1.0 (`--dialect v0.1`, package `csi`): the required
//! `version` field, GetSupportedVersions, ControllerProbe/NodeProbe, GetNodeID, the v0.1.0
//! error rows, and state across restart and SIGKILL.

use csi_gateway_test_support as support;

use std::fs;
use std::time::Duration;

use csi::controller_client::ControllerClient;
use csi::identity_client::IdentityClient;
use csi::node_client::NodeClient;
use csi::volume_capability::{access_mode::Mode, AccessMode, AccessType, BlockVolume, MountVolume};
use csi_gateway::dialect::proto::v0_1 as csi;
use support::{assert_code, Backend, Options};
use tonic::transport::Channel;
use tonic::Code;

const GI: u64 = 1 << 30;

fn ver() -> Option<csi::Version> {
    Some(csi::Version {
        major: 0,
        minor: 1,
        patch: 0,
    })
}

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

fn create_req(name: &str, cap: csi::VolumeCapability, required: u64) -> csi::CreateVolumeRequest {
    csi::CreateVolumeRequest {
        version: ver(),
        name: name.into(),
        capacity_range: Some(csi::CapacityRange {
            required_bytes: required,
            limit_bytes: 0,
        }),
        volume_capabilities: vec![cap],
        ..Default::default()
    }
}

fn attach(id: &str, node: &str, cap: csi::VolumeCapability) -> csi::ControllerPublishVolumeRequest {
    csi::ControllerPublishVolumeRequest {
        version: ver(),
        volume_id: id.into(),
        node_id: node.into(),
        volume_capability: Some(cap),
        ..Default::default()
    }
}

fn detach(id: &str, node: &str) -> csi::ControllerUnpublishVolumeRequest {
    csi::ControllerUnpublishVolumeRequest {
        version: ver(),
        volume_id: id.into(),
        node_id: node.into(),
        ..Default::default()
    }
}

fn publish(
    id: &str,
    target: &std::path::Path,
    cap: csi::VolumeCapability,
) -> csi::NodePublishVolumeRequest {
    csi::NodePublishVolumeRequest {
        version: ver(),
        volume_id: id.into(),
        target_path: target.display().to_string(),
        volume_capability: Some(cap),
        ..Default::default()
    }
}

fn unpublish(id: &str, target: &std::path::Path) -> csi::NodeUnpublishVolumeRequest {
    csi::NodeUnpublishVolumeRequest {
        version: ver(),
        volume_id: id.into(),
        target_path: target.display().to_string(),
        ..Default::default()
    }
}

fn delete(id: &str) -> csi::DeleteVolumeRequest {
    csi::DeleteVolumeRequest {
        version: ver(),
        volume_id: id.into(),
        ..Default::default()
    }
}

async fn start(opts: Options) -> (Backend, ControllerClient<Channel>, NodeClient<Channel>) {
    let b = Backend::start(opts).await;
    let ch = b.channel().await;
    (b, ControllerClient::new(ch.clone()), NodeClient::new(ch))
}

#[tokio::test]
async fn lifecycle() {
    let (b, mut c, mut n) = start(Options::new("v0.1")).await;
    let mut id = IdentityClient::new(b.channel().await);
    let versions = id
        .get_supported_versions(csi::GetSupportedVersionsRequest {})
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        versions.supported_versions,
        vec![csi::Version {
            major: 0,
            minor: 1,
            patch: 0
        }]
    );
    let info = id
        .get_plugin_info(csi::GetPluginInfoRequest { version: ver() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(info.name, "reference.csi-gateway.dev");
    c.controller_probe(csi::ControllerProbeRequest { version: ver() })
        .await
        .unwrap();
    n.node_probe(csi::NodeProbeRequest { version: ver() })
        .await
        .unwrap();
    assert_eq!(
        n.get_node_id(csi::GetNodeIdRequest { version: ver() })
            .await
            .unwrap()
            .into_inner()
            .node_id,
        "node-1"
    );
    let caps = c
        .controller_get_capabilities(csi::ControllerGetCapabilitiesRequest { version: ver() })
        .await
        .unwrap();
    assert_eq!(caps.into_inner().capabilities.len(), 4);
    let ncaps = n
        .node_get_capabilities(csi::NodeGetCapabilitiesRequest { version: ver() })
        .await
        .unwrap();
    // No staging in v0.1: its one capability, UNKNOWN.
    let ncaps = ncaps.into_inner().capabilities;
    assert_eq!(ncaps.len(), 1, "{ncaps:?}");
    assert!(
        matches!(
            &ncaps[0].r#type,
            Some(csi::node_service_capability::Type::Rpc(r)) if r.r#type == 0
        ),
        "{ncaps:?}"
    );

    let cap = mount(Mode::SingleNodeWriter);
    let v = c
        .create_volume(create_req("vol", cap.clone(), GI))
        .await
        .unwrap()
        .into_inner()
        .volume_info
        .unwrap();
    assert_eq!(v.capacity_bytes, GI);
    assert_eq!(v.attributes.get("kind").map(String::as_str), Some("mount"));
    let again = c
        .create_volume(create_req("vol", cap.clone(), GI))
        .await
        .unwrap()
        .into_inner()
        .volume_info
        .unwrap();
    assert_eq!(again.id, v.id);
    let target = b.path("t");
    for _ in 0..2 {
        let ctx = c
            .controller_publish_volume(attach(&v.id, "node-1", cap.clone()))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(
            ctx.publish_volume_info
                .get("attachedNode")
                .map(String::as_str),
            Some("node-1")
        );
        n.node_publish_volume(publish(&v.id, &target, cap.clone()))
            .await
            .unwrap();
    }
    fs::write(target.join("f"), b"v0.1").unwrap();
    assert_eq!(
        fs::read(b.data_dir.join("volumes").join(&v.id).join("f")).unwrap(),
        b"v0.1"
    );
    let blk = c
        .create_volume(create_req("blk", block(), GI))
        .await
        .unwrap()
        .into_inner()
        .volume_info
        .unwrap();
    let list = c
        .list_volumes(csi::ListVolumesRequest {
            version: ver(),
            max_entries: 1,
            starting_token: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!((list.entries.len(), list.next_token.as_str()), (1, "1"));
    let left = c
        .get_capacity(csi::GetCapacityRequest {
            version: ver(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(left.into_inner().available_capacity, 10 * GI - 2 * GI);
    for _ in 0..2 {
        n.node_unpublish_volume(unpublish(&v.id, &target))
            .await
            .unwrap();
        c.controller_unpublish_volume(detach(&v.id, "node-1"))
            .await
            .unwrap();
    }
    assert!(!target.exists());
    for _ in 0..2 {
        c.delete_volume(delete(&v.id)).await.unwrap();
        c.delete_volume(delete(&blk.id)).await.unwrap();
    }
}

#[tokio::test]
async fn version_is_required_and_checked() {
    let (b, mut c, mut n) = start(Options::new("v0.1")).await;
    let mut id = IdentityClient::new(b.channel().await);
    assert_code(
        id.get_plugin_info(csi::GetPluginInfoRequest { version: None })
            .await,
        Code::InvalidArgument,
        "version",
    );
    let v9 = Some(csi::Version {
        major: 9,
        minor: 0,
        patch: 0,
    });
    assert_code(
        id.get_plugin_info(csi::GetPluginInfoRequest { version: v9 })
            .await,
        Code::InvalidArgument,
        "unsupported request version 9.0.0",
    );
    let mut r = create_req("x", mount(Mode::SingleNodeWriter), GI);
    r.version = None;
    assert_code(c.create_volume(r).await, Code::InvalidArgument, "version");
    assert_code(
        c.controller_probe(csi::ControllerProbeRequest { version: None })
            .await,
        Code::InvalidArgument,
        "version",
    );
    assert_code(
        n.node_probe(csi::NodeProbeRequest { version: None }).await,
        Code::InvalidArgument,
        "version",
    );
    let old = Some(csi::Version {
        major: 0,
        minor: 0,
        patch: 1,
    });
    assert_code(
        n.get_node_id(csi::GetNodeIdRequest { version: old }).await,
        Code::InvalidArgument,
        "0.0.1",
    );
    let mut d = delete("vol-x");
    d.version = None;
    assert_code(c.delete_volume(d).await, Code::InvalidArgument, "version");
}

#[tokio::test]
async fn error_rows() {
    let (b, mut c, mut n) = start(
        Options::new("v0.1")
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
        .volume_info
        .unwrap()
        .id;
    assert_code(
        c.create_volume(create_req("a", block(), GI)).await,
        Code::AlreadyExists,
        "a",
    );
    // Unknown volume: delete OK (v0.1.0 already said so).
    c.delete_volume(delete("vol-nope")).await.unwrap();
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
    let bv = c
        .create_volume(create_req("b", cap.clone(), GI))
        .await
        .unwrap()
        .into_inner()
        .volume_info
        .unwrap()
        .id;
    assert_code(
        c.controller_publish_volume(attach(&bv, "node-1", cap.clone()))
            .await,
        Code::ResourceExhausted,
        "maximum",
    );
    // ControllerUnpublish: unknown volume or node NOT_FOUND; not attached OK.
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
    c.controller_unpublish_volume(detach(&bv, "node-1"))
        .await
        .unwrap();
    assert_code(
        c.delete_volume(delete(&a)).await,
        Code::FailedPrecondition,
        "attached",
    );
    let val = |id: &str| csi::ValidateVolumeCapabilitiesRequest {
        version: ver(),
        volume_id: id.into(),
        volume_capabilities: vec![mount(Mode::SingleNodeWriter)],
        ..Default::default()
    };
    assert_code(
        c.validate_volume_capabilities(val("vol-nope")).await,
        Code::NotFound,
        "vol-nope",
    );
    assert!(
        c.validate_volume_capabilities(val(&a))
            .await
            .unwrap()
            .into_inner()
            .supported
    );
    let bad_token = csi::ListVolumesRequest {
        version: ver(),
        max_entries: 0,
        starting_token: "zz".into(),
    };
    assert_code(c.list_volumes(bad_token).await, Code::Aborted, "zz");
    // NodePublish table: non-MULTI_NODE, second target FAILED_PRECONDITION; same target with
    // other flags ALREADY_EXISTS; MULTI_NODE may use several targets.
    let (t1, t2) = (b.path("t1"), b.path("t2"));
    n.node_publish_volume(publish(&a, &t1, cap.clone()))
        .await
        .unwrap();
    let mut ro = publish(&a, &t1, cap.clone());
    ro.readonly = true;
    assert_code(
        n.node_publish_volume(ro).await,
        Code::AlreadyExists,
        "published",
    );
    assert_code(
        n.node_publish_volume(publish(&a, &t2, cap.clone())).await,
        Code::FailedPrecondition,
        "single-node",
    );
    let multi = mount(Mode::MultiNodeMultiWriter);
    let m = c
        .create_volume(create_req("m", multi.clone(), GI))
        .await
        .unwrap()
        .into_inner()
        .volume_info
        .unwrap()
        .id;
    let (m1, m2) = (b.path("m1"), b.path("m2"));
    n.node_publish_volume(publish(&m, &m1, multi.clone()))
        .await
        .unwrap();
    n.node_publish_volume(publish(&m, &m2, multi.clone()))
        .await
        .unwrap();
    assert_code(
        n.node_publish_volume(publish("vol-nope", &t2, cap.clone()))
            .await,
        Code::NotFound,
        "vol-nope",
    );
    assert_code(
        n.node_unpublish_volume(unpublish("vol-nope", &t2)).await,
        Code::NotFound,
        "vol-nope",
    );
    for (v, t) in [(&a, &t1), (&m, &m1), (&m, &m2)] {
        n.node_unpublish_volume(unpublish(v, t)).await.unwrap();
    }
    // Newer RPCs do not exist in this dialect.
    let mut v1 =
        csi_gateway::dialect::proto::v1::identity_client::IdentityClient::new(b.channel().await);
    assert_eq!(
        v1.probe(csi_gateway::dialect::proto::v1::ProbeRequest {})
            .await
            .unwrap_err()
            .code(),
        Code::Unimplemented
    );
}

#[tokio::test]
async fn state_survives_restart_and_sigkill() {
    let (mut b, mut c, mut n) = start(Options::new("v0.1")).await;
    let cap = mount(Mode::SingleNodeWriter);
    let v = c
        .create_volume(create_req("keep", cap.clone(), GI))
        .await
        .unwrap()
        .into_inner()
        .volume_info
        .unwrap();
    c.controller_publish_volume(attach(&v.id, "node-1", cap.clone()))
        .await
        .unwrap();
    let target = b.path("t");
    n.node_publish_volume(publish(&v.id, &target, cap.clone()))
        .await
        .unwrap();
    drop((c, n));
    assert!(b.terminate().success());
    assert!(!b.socket.exists());
    b.restart(Some(Options::new("v0.1").arg("--fault-delay=30s")))
        .await;
    let ch = b.channel().await;
    let (mut c, mut n) = (ControllerClient::new(ch.clone()), NodeClient::new(ch));
    let list = c
        .list_volumes(csi::ListVolumesRequest {
            version: ver(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(list.entries[0].volume_info.as_ref().unwrap(), &v);
    // The publication survived: a second target for this single-node volume is refused.
    assert_code(
        n.node_publish_volume(publish(&v.id, &b.path("t2"), cap.clone()))
            .await,
        Code::FailedPrecondition,
        "single-node",
    );
    // SIGKILL mid-create.
    let mut c2 = c.clone();
    let t = tokio::spawn(async move {
        c2.create_volume(create_req("doomed", mount(Mode::SingleNodeWriter), GI))
            .await
    });
    let vols = b.data_dir.join("volumes");
    support::eventually(
        Duration::from_secs(20),
        "the in-flight create's data",
        || fs::read_dir(&vols).map(|d| d.count() == 2).unwrap_or(false),
    )
    .await;
    b.kill();
    assert!(t.await.unwrap().is_err());
    b.restart(Some(Options::new("v0.1"))).await;
    assert_eq!(fs::read_dir(&vols).unwrap().count(), 1);
    let ch = b.channel().await;
    let (mut c, mut n) = (ControllerClient::new(ch.clone()), NodeClient::new(ch));
    let list = c
        .list_volumes(csi::ListVolumesRequest {
            version: ver(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(list.entries.len(), 1);
    n.node_unpublish_volume(unpublish(&v.id, &target))
        .await
        .unwrap();
}

#[tokio::test]
async fn concurrent_operation_is_aborted() {
    let (b, c, _) = start(Options::new("v0.1").arg("--fault-delay=3s")).await;
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
