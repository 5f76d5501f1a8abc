//! The connection in-process, through scripted I/O (as h2's `tests/h2-support` mock does): the
//! client's bytes written into one end of an in-memory pipe, the splice on the other, and what
//! it writes back read frame by frame. A spliced connection has a second pipe as its upstream:
//! the test scripts the plugin on it, reading the frames the splice forwards and writing the
//! plugin's replies, so that relayed and translated streams travel exactly as they would on a
//! plugin's socket.
//!
//! The tests drive the connection only through its public constructors and bytes on the wire
//! (never its fields or methods), so that they hold whatever its inside becomes.
//!
//! | file | what |
//! | --- | --- |
//! | `unattached.rs` | a connection without an upstream connection of its own |
//! | `relayed.rs` | calls relayed to the scripted plugin, `:path` rewritten ones among them |
//! | `translated.rs` | calls translated on the connection's own upstream connection |
//! | `per_hop.rs` | SETTINGS, PING and GOAWAY per hop |
//! | `flow.rs` | flow control, limits and the buffer budget |
//! | `deadlines.rs` | call deadlines and the upstream lost or too slow |

use std::path::PathBuf;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

use super::*;
use crate::call::router::Router;
use crate::call::services::Services;
use crate::dialect::Dialect;
use crate::endpoint::Endpoint;
use crate::upstream::{self, Upstream};
use csi_gateway_test_support::h2raw;

mod deadlines;
mod flow;
mod per_hop;
mod relayed;
mod translated;
mod unattached;

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const WAIT: Duration = Duration::from_secs(5);

impl Io for DuplexStream {
    const KIND: &'static str = "test";
}

/// What a gateway shares with its connections, its plugin reached through `upstream`.
fn shared_with(upstream: Arc<Upstream>, limits: Limits) -> Arc<Shared> {
    let dialects = [Dialect::V1, Dialect::V0_3, Dialect::V0_1];
    Arc::new(Shared {
        router: Router::new(&dialects).unwrap(),
        upstream: upstream.clone(),
        store: None,
        staging: None,
        redactor: crate::observe::Redactor::new(Vec::new()),
        limits,
        protection: crate::call::protect::Protection::new(Default::default()),
        services: Services::new(&dialects, upstream, Duration::from_secs(1)).unwrap(),
        node_paths: None,
        resets: Default::default(),
        buffered: crate::call::budget::Budget::new(8 << 20),
    })
}

/// The supervised upstream of a plugin that is not there.
fn nowhere() -> Arc<Upstream> {
    Upstream::spawn(upstream::Settings {
        endpoint: Endpoint::Unix("/nonexistent/csi-gateway-test/plugin.sock".into()),
        dialect: None,
        connect_timeout: Duration::from_millis(100),
        backoff_initial: Duration::from_secs(60),
        backoff_max: Duration::from_secs(60),
        failover: Vec::new(),
        tls: None,
        inline_handles: false,
    })
}

/// What a gateway in front of a plugin that is not there shares with its connections.
fn shared() -> Arc<Shared> {
    shared_with(nowhere(), Limits::default())
}

/// One end of a pipe, read and written frame by frame, its header blocks decoded with a
/// decoder that follows the whole connection's.
struct Wire {
    io: DuplexStream,
    read: BytesMut,
    decoder: headers::Decoder,
}

impl Wire {
    fn new(io: DuplexStream) -> Wire {
        Wire {
            io,
            read: BytesMut::new(),
            decoder: headers::Decoder::default(),
        }
    }

    async fn send_raw(&mut self, bytes: &[u8]) {
        self.io.write_all(bytes).await.unwrap();
    }

    async fn send(&mut self, kind: Kind, flags: u8, stream: u32, payload: &[u8]) {
        let mut out = BytesMut::new();
        frame::put(&mut out, kind, flags, StreamId::new(stream), payload);
        self.send_raw(&out).await;
    }

    /// Reads exactly `bytes.len()` bytes and checks they are `bytes` (the client preface).
    async fn expect_raw(&mut self, bytes: &[u8]) {
        while self.read.len() < bytes.len() {
            let n = tokio::time::timeout(WAIT, self.io.read_buf(&mut self.read))
                .await
                .expect("nothing written in time")
                .unwrap();
            assert_ne!(n, 0, "closed before {bytes:?}");
        }
        assert_eq!(&self.read.split_to(bytes.len())[..], bytes);
    }

