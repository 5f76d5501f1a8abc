//! The wire-identical fast path (`crates/translate/src/identical.rs`) from outside: a v0.3 call whose
//! messages are wire-compatible with v1 reaches a v1 plugin as it is, on the v1 path (and a v1
//! call a v0.3 plugin the same way), spliced and unattached, and the client reads the same
//! reply and the same status as the full translation gave it; the call is counted and logged
//! as a translated one. A call that is not wire-identical is still translated.
//!
//! The proof that a call was relayed rather than translated: its request carries a field that
//! neither revision has. The translation drops unknown fields; the relay leaves them in, and a
//! plugin that quotes its request's strings in its error (the reference backend's
//! `--test-echo-errors` hook) shows it.

use csi_gateway_test_support as support;

use csi_gateway::dialect::proto::{v0_3, v1};
use support::gateway::{FrontPath, Gateway};
use support::{Backend, Options};
use tonic::transport::Channel;
use tonic::Code;

/// A request with only a field no CSI revision has (number 99): any empty request, read by
/// a decoder that skips unknown fields.
#[derive(Clone, PartialEq, prost::Message)]
struct Marked {
    #[prost(string, tag = "99")]
    marker: String,
}

/// A ListVolumes request (both revisions: `max_entries` 1, `starting_token` 2) with field 99.
#[derive(Clone, PartialEq, prost::Message)]
struct MarkedList {
    #[prost(int32, tag = "1")]
    max_entries: i32,
    #[prost(string, tag = "2")]
    starting_token: String,
    #[prost(string, tag = "99")]
    marker: String,
}

const MARK: &str = "unknown-field-marker";

