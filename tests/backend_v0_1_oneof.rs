//! The reference backend served as the September 2017 draft (`--dialect v0.1-oneof`): gRPC is
//! always OK and failures are `reply.error` with the RPC's own error enum or a GeneralError;
//! handles carry metadata that must come back; the draft's non-idempotent deletes; state
//! across restart and SIGKILL.

use csi_gateway_test_support as support;

use std::collections::HashMap;
use std::fs;
use std::time::Duration;

use csi::controller_client::ControllerClient;
use csi::error::{general_error::GeneralErrorCode, Value};
use csi::identity_client::IdentityClient;
use csi::node_client::NodeClient;
use csi::volume_capability::{access_mode::Mode, AccessMode, AccessType, BlockVolume, MountVolume};
use csi_gateway::dialect::proto::v0_1_oneof as csi;
use support::{Backend, Options};
use tonic::transport::Channel;

const GI: u64 = 1 << 30;

/// The `Result` of a reply, or a panic showing the draft `Error`.
macro_rules! ok {
    ($call:expr, $module:ident) => {
        match $call
            .await
            .expect("gRPC is always OK in the draft")
            .into_inner()
            .reply
        {
            Some(csi::$module::Reply::Result(r)) => r,
            other => panic!("expected a result, got {other:?}"),
        }
    };
}

/// The draft `Error` of a reply (gRPC must still be OK).
macro_rules! err {
    ($call:expr, $module:ident) => {
        match $call
            .await
            .expect("gRPC is always OK in the draft")
            .into_inner()
            .reply
        {
            Some(csi::$module::Reply::Error(e)) => e.value.expect("Error.value is set"),
            other => panic!("expected an error, got {other:?}"),
        }
    };
}

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

fn node(id: &str) -> Option<csi::NodeId> {
    Some(csi::NodeId {
        values: HashMap::from([("node_id".to_string(), id.to_string())]),
    })
}

fn attach(
    h: &csi::VolumeHandle,
    n: &str,
    cap: csi::VolumeCapability,
) -> csi::ControllerPublishVolumeRequest {
    csi::ControllerPublishVolumeRequest {
        version: ver(),
        volume_handle: Some(h.clone()),
        node_id: node(n),
        volume_capability: Some(cap),
        ..Default::default()
    }
}

fn detach(h: &csi::VolumeHandle, n: &str) -> csi::ControllerUnpublishVolumeRequest {
    csi::ControllerUnpublishVolumeRequest {
        version: ver(),
        volume_handle: Some(h.clone()),
        node_id: node(n),
        ..Default::default()
    }
}

fn publish(
    h: &csi::VolumeHandle,
    target: &std::path::Path,
    cap: csi::VolumeCapability,
) -> csi::NodePublishVolumeRequest {
    csi::NodePublishVolumeRequest {
        version: ver(),
        volume_handle: Some(h.clone()),
        target_path: target.display().to_string(),
        volume_capability: Some(cap),
        ..Default::default()
    }
}

fn unpublish(h: &csi::VolumeHandle, target: &std::path::Path) -> csi::NodeUnpublishVolumeRequest {
    csi::NodeUnpublishVolumeRequest {
        version: ver(),
        volume_handle: Some(h.clone()),
        target_path: target.display().to_string(),
        ..Default::default()
    }
}

fn delete(h: &csi::VolumeHandle) -> csi::DeleteVolumeRequest {
    csi::DeleteVolumeRequest {
        version: ver(),
        volume_handle: Some(h.clone()),
        ..Default::default()
    }
}

async fn start(opts: Options) -> (Backend, ControllerClient<Channel>, NodeClient<Channel>) {
    let b = Backend::start(opts).await;
    let ch = b.channel().await;
    (b, ControllerClient::new(ch.clone()), NodeClient::new(ch))
}

async fn create(
    c: &mut ControllerClient<Channel>,
    name: &str,
    cap: csi::VolumeCapability,
) -> csi::VolumeHandle {
    ok!(
        c.create_volume(create_req(name, cap, GI)),
        create_volume_response
    )
    .volume_info
    .unwrap()
    .handle
    .unwrap()
}

