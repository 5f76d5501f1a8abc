//! The full matrix: every front dialect × every upstream dialect (the reference backend in each
//! `--dialect`), running the volume lifecycle through the built gateway and asserting what each
//! side's spec revision says: translated fields, capabilities, idempotency and error codes.

mod support;

use std::collections::HashMap;

use csi_gateway::dialect::Dialect;
use support::front::{Front, Volume};
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
