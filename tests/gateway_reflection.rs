//! Server reflection and health through the built gateway, driven by a client that knows no
//! CSI proto: Python's gRPC C-core with `grpcio-reflection` and `grpcio-health-checking`
//! (`tests/interop/grpc_tools.py`; `.ci/setup` installs them). It lists the services, builds each
//! request from the reflected descriptors and calls GetPluginInfo in every dialect the front
//! serves, and asks Health about the upstream. Streams held open (a Watch across a plugin
//! restart, a reflection stream under flow control, cancelled streams, shutdown) are driven
//! with tonic's client. Every test of `on_every_path!` runs on a spliced connection (the
//! default) and on a unattached one (no upstream connection of its own; its calls answered on the gateway's shared one), as `spliced::NAME` and `unattached::NAME`.

use csi_gateway_test_support as support;

use std::process::Command;
use std::time::{Duration, Instant};

use csi::identity_client::IdentityClient;
use csi_gateway::dialect::proto::v1 as csi;
use csi_gateway::grpc::frame;
use hyper_util::rt::TokioIo;
use prost::Message;
use serde_json::Value;
use support::gateway::Gateway;
use support::{Backend, Options};
use tokio::net::UnixStream;
use tonic::transport::{Channel, Endpoint, Uri};
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;
use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient as ReflectionClient;
use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
use tonic_reflection::pb::v1::{ServerReflectionRequest, ServerReflectionResponse};

const PLUGIN: &str = "reference.csi-gateway.dev";

use support::gateway::FrontPath as Path;

/// For each `async fn NAME(path: Path)`, one test per path, `spliced::NAME` and
/// `unattached::NAME`, so a failure names its path.
macro_rules! on_every_path {
    ($($body:ident),* $(,)?) => {
        mod spliced {
            $(#[tokio::test]
            async fn $body() {
                super::$body(super::Path::Spliced).await
            })*
        }
        mod unattached {
            $(#[tokio::test]
            async fn $body() {
                super::$body(super::Path::Unattached).await
            })*
        }
    };
}

on_every_path!(
    reflection_lists_and_calls_every_dialect,
    one_reflection_stream_answers_request_after_request,
    a_watch_follows_the_plugin_down_and_back,
    cancelled_streams_leave_nothing_behind,
    reflection_keeps_to_flow_control,
    a_watch_ends_unavailable_when_the_gateway_shuts_down,
);

/// Runs the tool; fails (never skips) when python3 or its packages are missing.
fn tool(gateway: &Gateway, args: &[&str]) -> Value {
    support::deps::GRPCIO.check();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/interop/grpc_tools.py");
    let target = format!("unix://{}", gateway.socket.display());
    let out = Command::new("timeout")
        .arg("60")
        .arg("python3")
        .arg(script)
        .arg(&target)
        .args(args)
        .output()
        .expect("running python3");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "grpc_tools.py {args:?} failed ({}):\n{stdout}\n{}\ngateway log:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr),
        gateway.log_text()
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

fn names(v: &Value) -> Vec<&str> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect()
}

/// Every dialect the front serves is listed and callable with reflected descriptors only.
async fn reflection_lists_and_calls_every_dialect(path: Path) {
    // Each path serves the other legacy dialect under `csi`: both are covered.
    let legacy = match path {
        Path::Spliced => "v0.1",
        Path::Unattached => "v0.1-oneof",
    };
    let backend = Backend::start(Options::new(legacy)).await;
    let gateway = path.start(&backend.socket, legacy, &[]).await;
    let listed = tool(&gateway, &["list"]);
    for version in ["v1", "v1alpha"] {
        let services = names(&listed[version]);
        for s in [
            "csi.v1.Identity",
            "csi.v1.Controller",
            "csi.v1.Node",
            "csi.v0.Identity",
            "csi.v0.Node",
            "csi.Identity",
            "csi.Controller",
            "grpc.health.v1.Health",
            "grpc.reflection.v1.ServerReflection",
            "grpc.reflection.v1alpha.ServerReflection",
        ] {
            assert!(services.contains(&s), "{version} lists {services:?}");
        }
    }
    let v01 = r#"{"version": {"major": 0, "minor": 1, "patch": 0}}"#;
    for (service, request, expected_type) in [
        ("csi.v1.Identity", "{}", "csi.v1.GetPluginInfoRequest"),
        ("csi.v0.Identity", "{}", "csi.v0.GetPluginInfoRequest"),
        ("csi.Identity", v01, "csi.GetPluginInfoRequest"),
    ] {
        let out = tool(&gateway, &["call", service, "GetPluginInfo", request]);
        assert_eq!(out["ok"], true, "{service}: {out}");
        assert_eq!(out["request_type"], expected_type);
        // The draft answers inside `result`.
        let reply = &out["reply"];
        let name = reply.get("result").unwrap_or(reply)["name"].clone();
        assert_eq!(name, PLUGIN, "{service}: {out}");
    }
}

