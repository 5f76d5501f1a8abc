//! The full matrix: every front dialect × every upstream dialect (the reference backend in each
//! `--dialect`), running the volume lifecycle through the built gateway and asserting what each
//! side's spec revision says: translated fields, capabilities, idempotency and error codes.

use csi_gateway_test_support as support;

use std::collections::HashMap;

use csi_gateway::dialect::Dialect;
use support::front::{Front, Node, Volume};
use support::gateway::Gateway;
use support::{Backend, Options};
use tonic::Code;

/// Whether `d` has snapshots (v0.3 and later).
fn has_snapshots(d: Dialect) -> bool {
    matches!(d, Dialect::V1 | Dialect::V0_3)
}

async fn lifecycle(front: Dialect, upstream: Dialect) {
    // A plugin that requires staging behind a pre-staging front needs the staging emulation of
    // the durable-state issue; that case has its own test below. Here the plugin stages only
    // when the front can.
    let front_stages = has_snapshots(front);
    let plugin_stages = front_stages && has_snapshots(upstream);
    let opts = Options::new(upstream.name()).arg(format!("--require-staging={plugin_stages}"));
    let backend = Backend::start(opts).await;
    let legacy = if front == Dialect::V0_1Oneof {
        "v0.1-oneof"
    } else {
        "v0.1"
    };
    let gateway = Gateway::start(&backend.socket, legacy, &[]).await;
    let f = Front::new(front, gateway.channel().await);
    let cell = format!("{front} front -> {upstream} plugin");

    // Identity.
    assert_eq!(
        f.plugin_name().await.unwrap(),
        "reference.csi-gateway.dev",
        "{cell}"
    );
    assert!(f.probe().await.unwrap(), "{cell}");

    // Capabilities: translated, and filtered to what both sides can do.
    let caps = f.controller_caps().await.unwrap();
    for want in ["CREATE_DELETE_VOLUME", "PUBLISH_UNPUBLISH_VOLUME"] {
        assert!(
            caps.iter().any(|c| c == want),
            "{cell}: {want} missing from {caps:?}"
        );
    }
    let snapshots = caps.iter().any(|c| c.contains("SNAPSHOT"));
    assert_eq!(
        snapshots,
        has_snapshots(front) && has_snapshots(upstream),
        "{cell}: {caps:?}"
    );
    let node_caps = f.node_caps().await.unwrap();
    let stage_cap = node_caps.iter().any(|c| c == "STAGE_UNSTAGE_VOLUME");
    assert_eq!(stage_cap, plugin_stages, "{cell}: {node_caps:?}");

    // The node id, through NodeGetInfo / NodeGetId / GetNodeID as each side names it.
    let node = f.node_id().await.unwrap();
    assert_eq!(node.name(), "node-1", "{cell}: {node:?}");

    // CreateVolume, with credentials, and its idempotent retry.
    let secrets: HashMap<String, String> = [("password".to_string(), "s3cret".to_string())].into();
    let v = f.create("vol-a", 1 << 30, &secrets).await.unwrap();
    assert!(!v.id.is_empty() && v.capacity >= 1 << 30, "{cell}: {v:?}");
    if upstream == Dialect::V0_1Oneof {
        // The draft plugin's VolumeHandle metadata reaches every front as its volume context.
        assert_eq!(
            v.context.get("kind").map(String::as_str),
            Some("mount"),
            "{cell}: {v:?}"
        );
    }
    let again = f.create("vol-a", 1 << 30, &secrets).await.unwrap();
    assert_eq!(
        again.id, v.id,
        "{cell}: CreateVolume retry must return the same volume"
    );

    // Attach, (stage,) publish, and back.
    let publish = f.controller_publish(&v, &node).await.unwrap();
    let target = backend.path("target");
    let staging = backend.path("staging");
    if plugin_stages {
        std::fs::create_dir_all(&staging).unwrap();
        f.node_stage(&v, &publish, &staging).await.unwrap();
    }
    f.node_publish(
        &v,
        &publish,
        plugin_stages.then_some(staging.as_path()),
        &target,
    )
    .await
    .unwrap();
    assert!(
        std::fs::symlink_metadata(&target).is_ok(),
        "{cell}: nothing published at {}",
        target.display()
    );
    f.node_unpublish(&v, &target).await.unwrap();
    if plugin_stages {
        f.node_unstage(&v, &staging).await.unwrap();
    }
    f.controller_unpublish(&v, &node).await.unwrap();

    // DeleteVolume, then again: OK from v0.1.0 on; the draft answered VOLUME_DOES_NOT_EXIST,
    // and a draft front only hears that from a draft plugin.
    f.delete(&v, &secrets).await.unwrap();
    let second = f.delete(&v, &secrets).await;
    if front == Dialect::V0_1Oneof && upstream == Dialect::V0_1Oneof {
        let e = second.expect_err(&cell);
        assert!(
            e.is(Code::NotFound, "VOLUME_DOES_NOT_EXIST"),
            "{cell}: {e:?}"
        );
    } else {
        second.unwrap_or_else(|e| panic!("{cell}: second DeleteVolume must be OK, got {e:?}"));
    }

    // An unknown volume is NOT_FOUND (the draft: VOLUME_DOES_NOT_EXIST) on every path.
    let ghost = Volume {
        id: "no-such-volume".into(),
        context: v.context.clone(),
        capacity: 0,
    };
    let e = f.controller_publish(&ghost, &node).await.expect_err(&cell);
    assert!(
        e.is(Code::NotFound, "VOLUME_DOES_NOT_EXIST"),
        "{cell}: {e:?}"
    );

    // Every call was served by the gateway, translated unless the dialects match.
    let log = gateway.log_text();
    let translated = log
        .lines()
        .filter(|l| l.contains("rpc") && l.contains(&format!("upstream=\"{upstream}\"")))
        .count();
    assert!(
        translated > 10,
        "{cell}: expected the calls in the gateway log:\n{log}"
    );
}

