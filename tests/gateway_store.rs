//! What the built gateway writes to its durable store, and only that: the draft plugin's
//! VolumeHandle metadata from its own replies (never a client's `volume_context`), read back for
//! every call that names a volume; staging records only for publishes the plugin can accept; no
//! growth from calls the plugin refuses; a private state directory and file.
//!
//! The store is read after the gateway stopped, by opening `state.redb` with the gateway's own
//! store code (redb locks the file while the gateway runs).

mod support;

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

fn id_only(v: &Volume) -> Volume {
    Volume {
        context: HashMap::new(),
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
    f.node_unpublish(&id_only(&v), &target).await.unwrap();
    f.controller_unpublish(&id_only(&v), &node).await.unwrap();
    let again = f
        .create("vol-k8s-2", 1 << 20, &HashMap::new())
        .await
        .unwrap();
    f.controller_publish(&kubernetes_context(&again), &node)
        .await
        .unwrap();
    f.delete(&id_only(&v), &HashMap::new()).await.unwrap();
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
    let bare = id_only(&v);
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

#[tokio::test]
async fn staging_records_only_publishes_the_plugin_can_accept() {
    let backend = Backend::start(Options::new("v1").arg("--require-staging=true")).await;
    let staging_dir = backend.path("staging");
    let mut gateway = Gateway::start(
        &backend.socket,
        "v0.1",
        &[&format!("--staging-dir={}", staging_dir.display())],
    )
    .await;
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
    let backend = Backend::start(Options::new("v1").arg("--require-staging=true")).await;
    let staging_dir = backend.path("staging");
    let mut gateway = Gateway::start(
        &backend.socket,
        "v0.1",
        &[&format!("--staging-dir={}", staging_dir.display())],
    )
    .await;
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
