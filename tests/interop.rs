//! Interop: gRPC client stacks written elsewhere, against the built binaries on every path a call
//! can take — spliced, translated, unattached (no upstream connection of its own), bridged over mutual TLS,
//! accepted while the plugin is down — and directly against the reference backend in every
//! dialect. The clients:
//! - gRPC C-core, through Python's `grpcio` (`tests/interop/grpcio_call.py`): with its default
//!   `:authority` for a `unix:` target (checked below to be the percent-encoded socket path), and
//!   with the raw path, `unix:///…` and `localhost` instead;
//! - nghttp2: `h2load` on the UNIX socket with the same authorities, and `nghttp` (TCP only,
//!   through a loopback relay to the socket; it refuses to send an authority that is not one);
//! - tonic (hyper, h2): the generated clients of every dialect;
//! - a raw HTTP/2 client written here, for what no library sends: no `:authority` at all, or an
//!   empty one.
//!
//! Every call asserts a real reply: the plugin's name from GetPluginInfo, decoded in the path's
//! front dialect (and, by C-core, Probe's readiness where the dialect has Probe). Each tool must
//! be installed (`.ci/setup` installs them): a missing one fails.

use csi_gateway_test_support as support;
use csi_gateway_test_support::bridge as bridge_support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use csi_gateway::dialect::proto::{v0_1, v0_1_oneof as draft, v0_3, v1};
use csi_gateway::dialect::Dialect;
use csi_gateway::grpc::frame;
use csi_gateway::tls::gencerts::Leaf;
use prost::Message;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, UnixListener, UnixStream};

use support::{gateway::Gateway, Backend, Options};

/// The reference backend's name, which every GetPluginInfo must bring back.
const NAME: &str = "reference.csi-gateway.dev";

/// `tests/interop/grpcio_call.py`.
fn grpcio_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop/grpcio_call.py")
}

/// The `:authority` values gRPC clients send on a UNIX socket, by name; `None` leaves the
/// client's own default.
fn authorities(socket: &Path) -> Vec<(&'static str, Option<String>)> {
    let path = socket.display().to_string();
    vec![
        ("the client's default", None),
        ("the socket path", Some(path.clone())),
        ("the percent-encoded path", Some(path.replace('/', "%2F"))),
        ("unix:///path", Some(format!("unix://{path}"))),
        ("localhost", Some("localhost".into())),
    ]
}

// ---- GetPluginInfo in every dialect ----

fn info_path(dialect: Dialect) -> &'static str {
    match dialect {
        Dialect::V1 => "/csi.v1.Identity/GetPluginInfo",
        Dialect::V0_3 => "/csi.v0.Identity/GetPluginInfo",
        Dialect::V0_1 | Dialect::V0_1Oneof => "/csi.Identity/GetPluginInfo",
    }
}

fn info_request(dialect: Dialect) -> Vec<u8> {
    match dialect {
        Dialect::V1 | Dialect::V0_3 => Vec::new(),
        Dialect::V0_1 => v0_1::GetPluginInfoRequest {
            version: Some(v0_1::Version {
                major: 0,
                minor: 1,
                patch: 0,
            }),
        }
        .encode_to_vec(),
        Dialect::V0_1Oneof => draft::GetPluginInfoRequest {
            version: Some(draft::Version {
                major: 0,
                minor: 1,
                patch: 0,
            }),
        }
        .encode_to_vec(),
    }
}

