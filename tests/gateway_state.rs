//! Durable gateway state, against the built binaries: VolumeHandle metadata that survives a
//! SIGKILL in the middle of a stream of CreateVolume calls (embedded store and etcd), gateway
//! replicas sharing etcd, and staging emulation — reference counting, and convergence after a
//! crash at every step (the gateway's hidden `--test-crash-at` hook).
//!
//! The etcd tests start a real etcd (`/usr/bin/etcd`, Debian's `etcd-server`) on free loopback
//! ports; without it they fail, saying so.

use csi_gateway_test_support as support;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use csi_gateway::dialect::Dialect;
use support::etcd::Etcd;
use support::front::{Front, Volume};
use support::gateway::Gateway;
use support::{Backend, Options, PROCESS_TIMEOUT};

/// The same volume as a client that knows only its id sees it (v1 DeleteVolume).
fn id_only(id: &str) -> Volume {
    Volume {
        id: id.to_string(),
        context: HashMap::new(),
        capacity: 0,
    }
}

/// Creates volumes through `gateway` (v1 front) until at least `before_kill` were answered,
/// SIGKILLs and restarts the gateway while calls are still being made, and returns every id
/// a client received.
async fn create_stream_across_a_sigkill(gateway: &mut Gateway, before_kill: usize) -> Vec<String> {
    let received = Arc::new(Mutex::new(Vec::new()));
    let front = Front::new(Dialect::V1, gateway.channel().await);
    let stream = tokio::spawn({
        let received = received.clone();
        async move {
            // Stops at the first failure: the gateway died under it.
            for i in 0..10_000 {
                match front
                    .create(&format!("vol-{i}"), 1 << 20, &HashMap::new())
                    .await
                {
                    Ok(v) => received.lock().unwrap().push(v.id),
                    Err(_) => return,
                }
            }
        }
    });
    let deadline = Instant::now() + PROCESS_TIMEOUT;
    while received.lock().unwrap().len() < before_kill {
        assert!(Instant::now() < deadline, "the create stream stalled");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    gateway.kill_and_restart().await;
    tokio::time::timeout(PROCESS_TIMEOUT, stream)
        .await
        .expect("the stream ends once the gateway is gone")
        .unwrap();
    let ids = received.lock().unwrap().clone();
    assert!(ids.len() >= before_kill);
    ids
}

/// Every id resolves to its metadata after the restart: the draft plugin accepts a
/// DeleteVolume only with exactly the metadata its CreateVolume returned.
async fn every_id_deletes_by_id_alone(gateway: &Gateway, ids: &[String]) {
    let f = Front::new(Dialect::V1, gateway.channel().await);
    for id in ids {
        f.delete(&id_only(id), &HashMap::new())
            .await
            .unwrap_or_else(|e| panic!("DeleteVolume {id} after the restart: {e:?}"));
    }
}

#[tokio::test]
async fn handles_survive_a_sigkill_during_a_create_stream_embedded() {
    let backend = Backend::start(Options::new("v0.1-oneof")).await;
    let mut gateway = Gateway::start(&backend.socket, "v0.1", &[]).await;
    let ids = create_stream_across_a_sigkill(&mut gateway, 5).await;
    every_id_deletes_by_id_alone(&gateway, &ids).await;
}

#[tokio::test]
async fn handles_survive_a_sigkill_during_a_create_stream_etcd() {
    let etcd = Etcd::start().await;
    let backend = Backend::start(Options::new("v0.1-oneof")).await;
    let flags = [
        "--state-backend=etcd".to_string(),
        format!("--etcd-endpoints={}", etcd.endpoint),
    ];
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let mut gateway = Gateway::start(&backend.socket, "v0.1", &flags).await;
    assert!(gateway.log_text().contains("durable state: etcd"));
    let ids = create_stream_across_a_sigkill(&mut gateway, 5).await;
    // Nothing of it is in the gateway's own directory: a fresh state dir proves it is etcd's.
    gateway.set_flag(&format!(
        "--state-dir={}",
        gateway.root().join("elsewhere").display()
    ));
    gateway.kill_and_restart().await;
    every_id_deletes_by_id_alone(&gateway, &ids).await;
}

#[tokio::test]
async fn replicas_sharing_etcd_see_each_others_handles() {
    let etcd = Etcd::start().await;
    let backend = Backend::start(Options::new("v0.1-oneof")).await;
    let shared = [
        "--state-backend=etcd".to_string(),
        format!("--etcd-endpoints={}", etcd.endpoint),
        "--etcd-prefix=/replicas/".to_string(),
    ];
    let shared: Vec<&str> = shared.iter().map(String::as_str).collect();
    let a = Gateway::start(&backend.socket, "v0.1", &shared).await;
    let b = Gateway::start(&backend.socket, "v0.1", &shared).await;
    let mut other = shared.clone();
    other[2] = "--etcd-prefix=/another-deployment/";
    let c = Gateway::start(&backend.socket, "v0.1", &other).await;

    let v = Front::new(Dialect::V1, a.channel().await)
        .create("shared-vol", 1 << 20, &HashMap::new())
        .await
        .unwrap();
    // Control: a gateway on another prefix does not know the handle, and the plugin refuses.
    Front::new(Dialect::V1, c.channel().await)
        .delete(&id_only(&v.id), &HashMap::new())
        .await
        .expect_err("a gateway without the handle cannot delete");
    Front::new(Dialect::V1, b.channel().await)
        .delete(&id_only(&v.id), &HashMap::new())
        .await
        .expect("replica B resolves the handle replica A stored");
}

#[tokio::test]
async fn a_bad_etcd_setting_exits_64_and_an_unreachable_etcd_fails_start_up() {
    let dir = tempfile::tempdir().unwrap();
    let run = |extra: &[&str]| {
        std::process::Command::new(support::gateway::binary())
            .arg("run")
            .arg(format!(
                "--listen=unix://{}",
                dir.path().join("gw.sock").display()
            ))
            .arg("--upstream=unix:///nonexistent/csi.sock")
            .arg(format!(
                "--state-dir={}",
                dir.path().join("state").display()
            ))
            .arg("--metrics-listen=")
            .args(extra)
            .output()
            .unwrap()
    };
    for extra in [
        &["--state-backend=etcd"][..],
        &[
            "--state-backend=etcd",
            "--etcd-endpoints=https://127.0.0.1:2379",
        ],
        &["--state-backend=zookeeper"],
    ] {
        let out = run(extra);
        assert_eq!(out.status.code(), Some(64), "{extra:?}: {out:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("state."),
            "{out:?}"
        );
    }
    // A port nobody listens on: refused at start-up, naming etcd, not at the first call.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = run(&[
        "--state-backend=etcd",
        &format!("--etcd-endpoints=http://127.0.0.1:{port}"),
    ]);
    assert!(!out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("etcd"),
        "{out:?}"
    );
}

