//! csi-sanity's v1 cases, run against the reference backend directly and through the bridge
//! (node gateway → mutual TLS → appliance gateway → the same backend, in a fresh copy), whose
//! answers must be the plugin's own: every case's code, and for OK its reply, equal. Among
//! them the suite's relative `volume_path` ("some/path") in NodeGetVolumeStats and
//! NodeExpandVolume, for a volume that does not exist and for one that does, which the
//! appliance's path mirror once refused INVALID_ARGUMENT where the plugin answers NOT_FOUND
//! (issue 52). csi-sanity itself is a Go program this machine cannot install: these are its
//! cases, in its order, written as the test.

use csi_gateway_test_support as support;
use csi_gateway_test_support::bridge as bridge_support;

use std::collections::HashMap;
use std::fmt::Debug;
use std::path::Path;

use csi::controller_client::ControllerClient;
use csi::identity_client::IdentityClient;
use csi::node_client::NodeClient;
use csi::volume_capability::{access_mode::Mode, AccessMode, AccessType, MountVolume};
use csi_gateway::dialect::proto::v1 as csi;
use tonic::transport::Channel;

/// csi-sanity's path for a volume it never published (`NodeGetVolumeStats`/`NodeExpandVolume`
/// "should fail when volume is not found").
const RELATIVE: &str = "some/path";

fn cap() -> csi::VolumeCapability {
    csi::VolumeCapability {
        access_mode: Some(AccessMode {
            mode: Mode::SingleNodeWriter as i32,
        }),
        access_type: Some(AccessType::Mount(MountVolume::default())),
    }
}

/// One run of the cases on one endpoint: what each answered, in order.
struct Run {
    identity: IdentityClient<Channel>,
    controller: ControllerClient<Channel>,
    node: NodeClient<Channel>,
    answers: Vec<(&'static str, String)>,
}

impl Run {
    /// The case's code, and for OK its reply, with `normalize` applied to the reply.
    fn note<T: Debug>(
        &mut self,
        case: &'static str,
        r: Result<tonic::Response<T>, tonic::Status>,
        normalize: impl Fn(T) -> String,
    ) {
        let answer = match r {
            Ok(r) => format!("OK {}", normalize(r.into_inner())),
            Err(s) => format!("{:?}", s.code()),
        };
        self.answers.push((case, answer));
    }