    /// The next frame written to this end: its head and payload; `None` once it closed.
    async fn next(&mut self) -> Option<(Head, Vec<u8>)> {
        self.next_within(WAIT)
            .await
            .expect("the splice wrote nothing in time")
    }

    /// The next frame, `Err` if none came within `wait`.
    async fn next_within(&mut self, wait: Duration) -> Result<Option<(Head, Vec<u8>)>, ()> {
        let until = tokio::time::Instant::now() + wait;
        loop {
            if let Some(head) = frame::next(&self.read) {
                if self.read.len() >= 9 + head.len {
                    let whole = self.read.split_to(9 + head.len);
                    return Ok(Some((head, whole[9..].to_vec())));
                }
            }
            let n = tokio::time::timeout_at(until, self.io.read_buf(&mut self.read))
                .await
                .map_err(|_| ())?
                .unwrap_or(0);
            if n == 0 {
                return Ok(None);
            }
        }
    }

    /// The next frame of `kind`, those of other kinds skipped (SETTINGS, WINDOW_UPDATE, …).
    async fn next_of(&mut self, kind: Kind) -> Option<(Head, Vec<u8>)> {
        loop {
            let (head, payload) = self.next().await?;
            if head.kind == kind {
                return Some((head, payload));
            }
        }
    }

    /// The next frame that is not a SETTINGS, PING or WINDOW_UPDATE: the connection's frames
    /// either side may send at any time.
    async fn next_stream_frame(&mut self) -> Option<(Head, Vec<u8>)> {
        loop {
            let (head, payload) = self.next().await?;
            if !matches!(head.kind, Kind::Settings | Kind::Ping | Kind::WindowUpdate) {
                return Some((head, payload));
            }
        }
    }

    async fn reset(&mut self, stream: u32, code: Reason) {
        self.send(Kind::RstStream, 0, stream, &code.to_be_bytes())
            .await;
    }

    /// The next stream frame, which must be an RST_STREAM on `stream`: its code.
    async fn reset_of(&mut self, stream: u32) -> Reason {
        let (h, payload) = self.next_stream_frame().await.expect("RST_STREAM");
        assert_eq!((h.kind, h.stream.get()), (Kind::RstStream, stream));
        code(&h, &payload)
    }

    /// The next RST_STREAM, frames of other kinds before it skipped: its stream and code.
    async fn next_reset(&mut self) -> (u32, Reason) {
        let (h, payload) = self.next_of(Kind::RstStream).await.expect("RST_STREAM");
        (h.stream.get(), code(&h, &payload))
    }

    /// Whether the other end closes within `wait`, frames before it skipped.
    async fn closes_within(&mut self, wait: Duration) -> bool {
        let until = tokio::time::Instant::now() + wait;
        loop {
            let left = until.saturating_duration_since(tokio::time::Instant::now());
            match self.next_within(left).await {
                Ok(None) => return true,
                Ok(Some(_)) => continue,
                Err(()) => return false,
            }
        }
    }

    /// A whole header block on `stream` (HEADERS and its CONTINUATIONs), decoded: its fields,
    /// and whether it ended the stream. Frames of other kinds or streams before it are skipped.
    async fn block(&mut self, stream: u32) -> (Vec<(String, String)>, bool) {
        let (head, mut bytes) = loop {
            let (head, payload) = self.next().await.expect("a header block");
            if head.kind == Kind::Headers && head.stream.get() == stream {
                break (head, payload);
            }
        };
        let range = frame::content(&head, &bytes).unwrap();
        bytes = bytes[range].to_vec();
        let mut end_headers = head.has(frame::END_HEADERS);
        while !end_headers {
            let (next, payload) = self.next().await.expect("a CONTINUATION");
            assert_eq!(
                (next.kind, next.stream.get()),
                (Kind::Continuation, stream),
                "a header block is not interrupted"
            );
            bytes.extend_from_slice(&payload);
            end_headers = next.has(frame::END_HEADERS);
        }
        (self.decode(&bytes), head.has(frame::END_STREAM))
    }

    fn decode(&mut self, block: &[u8]) -> Vec<(String, String)> {
        decode(&mut self.decoder, block)
    }
}

/// The client's end of a connection, the splice running on the other.
struct Client {
    wire: Wire,
    shutdown: watch::Sender<bool>,
}