macro_rules! matrix {
    ($($name:ident: $front:ident -> $upstream:ident;)*) => {$(
        #[tokio::test]
        async fn $name() {
            lifecycle(Dialect::$front, Dialect::$upstream).await;
        }
    )*};
}

matrix! {
    v1_to_v1: V1 -> V1;
    v1_to_v0_3: V1 -> V0_3;
    v1_to_v0_1: V1 -> V0_1;
    v1_to_draft: V1 -> V0_1Oneof;
    v0_3_to_v1: V0_3 -> V1;
    v0_3_to_v0_3: V0_3 -> V0_3;
    v0_3_to_v0_1: V0_3 -> V0_1;
    v0_3_to_draft: V0_3 -> V0_1Oneof;
    v0_1_to_v1: V0_1 -> V1;
    v0_1_to_v0_3: V0_1 -> V0_3;
    v0_1_to_v0_1: V0_1 -> V0_1;
    v0_1_to_draft: V0_1 -> V0_1Oneof;
    draft_to_v1: V0_1Oneof -> V1;
    draft_to_v0_3: V0_1Oneof -> V0_3;
    draft_to_v0_1: V0_1Oneof -> V0_1;
    draft_to_draft: V0_1Oneof -> V0_1Oneof;
}

// ---- Cross-dialect cases: each runs in every cell it concerns, with the reference backend in
// ---- each `--dialect`, and asserts what the client's revision expects.

/// A backend of `upstream` (with `backend_args`) behind a gateway (with `gateway_args`), and a
/// client of `front`.
struct Cell {
    backend: Backend,
    gateway: Gateway,
    f: Front,
    name: String,
}

async fn cell(
    front: Dialect,
    upstream: Dialect,
    backend_args: &[&str],
    gateway_args: &[&str],
) -> Cell {
    let mut opts = Options::new(upstream.name());
    for a in backend_args {
        opts = opts.arg(*a);
    }
    let backend = Backend::start(opts).await;
    let legacy = if front == Dialect::V0_1Oneof {
        "v0.1-oneof"
    } else {
        "v0.1"
    };
    let gateway = Gateway::start(&backend.socket, legacy, gateway_args).await;
    let f = Front::new(front, gateway.channel().await);
    let name = format!("{front} front -> {upstream} plugin {backend_args:?} {gateway_args:?}");
    Cell {
        backend,
        gateway,
        f,
        name,
    }
}

