//! The spliced fast path (`src/splice`) from outside: one client connection that carries
//! relayed and translated calls together, replies the gateway writes itself within a client's
//! tiny flow-control windows, hostile bytes on the socket, and the plugin dying under a
//! spliced connection. The same calls run on unattached connections, so both states agree.

use csi_gateway_test_support as support;

use std::time::Duration;

use bytes::Bytes;
use csi_gateway::dialect::proto::{v0_3, v1};
use futures_util::future::join_all;
use prost::Message;
use support::front::cap_v1;
use support::gateway::{FrontPath, Gateway};
use support::{Backend, Options};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use tonic::Code;

const SPLICED: &str = "client connection spliced";

#[tokio::test]
async fn one_connection_carries_relayed_and_translated_calls() {
    let backend = Backend::start(Options::new("v1")).await;
    for path in FrontPath::BOTH {
        let gw = path.start(&backend.socket, "v0.1", &[]).await;
        let ch = gw.channel().await;
        let modern = v1::identity_client::IdentityClient::new(ch.clone());
        let legacy = v0_3::identity_client::IdentityClient::new(ch.clone());
        let controller = v1::controller_client::ControllerClient::new(ch.clone());

        // relayed, then translated, then relayed again on the same connection: the last one
        // goes out after a request block the upstream never saw, which added a header to the
        // client's dynamic table that the last block refers to.
        let name = |r: v1::GetPluginInfoResponse| r.name;
        let first = name(
            modern
                .clone()
                .get_plugin_info(v1::GetPluginInfoRequest {})
                .await
                .unwrap()
                .into_inner(),
        );
        let translated = legacy
            .clone()
            .get_plugin_info(with_header(v0_3::GetPluginInfoRequest {}))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(translated.name, first, "{path:?}");
        let again = modern
            .clone()
            .get_plugin_info(with_header(v1::GetPluginInfoRequest {}))
            .await
            .unwrap_or_else(|e| panic!("{path:?}: {e:?}\n{}", gw.log_text()));
        assert_eq!(name(again.into_inner()), first);

        // Many at once, interleaved, including errors on both paths.
        let calls = (0..60).map(|i| {
            let (mut modern, mut legacy, mut controller) =
                (modern.clone(), legacy.clone(), controller.clone());
            async move {
                match i % 4 {
                    0 => modern.probe(v1::ProbeRequest {}).await.map(|_| ()),
                    1 => legacy.probe(v0_3::ProbeRequest {}).await.map(|_| ()),
                    2 => controller
                        .create_volume(v1::CreateVolumeRequest {
                            name: format!("vol-{i}"),
                            volume_capabilities: vec![cap_v1()],
                            capacity_range: Some(v1::CapacityRange {
                                required_bytes: 1 << 20,
                                limit_bytes: 0,
                            }),
                            ..Default::default()
                        })
                        .await
                        .map(|r| assert!(!r.into_inner().volume.unwrap().volume_id.is_empty())),
                    _ => legacy
                        .get_plugin_capabilities(v0_3::GetPluginCapabilitiesRequest {})
                        .await
                        .map(|_| ()),
                }
            }
        });
        for (i, r) in join_all(calls).await.into_iter().enumerate() {
            r.unwrap_or_else(|e| panic!("call {i} ({path:?}): {e:?}"));
        }
        // One after another: each translated call starts from the state the one before it
        // left (the splice keeps it, `Splice::spare`), which must not leak into its answer.
        let mut capabilities = Vec::new();
        for _ in 0..4 {
            let reply = legacy
                .clone()
                .get_plugin_capabilities(v0_3::GetPluginCapabilitiesRequest {})
                .await
                .unwrap_or_else(|e| panic!("{path:?}: {e:?}\n{}", gw.log_text()))
                .into_inner();
            assert!(!reply.capabilities.is_empty(), "{path:?}: {reply:?}");
            capabilities.push(reply);
        }
        assert!(
            capabilities.windows(2).all(|w| w[0] == w[1]),
            "{path:?}: {capabilities:?}"
        );
        // Errors keep their codes on either path: a missing name (relayed, the plugin's
        // INVALID_ARGUMENT) and an unknown method (answered by the gateway itself).
        let err = controller
            .clone()
            .create_volume(v1::CreateVolumeRequest::default())
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
        let unknown = ch.clone();
        let mut grpc = tonic::client::Grpc::new(unknown);
        grpc.ready().await.unwrap();
        let status = grpc
            .unary::<v1::ProbeRequest, v1::ProbeResponse, _>(
                tonic::Request::new(v1::ProbeRequest {}),
                http::uri::PathAndQuery::from_static("/csi.v9.Identity/Probe"),
                tonic_prost::ProstCodec::default(),
            )
            .await
            .unwrap_err();
        assert_eq!(status.code(), Code::Unimplemented, "{status:?}");

        let log = gw.log_text();
        assert_eq!(
            log.contains(SPLICED),
            path == FrontPath::Spliced,
            "{path:?}:\n{log}"
        );
        assert!(log.contains("front=\"v0.3\""), "{log}");
    }
}

/// A request with a header the client's encoder will index.
fn with_header<T>(message: T) -> tonic::Request<T> {
    let mut r = tonic::Request::new(message);
    r.metadata_mut().insert(
        "x-splice-test",
        "first-seen-on-a-translated-call".parse().unwrap(),
    );
    r
}

