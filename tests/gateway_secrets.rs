//! Secrets never leave the gateway in its logs or metrics, at any level. Calls carrying known
//! canary secrets go through the gateway in every front dialect — relayed (same dialect) and
//! translated — with every log level on (`trace`, bodies included); then the canaries must
//! appear nowhere in the log or on `/metrics`.

mod support;

use std::collections::HashMap;
use std::time::Duration;

use csi_gateway::dialect::Dialect;
use support::front::Front;
use support::gateway::Gateway;
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
