//! Client flow control on the spliced front (RFC 9113 §6.9), driven with raw frames
//! (crates/test-support/src/h2raw.rs) against the built gateway, on every kind of call: relayed
//! to the plugin, translated on the spliced connection, answered by the gateway itself, and
//! served by the gateway's own services. The window a client may fill is the one it was
//! granted: the plugin's on a relayed stream (its SETTINGS and WINDOW_UPDATEs, passed on), the
//! gateway's own on the others. A client that sends past the connection's window gets GOAWAY
//! FLOW_CONTROL_ERROR; past only a stream's, RST_STREAM FLOW_CONTROL_ERROR on that stream,
//! and the connection's other calls go on. A client that honours the windows (h2's) is served
//! on every kind, large requests included.

use csi_gateway_test_support as support;

use std::time::Duration;

use support::gateway::Gateway;
use support::h2raw::*;
use support::{Backend, Options};

const PROBE: &str = "/csi.v1.Identity/Probe";
/// Translated on the spliced connection (a v0.3 call to a v1 plugin).
const PROBE_V03: &str = "/csi.v0.Identity/Probe";
/// Translated, and answered by the gateway itself once its request passes 16 KiB.
const CREATE_V03: &str = "/csi.v0.Controller/CreateVolume";
const REFLECTION: &str = "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo";

/// A configuration file with `[listen.limits]` set to `limits`.
fn config(dir: &std::path::Path, limits: &str) -> String {
    let path = dir.join("gateway.toml");
    let text = format!(
        "[listen]\nendpoint = \"unix:///unused\"\n[upstream]\nendpoint = \"unix:///unused-plugin\"\n\
         [state]\ndir = \"/unused\"\n[listen.limits]\n{limits}\n"
    );
    std::fs::write(&path, text).unwrap();
    format!("--config={}", path.display())
}

/// A message whose fields the plugin ignores (field 15, bytes): about `len` bytes with its
/// prefix.
fn ignored_message(len: usize) -> Vec<u8> {
    let n = len - 10;
    let mut field = vec![0x7a];
    let mut v = n;
    while v >= 0x80 {
        field.push((v as u8) | 0x80);
        v >>= 7;
    }
    field.push(v as u8);
    field.resize(field.len() + n, b'x');
    message(&field)
}

/// HEADERS opening `stream` on `path`, then `sent` bytes of a message that declares
/// `declared`, in DATA frames of at most 16 KiB, never ended.
fn unfinished(stream: u32, path: &str, declared: u32, sent: usize) -> Vec<u8> {
    let mut body = vec![0];
    body.extend_from_slice(&declared.to_be_bytes());
    body.resize(sent, 0x0a);
    let mut out = frame(HEADERS, END_HEADERS, stream, &request_block(&[], path, &[]));
    for chunk in body.chunks(16_384) {
        out.extend_from_slice(&frame(DATA, 0, stream, chunk));
    }
    out
}

/// The plugin's stream window is 16 KiB and its connection window 64 KiB, as the gateway
/// passes them on (`Hostile::SmallWindows`). One relayed stream sent 20 KB: RST_STREAM
/// FLOW_CONTROL_ERROR, and the next call on the connection is served. Five streams sent 15 KB
/// each (75 KB): GOAWAY FLOW_CONTROL_ERROR. Calls within both windows are served.
#[tokio::test]
async fn a_relayed_call_past_the_plugins_windows() {
    let backend = Backend::start(Options::new("v1")).await;
    let tap = Tap::start(&backend.socket, Hostile::SmallWindows).await;
    let gw = Gateway::start(&tap.socket, "v0.1", &[]).await;

    // Within the windows: three calls of 15 KB each.
    let mut p = Peer::connect(&gw.socket).await;
    let within = ignored_message(15_000);
    for stream in [1, 3, 5] {
        let mut out = frame(
            HEADERS,
            END_HEADERS,
            stream,
            &request_block(&[], PROBE, &[]),
        );
        out.extend_from_slice(&frame(DATA, END_STREAM, stream, &within));
        p.send(&out).await;
    }
    let replies = p.replies(&[1, 3, 5]).await;
    for (stream, r) in &replies {
        assert_eq!(r.get("grpc-status"), Some("0"), "stream {stream}: {r:?}");
    }
    println!("relayed: 3 calls of 15 KB within 16 KiB stream windows served");

    // Past a stream's window.
    let mut p = Peer::connect(&gw.socket).await;
    let mut out = unfinished(1, PROBE, 30_000, 16_384);
    out.extend_from_slice(&frame(DATA, 0, 1, &[0x0a; 4_000]));
    p.send(&out).await;
    let reset = p.expect(|f| f.kind == RST_STREAM && f.stream == 1).await;
    println!(
        "relayed: 20,384 bytes on a 16,384-byte stream window: RST_STREAM code {}",
        reset.code()
    );
    assert_eq!(reset.code(), FLOW_CONTROL_ERROR, "{:?}", p.seen);
    p.call(3, &request_block(&[], PROBE, &[]), &[]).await;
    let r = p.reply(3).await;
    assert_eq!(
        r.get("grpc-status"),
        Some("0"),
        "the connection goes on: {r:?}"
    );

    // Past the connection's window.
    let mut p = Peer::connect(&gw.socket).await;
    let mut out = Vec::new();
    for stream in [1, 3, 5, 7, 9] {
        out.extend_from_slice(&unfinished(stream, PROBE, 30_000, 15_000));
    }
    p.send(&out).await;
    let g = p.goaway().await.expect("a GOAWAY");
    println!(
        "relayed: 75,000 bytes on a 65,535-byte connection window: GOAWAY code {}",
        g.code()
    );
    assert_eq!(g.code(), FLOW_CONTROL_ERROR, "{:?}", p.seen);
}

