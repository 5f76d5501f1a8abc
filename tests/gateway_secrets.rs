//! Secrets never leave the gateway in its logs or metrics, at any level. Calls carrying known
//! canary secrets go through the gateway in every front dialect — relayed (same dialect) and
//! translated — with every log level on (`trace`, bodies included); then the canaries must
//! appear nowhere in the log or on `/metrics`.

use csi_gateway_test_support as support;

use std::collections::HashMap;
use std::time::Duration;

use csi_gateway::dialect::Dialect;
use support::front::Front;
use support::gateway::{FrontPath, Gateway};
use support::{Backend, Options};

const CANARIES: [&str; 2] = ["CANARY-7f3a-secret-value", "CANARY-credential-92b1"];

fn secrets() -> HashMap<String, String> {
    [
        ("password".to_string(), CANARIES[0].to_string()),
        ("token".to_string(), CANARIES[1].to_string()),
    ]
    .into()
}

async fn no_canary_leaks(front: Dialect, upstream: Dialect) {
    let backend =
        Backend::start(Options::new(upstream.name()).arg("--require-staging=false")).await;
    let legacy = if front == Dialect::V0_1Oneof {
        "v0.1-oneof"
    } else {
        "v0.1"
    };
    let port = support::free_port();
    let gateway = Gateway::start(
        &backend.socket,
        legacy,
        &[
            "--log-level=trace",
            &format!("--metrics-listen=127.0.0.1:{port}"),
        ],
    )
    .await;
    let f = Front::new(front, gateway.channel().await);
    let v = f.create("vol-secret", 1 << 20, &secrets()).await.unwrap();
    let node = f.node_id().await.unwrap();
    f.controller_publish(&v, &node).await.unwrap();
    f.controller_unpublish(&v, &node).await.unwrap();
    f.delete(&v, &secrets()).await.unwrap();
    // A failing call with secrets, too: its error path logs as well.
    let ghost = support::front::Volume {
        id: "no-such".into(),
        context: HashMap::new(),
        capacity: 0,
    };
    let _ = f.delete(&ghost, &secrets()).await;

    let metrics = ureq::get(&format!("http://127.0.0.1:{port}/metrics"))
        .call()
        .unwrap()
        .body_mut()
        .read_to_string()
        .unwrap();
    // Logs are written as calls finish; give the writer a moment after the last reply.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let log = gateway.log_text();
    let cell = format!("{front} front -> {upstream} plugin");
    assert!(
        log.contains("bodies"),
        "{cell}: trace level must log bodies, or this test proves nothing:\n{log}"
    );
    assert!(
        log.contains("***stripped***"),
        "{cell}: secrets must show as stripped:\n{log}"
    );
    assert!(
        metrics.contains("csi_sidecar_operations_seconds"),
        "{cell}: {metrics}"
    );
    for canary in CANARIES {
        assert!(
            !log.contains(canary),
            "{cell}: canary {canary} leaked into the log:\n{log}"
        );
        assert!(
            !metrics.contains(canary),
            "{cell}: canary {canary} leaked into the metrics"
        );
    }
}

macro_rules! cells {
    ($($name:ident: $front:ident -> $upstream:ident;)*) => {$(
        #[tokio::test]
        async fn $name() {
            no_canary_leaks(Dialect::$front, Dialect::$upstream).await;
        }
    )*};
}

cells! {
    v1_relayed: V1 -> V1;
    v1_translated: V1 -> V0_1Oneof;
    v0_3_relayed: V0_3 -> V0_3;
    v0_3_translated: V0_3 -> V0_1;
    v0_1_relayed: V0_1 -> V0_1;
    v0_1_translated: V0_1 -> V1;
    draft_relayed: V0_1Oneof -> V0_1Oneof;
    draft_translated: V0_1Oneof -> V0_3;
}

/// What a plugin that echoes its input puts in its error messages never reaches the log: the
/// request's secrets, the values of `log.redact_keys`, and (in front of a draft plugin) the
/// VolumeHandle metadata — in every upstream dialect, relayed or translated, in both log
/// formats, at every level.
async fn echoed_errors_are_scrubbed(front: Dialect, upstream: Dialect, format: &str) {
    let backend = Backend::start(
        Options::new(upstream.name())
            .arg("--require-staging=false")
            .arg("--test-echo-errors=ControllerPublishVolume,NodePublishVolume"),
    )
    .await;
    let config = backend.path("gateway.toml");
    std::fs::write(
        &config,
        "[listen]\nendpoint = \"unix:///unused/csi.sock\"\n[upstream]\nendpoint = \"unix:///unused/plugin.sock\"\n\
         [state]\ndir = \"/unused\"\n[log]\nredact_keys = [\"vault-token\"]\n",
    )
    .unwrap();
    let gateway = Gateway::start(
        &backend.socket,
        "v0.1-oneof",
        &[
            &format!("--config={}", config.display()),
            "--log-level=trace",
            &format!("--log-format={format}"),
        ],
    )
    .await;
    let f = Front::new(front, gateway.channel().await);
    let v = f
        .create("vol-echo", 1 << 20, &HashMap::new())
        .await
        .unwrap();
    let node = f.node_id().await.unwrap();
    let mut published = v.clone();
    published
        .context
        .insert("vault-token".into(), "CANARY-context-5d1e".into());
    published
        .context
        .insert("pod-name".into(), "visible-pod-name".into());
    let cell = format!("{front} front -> {upstream} plugin, {format} log");
    let e = f
        .controller_publish(&published, &node)
        .await
        .expect_err("the plugin refuses it");
    assert!(e.message.contains("refused (test hook)"), "{cell}: {e:?}");
    let target = backend.path("target");
    f.node_publish(&published, &HashMap::new(), None, &target)
        .await
        .expect_err("the plugin refuses it");
    // Logs are written as calls finish; give the writer a moment after the last reply.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let log = gateway.log_text();
    assert!(
        log.contains("refused (test hook)"),
        "{cell}: the plugin's message must be logged, or this test proves nothing:\n{log}"
    );
    assert!(
        !log.contains("CANARY-context-5d1e"),
        "{cell}: a redact_keys value leaked:\n{log}"
    );
    if upstream == Dialect::V0_1Oneof {
        let metadata = format!("volumes/{}", v.id);
        assert!(
            !log.contains(&metadata),
            "{cell}: the draft plugin's metadata {metadata} leaked:\n{log}"
        );
    } else {
        assert!(
            log.contains("visible-pod-name"),
            "{cell}: values that are not secret stay readable:\n{log}"
        );
    }
}