/// Successful calls of `rpc` in the v1 plugin's log.
fn served(backend: &Backend, rpc: &str) -> usize {
    let method = format!("/csi.v1.Node/{rpc}");
    backend
        .log_text()
        .lines()
        .filter(|l| l.contains(&method) && l.contains("code=Ok"))
        .count()
}

fn staging_of(dir: &Path, volume_id: &str) -> PathBuf {
    dir.join(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(volume_id))
}

/// The mount state, where bind mounts work here (root); the plugin's log otherwise.
fn mounted(p: &Path) -> bool {
    if support::bind_mounts_work() {
        support::is_mount_point(p)
    } else {
        p.exists()
    }
}

fn free_addr() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().to_string()
}

#[tokio::test]
async fn staging_is_emulated_for_a_pre_staging_front_and_counted() {
    // v0.1 on the embedded store; the draft on etcd (its records, and the gauge counted back
    // from them at start-up).
    let etcd = Etcd::start().await;
    let on_etcd = [
        "--state-backend=etcd".to_string(),
        format!("--etcd-endpoints={}", etcd.endpoint),
    ];
    for (dialect, store) in [(Dialect::V0_1, &[][..]), (Dialect::V0_1Oneof, &on_etcd[..])] {
        staging_lifecycle(dialect, store).await;
    }
}