/// The legacy package `csi` is the configured dialect's: the draft's messages, not v0.1's.
#[tokio::test]
async fn reflection_describes_the_legacy_dialect_the_listener_serves() {
    let backend = Backend::start(Options::new("v0.1-oneof")).await;
    let gateway = Gateway::start(&backend.socket, "v0.1-oneof", &[]).await;
    let v01 = r#"{"version": {"major": 0, "minor": 1, "patch": 0}}"#;
    let out = tool(&gateway, &["call", "csi.Identity", "GetPluginInfo", v01]);
    assert_eq!(out["reply"]["result"]["name"], PLUGIN, "{out}");
}

/// grpcurl's way: one reflection stream, each request answered before the next is sent, in
/// both reflection versions.
async fn one_reflection_stream_answers_request_after_request(path: Path) {
    let backend = Backend::start(Options::new("v1")).await;
    let gateway = path.start(&backend.socket, "v0.1", &[]).await;
    for version in ["v1", "v1alpha"] {
        let out = tool(&gateway, &["stream", version]);
        let files = out["files"].as_object().unwrap();
        assert!(files.len() >= 10, "{version}: {out}");
        for (service, n) in files {
            assert!(
                n.as_u64().unwrap() >= 1,
                "{version}: no file for {service}: {out}"
            );
        }
        assert_eq!(out["requests"], files.len() + 1, "{version}: {out}");
        assert_eq!(out["after_half_close"], 0, "{version}: {out}");
    }
}

#[tokio::test]
async fn health_reflects_the_upstream_probe() {
    let mut backend = Backend::start(Options::new("v0.3")).await;
    let gateway = Gateway::start(&backend.socket, "v0.1", &[]).await;
    for service in ["", "csi.v1.Controller", "csi.v0.Node", "csi.Identity"] {
        let out = tool(&gateway, &["check", service]);
        assert_eq!(out["status"], "SERVING", "{service:?}: {out}");
    }
    assert_eq!(tool(&gateway, &["watch", ""])["status"], "SERVING");
    let unknown = tool(&gateway, &["check", "csi.v2.Identity"]);
    assert_eq!(unknown["code"], "NOT_FOUND", "{unknown}");
    assert_eq!(
        tool(&gateway, &["watch", "csi.v2.Identity"])["status"],
        "SERVICE_UNKNOWN"
    );

    backend.kill();
    let deadline = std::time::Instant::now() + support::RPC_TIMEOUT;
    loop {
        let out = tool(&gateway, &["check", ""]);
        if out["status"] == "NOT_SERVING" {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "still {out}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(
        tool(&gateway, &["watch", "csi.v1.Node"])["status"],
        "NOT_SERVING"
    );
}

// ---- Streams held open, with tonic's client (hyper's HTTP/2) ----

/// A tonic channel on the gateway's socket with no deadline of its own (a Watch lasts as long
/// as the test wants), and `window` as the client's initial stream window, if given.
async fn channel(gateway: &Gateway, window: Option<u32>) -> Channel {
    let path = gateway.socket.clone();
    let endpoint = Endpoint::from_static("http://localhost")
        .connect_timeout(support::PROCESS_TIMEOUT)
        .initial_stream_window_size(window);
    endpoint
        .connect_with_connector(tower::service_fn(move |_: Uri| {
            let path = path.clone();
            async move { Ok::<_, std::io::Error>(TokioIo::new(UnixStream::connect(path).await?)) }
        }))
        .await
        .expect("connect to the gateway")
}

/// The next message of a stream, within `WAIT`; panics if the stream ends or fails.
async fn next<T>(stream: &mut tonic::Streaming<T>, what: &str) -> T {
    match tokio::time::timeout(WAIT, stream.message()).await {
        Ok(Ok(Some(m))) => m,
        Ok(Ok(None)) => panic!("{what}: the stream ended"),
        Ok(Err(s)) => panic!("{what}: the stream failed: {s:?}"),
        Err(_) => panic!("{what}: nothing within {WAIT:?}"),
    }
}

const WAIT: Duration = Duration::from_secs(20);

fn serving(status: i32) -> ServingStatus {
    ServingStatus::try_from(status).unwrap()
}

/// One Watch sees the plugin go and come back, and stays open throughout.
async fn a_watch_follows_the_plugin_down_and_back(path: Path) {
    let mut backend = Backend::start(Options::new("v1")).await;
    let gateway = path.start(&backend.socket, "v0.1", &[]).await;
    let mut health = HealthClient::new(channel(&gateway, None).await);
    let request = HealthCheckRequest {
        service: "csi.v1.Node".into(),
    };
    let mut watch = health.watch(request).await.unwrap().into_inner();
    assert_eq!(
        serving(next(&mut watch, "first").await.status),
        ServingStatus::Serving
    );

    backend.kill();
    let down = next(&mut watch, "after the plugin was killed").await;
    assert_eq!(serving(down.status), ServingStatus::NotServing);

    backend.restart(None).await;
    path.plugin_back(&backend.socket);
    let up = next(&mut watch, "after the plugin came back").await;
    assert_eq!(serving(up.status), ServingStatus::Serving);

    // A client still calls through the gateway (on a new connection: the spliced one asked its
    // client to go away when it lost its upstream connection under it).
    let mut health = HealthClient::new(channel(&gateway, None).await);
    let check = health
        .check(HealthCheckRequest {
            service: String::new(),
        })
        .await
        .unwrap();
    assert_eq!(serving(check.into_inner().status), ServingStatus::Serving);
}

fn list_services() -> ServerReflectionRequest {
    ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    }
}