/// Calls translated on the spliced connection (v0.3 CreateVolume): the gateway holds their
/// requests until whole (up to 16 KiB each), and the connection window they took comes back
/// only then. 80 streams with 15 KB each, never ended (1.2 MB on the plugin's 1 MiB
/// connection window): GOAWAY FLOW_CONTROL_ERROR.
#[tokio::test]
async fn translated_calls_past_the_connection_window() {
    let backend = Backend::start(Options::new("v1")).await;
    let gw = Gateway::start(&backend.socket, "v0.1", &[]).await;
    let mut p = Peer::connect(&gw.socket).await;
    let mut out = Vec::new();
    for i in 0..80 {
        out.extend_from_slice(&unfinished(1 + 2 * i, CREATE_V03, 30_000, 15_000));
    }
    p.send(&out).await;
    let g = p.goaway().await.expect("a GOAWAY");
    println!(
        "translated: 80 x 15,000 bytes on a 1 MiB connection window: GOAWAY code {}",
        g.code()
    );
    assert_eq!(g.code(), FLOW_CONTROL_ERROR, "{:?}", p.seen);
}

/// Calls the gateway answers itself (v0.3 CreateVolumes past 16 KiB): once a connection's hold
/// 8 MiB of requests (`CONNECTION_BUFFERED`), the gateway grants it no more window, and a
/// client that sends four unfinished 3 MiB requests all the same gets GOAWAY
/// FLOW_CONTROL_ERROR.
#[tokio::test]
async fn calls_answered_by_the_gateway_past_the_withheld_window() {
    let backend = Backend::start(Options::new("v1")).await;
    let gw = Gateway::start(&backend.socket, "v0.1", &[]).await;
    let mut p = Peer::connect(&gw.socket).await;
    let mut out = Vec::new();
    for stream in [1, 3, 5, 7] {
        out.extend_from_slice(&unfinished(stream, CREATE_V03, 3_500_000, 3 << 20));
    }
    p.send(&out).await;
    let g = p.goaway().await.expect("a GOAWAY");
    let granted: u64 = p
        .seen
        .iter()
        .filter(|f| f.kind == WINDOW_UPDATE && f.stream == 0)
        .map(|f| u32::from_be_bytes(f.payload[..4].try_into().unwrap()) as u64)
        .sum();
    println!(
        "answered by the gateway: 4 x 3 MiB sent, {granted} bytes of connection window granted: GOAWAY code {}",
        g.code()
    );
    assert_eq!(g.code(), FLOW_CONTROL_ERROR, "{:?}", p.seen);
}

/// A client that honours flow control (h2's) is served on every kind of call, with requests
/// far larger than any one window: 3 MiB relayed, 3 MiB translated then answered by the
/// gateway, a translated call, and a reflection request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_honours_the_windows_is_served() {
    let backend = Backend::start(Options::new("v1")).await;
    let gw = Gateway::start(&backend.socket, "v0.1", &[]).await;
    let io = tokio::net::UnixStream::connect(&gw.socket).await.unwrap();
    let (client, connection) = h2::client::handshake(io).await.unwrap();
    tokio::spawn(async move {
        let _ = connection.await;
    });
    let large = bytes::Bytes::from(ignored_message(3 << 20));
    // A reflection request: list_services (field 7, a string).
    let list = bytes::Bytes::from(message(&[0x3a, 0x01, b'*']));
    for (path, body) in [
        (PROBE, large.clone()),
        (CREATE_V03, large.clone()),
        (PROBE_V03, bytes::Bytes::from(message(&[]))),
        (REFLECTION, list),
    ] {
        let status = tokio::time::timeout(
            Duration::from_secs(30),
            h2_call(client.clone(), path, body.clone()),
        )
        .await
        .unwrap_or_else(|_| panic!("{path}: no reply in 30 s"));
        println!("{path}, {} bytes: grpc-status {status:?}", body.len());
        assert!(status.is_some(), "{path}: no grpc-status");
        assert_ne!(status.as_deref(), Some("8"), "{path}: refused for room");
    }
}