impl std::ops::Deref for Client {
    type Target = Wire;
    fn deref(&self) -> &Wire {
        &self.wire
    }
}

impl std::ops::DerefMut for Client {
    fn deref_mut(&mut self) -> &mut Wire {
        &mut self.wire
    }
}

impl Client {
    /// A new unattached connection, its preface and SETTINGS sent.
    async fn connect() -> Client {
        let (io, server) = tokio::io::duplex(1 << 20);
        let (shutdown, stop) = watch::channel(false);
        tokio::spawn(Splice::unattached(shared(), None, server, stop).run());
        let mut client = Client {
            wire: Wire::new(io),
            shutdown,
        };
        client.send_raw(PREFACE).await;
        client.send(Kind::Settings, 0, 0, &[]).await;
        client
    }

    /// A request's header block, as literals (no table), ending the stream or not.
    async fn request(&mut self, stream: u32, path: &str, end_stream: bool) {
        self.request_with(stream, path, &[], end_stream).await;
    }

    async fn request_with(&mut self, stream: u32, path: &str, extra: &[(&str, &str)], end: bool) {
        let block = h2raw::request_block(&[], path, extra);
        let flags = frame::END_HEADERS | if end { frame::END_STREAM } else { 0 };
        self.send(Kind::Headers, flags, stream, &block).await;
    }

    /// A unary call: its head, then `message` in one DATA that ends the stream.
    async fn call(&mut self, stream: u32, path: &str, message: &[u8]) {
        self.call_with(stream, path, &[], message).await;
    }

    /// A unary call with `extra` fields in its head (`grpc-timeout`, …).
    async fn call_with(&mut self, stream: u32, path: &str, extra: &[(&str, &str)], message: &[u8]) {
        self.request_with(stream, path, extra, false).await;
        let message = h2raw::message(message);
        self.send(Kind::Data, frame::END_STREAM, stream, &message)
            .await;
    }

    /// A Probe with a `grpc-timeout`, its request the head alone.
    async fn timed_probe(&mut self, stream: u32, timeout: &str) {
        let timeout = [("grpc-timeout", timeout)];
        self.request_with(stream, "/csi.v1.Identity/Probe", &timeout, true)
            .await;
    }

    /// The trailers of `stream` (the block that ends it), frames before them skipped.
    async fn trailers(&mut self, stream: u32) -> Vec<(String, String)> {
        loop {
            let (fields, end) = self.block(stream).await;
            if end {
                return fields;
            }
        }
    }
}

/// The fields of a header block the splice wrote (one decoded on its own: literals, or
/// the static table).
fn fields(block: &[u8]) -> Vec<(String, String)> {
    decode(&mut headers::Decoder::default(), block)
}

fn decode(decoder: &mut headers::Decoder, block: &[u8]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    decoder
        .decode(block, |n, v, _| {
            out.push((
                String::from_utf8_lossy(n).into_owned(),
                String::from_utf8_lossy(v).into_owned(),
            ))
        })
        .unwrap();
    out
}

fn field<'a>(fields: &'a [(String, String)], name: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

/// A GOAWAY's or RST_STREAM's error code.
fn code(head: &Head, payload: &[u8]) -> Reason {
    match head.kind {
        Kind::GoAway => frame::goaway(payload).unwrap().1,
        _ => frame::rst_reason(payload).unwrap(),
    }
}

/// A gRPC reply's head, trailers and message as the plugin writes them: literal fields.
fn block(fields: &[(&str, &str)]) -> Vec<u8> {
    let mut block = Vec::new();
    for (n, v) in fields {
        h2raw::literal(&mut block, n.as_bytes(), v.as_bytes());
    }
    block
}

fn reply_head() -> Vec<u8> {
    block(&[(":status", "200"), ("content-type", "application/grpc")])
}

fn ok_trailers() -> Vec<u8> {
    block(&[("grpc-status", "0")])
}

/// A reference backend serving `dialect` on a socket of its own, the gateway's upstream
/// attached to it: the `Live` a spliced connection is made with is the one the gateway
/// detected there. The connection's upstream pipe is scripted by the test; the backend is only
/// what the gateway reached to learn its plugin (and what calls the gateway answers itself
/// reach).
struct Backend {
    live: Arc<Live>,
    upstream: Arc<Upstream>,
    _embedded: crate::embedded::Embedded,
    _dir: tempfile::TempDir,
}