fn cells() -> impl Iterator<Item = (Dialect, Dialect)> {
    Dialect::ALL
        .into_iter()
        .flat_map(|f| Dialect::ALL.into_iter().map(move |u| (f, u)))
}

fn ghost(v: &Volume) -> Volume {
    Volume {
        id: "no-such-volume".into(),
        context: v.context.clone(),
        capacity: 0,
    }
}

/// v1 leaves target_path to the plugin, v0.x to the CO: between a v1 client and a v0.x plugin
/// (one that insists on the v0.x contract, `--co-creates-target`) the gateway creates it before
/// the publish and removes it after the unpublish; other cells keep their own contract.
#[tokio::test]
async fn target_path_is_created_and_removed_between_v1_clients_and_v0x_plugins() {
    for (front, upstream) in cells() {
        let c = cell(
            front,
            upstream,
            &["--require-staging=false", "--co-creates-target"],
            &[],
        )
        .await;
        let cell = &c.name;
        let secrets = HashMap::new();
        let v = c.f.create("vol-t", 1 << 20, &secrets).await.unwrap();
        let node = c.f.node_id().await.unwrap();
        let publish = c.f.controller_publish(&v, &node).await.unwrap();
        let target = c.backend.path("target");
        let v1_client = front == Dialect::V1;
        if !v1_client {
            // The CO of a v0.x revision creates the target itself.
            std::fs::create_dir(&target).unwrap();
        }
        c.f.node_publish(&v, &publish, None, &target)
            .await
            .unwrap_or_else(|e| panic!("{cell}: publish: {e:?}"));
        // Idempotent retry.
        c.f.node_publish(&v, &publish, None, &target)
            .await
            .unwrap_or_else(|e| panic!("{cell}: publish again: {e:?}"));
        assert!(target.exists(), "{cell}: nothing at the target");
        c.f.node_unpublish(&v, &target)
            .await
            .unwrap_or_else(|e| panic!("{cell}: unpublish: {e:?}"));
        c.f.node_unpublish(&v, &target)
            .await
            .unwrap_or_else(|e| panic!("{cell}: unpublish again: {e:?}"));
        if v1_client {
            assert!(!target.exists(), "{cell}: v1 promises the target is gone");
            // A gateway restarted between creating a target and publishing leaves an empty
            // directory: the retried publish uses it, and the unpublish removes it.
            std::fs::create_dir(&target).unwrap();
            c.f.node_publish(&v, &publish, None, &target).await.unwrap();
            c.f.node_unpublish(&v, &target).await.unwrap();
            assert!(!target.exists(), "{cell}: leftover target not removed");
            // A target with data in it is never removed.
            std::fs::create_dir(&target).unwrap();
            std::fs::write(target.join("keep"), b"x").unwrap();
            c.f.node_unpublish(&v, &target).await.unwrap();
            assert!(
                target.join("keep").exists(),
                "{cell}: removed a non-empty target"
            );
        } else if upstream != Dialect::V1 {
            assert!(
                target.is_dir(),
                "{cell}: a v0.x CO's target is its own to remove"
            );
        }
    }
}