async fn unary<Q, R>(ch: &Channel, path: &'static str, request: Q) -> Result<R, tonic::Status>
where
    Q: prost::Message + Send + Sync + 'static,
    R: prost::Message + Default + Send + Sync + 'static,
{
    let mut grpc = tonic::client::Grpc::new(ch.clone());
    grpc.ready().await.unwrap();
    grpc.unary(
        tonic::Request::new(request),
        http::uri::PathAndQuery::from_static(path),
        tonic_prost::ProstCodec::default(),
    )
    .await
    .map(|r| r.into_inner())
}

fn marked() -> Marked {
    Marked {
        marker: MARK.into(),
    }
}

/// v0.3 client, v1 plugin: Probe, GetPluginInfo and NodeGetInfo are wire-identical.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v0_3_client_of_a_v1_plugin_gets_what_the_translation_gave() {
    // The plugin refuses NodeGetInfo, quoting its request.
    let opts = Options::new("v1").arg("--test-echo-errors=NodeGetInfo");
    let backend = Backend::start(opts).await;
    for path in FrontPath::BOTH {
        let (gw, metrics) = Gateway::start_with_metrics(&backend.socket, "v0.1", path).await;
        let ch = gw.channel().await;

        // The connection's first call is wire-identical: relayed, field 99 and all.
        let first =
            unary::<_, v0_3::NodeGetInfoResponse>(&ch, "/csi.v0.Node/NodeGetInfo", marked())
                .await
                .unwrap_err();
        assert_eq!(first.code(), Code::InvalidArgument, "{path:?}: {first:?}");
        assert!(
            first.message().contains(MARK),
            "{path:?}: relayed as it is: {first:?}\n{}",
            gw.log_text()
        );

        // Replies: what a v1 client gets relayed is what the v0.3 client reads.
        let modern = v1::identity_client::IdentityClient::new(ch.clone());
        let legacy = v0_3::identity_client::IdentityClient::new(ch.clone());
        let info = modern
            .clone()
            .get_plugin_info(v1::GetPluginInfoRequest {})
            .await
            .unwrap()
            .into_inner();
        let old = legacy
            .clone()
            .get_plugin_info(v0_3::GetPluginInfoRequest {})
            .await
            .unwrap()
            .into_inner();
        assert_eq!(
            (&old.name, &old.vendor_version, &old.manifest),
            (&info.name, &info.vendor_version, &info.manifest),
            "{path:?}"
        );
        assert_eq!(info.name, "reference.csi-gateway.dev");
        let ready = modern.clone().probe(v1::ProbeRequest {}).await.unwrap();
        let old_ready = legacy.clone().probe(v0_3::ProbeRequest {}).await.unwrap();
        assert_eq!(old_ready.into_inner().ready, ready.into_inner().ready);

        // Errors: the plugin's status, code and message, as the v1 client reads it relayed and
        // as the translation passed it on (no CODES row applies to NodeGetInfo).
        let node_v1 = v1::node_client::NodeClient::new(ch.clone())
            .node_get_info(v1::NodeGetInfoRequest {})
            .await
            .unwrap_err();
        let node_v0 = v0_3::node_client::NodeClient::new(ch.clone())
            .node_get_info(v0_3::NodeGetInfoRequest {})
            .await
            .unwrap_err();
        assert_eq!(
            (node_v0.code(), node_v0.message()),
            (node_v1.code(), node_v1.message()),
            "{path:?}"
        );
        assert_eq!(node_v0.code(), Code::InvalidArgument);

        // Not wire-identical: v1 node capabilities v0.3 does not have are still filtered out.
        let caps_v1 = v1::node_client::NodeClient::new(ch.clone())
            .node_get_capabilities(v1::NodeGetCapabilitiesRequest {})
            .await
            .unwrap()
            .into_inner();
        let caps_v0 = v0_3::node_client::NodeClient::new(ch.clone())
            .node_get_capabilities(v0_3::NodeGetCapabilitiesRequest {})
            .await
            .unwrap()
            .into_inner();
        let rpc_v1 = |c: &v1::NodeServiceCapability| match &c.r#type {
            Some(v1::node_service_capability::Type::Rpc(r)) => r.r#type,
            None => -1,
        };
        let rpc_v0 = |c: &v0_3::NodeServiceCapability| match &c.r#type {
            Some(v0_3::node_service_capability::Type::Rpc(r)) => r.r#type,
            None => -1,
        };
        assert!(
            caps_v1.capabilities.iter().map(rpc_v1).any(|t| t > 1),
            "the plugin advertises v1-only node capabilities: {caps_v1:?}"
        );
        assert!(
            caps_v0.capabilities.iter().map(rpc_v0).all(|t| t == 1),
            "{path:?}: only STAGE_UNSTAGE_VOLUME exists in v0.3: {caps_v0:?}"
        );

        // Counted and logged as translated calls, with their outcome.
        let text = support::scrape(metrics);
        let series = |method: &str, outcome: &str| {
            format!(
                r#"csi_gateway_translations_total{{front_dialect="v0.3",upstream_dialect="v1",method_name="{method}",outcome="{outcome}"}}"#
            )
        };
        for (method, outcome, n) in [
            ("/csi.v0.Node/NodeGetInfo", "upstream", 2.0),
            ("/csi.v0.Identity/GetPluginInfo", "ok", 1.0),
            ("/csi.v0.Identity/Probe", "ok", 1.0),
            ("/csi.v0.Node/NodeGetCapabilities", "ok", 1.0),
        ] {
            assert_eq!(
                support::value(&text, &series(method, outcome)),
                Some(n),
                "{path:?}: {method} {outcome}\n{text}"
            );
        }
        let log = gw.log_text();
        assert!(
            log.lines().any(|l| l.contains("/csi.v0.Node/NodeGetInfo")
                && l.contains("front=\"v0.3\"")
                && l.contains("upstream=\"v1\"")
                && l.contains("origin=\"upstream\"")
                && l.contains("refused (test hook)")),
            "{path:?}: the log line of a translated call\n{log}"
        );
    }
}

/// On one spliced connection a client's encoder soon refers to the paths it sent before by
/// their entries in its HPACK table: the path rewritten in place keeps the upstream's table
/// alike, so every later call of either dialect reaches the plugin on its own path.
#[tokio::test]
async fn indexed_paths_stay_rewritten_on_one_connection() {
    let opts = Options::new("v1").arg("--test-echo-errors=NodeGetInfo");
    let backend = Backend::start(opts).await;
    let gw = Gateway::start(&backend.socket, "v0.1", &[]).await;
    let ch = gw.channel().await;
    let modern = v1::identity_client::IdentityClient::new(ch.clone());
    let legacy = v0_3::identity_client::IdentityClient::new(ch.clone());
    for round in 0..5 {
        modern.clone().probe(v1::ProbeRequest {}).await.unwrap();
        legacy.clone().probe(v0_3::ProbeRequest {}).await.unwrap();
        let e = unary::<_, v0_3::NodeGetInfoResponse>(&ch, "/csi.v0.Node/NodeGetInfo", marked())
            .await
            .unwrap_err();
        assert!(e.message().contains(MARK), "round {round}: {e:?}");
        let info = legacy
            .clone()
            .get_plugin_info(v0_3::GetPluginInfoRequest {})
            .await
            .unwrap();
        assert_eq!(info.into_inner().name, "reference.csi-gateway.dev");
        // A translated call in between: its block never reaches the upstream.
        if round == 2 {
            v0_3::node_client::NodeClient::new(ch.clone())
                .node_get_capabilities(v0_3::NodeGetCapabilitiesRequest {})
                .await
                .unwrap();
        }
    }
    assert!(gw.log_text().contains("client connection spliced"));
}