/// A raw HTTP/2 client whose stream windows are a few bytes: every reply the gateway writes
/// itself must wait for the client's WINDOW_UPDATEs, while relayed replies share the connection.
#[tokio::test]
async fn local_replies_wait_for_the_clients_window() {
    let backend = Backend::start(Options::new("v1")).await;
    let gw = Gateway::start(&backend.socket, "v0.1", &[]).await;
    let io = UnixStream::connect(&gw.socket).await.unwrap();
    let (client, conn) = h2::client::Builder::new()
        .initial_window_size(7)
        .handshake::<_, Bytes>(io)
        .await
        .unwrap();
    tokio::spawn(conn);
    let calls = (0..20).map(|i| {
        let client = client.clone();
        async move {
            let path = if i % 2 == 0 {
                "/csi.v0.Identity/GetPluginInfo"
            } else {
                "/csi.v1.Identity/GetPluginInfo"
            };
            let reply = unary(client, path, Bytes::new()).await;
            let (code, body) = reply;
            assert_eq!(code.as_deref(), Some("0"), "{path}");
            // Both dialects' GetPluginInfoResponse have `name` as field 1.
            let info = v1::GetPluginInfoResponse::decode(body).unwrap();
            assert_eq!(info.name, "reference.csi-gateway.dev", "{path}");
        }
    });
    join_all(calls).await;
    assert!(gw.log_text().contains(SPLICED));
}

/// One unary call on a raw h2 connection: the status code and the reply message.
async fn unary(
    client: h2::client::SendRequest<Bytes>,
    path: &str,
    message: Bytes,
) -> (Option<String>, Bytes) {
    unary_ended(client, path, message, false).await
}

/// `unary`, the request ended by trailers of the client's when `trailers`, else by its DATA.
/// `message`, a request on `path` naming a volume or snapshot that does not exist, naming
/// one of its own (`-k` added), as the plugin locks each while it works on it; others, and
/// those naming none, as they are.
fn own_volume(path: &str, message: &[u8], k: usize) -> Vec<u8> {
    let rpc = path.rsplit('/').next().unwrap_or_default();
    if message.is_empty() {
        return Vec::new();
    }
    match rpc {
        "DeleteVolume" => {
            let mut r = v1::DeleteVolumeRequest::decode(message).unwrap();
            r.volume_id += &format!("-{k}");
            r.encode_to_vec()
        }
        "ControllerUnpublishVolume" => {
            let mut r = v1::ControllerUnpublishVolumeRequest::decode(message).unwrap();
            r.volume_id += &format!("-{k}");
            r.encode_to_vec()
        }
        "DeleteSnapshot" => {
            let mut r = v1::DeleteSnapshotRequest::decode(message).unwrap();
            r.snapshot_id += &format!("-{k}");
            r.encode_to_vec()
        }
        _ => message.to_vec(),
    }
}

async fn unary_ended(
    client: h2::client::SendRequest<Bytes>,
    path: &str,
    message: Bytes,
    trailers: bool,
) -> (Option<String>, Bytes) {
    let mut client = client.ready().await.unwrap();
    let request = http::Request::post(format!("http://localhost{path}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .unwrap();
    let (response, mut send) = client.send_request(request, false).unwrap();
    send.send_data(csi_gateway::grpc::frame::encode(&message), !trailers)
        .unwrap();
    if trailers {
        send.send_trailers(http::HeaderMap::new()).unwrap();
    }
    let response = response.await.unwrap();
    // A trailers-only reply carries its status in its only header block.
    let head_status = response
        .headers()
        .get("grpc-status")
        .map(|v| v.to_str().unwrap().to_string());
    let mut body = response.into_body();
    let mut data = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.unwrap();
        body.flow_control().release_capacity(chunk.len()).unwrap();
        data.extend_from_slice(&chunk);
    }
    let trailers = body.trailers().await.unwrap().unwrap_or_default();
    let code = trailers
        .get("grpc-status")
        .map(|v| v.to_str().unwrap().to_string())
        .or(head_status);
    let message = if data.len() >= 5 {
        Bytes::copy_from_slice(&data[5..])
    } else {
        Bytes::new()
    };
    (code, message)
}

/// Bytes that are not HTTP/2, or a header block that cannot be decoded, end that connection
/// (with GOAWAY where one can be sent) and nothing else.
#[tokio::test]
async fn hostile_bytes_end_only_their_connection() {
    let backend = Backend::start(Options::new("v1")).await;
    let gw = Gateway::start(&backend.socket, "v0.1", &[]).await;

    // Not a preface: closed.
    let mut s = UnixStream::connect(&gw.socket).await.unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut rest = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut rest))
        .await
        .expect("the gateway closes a connection that is not HTTP/2")
        .unwrap();

    // A valid preface, then a HEADERS frame whose block indexes a table entry that does not
    // exist: GOAWAY with COMPRESSION_ERROR (0x9), then the end.
    let mut s = UnixStream::connect(&gw.socket).await.unwrap();
    let mut out = Vec::from(&b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"[..]);
    out.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]); // empty SETTINGS
    out.extend_from_slice(&[0, 0, 1, 1, 0x5, 0, 0, 0, 1, 0x80 | 70]); // HEADERS, index 70
    s.write_all(&out).await.unwrap();
    let mut got = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut got))
        .await
        .expect("the gateway ends the connection")
        .unwrap();
    let goaway = frames(&got)
        .into_iter()
        .find(|(kind, _)| *kind == 7)
        .expect("a GOAWAY");
    assert_eq!(&goaway.1[4..8], &[0, 0, 0, 9], "COMPRESSION_ERROR");

    // A preface and nothing else, then gone.
    let mut s = UnixStream::connect(&gw.socket).await.unwrap();
    s.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        .await
        .unwrap();
    drop(s);

    // The gateway still serves.
    let mut id = v1::identity_client::IdentityClient::new(gw.channel().await);
    id.probe(v1::ProbeRequest {}).await.unwrap();
}