/// v1 says an unpublish of a target where nothing is published succeeds, and kubelet after a
/// crash and csi-sanity's clean-up send one; a 2018 v0.x driver answers it INTERNAL ("no mount
/// point specified"). Between a v1 client and a v0.x plugin the gateway answers it without the
/// plugin where the target does not exist or is an empty directory or file and no mount (and
/// removes it, as v1 has the plugin do); a target with anything in it still goes to the
/// plugin. The plugin's side is counted on the wire (`Tap`).
#[tokio::test]
async fn unpublishing_where_nothing_is_published_never_reaches_a_v0x_plugin() {
    use support::h2raw::{Hostile, Tap};
    for upstream in [Dialect::V0_3, Dialect::V0_1, Dialect::V0_1Oneof] {
        let backend =
            Backend::start(Options::new(upstream.name()).arg("--require-staging=false")).await;
        let tap = Tap::start(&backend.socket, Hostile::Quiet).await;
        let legacy = match upstream {
            Dialect::V0_1Oneof => "v0.1-oneof",
            _ => "v0.1",
        };
        let gateway = Gateway::start(&tap.socket, legacy, &[]).await;
        let f = Front::new(Dialect::V1, gateway.channel().await);
        let cell = format!("v1 front -> {upstream} plugin");
        let v = f.create("vol-u", 1 << 20, &HashMap::new()).await.unwrap();
        let target = backend.path("never-published");
        let before = tap.requests();
        f.node_unpublish(&v, &target)
            .await
            .unwrap_or_else(|e| panic!("{cell}: no target: {e:?}"));
        std::fs::create_dir(&target).unwrap();
        f.node_unpublish(&v, &target)
            .await
            .unwrap_or_else(|e| panic!("{cell}: an empty directory: {e:?}"));
        assert!(!target.exists(), "{cell}: the empty directory stayed");
        std::fs::write(&target, b"").unwrap();
        f.node_unpublish(&v, &target)
            .await
            .unwrap_or_else(|e| panic!("{cell}: an empty file: {e:?}"));
        assert!(!target.exists(), "{cell}: the empty file stayed");
        assert_eq!(
            tap.requests(),
            before,
            "{cell}: an unpublish where nothing is published reached the plugin\n{}",
            gateway.log_text()
        );
        // Something is there: the plugin's to judge, and never removed.
        std::fs::create_dir(&target).unwrap();
        std::fs::write(target.join("keep"), b"x").unwrap();
        f.node_unpublish(&v, &target)
            .await
            .unwrap_or_else(|e| panic!("{cell}: a directory with content: {e:?}"));
        assert!(tap.requests() > before, "{cell}: the plugin was not asked");
        assert!(
            target.join("keep").exists(),
            "{cell}: removed a non-empty target"
        );
        // A request v1 requires more of is refused as before, not answered OK.
        let e = f
            .node_unpublish(&ghost_id(&v, ""), &backend.path("missing"))
            .await
            .expect_err(&cell);
        assert_eq!(e.code, Code::InvalidArgument, "{cell}: {e:?}");
    }
}

/// The gateway reads kubelet-style target paths off mountinfo, whose kernel escapes every
/// space, tab, newline and backslash of a path (`\040`, `\011`, `\012`, `\134`). A target
/// whose name holds them, published as a real bind mount by a v0.3 plugin, is seen as the
/// mount it is: its unpublish reaches the plugin, which unmounts it, rather than being taken
/// for an empty directory the gateway may answer for (and leave mounted).
#[tokio::test]
async fn a_mounted_target_with_escaped_characters_is_unpublished_by_the_plugin() {
    assert!(
        support::bind_mounts_work(),
        "this test needs real bind mounts (root with CAP_SYS_ADMIN)"
    );
    let c = cell(
        Dialect::V1,
        Dialect::V0_3,
        &["--require-staging=false"],
        &[],
    )
    .await;
    let cell = &c.name;
    let v =
        c.f.create("vol-esc", 1 << 20, &HashMap::new())
            .await
            .unwrap();
    let node = c.f.node_id().await.unwrap();
    let publish = c.f.controller_publish(&v, &node).await.unwrap();
    let target = c.backend.path("a target\twith\ttab, space\\and backslash");
    c.f.node_publish(&v, &publish, None, &target)
        .await
        .unwrap_or_else(|e| panic!("{cell}: publish: {e:?}"));
    assert!(
        mounted(&target),
        "{cell}: the plugin did not mount {target:?}"
    );
    c.f.node_unpublish(&v, &target)
        .await
        .unwrap_or_else(|e| panic!("{cell}: unpublish: {e:?}"));
    assert!(
        !mounted(&target),
        "{cell}: {target:?} is still mounted: the unpublish never reached the plugin\n{}",
        c.gateway.log_text()
    );
    assert!(!target.exists(), "{cell}: v1 promises the target is gone");
}

/// Whether `path` is a mount point, by `findmnt` (util-linux), which reads mountinfo itself.
fn mounted(path: &std::path::Path) -> bool {
    std::process::Command::new("findmnt")
        .arg("--mountpoint")
        .arg(path)
        .stdout(std::process::Stdio::null())
        .status()
        .expect("findmnt (util-linux)")
        .success()
}

fn ghost_id(v: &Volume, id: &str) -> Volume {
    Volume {
        id: id.into(),
        context: v.context.clone(),
        capacity: 0,
    }
}