async fn staging_lifecycle(dialect: Dialect, store: &[String]) {
    let backend = Backend::start(Options::new("v1").arg("--require-staging=true")).await;
    let staging_dir = backend.path("staging");
    let metrics = free_addr();
    let mut flags = vec![
        format!("--staging-dir={}", staging_dir.display()),
        format!("--metrics-listen={metrics}"),
    ];
    flags.extend(store.iter().cloned());
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let mut gateway = Gateway::start(&backend.socket, dialect.name(), &flags).await;
    let f = Front::new(dialect, gateway.channel().await);
    assert!(
        !f.node_caps()
            .await
            .unwrap()
            .iter()
            .any(|c| c.contains("STAGE")),
        "{dialect}: a pre-staging client is never offered STAGE_UNSTAGE_VOLUME"
    );
    let v = f.create("vol-s", 1 << 20, &HashMap::new()).await.unwrap();
    let node = f.node_id().await.unwrap();
    let publish = f.controller_publish(&v, &node).await.unwrap();
    let staging = staging_of(&staging_dir, &v.id);
    let (t1, t2) = (backend.path("t1"), backend.path("t2"));

    f.node_publish(&v, &publish, None, &t1).await.unwrap();
    assert_eq!(served(&backend, "NodeStageVolume"), 1, "{dialect}");
    assert!(mounted(&staging) && mounted(&t1), "{dialect}");
    f.node_publish(&v, &publish, None, &t2).await.unwrap();
    f.node_publish(&v, &publish, None, &t1).await.unwrap(); // a retry
    assert_eq!(
        served(&backend, "NodeStageVolume"),
        1,
        "{dialect}: staged once"
    );
    assert_eq!(
        support::staging_references(&metrics),
        2.0,
        "{dialect}: a retry is counted once"
    );
    // A restart counts the references back from the store.
    gateway.kill_and_restart().await;
    assert_eq!(
        support::staging_references(&metrics),
        2.0,
        "{dialect}: after a restart"
    );
    let f = Front::new(dialect, gateway.channel().await);

    f.node_unpublish(&v, &t1).await.unwrap();
    assert!(mounted(&staging), "{dialect}: t2 still holds the staging");
    assert_eq!(served(&backend, "NodeUnstageVolume"), 0, "{dialect}");
    assert_eq!(support::staging_references(&metrics), 1.0, "{dialect}");
    f.node_unpublish(&v, &t2).await.unwrap();
    assert_eq!(served(&backend, "NodeUnstageVolume"), 1, "{dialect}");
    assert!(!mounted(&staging) && !mounted(&t2), "{dialect}");
    assert!(
        !staging.exists(),
        "{dialect}: the staging directory is removed"
    );
    assert_eq!(support::staging_references(&metrics), 0.0, "{dialect}");
}

/// Each crash step, in the order one volume's lifecycle meets it.
const CRASH_STEPS: [&str; 6] = [
    "publish:recorded",
    "publish:staged",
    "publish:published",
    "unpublish:unpublished",
    "unpublish:unrecorded",
    "unpublish:unstaged",
];