/// The plugin name in a GetPluginInfo reply of `dialect`.
fn info_name(dialect: Dialect, reply: &[u8]) -> Result<String, String> {
    let bad = |e: prost::DecodeError| format!("undecodable reply: {e}");
    Ok(match dialect {
        Dialect::V1 => v1::GetPluginInfoResponse::decode(reply).map_err(bad)?.name,
        Dialect::V0_3 => {
            v0_3::GetPluginInfoResponse::decode(reply)
                .map_err(bad)?
                .name
        }
        Dialect::V0_1 => {
            v0_1::GetPluginInfoResponse::decode(reply)
                .map_err(bad)?
                .name
        }
        Dialect::V0_1Oneof => {
            use draft::get_plugin_info_response::Reply;
            match draft::GetPluginInfoResponse::decode(reply)
                .map_err(bad)?
                .reply
            {
                Some(Reply::Result(r)) => r.name,
                other => return Err(format!("draft reply without a result: {other:?}")),
            }
        }
    })
}

// ---- the clients ----

/// What a C-core call came back with.
#[derive(Debug, serde::Deserialize)]
struct Grpcio {
    ok: bool,
    reply: Option<String>,
    code: Option<String>,
    details: Option<String>,
}

/// One GetPluginInfo by gRPC C-core (Python `grpcio`).
async fn grpcio(socket: &Path, dialect: Dialect, authority: Option<&str>) -> Grpcio {
    let (path, request) = (info_path(dialect), info_request(dialect));
    grpcio_call(socket, path, &request, authority).await
}

/// One unary call by gRPC C-core (Python `grpcio`), with raw protobuf bytes.
async fn grpcio_call(socket: &Path, path: &str, request: &[u8], authority: Option<&str>) -> Grpcio {
    let mut cmd = tokio::process::Command::new("python3");
    cmd.arg(grpcio_script())
        .arg(format!("unix:{}", socket.display()))
        .arg(path)
        .arg(hex(request));
    cmd.args(authority);
    grpcio_output(cmd, 60).await
}