/// A translated NodePublishVolume that lacks a required field is INVALID_ARGUMENT — also when
/// the plugin requires staging and no staging path came, and when the volume does not exist:
/// required fields first, as the newer error tables imply.
#[tokio::test]
async fn missing_required_field_is_invalid_argument_before_any_precondition() {
    for (front, upstream) in cells().filter(|(f, _)| *f != Dialect::V0_1Oneof) {
        // The plugin requires staging wherever it can (v1, v0.3).
        let c = cell(front, upstream, &[], &[]).await;
        let cell = &c.name;
        let v = c.f.create("vol-r", 1 << 20, &HashMap::new()).await.unwrap();
        let target = c.backend.path("target");
        for vol in [v.clone(), ghost(&v)] {
            let e =
                c.f.node_publish_without_capability(&vol, &target)
                    .await
                    .expect_err(cell);
            assert_eq!(e.code, Code::InvalidArgument, "{cell}: {e:?}");
            assert!(e.message.contains("volume_capability"), "{cell}: {e:?}");
        }
    }
}

/// v0.x plugins answer NOT_FOUND when unpublishing a volume that is gone; a v1 client gets OK.
/// Every other cell keeps the plugin's answer.
#[tokio::test]
async fn unpublish_of_a_deleted_volume_is_ok_for_v1_clients_of_v0x_plugins() {
    for (front, upstream) in cells() {
        let c = cell(front, upstream, &["--require-staging=false"], &[]).await;
        let cell = &c.name;
        let v = c.f.create("vol-n", 1 << 20, &HashMap::new()).await.unwrap();
        c.f.delete(&v, &HashMap::new()).await.unwrap();
        let target = c.backend.path("target");
        let out = c.f.node_unpublish(&v, &target).await;
        if front == Dialect::V1 && upstream != Dialect::V1 {
            out.unwrap_or_else(|e| panic!("{cell}: {e:?}"));
        } else {
            let e = out.expect_err(cell);
            assert!(
                e.is(Code::NotFound, "VOLUME_DOES_NOT_EXIST"),
                "{cell}: {e:?}"
            );
        }
    }
}

/// v1 ControllerUnpublishVolume: a volume or node the plugin cannot find, when the volume "can
/// be safely regarded as ControllerUnpublished from the node", SHOULD be OK. v0.x plugins (and
/// the draft's VOLUME_DOES_NOT_EXIST / NODE_DOES_NOT_EXIST) answer NOT_FOUND: a v1 client gets
/// OK. The reference v1 plugin answers OK itself; older clients keep the older answer.
#[tokio::test]
async fn controller_unpublish_of_a_deleted_volume_or_unknown_node_is_ok_for_v1_clients() {
    for (front, upstream) in cells() {
        let c = cell(front, upstream, &["--require-staging=false"], &[]).await;
        let cell = &c.name;
        let secrets = HashMap::new();
        let node = c.f.node_id().await.unwrap();
        let kept = c.f.create("vol-k", 1 << 20, &secrets).await.unwrap();
        let gone = c.f.create("vol-g", 1 << 20, &secrets).await.unwrap();
        c.f.delete(&gone, &secrets).await.unwrap();
        let stranger = Node::Id("no-such-node".into());
        for (what, v, n) in [
            ("deleted volume", &gone, &node),
            ("unknown node", &kept, &stranger),
        ] {
            let out = c.f.controller_unpublish(v, n).await;
            if front == Dialect::V1 || upstream == Dialect::V1 {
                out.unwrap_or_else(|e| panic!("{cell}: {what}: {e:?}"));
            } else {
                let e = out.expect_err(cell);
                assert!(
                    e.is(Code::NotFound, "_DOES_NOT_EXIST"),
                    "{cell}: {what}: {e:?}"
                );
            }
        }
        // Other failures are kept: a missing volume_id is still INVALID_ARGUMENT.
        let mut nameless = kept.clone();
        nameless.id.clear();
        let e =
            c.f.controller_unpublish(&nameless, &node)
                .await
                .expect_err(cell);
        assert!(
            e.is(Code::InvalidArgument, "MISSING_REQUIRED_FIELD"),
            "{cell}: {e:?}"
        );
    }
}

