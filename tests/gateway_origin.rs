//! Whose failure a translated call is, as the built gateway counts it (the `outcome` label of
//! `csi_gateway_translations_total`) and logs it (`origin` on the call's line): set where the
//! failure is made, never read off its gRPC code. The gateway's refusal of what the plugin's
//! revision cannot honour and its own store's DATA_LOSS are the gateway's; the plugin's own
//! NOT_FOUND is the upstream's — on spliced and unattached connections alike.

use csi_gateway_test_support as support;

use std::collections::HashMap;
use std::time::Duration;

use csi_gateway::dialect::proto::v1;
use csi_gateway::dialect::Dialect;
use support::front::Front;
use support::gateway::{FrontPath, Gateway};
use support::{Backend, Options};
use tonic::Code;

/// The translation counter's series for a v1 client's `method` to a plugin of `upstream`.
fn series(upstream: &str, method: &str, outcome: &str) -> String {
    format!(
        r#"csi_gateway_translations_total{{front_dialect="v1",upstream_dialect="{upstream}",method_name="/csi.v1.Controller/{method}",outcome="{outcome}"}}"#
    )
}

/// Waits for the call's log line: its method, its code and whose failure it was.
async fn logged(gw: &Gateway, method: &str, code: &str, origin: &str) {
    let method = format!("/csi.v1.Controller/{method}");
    let what = format!("{method} logged as {code}, origin {origin}");
    support::eventually(Duration::from_secs(10), &what, || {
        gw.log_text().lines().any(|l| {
            l.contains(&method)
                && l.contains(&format!("code=\"{code}\""))
                && l.contains(&format!("origin=\"{origin}\""))
        })
    })
    .await;
}

fn mount(mode: i32) -> v1::VolumeCapability {
    use v1::volume_capability::{AccessMode, AccessType, MountVolume};
    v1::VolumeCapability {
        access_type: Some(AccessType::Mount(MountVolume::default())),
        access_mode: Some(AccessMode { mode }),
    }
}

/// A v1 client of a v0.3 plugin: an access mode v0.3 cannot express is the gateway's refusal
/// (INVALID_ARGUMENT, though that code is also the plugin's to answer); publishing a volume
/// the plugin does not know is the plugin's own NOT_FOUND.
#[tokio::test]
async fn a_refusal_is_the_gateways_and_the_plugins_answer_its_own() {
    let backend = Backend::start(Options::new("v0.3")).await;
    for path in FrontPath::BOTH {
        let (gw, metrics) = Gateway::start_with_metrics(&backend.socket, "v0.1", path).await;
        let mut controller = v1::controller_client::ControllerClient::new(gw.channel().await);

        // SINGLE_NODE_MULTI_WRITER arrived in v1.5.
        let refused = controller
            .create_volume(v1::CreateVolumeRequest {
                name: format!("multi-writer-{path:?}"),
                volume_capabilities: vec![mount(7)],
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert_eq!(
            refused.code(),
            Code::InvalidArgument,
            "{path:?}: {refused:?}"
        );
        assert!(
            refused.message().contains("SINGLE_NODE_MULTI_WRITER"),
            "{path:?}: {refused:?}"
        );

        let unknown = controller
            .controller_publish_volume(v1::ControllerPublishVolumeRequest {
                volume_id: format!("no-such-volume-{path:?}"),
                node_id: "node-1".into(),
                volume_capability: Some(mount(1)),
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert_eq!(unknown.code(), Code::NotFound, "{path:?}: {unknown:?}");

        let text = support::scrape(metrics);
        for (method, outcome) in [
            ("CreateVolume", "gateway"),
            ("ControllerPublishVolume", "upstream"),
        ] {
            assert_eq!(
                support::value(&text, &series("v0.3", method, outcome)),
                Some(1.0),
                "{path:?}: {method} {outcome}\n{text}"
            );
        }
        for (method, wrong) in [
            ("CreateVolume", "upstream"),
            ("ControllerPublishVolume", "gateway"),
        ] {
            assert_eq!(
                support::value(&text, &series("v0.3", method, wrong)),
                None,
                "{path:?}: {method} counted as {wrong}\n{text}"
            );
        }
        logged(&gw, "CreateVolume", "InvalidArgument", "gateway").await;
        logged(&gw, "ControllerPublishVolume", "NotFound", "upstream").await;
        // The splice sends a translated call's head ahead of its message, and resets the
        // plugin's stream when the message does not translate: the plugin never created it.
        let log = backend.log_text();
        assert!(
            !log.lines()
                .any(|l| l.contains("CreateVolume") && l.contains("code=Ok")),
            "{path:?}: the refused create reached the plugin\n{log}"
        );
    }
}

/// A v1 client of a draft plugin whose stored VolumeHandle metadata was changed in etcd: the
/// gateway's store answers DATA_LOSS before the plugin is called, the gateway's failure.
#[tokio::test]
async fn the_stores_data_loss_is_the_gateways() {
    use csi_gateway::store::etcd::proto::etcdserverpb::{
        kv_client::KvClient, PutRequest, RangeRequest,
    };
    let etcd = support::etcd::Etcd::start().await;
    let backend = Backend::start(Options::new("v0.1-oneof")).await;
    for path in FrontPath::BOTH {
        let port = support::free_port();
        let gw = path
            .start(
                &backend.socket,
                "v0.1",
                &[
                    &format!("--metrics-listen=127.0.0.1:{port}"),
                    "--state-backend=etcd",
                    &format!("--etcd-endpoints={}", etcd.endpoint),
                    // Each gateway its own keys: the damaged one stops the next start.
                    &format!("--etcd-prefix=/origin-{path:?}/"),
                ],
            )
            .await;
        let f = Front::new(Dialect::V1, gw.channel().await);
        let name = format!("damaged-{path:?}");
        let v = f.create(&name, 1 << 20, &HashMap::new()).await.unwrap();
        let mut kv = KvClient::connect(etcd.endpoint.clone()).await.unwrap();
        let key = format!("/origin-{path:?}/handle/{}", v.id).into_bytes();
        let range = RangeRequest {
            key: key.clone(),
            ..Default::default()
        };
        let stored = kv.range(range).await.unwrap().into_inner().kvs;
        let mut value = stored[0].value.clone();
        *value.last_mut().unwrap() ^= 0x01;
        let put = PutRequest {
            key,
            value,
            ..Default::default()
        };
        kv.put(put).await.unwrap();

        let e = f.delete(&v.id_only(), &HashMap::new()).await.unwrap_err();
        assert_eq!(e.code, Code::DataLoss, "{path:?}: {e:?}");
        let text = support::scrape(port);
        let damaged = series("v0.1-oneof", "DeleteVolume", "gateway");
        assert_eq!(
            support::value(&text, &damaged),
            Some(1.0),
            "{path:?}\n{text}"
        );
        let upstream = series("v0.1-oneof", "DeleteVolume", "upstream");
        assert_eq!(support::value(&text, &upstream), None, "{path:?}\n{text}");
        logged(&gw, "DeleteVolume", "DataLoss", "gateway").await;
    }
}