/// One call through `client`, its request sent within the windows (h2 waits for capacity):
/// the reply's grpc-status, from its trailers or a trailers-only head.
pub async fn h2_call(
    client: h2::client::SendRequest<bytes::Bytes>,
    path: &str,
    mut body: bytes::Bytes,
) -> Option<String> {
    let mut client = client.ready().await.ok()?;
    let request = http::Request::post(format!("http://gateway{path}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .unwrap();
    let (reply, mut send) = client.send_request(request, false).ok()?;
    while !body.is_empty() {
        send.reserve_capacity(body.len());
        let capacity = std::future::poll_fn(|cx| send.poll_capacity(cx))
            .await?
            .ok()?;
        let piece = body.split_to(capacity.min(body.len()));
        send.send_data(piece, body.is_empty()).ok()?;
    }
    let reply = reply.await.ok()?;
    if let Some(s) = reply.headers().get("grpc-status") {
        return Some(s.to_str().ok()?.to_string());
    }
    let mut body = reply.into_body();
    while let Some(data) = body.data().await {
        let data = data.ok()?;
        let _ = body.flow_control().release_capacity(data.len());
    }
    let trailers = body.trailers().await.ok()??;
    Some(trailers.get("grpc-status")?.to_str().ok()?.to_string())
}

/// Peak resident memory (VmHWM) of process `pid`, in KiB.
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .expect("VmHWM");
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Clients that ignore flow control altogether — 40 connections at once, each sending five
/// unfinished 3 MiB requests the gateway answers itself (15 MiB, under the 16 MiB a
/// connection's calls may hold) without waiting for window — make the gateway hold no more
/// than its budget (32 MiB here) and the window each connection was granted: past it, the
/// connection ends with GOAWAY FLOW_CONTROL_ERROR. Peak resident memory, spliced front.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_ignoring_flow_control_hold_no_more_than_they_were_granted() {
    const CONNECTIONS: usize = 40;
    const BUDGET_MIB: u64 = 32;
    /// Per connection: the plugin's 1 MiB connection window, and the connection's buffers.
    const PER_CONNECTION_MIB: u64 = 2;
    let backend = Backend::start(Options::new("v1")).await;
    let dir = tempfile::tempdir().unwrap();
    let flag = config(
        dir.path(),
        &format!("max_buffered_bytes = {}", BUDGET_MIB << 20),
    );
    let gw = Gateway::start(&backend.socket, "v0.1", &[&flag]).await;
    let mut p = Peer::connect(&gw.socket).await;
    p.call(1, &request_block(&[], PROBE, &[]), &[]).await;
    assert_eq!(p.reply(1).await.get("grpc-status"), Some("0"));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = peak_rss_kib(gw.pid());

    let mut out = Vec::new();
    for stream in [1, 3, 5, 7, 9] {
        out.extend_from_slice(&unfinished(stream, CREATE_V03, 3_500_000, 3 << 20));
    }
    let out = std::sync::Arc::new(out);
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..CONNECTIONS {
        let (socket, out) = (gw.socket.clone(), out.clone());
        tasks.spawn(async move {
            let mut p = Peer::connect(&socket).await;
            p.send(&out).await;
            let g = tokio::time::timeout(Duration::from_secs(20), p.goaway()).await;
            g.ok().flatten().map(|g| g.code())
        });
    }
    let mut codes = Vec::new();
    while let Some(code) = tasks.join_next().await {
        codes.push(code.unwrap());
    }
    let peak = peak_rss_kib(gw.pid());
    let grown = peak.saturating_sub(before) / 1024;
    let refused = codes
        .iter()
        .filter(|c| **c == Some(FLOW_CONTROL_ERROR))
        .count();
    println!(
        "{CONNECTIONS} connections x 15 MiB sent past their windows, budget {BUDGET_MIB} MiB: peak VmHWM {before} KiB -> {peak} KiB (+{grown} MiB); {refused} got GOAWAY FLOW_CONTROL_ERROR"
    );
    assert_eq!(refused, CONNECTIONS, "{codes:?}");
    assert!(
        grown < BUDGET_MIB + CONNECTIONS as u64 * PER_CONNECTION_MIB,
        "+{grown} MiB"
    );
    // Served all the same.
    let mut q = Peer::connect(&gw.socket).await;
    q.call(1, &request_block(&[], PROBE, &[]), &[]).await;
    assert_eq!(q.reply(1).await.get("grpc-status"), Some("0"));
}

/// The gateway's own services (reflection, whose requests may be 64 KiB): once a connection's
/// streams hold 8 MiB of unfinished requests, the gateway grants it no more window, as for the
/// calls it answers itself; a client that sends 200 unfinished 60 KB requests (12 MB) all the
/// same gets GOAWAY FLOW_CONTROL_ERROR.
#[tokio::test]
async fn service_calls_past_the_withheld_window() {
    let backend = Backend::start(Options::new("v1")).await;
    let gw = Gateway::start(&backend.socket, "v0.1", &[]).await;
    let mut p = Peer::connect(&gw.socket).await;
    let mut out = Vec::new();
    for i in 0..200 {
        out.extend_from_slice(&unfinished(1 + 2 * i, REFLECTION, 65_000, 60_000));
    }
    p.send(&out).await;
    let g = tokio::time::timeout(Duration::from_secs(20), p.goaway()).await;
    let code = g.ok().flatten().map(|g| g.code());
    println!("reflection: 200 x 60 KB sent past the window: GOAWAY code {code:?}");
    let other: Vec<_> = p.seen.iter().filter(|f| f.kind != WINDOW_UPDATE).collect();
    assert_eq!(code, Some(FLOW_CONTROL_ERROR), "{other:?}");
}

/// Resident memory once it has stopped growing: sampled every 500 ms until two samples in a
/// row differ by less than 1 MiB (or 30 s passed).
async fn settled_rss_kib(pid: u32) -> u64 {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let mut last = support::rss_kib(pid);
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = support::rss_kib(pid);
        if now.abs_diff(last) < 1024 || std::time::Instant::now() > deadline {
            return now;
        }
        last = now;
    }
}