    fn debug<T: Debug>(
        &mut self,
        case: &'static str,
        r: Result<tonic::Response<T>, tonic::Status>,
    ) {
        self.note(case, r, |t| format!("{t:?}"));
    }
}

/// NodeGetVolumeStats' reply without what the filesystem holding both copies changes between
/// runs (its inode counts; bytes are bounded by the volume's capacity).
fn stats(r: csi::NodeGetVolumeStatsResponse) -> String {
    let usage: Vec<_> = r
        .usage
        .iter()
        .map(|u| match u.unit() {
            csi::volume_usage::Unit::Inodes => "inodes".to_string(),
            _ => format!("{u:?}"),
        })
        .collect();
    format!("{usage:?} {:?}", r.volume_condition)
}

async fn cases(ch: Channel, work: &Path) -> Vec<(&'static str, String)> {
    let mut r = Run {
        identity: IdentityClient::new(ch.clone()),
        controller: ControllerClient::new(ch.clone()),
        node: NodeClient::new(ch),
        answers: Vec::new(),
    };
    let staging = work.join("staging");
    std::fs::create_dir_all(&staging).unwrap(); // the CO's, as v1 says
    let target = work.join("target"); // the plugin's to make
    let (staging, target) = (staging.display().to_string(), target.display().to_string());

    // Identity.
    let a = r
        .identity
        .get_plugin_info(csi::GetPluginInfoRequest {})
        .await;
    r.debug("GetPluginInfo", a);
    let a = r
        .identity
        .get_plugin_capabilities(csi::GetPluginCapabilitiesRequest {})
        .await;
    r.debug("GetPluginCapabilities", a);
    let a = r.identity.probe(csi::ProbeRequest {}).await;
    r.debug("Probe", a);

    // Controller.
    let a = r
        .controller
        .controller_get_capabilities(csi::ControllerGetCapabilitiesRequest {})
        .await;
    r.debug("ControllerGetCapabilities", a);
    let create = |name: &str, bytes: i64| csi::CreateVolumeRequest {
        name: name.into(),
        capacity_range: Some(csi::CapacityRange {
            required_bytes: bytes,
            limit_bytes: 0,
        }),
        volume_capabilities: vec![cap()],
        ..Default::default()
    };
    let a = r.controller.create_volume(create("", 1 << 20)).await;
    r.debug("CreateVolume without a name", a);
    let mut no_caps = create("sanity-no-caps", 1 << 20);
    no_caps.volume_capabilities.clear();
    let a = r.controller.create_volume(no_caps).await;
    r.debug("CreateVolume without capabilities", a);
    let a = r
        .controller
        .create_volume(create("sanity-1", 1 << 20))
        .await;
    let volume = a.as_ref().ok().and_then(|v| v.get_ref().volume.clone());
    r.debug("CreateVolume", a);
    let id = volume.expect("CreateVolume answered a volume").volume_id;
    let a = r
        .controller
        .create_volume(create("sanity-1", 1 << 20))
        .await;
    r.debug("CreateVolume again: the same volume", a);
    let a = r
        .controller
        .create_volume(create("sanity-1", 2 << 20))
        .await;
    r.debug("CreateVolume again with another size", a);
    let validate = |volume_id: &str| csi::ValidateVolumeCapabilitiesRequest {
        volume_id: volume_id.into(),
        volume_capabilities: vec![cap()],
        ..Default::default()
    };
    let a = r
        .controller
        .validate_volume_capabilities(validate("sanity-missing"))
        .await;
    r.debug("ValidateVolumeCapabilities of a missing volume", a);
    let a = r
        .controller
        .validate_volume_capabilities(validate(&id))
        .await;
    r.debug("ValidateVolumeCapabilities", a);
    let a = r
        .controller
        .list_volumes(csi::ListVolumesRequest::default())
        .await;
    r.debug("ListVolumes", a);

    // Node: refusals of what v1 requires.
    let a = r
        .node
        .node_get_capabilities(csi::NodeGetCapabilitiesRequest {})
        .await;
    r.debug("NodeGetCapabilities", a);
    let a = r.node.node_get_info(csi::NodeGetInfoRequest {}).await;
    let node_id = a
        .as_ref()
        .map(|i| i.get_ref().node_id.clone())
        .unwrap_or_default();
    r.debug("NodeGetInfo", a);
    let publish = |volume_id: &str, target_path: &str, cap: Option<csi::VolumeCapability>| {
        csi::NodePublishVolumeRequest {
            volume_id: volume_id.into(),
            staging_target_path: staging.clone(),
            target_path: target_path.into(),
            volume_capability: cap,
            ..Default::default()
        }
    };
    let a = r
        .node
        .node_publish_volume(publish("", &target, Some(cap())))
        .await;
    r.debug("NodePublishVolume without a volume id", a);
    let a = r
        .node
        .node_publish_volume(publish(&id, "", Some(cap())))
        .await;
    r.debug("NodePublishVolume without a target path", a);
    let a = r
        .node
        .node_publish_volume(publish(&id, &target, None))
        .await;
    r.debug("NodePublishVolume without a capability", a);
    let unpublish = |volume_id: &str, target_path: &str| csi::NodeUnpublishVolumeRequest {
        volume_id: volume_id.into(),
        target_path: target_path.into(),
    };
    let a = r.node.node_unpublish_volume(unpublish("", &target)).await;
    r.debug("NodeUnpublishVolume without a volume id", a);
    let a = r.node.node_unpublish_volume(unpublish(&id, "")).await;
    r.debug("NodeUnpublishVolume without a target path", a);
    let stage = |volume_id: &str, path: &str, cap: Option<csi::VolumeCapability>| {
        csi::NodeStageVolumeRequest {
            volume_id: volume_id.into(),
            staging_target_path: path.into(),
            volume_capability: cap,
            ..Default::default()
        }
    };
    let a = r
        .node
        .node_stage_volume(stage("", &staging, Some(cap())))
        .await;
    r.debug("NodeStageVolume without a volume id", a);
    let a = r.node.node_stage_volume(stage(&id, "", Some(cap()))).await;
    r.debug("NodeStageVolume without a staging path", a);
    let a = r.node.node_stage_volume(stage(&id, &staging, None)).await;
    r.debug("NodeStageVolume without a capability", a);
    let unstage = |volume_id: &str, path: &str| csi::NodeUnstageVolumeRequest {
        volume_id: volume_id.into(),
        staging_target_path: path.into(),
    };
    let a = r.node.node_unstage_volume(unstage("", &staging)).await;
    r.debug("NodeUnstageVolume without a volume id", a);
    let a = r.node.node_unstage_volume(unstage(&id, "")).await;
    r.debug("NodeUnstageVolume without a staging path", a);

    // NodeGetVolumeStats and NodeExpandVolume, with the suite's relative path among them.
    let volume_stats = |volume_id: &str, path: &str| csi::NodeGetVolumeStatsRequest {
        volume_id: volume_id.into(),
        volume_path: path.into(),
        ..Default::default()
    };
    let a = r
        .node
        .node_get_volume_stats(volume_stats("", RELATIVE))
        .await;
    r.debug("NodeGetVolumeStats without a volume id", a);
    let a = r.node.node_get_volume_stats(volume_stats(&id, "")).await;
    r.debug("NodeGetVolumeStats without a volume path", a);
    let a = r
        .node
        .node_get_volume_stats(volume_stats("sanity-missing", RELATIVE))
        .await;
    r.note(
        "NodeGetVolumeStats of a missing volume at some/path",
        a,
        stats,
    );
    let a = r
        .node
        .node_get_volume_stats(volume_stats(&id, RELATIVE))
        .await;
    r.note("NodeGetVolumeStats of a volume at some/path", a, stats);
    let expand = |volume_id: &str, path: &str| csi::NodeExpandVolumeRequest {
        volume_id: volume_id.into(),
        volume_path: path.into(),
        ..Default::default()
    };
    let a = r.node.node_expand_volume(expand("", RELATIVE)).await;
    r.debug("NodeExpandVolume without a volume id", a);
    let a = r.node.node_expand_volume(expand(&id, "")).await;
    r.debug("NodeExpandVolume without a volume path", a);
    let a = r
        .node
        .node_expand_volume(expand("sanity-missing", RELATIVE))
        .await;
    r.debug("NodeExpandVolume of a missing volume at some/path", a);
    let a = r.node.node_expand_volume(expand(&id, RELATIVE)).await;
    r.debug("NodeExpandVolume of a volume at some/path", a);

    // The lifecycle, and the same calls at real paths.
    let a = r
        .controller
        .controller_publish_volume(csi::ControllerPublishVolumeRequest {
            volume_id: "sanity-missing".into(),
            node_id: node_id.clone(),
            volume_capability: Some(cap()),
            ..Default::default()
        })
        .await;
    r.debug("ControllerPublishVolume of a missing volume", a);
    let a = r
        .controller
        .controller_publish_volume(csi::ControllerPublishVolumeRequest {
            volume_id: id.clone(),
            node_id: node_id.clone(),
            volume_capability: Some(cap()),
            ..Default::default()
        })
        .await;
    let context: HashMap<_, _> = a
        .as_ref()
        .map(|p| p.get_ref().publish_context.clone())
        .unwrap_or_default();
    r.debug("ControllerPublishVolume", a);
    let mut req = stage(&id, &staging, Some(cap()));
    req.publish_context = context.clone();
    let a = r.node.node_stage_volume(req).await;
    r.debug("NodeStageVolume", a);
    let mut req = publish(&id, &target, Some(cap()));
    req.publish_context = context;
    let a = r.node.node_publish_volume(req).await;
    r.debug("NodePublishVolume", a);
    let a = r
        .node
        .node_get_volume_stats(volume_stats(&id, &target))
        .await;
    r.note("NodeGetVolumeStats at the target", a, stats);
    let a = r
        .node
        .node_get_volume_stats(volume_stats(&id, &staging))
        .await;
    r.note("NodeGetVolumeStats at the staging path", a, stats);
    let a = r
        .node
        .node_get_volume_stats(volume_stats(&id, "/path/does/not/exist"))
        .await;
    r.note("NodeGetVolumeStats where the volume is not", a, stats);
    let a = r
        .node
        .node_get_volume_stats(volume_stats(&id, RELATIVE))
        .await;
    r.note(
        "NodeGetVolumeStats of a published volume at some/path",
        a,
        stats,
    );
    let a = r.node.node_expand_volume(expand(&id, &target)).await;
    r.debug("NodeExpandVolume at the target", a);
    let a = r.node.node_unpublish_volume(unpublish(&id, &target)).await;
    r.debug("NodeUnpublishVolume", a);
    let a = r.node.node_unpublish_volume(unpublish(&id, &target)).await;
    r.debug("NodeUnpublishVolume again", a);
    let a = r.node.node_unstage_volume(unstage(&id, &staging)).await;
    r.debug("NodeUnstageVolume", a);
    let a = r.node.node_unstage_volume(unstage(&id, &staging)).await;
    r.debug("NodeUnstageVolume again", a);
    let a = r
        .controller
        .controller_unpublish_volume(csi::ControllerUnpublishVolumeRequest {
            volume_id: id.clone(),
            node_id,
            ..Default::default()
        })
        .await;
    r.debug("ControllerUnpublishVolume", a);
    let delete = |volume_id: &str| csi::DeleteVolumeRequest {
        volume_id: volume_id.into(),
        ..Default::default()
    };
    let a = r.controller.delete_volume(delete("")).await;
    r.debug("DeleteVolume without a volume id", a);
    let a = r.controller.delete_volume(delete(&id)).await;
    r.debug("DeleteVolume", a);
    let a = r.controller.delete_volume(delete(&id)).await;
    r.debug("DeleteVolume again", a);
    let a = r
        .node
        .node_get_volume_stats(volume_stats(&id, RELATIVE))
        .await;
    r.note(
        "NodeGetVolumeStats of a deleted volume at some/path",
        a,
        stats,
    );
    let a = r.node.node_expand_volume(expand(&id, RELATIVE)).await;
    r.debug("NodeExpandVolume of a deleted volume at some/path", a);

    // The volume's id is the plugin's; the same on both sides but for that.
    r.answers
        .into_iter()
        .map(|(case, answer)| (case, answer.replace(&id, "<volume id>")))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn csi_sanity_v1_cases_through_the_bridge_answer_as_the_plugin_itself() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let options = || {
        let mut o = support::Options::new("v1");
        o.publish_mode = "symlink".into(); // what it made can be read off the filesystem
        o
    };

    let plugin = support::Backend::start(options()).await;
    let direct = cases(plugin.channel().await, &d.join("direct")).await;

    let backend = support::Backend::start(options()).await;
    let b = bridge_support::mirror_bridge(d, &backend).await;
    let bridged = cases(b.front.channel(), &d.join("bridged")).await;

    assert_eq!(direct.len(), bridged.len());
    let differ: Vec<_> = direct
        .iter()
        .zip(&bridged)
        .filter(|(a, b)| a != b)
        .map(|((case, direct), (_, bridged))| {
            format!("{case}:\n  direct:  {direct}\n  bridged: {bridged}")
        })
        .collect();
    assert!(differ.is_empty(), "{}", differ.join("\n"));

    // The cases csi-sanity lost through the bridge, answered as the plugin answers them.
    let answer = |case: &str| {
        direct
            .iter()
            .find(|(c, _)| *c == case)
            .map(|(_, a)| a.as_str())
            .unwrap()
    };
    for case in [
        "NodeGetVolumeStats of a missing volume at some/path",
        "NodeExpandVolume of a missing volume at some/path",
        "NodeGetVolumeStats of a volume at some/path",
    ] {
        assert_eq!(answer(case), "NotFound", "{case}");
    }
    assert!(answer("NodeExpandVolume of a volume at some/path").starts_with("OK"));
    assert!(answer("NodeGetVolumeStats at the target").starts_with("OK"));

    // Whatever the plugin did at the relative path, it did inside the mirror, which is empty
    // again; nothing named some/path exists where either gateway runs.
    let left: Vec<_> = std::fs::read_dir(&b.mirror)
        .map(|d| d.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "the appliance left {left:?} in its mirror");
    assert!(!Path::new(RELATIVE).exists());
}