fn general(v: Value) -> (i32, bool) {
    match v {
        Value::GeneralError(g) => (g.error_code, g.caller_must_not_retry),
        other => panic!("expected a GeneralError, got {other:?}"),
    }
}

#[tokio::test]
async fn lifecycle_with_handle_metadata() {
    let (b, mut c, mut n) = start(Options::new("v0.1-oneof")).await;
    let mut id = IdentityClient::new(b.channel().await);
    let versions = ok!(
        id.get_supported_versions(csi::GetSupportedVersionsRequest {}),
        get_supported_versions_response
    );
    assert_eq!(
        versions.supported_versions,
        vec![csi::Version {
            major: 0,
            minor: 1,
            patch: 0
        }]
    );
    let info = ok!(
        id.get_plugin_info(csi::GetPluginInfoRequest { version: ver() }),
        get_plugin_info_response
    );
    assert_eq!(info.name, "reference.csi-gateway.dev");
    ok!(
        n.probe_node(csi::ProbeNodeRequest { version: ver() }),
        probe_node_response
    );
    let nid = ok!(
        n.get_node_id(csi::GetNodeIdRequest { version: ver() }),
        get_node_id_response
    )
    .node_id
    .unwrap();
    assert_eq!(
        nid.values,
        HashMap::from([("node_id".to_string(), "node-1".to_string())])
    );
    let caps = ok!(
        c.controller_get_capabilities(csi::ControllerGetCapabilitiesRequest { version: ver() }),
        controller_get_capabilities_response
    );
    assert_eq!(caps.capabilities.len(), 4);
    let ncaps = ok!(
        n.node_get_capabilities(csi::NodeGetCapabilitiesRequest { version: ver() }),
        node_get_capabilities_response
    );
    assert!(ncaps.capabilities.is_empty());

    let cap = mount(Mode::SingleNodeWriter);
    let created = ok!(
        c.create_volume(create_req("vol", cap.clone(), GI)),
        create_volume_response
    )
    .volume_info
    .unwrap();
    assert_eq!(created.capacity_bytes, GI);
    let h = created.handle.unwrap();
    // Non-empty metadata: the backing kind and path hint.
    assert_eq!(h.metadata.get("kind").map(String::as_str), Some("mount"));
    assert_eq!(
        h.metadata.get("backing"),
        Some(&format!("volumes/{}", h.id))
    );
    assert!(b.data_dir.join(h.metadata["backing"].as_str()).is_dir());
    let again = create(&mut c, "vol", cap.clone()).await;
    assert_eq!(again, h, "CreateVolume is idempotent");
    let listed = ok!(
        c.list_volumes(csi::ListVolumesRequest {
            version: ver(),
            ..Default::default()
        }),
        list_volumes_response
    );
    assert_eq!(
        listed.entries[0]
            .volume_info
            .as_ref()
            .unwrap()
            .handle
            .as_ref()
            .unwrap(),
        &h
    );
    let val = csi::ValidateVolumeCapabilitiesRequest {
        version: ver(),
        volume_info: Some(csi::VolumeInfo {
            capacity_bytes: GI,
            handle: Some(h.clone()),
        }),
        volume_capabilities: vec![cap.clone()],
    };
    assert!(
        ok!(
            c.validate_volume_capabilities(val),
            validate_volume_capabilities_response
        )
        .supported
    );

    let target = b.path("t");
    let published = ok!(
        c.controller_publish_volume(attach(&h, "node-1", cap.clone())),
        controller_publish_volume_response
    );
    assert_eq!(
        published
            .publish_volume_info
            .unwrap()
            .values
            .get("attachedNode")
            .map(String::as_str),
        Some("node-1")
    );
    ok!(
        c.controller_publish_volume(attach(&h, "node-1", cap.clone())),
        controller_publish_volume_response
    );
    ok!(
        n.node_publish_volume(publish(&h, &target, cap.clone())),
        node_publish_volume_response
    );
    ok!(
        n.node_publish_volume(publish(&h, &target, cap.clone())),
        node_publish_volume_response
    );
    fs::write(target.join("f"), b"draft").unwrap();
    assert_eq!(
        fs::read(b.data_dir.join(h.metadata["backing"].as_str()).join("f")).unwrap(),
        b"draft"
    );
    let blk = create(&mut c, "blk", block()).await;
    assert_eq!(blk.metadata.get("kind").map(String::as_str), Some("block"));
    let cap_left = ok!(
        c.get_capacity(csi::GetCapacityRequest {
            version: ver(),
            ..Default::default()
        }),
        get_capacity_response
    );
    assert_eq!(cap_left.available_capacity, 10 * GI - 2 * GI);

    ok!(
        n.node_unpublish_volume(unpublish(&h, &target)),
        node_unpublish_volume_response
    );
    assert!(!target.exists());
    ok!(
        c.controller_unpublish_volume(detach(&h, "node-1")),
        controller_unpublish_volume_response
    );
    ok!(c.delete_volume(delete(&h)), delete_volume_response);
    ok!(c.delete_volume(delete(&blk)), delete_volume_response);
    // The draft is not idempotent here: a second delete is VOLUME_DOES_NOT_EXIST.
    match err!(c.delete_volume(delete(&h)), delete_volume_response) {
        Value::DeleteVolumeError(e) => {
            assert_eq!(
                e.error_code,
                csi::error::delete_volume_error::DeleteVolumeErrorCode::VolumeDoesNotExist as i32
            )
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn handle_metadata_is_required() {
    let (b, mut c, mut n) = start(Options::new("v0.1-oneof")).await;
    let cap = mount(Mode::SingleNodeWriter);
    let h = create(&mut c, "vol", cap.clone()).await;
    let bare = csi::VolumeHandle {
        id: h.id.clone(),
        metadata: HashMap::new(),
    };
    let mut forged = h.clone();
    forged.metadata.insert("kind".into(), "block".into());
    for bad in [&bare, &forged] {
        match err!(c.delete_volume(delete(bad)), delete_volume_response) {
            Value::DeleteVolumeError(e) => assert_eq!(
                e.error_code,
                csi::error::delete_volume_error::DeleteVolumeErrorCode::InvalidVolumeHandle as i32
            ),
            other => panic!("{other:?}"),
        }
        match err!(c.controller_publish_volume(attach(bad, "node-1", cap.clone())), controller_publish_volume_response) {
            Value::ControllerPublishVolumeError(e) => assert_eq!(e.error_code, csi::error::controller_publish_volume_error::ControllerPublishVolumeErrorCode::InvalidVolumeHandle as i32),
            other => panic!("{other:?}"),
        }
        match err!(c.controller_unpublish_volume(detach(bad, "node-1")), controller_unpublish_volume_response) {
            Value::ControllerUnpublishVolumeError(e) => assert_eq!(e.error_code, csi::error::controller_unpublish_volume_error::ControllerUnpublishVolumeErrorCode::InvalidVolumeHandle as i32),
            other => panic!("{other:?}"),
        }
        let val = csi::ValidateVolumeCapabilitiesRequest {
            version: ver(),
            volume_info: Some(csi::VolumeInfo {
                capacity_bytes: GI,
                handle: Some(bad.clone()),
            }),
            volume_capabilities: vec![cap.clone()],
        };
        match err!(c.validate_volume_capabilities(val), validate_volume_capabilities_response) {
            Value::ValidateVolumeCapabilitiesError(e) => assert_eq!(e.error_code, csi::error::validate_volume_capabilities_error::ValidateVolumeCapabilitiesErrorCode::InvalidVolumeInfo as i32),
            other => panic!("{other:?}"),
        }
        match err!(n.node_publish_volume(publish(bad, &b.path("t"), cap.clone())), node_publish_volume_response) {
            Value::NodePublishVolumeError(e) => assert_eq!(e.error_code, csi::error::node_publish_volume_error::NodePublishVolumeErrorCode::InvalidVolumeHandle as i32),
            other => panic!("{other:?}"),
        }
        match err!(n.node_unpublish_volume(unpublish(bad, &b.path("t"))), node_unpublish_volume_response) {
            Value::NodeUnpublishVolumeError(e) => assert_eq!(e.error_code, csi::error::node_unpublish_volume_error::NodeUnpublishVolumeErrorCode::InvalidVolumeHandle as i32),
            other => panic!("{other:?}"),
        }
    }
    // The volume is untouched by all of that.
    ok!(c.delete_volume(delete(&h)), delete_volume_response);
}

#[tokio::test]
async fn typed_and_general_errors() {
    use csi::error::controller_publish_volume_error::ControllerPublishVolumeErrorCode as P;
    use csi::error::controller_unpublish_volume_error::ControllerUnpublishVolumeErrorCode as U;
    use csi::error::create_volume_error::CreateVolumeErrorCode as C;
    let (b, mut c, mut n) = start(
        Options::new("v0.1-oneof")
            .arg("--peer-node=node-2")
            .arg("--max-volumes-per-node=1"),
    )
    .await;
    let mut id = IdentityClient::new(b.channel().await);
    // Version: missing → MISSING_REQUIRED_FIELD, unsupported → UNSUPPORTED_REQUEST_VERSION; both must-not-retry.
    let g = general(err!(
        id.get_plugin_info(csi::GetPluginInfoRequest { version: None }),
        get_plugin_info_response
    ));
    assert_eq!(g, (GeneralErrorCode::MissingRequiredField as i32, true));
    let v9 = Some(csi::Version {
        major: 9,
        minor: 9,
        patch: 9,
    });
    let g = general(err!(
        n.get_node_id(csi::GetNodeIdRequest { version: v9 }),
        get_node_id_response
    ));
    assert_eq!(
        g,
        (GeneralErrorCode::UnsupportedRequestVersion as i32, true)
    );
    let cap = mount(Mode::SingleNodeWriter);
    let create_code = |v: Value| match v {
        Value::CreateVolumeError(e) => e.error_code,
        other => panic!("{other:?}"),
    };
    // CreateVolume's own codes.
    let mut r = create_req("x", cap.clone(), GI);
    r.parameters = HashMap::from([("colour".into(), "red".into())]);
    assert_eq!(
        create_code(err!(c.create_volume(r), create_volume_response)),
        C::UnsupportedParameterKey as i32
    );
    let mut r = create_req("x", cap.clone(), GI);
    r.parameters = HashMap::from([("iops".into(), "lots".into())]);
    assert_eq!(
        create_code(err!(c.create_volume(r), create_volume_response)),
        C::InvalidParameterValue as i32
    );
    assert_eq!(
        create_code(err!(
            c.create_volume(create_req("x", cap.clone(), 20 * GI)),
            create_volume_response
        )),
        C::UnsupportedCapacityRange as i32
    );
    let a = create(&mut c, "a", cap.clone()).await;
    assert_eq!(
        create_code(err!(
            c.create_volume(create_req("a", block(), GI)),
            create_volume_response
        )),
        C::VolumeAlreadyExists as i32
    );
    let g = general(err!(
        c.create_volume(create_req("", cap.clone(), GI)),
        create_volume_response
    ));
    assert_eq!(g, (GeneralErrorCode::MissingRequiredField as i32, true));
    // Pool exhausted: no CreateVolume code for it → GeneralError, may retry.
    let mut small = Options::new("v0.1-oneof");
    small.pool_size = "1Gi".into();
    let (_b2, mut c2, _) = start(small).await;
    create(&mut c2, "fill", cap.clone()).await;
    let g = general(err!(
        c2.create_volume(create_req("more", cap.clone(), 1)),
        create_volume_response
    ));
    assert_eq!(g, (GeneralErrorCode::Undefined as i32, false));
    // ControllerPublish codes.
    let publish_err = |v: Value| match v {
        Value::ControllerPublishVolumeError(e) => (e.error_code, e.node_ids),
        other => panic!("{other:?}"),
    };
    let (code, _) = publish_err(err!(
        c.controller_publish_volume(attach(&a, "node-9", cap.clone())),
        controller_publish_volume_response
    ));
    assert_eq!(code, P::NodeDoesNotExist as i32);
    let mut no_key = attach(&a, "node-1", cap.clone());
    no_key.node_id = Some(csi::NodeId {
        values: HashMap::from([("host".into(), "x".into())]),
    });
    let (code, _) = publish_err(err!(
        c.controller_publish_volume(no_key),
        controller_publish_volume_response
    ));
    assert_eq!(code, P::InvalidNodeId as i32);
    let (code, _) = publish_err(err!(
        c.controller_publish_volume(attach(&a, "node-1", block())),
        controller_publish_volume_response
    ));
    assert_eq!(code, P::UnsupportedVolumeType as i32);
    ok!(
        c.controller_publish_volume(attach(&a, "node-1", cap.clone())),
        controller_publish_volume_response
    );
    let (code, nodes) = publish_err(err!(
        c.controller_publish_volume(attach(&a, "node-2", cap.clone())),
        controller_publish_volume_response
    ));
    assert_eq!(code, P::VolumeAlreadyPublished as i32);
    assert_eq!(
        nodes,
        vec![node("node-1").unwrap()],
        "the draft requires the node ids it is attached to"
    );
    let second = create(&mut c, "second", cap.clone()).await;
    let g = general(err!(
        c.controller_publish_volume(attach(&second, "node-1", cap.clone())),
        controller_publish_volume_response
    ));
    assert_eq!(
        g,
        (GeneralErrorCode::Undefined as i32, false),
        "max volumes per node: may retry after a detach"
    );
    // ControllerUnpublish: not attached to that node is an error in the draft.
    match err!(
        c.controller_unpublish_volume(detach(&a, "node-2")),
        controller_unpublish_volume_response
    ) {
        Value::ControllerUnpublishVolumeError(e) => {
            assert_eq!(e.error_code, U::VolumeNotAttachedToSpecifiedNode as i32)
        }
        other => panic!("{other:?}"),
    }
    match err!(
        c.controller_unpublish_volume(detach(&a, "node-9")),
        controller_unpublish_volume_response
    ) {
        Value::ControllerUnpublishVolumeError(e) => {
            assert_eq!(e.error_code, U::NodeDoesNotExist as i32)
        }
        other => panic!("{other:?}"),
    }
    // Deleting an attached volume: GeneralError, may retry once detached.
    let g = general(err!(c.delete_volume(delete(&a)), delete_volume_response));
    assert_eq!(g, (GeneralErrorCode::Undefined as i32, false));
    // Unknown volumes.
    let ghost = csi::VolumeHandle {
        id: "vol-nope".into(),
        metadata: HashMap::new(),
    };
    match err!(n.node_unpublish_volume(unpublish(&ghost, &b.path("t"))), node_unpublish_volume_response) {
        Value::NodeUnpublishVolumeError(e) => assert_eq!(e.error_code, csi::error::node_unpublish_volume_error::NodeUnpublishVolumeErrorCode::VolumeDoesNotExist as i32),
        other => panic!("{other:?}"),
    }
    // A bad paging token: GeneralError, must not retry the same token.
    let g = general(err!(
        c.list_volumes(csi::ListVolumesRequest {
            version: ver(),
            max_entries: 0,
            starting_token: "zz".into()
        }),
        list_volumes_response
    ));
    assert_eq!(g, (GeneralErrorCode::Undefined as i32, true));
}

#[tokio::test]
async fn concurrent_create_is_operation_pending() {
    let (b, c, _) = start(Options::new("v0.1-oneof").arg("--fault-delay=3s")).await;
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
    let mut second = c.clone();
    match err!(
        second.create_volume(create_req("slow", mount(Mode::SingleNodeWriter), GI)),
        create_volume_response
    ) {
        Value::CreateVolumeError(e) => assert_eq!(
            e.error_code,
            csi::error::create_volume_error::CreateVolumeErrorCode::OperationPendingForVolume
                as i32
        ),
        other => panic!("{other:?}"),
    }
    let done = pending.await.unwrap().unwrap().into_inner();
    assert!(matches!(
        done.reply,
        Some(csi::create_volume_response::Reply::Result(_))
    ));
}

#[tokio::test]
async fn state_survives_restart_and_sigkill() {
    let (mut b, mut c, mut n) = start(Options::new("v0.1-oneof")).await;
    let cap = mount(Mode::SingleNodeWriter);
    let h = create(&mut c, "keep", cap.clone()).await;
    ok!(
        c.controller_publish_volume(attach(&h, "node-1", cap.clone())),
        controller_publish_volume_response
    );
    let target = b.path("t");
    ok!(
        n.node_publish_volume(publish(&h, &target, cap.clone())),
        node_publish_volume_response
    );
    drop((c, n));
    assert!(b.terminate().success());
    b.restart(Some(Options::new("v0.1-oneof").arg("--fault-delay=30s")))
        .await;
    let mut c = ControllerClient::new(b.channel().await);
    let listed = ok!(
        c.list_volumes(csi::ListVolumesRequest {
            version: ver(),
            ..Default::default()
        }),
        list_volumes_response
    );
    assert_eq!(
        listed.entries[0]
            .volume_info
            .as_ref()
            .unwrap()
            .handle
            .as_ref()
            .unwrap(),
        &h,
        "same handle and metadata after restart"
    );
    // The attachment survived: deleting is refused while attached (may retry after a detach).
    let g = general(err!(c.delete_volume(delete(&h)), delete_volume_response));
    assert!(!g.1, "may retry once detached");
    // SIGKILL mid-create, then recovery.
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
    b.restart(Some(Options::new("v0.1-oneof"))).await;
    assert_eq!(
        fs::read_dir(&vols).unwrap().count(),
        1,
        "the orphan is gone"
    );
    let ch = b.channel().await;
    let (mut c, mut n) = (ControllerClient::new(ch.clone()), NodeClient::new(ch));
    let listed = ok!(
        c.list_volumes(csi::ListVolumesRequest {
            version: ver(),
            ..Default::default()
        }),
        list_volumes_response
    );
    assert_eq!(listed.entries.len(), 1);
    ok!(
        n.node_unpublish_volume(unpublish(&h, &target)),
        node_unpublish_volume_response
    );
    ok!(
        c.controller_unpublish_volume(detach(&h, "node-1")),
        controller_unpublish_volume_response
    );
    ok!(c.delete_volume(delete(&h)), delete_volume_response);
}

/// Required fields come before the volume's existence: a request for an unknown volume that
/// also lacks a required field is MISSING_REQUIRED_FIELD, not VOLUME_DOES_NOT_EXIST (what every
/// later revision's tables imply, and what clients of every generation check).
#[tokio::test]
async fn required_fields_are_checked_before_the_volume_exists() {
    let (b, mut c, mut n) = start(Options::new("v0.1-oneof")).await;
    let cap = mount(Mode::SingleNodeWriter);
    let ghost = csi::VolumeHandle {
        id: "no-such-volume".into(),
        metadata: HashMap::new(),
    };
    let missing = |v: Value| match v {
        Value::GeneralError(g) => {
            assert_eq!(
                g.error_code,
                GeneralErrorCode::MissingRequiredField as i32,
                "{g:?}"
            );
            assert!(g.caller_must_not_retry, "{g:?}");
            g.error_description
        }
        other => panic!("expected MISSING_REQUIRED_FIELD, got {other:?}"),
    };
    let target = b.path("t");
    let mut p = publish(&ghost, &target, cap.clone());
    p.volume_capability = None;
    let d = missing(err!(n.node_publish_volume(p), node_publish_volume_response));
    assert!(d.contains("volume_capability"), "{d}");
    let mut p = publish(&ghost, &target, cap.clone());
    p.target_path.clear();
    let d = missing(err!(n.node_publish_volume(p), node_publish_volume_response));
    assert!(d.contains("target_path"), "{d}");
    let mut u = unpublish(&ghost, &target);
    u.target_path.clear();
    let d = missing(err!(
        n.node_unpublish_volume(u),
        node_unpublish_volume_response
    ));
    assert!(d.contains("target_path"), "{d}");
    let mut a = attach(&ghost, "node-1", cap.clone());
    a.volume_capability = None;
    let d = missing(err!(
        c.controller_publish_volume(a),
        controller_publish_volume_response
    ));
    assert!(d.contains("volume_capability"), "{d}");
    // With every field present, the volume's absence is the answer.
    match err!(
        n.node_publish_volume(publish(&ghost, &target, cap)),
        node_publish_volume_response
    ) {
        Value::NodePublishVolumeError(e) => assert_eq!(
            e.error_code,
            csi::error::node_publish_volume_error::NodePublishVolumeErrorCode::VolumeDoesNotExist
                as i32
        ),
        other => panic!("{other:?}"),
    }
}