fn file_containing(symbol: &str, host: String) -> ServerReflectionRequest {
    ServerReflectionRequest {
        host,
        message_request: Some(MessageRequest::FileContainingSymbol(symbol.into())),
    }
}

/// A client that gives up on a Watch (tonic: the stream dropped) and on a reflection stream
/// whose request half is still open (h2's client: RST_STREAM CANCEL) leaves nothing running
/// in the gateway: no call in flight, each counted once as cancelled, and the same
/// connections serve the next calls — CSI and health alike.
async fn cancelled_streams_leave_nothing_behind(path: Path) {
    let backend = Backend::start(Options::new("v1")).await;
    let port = support::free_port();
    let metrics = format!("--metrics-listen=127.0.0.1:{port}");
    let gateway = path.start(&backend.socket, "v0.1", &[&metrics]).await;
    let in_flight = || support::value(&support::scrape(port), "csi_gateway_calls_in_flight");

    let channel = channel(&gateway, None).await;
    let mut health = HealthClient::new(channel.clone());
    let mut watch = health
        .watch(HealthCheckRequest {
            service: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        serving(next(&mut watch, "watch").await.status),
        ServingStatus::Serving
    );

    let (mut h2, driver) =
        h2::client::handshake(UnixStream::connect(&gateway.socket).await.unwrap())
            .await
            .unwrap();
    tokio::spawn(driver);
    let (reply, mut requests) = h2
        .send_request(
            grpc_request("/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"),
            false,
        )
        .unwrap();
    requests
        .send_data(frame::encode(&list_services().encode_to_vec()), false)
        .unwrap();
    let mut reply = tokio::time::timeout(WAIT, reply)
        .await
        .unwrap()
        .unwrap()
        .into_body();
    let listed = ServerReflectionResponse::decode(read_message(&mut reply).await).unwrap();
    assert!(listed.message_response.is_some(), "{listed:?}");
    assert_eq!(
        in_flight(),
        Some(2.0),
        "the Watch and the reflection stream"
    );

    drop(watch);
    requests.send_reset(h2::Reason::CANCEL);
    let until = Instant::now() + WAIT;
    while in_flight() != Some(0.0) {
        assert!(Instant::now() < until, "still in flight: {:?}", in_flight());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let text = support::scrape(port);
    for method in [
        "/grpc.health.v1.Health/Watch",
        "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
    ] {
        // The gateway's own services, counted apart from the CSI operations.
        let series = format!(
            "csi_gateway_service_calls_total{{method_name=\"{method}\",grpc_status_code=\"Canceled\"}}"
        );
        assert_eq!(
            support::value(&text, &series),
            Some(1.0),
            "{series} in\n{text}"
        );
    }

    // The same connections still serve: a relayed CSI call and Health on tonic's, reflection
    // on h2's.
    let info = IdentityClient::new(channel.clone())
        .get_plugin_info(csi::GetPluginInfoRequest {})
        .await
        .unwrap();
    assert_eq!(info.into_inner().name, PLUGIN);
    let check = health
        .check(HealthCheckRequest {
            service: String::new(),
        })
        .await
        .unwrap();
    assert_eq!(serving(check.into_inner().status), ServingStatus::Serving);
    let mut h2 = tokio::time::timeout(WAIT, h2.ready())
        .await
        .unwrap()
        .unwrap();
    let (reply, mut requests) = h2
        .send_request(
            grpc_request("/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"),
            false,
        )
        .unwrap();
    requests
        .send_data(frame::encode(&list_services().encode_to_vec()), true)
        .unwrap();
    let mut reply = tokio::time::timeout(WAIT, reply)
        .await
        .unwrap()
        .unwrap()
        .into_body();
    let again = ServerReflectionResponse::decode(read_message(&mut reply).await).unwrap();
    assert_eq!(again, listed);
}

/// The next whole gRPC message on `body`.
async fn read_message(body: &mut h2::RecvStream) -> bytes::Bytes {
    let mut buf = Vec::new();
    loop {
        if let Some(m) = frame::first_message(&buf) {
            return bytes::Bytes::copy_from_slice(m);
        }
        let chunk = tokio::time::timeout(WAIT, body.data())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        let _ = body.flow_control().release_capacity(chunk.len());
        buf.extend_from_slice(&chunk);
    }
}

/// A gRPC request head for `path`, as h2's client wants it (an absolute URI).
fn grpc_request(path: &str) -> http::Request<()> {
    let mut request = csi_gateway::upstream::conn::grpc_request(path).unwrap();
    *request.uri_mut() = format!("http://localhost{path}").parse().unwrap();
    request
}

/// Flow control both ways on one reflection stream: requests sent all at once, without waiting,
/// 1.5 MiB in all (each with a 32 KiB `host`, which the reply echoes: more than a stream window
/// of the plugin's, passed on by the splice, lets a client send before the service read some),
/// are all answered in order; replies far larger than the client's 1 KiB stream window arrive
/// whole.
async fn reflection_keeps_to_flow_control(path: Path) {
    let backend = Backend::start(Options::new("v1")).await;
    let gateway = path.start(&backend.socket, "v0.1", &[]).await;
    let mut reflection = ReflectionClient::new(channel(&gateway, Some(1024)).await);
    let symbols = ["csi.v1.Controller", "csi.v0.Node", "csi.Identity"];
    let sent: Vec<_> = (0..48)
        .map(|i| file_containing(symbols[i % 3], format!("{i}-{}", "h".repeat(32 * 1024))))
        .collect();
    let mut replies = reflection
        .server_reflection_info(futures_util::stream::iter(sent.clone()))
        .await
        .unwrap()
        .into_inner();
    for (i, request) in sent.iter().enumerate() {
        let reply = next(&mut replies, &format!("reply {i}")).await;
        assert_eq!(reply.original_request.as_ref(), Some(request), "reply {i}");
        let Some(MessageResponse::FileDescriptorResponse(files)) = reply.message_response else {
            panic!("reply {i}: {reply:?}");
        };
        let size: usize = files.file_descriptor_proto.iter().map(Vec::len).sum();
        assert!(size > 4096, "reply {i}: {size} bytes");
    }
    let end = tokio::time::timeout(WAIT, replies.message()).await.unwrap();
    assert!(matches!(end, Ok(None)), "{end:?}");
}

/// A gateway that shuts down ends an open Watch at once with UNAVAILABLE (the cue for a
/// health-checking client to go elsewhere) instead of holding it through its grace period.
async fn a_watch_ends_unavailable_when_the_gateway_shuts_down(path: Path) {
    let backend = Backend::start(Options::new("v1")).await;
    let mut gateway = path.start(&backend.socket, "v0.1", &[]).await;
    let mut health = HealthClient::new(channel(&gateway, None).await);
    let mut watch = health
        .watch(HealthCheckRequest {
            service: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(
        serving(next(&mut watch, "watch").await.status),
        ServingStatus::Serving
    );
    let began = Instant::now();
    let exit = tokio::task::spawn_blocking(move || {
        let status = gateway.terminate();
        (status, gateway)
    });
    let end = tokio::time::timeout(WAIT, watch.message()).await.unwrap();
    match end {
        Err(s) => assert_eq!(s.code(), tonic::Code::Unavailable, "{s:?}"),
        other => panic!("the Watch did not end UNAVAILABLE: {other:?}"),
    }
    let (status, gateway) = exit.await.unwrap();
    assert!(status.success(), "{status}: {}", gateway.log_text());
    // The default grace period is 10 s: the Watch did not hold the gateway up.
    assert!(
        began.elapsed() < Duration::from_secs(5),
        "{:?}",
        began.elapsed()
    );
}