#[tokio::test]
async fn staging_emulation_converges_after_a_sigkill_at_every_step() {
    for step in CRASH_STEPS {
        let backend = Backend::start(Options::new("v1").arg("--require-staging=true")).await;
        let staging_dir = backend.path("staging");
        let mut gateway = Gateway::start(
            &backend.socket,
            "v0.1",
            &[
                &format!("--staging-dir={}", staging_dir.display()),
                &format!("--test-crash-at={step}"),
            ],
        )
        .await;
        let mut crashed = false;
        let f = Front::new(Dialect::V0_1, gateway.channel().await);
        let v = f.create("vol-c", 1 << 20, &HashMap::new()).await.unwrap();
        let node = f.node_id().await.unwrap();
        let publish = f.controller_publish(&v, &node).await.unwrap();
        let staging = staging_of(&staging_dir, &v.id);
        let (t1, t2) = (backend.path("t1"), backend.path("t2"));

        // Runs one client operation; if the gateway crashed under it, restarts the gateway
        // without the hook and retries the operation, which must then succeed.
        macro_rules! op {
            ($call:ident $(, $arg:expr)*) => {{
                let f = Front::new(Dialect::V0_1, gateway.channel().await);
                if let Err(e) = f.$call($($arg),*).await {
                    // The hook logs before it kills; any other failure is a failure.
                    assert!(
                        !crashed && gateway.log_text().contains(&format!("killing itself at {step}")),
                        "{step}: {} failed without the crash hook: {e:?}\n{}",
                        stringify!($call),
                        gateway.log_text()
                    );
                    gateway.wait_exit();
                    crashed = true;
                    gateway.drop_flag("--test-crash-at");
                    gateway.start_again().await;
                    let f = Front::new(Dialect::V0_1, gateway.channel().await);
                    f.$call($($arg),*).await.unwrap_or_else(|e| {
                        panic!("{step}: retry of {} failed: {e:?}\n{}", stringify!($call), gateway.log_text())
                    });
                }
            }};
        }
        op!(node_publish, &v, &publish, None, &t1);
        op!(node_publish, &v, &publish, None, &t2);
        assert!(mounted(&staging) && mounted(&t1) && mounted(&t2), "{step}");
        op!(node_unpublish, &v, &t1);
        assert!(
            mounted(&staging) && mounted(&t2),
            "{step}: unstaged under t2"
        );
        assert_eq!(served(&backend, "NodeUnstageVolume"), 0, "{step}");
        op!(node_unpublish, &v, &t2);
        assert!(crashed, "{step}: the hook never fired");
        assert!(!mounted(&staging), "{step}: staging leaked");
        assert!(served(&backend, "NodeUnstageVolume") >= 1, "{step}");
        // Nothing left behind: the volume can be unpublished from the controller and deleted.
        let f = Front::new(Dialect::V0_1, gateway.channel().await);
        f.controller_unpublish(&v, &node).await.unwrap();
        f.delete(&v, &HashMap::new()).await.unwrap_or_else(|e| {
            panic!(
                "{step}: delete after the lifecycle: {e:?}\n{}",
                backend.log_text()
            )
        });
    }
}

#[tokio::test]
async fn an_interrupted_last_unpublish_is_finished_at_start_up_without_a_retry() {
    let backend = Backend::start(Options::new("v1").arg("--require-staging=true")).await;
    let staging_dir = backend.path("staging");
    let mut gateway = Gateway::start(
        &backend.socket,
        "v0.1",
        &[
            &format!("--staging-dir={}", staging_dir.display()),
            "--test-crash-at=unpublish:unrecorded",
        ],
    )
    .await;
    let f = Front::new(Dialect::V0_1, gateway.channel().await);
    let v = f.create("vol-o", 1 << 20, &HashMap::new()).await.unwrap();
    let node = f.node_id().await.unwrap();
    let publish = f.controller_publish(&v, &node).await.unwrap();
    let (staging, t1) = (staging_of(&staging_dir, &v.id), backend.path("t1"));
    f.node_publish(&v, &publish, None, &t1).await.unwrap();
    // The only target: the plugin unpublishes it, the record drops it, then the crash.
    f.node_unpublish(&v, &t1)
        .await
        .expect_err("the gateway dies under the call");
    gateway.wait_exit();
    assert!(mounted(&staging), "still staged at the crash");
    assert_eq!(served(&backend, "NodeUnstageVolume"), 0);
    gateway.drop_flag("--test-crash-at");
    gateway.start_again().await;
    // No client retries: the start-up sweep unstages on its own.
    // (The sweep logs once the unstage is done and its record deleted.)
    support::eventually(PROCESS_TIMEOUT, "the sweep unstages", || {
        gateway
            .log_text()
            .contains("finished an interrupted unstage")
    })
    .await;
    assert_eq!(served(&backend, "NodeUnstageVolume"), 1);
    assert!(!mounted(&staging), "staging leaked");
    // And the volume is free: it can be detached and deleted.
    let f = Front::new(Dialect::V0_1, gateway.channel().await);
    f.controller_unpublish(&v, &node).await.unwrap();
    f.delete(&v, &HashMap::new()).await.unwrap();
}