/// A wire-identical call whose block cannot go as it came (its `:authority` must be replaced)
/// and whose fields the splice did not keep is translated; the connection's blocks are
/// re-encoded from then on, so the next such call is relayed.
#[tokio::test]
async fn a_block_that_cannot_be_rewritten_is_translated_once() {
    let opts = Options::new("v1").arg("--test-echo-errors=NodeGetInfo");
    let backend = Backend::start(opts).await;
    let gw = Gateway::start(&backend.socket, "v0.1", &[]).await;
    let io = tokio::net::UnixStream::connect(&gw.socket).await.unwrap();
    let (client, conn): (h2::client::SendRequest<bytes::Bytes>, _) =
        h2::client::handshake(io).await.unwrap();
    tokio::spawn(conn);
    // A same-dialect call first, with the authority the plugin is sent: relayed as it came.
    let (code, _) = raw_unary(&client, "localhost", "/csi.v1.Identity/Probe", &[]).await;
    assert_eq!(code.as_deref(), Some("0"));
    let body = prost::Message::encode_to_vec(&marked());
    let path = "/csi.v0.Node/NodeGetInfo";
    let translated = raw_unary(&client, "other", path, &body).await;
    let relayed = raw_unary(&client, "other", path, &body).await;
    assert_eq!(translated.0.as_deref(), Some("3"), "{translated:?}");
    assert_eq!(relayed.0.as_deref(), Some("3"), "{relayed:?}");
    assert!(
        !translated.1.contains(MARK),
        "the translation sends no unknown field: {translated:?}"
    );
    assert!(relayed.1.contains(MARK), "{relayed:?}");
    // Both answer exactly what the plugin said of the request it got.
    assert_eq!(relayed.1.replace(MARK, ""), translated.1);
    let log = gw.log_text();
    assert!(log.contains("client connection spliced"), "{log}");
}