/// Requests to the gateway's own services are in the global budget: 40 connections, each with
/// 50 reflection streams holding 60 KB of a message that declares 65,000 bytes and never ends
/// (a client that obeys flow control, h2's), make the gateway hold about `max_buffered_bytes`
/// (the least allowed here, 8 MiB) and the window each connection had from the start (the
/// plugin's 1 MiB), not all 120 MB. The gateway answers other calls meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_requests_are_held_within_the_budget() {
    const CONNECTIONS: usize = 40;
    const STREAMS: usize = 50;
    const BUDGET_MIB: u64 = 8;
    /// Per connection: the plugin's 1 MiB connection window.
    const PER_CONNECTION_KIB: u64 = 1024;
    /// Per stream: the service's task, channels and decoder, and the stream's own state.
    const PER_STREAM_KIB: u64 = 24;
    let backend = Backend::start(Options::new("v1")).await;
    let dir = tempfile::tempdir().unwrap();
    let flag = config(dir.path(), "max_buffered_bytes = 8388618");
    let gw = Gateway::start(&backend.socket, "v0.1", &[&flag]).await;
    let mut p = Peer::connect(&gw.socket).await;
    p.call(1, &request_block(&[], PROBE, &[]), &[]).await;
    assert_eq!(p.reply(1).await.get("grpc-status"), Some("0"));
    let before = settled_rss_kib(gw.pid()).await;

    let mut body = vec![0];
    body.extend_from_slice(&65_000u32.to_be_bytes());
    body.resize(60_000, 0x0a);
    let body = bytes::Bytes::from(body);
    let mut held = Vec::new();
    for _ in 0..CONNECTIONS {
        let io = tokio::net::UnixStream::connect(&gw.socket).await.unwrap();
        let (client, connection) = h2::client::handshake(io).await.unwrap();
        let driver = tokio::spawn(async move {
            let _ = connection.await;
        });
        let mut client = client.ready().await.unwrap();
        let mut streams = Vec::new();
        for _ in 0..STREAMS {
            let request = http::Request::post(format!("http://gateway{REFLECTION}"))
                .header("content-type", "application/grpc")
                .header("te", "trailers")
                .body(())
                .unwrap();
            let (reply, mut send) = client.send_request(request, false).unwrap();
            // Buffered by h2, sent as the gateway's windows allow.
            send.send_data(body.clone(), false).unwrap();
            streams.push((reply, send));
            client = client.ready().await.unwrap();
        }
        held.push((client, streams, driver));
    }
    let during = settled_rss_kib(gw.pid()).await;
    let grown = during.saturating_sub(before) / 1024;
    println!(
        "{CONNECTIONS} connections x {STREAMS} reflection streams x 60 KB unfinished, budget {BUDGET_MIB} MiB: VmRSS {before} KiB -> {during} KiB (+{grown} MiB)"
    );
    let mut q = Peer::connect(&gw.socket).await;
    q.call(1, &request_block(&[], PROBE, &[]), &[]).await;
    assert_eq!(q.reply(1).await.get("grpc-status"), Some("0"));
    let each = PER_CONNECTION_KIB + STREAMS as u64 * PER_STREAM_KIB;
    assert!(
        grown < BUDGET_MIB + CONNECTIONS as u64 * each / 1024,
        "+{grown} MiB"
    );
    for (.., driver) in &held {
        driver.abort();
    }
}