impl Backend {
    async fn start(dialect: Dialect, connect_timeout: Duration) -> Backend {
        let dir = tempfile::tempdir().unwrap();
        let socket: PathBuf = dir.path().join("plugin.sock");
        let embedded = crate::embedded::start(dialect, &socket, &dir.path().join("data"))
            .await
            .unwrap();
        let upstream = Upstream::spawn(upstream::Settings {
            endpoint: Endpoint::Unix(socket),
            dialect: None,
            connect_timeout,
            backoff_initial: Duration::from_millis(20),
            backoff_max: Duration::from_millis(100),
            failover: Vec::new(),
            tls: None,
            inline_handles: false,
        });
        let live = upstream.ready(WAIT).await.unwrap();
        assert_eq!(live.detected.dialect, dialect);
        Backend {
            live,
            upstream,
            _embedded: embedded,
            _dir: dir,
        }
    }
}

/// How a spliced connection is set up.
struct Setup {
    dialect: Dialect,
    limits: Limits,
    connect_timeout: Duration,
    /// The plugin's SETTINGS.
    plugin_settings: Vec<(u16, u32)>,
    /// The gateway's keepalive PINGs to the plugin (`Splice::keepalive`).
    keepalive: Option<Keepalive>,
}

impl Default for Setup {
    fn default() -> Setup {
        Setup {
            dialect: Dialect::V1,
            limits: Limits::default(),
            connect_timeout: Duration::from_secs(5),
            plugin_settings: Vec::new(),
            keepalive: None,
        }
    }
}

/// A spliced connection: the client's end, the scripted plugin's end, and what they share.
struct Spliced {
    client: Client,
    plugin: Wire,
    shared: Arc<Shared>,
    backend: Backend,
}

impl Spliced {
    /// A connection to a v1 plugin, its SETTINGS exchanged both ways and acknowledged.
    async fn open() -> Spliced {
        Spliced::open_with(Setup::default()).await
    }

    /// A connection to a v1 plugin, the gateway's limits `limits`.
    async fn with_limits(limits: Limits) -> Spliced {
        Spliced::open_with(Setup {
            limits,
            ..Setup::default()
        })
        .await
    }

    async fn open_with(setup: Setup) -> Spliced {
        let settings = setup.plugin_settings.clone();
        let mut s = Spliced::started(setup).await;
        s.plugin_answers_settings(&settings).await;
        s.client_acks_settings().await;
        s
    }

    /// The connection with the client's preface and SETTINGS sent, and nothing of the
    /// plugin's yet: the plugin reads the client preface and the gateway's SETTINGS.
    async fn started(setup: Setup) -> Spliced {
        let backend = Backend::start(setup.dialect, setup.connect_timeout).await;
        let shared = shared_with(backend.upstream.clone(), setup.limits);
        let (client_io, client_end) = tokio::io::duplex(1 << 20);
        let (plugin_io, plugin_end) = tokio::io::duplex(1 << 20);
        let (shutdown, stop) = watch::channel(false);
        let splice = Splice::new(
            shared.clone(),
            backend.live.clone(),
            client_end,
            plugin_end,
            stop,
        )
        .keepalive(setup.keepalive);
        tokio::spawn(splice.run());
        let mut client = Client {
            wire: Wire::new(client_io),
            shutdown,
        };
        client.send_raw(PREFACE).await;
        client.send(Kind::Settings, 0, 0, &[]).await;
        let mut plugin = Wire::new(plugin_io);
        plugin.expect_raw(PREFACE).await;
        let (head, _) = plugin.next().await.expect("the gateway's SETTINGS");
        assert_eq!((head.kind, head.flags), (Kind::Settings, 0));
        Spliced {
            client,
            plugin,
            shared,
            backend,
        }
    }

    /// The plugin's SETTINGS, then its ACK of the gateway's; the client gets its server
    /// preface from them.
    async fn plugin_answers_settings(&mut self, values: &[(u16, u32)]) {
        let mut payload = BytesMut::new();
        frame::put_settings(&mut payload, values);
        self.plugin.send_raw(&payload).await;
        self.plugin.send(Kind::Settings, frame::ACK, 0, &[]).await;
    }