/// v0.1 and v0.2 clients' suites need a non-empty NodeGetCapabilities list: `[UNKNOWN]` when
/// nothing their revision has is left. A `csi.v0` client on the default listener
/// (`v0_dialect = "v0.3"`) may be of v0.2 too: it gets `[UNKNOWN]` where a translated list
/// would be empty, which v0.3 accepts as well; a v0.3 plugin's own list passes as it came.
#[tokio::test]
async fn node_capabilities_are_never_empty_for_v0_1_and_v0_2_clients() {
    for upstream in Dialect::ALL {
        for (front, v0) in [
            (Dialect::V0_1, "v0.3"),
            (Dialect::V0_3, "v0.2"),
            (Dialect::V0_3, "v0.3"),
        ] {
            let flag = format!("--v0-dialect={v0}");
            let c = cell(front, upstream, &["--require-staging=false"], &[&flag]).await;
            let caps = c.f.node_caps().await.unwrap();
            // A v0.3 plugin's own answer reaches a v0.3 client as it came.
            let relayed = front == Dialect::V0_3 && upstream == Dialect::V0_3 && v0 == "v0.3";
            if !relayed {
                assert_eq!(caps, vec!["UNKNOWN".to_string()], "{}", c.name);
            } else {
                assert!(!caps.iter().any(|c| c == "UNKNOWN"), "{}: {caps:?}", c.name);
            }
        }
    }
}

/// v0.2 and v0.3 share `csi.v0`; with `listen.v0_dialect = "v0.2"` a client is never shown what
/// v0.3 added (snapshots, topology) and gets UNIMPLEMENTED for v0.3-only RPCs, whatever the
/// plugin speaks — a v0.3 plugin's answers included, which are then translated, not relayed.
#[tokio::test]
async fn v0_2_clients_are_told_apart_and_never_see_v0_3_capabilities() {
    use csi_gateway::dialect::proto::v0_3 as d;
    for upstream in Dialect::ALL {
        let c = cell(
            Dialect::V0_3,
            upstream,
            &["--topology=zone=a"],
            &["--v0-dialect=v0.2"],
        )
        .await;
        let cell = &c.name;
        let caps = c.f.controller_caps().await.unwrap();
        assert!(
            caps.iter().any(|c| c == "CREATE_DELETE_VOLUME"),
            "{cell}: {caps:?}"
        );
        assert!(
            !caps.iter().any(|c| c.contains("SNAPSHOT")),
            "{cell}: {caps:?}"
        );
        let node = c.f.node_caps().await.unwrap();
        let stages = matches!(upstream, Dialect::V1 | Dialect::V0_3);
        assert_eq!(
            node.iter().any(|c| c == "STAGE_UNSTAGE_VOLUME"),
            stages,
            "{cell}: v0.2 has staging: {node:?}"
        );
        let ch = c.gateway.channel().await;
        let plugin = d::identity_client::IdentityClient::new(ch.clone())
            .get_plugin_capabilities(d::GetPluginCapabilitiesRequest {})
            .await
            .unwrap()
            .into_inner();
        assert!(
            plugin.capabilities.iter().all(|p| matches!(
                &p.r#type,
                Some(d::plugin_capability::Type::Service(s)) if s.r#type == 1
            )),
            "{cell}: no topology for v0.2: {plugin:?}"
        );
        let e = d::node_client::NodeClient::new(ch.clone())
            .node_get_info(d::NodeGetInfoRequest {})
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::Unimplemented, "{cell}: {e:?}");
        // v0.2's node id RPC, deprecated in v0.3.
        #[allow(deprecated)]
        let id = d::node_client::NodeClient::new(ch.clone())
            .node_get_id(d::NodeGetIdRequest {})
            .await
            .unwrap()
            .into_inner();
        assert_eq!(id.node_id, "node-1", "{cell}");
        let e = d::controller_client::ControllerClient::new(ch)
            .create_snapshot(d::CreateSnapshotRequest {
                source_volume_id: "v".into(),
                name: "s".into(),
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::Unimplemented, "{cell}: {e:?}");
    }
}