/// Makes `count` volumes on the plugin, so that a ListVolumes reply is large.
async fn volumes(backend: &Backend, count: usize) -> usize {
    use csi_gateway::dialect::proto::v1;
    use prost::Message;
    let controller = v1::controller_client::ControllerClient::new(backend.channel().await);
    for batch in (0..count).collect::<Vec<_>>().chunks(50) {
        let calls = batch.iter().map(|i| {
            let mut controller = controller.clone();
            async move {
                controller
                    .create_volume(v1::CreateVolumeRequest {
                        name: format!("a-volume-whose-name-is-long-enough-to-count-{i:06}"),
                        volume_capabilities: vec![support::front::cap_v1()],
                        capacity_range: Some(v1::CapacityRange {
                            required_bytes: 1 << 20,
                            limit_bytes: 0,
                        }),
                        ..Default::default()
                    })
                    .await
                    .unwrap();
            }
        });
        futures_util::future::join_all(calls).await;
    }
    let mut controller = controller.clone();
    let all = controller
        .list_volumes(v1::ListVolumesRequest::default())
        .await
        .unwrap()
        .into_inner();
    assert_eq!(all.entries.len(), count);
    all.encoded_len()
}

/// Replies the gateway holds for clients that do not read them are in the global budget:
/// 20 connections make 120 translated ListVolumes calls each (v0.3 on a v1 plugin with 1,000
/// volumes: ~50 KB a reply, 120 MB in all), granting 1 GiB windows and never reading. With `max_buffered_bytes` at
/// 32 MiB the gateway stops taking the plugin's replies once the budget is used (they wait in
/// the plugin, paced by flow control) and stops granting request window: its memory grows by
/// about the budget, not by every reply.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replies_a_client_does_not_read_are_held_within_the_budget() {
    const CONNECTIONS: usize = 20;
    const CALLS: u32 = 120;
    const BUDGET_MIB: u64 = 32;
    /// Per connection, past the budget: what it read of the plugin's replies before it paused
    /// (a read's worth, and a reply being translated), the 256 KiB written to a client that
    /// does not read, and the allocator's slack.
    const PER_CONNECTION_KIB: u64 = 1536;
    let backend = Backend::start(Options::new("v1")).await;
    let size = volumes(&backend, 1_000).await;
    let dir = tempfile::tempdir().unwrap();
    let flag = config(
        dir.path(),
        &format!("max_buffered_bytes = {}", BUDGET_MIB << 20),
    );
    let gw = Gateway::start(&backend.socket, "v0.1", &[&flag]).await;
    let mut p = Peer::connect(&gw.socket).await;
    p.call(1, &request_block(&[], PROBE, &[]), &[]).await;
    assert_eq!(p.reply(1).await.get("grpc-status"), Some("0"));
    let before = settled_rss_kib(gw.pid()).await;

    let mut held = Vec::new();
    for _ in 0..CONNECTIONS {
        let mut p = Peer::connect(&gw.socket).await;
        p.send(&list_volumes_calls(V0_3_LIST, CALLS, &[])).await;
        held.push(p);
    }
    // The plugin takes a while over 2,400 ListVolumes of 1,000 volumes (its debug build).
    tokio::time::sleep(Duration::from_secs(25)).await;
    let during = settled_rss_kib(gw.pid()).await;
    let grown = during.saturating_sub(before) / 1024;
    let asked = CONNECTIONS as u64 * CALLS as u64 * size as u64 / (1 << 20);
    println!(
        "{CONNECTIONS} connections x {CALLS} ListVolumes replies of {size} bytes ({asked} MiB) never read, budget {BUDGET_MIB} MiB: VmRSS {before} KiB -> {during} KiB (+{grown} MiB)"
    );
    // A client that reads is served meanwhile: relayed, and translated.
    let mut q = Peer::connect(&gw.socket).await;
    q.call(1, &request_block(&[], PROBE, &[]), &[]).await;
    assert_eq!(q.reply(1).await.get("grpc-status"), Some("0"));
    let block = request_block(&[], V0_3_LIST, &[]);
    q.send(&frame(WINDOW_UPDATE, 0, 0, &(1u32 << 30).to_be_bytes()))
        .await;
    q.send(&settings(&[(0x4, 1 << 30)])).await;
    q.call(3, &block, &[]).await;
    let r = q.reply(3).await;
    assert_eq!(r.get("grpc-status"), Some("0"), "{:?}", r.fields);
    assert!(
        r.data.len() > size / 2,
        "a ListVolumes reply of {}",
        r.data.len()
    );
    assert!(
        grown < BUDGET_MIB + CONNECTIONS as u64 * PER_CONNECTION_KIB / 1024,
        "+{grown} MiB"
    );
    drop(held);
}