    /// The client reads the server preface and acknowledges it, then reads the ACK of its
    /// own SETTINGS; the plugin reads the ACK of its SETTINGS.
    async fn client_acks_settings(&mut self) {
        let (head, _) = self.client.next().await.expect("the server preface");
        assert_eq!((head.kind, head.flags), (Kind::Settings, 0));
        self.client.send(Kind::Settings, frame::ACK, 0, &[]).await;
        let (head, _) = self.client.next_of(Kind::Settings).await.unwrap();
        assert!(head.has(frame::ACK));
        let (head, _) = self.plugin.next_of(Kind::Settings).await.unwrap();
        assert!(head.has(frame::ACK));
    }

    /// The plugin's next request header block: its stream, fields and whether it ended the
    /// stream.
    async fn plugin_request(&mut self) -> (u32, Vec<(String, String)>, bool) {
        let (head, payload) = self.plugin.next_stream_frame().await.expect("a request");
        assert_eq!(head.kind, Kind::Headers, "a request's head");
        assert!(head.has(frame::END_HEADERS));
        let range = frame::content(&head, &payload).unwrap();
        let fields = self.plugin.decode(&payload[range]);
        (head.stream.get(), fields, head.has(frame::END_STREAM))
    }

    /// The plugin's next DATA frame: its stream, payload and whether it ended the stream.
    async fn plugin_data(&mut self) -> (u32, Vec<u8>, bool) {
        let (head, payload) = self.plugin.next_stream_frame().await.expect("DATA");
        assert_eq!(head.kind, Kind::Data, "{head:?}");
        (head.stream.get(), payload, head.has(frame::END_STREAM))
    }

    /// The plugin answers `stream` with `message` and status OK.
    async fn plugin_replies(&mut self, stream: u32, message: &[u8]) {
        let p = &mut self.plugin;
        p.send(Kind::Headers, frame::END_HEADERS, stream, &reply_head())
            .await;
        p.send(Kind::Data, 0, stream, &h2raw::message(message))
            .await;
        let end = frame::END_HEADERS | frame::END_STREAM;
        p.send(Kind::Headers, end, stream, &ok_trailers()).await;
    }

    /// A relayed Probe on `stream`, taken by the plugin.
    async fn probe(&mut self, stream: u32) {
        self.client
            .call(stream, "/csi.v1.Identity/Probe", &[])
            .await;
        let (id, fields, _) = self.plugin_request().await;
        assert_eq!(
            (id, field(&fields, ":path")),
            (stream, Some("/csi.v1.Identity/Probe"))
        );
        let (id, _, end) = self.plugin_data().await;
        assert_eq!((id, end), (stream, true));
    }
}

/// A v0.3 client's call translated for a v1 plugin (as NodeGetInfo).
const NODE_GET_ID: &str = "/csi.v0.Node/NodeGetId";

impl Spliced {
    /// A NodeGetId call with `extra` fields in its head, taken by the plugin as NodeGetInfo:
    /// its stream on the upstream.
    async fn node_get_id(&mut self, stream: u32, extra: &[(&str, &str)]) -> u32 {
        self.client.call_with(stream, NODE_GET_ID, extra, &[]).await;
        let (id, fields, end) = self.plugin_request().await;
        assert!(!end);
        assert_eq!(field(&fields, ":path"), Some("/csi.v1.Node/NodeGetInfo"));
        let (data_id, data, end) = self.plugin_data().await;
        assert_eq!((data_id, end), (id, true));
        assert_eq!(message_of(&data), b"", "the empty request as it came");
        id
    }

    /// The plugin's reply on `id` (a translated call's) up to trailers it begins and does not
    /// end: a header block the gateway keeps from the client, left open.
    async fn kept_block_left_open(&mut self, id: u32) {
        let p = &mut self.plugin;
        p.send(Kind::Headers, frame::END_HEADERS, id, &reply_head())
            .await;
        p.send(Kind::Data, 0, id, &h2raw::message(b"\x0a\x01n"))
            .await;
        p.send(Kind::Headers, frame::END_STREAM, id, &ok_trailers()[..2])
            .await;
    }
}

/// The reply message (after its 5-octet prefix) in a DATA payload holding one whole message.
fn message_of(payload: &[u8]) -> &[u8] {
    assert!(payload.len() >= 5, "{payload:?}");
    let len = u32::from_be_bytes(payload[1..5].try_into().unwrap()) as usize;
    assert_eq!(payload.len(), 5 + len, "one whole message");
    &payload[5..]
}