/// An invalid ListVolumes `starting_token` is ABORTED ("start again with an empty token") for
/// every gRPC client, a draft plugin's GeneralError included; a draft client gets a retryable
/// GeneralError (its own dialect has no code for it).
#[tokio::test]
async fn bad_list_volumes_token_is_aborted_on_every_path() {
    for (front, upstream) in cells() {
        let c = cell(front, upstream, &["--require-staging=false"], &[]).await;
        let cell = &c.name;
        for name in ["vol-1", "vol-2"] {
            c.f.create(name, 1 << 20, &HashMap::new()).await.unwrap();
        }
        let (first, next) = c.f.list_volumes("").await.unwrap();
        assert_eq!(first.len(), 1, "{cell}");
        assert!(!next.is_empty(), "{cell}: paging works");
        let e = c.f.list_volumes("not-a-token").await.expect_err(cell);
        match front {
            Dialect::V0_1Oneof => assert!(
                e.draft
                    .as_deref()
                    .is_some_and(|j| j.contains("general_error")),
                "{cell}: {e:?}"
            ),
            _ => assert_eq!(e.code, Code::Aborted, "{cell}: {e:?}"),
        }
    }
}

/// A draft client gets `GeneralError MISSING_REQUIRED_FIELD` for a missing field, whichever
/// plugin is behind — before the volume's existence is looked at, by the gateway or, for a
/// draft plugin, by the reference backend itself.
#[tokio::test]
async fn draft_clients_get_missing_required_field_from_every_plugin() {
    for upstream in Dialect::ALL {
        let c = cell(
            Dialect::V0_1Oneof,
            upstream,
            &["--require-staging=false"],
            &[],
        )
        .await;
        let cell = &c.name;
        let v = c.f.create("vol-m", 1 << 20, &HashMap::new()).await.unwrap();
        let target = c.backend.path("target");
        for vol in [v.clone(), ghost(&v)] {
            let e =
                c.f.node_publish_without_capability(&vol, &target)
                    .await
                    .expect_err(cell);
            let json = e.draft.clone().unwrap_or_default();
            assert!(json.contains("MISSING_REQUIRED_FIELD"), "{cell}: {e:?}");
            assert!(
                json.contains("\"caller_must_not_retry\":true"),
                "{cell}: {e:?}"
            );
        }
    }
}

/// A field any revision marks REQUIRED is checked by the gateway on a translated call, so the
/// draft client gets `MISSING_REQUIRED_FIELD` where the gRPC plugin's INVALID_ARGUMENT would
/// reach it as `GeneralError UNDEFINED`: ControllerPublishVolume's `node_id` (OPTIONAL in the
/// draft only) and a capability's `access_mode`, also for a volume that does not exist. A v1
/// client of a draft plugin gets INVALID_ARGUMENT for the `node_id` its own revision requires.
#[tokio::test]
async fn fields_any_revision_requires_are_checked_for_draft_clients() {
    for upstream in [Dialect::V1, Dialect::V0_3, Dialect::V0_1] {
        let c = cell(
            Dialect::V0_1Oneof,
            upstream,
            &["--require-staging=false"],
            &[],
        )
        .await;
        let cell = &c.name;
        let v = c.f.create("vol-q", 1 << 20, &HashMap::new()).await.unwrap();
        let target = c.backend.path("target");
        for vol in [v.clone(), ghost(&v)] {
            let e =
                c.f.controller_publish_without_node(&vol)
                    .await
                    .expect_err(cell);
            let json = e.draft.as_deref().unwrap_or_default();
            assert!(json.contains("MISSING_REQUIRED_FIELD"), "{cell}: {e:?}");
            assert!(json.contains("node_id"), "{cell}: {e:?}");
            let e =
                c.f.node_publish_without_access_mode(&vol, &target)
                    .await
                    .expect_err(cell);
            let json = e.draft.as_deref().unwrap_or_default();
            assert!(json.contains("MISSING_REQUIRED_FIELD"), "{cell}: {e:?}");
            assert!(
                json.contains("volume_capability.access_mode"),
                "{cell}: {e:?}"
            );
        }
    }
    let c = cell(Dialect::V1, Dialect::V0_1Oneof, &[], &[]).await;
    let v = c.f.create("vol-q", 1 << 20, &HashMap::new()).await.unwrap();
    let e =
        c.f.controller_publish_without_node(&v)
            .await
            .expect_err(&c.name);
    assert_eq!(e.code, Code::InvalidArgument, "{}: {e:?}", c.name);
    assert!(e.message.contains("node_id"), "{}: {e:?}", c.name);
}