/// One unary call on a raw h2 connection with this `:authority`: grpc-status and the decoded
/// grpc-message.
async fn raw_unary(
    client: &h2::client::SendRequest<bytes::Bytes>,
    authority: &str,
    path: &str,
    message: &[u8],
) -> (Option<String>, String) {
    let mut client = client.clone().ready().await.unwrap();
    let request = http::Request::post(format!("http://{authority}{path}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .unwrap();
    let (response, mut send) = client.send_request(request, false).unwrap();
    send.send_data(csi_gateway::grpc::frame::encode(message), true)
        .unwrap();
    let response = response.await.unwrap();
    let (parts, mut body) = response.into_parts();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.unwrap();
        body.flow_control().release_capacity(chunk.len()).unwrap();
    }
    let trailers = body.trailers().await.unwrap().unwrap_or_default();
    let field = |name: &str| {
        trailers
            .get(name)
            .or_else(|| parts.headers.get(name))
            .map(|v| v.to_str().unwrap().to_string())
    };
    let message = field("grpc-message").unwrap_or_default();
    let message = percent_encoding::percent_decode_str(&message)
        .decode_utf8_lossy()
        .into_owned();
    (field("grpc-status"), message)
}

/// v1 client, v0.3 plugin: ListVolumes, Probe and GetPluginInfo are wire-identical; the plugin's
/// ABORTED for a bad token reaches the v1 client as the v0.3 client reads it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v1_client_of_a_v0_3_plugin_gets_what_the_translation_gave() {
    let backend = Backend::start(Options::new("v0.3")).await;
    let echo = Backend::start(Options::new("v0.3").arg("--test-echo-errors=ListVolumes")).await;
    for path in FrontPath::BOTH {
        let gw = path.start(&backend.socket, "v0.1", &[]).await;
        let ch = gw.channel().await;
        let old = v0_3::controller_client::ControllerClient::new(ch.clone());
        let new = v1::controller_client::ControllerClient::new(ch.clone());
        for i in 0..2 {
            old.clone()
                .create_volume(v0_3::CreateVolumeRequest {
                    name: format!("identical-{path:?}-{i}"),
                    volume_capabilities: vec![support::front::cap_v03()],
                    capacity_range: Some(v0_3::CapacityRange {
                        required_bytes: 1 << 20,
                        limit_bytes: 0,
                    }),
                    ..Default::default()
                })
                .await
                .unwrap();
        }
        let listed_old = old
            .clone()
            .list_volumes(v0_3::ListVolumesRequest::default())
            .await
            .unwrap()
            .into_inner();
        let listed_new = new
            .clone()
            .list_volumes(v1::ListVolumesRequest::default())
            .await
            .unwrap()
            .into_inner();
        let old_entries: Vec<_> = listed_old
            .entries
            .iter()
            .filter_map(|e| e.volume.as_ref())
            .map(|v| (v.id.clone(), v.capacity_bytes, v.attributes.clone()))
            .collect();
        let new_entries: Vec<_> = listed_new
            .entries
            .iter()
            .filter_map(|e| e.volume.as_ref())
            .map(|v| {
                (
                    v.volume_id.clone(),
                    v.capacity_bytes,
                    v.volume_context.clone(),
                )
            })
            .collect();
        assert!(old_entries.len() >= 2, "{listed_old:?}");
        assert_eq!(new_entries, old_entries, "{path:?}");
        assert!(listed_new.entries.iter().all(|e| e.status.is_none()));
        let bad = |token: &str| v1::ListVolumesRequest {
            max_entries: 1,
            starting_token: token.into(),
        };
        let e_new = new
            .clone()
            .list_volumes(bad("no-such-token"))
            .await
            .unwrap_err();
        let e_old = old
            .clone()
            .list_volumes(v0_3::ListVolumesRequest {
                max_entries: 1,
                starting_token: "no-such-token".into(),
            })
            .await
            .unwrap_err();
        assert_eq!(e_new.code(), Code::Aborted, "{path:?}: {e_new:?}");
        assert_eq!(
            (e_new.code(), e_new.message()),
            (e_old.code(), e_old.message())
        );
        let info = v1::identity_client::IdentityClient::new(ch.clone())
            .get_plugin_info(v1::GetPluginInfoRequest {})
            .await
            .unwrap()
            .into_inner();
        assert_eq!(info.name, "reference.csi-gateway.dev");
        v1::identity_client::IdentityClient::new(ch.clone())
            .probe(v1::ProbeRequest {})
            .await
            .unwrap();

        // Relayed as it is: the plugin sees the field neither revision has.
        let gw_echo = path.start(&echo.socket, "v0.1", &[]).await;
        let ch = gw_echo.channel().await;
        let request = MarkedList {
            max_entries: 1,
            starting_token: "tok".into(),
            marker: MARK.into(),
        };
        let e = unary::<_, v1::ListVolumesResponse>(&ch, "/csi.v1.Controller/ListVolumes", request)
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::InvalidArgument, "{e:?}");
        assert!(
            e.message().contains(MARK) && e.message().contains("tok"),
            "{path:?}: {e:?}"
        );
    }
}