/// The frames in `bytes`: (type, payload).
fn frames(mut bytes: &[u8]) -> Vec<(u8, Vec<u8>)> {
    let mut out = Vec::new();
    while bytes.len() >= 9 {
        let len = u32::from_be_bytes([0, bytes[0], bytes[1], bytes[2]]) as usize;
        if bytes.len() < 9 + len {
            break;
        }
        out.push((bytes[3], bytes[9..9 + len].to_vec()));
        bytes = &bytes[9 + len..];
    }
    out
}

/// The plugin dies under a spliced connection: calls fail with UNAVAILABLE naming it, the
/// client is told to go away, and a new connection works once the plugin is back.
#[tokio::test]
async fn plugin_death_under_a_spliced_connection() {
    let mut backend = Backend::start(Options::new("v1")).await;
    let gw = Gateway::start(&backend.socket, "v0.1", &[]).await;
    let ch = gw.channel().await;
    let mut id = v1::identity_client::IdentityClient::new(ch.clone());
    id.probe(v1::ProbeRequest {}).await.unwrap();
    backend.kill();
    let err = id.probe(v1::ProbeRequest {}).await.unwrap_err();
    assert!(
        matches!(err.code(), Code::Unavailable),
        "{err:?}\n{}",
        gw.log_text()
    );
    backend.restart(None).await;
    // The gateway reconnects in the background; a fresh connection is spliced again.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let mut id = v1::identity_client::IdentityClient::new(gw.channel().await);
        match id.probe(v1::ProbeRequest {}).await {
            Ok(_) => break,
            Err(e) => assert!(
                tokio::time::Instant::now() < deadline,
                "no recovery: {e:?}\n{}",
                gw.log_text()
            ),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(gw
        .log_text()
        .contains("upstream connection lost under a spliced client connection"));
}

/// A plugin that dies under a call is reported the same on every path: to a draft
/// (`v0.1-oneof`) client, an OK reply carrying the draft `Error` — a retryable `GeneralError`
/// naming the plugin — never a bare gRPC status, whether the call was spliced or answered on an unattached connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_dying_under_a_draft_call_is_the_same_draft_error_on_every_path() {
    use csi_gateway::dialect::Dialect;
    use std::collections::HashMap;
    use support::front::Front;

    let mut seen = Vec::new();
    for path in FrontPath::BOTH {
        // The plugin holds every create for a while once the volume's data is written.
        let opts = Options::new("v0.1-oneof").arg("--fault-delay=20s");
        let mut backend = Backend::start(opts).await;
        let gw = path.start(&backend.socket, "v0.1-oneof", &[]).await;
        let front = Front::new(Dialect::V0_1Oneof, gw.channel().await);
        let call = tokio::spawn(async move {
            let none = HashMap::new();
            front
                .create("dies-under-the-call", 1 << 20, &none)
                .await
                .map(|v| v.id)
        });
        let volumes = backend.data_dir.join("volumes");
        support::eventually(
            Duration::from_secs(20),
            "the create to reach the plugin",
            || std::fs::read_dir(&volumes).is_ok_and(|mut d| d.next().is_some()),
        )
        .await;
        backend.kill();
        let failure = call
            .await
            .unwrap()
            .expect_err("the plugin died under the call");
        let json = failure.draft.unwrap_or_else(|| {
            panic!(
                "{path:?}: a bare gRPC status {:?} {:?}\n{}",
                failure.code,
                failure.message,
                gw.log_text()
            )
        });
        let error: serde_json::Value = serde_json::from_str(&json).unwrap();
        let general = &error["general_error"];
        assert_eq!(general["error_code"], "UNDEFINED", "{path:?}: {json}");
        assert_ne!(general["caller_must_not_retry"], true, "{path:?}: {json}");
        let description = general["error_description"].as_str().unwrap_or_default();
        let plugin = backend.socket.display().to_string();
        assert!(description.contains(&plugin), "{path:?}: {json}");
        // The call's log line says whose failure it was.
        let what = format!("{path:?}: the call logged as the gateway's failure");
        support::eventually(Duration::from_secs(10), &what, || {
            gw.log_text()
                .lines()
                .any(|l| l.contains("CreateVolume") && l.contains("origin=\"gateway\""))
        })
        .await;
        seen.push((
            general["error_code"].clone(),
            general["caller_must_not_retry"].clone(),
        ));
    }
    assert_eq!(seen[0], seen[1], "both paths give the same reply");
}