/// The least `max_buffered_bytes` allowed (`CONNECTION_BUFFERED`): two 4 MiB messages.
const LEAST_BUDGET: usize = 2 * ((4 << 20) + 5);

const V1_LIST: &str = "/csi.v1.Controller/ListVolumes";
const V0_3_LIST: &str = "/csi.v0.Controller/ListVolumes";

/// `count` ListVolumes calls to `path` on streams 1, 3, 5…, from a client granting 1 GiB
/// windows (the gateway may send it all) that it then does not read.
fn list_volumes_calls(path: &str, count: u32, extra: &[(&str, &str)]) -> Vec<u8> {
    let mut out = settings(&[(0x4, 1 << 30)]);
    out.extend_from_slice(&frame(WINDOW_UPDATE, 0, 0, &(1u32 << 30).to_be_bytes()));
    let block = request_block(&[], path, extra);
    for i in 0..count {
        out.extend_from_slice(&frame(HEADERS, END_HEADERS, 1 + 2 * i, &block));
        out.extend_from_slice(&frame(DATA, END_STREAM, 1 + 2 * i, &message(&[])));
    }
    out
}

/// Replies of the calls the gateway answers itself are made only within the budget: 20
/// unattached connections make 120 ListVolumes calls each (1,000 volumes: ~50 KB a reply,
/// 120 MB in all) and read none of it, with `max_buffered_bytes` at its least (8 MiB). A call
/// starts only once the budget has room for its reply (4 MiB, exchanged for the reply's size
/// once made); the others wait, and past `BUDGET_WAIT` are refused RESOURCE_EXHAUSTED. The
/// gateway's memory grows by about the budget and what each connection's socket and buffer
/// take (+137 MiB before, measured on c1bf634). Then the clients read: every call got its reply or
/// RESOURCE_EXHAUSTED, none is lost; and once they are gone the budget is whole again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replies_of_calls_the_gateway_answers_are_held_within_the_budget() {
    const CONNECTIONS: usize = 20;
    const CALLS: u32 = 120;
    const BUDGET_MIB: u64 = 8;
    /// Per connection: the 256 KiB written ahead to a client that does not read, what is on
    /// its way out, and the allocator's slack.
    const PER_CONNECTION_KIB: u64 = 768;
    let backend = Backend::start(Options::new("v1")).await;
    let size = volumes(&backend, 1_000).await;
    let dir = tempfile::tempdir().unwrap();
    let flag = config(dir.path(), &format!("max_buffered_bytes = {LEAST_BUDGET}"));
    let gw = Gateway::start_unattached(&backend.socket, "v0.1", &[&flag]).await;
    let mut p = Peer::connect(&gw.socket).await;
    p.call(1, &request_block(&[], PROBE, &[]), &[]).await;
    assert_eq!(p.reply(1).await.get("grpc-status"), Some("0"));
    let before = settled_rss_kib(gw.pid()).await;

    let calls = list_volumes_calls(V1_LIST, CALLS, &[]);
    let mut held = Vec::new();
    for _ in 0..CONNECTIONS {
        let mut p = Peer::connect(&gw.socket).await;
        p.send(&calls).await;
        held.push(p);
    }
    // Past BUDGET_WAIT every call has been made or refused.
    tokio::time::sleep(Duration::from_secs(15)).await;
    let during = settled_rss_kib(gw.pid()).await;
    let grown = during.saturating_sub(before) / 1024;
    let asked = CONNECTIONS as u64 * CALLS as u64 * size as u64 / (1 << 20);
    println!(
        "{CONNECTIONS} unattached connections x {CALLS} ListVolumes replies of {size} bytes ({asked} MiB) never read, budget {BUDGET_MIB} MiB: VmRSS {before} KiB -> {during} KiB (+{grown} MiB)"
    );

    let streams: Vec<u32> = (0..CALLS).map(|i| 1 + 2 * i).collect();
    let (mut ok, mut exhausted, mut other) = (0, 0, Vec::new());
    for p in &mut held {
        for (id, r) in p.replies(&streams).await {
            match r.get("grpc-status") {
                Some("0") if r.data.len() > size / 2 => ok += 1,
                Some("8") => exhausted += 1,
                status => other.push((id, status.map(str::to_string), r.reset)),
            }
        }
    }
    println!("then read: {ok} replies, {exhausted} RESOURCE_EXHAUSTED, {other:?} else");
    assert!(other.is_empty(), "{other:?}");
    assert_eq!(ok + exhausted, CONNECTIONS * CALLS as usize);
    assert!(ok >= 60, "the budget holds some 80 replies: {ok} made");
    assert!(
        grown < BUDGET_MIB + CONNECTIONS as u64 * PER_CONNECTION_KIB / 1024,
        "+{grown} MiB"
    );

    // Every reservation was given back: two calls need the whole budget (2 x 4 MiB).
    drop(held);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut q = Peer::connect(&gw.socket).await;
    q.send(&list_volumes_calls(V1_LIST, 2, &[])).await;
    let began = std::time::Instant::now();
    let replies = q.replies(&[1, 3]).await;
    for r in replies.values() {
        assert_eq!(r.get("grpc-status"), Some("0"), "{:?}", r.fields);
    }
    assert!(
        began.elapsed() < Duration::from_secs(5),
        "{:?}",
        began.elapsed()
    );
}