/// v0.3 client, v1 plugin: calls whose request the translation would copy go on as they came
/// once the splice's check passes (`translate::identical::checked`), and those with a rule about
/// their reply get it translated all the same — CreateVolume's and ListVolumes' clone sources,
/// CreateSnapshot's time. Spliced and unattached, the client reads the same answers; requests
/// the check does not pass (a REQUIRED field missing, a field v0.3 lacks) are translated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_v0_3_clients_checked_calls_get_their_replies_translated() {
    let backend = Backend::start(Options::new("v1")).await;
    let mut answers = Vec::new();
    for path in FrontPath::BOTH {
        let (gw, metrics) = Gateway::start_with_metrics(&backend.socket, "v0.1", path).await;
        let ch = gw.channel().await;
        let mut controller = v0_3::controller_client::ControllerClient::new(ch.clone());
        let create = v0_3::CreateVolumeRequest {
            name: "checked-volume".into(),
            volume_capabilities: vec![support::front::cap_v03()],
            capacity_range: Some(v0_3::CapacityRange {
                required_bytes: 1 << 20,
                limit_bytes: 0,
            }),
            parameters: [("tier".to_string(), "fast".to_string())].into(),
            ..Default::default()
        };
        let volume = controller
            .create_volume(create.clone())
            .await
            .unwrap()
            .into_inner()
            .volume
            .expect("a volume");
        assert!(
            !volume.id.is_empty() && volume.capacity_bytes >= 1 << 20,
            "{volume:?}"
        );
        // The check refuses to copy these; the translation answers as it always did.
        let unnamed = controller
            .create_volume(v0_3::CreateVolumeRequest {
                name: String::new(),
                ..create.clone()
            })
            .await
            .unwrap_err();
        assert_eq!(unnamed.code(), Code::InvalidArgument, "{unnamed:?}");
        assert!(unnamed.message().contains("name"), "{unnamed:?}");
        let modeless = controller
            .create_volume(v0_3::CreateVolumeRequest {
                volume_capabilities: vec![v0_3::VolumeCapability {
                    access_mode: None,
                    ..support::front::cap_v03()
                }],
                ..create.clone()
            })
            .await
            .unwrap_err();
        assert_eq!(modeless.code(), Code::InvalidArgument, "{modeless:?}");
        let snapshot = controller
            .create_snapshot(v0_3::CreateSnapshotRequest {
                source_volume_id: volume.id.clone(),
                name: "checked-snapshot".into(),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner()
            .snapshot
            .expect("a snapshot");
        // v1's Timestamp, as the nanoseconds v0.3 counts.
        assert!(
            snapshot.created_at > 1_500_000_000_000_000_000,
            "{snapshot:?}"
        );
        let listed = controller
            .list_volumes(v0_3::ListVolumesRequest {
                max_entries: 10,
                starting_token: String::new(),
            })
            .await
            .unwrap()
            .into_inner();
        assert!(
            listed
                .entries
                .iter()
                .any(|e| e.volume.as_ref().is_some_and(|v| v.id == volume.id)),
            "{listed:?}"
        );
        let published = controller
            .controller_publish_volume(v0_3::ControllerPublishVolumeRequest {
                volume_id: volume.id.clone(),
                node_id: "no-such-node".into(),
                volume_capability: Some(support::front::cap_v03()),
                ..Default::default()
            })
            .await
            .map(|r| r.into_inner())
            .map_err(|e| (e.code(), e.message().to_string()));
        // A v0.3 client's node calls are one call each (the gateway owns no target path of
        // its, and emulates staging only for older clients): checked and relayed.
        let target = tempfile::tempdir().unwrap();
        // The status, its message without the temporary directory's name.
        let dir = target.path().to_string_lossy().into_owned();
        let status = |e: tonic::Status| (e.code(), e.message().replace(&dir, ""));
        let mut node = v0_3::node_client::NodeClient::new(ch.clone());
        let node_published = node
            .node_publish_volume(v0_3::NodePublishVolumeRequest {
                volume_id: "no-such-volume".into(),
                target_path: target.path().join("t").display().to_string(),
                volume_capability: Some(support::front::cap_v03()),
                ..Default::default()
            })
            .await
            .map(|r| r.into_inner())
            .map_err(status);
        let node_unpublished = node
            .node_unpublish_volume(v0_3::NodeUnpublishVolumeRequest {
                volume_id: "no-such-volume".into(),
                target_path: target.path().join("t").display().to_string(),
            })
            .await
            .map(|r| r.into_inner())
            .map_err(status);
        assert!(node_published.is_err(), "{node_published:?}");
        let node_staged = node
            .node_stage_volume(v0_3::NodeStageVolumeRequest {
                volume_id: "no-such-volume".into(),
                staging_target_path: target.path().join("s").display().to_string(),
                volume_capability: Some(support::front::cap_v03()),
                ..Default::default()
            })
            .await
            .map(|r| r.into_inner())
            .map_err(status);
        assert!(node_staged.is_err(), "{node_staged:?}");
        let text = support::scrape(metrics);
        for (method, outcome) in [
            // Refused by the gateway before the plugin: a publish without the staging the
            // plugin requires, which the v0.3 client skipped.
            ("/csi.v0.Node/NodePublishVolume", "client"),
            ("/csi.v0.Controller/CreateVolume", "ok"),
            ("/csi.v0.Controller/CreateVolume", "client"),
            ("/csi.v0.Controller/CreateSnapshot", "ok"),
            ("/csi.v0.Controller/ListVolumes", "ok"),
        ] {
            let series = format!(
                r#"csi_gateway_translations_total{{front_dialect="v0.3",upstream_dialect="v1",method_name="{method}",outcome="{outcome}"}}"#
            );
            assert!(
                support::value(&text, &series).is_some_and(|n| n >= 1.0),
                "{path:?}: {method} {outcome}\n{text}"
            );
        }
        answers.push((
            volume,
            snapshot,
            listed,
            published,
            node_published,
            node_unpublished,
            node_staged,
        ));
    }
    assert_eq!(
        answers[0], answers[1],
        "spliced and unattached answers differ"
    );
}