/// The JSON line a grpcio script printed.
async fn grpcio_output<T: serde::de::DeserializeOwned>(
    mut cmd: tokio::process::Command,
    timeout_secs: u64,
) -> T {
    support::deps::GRPCIO.check();
    let out = tokio::time::timeout(Duration::from_secs(timeout_secs), cmd.output())
        .await
        .expect("the grpcio client timed out")
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the grpcio client failed (is grpcio at the pinned version? .ci/setup installs it): {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

/// Probe by gRPC C-core, in the dialects that have it (v1, v0.3): whether the plugin is ready
/// (an absent `ready` means ready).
async fn grpcio_probe(socket: &Path, dialect: Dialect) -> Option<Result<bool, String>> {
    let path = match dialect {
        Dialect::V1 => "/csi.v1.Identity/Probe",
        Dialect::V0_3 => "/csi.v0.Identity/Probe",
        Dialect::V0_1 | Dialect::V0_1Oneof => return None,
    };
    let r = grpcio_call(socket, path, &[], None).await;
    let (true, Some(reply)) = (r.ok, r.reply) else {
        return Some(Err(format!("{:?}: {:?}", r.code, r.details)));
    };
    let bad = |e: prost::DecodeError| format!("undecodable Probe reply: {e}");
    let ready = match dialect {
        Dialect::V1 => v1::ProbeResponse::decode(unhex(&reply).as_slice()).map(|p| p.ready),
        _ => v0_3::ProbeResponse::decode(unhex(&reply).as_slice()).map(|p| p.ready),
    };
    Some(ready.map(|r| r != Some(false)).map_err(bad))
}

async fn grpcio_name(
    socket: &Path,
    dialect: Dialect,
    authority: Option<&str>,
) -> Result<String, String> {
    let r = grpcio(socket, dialect, authority).await;
    match (r.ok, r.reply) {
        (true, Some(reply)) => info_name(dialect, &unhex(&reply)),
        _ => Err(format!("{:?}: {:?}", r.code, r.details)),
    }
}

/// `h2load` makes `CALLS` GetPluginInfo calls on the UNIX socket, sending `authority`. It sees
/// only HTTP statuses: every call must succeed with a 2xx.
async fn h2load(socket: &Path, dialect: Dialect, authority: Option<&str>) -> Result<(), String> {
    const CALLS: usize = 8;
    let dir = tempfile::tempdir().unwrap();
    let body = dir.path().join("request");
    std::fs::write(&body, frame::encode(&info_request(dialect))).unwrap();
    let mut cmd = tokio::process::Command::new(h2load_binary());
    cmd.args(["-n", &CALLS.to_string(), "-c", "1", "-m", "4"])
        .args(["-H", "content-type: application/grpc", "-H", "te: trailers"])
        .arg("-d")
        .arg(&body)
        .arg(format!("--base-uri=unix:{}", socket.display()))
        .arg(format!("http://localhost{}", info_path(dialect)));
    if let Some(a) = authority {
        cmd.args(["-H", &format!(":authority: {a}")]);
    }
    let out = tokio::time::timeout(Duration::from_secs(60), cmd.output())
        .await
        .expect("h2load timed out")
        .expect("h2load runs");
    let text = String::from_utf8_lossy(&out.stdout);
    let done = format!("{CALLS} succeeded, 0 failed");
    let ok = format!("{CALLS} 2xx");
    if text.contains(&done) && text.contains(&ok) {
        Ok(())
    } else {
        Err(text
            .lines()
            .filter(|l| l.contains("requests:") || l.contains("status codes"))
            .collect::<Vec<_>>()
            .join("; "))
    }
}

fn h2load_binary() -> PathBuf {
    support::deps::H2LOAD.path()
}

/// One GetPluginInfo by `nghttp`, which speaks TCP only: through a loopback relay to the socket.
/// Its `:authority` is the relay's address.
async fn nghttp_name(socket: &Path, dialect: Dialect) -> Result<String, String> {
    let relay = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = relay.local_addr().unwrap().port();
    let target = socket.to_path_buf();
    let relaying = tokio::spawn(async move {
        while let Ok((mut tcp, _)) = relay.accept().await {
            let mut unix = UnixStream::connect(&target).await.unwrap();
            tokio::spawn(async move {
                let _ = tokio::io::copy_bidirectional(&mut tcp, &mut unix).await;
            });
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let body = dir.path().join("request");
    std::fs::write(&body, frame::encode(&info_request(dialect))).unwrap();
    let out = tokio::process::Command::new(support::deps::NGHTTP.path())
        .args(["-H", "content-type: application/grpc", "-H", "te: trailers"])
        .arg("-d")
        .arg(&body)
        .arg(format!("http://127.0.0.1:{port}{}", info_path(dialect)))
        .output();
    let out = tokio::time::timeout(Duration::from_secs(60), out)
        .await
        .expect("nghttp timed out")
        .expect("nghttp runs");
    relaying.abort();
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let message = frame::first_message(&out.stdout)
        .ok_or_else(|| format!("no gRPC message in {:?}", out.stdout))?;
    info_name(dialect, message)
}

/// One GetPluginInfo by tonic's generated client of `dialect` (`:authority` localhost).
async fn tonic_name(socket: &Path, dialect: Dialect) -> Result<String, String> {
    let front = support::front::Front::new(dialect, support::connect(socket).await);
    front.plugin_name().await.map_err(|f| format!("{f:?}"))
}

/// How a raw HTTP/2 call ended.
#[derive(Debug)]
enum Raw {
    /// The reply's DATA (empty for a trailers-only reply).
    Reply(Vec<u8>),
    /// RST_STREAM or GOAWAY with this error code (read in the failure message).
    #[allow(dead_code)]
    Refused(&'static str, u32),
}

/// One unary call on a fresh HTTP/2 connection over `io`, written byte by byte here, with
/// exactly the `:authority` given (`None`: the field is left out).
async fn raw_call<T>(mut io: T, authority: Option<&str>, path: &str, message: &[u8]) -> Raw
where
    T: AsyncRead + AsyncWrite + Unpin,
{
    let mut fields = vec![(":method", "POST"), (":scheme", "http"), (":path", path)];
    fields.extend(authority.map(|a| (":authority", a)));
    fields.extend([("content-type", "application/grpc"), ("te", "trailers")]);
    let mut block = Vec::new();
    for (name, value) in fields {
        block.push(0); // literal without indexing, new name (RFC 7541 §6.2.2)
        hpack_string(&mut block, name.as_bytes());
        hpack_string(&mut block, value.as_bytes());
    }
    let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    put_frame(&mut out, 0x4, 0, 0, &[]); // SETTINGS
    put_frame(&mut out, 0x1, 0x4, 1, &block); // HEADERS, END_HEADERS
    put_frame(&mut out, 0x0, 0x1, 1, &frame::encode(message)); // DATA, END_STREAM
    let exchange = async {
        io.write_all(&out).await.unwrap();
        let mut data = Vec::new();
        loop {
            let mut head = [0u8; 9];
            if io.read_exact(&mut head).await.is_err() {
                return Raw::Refused("connection closed", 0);
            }
            let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
            let (kind, flags) = (head[3], head[4]);
            let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
            let mut payload = vec![0u8; len];
            io.read_exact(&mut payload).await.unwrap();
            let end = flags & 0x1 != 0;
            match (kind, stream) {
                (0x0, 1) => {
                    data.extend_from_slice(&payload);
                    if end {
                        return Raw::Reply(data);
                    }
                }
                (0x1, 1) if end => return Raw::Reply(data),
                (0x3, 1) => return Raw::Refused("RST_STREAM", code(&payload[..4])),
                (0x4, 0) if flags & 0x1 == 0 => {
                    let mut ack = Vec::new();
                    put_frame(&mut ack, 0x4, 0x1, 0, &[]);
                    io.write_all(&ack).await.unwrap();
                }
                (0x7, 0) => return Raw::Refused("GOAWAY", code(&payload[4..8])),
                _ => {}
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(30), exchange)
        .await
        .expect("raw HTTP/2 call timed out")
}

fn code(b: &[u8]) -> u32 {
    u32::from_be_bytes(b.try_into().unwrap())
}

fn put_frame(out: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes()[1..]);
    out.extend_from_slice(&[kind, flags]);
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
}

/// A string literal, not Huffman-coded (RFC 7541 §5.2), its length a 7-bit-prefix integer.
fn hpack_string(out: &mut Vec<u8>, s: &[u8]) {
    let mut n = s.len();
    if n < 127 {
        out.push(n as u8);
    } else {
        out.push(127);
        n -= 127;
        while n >= 128 {
            out.push((n % 128) as u8 | 0x80);
            n /= 128;
        }
        out.push(n as u8);
    }
    out.extend_from_slice(s);
}

async fn raw_name(
    socket: &Path,
    dialect: Dialect,
    authority: Option<&str>,
) -> Result<String, String> {
    let io = UnixStream::connect(socket).await.unwrap();
    match raw_call(io, authority, info_path(dialect), &info_request(dialect)).await {
        Raw::Reply(data) => {
            let message = frame::first_message(&data)
                .ok_or_else(|| format!("reply without a gRPC message: {data:?}"))?;
            info_name(dialect, message)
        }
        other => Err(format!("{other:?}")),
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

// ---- every client, every authority ----

/// Every client, with every `:authority` it can be made to send, calls GetPluginInfo in
/// `dialect` on `socket` and must read the reference backend's name; `what` names the path.
async fn every_client(socket: &Path, dialect: Dialect, what: &str) {
    let mut failures = Vec::new();
    let mut expect = |client: String, got: Result<String, String>| match got {
        Ok(name) if name == NAME => {}
        other => failures.push(format!("{client}: {other:?}")),
    };
    for (label, authority) in authorities(socket) {
        let a = authority.as_deref();
        expect(
            format!("grpcio, {label}"),
            grpcio_name(socket, dialect, a).await,
        );
        let h2load = h2load(socket, dialect, a).await.map(|()| NAME.to_string());
        expect(format!("h2load, {label}"), h2load);
        if let Some(a) = a {
            expect(
                format!("raw HTTP/2, {label}"),
                raw_name(socket, dialect, Some(a)).await,
            );
        }
    }
    for (label, authority) in [("no :authority", None), ("an empty :authority", Some(""))] {
        expect(
            format!("raw HTTP/2, {label}"),
            raw_name(socket, dialect, authority).await,
        );
    }
    expect("nghttp".into(), nghttp_name(socket, dialect).await);
    expect("tonic".into(), tonic_name(socket, dialect).await);
    if let Some(ready) = grpcio_probe(socket, dialect).await {
        let ready = ready.map(|r| {
            if r {
                NAME.to_string()
            } else {
                "not ready".into()
            }
        });
        expect("grpcio, Probe".into(), ready);
    }
    assert!(
        failures.is_empty(),
        "{what}, {dialect} front:\n{}",
        failures.join("\n")
    );
}

// ---- the paths ----

/// The plugin's log names the `:authority` of every call it served (`crates/backend/src/rpclog.rs`):
/// behind a gateway, every GetPluginInfo came with `localhost`, whatever the client sent.
fn plugin_saw_only_localhost(backend: &Backend) {
    let log = backend.log_text();
    let calls: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("GetPluginInfo"))
        .collect();
    assert!(
        !calls.is_empty(),
        "the plugin logged no GetPluginInfo:\n{log}"
    );
    for line in calls {
        assert!(line.contains("authority=localhost "), "{line}");
    }
}

/// The clients against the reference backend itself (tonic's server, on the vendored h2), in
/// every dialect: it can stand in for a legacy driver in front of any of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reference_backend_serves_every_client_in_every_dialect() {
    for name in support::DIALECTS {
        let backend = Backend::start(Options::new(name)).await;
        let dialect: Dialect = name.parse().unwrap();
        every_client(&backend.socket, dialect, "reference backend").await;
    }
}

/// Same dialect on both sides, spliced (the default with a UNIX-socket upstream).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spliced_path_serves_every_client() {
    let backend = Backend::start(Options::new("v1")).await;
    let gw = Gateway::start(&backend.socket, "v0.1", &[]).await;
    every_client(&gw.socket, Dialect::V1, "spliced").await;
    assert!(
        gw.log_text().contains("client connection spliced"),
        "{}",
        gw.log_text()
    );
    plugin_saw_only_localhost(&backend);
    // Whatever the clients sent, the plugin (which logs nothing about authorities) was asked
    // with `localhost`: an unpatched tonic plugin would have reset the streams otherwise. The
    // splice's rewrite is covered by the wire crate's `headers` unit tests; here, the calls succeeded.
}

/// A front dialect the plugin does not speak: the splice answers the calls itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn translated_path_serves_every_client() {
    let backend = Backend::start(Options::new("v0.1-oneof")).await;
    let gw = Gateway::start(&backend.socket, "v0.1-oneof", &[]).await;
    every_client(&gw.socket, Dialect::V1, "translated").await;
    every_client(&gw.socket, Dialect::V0_3, "translated").await;
}

/// Unattached connections (no upstream connection of their own, their calls answered by the
/// gateway on its shared upstream connection): relayed and translated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unattached_connections_serve_every_client() {
    let backend = Backend::start(Options::new("v1")).await;
    let gw = Gateway::start_unattached(&backend.socket, "v0.1", &[]).await;
    every_client(&gw.socket, Dialect::V1, "unattached").await;
    every_client(&gw.socket, Dialect::V0_1, "unattached, translated").await;
    assert!(!gw.log_text().contains("client connection spliced"));
    plugin_saw_only_localhost(&backend);
}

/// node gateway (UNIX socket) → mutual TLS → appliance gateway → plugin: the node gateway's
/// connections are spliced onto TLS connections of their own; the appliance listener gets the
/// raw client's authorities over TLS too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bridged_path_serves_every_client() {
    use bridge_support::*;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let backend = Backend::start(Options::new("v1")).await;
    let pki = Pki::new(d, "interop");
    let (scert, skey) = pki.issue("server", &Leaf::server(&["localhost"]));
    let (ccert, ckey) = pki.issue("client", &Leaf::client(&["node-1.interop.test"], &[]));
    let port = free_port();
    let plugin = format!("unix://{}", backend.socket.display());
    let appliance = gateway(
        "appliance",
        d,
        &(front_section(&d.join("appliance.sock"), &plugin)
            + &appliance_section(port, &scert, &skey, &pki.ca_path, "")),
    );
    appliance.wait_log("appliance listening");
    let node = gateway(
        "node",
        d,
        &(front_section(&d.join("node.sock"), &format!("tcp://127.0.0.1:{port}"))
            + &upstream_tls_section(&ccert, &ckey, &pki.ca_path, "")),
    );
    node.wait_log("upstream connected");
    every_client(&d.join("node.sock"), Dialect::V1, "bridged").await;
    every_client(&d.join("node.sock"), Dialect::V0_3, "bridged, translated").await;

    let client = pki
        .ca
        .issue(&Leaf::client(&["node-1.interop.test"], &[]))
        .unwrap();
    let config = std::sync::Arc::new(client_config(&pki.ca.cert_pem, Some(&client)));
    let appliance_socket = d.join("appliance.sock").display().to_string();
    for authority in [
        None,
        Some(appliance_socket.as_str()),
        Some("unix:///x.sock"),
        Some(""),
    ] {
        let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .unwrap();
        let name = rustls_pki_types::ServerName::try_from("localhost").unwrap();
        let tls = tokio_rustls::TlsConnector::from(config.clone())
            .connect(name, tcp)
            .await
            .unwrap();
        let dialect = Dialect::V1;
        let got = raw_call(tls, authority, info_path(dialect), &info_request(dialect)).await;
        let Raw::Reply(data) = got else {
            panic!("appliance listener, {authority:?}: {got:?}");
        };
        let name = info_name(dialect, frame::first_message(&data).unwrap()).unwrap();
        assert_eq!(name, NAME, "appliance listener, {authority:?}");
    }
    plugin_saw_only_localhost(&backend);
}

/// Connections accepted while the plugin is down start unattached: every client
/// reads UNAVAILABLE naming the plugin (not a reset stream), and the same clients are served
/// once it is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_accepted_while_the_plugin_is_down_serve_every_client() {
    let mut backend = Backend::start(Options::new("v1")).await;
    let gw = Gateway::start(&backend.socket, "v0.1", &[]).await;
    backend.kill();
    // A call notices the loss; the gateway then reports the plugin down.
    let _ = tonic_name(&gw.socket, Dialect::V1).await;
    support::eventually(
        Duration::from_secs(20),
        "the gateway to see the plugin gone",
        || {
            gw.log_text().contains("reconnecting")
                || gw.log_text().contains("upstream connection lost")
        },
    )
    .await;
    for (label, authority) in authorities(&gw.socket) {
        let r = grpcio(&gw.socket, Dialect::V1, authority.as_deref()).await;
        assert_eq!(
            r.code.as_deref(),
            Some("UNAVAILABLE"),
            "grpcio, {label}: {r:?}"
        );
        let details = r.details.unwrap_or_default();
        assert!(details.contains("upstream"), "grpcio, {label}: {details}");
        if let Some(a) = authority.as_deref() {
            let io = UnixStream::connect(&gw.socket).await.unwrap();
            let path = info_path(Dialect::V1);
            let got = raw_call(io, Some(a), path, &[]).await;
            assert!(
                matches!(got, Raw::Reply(ref d) if d.is_empty()),
                "raw, {label}: {got:?}"
            );
        }
    }
    backend.restart(None).await;
    support::eventually(Duration::from_secs(20), "the gateway to reconnect", || {
        gw.log_text().matches("upstream connected").count() >= 2
    })
    .await;
    every_client(&gw.socket, Dialect::V1, "after the plugin came back").await;
    plugin_saw_only_localhost(&backend);
}

/// What gRPC C-core really sends as `:authority` for a `unix:` target, read off the wire by a
/// listener that decodes the first request's header block: not `localhost` but the socket path
/// (percent-encoded since C-core 1.57) — the value an unpatched h2 server resets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c_core_sends_the_socket_path_as_authority() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("wire.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    let reading = tokio::spawn(async move {
        let (mut io, _) = listener.accept().await.unwrap();
        let mut settings = Vec::new();
        put_frame(&mut settings, 0x4, 0, 0, &[]);
        io.write_all(&settings).await.unwrap();
        let mut preface = [0u8; 24];
        io.read_exact(&mut preface).await.unwrap();
        loop {
            let mut head = [0u8; 9];
            io.read_exact(&mut head).await.unwrap();
            let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
            let mut payload = vec![0u8; len];
            io.read_exact(&mut payload).await.unwrap();
            if head[3] == 0x1 {
                assert_eq!(head[4] & 0x28, 0, "no padding or priority expected");
                let fields = loona_hpack::Decoder::new().decode(&payload).unwrap();
                return fields
                    .into_iter()
                    .find(|(n, _)| n == b":authority")
                    .map(|(_, v)| String::from_utf8(v).unwrap());
            }
        }
    });
    let r = grpcio(&socket, Dialect::V1, None).await;
    assert!(!r.ok, "the listener answers nothing");
    let authority = tokio::time::timeout(Duration::from_secs(30), reading)
        .await
        .unwrap()
        .unwrap();
    // `unix:/tmp/x/wire.sock` is a URI whose path, less its leading `/`, C-core percent-encodes.
    let path = socket.display().to_string();
    let expected = path.trim_start_matches('/').replace('/', "%2F");
    assert_eq!(
        authority,
        Some(expected),
        "C-core's :authority for unix:{path}"
    );
}

