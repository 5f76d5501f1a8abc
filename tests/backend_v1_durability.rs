//! State across a clean restart and across a SIGKILL mid-operation, socket hygiene and
//! start-up checks, for the v1 dialect.

use csi_gateway_test_support as support;

use std::fs;
use std::time::Duration;

use csi::controller_client::ControllerClient;
use csi::node_client::NodeClient;
use csi::volume_capability::{access_mode::Mode, AccessMode, AccessType, MountVolume};
use csi_gateway::dialect::proto::v1 as csi;
use support::{Backend, Options};

const GI: i64 = 1 << 30;

fn cap() -> csi::VolumeCapability {
    csi::VolumeCapability {
        access_mode: Some(AccessMode {
            mode: Mode::SingleNodeWriter as i32,
        }),
        access_type: Some(AccessType::Mount(MountVolume::default())),
    }
}

fn create_req(name: &str) -> csi::CreateVolumeRequest {
    csi::CreateVolumeRequest {
        name: name.into(),
        capacity_range: Some(csi::CapacityRange {
            required_bytes: GI,
            limit_bytes: 0,
        }),
        volume_capabilities: vec![cap()],
        ..Default::default()
    }
}

#[tokio::test]
async fn restart_keeps_volumes_snapshots_attachments_and_publications() {
    let mut b = Backend::start(Options::new("v1")).await;
    let ch = b.channel().await;
    let (mut c, mut n) = (ControllerClient::new(ch.clone()), NodeClient::new(ch));
    let v = c
        .create_volume(create_req("keep"))
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap();
    let snap = c
        .create_snapshot(csi::CreateSnapshotRequest {
            source_volume_id: v.volume_id.clone(),
            name: "s".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .snapshot
        .unwrap();
    let attach = csi::ControllerPublishVolumeRequest {
        volume_id: v.volume_id.clone(),
        node_id: "node-1".into(),
        volume_capability: Some(cap()),
        ..Default::default()
    };
    c.controller_publish_volume(attach).await.unwrap();
    let (staging, target) = (b.path("s"), b.path("t"));
    let stage = csi::NodeStageVolumeRequest {
        volume_id: v.volume_id.clone(),
        staging_target_path: staging.display().to_string(),
        volume_capability: Some(cap()),
        ..Default::default()
    };
    n.node_stage_volume(stage.clone()).await.unwrap();
    let publish = csi::NodePublishVolumeRequest {
        volume_id: v.volume_id.clone(),
        staging_target_path: staging.display().to_string(),
        target_path: target.display().to_string(),
        volume_capability: Some(cap()),
        ..Default::default()
    };
    n.node_publish_volume(publish.clone()).await.unwrap();
    fs::write(target.join("before"), b"kept").unwrap();

    // Clean shutdown: exit 0 and the socket is gone.
    drop((c, n));
    let status = b.terminate();
    assert!(status.success(), "SIGTERM exits cleanly: {status}");
    assert!(!b.socket.exists(), "the socket is removed on shutdown");
    // One log line per RPC, with the full method and the result code.
    let log = b.log_text();
    assert!(
        log.contains("method=/csi.v1.Controller/CreateVolume code=Ok"),
        "{log}"
    );
    assert!(
        log.contains("method=/csi.v1.Node/NodePublishVolume code=Ok"),
        "{log}"
    );
    assert_eq!(
        fs::read_dir(b.socket.parent().unwrap()).unwrap().count(),
        0,
        "nothing else beside the socket"
    );

    // Simulate a reboot: the kernel forgets the mounts (or the links are gone); state remains.
    if support::bind_mounts_work() && support::is_mount_point(&target) {
        support::unmount_under(&b.work_dir);
    } else {
        fs::remove_file(&target).unwrap();
        fs::remove_file(&staging).unwrap();
    }
    assert!(!target.join("before").exists());

    b.restart(None).await;
    let ch = b.channel().await;
    let (mut c, mut n) = (ControllerClient::new(ch.clone()), NodeClient::new(ch));
    // The CO stages and publishes again after a reboot: both are remade, not just acknowledged.
    n.node_stage_volume(stage).await.unwrap();
    n.node_publish_volume(publish.clone()).await.unwrap();
    assert_eq!(fs::read(target.join("before")).unwrap(), b"kept");
    let got = c
        .controller_get_volume(csi::ControllerGetVolumeRequest {
            volume_id: v.volume_id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(got.volume.unwrap(), v);
    assert_eq!(
        got.status.unwrap().published_node_ids,
        vec!["node-1".to_string()]
    );
    let snaps = c
        .list_snapshots(csi::ListSnapshotsRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        snaps.entries[0].snapshot.as_ref().unwrap().snapshot_id,
        snap.snapshot_id
    );
    // The publication is remembered: repeating it is OK, a conflicting one is refused.
    n.node_publish_volume(publish.clone()).await.unwrap();
    let mut ro = publish;
    ro.readonly = true;
    assert_eq!(
        n.node_publish_volume(ro).await.unwrap_err().code(),
        tonic::Code::AlreadyExists
    );
    // And the published volume cannot be deleted.
    let del = c
        .delete_volume(csi::DeleteVolumeRequest {
            volume_id: v.volume_id.clone(),
            ..Default::default()
        })
        .await;
    assert_eq!(del.unwrap_err().code(), tonic::Code::FailedPrecondition);
    // Ids are not reused after a restart.
    let w = c
        .create_volume(create_req("new"))
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap();
    assert_ne!(w.volume_id, v.volume_id);
    let unpub = csi::NodeUnpublishVolumeRequest {
        volume_id: v.volume_id.clone(),
        target_path: target.display().to_string(),
    };
    n.node_unpublish_volume(unpub).await.unwrap();
    let unstage = csi::NodeUnstageVolumeRequest {
        volume_id: v.volume_id,
        staging_target_path: staging.display().to_string(),
    };
    n.node_unstage_volume(unstage).await.unwrap();
}

#[tokio::test]
async fn sigkill_mid_create_recovers_a_consistent_state() {
    let mut b = Backend::start(Options::new("v1").arg("--fault-delay=30s")).await;
    let mut c = ControllerClient::new(b.channel().await);
    let committed = {
        // One volume committed before the crash (the delay applies to it too, so use a task
        // and wait for its commit through the state file).
        let mut c2 = c.clone();
        let t = tokio::spawn(async move { c2.create_volume(create_req("doomed")).await });
        let volumes = b.data_dir.join("volumes");
        support::eventually(
            Duration::from_secs(20),
            "backing data of the in-flight create",
            || {
                fs::read_dir(&volumes)
                    .map(|d| d.count() == 1)
                    .unwrap_or(false)
            },
        )
        .await;
        b.kill();
        assert!(t.await.unwrap().is_err(), "the client sees the crash");
        fs::read_dir(&volumes).unwrap().count()
    };
    assert_eq!(committed, 1, "the crash left backing data without state");
    b.restart(Some(Options::new("v1"))).await;
    assert_eq!(
        fs::read_dir(b.data_dir.join("volumes")).unwrap().count(),
        0,
        "the orphan was reconciled away"
    );
    c = ControllerClient::new(b.channel().await);
    let list = c
        .list_volumes(csi::ListVolumesRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert!(list.entries.is_empty());
    let cap = c
        .get_capacity(csi::GetCapacityRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(cap.available_capacity, 10 * GI, "no capacity leaked");
    // The name is free again, and state written after the crash survives another SIGKILL.
    let v = c
        .create_volume(create_req("doomed"))
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap();
    b.kill();
    b.restart(None).await;
    let mut c = ControllerClient::new(b.channel().await);
    let list = c
        .list_volumes(csi::ListVolumesRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(list.entries.len(), 1);
    assert_eq!(
        list.entries[0].volume.as_ref().unwrap().volume_id,
        v.volume_id
    );
    assert!(b.data_dir.join("volumes").join(&v.volume_id).is_dir());
}

#[tokio::test]
async fn stale_socket_is_replaced_and_a_live_one_refused() {
    let mut b = Backend::start(Options::new("v1")).await;
    // A live plugin holds the socket: a second one must refuse to steal it.
    let out = b.command(&b.opts).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(64),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("already listening"));
    // After a crash the socket file stays behind; a restart removes it and listens again.
    b.kill();
    assert!(b.socket.exists(), "SIGKILL leaves a stale socket");
    b.restart(None).await;
    let mut c = ControllerClient::new(b.channel().await);
    c.list_volumes(csi::ListVolumesRequest::default())
        .await
        .unwrap();
}

#[tokio::test]
async fn startup_refuses_bad_configuration() {
    let b = Backend::start(Options::new("v1")).await;
    // The data directory may not be the socket's directory.
    let out = std::process::Command::new(support::binary())
        .arg(format!(
            "--endpoint=unix://{}",
            b.path("csi.sock").display()
        ))
        .arg(format!("--data-dir={}", b.work_dir.display()))
        .arg("--publish-mode=symlink")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&out.stderr).contains("socket's directory"));
    // Bad flags are refused by the parser (clap exits 2) with the flag named.
    for (flag, needle) in [
        ("--pool-size=lots", "pool-size"),
        ("--publish-mode=auto", "publish-mode"),
        ("--dialect=v9", "dialect"),
        ("--topology=novalue", "topology"),
    ] {
        let out = std::process::Command::new(support::binary())
            .arg("--endpoint=/tmp/x.sock")
            .arg("--data-dir=/tmp/x")
            .arg(flag)
            .output()
            .unwrap();
        assert!(!out.status.success());
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(needle),
            "{flag}"
        );
    }
    // Two plugins on one data directory: the second is refused (its socket differs).
    let out = std::process::Command::new(support::binary())
        .arg(format!("--endpoint={}", b.path("second.sock").display()))
        .arg(format!("--data-dir={}", b.data_dir.display()))
        .arg("--publish-mode=symlink")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&out.stderr).contains("in use by another"));
    assert!(!b.path("second.sock").exists());
    // CSI_ENDPOINT works as well as --endpoint (bare path form).
    let sock = b.path("env.sock");
    let mut child = std::process::Command::new(support::binary())
        .env("CSI_ENDPOINT", &sock)
        .arg(format!("--data-dir={}", b.path("envdata").display()))
        .arg("--publish-mode=symlink")
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    support::eventually(Duration::from_secs(20), "the CSI_ENDPOINT socket", || {
        sock.exists()
    })
    .await;
    let mut c = ControllerClient::new(support::connect(&sock).await);
    c.list_volumes(csi::ListVolumesRequest::default())
        .await
        .unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
}

/// Every dialect starts, says which dialect it serves, and shuts down cleanly (SIGTERM → exit 0,
/// socket removed). What each dialect answers is covered by its own test file.
#[tokio::test]
async fn every_dialect_starts_and_stops_cleanly() {
    for dialect in support::DIALECTS {
        let mut b = Backend::start(Options::new(dialect)).await;
        assert!(b.endpoint().starts_with("unix:///"));
        let status = b.terminate();
        assert!(status.success(), "{dialect}: {status}");
        assert!(!b.socket.exists(), "{dialect}: socket removed");
        assert!(
            b.log_text().contains(&format!("dialect={dialect}")),
            "{dialect}"
        );
    }
}

#[tokio::test]
async fn help_documents_every_flag() {
    let out = std::process::Command::new(support::binary())
        .arg("--help")
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--endpoint",
        "--data-dir",
        "--dialect",
        "--driver-name",
        "--node-id",
        "--pool-size",
        "--max-volumes-per-node",
        "--topology",
        "--publish-mode",
        "--require-staging",
        "CSI_ENDPOINT",
    ] {
        assert!(help.contains(flag), "--help lacks {flag}:\n{help}");
    }
}

