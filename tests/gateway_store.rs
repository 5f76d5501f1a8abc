//! What the built gateway writes to its durable store, and only that: the draft plugin's
//! VolumeHandle metadata from its own replies (never a client's `volume_context`), read back for
//! every call that names a volume; staging records only for publishes the plugin can accept; no
//! growth from calls the plugin refuses; a private state directory and file.
//!
//! The store is read after the gateway stopped, by opening `state.redb` with the gateway's own
//! store code (redb locks the file while the gateway runs).

use csi_gateway_test_support as support;

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use csi_gateway::dialect::proto::{v0_1, v1};
use csi_gateway::dialect::Dialect;
use csi_gateway::store::{embedded::Embedded, Store};
use support::front::{Front, Volume};
use support::gateway::Gateway;
use support::{Backend, Options};

/// Every key in the stopped gateway's embedded store, with its payload.
async fn stored(gateway: &mut Gateway) -> Vec<(String, Vec<u8>)> {
    if gateway.is_running() {
        gateway.terminate();
    }
    let kv = Arc::new(Embedded::open(&gateway.state_dir.join("state.redb")).unwrap());
    let all = Store::new(kv.clone(), Duration::from_secs(5))
        .scan("")
        .await
        .unwrap();
    // The health endpoint's probe key is not state.
    all.into_iter().filter(|(k, _)| k != "health").collect()
}

fn keys(entries: &[(String, Vec<u8>)]) -> Vec<&str> {
    entries.iter().map(|(k, _)| k.as_str()).collect()
}

/// What Kubernetes adds to a volume's context on publish (CSIDriver podInfoOnMount and
/// requiresRepublish with token requests).
fn kubernetes_context(v: &Volume) -> Volume {
    let mut context = v.context.clone();
    context.insert("csi.storage.k8s.io/pod.name".into(), "web-0".into());
    context.insert(
        "csi.storage.k8s.io/serviceAccount.tokens".into(),
        "{\"vault\":{\"token\":\"TOKEN-CANARY-7f3a\"}}".into(),
    );
    Volume {
        context,
        ..v.clone()
    }
}

#[tokio::test]
async fn a_clients_volume_context_never_replaces_the_plugins_metadata() {
    let backend = Backend::start(Options::new("v0.1-oneof")).await;
    let mut gateway = Gateway::start(&backend.socket, "v0.1", &[]).await;
    let f = Front::new(Dialect::V1, gateway.channel().await);
    let v = f.create("vol-k8s", 1 << 20, &HashMap::new()).await.unwrap();
    let node = f.node_id().await.unwrap();
    let extended = kubernetes_context(&v);
    let publish = f.controller_publish(&extended, &node).await.unwrap();
    let target = backend.path("target");
    f.node_publish(&extended, &publish, None, &target)
        .await
        .unwrap();
    // Id-only calls still resolve to the plugin's metadata: nothing the client sent replaced it.
    f.node_unpublish(&v.id_only(), &target).await.unwrap();
    f.controller_unpublish(&v.id_only(), &node).await.unwrap();
    let again = f
        .create("vol-k8s-2", 1 << 20, &HashMap::new())
        .await
        .unwrap();
    f.controller_publish(&kubernetes_context(&again), &node)
        .await
        .unwrap();
    f.delete(&v.id_only(), &HashMap::new()).await.unwrap();
    let entries = stored(&mut gateway).await;
    assert_eq!(
        keys(&entries),
        [format!("handle/{}", again.id)],
        "{entries:?}"
    );
    let raw = std::fs::read(gateway.state_dir.join("state.redb")).unwrap();
    assert!(
        !raw.windows(12).any(|w| w == b"TOKEN-CANARY"),
        "a client's token reached the state file"
    );
}