/// `tests/interop/grpcio_calls.py`: `count` calls by C-core on one channel with this
/// `:authority`, cycling through `calls` (path, request); the replies in order.
async fn grpcio_calls(
    socket: &Path,
    authority: &str,
    count: usize,
    calls: &[(&str, Vec<u8>)],
) -> Vec<Vec<u8>> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/interop/grpcio_calls.py");
    let mut cmd = tokio::process::Command::new("python3");
    cmd.arg(script)
        .arg(format!("unix:{}", socket.display()))
        .arg(authority)
        .arg(count.to_string());
    cmd.args(
        calls
            .iter()
            .map(|(path, request)| format!("{path}={}", hex(request))),
    );
    let reply: serde_json::Value = grpcio_output(cmd, 120).await;
    assert_eq!(reply["ok"], true, "{reply}");
    let replies = reply["replies"].as_array().unwrap();
    replies.iter().map(|r| unhex(r.as_str().unwrap())).collect()
}

/// gRPC C-core adds each `:path` it sends to its HPACK table and refers to it from then on, and
/// adds a new `grpc-timeout` on nearly every call, so the table turns over. A v0.3 client's
/// NodeGetId goes to a v1 plugin as NodeGetInfo, a path two octets longer (a v0.1 client's
/// calls, three octets longer, likewise): the splice keeps the plugin's table apart from the
/// client's where the two differ, and the plugin reads every call right — read here off the
/// wire (a tap between gateway and plugin) by an independent HPACK decoder — while the blocks
/// go on as the client's, small, never re-encoded as literals.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c_core_node_get_id_to_a_v1_plugin_keeps_the_plugins_header_table_in_step() {
    use support::h2raw::{Hostile, Tap, HEADERS};
    let backend = Backend::start(Options::new("v1")).await;
    let node_id = v1::node_client::NodeClient::new(backend.channel().await)
        .node_get_info(v1::NodeGetInfoRequest {})
        .await
        .unwrap()
        .into_inner()
        .node_id;
    let tap = Tap::start(&backend.socket, Hostile::Quiet).await;
    let gw = Gateway::start(&tap.socket, "v0.1", &[]).await;
    // A v0.1 client's ControllerGetCapabilities is one call too, on a path three octets longer
    // (`csi` → `csi.v1`).
    let version = Some(v0_1::Version {
        major: 0,
        minor: 1,
        patch: 0,
    });
    let capabilities = v0_1::ControllerGetCapabilitiesRequest { version }.encode_to_vec();
    let calls = [
        ("/csi.v0.Node/NodeGetId", Vec::new()),
        ("/csi.v0.Identity/Probe", Vec::new()),
        ("/csi.v0.Node/NodeGetId", Vec::new()),
        ("/csi.v0.Identity/GetPluginInfo", Vec::new()),
        ("/csi.Controller/ControllerGetCapabilities", capabilities),
    ];
    let count = 800;
    // `localhost`, as the gateway itself sends on a UNIX socket: C-core's own default (the
    // socket path) has the splice re-encode the connection's blocks to give the plugin
    // `localhost`.
    let replies = grpcio_calls(&gw.socket, "localhost", count, &calls).await;
    assert_eq!(replies.len(), count);
    for (n, reply) in replies.iter().enumerate() {
        match calls[n % calls.len()].0 {
            "/csi.v0.Node/NodeGetId" => {
                let id = v0_3::NodeGetIdResponse::decode(&reply[..]).unwrap().node_id;
                assert_eq!(id, node_id, "call {n}");
            }
            "/csi.v0.Identity/GetPluginInfo" => {
                let info = v0_3::GetPluginInfoResponse::decode(&reply[..]).unwrap();
                assert_eq!(info.name, NAME, "call {n}");
            }
            "/csi.Controller/ControllerGetCapabilities" => {
                let r = v0_1::ControllerGetCapabilitiesResponse::decode(&reply[..]).unwrap();
                assert!(!r.capabilities.is_empty(), "call {n}");
            }
            _ => {}
        }
    }
    assert!(gw.log_text().contains("client connection spliced"));
    // The plugin's connection that carried the calls, its request blocks decoded in order.
    let frames = tap.frames();
    let carried = frames
        .iter()
        .filter(|(_, f)| f.kind == HEADERS)
        .map(|(conn, _)| *conn)
        .max()
        .unwrap();
    let mut decoder = loona_hpack::Decoder::new();
    let (mut paths, mut large) = (Vec::new(), 0);
    for (_, f) in frames
        .iter()
        .filter(|(c, f)| *c == carried && f.kind == HEADERS)
    {
        let fields = decoder.decode(&f.payload).unwrap();
        let path = fields.iter().find(|(n, _)| n == b":path").unwrap();
        paths.push(String::from_utf8(path.1.clone()).unwrap());
        large += (f.payload.len() > 64) as usize;
    }
    let expected: Vec<String> = (0..count)
        .map(|n| {
            calls[n % calls.len()]
                .0
                .replace("csi.v0.Node/NodeGetId", "csi.v1.Node/NodeGetInfo")
        })
        .map(|p| {
            p.replace("csi.v0.", "csi.v1.")
                .replace("/csi.C", "/csi.v1.C")
        })
        .collect();
    assert_eq!(paths, expected);
    // C-core's blocks are ~20 octets once its table is warm; re-encoded as literals they would
    // be ~150 (its user-agent alone is 48).
    assert!(
        large < count / 20,
        "{large} of {count} request blocks over 64 octets"
    );
}