/// A reflection request asking for `csi.v1.Controller`'s file: the v1 spec's descriptor and
/// its dependencies', some 20 KB.
fn large_reflection_ask() -> Vec<u8> {
    let symbol = b"csi.v1.Controller";
    let mut request = vec![0x22, symbol.len() as u8];
    request.extend_from_slice(symbol);
    message(&request)
}

/// Replies of the gateway's own services are made only within the budget: 10 connections open
/// 1,000 reflection streams each, every one asking for a ~20 KB descriptor, and read none of
/// it (a 1 KiB stream window), with `max_buffered_bytes` at 8 MiB. A service is given a request
/// only once there is room for its reply (64 KiB, exchanged for its size): the gateway holds
/// about the budget of replies and each stream's own state, not 10,000 replies (+260 MiB
/// before, measured on c1bf634). Streams that found no room within `BUDGET_WAIT` end RESOURCE_EXHAUSTED; once the
/// clients are gone a reflection stream is served at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_replies_are_held_within_the_budget() {
    const CONNECTIONS: usize = 10;
    const STREAMS: u32 = 1000;
    const BUDGET_MIB: u64 = 8;
    /// Per stream: its entry, the service's task and channels, its HEADERS written ahead.
    const PER_STREAM_KIB: u64 = 8;
    let backend = Backend::start(Options::new("v1")).await;
    let dir = tempfile::tempdir().unwrap();
    let flag = config(dir.path(), &format!("max_buffered_bytes = {LEAST_BUDGET}"));
    let gw = Gateway::start(&backend.socket, "v0.1", &[&flag]).await;
    let block = request_block(&[], REFLECTION, &[]);
    let ask = large_reflection_ask();
    let mut p = Peer::connect(&gw.socket).await;
    p.call(1, &block, &ask[5..]).await;
    let r = p.reply(1).await;
    assert_eq!(r.get("grpc-status"), Some("0"));
    let size = r.data.len();
    assert!(size > 10_000, "{size}");
    let before = settled_rss_kib(gw.pid()).await;

    let mut out = Vec::new();
    for s in 0..STREAMS {
        out.extend_from_slice(&frame(HEADERS, END_HEADERS, 1 + 2 * s, &block));
        out.extend_from_slice(&frame(DATA, END_STREAM, 1 + 2 * s, &ask));
    }
    let mut held = Vec::new();
    for _ in 0..CONNECTIONS {
        let mut p = Peer::open(&gw.socket, &[(0x4, 1024)]).await;
        p.expect(|f| f.kind == SETTINGS && f.flags & ACK == 0).await;
        p.send(&frame(SETTINGS, ACK, 0, &[])).await;
        p.send(&out).await;
        held.push(p);
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let during = settled_rss_kib(gw.pid()).await;
    let grown = during.saturating_sub(before) / 1024;
    let streams = CONNECTIONS as u64 * STREAMS as u64;
    println!(
        "{CONNECTIONS} connections x {STREAMS} reflection streams asking {size} bytes, never read, budget {BUDGET_MIB} MiB: VmRSS {before} KiB -> {during} KiB (+{grown} MiB)"
    );
    assert!(
        grown < BUDGET_MIB + streams * PER_STREAM_KIB / 1024,
        "+{grown} MiB"
    );

    drop(held);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut q = Peer::connect(&gw.socket).await;
    let began = std::time::Instant::now();
    q.call(1, &block, &ask[5..]).await;
    let r = q.reply(1).await;
    assert_eq!(r.get("grpc-status"), Some("0"), "{:?}", r.fields);
    assert_eq!(r.data.len(), size);
    assert!(
        began.elapsed() < Duration::from_secs(2),
        "{:?}",
        began.elapsed()
    );
}