/// A plugin that dies under a call, to clients of the other dialects: gRPC UNAVAILABLE naming
/// the plugin, whether the call was relayed (v1) or translated (v0.3), spliced or unattached;
/// the translated call counted with the same `outcome` on both paths — `gateway`, the
/// gateway's failure to carry the call (docs/operations.md, "Metrics") — and logged with that origin.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_dying_under_a_call_is_unavailable_on_every_path() {
    use csi_gateway::dialect::Dialect;
    use std::collections::HashMap;
    use support::front::Front;

    for path in FrontPath::BOTH {
        let opts = Options::new("v1").arg("--fault-delay=20s");
        let mut backend = Backend::start(opts).await;
        let (gw, metrics) = Gateway::start_with_metrics(&backend.socket, "v0.1", path).await;
        let mut calls = Vec::new();
        for dialect in [Dialect::V1, Dialect::V0_3] {
            let front = Front::new(dialect, gw.channel().await);
            calls.push(tokio::spawn(async move {
                let name = format!("dies-under-{dialect}");
                (dialect, front.create(&name, 1 << 20, &HashMap::new()).await)
            }));
        }
        let volumes = backend.data_dir.join("volumes");
        support::eventually(
            Duration::from_secs(20),
            "both creates to reach the plugin",
            || std::fs::read_dir(&volumes).is_ok_and(|d| d.count() >= 2),
        )
        .await;
        backend.kill();
        let plugin = backend.socket.display().to_string();
        for call in calls {
            let (dialect, outcome) = call.await.unwrap();
            let failure = outcome.expect_err("the plugin died under the call");
            assert_eq!(
                (failure.code, failure.draft.is_some()),
                (Code::Unavailable, false),
                "{path:?}, {dialect}: {failure:?}\n{}",
                gw.log_text()
            );
            assert!(
                failure.message.contains(&plugin),
                "{path:?}, {dialect}: {failure:?}"
            );
        }
        let series = r#"csi_gateway_translations_total{front_dialect="v0.3",upstream_dialect="v1",method_name="/csi.v0.Controller/CreateVolume",outcome="gateway"}"#;
        let text = support::scrape(metrics);
        assert_eq!(support::value(&text, series), Some(1.0), "{path:?}: {text}");
        assert!(
            gw.log_text()
                .lines()
                .any(|l| l.contains("/csi.v1.Controller/CreateVolume")
                    && l.contains("origin=\"gateway\"")),
            "{path:?}: the relayed call logged as the gateway's failure\n{}",
            gw.log_text()
        );
    }
}