/// The reference backend puts the alpha GET_SNAPSHOT behind `--alpha-get-snapshot`: a v1
/// client (relayed) and a v0.3 client (translated) see it only then.
#[tokio::test]
async fn reference_backend_gates_alpha_get_snapshot() {
    for front in [Dialect::V1, Dialect::V0_3] {
        for (flag, shown) in [(None, false), (Some("--alpha-get-snapshot"), true)] {
            let args: Vec<&str> = flag.into_iter().collect();
            let c = cell(front, Dialect::V1, &args, &[]).await;
            let caps = c.f.controller_caps().await.unwrap();
            assert!(
                caps.iter().any(|c| c == "LIST_SNAPSHOTS"),
                "{}: {caps:?}",
                c.name
            );
            // v0.3 has no GET_SNAPSHOT at all.
            let want = shown && front == Dialect::V1;
            assert_eq!(
                caps.iter().any(|c| c == "GET_SNAPSHOT"),
                want,
                "{}: {caps:?}",
                c.name
            );
        }
    }
}

/// The block half of the target-path case: a v1 client publishing a block volume leaves no
/// file at the target; the gateway creates an empty file for a v0.x plugin, and removes it after
/// the unpublish.
#[tokio::test]
async fn block_target_is_a_file_the_gateway_creates_and_removes_for_v0x_plugins() {
    use csi_gateway::dialect::proto::v1;
    use v1::volume_capability::{access_mode::Mode, AccessMode, AccessType, BlockVolume};
    let block = v1::VolumeCapability {
        access_type: Some(AccessType::Block(BlockVolume {})),
        access_mode: Some(AccessMode {
            mode: Mode::SingleNodeWriter as i32,
        }),
    };
    for upstream in Dialect::ALL {
        let c = cell(
            Dialect::V1,
            upstream,
            &["--require-staging=false", "--co-creates-target"],
            &[],
        )
        .await;
        let cell = &c.name;
        let ch = c.gateway.channel().await;
        let mut ctrl = v1::controller_client::ControllerClient::new(ch.clone());
        let mut node = v1::node_client::NodeClient::new(ch);
        let vol = ctrl
            .create_volume(v1::CreateVolumeRequest {
                name: "vol-b".into(),
                capacity_range: Some(v1::CapacityRange {
                    required_bytes: 1 << 20,
                    limit_bytes: 0,
                }),
                volume_capabilities: vec![block.clone()],
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner()
            .volume
            .unwrap();
        let node_id = node
            .node_get_info(v1::NodeGetInfoRequest {})
            .await
            .unwrap()
            .into_inner()
            .node_id;
        let publish_context = ctrl
            .controller_publish_volume(v1::ControllerPublishVolumeRequest {
                volume_id: vol.volume_id.clone(),
                node_id,
                volume_capability: Some(block.clone()),
                volume_context: vol.volume_context.clone(),
                ..Default::default()
            })
            .await
            .unwrap_or_else(|e| panic!("{cell}: {e:?}"))
            .into_inner()
            .publish_context;
        let target = c.backend.path("block-target");
        node.node_publish_volume(v1::NodePublishVolumeRequest {
            volume_id: vol.volume_id.clone(),
            publish_context,
            target_path: target.display().to_string(),
            volume_capability: Some(block.clone()),
            volume_context: vol.volume_context.clone(),
            ..Default::default()
        })
        .await
        .unwrap_or_else(|e| panic!("{cell}: publish: {e:?}"));
        let meta = std::fs::metadata(&target).unwrap();
        assert!(meta.is_file(), "{cell}: a block target is a file: {meta:?}");
        node.node_unpublish_volume(v1::NodeUnpublishVolumeRequest {
            volume_id: vol.volume_id.clone(),
            target_path: target.display().to_string(),
        })
        .await
        .unwrap_or_else(|e| panic!("{cell}: unpublish: {e:?}"));
        assert!(!target.exists(), "{cell}: the block target is removed");
    }
}