macro_rules! echo_cells {
    ($($name:ident: $front:ident -> $upstream:ident, $format:literal;)*) => {$(
        #[tokio::test]
        async fn $name() {
            echoed_errors_are_scrubbed(Dialect::$front, Dialect::$upstream, $format).await;
        }
    )*};
}

echo_cells! {
    echo_v1_relayed_text: V1 -> V1, "text";
    echo_v1_relayed_json: V1 -> V1, "json";
    echo_v0_3_relayed_text: V0_3 -> V0_3, "text";
    echo_v1_to_v0_3_json: V1 -> V0_3, "json";
    echo_v1_to_v0_1_text: V1 -> V0_1, "text";
    echo_v1_to_draft_text: V1 -> V0_1Oneof, "text";
    echo_v1_to_draft_json: V1 -> V0_1Oneof, "json";
    echo_draft_relayed_text: V0_1Oneof -> V0_1Oneof, "text";
    echo_draft_relayed_json: V0_1Oneof -> V0_1Oneof, "json";
}

/// A translated call's error reaches the client scrubbed of the request's secrets whatever the
/// log level (here no call is logged, only start-up): on the splice, for a request translated on the splice's
/// own upstream stream (ControllerPublishVolume) and for one that goes on as it came
/// (DeleteVolume, `translate::identical::checked`), as on an unattached connection.
#[tokio::test]
async fn echoed_errors_reach_the_client_scrubbed_at_any_log_level() {
    use csi_gateway::dialect::proto::v1;
    let backend = Backend::start(
        Options::new("v0.3")
            .arg("--require-staging=false")
            .arg("--test-echo-errors=DeleteVolume,ControllerPublishVolume"),
    )
    .await;
    for path in FrontPath::BOTH {
        let gateway = path
            .start(
                &backend.socket,
                "v0.1",
                &["--log-level=info,csi_gateway::rpc=error"],
            )
            .await;
        let mut controller = v1::controller_client::ControllerClient::new(gateway.channel().await);
        let delete = controller
            .delete_volume(v1::DeleteVolumeRequest {
                volume_id: "vol-echo".into(),
                secrets: secrets(),
            })
            .await;
        let publish = controller
            .controller_publish_volume(v1::ControllerPublishVolumeRequest {
                volume_id: "vol-echo".into(),
                node_id: "node-echo".into(),
                volume_capability: Some(support::front::cap_v1()),
                secrets: secrets(),
                ..Default::default()
            })
            .await;
        for (rpc, outcome) in [
            ("DeleteVolume", delete.map(|_| ())),
            ("ControllerPublishVolume", publish.map(|_| ())),
        ] {
            let e = outcome.expect_err("the plugin refuses it");
            let cell = format!("{rpc}, {path:?}: {e:?}");
            assert_eq!(e.code(), tonic::Code::InvalidArgument, "{cell}");
            assert!(e.message().contains("refused (test hook)"), "{cell}");
            assert!(e.message().contains("vol-echo"), "the echo is kept: {cell}");
            for canary in CANARIES {
                assert!(
                    !e.message().contains(canary),
                    "a secret reached the client: {cell}"
                );
            }
        }
    }
}

/// A draft plugin answers a handle it does not recognise with an in-band error that quotes the
/// metadata it was sent (the reference plugin's INVALID_VOLUME_HANDLE does). Relayed draft to
/// draft, that reply is logged as a body at debug: the metadata values sent must not be in it.
#[tokio::test]
async fn draft_metadata_echoed_in_a_relayed_draft_reply_stays_out_of_the_debug_log() {
    let backend = Backend::start(Options::new("v0.1-oneof")).await;
    let gateway = Gateway::start(
        &backend.socket,
        "v0.1-oneof",
        &["--log-level=csi_gateway=debug"],
    )
    .await;
    let f = Front::new(Dialect::V0_1Oneof, gateway.channel().await);
    let v = f
        .create("vol-meta", 1 << 20, &HashMap::new())
        .await
        .unwrap();
    let mut wrong = v.clone();
    wrong
        .context
        .insert("backing".into(), "CANARY-metadata-3c9d".into());
    let e = f
        .delete(&wrong, &HashMap::new())
        .await
        .expect_err("the plugin refuses metadata it did not hand out");
    assert!(
        e.message.contains("CANARY-metadata-3c9d"),
        "the plugin echoes the metadata, or this test proves nothing: {e:?}"
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    let log = gateway.log_text();
    assert!(
        log.contains("bodies") && log.contains("volume_handle.metadata"),
        "the reply body must be logged, or this test proves nothing:\n{log}"
    );
    assert!(
        !log.contains("CANARY-metadata-3c9d"),
        "the metadata sent leaked into the debug log:\n{log}"
    );
}