/// Calls a v1 client makes of a v0.3 plugin that are one call each are translated on the
/// splice's own upstream connection (`Route::inline_call`). On one connection, with a client
/// (h2) that holds the gateway to HPACK and flow control, mixed with relayed calls: a plugin
/// error the translation turns into OK (its trailers replaced, the client's header table then
/// parted from the plugin's), a request too large to translate on the connection (answered on
/// the gateway's call path), and a reply many times the client's stream window — the window
/// the plugin gets too, so that its reply needs the gateway's WINDOW_UPDATEs. The spliced
/// gateway answers each exactly as it does on an unattached connection.
#[tokio::test]
async fn translated_calls_on_the_splices_own_upstream_streams() {
    const WINDOW: u32 = 256;
    const SNAPSHOTS: usize = 40;
    let backend = Backend::start(Options::new("v0.3")).await;
    // Enough snapshots for a ListSnapshots reply of many windows (translated: v0.3 counts
    // `created_at` in nanoseconds, v1 has a Timestamp).
    let mut controller = v0_3::controller_client::ControllerClient::new(backend.channel().await);
    let volume = controller
        .create_volume(v0_3::CreateVolumeRequest {
            name: "inline-source".into(),
            volume_capabilities: vec![support::front::cap_v03()],
            capacity_range: Some(v0_3::CapacityRange {
                required_bytes: 1 << 10,
                limit_bytes: 0,
            }),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner()
        .volume
        .unwrap();
    for i in 0..SNAPSHOTS {
        controller
            .create_snapshot(v0_3::CreateSnapshotRequest {
                source_volume_id: volume.id.clone(),
                name: format!("inline-{i:03}-{}", "n".repeat(60)),
                ..Default::default()
            })
            .await
            .unwrap();
    }
    let unpublish = v1::ControllerUnpublishVolumeRequest {
        volume_id: "no-such-volume".into(),
        node_id: "node-1".into(),
        ..Default::default()
    }
    .encode_to_vec();
    let big_validate = v1::ValidateVolumeCapabilitiesRequest {
        volume_id: "no-such-volume".into(),
        volume_capabilities: vec![cap_v1()],
        // More than a connection's initial window (65,535 bytes).
        volume_context: [("big".to_string(), "v".repeat(80 * 1024))].into(),
        ..Default::default()
    }
    .encode_to_vec();
    // A request with no field in either revision goes on as it came (`Asked::Relayed`): one
    // with an unknown field larger than the plugin's windows passes only if the plugin's
    // WINDOW_UPDATEs reach the client; the translation drops the field, the plugin skips it.
    let mut unknown = Vec::new();
    prost::encoding::bytes::encode(99, &vec![7u8; 1536 * 1024], &mut unknown);
    // Wire-identical but for what the request holds: relayed as it came when its check passes
    // (a volume id, no secret), translated otherwise (none: the gateway refuses it; secrets).
    let delete = v1::DeleteVolumeRequest {
        volume_id: "no-such-volume".into(),
        ..Default::default()
    }
    .encode_to_vec();
    let delete_secret = v1::DeleteVolumeRequest {
        volume_id: "no-such-volume".into(),
        secrets: [("password".to_string(), "hunter2".to_string())].into(),
    }
    .encode_to_vec();
    let delete_snapshot = v1::DeleteSnapshotRequest {
        snapshot_id: "no-such-snapshot".into(),
        ..Default::default()
    }
    .encode_to_vec();
    let calls: Vec<(&'static str, Vec<u8>, bool)> = vec![
        (
            "/csi.v1.Controller/ControllerUnpublishVolume",
            unpublish.clone(),
            false,
        ),
        ("/csi.v0.Identity/GetPluginInfo", Vec::new(), false),
        ("/csi.v1.Node/NodeGetCapabilities", Vec::new(), false),
        (
            "/csi.v1.Controller/ValidateVolumeCapabilities",
            big_validate,
            false,
        ),
        ("/csi.v1.Controller/ListSnapshots", Vec::new(), false),
        ("/csi.v0.Identity/Probe", Vec::new(), false),
        (
            "/csi.v1.Controller/ControllerUnpublishVolume",
            unpublish,
            true,
        ),
        ("/csi.v0.Identity/GetPluginInfo", Vec::new(), false),
        ("/csi.v1.Node/NodeGetCapabilities", unknown, false),
        ("/csi.v1.Identity/GetPluginCapabilities", Vec::new(), true),
        ("/csi.v1.Controller/DeleteVolume", delete.clone(), false),
        ("/csi.v1.Controller/DeleteVolume", delete, true),
        ("/csi.v1.Controller/DeleteVolume", Vec::new(), false),
        ("/csi.v1.Controller/DeleteVolume", delete_secret, false),
        ("/csi.v1.Controller/DeleteSnapshot", delete_snapshot, false),
    ];
    let mut answers = Vec::new();
    for path in FrontPath::BOTH {
        let gw = path.start(&backend.socket, "v0.1", &[]).await;
        let io = UnixStream::connect(&gw.socket).await.unwrap();
        // Stream windows of 256 bytes, which the gateway passes on to the plugin as its own.
        let (client, conn) = h2::client::Builder::new()
            .initial_window_size(WINDOW)
            .handshake::<_, Bytes>(io)
            .await
            .unwrap();
        let driver = tokio::spawn(conn);
        let mut got = Vec::new();
        // One at a time, then all at once on the same connection.
        // A stall (a window never given back) fails the test rather than hang it.
        let within = |call| async move {
            tokio::time::timeout(Duration::from_secs(30), call)
                .await
                .expect("the call stalled")
        };
        let call = |(path, message, trailers): &(&'static str, Vec<u8>, bool)| {
            let (path, message) = (*path, Bytes::from(message.clone()));
            within(unary_ended(client.clone(), path, message, *trailers))
        };
        for c in &calls {
            got.push(call(c).await);
        }
        // The plugin refuses a second operation on a volume still being worked on (ABORTED):
        // the calls in flight together name a volume each (none exists, so the answer is
        // the same).
        let apart: Vec<_> = calls
            .iter()
            .cycle()
            .take(4 * calls.len())
            .enumerate()
            .map(|(k, (path, message, trailers))| (*path, own_volume(path, message, k), *trailers))
            .collect();
        let together = join_all(apart.iter().map(call)).await;
        let log = gw.log_text();
        for (i, answer) in together.into_iter().enumerate() {
            assert_eq!(answer, got[i % calls.len()], "call {i} ({path:?}):\n{log}");
        }
        assert!(
            !driver.is_finished(),
            "{path:?}: the connection failed:\n{log}"
        );
        assert_eq!(
            log.contains(SPLICED),
            path == FrontPath::Spliced,
            "{path:?}:\n{log}"
        );
        answers.push(got);
    }
    let spliced = &answers[0];
    let codes: Vec<Option<&str>> = spliced.iter().map(|(c, _)| c.as_deref()).collect();
    // NOT_FOUND from a v0.3 plugin's ControllerUnpublishVolume is OK for a v1 client.
    assert_eq!(
        codes,
        [
            Some("0"),
            Some("0"),
            Some("0"),
            Some("5"),
            Some("0"),
            Some("0"),
            Some("0"),
            Some("0"),
            Some("0"),
            Some("0"),
            Some("0"),
            Some("0"),
            Some("3"),
            Some("0"),
            Some("0")
        ]
    );
    // The capabilities a v0.3 plugin has, as v1 names them.
    let caps = v1::NodeGetCapabilitiesResponse::decode(spliced[2].1.clone()).unwrap();
    assert!(!caps.capabilities.is_empty(), "{caps:?}");
    assert_eq!(
        spliced[8], spliced[2],
        "an unknown field changed the answer"
    );
    let plugin = v1::GetPluginCapabilitiesResponse::decode(spliced[9].1.clone()).unwrap();
    assert!(!plugin.capabilities.is_empty(), "{plugin:?}");
    let list = v1::ListSnapshotsResponse::decode(spliced[4].1.clone()).unwrap();
    assert_eq!(list.entries.len(), SNAPSHOTS);
    assert!(
        spliced[4].1.len() > 8 * WINDOW as usize,
        "{} bytes",
        spliced[4].1.len()
    );
    assert_eq!(
        answers[0], answers[1],
        "spliced and unattached answers differ"
    );
}

/// The request bodies of calls the splice answers itself are held against one budget per
/// connection (16 MiB): a call the client resets before its request ends gives its share
/// back, or a connection whose calls were cancelled often enough refuses every later one.
#[tokio::test]
async fn reset_local_calls_give_back_the_bodies_they_held() {
    use support::h2raw::{
        frame, request_block, Peer, CANCEL, DATA, END_HEADERS, HEADERS, RST_STREAM,
    };
    let backend = Backend::start(Options::new("v1")).await;
    let gw = Gateway::start(&backend.socket, "v0.1", &[]).await;
    let mut peer = Peer::connect(&gw.socket).await;
    // A v0.3 NodePublishVolume to a v1 plugin is answered by the splice (`call::answer`).
    let path = "/csi.v0.Node/NodePublishVolume";
    let block = request_block(&[], path, &[]);
    let chunk = vec![0u8; 16 * 1024];
    // 20 requests of 1 MiB each, none ended, each reset.
    for i in 0..20u32 {
        let id = 1 + 2 * i;
        let mut out = frame(HEADERS, END_HEADERS, id, &block);
        for _ in 0..64 {
            out.extend_from_slice(&frame(DATA, 0, id, &chunk));
        }
        out.extend_from_slice(&frame(RST_STREAM, 0, id, &CANCEL.to_be_bytes()));
        peer.send(&out).await;
    }
    let request = v0_3::NodePublishVolumeRequest {
        volume_id: "no-such-volume".into(),
        target_path: "/tmp/csi-gateway-test-target".into(),
        volume_capability: Some(support::front::cap_v03()),
        ..Default::default()
    };
    peer.call(41, &block, &request.encode_to_vec()).await;
    let reply = peer.reply(41).await;
    let status = reply.get("grpc-status").unwrap_or_default().to_string();
    let text = reply.get("grpc-message").unwrap_or_default().to_string();
    assert_ne!(status, "8", "refused: {text}\n{}", gw.log_text());
    assert!(!status.is_empty(), "no status: {reply:?}");
}

/// A burst of calls sent at once (many in flight, as a node's volumes after a restart) goes on
/// in pieces, both ways: the splice writes what it has built every few hundred bytes (`PIECE`),
/// so the next hop starts on the first calls while the gateway relays the rest, rather than
/// every hop taking the whole burst in turn (what held 64 calls in flight to one core of two,
/// `benches/bridge.rs`). Each write is in the gateway's trace; every call is answered once.
#[tokio::test]
async fn a_burst_of_calls_goes_on_in_pieces() {
    use support::h2raw::{
        frame, message, request_block, Hostile, Peer, Tap, DATA, END_HEADERS, END_STREAM, HEADERS,
    };
    const CALLS: u32 = 500;
    let backend = Backend::start(Options::new("v1")).await;
    let tap = Tap::start(&backend.socket, Hostile::Quiet).await;
    let gw = Gateway::start(
        &tap.socket,
        "v0.1",
        &["--log-level=csi_gateway=debug,csi_gateway::splice::io=trace"],
    )
    .await;
    let mut peer = Peer::connect(&gw.socket).await;
    let block = request_block(&[], "/csi.v1.Identity/Probe", &[]);
    let mut burst = Vec::new();
    for i in 0..CALLS {
        let id = 1 + 2 * i;
        burst.extend_from_slice(&frame(HEADERS, END_HEADERS, id, &block));
        burst.extend_from_slice(&frame(DATA, END_STREAM, id, &message(&[])));
    }
    let (before, opened) = (gw.log_text().len(), tap.requests());
    peer.send(&burst).await;
    let streams: Vec<u32> = (0..CALLS).map(|i| 1 + 2 * i).collect();
    for (stream, reply) in peer.replies(&streams).await {
        assert_eq!(
            reply.get("grpc-status"),
            Some("0"),
            "stream {stream}: {reply:?}"
        );
    }
    assert_eq!(
        tap.requests() - opened,
        CALLS as usize,
        "each call relayed once"
    );
    let log = gw.log_text();
    let writes = |to: &str| -> Vec<usize> {
        log[before..]
            .lines()
            .filter(|l| l.contains("wrote") && l.contains(&format!("to=\"{to}\"")))
            .filter_map(|l| {
                l.split("bytes=")
                    .nth(1)?
                    .split_whitespace()
                    .next()?
                    .parse()
                    .ok()
            })
            .collect()
    };
    for to in ["upstream", "client"] {
        let sizes = writes(to);
        // Every call's frames went that way: at least a DATA frame (14 bytes) each.
        let total: usize = sizes.iter().sum();
        assert!(
            total >= 14 * CALLS as usize,
            "{to}: {total} bytes in {sizes:?}\n{log}"
        );
        // A piece is 512 bytes and the frame that crossed that mark.
        let largest = sizes.iter().copied().max().unwrap_or(0);
        assert!(
            largest <= 2048,
            "{to}: a write of {largest} bytes: the burst went (nearly) whole ({} writes)",
            sizes.len()
        );
    }
}

/// A v0.3 client's ValidateVolumeCapabilities to a v1 plugin: v1 numbers two of its fields
/// the other way round, so a request the splice's check passes goes on with its keys rewritten
/// in place (`identical::RequestCheck::renumber`), in the order the client wrote its fields,
/// and the plugin's reply is translated (`supported` = `confirmed` present). A request the
/// translation refuses (accessible_topology, which v1 removed) or whose message does not end
/// with its frame is translated in full. Every answer is the one an unattached connection gets.
#[tokio::test]
async fn a_v0_3_validate_goes_on_with_its_fields_renumbered() {
    use csi_gateway::dialect::Dialect;
    use support::h2raw::{
        frame, message, request_block, Hostile, Peer, Tap, DATA, END_HEADERS, END_STREAM, HEADERS,
    };
    let backend = Backend::start(Options::new("v1")).await;
    let volume = support::front::Front::new(Dialect::V1, backend.channel().await)
        .create("renumbered", 1 << 20, &Default::default())
        .await
        .unwrap();
    // One field each: requests whose encodings, concatenated, are one request with its
    // fields in the order they are joined.
    let only = |r: v0_3::ValidateVolumeCapabilitiesRequest| r.encode_to_vec();
    let attributes = |context: &std::collections::HashMap<String, String>| {
        only(v0_3::ValidateVolumeCapabilitiesRequest {
            volume_attributes: context.clone(),
            ..Default::default()
        })
    };
    let capability = only(v0_3::ValidateVolumeCapabilitiesRequest {
        volume_capabilities: vec![support::front::cap_v03()],
        ..Default::default()
    });
    let id = only(v0_3::ValidateVolumeCapabilitiesRequest {
        volume_id: volume.id.clone(),
        ..Default::default()
    });
    let accessible = only(v0_3::ValidateVolumeCapabilitiesRequest {
        accessible_topology: vec![Default::default()],
        ..Default::default()
    });
    // volume_attributes (3), volume_capabilities (2), volume_id (1): not the order a
    // translation writes.
    let own = [attributes(&volume.context), capability.clone(), id.clone()].concat();
    let other = [
        attributes(&[("other".to_string(), "x".to_string())].into()),
        capability.clone(),
        id.clone(),
    ]
    .concat();
    let topology = [id.clone(), capability.clone(), accessible].concat();
    let path = "/csi.v0.Controller/ValidateVolumeCapabilities";
    let block = request_block(&[], path, &[]);
    let mut answers = Vec::new();
    for path in FrontPath::BOTH {
        let tap = Tap::start(&backend.socket, Hostile::Quiet).await;
        let gw = path.start(&tap.socket, "v0.1", &[]).await;
        let mut peer = Peer::connect(&gw.socket).await;
        let mut got = Vec::new();
        for (stream, request) in [(1, &own), (3, &other), (5, &topology)] {
            peer.call(stream, &block, request).await;
            got.push(peer.reply(stream).await);
        }
        // The same request, its message in a DATA frame that does not end the stream.
        let mut split = frame(HEADERS, END_HEADERS, 7, &block);
        split.extend_from_slice(&frame(DATA, 0, 7, &message(&own)));
        split.extend_from_slice(&frame(DATA, END_STREAM, 7, &[]));
        peer.send(&split).await;
        got.push(peer.reply(7).await);
        let log = gw.log_text();
        let answer: Vec<(Option<String>, Vec<u8>)> = got
            .iter()
            .map(|r| (r.get("grpc-status").map(str::to_string), r.data.clone()))
            .collect();
        let supported = |i: usize| {
            v0_3::ValidateVolumeCapabilitiesResponse::decode(&got[i].data[5..])
                .unwrap_or_else(|e| panic!("{path:?} reply {i}: {e}: {:?}\n{log}", got[i]))
        };
        assert_eq!(answer[0].0.as_deref(), Some("0"), "{:?}\n{log}", got[0]);
        assert!(supported(0).supported, "{:?}", supported(0));
        // The attributes reached the plugin as the volume's context, which differs.
        assert_eq!(answer[1].0.as_deref(), Some("0"), "{:?}\n{log}", got[1]);
        assert!(!supported(1).supported, "{:?}", supported(1));
        assert!(
            supported(1).message.contains("volume_context"),
            "{:?}",
            supported(1)
        );
        assert_eq!(answer[2].0.as_deref(), Some("3"), "{:?}\n{log}", got[2]);
        assert!(
            got[2]
                .get("grpc-message")
                .is_some_and(|m| m.contains("accessible_topology")),
            "{:?}",
            got[2]
        );
        assert_eq!(answer[3], answer[0], "{path:?}: split request");
        // What the plugin got, by stream: the message of the first DATA frame.
        let sent: Vec<Vec<u8>> = tap
            .frames()
            .into_iter()
            // Past the gateway's own calls, whose messages are empty.
            .filter(|(_, f)| f.kind == DATA && f.payload.len() > 5)
            .map(|(_, f)| f.payload[5..].to_vec())
            .collect();
        let translated = v1::ValidateVolumeCapabilitiesRequest {
            volume_id: volume.id.clone(),
            volume_context: volume.context.clone(),
            volume_capabilities: vec![cap_v1()],
            ..Default::default()
        }
        .encode_to_vec();
        // The client's bytes with each top-level key rewritten (every field here is shorter
        // than 128 bytes: a one-byte key, a one-byte length).
        let mut renumbered = own.clone();
        let mut at = 0;
        while at < renumbered.len() {
            renumbered[at] = match own[at] >> 3 {
                3 => 2 << 3 | 2,
                2 => 3 << 3 | 2,
                _ => own[at],
            };
            at += 2 + renumbered[at + 1] as usize;
        }
        match path {
            // Renumbered in place, in the client's order; the split one translated.
            FrontPath::Spliced => {
                assert_eq!(sent[0], renumbered, "{sent:?}\n{log}");
                assert_eq!(sent.last(), Some(&translated), "{sent:?}");
            }
            // Every request translated.
            FrontPath::Unattached => assert_eq!(sent[0], translated, "{sent:?}"),
        }
        answers.push(answer);
    }
    assert_eq!(
        answers[0], answers[1],
        "spliced and unattached answers differ"
    );
}

/// A v0.3 client's NodeGetId (v1 kept only NodeGetInfo) to a v1 plugin: the splice makes it
/// one NodeGetInfo call on its own upstream connection; the answer is the plugin's node id,
/// as on an unattached connection.
#[tokio::test]
#[allow(deprecated)] // v0.3 deprecated NodeGetId: a client of it is what is tested
async fn a_v0_3_node_get_id_is_the_plugins_node_get_info() {
    let backend = Backend::start(Options::new("v1")).await;
    let info = v1::node_client::NodeClient::new(backend.channel().await)
        .node_get_info(v1::NodeGetInfoRequest {})
        .await
        .unwrap()
        .into_inner();
    assert!(!info.node_id.is_empty());
    for path in FrontPath::BOTH {
        let gw = path.start(&backend.socket, "v0.1", &[]).await;
        let mut node = v0_3::node_client::NodeClient::new(gw.channel().await);
        for _ in 0..3 {
            let id = node
                .node_get_id(v0_3::NodeGetIdRequest {})
                .await
                .unwrap_or_else(|e| panic!("{path:?}: {e:?}\n{}", gw.log_text()))
                .into_inner();
            assert_eq!(id.node_id, info.node_id, "{path:?}");
        }
        assert_eq!(gw.log_text().contains(SPLICED), path == FrontPath::Spliced);
    }
}

/// Clients of 2018 (golang.org/x/net's HPACK decoder before 2018-12: kubelet, csi-sanity and
/// the sidecars of CSI v0.x) close their connection on a dynamic table size update once their
/// table holds an entry. On one connection that mixes relayed calls (the plugin's blocks as
/// they came), translated ones whose plugin reply the client never gets as it came (which
/// parts the client's table from the plugin's) and calls the gateway answers itself, every
/// header block the client reads passes that decoder's rule: the gateway volunteers no size
/// update, and every call is answered on the one connection.
#[tokio::test]
async fn no_header_block_breaks_a_2018_clients_hpack_decoder() {
    use support::h2raw::{request_block, Peer, GOAWAY};
    let backend = Backend::start(Options::new("v0.3")).await;
    let gw = Gateway::start(&backend.socket, "v0.1", &[]).await;
    let mut peer = Peer::connect(&gw.socket).await;
    let unpublish = v1::ControllerUnpublishVolumeRequest {
        volume_id: "no-such-volume".into(),
        node_id: "node-1".into(),
        ..Default::default()
    }
    .encode_to_vec();
    // (path, request, the grpc-status the client gets)
    let calls: [(&str, Vec<u8>, &str); 6] = [
        // relayed as it came: the plugin's reply fills the client's table
        ("/csi.v0.Identity/GetPluginInfo", Vec::new(), "0"),
        // translated: the plugin's NOT_FOUND is the v1 client's OK, its block kept back
        (
            "/csi.v1.Controller/ControllerUnpublishVolume",
            unpublish,
            "0",
        ),
        // answered by the gateway itself
        ("/grpc.health.v1.Health/Check", Vec::new(), "0"),
        ("/csi.v1.Identity/NoSuchMethod", Vec::new(), "12"),
        // relayed once the tables parted (re-encoded), and translated
        ("/csi.v0.Identity/Probe", Vec::new(), "0"),
        ("/csi.v1.Node/NodeGetCapabilities", Vec::new(), "0"),
    ];
    let mut stream = 1;
    for round in 0..3 {
        for (path, request, code) in &calls {
            peer.call(stream, &request_block(&[], path, &[]), request)
                .await;
            let reply = peer.reply(stream).await;
            assert_eq!(
                reply.get("grpc-status"),
                Some(*code),
                "round {round}, {path}: {reply:?}\n{}",
                gw.log_text()
            );
            stream += 2;
        }
    }
    let check = &peer.hpack_2018;
    assert!(
        check.refused.is_empty(),
        "size updates a 2018 client refuses: {:?}",
        check.refused
    );
    assert!(check.blocks >= 3 * calls.len(), "{} blocks", check.blocks);
    assert!(!peer.closed && !peer.seen.iter().any(|f| f.kind == GOAWAY));
    assert!(
        gw.log_text().contains(SPLICED),
        "the connection was spliced:\n{}",
        gw.log_text()
    );
}