/// A call whose reply finds no room waits `BUDGET_WAIT` (10 s) at most: one client holds the
/// 8 MiB budget with replies it does not read (a stream window of 0), and another that does
/// not read either has its calls refused RESOURCE_EXHAUSTED after that long — or
/// DEADLINE_EXCEEDED at its `grpc-timeout`, if that comes first. A client that reads is served
/// meanwhile (a connection holding nothing may run one call without room), and once the first
/// two read, they have every reply they were answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replies_paused_too_long_make_room() {
    const CALLS: u32 = 120;
    let backend = Backend::start(Options::new("v1")).await;
    let size = volumes(&backend, 1_000).await;
    let dir = tempfile::tempdir().unwrap();
    let flag = config(dir.path(), &format!("max_buffered_bytes = {LEAST_BUDGET}"));
    let gw = Gateway::start_unattached(&backend.socket, "v0.1", &[&flag]).await;

    let mut hoarder = Peer::open(&gw.socket, &[(0x4, 0)]).await;
    hoarder
        .expect(|f| f.kind == SETTINGS && f.flags & ACK == 0)
        .await;
    hoarder.send(&frame(SETTINGS, ACK, 0, &[])).await;
    let block = request_block(&[], "/csi.v1.Controller/ListVolumes", &[]);
    let mut out = Vec::new();
    for i in 0..CALLS {
        out.extend_from_slice(&frame(HEADERS, END_HEADERS, 1 + 2 * i, &block));
        out.extend_from_slice(&frame(DATA, END_STREAM, 1 + 2 * i, &message(&[])));
    }
    hoarder.send(&out).await;
    // Time for the hoarder's calls to fill the budget (one at a time, some 40 ms each).
    tokio::time::sleep(Duration::from_secs(7)).await;

    // Another client that does not read either: its first call runs all the same (a
    // connection holding nothing may run one call without room), its reply held; its next
    // calls wait for room.
    let mut other = Peer::open(&gw.socket, &[(0x4, 0)]).await;
    other
        .expect(|f| f.kind == SETTINGS && f.flags & ACK == 0)
        .await;
    other.send(&frame(SETTINGS, ACK, 0, &[])).await;
    other.call(1, &block, &[]).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let timed = request_block(
        &[],
        "/csi.v1.Controller/ListVolumes",
        &[("grpc-timeout", "2S")],
    );
    other.call(3, &timed, &[]).await;
    other.call(5, &block, &[]).await;
    let began = std::time::Instant::now();
    let r = other.reply(3).await;
    let deadline_after = began.elapsed();
    assert_eq!(r.get("grpc-status"), Some("4"), "{:?}", r.fields);
    // A client that reads is served meanwhile.
    let mut reader = Peer::connect(&gw.socket).await;
    reader.send(&list_volumes_calls(V1_LIST, 1, &[])).await;
    let r = reader.reply(1).await;
    assert_eq!(r.get("grpc-status"), Some("0"), "{:?}", r.fields);
    assert!(r.data.len() > size / 2, "{}", r.data.len());
    let r = other.reply(5).await;
    let refused_after = began.elapsed();
    println!(
        "budget held by unread replies: DEADLINE_EXCEEDED after {deadline_after:?} (grpc-timeout 2 s), RESOURCE_EXHAUSTED after {refused_after:?}: {:?}",
        r.get("grpc-message")
    );
    assert_eq!(r.get("grpc-status"), Some("8"), "{:?}", r.fields);
    assert!(
        deadline_after < Duration::from_secs(4),
        "{deadline_after:?}"
    );
    assert!(
        refused_after > Duration::from_secs(9) && refused_after < Duration::from_secs(15),
        "{refused_after:?}"
    );

    // The hoarder reads: its replies were only waiting.
    let mut grant = Vec::new();
    for i in 0..CALLS {
        grant.extend_from_slice(&frame(
            WINDOW_UPDATE,
            0,
            1 + 2 * i,
            &(1u32 << 30).to_be_bytes(),
        ));
    }
    grant.extend_from_slice(&frame(WINDOW_UPDATE, 0, 0, &(1u32 << 30).to_be_bytes()));
    hoarder.send(&grant).await;
    let streams: Vec<u32> = (0..CALLS).map(|i| 1 + 2 * i).collect();
    let replies = hoarder.replies(&streams).await;
    let ok = replies
        .values()
        .filter(|r| r.get("grpc-status") == Some("0") && r.data.len() > size / 2)
        .count();
    let exhausted = replies
        .values()
        .filter(|r| r.get("grpc-status") == Some("8"))
        .count();
    println!("the hoarder reads: {ok} replies, {exhausted} RESOURCE_EXHAUSTED");
    assert_eq!(ok + exhausted, CALLS as usize);
    assert!(ok >= 60 && exhausted > 0, "{ok} {exhausted}");

    // The other reads too: its first reply was only waiting.
    let mut grant = frame(WINDOW_UPDATE, 0, 0, &(1u32 << 30).to_be_bytes());
    grant.extend_from_slice(&frame(WINDOW_UPDATE, 0, 1, &(1u32 << 30).to_be_bytes()));
    other.send(&grant).await;
    let r = other.reply(1).await;
    assert_eq!(r.get("grpc-status"), Some("0"), "{:?}", r.fields);
    assert!(r.data.len() > size / 2, "{}", r.data.len());
}
