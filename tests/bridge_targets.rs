//! Which hop owns the CO's node paths across the bridge (`src/call/paths/`): a v1 orchestrator's
//! node gateway creates and removes `target_path` in the CO's filesystem, whatever the plugin
//! speaks, and the appliance gateway gives its plugin a mirror of the paths under
//! `appliance.node_paths`, never the CO's own. Processes of the built binaries, mutual TLS on
//! loopback; the reference backend publishes by symlink, so what it made, and where, can be
//! read off the filesystem.

use csi_gateway_test_support as support;
use csi_gateway_test_support::bridge as bridge_support;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use bridge_support::*;

/// `path` (absolute) as the appliance's plugin got it: under `mirror`.
fn mirrored(mirror: &Path, path: &Path) -> PathBuf {
    mirror.join(path.strip_prefix("/").unwrap())
}

fn is_symlink(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink())
}

/// The mirror holds nothing after the calls that were done with its paths.
fn assert_empty(mirror: &Path) {
    let left: Vec<_> = std::fs::read_dir(mirror)
        .map(|d| d.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "the appliance left {left:?} in its mirror");
}

fn backend_options(dialect: &str) -> support::Options {
    let mut o = support::Options::new(dialect);
    o.publish_mode = "symlink".into();
    o
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v1_publish_through_the_bridge_to_a_draft_plugin_makes_the_target_where_the_co_sees_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // The draft plugin refuses a target that does not exist (v0.x: the CO makes it), so a
    // publish that succeeds proves the appliance made the mirror's target for it.
    let backend =
        support::Backend::start(backend_options("v0.1-oneof").arg("--co-creates-target")).await;
    let b = mirror_bridge(d, &backend).await;
    let none = HashMap::new();

    // kubelet makes the pod's directory, never the target (v1: the plugin's).
    let pod = d.join("kubelet/pods/uid-1/volumes");
    std::fs::create_dir_all(&pod).unwrap();
    let target = pod.join("mount");
    let v = b.front.create("vol-targets", 1 << 20, &none).await.unwrap();
    let node = b.front.node_id().await.unwrap();
    let publish = b.front.controller_publish(&v, &node).await.unwrap();
    b.front
        .node_publish(&v, &publish, None, &target)
        .await
        .unwrap();

    // Where the CO sees it: made by the node gateway, a plain directory (the plugin's mount is
    // on its own host, here its link in the mirror).
    let meta = std::fs::symlink_metadata(&target).expect("the node gateway made the target");
    assert!(meta.is_dir() && !meta.file_type().is_symlink(), "{meta:?}");
    let far = mirrored(&b.mirror, &target);
    assert!(
        is_symlink(&far),
        "the plugin published on the mirror's {}",
        far.display()
    );

    // Unpublish reaches the plugin although nothing is mounted on the CO's side (only the far
    // side can tell), and both sides' targets are gone afterwards.
    b.front.node_unpublish(&v, &target).await.unwrap();
    assert!(!target.exists(), "the node gateway removed the CO's target");
    assert!(pod.is_dir(), "the CO's parent stays");
    assert!(!far.exists() && !is_symlink(&far), "the plugin unpublished");
    assert_empty(&b.mirror);
    // Idempotent, as v1 says, on both hops.
    b.front.node_unpublish(&v, &target).await.unwrap();
    b.front.controller_unpublish(&v, &node).await.unwrap();
    b.front.delete(&v, &none).await.unwrap();

    // A path that climbs (`..`) could leave the mirror: the plugin gets it as one opaque name
    // under the mirror's `.unmapped` (src/call/paths/mirror.rs), never outside the mirror, and
    // the unpublish naming the same path undoes it.
    let v = b.front.create("vol-climb", 1 << 20, &none).await.unwrap();
    let publish = b.front.controller_publish(&v, &node).await.unwrap();
    let climbing = pod.join("../mount");
    b.front
        .node_publish(&v, &publish, None, &climbing)
        .await
        .unwrap();
    let unmapped: Vec<_> = std::fs::read_dir(b.mirror.join(".unmapped"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(
        matches!(&unmapped[..], [p] if is_symlink(p)),
        "the plugin published on one opaque name: {unmapped:?}"
    );
    assert!(
        climbing.is_dir(),
        "the node gateway made the CO's target, on the CO's side"
    );
    b.front.node_unpublish(&v, &climbing).await.unwrap();
    assert!(
        !climbing.exists(),
        "the node gateway removed the CO's target"
    );
    assert_empty(&b.mirror);
    b.front.controller_unpublish(&v, &node).await.unwrap();
    b.front.delete(&v, &none).await.unwrap();
    assert!(
        b.appliance.log().contains("\"upstream\":\"v0.1-oneof\""),
        "the appliance translated for the draft plugin"
    );
    drop(b.node);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v1_plugin_across_the_bridge_stages_and_publishes_on_the_mirror() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let backend = support::Backend::start(backend_options("v1")).await;
    let b = mirror_bridge(d, &backend).await;
    let none = HashMap::new();

    let staging = d.join("kubelet/plugins/driver/pv-1/globalmount");
    std::fs::create_dir_all(&staging).unwrap(); // kubelet's, as v1 says
    let pod = d.join("kubelet/pods/uid-2/volumes");
    std::fs::create_dir_all(&pod).unwrap();
    let target = pod.join("mount");
    let v = b.front.create("vol-staged", 1 << 20, &none).await.unwrap();
    let node = b.front.node_id().await.unwrap();
    let publish = b.front.controller_publish(&v, &node).await.unwrap();
    b.front.node_stage(&v, &publish, &staging).await.unwrap();
    assert!(
        mirrored(&b.mirror, &staging).is_dir(),
        "the appliance made the staging directory the CO made on its host"
    );
    b.front
        .node_publish(&v, &publish, Some(&staging), &target)
        .await
        .unwrap();
    // The v1 plugin made its own target, on its host: the CO's one is the node gateway's.
    assert!(is_symlink(&mirrored(&b.mirror, &target)));
    assert!(target.is_dir() && !is_symlink(&target));

    b.front.node_unpublish(&v, &target).await.unwrap();
    assert!(!target.exists());
    b.front.node_unstage(&v, &staging).await.unwrap();
    assert!(staging.is_dir(), "the CO's staging directory is the CO's");
    assert_empty(&b.mirror);
    b.front.controller_unpublish(&v, &node).await.unwrap();
    b.front.delete(&v, &none).await.unwrap();
    drop(b.node);
    drop(b.appliance);
}