#[tokio::test]
async fn calls_sent_without_a_context_carry_the_stored_metadata() {
    let backend = Backend::start(Options::new("v0.1-oneof")).await;
    let gateway = Gateway::start(&backend.socket, "v0.1", &[]).await;
    let f = Front::new(Dialect::V1, gateway.channel().await);
    let v = f
        .create("vol-bare", 1 << 20, &HashMap::new())
        .await
        .unwrap();
    let node = f.node_id().await.unwrap();
    let bare = v.id_only();
    // The draft plugin accepts each of these only with exactly its metadata.
    let publish = f.controller_publish(&bare, &node).await.unwrap();
    let validated = v1::controller_client::ControllerClient::new(gateway.channel().await)
        .validate_volume_capabilities(v1::ValidateVolumeCapabilitiesRequest {
            volume_id: v.id.clone(),
            volume_capabilities: vec![support::front::cap_v1()],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(validated.confirmed.is_some(), "{validated:?}");
    let target = backend.path("target");
    f.node_publish(&bare, &publish, None, &target)
        .await
        .unwrap();
    f.node_unpublish(&bare, &target).await.unwrap();
    f.controller_unpublish(&bare, &node).await.unwrap();
    f.delete(&bare, &HashMap::new()).await.unwrap();
}

/// A v0.1 client's NodePublishVolume, with staging emulated in front of a v1 plugin that
/// requires staging.
fn v01_publish(volume_id: &str, target: &Path, capability: bool) -> v0_1::NodePublishVolumeRequest {
    v0_1::NodePublishVolumeRequest {
        version: Some(v0_1::Version {
            major: 0,
            minor: 1,
            patch: 0,
        }),
        volume_id: volume_id.into(),
        target_path: target.display().to_string(),
        volume_capability: capability.then(|| v0_1::VolumeCapability {
            access_type: Some(v0_1::volume_capability::AccessType::Mount(
                Default::default(),
            )),
            access_mode: Some(v0_1::volume_capability::AccessMode {
                mode: v0_1::volume_capability::access_mode::Mode::SingleNodeWriter as i32,
            }),
        }),
        ..Default::default()
    }
}

/// A v1 plugin that requires staging, behind a gateway serving v0.1 (staging emulated); the
/// staging directory is the plugin's `staging`.
async fn staging_emulated() -> (Backend, std::path::PathBuf, Gateway) {
    let backend = Backend::start(Options::new("v1").arg("--require-staging=true")).await;
    let staging_dir = backend.path("staging");
    let gateway = Gateway::start(
        &backend.socket,
        "v0.1",
        &[&format!("--staging-dir={}", staging_dir.display())],
    )
    .await;
    (backend, staging_dir, gateway)
}

#[tokio::test]
async fn staging_records_only_publishes_the_plugin_can_accept() {
    let (backend, staging_dir, mut gateway) = staging_emulated().await;
    let f = Front::new(Dialect::V0_1, gateway.channel().await);
    let v = f.create("vol-m", 1 << 20, &HashMap::new()).await.unwrap();
    let mut node = v0_1::node_client::NodeClient::new(gateway.channel().await);
    let target = backend.path("t1");
    // Malformed: no capability, then no target path. Refused before anything is recorded.
    for (req, what) in [
        (v01_publish(&v.id, &target, false), "volume_capability"),
        (v01_publish(&v.id, Path::new(""), true), "target_path"),
    ] {
        let e = node.node_publish_volume(req).await.unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e:?}");
        assert!(e.message().contains(what), "{e:?}");
    }
    // Well-formed but refused by the plugin (no such volume): taken back.
    let e = node
        .node_publish_volume(v01_publish("no-such-volume", &target, true))
        .await
        .unwrap_err();
    assert_eq!(e.code(), tonic::Code::NotFound, "{e:?}");
    let leftovers: Vec<_> = std::fs::read_dir(&staging_dir)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(
        leftovers.is_empty(),
        "staging directories left: {leftovers:?}"
    );
    // A restart finds nothing to count or sweep.
    gateway.kill_and_restart().await;
    let entries = stored(&mut gateway).await;
    assert!(
        !entries.iter().any(|(k, _)| k.contains("staging/")),
        "{:?}",
        keys(&entries)
    );
}

#[tokio::test]
async fn refused_publishes_of_unknown_volumes_leave_the_store_as_it_was() {
    // Draft plugin: 1,000 ControllerPublish and NodePublish of ids it does not know.
    let backend = Backend::start(Options::new("v0.1-oneof")).await;
    let mut gateway = Gateway::start(&backend.socket, "v0.1", &[]).await;
    let f = Front::new(Dialect::V1, gateway.channel().await);
    let node = f.node_id().await.unwrap();
    let target = backend.path("t");
    for i in 0..500 {
        let ghost = Volume {
            id: format!("ghost-{i}"),
            context: [("backing".to_string(), format!("volumes/ghost-{i}"))].into(),
            capacity: 0,
        };
        assert!(f.controller_publish(&ghost, &node).await.is_err());
        assert!(f
            .node_publish(&ghost, &HashMap::new(), None, &target)
            .await
            .is_err());
    }
    let entries = stored(&mut gateway).await;
    assert!(entries.is_empty(), "{:?}", keys(&entries));

    // Staging emulation: 200 NodePublish of unknown ids through a v0.1 client.
    let (_backend, _staging_dir, mut gateway) = staging_emulated().await;
    let mut node = v0_1::node_client::NodeClient::new(gateway.channel().await);
    for i in 0..200 {
        let e = node
            .node_publish_volume(v01_publish(&format!("ghost-{i}"), &target, true))
            .await
            .unwrap_err();
        assert_eq!(e.code(), tonic::Code::NotFound, "{e:?}");
    }
    let entries = stored(&mut gateway).await;
    assert!(entries.is_empty(), "{:?}", keys(&entries));
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
}

#[tokio::test]
async fn the_state_directory_and_file_are_private() {
    let backend = Backend::start(Options::new("v0.1-oneof")).await;
    let mut gateway = Gateway::start(&backend.socket, "v0.1", &[]).await;
    assert_eq!(mode(&gateway.state_dir), 0o700);
    assert_eq!(mode(&gateway.state_dir.join("state.redb")), 0o600);
    // One made readable by hand is narrowed again at the next start.
    gateway.terminate();
    std::fs::set_permissions(&gateway.state_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let file = gateway.state_dir.join("state.redb");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    gateway.start_again().await;
    assert_eq!(mode(&gateway.state_dir), 0o700);
    assert_eq!(mode(&file), 0o600);
}

/// Starts the gateway on `state_dir` and returns how it exited (bounded: a gateway that keeps
/// running fails the test).
fn start_expecting_exit(state_dir: &Path, upstream: &Path) -> std::process::Output {
    let sock = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(support::gateway::binary())
        .arg("run")
        .arg(format!(
            "--listen=unix://{}",
            sock.path().join("gw.sock").display()
        ))
        .arg(format!("--upstream=unix://{}", upstream.display()))
        .arg(format!("--state-dir={}", state_dir.display()))
        .arg("--metrics-listen=")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + support::PROCESS_TIMEOUT;
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("the gateway started on a damaged state file");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// Every position of `needle` in `haystack`.
fn positions(haystack: &[u8], needle: &[u8]) -> Vec<usize> {
    haystack
        .windows(needle.len())
        .enumerate()
        .filter(|(_, w)| *w == needle)
        .map(|(i, _)| i)
        .collect()
}

#[tokio::test]
async fn a_damaged_state_file_stops_the_start_with_the_file_and_the_damage_named() {
    let backend = Backend::start(Options::new("v0.1-oneof")).await;
    let mut gateway = Gateway::start(&backend.socket, "v0.1", &[]).await;
    let f = Front::new(Dialect::V1, gateway.channel().await);
    let v = f.create("vol-d", 1 << 20, &HashMap::new()).await.unwrap();
    gateway.terminate();
    let file = gateway.state_dir.join("state.redb");
    let intact = std::fs::read(&file).unwrap();
    let metadata = format!("volumes/{}", v.id);
    let mut flipped = intact.clone();
    let at = positions(&intact, metadata.as_bytes());
    assert!(!at.is_empty(), "the metadata is in the file");
    for i in at {
        flipped[i + metadata.len() - 1] ^= 0x01;
    }
    for (damage, bytes, expected) in [
        ("0 bytes", Vec::new(), "empty (0 bytes)"),
        (
            "truncated",
            intact[..intact.len() / 2].to_vec(),
            "truncated",
        ),
        (
            "truncated in the header",
            intact[..100].to_vec(),
            "truncated",
        ),
        ("a flipped byte in a value", flipped, "damaged"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        std::fs::create_dir(&state).unwrap();
        std::fs::write(state.join("state.redb"), &bytes).unwrap();
        let out = start_expecting_exit(&state, &backend.socket);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{damage}: {stderr}");
        assert!(
            stderr.contains(&state.join("state.redb").display().to_string())
                && stderr.contains(expected)
                && !stderr.contains("panicked"),
            "{damage}: {stderr}"
        );
    }
    // The intact file still starts, and its handle still resolves.
    gateway.start_again().await;
    Front::new(Dialect::V1, gateway.channel().await)
        .delete(&v.id_only(), &HashMap::new())
        .await
        .unwrap();
}

/// How a start on a state file ended: it served (its front socket appeared; then it was
/// stopped), or it exited with this output.
enum Started {
    Serving,
    Exited(std::process::Output),
}

fn start_on(state_dir: &Path, upstream: &Path) -> Started {
    let sock = tempfile::tempdir().unwrap();
    let front = sock.path().join("gw.sock");
    let mut child = std::process::Command::new(support::gateway::binary())
        .arg("run")
        .arg(format!("--listen=unix://{}", front.display()))
        .arg(format!("--upstream=unix://{}", upstream.display()))
        .arg(format!("--state-dir={}", state_dir.display()))
        .arg("--metrics-listen=")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + support::PROCESS_TIMEOUT;
    while child.try_wait().unwrap().is_none() {
        if front.exists() {
            let _ = child.kill();
            let _ = child.wait();
            return Started::Serving;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "the gateway neither served nor exited: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Started::Exited(child.wait_with_output().unwrap())
}

/// Damage in redb's database header (the first 320 bytes: page size, region layout, the two
/// commit slots) never panics the gateway: 60 seeded flips of a random 32-bit word each either
/// start (redb fell back to the other commit slot) or stop the start with exit 1, the file named
/// and what to do.
#[tokio::test]
async fn header_damage_in_the_state_file_never_panics() {
    let backend = Backend::start(Options::new("v0.1-oneof")).await;
    let mut gateway = Gateway::start(&backend.socket, "v0.1", &[]).await;
    let f = Front::new(Dialect::V1, gateway.channel().await);
    f.create("vol-hd", 1 << 20, &HashMap::new()).await.unwrap();
    gateway.terminate();
    let intact = std::fs::read(gateway.state_dir.join("state.redb")).unwrap();
    // xorshift32, seeded: the same flips on every run.
    let mut seed: u32 = 0x2545_f491;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 17;
        seed ^= seed << 5;
        seed
    };
    let (mut served, mut refused) = (0, 0);
    for round in 0..60 {
        let at = (next() as usize % (320 / 4)) * 4;
        let mask = next().max(1).to_le_bytes();
        let mut bytes = intact.clone();
        for (b, m) in bytes[at..at + 4].iter_mut().zip(mask) {
            *b ^= m;
        }
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        std::fs::create_dir(&state).unwrap();
        let file = state.join("state.redb");
        std::fs::write(&file, &bytes).unwrap();
        let what = format!("round {round}: bytes {at}..{} ^ {mask:02x?}", at + 4);
        match start_on(&state, &backend.socket) {
            Started::Serving => served += 1,
            Started::Exited(out) => {
                let stderr = String::from_utf8_lossy(&out.stderr);
                assert_eq!(out.status.code(), Some(1), "{what}: {stderr}");
                assert!(
                    stderr.contains(&file.display().to_string())
                        && stderr.contains("restore it from a backup")
                        && !stderr.contains("panicked"),
                    "{what}: {stderr}"
                );
                refused += 1;
            }
        }
    }
    eprintln!("header flips: {served} started, {refused} refused");
}

#[tokio::test]
async fn a_value_changed_in_etcd_is_refused_and_never_sent_to_the_plugin() {
    use csi_gateway::store::etcd::proto::etcdserverpb::{
        kv_client::KvClient, PutRequest, RangeRequest,
    };
    let etcd = support::etcd::Etcd::start().await;
    let backend = Backend::start(Options::new("v0.1-oneof")).await;
    let gateway = Gateway::start(
        &backend.socket,
        "v0.1",
        &[
            "--state-backend=etcd",
            &format!("--etcd-endpoints={}", etcd.endpoint),
        ],
    )
    .await;
    let f = Front::new(Dialect::V1, gateway.channel().await);
    let v = f.create("vol-t", 1 << 20, &HashMap::new()).await.unwrap();
    let mut kv = KvClient::connect(etcd.endpoint.clone()).await.unwrap();
    let key = format!("/csi-gateway/handle/{}", v.id).into_bytes();
    let stored = kv
        .range(RangeRequest {
            key: key.clone(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .kvs;
    let mut value = stored[0].value.clone();
    *value.last_mut().unwrap() ^= 0x01;
    kv.put(PutRequest {
        key,
        value,
        ..Default::default()
    })
    .await
    .unwrap();
    let e = f.delete(&v.id_only(), &HashMap::new()).await.unwrap_err();
    assert_eq!(e.code, tonic::Code::DataLoss, "{e:?}");
    assert!(
        e.message.contains(&format!("handle/{}", v.id)) && e.message.contains("etcd"),
        "{e:?}"
    );
    assert!(
        !backend.log_text().contains("DeleteVolume"),
        "the damaged metadata reached the plugin"
    );
}

fn get(url: &str) -> (u16, String) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(20)))
        .build()
        .into();
    let mut r = agent.get(url).call().unwrap();
    let body = r.body_mut().read_to_string().unwrap_or_default();
    (r.status().as_u16(), body)
}

fn prlimit(pid: u32, fsize: &str) {
    let out = std::process::Command::new("prlimit")
        .args(["--pid", &pid.to_string(), &format!("--fsize={fsize}")])
        .output()
        .expect("prlimit (util-linux) runs");
    assert!(out.status.success(), "{out:?}");
}

#[tokio::test]
async fn health_endpoints_fail_while_the_store_cannot_write() {
    let backend = Backend::start(Options::new("v0.1-oneof")).await;
    let metrics = format!("127.0.0.1:{}", support::free_port());
    // SIGXFSZ ignored, so a write past the file size limit fails with EFBIG — a disk error —
    // instead of killing the gateway.
    let mut gateway = Gateway::start_through(
        &["sh", "-c", "trap '' XFSZ; exec \"$0\" \"$@\""],
        &backend.socket,
        "v0.1",
        &[&format!("--metrics-listen={metrics}")],
    )
    .await;
    let f = Front::new(Dialect::V1, gateway.channel().await);
    let before = f.create("vol-h1", 1 << 20, &HashMap::new()).await.unwrap();
    assert_eq!(get(&format!("http://{metrics}/healthz")).0, 200);
    assert_eq!(get(&format!("http://{metrics}/readyz")).0, 200);

    prlimit(gateway.pid(), "4096:");
    let e = f
        .create("vol-h2", 1 << 20, &HashMap::new())
        .await
        .unwrap_err();
    assert_eq!(e.code, tonic::Code::Unavailable, "{e:?}");
    assert!(e.message.contains("state store embedded database"), "{e:?}");
    let (code, body) = get(&format!("http://{metrics}/healthz"));
    assert_eq!(code, 500, "{body}");
    assert!(body.contains("state store"), "{body}");
    let (code, body) = get(&format!("http://{metrics}/readyz"));
    assert_eq!(code, 503, "{body}");
    assert!(body.contains("state store"), "{body}");

    // The restart the failing probe asks for brings back a working store with its handles.
    prlimit(gateway.pid(), "unlimited:");
    gateway.kill_and_restart().await;
    assert_eq!(get(&format!("http://{metrics}/healthz")).0, 200);
    let f = Front::new(Dialect::V1, gateway.channel().await);
    f.delete(&before.id_only(), &HashMap::new()).await.unwrap();
}

/// One disk error does not latch: once the cause is gone (here the file size limit lifted), the
/// embedded store reopens its file on the next operation, calls that need it succeed again and
/// `/readyz` returns to 200 — without a restart, and with every handle still there.
#[tokio::test]
async fn the_embedded_store_recovers_from_a_disk_error_without_a_restart() {
    let backend = Backend::start(Options::new("v0.1-oneof")).await;
    let metrics = format!("127.0.0.1:{}", support::free_port());
    // SIGXFSZ ignored: past the file size limit a write fails with EFBIG, a disk error.
    let gateway = Gateway::start_through(
        &["sh", "-c", "trap '' XFSZ; exec \"$0\" \"$@\""],
        &backend.socket,
        "v0.1",
        &[&format!("--metrics-listen={metrics}")],
    )
    .await;
    let f = Front::new(Dialect::V1, gateway.channel().await);
    let before = f.create("vol-r1", 1 << 20, &HashMap::new()).await.unwrap();
    prlimit(gateway.pid(), "4096:");
    let e = f
        .create("vol-r2", 1 << 20, &HashMap::new())
        .await
        .unwrap_err();
    assert_eq!(e.code, tonic::Code::Unavailable, "{e:?}");
    let (code, body) = get(&format!("http://{metrics}/readyz"));
    assert_eq!(code, 503, "{body}");

    prlimit(gateway.pid(), "unlimited:");
    let (code, body) = get(&format!("http://{metrics}/readyz"));
    assert_eq!(code, 200, "ready again without a restart: {body}");
    let after = f.create("vol-r3", 1 << 20, &HashMap::new()).await.unwrap();
    assert_eq!(get(&format!("http://{metrics}/healthz")).0, 200);
    f.delete(&before.id_only(), &HashMap::new()).await.unwrap();
    f.delete(&after.id_only(), &HashMap::new()).await.unwrap();
    assert!(
        gateway
            .log_text()
            .contains("state file opened again after a disk error"),
        "{}",
        gateway.log_text()
    );
}

fn signal(pid: u32, sig: rustix::process::Signal) {
    let pid = rustix::process::Pid::from_raw(pid as i32).unwrap();
    rustix::process::kill_process(pid, sig).unwrap();
}

#[tokio::test]
async fn a_hung_etcd_delays_only_the_calls_that_need_it() {
    let etcd = support::etcd::Etcd::start().await;
    let backend = Backend::start(Options::new("v0.1-oneof")).await;
    let gateway = Gateway::start(
        &backend.socket,
        "v0.1",
        &[
            "--state-backend=etcd",
            &format!("--etcd-endpoints={}", etcd.endpoint),
            "--state-timeout=1s",
        ],
    )
    .await;
    let f = Front::new(Dialect::V1, gateway.channel().await);
    let mut volumes = Vec::new();
    for i in 0..4 {
        volumes.push(
            f.create(&format!("vol-hang-{i}"), 1 << 20, &HashMap::new())
                .await
                .unwrap(),
        );
    }
    // Hung, not dead: the process stops answering but its sockets stay open.
    signal(etcd.pid(), rustix::process::Signal::STOP);
    let started = std::time::Instant::now();
    let deletes = volumes.iter().map(|v| {
        let f = Front::new(Dialect::V1, f.channel());
        let v = v.id_only();
        async move {
            let e = f.delete(&v, &HashMap::new()).await.unwrap_err();
            (e, started.elapsed())
        }
    });
    let probes = async {
        // Probe needs no store: it answers in its usual time throughout.
        let mut slowest = Duration::ZERO;
        for _ in 0..10 {
            let t = std::time::Instant::now();
            assert!(f.probe().await.unwrap());
            slowest = slowest.max(t.elapsed());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        slowest
    };
    let (failures, slowest_probe) = tokio::join!(futures_util::future::join_all(deletes), probes);
    signal(etcd.pid(), rustix::process::Signal::CONT);
    assert!(
        slowest_probe < Duration::from_millis(500),
        "Probe took {slowest_probe:?}"
    );
    for (e, after) in failures {
        assert_eq!(e.code, tonic::Code::Unavailable, "{e:?}");
        assert!(
            e.message.contains("etcd") && e.message.contains("1s"),
            "{e:?}"
        );
        // Each waits for its own timeout, side by side, not one after another.
        assert!(
            after < Duration::from_secs(3),
            "a store call failed only after {after:?}"
        );
    }
    // Once etcd answers again, so do the calls.
    for v in &volumes {
        f.delete(&v.id_only(), &HashMap::new()).await.unwrap();
    }
}

/// A member that accepts connections and never answers (as one behind a network split can)
/// costs a call at most its share of `state.timeout`: the next member answers, and the calls
/// after it start there. Before, the first member held every call for the whole timeout and
/// the gateway could not even start.
#[tokio::test]
async fn a_member_that_never_answers_is_passed_over_within_the_timeout() {
    let etcd = support::etcd::Etcd::start().await;
    // Connections complete in the kernel's backlog; nothing ever reads them.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent = format!("http://{}", silent.local_addr().unwrap());
    let backend = Backend::start(Options::new("v0.1-oneof")).await;
    let gateway = Gateway::start(
        &backend.socket,
        "v0.1",
        &[
            "--state-backend=etcd",
            &format!("--etcd-endpoints={silent},{}", etcd.endpoint),
            "--state-timeout=3s",
        ],
    )
    .await;
    let f = Front::new(Dialect::V1, gateway.channel().await);
    for i in 0..3 {
        let began = std::time::Instant::now();
        let v = f
            .create(&format!("vol-pass-{i}"), 1 << 20, &HashMap::new())
            .await
            .unwrap();
        f.delete(&v.id_only(), &HashMap::new()).await.unwrap();
        assert!(
            began.elapsed() < Duration::from_secs(1),
            "create and delete took {:?} with the silent member first",
            began.elapsed()
        );
    }
}

/// The stored value of `key` with its last byte flipped: its checksum no longer holds.
fn flipped(mut value: Vec<u8>) -> Vec<u8> {
    *value.last_mut().unwrap() ^= 0x01;
    value
}

/// Damages the stored handle of `volume_id` in the stopped gateway's embedded store, the way a
/// flipped bit on disk that redb's page checksums missed would.
async fn damage_embedded(state_dir: &Path, volume_id: &str) {
    let kv = Embedded::open(&state_dir.join("state.redb")).unwrap();
    let key = format!("handle/{volume_id}");
    let value = csi_gateway::store::KeyValue::get(&kv, &key)
        .await
        .unwrap()
        .unwrap();
    csi_gateway::store::KeyValue::put(&kv, &key, flipped(value))
        .await
        .unwrap();
}

/// Damages the stored handle of `volume_id` in etcd, as an edit by hand would.
async fn damage_etcd(endpoint: &str, volume_id: &str) {
    use csi_gateway::store::etcd::proto::etcdserverpb::{
        kv_client::KvClient, PutRequest, RangeRequest,
    };
    let mut kv = KvClient::connect(endpoint.to_string()).await.unwrap();
    let key = format!("/csi-gateway/handle/{volume_id}").into_bytes();
    let range = RangeRequest {
        key: key.clone(),
        ..Default::default()
    };
    let value = kv.range(range).await.unwrap().into_inner().kvs[0]
        .value
        .clone();
    let put = PutRequest {
        key,
        value: flipped(value),
        ..Default::default()
    };
    kv.put(put).await.unwrap();
}

/// A gateway restarted on a store holding one damaged value starts, reports it (a WARN line
/// naming the key, the gauge, `/readyz`'s body while staying ready) and refuses only that
/// volume's calls, with DATA_LOSS; every other volume is served. `etcd`: the store's endpoint,
/// else the embedded store.
async fn one_damaged_value_fails_only_its_volume(etcd: Option<&str>) {
    let backend = Backend::start(Options::new("v0.1-oneof")).await;
    let metrics = format!("127.0.0.1:{}", support::free_port());
    let mut args = vec![format!("--metrics-listen={metrics}")];
    if let Some(endpoint) = etcd {
        args.push("--state-backend=etcd".into());
        args.push(format!("--etcd-endpoints={endpoint}"));
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut gateway = Gateway::start(&backend.socket, "v0.1", &args).await;
    let f = Front::new(Dialect::V1, gateway.channel().await);
    let damaged = f.create("vol-bad", 1 << 20, &HashMap::new()).await.unwrap();
    let intact = f.create("vol-ok", 1 << 20, &HashMap::new()).await.unwrap();
    gateway.terminate();
    match etcd {
        Some(endpoint) => damage_etcd(endpoint, &damaged.id).await,
        None => damage_embedded(&gateway.state_dir, &damaged.id).await,
    }

    gateway.start_again().await;
    let key = format!("handle/{}", damaged.id);
    let log = gateway.log_text();
    let warned: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("damaged value") && l.contains(&key))
        .collect();
    assert_eq!(warned.len(), 1, "one WARN line naming {key}:\n{log}");
    let (code, body) = get(&format!("http://{metrics}/readyz"));
    assert_eq!(code, 200, "{body}");
    assert!(
        body.contains("1 damaged value") && body.contains(&key),
        "{body}"
    );
    let (_, text) = get(&format!("http://{metrics}/metrics"));
    assert!(
        text.lines()
            .any(|l| l == "csi_gateway_store_damaged_values 1"),
        "{text}"
    );

    let f = Front::new(Dialect::V1, gateway.channel().await);
    let e = f
        .delete(&damaged.id_only(), &HashMap::new())
        .await
        .unwrap_err();
    assert_eq!(e.code, tonic::Code::DataLoss, "{e:?}");
    assert!(e.message.contains(&key), "{e:?}");
    f.delete(&intact.id_only(), &HashMap::new()).await.unwrap();
    let served = f.create("vol-new", 1 << 20, &HashMap::new()).await.unwrap();
    f.delete(&served.id_only(), &HashMap::new()).await.unwrap();
    // Two deletes reached the plugin: the intact volume's and the new one's.
    let deletes = backend
        .log_text()
        .lines()
        .filter(|l| l.contains("DeleteVolume"))
        .count();
    assert_eq!(
        deletes,
        2,
        "the damaged metadata reached the plugin?\n{}",
        backend.log_text()
    );

    // A listing through the gateway stores the plugin's own answer over the damaged value
    // (the only volume left): it is served again and no longer reported.
    let (listed, _) = f.list_volumes("").await.unwrap();
    assert_eq!(listed, vec![damaged.id.clone()]);
    let (code, body) = get(&format!("http://{metrics}/readyz"));
    assert_eq!((code, body.as_str()), (200, "ready"));
    let (_, text) = get(&format!("http://{metrics}/metrics"));
    assert!(
        text.lines()
            .any(|l| l == "csi_gateway_store_damaged_values 0"),
        "{text}"
    );
    f.delete(&damaged.id_only(), &HashMap::new()).await.unwrap();
}

#[tokio::test]
async fn one_damaged_value_in_etcd_fails_only_its_volume_and_the_gateway_starts() {
    let etcd = support::etcd::Etcd::start().await;
    one_damaged_value_fails_only_its_volume(Some(&etcd.endpoint)).await;
}

#[tokio::test]
async fn one_damaged_value_in_the_embedded_store_fails_only_its_volume_and_the_gateway_starts() {
    one_damaged_value_fails_only_its_volume(None).await;
}