/// `--publish-mode bind` where mounts are not permitted fails at start-up with a clear error
/// (exit 64) instead of silently falling back to symlinks. As root, the unprivileged case is
/// produced with `setpriv` (uid/gid 65534, no capabilities).
#[tokio::test]
async fn bind_mode_without_mount_privilege_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    for d in [dir.path().to_path_buf(), dir.path().join("sock")] {
        fs::create_dir_all(&d).unwrap();
        fs::set_permissions(&d, fs::Permissions::from_mode(0o777)).unwrap();
    }
    let args = [
        format!("--endpoint={}", dir.path().join("sock/csi.sock").display()),
        format!("--data-dir={}", dir.path().join("data").display()),
        "--publish-mode=bind".to_string(),
    ];
    let mut cmd = if support::bind_mounts_work() {
        let setpriv = ["/usr/bin/setpriv", "/bin/setpriv"]
            .into_iter()
            .find(|p| std::path::Path::new(p).exists());
        let Some(setpriv) = setpriv else {
            eprintln!("skipped: bind mounts work and setpriv is unavailable to drop privileges");
            return;
        };
        let mut c = std::process::Command::new(setpriv);
        c.args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
        ])
        .arg(support::binary());
        c
    } else {
        std::process::Command::new(support::binary())
    };
    let out = cmd.args(&args).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{stderr}");
    assert!(stderr.contains("--publish-mode symlink"), "{stderr}");
    assert!(
        !dir.path().join("sock/csi.sock").exists(),
        "nothing is served"
    );
}
